//! `soulctl bench recall --per-query FILE`: one JSON line per timed recall, in the
//! order they ran, numbered by pass; a path it cannot write is an error naming it.
//! `soulctl bench replay`: a scenario's ops timed by kind, into a store removed after;
//! `soulctl bench scenario`: the synthetic corpus as a scenario it replays.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// Runs soulctl with `args` and checks that it succeeded.
fn soulctl_ok<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl")).args(args).output().expect("run soulctl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The objects of a JSON Lines file.
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("a JSON Lines file");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// A JSON file's value.
fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("a JSON file")).expect("parse json")
}

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
    soulctl_ok([OsStr::new("--db"), db.as_os_str(), OsStr::new("ingest"), file.as_os_str()]);
    db
}

#[test]
fn per_query_writes_one_line_per_timed_recall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = store(dir.path());
    let lines = dir.path().join("q.jsonl");
    let args = ["bench", "recall", "--queries", "7", "--repeat", "2", "--users", "6"];
    let mut args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    args.extend([OsStr::new("--store"), db.as_os_str(), OsStr::new("--per-query")]);
    args.push(lines.as_os_str());
    soulctl_ok(args);
    let rows = json_lines(&lines);
    let text = std::fs::read_to_string(&lines).expect("per-query file");
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

/// A scenario of `observes` observes and a recall after them, in `dir`.
fn scenario(dir: &Path, observes: usize) -> std::path::PathBuf {
    let mut lines: Vec<String> = (0..observes)
        .map(|i| {
            format!(
                r#"{{"op": "observe", "at": "2024-06-{:02}T10:00:00", "user": "I live in Town{i} and I prefer Rust for debugging", "agent": "ok", "user_id": "u1"}}"#,
                i + 1
            )
        })
        .collect();
    lines.push(
        r#"{"op": "recall", "at": "2024-07-01T10:00:00", "query": "Rust debugging", "limit": 3}"#
            .into(),
    );
    lines.push(r#"{"op": "no-such-op", "at": "2024-07-01T10:00:00"}"#.into());
    let path = dir.join(format!("s{observes}.jsonl"));
    std::fs::write(&path, lines.join("\n")).expect("write scenario");
    path
}

#[test]
fn bench_replay_times_every_op_by_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (scenario(dir.path(), 4), scenario(dir.path(), 2));
    let json = dir.path().join("replay.json");
    let store_dir = dir.path().join("store");
    let out = soulctl_ok([
        OsStr::new("bench"),
        OsStr::new("replay"),
        a.as_os_str(),
        b.as_os_str(),
        OsStr::new("--dir"),
        store_dir.as_os_str(),
        OsStr::new("--json"),
        json.as_os_str(),
    ]);
    let doc = json_file(&json);
    // Both files into one store, every op timed under its own name.
    assert_eq!(doc["ops"], 10);
    assert_eq!(doc["store"], "file");
    assert_eq!(doc["by_op"]["observe"]["count"], 6);
    assert_eq!(doc["by_op"]["observe"]["errors"], 0);
    assert_eq!(doc["by_op"]["recall"]["count"], 2);
    assert_eq!(doc["by_op"]["no-such-op"]["count"], 2);
    assert_eq!(doc["by_op"]["no-such-op"]["errors"], 2);
    let observe = &doc["by_op"]["observe"];
    let (p50, p99) = (observe["p50_ms"].as_f64(), observe["p99_ms"].as_f64());
    assert!(p50.is_some_and(|p| p > 0.0) && p50 <= p99, "{observe}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| observe | 6 | 0 |"), "{stdout}");
    assert!(stdout.contains("| recall | 2 | 0 |"), "{stdout}");
    // The store the replay wrote is removed.
    let left: Vec<_> = std::fs::read_dir(&store_dir).expect("store dir").collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bench_replay_names_a_missing_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .args(["bench", "replay"])
        .arg(dir.path().join("absent.jsonl"))
        .output()
        .expect("run soulctl");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("absent.jsonl"));
}

#[test]
fn bench_scenario_writes_a_scenario_bench_replay_runs_without_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("synth.jsonl");
    let args = ["bench", "scenario", "--exchanges", "40", "--queries", "5", "--users", "4"];
    let mut args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    args.extend([OsStr::new("--out"), file.as_os_str()]);
    soulctl_ok(args);
    let ops = json_lines(&file);
    assert_eq!(ops.len(), 45);
    assert!(ops[..40].iter().all(|o| o["op"] == "observe" && o["user_id"].is_string()));
    assert!(ops[40..].iter().all(|o| o["op"] == "recall" && o["limit"] == 10));
    // Times ascend, one exchange every 30 seconds.
    let at: Vec<&str> = ops.iter().filter_map(|o| o["at"].as_str()).collect();
    assert_eq!(at.len(), 45);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    // Four users' exchanges, as the corpus spreads them.
    let users: std::collections::BTreeSet<&str> =
        ops[..40].iter().filter_map(|o| o["user_id"].as_str()).collect();
    assert_eq!(users.len(), 4, "{users:?}");

    let json = dir.path().join("replay.json");
    let args = [OsStr::new("bench"), OsStr::new("replay"), file.as_os_str()];
    soulctl_ok(args.into_iter().chain([OsStr::new("--json"), json.as_os_str()]));
    let doc = json_file(&json);
    assert_eq!(doc["store"], "memory");
    assert_eq!(doc["by_op"]["observe"]["count"], 40);
    assert_eq!(doc["by_op"]["observe"]["errors"], 0);
    assert_eq!(doc["by_op"]["recall"]["count"], 5);
    assert_eq!(doc["by_op"]["recall"]["errors"], 0);
}
