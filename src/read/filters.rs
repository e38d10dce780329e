//! Recall filters: who may see what.

use crate::error::Result;
use crate::model::{MemoryType, Visibility};
use crate::read::query::RecallQuery;
use crate::storage::key_sets::{Index, KeyMembers};
use crate::storage::postings::next_from;
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

/// Memories sampled by [`holds_most`] and by a scope filter's [`keeps_few`].
const SAMPLES: u64 = 64;

/// Whether the memories `user` may be shown (theirs and the unattributed ones)
/// are at least half the store, judged from 64 docnos spread over the store's
/// range (a golden-ratio sequence, so no stride of owners aliases with it);
/// `false` when fewer than a quarter of them are memories.
///
/// For such a user their owner terms' members are no help to the search:
/// nearly every block of every term holds their memories, and walking them
/// beside the query terms' postings visits about as many memories again. The
/// filter is then checked on the records of the memories that place, as every
/// other filter is.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
pub fn holds_most(r: &Reader, user: &str) -> Result<bool> {
    let (mut found, mut theirs) = (0u64, 0u64);
    for d in samples(r) {
        if let Some(info) = r.docinfo(d)? {
            found += 1;
            if shown_to(&info, user) {
                theirs += 1;
            }
        }
    }
    Ok(found * 4 >= SAMPLES && theirs * 2 >= found)
}

/// The [`SAMPLES`] docnos a filter's share of the store is judged from: spread
/// over `r`'s range by a golden-ratio sequence, so no stride of owners, scopes
/// or layers aliases with it.
fn samples(r: &Reader) -> impl Iterator<Item = u64> + use<> {
    let span = r.stats().next_docno;
    (1..=SAMPLES).map(move |i| {
        // The fractional part of i·φ, in 64-bit fixed point, scaled to the range.
        let frac = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((u128::from(frac) * u128::from(span)) >> 64) as u64
    })
}

/// One owner's term (see `storage::keys::owner_term`) in a snapshot: its info
/// row in the blocks, if any, and its postings in the tail.
pub struct OwnerTerm {
    /// The owner term.
    pub term: String,
    /// Its info row (document frequency and generation of its blocks).
    pub blocks: Option<crate::storage::postings::TermInfo>,
    /// Its postings in the postings tail.
    pub in_tail: u64,
}

impl OwnerTerm {
    /// How many memories the owner holds.
    #[must_use]
    pub fn memories(&self) -> u64 {
        self.blocks.as_ref().map_or(0, |i| i.df) + self.in_tail
    }
}

/// The owner terms of `owners` (user ids, `""` for the unattributed) in `r`.
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed term row.
pub fn owner_terms(r: &Reader, owners: &[&str]) -> Result<Vec<OwnerTerm>> {
    owners
        .iter()
        .map(|o| {
            let term = crate::storage::keys::owner_term(o);
            let blocks = crate::storage::postings::term_info(&r.postings, &term)?;
            let in_tail = r.tail.term_stats(&term).map_or(0, |(df, _)| df);
            Ok(OwnerTerm { term, blocks, in_tail })
        })
        .collect()
}

/// How many memories `owners` (user ids, `""` for the unattributed) hold in
/// `r`, from their owner terms' document frequencies in the blocks and the
/// postings tail (each memory's postings hold its one owner term).
///
/// # Errors
/// Storage errors; [`crate::Error::Corrupted`] on a malformed term row.
pub fn owner_memories(r: &Reader, owners: &[&str]) -> Result<u64> {
    Ok(owner_terms(r, owners)?.iter().map(OwnerTerm::memories).sum())
}

/// A `domain` filter leaves its memories to the records' check, without a
/// member set, when the domain holds at least this share of the store: nearly
/// every memory passes.
pub const DOMAIN_SET_SHARE: f64 = 0.9;

/// The memories whose postings hold one term in a snapshot: those in the term's
/// blocks as a set the store keeps per generation
/// ([`crate::storage::block_cache::BlockCache::members`]), and those in the
/// postings tail.
struct TermMembers {
    set: Option<std::sync::Arc<crate::storage::block_cache::DocSet>>,
    tail: Vec<u64>,
    /// How many they are.
    df: u64,
}

impl TermMembers {
    fn load(r: &Reader, term: &str) -> Result<Self> {
        let info = crate::storage::postings::term_info(&r.postings, term)?;
        let tail: Vec<u64> = r
            .tail
            .term(term)
            .map(|t| t.postings.iter().map(|p| p.docno).collect())
            .unwrap_or_default();
        let df = info.as_ref().map_or(0, |i| i.df) + tail.len() as u64;
        let set = match info {
            Some(i) if i.df > 0 => Some(r.blocks.members(&r.postings, term, i.generation)?),
            _ => None,
        };
        Ok(Self { set, tail, df })
    }

    fn contains(&self, docno: u64) -> bool {
        self.set.as_ref().is_some_and(|s| s.contains(docno))
            || self.tail.binary_search(&docno).is_ok()
    }

    /// The smallest member at or after `docno`, searched from where `walk` left
    /// the last search (which it then records).
    fn next_ge(&self, docno: u64, walk: &mut Walk) -> Option<u64> {
        let in_set = self.set.as_ref().and_then(|s| s.next_ge_from(docno, &mut walk.set));
        match (in_set, next_from(&self.tail, docno, &mut walk.tail)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Where the last search in a [`TermMembers`] ended: the answer's index in its
/// set's list (unused when the set is a bitmap) and in its tail's.
#[derive(Debug, Default, Clone, Copy)]
struct Walk {
    set: usize,
    tail: usize,
}

/// The memories of one domain in a snapshot, from its domain term's postings
/// ([`crate::storage::keys::domain_term`]). A `domain`-filtered recall leaves the
/// others out on this set, before reading their records.
pub struct DomainMembers(TermMembers);

impl DomainMembers {
    /// The members of `domain` in `r`; `None` when they are at least
    /// [`DOMAIN_SET_SHARE`] of its memories.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on a malformed block.
    pub fn load(r: &Reader, domain: &str) -> Result<Option<Self>> {
        let members = TermMembers::load(r, &crate::storage::keys::domain_term(domain))?;
        if members.df as f64 >= DOMAIN_SET_SHARE * r.stats().docs as f64 {
            return Ok(None);
        }
        Ok(Some(Self(members)))
    }

    /// Whether the memory `docno` is in the domain.
    #[must_use]
    pub fn contains(&self, docno: u64) -> bool {
        self.0.contains(docno)
    }
}

/// The memories of some owners (a `user_id` filter's: [`owners`]), from their
/// owner terms' member sets ([`crate::storage::keys::owner_term`]), kept by the
/// store per generation as a domain's are: moving to the next of them is a
/// step in a bitmap or a sorted list, with nothing decoded once the sets are
/// built. A search asks with ascending targets, so each list is searched from
/// where its last answer was rather than over all of the owner's memories.
pub struct OwnerMembers(Vec<(TermMembers, Walk)>);

impl OwnerMembers {
    /// The memories of `owners` (`""`: the unattributed ones) in `r`.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on a malformed block.
    pub fn load(r: &Reader, owners: &[&str]) -> Result<Self> {
        owners
            .iter()
            .map(|o| {
                Ok((TermMembers::load(r, &crate::storage::keys::owner_term(o))?, Walk::default()))
            })
            .collect::<Result<_>>()
            .map(Self)
    }
}

impl crate::read::candidates::Allow for OwnerMembers {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        Ok(self.0.iter_mut().filter_map(|(m, walk)| m.next_ge(d, walk)).min())
    }
}

/// A `layer` or `types` filter walks its layers' members ([`LayerMembers`])
/// when they hold at most this share of the store. A search checking the
/// records of the memories that would place costs little when the filter
/// keeps most of them and very much when it keeps few: on the synthetic 1M
/// store, types-filtered recalls (p50 of the query mix) took 0.15 / 0.51 / 1.3
/// / 3.0 / 7.3 ms walking layers of 1,000 / 4,000 / 16,000 / 64,000 / 128,000
/// memories row by row against 108–121 ms checking records (`docs/PERFORMANCE.md`,
/// session 50), and as much for a large layer that holds few of the query's
/// matches (114 ms p50 for one of 250,000 memories in a store of 1.25M,
/// session 52). A walk now reads a layer's rows once and keeps them
/// ([`crate::storage::key_sets`]), and removals do not make it read them
/// again (session 53), so the episodic and semantic layers are walked too
/// (skipped on their bitmaps when larger): with the semantic layer's 35% of
/// the 1M store, multi-word queries decode 78,280 postings instead of
/// 143,836, and the search passes over streaks of members that cannot place
/// as it does without a filter. Past a half, the layers hold most of what a
/// query matches, so the record checks (or their bitmaps) find the memories
/// they keep soon. The first walk of a large layer in a process reads its
/// rows (~30–40 ms for the semantic layer of the 1M store).
pub const LAYER_WALK_SHARE: f64 = 0.5;

/// The memories a `min_importance` filter of 6 or more keeps, walked on their
/// bitmap's set bits (`storage::bitmap`): an [`crate::read::candidates::Allow`]
/// that lets the text search step over every less important memory without
/// scoring it or reading its record. Few memories are that important, and a
/// search checking the records of those that would place scored nearly every
/// memory holding the query's words before it had found enough.
pub struct Important<'r>(
    Option<crate::storage::bitmap::Hidden<'r, redb::ReadOnlyTable<u64, &'static [u8]>>>,
);

impl<'r> Important<'r> {
    /// The memories `q`'s `min_importance` keeps in `r`, when it is 6 or more
    /// (above 10: none); `None` below 6.
    ///
    /// # Errors
    /// Storage errors.
    pub fn of(r: &'r Reader, q: &RecallQuery) -> Result<Option<Self>> {
        if q.min_importance > 10 {
            return Ok(Some(Self(None)));
        }
        Ok(r.important(q.min_importance)?
            .map(|bits| Self(Some(crate::storage::bitmap::Hidden::new(bits)))))
    }
}

impl crate::read::candidates::Allow for Important<'_> {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        match &mut self.0 {
            Some(bits) => bits.next_ge(d),
            None => Ok(None),
        }
    }
}

/// The layers `q` keeps: its `layer`, or else its `types`; none when it keeps
/// every layer.
#[must_use]
pub fn kept_layers(q: &RecallQuery) -> &[String] {
    match (&q.layer, &q.types) {
        (Some(layer), _) => std::slice::from_ref(layer),
        (None, Some(types)) => types,
        (None, None) => &[],
    }
}

/// The memories of the layers a `layer` or `types` filter keeps, in docno
/// order: each layer's rows in the `layer_order` index (one per memory, keyed
/// by layer, then docno), as the store keeps them in memory
/// ([`crate::storage::key_sets`]). As an [`crate::read::candidates::Allow`], it
/// lets the text search step over the other layers' memories without reading
/// their records, however few of the query's matches the layers hold: a rare
/// layer's recall checked each matching memory's record until it had found
/// enough.
pub struct LayerMembers {
    walks: Vec<KeyMembers>,
}

impl LayerMembers {
    /// The memories of the layers `q` keeps in `r`: its `layer`, or else its
    /// `types`; `None` when it keeps every layer, or when those hold more than
    /// [`LAYER_WALK_SHARE`] of the store.
    ///
    /// # Errors
    /// Storage errors.
    pub fn of(r: &Reader, q: &RecallQuery) -> Result<Option<Self>> {
        let layers = kept_layers(q);
        if layers.is_empty() {
            return Ok(None);
        }
        let share = r.layer_memories(layers)? as f64 / r.stats().docs.max(1) as f64;
        if share > LAYER_WALK_SHARE {
            return Ok(None);
        }
        let mut walks = Vec::with_capacity(layers.len());
        for (i, layer) in layers.iter().enumerate() {
            if !layers[..i].contains(layer) {
                walks.push(r.key_members(Index::Layers, layer)?);
            }
        }
        Ok(Some(Self { walks }))
    }
}

impl crate::read::candidates::Allow for LayerMembers {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        Ok(first_of(&mut self.walks, d))
    }
}

/// The smallest member at or after `d` of any of `walks`.
fn first_of(walks: &mut [KeyMembers], d: u64) -> Option<u64> {
    walks.iter_mut().filter_map(|w| w.next_ge(d)).min()
}

/// A `scopes` filter walks the memories it keeps ([`ScopeMembers`]) when a
/// sample of the store finds at most this share of its memories kept (a
/// filter keeping more is checked on records; session 51).
pub const SCOPE_WALK_SHARE: f64 = 0.125;

/// The most distinct scopes a [`ScopeMembers`] walk follows; a filter
/// admitting more (a glob over many stored scopes) is checked on records.
pub const SCOPE_WALK_KEYS: usize = 64;

/// The memories a `scopes` filter keeps, walked in docno order: those without
/// a scope, on their bitmap's set bits (`storage::bitmap`), and those holding
/// a scope the filter admits ([`match_scope`]), in the rows of those scopes in
/// the `scopes` index as the store keeps them in memory
/// ([`crate::storage::key_sets`]). As an [`crate::read::candidates::Allow`], it lets the
/// text search step over every other memory without scoring it or reading its
/// record: a filter keeping few of the query's matches otherwise checked the
/// record of each until it had found enough.
pub struct ScopeMembers<'r> {
    unscoped: crate::storage::bitmap::Hidden<'r, redb::ReadOnlyTable<u64, &'static [u8]>>,
    walks: Vec<KeyMembers>,
}

impl<'r> ScopeMembers<'r> {
    /// The memories `q`'s `scopes` filter keeps in `r`, with the verdict on
    /// whether it keeps few of them: `few`, an earlier sample's verdict that the
    /// caller still takes, or else a sample of the store's ([`SCOPE_WALK_SHARE`]).
    /// The walk is `None` when `q` has no such filter, when the filter keeps
    /// every memory (no scope, or `*`; the verdict is `None` too), when it keeps
    /// more than a few, or when it admits more than [`SCOPE_WALK_KEYS`] stored
    /// scopes. Only speed depends on the verdict: a filter that is not walked
    /// is checked on the records of the memories that place.
    ///
    /// # Errors
    /// Storage errors; [`crate::Error::Corrupted`] on an undecodable record.
    pub fn of(
        r: &'r Reader,
        q: &RecallQuery,
        few: Option<bool>,
    ) -> Result<(Option<Self>, Option<bool>)> {
        let Some(allowed) = q.scopes.as_deref().filter(|a| !keeps_all(a)) else {
            return Ok((None, None));
        };
        // A sample's rows of the unscoped bitmap serve the walk; a filter
        // known to keep many opens it not at all.
        let mut sampled = None;
        let few = match few {
            Some(few) => few,
            None => {
                let bits = crate::storage::bitmap::Hidden::new(r.unscoped()?);
                keeps_few(r, allowed, sampled.insert(bits))?
            }
        };
        if !few {
            return Ok((None, Some(false)));
        }
        let unscoped = match sampled {
            Some(bits) => bits,
            None => crate::storage::bitmap::Hidden::new(r.unscoped()?),
        };
        Ok((Self::walk_with(r, allowed, unscoped)?, Some(true)))
    }

    /// The memories a `scopes` filter of `allowed` keeps in `r`, however many;
    /// `None` when it keeps every memory or admits more than
    /// [`SCOPE_WALK_KEYS`] stored scopes.
    ///
    /// # Errors
    /// Storage errors.
    pub fn walk(r: &'r Reader, allowed: &[String]) -> Result<Option<Self>> {
        if keeps_all(allowed) {
            return Ok(None);
        }
        Self::walk_with(r, allowed, crate::storage::bitmap::Hidden::new(r.unscoped()?))
    }

    /// [`ScopeMembers::walk`] over the unscoped bitmap as `unscoped` holds it.
    fn walk_with(
        r: &'r Reader,
        allowed: &[String],
        unscoped: crate::storage::bitmap::Hidden<'r, redb::ReadOnlyTable<u64, &'static [u8]>>,
    ) -> Result<Option<Self>> {
        let Some(keys) = admitted_scopes(r.scopes()?, allowed)? else { return Ok(None) };
        let walks = keys.iter().map(|k| r.key_members(Index::Scopes, k)).collect::<Result<_>>()?;
        Ok(Some(Self { unscoped, walks }))
    }
}

impl crate::read::candidates::Allow for ScopeMembers<'_> {
    fn next_ge(&mut self, d: u64) -> Result<Option<u64>> {
        let scoped = first_of(&mut self.walks, d);
        // No unscoped memory can come before `d` when a scoped one is `d`.
        let unscoped = match scoped {
            Some(at) if at == d => None,
            _ => self.unscoped.next_ge(d)?,
        };
        Ok(match (scoped, unscoped) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }
}

/// Whether a `scopes` filter of `allowed` keeps every memory: it admits no
/// scope in particular, or `*`.
fn keeps_all(allowed: &[String]) -> bool {
    allowed.is_empty() || allowed.iter().any(|a| a == "*")
}

/// The stored scopes (keys of `table`) that a filter of `allowed` admits:
/// each `e` with `scope_contains(e, a)` or `scope_contains(a, e)` for an `a`
/// of `allowed`; `None` when they are more than [`SCOPE_WALK_KEYS`]. The
/// scopes containing `a` are `*`, `a` itself and `P:*` for `a` and each
/// prefix of `a` that ends before a `:`; those `a` contains, when it is
/// `Q:*`, are `Q` and every scope starting with `Q:`.
fn admitted_scopes(
    table: &redb::ReadOnlyTable<(&'static str, u64), ()>,
    allowed: &[String],
) -> Result<Option<std::collections::BTreeSet<String>>> {
    let mut exact = std::collections::BTreeSet::new();
    let mut under = Vec::new();
    for a in allowed {
        exact.insert("*".to_owned());
        exact.insert(a.clone());
        exact.insert(format!("{a}:*"));
        for (i, _) in a.match_indices(':') {
            exact.insert(format!("{}:*", &a[..i]));
        }
        if let Some(q) = a.strip_suffix(":*") {
            exact.insert(q.to_owned());
            under.push(format!("{q}:"));
        }
    }
    let mut found = std::collections::BTreeSet::new();
    for key in exact {
        if table.range((key.as_str(), 0u64)..=(key.as_str(), u64::MAX))?.next().is_some() {
            found.insert(key);
        }
    }
    for prefix in under {
        // Each stored scope under `prefix`, one descent per scope: the first
        // row past the last scope's rows (no docno is `u64::MAX`).
        let mut last: Option<String> = None;
        loop {
            use std::ops::Bound::{Excluded, Unbounded};
            let mut rows = match &last {
                None => table.range((prefix.as_str(), 0u64)..)?,
                Some(k) => {
                    table.range::<(&str, u64)>((Excluded((k.as_str(), u64::MAX)), Unbounded))?
                }
            };
            let Some(row) = rows.next() else { break };
            let key = row?.0.value().0.to_owned();
            if !key.starts_with(&prefix) {
                break;
            }
            found.insert(key.clone());
            if found.len() > SCOPE_WALK_KEYS {
                return Ok(None);
            }
            last = Some(key);
        }
    }
    Ok((found.len() <= SCOPE_WALK_KEYS).then_some(found))
}

/// Whether a `scopes` filter of `allowed` keeps at most [`SCOPE_WALK_SHARE`]
/// of the memories found at the [`samples`] docnos: an unscoped memory, kept
/// by every filter, is told by its bit in `unscoped` (whose rows the walk then
/// reuses); only a scoped one's record is read.
fn keeps_few(
    r: &Reader,
    allowed: &[String],
    unscoped: &mut crate::storage::bitmap::Hidden<'_, redb::ReadOnlyTable<u64, &'static [u8]>>,
) -> Result<bool> {
    let (mut found, mut kept) = (0u64, 0u64);
    for d in samples(r) {
        if unscoped.contains(d)? {
            (found, kept) = (found + 1, kept + 1);
        } else if let Some(info) = r.docinfo(d)? {
            found += 1;
            if match_scope(&info.scope, allowed) {
                kept += 1;
            }
        }
        if kept as f64 > SCOPE_WALK_SHARE * SAMPLES as f64 {
            return Ok(false);
        }
    }
    Ok(kept as f64 <= SCOPE_WALK_SHARE * found as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Memory;
    use crate::model::MemoryEntry;
    use proptest::prelude::*;

    const DOMAINS: [&str; 4] = ["default", "work", "home", "travel"];

    /// Checks every domain's members in the store's current snapshot against
    /// `domain_of` (docno → domain index).
    fn check_members(
        mem: &Memory,
        domain_of: &std::collections::BTreeMap<u64, u8>,
    ) -> std::result::Result<(), TestCaseError> {
        let r = mem.read().expect("read");
        let end = r.stats().next_docno + 3;
        for (i, d) in DOMAINS.iter().enumerate() {
            let held = domain_of.values().filter(|x| usize::from(**x) == i).count();
            match DomainMembers::load(&r, d).expect("load") {
                None => prop_assert!(
                    held as f64 >= DOMAIN_SET_SHARE * domain_of.len() as f64,
                    "{} left to the records with {} of {}",
                    d,
                    held,
                    domain_of.len()
                ),
                Some(m) => {
                    for docno in 0..end {
                        let want = domain_of.get(&docno).is_some_and(|x| usize::from(*x) == i);
                        prop_assert_eq!(m.contains(docno), want, "{} docno {}", d, docno);
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks that `walk` answers each of `targets` (in ascending order when
    /// `sorted`) with the smallest of `members` (ascending) at or after it, or
    /// with a memory removed from `r` before that one (a kept set may hold
    /// those: they have no postings left; `held` is every docno `r` holds,
    /// ascending).
    fn answers_each_target(
        walk: &mut dyn crate::read::candidates::Allow,
        (r, held): (&Reader, &[u64]),
        members: &[u64],
        mut targets: Vec<u64>,
        sorted: bool,
        what: &dyn std::fmt::Debug,
    ) -> std::result::Result<(), TestCaseError> {
        if sorted {
            targets.sort_unstable();
        }
        let removed = |d: u64| d < r.stats().next_docno && held.binary_search(&d).is_err();
        for t in targets {
            let want = members.iter().copied().find(|&d| d >= t);
            let got = walk.next_ge(t).expect("next");
            let dead = got.is_some_and(|d| d >= t && removed(d) && want.is_none_or(|w| d < w));
            prop_assert!(got == want || dead, "{:?} target {}: {:?}, not {:?}", what, t, got, want);
        }
        Ok(())
    }

    /// Checks that `walk`, stepped from 0 to its end, meets every one of
    /// `members` (ascending) and no other memory `r` holds (`held`, ascending).
    fn sweeps_members(
        walk: &mut dyn crate::read::candidates::Allow,
        held: &[u64],
        members: &[u64],
        what: &dyn std::fmt::Debug,
    ) -> std::result::Result<(), TestCaseError> {
        let mut met = Vec::new();
        let mut at = walk.next_ge(0).expect("next");
        while let Some(d) = at {
            if held.binary_search(&d).is_ok() {
                met.push(d);
            }
            at = walk.next_ge(d + 1).expect("next");
        }
        prop_assert_eq!(met, members, "{:?} swept", what);
        Ok(())
    }

    /// Updates the memory of `ids` at each index of `changed` (modulo their
    /// number) by `change`, checks the store by `check`, removes those at the
    /// indexes of `removed` and checks it again.
    fn change_then_remove<T>(
        mem: &Memory,
        ids: &[String],
        (changed, change): (&[(usize, T)], impl Fn(&mut MemoryEntry, &T)),
        removed: &[usize],
        check: impl Fn(&Reader) -> std::result::Result<(), TestCaseError>,
    ) -> std::result::Result<(), TestCaseError> {
        for (i, x) in changed {
            let mut e = mem.get(&ids[i % ids.len()]).expect("get").expect("held");
            change(&mut e, x);
            mem.update(e).expect("update");
        }
        check(&mem.read().expect("read"))?;
        for i in removed {
            mem.remove(&ids[i % ids.len()]).expect("remove");
        }
        check(&mem.read().expect("read"))
    }

    /// A recall with a layer filter, walked on the layer's kept members, still
    /// finds exactly the layer's memories after some of them are removed
    /// (the kept set then holds those too).
    #[test]
    fn a_walked_layer_recalls_its_memories_after_removals() {
        let mem = Memory::open_in_memory().expect("store");
        let entries = (0..80)
            .map(|i| {
                let mut e = MemoryEntry::new(MemoryType::Episodic, format!("alpha memory {i}"));
                if i % 10 == 3 {
                    e.layer = "notes".to_owned();
                }
                e
            })
            .collect();
        let ids = mem.add_batch(entries).expect("add");
        let notes = |mem: &Memory| {
            let mut q = RecallQuery::new("alpha");
            q.layer = Some("notes".to_owned());
            q.limit = 20;
            let r = mem.read().expect("read");
            assert!(LayerMembers::of(&r, &q).expect("walk").is_some(), "walked");
            let mut got: Vec<String> =
                mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.id).collect();
            got.sort_unstable();
            got
        };
        let mut want: Vec<String> = (3..80).step_by(10).map(|i| ids[i].clone()).collect();
        want.sort_unstable();
        assert_eq!(notes(&mem), want);
        for i in [13, 53] {
            assert!(mem.remove(&ids[i]).expect("remove"));
            want.retain(|id| *id != ids[i]);
            assert_eq!(notes(&mem), want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// A layer filter's walk answers each target with the smallest member of
        /// its layers at or after it, as the entries say, whatever the targets'
        /// order and gaps (a smaller target starting over), for one layer,
        /// several (repeated or missing ones among them), and `layer` over
        /// `types`, through memories added in batches and one at a time, moved
        /// between layers and removed (a kept set may also answer with a removed
        /// memory, which has no posting left), each step walked after the one
        /// before (the store keeps the members it walked) and swept whole, and
        /// in the first snapshot again after the adds and at the end; a filter
        /// whose layers hold more than [`LAYER_WALK_SHARE`] of the store walks
        /// nothing, and any other is walked, with bitmaps (the episodic and
        /// semantic layers) or without (a large custom layer, alone or beside a
        /// few rare ones).
        #[test]
        fn a_layer_walk_finds_each_next_member(
            kinds in prop::collection::vec(0u8..100, 200..1500),
            more in prop::collection::vec(0u8..100, 0..1500),
            single in prop::collection::vec(0u8..10, 0..10),
            moved in prop::collection::vec((0usize..1600, 0u8..100), 0..20),
            removed in prop::collection::vec(0usize..1600, 0..20),
            picks in prop::collection::vec((0u64..1600, any::<bool>()), 1..40),
            sorted in any::<bool>(),
        ) {
            let layer_of = |x: u8| match x {
                0..5 => "rare",
                5..7 => "rarer",
                7..40 => "large",
                40..70 => "semantic",
                _ => "episodic",
            };
            let entry = |x: u8| {
                let mut e = MemoryEntry::new(MemoryType::Episodic, "some memory text");
                e.layer = layer_of(x).to_owned();
                e
            };
            // The memories `r` holds, with their layers.
            let held_in = |r: &Reader, ids: &[String]| -> Vec<(u64, String)> {
                let mut held = Vec::new();
                for id in ids {
                    if let Some(d) = r.docno_of(id).expect("docno") {
                        held.push((d, r.get(d).expect("get").expect("held").layer));
                    }
                }
                held.sort_unstable();
                held
            };
            let asks: [(Option<&str>, Option<Vec<&str>>); 11] = [
                (None, Some(vec!["rare"])),
                (Some("rarer"), None),
                (Some("rarer"), Some(vec!["rare"])),
                (None, Some(vec!["rare", "rarer", "rare"])),
                (None, Some(vec!["missing", "rarer"])),
                (None, Some(vec!["episodic"])),
                (Some("semantic"), None),
                (Some("large"), None),
                (None, Some(vec!["rare", "large"])),
                (None, Some(vec!["episodic", "large"])),
                (None, Some(vec!["episodic", "semantic"])),
            ];
            // Every filter's walk in `r` against `layers`.
            let check = |r: &Reader, layers: &[(u64, String)]| {
                for (layer, types) in &asks {
                    let mut q = RecallQuery::new("text");
                    q.layer = layer.map(str::to_owned);
                    q.types = types.clone().map(|t| t.into_iter().map(str::to_owned).collect());
                    let kept: Vec<&str> = match (layer, types) {
                        (Some(l), _) => vec![*l],
                        (None, Some(t)) => t.clone(),
                        (None, None) => unreachable!(),
                    };
                    let members: Vec<u64> = layers
                        .iter()
                        .filter(|(_, l)| kept.contains(&l.as_str()))
                        .map(|(d, _)| *d)
                        .collect();
                    let share = members.len() as f64 / layers.len() as f64;
                    let walked = share <= LAYER_WALK_SHARE;
                    let Some(mut walk) = LayerMembers::of(r, &q).expect("walk") else {
                        prop_assert!(
                            !walked,
                            "{:?} not walked with {} of {}", kept, members.len(), layers.len()
                        );
                        continue;
                    };
                    prop_assert!(walked, "{:?} walked", kept);
                    // Random docnos, and members themselves.
                    let targets: Vec<u64> = picks
                        .iter()
                        .map(|&(t, member)| match members.len() {
                            n if member && n > 0 => members[(t as usize) % n],
                            _ => t,
                        })
                        .collect();
                    let held: Vec<u64> = layers.iter().map(|(d, _)| *d).collect();
                    answers_each_target(&mut walk, (r, &held), &members, targets, sorted, &kept)?;
                    let mut sweep = LayerMembers::of(r, &q).expect("walk").expect("walked");
                    sweeps_members(&mut sweep, &held, &members, &kept)?;
                }
                Ok::<(), TestCaseError>(())
            };
            // The store keeps the walked layers' members: each step below
            // checks what it read before, extended, or read again.
            let mem = Memory::open_in_memory().expect("store");
            let mut ids = mem.add_batch(kinds.iter().map(|&x| entry(x)).collect()).expect("add");
            let first = mem.read().expect("read");
            let first_held = held_in(&first, &ids);
            check(&first, &first_held)?;
            ids.extend(mem.add_batch(more.iter().map(|&x| entry(x)).collect()).expect("add"));
            for &x in &single {
                ids.push(mem.add(entry(x)).expect("add"));
            }
            check(&mem.read().expect("read"), &held_in(&mem.read().expect("read"), &ids))?;
            check(&first, &first_held)?;
            let changes = |e: &mut MemoryEntry, &x: &u8| e.layer = layer_of(x).to_owned();
            change_then_remove(&mem, &ids, (&moved, changes), &removed, |r| {
                check(r, &held_in(r, &ids))
            })?;
            // The first snapshot still sees its own memories only.
            check(&first, &first_held)?;
        }

        /// A `scopes` filter's walk answers each target with the smallest
        /// memory at or after it that [`match_scope`] keeps, as the entries
        /// say: unscoped ones (on their bitmap) and those holding a scope the
        /// filter admits, exactly or by a glob either way (on their rows),
        /// whatever the targets' order, through memories added in a batch and
        /// one at a time, rescoped (to and from none) and removed (a kept set
        /// may also answer with a removed memory), each step walked after the
        /// one before (the store keeps the members it walked) and swept whole,
        /// and in the first snapshot again after the adds and at the end. A
        /// filter admitting `*`
        /// keeps every memory and walks nothing.
        #[test]
        fn a_scope_walk_finds_each_next_member(
            scopes in prop::collection::vec(prop::collection::vec(0usize..9, 0..3), 100..600),
            changed in prop::collection::vec((0usize..600, prop::collection::vec(0usize..9, 0..3)), 0..30),
            removed in prop::collection::vec(0usize..600, 0..20),
            allowed in prop::collection::vec(prop::collection::vec(0usize..9, 1..3), 4),
            picks in prop::collection::vec(0u64..700, 1..40),
            sorted in any::<bool>(),
        ) {
            const STORED: [&str; 9] = [
                "org:sales:leads", "org:sales", "org:support", "org:*", "org:sales:*",
                "*", "team", "team:a:*", "x:sales:leads",
            ];
            const ASKED: [&str; 9] = [
                "org:sales:leads", "org:sales:*", "org:*", "team:a:b", "team",
                "x:*", "nothing", "org:sales:leads:*", "team:a",
            ];
            let named = |picks: &[usize], names: &[&str]| -> Vec<String> {
                picks.iter().map(|&i| names[i].to_owned()).collect()
            };
            let entry = |scope: Vec<String>| {
                let mut e = MemoryEntry::new(MemoryType::Episodic, "some memory text");
                e.scope = scope;
                e
            };
            // The memories `r` holds, with their scopes.
            let held_in = |r: &Reader, ids: &[String]| -> Vec<(u64, Vec<String>)> {
                let mut held = Vec::new();
                for id in ids {
                    if let Some(d) = r.docno_of(id).expect("docno") {
                        let e = r.get(d).expect("get").expect("held");
                        held.push((d, e.scope));
                    }
                }
                held.sort_unstable();
                held
            };
            // Every filter's walk in `r` against `held`.
            let check = |r: &Reader, held: &[(u64, Vec<String>)]| {
                for picks_asked in &allowed {
                    let asked = named(picks_asked, &ASKED);
                    let members: Vec<u64> = held
                        .iter()
                        .filter(|(_, scope)| match_scope(scope, &asked))
                        .map(|(d, _)| *d)
                        .collect();
                    let mut walk = ScopeMembers::walk(r, &asked).expect("walk").expect("walked");
                    let docnos: Vec<u64> = held.iter().map(|(d, _)| *d).collect();
                    let at = (r, docnos.as_slice());
                    answers_each_target(&mut walk, at, &members, picks.clone(), sorted, &asked)?;
                    let mut sweep = ScopeMembers::walk(r, &asked).expect("walk").expect("walked");
                    sweeps_members(&mut sweep, &docnos, &members, &asked)?;
                }
                Ok::<(), TestCaseError>(())
            };
            // The store keeps the walked scopes' members: each step below
            // checks what it read before, extended, or read again.
            let mem = Memory::open_in_memory().expect("store");
            let half = scopes.len() / 2;
            let mut ids = mem
                .add_batch(scopes[..half].iter().map(|s| entry(named(s, &STORED))).collect())
                .expect("add");
            let first = mem.read().expect("read");
            let first_held = held_in(&first, &ids);
            check(&first, &first_held)?;
            for s in &scopes[half..] {
                ids.push(mem.add(entry(named(s, &STORED))).expect("add"));
            }
            check(&mem.read().expect("read"), &held_in(&mem.read().expect("read"), &ids))?;
            check(&first, &first_held)?;
            let changes = |e: &mut MemoryEntry, s: &Vec<usize>| e.scope = named(s, &STORED);
            change_then_remove(&mem, &ids, (&changed, changes), &removed, |r| {
                check(r, &held_in(r, &ids))
            })?;
            let r = mem.read().expect("read");
            // The first snapshot still sees its own memories only.
            check(&first, &first_held)?;
            let everything = vec!["team".to_owned(), "*".to_owned()];
            prop_assert!(ScopeMembers::walk(&r, &everything).expect("walk").is_none());
        }

        /// A domain's members (its term's blocks as a kept set, and its tail
        /// postings) are exactly its memories, through new memories one at a time
        /// (the tail) and in batches, memories moved to another domain or removed,
        /// and after later writes (new memories in the tail, then a move that
        /// merges it: a new generation of the blocks, whose set is built afresh).
        #[test]
        fn domain_members_match_brute_force(
            domains in prop::collection::vec(0u8..4, 1..300),
            moved in prop::collection::vec((0usize..300, 0u8..4), 0..20),
            removed in prop::collection::vec(0usize..300, 0..20),
            more in prop::collection::vec(0u8..4, 0..40),
        ) {
            let mem = Memory::open_in_memory().expect("store");
            let entry = |x: u8| {
                let mut e = MemoryEntry::new(MemoryType::Episodic, "some memory text");
                e.domain = DOMAINS[usize::from(x)].to_owned();
                e
            };
            let mut domain_of = std::collections::BTreeMap::new();
            let mut ids = Vec::new();
            let add = |mem: &Memory, i: usize, x: u8| -> String {
                if i % 2 == 0 {
                    mem.add(entry(x)).expect("add")
                } else {
                    mem.add_batch(vec![entry(x)]).expect("add").remove(0)
                }
            };
            let docno = |mem: &Memory, id: &str| {
                mem.read().expect("read").docno_of(id).expect("docno").expect("held")
            };
            for (i, &x) in domains.iter().enumerate() {
                let id = add(&mem, i, x);
                domain_of.insert(docno(&mem, &id), x);
                ids.push(id);
            }
            for (i, x) in moved {
                let Some(id) = ids.get(i) else { continue };
                let Some(mut e) = mem.get(id).expect("get") else { continue };
                e.domain = DOMAINS[usize::from(x)].to_owned();
                mem.update(e).expect("update");
                domain_of.insert(docno(&mem, id), x);
            }
            for i in removed {
                let Some(id) = ids.get(i) else { continue };
                if let Some(d) = mem.read().expect("read").docno_of(id).expect("docno") {
                    mem.remove(id).expect("remove");
                    domain_of.remove(&d);
                }
            }
            check_members(&mem, &domain_of)?;
            for (i, &x) in more.iter().enumerate() {
                let id = add(&mem, i + 1, x);
                domain_of.insert(docno(&mem, &id), x);
                ids.push(id);
            }
            check_members(&mem, &domain_of)?;
            // A move merges the tail into the blocks: new generations.
            if let Some(mut e) = ids.iter().rev().find_map(|id| mem.get(id).expect("get")) {
                let x = (DOMAINS.iter().position(|d| *d == e.domain).unwrap_or(0) + 1) % 4;
                e.domain = DOMAINS[x].to_owned();
                let id = e.id.clone();
                mem.update(e).expect("update");
                domain_of.insert(docno(&mem, &id), x as u8);
            }
            check_members(&mem, &domain_of)?;
        }
    }

    #[test]
    fn doc_sets_hold_their_members_either_way() {
        let sparse = [3u64, 700, 5_000];
        let dense: Vec<u64> = (0..400).filter(|d| d % 3 != 1).collect();
        for docnos in [&sparse[..], &dense[..], &[]] {
            let set = crate::storage::block_cache::DocSet::of(docnos);
            for d in 0..6_000 {
                assert_eq!(set.contains(d), docnos.contains(&d), "{d}");
                let next = docnos.iter().copied().find(|&x| x >= d);
                assert_eq!(set.next_ge(d), next, "next from {d}");
            }
        }
        assert!(matches!(
            crate::storage::block_cache::DocSet::of(&sparse),
            crate::storage::block_cache::DocSet::Sorted(_)
        ));
        assert!(matches!(
            crate::storage::block_cache::DocSet::of(&dense),
            crate::storage::block_cache::DocSet::Bits(_)
        ));
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
