//! Access records not yet written to the store.
//!
//! Recall records an access on every memory it returns (ACT-R's frequency and
//! recency). Writing those records in a transaction of its own made every recall a
//! writer: a commit per recall (about a fifth of a recall's time at 1M memories) and
//! a wait for the write lock whenever an observe was committing. Instead, recall
//! appends them here. They are written, oldest first, by a background thread once
//! more than [`FLUSH_AT`] are pending (in commits of [`FLUSH_CHUNK`] while
//! durable writes are going on, else of [`FLUSH_CHUNK_IDLE`]), by a write
//! that stores an entry read through them (`Memory::update`, see
//! `Store::write_current`), and when the store is closed.
//!
//! Reads overlay the pending records on what they read from the store
//! ([`AccessView`]), so a recall, `get` or export sees exactly what it would see had
//! each access been written at once. Other writers read entries and their compact
//! records as stored; what they write back keeps the records valid (they are
//! applied on top later). Writing a record rewrites the memory's compact record
//! only: a memory's access metadata lives there (schema 6). Each record
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

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::docinfo::DocInfo;
use crate::model::{MemoryEntry, Timestamp, time};

/// Pending records past which they are written in the background, oldest first.
pub const FLUSH_AT: usize = 1024;

/// Records written per commit by the background writer while durable writes
/// are going on: short commits, so that an observe arriving meanwhile waits
/// little for the write lock.
pub const FLUSH_CHUNK: u64 = 32;

/// Records written per commit by the background writer under reads alone: a
/// run's records in one commit. Most of a 32-record commit's time is the
/// commit's own: ~1.7 ms a commit at 1M memories, against ~3.5 ms for 256
/// records (`docs/PERFORMANCE.md`, session 54).
pub const FLUSH_CHUNK_IDLE: u64 = (FLUSH_AT / 2) as u64;

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
    /// Every record held, in number order: `(number, docno, when)`. Written
    /// records stay while a read that began before they were written may still
    /// need them. Records are made, written and dropped in number order, so each
    /// of those steps touches only the records it makes, writes or drops, however
    /// many wait behind them.
    order: VecDeque<(u64, u64, Timestamp)>,
    /// The same records per memory, in order: `(number, when)`.
    by_doc: foldhash::HashMap<u64, VecDeque<(u64, Timestamp)>>,
    /// Open reads, by the `written` they began after: a read needs the records
    /// after its own.
    readers: std::collections::BTreeMap<u64, usize>,
    /// Bumped when the store is emptied: a record made by a read of an earlier
    /// epoch names a memory that is gone (its docno may now be another's).
    epoch: u64,
}

impl State {
    /// The records numbered in `(after, upto]`, in order.
    fn between(&self, after: u64, upto: u64) -> impl Iterator<Item = &(u64, u64, Timestamp)> {
        let from = self.order.partition_point(|&(seq, _, _)| seq <= after);
        self.order.range(from..).take_while(move |&&(seq, _, _)| seq <= upto)
    }

    /// Per memory (in docno order), the times of its records numbered in
    /// `(after, upto]`, in order; and the number of the last of them (`after`
    /// when there are none).
    fn times_between(&self, after: u64, upto: u64) -> (Vec<(u64, Vec<Timestamp>)>, u64) {
        let mut per: foldhash::HashMap<u64, Vec<Timestamp>> = foldhash::HashMap::default();
        let mut last = after;
        for &(seq, docno, at) in self.between(after, upto) {
            per.entry(docno).or_default().push(at);
            last = seq;
        }
        let mut out: Vec<(u64, Vec<Timestamp>)> = per.into_iter().collect();
        out.sort_unstable_by_key(|(d, _)| *d);
        (out, last)
    }

    /// Drops the records no open read needs (written, and held by every
    /// snapshot), oldest first. Returns how many.
    fn collect(&mut self) -> usize {
        let keep_after = self.readers.keys().next().map_or(self.written, |&r| r.min(self.written));
        let mut dropped = 0usize;
        while let Some(&(seq, docno, _)) = self.order.front() {
            if seq > keep_after {
                break;
            }
            self.order.pop_front();
            dropped += 1;
            // A memory's records are in number order too: this is its oldest.
            if let Some(recs) = self.by_doc.get_mut(&docno) {
                recs.pop_front();
                if recs.is_empty() {
                    self.by_doc.remove(&docno);
                }
            }
        }
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
                order: VecDeque::new(),
                by_doc: foldhash::HashMap::default(),
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
            s.order.push_back((seq, d, at));
            s.by_doc.entry(d).or_default().push_back((seq, at));
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
        s.order.clear();
        s.by_doc.clear();
        self.held.store(0, Ordering::Release);
        self.pending.store(0, Ordering::Release);
    }

    /// The records numbered in `(applied, limit]`, per memory in docno order, and
    /// the number of the last of them (`applied` when there are none).
    pub(crate) fn unapplied(&self, applied: u64, limit: u64) -> (Unapplied, u64) {
        self.state.lock().times_between(applied, limit)
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

    /// Calls `f` with the time of each record of `docno` in `(applied, upto]`, in
    /// order, under the log's lock (no copy of them is made).
    fn each_time(&self, docno: u64, applied: u64, upto: u64, mut f: impl FnMut(Timestamp)) {
        if self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        let s = self.state.lock();
        if let Some(recs) = s.by_doc.get(&docno) {
            for &(seq, t) in recs {
                if seq > applied && seq <= upto {
                    f(t);
                }
            }
        }
    }

    /// The records of `docno` in `(applied, upto]`, in order.
    #[cfg(test)]
    fn times(&self, docno: u64, applied: u64, upto: u64) -> Vec<Timestamp> {
        let mut out = Vec::new();
        self.each_time(docno, applied, upto, |t| out.push(t));
        out
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
    Frozen { times: Arc<foldhash::HashMap<u64, Vec<Timestamp>>>, cap: usize },
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
                let copy = log.state.lock().times_between(*applied, *upto).0.into_iter().collect();
                Self::Frozen { times: Arc::new(copy), cap: log.cap() }
            }
            other => other.clone(),
        }
    }

    /// Calls `f` with each pending access of `docno`, in order, and the
    /// timestamps kept.
    fn each_time(&self, docno: u64, mut f: impl FnMut(Timestamp, usize)) {
        match self {
            Self::None => {}
            Self::Live { log, applied, upto, .. } => {
                let cap = log.cap();
                log.each_time(docno, *applied, *upto, |t| f(t, cap));
            }
            Self::Frozen { times, cap } => {
                for &t in times.get(&docno).map_or(&[][..], Vec::as_slice) {
                    f(t, *cap);
                }
            }
        }
    }

    /// The pending accesses of `docno`, in order, and the timestamps kept.
    fn times(&self, docno: u64) -> (Vec<Timestamp>, usize) {
        let (mut times, mut kept) = (Vec::new(), 0);
        self.each_time(docno, |t, cap| {
            times.push(t);
            kept = cap;
        });
        (times, kept)
    }

    /// Adds the pending accesses of `docno` to its entry.
    pub(crate) fn entry(&self, docno: u64, e: &mut MemoryEntry) {
        let (times, cap) = self.times(docno);
        if !times.is_empty() {
            e.record_accesses(times, cap);
        }
    }

    /// Adds the pending accesses of `docno` to its compact record.
    pub(crate) fn info(&self, docno: u64, info: &mut DocInfo) {
        let (times, cap) = self.times(docno);
        if !times.is_empty() {
            info.record_accesses(times.iter().map(time::to_micros), cap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One step of a store's use of its log.
    #[derive(Debug, Clone)]
    enum Step {
        /// A recall returning these memories.
        Record(Vec<u64>),
        /// A read begins (kept open until a later `EndRead`).
        BeginRead,
        /// The oldest open read ends.
        EndRead,
        /// The writer writes up to this many records in one commit.
        Write(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => proptest::collection::vec(0u64..12, 1..6).prop_map(Step::Record),
            1 => Just(Step::BeginRead),
            1 => Just(Step::EndRead),
            2 => (1u64..40).prop_map(Step::Write),
        ]
    }

    fn at(i: u64) -> Timestamp {
        time::from_micros(1_700_000_000_000_000 + i64::try_from(i).unwrap_or(0))
    }

    /// The records of `all` numbered in `(after, upto]`, per memory in docno order.
    fn model_range(all: &[(u64, u64, Timestamp)], after: u64, upto: u64) -> Unapplied {
        let mut per: std::collections::BTreeMap<u64, Vec<Timestamp>> = Default::default();
        for &(seq, d, t) in all {
            if seq > after && seq <= upto {
                per.entry(d).or_default().push(t);
            }
        }
        per.into_iter().collect()
    }

    proptest! {
        /// Against a model that keeps every record: what the writer takes, what an
        /// open read sees, and how many records are held (only those some read or
        /// the writer may still need).
        #[test]
        fn the_log_answers_as_a_model_that_forgets_nothing(
            steps in proptest::collection::vec(step(), 1..120),
        ) {
            let log = Arc::new(AccessLog::new(0, 5));
            let mut all: Vec<(u64, u64, Timestamp)> = Vec::new();
            let mut reads: std::collections::VecDeque<(ReadGuard, u64, u64)> = Default::default();
            let mut applied = 0u64;
            for (i, s) in steps.into_iter().enumerate() {
                match s {
                    Step::Record(docs) => {
                        let t = at(i as u64);
                        log.record(&docs, t, 0);
                        for d in docs {
                            all.push((all.len() as u64 + 1, d, t));
                        }
                    }
                    Step::BeginRead => {
                        let (g, upto) = AccessLog::open_read(&log);
                        reads.push_back((g, applied, upto));
                    }
                    Step::EndRead => {
                        reads.pop_front();
                    }
                    Step::Write(n) => {
                        let limit = applied + n;
                        let (taken, last) = log.unapplied(applied, limit);
                        prop_assert_eq!(&taken, &model_range(&all, applied, limit));
                        prop_assert_eq!(last, limit.min(all.len() as u64).max(applied));
                        if last > applied {
                            log.committed(last);
                            applied = last;
                        }
                    }
                }
                prop_assert_eq!(log.pending(), all.len() - applied as usize);
                // Every open read still sees the records its snapshot lacks.
                for (_, after, upto) in &reads {
                    for d in 0..12 {
                        let want: Vec<Timestamp> = model_range(&all, *after, *upto)
                            .into_iter()
                            .find(|(x, _)| *x == d)
                            .map(|(_, t)| t)
                            .unwrap_or_default();
                        prop_assert_eq!(log.times(d, *after, *upto), want);
                    }
                }
                // Held: from the oldest record an open read or the writer needs.
                let keep_after = reads.iter().map(|r| r.1).min().unwrap_or(applied).min(applied);
                let held = all.len() - keep_after as usize;
                let s = log.state.lock();
                prop_assert_eq!(s.order.len(), held);
                prop_assert_eq!(s.by_doc.values().map(VecDeque::len).sum::<usize>(), held);
                drop(s);
                prop_assert_eq!(log.held.load(Ordering::Acquire), held);
            }
        }
    }
}
