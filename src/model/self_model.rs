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
    /// Domain → sorted keywords (changed through [`SelfModel::set_keywords`] only,
    /// which keeps [`SelfModel::best_domain`]'s index).
    domain_keywords: IndexMap<String, Vec<String>>,
    /// Keyword → the positions of the domains listing it, ascending.
    #[serde(skip)]
    keyword_index: KeywordIndex,
}

/// Which domains list each keyword: derived from the keyword lists, so it takes no
/// part in equality.
#[derive(Debug, Clone, Default)]
struct KeywordIndex(foldhash::HashMap<String, Vec<usize>>);

/// Adds domain position `at` to `word`'s list.
fn index_add(index: &mut foldhash::HashMap<String, Vec<usize>>, word: &str, at: usize) {
    let list = index.entry(word.to_owned()).or_default();
    let k = list.partition_point(|&p| p < at);
    list.insert(k, at);
}

/// Removes domain position `at` from `word`'s list.
fn index_remove(index: &mut foldhash::HashMap<String, Vec<usize>>, word: &str, at: usize) {
    if let Some(list) = index.get_mut(word) {
        list.retain(|&p| p != at);
        if list.is_empty() {
            index.remove(word);
        }
    }
}

impl PartialEq for KeywordIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
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
            keyword_index: KeywordIndex::default(),
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
        let index = &mut self.keyword_index.0;
        let (at, old) = match self.domain_keywords.get_full(&domain) {
            Some((at, _, old)) => (at, old.as_slice()),
            None => (self.domain_keywords.len(), &[][..]),
        };
        // Both lists are sorted: only the words that come or go change the index.
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < words.len() {
            match (old.get(i), words.get(j)) {
                (Some(o), Some(n)) if o == n => {
                    i += 1;
                    j += 1;
                }
                (Some(o), Some(n)) if o > n => {
                    index_add(index, n, at);
                    j += 1;
                }
                (Some(o), _) => {
                    index_remove(index, o, at);
                    i += 1;
                }
                (None, Some(n)) => {
                    index_add(index, n, at);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        self.domain_keywords.insert(domain, words);
    }

    /// Domain → sorted keywords, in the order domains were added.
    #[must_use]
    pub fn domain_keywords(&self) -> &IndexMap<String, Vec<String>> {
        &self.domain_keywords
    }

    /// The first domain (in [`SelfModel::domain_keywords`] order) listing the most
    /// of `tokens` (each occurrence counts), with that count; `None` when no domain
    /// lists any of them.
    #[must_use]
    pub fn best_domain(&self, tokens: &[String]) -> Option<(&str, usize)> {
        let mut counts = vec![0usize; self.domain_keywords.len()];
        for t in tokens {
            for &p in self.keyword_index.0.get(t).into_iter().flatten() {
                counts[p] += 1;
            }
        }
        let mut best: Option<(usize, usize)> = None;
        for (p, &c) in counts.iter().enumerate() {
            if c > best.map_or(0, |b| b.1) {
                best = Some((p, c));
            }
        }
        best.and_then(|(p, c)| self.domain_keywords.get_index(p).map(|(d, _)| (d.as_str(), c)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WORDS: [&str; 10] =
        ["code", "rust", "tea", "music", "debug", "garden", "tokio", "jazz", "python", "rain"];

    /// What [`SelfModel::best_domain`] answers, by reading every keyword list.
    fn brute(m: &SelfModel, tokens: &[String]) -> Option<(String, usize)> {
        let mut best: Option<(&String, usize)> = None;
        for (domain, words) in m.domain_keywords() {
            let score = tokens.iter().filter(|t| words.binary_search(t).is_ok()).count();
            if score > best.map_or(0, |b| b.1) {
                best = Some((domain, score));
            }
        }
        best.map(|(d, s)| (d.clone(), s))
    }

    proptest! {
        /// The keyword index answers as a scan of every domain's list, through
        /// added and replaced domains (the seed domains included).
        #[test]
        fn best_domain_matches_a_scan(
            sets in prop::collection::vec(
                (0usize..5, prop::collection::vec(0usize..10, 0..6)), 0..12),
            asks in prop::collection::vec(prop::collection::vec(0usize..10, 0..6), 1..6),
        ) {
            let mut m = SelfModel::default();
            for (d, ws) in sets {
                m.set_keywords(format!("d{d}"), ws.iter().map(|&w| WORDS[w].to_owned()).collect());
            }
            // A copy made through serde rebuilds the index from the lists.
            let json = serde_json::to_string(&m).expect("json");
            let back: SelfModel = serde_json::from_str(&json).expect("json");
            for ask in asks {
                let tokens: Vec<String> = ask.iter().map(|&w| WORDS[w].to_owned()).collect();
                let want = brute(&m, &tokens);
                let got = m.best_domain(&tokens).map(|(d, s)| (d.to_owned(), s));
                prop_assert_eq!(&got, &want);
                let again = back.best_domain(&tokens).map(|(d, s)| (d.to_owned(), s));
                prop_assert_eq!(again, want);
            }
        }
    }
}
