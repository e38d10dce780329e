//! Helpers shared by the `reliability_*` tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use soulmem::Memory;

/// Checks the numbered batches a reopened store holds: memories of the semantic
/// layer in `domain` whose content starts with `prefix` and a batch number. Every
/// batch must be whole (`k` memories) and every acknowledged one present; any other
/// memory there fails the check.
pub fn assert_batches(
    mem: &Memory,
    domain: &str,
    prefix: &str,
    k: u64,
    acked: &BTreeSet<u64>,
    label: &str,
) {
    let mut per: BTreeMap<u64, u64> = BTreeMap::new();
    for e in mem.layer("semantic").expect("layer").entries(Some(domain)).expect("entries") {
        let b: u64 = e
            .content
            .strip_prefix(prefix)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{label}: stray {:?}", e.content));
        *per.entry(b).or_default() += 1;
    }
    for (b, n) in &per {
        assert_eq!(*n, k, "{label}: partial batch {b}");
    }
    for b in acked {
        assert!(per.contains_key(b), "{label}: acknowledged batch {b} lost");
    }
}
