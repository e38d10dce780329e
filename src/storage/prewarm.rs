//! Prewarming: reading the ranking records into redb's page cache after open.
//!
//! Every recall reads the `docs` record (the compact [`super::DocInfo`]) of each
//! candidate: about 20 per query, at random docnos. On a store just opened, each
//! of those is a leaf redb has not cached yet, so a read costs a `pread`, a copy
//! and a cache insertion. The `docs` table is small next to the entries (about
//! 87 bytes per memory), so reading it once, in order, in a background thread,
//! makes those reads cache hits for the life of the process. The entries are not
//! prewarmed: they are most of the file, and a recall reads only its winners'.

use std::sync::atomic::{AtomicBool, Ordering};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::Store;
use super::schema::DOCS;
use crate::error::Result;

/// The share of redb's page cache the `docs` table may take to be prewarmed.
pub const CACHE_SHARE: u64 = 4;
/// redb's page cache size when none is set (its documented default, 1 GiB).
pub const REDB_DEFAULT_CACHE: u64 = 1 << 30;
/// Rows read between two looks at the stop flag.
const STOP_CHECK_EVERY: u64 = 4096;

/// What a prewarm did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prewarm {
    /// Every `docs` record was read: this many.
    Read(u64),
    /// The table takes more than its share of the cache: nothing was read.
    TooLarge {
        /// The table's bytes (records and B-tree metadata).
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
    /// # Errors
    /// Storage errors.
    pub fn prewarm_docs(&self, cache_bytes: u64, stop: &AtomicBool) -> Result<Prewarm> {
        let txn = self.db.begin_read()?;
        let docs = txn.open_table(DOCS)?;
        let stats = docs.stats()?;
        let bytes = stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes();
        let budget = cache_bytes / CACHE_SHARE;
        if bytes > budget {
            return Ok(Prewarm::TooLarge { bytes, budget });
        }
        let mut n = 0u64;
        for row in docs.iter()? {
            let (_, v) = row?;
            std::hint::black_box(v.value().len());
            n += 1;
            if n % STOP_CHECK_EVERY == 0 && stop.load(Ordering::Relaxed) {
                return Ok(Prewarm::Stopped(n));
            }
        }
        Ok(Prewarm::Read(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Memory;
    use crate::model::{MemoryEntry, MemoryType};

    /// The stop flag ends the read at the next check; without it every record is
    /// read.
    #[test]
    fn stops_at_the_next_check_when_asked() {
        let mem = Memory::open_in_memory().expect("test store");
        let n = 2 * STOP_CHECK_EVERY + 5;
        let entries: Vec<MemoryEntry> =
            (0..n).map(|i| MemoryEntry::new(MemoryType::Episodic, format!("record {i}"))).collect();
        mem.add_batch(entries).expect("test store");
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
