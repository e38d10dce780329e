//! The CPython set re-creation (`PyStrSet`) against orders printed by the reference.

use serde_json::Value;
use soulmem::read::reference_bm25::{PyStrSet, py_str_hash, query_terms};

fn cases() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/recall/pyset_cases.json");
    let text =
        std::fs::read_to_string(path).expect("pyset_cases.json (scripts/gen_recall_fixtures.py)");
    serde_json::from_str(&text).expect("valid JSON")
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array().expect("list").iter().map(|s| s.as_str().expect("str").to_owned()).collect()
}

#[test]
fn str_hashes_match_cpython() {
    let c = cases();
    for (s, h) in c["hashes"].as_object().expect("object") {
        assert_eq!(py_str_hash(s), h.as_i64().expect("int"), "hash({s:?})");
    }
}

#[test]
fn set_add_order_matches_cpython() {
    let c = cases();
    for case in c["adds"].as_array().expect("list") {
        let mut set = PyStrSet::new();
        for w in strs(&case["seq"]) {
            set.add(&w);
        }
        let got: Vec<String> = set.iter().map(str::to_owned).collect();
        assert_eq!(got, strs(&case["order"]), "adds {:?}", case["seq"]);
    }
}

#[test]
fn expanded_query_order_matches_cpython() {
    let c = cases();
    for case in c["queries"].as_array().expect("list") {
        let q = case["q"].as_str().expect("str");
        assert_eq!(query_terms(q), strs(&case["order"]), "query {q:?}");
    }
}
