//! Isolation: on large random stores, random recall queries never return a memory
//! that one of their filters excludes. The oracle below is written from the
//! documented rules, independently of `read::filters`.
//!
//! The reference profile has the `user_id`, `domain`, `layer`, `types`,
//! `min_importance` and visibility filters (it filters user and domain after
//! ranking, so it may return fewer results, but must never leak; its
//! `layer="social"`/custom-layer path ignores `min_importance`, as soul-protocol
//! does); scopes and `include_superseded` exist only in the default profile.

use std::collections::HashMap;
use std::sync::Arc;

use soulmem::storage::faulty::Rng;
use soulmem::{
    FixedClock, Memory, MemoryEntry, MemoryType, Profile, RecallQuery, Settings, Visibility,
};

const WORDS: &[&str] = &[
    "paris", "rust", "coffee", "tea", "project", "deadline", "garden", "python", "meeting",
    "berlin", "music", "guitar", "doctor", "budget", "sales", "lead", "invoice", "travel",
];
const USERS: &[&str] = &["alice", "bob", "carol", "dave"];
const DOMAINS: &[&str] = &["default", "work", "home"];
const LAYERS: &[&str] = &["episodic", "semantic", "procedural", "social", "journal"];
const SCOPES: &[&str] =
    &["org:sales", "org:sales:leads", "org:support:*", "org:*", "team:x", "team:x:y", "*"];
const THRESHOLD: f64 = 30.0;

fn pick<'a>(rng: &mut Rng, xs: &[&'a str]) -> &'a str {
    xs[usize::try_from(rng.below(xs.len() as u64)).unwrap_or(0)]
}

fn random_entry(rng: &mut Rng, n: u64) -> MemoryEntry {
    let layer = pick(rng, LAYERS);
    let kind = match layer {
        "episodic" => MemoryType::Episodic,
        "procedural" => MemoryType::Procedural,
        "social" => MemoryType::Social,
        _ => MemoryType::Semantic,
    };
    let words: Vec<&str> = (0..2 + rng.below(4)).map(|_| pick(rng, WORDS)).collect();
    let mut e = MemoryEntry::new(kind, format!("{} note{n}", words.join(" ")));
    e.layer = layer.to_owned();
    e.domain = pick(rng, DOMAINS).to_owned();
    e.user_id = (rng.below(5) != 0).then(|| pick(rng, USERS).to_owned());
    e.visibility = match rng.below(3) {
        0 => Visibility::Public,
        1 => Visibility::Bonded,
        _ => Visibility::Private,
    };
    e.scope = (0..rng.below(3)).map(|_| pick(rng, SCOPES).to_owned()).collect();
    e.importance = u8::try_from(1 + rng.below(10)).unwrap_or(5);
    e.entities = vec![pick(rng, WORDS).to_owned()];
    if kind == MemoryType::Semantic && layer == "semantic" && rng.below(4) == 0 {
        e.superseded = true;
        if rng.below(4) != 0 {
            e.superseded_by = Some("newer".into());
        }
    }
    if kind == MemoryType::Episodic && rng.below(10) == 0 {
        e.archived = true;
    }
    e
}

fn build(profile: Profile, n: u64, seed: u64) -> (Memory, HashMap<String, MemoryEntry>) {
    build_with(profile, n, seed, None)
}

/// [`build`], on `clock` when given.
fn build_with(
    profile: Profile,
    n: u64,
    seed: u64,
    clock: Option<Arc<FixedClock>>,
) -> (Memory, HashMap<String, MemoryEntry>) {
    let mut settings = Settings::for_profile(profile);
    settings.durable = false;
    settings.episodic_max_entries = None;
    settings.semantic_max_facts = None;
    let mut builder = Memory::builder().profile(profile).settings(settings);
    if let Some(c) = clock {
        builder = builder.clock(c);
    }
    let mem = builder.open_in_memory().expect("memory");
    let mut rng = Rng::new(seed);
    let mut all = HashMap::new();
    let mut k = 0;
    while k < n {
        let chunk: Vec<MemoryEntry> =
            (k..(k + 500).min(n)).map(|i| random_entry(&mut rng, i)).collect();
        let ids = mem.add_batch(chunk.clone()).expect("add_batch");
        for (id, mut e) in ids.into_iter().zip(chunk) {
            e.id.clone_from(&id);
            all.insert(id, e);
        }
        k += 500;
    }
    (mem, all)
}

fn random_query(rng: &mut Rng, reference: bool) -> RecallQuery {
    let words: Vec<&str> = (0..1 + rng.below(3)).map(|_| pick(rng, WORDS)).collect();
    let mut q = RecallQuery::new(words.join(" "));
    q.limit = usize::try_from(5 + rng.below(40)).unwrap_or(10);
    if rng.below(2) == 0 {
        q.user_id = Some(pick(rng, USERS).to_owned());
    }
    if rng.below(2) == 0 {
        q.domain = Some(pick(rng, DOMAINS).to_owned());
    }
    match rng.below(4) {
        0 => q.layer = Some(pick(rng, LAYERS).to_owned()),
        1 => {
            let ts = ["episodic", "semantic", "procedural", "social"];
            q.types = Some((0..1 + rng.below(2)).map(|_| pick(rng, &ts).to_owned()).collect());
        }
        _ => {}
    }
    if rng.below(3) != 0 {
        q.requester_id = Some("stranger".into());
        q.bond_strength =
            [0.0, 29.99, 30.0, 55.0, 100.0][usize::try_from(rng.below(5)).unwrap_or(0)];
    }
    q.min_importance = i32::try_from(rng.below(8)).unwrap_or(0);
    if !reference {
        if rng.below(2) == 0 {
            q.scopes = Some((0..1 + rng.below(2)).map(|_| pick(rng, SCOPES).to_owned()).collect());
        }
        q.include_superseded = rng.below(4) == 0;
    }
    q
}

/// Does scope glob `outer` contain `inner`?
fn contains(outer: &str, inner: &str) -> bool {
    if outer == "*" || outer == inner {
        return true;
    }
    match outer.strip_suffix(":*") {
        Some(p) => {
            inner == p
                || (inner.len() > p.len()
                    && inner.starts_with(p)
                    && inner[p.len()..].starts_with(':'))
        }
        None => false,
    }
}

/// The first documented rule `e` breaks for `q`, if any.
fn leak(q: &RecallQuery, e: &MemoryEntry, reference: bool) -> Option<&'static str> {
    if e.kind == MemoryType::Core {
        return Some("core");
    }
    if q.layer.as_ref().is_some_and(|l| l != &e.layer) {
        return Some("layer");
    }
    if q.layer.is_none() && q.types.as_ref().is_some_and(|ts| !ts.contains(&e.layer)) {
        return Some("types");
    }
    if q.domain.as_ref().is_some_and(|d| d != &e.domain) {
        return Some("domain");
    }
    if let (Some(u), Some(owner)) = (&q.user_id, &e.user_id)
        && u != owner
    {
        return Some("user_id");
    }
    // The reference's `layer="social"`/custom-layer path ignores `min_importance`
    // (soul-protocol quirk Q25, kept for parity; not a privacy filter).
    let layer_path = reference
        && q.layer.as_deref().is_some_and(|l| !matches!(l, "episodic" | "semantic" | "procedural"));
    if !layer_path && i32::from(e.importance) < q.min_importance {
        return Some("min_importance");
    }
    let superseded = if reference {
        e.superseded_by.is_some()
    } else {
        e.superseded || e.superseded_by.is_some()
    };
    if superseded && !q.include_superseded {
        return Some("superseded");
    }
    if e.archived {
        return Some("archived");
    }
    if q.requester_id.is_some() {
        match e.visibility {
            Visibility::Private => return Some("private"),
            Visibility::Bonded if q.bond_strength < THRESHOLD => return Some("bonded"),
            _ => {}
        }
    }
    if let Some(allowed) = &q.scopes
        && !e.scope.is_empty()
        && !allowed.is_empty()
        && !e.scope.iter().any(|s| allowed.iter().any(|a| contains(s, a) || contains(a, s)))
    {
        return Some("scope");
    }
    None
}

fn run(profile: Profile, n: u64, queries: u64, seed: u64) {
    let reference = profile.is_reference();
    let (mem, all) = build(profile, n, seed);
    let mut rng = Rng::new(seed ^ 0xfeed);
    let mut returned = 0usize;
    let mut hits: HashMap<&'static str, usize> = HashMap::new();
    for i in 0..queries {
        let q = random_query(&mut rng, reference);
        let r = mem.recall(&q).unwrap_or_else(|e| panic!("query {i} {q:?}: {e}"));
        returned += r.memories.len();
        for m in &r.memories {
            let orig = all.get(&m.id).unwrap_or_else(|| panic!("query {i}: unknown id {}", m.id));
            if let Some(rule) = leak(&q, orig, reference) {
                panic!(
                    "{profile:?} seed {seed} query {i}: leaked a memory the `{rule}` filter excludes\nquery: {q:?}\nmemory: {orig:?}"
                );
            }
            // The stored fields the filters read were not changed by the recall.
            assert_eq!(
                (&m.user_id, &m.domain, &m.layer, m.visibility),
                (&orig.user_id, &orig.domain, &orig.layer, orig.visibility)
            );
        }
        if q.scopes.is_some() {
            *hits.entry("scoped queries").or_default() += 1;
        }
    }
    eprintln!("{profile:?}: {n} memories, {queries} queries, {returned} results, 0 leaks");
    assert!(returned > (queries as usize), "queries returned too little to be meaningful");
}

fn seed() -> u64 {
    std::env::var("SOULMEM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_240_304)
}

#[test]
fn default_profile_never_leaks() {
    run(Profile::Default, 3_000, 400, seed());
}

#[test]
fn reference_profile_never_leaks() {
    run(Profile::Reference, 2_000, 60, seed() + 1);
}

/// The default profile's recall skips superseded, withheld (core, archived)
/// and restricted memories and other domains' on their bits before reading
/// their records, walks a rare layer's members instead of checking records
/// for a layer or types filter, and its first pass keeps no margin where the
/// skips decide;
/// an explained recall skips nothing and filters every record it meets. Two
/// twin stores, one asked plainly and the other with explanations, return
/// the same memories in the same order for every kind of query (and record
/// the same accesses, so they stay twins).
#[test]
fn skipping_on_bits_never_changes_what_recall_returns() {
    let seed = seed() + 11;
    let at = soulmem::model::time::parse_timestamp("2025-03-01T12:00:00").expect("time");
    let (plain, _) = build_with(Profile::Default, 2_000, seed, Some(Arc::new(FixedClock::new(at))));
    let (explained, _) =
        build_with(Profile::Default, 2_000, seed, Some(Arc::new(FixedClock::new(at))));
    // Core memories too (withheld, as archived episodes are), with the words
    // the queries use.
    let core: Vec<MemoryEntry> = (0..60)
        .map(|i| {
            let text =
                format!("{} {} core{i}", WORDS[i % WORDS.len()], WORDS[(i * 7) % WORDS.len()]);
            MemoryEntry::new(MemoryType::Core, text)
        })
        .collect();
    // And a rare layer, which a layer or types filter walks instead of checking
    // records (`read::filters::LayerMembers`).
    let rare: Vec<MemoryEntry> = (0..80)
        .map(|i| {
            let text = format!(
                "{} {} rare{i}",
                WORDS[(i * 5) % WORDS.len()],
                WORDS[(i * 3) % WORDS.len()]
            );
            let mut e = MemoryEntry::new(MemoryType::Procedural, text);
            e.layer = "rare".into();
            e.visibility = if i % 2 == 0 { Visibility::Public } else { Visibility::Bonded };
            e.importance = u8::try_from(1 + i % 10).unwrap_or(5);
            e
        })
        .collect();
    for m in [&plain, &explained] {
        m.add_batch(core.clone()).expect("core memories");
        m.add_batch(rare.clone()).expect("rare memories");
    }
    let mut rng = Rng::new(seed ^ 0xbeef);
    let mut returned = 0;
    for i in 0..300 {
        let mut q = random_query(&mut rng, false);
        if i % 2 == 0 {
            // Half the queries with no filter that reads records.
            (q.layer, q.types, q.scopes, q.min_importance) = (None, None, None, 0);
        }
        match i % 6 {
            // The importance filters walked on their bitmaps, and one above
            // every memory's.
            0 => q.min_importance = 6 + i32::try_from(rng.below(6)).unwrap_or(0),
            1 => q.layer = Some("rare".into()),
            3 => q.types = Some(vec!["rare".into(), pick(&mut rng, LAYERS).to_owned()]),
            4 => (q.layer, q.types) = (None, Some(vec!["rare".into()])),
            _ => {}
        }
        let contents = |m: &Memory, q: &RecallQuery| -> Vec<String> {
            m.recall(q).expect("recall").memories.into_iter().map(|e| e.content).collect()
        };
        let want = contents(&plain, &q);
        q.explain = true;
        assert_eq!(contents(&explained, &q), want, "query {i}: {q:?}");
        returned += want.len();
    }
    assert!(returned > 300, "queries returned too little to be meaningful: {returned}");
}

#[test]
fn filters_hold_on_a_small_adversarial_store() {
    // Every combination on a store where each memory differs from the query's
    // filters in exactly one field: any leak shows which filter broke.
    for profile in [Profile::Default, Profile::Reference] {
        let (mem, all) = build(profile, 300, seed() + 7);
        let mut q = RecallQuery::new("paris rust coffee tea project deadline garden python");
        q.limit = 300;
        for user in USERS {
            for domain in DOMAINS {
                for bond in [0.0, 29.99, 30.0] {
                    q.user_id = Some((*user).to_owned());
                    q.domain = Some((*domain).to_owned());
                    q.requester_id = Some("x".into());
                    q.bond_strength = bond;
                    let r = mem.recall(&q).expect("recall");
                    for m in &r.memories {
                        let orig = &all[&m.id];
                        assert_eq!(
                            leak(&q, orig, profile.is_reference()),
                            None,
                            "{profile:?} {q:?} {orig:?}"
                        );
                    }
                }
            }
        }
    }
}

/// A layer or types filter keeping a rare layer walks its members: the text
/// search steps over the other layers' memories without scoring them or
/// reading their records, where it used to score every memory holding the
/// query's words and check each record until it had found enough. Here the
/// rare layer's memories come after 3,000 others holding the same word, so
/// the walk decodes only the blocks that hold them.
#[test]
fn a_rare_layer_is_walked_past_the_other_layers() {
    let rare = |e: &mut MemoryEntry| {
        e.kind = MemoryType::Procedural;
        e.layer = "procedural".into();
    };
    let mem = few_after_many(rare);
    for (layer, types) in [(Some("procedural"), None), (None, Some(vec!["procedural".to_owned()]))]
    {
        let mut q = RecallQuery::new("lake");
        q.layer = layer.map(str::to_owned);
        q.types = types;
        let walked = walked_as_checked(&mem, q);
        assert!(walked.iter().all(|m| m.layer == "procedural"));
    }
}

/// A store of 3,000 episodes holding "lake", then 30 more changed by `few`.
fn few_after_many(few: impl Fn(&mut MemoryEntry)) -> Memory {
    few_after_many_changed(|_| {}, few)
}

/// [`few_after_many`] with the 3,000 episodes changed by `many`.
fn few_after_many_changed(
    many: impl Fn(&mut MemoryEntry),
    few: impl Fn(&mut MemoryEntry),
) -> Memory {
    let mem = Memory::open_in_memory().expect("store");
    let entry = |i: usize| {
        let mut e = MemoryEntry::new(MemoryType::Episodic, format!("lake {} n{i}", WORDS[i % 18]));
        e.visibility = Visibility::Public;
        e.importance = 5;
        e
    };
    for chunk in 0..3 {
        let episodes = (0..1000).map(|i| {
            let mut e = entry(chunk * 1000 + i);
            many(&mut e);
            e
        });
        mem.add_batch(episodes.collect()).expect("episodes");
    }
    let few: Vec<MemoryEntry> = (0..30)
        .map(|i| {
            let mut e = entry(i);
            few(&mut e);
            e
        })
        .collect();
    mem.add_batch(few).expect("the few");
    mem
}

/// Recalls `q` on a [`few_after_many`] store: ten memories, found with few
/// postings decoded, the same (and in the same order) as an explained recall
/// finds, which walks nothing and checks every record it meets.
fn walked_as_checked(mem: &Memory, mut q: RecallQuery) -> Vec<MemoryEntry> {
    let walked = mem.recall(&q).expect("recall");
    assert_eq!(walked.memories.len(), 10);
    assert!(walked.trace.postings_read < 600, "{q:?}: {} postings", walked.trace.postings_read);
    q.explain = true;
    let checked = mem.recall(&q).expect("recall");
    let ids = |r: &soulmem::Recall| r.memories.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&walked), ids(&checked));
    assert!(checked.trace.postings_read > 3000, "{}", checked.trace.postings_read);
    walked.memories
}

/// A `scopes` filter keeping few memories walks them: the unscoped ones on
/// their bitmap and those of the scopes it admits (exactly, or by a glob
/// either way) in their rows, so the text search steps over the other scopes'
/// memories without reading their records. Here the 30 memories in scope
/// `org:sales:leads` come after 3,000 in `org:support`.
#[test]
fn a_rare_scope_is_walked_past_the_other_scopes() {
    let mem = few_after_many_changed(
        |e| e.scope = vec!["org:support".into()],
        |e| e.scope = vec!["org:sales:leads".into(), "org:sales".into()],
    );
    for allowed in [
        vec!["org:sales:leads"],
        vec!["org:sales:*"],
        vec!["team:x", "org:sales:leads:*"],
        vec!["org:sales"],
    ] {
        let mut q = RecallQuery::new("lake");
        q.scopes = Some(allowed.iter().map(|a| (*a).to_owned()).collect());
        let walked = walked_as_checked(&mem, q);
        assert!(walked.iter().all(|m| m.scope.iter().any(|s| s == "org:sales:leads")));
    }
}

/// A `min_importance` filter of 6 or more walks its bitmap's set bits: the
/// text search steps over every less important memory without scoring it or
/// reading its record. Here the 30 important memories come after 3,000 others
/// holding the same word.
#[test]
fn important_memories_are_walked_past_the_others() {
    let mem = few_after_many(|e| e.importance = 9);
    for min in [6, 9] {
        let mut q = RecallQuery::new("lake");
        q.min_importance = min;
        assert!(walked_as_checked(&mem, q).iter().all(|m| m.importance == 9));
    }
    let mut q = RecallQuery::new("lake");
    q.min_importance = 11;
    let none = mem.recall(&q).expect("recall");
    assert!(none.memories.is_empty());
    assert_eq!(none.trace.postings_read, 0);
}
