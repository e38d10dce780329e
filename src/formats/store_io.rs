//! The bridge between documents ([`SoulDocument`], [`MemoryDump`]) and a store.
//!
//! [`Memory::import_document`] loads a whole soul into a store in one write
//! transaction, losslessly: every entry as is (ids, `superseded_by` sentinels, access
//! history, domain), built-in tiers into their layer and custom layers into their
//! own, the knowledge graph (node order, edges with duplicates, `valid_to` and
//! metadata), self-model, general events, conversation archives, core memory, memory
//! settings, and the parts soulmem only carries (`soul.json` as read, `dna.md`,
//! `state.json`, the manifest, trust chain and keys, in meta
//! [`meta_keys::SOUL_EXTRAS`]). [`Memory::export_document`] gives it all back.
//!
//! Everything is checked before the transaction starts, so bad input writes nothing.

use std::collections::{BTreeMap, HashMap};

use redb::ReadableTableMetadata;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ENTRY_TIERS, MemoryDump, SoulDocument};
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::model::{
    ConversationArchive, CoreMemory, Edge, GeneralEvent, KnowledgeGraph, MemoryEntry,
    MemorySettings, time,
};
use crate::storage::graph::EdgeRecord;
use crate::storage::keys::{IndexKeys, index_keys};
use crate::storage::{Reader, Writer, decode, encode, meta_keys, schema};

/// What an import stored.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Memories stored.
    pub entries: u64,
    /// Memories stored per layer.
    pub layers: BTreeMap<String, u64>,
    /// Knowledge-graph nodes stored.
    pub graph_nodes: u64,
    /// Knowledge-graph edges stored.
    pub graph_edges: u64,
    /// General events stored.
    pub general_events: u64,
    /// Conversation archives stored.
    pub archives: u64,
    /// Memories the store held before (deleted by `replace`).
    pub replaced: u64,
    /// Entries whose `layer` field named another layer than the list holding them:
    /// they are stored in the list's layer (as the reference does) with `layer` set
    /// to it.
    pub relayered: u64,
    /// Entries with an empty id, which got a fresh one.
    pub fresh_ids: u64,
}

/// The parts of a soul soulmem carries without using them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct SoulExtras {
    /// `soul.json` as read (JSON text).
    soul: Option<String>,
    dna_md: Option<Vec<u8>>,
    state_json: Option<Vec<u8>>,
    /// `manifest.json` (JSON text).
    manifest: Option<String>,
    /// `trust_chain/chain.json` (JSON text).
    trust_chain: Option<String>,
    public_key: Option<Vec<u8>>,
    private_key: Option<Vec<u8>>,
}

/// A stored general event: its position in the list, and the event.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EventRecord {
    seq: u64,
    event: GeneralEvent,
}

fn json_text(v: &Value, what: &str) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Storage(format!("encode {what}: {e}")))
}

fn parse_text(t: &str, what: &str) -> Result<Value> {
    serde_json::from_str(t).map_err(|e| Error::Corrupted(format!("stored {what}: {e}")))
}

/// The name of the soul a store without a carried `soul.json` exports as.
pub const DEFAULT_SOUL_NAME: &str = "soulmem";

/// A dump checked and laid out for the store: `(layer, entries)` in order.
struct Plan<'d> {
    layers: Vec<(&'d str, &'d [MemoryEntry])>,
    entries: u64,
}

fn entry_label(layer: &str, is_custom: bool, i: usize, e: &MemoryEntry) -> String {
    if is_custom {
        format!("custom_layers[{layer:?}][{i}] (id {:?})", e.id)
    } else {
        format!("{layer}[{i}] (id {:?})", e.id)
    }
}

/// Checks everything the store would refuse, naming the entry.
fn plan(dump: &MemoryDump) -> Result<Plan<'_>> {
    let mut layers = Vec::new();
    let mut seen: HashMap<&str, String> = HashMap::new();
    let mut entries = 0u64;
    for (idx, (layer, list)) in dump.layers().enumerate() {
        // `layers()` yields the four built-in tiers first, then the custom layers.
        let is_custom = idx >= ENTRY_TIERS.len();
        if list.is_empty() {
            continue;
        }
        if is_custom && ENTRY_TIERS.contains(&layer) {
            return Err(Error::Format {
                entry: format!("custom_layers[{layer:?}]"),
                problem: "a custom layer cannot take a built-in tier's name".into(),
            });
        }
        if let Err(Error::InvalidName { reason, .. }) = schema::validate_name("layer", layer) {
            return Err(Error::Format {
                entry: format!("custom_layers[{layer:?}]"),
                problem: format!("{layer:?} is not a valid soulmem layer name: {reason}"),
            });
        }
        for (i, e) in list.iter().enumerate() {
            let label = entry_label(layer, is_custom, i, e);
            let domain = if e.domain.is_empty() { crate::DEFAULT_DOMAIN } else { &e.domain };
            if let Err(Error::InvalidName { reason, .. }) = schema::validate_name("domain", domain)
            {
                return Err(Error::Format {
                    entry: label,
                    problem: format!(
                        "domain {domain:?} is not a valid soulmem domain name: {reason}"
                    ),
                });
            }
            e.validate().map_err(|p| Error::Format { entry: label.clone(), problem: p })?;
            if !e.id.is_empty()
                && let Some(first) = seen.insert(e.id.as_str(), label.clone())
            {
                return Err(Error::Format {
                    entry: label,
                    problem: format!(
                        "id {:?} is also used by {first}; soulmem needs ids unique across the \
                         whole store",
                        e.id
                    ),
                });
            }
            entries += 1;
        }
        layers.push((layer, list.as_slice()));
    }
    Ok(Plan { layers, entries })
}

/// Whether the store holds anything an import would overwrite.
fn store_is_empty(w: &mut Writer<'_>) -> Result<bool> {
    let txn = w.txn();
    let graph = w.graph()?;
    let graph_empty = graph.nodes.len()? == 0 && graph.edges.len()? == 0;
    let nonempty = w.ids.len()? > 0
        || !graph_empty
        || txn.open_table(schema::EVENTS)?.len()? > 0
        || txn.open_table(schema::ARCHIVES)?.len()? > 0
        || w.meta_get(meta_keys::SOUL_EXTRAS)?.is_some()
        || w.meta_get(meta_keys::SELF_MODEL)?.is_some()
        || match w.meta_get(meta_keys::CORE)? {
            Some(b) => decode::<CoreMemory>(&b, "core memory")? != CoreMemory::default(),
            None => false,
        };
    Ok(!nonempty)
}

fn edge_record(e: &Edge) -> Result<EdgeRecord> {
    Ok(EdgeRecord {
        source: e.source.clone(),
        target: e.target.clone(),
        relation: e.relation.clone(),
        valid_from: time::to_micros(&e.valid_from),
        valid_to: e.valid_to.as_ref().map(time::to_micros),
        metadata: match &e.metadata {
            Some(v) => Some(json_text(v, "edge metadata")?),
            None => None,
        },
    })
}

fn edge_from_record(r: EdgeRecord) -> Result<Edge> {
    Ok(Edge {
        source: r.source,
        target: r.target,
        relation: r.relation,
        valid_from: time::from_micros(r.valid_from),
        valid_to: r.valid_to.map(time::from_micros),
        metadata: match r.metadata {
            Some(t) => Some(parse_text(&t, "edge metadata")?),
            None => None,
        },
    })
}

/// Writes the memory part of a dump into `w` (which must be empty).
/// Entries per bulk-load step of an import. Large on purpose: into an empty store,
/// one step writes every table in key order (appends at the right edge of each
/// B-tree), while many steps interleave keys and pay for it in page splits and
/// moves; memory grows by about 2-3 KiB per entry of a step.
const BULK_CHUNK: usize = 1_000_000;

fn bulk(
    mem: &Memory,
    w: &mut Writer<'_>,
    chunk: &mut Vec<MemoryEntry>,
    report: &mut ImportReport,
    progress: &mut dyn FnMut(u64),
) -> Result<()> {
    use rayon::prelude::*;
    if chunk.is_empty() {
        return Ok(());
    }
    let profile = w.profile();
    let entries = std::mem::take(chunk);
    let keys: Vec<IndexKeys> =
        mem.install(|| entries.par_iter().map(|e| index_keys(e, profile, None)).collect());
    report.entries += entries.len() as u64;
    w.insert_many(entries, &keys)?;
    progress(report.entries);
    Ok(())
}

fn load_dump(
    mem: &Memory,
    w: &mut Writer<'_>,
    dump: &MemoryDump,
    plan: &Plan<'_>,
    report: &mut ImportReport,
    progress: &mut dyn FnMut(u64),
) -> Result<()> {
    // Graph: nodes in order, then every edge as is (duplicates kept).
    for (name, kind) in &dump.graph.entities {
        w.graph_add_entity(name, kind)?;
        report.graph_nodes += 1;
    }
    for e in &dump.graph.edges {
        w.graph_push_edge(&edge_record(e)?)?;
        report.graph_edges += 1;
    }
    // Entries, layer by layer, in the order given (docnos follow it), in chunks
    // bulk-loaded with index keys computed in parallel.
    let mut chunk: Vec<MemoryEntry> = Vec::with_capacity(BULK_CHUNK);
    for (layer, list) in &plan.layers {
        for e in *list {
            let mut e = e.clone();
            e.normalize();
            if e.layer != *layer {
                report.relayered += 1;
                (*layer).clone_into(&mut e.layer);
            }
            if e.id.is_empty() {
                report.fresh_ids += 1;
            }
            chunk.push(e);
            *report.layers.entry((*layer).to_owned()).or_default() += 1;
            if chunk.len() == BULK_CHUNK {
                bulk(mem, w, &mut chunk, report, progress)?;
            }
        }
    }
    bulk(mem, w, &mut chunk, report, progress)?;
    {
        let mut t = w.txn().open_table(schema::EVENTS)?;
        for (seq, ev) in dump.general_events.iter().enumerate() {
            let rec = EventRecord { seq: seq as u64, event: ev.clone() };
            t.insert(ev.id.as_str(), encode(&rec)?.as_slice())?;
            report.general_events += 1;
        }
    }
    let mut seqs = Vec::with_capacity(dump.archives.len());
    for _ in &dump.archives {
        seqs.push(w.next_seq());
    }
    {
        let mut t = w.txn().open_table(schema::ARCHIVES)?;
        for (a, seq) in dump.archives.iter().zip(seqs) {
            t.insert(seq, encode(a)?.as_slice())?;
            report.archives += 1;
        }
    }
    w.meta_put(meta_keys::CORE, &encode(&dump.core)?)?;
    w.set_self_model(dump.self_model.clone());
    progress(report.entries);
    Ok(())
}

impl Memory {
    /// Loads a whole soul into the store in one write transaction (see the module
    /// documentation for what is kept). A store that already holds memories, graph,
    /// events, archives, a self-model, core memory or a soul is refused unless
    /// `replace` is set; then the old contents are deleted in the same transaction,
    /// so a failure leaves them intact.
    ///
    /// # Errors
    /// [`Error::Format`] naming the entry when an entry, layer or domain name is
    /// unacceptable or an id is used twice (nothing is written);
    /// [`Error::InvalidInput`] for a non-empty store without `replace`; storage
    /// errors.
    pub fn import_document(&self, doc: &SoulDocument, replace: bool) -> Result<ImportReport> {
        self.import_document_with(doc, replace, &mut |_| {})
    }

    /// [`Memory::import_document`] with a progress callback (memories stored so far).
    ///
    /// # Errors
    /// As [`Memory::import_document`].
    pub fn import_document_with(
        &self,
        doc: &SoulDocument,
        replace: bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        let settings = doc.memory_settings()?;
        let extras = SoulExtras {
            soul: Some(json_text(&doc.soul, "soul.json")?),
            dna_md: doc.dna_md.clone(),
            state_json: doc.state_json.clone(),
            manifest: doc.manifest.as_ref().map(|m| json_text(m, "manifest")).transpose()?,
            trust_chain: doc
                .trust_chain
                .as_ref()
                .map(|c| json_text(c, "trust chain"))
                .transpose()?,
            public_key: doc.public_key.clone(),
            private_key: doc.private_key.clone(),
        };
        let extras = encode(&extras)?;
        let settings = serde_json::to_vec(&settings)
            .map_err(|e| Error::Storage(format!("encode settings: {e}")))?;
        self.import_inner(&doc.memory, replace, Some((&extras, &settings)), progress)
    }

    /// Loads a `to_dict()` memory dump (no soul around it) like
    /// [`Memory::import_document`]; nothing is carried for a later `.soul` export.
    ///
    /// # Errors
    /// As [`Memory::import_document`].
    pub fn import_dump(
        &self,
        dump: &MemoryDump,
        replace: bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        self.import_inner(dump, replace, None, progress)
    }

    fn import_inner(
        &self,
        dump: &MemoryDump,
        replace: bool,
        extras: Option<(&[u8], &[u8])>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        let plan = plan(dump)?;
        let before = self.count()?;
        let mut report =
            ImportReport { replaced: if replace { before } else { 0 }, ..Default::default() };
        self.store.write_cleared(self.settings.durable, replace, |w| {
            if !replace && !store_is_empty(w)? {
                return Err(Error::InvalidInput(
                    "the store is not empty; restore with replace to overwrite it".into(),
                ));
            }
            load_dump(self, w, dump, &plan, &mut report, progress)?;
            if let Some((extras, settings)) = extras {
                w.meta_put(meta_keys::SOUL_EXTRAS, extras)?;
                w.meta_put(meta_keys::SETTINGS, settings)?;
            }
            Ok(())
        })?;
        debug_assert_eq!(report.entries, plan.entries);
        Ok(report)
    }

    /// The store's memory in the `to_dict()` shape: built-in tiers in the reference's
    /// order (episodic by `created_at` descending; the others by importance, then
    /// `created_at`, descending; ties in insertion order, so an imported dump comes
    /// back in its own order), custom layers in insertion order.
    ///
    /// # Errors
    /// Storage errors, or a damaged record.
    pub fn export_dump(&self, progress: &mut dyn FnMut(u64)) -> Result<MemoryDump> {
        let r = self.read()?;
        export_dump_from(&r, progress)
    }

    /// The whole soul: [`Memory::export_dump`] plus the parts carried since the
    /// import (`soul.json` with its `memory` settings, `dna.md`, `state.json`,
    /// manifest, trust chain, keys). A store that never imported a soul gets a
    /// minimal `soul.json` named [`DEFAULT_SOUL_NAME`].
    ///
    /// # Errors
    /// Storage errors, or a damaged record.
    pub fn export_document(&self) -> Result<SoulDocument> {
        self.export_document_with(&mut |_| {})
    }

    /// [`Memory::export_document`] with a progress callback (memories read so far).
    ///
    /// # Errors
    /// As [`Memory::export_document`].
    pub fn export_document_with(&self, progress: &mut dyn FnMut(u64)) -> Result<SoulDocument> {
        let r = self.read()?;
        let memory = export_dump_from(&r, progress)?;
        let extras: SoulExtras = match r.meta_get(meta_keys::SOUL_EXTRAS)? {
            Some(b) => decode(&b, "soul extras")?,
            None => SoulExtras::default(),
        };
        let soul = match &extras.soul {
            Some(t) => parse_text(t, "soul.json")?,
            None => {
                let settings: MemorySettings = match r.meta_get(meta_keys::SETTINGS)? {
                    Some(b) => serde_json::from_slice(&b)
                        .map_err(|e| Error::Corrupted(format!("stored settings: {e}")))?,
                    None => MemorySettings::default(),
                };
                serde_json::json!({
                    "version": "1.0.0",
                    "identity": {"name": DEFAULT_SOUL_NAME},
                    "memory": settings,
                })
            }
        };
        let mut doc = SoulDocument::new(soul, memory)?;
        doc.dna_md = extras.dna_md;
        doc.state_json = extras.state_json;
        doc.manifest = extras.manifest.as_deref().map(|t| parse_text(t, "manifest")).transpose()?;
        doc.trust_chain =
            extras.trust_chain.as_deref().map(|t| parse_text(t, "trust chain")).transpose()?;
        doc.public_key = extras.public_key;
        doc.private_key = extras.private_key;
        Ok(doc)
    }
}

fn reference_order(layer: &str, entries: &mut [MemoryEntry]) {
    match layer {
        "episodic" => entries.sort_by_key(|e| std::cmp::Reverse(e.created_at)),
        "semantic" | "procedural" | "social" => {
            entries.sort_by_key(|e| std::cmp::Reverse((e.importance, e.created_at)))
        }
        _ => {}
    }
}

fn export_dump_from(r: &Reader, progress: &mut dyn FnMut(u64)) -> Result<MemoryDump> {
    let mut dump = MemoryDump::default();
    // Layer → (first docno, entries by docno).
    let mut layers: HashMap<String, Vec<(u64, MemoryEntry)>> = HashMap::new();
    let mut read = 0u64;
    for (layer, domain) in r.entry_tables()? {
        let rows = r.table_entries(&layer, &domain)?;
        read += rows.len() as u64;
        progress(read);
        layers.entry(layer).or_default().extend(rows);
    }
    let mut custom: Vec<(u64, String, Vec<MemoryEntry>)> = Vec::new();
    for (layer, mut rows) in layers {
        if rows.is_empty() {
            continue;
        }
        rows.sort_by_key(|(d, _)| *d);
        let first = rows[0].0;
        let mut entries: Vec<MemoryEntry> = rows.into_iter().map(|(_, e)| e).collect();
        match dump.tier_mut(&layer) {
            Some(t) => {
                reference_order(&layer, &mut entries);
                *t = entries;
            }
            None => custom.push((first, layer, entries)),
        }
    }
    custom.sort_by_key(|(first, _, _)| *first);
    dump.custom_layers = custom.into_iter().map(|(_, l, e)| (l, e)).collect();

    let nodes = r.graph_nodes()?;
    let edges = r.graph_edges()?.into_iter().map(edge_from_record).collect::<Result<Vec<_>>>()?;
    dump.graph = KnowledgeGraph { entities: nodes.into_iter().collect(), edges };

    dump.self_model = r.self_model()?;
    if let Some(b) = r.meta_get(meta_keys::CORE)? {
        dump.core = decode(&b, "core memory")?;
    }
    let mut events: Vec<EventRecord> = Vec::new();
    for row in r.txn().open_table(schema::EVENTS)?.range::<&str>(..)? {
        events.push(decode(row?.1.value(), "general event")?);
    }
    events.sort_by_key(|e| e.seq);
    dump.general_events = events.into_iter().map(|e| e.event).collect();
    let mut archives: Vec<ConversationArchive> = Vec::new();
    for row in r.txn().open_table(schema::ARCHIVES)?.range::<u64>(..)? {
        archives.push(decode(row?.1.value(), "conversation archive")?);
    }
    dump.archives = archives;
    Ok(dump)
}
