//! A write-ahead log under redb: commits that sync a few scattered pages sync one
//! sequential extent instead.
//!
//! redb copies every page a commit changes to a free page wherever one is, and
//! syncs them all: a single observe at 1M memories syncs 35–40 pages scattered
//! over the file. Some disks (this project's benchmark VM among them) charge a sync
//! by the number of scattered extents: 38 scattered 4 KiB pages cost 1.28 ms, 38
//! contiguous ones 0.21 ms (`docs/PERFORMANCE.md`).
//!
//! [`LoggedFile`] is a [`redb::StorageBackend`] over two others: the database file
//! and its log (`<file>-log`), which every store file opens with.
//! - **Small commits go to the log.** Writes are kept per 4 KiB page in memory. A
//!   sync appends the pages written since the last one to the log as one write,
//!   then a commit record (the logical length, the page count and a CRC-32 chained
//!   over the group from the log's epoch), and syncs the log. Reads see the newest
//!   image of each page: pending, then logged, then the file.
//! - **Checkpoints.** Once the log holds [`Sizes::checkpoint`] bytes, the newest
//!   image of every logged page is copied into the file, the file synced, and the
//!   log started over under a new epoch. Its bytes are written once as zeros and
//!   then overwritten, so an append changes no file-system metadata; records of
//!   earlier epochs never validate.
//! - **Large commits go to the file in place**, as redb writes without a log: a
//!   commit whose pages outgrow [`Sizes::spill`] (or [`Sizes::direct`] at its sync)
//!   first has the log copied into the file, then writes through. A batch would
//!   gain nothing from the log and be written twice.
//! - **Shrinking** is applied to the file at the next commit, which goes in place;
//!   until then the bytes past the new end read as zeros.
//! - **Recovery** ([`LoggedFile::new`]) copies every complete commit group of the
//!   current epoch into the file; a torn group is dropped. The log is locked for as
//!   long as the store is open, so a second opener never replays it under the first.
//! - **Close** commits what is left and checkpoints, so a closed store's file holds
//!   everything by itself.
//!
//! Crash safety rests on one property, checked by the power-loss tests here and in
//! `tests/reliability_log.rs`: after a crash and recovery, the content is that of
//! the last completed sync, plus, for a commit in place, possibly some of the
//! writes made after it. That is what a plain file guarantees, and what redb's
//! commit protocol is built for.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::ops::Bound;

use parking_lot::RwLock;
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
/// The log's first page holds its epoch.
const HEADER: u64 = PAGE;

/// The log's thresholds.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Log bytes after which a commit copies the log into the file.
    pub checkpoint: u64,
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
    /// Thresholds for a store file of `len` bytes: the log stays under a quarter
    /// of the store (between 4 and 64 MiB).
    #[must_use]
    pub fn for_store(len: u64) -> Self {
        Self {
            checkpoint: (len / 4).clamp(4 << 20, 64 << 20),
            grow: 4 << 20,
            direct: 512,
            spill: 512,
        }
    }
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
    pending: BTreeMap<u64, Box<[u8]>>,
    /// Pages in the log of this epoch: page → offset of its newest image.
    logged: HashMap<u64, u64>,
    /// End of the log's records.
    end: u64,
    /// Bytes of the log allocated (written once).
    allocated: u64,
    /// The log's epoch.
    epoch: u64,
    /// The commit under way outgrew [`Sizes::spill`]: it goes to the file in
    /// place, as redb writes without a log (the log was copied into the file
    /// first).
    in_place: bool,
}

/// A database file with a write-ahead log (see the module docs).
#[derive(Debug)]
pub struct LoggedFile<D: StorageBackend> {
    file: D,
    log: D,
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

impl<D: StorageBackend> LoggedFile<D> {
    /// The database `file` with its `log`, recovering what a crash left in the log
    /// (every complete commit group is copied into the file).
    ///
    /// # Errors
    /// I/O errors of either.
    pub fn new(file: D, log: D, sizes: Sizes) -> io::Result<Self> {
        // The log is held for as long as the store is open: a second opener must
        // not replay or checkpoint it under the first (backends without locks,
        // such as the test disks, go without).
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
        let len = file.len()?;
        let st = State {
            len,
            committed_len: len,
            file_len: len,
            shrunk_to: None,
            pending: BTreeMap::new(),
            logged: HashMap::new(),
            end: HEADER,
            allocated: 0,
            epoch: 0,
            in_place: false,
        };
        let me = Self { file, log, sizes, st: RwLock::new(st) };
        {
            let mut st = me.st.write();
            me.replay(&mut st)?;
            me.checkpoint(&mut st, false)?;
        }
        Ok(me)
    }

    /// Rebuilds `logged` and the logical length from the log's complete groups of
    /// its current epoch (on top of the file as it is).
    fn replay(&self, st: &mut State) -> io::Result<()> {
        st.in_place = false;
        st.pending.clear();
        st.logged.clear();
        st.file_len = self.file.len()?;
        st.len = st.file_len;
        st.shrunk_to = None;
        let size = self.log.len()?;
        st.allocated = size;
        let mut head = [0u8; 8];
        if size >= 8 {
            self.log.read(0, &mut head)?;
        }
        st.epoch = u64::from_le_bytes(head);
        st.end = HEADER;
        let mut pos = HEADER;
        let mut group: Vec<(u64, u64)> = Vec::new();
        let mut sum = epoch_seed(st.epoch);
        let mut rec = vec![0u8; PAGE_REC as usize];
        while pos + COMMIT_REC <= size {
            let mut tag = [0u8; 1];
            self.log.read(pos, &mut tag)?;
            if tag[0] == TAG_PAGE && pos + PAGE_REC <= size {
                self.log.read(pos, &mut rec)?;
                sum = chain(sum, &rec);
                group.push((u64_at(&rec, 1), pos + 9));
                pos += PAGE_REC;
            } else if tag[0] == TAG_COMMIT {
                let mut c = [0u8; COMMIT_REC as usize];
                self.log.read(pos, &mut c)?;
                if u64_at(&c, 9) != group.len() as u64 || u64_at(&c, 17) != u64::from(sum) {
                    break;
                }
                for (page, at) in group.drain(..) {
                    st.logged.insert(page, at);
                }
                st.len = u64_at(&c, 1);
                sum = epoch_seed(st.epoch);
                pos += COMMIT_REC;
                st.end = pos;
            } else {
                break;
            }
        }
        st.committed_len = st.len;
        Ok(())
    }

    /// Copies into the file the newest image of every logged page (and, with
    /// `direct`, every pending one), syncs it, and starts the log over under a new
    /// epoch.
    fn checkpoint(&self, st: &mut State, direct: bool) -> io::Result<()> {
        let work = st.end > HEADER || !st.logged.is_empty() || (direct && !st.pending.is_empty());
        if let Some(low) = st.shrunk_to.take()
            && low < st.file_len
        {
            self.file.set_len(low)?;
            st.file_len = low;
        }
        if st.file_len != st.len {
            self.file.set_len(st.len)?;
            st.file_len = st.len;
        }
        if !work {
            if st.committed_len != st.len {
                self.file.sync_data()?;
                st.committed_len = st.len;
            }
            return Ok(());
        }
        let mut pages: Vec<(u64, u64)> = st
            .logged
            .iter()
            .filter(|(p, _)| !(direct && st.pending.contains_key(*p)))
            .map(|(&p, &at)| (p, at))
            .collect();
        pages.sort_unstable();
        let mut buf = vec![0u8; PAGE_SIZE];
        for (page, at) in pages {
            let Some(n) = st.len.checked_sub(page * PAGE).filter(|&n| n > 0) else { continue };
            self.log.read(at, &mut buf)?;
            let n = usize::try_from(n.min(PAGE)).unwrap_or(PAGE_SIZE);
            self.file.write(page * PAGE, &buf[..n])?;
        }
        if direct {
            for (&page, img) in &st.pending {
                let Some(n) = st.len.checked_sub(page * PAGE).filter(|&n| n > 0) else { continue };
                let n = usize::try_from(n.min(PAGE)).unwrap_or(PAGE_SIZE);
                self.file.write(page * PAGE, &img[..n])?;
            }
            st.pending.clear();
        }
        self.file.sync_data()?;
        st.committed_len = st.len;
        st.logged.clear();
        st.epoch += 1;
        self.allocate(st, HEADER)?;
        self.log.write(0, &st.epoch.to_le_bytes())?;
        self.log.sync_data()?;
        st.end = HEADER;
        Ok(())
    }

    /// The file's bytes at `offset` as the logical content has them: zeros past
    /// its physical end or a shrink since the last checkpoint.
    fn read_file(&self, st: &State, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let valid = st.shrunk_to.map_or(st.file_len, |s| s.min(st.file_len));
        let have = usize::try_from(valid.saturating_sub(offset).min(out.len() as u64)).unwrap_or(0);
        if have > 0 {
            self.file.read(offset, &mut out[..have])?;
        }
        out[have..].fill(0);
        Ok(())
    }

    /// The current image of `page`.
    fn image(&self, st: &State, page: u64, out: &mut [u8]) -> io::Result<()> {
        if let Some(img) = st.pending.get(&page) {
            out.copy_from_slice(img);
        } else if let Some(&at) = st.logged.get(&page) {
            self.log.read(at, out)?;
        } else {
            self.read_file(st, page * PAGE, out)?;
        }
        Ok(())
    }

    /// Makes sure the log's bytes up to `upto` are allocated.
    fn allocate(&self, st: &mut State, upto: u64) -> io::Result<()> {
        if upto <= st.allocated {
            return Ok(());
        }
        let target = upto.div_ceil(self.sizes.grow).max(1) * self.sizes.grow;
        self.log.set_len(target)?;
        let zeros = vec![0u8; 1 << 20];
        let mut at = st.allocated;
        while at < target {
            let n = usize::try_from((target - at).min(1 << 20)).unwrap_or(0);
            self.log.write(at, &zeros[..n])?;
            at += n as u64;
        }
        st.allocated = target;
        Ok(())
    }

    /// Appends the pending pages and their commit record to the log as one write
    /// and syncs it.
    fn append_group(&self, st: &mut State) -> io::Result<()> {
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
        self.allocate(st, st.end + buf.len() as u64)?;
        self.log.write(st.end, &buf)?;
        self.log.sync_data()?;
        st.end += buf.len() as u64;
        for (page, offset) in at {
            st.logged.insert(page, offset);
        }
        st.pending.clear();
        Ok(())
    }

    /// Sends the commit under way to the file in place: the log's content (and
    /// this commit's pages so far) into the file first.
    fn go_in_place(&self, st: &mut State) -> io::Result<()> {
        if st.end > HEADER || !st.logged.is_empty() || st.shrunk_to.is_some() {
            self.checkpoint(st, true)?;
        } else {
            if st.file_len != st.len {
                self.file.set_len(st.len)?;
                st.file_len = st.len;
            }
            for (&page, img) in &st.pending {
                let Some(n) = st.len.checked_sub(page * PAGE).filter(|&n| n > 0) else { continue };
                let n = usize::try_from(n.min(PAGE)).unwrap_or(PAGE_SIZE);
                self.file.write(page * PAGE, &img[..n])?;
            }
            st.pending.clear();
        }
        st.in_place = true;
        Ok(())
    }

    /// Commits what was written since the last commit (see the module docs).
    fn commit(&self, st: &mut State) -> io::Result<()> {
        if st.in_place {
            self.file.sync_data()?;
            st.committed_len = st.len;
            st.in_place = false;
            return Ok(());
        }
        let pages = st.pending.len();
        if pages > self.sizes.direct || st.shrunk_to.is_some() {
            // In place, after the log, as redb alone would write it.
            return self.checkpoint(st, true);
        }
        if pages == 0 && st.len == st.committed_len {
            return Ok(());
        }
        self.append_group(st)?;
        st.committed_len = st.len;
        if st.end >= self.sizes.checkpoint {
            self.checkpoint(st, false)?;
        }
        Ok(())
    }
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
        if st.pending.is_empty() && st.logged.is_empty() {
            return self.read_file(&st, offset, out);
        }
        // Page by page: each piece from the newest image of its page, read in
        // place (no copy of whole pages).
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let page = at / PAGE;
            let within = usize::try_from(at % PAGE).unwrap_or(0);
            let n = (PAGE_SIZE - within).min(out.len() - done);
            let piece = &mut out[done..done + n];
            if let Some(img) = st.pending.get(&page) {
                piece.copy_from_slice(&img[within..within + n]);
            } else if let Some(&from) = st.logged.get(&page) {
                self.log.read(from + within as u64, piece)?;
            } else {
                // A run of pages the file holds as they are, read at once.
                let mut m = n;
                while done + m < out.len() {
                    let next = page + (m as u64 + within as u64) / PAGE;
                    if st.pending.contains_key(&next) || st.logged.contains_key(&next) {
                        break;
                    }
                    m = (m + PAGE_SIZE).min(out.len() - done);
                }
                self.read_file(&st, at, &mut out[done..done + m])?;
                done += m;
                continue;
            }
            done += n;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.st.write();
        if st.in_place {
            self.file.set_len(len)?;
            st.file_len = len;
            st.len = len;
            return Ok(());
        }
        if len < st.len {
            // Bytes past the new end read as zeros from now on (a later growth
            // must find zeros there): pending and logged images past it go, the
            // file's bytes count as stale until the next commit, which goes in
            // place and truncates the file first.
            let first_gone = len.div_ceil(PAGE);
            st.pending.retain(|&p, _| p < first_gone);
            st.logged.retain(|&p, _| p < first_gone);
            if len % PAGE != 0 {
                let page = len / PAGE;
                let mut buf = vec![0u8; PAGE_SIZE];
                self.image(&st, page, &mut buf)?;
                buf[usize::try_from(len % PAGE).unwrap_or(0)..].fill(0);
                st.pending.insert(page, buf.into_boxed_slice());
            }
            st.shrunk_to = Some(st.shrunk_to.map_or(len, |s| s.min(len)));
        } else if len > st.file_len && st.shrunk_to.is_none() {
            // Grown at once: zeros, whatever happens to the commit.
            self.file.set_len(len)?;
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
            return self.file.write(offset, data);
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let page = at / PAGE;
            let within = usize::try_from(at % PAGE).unwrap_or(0);
            let n = (PAGE_SIZE - within).min(data.len() - done);
            let mut img = vec![0u8; PAGE_SIZE];
            if n < PAGE_SIZE {
                self.image(&st, page, &mut img)?;
            }
            img[within..within + n].copy_from_slice(&data[done..done + n]);
            st.pending.insert(page, img.into_boxed_slice());
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
            self.commit(&mut st).and_then(|()| self.checkpoint(&mut st, false))
        };
        let file = self.file.close();
        let log = self.log.close();
        done.and(file).and(log)
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::faulty::{FaultControl, Faults, FaultyBackend, Rng, SharedDisk};

    /// Small thresholds, so that a few hundred operations go through log commits,
    /// checkpoints and in-place commits; writes stay out of the file until their
    /// commit (no spill), so a crash leaves exactly the last commit.
    const SMALL: Sizes =
        Sizes { checkpoint: 96 << 10, grow: 16 << 10, direct: 12, spill: usize::MAX };
    /// The same, with commits that outgrow 9 pages going to the file in place
    /// before their sync.
    const SPILLING: Sizes = Sizes { spill: 9, ..SMALL };

    type Log = LoggedFile<FaultyBackend>;

    /// Seeds per test (more with `SOULMEM_LOG_SEEDS`).
    static SEEDS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        std::env::var("SOULMEM_LOG_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
    });

    fn open(file: &SharedDisk, log: &SharedDisk) -> (Log, FaultControl, FaultControl) {
        open_with(file, log, SMALL)
    }

    fn open_with(
        file: &SharedDisk,
        log: &SharedDisk,
        sizes: Sizes,
    ) -> (Log, FaultControl, FaultControl) {
        let (f, fc) = FaultyBackend::new(file.clone());
        let (l, lc) = FaultyBackend::new(log.clone());
        (LoggedFile::new(f, l, sizes).expect("open the log"), fc, lc)
    }

    fn content(b: &Log) -> Vec<u8> {
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

    #[test]
    fn reads_every_write_back_like_a_file() {
        for seed in 0..*SEEDS * 2 {
            let (file, log) = (SharedDisk::new(), SharedDisk::new());
            let sizes = if seed % 2 == 0 { SMALL } else { SPILLING };
            let (b, _, _) = open_with(&file, &log, sizes);
            let mut rng = Rng::new(seed);
            let (mut model, mut synced) = (Vec::new(), Vec::new());
            b.set_len(3 * PAGE).expect("len");
            model.resize(3 * PAGE_SIZE, 0);
            for i in 0..400 {
                step(&mut rng, &b, &mut model, &mut synced).expect("step");
                assert_eq!(content(&b), model, "seed {seed} step {i}");
            }
            // A clean close leaves everything in the file alone.
            b.close().expect("close");
            assert_eq!(file.bytes(), model, "seed {seed}: after close");
        }
    }

    #[test]
    fn power_loss_between_calls_keeps_the_last_sync() {
        for seed in 0..*SEEDS * 2 {
            let (file, log) = (SharedDisk::new(), SharedDisk::new());
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
            let file = SharedDisk::from_bytes(file.crash_image(seed));
            let log = SharedDisk::from_bytes(log.crash_image(seed + 7));
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
            let (file, log) = (SharedDisk::new(), SharedDisk::new());
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
            lc.arm(Faults { fail_after_writes: Some(k + rng.below(3)), ..Faults::default() });
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
            let file = SharedDisk::from_bytes(file.crash_image(seed));
            let log = SharedDisk::from_bytes(log.crash_image(seed + 3));
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
            let (file, log) = (SharedDisk::new(), SharedDisk::new());
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
            let file = SharedDisk::from_bytes(file.crash_image(seed));
            let log = SharedDisk::from_bytes(log.crash_image(seed + 5));
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
