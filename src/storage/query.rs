//! Read queries shared by [`super::Writer`] and [`super::Reader`]: both hand their
//! open tables to these functions, so a lookup reads the same inside a write
//! transaction as in a snapshot.

use redb::ReadableTable;

use super::codec::decode;
use super::docinfo::DocInfo;
use crate::error::Result;
use crate::model::MemoryEntry;

type Str = &'static str;

/// The docno of memory `id`.
pub fn docno_of(ids: &impl ReadableTable<Str, u64>, id: &str) -> Result<Option<u64>> {
    Ok(ids.get(id)?.map(|v| v.value()))
}

/// The [`DocInfo`] of `docno`.
pub fn docinfo(
    docs: &impl ReadableTable<u64, &'static [u8]>,
    docno: u64,
) -> Result<Option<DocInfo>> {
    match docs.get(docno)? {
        Some(v) => Ok(Some(decode(v.value(), "docinfo")?)),
        None => Ok(None),
    }
}

/// The entry stored at `docno` in an entry table.
pub fn entry(
    table: &impl ReadableTable<u64, &'static [u8]>,
    docno: u64,
) -> Result<Option<MemoryEntry>> {
    match table.get(docno)? {
        Some(v) => Ok(Some(decode(v.value(), "memory entry")?)),
        None => Ok(None),
    }
}

/// Docnos of active facts under a `(key, user, domain, docno)` table. `user` and
/// `domain` narrow the scan when given (`Some("")` = facts without a user).
pub fn keyed_facts(
    table: &impl ReadableTable<(Str, Str, Str, u64), ()>,
    key: &str,
    user: Option<&str>,
    domain: Option<&str>,
) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    match (user, domain) {
        (Some(u), Some(d)) => {
            for row in table.range((key, u, d, 0u64)..=(key, u, d, u64::MAX))? {
                out.push(row?.0.value().3);
            }
        }
        _ => {
            // Every user and domain under the key: scan the key's range.
            let hi = format!("{key}\u{0}");
            for row in table.range((key, "", "", 0u64)..(hi.as_str(), "", "", 0u64))? {
                let (k, _) = row?;
                let (kk, u, d, docno) = k.value();
                if kk != key {
                    continue;
                }
                if user.is_some_and(|x| x != u) || domain.is_some_and(|x| x != d) {
                    continue;
                }
                out.push(docno);
            }
        }
    }
    Ok(out)
}
