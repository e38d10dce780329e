//! Restoring the reference's samples into a store and dumping them back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod formats_common;

use formats_common::*;
use redb::ReadableTable;
use serde_json::Value;
use soulmem::formats::{self, MemoryDump, WriteOptions, read_dir, read_soul, write_soul};
use soulmem::{Memory, MemoryEntry, MemoryType};

fn rich_dump() -> MemoryDump {
    MemoryDump::from_json_slice(&sample_bytes("rich.memory.json"), "rich").unwrap()
}

fn restored(doc: &soulmem::SoulDocument) -> Memory {
    let mem = Memory::open_in_memory().unwrap();
    let rep = mem.import_document(doc, false).unwrap();
    assert_eq!(rep.entries as usize, doc.memory.entry_count());
    assert_eq!(rep.relayered, 0);
    mem
}

#[test]
fn rich_memory_json_is_json_equal_after_restore_and_dump() {
    let raw = sample_bytes("rich.memory.json");
    let input: Value = serde_json::from_slice(&raw).unwrap();
    let mem = Memory::open_in_memory().unwrap();
    let rep = mem.import_dump(&rich_dump(), false, &mut |_| {}).unwrap();
    assert_eq!(rep.entries, 164);
    assert_eq!(rep.layers["projects"], 3);
    assert_eq!(
        (rep.graph_nodes, rep.graph_edges, rep.general_events, rep.archives),
        (32, 15, 2, 2)
    );
    let out = mem.export_dump(&mut |_| {}).unwrap();
    assert_eq!(serde_json::to_value(&out).unwrap(), input);
    // Byte-identical too (the sample adds a final newline).
    assert!(out.to_json().unwrap() == raw.strip_suffix(b"\n").unwrap_or(&raw));
    // The store is consistent and counts what it holds.
    assert!(mem.check(|_| {}).unwrap().is_ok());
    let st = mem.stats().unwrap();
    assert_eq!((st.memories, st.graph_nodes, st.graph_edges), (164, 32, 15));
}

#[test]
fn sentinels_access_history_and_custom_layers_survive() {
    let dump = rich_dump();
    let mem = Memory::open_in_memory().unwrap();
    mem.import_dump(&dump, false, &mut |_| {}).unwrap();
    let sentinels: Vec<&MemoryEntry> = dump
        .semantic
        .iter()
        .filter(|e| matches!(e.superseded_by.as_deref(), Some("new" | "raw-text-contradiction")))
        .collect();
    assert!(!sentinels.is_empty());
    for e in sentinels {
        assert_eq!(mem.get(&e.id).unwrap().as_ref(), Some(e));
    }
    let projects = mem.layer("projects").unwrap().entries(None).unwrap();
    assert_eq!(projects, dump.custom_layers["projects"]);
    assert!(projects.iter().all(|e| e.kind != MemoryType::Core && e.layer == "projects"));
    // Superseded facts are stored but not active.
    let all = mem.facts(true).unwrap();
    let active = mem.facts(false).unwrap();
    assert_eq!(all.len(), dump.semantic.len());
    assert!(active.len() < all.len());
}

#[test]
fn soul_archives_round_trip_through_a_store() {
    let opts = WriteOptions {
        exported: Some(soulmem::model::time::parse_timestamp("2026-03-09T19:36:41").unwrap()),
        ..Default::default()
    };
    for name in ["minimal.soul", "rich.soul", "legacy-0.3.soul"] {
        let doc = read_soul(&sample_bytes(name), None).unwrap();
        let mem = restored(&doc);
        let out = mem.export_document().unwrap();
        assert_same_doc(&doc, &out);
        assert_eq!(out.manifest, doc.manifest, "{name}: manifest carried");
        assert_eq!(out.memory_settings().unwrap(), doc.memory_settings().unwrap());
        let again = read_soul(&write_soul(&out, &opts).unwrap(), None).unwrap();
        assert_same_doc(&doc, &again);
    }
}

#[test]
fn rich_dir_round_trips_through_a_store() {
    let doc = read_dir(&samples().join("rich-dir")).unwrap();
    let mem = restored(&doc);
    let out = mem.export_document().unwrap();
    assert_same_doc(&doc, &out);
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("out");
    formats::write_dir(&p, &out).unwrap();
    assert_same_doc(&doc, &read_dir(&p).unwrap());
    // Domains are kept per entry.
    let mut want = std::collections::BTreeMap::new();
    for e in &doc.memory.custom_layers["projects"] {
        *want.entry(e.domain.clone()).or_insert(0u64) += 1;
    }
    assert_eq!(mem.domains("projects").unwrap(), want);
}

#[test]
fn legacy_entries_get_layer_type_and_default_domain() {
    let doc = read_soul(&sample_bytes("legacy-0.3.soul"), None).unwrap();
    let mem = restored(&doc);
    let st = mem.stats().unwrap();
    assert_eq!(
        st.layers.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["episodic", "procedural", "semantic"]
    );
    for (layer, domains) in &st.layers {
        assert_eq!(domains.keys().collect::<Vec<_>>(), vec!["default"], "{layer}");
        for e in mem.layer(layer).unwrap().entries(None).unwrap() {
            assert_eq!(e.kind.as_str(), layer);
        }
    }
}

fn busy_store() -> (Memory, MemoryDump) {
    let mem = Memory::open_in_memory().unwrap();
    mem.import_document(&read_soul(&sample_bytes("minimal.soul"), None).unwrap(), false).unwrap();
    mem.add(MemoryEntry::new(MemoryType::Semantic, "User likes green tea")).unwrap();
    mem.remember(&soulmem::Remember::new("journal", "walked along the river")).unwrap();
    let before = mem.export_dump(&mut |_| {}).unwrap();
    (mem, before)
}

#[test]
fn restore_into_a_non_empty_store_needs_replace() {
    let (mem, before) = busy_store();
    let doc = read_soul(&sample_bytes("rich.soul"), None).unwrap();
    let err = mem.import_document(&doc, false).unwrap_err();
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(mem.export_dump(&mut |_| {}).unwrap(), before);

    let rep = mem.import_document(&doc, true).unwrap();
    assert_eq!(rep.replaced, 2);
    assert_same_doc(&doc, &mem.export_document().unwrap());
    assert!(mem.layer("journal").unwrap().entries(None).unwrap().is_empty());
    assert!(mem.check(|_| {}).unwrap().is_ok());
}

#[test]
fn bad_inputs_write_nothing() {
    let (mem, before) = busy_store();
    let doc = read_soul(&sample_bytes("rich.soul"), None).unwrap();

    // Truncated archive and wrong password fail while reading.
    let raw = sample_bytes("rich.soul");
    assert!(read_soul(&raw[..raw.len() / 2], None).is_err());
    let enc = samples().join("rich-encrypted.soul");
    assert!(formats::read_soul_file(&enc, Some("wrong password")).is_err());

    // Duplicate ids inside a layer are refused by the reader.
    let mut v: Value = serde_json::from_slice(&sample_bytes("rich.memory.json")).unwrap();
    let first = v["semantic"][0].clone();
    v["semantic"].as_array_mut().unwrap().push(first);
    assert!(MemoryDump::from_value(v, "dup").is_err());

    // The same id in two layers: the store refuses it, naming both entries.
    let mut dup = doc.clone();
    let mut e = dup.memory.semantic[0].clone();
    e.kind = MemoryType::Procedural;
    e.layer = "procedural".into();
    dup.memory.procedural.push(e);
    let err = mem.import_document(&dup, true).unwrap_err().to_string();
    assert!(err.contains("procedural[59]") && err.contains("semantic[0]"), "{err}");

    // A domain soulmem cannot name a table after.
    let mut bad = doc.clone();
    bad.memory.social[1].domain = "work/../x".into();
    let err = mem.import_document(&bad, true).unwrap_err().to_string();
    assert!(err.contains("social[1]") && err.contains("domain"), "{err}");

    // A custom layer with a bad name.
    let mut bad = doc.clone();
    let entries = bad.memory.custom_layers.shift_remove("projects").unwrap();
    bad.memory.custom_layers.insert("my projects".into(), entries);
    let err = mem.import_document(&bad, true).unwrap_err().to_string();
    assert!(err.contains("my projects"), "{err}");

    assert_eq!(mem.export_dump(&mut |_| {}).unwrap(), before);
    assert!(mem.check(|_| {}).unwrap().is_ok());
}

#[test]
fn check_finds_injected_corruption_and_reindex_repairs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s.redb");
    {
        let mem = Memory::open(&path).unwrap();
        mem.import_dump(&rich_dump(), false, &mut |_| {}).unwrap();
        assert!(mem.check(|_| {}).unwrap().is_ok());
        // A small import stays in the postings tail; a reindex writes the blocks.
        mem.reindex(|_| {}).unwrap();
        assert_eq!(mem.stats().unwrap().index_rows["posting_tail"], 0);
    }
    {
        // A stray, malformed postings block and a missing term row.
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut p: redb::Table<(&str, u64), &[u8]> =
                txn.open_table(redb::TableDefinition::new("posting_blocks")).unwrap();
            p.insert(("zzzstray", 999_999), [5u8, 0].as_slice()).unwrap();
            // The first term's info row (keyed after its blocks by u64::MAX).
            let first = p.first().unwrap().map(|(k, _)| k.value().0.to_owned()).unwrap();
            assert!(p.remove((first.as_str(), u64::MAX)).unwrap().is_some());
            // A fact card gone, and another stating other content.
            let mut c: redb::Table<(&str, u64), &[u8]> =
                txn.open_table(redb::TableDefinition::new("fact_cards")).unwrap();
            let (gone, kept) = {
                let mut it = c.iter().unwrap();
                let a = it.next().unwrap().unwrap();
                let b = it.next().unwrap().unwrap();
                let key = |k: &redb::AccessGuard<(&str, u64)>| {
                    let (part, d) = k.value();
                    (part.to_owned(), d)
                };
                (key(&a.0), (key(&b.0), a.1.value().to_vec()))
            };
            c.remove((gone.0.as_str(), gone.1)).unwrap();
            c.insert((kept.0.0.as_str(), kept.0.1), kept.1.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let mem = Memory::open(&path).unwrap();
    let report = mem.check(|_| {}).unwrap();
    assert!(!report.is_ok());
    assert!(report.problems.iter().any(|p| p.contains("zzzstray")), "{:?}", report.problems);
    assert!(report.problems.iter().any(|p| p.starts_with("terms")), "{:?}", report.problems);
    let cards: Vec<&String> =
        report.problems.iter().filter(|p| p.starts_with("fact_cards")).collect();
    assert_eq!(cards.len(), 2, "{:?}", report.problems);
    let before = mem.export_dump(&mut |_| {}).unwrap();
    let rep = mem.reindex(|_| {}).unwrap();
    assert_eq!(rep.entries, 164);
    assert!(rep.problems.is_empty());
    let after = mem.check(|_| {}).unwrap();
    assert!(after.is_ok(), "{:?}", after.problems);
    assert_eq!(mem.export_dump(&mut |_| {}).unwrap(), before);
}
