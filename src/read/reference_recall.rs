//! soul-protocol 0.4.0's `MemoryManager.recall`, replicated over in-memory state.
//!
//! This is the `reference` profile's recall as pure code over [`RefState`]: the stores
//! (each a `Vec` in the reference's dict insertion order, which decides ties), the
//! knowledge graph and the lazily built BM25 corpus. [`recall`] reproduces, in order:
//!
//! 1. routing: `layer` = a custom layer or `"social"` goes to a layer search (no
//!    ranking, no access update); `layer` = episodic/semantic/procedural becomes
//!    `types = [layer]`; the fetch limit is `3·limit` when `user_id`, `domain` or
//!    `layer` is set (QUIRKS Q24, Q25);
//! 2. candidates: the top `fetch_limit` of each searched store by the fraction of query
//!    tokens present (stop-words included), ties by importance then recency (Q19);
//!    semantic skips superseded facts and applies `min_importance`, episodic skips
//!    archived entries; then `min_importance` on the rest (Q21);
//! 3. graph augmentation: entities whose lower-cased name is a substring of the
//!    lower-cased query; every name one hop around them (and their neighbours'
//!    relations) becomes a search term for semantic, then episodic, appended when new
//!    (Q20). The term order is the reference's Python set order ([`PyStrSet`]);
//! 4. visibility (Q26), ACT-R ranking with the BM25 spread (Q22, Q23), a stable sort;
//! 5. access metadata bumped on the first `fetch_limit` ranked entries (Q24), then the
//!    `user_id` and `domain` filters and the cut to `limit`.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::activation::{ActivationBreakdown, Personality};
use super::reference_bm25::{PyStrSet, ReferenceBm25, query_terms};
use crate::model::{MemoryEntry, MemoryType, Timestamp, Visibility};
use crate::text::relevance_score;

/// Access timestamps kept per memory (the oldest are dropped).
pub const MAX_ACCESS_TIMESTAMPS: usize = 100;
/// Bond strength a requester needs to see `bonded` memories.
pub const DEFAULT_BOND_THRESHOLD: f64 = 30.0;
/// Fetch-limit multiplier when a `user_id`, `domain` or `layer` filter is active.
pub const FILTER_FETCH_FACTOR: usize = 3;

/// A directed, possibly expired, relation of the knowledge graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefEdge {
    /// Source entity name.
    pub source: String,
    /// Target entity name.
    pub target: String,
    /// Relation label.
    pub relation: String,
    /// False once the relation has a `valid_to` (expired edges are ignored by recall).
    pub active: bool,
}

/// The knowledge graph as the reference keeps it: entities in insertion order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefGraph {
    /// `(name, entity type)` in insertion order.
    pub entities: Vec<(String, String)>,
    /// Edges in insertion order.
    pub edges: Vec<RefEdge>,
}

impl RefGraph {
    fn has_entity(&self, name: &str) -> bool {
        self.entities.iter().any(|(n, _)| n == name)
    }

    /// `progressive_context(entity, level=1)` reduced to `(source, target)` pairs, in the
    /// reference's order: the entity's active relations, then those of each neighbour
    /// (neighbours in Python set order).
    #[must_use]
    pub fn progressive_context(&self, entity: &str) -> Vec<(String, String)> {
        if !self.has_entity(entity) {
            return Vec::new();
        }
        let mut visited: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        let mut frontier = PyStrSet::new();
        frontier.add(entity);
        for _depth in 0..2 {
            let mut next = PyStrSet::new();
            for current in frontier.iter() {
                if !visited.insert(current.to_owned()) {
                    continue;
                }
                for e in self.edges.iter().filter(|e| e.active) {
                    let neighbour = if e.source == current {
                        &e.target
                    } else if e.target == current {
                        &e.source
                    } else {
                        continue;
                    };
                    out.push((e.source.clone(), e.target.clone()));
                    if !visited.contains(neighbour.as_str()) {
                        next.add(neighbour);
                    }
                }
            }
            frontier = next;
        }
        out
    }
}

/// The memory stores, each in the reference's insertion order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RefStores {
    /// Episodic memories.
    pub episodic: Vec<MemoryEntry>,
    /// Semantic facts, superseded ones included.
    pub semantic: Vec<MemoryEntry>,
    /// Procedures.
    pub procedural: Vec<MemoryEntry>,
    /// Social layer.
    pub social: Vec<MemoryEntry>,
    /// Custom layers by name.
    pub custom: BTreeMap<String, Vec<MemoryEntry>>,
}

/// Everything the reference's recall reads and writes.
#[derive(Debug, Clone, Default)]
pub struct RefState {
    /// The stores.
    pub stores: RefStores,
    /// The knowledge graph.
    pub graph: RefGraph,
    /// The recall engine's lazily built BM25 corpus (persists across recalls).
    pub bm25: ReferenceBm25,
}

/// Which store an entry lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// The episodic store.
    Episodic,
    /// The semantic store.
    Semantic,
    /// The procedural store.
    Procedural,
    /// The social store.
    Social,
    /// A custom layer.
    Custom(String),
}

/// The parameters of `MemoryManager.recall`.
#[derive(Debug, Clone)]
pub struct RecallOptions {
    /// The query text.
    pub query: String,
    /// How many results to return.
    pub limit: usize,
    /// Restrict to these tiers (`None` = episodic, semantic and procedural).
    pub types: Option<Vec<MemoryType>>,
    /// A single layer (built-in or custom).
    pub layer: Option<String>,
    /// Keep only this domain.
    pub domain: Option<String>,
    /// Keep only this user's and unattributed memories.
    pub user_id: Option<String>,
    /// Minimum importance.
    pub min_importance: i64,
    /// Who asks; `None` is the soul itself (sees everything).
    pub requester_id: Option<String>,
    /// The requester's bond strength (0..100).
    pub bond_strength: f64,
    /// Bond strength needed for `bonded` memories.
    pub bond_threshold: f64,
    /// OCEAN modulation (the reference's manager passes none).
    pub personality: Option<Personality>,
}

impl RecallOptions {
    /// Options for `query` with the reference's defaults (limit 10, bond 100, threshold 30).
    #[must_use]
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            limit: 10,
            types: None,
            layer: None,
            domain: None,
            user_id: None,
            min_importance: 0,
            requester_id: None,
            bond_strength: 100.0,
            bond_threshold: DEFAULT_BOND_THRESHOLD,
            personality: None,
        }
    }
}

/// One returned memory.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallHit {
    /// Where it lives.
    pub store: StoreKind,
    /// Its id.
    pub id: String,
    /// Its activation (`None` on the layer-search path, which does not rank).
    pub activation: Option<ActivationBreakdown>,
}

/// An access-metadata update applied by a recall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessUpdate {
    /// Where the entry lives.
    pub store: StoreKind,
    /// Its id.
    pub id: String,
    /// Its access count after the update.
    pub access_count: u32,
}

/// What a recall returned and changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecallOutcome {
    /// The results, best first.
    pub results: Vec<RecallHit>,
    /// Entries whose access metadata was bumped (possibly not among `results`: the
    /// bump happens before the user and domain filters).
    pub accessed: Vec<AccessUpdate>,
    /// The access time written (`now`), when anything was bumped.
    pub accessed_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Loc {
    store: StoreKind,
    index: usize,
}

fn store_vec<'a>(stores: &'a RefStores, kind: &StoreKind) -> &'a [MemoryEntry] {
    match kind {
        StoreKind::Episodic => &stores.episodic,
        StoreKind::Semantic => &stores.semantic,
        StoreKind::Procedural => &stores.procedural,
        StoreKind::Social => &stores.social,
        StoreKind::Custom(name) => stores.custom.get(name).map_or(&[], Vec::as_slice),
    }
}

fn entry_at<'a>(stores: &'a RefStores, loc: &Loc) -> Option<&'a MemoryEntry> {
    store_vec(stores, &loc.store).get(loc.index)
}

fn entry_at_mut<'a>(stores: &'a mut RefStores, loc: &Loc) -> Option<&'a mut MemoryEntry> {
    let v = match &loc.store {
        StoreKind::Episodic => &mut stores.episodic,
        StoreKind::Semantic => &mut stores.semantic,
        StoreKind::Procedural => &mut stores.procedural,
        StoreKind::Social => &mut stores.social,
        StoreKind::Custom(name) => stores.custom.get_mut(name)?,
    };
    v.get_mut(loc.index)
}

/// Ranks `(score, index)` like the stores do: score, importance, recency, all
/// descending; stable, so ties keep insertion order. Keeps the first `limit`.
fn top_scored(entries: &[MemoryEntry], mut scored: Vec<(f64, usize)>, limit: usize) -> Vec<usize> {
    scored.sort_by(|a, b| {
        let (ea, eb) = (&entries[a.1], &entries[b.1]);
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(eb.importance.cmp(&ea.importance))
            .then(eb.created_at.cmp(&ea.created_at))
    });
    scored.into_iter().take(limit).map(|(_, i)| i).collect()
}

/// A store's `search`: relevance > 0, ranked, first `limit`.
fn store_search(
    entries: &[MemoryEntry],
    query: &str,
    limit: usize,
    keep: impl Fn(&MemoryEntry) -> bool,
) -> Vec<usize> {
    let scored = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| keep(e))
        .filter_map(|(i, e)| {
            let s = relevance_score(query, &e.content);
            (s > 0.0).then_some((s, i))
        })
        .collect();
    top_scored(entries, scored, limit)
}

fn search_episodic(stores: &RefStores, query: &str, limit: usize) -> Vec<Loc> {
    store_search(&stores.episodic, query, limit, |e| !e.archived)
        .into_iter()
        .map(|index| Loc { store: StoreKind::Episodic, index })
        .collect()
}

fn search_semantic(stores: &RefStores, query: &str, limit: usize, min_imp: i64) -> Vec<Loc> {
    store_search(&stores.semantic, query, limit, |e| {
        e.superseded_by.is_none() && i64::from(e.importance) >= min_imp
    })
    .into_iter()
    .map(|index| Loc { store: StoreKind::Semantic, index })
    .collect()
}

fn search_procedural(stores: &RefStores, query: &str, limit: usize) -> Vec<Loc> {
    store_search(&stores.procedural, query, limit, |_| true)
        .into_iter()
        .map(|index| Loc { store: StoreKind::Procedural, index })
        .collect()
}

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The reference's `_token_overlap_score`: Jaccard of lower-cased whitespace tokens,
/// punctuation kept.
#[must_use]
pub fn whitespace_jaccard(a: &str, b: &str) -> f64 {
    let la = a.to_lowercase();
    let lb = b.to_lowercase();
    let ta: HashSet<&str> = la.split(is_py_space).filter(|w| !w.is_empty()).collect();
    let tb: HashSet<&str> = lb.split(is_py_space).filter(|w| !w.is_empty()).collect();
    if ta.is_empty() || tb.is_empty() {
        return 0.0;
    }
    let inter = ta.intersection(&tb).count();
    let union = ta.union(&tb).count();
    inter as f64 / union as f64
}

/// `_search_in_layer` for `social` and custom layers.
fn layer_search(stores: &RefStores, layer: &str, query: &str, limit: usize) -> Vec<Loc> {
    if layer == "social" {
        return store_search(&stores.social, query, limit, |_| true)
            .into_iter()
            .map(|index| Loc { store: StoreKind::Social, index })
            .collect();
    }
    let entries = stores.custom.get(layer).map_or(&[][..], Vec::as_slice);
    let scored = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let s = whitespace_jaccard(query, &e.content);
            (s > 0.0).then_some((s, i))
        })
        .collect();
    top_scored(entries, scored, limit)
        .into_iter()
        .map(|index| Loc { store: StoreKind::Custom(layer.to_owned()), index })
        .collect()
}

fn visible(e: &MemoryEntry, opts: &RecallOptions) -> bool {
    if opts.requester_id.is_none() {
        return true;
    }
    match e.visibility {
        Visibility::Public => true,
        Visibility::Bonded => opts.bond_strength >= opts.bond_threshold,
        Visibility::Private => false,
    }
}

/// `RecallEngine.recall` (progressive off, noise off): ranked entries, first `limit`,
/// with their activations; bumps access metadata on them.
fn engine_recall(
    state: &mut RefState,
    opts: &RecallOptions,
    types: Option<&[MemoryType]>,
    limit: usize,
    now: Timestamp,
    outcome: &mut RecallOutcome,
) -> Vec<(Loc, ActivationBreakdown)> {
    let query = opts.query.as_str();
    let wants = |t: MemoryType| types.is_none_or(|ts| ts.contains(&t));
    let stores = &state.stores;
    let mut cands: Vec<Loc> = Vec::new();
    if wants(MemoryType::Episodic) {
        cands.extend(search_episodic(stores, query, limit));
    }
    if wants(MemoryType::Semantic) {
        cands.extend(search_semantic(stores, query, limit, opts.min_importance));
    }
    if wants(MemoryType::Procedural) {
        cands.extend(search_procedural(stores, query, limit));
    }
    if opts.min_importance > 0 {
        cands.retain(|l| {
            entry_at(stores, l).is_some_and(|e| i64::from(e.importance) >= opts.min_importance)
        });
    }

    // Graph augmentation.
    let query_lower = query.to_lowercase();
    let matched: Vec<&str> = state
        .graph
        .entities
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| query_lower.contains(&n.to_lowercase()))
        .collect();
    if !matched.is_empty() {
        let mut terms = PyStrSet::new();
        for ent in matched {
            for (source, target) in state.graph.progressive_context(ent) {
                terms.add(&target);
                terms.add(&source);
            }
        }
        let mut seen: HashSet<String> =
            cands.iter().filter_map(|l| entry_at(stores, l)).map(|e| e.id.clone()).collect();
        for term in terms.iter() {
            let mut extra = Vec::new();
            if wants(MemoryType::Semantic) {
                extra.extend(search_semantic(stores, term, limit, opts.min_importance));
            }
            if wants(MemoryType::Episodic) {
                extra.extend(search_episodic(stores, term, limit));
            }
            for l in extra {
                if let Some(e) = entry_at(stores, &l) {
                    if seen.insert(e.id.clone()) {
                        cands.push(l);
                    }
                }
            }
        }
    }

    cands.retain(|l| entry_at(stores, l).is_some_and(|e| visible(e, opts)));

    // Rank: activations are computed in candidate order (this order also feeds the
    // lazy BM25 corpus), then a stable descending sort.
    let terms = query_terms(query);
    let mut ranked: Vec<(Loc, ActivationBreakdown)> = Vec::with_capacity(cands.len());
    for l in cands {
        let Some(e) = entry_at(&state.stores, &l) else { continue };
        let spread = state.bm25.score_terms(&terms, &e.content);
        let act = ActivationBreakdown::compute(e, spread, now, opts.personality.as_ref());
        ranked.push((l, act));
    }
    ranked.sort_by(|a, b| b.1.total.partial_cmp(&a.1.total).unwrap_or(std::cmp::Ordering::Equal));
    ranked.truncate(limit);

    for (l, _) in &ranked {
        if let Some(e) = entry_at_mut(&mut state.stores, l) {
            e.last_accessed = Some(now);
            e.access_count = e.access_count.saturating_add(1);
            e.access_timestamps.push(now);
            if e.access_timestamps.len() > MAX_ACCESS_TIMESTAMPS {
                let cut = e.access_timestamps.len() - MAX_ACCESS_TIMESTAMPS;
                e.access_timestamps.drain(..cut);
            }
            outcome.accessed.push(AccessUpdate {
                store: l.store.clone(),
                id: e.id.clone(),
                access_count: e.access_count,
            });
            outcome.accessed_at = Some(now);
        }
    }
    ranked
}

/// `MemoryManager.recall` of soul-protocol 0.4.0 at time `now`, over `state`.
///
/// Mutates `state` as the reference does: the BM25 corpus grows with every newly scored
/// content and ranked entries get their access metadata bumped (both reported in the
/// outcome). `types` containing only `social` returns nothing, as in the reference.
pub fn recall(opts: &RecallOptions, state: &mut RefState, now: Timestamp) -> RecallOutcome {
    let mut outcome = RecallOutcome::default();
    let any_filter = opts.user_id.is_some() || opts.layer.is_some() || opts.domain.is_some();
    let fetch_limit =
        if any_filter { opts.limit.saturating_mul(FILTER_FETCH_FACTOR) } else { opts.limit };

    let builtin = |l: &str| matches!(l, "episodic" | "semantic" | "procedural");
    let hits: Vec<(Loc, Option<ActivationBreakdown>)> = match opts.layer.as_deref() {
        Some(layer) if !builtin(layer) => {
            layer_search(&state.stores, layer, &opts.query, fetch_limit)
                .into_iter()
                .map(|l| (l, None))
                .collect()
        }
        layer => {
            let layer_types = layer.and_then(MemoryType::parse).map(|t| vec![t]);
            let types = layer_types.as_deref().or(opts.types.as_deref());
            engine_recall(state, opts, types, fetch_limit, now, &mut outcome)
                .into_iter()
                .map(|(l, a)| (l, Some(a)))
                .collect()
        }
    };

    for (loc, activation) in hits {
        let Some(e) = entry_at(&state.stores, &loc) else { continue };
        // Deliberate divergence: soul-protocol's `layer="social"` / custom-layer path
        // (Q25) skips the visibility check (Q26), leaking private and under-bonded
        // memories to requesters. Visibility is a privacy rule, so it applies here too
        // (a no-op for the engine path, which filtered already).
        if !visible(e, opts) {
            continue;
        }
        if let Some(uid) = &opts.user_id {
            if e.user_id.as_ref().is_some_and(|u| u != uid) {
                continue;
            }
        }
        if let Some(d) = &opts.domain {
            if &e.domain != d {
                continue;
            }
        }
        if outcome.results.len() >= opts.limit {
            break;
        }
        outcome.results.push(RecallHit { store: loc.store, id: e.id.clone(), activation });
    }
    outcome
}

// ---------------------------------------------------------------------------
// Loading a reference snapshot
// ---------------------------------------------------------------------------

fn entries_from(v: Option<&Value>, what: &str) -> Result<Vec<MemoryEntry>, String> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let arr = v.as_array().ok_or_else(|| format!("`{what}` is not a list"))?;
    arr.iter()
        .map(|raw| {
            let mut e: MemoryEntry =
                serde_json::from_value(raw.clone()).map_err(|err| format!("{what}: {err}"))?;
            e.normalize();
            Ok(e)
        })
        .collect()
}

impl RefState {
    /// Builds a state from a JSON snapshot of the reference's memory: keys `episodic`,
    /// `semantic`, `procedural`, `social` (lists of `MemoryEntry` JSON **in the stores'
    /// insertion order**, which `MemoryManager.to_dict` does not keep), `custom` or
    /// `custom_layers` (layer name → list), `graph` (`KnowledgeGraph.to_dict()`) and
    /// `bm25_corpus` (the strategy's indexed contents in indexing order). Missing keys
    /// are empty.
    ///
    /// # Errors
    /// Describes the first malformed part.
    pub fn from_snapshot(snap: &Value) -> Result<Self, String> {
        let mut stores = RefStores {
            episodic: entries_from(snap.get("episodic"), "episodic")?,
            semantic: entries_from(snap.get("semantic"), "semantic")?,
            procedural: entries_from(snap.get("procedural"), "procedural")?,
            social: entries_from(snap.get("social"), "social")?,
            custom: BTreeMap::new(),
        };
        if let Some(custom) = snap.get("custom").or_else(|| snap.get("custom_layers")) {
            let obj = custom.as_object().ok_or("`custom` is not an object")?;
            for (name, list) in obj {
                stores.custom.insert(name.clone(), entries_from(Some(list), name)?);
            }
        }
        let mut graph = RefGraph::default();
        if let Some(g) = snap.get("graph") {
            if let Some(ents) = g.get("entities").and_then(Value::as_object) {
                for (name, kind) in ents {
                    graph
                        .entities
                        .push((name.clone(), kind.as_str().unwrap_or("unknown").to_owned()));
                }
            }
            if let Some(edges) = g.get("edges").and_then(Value::as_array) {
                for e in edges {
                    let field = |k: &str| {
                        e.get(k)
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .ok_or_else(|| format!("graph edge without `{k}`"))
                    };
                    let edge = RefEdge {
                        source: field("source")?,
                        target: field("target")?,
                        relation: field("relation")?,
                        active: e.get("valid_to").is_none_or(Value::is_null),
                    };
                    for n in [&edge.source, &edge.target] {
                        if !graph.has_entity(n) {
                            graph.entities.push((n.clone(), "unknown".to_owned()));
                        }
                    }
                    graph.edges.push(edge);
                }
            }
        }
        let bm25 = match snap.get("bm25_corpus").and_then(Value::as_array) {
            Some(list) => ReferenceBm25::from_contents(list.iter().filter_map(Value::as_str)),
            None => ReferenceBm25::new(),
        };
        Ok(Self { stores, graph, bm25 })
    }

    /// Looks an entry up by store and id.
    #[must_use]
    pub fn entry(&self, store: &StoreKind, id: &str) -> Option<&MemoryEntry> {
        store_vec(&self.stores, store).iter().find(|e| e.id == id)
    }

    /// Ids of every stored entry by store, for callers that index the state.
    #[must_use]
    pub fn ids(&self) -> HashMap<String, StoreKind> {
        let mut out = HashMap::new();
        for (kind, v) in [
            (StoreKind::Episodic, &self.stores.episodic),
            (StoreKind::Semantic, &self.stores.semantic),
            (StoreKind::Procedural, &self.stores.procedural),
            (StoreKind::Social, &self.stores.social),
        ] {
            for e in v {
                out.insert(e.id.clone(), kind.clone());
            }
        }
        for (name, v) in &self.stores.custom {
            for e in v {
                out.insert(e.id.clone(), StoreKind::Custom(name.clone()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn at(day: u32) -> Timestamp {
        NaiveDate::from_ymd_opt(2026, 1, day)
            .and_then(|d| d.and_hms_opt(9, 0, 0))
            .unwrap_or_default()
    }

    fn fact(id: &str, content: &str) -> MemoryEntry {
        let mut e = MemoryEntry::new(MemoryType::Semantic, content);
        e.id = id.to_owned();
        e.created_at = at(1);
        e
    }

    #[test]
    fn bumps_cap_history_and_social_type_finds_nothing() {
        let mut state = RefState::default();
        let mut f = fact("a", "User likes green tea");
        f.access_timestamps = vec![at(1); MAX_ACCESS_TIMESTAMPS];
        state.stores.semantic.push(f);
        state.stores.semantic.push(fact("b", "User dislikes coffee"));

        let out = recall(&RecallOptions::new("green tea"), &mut state, at(2));
        assert_eq!(out.results.len(), 1);
        assert_eq!(out.results[0].id, "a");
        let a = &state.stores.semantic[0];
        assert_eq!(a.access_timestamps.len(), MAX_ACCESS_TIMESTAMPS);
        assert_eq!(a.access_timestamps.last(), Some(&at(2)));
        assert_eq!(a.access_count, 1);
        assert_eq!(state.bm25.len(), 1);

        let opts =
            RecallOptions { types: Some(vec![MemoryType::Social]), ..RecallOptions::new("tea") };
        assert!(recall(&opts, &mut state, at(3)).results.is_empty());
    }

    #[test]
    fn private_hidden_from_requesters_and_bonded_needs_threshold() {
        let mut state = RefState::default();
        let mut p = fact("p", "secret plan tea");
        p.visibility = Visibility::Private;
        state.stores.semantic.push(p);
        state.stores.semantic.push(fact("b", "bonded plan tea"));
        let mut opts = RecallOptions::new("plan tea");
        opts.requester_id = Some("x".to_owned());
        opts.bond_strength = 29.0;
        assert!(recall(&opts, &mut state, at(2)).results.is_empty());
        opts.bond_strength = 30.0;
        let ids: Vec<_> =
            recall(&opts, &mut state, at(2)).results.into_iter().map(|h| h.id).collect();
        assert_eq!(ids, vec!["b".to_owned()]);
    }

    #[test]
    fn layer_path_applies_visibility() {
        let mut state = RefState::default();
        let mut p = fact("p", "secret plan tea");
        p.visibility = Visibility::Private;
        p.layer = "journal".into();
        state.stores.custom.insert("journal".into(), vec![p]);
        let mut opts = RecallOptions::new("plan tea");
        opts.layer = Some("journal".into());
        assert_eq!(recall(&opts, &mut state, at(2)).results.len(), 1, "the soul sees it");
        opts.requester_id = Some("x".to_owned());
        assert!(recall(&opts, &mut state, at(2)).results.is_empty(), "a requester does not");
    }
}
