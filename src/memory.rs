//! [`Memory`]: the public handle on a store.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Profile;
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::model::{CoreMemory, MemoryEntry, MemoryType, Timestamp};
use crate::read::smart::CognitiveEngine;
use crate::read::vector::Embedder;
use crate::storage::prewarm::{self, Prewarm};
use crate::storage::{Reader, Store, WriteTimings, Writer, meta_keys, schema};

/// How full the postings tail is ([`Memory::postings_tail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailFill {
    /// Memories whose postings the tail holds.
    pub memories: u64,
    /// How many it takes before a write merges it into the blocks.
    pub cap: u64,
    /// How many a write of at least [`crate::storage::tail::BATCH_MIN_NEW`] new
    /// memories (a batch) may leave in it; once a batch has left it past `cap`,
    /// smaller writes add to it up to this too.
    pub batch_cap: u64,
}

/// Engine settings. Defaults follow soul-protocol's `MemorySettings` where they
/// exist.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Episodic cap; the least significant entries are evicted past it. `None` turns
    /// eviction off. Default: 10,000 in the reference profile, off in the default one.
    pub episodic_max_entries: Option<u64>,
    /// Semantic fact cap; the least important facts are evicted past it. `None` turns
    /// eviction off. Default: 1,000 in the reference profile, off in the default one.
    pub semantic_max_facts: Option<u64>,
    /// Skip entity extraction and the self-model update for insignificant exchanges.
    /// Default: true.
    pub skip_deep_processing_on_low_significance: bool,
    /// Access timestamps kept per memory. Default: 100.
    pub access_history_cap: usize,
    /// Bond strength at which `bonded` memories become visible to a requester.
    /// Default: 30.
    pub bond_threshold: f64,
    /// Commit every write durably (fsync). Default: true. The batch writes can
    /// also choose per call ([`Durability`]); [`Memory::sync`] makes every commit
    /// so far durable.
    pub durable: bool,
    /// The soul's core values (goal relevance in the significance gate). Default: none.
    pub core_values: Vec<String>,
    /// Rerank recall results with the cognitive engine (smart recall) unless a query
    /// says otherwise ([`crate::RecallQuery::smart`]). Needs
    /// [`MemoryBuilder::cognitive_engine`]. Default: false, as in soul-protocol.
    pub smart_recall_enabled: bool,
    /// How long smart recall waits for the engine before keeping the heuristic order.
    /// Default: 30 s.
    pub smart_recall_timeout: std::time::Duration,
    /// Weight λ of vector similarity in hybrid recall, 0 to 1 (default
    /// [`crate::read::vector::HYBRID_WEIGHT`]); 0 ranks by text alone while still
    /// adding vector candidates.
    pub hybrid_weight: f64,
    /// How hybrid recall combines text and vectors (default rank fusion).
    pub hybrid_fusion: crate::read::vector::HybridFusion,
    /// Vector candidates merged into the pool per recall (default
    /// [`crate::read::vector::VECTOR_CANDIDATES`]; never fewer than the limit).
    pub vector_candidates: usize,
    /// Stored vectors up to which hybrid recall scans them all for vector-only
    /// candidates (default [`crate::read::vector::VECTOR_SCAN_MAX`]). Beyond it the
    /// work stays bounded: vector similarity is fused into the text and graph pool
    /// only (no scan), until an approximate index exists.
    pub vector_scan_max: u64,
    /// Once a write leaves a long postings tail three quarters full (see
    /// [`crate::storage::tail::IDLE_MERGE_MIN_DOCS`]), or the store is opened
    /// with one, a thread merges it into the blocks as soon as no write has run
    /// for this long (counting from the opening until the first write), so that
    /// the write that would fill it does not pay for the merge. `None`: only
    /// that write, or [`Memory::merge_postings_tail`], merges it. Default: 1 s.
    pub idle_tail_merge: Option<std::time::Duration>,
}

impl Settings {
    /// The defaults for `profile`.
    #[must_use]
    pub fn for_profile(profile: Profile) -> Self {
        let (ep, sem) = match profile {
            Profile::Reference => (Some(10_000), Some(1_000)),
            Profile::Default => (None, None),
        };
        Self {
            episodic_max_entries: ep,
            semantic_max_facts: sem,
            skip_deep_processing_on_low_significance: true,
            access_history_cap: 100,
            bond_threshold: 30.0,
            durable: true,
            core_values: Vec::new(),
            smart_recall_enabled: false,
            smart_recall_timeout: std::time::Duration::from_secs(30),
            hybrid_weight: crate::read::vector::HYBRID_WEIGHT,
            hybrid_fusion: crate::read::vector::HybridFusion::Rrf,
            vector_candidates: crate::read::vector::VECTOR_CANDIDATES,
            vector_scan_max: crate::read::vector::VECTOR_SCAN_MAX,
            idle_tail_merge: Some(std::time::Duration::from_secs(1)),
        }
    }
}

/// When a write transaction's commit reaches the disk: the choice the batch write
/// paths take per call ([`Memory::add_batch_with`], [`Memory::observe_batch_with`],
/// [`Memory::ingest_batch_with`]); every other write follows [`Settings::durable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Synced (fsync) before the call returns: a crash or a power loss afterwards
    /// loses none of it.
    Immediate,
    /// Committed without a sync: visible to reads at once, and durable with the
    /// next synced commit ([`Memory::sync`], any synced write, or closing the
    /// store). A crash before then takes the store back to its last synced commit:
    /// deferred transactions are lost whole, never in part, and nothing synced is
    /// lost. For bulk loads, which can redo what they lose (`soulctl ingest
    /// --sync-every N` resumes from the last synced batch): it saves each batch
    /// its sync.
    Deferred,
}

impl Durability {
    /// Whether the commit is synced.
    pub(crate) fn synced(self) -> bool {
        self == Durability::Immediate
    }
}

/// Configures and opens a [`Memory`].
#[derive(Debug)]
pub struct MemoryBuilder {
    profile: Profile,
    settings: Option<Settings>,
    clock: Arc<dyn Clock>,
    cache_bytes: Option<usize>,
    postings_cache_bytes: Option<usize>,
    postings_tail_docs: Option<u64>,
    postings_tail_batch_docs: Option<u64>,
    check_integrity: bool,
    prewarm: bool,
    embedder: Option<Arc<dyn Embedder>>,
    engine: Option<Arc<dyn CognitiveEngine>>,
}

impl Default for MemoryBuilder {
    fn default() -> Self {
        Self {
            profile: Profile::Default,
            settings: None,
            clock: Arc::new(SystemClock),
            cache_bytes: None,
            postings_cache_bytes: None,
            postings_tail_docs: None,
            postings_tail_batch_docs: None,
            check_integrity: false,
            prewarm: true,
            embedder: None,
            engine: None,
        }
    }
}

impl MemoryBuilder {
    /// The behaviour profile of a new store (default: [`Profile::Default`]). An
    /// existing store keeps the profile it was created with.
    #[must_use]
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// Engine settings (default: [`Settings::for_profile`]).
    #[must_use]
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// The clock (default: [`SystemClock`]).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// redb's page cache size in bytes (default: redb's default).
    #[must_use]
    pub fn cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = Some(bytes);
        self
    }

    /// Bytes of decoded postings kept in memory for the most-searched terms,
    /// shared by every recall (default: 256 MiB; 0 turns it off). Long postings
    /// lists searched again are then walked in memory instead of decoded from
    /// their blocks; see `storage::block_cache`.
    #[must_use]
    pub fn postings_cache_bytes(mut self, bytes: usize) -> Self {
        self.postings_cache_bytes = Some(bytes);
        self
    }

    /// How many of the newest memories the postings tail may hold before a write
    /// merges it into the posting blocks (default: a 64th of the store's
    /// memories, at least 256 and at most 4,096, and for batches
    /// [`Self::postings_tail_batch_docs`]; 0 sends every write's postings to the
    /// blocks; see `storage::tail`). Writes that only add
    /// memories append each one's postings to the tail as one row; the merge
    /// rewrites the last block of every term the tail holds. A longer tail makes
    /// merges rarer (faster batched ingest, a longer single merge when one
    /// comes); searches bound the tail's postings as they read them instead of
    /// from stored bounds.
    #[must_use]
    pub fn postings_tail_docs(mut self, docs: u64) -> Self {
        self.postings_tail_docs = Some(docs);
        self
    }

    /// How many of the newest memories a write adding at least
    /// [`crate::storage::tail::BATCH_MIN_NEW`] memories of its own (a batch) may
    /// leave in the postings tail (default: the [`Self::postings_tail_docs`] set,
    /// else a 64th of the store's memories, at least 256 and at most 16,384; never
    /// less than the tail's cap for other writes). Batched ingest then merges the
    /// tail less often. Smaller writes that find a tail a batch left past their own
    /// cap add to it up to this cap too, so the merge falls to
    /// [`Settings::idle_tail_merge`], the next batch, or the write that would pass
    /// this cap, which at 1M memories and 16,384 memories in the tail takes ~0.5 s.
    #[must_use]
    pub fn postings_tail_batch_docs(mut self, docs: u64) -> Self {
        self.postings_tail_batch_docs = Some(docs);
        self
    }

    /// Verify every page checksum when opening (default: false). redb recovers from
    /// crashes and power loss on its own; this check is for files that may have been
    /// damaged outside redb (disk errors, stray writes): with it, such damage is
    /// reported as [`Error::Open`] instead of possibly panicking on a later read.
    /// It reads the whole file, so it is slow on large stores.
    #[must_use]
    pub fn check_integrity_on_open(mut self, check: bool) -> Self {
        self.check_integrity = check;
        self
    }

    /// Index the postings tail in memory, then read the ranking records (the
    /// `docs` table) and each memory's terms row (the `user_terms` table) into
    /// the page cache, in a background thread after opening a store file
    /// (default: true), so that the first recall does not index the tail and the
    /// first recalls do not each read their candidates' records, or a user's
    /// rows, from the file. Each
    /// table is skipped when it would take more than a quarter of the page cache
    /// ([`MemoryBuilder::cache_bytes`]); see `storage/prewarm.rs` and
    /// [`Memory::wait_for_prewarm`].
    #[must_use]
    pub fn prewarm(mut self, prewarm: bool) -> Self {
        self.prewarm = prewarm;
        self
    }

    /// The embedder (default: none). With one, every entry written gets its content's
    /// vector stored, and the default profile's recall adds vector candidates and
    /// fuses their similarity with text relevance (hybrid recall). Use the same
    /// embedder every time a store is opened: vectors of another dimension are
    /// ignored, vectors of another model of the same dimension are meaningless.
    #[must_use]
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The cognitive engine smart recall asks to rerank candidates (default: none).
    #[must_use]
    pub fn cognitive_engine(mut self, engine: Arc<dyn CognitiveEngine>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Opens or creates the store file at `path`.
    ///
    /// # Errors
    /// [`Error::Open`] for a file that is not a store, is already open, or cannot be
    /// read and written; [`Error::SchemaTooNew`] for one from a newer soulmem,
    /// [`Error::Corrupted`] for a damaged one.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Memory> {
        let store = Store::open_checked(
            path.as_ref(),
            self.profile,
            self.cache_bytes,
            self.check_integrity,
        )?;
        let prewarm = self.prewarm;
        let cache = self.cache_bytes.map_or(prewarm::REDB_DEFAULT_CACHE, |b| b as u64);
        let memory = self.finish(store);
        if prewarm {
            memory.start_prewarm(cache);
        }
        Ok(memory)
    }

    /// Opens or creates a store on a custom redb storage backend. This is a testing
    /// aid: with [`crate::storage::faulty::FaultyBackend`] it injects I/O failures,
    /// a full disk or flipped bytes, and simulates crashes.
    ///
    /// # Errors
    /// As [`MemoryBuilder::open`] (the path in [`Error::Open`] is `<backend>`).
    pub fn open_with_backend(self, backend: impl redb::StorageBackend) -> Result<Memory> {
        let store = Store::open_with_backend(
            backend,
            self.profile,
            self.cache_bytes,
            self.check_integrity,
        )?;
        Ok(self.finish(store))
    }

    /// Opens a store held in memory (nothing is written to disk).
    ///
    /// # Errors
    /// Only if redb fails to initialise.
    pub fn open_in_memory(self) -> Result<Memory> {
        let store = Store::in_memory(self.profile)?;
        Ok(self.finish(store))
    }

    fn finish(self, mut store: Store) -> Memory {
        if let Some(bytes) = self.postings_cache_bytes {
            store.set_postings_cache(bytes);
        }
        store.set_tail_caps(crate::storage::tail::Caps {
            single: self.postings_tail_docs,
            batch: self.postings_tail_batch_docs,
        });
        let profile = store.profile();
        crate::write::observe::warm_up_in_background(profile);
        let settings = self.settings.unwrap_or_else(|| Settings::for_profile(profile));
        store.set_access_cap(settings.access_history_cap);
        let memory = Memory {
            store: Arc::new(store),
            clock: self.clock,
            settings,
            pool: std::sync::OnceLock::new(),
            embedder: self.embedder,
            engine: self.engine,
            access_writer: Background::default(),
            tail_merger: Background::default(),
            tail_merger_stop: Arc::new(AtomicBool::new(false)),
            prewarm: parking_lot::Mutex::new(None),
        };
        memory.merge_opened_tail_when_idle();
        memory
    }
}

/// What [`Background::start`] did.
#[derive(Debug, PartialEq, Eq)]
enum Started {
    /// Started the work on a thread of its own.
    Yes,
    /// A thread is taking work already: the work was dropped.
    Busy,
    /// No thread could be spawned: the work was dropped.
    Failed,
}

/// One of the store's background threads (access records, the idle tail
/// merge): started on demand, one at a time.
///
/// A thread takes work while `active` is set: the call that starts it sets it,
/// the thread clears it under its lock after a last look (`more`), so a call
/// made while the thread was finishing either finds the flag still set, and the
/// thread then sees what that call changed before it, or finds it cleared and
/// starts a thread of its own. (Judging by the thread's handle instead, a call
/// that came after the thread's last look but before its end was dropped:
/// session 56 saw access records left pending that way.)
#[derive(Debug, Default)]
struct Background {
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    active: Arc<parking_lot::Mutex<bool>>,
}

impl Background {
    /// Runs `round` on a thread named `name`, unless a thread is taking work.
    /// After each round that returns `true` the thread asks `more`, under the
    /// flag's lock, and runs another round while it says so; a round that
    /// returns `false` (an error, a stop) ends the thread at once.
    fn start(
        &self,
        name: &str,
        mut round: impl FnMut() -> bool + Send + 'static,
        more: impl Fn() -> bool + Send + 'static,
    ) -> Started {
        {
            let mut active = self.active.lock();
            if *active {
                return Started::Busy;
            }
            *active = true;
        }
        let active = Arc::clone(&self.active);
        let run = move || {
            let _unwinding = ClearOnUnwind(Arc::clone(&active));
            loop {
                let go_on = round();
                #[cfg(test)]
                std::thread::sleep(tests::background_exit_pause());
                let mut taking = active.lock();
                if !go_on || !more() {
                    *taking = false;
                    return;
                }
            }
        };
        // A thread that cleared the flag may still be finishing: wait for it.
        let mut slot = self.thread.lock();
        if let Some(done) = slot.take() {
            let _ = done.join();
        }
        match std::thread::Builder::new().name(name.to_owned()).spawn(run) {
            Ok(h) => {
                *slot = Some(h);
                Started::Yes
            }
            Err(_) => {
                *self.active.lock() = false;
                Started::Failed
            }
        }
    }

    /// The thread last started, if any (for the owner to join when dropped).
    fn take(&mut self) -> Option<std::thread::JoinHandle<()>> {
        self.thread.get_mut().take()
    }
}

/// Clears a [`Background`] flag if its thread unwinds: a panic would otherwise
/// leave it set, and no thread would be started again. A thread that returns
/// clears it itself, under the lock, and a new one may have set it again by the
/// time this drops.
struct ClearOnUnwind(Arc<parking_lot::Mutex<bool>>);

impl Drop for ClearOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            *self.0.lock() = false;
        }
    }
}

/// A prewarm running in the background (see `storage/prewarm.rs`).
#[derive(Debug)]
struct PrewarmJob {
    handle: std::thread::JoinHandle<Result<Prewarm>>,
    stop: Arc<AtomicBool>,
}

/// A soulmem store: persistent, many concurrent readers, one writer at a time.
///
/// `Memory` is `Send + Sync`; share it with an `Arc`. Each call runs in its own
/// transaction: readers see a consistent snapshot, and a write is all or nothing.
#[derive(Debug)]
pub struct Memory {
    pub(crate) store: Arc<Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) settings: Settings,
    pub(crate) pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    pub(crate) engine: Option<Arc<dyn CognitiveEngine>>,
    /// The thread writing pending access records.
    access_writer: Background,
    /// The thread merging the postings tail in idle time, if one was started
    /// (see [`Settings::idle_tail_merge`]).
    tail_merger: Background,
    /// Set when the `Memory` is dropped: the merging thread stops.
    tail_merger_stop: Arc<AtomicBool>,
    /// The prewarm thread, until it is waited for.
    prewarm: parking_lot::Mutex<Option<PrewarmJob>>,
}

impl Drop for Memory {
    /// Stops the prewarm and waits for it and for the access-record writer, so the
    /// store is closed (and the file free to open again) when the `Memory` is gone.
    fn drop(&mut self) {
        if let Some(job) = self.prewarm.get_mut().take() {
            job.stop.store(true, Ordering::Relaxed);
            let _ = job.handle.join();
        }
        if let Some(h) = self.access_writer.take() {
            let _ = h.join();
        }
        self.tail_merger_stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.tail_merger.take() {
            h.thread().unpark(); // out of its pause at once
            let _ = h.join();
        }
    }
}

impl Memory {
    /// A builder with defaults.
    #[must_use]
    pub fn builder() -> MemoryBuilder {
        MemoryBuilder::default()
    }

    /// Opens or creates a store file with default settings.
    ///
    /// # Errors
    /// See [`MemoryBuilder::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::builder().open(path)
    }

    /// Opens a store in memory with default settings.
    ///
    /// # Errors
    /// See [`MemoryBuilder::open_in_memory`].
    pub fn open_in_memory() -> Result<Self> {
        Self::builder().open_in_memory()
    }

    /// The store's profile.
    #[must_use]
    pub fn profile(&self) -> Profile {
        self.store.profile()
    }

    /// The settings in force.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The clock's current time.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The embedder, if the store was opened with one.
    #[must_use]
    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// Runs `f` in one write transaction. With an embedder, every entry `f` inserted
    /// (docnos are handed out in order, so they are the new docnos still present)
    /// gets its vector stored in the same transaction.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut Writer<'_>) -> Result<T>) -> Result<T> {
        self.write_synced(self.settings.durable, f)
    }

    /// [`Memory::write`], its commit synced when `durable`.
    pub(crate) fn write_synced<T>(
        &self,
        durable: bool,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        let out = self.store.write(durable, |w| {
            let first = w.stats().next_docno;
            let out = f(w)?;
            if let Some(emb) = &self.embedder {
                let end = w.stats().next_docno;
                crate::read::vector::embed_docnos(w, emb.as_ref(), first..end)?;
            }
            Ok(out)
        })?;
        self.merge_tail_when_idle();
        Ok(out)
    }

    /// Starts the thread that merges the postings tail once no write has run for
    /// [`Settings::idle_tail_merge`], when the last write left the tail long and
    /// three quarters full and no such thread is waiting already.
    fn merge_tail_when_idle(&self) {
        let Some(idle) = self.settings.idle_tail_merge else { return };
        let (held, cap) = self.store.tail_fill();
        if !crate::storage::tail::merge_when_idle(held, cap) {
            return;
        }
        let store = Arc::clone(&self.store);
        let stopped = Arc::clone(&self.tail_merger_stop);
        let durable = self.settings.durable;
        let pause = (idle / 4)
            .clamp(std::time::Duration::from_millis(1), std::time::Duration::from_millis(250));
        let round = move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::park_timeout(pause);
                if stopped.load(Ordering::Relaxed) {
                    return false;
                }
                let (held, cap) = store.tail_fill();
                if !crate::storage::tail::merge_when_idle(held, cap) {
                    return true; // merged by a write meanwhile
                }
                if store.idle_for(idle) {
                    // An error leaves the tail for the write that fills it.
                    return store.write(durable, |w| w.merge_tail()).is_ok();
                }
            }
            false
        };
        let (store, stopped) = (Arc::clone(&self.store), Arc::clone(&self.tail_merger_stop));
        let more = move || {
            let (held, cap) = store.tail_fill();
            !stopped.load(Ordering::Relaxed) && crate::storage::tail::merge_when_idle(held, cap)
        };
        // Without a thread the write that fills the tail merges it, as before.
        let _ = self.tail_merger.start("soulmem-tail-merge", round, more);
    }

    /// After opening: a long tail the store was closed with (as a bulk load
    /// leaves it, up to [`TailFill::batch_cap`]) is merged, like one a write
    /// leaves, once the store has been idle for [`Settings::idle_tail_merge`]
    /// (counted from the opening until the first write), rather than by the
    /// write that would fill it. Nothing is merged when the store is dropped:
    /// closing stays quick, and the next opening merges in idle time.
    fn merge_opened_tail_when_idle(&self) {
        if self.settings.idle_tail_merge.is_none() {
            return;
        }
        // A store that cannot be read now leaves the tail to the writes.
        let Ok((held, cap)) = self.store.stored_tail_fill() else { return };
        self.store.note_tail_fill(held, cap);
        self.merge_tail_when_idle();
    }

    /// Embeds every memory that has no stored vector yet (after adding an embedder to
    /// an existing store). Returns how many vectors were stored.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without an embedder, the embedder's errors, storage
    /// errors.
    pub fn embed_missing(&self) -> Result<u64> {
        let Some(emb) = self.embedder.clone() else {
            return Err(Error::InvalidInput("the memory has no embedder".into()));
        };
        let missing: Vec<u64> = {
            let r = self.read()?;
            let mut out = Vec::new();
            for row in r.docs.range::<u64>(..)? {
                let d = row?.0.value();
                if crate::read::vector::vector_of(&r, d)?.is_none() {
                    out.push(d);
                }
            }
            out
        };
        self.store.write(self.settings.durable, |w| {
            crate::read::vector::embed_docnos(w, emb.as_ref(), missing)
        })
    }

    /// Starts indexing the postings tail, then reading the `docs` table and the
    /// `user_terms` table into the page cache, on a thread of its own.
    fn start_prewarm(&self, cache_bytes: u64) {
        let store = Arc::clone(&self.store);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let spawned = std::thread::Builder::new().name("soulmem-prewarm".into()).spawn(move || {
            store.prewarm_tail()?;
            let docs = store.prewarm_docs(cache_bytes, &flag)?;
            // The owners' terms rows next, unless the store is closing.
            if !matches!(docs, Prewarm::Stopped(_)) {
                store.prewarm_user_terms(cache_bytes, &flag)?;
            }
            Ok(docs)
        });
        // Without a thread the store is just not prewarmed.
        if let Ok(handle) = spawned {
            *self.prewarm.lock() = Some(PrewarmJob { handle, stop });
        }
    }

    /// Waits for the prewarm started by [`MemoryBuilder::prewarm`] and returns what
    /// it did with the `docs` table (the `user_terms` table is read after it);
    /// `None` when none is running (not started, or already waited for).
    /// Recalls need not wait: they are correct meanwhile, only slower. Benchmarks
    /// wait, so that they time a store in its steady state.
    ///
    /// # Errors
    /// Storage errors met while prewarming; [`Error::Storage`] if its thread
    /// panicked.
    pub fn wait_for_prewarm(&self) -> Result<Option<Prewarm>> {
        let Some(job) = self.prewarm.lock().take() else { return Ok(None) };
        match job.handle.join() {
            Ok(done) => done.map(Some),
            Err(_) => Err(Error::Storage("the prewarm thread panicked".into())),
        }
    }

    /// Runs `f` on soulmem's own rayon pool (one thread per core), or inline when the
    /// pool cannot be built.
    pub(crate) fn install<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let pool = self.pool.get_or_init(|| {
            let n = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("soulmem-rank-{i}"))
                .build()
                .ok()
        });
        match pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    /// Writes the oldest pending access records on a thread of its own, chunk by
    /// chunk and giving way to other writers, until at most half of
    /// [`crate::storage::ACCESS_FLUSH_AT`] are pending; does nothing when that
    /// thread is already at it. Errors leave the records pending for the next write
    /// or the close. Its commits are synced while durable writes are going on, else
    /// one in `ACCESS_SYNC_EVERY` and the last of a run (see `docs/DESIGN.md`,
    /// "Access records"). A call made while the thread finishes is not lost
    /// ([`Background`]).
    pub(crate) fn write_access_in_background(&self) {
        /// Within this long after a durable write began, every access commit is
        /// synced.
        const ACCESS_SYNC_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);
        /// Otherwise one access commit in this many is.
        const ACCESS_SYNC_EVERY: u32 = 16;
        use crate::storage::{ACCESS_FLUSH_AT, ACCESS_FLUSH_CHUNK, ACCESS_FLUSH_CHUNK_IDLE};
        let store = Arc::clone(&self.store);
        let durable = self.settings.durable;
        let pause = std::time::Duration::from_micros(200);
        let mut unsynced = 0u32;
        let round = move || {
            while store.access_pending() > ACCESS_FLUSH_AT / 2 {
                // Other writers (observes) go first, unless the log grows far past
                // its bound.
                if store.writing() && store.access_pending() < 8 * ACCESS_FLUSH_AT {
                    std::thread::sleep(pause);
                    continue;
                }
                // While durable writes are going on, short commits, each synced:
                // the next durable commit would otherwise be an observe's, and it
                // would wait for every page these commits dirtied. Under reads
                // alone, a run in one commit (a commit's own cost outweighs its
                // records'), and only the last commit of a run and one in
                // `ACCESS_SYNC_EVERY` synced: an fsync costs concurrent reads
                // time, and unsynced commits keep redb from reusing the pages
                // they free.
                let writes = store.durable_write_within(ACCESS_SYNC_WINDOW);
                let chunk = if writes { ACCESS_FLUSH_CHUNK } else { ACCESS_FLUSH_CHUNK_IDLE };
                let last = store.access_pending()
                    <= (ACCESS_FLUSH_AT / 2)
                        .saturating_add(usize::try_from(chunk).unwrap_or(usize::MAX));
                let sync = durable && (last || writes || unsynced + 1 >= ACCESS_SYNC_EVERY);
                if store.flush_access(chunk, sync).is_err() {
                    return false;
                }
                unsynced = if sync { 0 } else { unsynced + 1 };
                std::thread::sleep(pause);
            }
            true
        };
        let store = Arc::clone(&self.store);
        let more = move || store.access_pending() > ACCESS_FLUSH_AT / 2;
        // No thread: write one chunk here.
        if self.access_writer.start("soulmem-access", round, more) == Started::Failed {
            let _ = self.store.flush_access(ACCESS_FLUSH_CHUNK, self.settings.durable);
        }
    }

    pub(crate) fn read(&self) -> Result<Reader> {
        self.store.read()
    }

    /// Stores `entry` as is (no pipeline). An empty id gets a fresh one; a blank
    /// layer becomes the type's name. Returns the id.
    ///
    /// # Errors
    /// [`Error::InvalidMemory`] for out-of-range fields, [`Error::InvalidName`] for a
    /// bad layer or domain, [`Error::DuplicateId`] when the id is taken.
    pub fn add(&self, entry: MemoryEntry) -> Result<String> {
        let mut ids = self.add_batch(vec![entry])?;
        ids.pop().ok_or_else(|| Error::Storage("batch returned no id".into()))
    }

    /// Stores many entries in one transaction: all or none. Returns their ids.
    ///
    /// # Errors
    /// As [`Memory::add`]; the first bad entry aborts the whole batch.
    pub fn add_batch(&self, entries: Vec<MemoryEntry>) -> Result<Vec<String>> {
        self.add_batch_with(entries, self.durability())
    }

    /// [`Memory::add_batch`] committed with the given [`Durability`].
    ///
    /// # Errors
    /// As [`Memory::add_batch`].
    pub fn add_batch_with(
        &self,
        entries: Vec<MemoryEntry>,
        durability: Durability,
    ) -> Result<Vec<String>> {
        self.write_synced(durability.synced(), |w| {
            let mut ids = Vec::with_capacity(entries.len());
            for e in entries {
                let docno = w.insert(e)?;
                let info =
                    w.docinfo(docno)?.ok_or_else(|| Error::Storage("lost docinfo".into()))?;
                ids.push(info.id);
            }
            crate::write::evict::enforce_caps(w, &self.settings)?;
            Ok(ids)
        })
    }

    /// The memory with this id.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn get(&self, id: &str) -> Result<Option<MemoryEntry>> {
        let r = self.read()?;
        match r.docno_of(id)? {
            Some(d) => r.get(d),
            None => Ok(None),
        }
    }

    /// Replaces the memory with `entry.id` (every index follows).
    ///
    /// # Errors
    /// [`Error::NotFound`] when no memory has that id, plus [`Memory::add`]'s errors.
    pub fn update(&self, entry: MemoryEntry) -> Result<()> {
        // `entry` holds the accesses recorded so far (reads overlay those not yet
        // written): the store is brought to the same point first.
        self.store.write_current(self.settings.durable, |w| {
            let docno = w.docno_of(&entry.id)?.ok_or_else(|| Error::NotFound(entry.id.clone()))?;
            let changed = w.get(docno)?.is_none_or(|old| old.content != entry.content);
            w.replace(docno, entry)?;
            if changed && let Some(emb) = &self.embedder {
                crate::read::vector::embed_docnos(w, emb.as_ref(), [docno])?;
            }
            Ok(())
        })
    }

    /// Deletes the memory with this id. Returns whether it existed.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn remove(&self, id: &str) -> Result<bool> {
        let now = self.now();
        self.write(|w| {
            let Some(docno) = w.docno_of(id)? else { return Ok(false) };
            let removed = w.remove(docno)?;
            if let Some(e) = &removed {
                crate::write::audit::record_deletion(w, now, &format!("forget_by_id({id})"), &[e])?;
            }
            Ok(removed.is_some())
        })
    }

    /// A view on one layer (a built-in tier name or any custom layer).
    ///
    /// # Errors
    /// [`Error::InvalidName`] for a bad layer name.
    pub fn layer(&self, name: &str) -> Result<LayerView<'_>> {
        schema::validate_name("layer", name)?;
        Ok(LayerView { mem: self, name: name.to_owned() })
    }

    /// Every layer that has or had entries, plus the built-in tiers, sorted.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn layers(&self) -> Result<Vec<String>> {
        let mut out: Vec<String> = MemoryType::ALL
            .iter()
            .filter(|t| **t != MemoryType::Core)
            .map(|t| t.as_str().to_owned())
            .collect();
        for (l, _) in self.read()?.entry_tables()? {
            if !out.contains(&l) {
                out.push(l);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Domains of a layer with their entry counts (empty domains left out).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn domains(&self, layer: &str) -> Result<BTreeMap<String, u64>> {
        let r = self.read()?;
        let mut out = BTreeMap::new();
        for (l, d) in r.entry_tables()? {
            if l == layer {
                let n = r.table_len(&l, &d)?;
                if n > 0 {
                    out.insert(d, n);
                }
            }
        }
        Ok(out)
    }

    /// Access records that recalls made and the store does not hold yet (see
    /// `docs/DESIGN.md`, "Access records"): every read already sees them; a crash
    /// would lose them. A background thread writes them once more than
    /// [`crate::storage::ACCESS_FLUSH_AT`] are pending; closing the store writes
    /// the rest.
    #[must_use]
    pub fn pending_accesses(&self) -> usize {
        self.store.access_pending()
    }

    /// Writes every pending access record now ([`Memory::pending_accesses`]), in one
    /// write transaction (durable unless [`Settings::durable`] is off). Recalls
    /// record their accesses in memory, and the background thread leaves up to
    /// half of [`crate::storage::ACCESS_FLUSH_AT`] pending between its runs; call
    /// this to have them stored before a backup or a measurement.
    ///
    /// # Errors
    /// Storage errors; the records then stay pending.
    pub fn flush_accesses(&self) -> Result<()> {
        if self.store.access_pending() == 0 {
            return Ok(());
        }
        self.store.write_current(self.settings.durable, |_| Ok(()))
    }

    /// The [`Durability`] of writes that do not choose one: [`Durability::Immediate`]
    /// unless [`Settings::durable`] is off.
    #[must_use]
    pub fn durability(&self) -> Durability {
        if self.settings.durable { Durability::Immediate } else { Durability::Deferred }
    }

    /// Makes every commit so far durable (one synced commit; pending access
    /// records are written with it): after deferred batches
    /// ([`Durability::Deferred`]), or periodically when [`Settings::durable`] is
    /// off.
    ///
    /// # Errors
    /// Storage errors; the deferred commits then stay as they were (visible, not
    /// yet durable).
    pub fn sync(&self) -> Result<()> {
        self.store.write_current(true, |_| Ok(()))
    }

    /// How full the postings tail is. The newest memories' postings are kept
    /// apart, in the tail, until it holds [`TailFill::cap`] memories (a 64th of
    /// the store, from 256 to 4,096; a batch may take it to
    /// [`TailFill::batch_cap`], up to 16,384); the write that would pass that
    /// merges the tail into the postings blocks, and at a million memories that
    /// merge takes one observe a few hundred milliseconds. A long tail left three
    /// quarters full (by a write, or found so when the store is opened) is
    /// merged by a thread once the store has been idle for
    /// [`Settings::idle_tail_merge`]; an agent that never pauses that long can
    /// merge it itself ([`Memory::merge_postings_tail`]).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn postings_tail(&self) -> Result<TailFill> {
        let r = self.read()?;
        let docs = r.stats().docs;
        Ok(TailFill {
            memories: r.tail.docs(),
            cap: self.store.tail_cap(docs),
            batch_cap: self.store.tail_batch_cap(docs),
        })
    }

    /// Merges the postings tail into the blocks now, in one write transaction
    /// (durable unless [`Settings::durable`] is off), and returns how many
    /// memories it held (0: nothing to merge, nothing written). Recall returns
    /// the same before and after; see [`Memory::postings_tail`] for when it helps.
    ///
    /// ```
    /// use soulmem::{Memory, MemoryEntry, MemoryType};
    /// let mem = Memory::open_in_memory()?;
    /// mem.add(MemoryEntry::new(MemoryType::Semantic, "kayaking on Sundays"))?;
    /// assert_eq!(mem.postings_tail()?.memories, 1);
    /// assert_eq!(mem.merge_postings_tail()?, 1);
    /// assert_eq!(mem.postings_tail()?.memories, 0);
    /// assert_eq!(mem.merge_postings_tail()?, 0);
    /// # Ok::<(), soulmem::Error>(())
    /// ```
    ///
    /// # Errors
    /// Storage errors; the tail then stays as it was.
    pub fn merge_postings_tail(&self) -> Result<u64> {
        if self.postings_tail()?.memories == 0 {
            return Ok(0);
        }
        self.write(|w| w.merge_tail())
    }

    /// Number of memories in the store (every layer and domain).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn count(&self) -> Result<u64> {
        use redb::ReadableTableMetadata;
        Ok(self.read()?.ids()?.len()?)
    }

    /// Core memory.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn core(&self) -> Result<CoreMemory> {
        match self.read()?.meta_get(meta_keys::CORE)? {
            Some(b) => crate::storage::decode(&b, "core memory"),
            None => Ok(CoreMemory::default()),
        }
    }

    /// Replaces core memory.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn set_core(&self, core: &CoreMemory) -> Result<()> {
        self.write(|w| w.meta_put(meta_keys::CORE, &crate::storage::encode(core)?))
    }

    /// Edits core memory in place, in one transaction.
    ///
    /// # Errors
    /// Storage errors, or the closure's error.
    pub fn edit_core(&self, f: impl FnOnce(&mut CoreMemory)) -> Result<CoreMemory> {
        self.write(|w| {
            let mut core = match w.meta_get(meta_keys::CORE)? {
                Some(b) => crate::storage::decode(&b, "core memory")?,
                None => CoreMemory::default(),
            };
            f(&mut core);
            w.meta_put(meta_keys::CORE, &crate::storage::encode(&core)?)?;
            Ok(core)
        })
    }

    /// Deletion audit records (JSON), oldest first.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn deletion_audit(&self) -> Result<Vec<serde_json::Value>> {
        self.audit(schema::DELETION_AUDIT)
    }

    /// Supersede audit records (JSON), oldest first.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn supersede_audit(&self) -> Result<Vec<serde_json::Value>> {
        self.audit(schema::SUPERSEDE_AUDIT)
    }

    fn audit(&self, def: redb::TableDefinition<u64, &[u8]>) -> Result<Vec<serde_json::Value>> {
        let r = self.read()?;
        let t = r.txn().open_table(def)?;
        let mut out = Vec::new();
        for row in t.range::<u64>(..)? {
            let (_, v) = row?;
            out.push(
                serde_json::from_slice(v.value())
                    .map_err(|e| Error::Corrupted(format!("audit record: {e}")))?,
            );
        }
        Ok(out)
    }
}

/// One layer of a [`Memory`].
#[derive(Debug)]
pub struct LayerView<'m> {
    mem: &'m Memory,
    name: String,
}

impl LayerView<'_> {
    /// The layer's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stores `entry` in this layer (its `layer` is set to this one). Returns its id.
    ///
    /// # Errors
    /// As [`Memory::add`].
    pub fn store(&self, mut entry: MemoryEntry) -> Result<String> {
        entry.layer.clone_from(&self.name);
        self.mem.add(entry)
    }

    /// The entry with `id` if it is in this layer.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn get(&self, id: &str) -> Result<Option<MemoryEntry>> {
        Ok(self.mem.get(id)?.filter(|e| e.layer == self.name))
    }

    /// Deletes the entry with `id` if it is in this layer.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn delete(&self, id: &str) -> Result<bool> {
        if self.get(id)?.is_none() {
            return Ok(false);
        }
        self.mem.remove(id)
    }

    /// Every entry of the layer (or of one domain), in insertion order.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn entries(&self, domain: Option<&str>) -> Result<Vec<MemoryEntry>> {
        let r = self.mem.read()?;
        let mut all: Vec<(u64, MemoryEntry)> = Vec::new();
        for (l, d) in r.entry_tables()? {
            if l == self.name && domain.is_none_or(|x| x == d) {
                all.extend(r.table_entries(&l, &d)?);
            }
        }
        all.sort_by_key(|(docno, _)| *docno);
        Ok(all.into_iter().map(|(_, e)| e).collect())
    }

    /// Number of entries in the layer (or one domain).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn count(&self, domain: Option<&str>) -> Result<u64> {
        let r = self.mem.read()?;
        let mut n = 0;
        for (l, d) in r.entry_tables()? {
            if l == self.name && domain.is_none_or(|x| x == d) {
                n += r.table_len(&l, &d)?;
            }
        }
        Ok(n)
    }

    /// Domains of this layer with their counts.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn domains(&self) -> Result<BTreeMap<String, u64>> {
        self.mem.domains(&self.name)
    }
}

impl Memory {
    /// Verifies every index against the entries. `progress` gets the work done so
    /// far: the entries read, then those and the index rows compared (the whole is
    /// about [`Memory::count`] plus the sum of [`StoreStats::index_rows`]).
    ///
    /// # Errors
    /// Storage errors only; mismatches are in the report.
    pub fn check(&self, progress: impl FnMut(u64)) -> Result<crate::storage::check::CheckReport> {
        crate::storage::check::verify(&self.read()?, progress)
    }
}

/// A consistent, read-only view of the store as of the moment it was taken: later
/// commits are invisible to it.
pub struct Snapshot {
    reader: Reader,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The memory with this id, as of the snapshot.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn get(&self, id: &str) -> Result<Option<MemoryEntry>> {
        match self.reader.docno_of(id)? {
            Some(d) => self.reader.get(d),
            None => Ok(None),
        }
    }

    /// Number of memories, as of the snapshot.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn count(&self) -> Result<u64> {
        use redb::ReadableTableMetadata;
        Ok(self.reader.ids()?.len()?)
    }
}

impl Memory {
    /// Takes a consistent read snapshot.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut reader = self.read()?;
        reader.freeze_access();
        Ok(Snapshot { reader })
    }
}

/// Counts that describe a store.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct StoreStats {
    /// The behaviour profile.
    pub profile: String,
    /// Memories in total.
    pub memories: u64,
    /// Entries per layer and domain.
    pub layers: BTreeMap<String, BTreeMap<String, u64>>,
    /// Rows per index table.
    pub index_rows: BTreeMap<String, u64>,
    /// Memories in the inverted index and their total length in tokens.
    pub corpus_docs: u64,
    /// Sum of document lengths.
    pub corpus_tokens: u64,
    /// Ops applied by `soulctl ingest`.
    pub ingested_ops: u64,
    /// Knowledge-graph nodes and edges.
    pub graph_nodes: u64,
    /// Knowledge-graph edges.
    pub graph_edges: u64,
}

/// The space one table of the store takes in its file (redb's own accounting,
/// [`Memory::table_space`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableSpace {
    /// The table's name (`mem:{layer}:{domain}` for entry tables).
    pub name: String,
    /// Its rows.
    pub rows: u64,
    /// Leaf pages holding its rows.
    pub leaf_pages: u64,
    /// Branch pages of its B-tree.
    pub branch_pages: u64,
    /// Bytes of its keys and values.
    pub stored_bytes: u64,
    /// Bytes of its pages' own bookkeeping (offsets, headers).
    pub metadata_bytes: u64,
    /// Bytes of its pages left unused.
    pub fragmented_bytes: u64,
}

impl TableSpace {
    /// Everything it takes: stored, bookkeeping and unused bytes.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.stored_bytes + self.metadata_bytes + self.fragmented_bytes
    }
}

impl Memory {
    /// The space each table takes in the file, largest first, calling `progress`
    /// with each table's name before measuring it. Every page of every table is
    /// read: seconds for a store of a million memories.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn table_space(&self, mut progress: impl FnMut(&str)) -> Result<Vec<TableSpace>> {
        use redb::{ReadableTableMetadata, TableHandle};
        let r = self.read()?;
        let mut out = Vec::new();
        for handle in r.txn().list_tables()? {
            progress(handle.name());
            let name = handle.name().to_owned();
            let table = r.txn().open_untyped_table(handle)?;
            let st = table.stats()?;
            out.push(TableSpace {
                name,
                rows: table.len()?,
                leaf_pages: st.leaf_pages(),
                branch_pages: st.branch_pages(),
                stored_bytes: st.stored_bytes(),
                metadata_bytes: st.metadata_bytes(),
                fragmented_bytes: st.fragmented_bytes(),
            });
        }
        out.sort_by(|a, b| b.total_bytes().cmp(&a.total_bytes()).then(a.name.cmp(&b.name)));
        Ok(out)
    }

    /// Where this store's write transactions spent their time since it was
    /// opened: lock wait, their own work, the buffered writes, the commit
    /// ([`WriteTimings`]; take two readings and [`WriteTimings::since`] for a span).
    #[must_use]
    pub fn write_timings(&self) -> WriteTimings {
        self.store.write_timings()
    }

    /// Counts per layer and domain, index sizes and corpus statistics.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn stats(&self) -> Result<StoreStats> {
        use redb::ReadableTableMetadata;
        let r = self.read()?;
        let mut s =
            StoreStats { profile: self.profile().as_str().to_owned(), ..StoreStats::default() };
        for (l, d) in r.entry_tables()? {
            let n = r.table_len(&l, &d)?;
            if n > 0 {
                s.layers.entry(l).or_default().insert(d, n);
                s.memories += n;
            }
        }
        let rows = [
            ("ids", r.ids()?.len()?),
            ("docs", r.docs.len()?),
            ("posting_blocks", r.postings.len()?),
            ("posting_tail", r.tail.docs()),
            ("fact_tokens", r.fact_tokens()?.len()?),
            ("fact_prefixes", r.prefixes()?.len()?),
            ("fact_attributes", r.attributes()?.len()?),
            ("fact_cards", r.fact_cards()?.len()?),
            ("entities", r.entities()?.len()?),
            ("user_terms", r.user_terms()?.len()?),
            ("rowless_owners", r.rowless_owners()?.len()?),
            ("importance", r.importance()?.len()?),
            ("layer_order", r.layer_order()?.len()?),
            ("scopes", r.scopes()?.len()?),
            ("graph_adj", r.graph_adj()?.len()?),
            ("graph_active", r.txn().open_table(schema::GRAPH_ACTIVE)?.len()?),
        ];
        for (k, v) in rows {
            s.index_rows.insert(k.to_owned(), v);
        }
        let st = r.stats();
        s.corpus_docs = st.docs;
        s.corpus_tokens = st.total_len;
        s.ingested_ops = r
            .meta_get(meta_keys::INGESTED_OPS)?
            .and_then(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0);
        s.graph_nodes = r.txn().open_table(schema::GRAPH_NODES)?.len()?;
        s.graph_edges = r.txn().open_table(schema::GRAPH_EDGES)?.len()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use super::Memory;
    use crate::model::{MemoryEntry, MemoryType};
    use crate::read::query::RecallQuery;
    use crate::storage::ACCESS_FLUSH_AT;

    /// Milliseconds a background thread waits between the end of a round and
    /// its last look (0 but in the test that widens that window).
    static EXIT_PAUSE_MS: AtomicU64 = AtomicU64::new(0);

    pub(super) fn background_exit_pause() -> Duration {
        Duration::from_millis(EXIT_PAUSE_MS.load(Ordering::Relaxed))
    }

    /// Waits up to `limit` for at most half of `ACCESS_FLUSH_AT` records to be
    /// pending; whether they were.
    fn caught_up(mem: &Memory, limit: Duration) -> bool {
        let t = Instant::now();
        while mem.pending_accesses() > ACCESS_FLUSH_AT / 2 {
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    #[test]
    fn records_counted_while_the_access_writer_finishes_are_written() {
        let mem = Memory::open_in_memory().expect("open");
        let entries = (0..20)
            .map(|i| MemoryEntry::new(MemoryType::Semantic, format!("User drinks tea, cup {i}")))
            .collect();
        mem.add_batch(entries).expect("add");
        let q = RecallQuery::new("tea");
        // Each recall records an access on each memory it returns.
        let per_recall = mem.recall(&q).expect("recall").memories.len();
        assert!(per_recall >= 5, "{per_recall} memories a recall");
        let recalls_past_the_bound = ACCESS_FLUSH_AT / per_recall + 2;
        EXIT_PAUSE_MS.store(600, Ordering::Relaxed);
        for _ in 0..recalls_past_the_bound {
            mem.recall(&q).expect("recall");
        }
        assert!(caught_up(&mem, Duration::from_secs(30)), "the first run never caught up");
        // The round may still be in its loop (it looks again after each commit):
        // give it time to leave it. The thread then waits before its last look:
        // these records come in while it finishes, and their recalls ask for a
        // writer.
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..recalls_past_the_bound {
            mem.recall(&q).expect("recall");
        }
        assert!(mem.pending_accesses() > ACCESS_FLUSH_AT, "{}", mem.pending_accesses());
        let written = caught_up(&mem, Duration::from_secs(10));
        EXIT_PAUSE_MS.store(0, Ordering::Relaxed);
        assert!(written, "records counted while the writer finished stayed pending");
    }
}
