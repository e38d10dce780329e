//! What a recall asks for and what it returns.

use serde::Serialize;

use crate::model::MemoryEntry;

/// A recall request. Build it with [`RecallQuery::new`] and set the filters.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallQuery {
    /// The retrieval cue.
    pub query: String,
    /// How many memories to return (default 10).
    pub limit: usize,
    /// Only these tiers (`episodic`, `semantic`, `procedural`, `social`); `None` = all
    /// built-in tiers.
    pub types: Option<Vec<String>>,
    /// Only this layer (a built-in tier or a custom layer).
    pub layer: Option<String>,
    /// Only this domain.
    pub domain: Option<String>,
    /// Only memories of this user plus unattributed ones.
    pub user_id: Option<String>,
    /// Only memories at least this important (default 0).
    pub min_importance: i32,
    /// Who is asking: `None` is the soul itself (sees everything, private included).
    pub requester_id: Option<String>,
    /// The requester's bond strength, 0 to 100 (default 100); `bonded` memories need
    /// the settings' threshold (30).
    pub bond_strength: f64,
    /// The requester's scopes: a memory with scopes is visible only when one of them
    /// matches one of these (hierarchical globs, `org:sales:*`). `None` = no scope
    /// filtering.
    pub scopes: Option<Vec<String>>,
    /// Include superseded facts (default false).
    pub include_superseded: bool,
    /// Return `limit` more memories after the first `limit`, as abstracts
    /// (progressive disclosure; default false).
    pub progressive: bool,
    /// Record why each candidate was kept or dropped (default false; cheap either
    /// way for the returned memories).
    pub explain: bool,
    /// Fuse vector similarity into ranking when the memory has an embedder (default
    /// true; without an embedder this changes nothing).
    pub hybrid: bool,
    /// Smart recall (rerank by the cognitive engine) for this call: `None` follows
    /// [`crate::Settings::smart_recall_enabled`].
    pub smart: Option<bool>,
}

impl RecallQuery {
    /// A query for `text` with the defaults.
    #[must_use]
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            query: text.into(),
            limit: 10,
            types: None,
            layer: None,
            domain: None,
            user_id: None,
            min_importance: 0,
            requester_id: None,
            bond_strength: 100.0,
            scopes: None,
            include_superseded: false,
            progressive: false,
            explain: false,
            hybrid: true,
            smart: None,
        }
    }
}

/// The parts of a memory's activation score.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScoreParts {
    /// ACT-R base level (recency and frequency).
    pub base: f64,
    /// Spreading activation (query relevance), before its weight.
    pub spread: f64,
    /// Emotional boost, before its weight.
    pub emotion: f64,
    /// Significance term (weighted).
    pub significance: f64,
    /// Salience term (weighted).
    pub salience: f64,
    /// Personality modulation.
    pub personality: f64,
    /// Vector similarity (hybrid recall), before its weight.
    pub vector: f64,
    /// The total activation.
    pub total: f64,
}

/// One candidate in a recall trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEntry {
    /// Memory id.
    pub id: String,
    /// Its layer.
    pub layer: String,
    /// Where it came from: `text`, `graph:<entity>`, `vector`.
    pub source: String,
    /// Raw BM25 score of the text match.
    pub bm25: f64,
    /// The filter that dropped it, if any.
    pub dropped_by: Option<String>,
    /// Score parts (for candidates that were ranked).
    pub score: Option<ScoreParts>,
    /// Its rank in the result (0-based), if returned.
    pub rank: Option<usize>,
    /// Query terms found in the memory's own content (default profile, `explain`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content_terms: Vec<String>,
    /// Query terms found only in the conversation context it is indexed with
    /// (default profile, `explain`): the match came from the surrounding turns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context_terms: Vec<String>,
}

/// Why recall returned what it did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecallTrace {
    /// The profile that ranked.
    pub profile: String,
    /// Query terms with their IDF weights.
    pub terms: Vec<(String, f64)>,
    /// Entities of the query found in the graph, and the related entities followed
    /// from each (at most `read::recall::MAX_GRAPH_TERMS` in all: once that many
    /// are found, later edges and later entities are not read).
    pub graph: Vec<(String, Vec<String>)>,
    /// Every candidate considered (when `explain`), else only the returned ones.
    pub candidates: Vec<TraceEntry>,
    /// Postings read (a measure of work).
    pub postings_read: u64,
    /// Stored vectors scanned (hybrid recall).
    pub vectors_read: u64,
    /// Rerank decisions (smart recall).
    pub rerank: Vec<String>,
}

/// The result of a recall.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recall {
    /// The memories, best first (overflow abstracts last when progressive).
    pub memories: Vec<MemoryEntry>,
    /// Their activation scores, parallel to `memories`.
    pub scores: Vec<f64>,
    /// The explanation.
    pub trace: RecallTrace,
}
