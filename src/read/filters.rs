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
        && info.user_id.as_ref().is_some_and(|owner| owner != u)
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

/// The docnos a `user_id` filter admits (the user's memories and the unattributed
/// ones), walked through the users index: each step moves a few rows forward, or
/// seeks when the target is further, so a sparse user costs a seek per candidate
/// and a dense one a row per candidate, never a record read.
pub struct UserDocs<'r> {
    owners: Vec<OwnerRows<'r>>,
    /// The last docno asked about.
    last: u64,
}

type UserRows<'r> = redb::Range<'r, (&'static str, u64), ()>;

/// One owner's rows of the users index.
struct OwnerRows<'r> {
    r: &'r Reader,
    owner: String,
    rows: Option<UserRows<'r>>,
    /// The current row (`u64::MAX` past the end); `None` before the first step.
    head: Option<u64>,
}

/// Rows walked before a seek is cheaper.
const GALLOP: usize = 8;

impl OwnerRows<'_> {
    fn seek(&mut self, d: u64) -> Result<()> {
        let owner = self.owner.as_str();
        let mut rows = self.r.users.range((owner, d)..=(owner, u64::MAX))?;
        self.head = Some(match rows.next() {
            Some(row) => row?.0.value().1,
            None => u64::MAX,
        });
        self.rows = Some(rows);
        Ok(())
    }

    fn next_ge(&mut self, d: u64) -> Result<u64> {
        match self.head {
            Some(h) if h >= d => return Ok(h),
            Some(h) if h < d => {
                for _ in 0..GALLOP {
                    let Some(rows) = self.rows.as_mut() else { break };
                    let h = match rows.next() {
                        Some(row) => row?.0.value().1,
                        None => u64::MAX,
                    };
                    self.head = Some(h);
                    if h >= d {
                        return Ok(h);
                    }
                }
            }
            _ => {}
        }
        self.seek(d)?;
        Ok(self.head.unwrap_or(u64::MAX))
    }
}

impl<'r> UserDocs<'r> {
    /// The memories `user` may be shown: theirs and the unattributed ones.
    #[must_use]
    pub fn new(r: &'r Reader, user: &str) -> Self {
        let mut owners = vec![OwnerRows { r, owner: String::new(), rows: None, head: None }];
        if !user.is_empty() {
            owners.push(OwnerRows { r, owner: user.to_owned(), rows: None, head: None });
        }
        Self { owners, last: 0 }
    }
}

impl crate::read::candidates::Allow for UserDocs<'_> {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        let mut best = u64::MAX;
        let backwards = d < self.last;
        self.last = d;
        for o in &mut self.owners {
            if backwards {
                o.head = None;
                o.rows = None;
            }
            best = best.min(o.next_ge(d)?);
        }
        Ok((best != u64::MAX).then_some(best))
    }
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
