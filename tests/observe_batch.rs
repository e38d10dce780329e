//! A batch of observes decides as the same exchanges observed one at a time: which
//! exchanges become episodes (significance, whose novelty compares each exchange
//! with the newest episodes, those of the same batch included), and their facts;
//! and it indexes them the same way.

use std::sync::Arc;

use soulmem::model::time::parse_timestamp;
use soulmem::write::observe::ObserveOptions;
use soulmem::{FixedClock, Memory, Profile};

const LINES: [&str; 8] = [
    "We hiked up to the glacier lake with the dog this morning and the view was unreal",
    "We hiked up to the glacier lake with the dog this morning and the view was stunning",
    "I finally fixed the flaky deploy, a race condition in the Elixir worker was the cause",
    "ok",
    "I am learning Rust in the evenings and it is hard but rewarding",
    "I am learning Rust in the evenings and it is tough but rewarding",
    "My sister Alice moved to Lisbon last spring and loves the tiled streets",
    "thanks, that helps a lot",
];

fn exchanges() -> Vec<(String, String, ObserveOptions)> {
    // A fixed walk over the lines with repeats, so some exchanges repeat a recent
    // episode (not novel) and others do not.
    let order = [0, 1, 2, 3, 1, 0, 4, 5, 4, 6, 7, 6, 2, 2, 5, 3, 0, 7, 4, 6, 1, 5, 2, 0];
    order
        .iter()
        .map(|&i| {
            let user_id = if i % 2 == 0 { Some("ana".to_owned()) } else { None };
            let opts = ObserveOptions { user_id, ..ObserveOptions::default() };
            (LINES[i].to_owned(), "Got it.".to_owned(), opts)
        })
        .collect()
}

fn store(profile: Profile) -> Memory {
    let at = parse_timestamp("2026-03-01T09:00:00Z").expect("time");
    Memory::builder()
        .profile(profile)
        .clock(Arc::new(FixedClock::new(at)))
        .open_in_memory()
        .expect("store")
}

#[test]
fn a_batch_stores_the_episodes_and_facts_single_observes_do() {
    for profile in [Profile::Default, Profile::Reference] {
        let items = exchanges();
        let one = store(profile);
        let single: Vec<(bool, Vec<String>)> = items
            .iter()
            .map(|(u, a, o)| {
                let r = one.observe_pair(u, a, o).expect("observe");
                (r.episodic_id.is_some(), r.facts.iter().map(|f| f.content.clone()).collect())
            })
            .collect();
        let many = store(profile);
        let batched: Vec<(bool, Vec<String>)> = many
            .observe_batch(&items)
            .expect("batch")
            .into_iter()
            .map(|r| (r.episodic_id.is_some(), r.facts.into_iter().map(|f| f.content).collect()))
            .collect();
        assert_eq!(batched, single, "{profile:?}");
        // The episodes are indexed with their conversation context (the exchanges
        // before them, all within the hour here) as the single observes index
        // them, and as `check` derives from the stored contexts.
        assert_eq!(many.stats().expect("stats"), one.stats().expect("stats"), "{profile:?}");
        let report = many.check(|_| {}).expect("check");
        assert!(report.is_ok(), "{profile:?}: {:?}", report.problems);
        let episodes = single.iter().filter(|(e, _)| *e).count();
        assert!(
            episodes > 0 && episodes < single.len(),
            "{profile:?}: novelty decides nothing here"
        );
    }
}
