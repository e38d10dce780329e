//! Soul directories: the flat (legacy) and nested (0.4.0) layouts (FORMAT.md §6).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::archive::MAX_MEMBER_BYTES;
use super::crypto;
use super::document::{Found, SoulDocument};
use super::dump::{ENTRY_TIERS, fmt_err, to_json};
use super::pyjson::Dialect;
use crate::model::MemoryEntry;
use crate::{Error, Result};

/// A directory layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirLayout {
    /// `memory/<tier>.json`; no custom layers.
    Flat,
    /// `memory/<layer>/<domain>/entries.json` plus `memory/_layout.json`.
    Nested,
}

/// The layout the reference's writer picks for this document: nested when a custom
/// layer has entries or a built-in entry has a domain other than `default`.
#[must_use]
pub fn choose_layout(doc: &SoulDocument) -> DirLayout {
    if doc.memory.needs_nested_layout() { DirLayout::Nested } else { DirLayout::Flat }
}

/// The directory name `Soul.save` uses under its base directory: the DID with `:`
/// replaced by `_`.
///
/// # Errors
/// When the DID is empty or contains `/`, `\` or `..`.
pub fn soul_dir_name(did: &str) -> Result<String> {
    if did.is_empty() || did.contains('/') || did.contains('\\') || did.contains("..") {
        return Err(Error::InvalidName {
            what: "did",
            name: did.to_owned(),
            reason: "must be non-empty and contain no '/', '\\' or '..'",
        });
    }
    Ok(did.replace(':', "_"))
}

fn read_capped(path: &Path, label: &str) -> Result<Vec<u8>> {
    let f = fs::File::open(path).map_err(|e| fmt_err(label, format!("cannot open: {e}")))?;
    let mut buf = Vec::new();
    f.take(MAX_MEMBER_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| fmt_err(label, format!("cannot read: {e}")))?;
    if buf.len() as u64 > MAX_MEMBER_BYTES {
        return Err(fmt_err(label, format!("larger than the {MAX_MEMBER_BYTES}-byte cap")));
    }
    Ok(buf)
}

fn read_opt(root: &Path, rel: &str) -> Result<Option<(String, Vec<u8>)>> {
    let p = root.join(rel);
    if p.is_file() { Ok(Some((rel.to_owned(), read_capped(&p, rel)?))) } else { Ok(None) }
}

fn sorted_subdirs(dir: &Path, label: &str) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| fmt_err(label, format!("cannot list: {e}")))?;
    for ent in rd {
        let ent = ent.map_err(|e| fmt_err(label, format!("cannot list: {e}")))?;
        let path = ent.path();
        if path.is_dir() {
            let name = ent
                .file_name()
                .into_string()
                .map_err(|n| fmt_err(label, format!("directory name {n:?} is not UTF-8")))?;
            out.push((name, path));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// `memory/<layer>/*/entries.json`, domain directories in sorted order.
fn nested_layer(root: &Path, layer: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = root.join("memory").join(layer);
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Ok(files);
    }
    for (domain, path) in sorted_subdirs(&dir, &format!("memory/{layer}"))? {
        let f = path.join("entries.json");
        if f.is_file() {
            let rel = format!("memory/{layer}/{domain}/entries.json");
            let b = read_capped(&f, &rel)?;
            files.push((rel, b));
        }
    }
    Ok(files)
}

/// Reads a soul directory (either layout), following the reference's loader.
///
/// Differences, for safety: a corrupt `entries.json` or `trust_chain/chain.json` is
/// an error (the reference skips it silently and loses its data), and so are
/// duplicate ids within a layer. `custom_layers.json` is never read from a
/// directory, as in the reference; `memory/archives.json` is read in both layouts.
///
/// # Errors
/// [`crate::Error::Format`] naming the file (or entry) and the problem.
pub fn read_dir(path: &Path) -> Result<SoulDocument> {
    let source = path.display().to_string();
    if !path.join("soul.json").is_file() {
        return Err(fmt_err(format!("{source}/soul.json"), "missing: not a soul directory"));
    }
    let mut found = Found {
        soul: read_opt(path, "soul.json")?,
        dna_md: read_opt(path, "dna.md")?.map(|x| x.1),
        state_json: read_opt(path, "state.json")?.map(|x| x.1),
        ..Found::default()
    };
    let mem = path.join("memory");
    if mem.is_dir() {
        found.core = read_opt(path, "memory/core.json")?;
        found.graph = read_opt(path, "memory/graph.json")?;
        found.self_model = read_opt(path, "memory/self_model.json")?;
        found.general_events = read_opt(path, "memory/general_events.json")?;
        found.archives = read_opt(path, "memory/archives.json")?;
        let marker = read_opt(path, "memory/_layout.json")?
            .and_then(|(_, b)| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v.get("layout").and_then(|l| l.as_str()) == Some("nested"));
        let nested = marker || ENTRY_TIERS.iter().any(|t| mem.join(t).is_dir());
        if nested {
            for (i, t) in ENTRY_TIERS.iter().enumerate() {
                found.tiers[i] = Some(nested_layer(path, t)?);
            }
            for (name, _) in sorted_subdirs(&mem, "memory")? {
                if !ENTRY_TIERS.contains(&name.as_str()) {
                    let files = nested_layer(path, &name)?;
                    found.custom_dirs.push((name, files));
                }
            }
        } else {
            for (i, t) in ENTRY_TIERS.iter().enumerate() {
                found.tiers[i] = read_opt(path, &format!("memory/{t}.json"))?.map(|x| vec![x]);
            }
        }
        found.any_memory_data = nested
            || found.core.is_some()
            || found.graph.is_some()
            || found.self_model.is_some()
            || found.general_events.is_some()
            || found.archives.is_some()
            || found.tiers.iter().any(Option::is_some);
    }
    found.chain = read_opt(path, "trust_chain/chain.json")?;
    if path.join("keys").is_dir() {
        found.public_key = read_opt(path, "keys/public.key")?.map(|x| x.1);
        found.private_key = read_opt(path, "keys/private.key")?.map(|x| x.1);
    }
    found.any_memory_data |=
        found.chain.is_some() || found.public_key.is_some() || found.private_key.is_some();
    found.assemble(&source)
}

fn check_component(what: &'static str, name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\\', '\0'])
        || name.as_bytes().get(1) == Some(&b':');
    if bad {
        return Err(Error::InvalidName {
            what,
            name: name.to_owned(),
            reason: "must be a single, non-empty path component (no '/', '\\', '.', '..')",
        });
    }
    Ok(())
}

fn group_by_domain(entries: &[MemoryEntry]) -> Result<IndexMap<&str, Vec<&MemoryEntry>>> {
    let mut g: IndexMap<&str, Vec<&MemoryEntry>> = IndexMap::new();
    for e in entries {
        let d = if e.domain.is_empty() { crate::DEFAULT_DOMAIN } else { e.domain.as_str() };
        check_component("domain", d)?;
        g.entry(d).or_default().push(e);
    }
    Ok(g)
}

/// The files of a directory in `layout`, as `(relative path, bytes)`.
fn dir_files(doc: &SoulDocument, layout: DirLayout) -> Result<Vec<(String, Vec<u8>)>> {
    let m = &doc.memory;
    let a = Dialect::Ascii;
    let mut out = doc.common_files()?;
    let mut push = |name: String, bytes: Vec<u8>| out.push((name, bytes));
    match layout {
        DirLayout::Flat => {
            if let Some((layer, _)) = m.custom_layers.iter().find(|(_, v)| !v.is_empty()) {
                return Err(fmt_err(
                    format!("memory/{layer}"),
                    "custom layers need the nested layout; the flat one cannot hold them",
                ));
            }
            push("memory/core.json".into(), to_json(&m.core, a, "memory/core.json")?);
            for t in ENTRY_TIERS {
                let name = format!("memory/{t}.json");
                let list = m.tier(t).map_or(&[][..], Vec::as_slice);
                let b = to_json(list, a, &name)?;
                push(name, b);
            }
            push("memory/graph.json".into(), to_json(&m.graph, a, "memory/graph.json")?);
            push(
                "memory/self_model.json".into(),
                to_json(&m.self_model, a, "memory/self_model.json")?,
            );
            push(
                "memory/general_events.json".into(),
                to_json(&m.general_events, a, "memory/general_events.json")?,
            );
            // Not written by the reference, but read by its loader in both layouts.
            if !m.archives.is_empty() {
                push(
                    "memory/archives.json".into(),
                    to_json(&m.archives, a, "memory/archives.json")?,
                );
            }
        }
        DirLayout::Nested => {
            push("memory/core.json".into(), to_json(&m.core, a, "memory/core.json")?);
            push("memory/graph.json".into(), to_json(&m.graph, a, "memory/graph.json")?);
            push(
                "memory/self_model.json".into(),
                to_json(&m.self_model, a, "memory/self_model.json")?,
            );
            push(
                "memory/general_events.json".into(),
                to_json(&m.general_events, a, "memory/general_events.json")?,
            );
            push("memory/archives.json".into(), to_json(&m.archives, a, "memory/archives.json")?);
            let builtin =
                ENTRY_TIERS.iter().map(|t| (*t, m.tier(t).map_or(&[][..], Vec::as_slice)));
            let custom = m.custom_layers.iter().map(|(k, v)| (k.as_str(), v.as_slice()));
            for (i, (layer, entries)) in builtin.chain(custom).enumerate() {
                if i >= ENTRY_TIERS.len() {
                    check_component("layer", layer)?;
                    if ENTRY_TIERS.contains(&layer) || layer.starts_with('_') {
                        return Err(Error::InvalidName {
                            what: "layer",
                            name: layer.to_owned(),
                            reason: "a custom layer cannot use a built-in tier name or start \
                                     with '_'",
                        });
                    }
                }
                for (domain, group) in group_by_domain(entries)? {
                    let name = format!("memory/{layer}/{domain}/entries.json");
                    let b = to_json(&group, a, &name)?;
                    push(name, b);
                }
            }
            push(
                "memory/_layout.json".into(),
                to_json(&serde_json::json!({"layout": "nested", "version": 1}), a, "_layout")?,
            );
        }
    }
    Ok(out)
}

/// Writes `doc` into the directory `path` (which becomes the soul, like
/// `Soul.save_local`) in the layout the reference would pick. Returns that layout.
///
/// # Errors
/// See [`write_dir_as`].
pub fn write_dir(path: &Path, doc: &SoulDocument) -> Result<DirLayout> {
    let layout = choose_layout(doc);
    write_dir_as(path, doc, layout)?;
    Ok(layout)
}

/// Writes `doc` into `path` in the given layout. Everything is first built in a
/// temporary directory next to `path`; then each top-level item replaces the one of
/// the same name in `path` (other items in `path` are left alone).
///
/// The flat layout also writes `memory/archives.json` when there are archives (the
/// reference's loader reads it in both layouts).
///
/// # Errors
/// Custom layers with the flat layout, layer or domain names that are not a single
/// safe path component (or a custom layer named like a built-in tier), I/O errors.
pub fn write_dir_as(path: &Path, doc: &SoulDocument, layout: DirLayout) -> Result<()> {
    let files = dir_files(doc, layout)?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(parent)?;
    let mut suffix = [0u8; 6];
    crypto::random_bytes(&mut suffix)?;
    let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = parent.join(format!(".soul-tmp-{hex}"));
    let result = (|| -> Result<()> {
        for (rel, bytes) in &files {
            let p = tmp.join(rel);
            if let Some(d) = p.parent() {
                fs::create_dir_all(d)?;
            }
            fs::write(&p, bytes)?;
        }
        fs::create_dir_all(path)?;
        for ent in fs::read_dir(&tmp)? {
            let ent = ent?;
            let dest = path.join(ent.file_name());
            if dest.is_dir() && !dest.is_symlink() {
                fs::remove_dir_all(&dest)?;
            } else if dest.symlink_metadata().is_ok() {
                fs::remove_file(&dest)?;
            }
            fs::rename(ent.path(), &dest)?;
        }
        Ok(())
    })();
    let _ = fs::remove_dir_all(&tmp);
    result
}
