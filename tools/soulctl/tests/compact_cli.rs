//! `soulctl compact` and `soulctl stats --space`: a store ingested from a
//! scenario is compacted, still passes `check`, and reports the space of its
//! tables.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn soulctl(db: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("run soulctl");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A store in `dir` that `soulctl ingest` filled with `n` observes of seven
/// users in batches of `batch`, the user saying `user(i)` in the `i`th.
fn ingested(dir: &Path, n: usize, batch: usize, user: impl Fn(usize) -> String) -> PathBuf {
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let op = serde_json::json!({
                "op": "observe",
                "at": format!("2024-06-{:02}T10:00:00", i % 28 + 1),
                "user": user(i),
                "agent": "ok",
                "user_id": format!("u{}", i % 7),
            });
            op.to_string()
        })
        .collect();
    let scenario = dir.join("s.jsonl");
    std::fs::write(&scenario, lines.join("\n")).expect("write scenario");
    let db = dir.join("store.redb");
    let batch = batch.to_string();
    soulctl(&db, &["ingest", scenario.to_str().expect("utf-8"), "--batch", &batch]);
    db
}

#[test]
fn a_compacted_store_checks_clean_and_reports_its_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = ingested(dir.path(), 40, 5, |i| {
        format!("I work at Company{i} and my sister lives in Town{i}")
    });

    let out = soulctl(&db, &["compact"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("compacted ") && text.contains("tables"), "{text}");
    soulctl(&db, &["check"]);

    let out = soulctl(&db, &["stats", "--space", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats json");
    let tables = v["tables"].as_array().expect("tables");
    let docs = tables.iter().find(|t| t["name"] == "docs").expect("docs table");
    assert_eq!(docs["rows"], v["memories"]);
    assert!(docs["stored_bytes"].as_u64().expect("bytes") > 0);
    let held: u64 = tables
        .iter()
        .map(|t| {
            ["stored_bytes", "metadata_bytes", "fragmented_bytes"]
                .iter()
                .map(|k| t[*k].as_u64().expect("bytes"))
                .sum::<u64>()
        })
        .sum();
    assert!(held <= v["file_bytes"].as_u64().expect("file bytes"));

    let out = soulctl(&db, &["stats", "--space"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("user_terms") && text.contains("all tables"), "{text}");
}

/// `soulctl reindex` says when the file grew (the old index pages stay free
/// inside it) and that `compact` gives the space back, and says nothing of it
/// when the file kept its size.
#[test]
fn reindex_points_to_compact_when_the_file_grew() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = ingested(dir.path(), 300, 50, |i| {
        format!("I work at Company{i} and I live in Town{i}, my dog is called Rex{i}")
    });
    // Compacted, the file has no free pages: the rebuilt indexes take new ones.
    soulctl(&db, &["compact"]);
    let mut grew = 0;
    for _ in 0..2 {
        let before = std::fs::metadata(&db).expect("size").len();
        let out = soulctl(&db, &["reindex"]);
        let after = std::fs::metadata(&db).expect("size").len();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("reindexed 459 entries"), "{text}");
        assert_eq!(text.contains("compact` gives the space back"), after > before, "{text}");
        grew += usize::from(after > before);
        soulctl(&db, &["check"]);
    }
    assert!(grew > 0, "no reindex grew the file");
}
