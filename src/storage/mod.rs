//! The redb store: schema, record codec, index maintenance.
//!
//! [`Store`] owns the database. Writes go through [`Writer`], which opens every table
//! once per transaction and keeps each index exact as entries are inserted, replaced
//! and removed; reads go through [`Reader`], a consistent snapshot.

mod access_log;
pub mod bitmap;
pub mod block_cache;
pub mod check;
mod codec;
pub mod compact;
pub mod doc_terms;
mod docinfo;
pub mod faulty;
pub mod graph;
pub mod key_sets;
pub mod keys;
pub mod logged;
pub mod postings;
pub mod prewarm;
mod query;
mod reader;
pub mod rebuild;
pub mod schema;
pub mod tail;
mod writer;

use std::path::Path;

use redb::{Database, ReadableDatabase};

pub use codec::{decode, encode};
pub use docinfo::DocInfo;
pub use query::keyed_facts as query_keyed;
pub use reader::Reader;
pub use writer::Writer;
pub(crate) use writer::{FactChanges, TokenSet};

use crate::Profile;
use crate::error::{Error, Result};
use schema::{META, SCHEMA_VERSION};

/// Meta keys.
pub mod meta_keys {
    /// Schema version (u32 LE).
    pub const SCHEMA: &str = "schema_version";
    /// Tokenizer version (u32 LE).
    pub const TOKENIZER: &str = "tokenizer_version";
    /// Behaviour profile name.
    pub const PROFILE: &str = "profile";
    /// Corpus statistics record.
    pub const STATS: &str = "corpus_stats";
    /// Core memory record.
    pub const CORE: &str = "core";
    /// Memory settings (JSON).
    pub const SETTINGS: &str = "settings";
    /// Self-model (JSON).
    pub const SELF_MODEL: &str = "self_model";
    /// Ops applied by `soulctl ingest` (u64 LE).
    pub const INGESTED_OPS: &str = "ingested_ops";
    /// The reference profile's lazily built BM25 corpus.
    pub const REF_BM25: &str = "ref_bm25";
    /// Carried-through soul parts (`soul.json`, `dna.md`, `state.json`, manifest,
    /// trust chain, keys): a postcard record, see `formats::store_io`.
    pub const SOUL_EXTRAS: &str = "soul_extras";
    /// Version of the postings tail (u64 LE, random; absent or 0: empty tail).
    pub const TAIL_VERSION: &str = "posting_tail_version";
    /// Sequence number of the last access record written (u64 LE; absent: 0), see
    /// `storage/access_log.rs`.
    pub const ACCESS_APPLIED: &str = "access_applied";
}

pub use access_log::{
    FLUSH_AT as ACCESS_FLUSH_AT, FLUSH_CHUNK as ACCESS_FLUSH_CHUNK,
    FLUSH_CHUNK_IDLE as ACCESS_FLUSH_CHUNK_IDLE,
};

/// Corpus-wide counters kept incrementally.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CorpusStats {
    /// Memories in the inverted index.
    pub docs: u64,
    /// Sum of their lengths in tokens.
    pub total_len: u64,
    /// The next docno to hand out.
    pub next_docno: u64,
    /// Next sequence number for graph edges, archives and audit records.
    pub next_seq: u64,
}

/// The database and the profile its indexes were built for.
pub struct Store {
    db: Database,
    profile: Profile,
    /// What the last committed write transaction's [`Writer`] kept for the next
    /// one; locked for the length of each write transaction (there is one at a
    /// time), emptied when a transaction fails.
    carry: parking_lot::Mutex<writer::Carry>,
    /// The indexed postings tail of the latest version a reader has seen.
    tails: tail::TailCache,
    /// Decoded postings of the most-searched terms (see [`block_cache`]).
    blocks: std::sync::Arc<block_cache::BlockCache>,
    /// Access records not yet written (see [`access_log`]).
    access: std::sync::Arc<access_log::AccessLog>,
    /// Write transactions other than the background access writer's, waiting for
    /// the lock or running: that writer gives way to them.
    writers: std::sync::atomic::AtomicUsize,
    /// When the store was opened: the clock of `last_durable_write`.
    opened: std::time::Instant,
    /// Milliseconds after `opened` when the last durable write transaction (other
    /// than the access writer's) began; `u64::MAX` before the first.
    last_durable_write: std::sync::atomic::AtomicU64,
    /// Milliseconds after `opened` when the last write transaction (other than
    /// the access writer's) ended, committed or not; 0 (the opening) before the
    /// first, so that a store is idle once it has been open that long unwritten.
    last_write_end: std::sync::atomic::AtomicU64,
    /// The postings tail as the last committed transaction (or the opening)
    /// left it: memories held, and its cap then (see [`Store::tail_fill`]).
    tail_fill: (std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64),
    /// Where the committed write transactions spent their time.
    timings: parking_lot::Mutex<WriteTimings>,
    /// Owners found holding too many memories to be scored from their terms rows
    /// (see `read::recall::listed_max`), with the store's size then and whether
    /// they hold most of it: a recall filtered by one of them searches the
    /// postings without trying the rows first (beside the users index unless they
    /// hold most of the store). Only speed depends on it (every search gives the
    /// same results).
    large_owners: Verdicts,
    /// Scope filters (their scopes, joined) sampled for whether they keep few
    /// memories (`read::filters::ScopeMembers`), with the store's size then
    /// and the verdict; only speed depends on it too.
    scope_walks: Verdicts,
    /// Memories the postings tail may hold before a write transaction merges it
    /// into the blocks.
    tail_caps: tail::Caps,
}

/// Where a store's write transactions spent their time, summed over those
/// committed since it was opened (the background access writer's are left out:
/// they are not the caller's). A profile of the write path without a profiler:
/// `soulctl bench ingest` prints it per batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteTimings {
    /// Write transactions committed.
    pub transactions: u64,
    /// Waiting for the write lock (another transaction running), opening the
    /// tables, and writing the pending access records the transaction takes.
    pub begin: std::time::Duration,
    /// The transaction's own work: the observes' steps, the inserts, updates and
    /// removals, with their index rows.
    pub work: std::time::Duration,
    /// Writing what the work buffered: postings (to the blocks or the tail), the
    /// self-model, the corpus statistics.
    pub flush: std::time::Duration,
    /// The commit: redb writing the dirty pages, and syncing them when durable;
    /// with the indexing of the postings tail it leaves in memory (beside the
    /// commit, on a thread of its own, for a batch's).
    pub commit: std::time::Duration,
}

impl WriteTimings {
    /// What was spent from `earlier` (an earlier reading of the same store) to
    /// `self`.
    #[must_use]
    pub fn since(&self, earlier: &WriteTimings) -> WriteTimings {
        WriteTimings {
            transactions: self.transactions.saturating_sub(earlier.transactions),
            begin: self.begin.saturating_sub(earlier.begin),
            work: self.work.saturating_sub(earlier.work),
            flush: self.flush.saturating_sub(earlier.flush),
            commit: self.commit.saturating_sub(earlier.commit),
        }
    }
}

impl Store {
    /// See [`crate::Memory::write_timings`].
    pub fn write_timings(&self) -> WriteTimings {
        *self.timings.lock()
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("profile", &self.profile).finish_non_exhaustive()
    }
}

fn open_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Open { path: path.to_owned(), reason: e.to_string() }
}

fn database_error(path: &Path, e: redb::DatabaseError) -> Error {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Io(e)) => open_error(path, e),
        redb::DatabaseError::DatabaseAlreadyOpen => {
            open_error(path, "the store is already open (in this or another process)")
        }
        e => open_error(path, format!("not a soulmem/redb file or damaged: {e}")),
    }
}

/// Whether store files are opened through their write-ahead logs
/// ([`logged::LoggedFile`]): a durable commit of a few pages syncs one sequential
/// extent instead of 35–40 scattered pages, and checkpoints run in the background
/// (`docs/PERFORMANCE.md`). Off, a log left beside a store is still replayed when
/// the store is opened.
const WRITE_AHEAD_LOG: bool = true;

/// The two write-ahead logs beside the store file at `path` (`<file>-log` and
/// `<file>-log2`).
#[must_use]
pub fn log_paths(path: &Path) -> [std::path::PathBuf; 2] {
    ["-log", "-log2"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    })
}

/// Removes the store file at `path` and its write-ahead logs; what is not there
/// is no error. A store must be removed this way (or its logs with it): logs left
/// beside a path belong to the file that was there, never to a new one.
///
/// # Errors
/// An I/O error other than a missing file.
pub fn remove_store(path: &Path) -> std::io::Result<()> {
    remove_if_present(path)?;
    remove_logs(path)
}

/// Removes the write-ahead logs beside `path`, if there are any.
fn remove_logs(path: &Path) -> std::io::Result<()> {
    log_paths(path).iter().try_for_each(|log| remove_if_present(log))
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The store file at `path` and its log as a [`logged::LoggedFile`], recovering
/// what a crash left in the log.
fn logged_file(path: &Path) -> Result<logged::LoggedFile<redb::backends::FileBackend>> {
    let open = |p: &Path| -> Result<redb::backends::FileBackend> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .map_err(|e| open_error(path, e.to_string()))?;
        redb::backends::FileBackend::new(f).map_err(|e| database_error(path, e))
    };
    let file = open(path)?;
    let sizes = logged::Sizes::for_store(
        redb::StorageBackend::len(&file).map_err(|e| open_error(path, e.to_string()))?,
    );
    let [a, b] = log_paths(path);
    logged::LoggedFile::new(file, [open(&a)?, open(&b)?], sizes).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            open_error(path, e.to_string())
        } else {
            open_error(path, format!("write-ahead log: {e}"))
        }
    })
}

/// Opens the existing store file at `path` with `builder`: through its
/// write-ahead log when `wal`; otherwise a log left there is first copied into the
/// file and removed.
fn open_file(path: &Path, builder: redb::Builder, wal: bool) -> Result<Database> {
    if wal {
        let backend = logged_file(path)?;
        return builder.create_with_backend(backend).map_err(|e| database_error(path, e));
    }
    let logs = log_paths(path);
    if logs.iter().any(|l| l.exists()) {
        let backend = logged_file(path)?;
        redb::StorageBackend::close(&backend)
            .map_err(|e| open_error(path, format!("write-ahead log: {e}")))?;
        drop(backend);
        remove_logs(path).map_err(|e| open_error(path, e.to_string()))?;
    }
    builder.create(path).map_err(|e| database_error(path, e))
}

impl Store {
    /// Opens (or creates) the store at `path`. A new store takes `profile`; an
    /// existing one keeps the profile it was created with.
    pub fn open(path: &Path, profile: Profile, cache_bytes: Option<usize>) -> Result<Self> {
        Self::open_checked(path, profile, cache_bytes, false)
    }

    fn builder(cache_bytes: Option<usize>, check_integrity: bool) -> redb::Builder {
        let mut builder = Database::builder();
        if let Some(bytes) = cache_bytes {
            builder.set_cache_size(bytes);
        }
        builder.set_check_integrity_on_open(check_integrity);
        builder
    }

    /// As [`Store::open`]; with `check_integrity`, redb verifies every page checksum
    /// on open, so a file damaged outside redb is reported as an error instead of
    /// possibly panicking later.
    pub fn open_checked(
        path: &Path,
        profile: Profile,
        cache_bytes: Option<usize>,
        check_integrity: bool,
    ) -> Result<Self> {
        if !path.exists() {
            Self::create_atomically(path, profile)?;
        }
        let db = open_file(path, Self::builder(cache_bytes, check_integrity), WRITE_AHEAD_LOG)?;
        Self::init(db, profile).map_err(|e| match e {
            Error::Storage(s) => open_error(path, s),
            other => other,
        })
    }

    /// Creates a new store at `path` so that a crash at any moment leaves either no
    /// file or a complete, empty store: it is written and committed under a temporary
    /// name beside `path`, then linked into place (never over an existing file: if
    /// another process created `path` first, that store is used).
    fn create_atomically(path: &Path, profile: Profile) -> Result<()> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.creating-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        // Logs left by a store removed from this path are not the new store's.
        remove_logs(path).map_err(|e| open_error(path, format!("removing a stale log: {e}")))?;
        {
            let db = Database::create(&tmp).map_err(|e| database_error(path, e))?;
            Self::init(db, profile).map_err(|e| match e {
                Error::Storage(s) => open_error(path, s),
                other => other,
            })?;
        }
        let linked = match std::fs::hard_link(&tmp, path) {
            // No hard links on this file system: a rename (which could replace a
            // store created in the meantime by another process) is the fallback.
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists && !path.exists() => {
                std::fs::rename(&tmp, path)
            }
            other => other,
        };
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
                    && let Ok(d) = std::fs::File::open(dir)
                {
                    let _ = d.sync_all();
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(open_error(path, e.to_string())),
        }
    }

    /// Opens (or creates) a store on any redb storage backend, e.g. the
    /// failure-injecting [`faulty::FaultyBackend`]. Errors name the path `<backend>`.
    pub fn open_with_backend(
        backend: impl redb::StorageBackend,
        profile: Profile,
        cache_bytes: Option<usize>,
        check_integrity: bool,
    ) -> Result<Self> {
        let path = Path::new("<backend>");
        let db = Self::builder(cache_bytes, check_integrity)
            .create_with_backend(backend)
            .map_err(|e| database_error(path, e))?;
        Self::init(db, profile).map_err(|e| match e {
            Error::Storage(s) => open_error(path, s),
            other => other,
        })
    }

    /// A store in memory (redb's in-memory backend), for tests and replay.
    pub fn in_memory(profile: Profile) -> Result<Self> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| Error::Storage(e.to_string()))?;
        Self::init(db, profile)
    }

    fn init(db: Database, profile: Profile) -> Result<Self> {
        // Read the schema first: a newer file must not be touched.
        let existing = {
            let rtx = db.begin_read()?;
            match rtx.open_table(META) {
                Ok(t) => {
                    let schema = t.get(meta_keys::SCHEMA)?.map(|v| v.value().to_vec());
                    let prof = t.get(meta_keys::PROFILE)?.map(|v| v.value().to_vec());
                    let tok = t.get(meta_keys::TOKENIZER)?.map(|v| v.value().to_vec());
                    Some((schema, prof, tok))
                }
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(e.into()),
            }
        };
        let profile = match existing {
            Some((Some(schema), prof, tok)) => {
                let found = u32::from_le_bytes(
                    schema
                        .as_slice()
                        .try_into()
                        .map_err(|_| Error::Corrupted("schema version is not 4 bytes".into()))?,
                );
                if found > SCHEMA_VERSION {
                    return Err(Error::SchemaTooNew { found, supported: SCHEMA_VERSION });
                }
                if found < 2 {
                    return Err(Error::Corrupted(format!(
                        "schema version {found} is older than {SCHEMA_VERSION} and has no upgrade path"
                    )));
                }
                let upgrade = found == 2;
                let tok = if upgrade {
                    Some(crate::text::TOKENIZER_VERSION.to_le_bytes().to_vec())
                } else {
                    tok
                };
                let tok = tok
                    .and_then(|b| <[u8; 4]>::try_from(b.as_slice()).ok())
                    .map(u32::from_le_bytes)
                    .unwrap_or(0);
                if tok != crate::text::TOKENIZER_VERSION {
                    return Err(Error::NeedsReindex {
                        found: tok,
                        expected: crate::text::TOKENIZER_VERSION,
                    });
                }
                let name = prof.unwrap_or_default();
                let profile =
                    Profile::parse(std::str::from_utf8(&name).unwrap_or("")).ok_or_else(|| {
                        Error::Corrupted("the store's profile is missing or unknown".into())
                    })?;
                if upgrade {
                    // Schema 2 differs only in index tables: rebuild them.
                    rebuild::upgrade_from_2(&db, profile)?;
                } else {
                    if found < 5 {
                        // Schema 4 added the postings tail (empty in a schema-3
                        // store), schema 5 the fact cards (derived from the facts).
                        rebuild::upgrade_to_5(&db)?;
                    }
                    if found < 6 {
                        // Schema 6 keeps the access metadata in the compact records.
                        rebuild::upgrade_to_6(&db)?;
                    }
                    if found < 7 {
                        // Schema 7 adds each memory's own terms, by owner.
                        rebuild::upgrade_to_7(&db, profile)?;
                    }
                    if found < 8 {
                        // Schema 8 adds each memory's owner term to the postings.
                        rebuild::upgrade_to_8(&db, profile)?;
                    }
                    if found < 9 {
                        // Schema 9 adds the superseded-memories bitmap.
                        rebuild::upgrade_to_9(&db)?;
                    }
                    if found < 10 {
                        // Schema 10 adds each memory's domain term to the postings.
                        rebuild::upgrade_to_10(&db, profile)?;
                    }
                    if found < 11 {
                        // Schema 11 keeps no terms rows for owners past a cap.
                        rebuild::upgrade_to_11(&db)?;
                    }
                    if found < 12 {
                        // Schema 12 keeps no terms rows for memories in the tail.
                        rebuild::upgrade_to_12(&db)?;
                    }
                    if found < 13 {
                        // Schema 13 keeps no fact-token counts.
                        rebuild::upgrade_to_13(&db)?;
                    }
                    if found < 14 {
                        // Schema 14 indexes the active graph edges by identity.
                        rebuild::upgrade_to_14(&db)?;
                    }
                    if found < 15 {
                        // Schema 15 adds the withheld and restricted bitmaps.
                        rebuild::upgrade_to_15(&db)?;
                    }
                    if found < 16 {
                        // Schema 16 adds the bitmaps of the episodic and semantic
                        // layers and of the important memories.
                        rebuild::upgrade_to_16(&db)?;
                    }
                    if found < 17 {
                        // Schema 17 indexes the memories' scopes.
                        rebuild::upgrade_to_17(&db)?;
                    }
                }
                profile
            }
            Some((None, _, _)) => {
                return Err(Error::Corrupted("meta table has no schema version".into()));
            }
            None => {
                let txn = db.begin_write()?;
                Writer::create_all(&txn, profile)?;
                Writer::open(&txn, profile)?.flush()?;
                txn.commit()?;
                profile
            }
        };
        let applied = {
            let rtx = db.begin_read()?;
            let meta = rtx.open_table(META)?;
            access_applied(meta.get(meta_keys::ACCESS_APPLIED)?.as_ref().map(|v| v.value()))?
        };
        Ok(Self {
            db,
            profile,
            carry: parking_lot::Mutex::new(writer::Carry::default()),
            tails: tail::TailCache::default(),
            blocks: std::sync::Arc::new(block_cache::BlockCache::default()),
            writers: std::sync::atomic::AtomicUsize::new(0),
            opened: std::time::Instant::now(),
            last_durable_write: std::sync::atomic::AtomicU64::new(u64::MAX),
            last_write_end: std::sync::atomic::AtomicU64::new(0),
            tail_fill: (std::sync::atomic::AtomicU64::new(0), std::sync::atomic::AtomicU64::new(0)),
            timings: parking_lot::Mutex::new(WriteTimings::default()),
            large_owners: Verdicts::default(),
            scope_walks: Verdicts::default(),
            tail_caps: tail::Caps::default(),
            access: std::sync::Arc::new(access_log::AccessLog::new(
                applied,
                crate::Settings::for_profile(profile).access_history_cap,
            )),
        })
    }

    /// When `owner` was found too large for a listed search while the store held
    /// at least half its `docs` memories now: whether it then held most of the
    /// store (a store that has doubled since is sized again, and may score it from
    /// its rows).
    pub(crate) fn large_owner(&self, owner: &str, docs: u64) -> Option<bool> {
        self.large_owners.get(owner, |then| docs <= then.saturating_mul(2))
    }

    /// Notes `owner` as too large for a listed search in a store of `docs`
    /// memories, and whether it holds most of them (`dense`).
    pub(crate) fn note_large_owner(&self, owner: &str, docs: u64, dense: bool) {
        self.large_owners.note(owner, docs, dense);
    }

    /// Whether the scope filter `key` was found to keep few memories, when it
    /// was sampled in a store within an eighth of `docs` memories.
    pub(crate) fn scope_walk(&self, key: &str, docs: u64) -> Option<bool> {
        self.scope_walks.get(key, |then| docs.abs_diff(then) <= then / 8)
    }

    /// Notes whether the scope filter `key` keeps few of a store's `docs`
    /// memories.
    pub(crate) fn note_scope_walk(&self, key: &str, docs: u64, few: bool) {
        self.scope_walks.note(key, docs, few);
    }

    /// Records an access at `at` on each of `docnos`, read in a snapshot of access
    /// epoch `epoch` ([`Reader::access_epoch`]), to be written later (see
    /// [`access_log`]); records read before the store was emptied are dropped.
    /// Returns the records pending.
    pub(crate) fn record_access(
        &self,
        docnos: &[u64],
        at: crate::model::Timestamp,
        epoch: u64,
    ) -> usize {
        self.access.record(docnos, at, epoch)
    }

    /// Whether a write transaction (other than the access writer's) is waiting or
    /// running.
    pub(crate) fn writing(&self) -> bool {
        self.writers.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// Whether a durable write transaction (other than the access writer's) began
    /// within `window`.
    pub(crate) fn durable_write_within(&self, window: std::time::Duration) -> bool {
        let at = self.last_durable_write.load(std::sync::atomic::Ordering::Acquire);
        at != u64::MAX && self.opened.elapsed().as_millis() <= u128::from(at) + window.as_millis()
    }

    /// Whether no write transaction (other than the access writer's) is waiting
    /// or running, and none ended within `window`, nor was the store opened.
    pub(crate) fn idle_for(&self, window: std::time::Duration) -> bool {
        let at = self.last_write_end.load(std::sync::atomic::Ordering::Acquire);
        !self.writing() && self.opened.elapsed().as_millis() > u128::from(at) + window.as_millis()
    }

    /// Notes that a write transaction (other than the access writer's) ended.
    pub(crate) fn note_write_end(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last_write_end.store(now, std::sync::atomic::Ordering::Release);
    }

    /// The postings tail as the last write transaction committed by this store
    /// left it, or as the store was opened with: `(memories held, cap)`; `(0,
    /// 0)` until either is noted (a cheap hint for the idle merge;
    /// `Memory::postings_tail` reads the stored tail).
    #[must_use]
    pub(crate) fn tail_fill(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Acquire;
        (self.tail_fill.0.load(Acquire), self.tail_fill.1.load(Acquire))
    }

    /// Notes the postings tail as a commit left it, or as the store was opened
    /// with (`held` memories, the single writes' `cap`), for the idle merge.
    pub(crate) fn note_tail_fill(&self, held: u64, cap: u64) {
        use std::sync::atomic::Ordering::Release;
        self.tail_fill.0.store(held, Release);
        self.tail_fill.1.store(cap, Release);
    }

    /// The postings tail as stored: `(memories held, the single writes' cap)`,
    /// read from the table's length without indexing the tail (which a
    /// reader's snapshot does, and the prewarm does for the first reader).
    ///
    /// # Errors
    /// Storage errors, an undecodable stats record.
    pub(crate) fn stored_tail_fill(&self) -> Result<(u64, u64)> {
        use redb::ReadableTableMetadata;
        let txn = self.db.begin_read()?;
        let docs = match txn.open_table(META)?.get(meta_keys::STATS)? {
            Some(v) => decode::<CorpusStats>(v.value(), "corpus stats")?.docs,
            None => 0,
        };
        let held = match txn.open_table(schema::POSTING_TAIL) {
            Ok(t) => t.len()?,
            Err(redb::TableError::TableDoesNotExist(_)) => 0,
            Err(e) => return Err(e.into()),
        };
        Ok((held, self.tail_cap(docs)))
    }

    /// Notes that a durable write transaction begins (see `durable_write_within`).
    pub(crate) fn note_durable_write(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last_durable_write.store(now, std::sync::atomic::Ordering::Release);
    }

    /// Access records not written yet.
    pub(crate) fn access_pending(&self) -> usize {
        self.access.pending()
    }

    /// Sets how many access timestamps a memory keeps (for records written later).
    pub(crate) fn set_access_cap(&self, cap: usize) {
        self.access.set_cap(cap);
    }

    /// Replaces the cache of decoded postings by an empty one of `bytes` bytes.
    pub(crate) fn set_postings_cache(&mut self, bytes: usize) {
        self.blocks = std::sync::Arc::new(block_cache::BlockCache::new(bytes));
    }

    /// Sets how many memories the postings tail may hold before a write merges it
    /// into the blocks (instead of the defaults of [`tail::Caps`]).
    pub(crate) fn set_tail_caps(&mut self, caps: tail::Caps) {
        self.tail_caps = caps;
    }

    /// How many memories the postings tail of a store of `docs` memories takes
    /// before a write of fewer than [`tail::BATCH_MIN_NEW`] new memories merges it
    /// into the blocks.
    #[must_use]
    pub fn tail_cap(&self, docs: u64) -> u64 {
        self.tail_caps.single(docs)
    }

    /// How many a write of at least [`tail::BATCH_MIN_NEW`] new memories may
    /// leave in it.
    #[must_use]
    pub fn tail_batch_cap(&self, docs: u64) -> u64 {
        self.tail_caps.batch(docs)
    }

    /// The profile the store was created with.
    #[must_use]
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Runs `f` in one write transaction and commits it (durably unless `durable` is
    /// false). An error from `f` aborts the transaction: nothing of it is written.
    pub fn write<T>(
        &self,
        durable: bool,
        f: impl FnOnce(&mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        self.write_cleared(durable, false, f)
    }

    /// Begins a write transaction, committed with fsync unless `durable` is false.
    pub(crate) fn begin_write(&self, durable: bool) -> Result<redb::WriteTransaction> {
        let mut txn = self.db.begin_write()?;
        if !durable {
            txn.set_durability(redb::Durability::None)
                .map_err(|e| Error::Storage(e.to_string()))?;
        }
        Ok(txn)
    }

    /// A raw read transaction on the last committed state. Begun while a write
    /// transaction of this store is open, it sees the state that transaction
    /// started from (redb admits one writer at a time).
    pub(crate) fn snapshot(&self) -> Result<redb::ReadTransaction> {
        Ok(self.db.begin_read()?)
    }

    /// A consistent read snapshot.
    pub fn read(&self) -> Result<Reader> {
        // Registered before the snapshot begins, so no record it lacks is dropped.
        let (guard, upto) = access_log::AccessLog::open_read(&self.access);
        Reader::open(
            self.db.begin_read()?,
            self.profile,
            &self.tails,
            &self.blocks,
            &self.access,
            guard,
            upto,
        )
    }

    /// redb's own integrity check (verifies checksums, repairs nothing on success).
    pub fn check_integrity(&mut self) -> Result<bool> {
        self.db.check_integrity().map_err(|e| Error::Storage(e.to_string()))
    }
}

/// Decodes meta [`meta_keys::ACCESS_APPLIED`] (absent: 0).
pub(crate) fn access_applied(v: Option<&[u8]>) -> Result<u64> {
    meta_u64(v, "access sequence number")
}

/// Decodes a u64 meta value, `what` (absent: 0).
pub(crate) fn meta_u64(v: Option<&[u8]>, what: &str) -> Result<u64> {
    match v {
        None => Ok(0),
        Some(b) => <[u8; 8]>::try_from(b)
            .map(u64::from_le_bytes)
            .map_err(|_| Error::Corrupted(format!("{what} is not 8 bytes"))),
    }
}

impl Drop for Store {
    /// Writes the pending access records, durably (best effort: on failure they are
    /// lost, as after a crash; no memory is).
    fn drop(&mut self) {
        if !self.access.is_empty() {
            let _ = self.write_current(true, |_| Ok(()));
        }
    }
}

/// Decisions about the shape of a store that only speed depends on, each
/// under a key with the store's number of memories when it was made.
#[derive(Default)]
struct Verdicts(parking_lot::Mutex<foldhash::HashMap<String, (u64, bool)>>);

impl Verdicts {
    /// Verdicts kept at most; past it they are dropped, to be made again.
    const MAX: usize = 4_096;

    /// The verdict under `key`, when `fresh` holds for the store's size then.
    fn get(&self, key: &str, fresh: impl Fn(u64) -> bool) -> Option<bool> {
        self.0.lock().get(key).and_then(|&(then, v)| fresh(then).then_some(v))
    }

    /// Notes `verdict` under `key`, made in a store of `docs` memories.
    fn note(&self, key: &str, docs: u64, verdict: bool) {
        let mut kept = self.0.lock();
        if kept.len() >= Self::MAX {
            kept.clear();
        }
        kept.insert(key.to_owned(), (docs, verdict));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SelfImage, SelfModel};

    #[test]
    fn a_store_opened_without_its_log_gets_the_commits_the_log_holds() -> Result<()> {
        const T: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("t");
        let dir = tempfile::tempdir().map_err(|e| Error::Storage(e.to_string()))?;
        let (path, copy) = (dir.path().join("a.redb"), dir.path().join("b.redb"));
        {
            let db = open_file(&path, Database::builder(), true)?;
            let txn = db.begin_write()?;
            txn.open_table(T)?.insert(1, 41)?;
            txn.commit()?;
            // A small commit lives in the log until a checkpoint: copy both files
            // now, as a crash would leave them.
            let txn = db.begin_write()?;
            txn.open_table(T)?.insert(2, 42)?;
            txn.commit()?;
            let (logs, copies) = (log_paths(&path), log_paths(&copy));
            for (from, to) in [(&path, &copy), (&logs[0], &copies[0]), (&logs[1], &copies[1])] {
                std::fs::copy(from, to).map_err(|e| Error::Storage(e.to_string()))?;
            }
        }
        let db = open_file(&copy, Database::builder(), false)?;
        let txn = db.begin_read()?;
        let t = txn.open_table(T)?;
        assert_eq!(t.get(1)?.map(|v| v.value()), Some(41));
        assert_eq!(t.get(2)?.map(|v| v.value()), Some(42));
        assert!(
            log_paths(&copy).iter().all(|l| !l.exists()),
            "the logs are copied into the file and removed"
        );
        Ok(())
    }

    #[test]
    fn a_new_store_never_replays_logs_left_by_a_removed_one() -> Result<()> {
        use crate::model::{MemoryEntry, MemoryType};
        let io = |e: std::io::Error| Error::Storage(e.to_string());
        let dir = tempfile::tempdir().map_err(io)?;
        let path = dir.path().join("a.redb");
        let (logs, saved) = (log_paths(&path), log_paths(&dir.path().join("saved")));
        {
            let mem = crate::memory::Memory::open(&path)?;
            for i in 0..3 {
                mem.add(MemoryEntry::new(MemoryType::Semantic, format!("old fact {i}")))?;
            }
            // The logs as a crash would leave them: commits not yet in the file.
            for (from, to) in logs.iter().zip(&saved) {
                std::fs::copy(from, to).map_err(io)?;
            }
        }
        // The file alone is removed; the logs are put back beside its path.
        std::fs::remove_file(&path).map_err(io)?;
        for (from, to) in saved.iter().zip(&logs) {
            std::fs::copy(from, to).map_err(io)?;
        }
        let mem = crate::memory::Memory::open(&path)?;
        assert_eq!(mem.count()?, 0, "a new store starts empty");
        let report = mem.check(|_| {})?;
        assert!(report.is_ok(), "{:?}", report.problems);
        mem.add(MemoryEntry::new(MemoryType::Semantic, "new fact"))?;
        assert_eq!(mem.count()?, 1);
        Ok(())
    }

    fn model(domain: &str) -> SelfModel {
        let mut m = SelfModel::default();
        m.self_images.insert(
            domain.into(),
            SelfImage { domain: domain.into(), confidence: 0.5, evidence_count: 3 },
        );
        m
    }

    fn stored(store: &Store) -> SelfModel {
        store.read().and_then(|r| r.self_model()).expect("read self-model")
    }

    #[test]
    fn a_failed_transaction_leaves_no_carried_state() {
        let store = Store::in_memory(Profile::Default).expect("store");
        store
            .write(false, |w| {
                w.set_self_model(model("kept"));
                Ok(())
            })
            .expect("write");
        // A transaction that changes the carried self-model, then fails.
        let failed = store.write(false, |w| {
            w.self_model_mut()?.self_images.clear();
            w.set_self_model(model("lost"));
            Err::<(), _>(Error::InvalidInput("boom".into()))
        });
        assert!(failed.is_err());
        // The next transaction sees what is stored, not the failed one's state.
        let seen = store.write(false, |w| Ok(w.self_model_mut()?.clone())).expect("write");
        assert_eq!(seen, model("kept"));
        assert_eq!(stored(&store), model("kept"));
    }

    #[test]
    fn a_committed_transaction_carries_its_state_to_the_next() {
        let store = Store::in_memory(Profile::Default).expect("store");
        store
            .write(false, |w| {
                w.set_self_model(model("one"));
                Ok(())
            })
            .expect("write");
        let seen = store.write(false, |w| Ok(w.self_model_mut()?.clone())).expect("write");
        assert_eq!(seen, model("one"));
        // A store cleared in a transaction forgets the carried model too.
        store.write_cleared(false, true, |_| Ok(())).expect("clear");
        let seen = store.write(false, |w| Ok(w.self_model_mut()?.clone())).expect("write");
        assert_eq!(seen, SelfModel::default());
        assert_eq!(stored(&store), SelfModel::default());
    }

    #[test]
    fn a_reader_keeps_its_tail_through_a_merge() {
        use crate::model::{MemoryEntry, MemoryType};
        let store = Store::in_memory(Profile::Default).expect("store");
        let add = |text: &str| {
            store
                .write(false, |w| w.insert(MemoryEntry::new(MemoryType::Semantic, text.to_owned())))
                .expect("insert")
        };
        let kept = add("kayaking in the fjords");
        let before = store.read().expect("read");
        assert_eq!(before.tail.docs(), 1);
        let other = add("kayaking on the lake");
        store.write(false, |w| w.remove(other)).expect("remove"); // merges the tail
        let after = store.read().expect("read");
        assert_eq!(after.tail.docs(), 0);
        let docnos = |r: &Reader| -> Vec<u64> {
            r.postings_of("kayak").expect("postings").iter().map(|p| p.docno).collect()
        };
        assert_eq!(docnos(&before), vec![kept], "the old snapshot reads its own tail");
        assert_eq!(docnos(&after), vec![kept], "the new one reads the blocks");
    }

    #[test]
    fn durable_writes_are_noted_for_the_access_writer() {
        use std::time::Duration;
        let store = Store::in_memory(Profile::Default).expect("store");
        let long = Duration::from_secs(3600);
        assert!(!store.durable_write_within(long), "no write yet");
        let d = store
            .write(false, |w| {
                w.insert(crate::model::MemoryEntry::new(
                    crate::model::MemoryType::Semantic,
                    "tea".to_owned(),
                ))
            })
            .expect("insert");
        assert!(!store.durable_write_within(long), "an unsynced write is not noted");
        let epoch = store.read().expect("read").access_epoch();
        let at = crate::model::time::parse_timestamp("2025-01-01T00:00:01").expect("ts");
        store.record_access(&[d], at, epoch);
        store.flush_access(1, true).expect("flush");
        assert_eq!(store.access_pending(), 0);
        assert!(!store.durable_write_within(long), "nor the access writer's own");
        store.write(true, |_| Ok(())).expect("write");
        assert!(store.durable_write_within(long));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!store.durable_write_within(Duration::from_millis(5)), "too long ago");
    }

    #[test]
    fn reads_overlay_access_records_until_a_write_holds_them() {
        use crate::model::{MemoryEntry, MemoryType, time};
        let store = Store::in_memory(Profile::Default).expect("store");
        let add = |text: &str| {
            store
                .write(false, |w| w.insert(MemoryEntry::new(MemoryType::Semantic, text.to_owned())))
                .expect("insert")
        };
        let (a, b) = (add("tea"), add("coffee"));
        let t = |s: &str| time::parse_timestamp(s).expect("ts");
        let stored = |d: u64| store.write(false, |w| w.get(d)).expect("get").expect("stored");
        let epoch = store.read().expect("read").access_epoch();
        store.record_access(&[a, b], t("2025-01-01T00:00:01"), epoch);
        store.record_access(&[a], t("2025-01-01T00:00:02"), epoch);
        let seen = |d: u64| {
            let r = store.read().expect("read");
            let e = r.get(d).expect("get").expect("stored");
            let info = r.docinfo(d).expect("info").expect("info");
            // The overlaid record is exactly the record of the overlaid entry.
            assert_eq!(info, DocInfo::from_entry(&e, info.doc_len));
            e
        };
        assert_eq!(seen(a).access_count, 2);
        assert_eq!(seen(b).access_count, 1);
        // A plain write reads and leaves the entries as stored.
        store.write(false, |w| w.meta_put("x", b"1")).expect("write");
        assert_eq!(stored(a).access_count, 0);
        assert_eq!(seen(a).access_count, 2);
        // Writing the oldest record only: `a`'s first access and nothing else.
        store.flush_access(1, false).expect("flush");
        assert_eq!(stored(a).access_count, 1);
        assert_eq!(stored(b).access_count, 0);
        assert_eq!((seen(a).access_count, seen(b).access_count), (2, 1));
        // Writing the rest: the store holds what the reads showed, once.
        store.write_current(false, |_| Ok(())).expect("write");
        assert!(store.access.is_empty());
        assert_eq!(stored(a), seen(a));
        assert_eq!(stored(b), seen(b));
        assert_eq!(
            stored(a).access_timestamps,
            vec![t("2025-01-01T00:00:01"), t("2025-01-01T00:00:02")]
        );
    }

    #[test]
    fn access_records_rewrite_the_compact_record_only_and_a_rebuild_keeps_them() {
        use crate::model::{MemoryEntry, MemoryType, time};
        let store = Store::in_memory(Profile::Default).expect("store");
        let d = store
            .write(false, |w| w.insert(MemoryEntry::new(MemoryType::Semantic, "tea".to_owned())))
            .expect("insert");
        let t = time::parse_timestamp("2025-01-01T00:00:01").expect("ts");
        let epoch = store.read().expect("read").access_epoch();
        store.record_access(&[d], t, epoch);
        store.write_current(false, |_| Ok(())).expect("write");
        assert!(store.access.is_empty());
        // (row as stored, entry as read)
        let both = || {
            store
                .write(false, |w| {
                    let row = query::entry(w.entry_table("semantic", "default")?, d)?;
                    Ok((row.expect("row").access_count, w.get(d)?.expect("entry")))
                })
                .expect("read")
        };
        let (row, e) = both();
        assert_eq!(row, 0, "the entry row is not rewritten by an access");
        assert_eq!((e.access_count, e.last_accessed, e.access_timestamps), (1, Some(t), vec![t]));
        let r = store.read().expect("read");
        assert_eq!(r.get(d).expect("get").expect("entry").access_count, 1);
        assert_eq!(r.table_entries("semantic", "default").expect("rows")[0].1.access_count, 1);
        drop(r);
        // A rebuild of every index, the records included, keeps what they held.
        store.rebuild_indexes(false, |_| {}).expect("rebuild");
        let (row, e) = both();
        assert_eq!((row, e.access_count, e.last_accessed), (1, 1, Some(t)));
    }

    #[test]
    fn accesses_read_before_the_store_was_emptied_touch_nothing_after() {
        use crate::model::{MemoryEntry, MemoryType, time};
        let store = Store::in_memory(Profile::Default).expect("store");
        let add = |text: &str, clear: bool| {
            store
                .write_cleared(false, clear, |w| {
                    w.insert(MemoryEntry::new(MemoryType::Semantic, text.to_owned()))
                })
                .expect("insert")
        };
        let t = time::parse_timestamp("2025-01-01T00:00:01").expect("ts");
        let old = add("tea", false);
        let before = store.read().expect("read");
        store.record_access(&[old], t, before.access_epoch());
        // Emptied (a restore with replace): the new memory may take the old docno.
        let new = add("coffee", true);
        // A recall that read the old store records its accesses only now.
        store.record_access(&[old, new], t, before.access_epoch());
        drop(before);
        let count =
            |d: u64| store.read().and_then(|r| r.get(d)).expect("get").map(|e| e.access_count);
        assert_eq!(count(new), Some(0));
        store.write_current(false, |_| Ok(())).expect("write");
        assert_eq!(count(new), Some(0));
        // Records of reads of the new store count.
        let now = store.read().expect("read").access_epoch();
        store.record_access(&[new], t, now);
        assert_eq!(count(new), Some(1));
    }
}
