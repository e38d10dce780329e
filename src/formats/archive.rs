//! The `.soul` zip archive, plain or password-encrypted (FORMAT.md §2, §4, §5).

use std::collections::HashMap;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use super::crypto::{self, Decryptor, SALT_LEN};
use super::document::{Found, SoulDocument, truthy};
use super::dump::{ENTRY_TIERS, fmt_err, parse_json, to_json};
use super::pyjson::Dialect;
use crate::Result;
use crate::model::time::Timestamp;

/// The largest uncompressed member accepted (256 MiB); checked on the bytes actually
/// decompressed, not on the header.
pub const MAX_MEMBER_BYTES: u64 = 256 << 20;

/// The most members an archive may have.
pub const MAX_MEMBERS: usize = 100_000;

/// The largest `.soul` file [`read_soul_file`] opens (1 GiB).
pub const MAX_ARCHIVE_BYTES: u64 = 1 << 30;

/// How to write an archive.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Encrypt every member but the manifest with this password.
    pub password: Option<String>,
    /// The manifest's `exported` time and the members' mtime (default: now, UTC
    /// wall-clock).
    pub exported: Option<Timestamp>,
    /// Derive a fresh scrypt salt and key for every member, as the reference does
    /// (about 0.3 s per member). By default one random salt and key serve the whole
    /// archive, with a fresh random nonce per member: the reference reads both.
    pub salt_per_member: bool,
}

const ARCHIVE: &str = "archive";

/// Rejects member names that could escape an extraction directory.
fn check_member_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name.starts_with('/')
        || name.starts_with('\\')
        || name.contains('\0')
        || name.as_bytes().get(1) == Some(&b':')
        || name.split(['/', '\\']).any(|c| c == "..");
    if bad {
        Err(fmt_err(name, "member name escapes the archive (absolute path or `..`)"))
    } else {
        Ok(())
    }
}

struct Zip<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    index: HashMap<String, usize>,
}

impl<'a> Zip<'a> {
    fn open(bytes: &'a [u8]) -> Result<Self> {
        let mut zip = ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| fmt_err(ARCHIVE, format!("not a readable zip archive: {e}")))?;
        if zip.len() > MAX_MEMBERS {
            return Err(fmt_err(ARCHIVE, format!("{} members, over {MAX_MEMBERS}", zip.len())));
        }
        let mut index = HashMap::new();
        for i in 0..zip.len() {
            let f = zip
                .by_index_raw(i)
                .map_err(|e| fmt_err(ARCHIVE, format!("unreadable member #{i}: {e}")))?;
            let name = f.name().to_owned();
            check_member_name(&name)?;
            if f.size() > MAX_MEMBER_BYTES {
                return Err(fmt_err(
                    name,
                    format!(
                        "uncompressed size {} exceeds the {MAX_MEMBER_BYTES}-byte cap",
                        f.size()
                    ),
                ));
            }
            if !f.is_dir() {
                index.insert(name, i);
            }
        }
        Ok(Self { zip, index })
    }

    fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        let Some(&i) = self.index.get(name) else { return Ok(None) };
        let f = self.zip.by_index(i).map_err(|e| fmt_err(name, format!("cannot open: {e}")))?;
        let mut buf = Vec::new();
        f.take(MAX_MEMBER_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(|e| fmt_err(name, format!("cannot decompress: {e}")))?;
        if buf.len() as u64 > MAX_MEMBER_BYTES {
            return Err(fmt_err(
                name,
                format!("decompresses to more than {MAX_MEMBER_BYTES} bytes (zip bomb?)"),
            ));
        }
        Ok(Some(buf))
    }
}

/// Every member the loader reads, by plain name.
const KNOWN: [&str; 17] = [
    "soul.json",
    "dna.md",
    "state.json",
    "memory/core.json",
    "memory/episodic.json",
    "memory/semantic.json",
    "memory/procedural.json",
    "memory/social.json",
    "memory/graph.json",
    "memory/self_model.json",
    "memory/general_events.json",
    "memory/custom_layers.json",
    "memory/archives.json",
    "trust_chain/chain.json",
    "keys/public.key",
    "keys/private.key",
    "manifest.json",
];

/// Reads a `.soul` archive from memory. `password` is needed when the manifest says
/// `encrypted` and ignored otherwise.
///
/// Beyond the reference's rules (FORMAT.md §5) this refuses: member names with `..`
/// or an absolute path, members that decompress to more than [`MAX_MEMBER_BYTES`],
/// plaintext members in an encrypted archive, and duplicate ids within a layer.
///
/// # Errors
/// [`crate::Error::Format`] naming the member (or entry) and the problem.
pub fn read_soul(bytes: &[u8], password: Option<&str>) -> Result<SoulDocument> {
    let mut zip = Zip::open(bytes)?;
    let mut found = Found::default();

    let mut encrypted = false;
    let mut soul_name = String::new();
    if let Some(m) = zip.read("manifest.json")? {
        let v = parse_json("manifest.json", &m)?;
        encrypted = v.get("encrypted").is_some_and(truthy);
        soul_name = v.get("soul_name").and_then(|n| n.as_str()).unwrap_or("").to_owned();
        found.manifest = Some(v);
    }

    let mut plain: HashMap<&str, Vec<u8>> = HashMap::new();
    if encrypted {
        let Some(password) = password else {
            return Err(fmt_err(
                "manifest.json",
                format!("the archive (soul {soul_name:?}) is encrypted: a password is needed"),
            ));
        };
        if let Some(n) =
            zip.index.keys().find(|n| n.as_str() != "manifest.json" && !n.ends_with(".enc"))
        {
            return Err(fmt_err(n.clone(), "plaintext member inside an encrypted archive"));
        }
        let mut blobs: Vec<(&str, String, Vec<u8>)> = Vec::new();
        for name in KNOWN.iter().filter(|n| **n != "manifest.json") {
            let enc = format!("{name}.enc");
            if let Some(b) = zip.read(&enc)? {
                blobs.push((name, enc, b));
            }
        }
        let mut dec = Decryptor::new(password);
        // soul.json first: a wrong password fails there after one derivation.
        if let Some(pos) = blobs.iter().position(|(n, _, _)| *n == "soul.json") {
            let (n, enc, b) = blobs.remove(pos);
            plain.insert(n, dec.decrypt(&enc, &b)?);
        }
        dec.prepare(blobs.iter().map(|(_, _, b)| b.as_slice()).filter(|b| b.len() >= SALT_LEN))?;
        for (n, enc, b) in blobs {
            plain.insert(n, dec.decrypt(&enc, &b)?);
        }
    } else {
        for name in KNOWN.iter().filter(|n| **n != "manifest.json") {
            if let Some(b) = zip.read(name)? {
                plain.insert(name, b);
            }
        }
        if !plain.contains_key("soul.json") && zip.has("soul.json.enc") {
            return Err(fmt_err(
                "soul.json",
                "missing; the archive holds soul.json.enc but its manifest does not say \
                 `encrypted: true`",
            ));
        }
    }

    let label = |n: &str| if encrypted { format!("{n}.enc") } else { n.to_owned() };
    let mut take = |n: &str| plain.remove(n).map(|b| (label(n), b));
    found.soul = take("soul.json");
    found.dna_md = take("dna.md").map(|x| x.1);
    found.state_json = take("state.json").map(|x| x.1);
    found.core = take("memory/core.json");
    for (i, t) in ENTRY_TIERS.iter().enumerate() {
        found.tiers[i] = take(&format!("memory/{t}.json")).map(|x| vec![x]);
    }
    found.graph = take("memory/graph.json");
    found.self_model = take("memory/self_model.json");
    found.general_events = take("memory/general_events.json");
    found.custom_layers_json = take("memory/custom_layers.json");
    found.archives = take("memory/archives.json");
    found.chain = take("trust_chain/chain.json");
    found.public_key = take("keys/public.key").map(|x| x.1);
    found.private_key = take("keys/private.key").map(|x| x.1);
    found.any_memory_data = found.core.is_some()
        || found.tiers.iter().any(Option::is_some)
        || found.custom_layers_json.is_some()
        || found.graph.is_some()
        || found.self_model.is_some()
        || found.general_events.is_some()
        || found.dna_md.is_some()
        || found.chain.is_some()
        || found.public_key.is_some()
        || found.private_key.is_some();
    if found.soul.is_none() {
        return Err(fmt_err(label("soul.json"), "missing: not a soul archive"));
    }
    found.assemble(ARCHIVE)
}

/// Whether a `.soul` archive says it is password-encrypted (its manifest's
/// `encrypted`), without decrypting anything.
///
/// # Errors
/// When the bytes are not a readable zip or the manifest is not JSON.
pub fn soul_is_encrypted(bytes: &[u8]) -> Result<bool> {
    let mut zip = Zip::open(bytes)?;
    match zip.read("manifest.json")? {
        Some(m) => Ok(parse_json("manifest.json", &m)?.get("encrypted").is_some_and(truthy)),
        None => Ok(false),
    }
}

/// Reads a `.soul` file (at most [`MAX_ARCHIVE_BYTES`]).
///
/// # Errors
/// I/O errors, and everything [`read_soul`] reports.
pub fn read_soul_file(path: &Path, password: Option<&str>) -> Result<SoulDocument> {
    let len = std::fs::metadata(path)?.len();
    if len > MAX_ARCHIVE_BYTES {
        return Err(fmt_err(
            path.display().to_string(),
            format!("{len} bytes, over the {MAX_ARCHIVE_BYTES}-byte cap"),
        ));
    }
    read_soul(&std::fs::read(path)?, password)
}

/// The memory members of an archive, in the reference's order (archives added as an
/// extra member when non-empty, which the reference ignores).
fn memory_members(doc: &SoulDocument) -> Result<Vec<(String, Vec<u8>)>> {
    let m = &doc.memory;
    let a = Dialect::Ascii;
    let mut out = Vec::new();
    let mut push = |name: &str, bytes: Vec<u8>| out.push((name.to_owned(), bytes));
    push("memory/core.json", to_json(&m.core, a, "memory/core.json")?);
    for t in ENTRY_TIERS {
        let name = format!("memory/{t}.json");
        let list = m.tier(t).map_or(&[][..], Vec::as_slice);
        push(&name, to_json(list, a, &name)?);
    }
    push("memory/graph.json", to_json(&m.graph, a, "memory/graph.json")?);
    push("memory/self_model.json", to_json(&m.self_model, a, "memory/self_model.json")?);
    push(
        "memory/general_events.json",
        to_json(&m.general_events, a, "memory/general_events.json")?,
    );
    if m.custom_layers.values().any(|v| !v.is_empty()) {
        let layers: indexmap::IndexMap<&String, &Vec<crate::MemoryEntry>> =
            m.custom_layers.iter().filter(|(_, v)| !v.is_empty()).collect();
        push("memory/custom_layers.json", to_json(&layers, a, "memory/custom_layers.json")?);
    }
    if !m.archives.is_empty() {
        push("memory/archives.json", to_json(&m.archives, a, "memory/archives.json")?);
    }
    Ok(out)
}

fn now() -> Timestamp {
    chrono::Utc::now().naive_utc()
}

/// Writes a `.soul` archive: members in the reference's order, DEFLATE, the manifest
/// last and never encrypted.
///
/// # Errors
/// Serialisation, randomness or zip failures.
pub fn write_soul(doc: &SoulDocument, opts: &WriteOptions) -> Result<Vec<u8>> {
    let exported = opts.exported.unwrap_or_else(now);
    let mut members = doc.common_files()?;
    // soul.json, dna.md, state.json first, then memory, then chain and keys.
    let split = members
        .iter()
        .position(|(n, _)| n.starts_with("trust_chain/") || n.starts_with("keys/"))
        .unwrap_or(members.len());
    let tail = members.split_off(split);
    members.extend(memory_members(doc)?);
    members.extend(tail);

    if let Some(pw) = &opts.password {
        let mut shared: Option<([u8; SALT_LEN], [u8; 32])> = None;
        for (name, bytes) in &mut members {
            let blob = if opts.salt_per_member {
                crypto::encrypt_blob(bytes, pw)?
            } else {
                let (salt, key) = match shared {
                    Some(sk) => sk,
                    None => {
                        let mut salt = [0u8; SALT_LEN];
                        crypto::random_bytes(&mut salt)?;
                        let sk = (salt, crypto::derive_key(pw, &salt)?);
                        shared = Some(sk);
                        sk
                    }
                };
                crypto::encrypt_with_key(bytes, &salt, &key)?
            };
            *bytes = blob;
            name.push_str(".enc");
        }
    }
    let manifest = doc.manifest_value(opts.password.is_some(), exported);
    members.push(("manifest.json".into(), to_json(&manifest, Dialect::Pydantic, "manifest.json")?));

    let mtime = {
        use chrono::{Datelike, Timelike};
        zip::DateTime::from_date_and_time(
            u16::try_from(exported.year()).unwrap_or(1980),
            exported.month() as u8,
            exported.day() as u8,
            exported.hour() as u8,
            exported.minute() as u8,
            exported.second() as u8,
        )
        .unwrap_or_default()
    };
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .last_modified_time(mtime);
    let mut zw = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in &members {
        zw.start_file(name.as_str(), options)
            .map_err(|e| fmt_err(name.as_str(), format!("zip: {e}")))?;
        zw.write_all(bytes)?;
    }
    let cur = zw.finish().map_err(|e| fmt_err(ARCHIVE, format!("zip: {e}")))?;
    Ok(cur.into_inner())
}

/// Writes a `.soul` file atomically (a temporary file next to it, then a rename).
///
/// # Errors
/// As [`write_soul`], plus I/O errors.
pub fn write_soul_file(path: &Path, doc: &SoulDocument, opts: &WriteOptions) -> Result<()> {
    let bytes = write_soul(doc, opts)?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut suffix = [0u8; 6];
    crypto::random_bytes(&mut suffix)?;
    let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.{hex}.tmp"));
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(())
}
