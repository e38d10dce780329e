//! Output read by a pipe that closes early (`soulctl … | head`): the command ends
//! quietly with success instead of panicking on the failed write.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs soulctl with `args` on `db`, its standard output a pipe whose reading end
/// is closed before the command writes, so every write to it fails.
fn with_stdout_closed(db: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run soulctl");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for soulctl")
}

fn assert_quiet(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status {:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

#[test]
fn printed_lines_to_a_closed_pipe_end_the_command_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let out = Command::new(env!("CARGO_BIN_EXE_soulctl"))
        .arg("--db")
        .arg(&db)
        .args(["remember", "Lima is the capital of Peru"])
        .output()
        .expect("run soulctl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_quiet(&with_stdout_closed(&db, &["recall", "Peru", "--explain"]));
    assert_quiet(&with_stdout_closed(&db, &["stats"]));
}

#[test]
fn a_replay_to_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let scenario = dir.path().join("s.jsonl");
    std::fs::write(
        &scenario,
        r#"{"op": "observe", "at": "2024-06-01T10:00:00", "user": "I live in Lima", "agent": "ok"}"#,
    )
    .expect("write scenario");
    let scenario = scenario.to_string_lossy().into_owned();
    assert_quiet(&with_stdout_closed(&db, &["replay", &scenario]));
}
