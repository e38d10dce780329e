//! Record encoding: one version byte, then postcard.

use serde::{Deserialize, Serialize};

use super::schema::RECORD_VERSION;
use crate::error::{Error, Result};

/// Encodes `value` as `[RECORD_VERSION] ++ postcard(value)`.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let failed = |e: postcard::Error| Error::Storage(format!("encode: {e}"));
    // Sized first (a walk that copies nothing), so the record is written into
    // one allocation instead of growing byte by byte through six or seven.
    let size = postcard::experimental::serialized_size(value).map_err(failed)?;
    let mut out = Vec::with_capacity(1 + size);
    out.push(RECORD_VERSION);
    postcard::to_extend(value, out).map_err(failed)
}

/// Decodes a record written by [`encode`], checking its version byte. `T` may
/// borrow strings from `bytes`.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T> {
    match bytes.split_first() {
        Some((&RECORD_VERSION, rest)) => postcard::from_bytes(rest)
            .map_err(|e| Error::Corrupted(format!("undecodable {what} record: {e}"))),
        Some((v, _)) => Err(Error::Corrupted(format!(
            "{what} record has format version {v}, this soulmem reads {RECORD_VERSION}"
        ))),
        None => Err(Error::Corrupted(format!("empty {what} record"))),
    }
}

/// The stored self-model (meta `self_model`): JSON, as soul-protocol writes
/// `self_model.json`, so it moves between the two unchanged.
pub(crate) fn encode_self_model(model: &crate::model::SelfModel) -> Result<Vec<u8>> {
    serde_json::to_vec(model).map_err(|e| Error::Storage(format!("encode self-model: {e}")))
}

/// Reads a self-model written by [`encode_self_model`].
pub(crate) fn decode_self_model(bytes: &[u8]) -> Result<crate::model::SelfModel> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupted(format!("stored self-model: {e}")))
}
