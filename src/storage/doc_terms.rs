//! A memory's own index terms: its row of the `user_terms` table (schema 7).
//!
//! The inverted index answers "which memories hold this term"; this row answers
//! "which terms does this memory hold", with the same weighted frequencies and
//! length its postings carry. A `user_id`-filtered recall of an owner with few
//! memories scores them from their rows (`read::candidates::top_k_listed`), a
//! read of the owner's neighbouring rows instead of a walk through every query
//! term's postings, whose blocks hold the owner's memories one here and one
//! there among everyone else's.
//!
//! Encoding: the length (varint, in the index's half units), the number of terms
//! (varint), then each term as its byte length (varint), its bytes and its
//! weighted frequency (varint), in ascending byte order of the terms.

use super::keys::IndexKeys;
use super::postings::{get, get32, put};
use crate::error::{Error, Result};

/// The row of a memory with index keys `keys`.
#[must_use]
pub fn encode(keys: &IndexKeys) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + keys.tokens.keys().map(|t| t.len() + 2).sum::<usize>());
    put(&mut out, u64::from(keys.doc_len));
    put(&mut out, keys.tokens.len() as u64);
    // `tokens` is a BTreeMap of Strings: ascending byte order.
    for (term, tf) in &keys.tokens {
        put(&mut out, term.len() as u64);
        out.extend_from_slice(term.as_bytes());
        put(&mut out, u64::from(*tf));
    }
    out
}

fn corrupt(what: &str) -> Error {
    Error::Corrupted(format!("user_terms row: {what}"))
}

/// A decoded row: the memory's length, then its terms one by one.
pub struct DocTerms<'a> {
    buf: &'a [u8],
    pos: usize,
    left: u64,
    /// The memory's length, in the index's half units.
    pub len: u32,
}

impl<'a> DocTerms<'a> {
    /// Reads the header of `buf`.
    ///
    /// # Errors
    /// [`Error::Corrupted`] on a malformed row.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let mut pos = 0;
        let len = get32(buf, &mut pos).map_err(|_| corrupt("bad length"))?;
        let left = get(buf, &mut pos).map_err(|_| corrupt("bad term count"))?;
        Ok(Self { buf, pos, left, len })
    }

    /// The next term (its bytes) and its weighted frequency; `None` after the last.
    ///
    /// # Errors
    /// [`Error::Corrupted`] on a malformed row.
    #[inline]
    pub fn next_term(&mut self) -> Result<Option<(&'a [u8], u32)>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let n = get(self.buf, &mut self.pos).map_err(|_| corrupt("bad term length"))?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| corrupt("truncated term"))?;
        let term = &self.buf[self.pos..end];
        self.pos = end;
        let tf = get32(self.buf, &mut self.pos).map_err(|_| corrupt("bad frequency"))?;
        Ok(Some((term, tf)))
    }

    /// Every term with its frequency, in the row's order.
    ///
    /// # Errors
    /// [`Error::Corrupted`] on a malformed row (or a term that is not UTF-8).
    pub fn collect(mut self) -> Result<Vec<(String, u32)>> {
        let mut out = Vec::new();
        while let Some((t, tf)) = self.next_term()? {
            let t = std::str::from_utf8(t).map_err(|_| corrupt("term is not UTF-8"))?;
            out.push((t.to_owned(), tf));
        }
        if self.pos != self.buf.len() {
            return Err(corrupt("bytes after the last term"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A row gives back the length and every term with its frequency, in
        /// ascending order; any cut of it is an error, never a panic.
        #[test]
        fn rows_round_trip(
            tokens in prop::collection::btree_map("[a-zé]{1,12}", 1u32..5000, 0..40),
            doc_len in 0u32..1_000_000,
            cut in 0usize..400,
        ) {
            let keys = IndexKeys { tokens: tokens.clone(), doc_len, ..IndexKeys::default() };
            let row = encode(&keys);
            let d = DocTerms::parse(&row).expect("row");
            prop_assert_eq!(d.len, doc_len);
            let got = d.collect().expect("row");
            let want: Vec<(String, u32)> = tokens.into_iter().collect();
            prop_assert_eq!(got, want);
            if cut < row.len() {
                let short = &row[..cut];
                let whole = DocTerms::parse(short).and_then(DocTerms::collect);
                prop_assert!(whole.is_err(), "a row cut at {} decoded", cut);
            }
        }
    }
}
