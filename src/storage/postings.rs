//! Block postings: the inverted index stored as compressed blocks.
//!
//! A term's postings (docno, term frequency, document length) are split into
//! blocks of about [`BLOCK`] postings, one redb row each, keyed `(term, first docno)`.
//! A block is varint-encoded (docno deltas) and starts with a header: how many
//! postings it holds, its last docno and its *impacts*, the Pareto frontier of its
//! `(tf, length)` pairs. Since a BM25 term score grows with tf and shrinks with
//! length, the best score any posting of the block can reach is the best score of
//! one of those few pairs: that upper bound lets the query side skip whole blocks
//! without decoding them (block-max pruning, see `read::candidates`).
//!
//! A term's [`TermInfo`] (document frequency and impacts over all its postings)
//! is the row right after its blocks, keyed `(term, INFO)`: the write that appends
//! to a term's last block updates its info in the same B-tree leaf, and one lookup
//! from the end of the term's range finds both.
//!
//! Writes are buffered per transaction in [`Pending`] and applied term by term at
//! commit, so a batch of observes rewrites each touched block once, not once per
//! posting.
//!
//! Invariants (checked by `storage::check`): a block's key is its first docno; the
//! blocks of a term hold disjoint, ascending docno ranges; no block is empty; every
//! posting is dominated by a pair of its block's impacts and of its term's impacts
//! in the term's info row (key `(term, INFO)`).

use std::collections::BTreeMap;

use redb::{ReadableTable, Table};

use crate::error::{Error, Result};

/// Postings a block is filled to before a new one is started.
pub const BLOCK: usize = 128;
/// A block that grows past this (inserts in the middle) is split.
const BLOCK_MAX: usize = 2 * BLOCK;
/// Impacts kept per block or term before they are coarsened to one pair.
const MAX_IMPACTS: usize = 4;

type Str = &'static str;
type Bytes = &'static [u8];

/// The key (in place of a docno) of a term's [`TermInfo`] row, after its blocks.
/// Docnos never reach it.
pub const INFO: u64 = u64::MAX;

/// The key range of `term`'s blocks (its info row excluded).
#[must_use]
pub fn blocks_of(term: &str) -> std::ops::Range<(&str, u64)> {
    (term, 0)..(term, INFO)
}

/// A term's [`TermInfo`] (none when no memory holds it).
///
/// # Errors
/// Storage errors; [`Error::Corrupted`] on a malformed row.
pub fn term_info(
    table: &impl ReadableTable<(Str, u64), Bytes>,
    term: &str,
) -> Result<Option<TermInfo>> {
    match table.get((term, INFO))? {
        Some(v) => Ok(Some(TermInfo::decode(v.value())?)),
        None => Ok(None),
    }
}

/// One posting: a memory, the term's weighted frequency in it and its length
/// (both in the index's half units, see `storage::keys::CONTENT_UNITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    /// Internal document number.
    pub docno: u64,
    /// Weighted term frequency.
    pub tf: u32,
    /// Weighted document length.
    pub len: u32,
}

/// The Pareto frontier of `(tf, length)` pairs of a set of postings: no pair has
/// both a lower tf and a greater length than another. Every posting of the set is
/// dominated by (tf ≤, length ≥) one of the pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Impacts {
    n: u8,
    /// The pairs, ascending; slots past `n` stay zero.
    pairs: [(u32, u32); MAX_IMPACTS],
}

impl Impacts {
    /// Adds a posting's pair.
    pub fn add(&mut self, tf: u32, len: u32) {
        if self.dominates(tf, len) {
            return;
        }
        let mut kept = [(0u32, 0u32); MAX_IMPACTS + 1];
        let mut n = 0;
        for &(t, l) in self.pairs() {
            if !(t <= tf && l >= len) {
                kept[n] = (t, l);
                n += 1;
            }
        }
        kept[n] = (tf, len);
        n += 1;
        kept[..n].sort_unstable();
        if n > MAX_IMPACTS {
            // Coarsen: one pair that dominates every other (a looser bound).
            let tf = kept[..n].iter().map(|p| p.0).max().unwrap_or(0);
            let len = kept[..n].iter().map(|p| p.1).min().unwrap_or(0);
            kept = [(0, 0); MAX_IMPACTS + 1];
            kept[0] = (tf, len);
            n = 1;
        }
        self.pairs = [(0, 0); MAX_IMPACTS];
        self.pairs[..n].copy_from_slice(&kept[..n]);
        self.n = n as u8;
    }

    /// Adds every pair of `other`.
    pub fn merge(&mut self, other: &Impacts) {
        for &(t, l) in other.pairs() {
            self.add(t, l);
        }
    }

    /// Whether some pair has a tf at least `tf` and a length at most `len`.
    #[must_use]
    pub fn dominates(&self, tf: u32, len: u32) -> bool {
        self.pairs().iter().any(|&(t, l)| t >= tf && l <= len)
    }

    /// The pairs.
    #[must_use]
    pub fn pairs(&self) -> &[(u32, u32)] {
        &self.pairs[..usize::from(self.n)]
    }

    /// The largest value of `score(tf, len)` over the pairs (0 when empty).
    pub fn max_by(&self, score: impl Fn(u32, u32) -> f64) -> f64 {
        self.pairs().iter().map(|&(t, l)| score(t, l)).fold(0.0, f64::max)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put(out, u64::from(self.n));
        for &(t, l) in self.pairs() {
            put(out, u64::from(t));
            put(out, u64::from(l));
        }
    }

    fn decode(buf: &[u8], pos: &mut usize) -> Result<Self> {
        let n = get(buf, pos)?;
        if n > MAX_IMPACTS as u64 {
            return Err(corrupt("too many impacts"));
        }
        let mut out = Self { n: n as u8, pairs: [(0, 0); MAX_IMPACTS] };
        for slot in out.pairs.iter_mut().take(n as usize) {
            *slot = (get32(buf, pos)?, get32(buf, pos)?);
        }
        Ok(out)
    }
}

fn corrupt(what: &str) -> Error {
    Error::Corrupted(format!("postings block: {what}"))
}

/// Appends `v` as a LEB128 varint.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 varint at `pos` and moves past it.
#[inline]
pub(crate) fn get(buf: &[u8], pos: &mut usize) -> Result<u64> {
    // Most values (term frequencies, lengths, dense deltas) fit one byte.
    if let Some(&b) = buf.get(*pos)
        && b < 0x80
    {
        *pos += 1;
        return Ok(u64::from(b));
    }
    get_long(buf, pos)
}

fn get_long(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| corrupt("truncated"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(corrupt("varint too long"))
}

/// [`get`] of a value that must fit 32 bits.
#[inline]
pub(crate) fn get32(buf: &[u8], pos: &mut usize) -> Result<u32> {
    u32::try_from(get(buf, pos)?).map_err(|_| corrupt("value out of range"))
}

/// A block's header: what pruning needs without decoding the postings.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// First docno (the row key).
    pub first: u64,
    /// Last docno.
    pub last: u64,
    /// Number of postings.
    pub count: usize,
    /// Impacts of the block's postings.
    pub impacts: Impacts,
    /// Where the postings start in the value.
    body: usize,
}

impl Header {
    /// The header of postings held decoded in memory (the postings tail's).
    #[must_use]
    pub fn of_decoded(postings: &[Posting], impacts: Impacts) -> Option<Self> {
        Some(Self {
            first: postings.first()?.docno,
            last: postings.last()?.docno,
            count: postings.len(),
            impacts,
            body: 0,
        })
    }
}

/// Encodes sorted, non-empty `postings` as one block value.
fn encode_block(postings: &[Posting]) -> Vec<u8> {
    let first = postings[0].docno;
    let last = postings[postings.len() - 1].docno;
    let mut impacts = Impacts::default();
    for p in postings {
        impacts.add(p.tf, p.len);
    }
    let mut out = Vec::with_capacity(8 + postings.len() * 3);
    put(&mut out, postings.len() as u64);
    put(&mut out, last - first);
    impacts.encode(&mut out);
    let mut prev = first;
    for p in postings {
        put(&mut out, p.docno - prev);
        put(&mut out, u64::from(p.tf));
        put(&mut out, u64::from(p.len));
        prev = p.docno;
    }
    out
}

/// Reads the header of the block stored under docno `first`.
pub fn header(first: u64, value: &[u8]) -> Result<Header> {
    let mut pos = 0;
    let count = get(value, &mut pos)?;
    if count == 0 || count > 1 << 20 {
        return Err(corrupt("bad posting count"));
    }
    let last = first.checked_add(get(value, &mut pos)?).ok_or_else(|| corrupt("bad range"))?;
    let impacts = Impacts::decode(value, &mut pos)?;
    Ok(Header { first, last, count: count as usize, impacts, body: pos })
}

/// Decodes the postings of a block whose header is `h`, appending them to `out`.
pub fn decode_into(h: &Header, value: &[u8], out: &mut Vec<Posting>) -> Result<()> {
    let mut pos = h.body;
    let mut docno = h.first;
    out.reserve(h.count);
    for _ in 0..h.count {
        // A posting whose delta, tf and length fit one byte each (most of a
        // common term's) is read with one bounds check.
        if let Some(&[d, tf, len]) = value.get(pos..pos + 3)
            && (d | tf | len) < 0x80
        {
            pos += 3;
            docno = docno.checked_add(u64::from(d)).ok_or_else(|| corrupt("bad delta"))?;
            out.push(Posting { docno, tf: u32::from(tf), len: u32::from(len) });
            continue;
        }
        docno = docno.checked_add(get(value, &mut pos)?).ok_or_else(|| corrupt("bad delta"))?;
        out.push(Posting { docno, tf: get32(value, &mut pos)?, len: get32(value, &mut pos)? });
    }
    if docno != h.last || pos != value.len() {
        return Err(corrupt("header and postings disagree"));
    }
    Ok(())
}

/// Every posting of a block.
pub fn decode_block(first: u64, value: &[u8]) -> Result<Vec<Posting>> {
    let h = header(first, value)?;
    let mut out = Vec::new();
    decode_into(&h, value, &mut out)?;
    Ok(out)
}

/// A term's info row (`(term, INFO)`): document frequency and impacts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermInfo {
    /// Number of memories holding the term.
    pub df: u64,
    /// Impacts over all its postings (an upper bound: kept when postings go).
    pub impacts: Impacts,
    /// Names the content of the term's blocks: random, new with every write to
    /// them (0 in rows written before generations existed). See
    /// `storage::block_cache`.
    pub generation: u64,
}

impl TermInfo {
    /// Encodes the row value.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        put(&mut out, self.df);
        self.impacts.encode(&mut out);
        put(&mut out, self.generation);
        out
    }

    /// Decodes a row value.
    ///
    /// # Errors
    /// [`Error::Corrupted`] on a malformed value.
    pub fn decode(value: &[u8]) -> Result<Self> {
        let mut pos = 0;
        let df = get(value, &mut pos)?;
        let impacts = Impacts::decode(value, &mut pos)?;
        // Rows written before generations existed end here.
        let generation = if pos < value.len() { get(value, &mut pos)? } else { 0 };
        Ok(Self { df, impacts, generation })
    }
}

/// What one term's postings change by in a transaction.
#[derive(Debug, Default)]
struct TermOps {
    /// Final state of each touched posting: `Some((tf, len))` written, `None` removed.
    ops: BTreeMap<u64, Option<(u32, u32)>>,
    /// Postings held before every change in `ops` (those of the tail being
    /// merged), ascending by docno, one per docno; where `ops` has the same
    /// docno, `ops` wins. Kept apart because a merge brings every posting of
    /// thousands of memories in docno order, and a push costs much less than
    /// a map insert.
    under: Vec<Posting>,
    /// Change of the document frequency.
    df: i64,
}

impl TermOps {
    /// Records that `docno` held the term (`tf`, memory length `len`) before
    /// every change buffered so far: a later change of the same posting wins.
    fn add_under(&mut self, docno: u64, tf: u32, len: u32) {
        match self.under.last() {
            Some(last) if last.docno >= docno => {
                // Out of order (not a tail merge's): into the map, unless the
                // posting is held already.
                if self.under.binary_search_by_key(&docno, |p| p.docno).is_err() {
                    self.ops.entry(docno).or_insert(Some((tf, len)));
                }
            }
            _ => self.under.push(Posting { docno, tf, len }),
        }
        self.df += 1;
    }

    /// Every posting's final state, ascending by docno.
    fn merged(&self) -> Vec<(u64, Option<(u32, u32)>)> {
        let mut out = Vec::with_capacity(self.ops.len() + self.under.len());
        let mut under = self.under.iter().peekable();
        for (&docno, &op) in &self.ops {
            while let Some(p) = under.next_if(|p| p.docno < docno) {
                out.push((p.docno, Some((p.tf, p.len))));
            }
            under.next_if(|p| p.docno == docno);
            out.push((docno, op));
        }
        out.extend(under.map(|p| (p.docno, Some((p.tf, p.len)))));
        out
    }
}

/// Posting changes buffered in a write transaction, applied by [`Pending::apply`].
///
/// A transaction that only adds new memories, each with all its terms at once
/// ([`Pending::add_doc`]), keeps them as it got them, by memory: what the
/// postings tail stores ([`Pending::take_by_doc`]). The first change of any
/// other kind turns what is buffered into changes by term, where every later
/// change goes too.
#[derive(Debug, Default)]
pub struct Pending {
    /// New memories' postings in the order added (ascending docnos), each
    /// memory's terms sorted; only while `terms` is empty.
    docs: Vec<(u64, super::tail::TailDoc)>,
    terms: foldhash::HashMap<String, TermOps>,
    /// Buffered changes, all terms together.
    ops: usize,
    /// Buffered removals (a posting of a memory re-indexed or removed).
    removes: usize,
    /// The smallest docno buffered.
    min_docno: Option<u64>,
}

impl Pending {
    fn term(&mut self, term: &str) -> &mut TermOps {
        if !self.terms.contains_key(term) {
            self.terms.insert(term.to_owned(), TermOps::default());
        }
        self.terms.get_mut(term).expect("inserted above")
    }

    fn note(&mut self, docno: u64) {
        self.ops += 1;
        self.min_docno = Some(self.min_docno.map_or(docno, |m| m.min(docno)));
    }

    /// Records that `docno` holds `term` (a new posting).
    pub fn add(&mut self, term: &str, docno: u64, tf: u32, len: u32) {
        self.by_term();
        self.note(docno);
        let t = self.term(term);
        t.ops.insert(docno, Some((tf, len)));
        t.df += 1;
    }

    /// Records that `docno`, a memory of length `len`, holds each of `terms`
    /// (new postings; distinct terms in ascending order): the same as
    /// [`Pending::add`] of each.
    pub fn add_doc<'a>(
        &mut self,
        docno: u64,
        len: u32,
        terms: impl IntoIterator<Item = (&'a str, u32)>,
    ) {
        if !self.terms.is_empty() || self.docs.last().is_some_and(|(d, _)| *d >= docno) {
            for (term, tf) in terms {
                self.add(term, docno, tf, len);
            }
            return;
        }
        let terms: Vec<(String, u32)> =
            terms.into_iter().map(|(t, tf)| (t.to_owned(), tf)).collect();
        if terms.is_empty() {
            return; // no posting: nothing to record
        }
        debug_assert!(terms.windows(2).all(|w| w[0].0 < w[1].0), "terms distinct, ascending");
        for _ in &terms {
            self.note(docno);
        }
        self.docs.push((docno, super::tail::TailDoc { len, terms }));
    }

    /// Turns the memories buffered as such into changes by term (in the order
    /// they were added, so the result is the same as adding them by term).
    fn by_term(&mut self) {
        for (docno, doc) in std::mem::take(&mut self.docs) {
            for (term, tf) in doc.terms {
                // The term is owned already: `entry` allocates nothing.
                let t = self.terms.entry(term).or_default();
                t.ops.insert(docno, Some((tf, doc.len)));
                t.df += 1;
            }
        }
    }

    /// Records that `docno` held `term` *before* every change buffered so far (a
    /// posting of the tail being merged): a later change of the same posting wins.
    pub fn add_under(&mut self, term: &str, docno: u64, tf: u32, len: u32) {
        self.by_term();
        self.note(docno);
        self.term(term).add_under(docno, tf, len);
    }

    /// [`Pending::add_under`] of every posting of the memories `docs` (the tail
    /// being merged), taking their terms instead of copying them.
    ///
    /// The map of terms grows as it goes: a tail's terms are few beside its
    /// postings (13,458 terms for 579,705 postings in a tail of 15,625 memories
    /// at 1M), and room made ahead for a share of the postings spread the terms
    /// over many times the memory they need, each lookup a cache miss.
    pub fn add_docs_under(&mut self, docs: Vec<(u64, super::tail::TailDoc)>) {
        self.by_term();
        for (docno, doc) in docs {
            for (term, tf) in doc.terms {
                self.note(docno);
                self.terms.entry(term).or_default().add_under(docno, tf, doc.len);
            }
        }
    }

    /// Records that `docno` no longer holds `term`.
    pub fn remove(&mut self, term: &str, docno: u64) {
        self.by_term();
        self.note(docno);
        self.removes += 1;
        let t = self.term(term);
        t.ops.insert(docno, None);
        t.df -= 1;
    }

    /// Whether everything buffered is the postings of memories numbered
    /// `first_new` or above, added once each (nothing removed or re-indexed).
    #[must_use]
    pub fn only_adds_from(&self, first_new: u64) -> bool {
        self.removes == 0 && self.min_docno.is_none_or(|m| m >= first_new)
    }

    /// Takes the buffered postings grouped by memory, as tail rows in docno
    /// order (callers check [`Pending::only_adds_from`] first: removals are
    /// dropped).
    pub fn take_by_doc(&mut self) -> Vec<(u64, super::tail::TailDoc)> {
        if self.terms.is_empty() {
            self.clear_counts();
            return std::mem::take(&mut self.docs);
        }
        self.by_term();
        let mut docs: BTreeMap<u64, super::tail::TailDoc> = BTreeMap::new();
        for (term, ops) in self.terms.drain() {
            for (docno, op) in ops.merged() {
                if let Some((tf, len)) = op {
                    let d = docs.entry(docno).or_default();
                    d.len = len;
                    d.terms.push((term.clone(), tf));
                }
            }
        }
        for d in docs.values_mut() {
            d.terms.sort_unstable();
        }
        self.clear_counts();
        docs.into_iter().collect()
    }

    fn clear_counts(&mut self) {
        self.ops = 0;
        self.removes = 0;
        self.min_docno = None;
    }

    /// Changes buffered (each add or remove counts once).
    #[must_use]
    pub fn len(&self) -> usize {
        self.ops
    }

    /// Whether nothing is buffered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// Applies every buffered change, in term order, to the blocks and info rows;
    /// each touched term's info gets `generation` (a new random number per call,
    /// see `storage::block_cache`). Returns the terms starting with `watched`
    /// that the changes grew, with their document frequencies after.
    ///
    /// # Errors
    /// Storage errors; [`Error::Corrupted`] on a malformed block.
    pub fn apply(
        &mut self,
        blocks: &mut Table<'_, (Str, u64), Bytes>,
        generation: u64,
        watched: &str,
    ) -> Result<Vec<(String, u64)>> {
        self.by_term();
        self.clear_counts();
        let mut all: Vec<(String, TermOps)> = self.terms.drain().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut grown = Vec::new();
        for (term, ops) in all {
            let df = apply_term(blocks, &term, &ops, generation)?;
            if ops.df > 0 && term.starts_with(watched) {
                grown.push((term, df));
            }
        }
        Ok(grown)
    }
}

/// Applies `t` to `term`'s blocks and info row; returns its document frequency
/// after.
fn apply_term(
    blocks: &mut Table<'_, (Str, u64), Bytes>,
    term: &str,
    t: &TermOps,
    generation: u64,
) -> Result<u64> {
    let ops = t.merged();
    let mut added = Impacts::default();
    for (_, o) in &ops {
        if let Some((tf, len)) = o {
            added.add(*tf, *len);
        }
    }
    // From the end of the term's range: its info row, then its last block.
    let (mut info, last) = {
        let mut rows = blocks.range((term, 0u64)..=(term, INFO))?;
        let mut info = TermInfo::default();
        let mut last = None;
        while let Some(row) = rows.next_back() {
            let (k, v) = row?;
            if k.value().1 == INFO {
                info = TermInfo::decode(v.value())?;
                continue;
            }
            last = Some((k.value().1, decode_block(k.value().1, v.value())?));
            break;
        }
        (info, last)
    };
    let first_op = ops.first().map_or(INFO, |o| o.0);
    match last {
        // Appends only (the usual case): after the last block, or into a new one.
        Some((key, postings)) if first_op > postings.last().map_or(key, |p| p.docno) => {
            if postings.len() >= BLOCK {
                write_blocks(blocks, term, None, &upserts(&ops))?;
            } else {
                let mut all = postings;
                all.extend(upserts(&ops));
                write_blocks(blocks, term, Some(key), &all)?;
            }
        }
        // A new term: removals have nothing to remove.
        None => write_blocks(blocks, term, None, &upserts(&ops))?,
        Some(_) => merge_ops(blocks, term, &ops)?,
    }
    info.df = if t.df >= 0 {
        info.df + t.df.unsigned_abs()
    } else {
        info.df.saturating_sub(t.df.unsigned_abs())
    };
    if info.df == 0 {
        blocks.remove((term, INFO))?;
    } else {
        info.impacts.merge(&added);
        info.generation = generation;
        blocks.insert((term, INFO), info.encode().as_slice())?;
    }
    Ok(info.df)
}

/// The postings `ops` writes (its removals left out).
fn upserts(ops: &[(u64, Option<(u32, u32)>)]) -> Vec<Posting> {
    ops.iter().filter_map(|(d, o)| o.map(|(tf, len)| Posting { docno: *d, tf, len })).collect()
}

/// Applies `ops` (ascending docnos) anywhere in `term`'s blocks: each op goes to
/// the block whose range holds its docno.
fn merge_ops(
    blocks: &mut Table<'_, (Str, u64), Bytes>,
    term: &str,
    ops: &[(u64, Option<(u32, u32)>)],
) -> Result<()> {
    let mut i = 0;
    while i < ops.len() {
        let d = ops[i].0;
        // The block that holds `d`: the last one starting at or before it, else the
        // term's first block.
        let (key, mut postings) = {
            let found = match blocks.range((term, 0u64)..=(term, d))?.next_back() {
                Some(row) => Some(row?),
                None => blocks.range(blocks_of(term))?.next().transpose()?,
            };
            match found {
                Some((k, v)) => (Some(k.value().1), decode_block(k.value().1, v.value())?),
                None => (None, Vec::new()),
            }
        };
        // Ops up to the next block's first docno land in this block.
        let next = match key {
            Some(k) => blocks
                .range((term, k + 1)..(term, INFO))?
                .next()
                .transpose()?
                .map(|(nk, _)| nk.value().1),
            None => None,
        };
        let end = i + ops[i..].partition_point(|(d, _)| next.is_none_or(|n| *d < n));
        let mine = &ops[i..end];
        let appending = postings.last().is_some_and(|p| mine[0].0 > p.docno);
        if appending && postings.len() >= BLOCK {
            // A full block stays as it is; new postings open new blocks.
            write_blocks(blocks, term, None, &upserts(mine))?;
        } else {
            for &(d, o) in mine {
                let at = postings.partition_point(|p| p.docno < d);
                let present = postings.get(at).is_some_and(|p| p.docno == d);
                match (o, present) {
                    (Some((tf, len)), true) => postings[at] = Posting { docno: d, tf, len },
                    (Some((tf, len)), false) => postings.insert(at, Posting { docno: d, tf, len }),
                    (None, true) => {
                        postings.remove(at);
                    }
                    (None, false) => {}
                }
            }
            write_blocks(blocks, term, key, &postings)?;
        }
        i = end;
    }
    Ok(())
}

/// Replaces the block stored under `old` (if any) by `postings`, split into blocks
/// of at most [`BLOCK_MAX`] postings of even size.
fn write_blocks(
    blocks: &mut Table<'_, (Str, u64), Bytes>,
    term: &str,
    old: Option<u64>,
    postings: &[Posting],
) -> Result<()> {
    if let Some(k) = old
        && postings.first().is_none_or(|p| p.docno != k)
    {
        // The block's key changes (or it goes): an unchanged key is overwritten.
        blocks.remove((term, k))?;
    }
    if postings.is_empty() {
        return Ok(());
    }
    let n = if postings.len() > BLOCK_MAX { postings.len().div_ceil(BLOCK) } else { 1 };
    let size = postings.len().div_ceil(n);
    for chunk in postings.chunks(size) {
        blocks.insert((term, chunk[0].docno), encode_block(chunk).as_slice())?;
    }
    Ok(())
}

/// Every docno holding `term`, ascending.
///
/// # Errors
/// Storage errors; [`Error::Corrupted`] on a malformed block.
pub fn docnos(blocks: &impl ReadableTable<(Str, u64), Bytes>, term: &str) -> Result<Vec<u64>> {
    Ok(postings_of(blocks, term)?.into_iter().map(|p| p.docno).collect())
}

/// Every posting of `term`, ascending.
///
/// # Errors
/// As [`docnos`].
pub fn postings_of(
    blocks: &impl ReadableTable<(Str, u64), Bytes>,
    term: &str,
) -> Result<Vec<Posting>> {
    let mut out = Vec::new();
    decode_term(blocks, term, &mut out, |_| {})?;
    Ok(out)
}

/// Decodes every block of `term` in order, appending its postings to `out` and
/// handing its header to `each` once they are in.
///
/// # Errors
/// As [`docnos`].
pub fn decode_term(
    blocks: &impl ReadableTable<(Str, u64), Bytes>,
    term: &str,
    out: &mut Vec<Posting>,
    mut each: impl FnMut(Header),
) -> Result<()> {
    for row in blocks.range(blocks_of(term))? {
        let (k, v) = row?;
        let h = header(k.value().1, v.value())?;
        decode_into(&h, v.value(), out)?;
        each(h);
    }
    Ok(())
}

/// The first of `list` (ascending) at or after `d`, and `*at` set to its index
/// (`list.len()` when none is). The search starts at `*at`, as a previous call
/// left it, when `d` is not behind it, so a walk of ascending targets moves a
/// few steps at a time; a smaller `d` searches from the start.
pub(crate) fn next_from(list: &[u64], d: u64, at: &mut usize) -> Option<u64> {
    let mut from = (*at).min(list.len());
    if from > 0 && list[from - 1] >= d {
        from = 0;
    }
    let i = from + gallop(&list[from..], |&x| x < d);
    *at = i;
    list.get(i).copied()
}

/// The number of leading items of `rest` that are `before` (which must hold for
/// a prefix of `rest` only), found by galloping from the front.
pub(crate) fn gallop<T>(rest: &[T], before: impl Fn(&T) -> bool) -> usize {
    if rest.first().is_none_or(|x| !before(x)) {
        return 0;
    }
    // before(rest[lo]) throughout.
    let mut lo = 0;
    let mut step = 1;
    while lo + step < rest.len() && before(&rest[lo + step]) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(rest.len());
    lo + 1 + rest[lo + 1..hi].partition_point(before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redb::{Database, TableDefinition, backends::InMemoryBackend};

    const B: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("b");

    /// Each term's changes: its postings' final states, and its df change.
    type ByTerm = BTreeMap<String, (Vec<(u64, Option<(u32, u32)>)>, i64)>;

    /// The changes by term a buffer holds, after turning memories buffered
    /// whole into them.
    fn by_term(p: &mut Pending) -> ByTerm {
        p.by_term();
        p.terms.iter().map(|(t, o)| (t.clone(), (o.merged(), o.df))).collect()
    }

    proptest! {
        /// Memories buffered whole (added, or merged from the tail), with
        /// changes of every kind among them, leave what adding each of their
        /// postings by term leaves; with only adds, the tail rows taken are the
        /// same too (and in ascending docnos the memories stay buffered whole).
        #[test]
        fn memories_buffered_whole_match_postings_added_by_term(
            ops in prop::collection::vec(
                (0u8..6, 0u64..12, prop::collection::btree_map(0u8..6, 1u32..5, 0..5)),
                0..24,
            ),
        ) {
            let (mut whole, mut each) = (Pending::default(), Pending::default());
            let only_adds = ops.iter().all(|(kind, ..)| *kind < 4);
            for (kind, docno, terms) in &ops {
                let terms: BTreeMap<String, u32> =
                    terms.iter().map(|(t, tf)| (format!("t{t}"), *tf)).collect();
                let len = 7 + *docno as u32;
                match kind {
                    0..=3 => {
                        whole.add_doc(*docno, len, terms.iter().map(|(t, tf)| (t.as_str(), *tf)));
                        for (t, tf) in &terms {
                            each.add(t, *docno, *tf, len);
                        }
                    }
                    4 => {
                        for t in terms.keys() {
                            whole.remove(t, *docno);
                            each.remove(t, *docno);
                        }
                    }
                    _ => {
                        // A tail being merged: its memories taken whole, or
                        // posting by posting.
                        let doc = crate::storage::tail::TailDoc {
                            len,
                            terms: terms.iter().map(|(t, tf)| (t.clone(), *tf)).collect(),
                        };
                        whole.add_docs_under(vec![(*docno, doc)]);
                        for (t, tf) in &terms {
                            each.add_under(t, *docno, *tf, len);
                        }
                    }
                }
            }
            prop_assert_eq!(whole.len(), each.len());
            prop_assert_eq!(whole.only_adds_from(3), each.only_adds_from(3));
            if only_adds {
                let (mut a, mut b) = (Pending::default(), Pending::default());
                for (_, docno, terms) in &ops {
                    let terms: BTreeMap<String, u32> =
                        terms.iter().map(|(t, tf)| (format!("t{t}"), *tf)).collect();
                    a.add_doc(*docno, 3, terms.iter().map(|(t, tf)| (t.as_str(), *tf)));
                    for (t, tf) in &terms {
                        b.add(t, *docno, *tf, 3);
                    }
                }
                if ops.windows(2).all(|w| w[0].1 < w[1].1) {
                    prop_assert!(a.terms.is_empty(), "kept by memory");
                }
                let rows = a.take_by_doc();
                prop_assert_eq!(&rows, &b.take_by_doc());
                prop_assert!(a.is_empty() && b.is_empty());
            }
            prop_assert_eq!(by_term(&mut whole), by_term(&mut each));
        }
    }

    proptest! {
        /// A term's changes read back as one map of final states would hold
        /// them, whatever the order: a later add or removal wins, a posting
        /// merged from the tail (kept apart) never overrides one changed
        /// before it, nor one merged before it.
        #[test]
        fn tail_postings_kept_apart_read_back_as_one_map(
            ops in prop::collection::vec((0u8..4, 0u64..40, 1u32..5), 0..60),
        ) {
            let mut p = Pending::default();
            let mut model: BTreeMap<u64, Option<(u32, u32)>> = BTreeMap::new();
            let mut df = 0i64;
            for (kind, docno, tf) in ops {
                let len = 7 + docno as u32;
                match kind {
                    0 => {
                        p.add("t", docno, tf, len);
                        model.insert(docno, Some((tf, len)));
                        df += 1;
                    }
                    1 => {
                        p.remove("t", docno);
                        model.insert(docno, None);
                        df -= 1;
                    }
                    _ => {
                        p.add_under("t", docno, tf, len);
                        model.entry(docno).or_insert(Some((tf, len)));
                        df += 1;
                    }
                }
            }
            let mut want = ByTerm::new();
            if df != 0 || !model.is_empty() {
                want.insert("t".into(), (model.into_iter().collect(), df));
            }
            prop_assert_eq!(by_term(&mut p), want);
        }
    }

    #[test]
    fn impacts_keep_the_frontier() {
        let mut i = Impacts::default();
        i.add(2, 10);
        i.add(2, 12); // dominated
        i.add(4, 20);
        i.add(1, 5);
        assert_eq!(i.pairs(), &[(1, 5), (2, 10), (4, 20)]);
        i.add(4, 8); // dominates (2,10) and (4,20)
        assert_eq!(i.pairs(), &[(1, 5), (4, 8)]);
        assert!(i.dominates(3, 9));
        assert!(!i.dominates(5, 100));
    }

    #[test]
    fn a_block_round_trips() {
        let ps: Vec<Posting> = (0..300)
            .map(|i| Posting { docno: 1000 + i * 7, tf: (i % 5) as u32 + 1, len: 10 + i as u32 })
            .collect();
        let v = encode_block(&ps);
        let h = header(1000, &v).expect("test store");
        assert_eq!((h.count, h.last), (300, 1000 + 299 * 7));
        assert!(ps.iter().all(|p| h.impacts.dominates(p.tf, p.len)));
        assert_eq!(decode_block(1000, &v).expect("test store"), ps);
        // Truncated values are errors, not panics.
        for cut in 0..v.len() {
            assert!(decode_block(1000, &v[..cut]).is_err());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random add/remove sequences over a few commits leave exactly the expected
        /// postings, in well-formed blocks.
        #[test]
        fn blocks_track_a_model(batches in prop::collection::vec(
            prop::collection::vec((0u64..700, any::<bool>(), 1u32..6), 1..400), 1..5)) {
            let db = Database::builder().create_with_backend(InMemoryBackend::new()).expect("test store");
            let mut model: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
            for batch in batches {
                let txn = db.begin_write().expect("test store");
                {
                    let mut blocks = txn.open_table(B).expect("test store");
                    let mut p = Pending::default();
                    for (d, add, tf) in batch {
                        if add && !model.contains_key(&d) {
                            model.insert(d, (tf, tf * 3));
                            p.add("x", d, tf, tf * 3);
                        } else if !add && model.remove(&d).is_some() {
                            p.remove("x", d);
                        }
                    }
                    p.apply(&mut blocks, 1, "").expect("test store");
                    let got = postings_of(&blocks, "x").expect("test store");
                    let want: Vec<Posting> = model.iter()
                        .map(|(d, (tf, len))| Posting { docno: *d, tf: *tf, len: *len }).collect();
                    prop_assert_eq!(&got, &want);
                    let info = term_info(&blocks, "x").expect("test store");
                    prop_assert_eq!(info.as_ref().map_or(0, |i| i.df), model.len() as u64);
                    let mut prev: Option<u64> = None;
                    for row in blocks.range(blocks_of("x")).expect("test store") {
                        let (k, v) = row.expect("test store");
                        let h = header(k.value().1, v.value()).expect("test store");
                        prop_assert!(h.count <= BLOCK_MAX);
                        prop_assert!(prev.is_none_or(|p| p < h.first));
                        let ps = decode_block(k.value().1, v.value()).expect("test store");
                        prop_assert_eq!(ps[0].docno, h.first);
                        for q in &ps {
                            prop_assert!(h.impacts.dominates(q.tf, q.len));
                            prop_assert!(info.as_ref().expect("test store").impacts.dominates(q.tf, q.len));
                        }
                        prev = Some(h.last);
                    }
                }
                txn.commit().expect("test store");
            }
        }
    }

    #[test]
    fn term_info_rows_without_a_generation_read_as_generation_0() {
        let info = TermInfo { df: 300, impacts: Impacts::default(), generation: 77 };
        let mut old = Vec::new();
        put(&mut old, 300);
        Impacts::default().encode(&mut old);
        assert_eq!(
            TermInfo::decode(&old).expect("old row"),
            TermInfo { generation: 0, ..info.clone() }
        );
        assert_eq!(TermInfo::decode(&info.encode()).expect("new row"), info);
    }

    proptest! {
        /// A search from where the last one ended finds what a search from the
        /// start finds, for targets in any order (ascending ones are the walk a
        /// filtered search makes; a smaller one starts over).
        #[test]
        fn a_search_from_the_last_answer_finds_the_first_at_or_after(
            mut list in proptest::collection::vec(0u64..500, 0..300),
            targets in proptest::collection::vec(0u64..520, 1..60),
        ) {
            list.sort_unstable();
            list.dedup();
            let mut at = 0;
            for d in targets {
                let i = list.partition_point(|&x| x < d);
                prop_assert_eq!(next_from(&list, d, &mut at), list.get(i).copied(), "target {}", d);
                prop_assert_eq!(at, i);
            }
        }
    }
}
