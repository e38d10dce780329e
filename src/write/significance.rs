//! The attention gate: is an exchange significant enough to become an episode?
//!
//! A port of soul-protocol 0.4.0's heuristic significance (LIDA), plus the values
//! `observe` derives from it for the episodic entry (its salience, abstract and
//! importance). Both profiles behave the same (QUIRKS Q17: product).
//!
//! The text scored is `"{user} {agent}"` ([`combined_text`]), except emotion, which
//! comes from the user's text alone (the somatic marker of
//! [`super::sentiment::observe_sentiment`]).
//!
//! - novelty = 1 - mean `relevance_score(combined, recent)` over the recent
//!   episodic contents (1 when there are none), plus `min(0.2, 0.01 x distinct
//!   >= 3-letter tokens)`, capped at 1;
//! - emotional intensity = `min(1, 0.5 x arousal + 0.3 x |valence|)`;
//! - goal relevance = `relevance_score(combined, core values joined by spaces)`
//!   (0 without core values);
//! - content richness = capitalised words (`[A-Z][a-z]{2,}` between word
//!   boundaries) x 0.15 up to 0.5, numbers (`\d+` between boundaries) x 0.15 up to
//!   0.3, distinct specificity words (exact white-space words, lower-cased) x 0.15
//!   up to 0.4, +0.1 over 15 words; capped at 1.
//!
//! All four are rounded to 3 decimals. Overall = 0.3 novelty + 0.2 emotion + 0.2
//! goal + 0.3 richness, minus 0.15 (floored at 0) when the combined text has fewer
//! than 12 distinct >= 3-letter tokens; significant when overall >= 0.35.
//!
//! Word boundaries follow Python's `re` for `str` patterns approximately: a word
//! character is alphanumeric or `_` (`char::is_alphanumeric`); Python's notion
//! differs only for a few non-ASCII categories (combining marks, some numerals).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::sentiment::{py_round, py_split, py_strip};
use crate::model::{SignificanceScore, SomaticMarker};
use crate::text::{TokenHashes, WordSet, expand_synonyms, relevance_score, tokenize};

/// The fraction of query tokens `q` found in the expanded content tokens `c`.
fn relevance_of_sets(q: &TokenHashes, c: &TokenHashes) -> f64 {
    if q.is_empty() {
        return 0.0;
    }
    // One ordered walk of both lists rather than a search per token.
    q.intersection_len(c) as f64 / q.len() as f64
}

/// The gate's threshold on the overall score.
pub const SIGNIFICANCE_THRESHOLD: f64 = 0.35;
/// Below this many distinct >= 3-letter tokens the short-text penalty applies.
pub const SHORT_TEXT_TOKENS: usize = 12;
/// The short-text penalty.
pub const SHORT_TEXT_PENALTY: f64 = 0.15;
/// How many recent episodic contents the caller passes for novelty.
pub const RECENT_EPISODES: usize = 10;

static SPECIFICITY_SET: WordSet = WordSet::new(SPECIFICITY_WORDS);

/// Words that signal specific, memorable content.
const SPECIFICITY_WORDS: &[&str] = &[
    "named",
    "called",
    "name",
    "birthday",
    "born",
    "started",
    "began",
    "moved",
    "married",
    "divorced",
    "hired",
    "fired",
    "promoted",
    "allergic",
    "allergy",
    "diagnosed",
    "died",
    "passed",
    "killed",
    "bought",
    "sold",
    "paid",
    "earned",
    "salary",
    "address",
    "phone",
    "email",
    "manager",
    "director",
    "engineer",
    "doctor",
    "teacher",
    "university",
    "college",
    "school",
    "company",
    "team",
    "project",
];

/// The full outcome of the gate for one exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Significance {
    /// The four rounded dimensions (stored nowhere but used for salience).
    pub score: SignificanceScore,
    /// Distinct >= 3-letter tokens of the combined text.
    pub token_count: usize,
    /// The penalty subtracted (0 or [`SHORT_TEXT_PENALTY`]; the floor at 0 may make
    /// the effective subtraction smaller).
    pub penalty: f64,
    /// The overall score (unrounded); the episodic entry's `significance`.
    pub overall: f64,
    /// `overall >= 0.35`.
    pub is_significant: bool,
}

/// The text significance scores: `"{user} {agent}"`.
#[must_use]
pub fn combined_text(user_input: &str, agent_output: &str) -> String {
    format!("{user_input} {agent_output}")
}

/// The content of the episodic entry for an exchange: `"User: {user}\nAgent: {agent}"`.
#[must_use]
pub fn episodic_content(user_input: &str, agent_output: &str) -> String {
    ["User: ", user_input, "\nAgent: ", agent_output].concat()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

static DECIMAL_DIGIT: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^\p{Nd}$").ok());

fn is_decimal_digit(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    let mut buf = [0u8; 4];
    DECIMAL_DIGIT.as_ref().is_some_and(|re| re.is_match(c.encode_utf8(&mut buf)))
}

/// Matches of `\b[A-Z][a-z]{2,}\b` (ASCII letters, Unicode word boundaries).
fn count_capitalised(chars: &[char]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts = c.is_ascii_uppercase() && (i == 0 || !is_word_char(chars[i - 1]));
        if starts {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_lowercase() {
                j += 1;
            }
            if j - i > 2 && (j == chars.len() || !is_word_char(chars[j])) {
                n += 1;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    n
}

/// Matches of `\b\d+\b` (decimal digits, Unicode word boundaries).
fn count_numbers(chars: &[char]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < chars.len() {
        if is_decimal_digit(chars[i]) {
            let mut j = i + 1;
            while j < chars.len() && is_decimal_digit(chars[j]) {
                j += 1;
            }
            let left_ok = i == 0 || !is_word_char(chars[i - 1]);
            let right_ok = j == chars.len() || !is_word_char(chars[j]);
            if left_ok && right_ok {
                n += 1;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    n
}

/// How information-rich `text` is (0 to 1, unrounded): proper nouns, numbers,
/// specificity words and length.
#[must_use]
pub fn content_richness(text: &str) -> f64 {
    let chars: Vec<char> = text.chars().collect();
    let mut score = 0.0_f64;
    score += (count_capitalised(&chars) as f64 * 0.15).min(0.5);
    score += (count_numbers(&chars) as f64 * 0.15).min(0.3);
    let lower = text.to_lowercase();
    let mut words: Vec<&str> = py_split(&lower).collect();
    words.sort_unstable();
    words.dedup();
    let hits = words.iter().filter(|w| SPECIFICITY_SET.contains(w)).count();
    score += (hits as f64 * 0.15).min(0.4);
    if py_split(text).count() > 15 {
        score += 0.1;
    }
    score.min(1.0)
}

/// The four dimensions of the gate, rounded to 3 decimals, as the reference's
/// `compute_significance`.
///
/// `somatic` must be the marker of the user's text (what `observe` computes);
/// `recent_contents` the contents of the most recent episodic entries, newest first
/// (`observe` passes the 10 newest of every user and domain).
#[must_use]
pub fn compute_significance(
    user_input: &str,
    agent_output: &str,
    somatic: &SomaticMarker,
    core_values: &[String],
    recent_contents: &[&str],
) -> SignificanceScore {
    let sets: Vec<BTreeSet<String>> = recent_contents.iter().map(|c| recent_tokens(c)).collect();
    let refs: Vec<&BTreeSet<String>> = sets.iter().collect();
    dimensions(user_input, agent_output, somatic, core_values, &refs).0
}

/// A recent episode's tokens as novelty compares them: its reference tokens
/// expanded with synonyms.
#[must_use]
pub fn recent_tokens(content: &str) -> BTreeSet<String> {
    expand_synonyms(&tokenize(content))
}

/// [`compute_significance`] with each recent episode given as [`recent_tokens`],
/// and the exchange's token count (the short-text penalty's input), from one
/// tokenization of the exchange.
fn dimensions(
    user_input: &str,
    agent_output: &str,
    somatic: &SomaticMarker,
    core_values: &[String],
    recent: &[&BTreeSet<String>],
) -> (SignificanceScore, usize) {
    let hashed: Vec<TokenHashes> = recent.iter().map(|s| TokenHashes::from(*s)).collect();
    let refs: Vec<&TokenHashes> = hashed.iter().collect();
    dimensions_of(&ExchangeSignals::of(user_input, agent_output, core_values), somatic, &refs)
}

/// What the significance gate reads of an exchange alone, without the store
/// (its tokens, goal relevance and richness): a batch computes it for every
/// exchange in parallel before its write transaction.
#[derive(Debug, Clone)]
pub struct ExchangeSignals {
    combined_tokens: TokenHashes,
    goal_relevance: f64,
    richness: f64,
}

impl ExchangeSignals {
    /// The signals of one exchange, with the soul's core values.
    #[must_use]
    pub fn of(user_input: &str, agent_output: &str, core_values: &[String]) -> Self {
        let combined = combined_text(user_input, agent_output);
        let goal_relevance = if core_values.is_empty() {
            0.0
        } else {
            relevance_score(&combined, &core_values.join(" "))
        };
        Self {
            combined_tokens: TokenHashes::from(&tokenize(&combined)),
            goal_relevance,
            richness: content_richness(&combined),
        }
    }
}

/// [`assess_with`] from precomputed [`ExchangeSignals`].
#[must_use]
pub fn assess_signals(
    signals: &ExchangeSignals,
    somatic: &SomaticMarker,
    recent: &[&TokenHashes],
) -> Significance {
    significance_of(dimensions_of(signals, somatic, recent))
}

fn dimensions_of(
    signals: &ExchangeSignals,
    somatic: &SomaticMarker,
    recent: &[&TokenHashes],
) -> (SignificanceScore, usize) {
    let ExchangeSignals { combined_tokens, goal_relevance, richness } = signals;
    let (goal_relevance, richness) = (*goal_relevance, *richness);
    let mut novelty = if recent.is_empty() {
        1.0
    } else {
        let mut sum = 0.0;
        for c in recent {
            sum += relevance_of_sets(combined_tokens, c);
        }
        1.0 - sum / recent.len() as f64
    };
    let emotional_intensity = (somatic.arousal * 0.5 + somatic.valence.abs() * 0.3).min(1.0);
    let length_bonus = (combined_tokens.len() as f64 * 0.01).min(0.2);
    novelty = (novelty + length_bonus).min(1.0);
    let score = SignificanceScore {
        novelty: py_round(novelty, 3),
        emotional_intensity: py_round(emotional_intensity, 3),
        goal_relevance: py_round(goal_relevance, 3),
        content_richness: py_round(richness, 3),
    };
    (score, combined_tokens.len())
}

/// The weighted overall score with the short-text penalty applied when
/// `token_count < 12` (unrounded, at least 0 when penalised).
#[must_use]
pub fn overall_significance(score: &SignificanceScore, token_count: usize) -> f64 {
    let raw = 0.3 * score.novelty
        + 0.2 * score.emotional_intensity
        + 0.2 * score.goal_relevance
        + 0.3 * score.content_richness;
    if token_count < SHORT_TEXT_TOKENS { (raw - SHORT_TEXT_PENALTY).max(0.0) } else { raw }
}

/// The whole gate for one exchange: dimensions, token count, penalty, overall score
/// and the decision.
#[must_use]
pub fn assess(
    user_input: &str,
    agent_output: &str,
    somatic: &SomaticMarker,
    core_values: &[String],
    recent_contents: &[&str],
) -> Significance {
    let sets: Vec<BTreeSet<String>> = recent_contents.iter().map(|c| recent_tokens(c)).collect();
    let refs: Vec<&BTreeSet<String>> = sets.iter().collect();
    assess_with(user_input, agent_output, somatic, core_values, &refs)
}

/// [`assess`] with each recent episode given as [`recent_tokens`] (a caller
/// observing many exchanges computes them once).
#[must_use]
pub fn assess_with(
    user_input: &str,
    agent_output: &str,
    somatic: &SomaticMarker,
    core_values: &[String],
    recent: &[&BTreeSet<String>],
) -> Significance {
    significance_of(dimensions(user_input, agent_output, somatic, core_values, recent))
}

fn significance_of((score, token_count): (SignificanceScore, usize)) -> Significance {
    let overall = overall_significance(&score, token_count);
    let penalty = if token_count < SHORT_TEXT_TOKENS { SHORT_TEXT_PENALTY } else { 0.0 };
    Significance {
        score,
        token_count,
        penalty,
        overall,
        is_significant: overall >= SIGNIFICANCE_THRESHOLD,
    }
}

/// The salience of the episodic entry (and of facts extracted with a score):
/// 0.3 novelty + 0.3 emotion + 0.25 goal + 0.15 richness, capped at 1.
#[must_use]
pub fn episodic_salience(score: &SignificanceScore) -> f64 {
    (score.novelty * 0.3
        + score.emotional_intensity * 0.3
        + score.goal_relevance * 0.25
        + score.content_richness * 0.15)
        .min(1.0)
}

/// The reference's `generate_abstract`: the text before the first `. ! ?` or newline,
/// stripped; over 400 characters it is cut to its first 400 characters, back to the
/// last space (if any), and `...` appended.
#[must_use]
pub fn generate_abstract(content: &str) -> String {
    let first = content.split(['.', '!', '?', '\n']).next().unwrap_or("");
    let first = py_strip(first);
    if first.chars().count() > 400 {
        let cut: String = first.chars().take(400).collect();
        let kept = match cut.rfind(' ') {
            Some(i) => &cut[..i],
            None => cut.as_str(),
        };
        format!("{kept}...")
    } else {
        first.to_owned()
    }
}

/// The abstract of the episodic entry for an exchange (of [`episodic_content`]).
#[must_use]
pub fn episodic_abstract(user_input: &str, agent_output: &str) -> String {
    generate_abstract(&episodic_content(user_input, agent_output))
}

/// The importance of the episodic entry: 5, or `min(9, 5 + floor(4 x arousal))`
/// when arousal exceeds 0.3.
#[must_use]
pub fn episodic_importance(somatic: &SomaticMarker) -> u8 {
    if somatic.arousal > 0.3 {
        // arousal is at most 1, so the product is in 1.2..=4.
        let bump = (somatic.arousal * 4.0).trunc().clamp(0.0, 4.0) as u8;
        (5 + bump).min(9)
    } else {
        5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn richness_counts_like_the_regexes() {
        let chars: Vec<char> = "Met Ana at Café Arup in 2024-02, v2 3pm Xy".chars().collect();
        // Met, Ana, Arup (Café has a non-ASCII letter; Xy is too short).
        assert_eq!(count_capitalised(&chars), 3);
        // 2024 and 02; not v2 or 3pm.
        assert_eq!(count_numbers(&chars), 2);
    }

    #[test]
    fn abstract_cuts_first_sentence() {
        assert_eq!(episodic_abstract("Hi there! How", "ok"), "User: Hi there");
        assert_eq!(generate_abstract("  no end  "), "no end");
        let long = "word ".repeat(100);
        let a = generate_abstract(&long);
        assert!(a.ends_with("...") && a.chars().count() <= 403);
    }

    #[test]
    fn importance_from_arousal() {
        let m = |a| SomaticMarker { valence: 0.0, arousal: a, label: String::new() };
        assert_eq!(episodic_importance(&m(0.3)), 5);
        assert_eq!(episodic_importance(&m(0.31)), 6);
        assert_eq!(episodic_importance(&m(1.0)), 9);
    }
}
