//! A failure-injecting redb storage backend: a testing aid.
//!
//! [`FaultyBackend`] keeps the database in a [`SharedDisk`], bytes in memory that
//! outlive the [`crate::Memory`] using them, so a test can reopen the same bytes
//! with a healthy backend. Through a [`FaultControl`] a test arms faults while the
//! store is in use:
//!
//! - fail every I/O after a number of successful writes (a dying disk; any
//!   [`std::io::ErrorKind`], e.g. `StorageFull`);
//! - refuse to grow the file past a size (a full disk: `StorageFull`);
//! - refuse every write (a read-only medium: `PermissionDenied`);
//! - flip a bit in some reads or writes (bad sectors, bit rot).
//!
//! The disk also tracks what was synced: [`SharedDisk::durable_bytes`] is what a
//! power loss leaves (nothing written after the last `fsync`), and
//! [`SharedDisk::crash_image`] keeps a random subset of the unsynced writes (a power
//! loss with a write-back cache that flushed some of them, in any order).
//!
//! Used with [`crate::MemoryBuilder::open_with_backend`].

use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

/// A write or resize not yet made durable by a sync.
#[derive(Debug, Clone)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct DiskState {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

/// The bytes of a simulated disk, shared between backends (clone it to keep a
/// handle).
#[derive(Debug, Clone, Default)]
pub struct SharedDisk {
    state: Arc<Mutex<DiskState>>,
}

impl DiskState {
    fn crash_image(&self, seed: u64) -> Vec<u8> {
        let mut rng = Rng::new(seed);
        let mut out = self.durable.clone();
        for op in &self.pending {
            if matches!(op, Pending::SetLen(_)) || rng.below(2) == 0 {
                apply(&mut out, op);
            }
        }
        out
    }
}

fn apply(buf: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::SetLen(len) => buf.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        Pending::Write(offset, data) => {
            let Ok(start) = usize::try_from(*offset) else { return };
            let end = start.saturating_add(data.len());
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[start..end].copy_from_slice(data);
        }
    }
}

/// A small deterministic generator (xorshift64*), so faults replay from a seed.
#[derive(Debug, Clone, Copy)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value).
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

impl SharedDisk {
    /// An empty disk.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A disk holding `bytes`, all of them durable.
    #[must_use]
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        let state = DiskState { current: bytes.clone(), durable: bytes, pending: Vec::new() };
        Self { state: Arc::new(Mutex::new(state)) }
    }

    /// Everything written so far, synced or not: what a process crash leaves (the
    /// operating system still has the unsynced writes).
    #[must_use]
    pub fn bytes(&self) -> Vec<u8> {
        self.state.lock().current.clone()
    }

    /// Only what was synced: what a power loss leaves when no unsynced write reached
    /// the medium.
    #[must_use]
    pub fn durable_bytes(&self) -> Vec<u8> {
        self.state.lock().durable.clone()
    }

    /// The synced bytes plus a random subset (chosen by `seed`) of the writes made
    /// since the last sync: a power loss after the drive flushed some of them.
    #[must_use]
    pub fn crash_image(&self, seed: u64) -> Vec<u8> {
        self.state.lock().crash_image(seed)
    }

    /// [`SharedDisk::crash_image`] of each of `disks`, all of one instant (seeds
    /// `seed`, `seed + 1`, ...): a power loss that hits them together, even while
    /// other threads (a background checkpoint) are writing to them.
    #[must_use]
    pub fn crash_images(disks: &[&SharedDisk], seed: u64) -> Vec<Vec<u8>> {
        let held: Vec<_> = disks.iter().map(|d| d.state.lock()).collect();
        held.iter().zip(seed..).map(|(st, seed)| st.crash_image(seed)).collect()
    }

    /// Number of writes not yet synced.
    #[must_use]
    pub fn pending_writes(&self) -> usize {
        self.state.lock().pending.len()
    }

    /// XORs `mask` into the byte at `offset` (synced and unsynced views alike); out
    /// of range is ignored.
    pub fn corrupt(&self, offset: usize, mask: u8) {
        let mut st = self.state.lock();
        if let Some(b) = st.current.get_mut(offset) {
            *b ^= mask;
        }
        if let Some(b) = st.durable.get_mut(offset) {
            *b ^= mask;
        }
    }

    /// Current length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.state.lock().current.len()
    }

    /// True when nothing was ever written.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which faults are armed. All off by default.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// After this many more successful mutating calls (`write`, `set_len`,
    /// `sync_data`), every I/O call fails with `error_kind`.
    pub fail_after_writes: Option<u64>,
    /// The error kind of `fail_after_writes` (default `Other`).
    pub error_kind: Option<io::ErrorKind>,
    /// Growing the file past this many bytes fails with `StorageFull` (disk full).
    pub max_len: Option<u64>,
    /// Every mutating call fails with `PermissionDenied` (a read-only medium).
    pub read_only: bool,
    /// Flip one bit in about one read in this many (a bad sector on read).
    pub flip_read_one_in: Option<u64>,
    /// Flip one bit in about one write in this many (corruption on the way down).
    pub flip_write_one_in: Option<u64>,
    /// Seed of the flips.
    pub seed: u64,
}

#[derive(Debug, Default)]
struct ControlState {
    faults: Faults,
    rng: Option<Rng>,
    failing: bool,
    injected: u64,
    mutations: u64,
}

/// Arms and disarms the faults of a [`FaultyBackend`] while it is in use.
#[derive(Debug, Clone, Default)]
pub struct FaultControl {
    state: Arc<Mutex<ControlState>>,
}

impl FaultControl {
    /// Replaces the armed faults (counters restart).
    pub fn arm(&self, faults: Faults) {
        let mut st = self.state.lock();
        st.rng = Some(Rng::new(faults.seed));
        st.faults = faults;
        st.failing = false;
    }

    /// Turns every fault off.
    pub fn disarm(&self) {
        self.arm(Faults::default());
    }

    /// Faults injected so far (failed calls and flipped bits).
    #[must_use]
    pub fn injected(&self) -> u64 {
        self.state.lock().injected
    }

    /// Successful mutating calls so far.
    #[must_use]
    pub fn mutations(&self) -> u64 {
        self.state.lock().mutations
    }
}

/// A redb [`redb::StorageBackend`] over a [`SharedDisk`] that injects the faults its
/// [`FaultControl`] arms.
#[derive(Debug)]
pub struct FaultyBackend {
    disk: SharedDisk,
    control: FaultControl,
}

impl FaultyBackend {
    /// A backend on `disk` with no faults armed; returns the control too.
    #[must_use]
    pub fn new(disk: SharedDisk) -> (Self, FaultControl) {
        let control = FaultControl::default();
        (Self { disk, control: control.clone() }, control)
    }

    /// A backend on `disk` whose faults `control` arms (shared with another
    /// backend: two files on one failing disk).
    #[must_use]
    pub fn with_control(disk: SharedDisk, control: FaultControl) -> Self {
        Self { disk, control }
    }

    fn error(kind: io::ErrorKind, what: &str) -> io::Error {
        io::Error::new(kind, format!("injected fault: {what}"))
    }

    /// Checks the armed faults before a mutating call.
    fn before_mutation(&self, new_len: Option<u64>) -> io::Result<()> {
        let mut st = self.control.state.lock();
        if st.failing {
            st.injected += 1;
            return Err(Self::error(
                st.faults.error_kind.unwrap_or(io::ErrorKind::Other),
                "dead disk",
            ));
        }
        if st.faults.read_only {
            st.injected += 1;
            return Err(Self::error(io::ErrorKind::PermissionDenied, "read-only medium"));
        }
        if let (Some(max), Some(len)) = (st.faults.max_len, new_len)
            && len > max
        {
            st.injected += 1;
            return Err(Self::error(io::ErrorKind::StorageFull, "no space left on device"));
        }
        if let Some(left) = st.faults.fail_after_writes {
            if left == 0 {
                st.failing = true;
                st.injected += 1;
                return Err(Self::error(
                    st.faults.error_kind.unwrap_or(io::ErrorKind::Other),
                    "write failed",
                ));
            }
            st.faults.fail_after_writes = Some(left - 1);
        }
        st.mutations += 1;
        Ok(())
    }

    /// Where to flip a bit in a buffer of `len` bytes, if a flip is due.
    fn flip_due(&self, one_in: impl Fn(&Faults) -> Option<u64>, len: usize) -> Option<(usize, u8)> {
        let mut st = self.control.state.lock();
        let n = one_in(&st.faults)?;
        if len == 0 {
            return None;
        }
        let rng = st.rng.get_or_insert_with(|| Rng::new(0));
        if rng.below(n) != 0 {
            return None;
        }
        let at = usize::try_from(rng.below(len as u64)).unwrap_or(0);
        let bit = 1u8 << rng.below(8);
        st.injected += 1;
        Some((at, bit))
    }
}

impl redb::StorageBackend for FaultyBackend {
    fn len(&self) -> io::Result<u64> {
        if self.control.state.lock().failing {
            return Err(Self::error(io::ErrorKind::Other, "dead disk"));
        }
        Ok(self.disk.state.lock().current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        if self.control.state.lock().failing {
            return Err(Self::error(io::ErrorKind::Other, "dead disk"));
        }
        {
            let st = self.disk.state.lock();
            let start = usize::try_from(offset)
                .map_err(|_| Self::error(io::ErrorKind::InvalidInput, "offset"))?;
            let src = start
                .checked_add(out.len())
                .and_then(|end| st.current.get(start..end))
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read out of range"))?;
            out.copy_from_slice(src);
        }
        if let Some((at, bit)) = self.flip_due(|f| f.flip_read_one_in, out.len()) {
            out[at] ^= bit;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.before_mutation(Some(len))?;
        let mut st = self.disk.state.lock();
        let op = Pending::SetLen(len);
        apply(&mut st.current, &op);
        st.pending.push(op);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.before_mutation(None)?;
        let mut st = self.disk.state.lock();
        st.durable = st.current.clone();
        st.pending.clear();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset.saturating_add(data.len() as u64);
        self.before_mutation(Some(end))?;
        let mut data = data.to_vec();
        if let Some((at, bit)) = self.flip_due(|f| f.flip_write_one_in, data.len()) {
            data[at] ^= bit;
        }
        let mut st = self.disk.state.lock();
        let op = Pending::Write(offset, data);
        apply(&mut st.current, &op);
        st.pending.push(op);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_image_keeps_synced_bytes() {
        let disk = SharedDisk::new();
        let (b, _ctl) = FaultyBackend::new(disk.clone());
        redb::StorageBackend::set_len(&b, 8).expect("len");
        redb::StorageBackend::write(&b, 0, &[1, 2, 3]).expect("write");
        redb::StorageBackend::sync_data(&b).expect("sync");
        redb::StorageBackend::write(&b, 4, &[9]).expect("write");
        assert_eq!(disk.durable_bytes(), vec![1, 2, 3, 0, 0, 0, 0, 0]);
        assert_eq!(disk.bytes(), vec![1, 2, 3, 0, 9, 0, 0, 0]);
        assert_eq!(disk.pending_writes(), 1);
    }

    #[test]
    fn faults_fire_as_armed() {
        let (b, ctl) = FaultyBackend::new(SharedDisk::new());
        ctl.arm(Faults { max_len: Some(4), ..Faults::default() });
        let e = redb::StorageBackend::set_len(&b, 8).expect_err("full");
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        ctl.arm(Faults { fail_after_writes: Some(1), ..Faults::default() });
        redb::StorageBackend::set_len(&b, 2).expect("first write passes");
        assert!(redb::StorageBackend::set_len(&b, 3).is_err());
        assert!(redb::StorageBackend::len(&b).is_err(), "a dead disk fails reads too");
        ctl.disarm();
        assert_eq!(redb::StorageBackend::len(&b).expect("healthy"), 2);
    }
}
