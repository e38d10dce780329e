//! Concurrency: readers recall and take snapshots while a writer observes; a second
//! open of the same file is refused with a clear error, in this process and in
//! another one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use soulmem::write::observe::ObserveOptions;
use soulmem::{Error, Memory, MemoryEntry, MemoryType, Profile, RecallQuery, Settings, Visibility};

const K: u64 = 7;
const RUN: Duration = Duration::from_millis(2_500);
const MIN_ROUNDS: u64 = 5;
const HARD_STOP: Duration = Duration::from_secs(20);

fn run(profile: Profile) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = Settings::for_profile(profile);
    settings.durable = false;
    let mem = Arc::new(
        Memory::builder()
            .profile(profile)
            .settings(settings)
            .open(dir.path().join("conc.redb"))
            .expect("open"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Ids the writer has acknowledged, in commit order.
    let acked: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let batches = Arc::new(AtomicU64::new(0));

    let writer = {
        let (mem, stop, acked, batches) =
            (mem.clone(), stop.clone(), acked.clone(), batches.clone());
        std::thread::spawn(move || {
            // At least MIN_ROUNDS writes even when readers crowd the write lock (the
            // reference profile's recall is itself a write), within a hard bound.
            let start = Instant::now();
            let mut n = 0u64;
            while (start.elapsed() < RUN || n < MIN_ROUNDS) && start.elapsed() < HARD_STOP {
                let opts = ObserveOptions {
                    user_id: Some(format!("u{}", n % 3)),
                    domain: if n % 2 == 0 { "default".into() } else { "work".into() },
                };
                let r = mem
                    .observe_pair(
                        &format!("I live in Town{n} and I work at Company{} with Rust", n % 9),
                        "Nice!",
                        &opts,
                    )
                    .expect("observe");
                let mut ids: Vec<String> = r.facts.iter().map(|f| f.id.clone()).collect();
                ids.extend(r.episodic_id);
                let entries = (0..K)
                    .map(|i| {
                        let mut e = MemoryEntry::new(
                            MemoryType::Episodic,
                            format!("batch {n} item {i} Rust"),
                        );
                        e.domain = "batches".into();
                        e.visibility = Visibility::Public;
                        e
                    })
                    .collect();
                ids.extend(mem.add_batch(entries).expect("add_batch"));
                acked.lock().extend(ids);
                batches.fetch_add(1, Ordering::SeqCst);
                n += 1;
            }
            stop.store(true, Ordering::SeqCst);
            n
        })
    };

    let nreaders: usize =
        std::env::var("SOULMEM_READERS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let readers: Vec<_> = (0..nreaders)
        .map(|r| {
            let (mem, stop, acked) = (mem.clone(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut last_count = 0u64;
                let mut rounds = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    // Everything acknowledged before the snapshot is in it.
                    let known: Vec<String> = acked.lock().clone();
                    let snap = mem.snapshot().expect("snapshot");
                    let c1 = snap.count().expect("count");
                    assert!(
                        c1 >= last_count,
                        "reader {r}: count went back from {last_count} to {c1}"
                    );
                    assert!(c1 >= known.len() as u64, "reader {r}: snapshot misses acked memories");
                    for id in known.iter().rev().take(5) {
                        assert!(
                            snap.get(id).expect("get").is_some(),
                            "reader {r}: acked {id} missing"
                        );
                    }
                    // A recall's results exist; their layer/domain pass its filters.
                    let mut q = RecallQuery::new("Rust Town company");
                    if rounds % 2 == 0 {
                        q.domain = Some("batches".into());
                    }
                    q.user_id = Some(format!("u{}", rounds % 3));
                    let res = mem.recall(&q).expect("recall");
                    for m in &res.memories {
                        assert!(
                            mem.get(&m.id).expect("get").is_some(),
                            "reader {r}: recalled a ghost"
                        );
                        if let Some(d) = &q.domain {
                            assert_eq!(&m.domain, d);
                        }
                    }
                    // Batches are all or nothing, in one read.
                    let in_batches = mem
                        .layer("episodic")
                        .expect("layer")
                        .count(Some("batches"))
                        .expect("count");
                    assert_eq!(in_batches % K, 0, "reader {r}: a partial batch is visible");
                    // The snapshot does not move.
                    assert_eq!(snap.count().expect("count"), c1, "reader {r}: snapshot moved");
                    last_count = c1;
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();

    let written = writer.join().expect("writer panicked");
    let rounds: Vec<u64> =
        readers.into_iter().map(|h| h.join().expect("reader panicked")).collect();
    assert!(written > 0, "the writer made no progress");
    assert!(rounds.iter().all(|r| *r > 0), "a reader made no progress: {rounds:?}");
    let _ = &rounds;
    assert_eq!(batches.load(Ordering::SeqCst), written);
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    eprintln!("{profile:?}: {written} writer rounds, reader rounds {rounds:?}");
}

#[test]
fn readers_and_a_writer_default_profile() {
    run(Profile::Default);
}

#[test]
fn readers_and_a_writer_reference_profile() {
    run(Profile::Reference);
}

const OPEN_CHILD_ENV: &str = "SOULMEM_OPEN_CHILD";

/// Child half of `second_open_in_another_process_is_refused`.
#[test]
fn open_child() {
    let Ok(path) = std::env::var(OPEN_CHILD_ENV) else { return };
    match Memory::open(&path) {
        Ok(_) => println!("OPEN_OK"),
        Err(e) => println!("OPEN_ERR {e}"),
    }
}

fn assert_already_open(e: &Error) {
    assert!(matches!(e, Error::Open { .. }), "expected Error::Open, got {e:?}");
    assert!(e.to_string().contains("already open"), "{e}");
}

#[test]
fn second_open_in_this_process_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("twice.redb");
    let first = Memory::open(&path).expect("first open");
    let e = Memory::open(&path).expect_err("second open");
    assert_already_open(&e);
    drop(first);
    Memory::open(&path).expect("opens again once closed");
}

#[test]
fn second_open_in_another_process_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shared.redb");
    let first = Memory::open(&path).expect("first open");
    let child = |path: &std::path::Path| {
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args(["open_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(OPEN_CHILD_ENV, path)
            .output()
            .expect("run child");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = child(&path);
    assert!(out.contains("OPEN_ERR") && out.contains("already open"), "child said: {out}");
    drop(first);
    let out = child(&path);
    assert!(out.contains("OPEN_OK"), "child said: {out}");
}
