//! `soulmem-bench`: `soulctl bench` with the tantivy and SQLite FTS5 baselines.
//!
//! The benchmark itself is soulctl's `bench` module, compiled here unchanged; this
//! binary only supplies the [`bench::Baselines`] for `--compare`.

#[path = "../../tools/soulctl/src/output.rs"]
#[macro_use]
mod output;

#[path = "../../tools/soulctl/src/cmd/bench.rs"]
#[allow(dead_code)] // soulctl's entry point `run` is not used here.
mod bench;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use serde_json::{Map, Value};
use soulmem_compare::{Sqlite, Tantivy};

/// The allocator soulctl links (see its main.rs), so that soulmem's figures here
/// are soulctl's; tantivy and SQLite run under it too.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Scale benchmarks with baselines.
#[derive(Parser, Debug)]
#[command(name = "soulmem-bench", version, about)]
enum Cli {
    /// Benchmarks: `bench scale` builds synthetic stores and measures them.
    Bench(bench::Args),
}

struct Engines;

fn dir_size(p: &Path) -> u64 {
    let Ok(meta) = std::fs::metadata(p) else { return 0 };
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| dir_size(&e.path())).sum()).unwrap_or(0)
}

impl bench::Baselines for Engines {
    fn build(
        &self,
        docs: &[bench::BaselineDoc],
        dir: &Path,
        n: u64,
        row: &mut Map<String, Value>,
    ) -> anyhow::Result<Box<dyn bench::Timed>> {
        let mb = |b: u64| bench::round3(b as f64 / 1048576.0);
        let pairs = || docs.iter().map(|d| (d.terms.as_str(), d.content.as_str()));

        let tdir = dir.join(format!("tantivy-{n}"));
        let _ = std::fs::remove_dir_all(&tdir);
        let t = Instant::now();
        let tantivy = Tantivy::build(&tdir, pairs()).map_err(anyhow::Error::msg)?;
        row.insert("tantivy_build_s".into(), bench::round3(t.elapsed().as_secs_f64()));
        row.insert("tantivy_mb".into(), mb(dir_size(&tdir)));

        let spath = dir.join(format!("fts5-{n}.sqlite"));
        let _ = std::fs::remove_file(&spath);
        let t = Instant::now();
        let sqlite = Sqlite::build(&spath, pairs()).map_err(anyhow::Error::msg)?;
        row.insert("sqlite_build_s".into(), bench::round3(t.elapsed().as_secs_f64()));
        row.insert("sqlite_mb".into(), mb(dir_size(&spath)));
        Ok(Box::new(Built { tantivy, sqlite }))
    }
}

/// Both engines, built.
struct Built {
    tantivy: Tantivy,
    sqlite: Sqlite,
}

impl bench::Timed for Built {
    fn paired(&mut self, terms: &[String]) -> anyhow::Result<usize> {
        Ok(self.tantivy.search(terms, 10).map_err(anyhow::Error::msg)?.len())
    }

    fn time(
        &mut self,
        warm: &[bench::BaselineQuery],
        queries: &[bench::BaselineQuery],
        row: &mut Map<String, Value>,
    ) -> anyhow::Result<()> {
        let tv = &self.tantivy;
        bench::time_queries("tantivy", warm, queries, row, &mut |t| {
            Ok(tv.search(t, 10).map_err(anyhow::Error::msg)?.len())
        })?;
        let sq = &self.sqlite;
        bench::time_queries("sqlite", warm, queries, row, &mut |t| {
            Ok(sq.search(t, 10).map_err(anyhow::Error::msg)?.len())
        })
    }
}

fn main() -> ExitCode {
    let Cli::Bench(args) = Cli::parse();
    match bench::run_with(args, Some(&Engines)) {
        Ok(code) => code,
        Err(e) if output::closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soulmem-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}
