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
/// and a dense one a row per candidate, never a record read. The rows a walk has
/// stepped through are kept, so the later passes of the same recall (a second
/// ranking pass, graph expansion) search them instead of walking the index again.
pub struct UserDocs<'r> {
    owners: Vec<OwnerRows<'r>>,
}

type UserRows<'r> = redb::Range<'r, (&'static str, u64), ()>;

/// One owner's rows of the users index.
struct OwnerRows<'r> {
    r: &'r Reader,
    owner: String,
    rows: Option<UserRows<'r>>,
    /// The current row (`u64::MAX` past the end); `None` before the first step.
    head: Option<u64>,
    /// The last target the walk answered: a smaller one restarts it.
    walked_to: u64,
    /// The rows the walk stepped through from its first seek on, in order: every
    /// row of the owner from `memo_from` to the last one kept (to the end of the
    /// owner's rows when `memo_end`).
    memo: Vec<u64>,
    memo_from: u64,
    /// Still extended by the walk: false once a seek skipped rows, the walk
    /// restarted, or the memo is full.
    memo_open: bool,
    memo_end: bool,
}

/// Rows walked before a seek is cheaper.
const GALLOP: usize = 8;

/// Rows kept per owner (512 KiB): a denser owner is walked again past them.
const MEMO_MAX: usize = 1 << 16;

impl<'r> OwnerRows<'r> {
    fn new(r: &'r Reader, owner: &str) -> Self {
        Self {
            r,
            owner: owner.to_owned(),
            rows: None,
            head: None,
            walked_to: 0,
            memo: Vec::new(),
            memo_from: 0,
            memo_open: true,
            memo_end: false,
        }
    }

    /// Whether the kept rows answer a target `d`.
    fn covered(&self, d: u64) -> bool {
        d >= self.memo_from && (self.memo_end || self.memo.last().is_some_and(|&l| d <= l))
    }

    /// Keeps `h`, the walk's next row, while the memo is open.
    fn remember(&mut self, h: u64) {
        if !self.memo_open {
            return;
        }
        if h == u64::MAX {
            self.memo_end = true;
            self.memo_open = false;
        } else if self.memo.len() == MEMO_MAX {
            self.memo_open = false;
        } else {
            self.memo.push(h);
        }
    }

    fn seek(&mut self, d: u64) -> Result<()> {
        if self.head.is_some() || !self.memo.is_empty() {
            // Not the walk's first seek: it skips rows, the memo would have a gap.
            self.memo_open = false;
        } else if self.memo_open {
            self.memo_from = d;
        }
        let owner = self.owner.as_str();
        let mut rows = self.r.users()?.range((owner, d)..=(owner, u64::MAX))?;
        let h = match rows.next() {
            Some(row) => row?.0.value().1,
            None => u64::MAX,
        };
        self.head = Some(h);
        self.rows = Some(rows);
        self.remember(h);
        Ok(())
    }

    fn next_ge(&mut self, d: u64) -> Result<u64> {
        if self.covered(d) {
            let i = self.memo.partition_point(|&x| x < d);
            return Ok(self.memo.get(i).copied().unwrap_or(u64::MAX));
        }
        if d < self.walked_to {
            self.head = None;
            self.rows = None;
        }
        self.walked_to = d;
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
                    self.remember(h);
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
/// For such a user the users index is no help to the postings search: nearly
/// every block holds their memories, and walking their rows beside it visits
/// about as many rows as postings. The filter is then checked on the records
/// of the memories that place, as every other filter is.
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
            if info.user_id.as_deref().is_none_or(|o| o == user) {
                theirs += 1;
            }
        }
    }
    Ok(found * 4 >= SAMPLES && theirs * 2 >= found)
}

impl<'r> UserDocs<'r> {
    /// The memories `user` may be shown: theirs and the unattributed ones.
    #[must_use]
    pub fn new(r: &'r Reader, user: &str) -> Self {
        Self { owners: owners(user).into_iter().map(|o| OwnerRows::new(r, o)).collect() }
    }
}

impl crate::read::candidates::Allow for UserDocs<'_> {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        let mut best = u64::MAX;
        for o in &mut self.owners {
            best = best.min(o.next_ge(d)?);
        }
        Ok((best != u64::MAX).then_some(best))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Memory;
    use crate::model::{MemoryEntry, MemoryType};
    use crate::read::candidates::Allow;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Several passes of ascending targets (each pass starting anywhere, as a
        /// second ranking pass or a graph expansion does) get exactly the next
        /// admitted docno, whether it comes from the walk or from the kept rows.
        #[test]
        fn user_docs_match_brute_force(
            owners in prop::collection::vec(0u8..4, 1..400),
            passes in prop::collection::vec(
                (0u64..450, prop::collection::vec(0u64..40, 1..40)), 1..6),
        ) {
            let mem = Memory::open_in_memory().expect("store");
            // 0: unattributed, 1: the user, 2 and 3: others.
            let entries: Vec<MemoryEntry> = owners
                .iter()
                .map(|&o| {
                    let mut e = MemoryEntry::new(MemoryType::Semantic, "some memory text");
                    e.user_id = (o > 0).then(|| format!("u{o}"));
                    e
                })
                .collect();
            mem.add_batch(entries).expect("add");
            let admitted: Vec<u64> = owners
                .iter()
                .enumerate()
                .filter(|(_, o)| **o <= 1)
                .map(|(d, _)| d as u64)
                .collect();
            let r = mem.read().expect("read");
            let mut docs = UserDocs::new(&r, "u1");
            for (start, steps) in passes {
                let mut d = start;
                for step in steps {
                    let want = admitted.iter().copied().find(|&x| x >= d);
                    prop_assert_eq!(docs.next_ge(d).expect("next"), want, "target {}", d);
                    d += step;
                }
            }
        }
    }

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
