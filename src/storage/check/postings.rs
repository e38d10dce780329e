//! The postings check, streamed: the expected postings are packed (an
//! interned term, a docno and a frequency: 16 bytes each) and sorted in the
//! stored key order once, then compared with the blocks and the tail as they
//! are read, one term at a time. Nothing holds the stored postings.

use std::collections::HashMap;

use rayon::slice::ParallelSliceMut;

use super::diff::Tally;
use crate::error::{Error, Result};
use crate::storage::Reader;
use crate::storage::postings::{self, INFO, Posting, TermInfo};
use crate::storage::tail::TailTerm;

/// One expected posting; `term` is an interned id until [`Collect::sort`]
/// makes it the term's rank in key order.
#[derive(Clone, Copy)]
struct Expect {
    term: u32,
    tf: u32,
    docno: u64,
}

/// The expected postings, gathered entry by entry.
#[derive(Default)]
pub(super) struct Collect {
    ids: HashMap<String, u32>,
    list: Vec<Expect>,
}

impl Collect {
    /// Expects `docno` in `term`'s postings with frequency `tf`.
    pub(super) fn add(&mut self, term: &str, docno: u64, tf: u32) -> Result<()> {
        let term = match self.ids.get(term) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.ids.len())
                    .map_err(|_| Error::Corrupted("more than 2^32 distinct terms".into()))?;
                self.ids.insert(term.to_owned(), id);
                id
            }
        };
        self.list.push(Expect { term, tf, docno });
        Ok(())
    }

    /// Sorts the postings as the table keys them: by term, then docno.
    pub(super) fn sort(self) -> Sorted {
        let mut names: Vec<(String, u32)> = self.ids.into_iter().collect();
        names.sort_unstable();
        let mut rank = vec![0u32; names.len()];
        for (r, (_, id)) in (0u32..).zip(&names) {
            rank[*id as usize] = r;
        }
        let mut list = self.list;
        for e in &mut list {
            e.term = rank[e.term as usize];
        }
        drop(rank);
        list.par_sort_unstable_by_key(|e| (e.term, e.docno));
        let mut df = vec![0u64; names.len()];
        for e in &list {
            df[e.term as usize] += 1;
        }
        Sorted { names: names.into_iter().map(|(n, _)| n).collect(), list, df }
    }
}

/// The expected postings in key order, and each term's document frequency.
pub(super) struct Sorted {
    /// Term names by rank.
    names: Vec<String>,
    list: Vec<Expect>,
    df: Vec<u64>,
}

/// The term whose rows are being read.
struct Term {
    name: String,
    /// Its rank among the expected terms, if expected.
    rank: Option<u32>,
    info: Option<TermInfo>,
    /// The last docno of its blocks so far.
    last: Option<u64>,
    /// The exact Pareto frontier of its blocks' (tf, length) pairs.
    frontier: Vec<(u32, u32)>,
    /// Its postings in the tail.
    tail: u64,
}

/// The walk's state.
struct Walk<'a> {
    exp: Sorted,
    /// Next expected posting.
    at: usize,
    /// Ranks below this one have been met (stored or reported missing).
    next_rank: u32,
    doc_len: &'a dyn Fn(u64) -> Option<u32>,
    tail: Vec<(String, TailTerm)>,
    /// Next tail term.
    tail_at: usize,
    /// Blocks that do not decode or are out of shape.
    blocks: Tally,
    /// Postings missing, stray or with other values.
    postings: Tally,
    terms: Tally,
    /// The largest docno in any block.
    block_max: Option<u64>,
}

/// Compares the stored postings (blocks and tail) and term rows with `exp`;
/// `doc_len` gives an expected memory's length; `progress` gets the rows read
/// so far, now and then. Returns the rows read.
pub(super) fn compare(
    r: &Reader,
    exp: Sorted,
    doc_len: &dyn Fn(u64) -> Option<u32>,
    progress: &mut dyn FnMut(u64),
    out: &mut Vec<String>,
) -> Result<u64> {
    let mut w = Walk {
        exp,
        at: 0,
        next_rank: 0,
        doc_len,
        tail: r.tail.terms(),
        tail_at: 0,
        blocks: Tally::new("postings"),
        postings: Tally::new("postings"),
        terms: Tally::new("terms"),
        block_max: None,
    };
    let mut rows = 0u64;
    let mut cur: Option<Term> = None;
    // The current block's postings (one buffer for all of them).
    let mut list = Vec::new();
    for row in r.postings.range::<(&str, u64)>(..)? {
        let (k, v) = row?;
        let (t, first) = k.value();
        rows += 1;
        if rows % 4_096 == 0 {
            progress(rows);
        }
        let term = match cur.take() {
            Some(term) if term.name == t => term,
            done => {
                if let Some(done) = done {
                    w.finish(done, out);
                }
                w.tail_only_before(t, out);
                w.start(t, out)
            }
        };
        let term = cur.insert(term);
        if first == INFO {
            match TermInfo::decode(v.value()) {
                Ok(info) => term.info = Some(info),
                Err(e) => w.terms.wrong(out, || format!("{t:?}: {e}")),
            }
            continue;
        }
        list.clear();
        let block = postings::header(first, v.value())
            .and_then(|h| postings::decode_into(&h, v.value(), &mut list).map(|()| h));
        let h = match block {
            Ok(h) => h,
            Err(e) => {
                w.blocks.wrong(out, || format!("block ({t:?}, {first}): {e}"));
                continue;
            }
        };
        if list.first().map(|q| q.docno) != Some(first) {
            w.blocks.wrong(out, || format!("block ({t:?}, {first}) does not start at its key"));
        }
        if term.last.is_some_and(|last| last >= first) {
            w.blocks.wrong(out, || format!("block ({t:?}, {first}) overlaps the previous one"));
        }
        term.last = Some(h.last);
        w.block_max = w.block_max.max(Some(h.last));
        for q in &list {
            if !h.impacts.dominates(q.tf, q.len) {
                w.blocks.wrong(out, || format!("({t:?}, {}) exceeds its block's bound", q.docno));
            }
            add_to_frontier(&mut term.frontier, q.tf, q.len);
            w.posting(term.rank, t, q, out);
        }
    }
    if let Some(done) = cur {
        w.finish(done, out);
    }
    // Terms only in the tail, after the last stored term.
    while let Some(name) = w.tail.get(w.tail_at).map(|(n, _)| n.clone()) {
        let term = w.start(&name, out);
        w.finish(term, out);
    }
    let mut below = Tally::new("postings tail");
    for (t, tt) in &w.tail {
        rows += tt.postings.len() as u64;
        for q in &tt.postings {
            if w.block_max.is_some_and(|m| q.docno <= m) {
                below.wrong(out, || format!("({t:?}, {}) is not above the blocks", q.docno));
            }
        }
    }
    below.close(out);
    w.missing_terms_before(u32::try_from(w.exp.names.len()).unwrap_or(u32::MAX), out);
    while let Some(e) = w.exp.list.get(w.at).copied() {
        w.at += 1;
        let name = &w.exp.names[e.term as usize];
        w.postings.wrong(out, || format!("missing {:?}", (name, e.docno)));
    }
    w.blocks.close(out);
    w.postings.close(out);
    w.terms.close(out);
    Ok(rows)
}

impl Walk<'_> {
    /// Walks the terms held only by the tail and named before `t`.
    fn tail_only_before(&mut self, t: &str, out: &mut Vec<String>) {
        while let Some(name) =
            self.tail.get(self.tail_at).map(|(n, _)| n).filter(|n| n.as_str() < t).cloned()
        {
            let term = self.start(&name, out);
            self.finish(term, out);
        }
    }

    /// Reports the expected terms ranked below `rank` that nothing stored.
    fn missing_terms_before(&mut self, rank: u32, out: &mut Vec<String>) {
        while self.next_rank < rank {
            let name = &self.exp.names[self.next_rank as usize];
            self.terms.wrong(out, || format!("missing {name:?}"));
            self.next_rank += 1;
        }
    }

    /// Starts reading term `t`'s rows.
    fn start(&mut self, t: &str, out: &mut Vec<String>) -> Term {
        let found = self.exp.names.binary_search_by(|n| n.as_str().cmp(t));
        let below = match found {
            Ok(i) | Err(i) => u32::try_from(i).unwrap_or(u32::MAX),
        };
        self.missing_terms_before(below, out);
        let rank = found.ok().map(|_| below);
        if rank.is_some() {
            self.next_rank = self.next_rank.max(below + 1);
        }
        Term { name: t.to_owned(), rank, info: None, last: None, frontier: Vec::new(), tail: 0 }
    }

    /// Reads the term's tail postings (above its blocks) and checks its row.
    fn finish(&mut self, mut term: Term, out: &mut Vec<String>) {
        if self.tail.get(self.tail_at).is_some_and(|(n, _)| *n == term.name) {
            // Taken out while compared, put back for the check against the blocks.
            let tail = std::mem::take(&mut self.tail[self.tail_at].1.postings);
            for q in &tail {
                self.posting(term.rank, &term.name, q, out);
            }
            term.tail = tail.len() as u64;
            self.tail[self.tail_at].1.postings = tail;
            self.tail_at += 1;
        }
        let t = &term.name;
        if let Some(info) = &term.info {
            // The term's bound covers each of its postings. (A block's own
            // bound may be looser: past four pairs it is coarsened to one, the
            // most frequent and shortest of its postings together, which no
            // single posting need reach.)
            if term.frontier.iter().any(|&(tf, len)| !info.impacts.dominates(tf, len)) {
                self.terms.wrong(out, || format!("{t:?}'s bound is below one of its postings"));
            }
        }
        let got = match (&term.info, term.tail) {
            (None, 0) => None,
            (info, tail) => Some(info.as_ref().map_or(0, |i| i.df) + tail),
        };
        let want = term.rank.map(|r| self.exp.df[r as usize]);
        match (got, want) {
            (Some(g), Some(w)) if g != w => {
                self.terms.wrong(out, || format!("{t:?} is {g}, expected {w}"));
            }
            (None, Some(_)) => self.terms.wrong(out, || format!("missing {t:?}")),
            (Some(_), None) => self.terms.stray(out, || format!("stray {t:?}")),
            _ => {}
        }
    }

    /// Compares one stored posting of term `t` with the expected ones.
    fn posting(&mut self, rank: Option<u32>, t: &str, q: &Posting, out: &mut Vec<String>) {
        let Some(rank) = rank else {
            self.postings.stray(out, || format!("stray {:?}", (t, q.docno)));
            return;
        };
        let key = (rank, q.docno);
        while let Some(e) = self.exp.list.get(self.at).copied().filter(|e| (e.term, e.docno) < key)
        {
            self.at += 1;
            let name = &self.exp.names[e.term as usize];
            self.postings.wrong(out, || format!("missing {:?}", (name, e.docno)));
        }
        match self.exp.list.get(self.at).copied().filter(|e| (e.term, e.docno) == key) {
            Some(e) => {
                self.at += 1;
                let want = (e.tf, (self.doc_len)(e.docno).unwrap_or(0));
                if (q.tf, q.len) != want {
                    self.postings.wrong(out, || {
                        format!("{:?} is {:?}, expected {want:?}", (t, q.docno), (q.tf, q.len))
                    });
                }
            }
            None => self.postings.stray(out, || format!("stray {:?}", (t, q.docno))),
        }
    }
}

/// Adds `(tf, len)` to an exact Pareto frontier (no pair with a higher tf and
/// a shorter length than another): nothing when a pair dominates it, else it
/// replaces the pairs it dominates.
fn add_to_frontier(frontier: &mut Vec<(u32, u32)>, tf: u32, len: u32) {
    if frontier.iter().any(|&(t, l)| t >= tf && l <= len) {
        return;
    }
    frontier.retain(|&(t, l)| !(t <= tf && l >= len));
    frontier.push((tf, len));
}
