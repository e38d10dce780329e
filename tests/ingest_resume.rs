//! Batched ingest with a durable op counter: an interrupted ingest resumed from the
//! counter applies every op exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use soulmem::ingest::{IngestOp, parse_op};
use soulmem::{Memory, MemoryEntry, Remember};

const SCENARIO: &str = "p16_long_multi_user_domains.jsonl";

fn scenario_lines() -> Vec<String> {
    // The shared reference scenario when present (beside the repository), else a
    // generated one.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for base in ["../shared", "../../shared", "/work/shared"] {
        let p = root.join(base).join("reference/scenarios").join(SCENARIO);
        if let Ok(text) = std::fs::read_to_string(&p) {
            return text.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
        }
    }
    generated()
}

fn generated() -> Vec<String> {
    let cities = ["Berlin", "Lisbon", "Porto", "Madrid", "Turin"];
    let mut out = Vec::new();
    for i in 0..120 {
        let at = format!("2024-02-{:02}T{:02}:{:02}:00Z", 1 + i / 24, i % 24, (i * 7) % 60);
        let line = match i % 6 {
            0 => serde_json::json!({"op": "observe", "at": at, "user_id": "ana",
                "user": format!("I live in {} now.", cities[i % 5]), "agent": "Noted."}),
            1 => serde_json::json!({"op": "remember", "at": at, "type": "procedural",
                "content": format!("Deploy step {i}: run the migration")}),
            2 => serde_json::json!({"op": "recall", "at": at, "query": "where do I live"}),
            3 => serde_json::json!({"op": "observe", "at": at, "domain": "work",
                "user": format!("I work at Company{} as an engineer.", i % 4), "agent": "Cool."}),
            4 => serde_json::json!({"op": "remember", "at": at, "layer": "journal",
                "content": format!("Day {i}: long walk"), "entities": ["River"]}),
            _ => serde_json::json!({"op": "facts", "at": at}),
        };
        out.push(line.to_string());
    }
    out
}

fn parse_all(lines: &[String]) -> Vec<IngestOp> {
    lines.iter().map(|l| parse_op(l).unwrap()).collect()
}

/// Everything but the random ids: (layer, domain, content, superseded?, user).
fn fingerprint(mem: &Memory) -> Vec<(String, String, String, bool, Option<String>)> {
    let mut out = Vec::new();
    for layer in mem.layers().unwrap() {
        for e in mem.layer(&layer).unwrap().entries(None).unwrap() {
            let MemoryEntry { layer, domain, content, user_id, .. } = e.clone();
            out.push((layer, domain, content, e.is_superseded(), user_id));
        }
    }
    out
}

fn ingest(mem: &Memory, ops: &[IngestOp], batch: usize) -> Vec<u64> {
    ops.chunks(batch).map(|c| mem.ingest_batch(c).unwrap()).collect()
}

#[test]
fn interrupted_ingest_resumes_exactly_once() {
    check_resume(&scenario_lines());
}

#[test]
fn generated_scenario_resumes_exactly_once() {
    check_resume(&generated());
}

fn check_resume(lines: &[String]) {
    let ops = parse_all(lines);
    let n = ops.len() as u64;
    assert!(ops.iter().filter(|o| o.is_applied()).count() > 50);

    let tmp = tempfile::tempdir().unwrap();
    let one_shot = Memory::open(tmp.path().join("one.redb")).unwrap();
    assert_eq!(ingest(&one_shot, &ops, ops.len()), vec![n]);
    assert_eq!(one_shot.ingested_ops().unwrap(), n);
    assert_eq!(one_shot.stats().unwrap().ingested_ops, n);

    // Half of the file in batches of 7, then the process "dies".
    let path = tmp.path().join("resumed.redb");
    let half = ops.len() / 2 + 3;
    {
        let mem = Memory::open(&path).unwrap();
        let ks = ingest(&mem, &ops[..half], 7);
        assert_eq!(ks.last().copied(), Some(half as u64));
        assert!(ks.windows(2).all(|w| w[1] > w[0]));
        // A batch that fails inside its transaction writes nothing, counter included.
        let before = mem.count().unwrap();
        let bad = vec![
            ops[half].clone(),
            IngestOp::Remember { at: now(), req: Remember::new("core", "x") },
        ];
        assert!(mem.ingest_batch(&bad).is_err());
        assert_eq!(mem.ingested_ops().unwrap(), half as u64);
        assert_eq!(mem.count().unwrap(), before);
    }
    // Resume: skip what the counter says, go on in batches of 5.
    let mem = Memory::open(&path).unwrap();
    let done = mem.ingested_ops().unwrap() as usize;
    assert_eq!(done, half);
    ingest(&mem, &ops[done..], 5);
    assert_eq!(mem.ingested_ops().unwrap(), n);
    assert_eq!(fingerprint(&mem), fingerprint(&one_shot));
    assert_eq!(mem.stats().unwrap().graph_edges, one_shot.stats().unwrap().graph_edges);
    assert!(mem.check(|_| {}).unwrap().is_ok());
}

fn now() -> soulmem::Timestamp {
    soulmem::model::time::parse_timestamp("2024-06-01T00:00:00").unwrap()
}

#[test]
fn ops_are_checked_when_parsed() {
    for bad in [
        r#"{"op": "observe", "at": "2024-01-01", "user": "hi", "domain": "a b"}"#,
        r#"{"op": "remember", "at": "2024-01-01", "type": "semantic", "content": "x", "importance": 11}"#,
        r#"{"op": "remember", "at": "2024-01-01", "content": "x"}"#,
        r#"{"op": "remember", "at": "2024-01-01", "layer": "../x", "content": "x"}"#,
        r#"{"op": "observe", "user": "no clock"}"#,
        "not json",
    ] {
        assert!(parse_op(bad).is_err(), "{bad}");
    }
    assert!(!parse_op(r#"{"op": "recall", "query": "x"}"#).unwrap().is_applied());
}
