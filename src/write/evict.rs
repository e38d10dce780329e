//! Eviction at the settings' caps.
//!
//! Semantic facts: the least important, oldest first (the reference's rule), read
//! from the importance index's first row. Episodic entries: the reference scores
//! `significance·2 + importance·0.1 + access_count·0.5` and evicts the lowest; the
//! reference profile reproduces that by scanning the (capped, so bounded) layer,
//! the default profile takes the importance index's first row.

use redb::ReadableTable;

use crate::Profile;
use crate::error::Result;
use crate::memory::Settings;
use crate::storage::Writer;

fn layer_len(w: &Writer<'_>, layer: &str) -> Result<u64> {
    // Count through the layer-order index; caps are small where they are on.
    let mut n = 0u64;
    for row in w.layer_order.range((layer, 0u64)..=(layer, u64::MAX))? {
        row?;
        n += 1;
    }
    Ok(n)
}

fn first_by_importance(w: &Writer<'_>, layer: &str) -> Result<Option<u64>> {
    let lo = (layer, 0u8, i64::MIN, 0u64);
    let hi = (layer, u8::MAX, i64::MAX, u64::MAX);
    match w.importance.range(lo..=hi)?.next() {
        Some(row) => Ok(Some(row?.0.value().3)),
        None => Ok(None),
    }
}

fn least_significant_episode(w: &Writer<'_>) -> Result<Option<u64>> {
    let mut best: Option<(f64, u64)> = None;
    for row in w.layer_order.range(("episodic", 0u64)..=("episodic", u64::MAX))? {
        let docno = row?.0.value().1;
        if let Some(info) = w.docinfo(docno)? {
            let score = info.significance * 2.0
                + f64::from(info.importance) * 0.1
                + f64::from(info.access_count) * 0.5;
            if best.is_none_or(|(s, _)| score < s) {
                best = Some((score, docno));
            }
        }
    }
    Ok(best.map(|(_, d)| d))
}

/// Evicts from a layer until it holds at most `cap` entries.
fn enforce(w: &mut Writer<'_>, layer: &str, cap: u64) -> Result<()> {
    while layer_len(w, layer)? > cap {
        let victim = if layer == "episodic" && w.profile() == Profile::Reference {
            least_significant_episode(w)?
        } else {
            first_by_importance(w, layer)?
        };
        match victim {
            Some(d) => {
                w.remove(d)?;
            }
            None => break,
        }
    }
    Ok(())
}

/// Applies the episodic and semantic caps of `settings`.
pub fn enforce_caps(w: &mut Writer<'_>, settings: &Settings) -> Result<()> {
    if let Some(cap) = settings.episodic_max_entries {
        enforce(w, "episodic", cap)?;
    }
    if let Some(cap) = settings.semantic_max_facts {
        enforce(w, "semantic", cap)?;
    }
    Ok(())
}
