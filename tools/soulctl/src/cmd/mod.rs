//! One module per subcommand, each with its `Args` and a `run`.

pub mod bench;
pub mod check;
pub mod compact;
pub mod demo;
pub mod dump;
pub mod forget;
pub mod ingest;
pub mod observe;
pub mod progress;
pub mod recall;
pub mod reindex;
pub mod remember;
pub mod replay;
pub mod restore;
pub mod stats;

use std::path::{Path, PathBuf};

use anyhow::Context;
use soulmem::{Memory, Profile};

/// Parses a `--profile` value.
pub fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::parse(s).ok_or_else(|| format!("unknown profile {s:?} (use default or reference)"))
}

/// The `--db` path, or an error saying it is needed.
pub fn require_db(db: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    db.context("this command needs --db PATH")
}

/// Opens (or creates) a store for one command: without the prewarm a
/// long-running process wants.
pub fn open_for_command(path: &Path) -> anyhow::Result<Memory> {
    Memory::builder()
        .prewarm(false)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// Opens an existing store (refusing to create one), for one command.
pub fn open_existing(path: &Path) -> anyhow::Result<Memory> {
    anyhow::ensure!(path.exists(), "no store at {}", path.display());
    open_for_command(path)
}
