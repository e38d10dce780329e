//! The self-model update (observe step 6) against soul-protocol 0.4.0.
//!
//! `tests/fixtures/self_model/*.json` (made by `scripts/gen_self_model_fixtures.py`)
//! hold public scenarios and the reference's self-model after their observes; the
//! `reference` profile must reproduce each one exactly (keywords, evidence, the
//! confidence floats and the relationship notes).

use std::path::{Path, PathBuf};

use serde_json::Value;
use soulmem::Profile;
use soulmem::replay::Replayer;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/self_model")
}

fn check(fixture: &str) {
    let path = fixture_dir().join(fixture);
    let data: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture"))
        .expect("fixture JSON");
    let name = data["scenario"].as_str().expect("scenario name");
    let lines: Vec<&str> = data["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| l.as_str().expect("a scenario line"))
        .collect();
    assert!(!lines.is_empty(), "{name}: no lines");
    let mut wanted = std::collections::BTreeMap::new();
    for snap in data["snapshots"].as_array().expect("snapshots") {
        wanted.insert(snap["line"].as_u64().expect("line") as usize, snap["self_model"].clone());
    }
    let r = Replayer::in_memory(Profile::Reference).expect("store");
    let mut failures = Vec::new();
    let mut compare = |label: String, want: &Value| {
        let got =
            serde_json::to_value(r.memory().self_model().expect("self_model")).expect("serialise");
        if &got != want {
            failures.push(format!("{label}\n  got  {got}\n  want {want}"));
        }
    };
    for (i, line) in lines.iter().enumerate() {
        let _ = r.apply_line(line);
        if let Some(want) = wanted.get(&(i + 1)) {
            compare(format!("{name}:{}", i + 1), want);
        }
    }
    compare(format!("{name}: final"), &data["final"]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn p02_dev_qa_session() {
    check("p02_dev_qa_session.json");
}

#[test]
fn p14_week_with_assistant() {
    check("p14_week_with_assistant.json");
}

#[test]
fn p01_profile_onboarding() {
    check("p01_profile_onboarding.json");
}

#[test]
fn p09_multi_user() {
    check("p09_multi_user.json");
}

#[test]
fn p15_long_single_user() {
    check("p15_long_single_user.json");
}

#[test]
fn p16_long_multi_user_domains() {
    check("p16_long_multi_user_domains.json");
}

/// The default profile keys relationship notes by user and parses the value after
/// the template prefix.
#[test]
fn default_profile_notes_per_user() {
    let r = Replayer::in_memory(Profile::Default).expect("store");
    for line in [
        r#"{"op":"observe","at":"2024-05-09T09:00:00Z","user":"My name is Kristine and I work at Datadog.","agent":"Hi Kristine.","user_id":"kris"}"#,
        r#"{"op":"observe","at":"2024-05-09T09:01:00Z","user":"My name is Ben.","agent":"Hi Ben.","user_id":"ben"}"#,
    ] {
        let _ = r.apply_line(line);
    }
    let m = r.memory().self_model().expect("self_model");
    assert_eq!(
        m.relationship_notes.get("kris").map(String::as_str),
        Some("Name: Kristine; Works at: Datadog")
    );
    assert_eq!(m.relationship_notes.get("ben").map(String::as_str), Some("Name: Ben"));
    assert!(!m.relationship_notes.contains_key("user"));
}
