//! Naive datetimes as soul-protocol writes them.
//!
//! The reference writes every memory-side datetime without an offset (trap T1 in
//! `FORMAT.md`): `2026-03-02T11:12:07`, or with exactly six fraction digits when the
//! microseconds are not zero. soulmem keeps these instants as [`Timestamp`]
//! (a [`chrono::NaiveDateTime`], read as UTC wall-clock). Human-readable encoders
//! (JSON) get that text; binary encoders (postcard, in the store) get microseconds
//! since the Unix epoch.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime};
use serde::{Deserialize, Deserializer, Serializer};

/// A naive (offset-free) instant, read as UTC wall-clock time.
pub type Timestamp = NaiveDateTime;

/// Formats a timestamp the way pydantic writes a naive datetime.
#[must_use]
pub fn format_timestamp(ts: &Timestamp) -> String {
    if ts.and_utc().timestamp_subsec_micros() == 0 {
        ts.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        ts.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    }
}

/// Parses the datetime spellings pydantic accepts on input: `T` or space separator,
/// any fraction, an optional `Z` or `±hh:mm` offset (converted to UTC), or a bare date.
///
/// # Errors
/// Returns a message naming the text when it is not a datetime.
pub fn parse_timestamp(text: &str) -> Result<Timestamp, String> {
    let t = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.naive_utc());
    }
    let with_t = t.replacen(' ', "T", 1);
    if let Ok(dt) = DateTime::parse_from_rfc3339(&with_t) {
        return Ok(dt.naive_utc());
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(&with_t, fmt) {
            return Ok(dt);
        }
    }
    // Offsets without seconds or with a compact form: try chrono's generic parser.
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z"] {
        if let Ok(dt) = DateTime::parse_from_str(&with_t, fmt) {
            return Ok(dt.naive_utc());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d.and_time(NaiveTime::MIN));
    }
    Err(format!("invalid datetime {text:?}"))
}

/// Microseconds since the Unix epoch (UTC wall-clock).
#[must_use]
pub fn to_micros(ts: &Timestamp) -> i64 {
    ts.and_utc().timestamp_micros()
}

/// The inverse of [`to_micros`]; out-of-range values clamp to the epoch.
#[must_use]
pub fn from_micros(us: i64) -> Timestamp {
    DateTime::from_timestamp_micros(us).unwrap_or_default().naive_utc()
}

fn de_one<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    if d.is_human_readable() {
        let s = String::deserialize(d)?;
        parse_timestamp(&s).map_err(serde::de::Error::custom)
    } else {
        Ok(from_micros(i64::deserialize(d)?))
    }
}

/// Serde adapter for a required [`Timestamp`].
pub mod ts {
    use super::{Deserializer, Serializer, Timestamp, format_timestamp, to_micros};

    /// Serialises as pydantic text (JSON) or epoch microseconds (binary).
    ///
    /// # Errors
    /// Propagates the serializer's error.
    pub fn serialize<S: Serializer>(v: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&format_timestamp(v))
        } else {
            s.serialize_i64(to_micros(v))
        }
    }

    /// Deserialises either encoding.
    ///
    /// # Errors
    /// Fails on text that is not a datetime.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        super::de_one(d)
    }
}

/// Serde adapter for an optional [`Timestamp`] (written as `null` when absent).
pub mod ts_opt {
    use super::{Deserializer, Serializer, Timestamp};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct W(#[serde(with = "super::ts")] Timestamp);

    /// Serialises `None` as null.
    ///
    /// # Errors
    /// Propagates the serializer's error.
    pub fn serialize<S: Serializer>(v: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        v.map(W).serialize(s)
    }

    /// Deserialises null or a datetime.
    ///
    /// # Errors
    /// Fails on text that is not a datetime.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
    }
}

/// Serde adapter for a list of [`Timestamp`]s.
pub mod ts_vec {
    use super::{Deserializer, Serializer, Timestamp};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct W(#[serde(with = "super::ts")] Timestamp);

    /// Serialises each element.
    ///
    /// # Errors
    /// Propagates the serializer's error.
    pub fn serialize<S: Serializer>(v: &[Timestamp], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|t| W(*t)))
    }

    /// Deserialises each element.
    ///
    /// # Errors
    /// Fails on text that is not a datetime.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Timestamp>, D::Error> {
        Ok(Vec::<W>::deserialize(d)?.into_iter().map(|w| w.0).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_pydantic() {
        let a = parse_timestamp("2026-03-02T11:12:07").expect("valid");
        assert_eq!(format_timestamp(&a), "2026-03-02T11:12:07");
        let b = parse_timestamp("2026-03-02T14:24:14.25").expect("valid");
        assert_eq!(format_timestamp(&b), "2026-03-02T14:24:14.250000");
        let c = parse_timestamp("2026-03-02T14:24:14+02:00").expect("valid");
        assert_eq!(format_timestamp(&c), "2026-03-02T12:24:14");
        let d = parse_timestamp("2026-03-02 14:24:14Z").expect("valid");
        assert_eq!(format_timestamp(&d), "2026-03-02T14:24:14");
        assert!(parse_timestamp("yesterday").is_err());
        assert_eq!(from_micros(to_micros(&b)), b);
    }
}
