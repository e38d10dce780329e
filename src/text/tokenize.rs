//! soul-protocol 0.4.0's `search.tokenize`, its synonym groups and `relevance_score`.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};

use super::TokenHashes;
use super::memo::TextMemo;

/// Version of the tokenizer's output; stored with the schema.
pub const TOKENIZER_VERSION: u32 = 2;

/// The reference's synonym groups (programming and tech terms).
const SYNONYM_GROUPS: &[&[&str]] = &[
    &["database", "sql", "postgresql", "postgres", "mysql", "sqlite", "mongo", "mongodb"],
    &["javascript", "typescript"],
    &["python", "pip"],
    &["frontend", "client", "browser"],
    &["backend", "server"],
    &["api", "rest", "endpoint"],
    &["test", "testing", "pytest", "unittest"],
    &["deploy", "deployment", "shipping"],
    &["container", "docker", "kubernetes"],
    &["auth", "authentication", "login"],
    &["config", "configuration", "settings"],
    &["error", "exception", "bug"],
    &["async", "asynchronous", "await"],
    &["func", "function", "method"],
    &["repo", "repository", "git"],
    &["dependency", "dependencies", "package", "packages"],
    &["http", "https", "request", "response"],
    &["cli", "command", "terminal"],
];

static SYNONYMS: LazyLock<foldhash::HashMap<&'static str, &'static [&'static str]>> =
    LazyLock::new(|| {
        // No term is in two groups, so each group maps to itself.
        let mut map = foldhash::HashMap::default();
        for group in SYNONYM_GROUPS {
            for term in *group {
                map.insert(*term, *group);
            }
        }
        map
    });

/// The synonym group of `token` (including itself), if it has one.
#[must_use]
pub fn synonyms_of(token: &str) -> Option<&'static [&'static str]> {
    SYNONYMS.get(token).copied()
}

/// Adds every synonym of every token to the set.
#[must_use]
pub fn expand_synonyms(tokens: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = tokens.clone();
    for t in tokens {
        if let Some(group) = synonyms_of(t) {
            out.extend(group.iter().map(|s| (*s).to_owned()));
        }
    }
    out
}

fn is_separator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '/' | '_' | '.' | '\\' | '-' | '\u{1c}'..='\u{1f}')
}

/// The tokens of `text` in order, duplicates kept: lower-cased, split on white space and
/// `/ _ . \ -`, every character but `a`–`z` removed, shorter than `min_length` dropped.
#[must_use]
pub fn tokenize_list(text: &str, min_length: usize) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(is_separator)
        .filter_map(|w| {
            // `a`–`z` are one byte each, and no other character has such a byte.
            let kept = w.bytes().filter(u8::is_ascii_lowercase).count();
            if kept < min_length {
                None
            } else if kept == w.len() {
                Some(w.to_owned())
            } else {
                Some(w.chars().filter(char::is_ascii_lowercase).collect())
            }
        })
        .collect()
}

/// The reference's `tokenize(text)`: the set of tokens of at least 3 letters.
#[must_use]
pub fn tokenize(text: &str) -> BTreeSet<String> {
    tokenize_list(text, 3).into_iter().collect()
}

/// [`DEDUP_STOP_WORDS`] as a set.
static DEDUP_STOP_SET: super::WordSet = super::WordSet::new(DEDUP_STOP_WORDS);

/// Two-letter words the dedup tokenizer drops.
const DEDUP_STOP_WORDS: &[&str] = &[
    "am", "an", "as", "at", "be", "by", "do", "he", "if", "in", "is", "it", "me", "my", "no", "of",
    "on", "or", "so", "to", "up", "us", "we",
];

/// The dedup tokenizer: tokens of at least 2 letters minus short stop-words.
#[must_use]
pub fn tokenize_dedup(text: &str) -> BTreeSet<String> {
    tokenize_list(text, 2).into_iter().filter(|t| !DEDUP_STOP_SET.contains(t)).collect()
}

/// [`tokenize_dedup`] of a stored fact's text, as [`TokenHashes`], from a
/// per-thread memo: the contradiction check compares each new text with the
/// same facts of its user observe after observe, and hashing a text costs far
/// less than tokenizing it.
#[must_use]
pub fn tokenize_dedup_memo(text: &str) -> Arc<TokenHashes> {
    DEDUP_MEMO.with(|memo| {
        memo.borrow_mut()
            .get_or_insert_with(text, |text| Arc::new(TokenHashes::from(&tokenize_dedup(text))))
    })
}

thread_local! {
    static DEDUP_MEMO: RefCell<TextMemo<Arc<TokenHashes>>> =
        RefCell::new(TextMemo::default());
}

/// The reference's `relevance_score`: the fraction of query tokens found in the content
/// tokens expanded with synonyms (0 when the query has no token).
#[must_use]
pub fn relevance_score(query: &str, content: &str) -> f64 {
    relevance_of_tokens(&tokenize(query), content)
}

/// [`relevance_score`] with the query already tokenized (one query against many
/// contents).
#[must_use]
pub fn relevance_of_tokens(q: &BTreeSet<String>, content: &str) -> f64 {
    if q.is_empty() {
        return 0.0;
    }
    let c = expand_synonyms(&tokenize(content));
    let hits = q.iter().filter(|t| c.contains(*t)).count();
    hits as f64 / q.len() as f64
}

static STEMMER: LazyLock<rust_stemmers::Stemmer> =
    LazyLock::new(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English));

/// Index terms of `text`: the reference tokens (3+ letters) reduced to their English
/// Snowball stem, in order with duplicates. The inverted index is keyed by these, so
/// "painted", "painting" and "paints" meet at "paint".
#[must_use]
pub fn index_terms(text: &str) -> Vec<String> {
    tokenize_list(text, 3).into_iter().map(|t| stem(&t)).collect()
}

/// [`index_terms`] of `text`, from a per-thread memo: an episode is indexed with
/// the turns before it (its conversation context), so each turn's text is
/// indexed again with the next episodes of its conversation, often after the
/// turns of many other conversations.
#[must_use]
pub fn index_terms_memo(text: &str) -> Arc<[String]> {
    TERMS_MEMO.with(|memo| memo.borrow_mut().get_or_insert_with(text, |t| index_terms(t).into()))
}

/// Puts `terms`, which must be [`index_terms`] of `text` (computed ahead, e.g. on
/// another thread), in this thread's [`index_terms_memo`].
pub fn remember_index_terms(text: &str, terms: Vec<String>) {
    debug_assert_eq!(terms, index_terms(text));
    TERMS_MEMO.with(|memo| memo.borrow_mut().insert(text, terms.into()));
}

thread_local! {
    static TERMS_MEMO: RefCell<TextMemo<Arc<[String]>>> =
        RefCell::new(TextMemo::default());
}

/// The English Snowball stem of a lower-case token.
#[must_use]
pub fn stem(token: &str) -> String {
    // Natural text repeats its words: a per-thread memo of recent stems costs a hash
    // lookup where Snowball costs a few hundred nanoseconds. Bounded: cleared when
    // it reaches `STEM_MEMO_MAX` words (long tokens are not memoized).
    if token.len() > STEM_MEMO_WORD_MAX {
        return STEMMER.stem(token).into_owned();
    }
    STEM_MEMO.with(|memo| {
        let mut memo = memo.borrow_mut();
        if let Some(s) = memo.get(token) {
            return s.to_string();
        }
        let s = STEMMER.stem(token).into_owned();
        if memo.len() >= STEM_MEMO_MAX {
            memo.clear();
        }
        memo.insert(token.into(), s.as_str().into());
        s
    })
}

/// Words a thread's stem memo holds before it is cleared.
const STEM_MEMO_MAX: usize = 1 << 16;
/// Longer tokens are stemmed without the memo.
const STEM_MEMO_WORD_MAX: usize = 24;

thread_local! {
    static STEM_MEMO: std::cell::RefCell<foldhash::HashMap<Box<str>, Box<str>>> =
        std::cell::RefCell::new(foldhash::HashMap::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dedup_memo_answers_as_the_tokenizer() {
        let long = "word ".repeat(200);
        let texts =
            ["User lives in Paris", "User lives in Lisbon", "", "I'm at Acme, I'm happy", &long];
        for _ in 0..2 {
            for t in texts {
                assert_eq!(*tokenize_dedup_memo(t), TokenHashes::from(&tokenize_dedup(t)), "{t:?}");
            }
        }
    }

    proptest::proptest! {
        /// A context's terms are its turns' terms one after the other (which is
        /// what lets the writer index a context from its turns' memoized terms):
        /// lines split as words do, whatever the letters next to the cut.
        #[test]
        fn a_joined_texts_terms_are_its_parts_terms(
            parts in proptest::collection::vec(
                "[a-zA-Z ÀΣσςİıẞß'_./-]{0,24}", 1..4,
            ),
        ) {
            let joined = index_terms(&parts.join("\n"));
            let each: Vec<String> = parts.iter().flat_map(|p| index_terms_memo(p).to_vec()).collect();
            proptest::prop_assert_eq!(joined, each);
        }

        /// The tokens are the words with every character but `a`–`z` removed
        /// (whichever characters a word mixes), the short ones dropped.
        #[test]
        fn list_tokens_are_the_words_letters(
            text in "[a-zA-Z0-9 ÀéΣσİıẞß'’_./-]{0,40}",
            min in 0usize..5,
        ) {
            let want: Vec<String> = text
                .to_lowercase()
                .split(is_separator)
                .map(|w| w.chars().filter(char::is_ascii_lowercase).collect::<String>())
                .filter(|w| w.len() >= min)
                .collect();
            proptest::prop_assert_eq!(tokenize_list(&text, min), want);
        }
    }

    #[test]
    fn the_index_terms_memo_answers_as_the_tokenizer() {
        let long = "painted walls ".repeat(400);
        remember_index_terms("Painting walls", index_terms("Painting walls"));
        for _ in 0..2 {
            for t in ["Painting walls", "", "The user paints; Σίσυφος", long.as_str()] {
                assert_eq!(*index_terms_memo(t), *index_terms(t), "{t:?}");
            }
        }
    }

    #[test]
    fn splits_and_strips_like_the_reference() {
        let t = tokenize("Check app/routes/handler.py and user_session-token; Figma's C++ v2");
        let want: BTreeSet<String> =
            ["check", "app", "routes", "handler", "and", "user", "session", "token", "figmas"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        assert_eq!(t, want);
    }

    #[test]
    fn relevance_uses_synonyms_of_content_only() {
        assert!((relevance_score("database", "I use Postgres daily") - 1.0).abs() < 1e-9);
        assert!(relevance_score("postgres", "my notes").abs() < 1e-9);
        assert!(relevance_score("a b", "anything").abs() < 1e-9);
    }
}
