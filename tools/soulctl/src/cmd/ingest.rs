//! `soulctl ingest`: apply the `observe` and `remember` ops of a scenario file in
//! batches, one transaction per batch, synced every `--sync-every` batches and at
//! the end; resumable from the last synced batch. The postings tail the batches
//! leave is merged at the end.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use soulmem::ingest::{IngestOp, parse_op};
use soulmem::{Durability, Memory, Profile};

/// Arguments of `ingest`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scenario file (JSON Lines, SCENARIO_FORMAT.md).
    file: PathBuf,
    /// Ops per write transaction.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
    /// Behaviour profile of a new store (an existing store keeps its own).
    #[arg(long, default_value = "default", value_parser = super::parse_profile)]
    profile: Profile,
    /// Skip the ops a previous ingest of this file committed (the store's
    /// ingested-ops counter) and go on from there.
    #[arg(long)]
    resume: bool,
    /// Ingest from the first op even though the store has ingested ops before (e.g.
    /// another file).
    #[arg(long, conflicts_with = "resume")]
    append: bool,
    /// Sync every N batches (and after the last): the batches between are committed
    /// without a sync, saving each its fsync. A crash loses at most the batches
    /// since the last sync, whole, and `--resume` redoes them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    sync_every: u64,
}

fn open_file(args: &Args) -> anyhow::Result<impl Iterator<Item = std::io::Result<String>>> {
    let f = std::fs::File::open(&args.file)
        .with_context(|| format!("opening {}", args.file.display()))?;
    Ok(BufReader::new(f).lines().filter(|l| l.as_ref().map_or(true, |s| !s.trim().is_empty())))
}

/// Runs `ingest`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let start = Instant::now();
    let total = open_file(&args)?.count() as u64;
    let mem = Memory::builder()
        .profile(args.profile)
        .prewarm(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    if mem.profile() != args.profile {
        eprintln!(
            "note: the store's profile is {}, not {}",
            mem.profile().as_str(),
            args.profile.as_str()
        );
    }
    let done = mem.ingested_ops()?;
    let skip = if args.resume {
        anyhow::ensure!(
            done <= total,
            "the store has {done} ingested ops but {} has only {total}",
            args.file.display()
        );
        done
    } else {
        anyhow::ensure!(
            done == 0 || args.append,
            "the store has {done} ingested ops already: use --resume to go on with the same \
             file, or --append to ingest this one from its start"
        );
        0
    };
    let base = done - skip;
    let pb = super::progress::bar(total, "ingesting");
    pb.set_position(skip);
    let mut applied: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
    let mut invalid = 0u64;
    let mut batch: Vec<IngestOp> = Vec::with_capacity(args.batch as usize);
    let mut consumed = skip;
    // Batches committed since the last sync.
    let mut unsynced = 0u64;
    // Commits `batch`, synced when it is the `--sync-every`th since the last sync or
    // `last`; prints `committed K` for each synced one (K ops of this file durable).
    let mut commit = |batch: &mut Vec<IngestOp>, consumed: u64, last: bool| -> anyhow::Result<()> {
        if batch.is_empty() {
            if last && unsynced > 0 {
                mem.sync()?;
                pb.suspend(|| -> anyhow::Result<()> {
                    outln!("committed {consumed}");
                    Ok(())
                })?;
            }
            return Ok(());
        }
        unsynced += 1;
        let sync = last || unsynced >= args.sync_every;
        let durability = if sync { Durability::Immediate } else { Durability::Deferred };
        let k = mem.ingest_batch_with(batch, durability)?;
        batch.clear();
        debug_assert_eq!(k, base + consumed);
        pb.set_position(consumed);
        if sync {
            unsynced = 0;
            pb.suspend(|| -> anyhow::Result<()> {
                outln!("committed {}", k - base);
                Ok(())
            })?;
        }
        Ok(())
    };
    for (i, line) in open_file(&args)?.enumerate().skip(skip as usize) {
        let line = line.with_context(|| format!("reading {}", args.file.display()))?;
        let op = match parse_op(&line) {
            Ok(op) => op,
            Err(e) => {
                invalid += 1;
                pb.suspend(|| eprintln!("op {}: skipped: {e}", i + 1));
                IngestOp::Skip { op: "invalid".into() }
            }
        };
        match &op {
            IngestOp::Observe { .. } => *applied.entry("observe").or_default() += 1,
            IngestOp::Remember { .. } => *applied.entry("remember").or_default() += 1,
            IngestOp::Skip { op } if op != "invalid" => {
                *skipped.entry(op.clone()).or_default() += 1
            }
            IngestOp::Skip { .. } => {}
        }
        batch.push(op);
        consumed += 1;
        if batch.len() as u64 >= args.batch {
            commit(&mut batch, consumed, false)?;
        }
    }
    commit(&mut batch, consumed, true)?;
    pb.finish_and_clear();
    super::merge_postings_tail(&mem);
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "ingested {} ops of {} ({} resumed past) in {secs:.2} s: applied {:?}, skipped {:?}, \
         invalid {invalid}; store counter {}",
        consumed - skip,
        total,
        skip,
        applied,
        skipped,
        mem.ingested_ops()?
    );
    Ok(ExitCode::SUCCESS)
}
