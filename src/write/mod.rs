//! The write path: `observe` and the heuristics it runs.

pub mod audit;
pub mod contradiction;
pub mod dedup;
pub mod entities;
pub mod evict;
pub mod facts;
pub mod keys;
pub mod lifecycle;
mod near;
pub mod observe;
pub mod self_model;
pub mod sentiment;
pub mod significance;
