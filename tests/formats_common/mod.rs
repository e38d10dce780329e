//! Helpers shared by the `formats_*` tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use soulmem::MemoryEntry;
use soulmem::formats::{MemoryDump, SoulDocument};

/// The samples written by soul-protocol 0.4.0 (a copy of `shared/soulfile/samples`).
pub fn samples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/soulfile")
}

pub fn sample_bytes(name: &str) -> Vec<u8> {
    std::fs::read(samples().join(name)).unwrap()
}

pub const PASSWORD: &str = "correct horse battery staple";

fn sorted(v: &[MemoryEntry]) -> Vec<MemoryEntry> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

/// Compares two dumps with each layer's entries sorted by id (directory layouts
/// regroup entries by domain).
pub fn assert_same_memory(a: &MemoryDump, b: &MemoryDump, archives_too: bool) {
    assert_eq!(a.core, b.core, "core");
    for t in soulmem::formats::ENTRY_TIERS {
        assert_eq!(sorted(a.tier(t).unwrap()), sorted(b.tier(t).unwrap()), "tier {t}");
    }
    let la: Vec<_> = a.custom_layers.keys().collect();
    let lb: Vec<_> = b.custom_layers.keys().collect();
    assert_eq!(la, lb, "custom layer names");
    for (k, v) in &a.custom_layers {
        assert_eq!(sorted(v), sorted(&b.custom_layers[k]), "custom layer {k}");
    }
    assert_eq!(a.graph, b.graph, "graph");
    assert_eq!(a.self_model, b.self_model, "self_model");
    assert_eq!(a.general_events, b.general_events, "general_events");
    if archives_too {
        assert_eq!(a.archives, b.archives, "archives");
    }
}

/// Everything but the manifest (whose `exported` changes) is equal.
pub fn assert_same_doc(a: &SoulDocument, b: &SoulDocument) {
    assert_same_memory(&a.memory, &b.memory, true);
    assert_eq!(a.soul, b.soul, "soul.json");
    assert_eq!(a.dna_md, b.dna_md, "dna.md");
    assert_eq!(a.state_json, b.state_json, "state.json");
    assert_eq!(a.trust_chain, b.trust_chain, "trust chain");
    assert_eq!(a.public_key, b.public_key, "public key");
    assert_eq!(a.private_key, b.private_key, "private key");
}
