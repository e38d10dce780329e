//! The self-model update (observe step 6): the soul learns what it is for from what
//! it talks about.
//!
//! A re-creation of soul-protocol 0.4.0's heuristic self-model update (the path its
//! cognitive engine takes when no LLM is configured):
//!
//! 1. the tokens (three letters or more) of the user turn, the agent turn and the
//!    facts stored by the observe, minus a list of stop-words, are the exchange's
//!    *keywords*;
//! 2. each domain (the six seeds, then learned ones, in creation order) scores the
//!    number of keywords it knows; the first best domain wins;
//! 3. a winner with two or more matches gains that many pieces of evidence and
//!    learns up to ten of the exchange's new keywords, longest first (while it
//!    knows at most 500);
//! 4. otherwise, with two or more keywords, a new domain is created, named after the
//!    two longest keywords (`"kubernetes_deployment"`), knowing all of them, with
//!    one piece of evidence per keyword;
//! 5. confidence = `min(0.95, 0.1 + 0.85 · (1 − 1 / (1 + 0.1 · evidence)))`;
//! 6. "User's name is X" and "User works at Y" facts become a relationship note.
//!
//! ## Profiles
//! [`Profile::Reference`] reproduces the reference's accidents:
//! - the keywords learned in step 3 are the longest, with ties in the iteration
//!   order of a Python `set` (string-hash order, reproduced for
//!   `PYTHONHASHSEED=0` with [`PyStrSet`]);
//! - the note value is the text after the *last* `"is"` / `"at"` anywhere in the
//!   fact ("User works at Datadog" gives "adog");
//! - a name note replaces the whole note (dropping the workplace), and a workplace
//!   is recorded only once, never updated;
//! - all users share the note `"user"`.
//!
//! [`Profile::Default`] breaks ties alphabetically, takes the value after the
//! template prefix, keeps name and workplace as two parts of the note (a new value
//! replaces its own part), and keys the note by the observe's `user_id` (`"user"`
//! when there is none).

use crate::Profile;
use crate::error::Result;
use crate::memory::Memory;
use crate::model::{SelfImage, SelfModel};
use crate::read::reference_bm25::PyStrSet;
use crate::storage::Writer;
use crate::text::{WordSet, tokenize_list};

/// Matches a domain needs to be reinforced.
pub const MIN_MATCHES: usize = 2;
/// New keywords a reinforced domain learns per exchange at most.
pub const MAX_EXPAND: usize = 10;
/// A domain stops learning keywords beyond this size.
pub const MAX_DOMAIN_KEYWORDS: usize = 500;
/// Confidence never exceeds this.
pub const MAX_CONFIDENCE: f64 = 0.95;

/// Words that say nothing about a domain (the reference's list; tokens are at least
/// three letters, so shorter words need not be listed).
#[rustfmt::skip]
pub const SELF_MODEL_STOP_WORDS: &[&str] = &[
    "the", "this", "that", "these", "those", "which", "what",
    "you", "your", "yours", "yourself", "she", "her", "hers", "him", "his", "they", "them",
    "their", "theirs", "its", "who", "whom", "whose",
    "are", "was", "were", "been", "being", "have", "has", "had", "having", "does", "did",
    "doing", "will", "would", "shall", "should", "may", "might", "must", "can", "could", "need",
    "for", "and", "nor", "but", "yet", "not", "with", "from", "into", "about", "than", "then",
    "also", "just", "more", "most", "very", "too", "some", "any", "all", "each", "every",
    "both", "few", "many", "much", "own", "other", "another", "same", "such", "only", "over",
    "under", "between", "through", "after", "before", "during", "above", "below", "out", "off",
    "down", "once", "here", "there", "when", "where", "why", "how", "while", "until",
    "help", "please", "thanks", "thank", "sure", "okay", "yes", "yeah", "hey", "hello", "well",
    "like", "really", "think", "know", "want", "get", "got", "let", "see", "say", "said",
    "thing", "things", "way", "make", "made", "use", "used", "try", "give", "take", "come",
    "look", "going", "now", "new", "one", "two",
    "start", "first", "best", "good", "great", "better", "right", "whats", "dont", "doesnt",
    "cant", "wont", "isnt", "arent", "min", "per", "always", "never", "keep", "put", "set",
    "asked", "user", "read", "tell", "show", "run",
];

static STOP_SET: WordSet = WordSet::new(SELF_MODEL_STOP_WORDS);

fn is_stop(token: &str) -> bool {
    STOP_SET.contains(token)
}

/// Confidence after `evidence` supporting matches: starts at 0.1, approaches 0.95.
#[must_use]
pub fn confidence(evidence: u32) -> f64 {
    let c = 0.1 + 0.85 * (1.0 - 1.0 / (1.0 + f64::from(evidence) * 0.1));
    c.min(MAX_CONFIDENCE)
}

/// The name of a new domain: its two longest keywords (ties alphabetical) joined by
/// `_`, the only one when there is one, `"general"` when there is none.
#[must_use]
pub fn domain_name<'a>(keywords: impl IntoIterator<Item = &'a str>) -> String {
    let mut ranked: Vec<&str> = keywords.into_iter().collect();
    ranked.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    ranked.dedup();
    match ranked.as_slice() {
        [] => "general".to_owned(),
        [one] => (*one).to_owned(),
        [a, b, ..] => format!("{a}_{b}"),
    }
}

/// The keywords of an exchange, in the order the profile iterates them.
///
/// Reference: the iteration order of the reference's Python set; default: sorted.
struct Keywords {
    order: Vec<String>,
    /// The Python layout of the keyword set (reference profile only).
    py: Option<PyStrSet>,
}

/// The tokens (three letters or more) of an exchange, in text order: the part of
/// its keywords that does not depend on the facts stored (computed ahead for a
/// batch).
#[must_use]
pub fn exchange_tokens(user: &str, agent: &str) -> Vec<String> {
    tokenize_list(&format!("{user} {agent}"), 3)
}

/// [`exchange_tokens`] as [`update_with`] reads them fastest, for `profile`: the
/// default profile's keywords are a sorted set without stop words, so it gets
/// them sorted, without duplicates or stop words (the same keywords); the
/// reference profile's set layout depends on their order, so it gets them as
/// they are.
#[must_use]
pub fn exchange_keywords(user: &str, agent: &str, profile: Profile) -> Vec<String> {
    let mut tokens = exchange_tokens(user, agent);
    if !profile.is_reference() {
        tokens.retain(|t| !is_stop(t));
        tokens.sort_unstable();
        tokens.dedup();
    }
    tokens
}

fn keywords(exchange: &[String], facts: &[&str], profile: Profile) -> Keywords {
    if profile.is_reference() {
        // tokenize(): a set comprehension; then `|=` each fact's token set.
        let mut tokens = PyStrSet::new();
        for w in exchange {
            tokens.add(w);
        }
        for fact in facts {
            let mut t = PyStrSet::new();
            for w in tokenize_list(fact, 3) {
                t.add(&w);
            }
            tokens.merge(&t);
        }
        // `tokens - STOP_WORDS`: CPython copies `tokens` and discards when it is
        // more than four times larger than the other set, which keeps the slot
        // order; otherwise it adds the survivors to a new set in iteration order.
        let survivors: Vec<String> =
            tokens.iter().filter(|t| !is_stop(t)).map(str::to_owned).collect();
        let (order, py) = if tokens.len() >> 2 > SELF_MODEL_STOP_WORDS.len() {
            // Discarding keeps the copy's slot order. Its layout (with the holes
            // the discards leave) is approximated by re-adding the survivors; that
            // only matters if `meaningful` is copied again (`new_keywords`).
            let mut copy = PyStrSet::new();
            copy.merge(&tokens);
            let order: Vec<String> =
                copy.iter().filter(|t| !is_stop(t)).map(str::to_owned).collect();
            let mut rebuilt = PyStrSet::new();
            for t in &order {
                rebuilt.add(t);
            }
            (order, rebuilt)
        } else {
            let mut m = PyStrSet::new();
            for t in &survivors {
                m.add(t);
            }
            (m.iter().map(str::to_owned).collect(), m)
        };
        Keywords { order, py: Some(py) }
    } else {
        // Sorting is linear on an exchange already sorted ([`exchange_keywords`])
        // without facts, the common case.
        let fact_tokens: Vec<Vec<String>> = facts.iter().map(|f| tokenize_list(f, 3)).collect();
        let tokens = exchange.iter().chain(fact_tokens.iter().flatten()).map(String::as_str);
        let mut all: Vec<&str> = tokens.filter(|t| !is_stop(t)).collect();
        all.sort_unstable();
        all.dedup();
        let order: Vec<String> = all.into_iter().map(str::to_owned).collect();
        Keywords { order, py: None }
    }
}

/// The keywords a reinforced domain learns: the exchange's keywords it does not know,
/// longest first, at most [`MAX_EXPAND`].
///
/// `known` is sorted (as every stored keyword list is).
fn new_keywords(kw: &Keywords, known: &[String], profile: Profile) -> Vec<String> {
    let is_known = |t: &str| known.binary_search_by(|k| k.as_str().cmp(t)).is_ok();
    let mut fresh: Vec<String> = match (&kw.py, profile.is_reference()) {
        (Some(py), true) => {
            // `meaningful - current_kws`: a copy of `meaningful` with the known
            // words discarded when it is more than four times larger, else the
            // survivors added to a new set; either way iterated in slot order.
            let layout = if py.len() >> 2 > known.len() {
                let mut copy = PyStrSet::new();
                copy.merge(py);
                copy
            } else {
                let mut fresh = PyStrSet::new();
                for t in kw.order.iter().filter(|t| !is_known(t)) {
                    fresh.add(t);
                }
                fresh
            };
            layout.iter().filter(|t| !is_known(t)).map(str::to_owned).collect()
        }
        _ => kw.order.iter().filter(|t| !is_known(t)).cloned().collect(),
    };
    // Stable sort: equal lengths keep the order above (alphabetical by default).
    fresh.sort_by_key(|w| std::cmp::Reverse(w.len()));
    fresh.truncate(MAX_EXPAND);
    fresh
}

fn add_evidence(model: &mut SelfModel, domain: &str, matches: usize) {
    let img = model.self_images.entry(domain.to_owned()).or_insert_with(|| SelfImage {
        domain: domain.to_owned(),
        confidence: 0.1,
        evidence_count: 0,
    });
    img.evidence_count = crate::model::add_count(img.evidence_count, matches);
    img.confidence = confidence(img.evidence_count);
}

/// Updates `model` from one observed exchange and the facts it stored.
///
/// `user_id` only matters to the default profile (it keys the relationship note).
pub fn update(
    model: &mut SelfModel,
    user: &str,
    agent: &str,
    facts: &[&str],
    user_id: Option<&str>,
    profile: Profile,
) {
    update_with(model, &exchange_tokens(user, agent), facts, user_id, profile);
}

/// [`update`] with the exchange given as its [`exchange_tokens`] (or
/// [`exchange_keywords`], the same keywords).
pub fn update_with(
    model: &mut SelfModel,
    exchange: &[String],
    facts: &[&str],
    user_id: Option<&str>,
    profile: Profile,
) {
    let kw = keywords(exchange, facts, profile);

    // The first domain with the most matches.
    let best = model.best_domain(&kw.order).map(|(d, score)| (d.to_owned(), score));

    match best {
        Some((domain, score)) if score >= MIN_MATCHES => {
            add_evidence(model, &domain, score);
            let known: &[String] = model.domain_keywords().get(&domain).map_or(&[], Vec::as_slice);
            // A full domain learns nothing (at least one new keyword would not fit).
            if known.len() < MAX_DOMAIN_KEYWORDS {
                let fresh = new_keywords(&kw, known, profile);
                if !fresh.is_empty() && known.len() + fresh.len() <= MAX_DOMAIN_KEYWORDS {
                    let mut words = known.to_vec();
                    words.extend(fresh);
                    model.set_keywords(domain, words);
                }
            }
        }
        _ if kw.order.len() >= MIN_MATCHES => {
            let name = domain_name(kw.order.iter().map(String::as_str));
            model.set_keywords(name.clone(), kw.order.clone());
            add_evidence(model, &name, kw.order.len());
        }
        _ => {}
    }

    for fact in facts {
        if profile.is_reference() {
            reference_note(model, fact);
        } else {
            default_note(model, fact, user_id);
        }
    }
}

/// Python's `text.split(sep)[-1].strip()`.
fn after_last<'a>(text: &'a str, sep: &str) -> &'a str {
    crate::write::sentiment::py_strip(text.rsplit(sep).next().unwrap_or(text))
}

fn reference_note(model: &mut SelfModel, fact: &str) {
    let lower = fact.to_lowercase();
    if lower.contains("user's name is") {
        let name = after_last(fact, "is");
        model.relationship_notes.insert("user".to_owned(), format!("Name: {name}"));
    } else if lower.contains("user works at") {
        let workplace = after_last(fact, "at");
        let existing = model.relationship_notes.get("user").cloned().unwrap_or_default();
        if !existing.contains("Works at") {
            let note = if existing.is_empty() {
                format!("Works at: {workplace}")
            } else {
                format!("{existing}; Works at: {workplace}")
            };
            model.relationship_notes.insert("user".to_owned(), note);
        }
    }
}

const NAME_PREFIX: &str = "user's name is ";
const WORK_PREFIX: &str = "user works at ";

fn default_note(model: &mut SelfModel, fact: &str, user_id: Option<&str>) {
    let lower = fact.to_lowercase();
    let (label, prefix) = if lower.starts_with(NAME_PREFIX) {
        ("Name", NAME_PREFIX)
    } else if lower.starts_with(WORK_PREFIX) {
        ("Works at", WORK_PREFIX)
    } else {
        return;
    };
    // The prefix is ASCII, so its byte length is the same in `fact`.
    let Some(value) = fact.get(prefix.len()..).map(str::trim) else { return };
    if value.is_empty() {
        return;
    }
    let key = user_id.unwrap_or("user").to_owned();
    let existing = model.relationship_notes.get(&key).cloned().unwrap_or_default();
    let mut parts: Vec<String> = existing
        .split("; ")
        .filter(|p| !p.is_empty() && !p.starts_with(&format!("{label}: ")))
        .map(str::to_owned)
        .collect();
    let part = format!("{label}: {value}");
    if label == "Name" {
        parts.insert(0, part);
    } else {
        parts.push(part);
    }
    model.relationship_notes.insert(key, parts.join("; "));
}

/// Observe step 6: loads, updates and stores the self-model.
pub(crate) fn update_stored(
    w: &mut Writer<'_>,
    exchange: &[String],
    facts: &[&str],
    user_id: Option<&str>,
) -> Result<()> {
    let profile = w.profile();
    update_with(w.self_model_mut()?, exchange, facts, user_id, profile);
    Ok(())
}

impl Memory {
    /// The soul's self-model: self-images, relationship notes and domain keywords,
    /// as the observes so far have shaped it.
    ///
    /// # Errors
    /// Storage errors, or a stored self-model that is not valid JSON.
    pub fn self_model(&self) -> Result<SelfModel> {
        self.read()?.self_model()
    }

    /// Replaces the self-model (e.g. when restoring a dump).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn set_self_model(&self, model: &SelfModel) -> Result<()> {
        self.write(|w| {
            w.set_self_model(model.clone());
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_curve() {
        assert!((confidence(0) - 0.1).abs() < 1e-12);
        assert!((confidence(10) - 0.525).abs() < 1e-12);
        assert!(confidence(10_000) <= MAX_CONFIDENCE);
    }

    #[test]
    fn domain_names() {
        assert_eq!(domain_name(["soup", "kitchen", "recipes"]), "kitchen_recipes");
        assert_eq!(domain_name(["garden"]), "garden");
        assert_eq!(domain_name([]), "general");
    }

    #[test]
    fn reinforces_a_seed_domain() {
        let mut m = SelfModel::default();
        update(&mut m, "My python code has a database error", "", &[], None, Profile::Default);
        let img = &m.self_images["technical_helper"];
        assert_eq!(img.evidence_count, 4);
        let kws = &m.domain_keywords()["technical_helper"];
        assert!(kws.iter().any(|k| k == "python"));
    }

    #[test]
    fn creates_a_domain() {
        let mut m = SelfModel::default();
        update(&mut m, "Sourdough starter feeding schedule", "", &[], None, Profile::Default);
        assert!(m.self_images.contains_key("sourdough_schedule"));
        assert_eq!(m.self_images["sourdough_schedule"].evidence_count, 4);
    }

    proptest::proptest! {
        /// An exchange given as its keywords updates the model as its tokens
        /// do, in both profiles.
        #[test]
        fn an_exchange_as_keywords_updates_as_its_tokens(
            turns in proptest::collection::vec(
                ("((python|code|the|and|garden|soil|Seeds|database|error|with) ){0,8}",
                 "(User works at [A-Z][a-z]{2,6}|I like tea|)"),
                1..6),
        ) {
            for profile in [Profile::Default, Profile::Reference] {
                let (mut a, mut b) = (SelfModel::default(), SelfModel::default());
                for (user, fact) in &turns {
                    let facts: Vec<&str> = [fact.as_str()].into_iter().filter(|f| !f.is_empty()).collect();
                    let (tokens, keywords) =
                        (exchange_tokens(user, "ok then"), exchange_keywords(user, "ok then", profile));
                    update_with(&mut a, &tokens, &facts, Some("u"), profile);
                    update_with(&mut b, &keywords, &facts, Some("u"), profile);
                }
                proptest::prop_assert_eq!(
                    serde_json::to_string(&a).expect("json"),
                    serde_json::to_string(&b).expect("json")
                );
            }
        }
    }

    #[test]
    fn notes_by_profile() {
        let mut r = SelfModel::default();
        update(&mut r, "", "", &["User works at Datadog"], None, Profile::Reference);
        assert_eq!(r.relationship_notes["user"], "Works at: adog");
        update(&mut r, "", "", &["User's name is Kristine"], None, Profile::Reference);
        assert_eq!(r.relationship_notes["user"], "Name: tine");

        let mut d = SelfModel::default();
        update(&mut d, "", "", &["User works at Datadog"], Some("kris"), Profile::Default);
        update(&mut d, "", "", &["User's name is Kristine"], Some("kris"), Profile::Default);
        update(&mut d, "", "", &["User works at Stripe"], Some("kris"), Profile::Default);
        assert_eq!(d.relationship_notes["kris"], "Name: Kristine; Works at: Stripe");
    }
}
