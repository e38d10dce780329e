//! Lifecycle operations: forget_entity, forget_before, supersede, archive, each
//! leaving every index exact and an audit trail.

use std::sync::Arc;
use std::time::Duration;

use soulmem::model::time::parse_timestamp;
use soulmem::write::observe::ObserveOptions;
use soulmem::{
    Error, FixedClock, HashingEmbedder, Memory, Profile, RecallQuery, Remember, Supersede,
};

fn ts(s: &str) -> soulmem::Timestamp {
    parse_timestamp(s).expect("timestamp")
}

fn assert_consistent(mem: &Memory) {
    let report = mem.check(|_| {}).expect("check runs");
    assert!(report.is_ok(), "index problems: {:#?}", report.problems);
}

fn open(profile: Profile, clock: Arc<FixedClock>) -> Memory {
    Memory::builder()
        .profile(profile)
        .clock(clock)
        .embedder(Arc::new(HashingEmbedder::new(64)))
        .open_in_memory()
        .expect("open")
}

#[test]
fn forget_entity_removes_memories_node_and_edges() {
    let clock = Arc::new(FixedClock::new(ts("2024-01-01T10:00:00")));
    let mem = open(Profile::Default, clock);
    let opts = ObserveOptions::default();
    mem.observe_pair("I use Python and Docker at work every day", "Nice stack!", &opts).expect("o");
    mem.observe_pair("My sister Alice lives in Lisbon", "Lovely city.", &opts).expect("o");
    let mut tagged = Remember::new("semantic", "Prefers the snake language for scripts");
    tagged.entities = vec!["Python".into()];
    let tagged = mem.remember(&tagged).expect("tagged");
    let keep = mem.remember(&Remember::new("semantic", "User drinks green tea")).expect("keep");
    let before = mem.stats().expect("stats");
    assert!(before.graph_edges > 0, "observe built a graph");
    assert_consistent(&mem);

    let report = mem.forget_entity("python").expect("forget");
    assert!(report.deleted.iter().any(|(_, id)| *id == tagged), "entity list match: {report:?}");
    assert!(report.deleted.len() >= 2, "content matches too: {report:?}");
    assert!(report.edges_removed >= 1 && report.nodes_removed == 1, "{report:?}");
    assert_consistent(&mem);
    let after = mem.stats().expect("stats");
    assert_eq!(after.graph_edges, before.graph_edges - report.edges_removed);
    assert_eq!(after.graph_nodes, before.graph_nodes - 1);
    assert!(mem.get(&keep).expect("get").is_some());
    let r = mem.recall(&RecallQuery::new("python")).expect("recall");
    assert!(r.memories.iter().all(|m| !m.content.to_lowercase().contains("python")));
    let audit = mem.deletion_audit().expect("audit");
    let last = audit.last().expect("record");
    assert_eq!(last["reason"], "forget_entity(entity='python')");
    assert_eq!(last["tiers"]["graph_edges"], report.edges_removed);
    assert_eq!(last["count"], report.total());

    // Nothing to forget: no audit record.
    let n = mem.deletion_audit().expect("audit").len();
    assert_eq!(mem.forget_entity("Zanzibar").expect("forget").total(), 0);
    assert_eq!(mem.deletion_audit().expect("audit").len(), n);
}

#[test]
fn forget_entity_in_the_reference_profile_matches_by_token() {
    let clock = Arc::new(FixedClock::new(ts("2024-01-01T10:00:00")));
    let mem = open(Profile::Reference, clock);
    let opts = ObserveOptions::default();
    mem.observe_pair("I use Python and Docker at work every day", "Nice stack!", &opts).expect("o");
    mem.remember(&Remember::new("procedural", "Run python scripts with uv")).expect("r");
    mem.remember(&Remember::new("social", "python meetup friends")).expect("r");
    let report = mem.forget_entity("Python").expect("forget");
    assert!(report.deleted.iter().any(|(l, _)| l == "procedural"));
    assert!(report.deleted.iter().all(|(l, _)| l != "social"), "social is not visited");
    assert_consistent(&mem);
}

#[test]
fn forget_before_deletes_older_memories() {
    let clock = Arc::new(FixedClock::new(ts("2024-01-01T10:00:00")));
    let mem = open(Profile::Default, clock.clone());
    let old = mem.remember(&Remember::new("semantic", "User lived in Lyon")).expect("old");
    let old_ep = mem.remember(&Remember::new("episodic", "We talked about Lyon")).expect("ep");
    clock.set(ts("2024-03-01T10:00:00"));
    let new = mem.remember(&Remember::new("semantic", "User lives in Paris")).expect("new");
    let report = mem.forget_before(ts("2024-02-01T00:00:00")).expect("forget");
    let ids: Vec<&str> = report.deleted.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(report.total(), 2);
    assert!(ids.contains(&old.as_str()) && ids.contains(&old_ep.as_str()));
    assert!(mem.get(&new).expect("get").is_some());
    assert_consistent(&mem);
    let audit = mem.deletion_audit().expect("audit");
    let last = audit.last().expect("record");
    assert_eq!(last["reason"], "forget_before(timestamp='2024-02-01T00:00:00')");
    assert_eq!(last["tiers"]["semantic"], 1);
    assert_eq!(last["tiers"]["episodic"], 1);
    assert_eq!(last["tiers"]["procedural"], 0);
    assert_eq!(mem.forget_before(ts("2000-01-01T00:00:00")).expect("none").total(), 0);
}

#[test]
fn supersede_links_old_and_new() {
    let clock = Arc::new(FixedClock::new(ts("2024-01-01T10:00:00")));
    let mem = open(Profile::Default, clock);
    let mut r = Remember::new("semantic", "User works at Acme");
    r.domain = "work".into();
    r.user_id = Some("u1".into());
    let old = mem.remember(&r).expect("old");
    let new = mem.supersede(&old, "User works at Globex", Some("job change")).expect("supersede");
    assert_ne!(old, new);
    let o = mem.get(&old).expect("get").expect("old kept");
    assert_eq!(o.superseded_by.as_deref(), Some(new.as_str()));
    assert!(o.superseded);
    let n = mem.get(&new).expect("get").expect("new");
    assert_eq!(n.content, "User works at Globex");
    assert_eq!((n.layer.as_str(), n.domain.as_str()), ("semantic", "work"));
    assert_eq!(n.user_id.as_deref(), Some("u1"));
    assert_consistent(&mem);

    let got: Vec<String> = mem
        .recall(&RecallQuery::new("where does the user work"))
        .expect("recall")
        .memories
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert!(got.contains(&new) && !got.contains(&old), "{got:?}");

    let audit = mem.supersede_audit().expect("audit");
    let last = audit.last().expect("record");
    assert_eq!(last["old_id"], old.as_str());
    assert_eq!(last["new_id"], new.as_str());
    assert_eq!(last["tier"], "semantic");
    assert_eq!(last["reason"], "job change");

    assert!(matches!(mem.supersede("nope", "x", None), Err(Error::NotFound(_))));
    let mut req = Supersede::new(&new, "User runs their own company");
    req.importance = 8;
    req.layer = Some("procedural".into());
    let third = mem.supersede_with(&req).expect("supersede with options");
    let t = mem.get(&third).expect("get").expect("third");
    assert_eq!((t.layer.as_str(), t.importance), ("procedural", 8));
    assert_consistent(&mem);
}

#[test]
fn archive_old_memories_compresses_old_episodes() {
    let clock = Arc::new(FixedClock::new(ts("2024-01-01T10:00:00")));
    let mem = open(Profile::Default, clock.clone());
    let mut ids = Vec::new();
    for (i, text) in [
        "I adopted a cat named Miso. She is shy",
        "We repainted the kitchen blue",
        "I started learning the cello",
    ]
    .iter()
    .enumerate()
    {
        clock.set(ts(&format!("2024-01-0{}T10:00:00", i + 1)));
        let mut r = Remember::new("episodic", *text);
        r.importance = if i == 0 { 8 } else { 5 };
        ids.push(mem.remember(&r).expect("remember"));
    }
    clock.set(ts("2024-01-10T10:00:00"));
    let fresh_id =
        mem.remember(&Remember::new("episodic", "Opera tickets tonight")).expect("fresh");

    // Too few old episodes at a long age.
    assert!(mem.archive_old_memories(Duration::from_secs(30 * 86_400)).expect("archive").is_none());

    let archive =
        mem.archive_old_memories(Duration::from_secs(48 * 3600)).expect("archive").expect("made");
    assert_eq!(archive.memory_refs, ids);
    assert_eq!(archive.start_time, ts("2024-01-01T10:00:00"));
    assert_eq!(archive.end_time, ts("2024-01-03T10:00:00"));
    assert_eq!(
        archive.summary,
        "I adopted a cat named Miso. We repainted the kitchen blue. I started learning the cello."
    );
    assert_eq!(archive.key_moments, vec!["I adopted a cat named Miso. She is shy".to_owned()]);
    for id in &ids {
        assert!(mem.get(id).expect("get").expect("kept").archived);
    }
    assert!(!mem.get(&fresh_id).expect("get").expect("fresh").archived);
    assert_eq!(mem.archives().expect("archives"), vec![archive]);
    assert_consistent(&mem);

    // Recall leaves the archived episodes out (skipped on their bit in the
    // withheld bitmap); an explained recall reads them and says why.
    let mut q = RecallQuery::new("cat kitchen cello opera tickets");
    q.limit = 10;
    let found: Vec<String> =
        mem.recall(&q).expect("recall").memories.into_iter().map(|m| m.id).collect();
    assert_eq!(found, vec![fresh_id.clone()]);
    q.explain = true;
    let explained = mem.recall(&q).expect("recall");
    let mut dropped: Vec<String> = explained
        .trace
        .candidates
        .iter()
        .filter(|t| t.dropped_by.as_deref() == Some("archived"))
        .map(|t| t.id.clone())
        .collect();
    dropped.sort();
    dropped.dedup(); // (a memory met by two stages is listed by each)
    let mut archived = ids.clone();
    archived.sort();
    assert_eq!(dropped, archived);

    // Archived episodes are not archived twice.
    assert!(mem.archive_old_memories(Duration::from_secs(3600)).expect("again").is_none());
}

/// A batch whose item fails half-way through is rolled back whole, and the
/// analysis running ahead of its transaction stops (no hang, nothing stored).
#[test]
fn a_failing_observe_batch_stores_nothing_and_returns() {
    let mem = Memory::open_in_memory().expect("open");
    let mut items: Vec<(String, String, ObserveOptions)> = (0..400)
        .map(|i| {
            (
                format!("My name is Person{i} and I love kayaking on lake {i}"),
                "Great to hear!".to_owned(),
                ObserveOptions::default(),
            )
        })
        .collect();
    items[40].2.domain = "not a valid name!".into();
    let err = mem.observe_batch(&items).expect_err("bad domain");
    assert!(err.to_string().contains("not a valid name!"), "{err}");
    assert_eq!(mem.count().expect("count"), 0);
    // The store still takes a good batch afterwards.
    items[40].2.domain = "default".into();
    let reports = mem.observe_batch(&items[..50]).expect("batch");
    assert_eq!(reports.len(), 50);
    assert!(mem.count().expect("count") > 0);
}

/// soul-protocol reads an episodic `remember` back through its store's `get` (to
/// set the domain), and that read is an access: the stored memory starts with two
/// access timestamps and an access count of 1, which its later activation ranks by.
/// The reference profile reproduces it; the default profile records the write alone.
#[test]
fn an_episodic_remember_starts_with_the_reference_s_extra_access() {
    let now = ts("2024-04-02T05:16:00");
    for profile in [Profile::Reference, Profile::Default] {
        let mem = open(profile, Arc::new(FixedClock::new(now)));
        let mut r = Remember::new("episodic", "Met Dmitri for coffee in Porto");
        r.user_id = Some("mia".into());
        r.domain = "home".into();
        let id = mem.remember(&r).expect("remember");
        let e = mem.get(&id).expect("get").expect("stored");
        assert_eq!(e.domain, "home");
        if profile == Profile::Reference {
            assert_eq!(e.content, "User: Met Dmitri for coffee in Porto\nAgent: ");
            assert_eq!(e.user_id, None);
            assert_eq!(e.access_timestamps, vec![now, now]);
            assert_eq!(e.access_count, 1);
            assert_eq!(e.last_accessed, Some(now));
        } else {
            assert_eq!(e.content, "Met Dmitri for coffee in Porto");
            assert_eq!(e.user_id.as_deref(), Some("mia"));
            assert_eq!(e.access_timestamps, vec![now]);
            assert_eq!(e.access_count, 0);
            assert_eq!(e.last_accessed, None);
        }
    }
}
