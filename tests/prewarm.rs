//! Prewarming the ranking records after open (`storage/prewarm.rs`).

use soulmem::storage::prewarm::Prewarm;
use soulmem::{Memory, MemoryEntry, MemoryType, RecallQuery};

fn fill(path: &std::path::Path, n: usize) {
    let mem = Memory::builder().prewarm(false).open(path).expect("open");
    let entries: Vec<MemoryEntry> = (0..n)
        .map(|i| {
            MemoryEntry::new(
                MemoryType::Episodic,
                format!("note {i} about topic{} and more", i % 97),
            )
        })
        .collect();
    for chunk in entries.chunks(5_000) {
        mem.add_batch(chunk.to_vec()).expect("add");
    }
}

fn ids(mem: &Memory, q: &str) -> Vec<String> {
    let r = mem.recall(&RecallQuery::new(q)).expect("recall");
    r.memories.into_iter().map(|m| m.id).collect()
}

/// A store opened with the default builder reads every `docs` record once, in
/// the background; recall gives what it gives on a store opened without it.
#[test]
fn prewarm_reads_every_record_and_changes_no_answer() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.redb");
    fill(&path, 3_000);
    let plain = {
        let mem = Memory::builder().prewarm(false).open(&path).expect("open");
        assert_eq!(mem.wait_for_prewarm().expect("wait"), None, "nothing was started");
        ids(&mem, "topic7 note")
    };
    let mem = Memory::open(&path).expect("open");
    assert_eq!(mem.wait_for_prewarm().expect("wait"), Some(Prewarm::Read(3_000)));
    assert_eq!(mem.wait_for_prewarm().expect("wait"), None, "waited for once");
    assert!(!plain.is_empty());
    assert_eq!(ids(&mem, "topic7 note"), plain);
}

/// A `docs` table over a quarter of the page cache is not read at all.
#[test]
fn prewarm_skips_a_table_over_its_share_of_the_cache() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.redb");
    fill(&path, 3_000);
    let mem = Memory::builder().cache_bytes(64 << 10).open(&path).expect("open");
    match mem.wait_for_prewarm().expect("wait") {
        Some(Prewarm::TooLarge { bytes, budget }) => {
            assert_eq!(budget, (64 << 10) / 4);
            assert!(bytes > budget, "{bytes} within {budget}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

/// Closing a store while its prewarm runs stops the prewarm and frees the file:
/// the store opens again at once.
#[test]
fn closing_during_the_prewarm_frees_the_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.redb");
    fill(&path, 40_000);
    for _ in 0..3 {
        let mem = Memory::open(&path).expect("open");
        drop(mem);
        let again = Memory::builder().prewarm(false).open(&path).expect("open again at once");
        assert_eq!(again.count().expect("count"), 40_000);
    }
}
