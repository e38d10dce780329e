//! `soulctl dump`: write a store out as a `.soul` archive, a soul directory or a
//! `to_dict()` JSON file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use soulmem::formats::{self, WriteOptions};

/// Output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A `.soul` zip archive (optionally password-encrypted).
    Soul,
    /// A soul directory (the layout the reference would pick).
    Dir,
    /// `MemoryManager.to_dict()` JSON: the memory only, no soul around it.
    Json,
}

/// Arguments of `dump`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to write (a file for soul and json, a directory for dir).
    #[arg(long)]
    out: PathBuf,
    /// Output format (default: from --out: `.soul` → soul, `.json` → json, else dir).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Encrypt the archive with the password in this environment variable.
    #[arg(long, value_name = "VAR")]
    password_env: Option<String>,
    /// Encrypt the archive with a password typed at a prompt.
    #[arg(long)]
    encrypt: bool,
}

fn infer(out: &Path) -> Format {
    match out.extension().and_then(|e| e.to_str()) {
        Some("soul") => Format::Soul,
        Some("json") => Format::Json,
        _ => Format::Dir,
    }
}

/// Runs `dump`.
pub fn run(db: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let path = super::require_db(db)?;
    let format = args.format.unwrap_or_else(|| infer(&args.out));
    let wants_password = args.password_env.is_some() || args.encrypt;
    anyhow::ensure!(
        !wants_password || format == Format::Soul,
        "only the soul format can be encrypted"
    );
    let password = if wants_password {
        let p = super::progress::password(
            args.password_env.as_deref(),
            "Password for the archive: ",
            true,
        )?;
        Some(p.context(
            "--encrypt needs a terminal to ask for the password (or use --password-env)",
        )?)
    } else {
        None
    };
    let mem = super::open_existing(&path)?;
    let start = Instant::now();
    let total = mem.count()?;
    let pb = super::progress::bar(total, "reading");
    let mut tick = |n: u64| pb.set_position(n);
    let written = match format {
        Format::Json => {
            let dump = mem.export_dump(&mut tick)?;
            pb.finish_and_clear();
            let sp = super::progress::spinner("writing");
            formats::write_memory_json(&args.out, &dump)
                .with_context(|| format!("writing {}", args.out.display()))?;
            sp.finish_and_clear();
            dump.entry_count()
        }
        Format::Soul | Format::Dir => {
            let doc = mem.export_document_with(&mut tick)?;
            pb.finish_and_clear();
            let sp = super::progress::spinner("writing");
            if format == Format::Soul {
                let opts = WriteOptions { password, ..WriteOptions::default() };
                formats::write_soul_file(&args.out, &doc, &opts)
            } else {
                formats::write_dir(&args.out, &doc).map(|_| ())
            }
            .with_context(|| format!("writing {}", args.out.display()))?;
            sp.finish_and_clear();
            doc.memory.entry_count()
        }
    };
    eprintln!(
        "dumped {written} memories from {} to {} ({format:?}) in {:.2} s",
        path.display(),
        args.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
