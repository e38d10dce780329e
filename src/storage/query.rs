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

/// Docnos under a `(key, docno)` table for `key`, ascending.
pub fn postings_of(table: &impl ReadableTable<(Str, u64), ()>, key: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for row in table.range((key, 0u64)..=(key, u64::MAX))? {
        let (k, _) = row?;
        out.push(k.value().1);
    }
    Ok(out)
}

/// `(docno, tf)` postings of an index token, ascending by docno.
pub fn token_postings(
    table: &impl ReadableTable<(Str, u64), u64>,
    token: &str,
) -> Result<Vec<(u64, u32)>> {
    let mut out = Vec::new();
    for row in table.range((token, 0u64)..=(token, u64::MAX))? {
        let (k, v) = row?;
        out.push((k.value().1, super::schema::posting_parts(v.value()).0));
    }
    Ok(out)
}

/// Term frequency of `token` in `docno` (0 when absent).
pub fn term_freq(
    table: &impl ReadableTable<(Str, u64), u64>,
    token: &str,
    docno: u64,
) -> Result<u32> {
    Ok(table.get((token, docno))?.map_or(0, |v| super::schema::posting_parts(v.value()).0))
}

/// A counter (document frequency) for `key`.
pub fn counter(table: &impl ReadableTable<Str, u64>, key: &str) -> Result<u64> {
    Ok(table.get(key)?.map_or(0, |v| v.value()))
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

/// Docnos of a layer, newest first, at most `limit`.
pub fn layer_newest(
    table: &impl ReadableTable<(Str, u64), ()>,
    layer: &str,
    limit: usize,
) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for row in table.range((layer, 0u64)..=(layer, u64::MAX))?.rev() {
        out.push(row?.0.value().1);
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}
