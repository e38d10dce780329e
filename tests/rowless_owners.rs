//! An owner past `storage::doc_terms::ROW_CAP` memories loses its `user_terms`
//! rows (never read for an owner that large) and is marked rowless: its later
//! memories get none, its `user_id`-filtered recalls search the postings (also
//! after it shrinks back under the listed-search bound), `check` agrees, and
//! `reindex` decides afresh.

use soulmem::storage::doc_terms::ROW_CAP;
use soulmem::{Memory, MemoryEntry, MemoryType, Profile, RecallQuery, Settings};

fn open(path: &std::path::Path) -> Memory {
    let settings = Settings { durable: false, ..Settings::for_profile(Profile::Default) };
    Memory::builder().settings(settings).open(path).expect("open")
}

fn entry(user: Option<&str>, text: String) -> MemoryEntry {
    let mut e = MemoryEntry::new(MemoryType::Semantic, text);
    e.user_id = user.map(str::to_owned);
    e
}

/// A word of letters only, distinct for each `i`.
fn word(i: u64) -> String {
    let mut out = String::from("zq");
    let mut n = i;
    loop {
        out.push(char::from(b'a' + u8::try_from(n % 26).expect("fits")));
        n /= 26;
        if n == 0 {
            return out;
        }
    }
}

fn rows(mem: &Memory, table: &str) -> u64 {
    mem.stats().expect("stats").index_rows[table]
}

/// The memories a `user` recall of `query` returns, as contents.
fn recall_as(mem: &Memory, user: &str, query: &str) -> Vec<String> {
    let mut q = RecallQuery::new(query);
    q.user_id = Some(user.to_owned());
    q.limit = 50;
    mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.content).collect()
}

#[test]
fn an_owner_past_the_cap_loses_its_rows_and_is_still_recalled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rowless.redb");
    let big = ROW_CAP + 100;
    let ids;
    {
        let mem = open(&path);
        let mut batch: Vec<MemoryEntry> = (0..big)
            .map(|i| entry(Some("big"), format!("Big note {} about orchard trees", word(i))))
            .collect();
        batch.extend((0..100).map(|i| {
            entry(Some("small"), format!("Small note {} about orchard", word(10_000 + i)))
        }));
        batch.extend(
            (0..50).map(|i| entry(None, format!("Shared note {} about orchard", word(20_000 + i)))),
        );
        ids = mem.add_batch(batch).expect("add");
        // Only the small owner and the unattributed memories keep rows.
        assert_eq!(rows(&mem, "user_terms"), 150);
        assert_eq!(rows(&mem, "rowless_owners"), 1);
        assert!(mem.check(|_| {}).expect("check").is_ok());
        // A later memory of the marked owner gets no row; the small owner's does.
        mem.add(entry(Some("big"), "Big note about a walnut grove".into())).expect("add");
        mem.add(entry(Some("small"), "Small note about a walnut grove".into())).expect("add");
        assert_eq!(rows(&mem, "user_terms"), 151);
        assert!(mem.check(|_| {}).expect("check").is_ok());
        let found = recall_as(&mem, "big", "walnut grove");
        assert!(found.contains(&"Big note about a walnut grove".to_owned()), "{found:?}");
        assert!(!found.iter().any(|c| c.starts_with("Small")), "{found:?}");
        let found = recall_as(&mem, "big", &word(7));
        assert_eq!(found, [format!("Big note {} about orchard trees", word(7))]);
        let found = recall_as(&mem, "big", "orchard trees");
        assert!(found.iter().any(|c| c.starts_with("Big")), "{found:?}");
        assert!(found.iter().all(|c| c.starts_with("Big") || c.starts_with("Shared")), "{found:?}");
        // The big owner shrinks far under the listed-search bound.
        for id in &ids[10..usize::try_from(big).expect("fits")] {
            assert!(mem.remove(id).expect("remove"));
        }
        assert_eq!(rows(&mem, "rowless_owners"), 1);
        assert!(mem.check(|_| {}).expect("check").is_ok());
    }
    // Reopened (no owner known as large): the marked owner, now small, is not
    // scored from rows it does not have.
    let mem = open(&path);
    let big_ones = |mem: &Memory| -> Vec<String> {
        let mut found = recall_as(mem, "big", "big note");
        found.retain(|c| c.starts_with("Big"));
        found.sort();
        found
    };
    let remaining = big_ones(&mem);
    assert_eq!(remaining.len(), 11, "{remaining:?}");
    let found = recall_as(&mem, "big", &word(7));
    assert_eq!(found, [format!("Big note {} about orchard trees", word(7))]);
    // Reindex gives the owner, now small, its rows back.
    mem.reindex(|_| {}).expect("reindex");
    assert_eq!(rows(&mem, "rowless_owners"), 0);
    assert_eq!(rows(&mem, "user_terms"), 151 + 11);
    assert!(mem.check(|_| {}).expect("check").is_ok());
    assert_eq!(big_ones(&mem), remaining);
}

/// An owner crossing the cap through single observes (the postings going
/// through the tail first) is marked once its postings reach the blocks; an
/// owner under the cap never is.
#[test]
fn single_writes_mark_an_owner_when_its_postings_reach_the_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("single.redb");
    let mem = open(&path);
    let under = ROW_CAP - 200;
    let batch: Vec<MemoryEntry> = (0..under)
        .map(|i| entry(Some("grower"), format!("Grower note {} about hazel", word(i))))
        .collect();
    mem.add_batch(batch).expect("add");
    assert_eq!(rows(&mem, "rowless_owners"), 0);
    assert_eq!(rows(&mem, "user_terms"), under);
    // One at a time, past the cap and a tail's worth beyond.
    for i in 0..800 {
        mem.add(entry(Some("grower"), format!("Grower single {} about hazel", word(100_000 + i))))
            .expect("add");
    }
    assert_eq!(rows(&mem, "rowless_owners"), 1);
    assert_eq!(rows(&mem, "user_terms"), 0);
    assert!(mem.check(|_| {}).expect("check").is_ok());
    let found = recall_as(&mem, "grower", &word(100_799));
    assert_eq!(found, [format!("Grower single {} about hazel", word(100_799))]);
}
