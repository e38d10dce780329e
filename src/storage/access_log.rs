//! Access records not yet written to the store.
//!
//! Recall records an access on every memory it returns (ACT-R's frequency and
//! recency). Writing those records in a transaction of its own made every recall a
//! writer: a commit per recall (about a fifth of a recall's time at 1M memories) and
//! a wait for the write lock whenever an observe was committing. Instead, recall
//! appends them here. They are written, oldest first, by a background thread once
//! more than [`FLUSH_AT`] are pending (in commits of [`FLUSH_CHUNK`]), by a write
//! that stores an entry read through them (`Memory::update`, see
//! `Store::write_current`), and when the store is closed.
//!
//! Reads overlay the pending records on what they read from the store
//! ([`AccessView`]), so a recall, `get` or export sees exactly what it would see had
//! each access been written at once. Other writers read entries as stored; what they
//! write back keeps the records valid (they are applied on top later). Each record
//! has a sequence number; the store keeps the number of the last record written
//! (meta [`super::meta_keys::ACCESS_APPLIED`]) in the same transaction as the
//! records, so a read snapshot overlays precisely the records its snapshot does not
//! hold, and no record is applied twice.
//!
//! The background writer syncs its commits (unless the store was opened with
//! `durable = false`) while durable writes are going on, so an observe's commit
//! never waits to sync pages the access records dirtied; under reads alone it
//! syncs the last commit of each run and one in sixteen. At rest, a crash loses
//! at most the records not yet written, never a memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::docinfo::DocInfo;
use crate::model::{MemoryEntry, Timestamp, time};

/// Pending records past which they are written in the background, oldest first.
pub const FLUSH_AT: usize = 1024;

/// Records written per commit by the background writer.
pub const FLUSH_CHUNK: u64 = 32;

/// The pending access records of a store (see the module docs).
#[derive(Debug)]
pub(crate) struct AccessLog {
    state: Mutex<State>,
    /// Records held (written or not): lets reads skip the lock when there are none.
    held: AtomicUsize,
    /// Records not written yet.
    pending: AtomicUsize,
    /// Timestamps kept per memory ([`crate::Settings::access_history_cap`]).
    cap: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    /// Number of the last record made.
    last: u64,
    /// Number of the last record the store holds (records are written in order).
    written: u64,
    /// Per memory, its records in order: `(number, when)`. Written records stay
    /// while a read that began before they were written may still need them.
    by_doc: HashMap<u64, Vec<(u64, Timestamp)>>,
    /// Open reads, by the `written` they began after: a read needs the records
    /// after its own.
    readers: std::collections::BTreeMap<u64, usize>,
    /// Bumped when the store is emptied: a record made by a read of an earlier
    /// epoch names a memory that is gone (its docno may now be another's).
    epoch: u64,
}

/// The records of `recs` numbered in `(after, upto]`, in order.
fn in_range(
    recs: &[(u64, Timestamp)],
    after: u64,
    upto: u64,
) -> impl Iterator<Item = (u64, Timestamp)> + '_ {
    recs.iter().copied().filter(move |&(seq, _)| seq > after && seq <= upto)
}

/// The times of `recs` numbered in `(after, upto]`, in order.
fn times_in(recs: &[(u64, Timestamp)], after: u64, upto: u64) -> Vec<Timestamp> {
    in_range(recs, after, upto).map(|(_, t)| t).collect()
}

impl State {
    /// Per memory, the times of its records numbered in `(after, upto]`.
    fn times_between(&self, after: u64, upto: u64) -> impl Iterator<Item = (u64, Vec<Timestamp>)> {
        self.by_doc
            .iter()
            .map(move |(&d, recs)| (d, times_in(recs, after, upto)))
            .filter(|(_, times)| !times.is_empty())
    }

    /// Drops the records no open read needs (written, and held by every snapshot).
    fn collect(&mut self) -> usize {
        let keep_after = self.readers.keys().next().map_or(self.written, |&r| r.min(self.written));
        let mut dropped = 0usize;
        self.by_doc.retain(|_, recs| {
            let before = recs.len();
            recs.retain(|(seq, _)| *seq > keep_after);
            dropped += before - recs.len();
            !recs.is_empty()
        });
        dropped
    }
}

/// Registration of an open read (see [`AccessLog::open_read`]).
#[derive(Debug)]
pub(crate) struct ReadGuard {
    log: Arc<AccessLog>,
    after: u64,
    /// The log's epoch when the read began.
    pub(crate) epoch: u64,
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        let mut s = self.log.state.lock();
        let first = s.readers.keys().next().copied();
        if let Some(n) = s.readers.get_mut(&self.after) {
            *n -= 1;
            if *n == 0 {
                s.readers.remove(&self.after);
            }
        }
        // The oldest read is done: the records only it needed can go.
        if first == Some(self.after) && s.written > self.after {
            let dropped = s.collect();
            self.log.held.fetch_sub(dropped, Ordering::AcqRel);
        }
    }
}

/// Per memory, the accesses a writer applies: `(docno, times in order)`.
pub(crate) type Unapplied = Vec<(u64, Vec<Timestamp>)>;

impl AccessLog {
    /// An empty log continuing after record `applied` (the store's last written).
    pub(crate) fn new(applied: u64, cap: usize) -> Self {
        Self {
            state: Mutex::new(State {
                last: applied,
                written: applied,
                by_doc: HashMap::new(),
                readers: std::collections::BTreeMap::new(),
                epoch: 0,
            }),
            held: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            cap: AtomicUsize::new(cap),
        }
    }

    /// Timestamps kept per memory.
    pub(crate) fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// Sets the timestamps kept per memory.
    pub(crate) fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// Records not written yet.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Whether every record is written.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending() == 0
    }

    /// Records an access at `at` on each of `docnos`, read by a read of `epoch`
    /// (records of an emptied store's memories are dropped). Returns the records
    /// pending.
    pub(crate) fn record(&self, docnos: &[u64], at: Timestamp, epoch: u64) -> usize {
        let mut s = self.state.lock();
        if epoch != s.epoch {
            return self.pending();
        }
        for &d in docnos {
            s.last += 1;
            let seq = s.last;
            s.by_doc.entry(d).or_default().push((seq, at));
        }
        self.held.fetch_add(docnos.len(), Ordering::AcqRel);
        let pending = usize::try_from(s.last - s.written).unwrap_or(usize::MAX);
        self.pending.store(pending, Ordering::Release);
        pending
    }

    /// Registers a read about to begin its snapshot: the records after the last
    /// one written so far are kept for it until the guard is dropped. (Its snapshot
    /// holds at least those written so far.)
    pub(crate) fn open_read(log: &Arc<AccessLog>) -> (ReadGuard, u64) {
        let mut s = log.state.lock();
        let after = s.written;
        *s.readers.entry(after).or_default() += 1;
        (ReadGuard { log: Arc::clone(log), after, epoch: s.epoch }, s.last)
    }

    /// Notes that a committed transaction emptied the store: every record made so
    /// far is void, and so is any a read begun before makes later.
    pub(crate) fn cleared(&self) {
        let mut s = self.state.lock();
        s.epoch += 1;
        s.written = s.last;
        s.by_doc.clear();
        self.held.store(0, Ordering::Release);
        self.pending.store(0, Ordering::Release);
    }

    /// The records numbered in `(applied, limit]`, per memory in docno order, and
    /// the number of the last of them (`applied` when there are none).
    pub(crate) fn unapplied(&self, applied: u64, limit: u64) -> (Unapplied, u64) {
        let s = self.state.lock();
        let mut last = applied;
        let mut out: Unapplied = Vec::new();
        for (&d, recs) in &s.by_doc {
            let mut times = Vec::new();
            for (seq, t) in in_range(recs, applied, limit) {
                times.push(t);
                last = last.max(seq);
            }
            if !times.is_empty() {
                out.push((d, times));
            }
        }
        out.sort_unstable_by_key(|(d, _)| *d);
        (out, last)
    }

    /// Number of the last record made.
    pub(crate) fn last(&self) -> u64 {
        self.state.lock().last
    }

    /// Number of the last record the store holds.
    pub(crate) fn written(&self) -> u64 {
        self.state.lock().written
    }

    /// Notes that a committed transaction wrote the records up to `upto`, and
    /// drops those no open read needs.
    pub(crate) fn committed(&self, upto: u64) {
        let mut s = self.state.lock();
        if upto <= s.written {
            return;
        }
        s.written = upto.min(s.last);
        let pending = usize::try_from(s.last - s.written).unwrap_or(usize::MAX);
        self.pending.store(pending, Ordering::Release);
        let dropped = s.collect();
        self.held.fetch_sub(dropped, Ordering::AcqRel);
    }

    /// The records of `docno` in `(applied, upto]`, in order.
    fn times(&self, docno: u64, applied: u64, upto: u64) -> Vec<Timestamp> {
        if self.held.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let s = self.state.lock();
        s.by_doc.get(&docno).map_or_else(Vec::new, |recs| times_in(recs, applied, upto))
    }
}

/// What a read snapshot overlays on the access metadata it reads.
#[derive(Debug, Clone)]
pub(crate) enum AccessView {
    /// Nothing to overlay (no record the snapshot lacks).
    None,
    /// The records of the live log in `(applied, upto]`: after the snapshot's last
    /// written record, up to the last record made when the snapshot was taken. The
    /// guard keeps them in the log while the snapshot is open.
    Live { log: Arc<AccessLog>, applied: u64, upto: u64, _guard: Arc<ReadGuard> },
    /// A copy of them, for long-lived snapshots (the live log forgets records once
    /// they are written, which such a snapshot would not see).
    Frozen { times: Arc<HashMap<u64, Vec<Timestamp>>>, cap: usize },
}

impl AccessView {
    /// The view of `log` for a snapshot whose last written record is `applied`,
    /// registered (`guard`, `upto`) by [`AccessLog::open_read`] before it began.
    pub(crate) fn live(log: &Arc<AccessLog>, applied: u64, guard: ReadGuard, upto: u64) -> Self {
        if upto <= applied {
            return Self::None;
        }
        Self::Live { log: Arc::clone(log), applied, upto, _guard: Arc::new(guard) }
    }

    /// The same view, no longer depending on the live log.
    pub(crate) fn frozen(&self) -> Self {
        match self {
            Self::Live { log, applied, upto, .. } => {
                let copy = log.state.lock().times_between(*applied, *upto).collect();
                Self::Frozen { times: Arc::new(copy), cap: log.cap() }
            }
            other => other.clone(),
        }
    }

    /// The pending accesses of `docno`, in order, and the timestamps kept.
    fn times(&self, docno: u64) -> (Vec<Timestamp>, usize) {
        match self {
            Self::None => (Vec::new(), 0),
            Self::Live { log, applied, upto, .. } => (log.times(docno, *applied, *upto), log.cap()),
            Self::Frozen { times, cap } => (times.get(&docno).cloned().unwrap_or_default(), *cap),
        }
    }

    /// Adds the pending accesses of `docno` to its entry.
    pub(crate) fn entry(&self, docno: u64, e: &mut MemoryEntry) {
        let (times, cap) = self.times(docno);
        for t in times {
            e.record_access(t, cap);
        }
    }

    /// Adds the pending accesses of `docno` to its compact record.
    pub(crate) fn info(&self, docno: u64, info: &mut DocInfo) {
        let (times, cap) = self.times(docno);
        for t in times {
            info.record_access(time::to_micros(&t), cap);
        }
    }
}
