//! `soulctl ingest --sync-every N`: the batches between syncs are deferred, a
//! `committed K` line is printed for each synced one only (the ops a crash could
//! no longer lose), and the store ends as with a sync per batch.

use std::path::Path;
use std::process::Command;

fn scenario(dir: &Path) -> std::path::PathBuf {
    let lines: Vec<String> = (0..10)
        .map(|i| {
            format!(
                r#"{{"op": "observe", "at": "2024-06-{:02}T10:00:00", "user": "I work at Company{i} and I love hiking", "agent": "ok", "user_id": "u1"}}"#,
                i + 1
            )
        })
        .collect();
    let path = dir.join("s.jsonl");
    std::fs::write(&path, lines.join("\n")).expect("write scenario");
    path
}

/// Runs the ingest; returns the `committed K` numbers it printed.
fn ingest(db: &Path, file: &Path, sync_every: &str) -> Vec<u64> {
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .arg("--db")
        .arg(db)
        .arg("ingest")
        .arg(file)
        .args(["--batch", "2", "--sync-every", sync_every])
        .output()
        .expect("run soulctl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("committed ")?.trim().parse().ok())
        .collect()
}

fn stats(db: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .arg("--db")
        .arg(db)
        .args(["stats", "--json"])
        .output()
        .expect("run soulctl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stats json")
}

#[test]
fn sync_every_reports_only_synced_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = scenario(dir.path());
    let (every, deferred) = (dir.path().join("every.redb"), dir.path().join("deferred.redb"));
    assert_eq!(ingest(&every, &file, "1"), [2, 4, 6, 8, 10]);
    // Batches 1, 2 deferred, 3 synced, 4 deferred, 5 (the last) synced.
    assert_eq!(ingest(&deferred, &file, "3"), [6, 10]);
    let (mut a, mut b) = (stats(&every), stats(&deferred));
    assert_eq!(a["ingested_ops"], 10);
    // Pages freed by a deferred commit are reused only after the next sync, so
    // the files' sizes may differ; everything they hold may not.
    for s in [&mut a, &mut b] {
        s.as_object_mut().expect("object").remove("file_bytes");
    }
    assert_eq!(a, b);
}

/// An ingest ends with the postings its batches left in the tail merged into
/// the blocks, so the next process to open the store has no tail to index.
#[test]
fn an_ingest_ends_with_its_postings_merged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = scenario(dir.path());
    let db = dir.path().join("merged.redb");
    ingest(&db, &file, "1");
    let s = stats(&db);
    assert_eq!(s["ingested_ops"], 10);
    let rows = &s["index_rows"];
    assert_eq!(rows["posting_tail"].as_u64().unwrap_or(0), 0, "{rows}");
    assert!(rows["posting_blocks"].as_u64().unwrap_or(0) > 0, "{rows}");
}
