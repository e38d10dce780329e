//! Index keys derived from an entry. Every index row of a memory comes from here, so
//! the writer, the consistency check and the rebuild agree by construction.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::Profile;
use crate::model::MemoryEntry;
use crate::text::{index_terms, tokenize_dedup};

/// The layer whose active entries are "facts" (dedup, conflicts, contradictions).
pub const FACT_LAYER: &str = "semantic";

/// Every index row a memory owns, besides its entry and [`super::DocInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexKeys {
    /// Index terms with their weighted frequency in half units, sorted by term,
    /// each term once: 2 per occurrence in the content, 1 per occurrence in the
    /// conversation context ([`CONTENT_UNITS`]); and the memory's [`owner_term`]
    /// and [`domain_term`].
    pub tokens: Vec<(String, u32)>,
    /// Document length in the same half units (the tag terms not counted).
    pub doc_len: u32,
    /// Dedup tokens (active facts only).
    pub fact_tokens: BTreeSet<String>,
    /// Conflict slot keys (active facts only).
    pub slots: BTreeSet<String>,
    /// Verb attributes (active facts only).
    pub attributes: BTreeSet<String>,
    /// Lower-cased entity names.
    pub entities: BTreeSet<String>,
    /// The fact's card (active facts only).
    pub card: Option<FactCard>,
}

/// What the dedup and contradiction checks read of an active fact (the
/// `fact_cards` row). Its texts are shared: an observe compares a fact with
/// several texts, and a clone costs no copy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FactCard {
    /// The memory's id.
    pub id: Arc<str>,
    /// Its content.
    pub content: Arc<str>,
    /// Its importance (1..=10).
    pub importance: u8,
    /// Its creation time in µs since the epoch.
    pub created_us: i64,
}

/// Is `entry` an active semantic fact?
#[must_use]
pub fn is_active_fact(entry: &MemoryEntry) -> bool {
    entry.layer == FACT_LAYER && !entry.is_superseded()
}

/// The card of `entry` when it is an active fact.
#[must_use]
pub fn fact_card(entry: &MemoryEntry) -> Option<FactCard> {
    is_active_fact(entry).then(|| FactCard {
        id: entry.id.as_str().into(),
        content: entry.content.as_str().into(),
        importance: entry.importance,
        created_us: crate::model::time::to_micros(&entry.created_at),
    })
}

/// The index term every memory of `owner` (its `user_id`, `""` when it has
/// none) holds: its postings list the owner's memories, so a `user_id` filter
/// walks their member set beside the query terms' postings
/// (`read::filters::OwnerMembers`).
/// It starts with a NUL, which no word does, so no query ever holds it; it adds
/// nothing to the memory's length and is left out of its terms row
/// ([`super::doc_terms`]).
#[must_use]
pub fn owner_term(owner: &str) -> String {
    [OWNER_TERM_PREFIX, owner].concat()
}

/// What every [`owner_term`] starts with.
pub const OWNER_TERM_PREFIX: &str = "\u{0}owner:";

/// The weighted frequency of an [`owner_term`] in [`IndexKeys::tokens`].
pub const OWNER_TERM_UNITS: u32 = 1;

/// The index term every memory of `domain` holds (schema 10): its postings list
/// the domain's memories, from which a `domain` filter takes the set of memories
/// it keeps (`read::filters::DomainMembers`). Like the [`owner_term`], it
/// starts with a NUL, adds nothing to the memory's length and is left out of
/// its terms row.
#[must_use]
pub fn domain_term(domain: &str) -> String {
    [DOMAIN_TERM_PREFIX, domain].concat()
}

/// What every [`domain_term`] starts with.
pub const DOMAIN_TERM_PREFIX: &str = "\u{0}domain:";

/// The weighted frequency of a [`domain_term`] in [`IndexKeys::tokens`].
pub const DOMAIN_TERM_UNITS: u32 = 1;

/// Whether `term` tags memories rather than being one of their words (an
/// [`owner_term`] or a [`domain_term`]: no word starts with a NUL).
#[must_use]
pub fn is_tag_term(term: &str) -> bool {
    term.starts_with('\u{0}')
}

/// Units of one content occurrence in [`IndexKeys::tokens`].
pub const CONTENT_UNITS: u32 = 2;
/// Units of one context occurrence (half the weight of the content).
pub const CONTEXT_UNITS: u32 = 1;

/// Computes the index keys of `entry` under `profile`. `context` is the
/// conversation context stored with the memory (the preceding turns), indexed at
/// half weight so a turn can be found by what it answers.
#[must_use]
pub fn index_keys(entry: &MemoryEntry, profile: Profile, context: Option<&str>) -> IndexKeys {
    let context_terms = context.map(index_terms);
    index_keys_with(entry, profile, None, context_terms.as_slice())
}

/// [`index_keys`] with the terms computed ahead: `content_terms` must be
/// `index_terms(&entry.content)` in any order (sorted ones cost one pass to
/// check), and the context's terms, in parts, those of the context (`index_terms`
/// of the parts joined by white space, as the context is).
#[must_use]
pub fn index_keys_with<T: AsRef<[String]>>(
    entry: &MemoryEntry,
    profile: Profile,
    content_terms: Option<Vec<String>>,
    context_terms: &[T],
) -> IndexKeys {
    let mut keys = IndexKeys::default();
    // Both lists sorted, then merged: the content's terms move in, a context
    // term is copied only when the content lacks it.
    let mut content = content_terms.unwrap_or_else(|| index_terms(&entry.content));
    content.sort_unstable();
    let mut context: Vec<&str> =
        context_terms.iter().flat_map(AsRef::as_ref).map(String::as_str).collect();
    context.sort_unstable();
    let units = |n: usize, each: u32| u32::try_from(n).unwrap_or(u32::MAX).saturating_mul(each);
    keys.doc_len =
        units(content.len(), CONTENT_UNITS).saturating_add(units(context.len(), CONTEXT_UNITS));
    let tokens = &mut keys.tokens;
    tokens.reserve(content.len() + context.len() + 2);
    let mut context = context.into_iter().peekable();
    for term in content {
        while let Some(c) = context.next_if(|c| *c < term.as_str()) {
            add_units(tokens, c, CONTEXT_UNITS);
        }
        match tokens.last_mut() {
            Some((last, u)) if *last == term => *u += CONTENT_UNITS,
            _ => tokens.push((term, CONTENT_UNITS)),
        }
    }
    for c in context {
        add_units(tokens, c, CONTEXT_UNITS);
    }
    if is_active_fact(entry) {
        keys.fact_tokens = tokenize_dedup(&entry.content);
        keys.slots = crate::write::keys::slot_keys(&entry.content, profile).into_iter().collect();
        keys.attributes =
            crate::write::keys::attribute_keys(&entry.content, profile).into_iter().collect();
        keys.card = fact_card(entry);
    }
    keys.entities = entry.entities.iter().map(|e| e.to_lowercase()).collect();
    set_units(
        &mut keys.tokens,
        owner_term(entry.user_id.as_deref().unwrap_or("")),
        OWNER_TERM_UNITS,
    );
    set_units(&mut keys.tokens, domain_term(&entry.domain), DOMAIN_TERM_UNITS);
    keys
}

/// Adds `units` to `term`, which sorts at or after the last of `tokens`.
fn add_units(tokens: &mut Vec<(String, u32)>, term: &str, units: u32) {
    match tokens.last_mut() {
        Some((last, u)) if last == term => *u += units,
        _ => tokens.push((term.to_owned(), units)),
    }
}

/// Sets `term`'s units in the sorted `tokens`, where it may be anywhere.
fn set_units(tokens: &mut Vec<(String, u32)>, term: String, units: u32) {
    match tokens.binary_search_by(|(t, _)| t.as_str().cmp(&term)) {
        Ok(i) => tokens[i].1 = units,
        Err(i) => tokens.insert(i, (term, units)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::model::MemoryType;

    proptest! {
        /// The terms are those of the content at two units per occurrence and
        /// of the context parts at one, summed per term, with the owner and
        /// domain tags, in term order, and the length counts the words.
        #[test]
        fn the_terms_are_the_contents_and_the_contexts_counted(
            content in prop::collection::vec("(tea|rust|paris|walk|an|zoo)", 0..12),
            parts in prop::collection::vec(
                prop::collection::vec("(tea|go|paris|ant|zoo|zz)", 0..8), 0..3),
            user in prop::option::of("(ana|bo)"),
        ) {
            let mut entry = MemoryEntry::new(MemoryType::Episodic, content.join(" "));
            entry.user_id = user.clone();
            let parts: Vec<Vec<String>> = parts;
            let keys = index_keys_with(&entry, Profile::Default, Some(content.clone()), &parts);
            let mut want: BTreeMap<String, u32> = BTreeMap::new();
            for t in &content {
                *want.entry(t.clone()).or_default() += CONTENT_UNITS;
            }
            for t in parts.iter().flatten() {
                *want.entry(t.clone()).or_default() += CONTEXT_UNITS;
            }
            let words = u32::try_from(content.len() * 2 + parts.iter().flatten().count()).unwrap_or(0);
            prop_assert_eq!(keys.doc_len, words);
            want.insert(owner_term(user.as_deref().unwrap_or("")), OWNER_TERM_UNITS);
            want.insert(domain_term(&entry.domain), DOMAIN_TERM_UNITS);
            prop_assert_eq!(keys.tokens, want.into_iter().collect::<Vec<_>>());
        }
    }
}
