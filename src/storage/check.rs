//! Verifies every index against the entries (and rebuilds them).
//!
//! The expected rows come from [`super::keys::index_keys`], the same function the
//! writer uses, so a mismatch means a write path forgot a row, not that two
//! derivations disagree.

use std::collections::{BTreeMap, BTreeSet};

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
/// A memory's terms row, decoded: its length and each term with its frequency.
type TermsRow = (u32, Vec<(u64, u32)>);

#[derive(Default)]
struct Expected {
    ids: BTreeMap<String, u64>,
    docs: BTreeMap<u64, DocInfo>,
    postings: BTreeMap<(String, u64), (u32, u32)>,
    terms: BTreeMap<String, u64>,
    fact_tokens: BTreeSet<(String, String, u64)>,
    fact_terms: BTreeMap<(String, String), u64>,
    fact_cards: BTreeMap<(String, u64), super::keys::FactCard>,
    prefixes: BTreeSet<Key4>,
    attributes: BTreeSet<Key4>,
    entities: BTreeSet<(String, u64)>,
    user_terms: BTreeMap<(String, u64), TermsRow>,
    importance: BTreeSet<(String, u8, i64, u64)>,
    layer_order: BTreeSet<(String, u64)>,
    docs_count: u64,
    total_len: u64,
    max_docno: Option<u64>,
}

fn diff<T: Ord + std::fmt::Debug>(
    name: &str,
    want: &BTreeSet<T>,
    got: &BTreeSet<T>,
    out: &mut Vec<String>,
) {
    for x in want.difference(got).take(20) {
        out.push(format!("{name}: missing row {x:?}"));
    }
    for x in got.difference(want).take(20) {
        out.push(format!("{name}: stray row {x:?}"));
    }
}

fn diff_map<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
    name: &str,
    want: &BTreeMap<K, V>,
    got: &BTreeMap<K, V>,
    out: &mut Vec<String>,
) {
    let mut n = 0;
    for (k, v) in want {
        match got.get(k) {
            None => out.push(format!("{name}: missing {k:?}")),
            Some(g) if g != v => out.push(format!("{name}: {k:?} is {g:?}, expected {v:?}")),
            _ => continue,
        }
        n += 1;
        if n > 20 {
            return;
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)).take(20) {
        out.push(format!("{name}: stray {k:?}"));
    }
}

/// Checks every index of the snapshot against its entries. `progress` is called with
/// the number of entries read so far.
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
                exp.postings.insert((t.clone(), docno), (*tf, keys.doc_len));
                *exp.terms.entry(t.clone()).or_default() += 1;
            }
            exp.docs_count += 1;
            exp.total_len += u64::from(keys.doc_len);
            let part = super::schema::fact_partition(e.user_id.as_deref(), &e.domain);
            for t in &keys.fact_tokens {
                exp.fact_tokens.insert((part.clone(), t.clone(), docno));
                *exp.fact_terms.entry((part.clone(), t.clone())).or_default() += 1;
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
            exp.user_terms.insert((user.clone(), docno), super::doc_terms::expected(&keys));
            exp.importance.insert((
                e.layer.clone(),
                e.importance,
                time::to_micros(&e.created_at),
                docno,
            ));
            exp.layer_order.insert((e.layer.clone(), docno));
        }
    }
    progress(report.entries);
    let p = &mut report.problems;
    let mut rows = 0u64;

    let mut got_ids = BTreeMap::new();
    for row in r.ids()?.range::<&str>(..)? {
        let (k, v) = row?;
        got_ids.insert(k.value().to_owned(), v.value());
        rows += 1;
    }
    diff_map("ids", &exp.ids, &got_ids, p);
    let mut got_docs = BTreeMap::new();
    for row in r.docs.range::<u64>(..)? {
        let (k, v) = row?;
        got_docs.insert(k.value(), super::decode::<DocInfo>(v.value(), "docinfo")?);
        rows += 1;
    }
    diff_map("docs", &exp.docs, &got_docs, p);
    // The superseded bitmap: one bit per superseded memory, and no other.
    let want_sup: BTreeSet<u64> =
        exp.docs.iter().filter(|(_, i)| i.superseded).map(|(d, _)| *d).collect();
    let got_sup: BTreeSet<u64> = super::superseded::all(r.superseded()?)?.into_iter().collect();
    rows += redb::ReadableTableMetadata::len(r.superseded()?)?;
    diff("superseded", &want_sup, &got_sup, p);
    let mut got_post = BTreeMap::new();
    // Per term: the last docno of its blocks so far, and the exact Pareto
    // frontier of their (tf, length) pairs.
    let mut seen: BTreeMap<String, (u64, Vec<(u32, u32)>)> = BTreeMap::new();
    let mut infos: BTreeMap<String, super::postings::TermInfo> = BTreeMap::new();
    for row in r.postings.range::<(&str, u64)>(..)? {
        let (k, v) = row?;
        let (t, first) = k.value();
        rows += 1;
        if first == super::postings::INFO {
            match super::postings::TermInfo::decode(v.value()) {
                Ok(info) => {
                    infos.insert(t.to_owned(), info);
                }
                Err(e) => p.push(format!("terms: {t:?}: {e}")),
            }
            continue;
        }
        let h = match super::postings::header(first, v.value()) {
            Ok(h) => h,
            Err(e) => {
                p.push(format!("postings: block ({t:?}, {first}): {e}"));
                continue;
            }
        };
        let list = match super::postings::decode_block(first, v.value()) {
            Ok(list) => list,
            Err(e) => {
                p.push(format!("postings: block ({t:?}, {first}): {e}"));
                continue;
            }
        };
        if list.first().map(|q| q.docno) != Some(first) {
            p.push(format!("postings: block ({t:?}, {first}) does not start at its key"));
        }
        let (last, frontier) = match seen.entry(t.to_owned()) {
            std::collections::btree_map::Entry::Vacant(e) => e.insert((h.last, Vec::new())),
            std::collections::btree_map::Entry::Occupied(e) => {
                let at = e.into_mut();
                if at.0 >= first {
                    p.push(format!("postings: block ({t:?}, {first}) overlaps the previous one"));
                }
                at
            }
        };
        *last = h.last;
        for q in &list {
            if !h.impacts.dominates(q.tf, q.len) {
                p.push(format!("postings: ({t:?}, {}) exceeds its block's bound", q.docno));
            }
            add_to_frontier(frontier, q.tf, q.len);
            got_post.insert((t.to_owned(), q.docno), (q.tf, q.len));
        }
    }
    // The postings tail: above every block, counted in its terms' frequencies.
    let block_max = seen.values().map(|(last, _)| *last).max();
    let mut tail_df: BTreeMap<String, u64> = BTreeMap::new();
    for (t, tt) in &r.tail.terms() {
        rows += tt.postings.len() as u64;
        for q in &tt.postings {
            if block_max.is_some_and(|m| q.docno <= m) {
                p.push(format!("postings tail: ({t:?}, {}) is not above the blocks", q.docno));
            }
            if got_post.insert((t.to_owned(), q.docno), (q.tf, q.len)).is_some() {
                p.push(format!("postings tail: ({t:?}, {}) is also in a block", q.docno));
            }
        }
        tail_df.insert(t.to_owned(), tt.postings.len() as u64);
    }
    diff_map("postings", &exp.postings, &got_post, p);
    let mut got_terms = BTreeMap::new();
    for (t, info) in infos {
        // The term's bound covers each of its postings. (A block's own bound
        // may be looser than the term's: past four pairs it is coarsened to
        // one, the most frequent and shortest of its postings together, which
        // no single posting need reach.)
        let loose = seen
            .get(&t)
            .into_iter()
            .flat_map(|(_, frontier)| frontier)
            .any(|&(tf, len)| !info.impacts.dominates(tf, len));
        if loose {
            p.push(format!("terms: {t:?}'s bound is below one of its postings"));
        }
        let df = info.df + tail_df.remove(&t).unwrap_or(0);
        got_terms.insert(t, df);
    }
    got_terms.extend(tail_df);
    diff_map("terms", &exp.terms, &got_terms, p);
    let mut got_ft = BTreeMap::new();
    for row in r.fact_terms()?.range::<(&str, &str)>(..)? {
        let (k, v) = row?;
        let (a, b) = k.value();
        got_ft.insert((a.to_owned(), b.to_owned()), v.value());
        rows += 1;
    }
    diff_map("fact_terms", &exp.fact_terms, &got_ft, p);
    let mut got_cards = BTreeMap::new();
    for row in r.fact_cards()?.range::<(&str, u64)>(..)? {
        let (k, v) = row?;
        let (part, docno) = k.value();
        rows += 1;
        match super::decode::<super::keys::FactCard>(v.value(), "fact card") {
            Ok(card) => {
                got_cards.insert((part.to_owned(), docno), card);
            }
            Err(e) => p.push(format!("fact_cards: ({part:?}, {docno}): {e}")),
        }
    }
    diff_map("fact_cards", &exp.fact_cards, &got_cards, p);

    macro_rules! pairs {
        ($table:expr, $name:literal, $want:expr) => {{
            let mut got = BTreeSet::new();
            for row in $table.range::<(&str, u64)>(..)? {
                let (k, _) = row?;
                let (a, b) = k.value();
                got.insert((a.to_owned(), b));
                rows += 1;
            }
            diff($name, $want, &got, p);
        }};
    }
    let mut got_ftok = BTreeSet::new();
    for row in r.fact_tokens()?.range::<(&str, &str, u64)>(..)? {
        let (k, _) = row?;
        let (a, b, c) = k.value();
        got_ftok.insert((a.to_owned(), b.to_owned(), c));
        rows += 1;
    }
    diff("fact_tokens", &exp.fact_tokens, &got_ftok, p);
    pairs!(r.entities()?, "entities", &exp.entities);
    // Owners marked rowless have none (`storage::doc_terms`).
    let mut rowless = std::collections::BTreeSet::new();
    for row in r.rowless_owners()?.range::<&str>(..)? {
        rowless.insert(row?.0.value().to_owned());
        rows += 1;
    }
    exp.user_terms.retain(|(user, _), _| !rowless.contains(user));
    let mut got_terms = BTreeMap::new();
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
            Ok(row) => {
                got_terms.insert(key, row);
            }
            Err(e) => p.push(format!("user_terms: row {key:?}: {e}")),
        }
    }
    diff_map("user_terms", &exp.user_terms, &got_terms, p);
    pairs!(r.layer_order()?, "layer_order", &exp.layer_order);
    macro_rules! quads {
        ($table:expr, $name:literal, $want:expr) => {{
            let mut got = BTreeSet::new();
            for row in $table.range::<(&str, &str, &str, u64)>(..)? {
                let (k, _) = row?;
                let (a, b, c, d) = k.value();
                got.insert((a.to_owned(), b.to_owned(), c.to_owned(), d));
                rows += 1;
            }
            diff($name, $want, &got, p);
        }};
    }
    quads!(r.prefixes()?, "fact_prefixes", &exp.prefixes);
    quads!(r.attributes()?, "fact_attributes", &exp.attributes);
    let mut got_imp = BTreeSet::new();
    for row in r.importance()?.range::<(&str, u8, i64, u64)>(..)? {
        let (k, _) = row?;
        let (a, b, c, d) = k.value();
        got_imp.insert((a.to_owned(), b, c, d));
        rows += 1;
    }
    diff("importance", &exp.importance, &got_imp, p);

    for (docno, len) in crate::read::vector::stored_docnos(r)? {
        rows += 1;
        if !exp.docs.contains_key(&docno) {
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
    report.rows = rows;
    Ok(report)
}

/// Adds `(tf, len)` to an exact Pareto frontier (no pair with a higher tf and
/// a shorter length than another): nothing when a pair dominates it, else it
/// replaces the pairs it dominates.
fn add_to_frontier(frontier: &mut Vec<(u32, u32)>, tf: u32, len: u32) {
    if frontier.iter().any(|&(t, l)| t >= tf && l <= len) {
        return;
    }
    frontier.retain(|&(t, l)| !(t <= tf && l >= len));
    frontier.push((tf, len));
}
