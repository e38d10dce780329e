//! `soulctl compact`: rewrite the index tables in key order and shrink the file
//! (the store must be closed).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `compact`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `compact`.
pub fn run(db: Option<PathBuf>, _args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let start = Instant::now();
    let pb = super::progress::spinner("compacting");
    let report = soulmem::storage::compact::compact_store(&path, |step| {
        pb.set_message(step.to_owned());
    })?;
    pb.finish_and_clear();
    let mb = |b: u64| b as f64 / 1e6;
    outln!(
        "compacted {}: {} tables ({} rows) rewritten in key order; file {:.1} MB -> {:.1} MB in {:.2} s",
        path.display(),
        report.tables,
        report.rows,
        mb(report.bytes_before),
        mb(report.bytes_after),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
