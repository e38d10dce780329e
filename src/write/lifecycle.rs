//! Remember, forget and supersede: the lifecycle calls around the pipelines, plus
//! `forget_entity`, `forget_before` and `archive_old_memories`. Each runs in one
//! transaction through the writer, so every index (and stored vector) stays exact,
//! and each deletion leaves an audit record.

use std::collections::BTreeSet;

use redb::ReadableTable;

use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::model::{ConversationArchive, MemoryEntry, MemoryType, Timestamp, Visibility};
use crate::storage::Writer;
use crate::text::{relevance_score, stem, synonyms_of, tokenize};
use crate::{DEFAULT_DOMAIN, Profile};

/// A memory to store directly, without the observe pipeline.
#[derive(Debug, Clone)]
pub struct Remember {
    /// The layer: a built-in tier name or a custom layer.
    pub layer: String,
    /// The text.
    pub content: String,
    /// 1..=10 (default 5).
    pub importance: u8,
    /// Owner (default none).
    pub user_id: Option<String>,
    /// Domain (default `"default"`).
    pub domain: String,
    /// Visibility (default bonded).
    pub visibility: Visibility,
    /// Entity names.
    pub entities: Vec<String>,
}

impl Remember {
    /// A memory of `content` in `layer` with the defaults.
    #[must_use]
    pub fn new(layer: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            layer: layer.into(),
            content: content.into(),
            importance: 5,
            user_id: None,
            domain: DEFAULT_DOMAIN.to_owned(),
            visibility: Visibility::Bonded,
            entities: Vec::new(),
        }
    }
}

/// What [`Memory::forget`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForgetReport {
    /// Ids deleted, per layer.
    pub deleted: Vec<(String, String)>,
}

impl ForgetReport {
    /// How many memories were deleted.
    #[must_use]
    pub fn total(&self) -> usize {
        self.deleted.len()
    }
}

/// Rejects text over [`crate::MAX_CONTENT_BYTES`].
pub(crate) fn check_text(text: &str) -> Result<()> {
    if text.len() > crate::MAX_CONTENT_BYTES {
        return Err(Error::InvalidInput(format!(
            "text is {} bytes, over the limit of {}",
            text.len(),
            crate::MAX_CONTENT_BYTES
        )));
    }
    Ok(())
}

/// Builds the entry `remember` stores, as the profile says.
pub(crate) fn remember_entry(
    req: &Remember,
    profile: Profile,
    now: Timestamp,
) -> Result<MemoryEntry> {
    let kind = match MemoryType::parse(&req.layer) {
        Some(MemoryType::Core) => {
            return Err(Error::InvalidInput(
                "core memory is not stored as entries; use set_core".into(),
            ));
        }
        Some(t) => t,
        None => MemoryType::Semantic,
    };
    let mut e = MemoryEntry::new(kind, req.content.clone());
    e.layer.clone_from(&req.layer);
    e.created_at = now;
    e.domain.clone_from(&req.domain);
    if kind == MemoryType::Episodic && profile.is_reference() {
        // Q27: the reference routes an episodic remember through the episodic store,
        // which rewrites the content and drops everything but the domain. It then
        // reads the new entry back through the store's `get` to set the domain, and
        // that read counts as an access: a second timestamp, an access count of 1.
        e.content = format!("User: {}\nAgent: ", req.content);
        e.access_timestamps = vec![now, now];
        e.access_count = 1;
        e.last_accessed = Some(now);
        return Ok(e);
    }
    e.importance = req.importance;
    e.user_id.clone_from(&req.user_id);
    e.visibility = req.visibility;
    e.entities.clone_from(&req.entities);
    if kind == MemoryType::Episodic {
        e.access_timestamps = vec![now];
    } else if layer_is_builtin(&req.layer) {
        e.ingested_at = Some(now);
    }
    Ok(e)
}

fn layer_is_builtin(layer: &str) -> bool {
    MemoryType::parse(layer).is_some()
}

/// Docnos whose content shares a token (or a synonym of one) with `query`: exactly
/// the memories with `relevance_score(query, content) > 0`.
pub(crate) fn matching_docnos(w: &mut Writer<'_>, query: &str) -> Result<BTreeSet<u64>> {
    // The index is keyed by stems: a stem's postings hold every exact match (and
    // more, which the caller's exact relevance check removes).
    let mut terms: BTreeSet<String> = BTreeSet::new();
    for q in tokenize(query) {
        if let Some(group) = synonyms_of(&q) {
            terms.extend(group.iter().map(|s| stem(s)));
        }
        terms.insert(stem(&q));
    }
    let mut out = BTreeSet::new();
    for t in &terms {
        out.extend(w.term_docnos(t)?);
    }
    Ok(out)
}

impl Memory {
    /// Stores one memory directly (no pipeline) and returns its id.
    ///
    /// # Errors
    /// Invalid names, fields or layer (`core`).
    pub fn remember(&self, req: &Remember) -> Result<String> {
        let now = self.now();
        let entry = remember_entry(req, self.profile(), now)?;
        self.add(entry)
    }

    /// Deletes the memories that match `query` (one shared token of three or more
    /// letters, or a synonym) and writes a deletion audit record.
    ///
    /// Reference profile: episodic (not archived), active semantic facts and
    /// procedural memories, as soul-protocol does. Default profile: every layer, and
    /// superseded facts too, so nothing that matches survives.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn forget(&self, query: &str) -> Result<ForgetReport> {
        let now = self.now();
        let reference = self.profile().is_reference();
        self.write(|w| {
            let mut report = ForgetReport::default();
            let mut removed = Vec::new();
            for docno in matching_docnos(w, query)? {
                let Some(info) = w.docinfo(docno)? else { continue };
                if reference {
                    let eligible = match info.layer.as_str() {
                        "episodic" => !info.archived,
                        "semantic" => {
                            let e = w.get(docno)?;
                            e.is_some_and(|e| e.superseded_by.is_none())
                        }
                        "procedural" => true,
                        _ => false,
                    };
                    if !eligible {
                        continue;
                    }
                } else if info.layer == "core" {
                    continue;
                }
                if let Some(e) = w.get(docno)?
                    && relevance_score(query, &e.content) > 0.0
                    && let Some(e) = w.remove(docno)?
                {
                    report.deleted.push((e.layer.clone(), e.id.clone()));
                    removed.push(e);
                }
            }
            let refs: Vec<&MemoryEntry> = removed.iter().collect();
            super::audit::record_deletion(w, now, &format!("forget(query='{query}')"), &refs)?;
            Ok(report)
        })
    }

    /// Semantic facts, active first then superseded ones when asked, each group in
    /// insertion order.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn facts(&self, include_superseded: bool) -> Result<Vec<MemoryEntry>> {
        let all = self.layer("semantic")?.entries(None)?;
        Ok(all.into_iter().filter(|e| include_superseded || !e.is_superseded()).collect())
    }
}

/// What [`Memory::forget_entity`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntityForgetReport {
    /// Graph nodes removed (0 or 1 in the reference profile; case variants too in
    /// the default one).
    pub nodes_removed: u64,
    /// Graph edges removed.
    pub edges_removed: u64,
    /// Memories deleted: `(layer, id)`.
    pub deleted: Vec<(String, String)>,
}

impl EntityForgetReport {
    /// Memories plus edges removed (the reference's `total`).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.edges_removed + self.deleted.len() as u64
    }
}

/// A user-driven correction: a new memory that replaces an old one
/// ([`Memory::supersede_with`]).
#[derive(Debug, Clone)]
pub struct Supersede {
    /// The memory being corrected.
    pub old_id: String,
    /// The corrected text.
    pub new_content: String,
    /// Why (kept in the supersede audit).
    pub reason: Option<String>,
    /// Importance of the new memory (default 5).
    pub importance: u8,
    /// Layer of the new memory (default: the old one's).
    pub layer: Option<String>,
    /// Emotion label of the new memory.
    pub emotion: Option<String>,
    /// Entities of the new memory.
    pub entities: Vec<String>,
}

impl Supersede {
    /// A correction of `old_id` to `new_content` with the defaults.
    #[must_use]
    pub fn new(old_id: impl Into<String>, new_content: impl Into<String>) -> Self {
        Self {
            old_id: old_id.into(),
            new_content: new_content.into(),
            reason: None,
            importance: 5,
            layer: None,
            emotion: None,
            entities: Vec::new(),
        }
    }
}

/// Layers the reference's bulk deletions visit.
const REFERENCE_TIERS: [&str; 3] = ["episodic", "semantic", "procedural"];

/// Removes `docnos` (skipping vanished ones) and returns the removed entries.
fn remove_all(
    w: &mut Writer<'_>,
    docnos: impl IntoIterator<Item = u64>,
) -> Result<Vec<MemoryEntry>> {
    let mut out = Vec::new();
    for d in docnos {
        if let Some(e) = w.remove(d)? {
            out.push(e);
        }
    }
    Ok(out)
}

/// Counts of removed entries per reference tier (each present, zero or not), plus
/// any other layer that lost entries.
fn tier_counts(removed: &[MemoryEntry]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> =
        REFERENCE_TIERS.iter().map(|t| ((*t).to_owned(), 0)).collect();
    for e in removed {
        match out.iter_mut().find(|(l, _)| *l == e.layer) {
            Some((_, n)) => *n += 1,
            None => out.push((e.layer.clone(), 1)),
        }
    }
    out
}

/// Removes graph nodes named `entity` and every edge touching them. The reference
/// profile matches names exactly, the default one ignores case. Returns
/// `(nodes, edges)` removed.
fn remove_graph_entity(w: &mut Writer<'_>, entity: &str, exact: bool) -> Result<(u64, u64)> {
    use crate::storage::graph::EdgeRecord;
    let lower = entity.to_lowercase();
    let same = |name: &str| if exact { name == entity } else { name.to_lowercase() == lower };
    let g = w.graph()?;
    let mut nodes = 0u64;
    let names: Vec<String> = if exact {
        g.nodes.get(entity)?.map(|_| vec![entity.to_owned()]).unwrap_or_default()
    } else {
        let mut v = Vec::new();
        for row in g.nodes.range::<&str>(..)? {
            let name = row?.0.value().to_owned();
            if same(&name) {
                v.push(name);
            }
        }
        v
    };
    for n in names {
        g.nodes.remove(n.as_str())?;
        nodes += 1;
    }
    let seqs = crate::storage::graph::adj_rows(&g.adj, &lower)?;
    let mut edges = 0u64;
    for seq in seqs {
        let Some(rec) = g.edges.get(seq)? else { continue };
        let edge: EdgeRecord = crate::storage::decode(rec.value(), "graph edge")?;
        drop(rec);
        if !(same(&edge.source) || same(&edge.target)) {
            continue;
        }
        g.remove_edge(seq, &edge)?;
        edges += 1;
    }
    Ok((nodes, edges))
}

/// Docnos whose content holds every token of `name` (the default profile's
/// entity match by content).
fn docnos_naming(w: &mut Writer<'_>, name: &str) -> Result<BTreeSet<u64>> {
    let tokens = tokenize(name);
    let mut out: Option<BTreeSet<u64>> = None;
    for t in &tokens {
        let s = stem(t);
        let found: BTreeSet<u64> = w.term_docnos(&s)?.into_iter().collect();
        out = Some(match out {
            None => found,
            Some(prev) => prev.intersection(&found).copied().collect(),
        });
    }
    Ok(out.unwrap_or_default())
}

impl Memory {
    /// Forgets an entity: its knowledge-graph node and every edge touching it, and
    /// the memories about it, with one deletion audit record (counts per tier and of
    /// graph edges, no content).
    ///
    /// Reference profile, as soul-protocol: the node and edges named exactly
    /// `entity`, and the memories [`Memory::forget`] would delete for the query
    /// `entity` (episodic not archived, active facts, procedural). Default profile:
    /// node and edges whatever the case, and every memory (core aside) whose
    /// entities include the name or whose content holds all of its words.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn forget_entity(&self, entity: &str) -> Result<EntityForgetReport> {
        let now = self.now();
        let reference = self.profile().is_reference();
        self.write(|w| {
            let (nodes, edges) = remove_graph_entity(w, entity, reference)?;
            let mut victims = BTreeSet::new();
            if reference {
                for docno in matching_docnos(w, entity)? {
                    let Some(info) = w.docinfo(docno)? else { continue };
                    let eligible = match info.layer.as_str() {
                        "episodic" => !info.archived,
                        "semantic" => {
                            !info.superseded
                                && w.get(docno)?.is_some_and(|e| e.superseded_by.is_none())
                        }
                        "procedural" => true,
                        _ => false,
                    };
                    if eligible
                        && w.get(docno)?.is_some_and(|e| relevance_score(entity, &e.content) > 0.0)
                    {
                        victims.insert(docno);
                    }
                }
            } else {
                let lower = entity.to_lowercase();
                for row in w.entities.range((lower.as_str(), 0u64)..=(lower.as_str(), u64::MAX))? {
                    victims.insert(row?.0.value().1);
                }
                let words = tokenize(entity);
                for docno in docnos_naming(w, entity)? {
                    if let Some(e) = w.get(docno)?
                        && !words.is_empty()
                        && tokenize(&e.content).is_superset(&words)
                    {
                        victims.insert(docno);
                    }
                }
                let mut keep = BTreeSet::new();
                for &d in &victims {
                    if w.docinfo(d)?.is_some_and(|i| i.layer == "core") {
                        keep.insert(d);
                    }
                }
                victims.retain(|d| !keep.contains(d));
            }
            let removed = remove_all(w, victims)?;
            let report = EntityForgetReport {
                nodes_removed: nodes,
                edges_removed: edges,
                deleted: removed.iter().map(|e| (e.layer.clone(), e.id.clone())).collect(),
            };
            if report.total() > 0 {
                let mut tiers = vec![("graph_edges".to_owned(), edges)];
                tiers.extend(tier_counts(&removed));
                super::audit::record_deletion_counts(
                    w,
                    now,
                    &format!("forget_entity(entity='{entity}')"),
                    report.total(),
                    &tiers,
                    &removed,
                )?;
            }
            Ok(report)
        })
    }

    /// Deletes every memory created before `before`, with one deletion audit record.
    /// Reference profile: the episodic, semantic and procedural tiers (archived and
    /// superseded entries too), as soul-protocol; default profile: every layer but
    /// core.
    ///
    /// # Errors
    /// Storage errors only.
    pub fn forget_before(&self, before: Timestamp) -> Result<ForgetReport> {
        let now = self.now();
        let reference = self.profile().is_reference();
        let cutoff = crate::model::time::to_micros(&before);
        self.write(|w| {
            let mut victims = Vec::new();
            for row in w.docs.range::<u64>(..)? {
                let (k, v) = row?;
                let info: crate::storage::DocInfo = crate::storage::decode(v.value(), "docinfo")?;
                let layer_ok = if reference {
                    REFERENCE_TIERS.contains(&info.layer.as_str())
                } else {
                    info.layer != "core"
                };
                if layer_ok && info.created_at < cutoff {
                    victims.push(k.value());
                }
            }
            let removed = remove_all(w, victims)?;
            if !removed.is_empty() {
                super::audit::record_deletion_counts(
                    w,
                    now,
                    &format!(
                        "forget_before(timestamp='{}')",
                        crate::model::time::format_timestamp(&before)
                    ),
                    removed.len() as u64,
                    &tier_counts(&removed),
                    &removed,
                )?;
            }
            Ok(ForgetReport {
                deleted: removed.iter().map(|e| (e.layer.clone(), e.id.clone())).collect(),
            })
        })
    }

    /// Corrects a memory: stores `new_content` as a new memory of the old one's layer
    /// and marks the old one superseded (`superseded_by` = the new id, `superseded`
    /// flag), keeping it for provenance; recall then surfaces the new one. Writes a
    /// supersede audit record. Returns the new id.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `old_id` is not a memory; invalid content.
    pub fn supersede(
        &self,
        old_id: &str,
        new_content: &str,
        reason: Option<&str>,
    ) -> Result<String> {
        let mut req = Supersede::new(old_id, new_content);
        req.reason = reason.map(str::to_owned);
        self.supersede_with(&req)
    }

    /// [`Memory::supersede`] with every option. The new memory keeps the old one's
    /// domain, owner and visibility in the default profile; the reference profile
    /// writes it with the defaults, as soul-protocol does.
    ///
    /// # Errors
    /// As [`Memory::supersede`].
    pub fn supersede_with(&self, req: &Supersede) -> Result<String> {
        check_text(&req.new_content)?;
        let now = self.now();
        let profile = self.profile();
        self.write(|w| {
            let docno =
                w.docno_of(&req.old_id)?.ok_or_else(|| Error::NotFound(req.old_id.clone()))?;
            let mut old = w.get(docno)?.ok_or_else(|| Error::NotFound(req.old_id.clone()))?;
            let mut r = Remember::new(
                req.layer.clone().unwrap_or_else(|| old.layer.clone()),
                req.new_content.clone(),
            );
            r.importance = req.importance;
            r.entities.clone_from(&req.entities);
            if !profile.is_reference() {
                r.domain.clone_from(&old.domain);
                r.user_id.clone_from(&old.user_id);
                r.visibility = old.visibility;
            }
            let mut entry = remember_entry(&r, profile, now)?;
            if entry.kind != MemoryType::Episodic || !profile.is_reference() {
                entry.emotion.clone_from(&req.emotion);
            }
            let new_docno = w.insert(entry)?;
            let new_id = w
                .docinfo(new_docno)?
                .map(|i| i.id)
                .ok_or_else(|| Error::Storage("lost docinfo".into()))?;
            let tier = old.layer.clone();
            old.superseded_by = Some(new_id.clone());
            old.superseded = true;
            w.replace(docno, old)?;
            super::audit::record_user_supersede(
                w,
                now,
                &req.old_id,
                &new_id,
                &tier,
                req.reason.as_deref(),
            )?;
            super::evict::enforce_caps(w, &self.settings)?;
            Ok(new_id)
        })
    }

    /// Compresses old episodic memories into a [`ConversationArchive`]: the episodes
    /// created more than `max_age` ago and not archived yet, if there are at least
    /// three. The summary is the first sentence of each (up to ten), key moments the
    /// first 200 characters of those of importance 7 or more; the archive is stored
    /// and the episodes are marked `archived` (recall's filters then skip them).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn archive_old_memories(
        &self,
        max_age: std::time::Duration,
    ) -> Result<Option<ConversationArchive>> {
        let now = self.now();
        let age = chrono::Duration::from_std(max_age).unwrap_or(chrono::Duration::MAX);
        let cutoff =
            now.checked_sub_signed(age).map_or(i64::MIN, |t| crate::model::time::to_micros(&t));
        self.write(|w| {
            let mut old: Vec<(i64, u64)> = Vec::new();
            for row in w.layer_order.range(("episodic", 0u64)..=("episodic", u64::MAX))? {
                let docno = row?.0.value().1;
                if let Some(info) = w.docinfo(docno)?
                    && !info.archived
                    && info.created_at < cutoff
                {
                    old.push((info.created_at, docno));
                }
            }
            if old.len() < 3 {
                return Ok(None);
            }
            old.sort_unstable();
            let mut entries = Vec::with_capacity(old.len());
            for &(_, d) in &old {
                if let Some(e) = w.get(d)? {
                    entries.push((d, e));
                }
            }
            let sentences: Vec<&str> = entries
                .iter()
                .map(|(_, e)| e.content.split('.').next().unwrap_or("").trim())
                .filter(|s| !s.is_empty())
                .collect();
            let summary = if sentences.is_empty() {
                "Archived memories.".to_owned()
            } else {
                format!("{}.", sentences.iter().take(10).copied().collect::<Vec<_>>().join(". "))
            };
            let first = entries.first().map(|(_, e)| e.created_at).unwrap_or(now);
            let last = entries.last().map(|(_, e)| e.created_at).unwrap_or(now);
            let mut id = uuid::Uuid::new_v4().simple().to_string();
            id.truncate(12);
            let archive = ConversationArchive {
                id,
                start_time: first,
                end_time: last,
                summary,
                key_moments: entries
                    .iter()
                    .filter(|(_, e)| e.importance >= 7)
                    .map(|(_, e)| e.content.chars().take(200).collect())
                    .collect(),
                participants: Vec::new(),
                memory_refs: entries.iter().map(|(_, e)| e.id.clone()).collect(),
                metadata: serde_json::Map::new(),
            };
            let seq = w.next_seq();
            let bytes = crate::storage::encode(&archive)?;
            w.txn().open_table(crate::storage::schema::ARCHIVES)?.insert(seq, bytes.as_slice())?;
            for (d, mut e) in entries {
                e.archived = true;
                w.replace(d, e)?;
            }
            Ok(Some(archive))
        })
    }

    /// Every stored conversation archive, oldest first.
    ///
    /// # Errors
    /// Storage errors, or a record that does not decode.
    pub fn archives(&self) -> Result<Vec<ConversationArchive>> {
        let r = self.read()?;
        let t = match r.txn().open_table(crate::storage::schema::ARCHIVES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for row in t.range::<u64>(..)? {
            out.push(crate::storage::decode(row?.1.value(), "conversation archive")?);
        }
        Ok(out)
    }
}
