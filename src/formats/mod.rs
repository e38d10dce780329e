//! File formats: the `.soul` archive, directory layouts and the JSON dump.
//!
//! Everything here works on in-memory documents ([`SoulDocument`], [`MemoryDump`]),
//! independent of storage. The shapes follow soul-protocol 0.4.0 as described in
//! `FORMAT.md`: readers accept what the reference accepts (legacy 0.3 entries get
//! `layer = type` and `domain = "default"`), and refuse, with an
//! [`crate::Error::Format`] naming the member or entry, what would be unsafe or lossy
//! (zip bombs, names escaping the archive, duplicate ids within a layer, …). Writers
//! produce the reference's JSON dialects (see [`pyjson`]).

pub mod crypto;
pub mod pyjson;

mod archive;
mod dir;
mod document;
mod dump;
mod store_io;

pub use archive::{
    MAX_ARCHIVE_BYTES, MAX_MEMBER_BYTES, MAX_MEMBERS, WriteOptions, read_soul, read_soul_file,
    soul_is_encrypted, write_soul, write_soul_file,
};
pub use dir::{DirLayout, choose_layout, read_dir, soul_dir_name, write_dir, write_dir_as};
pub use document::SoulDocument;
pub use dump::{ENTRY_TIERS, MemoryDump};
pub use store_io::{DEFAULT_SOUL_NAME, ImportReport};

/// Reads a `MemoryManager.to_dict()` JSON file (e.g. `rich.memory.json`).
///
/// # Errors
/// I/O errors, and what [`MemoryDump::from_json_slice`] reports.
pub fn read_memory_json(path: &std::path::Path) -> crate::Result<MemoryDump> {
    let bytes = std::fs::read(path)?;
    MemoryDump::from_json_slice(&bytes, &path.display().to_string())
}

/// Writes a `MemoryManager.to_dict()` JSON file (`json.dumps(indent=2)` style).
///
/// # Errors
/// Serialisation or I/O errors.
pub fn write_memory_json(path: &std::path::Path, dump: &MemoryDump) -> crate::Result<()> {
    std::fs::write(path, dump.to_json()?)?;
    Ok(())
}
