//! Criterion benches at several store sizes (10k and 100k memories; 1M with
//! `SOULMEM_BENCH_1M=1`; any list with `SOULMEM_BENCH_SIZES=10000,50000`).
//!
//! Stores are built once per size from the synthetic corpus ([`soulmem::synth`])
//! and cached under `<target>/soulmem-bench/`; each bench group works on a fresh
//! copy. Every timed iteration checks its result, so a broken path cannot look fast.
//!
//! - `observe/single_durable`: one `observe_pair` of a new exchange, fsync'd;
//! - `observe/batch_100`: `observe_batch` of 100 new exchanges in one durable commit;
//! - `observe/batch_100_deferred`: the same committed without a sync
//!   (`Durability::Deferred`), with a `Memory::sync` after every 10th batch, as a
//!   bulk load syncing every 1,000 exchanges would;
//! - `recall/top10`, `recall/top10_user`, `recall/top10_domain`: top-10 recall,
//!   unfiltered and filtered (recall records its accesses in memory; a background
//!   thread writes them, unsynced here since the store is opened non-durable);
//! - `dedup/fact_observe`: a fact-bearing exchange for a user who already has many
//!   facts (dedup, slot conflicts and contradiction lookups), non-durable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use soulmem::synth::{Corpus, SynthQuery};
use soulmem::write::observe::ObserveOptions;
use soulmem::{Durability, Memory, RecallQuery, Settings};

/// Bump when the corpus generator changes, so cached stores are rebuilt.
const CORPUS_VERSION: u32 = 1;
const SEED: u64 = 42;

fn sizes() -> Vec<u64> {
    if let Ok(s) = std::env::var("SOULMEM_BENCH_SIZES") {
        return s.split(',').filter_map(|x| x.trim().parse().ok()).collect();
    }
    let mut v = vec![10_000, 100_000];
    if std::env::var("SOULMEM_BENCH_1M").is_ok_and(|v| v == "1") {
        v.push(1_000_000);
    }
    v
}

fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"), PathBuf::from);
    target.join("soulmem-bench")
}

/// The cached pristine store of `n` memories and the number of exchanges it used.
fn pristine(n: u64) -> (PathBuf, u64) {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).expect("cache dir");
    let schema = soulmem::storage::schema::SCHEMA_VERSION;
    let path = dir.join(format!("store-{n}-s{SEED}-c{CORPUS_VERSION}-v{schema}.redb"));
    let done = path.with_extension("done");
    if let Ok(s) = std::fs::read_to_string(&done)
        && let Ok(used) = s.trim().parse()
        && path.exists()
    {
        return (path, used);
    }
    let _ = soulmem::storage::remove_store(&path);
    eprintln!("building a store of {n} memories in {}", path.display());
    // Durable commits: redb reuses freed pages only after one.
    let mem = Memory::builder().prewarm(false).open(&path).expect("open");
    let used = Corpus::new(SEED).fill(&mem, n, 10_000, |_| {}).expect("fill");
    drop(mem);
    std::fs::write(&done, used.to_string()).expect("marker");
    (path, used)
}

/// A fresh copy of the store of `n` memories, opened with `durable`.
fn fresh(n: u64, durable: bool, tmp: &Path) -> (Memory, u64) {
    let (src, used) = pristine(n);
    let dst = tmp.join(format!("copy-{n}.redb"));
    // With its logs: a log left by a killed run must not be replayed over the copy.
    let _ = soulmem::storage::remove_store(&dst);
    std::fs::copy(&src, &dst).expect("copy store");
    let mut settings = Settings::for_profile(soulmem::Profile::Default);
    settings.durable = durable;
    let mem = Memory::builder().settings(settings).open(&dst).expect("open copy");
    // Timed in its steady state, as `soulctl bench` is: the ranking records read
    // into the page cache, and no prewarm competing with the first iterations.
    mem.wait_for_prewarm().expect("prewarm");
    (mem, used)
}

/// The corpus's next `n` exchanges from `*next` on, as `observe_batch` takes them.
fn exchanges(corpus: &Corpus, next: &mut u64, n: u64) -> Vec<(String, String, ObserveOptions)> {
    (0..n)
        .map(|_| {
            let ex = corpus.exchange(*next);
            *next += 1;
            let o = opts(&ex.user_id, &ex.domain);
            (ex.user, ex.agent, o)
        })
        .collect()
}

fn opts(user_id: &str, domain: &str) -> ObserveOptions {
    ObserveOptions { user_id: Some(user_id.to_owned()), domain: domain.to_owned() }
}

fn observe(c: &mut Criterion) {
    let corpus = Corpus::new(SEED);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("observe");
    g.sample_size(30).measurement_time(Duration::from_secs(8));
    for n in sizes() {
        let (mem, used) = fresh(n, true, tmp.path());
        let mut next = used;
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("single_durable", n), |b| {
            b.iter(|| {
                let ex = corpus.exchange(next);
                next += 1;
                let r = mem
                    .observe_pair(&ex.user, &ex.agent, &opts(&ex.user_id, &ex.domain))
                    .expect("observe");
                assert!(r.significance > 0.0, "observe computed nothing");
                r
            });
        });
        g.throughput(Throughput::Elements(100));
        g.bench_function(BenchmarkId::new("batch_100", n), |b| {
            b.iter_batched(
                || exchanges(&corpus, &mut next, 100),
                |items| {
                    let r = mem.observe_batch(&items).expect("observe_batch");
                    assert_eq!(r.len(), 100);
                    r
                },
                criterion::BatchSize::PerIteration,
            );
        });
        let mut deferred = 0u64;
        g.bench_function(BenchmarkId::new("batch_100_deferred", n), |b| {
            b.iter_batched(
                || exchanges(&corpus, &mut next, 100),
                |items| {
                    let r = mem
                        .observe_batch_with(&items, Durability::Deferred)
                        .expect("observe_batch_with");
                    assert_eq!(r.len(), 100);
                    deferred += 1;
                    if deferred % 10 == 0 {
                        mem.sync().expect("sync");
                    }
                    r
                },
                criterion::BatchSize::PerIteration,
            );
        });
    }
    g.finish();
}

/// Queries whose recall (with the filter `f` applies) returns something.
fn live_queries(
    mem: &Memory,
    qs: &[SynthQuery],
    f: impl Fn(&SynthQuery) -> RecallQuery,
) -> Vec<RecallQuery> {
    let out: Vec<RecallQuery> =
        qs.iter().map(f).filter(|q| !mem.recall(q).expect("recall").memories.is_empty()).collect();
    assert!(out.len() >= qs.len() / 4, "too few queries find anything ({})", out.len());
    out
}

/// Turns a synthetic query into a recall request (one filter variant).
type MakeQuery = Box<dyn Fn(&SynthQuery) -> RecallQuery>;

fn recall(c: &mut Criterion) {
    let corpus = Corpus::new(SEED);
    let queries = corpus.queries(200);
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("recall");
    g.sample_size(50).measurement_time(Duration::from_secs(6));
    for n in sizes() {
        let (mem, _) = fresh(n, false, tmp.path());
        let variants: [(&str, MakeQuery); 3] = [
            ("top10", Box::new(|q| RecallQuery::new(&q.text))),
            (
                "top10_user",
                Box::new(|q| {
                    let mut r = RecallQuery::new(&q.text);
                    r.user_id = Some(q.user_id.clone());
                    r
                }),
            ),
            (
                "top10_domain",
                Box::new(|q| {
                    let mut r = RecallQuery::new(&q.text);
                    r.domain = Some(q.domain.clone());
                    r
                }),
            ),
        ];
        for (name, f) in variants {
            let qs = live_queries(&mem, &queries, f);
            let mut i = 0usize;
            g.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    let q = &qs[i % qs.len()];
                    i += 1;
                    let r = mem.recall(q).expect("recall");
                    assert!(!r.memories.is_empty());
                    r
                });
            });
        }
    }
    g.finish();
}

fn dedup(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("dedup");
    g.sample_size(30).measurement_time(Duration::from_secs(6));
    const TECH: &[&str] = &["Rust", "Python", "Go", "Kotlin", "Postgres", "Kafka", "Svelte"];
    for n in sizes() {
        let (mem, _) = fresh(n, false, tmp.path());
        let mut i = 0usize;
        g.bench_function(BenchmarkId::new("fact_observe", n), |b| {
            b.iter(|| {
                // User u0007 has ~n/1500 facts in each domain. Each message states a
                // fact sharing most words with earlier ones (two fresh tag words), so
                // dedup reads many similar facts but stores it (MERGE or CREATE).
                let word = |salt: usize| -> String {
                    (0..4u32)
                        .map(|j| char::from(b'a' + (((i + salt) / 26usize.pow(j)) % 26) as u8))
                        .collect()
                };
                let (tag, tag2) = (word(0), word(7919).chars().rev().collect::<String>());
                let user = format!(
                    "I prefer {} for {tag} {tag2} jobs. I live in Lisbon now.",
                    TECH[i % TECH.len()]
                );
                i += 1;
                let r =
                    mem.observe_pair(&user, "Noted.", &opts("u0007", "default")).expect("observe");
                assert!(!r.facts.is_empty(), "no fact stored for {user:?}");
                r
            });
        });
    }
    g.finish();
}

criterion_group!(benches, observe, recall, dedup);
criterion_main!(benches);
