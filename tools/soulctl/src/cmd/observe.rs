//! `soulctl observe`: run one exchange through the write pipeline, print the report.

use std::path::PathBuf;
use std::process::ExitCode;

use soulmem::write::observe::ObserveOptions;

/// Arguments of `observe`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What the user said.
    #[arg(long)]
    user: String,
    /// What the agent answered.
    #[arg(long, default_value = "")]
    agent: String,
    /// The user's id.
    #[arg(long)]
    user_id: Option<String>,
    /// The domain.
    #[arg(long, default_value = "default")]
    domain: String,
}

/// Runs `observe`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let mem = super::open_for_command(&super::require_db(db)?)?;
    let opts = ObserveOptions { user_id: args.user_id, domain: args.domain };
    let report = mem.observe_pair(&args.user, &args.agent, &opts)?;
    outln!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}
