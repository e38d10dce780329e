//! Bad input gives a clear error naming the member or entry, and nothing else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod formats_common;

use std::io::{Cursor, Write};

use formats_common::*;
use serde_json::{Value, json};
use soulmem::Error;
use soulmem::formats::{MemoryDump, read_dir, read_soul};
use zip::write::SimpleFileOptions;

fn make_zip(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        w.start_file(*name, opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn soul_json() -> Vec<u8> {
    serde_json::to_vec(&json!({"version": "1.0.0", "identity": {"name": "Eve"}})).unwrap()
}

fn entry(id: &str) -> Value {
    json!({"id": id, "type": "semantic", "content": "User likes tea"})
}

fn with_semantic(entries: Value) -> Vec<u8> {
    make_zip(&[
        ("soul.json", soul_json()),
        ("memory/semantic.json", serde_json::to_vec(&entries).unwrap()),
    ])
}

/// The error must be a Format error whose entry contains `entry` and whose problem
/// contains `problem`.
fn expect(result: soulmem::Result<impl std::fmt::Debug>, entry: &str, problem: &str) {
    match result {
        Err(Error::Format { entry: e, problem: p }) => {
            assert!(e.contains(entry), "entry {e:?} should name {entry:?} (problem {p:?})");
            assert!(p.contains(problem), "problem {p:?} should say {problem:?} (entry {e:?})");
        }
        other => panic!("expected a format error about {entry}: {problem}, got {other:?}"),
    }
}

#[test]
fn minimal_valid_archive_loads() {
    let doc = read_soul(&with_semantic(json!([entry("a"), entry("b")])), None).unwrap();
    assert_eq!(doc.memory.semantic.len(), 2);
    assert_eq!(doc.memory.semantic[0].layer, "semantic");
    assert_eq!(doc.memory.semantic[0].domain, "default");
    // `5.0` is accepted for an integer field, as pydantic does.
    let mut e = entry("c");
    e["importance"] = json!(7.0);
    let doc = read_soul(&with_semantic(json!([e])), None).unwrap();
    assert_eq!(doc.memory.semantic[0].importance, 7);
}

#[test]
fn corrupt_and_truncated_zip() {
    expect(read_soul(b"definitely not a zip file", None), "archive", "not a readable zip");
    let rich = sample_bytes("rich.soul");
    expect(read_soul(&rich[..rich.len() / 2], None), "archive", "not a readable zip");
    // A damaged member body (CRC or inflate failure) names the member.
    let mut z = make_zip(&[("soul.json", soul_json())]);
    let pos = z.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    for b in &mut z[40..pos.min(60)] {
        *b ^= 0x5a;
    }
    expect(read_soul(&z, None), "soul.json", "");
}

#[test]
fn missing_soul_json() {
    let z = make_zip(&[("memory/core.json", b"{}".to_vec())]);
    expect(read_soul(&z, None), "soul.json", "missing");
    let z = make_zip(&[("soul.json", b"{\"identity\": {}}".to_vec())]);
    expect(read_soul(&z, None), "soul.json", "identity.name");
}

#[test]
fn invalid_json() {
    let z = make_zip(&[("soul.json", soul_json()), ("memory/semantic.json", b"[{".to_vec())]);
    expect(read_soul(&z, None), "memory/semantic.json", "invalid JSON");
    let z = make_zip(&[("soul.json", b"{nope".to_vec())]);
    expect(read_soul(&z, None), "soul.json", "invalid JSON");
    let z = make_zip(&[("soul.json", soul_json()), ("manifest.json", b"{".to_vec())]);
    expect(read_soul(&z, None), "manifest.json", "invalid JSON");
}

#[test]
fn wrong_shapes() {
    expect(read_soul(&with_semantic(json!({"a": 1})), None), "memory/semantic.json", "array");
    expect(read_soul(&with_semantic(json!([1])), None), "memory/semantic.json[0]", "object");
    let z = make_zip(&[("soul.json", soul_json()), ("memory/custom_layers.json", b"[]".to_vec())]);
    expect(read_soul(&z, None), "memory/custom_layers.json", "object of layers");
    let mut e = entry("x");
    e.as_object_mut().unwrap().remove("content");
    expect(read_soul(&with_semantic(json!([e])), None), "[0] (id \"x\")", "content");
}

#[test]
fn unknown_enum_value() {
    let mut e = entry("abc");
    e["type"] = json!("Semantic");
    expect(
        read_soul(&with_semantic(json!([entry("ok"), e])), None),
        "memory/semantic.json[1] (id \"abc\")",
        "unknown variant `Semantic`",
    );
    let mut e = entry("v");
    e["visibility"] = json!("secret");
    expect(read_soul(&with_semantic(json!([e])), None), "id \"v\"", "unknown variant");
    let mut e = entry("k");
    e["category"] = json!("projects");
    expect(read_soul(&with_semantic(json!([e])), None), "id \"k\"", "unknown variant");
}

#[test]
fn range_violations() {
    for (field, value, says) in [
        ("importance", json!(11), "importance 11"),
        ("importance", json!(0), "importance 0"),
        ("confidence", json!(1.5), "confidence 1.5"),
        ("salience", json!(-0.1), "salience -0.1"),
        ("somatic", json!({"valence": -2.0, "arousal": 0.5, "label": "x"}), "valence"),
        ("importance", json!(5.5), "importance"),
    ] {
        let mut e = entry("r");
        e[field] = value;
        expect(read_soul(&with_semantic(json!([e])), None), "id \"r\"", says);
    }
}

#[test]
fn duplicate_ids_within_a_tier() {
    expect(
        read_soul(&with_semantic(json!([entry("dup"), entry("other"), entry("dup")])), None),
        "semantic",
        "duplicate id \"dup\" (items #0 and #2)",
    );
    // The same id in two different tiers is fine.
    let z = make_zip(&[
        ("soul.json", soul_json()),
        ("memory/semantic.json", serde_json::to_vec(&json!([entry("same")])).unwrap()),
        ("memory/social.json", serde_json::to_vec(&json!([entry("same")])).unwrap()),
    ]);
    let doc = read_soul(&z, None).unwrap();
    assert_eq!(doc.memory.social[0].kind, soulmem::MemoryType::Semantic);
    // Also in a to_dict dump and in a custom layer.
    let dump = json!({"custom_layers": {"p": [entry("d"), entry("d")]}});
    expect(MemoryDump::from_value(dump, "dump"), "custom_layers", "duplicate id");
}

#[test]
fn member_names_escaping_the_archive() {
    for bad in ["../evil.json", "/etc/passwd", "memory/../../x", "..\\win", "C:/x"] {
        let z = make_zip(&[("soul.json", soul_json()), (bad, b"{}".to_vec())]);
        expect(read_soul(&z, None), bad, "escapes the archive");
    }
}

const CAP: usize = soulmem::formats::MAX_MEMBER_BYTES as usize;

#[test]
fn oversized_member() {
    let big = vec![b' '; CAP + 10];
    let mut z = make_zip(&[("soul.json", soul_json()), ("memory/semantic.json", big)]);
    // Honest header: refused before decompressing.
    expect(read_soul(&z, None), "memory/semantic.json", "exceeds");
    // Lying header (sizes patched down to 2 bytes): the bytes actually inflated count.
    let patch = |z: &mut Vec<u8>, sig: &[u8], off: usize| {
        let mut from = 0;
        while let Some(p) = z[from..].windows(4).position(|w| w == sig) {
            let at = from + p;
            let name_len_off = if sig == b"PK\x03\x04" { 26 } else { 28 };
            let n = u16::from_le_bytes([z[at + name_len_off], z[at + name_len_off + 1]]) as usize;
            let name_off = if sig == b"PK\x03\x04" { 30 } else { 46 };
            if &z[at + name_off..at + name_off + n] == b"memory/semantic.json" {
                z[at + off..at + off + 4].copy_from_slice(&2u32.to_le_bytes());
            }
            from = at + 4;
        }
    };
    patch(&mut z, b"PK\x03\x04", 22);
    patch(&mut z, b"PK\x01\x02", 24);
    match read_soul(&z, None) {
        Err(Error::Format { entry, .. }) => assert!(entry.contains("memory/semantic.json")),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn plain_member_inside_encrypted_archive() {
    let manifest = serde_json::to_vec(&json!({"encrypted": true, "soul_name": "Eve"})).unwrap();
    let z = make_zip(&[("soul.json", soul_json()), ("manifest.json", manifest.clone())]);
    expect(read_soul(&z, Some("pw")), "soul.json", "plaintext member inside an encrypted");
    expect(read_soul(&z, None), "manifest.json", "a password is needed");
    // soul.json.enc without a manifest saying so.
    let z = make_zip(&[("soul.json.enc", vec![0; 64])]);
    expect(read_soul(&z, None), "soul.json", "encrypted: true");
    // A blob too short to be valid.
    let z = make_zip(&[("soul.json.enc", vec![0; 20]), ("manifest.json", manifest)]);
    expect(read_soul(&z, Some("pw")), "soul.json.enc", "too short");
}

#[test]
fn bad_directories() {
    let tmp = tempfile::tempdir().unwrap();
    expect(read_dir(tmp.path()), "soul.json", "missing");
    std::fs::write(tmp.path().join("soul.json"), soul_json()).unwrap();
    let d = tmp.path().join("memory/semantic/work");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("entries.json"), b"[{\"id\": 1").unwrap();
    expect(read_dir(tmp.path()), "memory/semantic/work/entries.json", "invalid JSON");
    std::fs::write(d.join("entries.json"), serde_json::to_vec(&json!([entry("a")])).unwrap())
        .unwrap();
    let doc = read_dir(tmp.path()).unwrap();
    assert_eq!(doc.memory.semantic.len(), 1);
    // A stray directory under memory/ becomes a (here empty, so dropped) custom layer.
    std::fs::create_dir_all(tmp.path().join("memory/stray")).unwrap();
    assert!(read_dir(tmp.path()).unwrap().memory.custom_layers.is_empty());
}

#[test]
fn unsafe_names_are_refused_on_write() {
    let mut doc = read_soul(&with_semantic(json!([entry("a")])), None).unwrap();
    doc.memory.semantic[0].domain = "../escape".into();
    let tmp = tempfile::tempdir().unwrap();
    let err = soulmem::formats::write_dir(&tmp.path().join("s"), &doc).unwrap_err();
    assert!(matches!(err, Error::InvalidName { what: "domain", .. }), "{err}");
    assert!(!tmp.path().join("escape").exists());
    let mut doc = read_soul(&with_semantic(json!([])), None).unwrap();
    let mut e: soulmem::MemoryEntry = serde_json::from_value(entry("b")).unwrap();
    e.layer = "semantic".into();
    doc.memory.custom_layers.insert("semantic".into(), vec![e]);
    let err = soulmem::formats::write_dir(&tmp.path().join("t"), &doc).unwrap_err();
    assert!(matches!(err, Error::InvalidName { what: "layer", .. }), "{err}");
}
