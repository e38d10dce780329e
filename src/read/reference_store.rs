//! Runs the reference profile's recall on the store: loads the (capped) stores into
//! the in-memory state [`super::reference_recall`] ranks, then writes the access
//! updates and the lazily grown BM25 corpus back in one transaction.

use std::collections::BTreeMap;

use super::query::{Recall, RecallQuery, RecallTrace, ScoreParts, TraceEntry};
use super::reference_bm25::ReferenceBm25;
use super::reference_recall::{
    self, RecallOptions, RefEdge, RefGraph, RefState, RefStores, StoreKind,
};
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::model::{MemoryEntry, MemoryType};
use crate::storage::{Reader, decode, encode, meta_keys};

fn layer_entries(r: &Reader, layer: &str) -> Result<Vec<MemoryEntry>> {
    let mut all: Vec<(u64, MemoryEntry)> = Vec::new();
    for (l, d) in r.entry_tables()? {
        if l == layer {
            all.extend(r.table_entries(&l, &d)?);
        }
    }
    all.sort_by_key(|(docno, _)| *docno);
    Ok(all.into_iter().map(|(_, e)| e).collect())
}

fn load_state(r: &Reader) -> Result<RefState> {
    let mut custom = BTreeMap::new();
    for (l, _) in r.entry_tables()? {
        if MemoryType::parse(&l).is_none() && !custom.contains_key(&l) {
            let entries = layer_entries(r, &l)?;
            custom.insert(l, entries);
        }
    }
    let stores = RefStores {
        episodic: layer_entries(r, "episodic")?,
        semantic: layer_entries(r, "semantic")?,
        procedural: layer_entries(r, "procedural")?,
        social: layer_entries(r, "social")?,
        custom,
    };
    let graph = RefGraph {
        entities: r.graph_nodes()?,
        edges: r
            .graph_edges()?
            .into_iter()
            .map(|e| RefEdge {
                active: e.is_active(),
                source: e.source,
                target: e.target,
                relation: e.relation,
            })
            .collect(),
    };
    let contents: Vec<String> = match r.meta_get(meta_keys::REF_BM25)? {
        Some(b) => decode(&b, "reference bm25 corpus")?,
        None => Vec::new(),
    };
    Ok(RefState { stores, graph, bm25: ReferenceBm25::from_contents(contents) })
}

impl Memory {
    pub(crate) fn recall_reference(&self, q: &RecallQuery) -> Result<Recall> {
        let now = self.now();
        let mut state = load_state(&self.read()?)?;
        let types = match &q.types {
            None => None,
            Some(ts) => Some(
                ts.iter()
                    .map(|t| {
                        MemoryType::parse(t).ok_or_else(|| {
                            Error::InvalidInput(format!("unknown memory type {t:?}"))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        let mut opts = RecallOptions::new(q.query.clone());
        opts.limit = q.limit;
        opts.types = types;
        opts.layer.clone_from(&q.layer);
        opts.domain.clone_from(&q.domain);
        opts.user_id.clone_from(&q.user_id);
        opts.min_importance = i64::from(q.min_importance);
        opts.requester_id.clone_from(&q.requester_id);
        opts.bond_strength = q.bond_strength;
        opts.bond_threshold = self.settings.bond_threshold;
        let before = state.bm25.len();
        let outcome = reference_recall::recall(&opts, &mut state, now);

        let mut out = Recall {
            trace: RecallTrace { profile: "reference".into(), ..RecallTrace::default() },
            ..Recall::default()
        };
        for (rank, hit) in outcome.results.iter().enumerate() {
            let Some(e) = state.entry(&hit.store, &hit.id) else { continue };
            let parts = hit.activation.as_ref().map(|a| ScoreParts {
                base: a.base,
                spread: a.spread,
                emotion: a.emotion,
                significance: a.significance,
                salience: a.salience,
                personality: a.personality,
                vector: 0.0,
                total: a.total,
            });
            out.scores.push(parts.as_ref().map_or(0.0, |p| p.total));
            out.trace.candidates.push(TraceEntry {
                id: e.id.clone(),
                layer: e.layer.clone(),
                source: match &hit.store {
                    StoreKind::Custom(name) => format!("layer:{name}"),
                    _ => "text".into(),
                },
                bm25: 0.0,
                dropped_by: None,
                score: parts,
                rank: Some(rank),
                content_terms: Vec::new(),
                context_terms: Vec::new(),
            });
            out.memories.push(e.clone());
        }

        // Persist what the recall changed.
        let grown = state.bm25.len() != before;
        let updated: Vec<MemoryEntry> =
            outcome.accessed.iter().filter_map(|a| state.entry(&a.store, &a.id).cloned()).collect();
        if grown || !updated.is_empty() {
            let corpus: Vec<String> = state.bm25.contents().map(str::to_owned).collect();
            // The entries were read through the access overlay: bring the store to
            // the same point before writing them back.
            self.store.write_current(false, |w| {
                for e in updated {
                    if let Some(d) = w.docno_of(&e.id)? {
                        w.replace(d, e)?;
                    }
                }
                if grown {
                    w.meta_put(meta_keys::REF_BM25, &encode(&corpus)?)?;
                }
                Ok(())
            })?;
        }
        Ok(out)
    }
}
