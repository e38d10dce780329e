//! Decoded postings of the most-searched terms, shared by every reader of a store.
//!
//! A heavy query walks tens of thousands of postings: for each block a B-tree
//! step, a header and a varint decode. [`BlockCache`] keeps the decoded blocks of
//! the terms that queries keep coming back to, so a search walks them in memory.
//!
//! Admission is rent or buy: searches that walk a term's rows report what they
//! spent on it ([`BlockCache::pay`]: the postings they decoded and
//! [`ROW_COST`] per row they stepped through), and the term is decoded whole
//! (bought) at its first search once that sum reaches what decoding it whole
//! costs ([`whole_cost`]). A heavy query, which decodes most of a long list,
//! buys it on its second search; a light query that only steps over a common
//! term's headers and decodes a block or two pays little each time, and the term
//! is bought only after many such searches, instead of the whole decode (up to
//! ~100,000 postings, milliseconds) landing on one light query. Spending at most
//! twice the cheaper of the two is the classic ski-rental bound.
//!
//! Validity: every write to a term's blocks rewrites its [`TermInfo`] row with a new
//! random generation ([`crate::storage::postings::Pending::apply`]), and a cached
//! term is used only by a snapshot whose info row carries the same generation. A
//! generation names one committed content of the term's blocks, so any snapshot, old
//! or new, reads from the cache exactly what it would read from its own blocks.
//! Rows written before generations existed read as generation 0 and are cached
//! under it: their content cannot change without a write, and a write gives them a
//! new generation.
//!
//! The postings tail (`storage/tail.rs`) is not cached here: it is held decoded
//! per snapshot already.
//!
//! [`TermInfo`]: crate::storage::postings::TermInfo

use std::sync::Arc;

use foldhash::HashMap;
use parking_lot::Mutex;
use redb::ReadableTable;

use super::doc_terms::Signature;
use super::key_sets::{self, KeyMembers, KeySet};
use super::postings::{self, Header, Posting};
use crate::error::Result;

type Str = &'static str;
type Bytes = &'static [u8];

/// Default budget of decoded postings, in bytes.
pub const DEFAULT_BUDGET: usize = 256 << 20;
/// Terms with fewer postings than this are read from their blocks: their few
/// B-tree steps cost little, and caching them would crowd out the long lists.
pub const MIN_CACHED_DF: u64 = 4 * postings::BLOCK as u64;
/// What stepping through one block row costs, in decoded postings: a B-tree step
/// and a header parse.
pub const ROW_COST: u64 = 16;
/// Terms whose rent is counted before the counts start over.
const MAX_COUNTED: usize = 16_384;

/// What decoding a term of `df` postings whole costs, in the units of
/// [`BlockCache::pay`]: every posting and every row.
#[must_use]
pub fn whole_cost(df: u64) -> u64 {
    df.saturating_add(ROW_COST.saturating_mul(df.div_ceil(postings::BLOCK as u64)))
}

/// One term's blocks, decoded, at one generation.
#[derive(Debug)]
pub struct CachedTerm {
    /// The blocks' headers, in docno order.
    pub heads: Vec<Header>,
    /// Where each block's postings start in `postings`; one more entry at the end.
    pub starts: Vec<usize>,
    /// Every posting of the blocks, ascending.
    pub postings: Vec<Posting>,
}

impl CachedTerm {
    /// The postings of block `i`.
    #[must_use]
    pub fn block(&self, i: usize) -> &[Posting] {
        &self.postings[self.starts[i]..self.starts[i + 1]]
    }

    fn bytes(&self) -> usize {
        self.postings.len() * std::mem::size_of::<Posting>()
            + self.heads.len() * (std::mem::size_of::<Header>() + std::mem::size_of::<usize>())
    }
}

#[derive(Debug, Default)]
struct Entry {
    generation: u64,
    term: Option<Arc<CachedTerm>>,
    last_used: u64,
    bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    terms: HashMap<String, Entry>,
    /// What searches spent per term since it last changed generation, as
    /// `(generation, spent)` (uncached terms only).
    rent: HashMap<String, (u64, u64)>,
    bytes: usize,
    clock: u64,
    /// `term → (generation, members, last asked)`: see [`BlockCache::members`].
    sets: KeptMap<DocSet>,
    /// Bytes the kept sets hold ([`DocSet::bytes`]).
    set_bytes: usize,
    /// `owner term → (generation, rows, last asked)`: see [`BlockCache::owner_rows`].
    owners: KeptMap<OwnerRows>,
    /// Bytes the kept rows hold ([`OwnerRows::bytes`]).
    owner_bytes: usize,
    /// Mean bytes of a row in the owner rows read last (0 before any): sizes
    /// the next read's buffer.
    row_bytes: usize,
    /// `index:key → (epoch, members, last asked)`: see [`BlockCache::key_set`].
    key_sets: KeptMap<KeySet>,
    /// Bytes the kept key sets hold ([`KeySet::bytes`]).
    key_set_bytes: usize,
}

/// The memories whose postings blocks hold one term, as a set: a bitmap over
/// docnos, or a sorted list when they are fewer than one in 64 of the range.
#[derive(Debug, PartialEq, Eq)]
pub enum DocSet {
    /// Bit `d % 64` of word `d / 64` is set for each member `d`.
    Bits(Vec<u64>),
    /// The members, ascending.
    Sorted(Vec<u64>),
}

impl DocSet {
    /// The set of `docnos` (ascending).
    #[must_use]
    pub fn of(docnos: &[u64]) -> Self {
        let span = docnos.last().map_or(0, |d| d + 1);
        if (docnos.len() as u64).saturating_mul(64) < span {
            return Self::Sorted(docnos.to_vec());
        }
        let mut bits = vec![0u64; usize::try_from(span.div_ceil(64)).unwrap_or(0)];
        for &d in docnos {
            bits[(d / 64) as usize] |= 1 << (d % 64);
        }
        Self::Bits(bits)
    }

    /// Bytes it holds (its words or its list).
    #[must_use]
    pub fn bytes(&self) -> usize {
        match self {
            Self::Bits(v) | Self::Sorted(v) => v.len() * std::mem::size_of::<u64>(),
        }
    }

    /// Whether `docno` is a member.
    #[must_use]
    pub fn contains(&self, docno: u64) -> bool {
        match self {
            Self::Bits(bits) => usize::try_from(docno / 64)
                .ok()
                .and_then(|w| bits.get(w))
                .is_some_and(|w| w & (1 << (docno % 64)) != 0),
            Self::Sorted(list) => list.binary_search(&docno).is_ok(),
        }
    }

    /// The smallest member at or after `docno`.
    #[must_use]
    pub fn next_ge(&self, docno: u64) -> Option<u64> {
        self.next_ge_from(docno, &mut 0)
    }

    /// [`DocSet::next_ge`], for a walk of ascending targets: a list is searched
    /// from `*at`, where the previous answer was (which it then records; see
    /// `postings::next_from`); a bitmap steps from the target's word.
    #[must_use]
    pub fn next_ge_from(&self, docno: u64, at: &mut usize) -> Option<u64> {
        match self {
            Self::Bits(bits) => {
                let mut w = usize::try_from(docno / 64).ok()?;
                // The members of the first word at or after `docno`.
                let mut word = bits.get(w)? & (u64::MAX << (docno % 64));
                loop {
                    if word != 0 {
                        return Some(w as u64 * 64 + u64::from(word.trailing_zeros()));
                    }
                    w += 1;
                    word = *bits.get(w)?;
                }
            }
            Self::Sorted(list) => postings::next_from(list, docno, at),
        }
    }
}

/// The `user_terms` rows of one owner's memories in the postings blocks, copied
/// out of their pages, in docno order.
#[derive(Debug, Default)]
pub struct OwnerRows {
    /// The rows, one after the other.
    pub bytes: Vec<u8>,
    /// Each row's docno, and where it sits in `bytes`.
    pub rows: Vec<(u64, usize, usize)>,
    /// Each row's [`Signature`], in the same order.
    pub sigs: Vec<Signature>,
}

impl OwnerRows {
    /// Empty, with room for `rows` rows of `bytes` bytes together.
    #[must_use]
    pub fn with_capacity(rows: usize, bytes: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
            rows: Vec::with_capacity(rows),
            sigs: Vec::with_capacity(rows),
        }
    }

    /// Appends the row of `docno` (docnos must come in ascending order).
    pub fn push(&mut self, docno: u64, row: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(row);
        self.rows.push((docno, start, self.bytes.len()));
        self.sigs.push(Signature::of_row(row));
    }

    /// Bytes it holds.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes.capacity()
            + self.rows.capacity() * std::mem::size_of::<(u64, usize, usize)>()
            + self.sigs.capacity() * std::mem::size_of::<Signature>()
    }
}

/// Bytes of owner rows kept at most (the most recently asked; the newest is
/// kept whatever its size). A user holding 1,000 memories of the synthetic
/// corpus takes ~430 KB (~400 KB of rows, 32 KB of their signatures), so this
/// keeps the rows of the ~150 users asked about last: an agent's active
/// conversations.
const OWNER_ROWS_BUDGET: usize = 64 << 20;

/// Bytes of member sets kept at most (the most recently asked; the newest is
/// kept whatever its size). A bitmap over 1M memories takes 125 KiB, so this
/// holds a few hundred such sets, or thousands of smaller ones kept as lists.
/// Keeping the 32 sets asked last instead thrashed on a 1M store of 300 users
/// whose user-filtered recalls read the sets: p50 0.43 against 0.37 ms with
/// every set kept, in alternated runs.
const SETS_BUDGET: usize = 32 << 20;

/// Bytes of key sets ([`BlockCache::key_set`]) kept at most (the most recently
/// asked; the newest is kept whatever its size): the 100 scopes of 10,000
/// memories each of a 1M store take ~8 MB as lists, a layer of 125,000 of its
/// memories 125 KiB as a bitmap.
const KEY_SETS_BUDGET: usize = 32 << 20;

/// The cache (see the module docs). Cheap to share: readers hold an `Arc`.
#[derive(Debug)]
pub struct BlockCache {
    inner: Mutex<Inner>,
    budget: usize,
    /// Bytes of member sets kept at most ([`SETS_BUDGET`] but in tests).
    set_budget: usize,
    min_df: u64,
    /// Buys every term at its first search (tests).
    eager: bool,
}

impl Default for BlockCache {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET)
    }
}

impl BlockCache {
    /// A cache holding at most `budget` bytes of decoded postings (0: none).
    #[must_use]
    pub fn new(budget: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            budget,
            set_budget: SETS_BUDGET,
            min_df: MIN_CACHED_DF,
            eager: false,
        }
    }

    /// A cache that takes every term on its first search (for tests).
    #[cfg(test)]
    #[must_use]
    pub fn eager(budget: usize) -> Self {
        Self { min_df: 0, eager: true, ..Self::new(budget) }
    }

    /// Can a term of `df` postings be cached at all? Searches walking its rows
    /// report what they spend on it ([`BlockCache::pay`]) only then.
    #[must_use]
    pub fn takes(&self, df: u64) -> bool {
        let size = usize::try_from(df).unwrap_or(usize::MAX);
        df >= self.min_df && size.saturating_mul(std::mem::size_of::<Posting>()) <= self.budget
    }

    /// Records that a search spent `spent` (decoded postings, plus [`ROW_COST`]
    /// per row stepped through) walking the rows of `term` at `generation`.
    pub fn pay(&self, term: &str, generation: u64, spent: u64) {
        let mut inner = self.inner.lock();
        if inner.terms.get(term).is_some_and(|e| e.generation == generation && e.term.is_some()) {
            return; // bought meanwhile
        }
        if inner.rent.len() >= MAX_COUNTED && !inner.rent.contains_key(term) {
            inner.rent.clear();
        }
        let rent = inner.rent.entry(term.to_owned()).or_insert((generation, 0));
        if rent.0 != generation {
            *rent = (generation, 0);
        }
        rent.1 = rent.1.saturating_add(spent);
    }

    /// The decoded blocks of `term` at `generation`, read from `blocks` and kept
    /// when the term qualifies (searches have spent on it what decoding it whole
    /// costs); `None` when the caller should walk the blocks itself and report
    /// what that cost ([`BlockCache::pay`]).
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on a malformed block.
    pub fn term(
        &self,
        blocks: &impl ReadableTable<(Str, u64), Bytes>,
        term: &str,
        generation: u64,
        df: u64,
    ) -> Result<Option<Arc<CachedTerm>>> {
        if !self.takes(df) {
            // Too short to be worth it, or too long to fit: a search walks the
            // blocks and skips most of them.
            return Ok(None);
        }
        {
            let mut inner = self.inner.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(e) = inner.terms.get_mut(term)
                && e.generation == generation
                && let Some(t) = &e.term
            {
                e.last_used = now;
                return Ok(Some(Arc::clone(t)));
            }
            let spent = inner.rent.get(term).filter(|r| r.0 == generation).map_or(0, |r| r.1);
            if !self.eager && spent < whole_cost(df) {
                return Ok(None);
            }
        }
        // Decoded outside the lock: other readers go on meanwhile.
        let decoded = Arc::new(decode_term(blocks, term, df)?);
        let bytes = decoded.bytes();
        if bytes > self.budget {
            return Ok(Some(decoded)); // (headers past the estimate from df)
        }
        let mut inner = self.inner.lock();
        inner.rent.remove(term);
        inner.clock += 1;
        let now = inner.clock;
        let entry = Entry { generation, term: Some(Arc::clone(&decoded)), last_used: now, bytes };
        if let Some(old) = inner.terms.insert(term.to_owned(), entry) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        let inner = &mut *inner;
        evict(&mut inner.terms, &mut inner.bytes, self.budget, 0, |e| (e.last_used, e.bytes));
        Ok(Some(decoded))
    }

    /// The memories whose blocks hold `term` at `generation` (its tail postings
    /// left out), as a set: built from its decoded copy when one is held, or
    /// from `blocks`, at the first ask of each generation, and kept for the
    /// next (the most recently asked, within `SETS_BUDGET` bytes). A `domain`
    /// filter asks for its domain term's: a term with a long list whose blocks
    /// change only when the postings tail is merged.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on a malformed block.
    pub fn members(
        &self,
        blocks: &impl ReadableTable<(Str, u64), Bytes>,
        term: &str,
        generation: u64,
    ) -> Result<Arc<DocSet>> {
        let held = {
            let mut inner = self.inner.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(set) = kept(&mut inner.sets, term, generation, now) {
                return Ok(set);
            }
            inner
                .terms
                .get(term)
                .filter(|e| e.generation == generation)
                .and_then(|e| e.term.clone())
        };
        let docnos: Vec<u64> = match held {
            Some(t) => t.postings.iter().map(|p| p.docno).collect(),
            None => {
                let mut postings = Vec::new();
                postings::decode_term(blocks, term, &mut postings, |_| {})?;
                postings.iter().map(|p| p.docno).collect()
            }
        };
        let set = Arc::new(DocSet::of(&docnos));
        let mut inner = self.inner.lock();
        inner.clock += 1;
        let now = inner.clock;
        let inner = &mut *inner;
        let kept = (&mut inner.sets, &mut inner.set_bytes);
        keep(kept, self.set_budget, term, (generation, &set, now), DocSet::bytes);
        Ok(set)
    }

    /// The rows of the memories whose postings blocks hold `owner_term` at
    /// `generation` (an owner's, see `storage::keys::owner_term`): kept from an
    /// earlier ask of the same generation, else read by `load` (`None`: too
    /// many, not kept) and kept for the next (the most recently asked, within
    /// `OWNER_ROWS_BUDGET` bytes). A user-filtered recall scores a small owner's
    /// memories from these rows; an agent asks for the same user's again and
    /// again, and the owner term's blocks (hence its generation) change only
    /// when one of its memories in the blocks is written or the postings tail
    /// is merged, with the rows in the same transaction.
    ///
    /// `load` fills a buffer sized for `count` rows (the owner term's document
    /// frequency in the blocks) of the mean length of the rows read last: a
    /// buffer grown by doubling would be copied several times, each time into
    /// memory never touched before.
    ///
    /// # Errors
    /// Those of `load`.
    pub fn owner_rows(
        &self,
        owner_term: &str,
        (generation, count): (u64, u64),
        load: impl FnOnce(&mut OwnerRows) -> Result<bool>,
    ) -> Result<Option<Arc<OwnerRows>>> {
        let row_bytes = {
            let mut inner = self.inner.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(rows) = kept(&mut inner.owners, owner_term, generation, now) {
                return Ok(Some(rows));
            }
            inner.row_bytes
        };
        let count = usize::try_from(count).unwrap_or(0);
        // A few rows past the mean fit without growing.
        let mut rows = OwnerRows::with_capacity(count, count.saturating_mul(row_bytes) / 8 * 9);
        if !load(&mut rows)? {
            return Ok(None);
        }
        // Rows shorter than the last read's leave room the budget would count.
        if rows.bytes.capacity() > rows.bytes.len() / 4 * 5 {
            rows.bytes.shrink_to_fit();
        }
        let rows = Arc::new(rows);
        let mut inner = self.inner.lock();
        if !rows.rows.is_empty() {
            inner.row_bytes = rows.bytes.len().div_ceil(rows.rows.len());
        }
        inner.clock += 1;
        let now = inner.clock;
        let inner = &mut *inner;
        let kept = (&mut inner.owners, &mut inner.owner_bytes);
        keep(kept, OWNER_ROWS_BUDGET, owner_term, (generation, &rows, now), OwnerRows::bytes);
        Ok(Some(rows))
    }

    /// The members of `key` in `index` (whose rows `table` holds) for a
    /// snapshot that reads `stamp` for the key and numbers its next memory
    /// `upto`: a set kept from an earlier ask at the same epoch that serves the
    /// stamp's count of removals ([`KeySet::serves`]), with the rows added past
    /// it read from `table` (the set read again, further, once they are
    /// [`key_sets::EXTEND_AT`] or more), else the rows read whole and kept for
    /// the next ask (the most recently asked, within `KEY_SETS_BUDGET` bytes)
    /// unless the set kept serves more. See [`super::key_sets`] for why such a
    /// set holds every member.
    ///
    /// # Errors
    /// Storage errors.
    pub fn key_set(
        &self,
        table: &impl ReadableTable<(Str, u64), ()>,
        (index, key): (key_sets::Index, &str),
        stamp: key_sets::Stamp,
        upto: u64,
    ) -> Result<KeyMembers> {
        let name = index.cache_key(key);
        let held = {
            let mut inner = self.inner.lock();
            inner.clock += 1;
            let now = inner.clock;
            kept(&mut inner.key_sets, &name, stamp.epoch, now)
        };
        let set = match held {
            Some(set) if set.serves(stamp.removed) => {
                if set.upto >= upto {
                    return Ok(KeyMembers::new(set, Vec::new(), upto));
                }
                let later = key_sets::rows_from(table, key, set.upto)?;
                if later.len() < key_sets::EXTEND_AT {
                    return Ok(KeyMembers::new(set, later, upto));
                }
                Arc::new(set.extended(&later, upto, stamp.removed))
            }
            _ => Arc::new(KeySet::read(table, key, upto, stamp.removed)?),
        };
        let mut inner = self.inner.lock();
        // A reader of a newer snapshot may have kept a set further meanwhile.
        let newer =
            inner.key_sets.get(&name).is_some_and(|k| k.0 == stamp.epoch && k.1.covers(&set));
        if !newer {
            inner.clock += 1;
            let now = inner.clock;
            let inner = &mut *inner;
            let kept = (&mut inner.key_sets, &mut inner.key_set_bytes);
            keep(kept, KEY_SETS_BUDGET, &name, (stamp.epoch, &set, now), KeySet::bytes);
        }
        Ok(KeyMembers::new(set, Vec::new(), upto))
    }

    /// The set kept for `index:key` (tests).
    #[cfg(test)]
    pub(crate) fn kept_key_set(&self, name: &str) -> Option<Arc<KeySet>> {
        self.inner.lock().key_sets.get(name).map(|k| Arc::clone(&k.1))
    }

    /// The rows kept for `owner_term`, whatever their generation (tests).
    #[cfg(test)]
    pub(crate) fn kept_owner_rows(&self, owner_term: &str) -> Option<Arc<OwnerRows>> {
        self.inner.lock().owners.get(owner_term).map(|k| Arc::clone(&k.1))
    }

    /// Drops everything (the postings were rebuilt).
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.terms.clear();
        inner.rent.clear();
        inner.bytes = 0;
        inner.sets.clear();
        inner.set_bytes = 0;
        inner.owners.clear();
        inner.owner_bytes = 0;
        inner.key_sets.clear();
        inner.key_set_bytes = 0;
    }

    /// Bytes of decoded postings held.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

/// Values kept by key: each with its term's generation and when it was last asked.
type KeptMap<V> = HashMap<String, (u64, Arc<V>, u64)>;

/// The value kept for `key` when it is of `generation`, marked as used `now`.
fn kept<V>(map: &mut KeptMap<V>, key: &str, generation: u64, now: u64) -> Option<Arc<V>> {
    let k = map.get_mut(key).filter(|k| k.0 == generation)?;
    k.2 = now;
    Some(Arc::clone(&k.1))
}

/// Keeps `value` for `key` (`(generation, value, now)`) in a map whose values
/// hold `held` bytes together, then drops the least recently used until they
/// fit in `budget` (the newest stays whatever its size).
fn keep<V>(
    (map, held): (&mut KeptMap<V>, &mut usize),
    budget: usize,
    key: &str,
    (generation, value, now): (u64, &Arc<V>, u64),
    bytes: impl Fn(&V) -> usize,
) {
    *held += bytes(value);
    if let Some(old) = map.insert(key.to_owned(), (generation, Arc::clone(value), now)) {
        *held -= bytes(&old.1);
    }
    evict(map, held, budget, 1, |k| (k.2, bytes(&k.1)));
}

/// Drops the least recently used of `kept` until the `held` bytes fit in
/// `budget`, keeping at least `floor` of them; `usage` gives an entry's last use
/// and its bytes.
fn evict<V>(
    kept: &mut HashMap<String, V>,
    held: &mut usize,
    budget: usize,
    floor: usize,
    usage: impl Fn(&V) -> (u64, usize),
) {
    while *held > budget && kept.len() > floor {
        let Some(oldest) = kept.iter().min_by_key(|(_, v)| usage(v).0).map(|(k, _)| k.clone())
        else {
            break;
        };
        if let Some(v) = kept.remove(&oldest) {
            *held -= usage(&v).1;
        }
    }
}

/// Decodes `term`'s blocks (`df` postings, as its info row counts them) whole.
/// The vectors are sized from `df` up front: grown by doubling, a long list
/// would be copied several times, each copy into memory never touched before.
fn decode_term(
    blocks: &impl ReadableTable<(Str, u64), Bytes>,
    term: &str,
    df: u64,
) -> Result<CachedTerm> {
    let df = usize::try_from(df).unwrap_or(usize::MAX);
    let mut postings = Vec::with_capacity(df);
    let n_blocks = df.div_ceil(postings::BLOCK);
    let (mut heads, mut starts) = (Vec::with_capacity(n_blocks), Vec::with_capacity(n_blocks + 1));
    starts.push(0);
    postings::decode_term(blocks, term, &mut postings, |h| heads.push(h))?;
    // Each block's postings end where the next block's begin.
    let mut end = 0;
    for h in &heads {
        end += h.count;
        starts.push(end);
    }
    Ok(CachedTerm { heads, starts, postings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Memory;
    use crate::model::{MemoryEntry, MemoryType};

    /// A store where `alpha` is in 600 memories, `bravo` in 300, `charlie` in 200,
    /// all in the posting blocks (no tail).
    fn store() -> Memory {
        let mem = Memory::builder().postings_tail_docs(0).open_in_memory().expect("test store");
        let entries = (0..600)
            .map(|i| {
                let mut text = String::from("alpha");
                if i % 2 == 0 {
                    text.push_str(" bravo");
                }
                if i % 3 == 0 {
                    text.push_str(" charlie");
                }
                MemoryEntry::new(MemoryType::Episodic, text)
            })
            .collect();
        mem.add_batch(entries).expect("test store");
        mem
    }

    fn ask(cache: &BlockCache, mem: &Memory, word: &str) -> Option<Arc<CachedTerm>> {
        let term = crate::text::stem(word);
        let term = term.as_str();
        let r = mem.read().expect("test store");
        let info = postings::term_info(&r.postings, term).expect("row").expect("term");
        cache.term(&r.postings, term, info.generation, info.df).expect("decode")
    }

    #[test]
    fn long_lists_are_kept_once_searches_spent_a_whole_decode() {
        let mem = store();
        let cache = BlockCache { min_df: 500, ..BlockCache::new(1 << 20) };
        let gen_of = |word: &str| {
            let r = mem.read().expect("test store");
            let term = crate::text::stem(word);
            postings::term_info(&r.postings, &term).expect("row").expect("term").generation
        };
        let alpha = crate::text::stem("alpha");
        assert!(ask(&cache, &mem, "alpha").is_none(), "first search walks the blocks");
        // Searches that spend less than a whole decode do not buy it...
        cache.pay(&alpha, gen_of("alpha"), whole_cost(600) - 1);
        assert!(ask(&cache, &mem, "alpha").is_none(), "rent below the price");
        // ...nor does rent paid at another generation...
        cache.pay(&alpha, gen_of("alpha") ^ 1, whole_cost(600));
        assert!(ask(&cache, &mem, "alpha").is_none(), "rent of another generation");
        cache.pay(&alpha, gen_of("alpha"), whole_cost(600) - 1);
        cache.pay(&alpha, gen_of("alpha"), 1);
        let kept = ask(&cache, &mem, "alpha").expect("rent reached the price: decoded");
        assert_eq!(kept.postings.len(), 600);
        assert_eq!(kept.heads.len() + 1, kept.starts.len());
        let r = mem.read().expect("test store");
        assert_eq!(kept.postings, r.postings_of(&crate::text::stem("alpha")).expect("postings"));
        assert!(Arc::ptr_eq(&kept, &ask(&cache, &mem, "alpha").expect("third")), "kept");
        // bravo (300) is under `min_df`: never taken, whatever is spent on it.
        assert!(!cache.takes(300) && cache.takes(600));
        cache.pay(&crate::text::stem("bravo"), gen_of("bravo"), u64::MAX);
        assert!(ask(&cache, &mem, "bravo").is_none());
        assert_eq!(cache.bytes(), kept.bytes());
        cache.clear();
        assert_eq!(cache.bytes(), 0);
    }

    fn members(cache: &BlockCache, mem: &Memory, word: &str) -> Arc<DocSet> {
        let term = crate::text::stem(word);
        let r = mem.read().expect("test store");
        let info = postings::term_info(&r.postings, &term).expect("row").expect("term");
        cache.members(&r.postings, &term, info.generation).expect("decode")
    }

    #[test]
    fn member_sets_are_kept_within_their_budget_most_recent_first() {
        let mem = store();
        let sizes: Vec<usize> = ["alpha", "bravo", "charlie"]
            .iter()
            .map(|w| members(&BlockCache::default(), &mem, w).bytes())
            .collect();
        assert!(sizes.iter().all(|&b| b > 0));
        // Room for two of the three sets.
        let cache = BlockCache { set_budget: sizes[0] + sizes[1], ..BlockCache::new(0) };
        let alpha = members(&cache, &mem, "alpha");
        let bravo = members(&cache, &mem, "bravo");
        assert!(Arc::ptr_eq(&alpha, &members(&cache, &mem, "alpha")), "kept");
        // charlie's set pushes out the one asked least recently: bravo.
        let charlie = members(&cache, &mem, "charlie");
        assert_eq!(cache.inner.lock().set_bytes, sizes[0] + sizes[2]);
        assert!(Arc::ptr_eq(&alpha, &members(&cache, &mem, "alpha")), "alpha still kept");
        assert!(Arc::ptr_eq(&charlie, &members(&cache, &mem, "charlie")));
        let bravo_again = members(&cache, &mem, "bravo");
        assert!(!Arc::ptr_eq(&bravo, &bravo_again), "bravo was rebuilt");
        assert_eq!(bravo, bravo_again, "with the same members");
        // A set larger than the budget is still kept alone, as the newest.
        let tiny = BlockCache { set_budget: 1, ..BlockCache::new(0) };
        let a = members(&tiny, &mem, "alpha");
        assert!(Arc::ptr_eq(&a, &members(&tiny, &mem, "alpha")));
        members(&tiny, &mem, "bravo");
        assert_eq!(tiny.inner.lock().sets.len(), 1);
        assert_eq!(tiny.inner.lock().set_bytes, sizes[1]);
        tiny.clear();
        assert_eq!(tiny.inner.lock().set_bytes, 0);
    }

    #[test]
    fn the_budget_holds_the_most_recently_used() {
        let mem = store();
        let off = BlockCache::eager(0);
        assert!(ask(&off, &mem, "charlie").is_none(), "a budget of 0 keeps nothing");
        // Room for bravo (300) and charlie (200), not for alpha (600) too.
        let cache = BlockCache::eager(9_000);
        assert!(ask(&cache, &mem, "alpha").is_none(), "too long for the budget");
        let bravo = ask(&cache, &mem, "bravo").expect("bravo");
        let charlie = ask(&cache, &mem, "charlie").expect("charlie");
        assert_eq!(cache.bytes(), bravo.bytes() + charlie.bytes());
        assert!(cache.bytes() <= 9_000);
        let small = BlockCache::eager(bravo.bytes() + 100);
        ask(&small, &mem, "bravo").expect("bravo");
        ask(&small, &mem, "charlie").expect("charlie, evicting bravo");
        assert_eq!(small.bytes(), charlie.bytes());
        let again = ask(&small, &mem, "bravo").expect("bravo again");
        assert_eq!(small.bytes(), again.bytes(), "charlie went");
    }

    #[test]
    fn owner_rows_are_read_into_a_buffer_sized_from_the_last_read() {
        let cache = BlockCache::new(1 << 20);
        let fill = |n: u64, len: usize| {
            move |rows: &mut OwnerRows| {
                for d in 0..n {
                    rows.push(d, &vec![7; len]);
                }
                Ok(true)
            }
        };
        let first = cache.owner_rows("#owner:a", (1, 40), fill(40, 100)).expect("a").expect("kept");
        assert_eq!(first.rows.capacity(), 40, "sized for the rows counted");
        // Rows of 100 bytes were read last: 50 of them fit without growing.
        let sized = cache.owner_rows("#owner:b", (1, 50), fill(50, 100)).expect("b").expect("kept");
        assert_eq!(sized.bytes.len(), 5_000);
        let capacity = sized.bytes.capacity();
        assert!((5_000..=5_625).contains(&capacity), "grown: {capacity}");
        assert_eq!(cache.inner.lock().owner_bytes, first.bytes() + sized.bytes());
        // Shorter rows than the last read's: the room left over is given back.
        let short = cache.owner_rows("#owner:d", (1, 50), fill(50, 10)).expect("d").expect("kept");
        assert_eq!(short.bytes.capacity(), 500);
        // A refused read keeps nothing.
        let refused = cache.owner_rows("#owner:c", (1, 3), |_| Ok(false)).expect("c");
        assert!(refused.is_none());
        assert!(cache.kept_owner_rows("#owner:c").is_none());
    }
}
