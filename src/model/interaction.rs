//! An observed interaction between participants.

use serde::{Deserialize, Deserializer, Serialize};

use super::time::{self, Timestamp};

/// One participant of an interaction and what it said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    /// Free-form role: `user`, `agent`, `soul`, `system`, …
    pub role: String,
    /// A DID or other identifier.
    #[serde(default)]
    pub id: Option<String>,
    /// What the participant said.
    pub content: String,
}

/// A multi-participant interaction for the soul to observe.
///
/// JSON input also accepts the legacy two-party shape `{"user_input", "agent_output"}`,
/// which becomes a `user` and an `agent` participant when `participants` is empty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interaction {
    /// Participants in speaking order.
    pub participants: Vec<Participant>,
    /// Channel name (`"unknown"` by default).
    pub channel: String,
    /// When it happened.
    #[serde(with = "time::ts")]
    pub timestamp: Timestamp,
    /// Free-form metadata (JSON text inside binary encoders).
    #[serde(with = "super::json_text")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

fn unknown_channel() -> String {
    "unknown".to_owned()
}

fn now() -> Timestamp {
    chrono::Utc::now().naive_utc()
}

#[derive(Deserialize)]
struct JsonInteraction {
    #[serde(default)]
    participants: Vec<Participant>,
    #[serde(default = "unknown_channel")]
    channel: String,
    #[serde(default = "now", with = "time::ts")]
    timestamp: Timestamp,
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    user_input: Option<String>,
    #[serde(default)]
    agent_output: Option<String>,
}

#[derive(Deserialize)]
struct BinInteraction {
    participants: Vec<Participant>,
    channel: String,
    #[serde(with = "time::ts")]
    timestamp: Timestamp,
    #[serde(with = "super::json_text")]
    metadata: serde_json::Map<String, serde_json::Value>,
}

impl<'de> Deserialize<'de> for Interaction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !d.is_human_readable() {
            let b = BinInteraction::deserialize(d)?;
            return Ok(Interaction {
                participants: b.participants,
                channel: b.channel,
                timestamp: b.timestamp,
                metadata: b.metadata,
            });
        }
        let j = JsonInteraction::deserialize(d)?;
        let mut participants = j.participants;
        if participants.is_empty() {
            if let Some(u) = j.user_input {
                participants.push(Participant { role: "user".into(), id: None, content: u });
            }
            if let Some(a) = j.agent_output {
                participants.push(Participant { role: "agent".into(), id: None, content: a });
            }
        }
        Ok(Interaction {
            participants,
            channel: j.channel,
            timestamp: j.timestamp,
            metadata: j.metadata,
        })
    }
}

impl Interaction {
    /// A two-party interaction: a `user` then an `agent` participant, channel
    /// `"unknown"`, no metadata.
    #[must_use]
    pub fn from_pair(
        user_input: impl Into<String>,
        agent_output: impl Into<String>,
        timestamp: Timestamp,
    ) -> Self {
        Interaction {
            participants: vec![
                Participant { role: "user".into(), id: None, content: user_input.into() },
                Participant { role: "agent".into(), id: None, content: agent_output.into() },
            ],
            channel: unknown_channel(),
            timestamp,
            metadata: serde_json::Map::new(),
        }
    }

    /// What the first `user` participant said (`""` when there is none).
    #[must_use]
    pub fn user_input(&self) -> &str {
        self.first("user")
    }

    /// What the first `agent` participant said (`""` when there is none).
    #[must_use]
    pub fn agent_output(&self) -> &str {
        self.first("agent")
    }

    fn first(&self, role: &str) -> &str {
        self.participants.iter().find(|p| p.role == role).map_or("", |p| p.content.as_str())
    }
}
