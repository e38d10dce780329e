//! Hostile input: no text panics `observe_pair` or `recall` (either profile), text
//! over [`soulmem::MAX_CONTENT_BYTES`] is a clear error, bad scenario lines become
//! error lines, and the fuzz targets' bodies survive a corpus of mutated inputs
//! (the stable stand-in for `cargo +nightly fuzz run`).

use std::sync::OnceLock;

use proptest::prelude::*;
use soulmem::replay::Replayer;
use soulmem::storage::faulty::Rng;
use soulmem::write::observe::ObserveOptions;
use soulmem::{Error, MAX_CONTENT_BYTES, Memory, Profile, RecallQuery};

#[path = "../fuzz/bodies.rs"]
mod bodies;

fn mems() -> &'static [Memory; 2] {
    static MEMS: OnceLock<[Memory; 2]> = OnceLock::new();
    MEMS.get_or_init(|| {
        let mk = |p| Memory::builder().profile(p).open_in_memory().expect("memory");
        [mk(Profile::Default), mk(Profile::Reference)]
    })
}

/// Strings that tend to break text handling.
fn nasty() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "\\PC{0,200}",
        proptest::collection::vec(
            prop_oneof![
                Just('\0'),
                Just('\u{202e}'),
                Just('\u{feff}'),
                Just('\u{fffd}'),
                Just('\u{10ffff}'),
                Just('\r'),
                Just('\n'),
                Just('İ'),
                Just('ß'),
                Just('ﬃ'),
                Just('\u{301}'),
                Just('*'),
                Just(':'),
                Just('"'),
                Just('\\'),
                Just(' '),
                Just('I'),
                Just('a'),
                Just('😀'),
                any::<char>(),
            ],
            0..300
        )
        .prop_map(|v| v.into_iter().collect()),
        // Words the extractors react to, spliced with junk.
        ("\\PC{0,20}", "\\PC{0,20}").prop_map(|(a, b)| format!(
            "I live in {a} and I work at {b}. My name is {a}{b}. I love {b} but I hate {a}."
        )),
        Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn observe_and_recall_never_panic(
        user in nasty(),
        agent in nasty(),
        uid in proptest::option::of(nasty()),
        domain in nasty(),
        profile in 0usize..2,
        limit in prop_oneof![Just(0usize), 1usize..50, Just(usize::MAX)],
        bond in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-1.0), 0.0f64..100.0],
        min_imp in prop_oneof![Just(i32::MIN), Just(i32::MAX), -5i32..15],
    ) {
        let mem = &mems()[profile];
        let opts = ObserveOptions { user_id: uid.clone(), domain: domain.clone() };
        match mem.observe_pair(&user, &agent, &opts) {
            Ok(_) | Err(Error::InvalidName { .. }) => {}
            Err(e) => prop_assert!(false, "observe failed: {e}"),
        }
        let _ = mem.observe_pair(&user, &agent, &ObserveOptions::default()).map_err(|e| {
            panic!("observe with the default domain failed: {e}")
        });
        let mut q = RecallQuery::new(user.clone());
        q.limit = limit;
        q.user_id = uid;
        q.domain = Some(domain);
        q.requester_id = Some(agent.clone());
        q.bond_strength = bond;
        q.min_importance = min_imp;
        q.scopes = Some(vec![agent.clone(), "*".into(), ":*".into()]);
        q.layer = (agent.len() % 3 == 0).then(|| agent.clone());
        q.types = (agent.len() % 3 == 1).then(|| vec![agent.clone(), "semantic".into()]);
        q.explain = true;
        q.progressive = true;
        let _ = mem.recall(&q);
        let plain = mem.recall(&RecallQuery::new(agent));
        prop_assert!(plain.is_ok(), "plain recall failed: {:?}", plain.err());
    }

    #[test]
    fn scenario_lines_never_panic(line in nasty(), op in 0usize..7, field in 0usize..12, val in nasty()) {
        let r = replayer();
        let v = r.apply_line(&line);
        prop_assert!(v.is_object());
        // A well-formed op with one hostile field.
        let ops = ["observe", "remember", "recall", "forget", "facts", "bogus", ""];
        let fields = ["user", "agent", "query", "content", "type", "layer", "domain", "user_id",
                      "visibility", "limit", "at", "entities"];
        let values = [
            serde_json::Value::String(val.clone()),
            serde_json::json!(null),
            serde_json::json!(-1),
            serde_json::json!(1e300),
            serde_json::json!(u64::MAX),
            serde_json::json!([val.clone(), 1, {}]),
            serde_json::json!({"x": val}),
            serde_json::json!(true),
        ];
        let mut obj = serde_json::json!({
            "op": ops[op], "at": "2024-03-04T08:31:00Z", "user": "I live in Paris",
            "query": "Paris", "content": "likes tea", "type": "semantic",
        });
        obj[fields[field]] = values[(field + op) % values.len()].clone();
        let v = r.apply_line(&obj.to_string());
        prop_assert!(v.is_object());
    }
}

fn replayer() -> &'static Replayer {
    static R: OnceLock<Replayer> = OnceLock::new();
    R.get_or_init(|| Replayer::in_memory(Profile::Default).expect("replayer"))
}

#[test]
fn bad_scenario_lines_are_error_lines() {
    let r = replayer();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let lines = [
        "",
        "null",
        "[]",
        "{",
        "{\"op\": 5}",
        "{\"op\": \"observe\"}",
        "{\"op\": \"observe\", \"at\": \"yesterday\", \"user\": \"hi\"}",
        "{\"op\": \"observe\", \"at\": \"2024-03-04T08:31:00Z\", \"user\": 12}",
        "{\"op\": \"recall\", \"at\": \"2024-03-04T08:31:00Z\", \"query\": \"x\", \"limit\": -3}",
        "{\"op\": \"recall\", \"at\": \"2024-03-04T08:31:00Z\", \"query\": \"x\", \"limit\": 1e300}",
        "{\"op\": \"recall\", \"at\": \"2024-03-04T08:31:00Z\", \"query\": \"x\", \"min_importance\": 1e12}",
        "{\"op\": \"remember\", \"at\": \"2024-03-04T08:31:00Z\", \"content\": \"x\", \"layer\": \"../../etc\"}",
        "{\"op\": \"remember\", \"at\": \"2024-03-04T08:31:00Z\", \"content\": \"x\", \"type\": \"semantic\", \"importance\": 300}",
        "{\"op\": \"remember\", \"at\": \"2024-03-04T08:31:00Z\", \"content\": \"x\", \"type\": \"semantic\", \"visibility\": \"secret\"}",
        "{\"op\": \"launch\", \"at\": \"2024-03-04T08:31:00Z\"}",
        &deep,
    ];
    for line in lines {
        let v = r.apply_line(line);
        assert!(v.get("error").is_some_and(serde_json::Value::is_string), "{line:.80} gave {v}");
    }
    // A huge limit is not an allocation bomb.
    let v = r.apply_line(
        "{\"op\": \"recall\", \"at\": \"2024-03-04T08:31:00Z\", \"query\": \"x\", \"limit\": 9223372036854775807}",
    );
    assert!(v.is_object(), "{v}");
}

/// A text of exactly `len` bytes mixing ASCII and multi-byte characters.
fn text_of(len: usize) -> String {
    let unit = "I love Rust é 😀 ";
    let mut s = unit.repeat(len / unit.len() + 1);
    while s.len() > len {
        s.pop();
    }
    while s.len() < len {
        s.push('x');
    }
    s
}

#[test]
fn text_size_limit_is_a_clear_error() {
    for (p, mem) in mems().iter().enumerate() {
        for len in [MAX_CONTENT_BYTES + 1, 2 * MAX_CONTENT_BYTES] {
            let big = text_of(len);
            for (user, agent) in [(big.as_str(), "ok"), ("ok", big.as_str())] {
                let e = mem
                    .observe_pair(user, agent, &ObserveOptions::default())
                    .expect_err("over the limit");
                assert!(matches!(e, Error::InvalidInput(_)), "profile {p}: {e:?}");
                assert!(e.to_string().contains("over the limit"), "{e}");
            }
        }
        // Large but legal texts (a pathological 1 MB included) are handled.
        for len in [0, 1, 64 * 1024, MAX_CONTENT_BYTES / 2 - 64] {
            let t = text_of(len);
            match mem.observe_pair(&t, &t, &ObserveOptions::default()) {
                Ok(_) => {}
                Err(e) => {
                    assert!(
                        matches!(e, Error::InvalidInput(_) | Error::InvalidMemory(_)),
                        "profile {p}, {len} bytes: {e:?}"
                    );
                    assert!(e.to_string().contains("limit"), "{e}");
                }
            }
        }
        let t = text_of(MAX_CONTENT_BYTES);
        let r = mem.observe_pair(&t, "", &ObserveOptions::default());
        if let Err(e) = &r {
            assert!(e.to_string().contains("limit"), "profile {p}, exactly at the limit: {e:?}");
        }
        mem.recall(&RecallQuery::new(text_of(MAX_CONTENT_BYTES))).expect("1 MiB query");
    }
}

/// Mutates `seed`: bit flips, interesting bytes, deletions, duplications,
/// truncation, random insertions.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len() as u64;
        let at = usize::try_from(rng.below(len.max(1))).unwrap_or(0);
        match rng.below(6) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.below(8),
            1 if !v.is_empty() => {
                v[at] = [0u8, 0xff, b'"', b'{', b'\\', b'[', 0x7f, 0xc3]
                    [usize::try_from(rng.below(8)).unwrap_or(0)];
            }
            2 if !v.is_empty() => {
                let n = usize::try_from(rng.below(16)).unwrap_or(0).min(v.len() - at);
                v.drain(at..at + n);
            }
            3 if !v.is_empty() => {
                let n = usize::try_from(rng.below(64)).unwrap_or(0).min(v.len() - at);
                let chunk = v[at..at + n].to_vec();
                v.splice(at..at, chunk);
            }
            4 => v.truncate(at),
            _ => {
                let n = rng.below(8);
                for _ in 0..n {
                    v.insert(at.min(v.len()), u8::try_from(rng.below(256)).unwrap_or(0));
                }
            }
        }
    }
    v
}

fn smoke(name: &str, seeds: &[Vec<u8>], per_seed: usize, body: fn(&[u8])) {
    let mut rng = Rng::new(name.len() as u64 * 7919);
    for seed in seeds {
        body(seed);
        for _ in 0..per_seed {
            let input = mutate(seed, &mut rng);
            let r = std::panic::catch_unwind(|| body(&input));
            assert!(
                r.is_ok(),
                "fuzz target {name} panicked on input {:?}",
                String::from_utf8_lossy(&input[..input.len().min(300)])
            );
        }
    }
}

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/soulfile/{name}", env!("CARGO_MANIFEST_DIR")))
        .expect("test data")
}

#[test]
fn fuzz_smoke_soul_import() {
    let seeds = vec![data("minimal.soul"), data("legacy-0.3.soul"), data("rich.soul"), Vec::new()];
    smoke("soul_import", &seeds, 40, bodies::soul_import);
}

#[test]
fn fuzz_smoke_json_dump() {
    let seeds = vec![
        data("rich.memory.json"),
        br#"{"episodic": [{"type": "episodic", "content": "x", "importance": 5}], "semantic": [], "core": {"persona": "p", "human": "h"}}"#.to_vec(),
        b"{}".to_vec(),
    ];
    smoke("json_dump", &seeds, 60, bodies::json_dump);
}

#[test]
fn fuzz_smoke_scenario() {
    let seeds = vec![
        br#"{"op": "observe", "at": "2024-03-04T08:31:00Z", "user": "My name is Marta and I live in Lyon", "agent": "Hi Marta", "user_id": "u1"}
{"op": "remember", "at": "2024-03-04T08:32:00Z", "type": "semantic", "content": "User likes tea", "importance": 7, "visibility": "private", "entities": ["tea"]}
{"op": "recall", "at": "2024-03-04T08:33:00Z", "query": "where do I live", "limit": 3, "user_id": "u1", "requester_id": "bob", "bond_strength": 20}
{"op": "forget", "at": "2024-03-04T08:34:00Z", "query": "tea"}
{"op": "facts", "at": "2024-03-04T08:35:00Z"}"#
            .to_vec(),
    ];
    smoke("scenario", &seeds, 150, bodies::scenario);
}

#[test]
fn fuzz_smoke_observe_text() {
    let seeds: Vec<Vec<u8>> = (0u8..16)
        .map(|b| {
            let mut v = vec![b];
            v.extend_from_slice(
                "I live in Paris and I work at Acme. I prefer tea.\0Noted, you like tea!"
                    .as_bytes(),
            );
            v
        })
        .collect();
    smoke("observe_text", &seeds, 12, bodies::observe_text);
}
