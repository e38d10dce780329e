//! Replays `tests/fixtures/extract/reference_extract.jsonl` (made by
//! `scripts/gen_extract_fixtures.py` from soul-protocol 0.4.0) through the Rust
//! extractors under `Profile::Reference` and requires identical output.

use serde_json::{Value, json};
use soulmem::Profile;
use soulmem::write::entities::{extract_entities, graph_updates};
use soulmem::write::facts::extract_facts;

const FIXTURE: &str = include_str!("fixtures/extract/reference_extract.jsonl");

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

#[test]
fn reference_profile_matches_the_reference() {
    let mut total = 0;
    let mut mismatches: Vec<String> = Vec::new();
    let (mut fact_ok, mut ent_ok, mut graph_ok) = (0, 0, 0);
    for (n, line) in FIXTURE.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let rec: Value = serde_json::from_str(line).expect("fixture line is JSON");
        total += 1;
        let (user, agent) = (text(&rec, "user"), text(&rec, "agent"));

        let facts: Vec<Value> = extract_facts(user, agent, Profile::Reference)
            .into_iter()
            .map(|f| {
                json!({
                    "content": f.content,
                    "importance": f.importance,
                    "category": f.category,
                    "abstract": f.r#abstract,
                })
            })
            .collect();
        let facts = Value::Array(facts);
        let extracted = extract_entities(user, agent, Profile::Reference);
        let entities = serde_json::to_value(&extracted).expect("serializes");
        let graph = serde_json::to_value(graph_updates(&extracted, Profile::Reference))
            .expect("serializes");

        let mut check = |what: &str, got: &Value, ok: &mut usize| {
            let want = rec.get(what).unwrap_or(&Value::Null);
            if got == want {
                *ok += 1;
            } else {
                mismatches.push(format!(
                    "line {} ({}) {what}\n  user:  {user:?}\n  agent: {agent:?}\n  want:  {want}\n  got:   {got}",
                    n + 1,
                    text(&rec, "src"),
                ));
            }
        };
        check("facts", &facts, &mut fact_ok);
        check("entities", &entities, &mut ent_ok);
        check("graph", &graph, &mut graph_ok);
    }
    println!(
        "observes: {total}; facts equal {fact_ok}, entities equal {ent_ok}, graph equal {graph_ok}"
    );
    for m in mismatches.iter().take(40) {
        println!("{m}");
    }
    assert!(total > 900, "fixture has {total} observes");
    assert!(mismatches.is_empty(), "{} mismatches", mismatches.len());
}
