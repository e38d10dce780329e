//! `soulctl reindex`: rebuild every index from the entries, in one transaction.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `reindex`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `reindex`.
pub fn run(db: Option<PathBuf>, _args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    let before = std::fs::metadata(&path)?.len();
    let start = Instant::now();
    let pb = super::progress::bar(mem.count()?, "reindexing");
    let report = mem.reindex(|n| pb.set_position(n))?;
    pb.finish_and_clear();
    outln!(
        "reindexed {} entries from {} tables in {:.2} s",
        report.entries,
        report.tables,
        start.elapsed().as_secs_f64()
    );
    for p in &report.problems {
        outln!("  warning: {p}");
    }
    drop(mem);
    // The old index pages are free inside the file, which does not shrink.
    let after = std::fs::metadata(&path)?.len();
    if after > before {
        outln!(
            "the file grew from {before} to {after} bytes; `soulctl --db {} compact` gives the space back",
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
