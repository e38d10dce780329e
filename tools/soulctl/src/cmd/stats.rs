//! `soulctl stats`: counts per layer and domain, index sizes, file size.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `stats`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    let stats = mem.stats()?;
    let file_bytes = std::fs::metadata(&path)?.len();
    if args.json {
        let mut v = serde_json::to_value(&stats)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("file_bytes".into(), file_bytes.into());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("store     {}", path.display());
    println!("profile   {}", stats.profile);
    println!("memories  {}", stats.memories);
    println!("file      {file_bytes} bytes");
    for (layer, domains) in &stats.layers {
        for (domain, n) in domains {
            println!("  {layer:<12} {domain:<12} {n:>10}");
        }
    }
    println!("indexes");
    for (name, n) in &stats.index_rows {
        println!("  {name:<16} {n:>12} rows");
    }
    println!("corpus    {} docs, {} tokens", stats.corpus_docs, stats.corpus_tokens);
    println!("graph     {} nodes, {} edges", stats.graph_nodes, stats.graph_edges);
    println!("ingested  {} ops", stats.ingested_ops);
    Ok(ExitCode::SUCCESS)
}
