//! The default profile's recall: index-driven candidates, graph expansion, parallel
//! activation ranking, filters, access updates and a trace.

use std::collections::BTreeSet;

use rayon::prelude::*;

use super::activation::{
    W_BASE, W_EMOTION, W_SPREAD, decay_term, emotion_of, salience_boost, significance_boost,
};
use super::candidates::{self, Candidate, Term};
use super::filters;
use super::query::{Recall, RecallQuery, RecallTrace, ScoreParts, TraceEntry};
use super::vector::{self, HybridFusion};
use crate::error::Result;
use crate::memory::Memory;
use crate::model::{MemoryEntry, time};
use crate::storage::bitmap::Hidden;
use crate::storage::{DocInfo, Reader};
use crate::text::{index_terms, is_stop_word, stem, synonyms_of, tokenize_list};

/// Query-side weight of a synonym expansion.
pub const SYNONYM_WEIGHT: f64 = 0.4;
/// Related entities followed per query.
pub const MAX_GRAPH_TERMS: usize = 8;

/// Pools at least this large are ranked in parallel: below it, handing the work to
/// the thread pool (and waking its threads) costs more than scoring in place.
const PARALLEL_RANKING: usize = 256;

/// A `user_id`-filtered recall scores the memories the user may be shown from
/// their own terms (`storage::doc_terms`) when there are at most
/// [`listed_max`] of them; past it, reading their rows costs more than the
/// postings search beside their owner terms' member sets (measured with the
/// owner terms' postings walked instead, before session 26).
///
/// Measured on the synthetic 1M store (a user there has ~1,000 memories): the
/// rows of 1,000 memories load in ~0.11 ms and score in ~0.13 ms, the postings
/// search took ~0.6 ms. The rows cost about linearly in their number, the
/// postings search far less than linearly in the store's size, hence a bound
/// that grows with the store: a 64th of it, from 256 to [`LISTED_CEILING`]
/// memories.
#[must_use]
pub fn listed_max(docs: u64) -> usize {
    usize::try_from(docs / 64).unwrap_or(usize::MAX).clamp(256, LISTED_CEILING)
}

/// The most memories [`listed_max`] ever allows: an owner holding more is never
/// scored from its rows, whatever the store's size (so the store drops them past
/// `storage::doc_terms::ROW_CAP`).
pub const LISTED_CEILING: usize = 2_048;

/// Where the text candidates of a recall filtered by a user come from: the
/// memories the user may be shown (theirs and the unattributed ones).
enum UserSearch {
    /// At most [`listed_max`] of them: scored from their terms rows.
    Rows(candidates::Listed),
    /// More: the postings searched beside their owner terms' member sets
    /// ([`filters::OwnerMembers`]), so blocks holding none of them are skipped
    /// and no other memory's record is read.
    Beside,
    /// At least half the store ([`filters::holds_most`]): the postings searched
    /// as unfiltered, the filter checked on the memories that place.
    Unwalked,
}

impl Memory {
    /// How a recall filtered by `user` finds its text candidates in `r`. An owner
    /// found too large for the rows is noted with whether it holds most of the
    /// store, so its later recalls decide without reading.
    fn user_search(&self, r: &Reader, user: &str) -> Result<UserSearch> {
        let docs = r.stats().docs;
        let dense = match self.store.large_owner(user, docs) {
            Some(dense) => dense,
            None => match candidates::Listed::load(r, &filters::owners(user), listed_max(docs))? {
                Some(rows) => return Ok(UserSearch::Rows(rows)),
                None => {
                    let dense = filters::holds_most(r, user)?;
                    self.store.note_large_owner(user, docs, dense);
                    dense
                }
            },
        };
        Ok(if dense { UserSearch::Unwalked } else { UserSearch::Beside })
    }

    /// The walk of `q`'s `scopes` filter in `r` ([`filters::ScopeMembers::of`]),
    /// whose verdict (whether the filter keeps few memories) is noted per filter,
    /// so that its later recalls decide without the sample's records until the
    /// store's size has changed by more than an eighth.
    fn scope_walk<'r>(
        &self,
        r: &'r Reader,
        q: &RecallQuery,
    ) -> Result<Option<filters::ScopeMembers<'r>>> {
        let Some(allowed) = q.scopes.as_deref() else { return Ok(None) };
        let key = allowed.join("\u{1f}");
        let docs = r.stats().docs;
        let known = self.store.scope_walk(&key, docs);
        let (walk, few) = filters::ScopeMembers::of(r, q, known)?;
        if let (None, Some(few)) = (known, few) {
            self.store.note_scope_walk(&key, docs, few);
        }
        Ok(walk)
    }
}

/// What a recall's text search leaves out before reading records: superseded
/// memories (unless asked for), withheld ones (core and archived), restricted
/// ones (not public) when the requester may see none of them, those outside
/// the `domain` filter, and those outside the layers of a `layer` or `types`
/// filter that keeps only layers with a bitmap.
struct Skipped<'r> {
    /// The bitmaps whose memories the query turns away.
    hidden: Vec<Hidden<'r, redb::ReadOnlyTable<u64, &'static [u8]>>>,
    /// The bitmaps of the layers the query keeps (none: every layer).
    kept: Vec<Hidden<'r, redb::ReadOnlyTable<u64, &'static [u8]>>>,
    domain: Option<filters::DomainMembers>,
    /// No filter of the query turns away a memory these skips pass
    /// ([`candidates::Skip::decides`]).
    decides: bool,
}

impl candidates::Skip for Skipped<'_> {
    fn skips(&mut self, docno: u64) -> Result<bool> {
        if self.domain.as_ref().is_some_and(|m| !m.contains(docno)) {
            return Ok(true);
        }
        if !self.kept.is_empty() {
            let mut kept = false;
            for bits in &mut self.kept {
                if bits.contains(docno)? {
                    kept = true;
                    break;
                }
            }
            if !kept {
                return Ok(true);
            }
        }
        for bits in &mut self.hidden {
            if bits.contains(docno)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn decides(&self) -> bool {
        self.decides
    }
}

/// Whether a recall for `q` can turn away only memories its text search skips
/// before reading them (superseded, withheld, restricted ones when
/// `restricted_skipped`, outside its domain) or never meets (another user's,
/// when `by_user` searches only the user's memories, or of another layer, when
/// `layers_kept`: the search walks the filter's layers or skips the others on
/// bits, or less important, when `importance_walked`, or outside the scopes,
/// when `scopes_walked`): no layer or type filter unless its layers are kept
/// so, no importance or scope filter unless walked, and a requester who sees
/// every visibility (the soul itself) or none but public. Not for an explained
/// recall, which skips nothing.
fn skips_decide(
    q: &RecallQuery,
    by_user: Option<&UserSearch>,
    restricted_skipped: bool,
    layers_kept: bool,
    importance_walked: bool,
    scopes_walked: bool,
) -> bool {
    !q.explain
        && (layers_kept || (q.layer.is_none() && q.types.is_none()))
        && (importance_walked || q.min_importance <= 0)
        && (q.requester_id.is_none() || restricted_skipped)
        && (scopes_walked || q.scopes.is_none())
        && match (&q.user_id, by_user) {
            (None, _) => true,
            (Some(_), Some(UserSearch::Rows(_) | UserSearch::Beside)) => true,
            (Some(_), _) => false,
        }
}

/// Query terms for the default profile: tokens minus stop-words, stemmed, plus
/// their synonyms at a lower weight.
#[must_use]
pub fn query_terms(query: &str) -> Vec<Term> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for t in tokenize_list(query, 3) {
        if is_stop_word(&t) || !seen.insert(t.clone()) {
            continue;
        }
        if let Some(group) = synonyms_of(&t) {
            for s in group.iter().filter(|s| **s != t) {
                out.push(Term { token: stem(s), weight: SYNONYM_WEIGHT });
            }
        }
        out.push(Term { token: stem(&t), weight: 1.0 });
    }
    out
}

/// ACT-R base level: `ln Σ t^-d` over access times (seconds ago, at least 1), with
/// the creation time counted as the first access.
#[must_use]
pub fn base_level(info: &DocInfo, now_us: i64) -> f64 {
    let mut total = 0.0;
    let mut add = |t: i64| {
        total += decay_term((now_us - t) as f64 / 1e6);
    };
    if info.access.first() != Some(&info.created_at) {
        add(info.created_at);
    }
    for &t in &info.access {
        add(t);
    }
    if total > 0.0 { total.ln() } else { 0.0 }
}

/// Emotional boost: arousal plus 0.3·|valence|, capped at 1.
#[must_use]
pub fn emotional_boost(somatic: Option<(f64, f64)>) -> f64 {
    somatic.map_or(0.0, |(valence, arousal)| emotion_of(valence, arousal))
}

/// ACT-R retrieval threshold τ of the default profile: the activation of a memory
/// met once about two days ago.
pub const RETRIEVAL_THRESHOLD: f64 = -6.0;
/// ACT-R activation noise `s` of the retrieval probability.
pub const RETRIEVAL_NOISE: f64 = 1.0;
/// Weight of the retrieval probability in the default profile's total.
pub const W_RETRIEVAL: f64 = 0.5;

/// ACT-R's retrieval probability `1 / (1 + e^(-(A - τ)/s))` of a base level `A`.
#[must_use]
pub fn retrieval_probability(base: f64) -> f64 {
    1.0 / (1.0 + (-(base - RETRIEVAL_THRESHOLD) / RETRIEVAL_NOISE).exp())
}

/// Scores one candidate. `spread` is its normalised text relevance in 0..=1.
///
/// The default profile keeps the reference's terms and weights but lets the ACT-R
/// base level in through the retrieval probability (0..=1, weighted
/// [`W_RETRIEVAL`]): recency and frequency order memories of similar relevance but
/// cannot override relevance. In the reference the raw base level is unbounded
/// upwards (a memory returned a second ago scores about 8 above one from last
/// month), which makes recall rank by the order questions were asked.
#[must_use]
pub fn activation(info: &DocInfo, spread: f64, now_us: i64) -> ScoreParts {
    let base = W_RETRIEVAL * retrieval_probability(base_level(info, now_us)) / W_BASE;
    let emotion = emotional_boost(info.somatic);
    let significance = significance_boost(info.significance);
    let salience = salience_boost(info.salience);
    let total = W_BASE * base + W_SPREAD * spread + W_EMOTION * emotion + significance + salience;
    ScoreParts {
        base,
        spread,
        emotion,
        significance,
        salience,
        personality: 0.0,
        vector: 0.0,
        total,
    }
}

struct Pooled {
    cand: Candidate,
    source: String,
    /// Cosine similarity to the query (hybrid recall, when both have a vector).
    cos: Option<f32>,
}

/// Graph nodes named in the query (whole words, one to three words long), without
/// the `user` hub every first-person fact hangs off.
fn query_entities(r: &Reader, query: &str) -> Result<Vec<String>> {
    let words: Vec<String> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-' || c == '+' || c == '#'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut out = Vec::new();
    for n in (1..=3).rev() {
        for win in words.windows(n) {
            let name = win.join(" ");
            if name == "user" || (n == 1 && (is_stop_word(&name) || name.len() < 2)) {
                continue;
            }
            if !out.contains(&name) && r.graph_has_node(&name)? {
                out.push(name);
            }
        }
    }
    Ok(out)
}

/// Reciprocal-rank constant of [`HybridFusion::Rrf`] (the customary 60).
const RRF_K: f64 = 60.0;

/// How a pool's text relevance is scaled and, for [`HybridFusion::MinMax`], fused
/// with vector similarity.
struct Fusion {
    kind: HybridFusion,
    lambda: f64,
    max_bm25: f64,
    min_cos: f64,
    max_cos: f64,
}

impl Fusion {
    fn new(pool: &[Pooled], kind: HybridFusion, lambda: f64) -> Self {
        let max_bm25 = pool.iter().map(|p| p.cand.bm25).fold(0.0_f64, f64::max);
        let cos: Vec<f64> = pool.iter().filter_map(|p| p.cos).map(f64::from).collect();
        let max_cos = cos.iter().copied().fold(0.0_f64, f64::max);
        let min_cos = cos.iter().copied().fold(max_cos, f64::min);
        Self { kind, lambda, max_bm25, min_cos, max_cos }
    }

    /// Relevance of a candidate in 0..=1: BM25 over the pool's best, fused with its
    /// min-max scaled similarity under [`HybridFusion::MinMax`] when it has a vector;
    /// graph-only candidates get at least a fixed share.
    fn spread(&self, p: &Pooled) -> f64 {
        let text = if self.max_bm25 > 0.0 { p.cand.bm25 / self.max_bm25 } else { 0.0 };
        let l = self.lambda;
        let spread = match (p.cos.map(f64::from), self.kind) {
            (Some(c), HybridFusion::MinMax) if self.max_cos > self.min_cos => {
                (1.0 - l) * text + l * (c - self.min_cos) / (self.max_cos - self.min_cos)
            }
            _ => text,
        };
        if p.source.starts_with("graph:") { spread.max(0.25) } else { spread }
    }

    fn score(&self, p: &Pooled, now_us: i64) -> ScoreParts {
        let mut parts = activation(&p.cand.info, self.spread(p), now_us);
        parts.vector = p.cos.map_or(0.0, f64::from);
        parts
    }
}

/// Reorders `scored` (sorted by activation, best first) by reciprocal rank fusion
/// with the vector ranking of the same pool: `(1-λ)/(k + activation rank) +
/// λ/(k + similarity rank)`, a candidate without a vector getting only the first
/// part. Ties keep the activation order.
fn rank_fuse(scored: &mut Vec<(ScoreParts, usize)>, pool: &[Pooled], lambda: f64) {
    let mut by_cos: Vec<(f32, usize)> = scored
        .iter()
        .enumerate()
        .filter_map(|(pos, (_, i))| pool[*i].cos.map(|c| (c, pos)))
        .collect();
    by_cos.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut fused: Vec<f64> =
        (0..scored.len()).map(|pos| (1.0 - lambda) / (RRF_K + pos as f64 + 1.0)).collect();
    for (rank, (_, pos)) in by_cos.into_iter().enumerate() {
        fused[pos] += lambda / (RRF_K + rank as f64 + 1.0);
    }
    let mut order: Vec<usize> = (0..scored.len()).collect();
    order.sort_by(|a, b| fused[*b].total_cmp(&fused[*a]).then(a.cmp(b)));
    let old = std::mem::take(scored);
    let mut slots: Vec<Option<(ScoreParts, usize)>> = old.into_iter().map(Some).collect();
    scored.extend(order.into_iter().filter_map(|pos| slots[pos].take()));
}

/// Which query terms (the trace's, with their IDF) a memory matches in its own
/// content, and which only in the conversation context it was indexed with.
fn matched_terms(
    r: &Reader,
    docno: u64,
    content: &str,
    query: &[(String, f64)],
) -> Result<(Vec<String>, Vec<String>)> {
    let own: BTreeSet<String> = index_terms(content).into_iter().collect();
    let context: BTreeSet<String> = match r.context()?.get(docno)? {
        Some(c) => index_terms(c.value()).into_iter().collect(),
        None => BTreeSet::new(),
    };
    let terms = query.iter().map(|(t, _)| t);
    let in_content: Vec<String> = terms.clone().filter(|t| own.contains(*t)).cloned().collect();
    let in_context: Vec<String> =
        terms.filter(|t| !own.contains(*t) && context.contains(*t)).cloned().collect();
    Ok((in_content, in_context))
}

impl Memory {
    pub(crate) fn recall_default(&self, q: &RecallQuery) -> Result<Recall> {
        self.recall_default_with(q, true)
    }

    /// The default recall; `touch` records the access on the returned memories (smart
    /// recall touches only the ones it keeps).
    pub(crate) fn recall_default_with(&self, q: &RecallQuery, touch: bool) -> Result<Recall> {
        let now = self.now();
        let now_us = time::to_micros(&now);
        let threshold = self.settings.bond_threshold;
        let r = self.read()?;
        let mut trace = RecallTrace { profile: "default".into(), ..RecallTrace::default() };
        let terms = query_terms(&q.query);
        let stats = candidates::term_stats(&r, &terms)?;
        trace.terms = stats.iter().map(|s| (s.token.clone(), s.idf)).collect();
        let want = if q.progressive { q.limit.saturating_mul(2) } else { q.limit };
        let pool_size = want.saturating_mul(2).max(20);
        let mut dropped: Vec<TraceEntry> = Vec::new();
        let stage = std::cell::Cell::new("text");
        let mut accept = |_: u64, info: &DocInfo| match filters::rejects(q, info, threshold) {
            None => true,
            Some(why) => {
                if q.explain {
                    dropped.push(TraceEntry {
                        id: info.id.clone(),
                        layer: info.layer.clone(),
                        source: stage.get().into(),
                        bm25: 0.0,
                        dropped_by: Some(why.to_owned()),
                        score: None,
                        rank: None,
                        content_terms: Vec::new(),
                        context_terms: Vec::new(),
                    });
                }
                false
            }
        };
        // With a user filter, text candidates come from the memories the user
        // may be shown alone (`UserSearch`).
        let by_user = match q.user_id.as_deref() {
            Some(u) => Some((u, self.user_search(&r, u)?)),
            None => None,
        };
        let listed = match &by_user {
            Some((_, UserSearch::Rows(l))) => Some(l),
            _ => None,
        };
        let mut users = match &by_user {
            Some((u, UserSearch::Beside)) => {
                Some(filters::OwnerMembers::load(&r, &filters::owners(u))?)
            }
            _ => None,
        };
        // Superseded, withheld and (for a requester who may see none of them)
        // restricted memories, and those of other domains, which the filter
        // would turn away, are skipped without reading their records; an
        // explained recall reads them, so that its trace says why each was
        // dropped.
        let domain = match q.domain.as_deref() {
            Some(d) if !q.explain => filters::DomainMembers::load(&r, d)?,
            _ => None,
        };
        // A requester who may see no bonded memory sees no private one either:
        // every restricted memory is turned away.
        let none_restricted = q.requester_id.is_some()
            && !filters::visible_to(
                crate::model::Visibility::Bonded,
                q.requester_id.as_deref(),
                q.bond_strength,
                threshold,
            );
        let mut hidden = Vec::new();
        if !q.explain {
            hidden.push(Hidden::new(r.withheld()?));
            if !q.include_superseded {
                hidden.push(Hidden::new(r.superseded()?));
            }
            if none_restricted {
                hidden.push(Hidden::new(r.restricted()?));
            }
        }
        // A layer or types filter walks its layers' members beside the postings,
        // so the search meets no memory of another layer (not in an explained
        // recall, whose trace says why each memory was dropped, nor over a user's
        // listed memories, which are few).
        let walks = listed.is_none() && !q.explain;
        let mut layers = if walks { filters::LayerMembers::of(&r, q)? } else { None };
        // A `min_importance` of 6 or more walks its bitmap likewise, and a
        // `scopes` filter keeping few memories its scopes' rows.
        let mut important = if walks { filters::Important::of(&r, q)? } else { None };
        let mut scoped = if walks { self.scope_walk(&r, q)? } else { None };
        // Layers too large to walk are kept on their bitmaps, when they all
        // have one.
        let mut kept = Vec::new();
        if !q.explain && layers.is_none() {
            for layer in filters::kept_layers(q) {
                match r.layer_bits(layer)? {
                    Some(bits) => kept.push(Hidden::new(bits)),
                    None => {
                        kept.clear();
                        break;
                    }
                }
            }
        }
        let mut skipped = Skipped {
            decides: skips_decide(
                q,
                by_user.as_ref().map(|(_, s)| s),
                none_restricted,
                layers.is_some() || !kept.is_empty(),
                important.is_some(),
                scoped.is_some(),
            ) && (q.domain.is_none() || domain.is_some()),
            hidden,
            kept,
            domain,
        };
        let mut text_top_k = |stats: &[candidates::TermStat],
                              k: usize,
                              accept: &mut dyn FnMut(u64, &DocInfo) -> bool|
         -> Result<(Vec<Candidate>, u64)> {
            let skip = (!skipped.hidden.is_empty()
                || !skipped.kept.is_empty()
                || skipped.domain.is_some())
            .then_some(&mut skipped as &mut dyn candidates::Skip);
            let mut allows: Vec<&mut dyn candidates::Allow> = Vec::new();
            if let Some(u) = &mut users {
                allows.push(u);
            }
            if let Some(l) = &mut layers {
                allows.push(l);
            }
            if let Some(i) = &mut important {
                allows.push(i);
            }
            if let Some(s) = &mut scoped {
                allows.push(s);
            }
            let mut all;
            let allow: Option<&mut dyn candidates::Allow> = match allows.len() {
                0 | 1 => allows.pop(),
                _ => {
                    all = candidates::Meet(allows);
                    Some(&mut all)
                }
            };
            match listed {
                Some(l) => candidates::top_k_listed(&r, stats, k, l, skip, accept),
                None => candidates::top_k(&r, stats, k, allow, skip, accept),
            }
        };
        let (text, read) = text_top_k(&stats, pool_size, &mut accept)?;
        trace.postings_read += read;
        let mut pool: Vec<Pooled> = text
            .into_iter()
            .map(|c| Pooled { cand: c, source: "text".into(), cos: None })
            .collect();
        let mut in_pool: foldhash::HashMap<u64, usize> =
            pool.iter().enumerate().map(|(i, p)| (p.cand.docno, i)).collect();

        // Vector candidates: the most similar stored vectors that pass the filters.
        let qvec = match (&self.embedder, q.hybrid) {
            (Some(emb), true) => vector::embed_normalized(emb.as_ref(), &q.query)?,
            _ => None,
        };
        // (Above `vector_scan_max` stored vectors the scan is skipped: similarity is
        // then fused into the text and graph pool only, below.)
        let scan = qvec.is_some() && vector::stored_count(&r)? <= self.settings.vector_scan_max;
        if let (Some(qv), true) = (&qvec, scan) {
            stage.set("vector");
            let (hits, read) = vector::scan(self, &r, qv)?;
            trace.vectors_read += read;
            let wanted = self.settings.vector_candidates.max(want);
            let mut taken = 0;
            for (docno, cos) in hits {
                if taken >= wanted {
                    break;
                }
                if let Some(&i) = in_pool.get(&docno) {
                    pool[i].cos = Some(cos);
                    taken += 1;
                    continue;
                }
                let Some(info) = r.docinfo(docno)? else { continue };
                if !accept(docno, &info) {
                    continue;
                }
                taken += 1;
                in_pool.insert(docno, pool.len());
                pool.push(Pooled {
                    cand: Candidate { docno, bm25: 0.0, info },
                    source: "vector".into(),
                    cos: Some(cos),
                });
            }
        }
        stage.set("graph");

        // Graph expansion: memories about entities related to the ones named,
        // the first MAX_GRAPH_TERMS found by following the named entities' edges
        // in order (a name repeated next to itself counts once). Edges are read
        // only until that many are found: a node of many edges costs no more.
        let named = query_entities(&r, &q.query)?;
        let mut related: Vec<String> = Vec::new();
        for name in &named {
            let mut rel: Vec<String> = Vec::new();
            if related.len() < MAX_GRAPH_TERMS {
                r.graph_edges_of_while(name, |e| {
                    if e.is_active() {
                        for other in [&e.source, &e.target] {
                            let lo = other.to_lowercase();
                            if lo != *name && lo != "user" && !rel.contains(&lo) {
                                if related.last() != Some(&lo) {
                                    related.push(lo.clone());
                                }
                                rel.push(lo);
                                if related.len() == MAX_GRAPH_TERMS {
                                    return false;
                                }
                            }
                        }
                    }
                    true
                })?;
            }
            trace.graph.push((name.clone(), rel));
        }
        for ent in &related {
            let ent_terms: Vec<Term> =
                index_terms(ent).into_iter().map(|token| Term { token, weight: 0.5 }).collect();
            let ent_stats = candidates::term_stats(&r, &ent_terms)?;
            let (found, read) = text_top_k(&ent_stats, q.limit, &mut accept)?;
            trace.postings_read += read;
            let mut tagged: Vec<Candidate> = found;
            for row in
                r.entities()?.range((ent.as_str(), 0u64)..=(ent.as_str(), u64::MAX))?.take(q.limit)
            {
                let docno = row?.0.value().1;
                if let Some(info) = r.docinfo(docno)?
                    && accept(docno, &info)
                {
                    tagged.push(Candidate { docno, bm25: 0.0, info });
                }
            }
            for c in tagged {
                if let Some(&i) = in_pool.get(&c.docno) {
                    pool[i].cand.bm25 = pool[i].cand.bm25.max(c.bm25);
                    continue;
                }
                in_pool.insert(c.docno, pool.len());
                pool.push(Pooled { cand: c, source: format!("graph:{ent}"), cos: None });
            }
        }

        // Candidates the vector scan did not reach: their own similarity.
        if let Some(qv) = &qvec {
            for p in pool.iter_mut().filter(|p| p.cos.is_none()) {
                p.cos = vector::vector_of(&r, p.cand.docno)?
                    .filter(|v| v.len() == qv.len())
                    .map(|v| vector::dot(qv, &v));
            }
        }

        // Rank (in parallel on soulmem's pool when the pool is large); ties go to the
        // older memory (lower docno), so the same history ranks the same way in every
        // store and replay (ids are random).
        let fusion = Fusion::new(
            &pool,
            self.settings.hybrid_fusion,
            self.settings.hybrid_weight.clamp(0.0, 1.0),
        );
        let mut scored = self.rank(&pool, &fusion, now_us, pool.len() >= PARALLEL_RANKING);
        if qvec.is_some() && fusion.kind == HybridFusion::Rrf {
            rank_fuse(&mut scored, &pool, fusion.lambda);
        }
        scored.truncate(want);

        // Load the winners, then record the access.
        let mut out = Recall::default();
        let mut touched: Vec<u64> = Vec::new();
        for (rank, (parts, i)) in scored.iter().enumerate() {
            let p = &pool[*i];
            let Some(mut entry) = r.entry_of(&p.cand.info, p.cand.docno)? else {
                continue;
            };
            if rank >= q.limit {
                if let Some(a) = entry.r#abstract.clone() {
                    entry.content = a;
                    entry.is_summarized = true;
                }
            } else {
                touched.push(p.cand.docno);
            }
            let (content_terms, context_terms) = if q.explain {
                matched_terms(&r, p.cand.docno, &entry.content, &trace.terms)?
            } else {
                (Vec::new(), Vec::new())
            };
            out.scores.push(parts.total);
            out.memories.push(entry);
            trace.candidates.push(TraceEntry {
                id: p.cand.info.id.clone(),
                layer: p.cand.info.layer.clone(),
                source: p.source.clone(),
                bm25: p.cand.bm25,
                dropped_by: None,
                score: Some(parts.clone()),
                rank: Some(rank),
                content_terms,
                context_terms,
            });
        }
        if q.explain {
            let returned: BTreeSet<usize> = scored.iter().map(|s| s.1).collect();
            for (i, p) in pool.iter().enumerate() {
                if !returned.contains(&i) {
                    let content = r
                        .entry_of(&p.cand.info, p.cand.docno)?
                        .map(|e| e.content)
                        .unwrap_or_default();
                    let (content_terms, context_terms) =
                        matched_terms(&r, p.cand.docno, &content, &trace.terms)?;
                    trace.candidates.push(TraceEntry {
                        id: p.cand.info.id.clone(),
                        layer: p.cand.info.layer.clone(),
                        source: p.source.clone(),
                        bm25: p.cand.bm25,
                        dropped_by: Some("rank".into()),
                        score: Some(fusion.score(p, now_us)),
                        rank: None,
                        content_terms,
                        context_terms,
                    });
                }
            }
            trace.candidates.extend(dropped);
        }
        let epoch = r.access_epoch();
        // (The filter's cursors borrow the snapshot.)
        drop(users);
        drop(r);
        out.trace = trace;
        if touch {
            self.touch(&touched, now, epoch)?;
            for m in out.memories.iter_mut().take(q.limit) {
                m.record_access(now, self.settings.access_history_cap);
            }
        }
        Ok(out)
    }

    /// Scores every pooled memory, best first (exact ties: lower docno first), in
    /// parallel on soulmem's pool or in place.
    fn rank(
        &self,
        pool: &[Pooled],
        fusion: &Fusion,
        now_us: i64,
        parallel: bool,
    ) -> Vec<(ScoreParts, usize)> {
        let score = |(i, p): (usize, &Pooled)| (fusion.score(p, now_us), i);
        let mut scored: Vec<(ScoreParts, usize)> = if parallel {
            self.install(|| pool.par_iter().enumerate().map(score).collect())
        } else {
            pool.iter().enumerate().map(score).collect()
        };
        scored.sort_by(|a, b| {
            b.0.total
                .total_cmp(&a.0.total)
                .then_with(|| pool[a.1].cand.docno.cmp(&pool[b.1].cand.docno))
        });
        scored
    }

    /// Records an access at `now` on each memory (bounded history), as read by a
    /// snapshot of access epoch `epoch` ([`crate::storage::Reader::access_epoch`]).
    /// Reads see the records at once; when more than
    /// [`crate::storage::ACCESS_FLUSH_AT`] are pending, a thread of their own writes
    /// the oldest (see [`Memory::write_access_in_background`]); closing the store
    /// writes the rest.
    pub(crate) fn touch(
        &self,
        docnos: &[u64],
        now: crate::model::Timestamp,
        epoch: u64,
    ) -> Result<()> {
        if docnos.is_empty() {
            return Ok(());
        }
        if self.store.record_access(docnos, now, epoch) > crate::storage::ACCESS_FLUSH_AT {
            self.write_access_in_background();
        }
        Ok(())
    }
}

/// Appends an access at `now`, keeping the last `cap` timestamps: the same as
/// [`MemoryEntry::record_access`], kept for callers of earlier versions.
pub fn bump_access(e: &mut MemoryEntry, now: crate::model::Timestamp, cap: usize) {
    e.record_access(now, cap);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MemoryEntry, MemoryType};
    use crate::read::RecallQuery;

    /// A `scopes` filter's verdict (whether it keeps few memories, so that its
    /// members are walked) is noted at its first recall and used by the next
    /// ones while the store's size stays within an eighth of what it was; a
    /// recall finds the same memories whichever the verdict.
    #[test]
    fn a_scope_filters_verdict_is_noted_until_the_store_grows() {
        let mem = Memory::open_in_memory().expect("store");
        let entry = |i: usize, project: usize| {
            let mut e = MemoryEntry::new(MemoryType::Episodic, format!("tea memory {i}"));
            e.scope = vec![format!("p{project}")];
            e
        };
        mem.add_batch((0..400).map(|i| entry(i, i % 40)).collect()).expect("add");
        let key = "p3";
        let found = || {
            let mut q = RecallQuery::new("tea");
            q.scopes = Some(vec![key.to_owned()]);
            q.limit = 8;
            let got = mem.recall(&q).expect("recall").memories;
            assert!(got.iter().all(|m| m.scope == [key]), "another project's memory");
            got.len()
        };
        let docs = || mem.count().expect("count");
        assert_eq!(found(), 8);
        assert_eq!(mem.store.scope_walk(key, docs()), Some(true), "a fortieth of the store");
        // A verdict noted otherwise stands while the store grows by an eighth at most.
        mem.store.note_scope_walk(key, docs(), false);
        mem.add_batch((400..450).map(|i| entry(i, 7)).collect()).expect("add");
        assert_eq!(found(), 8);
        assert_eq!(mem.store.scope_walk(key, docs()), Some(false), "sampled again");
        mem.add_batch((450..460).map(|i| entry(i, 7)).collect()).expect("add");
        assert_eq!(mem.store.scope_walk(key, docs()), None, "more than an eighth");
        assert_eq!(found(), 8);
        assert_eq!(mem.store.scope_walk(key, docs()), Some(true), "sampled again");
    }

    /// A filtered recall scores a small owner's memories from their rows, a large
    /// owner's from the postings beside their owner terms' member sets, and those of
    /// an owner holding most of the store from the postings alone; each finds only what
    /// the user may be shown. Large owners are noted so later recalls skip the
    /// rows, small ones are not.
    #[test]
    fn large_owners_are_searched_in_the_postings() {
        let mem = Memory::open_in_memory().expect("open");
        let entry = |i: usize, user: Option<&str>| {
            let mut e =
                MemoryEntry::new(MemoryType::Semantic, format!("user likes tea number {i}"));
            e.user_id = user.map(str::to_owned);
            e
        };
        // "big" holds a fifth of the store, "huge" over three quarters, and the
        // unattributed memories a fiftieth (shown to every user).
        let big = listed_max(0) + 1;
        let mut entries: Vec<MemoryEntry> = Vec::new();
        for i in 0..10 * big {
            let who = match i % 10 {
                _ if i % 50 == 2 => None,
                0 | 1 => Some("big"),
                9 if i < 50 => Some("small"),
                _ => Some("huge"),
            };
            entries.push(entry(i, who));
        }
        mem.add_batch(entries).expect("add");
        let found = |user: &str| {
            let mut q = RecallQuery::new("tea");
            q.user_id = Some(user.to_owned());
            q.limit = 5;
            let got = mem.recall(&q).expect("recall").memories;
            assert!(
                got.iter().all(|m| m.user_id.as_deref().is_none_or(|u| u == user)),
                "{user} was shown another user's memory"
            );
            got.len()
        };
        let docs = mem.count().expect("count");
        assert_eq!(found("small"), 5);
        assert_eq!(mem.store.large_owner("small", docs), None);
        assert_eq!(found("big"), 5);
        assert_eq!(mem.store.large_owner("big", docs), Some(false), "big is walked");
        assert_eq!(found("big"), 5, "again, from the postings alone");
        assert_eq!(found("huge"), 5);
        assert_eq!(mem.store.large_owner("huge", docs), Some(true), "huge is not walked");
        assert_eq!(found("huge"), 5);
        assert_eq!(
            mem.store.large_owner("big", 2 * docs + 1),
            None,
            "a store twice as large tries again"
        );
    }

    /// A named entity expands to the first `MAX_GRAPH_TERMS` entities its active
    /// edges reach, in the edges' order (a name repeated next to itself counts
    /// once, across named entities too); its later edges, and the entities named
    /// after those are found, are not followed.
    #[test]
    fn graph_expansion_follows_the_first_related_entities() {
        use crate::storage::graph::EdgeRecord;
        const WORDS: [&str; 12] = [
            "amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "maple",
            "nectar", "pearl", "quartz",
        ];
        let expand = |kim_to_nectar: bool| {
            let mem = Memory::open_in_memory().expect("open");
            let edge = |source: &str, target: &str, expired: bool| EdgeRecord {
                source: source.into(),
                target: target.into(),
                relation: "knows".into(),
                valid_from: 0,
                valid_to: expired.then_some(1),
                metadata: None,
            };
            mem.write(|w| {
                // An expired edge (to "fjord", which stays out) and the user are
                // skipped.
                w.graph_push_edge(&edge("Kim", "Fjord", true))?;
                w.graph_push_edge(&edge("Kim", "user", false))?;
                for name in ["Cedar", "Amber", "Birch", "Delta", "Ember", "Grove", "Heron"] {
                    w.graph_push_edge(&edge("Kim", name, false))?;
                }
                for name in ["Heron", "Maple", "Pearl", "Quartz"] {
                    w.graph_push_edge(&edge("Lou", name, false))?;
                }
                if kim_to_nectar {
                    w.graph_push_edge(&edge("Kim", "Nectar", false))?;
                }
                Ok(())
            })
            .expect("graph");
            let entries = WORDS
                .iter()
                .map(|w| MemoryEntry::new(MemoryType::Semantic, format!("notes on {w}")))
                .collect();
            mem.add_batch(entries).expect("add");
            let mut q = RecallQuery::new("kim lou");
            q.limit = 20;
            let r = mem.recall(&q).expect("recall");
            let found: Vec<&str> = WORDS
                .into_iter()
                .filter(|w| r.memories.iter().any(|m| m.content == format!("notes on {w}")))
                .collect();
            (r.trace.graph, found)
        };
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let kim = ["cedar", "amber", "birch", "delta", "ember", "grove", "heron"];
        // Kim's eight fill the expansion: Lou follows none.
        let (graph, found) = expand(true);
        let mut eight = kim.to_vec();
        eight.push("nectar");
        assert_eq!(graph, [("kim".to_owned(), names(&eight)), ("lou".to_owned(), Vec::new())]);
        eight.sort_unstable();
        assert_eq!(found, eight);
        // Kim's seven end at heron, which Lou reaches first (counted once), then
        // maple makes eight: pearl and quartz are not followed.
        let (graph, found) = expand(false);
        assert_eq!(
            graph,
            [("kim".to_owned(), names(&kim)), ("lou".to_owned(), names(&["heron", "maple"]))]
        );
        let mut eight = kim.to_vec();
        eight.push("maple");
        eight.sort_unstable();
        assert_eq!(found, eight);
    }

    /// Ranking in parallel and in place give the same order and the same scores.
    #[test]
    fn parallel_and_in_place_ranking_agree() {
        let mem = Memory::open_in_memory().expect("open");
        let now_us = 1_700_000_000_000_000i64;
        let pool: Vec<Pooled> = (0..(3 * PARALLEL_RANKING as u64))
            .map(|d| {
                let mut e = MemoryEntry::new(MemoryType::Episodic, format!("memory {d}"));
                e.importance = 1 + (d % 10) as u8;
                e.significance = (d % 7) as f64 / 7.0;
                let mut info = DocInfo::from_entry(&e, 5);
                info.created_at = now_us - (d as i64 % 50) * 3_600_000_000;
                info.access = (0..(d % 4) as i64).map(|k| now_us - k * 60_000_000).collect();
                Pooled {
                    cand: Candidate { docno: d, bm25: (d % 13) as f64, info },
                    source: "text".into(),
                    cos: None,
                }
            })
            .collect();
        let fusion = Fusion::new(&pool, HybridFusion::MinMax, 0.5);
        let order = |v: &[(ScoreParts, usize)]| -> Vec<(usize, u64)> {
            v.iter().map(|(s, i)| (*i, s.total.to_bits())).collect()
        };
        let a = mem.rank(&pool, &fusion, now_us, true);
        let b = mem.rank(&pool, &fusion, now_us, false);
        assert_eq!(order(&a), order(&b));
        assert!(a.windows(2).all(|w| w[0].0.total >= w[1].0.total), "not best first");
    }
}
