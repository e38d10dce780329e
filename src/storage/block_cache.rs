//! Decoded postings of the most-searched terms, shared by every reader of a store.
//!
//! A heavy query walks tens of thousands of postings: for each block a B-tree
//! step, a header and a varint decode. [`BlockCache`] keeps the decoded blocks of
//! the terms that queries keep coming back to (those with long lists, on their
//! second search), so a search walks them in memory.
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

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use redb::ReadableTable;

use super::postings::{self, Header, Posting};
use crate::error::Result;

type Str = &'static str;
type Bytes = &'static [u8];

/// Default budget of decoded postings, in bytes.
pub const DEFAULT_BUDGET: usize = 64 << 20;
/// Terms with fewer postings than this are read from their blocks: their few
/// B-tree steps cost little, and caching them would crowd out the long lists.
pub const MIN_CACHED_DF: u64 = 4 * postings::BLOCK as u64;
/// Searches of a term (at one generation) before its blocks are cached: a term
/// searched once is not worth decoding whole (a search skips most of its blocks).
const USES_BEFORE_CACHING: u32 = 2;
/// Terms whose searches are counted before the counts start over.
const MAX_COUNTED: usize = 16_384;

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
    /// Searches per term since it last changed generation (uncached terms only).
    uses: HashMap<String, (u64, u32)>,
    bytes: usize,
    clock: u64,
}

/// The cache (see the module docs). Cheap to share: readers hold an `Arc`.
#[derive(Debug)]
pub struct BlockCache {
    inner: Mutex<Inner>,
    budget: usize,
    min_df: u64,
    uses_before: u32,
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
            min_df: MIN_CACHED_DF,
            uses_before: USES_BEFORE_CACHING,
        }
    }

    /// A cache that takes every term on its first search (for tests).
    #[cfg(test)]
    #[must_use]
    pub fn eager(budget: usize) -> Self {
        Self { min_df: 0, uses_before: 1, ..Self::new(budget) }
    }

    /// The decoded blocks of `term` at `generation`, read from `blocks` and kept
    /// when the term qualifies; `None` when the caller should walk the blocks
    /// itself.
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
        let size = usize::try_from(df).unwrap_or(usize::MAX);
        if df < self.min_df || size.saturating_mul(std::mem::size_of::<Posting>()) > self.budget {
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
            if inner.uses.len() >= MAX_COUNTED {
                inner.uses.clear();
            }
            let uses = inner.uses.entry(term.to_owned()).or_insert((generation, 0));
            if uses.0 != generation {
                *uses = (generation, 0);
            }
            uses.1 += 1;
            if uses.1 < self.uses_before {
                return Ok(None);
            }
        }
        // Decoded outside the lock: other readers go on meanwhile.
        let decoded = Arc::new(decode_term(blocks, term)?);
        let bytes = decoded.bytes();
        if bytes > self.budget {
            return Ok(Some(decoded)); // (headers past the estimate from df)
        }
        let mut inner = self.inner.lock();
        inner.uses.remove(term);
        inner.clock += 1;
        let now = inner.clock;
        let entry = Entry { generation, term: Some(Arc::clone(&decoded)), last_used: now, bytes };
        if let Some(old) = inner.terms.insert(term.to_owned(), entry) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        while inner.bytes > self.budget {
            let Some(victim) =
                inner.terms.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = inner.terms.remove(&victim) {
                inner.bytes -= e.bytes;
            }
        }
        Ok(Some(decoded))
    }

    /// Drops everything (the postings were rebuilt).
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.terms.clear();
        inner.uses.clear();
        inner.bytes = 0;
    }

    /// Bytes of decoded postings held.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

fn decode_term(blocks: &impl ReadableTable<(Str, u64), Bytes>, term: &str) -> Result<CachedTerm> {
    let mut postings = Vec::new();
    let (mut heads, mut starts) = (Vec::new(), vec![0]);
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

    /// A store where `alpha` is in 600 memories, `bravo` in 300, `charlie` in 200.
    fn store() -> Memory {
        let mem = Memory::open_in_memory().expect("test store");
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
    fn long_lists_are_kept_from_their_second_search() {
        let mem = store();
        let cache = BlockCache { min_df: 500, ..BlockCache::new(1 << 20) };
        assert!(ask(&cache, &mem, "alpha").is_none(), "first search walks the blocks");
        let kept = ask(&cache, &mem, "alpha").expect("second search decodes");
        assert_eq!(kept.postings.len(), 600);
        assert_eq!(kept.heads.len() + 1, kept.starts.len());
        let r = mem.read().expect("test store");
        assert_eq!(kept.postings, r.postings_of(&crate::text::stem("alpha")).expect("postings"));
        assert!(Arc::ptr_eq(&kept, &ask(&cache, &mem, "alpha").expect("third")), "kept");
        assert!(ask(&cache, &mem, "bravo").is_none() && ask(&cache, &mem, "bravo").is_none());
        assert_eq!(cache.bytes(), kept.bytes());
        cache.clear();
        assert_eq!(cache.bytes(), 0);
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
}
