//! Index keys derived from an entry. Every index row of a memory comes from here, so
//! the writer, the consistency check and the rebuild agree by construction.

use std::collections::{BTreeMap, BTreeSet};

use crate::Profile;
use crate::model::MemoryEntry;
use crate::text::{tokenize_dedup, tokenize_list};

/// The layer whose active entries are "facts" (dedup, conflicts, contradictions).
pub const FACT_LAYER: &str = "semantic";

/// Every index row a memory owns, besides its entry and [`super::DocInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexKeys {
    /// Index token → term frequency.
    pub tokens: BTreeMap<String, u32>,
    /// Number of index tokens (document length).
    pub doc_len: u32,
    /// Dedup tokens (active facts only).
    pub fact_tokens: BTreeSet<String>,
    /// Conflict slot keys (active facts only).
    pub slots: BTreeSet<String>,
    /// Verb attributes (active facts only).
    pub attributes: BTreeSet<String>,
    /// Lower-cased entity names.
    pub entities: BTreeSet<String>,
}

/// Is `entry` an active semantic fact?
#[must_use]
pub fn is_active_fact(entry: &MemoryEntry) -> bool {
    entry.layer == FACT_LAYER && !entry.is_superseded()
}

/// Computes the index keys of `entry` under `profile`.
#[must_use]
pub fn index_keys(entry: &MemoryEntry, profile: Profile) -> IndexKeys {
    let mut keys = IndexKeys::default();
    for t in tokenize_list(&entry.content, 3) {
        *keys.tokens.entry(t).or_insert(0) += 1;
        keys.doc_len += 1;
    }
    if is_active_fact(entry) {
        keys.fact_tokens = tokenize_dedup(&entry.content);
        keys.slots = crate::write::keys::slot_keys(&entry.content, profile).into_iter().collect();
        keys.attributes =
            crate::write::keys::attribute_keys(&entry.content, profile).into_iter().collect();
    }
    keys.entities = entry.entities.iter().map(|e| e.to_lowercase()).collect();
    keys
}
