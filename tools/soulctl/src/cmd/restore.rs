//! `soulctl restore`: load a `.soul` archive, a soul directory or a `to_dict()` JSON
//! file into a store, in one transaction.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use soulmem::formats::{self, MemoryDump, SoulDocument};
use soulmem::{ImportReport, Memory};

/// Arguments of `restore`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A soul directory, a `.soul` archive or a `.json` memory dump.
    input: PathBuf,
    /// Replace what the store holds (in the same transaction: a failure keeps it).
    #[arg(long)]
    replace: bool,
    /// Read the archive's password from this environment variable (else a prompt,
    /// when stdin is a terminal).
    #[arg(long, value_name = "VAR")]
    password_env: Option<String>,
    /// redb page cache for the restore, in MiB: a cache smaller than the store
    /// makes a big restore re-read pages it wrote.
    #[arg(long, default_value_t = 4096)]
    cache_mb: usize,
}

enum Input {
    Soul(Box<SoulDocument>),
    Dump(Box<MemoryDump>),
}

fn read_input(path: &Path, password_env: Option<&str>) -> anyhow::Result<Input> {
    if path.is_dir() {
        return Ok(Input::Soul(Box::new(formats::read_dir(path)?)));
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("soul") => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let password = if formats::soul_is_encrypted(&bytes)? {
                let p =
                    super::progress::password(password_env, "Password of the archive: ", false)?;
                Some(p.context(
                    "the archive is encrypted: give --password-env VAR or run in a terminal",
                )?)
            } else {
                None
            };
            let sp = super::progress::spinner("reading");
            let doc = formats::read_soul(&bytes, password.as_deref());
            sp.finish_and_clear();
            Ok(Input::Soul(Box::new(doc?)))
        }
        Some("json") => {
            let sp = super::progress::spinner("reading");
            let dump = formats::read_memory_json(path);
            sp.finish_and_clear();
            Ok(Input::Dump(Box::new(dump?)))
        }
        _ => anyhow::bail!(
            "{}: not a directory, a .soul archive or a .json memory dump",
            path.display()
        ),
    }
}

/// Runs `restore`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let start = Instant::now();
    // Parse everything before the store is touched.
    let input = read_input(&args.input, args.password_env.as_deref())
        .with_context(|| format!("reading {}", args.input.display()))?;
    let read_secs = start.elapsed().as_secs_f64();
    let existed = path.exists();
    let result = (|| -> anyhow::Result<ImportReport> {
        let mem = Memory::builder()
            .cache_bytes(args.cache_mb << 20)
            .prewarm(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let total = match &input {
            Input::Soul(d) => d.memory.entry_count(),
            Input::Dump(d) => d.entry_count(),
        };
        let pb = super::progress::bar(total as u64, "restoring");
        let mut tick = |n: u64| pb.set_position(n);
        let rep = match &input {
            Input::Soul(d) => mem.import_document_with(d, args.replace, &mut tick),
            Input::Dump(d) => mem.import_dump(d, args.replace, &mut tick),
        };
        pb.finish_and_clear();
        let rep = rep?;
        super::merge_postings_tail(&mem);
        Ok(rep)
    })();
    let rep = match result {
        Ok(r) => r,
        Err(e) => {
            if !existed {
                // Leave no empty store behind for a failed first restore.
                let _ = soulmem::storage::remove_store(&path);
            }
            return Err(e);
        }
    };
    let layers: Vec<String> = rep.layers.iter().map(|(l, n)| format!("{l} {n}")).collect();
    eprintln!(
        "restored {} memories ({}), {} graph nodes, {} edges, {} general events, {} archives \
         into {} in {:.2} s (reading {read_secs:.2} s){}",
        rep.entries,
        layers.join(", "),
        rep.graph_nodes,
        rep.graph_edges,
        rep.general_events,
        rep.archives,
        path.display(),
        start.elapsed().as_secs_f64(),
        if args.replace { format!(" (replaced {} memories)", rep.replaced) } else { String::new() }
    );
    if rep.relayered > 0 {
        eprintln!(
            "note: {} entries named another layer than their list; stored in the list's",
            rep.relayered
        );
    }
    if rep.fresh_ids > 0 {
        eprintln!("note: {} entries had an empty id and got a fresh one", rep.fresh_ids);
    }
    Ok(ExitCode::SUCCESS)
}
