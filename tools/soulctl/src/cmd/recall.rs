//! `soulctl recall`: what the store recalls for a query, optionally with the trace.

use std::path::PathBuf;
use std::process::ExitCode;

use soulmem::RecallQuery;

/// Arguments of `recall`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The query.
    query: String,
    /// How many memories.
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Only these tiers (comma-separated).
    #[arg(long, value_delimiter = ',')]
    types: Option<Vec<String>>,
    /// Only this layer.
    #[arg(long)]
    layer: Option<String>,
    /// Only this domain.
    #[arg(long)]
    domain: Option<String>,
    /// Only this user's memories (plus unattributed ones).
    #[arg(long)]
    user_id: Option<String>,
    /// Minimum importance.
    #[arg(long, default_value_t = 0)]
    min_importance: i32,
    /// Who is asking (omit for the soul itself).
    #[arg(long)]
    requester: Option<String>,
    /// The requester's bond strength.
    #[arg(long, default_value_t = 100.0)]
    bond: f64,
    /// The requester's scopes (comma-separated globs).
    #[arg(long, value_delimiter = ',')]
    scopes: Option<Vec<String>>,
    /// Show every candidate and why it was kept or dropped.
    #[arg(long)]
    explain: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `recall`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let mem = super::open_existing(&path)?;
    let mut q = RecallQuery::new(args.query);
    q.limit = args.limit;
    q.types = args.types;
    q.layer = args.layer;
    q.domain = args.domain;
    q.user_id = args.user_id;
    q.min_importance = args.min_importance;
    q.requester_id = args.requester;
    q.bond_strength = args.bond;
    q.scopes = args.scopes;
    q.explain = args.explain;
    let res = mem.recall(&q)?;
    if args.json {
        let v = serde_json::json!({
            "results": res.memories,
            "scores": res.scores,
            "trace": res.trace,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (i, (m, s)) in res.memories.iter().zip(&res.scores).enumerate() {
        outln!(
            "{:>2}. {s:>7.3}  [{}:{}] {}",
            i + 1,
            m.layer,
            m.domain,
            m.content.replace('\n', " / ")
        );
    }
    if args.explain {
        outln!(
            "\nterms: {}",
            res.trace
                .terms
                .iter()
                .map(|(t, idf)| format!("{t} (idf {idf:.2})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (e, rel) in &res.trace.graph {
            outln!("graph: {e} -> {}", rel.join(", "));
        }
        outln!("postings read: {}", res.trace.postings_read);
        for c in &res.trace.candidates {
            match (&c.dropped_by, &c.score) {
                (Some(why), Some(s)) => {
                    outln!("  {} {:<12} total {:.3} not returned ({why})", c.id, c.source, s.total)
                }
                (Some(why), None) => {
                    outln!("  {} {:<12} dropped by filter {why}", c.id, c.source)
                }
                (None, Some(s)) => outln!(
                    "  {} {:<12} rank {} total {:.3} = base {:.3} + 2*spread {:.3} + 0.5*emotion {:.3} + sig {:.3} + sal {:.3} + pers {:.3} (bm25 {:.2})",
                    c.id,
                    c.source,
                    c.rank.unwrap_or(0) + 1,
                    s.total,
                    s.base,
                    s.spread,
                    s.emotion,
                    s.significance,
                    s.salience,
                    s.personality,
                    c.bm25
                ),
                (None, None) => {
                    outln!("  {} {:<12} rank {}", c.id, c.source, c.rank.unwrap_or(0) + 1)
                }
            }
            if !c.content_terms.is_empty() || !c.context_terms.is_empty() {
                outln!(
                    "      matched in content: [{}]; only in conversation context: [{}]",
                    c.content_terms.join(", "),
                    c.context_terms.join(", ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
