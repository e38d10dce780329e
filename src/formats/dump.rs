//! [`MemoryDump`]: the reference's `MemoryManager.to_dict()` shape, and the
//! checked loading of every memory file (FORMAT.md §3, §7).

use std::collections::HashMap;

use indexmap::IndexMap;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::pyjson::{self, Dialect};
use crate::model::{
    ConversationArchive, CoreMemory, GeneralEvent, KnowledgeGraph, MemoryEntry, SelfModel,
};
use crate::{Error, Result};

/// The four built-in tiers that hold entry lists, in the reference's order.
pub const ENTRY_TIERS: [&str; 4] = ["episodic", "semantic", "procedural", "social"];

pub(crate) fn fmt_err(entry: impl Into<String>, problem: impl Into<String>) -> Error {
    Error::Format { entry: entry.into(), problem: problem.into() }
}

/// Everything the memory engine owns, in the shape of `MemoryManager.to_dict()`.
///
/// Entries keep the order they were read in. Which list an entry is in decides its
/// store (a `type: "semantic"` entry inside `social` stays social), and custom layers
/// map a layer name to its entries. Serialising gives the reference's JSON (all ten
/// keys; empty custom layers are left out, as the reference does).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryDump {
    /// Persona and human profile.
    pub core: CoreMemory,
    /// Episodic tier.
    pub episodic: Vec<MemoryEntry>,
    /// Semantic tier, superseded facts included.
    pub semantic: Vec<MemoryEntry>,
    /// Procedural tier.
    pub procedural: Vec<MemoryEntry>,
    /// Social tier.
    pub social: Vec<MemoryEntry>,
    /// Knowledge graph.
    pub graph: KnowledgeGraph,
    /// Self-model.
    pub self_model: SelfModel,
    /// General events (themes).
    pub general_events: Vec<GeneralEvent>,
    /// Conversation archives (not part of the reference's `.soul` zip).
    pub archives: Vec<ConversationArchive>,
    /// Custom layer name → its entries.
    #[serde(serialize_with = "ser_custom_layers")]
    pub custom_layers: IndexMap<String, Vec<MemoryEntry>>,
}

fn ser_custom_layers<S: Serializer>(
    layers: &IndexMap<String, Vec<MemoryEntry>>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_map(layers.iter().filter(|(_, v)| !v.is_empty()))
}

impl Default for MemoryDump {
    /// An empty store (the self-model has its six seed domains).
    fn default() -> Self {
        Self {
            core: CoreMemory::default(),
            episodic: Vec::new(),
            semantic: Vec::new(),
            procedural: Vec::new(),
            social: Vec::new(),
            graph: KnowledgeGraph::default(),
            self_model: SelfModel::default(),
            general_events: Vec::new(),
            archives: Vec::new(),
            custom_layers: IndexMap::new(),
        }
    }
}

impl<'de> Deserialize<'de> for MemoryDump {
    /// Reads the `to_dict()` JSON with every check of [`MemoryDump::from_value`].
    /// Self-describing formats only (it goes through `serde_json::Value`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        MemoryDump::from_value(v, "memory").map_err(serde::de::Error::custom)
    }
}

impl MemoryDump {
    /// The entries of a built-in tier by name (`episodic`, `semantic`, `procedural`,
    /// `social`).
    #[must_use]
    pub fn tier(&self, name: &str) -> Option<&Vec<MemoryEntry>> {
        match name {
            "episodic" => Some(&self.episodic),
            "semantic" => Some(&self.semantic),
            "procedural" => Some(&self.procedural),
            "social" => Some(&self.social),
            _ => None,
        }
    }

    /// Mutable access to a built-in tier by name.
    pub fn tier_mut(&mut self, name: &str) -> Option<&mut Vec<MemoryEntry>> {
        match name {
            "episodic" => Some(&mut self.episodic),
            "semantic" => Some(&mut self.semantic),
            "procedural" => Some(&mut self.procedural),
            "social" => Some(&mut self.social),
            _ => None,
        }
    }

    /// Every (layer name, entries) pair: the four built-in tiers, then the custom
    /// layers.
    pub fn layers(&self) -> impl Iterator<Item = (&str, &Vec<MemoryEntry>)> {
        [
            ("episodic", &self.episodic),
            ("semantic", &self.semantic),
            ("procedural", &self.procedural),
            ("social", &self.social),
        ]
        .into_iter()
        .chain(self.custom_layers.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// Number of entries in all layers.
    #[must_use]
    pub fn entry_count(&self) -> usize {
        self.layers().map(|(_, v)| v.len()).sum()
    }

    /// The reference writer's layout rule for directories: nested when a custom layer
    /// has entries or a built-in entry's domain is neither `""` nor `"default"`.
    #[must_use]
    pub fn needs_nested_layout(&self) -> bool {
        self.custom_layers.values().any(|v| !v.is_empty())
            || ENTRY_TIERS
                .iter()
                .filter_map(|t| self.tier(t))
                .flatten()
                .any(|e| !e.domain.is_empty() && e.domain != crate::DEFAULT_DOMAIN)
    }

    /// Reads a `to_dict()` JSON document. `source` names it in errors.
    ///
    /// # Errors
    /// Invalid JSON, a wrong shape, an invalid entry or a duplicate id, with the entry
    /// and the problem named.
    pub fn from_json_slice(bytes: &[u8], source: &str) -> Result<Self> {
        Self::from_value(parse_json(source, bytes)?, source)
    }

    /// Builds a dump from a parsed `to_dict()` value: missing (or `null`) keys mean
    /// empty, unknown keys are ignored, legacy entries get `layer = type` and
    /// `domain = "default"`.
    ///
    /// # Errors
    /// As [`MemoryDump::from_json_slice`].
    pub fn from_value(v: Value, source: &str) -> Result<Self> {
        let Value::Object(mut map) = v else {
            return Err(fmt_err(source, format!("expected a JSON object, found {}", kind(&v))));
        };
        let mut take = |k: &str| map.remove(k).filter(|v| !v.is_null());
        let mut d = MemoryDump::default();
        if let Some(v) = take("core") {
            d.core = core_from_value(&format!("{source}: core"), v)?;
        }
        for tier in ENTRY_TIERS {
            if let Some(v) = take(tier) {
                let list = entries_from_value(&format!("{source}: {tier}"), v)?;
                if let Some(t) = d.tier_mut(tier) {
                    *t = list;
                }
            }
        }
        if let Some(v) = take("graph") {
            d.graph = graph_from_value(&format!("{source}: graph"), v)?;
        }
        if let Some(v) = take("self_model") {
            d.self_model = self_model_from_value(&format!("{source}: self_model"), v)?;
        }
        if let Some(v) = take("general_events") {
            d.general_events = list_from_value(&format!("{source}: general_events"), v)?;
        }
        if let Some(v) = take("archives") {
            d.archives = list_from_value(&format!("{source}: archives"), v)?;
        }
        if let Some(v) = take("custom_layers") {
            d.custom_layers = custom_layers_from_value(&format!("{source}: custom_layers"), v)?;
        }
        d.check_unique_ids(source)?;
        Ok(d)
    }

    /// The `to_dict()` JSON as `json.dumps(indent=2)` writes it (ASCII, no trailing
    /// newline).
    ///
    /// # Errors
    /// Only if serialisation fails.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        to_json(self, Dialect::Ascii, "memory")
    }

    /// Fails when two entries of one layer (built-in tier or custom layer), or two
    /// general events, share an id.
    ///
    /// The reference silently keeps the last of such duplicates, losing the others;
    /// soulmem refuses the input instead so that nothing is dropped unseen.
    ///
    /// # Errors
    /// Names the layer, the id and both positions.
    pub fn check_unique_ids(&self, source: &str) -> Result<()> {
        for t in ENTRY_TIERS {
            let entries = self.tier(t).map_or(&[][..], Vec::as_slice);
            unique(source, t, entries.iter().map(|e| e.id.as_str()))?;
        }
        for (layer, entries) in &self.custom_layers {
            let label = format!("custom_layers[{layer:?}]");
            unique(source, &label, entries.iter().map(|e| e.id.as_str()))?;
        }
        unique(source, "general_events", self.general_events.iter().map(|e| e.id.as_str()))
    }

    /// Drops custom layers without entries (as the reference's `to_dict` does).
    pub fn drop_empty_layers(&mut self) {
        self.custom_layers.retain(|_, v| !v.is_empty());
    }
}

fn unique<'a>(source: &str, layer: &str, ids: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, id) in ids.enumerate() {
        if let Some(first) = seen.insert(id, i) {
            return Err(fmt_err(
                format!("{source}: {layer}"),
                format!(
                    "duplicate id {id:?} (items #{first} and #{i}); the reference would \
                     silently keep only the last"
                ),
            ));
        }
    }
    Ok(())
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Serialises in a dialect, mapping errors to [`Error::Format`].
pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T, d: Dialect, label: &str) -> Result<Vec<u8>> {
    pyjson::to_vec(v, d).map_err(|e| fmt_err(label, format!("cannot serialise: {e}")))
}

/// Parses JSON bytes (UTF-8 required).
pub(crate) fn parse_json(label: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| fmt_err(label, format!("invalid JSON: {e}")))
}

/// pydantic accepts `5.0` for an int field: turn integral floats into integers.
pub(crate) fn coerce_ints(obj: &mut serde_json::Map<String, Value>, fields: &[&str]) {
    for f in fields {
        if let Some(v) = obj.get_mut(*f)
            && let Some(x) = v.as_f64()
            && v.is_f64()
            && x.is_finite()
            && x.fract() == 0.0
            && x.abs() < 9.0e15
        {
            *v = Value::from(x as i64);
        }
    }
}

pub(crate) fn typed<T: DeserializeOwned>(label: &str, v: Value) -> Result<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            fmt_err(label, inner.to_string())
        } else {
            fmt_err(label, format!("{path}: {inner}"))
        }
    })
}

/// Reads one memory entry: ranges checked, legacy fields filled in.
pub(crate) fn entry_from_value(label: &str, mut v: Value) -> Result<MemoryEntry> {
    let Value::Object(obj) = &mut v else {
        return Err(fmt_err(label, format!("expected an entry object, found {}", kind(&v))));
    };
    let label = match obj.get("id").and_then(Value::as_str) {
        Some(id) => format!("{label} (id {id:?})"),
        None => label.to_owned(),
    };
    coerce_ints(obj, &["importance", "access_count"]);
    let mut e: MemoryEntry = typed(&label, v)?;
    e.normalize();
    e.validate().map_err(|p| fmt_err(&label, p))?;
    Ok(e)
}

/// Reads a JSON array of memory entries from bytes: straight into typed entries
/// when the input is clean (the fast path for big files), else through
/// [`entries_from_value`] for its coercions and precise error messages.
pub(crate) fn entries_from_slice(label: &str, bytes: &[u8]) -> Result<Vec<MemoryEntry>> {
    if let Ok(mut list) = serde_json::from_slice::<Vec<MemoryEntry>>(bytes) {
        let mut ok = true;
        for e in &mut list {
            e.normalize();
            if e.validate().is_err() {
                ok = false;
                break;
            }
        }
        if ok {
            return Ok(list);
        }
    }
    entries_from_value(label, parse_json(label, bytes)?)
}

/// Reads a JSON array of memory entries.
pub(crate) fn entries_from_value(label: &str, v: Value) -> Result<Vec<MemoryEntry>> {
    let Value::Array(items) = v else {
        return Err(fmt_err(label, format!("expected an array of entries, found {}", kind(&v))));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| entry_from_value(&format!("{label}[{i}]"), item))
        .collect()
}

/// Reads `custom_layers`: an object of entry arrays. Empty layers are dropped.
pub(crate) fn custom_layers_from_value(
    label: &str,
    v: Value,
) -> Result<IndexMap<String, Vec<MemoryEntry>>> {
    let Value::Object(map) = v else {
        return Err(fmt_err(label, format!("expected an object of layers, found {}", kind(&v))));
    };
    let mut out = IndexMap::new();
    for (layer, list) in map {
        if list.is_null() {
            continue;
        }
        let entries = entries_from_value(&format!("{label}[{layer:?}]"), list)?;
        if !entries.is_empty() {
            out.insert(layer, entries);
        }
    }
    Ok(out)
}

pub(crate) fn core_from_value(label: &str, v: Value) -> Result<CoreMemory> {
    if !v.is_object() {
        return Err(fmt_err(label, format!("expected an object, found {}", kind(&v))));
    }
    typed(label, v)
}

pub(crate) fn graph_from_value(label: &str, v: Value) -> Result<KnowledgeGraph> {
    match &v {
        Value::Object(m) if m.is_empty() => Ok(KnowledgeGraph::default()),
        Value::Object(_) => typed(label, v),
        _ => Err(fmt_err(label, format!("expected an object, found {}", kind(&v)))),
    }
}

pub(crate) fn self_model_from_value(label: &str, mut v: Value) -> Result<SelfModel> {
    let Value::Object(m) = &mut v else {
        return Err(fmt_err(label, format!("expected an object, found {}", kind(&v))));
    };
    if let Some(Value::Object(images)) = m.get_mut("self_images") {
        for img in images.values_mut() {
            if let Value::Object(o) = img {
                coerce_ints(o, &["evidence_count"]);
            }
        }
    }
    let sm: SelfModel = typed(label, v)?;
    sm.validate().map_err(|p| fmt_err(label, p))?;
    Ok(sm)
}

/// Reads a JSON array of typed items, naming the failing item.
pub(crate) fn list_from_value<T: DeserializeOwned>(label: &str, v: Value) -> Result<Vec<T>> {
    let Value::Array(items) = v else {
        return Err(fmt_err(label, format!("expected an array, found {}", kind(&v))));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let l = match item.get("id").and_then(Value::as_str) {
                Some(id) => format!("{label}[{i}] (id {id:?})"),
                None => format!("{label}[{i}]"),
            };
            typed(&l, item)
        })
        .collect()
}
