//! The memory model: soul-protocol 0.4.0's types with its JSON field names.

mod entry;
pub mod time;

pub use entry::{
    MemoryCategory, MemoryEntry, MemoryType, SignificanceScore, SomaticMarker, Visibility,
};
pub use time::Timestamp;
