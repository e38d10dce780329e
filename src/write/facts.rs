//! Heuristic fact extraction: the regex templates that turn an exchange into
//! semantic facts such as "User lives in Lisbon".
//!
//! [`extract_facts`] mirrors soul-protocol 0.4.0's `MemoryManager.extract_facts`
//! followed by the enrichment the heuristic cognitive engine applies (category and
//! abstract). Under [`Profile::Reference`] it reproduces the reference exactly,
//! accidents included; under [`Profile::Default`] it keeps the same templates,
//! importances and in-call dedup but fixes the accidents listed in `QUIRKS.md`
//! (Q1–Q4). Each deviation is marked in the code with the quirk it fixes.
//!
//! Not done here: the pre-filter against facts already stored (token overlap > 0.7,
//! Q5) and salience, which needs the exchange's significance score. Both belong to
//! the observe pipeline; see [`FactCandidate::into_entry`].

use std::sync::LazyLock;

use foldhash::{HashSet, HashSetExt};
use regex::{Captures, Regex, RegexBuilder};

use crate::model::{MemoryCategory, MemoryEntry, MemoryType};
use crate::profile::Profile;
use crate::text::WordSet;

// ---------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------

/// One of the reference's fact templates, in the reference's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FactTemplate {
    /// "my name is X" → "User's name is X" (importance 9).
    Name,
    /// "I'm (a|an) X" → "User is X" (7).
    Is,
    /// "I prefer/like/love X" → "User prefers X" (7).
    Prefers,
    /// "I hate/dislike/don't like X" → "User dislikes X" (7).
    Dislikes,
    /// "I use/work with/am using X" → "User uses X" (6).
    Uses,
    /// "I'm building/creating/making X" → "User is building X" (7).
    Building,
    /// "I work at/for X" → "User works at X" (8).
    WorksAt,
    /// "I moved/relocated to X" → "User lives in X" (8).
    MovedTo,
    /// "I (just) joined/started at X" → "User works at X" (8).
    Joined,
    /// "I'm from X" → "User is from X" (7).
    From,
    /// "I live in X" → "User lives in X" (7).
    LivesIn,
    /// "my favorite C is X" → "User's favorite C is X" (6).
    Favorite,
    /// "how do/can/should/would I/you/we X" → "User asked about X" (5).
    AskedAbout,
    /// "use X for/to/with/when/instead of Y" → "Recommendation: use X for Y" (5).
    Recommendation,
    /// "try/install/run/check out/look into X" at a sentence start → "Advised: X" (5).
    Advised,
    /// "X vs/versus/compared to Y" → "Comparison discussed: X vs Y" (5).
    Comparison,
    /// "getting/having/seeing/… X error(s)" → "User encountered X errors" (5).
    Encountered,
    /// "I want/need/have to X" → "User wants to X" (6).
    WantsTo,
    /// "I'm trying to X" → "User is trying to X" (6).
    TryingTo,
    /// "I'm learning/studying/new to X" → "User is learning X" (6).
    Learning,
}

impl FactTemplate {
    /// All templates in the reference's order (`FACT_PATTERNS`).
    pub const ALL: [FactTemplate; 20] = [
        FactTemplate::Name,
        FactTemplate::Is,
        FactTemplate::Prefers,
        FactTemplate::Dislikes,
        FactTemplate::Uses,
        FactTemplate::Building,
        FactTemplate::WorksAt,
        FactTemplate::MovedTo,
        FactTemplate::Joined,
        FactTemplate::From,
        FactTemplate::LivesIn,
        FactTemplate::Favorite,
        FactTemplate::AskedAbout,
        FactTemplate::Recommendation,
        FactTemplate::Advised,
        FactTemplate::Comparison,
        FactTemplate::Encountered,
        FactTemplate::WantsTo,
        FactTemplate::TryingTo,
        FactTemplate::Learning,
    ];

    /// The importance the template gives its facts.
    #[must_use]
    pub fn importance(self) -> u8 {
        match self {
            FactTemplate::Name => 9,
            FactTemplate::WorksAt | FactTemplate::MovedTo | FactTemplate::Joined => 8,
            FactTemplate::Is
            | FactTemplate::Prefers
            | FactTemplate::Dislikes
            | FactTemplate::Building
            | FactTemplate::From
            | FactTemplate::LivesIn => 7,
            FactTemplate::Uses
            | FactTemplate::Favorite
            | FactTemplate::WantsTo
            | FactTemplate::TryingTo
            | FactTemplate::Learning => 6,
            FactTemplate::AskedAbout
            | FactTemplate::Recommendation
            | FactTemplate::Advised
            | FactTemplate::Comparison
            | FactTemplate::Encountered => 5,
        }
    }

    /// The output template; `{0}`, `{1}` stand for the captures.
    #[must_use]
    pub fn format(self) -> &'static str {
        match self {
            FactTemplate::Name => "User's name is {0}",
            FactTemplate::Is => "User is {0}",
            FactTemplate::Prefers => "User prefers {0}",
            FactTemplate::Dislikes => "User dislikes {0}",
            FactTemplate::Uses => "User uses {0}",
            FactTemplate::Building => "User is building {0}",
            FactTemplate::WorksAt | FactTemplate::Joined => "User works at {0}",
            FactTemplate::MovedTo | FactTemplate::LivesIn => "User lives in {0}",
            FactTemplate::From => "User is from {0}",
            FactTemplate::Favorite => "User's favorite {0} is {1}",
            FactTemplate::AskedAbout => "User asked about {0}",
            FactTemplate::Recommendation => "Recommendation: use {0} for {1}",
            FactTemplate::Advised => "Advised: {0}",
            FactTemplate::Comparison => "Comparison discussed: {0} vs {1}",
            FactTemplate::Encountered => "User encountered {0} errors",
            FactTemplate::WantsTo => "User wants to {0}",
            FactTemplate::TryingTo => "User is trying to {0}",
            FactTemplate::Learning => "User is learning {0}",
        }
    }

    /// The template's prefix: its text before the first capture, trimmed
    /// (the reference's `template.split("{")[0].strip()`).
    #[must_use]
    pub fn prefix(self) -> &'static str {
        FACT_PREFIXES[self as usize]
    }

    /// `true` for templates that state something about the user, which the default
    /// profile reads from the user's text only; the others (recommendation, advice,
    /// comparison) are read from both turns.
    #[must_use]
    pub fn is_user_fact(self) -> bool {
        !matches!(
            self,
            FactTemplate::Recommendation | FactTemplate::Advised | FactTemplate::Comparison
        )
    }
}

/// The reference's `_FACT_PREFIXES`: one prefix per template, in template order,
/// duplicates kept ("User works at" and "User lives in" appear twice).
#[rustfmt::skip]
pub const FACT_PREFIXES: [&str; 20] = [
    "User's name is", "User is", "User prefers", "User dislikes", "User uses", "User is building",
    "User works at", "User lives in", "User works at", "User is from", "User lives in",
    "User's favorite", "User asked about", "Recommendation: use", "Advised:",
    "Comparison discussed:", "User encountered", "User wants to", "User is trying to",
    "User is learning",
];

/// The template prefix `content` starts with, with the reference's semantics: the
/// first entry of [`FACT_PREFIXES`] that is a prefix of `content` (so "User is
/// building X" gives "User is").
#[must_use]
pub fn fact_prefix(content: &str) -> Option<&'static str> {
    FACT_PREFIXES.iter().copied().find(|p| content.starts_with(p))
}

/// The longest entry of [`FACT_PREFIXES`] that `content` starts with ("User is
/// building X" gives "User is building").
#[must_use]
pub fn specific_prefix(content: &str) -> Option<&'static str> {
    FACT_PREFIXES.iter().copied().filter(|p| content.starts_with(p)).max_by_key(|p| p.len())
}

/// `true` when a slot holds one value at a time, so a new fact replaces the old one
/// (default profile): name, lives in, works at, is from, and a favourite of one
/// category. Accepts a prefix or a [`slot_key`] ("User's favorite color").
#[must_use]
pub fn is_single_valued(prefix: &str) -> bool {
    matches!(prefix, "User's name is" | "User lives in" | "User works at" | "User is from")
        || prefix.starts_with("User's favorite")
}

/// The slot a fact fills, for conflict detection.
///
/// Reference: [`fact_prefix`] (one slot per template prefix, Q6). Default: the most
/// specific prefix, and for favourites the prefix plus the lower-cased category
/// ("User's favorite color"), so a favourite colour does not replace a favourite
/// film.
#[must_use]
pub fn slot_key(content: &str, profile: Profile) -> Option<String> {
    if profile.is_reference() {
        return fact_prefix(content).map(str::to_owned);
    }
    let prefix = specific_prefix(content)?;
    if prefix == "User's favorite" {
        let rest = content[prefix.len()..].trim_start();
        if let Some(end) = rest.find(" is ") {
            let category = rest[..end].trim().to_lowercase();
            if !category.is_empty() {
                return Some(format!("{prefix} {category}"));
            }
        }
    }
    Some(prefix.to_owned())
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

/// A fact extracted from an exchange: what the reference sets on the semantic
/// [`MemoryEntry`] it creates, before dedup and storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactCandidate {
    /// The fact text, e.g. "User lives in Lisbon".
    pub content: String,
    /// 1..=10, from the template.
    pub importance: u8,
    /// The keyword classification of `content` (`classify_memory_category`).
    pub category: Option<MemoryCategory>,
    /// The L0 abstract: the first sentence of `content` (`generate_abstract`).
    pub r#abstract: String,
    /// The template that produced it.
    pub template: FactTemplate,
}

impl FactCandidate {
    /// The semantic memory the reference stores for this fact, with the given
    /// salience (the reference derives it from the exchange's significance; 0.5
    /// without one). `created_at` is the system clock: callers replaying a clock
    /// overwrite it.
    #[must_use]
    pub fn into_entry(self, salience: f64) -> MemoryEntry {
        let mut entry = MemoryEntry::new(MemoryType::Semantic, self.content);
        entry.importance = self.importance;
        entry.category = self.category;
        entry.r#abstract = Some(self.r#abstract);
        entry.salience = salience;
        entry
    }
}

// ---------------------------------------------------------------------------
// Python compatibility helpers (shared with `entities`)
// ---------------------------------------------------------------------------

/// Python's `str.strip()` and `str.split()` (no argument), as sentiment has them.
pub(crate) use super::sentiment::{py_split, py_strip};

/// Rewrites a Python `re` pattern for the `regex` crate: Python's `\w` (`isalnum`
/// or `_`) becomes `[\p{L}\p{N}_]` (Rust's `\w` also takes combining marks and
/// other connector punctuation). `\b` keeps Rust's definition.
pub(crate) fn py_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 32);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let next = chars.next().unwrap_or('\\');
                if next == 'w' {
                    out.push_str(if in_class { r"\p{L}\p{N}_" } else { r"[\p{L}\p{N}_]" });
                } else {
                    out.push('\\');
                    out.push(next);
                }
                class_start = false;
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push(c);
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                continue;
            }
            ']' if in_class && !class_start => {
                in_class = false;
                out.push(c);
            }
            _ => {
                out.push(c);
                class_start = false;
            }
        }
        if c != '[' {
            class_start = false;
        }
    }
    out
}

/// Compiles a constant pattern (case-insensitive when asked).
pub(crate) fn compile(pattern: &str, ignore_case: bool) -> Regex {
    RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .size_limit(64 << 20)
        .build()
        .expect("constant pattern compiles")
}

// ---------------------------------------------------------------------------
// Reference profile
// ---------------------------------------------------------------------------

/// The reference's patterns, in order (Python syntax, converted by [`py_pattern`]).
const REFERENCE_PATTERNS: [(FactTemplate, &str, bool); 20] = [
    (FactTemplate::Name, r"my name is (\w+)", false),
    (FactTemplate::Is, r"i(?:'m| am) (?:a |an )?(\w[\w\s]{2,30})", false),
    (FactTemplate::Prefers, r"i (?:prefer|like|love) (\w[\w\s]{2,30})", false),
    (FactTemplate::Dislikes, r"i (?:hate|dislike|don'?t like) (\w[\w\s]{2,30})", false),
    (FactTemplate::Uses, r"i (?:use|work with|am using) (\w[\w\s]{2,30})", false),
    (FactTemplate::Building, r"i(?:'m| am) (?:building|creating|making) (\w[\w\s]{2,30})", false),
    (FactTemplate::WorksAt, r"i (?:work at|work for) (\w[\w\s]{2,30})", false),
    (FactTemplate::MovedTo, r"i (?:moved?|relocated?) to (\w[\w\s]{2,30})", false),
    // Python's `$` also matches before a final newline.
    (
        FactTemplate::Joined,
        r"i (?:\w+ )?(?:joined?|started? at|started? working at) (\w[\w\s]{2,20}?)(?:\s+(?:last|next|this)\s+\w+|[!.,]|\n?\z)",
        false,
    ),
    (FactTemplate::From, r"i(?:'m| am) from (\w[\w\s]{2,30})", false),
    (FactTemplate::LivesIn, r"i live in (\w[\w\s]{2,30})", false),
    (FactTemplate::Favorite, r"my favorite (\w+) is (\w[\w\s]{2,30})", false),
    (FactTemplate::AskedAbout, r"how (?:do|can|should|would) (?:i|you|we) ([^.!?\n]{3,50})", false),
    (
        FactTemplate::Recommendation,
        r"\buse ([\w().\-]+(?:\s[\w().\-]+){0,4}) (?:for|to|with|when|instead of) ([^.!?\n]{3,30})",
        false,
    ),
    (
        FactTemplate::Advised,
        r"(?m)(?:^|[.!?]\s+)(?:try|install|run|check out|look into) ([\w().\-]+(?:\s[\w().\-]+){0,3})",
        true,
    ),
    (
        FactTemplate::Comparison,
        r"(\w[\w\s]{1,20}?) (?:vs\.?|versus|compared to) (\w[^.!?\n]{1,30})",
        false,
    ),
    (
        FactTemplate::Encountered,
        r"(?:getting|having|seeing|encountering|returns?|got|get) ([^.!?\n]{3,30}?) errors?",
        false,
    ),
    (FactTemplate::WantsTo, r"i (?:want|need|have) to ([^.!?\n]{3,30})", false),
    (FactTemplate::TryingTo, r"i(?:'m| am) trying to ([^.!?\n]{3,30})", false),
    (FactTemplate::Learning, r"i(?:'m| am) (?:learning|studying|new to) (\w[^.!?\n]{2,30})", false),
];

static REFERENCE_REGEXES: LazyLock<Vec<(FactTemplate, Regex)>> = LazyLock::new(|| {
    REFERENCE_PATTERNS.iter().map(|(t, p, _)| (*t, compile(&py_pattern(p), true))).collect()
});

/// The reference's `_clean_captured`: strip white space, then trailing `.,;:!?`
/// (white space before that punctuation stays).
fn clean_captured(text: &str) -> &str {
    py_strip(text).trim_end_matches(['.', ',', ';', ':', '!', '?'])
}

/// Fills `{0}`, `{1}`, … of `template` with `groups` in one pass.
fn render(template: &str, groups: &[&str]) -> String {
    let mut out =
        String::with_capacity(template.len() + groups.iter().map(|g| g.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}').and_then(|close| Some((close, after[..close].parse::<usize>().ok()?)))
        {
            Some((close, index)) => {
                out.push_str(groups.get(index).copied().unwrap_or(""));
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A text with no match of this regex has no match of the comparison template's
/// pattern (in either profile): every such match holds "vs", "versus" or
/// "compared", with the same case folding. The template's pattern may start at
/// any word, which makes searching it an order of magnitude slower than all the
/// other templates together; this literal search skips it on most turns.
static COMPARISON_GATE: LazyLock<Regex> = LazyLock::new(|| compile("vs|versus|compared", true));

/// Can `template`'s pattern match in `text`? `false` only when it cannot.
fn may_match(template: FactTemplate, text: &str) -> bool {
    template != FactTemplate::Comparison || COMPARISON_GATE.is_match(text)
}

fn extract_reference(user: &str, agent: &str) -> Vec<FactCandidate> {
    let user = user.trim_end_matches([' ', '.']);
    let agent = agent.trim_end_matches([' ', '.']);
    let combined = if agent.is_empty() { user.to_owned() } else { format!("{user}. {agent}") };
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (template, re) in REFERENCE_REGEXES.iter() {
        if !may_match(*template, &combined) {
            continue;
        }
        for caps in re.captures_iter(&combined) {
            let groups: Vec<&str> =
                caps.iter().skip(1).map(|g| clean_captured(g.map_or("", |m| m.as_str()))).collect();
            if groups.iter().any(|g| g.is_empty()) {
                continue;
            }
            push_fact(&mut out, &mut seen, *template, render(template.format(), &groups));
        }
    }
    out
}

fn push_fact(
    out: &mut Vec<FactCandidate>,
    seen: &mut HashSet<String>,
    template: FactTemplate,
    content: String,
) {
    if seen.contains(&content) {
        return;
    }
    seen.insert(content.clone());
    out.push(FactCandidate {
        category: classify_category(&content),
        r#abstract: generate_abstract(&content),
        importance: template.importance(),
        template,
        content,
    });
}

// ---------------------------------------------------------------------------
// Default profile
// ---------------------------------------------------------------------------

// The word lists below, as sets.
static CLAUSE_BREAK_SET: WordSet = WordSet::new(CLAUSE_BREAKS);
static CLAUSE_SUBJECT_SET: WordSet = WordSet::new(CLAUSE_SUBJECTS);
static TIME_WORD_SET: WordSet = WordSet::new(TIME_WORDS);
pub(crate) static TRAILING_FILLER_SET: WordSet = WordSet::new(TRAILING_FILLER);

/// Words that end a clause inside a capture (default profile).
const CLAUSE_BREAKS: &[&str] = &[
    "but", "because", "cause", "since", "although", "though", "while", "whereas", "so", "which",
    "who", "whom", "whose", "where", "when", "whenever", "if", "unless", "until", "till",
];

/// After "and"/"or", these start a new clause ("engineer and I mostly design").
const CLAUSE_SUBJECTS: &[&str] = &[
    "i", "i'm", "i’m", "i've", "i’ve", "i'd", "i’d", "i'll", "i’ll", "we", "we're", "we’re", "you",
    "he", "she", "they", "it", "it's", "it’s", "my", "our", "then", "also", "mostly", "now",
];

/// Time words that, after last/next/this/these, make a temporal tail.
#[rustfmt::skip]
const TIME_WORDS: &[&str] = &[
    "week", "weekend", "month", "year", "summer", "winter", "spring", "autumn", "fall", "night",
    "morning", "evening", "afternoon", "quarter", "semester", "term", "days", "time", "monday",
    "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
];

/// Words that end a capture on their own (temporal tails).
const TEMPORAL_WORDS: &[&str] = &["yesterday", "today", "tonight", "tomorrow", "recently", "ago"];

/// Words a capture must not end with (articles, prepositions, conjunctions).
pub(crate) const TRAILING_FILLER: &[&str] = &[
    "a", "an", "the", "of", "to", "for", "with", "in", "on", "at", "by", "from", "as", "into",
    "and", "or", "but", "my", "our", "your", "their", "his", "her", "its", "that", "this", "now",
    "i", "we", "so", "very", "really", "just", "also", "is", "are", "was",
];

fn normalize_word(word: &str) -> String {
    word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’').to_lowercase()
}

/// Cuts a raw capture at a clause boundary or whole word (default profile, Q1).
///
/// Words are kept while they *start* within `max_chars` of the capture start (so the
/// word the reference would cut in half is kept whole), up to a clause-breaking word
/// ("but", "because", "when", …), "and/or" followed by a new subject, or a temporal
/// tail ("last week", "yesterday"). Trailing fillers ("the", "for", …) and trailing
/// punctuation are dropped. `None` when fewer than `min_chars` remain.
pub(crate) fn clause_capture(raw: &str, max_chars: usize, min_chars: usize) -> Option<String> {
    let words: Vec<&str> = raw.split_whitespace().collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut len = 0usize;
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            let w = normalize_word(word);
            let next = words.get(i + 1).map(|n| normalize_word(n)).unwrap_or_default();
            if CLAUSE_BREAK_SET.contains(&w)
                || TEMPORAL_WORDS.contains(&w.as_str())
                || ((w == "and" || w == "or") && CLAUSE_SUBJECT_SET.contains(&next))
                || (matches!(w.as_str(), "last" | "next" | "this" | "these" | "that")
                    && TIME_WORD_SET.contains(&next))
            {
                break;
            }
            if len + 1 >= max_chars {
                break;
            }
            len += 1;
        }
        kept.push(word);
        len += word.chars().count();
    }
    // "at all" is emphasis, not part of the object ("cilantro at all").
    if kept.len() > 2
        && kept.last().is_some_and(|w| normalize_word(w) == "all")
        && normalize_word(kept[kept.len() - 2]) == "at"
    {
        kept.truncate(kept.len() - 2);
    }
    while let Some(last) = kept.last() {
        if kept.len() > 1 && TRAILING_FILLER_SET.contains(&normalize_word(last)) {
            kept.pop();
        } else {
            break;
        }
    }
    let joined = kept.join(" ");
    let trimmed = joined
        .trim_end_matches(|c: char| !c.is_alphanumeric() && !matches!(c, '+' | '#' | '%' | ')'));
    (trimmed.chars().count() >= min_chars).then(|| trimmed.to_owned())
}

/// How a default-profile capture group is cleaned.
#[derive(Clone, Copy)]
enum Cap {
    /// Reference cleaning (`_clean_captured`) only.
    Plain,
    /// [`clause_capture`] with (max, min) characters.
    Clause(usize, usize),
}

struct DefaultPattern {
    template: FactTemplate,
    regex: Regex,
    caps: &'static [Cap],
}

/// Text after "I'm " that belongs to a specific template; the generic "User is X"
/// does not fire on it (default profile, Q2).
#[rustfmt::skip]
const GENERIC_IS_SKIP: &[&str] = &[
    "building", "creating", "making", "from", "trying to", "learning", "studying", "new to",
    "using",
];

/// A clause capture: a word character, then anything up to clause punctuation or a
/// line break (cut further by [`clause_capture`]).
const TAIL: &str = r#"(\w[^\n.!?;:,()\[\]{}"“”]*)"#;
/// A code-ish token for advice: dots only inside it ("pandas.read_csv()"), so a
/// sentence end stops it (default profile, Q1).
const TOKEN: &str = r"[\w()\-]+(?:\.[\w()\-]+)*";
/// "I'm" / "I am" with either apostrophe (default profile).
const IM: &str = r"\bi(?:['’]m|\s+am)\s+";

static DEFAULT_PATTERNS: LazyLock<Vec<DefaultPattern>> = LazyLock::new(|| {
    use FactTemplate as T;
    const C31: &[Cap] = &[Cap::Clause(31, 3)];
    let p = |template, pattern: String, caps: &'static [Cap]| DefaultPattern {
        template,
        regex: compile(&pattern, true),
        caps,
    };
    // Every first-person pattern gets a leading `\b` ("Hawaii have to" is not
    // "I have to"; like Q13) and accepts the typographic apostrophe.
    vec![
        // Q1: names may contain hyphens and apostrophes ("Jean-Luc", "O'Brien").
        p(T::Name, r"\bmy\s+name\s+is\s+(\w+(?:['’\-]\w+)*)".to_owned(), &[Cap::Plain]),
        // Q2: group 1 (the article) lets `extract_default` skip specific templates.
        p(T::Is, format!(r"{IM}((?:an?\s+)?){TAIL}"), &[Cap::Plain, Cap::Clause(31, 3)]),
        p(T::Prefers, format!(r"\bi\s+(?:prefer|like|love)\s+{TAIL}"), C31),
        p(T::Dislikes, format!(r"\bi\s+(?:hate|dislike|don['’]?t\s+like)\s+{TAIL}"), C31),
        // Q2: "I'm using X" is the uses template, not "User is using X".
        p(T::Uses, format!(r"\bi(?:\s+use|\s+work\s+with|(?:['’]m|\s+am)\s+using)\s+{TAIL}"), C31),
        p(T::Building, format!(r"{IM}(?:building|creating|making)\s+{TAIL}"), C31),
        p(T::WorksAt, format!(r"\bi\s+work\s+(?:at|for)\s+{TAIL}"), C31),
        p(T::MovedTo, format!(r"\bi\s+(?:moved?|relocated?)\s+to\s+{TAIL}"), C31),
        // Q4: "joined" no longer needs a terminator within 21 characters; the
        // temporal tail ("last week") is cut by `clause_capture`.
        p(
            T::Joined,
            format!(r"\bi\s+(?:\w+\s+)?(?:joined?|started?\s+at|started?\s+working\s+at)\s+{TAIL}"),
            &[Cap::Clause(21, 3)],
        ),
        p(T::From, format!(r"{IM}from\s+{TAIL}"), C31),
        p(T::LivesIn, format!(r"\bi\s+live\s+in\s+{TAIL}"), C31),
        // Q4: British "favourite" and categories of up to three words.
        p(
            T::Favorite,
            format!(r"\bmy\s+favou?rite\s+(\w+(?:[\s\-]\w+){{0,2}}?)\s+(?:is|are)\s+{TAIL}"),
            &[Cap::Plain, Cap::Clause(31, 3)],
        ),
        p(
            T::AskedAbout,
            format!(r"\bhow\s+(?:do|can|should|would)\s+(?:i|you|we)\s+{TAIL}"),
            &[Cap::Clause(50, 3)],
        ),
        p(
            T::Recommendation,
            format!(
                r"\buse\s+({TOKEN}(?:\s+{TOKEN}){{0,4}})\s+(?:for|to|with|when|instead\s+of)\s+{TAIL}"
            ),
            &[Cap::Plain, Cap::Clause(30, 3)],
        ),
        p(
            T::Advised,
            // Q1: the advice stops at the end of its sentence or clause.
            format!(
                r"(?m)(?:^|[.!?]\s+)(?:try|install|run|check\s+out|look\s+into)\s+({TOKEN}(?:[^\S\n]+{TOKEN}){{0,3}})"
            ),
            &[Cap::Clause(usize::MAX, 1)],
        ),
        // Q1: the first side starts at a word boundary (no "uld I pick X").
        p(
            T::Comparison,
            format!(r"\b(\w[\w\s]{{1,20}}?)\s+(?:vs\.?|versus|compared\s+to)\s+{TAIL}"),
            &[Cap::Plain, Cap::Clause(31, 2)],
        ),
        p(
            T::Encountered,
            r"\b(?:getting|having|seeing|encountering|returns?|got|get)\s+([^.!?\n]{3,30}?)\s+errors?\b"
                .to_owned(),
            &[Cap::Plain],
        ),
        p(T::WantsTo, format!(r"\bi\s+(?:want|need|have)\s+to\s+{TAIL}"), &[Cap::Clause(30, 3)]),
        p(T::TryingTo, format!(r"{IM}trying\s+to\s+{TAIL}"), &[Cap::Clause(30, 3)]),
        p(T::Learning, format!(r"{IM}(?:learning|studying|new\s+to)\s+{TAIL}"), C31),
    ]
});

fn default_groups(pattern: &DefaultPattern, caps: &Captures<'_>) -> Option<Vec<String>> {
    let mut groups = Vec::with_capacity(pattern.caps.len());
    for (i, kind) in pattern.caps.iter().enumerate() {
        let raw = caps.get(i + 1).map_or("", |m| m.as_str());
        let value = match kind {
            Cap::Plain => clean_captured(raw).to_owned(),
            Cap::Clause(max, min) => clause_capture(raw, *max, *min)?,
        };
        groups.push(value);
    }
    Some(groups)
}

/// `true` when the text before a "use X for Y" match ends with the subject "I"
/// ("I", "I also", "I still"): the user describes what they use, which the uses
/// template already records.
fn is_first_person_use(before: &str) -> bool {
    let mut words = before.split_whitespace().rev().map(normalize_word);
    let Some(mut last) = words.next() else { return false };
    if matches!(last.as_str(), "also" | "still" | "mostly" | "usually" | "often" | "now") {
        match words.next() {
            Some(w) => last = w,
            None => return false,
        }
    }
    last == "i"
}

fn extract_default(user: &str, agent: &str) -> Vec<FactCandidate> {
    let user = user.trim_end_matches([' ', '.']);
    let agent = agent.trim_end_matches([' ', '.']);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for pattern in DEFAULT_PATTERNS.iter() {
        // Q3: each turn is read on its own; facts about the user come from the
        // user's turn only (the agent's "How can I help?" is not "User asked about
        // help"), recommendations, advice and comparisons from either turn.
        let texts: &[&str] = if pattern.template.is_user_fact() { &[user] } else { &[user, agent] };
        for text in texts {
            if !may_match(pattern.template, text) {
                continue;
            }
            for caps in pattern.regex.captures_iter(text) {
                if pattern.template == FactTemplate::Recommendation
                    && caps.get(0).is_some_and(|m| is_first_person_use(&text[..m.start()]))
                {
                    // Q2 (same accident, another template): "I use X for Y" is the
                    // uses template, not advice to use X.
                    continue;
                }
                let Some(mut groups) = default_groups(pattern, &caps) else { continue };
                if pattern.template == FactTemplate::Is {
                    // Q2: "I'm building X", "I'm from X", … are left to their templates.
                    let article = groups.remove(0);
                    let tail = groups[0].to_lowercase();
                    if article.is_empty()
                        && GENERIC_IS_SKIP.iter().any(|s| {
                            tail.strip_prefix(s).is_some_and(|r| r.is_empty() || r.starts_with(' '))
                        })
                    {
                        continue;
                    }
                }
                if groups.iter().any(String::is_empty) {
                    continue;
                }
                let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
                push_fact(
                    &mut out,
                    &mut seen,
                    pattern.template,
                    render(pattern.template.format(), &refs),
                );
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------

/// Extracts semantic facts from one exchange, in the reference's order (template by
/// template, matches left to right), dropping repeats within the call.
///
/// Reference: the patterns run on `user + ". " + agent` (after stripping trailing
/// spaces and dots), accidents included. Default: see the module docs.
#[must_use]
pub fn extract_facts(user: &str, agent: &str, profile: Profile) -> Vec<FactCandidate> {
    match profile {
        Profile::Reference => extract_reference(user, agent),
        Profile::Default => extract_default(user, agent),
    }
}

// ---------------------------------------------------------------------------
// Enrichment: category and abstract (both profiles)
// ---------------------------------------------------------------------------

#[rustfmt::skip]
const PREFERENCE_KEYWORDS: &[&str] = &[
    "likes", "prefers", "favorite", "favourite", "love", "loves", "prefer", "dislikes", "hates",
    "hate", "dislike",
];
#[rustfmt::skip]
const EVENT_KEYWORDS: &[&str] = &[
    "yesterday", "today", "tomorrow", "last week", "next week", "last month", "next month",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
    "february", "march", "april", "june", "july", "august", "september", "october", "november",
    "december", "morning", "evening", "afternoon", "meeting", "event", "scheduled", "deadline",
];
#[rustfmt::skip]
const PROFILE_KEYWORDS: &[&str] = &[
    "name is", "works at", "work for", "lives in", "is a", "is an", "age", "born", "occupation",
    "role",
];

static PROPER_NAME: LazyLock<Regex> =
    LazyLock::new(|| compile(&py_pattern(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b"), false));

/// The reference's `classify_memory_category`: substring keyword tests in the order
/// preference, two capitalised words in a row (entity), event, profile; `None` when
/// nothing matches.
#[must_use]
pub fn classify_category(content: &str) -> Option<MemoryCategory> {
    let lower = content.to_lowercase();
    let has = |kws: &[&str]| kws.iter().any(|k| lower.contains(k));
    if has(PREFERENCE_KEYWORDS) {
        Some(MemoryCategory::Preference)
    } else if PROPER_NAME.is_match(content) {
        Some(MemoryCategory::Entity)
    } else if has(EVENT_KEYWORDS) {
        Some(MemoryCategory::Event)
    } else if has(PROFILE_KEYWORDS) {
        Some(MemoryCategory::Profile)
    } else {
        None
    }
}

/// The reference's `generate_abstract`, shared with the episodes' abstracts.
pub use super::significance::generate_abstract;

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(user: &str, agent: &str, profile: Profile) -> Vec<String> {
        extract_facts(user, agent, profile).into_iter().map(|f| f.content).collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The comparison gate only skips turns where neither profile's comparison
        /// pattern can match.
        #[test]
        fn comparison_gate_never_hides_a_match(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "I", "would", "pick", "Python", "rust", "tea", "coffee", "vs", "vs.", "VS",
                    "Vſ", "versus", "VERSUS", "compared", "Compared", "to", "TO", ".", "\n",
                    ",", "?", "Ünïcode",
                ]),
                0..12,
            )
        ) {
            let text = words.join(" ");
            let default = DEFAULT_PATTERNS
                .iter()
                .find(|p| p.template == FactTemplate::Comparison)
                .is_some_and(|p| p.regex.is_match(&text));
            let reference = REFERENCE_REGEXES
                .iter()
                .find(|(t, _)| *t == FactTemplate::Comparison)
                .is_some_and(|(_, re)| re.is_match(&text));
            proptest::prop_assert!(
                !(default || reference) || may_match(FactTemplate::Comparison, &text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn py_pattern_rewrites_word_class() {
        assert_eq!(py_pattern(r"(\w[\w\s]{2,30})"), r"([\p{L}\p{N}_][\p{L}\p{N}_\s]{2,30})");
        assert_eq!(py_pattern(r"[^.!?\n]"), r"[^.!?\n]");
        assert_eq!(py_pattern(r"[\w().\-]+"), r"[\p{L}\p{N}_().\-]+");
    }

    #[test]
    fn reference_keeps_its_accidents() {
        let r = Profile::Reference;
        // Q1: 31-character cut mid-word, hyphen stops the capture.
        assert_eq!(
            contents("I'm building a scale model of the Eiffel Tower", "", r),
            vec![
                "User is building a scale model of the E",
                "User is building a scale model of the Eiffel Tow"
            ]
        );
        assert_eq!(contents("I dislike auto-layout", "", r), vec!["User dislikes auto"]);
        // Q3: agent text yields user facts.
        assert_eq!(
            contents("Hi there!", "Hello! How can I help?", r),
            vec!["User asked about help"]
        );
        // Q4: British spelling never matches.
        assert!(contents("My favourite colour is teal", "", r).is_empty());
    }

    #[test]
    fn default_cuts_at_whole_words() {
        // Q1
        let d = Profile::Default;
        assert_eq!(
            contents("I'm building a scale model of the Eiffel Tower", "", d),
            vec!["User is building a scale model of the Eiffel Tower"]
        );
        assert_eq!(contents("I dislike auto-layout", "", d), vec!["User dislikes auto-layout"]);
        assert_eq!(
            contents("I work at Arup in the long-span bridge group", "", d),
            vec!["User works at Arup in the long-span bridge group"]
        );
        assert_eq!(
            contents("I'm a structural engineer and I mostly design pedestrian bridges.", "", d),
            vec!["User is structural engineer"]
        );
    }

    #[test]
    fn default_generic_is_does_not_duplicate() {
        // Q2
        let d = Profile::Default;
        assert_eq!(contents("I'm from Porto", "", d), vec!["User is from Porto"]);
        assert_eq!(contents("I'm building a CLI", "", d), vec!["User is building a CLI"]);
        assert_eq!(
            contents("I'm new to Kubernetes, so go easy on me", "", d),
            vec!["User is learning Kubernetes"]
        );
        assert_eq!(contents("I am using Neovim", "", d), vec!["User uses Neovim"]);
        assert_eq!(contents("I’m a nurse", "", d), vec!["User is nurse"]);
        // The article keeps "a building inspector" generic.
        assert_eq!(contents("I'm a building inspector", "", d), vec!["User is building inspector"]);
    }

    #[test]
    fn default_reads_user_facts_from_the_user_only() {
        // Q3
        let d = Profile::Default;
        assert!(contents("Hi there!", "Hello! How can I help?", d).is_empty());
        assert_eq!(
            contents("Any tips?", "Try ripgrep. Use serde for serialization.", d),
            vec!["Recommendation: use serde for serialization", "Advised: ripgrep"]
        );
    }

    #[test]
    fn default_favorites_and_joined() {
        // Q4
        let d = Profile::Default;
        assert_eq!(
            contents("My favourite colour is teal", "", d),
            vec!["User's favorite colour is teal"]
        );
        assert_eq!(
            contents("My favorite coffee shop is Blue Door", "", d),
            vec!["User's favorite coffee shop is Blue Door"]
        );
        assert_eq!(
            contents("I joined Stripe last week and love it", "", d),
            vec!["User works at Stripe"]
        );
        assert_eq!(
            contents("I just joined a small robotics startup in Lyon as lead", "", d),
            vec!["User works at a small robotics startup"]
        );
    }

    #[test]
    fn prefixes_and_slots() {
        assert_eq!(fact_prefix("User is building X"), Some("User is"));
        assert_eq!(fact_prefix("Advised: ripgrep"), Some("Advised:"));
        assert_eq!(fact_prefix("Something else"), None);
        assert_eq!(
            slot_key("User's favorite Color is teal", Profile::Default).as_deref(),
            Some("User's favorite color")
        );
        assert_eq!(
            slot_key("User's favorite color is teal", Profile::Reference).as_deref(),
            Some("User's favorite")
        );
        assert_eq!(
            slot_key("User is from Porto", Profile::Default).as_deref(),
            Some("User is from")
        );
        assert!(is_single_valued("User is from"));
        assert!(is_single_valued("User's favorite color"));
        assert!(!is_single_valued("User is"));
        assert!(!is_single_valued("User prefers"));
    }

    #[test]
    fn enrichment_matches_reference() {
        assert_eq!(classify_category("User's name is Marta"), Some(MemoryCategory::Profile));
        assert_eq!(classify_category("User prefers tea"), Some(MemoryCategory::Preference));
        assert_eq!(classify_category("User works at Umbra Health"), Some(MemoryCategory::Entity));
        assert_eq!(classify_category("User wants to ship"), None);
        assert_eq!(generate_abstract("Advised: pandas.read_csv() now"), "Advised: pandas");
    }
}
