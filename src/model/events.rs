//! General events (autobiographical themes) and conversation archives.

use serde::{Deserialize, Serialize};

use super::time::{self, Timestamp};

fn now() -> Timestamp {
    chrono::Utc::now().naive_utc()
}

/// A theme that groups episodes (Conway's self-memory system, general-event level).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneralEvent {
    /// Identifier, 12 lower-case hex characters by convention.
    #[serde(default)]
    pub id: String,
    /// The theme, e.g. `"Lisbon move"`.
    #[serde(default)]
    pub theme: String,
    /// Episodic entries in this event.
    #[serde(default)]
    pub episode_ids: Vec<String>,
    /// When the event started.
    #[serde(default = "now", with = "time::ts")]
    pub started_at: Timestamp,
    /// When an episode was last added.
    #[serde(default = "now", with = "time::ts")]
    pub last_updated: Timestamp,
}

/// A compressed conversation session (`to_dict()["archives"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationArchive {
    /// Identifier (required).
    pub id: String,
    /// First exchange of the session.
    #[serde(with = "time::ts")]
    pub start_time: Timestamp,
    /// Last exchange of the session.
    #[serde(with = "time::ts")]
    pub end_time: Timestamp,
    /// Rule-based or LLM summary (required).
    pub summary: String,
    /// Notable exchanges.
    #[serde(default)]
    pub key_moments: Vec<String>,
    /// Participant names.
    #[serde(default)]
    pub participants: Vec<String>,
    /// Ids of the memories the session produced.
    #[serde(default)]
    pub memory_refs: Vec<String>,
    /// Free-form metadata (JSON text inside binary encoders).
    #[serde(default, with = "super::json_text")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}
