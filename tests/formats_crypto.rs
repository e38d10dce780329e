//! Password-encrypted archives (AES-256-GCM, scrypt N = 2^17).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod formats_common;

use formats_common::*;
use soulmem::Error;
use soulmem::formats::{WriteOptions, read_soul, write_soul};

#[test]
fn encrypted_sample_decrypts_to_the_plain_one() {
    let enc = read_soul(&sample_bytes("rich-encrypted.soul"), Some(PASSWORD)).unwrap();
    let plain = read_soul(&sample_bytes("rich.soul"), None).unwrap();
    assert_same_doc(&plain, &enc);
    assert_eq!(enc.manifest.as_ref().unwrap()["encrypted"], true);
}

#[test]
fn wrong_or_missing_password() {
    let bytes = sample_bytes("rich-encrypted.soul");
    match read_soul(&bytes, Some("wrong password")) {
        Err(Error::Format { entry, problem }) => {
            assert_eq!(entry, "soul.json.enc");
            assert!(problem.contains("wrong password"), "{problem}");
        }
        other => panic!("expected a decryption error, got {other:?}"),
    }
    match read_soul(&bytes, None) {
        Err(Error::Format { entry, problem }) => {
            assert_eq!(entry, "manifest.json");
            assert!(problem.contains("password is needed") && problem.contains("Aria"));
        }
        other => panic!("expected an encrypted error, got {other:?}"),
    }
}

#[test]
fn encrypted_round_trip() {
    let doc = read_soul(&sample_bytes("minimal.soul"), None).unwrap();
    for salt_per_member in [false, true] {
        let opts = WriteOptions {
            password: Some("pässwörd".into()),
            salt_per_member,
            ..Default::default()
        };
        let bytes = write_soul(&doc, &opts).unwrap();
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(&bytes)).unwrap();
        let names: Vec<String> = z.file_names().map(str::to_owned).collect();
        assert!(names.iter().all(|n| n == "manifest.json" || n.ends_with(".enc")), "{names:?}");
        let m: serde_json::Value =
            serde_json::from_reader(z.by_name("manifest.json").unwrap()).unwrap();
        assert_eq!(m["encrypted"], true);
        let again = read_soul(&bytes, Some("pässwörd")).unwrap();
        assert_same_doc(&doc, &again);
    }
}
