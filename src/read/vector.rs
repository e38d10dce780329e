//! Pluggable vector strategy: the [`Embedder`] trait, three built-in embedders, the
//! stored vectors (`EMBEDDINGS` table) and brute-force cosine candidates for hybrid
//! recall.
//!
//! When a [`Memory`] is built with an embedder, every entry written
//! (observe's episodes and facts, `remember`, `add`, `supersede`) gets its content's
//! vector stored next to it, L2-normalised as little-endian `f32`s. Recall embeds the
//! query, scans the stored vectors for the most similar ones and merges them into the
//! candidate pool; the activation ranking and the similarity ranking of the pool
//! are then fused by reciprocal rank ([`HybridFusion`], weight [`HYBRID_WEIGHT`]).
//! Fusing inside the relevance term instead ([`HybridFusion::MinMax`]) measured
//! worse on LoCoMo: cosine and BM25 disagree in scale and spread.
//!
//! The scan is exact and brute force: vectors are read in bounded batches and scored
//! in parallel, so memory stays flat and time grows linearly with the store. An
//! approximate index
//! (HNSW or IVF) is future work for stores of millions of vectors.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use rayon::prelude::*;
use redb::ReadableTableMetadata;

use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::storage::{Reader, Writer};
use crate::text::{is_stop_word, stem, tokenize_list};

/// Turns text into a vector.
///
/// Implementations must be deterministic for a given text (stored vectors are compared
/// with query vectors made later) and return vectors of [`Embedder::dim`] floats.
pub trait Embedder: Send + Sync {
    /// A short name for traces and errors.
    fn name(&self) -> &str;
    /// The number of dimensions of every vector.
    fn dim(&self) -> usize;
    /// The vector of `text`, or `None` when the embedder has none for it (no usable
    /// token, unknown text). Need not be normalised.
    ///
    /// # Errors
    /// Whatever the embedder fails with; a write that needs the vector fails with it.
    fn embed(&self, text: &str) -> Result<Option<Vec<f32>>>;
}

impl fmt::Debug for dyn Embedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Embedder({}, dim {})", self.name(), self.dim())
    }
}

/// Default weight λ of the vector side in hybrid recall (see [`HybridFusion`]).
pub const HYBRID_WEIGHT: f64 = 0.3;

/// Default number of vector candidates merged into the recall pool (at least the
/// limit is always taken).
pub const VECTOR_CANDIDATES: usize = 30;

/// How hybrid recall combines lexical and vector evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HybridFusion {
    /// Reciprocal rank fusion of two rankings of the same pool: the default
    /// profile's activation ranking (BM25 relevance with recency, emotion,
    /// significance) and the ranking by cosine similarity, weighted `1-λ` and `λ`
    /// with the customary constant 60. Rank-based, so it needs no calibration
    /// between BM25 and cosine scales.
    #[default]
    Rrf,
    /// Fuses inside relevance: `(1-λ)·bm25/max_bm25 + λ·(cos-min)/(max-min)` over
    /// the pool, then the activation ranking as usual.
    MinMax,
}

impl HybridFusion {
    /// Parses `rrf` or `minmax`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "rrf" => Some(Self::Rrf),
            "minmax" => Some(Self::MinMax),
            _ => None,
        }
    }
}

/// Vectors below this cosine similarity to the query are not candidates.
pub const MIN_VECTOR_SIMILARITY: f32 = 0.1;

/// Stored vectors read per batch of the scan (bounds memory).
pub const SCAN_BATCH: usize = 4096;

use crate::text::fnv1a;

/// Scales `v` to unit length in place. Returns false for a zero (or non-finite) vector.
pub fn normalize(v: &mut [f32]) -> bool {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if !norm.is_finite() || norm <= 0.0 {
        return false;
    }
    for x in v.iter_mut() {
        *x = (f64::from(*x) / norm) as f32;
    }
    true
}

/// Dot product of two equally long vectors (the cosine of unit vectors).
#[must_use]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Stemmed content tokens: 2+ letters, stop-words out.
fn features(text: &str) -> Vec<String> {
    tokenize_list(text, 2).into_iter().filter(|t| !is_stop_word(t)).map(|t| stem(&t)).collect()
}

/// Adds `weight` for `token` to its signed bucket.
fn hash_into(v: &mut [f32], token: &str, weight: f32) {
    let h = fnv1a(token);
    let len = v.len() as u64;
    // `len` is at least 1, so the index is in range.
    let i = (h % len) as usize;
    let sign = if (h >> 63) == 1 { -1.0 } else { 1.0 };
    v[i] += sign * weight;
}

/// Signed feature hashing of stemmed tokens (sub-linear term frequency), L2-normalised.
/// Knows nothing of meaning beyond shared stems, needs no training and no model.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dim: usize,
}

impl HashingEmbedder {
    /// An embedder of `dim` dimensions (at least 1; 256 to 1024 is typical).
    #[must_use]
    pub fn new(dim: usize) -> Self {
        Self { dim: dim.max(1) }
    }
}

/// Signed feature hashing of `text`'s features, each weighted `(1 + ln tf) ·
/// weight(feature)`, L2-normalised (`None` when no feature has weight).
fn hashed(dim: usize, text: &str, weight: impl Fn(&str) -> f32) -> Option<Vec<f32>> {
    let mut tf: HashMap<String, u32> = HashMap::new();
    for t in features(text) {
        *tf.entry(t).or_default() += 1;
    }
    let mut v = vec![0.0_f32; dim];
    for (t, n) in &tf {
        hash_into(&mut v, t, (1.0 + (*n as f32).ln()) * weight(t));
    }
    normalize(&mut v).then_some(v)
}

impl Default for HashingEmbedder {
    fn default() -> Self {
        Self::new(512)
    }
}

impl Embedder for HashingEmbedder {
    fn name(&self) -> &str {
        "hashing"
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, text: &str) -> Result<Option<Vec<f32>>> {
        Ok(hashed(self.dim, text, |_| 1.0))
    }
}

/// Hashed TF-IDF: fitted on a corpus for document frequencies, then signed feature
/// hashing of `(1 + ln tf) · idf` per stemmed token, L2-normalised. Tokens the corpus
/// never saw get the highest IDF (they are rare by definition).
#[derive(Debug, Clone)]
pub struct TfIdfEmbedder {
    dim: usize,
    idf: HashMap<String, f32>,
    unseen_idf: f32,
}

impl TfIdfEmbedder {
    /// Fits document frequencies on `corpus` (one text per document).
    #[must_use]
    pub fn fit<'a>(dim: usize, corpus: impl IntoIterator<Item = &'a str>) -> Self {
        let mut df: HashMap<String, u32> = HashMap::new();
        let mut n: u32 = 0;
        for doc in corpus {
            n += 1;
            let mut seen: Vec<String> = features(doc);
            seen.sort();
            seen.dedup();
            for t in seen {
                *df.entry(t).or_default() += 1;
            }
        }
        let idf_of = |d: u32| ((1.0 + f64::from(n)) / (1.0 + f64::from(d))).ln() as f32 + 1.0;
        let idf = df.into_iter().map(|(t, d)| (t, idf_of(d))).collect();
        Self { dim: dim.max(1), idf, unseen_idf: idf_of(0) }
    }

    /// Number of distinct tokens seen while fitting.
    #[must_use]
    pub fn vocabulary_len(&self) -> usize {
        self.idf.len()
    }
}

impl Embedder for TfIdfEmbedder {
    fn name(&self) -> &str {
        "tfidf"
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, text: &str) -> Result<Option<Vec<f32>>> {
        Ok(hashed(self.dim, text, |t| self.idf.get(t).copied().unwrap_or(self.unseen_idf)))
    }
}

/// Vectors computed elsewhere, looked up by exact text. A text of the episodic form
/// `"User: X\nAgent: "` (empty agent turn) is also looked up as `X`.
#[derive(Debug, Clone)]
pub struct PrecomputedEmbedder {
    dim: usize,
    vectors: HashMap<String, Vec<f32>>,
}

/// The user turn of an episodic content with an empty agent turn.
fn unwrap_episode(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("User: ")?;
    let (user, agent) = rest.rsplit_once("\nAgent:")?;
    agent.trim().is_empty().then_some(user)
}

impl PrecomputedEmbedder {
    /// From `(text, vector)` pairs; every vector must have the same length.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for vectors of different lengths or empty ones.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, Vec<f32>)>) -> Result<Self> {
        let mut dim = None;
        let mut vectors = HashMap::new();
        for (text, v) in pairs {
            if v.is_empty() {
                return Err(Error::InvalidInput(format!("empty vector for {text:?}")));
            }
            match dim {
                None => dim = Some(v.len()),
                Some(d) if d != v.len() => {
                    return Err(Error::InvalidInput(format!(
                        "vector of {} floats for {text:?}, others have {d}",
                        v.len()
                    )));
                }
                Some(_) => {}
            }
            vectors.insert(text, v);
        }
        Ok(Self { dim: dim.unwrap_or(0), vectors })
    }

    /// Reads JSON Lines of `{"text": "...", "v": [floats]}` (the LoCoMo embedding
    /// files).
    ///
    /// # Errors
    /// I/O errors, and [`Error::InvalidInput`] naming the line of a malformed record.
    pub fn from_jsonl(path: impl AsRef<Path>) -> Result<Self> {
        use std::io::BufRead;
        #[derive(serde::Deserialize)]
        struct Line {
            text: String,
            v: Vec<f32>,
        }
        let path = path.as_ref();
        let file = std::io::BufReader::new(std::fs::File::open(path)?);
        let mut pairs = Vec::new();
        for (i, line) in file.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let rec: Line = serde_json::from_str(&line).map_err(|e| {
                Error::InvalidInput(format!("{} line {}: {e}", path.display(), i + 1))
            })?;
            pairs.push((rec.text, rec.v));
        }
        Self::from_pairs(pairs)
    }

    /// Number of texts with a vector.
    #[must_use]
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// True when no text has a vector.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

impl Embedder for PrecomputedEmbedder {
    fn name(&self) -> &str {
        "precomputed"
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, text: &str) -> Result<Option<Vec<f32>>> {
        let found = self
            .vectors
            .get(text)
            .or_else(|| unwrap_episode(text).and_then(|u| self.vectors.get(u)))
            .or_else(|| self.vectors.get(text.trim()));
        Ok(found.cloned())
    }
}

/// Encodes a vector as little-endian `f32`s.
#[must_use]
pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Decodes little-endian `f32`s (`None` when the length is not a multiple of 4).
#[must_use]
pub fn decode_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Dot product of `q` with a vector still in its stored bytes.
fn dot_bytes(q: &[f32], bytes: &[u8]) -> f32 {
    q.iter()
        .zip(bytes.chunks_exact(4))
        .map(|(x, c)| x * f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .sum()
}

/// Embeds `text` and normalises the vector; `None` when the embedder has none, it is
/// zero, or its length is not the embedder's dimension.
///
/// # Errors
/// The embedder's error.
pub fn embed_normalized(embedder: &dyn Embedder, text: &str) -> Result<Option<Vec<f32>>> {
    let Some(mut v) = embedder.embed(text)? else { return Ok(None) };
    if v.len() != embedder.dim() || !normalize(&mut v) {
        return Ok(None);
    }
    Ok(Some(v))
}

/// Stores (or, with `None`, deletes) the vector of `docno`.
pub(crate) fn put_vector(w: &mut Writer<'_>, docno: u64, v: Option<&[f32]>) -> Result<()> {
    match v {
        Some(v) => {
            w.embeddings.insert(docno, encode_vector(v).as_slice())?;
        }
        None => {
            w.embeddings.remove(docno)?;
        }
    }
    Ok(())
}

/// Embeds and stores the content of every entry with a docno in `docnos` (missing
/// ones are skipped).
pub(crate) fn embed_docnos(
    w: &mut Writer<'_>,
    embedder: &dyn Embedder,
    docnos: impl IntoIterator<Item = u64>,
) -> Result<u64> {
    let mut n = 0;
    for d in docnos {
        let Some(e) = w.get(d)? else { continue };
        let v = embed_normalized(embedder, &e.content)?;
        put_vector(w, d, v.as_deref())?;
        n += u64::from(v.is_some());
    }
    Ok(n)
}

/// Stored vectors up to which hybrid recall scans them all (see
/// `Settings::vector_scan_max`).
pub const VECTOR_SCAN_MAX: u64 = 100_000;

/// Number of stored vectors.
pub(crate) fn stored_count(r: &Reader) -> Result<u64> {
    Ok(match r.embeddings()? {
        Some(t) => t.len()?,
        None => 0,
    })
}

/// The stored vector of `docno`, if any.
pub(crate) fn vector_of(r: &Reader, docno: u64) -> Result<Option<Vec<f32>>> {
    let Some(t) = r.embeddings()? else { return Ok(None) };
    Ok(t.get(docno)?.and_then(|v| decode_vector(v.value())))
}

/// Every stored `(docno, vector bytes)` row, for the consistency check.
pub(crate) fn stored_docnos(r: &Reader) -> Result<Vec<(u64, usize)>> {
    let Some(t) = r.embeddings()? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for row in t.range::<u64>(..)? {
        let (k, v) = row?;
        out.push((k.value(), v.value().len()));
    }
    Ok(out)
}

/// Exact cosine scan: every stored vector of the query's dimension with similarity at
/// least [`MIN_VECTOR_SIMILARITY`], best first (ties by docno). Vectors are read in
/// batches of [`SCAN_BATCH`] and scored in parallel on the caller's rayon pool.
/// `query` must be unit length.
pub(crate) fn scan(mem: &Memory, r: &Reader, query: &[f32]) -> Result<(Vec<(u64, f32)>, u64)> {
    let Some(t) = r.embeddings()? else { return Ok((Vec::new(), 0)) };
    let want_len = query.len() * 4;
    let mut hits: Vec<(u64, f32)> = Vec::new();
    let mut batch: Vec<(u64, Vec<u8>)> = Vec::with_capacity(SCAN_BATCH);
    let mut read = 0u64;
    let score = |batch: &mut Vec<(u64, Vec<u8>)>, hits: &mut Vec<(u64, f32)>| {
        let found: Vec<(u64, f32)> = mem.install(|| {
            batch
                .par_iter()
                .filter_map(|(d, b)| {
                    let s = dot_bytes(query, b);
                    (s >= MIN_VECTOR_SIMILARITY).then_some((*d, s))
                })
                .collect()
        });
        hits.extend(found);
        batch.clear();
    };
    for row in t.range::<u64>(..)? {
        let (k, v) = row?;
        read += 1;
        let bytes = v.value();
        if bytes.len() == want_len {
            batch.push((k.value(), bytes.to_vec()));
        }
        if batch.len() >= SCAN_BATCH {
            score(&mut batch, &mut hits);
        }
    }
    score(&mut batch, &mut hits);
    mem.install(|| hits.par_sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))));
    Ok((hits, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_is_deterministic_and_normalised() {
        let e = HashingEmbedder::new(64);
        let a = e.embed("Painting sunsets at the lake").ok().flatten().unwrap_or_default();
        let b = e.embed("painted a sunset by the lake").ok().flatten().unwrap_or_default();
        assert_eq!(a.len(), 64);
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert!(dot(&a, &b) > 0.5, "shared stems should be similar");
        assert!(matches!(e.embed("?! 42"), Ok(None)));
    }

    #[test]
    fn tfidf_weights_rare_terms() {
        let corpus = ["I like cats", "I like dogs", "I like tea", "quantum physics"];
        let e = TfIdfEmbedder::fit(128, corpus);
        let q = embed_normalized(&e, "like quantum").ok().flatten().unwrap_or_default();
        let rare = embed_normalized(&e, "quantum").ok().flatten().unwrap_or_default();
        let common = embed_normalized(&e, "like").ok().flatten().unwrap_or_default();
        assert!(dot(&q, &rare) > dot(&q, &common));
    }

    #[test]
    fn precomputed_unwraps_episodes() {
        let e = PrecomputedEmbedder::from_pairs([("Caroline: hi".to_owned(), vec![1.0, 0.0])])
            .expect("one vector");
        assert!(matches!(e.embed("User: Caroline: hi\nAgent: "), Ok(Some(_))));
        assert!(matches!(e.embed("User: Caroline: hi\nAgent: yes"), Ok(None)));
        assert!(matches!(e.embed("other"), Ok(None)));
        assert!(
            PrecomputedEmbedder::from_pairs([
                ("a".into(), vec![1.0]),
                ("b".into(), vec![1.0, 2.0])
            ])
            .is_err()
        );
    }

    #[test]
    fn vector_bytes_round_trip() {
        let v = vec![0.5_f32, -1.25, 3.0];
        assert_eq!(decode_vector(&encode_vector(&v)), Some(v));
        assert_eq!(decode_vector(&[1, 2, 3]), None);
    }
}
