//! `soulctl stats`: counts per layer and domain, index sizes, file size.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also measure the space each table takes in the file, largest first (reads
    /// every page: seconds for a million memories).
    #[arg(long)]
    space: bool,
}

/// Runs `stats`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    let stats = mem.stats()?;
    let file_bytes = std::fs::metadata(&path)?.len();
    let space = if args.space {
        let pb = super::progress::spinner("measuring");
        let space = mem.table_space(|name| pb.set_message(name.to_owned()))?;
        pb.finish_and_clear();
        Some(space)
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::to_value(&stats)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("file_bytes".into(), file_bytes.into());
            if let Some(space) = &space {
                o.insert("tables".into(), serde_json::to_value(space)?);
            }
        }
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("store     {}", path.display());
    outln!("profile   {}", stats.profile);
    outln!("memories  {}", stats.memories);
    outln!("file      {file_bytes} bytes");
    for (layer, domains) in &stats.layers {
        for (domain, n) in domains {
            outln!("  {layer:<12} {domain:<12} {n:>10}");
        }
    }
    outln!("indexes");
    for (name, n) in &stats.index_rows {
        outln!("  {name:<16} {n:>12} rows");
    }
    outln!("corpus    {} docs, {} tokens", stats.corpus_docs, stats.corpus_tokens);
    outln!("graph     {} nodes, {} edges", stats.graph_nodes, stats.graph_edges);
    outln!("ingested  {} ops", stats.ingested_ops);
    if let Some(space) = &space {
        print_space(space, stats.memories, file_bytes)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The tables' space: pages, megabytes, bytes per memory and share of the file.
fn print_space(
    space: &[soulmem::TableSpace],
    memories: u64,
    file_bytes: u64,
) -> anyhow::Result<()> {
    outln!("space     (stored + bookkeeping + unused bytes in each table's pages)");
    outln!(
        "  {:<28} {:>12} {:>10} {:>10} {:>10} {:>7}",
        "table",
        "rows",
        "pages",
        "MB",
        "B/memory",
        "file %"
    );
    let per = |b: u64| if memories == 0 { 0.0 } else { b as f64 / memories as f64 };
    let share = |b: u64| if file_bytes == 0 { 0.0 } else { 100.0 * b as f64 / file_bytes as f64 };
    let line = |name: &str, rows: String, pages: String, b: u64| -> anyhow::Result<()> {
        outln!(
            "  {name:<28} {rows:>12} {pages:>10} {:>10.1} {:>10.1} {:>7.1}",
            b as f64 / 1e6,
            per(b),
            share(b)
        );
        Ok(())
    };
    for t in space {
        line(
            &t.name,
            t.rows.to_string(),
            (t.leaf_pages + t.branch_pages).to_string(),
            t.total_bytes(),
        )?;
    }
    let total = space.iter().map(soulmem::TableSpace::total_bytes).sum();
    line("all tables", String::new(), String::new(), total)
}
