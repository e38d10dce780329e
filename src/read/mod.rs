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
pub use recall::{bump_access, query_terms};

use crate::error::Result;
use crate::memory::Memory;

impl Memory {
    /// Recalls the memories that best answer `q`, best first, with a trace.
    ///
    /// With smart recall on (per query or by settings) and a cognitive engine, the
    /// engine reranks a pool of three times `limit` candidates ([`smart`]).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn recall(&self, q: &RecallQuery) -> Result<Recall> {
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
