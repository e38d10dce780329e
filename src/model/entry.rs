//! [`MemoryEntry`] and the enums it uses, with soul-protocol 0.4.0's JSON spelling.

use serde::{Deserialize, Serialize};

use super::time::{self, Timestamp};

/// The built-in memory tiers. Their names double as layer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryType {
    /// Always-loaded persona and human profile.
    Core,
    /// Experiences: one per significant exchange.
    Episodic,
    /// Facts extracted from exchanges or remembered directly.
    Semantic,
    /// How-to knowledge.
    Procedural,
    /// Relationship memory.
    Social,
}

impl MemoryType {
    /// All five tiers in declaration order.
    pub const ALL: [MemoryType; 5] = [
        MemoryType::Core,
        MemoryType::Episodic,
        MemoryType::Semantic,
        MemoryType::Procedural,
        MemoryType::Social,
    ];

    /// The lower-case name (`"semantic"`), which is also the layer name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Core => "core",
            MemoryType::Episodic => "episodic",
            MemoryType::Semantic => "semantic",
            MemoryType::Procedural => "procedural",
            MemoryType::Social => "social",
        }
    }

    /// Parses a lower-case tier name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            MemoryType::Core => 0,
            MemoryType::Episodic => 1,
            MemoryType::Semantic => 2,
            MemoryType::Procedural => 3,
            MemoryType::Social => 4,
        }
    }

    pub(crate) fn from_code(c: u8) -> Self {
        match c {
            0 => MemoryType::Core,
            1 => MemoryType::Episodic,
            3 => MemoryType::Procedural,
            4 => MemoryType::Social,
            _ => MemoryType::Semantic,
        }
    }
}

impl std::fmt::Display for MemoryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may see a memory in a shared channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Anyone.
    Public,
    /// Requesters whose bond strength reaches the threshold (30).
    #[default]
    Bonded,
    /// Only the soul itself (a recall without a requester).
    Private,
}

impl Visibility {
    /// Parses `public`, `bonded` or `private`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "public" => Some(Self::Public),
            "bonded" => Some(Self::Bonded),
            "private" => Some(Self::Private),
            _ => None,
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Visibility::Public => 0,
            Visibility::Bonded => 1,
            Visibility::Private => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Self {
        match c {
            0 => Visibility::Public,
            2 => Visibility::Private,
            _ => Visibility::Bonded,
        }
    }
}

/// The extraction taxonomy of a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryCategory {
    /// Static identity attributes (name, role, location).
    Profile,
    /// Choices and habits.
    Preference,
    /// Named things with attributes.
    Entity,
    /// Time-bound activities.
    Event,
    /// Problem, cause, solution, outcome.
    Case,
    /// Reusable processes.
    Pattern,
    /// Skill execution strategies.
    Skill,
}

/// Emotional context of a memory (Damasio's somatic marker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SomaticMarker {
    /// −1 (negative) to 1 (positive).
    #[serde(default)]
    pub valence: f64,
    /// 0 (calm) to 1 (intense).
    #[serde(default)]
    pub arousal: f64,
    /// A label such as `joy` or `frustration`.
    #[serde(default = "neutral_label")]
    pub label: String,
}

fn neutral_label() -> String {
    "neutral".to_owned()
}

impl Default for SomaticMarker {
    fn default() -> Self {
        Self { valence: 0.0, arousal: 0.0, label: neutral_label() }
    }
}

/// The four parts of the significance gate (LIDA).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SignificanceScore {
    /// How new the exchange is against recent episodes.
    #[serde(default)]
    pub novelty: f64,
    /// Arousal plus |valence|, capped.
    #[serde(default)]
    pub emotional_intensity: f64,
    /// Overlap with the soul's core values.
    #[serde(default)]
    pub goal_relevance: f64,
    /// Length and variety of the text.
    #[serde(default)]
    pub content_richness: f64,
}

fn default_importance() -> u8 {
    5
}
fn default_one() -> f64 {
    1.0
}
fn default_half() -> f64 {
    0.5
}
fn default_domain() -> String {
    crate::DEFAULT_DOMAIN.to_owned()
}
fn now() -> Timestamp {
    chrono::Utc::now().naive_utc()
}

/// One memory, with every field soul-protocol 0.4.0 writes, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// Identifier, 12 lower-case hex characters by convention.
    #[serde(default)]
    pub id: String,
    /// The tier (required even for custom-layer entries).
    #[serde(rename = "type")]
    pub kind: MemoryType,
    /// The text.
    pub content: String,
    /// 1 to 10.
    #[serde(default = "default_importance")]
    pub importance: u8,
    /// A free-text emotion label.
    #[serde(default)]
    pub emotion: Option<String>,
    /// 0 to 1.
    #[serde(default = "default_one")]
    pub confidence: f64,
    /// Entity names mentioned.
    #[serde(default)]
    pub entities: Vec<String>,
    /// When the memory was made.
    #[serde(default = "now", with = "time::ts")]
    pub created_at: Timestamp,
    /// The last recall that returned it.
    #[serde(default, with = "time::ts_opt")]
    pub last_accessed: Option<Timestamp>,
    /// How many recalls returned it.
    #[serde(default)]
    pub access_count: u32,
    /// Emotional context.
    #[serde(default)]
    pub somatic: Option<SomaticMarker>,
    /// Access history for ACT-R decay (the last 100).
    #[serde(default, with = "time::ts_vec")]
    pub access_timestamps: Vec<Timestamp>,
    /// Significance at write time.
    #[serde(default)]
    pub significance: f64,
    /// Link to a [`crate::GeneralEvent`].
    #[serde(default)]
    pub general_event_id: Option<String>,
    /// What superseded this memory: an id, or the reference's sentinels `"new"` and
    /// `"raw-text-contradiction"`. Opaque.
    #[serde(default)]
    pub superseded_by: Option<String>,
    /// Extraction taxonomy.
    #[serde(default)]
    pub category: Option<MemoryCategory>,
    /// L0 summary (~100 tokens).
    #[serde(default)]
    pub r#abstract: Option<String>,
    /// L1 summary (~1K tokens).
    #[serde(default)]
    pub overview: Option<String>,
    /// Retrieval weight, 0 to 1.
    #[serde(default = "default_half")]
    pub salience: f64,
    /// When the memory entered the pipeline.
    #[serde(default, with = "time::ts_opt")]
    pub ingested_at: Option<Timestamp>,
    /// Set by contradiction handling and explicit supersede.
    #[serde(default)]
    pub superseded: bool,
    /// Who may see it.
    #[serde(default)]
    pub visibility: Visibility,
    /// Compressed into a conversation archive.
    #[serde(default)]
    pub archived: bool,
    /// Progressive disclosure marker: the content is the abstract.
    #[serde(default)]
    pub is_summarized: bool,
    /// RBAC/ABAC scope globs (`org:sales:*`); empty = visible to any caller.
    #[serde(default)]
    pub scope: Vec<String>,
    /// The user it belongs to; `None` = visible to every user.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The layer (built-in tier name or a custom layer).
    #[serde(default)]
    pub layer: String,
    /// The domain inside the layer.
    #[serde(default = "default_domain")]
    pub domain: String,
}

/// Appends `items` to an access history and keeps its last `cap` items (the
/// entry's timestamps and the `docs` record's copy of them are trimmed alike).
/// Returns how many were appended and the last of them.
///
/// The history is what appending them one at a time would leave, trimmed once:
/// replaying a memory's pending accesses one at a time onto a full history
/// shifted the whole history per access (by `perf`, a fifth of a recall
/// repeating the same query).
pub(crate) fn push_capped<T: Clone>(
    history: &mut Vec<T>,
    items: impl IntoIterator<Item = T>,
    cap: usize,
) -> (usize, Option<T>) {
    let before = history.len();
    history.extend(items);
    let added = history.len() - before;
    let last = if added > 0 { history.last().cloned() } else { None };
    if history.len() > cap {
        let extra = history.len() - cap;
        history.drain(..extra);
    }
    (added, last)
}

/// A count plus `added`, saturating (access counts, evidence counts).
pub(crate) fn add_count(count: u32, added: usize) -> u32 {
    count.saturating_add(u32::try_from(added).unwrap_or(u32::MAX))
}

impl MemoryEntry {
    /// Records an access at `now`: last access, count, and the timestamp history
    /// keeping its last `cap` timestamps.
    pub fn record_access(&mut self, now: Timestamp, cap: usize) {
        self.record_accesses([now], cap);
    }

    /// Records an access at each of `times`, in order: the same as
    /// [`MemoryEntry::record_access`] of each.
    pub fn record_accesses(&mut self, times: impl IntoIterator<Item = Timestamp>, cap: usize) {
        let (added, last) = push_capped(&mut self.access_timestamps, times, cap);
        if let Some(t) = last {
            self.last_accessed = Some(t);
        }
        self.access_count = add_count(self.access_count, added);
    }

    /// A new entry of `kind` with the reference's defaults, created now (system clock).
    #[must_use]
    pub fn new(kind: MemoryType, content: impl Into<String>) -> Self {
        Self {
            id: String::new(),
            kind,
            content: content.into(),
            importance: 5,
            emotion: None,
            confidence: 1.0,
            entities: Vec::new(),
            created_at: now(),
            last_accessed: None,
            access_count: 0,
            somatic: None,
            access_timestamps: Vec::new(),
            significance: 0.0,
            general_event_id: None,
            superseded_by: None,
            category: None,
            r#abstract: None,
            overview: None,
            salience: 0.5,
            ingested_at: None,
            superseded: false,
            visibility: Visibility::Bonded,
            archived: false,
            is_summarized: false,
            scope: Vec::new(),
            user_id: None,
            layer: kind.as_str().to_owned(),
            domain: default_domain(),
        }
    }

    /// Fills a blank `layer` from `type` and a blank `domain` with `"default"`, as the
    /// reference's validator does on load.
    pub fn normalize(&mut self) {
        if self.layer.is_empty() {
            self.layer = self.kind.as_str().to_owned();
        }
        if self.domain.is_empty() {
            self.domain = default_domain();
        }
    }

    /// True when this fact has been replaced (the reference's recall test:
    /// `superseded_by` set, or the `superseded` flag).
    #[must_use]
    pub fn is_superseded(&self) -> bool {
        self.superseded_by.is_some() || self.superseded
    }

    /// Checks the ranges the reference validates (importance 1..=10, confidence and
    /// salience 0..=1, somatic valence −1..=1 and arousal 0..=1).
    ///
    /// # Errors
    /// Names the first field out of range.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=10).contains(&self.importance) {
            return Err(format!("importance {} is not in 1..=10", self.importance));
        }
        let unit = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name} {v} is not in 0..=1"))
            }
        };
        unit("confidence", self.confidence)?;
        unit("salience", self.salience)?;
        if let Some(s) = &self.somatic {
            unit("somatic.arousal", s.arousal)?;
            if !(-1.0..=1.0).contains(&s.valence) {
                return Err(format!("somatic.valence {} is not in -1..=1", s.valence));
            }
        }
        if self.content.len() > crate::MAX_CONTENT_BYTES {
            return Err(format!(
                "content is {} bytes, over the limit of {}",
                self.content.len(),
                crate::MAX_CONTENT_BYTES
            ));
        }
        Ok(())
    }
}
