//! `soulctl bench scale`: build stores of several sizes from the synthetic corpus
//! and measure ingest, observe, recall and file size on each, optionally side by
//! side with tantivy and SQLite FTS5 (`--compare`, from the `soulmem-compare`
//! crate's `soulmem-bench` binary, which compiles this same module).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Map, Value, json};
use soulmem::synth::{Corpus, SynthQuery};
use soulmem::write::observe::ObserveOptions;
use soulmem::{Durability, Memory, RecallQuery, WriteTimings};

/// `bench` arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Build a store per size and measure it (see the README's performance table).
    Scale(ScaleArgs),
    /// Time recall on an existing store (one built by `bench scale --keep`), per
    /// query kind, after as many other queries untimed (as `bench scale` does): for
    /// profiling and for checking one change quickly.
    Recall(RecallArgs),
    /// Time batched observes into a copy of an existing store (one built by
    /// `bench scale --keep`): for profiling the write path.
    Ingest(IngestArgs),
    /// Time a scenario's ops one by one, per op kind (the same files replayed by
    /// soul-protocol itself: `scripts/bench_reference.py`).
    Replay(replay::ReplayArgs),
    /// Write the synthetic corpus as a replay scenario (observes, then recalls),
    /// for `bench replay` and for soul-protocol (`scripts/bench_reference.py`).
    Scenario(replay::ScenarioArgs),
}

// A path relative to this file, so the compare crate, which compiles this module
// by its path, finds it too.
#[path = "bench_replay.rs"]
mod replay;

/// `bench ingest` arguments.
#[derive(ClapArgs, Debug)]
pub struct IngestArgs {
    /// The store (built from the synthetic corpus with the same seed); it is copied
    /// and the copy written.
    #[arg(long)]
    store: PathBuf,
    /// Exchanges per observe_batch transaction.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// observe_batch transactions (by default as many as `bench scale` times,
    /// so that at 1M the run holds two merges of the postings tail, as a long
    /// ingest would).
    #[arg(long, default_value_t = 24)]
    batches: usize,
    /// Sync every N batches (and the last); the batches between are committed
    /// without a sync (`Durability::Deferred`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    sync_every: u64,
    /// Single durable observes timed after the batches (then as many observe +
    /// recall rounds, unless --no-rounds).
    #[arg(long, default_value_t = 0)]
    single: usize,
    /// Skip the observe + recall rounds after the single observes.
    #[arg(long)]
    no_rounds: bool,
    /// Between the single observes, untimed (an agent's idle time), merge the
    /// postings tail once it is this percent full (`Memory::merge_postings_tail`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
    merge_tail_at: Option<u64>,
    /// Corpus seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Users in the corpus (as many as the store was built with).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    users: u64,
}

/// `bench recall` arguments.
#[derive(ClapArgs, Debug)]
pub struct RecallArgs {
    /// The store (built from the synthetic corpus with the same seed); it is copied
    /// and the copy used.
    #[arg(long)]
    store: PathBuf,
    /// Queries timed.
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Passes over the queries.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Filter each query by its user.
    #[arg(long)]
    user: bool,
    /// Keep only memories of these layers (comma-separated: the `types` filter),
    /// in every query.
    #[arg(long, value_delimiter = ',')]
    types: Option<Vec<String>>,
    /// Keep only memories of at least this importance, in every query.
    #[arg(long, default_value_t = 0)]
    min_importance: i32,
    /// The store's memories are scoped to one of this many projects (built with
    /// `bench scale --projects`): each query keeps only its user's project's
    /// memories (a `scopes` filter).
    #[arg(long, default_value_t = 0)]
    projects: usize,
    /// Run durable observes in a second thread meanwhile (an agent serving several
    /// conversations).
    #[arg(long)]
    concurrent: bool,
    /// With --concurrent: milliseconds the observe thread waits after each observe.
    #[arg(long, default_value_t = 5)]
    pace_ms: u64,
    /// Only queries of this kind (`fact`, `entity`, `question`, `multi`).
    #[arg(long)]
    kind: Option<String>,
    /// Corpus seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Users in the corpus (as many as the store was built with).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    users: u64,
    /// redb cache size in MiB (default: redb's default).
    #[arg(long)]
    cache_mb: Option<usize>,
    /// Also write every timed recall to this file, one JSON object per line:
    /// `pass`, `kind`, `query`, `user_id`, `ms`, `postings` (to see which queries make a
    /// percentile).
    #[arg(long)]
    per_query: Option<PathBuf>,
    /// After every Nth timed recall, remove its first result from the store,
    /// untimed (an agent forgetting what it was shown: the removed memory was a
    /// member of the query's filter).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    remove_every: Option<u64>,
}

/// `bench scale` arguments.
#[derive(ClapArgs, Debug)]
pub struct ScaleArgs {
    /// Store sizes in memories, comma-separated. With more than one, once every
    /// size is measured, recall and observe are timed again on all of them side by
    /// side (`interleaved_*` figures, with ratios to the smallest size).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    sizes: Vec<u64>,
    /// Also measure tantivy and SQLite FTS5 on the same documents and terms, and
    /// time soulmem and tantivy once more query by query (`paired_*` figures).
    #[arg(long)]
    compare: bool,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Where to build the stores (default: a new folder in the temp dir, removed
    /// afterwards unless --keep).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the stores, as built (the measurements run on a copy).
    #[arg(long)]
    keep: bool,
    /// Recall queries timed per size.
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Single durable observes timed per size.
    #[arg(long, default_value_t = 200)]
    observes: usize,
    /// Exchanges per observe_batch transaction in the ingest measurement.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// observe_batch transactions in the ingest measurement: enough that the
    /// measurement holds about as many merges of the postings tail as a long
    /// ingest (at 1M, where a batch may leave 15,625 memories in the tail, one
    /// merge per ~11 batches of 1,000 observes, which store ~1,350 memories).
    #[arg(long, default_value_t = 24)]
    batches: usize,
    /// Corpus seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Users in the corpus: each exchange and query belongs to one of them
    /// (1 measures a single-user agent, whose `user_id` filter admits everything).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    users: u64,
    /// Build each store by observing the corpus's exchanges (`observe_batch`,
    /// 1,000 per transaction) instead of storing each exchange's memories as
    /// observe would with every exchange significant and no dedup (the
    /// default, ~8× faster). An observed store holds what an agent's would: far
    /// fewer facts (dedup and supersede), each exchange's context terms, the
    /// knowledge graph. Not with --compare.
    #[arg(long)]
    observe_build: bool,
    /// Scope every memory to its user's project, one of this many (`project:P`;
    /// 0: no scopes), for `bench recall --projects`.
    #[arg(long, default_value_t = 0)]
    projects: usize,
    /// redb cache size in MiB for the measured store (default: redb's default).
    #[arg(long)]
    cache_mb: Option<usize>,
    /// Measurement passes per size, each on a fresh copy of the store as built
    /// (with `--compare`, each pass times the baselines right after soulmem, then
    /// soulmem and tantivy query by query on another fresh copy). The
    /// row reports the median of each figure and the JSON keeps every pass under
    /// `each_run`: this VM's speed drifts by ±25% within minutes, so one pass can
    /// land either side of a target. The side-by-side timing of several sizes
    /// runs as many passes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=20))]
    runs: u64,
}

/// Runs `bench`.
pub fn run(_db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    run_with(args, None)
}

/// Runs `bench` with `baselines` for `--compare`.
///
/// # Errors
/// Storage, file and baseline errors.
pub fn run_with(args: Args, baselines: Option<&dyn Baselines>) -> anyhow::Result<ExitCode> {
    match args.what {
        What::Scale(a) => scale(a, baselines),
        What::Recall(a) => recall_only(&a),
        What::Ingest(a) => ingest_only(&a),
        What::Replay(a) => replay::run(&a),
        What::Scenario(a) => replay::scenario(&a),
    }
}

fn ingest_only(a: &IngestArgs) -> anyhow::Result<ExitCode> {
    let copy = working_copy(&a.store, "ingest.redb")?;
    let mem = Memory::open(&copy)?;
    // Its prewarm (and tail merge) would otherwise compete with the first timed
    // batches.
    settle_opened(&mem)?;
    let corpus = Corpus::with_users(a.seed, a.users as usize);
    // Exchanges past any the store was built from.
    let mut next = mem.count()?;
    let pb = bar((a.batch * a.batches) as u64, "ingest".into());
    let (done, spent, cpu, phases) =
        time_batches(&mem, &corpus, &mut next, (a.batch, a.batches, a.sync_every as usize), &pb)?;
    pb.finish_and_clear();
    let pb = bar(if a.no_rounds { 1 } else { 2 } * a.single as u64, "observe".into());
    let queries = if a.no_rounds { Vec::new() } else { corpus.queries(a.single.clamp(1, 300)) };
    let before = mem.write_timings();
    let mut single =
        time_observes(&mem, &corpus, &queries, (&mut next, a.single, a.merge_tail_at), &pb)?;
    let singles = mem.write_timings().since(&before);
    pb.finish_and_clear();
    drop(mem);
    let _ = soulmem::storage::remove_store(&copy);
    let observe_mean = single.each.iter().sum::<f64>() / single.each.len().max(1) as f64;
    let observe_max = single.each.iter().copied().fold(0.0, f64::max);
    // Before the quantiles sort them: each with its place in the run.
    let mut slowest: Vec<(usize, f64)> = single.each.iter().copied().enumerate().collect();
    slowest.sort_by(|x, y| y.1.total_cmp(&x.1));
    slowest.truncate(3);
    outln!(
        "ingest_per_s {:.0}  ingest_per_cpu_s {:.0}  observe_p50_ms {:.3}  observe_p99_ms {:.3}  observe_mean_ms {:.3}  observe_max_ms {:.3}  recall_after_observe_p50_ms {:.3}",
        done as f64 / spent.as_secs_f64().max(1e-9),
        done as f64 / cpu.as_secs_f64().max(1e-3),
        quantile(&mut single.each, 0.5),
        quantile(&mut single.each, 0.99),
        observe_mean,
        observe_max,
        quantile(&mut single.recalls, 0.5)
    );
    if !slowest.is_empty() {
        let list: Vec<String> = slowest.iter().map(|(i, t)| format!("#{i} {t:.1} ms")).collect();
        outln!("slowest single observes: {}", list.join(", "));
    }
    if a.merge_tail_at.is_some() {
        outln!(
            "idle_tail_merges {}  idle_tail_merge_max_ms {:.3}",
            single.merges.len(),
            single.merges.iter().copied().fold(0.0, f64::max)
        );
    }
    print_phases("per batch (ms)", &phases, a.batches as u64, 1)?;
    // The single observes' transactions (the access writer's, which stores the
    // rounds' recalls' access records, are not counted).
    print_phases("per single observe (ms, mean)", &singles, singles.transactions, 3)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints where `count` transactions spent their time (`t`), each phase's mean in
/// ms with `digits` decimals.
fn print_phases(label: &str, t: &WriteTimings, count: u64, digits: usize) -> anyhow::Result<()> {
    let per = |d: Duration| ms(d) / count.max(1) as f64;
    outln!(
        "{label}: lock and begin {:.digits$}  observe steps {:.digits$}  buffered writes {:.digits$}  commit {:.digits$}",
        per(t.begin),
        per(t.work),
        per(t.flush),
        per(t.commit)
    );
    Ok(())
}

/// A copy of the kept `store` beside it, with extension `ext`, for a run to write.
///
/// The copy is flushed to disk before it is returned: otherwise the first durable
/// commits measured on it would also write back the copy's dirty pages (an fsync
/// flushes all of a file's), which the application's store would not have.
fn working_copy(store: &Path, ext: &str) -> anyhow::Result<PathBuf> {
    if !store.exists() {
        anyhow::bail!("{} does not exist (build one with bench scale --keep)", store.display());
    }
    let copy = store.with_extension(ext);
    // A closed store's file holds everything: it is copied alone.
    soulmem::storage::remove_store(&copy)
        .with_context(|| format!("removing an old {}", copy.display()))?;
    std::fs::copy(store, &copy).with_context(|| format!("copying to {}", copy.display()))?;
    std::fs::File::open(&copy)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("flushing {}", copy.display()))?;
    Ok(copy)
}

/// `n` timed queries, and as many others of the same mix that warm each engine up
/// first: every engine is timed warm, never on a query it has seen.
fn timed_and_warm_up(corpus: &Corpus, n: usize) -> (Vec<SynthQuery>, Vec<SynthQuery>) {
    let mut queries = corpus.queries(n.saturating_mul(2));
    let warm = queries.split_off(n);
    (queries, warm)
}

/// The filters `bench recall` adds to every query.
#[derive(Clone, Copy, Default)]
struct Filters<'a> {
    /// Filter each query by its user.
    user: bool,
    /// Only these layers.
    types: Option<&'a [String]>,
    /// Only memories of at least this importance.
    min_importance: i32,
    /// Only memories in the project of the query's user (the corpus's scopes).
    scopes: Option<&'a Corpus>,
}

/// The recall of `q` with `filters`.
fn recall_query(q: &SynthQuery, filters: Filters<'_>) -> RecallQuery {
    let mut rq = RecallQuery::new(&q.text);
    if filters.user {
        rq.user_id = Some(q.user_id.clone());
    }
    rq.types = filters.types.map(<[String]>::to_vec);
    rq.min_importance = filters.min_importance;
    rq.scopes = filters.scopes.and_then(|c| c.scope_of(&q.user_id)).map(|s| vec![s]);
    rq
}

fn recall_only(a: &RecallArgs) -> anyhow::Result<ExitCode> {
    // Created first, so a path that cannot be written fails before the copy.
    let mut per_query = match &a.per_query {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    // A copy, so the recalls' access records (and --concurrent's observes) leave
    // the store as it was for the next run.
    let copy = working_copy(&a.store, "recall.redb")?;
    let mut builder = Memory::builder();
    if let Some(mb) = a.cache_mb {
        builder = builder.cache_bytes(mb << 20);
    }
    let mem = builder.open(&copy)?;
    // Timed in its steady state: the ranking records read into the page cache,
    // the tail merged.
    settle_opened(&mem)?;
    let corpus = Corpus::with_users(a.seed, a.users as usize).with_projects(a.projects);
    // As in `bench scale`: the store first runs the other queries untimed.
    let (mut queries, warm) = timed_and_warm_up(&corpus, a.queries);
    if let Some(kind) = &a.kind {
        queries.retain(|q| q.kind == kind);
        anyhow::ensure!(!queries.is_empty(), "no query of kind {kind}");
    }
    let filters = Filters {
        user: a.user,
        types: a.types.as_deref(),
        min_importance: a.min_importance,
        scopes: (a.projects > 0).then_some(&corpus),
    };
    for q in &warm {
        mem.recall(&recall_query(q, filters))?;
    }
    let mut by_kind: std::collections::BTreeMap<&str, (Vec<f64>, u64)> = Default::default();
    let mut all: Vec<f64> = Vec::new();
    let pb = bar((queries.len() * a.repeat) as u64, "recall".into());
    let mut next = mem.count()?;
    let load = Load {
        repeat: a.repeat,
        filters,
        pace_ms: a.concurrent.then_some(a.pace_ms),
        remove_every: a.remove_every,
    };
    let mut written = Ok(());
    let mut timed = 0usize;
    let mut got = time_concurrent(&mem, &corpus, &queries, &mut next, &load, &pb, |q, e, r| {
        let k = by_kind.entry(q.kind).or_default();
        k.0.push(e);
        k.1 += r.trace.postings_read;
        if let (Some(out), Ok(())) = (per_query.as_mut(), &written) {
            let line = json!({
                "pass": timed / queries.len(),
                "kind": q.kind,
                "query": q.text,
                "user_id": q.user_id,
                "ms": e,
                "postings": r.trace.postings_read,
            });
            written = writeln!(out, "{line}");
        }
        timed += 1;
    })?;
    if let Some(mut out) = per_query {
        written.and_then(|()| out.flush()).context("writing --per-query")?;
    }
    all.append(&mut got.recalls);
    pb.finish_and_clear();
    drop(mem);
    let _ = soulmem::storage::remove_store(&copy);
    if a.concurrent {
        let n = got.observes.len();
        outln!(
            "observes meanwhile: {n}, p50 {:.3} ms, p99 {:.3} ms",
            quantile(&mut got.observes, 0.5),
            quantile(&mut got.observes, 0.99)
        );
    }
    outln!("| kind | p50_ms | p99_ms | postings_per_recall |");
    outln!("|---|---:|---:|---:|");
    for (kind, (mut v, postings)) in by_kind {
        let n = v.len().max(1) as u64;
        let (p50, p99) = (quantile(&mut v, 0.5), quantile(&mut v, 0.99));
        outln!("| {kind} | {p50:.3} | {p99:.3} | {} |", postings / n);
    }
    outln!("| all | {:.3} | {:.3} | |", quantile(&mut all, 0.5), quantile(&mut all, 0.99));
    Ok(ExitCode::SUCCESS)
}

fn scale(a: ScaleArgs, baselines: Option<&dyn Baselines>) -> anyhow::Result<ExitCode> {
    if a.compare && a.observe_build {
        anyhow::bail!(
            "--observe-build is not for --compare (the baselines index the default build)"
        );
    }
    if a.compare && baselines.is_none() {
        anyhow::bail!(
            "--compare runs from the soulmem-compare crate, which builds tantivy and SQLite: \
             cargo run --release --manifest-path compare/Cargo.toml -- bench scale --compare"
        );
    }
    let (dir, temp) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("soulmem-bench-{}", std::process::id())), true),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let corpus = Corpus::with_users(a.seed, a.users as usize).with_projects(a.projects);
    let (queries, warm) = timed_and_warm_up(&corpus, a.queries);
    let mut rows = Vec::new();
    let mut built = Vec::new();
    for &n in &a.sizes {
        let (row, used) = measure(&a, baselines, &corpus, (&warm, &queries), &dir, n)?;
        print_row(&row);
        rows.push(row);
        built.push(Built { n, path: store_path(&dir, n), used });
    }
    if built.len() > 1 {
        let mut passes = Vec::new();
        for _ in 0..a.runs {
            passes.push(time_interleaved(&a, &corpus, (&warm, &queries), &built)?);
        }
        for (i, row) in rows.iter_mut().enumerate() {
            let mine: Vec<Map<String, Value>> =
                passes.iter().filter_map(|p| p.get(i).cloned()).collect();
            row.extend(median_rows(&mine));
            if mine.len() > 1 {
                let each = mine.into_iter().map(Value::Object).collect();
                row.insert("interleaved_each_run".into(), Value::Array(each));
            }
        }
    }
    let sizes: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    let out = json!({ "machine": machine(), "command": std::env::args().collect::<Vec<_>>().join(" "), "users": a.users, "sizes": sizes });
    print_table(&out)?;
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&out)? + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if temp && !a.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(ExitCode::SUCCESS)
}

/// Milliseconds in `d`.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `p`-quantile (0..=1) of `v` (nearest rank).
pub fn quantile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// `x` rounded to 3 decimals, as JSON.
pub fn round3(x: f64) -> Value {
    json!((x * 1000.0).round() / 1000.0)
}

/// Resets the process's peak RSS (Linux `clear_refs` 5); false when unsupported.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak resident set size in MiB (`VmHWM`).
fn peak_rss_mb() -> f64 {
    status_kb("VmHWM:").map_or(f64::NAN, |kb| kb as f64 / 1024.0)
}

/// CPU time this process has used (user + system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| {
        // Fields after the command name (which may hold spaces) start at ") ".
        let rest = s.rsplit_once(") ")?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    });
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks.unwrap_or(0) * 10)
}

fn status_kb(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let mem_gb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0 / 1024.0);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()));
    json!({
        "cpu": cpu,
        "loadavg_1m_at_end": load,
        "cores": cores,
        "memory_gb": (mem_gb * 10.0).round() / 10.0,
        "os": std::env::consts::OS,
        "soulmem": env!("CARGO_PKG_VERSION"),
    })
}

fn bar(len: u64, msg: String) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>14} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(msg);
    pb
}

/// Writes the access records the recalls before made and have not been stored
/// yet, so that a measurement of writes starts with the store at rest (the
/// background writer stops once none are pending); the mixed load is measured on
/// its own ("concurrent"). Waiting for the background writer would not do: it
/// leaves up to half of `ACCESS_FLUSH_AT` records pending between its runs.
fn settle(mem: &Memory) -> anyhow::Result<()> {
    Ok(mem.flush_accesses()?)
}

/// Single durable observes, timed.
struct Observed {
    /// Milliseconds of each observe.
    each: Vec<f64>,
    /// Process CPU time the observes took (recalls excluded; merges between them
    /// included).
    cpu: Duration,
    /// Milliseconds of the recall made after each observe (an agent's loop).
    recalls: Vec<f64>,
    /// Milliseconds of each merge of the postings tail made between them.
    merges: Vec<f64>,
}

/// Times `count` single durable observes of the corpus's exchanges from `*next`
/// on (between them, untimed, merging the postings tail once it is `merge_at`
/// percent full); then `count` more, each followed by one recall of the next
/// query (an agent's loop, where the postings tail holds the newest memories),
/// timing the recalls only.
fn time_observes(
    mem: &Memory,
    corpus: &Corpus,
    queries: &[SynthQuery],
    (next, count, merge_at): (&mut u64, usize, Option<u64>),
    pb: &ProgressBar,
) -> anyhow::Result<Observed> {
    let mut out = Observed {
        each: Vec::with_capacity(count),
        cpu: Duration::ZERO,
        recalls: vec![],
        merges: vec![],
    };
    let observe = |next: &mut u64| observe_next(mem, corpus, next);
    let c = cpu_time();
    for _ in 0..count {
        out.each.push(observe(next)?);
        pb.inc(1);
        if let Some(pct) = merge_at {
            let fill = mem.postings_tail()?;
            if fill.memories * 100 >= pct * fill.cap {
                let t = Instant::now();
                mem.merge_postings_tail()?;
                out.merges.push(ms(t.elapsed()));
            }
        }
    }
    out.cpu = cpu_time().saturating_sub(c);
    let rounds = if queries.is_empty() { 0 } else { count };
    for q in queries.iter().cycle().take(rounds) {
        observe(next)?;
        let t = Instant::now();
        mem.recall(&RecallQuery::new(&q.text))?;
        out.recalls.push(ms(t.elapsed()));
        pb.inc(1);
    }
    Ok(out)
}

/// Recall latencies and observe latencies measured together.
struct Concurrent {
    /// Each recall, in ms.
    recalls: Vec<f64>,
    /// Each observe, in ms.
    observes: Vec<f64>,
}

/// How [`time_concurrent`] recalls.
struct Load<'a> {
    /// Passes over the queries.
    repeat: usize,
    /// The filters of each query.
    filters: Filters<'a>,
    /// With a second thread observing, milliseconds it waits after each observe.
    pace_ms: Option<u64>,
    /// Every this many recalls, the first result is removed from the store
    /// (untimed).
    remove_every: Option<u64>,
}

/// Times `load.repeat` passes of recalls over `queries`, while a second thread (with
/// `load.pace_ms`) observes the corpus's exchanges from `*next` on, durably (other
/// conversations of the same agent). `each` sees every recall and its time. With
/// `load.remove_every`, every so many recalls' first result is then removed,
/// untimed.
fn time_concurrent(
    mem: &Memory,
    corpus: &Corpus,
    queries: &[SynthQuery],
    next: &mut u64,
    load: &Load<'_>,
    pb: &ProgressBar,
    mut each: impl FnMut(&SynthQuery, f64, &soulmem::Recall),
) -> anyhow::Result<Concurrent> {
    let Load { repeat, filters, pace_ms, remove_every } = *load;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let start = *next;
    std::thread::scope(|scope| -> anyhow::Result<Concurrent> {
        let stop = &stop;
        let writer = pace_ms.map(|pace_ms| {
            scope.spawn(move || -> anyhow::Result<(Vec<f64>, u64)> {
                let mut took = Vec::new();
                let mut at = start;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    took.push(observe_next(mem, corpus, &mut at)?);
                    std::thread::sleep(Duration::from_millis(pace_ms));
                }
                Ok((took, at))
            })
        });
        let mut recalls = Vec::with_capacity(queries.len() * repeat);
        let mut run = || -> anyhow::Result<()> {
            for _ in 0..repeat {
                for q in queries {
                    let rq = recall_query(q, filters);
                    let t = Instant::now();
                    let r = mem.recall(&rq)?;
                    let e = ms(t.elapsed());
                    each(q, e, &r);
                    recalls.push(e);
                    pb.inc(1);
                    let nth =
                        remove_every.is_some_and(|n| (recalls.len() as u64).is_multiple_of(n));
                    if let (true, Some(first)) = (nth, r.memories.first()) {
                        mem.remove(&first.id)?;
                    }
                }
            }
            Ok(())
        };
        let ran = run();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let observes = match writer {
            Some(h) => {
                let (took, at) =
                    h.join().map_err(|_| anyhow::anyhow!("the observe thread panicked"))??;
                *next = at;
                took
            }
            None => Vec::new(),
        };
        ran.map(|()| Concurrent { recalls, observes })
    })
}

/// Times `batches` `observe_batch` transactions of `batch` exchanges each (from
/// `*next` on), every `sync_every`th and the last one synced, the others deferred
/// (`Durability`): exchanges observed, wall time and CPU time spent in the calls.
fn time_batches(
    mem: &Memory,
    corpus: &Corpus,
    next: &mut u64,
    (batch, batches, sync_every): (usize, usize, usize),
    pb: &ProgressBar,
) -> anyhow::Result<(usize, Duration, Duration, WriteTimings)> {
    let (mut done, mut spent, mut cpu) = (0usize, Duration::ZERO, Duration::ZERO);
    let before = mem.write_timings();
    for i in 0..batches {
        let synced = (i + 1) % sync_every.max(1) == 0 || i + 1 == batches;
        let durability = if synced { Durability::Immediate } else { Durability::Deferred };
        let items: Vec<(String, String, ObserveOptions)> = (0..batch)
            .map(|_| {
                let ex = corpus.exchange(*next);
                *next += 1;
                let o = opts(&ex.user_id, &ex.domain);
                (ex.user, ex.agent, o)
            })
            .collect();
        let t = Instant::now();
        let c = cpu_time();
        let reports = mem.observe_batch_with(&items, durability)?;
        spent += t.elapsed();
        cpu += cpu_time().saturating_sub(c);
        anyhow::ensure!(reports.len() == items.len(), "observe_batch lost reports");
        done += items.len();
        pb.inc(items.len() as u64);
    }
    Ok((done, spent, cpu, mem.write_timings().since(&before)))
}

/// Milliseconds the observe thread of the concurrent measurement waits after each
/// observe.
const CONCURRENT_PACE_MS: u64 = 5;

/// Observes the corpus's exchange `*next` durably (and moves `next` on); returns
/// the milliseconds it took.
fn observe_next(mem: &Memory, corpus: &Corpus, next: &mut u64) -> anyhow::Result<f64> {
    let ex = corpus.exchange(*next);
    *next += 1;
    let t = Instant::now();
    mem.observe_pair(&ex.user, &ex.agent, &opts(&ex.user_id, &ex.domain))?;
    Ok(ms(t.elapsed()))
}

fn opts(user_id: &str, domain: &str) -> ObserveOptions {
    ObserveOptions { user_id: Some(user_id.to_owned()), domain: domain.to_owned() }
}

/// Builds the store of `n` memories in `dir` and measures it `a.runs` times (with
/// the baselines when asked). Returns its row, with the median of each figure
/// over the passes, and the number of exchanges it was built from.
fn measure(
    a: &ScaleArgs,
    baselines: Option<&dyn Baselines>,
    corpus: &Corpus,
    (warm, queries): (&[SynthQuery], &[SynthQuery]),
    dir: &Path,
    n: u64,
) -> anyhow::Result<(Map<String, Value>, u64)> {
    let mut row = Map::new();
    row.insert("n".into(), json!(n));
    let path = store_path(dir, n);
    let used = build(corpus, &path, n, a.observe_build, &mut row)?;
    let base = baselines.filter(|_| a.compare);
    let mut engines: Option<Box<dyn Timed>> = None;
    let (warm_terms, query_terms) = (baseline_queries(warm), baseline_queries(queries));
    let mut runs = Vec::new();
    for _ in 0..a.runs {
        let mut run = measure_once(a, corpus, (warm, queries), &path, n, used)?;
        if let Some(base) = base {
            // Built after soulmem's first pass, so that pass's peak RSS holds none
            // of their documents.
            let timed = match &mut engines {
                Some(e) => e,
                None => engines.insert(build_baselines(base, corpus, dir, n, used, &mut row)?),
            };
            timed.time(&warm_terms, &query_terms, &mut run)?;
            time_paired(
                a,
                (warm, queries),
                (&warm_terms, &query_terms),
                &path,
                timed.as_mut(),
                &mut run,
            )?;
        }
        runs.push(run);
    }
    let mut merged = median_rows(&runs);
    // Peak RSS of the first pass only: later passes run beside the baselines.
    if let Some(first) = runs.first().and_then(|r| r.get("peak_rss_mb")) {
        merged.insert("peak_rss_mb".into(), first.clone());
    }
    row.extend(merged);
    row.insert("runs".into(), json!(runs.len()));
    if runs.len() > 1 {
        row.insert("each_run".into(), Value::Array(runs.into_iter().map(Value::Object).collect()));
    }
    Ok((row, used))
}

/// A store as built by [`measure`], kept until the end of the run.
struct Built {
    /// Its memories.
    n: u64,
    /// Its file.
    path: PathBuf,
    /// The corpus exchanges it was built from (new exchanges start here).
    used: u64,
}

/// Operations each store runs in a row in [`time_interleaved`].
const BLOCK: usize = 10;

/// The order in which [`time_interleaved`] runs `ops` operations on each of
/// `stores` stores: `(store, op)` pairs, in blocks of [`BLOCK`] operations of
/// one store; each block of operations runs on every store in turn, and the store
/// that goes first rotates from one block to the next.
fn interleaving(stores: usize, ops: usize) -> Vec<(usize, usize)> {
    let mut order = Vec::with_capacity(stores * ops);
    for (b, start) in (0..ops).step_by(BLOCK).enumerate() {
        for k in 0..stores {
            let store = (b + k) % stores;
            order.extend((start..(start + BLOCK).min(ops)).map(|op| (store, op)));
        }
    }
    order
}

/// Times recall and single durable observes on every store of `built` in one
/// phase, on a fresh copy of each as built, interleaved ([`interleaving`]):
/// each store first runs the warm-up queries untimed, then the timed queries,
/// then, once the recalls' access records are written, `a.observes` single
/// observes of new exchanges. Returns, per store, `interleaved_recall_p50_ms`
/// and `interleaved_observe_p50_ms`, and their ratios to the smallest store's
/// (`interleaved_recall_ratio`, `interleaved_observe_ratio`).
///
/// The targets bound the cost at 1M memories by 1.5× the cost at 10k. Measured
/// in each size's own phase, minutes apart, the ratio moves with this VM's
/// speed, which drifts by ±25% within minutes; here both sizes run in the same
/// minute. Blocks keep most operations from running right after another
/// store's, whose data would have displaced theirs from the CPU caches. Each
/// store's background work (access records, log checkpoints) runs during the
/// others' blocks, and every size still runs somewhat slower here than in its
/// own phase, for reasons not yet found (`docs/PERFORMANCE.md`, session 16):
/// read these ratios beside the own-phase ones.
fn time_interleaved(
    a: &ScaleArgs,
    corpus: &Corpus,
    (warm, queries): (&[SynthQuery], &[SynthQuery]),
    built: &[Built],
) -> anyhow::Result<Vec<Map<String, Value>>> {
    let mut mems = Vec::with_capacity(built.len());
    let mut copies = Vec::with_capacity(built.len());
    for b in built {
        let copy = working_copy(&b.path, "interleaved.redb")?;
        mems.push(open_measured(a, &copy)?);
        copies.push(copy);
    }
    let k = built.len();
    let pb = bar(
        (k * (warm.len() + queries.len() + a.observes)) as u64,
        "sizes side by side".to_owned(),
    );
    for (store, op) in interleaving(k, warm.len()) {
        mems[store].recall(&RecallQuery::new(&warm[op].text))?;
        pb.inc(1);
    }
    let mut recalls = vec![vec![0.0; queries.len()]; k];
    for (store, op) in interleaving(k, queries.len()) {
        let t = Instant::now();
        mems[store].recall(&RecallQuery::new(&queries[op].text))?;
        recalls[store][op] = ms(t.elapsed());
        pb.inc(1);
    }
    for mem in &mems {
        settle(mem)?;
    }
    let mut next: Vec<u64> = built.iter().map(|b| b.used).collect();
    let mut observes = vec![vec![0.0; a.observes]; k];
    for (store, op) in interleaving(k, a.observes) {
        observes[store][op] = observe_next(&mems[store], corpus, &mut next[store])?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    drop(mems);
    for copy in &copies {
        let _ = soulmem::storage::remove_store(copy);
    }
    let smallest = built.iter().enumerate().min_by_key(|(_, b)| b.n).map_or(0, |(i, _)| i);
    Ok(interleaved_figures(&recalls, &observes, smallest))
}

/// The figures of [`time_interleaved`] from each store's recall and observe
/// milliseconds; ratios are to store `base`'s p50s.
fn interleaved_figures(
    recalls: &[Vec<f64>],
    observes: &[Vec<f64>],
    base: usize,
) -> Vec<Map<String, Value>> {
    let p50 = |v: &[f64]| quantile(&mut v.to_vec(), 0.5);
    let ratio = |x: f64, of: f64| if of > 0.0 { round3(x / of) } else { Value::Null };
    let (base_recall, base_observe) = (
        recalls.get(base).map_or(f64::NAN, |v| p50(v)),
        observes.get(base).map_or(f64::NAN, |v| p50(v)),
    );
    recalls
        .iter()
        .zip(observes)
        .map(|(r, o)| {
            let (r, o) = (p50(r), p50(o));
            let mut row = Map::new();
            row.insert("interleaved_recall_p50_ms".into(), round3(r));
            row.insert("interleaved_observe_p50_ms".into(), round3(o));
            row.insert("interleaved_recall_ratio".into(), ratio(r, base_recall));
            row.insert("interleaved_observe_ratio".into(), ratio(o, base_observe));
            row
        })
        .collect()
}

/// Where the store of `n` memories is built in `dir`.
fn store_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("soulmem-{n}.redb"))
}

/// Builds the store of `n` memories at `path` (by observing the exchanges with
/// `observed`) and adds its build figures to `row`. Returns the number of
/// exchanges used.
fn build(
    corpus: &Corpus,
    path: &Path,
    n: u64,
    observed: bool,
    row: &mut Map<String, Value>,
) -> anyhow::Result<u64> {
    let _ = soulmem::storage::remove_store(path);
    // add_batch of whole exchanges, ~10k memories per durable commit (redb reuses
    // freed pages only after a durable commit: a non-durable build would leave the
    // file much larger than its data).
    let t = Instant::now();
    let (used, held) = {
        let mem = Memory::open(path)?;
        let pb = bar(n, format!("build {n}"));
        let used = if observed {
            let mut next = 0u64;
            let mut held = mem.count()?;
            while held < n {
                let batch = usize::try_from(n - held).unwrap_or(usize::MAX).clamp(1, 1_000);
                time_batches(&mem, corpus, &mut next, (batch, 1, 1), &ProgressBar::hidden())?;
                held = mem.count()?;
                pb.set_position(held.min(n));
            }
            next
        } else {
            corpus.fill(&mem, n, 10_000, |done| pb.set_position(done.min(n)))?
        };
        pb.finish_and_clear();
        (used, mem.count()?)
    };
    row.insert("built_by".into(), json!(if observed { "observe_batch" } else { "add_batch" }));
    let build_s = t.elapsed().as_secs_f64();
    let file = std::fs::metadata(path)?.len();
    // An observed build ends past `n` (its last batch's memories).
    let n = if observed { held.max(1) } else { n };
    row.insert("build_s".into(), round3(build_s));
    row.insert("build_memories_per_s".into(), json!((n as f64 / build_s).round()));
    row.insert("file_mb".into(), round3(file as f64 / 1048576.0));
    row.insert("bytes_per_memory".into(), json!((file as f64 / n as f64).round()));
    Ok(used)
}

/// Opens the store at `path` to be measured, as an application would (durable
/// writes, the cache `a` asks for), once it has settled ([`settle_opened`]): every
/// figure is timed in that steady state.
fn open_measured(a: &ScaleArgs, path: &Path) -> anyhow::Result<Memory> {
    let mut builder = Memory::builder();
    if let Some(mb) = a.cache_mb {
        builder = builder.cache_bytes(mb << 20);
    }
    let mem = builder.open(path)?;
    settle_opened(&mem)?;
    Ok(mem)
}

/// Waits for what a store runs after opening before anything is timed: the
/// prewarm of its ranking records, and the merge of a long postings tail its
/// build left, which the store would start itself once idle for a second
/// (`Settings::idle_tail_merge`) and is run here instead, so that it never
/// overlaps timed work.
fn settle_opened(mem: &Memory) -> anyhow::Result<()> {
    mem.wait_for_prewarm()?;
    let tail = mem.postings_tail()?;
    if soulmem::storage::tail::merge_when_idle(tail.memories, tail.cap) {
        mem.merge_postings_tail()?;
    }
    Ok(())
}

/// One measurement pass over the store built at `path` (of `n` memories from the
/// first `used` exchanges): recall, observes, batched ingest, recall with observes
/// running. Runs on a copy unless this is the only pass and the store need not be
/// kept.
fn measure_once(
    a: &ScaleArgs,
    corpus: &Corpus,
    (warm, queries): (&[SynthQuery], &[SynthQuery]),
    path: &Path,
    n: u64,
    used: u64,
) -> anyhow::Result<Map<String, Value>> {
    let mut row = Map::new();
    let rss_reset = reset_peak_rss();
    // Measured on the store opened as an application would (durable writes).
    // With --keep the store is kept as built (so `bench recall` and `bench ingest`
    // on it start from what was measured here), and with several passes, or
    // several sizes (measured again side by side at the end), each starts from
    // it: a copy is measured.
    let measured = if a.keep || a.runs > 1 || a.sizes.len() > 1 {
        working_copy(path, "measured.redb")?
    } else {
        path.to_path_buf()
    };
    let mem = open_measured(a, &measured)?;
    let stats = mem.stats()?;
    row.insert("memories".into(), json!(mem.count()?));
    row.insert("index_rows".into(), serde_json::to_value(&stats.index_rows)?);

    // Recall: warm up on the other queries, then time each query.
    let mut empty = 0usize;
    let mut postings = 0u64;
    let recall = |q: &RecallQuery, empty: &mut usize, postings: &mut u64| -> anyhow::Result<f64> {
        let t = Instant::now();
        let r = mem.recall(q)?;
        let e = ms(t.elapsed());
        if r.memories.is_empty() {
            *empty += 1;
        }
        *postings += r.trace.postings_read;
        Ok(e)
    };
    let pb = bar(queries.len() as u64 * 4, format!("recall {n}"));
    for q in warm {
        recall(&RecallQuery::new(&q.text), &mut 0, &mut 0)?;
    }
    let mut plain = Vec::new();
    let c = cpu_time();
    for q in queries {
        plain.push(recall(&RecallQuery::new(&q.text), &mut empty, &mut postings)?);
        pb.inc(1);
    }
    let recall_cpu = cpu_time().saturating_sub(c);
    let mut by_user = Vec::new();
    let mut user_empty = 0usize;
    for q in queries {
        by_user.push(recall(
            &recall_query(q, Filters { user: true, ..Filters::default() }),
            &mut user_empty,
            &mut 0,
        )?);
        pb.inc(1);
    }
    let mut by_domain = Vec::new();
    for q in queries {
        let mut rq = RecallQuery::new(&q.text);
        rq.domain = Some(q.domain.clone());
        by_domain.push(recall(&rq, &mut 0, &mut 0)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    row.insert("recall_p50_ms_by_kind".into(), p50_by_kind(&plain, queries.iter().map(|q| q.kind)));
    row.insert("recall_p50_ms".into(), round3(quantile(&mut plain, 0.5)));
    row.insert("recall_p99_ms".into(), round3(quantile(&mut plain, 0.99)));
    // Mean CPU per recall (all threads): robust to other load on the machine.
    let per = |d: Duration| round3(ms(d) / queries.len().max(1) as f64);
    row.insert("recall_cpu_mean_ms".into(), per(recall_cpu));
    row.insert("recall_user_p50_ms".into(), round3(quantile(&mut by_user, 0.5)));
    row.insert("recall_user_p99_ms".into(), round3(quantile(&mut by_user, 0.99)));
    row.insert("recall_domain_p50_ms".into(), round3(quantile(&mut by_domain, 0.5)));
    row.insert("recall_empty".into(), json!(empty));
    row.insert("recall_user_empty".into(), json!(user_empty));
    row.insert("postings_per_recall".into(), json!(postings / queries.len().max(1) as u64));

    // Single durable observes of new exchanges; then as many observe + recall
    // rounds, timing the recall (it sees the observes' memories in the tail).
    let mut next = used;
    let pb = bar(2 * a.observes as u64, format!("observe {n}"));
    settle(&mem)?;
    let mut single = time_observes(&mem, corpus, queries, (&mut next, a.observes, None), &pb)?;
    pb.finish_and_clear();
    row.insert("observe_cpu_mean_ms".into(), round3(ms(single.cpu) / a.observes.max(1) as f64));
    row.insert("observe_p50_ms".into(), round3(quantile(&mut single.each, 0.5)));
    row.insert("observe_p99_ms".into(), round3(quantile(&mut single.each, 0.99)));
    row.insert("recall_after_observe_p50_ms".into(), round3(quantile(&mut single.recalls, 0.5)));

    // Batched observe throughput (durable commit per batch).
    let pb = bar((a.batch * a.batches) as u64, format!("ingest {n}"));
    settle(&mem)?;
    let (done, spent, cpu, phases) =
        time_batches(&mem, corpus, &mut next, (a.batch, a.batches, 1), &pb)?;
    pb.finish_and_clear();
    row.insert("ingest_per_s".into(), json!((done as f64 / spent.as_secs_f64()).round()));
    // Where each batch's transaction spent its time (`Memory::write_timings`).
    let per = |d: Duration| round3(ms(d) / a.batches.max(1) as f64);
    row.insert(
        "ingest_batch_ms".into(),
        json!({
            "begin": per(phases.begin),
            "observe_steps": per(phases.work),
            "buffered_writes": per(phases.flush),
            "commit": per(phases.commit),
        }),
    );
    // Per CPU second: what the pipeline costs, whatever else the machine runs.
    row.insert(
        "ingest_per_cpu_s".into(),
        json!((done as f64 / cpu.as_secs_f64().max(1e-3)).round()),
    );

    // The same for a bulk load: as many batches committed without a sync but the
    // last (`Durability::Deferred`), whose sync makes them all durable.
    let pb = bar((a.batch * a.batches) as u64, format!("bulk ingest {n}"));
    settle(&mem)?;
    let (done, spent, _, _) =
        time_batches(&mem, corpus, &mut next, (a.batch, a.batches, a.batches), &pb)?;
    pb.finish_and_clear();
    row.insert("ingest_deferred_per_s".into(), json!((done as f64 / spent.as_secs_f64()).round()));

    // Recall while another thread observes (paced, durable).
    let pb = bar(queries.len() as u64, format!("concurrent {n}"));
    let load = Load {
        repeat: 1,
        filters: Filters::default(),
        pace_ms: Some(CONCURRENT_PACE_MS),
        remove_every: None,
    };
    let mut got = time_concurrent(&mem, corpus, queries, &mut next, &load, &pb, |_, _, _| {})?;
    pb.finish_and_clear();
    row.insert("recall_concurrent_p50_ms".into(), round3(quantile(&mut got.recalls, 0.5)));
    row.insert("recall_concurrent_p99_ms".into(), round3(quantile(&mut got.recalls, 0.99)));
    row.insert("observe_concurrent_p50_ms".into(), round3(quantile(&mut got.observes, 0.5)));
    drop(mem);
    row.insert("peak_rss_mb".into(), if rss_reset { round3(peak_rss_mb()) } else { Value::Null });
    if measured != path {
        let _ = soulmem::storage::remove_store(&measured);
    }
    Ok(row)
}

/// The middle value of `xs` (the mean of the two middle ones for an even count).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The median of each figure over `runs` (objects figure by figure; anything
/// that is not a number in every run is taken from the first).
fn median_rows(runs: &[Map<String, Value>]) -> Map<String, Value> {
    let Some(first) = runs.first() else { return Map::new() };
    let mut out = Map::new();
    for (key, v) in first {
        let all: Vec<&Value> = runs.iter().filter_map(|r| r.get(key)).collect();
        let merged = if all.len() < runs.len() {
            v.clone()
        } else if let Some(mut xs) = all.iter().map(|x| x.as_f64()).collect::<Option<Vec<f64>>>() {
            let m = median(&mut xs);
            if v.is_u64() {
                json!(m.round() as u64)
            } else if v.is_i64() {
                json!(m.round() as i64)
            } else {
                round3(m)
            }
        } else if v.is_object() {
            let objs: Vec<Map<String, Value>> =
                all.iter().filter_map(|x| x.as_object().cloned()).collect();
            if objs.len() == runs.len() { Value::Object(median_rows(&objs)) } else { v.clone() }
        } else {
            v.clone()
        };
        out.insert(key.clone(), merged);
    }
    out
}

/// One document as the baselines index it: soulmem's index terms of a memory
/// (stop words dropped, stemmed), space-separated, and its text (stored, returned
/// with each hit). Indexing the same terms gives every engine the same postings and
/// document lengths, so all of them score the same matches.
#[allow(dead_code)] // Read by the baselines in compare/ (soulmem-bench).
pub struct BaselineDoc {
    /// The memory's index terms, space-separated.
    pub terms: String,
    /// The memory's text.
    pub content: String,
}

/// One query as the baselines run it: the terms soulmem searches for.
pub struct BaselineQuery {
    /// Query terms (soulmem's, stemmed).
    pub terms: Vec<String>,
    /// The query's kind ([`SynthQuery::kind`]).
    pub kind: &'static str,
}

/// Search engines measured beside soulmem on the same documents and terms
/// (`--compare`). Implemented by the `soulmem-compare` crate, which compiles this
/// module into its own `soulmem-bench` binary so that soulctl never builds tantivy
/// or SQLite.
pub trait Baselines {
    /// Indexes `docs` under `dir`, adds what that cost (time, size) to `row`, and
    /// returns the engines, ready to be timed.
    ///
    /// # Errors
    /// Whatever the engines report.
    fn build(
        &self,
        docs: &[BaselineDoc],
        dir: &Path,
        n: u64,
        row: &mut Map<String, Value>,
    ) -> anyhow::Result<Box<dyn Timed>>;
}

/// Baseline engines built by [`Baselines::build`].
pub trait Timed {
    /// Runs one top-10 query of `terms` in the engine that [`time_paired`] times
    /// query by query beside soulmem (tantivy's): returns the hits.
    ///
    /// # Errors
    /// Whatever the engine reports.
    fn paired(&mut self, terms: &[String]) -> anyhow::Result<usize>;

    /// Runs `warm` untimed, then times a top-10 query for each of `queries` in
    /// each engine (see [`time_queries`]), and adds the figures to `row`.
    ///
    /// # Errors
    /// Whatever the engines report.
    fn time(
        &mut self,
        warm: &[BaselineQuery],
        queries: &[BaselineQuery],
        row: &mut Map<String, Value>,
    ) -> anyhow::Result<()>;
}

/// Times soulmem's recall and the paired baseline ([`Timed::paired`]) query by
/// query, on a fresh copy of the store at `path` as built, and adds
/// `paired_recall_p50_ms`, `paired_tantivy_p50_ms`, their per-kind p50s and
/// `paired_tantivy_ratio` (the first p50 over the second) to `row`.
///
/// The other figures time each engine in a phase of its own, minutes apart; this
/// VM's speed drifts by ±25% within minutes, which moves their ratio as much as
/// any change to the code does. Here each query runs in both engines back to
/// back (which goes first alternates), after the same warm-up queries, so a slow
/// phase slows both.
fn time_paired(
    a: &ScaleArgs,
    (warm, queries): (&[SynthQuery], &[SynthQuery]),
    (warm_terms, query_terms): (&[BaselineQuery], &[BaselineQuery]),
    path: &Path,
    engine: &mut dyn Timed,
    row: &mut Map<String, Value>,
) -> anyhow::Result<()> {
    let copy = working_copy(path, "paired.redb")?;
    let mem = open_measured(a, &copy)?;
    let pb = bar((warm.len() + queries.len()) as u64, "paired".to_owned());
    for (q, t) in warm.iter().zip(warm_terms) {
        mem.recall(&RecallQuery::new(&q.text))?;
        engine.paired(&t.terms)?;
        pb.inc(1);
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for (i, (q, t)) in queries.iter().zip(query_terms).enumerate() {
        let soulmem = || -> anyhow::Result<f64> {
            let s = Instant::now();
            mem.recall(&RecallQuery::new(&q.text))?;
            Ok(ms(s.elapsed()))
        };
        let baseline = |e: &mut dyn Timed| -> anyhow::Result<f64> {
            let s = Instant::now();
            e.paired(&t.terms)?;
            Ok(ms(s.elapsed()))
        };
        if i % 2 == 0 {
            ours.push(soulmem()?);
            theirs.push(baseline(engine)?);
        } else {
            theirs.push(baseline(engine)?);
            ours.push(soulmem()?);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    drop(mem);
    let _ = soulmem::storage::remove_store(&copy);
    row.extend(paired_figures(&ours, &theirs, queries.iter().map(|q| q.kind)));
    Ok(())
}

/// The figures of [`time_paired`] from soulmem's and the baseline's milliseconds
/// per query (`ours[i]` and `theirs[i]` are the same query, of kind `kinds[i]`).
fn paired_figures(
    ours: &[f64],
    theirs: &[f64],
    kinds: impl IntoIterator<Item = &'static str> + Clone,
) -> Map<String, Value> {
    let mut row = Map::new();
    row.insert("paired_recall_p50_ms_by_kind".into(), p50_by_kind(ours, kinds.clone()));
    row.insert("paired_tantivy_p50_ms_by_kind".into(), p50_by_kind(theirs, kinds));
    let p_ours = quantile(&mut ours.to_vec(), 0.5);
    let p_theirs = quantile(&mut theirs.to_vec(), 0.5);
    row.insert("paired_recall_p50_ms".into(), round3(p_ours));
    row.insert("paired_tantivy_p50_ms".into(), round3(p_theirs));
    let ratio = if p_theirs > 0.0 { round3(p_ours / p_theirs) } else { Value::Null };
    row.insert("paired_tantivy_ratio".into(), ratio);
    row
}

/// The p50 of `times` per query kind, as a JSON object.
pub fn p50_by_kind(times: &[f64], kinds: impl IntoIterator<Item = &'static str>) -> Value {
    let mut by: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for (t, k) in times.iter().zip(kinds) {
        by.entry(k).or_default().push(*t);
    }
    Value::Object(
        by.into_iter().map(|(k, mut v)| (k.to_owned(), round3(quantile(&mut v, 0.5)))).collect(),
    )
}

/// Runs `f` on each of `warm` untimed, then times it on each of `queries`, and
/// adds `{name}_p50_ms`, `{name}_p99_ms` and `{name}_p50_ms_by_kind` to `row`.
///
/// # Errors
/// The first error of `f`.
#[allow(dead_code)] // Used by the baselines in compare/ (soulmem-bench).
pub fn time_queries(
    name: &str,
    warm: &[BaselineQuery],
    queries: &[BaselineQuery],
    row: &mut Map<String, Value>,
    f: &mut dyn FnMut(&[String]) -> anyhow::Result<usize>,
) -> anyhow::Result<()> {
    for q in warm {
        f(&q.terms)?;
    }
    let mut v = Vec::new();
    for q in queries {
        let s = Instant::now();
        f(&q.terms)?;
        v.push(ms(s.elapsed()));
    }
    row.insert(format!("{name}_p50_ms_by_kind"), p50_by_kind(&v, queries.iter().map(|q| q.kind)));
    row.insert(format!("{name}_p50_ms"), round3(quantile(&mut v, 0.5)));
    row.insert(format!("{name}_p99_ms"), round3(quantile(&mut v, 0.99)));
    Ok(())
}

/// Builds the baselines on the memories soulmem indexed (exchanges `0..used`,
/// the first `n` memories).
fn build_baselines(
    base: &dyn Baselines,
    corpus: &Corpus,
    dir: &Path,
    n: u64,
    used: u64,
    row: &mut Map<String, Value>,
) -> anyhow::Result<Box<dyn Timed>> {
    let mut docs: Vec<BaselineDoc> = Vec::with_capacity(n as usize);
    'fill: for i in 0..used {
        for e in corpus.entries(i) {
            if docs.len() as u64 == n {
                break 'fill;
            }
            let terms = soulmem::text::index_terms(&e.content).join(" ");
            docs.push(BaselineDoc { terms, content: e.content });
        }
    }
    base.build(&docs, dir, n, row)
}

/// The query terms soulmem searches for (its own words, not expansions).
fn baseline_queries(qs: &[SynthQuery]) -> Vec<BaselineQuery> {
    qs.iter()
        .map(|q| BaselineQuery {
            terms: soulmem::read::query_terms(&q.text)
                .into_iter()
                .filter(|t| t.weight >= 1.0)
                .map(|t| t.token)
                .collect(),
            kind: q.kind,
        })
        .collect()
}

const COLUMNS: &[&str] = &[
    "n",
    "ingest_per_s",
    "ingest_per_cpu_s",
    "ingest_deferred_per_s",
    "observe_p50_ms",
    "observe_cpu_mean_ms",
    "recall_p50_ms",
    "recall_p99_ms",
    "recall_cpu_mean_ms",
    "recall_user_p50_ms",
    "recall_after_observe_p50_ms",
    "recall_concurrent_p50_ms",
    "recall_concurrent_p99_ms",
    "observe_concurrent_p50_ms",
    "tantivy_p50_ms",
    "paired_tantivy_ratio",
    "interleaved_recall_ratio",
    "interleaved_observe_ratio",
    "sqlite_p50_ms",
    "bytes_per_memory",
    "peak_rss_mb",
];

fn cell(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(x)) => x.to_string(),
        Some(Value::Null) | None => "-".into(),
        Some(other) => other.to_string(),
    }
}

fn print_row(row: &Map<String, Value>) {
    eprintln!("{}", serde_json::to_string(row).unwrap_or_default());
}

fn print_table(out: &Value) -> anyhow::Result<()> {
    let empty = Vec::new();
    let rows = out["sizes"].as_array().unwrap_or(&empty);
    outln!("| {} |", COLUMNS.join(" | "));
    outln!("|{}|", COLUMNS.iter().map(|_| "---:").collect::<Vec<_>>().join("|"));
    for r in rows {
        let cells: Vec<String> = COLUMNS.iter().map(|c| cell(r.get(*c))).collect();
        outln!("| {} |", cells.join(" | "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn row(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn runs_merge_figure_by_figure() {
        let runs = [
            row(
                json!({"n": 10, "p50": 0.5, "kinds": {"fact": 0.2}, "mb": 7, "who": "a", "gap": null}),
            ),
            row(
                json!({"n": 10, "p50": 0.1, "kinds": {"fact": 0.4}, "mb": 9, "who": "b", "gap": 1.0}),
            ),
            row(json!({"n": 10, "p50": 0.3, "kinds": {"fact": 0.9}, "mb": 8, "who": "c"})),
        ];
        let m = median_rows(&runs);
        assert_eq!(m["n"], json!(10));
        assert_eq!(m["p50"], json!(0.3));
        assert_eq!(m["kinds"]["fact"], json!(0.4));
        // Integers stay integers.
        assert_eq!(m["mb"], json!(8));
        // Not numbers in every run: the first run's value.
        assert_eq!(m["who"], json!("a"));
        assert_eq!(m["gap"], Value::Null);
        // An even count takes the mean of the middle two.
        let m = median_rows(&runs[..2]);
        assert_eq!(m["p50"], json!(0.3));
        assert_eq!(m["mb"], json!(8));
        assert!(median_rows(&[]).is_empty());
    }

    #[test]
    fn paired_figures_are_each_engines_p50_and_their_ratio() {
        let ours = [0.4, 0.1, 0.9, 0.3];
        let theirs = [0.2, 0.05, 0.1, 0.1];
        let kinds = ["fact", "entity", "multi", "fact"];
        let r = paired_figures(&ours, &theirs, kinds);
        // Nearest-rank p50 of four: the second smallest.
        assert_eq!(r["paired_recall_p50_ms"], json!(0.3));
        assert_eq!(r["paired_tantivy_p50_ms"], json!(0.1));
        assert_eq!(r["paired_tantivy_ratio"], json!(3.0));
        assert_eq!(r["paired_recall_p50_ms_by_kind"]["fact"], json!(0.3));
        assert_eq!(r["paired_tantivy_p50_ms_by_kind"]["multi"], json!(0.1));
        // A baseline timed at zero has no ratio.
        assert_eq!(paired_figures(&[0.1], &[0.0], ["fact"])["paired_tantivy_ratio"], Value::Null);
    }

    /// A stand-in for the baselines of `compare/`: finds nothing, counts its
    /// paired queries.
    struct Stub(Arc<AtomicUsize>);

    impl Baselines for Stub {
        fn build(
            &self,
            docs: &[BaselineDoc],
            _dir: &Path,
            _n: u64,
            row: &mut Map<String, Value>,
        ) -> anyhow::Result<Box<dyn Timed>> {
            row.insert("stub_docs".into(), json!(docs.len()));
            Ok(Box::new(Stub(Arc::clone(&self.0))))
        }
    }

    impl Timed for Stub {
        fn paired(&mut self, _terms: &[String]) -> anyhow::Result<usize> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(0)
        }
        fn time(
            &mut self,
            warm: &[BaselineQuery],
            queries: &[BaselineQuery],
            row: &mut Map<String, Value>,
        ) -> anyhow::Result<()> {
            time_queries("tantivy", warm, queries, row, &mut |_| Ok(0))
        }
    }

    #[test]
    fn compare_pairs_each_query_with_the_baseline_in_every_pass() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("soulmem-bench-pair-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let json_out = dir.join("out.json");
        let a = ScaleArgs {
            sizes: vec![300],
            compare: true,
            json: Some(json_out.clone()),
            dir: Some(dir.clone()),
            keep: false,
            queries: 6,
            observes: 2,
            batch: 20,
            batches: 1,
            seed: 42,
            users: 1000,
            observe_build: false,
            projects: 0,
            cache_mb: None,
            runs: 2,
        };
        let calls = Arc::new(AtomicUsize::new(0));
        scale(a, Some(&Stub(Arc::clone(&calls))))?;
        let out: Value = serde_json::from_str(&std::fs::read_to_string(&json_out)?)?;
        let r = &out["sizes"][0];
        assert_eq!(r["stub_docs"], json!(300));
        // Each pass: the 6 warm-up queries and the 6 timed ones, once each.
        assert_eq!(calls.load(Ordering::Relaxed), 2 * (6 + 6));
        for run in r["each_run"].as_array().cloned().unwrap_or_default() {
            assert!(run["paired_recall_p50_ms"].as_f64().is_some_and(|x| x > 0.0), "{run}");
            assert!(run["paired_tantivy_p50_ms"].is_number(), "{run}");
            assert!(run["paired_recall_p50_ms_by_kind"].is_object(), "{run}");
        }
        // The paired copy is gone; the store as built stays until the run ends.
        assert!(!dir.join("soulmem-300.paired.redb").exists());
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    #[test]
    fn interleaving_runs_each_op_once_per_store_in_rotating_blocks() {
        for (stores, ops) in [(2, 25), (3, 30), (1, 7), (2, 0), (3, 4)] {
            let order = interleaving(stores, ops);
            let mut seen = std::collections::BTreeSet::new();
            for &pair in &order {
                assert!(seen.insert(pair), "{pair:?} twice");
            }
            assert_eq!(seen.len(), stores * ops);
            // Block by block: every store runs the block's ops in order, one store
            // after another, led by a store that rotates.
            let mut at = 0;
            for (b, start) in (0..ops).step_by(BLOCK).enumerate() {
                let len = BLOCK.min(ops - start);
                let mut leaders = Vec::new();
                for _ in 0..stores {
                    let run = &order[at..at + len];
                    leaders.push(run[0].0);
                    assert!(run.iter().all(|&(s, _)| s == run[0].0), "{run:?}");
                    let ops_run: Vec<usize> = run.iter().map(|&(_, op)| op).collect();
                    assert_eq!(ops_run, (start..start + len).collect::<Vec<_>>());
                    at += len;
                }
                assert_eq!(leaders[0], b % stores);
                leaders.sort_unstable();
                assert_eq!(leaders, (0..stores).collect::<Vec<_>>());
            }
            assert_eq!(at, order.len());
        }
    }

    #[test]
    fn interleaved_ratios_are_to_the_base_stores_p50s() {
        let recalls = vec![vec![0.4, 0.2, 0.1], vec![3.0, 1.0, 2.0]];
        let observes = vec![vec![2.0, 1.0, 3.0], vec![1.5, 6.0, 3.0]];
        let rows = interleaved_figures(&recalls, &observes, 0);
        assert_eq!(rows[0]["interleaved_recall_p50_ms"], json!(0.2));
        assert_eq!(rows[1]["interleaved_recall_p50_ms"], json!(2.0));
        assert_eq!(rows[0]["interleaved_recall_ratio"], json!(1.0));
        assert_eq!(rows[1]["interleaved_recall_ratio"], json!(10.0));
        assert_eq!(rows[1]["interleaved_observe_p50_ms"], json!(3.0));
        assert_eq!(rows[1]["interleaved_observe_ratio"], json!(1.5));
        let by_second = interleaved_figures(&recalls, &observes, 1);
        assert_eq!(by_second[0]["interleaved_observe_ratio"], json!(0.667));
    }

    #[test]
    fn scale_measures_the_sizes_side_by_side_from_the_stores_as_built() -> anyhow::Result<()> {
        let dir =
            std::env::temp_dir().join(format!("soulmem-bench-sizes-test-{}", std::process::id()));
        let json_out = dir.join("out.json");
        std::fs::create_dir_all(&dir)?;
        let a = ScaleArgs {
            sizes: vec![600, 300],
            compare: false,
            json: Some(json_out.clone()),
            dir: Some(dir.clone()),
            keep: false,
            queries: 8,
            observes: 12,
            batch: 20,
            batches: 1,
            seed: 42,
            users: 1000,
            observe_build: false,
            projects: 0,
            cache_mb: None,
            runs: 2,
        };
        scale(a, None)?;
        let out: Value = serde_json::from_str(&std::fs::read_to_string(&json_out)?)?;
        let (big, small) = (&out["sizes"][0], &out["sizes"][1]);
        // Ratios are to the smallest store, wherever it is listed.
        assert_eq!(small["interleaved_observe_ratio"], json!(1.0));
        assert_eq!(small["interleaved_recall_ratio"], json!(1.0));
        for row in [big, small] {
            let each = row["interleaved_each_run"].as_array().cloned().unwrap_or_default();
            assert_eq!(each.len(), 2);
            for run in &each {
                assert!(run["interleaved_observe_p50_ms"].as_f64().is_some_and(|x| x > 0.0));
                assert!(run["interleaved_recall_p50_ms"].as_f64().is_some_and(|x| x > 0.0));
            }
        }
        // The row's ratio is the median (here: the mean) of the passes' ratios.
        let each = big["interleaved_each_run"].as_array().cloned().unwrap_or_default();
        let ratios: Vec<f64> =
            each.iter().filter_map(|x| x["interleaved_observe_ratio"].as_f64()).collect();
        let r = big["interleaved_observe_ratio"].as_f64().unwrap_or(f64::NAN);
        assert!(ratios.len() == 2 && (r - (ratios[0] + ratios[1]) / 2.0).abs() < 1e-3, "{r}");
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    #[test]
    fn scale_with_runs_measures_each_pass_on_the_store_as_built() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("soulmem-bench-test-{}", std::process::id()));
        let json_out = dir.join("out.json");
        std::fs::create_dir_all(&dir)?;
        let a = ScaleArgs {
            sizes: vec![300],
            compare: false,
            json: Some(json_out.clone()),
            dir: Some(dir.clone()),
            keep: false,
            queries: 8,
            observes: 3,
            batch: 20,
            batches: 1,
            seed: 42,
            users: 1,
            observe_build: true,
            projects: 0,
            cache_mb: None,
            runs: 2,
        };
        scale(a, None)?;
        let out: Value = serde_json::from_str(&std::fs::read_to_string(&json_out)?)?;
        let r = &out["sizes"][0];
        assert_eq!(r["runs"], json!(2));
        let each = r["each_run"].as_array().cloned().unwrap_or_default();
        assert_eq!(each.len(), 2);
        // Every pass starts from the store as built, which is kept unchanged.
        for run in &each {
            assert_eq!(run["memories"], r["memories"]);
            assert!(run["recall_p50_ms"].as_f64().is_some_and(|x| x > 0.0));
        }
        let kept = Memory::open(dir.join("soulmem-300.redb"))?;
        assert_eq!(json!(kept.count()?), r["memories"]);
        // Built from a corpus of the one user asked for.
        assert_eq!(out["users"], json!(1));
        let facts = kept.facts(true)?;
        assert!(!facts.is_empty());
        assert!(facts.iter().all(|f| f.user_id.as_deref() == Some("u0000")), "another user");
        drop(kept);
        // The merged figure lies between the passes'.
        let p: Vec<f64> = each.iter().filter_map(|x| x["ingest_per_s"].as_f64()).collect();
        let m = r["ingest_per_s"].as_f64().unwrap_or(f64::NAN);
        assert!(p.len() == 2 && m >= p[0].min(p[1]) && m <= p[0].max(p[1]), "{m} {p:?}");
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
