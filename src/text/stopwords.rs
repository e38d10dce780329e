//! English stop-words dropped from queries by the default profile's ranking.

/// Sorted, so membership is a binary search.
const STOP_WORDS: &[&str] = &[
    "about", "above", "after", "again", "against", "all", "also", "and", "any", "are", "aren",
    "because", "been", "before", "being", "below", "between", "both", "but", "can", "cannot",
    "could", "couldn", "did", "didn", "does", "doesn", "doing", "don", "down", "during", "each",
    "few", "for", "from", "further", "had", "hadn", "has", "hasn", "have", "haven", "having",
    "her", "here", "hers", "herself", "him", "himself", "his", "how", "into", "isn", "its",
    "itself", "just", "let", "more", "most", "mustn", "myself", "nor", "not", "now", "off",
    "once", "only", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same",
    "shan", "she", "should", "shouldn", "some", "such", "than", "that", "the", "their",
    "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
    "through", "too", "under", "until", "very", "was", "wasn", "were", "weren", "what", "when",
    "where", "which", "while", "who", "whom", "why", "will", "with", "won", "would", "wouldn",
    "you", "your", "yours", "yourself", "yourselves",
];

/// Is `token` (lower-case) an English stop-word?
#[must_use]
pub fn is_stop_word(token: &str) -> bool {
    STOP_WORDS.binary_search(&token).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn list_is_sorted() {
        assert!(super::STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(super::is_stop_word("the"));
        assert!(!super::is_stop_word("paris"));
    }
}
