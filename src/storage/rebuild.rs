//! Rebuilding derived state, and the all-or-nothing "clear, then load" transaction.
//!
//! `Store::rebuild_indexes` (behind `Memory::reindex` and `soulctl reindex`) drops
//! every index table and re-derives it from the entry tables with
//! [`super::keys::index_keys`], the function the writer and the check use, in one
//! transaction. `Store::write_cleared` runs a closure on a store emptied inside the
//! same transaction (restore with `replace`): a failure leaves the old store intact.

use redb::{ReadableTable, TableHandle, WriteTransaction};

use super::codec::decode;
use super::keys::index_keys;
use super::schema::{self, *};
use super::writer::Unchanged;
use super::{Store, Writer, meta_keys};
use crate::error::Result;
use crate::memory::Memory;
use crate::model::MemoryEntry;

/// What [`Memory::reindex`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RebuildReport {
    /// Entries read and indexed.
    pub entries: u64,
    /// Entry tables read.
    pub tables: u64,
    /// Entries that could not be indexed as they are (an id stored twice, an entry in
    /// the wrong table), or whose access metadata could not be read from their
    /// compact record (kept as the entry holds it), and graph edges that could
    /// not be decoded (left unindexed), one line each. They stay in their tables.
    pub problems: Vec<String>,
}

/// Meta rows that survive a clear: they describe the file, not its contents.
const KEPT_META: [&str; 3] = [meta_keys::SCHEMA, meta_keys::TOKENIZER, meta_keys::PROFILE];

fn delete_index_tables(txn: &WriteTransaction) -> Result<()> {
    txn.delete_table(IDS)?;
    txn.delete_table(DOCS)?;
    txn.delete_table(POSTINGS)?;
    txn.delete_table(FACT_TOKENS)?;
    txn.delete_table(FACT_TERMS)?;
    txn.delete_table(FACT_CARDS)?;
    txn.delete_table(PREFIXES)?;
    txn.delete_table(ATTRIBUTES)?;
    txn.delete_table(ENTITIES)?;
    txn.delete_table(USERS)?;
    txn.delete_table(USER_TERMS)?;
    txn.delete_table(ROWLESS)?;
    txn.delete_table(IMPORTANCE)?;
    txn.delete_table(LAYER_ORDER)?;
    txn.delete_table(SCOPES)?;
    txn.delete_table(POSTING_TAIL)?;
    for (bitmap, _) in super::bitmap::BITMAPS {
        txn.delete_table(bitmap)?;
    }
    txn.open_table(META)?.remove(meta_keys::TAIL_VERSION)?;
    Ok(())
}

/// Deletes every table but `meta`, and every meta row but the schema version,
/// tokenizer version and profile; then recreates the empty tables and gives
/// the store a new epoch of its kept key sets (`storage::key_sets`).
fn clear_all(txn: &WriteTransaction, profile: crate::Profile) -> Result<()> {
    let handles: Vec<_> = txn.list_tables()?.filter(|h| h.name() != "meta").collect();
    for h in handles {
        txn.delete_table(h)?;
    }
    {
        let mut meta = txn.open_table(META)?;
        let mut drop_keys = Vec::new();
        for row in meta.range::<&str>(..)? {
            let (k, _) = row?;
            let k = k.value();
            if !KEPT_META.contains(&k) {
                drop_keys.push(k.to_owned());
            }
        }
        for k in drop_keys {
            meta.remove(k.as_str())?;
        }
        // Memories are numbered from 0 again: no set kept of the old ones' may
        // be taken for theirs.
        super::key_sets::renew_all(&mut meta)?;
    }
    Writer::create_all(txn, profile)
}

impl Store {
    /// Runs `f` in one write transaction, on an emptied store when `clear` is set
    /// (every entry, index, graph, event, archive, audit record and meta row but the
    /// schema, tokenizer and profile is deleted first). An error from `f` aborts the
    /// transaction: the store is left exactly as it was.
    pub(crate) fn write_cleared<T>(
        &self,
        durable: bool,
        clear: bool,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        self.transact(durable, clear, 0, f)
    }

    /// [`Store::write`] on the store with every pending access record written first,
    /// for writes that store entries read through the overlay (an `update` of an
    /// entry from `get`): written as they are, they already hold those accesses.
    pub(crate) fn write_current<T>(
        &self,
        durable: bool,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        self.transact(durable, false, u64::MAX, f)
    }

    /// Writes the oldest `n` pending access records (and nothing else), synced
    /// when `durable`: the background access writer's transaction (not counted by
    /// [`Store::writing`]).
    pub(crate) fn flush_access(&self, n: u64, durable: bool) -> Result<()> {
        if self.access.is_empty() {
            return Ok(());
        }
        let upto = self.access.written().saturating_add(n);
        self.transact_uncounted(durable, false, upto, |_| Ok(()))
    }

    /// [`Store::write_cleared`], applying the pending access records numbered up to
    /// `access_upto` first.
    fn transact<T>(
        &self,
        durable: bool,
        clear: bool,
        access_upto: u64,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        // Counted while waiting and running (even if `f` panics): the background
        // access writer gives way (see `Store::writing`).
        struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
        }
        self.writers.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let _counted = Counted(&self.writers);
        if durable {
            self.note_durable_write();
        }
        let out = self.transact_timed(durable, clear, access_upto, Some(&self.timings), f);
        self.note_write_end();
        out
    }

    /// [`Store::transact`] without counting itself as a writer or its timings.
    fn transact_uncounted<T>(
        &self,
        durable: bool,
        clear: bool,
        access_upto: u64,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        self.transact_timed(durable, clear, access_upto, None, f)
    }

    /// The write transaction itself; adds its phases to `timings` if it commits.
    fn transact_timed<T>(
        &self,
        durable: bool,
        clear: bool,
        access_upto: u64,
        timings: Option<&parking_lot::Mutex<super::WriteTimings>>,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        let began = std::time::Instant::now();
        let txn = self.begin_write(durable)?;
        // Taken while the transaction runs: left empty if it fails, so the next
        // transaction starts from what is stored.
        let mut carry = self.carry.lock();
        let kept = std::mem::take(&mut *carry);
        if clear {
            clear_all(&txn, self.profile)?;
        }
        let fill;
        let (out, next, (version, change), applied, phases) = {
            let mut w = Writer::open(&txn, self.profile)?;
            w.set_tail_caps(self.tail_caps);
            // Pending access records up to `access_upto` first; on an emptied store
            // they are void (their memories are gone). `f` reads entries as stored:
            // what it writes back of them keeps the records not written yet valid.
            let applied = if clear {
                let last = self.access.last();
                w.meta_put(meta_keys::ACCESS_APPLIED, &last.to_le_bytes())?;
                last
            } else {
                w.resume(kept);
                w.apply_access(&self.access, access_upto)?
            };
            let working = std::time::Instant::now();
            let out = f(&mut w)?;
            let flushing = std::time::Instant::now();
            w.flush()?;
            let change = w.take_tail_change();
            fill = w.tail_fill()?;
            (out, w.into_carry(), change, applied, [working, flushing])
        };
        // The tail index of the new version is cached before the commit makes
        // the version visible, or built beside the commit with readers missing
        // it waiting, so no reader indexes the whole tail itself. Should the
        // commit fail, no snapshot ever names that (random) version.
        let committing = std::time::Instant::now();
        self.tails.commit_beside(version, change, || Ok(txn.commit()?))?;
        self.note_tail_fill(fill.0, fill.1);
        if let Some(t) = timings {
            let mut t = t.lock();
            t.transactions += 1;
            t.begin += phases[0] - began;
            t.work += phases[1] - phases[0];
            t.flush += committing - phases[1];
            t.commit += committing.elapsed();
        }
        if clear {
            self.access.cleared();
        } else {
            self.access.committed(applied);
        }
        *carry = next;
        Ok(out)
    }

    /// Drops every index table and rebuilds it (and the corpus statistics) from the
    /// entry tables, in one transaction. `progress` gets the entries indexed so far.
    pub(crate) fn rebuild_indexes(
        &self,
        durable: bool,
        progress: impl FnMut(u64),
    ) -> Result<RebuildReport> {
        let txn = self.begin_write(durable)?;
        *self.carry.lock() = super::writer::Carry::default();
        let report = rebuild_in(&txn, self.profile, true, progress)?;
        txn.commit()?;
        Ok(report)
    }
}

/// Upgrades a schema-2 store in place, in one transaction: drops the per-posting
/// `postings` and `terms` tables, rebuilds every index in the schema-3 layout
/// (block postings, term info, users with unattributed memories) and records the
/// new versions. Entries and every other table are kept as they are.
pub(crate) fn upgrade_from_2(db: &redb::Database, profile: crate::Profile) -> Result<()> {
    let txn = db.begin_write()?;
    let old_postings: redb::TableDefinition<(&str, u64), u64> =
        redb::TableDefinition::new("postings");
    let old_terms: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("terms");
    txn.delete_table(old_postings)?;
    txn.delete_table(old_terms)?;
    // A schema-2 store's entries hold their access metadata: nothing to fold.
    rebuild_in(&txn, profile, false, |_| {})?;
    {
        let mut meta = txn.open_table(META)?;
        meta.insert(meta_keys::SCHEMA, SCHEMA_VERSION.to_le_bytes().as_slice())?;
        meta.insert(meta_keys::TOKENIZER, crate::text::TOKENIZER_VERSION.to_le_bytes().as_slice())?;
    }
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-3 or schema-4 store to schema 5 in place, in one transaction:
/// creates the postings tail (empty; new in schema 4) and writes the fact card
/// of every active fact (new in schema 5). Nothing else changes.
pub(crate) fn upgrade_to_5(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write()?;
    txn.open_table(POSTING_TAIL)?;
    {
        let mut cards = txn.open_table(FACT_CARDS)?;
        let names = schema::entry_table_names(txn.list_tables()?);
        let facts = names.iter().filter(|n| {
            schema::parse_entry_table_name(n)
                .is_some_and(|(layer, _)| layer == super::keys::FACT_LAYER)
        });
        for name in facts {
            let table = txn.open_table(schema::entry_table(name))?;
            for row in table.range::<u64>(..)? {
                let (k, v) = row?;
                let e: MemoryEntry = decode(v.value(), "memory entry")?;
                if let Some(card) = super::keys::fact_card(&e) {
                    let part = schema::fact_partition(e.user_id.as_deref(), &e.domain);
                    cards.insert((part.as_str(), k.value()), super::encode(&card)?.as_slice())?;
                }
            }
        }
    }
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 5u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// The compact record as schema 5 wrote it: [`super::DocInfo`] without
/// `last_accessed` (read only by [`upgrade_to_6`]).
#[derive(serde::Deserialize)]
struct DocInfoV5 {
    id: String,
    layer: String,
    domain: String,
    kind: u8,
    user_id: Option<String>,
    importance: u8,
    created_at: i64,
    visibility: u8,
    superseded: bool,
    archived: bool,
    salience: f64,
    significance: f64,
    somatic: Option<(f64, f64)>,
    access: Vec<i64>,
    access_count: u32,
    doc_len: u32,
    scope: Vec<String>,
}

/// Rows read per step of [`rewrite_rows`].
const REWRITE_CHUNK: usize = 4_096;

/// Rewrites, in docno order, each row of `table` for which `f` (given its docno
/// and value) returns a new value; a step reads up to [`REWRITE_CHUNK`] rows,
/// then writes the new values.
fn rewrite_rows(
    table: &mut redb::Table<'_, u64, &'static [u8]>,
    mut f: impl FnMut(u64, &[u8]) -> Result<Option<Vec<u8>>>,
) -> Result<()> {
    let mut from = 0u64;
    loop {
        let mut changed: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut last = None;
        for row in table.range::<u64>(from..)?.take(REWRITE_CHUNK) {
            let (k, v) = row?;
            last = Some(k.value());
            if let Some(new) = f(k.value(), v.value())? {
                changed.push((k.value(), new));
            }
        }
        for (docno, bytes) in &changed {
            table.insert(*docno, bytes.as_slice())?;
        }
        match last {
            Some(d) if d < u64::MAX => from = d + 1,
            _ => return Ok(()),
        }
    }
}

/// Upgrades a schema-5 store to schema 6 in place, in one transaction: each
/// compact record gets its entry's last access time, and from then on holds the
/// memory's access metadata (the entries and their records agree in schema 5,
/// where both were rewritten at every access). Nothing else changes.
pub(crate) fn upgrade_to_6(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write()?;
    {
        // Only tables that exist: opening one in a write transaction creates it.
        let existing: std::collections::HashSet<String> =
            schema::entry_table_names(txn.list_tables()?).into_iter().collect();
        let mut tables = std::collections::HashMap::new();
        rewrite_rows(&mut txn.open_table(DOCS)?, |docno, value| {
            let old: DocInfoV5 = decode(value, "schema-5 docinfo")?;
            // A record naming no table (a damaged store, which `check` reports)
            // gets no last access time, rather than failing the open.
            let name = schema::entry_table_name(&old.layer, &old.domain).unwrap_or_default();
            if !tables.contains_key(&name) && existing.contains(&name) {
                let t = txn.open_table(schema::entry_table(&name))?;
                tables.insert(name.clone(), t);
            }
            let last_accessed = match tables.get(&name) {
                Some(t) => super::query::entry(t, docno)?
                    .and_then(|e| e.last_accessed)
                    .map(|t| crate::model::time::to_micros(&t)),
                None => None,
            };
            let info = super::DocInfo {
                id: old.id,
                layer: old.layer,
                domain: old.domain,
                kind: old.kind,
                user_id: old.user_id,
                importance: old.importance,
                created_at: old.created_at,
                visibility: old.visibility,
                superseded: old.superseded,
                archived: old.archived,
                salience: old.salience,
                significance: old.significance,
                somatic: old.somatic,
                access: old.access,
                access_count: old.access_count,
                last_accessed,
                doc_len: old.doc_len,
                scope: old.scope,
            };
            Ok(Some(super::encode(&info)?))
        })?;
    }
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 6u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-6 store to schema 7 in place, in one transaction: writes
/// each memory's `user_terms` row (its index terms, from its entry and context,
/// as the writer derives its postings). The rows are written in the order of the
/// `users` index, whose keys they share. Nothing else changes.
pub(crate) fn upgrade_to_7(db: &redb::Database, profile: crate::Profile) -> Result<()> {
    let txn = db.begin_write()?;
    {
        let users = txn.open_table(USERS)?;
        let docs = txn.open_table(DOCS)?;
        let context = txn.open_table(CONTEXT)?;
        let mut rows = txn.open_table(USER_TERMS)?;
        let existing: std::collections::HashSet<String> =
            schema::entry_table_names(txn.list_tables()?).into_iter().collect();
        let mut tables = std::collections::HashMap::new();
        for row in users.range::<(&str, u64)>(..)? {
            let (k, _) = row?;
            let (user, docno) = k.value();
            // A users row without a record or entry (a damaged store, which
            // `check` reports) gets no terms row, rather than failing the open.
            let Some(info) = docs.get(docno)? else { continue };
            let info: super::DocInfo = decode(info.value(), "docinfo")?;
            let name = schema::entry_table_name(&info.layer, &info.domain).unwrap_or_default();
            if !tables.contains_key(&name) && existing.contains(&name) {
                let t = txn.open_table(schema::entry_table(&name))?;
                tables.insert(name.clone(), t);
            }
            let Some(e) =
                tables.get(&name).map(|t| super::query::entry(t, docno)).transpose()?.flatten()
            else {
                continue;
            };
            let ctx = context.get(docno)?.map(|v| v.value().to_owned());
            let keys = index_keys(&e, profile, ctx.as_deref());
            rows.insert((user, docno), super::doc_terms::encode(&keys).as_slice())?;
        }
    }
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 7u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-7 store to schema 8: every memory's owner term
/// ([`super::keys::owner_term`]) gets its posting, with the memory's length from
/// its terms row, and the `users` index, which they replace, is dropped. One transaction, the owners' rows read first (in their order,
/// so each owner's postings are added in docno order), then written through the
/// writer's buffered postings.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable terms row.
pub(crate) fn upgrade_to_8(db: &redb::Database, profile: crate::Profile) -> Result<()> {
    let txn = db.begin_write()?;
    let mut owners: Vec<(String, Vec<(u64, u32)>)> = Vec::new();
    {
        let rows = txn.open_table(USER_TERMS)?;
        for row in rows.range::<(&str, u64)>(..)? {
            let (k, v) = row?;
            let (owner, docno) = k.value();
            let len = super::doc_terms::DocTerms::parse(v.value())?.len;
            match owners.last_mut() {
                Some((o, docs)) if o == owner => docs.push((docno, len)),
                _ => owners.push((owner.to_owned(), vec![(docno, len)])),
            }
        }
    }
    let owners = owners.into_iter().map(|(o, docs)| (super::keys::owner_term(&o), docs));
    add_tag_postings(&txn, profile, owners, super::keys::OWNER_TERM_UNITS)?;
    // What the users index held, the terms rows and the owner terms now do.
    txn.delete_table(USERS)?;
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 8u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Adds the postings of tag terms (owner or domain terms) at weight `units`:
/// each term with its memories' `(docno, length)`, ascending, through the
/// writer's buffered postings.
fn add_tag_postings(
    txn: &WriteTransaction,
    profile: crate::Profile,
    groups: impl IntoIterator<Item = (String, Vec<(u64, u32)>)>,
    units: u32,
) -> Result<()> {
    let mut w = Writer::open(txn, profile)?;
    for (term, docs) in groups {
        for (docno, len) in docs {
            w.add_posting(&term, docno, units, len)?;
        }
    }
    w.flush()
}

/// Upgrades a schema-8 store to schema 9: the superseded-memories bitmap
/// ([`super::bitmap`]) is written from the `docs` records' flags. One
/// transaction; nothing else changes.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub(crate) fn upgrade_to_9(db: &redb::Database) -> Result<()> {
    mark_from_records(db, &[(SUPERSEDED, super::bitmap::superseded)], 9)
}

/// Sets the bit in each of `bitmaps` of every memory whose `docs` record says
/// so, and sets the schema version to `schema`. One transaction; nothing else
/// changes.
fn mark_from_records(
    db: &redb::Database,
    bitmaps: &[super::bitmap::Bitmap],
    schema: u32,
) -> Result<()> {
    let txn = db.begin_write()?;
    mark_in(&txn, bitmaps, |_, _| Ok(()))?;
    txn.open_table(META)?.insert(meta_keys::SCHEMA, schema.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Sets the bit in each of `bitmaps` of every memory whose `docs` record says
/// so, in `txn`, and hands each record to `also` on the way.
fn mark_in(
    txn: &WriteTransaction,
    bitmaps: &[super::bitmap::Bitmap],
    mut also: impl FnMut(u64, &super::DocInfo) -> Result<()>,
) -> Result<()> {
    {
        let docs = txn.open_table(DOCS)?;
        let mut tables = Vec::new();
        for (def, _) in bitmaps {
            tables.push((txn.open_table(*def)?, super::bitmap::Marks::default()));
        }
        for row in docs.range::<u64>(..)? {
            let (k, v) = row?;
            let info: super::DocInfo = decode(v.value(), "docinfo")?;
            for ((table, marks), (_, marked)) in tables.iter_mut().zip(bitmaps) {
                if marked(&info) {
                    marks.set(table, k.value(), true)?;
                }
            }
            also(k.value(), &info)?;
        }
        for (table, marks) in &mut tables {
            marks.write(table)?;
        }
    }
    Ok(())
}

/// Upgrades a schema-9 store to schema 10: every memory's domain term
/// ([`super::keys::domain_term`]) gets its posting, with the memory's length
/// from its `docs` record. One transaction: the records read first, grouped by
/// domain (so each domain's postings are added in docno order), then written
/// through the writer's buffered postings.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub(crate) fn upgrade_to_10(db: &redb::Database, profile: crate::Profile) -> Result<()> {
    let txn = db.begin_write()?;
    let mut domains: std::collections::BTreeMap<String, Vec<(u64, u32)>> = Default::default();
    {
        let docs = txn.open_table(DOCS)?;
        for row in docs.range::<u64>(..)? {
            let (k, v) = row?;
            let info: super::DocInfo = decode(v.value(), "docinfo")?;
            domains.entry(info.domain).or_default().push((k.value(), info.doc_len));
        }
    }
    let domains = domains.into_iter().map(|(d, docs)| (super::keys::domain_term(&d), docs));
    add_tag_postings(&txn, profile, domains, super::keys::DOMAIN_TERM_UNITS)?;
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 10u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-10 store to schema 11, in one transaction: creates the
/// `rowless_owners` table, and drops the `user_terms` rows of every owner whose
/// owner term's postings in the blocks hold more than
/// [`super::doc_terms::ROW_CAP`] memories, as the writer would have (so the
/// first write after the upgrade does not drop a large owner's million rows
/// inside an observe). The version changes because a schema-10 binary would
/// read a marked owner's missing rows as an owner without memories.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed term info row.
pub(crate) fn upgrade_to_11(db: &redb::Database) -> Result<()> {
    use super::keys::OWNER_TERM_PREFIX;
    let txn = db.begin_write()?;
    {
        let mut large = Vec::new();
        {
            let blocks = txn.open_table(POSTINGS)?;
            for row in blocks.range((OWNER_TERM_PREFIX, 0u64)..)? {
                let (k, v) = row?;
                let (term, docno) = k.value();
                let Some(owner) = term.strip_prefix(OWNER_TERM_PREFIX) else { break };
                if docno == super::postings::INFO
                    && super::postings::TermInfo::decode(v.value())?.df > super::doc_terms::ROW_CAP
                {
                    large.push(owner.to_owned());
                }
            }
        }
        let mut rows = txn.open_table(USER_TERMS)?;
        let mut marks = txn.open_table(ROWLESS)?;
        for owner in &large {
            super::doc_terms::drop_owner_rows(&mut rows, &mut marks, owner)?;
        }
    }
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 11u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-11 store to schema 12, in one transaction: removes the
/// `user_terms` rows of the memories in the postings tail, which readers now
/// derive from their tail rows (`storage::doc_terms`). The version changes
/// because a schema-11 binary would miss the rows the tail's memories lack.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable tail row.
pub(crate) fn upgrade_to_12(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write()?;
    {
        let tail = super::tail::rows(&txn.open_table(POSTING_TAIL)?)?;
        let mut rows = txn.open_table(USER_TERMS)?;
        for (docno, doc) in &tail {
            rows.remove((super::doc_terms::tail_owner(doc)?, *docno))?;
        }
    }
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 12u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-12 store to schema 13, in one transaction: deletes the
/// `fact_terms` counts, which nothing reads since the near-fact lookups rank a
/// text's tokens by their `fact_tokens` rows. The version changes because a
/// schema-12 binary would rank by the missing counts (no wrong answer, but
/// `check` would report every count missing) and keep counts from then on.
///
/// # Errors
/// Storage errors.
pub(crate) fn upgrade_to_13(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write()?;
    txn.delete_table(FACT_TERMS)?;
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 13u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-13 store to schema 14: the active edges' identity index
/// ([`GRAPH_ACTIVE`]), from the stored edges, in one transaction.
///
/// # Errors
/// Storage errors.
pub(crate) fn upgrade_to_14(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write()?;
    // A damaged edge stays as it is, unindexed; `check` reports it.
    rebuild_graph_indexes(&txn, &mut Vec::new())?;
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 14u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Upgrades a schema-14 store to schema 15: the bitmaps of withheld memories
/// (core memories and archived episodes) and of restricted ones (not public)
/// ([`super::bitmap`]) are written from the `docs` records. One transaction;
/// nothing else changes.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub(crate) fn upgrade_to_15(db: &redb::Database) -> Result<()> {
    mark_from_records(
        db,
        &[(WITHHELD, super::DocInfo::withheld), (RESTRICTED, super::DocInfo::restricted)],
        15,
    )
}

/// Upgrades a schema-15 store to schema 16: the bitmaps of the episodic and
/// the semantic layers' memories and of the important ones
/// ([`super::bitmap::SCHEMA_16`]) are written from the `docs` records. The
/// restricted memories' bits are set again on the way: a store written by the
/// first schema-15 build (95116a9, which had only the withheld bitmap) has
/// none, and setting a bit that is set changes nothing. One transaction;
/// nothing else changes.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub(crate) fn upgrade_to_16(db: &redb::Database) -> Result<()> {
    let mut bitmaps = super::bitmap::SCHEMA_16.to_vec();
    bitmaps.push((RESTRICTED, super::DocInfo::restricted));
    mark_from_records(db, &bitmaps, 16)
}

/// Upgrades a schema-16 store to schema 17: the bitmap of the memories
/// without a scope ([`super::bitmap::SCHEMA_17`]) and the rows of every
/// memory's scopes ([`SCOPES`]) are written from the `docs` records, in one
/// pass. One transaction; nothing else changes.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub(crate) fn upgrade_to_17(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write()?;
    {
        let mut scopes = txn.open_table(SCOPES)?;
        mark_in(&txn, super::bitmap::SCHEMA_17, |docno, info| {
            for scope in super::writer::scope_keys(&info.scope) {
                scopes.insert((scope, docno), ())?;
            }
            Ok(())
        })?;
    }
    txn.open_table(META)?.insert(meta_keys::SCHEMA, 17u32.to_le_bytes().as_slice())?;
    txn.commit()?;
    Ok(())
}

/// Rewrites the graph's indexes (adjacency and active edges by identity) from
/// the stored edges. An edge that cannot be decoded is left where it is,
/// unindexed, with a line in `problems`.
fn rebuild_graph_indexes(txn: &WriteTransaction, problems: &mut Vec<String>) -> Result<()> {
    txn.delete_table(GRAPH_ADJ)?;
    txn.delete_table(GRAPH_ACTIVE)?;
    let edges = txn.open_table(GRAPH_EDGES)?;
    let mut adj = txn.open_table(GRAPH_ADJ)?;
    let mut active = txn.open_table(GRAPH_ACTIVE)?;
    for row in edges.range::<u64>(..)? {
        let (k, v) = row?;
        let seq = k.value();
        match decode::<super::graph::EdgeRecord>(v.value(), "graph edge") {
            Ok(e) => super::graph::index_edge(&mut adj, &mut active, seq, &e)?,
            Err(err) => problems.push(format!("graph edge {seq} left unindexed: {err}")),
        }
    }
    Ok(())
}

/// Writes each entry's access metadata, which its compact record holds since
/// schema 6, into the entry row, so that rebuilding the records from the entries
/// keeps it. A record that is missing or cannot be decoded leaves its entry as it
/// is (noted in `report`).
fn fold_access(txn: &WriteTransaction, report: &mut RebuildReport) -> Result<()> {
    let docs = txn.open_table(DOCS)?;
    for name in schema::entry_table_names(txn.list_tables()?) {
        rewrite_rows(&mut txn.open_table(schema::entry_table(&name))?, |docno, value| {
            let Some(record) = docs.get(docno)? else { return Ok(None) };
            let Ok(info) = decode::<super::DocInfo>(record.value(), "docinfo") else {
                report.problems.push(format!(
                    "the record of docno {docno} cannot be decoded; its entry's access \
                     metadata is kept as written"
                ));
                return Ok(None);
            };
            let mut e: MemoryEntry = decode(value, "memory entry")?;
            if info.access_of(&e) {
                return Ok(None);
            }
            info.access_into(&mut e);
            Ok(Some(super::encode(&e)?))
        })?;
    }
    Ok(())
}

fn rebuild_in(
    txn: &WriteTransaction,
    profile: crate::Profile,
    fold: bool,
    mut progress: impl FnMut(u64),
) -> Result<RebuildReport> {
    let mut report = RebuildReport::default();
    if fold {
        fold_access(txn, &mut report)?;
    }
    delete_index_tables(txn)?;
    let mut w = Writer::open(txn, profile)?;
    w.renew_key_sets();
    w.stats.docs = 0;
    w.stats.total_len = 0;
    let mut max_docno: Option<u64> = None;
    for name in w.entry_table_names()? {
        let Some((layer, domain)) = schema::parse_entry_table_name(&name) else {
            continue;
        };
        let (layer, domain) = (layer.to_owned(), domain.to_owned());
        report.tables += 1;
        let table = txn.open_table(schema::entry_table(&name))?;
        for row in table.range::<u64>(..)? {
            let (k, v) = row?;
            let docno = k.value();
            let e: MemoryEntry = decode(v.value(), "memory entry")?;
            report.entries += 1;
            if report.entries % 10_000 == 0 {
                progress(report.entries);
            }
            max_docno = max_docno.max(Some(docno));
            if e.layer != layer || e.domain != domain {
                report.problems.push(format!(
                    "entry {:?} (docno {docno}) sits in table {layer}:{domain} but says \
                     {}:{}; indexed as it says",
                    e.id, e.layer, e.domain
                ));
            }
            if let Some(first) = w.docno_of(&e.id)? {
                report.problems.push(format!(
                    "id {:?} is stored twice (docnos {first} and {docno}); docno {docno} \
                     left unindexed",
                    e.id
                ));
                continue;
            }
            w.ids.insert(e.id.as_str(), docno)?;
            let context = w.context_of(docno)?;
            let keys = index_keys(&e, profile, context.as_deref());
            w.add_rows(docno, &e, &keys, Unchanged::NOTHING)?;
        }
    }
    if let Some(m) = max_docno {
        w.stats.next_docno = w.stats.next_docno.max(m + 1);
    }
    // Kept: the conversation context of each episode (`context`), vectors
    // (`embeddings`) and the reference profile's BM25 corpus (`ref_bm25`, built
    // from query history) are data, not indexes.
    w.flush()?;
    drop(w);
    // The graph's indexes, from its edges (the edges and nodes are data).
    rebuild_graph_indexes(txn, &mut report.problems)?;
    progress(report.entries);
    Ok(report)
}

impl Memory {
    /// Rebuilds every index and the corpus statistics from the entries, in one
    /// transaction (`soulctl reindex`): repairs whatever [`Memory::check`] reports
    /// about the indexes. `progress` gets the number of entries indexed so far.
    ///
    /// # Errors
    /// Storage errors, or an entry record that cannot be decoded (nothing is changed
    /// then).
    pub fn reindex(&self, progress: impl FnMut(u64)) -> Result<RebuildReport> {
        self.store.rebuild_indexes(self.settings.durable, progress)
    }
}
