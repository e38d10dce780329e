//! The read path: `recall`, ranking and its trace.

pub mod activation;
pub mod reference_bm25;
pub mod reference_recall;
