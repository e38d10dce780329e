//! A memory's own index terms: its row of the `user_terms` table (schema 7).
//!
//! The inverted index answers "which memories hold this term"; this row answers
//! "which terms does this memory hold", with the same weighted frequencies and
//! length its postings carry (its owner and domain terms left out: no query
//! holds them). A `user_id`-filtered recall of an owner with few
//! memories scores them from their rows (`read::candidates::top_k_listed`), a
//! read of the owner's neighbouring rows instead of a walk through every query
//! term's postings, whose blocks hold the owner's memories one here and one
//! there among everyone else's.
//!
//! Terms are stored as their 64-bit FNV-1a hashes ([`crate::text::fnv1a`]),
//! fixed-width and sorted, so a scan compares integers: two distinct terms
//! hashing alike would score a memory for a term it does not hold, and among a
//! million distinct terms the chance that any two collide is about 3 in 10^8.
//!
//! Only an owner that could be scored from its rows keeps them: once it holds
//! more than [`ROW_CAP`] memories (twice what a listed search ever reads, see
//! `read::recall::LISTED_CEILING`), the writer drops its rows and marks it in
//! `rowless_owners`, and its later memories get none. On a store holding one
//! user's million memories this table would otherwise be the largest, and never
//! read. A marked owner stays marked if it shrinks (its recalls search the
//! postings, as they would past the ceiling); `reindex` decides afresh.
//!
//! A memory in the postings tail (`storage::tail`) has no row yet (schema 12):
//! its tail row holds the same terms, frequencies and length, and its owner
//! term, so the tail's index in memory derives the row from it (as [`tail_row`]
//! does, the first time `storage::tail::TailIndex::row` is asked for it) and
//! the writer writes
//! the rows of the whole tail when it merges the tail into the blocks. A batch
//! that goes into the tail thus writes no rows; three or four batches' rows are
//! written at once, each owner's beside each other, in fewer leaves than
//! each batch touching every owner's last leaf again.
//!
//! Encoding: the length (varint, in the index's half units), the number of terms
//! `n` (varint), `n` hashes (u64 little-endian, ascending, distinct), then the `n`
//! weighted frequencies in the same order (varints).

use super::keys::{IndexKeys, OWNER_TERM_PREFIX, is_tag_term};
use super::postings::{get, get32, put};
use super::tail::TailDoc;
use crate::error::{Error, Result};
use crate::text::fnv1a;

/// The row of a memory with index keys `keys`.
#[must_use]
pub fn encode(keys: &IndexKeys) -> Vec<u8> {
    encode_terms(keys.doc_len, keys.tokens.iter().map(|(t, tf)| (t.as_str(), *tf)))
}

/// The row of a memory of length `len` (in the index's half units) holding
/// `terms` with their weighted frequencies; tag terms are left out.
#[must_use]
pub fn encode_terms<'a>(len: u32, terms: impl IntoIterator<Item = (&'a str, u32)>) -> Vec<u8> {
    let mut terms: Vec<(u64, u32)> =
        terms.into_iter().filter(|(t, _)| !is_tag_term(t)).map(|(t, tf)| (fnv1a(t), tf)).collect();
    terms.sort_unstable();
    // Two terms of one memory hashing alike (never seen) keep one hash, with the
    // summed frequency.
    terms.dedup_by(|b, a| {
        let same = a.0 == b.0;
        if same {
            a.1 = a.1.saturating_add(b.1);
        }
        same
    });
    let mut out = Vec::with_capacity(4 + terms.len() * 10);
    put(&mut out, u64::from(len));
    put(&mut out, terms.len() as u64);
    for (h, _) in &terms {
        out.extend_from_slice(&h.to_le_bytes());
    }
    for (_, tf) in &terms {
        put(&mut out, u64::from(*tf));
    }
    out
}

/// The row of a memory in the postings tail, from its tail row: a tail memory
/// has no row in the table until the tail is merged into the blocks (see the
/// module notes).
#[must_use]
pub fn tail_row(doc: &TailDoc) -> Vec<u8> {
    encode_terms(doc.len, doc.terms.iter().map(|(t, tf)| (t.as_str(), *tf)))
}

/// The owner (`user_id`, `""` for none) of a memory in the postings tail, from
/// its owner term.
///
/// # Errors
/// [`Error::Corrupted`] when the tail row has no owner term.
pub fn tail_owner(doc: &TailDoc) -> Result<&str> {
    doc.terms
        .iter()
        .find_map(|(t, _)| t.strip_prefix(OWNER_TERM_PREFIX))
        .ok_or_else(|| Error::Corrupted("postings tail: a memory without an owner term".into()))
}

/// Owners holding more memories than this have no rows (see the module notes).
pub const ROW_CAP: u64 = 4_096;

const _: () = assert!(ROW_CAP >= 2 * crate::read::LISTED_CEILING as u64);

/// Drops every row of `owner` and marks it rowless (nothing when it already is).
///
/// # Errors
/// Storage errors.
pub(crate) fn drop_owner_rows(
    rows: &mut redb::Table<'_, (&str, u64), &[u8]>,
    marks: &mut redb::Table<'_, &str, ()>,
    owner: &str,
) -> Result<()> {
    // Looked up first: an owner already marked (each later flush that grows
    // it asks again) costs no write.
    if redb::ReadableTable::get(marks, owner)?.is_none() {
        marks.insert(owner, ())?;
        rows.retain_in((owner, 0u64)..=(owner, u64::MAX), |_, _| false)?;
    }
    Ok(())
}

fn corrupt(what: &str) -> Error {
    Error::Corrupted(format!("user_terms row: {what}"))
}

/// A decoded row: the memory's length, its term hashes and their frequencies.
pub struct DocTerms<'a> {
    /// The memory's length, in the index's half units.
    pub len: u32,
    /// The hashes, 8 bytes each, ascending.
    hashes: &'a [u8],
    /// The frequencies' varints.
    tfs: &'a [u8],
}

impl<'a> DocTerms<'a> {
    /// Reads the header of `buf`.
    ///
    /// # Errors
    /// [`Error::Corrupted`] on a malformed row.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let mut pos = 0;
        let len = get32(buf, &mut pos).map_err(|_| corrupt("bad length"))?;
        let n = get(buf, &mut pos).map_err(|_| corrupt("bad term count"))?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(8))
            .and_then(|b| pos.checked_add(b))
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| corrupt("truncated hashes"))?;
        Ok(Self { len, hashes: &buf[pos..end], tfs: &buf[end..] })
    }

    /// How many terms the memory holds.
    #[must_use]
    pub fn count(&self) -> usize {
        self.hashes.len() / 8
    }

    /// The `i`-th hash (`i` < [`DocTerms::count`]).
    #[inline]
    #[must_use]
    pub fn hash(&self, i: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.hashes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    }

    /// The frequencies of the terms at the ascending positions `at`, into `out`
    /// (one pass over the varints).
    ///
    /// # Errors
    /// [`Error::Corrupted`] when the row holds fewer frequencies than terms.
    pub fn tfs_at(&self, at: &[usize], out: &mut Vec<u32>) -> Result<()> {
        out.clear();
        let mut pos = 0;
        let mut next = 0; // the position of the varint at `pos`
        for &want in at {
            while next <= want {
                let tf = get32(self.tfs, &mut pos).map_err(|_| corrupt("bad frequency"))?;
                if next == want {
                    out.push(tf);
                }
                next += 1;
            }
        }
        Ok(())
    }

    /// Every hash with its frequency, checking the whole row.
    ///
    /// # Errors
    /// [`Error::Corrupted`] on a malformed row: hashes out of order, too few or
    /// too many frequencies.
    pub fn collect(self) -> Result<Vec<(u64, u32)>> {
        let mut out = Vec::with_capacity(self.count());
        let mut pos = 0;
        for i in 0..self.count() {
            let h = self.hash(i);
            if out.last().is_some_and(|&(prev, _)| prev >= h) {
                return Err(corrupt("hashes out of order"));
            }
            let tf = get32(self.tfs, &mut pos).map_err(|_| corrupt("bad frequency"))?;
            out.push((h, tf));
        }
        if pos != self.tfs.len() {
            return Err(corrupt("bytes after the last frequency"));
        }
        Ok(out)
    }
}

/// A 256-bit summary of a set of term hashes: one bit per hash. A row whose
/// signature shares no bit with a query's holds none of the query's terms, so a
/// scan of an owner's rows ([`crate::read::candidates::top_k_listed`]) passes
/// over most of them on four ANDs instead of a merge of their hashes. Two
/// hashes may share a bit: a row that shares one is only *possibly* a match.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signature([u64; 4]);

impl Signature {
    /// Meets every signature: what a row that cannot be read gets, so that its
    /// scan reads it and reports it.
    pub const ALL: Self = Self([u64::MAX; 4]);

    /// Sets the bit of `hash` (its top 8 bits after a multiplicative mix: FNV's
    /// low bits follow the last byte of the term).
    pub fn add(&mut self, hash: u64) {
        let bit = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        self.0[(bit >> 6) as usize] |= 1 << (bit & 63);
    }

    /// The signature of the hashes of `row` ([`Signature::ALL`] if it is
    /// malformed).
    #[must_use]
    pub fn of_row(row: &[u8]) -> Self {
        match DocTerms::parse(row) {
            Ok(terms) => {
                let mut sig = Self::default();
                for i in 0..terms.count() {
                    sig.add(terms.hash(i));
                }
                sig
            }
            Err(_) => Self::ALL,
        }
    }

    /// Whether the two share a bit: whether the sets may share a hash.
    #[inline]
    #[must_use]
    pub fn meets(&self, other: &Self) -> bool {
        (self.0[0] & other.0[0])
            | (self.0[1] & other.0[1])
            | (self.0[2] & other.0[2])
            | (self.0[3] & other.0[3])
            != 0
    }
}

/// The hashed terms of `keys`, as [`DocTerms::collect`] gives them back.
#[must_use]
pub fn expected(keys: &IndexKeys) -> (u32, Vec<(u64, u32)>) {
    let row = encode(keys);
    let terms = DocTerms::parse(&row).and_then(DocTerms::collect).unwrap_or_default();
    (keys.doc_len, terms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A row gives back the length and every term's hash with its frequency,
        /// in hash order, and the frequencies of any positions asked; any cut of
        /// it is an error, never a panic.
        #[test]
        fn rows_round_trip(
            tokens in prop::collection::btree_map("[a-zé]{1,12}", 1u32..5000, 0..40),
            doc_len in 0u32..1_000_000,
            cut in 0usize..600,
            pick in prop::collection::vec(any::<bool>(), 40),
        ) {
            let keys = IndexKeys {
                tokens: tokens.clone().into_iter().collect(),
                doc_len,
                ..IndexKeys::default()
            };
            let row = encode(&keys);
            let d = DocTerms::parse(&row).expect("row");
            prop_assert_eq!(d.len, doc_len);
            let mut want: Vec<(u64, u32)> = tokens.iter().map(|(t, tf)| (fnv1a(t), *tf)).collect();
            want.sort_unstable();
            let at: Vec<usize> = (0..want.len()).filter(|&i| pick[i]).collect();
            let mut tfs = Vec::new();
            d.tfs_at(&at, &mut tfs).expect("row");
            prop_assert_eq!(tfs, at.iter().map(|&i| want[i].1).collect::<Vec<_>>());
            prop_assert_eq!(d.collect().expect("row"), want.clone());
            // A signature meets that of every hash the row holds, and the
            // signature of a set it shares no bit with only when the row holds
            // none of that set's hashes.
            let sig = Signature::of_row(&row);
            for (h, _) in &want {
                let mut one = Signature::default();
                one.add(*h);
                prop_assert!(sig.meets(&one));
            }
            let other: Vec<u64> = (0..8u64).map(|i| fnv1a(&format!("other{i}{cut}"))).collect();
            let mut theirs = Signature::default();
            for &h in &other {
                theirs.add(h);
            }
            if !sig.meets(&theirs) {
                prop_assert!(other.iter().all(|h| want.iter().all(|w| w.0 != *h)));
            }
            if cut < row.len() {
                let short = &row[..cut];
                let whole = DocTerms::parse(short).and_then(DocTerms::collect);
                prop_assert!(whole.is_err(), "a row cut at {} decoded", cut);
            }
        }
    }
}
