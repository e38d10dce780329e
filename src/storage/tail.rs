//! The postings tail: the inverted index of the newest memories, kept apart from
//! the block postings until it is merged into them.
//!
//! Appending one memory to the block postings rewrites the last block of each of
//! its terms: some forty B-tree leaves spread over the whole table, each copied and
//! written out by the commit. A transaction that only adds a few new memories
//! (one observe) instead writes each memory's terms as one row of the tail table
//! ([`POSTING_TAIL`], keyed by docno, so one leaf at the table's end), and the
//! tail is merged into the blocks by the first transaction that would exceed
//! [`TAIL_MAX_DOCS`] or that changes anything else in the postings (a removal,
//! a re-indexed memory, a bulk write): that transaction applies the tail's postings
//! before its own, term by term, as any batch.
//!
//! Invariants (checked by `storage::check`): every tail docno is above every
//! docno in the blocks (new docnos only grow, and any write to the blocks merges
//! the tail first), and a term's document frequency is its info row's plus its
//! tail postings. Queries see the tail as one more block after each term's last
//! ([`TailIndex`]), with its own score bound.
//!
//! Readers index the tail in memory once per tail version: every change to the
//! tail stores a new random version number in the meta table, and the store
//! keeps the index of the latest version it has seen ([`TailCache`]); a reader
//! whose snapshot has another version indexes its own.
//!
//! [`POSTING_TAIL`]: super::schema::POSTING_TAIL

use std::collections::HashMap;
use std::sync::Arc;

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::postings::{Impacts, Posting};
use crate::error::Result;

/// Memories the tail holds at most before it is merged into the blocks.
pub const TAIL_MAX_DOCS: u64 = 256;

/// One tail row: a memory's index terms with their weighted frequencies, and its
/// weighted length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TailDoc {
    /// Weighted document length.
    pub len: u32,
    /// `(term, weighted frequency)`, sorted by term.
    pub terms: Vec<(String, u32)>,
}

/// A term's postings in the tail.
#[derive(Debug, Clone, Default)]
pub struct TailTerm {
    /// Ascending by docno.
    pub postings: Vec<Posting>,
    /// Bound of their scores.
    pub impacts: Impacts,
}

/// The tail of one snapshot, indexed by term.
#[derive(Debug, Default)]
pub struct TailIndex {
    terms: HashMap<String, TailTerm>,
    docs: u64,
}

impl TailIndex {
    /// Indexes every row of `table`.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on an undecodable row.
    pub fn load(table: &impl ReadableTable<u64, &'static [u8]>) -> Result<Self> {
        let mut out = Self::default();
        for row in table.range::<u64>(..)? {
            let (k, v) = row?;
            let doc: TailDoc = super::decode(v.value(), "postings tail")?;
            out.add(k.value(), &doc);
        }
        Ok(out)
    }

    /// Adds the postings of `doc` at `docno` (above every docno added before).
    pub fn add(&mut self, docno: u64, doc: &TailDoc) {
        self.docs += 1;
        for (term, tf) in &doc.terms {
            let t = self.terms.entry(term.clone()).or_default();
            t.postings.push(Posting { docno, tf: *tf, len: doc.len });
            t.impacts.add(*tf, doc.len);
        }
    }

    /// `term`'s tail postings.
    #[must_use]
    pub fn term(&self, term: &str) -> Option<&TailTerm> {
        self.terms.get(term)
    }

    /// Every term with tail postings.
    pub fn terms(&self) -> impl Iterator<Item = (&str, &TailTerm)> {
        self.terms.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Memories in the tail.
    #[must_use]
    pub fn docs(&self) -> u64 {
        self.docs
    }
}

/// The tail index of the latest tail version a reader has loaded.
#[derive(Debug, Default)]
pub struct TailCache(parking_lot::Mutex<Option<(u64, Arc<TailIndex>)>>);

impl TailCache {
    /// The index of tail version `version`, from the cache or built by `load`
    /// (then cached). Version 0 is the empty tail.
    ///
    /// # Errors
    /// What `load` returns.
    pub fn get(
        &self,
        version: u64,
        load: impl FnOnce() -> Result<TailIndex>,
    ) -> Result<Arc<TailIndex>> {
        if version == 0 {
            return Ok(Arc::new(TailIndex::default()));
        }
        if let Some((v, index)) = &*self.0.lock()
            && *v == version
        {
            return Ok(index.clone());
        }
        let index = Arc::new(load()?);
        *self.0.lock() = Some((version, index.clone()));
        Ok(index)
    }
}

/// A new tail version number (never 0).
#[must_use]
pub fn new_version() -> u64 {
    loop {
        let v = uuid::Uuid::new_v4().as_u64_pair().0;
        if v != 0 {
            return v;
        }
    }
}
