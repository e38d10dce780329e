//! `soulctl bench replay`: a scenario's ops timed one by one, per op kind.
//!
//! The same scenario files replayed by soul-protocol 0.4.0 itself
//! (`scripts/bench_reference.py`, which writes the same JSON) give the Python
//! project's cost for the same work, op for op. An op's time here is what
//! `soulctl replay` spends on its line: parsing it, the op, and building its
//! output (not writing it); the Python side times the manager's calls alone.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args as ClapArgs;
use serde_json::{Map, Value, json};
use soulmem::Profile;
use soulmem::replay::Replayer;
use soulmem::synth::Corpus;

use super::{bar, ms, quantile};

/// `bench replay` arguments.
#[derive(ClapArgs, Debug)]
pub struct ReplayArgs {
    /// Scenario files (JSON Lines, `SCENARIO_FORMAT.md`), replayed in order into one
    /// store.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// Behaviour profile of the store (`default` or `reference`).
    #[arg(long, default_value = "default", value_parser = parse_profile)]
    profile: Profile,
    /// Replay into a store file in this directory, every op committed durably as an
    /// application's would be (the file is removed afterwards); without it, an
    /// in-memory store.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the figures as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `bench scenario` arguments.
#[derive(ClapArgs, Debug)]
pub struct ScenarioArgs {
    /// Exchanges observed (the corpus's first ones, one every 30 seconds).
    #[arg(long, default_value_t = 10_000)]
    exchanges: u64,
    /// Recalls after them (the bench's query mix, unfiltered, top 10).
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Users in the corpus.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    users: u64,
    /// Corpus seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The scenario file to write.
    #[arg(long)]
    out: PathBuf,
}

/// Runs `bench scenario`: the synthetic corpus as a replay scenario, so any engine
/// that replays the format (soul-protocol through `scripts/bench_reference.py`)
/// can be timed on it.
///
/// # Errors
/// An unwritable `--out`.
pub fn scenario(a: &ScenarioArgs) -> anyhow::Result<ExitCode> {
    let file =
        std::fs::File::create(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let corpus = Corpus::with_users(a.seed, usize::try_from(a.users).unwrap_or(usize::MAX));
    let at = |i: u64| format!("{}Z", soulmem::model::time::format_timestamp(&corpus.created_at(i)));
    let pb = bar(a.exchanges + a.queries as u64, "scenario".into());
    let mut line = |v: Value| -> anyhow::Result<()> {
        serde_json::to_writer(&mut out, &v)?;
        out.write_all(b"\n")?;
        pb.inc(1);
        Ok(())
    };
    for i in 0..a.exchanges {
        let x = corpus.exchange(i);
        line(json!({"op": "observe", "at": at(i), "user": x.user, "agent": x.agent,
                    "user_id": x.user_id, "domain": x.domain}))?;
    }
    for (j, q) in corpus.queries(a.queries).into_iter().enumerate() {
        let i = a.exchanges + j as u64;
        line(json!({"op": "recall", "at": at(i), "query": q.text, "limit": 10,
                    "tag": {"kind": q.kind}}))?;
    }
    pb.finish_and_clear();
    out.flush().with_context(|| format!("writing {}", a.out.display()))?;
    outln!("{} ops written to {}", a.exchanges + a.queries as u64, a.out.display());
    Ok(ExitCode::SUCCESS)
}

/// `cmd::parse_profile`'s twin: the compare crate compiles this module without
/// soulctl's `cmd` module around it.
fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::parse(s).ok_or_else(|| format!("unknown profile {s:?} (use default or reference)"))
}

/// One op kind's timings.
#[derive(Default)]
struct OpTimes {
    each: Vec<f64>,
    errors: usize,
}

/// Runs `bench replay`.
///
/// # Errors
/// Unreadable scenario files, storage errors, an unwritable `--json` path.
pub fn run(a: &ReplayArgs) -> anyhow::Result<ExitCode> {
    // Every line read first, so no file is read while ops are timed.
    let mut lines = Vec::new();
    for path in &a.scenarios {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        for line in std::io::BufReader::new(file).lines() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            if !line.trim().is_empty() {
                lines.push(line);
            }
        }
    }
    // Created before any op runs, so a path that cannot be written fails at once.
    let json_out = match &a.json {
        Some(p) => {
            Some(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => None,
    };
    let store = match &a.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join("bench-replay.redb");
            soulmem::storage::remove_store(&path)
                .with_context(|| format!("removing an old {}", path.display()))?;
            Some(path)
        }
        None => None,
    };
    let replayer = match &store {
        Some(path) => Replayer::open(path, a.profile)?,
        None => Replayer::in_memory(a.profile)?,
    };
    let pb = bar(lines.len() as u64, "replay".into());
    let mut by_op: BTreeMap<String, OpTimes> = BTreeMap::new();
    let started = Instant::now();
    for line in &lines {
        let t = Instant::now();
        let out = replayer.apply_line(line);
        let e = ms(t.elapsed());
        let op = out.get("op").and_then(Value::as_str).unwrap_or("(invalid)");
        let times = by_op.entry(op.to_owned()).or_default();
        times.each.push(e);
        if out.get("error").is_some() {
            times.errors += 1;
        }
        pb.inc(1);
    }
    let total_s = started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    drop(replayer);
    if let Some(path) = &store {
        soulmem::storage::remove_store(path)
            .with_context(|| format!("removing {}", path.display()))?;
    }

    outln!("| op | count | errors | p50_ms | p99_ms | mean_ms | total_s |");
    outln!("|---|---:|---:|---:|---:|---:|---:|");
    let mut ops = Map::new();
    for (op, mut t) in by_op {
        let n = t.each.len();
        let sum: f64 = t.each.iter().sum();
        let (p50, p99) = (quantile(&mut t.each, 0.5), quantile(&mut t.each, 0.99));
        let mean = sum / n.max(1) as f64;
        outln!(
            "| {op} | {n} | {} | {p50:.3} | {p99:.3} | {mean:.3} | {:.2} |",
            t.errors,
            sum / 1e3
        );
        ops.insert(
            op,
            json!({"count": n, "errors": t.errors, "p50_ms": p50, "p99_ms": p99,
                   "mean_ms": mean, "total_s": sum / 1e3}),
        );
    }
    outln!("{} ops in {total_s:.2} s", lines.len());
    if let Some(file) = json_out {
        let doc = json!({
            "engine": format!("soulmem {}", env!("CARGO_PKG_VERSION")),
            "profile": if a.profile.is_reference() { "reference" } else { "default" },
            "store": if store.is_some() { "file" } else { "memory" },
            "scenarios": a.scenarios.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "ops": lines.len(),
            "total_s": total_s,
            "by_op": ops,
        });
        serde_json::to_writer_pretty(file, &doc).context("writing --json")?;
    }
    Ok(ExitCode::SUCCESS)
}
