//! The read path: `recall`, ranking and its trace.
//!
//! `candidates` (BM25 over the inverted index), `filters` (who may see what),
//! `activation` (ACT-R scoring), `recall` (the default pipeline) and
//! `reference_recall` + `reference_bm25` (soul-protocol 0.4.0's exact behaviour).

pub mod activation;
pub mod candidates;
pub mod filters;
pub mod query;
mod recall;
pub mod reference_bm25;
pub mod reference_recall;
mod reference_store;

pub use query::{Recall, RecallQuery, RecallTrace, ScoreParts, TraceEntry};
pub use recall::{bump_access, query_terms};

use crate::error::Result;
use crate::memory::Memory;

impl Memory {
    /// Recalls the memories that best answer `q`, best first, with a trace.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn recall(&self, q: &RecallQuery) -> Result<Recall> {
        if self.profile().is_reference() {
            self.recall_reference(q)
        } else {
            self.recall_default(q)
        }
    }
}
