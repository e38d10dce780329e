//! Index keys of facts: conflict slots and verb attributes.

use std::sync::LazyLock;

use regex::Regex;

use crate::Profile;

/// The reference's template prefixes, in its order (`_FACT_PREFIXES`).
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

/// Prefixes of single-valued slots in the default profile: a new value replaces
/// the old one. Every other template accumulates.
const SINGLE_VALUED: &[&str] =
    &["User's name is", "User lives in", "User works at", "User is from"];

/// Conflict slot keys of a fact's content.
///
/// Reference: every template prefix it starts with (the reference checks them in
/// [`REFERENCE_PREFIXES`] order). Default: the one single-valued slot it fills, if any;
/// for "User's favorite X is …" the slot includes the category word X.
#[must_use]
pub fn slot_keys(content: &str, profile: Profile) -> Vec<String> {
    match profile {
        Profile::Reference => REFERENCE_PREFIXES
            .iter()
            .filter(|p| content.starts_with(**p))
            .map(|p| (*p).to_owned())
            .collect(),
        Profile::Default => {
            if let Some(p) = SINGLE_VALUED.iter().find(|p| content.starts_with(**p)) {
                return vec![(*p).to_owned()];
            }
            if let Some(rest) = content.strip_prefix("User's favorite ")
                && let Some(cat) = rest.split_whitespace().next()
                && rest.split_whitespace().nth(1) == Some("is")
            {
                return vec![format!("User's favorite {}", cat.to_lowercase())];
            }
            Vec::new()
        }
    }
}

static VERB_ATTRS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"(?i)(?:user|i)\s+(?:live?s?|resides?)\s+in\s+(.+?)(?:\.|,|$)", "location"),
        (
            r"(?i)(?:user|i)\s+(?:moved?|relocated?|moved? to)\s+(?:to\s+)?(.+?)(?:\.|,|$)",
            "location",
        ),
        (r"(?i)(?:user|i)\s+(?:is\s+)?based\s+in\s+(.+?)(?:\.|,|$)", "location"),
        (
            r"(?i)(?:user|i)\s+(?:works?\s+(?:at|for)|joined?|started?\s+at)\s+(.+?)(?:\.|,|$)",
            "employer",
        ),
        (r"(?i)(?:user|i)\s+(?:is\s+)?(?:a\s+)?(.+?)\s+(?:at|@)\s+(.+?)(?:\.|,|$)", "role"),
    ]
    .into_iter()
    .filter_map(|(p, k)| Regex::new(p).ok().map(|r| (r, k)))
    .collect()
});

/// The verb attributes (location, employer, role) a fact states.
#[must_use]
pub fn attribute_keys(content: &str, _profile: Profile) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (re, key) in VERB_ATTRS.iter() {
        if re.is_match(content) && !out.iter().any(|k| k == key) {
            out.push((*key).to_owned());
        }
    }
    out
}
