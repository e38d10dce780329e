//! Verifies every index against the entries, and the graph's indexes against
//! its edges (and rebuilds them).
//!
//! The expected rows come from [`super::keys::index_keys`], the same function the
//! writer uses, so a mismatch means a write path forgot a row, not that two
//! derivations disagree.

mod diff;
mod postings;

use std::collections::{BTreeMap, BTreeSet};

use diff::SortedDiff;

use super::docinfo::DocInfo;
use super::keys::index_keys;
use super::{CorpusStats, Reader};
use crate::error::Result;
use crate::model::time;

/// What [`verify`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Entries examined.
    pub entries: u64,
    /// Index rows examined.
    pub rows: u64,
    /// One line per mismatch.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// True when nothing is wrong.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

type Key4 = (String, String, String, u64);

/// A memory's terms row, summed up: its length, its number of terms, and a
/// hash of the terms with their frequencies (so `check` holds 16 bytes per
/// row, not the row).
#[derive(Debug, PartialEq, Eq)]
struct RowPrint {
    len: u32,
    terms: usize,
    hash: u64,
}

impl RowPrint {
    fn new((len, terms): (u32, Vec<(u64, u32)>)) -> Self {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        terms.hash(&mut h);
        Self { len, terms: terms.len(), hash: h.finish() }
    }
}

#[derive(Default)]
struct Expected {
    ids: BTreeMap<String, u64>,
    docs: BTreeMap<u64, DocInfo>,
    postings: postings::Collect,
    fact_tokens: BTreeSet<(String, String, u64)>,
    fact_cards: BTreeMap<(String, u64), super::keys::FactCard>,
    prefixes: BTreeSet<Key4>,
    attributes: BTreeSet<Key4>,
    entities: BTreeSet<(String, u64)>,
    user_terms: BTreeMap<(String, u64), RowPrint>,
    importance: BTreeSet<(String, u8, i64, u64)>,
    layer_order: BTreeSet<(String, u64)>,
    scopes: BTreeSet<(String, u64)>,
    docs_count: u64,
    total_len: u64,
    max_docno: Option<u64>,
}

/// A stored `(text, docno)` key, owned.
fn own2((a, b): (&str, u64)) -> (String, u64) {
    (a.to_owned(), b)
}

/// A stored fact-token key, owned.
fn own3((a, b, c): (&str, &str, u64)) -> (String, String, u64) {
    (a.to_owned(), b.to_owned(), c)
}

/// A stored fact-prefix or fact-attribute key, owned.
fn own4((a, b, c, d): (&str, &str, &str, u64)) -> Key4 {
    (a.to_owned(), b.to_owned(), c.to_owned(), d)
}

/// A stored importance key, owned.
fn own_importance((a, b, c, d): (&str, u8, i64, u64)) -> (String, u8, i64, u64) {
    (a.to_owned(), b, c, d)
}

/// The rows of a key-only set as `(key, ())`, for [`SortedDiff::set`].
fn keyed<K>(set: BTreeSet<K>) -> impl Iterator<Item = (K, ())> {
    set.into_iter().map(|k| (k, ()))
}

/// Checks the graph's indexes against its edges: the rows the writer derives
/// from each edge ([`super::graph::EdgeRecord::adj_keys`] and `active_key`),
/// and no other rows. Returns the index rows read.
fn graph(r: &Reader, p: &mut Vec<String>) -> Result<u64> {
    use super::schema::{GRAPH_ACTIVE, GRAPH_ADJ, GRAPH_EDGES};
    let mut want_adj = BTreeSet::new();
    let mut want_active = BTreeSet::new();
    for row in r.txn().open_table(GRAPH_EDGES)?.range::<u64>(..)? {
        let (k, v) = row?;
        let seq = k.value();
        let e: super::graph::EdgeRecord = match super::decode(v.value(), "graph edge") {
            Ok(e) => e,
            Err(err) => {
                p.push(format!("graph_edges: edge {seq}: {err}"));
                continue;
            }
        };
        want_adj.extend(e.adj_keys(seq));
        if let Some((s, t, r, seq)) = e.active_key(seq) {
            want_active.insert((s.to_owned(), t.to_owned(), r.to_owned(), seq));
        }
    }
    let mut rows = 0u64;
    let mut adj = SortedDiff::set("graph_adj", keyed(want_adj));
    for row in r.txn().open_table(GRAPH_ADJ)?.range::<(&str, u64)>(..)? {
        adj.got(own2(row?.0.value()), (), p);
        rows += 1;
    }
    adj.finish(p);
    let mut active = SortedDiff::set("graph_active", keyed(want_active));
    for row in r.txn().open_table(GRAPH_ACTIVE)?.range::<(&str, &str, &str, u64)>(..)? {
        active.got(own4(row?.0.value()), (), p);
        rows += 1;
    }
    active.finish(p);
    Ok(rows)
}

/// Checks every index of the snapshot against its entries. `progress` is called with
/// the work done so far: the entries read, then those and the index rows compared
/// (the whole is about the entry count plus [`crate::StoreStats::index_rows`]).
///
/// The expected rows are derived from the entries and held (the postings
/// packed to 16 bytes each); the stored rows are read in key order and
/// compared one at a time, never held.
pub fn verify(r: &Reader, mut progress: impl FnMut(u64)) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut exp = Expected::default();
    for (layer, domain) in r.entry_tables()? {
        for (docno, e) in r.stored_table_entries(&layer, &domain)? {
            report.entries += 1;
            if report.entries % 10_000 == 0 {
                progress(report.entries);
            }
            if e.layer != layer || e.domain != domain {
                report.problems.push(format!(
                    "entry {} sits in table {layer}:{domain} but says {}:{}",
                    e.id, e.layer, e.domain
                ));
            }
            exp.max_docno = exp.max_docno.max(Some(docno));
            let context = r.context()?.get(docno)?.map(|v| v.value().to_owned());
            let keys = index_keys(&e, r.profile(), context.as_deref());
            if exp.ids.insert(e.id.clone(), docno).is_some() {
                report.problems.push(format!("id {} is stored twice", e.id));
            }
            exp.docs.insert(docno, DocInfo::from_entry(&e, keys.doc_len));
            for (t, tf) in &keys.tokens {
                exp.postings.add(t, docno, *tf)?;
            }
            exp.docs_count += 1;
            exp.total_len += u64::from(keys.doc_len);
            let part = super::schema::fact_partition(e.user_id.as_deref(), &e.domain);
            for t in &keys.fact_tokens {
                exp.fact_tokens.insert((part.clone(), t.clone(), docno));
            }
            if let Some(card) = keys.card.clone() {
                exp.fact_cards.insert((part.clone(), docno), card);
            }
            let user = e.user_id.clone().unwrap_or_default();
            for s in &keys.slots {
                exp.prefixes.insert((s.clone(), user.clone(), e.domain.clone(), docno));
            }
            for a in &keys.attributes {
                exp.attributes.insert((a.clone(), user.clone(), e.domain.clone(), docno));
            }
            for en in &keys.entities {
                exp.entities.insert((en.clone(), docno));
            }
            let row = RowPrint::new(super::doc_terms::expected(&keys));
            exp.user_terms.insert((user.clone(), docno), row);
            exp.importance.insert((
                e.layer.clone(),
                e.importance,
                time::to_micros(&e.created_at),
                docno,
            ));
            exp.layer_order.insert((e.layer.clone(), docno));
            for scope in &e.scope {
                exp.scopes.insert((scope.clone(), docno));
            }
        }
    }
    progress(report.entries);
    let entries = report.entries;
    let p = &mut report.problems;
    let mut rows = 0u64;

    let mut ids = SortedDiff::map("ids", std::mem::take(&mut exp.ids));
    for row in r.ids()?.range::<&str>(..)? {
        let (k, v) = row?;
        ids.got(k.value().to_owned(), v.value(), p);
        rows += 1;
    }
    ids.finish(p);
    progress(entries + rows);
    // The postings and term rows (each posting's length is its memory's).
    // Each memory's length, looked up once per posting (a hash map, not the
    // ordered map of records), and for the vectors' check below.
    let lens: std::collections::HashMap<u64, u32> =
        exp.docs.iter().map(|(d, info)| (*d, info.doc_len)).collect();
    let doc_len = |docno: u64| lens.get(&docno).copied();
    let expected = std::mem::take(&mut exp.postings).sort();
    let mut at = |n: u64| progress(entries + rows + n);
    rows += postings::compare(r, expected, &doc_len, &mut at, p)?;
    // The bitmaps: one bit per memory its record marks, and no other.
    for (def, marked) in &super::bitmap::BITMAPS {
        let table = &r.txn().open_table(*def)?;
        let name = redb::TableHandle::name(def);
        let want: BTreeSet<u64> =
            exp.docs.iter().filter(|(_, i)| marked(i)).map(|(d, _)| *d).collect();
        let mut diff = SortedDiff::set(name, keyed(want));
        for docno in super::bitmap::all(table)? {
            diff.got(docno, (), p);
        }
        diff.finish(p);
        rows += redb::ReadableTableMetadata::len(table)?;
    }
    let mut docs = SortedDiff::map("docs", std::mem::take(&mut exp.docs));
    for row in r.docs.range::<u64>(..)? {
        let (k, v) = row?;
        docs.got(k.value(), super::decode::<DocInfo>(v.value(), "docinfo")?, p);
        rows += 1;
    }
    docs.finish(p);
    progress(entries + rows);
    let mut cards = SortedDiff::map("fact_cards", std::mem::take(&mut exp.fact_cards));
    for row in r.fact_cards()?.range::<(&str, u64)>(..)? {
        let (k, v) = row?;
        let (part, docno) = k.value();
        rows += 1;
        match super::decode::<super::keys::FactCard>(v.value(), "fact card") {
            Ok(card) => cards.got((part.to_owned(), docno), card, p),
            Err(e) => p.push(format!("fact_cards: ({part:?}, {docno}): {e}")),
        }
    }
    cards.finish(p);
    progress(entries + rows);

    // A key-only table against its expected set, the stored keys made owned
    // by `$own`.
    macro_rules! set_rows {
        ($table:expr, $key:ty, $name:literal, $want:expr, $own:expr) => {{
            let mut d = SortedDiff::set($name, keyed(std::mem::take(&mut $want)));
            for row in $table.range::<$key>(..)? {
                d.got($own(row?.0.value()), (), p);
                rows += 1;
            }
            d.finish(p);
            progress(entries + rows);
        }};
    }
    set_rows!(r.fact_tokens()?, (&str, &str, u64), "fact_tokens", exp.fact_tokens, own3);
    set_rows!(r.entities()?, (&str, u64), "entities", exp.entities, own2);
    // Owners marked rowless have none (`storage::doc_terms`).
    let mut rowless = std::collections::BTreeSet::new();
    for row in r.rowless_owners()?.range::<&str>(..)? {
        rowless.insert(row?.0.value().to_owned());
        rows += 1;
    }
    // Nor have memories in the postings tail, until it is merged.
    let mut in_tail = std::collections::HashSet::new();
    for row in r.posting_tail()?.range::<u64>(..)? {
        in_tail.insert(row?.0.value());
    }
    exp.user_terms.retain(|(user, d), _| !rowless.contains(user) && !in_tail.contains(d));
    let mut user_terms = SortedDiff::map("user_terms", std::mem::take(&mut exp.user_terms));
    for row in r.user_terms()?.range::<(&str, u64)>(..)? {
        let (k, v) = row?;
        let (user, docno) = k.value();
        rows += 1;
        let key = (user.to_owned(), docno);
        let row = super::doc_terms::DocTerms::parse(v.value()).and_then(|d| {
            let len = d.len;
            d.collect().map(|terms| (len, terms))
        });
        match row {
            Ok(row) => user_terms.got(key, RowPrint::new(row), p),
            Err(e) => p.push(format!("user_terms: row {key:?}: {e}")),
        }
    }
    user_terms.finish(p);
    progress(entries + rows);
    set_rows!(r.layer_order()?, (&str, u64), "layer_order", exp.layer_order, own2);
    set_rows!(r.scopes()?, (&str, u64), "scopes", exp.scopes, own2);
    set_rows!(r.prefixes()?, (&str, &str, &str, u64), "fact_prefixes", exp.prefixes, own4);
    set_rows!(r.attributes()?, (&str, &str, &str, u64), "fact_attributes", exp.attributes, own4);
    set_rows!(r.importance()?, (&str, u8, i64, u64), "importance", exp.importance, own_importance);

    rows += graph(r, p)?;
    progress(entries + rows);

    for (docno, len) in crate::read::vector::stored_docnos(r)? {
        rows += 1;
        if !lens.contains_key(&docno) {
            p.push(format!("embeddings: stray vector of docno {docno} (no such entry)"));
        } else if len == 0 || len % 4 != 0 {
            p.push(format!("embeddings: vector of docno {docno} is {len} bytes"));
        }
    }
    let stats: CorpusStats = r.stats();
    if stats.docs != exp.docs_count || stats.total_len != exp.total_len {
        p.push(format!(
            "corpus stats say {} docs / {} tokens, entries give {} / {}",
            stats.docs, stats.total_len, exp.docs_count, exp.total_len
        ));
    }
    if let Some(m) = exp.max_docno
        && stats.next_docno <= m
    {
        p.push(format!("next docno {} is not above the largest docno {m}", stats.next_docno));
    }
    progress(entries + rows);
    report.rows = rows;
    Ok(report)
}
