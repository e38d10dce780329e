//! Offline compaction: index tables rewritten in key order, then the file shrunk.
//!
//! Most index tables are keyed by an owner, a partition or a term first and a
//! docno (or time) second, so each new memory appends a row at the end of its
//! key's run, somewhere in the middle of the table. redb packs the leaf a key
//! greater than every other key goes to, but splits any other full leaf in
//! half, and an append at the end of a run never comes back to the left half.
//! Those tables end up about half full (`soulctl stats --space` shows it: the
//! `user_terms` of a 1M synthetic store are 51% full, `importance` 43%), where
//! the entries, the `docs` records and anything else keyed by docno alone are
//! 93% full.
//!
//! [`compact_store`] copies each such table, in key order, into a new table (so
//! every row goes to the end of the new one, and leaves are packed), drops the
//! old table and gives the new one its name, all in one write transaction; then
//! it lets redb move the pages to the front of the file and truncate it. The
//! store must be closed (redb's file lock refuses a second opener). Rows that
//! arrive later fill the tables as before, half full at the ends of the runs;
//! what was compacted stays packed.

use std::path::Path;

use redb::{Key, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle, Value};

use super::Store;
use super::schema::{
    ATTRIBUTES, ENTITIES, FACT_CARDS, FACT_TOKENS, GRAPH_ACTIVE, GRAPH_ADJ, GRAPH_NODES, IDS,
    IMPORTANCE, LAYER_ORDER, POSTINGS, PREFIXES, SCOPES, USER_TERMS,
};
use crate::Profile;
use crate::error::{Error, Result};

/// What [`compact_store`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// The file's size before, in bytes.
    pub bytes_before: u64,
    /// The file's size after, in bytes.
    pub bytes_after: u64,
    /// Tables rewritten in key order.
    pub tables: u64,
    /// Rows they hold.
    pub rows: u64,
}

/// Rewrites the store's index tables in key order and shrinks its file (see the
/// module docs), calling `progress` with each table's name before it is
/// rewritten and with `"file"` before the file is compacted. The store must not
/// be open elsewhere. Nothing a reader sees changes: the same rows, in the same
/// tables.
///
/// # Errors
/// [`Error::Open`] when the file is missing, is not a store, or is open
/// elsewhere; storage errors. A failure before the rewrite commits leaves the
/// store as it was; one while the file is compacted leaves every row in place.
pub fn compact_store(path: &Path, mut progress: impl FnMut(&str)) -> Result<CompactReport> {
    if !path.exists() {
        return Err(Error::Open { path: path.to_owned(), reason: "no such file".into() });
    }
    let bytes_before = std::fs::metadata(path)?.len();
    let mut store = Store::open(path, Profile::default(), None)?;
    let (tables, rows) = store.repack(&mut progress)?;
    progress("file");
    store.compact_file()?;
    drop(store);
    Ok(CompactReport { bytes_before, bytes_after: std::fs::metadata(path)?.len(), tables, rows })
}

impl Store {
    /// Rewrites the index tables whose rows are appended in the middle of their
    /// key space, in key order, in one durable write transaction. Returns the
    /// tables and rows rewritten.
    fn repack(&self, progress: &mut impl FnMut(&str)) -> Result<(u64, u64)> {
        let txn = self.begin_write(true)?;
        let rows = [
            repack_table(&txn, USER_TERMS, progress)?,
            repack_table(&txn, POSTINGS, progress)?,
            repack_table(&txn, FACT_TOKENS, progress)?,
            repack_table(&txn, FACT_CARDS, progress)?,
            repack_table(&txn, PREFIXES, progress)?,
            repack_table(&txn, ATTRIBUTES, progress)?,
            repack_table(&txn, ENTITIES, progress)?,
            repack_table(&txn, IMPORTANCE, progress)?,
            repack_table(&txn, LAYER_ORDER, progress)?,
            repack_table(&txn, SCOPES, progress)?,
            repack_table(&txn, IDS, progress)?,
            repack_table(&txn, GRAPH_NODES, progress)?,
            repack_table(&txn, GRAPH_ADJ, progress)?,
            repack_table(&txn, GRAPH_ACTIVE, progress)?,
        ];
        txn.commit()?;
        Ok((rows.len() as u64, rows.iter().sum()))
    }

    /// Lets redb move pages to the front of the file and truncate it, until it
    /// can do no more.
    fn compact_file(&mut self) -> Result<()> {
        while self.db.compact().map_err(|e| Error::Storage(e.to_string()))? {}
        Ok(())
    }
}

/// Copies `def` in key order into a new table, drops it and renames the copy
/// to its name. Returns the rows copied.
fn repack_table<K: Key + 'static, V: Value + 'static>(
    txn: &redb::WriteTransaction,
    def: TableDefinition<'_, K, V>,
    progress: &mut impl FnMut(&str),
) -> Result<u64> {
    progress(def.name());
    let tmp_name = format!("{}\u{1f}repack", def.name());
    let tmp: TableDefinition<'_, K, V> = TableDefinition::new(&tmp_name);
    let rows = {
        let old = txn.open_table(def)?;
        let mut new = txn.open_table(tmp)?;
        for row in old.iter()? {
            let (k, v) = row?;
            new.insert(k.value(), v.value())?;
        }
        let (a, b) = (old.len()?, new.len()?);
        if a != b {
            return Err(Error::Storage(format!("repacking {}: {a} rows became {b}", def.name())));
        }
        a
    };
    txn.delete_table(def)?;
    txn.rename_table(tmp, def)?;
    Ok(rows)
}
