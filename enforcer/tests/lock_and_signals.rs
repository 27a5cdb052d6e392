//! The real binary on the real clock, with the fake executables on PATH: one enforcer per
//! state_dir (a second `run` is refused while the first holds the lock, and starts once it
//! has ended), SIGHUP logged, never a silent death, and the cycle line counting the jobs it
//! skipped.

mod common;

use common::fakes;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    /// One idle job holding both GPUs of gpu001, observe mode, real clock, 60 s interval.
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake");
        std::fs::create_dir_all(fake.join("proc")).unwrap();
        std::fs::write(
            fake.join("jobs.tsv"),
            "4242\t4242\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\trel:-7200\tgpu001\tcpu=8,gres/gpu=2\ttrain\t\n",
        )
        .unwrap();
        std::fs::write(fake.join("gpus.txt"), "0 GPU-0 0 0 3 81920 55 400\n1 GPU-1 0 0 3 81920 56 400\n").unwrap();
        std::fs::write(fake.join("apps.csv"), "").unwrap();
        let n = Node { dir };
        std::fs::write(
            n.config(),
            format!(
                "[policy]\ninterval = \"60s\"\n\n[enforcer]\nnode = \"gpu001\"\nstate_dir = \"{}\"\nmetrics_listen = \"\"\nproc_root = \"{}\"\ncommand_timeout = \"5s\"\nnvidia_smi_timeout = \"2s\"\n",
                n.state_dir().display(),
                fake.join("proc").display()
            ),
        )
        .unwrap();
        n
    }
    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_enforcer"));
        c.args(args)
            .env(
                "PATH",
                format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default()),
            )
            .env("FAKE_DIR", self.dir.path().join("fake"))
            .current_dir(self.dir.path());
        c
    }
    /// `enforcer run --config …` in the background, stderr to `name`.log; returns once its
    /// first cycle has saved the state file.
    fn start(&self, name: &str) -> (Child, PathBuf) {
        let log = self.dir.path().join(format!("{name}.log"));
        let cfg = self.config().display().to_string();
        let child = self
            .command(&["run", "--config", &cfg])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        wait_for(|| self.state_dir().join("state.json").exists(), &log);
        (child, log)
    }
    fn run_once(&self) -> std::process::Output {
        let cfg = self.config().display().to_string();
        self.command(&["run", "--config", &cfg, "--once"]).output().unwrap()
    }
}

fn wait_for(cond: impl Fn() -> bool, log: &Path) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "timed out; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child this test started and has not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

fn exit_signal(s: std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&s)
}

#[test]
fn a_second_run_on_a_held_state_dir_is_refused_and_starts_once_the_first_has_ended() {
    let n = Node::new();
    let (mut first, log) = n.start("first");
    let second = n.run_once();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("state_dir {}", n.state_dir().display())) && err.contains("held by another enforcer"),
        "{err}"
    );
    assert!(!err.contains("cycle"), "the refused run ran no cycle: {err}");
    // check-config takes no lock.
    let cfg = n.config().display().to_string();
    let cc = n.command(&["check-config", &cfg]).output().unwrap();
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    assert!(first.try_wait().unwrap().is_none(), "the first is untouched");
    signal(&first, libc::SIGTERM);
    let status = first.wait().unwrap();
    assert_eq!(exit_signal(status), Some(libc::SIGTERM), "SIGTERM still ends the daemon");
    let again = n.run_once();
    assert!(
        again.status.success(),
        "{}\nfirst log:\n{}",
        String::from_utf8_lossy(&again.stderr),
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

#[test]
fn sighup_is_logged_and_the_daemon_keeps_running() {
    let n = Node::new();
    let (mut d, log) = n.start("hup");
    signal(&d, libc::SIGHUP);
    wait_for(
        || std::fs::read_to_string(&log).unwrap_or_default().contains("SIGHUP received"),
        &log,
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("config reload is not supported") && text.contains("restart"),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.try_wait().unwrap().is_none(), "still running after SIGHUP:\n{text}");
    // It still holds its state_dir.
    assert_eq!(n.run_once().status.code(), Some(1));
    signal(&d, libc::SIGINT);
    assert_eq!(exit_signal(d.wait().unwrap()), Some(libc::SIGINT), "SIGINT still ends the daemon");
}

#[test]
fn the_cycle_line_counts_the_jobs_it_skipped() {
    let n = Node::new();
    // Two one-GPU jobs on the two GPUs, no processes: neither can be placed.
    std::fs::write(
        n.dir.path().join("fake").join("jobs.tsv"),
        "1\t1\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\trel:-7200\tgpu001\tcpu=8,gres/gpu=1\ta\t\n\
         2\t2\t0\t0\t0\t0\tRUNNING\tbob\tml\tgpu\tnormal\trel:-7200\tgpu001\tcpu=8,gres/gpu=1\tb\t\n",
    )
    .unwrap();
    let cfg = n.config().display().to_string();
    let o = n
        .command(&["--log-format", "json", "run", "--config", &cfg, "--once"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{log}");
    let cycle: serde_json::Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["message"] == "cycle")
        .unwrap_or_else(|| panic!("no cycle line: {log}"));
    let f = &cycle["fields"];
    assert_eq!(f["jobs_on_node"], 2, "{f}");
    assert_eq!(f["jobs_evaluated"], 0, "{f}");
    assert_eq!(f["jobs_skipped"], 2, "{f}");
    assert_eq!(f["jobs_skipped_why"], "ambiguous_attribution=2", "{f}");
    assert_eq!(f["verdicts"], "none", "{f}");
}

/// After a rollback, a state file written by a newer release (here: a key this binary does
/// not know) stops the start and stays in place, byte for byte: it may hold the times users
/// were told and admins' overrides. Control: the same file without the key runs.
#[test]
fn a_state_file_from_a_newer_release_stops_the_start_and_stays() {
    let n = Node::new();
    let first = n.run_once();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let path = n.state_dir().join("state.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v["kept_by_a_later_release"] = serde_json::json!({ "job": "4242" });
    let newer = v.to_string();
    std::fs::write(&path, &newer).unwrap();
    let out = n.run_once();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("kept_by_a_later_release") && err.contains("does not start"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
    assert_eq!(
        std::fs::read_dir(n.state_dir())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("corrupt"))
            .count(),
        0
    );
    v.as_object_mut().unwrap().remove("kept_by_a_later_release");
    std::fs::write(&path, v.to_string()).unwrap();
    let again = n.run_once();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
}
