//! [`SoulDocument`]: a whole soul as files carry it, independent of storage.

use serde_json::{Map, Value};

use super::dump::{
    MemoryDump, coerce_ints, core_from_value, custom_layers_from_value, entries_from_slice,
    fmt_err, graph_from_value, kind, list_from_value, parse_json, self_model_from_value, to_json,
    typed,
};
use super::pyjson::Dialect;
use crate::Result;
use crate::model::time::{Timestamp, format_timestamp};
use crate::model::{CoreMemory, MemorySettings};

/// A soul: the memory engine's state plus the parts it carries through untouched.
#[derive(Debug, Clone, PartialEq)]
pub struct SoulDocument {
    /// Everything the memory engine owns (the `to_dict()` shape).
    pub memory: MemoryDump,
    /// `soul.json` as read (a JSON object with at least `identity.name`). Unknown keys
    /// are kept. Its `memory` settings are read with [`SoulDocument::memory_settings`];
    /// its `core_memory` is replaced by `memory.core` when written.
    pub soul: Value,
    /// `dna.md`, raw bytes.
    pub dna_md: Option<Vec<u8>>,
    /// `state.json`, raw bytes (nothing reads it; written from `soul.state` when absent).
    pub state_json: Option<Vec<u8>>,
    /// The archive's `manifest.json` as read (its `stats` and `eternal` are kept when
    /// writing).
    pub manifest: Option<Value>,
    /// `trust_chain/chain.json` (an object with `did` and `entries`).
    pub trust_chain: Option<Value>,
    /// `keys/public.key`, raw bytes.
    pub public_key: Option<Vec<u8>>,
    /// `keys/private.key`, raw bytes.
    pub private_key: Option<Vec<u8>>,
}

/// Checks `soul.json`: an object whose `identity.name` is a string and whose `memory`
/// settings (when present) are valid.
pub(crate) fn check_soul_json(label: &str, soul: &Value) -> Result<()> {
    let Value::Object(m) = soul else {
        return Err(fmt_err(label, format!("expected a JSON object, found {}", kind(soul))));
    };
    match m.get("identity") {
        Some(Value::Object(id)) => match id.get("name") {
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(fmt_err(
                    label,
                    format!("identity.name must be a string, found {}", kind(other)),
                ));
            }
            None => return Err(fmt_err(label, "identity.name is required")),
        },
        Some(other) => {
            return Err(fmt_err(
                label,
                format!("identity must be an object, found {}", kind(other)),
            ));
        }
        None => return Err(fmt_err(label, "identity is required")),
    }
    settings_of(label, soul).map(|_| ())
}

fn settings_of(label: &str, soul: &Value) -> Result<MemorySettings> {
    match soul.get("memory") {
        None | Some(Value::Null) => Ok(MemorySettings::default()),
        Some(v) => {
            let mut v = v.clone();
            let Value::Object(o) = &mut v else {
                return Err(fmt_err(
                    format!("{label}: memory"),
                    format!("expected an object, found {}", kind(&v)),
                ));
            };
            coerce_ints(
                o,
                &[
                    "episodic_max_entries",
                    "semantic_max_facts",
                    "importance_threshold",
                    "persona_tokens",
                    "human_tokens",
                    "consolidation_interval",
                ],
            );
            typed(&format!("{label}: memory"), v)
        }
    }
}

/// Checks `trust_chain/chain.json`: an object with a string `did` and an `entries`
/// array of objects.
pub(crate) fn check_chain(label: &str, chain: &Value) -> Result<()> {
    let ok = chain.get("did").is_some_and(Value::is_string)
        && chain
            .get("entries")
            .is_none_or(|e| e.as_array().is_some_and(|a| a.iter().all(Value::is_object)));
    if ok {
        Ok(())
    } else {
        Err(fmt_err(label, "expected {\"did\": string, \"entries\": [object, ...]}"))
    }
}

impl SoulDocument {
    /// A document from a `soul.json` value and a memory dump.
    ///
    /// # Errors
    /// When `soul` lacks `identity.name` or has invalid memory settings.
    pub fn new(soul: Value, memory: MemoryDump) -> Result<Self> {
        check_soul_json("soul.json", &soul)?;
        Ok(Self {
            memory,
            soul,
            dna_md: None,
            state_json: None,
            manifest: None,
            trust_chain: None,
            public_key: None,
            private_key: None,
        })
    }

    /// `identity.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.soul.pointer("/identity/name").and_then(Value::as_str).unwrap_or("")
    }

    /// `identity.did` (empty when missing).
    #[must_use]
    pub fn did(&self) -> &str {
        self.soul.pointer("/identity/did").and_then(Value::as_str).unwrap_or("")
    }

    /// The memory settings from `soul.json` (defaults for missing fields).
    ///
    /// # Errors
    /// When the stored settings are invalid.
    pub fn memory_settings(&self) -> Result<MemorySettings> {
        settings_of("soul.json", &self.soul)
    }

    /// Replaces the memory settings in `soul.json`.
    ///
    /// # Errors
    /// When `soul.json` is not an object.
    pub fn set_memory_settings(&mut self, settings: &MemorySettings) -> Result<()> {
        let v = serde_json::to_value(settings)
            .map_err(|e| fmt_err("soul.json: memory", e.to_string()))?;
        self.soul_object_mut()?.insert("memory".into(), v);
        Ok(())
    }

    fn soul_object_mut(&mut self) -> Result<&mut Map<String, Value>> {
        self.soul.as_object_mut().ok_or_else(|| fmt_err("soul.json", "not a JSON object"))
    }

    /// Chain entries (empty when there is no chain).
    #[must_use]
    pub fn chain_entries(&self) -> &[Value] {
        self.trust_chain
            .as_ref()
            .and_then(|c| c.get("entries"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// The files of a soul (directory or archive) in the reference's order, as
    /// `(path, bytes)`: `soul.json`, `dna.md`, `state.json`, the trust chain, the keys.
    /// Memory files are added by the callers.
    pub(crate) fn common_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut soul = self.soul.clone();
        if let Value::Object(m) = &mut soul {
            let core = serde_json::to_value(&self.memory.core)
                .map_err(|e| fmt_err("soul.json", e.to_string()))?;
            m.insert("core_memory".into(), core);
        }
        out.push(("soul.json".to_owned(), to_json(&soul, Dialect::Pydantic, "soul.json")?));
        if let Some(d) = &self.dna_md {
            out.push(("dna.md".to_owned(), d.clone()));
        }
        match (&self.state_json, self.soul.get("state")) {
            (Some(s), _) => out.push(("state.json".to_owned(), s.clone())),
            (None, Some(st)) => {
                out.push(("state.json".to_owned(), to_json(st, Dialect::Pydantic, "state.json")?));
            }
            (None, None) => {}
        }
        out.extend(self.chain_files()?);
        if let Some(k) = &self.public_key {
            out.push(("keys/public.key".to_owned(), k.clone()));
        }
        if let Some(k) = &self.private_key {
            out.push(("keys/private.key".to_owned(), k.clone()));
        }
        Ok(out)
    }

    fn chain_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let Some(chain) = &self.trust_chain else { return Ok(Vec::new()) };
        let entries = self.chain_entries();
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = vec![(
            "trust_chain/chain.json".to_owned(),
            to_json(chain, Dialect::Ascii, "trust_chain/chain.json")?,
        )];
        for e in entries {
            let seq = e.get("seq").and_then(Value::as_i64).unwrap_or(0);
            let name = format!("trust_chain/entry_{seq:03}.json");
            let bytes = to_json(e, Dialect::Ascii, &name)?;
            out.push((name, bytes));
        }
        Ok(out)
    }

    /// A fresh manifest: `created` = `identity.born`, `exported` as given, `stats`
    /// and `eternal` kept from the manifest read (with `version`, `lifecycle` and
    /// `role` refreshed from `soul.json`), `checksum` = `""`.
    pub(crate) fn manifest_value(&self, encrypted: bool, exported: Timestamp) -> Value {
        let old = self.manifest.as_ref();
        let exported = Value::String(format_timestamp(&exported));
        let created = self
            .soul
            .pointer("/identity/born")
            .filter(|v| v.is_string())
            .cloned()
            .unwrap_or_else(|| exported.clone());
        let mut stats = old
            .and_then(|m| m.get("stats"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (key, ptr, default) in [
            ("version", "/version", "1.0.0"),
            ("lifecycle", "/lifecycle", "active"),
            ("role", "/identity/role", ""),
        ] {
            match self.soul.pointer(ptr) {
                Some(v) => {
                    stats.insert(key.into(), v.clone());
                }
                None => {
                    stats.entry(key).or_insert_with(|| Value::from(default));
                }
            }
        }
        let eternal =
            old.and_then(|m| m.get("eternal")).filter(|v| v.is_object()).cloned().unwrap_or_else(
                || serde_json::json!({"ipfs": {}, "arweave": {}, "blockchain": {}}),
            );
        let mut m = Map::new();
        m.insert("format_version".into(), "1.0.0".into());
        m.insert("created".into(), created);
        m.insert("exported".into(), exported);
        m.insert("soul_id".into(), self.did().into());
        m.insert("soul_name".into(), self.name().into());
        m.insert("checksum".into(), "".into());
        m.insert("encrypted".into(), encrypted.into());
        m.insert("stats".into(), Value::Object(stats));
        m.insert("eternal".into(), eternal);
        Value::Object(m)
    }
}

/// `(label, bytes)` of the files that make up one layer, in order.
pub(crate) type LayerFiles = Vec<(String, Vec<u8>)>;

/// The plain contents of the files a loader found, by logical name
/// (`memory/semantic.json`, …), before they are checked and assembled.
#[derive(Default)]
pub(crate) struct Found {
    pub soul: Option<(String, Vec<u8>)>,
    pub dna_md: Option<Vec<u8>>,
    pub state_json: Option<Vec<u8>>,
    pub manifest: Option<Value>,
    /// `(label, bytes)` of `memory/core.json`.
    pub core: Option<(String, Vec<u8>)>,
    /// Per built-in tier: the files that make it up, concatenated in order.
    pub tiers: [Option<LayerFiles>; 4],
    pub graph: Option<(String, Vec<u8>)>,
    pub self_model: Option<(String, Vec<u8>)>,
    pub general_events: Option<(String, Vec<u8>)>,
    pub archives: Option<(String, Vec<u8>)>,
    /// `memory/custom_layers.json` (archives).
    pub custom_layers_json: Option<(String, Vec<u8>)>,
    /// Custom layer directories (nested directories): layer → files.
    pub custom_dirs: Vec<(String, LayerFiles)>,
    pub chain: Option<(String, Vec<u8>)>,
    pub public_key: Option<Vec<u8>>,
    pub private_key: Option<Vec<u8>>,
    /// Whether anything the reference counts as memory data was found.
    pub any_memory_data: bool,
}

impl Found {
    /// Checks and assembles everything; nothing is returned unless all of it is valid.
    pub(crate) fn assemble(self, source: &str) -> Result<SoulDocument> {
        let (soul_label, soul_bytes) = self
            .soul
            .ok_or_else(|| fmt_err(format!("{source}: soul.json"), "missing: not a soul"))?;
        let soul = parse_json(&soul_label, &soul_bytes)?;
        check_soul_json(&soul_label, &soul)?;

        let mut memory = MemoryDump::default();
        if let Some((l, b)) = self.core {
            memory.core = core_from_value(&l, parse_json(&l, &b)?)?;
        } else if !self.any_memory_data {
            // The reference uses soul.json's core only when no memory data was found.
            if let Some(c) = soul.get("core_memory").filter(|v| !v.is_null()) {
                memory.core = serde_json::from_value::<CoreMemory>(c.clone())
                    .map_err(|e| fmt_err(format!("{soul_label}: core_memory"), e.to_string()))?;
            }
        }
        for (i, files) in self.tiers.into_iter().enumerate() {
            let Some(files) = files else { continue };
            let mut all = Vec::new();
            for (l, b) in files {
                all.extend(entries_from_slice(&l, &b)?);
            }
            if let Some(t) = memory.tier_mut(super::dump::ENTRY_TIERS[i]) {
                *t = all;
            }
        }
        if let Some((l, b)) = self.graph {
            memory.graph = graph_from_value(&l, parse_json(&l, &b)?)?;
        }
        if let Some((l, b)) = self.self_model {
            let v = parse_json(&l, &b)?;
            if v.as_object().is_none_or(|m| !m.is_empty()) {
                memory.self_model = self_model_from_value(&l, v)?;
            }
        }
        if let Some((l, b)) = self.general_events {
            memory.general_events = list_from_value(&l, parse_json(&l, &b)?)?;
        }
        if let Some((l, b)) = self.archives {
            memory.archives = list_from_value(&l, parse_json(&l, &b)?)?;
        }
        if let Some((l, b)) = self.custom_layers_json {
            memory.custom_layers = custom_layers_from_value(&l, parse_json(&l, &b)?)?;
        }
        for (layer, files) in self.custom_dirs {
            let mut all = Vec::new();
            for (l, b) in files {
                all.extend(entries_from_slice(&l, &b)?);
            }
            if !all.is_empty() {
                memory.custom_layers.insert(layer, all);
            }
        }
        memory.check_unique_ids(source)?;

        let trust_chain = match self.chain {
            Some((l, b)) => {
                let v = parse_json(&l, &b)?;
                check_chain(&l, &v)?;
                Some(v)
            }
            None => None,
        };
        Ok(SoulDocument {
            memory,
            soul,
            dna_md: self.dna_md,
            state_json: self.state_json,
            manifest: self.manifest,
            trust_chain,
            public_key: self.public_key,
            private_key: self.private_key,
        })
    }
}

/// Python truthiness of a JSON value (`manifest.encrypted`).
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}
