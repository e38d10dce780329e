//! File-system failures on open: read-only files and directories, missing
//! directories, a directory or a foreign file where the store should be. Each is a
//! clear [`Error::Open`], and a store whose permissions are restored opens cleanly.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use soulmem::{Error, Memory, MemoryEntry, MemoryType};

fn set_mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Root ignores permission bits; the permission cases are skipped then (the
/// failure-injecting backend covers a read-only medium in `reliability_faults`).
fn permissions_enforced(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, b"x").expect("probe");
    set_mode(&probe, 0o444);
    let enforced = std::fs::OpenOptions::new().write(true).open(&probe).is_err();
    set_mode(&probe, 0o644);
    std::fs::remove_file(&probe).expect("rm probe");
    enforced
}

fn assert_open_error(r: soulmem::Result<Memory>, needle: &str) {
    match r {
        Ok(_) => panic!("opened, expected an error mentioning {needle:?}"),
        Err(e) => {
            assert!(matches!(e, Error::Open { .. }), "expected Error::Open, got {e:?}");
            let msg = e.to_string().to_lowercase();
            assert!(msg.contains(needle), "{msg}");
        }
    }
}

#[test]
fn read_only_file_and_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ro.redb");
    {
        let mem = Memory::open(&path).expect("create");
        mem.add(MemoryEntry::new(MemoryType::Semantic, "User likes tea")).expect("add");
    }
    if !permissions_enforced(dir.path()) {
        eprintln!("skipped the permission cases: running as root");
    } else {
        set_mode(&path, 0o444);
        assert_open_error(Memory::open(&path), "permission denied");
        set_mode(&path, 0o644);

        let ro_dir = dir.path().join("ro-dir");
        std::fs::create_dir(&ro_dir).expect("mkdir");
        set_mode(&ro_dir, 0o555);
        assert_open_error(Memory::open(ro_dir.join("new.redb")), "permission denied");
        set_mode(&ro_dir, 0o755);
    }
    // Permissions restored: the store opens cleanly with its data.
    let mem = Memory::open(&path).expect("reopen");
    assert_eq!(mem.count().expect("count"), 1);
    assert!(mem.check(|_| {}).expect("check").is_ok());
}

#[test]
fn bad_paths_are_open_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_open_error(Memory::open(dir.path().join("missing/dir/store.redb")), "no such file");
    assert_open_error(Memory::open(dir.path()), "");
    let foreign = dir.path().join("foreign.redb");
    std::fs::write(&foreign, vec![0x5a; 8192]).expect("write");
    assert_open_error(Memory::open(&foreign), "not a redb");
    // The foreign file is left as it was.
    assert_eq!(std::fs::read(&foreign).expect("read"), vec![0x5a; 8192]);
}
