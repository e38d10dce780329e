//! Audit trails of deletions and supersedes.

use crate::error::Result;
use crate::model::{MemoryEntry, Timestamp, time};
use crate::storage::{Writer, schema};

/// Appends a deletion record (counts per layer, no content) for `deleted`.
pub fn record_deletion(
    w: &mut Writer<'_>,
    at: Timestamp,
    reason: &str,
    deleted: &[&MemoryEntry],
) -> Result<()> {
    if deleted.is_empty() {
        return Ok(());
    }
    let mut tiers = serde_json::Map::new();
    for e in deleted {
        let n = tiers.get(&e.layer).and_then(serde_json::Value::as_u64).unwrap_or(0);
        tiers.insert(e.layer.clone(), (n + 1).into());
    }
    let rec = serde_json::json!({
        "deleted_at": format!("{}+00:00", time::format_timestamp(&at)),
        "count": deleted.len(),
        "reason": reason,
        "tiers": tiers,
        "ids": deleted.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
    });
    append(w, schema::DELETION_AUDIT, &rec)
}

/// Appends a supersede record.
pub fn record_supersede(
    w: &mut Writer<'_>,
    at: Timestamp,
    old_id: &str,
    new_id: &str,
    reason: &str,
) -> Result<()> {
    let rec = serde_json::json!({
        "old_id": old_id,
        "new_id": new_id,
        "reason": reason,
        "timestamp": format!("{}+00:00", time::format_timestamp(&at)),
    });
    append(w, schema::SUPERSEDE_AUDIT, &rec)
}

/// Appends a deletion record with explicit per-tier counts (graph edges included)
/// and the ids of the deleted memories.
pub fn record_deletion_counts(
    w: &mut Writer<'_>,
    at: Timestamp,
    reason: &str,
    count: u64,
    tiers: &[(String, u64)],
    deleted: &[MemoryEntry],
) -> Result<()> {
    let tiers: serde_json::Map<String, serde_json::Value> =
        tiers.iter().map(|(k, v)| (k.clone(), (*v).into())).collect();
    let rec = serde_json::json!({
        "deleted_at": format!("{}+00:00", time::format_timestamp(&at)),
        "count": count,
        "reason": reason,
        "tiers": tiers,
        "ids": deleted.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
    });
    append(w, schema::DELETION_AUDIT, &rec)
}

/// Appends the record of a user-driven supersede (`Memory::supersede`), in the
/// reference's shape: when, both ids, the old entry's tier and the reason.
pub fn record_user_supersede(
    w: &mut Writer<'_>,
    at: Timestamp,
    old_id: &str,
    new_id: &str,
    tier: &str,
    reason: Option<&str>,
) -> Result<()> {
    let rec = serde_json::json!({
        "superseded_at": format!("{}+00:00", time::format_timestamp(&at)),
        "old_id": old_id,
        "new_id": new_id,
        "tier": tier,
        "reason": reason,
    });
    append(w, schema::SUPERSEDE_AUDIT, &rec)
}

fn append(
    w: &mut Writer<'_>,
    def: redb::TableDefinition<u64, &[u8]>,
    rec: &serde_json::Value,
) -> Result<()> {
    let seq = w.next_seq();
    let bytes = serde_json::to_vec(rec).map_err(|e| crate::Error::Storage(e.to_string()))?;
    w.txn().open_table(def)?.insert(seq, bytes.as_slice())?;
    Ok(())
}
