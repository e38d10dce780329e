//! The two behaviour profiles.

use serde::{Deserialize, Serialize};

/// How soulmem decides: like soul-protocol 0.4.0, accidents included, or soundly.
///
/// `Reference` exists so soulmem's outputs can be diffed against the Python
/// reference; `Default` keeps its mechanisms, thresholds and weights and fixes the
/// accidents listed in `docs/QUIRKS.md`. A store remembers the profile it was
/// created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Sound behaviour: what users get.
    #[default]
    Default,
    /// soul-protocol 0.4.0's behaviour, exactly.
    Reference,
}

impl Profile {
    /// `true` for [`Profile::Reference`].
    #[must_use]
    pub fn is_reference(self) -> bool {
        matches!(self, Profile::Reference)
    }

    /// The name used on the command line and in the store (`default`, `reference`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Reference => "reference",
        }
    }

    /// Parses `default` or `reference`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "default" => Some(Profile::Default),
            "reference" => Some(Profile::Reference),
            _ => None,
        }
    }
}
