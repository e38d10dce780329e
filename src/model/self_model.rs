//! The soul's self-concept: self-images, relationship notes and domain keywords.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// One facet of the self-concept (Klein's self-model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfImage {
    /// The domain, e.g. `technical_helper`.
    #[serde(default)]
    pub domain: String,
    /// 0 to 1 (default 0.1).
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// Interactions supporting this self-image.
    #[serde(default)]
    pub evidence_count: u32,
}

fn default_confidence() -> f64 {
    0.1
}

impl SelfImage {
    /// Checks that `confidence` is in 0..=1.
    ///
    /// # Errors
    /// Says which value is out of range.
    pub fn validate(&self) -> Result<(), String> {
        if (0.0..=1.0).contains(&self.confidence) {
            Ok(())
        } else {
            Err(format!("confidence {} is not in 0..=1", self.confidence))
        }
    }
}

/// The six seed domains every soul starts with, and their keywords.
pub const SEED_DOMAINS: [(&str, &[&str]); 6] = [
    (
        "technical_helper",
        &[
            "python",
            "javascript",
            "code",
            "programming",
            "debug",
            "error",
            "api",
            "database",
            "server",
            "deploy",
            "git",
            "docker",
            "algorithm",
            "function",
            "class",
            "variable",
            "testing",
            "fastapi",
            "django",
            "react",
            "typescript",
            "rust",
        ],
    ),
    (
        "creative_writer",
        &[
            "write",
            "story",
            "poem",
            "creative",
            "fiction",
            "narrative",
            "character",
            "plot",
            "blog",
            "essay",
            "article",
            "content",
            "copywriting",
            "draft",
            "edit",
            "prose",
        ],
    ),
    (
        "knowledge_guide",
        &[
            "explain",
            "teach",
            "learn",
            "understand",
            "concept",
            "theory",
            "research",
            "study",
            "science",
            "history",
            "philosophy",
            "education",
            "tutorial",
            "guide",
            "documentation",
        ],
    ),
    (
        "problem_solver",
        &[
            "solve",
            "fix",
            "issue",
            "problem",
            "solution",
            "troubleshoot",
            "diagnose",
            "analyze",
            "investigate",
            "debug",
            "resolve",
            "broken",
        ],
    ),
    (
        "creative_collaborator",
        &[
            "brainstorm",
            "idea",
            "design",
            "prototype",
            "sketch",
            "innovation",
            "experiment",
            "iterate",
            "collaborate",
            "vision",
            "concept",
            "create",
        ],
    ),
    (
        "emotional_companion",
        &[
            "feel",
            "emotion",
            "support",
            "listen",
            "care",
            "empathy",
            "comfort",
            "friend",
            "companion",
            "talk",
            "vent",
            "advice",
            "stress",
            "anxious",
            "happy",
            "sad",
        ],
    ),
];

/// The self-model's data (`memory/self_model.json`).
///
/// Keyword lists are kept sorted and free of duplicates (the reference holds sets and
/// writes them sorted). Loading starts from the seed domains and replaces them domain
/// by domain with the stored lists, as the reference does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RawSelfModel")]
pub struct SelfModel {
    /// Domain → self-image.
    pub self_images: IndexMap<String, SelfImage>,
    /// Entity → note (`"user"` → `"Name: Alice; …"`).
    pub relationship_notes: IndexMap<String, String>,
    /// Domain → sorted keywords.
    pub domain_keywords: IndexMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct RawSelfModel {
    #[serde(default)]
    self_images: IndexMap<String, SelfImage>,
    #[serde(default)]
    relationship_notes: IndexMap<String, String>,
    #[serde(default)]
    domain_keywords: IndexMap<String, Vec<String>>,
}

impl From<RawSelfModel> for SelfModel {
    fn from(raw: RawSelfModel) -> Self {
        let mut m = SelfModel {
            self_images: raw.self_images,
            relationship_notes: raw.relationship_notes,
            ..SelfModel::default()
        };
        for (domain, words) in raw.domain_keywords {
            m.set_keywords(domain, words);
        }
        m
    }
}

impl Default for SelfModel {
    /// An empty self-model with the six seed domains.
    fn default() -> Self {
        let mut m = SelfModel {
            self_images: IndexMap::new(),
            relationship_notes: IndexMap::new(),
            domain_keywords: IndexMap::new(),
        };
        for (domain, words) in SEED_DOMAINS {
            m.set_keywords(domain.to_owned(), words.iter().map(|w| (*w).to_owned()).collect());
        }
        m
    }
}

impl SelfModel {
    /// Replaces a domain's keywords (sorted, duplicates removed). A new domain goes
    /// last; an existing one keeps its position.
    pub fn set_keywords(&mut self, domain: String, mut words: Vec<String>) {
        words.sort();
        words.dedup();
        self.domain_keywords.insert(domain, words);
    }

    /// Checks every self-image's range.
    ///
    /// # Errors
    /// Names the self-image and the problem.
    pub fn validate(&self) -> Result<(), String> {
        for (name, img) in &self.self_images {
            img.validate().map_err(|p| format!("self_images[{name:?}]: {p}"))?;
        }
        Ok(())
    }
}
