//! `soulctl forget`: delete memories matching a query, or one by id.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `forget`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Delete what matches this query.
    query: Option<String>,
    /// Delete this one memory instead.
    #[arg(long, conflicts_with = "query")]
    id: Option<String>,
}

/// Runs `forget`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    match (args.query, args.id) {
        (_, Some(id)) => {
            let gone = mem.remove(&id)?;
            println!("{}", if gone { "deleted 1" } else { "deleted 0 (no such id)" });
        }
        (Some(q), None) => {
            let r = mem.forget(&q)?;
            println!("deleted {}", r.total());
            for (layer, id) in &r.deleted {
                println!("  {layer} {id}");
            }
        }
        (None, None) => anyhow::bail!("give a query or --id"),
    }
    Ok(ExitCode::SUCCESS)
}
