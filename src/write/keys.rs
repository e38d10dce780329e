//! Index keys of facts: conflict slots and verb attributes.

use crate::Profile;

/// The reference's template prefixes, in its order (`_FACT_PREFIXES`, duplicates
/// removed: a duplicate can never match first).
pub const REFERENCE_PREFIXES: &[&str] = &[
    "User's name is",
    "User is",
    "User prefers",
    "User dislikes",
    "User uses",
    "User is building",
    "User works at",
    "User lives in",
    "User is from",
    "User's favorite",
    "User asked about",
    "Recommendation: use",
    "Advised:",
    "Comparison discussed:",
    "User encountered",
    "User wants to",
    "User is trying to",
    "User is learning",
];

/// Conflict slot keys of a fact's content.
///
/// Reference: every template prefix it starts with (the reference checks them in
/// [`REFERENCE_PREFIXES`] order). Default: the single-valued slot it fills, if any
/// (name, lives in, works at, is from, favorite `<category>`); multi-valued templates
/// accumulate and have no slot.
#[must_use]
pub fn slot_keys(content: &str, profile: Profile) -> Vec<String> {
    match profile {
        Profile::Reference => REFERENCE_PREFIXES
            .iter()
            .filter(|p| content.starts_with(**p))
            .map(|p| (*p).to_owned())
            .collect(),
        Profile::Default => super::facts::slot_key(content, Profile::Default)
            .filter(|k| super::facts::is_single_valued(k))
            .into_iter()
            .collect(),
    }
}

/// The verb attributes (location, employer, role) a fact states.
#[must_use]
pub fn attribute_keys(content: &str, profile: Profile) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (attr, _) in super::contradiction::verb_facts(content, profile) {
        let k = attr.as_str().to_owned();
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}
