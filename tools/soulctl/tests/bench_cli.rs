//! `soulctl bench recall --per-query FILE`: one JSON line per timed recall, in the
//! order they ran, numbered by pass; a path it cannot write is an error naming it.

use std::path::Path;
use std::process::Command;

/// A small store observed from a scenario (the bench only needs a store to copy
/// and query).
fn store(dir: &Path) -> std::path::PathBuf {
    let lines: Vec<String> = (0..6)
        .map(|i| {
            format!(
                r#"{{"op": "observe", "at": "2024-06-{:02}T10:00:00", "user": "I work at Company{i} and I prefer Rust for debugging", "agent": "ok", "user_id": "u{i}"}}"#,
                i + 1
            )
        })
        .collect();
    let file = dir.join("s.jsonl");
    std::fs::write(&file, lines.join("\n")).expect("write scenario");
    let db = dir.join("store.redb");
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .arg("--db")
        .arg(&db)
        .arg("ingest")
        .arg(&file)
        .output()
        .expect("run soulctl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    db
}

#[test]
fn per_query_writes_one_line_per_timed_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = store(dir.path());
    let lines = dir.path().join("q.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .args(["bench", "recall", "--queries", "7", "--repeat", "2", "--users", "6"])
        .arg("--store")
        .arg(&db)
        .arg("--per-query")
        .arg(&lines)
        .output()
        .expect("run soulctl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&lines).expect("per-query file");
    let rows: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(rows.len(), 14, "7 queries, 2 passes");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["pass"], i / 7, "row {i}");
        assert!(row["ms"].as_f64().is_some_and(|ms| ms >= 0.0), "row {i}: {row}");
        assert!(row["postings"].as_u64().is_some(), "row {i}: {row}");
        assert!(row["kind"].as_str().is_some_and(|k| !k.is_empty()), "row {i}: {row}");
        // The second pass asks the same queries in the same order.
        if i >= 7 {
            assert_eq!(row["query"], rows[i - 7]["query"], "row {i}");
            assert_eq!(row["kind"], rows[i - 7]["kind"], "row {i}");
        }
    }
    // The queries of a pass are the bench's own, not one repeated.
    let first: std::collections::BTreeSet<&str> =
        rows[..7].iter().filter_map(|r| r["query"].as_str()).collect();
    assert!(first.len() > 1, "{first:?}");
    // The postings of the store's words were read by some query.
    assert!(rows.iter().any(|r| r["postings"].as_u64() > Some(0)), "{text}");
}

#[test]
fn per_query_to_an_unwritable_path_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = store(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .args(["bench", "recall", "--queries", "3", "--repeat", "1", "--users", "6"])
        .arg("--store")
        .arg(&db)
        .arg("--per-query")
        .arg(dir.path().join("missing-dir").join("q.jsonl"))
        .output()
        .expect("run soulctl");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing-dir"), "{err}");
    // No figures are printed for a run that could not record them.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("| all |"));
}
