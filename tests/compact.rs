//! Offline compaction (`storage::compact`): the index tables rewritten in key
//! order hold the same rows in packed leaves, the file shrinks, and recall gives
//! the same answers as on the store before compaction.

use std::path::Path;
use std::sync::Arc;

use soulmem::model::time::parse_timestamp;
use soulmem::storage::compact::compact_store;
use soulmem::synth::Corpus;
use soulmem::{Error, FixedClock, Memory, RecallQuery, TableSpace};

const USERS: usize = 150;
const EXCHANGES: u64 = 3_000;

/// Opens the store. Its postings tail holds 256 memories, so that each batch
/// of `build` reaches the posting blocks and leaves them fragmented.
fn open(path: &Path) -> Memory {
    let clock = Arc::new(FixedClock::new(parse_timestamp("2025-06-01T12:00:00").expect("ts")));
    Memory::builder().clock(clock).prewarm(false).postings_tail_docs(256).open(path).expect("open")
}

/// The same store at every call: the synthetic corpus's memories of `EXCHANGES`
/// exchanges of `USERS` users, added in batches (deterministic ids and times).
fn build(path: &Path) {
    let mem = open(path);
    let corpus = Corpus::with_users(7, USERS);
    let all: Vec<u64> = (0..EXCHANGES).collect();
    for chunk in all.chunks(250) {
        mem.add_batch(chunk.iter().flat_map(|&i| corpus.entries(i)).collect()).expect("add");
    }
}

/// `(ids, scores)` of unfiltered, user-filtered and domain-filtered recalls.
fn answers(mem: &Memory) -> Vec<(Vec<String>, Vec<f64>)> {
    let corpus = Corpus::with_users(7, USERS);
    let mut out = Vec::new();
    for (i, q) in corpus.queries(24).into_iter().enumerate() {
        let mut rq = RecallQuery::new(q.text.clone());
        match i % 3 {
            1 => rq.user_id = Some(q.user_id.clone()),
            2 => rq.domain = Some(["default", "work", "personal"][(i / 3) % 3].to_owned()),
            _ => {}
        }
        let r = mem.recall(&rq).expect("recall");
        out.push((r.memories.iter().map(|m| m.id.clone()).collect(), r.scores));
    }
    out
}

fn table<'a>(space: &'a [TableSpace], name: &str) -> &'a TableSpace {
    space.iter().find(|t| t.name == name).expect("table")
}

/// The share of a table's pages in use (rows and their bookkeeping).
fn fill(t: &TableSpace) -> f64 {
    1.0 - t.fragmented_bytes as f64 / t.total_bytes() as f64
}

#[test]
fn compaction_packs_the_indexes_shrinks_the_file_and_answers_the_same() {
    let dir = tempfile::tempdir().expect("tmp");
    let (a, b) = (dir.path().join("a.redb"), dir.path().join("b.redb"));
    build(&a);
    build(&b);
    let before = open(&b).table_space(|_| {}).expect("space");
    // The tables this test is about are fragmented to begin with.
    assert!(fill(table(&before, "user_terms")) < 0.8, "{:?}", table(&before, "user_terms"));

    let report = compact_store(&b, |_| {}).expect("compact");
    assert!(report.rows > 0 && report.tables > 0, "{report:?}");
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    assert_eq!(report.bytes_after, std::fs::metadata(&b).expect("meta").len());

    let (ma, mb) = (open(&a), open(&b));
    let after = mb.table_space(|_| {}).expect("space");
    // The file is about what its tables hold: the space they freed was given back.
    let held: u64 = after.iter().map(TableSpace::total_bytes).sum();
    assert!(report.bytes_after <= held + held / 10, "{report:?}, tables hold {held}");
    for name in ["user_terms", "posting_blocks", "fact_cards", "importance", "layer_order"] {
        let (x, y) = (table(&before, name), table(&after, name));
        assert_eq!(x.rows, y.rows, "{name}");
        assert_eq!(x.stored_bytes, y.stored_bytes, "{name}");
        assert!(fill(y) > 0.9, "{name} after: {y:?}");
        assert!(y.leaf_pages < x.leaf_pages, "{name}: {x:?} then {y:?}");
    }
    assert_eq!(ma.stats().expect("stats"), mb.stats().expect("stats"));
    let report = mb.check(|_| {}).expect("check");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(answers(&ma), answers(&mb));
}

#[test]
fn compaction_refuses_a_missing_file_and_an_open_store() {
    let dir = tempfile::tempdir().expect("tmp");
    let missing = dir.path().join("none.redb");
    assert!(matches!(compact_store(&missing, |_| {}), Err(Error::Open { .. })));
    assert!(!missing.exists(), "a missing store must not be created");

    let path = dir.path().join("open.redb");
    let mem = open(&path);
    mem.add_batch(Corpus::with_users(7, 3).entries(0)).expect("add");
    assert!(compact_store(&path, |_| {}).is_err(), "the store is open");
    // Still whole and usable.
    assert_eq!(mem.count().expect("count"), Corpus::with_users(7, 3).entries(0).len() as u64);
}
