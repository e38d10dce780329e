//! The scenario replay format (`SCENARIO_FORMAT.md`, v1): one JSON op per line in,
//! one JSON result per line out.

use std::io::{BufRead, Write};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::clock::FixedClock;
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::model::{Visibility, time};
use crate::write::lifecycle::Remember;
use crate::{DEFAULT_DOMAIN, Profile};

/// Counts of a replay.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplayStats {
    /// Ops read.
    pub ops: u64,
    /// Ops that produced an `error` line.
    pub errors: u64,
}

/// Options of a replay store beyond its profile.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// An embedder for hybrid recall.
    pub embedder: Option<Arc<dyn crate::Embedder>>,
    /// The hybrid fusion weight (default [`crate::read::vector::HYBRID_WEIGHT`]).
    pub hybrid_weight: Option<f64>,
    /// The hybrid fusion (default rank fusion).
    pub hybrid_fusion: Option<crate::read::vector::HybridFusion>,
    /// Vector candidates per recall.
    pub vector_candidates: Option<usize>,
}

impl ReplayOptions {
    fn builder(
        &self,
        profile: Profile,
        clock: Arc<FixedClock>,
        durable: bool,
    ) -> crate::MemoryBuilder {
        let mut settings = crate::Settings::for_profile(profile);
        settings.durable = durable;
        if let Some(w) = self.hybrid_weight {
            settings.hybrid_weight = w;
        }
        if let Some(f) = self.hybrid_fusion {
            settings.hybrid_fusion = f;
        }
        if let Some(n) = self.vector_candidates {
            settings.vector_candidates = n;
        }
        let mut b = Memory::builder().profile(profile).settings(settings).clock(clock);
        if let Some(e) = &self.embedder {
            b = b.embedder(Arc::clone(e));
        }
        b
    }
}

/// A memory and the fixed clock replay drives.
#[derive(Debug)]
pub struct Replayer {
    mem: Memory,
    clock: Arc<FixedClock>,
}

pub(crate) fn field<'a>(op: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    op.get(name).filter(|v| !v.is_null())
}

pub(crate) fn str_field(op: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match field(op, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Error::InvalidInput(format!("`{name}` must be a string, got {other}"))),
    }
}

pub(crate) fn req_str(op: &Map<String, Value>, name: &str) -> Result<String> {
    str_field(op, name)?.ok_or_else(|| Error::InvalidInput(format!("missing `{name}`")))
}

fn int_field(op: &Map<String, Value>, name: &str, default: i64) -> Result<i64> {
    match field(op, name) {
        None => Ok(default),
        Some(v) => v
            .as_i64()
            .or_else(|| {
                v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18).map(|f| f as i64)
            })
            .ok_or_else(|| Error::InvalidInput(format!("`{name}` must be an integer, got {v}"))),
    }
}

fn str_list(op: &Map<String, Value>, name: &str) -> Result<Option<Vec<String>>> {
    match field(op, name) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::InvalidInput(format!("`{name}` must list strings")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(other) => Err(Error::InvalidInput(format!("`{name}` must be a list, got {other}"))),
    }
}

impl Replayer {
    /// A replayer on an in-memory store of `profile`.
    ///
    /// # Errors
    /// If the store cannot be created.
    pub fn in_memory(profile: Profile) -> Result<Self> {
        Self::in_memory_with(profile, &ReplayOptions::default())
    }

    /// A replayer on an in-memory store of `profile`, with `opts`.
    ///
    /// # Errors
    /// If the store cannot be created.
    pub fn in_memory_with(profile: Profile, opts: &ReplayOptions) -> Result<Self> {
        let clock = Arc::new(FixedClock::new(chrono::DateTime::UNIX_EPOCH.naive_utc()));
        let mem = opts.builder(profile, clock.clone(), true).open_in_memory()?;
        Ok(Self { mem, clock })
    }

    /// A replayer on the store file at `path` (created with `profile` when new).
    ///
    /// # Errors
    /// If the store cannot be opened.
    pub fn open(path: &std::path::Path, profile: Profile) -> Result<Self> {
        Self::open_with(path, profile, &ReplayOptions::default())
    }

    /// A replayer on the store file at `path` (not durable), with `opts`.
    ///
    /// # Errors
    /// If the store cannot be opened.
    pub fn open_with(
        path: &std::path::Path,
        profile: Profile,
        opts: &ReplayOptions,
    ) -> Result<Self> {
        let clock = Arc::new(FixedClock::new(chrono::DateTime::UNIX_EPOCH.naive_utc()));
        let mem = opts.builder(profile, clock.clone(), false).open(path)?;
        Ok(Self { mem, clock })
    }

    /// The memory being driven.
    #[must_use]
    pub fn memory(&self) -> &Memory {
        &self.mem
    }

    /// Replays every line of `input`, writing one output line per op to `out`.
    ///
    /// # Errors
    /// Only I/O errors on `input` or `out`; a bad op becomes an `error` line.
    pub fn run(&self, input: impl BufRead, out: &mut impl Write) -> Result<ReplayStats> {
        let mut stats = ReplayStats::default();
        for line in input.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            stats.ops += 1;
            let result = self.apply_line(&line);
            if result.get("error").is_some() {
                stats.errors += 1;
            }
            serde_json::to_writer(&mut *out, &result).map_err(|e| Error::Io(e.into()))?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(stats)
    }

    /// Applies one scenario line and returns its output object.
    #[must_use]
    pub fn apply_line(&self, line: &str) -> Value {
        let parsed: std::result::Result<Value, _> = serde_json::from_str(line);
        let Ok(Value::Object(op)) = parsed else {
            return json!({"op": Value::Null, "error": "InvalidInput: the line is not a JSON object"});
        };
        let name = op.get("op").cloned().unwrap_or(Value::Null);
        let mut out = Map::new();
        out.insert("op".into(), name.clone());
        if let Some(tag) = op.get("tag") {
            out.insert("tag".into(), tag.clone());
        }
        match self.apply(&op) {
            Ok(fields) => out.extend(fields),
            Err(e) => {
                out.insert("error".into(), Value::String(e.to_string()));
            }
        }
        Value::Object(out)
    }

    fn apply(&self, op: &Map<String, Value>) -> Result<Map<String, Value>> {
        let name = req_str(op, "op")?;
        let at = req_str(op, "at")?;
        let at = time::parse_timestamp(&at).map_err(Error::InvalidInput)?;
        self.clock.set(at);
        let mut out = Map::new();
        match name.as_str() {
            "observe" => {
                let user = req_str(op, "user")?;
                let agent = str_field(op, "agent")?.unwrap_or_default();
                let opts = crate::write::observe::ObserveOptions {
                    user_id: str_field(op, "user_id")?,
                    domain: str_field(op, "domain")?.unwrap_or_else(|| DEFAULT_DOMAIN.to_owned()),
                };
                let report = self.mem.observe_pair(&user, &agent, &opts)?;
                out.insert("episodic".into(), Value::Bool(report.episodic_id.is_some()));
                out.insert(
                    "facts".into(),
                    report.facts.iter().map(|f| Value::String(f.content.clone())).collect(),
                );
                // One line per superseded fact: two facts with the same content are
                // listed twice.
                let mut sup: Vec<String> =
                    report.superseded.iter().map(|s| s.content.clone()).collect();
                sup.sort();
                out.insert("superseded".into(), sup.into_iter().map(Value::String).collect());
                let mut ents: Vec<String> =
                    report.entities.iter().map(|e| e.name.clone()).collect();
                ents.sort();
                ents.dedup();
                out.insert("entities".into(), ents.into_iter().map(Value::String).collect());
            }
            "remember" => {
                let layer = match (str_field(op, "type")?, str_field(op, "layer")?) {
                    (Some(t), _) => t,
                    (None, Some(l)) => l,
                    (None, None) => {
                        return Err(Error::InvalidInput("remember needs `type` or `layer`".into()));
                    }
                };
                let importance = int_field(op, "importance", 5)?;
                let importance =
                    u8::try_from(importance).ok().filter(|i| (1..=10).contains(i)).ok_or_else(
                        || Error::InvalidInput(format!("importance {importance} is not in 1..=10")),
                    )?;
                let visibility = match str_field(op, "visibility")? {
                    None => Visibility::Bonded,
                    Some(v) => Visibility::parse(&v)
                        .ok_or_else(|| Error::InvalidInput(format!("unknown visibility {v:?}")))?,
                };
                let req = Remember {
                    layer,
                    content: req_str(op, "content")?,
                    importance,
                    user_id: str_field(op, "user_id")?,
                    domain: str_field(op, "domain")?.unwrap_or_else(|| DEFAULT_DOMAIN.to_owned()),
                    visibility,
                    entities: str_list(op, "entities")?.unwrap_or_default(),
                };
                self.mem.remember(&req)?;
                out.insert("ok".into(), Value::Bool(true));
            }
            "recall" => {
                let limit = int_field(op, "limit", 10)?;
                let limit = usize::try_from(limit)
                    .map_err(|_| Error::InvalidInput(format!("limit {limit} is negative")))?;
                let mut q = crate::read::RecallQuery::new(req_str(op, "query")?);
                q.limit = limit;
                q.types = str_list(op, "types")?;
                q.layer = str_field(op, "layer")?;
                q.domain = str_field(op, "domain")?;
                q.user_id = str_field(op, "user_id")?;
                q.min_importance = i32::try_from(int_field(op, "min_importance", 0)?)
                    .map_err(|_| Error::InvalidInput("min_importance out of range".into()))?;
                q.requester_id = str_field(op, "requester_id")?;
                q.bond_strength = match field(op, "bond_strength") {
                    None => 100.0,
                    Some(v) => v.as_f64().ok_or_else(|| {
                        Error::InvalidInput("bond_strength must be a number".into())
                    })?,
                };
                let results = self.mem.recall(&q)?;
                out.insert(
                    "results".into(),
                    results.memories.iter().map(|m| Value::String(m.content.clone())).collect(),
                );
            }
            "forget" => {
                let report = self.mem.forget(&req_str(op, "query")?)?;
                out.insert("deleted".into(), Value::from(report.total()));
            }
            "facts" => {
                let all = self.mem.facts(true)?;
                let mut active: Vec<String> =
                    all.iter().filter(|f| !f.is_superseded()).map(|f| f.content.clone()).collect();
                let mut sup: Vec<String> =
                    all.iter().filter(|f| f.is_superseded()).map(|f| f.content.clone()).collect();
                active.sort();
                sup.sort();
                out.insert("active".into(), active.into_iter().map(Value::String).collect());
                out.insert("superseded".into(), sup.into_iter().map(Value::String).collect());
            }
            other => return Err(Error::InvalidInput(format!("unknown op {other:?}"))),
        }
        Ok(out)
    }
}
