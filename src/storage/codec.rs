//! Record encoding: one version byte, then postcard.

use serde::{Serialize, de::DeserializeOwned};

use super::schema::RECORD_VERSION;
use crate::error::{Error, Result};

/// Encodes `value` as `[RECORD_VERSION] ++ postcard(value)`.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut out = vec![RECORD_VERSION];
    out = postcard::to_extend(value, out).map_err(|e| Error::Storage(format!("encode: {e}")))?;
    Ok(out)
}

/// Decodes a record written by [`encode`], checking its version byte.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    match bytes.split_first() {
        Some((&RECORD_VERSION, rest)) => postcard::from_bytes(rest)
            .map_err(|e| Error::Corrupted(format!("undecodable {what} record: {e}"))),
        Some((v, _)) => Err(Error::Corrupted(format!(
            "{what} record has format version {v}, this soulmem reads {RECORD_VERSION}"
        ))),
        None => Err(Error::Corrupted(format!("empty {what} record"))),
    }
}
