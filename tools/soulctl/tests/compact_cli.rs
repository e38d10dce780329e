//! `soulctl compact` and `soulctl stats --space`: a store ingested from a
//! scenario is compacted, still passes `check`, and reports the space of its
//! tables.

use std::path::Path;
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

#[test]
fn a_compacted_store_checks_clean_and_reports_its_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines: Vec<String> = (0..40)
        .map(|i| {
            format!(
                r#"{{"op": "observe", "at": "2024-06-{:02}T10:00:00", "user": "I work at Company{i} and my sister lives in Town{i}", "agent": "ok", "user_id": "u{}"}}"#,
                i % 28 + 1,
                i % 7
            )
        })
        .collect();
    let scenario = dir.path().join("s.jsonl");
    std::fs::write(&scenario, lines.join("\n")).expect("write scenario");
    let db = dir.path().join("store.redb");
    soulctl(&db, &["ingest", scenario.to_str().expect("utf-8"), "--batch", "5"]);

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
