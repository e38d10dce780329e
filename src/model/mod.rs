//! The memory model: soul-protocol 0.4.0's types with its JSON field names.

mod entry;
pub(crate) use entry::{add_count, push_capped};
pub mod time;

pub use entry::{
    MemoryCategory, MemoryEntry, MemoryType, SignificanceScore, SomaticMarker, Visibility,
};
pub use time::Timestamp;

mod core;
mod events;
mod graph;
mod interaction;
mod json_text;
mod self_model;

pub use self::core::{CoreMemory, MemorySettings};
pub use events::{ConversationArchive, GeneralEvent};
pub use graph::{Edge, KnowledgeGraph};
pub use interaction::{Interaction, Participant};
pub use self_model::{SEED_DOMAINS, SelfImage, SelfModel};
