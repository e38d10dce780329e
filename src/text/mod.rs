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
