//! Text candidates from the inverted index: BM25 with MaxScore pruning.
//!
//! Terms are taken rarest first (highest score upper bound). Once the upper bounds
//! of the terms left cannot lift an unseen memory into the pool, later (common)
//! terms only refine the scores of memories already found, by point lookups. A
//! query made of very common words alone is bounded by [`MAX_POSTINGS`].

use std::collections::HashMap;

use crate::error::Result;
use crate::storage::{DocInfo, Reader};

/// BM25 `k1`.
pub const K1: f64 = 1.2;
/// BM25 `b`.
pub const B: f64 = 0.75;
/// The most postings one query reads in full (the work bound).
pub const MAX_POSTINGS: u64 = 400_000;

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

enum Acc {
    Kept(f64, Box<DocInfo>),
    Dropped,
}

/// The `k` best memories by BM25 that pass `accept`, and the number of postings
/// read. `accept` sees each memory once, when it is first found.
pub fn top_k(
    r: &Reader,
    stats: &[TermStat],
    k: usize,
    mut accept: impl FnMut(u64, &DocInfo) -> bool,
) -> Result<(Vec<Candidate>, u64)> {
    let corpus = r.stats();
    let avgdl = if corpus.docs == 0 { 1.0 } else { corpus.total_len as f64 / corpus.docs as f64 };
    let mut acc: HashMap<u64, Acc> = HashMap::new();
    let mut read = 0u64;
    let remaining: Vec<f64> =
        (0..stats.len()).map(|i| stats[i..].iter().map(|s| s.upper).sum()).collect();
    let mut essential_done = stats.len();
    for (i, t) in stats.iter().enumerate() {
        if k > 0 && threshold(&acc, k).is_some_and(|theta| remaining[i] <= theta) {
            essential_done = i;
            break;
        }
        if read >= MAX_POSTINGS {
            essential_done = i;
            break;
        }
        for row in r.postings.range((t.token.as_str(), 0u64)..=(t.token.as_str(), u64::MAX))? {
            let (key, tf) = row?;
            let docno = key.value().1;
            read += 1;
            let slot = match acc.get_mut(&docno) {
                Some(s) => s,
                None => {
                    let info = r.docinfo(docno)?;
                    let entry = match info {
                        Some(info) if accept(docno, &info) => Acc::Kept(0.0, Box::new(info)),
                        _ => Acc::Dropped,
                    };
                    acc.entry(docno).or_insert(entry)
                }
            };
            if let Acc::Kept(score, info) = slot {
                *score += t.weight * term_score(t.idf, tf.value(), info.doc_len, avgdl);
            }
            if read >= MAX_POSTINGS {
                break;
            }
        }
    }
    // Non-essential terms: refine only memories that can still reach the pool.
    if essential_done < stats.len() {
        for (i, t) in stats.iter().enumerate().skip(essential_done) {
            let theta = threshold(&acc, k).unwrap_or(f64::NEG_INFINITY);
            for (docno, slot) in &mut acc {
                if let Acc::Kept(score, info) = slot
                    && *score + remaining[i] > theta
                {
                    read += 1;
                    if let Some(tf) = r.postings.get((t.token.as_str(), *docno))? {
                        *score += t.weight * term_score(t.idf, tf.value(), info.doc_len, avgdl);
                    }
                }
            }
        }
    }
    let mut out: Vec<Candidate> = acc
        .into_iter()
        .filter_map(|(docno, a)| match a {
            Acc::Kept(bm25, info) => Some(Candidate { docno, bm25, info: *info }),
            Acc::Dropped => None,
        })
        .collect();
    out.sort_by(|a, b| b.bm25.total_cmp(&a.bm25).then_with(|| a.info.id.cmp(&b.info.id)));
    out.truncate(k);
    Ok((out, read))
}

/// The k-th best kept score, when at least `k` memories are kept.
fn threshold(acc: &HashMap<u64, Acc>, k: usize) -> Option<f64> {
    let mut scores: Vec<f64> = acc
        .values()
        .filter_map(|a| if let Acc::Kept(s, _) = a { Some(*s) } else { None })
        .collect();
    if scores.len() < k {
        return None;
    }
    let idx = k - 1;
    scores.select_nth_unstable_by(idx, |a, b| b.total_cmp(a));
    Some(scores[idx])
}
