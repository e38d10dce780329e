//! `soulctl replay`: the scenario format of `SCENARIO_FORMAT.md`.

use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use soulmem::Profile;
use soulmem::replay::Replayer;

/// Arguments of `replay`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scenario file (JSON Lines).
    scenario: PathBuf,
    /// Behaviour profile of the store.
    #[arg(long, default_value = "default", value_parser = super::parse_profile)]
    profile: Profile,
}

/// Runs `replay`: an in-memory store unless `--db` is given.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let file = std::fs::File::open(&args.scenario)
        .with_context(|| format!("opening {}", args.scenario.display()))?;
    let replayer = match db {
        Some(p) => Replayer::open(&p, args.profile)?,
        None => Replayer::in_memory(args.profile)?,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let stats = replayer.run(BufReader::new(file), &mut out)?;
    eprintln!("replayed {} ops, {} errors", stats.ops, stats.errors);
    Ok(ExitCode::SUCCESS)
}
