//! The postings tail (`storage::tail`): small transactions keep their memories'
//! postings in the tail, recall finds them there, and the tail is merged into the
//! blocks when it fills up or when anything else changes the postings.

use soulmem::{Memory, MemoryEntry, MemoryType, RecallQuery, Settings};

fn tail_rows(mem: &Memory) -> u64 {
    mem.stats().expect("stats").index_rows.get("posting_tail").copied().unwrap_or(0)
}

fn block_rows(mem: &Memory) -> u64 {
    mem.stats().expect("stats").index_rows.get("posting_blocks").copied().unwrap_or(0)
}

fn assert_consistent(mem: &Memory) {
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// A word only memory `i` holds (tokens keep letters only).
fn word(i: usize) -> String {
    let letters: String =
        i.to_string().bytes().map(|b| char::from(b"abcdefghij"[usize::from(b - b'0')])).collect();
    format!("zz{letters}")
}

fn entry(i: usize) -> MemoryEntry {
    MemoryEntry::new(MemoryType::Semantic, format!("note about kayaking and {}", word(i)))
}

fn found(mem: &Memory, query: &str) -> Vec<String> {
    mem.recall(&RecallQuery::new(query))
        .expect("recall")
        .memories
        .into_iter()
        .map(|m| m.id)
        .collect()
}

#[test]
fn single_adds_stay_in_the_tail_until_it_is_full() {
    let limit = 64;
    let mem = Memory::builder().postings_tail_docs(limit as u64).open_in_memory().expect("open");
    let first = mem.add(entry(0)).expect("add");
    assert_eq!(tail_rows(&mem), 1);
    assert_eq!(block_rows(&mem), 0, "a single add writes no block");
    assert_eq!(found(&mem, &word(0)), vec![first.clone()]);
    assert_consistent(&mem);

    for i in 1..limit {
        mem.add(entry(i)).expect("add");
    }
    assert_eq!(tail_rows(&mem), limit as u64);
    assert_consistent(&mem);
    // One more does not fit: the tail goes to the blocks with it.
    let last = mem.add(entry(limit)).expect("add");
    assert_eq!(tail_rows(&mem), 0);
    assert!(block_rows(&mem) > 0);
    assert_consistent(&mem);
    assert_eq!(found(&mem, &word(0)), vec![first]);
    assert_eq!(found(&mem, &word(limit)), vec![last]);
    // The next single add starts a new tail above the blocks.
    let next = mem.add(entry(limit + 1)).expect("add");
    assert_eq!(tail_rows(&mem), 1);
    assert_eq!(found(&mem, &word(limit + 1)), vec![next]);
    assert_consistent(&mem);
}

/// With a tail of 4,096 memories (the default on a store of 262,144 or more), a
/// batch of 1,000 new memories goes into the tail whole, as do the next ones
/// until the tail would pass 4,096; the batch that would take it past merges it,
/// and searches find the same memories either way.
#[test]
fn batches_fill_the_tail_before_a_merge() {
    let limit = soulmem::storage::tail::TAIL_MAX_DOCS as usize;
    // No merge in idle time: a slow step of the test must not empty the tail.
    let settings =
        Settings { idle_tail_merge: None, ..Settings::for_profile(soulmem::Profile::Default) };
    let mem = Memory::builder()
        .settings(settings)
        .postings_tail_docs(limit as u64)
        .open_in_memory()
        .expect("open");
    let batch = 1000;
    let mut ids = Vec::new();
    let mut added = 0;
    while added + batch <= limit {
        ids.extend(mem.add_batch((added..added + batch).map(entry).collect()).expect("add"));
        added += batch;
        assert_eq!(tail_rows(&mem), added as u64);
        assert_eq!(block_rows(&mem), 0, "no merge before the tail is full");
    }
    assert_consistent(&mem);
    let in_tail = found(&mem, "kayaking");
    ids.extend(mem.add_batch((added..added + batch).map(entry).collect()).expect("add"));
    assert_eq!(tail_rows(&mem), 0, "the batch that does not fit merges the tail");
    assert!(block_rows(&mem) > 0);
    assert_consistent(&mem);
    // The oldest memories rank the same from the blocks as from the tail (the
    // newer ones hold the same words: the top ten is the first ten added).
    assert_eq!(in_tail, ids[..10].to_vec());
    assert_eq!(found(&mem, "kayaking"), in_tail);
    assert_eq!(found(&mem, &word(7)), vec![ids[7].clone()]);
    assert_eq!(found(&mem, &word(added + 3)), vec![ids[added + 3].clone()]);
}

/// By default the tail holds a 64th of the store, within 256 and 4,096
/// memories: on a small store a batch of 300 goes to the blocks.
#[test]
fn the_default_tail_follows_the_store_size() {
    use soulmem::storage::tail::default_cap;
    assert_eq!(default_cap(0), 256);
    assert_eq!(default_cap(64 * 1000), 1000);
    assert_eq!(default_cap(1_000_000), 4096);
    // A batch may fill it further on a large store only.
    use soulmem::storage::tail::batch_cap;
    assert_eq!(batch_cap(0), 256);
    assert_eq!(batch_cap(64 * 1000), 1000);
    assert_eq!(batch_cap(262_144), 4096);
    assert_eq!(batch_cap(1_000_000), 15_625);
    assert_eq!(batch_cap(10_000_000), 16_384);
    let mem = Memory::open_in_memory().expect("open");
    mem.add_batch((0..200).map(entry).collect()).expect("add");
    assert_eq!(tail_rows(&mem), 200);
    mem.add_batch((200..300).map(entry).collect()).expect("add");
    assert_eq!(tail_rows(&mem), 0, "300 is past a small store's 256");
    assert!(block_rows(&mem) > 0);
    assert_consistent(&mem);
}

/// The caps a store opened with: a batch's never below a single write's, and
/// the single write's cap serving batches too when it alone is set.
#[test]
fn the_batch_cap_is_the_single_caps_unless_set() {
    use soulmem::storage::tail::{BATCH_MIN_NEW, Caps};
    let docs = 1_000_000;
    let default = Caps::default();
    assert_eq!((default.single(docs), default.batch(docs)), (4096, 15_625));
    assert_eq!(default.for_write(docs, 0, BATCH_MIN_NEW - 1), 4096);
    assert_eq!(default.for_write(docs, 4096, BATCH_MIN_NEW - 1), 4096);
    assert_eq!(default.for_write(docs, 0, BATCH_MIN_NEW), 15_625);
    // Once a batch has left the tail past the single cap, any write may fill it.
    assert_eq!(default.for_write(docs, 4097, 1), 15_625);
    let single = Caps { single: Some(1000), batch: None };
    assert_eq!((single.single(docs), single.batch(docs)), (1000, 1000));
    let both = Caps { single: Some(1000), batch: Some(3000) };
    assert_eq!((both.single(docs), both.batch(docs)), (1000, 3000));
    let lower = Caps { single: Some(1000), batch: Some(10) };
    assert_eq!(lower.batch(docs), 1000, "a batch fits wherever a single write does");
    let batch_only = Caps { single: None, batch: Some(3000) };
    assert_eq!((batch_only.single(docs), batch_only.batch(docs)), (4096, 4096));
    assert_eq!(batch_only.batch(10_000), 3000);
}

/// A write of at least `BATCH_MIN_NEW` new memories may leave the tail past the
/// cap of smaller writes, up to the batch cap; a smaller write that takes the
/// tail past its own cap merges it, unless a batch left it past that cap (then
/// it adds to it up to the batch cap); the write that would pass the batch cap
/// merges it; searches find the same memories throughout.
#[test]
fn a_batch_may_fill_the_tail_past_a_single_writes_cap() {
    use soulmem::storage::tail::BATCH_MIN_NEW;
    let big = BATCH_MIN_NEW as usize;
    let (single, batch_cap) = (600, 3 * BATCH_MIN_NEW);
    let settings =
        Settings { idle_tail_merge: None, ..Settings::for_profile(soulmem::Profile::Default) };
    let mem = Memory::builder()
        .settings(settings)
        .postings_tail_docs(single)
        .postings_tail_batch_docs(batch_cap)
        .open_in_memory()
        .expect("open");
    let fill = mem.postings_tail().expect("fill");
    assert_eq!((fill.cap, fill.batch_cap), (single, batch_cap));
    let mut ids: Vec<String> = Vec::new();
    let add_batch = |mem: &Memory, ids: &mut Vec<String>, n: usize| {
        let from = ids.len();
        ids.extend(mem.add_batch((from..from + n).map(entry).collect()).expect("add"));
    };
    add_batch(&mem, &mut ids, 100);
    assert_eq!(tail_rows(&mem), 100);
    // One short of a batch: past the single cap, so it merges.
    add_batch(&mem, &mut ids, big - 1);
    assert_eq!(tail_rows(&mem), 0, "a small write merges a tail it takes past its cap");
    let blocks = block_rows(&mem);
    assert!(blocks > 0);
    add_batch(&mem, &mut ids, 100);
    add_batch(&mem, &mut ids, big);
    add_batch(&mem, &mut ids, big);
    assert_eq!(tail_rows(&mem), (100 + 2 * big) as u64, "batches fill it past the single cap");
    assert_eq!(block_rows(&mem), blocks, "no merge");
    assert_eq!(mem.postings_tail().expect("fill").memories, (100 + 2 * big) as u64);
    assert_consistent(&mem);
    // Words one memory each holds (a word all hold would rank newer ones first).
    let queries = [word(0), word(150), word(ids.len() - 1)];
    let in_tail: Vec<Vec<String>> = queries.iter().map(|q| found(&mem, q)).collect();
    assert_eq!(
        in_tail,
        vec![vec![ids[0].clone()], vec![ids[150].clone()], vec![ids[ids.len() - 1].clone()]]
    );
    // The batch that would pass the batch cap merges it.
    add_batch(&mem, &mut ids, big);
    assert_eq!(tail_rows(&mem), 0);
    assert!(block_rows(&mem) > blocks);
    assert_consistent(&mem);
    // A batch leaves the tail past the single cap: smaller writes then add to
    // it up to the batch cap, and the one that would pass that merges it.
    add_batch(&mem, &mut ids, big);
    add_batch(&mem, &mut ids, big);
    assert_eq!(tail_rows(&mem), 2 * big as u64);
    let id = mem.add(entry(ids.len())).expect("add");
    ids.push(id.clone());
    assert_eq!(tail_rows(&mem), 2 * big as u64 + 1, "a single add joins a batch-filled tail");
    assert_eq!(found(&mem, &word(ids.len() - 1)), vec![id]);
    add_batch(&mem, &mut ids, big - 1);
    assert_eq!(tail_rows(&mem), batch_cap, "a small batch fills it to the batch cap");
    assert_consistent(&mem);
    let id = mem.add(entry(ids.len())).expect("add");
    assert_eq!(tail_rows(&mem), 0, "the single add past the batch cap merges it");
    assert_consistent(&mem);
    assert_eq!(found(&mem, &word(ids.len())), vec![id]);
    let merged: Vec<Vec<String>> = queries.iter().map(|q| found(&mem, q)).collect();
    assert_eq!(merged, in_tail, "the same memories found from the blocks");
}

fn terms_rows(mem: &Memory) -> u64 {
    mem.stats().expect("stats").index_rows.get("user_terms").copied().unwrap_or(0)
}

fn found_for(mem: &Memory, query: &str, user: &str) -> Vec<String> {
    let mut q = RecallQuery::new(query);
    q.user_id = Some(user.into());
    mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.id).collect()
}

/// Memories whose postings are in the tail have no `user_terms` row until the
/// tail is merged (schema 12): a `user_id`-filtered recall scores them from
/// their tail rows, and the merge writes their rows, none for a memory removed
/// before it, and the new owner's for one moved before it.
#[test]
fn tail_memories_get_their_terms_rows_when_the_tail_merges() {
    let mem = Memory::builder().postings_tail_docs(64).open_in_memory().expect("open");
    let owned = |i: usize, user: &str| {
        let mut e = entry(i);
        e.user_id = Some(user.into());
        e
    };
    let user = |i: usize| if i % 2 == 0 { "ana" } else { "bo" };
    let ids: Vec<String> = (0..6).map(|i| mem.add(owned(i, user(i))).expect("add")).collect();
    assert_eq!(tail_rows(&mem), 6);
    assert_eq!(terms_rows(&mem), 0, "no row before the merge");
    assert_consistent(&mem);
    assert_eq!(found_for(&mem, &word(2), "ana"), vec![ids[2].clone()]);
    assert!(found_for(&mem, &word(2), "bo").is_empty());
    assert_eq!(found_for(&mem, "kayaking", "bo").len(), 3);

    // Moving memory 4 to bo merges the tail: every memory gets its row, 4 under bo.
    let mut moved = mem.get(&ids[4]).expect("get").expect("stored");
    moved.user_id = Some("bo".into());
    mem.update(moved).expect("update");
    assert_eq!(tail_rows(&mem), 0);
    assert_eq!(terms_rows(&mem), 6);
    assert_consistent(&mem);
    assert_eq!(found_for(&mem, &word(4), "bo"), vec![ids[4].clone()]);
    assert!(found_for(&mem, &word(4), "ana").is_empty());

    // A removal of a tail memory merges the tail without its row.
    let more: Vec<String> = (6..9).map(|i| mem.add(owned(i, user(i))).expect("add")).collect();
    assert_eq!((tail_rows(&mem), terms_rows(&mem)), (3, 6));
    assert_eq!(found_for(&mem, &word(7), "bo"), vec![more[1].clone()]);
    assert!(mem.remove(&more[0]).expect("remove"));
    assert_eq!((tail_rows(&mem), terms_rows(&mem)), (0, 8));
    assert_consistent(&mem);
    assert_eq!(found_for(&mem, &word(7), "bo"), vec![more[1].clone()]);
    assert!(found_for(&mem, &word(6), "ana").is_empty());
}

#[test]
fn a_removal_or_update_merges_the_tail_first() {
    let mem = Memory::open_in_memory().expect("open");
    let ids: Vec<String> = (0..5).map(|i| mem.add(entry(i)).expect("add")).collect();
    assert_eq!(tail_rows(&mem), 5);
    assert!(mem.remove(&ids[2]).expect("remove"));
    assert_eq!(tail_rows(&mem), 0);
    assert_consistent(&mem);
    assert!(found(&mem, &word(2)).is_empty());
    assert_eq!(found(&mem, &word(3)), vec![ids[3].clone()]);

    let more = mem.add(entry(7)).expect("add");
    assert_eq!(tail_rows(&mem), 1);
    let mut e = mem.get(&more).expect("get").expect("stored");
    e.content = "now about sailing".into();
    mem.update(e).expect("update");
    assert_eq!(tail_rows(&mem), 0);
    assert_consistent(&mem);
    assert_eq!(found(&mem, "sailing"), vec![more]);
    assert!(found(&mem, &word(7)).is_empty());
}

/// A change that leaves a memory's text alone (a supersede, a new importance)
/// keeps its postings where they are: the tail is not merged for it, and the
/// memory is still found by its words.
#[test]
fn a_change_that_keeps_the_text_keeps_the_tail() {
    let mem = Memory::open_in_memory().expect("open");
    let ids: Vec<String> = (0..5).map(|i| mem.add(entry(i)).expect("add")).collect();
    assert_eq!(tail_rows(&mem), 5);

    let mut e = mem.get(&ids[1]).expect("get").expect("stored");
    e.importance = 9;
    mem.update(e).expect("update");
    assert_eq!(tail_rows(&mem), 5, "an importance change merged the tail");
    assert_eq!(block_rows(&mem), 0);
    assert_consistent(&mem);

    let newer = mem.supersede(&ids[2], "note about sailing", None).expect("supersede");
    assert_eq!(tail_rows(&mem), 6, "a supersede merged the tail");
    assert_eq!(block_rows(&mem), 0);
    assert_consistent(&mem);
    assert_eq!(found(&mem, &word(1)), vec![ids[1].clone()]);
    assert_eq!(found(&mem, "sailing"), vec![newer]);
    // Out of default recall, still in the index.
    assert!(found(&mem, &word(2)).is_empty());
    let mut q = RecallQuery::new(word(2));
    q.include_superseded = true;
    let all: Vec<String> =
        mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.id).collect();
    assert_eq!(all, vec![ids[2].clone()]);
}

#[test]
fn the_tail_survives_reopening() {
    let dir = std::env::temp_dir().join(format!("soulmem-tail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tail.redb");
    let _ = soulmem::storage::remove_store(&path);
    let id = {
        let mem = Memory::open(&path).expect("open");
        mem.add(entry(3)).expect("add")
    };
    let mem = Memory::open(&path).expect("reopen");
    assert_eq!(tail_rows(&mem), 1);
    assert_eq!(found(&mem, &word(3)), vec![id]);
    assert_consistent(&mem);
    drop(mem);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_tail_row_is_a_clear_error_and_reindex_repairs_it() {
    let dir = std::env::temp_dir().join(format!("soulmem-tail-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("tail.redb");
    let _ = soulmem::storage::remove_store(&path);
    let id = {
        let mem = Memory::open(&path).expect("open");
        mem.add(entry(4)).expect("add")
    };
    {
        let db = redb::Database::create(&path).expect("raw open");
        let txn = db.begin_write().expect("txn");
        {
            let mut t: redb::Table<u64, &[u8]> =
                txn.open_table(redb::TableDefinition::new("posting_tail")).expect("table");
            t.insert(1_000_000, [1u8, 0xff, 0xff].as_slice()).expect("insert");
            let mut meta: redb::Table<&str, &[u8]> =
                txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
            meta.insert("posting_tail_version", 7u64.to_le_bytes().as_slice()).expect("version");
        }
        txn.commit().expect("commit");
    }
    let mem = Memory::open(&path).expect("reopen");
    let err = mem.recall(&RecallQuery::new(word(4))).expect_err("a damaged tail is reported");
    assert!(err.to_string().contains("postings tail"), "{err}");
    mem.reindex(|_| {}).expect("reindex");
    assert_eq!(found(&mem, &word(4)), vec![id]);
    assert_consistent(&mem);
    drop(mem);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An agent can merge the tail in its idle time: `postings_tail` says how full
/// it is, `merge_postings_tail` empties it into the blocks, searches find the
/// same memories, and the next write starts a new tail instead of merging.
#[test]
fn the_tail_can_be_merged_ahead_of_the_write_that_fills_it() {
    let limit = 64;
    let mem = Memory::builder().postings_tail_docs(limit).open_in_memory().expect("open");
    assert_eq!(mem.merge_postings_tail().expect("merge"), 0, "nothing to merge");
    assert_eq!(block_rows(&mem), 0);
    let ids: Vec<String> = (0..48).map(|i| mem.add(entry(i)).expect("add")).collect();
    let fill = mem.postings_tail().expect("fill");
    assert_eq!((fill.memories, fill.cap), (48, limit));
    let before: Vec<Vec<String>> =
        [word(0), word(47), "kayaking".to_owned()].iter().map(|q| found(&mem, q)).collect();
    assert_eq!(before[0], vec![ids[0].clone()]);

    assert_eq!(mem.merge_postings_tail().expect("merge"), 48);
    assert_eq!(mem.postings_tail().expect("fill").memories, 0);
    assert_eq!(tail_rows(&mem), 0);
    assert!(block_rows(&mem) > 0);
    assert_consistent(&mem);
    let after: Vec<Vec<String>> =
        [word(0), word(47), "kayaking".to_owned()].iter().map(|q| found(&mem, q)).collect();
    assert_eq!(after, before);

    // Room for a whole tail again: 64 more adds stay in it.
    let blocks = block_rows(&mem);
    for i in 48..48 + limit as usize {
        mem.add(entry(i)).expect("add");
    }
    assert_eq!(tail_rows(&mem), limit);
    assert_eq!(block_rows(&mem), blocks, "no write merged the tail");
    assert_consistent(&mem);
}

/// A store with a tail of 4,096 memories, merged in idle time after `idle`
/// (`Settings::idle_tail_merge`).
fn idle_merging(idle: Option<std::time::Duration>) -> soulmem::MemoryBuilder {
    Memory::builder()
        .settings(Settings {
            idle_tail_merge: idle,
            ..Settings::for_profile(soulmem::Profile::Default)
        })
        .postings_tail_docs(4096)
}

/// A long tail left three quarters full is merged once the store has been idle
/// for `Settings::idle_tail_merge`, on a thread of its own; with the setting
/// off it stays until a write fills it.
#[test]
fn a_long_tail_is_merged_once_the_store_is_idle() {
    let idle = std::time::Duration::from_millis(50);
    let open = |idle| idle_merging(idle).open_in_memory().expect("open");
    let held = 3100; // past three quarters of 4,096, and past IDLE_MERGE_MIN_DOCS
    assert!(soulmem::storage::tail::merge_when_idle(held, 4096));
    assert!(!soulmem::storage::tail::merge_when_idle(3000, 4096));

    let mem = open(Some(idle));
    let ids = mem.add_batch((0..held as usize).map(entry).collect()).expect("add");
    let before = found(&mem, &word(7));
    assert_eq!(before, vec![ids[7].clone()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tail_rows(&mem) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(idle);
    }
    assert_eq!(tail_rows(&mem), 0, "merged in idle time");
    assert!(block_rows(&mem) > 0);
    assert_eq!(found(&mem, &word(7)), before);
    assert_consistent(&mem);

    let off = open(None);
    off.add_batch((0..held as usize).map(entry).collect()).expect("add");
    std::thread::sleep(idle * 6);
    assert_eq!(tail_rows(&off), held, "no merge with the setting off");
}

/// A long tail a store was closed with (as a bulk load leaves it) is merged
/// once the reopened store has been idle for `Settings::idle_tail_merge`, with
/// no write to start it; with the setting off it stays until a write fills it.
#[test]
fn a_long_tail_a_store_was_closed_with_is_merged_once_it_is_idle() {
    let idle = std::time::Duration::from_millis(50);
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("tail.redb");
    let open = |idle| idle_merging(idle).open(&path).expect("open");
    let held = 3100; // as in `a_long_tail_is_merged_once_the_store_is_idle`
    let ids = {
        let mem = open(None);
        let ids = mem.add_batch((0..held as usize).map(entry).collect()).expect("add");
        assert_eq!(tail_rows(&mem), held);
        ids
    };

    {
        let off = open(None);
        std::thread::sleep(idle * 6);
        assert_eq!(tail_rows(&off), held, "no merge with the setting off");
    }
    {
        // Opening counts as activity: no merge before the idle time has passed.
        let patient = open(Some(std::time::Duration::from_secs(20)));
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert_eq!(tail_rows(&patient), held, "a store just opened is not idle");
    }

    let mem = open(Some(idle));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tail_rows(&mem) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(idle);
    }
    assert_eq!(tail_rows(&mem), 0, "merged in idle time after opening");
    assert!(block_rows(&mem) > 0);
    assert_eq!(found(&mem, &word(7)), vec![ids[7].clone()]);
    assert_eq!(found(&mem, &word(held as usize - 1)), vec![ids[held as usize - 1].clone()]);
    assert_consistent(&mem);
}
