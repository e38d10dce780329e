//! Access records: recall records the accesses of the memories it returns without a
//! write transaction of its own; every read sees them at once, writes of entries
//! read through them never count an access twice, and closing the store persists
//! them. Each test keeps a model of the expected access counts and compares it with
//! what the store reports.

use std::collections::HashMap;
use std::sync::Arc;

use soulmem::model::time::parse_timestamp;
use soulmem::storage::faulty::{FaultyBackend, SharedDisk};
use soulmem::{FixedClock, Memory, MemoryEntry, MemoryType, RecallQuery};

const TOPICS: [&str; 6] = ["tea", "chess", "rust", "piano", "hiking", "sourdough"];

/// Stores `per_topic` memories per topic; returns their ids.
fn fill(mem: &Memory, per_topic: usize) -> Vec<String> {
    let mut entries = Vec::new();
    for t in TOPICS {
        for i in 0..per_topic {
            entries.push(MemoryEntry::new(
                MemoryType::Semantic,
                format!("User talked about {t} on occasion {i} with friend{i}"),
            ));
        }
    }
    mem.add_batch(entries).expect("add")
}

/// Recalls `topic`, adding one access per returned memory to `model`.
fn recall(mem: &Memory, topic: &str, model: &mut HashMap<String, u32>) -> Vec<String> {
    let r = mem.recall(&RecallQuery::new(topic)).expect("recall");
    assert!(!r.memories.is_empty(), "{topic} found nothing");
    let ids: Vec<String> = r.memories.iter().map(|m| m.id.clone()).collect();
    for id in &ids {
        *model.entry(id.clone()).or_default() += 1;
    }
    ids
}

fn assert_counts(mem: &Memory, ids: &[String], model: &HashMap<String, u32>, when: &str) {
    for id in ids {
        let e = mem.get(id).expect("get").expect("stored");
        let want = model.get(id).copied().unwrap_or(0);
        assert_eq!(e.access_count, want, "{when}: access count of {id}");
        let cap = mem.settings().access_history_cap;
        assert_eq!(e.access_timestamps.len(), (want as usize).min(cap), "{when}: history of {id}");
    }
}

fn clocked() -> (Arc<FixedClock>, soulmem::MemoryBuilder) {
    let clock = Arc::new(FixedClock::new(parse_timestamp("2025-01-01T09:00:00").expect("ts")));
    let b = Memory::builder().clock(clock.clone());
    (clock, b)
}

#[test]
fn reads_see_accesses_at_once_and_a_clean_close_keeps_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("a.redb");
    let mut model = HashMap::new();
    let ids = {
        let (clock, b) = clocked();
        let mem = b.open(&path).expect("open");
        let ids = fill(&mem, 4);
        for round in 0..3 {
            clock.set(parse_timestamp(&format!("2025-01-01T10:0{round}:00")).expect("ts"));
            let got = recall(&mem, "chess", &mut model);
            // The returned copies carry this recall's access already.
            let again = mem.recall(&RecallQuery::new("chess")).expect("recall");
            for m in &again.memories {
                *model.entry(m.id.clone()).or_default() += 1;
                assert_eq!(m.access_count, model[&m.id], "returned copy of {}", m.id);
            }
            assert!(!got.is_empty());
        }
        assert_counts(&mem, &ids, &model, "before close");
        // The entries as stored do not hold them yet, and the indexes agree with
        // the entries as stored.
        let report = mem.check(|_| {}).expect("check");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        // A dump holds them.
        let snap = mem.snapshot().expect("snapshot");
        for id in &ids {
            let e = snap.get(id).expect("get").expect("stored");
            assert_eq!(e.access_count, model.get(id).copied().unwrap_or(0));
        }
        ids
    };
    let mem = Memory::open(&path).expect("reopen");
    assert_counts(&mem, &ids, &model, "after reopen");
    let report = mem.check(|_| {}).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn many_recalls_write_their_records_in_chunks_and_lose_none() {
    let (clock, b) = clocked();
    let mem = b.open_in_memory().expect("open");
    let ids = fill(&mem, 12);
    let mut model = HashMap::new();
    // Well past the point where recall starts writing the oldest records.
    let rounds = 3 * soulmem::storage::ACCESS_FLUSH_AT / 10;
    for i in 0..rounds {
        clock.set(
            parse_timestamp("2025-01-02T00:00:00").expect("ts")
                + chrono::Duration::seconds(i as i64),
        );
        recall(&mem, TOPICS[i % TOPICS.len()], &mut model);
        if i % 97 == 0 {
            assert_counts(&mem, &ids, &model, &format!("round {i}"));
        }
    }
    assert_counts(&mem, &ids, &model, "end");
    let report = mem.check(|_| {}).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // The timestamps are the recalls' clocks, oldest first, capped.
    let busiest = ids.iter().max_by_key(|id| model.get(*id).copied().unwrap_or(0)).expect("ids");
    let e = mem.get(busiest).expect("get").expect("stored");
    let cap = mem.settings().access_history_cap;
    assert_eq!(e.access_timestamps.len(), (model[busiest] as usize).min(cap));
    assert!(e.access_timestamps.windows(2).all(|w| w[0] < w[1]), "history out of order");
    assert_eq!(e.last_accessed.as_ref(), e.access_timestamps.last());
}

#[test]
fn update_of_an_entry_read_with_its_accesses_does_not_count_them_twice() {
    let (_, b) = clocked();
    let mem = b.open_in_memory().expect("open");
    let ids = fill(&mem, 3);
    let mut model = HashMap::new();
    let got = recall(&mem, "piano", &mut model);
    recall(&mem, "piano", &mut model);
    let target = &got[0];
    let mut e = mem.get(target).expect("get").expect("stored");
    assert_eq!(e.access_count, 2);
    e.content = format!("{} (edited)", e.content);
    mem.update(e).expect("update");
    assert_counts(&mem, &ids, &model, "after update");
    // Writing every pending record later (chunked flushes, then close) adds nothing.
    for _ in 0..(2 * soulmem::storage::ACCESS_FLUSH_AT) {
        recall(&mem, "tea", &mut model);
    }
    assert_counts(&mem, &ids, &model, "after flushes");
    let edited = mem.get(target).expect("get").expect("stored");
    assert!(edited.content.ends_with("(edited)"));
}

#[test]
fn internal_writes_keep_pending_records_and_forget_drops_them() {
    let (_, b) = clocked();
    let mem = b.open_in_memory().expect("open");
    let ids = fill(&mem, 3);
    let mut model = HashMap::new();
    let got = recall(&mem, "hiking", &mut model);
    // Observes write while records are pending; they read entries as stored.
    mem.observe_pair(
        "I went hiking in the Alps with my sister",
        "Sounds lovely!",
        &Default::default(),
    )
    .expect("observe");
    assert_counts(&mem, &ids, &model, "after observe");
    // Forgetting a memory with pending records: the rest are still written.
    assert!(mem.remove(&got[0]).expect("remove"));
    for _ in 0..(2 * soulmem::storage::ACCESS_FLUSH_AT) {
        recall(&mem, "sourdough", &mut model);
    }
    let rest: Vec<String> = ids.iter().filter(|id| **id != got[0]).cloned().collect();
    assert_counts(&mem, &rest, &model, "after forget and flushes");
    assert!(mem.get(&got[0]).expect("get").is_none());
}

#[test]
fn a_snapshot_keeps_the_accesses_it_was_taken_with() {
    let (_, b) = clocked();
    let mem = b.open_in_memory().expect("open");
    fill(&mem, 3);
    let mut model = HashMap::new();
    let got = recall(&mem, "rust", &mut model);
    let snap = mem.snapshot().expect("snapshot");
    // More recalls, enough for their records to be written in between.
    for _ in 0..(2 * soulmem::storage::ACCESS_FLUSH_AT) {
        recall(&mem, "rust", &mut model);
    }
    let then = snap.get(&got[0]).expect("get").expect("stored");
    assert_eq!(then.access_count, 1, "the snapshot saw one recall");
    let now = mem.get(&got[0]).expect("get").expect("stored");
    assert_eq!(now.access_count, model[&got[0]]);
}

#[test]
fn a_crash_loses_at_most_access_records_never_a_memory() {
    let disk = SharedDisk::new();
    let mut model = HashMap::new();
    let ids = {
        let (backend, _) = FaultyBackend::new(disk.clone());
        let mem = Memory::builder().open_with_backend(backend).expect("open");
        let ids = fill(&mem, 3);
        for _ in 0..50 {
            recall(&mem, "tea", &mut model);
        }
        // The process dies here: no close.
        std::mem::forget(mem);
        ids
    };
    let survived = SharedDisk::from_bytes(disk.durable_bytes());
    let (backend, _) = FaultyBackend::new(survived);
    let mem = Memory::builder().open_with_backend(backend).expect("reopen after crash");
    for id in &ids {
        let e = mem.get(id).expect("get").expect("every memory survives");
        assert!(e.access_count <= model.get(id).copied().unwrap_or(0));
    }
    let report = mem.check(|_| {}).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn flushed_records_survive_a_crash_without_waiting_for_the_background_writer() {
    let disk = SharedDisk::new();
    let mut model = HashMap::new();
    let ids = {
        let (backend, _) = FaultyBackend::new(disk.clone());
        let mem = Memory::builder().open_with_backend(backend).expect("open");
        let ids = fill(&mem, 3);
        // Fewer records than start the background writer: only the flush writes them.
        for i in 0..12 {
            recall(&mem, TOPICS[i % TOPICS.len()], &mut model);
        }
        assert!(mem.pending_accesses() > 0);
        assert!(mem.pending_accesses() <= soulmem::storage::ACCESS_FLUSH_AT);
        mem.flush_accesses().expect("flush");
        assert_eq!(mem.pending_accesses(), 0);
        assert_counts(&mem, &ids, &model, "after the flush");
        mem.flush_accesses().expect("a flush with nothing pending");
        // The process dies here: no close.
        std::mem::forget(mem);
        ids
    };
    let survived = SharedDisk::from_bytes(disk.durable_bytes());
    let (backend, _) = FaultyBackend::new(survived);
    let mem = Memory::builder().open_with_backend(backend).expect("reopen after crash");
    assert_counts(&mem, &ids, &model, "after the crash");
}

#[test]
fn records_written_in_the_background_survive_a_crash() {
    let disk = SharedDisk::new();
    let mut model = HashMap::new();
    let (ids, pending) = {
        let (backend, _) = FaultyBackend::new(disk.clone());
        let mem = Memory::builder().open_with_backend(backend).expect("open");
        let ids = fill(&mem, 12);
        // Past the point where the background writer starts.
        for i in 0..(3 * soulmem::storage::ACCESS_FLUSH_AT) / 10 {
            recall(&mem, TOPICS[i % TOPICS.len()], &mut model);
        }
        let waited = std::time::Instant::now();
        while mem.pending_accesses() > soulmem::storage::ACCESS_FLUSH_AT / 2 {
            assert!(waited.elapsed().as_secs() < 60, "the background writer never caught up");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pending = mem.pending_accesses();
        // The process dies here: no close, so only synced commits count.
        std::mem::forget(mem);
        (ids, pending)
    };
    let made: u32 = model.values().sum();
    let survived = SharedDisk::from_bytes(disk.durable_bytes());
    let (backend, _) = FaultyBackend::new(survived);
    let mem = Memory::builder().open_with_backend(backend).expect("reopen after crash");
    let mut kept = 0u32;
    for id in &ids {
        let e = mem.get(id).expect("get").expect("every memory survives");
        assert!(e.access_count <= model.get(id).copied().unwrap_or(0));
        kept += e.access_count;
    }
    // Everything the writer wrote was synced: only the records still pending at
    // the crash are lost.
    assert!(
        kept as usize + pending >= made as usize,
        "{made} accesses made, {pending} pending at the crash, {kept} survived"
    );
    let report = mem.check(|_| {}).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn reads_never_lose_accesses_while_they_are_written_in_the_background() {
    let mem = Memory::open_in_memory().expect("open");
    let ids = fill(&mem, 12);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let recalls = (6 * soulmem::storage::ACCESS_FLUSH_AT) / 10;
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            // What one thread sees may only grow: a read begun later holds every
            // access an earlier read saw, whether written by then or not.
            let mut seen: HashMap<String, u32> = HashMap::new();
            let mut checks = 0u64;
            // At least one round, however late this thread is scheduled.
            loop {
                let last = stop.load(std::sync::atomic::Ordering::Relaxed);
                for id in &ids {
                    let n = mem.get(id).expect("get").expect("stored").access_count;
                    let before = seen.insert(id.clone(), n).unwrap_or(0);
                    assert!(n >= before, "{id}: {before} accesses seen, then {n}");
                    checks += 1;
                }
                if last {
                    break;
                }
            }
            checks
        });
        let mut model = HashMap::new();
        for i in 0..recalls {
            recall(&mem, TOPICS[i % TOPICS.len()], &mut model);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let checks = reader.join().expect("reader");
        assert!(checks > 0);
        assert_counts(&mem, &ids, &model, "after the run");
    });
}
