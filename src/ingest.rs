//! Bulk ingest of scenario files (`SCENARIO_FORMAT.md`): `observe` and `remember`
//! ops applied in batches, one write transaction per batch, with the number of ops
//! consumed stored in the same transaction (meta [`meta_keys::INGESTED_OPS`]) so an
//! interrupted ingest resumes exactly where the last commit left it.
//!
//! Every op sets the clock to its own `at`. Ops other than `observe` and `remember`
//! (`recall`, `forget`, `facts`, …) are consumed and counted but change nothing.

use serde_json::Value;

use crate::DEFAULT_DOMAIN;
use crate::error::{Error, Result};
use crate::memory::{Durability, Memory};
use crate::model::{Timestamp, Visibility, time};
use crate::storage::{Writer, meta_keys, schema};
use crate::write::lifecycle::{self, Remember};
use crate::write::observe::{ObserveOptions, observe_in};

/// One scenario op as ingest sees it.
#[derive(Debug, Clone)]
pub enum IngestOp {
    /// An exchange for the observe pipeline.
    Observe {
        /// The op's clock.
        at: Timestamp,
        /// The user's turn.
        user: String,
        /// The agent's turn.
        agent: String,
        /// User and domain.
        opts: ObserveOptions,
    },
    /// A memory stored directly.
    Remember {
        /// The op's clock.
        at: Timestamp,
        /// What to store.
        req: Remember,
    },
    /// An op ingest does not apply (`recall`, `forget`, `facts`, …): counted only.
    Skip {
        /// The op's name.
        op: String,
    },
}

impl IngestOp {
    /// Whether the op changes the store.
    #[must_use]
    pub fn is_applied(&self) -> bool {
        !matches!(self, IngestOp::Skip { .. })
    }
}

use crate::replay::{field, req_str, str_field};

/// Parses one scenario line. Everything ingest could refuse later (names, sizes,
/// ranges) is checked here, so a batch of parsed ops applies without input errors.
///
/// # Errors
/// [`Error::InvalidInput`] saying what is wrong with the line.
pub fn parse_op(line: &str) -> Result<IngestOp> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| Error::InvalidInput(format!("not a JSON object: {e}")))?;
    let Value::Object(op) = v else {
        return Err(Error::InvalidInput("the line is not a JSON object".into()));
    };
    let name = req_str(&op, "op")?;
    if name != "observe" && name != "remember" {
        return Ok(IngestOp::Skip { op: name });
    }
    let at = time::parse_timestamp(&req_str(&op, "at")?).map_err(Error::InvalidInput)?;
    let domain = str_field(&op, "domain")?.unwrap_or_else(|| DEFAULT_DOMAIN.to_owned());
    schema::validate_name("domain", &domain)?;
    let user_id = str_field(&op, "user_id")?;
    if name == "observe" {
        let user = req_str(&op, "user")?;
        let agent = str_field(&op, "agent")?.unwrap_or_default();
        lifecycle::check_text(&user)?;
        lifecycle::check_text(&agent)?;
        return Ok(IngestOp::Observe { at, user, agent, opts: ObserveOptions { user_id, domain } });
    }
    let layer = match (str_field(&op, "type")?, str_field(&op, "layer")?) {
        (Some(t), _) => t,
        (None, Some(l)) => l,
        (None, None) => return Err(Error::InvalidInput("remember needs `type` or `layer`".into())),
    };
    schema::validate_name("layer", &layer)?;
    if layer == "core" {
        return Err(Error::InvalidInput("core memory is not stored as entries".into()));
    }
    let importance = match field(&op, "importance") {
        None => 5,
        Some(v) => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (1.0..=10.0).contains(f))
            .map(|f| f as u8)
            .ok_or_else(|| Error::InvalidInput(format!("importance {v} is not in 1..=10")))?,
    };
    let visibility = match str_field(&op, "visibility")? {
        None => Visibility::Bonded,
        Some(v) => Visibility::parse(&v)
            .ok_or_else(|| Error::InvalidInput(format!("unknown visibility {v:?}")))?,
    };
    let entities = match field(&op, "entities") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::InvalidInput("`entities` must list strings".into()))
            })
            .collect::<Result<Vec<_>>>()?,
        Some(other) => {
            return Err(Error::InvalidInput(format!("`entities` must be a list, got {other}")));
        }
    };
    let content = req_str(&op, "content")?;
    lifecycle::check_text(&content)?;
    Ok(IngestOp::Remember {
        at,
        req: Remember { layer, content, importance, user_id, domain, visibility, entities },
    })
}

fn read_counter(bytes: Option<Vec<u8>>) -> u64 {
    bytes.and_then(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes)).unwrap_or(0)
}

impl Memory {
    /// Ops consumed by ingest so far (meta [`meta_keys::INGESTED_OPS`]).
    ///
    /// # Errors
    /// Storage errors only.
    pub fn ingested_ops(&self) -> Result<u64> {
        Ok(read_counter(self.read()?.meta_get(meta_keys::INGESTED_OPS)?))
    }

    /// Applies a batch of ops in one write transaction (all or none), each with the
    /// clock at its `at`, and adds `ops.len()` to the ingested-ops counter in the
    /// same transaction. Returns the counter after the commit.
    ///
    /// # Errors
    /// Storage errors; nothing of the batch is written then.
    pub fn ingest_batch(&self, ops: &[IngestOp]) -> Result<u64> {
        self.ingest_batch_with(ops, self.durability())
    }

    /// [`Memory::ingest_batch`] committed with the given [`Durability`]. A
    /// deferred batch's counter is lost with it in a crash, so a resumed ingest
    /// redoes exactly the batches the store lost.
    ///
    /// # Errors
    /// As [`Memory::ingest_batch`].
    pub fn ingest_batch_with(&self, ops: &[IngestOp], durability: Durability) -> Result<u64> {
        let settings = &self.settings;
        let profile = self.profile();
        self.write_synced(durability.synced(), |w: &mut Writer<'_>| {
            for op in ops {
                match op {
                    IngestOp::Observe { at, user, agent, opts } => {
                        observe_in(w, settings, *at, user, agent, opts)?;
                    }
                    IngestOp::Remember { at, req } => {
                        let entry = lifecycle::remember_entry(req, profile, *at)?;
                        w.insert(entry)?;
                        crate::write::evict::enforce_caps(w, settings)?;
                    }
                    IngestOp::Skip { .. } => {}
                }
            }
            let total = read_counter(w.meta_get(meta_keys::INGESTED_OPS)?) + ops.len() as u64;
            w.meta_put(meta_keys::INGESTED_OPS, &total.to_le_bytes())?;
            Ok(total)
        })
    }
}
