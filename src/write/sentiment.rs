//! Word-list sentiment: the somatic marker attached to an exchange.
//!
//! A port of soul-protocol 0.4.0's heuristic `detect_sentiment`. `observe` analyses
//! the **user's text only** (see [`observe_sentiment`]); the agent's reply never
//! colours the marker. There is one behaviour in both profiles.
//!
//! How a text is scored:
//! - it is lower-cased and split on white space (Python's `str.split()`); each word
//!   is trimmed of `. , ! ? ; : ' " ( ) [ ] { } # @` at both ends;
//! - the strongest intensifier seen anywhere in the text (`very` 1.3, `extremely`
//!   1.5, ...) or the weakest diminisher (`slightly` 0.5, ...) scales the result;
//! - an emotion word preceded within three words by a negation (`not`, `never`,
//!   `don't`, ...) flips: a negated positive word counts 0.7 x its weight as
//!   negative, a negated negative word 0.5 x its weight as positive, and both
//!   halve their arousal;
//! - valence = (mean positive - mean negative) x modifier, clamped to -1..=1;
//!   arousal = mean arousal (a per-word hint, else the word's weight) x modifier,
//!   clamped to 0..=1; both rounded to 3 decimals;
//! - `|valence| < 0.2` and `arousal < 0.15` is `neutral`; otherwise the label whose
//!   valence/arousal box contains the point and whose centre is nearest.

use crate::model::SomaticMarker;

/// Python's `str.isspace` for one character (`char::is_whitespace` plus the
/// information separators U+001C..U+001F).
pub(crate) fn py_is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()` with no argument: runs of white space separate words,
/// empty words are never produced.
pub(crate) fn py_split(text: &str) -> impl Iterator<Item = &str> {
    text.split(py_is_space).filter(|w| !w.is_empty())
}

/// Python's `str.strip()` with no argument.
pub(crate) fn py_strip(text: &str) -> &str {
    text.trim_matches(py_is_space)
}

/// Python's `round(x, digits)` for a float: the double nearest to the decimal
/// rounded half-to-even on the exact binary value.
///
/// Computed as `round(x·10^digits) / 10^digits` unless the product, rounded to a
/// double, is exactly a half. Below 2^52 every half is a double, and rounding is
/// monotone, so the exact product and the rounded one can only lie on different
/// sides of a half when the rounded one is that half: otherwise their nearest
/// integers are the same, and that integer divided by the exact power of ten is
/// correctly rounded, as the decimal's parse is. A half, a large product or a
/// precision past 15 is rounded by formatting (Rust's fixed-precision formatting
/// rounds the exact binary value half to even) and parsing. The write path rounds
/// four significance scores per observe, and the formatting cost ~20 times the
/// arithmetic.
pub(crate) fn py_round(x: f64, digits: usize) -> f64 {
    /// 10^i, exact, for the precisions the arithmetic handles.
    const POW10: [f64; 16] =
        [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    if !x.is_finite() {
        return x;
    }
    if let Some(&p) = POW10.get(digits) {
        let y = x * p;
        // Below 2^52, `y - floor(y)` is exact.
        if y.abs() < 4_503_599_627_370_496.0 && y - y.floor() != 0.5 {
            return y.round() / p;
        }
    }
    py_round_by_format(x, digits)
}

/// [`py_round`] by formatting and parsing, for any precision.
fn py_round_by_format(x: f64, digits: usize) -> f64 {
    format!("{x:.digits$}").parse().unwrap_or(x)
}

/// Weight of a positive emotion word.
fn positive_word(w: &str) -> Option<f64> {
    Some(match w {
        "happy" | "awesome" | "excellent" | "brilliant" | "delighted" | "bliss" | "excited"
        | "enthusiastic" | "stoked" | "won" | "married" | "graduated" | "best" | "celebrate"
        | "incredible" | "extraordinary" => 0.8,
        "love" | "wonderful" | "amazing" | "fantastic" | "perfect" | "thrilled" | "promoted" => 0.9,
        "great" | "beautiful" | "enjoy" | "cheerful" | "lovely" | "grateful" | "thankful"
        | "eager" | "pumped" | "accepted" | "dream" | "championship" | "born" | "blessed"
        | "accomplished" | "proud" | "success" | "achieved" | "impressive" | "remarkable" => 0.7,
        "pleased" | "glad" | "appreciate" | "passed" | "adopted" | "alive" | "satisfied"
        | "solved" | "relief" | "hope" | "helpful" => 0.6,
        "warm" | "peaceful" | "content" | "comfort" | "thanks" | "thank" | "wonder" | "fixed"
        | "completed" | "trust" | "useful" => 0.5,
        "calm" | "explore" | "works" | "good" => 0.4,
        "curious" | "interesting" | "cool" => 0.35,
        "fascinated" => 0.55,
        "intrigued" => 0.45,
        "working" | "done" => 0.3,
        "nice" | "fine" => 0.15,
        "okay" => 0.1,
        _ => return None,
    })
}

/// Weight of a negative emotion word.
fn negative_word(w: &str) -> Option<f64> {
    Some(match w {
        "frustrated" | "mad" | "unhappy" | "mourning" | "mourn" | "sorrow" | "helpless"
        | "worthless" | "crying" | "scared" | "overwhelmed" | "sucks" => 0.7,
        "annoyed" | "irritated" | "resentful" | "baffled" | "sad" | "disappointed" | "lonely"
        | "regret" | "defeated" | "afraid" | "anxious" | "failed" | "broken" | "crash"
        | "stupid" | "useless" | "pain" => 0.6,
        "angry" | "hate" | "terrible" | "awful" | "horrible" | "infuriating" | "depressed"
        | "miserable" | "hopeless" | "grief" | "crushed" | "devastating" | "betrayed" | "panic" => {
            0.8
        }
        "furious" | "worst" | "livid" | "outraged" | "heartbroken" | "terrified" => 0.9,
        "confused" | "confusing" | "lost" | "stuck" | "empty" | "numb" | "miss" | "worried"
        | "nervous" | "wrong" | "bad" | "struggle" | "ugly" | "waste" | "mess" => 0.5,
        "unclear" | "puzzled" | "error" | "bug" | "problem" | "difficult" | "boring" => 0.4,
        "issue" | "hard" => 0.3,
        _ => return None,
    })
}

/// Arousal of words whose energy differs from their weight.
fn arousal_hint(w: &str) -> Option<f64> {
    Some(match w {
        "happy" | "delighted" | "great" | "accomplished" | "proud" | "success" | "achieved"
        | "adopted" | "dream" | "depressed" | "miserable" | "heartbroken" | "crushed"
        | "devastating" | "curious" | "intrigued" | "puzzled" => 0.35,
        "glad" | "pleased" | "beautiful" | "lovely" | "hope" | "blessed" | "satisfied"
        | "solved" | "completed" | "sad" | "mourning" | "mourn" | "sorrow" | "regret"
        | "defeated" | "worthless" => 0.25,
        "cheerful" | "enjoy" | "bliss" | "passed" | "disappointed" | "unhappy" | "hopeless"
        | "grief" | "helpless" | "crying" | "interesting" | "wonder" | "explore" | "unclear" => 0.3,
        "wonderful" | "perfect" | "brilliant" | "born" | "accepted" | "best" | "confused"
        | "confusing" => 0.4,
        "content" | "comfort" | "warm" | "done" | "works" | "good" | "cool" | "empty" | "miss" => {
            0.15
        }
        "peaceful" | "calm" | "thanks" | "thank" | "working" | "nice" | "numb" => 0.1,
        "relief" | "trust" | "fixed" | "lonely" => 0.2,
        "grateful" | "thankful" | "appreciate" => 0.12,
        "married" | "graduated" | "baffled" => 0.45,
        "fine" | "okay" => 0.05,
        _ => return None,
    })
}

/// Scale of an intensifying word.
fn intensifier(w: &str) -> Option<f64> {
    Some(match w {
        "very" | "really" | "totally" | "completely" | "super" => 1.3,
        "extremely" | "incredibly" => 1.5,
        "absolutely" => 1.4,
        "so" | "most" => 1.2,
        "quite" | "pretty" => 1.1,
        "fairly" => 1.0,
        _ => return None,
    })
}

/// Scale of a diminishing word. The reference also lists "a bit", "kind of" and
/// "sort of", which can never equal a single word and are therefore inert.
fn diminisher(w: &str) -> Option<f64> {
    Some(match w {
        "slightly" => 0.5,
        "somewhat" => 0.6,
        "barely" | "hardly" => 0.4,
        _ => return None,
    })
}

/// Words that flip the emotion words within the next three words.
fn is_negation(w: &str) -> bool {
    matches!(
        w,
        "not"
            | "no"
            | "never"
            | "don't"
            | "dont"
            | "doesn't"
            | "doesnt"
            | "didn't"
            | "didnt"
            | "won't"
            | "wont"
            | "can't"
            | "cant"
            | "isn't"
            | "isnt"
            | "wasn't"
            | "wasnt"
            | "aren't"
            | "arent"
            | "wouldn't"
            | "wouldnt"
            | "shouldn't"
            | "shouldnt"
            | "couldn't"
            | "couldnt"
    )
}

/// Label boxes: (label, valence min, valence max, arousal min, arousal max), in the
/// order ties are resolved (first nearest wins).
const LABEL_BOXES: &[(&str, f64, f64, f64, f64)] = &[
    ("excitement", 0.3, 1.0, 0.50, 1.0),
    ("joy", 0.3, 1.0, 0.20, 0.50),
    ("gratitude", 0.1, 1.0, 0.0, 0.20),
    ("curiosity", 0.1, 0.5, 0.2, 0.6),
    ("frustration", -1.0, -0.3, 0.50, 1.0),
    ("sadness", -1.0, -0.3, 0.0, 0.50),
    ("confusion", -0.5, -0.1, 0.2, 0.6),
];

/// The label of a (valence, arousal) point: among the boxes containing it, the one
/// whose centre is nearest (squared distance, first wins on ties); `neutral` if none.
#[must_use]
pub fn classify_label(valence: f64, arousal: f64) -> &'static str {
    let mut best = "neutral";
    let mut best_dist = f64::INFINITY;
    for &(label, v_lo, v_hi, a_lo, a_hi) in LABEL_BOXES {
        if v_lo <= valence && valence <= v_hi && a_lo <= arousal && arousal <= a_hi {
            let dv = valence - (v_lo + v_hi) / 2.0;
            let da = arousal - (a_lo + a_hi) / 2.0;
            let dist = dv * dv + da * da;
            if dist < best_dist {
                best_dist = dist;
                best = label;
            }
        }
    }
    best
}

/// Characters trimmed from both ends of a word before look-up.
const WORD_TRIM: &[char] =
    &['.', ',', '!', '?', ';', ':', '\'', '"', '(', ')', '[', ']', '{', '}', '#', '@'];

fn mean(xs: &[f64]) -> f64 {
    // Left-to-right sum, as Python 3.11's `sum`.
    let mut s = 0.0;
    for x in xs {
        s += x;
    }
    s / xs.len() as f64
}

/// The somatic marker of `text`, exactly as soul-protocol 0.4.0's
/// `detect_sentiment` (see the module docs for the rules).
#[must_use]
pub fn detect_sentiment(text: &str) -> SomaticMarker {
    let lower = text.to_lowercase();
    let words: Vec<&str> = py_split(&lower).map(|w| w.trim_matches(WORD_TRIM)).collect();
    if words.is_empty() {
        return SomaticMarker::default();
    }
    let mut pos: Vec<f64> = Vec::new();
    let mut neg: Vec<f64> = Vec::new();
    let mut arousals: Vec<f64> = Vec::new();
    let mut modifier = 1.0_f64;

    for (i, &word) in words.iter().enumerate() {
        if let Some(m) = intensifier(word) {
            modifier = modifier.max(m);
        } else if let Some(m) = diminisher(word) {
            modifier = modifier.min(m);
        }
        let negated = words[i.saturating_sub(3)..i].iter().any(|w| is_negation(w));
        if let Some(weight) = positive_word(word) {
            let arousal = arousal_hint(word).unwrap_or(weight);
            if negated {
                neg.push(weight * 0.7);
                arousals.push(arousal * 0.5);
            } else {
                pos.push(weight);
                arousals.push(arousal);
            }
        } else if let Some(weight) = negative_word(word) {
            let arousal = arousal_hint(word).unwrap_or(weight);
            if negated {
                pos.push(weight * 0.5);
                arousals.push(arousal * 0.5);
            } else {
                neg.push(weight);
                arousals.push(arousal);
            }
        }
    }
    if pos.is_empty() && neg.is_empty() {
        return SomaticMarker::default();
    }
    let avg_pos = if pos.is_empty() { 0.0 } else { mean(&pos) };
    let avg_neg = if neg.is_empty() { 0.0 } else { mean(&neg) };
    let valence = ((avg_pos - avg_neg) * modifier).clamp(-1.0, 1.0);
    let arousal = (mean(&arousals) * modifier).clamp(0.0, 1.0);
    let label = if valence.abs() < 0.2 && arousal < 0.15 {
        "neutral"
    } else {
        classify_label(valence, arousal)
    };
    SomaticMarker {
        valence: py_round(valence, 3),
        arousal: py_round(arousal, 3),
        label: label.to_owned(),
    }
}

/// The marker `observe` attaches to an exchange: the sentiment of the user's text
/// alone (the agent's reply is ignored).
#[must_use]
pub fn observe_sentiment(user_input: &str, _agent_output: &str) -> SomaticMarker {
    detect_sentiment(user_input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_and_empty() {
        assert_eq!(detect_sentiment(""), SomaticMarker::default());
        assert_eq!(detect_sentiment("the cat sat"), SomaticMarker::default());
    }

    #[test]
    fn negation_window_and_intensifier() {
        let m = detect_sentiment("I am not happy");
        assert!(m.valence < 0.0);
        let m = detect_sentiment("I'm really excited!");
        assert_eq!(m.label, "excitement");
        assert!((m.valence - 1.0).abs() < 1e-12);
    }

    #[test]
    fn python_round_is_half_even() {
        assert!((py_round(0.0625, 3) - 0.062).abs() < 1e-15);
        assert!((py_round(2.675, 2) - 2.67).abs() < 1e-15);
    }

    /// Values at and next to the halves of a precision, where the product's
    /// rounding decides, with their neighbours one and two ulps away.
    fn near_halves() -> Vec<(f64, usize)> {
        let mut out = Vec::new();
        for digits in 0..=6usize {
            let p = 10f64.powi(digits as i32);
            for k in [-2001i64, -7, -1, 1, 3, 5, 25, 125, 2675, 99_999, 1_234_567] {
                let half = (k as f64 + 0.5) / p;
                let mut v = half;
                for _ in 0..2 {
                    v = v.next_up();
                    out.push((v, digits));
                }
                let mut v = half;
                for _ in 0..2 {
                    v = v.next_down();
                    out.push((v, digits));
                }
                out.push((half, digits));
            }
        }
        out
    }

    #[test]
    fn python_round_agrees_with_the_formatted_rounding_next_to_halves() {
        for (x, digits) in near_halves() {
            let (got, want) = (py_round(x, digits), py_round_by_format(x, digits));
            assert_eq!(got.to_bits(), want.to_bits(), "round({x:e}, {digits})");
        }
        for x in [-0.0004, -0.0, 0.0, 1e-300, -1e-300, 4e15, 9.1e15, 1e300] {
            for digits in [0, 3, 15, 16, 20] {
                let (got, want) = (py_round(x, digits), py_round_by_format(x, digits));
                assert_eq!(got.to_bits(), want.to_bits(), "round({x:e}, {digits})");
            }
        }
    }

    proptest::proptest! {
        /// Doubles of every magnitude the scores have and far beyond, any
        /// precision up to 17: the arithmetic answers as the formatting does,
        /// to the bit.
        #[test]
        fn python_round_agrees_with_the_formatted_rounding(
            m in -1.0f64..1.0,
            scale in -12i32..18,
            digits in 0usize..=17,
        ) {
            let x = m * 10f64.powi(scale);
            let (got, want) = (py_round(x, digits), py_round_by_format(x, digits));
            proptest::prop_assert_eq!(got.to_bits(), want.to_bits(), "round({:e}, {})", x, digits);
        }

        /// Any finite double at all, by its bits.
        #[test]
        fn python_round_agrees_on_any_double(bits in proptest::prelude::any::<u64>(), digits in 0usize..=17) {
            let x = f64::from_bits(bits);
            proptest::prop_assume!(x.is_finite());
            let (got, want) = (py_round(x, digits), py_round_by_format(x, digits));
            proptest::prop_assert_eq!(got.to_bits(), want.to_bits(), "round({:e}, {})", x, digits);
        }
    }
}
