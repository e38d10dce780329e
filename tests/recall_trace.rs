//! The recall trace says where a text match came from: the memory's own content or
//! the conversation context it was indexed with.

use std::sync::Arc;

use soulmem::model::time::parse_timestamp;
use soulmem::write::observe::ObserveOptions;
use soulmem::{FixedClock, Memory, RecallQuery};

#[test]
fn trace_separates_content_matches_from_context_matches() {
    let clock = Arc::new(FixedClock::new(parse_timestamp("2024-03-01T10:00:00").expect("ts")));
    let mem = Memory::builder().clock(clock.clone()).open_in_memory().expect("open");
    let opts = ObserveOptions::default();
    mem.observe_pair(
        "I'm so frustrated, our Postgres database keeps throwing connection errors every night!",
        "That sounds exhausting. Let's look at the connection pool settings together.",
        &opts,
    )
    .expect("observe");
    clock.set(parse_timestamp("2024-03-01T10:02:00").expect("ts"));
    mem.observe_pair(
        "Honestly I'm worried the whole team will burn out before the launch next Friday.",
        "That worry makes sense. What would help the team most this week?",
        &opts,
    )
    .expect("observe");

    let mut q = RecallQuery::new("postgres connection errors");
    q.explain = true;
    let res = mem.recall(&q).expect("recall");
    let by_content = res
        .trace
        .candidates
        .iter()
        .find(|c| c.content_terms.iter().any(|t| t == "postgr"))
        .expect("the first turn matches in its content");
    assert!(by_content.context_terms.is_empty(), "{by_content:?}");
    let by_context = res
        .trace
        .candidates
        .iter()
        .find(|c| c.content_terms.is_empty() && !c.context_terms.is_empty())
        .expect("the second turn matches only through its context");
    assert!(by_context.context_terms.iter().any(|t| t == "postgr"), "{by_context:?}");
    let second = mem.get(&by_context.id).expect("get").expect("stored");
    assert!(second.content.contains("burn out"), "{}", second.content);

    // Without explain the trace carries no term lists.
    let plain = mem.recall(&RecallQuery::new("postgres connection errors")).expect("recall");
    assert!(plain.trace.candidates.iter().all(|c| c.content_terms.is_empty()));
}

/// Memories that rank exactly alike come back oldest first, whatever their ids: the
/// same history ranks the same way in every store and replay (ids are random).
#[test]
fn exact_ties_go_to_the_older_memory() {
    let mem = soulmem::Memory::open_in_memory().expect("open");
    let base = soulmem::MemoryEntry::new(soulmem::MemoryType::Semantic, "User drinks green tea");
    let ids = ["zzzzzzzzzzzz", "aaaaaaaaaaaa", "mmmmmmmmmmmm"];
    for id in ids {
        let mut e = base.clone();
        e.id = id.into();
        mem.add(e).expect("add");
    }
    for _ in 0..2 {
        let got = mem.recall(&soulmem::RecallQuery::new("green tea")).expect("recall");
        let got: Vec<&str> = got.memories.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(got, ids);
    }
}

/// Recall skips superseded memories on their bit in the superseded bitmap; an
/// explained recall reads each one's record instead, to say why it was dropped.
/// Both find the same memories: every live match (however many superseded copies
/// outscore them), no superseded one, and the dropped ones are in the trace.
#[test]
fn skipped_superseded_memories_change_nothing_but_the_work() {
    use soulmem::{MemoryEntry, MemoryType};
    let clock = Arc::new(FixedClock::new(parse_timestamp("2024-03-01T10:00:00").expect("ts")));
    let mem = Memory::builder().clock(clock).open_in_memory().expect("open");
    let mut entries = Vec::new();
    // Short superseded facts, which outscore every live memory on the query.
    for i in 0..300 {
        let mut e = MemoryEntry::new(MemoryType::Semantic, format!("Favorite book: Dune {i}"));
        e.superseded_by = Some("newer".into());
        entries.push(e);
    }
    entries.push(MemoryEntry::new(MemoryType::Semantic, "User's favorite book is Solaris"));
    for i in 0..12 {
        entries.push(MemoryEntry::new(
            MemoryType::Episodic,
            format!("We talked for a while about which book is the favorite one, chat {i}"),
        ));
    }
    mem.add_batch(entries).expect("add");
    let contents = |q: &RecallQuery| -> (Vec<String>, usize) {
        let r = mem.recall(q).expect("recall");
        let mut c: Vec<String> = r.memories.iter().map(|m| m.content.clone()).collect();
        c.sort();
        let dropped = r
            .trace
            .candidates
            .iter()
            .filter(|t| t.dropped_by.as_deref() == Some("superseded"))
            .count();
        (c, dropped)
    };
    let mut q = RecallQuery::new("favorite book");
    q.limit = 20;
    let (plain, _) = contents(&q);
    assert_eq!(plain.len(), 13, "{plain:?}");
    assert!(plain.iter().any(|c| c.contains("Solaris")));
    assert!(!plain.iter().any(|c| c.contains("Dune")), "{plain:?}");
    q.explain = true;
    let (explained, dropped) = contents(&q);
    assert_eq!(explained, plain);
    assert!(dropped >= 20, "the trace lists the superseded memories dropped: {dropped}");
    q.explain = false;
    q.include_superseded = true;
    let (all, _) = contents(&q);
    assert!(all.iter().filter(|c| c.contains("Dune")).count() >= 10, "{all:?}");
}

/// A `domain`-filtered recall leaves the other domains' memories out on the
/// domain's member set, before reading their records; an explained recall
/// reads them instead. Both find the same memories: every match of the domain,
/// whether its postings are in the blocks or in the tail, and no other.
#[test]
fn skipped_other_domains_change_nothing_but_the_work() {
    use soulmem::{MemoryEntry, MemoryType};
    let clock = Arc::new(FixedClock::new(parse_timestamp("2024-03-01T10:00:00").expect("ts")));
    let mem = Memory::builder().clock(clock).open_in_memory().expect("open");
    let entry = |text: String, domain: &str| {
        let mut e = MemoryEntry::new(MemoryType::Episodic, text);
        e.domain = domain.to_owned();
        e
    };
    // Short memories of other domains, which outscore the domain's own.
    let mut entries: Vec<MemoryEntry> =
        (0..300).map(|i| entry(format!("garden roses {i}"), "home")).collect();
    entries.extend((0..9).map(|i| {
        entry(format!("we planted roses in the office garden by the window, day {i}"), "work")
    }));
    mem.add_batch(entries).expect("add");
    // Three more of the domain, one at a time: their postings stay in the tail.
    for i in 0..3 {
        mem.add(entry(format!("the office garden roses need water, note {i}"), "work"))
            .expect("add");
    }
    let contents = |q: &RecallQuery| -> Vec<String> {
        let r = mem.recall(q).expect("recall");
        let mut c: Vec<String> = r.memories.iter().map(|m| m.content.clone()).collect();
        c.sort();
        c
    };
    let mut q = RecallQuery::new("garden roses");
    q.limit = 20;
    q.domain = Some("work".into());
    let plain = contents(&q);
    assert_eq!(plain.len(), 12, "{plain:?}");
    assert_eq!(plain.iter().filter(|c| c.contains("note")).count(), 3, "{plain:?}");
    q.explain = true;
    assert_eq!(contents(&q), plain);
}
