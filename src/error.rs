//! soulmem's error type. redb's errors are wrapped, never exposed.

use std::path::PathBuf;

/// Everything that can go wrong in soulmem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened as a soulmem store.
    #[error("cannot open {path}: {reason}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file was written by a newer soulmem.
    #[error(
        "store schema version {found} is newer than this soulmem supports ({supported}); upgrade soulmem"
    )]
    SchemaTooNew {
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The store's indexes were built by another tokenizer version.
    #[error(
        "store indexes were built with tokenizer version {found}, this soulmem uses {expected}; run `soulctl reindex`"
    )]
    NeedsReindex {
        /// The version in the file.
        found: u32,
        /// This build's version.
        expected: u32,
    },
    /// The store's contents are not what soulmem wrote.
    #[error("store is corrupted: {0}")]
    Corrupted(String),
    /// A storage-level failure (I/O, transaction, commit).
    #[error("storage error: {0}")]
    Storage(String),
    /// An invalid layer or domain name.
    #[error("invalid {what} name {name:?}: {reason}")]
    InvalidName {
        /// `layer` or `domain`.
        what: &'static str,
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A memory failed validation.
    #[error("invalid memory: {0}")]
    InvalidMemory(String),
    /// No memory has this id.
    #[error("no memory with id {0:?}")]
    NotFound(String),
    /// A memory with this id exists already.
    #[error("a memory with id {0:?} exists already")]
    DuplicateId(String),
    /// A soul archive, directory or JSON dump could not be read or written.
    #[error("{entry}: {problem}")]
    Format {
        /// The archive member or file.
        entry: String,
        /// What was wrong.
        problem: String,
    },
    /// Bad input to an API call or a scenario.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A cognitive engine (LLM) or embedder call failed.
    #[error("engine error: {0}")]
    Engine(String),
    /// Plain I/O.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// `Result` with soulmem's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! storage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::Storage(e.to_string())
            }
        }
    )*};
}

storage_from!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::CompactionError
);

impl From<redb::Error> for Error {
    fn from(e: redb::Error) -> Self {
        Error::Storage(e.to_string())
    }
}

impl From<postcard::Error> for Error {
    fn from(e: postcard::Error) -> Self {
        Error::Corrupted(format!("undecodable record: {e}"))
    }
}
