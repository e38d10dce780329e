//! Remember, forget and supersede: the lifecycle calls around the pipelines.

use std::collections::BTreeSet;

use redb::ReadableTable;

use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::model::{MemoryEntry, MemoryType, Timestamp, Visibility};
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
        // which rewrites the content and drops everything but the domain.
        e.content = format!("User: {}\nAgent: ", req.content);
        e.access_timestamps = vec![now];
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
pub(crate) fn matching_docnos(w: &Writer<'_>, query: &str) -> Result<BTreeSet<u64>> {
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
        for row in w.postings.range((t.as_str(), 0u64)..=(t.as_str(), u64::MAX))? {
            out.insert(row?.0.value().1);
        }
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
