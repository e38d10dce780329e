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

/// Ends a bulk load (`ingest`, `restore`): the postings tail its last batches
/// left is merged into the blocks, in one durable transaction, so that neither
/// the next process to open the store indexes it nor a later write pays for the
/// merge (a store kept open merges a long tail once idle, but commands that run
/// for less than a second never are). What the load committed stays whatever
/// happens here: a failed merge leaves the tail as it was, with a warning.
pub fn merge_postings_tail(mem: &Memory) {
    // Nothing is written when the tail is empty.
    let sp = progress::spinner("merging");
    let merged = mem.merge_postings_tail();
    sp.finish_and_clear();
    if let Err(e) = merged {
        eprintln!("warning: the postings tail was not merged (it stays, searched as before): {e}");
    }
}
