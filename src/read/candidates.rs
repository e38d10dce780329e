//! Text candidates from the inverted index: BM25 top-k with block-max MaxScore.
//!
//! Document at a time over the query terms' block postings
//! (`storage::postings`). Terms are ordered by their score upper bound; once `k`
//! memories are held, the terms whose bounds together cannot lift a memory above
//! the k-th score become *non-essential*: they are read only to complete the scores
//! of memories the essential terms found, by moving forward to that memory, and
//! only while their bounds at that memory's length (every posting carries it, and
//! a term's `(tf, length)` frontier bounds what a memory of that length can hold)
//! can still lift it into the top k. Within the essential terms, a window of
//! blocks whose bounds (from each block's impacts) cannot beat the k-th score is
//! skipped without decoding. Once the k-th score reaches the most any memory can
//! score (the terms' bounds summed at the one length that gives the most), the
//! search ends. Filters run lazily: a
//! memory's record is read only when its score would place it among the `k`.
//! A query made of very common words alone is bounded by [`MAX_POSTINGS`].

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use redb::{AccessGuard, Range};

use crate::error::{Error, Result};
use crate::storage::block_cache::{self, BlockCache, CachedTerm, OwnerRows};
use crate::storage::doc_terms::{DocTerms, Signature};
use crate::storage::postings::{self, Header, Impacts, Posting, gallop};
use crate::storage::tail::TailTerm;
use crate::storage::{DocInfo, Reader};

/// BM25 `k1`.
pub const K1: f64 = 1.2;
/// BM25 `b`.
pub const B: f64 = 0.75;
/// The most postings one query decodes (the work bound).
pub const MAX_POSTINGS: u64 = 400_000;

/// Relative tolerance when a bound is compared with the k-th score: summation order
/// moves a score by far less, and a memory that only ties the k-th loses anyway
/// (docnos ascend, ties go to the lower).
const TIE: f64 = 1e-12;

/// Whether a memory whose score is at most `bound` cannot displace the k-th
/// (`theta`).
fn cannot_beat(bound: f64, theta: f64) -> bool {
    bound <= theta + theta.abs() * TIE
}

/// Terms held by more than this share of memories (IDF below 0.1) carry almost no
/// information: they are left out of candidate generation when the query has
/// other terms, instead of decoding postings for nearly the whole store.
pub const MAX_DF_SHARE: f64 = 0.9;

/// A query term with its weight (1 for query words, less for expansions).
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// The token.
    pub token: String,
    /// Query-side weight.
    pub weight: f64,
}

/// A term's corpus statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct TermStat {
    /// The token.
    pub token: String,
    /// Query-side weight.
    pub weight: f64,
    /// Document frequency.
    pub df: u64,
    /// Inverse document frequency.
    pub idf: f64,
    /// Score upper bound: the weighted BM25 contribution of the term's best
    /// (tf, length) pair.
    pub upper: f64,
    /// Postings in the term's blocks (the tail's left out).
    pub block_df: u64,
    /// Generation of the term's blocks (see `storage::block_cache`).
    pub generation: u64,
    /// The `(tf, length)` frontier of every posting of the term, blocks and
    /// tail: what bounds its score in a memory of a known length.
    pub impacts: Impacts,
}

/// A candidate memory with its text score.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Internal document number.
    pub docno: u64,
    /// BM25 score.
    pub bm25: f64,
    /// Its compact record.
    pub info: DocInfo,
}

/// The BM25 IDF (Lucene's, never negative).
#[must_use]
pub fn idf(n_docs: u64, df: u64) -> f64 {
    let n = n_docs as f64;
    let df = df as f64;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The BM25 contribution of one term. `tf` is in the index's half units (see
/// `storage::keys::CONTENT_UNITS`); `doc_len` and `avgdl` in the same units.
#[must_use]
pub fn term_score(idf: f64, tf: u32, doc_len: u32, avgdl: f64) -> f64 {
    score_with_norm(idf, tf, length_norm(doc_len, avgdl))
}

/// The length normalisation of BM25's denominator for a document of `doc_len`.
fn length_norm(doc_len: u32, avgdl: f64) -> f64 {
    K1 * (1.0 - B + B * f64::from(doc_len) / avgdl.max(1e-9))
}

/// [`term_score`] with the length normalisation already computed.
fn score_with_norm(idf: f64, tf: u32, norm: f64) -> f64 {
    let tf = f64::from(tf) / f64::from(crate::storage::keys::CONTENT_UNITS);
    idf * tf * (K1 + 1.0) / (tf + norm)
}

/// [`length_norm`] of the common document lengths, computed once per query: the
/// same values, without a division per posting.
struct Norms {
    avgdl: f64,
    table: Vec<f64>,
}

impl Norms {
    /// Lengths (in half units) below this are looked up.
    const TABLED: u32 = 1024;

    fn new(avgdl: f64) -> Self {
        Self { avgdl, table: (0..Self::TABLED).map(|len| length_norm(len, avgdl)).collect() }
    }

    /// The table for `avgdl`, shared between searches: it depends on nothing
    /// else, and filling its entries again for every search cost about 6% of a
    /// light recall (by `perf`, on a 10k store). The last table made is kept (a
    /// store's average length changes with each write; readers of one snapshot
    /// share it).
    fn shared(avgdl: f64) -> Arc<Self> {
        static LAST: parking_lot::Mutex<Option<Arc<Norms>>> = parking_lot::Mutex::new(None);
        let mut last = LAST.lock();
        if let Some(n) = last.as_ref().filter(|n| n.avgdl.to_bits() == avgdl.to_bits()) {
            return Arc::clone(n);
        }
        let n = Arc::new(Self::new(avgdl));
        *last = Some(Arc::clone(&n));
        n
    }

    fn of(&self, doc_len: u32) -> f64 {
        match self.table.get(doc_len as usize) {
            Some(&n) => n,
            None => length_norm(doc_len, self.avgdl),
        }
    }
}

fn avgdl(r: &Reader) -> f64 {
    let corpus = r.stats();
    if corpus.docs == 0 { 1.0 } else { corpus.total_len as f64 / corpus.docs as f64 }
}

/// Statistics of each distinct term, highest upper bound first (ties by token).
pub fn term_stats(r: &Reader, terms: &[Term]) -> Result<Vec<TermStat>> {
    let n = r.stats().docs;
    let avg = avgdl(r);
    let mut seen: foldhash::HashMap<&str, (usize, f64)> = foldhash::HashMap::default();
    let mut out: Vec<TermStat> = Vec::new();
    for t in terms {
        if let Some(&(i, unit)) = seen.get(t.token.as_str()) {
            // Keep the larger weight of a repeated token.
            let s: &mut TermStat = &mut out[i];
            if t.weight > s.weight {
                s.weight = t.weight;
                s.upper = s.weight * unit;
            }
            continue;
        }
        // Blocks and tail together (see `storage::tail`).
        let info = postings::term_info(&r.postings, &t.token)?;
        let tail = r.tail.term_stats(&t.token);
        let block_df = info.as_ref().map_or(0, |i| i.df);
        let generation = info.as_ref().map_or(0, |i| i.generation);
        let df = block_df + tail.map_or(0, |(df, _)| df);
        if df == 0 {
            continue;
        }
        let mut impacts = info.map(|i| i.impacts).unwrap_or_default();
        if let Some((_, tail_impacts)) = tail {
            impacts.merge(&tail_impacts);
        }
        let w = idf(n, df);
        let unit = impacts.max_by(|tf, len| term_score(w, tf, len, avg));
        seen.insert(t.token.as_str(), (out.len(), unit));
        out.push(TermStat {
            token: t.token.clone(),
            weight: t.weight,
            df,
            idf: w,
            upper: t.weight * unit,
            block_df,
            generation,
            impacts,
        });
    }
    out.sort_by(|a, b| b.upper.total_cmp(&a.upper).then_with(|| a.token.cmp(&b.token)));
    Ok(out)
}

/// The terms that score candidates, lowest bound first (ties by token): all of
/// them, less the ones above [`MAX_DF_SHARE`] when others remain.
fn scoring_order<'s>(r: &Reader, stats: &'s [TermStat]) -> Vec<&'s TermStat> {
    let common = |t: &TermStat| t.df as f64 > MAX_DF_SHARE * r.stats().docs as f64;
    let informative = stats.iter().any(|t| !common(t));
    let mut order: Vec<&TermStat> = stats.iter().filter(|t| !informative || !common(t)).collect();
    order.sort_by(|a, b| a.upper.total_cmp(&b.upper).then_with(|| a.token.cmp(&b.token)));
    order
}

type BlockRows<'a> = Range<'a, (&'static str, u64), &'static [u8]>;

/// Where a cursor's blocks come from.
// One per query term, held in place for the whole search: the size is no cost.
#[allow(clippy::large_enum_variant)]
enum Blocks<'a> {
    /// The term's rows, decoded as the cursor stops in them.
    Rows(BlockRows<'a>),
    /// The store's decoded copy (`storage::block_cache`) and the next block's index.
    Cached(Arc<CachedTerm>, usize),
}

/// A position in one term's postings, moving forward only; the term's tail
/// postings come after its blocks, as blocks of [`postings::BLOCK`] postings
/// bounded on the fly.
struct Cursor<'a> {
    blocks: Blocks<'a>,
    /// The current block's index in a cached term.
    cached_block: Option<usize>,
    tail: Option<TailTerm>,
    /// Tail postings already handed out as blocks.
    tail_used: usize,
    /// The current block's row value, kept until it is decoded.
    raw: Option<AccessGuard<'a, &'static [u8]>>,
    /// The current block's header; `None` once the term is exhausted.
    head: Option<Header>,
    /// Weighted score bound of the current block.
    block_upper: f64,
    postings: Vec<Posting>,
    decoded: bool,
    pos: usize,
    /// The posting at `pos` once [`Cursor::advance`] has stopped on it in a
    /// decoded block: the merge asks about the same posting several times per
    /// memory, and this answers without walking the block again.
    at: Option<Posting>,
    weight: f64,
    idf: f64,
    upper: f64,
    avgdl: f64,
    /// What walking the rows of a term the block cache may take has cost so far,
    /// reported to the cache when the cursor is dropped.
    rent: Option<Rent<'a>>,
}

/// A search's spending on one term's rows, for the block cache's admission
/// ([`BlockCache::pay`]).
struct Rent<'a> {
    cache: &'a BlockCache,
    token: String,
    generation: u64,
    spent: u64,
}

impl Drop for Cursor<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.rent.take()
            && r.spent > 0
        {
            r.cache.pay(&r.token, r.generation, r.spent);
        }
    }
}

impl<'a> Cursor<'a> {
    fn new(r: &'a Reader, t: &TermStat, avgdl: f64) -> Result<Self> {
        let tok = t.token.as_str();
        let mut rent = None;
        let blocks = match r.blocks.term(&r.postings, tok, t.generation, t.block_df)? {
            Some(cached) => Blocks::Cached(cached, 0),
            None => {
                if r.blocks.takes(t.block_df) {
                    rent = Some(Rent {
                        cache: &r.blocks,
                        token: t.token.clone(),
                        generation: t.generation,
                        spent: 0,
                    });
                }
                Blocks::Rows(r.postings.range(postings::blocks_of(tok))?)
            }
        };
        let mut c = Cursor {
            blocks,
            cached_block: None,
            tail: r.tail.term(tok),
            tail_used: 0,
            raw: None,
            head: None,
            block_upper: 0.0,
            postings: Vec::new(),
            decoded: false,
            pos: 0,
            at: None,
            weight: t.weight,
            idf: t.idf,
            upper: t.upper,
            avgdl,
            rent,
        };
        c.next_block()?;
        Ok(c)
    }

    /// Moves to the next block (header only).
    fn next_block(&mut self) -> Result<()> {
        self.step_block()?;
        self.bound_block();
        Ok(())
    }

    /// The current block's weighted score bound, into `block_upper`.
    fn bound_block(&mut self) {
        if let Some(h) = &self.head {
            let (idf, avgdl) = (self.idf, self.avgdl);
            self.block_upper =
                self.weight * h.impacts.max_by(|tf, len| term_score(idf, tf, len, avgdl));
        }
    }

    /// Moves to the next block without computing its bound: blocks a cursor
    /// steps over never need one.
    fn step_block(&mut self) -> Result<()> {
        self.decoded = false;
        self.at = None;
        self.postings.clear();
        self.pos = 0;
        self.raw = None;
        self.head = None;
        self.cached_block = None;
        let next = match &mut self.blocks {
            Blocks::Rows(rows) => match rows.next() {
                Some(row) => {
                    let (k, v) = row?;
                    let h = postings::header(k.value().1, v.value())?;
                    self.raw = Some(v);
                    if let Some(rent) = &mut self.rent {
                        rent.spent += block_cache::ROW_COST;
                    }
                    Some(h)
                }
                None => None,
            },
            Blocks::Cached(term, i) => match term.heads.get(*i) {
                Some(h) => {
                    self.cached_block = Some(*i);
                    *i += 1;
                    Some(h.clone())
                }
                None => None,
            },
        };
        match next {
            Some(h) => self.head = Some(h),
            None => {
                // The tail's next block, already decoded (its postings are counted
                // as read when the cursor first stops in it). A tail may hold
                // thousands of memories: bounded block by block, a long one is
                // skipped in steps as the blocks are.
                if let Some(t) = &self.tail {
                    let rest = t.postings.get(self.tail_used..).unwrap_or(&[]);
                    let block = &rest[..rest.len().min(postings::BLOCK)];
                    let mut impacts = postings::Impacts::default();
                    for p in block {
                        impacts.add(p.tf, p.len);
                    }
                    if let Some(h) = Header::of_decoded(block, impacts) {
                        self.head = Some(h);
                        self.postings.extend_from_slice(block);
                        self.tail_used += block.len();
                    }
                }
            }
        }
        Ok(())
    }

    /// First docno of the current block (`u64::MAX` when exhausted).
    fn block_first(&self) -> u64 {
        self.head.as_ref().map_or(u64::MAX, |h| h.first)
    }

    /// Last docno of the current block (`u64::MAX` when exhausted).
    fn block_last(&self) -> u64 {
        self.head.as_ref().map_or(u64::MAX, |h| h.last)
    }

    /// Moves to the first block that can hold `d` or a later docno, without decoding.
    #[inline(always)]
    fn shallow(&mut self, d: u64) -> Result<()> {
        if self.head.as_ref().is_some_and(|h| h.last < d) {
            self.shallow_slow(d)?;
        }
        Ok(())
    }

    #[inline(never)]
    fn shallow_slow(&mut self, d: u64) -> Result<()> {
        // In a cached term, jump over the headers that end before `d`.
        if let Blocks::Cached(term, next) = &mut self.blocks {
            let rest = term.heads.get(*next..).unwrap_or(&[]);
            *next += gallop(rest, |h| h.last < d);
        }
        while self.head.as_ref().is_some_and(|h| h.last < d) {
            self.step_block()?;
        }
        self.bound_block();
        Ok(())
    }

    /// Moves to the first posting at or after `d` and returns its docno
    /// (`u64::MAX` when there is none). `read` counts decoded postings.
    #[inline(always)]
    fn advance(&mut self, d: u64, read: &mut u64) -> Result<u64> {
        // Calls come with ascending `d`, so the posting the cursor stopped on is
        // still the first at or after `d` when it is not before `d`.
        if let Some(p) = self.at {
            if p.docno >= d {
                return Ok(p.docno);
            }
            // The merge's usual step: the next posting of the block.
            if let Some(&q) = self.block().get(self.pos + 1)
                && q.docno >= d
            {
                self.pos += 1;
                self.at = Some(q);
                return Ok(q.docno);
            }
        }
        self.advance_slow(d, read)
    }

    #[inline(never)]
    fn advance_slow(&mut self, d: u64, read: &mut u64) -> Result<u64> {
        self.shallow(d)?;
        let Some(h) = &self.head else { return Ok(u64::MAX) };
        if !self.decoded {
            if let Some(raw) = self.raw.take() {
                postings::decode_into(h, raw.value(), &mut self.postings)?;
                if let Some(rent) = &mut self.rent {
                    rent.spent += self.postings.len() as u64;
                }
            }
            // (A tail block has its postings already and no row; a cached block
            // is read in place.)
            self.decoded = true;
            *read += self.block().len() as u64;
        }
        // `d <= last`, so a posting at or after `d` is in this block, at or after
        // `pos` (calls come with ascending `d`).
        let block = self.block();
        let pos = self.pos + first_at_or_after(block.get(self.pos..).unwrap_or(&[]), d);
        self.at = block.get(pos).copied();
        self.pos = pos;
        Ok(self.at.map_or(u64::MAX, |p| p.docno))
    }

    /// The current block's postings (once decoded).
    fn block(&self) -> &[Posting] {
        match (&self.blocks, self.cached_block) {
            (Blocks::Cached(term, _), Some(i)) => term.block(i),
            _ => &self.postings,
        }
    }

    /// Moves past the postings from `cur` to `up_to` in the current block,
    /// once decoded, whose own weighted score plus `rest(length)` cannot beat
    /// `theta`: with this the only essential term, those are the memories the
    /// merge would evaluate and prune on the other terms' bounds. Returns the
    /// docno the merge goes on from: the first posting that may place, or `cur`
    /// when the block is not decoded yet; `None` when none up to `up_to` may.
    #[inline(never)]
    fn skip_hopeless(
        &mut self,
        cur: u64,
        up_to: u64,
        norms: &Norms,
        theta: f64,
        mut rest: impl FnMut(u32) -> f64,
    ) -> Option<u64> {
        if !self.decoded {
            return Some(cur);
        }
        let block = self.block();
        let from = self.pos + first_at_or_after(block.get(self.pos..).unwrap_or(&[]), cur);
        for (i, p) in block.iter().enumerate().skip(from) {
            if p.docno > up_to {
                break;
            }
            let own = self.weight * score_with_norm(self.idf, p.tf, norms.of(p.len));
            if !cannot_beat(own + rest(p.len), theta) {
                let p = *p;
                self.pos = i;
                self.at = Some(p);
                return Some(p.docno);
            }
        }
        None
    }

    /// The weighted score of the current posting (equal to `weight ×`
    /// [`term_score`]).
    #[inline(always)]
    fn score(&self, norms: &Norms) -> f64 {
        let p = self.at.unwrap_or_else(|| self.block()[self.pos]);
        self.weight * score_with_norm(self.idf, p.tf, norms.of(p.len))
    }

    /// The current posting's memory length.
    fn len_here(&self) -> u32 {
        self.at.unwrap_or_else(|| self.block()[self.pos]).len
    }
}

/// The index of the first posting of `rest` at or after `d` (`rest.len()` when
/// none is), by galloping: the next posting is the usual answer when the cursor
/// follows the merge, and a lookup for a term completing others' scores may jump
/// over most of a block, in a few comparisons instead of one per posting.
fn first_at_or_after(rest: &[Posting], d: u64) -> usize {
    gallop(rest, |p| p.docno < d)
}

/// The highest tf of the pairs of `impacts` no longer than `len`: the most a
/// posting of a memory of `len` can have (`None`: no posting of the set is in
/// such a memory).
fn best_tf_at(impacts: &Impacts, len: u32) -> Option<u32> {
    impacts.pairs().iter().filter(|p| p.1 <= len).map(|p| p.0).max()
}

/// For each memory length a search meets, the summed bounds of its terms in a
/// memory of that length ([`TermBound::at`]): `of(len)[j]` for terms `0..j`, in
/// scoring order. Computed once per length.
struct LengthBounds {
    terms: Vec<TermBound>,
    /// Where each tabled length's sums start in `sums` (`usize::MAX`: not yet
    /// computed).
    at: Vec<usize>,
    sums: Vec<f64>,
    /// The sums of the last longer memory (rare: computed each time).
    long: Vec<f64>,
}

/// What bounds one term's score in a memory of a known length.
struct TermBound {
    weight: f64,
    idf: f64,
    upper: f64,
    impacts: Impacts,
}

impl TermBound {
    /// A bound on the term's weighted score in a memory of length `len` (every
    /// posting of the term is dominated by a pair of its frontier no longer than
    /// the memory, and the memory's postings all carry its length): the best tf
    /// such a pair allows, at that length. 0 when no pair is that short: the
    /// term is not in the memory.
    fn at(&self, len: u32, norms: &Norms) -> f64 {
        match best_tf_at(&self.impacts, len) {
            Some(tf) => {
                (self.weight * score_with_norm(self.idf, tf, norms.of(len))).min(self.upper)
            }
            None => 0.0,
        }
    }
}

impl LengthBounds {
    fn new(order: &[&TermStat]) -> Self {
        let terms = order
            .iter()
            .map(|t| TermBound { weight: t.weight, idf: t.idf, upper: t.upper, impacts: t.impacts })
            .collect();
        Self { terms, at: Vec::new(), sums: Vec::new(), long: Vec::new() }
    }

    /// The most any memory can score on all the terms: their summed bounds
    /// at the length that gives the most. A term's bound falls as the length
    /// grows between the lengths of its frontier's pairs and rises only at
    /// one, so the largest sum is at one of those lengths.
    fn best(&mut self, norms: &Norms) -> f64 {
        let mut lens: Vec<u32> =
            self.terms.iter().flat_map(|t| t.impacts.pairs().iter().map(|p| p.1)).collect();
        lens.sort_unstable();
        lens.dedup();
        let n = self.terms.len();
        lens.into_iter().map(|len| self.of(len, norms)[n]).fold(0.0, f64::max)
    }

    /// `of(len)[j]`: the summed bounds of terms `0..j` in a memory of `len`.
    /// The search asks this for nearly every posting it prunes, so a length
    /// already tabled is one lookup here, inlined.
    #[inline]
    fn of(&mut self, len: u32, norms: &Norms) -> &[f64] {
        let n = self.terms.len();
        match self.at.get(len as usize) {
            Some(&at) if at != usize::MAX => &self.sums[at..=at + n],
            _ => self.compute(len, norms),
        }
    }

    /// [`LengthBounds::of`] for a length not tabled yet, or too long to table.
    #[cold]
    fn compute(&mut self, len: u32, norms: &Norms) -> &[f64] {
        let i = len as usize;
        if i >= Norms::TABLED as usize {
            self.long.clear();
            push_sums(&mut self.long, &self.terms, len, norms);
            return &self.long;
        }
        if i >= self.at.len() {
            // Grown to the longest length asked for, not to the table's end:
            // searches ask for few and mostly short lengths.
            self.at.resize(i + 1, usize::MAX);
        }
        if self.at[i] == usize::MAX {
            self.at[i] = self.sums.len();
            push_sums(&mut self.sums, &self.terms, len, norms);
        }
        &self.sums[self.at[i]..=self.at[i] + self.terms.len()]
    }
}

/// Appends the summed bounds of `terms` in a memory of `len`: 0, then one sum
/// per term.
fn push_sums(out: &mut Vec<f64>, terms: &[TermBound], len: u32, norms: &Norms) {
    let mut sum = 0.0;
    out.push(sum);
    for t in terms {
        sum += t.at(len, norms);
        out.push(sum);
    }
}

/// A held memory; the heap's top is the worst (lowest score, then highest docno).
struct Held {
    score: f64,
    docno: u64,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    /// "Greater" is worse, so the max-heap's top is the one to evict.
    fn cmp(&self, other: &Self) -> Ordering {
        other.score.total_cmp(&self.score).then(self.docno.cmp(&other.docno))
    }
}

/// The docnos a filter admits, walked in ascending order: candidate generation
/// jumps from one to the next, skipping postings blocks that hold none of them.
pub trait Allow {
    /// The smallest admitted docno at or after `d` (`None` past the last).
    /// Calls with ascending `d` are the fast path; a smaller `d` starts over.
    ///
    /// # Errors
    /// Storage errors.
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>>;
}

/// An [`Allow`] over a sorted slice.
pub struct Sorted<'a>(pub &'a [u64]);

impl Allow for Sorted<'_> {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        let i = self.0.partition_point(|&x| x < d);
        Ok(self.0.get(i).copied())
    }
}

/// The memories every one of several [`Allow`]s admits.
pub struct Meet<'a>(pub Vec<&'a mut dyn Allow>);

impl Allow for Meet<'_> {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        let mut at = d;
        loop {
            let mut agreed = true;
            for a in &mut self.0 {
                match a.next_ge(at)? {
                    None => return Ok(None),
                    Some(next) if next != at => {
                        at = next;
                        agreed = false;
                    }
                    Some(_) => {}
                }
            }
            if agreed {
                return Ok(Some(at));
            }
        }
    }
}

/// The `k` best memories by BM25 that pass `accept`, and the number of postings
/// decoded. Ties are broken by docno (the lower wins), then the result is sorted by
/// score (ties: the lower docno).
///
/// A first pass ranks without `accept` (only `allow` and `skip`) and keeps
/// `k + k/4 + 2`; their records are then read and checked in rank order. Only
/// when fewer than `k` of them pass does a second pass run with `accept` applied
/// to every memory that would place. Either way `accept` sees a memory at most
/// once, and never one that `skip` leaves out: `skip` must leave out only
/// memories `accept` rejects, so the result is the same with or without it.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed block.
pub fn top_k(
    r: &Reader,
    stats: &[TermStat],
    k: usize,
    mut allow: Option<&mut dyn Allow>,
    skip: Option<&mut dyn Skip>,
    accept: impl FnMut(u64, &DocInfo) -> bool,
) -> Result<(Vec<Candidate>, u64)> {
    // One table of length norms for both passes.
    let norms = Norms::shared(avgdl(r));
    rank(r, stats, k, skip, accept, |k, keep| {
        search(r, &norms, stats, k, reborrow(&mut allow), keep)
    })
}

/// [`top_k`] over the memories of `listed` alone, scored from their own terms:
/// the same memories, scores (to the last bit) and order as [`top_k`] with an
/// [`Allow`] admitting exactly them, and `accept` asked about the same memories.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed row.
pub fn top_k_listed(
    r: &Reader,
    stats: &[TermStat],
    k: usize,
    listed: &Listed,
    skip: Option<&mut dyn Skip>,
    accept: impl FnMut(u64, &DocInfo) -> bool,
) -> Result<(Vec<Candidate>, u64)> {
    let norms = Norms::shared(avgdl(r));
    let order = scoring_order(r, stats);
    rank(r, stats, k, skip, accept, |k, keep| search_listed(listed, &norms, &order, k, keep))
}

/// Memories a search leaves out on a cheap test, before reading their records:
/// recall's are the superseded ones, when the query excludes them, the withheld
/// ones (core and archived), the restricted ones (bonded and private) when its
/// requester may see none of them, those outside the episodic or semantic
/// layers its `layer` or `types` filter keeps (all [`crate::storage::bitmap`]),
/// and those outside its `domain` filter ([`crate::read::filters::DomainMembers`]).
pub trait Skip {
    /// Whether `docno` is left out.
    ///
    /// # Errors
    /// Storage errors.
    fn skips(&mut self, docno: u64) -> Result<bool>;

    /// Whether the caller accepts every memory the skip passes (and the search
    /// admits): the first pass then keeps no room for memories it would turn
    /// away. Only a matter of cost: a memory turned away all the same is found
    /// by the second pass, as without this.
    fn decides(&self) -> bool {
        false
    }
}

/// What [`top_k`] and [`top_k_listed`] share: the two passes around `search`
/// (given how many to keep and which memories to keep).
fn rank(
    r: &Reader,
    stats: &[TermStat],
    k: usize,
    mut skip: Option<&mut dyn Skip>,
    mut accept: impl FnMut(u64, &DocInfo) -> bool,
    mut search: impl FnMut(usize, &mut dyn FnMut(u64) -> Result<bool>) -> Result<Ranked>,
) -> Result<(Vec<Candidate>, u64)> {
    if k == 0 || stats.is_empty() {
        return Ok((Vec::new(), 0));
    }
    // Room for a few rejected memories, unless the skips leave none to reject: a
    // smaller first pass prunes sooner (the k-th score it must beat is higher);
    // the second pass covers the rest exactly.
    let wide = match &skip {
        Some(s) if s.decides() => k,
        _ => k.saturating_add(k / 4 + 2),
    };
    let mut skips = |d: u64| -> Result<bool> {
        match skip.as_mut() {
            Some(s) => s.skips(d),
            None => Ok(false),
        }
    };
    let (held, mut read) = search(wide, &mut |d| Ok(!skips(d)?))?;
    let mut verdicts: foldhash::HashMap<u64, Option<DocInfo>> = foldhash::HashMap::default();
    let mut verdict = |d: u64| -> Result<bool> {
        if let Some(v) = verdicts.get(&d) {
            return Ok(v.is_some());
        }
        let v = if skips(d)? { None } else { r.docinfo(d)?.filter(|info| accept(d, info)) };
        let kept = v.is_some();
        verdicts.insert(d, v);
        Ok(kept)
    };
    let mut best: Vec<(u64, f64)> = Vec::with_capacity(k);
    for &(d, score) in &held {
        if verdict(d)? {
            best.push((d, score));
            if best.len() == k {
                break;
            }
        }
    }
    if best.len() < k && held.len() == wide {
        // Too many of the first pass were filtered out: filter while ranking.
        let (again, more) = search(k, &mut verdict)?;
        read += more;
        best = again;
    }
    let mut out: Vec<Candidate> = best
        .into_iter()
        .filter_map(|(docno, bm25)| {
            verdicts.remove(&docno).flatten().map(|info| Candidate { docno, bm25, info })
        })
        .collect();
    out.sort_by(|a, b| b.bm25.total_cmp(&a.bm25).then(a.docno.cmp(&b.docno)));
    Ok((out, read))
}

/// A search's result: the memories kept, best first (ties by docno), and the
/// postings it decoded.
type Ranked = (Vec<(u64, f64)>, u64);

fn reborrow<'s>(a: &'s mut Option<&mut dyn Allow>) -> Option<&'s mut dyn Allow> {
    match a {
        Some(x) => Some(&mut **x),
        None => None,
    }
}

/// Block-max MaxScore over `stats`: the `k` best memories that `allow` admits and
/// `keep` passes, best first (ties by docno), and the postings decoded. `keep` is
/// asked only about memories whose score would place. `norms` are the snapshot's
/// ([`Norms::shared`] of its average length).
fn search(
    r: &Reader,
    norms: &Norms,
    stats: &[TermStat],
    k: usize,
    mut allow: Option<&mut dyn Allow>,
    keep: &mut dyn FnMut(u64) -> Result<bool>,
) -> Result<Ranked> {
    let avg = norms.avgdl;
    let order = scoring_order(r, stats);
    let mut cursors: Vec<Cursor<'_>> =
        order.iter().map(|t| Cursor::new(r, t, avg)).collect::<Result<_>>()?;
    let n = cursors.len();
    // prefix[j]: the summed bounds of terms 0..j.
    let mut prefix = vec![0.0f64; n + 1];
    for j in 0..n {
        prefix[j + 1] = prefix[j] + cursors[j].upper;
    }
    let mut heap: BinaryHeap<Held> = BinaryHeap::with_capacity(k + 1);
    let mut theta = f64::NEG_INFINITY;
    let mut essential = 0usize; // terms 0..essential are non-essential
    let mut read = 0u64;
    let mut parts = vec![0.0f64; n];
    let mut by_len = LengthBounds::new(&order);
    // Once the k-th score reaches it, no later memory can place (ties go to the
    // lower docno): tighter than the terms' best bounds summed, which may come
    // from memories of different lengths. One term's best bound is its bound
    // (the essential terms' loop below ends there), so its lengths are not
    // tabled for it.
    let best = if n > 1 { by_len.best(norms) } else { prefix[n] };
    let mut cur = 0u64;
    // Whether the last memory was pruned on the other terms' bounds alone.
    let mut hopeless = false;

    'windows: while essential < n && read < MAX_POSTINGS {
        if let Some(a) = reborrow(&mut allow) {
            // Start at the next allowed memory.
            match a.next_ge(cur)? {
                None => break,
                Some(next) => cur = next,
            }
        }
        for c in &mut cursors[essential..] {
            c.shallow(cur)?;
        }
        let up_to = cursors[essential..].iter().map(Cursor::block_last).min().unwrap_or(u64::MAX);
        if cursors[essential..].iter().all(|c| c.head.is_none()) {
            break;
        }
        // The best any memory in [cur, up_to] can score.
        let window: f64 = cursors[essential..]
            .iter()
            .filter(|c| c.block_first() <= up_to)
            .map(|c| c.block_upper)
            .sum::<f64>()
            + prefix[essential];
        if heap.len() == k && cannot_beat(window, theta) {
            if up_to == u64::MAX {
                break;
            }
            cur = up_to + 1;
            continue;
        }
        loop {
            // One essential term left, the heap full, and the last memory pruned
            // on the other terms' bounds alone: the next ones likely are too.
            // Passed over in the block here, as the steps below would prune
            // them one by one; with an allow filter too, which then steps on
            // from the first that may place (a walk of a dense layer meets
            // such streaks among its own members).
            if hopeless && essential + 1 == n && heap.len() == k {
                let rest = |len: u32| by_len.of(len, norms)[essential];
                match cursors[essential].skip_hopeless(cur, up_to, norms, theta, rest) {
                    Some(next) => cur = next,
                    None => break,
                }
            }
            let mut d = u64::MAX;
            for c in &mut cursors[essential..] {
                c.shallow(cur)?;
                if c.block_first() <= up_to {
                    d = d.min(c.advance(cur, &mut read)?);
                }
            }
            if d > up_to {
                break;
            }
            if let Some(a) = reborrow(&mut allow) {
                match a.next_ge(d)? {
                    None => break 'windows,
                    Some(next) if next != d => {
                        cur = next;
                        if next > up_to {
                            break;
                        }
                        continue;
                    }
                    Some(_) => {}
                }
            }
            // Every part is written below unless the memory is pruned, so the
            // parts are not cleared first.
            let mut partial = 0.0;
            let mut len = None;
            for (j, c) in cursors.iter_mut().enumerate().skip(essential) {
                parts[j] = 0.0;
                if c.block_first() <= d && c.advance(d, &mut read)? == d {
                    parts[j] = c.score(norms);
                    partial += parts[j];
                    len = Some(c.len_here());
                }
            }
            // The other terms' bounds for a memory of this length (tighter than
            // their global bounds in a longer memory than their best).
            let full = heap.len() == k;
            let bounds = match len {
                Some(len) if full && essential > 0 => by_len.of(len, norms),
                _ => &prefix[..],
            };
            let mut pruned = false;
            hopeless = false;
            for j in (0..essential).rev() {
                parts[j] = 0.0;
                if full && cannot_beat(partial + bounds[j + 1], theta) {
                    pruned = true;
                    hopeless = j + 1 == essential;
                    break;
                }
                cursors[j].shallow(d)?;
                if cursors[j].block_first() > d {
                    continue;
                }
                // The block's own bound is tighter than the term's: decode it only
                // if it can still lift this memory into the top k.
                if full && cannot_beat(partial + cursors[j].block_upper + bounds[j], theta) {
                    pruned = true;
                    break;
                }
                if cursors[j].advance(d, &mut read)? == d {
                    parts[j] = cursors[j].score(norms);
                    partial += parts[j];
                }
            }
            cur = d.saturating_add(1);
            if pruned {
                continue;
            }
            // The score summed in one fixed order, so equal memories tie exactly.
            let score: f64 = parts.iter().sum();
            // Docnos ascend, so a memory tying the k-th loses (ties go to the lower
            // docno).
            if heap.len() == k && score <= theta {
                continue;
            }
            if !keep(d)? {
                continue;
            }
            heap.push(Held { score, docno: d });
            if heap.len() > k {
                heap.pop();
            }
            if heap.len() == k {
                let t = heap.peek().map_or(f64::NEG_INFINITY, |h| h.score);
                if t > theta {
                    theta = t;
                    if cannot_beat(best, theta) {
                        break 'windows;
                    }
                    let before = essential;
                    while essential < n && cannot_beat(prefix[essential + 1], theta) {
                        essential += 1;
                    }
                    if essential != before {
                        continue 'windows;
                    }
                }
            }
            if read >= MAX_POSTINGS {
                break 'windows;
            }
        }
        if up_to == u64::MAX {
            break;
        }
        cur = cur.max(up_to + 1);
    }
    let mut out: Vec<(u64, f64)> = heap.into_iter().map(|h| (h.docno, h.score)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok((out, read))
}

/// The memories of a few owners, each with its own index terms (its
/// `user_terms` row, see `storage::doc_terms`, or for a memory in the postings
/// tail the same derived from its tail row), in docno order: what
/// [`top_k_listed`] scores without reading any postings.
#[derive(Default)]
pub struct Listed {
    /// Each owner's rows of its memories in the blocks (kept by the store's
    /// [`BlockCache::owner_rows`]), then the rows of their memories in the
    /// postings tail.
    parts: Vec<Arc<OwnerRows>>,
    /// Docno, the part holding its row, and the row's index there; ascending.
    rows: Vec<(u64, usize, usize)>,
}

impl Listed {
    /// The rows of every memory of `owners` (user ids, `""` for unattributed
    /// memories), or `None` when they hold more than `max` memories together or
    /// one of them has no rows (it grew past `storage::doc_terms::ROW_CAP`).
    ///
    /// # Errors
    /// Storage errors.
    pub fn load(r: &Reader, owners: &[&str], max: usize) -> Result<Option<Self>> {
        // Refused on the owner terms' document frequencies when they tell
        // already, instead of after reading `max` rows.
        let terms = crate::read::filters::owner_terms(r, owners)?;
        if terms.iter().map(crate::read::filters::OwnerTerm::memories).sum::<u64>() > max as u64 {
            return Ok(None);
        }
        for &o in owners {
            if r.is_rowless(o)? {
                return Ok(None);
            }
        }
        let mut parts = Vec::with_capacity(owners.len() + 1);
        let mut tail = OwnerRows::default();
        let mut count = 0usize;
        for (&o, owner) in owners.iter().zip(&terms) {
            let term = &owner.term;
            // The owner's memories in the blocks have rows (and only they do):
            // none when its term has no blocks.
            if let Some(info) = &owner.blocks {
                let load = |rows: &mut OwnerRows| -> Result<bool> {
                    for row in r.user_terms()?.range((o, 0u64)..=(o, u64::MAX))? {
                        if rows.rows.len() == max {
                            return Ok(false);
                        }
                        let (k, v) = row?;
                        rows.push(k.value().1, v.value());
                    }
                    Ok(true)
                };
                let Some(rows) = r.blocks.owner_rows(term, (info.generation, info.df), load)?
                else {
                    return Ok(None);
                };
                count += rows.rows.len();
                parts.push(rows);
            }
            // The owner's memories in the postings tail have no rows yet: the
            // tail's index holds theirs (docnos above every row's).
            let Some(in_tail) = r.tail.term(term) else { continue };
            for p in &in_tail.postings {
                if count >= max {
                    return Ok(None);
                }
                let row = r.tail.row(p.docno)?.ok_or_else(|| {
                    Error::Corrupted(format!("postings tail: no row for docno {}", p.docno))
                })?;
                tail.push(p.docno, row);
                count += 1;
            }
        }
        if count > max {
            return Ok(None);
        }
        if !tail.rows.is_empty() {
            parts.push(Arc::new(tail));
        }
        let mut rows = Vec::with_capacity(count);
        for (i, part) in parts.iter().enumerate() {
            rows.extend(part.rows.iter().enumerate().map(|(at, &(d, ..))| (d, i, at)));
        }
        if parts.len() > 1 {
            rows.sort_unstable_by_key(|&(d, ..)| d);
        }
        Ok(Some(Self { parts, rows }))
    }

    /// How many memories it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// [`search`] over the memories of `listed`: every one holding a term of
/// `order` ([`scoring_order`]) is scored from its row, its parts summed in the
/// order [`search`] sums them, and `keep` is asked about the same memories (in
/// docno order, those whose score would place). The count returned is of the
/// (memory, term) pairs scored.
fn search_listed(
    listed: &Listed,
    norms: &Norms,
    order: &[&TermStat],
    k: usize,
    keep: &mut dyn FnMut(u64) -> Result<bool>,
) -> Result<Ranked> {
    // The query's term hashes in ascending order (the rows' order), with their
    // place in `order`.
    let mut wanted: Vec<(u64, usize)> =
        order.iter().enumerate().map(|(j, t)| (crate::text::fnv1a(&t.token), j)).collect();
    wanted.sort_unstable();
    // Rows that share no signature bit with the query hold none of its terms.
    let mut query = Signature::default();
    for &(h, _) in &wanted {
        query.add(h);
    }
    let mut parts = vec![0.0f64; order.len()];
    let mut heap: BinaryHeap<Held> = BinaryHeap::with_capacity(k + 1);
    let mut read = 0u64;
    let (mut at, mut terms_at, mut tfs) = (Vec::new(), Vec::new(), Vec::new());
    for &(d, part, row_at) in &listed.rows {
        let part = &listed.parts[part];
        if !part.sigs[row_at].meets(&query) {
            continue;
        }
        let (_, start, end) = part.rows[row_at];
        let row = DocTerms::parse(&part.bytes[start..end])?;
        at.clear();
        terms_at.clear();
        let (n, mut i, mut q) = (row.count(), 0, 0);
        while i < n && q < wanted.len() {
            let h = row.hash(i);
            match h.cmp(&wanted[q].0) {
                Ordering::Less => i += 1,
                Ordering::Greater => q += 1,
                Ordering::Equal => {
                    at.push(i);
                    terms_at.push(wanted[q].1);
                    i += 1;
                    q += 1;
                }
            }
        }
        if at.is_empty() {
            continue;
        }
        row.tfs_at(&at, &mut tfs)?;
        let norm = norms.of(row.len);
        parts.fill(0.0);
        for (&j, &tf) in terms_at.iter().zip(&tfs) {
            let t = order[j];
            parts[j] = t.weight * score_with_norm(t.idf, tf, norm);
            read += 1;
        }
        let score: f64 = parts.iter().sum();
        if heap.len() == k && heap.peek().is_some_and(|h| score <= h.score) {
            continue;
        }
        if !keep(d)? {
            continue;
        }
        heap.push(Held { score, docno: d });
        if heap.len() > k {
            heap.pop();
        }
    }
    let mut out: Vec<(u64, f64)> = heap.into_iter().map(|h| (h.docno, h.score)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok((out, read))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::memory::Memory;
    use crate::model::{MemoryEntry, MemoryType};

    use proptest::prelude::*;

    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];

    /// Exact BM25 of every memory holding a query term, from the decoded postings.
    fn brute(r: &Reader, stats: &[TermStat]) -> HashMap<u64, f64> {
        let avg = avgdl(r);
        let mut per_doc: HashMap<u64, Vec<(usize, f64)>> = HashMap::new();
        let order = scoring_order(r, stats);
        for (j, t) in order.iter().enumerate() {
            for p in r.postings_of(&t.token).expect("test store") {
                let s = t.weight * term_score(t.idf, p.tf, p.len, avg);
                assert!(s <= t.upper * (1.0 + TIE), "term bound below a posting");
                per_doc.entry(p.docno).or_default().push((j, s));
            }
        }
        per_doc
            .into_iter()
            .map(|(d, parts)| {
                let mut v = vec![0.0; order.len()];
                for (j, s) in parts {
                    v[j] = s;
                }
                (d, v.iter().sum())
            })
            .collect()
    }

    /// The statistics of `words`, each a query term of weight 1.
    fn unit_stats(r: &Reader, words: &[&str]) -> Vec<TermStat> {
        let terms: Vec<Term> =
            words.iter().map(|w| Term { token: crate::text::stem(w), weight: 1.0 }).collect();
        term_stats(r, &terms).expect("test store")
    }

    /// The brute-force top `k`, best first (ties by docno).
    fn brute_top(r: &Reader, stats: &[TermStat], k: usize) -> Vec<(u64, f64)> {
        let mut all: Vec<(u64, f64)> = brute(r, stats).into_iter().collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }

    /// The search stops once the k-th score is the most any memory can score on
    /// all the terms at one length (ties go to the lower docno). The best
    /// memories come first here; "lake"'s later blocks hold only memories that
    /// cannot beat them, but their bounds summed term by term (each term's best
    /// comes from memories of another length) could, so without the stop they
    /// are decoded and pruned memory by memory.
    #[test]
    fn the_search_stops_at_the_best_score_a_memory_can_reach() {
        let mem = Memory::builder().postings_tail_docs(0).open_in_memory().expect("test store");
        let mut texts: Vec<String> = vec!["kayak lake".to_owned(); 12];
        for i in 0..600 {
            // "lake" alone, short and long: its blocks' bounds stay high.
            texts.push(
                if i % 2 == 0 { "lake amber" } else { "lake birch cedar dune ember fjord" }
                    .to_owned(),
            );
        }
        // "kayak" three times in longer memories: its best bound, at their length.
        texts.extend(std::iter::repeat_n("kayak kayak kayak grove heath inlet".to_owned(), 2000));
        let entries: Vec<MemoryEntry> =
            texts.into_iter().map(|t| MemoryEntry::new(MemoryType::Episodic, t)).collect();
        for chunk in entries.chunks(500) {
            mem.add_batch(chunk.to_vec()).expect("test store");
        }
        let r = mem.read().expect("test store");
        let stats = unit_stats(&r, &["kayak", "lake"]);
        let k = 5;
        let (got, read) = top_k(&r, &stats, k, None, None, |_, _| true).expect("test store");
        let got: Vec<(u64, f64)> = got.iter().map(|c| (c.docno, c.bm25)).collect();
        assert_eq!(got, brute_top(&r, &stats, k));
        let lake = stats.iter().find(|t| t.token == crate::text::stem("lake")).expect("term");
        assert!(read < lake.df / 2, "{read} postings decoded of {} for \"lake\"", lake.df);
    }

    proptest! {
        /// Galloping finds the same posting as a walk from the start.
        #[test]
        fn galloping_finds_the_first_posting_at_or_after(
            mut docnos in proptest::collection::vec(0u64..500, 0..300),
            d in 0u64..520,
        ) {
            docnos.sort_unstable();
            docnos.dedup();
            let rest: Vec<Posting> =
                docnos.iter().map(|&docno| Posting { docno, tf: 2, len: 10 }).collect();
            let walked = rest.iter().take_while(|p| p.docno < d).count();
            prop_assert_eq!(first_at_or_after(&rest, d), walked);
        }
    }

    /// Skips the multiples of its number; says it decides (every memory it
    /// passes is accepted) when its flag is set.
    struct Multiples(u64, bool);

    impl Skip for Multiples {
        fn skips(&mut self, docno: u64) -> Result<bool> {
            Ok(docno % self.0 == 0)
        }

        fn decides(&self) -> bool {
            self.1
        }
    }

    /// Skips nothing; says it decides when its flag is set.
    struct Nothing(bool);

    impl Skip for Nothing {
        fn skips(&mut self, _: u64) -> Result<bool> {
            Ok(false)
        }

        fn decides(&self) -> bool {
            self.0
        }
    }

    /// A first pass whose skips decide keeps no room for rejected memories: it
    /// asks for `k` alone, so its k-th score rises sooner and it decodes fewer
    /// postings, for the same result. One memory in a hundred holds "lake"
    /// twice in a short text and ties the best score; the search stops once it
    /// holds as many of those as it keeps.
    #[test]
    fn a_first_pass_its_skips_decide_keeps_no_margin() {
        let mem = Memory::builder().postings_tail_docs(0).open_in_memory().expect("test store");
        let entries: Vec<MemoryEntry> = (0..4000)
            .map(|i| {
                let text = if i % 100 == 50 {
                    "lake lake".to_owned()
                } else {
                    format!("lake {}", ["amber birch", "cedar dune ember", "fjord"][i % 3])
                };
                MemoryEntry::new(MemoryType::Episodic, text)
            })
            .collect();
        for chunk in entries.chunks(500) {
            mem.add_batch(chunk.to_vec()).expect("test store");
        }
        let r = mem.read().expect("test store");
        let stats = unit_stats(&r, &["lake"]);
        for k in [4, 8, 12] {
            let want = brute_top(&r, &stats, k);
            let mut results = Vec::new();
            for decides in [false, true] {
                let mut skip = Nothing(decides);
                let (got, read) =
                    top_k(&r, &stats, k, None, Some(&mut skip), |_, _| true).expect("test store");
                let got: Vec<(u64, f64)> = got.iter().map(|c| (c.docno, c.bm25)).collect();
                assert_eq!(got, want, "k {k}, decides {decides}");
                results.push(read);
            }
            assert!(results[1] < results[0], "k {k}: postings decoded {results:?}");
        }
    }

    proptest! {
        /// Several allows met admit exactly the memories each of them admits.
        #[test]
        fn a_meet_of_allows_admits_what_all_admit(
            lists in prop::collection::vec(prop::collection::btree_set(0u64..400, 0..120), 1..4),
            targets in prop::collection::vec(0u64..420, 1..30),
        ) {
            let lists: Vec<Vec<u64>> = lists.into_iter().map(|l| l.into_iter().collect()).collect();
            let mut sorted: Vec<Sorted<'_>> = lists.iter().map(|l| Sorted(l)).collect();
            let mut meet = Meet(sorted.iter_mut().map(|s| s as &mut dyn Allow).collect());
            let mut targets = targets;
            targets.sort_unstable();
            for t in targets {
                let want = (t..400).find(|d| lists.iter().all(|l| l.contains(d)));
                prop_assert_eq!(meet.next_ge(t).expect("next"), want, "target {}", t);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// Block-max pruning returns exactly the brute-force top k (ties by docno),
        /// with and without a filter, over stores spanning many blocks per term,
        /// in the posting blocks or the postings tail.
        #[test]
        fn top_k_matches_brute_force(
            docs in prop::collection::vec(prop::collection::vec(0usize..24, 1..9), 300..900),
            queries in prop::collection::vec(
                (prop::collection::vec((0usize..12, 1u8..3), 1..5), 1usize..30, 0u64..4), 1..6),
            tail in prop::sample::select(vec![0u64, 256, 4096]),
        ) {
            // Every posting in the blocks, some in a tail, or every one in a tail
            // of several blocks' worth.
            let mem =
                Memory::builder().postings_tail_docs(tail).open_in_memory().expect("test store");
            // Skewed vocabulary: low word indexes are common, high ones rare.
            let entries: Vec<MemoryEntry> = docs
                .iter()
                .map(|ws| {
                    let text: Vec<&str> = ws.iter().map(|&w| WORDS[(w * w) / 48]).collect();
                    MemoryEntry::new(MemoryType::Episodic, text.join(" "))
                })
                .collect();
            for chunk in entries.chunks(200) {
                mem.add_batch(chunk.to_vec()).expect("test store");
            }
            let r = mem.read().expect("test store");
            // The same snapshot searched through decoded copies of its blocks: one
            // cache holding every term, one too small to hold most.
            let mut cached = mem.read().expect("test store");
            cached.blocks = Arc::new(BlockCache::eager(1 << 20));
            let mut tight = mem.read().expect("test store");
            tight.blocks = Arc::new(BlockCache::eager(4 << 10));
            let mut found = 0;
            for (words, k, modulo) in queries {
                let terms: Vec<Term> = words
                    .iter()
                    .map(|&(w, wt)| Term {
                        token: crate::text::stem(WORDS[w]),
                        weight: f64::from(wt) / 2.0,
                    })
                    .collect();
                let stats = term_stats(&r, &terms).expect("test store");
                let keep = |d: u64| modulo == 0 || d % (modulo + 1) != 0;
                let allowed: Vec<u64> = (0..2000).filter(|d| keep(*d)).collect();
                let mut sorted = Sorted(&allowed);
                let allow: Option<&mut dyn Allow> =
                    if modulo == 3 { Some(&mut sorted) } else { None };
                // Memories the filter rejects may also be skipped before it
                // (as recall skips superseded ones): the same result.
                // With modulo 1 the skip decides, truly; with 2 it says so
                // but passes memories the filter rejects (a second pass then
                // finds the rest).
                let mut multiples = match modulo {
                    1 => Multiples(modulo + 1, true),
                    _ => Multiples(2 * (modulo + 1), true),
                };
                let skipping = modulo == 1 || modulo == 2;
                let skip: Option<&mut dyn Skip> =
                    if skipping { Some(&mut multiples) } else { None };
                let mut asked = Vec::new();
                let (got, _) = top_k(&r, &stats, k, allow, skip, |d, _| {
                    asked.push(d);
                    keep(d)
                })
                .expect("test store");
                prop_assert!(
                    modulo != 1 || asked.iter().all(|d| keep(*d)),
                    "the filter was asked about a skipped memory"
                );
                let mut want: Vec<(u64, f64)> =
                    brute(&r, &stats).into_iter().filter(|(d, _)| keep(*d)).collect();
                want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                want.truncate(k);
                let mut got_pairs: Vec<(u64, f64)> = got.iter().map(|c| (c.docno, c.bm25)).collect();
                got_pairs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                for (i, reader) in [&cached, &cached, &tight, &tight].into_iter().enumerate() {
                    let mut sorted = Sorted(&allowed);
                    let allow: Option<&mut dyn Allow> =
                        if modulo == 3 { Some(&mut sorted) } else { None };
                    let (again, _) = top_k(reader, &stats, k, allow, None, |d, _| keep(d))
                        .expect("test store");
                    let mut pairs: Vec<(u64, f64)> =
                        again.iter().map(|c| (c.docno, c.bm25)).collect();
                    pairs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    prop_assert_eq!(&pairs, &got_pairs, "cached search {}", i);
                }
                prop_assert_eq!(got_pairs, want);
                found += got.len();
            }
            prop_assert!(found > 0, "no query matched anything");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// Scoring an owner's memories from their own terms gives what the
        /// postings search beside their owner terms' member sets gives: the same memories, scores
        /// to the last bit, order, and the same memories asked about by the filter,
        /// in the same order.
        #[test]
        fn listed_search_matches_the_postings_search(
            docs in prop::collection::vec(
                (prop::collection::vec(0usize..24, 1..9), 0u8..4), 300..900),
            queries in prop::collection::vec(
                (prop::collection::vec((0usize..12, 1u8..3), 1..5), 1usize..30, 0u64..4), 1..6),
        ) {
            let mem = Memory::open_in_memory().expect("test store");
            let entries: Vec<MemoryEntry> = docs
                .iter()
                .map(|(ws, owner)| {
                    let text: Vec<&str> = ws.iter().map(|&w| WORDS[(w * w) / 48]).collect();
                    let mut e = MemoryEntry::new(MemoryType::Episodic, text.join(" "));
                    // 0: unattributed, 1: the user searched, 2 and 3: others.
                    e.user_id = (*owner > 0).then(|| format!("u{owner}"));
                    e
                })
                .collect();
            // The last 20 stay in the postings tail (scored from their tail rows).
            let (blocks, tail) = entries.split_at(entries.len() - 20);
            for chunk in blocks.chunks(200) {
                mem.add_batch(chunk.to_vec()).expect("test store");
            }
            mem.reindex(|_| {}).expect("test store"); // an empty tail
            mem.add_batch(tail.to_vec()).expect("test store");
            let r = mem.read().expect("test store");
            prop_assert_eq!(r.tail.docs(), 20);
            let owners = crate::read::filters::owners("u1");
            let visible = docs.iter().filter(|(_, o)| *o <= 1).count();
            prop_assert!(Listed::load(&r, &owners, visible - 1).expect("load").is_none());
            let listed = Listed::load(&r, &owners, visible).expect("load").expect("within max");
            prop_assert_eq!(listed.len(), visible);
            let mut found = 0;
            for (words, k, modulo) in queries {
                let terms: Vec<Term> = words
                    .iter()
                    .map(|&(w, wt)| Term {
                        token: crate::text::stem(WORDS[w]),
                        weight: f64::from(wt) / 2.0,
                    })
                    .collect();
                let stats = term_stats(&r, &terms).expect("test store");
                let keep = |d: u64| modulo == 0 || d % (modulo + 1) != 0;
                let mut asked_rows = Vec::new();
                let mut users =
                    crate::read::filters::OwnerMembers::load(&r, &["", "u1"]).expect("test store");
                // Half the filters also skip what they reject, in both searches.
                let mut multiples = Multiples(modulo + 1, modulo == 1);
                let skip: Option<&mut dyn Skip> =
                    if modulo == 1 || modulo == 2 { Some(&mut multiples) } else { None };
                let (want, _) = top_k(&r, &stats, k, Some(&mut users), skip, |d, _| {
                    asked_rows.push(d);
                    keep(d)
                })
                .expect("test store");
                let mut asked_listed = Vec::new();
                let mut multiples = Multiples(modulo + 1, modulo == 1);
                let skip: Option<&mut dyn Skip> =
                    if modulo == 1 || modulo == 2 { Some(&mut multiples) } else { None };
                let (got, _) = top_k_listed(&r, &stats, k, &listed, skip, |d, _| {
                    asked_listed.push(d);
                    keep(d)
                })
                .expect("test store");
                let bits = |c: &[Candidate]| -> Vec<(u64, u64)> {
                    c.iter().map(|c| (c.docno, c.bm25.to_bits())).collect()
                };
                prop_assert_eq!(bits(&got), bits(&want));
                prop_assert_eq!(asked_listed, asked_rows);
                found += got.len();
            }
            prop_assert!(found > 0, "no query matched anything");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Several passes of ascending targets (each pass starting anywhere, as a
        /// second ranking pass or a graph expansion does) get exactly the next
        /// memory of the user or of nobody, through the store's changes: new
        /// memories (in the postings tail, then in the blocks), a memory given to
        /// another owner, memories removed.
        #[test]
        fn owner_members_match_brute_force(
            owners in prop::collection::vec(0u8..4, 1..400),
            moved in prop::collection::vec((0usize..400, 0u8..4), 0..20),
            removed in prop::collection::vec(0usize..400, 0..20),
            passes in prop::collection::vec(
                (0u64..450, prop::collection::vec(0u64..40, 1..40)), 1..6),
        ) {
            let mem = Memory::open_in_memory().expect("store");
            // 0: unattributed, 1: the user, 2 and 3: others.
            let user = |o: u8| (o > 0).then(|| format!("u{o}"));
            let mut ids = Vec::new();
            let mut owner_of = std::collections::BTreeMap::new();
            for (i, &o) in owners.iter().enumerate() {
                let mut e = MemoryEntry::new(MemoryType::Semantic, "some memory text");
                e.user_id = user(o);
                // Half of them one at a time (their postings in the tail), the
                // others in batches of one (in the blocks).
                let id = if i % 2 == 0 {
                    mem.add(e).expect("add")
                } else {
                    mem.add_batch(vec![e]).expect("add").remove(0)
                };
                ids.push(id);
            }
            for (i, id) in ids.iter().enumerate() {
                let d = mem.read().expect("read").docno_of(id).expect("docno").expect("held");
                owner_of.insert(d, owners[i]);
            }
            for (i, o) in moved {
                let Some(id) = ids.get(i) else { continue };
                let Some(mut e) = mem.get(id).expect("get") else { continue };
                e.user_id = user(o);
                mem.update(e).expect("update");
                let d = mem.read().expect("read").docno_of(id).expect("docno").expect("held");
                owner_of.insert(d, o);
            }
            for i in removed {
                let Some(id) = ids.get(i) else { continue };
                if let Some(d) = mem.read().expect("read").docno_of(id).expect("docno") {
                    mem.remove(id).expect("remove");
                    owner_of.remove(&d);
                }
            }
            let admitted: Vec<u64> =
                owner_of.iter().filter(|(_, o)| **o <= 1).map(|(d, _)| *d).collect();
            let r = mem.read().expect("read");
            prop_assert_eq!(
                crate::read::filters::owner_memories(&r, &["", "u1"]).expect("owners"),
                admitted.len() as u64
            );
            let mut members =
                crate::read::filters::OwnerMembers::load(&r, &["", "u1"]).expect("owners");
            for (start, steps) in passes {
                let mut d = start;
                for step in steps {
                    let want = admitted.iter().copied().find(|&x| x >= d);
                    prop_assert_eq!(members.next_ge(d).expect("next"), want, "target {}", d);
                    d += step;
                }
            }
        }
    }

    fn words_doc(i: usize) -> MemoryEntry {
        let w = if i % 3 == 0 { "alpha bravo" } else { "alpha charlie" };
        MemoryEntry::new(MemoryType::Episodic, format!("{w} {}", WORDS[i % WORDS.len()]))
    }

    fn search_alpha(r: &Reader) -> Vec<(u64, f64)> {
        let terms = [Term { token: crate::text::stem("alpha"), weight: 1.0 }];
        let stats = term_stats(r, &terms).expect("test store");
        let (got, _) = top_k(r, &stats, 50, None, None, |_, _| true).expect("test store");
        got.iter().map(|c| (c.docno, c.bm25)).collect()
    }

    /// A memory longer than the best ones is dropped on the bound of the other
    /// terms at its own length, without reading their postings: here the common
    /// term's global bound comes from one-word memories and would not prune the
    /// long ones, its bound at their length does.
    #[test]
    fn long_memories_are_pruned_on_their_length() {
        let mem = Memory::builder().postings_tail_docs(0).open_in_memory().expect("test store");
        let filler = "kiwi lemon mango olive papaya quince raisin sorrel tamarind";
        let text = |i: usize| match i {
            // The best: both terms, in memories of six words.
            0..5 => "alpha bravo kiwi lemon mango olive".to_owned(),
            // The common term alone, in one word: its global bound.
            5..305 => "bravo".to_owned(),
            // Both terms, in long memories.
            305..905 => format!("alpha bravo {filler} {filler}"),
            _ => "yarrow zinnia".to_owned(),
        };
        let entries: Vec<MemoryEntry> =
            (0..1905).map(|i| MemoryEntry::new(MemoryType::Episodic, text(i))).collect();
        mem.add_batch(entries).expect("test store");
        let r = mem.read().expect("test store");
        let stats = unit_stats(&r, &["alpha", "bravo"]);
        let (got, read) = top_k(&r, &stats, 5, None, None, |_, _| true).expect("test store");
        let docnos: Vec<u64> = got.iter().map(|c| c.docno).collect();
        let want: Vec<u64> = brute_top(&r, &stats, 5).iter().map(|w| w.0).collect();
        assert_eq!(docnos, want);
        // Every `alpha` posting (the essential term's), and `bravo`'s first block
        // only (read before the five best were held).
        let alpha = stats.iter().find(|s| s.token == "alpha").map_or(0, |s| s.df);
        assert_eq!(alpha, 605);
        assert!(read <= alpha + postings::BLOCK as u64, "read {read} postings");
    }

    /// The owner rows the store keeps follow its writes: after each write to the
    /// user's memories (new ones merging the postings tail, an edit, a removal)
    /// and to another user's, a listed search through the kept rows finds what
    /// one through an empty cache finds, and the kept rows are used when nothing
    /// of the user's changed.
    #[test]
    fn kept_owner_rows_follow_writes() {
        let mem = Memory::builder().postings_tail_docs(64).open_in_memory().expect("test store");
        let entry = |i: usize, owner: &str| {
            let text = format!("alpha {} {}", WORDS[i % WORDS.len()], WORDS[(i * 7) % WORDS.len()]);
            let mut e = MemoryEntry::new(MemoryType::Episodic, text);
            e.user_id = Some(owner.to_owned());
            e
        };
        mem.add_batch((0..200).map(|i| entry(i, "u1")).collect()).expect("test store");
        mem.add_batch((0..100).map(|i| entry(i, "u2")).collect()).expect("test store");
        let terms: Vec<Term> = ["alpha", "bravo", "golf"]
            .iter()
            .map(|w| Term { token: crate::text::stem(w), weight: 1.0 })
            .collect();
        let owners = crate::read::filters::owners("u1");
        let kept = Arc::new(BlockCache::new(1 << 20));
        let search = |cache: &Arc<BlockCache>| {
            let mut r = mem.read().expect("test store");
            r.blocks = Arc::clone(cache);
            let stats = term_stats(&r, &terms).expect("test store");
            let listed = Listed::load(&r, &owners, 10_000).expect("load").expect("within max");
            let (got, _) =
                top_k_listed(&r, &stats, 10, &listed, None, |_, _| true).expect("test store");
            let got: Vec<(u64, f64)> = got.iter().map(|c| (c.docno, c.bm25)).collect();
            (listed.len(), got)
        };
        let check = |step: &str| {
            let fresh = search(&Arc::new(BlockCache::new(1 << 20)));
            assert_eq!(search(&kept), fresh, "{step}");
            fresh.0
        };
        assert_eq!(check("as built"), 200);
        let held = kept.kept_owner_rows(&crate::storage::keys::owner_term("u1"));
        assert!(held.is_some(), "the rows are kept");
        mem.add_batch((100..200).map(|i| entry(i, "u2")).collect()).expect("test store");
        assert_eq!(check("another user's memories"), 200);
        let still = kept.kept_owner_rows(&crate::storage::keys::owner_term("u1"));
        assert!(held.zip(still).is_some_and(|(a, b)| Arc::ptr_eq(&a, &b)), "read again");
        mem.add_batch((200..300).map(|i| entry(i, "u1")).collect()).expect("test store");
        assert_eq!(check("new memories, the tail merged"), 300);
        // Two of the first memories (in the blocks since the first merge).
        let stored = |d: u64| {
            let e = mem.read().and_then(|r| r.get(d)).expect("test store").expect("stored");
            assert_eq!(e.user_id.as_deref(), Some("u1"));
            e
        };
        let mut edited = stored(3);
        edited.content = "bravo golf golf".into();
        mem.update(edited).expect("test store");
        assert_eq!(check("an edit"), 300);
        assert!(mem.remove(&stored(5).id).expect("test store"));
        assert_eq!(check("a removal"), 299);
    }

    /// A store whose postings tail holds 256 memories (the default on a small
    /// store, set here so that these tests do not depend on it): their batches
    /// reach the blocks.
    fn small_tail() -> Memory {
        Memory::builder().postings_tail_docs(256).open_in_memory().expect("test store")
    }

    /// Searches that walk a long term's rows pay for them, and the term is decoded
    /// whole only once they have paid what that costs; every search finds the same.
    #[test]
    fn searches_pay_for_the_rows_they_walk() {
        let mem = small_tail();
        mem.add_batch((0..600).map(words_doc).collect()).expect("test store");
        let plain = search_alpha(&mem.read().expect("test store"));
        let cache = Arc::new(BlockCache::new(1 << 20));
        let mut searches = 0;
        while cache.bytes() == 0 && searches < 50 {
            let mut r = mem.read().expect("test store");
            r.blocks = Arc::clone(&cache);
            assert_eq!(search_alpha(&r), plain, "search {searches}");
            searches += 1;
        }
        assert!(cache.bytes() > 0, "bought after {searches} searches");
        assert!(searches >= 2, "the first search walks the rows and pays");
        let mut r = mem.read().expect("test store");
        r.blocks = Arc::clone(&cache);
        assert_eq!(search_alpha(&r), plain, "from the decoded copy");
    }

    /// A write to a term's blocks gives it a new generation: a snapshot taken after
    /// it never reads the blocks cached before it, and the old snapshot still reads
    /// its own.
    #[test]
    fn cached_blocks_follow_writes() {
        let mem = small_tail();
        let cache = Arc::new(BlockCache::eager(1 << 20));
        mem.add_batch((0..600).map(words_doc).collect()).expect("test store");
        let mut before = mem.read().expect("test store");
        before.blocks = Arc::clone(&cache);
        let plain_before = search_alpha(&mem.read().expect("test store"));
        assert_eq!(search_alpha(&before), plain_before);
        assert!(cache.bytes() > 0, "the term was cached");
        let gen_before =
            postings::term_info(&before.postings, "alpha").expect("row").map(|i| i.generation);

        // Shorter memories holding the term: they score above the old ones, and
        // enough of them that the postings tail is merged into the blocks.
        let short: Vec<MemoryEntry> =
            (0..400).map(|_| MemoryEntry::new(MemoryType::Episodic, "alpha")).collect();
        mem.add_batch(short).expect("test store");
        let mut after = mem.read().expect("test store");
        after.blocks = Arc::clone(&cache);
        let gen_after =
            postings::term_info(&after.postings, "alpha").expect("row").map(|i| i.generation);
        assert_ne!(gen_before, gen_after, "the blocks were rewritten");
        let plain_after = search_alpha(&mem.read().expect("test store"));
        assert_ne!(plain_after, plain_before);
        assert_eq!(search_alpha(&after), plain_after);
        assert_eq!(search_alpha(&before), plain_before, "the old snapshot reads its own blocks");
        assert_eq!(search_alpha(&after), plain_after);
    }

    /// Readers searching through one shared cache while a writer keeps rewriting
    /// the same term's blocks get, snapshot by snapshot, what the snapshot's own
    /// rows give.
    #[test]
    fn cached_search_matches_rows_while_writes_go_on() {
        let mem = small_tail();
        mem.add_batch((0..600).map(words_doc).collect()).expect("test store");
        let cache = Arc::new(BlockCache::eager(1 << 20));
        let off = Arc::new(BlockCache::new(0));
        let generations = std::sync::Mutex::new(std::collections::HashSet::new());
        let generation_of = |r: &Reader| {
            postings::term_info(&r.postings, "alpha").expect("row").map(|i| i.generation)
        };
        // The generation before any write, so the set holds it however the
        // threads are scheduled.
        generations.lock().expect("lock").insert(generation_of(&mem.read().expect("test store")));
        let writing = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|s| {
            s.spawn(|| {
                for round in 0..30 {
                    let batch = (0..40)
                        .map(|i| {
                            let w = WORDS[(i + round) % WORDS.len()];
                            MemoryEntry::new(MemoryType::Episodic, format!("alpha {w} {w}"))
                        })
                        .collect();
                    mem.add_batch(batch).expect("test store");
                }
                writing.store(false, std::sync::atomic::Ordering::Release);
            });
            for _ in 0..2 {
                s.spawn(|| {
                    // Read while the writer goes on, and once more after it is
                    // done, so the last generation is searched too.
                    let mut last = false;
                    while !last {
                        last = !writing.load(std::sync::atomic::Ordering::Acquire);
                        let mut r = mem.read().expect("test store");
                        generations.lock().expect("lock").insert(generation_of(&r));
                        r.blocks = Arc::clone(&cache);
                        let cached = search_alpha(&r);
                        r.blocks = Arc::clone(&off);
                        assert_eq!(cached, search_alpha(&r), "same snapshot, same answer");
                    }
                });
            }
        });
        assert!(cache.bytes() > 0, "the cache was used");
        let seen = generations.lock().expect("lock").len();
        assert!(seen > 1, "the readers saw the blocks rewritten ({seen} generation)");
    }
}
