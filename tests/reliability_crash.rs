//! Crash safety: a writer process is killed with SIGKILL at random moments while it
//! commits numbered batches; after each kill the store must reopen with every
//! acknowledged batch, no partial batch, and every index consistent.
//!
//! The writer is this test binary re-executed with `SOULMEM_CRASH_CHILD` set: the
//! `crash_writer_child` test does nothing in a normal run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use soulmem::storage::faulty::Rng;
use soulmem::write::observe::ObserveOptions;
use soulmem::{Memory, MemoryEntry, MemoryType, Profile, Settings, Visibility};

const CHILD_ENV: &str = "SOULMEM_CRASH_CHILD";
/// Memories per batch.
const K: u64 = 5;
const DOMAIN: &str = "crash";

fn batch_entry(b: u64, i: u64) -> MemoryEntry {
    let mut e = MemoryEntry::new(
        MemoryType::Episodic,
        format!("crashbatch {b} item {i} alpha beta gamma{}", b % 13),
    );
    e.domain = DOMAIN.into();
    e.entities = vec![format!("entity{}", b % 7)];
    e.user_id = (i % 2 == 0).then(|| format!("u{}", b % 3));
    e.visibility = Visibility::Public;
    e
}

fn parse_batch(content: &str) -> Option<u64> {
    content.strip_prefix("crashbatch ")?.split(' ').next()?.parse().ok()
}

/// The writer: batches `start..` forever, one line per acknowledged commit.
#[test]
fn crash_writer_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let start: u64 =
        std::env::var("SOULMEM_CRASH_START").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let durable = std::env::var("SOULMEM_CRASH_DURABLE").as_deref() == Ok("1");
    let mut settings = Settings::for_profile(Profile::Default);
    settings.durable = durable;
    let mem = Memory::builder().settings(settings).open(&path).expect("child open");
    let opts = ObserveOptions { user_id: Some("u1".into()), domain: "default".into() };
    let mut out = std::io::stdout().lock();
    let mut last_ids: Vec<String> = Vec::new();
    for b in start.. {
        let ids = mem.add_batch((0..K).map(|i| batch_entry(b, i)).collect()).expect("batch");
        writeln!(out, "committed {b}").expect("stdout");
        out.flush().expect("flush");
        // Other write paths, so that every index sees crashes mid-update.
        mem.observe_pair(
            &format!("I live in Town{b} and I really love Rust and Python number {b}"),
            "Great, tell me more!",
            &opts,
        )
        .expect("observe");
        if let Some(id) = last_ids.first() {
            let mut e = mem.get(id).expect("get").expect("present");
            e.content = format!("{} updated delta", e.content);
            e.importance = u8::try_from(b % 10 + 1).expect("importance");
            mem.update(e).expect("update");
        }
        last_ids = ids;
    }
}

struct Trial {
    /// Batches the child acknowledged.
    acked: BTreeSet<u64>,
}

fn run_child(path: &std::path::Path, start: u64, durable: bool, rng: &mut Rng) -> Trial {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args(["crash_writer_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env("SOULMEM_CRASH_START", start.to_string())
        .env("SOULMEM_CRASH_DURABLE", if durable { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(b) = line.strip_prefix("committed ").and_then(|s| s.trim().parse().ok()) {
                if tx.send(b).is_err() {
                    break;
                }
            }
        }
    });
    // Kill after a random number of acknowledgements plus a random delay, so the
    // kill lands anywhere in a commit, an observe or an update.
    let wait_for = rng.below(6);
    let mut acked = BTreeSet::new();
    while (acked.len() as u64) < wait_for {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(b) => {
                acked.insert(b);
            }
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_micros(rng.below(25_000)));
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    reader.join().expect("reader");
    // Lines already in the pipe were printed after their commit returned.
    acked.extend(rx.try_iter());
    Trial { acked }
}

/// Reopens the store and checks it; returns the batches present.
fn verify(path: &std::path::Path, acked: &BTreeSet<u64>, trial: usize) -> BTreeSet<u64> {
    let mem = Memory::open(path).unwrap_or_else(|e| panic!("trial {trial}: reopen failed: {e}"));
    let mut per_batch: BTreeMap<u64, u64> = BTreeMap::new();
    for e in mem.layer("episodic").expect("layer").entries(Some(DOMAIN)).expect("entries") {
        let b = parse_batch(&e.content)
            .unwrap_or_else(|| panic!("trial {trial}: stray entry {:?}", e.content));
        *per_batch.entry(b).or_default() += 1;
    }
    for (b, n) in &per_batch {
        assert_eq!(*n, K, "trial {trial}: batch {b} is partial ({n} of {K})");
    }
    for b in acked {
        assert!(per_batch.contains_key(b), "trial {trial}: acknowledged batch {b} lost");
    }
    let present: BTreeSet<u64> = per_batch.keys().copied().collect();
    if let (Some(first), Some(last)) = (present.first(), present.last()) {
        assert_eq!(
            present.len() as u64,
            last - first + 1,
            "trial {trial}: batches are not a prefix: {present:?}"
        );
    }
    let report = mem.check(|_| {}).expect("check");
    assert!(report.is_ok(), "trial {trial}: indexes inconsistent: {:?}", report.problems);
    present
}

fn crash_trials(durable: bool, trials: usize, seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crash.redb");
    let mut rng = Rng::new(seed);
    let mut all_acked = BTreeSet::new();
    let mut next = 0;
    let mut lost = 0usize;
    let none = BTreeSet::new();
    for trial in 0..trials {
        let t = run_child(&path, next, durable, &mut rng);
        if durable {
            all_acked.extend(t.acked.iter().copied());
        }
        let present = verify(&path, if durable { &all_acked } else { &none }, trial);
        lost += t.acked.difference(&present).count();
        next = present.last().map_or(next, |b| b + 1).max(next);
    }
    eprintln!(
        "crash trials (durable={durable}, seed={seed}): {trials} kills, {} batches acknowledged, {lost} acknowledged batches lost",
        if durable { all_acked.len() } else { 0 }
    );
    if durable {
        assert_eq!(lost, 0);
    }
}

fn seed() -> u64 {
    std::env::var("SOULMEM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    })
}

#[test]
fn sigkill_durable_writer_loses_nothing_acknowledged() {
    crash_trials(true, 16, seed());
}

#[test]
fn sigkill_non_durable_writer_stays_consistent() {
    // Non-durable commits may be lost on a crash, but never partially, and the
    // store must reopen consistent.
    crash_trials(false, 6, seed() ^ 0x5eed);
}

#[test]
fn non_durable_commits_survive_a_clean_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nd.redb");
    let mut settings = Settings::for_profile(Profile::Default);
    settings.durable = false;
    {
        let mem = Memory::builder().settings(settings).open(&path).expect("open");
        for b in 0..3 {
            mem.add_batch((0..K).map(|i| batch_entry(b, i)).collect()).expect("batch");
        }
    }
    let mem = Memory::open(&path).expect("reopen");
    assert_eq!(mem.count().expect("count"), 3 * K, "non-durable commits lost on a clean close");
}

/// A kill while the store file is being created leaves no file or a complete one,
/// never one that fails to open.
#[test]
fn sigkill_during_creation_leaves_an_openable_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("current exe");
    for trial in 0..12u64 {
        let path = dir.path().join(format!("new-{trial}.redb"));
        let mut child = Command::new(&exe)
            .args(["crash_writer_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .env("SOULMEM_CRASH_START", "0")
            .env("SOULMEM_CRASH_DURABLE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writer");
        // Spread the kills over the child's start-up and first open.
        std::thread::sleep(Duration::from_micros(trial * 1_500));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        if path.exists() {
            let mem = Memory::open(&path)
                .unwrap_or_else(|e| panic!("trial {trial}: a half-created store: {e}"));
            assert!(mem.check(|_| {}).expect("check").is_ok(), "trial {trial}");
        }
    }
    // Leftover temporary files of killed creations do not stop a later one.
    let path = dir.path().join("after.redb");
    let mem = Memory::open(&path).expect("create after kills");
    assert!(mem.check(|_| {}).expect("check").is_ok());
}
