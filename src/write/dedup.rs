//! Fact deduplication: SKIP, MERGE or CREATE a newly extracted fact.
//!
//! A port of soul-protocol 0.4.0's `reconcile_fact` and of the pre-filter that runs
//! before it (`_token_overlap_score`). Both profiles behave the same here (QUIRKS
//! Q5, Q10: product); the accidents of Q11 (a snapshot taken before the loop, no
//! user/domain scoping) are the caller's business.
//!
//! Similarity ([`similarity`]): the token sets of [`dedup_tokens`] (alphabetic
//! tokens of at least 2 letters, minus 2-letter stop-words); two empty sets are
//! identical (1.0), one empty set gives 0.0; otherwise the Jaccard index, floored by
//! `0.75 x |A ∩ B| / min(|A|, |B|)` when the smaller set has at least 3 tokens.
//!
//! Decision ([`reconcile`]): the best-scoring candidate is the **first** one, in the
//! order given, whose similarity is strictly greater than every earlier one (a
//! candidate scoring 0 is never chosen). Best > 0.85 is SKIP, best >= 0.6 MERGE
//! (the new fact is stored and the target gets `superseded_by = new id`), else
//! CREATE.
//!
//! For parity with the reference, `observe` must pass the candidates in the
//! semantic store's `facts()` order — importance descending, then `created_at`
//! descending, then insertion order — restricted to active facts, from a snapshot
//! taken after the prefix-conflict pass and before the loop over the new facts;
//! a fact MERGEd into during the loop leaves the candidate list for the following
//! facts, while facts stored by the loop never join it. Dropping candidates that
//! cannot reach 0.6 (see [`probe_tokens`]) does not change the decision as long as
//! the remaining ones keep their order.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::sentiment::py_split;
use crate::text::{TextMemo, TokenHashes, tokenize_dedup, tokenize_dedup_memo};

/// Similarity above which a new fact is a duplicate (SKIP).
pub const SKIP_THRESHOLD: f64 = 0.85;
/// Similarity from which a new fact updates an existing one (MERGE).
pub const MERGE_THRESHOLD: f64 = 0.6;
/// Weight of the containment floor.
pub const CONTAINMENT_WEIGHT: f64 = 0.75;
/// The smaller token set needs this many tokens for the containment floor.
pub const CONTAINMENT_MIN_TOKENS: usize = 3;
/// The pre-filter drops a candidate fact whose [`token_overlap_score`] with any
/// active fact exceeds this.
pub const PREFILTER_THRESHOLD: f64 = 0.7;

/// What to do with a new fact.
#[derive(Debug, Clone, PartialEq)]
pub enum DedupDecision {
    /// Store it as a new fact.
    Create,
    /// Do not store it: the fact `id` says the same (similarity > 0.85).
    Skip {
        /// The near-duplicate.
        id: String,
        /// Its similarity with the new fact.
        similarity: f64,
    },
    /// Store it and mark the fact `id` superseded by it (0.6 <= similarity <= 0.85).
    Merge {
        /// The fact being updated.
        id: String,
        /// Its similarity with the new fact.
        similarity: f64,
    },
}

/// The dedup token set of `text` (see the module docs).
#[must_use]
pub fn dedup_tokens(text: &str) -> BTreeSet<String> {
    tokenize_dedup(text)
}

/// [`dedup_tokens`] of a stored fact's text, which comes back as a candidate
/// observe after observe, as [`TokenHashes`] (compared with
/// [`similarity_hashes`]): from a per-thread memo
/// ([`crate::text::tokenize_dedup_memo`]).
#[must_use]
pub fn stored_tokens(text: &str) -> Arc<TokenHashes> {
    tokenize_dedup_memo(text)
}

/// Plain Jaccard index of two token sets (0 when both are empty).
#[must_use]
pub fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 { 0.0 } else { inter as f64 / union as f64 }
}

/// Containment of two token sets: `|A ∩ B| / min(|A|, |B|)` (0 when one is empty).
#[must_use]
pub fn containment(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let min = a.len().min(b.len());
    if min == 0 { 0.0 } else { a.intersection(b).count() as f64 / min as f64 }
}

/// The dedup similarity of two token sets (see the module docs).
#[must_use]
pub fn similarity_tokens(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    similarity_of_counts(a.len(), b.len(), || a.intersection(b).count())
}

/// [`similarity_tokens`] of two sets given as [`TokenHashes`].
#[must_use]
pub fn similarity_hashes(a: &TokenHashes, b: &TokenHashes) -> f64 {
    similarity_of_counts(a.len(), b.len(), || a.intersection_len(b))
}

/// The dedup similarity of sets of `a` and `b` tokens that share `inter()`.
fn similarity_of_counts(a: usize, b: usize, inter: impl FnOnce() -> usize) -> f64 {
    if a == 0 && b == 0 {
        return 1.0;
    }
    if a == 0 || b == 0 {
        return 0.0;
    }
    let inter = inter();
    let union = a + b - inter;
    let j = inter as f64 / union as f64;
    let min = a.min(b);
    if min >= CONTAINMENT_MIN_TOKENS {
        let c = inter as f64 / min as f64;
        j.max(c * CONTAINMENT_WEIGHT)
    } else {
        j
    }
}

/// The reference's `_jaccard_similarity` between two texts (used by dedup and by
/// contradiction pre-selection).
#[must_use]
pub fn similarity(a: &str, b: &str) -> f64 {
    similarity_tokens(&dedup_tokens(a), &dedup_tokens(b))
}

/// Decides SKIP / MERGE / CREATE for `new_content` against active facts given as
/// `(id, content)` in the store's `facts()` order (see the module docs for the
/// tie-break: first strictly-best wins).
#[must_use]
pub fn reconcile(new_content: &str, existing: &[(&str, &str)]) -> DedupDecision {
    let new_tokens = TokenHashes::from(&dedup_tokens(new_content));
    let mut best = 0.0_f64;
    let mut best_id: Option<&str> = None;
    for &(id, content) in existing {
        let sim = similarity_hashes(&new_tokens, &stored_tokens(content));
        if sim > best {
            best = sim;
            best_id = Some(id);
        }
    }
    match best_id {
        Some(id) if best > SKIP_THRESHOLD => {
            DedupDecision::Skip { id: id.to_owned(), similarity: best }
        }
        Some(id) if best >= MERGE_THRESHOLD => {
            DedupDecision::Merge { id: id.to_owned(), similarity: best }
        }
        _ => DedupDecision::Create,
    }
}

/// The pre-filter's score: Jaccard of the sets of lower-cased white-space words
/// (punctuation kept), counted as hashes ([`TokenHashes`]); 0 when either text
/// has no word.
#[must_use]
pub fn token_overlap_score(a: &str, b: &str) -> f64 {
    overlap_with(&overlap_hashes(a), b)
}

/// The lower-cased white-space words of `text`, as a set of hashes.
fn overlap_hashes(text: &str) -> TokenHashes {
    TokenHashes::of(py_split(&text.to_lowercase()))
}

/// [`overlap_hashes`] of a stored fact's text, from a per-thread memo: the
/// pre-filter compares each new fact with the same facts of its user, observe
/// after observe.
fn overlap_hashes_memo(text: &str) -> Arc<TokenHashes> {
    OVERLAP_MEMO.with(|memo| {
        memo.borrow_mut().get_or_insert_with(text, |text| Arc::new(overlap_hashes(text)))
    })
}

thread_local! {
    static OVERLAP_MEMO: RefCell<TextMemo<Arc<TokenHashes>>> =
        RefCell::new(TextMemo::default());
}

/// [`token_overlap_score`] of a text whose words are `ta` and `b`. The word
/// sets are compared as hashes ([`TokenHashes`]): the pre-filter compares a
/// new fact with every fact near it, hundreds for a user with many facts.
fn overlap_with(ta: &TokenHashes, b: &str) -> f64 {
    let tb = overlap_hashes_memo(b);
    if ta.is_empty() || tb.is_empty() {
        return 0.0;
    }
    let inter = ta.intersection_len(&tb);
    inter as f64 / (ta.len() + tb.len() - inter) as f64
}

/// The white-space words of the pre-filter (lower-cased, punctuation kept), for a
/// caller indexing facts by them.
#[must_use]
pub fn overlap_words(text: &str) -> BTreeSet<String> {
    py_split(&text.to_lowercase()).map(str::to_owned).collect()
}

/// True when the pre-filter drops `candidate` because an active fact overlaps it by
/// more than 0.7 ([`token_overlap_score`]).
#[must_use]
pub fn prefilter_drops<'a>(candidate: &str, active: impl IntoIterator<Item = &'a str>) -> bool {
    // The candidate's words once, not once per active fact.
    let words = overlap_hashes(candidate);
    active.into_iter().any(|f| overlap_with(&words, f) > PREFILTER_THRESHOLD)
}

/// The smallest overlap `|A ∩ B|` that can give a similarity >= `threshold` with a
/// new fact of `a` tokens (`None` when no overlap can). Computed with the same
/// floating-point operations as [`similarity_tokens`], so it is exact, not an
/// approximation: Jaccard `k/|A ∪ B| <= k/a`, and the containment floor
/// `0.75 k/min(a,b)` is largest for the smallest allowed `min(a,b)`, 3.
#[must_use]
pub fn min_overlap(a: usize, threshold: f64) -> Option<usize> {
    let by_jaccard = (1..=a).find(|&k| k as f64 / a as f64 >= threshold);
    let by_containment = if a >= CONTAINMENT_MIN_TOKENS {
        let m = CONTAINMENT_MIN_TOKENS;
        (1..=m).find(|&k| (k as f64 / m as f64) * CONTAINMENT_WEIGHT >= threshold)
    } else {
        None
    };
    match (by_jaccard, by_containment) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Which facts a new fact must be compared with: every fact whose similarity with
/// it can reach the threshold contains at least one of [`Probe::tokens`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Probe tokens, rarest first.
    pub tokens: Vec<String>,
    /// The new fact has no dedup token: only facts without dedup tokens can match
    /// (their similarity is 1.0), and `tokens` is empty.
    pub match_tokenless: bool,
}

/// Prefix filtering for dedup and contradiction pre-selection.
///
/// For a new fact `A` (dedup tokens, size `a`) every fact `B` with
/// `similarity(A, B) >= threshold` shares at least `k = min_overlap(a, threshold)`
/// tokens with `A`; so it misses at most `a - k` of them and must contain one of
/// any `a - k + 1` tokens of `A`. Those are chosen by ascending document frequency
/// `df` (ties by token), so the caller reads the shortest posting lists.
/// `threshold` must be > 0 (0.6 for MERGE, 0.3 for contradiction pre-selection).
/// With the containment floor, `k` is at most 3 once `a >= 3`: a long fact needs
/// most of its tokens probed.
#[must_use]
pub fn probe_tokens(new_content: &str, threshold: f64, df: impl Fn(&str) -> u64) -> Probe {
    let ranked = ranked_tokens(new_content, df);
    if ranked.is_empty() {
        return Probe { tokens: Vec::new(), match_tokenless: true };
    }
    let take = probe_len(ranked.len(), threshold);
    Probe { tokens: ranked.into_iter().take(take).collect(), match_tokenless: false }
}

/// The dedup tokens of `new_content` in [`probe_tokens`]' order: ascending `df`,
/// ties by token. A probe at any threshold reads a prefix of this list.
#[must_use]
pub fn ranked_tokens(new_content: &str, df: impl Fn(&str) -> u64) -> Vec<String> {
    let mut ranked: Vec<(u64, String)> =
        dedup_tokens(new_content).into_iter().map(|t| (df(&t), t)).collect();
    ranked.sort();
    ranked.into_iter().map(|(_, t)| t).collect()
}

/// How many of a new fact's `a` ranked tokens [`probe_tokens`] reads at
/// `threshold`: `a - min_overlap + 1`, or 0 when no overlap reaches it. Lower
/// thresholds read longer prefixes.
#[must_use]
pub fn probe_len(a: usize, threshold: f64) -> usize {
    min_overlap(a, threshold).map_or(0, |k| a - k + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn similarity_cases() {
        assert!((similarity("", "...") - 1.0).abs() < 1e-12);
        assert!(similarity("User likes tea", "").abs() < 1e-12);
        // subset with >= 3 tokens: containment 1.0 x 0.75
        let s = similarity("User likes green tea", "User likes green tea with honey every day");
        assert!((s - 0.75).abs() < 1e-12);
    }

    #[test]
    fn reconcile_first_best_wins() {
        let ex = [("a", "User likes green tea"), ("b", "User likes green tea")];
        assert_eq!(
            reconcile("User likes green tea", &ex),
            DedupDecision::Skip { id: "a".into(), similarity: 1.0 }
        );
        let ex = [("a", "totally different"), ("b", "User likes green tea a lot")];
        assert!(
            matches!(reconcile("User likes green tea", &ex), DedupDecision::Merge { ref id, .. } if id == "b")
        );
        assert_eq!(reconcile("x", &[("a", "User likes tea")]), DedupDecision::Create);
    }

    #[test]
    fn overlap_keeps_punctuation() {
        assert!((token_overlap_score("User likes tea.", "user likes tea") - 0.5).abs() < 1e-12);
        assert!(token_overlap_score("", "x").abs() < 1e-12);
    }

    #[test]
    fn min_overlap_values() {
        assert_eq!(min_overlap(1, 0.6), Some(1));
        assert_eq!(min_overlap(2, 0.6), Some(2));
        assert_eq!(min_overlap(3, 0.6), Some(2));
        assert_eq!(min_overlap(10, 0.6), Some(3));
        assert_eq!(min_overlap(10, 0.3), Some(2));
        assert_eq!(min_overlap(2, 0.3), Some(1));
    }

    const VOCAB: &[&str] = &[
        "user", "likes", "tea", "green", "lives", "paris", "works", "stripe", "go", "js", "rust",
        "coffee",
    ];

    fn arb_set() -> impl Strategy<Value = BTreeSet<String>> {
        proptest::collection::btree_set(0..VOCAB.len(), 0..9)
            .prop_map(|ix| ix.into_iter().map(|i| VOCAB[i].to_owned()).collect())
    }

    /// Texts of repeated, cased and punctuated words, as the pre-filter sees them.
    fn arb_text() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            proptest::sample::select(VOCAB).prop_map(str::to_owned),
            proptest::sample::select(VOCAB).prop_map(|w| format!("{}.", w.to_uppercase())),
            Just("Tea,".to_owned()),
        ];
        proptest::collection::vec(word, 0..10).prop_map(|w| w.join(" "))
    }

    proptest! {
        /// Sets compared as their hashes give the similarity the string sets
        /// give (sizes and intersections alike), whatever they share.
        #[test]
        fn hashed_sets_compare_as_the_token_sets(
            a in proptest::collection::btree_set("[a-e]{1,3}", 0..12),
            b in proptest::collection::btree_set("[a-e]{1,3}", 0..12),
        ) {
            let (ha, hb) = (TokenHashes::from(&a), TokenHashes::from(&b));
            prop_assert_eq!(ha.len(), a.len());
            prop_assert_eq!(ha.intersection_len(&hb), a.intersection(&b).count());
            prop_assert_eq!(
                similarity_hashes(&ha, &hb).to_bits(),
                similarity_tokens(&a, &b).to_bits()
            );
        }

        /// The pre-filter, which splits the candidate once for all the active
        /// facts, decides as the Jaccard of freshly built word sets would.
        #[test]
        fn prefilter_matches_a_set_oracle(
            candidate in arb_text(),
            active in proptest::collection::vec(arb_text(), 0..8),
        ) {
            let words = |t: &str| -> BTreeSet<String> {
                t.to_lowercase().split_whitespace().map(str::to_owned).collect()
            };
            let oracle = |a: &str, b: &str| {
                let (x, y) = (words(a), words(b));
                if x.is_empty() || y.is_empty() {
                    return 0.0;
                }
                let inter = x.intersection(&y).count();
                inter as f64 / (x.len() + y.len() - inter) as f64
            };
            for f in &active {
                prop_assert_eq!(token_overlap_score(&candidate, f), oracle(&candidate, f));
            }
            let want = active.iter().any(|f| oracle(&candidate, f) > PREFILTER_THRESHOLD);
            prop_assert_eq!(prefilter_drops(&candidate, active.iter().map(String::as_str)), want);
        }

        #[test]
        fn probe_misses_nothing(
            new in arb_set(),
            facts in proptest::collection::vec(arb_set(), 1..30),
            dfs in proptest::collection::vec(0u64..5, VOCAB.len()),
            threshold in prop_oneof![Just(0.6), Just(0.3), Just(0.85), 0.05f64..1.0],
        ) {
            let text = new.iter().cloned().collect::<Vec<_>>().join(" ");
            let df = |t: &str| VOCAB.iter().position(|v| *v == t).map_or(0, |i| dfs[i]);
            let probe = probe_tokens(&text, threshold, df);
            for f in &facts {
                if similarity_tokens(&new, f) >= threshold {
                    let hit = probe.tokens.iter().any(|t| f.contains(t))
                        || (probe.match_tokenless && f.is_empty());
                    prop_assert!(hit, "missed {:?} for {:?} (probe {:?})", f, new, probe);
                }
            }
        }
    }

    #[test]
    fn jaccard_and_containment() {
        let a = set(&["a1", "b1"]);
        let b = set(&["b1", "c1", "d1"]);
        assert!((jaccard(&a, &b) - 0.25).abs() < 1e-12);
        assert!((containment(&a, &b) - 0.5).abs() < 1e-12);
    }
}
