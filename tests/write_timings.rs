//! `Memory::write_timings`: where the committed write transactions spent their
//! time, one transaction per write call, failed ones left out.

use std::time::Duration;

use soulmem::write::observe::ObserveOptions;
use soulmem::{Error, Memory, MemoryEntry, MemoryType};

#[test]
fn committed_transactions_are_timed_and_failed_ones_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mem = Memory::open(dir.path().join("timed.redb")).expect("open");
    let start = mem.write_timings();

    let mut e = MemoryEntry::new(MemoryType::Semantic, "User likes green tea");
    e.id = "0123456789ab".into();
    mem.add(e.clone()).expect("add");
    let one = mem.write_timings().since(&start);
    assert_eq!(one.transactions, 1);
    assert!(one.work > Duration::ZERO && one.commit > Duration::ZERO, "{one:?}");

    // Rolled back: not counted, and nothing it spent is added.
    assert!(matches!(mem.add(e), Err(Error::DuplicateId(_))));
    assert_eq!(mem.write_timings().since(&start), one);

    // A batch is one transaction, whatever its size.
    let items: Vec<(String, String, ObserveOptions)> = (0..5)
        .map(|i| {
            (
                format!("I moved to city number {i} last week"),
                "Nice!".into(),
                ObserveOptions::default(),
            )
        })
        .collect();
    mem.observe_batch(&items).expect("batch");
    let two = mem.write_timings().since(&start);
    assert_eq!(two.transactions, 2);
    assert!(two.work > one.work && two.commit > one.commit, "{two:?}");
    assert_eq!(two.since(&two), soulmem::WriteTimings::default());
}
