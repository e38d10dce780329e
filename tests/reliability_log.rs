//! The write-ahead log under redb (`storage::logged`) with a failing disk under
//! it: a disk that dies mid-commit and power lost between commits. As without the
//! log, reopening the bytes left must give a consistent store holding every commit
//! acknowledged before the failure.

mod reliability_common;

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use soulmem::storage::faulty::{FaultControl, Faults, FaultyBackend, Rng, SharedDisk};
use soulmem::storage::logged::{LoggedFile, Sizes};
use soulmem::write::observe::ObserveOptions;
use soulmem::{Memory, MemoryEntry, MemoryType, Visibility};

const K: u64 = 4;
/// Small thresholds: checkpoints, in-place commits and spills all happen.
const SIZES: Sizes =
    Sizes { checkpoint: 256 << 10, limit: 512 << 10, grow: 64 << 10, direct: 64, spill: 48 };

/// The two logs' disks.
type Logs = [SharedDisk; 2];

fn disks() -> (SharedDisk, Logs) {
    (SharedDisk::new(), [SharedDisk::new(), SharedDisk::new()])
}

fn open(file: &SharedDisk, logs: &Logs) -> soulmem::Result<(Memory, FaultControl, FaultControl)> {
    let (f, fc) = FaultyBackend::new(file.clone());
    let (a, lc) = FaultyBackend::new(logs[0].clone());
    // One control for both logs: they are files on one disk.
    let b = FaultyBackend::with_control(logs[1].clone(), lc.clone());
    let backend =
        LoggedFile::new(f, [a, b], SIZES).map_err(|e| soulmem::Error::Storage(e.to_string()))?;
    Ok((Memory::builder().open_with_backend(backend)?, fc, lc))
}

fn batch(b: u64) -> Vec<MemoryEntry> {
    (0..K)
        .map(|i| {
            let mut e = MemoryEntry::new(
                MemoryType::Semantic,
                format!(
                    "logbatch {b} item {i} user likes topic{} {}",
                    b % 5,
                    "y".repeat((b % 7 * 300) as usize)
                ),
            );
            e.domain = "logged".into();
            e.visibility = Visibility::Public;
            e
        })
        .collect()
}

/// Reopens the images (the file, then the logs) and checks: opens, indexes
/// consistent, every acknowledged batch whole, no partial batch, still writable.
fn verify(images: Vec<Vec<u8>>, acked: &BTreeSet<u64>, label: &str) {
    let mut disks = images.into_iter().map(SharedDisk::from_bytes);
    let mut next = || disks.next().unwrap_or_default();
    let (file, log) = (next(), [next(), next()]);
    let (mem, _, _) = catch_unwind(AssertUnwindSafe(|| open(&file, &log)))
        .unwrap_or_else(|_| panic!("{label}: reopen panicked"))
        .unwrap_or_else(|e| panic!("{label}: reopen: {e}"));
    reliability_common::assert_batches(&mem, "logged", "logbatch ", K, acked, label);
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{label}: {:?}", report.problems);
    mem.add_batch(batch(1_000_000)).unwrap_or_else(|e| panic!("{label}: write after reopen: {e}"));
}

/// Batches and observes until a write fails; the acknowledged batches.
fn write_until_failure(mem: &Memory, first: u64) -> BTreeSet<u64> {
    let opts = ObserveOptions { user_id: Some("u1".into()), domain: "default".into() };
    let mut acked = BTreeSet::new();
    for b in first..first + 400 {
        match catch_unwind(AssertUnwindSafe(|| mem.add_batch(batch(b)))) {
            Ok(Ok(_)) => {
                acked.insert(b);
            }
            Ok(Err(_)) => return acked,
            Err(_) => panic!("add_batch panicked"),
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            mem.observe_pair(&format!("I moved to City{b} and I love Go"), "Cool", &opts)
        }))
        .unwrap_or_else(|_| panic!("observe panicked"));
        if r.is_err() {
            return acked;
        }
    }
    panic!("the fault never fired");
}

#[test]
fn a_disk_dying_under_the_log_loses_no_acknowledged_commit() {
    for trial in 0..24u64 {
        let mut rng = Rng::new(trial + 40);
        let (file, log) = disks();
        let (mem, fc, lc) = open(&file, &log).expect("open");
        let mut acked = BTreeSet::new();
        for b in 0..3 {
            mem.add_batch(batch(b)).expect("healthy write");
            acked.insert(b);
        }
        // The two files die at different moments (one disk or two).
        let k = rng.below(400);
        fc.arm(Faults { fail_after_writes: Some(k), ..Faults::default() });
        lc.arm(Faults { fail_after_writes: Some(k + rng.below(20)), ..Faults::default() });
        acked.extend(write_until_failure(&mem, 3));
        drop(mem);
        let all = [&file, &log[0], &log[1]];
        let label = format!("trial {trial}");
        verify(all.map(SharedDisk::bytes).to_vec(), &acked, &format!("{label} process image"));
        verify(
            all.map(SharedDisk::durable_bytes).to_vec(),
            &acked,
            &format!("{label} durable image"),
        );
        verify(SharedDisk::crash_images(&all, trial), &acked, &format!("{label} crash image"));
    }
}

#[test]
fn power_lost_between_commits_keeps_every_acknowledged_one() {
    let (file, log) = disks();
    let (mem, _, _) = open(&file, &log).expect("open");
    let opts = ObserveOptions { user_id: Some("u2".into()), domain: "default".into() };
    let mut acked = BTreeSet::new();
    for b in 0..60u64 {
        mem.add_batch(batch(b)).expect("write");
        acked.insert(b);
        mem.observe_pair(&format!("My favorite city is Town{b}"), "Nice", &opts).expect("observe");
        if b % 6 == 0 {
            let images = SharedDisk::crash_images(&[&file, &log[0], &log[1]], b);
            verify(images, &acked, &format!("between commits {b}"));
        }
    }
    drop(mem);
    // A clean close leaves everything in the file: the log may go.
    verify(vec![file.durable_bytes()], &acked, "after close, file alone");
}
