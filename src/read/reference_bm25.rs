//! The reference's BM25 spreading strategy, replicated for the `reference` profile.
//!
//! soul-protocol 0.4.0 scores query relevance ("spreading activation") with a BM25
//! index that is filled lazily: a content string is indexed the first time recall
//! scores it, and never removed (QUIRKS Q23). Its IDF therefore depends on the query
//! history, and this module keeps that corpus as state ([`ReferenceBm25`]).
//!
//! Other particulars reproduced here:
//! * a document is the *set* of its synonym-expanded tokens, so every term frequency
//!   is 1 and the document length is the number of distinct expanded tokens;
//! * the query is synonym-expanded as well;
//! * the raw score is squashed with `tanh(raw / 3)`.
//!
//! The reference sums the per-term contributions while iterating a Python `set`, whose
//! order depends on string hashes. Under `PYTHONHASHSEED=0` that order is fixed, and
//! [`PyStrSet`] re-creates it (CPython 3.11's SipHash-1-3 with a zero key and its
//! open-addressing set table), so the summation order, and with it every bit of the
//! float result, matches. With another hash seed the reference's own scores would
//! differ in the last bits; tiny differences of that kind only matter for exact ties.

use std::collections::{BTreeSet, HashMap};

use crate::text::{expand_synonyms, synonyms_of, tokenize, tokenize_list};

/// BM25 term-frequency saturation (`k1`), the Okapi default the reference uses.
pub const BM25_K1: f64 = 1.2;
/// BM25 length normalisation (`b`), the Okapi default the reference uses.
pub const BM25_B: f64 = 0.75;
/// The raw BM25 score is mapped to `0..1` with `tanh(raw / BM25_SQUASH)`.
pub const BM25_SQUASH: f64 = 3.0;

/// One indexed content string.
#[derive(Debug, Clone)]
struct Doc {
    content: String,
    terms: BTreeSet<String>,
}

/// The reference's lazily built BM25 corpus (`BM25SearchStrategy` with its `BM25Index`).
#[derive(Debug, Clone, Default)]
pub struct ReferenceBm25 {
    ids: HashMap<String, usize>,
    docs: Vec<Doc>,
    doc_freq: HashMap<String, usize>,
    total_terms: usize,
}

impl ReferenceBm25 {
    /// An empty corpus.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A corpus holding `contents`, indexed in the given order (duplicates ignored).
    pub fn from_contents<I, S>(contents: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut bm = Self::new();
        for c in contents {
            bm.add(c.into());
        }
        bm
    }

    /// Number of indexed documents.
    #[must_use]
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when nothing has been indexed yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The indexed contents in indexing order (the reference's `doc_0`, `doc_1`, …).
    pub fn contents(&self) -> impl Iterator<Item = &str> {
        self.docs.iter().map(|d| d.content.as_str())
    }

    /// True when `content` is already in the corpus.
    #[must_use]
    pub fn contains(&self, content: &str) -> bool {
        self.ids.contains_key(content)
    }

    /// The reference's `avg_doc_len`: total distinct-term count over documents
    /// (0 for an empty corpus).
    #[must_use]
    pub fn avg_doc_len(&self) -> f64 {
        if self.docs.is_empty() { 0.0 } else { self.total_terms as f64 / self.docs.len() as f64 }
    }

    /// Indexes `content` unless it is already indexed; returns its document number.
    pub fn add(&mut self, content: String) -> usize {
        if let Some(&i) = self.ids.get(&content) {
            return i;
        }
        let terms = expand_synonyms(&tokenize(&content));
        for t in &terms {
            *self.doc_freq.entry(t.clone()).or_insert(0) += 1;
        }
        self.total_terms += terms.len();
        let i = self.docs.len();
        self.ids.insert(content.clone(), i);
        self.docs.push(Doc { content, terms });
        i
    }

    /// The query's synonym-expanded terms in the order the reference iterates them
    /// (see [`query_terms`]).
    #[must_use]
    pub fn query_terms(query: &str) -> Vec<String> {
        query_terms(query)
    }

    /// The reference's unsquashed `BM25Index.score` for pre-computed query terms against
    /// document number `doc` (0 when `doc` is out of range).
    #[must_use]
    pub fn raw_score(&self, query_terms: &[String], doc: usize) -> f64 {
        let Some(d) = self.docs.get(doc) else {
            return 0.0;
        };
        let dl = d.terms.len() as f64;
        let avg = self.avg_doc_len();
        let avgdl = if avg == 0.0 { 1.0 } else { avg };
        let n_docs = self.docs.len() as f64;
        let mut total = 0.0;
        for term in query_terms {
            if !d.terms.contains(term) {
                continue;
            }
            let n = self.doc_freq.get(term).copied().unwrap_or(0) as f64;
            let idf = ((n_docs - n + 0.5) / (n + 0.5) + 1.0).ln();
            // tf is always 1: numerator 1·(k1+1), denominator 1 + k1·(1 − b + b·dl/avgdl).
            let numerator = 1.0 * (BM25_K1 + 1.0);
            let denominator = 1.0 + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avgdl);
            total += idf * numerator / denominator;
        }
        total
    }

    /// `BM25SearchStrategy.score`: indexes `content` if it is new, then returns
    /// `tanh(raw / 3)` for the pre-computed `query_terms`.
    pub fn score_terms(&mut self, query_terms: &[String], content: &str) -> f64 {
        let doc = match self.ids.get(content) {
            Some(&i) => i,
            None => self.add(content.to_owned()),
        };
        (self.raw_score(query_terms, doc) / BM25_SQUASH).tanh()
    }

    /// `BM25SearchStrategy.score(query, content)`, indexing `content` if it is new.
    pub fn score(&mut self, query: &str, content: &str) -> f64 {
        let terms = query_terms(query);
        self.score_terms(&terms, content)
    }
}

/// The reference's `_expand_synonyms(tokenize(query))` as an ordered list: the set's
/// members in the order CPython 3.11 iterates them under `PYTHONHASHSEED=0`.
#[must_use]
pub fn query_terms(query: &str) -> Vec<String> {
    // tokenize(): a set comprehension over the words in order.
    let mut tokens = PyStrSet::new();
    for w in tokenize_list(query, 3) {
        tokens.add(&w);
    }
    // _expand_synonyms(): set(tokens), then `|=` each token's synonym frozenset.
    let mut expanded = PyStrSet::new();
    expanded.merge(&tokens);
    for t in tokens.iter() {
        if let Some(group) = synonyms_of(t) {
            let mut g = PyStrSet::new();
            for s in group {
                g.add(s);
            }
            expanded.merge(&g);
        }
    }
    expanded.iter().map(str::to_owned).collect()
}

// ---------------------------------------------------------------------------
// CPython 3.11 str hashing and set layout (PYTHONHASHSEED=0)
// ---------------------------------------------------------------------------

/// CPython's `hash(str)` under `PYTHONHASHSEED=0`: SipHash-1-3 with a zero key over the
/// string's internal representation (Latin-1, UCS-2 or UCS-4, little-endian).
#[must_use]
pub fn py_str_hash(s: &str) -> i64 {
    if s.is_empty() {
        return 0;
    }
    let max = s.chars().map(u32::from).max().unwrap_or(0);
    let mut bytes = Vec::with_capacity(s.len() * 2);
    for c in s.chars() {
        let c = u32::from(c);
        if max <= 0xFF {
            bytes.push(c as u8);
        } else if max <= 0xFFFF {
            bytes.extend_from_slice(&(c as u16).to_le_bytes());
        } else {
            bytes.extend_from_slice(&c.to_le_bytes());
        }
    }
    let h = siphash13_zero_key(&bytes) as i64;
    if h == -1 { -2 } else { h }
}

fn siphash13_zero_key(data: &[u8]) -> u64 {
    let mut v0: u64 = 0x736f_6d65_7073_6575;
    let mut v1: u64 = 0x646f_7261_6e64_6f6d;
    let mut v2: u64 = 0x6c79_6765_6e65_7261;
    let mut v3: u64 = 0x7465_6462_7974_6573;
    let round = |v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64| {
        *v0 = v0.wrapping_add(*v1);
        *v2 = v2.wrapping_add(*v3);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v1);
        *v0 = v0.wrapping_add(*v3);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.rotate_left(32);
    };
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(chunk);
        let m = u64::from_le_bytes(buf);
        v3 ^= m;
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        v0 ^= m;
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    let b = ((data.len() as u64) << 56) | u64::from_le_bytes(last);
    v3 ^= b;
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    v0 ^= b;
    v2 ^= 0xff;
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    (v0 ^ v1) ^ (v2 ^ v3)
}

const PY_SET_MINSIZE: usize = 8;
const PY_LINEAR_PROBES: usize = 9;
const PY_PERTURB_SHIFT: u32 = 5;

/// A set of strings laid out exactly like a CPython 3.11 `set` under
/// `PYTHONHASHSEED=0`, so that [`PyStrSet::iter`] yields the reference's iteration
/// order. Only insertion and merging are modelled (the reference never deletes from
/// the sets whose order matters).
#[derive(Debug, Clone)]
pub struct PyStrSet {
    table: Vec<Option<(i64, String)>>,
    fill: usize,
    used: usize,
}

impl Default for PyStrSet {
    fn default() -> Self {
        Self::new()
    }
}

impl PyStrSet {
    /// An empty set (an 8-slot table, like `set()`).
    #[must_use]
    pub fn new() -> Self {
        Self { table: vec![None; PY_SET_MINSIZE], fill: 0, used: 0 }
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// Number of members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.used
    }

    /// True when the set has no member.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Membership test.
    #[must_use]
    pub fn contains(&self, key: &str) -> bool {
        self.table.iter().flatten().any(|(_, k)| k == key)
    }

    /// The members in CPython's iteration order (table slot order).
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.table.iter().flatten().map(|(_, k)| k.as_str())
    }

    /// `set.add(key)`.
    pub fn add(&mut self, key: &str) {
        let hash = py_str_hash(key);
        self.add_entry(key, hash);
    }

    fn add_entry(&mut self, key: &str, hash: i64) {
        let mask = self.mask();
        let mut perturb = hash as u64;
        let mut i = (hash as u64 as usize) & mask;
        let slot = loop {
            let mut probes = if i + PY_LINEAR_PROBES <= mask { PY_LINEAR_PROBES } else { 0 };
            let mut e = i;
            let mut found = None;
            loop {
                match &self.table[e] {
                    None => {
                        found = Some(e);
                        break;
                    }
                    Some((h, k)) if *h == hash && k == key => return,
                    Some(_) => {}
                }
                e += 1;
                if probes == 0 {
                    break;
                }
                probes -= 1;
            }
            if let Some(s) = found {
                break s;
            }
            perturb >>= PY_PERTURB_SHIFT;
            i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb as usize)) & mask;
        };
        self.table[slot] = Some((hash, key.to_owned()));
        self.fill += 1;
        self.used += 1;
        if self.fill * 5 < mask * 3 {
            return;
        }
        let minused = if self.used > 50_000 { self.used * 2 } else { self.used * 4 };
        self.resize(minused);
    }

    fn insert_clean(table: &mut [Option<(i64, String)>], key: String, hash: i64) {
        let mask = table.len() - 1;
        let mut perturb = hash as u64;
        let mut i = (hash as u64 as usize) & mask;
        loop {
            if table[i].is_none() {
                table[i] = Some((hash, key));
                return;
            }
            if i + PY_LINEAR_PROBES <= mask {
                for j in 1..=PY_LINEAR_PROBES {
                    if table[i + j].is_none() {
                        table[i + j] = Some((hash, key));
                        return;
                    }
                }
            }
            perturb >>= PY_PERTURB_SHIFT;
            i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb as usize)) & mask;
        }
    }

    fn resize(&mut self, minused: usize) {
        let mut size = PY_SET_MINSIZE;
        while size <= minused {
            size <<= 1;
        }
        let old = std::mem::replace(&mut self.table, vec![None; size]);
        for (hash, key) in old.into_iter().flatten() {
            Self::insert_clean(&mut self.table, key, hash);
        }
        self.fill = self.used;
    }

    /// `self |= other` / `set(other)` (CPython's `set_merge`).
    pub fn merge(&mut self, other: &PyStrSet) {
        if other.used == 0 {
            return;
        }
        if (self.fill + other.used) * 5 >= self.mask() * 3 {
            self.resize((self.used + other.used) * 2);
        }
        if self.fill == 0 && self.mask() == other.mask() && other.fill == other.used {
            self.table.clone_from(&other.table);
            self.fill = other.fill;
            self.used = other.used;
            return;
        }
        if self.fill == 0 {
            self.fill = other.used;
            self.used = other.used;
            for (hash, key) in other.table.iter().flatten() {
                Self::insert_clean(&mut self.table, key.clone(), *hash);
            }
            return;
        }
        for (hash, key) in other.table.iter().flatten() {
            self.add_entry(key, *hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_cpython_seed_zero() {
        // Values printed by `PYTHONHASHSEED=0 python3.11 -c 'print(hash(...))'`.
        assert_eq!(py_str_hash(""), 0);
        assert_eq!(py_str_hash("user"), USER_HASH);
    }

    const USER_HASH: i64 = -2_469_935_622_859_377_300;

    #[test]
    fn bm25_scores_sets_and_squashes() {
        let mut bm = ReferenceBm25::new();
        let a = bm.score("python", "I use Python every day");
        assert!(a > 0.0 && a < 1.0);
        assert_eq!(bm.len(), 1);
        assert_eq!(bm.score("python", "nothing here"), 0.0);
        assert_eq!(bm.len(), 2);
    }
}
