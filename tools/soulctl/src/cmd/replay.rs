//! `soulctl replay`: the scenario format of `SCENARIO_FORMAT.md`.

use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use std::sync::Arc;

use soulmem::read::vector::HybridFusion;
use soulmem::replay::{ReplayOptions, Replayer};
use soulmem::{PrecomputedEmbedder, Profile};

/// Arguments of `replay`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scenario file (JSON Lines).
    scenario: PathBuf,
    /// Behaviour profile of the store.
    #[arg(long, default_value = "default", value_parser = super::parse_profile)]
    profile: Profile,
    /// Precomputed embeddings (JSON Lines of `{"text", "v"}`) for hybrid recall.
    #[arg(long, value_name = "FILE")]
    embeddings: Option<PathBuf>,
    /// Weight of vector similarity in hybrid recall, 0 to 1 (with --embeddings).
    #[arg(long, value_name = "LAMBDA", requires = "embeddings")]
    hybrid_weight: Option<f64>,
    /// Hybrid fusion: `rrf` (default) or `minmax` (with --embeddings).
    #[arg(long, value_name = "KIND", requires = "embeddings", value_parser = parse_fusion)]
    hybrid_fusion: Option<HybridFusion>,
    /// Vector candidates merged per recall (with --embeddings).
    #[arg(long, value_name = "N", requires = "embeddings")]
    vector_candidates: Option<usize>,
}

fn parse_fusion(s: &str) -> Result<HybridFusion, String> {
    HybridFusion::parse(s).ok_or_else(|| format!("unknown fusion {s:?} (rrf, minmax)"))
}

/// Runs `replay`: an in-memory store unless `--db` is given.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let file = std::fs::File::open(&args.scenario)
        .with_context(|| format!("opening {}", args.scenario.display()))?;
    let embedder: Option<Arc<dyn soulmem::Embedder>> = match &args.embeddings {
        Some(p) => Some(Arc::new(
            PrecomputedEmbedder::from_jsonl(p)
                .with_context(|| format!("reading embeddings {}", p.display()))?,
        )),
        None => None,
    };
    let opts = ReplayOptions {
        embedder,
        hybrid_weight: args.hybrid_weight,
        hybrid_fusion: args.hybrid_fusion,
        vector_candidates: args.vector_candidates,
    };
    let replayer = match db {
        Some(p) => Replayer::open_with(&p, args.profile, &opts)?,
        None => Replayer::in_memory_with(args.profile, &opts)?,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let stats = replayer.run(BufReader::new(file), &mut out)?;
    eprintln!("replayed {} ops, {} errors", stats.ops, stats.errors);
    Ok(ExitCode::SUCCESS)
}
