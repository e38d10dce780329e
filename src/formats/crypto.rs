//! Per-member password encryption of `.soul` archives (FORMAT.md §4):
//! `salt[16] ‖ nonce[12] ‖ AES-256-GCM ciphertext ‖ tag[16]`, key = scrypt(password,
//! salt, N = 2^17, r = 8, p = 1, 32 bytes), no associated data.

use std::collections::HashMap;

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, KeyInit};

type GcmNonce = aes_gcm::aead::Nonce<Aes256Gcm>;

use crate::{Error, Result};

/// Salt length in bytes.
pub const SALT_LEN: usize = 16;
/// Nonce length in bytes.
pub const NONCE_LEN: usize = 12;
/// GCM tag length in bytes.
pub const TAG_LEN: usize = 16;
/// scrypt cost, as log2 N.
pub const SCRYPT_LOG_N: u8 = 17;
/// scrypt block size.
pub const SCRYPT_R: u32 = 8;
/// scrypt parallelism.
pub const SCRYPT_P: u32 = 1;

fn fmt_err(entry: &str, problem: impl Into<String>) -> Error {
    Error::Format { entry: entry.to_owned(), problem: problem.into() }
}

/// Derives the 32-byte AES key from a password and a salt.
///
/// # Errors
/// Only if scrypt rejects its fixed parameters (it does not).
pub fn derive_key(password: &str, salt: &[u8]) -> Result<[u8; 32]> {
    let params = scrypt::Params::new(SCRYPT_LOG_N, SCRYPT_R, SCRYPT_P)
        .map_err(|e| fmt_err("scrypt", e.to_string()))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password.as_bytes(), salt, &params, &mut key)
        .map_err(|e| fmt_err("scrypt", e.to_string()))?;
    Ok(key)
}

/// Fills `buf` with random bytes from the operating system.
///
/// # Errors
/// When the OS has no randomness to give.
pub fn random_bytes(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf).map_err(|e| fmt_err("random", e.to_string()))
}

/// Encrypts with an already-derived key: `salt ‖ fresh random nonce ‖ ciphertext ‖ tag`.
///
/// # Errors
/// When randomness or the cipher fails.
pub fn encrypt_with_key(plain: &[u8], salt: &[u8; SALT_LEN], key: &[u8; 32]) -> Result<Vec<u8>> {
    let mut nonce = [0u8; NONCE_LEN];
    random_bytes(&mut nonce)?;
    let cipher =
        Aes256Gcm::new_from_slice(key).map_err(|_| fmt_err("encrypt", "bad key length"))?;
    let ct = cipher
        .encrypt(&GcmNonce::from(nonce), plain)
        .map_err(|_| fmt_err("encrypt", "AES-GCM encryption failed"))?;
    let mut out = Vec::with_capacity(SALT_LEN + NONCE_LEN + ct.len());
    out.extend_from_slice(salt);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    Ok(out)
}

/// Encrypts one member as the reference does: fresh random salt and nonce.
///
/// # Errors
/// When randomness or the cipher fails.
pub fn encrypt_blob(plain: &[u8], password: &str) -> Result<Vec<u8>> {
    let mut salt = [0u8; SALT_LEN];
    random_bytes(&mut salt)?;
    let key = derive_key(password, &salt)?;
    encrypt_with_key(plain, &salt, &key)
}

/// Decrypts members of one archive, deriving each salt's key once.
pub struct Decryptor {
    password: String,
    keys: HashMap<[u8; SALT_LEN], [u8; 32]>,
}

impl Decryptor {
    /// A decryptor for `password` (UTF-8 bytes, no normalisation).
    #[must_use]
    pub fn new(password: &str) -> Self {
        Self { password: password.to_owned(), keys: HashMap::new() }
    }

    /// Derives the keys of all these blobs' salts that are not cached yet, in
    /// parallel.
    ///
    /// # Errors
    /// Only if scrypt fails.
    pub fn prepare<'a>(&mut self, blobs: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        use rayon::prelude::*;
        let mut salts: Vec<[u8; SALT_LEN]> = Vec::new();
        for b in blobs {
            if let Some(s) = b.get(..SALT_LEN).and_then(|s| <[u8; SALT_LEN]>::try_from(s).ok())
                && !self.keys.contains_key(&s)
                && !salts.contains(&s)
            {
                salts.push(s);
            }
        }
        let derived: Vec<([u8; SALT_LEN], [u8; 32])> = salts
            .par_iter()
            .map(|s| derive_key(&self.password, s).map(|k| (*s, k)))
            .collect::<Result<_>>()?;
        self.keys.extend(derived);
        Ok(())
    }

    /// Decrypts the blob of member `name`.
    ///
    /// # Errors
    /// A blob shorter than 44 bytes, or a failed tag check (wrong password or
    /// corrupted member), named after the member.
    pub fn decrypt(&mut self, name: &str, blob: &[u8]) -> Result<Vec<u8>> {
        if blob.len() < SALT_LEN + NONCE_LEN + TAG_LEN {
            return Err(fmt_err(
                name,
                format!("encrypted member is {} bytes, too short to be valid", blob.len()),
            ));
        }
        let (salt, rest) = blob.split_at(SALT_LEN);
        let (nonce, ct) = rest.split_at(NONCE_LEN);
        let salt: [u8; SALT_LEN] = salt.try_into().map_err(|_| fmt_err(name, "bad salt length"))?;
        let key = match self.keys.get(&salt) {
            Some(k) => *k,
            None => {
                let k = derive_key(&self.password, &salt)?;
                self.keys.insert(salt, k);
                k
            }
        };
        let cipher =
            Aes256Gcm::new_from_slice(&key).map_err(|_| fmt_err(name, "bad key length"))?;
        let nonce = GcmNonce::try_from(nonce).map_err(|_| fmt_err(name, "bad nonce length"))?;
        cipher
            .decrypt(&nonce, ct)
            .map_err(|_| fmt_err(name, "decryption failed: wrong password or corrupted member"))
    }
}
