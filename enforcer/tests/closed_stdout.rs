//! `enforcer parse … | head` must end quietly when the reader goes away, not panic.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

#[test]
fn parse_into_a_closed_pipe_exits_zero_without_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["parse", "hostlist", "-"])
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("enforcer starts");
    child.stdin.take().unwrap().write_all(b"node[00001-99999]\n").unwrap();
    let mut first = [0u8; 64];
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
