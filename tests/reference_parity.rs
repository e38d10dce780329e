//! Replays every public reference scenario with the `reference` profile and compares
//! each op with soul-protocol 0.4.0's golden output (the metrics of
//! `../shared/reference/compare.py`).

use std::path::{Path, PathBuf};

use serde_json::Value;
use soulmem::Profile;
use soulmem::replay::Replayer;

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference")
}

#[derive(Default, Debug)]
struct Tally {
    observe: usize,
    episodic: usize,
    facts: usize,
    superseded: usize,
    entities: usize,
    snapshots: usize,
    snapshots_exact: usize,
    recalls: usize,
    top1: usize,
    exact_lists: usize,
    jaccard: f64,
    errors: usize,
}

fn set_jaccard(a: &[Value], b: &[Value]) -> f64 {
    let sa: std::collections::BTreeSet<String> = a.iter().map(ToString::to_string).collect();
    let sb: std::collections::BTreeSet<String> = b.iter().map(ToString::to_string).collect();
    if sa.is_empty() && sb.is_empty() {
        return 1.0;
    }
    sa.intersection(&sb).count() as f64 / sa.union(&sb).count() as f64
}

fn replay(scenario: &Path) -> Vec<Value> {
    let r = Replayer::in_memory(Profile::Reference).expect("store");
    let text = std::fs::read_to_string(scenario).expect("scenario");
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| r.apply_line(l)).collect()
}

fn compare(name: &str, exp: &[Value], act: &[Value], t: &mut Tally, misses: &mut Vec<String>) {
    assert_eq!(exp.len(), act.len(), "{name}: line count");
    let empty = Vec::new();
    for (i, (e, a)) in exp.iter().zip(act).enumerate() {
        if a.get("error").is_some() {
            t.errors += 1;
            misses.push(format!("{name}:{} error {}", i + 1, a["error"]));
            continue;
        }
        match e["op"].as_str() {
            Some("observe") => {
                t.observe += 1;
                for (k, slot) in [
                    ("episodic", &mut t.episodic),
                    ("facts", &mut t.facts),
                    ("superseded", &mut t.superseded),
                    ("entities", &mut t.entities),
                ] {
                    if e[k] == a[k] {
                        *slot += 1;
                    } else {
                        misses.push(format!("{name}:{} {k}: exp={} act={}", i + 1, e[k], a[k]));
                    }
                }
            }
            Some("facts") => {
                t.snapshots += 1;
                if e["active"] == a["active"] && e["superseded"] == a["superseded"] {
                    t.snapshots_exact += 1;
                } else {
                    misses.push(format!("{name}:{} facts snapshot differs", i + 1));
                }
            }
            Some("recall") => {
                t.recalls += 1;
                let er = e["results"].as_array().unwrap_or(&empty);
                let ar = a["results"].as_array().unwrap_or(&empty);
                if er.first() == ar.first() {
                    t.top1 += 1;
                } else {
                    misses.push(format!(
                        "{name}:{} recall top-1: exp={:?} act={:?}",
                        i + 1,
                        er.first(),
                        ar.first()
                    ));
                }
                if er == ar {
                    t.exact_lists += 1;
                } else if er.first() == ar.first() {
                    misses.push(format!("{name}:{} recall list order differs", i + 1));
                }
                t.jaccard += set_jaccard(er, ar);
            }
            _ => {}
        }
    }
}

#[test]
fn reference_profile_matches_the_goldens() {
    let dir = shared().join("scenarios");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("shared/reference/scenarios")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    names.sort();
    assert!(names.len() >= 16, "expected the 16 public scenarios");
    let mut t = Tally::default();
    let mut misses = Vec::new();
    for s in &names {
        let stem = s.file_stem().and_then(|x| x.to_str()).expect("name").to_owned();
        let golden = shared().join("goldens").join(format!("{stem}.out.jsonl"));
        let exp = read_lines(&golden);
        let act = replay(s);
        compare(&stem, &exp, &act, &mut t, &mut misses);
    }
    let pct = |n: usize, d: usize| 100.0 * n as f64 / d.max(1) as f64;
    let report = format!(
        "PARITY episodic={:.1}% facts={:.1}% superseded={:.1}% entities={:.1}% snapshots={}/{} recall_top1={:.1}% recall_exact_lists={}/{} recall_jaccard={:.3} errors={}",
        pct(t.episodic, t.observe),
        pct(t.facts, t.observe),
        pct(t.superseded, t.observe),
        pct(t.entities, t.observe),
        t.snapshots_exact,
        t.snapshots,
        pct(t.top1, t.recalls),
        t.exact_lists,
        t.recalls,
        t.jaccard / t.recalls.max(1) as f64,
        t.errors
    );
    println!("{report}");
    for m in misses.iter().take(40) {
        println!("  {m}");
    }
    assert_eq!(t.errors, 0, "{report}");
    for (n, what) in [
        (t.episodic, "episodic"),
        (t.facts, "facts"),
        (t.superseded, "superseded"),
        (t.entities, "entities"),
    ] {
        assert!(pct(n, t.observe) >= 99.0, "{what} below 99%: {report}");
    }
    assert!(pct(t.snapshots_exact, t.snapshots) >= 99.0, "facts snapshots: {report}");
    assert!(pct(t.top1, t.recalls) >= 90.0, "recall top-1: {report}");
    assert!(t.jaccard / t.recalls.max(1) as f64 >= 0.85, "recall jaccard: {report}");
    // Every public recall returns the reference's list, in its order.
    assert_eq!(t.exact_lists, t.recalls, "recall lists: {report}");
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// The mixed scenarios (`scripts/mix_scenarios.py`: random walks over the public
/// scenarios' ops with other owners, domains, times and mutated texts) against
/// soul-protocol 0.4.0's own output for them: every line equal.
#[test]
fn mixed_scenarios_match_the_reference_line_for_line() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/mixed");
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios/mixed")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(".jsonl") && !s.contains(".reference")))
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 6, "expected the mixed scenarios");
    let mut lines = 0;
    let mut misses = Vec::new();
    for s in &scenarios {
        let expected = read_lines(&s.with_extension("reference.jsonl"));
        let actual = replay(s);
        assert_eq!(expected.len(), actual.len(), "{}: line count", s.display());
        for (i, (e, a)) in expected.iter().zip(&actual).enumerate() {
            lines += 1;
            if e != a {
                misses.push(format!("{}:{}\n  exp {e}\n  act {a}", s.display(), i + 1));
            }
        }
    }
    assert!(misses.is_empty(), "{} of {lines} lines differ:\n{}", misses.len(), misses.join("\n"));
}

/// Two facts with the same content superseded by one observe are two lines of its
/// `superseded` list, as in soul-protocol's output (the list has one entry per
/// fact, not per content).
#[test]
fn facts_with_the_same_content_are_each_listed_when_superseded() {
    let lines = [
        r#"{"op": "remember", "at": "2024-02-01T18:06:00Z", "type": "semantic", "content": "The team can deploy on Fridays"}"#,
        r#"{"op": "remember", "at": "2024-02-02T18:06:00Z", "type": "semantic", "content": "The team can deploy on Fridays"}"#,
        r#"{"op": "observe", "at": "2024-02-03T07:25:00Z", "user": "New rule from ops: the team can't deploy on Fridays any more.", "agent": "Sensible rule."}"#,
    ];
    for profile in [Profile::Reference, Profile::Default] {
        let r = Replayer::in_memory(profile).expect("store");
        let out: Vec<Value> = lines.iter().map(|l| r.apply_line(l)).collect();
        let twice =
            serde_json::json!(["The team can deploy on Fridays", "The team can deploy on Fridays"]);
        assert_eq!(out[2]["superseded"], twice, "{profile:?}: {}", out[2]);
    }
}
