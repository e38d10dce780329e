//! The read path: `recall`, ranking and its trace.

pub mod activation;
pub mod candidates;
pub mod filters;
pub mod query;
mod recall;
pub mod reference_bm25;

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
        self.recall_default(q)
    }
}
