//! `soulctl check`: verify every index against the entries.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `check`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `check`: exit status 1 when anything is wrong.
pub fn run(db: Option<PathBuf>, _args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    let start = Instant::now();
    // Entries read, then index rows compared.
    let work = mem.count()? + mem.stats()?.index_rows.values().sum::<u64>();
    let pb = super::progress::bar(work, "checking");
    let report = mem.check(|n| pb.set_position(n))?;
    pb.finish_and_clear();
    outln!(
        "{}: {} entries, {} index rows checked in {:.2} s",
        path.display(),
        report.entries,
        report.rows,
        start.elapsed().as_secs_f64()
    );
    if report.is_ok() {
        outln!("ok: every index matches the entries");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} problems:", report.problems.len());
    for p in &report.problems {
        outln!("  {p}");
    }
    outln!("run `soulctl reindex --db {}` to rebuild the indexes", path.display());
    Ok(ExitCode::from(1))
}
