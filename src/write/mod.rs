//! The write path: `observe` and the heuristics it runs.

pub mod contradiction;
pub mod dedup;
pub mod entities;
pub mod facts;
pub mod sentiment;
pub mod significance;
