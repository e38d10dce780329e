//! Recall parity with soul-protocol 0.4.0 on states dumped by the reference itself.
//!
//! `scripts/gen_recall_fixtures.py` replays every scenario through the reference and,
//! before each (sampled) recall, writes the complete memory state, the op and the
//! reference's answer to `tests/fixtures/recall/*.jsonl`. Each record is loaded into a
//! `RefState` and recalled here; results, access bumps, BM25 corpus growth and the
//! activation floats (bit for bit) must match.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;
use soulmem::MemoryType;
use soulmem::model::time::parse_timestamp;
use soulmem::read::reference_recall::{RecallOptions, RefState, recall};

fn options(op: &Value) -> RecallOptions {
    let s = |k: &str| op.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut o = RecallOptions::new(s("query").unwrap_or_default());
    if let Some(l) = op.get("limit").and_then(Value::as_u64) {
        o.limit = usize::try_from(l).unwrap_or(usize::MAX);
    }
    if let Some(ts) = op.get("types").and_then(Value::as_array) {
        o.types = Some(ts.iter().filter_map(|t| t.as_str().and_then(MemoryType::parse)).collect());
    }
    if let Some(m) = op.get("min_importance").and_then(Value::as_i64) {
        o.min_importance = m;
    }
    if let Some(b) = op.get("bond_strength").and_then(Value::as_f64) {
        o.bond_strength = b;
    }
    o.layer = s("layer");
    o.domain = s("domain");
    o.user_id = s("user_id");
    o.requester_id = s("requester_id");
    o
}

fn jaccard(a: &[String], b: &[String]) -> f64 {
    let sa: HashSet<&String> = a.iter().collect();
    let sb: HashSet<&String> = b.iter().collect();
    if sa.is_empty() && sb.is_empty() {
        return 1.0;
    }
    sa.intersection(&sb).count() as f64 / sa.union(&sb).count() as f64
}

#[test]
fn recall_matches_reference_states() {
    // RECALL_FIXTURE_DIR points at another fixture folder (e.g. one generated with
    // RECALL_SAMPLE_EVERY=1, every recall of the long scenarios).
    let dir = std::env::var("RECALL_FIXTURE_DIR").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/recall").to_owned()
    });
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures: run scripts/gen_recall_fixtures.py");

    let (mut n_all, mut top1_all, mut jac_all) = (0usize, 0usize, 0f64);
    let (mut exact_all, mut bump_bad, mut corpus_bad) = (0usize, 0usize, 0usize);
    let (mut scores_checked, mut scores_bad) = (0usize, 0usize);
    let (mut chained, mut chained_bad) = (0usize, 0usize);
    for path in &files {
        let text = std::fs::read_to_string(path).expect("fixture");
        let (mut n, mut top1, mut jac, mut exact) = (0usize, 0usize, 0f64, 0usize);
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_owned();
        // The state left by the previous recall, when the next op is again a recall:
        // it must equal the reference's next snapshot (access bumps, corpus growth).
        let mut carried: Option<(u64, RefState)> = None;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let rec: Value = serde_json::from_str(line).expect("record");
            let lineno = rec["line"].as_u64().expect("line");
            if !rec["error"].is_null() {
                carried = None;
                continue;
            }
            let mut state = RefState::from_snapshot(&rec["state"]).expect("state");
            if let Some((prev, mine)) = carried.take() {
                if prev + 1 == lineno {
                    chained += 1;
                    let same_corpus = mine.bm25.contents().eq(state.bm25.contents());
                    if mine.stores != state.stores || mine.graph != state.graph || !same_corpus {
                        chained_bad += 1;
                        println!(
                            "CHAIN {name} line {lineno}: state after the previous recall differs"
                        );
                    }
                }
            }
            let now = parse_timestamp(rec["now"].as_str().expect("now")).expect("now");
            let opts = options(&rec["op"]);
            let out = recall(&opts, &mut state, now);
            let got: Vec<String> = out.results.iter().map(|h| h.id.clone()).collect();
            let want: Vec<String> = rec["result_ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|v| v.as_str().expect("id").to_owned())
                .collect();
            n += 1;
            let t1 = got.first() == want.first();
            top1 += usize::from(t1);
            jac += jaccard(&got, &want);
            exact += usize::from(got == want);
            if got != want {
                println!(
                    "MISMATCH {name} line {}: query {:?}\n  want {want:?}\n  got  {got:?}",
                    rec["line"], opts.query
                );
            }
            for hit in &out.results {
                let (Some(act), Some(py)) =
                    (hit.activation, rec["activations"].get(&hit.id).and_then(Value::as_f64))
                else {
                    continue;
                };
                scores_checked += 1;
                if act.total.to_bits() != py.to_bits() {
                    scores_bad += 1;
                    println!(
                        "SCORE {name} line {} id {}: want {py:e} got {:e} ({act:?})",
                        rec["line"], hit.id, act.total
                    );
                }
            }
            let want_bumps: BTreeSet<(String, u64)> = rec["bumped"]
                .as_array()
                .expect("bumped")
                .iter()
                .map(|b| (b[1].as_str().expect("id").to_owned(), b[2].as_u64().expect("count")))
                .collect();
            let got_bumps: BTreeSet<(String, u64)> =
                out.accessed.iter().map(|a| (a.id.clone(), u64::from(a.access_count))).collect();
            if want_bumps != got_bumps {
                bump_bad += 1;
                println!(
                    "BUMPS {name} line {}: want {want_bumps:?} got {got_bumps:?}",
                    rec["line"]
                );
            }
            let want_len = rec["corpus_len_after"].as_u64().expect("corpus_len_after");
            if state.bm25.len() as u64 != want_len {
                corpus_bad += 1;
                println!(
                    "CORPUS {name} line {}: want {want_len} docs, got {}",
                    rec["line"],
                    state.bm25.len()
                );
            }
            carried = Some((lineno, state));
        }
        println!(
            "{name}: recalls={n} top1={:.1}% jaccard={:.3} exact={:.1}%",
            100.0 * top1 as f64 / n.max(1) as f64,
            jac / n.max(1) as f64,
            100.0 * exact as f64 / n.max(1) as f64
        );
        n_all += n;
        top1_all += top1;
        jac_all += jac;
        exact_all += exact;
    }
    let top1 = top1_all as f64 / n_all.max(1) as f64;
    let jac = jac_all / n_all.max(1) as f64;
    println!(
        "OVERALL recalls={n_all} top1={:.2}% jaccard={jac:.4} exact={:.2}% bump_mismatch={bump_bad} corpus_mismatch={corpus_bad} \
         scores_bit_exact={}/{scores_checked} \
         chained_states_equal={}/{chained}",
        100.0 * top1,
        100.0 * exact_all as f64 / n_all.max(1) as f64,
        scores_checked - scores_bad,
        chained - chained_bad
    );
    assert!(top1 >= 0.95, "top-1 agreement {top1:.3} < 0.95");
    assert!(jac >= 0.95, "mean Jaccard {jac:.3} < 0.95");
    assert_eq!(bump_bad, 0, "access bumps differ");
    assert_eq!(corpus_bad, 0, "BM25 corpus growth differs");
    assert_eq!(chained_bad, 0, "state after a recall differs from the reference's");
    assert_eq!(scores_bad, 0, "activation scores differ from the reference's floats");
}
