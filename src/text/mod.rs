//! Text analysis shared by the write and read paths: the reference's tokenizer and
//! synonym groups. Index keys are built from this output, so any change to it bumps
//! [`TOKENIZER_VERSION`] and the store's schema.

mod stopwords;
mod tokenize;

pub use stopwords::is_stop_word;

pub use tokenize::{
    TOKENIZER_VERSION, expand_synonyms, index_terms, relevance_of_tokens, relevance_score, stem,
    synonyms_of, tokenize, tokenize_dedup, tokenize_dedup_memo, tokenize_list,
};

/// A constant word list asked about membership: hashed on first use, so that a
/// lookup costs one hash instead of one comparison per listed word (the lists
/// run to 166 words, asked about every token of every exchange).
#[derive(Debug)]
pub(crate) struct WordSet {
    list: &'static [&'static str],
    set: std::sync::OnceLock<std::collections::HashSet<&'static str>>,
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
