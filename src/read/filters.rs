//! Recall filters: who may see what.

use crate::error::Result;
use crate::model::{MemoryType, Visibility};
use crate::read::query::RecallQuery;
use crate::storage::{DocInfo, Reader};

/// True when `outer` contains `inner` by hierarchical glob rules (`*` contains all;
/// `a:b:*` contains `a:b` and every `a:b:…`; equal strings contain each other).
#[must_use]
pub fn scope_contains(outer: &str, inner: &str) -> bool {
    if outer == "*" || outer == inner {
        return true;
    }
    if let Some(prefix) = outer.strip_suffix(":*") {
        return inner == prefix || inner.starts_with(&format!("{prefix}:"));
    }
    false
}

/// soul-protocol's `match_scope`: a memory without scopes is visible to every caller,
/// a caller without scopes sees everything, otherwise one pair must contain the other
/// in either direction.
#[must_use]
pub fn match_scope(entity: &[String], allowed: &[String]) -> bool {
    if entity.is_empty() || allowed.is_empty() {
        return true;
    }
    entity.iter().any(|e| allowed.iter().any(|a| scope_contains(e, a) || scope_contains(a, e)))
}

/// Visibility by requester: the soul itself (`None`) sees all; others see public
/// memories, and bonded ones when their bond reaches the threshold.
#[must_use]
pub fn visible_to(vis: Visibility, requester: Option<&str>, bond: f64, threshold: f64) -> bool {
    match (requester, vis) {
        (None, _) | (Some(_), Visibility::Public) => true,
        (Some(_), Visibility::Bonded) => bond >= threshold,
        (Some(_), Visibility::Private) => false,
    }
}

/// Whether a `user_id` filter for `user` shows the memory of `info`: it is theirs
/// or nobody's.
fn shown_to(info: &DocInfo, user: &str) -> bool {
    info.user_id.as_deref().is_none_or(|owner| owner == user)
}

/// The first filter of `q` that excludes `info`, by name; `None` when it passes.
#[must_use]
pub fn rejects(q: &RecallQuery, info: &DocInfo, bond_threshold: f64) -> Option<&'static str> {
    let kind = info.kind();
    if kind == MemoryType::Core {
        return Some("core");
    }
    if let Some(layer) = &q.layer {
        if &info.layer != layer {
            return Some("layer");
        }
    } else if let Some(types) = &q.types
        && !types.iter().any(|t| t == &info.layer)
    {
        return Some("types");
    }
    if q.domain.as_ref().is_some_and(|d| d != &info.domain) {
        return Some("domain");
    }
    if let Some(u) = &q.user_id
        && !shown_to(info, u)
    {
        return Some("user_id");
    }
    if i32::from(info.importance) < q.min_importance {
        return Some("min_importance");
    }
    if info.superseded && !q.include_superseded {
        return Some("superseded");
    }
    if info.archived {
        return Some("archived");
    }
    if !visible_to(info.visibility(), q.requester_id.as_deref(), q.bond_strength, bond_threshold) {
        return Some("visibility");
    }
    if let Some(allowed) = &q.scopes
        && !match_scope(&info.scope, allowed)
    {
        return Some("scope");
    }
    None
}

/// The owners whose memories `user` may be shown: the unattributed ones (`""`)
/// and the user's own.
#[must_use]
pub fn owners(user: &str) -> Vec<&str> {
    if user.is_empty() { vec![""] } else { vec!["", user] }
}

/// Memories sampled by [`holds_most`].
const SAMPLES: u64 = 64;

/// Whether the memories `user` may be shown (theirs and the unattributed ones)
/// are at least half the store, judged from [`SAMPLES`] docnos spread over the
/// store's range (a golden-ratio sequence, so no stride of owners aliases with
/// it); `false` when fewer than a quarter of the samples are memories.
///
/// For such a user their owner terms' postings are no help to the search:
/// nearly every block of every term holds their memories, and walking those
/// postings beside the query terms' visits about as many postings again. The
/// filter is then checked on the records of the memories that place, as every
/// other filter is.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub fn holds_most(r: &Reader, user: &str) -> Result<bool> {
    let span = r.stats().next_docno;
    let (mut found, mut theirs) = (0u64, 0u64);
    for i in 1..=SAMPLES {
        // The fractional part of i·φ, in 64-bit fixed point, scaled to the range.
        let frac = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let d = ((u128::from(frac) * u128::from(span)) >> 64) as u64;
        if let Some(info) = r.docinfo(d)? {
            found += 1;
            if shown_to(&info, user) {
                theirs += 1;
            }
        }
    }
    Ok(found * 4 >= SAMPLES && theirs * 2 >= found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_globs_match_both_ways() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert!(match_scope(&s(&["org:sales:leads"]), &s(&["org:sales:*"])));
        assert!(match_scope(&s(&["org:sales:*"]), &s(&["org:sales:leads"])));
        assert!(match_scope(&s(&["org:sales:*"]), &s(&["org:*"])));
        assert!(!match_scope(&s(&["org:sales:leads"]), &s(&["org:support:*"])));
        assert!(match_scope(&s(&[]), &s(&["org:support:*"])));
        assert!(!match_scope(&s(&["org:salesforce"]), &s(&["org:sales:*"])));
    }

    #[test]
    fn visibility_tiers() {
        assert!(visible_to(Visibility::Private, None, 0.0, 30.0));
        assert!(!visible_to(Visibility::Private, Some("x"), 100.0, 30.0));
        assert!(visible_to(Visibility::Bonded, Some("x"), 30.0, 30.0));
        assert!(!visible_to(Visibility::Bonded, Some("x"), 29.9, 30.0));
        assert!(visible_to(Visibility::Public, Some("x"), 0.0, 30.0));
    }
}
