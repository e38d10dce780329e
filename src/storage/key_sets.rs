//! The members of one key of a `(key, docno)` index (a layer's in
//! [`LAYER_ORDER`], a scope's in [`SCOPES`]), kept in memory across snapshots.
//!
//! A `layer`, `types` or `scopes` filter that keeps few memories walks its
//! keys' members beside the postings (`read::filters`). Stepping through the
//! rows costs ~50–100 ns a row: ~1 ms for a scope of 10,000 memories, whatever
//! the query. The store keeps each walked key's docnos instead
//! ([`BlockCache::key_set`](super::block_cache::BlockCache::key_set)), read
//! once and then used by every snapshot for which they still hold every
//! member, and no memory that is not one:
//!
//! - **No memory joined the key below the set's end, and none that is still
//!   stored left it.** A transaction that adds a row for a memory numbered
//!   before it began, or removes the row of a memory it keeps (a move to
//!   another layer, a rescope), gives the key a new random *epoch* in `meta`
//!   ([`Bumps`]); one that clears or rebuilds the indexes gives the whole store
//!   a new one. A set is used only by a snapshot that reads the same epoch
//!   ([`stamp`]).
//! - **Members removed from the store are counted.** Removing a memory adds one
//!   to each of its keys' counts of removals instead. A set read when the count
//!   was `c` holds every member of a snapshot at the same epoch whose count is
//!   `c` or more, and a few memories more: the removed ones, which no longer
//!   have a record or a posting, so a walk that steps on one finds nothing
//!   there. A snapshot with a lower count (older than the set) reads the rows
//!   itself, and one past [`dead_allowed`] removals reads the set again.
//! - **Rows added since are of memories numbered from the set's `upto` on.**
//!   Docnos are given out in ascending order and never again, so a snapshot
//!   reads only the rows from `upto` on (the memories stored since, a few per
//!   key), and a snapshot older than the set stops at its own next docno. A set
//!   that many rows have been added past is read again further.
//!
//! Adding a memory, the common write, leaves every epoch and count as it is.
//!
//! [`LAYER_ORDER`]: super::schema::LAYER_ORDER
//! [`SCOPES`]: super::schema::SCOPES

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use redb::ReadableTable;

use super::block_cache::DocSet;
use crate::error::Result;

type Str = &'static str;
type Bytes = &'static [u8];

/// The `meta` row of the store-wide epoch (u64 LE, random; absent: 0); each
/// key's own is this, `:`, its index's tag, `:` and the key.
const EPOCH: &str = "key_set_epoch";

/// The prefix of a key's `meta` row counting the memories removed from the
/// store while they were its members (u64 LE; absent: 0), named as [`EPOCH`]'s.
const REMOVED: &str = "key_set_removed";

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

/// The `meta` row of `key`'s count of removals in `index`.
fn removed_key(index: Index, key: &str) -> String {
    format!("{REMOVED}:{}", index.cache_key(key))
}

/// A `meta` value as a u64 (absent: 0).
fn read_u64(meta: &impl ReadableTable<Str, Bytes>, key: &str) -> Result<u64> {
    super::meta_u64(meta.get(key)?.as_ref().map(|v| v.value()), key)
}

/// Where a key's rows stand in one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The key's epoch and the store's, together.
    pub epoch: u64,
    /// Memories removed from the store while members of the key (never less
    /// in a later snapshot).
    pub removed: u64,
}

/// The stamp of `key` in `index` as `meta` holds it.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed row.
pub fn stamp(meta: &impl ReadableTable<Str, Bytes>, index: Index, key: &str) -> Result<Stamp> {
    Ok(Stamp {
        epoch: read_u64(meta, &meta_key(index, key))? ^ read_u64(meta, EPOCH)?.rotate_left(32),
        removed: read_u64(meta, &removed_key(index, key))?,
    })
}

/// How many removed memories a set may still hold before a snapshot reads it
/// again: [`EXTEND_AT`], or a quarter of its members when more.
#[must_use]
pub fn dead_allowed(members: usize) -> u64 {
    EXTEND_AT.max(members / 4) as u64
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
/// memory's: each gets a new epoch, or its count of removals grows, when the
/// transaction is flushed.
#[derive(Debug, Default)]
pub struct Bumps {
    keys: BTreeSet<String>,
    all: bool,
    /// Count row → members removed from the store.
    removed: BTreeMap<String, u64>,
}

impl Bumps {
    /// Notes a change to `key`'s rows in `index` that a kept set cannot follow:
    /// a row added for a memory stored before, or one removed from a memory
    /// that stays.
    pub fn key(&mut self, index: Index, key: &str) {
        if !self.all {
            self.keys.insert(meta_key(index, key));
        }
    }

    /// Notes a member of `key` in `index` removed from the store.
    pub fn removal(&mut self, index: Index, key: &str) {
        *self.removed.entry(removed_key(index, key)).or_default() += 1;
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
        for (key, n) in std::mem::take(&mut self.removed) {
            let count = read_u64(meta, &key)?.saturating_add(n);
            meta.insert(key.as_str(), count.to_le_bytes().as_slice())?;
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
    /// The snapshot's count of removals ([`Stamp::removed`]).
    pub removed: u64,
    /// How many members the set holds.
    pub len: usize,
    /// The members.
    pub set: DocSet,
}

impl KeySet {
    /// The members of `key` in `table`, read whole in a snapshot that numbers
    /// its next memory `upto` and counts `removed` removals.
    pub(crate) fn read(
        table: &impl ReadableTable<(Str, u64), ()>,
        key: &str,
        upto: u64,
        removed: u64,
    ) -> Result<Self> {
        let docnos = rows_from(table, key, 0)?;
        Ok(Self { upto, removed, len: docnos.len(), set: DocSet::of(&docnos) })
    }

    /// This set with `later` (ascending, each at or past `upto`) added, as read
    /// in a snapshot that numbers its next memory `upto` and counts `removed`
    /// removals. The rows past the set are that snapshot's, so the extended set
    /// serves no snapshot counting fewer removals.
    pub(crate) fn extended(&self, later: &[u64], upto: u64, removed: u64) -> Self {
        let len = self.len + later.len();
        let set = match &self.set {
            // A bitmap (a large layer's) is copied and its new bits set, not
            // listed and built again.
            DocSet::Bits(bits) => {
                let mut bits = bits.clone();
                for &d in later {
                    let w = (d / 64) as usize;
                    if w >= bits.len() {
                        bits.resize(w + 1, 0);
                    }
                    bits[w] |= 1 << (d % 64);
                }
                DocSet::Bits(bits)
            }
            DocSet::Sorted(list) => {
                let mut docnos = list.clone();
                docnos.extend_from_slice(later);
                DocSet::of(&docnos)
            }
        };
        Self { upto, removed, len, set }
    }

    /// Whether it holds every member of a snapshot at its epoch that counts
    /// `removed` removals, and few removed memories besides.
    #[must_use]
    pub fn serves(&self, removed: u64) -> bool {
        removed >= self.removed && removed - self.removed < dead_allowed(self.len)
    }

    /// Whether it is at least as new as `other`: read at as many removals or
    /// more, and as far or further (kept in its place, it loses only asks of
    /// snapshots older than both).
    #[must_use]
    pub fn covers(&self, other: &Self) -> bool {
        self.removed >= other.removed && self.upto >= other.upto
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
            stamp(&r.meta, Index::Layers, layer).expect("stamp").epoch
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

    /// The set kept for `layer` in `store`.
    fn kept(store: &Store, layer: &str) -> Option<Arc<KeySet>> {
        store.read().expect("read").blocks.kept_key_set(&Index::Layers.cache_key(layer))
    }

    fn remove(store: &Store, docnos: &[u64]) {
        store
            .write(false, |w| {
                for &d in docnos {
                    w.remove(d)?.expect("held");
                }
                Ok(())
            })
            .expect("remove");
    }

    #[test]
    fn a_removal_keeps_the_set_for_newer_snapshots_only() {
        let store = Store::in_memory(Profile::Default).expect("store");
        let rare = add(&store, "rare", 10);
        let older = store.read().expect("read");
        assert_eq!(members(&store.read().expect("read"), "rare"), rare);
        let before =
            (kept(&store, "rare").expect("kept"), stamp(&older.meta, Index::Layers, "rare"));
        remove(&store, &rare[3..4]);
        let r = store.read().expect("read");
        let after = stamp(&r.meta, Index::Layers, "rare").expect("stamp");
        let before_stamp = before.1.expect("stamp");
        assert_eq!((after.epoch, after.removed), (before_stamp.epoch, before_stamp.removed + 1));
        // The set read before serves the newer snapshot: it holds the removed
        // memory, which has no posting left to be found by.
        assert_eq!(members(&r, "rare"), rare);
        assert!(Arc::ptr_eq(&kept(&store, "rare").expect("kept"), &before.0), "read again");
        assert!(r.docinfo(rare[3]).expect("docinfo").is_none());

        // A set read after the removal does not serve a snapshot from before it.
        let fresh = Store::in_memory(Profile::Default).expect("store");
        let rare = add(&fresh, "rare", 10);
        let older = fresh.read().expect("read");
        remove(&fresh, &rare[3..4]);
        let live: Vec<u64> = rare.iter().copied().filter(|&d| d != rare[3]).collect();
        assert_eq!(members(&fresh.read().expect("read"), "rare"), live);
        assert_eq!(members(&older, "rare"), rare, "the older snapshot's own members");
        assert_eq!(kept(&fresh, "rare").expect("kept").len, 9, "the newer set stays kept");
    }

    #[test]
    fn a_set_extended_after_a_removal_serves_no_older_snapshot() {
        let store = Store::in_memory(Profile::Default).expect("store");
        let mut rare = add(&store, "rare", 5);
        assert_eq!(members(&store.read().expect("read"), "rare"), rare);
        // Enough added past the set that the next ask reads it again further.
        rare.extend(add(&store, "rare", EXTEND_AT + 5));
        let older = store.read().expect("read");
        let gone = rare[10];
        remove(&store, &[gone]);
        let live: Vec<u64> = rare.iter().copied().filter(|&d| d != gone).collect();
        assert_eq!(members(&store.read().expect("read"), "rare"), live);
        assert_eq!(kept(&store, "rare").expect("kept").len, live.len(), "extended");
        // The extension's rows were read after the removal: the older snapshot,
        // which still holds the removed memory, reads its own.
        assert_eq!(members(&older, "rare"), rare);
    }

    #[test]
    fn many_removals_read_the_set_again() {
        let store = Store::in_memory(Profile::Default).expect("store");
        let rare = add(&store, "rare", 100);
        assert_eq!(members(&store.read().expect("read"), "rare"), rare);
        let first = kept(&store, "rare").expect("kept");
        let (gone, live) = rare.split_at(EXTEND_AT - 1);
        remove(&store, gone);
        assert_eq!(members(&store.read().expect("read"), "rare"), rare, "a few removed ones held");
        remove(&store, &live[..1]);
        assert_eq!(members(&store.read().expect("read"), "rare"), &live[1..], "read again");
        assert!(!Arc::ptr_eq(&kept(&store, "rare").expect("kept"), &first));
    }
}
