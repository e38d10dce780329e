//! Text analysis shared by the write and read paths: the reference's tokenizer and
//! synonym groups. Index keys are built from this output, so any change to it bumps
//! [`TOKENIZER_VERSION`] and the store's schema.

mod memo;
mod stopwords;
mod tokenize;

pub(crate) use memo::TextMemo;
pub use stopwords::is_stop_word;

pub use tokenize::{
    TOKENIZER_VERSION, expand_synonyms, index_terms, index_terms_memo, relevance_of_tokens,
    relevance_score, remember_index_terms, stem, synonyms_of, tokenize, tokenize_dedup,
    tokenize_dedup_memo, tokenize_list,
};

/// A set of tokens as the sorted [`fnv1a`] hashes of its members: its size and
/// its intersections with other such sets are the token set's (unless two
/// members' hashes collide: about n²/2^65 for a set of n tokens, never seen),
/// counted by merging two lists of integers instead of comparing strings. The
/// write path compares the same facts and recent episodes observe after
/// observe (dedup, contradiction pre-selection, novelty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenHashes(Box<[u64]>);

impl TokenHashes {
    /// The hashes of `tokens` (each counted once).
    #[must_use]
    pub fn of<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Self {
        let mut h: Vec<u64> = tokens.into_iter().map(fnv1a).collect();
        h.sort_unstable();
        h.dedup();
        Self(h.into_boxed_slice())
    }

    /// Members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Members it shares with `other`.
    #[must_use]
    pub fn intersection_len(&self, other: &Self) -> usize {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j, mut n) = (0, 0, 0);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    n += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        n
    }
}

impl From<&std::collections::BTreeSet<String>> for TokenHashes {
    fn from(set: &std::collections::BTreeSet<String>) -> Self {
        Self::of(set.iter().map(String::as_str))
    }
}

/// A constant word list asked about membership: hashed on first use, so that a
/// lookup costs one hash instead of one comparison per listed word (the lists
/// run to 166 words, asked about every token of every exchange).
#[derive(Debug)]
pub(crate) struct WordSet {
    list: &'static [&'static str],
    set: std::sync::OnceLock<foldhash::HashSet<&'static str>>,
}

impl WordSet {
    /// The set of `list`'s words.
    pub(crate) const fn new(list: &'static [&'static str]) -> Self {
        Self { list, set: std::sync::OnceLock::new() }
    }

    /// Whether `word` is listed.
    pub(crate) fn contains(&self, word: &str) -> bool {
        self.set.get_or_init(|| self.list.iter().copied().collect()).contains(word)
    }
}

/// FNV-1a, 64 bits: a hash that never changes (std's hasher may), for feature
/// hashing and for the term hashes stored in `user_terms` rows.
#[must_use]
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
