//! The default profile's fixes of soul-protocol 0.4.0's accidents (`docs/QUIRKS.md`).
//!
//! Each `tests/scenarios/default/NAME.jsonl` is replayed with `Profile::Default` and
//! must give `NAME.expected.jsonl` line for line (written from the intended default
//! behaviour). Replayed with `Profile::Reference` it must give
//! `NAME.reference.jsonl` (soul-protocol 0.4.0's own output, made with
//! `../shared/reference/ref_replay.py`), and the two must differ somewhere: the fix
//! is not a no-op.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use soulmem::replay::Replayer;
use soulmem::write::observe::ObserveOptions;
use soulmem::{FixedClock, Memory, Profile, Remember};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/default")
}

fn scenarios() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/scenarios/default")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".jsonl")
                && !name.ends_with(".expected.jsonl")
                && !name.ends_with(".reference.jsonl")
        })
        .collect();
    out.sort();
    out
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

fn with_suffix(scenario: &Path, suffix: &str) -> PathBuf {
    let stem = scenario.file_stem().and_then(|s| s.to_str()).expect("stem");
    scenario.with_file_name(format!("{stem}.{suffix}.jsonl"))
}

fn replay(scenario: &Path, profile: Profile) -> (Replayer, Vec<Value>) {
    let r = Replayer::in_memory(profile).expect("store");
    let out = lines(scenario).iter().map(|l| r.apply_line(l)).collect();
    (r, out)
}

fn parse(path: &Path) -> Vec<Value> {
    lines(path).iter().map(|l| serde_json::from_str(l).expect("expected line is JSON")).collect()
}

fn check(scenario: &Path, profile: Profile, expected: &[Value]) -> Vec<String> {
    let (_, got) = replay(scenario, profile);
    let name = scenario.file_name().and_then(|n| n.to_str()).unwrap_or("?");
    let mut failures = Vec::new();
    if got.len() != expected.len() {
        failures.push(format!(
            "{name} ({profile:?}): {} lines, expected {}",
            got.len(),
            expected.len()
        ));
    }
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        if g != e {
            failures
                .push(format!("{name}:{} ({profile:?})\n  got      {g}\n  expected {e}", i + 1));
        }
    }
    failures
}

#[test]
fn default_profile_scenarios_match_hand_written_expectations() {
    let all = scenarios();
    assert!(all.len() >= 20, "found only {} scenarios", all.len());
    let mut failures = Vec::new();
    for s in &all {
        failures.extend(check(s, Profile::Default, &parse(&with_suffix(s, "expected"))));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn reference_profile_reproduces_the_accidents() {
    let mut failures = Vec::new();
    for s in &scenarios() {
        let reference = parse(&with_suffix(s, "reference"));
        failures.extend(check(s, Profile::Reference, &reference));
        // The fix must change something, except for Q16 whose only accident (the
        // swapped reason string) is not part of the replay output; see
        // `q16_reason_names_old_then_new`.
        let name = s.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        if !name.starts_with("q16_") && reference == parse(&with_suffix(s, "expected")) {
            failures.push(format!("{name}: default and reference outputs are identical"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Q7: a replaced fact points at the fact that replaced it (the reference writes
/// the string "new").
#[test]
fn q07_superseded_by_names_the_new_fact() {
    let s = dir().join("q06_prefix_conflicts.jsonl");
    for (profile, want_new) in [(Profile::Default, false), (Profile::Reference, true)] {
        let (r, _) = replay(&s, profile);
        let facts = r.memory().layer("semantic").expect("layer").entries(None).expect("entries");
        let paris = facts.iter().find(|f| f.content == "User lives in Paris").expect("Paris");
        let lyon = facts.iter().find(|f| f.content == "User lives in Lyon").expect("Lyon");
        let by = paris.superseded_by.as_deref().expect("superseded");
        if want_new {
            assert_eq!(by, "new");
        } else {
            assert_eq!(by, lyon.id);
        }
    }
}

fn memory(profile: Profile) -> Memory {
    let at = chrono::NaiveDate::from_ymd_opt(2024, 5, 16)
        .and_then(|d| d.and_hms_opt(9, 0, 0))
        .expect("date");
    Memory::builder()
        .profile(profile)
        .clock(Arc::new(FixedClock::new(at)))
        .open_in_memory()
        .expect("store")
}

/// Q16: the reason of an entity-attribute contradiction reads "was OLD, now NEW"
/// (the reference swaps the two values).
#[test]
fn q16_reason_names_old_then_new() {
    for profile in [Profile::Default, Profile::Reference] {
        let mem = memory(profile);
        let mut note = Remember::new("semantic", "The release codename is Falcon");
        note.importance = 7;
        mem.remember(&note).expect("remember");
        let report = mem
            .observe_pair(
                "Heads up: the release codename is Osprey now.",
                "Updated.",
                &ObserveOptions::default(),
            )
            .expect("observe");
        let reason = &report.contradictions.first().expect("a contradiction").reason;
        let lower = reason.to_lowercase();
        let (falcon, osprey) =
            (lower.find("falcon").expect("old value"), lower.find("osprey").expect("new value"));
        if profile == Profile::Default {
            assert!(falcon < osprey, "default reason {reason:?}");
        } else {
            assert!(osprey < falcon, "reference reason {reason:?}");
        }
    }
}
