//! The postings tail: the inverted index of the newest memories, kept apart from
//! the block postings until it is merged into them.
//!
//! Appending one memory to the block postings rewrites the last block of each of
//! its terms: some forty B-tree leaves spread over the whole table, each copied and
//! written out by the commit. A transaction that only adds a few new memories
//! (one observe) instead writes each memory's terms as one row of the tail table
//! ([`POSTING_TAIL`], keyed by docno, so one leaf at the table's end), and the
//! tail is merged into the blocks by the first transaction that would take it
//! past its cap ([`Caps`]) or that changes anything else in the postings (a removal,
//! a re-indexed memory, a bulk write): that transaction applies the tail's postings
//! before its own, term by term, as any batch.
//!
//! Invariants (checked by `storage::check`): every tail docno is above every
//! docno in the blocks (new docnos only grow, and any write to the blocks merges
//! the tail first), and a term's document frequency is its info row's plus its
//! tail postings. Queries see the tail as one more block after each term's last
//! ([`TailIndex`]), with its own score bound.
//!
//! Readers index the tail in memory once per tail version: every change to the
//! tail stores a new random version number in the meta table, and the store
//! keeps the index of the latest version ([`TailCache`]). A commit that appends
//! to the tail extends the cached index by a segment of its own rows, so a recall
//! after an observe does not index the tail again; a reader whose snapshot has
//! another version indexes its own.
//!
//! [`POSTING_TAIL`]: super::schema::POSTING_TAIL

use std::sync::{Arc, OnceLock};

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::postings::{Impacts, Posting};
use crate::error::Result;

/// Memories the tail holds at most, by default, before it is merged into the
/// blocks: a 64th of the store ([`default_cap`]), at least this many...
pub const TAIL_MIN_DOCS: u64 = 256;
/// ... and at most this many, for writes of fewer than [`BATCH_MIN_NEW`] new
/// memories (a batch may fill it further, [`batch_cap`], and smaller writes
/// then add to it up to that).
///
/// A merge rewrites the last block of every term the tail holds (at 1M memories
/// a batch of 1,000 observes touches ~3,300 leaves of the postings table), so the
/// longer the tail, the fewer merges. Queries read the tail's postings as blocks
/// of [`super::postings::BLOCK`], bounded as they come (`read::candidates`),
/// without the blocks' stored bounds: a tail kept to a small share of the store
/// costs them little. Writers keep the index of each version readers will see
/// ([`TailCache`]); a process's first reader indexes the tail as stored (~1.4 µs
/// a memory, on the prewarm thread). What bounds this cap is the merge itself:
/// the write that fills the tail pays it, ~230 ms at 1M for 4,096 memories,
/// ~460 ms for 16,384 (`docs/PERFORMANCE.md`, sessions 35 and 36), a lot for a
/// single observe of ~1 ms and little for a batch.
pub const TAIL_MAX_DOCS: u64 = 4096;

/// The tail's default size for a store of `docs` memories: a 64th of them,
/// within [`TAIL_MIN_DOCS`] and [`TAIL_MAX_DOCS`].
#[must_use]
pub fn default_cap(docs: u64) -> u64 {
    (docs / 64).clamp(TAIL_MIN_DOCS, TAIL_MAX_DOCS)
}

/// A tail holding at least this many memories, and three quarters of its cap, is
/// merged in the store's idle time when [`crate::Settings::idle_tail_merge`] is
/// set (`Memory` does it on a thread of its own): a merge that size costs one
/// observe hundreds of milliseconds at 1M memories. Shorter tails (those of
/// stores under ~175,000 memories) merge quickly enough with the write that
/// fills them.
pub const IDLE_MERGE_MIN_DOCS: u64 = 2048;

/// Whether a tail holding `held` memories of `cap` is merged in idle time.
#[must_use]
pub fn merge_when_idle(held: u64, cap: u64) -> bool {
    held >= IDLE_MERGE_MIN_DOCS && held.saturating_mul(4) >= cap.saturating_mul(3)
}

/// The most memories a write adding at least [`BATCH_MIN_NEW`] of its own may
/// leave in the tail, by default: a 64th of the store, within [`TAIL_MIN_DOCS`]
/// and this. Up to 262,144 memories it is the [`default_cap`]; at 1M it is
/// 15,625, so that batched ingest merges the tail about once in eleven batches
/// of 1,000 observes instead of once in three, each merge sharing its rewrite of
/// a term's last block among four times the memories (`docs/PERFORMANCE.md`,
/// session 43). A smaller write (a single observe) that finds the tail past its
/// own cap adds to it as a batch would ([`Caps::for_write`]): the merge then
/// falls to the idle merge ([`merge_when_idle`]), the next batch, or the write
/// that would take the tail past this cap.
pub const TAIL_MAX_BATCH_DOCS: u64 = 16_384;

/// New memories from which a write counts as a batch for [`Caps::for_write`].
pub const BATCH_MIN_NEW: u64 = 512;

/// The tail's default size for a batch on a store of `docs` memories: a 64th of
/// them, within [`TAIL_MIN_DOCS`] and [`TAIL_MAX_BATCH_DOCS`].
#[must_use]
pub fn batch_cap(docs: u64) -> u64 {
    (docs / 64).clamp(TAIL_MIN_DOCS, TAIL_MAX_BATCH_DOCS)
}

/// How many memories the tail may hold before a write merges it, as a store was
/// opened with (`None`: the defaults, [`default_cap`] and [`batch_cap`] of the
/// store's size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    /// For writes of fewer than [`BATCH_MIN_NEW`] new memories (and for batches
    /// too while `batch` is unset).
    pub single: Option<u64>,
    /// For a write of at least [`BATCH_MIN_NEW`] new memories; when only
    /// `single` is set, it is this one too.
    pub batch: Option<u64>,
}

impl Caps {
    /// The cap for writes of fewer than [`BATCH_MIN_NEW`] new memories, on a
    /// store of `docs` memories.
    #[must_use]
    pub fn single(&self, docs: u64) -> u64 {
        self.single.unwrap_or_else(|| default_cap(docs))
    }

    /// The cap for writes of at least [`BATCH_MIN_NEW`] new memories, on a store
    /// of `docs` memories: never below [`Caps::single`].
    #[must_use]
    pub fn batch(&self, docs: u64) -> u64 {
        let batch = match (self.batch, self.single) {
            (Some(b), _) => b,
            (None, Some(s)) => s,
            (None, None) => batch_cap(docs),
        };
        batch.max(self.single(docs))
    }

    /// The cap for a write that adds `new` memories to a tail holding `held`, on a
    /// store now holding `docs`: the batch cap for a batch, and for any write
    /// once a batch has left the tail past the single cap (so that a small write
    /// after a bulk load does not pay the merge: the idle merge, the next batch
    /// or the write that reaches the batch cap does); else the single cap.
    #[must_use]
    pub fn for_write(&self, docs: u64, held: u64, new: u64) -> u64 {
        let single = self.single(docs);
        if new >= BATCH_MIN_NEW || held > single { self.batch(docs) } else { single }
    }
}

/// One tail row: a memory's index terms with their weighted frequencies, and its
/// weighted length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TailDoc {
    /// Weighted document length.
    pub len: u32,
    /// `(term, weighted frequency)`, sorted by term.
    pub terms: Vec<(String, u32)>,
}

/// A term's postings in the tail.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TailTerm {
    /// Ascending by docno.
    pub postings: Vec<Posting>,
    /// Bound of their scores.
    pub impacts: Impacts,
}

/// A tail row as the table stores it, read with its terms borrowed from the
/// stored bytes (the same encoding as [`TailDoc`]).
#[derive(Debug, Deserialize)]
struct TailDocRef<'a> {
    len: u32,
    #[serde(borrow)]
    terms: Vec<(&'a str, u32)>,
}

/// One memory of a [`Segment`]: its tail row as stored, and the `user_terms`
/// row derived from it the first time a recall asks for it (only recalls
/// filtered by an owner scored from its rows do, and then only for the owner's
/// memories, so indexing the tail computes none).
#[derive(Debug)]
struct TailMemory {
    stored: Box<[u8]>,
    row: OnceLock<Vec<u8>>,
}

impl TailMemory {
    /// The memory's `user_terms` row ([`super::doc_terms::tail_row`]).
    fn row(&self) -> Result<&[u8]> {
        if let Some(row) = self.row.get() {
            return Ok(row);
        }
        let doc: TailDocRef<'_> = super::decode(&self.stored, "postings tail")?;
        let row = super::doc_terms::encode_terms(doc.len, doc.terms.iter().copied());
        Ok(self.row.get_or_init(|| row))
    }
}

/// The index of the tail rows one commit (or one load) added.
#[derive(Debug, Default)]
struct Segment {
    terms: foldhash::HashMap<String, TailTerm>,
    /// Each memory's tail row (the table holds no `user_terms` row for a tail
    /// memory: `storage::doc_terms`), shared by the segments merged from this
    /// one.
    memories: foldhash::HashMap<u64, Arc<TailMemory>>,
    docs: u64,
}

impl Segment {
    /// Indexes memory `docno` from its tail row as stored.
    fn add(&mut self, docno: u64, stored: Box<[u8]>) -> Result<()> {
        let doc: TailDocRef<'_> = super::decode(&stored, "postings tail")?;
        for &(term, tf) in &doc.terms {
            // The term is copied only the first time the segment meets it.
            let t = match self.terms.get_mut(term) {
                Some(t) => t,
                None => self.terms.entry(term.to_owned()).or_default(),
            };
            t.postings.push(Posting { docno, tf, len: doc.len });
            t.impacts.add(tf, doc.len);
        }
        self.docs += 1;
        self.memories.insert(docno, Arc::new(TailMemory { stored, row: OnceLock::new() }));
        Ok(())
    }
}

/// Segments an index holds at most: past this, a commit merges them all into
/// one. The tiered merges of [`TailIndex::appended`] keep about log2 of the
/// tail's memories when commits add alike numbers of memories; commits of
/// falling sizes (1,000, then 999, then 998, ...) would each keep a segment of
/// their own.
const MAX_SEGMENTS: usize = 32;

/// The tail of one snapshot, indexed by term: segments in docno order, shared
/// between versions (a commit that appends to the tail adds a segment to the
/// previous version's index instead of indexing the whole tail again).
#[derive(Debug, Default, Clone)]
pub struct TailIndex {
    segments: Vec<Arc<Segment>>,
    docs: u64,
}

impl TailIndex {
    /// Indexes every row of `table`.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on an undecodable row.
    pub fn load(table: &impl ReadableTable<u64, &'static [u8]>) -> Result<Self> {
        let mut seg = Segment::default();
        for row in table.range::<u64>(..)? {
            let (k, v) = row?;
            seg.add(k.value(), v.value().into())?;
        }
        Ok(Self::default().with(seg))
    }

    /// This index with `docs` (tail rows as stored, their docnos above every
    /// docno it holds) added.
    ///
    /// The new segment is merged with the newest ones while each holds no
    /// more memories than the merge so far (as a binary counter carries): a
    /// memory is copied about log2 of the tail's size times over the tail's
    /// life, the segments number about that many, and a commit of one observe
    /// mostly copies a few memories, not the whole tail. (Merging every
    /// segment each eighth commit cost single observes at 1M ~0.24 ms each on
    /// average with a tail of up to 4,096 memories, ~0.65 ms with 15,000.)
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] on an undecodable row.
    pub fn appended(&self, docs: impl IntoIterator<Item = (u64, Box<[u8]>)>) -> Result<Self> {
        let mut seg = Segment::default();
        for (d, stored) in docs {
            seg.add(d, stored)?;
        }
        let mut kept = self.segments.len();
        let mut size = seg.docs;
        while kept > 0 && self.segments[kept - 1].docs <= size {
            kept -= 1;
            size += self.segments[kept].docs;
        }
        if self.segments.len() >= MAX_SEGMENTS {
            kept = 0;
        }
        if kept == self.segments.len() {
            return Ok(self.clone().with(seg));
        }
        // Merge the segments from `kept` on with the new one, in docno order.
        let mut all = Segment::default();
        for s in self.segments[kept..].iter().map(Arc::as_ref).chain([&seg]) {
            all.docs += s.docs;
            all.memories.extend(s.memories.iter().map(|(d, m)| (*d, Arc::clone(m))));
            for (term, t) in &s.terms {
                let m = all.terms.entry(term.clone()).or_default();
                m.postings.extend_from_slice(&t.postings);
                m.impacts.merge(&t.impacts);
            }
        }
        let older = Self {
            segments: self.segments[..kept].to_vec(),
            docs: self.segments[..kept].iter().map(|s| s.docs).sum(),
        };
        Ok(older.with(all))
    }

    fn with(mut self, seg: Segment) -> Self {
        if seg.docs > 0 {
            self.docs += seg.docs;
            self.segments.push(Arc::new(seg));
        }
        self
    }

    /// `term`'s tail postings (gathered from the segments).
    #[must_use]
    pub fn term(&self, term: &str) -> Option<TailTerm> {
        let mut out: Option<TailTerm> = None;
        for seg in &self.segments {
            if let Some(t) = seg.terms.get(term) {
                match &mut out {
                    None => out = Some(t.clone()),
                    Some(o) => {
                        o.postings.extend_from_slice(&t.postings);
                        o.impacts.merge(&t.impacts);
                    }
                }
            }
        }
        out
    }

    /// `term`'s tail document frequency and score bound (without gathering its
    /// postings).
    #[must_use]
    pub fn term_stats(&self, term: &str) -> Option<(u64, Impacts)> {
        let mut out: Option<(u64, Impacts)> = None;
        for t in self.segments.iter().filter_map(|s| s.terms.get(term)) {
            let (df, impacts) = out.get_or_insert_with(Default::default);
            *df += t.postings.len() as u64;
            impacts.merge(&t.impacts);
        }
        out
    }

    /// Every term with tail postings, with them.
    #[must_use]
    pub fn terms(&self) -> Vec<(String, TailTerm)> {
        let mut names: Vec<&String> = self.segments.iter().flat_map(|s| s.terms.keys()).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().filter_map(|n| Some((n.clone(), self.term(n)?))).collect()
    }

    /// The `user_terms` row of tail memory `docno` (`None` when it is not in
    /// the tail), derived from its tail row the first time it is asked for.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] on an undecodable row.
    pub fn row(&self, docno: u64) -> Result<Option<&[u8]>> {
        match self.segments.iter().find_map(|s| s.memories.get(&docno)) {
            Some(m) => m.row().map(Some),
            None => Ok(None),
        }
    }

    /// Memories in the tail.
    #[must_use]
    pub fn docs(&self) -> u64 {
        self.docs
    }
}

/// What a committed transaction did to the tail, for [`TailCache::committed`].
#[derive(Debug, Default)]
pub enum TailChange {
    /// Nothing.
    #[default]
    Unchanged,
    /// Rows added to the tail of version `prev`.
    Appended {
        /// The version the transaction started from.
        prev: u64,
        /// The rows added, as stored.
        docs: Vec<(u64, Box<[u8]>)>,
    },
    /// The tail was merged into the blocks; then these rows (if any) started a
    /// new one.
    Replaced {
        /// The rows of the new tail, as stored.
        docs: Vec<(u64, Box<[u8]>)>,
    },
}

/// What a write transaction has done to the tail so far.
#[derive(Debug, Default)]
pub struct TailWrites {
    changed: bool,
    merged: bool,
    /// Rows written since the last merge, as stored.
    added: Vec<(u64, Box<[u8]>)>,
}

impl TailWrites {
    /// A row written to the tail (as stored).
    pub fn add(&mut self, docno: u64, stored: Box<[u8]>) {
        self.changed = true;
        self.added.push((docno, stored));
    }

    /// The tail (with the rows written before) went to the blocks.
    pub fn merge(&mut self) {
        self.changed = true;
        self.merged = true;
        self.added.clear();
    }

    /// Whether the tail changed.
    #[must_use]
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The change, given the version the transaction started from; starts over.
    pub fn finish(&mut self, prev: u64) -> TailChange {
        let done = std::mem::take(self);
        if done.merged {
            TailChange::Replaced { docs: done.added }
        } else {
            TailChange::Appended { prev, docs: done.added }
        }
    }
}

/// Every row of a tail table, in docno order.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable row.
pub fn rows(table: &impl ReadableTable<u64, &'static [u8]>) -> Result<Vec<(u64, TailDoc)>> {
    let mut out = Vec::new();
    for row in table.range::<u64>(..)? {
        let (k, v) = row?;
        out.push((k.value(), super::decode(v.value(), "postings tail")?));
    }
    Ok(out)
}

/// Reads a stored tail version (meta `posting_tail_version`).
///
/// # Errors
/// [`crate::Error::Corrupted`] when it is not 8 bytes.
pub fn decode_version(bytes: &[u8]) -> Result<u64> {
    Ok(u64::from_le_bytes(
        bytes
            .try_into()
            .map_err(|_| crate::Error::Corrupted("postings tail version is not 8 bytes".into()))?,
    ))
}

/// Tail versions a [`TailCache`] keeps indexed.
const CACHED_VERSIONS: usize = 4;

/// The tail indexes of the tail versions readers and writers used last, most
/// recent first. A reader whose snapshot began just before a commit asks for the
/// version before it: kept here, it is not indexed again (a tail of thousands of
/// memories takes milliseconds to index), and indexing it does not push out the
/// version the next commit extends.
///
/// One reader indexes at a time: a reader that finds its version missing while
/// another indexes (the prewarm thread indexes the stored tail as the store
/// opens) waits for it and looks again, instead of indexing the same rows too.
#[derive(Debug, Default)]
pub struct TailCache {
    versions: parking_lot::Mutex<std::collections::VecDeque<(u64, Arc<TailIndex>)>>,
    indexing: parking_lot::Mutex<()>,
}

impl TailCache {
    /// The index of tail version `version`, from the cache or built by `load`
    /// (then cached). Version 0 is the empty tail.
    ///
    /// # Errors
    /// What `load` returns.
    pub fn get(
        &self,
        version: u64,
        load: impl FnOnce() -> Result<TailIndex>,
    ) -> Result<Arc<TailIndex>> {
        if let Some(index) = self.find(version) {
            return Ok(index);
        }
        let _indexing = self.indexing.lock();
        if let Some(index) = self.find(version) {
            return Ok(index);
        }
        let index = Arc::new(load()?);
        self.put(version, index.clone());
        Ok(index)
    }

    /// The cached index of `version` (the empty index for 0).
    pub(crate) fn find(&self, version: u64) -> Option<Arc<TailIndex>> {
        if version == 0 {
            return Some(Arc::new(TailIndex::default()));
        }
        self.versions.lock().iter().find(|(v, _)| *v == version).map(|(_, index)| index.clone())
    }

    /// Caches `index` as `version`'s, as the most recently used.
    fn put(&self, version: u64, index: Arc<TailIndex>) {
        let mut cache = self.versions.lock();
        cache.retain(|(v, _)| *v != version);
        cache.push_front((version, index));
        cache.truncate(CACHED_VERSIONS);
    }

    /// Brings the cache to `version` after a commit made `change`, without
    /// reading the table (when the cache holds the version the commit started
    /// from, or the tail was replaced).
    pub fn committed(&self, version: u64, change: TailChange) {
        if version == 0 {
            return;
        }
        if let Some(next) = self.index_after(change) {
            self.put(version, next);
        }
    }

    /// The index of the tail a commit making `change` leaves, built from the
    /// cached index it started from; `None` when the tail is unchanged or that
    /// index is not cached (readers then index the version themselves). Caches
    /// nothing: [`TailCache::committed`] does both, [`TailCache::commit_beside`]
    /// splits them.
    fn index_after(&self, change: TailChange) -> Option<Arc<TailIndex>> {
        let next = match change {
            TailChange::Unchanged => return None,
            TailChange::Appended { prev, docs } => self.find(prev)?.appended(docs),
            TailChange::Replaced { docs } => TailIndex::default().appended(docs),
        };
        // A row that does not decode (never seen: the writer just encoded it)
        // leaves the version to the readers, who report it.
        next.ok().map(Arc::new)
    }

    /// Runs `commit` (the commit that makes `version` visible) while another
    /// thread indexes the tail it leaves, when `change` brings enough rows to
    /// be worth a thread (a batch's: ~4.5% of the write thread's instructions
    /// at 1M, by callgrind, overlapped with the commit's writes and sync).
    /// Readers that miss `version` meanwhile wait for the index, as they wait
    /// for one another: they never index it themselves.
    ///
    /// # Errors
    /// What `commit` returns.
    pub fn commit_beside<T>(
        &self,
        version: u64,
        change: TailChange,
        commit: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let rows = match &change {
            TailChange::Unchanged => 0,
            TailChange::Appended { docs, .. } | TailChange::Replaced { docs } => docs.len(),
        };
        if version == 0 || rows < INDEX_BESIDE_ROWS {
            self.committed(version, change);
            return commit();
        }
        // Held before the version can be visible, so a reader that misses it
        // waits here instead of indexing it.
        let _indexing = self.indexing.lock();
        // Taken by the thread, or here when no thread can be started.
        let change = parking_lot::Mutex::new(Some(change));
        let index = || change.lock().take().and_then(|c| self.index_after(c));
        let (committed, next) = std::thread::scope(|s| {
            let builder = std::thread::Builder::new().name("soulmem-tail-index".into());
            match builder.spawn_scoped(s, index) {
                Ok(indexing) => {
                    let committed = commit();
                    // A panic of the indexing thread only leaves the version to
                    // readers.
                    (committed, indexing.join().ok().flatten())
                }
                Err(_) => {
                    let next = index();
                    (commit(), next)
                }
            }
        });
        if let Some(next) = next {
            self.put(version, next);
        }
        committed
    }
}

/// Rows of a commit's tail change from which [`TailCache::commit_beside`]
/// indexes them on a thread of its own (a single observe's few rows take less
/// than starting one).
const INDEX_BESIDE_ROWS: usize = 256;

/// A new tail version number (never 0).
#[must_use]
pub fn new_version() -> u64 {
    loop {
        let v = uuid::Uuid::new_v4().as_u64_pair().0;
        if v != 0 {
            return v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(i: u64) -> TailDoc {
        let words = ["kayak", "lake", "oslo", "rust", "tea"];
        let mut terms: Vec<(String, u32)> = words
            .iter()
            .enumerate()
            .filter(|(j, _)| (i + *j as u64) % 3 != 0)
            .map(|(j, w)| ((*w).to_owned(), 1 + ((i + j as u64) % 4) as u32))
            .collect();
        terms.sort();
        TailDoc { len: 10 + (i % 7) as u32, terms }
    }

    /// `doc(i)` as the tail table stores it.
    fn stored(i: u64) -> Box<[u8]> {
        crate::storage::encode(&doc(i)).expect("encode").into_boxed_slice()
    }

    /// An index extended commit by commit (merging its segments on the way)
    /// equals the index of all the rows at once, and the cache follows commits.
    #[test]
    fn appending_matches_indexing_everything() {
        let docs: Vec<(u64, Box<[u8]>)> = (100..160).map(|i| (i, stored(i))).collect();
        let mut whole = Segment::default();
        for (d, x) in &docs {
            whole.add(*d, x.clone()).expect("add");
        }
        let whole = TailIndex::default().with(whole);
        // Read from the stored rows, the postings are the rows' own.
        let mut want: std::collections::BTreeMap<String, Vec<Posting>> = Default::default();
        for i in 100..160 {
            let d = doc(i);
            for (term, tf) in &d.terms {
                want.entry(term.clone()).or_default().push(Posting {
                    docno: i,
                    tf: *tf,
                    len: d.len,
                });
            }
        }
        let got: Vec<(String, Vec<Posting>)> =
            whole.terms().into_iter().map(|(term, t)| (term, t.postings)).collect();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());

        let cache = TailCache::default();
        let mut version = 0;
        let mut grown = TailIndex::default();
        for (n, chunk) in docs.chunks(3).enumerate() {
            grown = grown.appended(chunk.iter().cloned()).expect("appended");
            assert!(grown.segments.len() <= MAX_SEGMENTS);
            let next = n as u64 + 1;
            let change = if n == 0 {
                TailChange::Replaced { docs: chunk.to_vec() }
            } else {
                TailChange::Appended { prev: version, docs: chunk.to_vec() }
            };
            cache.committed(next, change);
            version = next;
        }
        assert_eq!(grown.docs(), 60);
        assert_eq!(grown.terms(), whole.terms());
        // Each memory's terms row, through the segment merges.
        for (d, _) in &docs {
            let want = crate::storage::doc_terms::tail_row(&doc(*d));
            assert_eq!(grown.row(*d).expect("row"), Some(want.as_slice()), "docno {d}");
        }
        assert_eq!(grown.row(99).expect("row"), None);
        // One memory per commit: the merges carry as a binary counter does, so
        // the segments stay about log2 of the memories.
        let mut one_by_one = TailIndex::default();
        for (n, (d, x)) in docs.iter().enumerate() {
            one_by_one = one_by_one.appended([(*d, x.clone())]).expect("appended");
            let held = n + 1;
            assert_eq!(one_by_one.segments.len(), held.count_ones() as usize, "{held} memories");
        }
        assert_eq!(one_by_one.terms(), whole.terms());
        assert_eq!(one_by_one.docs(), 60);
        let cached = cache.get(version, || panic!("the cache follows the commits")).expect("get");
        assert_eq!(cached.terms(), whole.terms());
        // A commit from a version the cache does not hold leaves it to the readers.
        cache.committed(99, TailChange::Appended { prev: 12345, docs: vec![(500, stored(500))] });
        let loaded = cache.get(99, || Ok(TailIndex::default())).expect("get");
        assert_eq!(loaded.docs(), 0, "loaded by the reader, not guessed");
    }

    /// Two readers asking for the same missing version at once index it once:
    /// the second waits for the first and finds it cached.
    #[test]
    fn a_version_is_indexed_once_by_concurrent_readers() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let cache = TailCache::default();
        let loads = AtomicUsize::new(0);
        let start = std::sync::Barrier::new(2);
        let load = || {
            loads.fetch_add(1, Ordering::SeqCst);
            // Long enough that the other reader asks meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(50));
            TailIndex::default().appended([(7, stored(7))])
        };
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    start.wait();
                    assert_eq!(cache.get(5, load).expect("get").docs(), 1);
                });
            }
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    /// A batch's tail is indexed beside its commit: the index equals the one
    /// built before the commit, and a reader that misses the version during the
    /// commit waits for it rather than indexing the tail itself. A failed
    /// commit's error comes back.
    #[test]
    fn a_batch_is_indexed_beside_its_commit() {
        let rows = |from: u64, n: u64| (from..from + n).map(|i| (i, stored(i))).collect::<Vec<_>>();
        let (first, second) = (rows(1_000, 300), rows(2_000, 300));
        let inline = TailCache::default();
        inline.committed(1, TailChange::Replaced { docs: first.clone() });
        inline.committed(2, TailChange::Appended { prev: 1, docs: second.clone() });
        let beside = TailCache::default();
        let none = || -> Result<TailIndex> { panic!("indexed by a reader") };
        beside.commit_beside(1, TailChange::Replaced { docs: first }, || Ok(())).expect("commit");
        let asking = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                asking.wait();
                beside.get(2, none).expect("get").terms()
            });
            let change = TailChange::Appended { prev: 1, docs: second };
            beside
                .commit_beside(2, change, || {
                    // The version is visible from here: a reader asks for it.
                    asking.wait();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Ok(())
                })
                .expect("commit");
            assert_eq!(
                reader.join().expect("the reader waited"),
                inline.get(2, none).expect("get").terms()
            );
        });
        let failed =
            beside.commit_beside(3, TailChange::Replaced { docs: rows(3_000, 300) }, || {
                Err::<(), _>(crate::Error::Storage("disk full".into()))
            });
        assert!(matches!(failed, Err(crate::Error::Storage(m)) if m == "disk full"));
    }

    /// A reader whose snapshot is a commit or two behind finds its version
    /// indexed; a version a reader indexed is kept, and the next commit extends
    /// it; the least recently used version goes first.
    #[test]
    fn recent_versions_stay_indexed() {
        let cache = TailCache::default();
        cache.committed(1, TailChange::Replaced { docs: vec![(10, stored(10))] });
        cache.committed(2, TailChange::Appended { prev: 1, docs: vec![(11, stored(11))] });
        cache.committed(3, TailChange::Appended { prev: 2, docs: vec![(12, stored(12))] });
        let none = || -> Result<TailIndex> { panic!("indexed again") };
        assert_eq!(cache.get(2, none).expect("get").docs(), 2);
        assert_eq!(cache.get(3, none).expect("get").docs(), 3);
        // A version loaded by a reader is kept, and the next commit extends it.
        let loaded = cache.get(77, || Ok(TailIndex::default())).expect("get");
        assert_eq!(loaded.docs(), 0);
        cache.committed(78, TailChange::Appended { prev: 77, docs: vec![(20, stored(20))] });
        assert_eq!(cache.get(78, none).expect("get").docs(), 1);
        cache.committed(4, TailChange::Appended { prev: 3, docs: vec![(13, stored(13))] });
        assert_eq!(cache.get(4, none).expect("get").docs(), 4);
        assert_eq!(cache.get(3, none).expect("get").docs(), 3);
        // A tail started after a merge (from the empty version 0) is followed too.
        cache.committed(50, TailChange::Appended { prev: 0, docs: vec![(30, stored(30))] });
        assert_eq!(cache.get(50, none).expect("get").docs(), 1);
        // Only the last few versions are kept.
        for v in 5..5 + CACHED_VERSIONS as u64 {
            cache.committed(
                v,
                TailChange::Appended { prev: v - 1, docs: vec![(10 + v, stored(v))] },
            );
        }
        let mut reloaded = false;
        let _ = cache.get(2, || {
            reloaded = true;
            Ok(TailIndex::default())
        });
        assert!(reloaded, "version 2 was dropped");
    }
}
