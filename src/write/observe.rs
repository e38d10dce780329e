//! `observe`: the write pipeline run after each exchange.
//!
//! 1. sentiment of the user's words → somatic marker;
//! 2. significance against the recent episodes → the gate;
//! 3. an episodic memory when significant;
//! 4. heuristic facts: pre-filter, prefix conflicts, dedup (SKIP / MERGE / CREATE),
//!    promotion to episodic when facts were stored;
//! 5. contradictions of the stored facts, then of the raw user text;
//! 6. entities into the knowledge graph and the self-model update (both skipped
//!    for insignificant exchanges);
//! 7. `user_id` and `domain` stamped on everything written.
//!
//! Every lookup against existing facts in the default profile is an index query
//! scoped to the fact's user and domain: the prefix index for conflicts, the
//! partitioned dedup-token index (prefix filtering by document frequency) for dedup
//! and similarity, the attribute index for verb facts. The reference profile
//! compares against every active fact, as soul-protocol does; its store is capped
//! (1,000 facts by default), so that work is bounded too.

use std::collections::BTreeSet;
use std::sync::Arc;

use foldhash::{HashSet, HashSetExt};
use redb::ReadableTable;

use super::near::{Fact, NearFacts, Prefetch, SnapshotTables, facts_order};
use super::{
    contradiction, dedup, entities, facts, keys, lifecycle, self_model, sentiment, significance,
};
use crate::error::Result;
use crate::memory::{Durability, Memory, Settings};
use crate::model::{MemoryEntry, MemoryType, SignificanceScore, SomaticMarker, Timestamp, time};
use crate::storage::graph::EdgeRecord;
use crate::storage::{TokenSet, Writer, schema};
use crate::text::TokenHashes;
use crate::{DEFAULT_DOMAIN, Profile};

/// Who and where an exchange belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObserveOptions {
    /// The user the exchange is with (stamped on every memory written).
    pub user_id: Option<String>,
    /// The domain (default `"default"`).
    pub domain: String,
}

impl Default for ObserveOptions {
    fn default() -> Self {
        Self { user_id: None, domain: DEFAULT_DOMAIN.to_owned() }
    }
}

/// An entity extracted from the exchange.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObservedEntity {
    /// Its name.
    pub name: String,
    /// Its type (`technology`, `person`, …).
    pub entity_type: String,
}

/// A contradiction found and resolved by superseding the old fact.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ContradictionRecord {
    /// The fact superseded.
    pub old_id: String,
    /// The fact that superseded it, or `"raw-text-contradiction"`.
    pub new_id: String,
    /// Why.
    pub reason: String,
    /// How sure, 0..=1.
    pub confidence: f64,
}

/// A fact that was active before the observe and is superseded after it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SupersededFact {
    /// Its id.
    pub id: String,
    /// Its content.
    pub content: String,
    /// What superseded it (an id, or the reference's `"new"` /
    /// `"raw-text-contradiction"`).
    pub by: String,
    /// `prefix`, `merge`, `contradiction` or `raw-text`.
    pub cause: String,
}

/// What one observe did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ObserveReport {
    /// The somatic marker of the user's words.
    pub somatic: SomaticMarker,
    /// The four significance dimensions.
    pub significance_parts: SignificanceScore,
    /// The overall significance.
    pub significance: f64,
    /// Whether the exchange was significant (after promotion).
    pub is_significant: bool,
    /// The episodic memory written, if any.
    pub episodic_id: Option<String>,
    /// The facts stored, in order.
    pub facts: Vec<MemoryEntry>,
    /// The entities extracted.
    pub entities: Vec<ObservedEntity>,
    /// Contradictions resolved.
    pub contradictions: Vec<ContradictionRecord>,
    /// Facts superseded by this observe that were active before it.
    pub superseded: Vec<SupersededFact>,
}

/// Active facts in the reference's `facts()` order: importance descending, newest
/// first, then insertion order.
fn all_active_facts(w: &mut Writer<'_>) -> Result<Vec<Fact>> {
    let mut rows: Vec<(u8, i64, u64)> = Vec::new();
    let docnos: Vec<u64> = {
        let mut v = Vec::new();
        for row in w.layer_order.range((keys_layer(), 0u64)..=(keys_layer(), u64::MAX))? {
            v.push(row?.0.value().1);
        }
        v
    };
    for d in docnos {
        if let Some(info) = w.docinfo(d)?
            && !info.superseded
        {
            rows.push((info.importance, info.created_at, d));
        }
    }
    rows.sort_by(facts_order);
    load_facts(w, rows.into_iter().map(|r| r.2))
}

fn keys_layer() -> &'static str {
    crate::storage::keys::FACT_LAYER
}

/// The facts at `docnos` (callers pass active facts: every caller filters
/// superseded ones through their [`crate::storage::DocInfo`]).
fn load_facts(w: &mut Writer<'_>, docnos: impl IntoIterator<Item = u64>) -> Result<Vec<Fact>> {
    let mut out = Vec::new();
    for d in docnos {
        if let Some((id, content)) = w.id_and_content(d)? {
            out.push(Fact { docno: d, id: id.into(), content: content.into() });
        }
    }
    Ok(out)
}

/// Orders docnos of active facts the reference's way (see [`all_active_facts`]).
fn in_facts_order(w: &Writer<'_>, docnos: impl IntoIterator<Item = u64>) -> Result<Vec<u64>> {
    let mut rows: Vec<(u8, i64, u64)> = Vec::new();
    for d in docnos {
        if let Some(info) = w.docinfo(d)?
            && !info.superseded
        {
            rows.push((info.importance, info.created_at, d));
        }
    }
    rows.sort_by(facts_order);
    rows.dedup_by_key(|r| r.2);
    Ok(rows.into_iter().map(|r| r.2).collect())
}

/// Default profile: facts of `(user, domain)` that state one of `content`'s verb
/// attributes.
fn attribute_facts(
    w: &Writer<'_>,
    content: &str,
    user: Option<&str>,
    domain: &str,
    profile: Profile,
) -> Result<Vec<u64>> {
    let mut docnos = BTreeSet::new();
    for attr in keys::attribute_keys(content, profile) {
        docnos.extend(crate::storage::query_keyed(
            &w.attributes,
            &attr,
            Some(user.unwrap_or("")),
            Some(domain),
        )?);
    }
    Ok(docnos.into_iter().collect())
}

/// Default profile: the facts of this user and domain a text may contradict — those
/// similar enough for the negation and attribute checks, plus those stating one of
/// its verb attributes — in `facts()` order, without the facts this observe stored;
/// and which of them state one of its verb attributes (the only ones the verb-fact
/// check needs to read).
fn contradiction_candidates(
    w: &Writer<'_>,
    near: &mut NearFacts,
    text: &str,
    cx: &Ctx,
    stored: &HashSet<u64>,
) -> Result<(Vec<Fact>, HashSet<u64>)> {
    let attributes = attribute_facts(w, text, cx.user_id.as_deref(), &cx.domain, w.profile())?;
    let stating: HashSet<u64> = attributes.iter().copied().collect();
    let facts = near.similar(w, text, contradiction::SIMILARITY_THRESHOLD, attributes, stored)?;
    Ok((facts, stating))
}

/// The contradictions of `text` among `cands` (see [`contradiction::detect`]); with
/// `stating` (the default profile's attribute index), the verb-fact check reads only
/// the candidates that state one of the text's verb attributes.
fn contradictions_of(
    text: &str,
    cands: &[Fact],
    stating: Option<&HashSet<u64>>,
    profile: Profile,
) -> Vec<contradiction::Contradiction> {
    let pairs: Vec<(&str, &str)> = cands.iter().map(|f| (&*f.id, &*f.content)).collect();
    match stating {
        Some(set) => {
            contradiction::detect_scoped(text, &pairs, profile, |i| set.contains(&cands[i].docno))
        }
        None => contradiction::detect(text, &pairs, profile),
    }
}

/// Supersedes the fact at `docno`: `superseded_by = by`, and the `superseded` flag
/// when `flag` (contradictions set it; prefix conflicts and merges do not).
fn supersede(
    w: &mut Writer<'_>,
    docno: u64,
    by: &str,
    flag: bool,
    now: Timestamp,
    reason: &str,
) -> Result<Option<MemoryEntry>> {
    let Some(mut e) = w.get(docno)? else { return Ok(None) };
    e.superseded_by = Some(by.to_owned());
    if flag {
        e.superseded = true;
    }
    let old = e.clone();
    w.replace(docno, e)?;
    super::audit::record_supersede(w, now, &old.id, by, reason)?;
    Ok(Some(old))
}

struct Ctx {
    now: Timestamp,
    user_id: Option<String>,
    domain: String,
}

/// The novelty token sets of the most recent episodes, newest first.
fn recent_episodes(w: &mut Writer<'_>) -> Result<Vec<TokenSet>> {
    let mut rows: Vec<(i64, u64)> = w
        .newest_episodes(significance::RECENT_EPISODES * 4)?
        .into_iter()
        .map(|(d, created)| (created, d))
        .collect();
    // Newest first; equal times keep insertion order.
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = Vec::new();
    for (_, d) in rows.into_iter().take(significance::RECENT_EPISODES) {
        out.extend(w.token_set(d, significance::recent_tokens)?);
    }
    Ok(out)
}

/// Preceding turns indexed with an episode (default profile).
pub const CONTEXT_TURNS: usize = 2;
/// How far back a preceding turn still counts as the same conversation.
pub const CONTEXT_WINDOW_SECS: i64 = 3600;

/// The meta key of a conversation's recent turns: `ctx␟` and the fact partition
/// ([`schema::fact_partition`]) of its user and domain.
fn context_key(user: Option<&str>, domain: &str) -> String {
    let [owner, sep, domain] = schema::fact_partition_parts(user, domain);
    ["ctx\u{1f}", owner, sep, domain].concat()
}

/// The recent turns of this user's conversation in this domain, oldest first.
fn recent_turns(w: &Writer<'_>, cx: &Ctx) -> Result<Vec<(i64, String)>> {
    match w.meta_get(&context_key(cx.user_id.as_deref(), &cx.domain))? {
        Some(b) => crate::storage::decode(&b, "conversation context"),
        None => Ok(Vec::new()),
    }
}

/// The conversation context of the exchange being observed: the preceding turns
/// within [`CONTEXT_WINDOW_SECS`], one per line.
struct Context {
    text: String,
    /// Where each turn is in `text`.
    turns: Vec<std::ops::Range<usize>>,
}

impl Context {
    fn of(turns: &[(i64, String)], now_us: i64) -> Option<Self> {
        let mut context = Self { text: String::new(), turns: Vec::new() };
        let recent = turns
            .iter()
            .filter(|(t, _)| now_us - *t <= CONTEXT_WINDOW_SECS * 1_000_000 && *t <= now_us);
        for (_, turn) in recent {
            if !context.turns.is_empty() {
                context.text.push('\n');
            }
            let start = context.text.len();
            context.text.push_str(turn);
            context.turns.push(start..context.text.len());
        }
        (!context.turns.is_empty()).then_some(context)
    }

    /// The turns' index terms, in order: the context's (lines split as words
    /// do). Memoized, as each turn is the context of the next episodes too.
    fn terms(&self) -> Vec<Arc<[String]>> {
        self.turns.iter().map(|r| crate::text::index_terms_memo(&self.text[r.clone()])).collect()
    }
}

/// A turn as the conversation context keeps it: both texts, at most 2 KB.
fn turn_text(user: &str, agent: &str) -> String {
    let mut text = [user, " ", agent].concat();
    text.truncate(text.trim_end().len());
    // Keep the context bounded: a long message contributes its first 2 KB.
    if text.len() > 2048 {
        let mut cut = 2048;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Keeps the turn (its index terms in the memo when computed ahead) and drops
/// the oldest beyond [`CONTEXT_TURNS`].
fn remember_turn(
    w: &mut Writer<'_>,
    cx: &Ctx,
    mut turns: Vec<(i64, String)>,
    text: String,
    terms: Option<Vec<String>>,
) -> Result<()> {
    if let Some(terms) = terms {
        crate::text::remember_index_terms(&text, terms);
    }
    turns.push((time::to_micros(&cx.now), text));
    if turns.len() > CONTEXT_TURNS {
        let extra = turns.len() - CONTEXT_TURNS;
        turns.drain(..extra);
    }
    w.meta_put(&context_key(cx.user_id.as_deref(), &cx.domain), &crate::storage::encode(&turns)?)
}

#[allow(clippy::too_many_arguments)]
fn store_episode(
    w: &mut Writer<'_>,
    cx: &Ctx,
    user: &str,
    agent: &str,
    somatic: &SomaticMarker,
    sig: &significance::Significance,
    context: Option<&Context>,
    terms: Option<Vec<String>>,
    novelty: Option<TokenHashes>,
) -> Result<String> {
    let content = significance::episodic_content(user, agent);
    let mut e = MemoryEntry::new(MemoryType::Episodic, content.clone());
    e.importance = significance::episodic_importance(somatic);
    e.emotion = Some(somatic.label.clone());
    e.created_at = cx.now;
    e.somatic = Some(somatic.clone());
    e.significance = sig.overall;
    e.access_timestamps = vec![cx.now];
    // `episodic_abstract(user, agent)`, from the content built above.
    e.r#abstract = Some(significance::generate_abstract(&content));
    e.salience = significance::episodic_salience(&sig.score);
    e.user_id.clone_from(&cx.user_id);
    e.domain.clone_from(&cx.domain);
    let context_terms = context.map(Context::terms).unwrap_or_default();
    let context = context.map(|c| (c.text.as_str(), context_terms.as_slice()));
    let docno = w.insert_indexed(e, context, terms.map(|t| (content.as_str(), t)))?;
    if let Some(set) = novelty {
        w.seed_token_set(docno, set);
    }
    Ok(w.docinfo(docno)?.map(|i| i.id).unwrap_or_default())
}

/// The steps of observe that read nothing from the store (sentiment, fact and
/// entity extraction): a batch computes them for all its exchanges in parallel
/// ahead of its write transaction, with the near-fact lookups read ahead from a
/// snapshot (`near`).
pub(crate) struct Analysis {
    somatic: crate::model::SomaticMarker,
    facts: Vec<facts::FactCandidate>,
    /// Extracted ahead only in batches (a single observe extracts entities only
    /// when the exchange gets deep processing).
    entities: Option<entities::ExtractedEntities>,
    /// What significance reads of the exchange alone.
    signals: significance::ExchangeSignals,
    /// The exchange's words for the self-model, as
    /// [`self_model::exchange_keywords`] gives them for the profile.
    tokens: Vec<String>,
    /// The index terms of the episode the exchange may become, sorted (batches
    /// only).
    episode_terms: Option<Vec<String>>,
    /// The exchange's turn ([`turn_text`]) and its index terms, which the next
    /// episodes of the conversation are indexed with (default-profile batches
    /// only).
    turn: Option<(String, Vec<String>)>,
    /// That episode's novelty tokens ([`significance::recent_tokens`]), which the
    /// batch's later exchanges compare themselves with (batches only).
    episode_novelty: Option<TokenHashes>,
    /// Whether the user text can contradict a fact
    /// ([`contradiction::may_contradict`]): when not, the raw-text check (step
    /// 4d) looks up no candidates.
    raw_may_contradict: bool,
    /// The near-fact lookups of its facts and user text (the latter only when it
    /// may contradict), read ahead from the snapshot the batch's transaction began
    /// from (default-profile batches only).
    near: Option<Prefetch>,
}

impl Analysis {
    pub(crate) fn of(
        user: &str,
        agent: &str,
        profile: Profile,
        core_values: &[String],
        batch: bool,
    ) -> Self {
        let episode = batch.then(|| significance::episodic_content(user, agent));
        Self {
            somatic: sentiment::observe_sentiment(user, agent),
            facts: facts::extract_facts(user, agent, profile),
            entities: batch.then(|| entities::extract_entities(user, agent, profile)),
            signals: significance::ExchangeSignals::of(user, agent, core_values),
            tokens: self_model::exchange_keywords(user, agent, profile),
            // Sorted here, on the pool: the writer sorts them to index them, and
            // a sorted list costs it one pass.
            episode_terms: episode.as_deref().map(|e| {
                let mut terms = crate::text::index_terms(e);
                terms.sort_unstable();
                terms
            }),
            turn: (batch && !profile.is_reference()).then(|| {
                let text = turn_text(user, agent);
                let terms = crate::text::index_terms(&text);
                (text, terms)
            }),
            episode_novelty: episode
                .as_deref()
                .map(|e| TokenHashes::from(&significance::recent_tokens(e))),
            raw_may_contradict: contradiction::may_contradict(user, profile),
            near: None,
        }
    }
}

/// Builds the heuristic engine's patterns for `profile` (fact, entity, sentiment,
/// significance and contradiction patterns: compiled on first use, ~85 ms
/// together) by running the analysis and the contradiction checks on a few
/// throwaway exchanges, so the first observe does not pay for them. Touches no
/// store.
pub fn warm_up(profile: Profile) {
    const EXCHANGES: [(&str, &str); 3] = [
        ("I live in Lisbon and work at Globex. My sister Ana loves kayaking!", "Noted."),
        ("I don't like coffee anymore; my favorite language is Rust.", "Got it."),
        ("Ugh, the migration failed again and I'm so frustrated.", "Sorry to hear that."),
    ];
    let mut facts = Vec::new();
    for (user, agent) in EXCHANGES {
        let a = Analysis::of(user, agent, profile, &[], true);
        facts.extend(a.facts.into_iter().map(|f| f.content));
    }
    let candidates: Vec<(&str, &str)> = facts.iter().map(|f| ("", f.as_str())).collect();
    for f in &facts {
        let _ = contradiction::detect(f, &candidates, profile);
        let _ = dedup::reconcile(f, &candidates);
    }
}

/// Runs [`warm_up`] for `profile` on a thread of its own, once per process (the
/// patterns are shared by every store). Called when a store opens: an agent's
/// first exchange comes later, and finds them built.
pub(crate) fn warm_up_in_background(profile: Profile) {
    static STARTED: [std::sync::Once; 2] = [std::sync::Once::new(), std::sync::Once::new()];
    let once = match profile {
        Profile::Reference => &STARTED[0],
        Profile::Default => &STARTED[1],
    };
    once.call_once(|| {
        // Without a thread the first observe builds them, as it would anyway.
        let _ = std::thread::Builder::new()
            .name("soulmem-warm-up".into())
            .spawn(move || warm_up(profile));
    });
}

/// Runs the whole pipeline inside `w`.
pub(crate) fn observe_in(
    w: &mut Writer<'_>,
    settings: &Settings,
    now: Timestamp,
    user: &str,
    agent: &str,
    opts: &ObserveOptions,
) -> Result<ObserveReport> {
    observe_analysed(w, settings, now, user, agent, opts, None, None)
}

#[allow(clippy::too_many_arguments)]
fn observe_analysed(
    w: &mut Writer<'_>,
    settings: &Settings,
    now: Timestamp,
    user: &str,
    agent: &str,
    opts: &ObserveOptions,
    analysis: Option<Analysis>,
    spent: Option<&mut Vec<NearFacts>>,
) -> Result<ObserveReport> {
    lifecycle::check_text(user)?;
    lifecycle::check_text(agent)?;
    let profile = w.profile();
    let Analysis {
        somatic,
        facts: extracted,
        entities: extracted_entities,
        signals,
        tokens,
        mut episode_terms,
        turn,
        mut episode_novelty,
        raw_may_contradict,
        near: ahead,
    } = analysis
        .unwrap_or_else(|| Analysis::of(user, agent, profile, &settings.core_values, false));
    let reference = profile.is_reference();
    let cx = Ctx { now, user_id: opts.user_id.clone(), domain: opts.domain.clone() };
    schema::validate_name("domain", &cx.domain)?;

    // 1-2. Sentiment (above) and significance.
    let recent = recent_episodes(w)?;
    let recent_refs: Vec<&TokenHashes> = recent.iter().map(|s| s.as_ref()).collect();
    let sig = significance::assess_signals(&signals, &somatic, &recent_refs);
    let mut significant = sig.is_significant;

    // 3. Episodic memory, indexed with the conversation it happened in (default).
    let turns = if reference { Vec::new() } else { recent_turns(w, &cx)? };
    let context = Context::of(&turns, time::to_micros(&now));
    let mut episodic_id = None;
    if significant {
        episodic_id = Some(store_episode(
            w,
            &cx,
            user,
            agent,
            &somatic,
            &sig,
            context.as_ref(),
            episode_terms.take(),
            episode_novelty.take(),
        )?);
    }

    // 4. Facts: extract, pre-filter, stamp.
    let salience = significance::episodic_salience(&sig.score);
    let mut candidates: Vec<MemoryEntry> = Vec::new();
    let all_active = if reference { Some(all_active_facts(w)?) } else { None };
    let mut near = NearFacts::new(cx.user_id.as_deref(), &cx.domain, ahead);
    let none = HashSet::new();
    for cand in extracted {
        let drop = match &all_active {
            Some(active) => {
                dedup::prefilter_drops(&cand.content, active.iter().map(|f| &*f.content))
            }
            None => {
                let close = near.similar(w, &cand.content, 0.5, [], &none)?;
                dedup::prefilter_drops(&cand.content, close.iter().map(|f| &*f.content))
            }
        };
        if drop {
            continue;
        }
        let mut e = cand.into_entry(salience);
        e.created_at = now;
        e.ingested_at = Some(now);
        e.user_id.clone_from(&cx.user_id);
        e.domain.clone_from(&cx.domain);
        candidates.push(e);
    }

    let mut superseded: Vec<SupersededFact> = Vec::new();
    let mut stored: Vec<(u64, MemoryEntry)> = Vec::new();
    let mut stored_docnos: HashSet<u64> = HashSet::new();

    if reference {
        // Q6-Q9: every candidate supersedes the first active fact sharing a template
        // prefix, before dedup, across users and domains, with "new".
        for cand in &candidates {
            'prefixes: for prefix in
                keys::REFERENCE_PREFIXES.iter().filter(|p| cand.content.starts_with(**p))
            {
                let docnos = crate::storage::query_keyed(&w.prefixes, prefix, None, None)?;
                for d in in_facts_order(w, docnos)? {
                    let Some(e) = w.get(d)? else { continue };
                    if e.content != cand.content {
                        if let Some(old) = supersede(w, d, "new", false, now, "prefix conflict")? {
                            superseded.push(SupersededFact {
                                id: old.id,
                                content: old.content,
                                by: "new".into(),
                                cause: "prefix".into(),
                            });
                        }
                        break 'prefixes;
                    }
                }
            }
        }
        // Dedup against the snapshot taken after the conflicts (Q11: facts stored by
        // this observe are not in it).
        let snapshot = all_active_facts(w)?;
        let mut merged: HashSet<u64> = HashSet::new();
        for cand in candidates {
            let pairs: Vec<(&str, &str)> = snapshot
                .iter()
                .filter(|f| !merged.contains(&f.docno))
                .map(|f| (&*f.id, &*f.content))
                .collect();
            match dedup::reconcile(&cand.content, &pairs) {
                dedup::DedupDecision::Skip { .. } => {}
                dedup::DedupDecision::Merge { id, .. } => {
                    let docno = w.insert(cand)?;
                    let entry =
                        w.get(docno)?.ok_or_else(|| crate::Error::Storage("lost fact".into()))?;
                    if let Some(target) = snapshot.iter().find(|f| *f.id == *id) {
                        merged.insert(target.docno);
                        if let Some(old) =
                            supersede(w, target.docno, &entry.id, false, now, "dedup merge")?
                        {
                            superseded.push(SupersededFact {
                                id: old.id,
                                content: old.content,
                                by: entry.id.clone(),
                                cause: "merge".into(),
                            });
                        }
                    }
                    stored_docnos.insert(docno);
                    stored.push((docno, entry));
                }
                dedup::DedupDecision::Create => {
                    let docno = w.insert(cand)?;
                    let entry =
                        w.get(docno)?.ok_or_else(|| crate::Error::Storage("lost fact".into()))?;
                    stored_docnos.insert(docno);
                    stored.push((docno, entry));
                }
            }
        }
    } else {
        // Default: dedup first, among this user's facts in this domain; a fact that
        // is stored then replaces the single-valued slot it fills.
        let mut batch: HashSet<u64> = HashSet::new();
        for cand in candidates {
            let close = near.similar(w, &cand.content, 0.6, [], &batch)?;
            let pairs: Vec<(&str, &str)> = close.iter().map(|f| (&*f.id, &*f.content)).collect();
            let decision = dedup::reconcile(&cand.content, &pairs);
            if matches!(decision, dedup::DedupDecision::Skip { .. }) {
                continue;
            }
            let slots = keys::slot_keys(&cand.content, Profile::Default);
            let docno = w.insert(cand)?;
            let entry = w.get(docno)?.ok_or_else(|| crate::Error::Storage("lost fact".into()))?;
            batch.insert(docno);
            if let dedup::DedupDecision::Merge { id, .. } = &decision
                && let Some(target) = close.iter().find(|f| *f.id == **id)
                && let Some(old) = supersede(w, target.docno, &entry.id, false, now, "dedup merge")?
            {
                near.retire(target.docno);
                superseded.push(SupersededFact {
                    id: old.id,
                    content: old.content,
                    by: entry.id.clone(),
                    cause: "merge".into(),
                });
            }
            for slot in slots {
                let olds = crate::storage::query_keyed(
                    &w.prefixes,
                    &slot,
                    Some(cx.user_id.as_deref().unwrap_or("")),
                    Some(&cx.domain),
                )?;
                for d in olds {
                    if batch.contains(&d) {
                        continue;
                    }
                    let Some(e) = w.get(d)? else { continue };
                    if e.content != entry.content
                        && let Some(old) = supersede(w, d, &entry.id, false, now, "slot replaced")?
                    {
                        near.retire(d);
                        superseded.push(SupersededFact {
                            id: old.id,
                            content: old.content,
                            by: entry.id.clone(),
                            cause: "prefix".into(),
                        });
                    }
                }
            }
            stored_docnos.insert(docno);
            stored.push((docno, entry));
        }
    }

    // 4b. Promotion.
    if !significant && !stored.is_empty() {
        significant = true;
        episodic_id = Some(store_episode(
            w,
            &cx,
            user,
            agent,
            &somatic,
            &sig,
            context.as_ref(),
            episode_terms.take(),
            episode_novelty.take(),
        )?);
    }

    // 4c. Contradictions of the stored facts.
    let mut contradictions: Vec<ContradictionRecord> = Vec::new();
    let mut resolved: HashSet<String> = HashSet::new();
    if !stored.is_empty() {
        let snapshot: Vec<Fact> = if reference { all_active_facts(w)? } else { Vec::new() };
        for (new_docno, fact) in &stored {
            let (cands, stating): (Vec<Fact>, Option<HashSet<u64>>) = if reference {
                // Q14: the snapshot includes this observe's facts; those superseded
                // since stay in the list but the verb pass skips them.
                let mut v = Vec::new();
                for f in &snapshot {
                    let still = w.docinfo(f.docno)?.is_some_and(|i| !i.superseded);
                    if still || !resolved.contains(&*f.id) {
                        v.push(Fact {
                            docno: f.docno,
                            id: f.id.clone(),
                            content: f.content.clone(),
                        });
                    }
                }
                (v, None)
            } else {
                let (cands, stating) =
                    contradiction_candidates(w, &mut near, &fact.content, &cx, &stored_docnos)?;
                (cands.into_iter().filter(|f| f.docno != *new_docno).collect(), Some(stating))
            };
            for c in contradictions_of(&fact.content, &cands, stating.as_ref(), profile) {
                let Some(target) = cands.iter().find(|f| *f.id == *c.old_id) else { continue };
                let was_active = w.docinfo(target.docno)?.is_some_and(|i| !i.superseded);
                near.retire(target.docno);
                if let Some(old) = supersede(w, target.docno, &fact.id, true, now, &c.reason)?
                    && was_active
                    && !stored_docnos.contains(&target.docno)
                {
                    superseded.push(SupersededFact {
                        id: old.id,
                        content: old.content,
                        by: fact.id.clone(),
                        cause: "contradiction".into(),
                    });
                }
                resolved.insert(c.old_id.clone());
                contradictions.push(ContradictionRecord {
                    old_id: c.old_id,
                    new_id: fact.id.clone(),
                    reason: c.reason,
                    confidence: c.confidence,
                });
            }
        }
    }

    // 4d. Raw-text fallback on the user's words (none possible without a
    // negation form, an attribute or a verb fact in them).
    if raw_may_contradict {
        let (cands, stating) = if reference {
            (all_active_facts(w)?, None)
        } else {
            let (cands, stating) =
                contradiction_candidates(w, &mut near, user, &cx, &stored_docnos)?;
            (cands, Some(stating))
        };
        // The raw-text check is the same detection (`detect_raw_text`) on the
        // user's words.
        for c in contradictions_of(user, &cands, stating.as_ref(), profile) {
            if resolved.contains(&c.old_id) {
                continue;
            }
            let Some(target) = cands.iter().find(|f| *f.id == *c.old_id) else { continue };
            let by = if reference {
                "raw-text-contradiction".to_owned()
            } else {
                stored
                    .first()
                    .map_or_else(|| "raw-text-contradiction".to_owned(), |(_, f)| f.id.clone())
            };
            if let Some(old) = supersede(w, target.docno, &by, true, now, &c.reason)?
                && !stored_docnos.contains(&target.docno)
            {
                superseded.push(SupersededFact {
                    id: old.id,
                    content: old.content,
                    by: by.clone(),
                    cause: "raw-text".into(),
                });
            }
            resolved.insert(c.old_id.clone());
            contradictions.push(ContradictionRecord {
                old_id: c.old_id,
                new_id: by,
                reason: c.reason,
                confidence: c.confidence,
            });
        }
    }

    // 5. Entities into the graph.
    let skip_deep = !significant && settings.skip_deep_processing_on_low_significance;
    let mut observed = Vec::new();
    if !skip_deep {
        let extracted =
            extracted_entities.unwrap_or_else(|| entities::extract_entities(user, agent, profile));
        for e in extracted.iter() {
            observed.push(ObservedEntity {
                name: e.name.clone(),
                entity_type: e.kind.as_str().to_owned(),
            });
        }
        let now_us = time::to_micros(&now);
        for upd in entities::graph_updates(&extracted, profile) {
            w.graph_add_entity(&upd.name, upd.entity_type)?;
            for rel in &upd.relationships {
                w.graph_add_relationship(EdgeRecord {
                    source: upd.name.clone(),
                    target: rel.target.clone(),
                    relation: rel.relation.to_owned(),
                    valid_from: now_us,
                    valid_to: None,
                    metadata: None,
                })?;
            }
        }
    }

    // 6. Self-model, under the same condition as the entities.
    if !skip_deep {
        let contents: Vec<&str> = stored.iter().map(|(_, f)| f.content.as_str()).collect();
        self_model::update_stored(w, &tokens, &contents, cx.user_id.as_deref())?;
    }

    if !reference {
        let (text, terms) = match turn {
            Some((text, terms)) => (text, Some(terms)),
            None => (turn_text(user, agent), None),
        };
        remember_turn(w, &cx, turns, text, terms)?;
    }
    super::evict::enforce_caps(w, settings)?;
    let facts_out: Vec<MemoryEntry> = stored.into_iter().map(|(_, e)| e).collect();
    // One entry per fact: a fact superseded two ways (a merge, then a raw-text
    // contradiction) is reported once, by its first cause.
    let mut listed = HashSet::new();
    superseded.retain(|s| listed.insert(s.id.clone()));
    if let Some(spent) = spent {
        spent.push(near);
    }
    Ok(ObserveReport {
        somatic,
        significance_parts: sig.score.clone(),
        significance: sig.overall,
        is_significant: significant,
        episodic_id,
        facts: facts_out,
        entities: observed,
        contradictions,
        superseded,
    })
}

/// Exchanges analysed per chunk ahead of a batch's write transaction.
const ANALYSIS_CHUNK: usize = 32;

impl Memory {
    /// Observes one exchange (a user turn and the agent's reply) through the whole
    /// write pipeline, in one transaction.
    ///
    /// # Errors
    /// A bad domain name, text over the size limit, or storage errors; nothing is
    /// written then.
    pub fn observe_pair(
        &self,
        user: &str,
        agent: &str,
        opts: &ObserveOptions,
    ) -> Result<ObserveReport> {
        let now = self.now();
        let settings = &self.settings;
        self.write(|w| observe_in(w, settings, now, user, agent, opts))
    }

    /// Observes many exchanges in one transaction (all or none): the fast path for
    /// bulk ingest.
    ///
    /// # Errors
    /// As [`Memory::observe_pair`]; the first failure aborts the batch.
    pub fn observe_batch(
        &self,
        items: &[(String, String, ObserveOptions)],
    ) -> Result<Vec<ObserveReport>> {
        self.observe_batch_with(items, self.durability())
    }

    /// [`Memory::observe_batch`] committed with the given [`Durability`]
    /// ([`Durability::Deferred`] for bulk loads).
    ///
    /// # Errors
    /// As [`Memory::observe_batch`].
    pub fn observe_batch_with(
        &self,
        items: &[(String, String, ObserveOptions)],
        durability: Durability,
    ) -> Result<Vec<ObserveReport>> {
        use rayon::prelude::*;
        let now = self.now();
        let settings = &self.settings;
        let profile = self.profile();
        // Checked first so a bad item fails the batch before any analysis.
        for (u, a, _) in items {
            lifecycle::check_text(u)?;
            lifecycle::check_text(a)?;
        }
        // Analysis runs ahead of the write transaction, in chunks computed in
        // parallel and handed over in order, so the two overlap. In the default
        // profile each exchange's near-fact lookups are read ahead too, from a
        // snapshot the transaction hands over as it begins (see `near`).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Analysis>>(4);
        let (snap_tx, snap_rx) = std::sync::mpsc::sync_channel::<redb::ReadTransaction>(1);
        // The near-fact lookups an observe is done with are dropped on a thread of
        // their own: most of what they hold was read ahead (allocated) on the
        // analysis threads, and freeing it on the write thread cost that thread
        // ~2% of its instructions (callgrind, 1M store), more in allocator flushes.
        let (spent_tx, spent_rx) = std::sync::mpsc::channel::<Vec<NearFacts>>();
        std::thread::scope(|scope| {
            // Neither thread is needed: without the first, the lookups are
            // freed here (the sends fail); without the second, the analysis is
            // made in the transaction (the receiver finds nothing).
            let _ = std::thread::Builder::new()
                .name("soulmem-free".into())
                .spawn_scoped(scope, move || spent_rx.into_iter().for_each(drop));
            let analyse = move || {
                let snapshot = if profile.is_reference() { None } else { snap_rx.recv().ok() };
                let tables = snapshot.as_ref().and_then(|s| SnapshotTables::open(s).ok());
                for chunk in items.chunks(ANALYSIS_CHUNK) {
                    let done: Vec<Analysis> = self.install(|| {
                        chunk
                            .par_iter()
                            .map(|(u, a, o)| {
                                let mut an =
                                    Analysis::of(u, a, profile, &settings.core_values, true);
                                if let Some(t) = &tables {
                                    let texts = an.facts.iter().map(|f| f.content.as_str());
                                    let raw = an.raw_may_contradict.then_some(u.as_str());
                                    // A failed read only means the lookups are made live.
                                    an.near = Prefetch::read(
                                        t,
                                        o.user_id.as_deref(),
                                        &o.domain,
                                        texts.chain(raw),
                                    )
                                    .ok();
                                }
                                an
                            })
                            .collect()
                    });
                    if tx.send(done).is_err() {
                        return; // the transaction failed
                    }
                }
            };
            let _ = std::thread::Builder::new()
                .name("soulmem-analysis".into())
                .spawn_scoped(scope, analyse);
            // The receiver moves into the transaction: when it ends (even early,
            // on an error) the producer's next send fails and it stops.
            self.write_synced(durability.synced(), move |w| {
                if !profile.is_reference() {
                    w.record_fact_changes();
                    // Begun inside the transaction: the state it started from. On
                    // an error the sender is dropped and nothing is read ahead.
                    if let Ok(snapshot) = self.store.snapshot() {
                        let _ = snap_tx.send(snapshot);
                    }
                }
                let mut reports = Vec::with_capacity(items.len());
                let mut analysed = rx.into_iter().flatten();
                let mut spent = Vec::with_capacity(ANALYSIS_CHUNK);
                for (u, a, o) in items {
                    let an = analysed.next();
                    reports.push(observe_analysed(
                        w,
                        settings,
                        now,
                        u,
                        a,
                        o,
                        an,
                        Some(&mut spent),
                    )?);
                    if spent.len() == ANALYSIS_CHUNK {
                        // (A send fails only once the dropping thread is gone.)
                        let _ = spent_tx.send(std::mem::replace(
                            &mut spent,
                            Vec::with_capacity(ANALYSIS_CHUNK),
                        ));
                    }
                }
                let _ = spent_tx.send(spent);
                Ok(reports)
            })
        })
    }
}
