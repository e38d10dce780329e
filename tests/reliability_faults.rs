//! Failure injection through [`soulmem::storage::faulty::FaultyBackend`]: a disk that
//! dies mid-write, a full disk, a read-only medium, flipped bits, and power loss.
//!
//! Every operation must return an error, never panic; reopening the same bytes
//! with a healthy backend must give a consistent store that holds every commit
//! acknowledged before the failure (or, for bytes damaged outside redb, an error).

mod reliability_common;

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};

use soulmem::storage::faulty::{FaultControl, Faults, FaultyBackend, Rng, SharedDisk};
use soulmem::write::observe::ObserveOptions;
use soulmem::{Error, Memory, MemoryEntry, MemoryType, Profile, RecallQuery, Visibility};

const K: u64 = 4;

fn open(disk: &SharedDisk, profile: Profile) -> soulmem::Result<(Memory, FaultControl)> {
    let (backend, ctl) = FaultyBackend::new(disk.clone());
    let mem = Memory::builder().profile(profile).open_with_backend(backend)?;
    Ok((mem, ctl))
}

fn batch(b: u64, pad: usize) -> Vec<MemoryEntry> {
    (0..K)
        .map(|i| {
            let mut e = MemoryEntry::new(
                MemoryType::Semantic,
                format!("faultbatch {b} item {i} user likes topic{} {}", b % 5, "x".repeat(pad)),
            );
            e.domain = "faults".into();
            e.entities = vec![format!("topic{}", b % 5)];
            e.visibility = Visibility::Public;
            e
        })
        .collect()
}

fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| panic!("{what} panicked"))
}

/// Reopens `bytes` on a healthy backend and checks: opens, indexes consistent,
/// every acknowledged batch whole, no partial batch.
fn verify(bytes: Vec<u8>, profile: Profile, acked: &BTreeSet<u64>, label: &str) {
    let disk = SharedDisk::from_bytes(bytes);
    let (mem, _) = no_panic("reopen", || open(&disk, profile))
        .unwrap_or_else(|e| panic!("{label}: reopen: {e}"));
    reliability_common::assert_batches(&mem, "faults", "faultbatch ", K, acked, label);
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{label}: {:?}", report.problems);
    // Still writable.
    mem.add_batch(batch(1_000_000, 0))
        .unwrap_or_else(|e| panic!("{label}: write after reopen: {e}"));
}

fn assert_storage_error(e: &Error, label: &str) {
    assert!(
        matches!(e, Error::Storage(m) if !m.is_empty()),
        "{label}: expected Error::Storage, got {e:?}"
    );
}

/// Writes until the armed fault fires; returns the acknowledged batches and the error.
fn write_until_failure(
    mem: &Memory,
    first: u64,
    pad: usize,
    label: &str,
) -> (BTreeSet<u64>, Error) {
    let mut acked = BTreeSet::new();
    let opts = ObserveOptions { user_id: Some("u1".into()), domain: "default".into() };
    for b in first..first + 400 {
        let r = no_panic("add_batch", || mem.add_batch(batch(b, pad)));
        match r {
            Ok(_) => {
                acked.insert(b);
            }
            Err(e) => return (acked, e),
        }
        let r = no_panic("observe", || {
            mem.observe_pair(&format!("I moved to City{b} and I love Go"), "Cool", &opts)
        });
        if let Err(e) = r {
            return (acked, e);
        }
    }
    panic!("{label}: the fault never fired");
}

/// After a failure the handle must keep answering with errors or results, not panics.
fn poke(mem: &Memory) {
    let _ = no_panic("add after failure", || mem.add_batch(batch(999_999, 0)));
    let _ = no_panic("recall after failure", || mem.recall(&RecallQuery::new("topic1 likes")));
    let _ = no_panic("count after failure", || mem.count());
    let _ = no_panic("snapshot after failure", || mem.snapshot().map(|s| s.count()));
}

#[test]
fn dying_disk_gives_errors_and_reopens_consistent() {
    let kinds =
        [ErrorKind::Other, ErrorKind::StorageFull, ErrorKind::BrokenPipe, ErrorKind::TimedOut];
    for trial in 0..16u64 {
        let profile = if trial % 4 == 3 { Profile::Reference } else { Profile::Default };
        let mut rng = Rng::new(trial + 11);
        let disk = SharedDisk::new();
        let (mem, ctl) = open(&disk, profile).expect("open");
        let mut acked = BTreeSet::new();
        for b in 0..3 {
            mem.add_batch(batch(b, 0)).expect("healthy write");
            acked.insert(b);
        }
        let kind = kinds[(trial % 4) as usize];
        ctl.arm(Faults {
            fail_after_writes: Some(rng.below(120)),
            error_kind: Some(kind),
            ..Faults::default()
        });
        let label = format!("trial {trial} ({kind:?})");
        let (more, err) = write_until_failure(&mem, 3, 0, &label);
        acked.extend(more);
        assert_storage_error(&err, &label);
        poke(&mem);
        // A healed disk under the same handle: errors or results, no panics.
        ctl.disarm();
        poke(&mem);
        drop(mem);
        // What a process crash leaves, what a power loss leaves, and a power loss
        // with some unsynced writes flushed.
        verify(disk.bytes(), profile, &acked, &format!("{label} process image"));
        verify(disk.durable_bytes(), profile, &acked, &format!("{label} durable image"));
        verify(disk.crash_image(trial), profile, &acked, &format!("{label} crash image"));
    }
}

#[test]
fn power_loss_at_any_write_keeps_acknowledged_commits() {
    // Cut the power after every n-th backend write of a run and check the image.
    let disk = SharedDisk::new();
    let (mem, ctl) = open(&disk, Profile::Default).expect("open");
    let mut acked = BTreeSet::new();
    let mut rng = Rng::new(7);
    for b in 0..40u64 {
        let before = ctl.mutations();
        mem.add_batch(batch(b, usize::try_from(rng.below(300)).unwrap_or(0))).expect("write");
        // Images taken between commits.
        if b % 4 == 0 {
            verify(disk.crash_image(b), Profile::Default, &acked, &format!("between commits {b}"));
        }
        acked.insert(b);
        assert!(ctl.mutations() > before);
    }
    drop(mem);
    verify(disk.durable_bytes(), Profile::Default, &acked, "after close");
}

#[test]
fn disk_full_is_a_clear_error_and_loses_nothing_committed() {
    for trial in 0..6u64 {
        let mut rng = Rng::new(trial + 100);
        let disk = SharedDisk::new();
        let (mem, ctl) = open(&disk, Profile::Default).expect("open");
        let mut acked = BTreeSet::new();
        for b in 0..3 {
            mem.add_batch(batch(b, 100)).expect("healthy write");
            acked.insert(b);
        }
        let room = rng.below(256 * 1024);
        ctl.arm(Faults { max_len: Some(disk.len() as u64 + room), ..Faults::default() });
        let label = format!("disk full trial {trial}");
        let (more, err) = write_until_failure(&mem, 3, 2_000, &label);
        acked.extend(more);
        assert_storage_error(&err, &label);
        assert!(err.to_string().contains("no space left"), "{label}: {err}");
        poke(&mem);
        drop(mem);
        verify(disk.bytes(), Profile::Default, &acked, &label);
    }
}

#[test]
fn read_only_medium_is_a_clear_error() {
    let disk = SharedDisk::new();
    {
        let (mem, _) = open(&disk, Profile::Default).expect("open");
        mem.add_batch(batch(0, 0)).expect("write");
    }
    let (backend, ctl) = FaultyBackend::new(disk.clone());
    ctl.arm(Faults { read_only: true, ..Faults::default() });
    match no_panic("open read-only", || Memory::builder().open_with_backend(backend)) {
        Err(e) => {
            assert!(matches!(e, Error::Open { .. }), "{e:?}");
            assert!(e.to_string().contains("read-only"), "{e}");
        }
        Ok(mem) => {
            let e = mem.add_batch(batch(1, 0)).expect_err("write on a read-only medium");
            assert_storage_error(&e, "read-only write");
            assert!(e.to_string().contains("read-only"), "{e}");
        }
    }
    verify(disk.bytes(), Profile::Default, &BTreeSet::from([0]), "after read-only");
}

/// Builds a store, closes it cleanly, returns its bytes.
fn built_store(batches: u64) -> Vec<u8> {
    let disk = SharedDisk::new();
    let (mem, _) = open(&disk, Profile::Default).expect("open");
    for b in 0..batches {
        mem.add_batch(batch(b, 50)).expect("write");
    }
    drop(mem);
    disk.bytes()
}

/// Opens possibly damaged bytes and reads everything. Ok(true) = opened and
/// consistent, Ok(false) = an error was reported; a panic is caught and returned.
fn probe(bytes: Vec<u8>, check_integrity: bool) -> std::thread::Result<bool> {
    catch_unwind(AssertUnwindSafe(|| {
        let (backend, _) = FaultyBackend::new(SharedDisk::from_bytes(bytes));
        let Ok(mem) =
            Memory::builder().check_integrity_on_open(check_integrity).open_with_backend(backend)
        else {
            return false;
        };
        let Ok(report) = mem.check(|_| {}) else { return false };
        if mem.recall(&RecallQuery::new("topic3 likes")).is_err() {
            return false;
        }
        // An intact store must be fully consistent.
        assert!(report.is_ok(), "opened, yet inconsistent: {:?}", report.problems);
        true
    }))
}

#[test]
fn bytes_flipped_at_rest_are_reported_not_panicked_with_integrity_check() {
    let clean = built_store(30);
    assert_eq!(probe(clean.clone(), true).ok(), Some(true));
    let mut rng = Rng::new(42);
    let (mut ok, mut err) = (0, 0);
    let used = clean.len() as u64;
    for _ in 0..40 {
        let mut bytes = clean.clone();
        for _ in 0..1 + rng.below(3) {
            let at = usize::try_from(rng.below(used)).unwrap_or(0);
            bytes[at] ^= 1 << rng.below(8);
        }
        match probe(bytes, true) {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(_) => panic!("a flipped byte made soulmem/redb panic despite the integrity check"),
        }
    }
    eprintln!(
        "flipped at rest: {ok} opened consistent (bit in free space or repaired), {err} reported"
    );
}

#[test]
fn bytes_flipped_on_write_are_reported_not_panicked_with_integrity_check() {
    let mut outcomes = (0, 0);
    for seed in 0..8u64 {
        let disk = SharedDisk::new();
        let (mem, ctl) = open(&disk, Profile::Default).expect("open");
        ctl.arm(Faults { flip_write_one_in: Some(40), seed, ..Faults::default() });
        for b in 0..20 {
            // The medium lies: commits succeed.
            if no_panic("write on a lying disk", || mem.add_batch(batch(b, 30))).is_err() {
                break;
            }
        }
        poke(&mem);
        drop(mem);
        match probe(disk.bytes(), true) {
            Ok(true) => outcomes.0 += 1,
            Ok(false) => outcomes.1 += 1,
            Err(_) => panic!(
                "seed {seed}: corrupted writes made reopen panic despite the integrity check"
            ),
        }
    }
    eprintln!("flipped on write: {} opened consistent, {} reported", outcomes.0, outcomes.1);
}
