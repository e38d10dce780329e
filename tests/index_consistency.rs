//! Index consistency: random add / update / supersede / remove sequences, then every
//! index is compared with a brute-force derivation from the entries.

mod words_common;

use proptest::prelude::*;
use redb::ReadableDatabase;
use redb::{ReadableTable, ReadableTableMetadata};
use soulmem::storage::schema::SCHEMA_VERSION;
use soulmem::{Memory, MemoryEntry, MemoryType, Profile, RecallQuery, Visibility};

#[derive(Debug, Clone)]
enum Op {
    Add { layer: u8, domain: u8, user: u8, text: u8, importance: u8 },
    Update { pick: u8, text: u8, importance: u8, domain: u8 },
    Supersede { pick: u8 },
    Remove { pick: u8 },
}

const TEXTS: &[&str] = &[
    "User lives in Paris",
    "User lives in Lyon",
    "User works at Acme as a structural engineer",
    "User prefers tea over coffee",
    "User's favorite color is green",
    "User: I moved to Berlin last month\nAgent: Nice!",
    "Deploy with docker compose and postgres",
    "User is learning Rust and Python",
    "the the the user user",
    "User uses Neovim with Lua plugins",
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4, 0u8..3, 0u8..3, 0u8..10, 1u8..=10).prop_map(|(layer, domain, user, text, importance)| Op::Add { layer, domain, user, text, importance }),
        2 => (any::<u8>(), 0u8..10, 1u8..=10, 0u8..3).prop_map(|(pick, text, importance, domain)| Op::Update { pick, text, importance, domain }),
        1 => any::<u8>().prop_map(|pick| Op::Supersede { pick }),
        1 => any::<u8>().prop_map(|pick| Op::Remove { pick }),
    ]
}

fn run(profile: Profile, ops: Vec<Op>) {
    let mem = Memory::builder().profile(profile).open_in_memory().expect("open");
    let mut ids: Vec<String> = Vec::new();
    let layers = ["semantic", "episodic", "procedural", "journal"];
    let domains = ["default", "work", "home"];
    for op in ops {
        match op {
            Op::Add { layer, domain, user, text, importance } => {
                let mut e = MemoryEntry::new(MemoryType::Semantic, TEXTS[text as usize]);
                e.layer = layers[layer as usize].to_owned();
                if layer == 1 {
                    e.kind = MemoryType::Episodic;
                }
                e.domain = domains[domain as usize].to_owned();
                e.user_id = (user > 0).then(|| format!("u{user}"));
                e.importance = importance;
                e.entities = vec!["Paris".into(), "rust".into()];
                e.visibility = Visibility::Public;
                ids.push(mem.add(e).expect("add"));
            }
            Op::Update { pick, text, importance, domain } if !ids.is_empty() => {
                let id = &ids[pick as usize % ids.len()];
                let mut e = mem.get(id).expect("get").expect("present");
                e.content = TEXTS[text as usize].to_owned();
                e.importance = importance;
                e.domain = domains[domain as usize].to_owned();
                mem.update(e).expect("update");
            }
            Op::Supersede { pick } if !ids.is_empty() => {
                let id = &ids[pick as usize % ids.len()];
                let mut e = mem.get(id).expect("get").expect("present");
                e.superseded_by = Some("new".into());
                mem.update(e).expect("update");
            }
            Op::Remove { pick } if !ids.is_empty() => {
                let id = ids.remove(pick as usize % ids.len());
                assert!(mem.remove(&id).expect("remove"));
                assert!(mem.get(&id).expect("get").is_none());
            }
            _ => {}
        }
    }
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:#?}", report.problems);
    assert_eq!(report.entries, ids.len() as u64);
    assert_eq!(mem.count().expect("count"), ids.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn indexes_match_brute_force_default(ops in prop::collection::vec(op(), 1..60)) {
        run(Profile::Default, ops);
    }

    #[test]
    fn indexes_match_brute_force_reference(ops in prop::collection::vec(op(), 1..60)) {
        run(Profile::Reference, ops);
    }
}

#[test]
fn persists_across_reopen_and_rejects_foreign_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.redb");
    let id = {
        let mem = Memory::open(&path).expect("open");
        let mut e = MemoryEntry::new(MemoryType::Semantic, "User lives in Oslo");
        e.domain = "home".into();
        mem.add(e).expect("add")
    };
    let mem = Memory::open(&path).expect("reopen");
    let e = mem.get(&id).expect("get").expect("persisted");
    assert_eq!(e.content, "User lives in Oslo");
    assert_eq!(mem.domains("semantic").expect("domains").get("home"), Some(&1));
    assert!(mem.check(|_| {}).expect("check").is_ok());
    drop(mem);

    let junk = dir.path().join("junk.redb");
    std::fs::write(&junk, b"this is not a database at all, just some text").expect("write");
    let err = Memory::open(&junk).expect_err("junk must not open");
    assert!(matches!(err, soulmem::Error::Open { .. }), "{err}");
}

#[test]
fn bad_names_are_errors_not_panics() {
    let mem = Memory::open_in_memory().expect("open");
    let mut e = MemoryEntry::new(MemoryType::Semantic, "x");
    e.domain = "no spaces please".into();
    assert!(matches!(mem.add(e), Err(soulmem::Error::InvalidName { .. })));
    assert!(mem.layer("bad:name").is_err());
    let mut e = MemoryEntry::new(MemoryType::Semantic, "x");
    e.importance = 11;
    assert!(matches!(mem.add(e), Err(soulmem::Error::InvalidMemory(_))));
    assert_eq!(mem.count().expect("count"), 0);
}

#[test]
fn a_reader_keeps_its_snapshot_while_a_writer_commits() {
    let mem = std::sync::Arc::new(Memory::open_in_memory().expect("open"));
    mem.add(MemoryEntry::new(MemoryType::Semantic, "first")).expect("add");
    let snapshot = mem.snapshot().expect("snapshot");
    let m2 = mem.clone();
    std::thread::spawn(move || {
        m2.add_batch(
            (0..50).map(|i| MemoryEntry::new(MemoryType::Semantic, format!("fact {i}"))).collect(),
        )
        .expect("batch");
    })
    .join()
    .expect("writer");
    assert_eq!(snapshot.count().expect("count"), 1, "the snapshot must not see later commits");
    assert_eq!(mem.layer("semantic").expect("layer").count(None).expect("count"), 51);
}

/// A schema-2 store (same entry tables, one row per posting in `postings`, plain
/// document frequencies in `terms`) opens as schema 4: its indexes are rebuilt in
/// place and everything reads as before.
#[test]
fn schema_2_stores_are_upgraded_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v2.redb");
    let ids = {
        let mem = Memory::open(&path).expect("open");
        let mut ids = Vec::new();
        for t in TEXTS {
            let mut e = MemoryEntry::new(MemoryType::Semantic, *t);
            e.user_id = Some("ana".into());
            ids.push(mem.add(e).expect("add"));
        }
        ids
    };
    {
        // Rewrite the index tables into the schema-2 layout.
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let blocks: redb::TableDefinition<(&str, u64), &[u8]> =
                redb::TableDefinition::new("posting_blocks");
            txn.delete_table(blocks).expect("drop blocks");
            let mut p: redb::Table<(&str, u64), u64> =
                txn.open_table(redb::TableDefinition::new("postings")).expect("postings");
            p.insert(("user", 0), (9u64 << 32) | 2).expect("posting");
            let mut t: redb::Table<&str, u64> =
                txn.open_table(redb::TableDefinition::new("terms")).expect("terms");
            t.insert("user", 1u64).expect("term");
            let mut meta: redb::Table<&str, &[u8]> =
                txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
            meta.insert("schema_version", 2u32.to_le_bytes().as_slice()).expect("schema");
        }
        txn.commit().expect("commit");
    }
    let mem = Memory::open(&path).expect("upgraded");
    assert!(mem.check(|_| {}).expect("check").is_ok());
    for id in &ids {
        assert!(mem.get(id).expect("get").is_some());
    }
    let hits = mem.recall(&soulmem::RecallQuery::new("where does the user live")).expect("recall");
    assert!(hits.memories.iter().any(|m| m.content.contains("Paris")), "{:?}", hits.memories);
    drop(mem);
    // Reopening finds the current schema and touches nothing.
    let mem = Memory::open(&path).expect("reopen");
    assert!(mem.check(|_| {}).expect("check").is_ok());

    // Schema 1 has no upgrade path: a clear error, the file untouched.
    drop(mem);
    {
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let mut meta: redb::Table<&str, &[u8]> =
                txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
            meta.insert("schema_version", 1u32.to_le_bytes().as_slice()).expect("schema");
        }
        txn.commit().expect("commit");
    }
    let err = Memory::open(&path).expect_err("schema 1");
    assert!(err.to_string().contains("no upgrade path"), "{err}");
}

/// The schema version a store file records.
fn schema_of(path: &std::path::Path) -> u32 {
    let db = redb::Database::create(path).expect("db");
    let txn = db.begin_read().expect("txn");
    let meta: redb::ReadOnlyTable<&str, &[u8]> =
        txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
    let v = meta.get("schema_version").expect("get").expect("schema row");
    u32::from_le_bytes(v.value().try_into().expect("4 bytes"))
}

/// The compact record as schema 5 and older wrote it: no `last_accessed`.
#[derive(serde::Serialize)]
struct DocInfoV5 {
    id: String,
    layer: String,
    domain: String,
    kind: u8,
    user_id: Option<String>,
    importance: u8,
    created_at: i64,
    visibility: u8,
    superseded: bool,
    archived: bool,
    salience: f64,
    significance: f64,
    somatic: Option<(f64, f64)>,
    access: Vec<i64>,
    access_count: u32,
    doc_len: u32,
    scope: Vec<String>,
}

impl DocInfoV5 {
    /// The record as schema 5 stored it: one version byte, then postcard.
    fn encode(&self) -> Vec<u8> {
        postcard::to_extend(self, vec![1u8]).expect("encode")
    }
}

/// Rewrites every `docs` record in the schema-5 layout.
fn docs_as_schema_5(txn: &redb::WriteTransaction) {
    use redb::ReadableTable;
    let def: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("docs");
    let mut docs = txn.open_table(def).expect("docs");
    let rows: Vec<(u64, soulmem::storage::DocInfo)> = docs
        .range::<u64>(..)
        .expect("range")
        .map(|row| {
            let (k, v) = row.expect("row");
            (k.value(), soulmem::storage::decode(v.value(), "docinfo").expect("docinfo"))
        })
        .collect();
    for (docno, i) in rows {
        // Schema 5 rewrote the entry at every access too: its row held the same
        // access metadata as the record.
        let name = soulmem::storage::schema::entry_table_name(&i.layer, &i.domain).expect("name");
        let mut table =
            txn.open_table(soulmem::storage::schema::entry_table(&name)).expect("entry table");
        let row = table.get(docno).expect("get").map(|v| v.value().to_vec());
        let mut e: MemoryEntry =
            soulmem::storage::decode(&row.expect("entry row"), "entry").expect("entry");
        i.access_into(&mut e);
        let bytes = soulmem::storage::encode(&e).expect("encode");
        table.insert(docno, bytes.as_slice()).expect("insert");
        let old = DocInfoV5 {
            id: i.id,
            layer: i.layer,
            domain: i.domain,
            kind: i.kind,
            user_id: i.user_id,
            importance: i.importance,
            created_at: i.created_at,
            visibility: i.visibility,
            superseded: i.superseded,
            archived: i.archived,
            salience: i.salience,
            significance: i.significance,
            somatic: i.somatic,
            access: i.access,
            access_count: i.access_count,
            doc_len: i.doc_len,
            scope: i.scope,
        };
        docs.insert(docno, old.encode().as_slice()).expect("insert");
    }
}

/// The names of the tables in the store at `path`.
fn table_names(path: &std::path::Path) -> Vec<String> {
    let db = redb::Database::create(path).expect("db");
    let txn = db.begin_read().expect("txn");
    txn.list_tables().expect("tables").map(|h| redb::TableHandle::name(&h).to_owned()).collect()
}

/// Removes every postings row of the terms starting with `prefix` (tag terms,
/// which end with their prefix's `:`); there must be some.
fn strip_postings(txn: &redb::WriteTransaction, prefix: &str) {
    let mut blocks: redb::Table<(&str, u64), &[u8]> =
        txn.open_table(redb::TableDefinition::new("posting_blocks")).expect("blocks");
    let end = prefix.replace(':', ";");
    let removed = blocks
        .extract_from_if((prefix, 0u64)..(end.as_str(), 0u64), |_, _| true)
        .expect("tag rows")
        .count();
    assert!(removed > 0, "no postings of {prefix:?}");
}

/// Writes a store of `TEXTS` (with one superseded fact, one memory of another
/// domain, an archived, a core and a private memory, and a knowledge graph) as
/// an older schema laid it out: up to schema 16 no index of the scopes and no
/// bitmap of the unscoped memories, up to schema 15 no bitmaps of the layers
/// and of the important memories, up to schema 14 no bitmaps of withheld and
/// restricted memories, up to
/// schema 13 no index of the active graph edges, up to schema 12 each fact token's
/// count of facts in `fact_terms`, schema 10 had no rowless owners' table,
/// schema 9 no domain terms in the postings, schema 8 no superseded bitmap
/// either, schema 7 had no owner terms in the postings but a `users` index,
/// schema 6 no terms rows by owner either, schema 5 no last access time in the
/// compact records, schema 4 had no fact cards either, schema 3 no postings tail
/// either (everything in blocks). `prepare` runs on the store first, as the
/// current schema.
fn old_store(path: &std::path::Path, version: u32, prepare: impl FnOnce(&Memory)) {
    {
        let mem = Memory::open(path).expect("open");
        let entries: Vec<MemoryEntry> =
            TEXTS.iter().map(|t| MemoryEntry::new(MemoryType::Semantic, *t)).collect();
        mem.add_batch(entries).expect("add");
        assert!(mem.stats().expect("stats").index_rows["fact_cards"] > 0);
        let mut old_fact = MemoryEntry::new(MemoryType::Semantic, "User lives in Lisbon");
        old_fact.superseded_by = Some("newer".into());
        mem.add(old_fact).expect("add");
        let mut trip = MemoryEntry::new(MemoryType::Episodic, "The user lives in Porto in summer");
        trip.domain = "travel".into();
        // Two scoped memories (schema 17 indexes the scopes).
        trip.scope = vec!["travel:summer".into()];
        mem.add(trip).expect("add");
        // Withheld memories (their bitmap is schema 15's): an archived episode
        // and a core memory, which no recall returns.
        let mut archived = MemoryEntry::new(MemoryType::Episodic, "The user lives in Rome");
        archived.archived = true;
        mem.add(archived).expect("add");
        mem.add(MemoryEntry::new(MemoryType::Core, "The user lives in Berlin")).expect("add");
        // A private memory (the restricted bitmap is schema 15's too).
        let mut private = MemoryEntry::new(MemoryType::Episodic, "The user lives in Quito");
        private.visibility = soulmem::Visibility::Private;
        // The one memory this important (schema 16 keeps a bitmap of them).
        private.importance = 9;
        private.scope = vec!["work:remote".into()];
        mem.add(private).expect("add");
        // A knowledge graph (its edges' identity index is schema 14's).
        let opts = soulmem::write::observe::ObserveOptions::default();
        mem.observe_pair("I use Python and Docker at work every day", "Nice.", &opts)
            .expect("observe");
        assert!(mem.stats().expect("stats").graph_edges > 0);
        prepare(&mem);
        mem.reindex(|_| {}).expect("reindex"); // everything in blocks
    }
    let db = redb::Database::create(path).expect("db");
    let txn = db.begin_write().expect("txn");
    if version < 17 {
        let scopes: redb::TableDefinition<(&str, u64), ()> = redb::TableDefinition::new("scopes");
        assert!(txn.delete_table(scopes).expect("drop scopes"));
        let bitmap: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("unscoped");
        assert!(txn.delete_table(bitmap).expect("drop bitmap"));
    }
    if version < 16 {
        for name in [
            "episodic_layer",
            "semantic_layer",
            "importance_6_up",
            "importance_7_up",
            "importance_8_up",
            "importance_9_up",
            "importance_10_up",
        ] {
            let bitmap: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new(name);
            assert!(txn.delete_table(bitmap).expect("drop bitmap"), "{name}");
        }
    }
    if version == 15 {
        // As the first schema-15 build (95116a9) wrote it: no restricted bits.
        let bitmap: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("restricted");
        assert!(txn.delete_table(bitmap).expect("drop bitmap"));
        txn.open_table(bitmap).expect("empty restricted bitmap");
    }
    if version < 15 {
        for name in ["withheld", "restricted"] {
            let bitmap: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new(name);
            assert!(txn.delete_table(bitmap).expect("drop bitmap"), "{name}");
        }
    }
    if version < 14 {
        let active: redb::TableDefinition<(&str, &str, &str, u64), ()> =
            redb::TableDefinition::new("graph_active");
        assert!(txn.delete_table(active).expect("drop graph_active"));
    }
    if version < 13 {
        // Up to schema 12, each fact token's count of facts, by partition.
        let tokens: redb::Table<(&str, &str, u64), ()> =
            txn.open_table(redb::TableDefinition::new("fact_tokens")).expect("tokens");
        let mut counts: redb::Table<(&str, &str), u64> =
            txn.open_table(redb::TableDefinition::new("fact_terms")).expect("counts");
        for row in tokens.range::<(&str, &str, u64)>(..).expect("rows") {
            let (k, _) = row.expect("row");
            let (part, token, _) = k.value();
            let n = counts.get((part, token)).expect("get").map_or(0, |v| v.value());
            counts.insert((part, token), n + 1).expect("insert");
        }
        assert!(counts.len().expect("len") > 0);
    }
    if version < 11 {
        // Schema 11 added the rowless owners (none here).
        let rowless: redb::TableDefinition<&str, ()> = redb::TableDefinition::new("rowless_owners");
        assert!(txn.delete_table(rowless).expect("drop rowless owners"));
    }
    if version < 10 {
        // Schema 10 added the domain terms' postings (all in blocks here).
        strip_postings(&txn, soulmem::storage::keys::DOMAIN_TERM_PREFIX);
    }
    if version < 9 {
        // Schema 9 added the superseded bitmap.
        let bitmap: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("superseded");
        assert!(txn.delete_table(bitmap).expect("drop bitmap"));
    }
    if version < 8 {
        // Schema 8 added the owner terms' postings (all in blocks here).
        strip_postings(&txn, soulmem::storage::keys::OWNER_TERM_PREFIX);
    }
    if version < 8 {
        // Up to schema 7, the users index: the terms rows' keys.
        let terms: redb::Table<(&str, u64), &[u8]> =
            txn.open_table(redb::TableDefinition::new("user_terms")).expect("terms");
        let mut users: redb::Table<(&str, u64), ()> =
            txn.open_table(redb::TableDefinition::new("users")).expect("users");
        for row in terms.range::<(&str, u64)>(..).expect("rows") {
            let (k, _) = row.expect("row");
            users.insert(k.value(), ()).expect("insert");
        }
        assert!(users.len().expect("len") > 0);
    }
    if version < 7 {
        let terms: redb::TableDefinition<(&str, u64), &[u8]> =
            redb::TableDefinition::new("user_terms");
        assert!(txn.delete_table(terms).expect("drop user terms"));
    }
    if version < 6 {
        docs_as_schema_5(&txn);
    }
    if version < 5 {
        let cards: redb::TableDefinition<(&str, u64), &[u8]> =
            redb::TableDefinition::new("fact_cards");
        assert!(txn.delete_table(cards).expect("drop cards"));
        let mut meta: redb::Table<&str, &[u8]> =
            txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
        if version == 3 {
            let tail: redb::TableDefinition<u64, &[u8]> =
                redb::TableDefinition::new("posting_tail");
            txn.delete_table(tail).expect("drop tail");
            meta.remove("posting_tail_version").expect("version");
        }
    }
    let mut meta: redb::Table<&str, &[u8]> =
        txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
    meta.insert("schema_version", version.to_le_bytes().as_slice()).expect("schema");
    drop(meta);
    txn.commit().expect("commit");
}

/// Schema-3 to 16 stores open as schema 17: an empty postings tail that the next
/// small write starts, a card for every active fact, which dedup reads, compact
/// records that hold the access metadata, each memory's terms row, which a
/// `user_id`-filtered recall scores, its owner and domain terms' postings
/// (which `check` verifies with every other posting), and the superseded bitmap
/// (which `check` verifies against the records, and recall skips on), the
/// rowless owners' table (empty: no owner here is past the cap), and the active
/// graph edges by identity (which `check` verifies against the edges, and an
/// observe restating a relationship finds), the withheld and restricted
/// bitmaps (which `check` verifies against the records, and recall skips on),
/// the episodic and semantic layers' bitmaps (likewise, for a `types`
/// filter), and the memories' scopes with the unscoped ones' bitmap (likewise,
/// for a `scopes` filter).
#[test]
fn older_schemas_are_upgraded_on_open() {
    for version in 3u32..=16 {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(format!("v{version}.redb"));
        old_store(&path, version, |_| {});
        assert_eq!(schema_of(&path), version);
        {
            let mem = Memory::open(&path).expect("upgraded");
            assert!(mem.check(|_| {}).expect("check").is_ok(), "schema {version}");
            let stats = mem.stats().expect("stats");
            assert_eq!(stats.index_rows["graph_active"], stats.graph_edges, "schema {version}");
            let opts = soulmem::write::observe::ObserveOptions::default();
            mem.observe_pair("I use Python and Docker at work every day", "Nice.", &opts)
                .expect("observe");
            assert_eq!(mem.stats().expect("stats").graph_edges, stats.graph_edges);
            let facts = TEXTS.len() as u64 + 1; // and the fact of the observe above
            assert_eq!(mem.stats().expect("stats").index_rows["fact_cards"], facts);
            let hits =
                mem.recall(&soulmem::RecallQuery::new("where does the user live")).expect("recall");
            assert!(hits.memories.iter().any(|m| m.content.contains("Paris")), "{hits:?}");
            for gone in ["Lisbon", "Rome", "Berlin"] {
                assert!(!hits.memories.iter().any(|m| m.content.contains(gone)), "{hits:?}");
            }
            // The private memory: the soul itself sees it, a stranger does not.
            assert!(hits.memories.iter().any(|m| m.content.contains("Quito")), "{hits:?}");
            let mut q = soulmem::RecallQuery::new("where does the user live");
            q.requester_id = Some("stranger".into());
            let hits = mem.recall(&q).expect("recall");
            assert!(hits.memories.iter().any(|m| m.content.contains("Paris")), "{hits:?}");
            assert!(!hits.memories.iter().any(|m| m.content.contains("Quito")), "{hits:?}");
            let mut q = soulmem::RecallQuery::new("where does the user live");
            q.domain = Some("travel".into());
            let hits = mem.recall(&q).expect("recall");
            let found: Vec<&str> = hits.memories.iter().map(|m| m.content.as_str()).collect();
            assert_eq!(found, ["The user lives in Porto in summer"], "schema {version}");
            // The episodes alone (the archived one withheld), kept on their
            // layer's bits.
            let mut q = soulmem::RecallQuery::new("where does the user live");
            q.types = Some(vec!["episodic".into()]);
            let hits = mem.recall(&q).expect("recall");
            let mut found: Vec<&str> = hits.memories.iter().map(|m| m.content.as_str()).collect();
            found.sort_unstable();
            assert_eq!(
                found,
                ["The user lives in Porto in summer", "The user lives in Quito"],
                "schema {version}"
            );
            // The one memory of importance 9, walked on its bitmap.
            let mut q = soulmem::RecallQuery::new("where does the user live");
            q.min_importance = 9;
            let hits = mem.recall(&q).expect("recall");
            let found: Vec<&str> = hits.memories.iter().map(|m| m.content.as_str()).collect();
            assert_eq!(found, ["The user lives in Quito"], "schema {version}");
            // The summer trip's scope, and the unscoped memories; not Quito's.
            let mut q = soulmem::RecallQuery::new("where does the user live");
            q.scopes = Some(vec!["travel:*".into()]);
            let hits = mem.recall(&q).expect("recall");
            let found: Vec<&str> = hits.memories.iter().map(|m| m.content.as_str()).collect();
            assert!(found.contains(&"The user lives in Porto in summer"), "{found:?}");
            assert!(found.contains(&"User lives in Paris"), "{found:?}");
            assert!(!found.contains(&"The user lives in Quito"), "{found:?}");
            assert_eq!(mem.stats().expect("stats").index_rows["scopes"], 2, "schema {version}");
            let mut q = soulmem::RecallQuery::new("where does the user live");
            q.user_id = Some("ana".into());
            let hits = mem.recall(&q).expect("recall");
            assert!(hits.memories.iter().any(|m| m.content.contains("Paris")), "{hits:?}");
            assert_eq!(
                mem.stats().expect("stats").index_rows["user_terms"],
                mem.stats().expect("stats").memories
            );
            // An observe restating a stored fact finds it through its card (no new
            // fact); a new one is stored.
            let opts = soulmem::write::observe::ObserveOptions::default();
            let again = mem.observe_pair("I live in Paris", "Noted.", &opts).expect("observe");
            assert!(again.facts.is_empty(), "schema {version}: {:?}", again.facts);
            let new = mem.observe_pair("I live in Madrid", "Noted.", &opts).expect("observe");
            assert_eq!(new.facts.len(), 1, "schema {version}");
            mem.add(MemoryEntry::new(MemoryType::Semantic, "User lives in Oslo")).expect("add");
            assert!(mem.stats().expect("stats").index_rows["posting_tail"] > 0);
            assert!(mem.check(|_| {}).expect("check").is_ok());
        }
        assert_eq!(schema_of(&path), SCHEMA_VERSION);
        let names = table_names(&path);
        assert!(!names.iter().any(|n| n == "users"), "schema {version}: {names:?}");
        assert!(!names.iter().any(|n| n == "fact_terms"), "schema {version}: {names:?}");
        assert!(names.iter().any(|n| n == "rowless_owners"), "schema {version}: {names:?}");
    }
}

/// A schema-11 store holds a `user_terms` row for every memory, those in the
/// postings tail too; opened as schema 12 it keeps none for the tail's memories
/// (readers derive them from the tail rows), `check` finds it consistent, and a
/// `user_id`-filtered recall finds the memory in the tail.
#[test]
fn a_schema_11_store_drops_the_tail_memories_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v11.redb");
    let merged = dir.path().join("merged.redb");
    let owned = |text: &str| {
        let mut e = MemoryEntry::new(MemoryType::Semantic, text);
        e.user_id = Some("ana".into());
        e
    };
    let kayak = {
        let mem = Memory::open(&path).expect("open");
        mem.add_batch(TEXTS.iter().map(|t| owned(t)).collect()).expect("add");
        mem.reindex(|_| {}).expect("reindex"); // everything in blocks
        let id = mem.add(owned("Ana keeps a kayak by the fjord")).expect("add");
        let rows = mem.stats().expect("stats").index_rows;
        assert_eq!(rows["posting_tail"], 1);
        assert_eq!(rows["user_terms"], TEXTS.len() as u64);
        id
    };
    // The same store with the tail merged holds the tail memory's row: copied
    // into the first, it makes a schema-11 store.
    std::fs::copy(&path, &merged).expect("copy");
    Memory::open(&merged).expect("open").reindex(|_| {}).expect("reindex");
    let terms: redb::TableDefinition<(&str, u64), &[u8]> = redb::TableDefinition::new("user_terms");
    let all_rows: Vec<((String, u64), Vec<u8>)> = {
        let db = redb::Database::create(&merged).expect("db");
        let txn = db.begin_read().expect("txn");
        let table = txn.open_table(terms).expect("terms");
        table
            .range::<(&str, u64)>(..)
            .expect("rows")
            .map(|row| {
                let (k, v) = row.expect("row");
                let (user, docno) = k.value();
                ((user.to_owned(), docno), v.value().to_vec())
            })
            .collect()
    };
    {
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let tail: redb::TableDefinition<u64, &[u8]> =
                redb::TableDefinition::new("posting_tail");
            let tail = txn.open_table(tail).expect("tail");
            let in_tail: Vec<u64> =
                tail.range::<u64>(..).expect("rows").map(|r| r.expect("row").0.value()).collect();
            assert_eq!(in_tail.len(), 1);
            let mut table = txn.open_table(terms).expect("terms");
            for ((user, docno), row) in all_rows.iter().filter(|((_, d), _)| in_tail.contains(d)) {
                table.insert((user.as_str(), *docno), row.as_slice()).expect("insert");
            }
            assert_eq!(table.len().expect("len"), TEXTS.len() as u64 + 1);
            let mut meta: redb::Table<&str, &[u8]> =
                txn.open_table(redb::TableDefinition::new("meta")).expect("meta");
            meta.insert("schema_version", 11u32.to_le_bytes().as_slice()).expect("schema");
        }
        txn.commit().expect("commit");
    }
    let mem = Memory::open(&path).expect("upgraded");
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    let rows = mem.stats().expect("stats").index_rows;
    assert_eq!(rows["posting_tail"], 1);
    assert_eq!(rows["user_terms"], TEXTS.len() as u64, "the tail memory's row is gone");
    let mut q = soulmem::RecallQuery::new("kayak fjord");
    q.user_id = Some("ana".into());
    let hits = mem.recall(&q).expect("recall");
    assert_eq!(hits.memories.first().map(|m| m.id.as_str()), Some(kayak.as_str()));
    drop(mem);
    assert_eq!(schema_of(&path), SCHEMA_VERSION);
}

/// A schema-5 store's access metadata survives the upgrade exactly: counts,
/// histories and last access times, including a last access time that is not the
/// last of the history (as a restored soul may have).
#[test]
fn a_schema_5_store_keeps_its_access_metadata_on_upgrade() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v5.redb");
    let before = std::cell::RefCell::new(Vec::new());
    old_store(&path, 5, |mem| {
        let t0 = soulmem::model::time::parse_timestamp("2025-01-02T03:04:05").expect("time");
        let mut restored = MemoryEntry::new(MemoryType::Episodic, "User restored this memory");
        restored.access_count = 7;
        restored.last_accessed = Some(t0);
        mem.add(restored).expect("add");
        for q in ["where does the user live", "what does the user prefer"] {
            mem.recall(&soulmem::RecallQuery::new(q)).expect("recall");
        }
        mem.flush_accesses().expect("flush");
        *before.borrow_mut() = all_access(mem);
    });
    let before = before.into_inner();
    assert!(before.iter().any(|a| a.1 > 0 && a.2.is_some()), "some memory was accessed");
    assert!(before.iter().any(|a| a.1 == 7 && a.2.is_some() && a.3.is_empty()), "{before:?}");
    let mem = Memory::open(&path).expect("upgraded");
    assert_eq!(mem.stats().expect("stats").memories as usize, before.len());
    assert_eq!(all_access(&mem), before);
    assert!(mem.check(|_| {}).expect("check").is_ok());
}

/// A schema-5 record naming a table that does not exist (a damaged store) does
/// not stop the upgrade, nor does the upgrade create that table: the store opens,
/// and `check` reports the record.
#[test]
fn a_damaged_record_does_not_stop_the_upgrade() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v5.redb");
    old_store(&path, 5, |_| {});
    {
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let def: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("docs");
            let mut docs = txn.open_table(def).expect("docs");
            for (docno, layer) in [(900_000u64, "ghost"), (900_001, "not a name!")] {
                let old = DocInfoV5 {
                    id: format!("damaged{docno}"),
                    layer: layer.into(),
                    domain: "default".into(),
                    kind: 0,
                    user_id: None,
                    importance: 5,
                    created_at: 0,
                    visibility: 0,
                    superseded: false,
                    archived: false,
                    salience: 0.5,
                    significance: 0.0,
                    somatic: None,
                    access: Vec::new(),
                    access_count: 0,
                    doc_len: 1,
                    scope: Vec::new(),
                };
                docs.insert(docno, old.encode().as_slice()).expect("insert");
            }
        }
        txn.commit().expect("commit");
    }
    let mem = Memory::open(&path).expect("upgraded despite the damage");
    assert!(!mem.check(|_| {}).expect("check").is_ok(), "the damage is reported");
    drop(mem);
    assert_eq!(schema_of(&path), SCHEMA_VERSION);
    let names = table_names(&path);
    assert!(!names.iter().any(|n| n.contains("ghost")), "{names:?}");
}

/// `(id, access count, last access, history)` of every memory, by id.
type Access = (String, u32, Option<soulmem::model::Timestamp>, Vec<soulmem::model::Timestamp>);

fn all_access(mem: &Memory) -> Vec<Access> {
    let mut out: Vec<Access> = ["semantic", "episodic", "core"]
        .into_iter()
        .flat_map(|l| mem.layer(l).expect("layer").entries(None).expect("entries"))
        .map(|e| (e.id, e.access_count, e.last_accessed, e.access_timestamps))
        .collect();
    out.sort();
    out
}

/// A fact whose content changes without changing any of its index terms (case,
/// punctuation) still gets its card rewritten: dedup compares the new text.
#[test]
fn a_fact_card_follows_content_that_keeps_its_terms() {
    let mem = Memory::open_in_memory().expect("open");
    let id = mem.add(MemoryEntry::new(MemoryType::Semantic, "User lives in Paris")).expect("add");
    let mut e = mem.get(&id).expect("get").expect("present");
    e.content = "User lives in PARIS.".into();
    mem.update(e).expect("update");
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:#?}", report.problems);
    // Superseding it drops the card (no active fact left to compare with).
    let mut e = mem.get(&id).expect("get").expect("present");
    e.superseded_by = Some("new".into());
    mem.update(e).expect("update");
    assert_eq!(mem.stats().expect("stats").index_rows["fact_cards"], 0);
    assert!(mem.check(|_| {}).expect("check").is_ok());
}

/// An update that changes one field at a time (owner, importance, entities,
/// layer, then text) rewrites exactly the rows that field is part of: after each,
/// every index matches the entries, and the owner's filter finds the memory.
#[test]
fn one_field_updates_keep_every_index_exact() {
    let mem = Memory::open_in_memory().expect("open");
    let mut e =
        MemoryEntry::new(MemoryType::Semantic, "User works at Acme as a structural engineer");
    e.user_id = Some("u1".into());
    e.entities = vec!["Acme".into()];
    let id = mem.add(e).expect("add");
    let clean = |step: &str| {
        let report = mem.check(|_| {}).expect("check");
        assert!(report.is_ok(), "after {step}: {:?}", report.problems);
    };
    type Change = fn(&mut MemoryEntry);
    let steps: [(&str, Change); 8] = [
        ("owner", |e| e.user_id = Some("u2".into())),
        ("importance", |e| e.importance = 9),
        ("entities", |e| e.entities = vec!["Globex".into()]),
        ("layer", |e| e.layer = "projects".into()),
        ("text", |e| e.content = "User works at Globex as a nurse".into()),
        ("scope", |e| e.scope = vec!["org:a".into(), "org:a".into()]),
        ("another scope", |e| e.scope = vec!["org:b:*".into()]),
        ("no scope", |e| e.scope.clear()),
    ];
    for (step, change) in steps {
        let mut e = mem.get(&id).expect("get").expect("stored");
        change(&mut e);
        mem.update(e).expect("update");
        clean(step);
    }
    let mut q = soulmem::RecallQuery::new("Globex nurse");
    q.user_id = Some("u2".into());
    let found: Vec<String> =
        mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.id).collect();
    assert_eq!(found, vec![id]);
}

/// A term's postings added over several transactions can leave a block whose
/// bound, coarsened to one pair past four, is above the term's own (kept exact
/// over every posting as it is added): both bound every posting, so `check`
/// accepts it and recall finds the same memories. Before, `check` compared
/// the two bounds and reported such a store (any observed store of ~10k
/// memories) as needing a reindex.
#[test]
fn a_block_bound_above_its_terms_checks_clean() {
    let mut next = 0u64;
    // A memory holding "zeta" `times` times among `words` words.
    let mut doc = |times: usize, words: usize| -> MemoryEntry {
        let mut w: Vec<String> = vec!["zeta".to_owned(); times];
        for _ in times..words {
            w.push(words_common::word("qx", next));
            next += 1;
        }
        MemoryEntry::new(MemoryType::Semantic, w.join(" "))
    };
    // Each batch is over the postings tail's 256 memories (as this store is
    // opened), so each reaches the blocks in its own transaction.
    let padded = |mut batch: Vec<MemoryEntry>, doc: &mut dyn FnMut(usize, usize) -> MemoryEntry| {
        while batch.len() < 300 {
            batch.push(doc(0, 4));
        }
        batch
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bounds.redb");
    let mem = Memory::builder().postings_tail_docs(256).open(&path).expect("open");
    // A first block of "zeta" (full at 128 postings) with one short memory
    // holding it three times: the term's bound.
    let mut first: Vec<MemoryEntry> = (0..140).map(|_| doc(1, 12)).collect();
    first.push(doc(3, 9));
    mem.add_batch(padded(first, &mut doc)).expect("add");
    // The next block gets (1, 10), (4, 40), (5, 50), then (2, 20), (3, 30):
    // five pairs of its own, coarsened to (5, 10), which no posting reaches.
    let second = vec![doc(1, 10), doc(4, 40), doc(5, 50)];
    mem.add_batch(padded(second, &mut doc)).expect("add");
    let third = vec![doc(2, 20), doc(3, 30)];
    mem.add_batch(padded(third, &mut doc)).expect("add");
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut q = soulmem::RecallQuery::new("zeta");
    q.limit = 3;
    let hits = mem.recall(&q).expect("recall");
    assert!(hits.memories.iter().all(|m| m.content.contains("zeta")), "{hits:?}");
    assert_eq!(hits.memories.len(), 3);
    drop(mem);
    // A term bound that some posting exceeds is still reported.
    {
        use soulmem::storage::postings::{INFO, Impacts, TermInfo};
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let mut blocks: redb::Table<(&str, u64), &[u8]> =
                txn.open_table(redb::TableDefinition::new("posting_blocks")).expect("blocks");
            let old =
                TermInfo::decode(blocks.get(("zeta", INFO)).expect("get").expect("info").value())
                    .expect("decode");
            let mut impacts = Impacts::default();
            impacts.add(2, 40);
            let low = TermInfo { impacts, ..old };
            blocks.insert(("zeta", INFO), low.encode().as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
    }
    let mem = Memory::open(&path).expect("open");
    let report = mem.check(|_| {}).expect("check");
    assert!(
        report.problems.iter().any(|p| p.contains("\"zeta\"'s bound is below one of its postings")),
        "{:?}",
        report.problems
    );
}

/// `check` compares the stored postings with the entries one term at a time,
/// blocks then tail, without holding them: a store with blocks and a tail
/// (terms in both, and terms only in the tail sorting between the blocks'
/// terms) checks clean; a block gone, a block moved under a term no memory
/// holds, and a term row with another frequency are each reported.
#[test]
fn check_reports_postings_gone_stray_and_miscounted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("postings.redb");
    let mem = Memory::builder().postings_tail_docs(256).open(&path).expect("open");
    // Over the tail's 256 memories: these reach the blocks.
    let batch: Vec<MemoryEntry> = (0..300)
        .map(|i| {
            let text = format!("alpha gamma {}", words_common::word("qx", i));
            MemoryEntry::new(MemoryType::Semantic, text)
        })
        .collect();
    mem.add_batch(batch).expect("add");
    // These stay in the tail: "alpha" in both, "beta" only in the tail and
    // between "alpha" and "gamma".
    for i in 0..5 {
        let text = format!("alpha beta {}", words_common::word("zz", i));
        mem.add(MemoryEntry::new(MemoryType::Semantic, text)).expect("add");
    }
    assert!(mem.stats().expect("stats").index_rows["posting_tail"] > 0);
    let mut seen = Vec::new();
    let report = mem.check(|n| seen.push(n)).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    // Progress: the entries read, then the index rows compared, never back.
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.contains(&report.entries), "{seen:?}");
    assert_eq!(seen.last(), Some(&(report.entries + report.rows)), "{seen:?}");
    assert!(seen.iter().filter(|&&n| n > report.entries).count() > 5, "{seen:?}");
    drop(mem);
    let (gone, moved);
    {
        use soulmem::storage::postings::{INFO, TermInfo, decode_block};
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        {
            let mut blocks: redb::Table<(&str, u64), &[u8]> =
                txn.open_table(redb::TableDefinition::new("posting_blocks")).expect("blocks");
            let first_of = |blocks: &redb::Table<(&str, u64), &[u8]>, term: &str| {
                let (k, v) = blocks
                    .range((term, 0)..(term, INFO))
                    .expect("range")
                    .next()
                    .expect("a block")
                    .expect("row");
                (k.value().1, v.value().to_vec())
            };
            // "gamma"'s first block gone (its 128 postings missing).
            let (first, value) = first_of(&blocks, "gamma");
            gone = decode_block(first, &value).expect("block").len();
            blocks.remove(("gamma", first)).expect("remove");
            // "alpha"'s first block copied under a term no memory holds.
            let (first, value) = first_of(&blocks, "alpha");
            moved = decode_block(first, &value).expect("block").len();
            blocks.insert(("omega", first), value.as_slice()).expect("insert");
            // One of the "qx…" words counted twice.
            let word = words_common::word("qx", 7);
            let info = TermInfo::decode(
                blocks.get((word.as_str(), INFO)).expect("get").expect("info").value(),
            )
            .expect("decode");
            let twice = TermInfo { df: info.df + 1, ..info };
            blocks.insert((word.as_str(), INFO), twice.encode().as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
    }
    let mem = Memory::open(&path).expect("open");
    let report = mem.check(|_| {}).expect("check");
    let p = &report.problems;
    let count = |start: &str| p.iter().filter(|l| l.starts_with(start)).count();
    assert_eq!(count("postings: missing (\"gamma\", "), 20, "{p:?}");
    assert_eq!(count("postings: stray (\"omega\", "), 20, "{p:?}");
    // 20 of each kind shown, the others counted.
    assert!(gone > 20 && moved > 20, "{gone} {moved}");
    let hidden = format!("postings: {} more mismatches not shown", gone + moved - 40);
    assert!(p.contains(&hidden), "{p:?}");
    assert!(p.contains(&"terms: \"qxh\" is 2, expected 1".to_owned()), "{p:?}");
    assert_eq!(p.len(), 20 + 20 + 1 + 1, "nothing else: {p:?}");
    // Reindexing mends it.
    mem.reindex(|_| {}).expect("reindex");
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// `check` verifies the graph's indexes against its edges: an active edge
/// missing from the identity index and an adjacency row of no edge are each
/// reported, and `reindex` rewrites both from the edges (after which a
/// restated relationship is found again, not stored twice).
#[test]
fn check_reports_graph_index_rows_missing_and_stray() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("graph.redb");
    let opts = soulmem::write::observe::ObserveOptions::default();
    let said = "I use Python and Docker at work every day";
    let edges = {
        let mem = Memory::open(&path).expect("open");
        mem.observe_pair(said, "Nice.", &opts).expect("observe");
        assert!(mem.check(|_| {}).expect("check").is_ok());
        mem.stats().expect("stats").graph_edges
    };
    assert!(edges > 0);
    let gone = {
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        let gone = {
            let mut active: redb::Table<(&str, &str, &str, u64), ()> =
                txn.open_table(redb::TableDefinition::new("graph_active")).expect("active");
            let (k, _) = active.pop_first().expect("pop").expect("an active edge");
            let (s, t, r, seq) = k.value();
            let gone = format!("{:?}", (s.to_owned(), t.to_owned(), r.to_owned(), seq));
            drop(k);
            let mut adj: redb::Table<(&str, u64), ()> =
                txn.open_table(redb::TableDefinition::new("graph_adj")).expect("adj");
            adj.insert(("nobody", 999_999u64), ()).expect("stray");
            gone
        };
        txn.commit().expect("commit");
        gone
    };
    let mem = Memory::open(&path).expect("open");
    let problems = mem.check(|_| {}).expect("check").problems;
    assert!(problems.contains(&format!("graph_active: missing row {gone}")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("graph_adj: stray row (\"nobody\", 999999)")));
    assert_eq!(problems.len(), 2, "{problems:?}");
    mem.reindex(|_| {}).expect("reindex");
    assert!(mem.check(|_| {}).expect("check").is_ok());
    mem.observe_pair(said, "Nice.", &opts).expect("observe");
    assert_eq!(mem.stats().expect("stats").graph_edges, edges);
}

/// A graph edge that cannot be decoded stops neither the upgrade to schema 15
/// nor a `reindex`: it stays in `graph_edges`, unindexed, `check` reports it,
/// `reindex` says it left it, and the other edges are indexed.
#[test]
fn a_damaged_graph_edge_is_reported_and_left_unindexed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v13.redb");
    old_store(&path, 13, |mem| {
        let opts = soulmem::write::observe::ObserveOptions::default();
        for text in [
            "I am so excited today, Priya reports to Tomas at work every day now!",
            "I am really happy that Priya reports to Ana at work every day now!",
        ] {
            mem.observe_pair(text, "Noted.", &opts).expect("observe");
        }
    });
    let damaged = {
        let db = redb::Database::create(&path).expect("db");
        let txn = db.begin_write().expect("txn");
        let seq = {
            let mut edges: redb::Table<u64, &[u8]> =
                txn.open_table(redb::TableDefinition::new("graph_edges")).expect("edges");
            let mut to_tomas = None;
            for row in edges.iter().expect("edges") {
                let (seq, bytes) = row.expect("row");
                let edge: soulmem::storage::graph::EdgeRecord =
                    soulmem::storage::decode(bytes.value(), "edge").expect("an edge");
                if edge.target == "Tomas" {
                    to_tomas = Some(seq.value());
                }
            }
            let seq = to_tomas.expect("an edge to Tomas");
            edges.insert(seq, [0xffu8, 0xff, 0xff].as_slice()).expect("damage");
            seq
        };
        txn.commit().expect("commit");
        seq
    };
    let mem = Memory::open(&path).expect("upgraded despite the damaged edge");
    let stats = mem.stats().expect("stats");
    assert_eq!(stats.index_rows["graph_active"], stats.graph_edges - 1);
    // Recall follows the graph's indexes, so it never reads the damaged edge: a
    // query naming its source is answered, through the source's other edge.
    let got = mem.recall(&RecallQuery::new("Priya")).expect("recall");
    assert!(!got.memories.is_empty());
    assert_eq!(got.trace.graph, vec![("priya".to_owned(), vec!["ana".to_owned()])]);
    let problems = mem.check(|_| {}).expect("check").problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with(&format!("graph_edges: edge {damaged}:")), "{problems:?}");
    let report = mem.reindex(|_| {}).expect("reindex");
    assert!(
        report.problems.iter().any(|p| p.starts_with(&format!("graph edge {damaged} left"))),
        "{:?}",
        report.problems
    );
    assert_eq!(mem.stats().expect("stats").graph_edges, stats.graph_edges);
    drop(mem);
    assert_eq!(schema_of(&path), SCHEMA_VERSION);
}
