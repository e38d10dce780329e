//! `soulctl remember`: store one memory directly.

use std::path::PathBuf;
use std::process::ExitCode;

use soulmem::{Remember, Visibility};

/// Arguments of `remember`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The text.
    content: String,
    /// The layer (episodic, semantic, procedural, social, or a custom layer).
    #[arg(long, default_value = "semantic")]
    layer: String,
    /// Importance 1..=10.
    #[arg(long, default_value_t = 5)]
    importance: u8,
    /// Owner.
    #[arg(long)]
    user_id: Option<String>,
    /// Domain.
    #[arg(long, default_value = "default")]
    domain: String,
    /// public, bonded or private.
    #[arg(long, default_value = "bonded")]
    visibility: String,
    /// Entities (comma-separated).
    #[arg(long, value_delimiter = ',')]
    entities: Vec<String>,
}

/// Runs `remember`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let mem = super::open_for_command(&super::require_db(db)?)?;
    let visibility = Visibility::parse(&args.visibility)
        .ok_or_else(|| anyhow::anyhow!("unknown visibility {:?}", args.visibility))?;
    let req = Remember {
        layer: args.layer,
        content: args.content,
        importance: args.importance,
        user_id: args.user_id,
        domain: args.domain,
        visibility,
        entities: args.entities,
    };
    outln!("{}", mem.remember(&req)?);
    Ok(ExitCode::SUCCESS)
}
