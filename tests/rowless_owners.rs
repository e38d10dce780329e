//! An owner past `storage::doc_terms::ROW_CAP` memories loses its `user_terms`
//! rows (never read for an owner that large) and is marked rowless: its later
//! memories get none, its `user_id`-filtered recalls search the postings (also
//! after it shrinks back under the listed-search bound), `check` agrees, and
//! `reindex` decides afresh.

mod words_common;

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
    words_common::word("zq", i)
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
        // A later memory of the marked owner gets no row; the small owner's gets
        // one when the postings tail holding it merges (below).
        mem.add(entry(Some("big"), "Big note about a walnut grove".into())).expect("add");
        mem.add(entry(Some("small"), "Small note about a walnut grove".into())).expect("add");
        assert_eq!(rows(&mem, "posting_tail"), 2);
        assert_eq!(rows(&mem, "user_terms"), 150);
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
        assert_eq!(rows(&mem, "posting_tail"), 0);
        assert_eq!(rows(&mem, "user_terms"), 151);
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

/// Gives `owner` back its terms rows (as a schema-10 writer wrote them) in the
/// closed store at `path`, unmarks it, and stamps the store `version`.
fn as_written_before_the_cap(
    path: &std::path::Path,
    owner: &str,
    entries: &[MemoryEntry],
    version: u32,
) {
    use redb::{ReadableDatabase, ReadableTable, TableDefinition};
    let db = redb::Database::create(path).expect("db");
    let txn = db.begin_write().expect("txn");
    {
        let ids: redb::Table<&str, u64> = txn.open_table(TableDefinition::new("ids")).expect("ids");
        let mut rows: redb::Table<(&str, u64), &[u8]> =
            txn.open_table(TableDefinition::new("user_terms")).expect("rows");
        for e in entries {
            let docno = ids.get(e.id.as_str()).expect("get").expect("stored").value();
            let keys = soulmem::storage::keys::index_keys(e, Profile::Default, None);
            let row = soulmem::storage::doc_terms::encode(&keys);
            rows.insert((owner, docno), row.as_slice()).expect("insert");
        }
        let mut marks: redb::Table<&str, ()> =
            txn.open_table(TableDefinition::new("rowless_owners")).expect("marks");
        marks.remove(owner).expect("unmark");
        let mut meta: redb::Table<&str, &[u8]> =
            txn.open_table(TableDefinition::new("meta")).expect("meta");
        meta.insert("schema_version", version.to_le_bytes().as_slice()).expect("schema");
    }
    if version < 11 {
        let marks: TableDefinition<&str, ()> = TableDefinition::new("rowless_owners");
        assert!(txn.delete_table(marks).expect("drop marks"));
    }
    txn.commit().expect("commit");
    let read = db.begin_read().expect("read");
    let meta: redb::ReadOnlyTable<&str, &[u8]> =
        read.open_table(TableDefinition::new("meta")).expect("meta");
    let v = meta.get("schema_version").expect("get").expect("row");
    assert_eq!(v.value(), version.to_le_bytes());
}

/// A schema-10 store (every owner with rows) drops a large owner's rows and
/// marks it when it is opened, so no later write has to.
#[test]
fn the_upgrade_drops_a_large_owners_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v10.redb");
    let big: Vec<MemoryEntry>;
    {
        let mem = open(&path);
        let mut batch: Vec<MemoryEntry> = (0..ROW_CAP + 50)
            .map(|i| entry(Some("big"), format!("Big note {} about orchard trees", word(i))))
            .collect();
        batch.extend(
            (0..100).map(|i| entry(Some("small"), format!("Small note {}", word(10_000 + i)))),
        );
        let ids = mem.add_batch(batch).expect("add");
        assert_eq!(rows(&mem, "rowless_owners"), 1);
        big = ids
            .iter()
            .take(usize::try_from(ROW_CAP + 50).expect("fits"))
            .map(|id| mem.get(id).expect("get").expect("stored"))
            .collect();
    }
    // The rows rebuilt here are the writer's own: with them and no mark, the
    // current schema checks clean.
    as_written_before_the_cap(&path, "big", &big, 11);
    {
        let mem = open(&path);
        assert_eq!(rows(&mem, "user_terms"), ROW_CAP + 150);
        assert_eq!(rows(&mem, "rowless_owners"), 0);
        assert!(mem.check(|_| {}).expect("check").is_ok());
    }
    as_written_before_the_cap(&path, "big", &big, 10);
    let mem = open(&path);
    assert_eq!(rows(&mem, "user_terms"), 100);
    assert_eq!(rows(&mem, "rowless_owners"), 1);
    assert!(mem.check(|_| {}).expect("check").is_ok());
    let found = recall_as(&mem, "big", &word(7));
    assert_eq!(found, [format!("Big note {} about orchard trees", word(7))]);
}
