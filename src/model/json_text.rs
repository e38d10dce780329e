//! Serde adapter for free-form JSON values (`dict[str, Any]` in the reference).
//!
//! JSON (and other self-describing, human-readable encoders) get the value as is.
//! Binary encoders such as postcard cannot carry a `serde_json::Value` (it needs
//! `deserialize_any`), so there the value travels as its JSON text.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Serialises `v` as JSON (human-readable encoders) or as JSON text (binary ones).
///
/// # Errors
/// Propagates the serializer's error.
pub fn serialize<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() {
        v.serialize(s)
    } else {
        let text = serde_json::to_string(v).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }
}

/// The inverse of [`serialize`].
///
/// # Errors
/// Fails when the value (or the embedded text) is not the expected JSON.
pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    if d.is_human_readable() {
        T::deserialize(d)
    } else {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}
