//! A write-ahead log under redb: commits that sync a few scattered pages sync one
//! sequential extent instead.
//!
//! redb copies every page a commit changes to a free page wherever one is, and
//! syncs them all: a single observe at 1M memories syncs 35–40 pages scattered
//! over the file. Some disks (this project's benchmark VM among them) charge a sync
//! by the number of scattered extents: 38 scattered 4 KiB pages cost 1.28 ms, 38
//! contiguous ones 0.21 ms (`docs/PERFORMANCE.md`).
//!
//! [`LoggedFile`] is a [`redb::StorageBackend`] over three others: the database
//! file and its two logs (`<file>-log` and `<file>-log2`), used in turn.
//! - **Small commits go to the active log.** Writes are kept per 4 KiB page in
//!   memory. A sync appends the pages written since the last one to the log as one
//!   write, then a commit record (the logical length, the page count and a CRC-32
//!   chained over the group from the log's epoch), and syncs the log. Reads see the
//!   newest image of each page: pending, then the active log, then the log being
//!   checkpointed, then the file.
//! - **Checkpoints run beside the commits.** Once the active log holds
//!   [`Sizes::checkpoint`] bytes, the other log becomes the active one under a new
//!   epoch, and a background thread copies the newest image of every page of the
//!   full one into the file, syncs the file and retires the full log (its header
//!   says so). Commits go on meanwhile. A new log that fills before the copy is
//!   done takes more commits, and is handed over at the first commit after the
//!   copy; only a commit that takes it past [`Sizes::limit`] waits for the copy,
//!   so the logs stay bounded and commits wait only when the disk falls behind
//!   for long. Log bytes are written once as zeros and then overwritten, so an
//!   append changes no file-system metadata; records of earlier epochs never
//!   validate, and epochs only grow.
//! - **Large commits go to the file in place**, as redb writes without a log: a
//!   commit whose pages outgrow [`Sizes::spill`] (or [`Sizes::direct`] at its sync)
//!   waits for a checkpoint under way, then writes through; at its sync the pages
//!   the active log still holds are copied into the file and the log starts over.
//!   A batch would gain nothing from the log and be written twice.
//! - **Shrinking** is applied to the file at the next commit, which goes in place;
//!   until then the bytes past the new end read as zeros.
//! - **Recovery** ([`LoggedFile::new`]) copies into the file every complete commit
//!   group of each live log, the older epoch first; a torn group is dropped. The
//!   logs are locked for as long as the store is open, so a second opener never
//!   replays them under the first.
//! - **Close** commits what is left and checkpoints, so a closed store's file holds
//!   everything by itself.
//!
//! Crash safety rests on one property, checked by the power-loss tests here and in
//! `tests/reliability_log.rs`: after a crash and recovery, the content is that of
//! the last completed sync, plus, for a commit in place, possibly some of the
//! writes made after it. That is what a plain file guarantees, and what redb's
//! commit protocol is built for. A background copy only ever writes into the file
//! images that a live log still holds, and a log is retired only after the file
//! holding its images is synced.

use std::collections::BTreeMap;
use std::io;
use std::ops::Bound;
use std::sync::Arc;
use std::thread::JoinHandle;

use foldhash::{HashMap, HashMapExt};
use parking_lot::{RwLock, RwLockWriteGuard};
use redb::{BackendError, StorageBackend};

/// Page granularity of the log.
pub const PAGE: u64 = 4096;
const PAGE_SIZE: usize = PAGE as usize;
const TAG_PAGE: u8 = 1;
const TAG_COMMIT: u8 = 2;
/// A page record: tag, page number, image.
const PAGE_REC: u64 = 1 + 8 + PAGE;
/// A commit record: tag, logical length, pages in the group, checksum of the group.
const COMMIT_REC: u64 = 1 + 8 + 8 + 8;
/// A log's first page holds its epoch (8 bytes) and whether it is retired (1
/// byte: 0 live, 1 retired).
const HEADER: u64 = PAGE;
const RETIRED: u8 = 1;

/// The log's thresholds.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Bytes of the active log after which the other log takes over and this one
    /// is copied into the file in the background, as soon as no earlier copy is
    /// under way.
    pub checkpoint: u64,
    /// Bytes of the active log past which a commit waits for the copy under way
    /// (a limit below `checkpoint` counts as `checkpoint`): below it, a full log
    /// takes more commits while the copy before it finishes, so commits wait only
    /// when the disk falls behind.
    pub limit: u64,
    /// The log grows by this many bytes at a time, zeros written once, so that an
    /// append overwrites allocated blocks and its sync changes no file-system
    /// metadata.
    pub grow: u64,
    /// Pages of one commit, counted at its sync, above which it is written to the
    /// file in place.
    pub direct: usize,
    /// Pages of one commit kept in memory until its sync: past this many, the
    /// commit goes to the file in place at once.
    pub spill: usize,
}

impl Sizes {
    /// Thresholds for a store file of `len` bytes: each log is checkpointed at an
    /// eighth of the store (between 4 and 32 MiB) and bounded at four times that.
    #[must_use]
    pub fn for_store(len: u64) -> Self {
        let checkpoint = (len / 8).clamp(4 << 20, 32 << 20);
        Self { checkpoint, limit: 4 * checkpoint, grow: 4 << 20, direct: 512, spill: 512 }
    }
}

/// The database file and its two logs, shared with the checkpoint thread.
#[derive(Debug)]
struct Disks<D> {
    file: D,
    logs: [D; 2],
}

/// A full log being copied into the file.
#[derive(Debug)]
struct Frozen {
    /// Which of the two logs.
    log: usize,
    epoch: u64,
    /// Page → offset of its newest image in that log (what reads use until the
    /// copy is done).
    /// Shared with the copy, so handing it over copies nothing.
    pages: Arc<HashMap<u64, u64>>,
    /// The logical length when it was frozen: the copy stops there.
    len: u64,
    /// The background copy; `None` once it was reaped with an error (the next
    /// wait copies again, in the foreground).
    job: Option<JoinHandle<io::Result<()>>>,
}

#[derive(Debug)]
struct State {
    /// Logical length.
    len: u64,
    /// The logical length as of the last commit (or checkpoint).
    committed_len: u64,
    /// The file's physical length (grown at once, shrunk at checkpoints).
    file_len: u64,
    /// The smallest logical length since the last checkpoint, when it shrank: the
    /// file's bytes from there on are stale (they read as zeros).
    shrunk_to: Option<u64>,
    /// Pages written since they last went to the log.
    /// (Shared, so a write of them into the file can run with the state unlocked
    /// while reads still find them here.)
    pending: BTreeMap<u64, Arc<Vec<u8>>>,
    /// The log commits append to.
    active: usize,
    /// Pages in the active log: page → offset of its newest image.
    logged: HashMap<u64, u64>,
    /// End of the active log's records.
    end: u64,
    /// Bytes of each log allocated (written once).
    allocated: [u64; 2],
    /// The active log's epoch.
    epoch: u64,
    /// The highest epoch either log's header ever held.
    top_epoch: u64,
    /// The other log, while it is copied into the file.
    frozen: Option<Frozen>,
    /// The commit under way outgrew [`Sizes::spill`]: it goes to the file in
    /// place, as redb writes without a log (the logs were copied into the file
    /// first).
    in_place: bool,
}

/// The state, held for writing by the one thread that writes (redb's writer).
/// Syncs and waits for the background copy are made with it unlocked
/// ([`RwLockWriteGuard::unlocked`]), so reads go on meanwhile: nothing else
/// changes the state then.
type Guard<'a> = RwLockWriteGuard<'a, State>;

/// A database file with a write-ahead log (see the module docs).
#[derive(Debug)]
pub struct LoggedFile<D: StorageBackend> {
    disks: Arc<Disks<D>>,
    sizes: Sizes,
    st: RwLock<State>,
}

/// The checksum of a group's first record starts from its epoch's.
fn epoch_seed(epoch: u64) -> u32 {
    crc32fast::hash(&epoch.to_le_bytes())
}

fn chain(seed: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(seed);
    h.update(bytes);
    h.finalize()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

fn past_end() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "write-ahead log: offset past the end")
}

/// The part of the byte range at `at`, `left` bytes long, that lies in its first
/// page: the page, the offset within it and the length.
fn first_piece(at: u64, left: usize) -> (u64, usize, usize) {
    let within = usize::try_from(at % PAGE).unwrap_or(0);
    (at / PAGE, within, (PAGE_SIZE - within).min(left))
}

/// How many bytes of `page` lie below `len` (none: `None`).
fn page_bytes(page: u64, len: u64) -> Option<usize> {
    let n = len.checked_sub(page * PAGE).filter(|&n| n > 0)?;
    Some(usize::try_from(n.min(PAGE)).unwrap_or(PAGE_SIZE))
}

impl<D: StorageBackend> Disks<D> {
    /// A log's header: its epoch and whether its records count.
    fn header(&self, log: usize) -> io::Result<(u64, bool)> {
        let l = &self.logs[log];
        if l.len()? < 9 {
            return Ok((0, false));
        }
        let mut head = [0u8; 9];
        l.read(0, &mut head)?;
        Ok((u64_at(&head, 0), head[8] != RETIRED))
    }

    /// Writes a log's header (not synced).
    fn write_header(&self, log: usize, epoch: u64, live: bool) -> io::Result<()> {
        let mut head = [0u8; 9];
        head[..8].copy_from_slice(&epoch.to_le_bytes());
        head[8] = if live { 0 } else { RETIRED };
        self.logs[log].write(0, &head)
    }

    /// Writes a log's header and syncs the log.
    fn set_header(&self, log: usize, epoch: u64, live: bool) -> io::Result<()> {
        self.write_header(log, epoch, live)?;
        self.logs[log].sync_data()
    }

    /// Copies the images of `log` at `pages` ((page, offset) pairs) into the file,
    /// in page order, each cut at `len` (not synced).
    fn copy_pages(&self, log: usize, mut pages: Vec<(u64, u64)>, len: u64) -> io::Result<()> {
        pages.sort_unstable();
        let mut buf = vec![0u8; PAGE_SIZE];
        for (page, at) in pages {
            let Some(n) = page_bytes(page, len) else { continue };
            self.logs[log].read(at, &mut buf)?;
            self.file.write(page * PAGE, &buf[..n])?;
        }
        Ok(())
    }

    /// Copies the images at `pages` of `log` into the file, each cut at `len`,
    /// in page order, syncs the file and retires the log.
    fn copy_log(
        &self,
        log: usize,
        epoch: u64,
        pages: &HashMap<u64, u64>,
        len: u64,
    ) -> io::Result<()> {
        self.copy_pages(log, pages.iter().map(|(&p, &at)| (p, at)).collect(), len)?;
        self.file.sync_data()?;
        self.set_header(log, epoch, false)
    }
}

impl<D: StorageBackend> LoggedFile<D> {
    /// The database `file` with its two `logs`, recovering what a crash left in
    /// them (every complete commit group of a live log is copied into the file).
    ///
    /// # Errors
    /// I/O errors of any of them; [`io::ErrorKind::WouldBlock`] when a log is
    /// locked by another opener.
    pub fn new(file: D, logs: [D; 2], sizes: Sizes) -> io::Result<Self> {
        // The logs are held for as long as the store is open: a second opener
        // must not replay or checkpoint them under the first (backends without
        // locks, such as the test disks, go without).
        for log in &logs {
            match log.try_lock_range(Bound::Unbounded, Bound::Unbounded) {
                Ok(true) | Err(BackendError::Unsupported) => {}
                Ok(false) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "the store is already open (in this or another process)",
                    ));
                }
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        let len = file.len()?;
        let disks = Arc::new(Disks { file, logs });
        let heads = [disks.header(0)?, disks.header(1)?];
        let st = State {
            len,
            committed_len: len,
            file_len: len,
            shrunk_to: None,
            pending: BTreeMap::new(),
            active: 0,
            logged: HashMap::new(),
            end: HEADER,
            allocated: [disks.logs[0].len()?, disks.logs[1].len()?],
            epoch: 0,
            top_epoch: heads[0].0.max(heads[1].0),
            frozen: None,
            in_place: false,
        };
        // A limit under the checkpoint size would switch at the checkpoint anyway.
        let sizes = Sizes { limit: sizes.limit.max(sizes.checkpoint), ..sizes };
        let me = Self { disks, sizes, st: RwLock::new(st) };
        {
            let mut st = me.st.write();
            let mut live: Vec<usize> = (0..2).filter(|&i| heads[i].1).collect();
            live.sort_by_key(|&i| heads[i].0);
            for i in live {
                me.replay(&mut st, i, heads[i].0)?;
                me.checkpoint(&mut st, false)?;
            }
            // Both logs are made their checkpoint size here, one write and one sync
            // each, once in a store's life (a file copied or restored without its
            // logs too): grown inside commits instead, each step of `grow` would
            // make one commit sync its zeros as well (a 1M store's first 64 MiB of
            // commits: 16 of them at 13-18 ms).
            for log in 0..2 {
                if st.allocated[log] < me.sizes.checkpoint {
                    me.allocate(&mut st, log, me.sizes.checkpoint)?;
                    me.disks.logs[log].sync_data()?;
                }
            }
            // Always a fresh epoch: whatever a crash left past the last complete
            // group can never validate.
            let active = st.active;
            me.begin_epoch(&mut st, active)?;
        }
        Ok(me)
    }

    /// Makes `log` the active log under a new epoch, empty.
    fn begin_epoch(&self, st: &mut Guard<'_>, log: usize) -> io::Result<()> {
        self.allocate(st, log, HEADER)?;
        st.top_epoch += 1;
        self.disks.write_header(log, st.top_epoch, true)?;
        Guard::unlocked(st, || self.disks.logs[log].sync_data())?;
        st.active = log;
        st.epoch = st.top_epoch;
        st.end = HEADER;
        st.logged.clear();
        Ok(())
    }

    /// Reads the complete groups of `log` (epoch `epoch`) as the active log's
    /// content, on top of the file as it is.
    fn replay(&self, st: &mut State, log: usize, epoch: u64) -> io::Result<()> {
        let l = &self.disks.logs[log];
        st.in_place = false;
        st.pending.clear();
        st.logged.clear();
        st.file_len = self.disks.file.len()?;
        st.len = st.file_len;
        st.shrunk_to = None;
        st.active = log;
        st.epoch = epoch;
        st.end = HEADER;
        let size = l.len()?;
        let mut pos = HEADER;
        let mut group: Vec<(u64, u64)> = Vec::new();
        let mut sum = epoch_seed(epoch);
        let mut rec = vec![0u8; PAGE_REC as usize];
        while pos + COMMIT_REC <= size {
            let mut tag = [0u8; 1];
            l.read(pos, &mut tag)?;
            if tag[0] == TAG_PAGE && pos + PAGE_REC <= size {
                l.read(pos, &mut rec)?;
                sum = chain(sum, &rec);
                group.push((u64_at(&rec, 1), pos + 9));
                pos += PAGE_REC;
            } else if tag[0] == TAG_COMMIT {
                let mut c = [0u8; COMMIT_REC as usize];
                l.read(pos, &mut c)?;
                if u64_at(&c, 9) != group.len() as u64 || u64_at(&c, 17) != u64::from(sum) {
                    break;
                }
                for (page, at) in group.drain(..) {
                    st.logged.insert(page, at);
                }
                st.len = u64_at(&c, 1);
                sum = epoch_seed(epoch);
                pos += COMMIT_REC;
                st.end = pos;
            } else {
                break;
            }
        }
        st.committed_len = st.len;
        Ok(())
    }

    /// Waits for the background copy of the frozen log, if any, when `wait` or
    /// when it is done. A copy that failed is made again here; its error is
    /// returned if that fails too (the frozen log stays live and readable).
    fn reap(&self, st: &mut Guard<'_>, wait: bool) -> io::Result<()> {
        let Some(frozen) = st.frozen.as_mut() else { return Ok(()) };
        if let Some(job) = frozen.job.take() {
            if !wait && !job.is_finished() {
                frozen.job = Some(job);
                return Ok(());
            }
            if matches!(Guard::unlocked(st, || job.join()), Ok(Ok(()))) {
                st.frozen = None;
                return Ok(());
            }
        } else if !wait {
            return Ok(());
        }
        let Some(f) = st.frozen.as_ref() else { return Ok(()) };
        let (log, epoch, len, pages) = (f.log, f.epoch, f.len, Arc::clone(&f.pages));
        Guard::unlocked(st, || self.disks.copy_log(log, epoch, &pages, len))?;
        st.frozen = None;
        Ok(())
    }

    /// Hands the full active log to a background copy and makes the other one
    /// active; first waits for the copy before, so at most one log is copied.
    fn switch(&self, st: &mut Guard<'_>) -> io::Result<()> {
        self.reap(st, true)?;
        let (full, epoch, len) = (st.active, st.epoch, st.len);
        // Frozen first: reads find its pages while the new epoch is synced.
        let pages = Arc::new(std::mem::take(&mut st.logged));
        st.frozen = Some(Frozen { log: full, epoch, pages, len, job: None });
        if let Err(e) = self.begin_epoch(st, 1 - full) {
            if let Some(f) = st.frozen.take() {
                st.logged = Arc::unwrap_or_clone(f.pages);
            }
            return Err(e);
        }
        let Some(frozen) = st.frozen.as_mut() else { return Ok(()) };
        let disks = Arc::clone(&self.disks);
        let copy = Arc::clone(&frozen.pages);
        frozen.job = std::thread::Builder::new()
            .name("soulmem-checkpoint".into())
            .spawn(move || disks.copy_log(full, epoch, &copy, len))
            .ok();
        if frozen.job.is_none() {
            // No thread: the copy is made here.
            self.reap(st, true)?;
        }
        Ok(())
    }

    /// Copies into the file the newest image of every logged page (and, with
    /// `direct`, every pending one), after the background copy under way, syncs
    /// it, and starts the active log over under a new epoch.
    fn checkpoint(&self, st: &mut Guard<'_>, direct: bool) -> io::Result<()> {
        self.reap(st, true)?;
        let work = st.end > HEADER || !st.logged.is_empty() || (direct && !st.pending.is_empty());
        if let Some(low) = st.shrunk_to.take()
            && low < st.file_len
        {
            self.disks.file.set_len(low)?;
            st.file_len = low;
        }
        if st.file_len != st.len {
            self.disks.file.set_len(st.len)?;
            st.file_len = st.len;
        }
        if !work {
            if st.committed_len != st.len {
                Guard::unlocked(st, || self.disks.file.sync_data())?;
                st.committed_len = st.len;
            }
            return Ok(());
        }
        let pages: Vec<(u64, u64)> = st
            .logged
            .iter()
            .filter(|(p, _)| !(direct && st.pending.contains_key(*p)))
            .map(|(&p, &at)| (p, at))
            .collect();
        // Unlocked: reads take these pages from the log meanwhile, and nothing
        // else writes.
        let (log, len) = (st.active, st.len);
        Guard::unlocked(st, || self.disks.copy_pages(log, pages, len))?;
        if direct {
            self.write_pending(st)?;
        }
        Guard::unlocked(st, || self.disks.file.sync_data())?;
        st.committed_len = st.len;
        let active = st.active;
        self.begin_epoch(st, active)
    }

    /// The file's bytes at `offset` as the logical content has them: zeros past
    /// its physical end or a shrink since the last checkpoint.
    fn read_file(&self, st: &State, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let valid = st.shrunk_to.map_or(st.file_len, |s| s.min(st.file_len));
        let have = usize::try_from(valid.saturating_sub(offset).min(out.len() as u64)).unwrap_or(0);
        if have > 0 {
            self.disks.file.read(offset, &mut out[..have])?;
        }
        out[have..].fill(0);
        Ok(())
    }

    /// Where the newest image of `page` is, when not in the file: pending, the
    /// active log, the frozen log.
    fn locate<'a>(st: &'a State, page: u64) -> Option<Image<'a>> {
        if let Some(img) = st.pending.get(&page) {
            return Some(Image::Pending(img));
        }
        if let Some(&at) = st.logged.get(&page) {
            return Some(Image::Log(st.active, at));
        }
        let f = st.frozen.as_ref()?;
        f.pages.get(&page).map(|&at| Image::Log(f.log, at))
    }

    /// Reads `out.len()` bytes from `within` of the current image of `page`.
    fn read_page(&self, st: &State, page: u64, within: usize, out: &mut [u8]) -> io::Result<()> {
        match Self::locate(st, page) {
            Some(Image::Pending(img)) => {
                out.copy_from_slice(&img[within..within + out.len()]);
                Ok(())
            }
            Some(Image::Log(log, at)) => self.disks.logs[log].read(at + within as u64, out),
            None => self.read_file(st, page * PAGE + within as u64, out),
        }
    }

    /// Makes sure `log`'s bytes up to `upto` are allocated.
    fn allocate(&self, st: &mut State, log: usize, upto: u64) -> io::Result<()> {
        if upto <= st.allocated[log] {
            return Ok(());
        }
        let target = upto.div_ceil(self.sizes.grow).max(1) * self.sizes.grow;
        let l = &self.disks.logs[log];
        l.set_len(target)?;
        let zeros = vec![0u8; 1 << 20];
        let mut at = st.allocated[log];
        while at < target {
            let n = usize::try_from((target - at).min(1 << 20)).unwrap_or(0);
            l.write(at, &zeros[..n])?;
            at += n as u64;
        }
        st.allocated[log] = target;
        Ok(())
    }

    /// Appends the pending pages and their commit record to the active log as one
    /// write and syncs it.
    fn append_group(&self, st: &mut Guard<'_>) -> io::Result<()> {
        let count = st.pending.len() as u64;
        let mut buf =
            Vec::with_capacity(st.pending.len() * PAGE_REC as usize + COMMIT_REC as usize);
        let mut sum = epoch_seed(st.epoch);
        let mut at = Vec::with_capacity(st.pending.len());
        for (&page, img) in &st.pending {
            let start = buf.len();
            buf.push(TAG_PAGE);
            buf.extend_from_slice(&page.to_le_bytes());
            buf.extend_from_slice(img);
            sum = chain(sum, &buf[start..]);
            at.push((page, st.end + start as u64 + 9));
        }
        buf.push(TAG_COMMIT);
        buf.extend_from_slice(&st.len.to_le_bytes());
        buf.extend_from_slice(&count.to_le_bytes());
        buf.extend_from_slice(&u64::from(sum).to_le_bytes());
        let (active, end) = (st.active, st.end);
        self.allocate(st, active, end + buf.len() as u64)?;
        let log = &self.disks.logs[active];
        log.write(end, &buf)?;
        st.end += buf.len() as u64;
        for (page, offset) in at {
            st.logged.insert(page, offset);
        }
        st.pending.clear();
        // Reads find the same images in the log as in `pending`: they go on
        // during the sync.
        Guard::unlocked(st, || log.sync_data())
    }

    /// Sends the commit under way to the file in place: its pages so far are
    /// written there, after any background copy (which must not write older
    /// images over them). The logs stay as they are until the commit's sync: a
    /// crash before it may bring back a page's logged image, the content of the
    /// last sync, as a plain file may keep a page's old content. Nothing is synced
    /// here, so commits that never sync (redb's `Durability::None`) cost no sync.
    fn go_in_place(&self, st: &mut Guard<'_>) -> io::Result<()> {
        self.reap(st, true)?;
        if st.shrunk_to.is_some() {
            // The file's stale tail goes first (rare: a shrink, then a large commit).
            self.checkpoint(st, true)?;
        } else {
            if st.file_len != st.len {
                self.disks.file.set_len(st.len)?;
                st.file_len = st.len;
            }
            self.write_pending(st)?;
        }
        st.in_place = true;
        Ok(())
    }

    /// Writes the pending pages into the file (not synced); from then on they
    /// are read from there, not from the log. The writes run with the state
    /// unlocked: reads take these pages from `pending` meanwhile (which only this
    /// thread, redb's writer, changes), never from the file being written.
    fn write_pending(&self, st: &mut Guard<'_>) -> io::Result<()> {
        let pages: Vec<(u64, Arc<Vec<u8>>)> =
            st.pending.iter().map(|(&page, img)| (page, Arc::clone(img))).collect();
        let len = st.len;
        Guard::unlocked(st, || {
            for (page, img) in &pages {
                let Some(n) = page_bytes(*page, len) else { continue };
                self.disks.file.write(page * PAGE, &img[..n])?;
            }
            Ok::<(), io::Error>(())
        })?;
        for (page, _) in &pages {
            st.logged.remove(page);
        }
        st.pending.clear();
        Ok(())
    }

    /// A write in place: a page the active log holds is written whole (its
    /// image, then the data), and from then on read from the file.
    fn write_in_place(&self, st: &mut State, offset: u64, data: &[u8]) -> io::Result<()> {
        if st.logged.is_empty() {
            return self.disks.file.write(offset, data);
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (page, within, n) = first_piece(at, data.len() - done);
            if n < PAGE_SIZE && st.logged.contains_key(&page) {
                let mut img = vec![0u8; PAGE_SIZE];
                self.read_page(st, page, 0, &mut img)?;
                img[within..within + n].copy_from_slice(&data[done..done + n]);
                let whole = page_bytes(page, st.len).unwrap_or(0);
                self.disks.file.write(page * PAGE, &img[..whole])?;
            } else {
                self.disks.file.write(at, &data[done..done + n])?;
            }
            st.logged.remove(&page);
            done += n;
        }
        Ok(())
    }

    /// Commits what was written since the last commit (see the module docs).
    fn commit(&self, st: &mut Guard<'_>) -> io::Result<()> {
        if st.in_place {
            // The logged pages not overwritten go to the file too, then the log
            // starts over: after this sync it must never be replayed over the
            // file.
            if st.end > HEADER || !st.logged.is_empty() {
                self.checkpoint(st, false)?;
            } else {
                Guard::unlocked(st, || self.disks.file.sync_data())?;
            }
            st.committed_len = st.len;
            st.in_place = false;
            return Ok(());
        }
        // A finished background copy frees its log (and its map) here.
        self.reap(st, false)?;
        let pages = st.pending.len();
        if pages > self.sizes.direct || st.shrunk_to.is_some() {
            // In place, after the logs, as redb alone would write it.
            return self.checkpoint(st, true);
        }
        if pages == 0 && st.len == st.committed_len {
            return Ok(());
        }
        self.append_group(st)?;
        st.committed_len = st.len;
        // `reap` above left a copy only if it is still running: a full log then
        // takes more commits, up to the limit, rather than make this one wait.
        if st.end >= self.sizes.checkpoint && (st.frozen.is_none() || st.end >= self.sizes.limit) {
            self.switch(st)?;
        }
        Ok(())
    }
}

impl<D: StorageBackend> Drop for LoggedFile<D> {
    /// Waits for a background copy still running (its result is the next
    /// opener's to recover from).
    fn drop(&mut self) {
        if let Some(job) = self.st.get_mut().frozen.as_mut().and_then(|f| f.job.take()) {
            let _ = job.join();
        }
    }
}

#[cfg(test)]
impl<D: StorageBackend> LoggedFile<D> {
    /// Whether a full log is being copied into the file.
    fn checkpointing(&self) -> bool {
        self.st.read().frozen.is_some()
    }
}

/// Where a page's newest image is.
enum Image<'a> {
    Pending(&'a [u8]),
    /// In a log, at an offset.
    Log(usize, u64),
}

impl<D: StorageBackend> StorageBackend for LoggedFile<D> {
    fn len(&self) -> io::Result<u64> {
        Ok(self.st.read().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let st = self.st.read();
        let end = offset.checked_add(out.len() as u64).ok_or_else(past_end)?;
        if end > st.len {
            return Err(past_end());
        }
        if st.pending.is_empty() && st.logged.is_empty() && st.frozen.is_none() {
            return self.read_file(&st, offset, out);
        }
        // Page by page: each piece from the newest image of its page, read in
        // place (no copy of whole pages); runs of pages the file holds as they
        // are, at once.
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let (page, within, n) = first_piece(at, out.len() - done);
            if Self::locate(&st, page).is_some() {
                self.read_page(&st, page, within, &mut out[done..done + n])?;
                done += n;
                continue;
            }
            let mut m = n;
            while done + m < out.len() {
                let next = page + (m as u64 + within as u64) / PAGE;
                if Self::locate(&st, next).is_some() {
                    break;
                }
                m = (m + PAGE_SIZE).min(out.len() - done);
            }
            self.read_file(&st, at, &mut out[done..done + m])?;
            done += m;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.st.write();
        if st.in_place {
            if len < st.len {
                // A logged page cut by the new end is written whole first; logged
                // images past it go (a later growth must find zeros there).
                let first_gone = len.div_ceil(PAGE);
                let page = len / PAGE;
                if len % PAGE != 0 && st.logged.contains_key(&page) {
                    let mut buf = vec![0u8; PAGE_SIZE];
                    let cut = usize::try_from(len % PAGE).unwrap_or(0);
                    self.read_page(&st, page, 0, &mut buf[..cut])?;
                    self.disks.file.write(page * PAGE, &buf[..cut])?;
                    st.logged.remove(&page);
                }
                st.logged.retain(|&p, _| p < first_gone);
            }
            self.disks.file.set_len(len)?;
            st.file_len = len;
            st.len = len;
            return Ok(());
        }
        if len < st.len {
            // Bytes past the new end read as zeros from now on (a later growth
            // must find zeros there): images past it go, the file's bytes count
            // as stale until the next commit, which goes in place and truncates
            // the file first (after any background copy).
            let first_gone = len.div_ceil(PAGE);
            if len % PAGE != 0 {
                let page = len / PAGE;
                let mut buf = vec![0u8; PAGE_SIZE];
                let cut = usize::try_from(len % PAGE).unwrap_or(0);
                self.read_page(&st, page, 0, &mut buf[..cut])?;
                st.pending.insert(page, Arc::new(buf));
            }
            st.pending.retain(|&p, _| p < first_gone);
            st.logged.retain(|&p, _| p < first_gone);
            if let Some(f) = st.frozen.as_mut() {
                // A copy still running keeps the map it was given.
                Arc::make_mut(&mut f.pages).retain(|&p, _| p < first_gone);
            }
            st.shrunk_to = Some(st.shrunk_to.map_or(len, |s| s.min(len)));
        } else if len > st.file_len && st.shrunk_to.is_none() {
            // Grown at once: zeros, whatever happens to the commit.
            self.disks.file.set_len(len)?;
            st.file_len = len;
        }
        st.len = len;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.st.write();
        self.commit(&mut st)
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut st = self.st.write();
        let end = offset.checked_add(data.len() as u64).ok_or_else(past_end)?;
        if end > st.len {
            return Err(past_end());
        }
        if st.in_place {
            return self.write_in_place(&mut st, offset, data);
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (page, within, n) = first_piece(at, data.len() - done);
            let mut img = vec![0u8; PAGE_SIZE];
            if n < PAGE_SIZE {
                self.read_page(&st, page, 0, &mut img)?;
            }
            img[within..within + n].copy_from_slice(&data[done..done + n]);
            st.pending.insert(page, Arc::new(img));
            done += n;
        }
        if st.pending.len() > self.sizes.spill {
            self.go_in_place(&mut st)?;
        }
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        // What a file would keep after a clean close: every write, committed;
        // then the file alone holds it all.
        let done = {
            let mut st = self.st.write();
            let done = self.commit(&mut st).and_then(|()| self.checkpoint(&mut st, false));
            // Even after an error, no copy goes on past the close.
            done.and(self.reap(&mut st, true))
        };
        let file = self.disks.file.close();
        let [a, b] = &self.disks.logs;
        let logs = a.close().and(b.close());
        done.and(file).and(logs)
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.disks.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.disks.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.disks.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.disks.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.disks.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.disks.file.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::faulty::{FaultControl, Faults, FaultyBackend, Rng, SharedDisk};

    /// Small thresholds, so that a few hundred operations go through log commits,
    /// checkpoints and in-place commits; writes stay out of the file until their
    /// commit (no spill), so a crash leaves exactly the last commit.
    const SMALL: Sizes = Sizes {
        checkpoint: 96 << 10,
        limit: 192 << 10,
        grow: 16 << 10,
        direct: 12,
        spill: usize::MAX,
    };
    /// The same, with commits that outgrow 9 pages going to the file in place
    /// before their sync.
    const SPILLING: Sizes = Sizes { spill: 9, ..SMALL };
    /// Commits of three pages or more go in place, most of them over pages the
    /// log holds.
    const EAGER: Sizes = Sizes { spill: 2, ..SMALL };
    /// What a commit of two pages appends to the log.
    const TWO_PAGES: u64 = 2 * PAGE_REC + COMMIT_REC;

    type Log = LoggedFile<FaultyBackend>;

    /// Seeds per test (more with `SOULMEM_LOG_SEEDS`).
    static SEEDS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        std::env::var("SOULMEM_LOG_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
    });

    /// The two logs' disks.
    type Logs = [SharedDisk; 2];

    fn new_disks() -> (SharedDisk, Logs) {
        (SharedDisk::new(), [SharedDisk::new(), SharedDisk::new()])
    }

    /// What a power loss leaves of the file and both logs (one instant).
    fn crash(file: &SharedDisk, logs: &Logs, seed: u64) -> (SharedDisk, Logs) {
        let mut images = SharedDisk::crash_images(&[file, &logs[0], &logs[1]], seed).into_iter();
        let mut next = || SharedDisk::from_bytes(images.next().unwrap_or_default());
        (next(), [next(), next()])
    }

    fn open(file: &SharedDisk, logs: &Logs) -> (Log, FaultControl, [FaultControl; 2]) {
        open_with(file, logs, SMALL)
    }

    fn open_with(
        file: &SharedDisk,
        logs: &Logs,
        sizes: Sizes,
    ) -> (Log, FaultControl, [FaultControl; 2]) {
        let (f, fc) = FaultyBackend::new(file.clone());
        let (a, ac) = FaultyBackend::new(logs[0].clone());
        let (b, bc) = FaultyBackend::new(logs[1].clone());
        (LoggedFile::new(f, [a, b], sizes).expect("open the log"), fc, [ac, bc])
    }

    fn content<D: StorageBackend>(b: &LoggedFile<D>) -> Vec<u8> {
        let len = usize::try_from(b.len().expect("len")).expect("len");
        let mut out = vec![0u8; len];
        b.read(0, &mut out).expect("read");
        out
    }

    thread_local! {
        /// Whether the last step was a sync that has not returned.
        static SYNCING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// The lowest length the model had since its last sync.
        static LOWEST: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
        /// Set by each completed sync.
        static SYNCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// One random operation on both the log and a plain byte model.
    fn step(rng: &mut Rng, b: &Log, model: &mut Vec<u8>, synced: &mut Vec<u8>) -> io::Result<()> {
        match rng.below(10) {
            0..=5 if !model.is_empty() => {
                // Mostly whole pages, as redb writes; sometimes a few bytes.
                let pages = model.len().div_ceil(PAGE_SIZE) as u64;
                let (at, n) = if rng.below(4) == 0 {
                    let at = rng.below(model.len() as u64) as usize;
                    (at, (1 + rng.below(600) as usize).min(model.len() - at))
                } else {
                    let p = rng.below(pages) as usize * PAGE_SIZE;
                    (p, PAGE_SIZE.min(model.len() - p))
                };
                let byte = (rng.below(255) + 1) as u8;
                b.write(at as u64, &vec![byte; n])?;
                model[at..at + n].fill(byte);
            }
            6 => {
                // Grow more often than shrink, to an unaligned length sometimes.
                let len = model.len() as u64;
                let new = if rng.below(3) == 0 {
                    len.saturating_sub(rng.below(3 * PAGE + 1))
                } else {
                    len + rng.below(4 * PAGE) + if rng.below(2) == 0 { 0 } else { 7 }
                };
                if std::env::var_os("LOGDBG").is_some() {
                    eprintln!("set_len {} -> {new}", model.len());
                }
                b.set_len(new)?;
                model.resize(usize::try_from(new).expect("len"), 0);
                LOWEST.set(LOWEST.get().min(model.len()));
            }
            _ => {
                SYNCING.set(true);
                if std::env::var_os("LOGDBG").is_some() {
                    eprintln!("sync (len {})", model.len());
                }
                b.sync_data()?;
                SYNCING.set(false);
                synced.clone_from(model);
                LOWEST.set(model.len());
                SYNCED.set(true);
            }
        }
        Ok(())
    }

    /// Holds the next write of a disk until released (a slow disk, made
    /// deterministic).
    #[derive(Debug, Default)]
    struct Gate {
        /// (armed, a write is held, released)
        state: std::sync::Mutex<(bool, bool, bool)>,
        changed: std::sync::Condvar,
    }

    impl Gate {
        fn update(&self, f: impl FnOnce(&mut (bool, bool, bool))) {
            let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut st);
            self.changed.notify_all();
        }

        /// Waits until `until` holds, at most `secs` seconds; whether it held.
        fn wait(&self, secs: u64, until: impl Fn(&(bool, bool, bool)) -> bool) -> bool {
            let st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (st, _) = self
                .changed
                .wait_timeout_while(st, std::time::Duration::from_secs(secs), |s| !until(s))
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            until(&st)
        }
    }

    /// A test disk whose writes can be held at a [`Gate`].
    #[derive(Debug)]
    struct Gated(FaultyBackend, Option<Arc<Gate>>);

    impl Gated {
        fn new(disk: &SharedDisk, gate: Option<Arc<Gate>>) -> Self {
            Self(FaultyBackend::new(disk.clone()).0, gate)
        }
    }

    impl StorageBackend for Gated {
        fn len(&self) -> io::Result<u64> {
            self.0.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
            self.0.read(offset, out)
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.0.set_len(len)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.0.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            if let Some(g) = &self.1
                && g.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0
            {
                g.update(|s| s.1 = true);
                g.wait(60, |s| s.2);
            }
            self.0.write(offset, data)
        }
    }

    #[test]
    fn reads_go_on_while_a_commit_writes_its_pages_in_place() {
        let (file, logs) = new_disks();
        let gate = Arc::new(Gate::default());
        let b = Arc::new(
            LoggedFile::new(
                Gated::new(&file, Some(Arc::clone(&gate))),
                [Gated::new(&logs[0], None), Gated::new(&logs[1], None)],
                SPILLING,
            )
            .expect("open"),
        );
        let page = |v: u8| vec![v; PAGE_SIZE];
        b.set_len(12 * PAGE).expect("len");
        for p in 0..4 {
            b.write(p * PAGE, &page(1)).expect("write");
        }
        b.sync_data().expect("sync (through the log)");
        // The next commit outgrows `spill` at its tenth page: its pages go into
        // the file, the first write of which the disk holds.
        gate.update(|s| s.0 = true);
        let writer = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || -> io::Result<()> {
                for p in 0..10 {
                    b.write(p * PAGE, &vec![2u8; PAGE_SIZE])?;
                }
                b.sync_data()
            })
        };
        assert!(gate.wait(60, |s| s.1), "the commit never wrote into the file");
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                let mut out = vec![0u8; 2 * PAGE_SIZE];
                let got = b.read(3 * PAGE, &mut out).map(|()| out);
                let _ = tx.send(got);
            })
        };
        // The read must not wait for the held write (it would wait forever).
        let got = rx.recv_timeout(std::time::Duration::from_secs(60));
        gate.update(|s| s.2 = true);
        let got = got.expect("a read waited for the commit's writes into the file");
        // The commit's pages, though the file does not hold them yet.
        assert_eq!(got.expect("read"), [page(2), page(2)].concat());
        reader.join().expect("reader");
        writer.join().expect("writer").expect("commit");
        let mut out = vec![0u8; 12 * PAGE_SIZE];
        b.read(0, &mut out).expect("read");
        assert_eq!(out, [vec![2u8; 10 * PAGE_SIZE], vec![0u8; 2 * PAGE_SIZE]].concat());
        b.close().expect("close");
        assert_eq!(file.bytes(), out);
    }

    #[test]
    fn both_logs_are_allocated_at_open_so_commits_only_overwrite() {
        let (file, logs) = new_disks();
        let (b, _, _) = open(&file, &logs);
        let sizes = [logs[0].bytes().len(), logs[1].bytes().len()];
        let want = usize::try_from(SMALL.checkpoint).expect("size");
        assert!(sizes.iter().all(|&n| n >= want), "logs {sizes:?} after open");
        // Commits up to the first switch write into the zeros already there.
        b.set_len(4 * PAGE).expect("len");
        while !b.checkpointing() && b.st.read().end + TWO_PAGES < SMALL.checkpoint {
            b.write(0, &[7u8; PAGE_SIZE]).expect("write");
            b.write(PAGE, &[8u8; PAGE_SIZE]).expect("write");
            b.sync_data().expect("sync");
        }
        assert_eq!([logs[0].bytes().len(), logs[1].bytes().len()], sizes);
        b.close().expect("close");
    }

    #[test]
    fn a_full_log_takes_commits_while_the_copy_before_it_runs() {
        let (file, logs) = new_disks();
        let gate = Arc::new(Gate::default());
        let b = Arc::new(
            LoggedFile::new(
                Gated::new(&file, Some(Arc::clone(&gate))),
                [Gated::new(&logs[0], None), Gated::new(&logs[1], None)],
                SMALL,
            )
            .expect("open"),
        );
        b.set_len(8 * PAGE).expect("len");
        // The file's writes are held: the first checkpoint's copy cannot finish.
        gate.update(|s| s.0 = true);
        let (tx, rx) = std::sync::mpsc::channel();
        let committer = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || -> io::Result<()> {
                let mut v = 0u8;
                let mut commit = |b: &LoggedFile<Gated>| -> io::Result<()> {
                    v = v.wrapping_add(1).max(1);
                    b.write(u64::from(v % 8) * PAGE, &vec![v; PAGE_SIZE])?;
                    b.write(u64::from((v + 3) % 8) * PAGE, &vec![v; PAGE_SIZE])?;
                    b.sync_data()
                };
                // Fill the first log, then the second past its checkpoint size
                // while the first one's copy is held.
                while !b.checkpointing() {
                    commit(&b)?;
                }
                while b.st.read().end < SMALL.checkpoint + SMALL.checkpoint / 2 {
                    commit(&b)?;
                }
                let _ = tx.send(b.st.read().end);
                // Up to the limit (a commit appends two pages and its record),
                // then one more commit: that one reaches it and must switch.
                while b.st.read().end + TWO_PAGES < SMALL.limit {
                    commit(&b)?;
                }
                let _ = tx.send(b.st.read().end);
                commit(&b)?;
                let _ = tx.send(b.st.read().end);
                Ok(())
            })
        };
        let past = rx.recv_timeout(std::time::Duration::from_secs(60));
        let held = gate.wait(60, |s| s.1 && !s.2) && b.checkpointing();
        let at_limit = rx.recv_timeout(std::time::Duration::from_secs(60));
        let still_held = b.checkpointing();
        gate.update(|s| s.2 = true);
        let past = past.expect("a commit waited for the copy of the log before");
        assert!(held, "the first log's copy was not under way");
        assert!(past >= SMALL.checkpoint + SMALL.checkpoint / 2, "log end {past}");
        let at_limit = at_limit.expect("commits below the limit waited for the copy");
        assert!(still_held, "the copy was not held");
        assert!(at_limit + TWO_PAGES >= SMALL.limit, "log end {at_limit}");
        // The commit over the limit switched logs once the copy was done.
        let after = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("last commit");
        assert!(after < SMALL.checkpoint, "the log went on past its limit: {after}");
        committer.join().expect("committer").expect("commits");
        let expect = content(&b);
        b.close().expect("close");
        assert_eq!(file.bytes(), expect);
    }

    #[test]
    fn reads_every_write_back_like_a_file() {
        // Steps read back while a full log was being copied in the background.
        let mut frozen_reads = 0u64;
        for seed in 0..*SEEDS * 2 {
            let (file, log) = new_disks();
            let sizes = [SMALL, SPILLING, EAGER][(seed % 3) as usize];
            let (b, _, _) = open_with(&file, &log, sizes);
            let mut rng = Rng::new(seed);
            let (mut model, mut synced) = (Vec::new(), Vec::new());
            b.set_len(3 * PAGE).expect("len");
            model.resize(3 * PAGE_SIZE, 0);
            for i in 0..400 {
                step(&mut rng, &b, &mut model, &mut synced).expect("step");
                frozen_reads += u64::from(b.checkpointing());
                assert_eq!(content(&b), model, "seed {seed} step {i}");
            }
            // A clean close leaves everything in the file alone.
            b.close().expect("close");
            assert_eq!(file.bytes(), model, "seed {seed}: after close");
        }
        assert!(frozen_reads > 0, "no read while a checkpoint ran");
    }

    #[test]
    fn power_loss_between_calls_keeps_the_last_sync() {
        for seed in 0..*SEEDS * 2 {
            let (file, log) = new_disks();
            let (b, _, _) = open(&file, &log);
            let mut rng = Rng::new(1000 + seed);
            let (mut model, mut synced) = (Vec::new(), Vec::new());
            b.set_len(2 * PAGE).expect("len");
            model.resize(2 * PAGE_SIZE, 0);
            b.sync_data().expect("sync");
            synced.clone_from(&model);
            let cut = 20 + rng.below(300);
            for _ in 0..cut {
                step(&mut rng, &b, &mut model, &mut synced).expect("step");
            }
            // The power goes: each disk keeps what it synced and some of the rest.
            let (file, log) = crash(&file, &log, seed);
            let (again, _, _) = open(&file, &log);
            let got = content(&again);
            // A growth of the file may survive unsynced, as zeros (as on a real
            // file system); the synced bytes are all there.
            assert!(got.len() >= synced.len(), "seed {seed}: {} < {}", got.len(), synced.len());
            assert_eq!(&got[..synced.len()], &synced[..], "seed {seed}: synced bytes");
            assert!(got[synced.len()..].iter().all(|&x| x == 0), "seed {seed}: tail");
        }
    }

    #[test]
    fn a_disk_dying_mid_commit_leaves_the_last_sync_or_this_one() {
        for seed in std::env::var("LOGSEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(0..*SEEDS * 3, |s: u64| s..s + 1)
        {
            let (file, log) = new_disks();
            let (b, fc, lc) = open(&file, &log);
            let mut rng = Rng::new(5000 + seed);
            let (mut model, mut synced) = (Vec::new(), Vec::new());
            b.set_len(2 * PAGE).expect("len");
            model.resize(2 * PAGE_SIZE, 0);
            b.sync_data().expect("sync");
            synced.clone_from(&model);
            LOWEST.set(model.len());
            for _ in 0..rng.below(200) {
                step(&mut rng, &b, &mut model, &mut synced).expect("step");
            }
            // Both disks die after a few more mutations, somewhere in the next
            // commits.
            let k = rng.below(40);
            fc.arm(Faults { fail_after_writes: Some(k), ..Faults::default() });
            for c in &lc {
                c.arm(Faults { fail_after_writes: Some(k + rng.below(3)), ..Faults::default() });
            }
            let mut in_flight = None;
            SYNCING.set(false);
            for _ in 0..400 {
                let prev = model.clone();
                if step(&mut rng, &b, &mut model, &mut synced).is_err() {
                    // Only a commit in flight may leave its writes behind.
                    if SYNCING.get() {
                        in_flight = Some(prev);
                    }
                    break;
                }
            }
            let (file, log) = crash(&file, &log, seed);
            let (again, _, _) = open(&file, &log);
            let got = content(&again);
            // Each page holds its last synced image or, for a commit in flight,
            // its new one, or the old one cut where that commit shrank the file
            // (a truncation lands like a write of zeros, as on a file system).
            let last = &synced;
            let new = in_flight.as_ref().unwrap_or(last);
            let mut cut = last.clone();
            if in_flight.is_some() {
                let low = LOWEST.get().min(cut.len());
                cut[low..].fill(0);
            }
            for (p, chunk) in got.chunks(PAGE_SIZE).enumerate() {
                let at = p * PAGE_SIZE;
                let page = |m: &Vec<u8>| {
                    m.get(at..(at + chunk.len()).min(m.len())).unwrap_or(&[]).to_vec()
                };
                let is = |want: &[u8]| {
                    chunk[..want.len()] == *want && chunk[want.len()..].iter().all(|&x| x == 0)
                };
                if !(is(&page(last)) || is(&page(new)) || is(&page(&cut))) {
                    let diff = |w: &[u8]| {
                        chunk
                            .iter()
                            .enumerate()
                            .find(|(i, x)| w.get(*i).copied().unwrap_or(0) != **x)
                            .map(|(i, x)| (i, *x, w.get(i).copied()))
                    };
                    panic!(
                        "seed {seed}: page {p} is neither: got len {} last len {} new len {} low {} in_flight {} diff old {:?} new {:?} cut {:?}",
                        got.len(),
                        last.len(),
                        new.len(),
                        LOWEST.get(),
                        in_flight.is_some(),
                        diff(&page(last)),
                        diff(&page(new)),
                        diff(&page(&cut))
                    );
                }
            }
        }
    }

    /// Whether `chunk` (page `p` of a recovered file) is what some moment since
    /// the last commit had there, possibly cut by one of its lengths: the crash
    /// model of a plain file, which redb's commits are built for.
    fn some_moment(chunk: &[u8], p: usize, history: &[Vec<u8>]) -> bool {
        let at = p * PAGE_SIZE;
        let lens: Vec<usize> = history.iter().map(Vec::len).collect();
        history.iter().any(|h| {
            let img = h.get(at..(at + chunk.len()).min(h.len())).unwrap_or(&[]);
            let same_to = |cut: usize| {
                let cut = cut.saturating_sub(at).min(chunk.len());
                chunk.iter().enumerate().all(|(i, &x)| {
                    let want = if i < cut { img.get(i).copied().unwrap_or(0) } else { 0 };
                    x == want
                })
            };
            same_to(usize::MAX) || lens.iter().any(|&c| same_to(c))
        })
    }

    #[test]
    fn power_loss_mid_commit_in_place_leaves_a_file_redb_can_recover() {
        for seed in 0..*SEEDS * 2 {
            let (file, log) = new_disks();
            let (b, _, _) = open_with(&file, &log, SPILLING);
            let mut rng = Rng::new(9000 + seed);
            let (mut model, mut synced) = (vec![0u8; 2 * PAGE_SIZE], Vec::new());
            b.set_len(2 * PAGE).expect("len");
            b.sync_data().expect("sync");
            synced.clone_from(&model);
            let mut history = vec![synced.clone()];
            for _ in 0..20 + rng.below(300) {
                let before = synced.len();
                let was = synced.clone();
                step(&mut rng, &b, &mut model, &mut synced).expect("step");
                if synced != was || synced.len() != before || SYNCED.get() {
                    history = vec![synced.clone()];
                    SYNCED.set(false);
                } else {
                    history.push(model.clone());
                }
            }
            let (file, log) = crash(&file, &log, seed);
            let (again, _, _) = open_with(&file, &log, SPILLING);
            let got = content(&again);
            for (p, chunk) in got.chunks(PAGE_SIZE).enumerate() {
                assert!(some_moment(chunk, p, &history), "seed {seed}: page {p}");
            }
            let shortest = history.iter().map(Vec::len).min().unwrap_or(0);
            assert!(got.len() >= shortest, "seed {seed}: length {} < {shortest}", got.len());
        }
    }
}
