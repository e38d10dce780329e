//! soulctl: operate soulmem stores from the shell. One module per subcommand.

#[macro_use]
mod output;

mod cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// With the `jemalloc` feature, jemalloc instead of the system allocator: with
/// glibc's malloc, allocation took about a quarter of a batched ingest's CPU at
/// 1M memories (perf: `_int_malloc`, `malloc_consolidate`, `unlink_chunk`,
/// `_int_free`); with jemalloc the same ingest runs 15–20% faster at the same
/// recall latency (PERFORMANCE.md, session 32).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Operate soulmem stores.
#[derive(Parser, Debug)]
#[command(name = "soulctl", version, about)]
struct Cli {
    /// The store file (created when missing).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmarks: `bench scale` builds synthetic stores and measures them.
    Bench(cmd::bench::Args),
    /// Store a short built-in conversation in ./soulmem-demo.redb and show what it remembers.
    Demo(cmd::demo::Args),
    /// Counts per layer and domain, index sizes and file size.
    Stats(cmd::stats::Args),
    /// Replay a scenario (JSON Lines) and print one result line per op.
    Replay(cmd::replay::Args),
    /// Observe one exchange and print the report as JSON.
    Observe(cmd::observe::Args),
    /// Recall memories for a query (with --explain for the trace).
    Recall(cmd::recall::Args),
    /// Store one memory directly.
    Remember(cmd::remember::Args),
    /// Delete memories matching a query, or one by id.
    Forget(cmd::forget::Args),
    /// Write the store out as a .soul archive, a soul directory or a memory JSON dump.
    Dump(cmd::dump::Args),
    /// Load a .soul archive, a soul directory or a memory JSON dump into the store.
    Restore(cmd::restore::Args),
    /// Apply the observe and remember ops of a scenario file in batches (resumable).
    Ingest(cmd::ingest::Args),
    /// Verify every index against the entries (exit status 1 on any mismatch).
    Check(cmd::check::Args),
    /// Rebuild every index from the entries.
    Reindex(cmd::reindex::Args),
    /// Rewrite the index tables in key order and shrink the file (the store must be closed).
    Compact(cmd::compact::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let db = cli.db;
    let result = match cli.command {
        Command::Bench(a) => cmd::bench::run(db, a),
        Command::Demo(a) => cmd::demo::run(db, a),
        Command::Stats(a) => cmd::stats::run(db, a),
        Command::Replay(a) => cmd::replay::run(db, a),
        Command::Observe(a) => cmd::observe::run(db, a),
        Command::Recall(a) => cmd::recall::run(db, a),
        Command::Remember(a) => cmd::remember::run(db, a),
        Command::Forget(a) => cmd::forget::run(db, a),
        Command::Dump(a) => cmd::dump::run(db, a),
        Command::Restore(a) => cmd::restore::run(db, a),
        Command::Ingest(a) => cmd::ingest::run(db, a),
        Command::Check(a) => cmd::check::run(db, a),
        Command::Reindex(a) => cmd::reindex::run(db, a),
        Command::Compact(a) => cmd::compact::run(db, a),
    };
    match result {
        Ok(code) => code,
        Err(e) if output::closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soulctl: {e:#}");
            ExitCode::from(2)
        }
    }
}
