//! Parity of the write-path judges (sentiment, significance, dedup, contradiction)
//! with soul-protocol 0.4.0, on fixtures built by `scripts/gen_judge_fixtures.py`
//! from the reference's own functions. Every row must match (floats within 1e-9).

use std::path::PathBuf;

use serde_json::Value;
use soulmem::Profile;
use soulmem::write::{contradiction, dedup, sentiment, significance};

const EPS: f64 = 1e-9;
const SHOW: usize = 15;

fn rows(name: &str) -> Vec<Value> {
    let path: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", "judge", name].iter().collect();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("fixture line is JSON"))
        .collect()
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= EPS
}

fn pairs(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .expect("array of pairs")
        .iter()
        .map(|p| {
            (p[0].as_str().expect("id").to_owned(), p[1].as_str().expect("content").to_owned())
        })
        .collect()
}

struct Tally {
    name: &'static str,
    total: usize,
    bad: Vec<String>,
}

impl Tally {
    fn new(name: &'static str) -> Self {
        Self { name, total: 0, bad: Vec::new() }
    }
    fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        self.total += 1;
        if !ok {
            self.bad.push(msg());
        }
    }
    fn finish(self) {
        let ok = self.total - self.bad.len();
        println!("PARITY {}: {ok}/{} rows match", self.name, self.total);
        for m in self.bad.iter().take(SHOW) {
            println!("  MISMATCH {m}");
        }
        assert!(
            self.bad.is_empty(),
            "{}: {} of {} rows differ",
            self.name,
            self.bad.len(),
            self.total
        );
    }
}

#[test]
fn sentiment_parity() {
    let mut t = Tally::new("sentiment");
    for row in rows("sentiment.jsonl") {
        let m = sentiment::detect_sentiment(s(&row, "text"));
        let ok = close(m.valence, f(&row, "valence"))
            && close(m.arousal, f(&row, "arousal"))
            && m.label == s(&row, "label");
        t.check(ok, || format!("{row} -> {m:?}"));
    }
    t.finish();
}

#[test]
fn significance_parity() {
    let mut t = Tally::new("significance");
    let mut scenario = String::new();
    let mut episodes: Vec<String> = Vec::new(); // newest first
    for row in rows("significance.jsonl") {
        if s(&row, "scenario") != scenario {
            scenario = s(&row, "scenario").to_owned();
            episodes.clear();
        }
        let user = s(&row, "user");
        let agent = s(&row, "agent");
        let values: Vec<String> = row["core_values"]
            .as_array()
            .expect("core_values")
            .iter()
            .map(|v| v.as_str().expect("value").to_owned())
            .collect();
        let n = row["recent_count"].as_u64().expect("recent_count") as usize;
        let recent: Vec<&str> = episodes.iter().take(n).map(String::as_str).collect();
        let somatic = sentiment::observe_sentiment(user, agent);
        let g = significance::assess(user, agent, &somatic, &values, &recent);
        let exp_somatic = &row["somatic"];
        let ok = close(somatic.valence, f(exp_somatic, "valence"))
            && close(somatic.arousal, f(exp_somatic, "arousal"))
            && somatic.label == s(exp_somatic, "label")
            && close(g.score.novelty, f(&row, "novelty"))
            && close(g.score.emotional_intensity, f(&row, "emotional_intensity"))
            && close(g.score.goal_relevance, f(&row, "goal_relevance"))
            && close(g.score.content_richness, f(&row, "content_richness"))
            && g.token_count as u64 == row["token_count"].as_u64().expect("token_count")
            && close(g.overall, f(&row, "overall"))
            && g.is_significant == row["is_significant"].as_bool().expect("is_significant")
            && close(significance::episodic_salience(&g.score), f(&row, "salience"))
            && significance::episodic_abstract(user, agent) == s(&row, "abstract")
            && u64::from(significance::episodic_importance(&somatic))
                == row["importance"].as_u64().expect("importance");
        t.check(ok, || {
            format!(
                "{row} -> {g:?} salience={} abstract={:?} importance={}",
                significance::episodic_salience(&g.score),
                significance::episodic_abstract(user, agent),
                significance::episodic_importance(&somatic)
            )
        });
        episodes.insert(0, significance::episodic_content(user, agent));
    }
    t.finish();
}

#[test]
fn dedup_parity() {
    let mut t = Tally::new("dedup");
    for row in rows("dedup.jsonl") {
        let existing = pairs(&row["existing"]);
        let refs: Vec<(&str, &str)> =
            existing.iter().map(|(i, c)| (i.as_str(), c.as_str())).collect();
        let got = dedup::reconcile(s(&row, "new"), &refs);
        let target = row["target"].as_str();
        let ok = match (&got, s(&row, "action")) {
            (dedup::DedupDecision::Create, "CREATE") => target.is_none(),
            (dedup::DedupDecision::Skip { id, similarity }, "SKIP")
            | (dedup::DedupDecision::Merge { id, similarity }, "MERGE") => {
                Some(id.as_str()) == target && close(*similarity, f(&row, "similarity"))
            }
            _ => false,
        };
        t.check(ok, || {
            format!("{} -> {got:?}; expected {} {:?}", row["new"], row["action"], target)
        });
    }
    t.finish();
}

#[test]
fn pair_scores_parity() {
    let mut t = Tally::new("pairs");
    for row in rows("pairs.jsonl") {
        let (a, b) = (s(&row, "a"), s(&row, "b"));
        let sim = dedup::similarity(a, b);
        let ov = dedup::token_overlap_score(a, b);
        // Rows without `similarity` only pin the pre-filter (see the generator).
        let sim_ok = row.get("similarity").is_none() || close(sim, f(&row, "similarity"));
        let ok = sim_ok && close(ov, f(&row, "overlap"));
        t.check(ok, || format!("{row} -> similarity={sim} overlap={ov}"));
    }
    t.finish();
}

#[test]
fn verb_facts_parity() {
    let mut t = Tally::new("verb_facts");
    for row in rows("verb_facts.jsonl") {
        let got: Vec<(String, String)> =
            contradiction::verb_facts(s(&row, "text"), Profile::Reference)
                .into_iter()
                .map(|(a, v)| (a.as_str().to_owned(), v))
                .collect();
        let want = pairs(&row["facts"]);
        t.check(got == want, || format!("{:?} -> {got:?}; expected {want:?}", row["text"]));
    }
    t.finish();
}

#[test]
fn contradiction_parity() {
    let mut t = Tally::new("contradiction");
    let mut kinds = [0usize; 3];
    for row in rows("contradiction.jsonl") {
        let existing = pairs(&row["existing"]);
        let refs: Vec<(&str, &str)> =
            existing.iter().map(|(i, c)| (i.as_str(), c.as_str())).collect();
        let new = s(&row, "new");
        let similar = contradiction::find_similar(new, &refs);
        let want_similar = row["similar"].as_array().expect("similar");
        let similar_ok = similar.len() == want_similar.len()
            && similar.iter().zip(want_similar).all(|(g, w)| {
                Some(g.id) == w[0].as_str() && w[1].as_f64().is_some_and(|x| close(x, g.similarity))
            });
        let got = if s(&row, "kind") == "raw" {
            contradiction::detect_raw_text(new, &refs, Profile::Reference)
        } else {
            contradiction::detect(new, &refs, Profile::Reference)
        };
        for c in &got {
            kinds[c.kind as usize] += 1;
        }
        let want = row["results"].as_array().expect("results");
        let results_ok = got.len() == want.len()
            && got.iter().zip(want).all(|(g, w)| {
                g.old_id == s(w, "old_id")
                    && g.reason == s(w, "reason")
                    && close(g.confidence, f(w, "confidence"))
            });
        t.check(similar_ok && results_ok, || {
            format!("{new:?}\n    got similar {similar:?}\n    got {got:?}\n    want {row}")
        });
    }
    println!("contradictions by kind (negation, entity-attribute, verb-fact): {kinds:?}");
    t.finish();
}
