//! `soulctl forget`: delete memories matching a query, one by id, those about an
//! entity, or those created before a time.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `forget`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Delete what matches this query.
    query: Option<String>,
    /// Delete this one memory instead.
    #[arg(long, conflicts_with_all = ["query", "entity", "before"])]
    id: Option<String>,
    /// Forget an entity: its graph node and edges and the memories about it.
    #[arg(long, conflicts_with_all = ["query", "before"])]
    entity: Option<String>,
    /// Delete every memory created before this time (RFC 3339 or `YYYY-MM-DD`).
    #[arg(long, value_name = "TS", conflicts_with = "query")]
    before: Option<String>,
}

/// Runs `forget`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    if let Some(name) = &args.entity {
        let r = mem.forget_entity(name)?;
        outln!(
            "deleted {} memories, {} graph edges, {} nodes",
            r.deleted.len(),
            r.edges_removed,
            r.nodes_removed
        );
        for (layer, id) in &r.deleted {
            outln!("  {layer} {id}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(ts) = &args.before {
        let at = soulmem::model::time::parse_timestamp(ts).map_err(anyhow::Error::msg)?;
        let r = mem.forget_before(at)?;
        outln!("deleted {}", r.total());
        for (layer, id) in &r.deleted {
            outln!("  {layer} {id}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    match (args.query, args.id) {
        (_, Some(id)) => {
            let gone = mem.remove(&id)?;
            outln!("{}", if gone { "deleted 1" } else { "deleted 0 (no such id)" });
        }
        (Some(q), None) => {
            let r = mem.forget(&q)?;
            outln!("deleted {}", r.total());
            for (layer, id) in &r.deleted {
                outln!("  {layer} {id}");
            }
        }
        (None, None) => anyhow::bail!("give a query, --id, --entity or --before"),
    }
    Ok(ExitCode::SUCCESS)
}
