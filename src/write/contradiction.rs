//! Heuristic contradiction detection between a new statement and active facts.
//!
//! A port of soul-protocol 0.4.0's `ContradictionDetector.detect_heuristic`, used by
//! `observe` twice: on each stored fact against the active facts ([`detect`], step
//! 4c) and on the raw user text ([`detect_raw_text`], step 4d).
//!
//! For one new text and candidate facts `(id, content)`:
//! 1. **Pre-selection** ([`find_similar`]): candidates with dedup
//!    [`super::dedup::similarity`] >= 0.3, sorted by similarity
//!    descending (ties keep candidate order), the first 5.
//! 2. For each of those, in that order: a **negation** flip ([`check_negation`],
//!    confidence `min(sim + 0.2, 1)`); otherwise an **entity-attribute** conflict
//!    ([`check_entity_attribute`], confidence `min(sim + 0.1, 1)`).
//! 3. If the new text has [`verb_facts`], every candidate (in candidate order) not
//!    flagged yet is checked for a **verb-fact** conflict ([`check_verb_fact`],
//!    confidence 0.8): same attribute (location, employer, role), different value.
//!
//! ## What the caller must supply
//! - Candidates are the **active** facts (neither `superseded` nor `superseded_by`)
//!   in the semantic store's `facts()` order (importance desc, `created_at` desc,
//!   insertion). Only two kinds of candidate can produce a result, so a store may
//!   pass just these, in that order, and get identical output: those with
//!   similarity >= 0.3 (use [`super::dedup::probe_tokens`] with
//!   [`SIMILARITY_THRESHOLD`]), and, when the new text has verb facts, those
//!   holding the same attribute ([`verb_facts`] of each fact, indexed by
//!   [`Attribute`]) with another value.
//! - Reference profile: step 4c loops over the facts stored by this observe, each
//!   against a snapshot of the active facts taken after storing them (so they see
//!   each other, QUIRKS Q14); a fact superseded by an earlier iteration leaves the
//!   candidates. Step 4d uses the active facts after 4c, including this observe's
//!   own facts (Q12), and ignores results whose `old_id` 4c already reported.
//! - Default profile: the caller excludes the facts stored by the same observe from
//!   the candidates of both steps. No function here needs to know which they are.
//!
//! ## Profiles
//! [`Profile::Reference`] reproduces the reference including its accidents: verb
//! patterns without a leading word boundary ("Ravi lives in Chennai" is a location),
//! "I'm based in" / "I am based in" never matching, "don't like" not negative,
//! a role pattern spanning sentences whose role is often the verb ("work @ shopify"),
//! and reasons that show the new value as "was" and the old one as "now".
//! [`Profile::Default`] adds word boundaries (also to the entity-attribute subject),
//! recognises "I'm / I am based in", "don't like" / "do not like" (and curly
//! apostrophes), keeps every captured value inside one sentence (stops at
//! `. , ! ? ;` or a newline), only reads a role from a copula ("User is a X at Y",
//! "I am / I'm a X at Y"), and writes reasons as "was OLD, now NEW".
//!
//! Regex semantics match Python's `re` (leftmost-first, lazy quantifiers); Python's
//! `$` also matches before a final newline, reproduced by ignoring one trailing
//! `\n`; `\s` is widened to Python's white space (U+001C..U+001F included). `\w`
//! and `\b` are Unicode in both, with tiny category differences (combining marks,
//! some numerals), and Python's case-insensitive `i` also matches `İ` and `ı`.

use std::cell::RefCell;
use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::dedup::{dedup_tokens, similarity_hashes, stored_tokens};
use super::sentiment::py_strip;
use crate::profile::Profile;
use crate::text::TextMemo;

/// Pre-selection similarity threshold.
pub const SIMILARITY_THRESHOLD: f64 = 0.3;
/// How many similar candidates the negation / entity-attribute checks see.
pub const TOP_K: usize = 5;
/// Confidence of a verb-fact conflict.
pub const VERB_FACT_CONFIDENCE: f64 = 0.8;

/// Which check found a contradiction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContradictionKind {
    /// One text has the positive form of a negation pair, the other the negated one.
    Negation,
    /// "the X is Y" against "the X is Z".
    EntityAttribute,
    /// Different location, employer or role.
    VerbFact,
}

/// A contradiction: the fact `old_id` is contradicted by the new text.
#[derive(Debug, Clone, PartialEq)]
pub struct Contradiction {
    /// The contradicted (old) fact.
    pub old_id: String,
    /// Human-readable explanation, in the reference's wording.
    pub reason: String,
    /// 0 to 1.
    pub confidence: f64,
    /// The check that fired.
    pub kind: ContradictionKind,
}

/// The attribute a verb fact asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attribute {
    /// Where the user lives ("lives in", "moved to", "based in").
    Location,
    /// Where the user works ("works at/for", "joined", "started at").
    Employer,
    /// Role and employer together, as `"role @ employer"`.
    Role,
}

impl Attribute {
    /// The reference's key: `location`, `employer`, `role`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Attribute::Location => "location",
            Attribute::Employer => "employer",
            Attribute::Role => "role",
        }
    }
}

/// A candidate of the pre-selection, with its similarity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilarFact<'a> {
    /// Position in the candidate slice.
    pub index: usize,
    /// The fact's id.
    pub id: &'a str,
    /// The fact's content.
    pub content: &'a str,
    /// Dedup similarity with the new text.
    pub similarity: f64,
}

/// Compiles a pattern written in Python's syntax, widening `\s` to Python's white
/// space (which also has U+001C..U+001F).
fn re(pattern: &str) -> Regex {
    let widened = pattern.replace(r"[\w\s]", r"[\w\s\x1C-\x1F]").replace(r"\s+", r"[\s\x1C-\x1F]+");
    Regex::new(&widened).expect("static pattern compiles")
}

/// A negation pair: the pattern sources (as the reason quotes them) and compiled.
struct NegationPair {
    pos_src: &'static str,
    neg_src: &'static str,
    pos: Regex,
    neg: Regex,
}

/// Positive / negated pattern sources of the reference.
const REF_NEGATIONS: &[(&str, &str)] = &[
    (r"\bis\b", r"\bis not\b|\bisn'?t\b"),
    (r"\blikes?\b|\bloves?\b|\bprefers?\b", r"\bhates?\b|\bdislikes?\b|\bdoesn'?t like\b"),
    (r"\bworks? (?:at|for)\b", r"\bleft\b|\bquit\b|\bno longer works?\b"),
    (r"\bcan\b", r"\bcan(?:no|'?)t\b"),
    (r"\bdoes\b", r"\bdoes(?:n'?t| not)\b"),
    (r"\bhas\b", r"\bhas(?:n'?t| not)\b|\bno longer has\b"),
    (r"\bwill\b", r"\bwon'?t\b|\bwill not\b"),
    (r"\btrue\b", r"\bfalse\b"),
    (r"\byes\b", r"\bno\b"),
];

/// The default profile's pairs: "don't like" / "do not like" are negative, and
/// curly apostrophes count.
const DEFAULT_NEGATIONS: &[(&str, &str)] = &[
    (r"\bis\b", r"\bis not\b|\bisn['’]?t\b"),
    (
        r"\blikes?\b|\bloves?\b|\bprefers?\b",
        r"\bhates?\b|\bdislikes?\b|\b(?:doesn|don|didn)['’]?t like\b|\b(?:does|do|did) not like\b",
    ),
    (r"\bworks? (?:at|for)\b", r"\bleft\b|\bquit\b|\bno longer works?\b"),
    (r"\bcan\b", r"\bcan(?:no|['’]?)t\b"),
    (r"\bdoes\b", r"\bdoes(?:n['’]?t| not)\b"),
    (r"\bhas\b", r"\bhas(?:n['’]?t| not)\b|\bno longer has\b"),
    (r"\bwill\b", r"\bwon['’]?t\b|\bwill not\b"),
    (r"\btrue\b", r"\bfalse\b"),
    (r"\byes\b", r"\bno\b"),
];

fn compile_pairs(src: &'static [(&'static str, &'static str)]) -> Vec<NegationPair> {
    src.iter()
        .map(|&(p, n)| NegationPair {
            pos_src: p,
            neg_src: n,
            pos: re(&format!("(?i){p}")),
            neg: re(&format!("(?i){n}")),
        })
        .collect()
}

static NEG_REF: LazyLock<Vec<NegationPair>> = LazyLock::new(|| compile_pairs(REF_NEGATIONS));
static NEG_DEFAULT: LazyLock<Vec<NegationPair>> =
    LazyLock::new(|| compile_pairs(DEFAULT_NEGATIONS));

static ENTITY_REF: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)(?:user(?:'s)?|their|the)\s+(\w[\w\s]{0,20}?)\s+is\s+(.+?)(?:\.|$)"));
static ENTITY_DEFAULT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:user(?:['’]s)?|their|the)\s+(\w[\w\s]{0,20}?)\s+is\s+(.+?)(?:\.|$)")
});

/// Verb patterns of the reference, in priority order (first match per attribute
/// wins). The role pattern has two groups.
static VERB_REF: LazyLock<Vec<(Regex, Attribute)>> = LazyLock::new(|| {
    vec![
        (re(r"(?i)(?:user|i)\s+(?:live?s?|resides?)\s+in\s+(.+?)(?:\.|,|$)"), Attribute::Location),
        (
            re(r"(?i)(?:user|i)\s+(?:moved?|relocated?|moved? to)\s+(?:to\s+)?(.+?)(?:\.|,|$)"),
            Attribute::Location,
        ),
        (re(r"(?i)(?:user|i)\s+(?:is\s+)?based\s+in\s+(.+?)(?:\.|,|$)"), Attribute::Location),
        (
            re(r"(?i)(?:user|i)\s+(?:works?\s+(?:at|for)|joined?|started?\s+at)\s+(.+?)(?:\.|,|$)"),
            Attribute::Employer,
        ),
        (
            re(r"(?i)(?:user|i)\s+(?:is\s+)?(?:a\s+)?(.+?)\s+(?:at|@)\s+(.+?)(?:\.|,|$)"),
            Attribute::Role,
        ),
    ]
});

/// Verb patterns of the default profile: word boundaries, "I'm / I am based in",
/// values confined to one sentence, roles only after a copula.
static VERB_DEFAULT: LazyLock<Vec<(Regex, Attribute)>> = LazyLock::new(|| {
    const V: &str = r"([^.,!?;\n]+?)(?:[.,!?;\n]|$)";
    vec![
        (re(&format!(r"(?i)\b(?:user|i)\s+(?:live?s?|resides?)\s+in\s+{V}")), Attribute::Location),
        (
            re(&format!(r"(?i)\b(?:user|i)\s+(?:moved?|relocated?)\s+(?:to\s+)?{V}")),
            Attribute::Location,
        ),
        (
            re(&format!(r"(?i)\b(?:user|i)(?:\s+is|\s+am|['’]m)?\s+based\s+in\s+{V}")),
            Attribute::Location,
        ),
        (
            re(&format!(r"(?i)\b(?:user|i)\s+(?:works?\s+(?:at|for)|joined?|started?\s+at)\s+{V}")),
            Attribute::Employer,
        ),
        (
            re(&format!(
                r"(?i)\b(?:user\s+is|i\s+am|i['’]m)\s+(?:an?\s+)?([^.,!?;\n]+?)\s+(?:at|@)\s+{V}"
            )),
            Attribute::Role,
        ),
    ]
});

/// Python's `$` (no MULTILINE) also matches before one final newline; no match of
/// these patterns can use that newline, so dropping it reproduces Python exactly.
fn dollar_view(text: &str) -> &str {
    text.strip_suffix('\n').unwrap_or(text)
}

fn norm(s: &str) -> String {
    py_strip(s).to_lowercase()
}

/// The verb facts a text asserts, at most one per attribute, in the order location,
/// employer, role (the first matching pattern per attribute wins). Values are
/// stripped and lower-cased; a role is `"role @ employer"`.
///
/// A store indexes active facts by these attributes: a new text with verb facts
/// needs every active fact that has one of the same attributes.
#[must_use]
pub fn verb_facts(text: &str, profile: Profile) -> Vec<(Attribute, String)> {
    let patterns = if profile.is_reference() { &*VERB_REF } else { &*VERB_DEFAULT };
    let text = dollar_view(text);
    let mut out: Vec<(Attribute, String)> = Vec::new();
    for (pattern, attr) in patterns {
        if out.iter().any(|(a, _)| a == attr) {
            continue;
        }
        let Some(caps) = pattern.captures(text) else { continue };
        let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
        let value = match attr {
            Attribute::Role => format!("{} @ {}", norm(group(1)), norm(group(2))),
            _ => norm(group(1)),
        };
        out.push((*attr, value));
    }
    out
}

/// The first verb fact of `text` (convenience over [`verb_facts`]).
#[must_use]
pub fn verb_attribute(text: &str, profile: Profile) -> Option<(Attribute, String)> {
    verb_facts(text, profile).into_iter().next()
}

/// The reference's `_find_similar`: candidates with similarity >= 0.3, most similar
/// first (ties keep candidate order), at most 5. Candidates are assumed active.
#[must_use]
pub fn find_similar<'a>(content: &str, candidates: &[(&'a str, &'a str)]) -> Vec<SimilarFact<'a>> {
    // The new text's tokens once, not once per candidate.
    let tokens = crate::text::TokenHashes::from(&dedup_tokens(content));
    let mut scored: Vec<SimilarFact<'a>> = candidates
        .iter()
        .enumerate()
        .filter_map(|(index, &(id, fact))| {
            let sim = similarity_hashes(&tokens, &stored_tokens(fact));
            (sim >= SIMILARITY_THRESHOLD).then_some(SimilarFact {
                index,
                id,
                content: fact,
                similarity: sim,
            })
        })
        .collect();
    scored.sort_by(|a, b| b.similarity.total_cmp(&a.similarity));
    scored.truncate(TOP_K);
    scored
}

/// A negation flip between `new` and `old`: for the first pair where one text has
/// the positive form (and not the negated one) and the other has the negated form.
/// Returns the reason.
#[must_use]
pub fn check_negation(new: &str, old: &str, profile: Profile) -> Option<String> {
    NewText::of(new, profile).negation_with(old)
}

/// Which form of a negation pair a text has: the negated one, else the positive
/// one, else neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Negated,
    Positive,
    Neither,
}

fn form(pair: &NegationPair, text: &str) -> Form {
    if pair.neg.is_match(text) {
        Form::Negated
    } else if pair.pos.is_match(text) {
        Form::Positive
    } else {
        Form::Neither
    }
}

/// What the checks need of the new text, found once per detection rather than
/// once per candidate it is compared with.
struct NewText<'a> {
    profile: Profile,
    pairs: &'static [NegationPair],
    /// Its form of each negation pair.
    forms: Vec<Form>,
    /// Its "the X is Y" attributes, found when first needed (a negation found
    /// first, or a lone negation check, needs none).
    attributes: std::cell::OnceCell<Arc<[(String, String)]>>,
    text: &'a str,
}

impl<'a> NewText<'a> {
    fn of(text: &'a str, profile: Profile) -> Self {
        let pairs: &'static [NegationPair] =
            if profile.is_reference() { &NEG_REF } else { &NEG_DEFAULT };
        Self {
            profile,
            pairs,
            forms: pairs.iter().map(|p| form(p, text)).collect(),
            attributes: std::cell::OnceCell::new(),
            text,
        }
    }

    /// [`check_negation`] against `old`: the first pair where one text has the
    /// positive form and the other the negated one. A pair the new text has in
    /// neither form cannot flip, so `old` is not matched against it.
    fn negation_with(&self, old: &str) -> Option<String> {
        for (pair, &mine) in self.pairs.iter().zip(&self.forms) {
            if mine == Form::Neither {
                continue;
            }
            let theirs = form(pair, old);
            if (mine == Form::Positive && theirs == Form::Negated)
                || (mine == Form::Negated && theirs == Form::Positive)
            {
                return Some(format!(
                    "Negation detected: '{}' vs '{}'",
                    pair.pos_src, pair.neg_src
                ));
            }
        }
        None
    }

    /// [`check_entity_attribute`] against `old`.
    fn attribute_with(&self, old: &str) -> Option<String> {
        let mine = self.attributes.get_or_init(|| entity_attributes_memo(self.text, self.profile));
        if mine.is_empty() {
            return None;
        }
        attribute_conflict(mine, &entity_attributes_memo(old, self.profile), self.profile)
    }
}

/// A fact's analyses, one memo per profile: a contradiction check meets the same
/// facts of a user observe after observe, and a new fact (analysed as the new
/// text) is a candidate of the observes after it.
#[derive(Default)]
struct FactMemo {
    attributes: TextMemo<Arc<[(String, String)]>>,
    verb_facts: TextMemo<Arc<[(Attribute, String)]>>,
}

thread_local! {
    static FACT_MEMO: RefCell<[FactMemo; 2]> = RefCell::new(Default::default());
}

fn fact_memo<V>(profile: Profile, f: impl FnOnce(&mut FactMemo) -> V) -> V {
    FACT_MEMO.with_borrow_mut(|m| f(&mut m[usize::from(profile.is_reference())]))
}

/// [`entity_attributes`] from a per-thread memo.
fn entity_attributes_memo(text: &str, profile: Profile) -> Arc<[(String, String)]> {
    fact_memo(profile, |m| {
        m.attributes.get_or_insert_with(text, |t| entity_attributes(t, profile).into())
    })
}

/// [`verb_facts`] from a per-thread memo.
fn verb_facts_memo(text: &str, profile: Profile) -> Arc<[(Attribute, String)]> {
    fact_memo(profile, |m| m.verb_facts.get_or_insert_with(text, |t| verb_facts(t, profile).into()))
}

fn entity_attributes(text: &str, profile: Profile) -> Vec<(String, String)> {
    let pattern = if profile.is_reference() { &*ENTITY_REF } else { &*ENTITY_DEFAULT };
    pattern
        .captures_iter(dollar_view(text))
        .map(|c| {
            let g = |i: usize| c.get(i).map_or("", |m| m.as_str());
            (norm(g(1)), norm(g(2)))
        })
        .collect()
}

/// "the X is Y" in `new` against "the X is Z" in `old` (same attribute, different
/// value; first such pair in text order). Returns the reason.
#[must_use]
pub fn check_entity_attribute(new: &str, old: &str, profile: Profile) -> Option<String> {
    attribute_conflict(&entity_attributes(new, profile), &entity_attributes(old, profile), profile)
}

fn attribute_conflict(
    attrs_new: &[(String, String)],
    attrs_old: &[(String, String)],
    profile: Profile,
) -> Option<String> {
    for (attr_n, val_n) in attrs_new {
        for (attr_o, val_o) in attrs_old {
            if attr_n == attr_o && val_n != val_o {
                let (was, now) =
                    if profile.is_reference() { (val_n, val_o) } else { (val_o, val_n) };
                return Some(format!(
                    "Entity-attribute conflict: '{attr_n}' was '{was}', now '{now}'"
                ));
            }
        }
    }
    None
}

fn verb_conflict(
    new_facts: &[(Attribute, String)],
    old_facts: &[(Attribute, String)],
    profile: Profile,
) -> Option<String> {
    for (attr, val_n) in new_facts {
        if let Some((_, val_o)) = old_facts.iter().find(|(a, _)| a == attr) {
            if val_n != val_o {
                let (was, now) =
                    if profile.is_reference() { (val_n, val_o) } else { (val_o, val_n) };
                return Some(format!(
                    "Verb-fact conflict: '{}' was '{was}', now '{now}'",
                    attr.as_str()
                ));
            }
        }
    }
    None
}

/// A verb fact of `new` with another value in `old` (first attribute in the order
/// location, employer, role). Returns the reason.
#[must_use]
pub fn check_verb_fact(new: &str, old: &str, profile: Profile) -> Option<String> {
    verb_conflict(&verb_facts(new, profile), &verb_facts(old, profile), profile)
}

/// Whether `text` can contradict any fact at all: it has a form (either) of a
/// negation pair, a "the X is Y" attribute, or a verb fact. Every detection needs
/// one of them in the new text, so when this is false [`detect`] and
/// [`detect_scoped`] find nothing whatever the candidates, and a caller may skip
/// looking them up. An attribute's " is " is itself the positive form of the
/// first pair (`\bis\b`), so the attribute pattern is never run here.
#[must_use]
pub fn may_contradict(text: &str, profile: Profile) -> bool {
    let (pairs, verbs) = if profile.is_reference() {
        (&*NEG_REF, &*VERB_REF)
    } else {
        (&*NEG_DEFAULT, &*VERB_DEFAULT)
    };
    pairs.iter().any(|p| form(p, text) != Form::Neither)
        || verbs.iter().any(|(v, _)| v.is_match(dollar_view(text)))
}

/// The contradictions between `new_content` and the candidate facts `(id, content)`
/// (active facts, in `facts()` order; see the module docs), in the reference's
/// order: pre-selected negation / entity-attribute results by similarity, then
/// verb-fact results in candidate order. Each candidate appears at most once.
#[must_use]
pub fn detect(
    new_content: &str,
    candidates: &[(&str, &str)],
    profile: Profile,
) -> Vec<Contradiction> {
    detect_scoped(new_content, candidates, profile, |_| true)
}

/// [`detect`], when the caller knows which candidates may state one of the verb
/// attributes `new_content` states (an attribute index, as the default profile
/// keeps): the verb-fact pass reads only the candidates `may_state(i)` admits
/// (`i` their index in `candidates`). A candidate stating none of the new text's
/// attributes cannot hold a verb-fact conflict, so with an exact index the result
/// is [`detect`]'s; the other candidates' texts are then never matched against
/// the verb patterns.
#[must_use]
pub fn detect_scoped(
    new_content: &str,
    candidates: &[(&str, &str)],
    profile: Profile,
    may_state: impl Fn(usize) -> bool,
) -> Vec<Contradiction> {
    let mut results: Vec<Contradiction> = Vec::new();
    let mut flagged: Vec<&str> = Vec::new();
    let similar = find_similar(new_content, candidates);
    if !similar.is_empty() {
        let new = NewText::of(new_content, profile);
        for s in &similar {
            if let Some(reason) = new.negation_with(s.content) {
                results.push(Contradiction {
                    old_id: s.id.to_owned(),
                    reason,
                    confidence: (s.similarity + 0.2).min(1.0),
                    kind: ContradictionKind::Negation,
                });
                flagged.push(s.id);
                continue;
            }
            if let Some(reason) = new.attribute_with(s.content) {
                results.push(Contradiction {
                    old_id: s.id.to_owned(),
                    reason,
                    confidence: (s.similarity + 0.1).min(1.0),
                    kind: ContradictionKind::EntityAttribute,
                });
                flagged.push(s.id);
            }
        }
    }
    let new_facts = verb_facts_memo(new_content, profile);
    if !new_facts.is_empty() {
        for (i, &(id, content)) in candidates.iter().enumerate() {
            if flagged.contains(&id) || !may_state(i) {
                continue;
            }
            if let Some(reason) =
                verb_conflict(&new_facts, &verb_facts_memo(content, profile), profile)
            {
                results.push(Contradiction {
                    old_id: id.to_owned(),
                    reason,
                    confidence: VERB_FACT_CONFIDENCE,
                    kind: ContradictionKind::VerbFact,
                });
                flagged.push(id);
            }
        }
    }
    results
}

/// Step 4d: the same detection run on the raw user text. The reference profile's
/// caller passes every active fact (this observe's included) and drops results whose
/// `old_id` step 4c already reported; the default profile's caller leaves out the
/// facts stored by this observe.
#[must_use]
pub fn detect_raw_text(
    user_text: &str,
    candidates: &[(&str, &str)],
    profile: Profile,
) -> Vec<Contradiction> {
    detect(user_text, candidates, profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const R: Profile = Profile::Reference;
    const D: Profile = Profile::Default;

    /// Words of sentences that do and do not trigger the checks.
    const WORDS: &[&str] = &[
        "i", "user", "the", "their", "is", "not", "isn't", "like", "likes", "don't", "hate",
        "work", "works", "at", "for", "left", "quit", "no", "longer", "can", "can't", "does",
        "has", "will", "won't", "true", "false", "yes", "live", "lives", "in", "moved", "to",
        "based", "am", "a", "an", "engineer", "acme", "paris", "oslo", "tea", "coffee", "color",
        "green", "blue", "weather", "today", "nice", "we", "went", "walk", ".", ",",
    ];

    fn sentence() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(WORDS), 1..12).prop_map(|w| w.join(" "))
    }

    proptest! {
        /// A text that may not contradict finds nothing among any candidates,
        /// in both profiles: skipping its lookup changes no result.
        #[test]
        fn no_trigger_no_contradiction(
            new in sentence(),
            olds in prop::collection::vec(sentence(), 0..8),
        ) {
            let cands: Vec<(String, String)> =
                olds.into_iter().enumerate().map(|(i, c)| (format!("f{i}"), c)).collect();
            let pairs: Vec<(&str, &str)> =
                cands.iter().map(|(i, c)| (i.as_str(), c.as_str())).collect();
            for p in [R, D] {
                if !may_contradict(&new, p) {
                    prop_assert!(detect(&new, &pairs, p).is_empty(), "{new:?} {pairs:?}");
                }
            }
        }

        /// The memos answer as the analyses do, for each profile, whichever
        /// profile asked about the text first.
        #[test]
        fn the_memos_answer_as_the_analyses(text in sentence(), reference_first: bool) {
            let order = if reference_first { [R, D] } else { [D, R] };
            for p in order.into_iter().chain(order) {
                prop_assert_eq!(&*entity_attributes_memo(&text, p), &entity_attributes(&text, p)[..]);
                prop_assert_eq!(&*verb_facts_memo(&text, p), &verb_facts(&text, p)[..]);
            }
        }
    }

    #[test]
    fn small_talk_may_not_contradict() {
        for p in [R, D] {
            assert!(!may_contradict("We went for a walk today, nice weather", p));
            assert!(may_contradict("I no longer work at Acme", p));
            assert!(may_contradict("The color is green", p));
            assert!(!entity_attributes("The color is green", p).is_empty());
            assert!(may_contradict("I moved to Oslo", p));
            assert!(may_contradict("Yes", p));
        }
        assert!(may_contradict("I don't like tea", D));
    }

    fn loc(text: &str, p: Profile) -> Option<String> {
        verb_facts(text, p).into_iter().find(|(a, _)| *a == Attribute::Location).map(|(_, v)| v)
    }

    #[test]
    fn word_boundary_fix() {
        assert_eq!(loc("Ravi lives in Chennai", R).as_deref(), Some("chennai"));
        assert_eq!(loc("Ravi lives in Chennai", D), None);
        assert_eq!(loc("Our taxi moved to the left lane", D), None);
        assert_eq!(loc("I live in Oslo", D).as_deref(), Some("oslo"));
    }

    #[test]
    fn based_in_fix() {
        assert_eq!(loc("I'm based in Lisbon", R), None);
        assert_eq!(loc("I am based in Lisbon", R), None);
        assert_eq!(loc("I'm based in Lisbon", D).as_deref(), Some("lisbon"));
        assert_eq!(loc("I am based in Lisbon.", D).as_deref(), Some("lisbon"));
        assert_eq!(loc("User is based in Lisbon", D).as_deref(), Some("lisbon"));
    }

    #[test]
    fn dont_like_fix() {
        assert!(check_negation("I don't like cilantro", "User dislikes cilantro", R).is_some());
        assert!(check_negation("I don't like cilantro", "User dislikes cilantro", D).is_none());
        assert!(check_negation("I don't like cilantro", "User likes cilantro", D).is_some());
        assert!(check_negation("I do not like cilantro", "User loves cilantro", D).is_some());
    }

    #[test]
    fn role_fix() {
        let role = |t: &str, p| {
            verb_facts(t, p).into_iter().find(|(a, _)| *a == Attribute::Role).map(|(_, v)| v)
        };
        assert_eq!(role("I work @ Shopify now", R).as_deref(), Some("work @ shopify now"));
        assert_eq!(role("I work @ Shopify now", D), None);
        assert_eq!(
            role("I live in oslo. i work @ aker", R).as_deref(),
            Some("live in oslo. i work @ aker")
        );
        assert_eq!(role("I live in oslo. i work @ aker", D), None);
        assert_eq!(role("I'm a designer at Figma.", D).as_deref(), Some("designer @ figma"));
        assert_eq!(role("User is an engineer @ Arup", D).as_deref(), Some("engineer @ arup"));
    }

    #[test]
    fn reason_order_fix() {
        let r = check_verb_fact("User lives in Lyon", "User lives in Paris", R);
        assert_eq!(r.as_deref(), Some("Verb-fact conflict: 'location' was 'lyon', now 'paris'"));
        let d = check_verb_fact("User lives in Lyon", "User lives in Paris", D);
        assert_eq!(d.as_deref(), Some("Verb-fact conflict: 'location' was 'paris', now 'lyon'"));
        let e = check_entity_attribute(
            "the release codename is Osprey now",
            "The release codename is Falcon",
            D,
        );
        assert_eq!(
            e.as_deref(),
            Some("Entity-attribute conflict: 'release codename' was 'falcon', now 'osprey now'")
        );
    }

    #[test]
    fn detect_order_and_confidence() {
        let cands =
            [("a", "User lives in Paris"), ("b", "User likes tea"), ("c", "User moved to Rome")];
        let got = detect("User lives in Lyon", &cands, R);
        let ids: Vec<&str> = got.iter().map(|c| c.old_id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert!(got.iter().all(|c| c.kind == ContradictionKind::VerbFact));
        let got = detect("User hates tea", &[("b", "User likes tea")], R);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, ContradictionKind::Negation);
    }

    #[test]
    fn scoped_verb_pass_reads_only_the_candidates_admitted() {
        let cands = [
            ("a", "User lives in Paris"),
            ("b", "User works at Arup"),
            ("c", "User moved to Rome"),
            ("d", "User likes tea"),
        ];
        let new = "I live in Lyon. I work at Figma";
        // An exact attribute index (the facts stating an attribute the new text
        // states) gives detect's answer.
        let states: Vec<Attribute> = verb_facts(new, D).into_iter().map(|(a, _)| a).collect();
        let exact = |i: usize| verb_facts(cands[i].1, D).iter().any(|(a, _)| states.contains(a));
        let ids = |got: Vec<Contradiction>| -> Vec<String> {
            got.into_iter().map(|c| c.old_id).collect()
        };
        let all = ids(detect(new, &cands, D));
        assert_eq!(all, ["a", "b", "c"]);
        assert_eq!(ids(detect_scoped(new, &cands, D, exact)), all);
        // A candidate left out is not read by the verb pass.
        assert_eq!(ids(detect_scoped(new, &cands, D, |i| i != 1)), ["a", "c"]);
    }

    #[test]
    fn trailing_newline_like_python_dollar() {
        assert_eq!(loc("I live in Oslo\n", R).as_deref(), Some("oslo"));
    }
}
