//! Prewarming: reading the ranking records and the owners' terms rows into
//! redb's page cache after open.
//!
//! Every recall reads the `docs` record (the compact [`super::DocInfo`]) of each
//! candidate: about 20 per query, at random docnos. On a store just opened, each
//! of those is a leaf redb has not cached yet, so a read costs a `pread`, a copy
//! and a cache insertion. The `docs` table is small next to the entries (about
//! 87 bytes per memory), so reading it once, in order, in a background thread,
//! makes those reads cache hits for the life of the process. A recall filtered
//! by a small owner reads all of the owner's `user_terms` rows (about 45 leaves
//! for 1,000 memories), so that table (about 150 bytes per memory) is read next,
//! under a budget of its own. The entries are not prewarmed: they are most of the
//! file, and a recall reads only its winners'. Before either, the postings
//! tail is indexed in memory ([`Store::prewarm_tail`]), which the first recall
//! would otherwise do.

use std::sync::atomic::{AtomicBool, Ordering};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::Store;
use super::schema::{DOCS, USER_TERMS};
use crate::error::Result;

/// The share of redb's page cache each prewarmed table (`docs`, then
/// `user_terms`) may take.
pub const CACHE_SHARE: u64 = 4;
/// redb's page cache size when none is set (its documented default, 1 GiB).
pub const REDB_DEFAULT_CACHE: u64 = 1 << 30;
/// Rows read between two looks at the stop flag.
const STOP_CHECK_EVERY: u64 = 4096;
/// redb's bytes per pair in a `docs` leaf beside the 8-byte key and the value:
/// the value's end offset.
const ROW_OVERHEAD: u64 = 4;
/// The fewest bytes a ranking record encodes to: the version byte, then empty
/// strings and lists, no options, small numbers (postcard writes each in one
/// byte) and the two `f64`s (8 bytes each). A test encodes such a record.
const MIN_RECORD_BYTES: u64 = 33;
/// The fewest bytes a `docs` row takes in a leaf.
const MIN_ROW_BYTES: u64 = 8 + ROW_OVERHEAD + MIN_RECORD_BYTES;
/// The fewest bytes a `user_terms` row takes in a leaf: an empty owner and the
/// docno, the pair's offsets, and a row of no terms (its length and count, one
/// byte each).
const MIN_TERMS_ROW_BYTES: u64 = 8 + ROW_OVERHEAD + 2;

/// What a prewarm did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prewarm {
    /// Every `docs` record was read: this many.
    Read(u64),
    /// The table takes more than its share of the cache. Either its row count
    /// alone says so and nothing was read, or the rows read in order reached the
    /// share first and the read stopped there.
    TooLarge {
        /// The table's bytes as far as they were counted (keys, records and
        /// their offsets; not the B-tree's own bytes, 7% more at 1M):
        /// more than `budget`, at most the table's.
        bytes: u64,
        /// The most it may take.
        budget: u64,
    },
    /// Stopped (the store was closing) after this many records.
    Stopped(u64),
}

impl Store {
    /// Reads every `docs` record once, in key order, unless the table takes more
    /// than `cache_bytes / CACHE_SHARE`; stops early when `stop` is set.
    ///
    /// The table's size is not measured first (redb's `stats()` walks every page
    /// of it, about as much work as the read itself): its row count, which redb
    /// keeps, rules out a table that cannot fit, and the bytes read are counted as
    /// the read goes, so a table larger than it looked stops at its share.
    ///
    /// # Errors
    /// Storage errors.
    pub fn prewarm_docs(&self, cache_bytes: u64, stop: &AtomicBool) -> Result<Prewarm> {
        let txn = self.db.begin_read()?;
        let docs = txn.open_table(DOCS)?;
        let least = docs.len()?.saturating_mul(MIN_ROW_BYTES);
        read_counted(least, docs.iter()?, cache_bytes / CACHE_SHARE, stop, |(_, v)| {
            8 + ROW_OVERHEAD + std::hint::black_box(v.value().len()) as u64
        })
    }

    /// [`Store::prewarm_docs`] for the `user_terms` table, under a budget of its
    /// own.
    ///
    /// # Errors
    /// Storage errors.
    pub fn prewarm_user_terms(&self, cache_bytes: u64, stop: &AtomicBool) -> Result<Prewarm> {
        let txn = self.db.begin_read()?;
        let rows = txn.open_table(USER_TERMS)?;
        let least = rows.len()?.saturating_mul(MIN_TERMS_ROW_BYTES);
        read_counted(least, rows.iter()?, cache_bytes / CACHE_SHARE, stop, |(k, v)| {
            let owner = k.value().0.len() as u64;
            owner + 8 + ROW_OVERHEAD + std::hint::black_box(v.value().len()) as u64
        })
    }

    /// Indexes the stored postings tail (`storage::tail`) into the store's
    /// cache of tail indexes, so the first recall finds it indexed instead of
    /// indexing it itself (~1.4 µs a memory: 5–6 ms at 1M, whose tail holds up
    /// to 4,096). Returns the memories in the tail.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on an undecodable tail row.
    pub fn prewarm_tail(&self) -> Result<u64> {
        Ok(self.read()?.tail.docs())
    }
}

/// Reads `rows` in order, counting their bytes by `bytes_of`, until the count
/// passes `budget` or `stop` is set; reads nothing when `least` (the table's
/// fewest possible bytes) already passes `budget`.
fn read_counted<R>(
    least: u64,
    rows: impl Iterator<Item = std::result::Result<R, redb::StorageError>>,
    budget: u64,
    stop: &AtomicBool,
    bytes_of: impl Fn(&R) -> u64,
) -> Result<Prewarm> {
    if least > budget {
        return Ok(Prewarm::TooLarge { bytes: least, budget });
    }
    let mut n = 0u64;
    let mut bytes = 0u64;
    for row in rows {
        bytes += bytes_of(&row?);
        if bytes > budget {
            return Ok(Prewarm::TooLarge { bytes, budget });
        }
        n += 1;
        if n % STOP_CHECK_EVERY == 0 && stop.load(Ordering::Relaxed) {
            return Ok(Prewarm::Stopped(n));
        }
    }
    Ok(Prewarm::Read(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Memory;
    use crate::model::{MemoryEntry, MemoryType};
    use crate::storage::{DocInfo, encode};

    /// An in-memory store of `n` short memories.
    fn store_of(n: u64) -> Memory {
        let mem = Memory::open_in_memory().expect("test store");
        let entries: Vec<MemoryEntry> =
            (0..n).map(|i| MemoryEntry::new(MemoryType::Episodic, format!("record {i}"))).collect();
        mem.add_batch(entries).expect("test store");
        mem
    }

    /// A store opened from a file holds its stored postings tail unindexed;
    /// `prewarm_tail` indexes it, and the next reader finds it indexed.
    #[test]
    fn the_tail_is_indexed_before_the_first_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tail.redb");
        {
            let mem = Memory::builder().prewarm(false).open(&path).expect("store");
            let entries: Vec<MemoryEntry> = (0..40)
                .map(|i| MemoryEntry::new(MemoryType::Episodic, format!("kayak trip {i}")))
                .collect();
            mem.add_batch(entries).expect("write");
        }
        let store = Store::open(&path, crate::Profile::Default, None).expect("reopen");
        let version = match store
            .db
            .begin_read()
            .expect("read")
            .open_table(crate::storage::schema::META)
            .expect("meta")
            .get(crate::storage::meta_keys::TAIL_VERSION)
            .expect("get")
        {
            Some(v) => crate::storage::tail::decode_version(v.value()).expect("version"),
            None => 0,
        };
        assert_ne!(version, 0, "the memories went to the tail");
        assert!(store.tails.find(version).is_none(), "nothing indexed on open");
        assert_eq!(store.prewarm_tail().expect("indexed"), 40);
        let cached = store.tails.get(version, || panic!("indexed again")).expect("cached");
        assert_eq!(cached.docs(), 40);
        assert_eq!(cached.term("kayak").map(|t| t.postings.len()), Some(40));
    }

    /// A table whose row count alone rules it out is not read; one that looked
    /// as if it might fit is read until its bytes pass the budget; one that fits
    /// is read whole.
    #[test]
    fn the_budget_is_checked_by_row_count_then_by_bytes_read() {
        let n = 3_000u64;
        let mem = store_of(n);
        let go = AtomicBool::new(false);
        let least = n * MIN_ROW_BYTES;
        assert_eq!(
            mem.store.prewarm_docs(least * CACHE_SHARE - CACHE_SHARE, &go).expect("read"),
            Prewarm::TooLarge { bytes: least, budget: least - 1 }
        );
        let budget = least + 1;
        match mem.store.prewarm_docs(budget * CACHE_SHARE, &go).expect("read") {
            Prewarm::TooLarge { bytes, budget: b } => {
                assert_eq!(b, budget);
                assert!(bytes > budget && bytes < budget + 200, "stopped at {bytes}");
            }
            other => panic!("expected a read stopped at the budget, got {other:?}"),
        }
        assert_eq!(
            mem.store.prewarm_docs(REDB_DEFAULT_CACHE, &go).expect("read"),
            Prewarm::Read(n)
        );
    }

    /// The smallest record encodes to [`MIN_RECORD_BYTES`] (and the smallest terms
    /// row to what [`MIN_TERMS_ROW_BYTES`] counts), so a table's row count times
    /// its smallest row never overstates it.
    #[test]
    fn the_smallest_record_is_as_small_as_the_bound_says() {
        let smallest = DocInfo {
            id: String::new(),
            layer: String::new(),
            domain: String::new(),
            kind: 0,
            user_id: None,
            importance: 0,
            created_at: 0,
            visibility: 0,
            superseded: false,
            archived: false,
            salience: 0.0,
            significance: 0.0,
            somatic: None,
            access: Vec::new(),
            access_count: 0,
            last_accessed: None,
            doc_len: 0,
            scope: Vec::new(),
        };
        let bytes = encode(&smallest).expect("encode");
        assert_eq!(bytes.len() as u64, MIN_RECORD_BYTES);
        let real = DocInfo::from_entry(&MemoryEntry::new(MemoryType::Core, "x"), 1);
        assert!(encode(&real).expect("encode").len() as u64 > MIN_RECORD_BYTES);
        // The same for a terms row: a memory of no terms.
        let none = crate::storage::doc_terms::encode(&crate::storage::keys::IndexKeys::default());
        assert_eq!(none.len() as u64 + 8 + ROW_OVERHEAD, MIN_TERMS_ROW_BYTES);
    }

    /// The owners' terms rows are read whole under their own budget, and not
    /// at all when their row count rules them out.
    #[test]
    fn the_terms_rows_are_read_under_their_own_budget() {
        let n = 3_000u64;
        let mem = store_of(n);
        let go = AtomicBool::new(false);
        assert_eq!(
            mem.store.prewarm_user_terms(REDB_DEFAULT_CACHE, &go).expect("read"),
            Prewarm::Read(n)
        );
        let least = n * MIN_TERMS_ROW_BYTES;
        assert_eq!(
            mem.store.prewarm_user_terms(least * CACHE_SHARE - CACHE_SHARE, &go).expect("read"),
            Prewarm::TooLarge { bytes: least, budget: least - 1 }
        );
        match mem.store.prewarm_user_terms((least + 1) * CACHE_SHARE, &go).expect("read") {
            Prewarm::TooLarge { bytes, .. } => assert!(bytes > least + 1, "stopped at {bytes}"),
            other => panic!("expected a read stopped at the budget, got {other:?}"),
        }
    }

    /// The stop flag ends the read at the next check; without it every record is
    /// read.
    #[test]
    fn stops_at_the_next_check_when_asked() {
        let n = 2 * STOP_CHECK_EVERY + 5;
        let mem = store_of(n);
        let go = AtomicBool::new(false);
        assert_eq!(
            mem.store.prewarm_docs(REDB_DEFAULT_CACHE, &go).expect("read"),
            Prewarm::Read(n)
        );
        let stop = AtomicBool::new(true);
        assert_eq!(
            mem.store.prewarm_docs(REDB_DEFAULT_CACHE, &stop).expect("read"),
            Prewarm::Stopped(STOP_CHECK_EVERY)
        );
    }
}
