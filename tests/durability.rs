//! Deferred commits (`Durability::Deferred`) on a disk that loses power: a deferred
//! batch is visible at once, lost whole (never in part) by a power loss before
//! the next sync, and durable after `Memory::sync` or a clean close; what was
//! synced is never lost.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use soulmem::ingest::parse_op;
use soulmem::storage::faulty::{FaultyBackend, SharedDisk};
use soulmem::storage::logged::{LoggedFile, Sizes};
use soulmem::write::observe::ObserveOptions;
use soulmem::{Durability, Memory, MemoryEntry, MemoryType, RecallQuery, Visibility};

const K: u64 = 4;
const DOMAIN: &str = "bulk";
/// Small thresholds, so that a batch's commit goes to the file in place.
const SIZES: Sizes =
    Sizes { checkpoint: 256 << 10, limit: 512 << 10, grow: 64 << 10, direct: 64, spill: 48 };

/// The store's file and its two logs.
type Disks = [SharedDisk; 3];

fn open(disks: &Disks) -> Memory {
    let [f, a, b] = disks.clone().map(|d| FaultyBackend::new(d).0);
    let backend = LoggedFile::new(f, [a, b], SIZES).expect("log");
    Memory::builder().open_with_backend(backend).expect("open")
}

fn batch(b: u64) -> Vec<MemoryEntry> {
    (0..K)
        .map(|i| {
            let mut e = MemoryEntry::new(
                MemoryType::Semantic,
                format!("bulkbatch {b} item {i} {}", "z".repeat(400 + (b % 5 * 300) as usize)),
            );
            e.domain = DOMAIN.into();
            e.visibility = Visibility::Public;
            e
        })
        .collect()
}

/// Batch number → memories of it, in the `bulk` domain.
fn batches(mem: &Memory) -> BTreeMap<u64, u64> {
    let mut per = BTreeMap::new();
    for e in mem.layer("semantic").expect("layer").entries(Some(DOMAIN)).expect("entries") {
        let b: u64 = e
            .content
            .strip_prefix("bulkbatch ")
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("stray {:?}", e.content));
        *per.entry(b).or_default() += 1;
    }
    per
}

/// Whether a recall of `query` (user `u1`) finds a memory containing `needle`.
fn finds(mem: &Memory, query: &str, needle: &str) -> bool {
    let q = RecallQuery { user_id: Some("u1".into()), ..RecallQuery::new(query) };
    mem.recall(&q).expect("recall").memories.iter().any(|e| e.content.contains(needle))
}

/// Reopens `images` (the file, then the logs): consistent indexes, whole batches;
/// returns the store and its batch numbers.
fn reopen(images: Vec<Vec<u8>>, label: &str) -> (Memory, BTreeSet<u64>) {
    let mut it = images.into_iter().map(SharedDisk::from_bytes);
    let disks: Disks = std::array::from_fn(|_| it.next().unwrap_or_default());
    let mem = catch_unwind(AssertUnwindSafe(|| open(&disks)))
        .unwrap_or_else(|_| panic!("{label}: reopen failed"));
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{label}: {:?}", report.problems);
    let per = batches(&mem);
    for (b, n) in &per {
        assert_eq!(*n, K, "{label}: partial batch {b}");
    }
    let held = per.into_keys().collect();
    (mem, held)
}

fn durable(disks: &Disks) -> Vec<Vec<u8>> {
    disks.iter().map(SharedDisk::durable_bytes).collect()
}

#[test]
fn deferred_batches_are_visible_at_once_and_durable_from_the_next_sync() {
    let disks: Disks = Default::default();
    let mem = open(&disks);
    mem.add_batch(batch(0)).expect("synced batch");
    mem.add_batch_with(batch(1), Durability::Deferred).expect("deferred batch");
    let opts = ObserveOptions { user_id: Some("u1".into()), domain: "default".into() };
    let exchanges =
        vec![("I moved to Valparaiso last spring".to_owned(), "Nice!".to_owned(), opts)];
    mem.observe_batch_with(&exchanges, Durability::Deferred).expect("deferred observes");

    // Visible at once.
    assert_eq!(batches(&mem).into_keys().collect::<Vec<_>>(), [0, 1]);
    assert!(finds(&mem, "where did I move", "Valparaiso"));

    // A power loss now: the deferred commits made no sync, so they are lost, whole.
    let (lost, held) = reopen(durable(&disks), "before the sync");
    assert_eq!(held, BTreeSet::from([0]));
    assert!(!finds(&lost, "where did I move", "Valparaiso"));
    drop(lost);
    // With some of the writes since the last sync on the medium: never a part.
    for seed in 0..8 {
        let (_, held) = reopen(SharedDisk::crash_images(&disks.each_ref(), seed), "crash");
        assert!(held.contains(&0), "seed {seed}: the synced batch lost");
    }

    mem.sync().expect("sync");
    let (kept, held) = reopen(durable(&disks), "after the sync");
    assert_eq!(held, BTreeSet::from([0, 1]));
    assert!(finds(&kept, "where did I move", "Valparaiso"));
    drop(kept);

    // A clean close makes the deferred commits durable too.
    mem.add_batch_with(batch(2), Durability::Deferred).expect("deferred batch");
    assert_eq!(mem.durability(), Durability::Immediate);
    drop(mem);
    let (_, held) = reopen(durable(&disks), "after the close");
    assert_eq!(held, BTreeSet::from([0, 1, 2]));
}

#[test]
fn a_deferred_ingest_batch_loses_its_counter_with_it() {
    let ops: Vec<_> = (0..6)
        .map(|i| {
            let line = format!(
                r#"{{"op": "observe", "at": "2024-06-0{}T10:00:00", "user": "I work at Company{i} now", "agent": "ok", "user_id": "u1"}}"#,
                i + 1
            );
            parse_op(&line).expect("op")
        })
        .collect();
    let disks: Disks = Default::default();
    let mem = open(&disks);
    assert_eq!(mem.ingest_batch_with(&ops[..3], Durability::Immediate).expect("synced"), 3);
    assert_eq!(mem.ingest_batch_with(&ops[3..], Durability::Deferred).expect("deferred"), 6);
    assert_eq!(mem.ingested_ops().expect("counter"), 6);
    let (lost, _) = reopen(durable(&disks), "before the sync");
    // A resumed ingest would redo exactly the lost batch.
    assert_eq!(lost.ingested_ops().expect("counter"), 3);
    assert!(!finds(&lost, "where do I work", "Company4"));
    drop(lost);
    mem.sync().expect("sync");
    let (kept, _) = reopen(durable(&disks), "after the sync");
    assert_eq!(kept.ingested_ops().expect("counter"), 6);
    assert!(finds(&kept, "where do I work", "Company4"));
}
