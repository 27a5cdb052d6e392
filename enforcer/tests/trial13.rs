//! trial13 (operator trial, 2026-11-30): `enforcer run` whose stderr (its log) becomes a
//! broken pipe panics mid-cycle (exit 101, "failed printing to stderr: Broken pipe"):
//! tracing-subscriber reports the failed write with `eprintln!`, which panics on the same
//! broken stderr. Seen with `enforcer run --config … 2>&1 | head`; the same happens to the
//! daemon whenever whatever reads its log goes away. Expected: the daemon keeps running its
//! cycles (a log it cannot write is not a reason to stop judging, or to die between an action
//! and its record). Fails as reported.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn a_run_whose_log_pipe_closes_does_not_panic() {
    let fakes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("fake");
    std::fs::create_dir_all(&work).unwrap();
    for f in ["gpus.txt", "jobs.tsv", "apps.csv"] {
        std::fs::copy(fakes.join("demo").join(f), work.join(f)).unwrap();
    }
    let cfg = tmp.path().join("cfg.toml");
    std::fs::write(
        &cfg,
        format!(
            "[enforcer]\nnode = \"gpu001\"\nstate_dir = \"{}\"\nmetrics_listen = \"\"\nsqueue = \"{}\"\nscontrol = \"{}\"\nscancel = \"{}\"\nnvidia_smi = \"{}\"\nproc_root = \"{}\"\nsuspect_min_jobs = 6\n",
            tmp.path().join("state").display(),
            fakes.join("squeue").display(),
            fakes.join("scontrol").display(),
            fakes.join("scancel").display(),
            fakes.join("nvidia-smi").display(),
            fakes.join("demo/proc").display(),
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["run", "--config"])
        .arg(&cfg)
        .args(["--simulated-clock", "1800000000:60", "--cycles", "40"])
        .env("FAKE_DIR", &work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("enforcer starts");
    // Read the first bytes of the log, then go away (as `| head` does).
    let mut first = [0u8; 64];
    let mut stderr = child.stderr.take().unwrap();
    stderr.read_exact(&mut first).unwrap();
    drop(stderr);
    let status = child.wait().unwrap();
    assert_ne!(status.code(), Some(101), "the daemon panicked when its log pipe closed");
    assert!(status.success(), "{status:?}");
}
