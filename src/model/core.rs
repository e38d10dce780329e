//! Core memory and the memory settings of a soul.

use serde::{Deserialize, Serialize};

/// Always-loaded memory: the persona description and the human profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CoreMemory {
    /// Who the soul is.
    pub persona: String,
    /// What the soul knows about its human.
    pub human: String,
}

/// The memory subsystem's configuration (`soul.json` → `memory`), with the
/// reference's defaults for every missing field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemorySettings {
    /// Cap on episodic entries (10000).
    pub episodic_max_entries: u32,
    /// Cap on semantic facts (1000).
    pub semantic_max_facts: u32,
    /// Minimum importance kept (3).
    pub importance_threshold: u32,
    /// Minimum confidence kept (0.7).
    pub confidence_threshold: f64,
    /// Token budget of the persona (500).
    pub persona_tokens: u32,
    /// Token budget of the human profile (500).
    pub human_tokens: u32,
    /// Auto-consolidation every N interactions (20).
    pub consolidation_interval: u32,
    /// Skip entity extraction and the self-model update for insignificant
    /// interactions (true).
    pub skip_deep_processing_on_low_significance: bool,
    /// LLM reranking on smart recall (false).
    pub smart_recall_enabled: bool,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            episodic_max_entries: 10_000,
            semantic_max_facts: 1000,
            importance_threshold: 3,
            confidence_threshold: 0.7,
            persona_tokens: 500,
            human_tokens: 500,
            consolidation_interval: 20,
            skip_deep_processing_on_low_significance: true,
            smart_recall_enabled: false,
        }
    }
}
