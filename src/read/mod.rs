//! The read path: `recall`, ranking and its trace.
//!
//! `candidates` (BM25 over the inverted index), `filters` (who may see what),
//! `activation` (ACT-R scoring), `recall` (the default pipeline) and
//! `reference_recall` + `reference_bm25` (soul-protocol 0.4.0's exact behaviour),
//! `vector` (embedders and hybrid candidates), `smart` (LLM rerank) and, with the
//! `openai` feature, `openai` (an HTTP adapter for both).

pub mod activation;
pub mod candidates;
pub mod filters;
#[cfg(feature = "openai")]
pub mod openai;
pub mod query;
mod recall;
pub mod reference_bm25;
pub mod reference_recall;
mod reference_store;
pub mod smart;
pub mod vector;

pub use query::{Recall, RecallQuery, RecallTrace, ScoreParts, TraceEntry};
pub(crate) use recall::LISTED_CEILING;
pub use recall::{bump_access, query_terms};

use crate::error::Result;
use crate::memory::Memory;

/// The largest `limit` a recall honours: the pipelines size candidate pools as a
/// small multiple of it, which must not overflow.
const MAX_RECALL_LIMIT: usize = 1 << 24;

impl Memory {
    /// Recalls the memories that best answer `q`, best first, with a trace. A `limit`
    /// above 2^24 is treated as 2^24 (the pipelines multiply it).
    ///
    /// With smart recall on (per query or by settings) and a cognitive engine, the
    /// engine reranks a pool of three times `limit` candidates ([`smart`]).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn recall(&self, q: &RecallQuery) -> Result<Recall> {
        if q.limit > MAX_RECALL_LIMIT {
            let clamped = RecallQuery { limit: MAX_RECALL_LIMIT, ..q.clone() };
            return self.recall(&clamped);
        }
        if q.smart.unwrap_or(self.settings.smart_recall_enabled)
            && let Some(engine) = self.engine.clone()
        {
            return self.smart_recall(q, &engine);
        }
        if self.profile().is_reference() {
            self.recall_reference(q)
        } else {
            self.recall_default(q)
        }
    }
}
