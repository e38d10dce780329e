//! soulmem: a persistent, fast and explainable long-term memory for AI agents.
//!
//! An embedded engine on [redb] that re-creates the memory system of soul-protocol
//! 0.4.0: the `observe` write path (sentiment, significance, episodic memories,
//! heuristic facts with dedup, conflicts and contradictions, a knowledge graph) and
//! the `recall` read path (index-driven candidates, ACT-R activation ranking, filters,
//! and a trace explaining each result).
//!
//! Folders follow the data: `model/` (types), `text/` (tokenizer), `storage/` (redb
//! schema and indexes), `write/` (observe), `read/` (recall), `formats/` (`.soul`).
#![deny(missing_docs)]
#![deny(clippy::unwrap_used)]

mod clock;
mod error;
pub mod formats;
pub mod ingest;
mod memory;
pub mod model;
mod profile;
pub mod read;
pub mod replay;
pub mod storage;
pub mod synth;
pub mod text;
pub mod write;

pub use clock::{Clock, FixedClock, SystemClock};
pub use error::{Error, Result};
pub use memory::{
    Durability, LayerView, Memory, MemoryBuilder, Settings, Snapshot, StoreStats, TableSpace,
    TailFill,
};
pub use model::{
    MemoryCategory, MemoryEntry, MemoryType, SignificanceScore, SomaticMarker, Timestamp,
    Visibility,
};
pub use profile::Profile;
pub use read::smart::CognitiveEngine;
pub use read::vector::{Embedder, HashingEmbedder, PrecomputedEmbedder, TfIdfEmbedder};
pub use read::{Recall, RecallQuery, RecallTrace};
pub use write::lifecycle::{EntityForgetReport, ForgetReport, Remember, Supersede};

/// The domain used when none is given.
pub const DEFAULT_DOMAIN: &str = "default";

/// The largest memory content accepted, in bytes (1 MiB).
pub const MAX_CONTENT_BYTES: usize = 1 << 20;

// ---- formats and the rest of the memory model (re-exports) ----
pub use formats::{ImportReport, MemoryDump, SoulDocument};
pub use model::{
    ConversationArchive, CoreMemory, Edge, GeneralEvent, Interaction, KnowledgeGraph,
    MemorySettings, Participant, SelfImage, SelfModel,
};
pub use storage::WriteTimings;
pub use storage::rebuild::RebuildReport;
