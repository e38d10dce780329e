//! Text candidates from the inverted index: BM25 with MaxScore pruning.
//!
//! Terms are taken rarest first (highest score upper bound). Once the upper bounds
//! of the terms left cannot lift an unseen memory into the pool, later (common)
//! terms only refine the scores of memories already found, by point lookups. A
//! query made of very common words alone is bounded by [`MAX_POSTINGS`].

use std::collections::HashMap;

use crate::error::Result;
use crate::storage::schema::posting_parts;
use crate::storage::{DocInfo, Reader};

/// BM25 `k1`.
pub const K1: f64 = 1.2;
/// BM25 `b`.
pub const B: f64 = 0.75;
/// The most postings one query reads in full (the work bound).
pub const MAX_POSTINGS: u64 = 400_000;

/// Roughly how many postings a sequential scan reads in the time of one point
/// lookup: refining more than `df / PROBE_COST` memories scans the list instead.
const PROBE_COST: u64 = 8;

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
    /// Score upper bound: `weight · idf · (k1 + 1)`.
    pub upper: f64,
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
    let tf = f64::from(tf) / f64::from(crate::storage::keys::CONTENT_UNITS);
    let norm = K1 * (1.0 - B + B * f64::from(doc_len) / avgdl.max(1e-9));
    idf * tf * (K1 + 1.0) / (tf + norm)
}

/// Statistics of each distinct term, highest upper bound first (ties by token).
pub fn term_stats(r: &Reader, terms: &[Term]) -> Result<Vec<TermStat>> {
    let n = r.stats().docs;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<TermStat> = Vec::new();
    for t in terms {
        if let Some(&i) = seen.get(t.token.as_str()) {
            // Keep the larger weight of a repeated token.
            let s: &mut TermStat = &mut out[i];
            if t.weight > s.weight {
                s.weight = t.weight;
                s.upper = s.weight * s.idf * (K1 + 1.0);
            }
            continue;
        }
        let df = r.terms.get(t.token.as_str())?.map_or(0, |v| v.value());
        if df == 0 {
            continue;
        }
        let w = idf(n, df);
        seen.insert(t.token.as_str(), out.len());
        out.push(TermStat {
            token: t.token.clone(),
            weight: t.weight,
            df,
            idf: w,
            upper: t.weight * w * (K1 + 1.0),
        });
    }
    out.sort_by(|a, b| b.upper.total_cmp(&a.upper).then_with(|| a.token.cmp(&b.token)));
    Ok(out)
}

/// What is known of a memory's filter verdict.
enum Verdict {
    Kept(Box<DocInfo>),
    Dropped,
}

/// Scores and lazily evaluated filter verdicts of the memories found so far.
struct Pool<'r, F> {
    r: &'r Reader,
    accept: F,
    scores: HashMap<u64, f64>,
    verdicts: HashMap<u64, Verdict>,
}

impl<F: FnMut(u64, &DocInfo) -> bool> Pool<'_, F> {
    /// Reads (once) whether `docno` passes the filter.
    fn kept(&mut self, docno: u64) -> Result<bool> {
        if let Some(v) = self.verdicts.get(&docno) {
            return Ok(matches!(v, Verdict::Kept(_)));
        }
        let v = match self.r.docinfo(docno)? {
            Some(info) if (self.accept)(docno, &info) => Verdict::Kept(Box::new(info)),
            _ => Verdict::Dropped,
        };
        let kept = matches!(v, Verdict::Kept(_));
        self.verdicts.insert(docno, v);
        Ok(kept)
    }

    /// The best `k` memories that pass the filter, best first (ties by docno), each
    /// with its score. Verdicts are read in score order, so only memories that can
    /// place are looked up.
    fn best(&mut self, k: usize) -> Result<Vec<(u64, f64)>> {
        let mut all: Vec<(u64, f64)> = self
            .scores
            .iter()
            .filter(|(d, _)| !matches!(self.verdicts.get(d), Some(Verdict::Dropped)))
            .map(|(d, s)| (*d, *s))
            .collect();
        let by_score = |a: &(u64, f64), b: &(u64, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let mut out = Vec::with_capacity(k);
        let mut window = (k * 2).max(16);
        let mut start = 0;
        while out.len() < k && start < all.len() {
            let end = window.min(all.len());
            if end < all.len() {
                all[start..].select_nth_unstable_by(end - start - 1, by_score);
            }
            all[start..end].sort_unstable_by(by_score);
            for &(d, sc) in &all[start..end] {
                if self.kept(d)? {
                    out.push((d, sc));
                    if out.len() == k {
                        break;
                    }
                }
            }
            start = end;
            window *= 4;
        }
        Ok(out)
    }

    /// The k-th best score among memories that pass the filter.
    fn threshold(&mut self, k: usize) -> Result<Option<f64>> {
        if k == 0 || self.scores.len() < k {
            return Ok(None);
        }
        let best = self.best(k)?;
        Ok(if best.len() == k { best.last().map(|b| b.1) } else { None })
    }
}

/// The `k` best memories by BM25 that pass `accept`, and the number of postings
/// read.
///
/// Postings carry the document length, so scoring reads no per-memory record;
/// `accept` sees a memory at most once, and only when its score could place it
/// among the `k` best (filtering is lazy, in score order).
pub fn top_k(
    r: &Reader,
    stats: &[TermStat],
    k: usize,
    accept: impl FnMut(u64, &DocInfo) -> bool,
) -> Result<(Vec<Candidate>, u64)> {
    if k == 0 {
        return Ok((Vec::new(), 0));
    }
    let corpus = r.stats();
    let avgdl = if corpus.docs == 0 { 1.0 } else { corpus.total_len as f64 / corpus.docs as f64 };
    let mut pool = Pool { r, accept, scores: HashMap::new(), verdicts: HashMap::new() };
    let mut read = 0u64;
    let remaining: Vec<f64> =
        (0..stats.len()).map(|i| stats[i..].iter().map(|s| s.upper).sum()).collect();
    let mut essential_done = stats.len();
    for (i, t) in stats.iter().enumerate() {
        if pool.threshold(k)?.is_some_and(|theta| remaining[i] <= theta) {
            essential_done = i;
            break;
        }
        if read >= MAX_POSTINGS {
            essential_done = i;
            break;
        }
        for row in r.postings.range((t.token.as_str(), 0u64)..=(t.token.as_str(), u64::MAX))? {
            let (key, value) = row?;
            let docno = key.value().1;
            read += 1;
            let (tf, doc_len) = posting_parts(value.value());
            *pool.scores.entry(docno).or_insert(0.0) +=
                t.weight * term_score(t.idf, tf, doc_len, avgdl);
            if read >= MAX_POSTINGS {
                break;
            }
        }
    }
    // Non-essential terms: refine only memories that can still reach the pool.
    if essential_done < stats.len() {
        for (i, t) in stats.iter().enumerate().skip(essential_done) {
            let theta = pool.threshold(k)?.unwrap_or(f64::NEG_INFINITY);
            let Pool { scores, verdicts, .. } = &mut pool;
            let live = |docno: &u64, score: f64| {
                score + remaining[i] > theta
                    && !matches!(verdicts.get(docno), Some(Verdict::Dropped))
            };
            let wanted = scores.iter().filter(|(d, s)| live(d, **s)).count() as u64;
            if wanted.saturating_mul(PROBE_COST) >= t.df {
                // Many memories to refine: one pass over the postings list costs
                // less than a B-tree descent per memory.
                let range = (t.token.as_str(), 0u64)..=(t.token.as_str(), u64::MAX);
                for row in r.postings.range(range)? {
                    let (key, value) = row?;
                    read += 1;
                    if let Some(score) = scores.get_mut(&key.value().1)
                        && live(&key.value().1, *score)
                    {
                        let (tf, doc_len) = posting_parts(value.value());
                        *score += t.weight * term_score(t.idf, tf, doc_len, avgdl);
                    }
                }
            } else {
                for (docno, score) in scores.iter_mut() {
                    if live(docno, *score) {
                        read += 1;
                        if let Some(v) = r.postings.get((t.token.as_str(), *docno))? {
                            let (tf, doc_len) = posting_parts(v.value());
                            *score += t.weight * term_score(t.idf, tf, doc_len, avgdl);
                        }
                    }
                }
            }
        }
    }
    let best = pool.best(k)?;
    let mut out = Vec::with_capacity(best.len());
    for (docno, bm25) in best {
        if let Some(Verdict::Kept(info)) = pool.verdicts.remove(&docno) {
            out.push(Candidate { docno, bm25, info: *info });
        }
    }
    // Ties by id, as before (ids, not docnos, are what callers see).
    out.sort_by(|a, b| b.bm25.total_cmp(&a.bm25).then_with(|| a.info.id.cmp(&b.info.id)));
    Ok((out, read))
}
