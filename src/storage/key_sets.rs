//! The members of one key of a `(key, docno)` index (a layer's in
//! [`LAYER_ORDER`], a scope's in [`SCOPES`]), kept in memory across snapshots.
//!
//! A `layer`, `types` or `scopes` filter that keeps few memories walks its
//! keys' members beside the postings (`read::filters`). Stepping through the
//! rows costs ~50–100 ns a row: ~1 ms for a scope of 10,000 memories, whatever
//! the query. The store keeps each walked key's docnos instead
//! ([`BlockCache::key_set`](super::block_cache::BlockCache::key_set)), read
//! once and then used by every snapshot for which they are still exact:
//!
//! - **No row of the key was removed, and none added for a memory numbered
//!   before the set was read.** A transaction that does either gives the key a
//!   new random *epoch* in `meta` ([`Bumps`]); one that clears or rebuilds the
//!   indexes gives the whole store a new one. A set is used only by a snapshot
//!   that reads the same epoch ([`epoch`]).
//! - **Rows added since are of memories numbered from the set's `upto` on.**
//!   Docnos are given out in ascending order and never again, so a snapshot
//!   reads only the rows from `upto` on (the memories stored since, a few per
//!   key), and a snapshot older than the set stops at its own next docno. A set
//!   that many rows have been added past is read again further.
//!
//! Adding a memory, the common write, leaves every epoch as it is.
//!
//! [`LAYER_ORDER`]: super::schema::LAYER_ORDER
//! [`SCOPES`]: super::schema::SCOPES

use std::collections::BTreeSet;
use std::sync::Arc;

use redb::ReadableTable;

use super::block_cache::DocSet;
use crate::error::Result;

type Str = &'static str;
type Bytes = &'static [u8];

/// The `meta` row of the store-wide epoch (u64 LE, random; absent: 0); each
/// key's own is this, `:`, its index's tag, `:` and the key.
const EPOCH: &str = "key_set_epoch";

/// Rows past a kept set's `upto` that a snapshot reads from the table beside
/// it; from this many on, the set is read again, further.
pub const EXTEND_AT: usize = 64;

/// The indexes whose keys' members are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// [`super::schema::LAYER_ORDER`]: `(layer, docno)`.
    Layers,
    /// [`super::schema::SCOPES`]: `(scope, docno)`.
    Scopes,
}

impl Index {
    fn tag(self) -> &'static str {
        match self {
            Self::Layers => "l",
            Self::Scopes => "s",
        }
    }

    /// The name a key's set is kept under.
    pub(crate) fn cache_key(self, key: &str) -> String {
        format!("{}:{key}", self.tag())
    }
}

/// The `meta` row of `key`'s epoch in `index`.
fn meta_key(index: Index, key: &str) -> String {
    format!("{EPOCH}:{}", index.cache_key(key))
}

/// A `meta` value as a u64 (absent: 0).
fn read_u64(meta: &impl ReadableTable<Str, Bytes>, key: &str) -> Result<u64> {
    super::meta_u64(meta.get(key)?.as_ref().map(|v| v.value()), key)
}

/// The epoch of `key` in `index` as `meta` holds it: its own and the store's.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed row.
pub fn epoch(meta: &impl ReadableTable<Str, Bytes>, index: Index, key: &str) -> Result<u64> {
    Ok(read_u64(meta, &meta_key(index, key))? ^ read_u64(meta, EPOCH)?.rotate_left(32))
}

/// Gives the whole store a new epoch: every kept set is read again.
///
/// # Errors
/// Storage errors.
pub fn renew_all(meta: &mut redb::Table<'_, Str, Bytes>) -> Result<()> {
    meta.insert(EPOCH, super::tail::new_version().to_le_bytes().as_slice())?;
    Ok(())
}

/// The keys whose rows a write transaction changed other than by adding a new
/// memory's: each gets a new epoch when the transaction is flushed.
#[derive(Debug, Default)]
pub struct Bumps {
    keys: BTreeSet<String>,
    all: bool,
}

impl Bumps {
    /// Notes a change to `key`'s rows in `index`.
    pub fn key(&mut self, index: Index, key: &str) {
        if !self.all {
            self.keys.insert(meta_key(index, key));
        }
    }

    /// Notes a change to every key (a rebuild of the indexes).
    pub fn all(&mut self) {
        self.all = true;
        self.keys.clear();
    }

    /// Writes the new epochs.
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&mut self, meta: &mut redb::Table<'_, Str, Bytes>) -> Result<()> {
        if std::mem::take(&mut self.all) {
            renew_all(meta)?;
        }
        for key in std::mem::take(&mut self.keys) {
            meta.insert(key.as_str(), super::tail::new_version().to_le_bytes().as_slice())?;
        }
        Ok(())
    }
}

/// A key's members read at one snapshot: those numbered below `upto`, that
/// snapshot's next docno.
#[derive(Debug)]
pub struct KeySet {
    /// The snapshot's next docno.
    pub upto: u64,
    /// The members.
    pub set: DocSet,
}

impl KeySet {
    /// The members of `key` in `table`, read whole (`upto` is the snapshot's
    /// next docno).
    pub(crate) fn read(
        table: &impl ReadableTable<(Str, u64), ()>,
        key: &str,
        upto: u64,
    ) -> Result<Self> {
        let docnos = rows_from(table, key, 0)?;
        Ok(Self { upto, set: DocSet::of(&docnos) })
    }

    /// This set with `later` (ascending, each at or past `upto`) added, up to a
    /// snapshot's `upto`.
    pub(crate) fn extended(&self, later: &[u64], upto: u64) -> Self {
        let mut docnos = self.set.members();
        docnos.extend_from_slice(later);
        Self { upto, set: DocSet::of(&docnos) }
    }

    /// Bytes it holds.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.set.bytes()
    }
}

/// The docnos of `key`'s rows in `table` from `from` on, ascending.
pub(crate) fn rows_from(
    table: &impl ReadableTable<(Str, u64), ()>,
    key: &str,
    from: u64,
) -> Result<Vec<u64>> {
    table.range((key, from)..=(key, u64::MAX))?.map(|row| Ok(row?.0.value().1)).collect()
}

/// A key's members in one snapshot: a kept set, and the rows added past it.
#[derive(Debug)]
pub struct KeyMembers {
    set: Arc<KeySet>,
    later: Vec<u64>,
    /// The snapshot's next docno: members of a newer set from here on are not
    /// the snapshot's.
    upto: u64,
    /// Where the last answers were, in the set's list and in `later`.
    at: (usize, usize),
}

impl KeyMembers {
    pub(crate) fn new(set: Arc<KeySet>, later: Vec<u64>, upto: u64) -> Self {
        Self { set, later, upto, at: (0, 0) }
    }

    /// The smallest member at or after `d`; asks in ascending order step from
    /// the last answer.
    pub fn next_ge(&mut self, d: u64) -> Option<u64> {
        let kept = self.set.set.next_ge_from(d, &mut self.at.0);
        let later = super::postings::next_from(&self.later, d, &mut self.at.1);
        let next = match (kept, later) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        next.filter(|&n| n < self.upto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;
    use crate::model::{MemoryEntry, MemoryType};
    use crate::storage::{Reader, Store};

    fn entry(layer: &str) -> MemoryEntry {
        let mut e = MemoryEntry::new(MemoryType::Episodic, "some memory text".to_owned());
        e.layer = layer.to_owned();
        e
    }

    /// Every member of `layer` in `r`, by its kept set.
    fn members(r: &Reader, layer: &str) -> Vec<u64> {
        let mut walk = r.key_members(Index::Layers, layer).expect("members");
        std::iter::successors(walk.next_ge(0), |&d| walk.next_ge(d + 1)).collect()
    }

    fn add(store: &Store, layer: &str, n: usize) -> Vec<u64> {
        (0..n).map(|_| store.write(false, |w| w.insert(entry(layer))).expect("insert")).collect()
    }

    #[test]
    fn a_cleared_store_reads_its_sets_again() {
        let store = Store::in_memory(Profile::Default).expect("store");
        let rare = add(&store, "rare", 5);
        assert_eq!(members(&store.read().expect("read"), "rare"), rare);
        // Numbered from 0 again: the old set would claim the new memories.
        store.write_cleared(false, true, |_| Ok(())).expect("clear");
        let other = add(&store, "other", 5);
        assert_eq!(other, rare, "docnos given out again");
        assert_eq!(members(&store.read().expect("read"), "rare"), Vec::<u64>::new());
        assert_eq!(members(&store.read().expect("read"), "other"), other);
    }

    #[test]
    fn a_rebuild_reads_its_sets_again() {
        let store = Store::in_memory(Profile::Default).expect("store");
        let rare = add(&store, "rare", 5);
        // Rows lost and added behind the writer's back (as in a damaged
        // index) are in the sets read then: one missing from `rare`, one of a
        // layer no memory is in.
        store
            .write(false, |w| {
                w.layer_order.remove(("rare", rare[2]))?;
                w.layer_order.insert(("ghost", rare[2]), ())?;
                Ok(())
            })
            .expect("damage");
        let damaged: Vec<u64> = rare.iter().copied().filter(|&d| d != rare[2]).collect();
        let r = store.read().expect("read");
        assert_eq!((members(&r, "rare"), members(&r, "ghost")), (damaged, vec![rare[2]]));
        drop(r);
        store.rebuild_indexes(false, |_| {}).expect("rebuild");
        let r = store.read().expect("read");
        assert_eq!((members(&r, "rare"), members(&r, "ghost")), (rare, vec![]));
    }

    #[test]
    fn an_appended_memory_keeps_the_epoch_and_a_moved_one_changes_it() {
        let store = Store::in_memory(Profile::Default).expect("store");
        let rare = add(&store, "rare", 3);
        let epoch_of = |layer: &str| {
            let r = store.read().expect("read");
            epoch(&r.meta, Index::Layers, layer).expect("epoch")
        };
        let before = (epoch_of("rare"), epoch_of("other"));
        add(&store, "rare", 2);
        assert_eq!((epoch_of("rare"), epoch_of("other")), before, "adds keep it");
        store
            .write(false, |w| {
                let mut e = w.get(rare[0])?.expect("held");
                e.layer = "other".to_owned();
                w.replace(rare[0], e)
            })
            .expect("move");
        assert_ne!(epoch_of("rare"), before.0, "a row removed");
        assert_ne!(epoch_of("other"), before.1, "a row added below the newest");
    }
}
