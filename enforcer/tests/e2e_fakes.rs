//! End to end with the real binary and the fake executables on PATH (tests/fakes), each
//! logging its argv. A simulated clock (`--simulated-clock`) lets escalation happen in a few
//! seconds; everything else is the production path: real processes, argv, timeouts.

mod common;

use common::fakes;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const T0: i64 = 1_900_000_000;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn fake_dir(&self) -> PathBuf {
        self.dir.path().join("fake")
    }
    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    fn set(&self, file: &str, text: &str) {
        std::fs::write(self.fake_dir().join(file), text).unwrap();
    }
    fn argv(&self, prog: &str) -> Vec<Vec<String>> {
        let raw = std::fs::read(self.fake_dir().join(format!("{prog}.argv"))).unwrap_or_default();
        let text = String::from_utf8(raw).unwrap();
        text.split('\u{1e}')
            .filter(|r| !r.is_empty())
            .map(|r| r.split('\u{1f}').filter(|a| !a.is_empty()).map(str::to_string).collect())
            .collect()
    }
    /// The enforce-mode node lock's directory: per test, so tests in parallel do not meet.
    fn enforce_lock_dir(&self) -> PathBuf {
        self.dir.path().join("run-lock")
    }
    fn config(&self, mode: &str, extra: &str) -> PathBuf {
        let p = self.dir.path().join("config.toml");
        let overridden: Vec<&str> = extra.lines().filter_map(|l| l.split('=').next()).map(str::trim).collect();
        let text = format!(
            r#"[policy]
window = "10m"
warmup = "10m"
interval = "60s"
notice = "10m"
stages = [{{ after = "0s", verdict = "alert" }}, {{ after = "10m", verdict = "drain" }}, {{ after = "20m", verdict = "cancel" }}]
ceilings = {{ idle = "cancel" }}

[enforcer]
mode = "{mode}"
node = "gpu001"
state_dir = "{}"
metrics_listen = ""
proc_root = "{}"
command_timeout = "5s"
nvidia_smi_timeout = "2s"
notify_command = ["notify", "--site-mail"]
enforce_lock_dir = "{}"
{extra}
"#,
            self.state_dir().display(),
            self.fake_dir().join("proc").display(),
            self.enforce_lock_dir().display()
        );
        let text: String = text
            .lines()
            .filter(|l| {
                !l.contains(" = ") || l.starts_with(' ') || !overridden.contains(&l.split(" = ").next().unwrap_or("")) || extra.contains(l)
            })
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&p, text).unwrap();
        p
    }
    /// Runs `enforcer run --config CONFIG ARGS…` with the fakes first on PATH, in the temp dir
    /// as cwd. `allow_simulated_enforce` sets the test-only GPU_REAPER_ALLOW_SIMULATED_ENFORCE=1
    /// (the fakes stand in for Slurm and nvidia-smi, so enforce mode with a simulated clock
    /// harms nothing); otherwise it is removed.
    fn output(&self, config: &Path, args: &[&str], allow_simulated_enforce: bool) -> std::process::Output {
        let path = format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default());
        let mut c = Command::new(env!("CARGO_BIN_EXE_enforcer"));
        c.args(["run", "--config"])
            .arg(config)
            .args(args)
            .env_remove("GPU_REAPER_ALLOW_SIMULATED_ENFORCE")
            .env("PATH", path)
            .env("FAKE_DIR", self.fake_dir())
            .current_dir(self.dir.path());
        if allow_simulated_enforce {
            c.env("GPU_REAPER_ALLOW_SIMULATED_ENFORCE", "1");
        }
        c.output().unwrap()
    }
    /// A simulated run of `cycles` one-minute cycles from `start`, JSON logs: (success, stderr).
    fn run(&self, config: &Path, start: i64, cycles: u64) -> (bool, String) {
        let clock = format!("{start}:60");
        let cycles = cycles.to_string();
        let args = ["--log-format", "json", "--simulated-clock", &clock, "--cycles", &cycles];
        let out = self.output(config, &args, true);
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    }
    /// Runs `enforcer run --config CONFIG ARGS…` without the test-only variable: (exit code,
    /// stderr). With no `--simulated-clock` in `args` the run uses the real clock.
    fn run_with(&self, config: &Path, args: &[&str]) -> (Option<i32>, String) {
        let o = self.output(config, args, false);
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    }
    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.state_dir().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Runs `enforcer parse KIND -` on `input`: (exit 0, the JSON printed).
fn parse(kind: &str, input: &str, extra: &[&str]) -> (bool, serde_json::Value) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_enforcer"));
    c.args(["parse", kind, "-"])
        .args(extra)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    (o.status.success(), serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap())
}

/// The JSON log lines in `log` for which `keep` is true.
fn log_lines(log: &str, keep: impl Fn(&serde_json::Value) -> bool) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| keep(v))
        .collect()
}

/// Runs `enforcer check-config FILE` with the fakes first on PATH, as `run` has them (it
/// checks that the configured programs can be run).
fn check_config(cfg: &Path) -> std::process::Output {
    let path = format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default());
    Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .arg("check-config")
        .arg(cfg)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// One job holding both GPUs of gpu001, idle (node-exclusive attribution, no processes).
fn env_with_job(id: &str, raw: &str, user: &str, name: &str, comment: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let e = Env { dir };
    // A proc filesystem as check-config expects one: a process outside any Slurm job.
    std::fs::create_dir_all(e.fake_dir().join("proc/1")).unwrap();
    std::fs::write(e.fake_dir().join("proc/1/cgroup"), "0::/init.scope\n").unwrap();
    let start = T0 - 7200;
    let (arr, task) = id.split_once('_').unwrap_or(("0", "0"));
    e.set(
        "jobs.tsv",
        &format!(
            "{id}\t{raw}\t{arr}\t{task}\t0\t0\tRUNNING\t{user}\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,gres/gpu=2\t{name}\t{comment}\n"
        ),
    );
    e.set("gpus.txt", "0 GPU-0 0 0 3 81920 55 400\n1 GPU-1 0 0 3 81920 56 400\n");
    e.set("apps.csv", "");
    e
}

fn plain() -> Env {
    env_with_job("4242", "4242", "alice", "train", "")
}

/// Two one-GPU jobs on gpu001 (`4242`-style ids with their start times), each with one
/// process (pid 5001, 5002) in its Slurm cgroup.
fn two_one_gpu_jobs(e: &Env, jobs: [(&str, &str, i64); 2]) {
    let row = |(id, user, start): (&str, &str, i64)| {
        format!("{id}\t{id}\t0\t0\t0\t0\tRUNNING\t{user}\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,gres/gpu=1\t{user}\t\n")
    };
    e.set("jobs.tsv", &format!("{}{}", row(jobs[0]), row(jobs[1])));
    for (pid, (job, _, _)) in [(5001, jobs[0]), (5002, jobs[1])] {
        std::fs::create_dir_all(e.fake_dir().join(format!("proc/{pid}"))).unwrap();
        e.set(
            &format!("proc/{pid}/cgroup"),
            &format!("0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n"),
        );
    }
}

fn kinds(a: &[serde_json::Value], record: &str) -> Vec<String> {
    a.iter()
        .filter(|l| l["record"] == record)
        .map(|l| l["action"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn enforce_full_escalation_through_real_processes() {
    let e = plain();
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    let sc = e.argv("scontrol");
    let updates: Vec<&Vec<String>> = sc.iter().filter(|a| a[0] == "update").collect();
    assert_eq!(
        updates[0].as_slice(),
        ["update", "NodeName=gpu001", "State=DRAIN", "Reason=gpu-reaper: idle job 4242"]
    );
    assert_eq!(updates[1][1], "JobId=4242");
    assert!(updates[1][2].starts_with("AdminComment=job 4242: cancel idle"));
    assert_eq!(
        e.argv("scancel"),
        vec![vec!["--verbose".to_string(), "4242".to_string()]],
        "exact id, once"
    );
    assert_eq!(
        updates.last().unwrap().as_slice(),
        ["update", "NodeName=gpu001", "State=RESUME"],
        "our drain released once the job left"
    );
    let audit = e.audit();
    assert_eq!(
        kinds(&audit, "action"),
        vec!["alert", "notice", "alert", "drain", "alert", "cancel", "resume"]
    );
    let notify = e.argv("notify");
    assert_eq!(notify.len(), 1);
    assert_eq!(&notify[0][..3], &["--site-mail", "alice", "4242"]);
    let sq = e.argv("squeue");
    assert!(sq.iter().all(|a| a == &vec!["--json", "--all"]), "{sq:?}");
}

#[test]
fn observe_mode_changes_nothing() {
    let e = plain();
    let (ok, log) = e.run(&e.config("observe", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(e.argv("scontrol").iter().all(|a| a[0] == "show"), "observe mode only reads");
    assert!(e.argv("scancel").is_empty() && e.argv("notify").is_empty());
    let audit = e.audit();
    let would = kinds(&audit, "would_action");
    assert!(
        would.contains(&"drain".to_string()) && would.contains(&"cancel".to_string()),
        "{would:?}"
    );
    assert!(log.contains("would drain") && log.contains("would cancel"));
}

#[test]
fn squeue_failures_are_failed_reads() {
    for mode in ["fail", "exit0-error", "garbage", "timeout"] {
        let e = plain();
        e.set("squeue.mode", mode);
        let extra = if mode == "timeout" { "command_timeout = \"1s\"" } else { "" };
        let cfg = e.config("enforce", extra);
        let start = Instant::now();
        let (ok, log) = e.run(&cfg, T0, if mode == "timeout" { 2 } else { 3 });
        assert!(ok, "{mode}: {log}");
        assert!(log.contains("squeue failed; cycle skipped"), "{mode}: {log}");
        assert!(e.audit().is_empty(), "{mode}: nothing judged, nothing done");
        assert!(e.argv("scontrol").is_empty());
        assert!(start.elapsed() < Duration::from_secs(20));
    }
}

#[test]
fn nvidia_smi_exit_codes_and_hang_mean_no_data() {
    for mode in [
        "exit2",
        "exit3",
        "exit6",
        "exit8",
        "exit9",
        "exit15",
        "exit255",
        "hang",
        "nodevices0",
    ] {
        let e = plain();
        e.set("smi.mode", mode);
        let start = Instant::now();
        let (ok, log) = e.run(&e.config("enforce", ""), T0, if mode == "hang" { 2 } else { 4 });
        assert!(ok, "{mode}: {log}");
        let want = match mode {
            "hang" => "timeout".to_string(),
            "nodevices0" => "no_devices".to_string(),
            m => format!("exit_{}", &m[4..]),
        };
        assert!(
            log.contains(&format!("\"kind\":\"{want}\"")),
            "{mode}: expected kind {want} in {log}"
        );
        // nvidia-smi's own words reach the log line (never a metric label).
        let said = match mode {
            "exit15" => Some("GPU is lost. Reboot the system to recover this GPU"),
            "exit9" => Some("couldn't communicate with the NVIDIA driver"),
            "nodevices0" | "exit6" => Some("No devices were found"),
            // Operator trial 17: a hang logged an empty `nvidia_smi_said=`.
            "hang" => Some("(enforcer.nvidia_smi_timeout)"),
            _ => None,
        };
        if let Some(said) = said {
            assert!(
                log.lines()
                    .any(|l| l.contains("nvidia-smi gave no data") && l.contains("nvidia_smi_said") && l.contains(said)),
                "{mode}: expected {said:?} in the no-data line: {log}"
            );
        }
        let audit = e.audit();
        assert!(audit.is_empty(), "{mode}: no data is never idle: {audit:?}");
        if mode == "hang" {
            assert!(start.elapsed() < Duration::from_secs(12), "a hanging nvidia-smi is timed out (2 s)");
        }
    }
}

/// A cut-off nvidia-smi row is logged with its source, line and problem when it first shows,
/// then at most every 10 minutes while it lasts (operator trial 17: one WARN a cycle, 150 in
/// 150 cycles); once the row reads in full and is cut again, it is logged again at once.
#[test]
fn truncated_nvidia_smi_row_is_logged_when_it_starts_then_every_10_minutes() {
    // For each row WARN, how many cycle lines came before it (its cycle's number, from 0).
    let warned_in = |log: &str| -> Vec<usize> {
        let mut cycles = 0;
        let mut at = Vec::new();
        for v in log_lines(log, |_| true) {
            if v["fields"]["message"] == "cycle" {
                cycles += 1;
            } else if v["fields"]["kind"] == "bad_row" {
                at.push(cycles);
            }
        }
        at
    };
    let e = plain();
    e.set("smi.mode", "truncated");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 12);
    assert!(ok, "{log}");
    assert_eq!(warned_in(&log), [0, 10], "{log}");
    let warnings = log_lines(&log, |v| v["fields"]["kind"] == "bad_row");
    // Read in full once (the fourth cycle), then cut again: logged again at once.
    let e = plain();
    e.set("smi.mode", "truncated_but_4th");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 6);
    assert!(ok, "{log}");
    assert_eq!(warned_in(&log), [0, 4], "{log}");
    for w in &warnings {
        assert_eq!(w["level"], "WARN", "{w}");
        assert_eq!(w["fields"]["source"], "nvidia-smi", "{w}");
        assert_eq!(w["fields"]["line"], 3, "header, GPU 0, then the cut row: {w}");
        let problem = w["fields"]["problem"].as_str().unwrap();
        // The header has 11 columns: the enforcer asks for minor_number, mig.mode.current and
        // the video engines' utilisation too.
        assert!(problem.contains("expected 11") && problem.contains("GPU-1"), "{w}");
    }
    assert!(e.audit().iter().all(|a| a["action"] != "drain" && a["action"] != "cancel"));
}

#[test]
fn drain_never_confirmed_then_no_cancel() {
    let e = plain();
    e.set("drain.mode", "ignore");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 60);
    assert!(ok, "{log}");
    assert!(e.argv("scancel").is_empty());
    assert!(e
        .argv("scontrol")
        .iter()
        .filter(|a| a[0] == "update")
        .all(|a| a[2] == "State=DRAIN"));
}

#[test]
fn scancel_failure_is_an_action_error() {
    let e = plain();
    e.set("scancel.mode", "fail");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(!e.argv("scancel").is_empty());
    assert!(log.contains("action failed") && log.contains("Access/permission denied"), "{log}");
    let failed = e
        .audit()
        .iter()
        .filter(|l| l["action"] == "cancel" && l["outcome"]["outcome"] == "failed")
        .count();
    assert!(failed >= 1);
}

#[test]
fn admin_drained_node_is_left_alone() {
    let e = plain();
    e.set("node.state", "IDLE+DRAIN\n");
    e.set("node.reason", "bad PSU [ticket 77]");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(e.argv("scontrol").iter().all(|a| a[0] == "show"), "neither drained nor resumed");
    e.set("jobs.tsv", "");
    let (ok, _) = e.run(&e.config("enforce", ""), T0 + 6000, 3);
    assert!(ok);
    assert!(e.argv("scontrol").iter().all(|a| a[0] == "show"));
    assert!(e.audit().iter().any(|l| l["skip"] == "node_special_state"), "{:?}", e.audit());
}

#[test]
fn restart_in_the_middle_of_an_escalation() {
    let e = plain();
    let cfg = e.config("enforce", "");
    let (ok, log) = e.run(&cfg, T0, 15);
    assert!(ok, "{log}");
    assert_eq!(
        e.argv("scontrol")
            .iter()
            .filter(|a| a.get(2).map(String::as_str) == Some("State=DRAIN"))
            .count(),
        1
    );
    assert!(e.argv("scancel").is_empty());
    let (ok, log) = e.run(&cfg, T0 + 17 * 60, 40);
    assert!(ok, "{log}");
    assert!(log.contains("state restored"));
    assert_eq!(
        e.argv("scontrol")
            .iter()
            .filter(|a| a.get(2).map(String::as_str) == Some("State=DRAIN"))
            .count(),
        1,
        "not drained twice"
    );
    assert_eq!(e.argv("scancel").len(), 1);
    let cancel_t = e.audit().iter().find(|l| l["action"] == "cancel").unwrap()["t_s"].as_i64().unwrap();
    assert!(cancel_t >= T0 + 17 * 60 + 10 * 60, "a window after the restart at least");
}

#[test]
fn corrupt_state_never_crashes() {
    let e = plain();
    std::fs::create_dir_all(e.state_dir()).unwrap();
    std::fs::write(e.state_dir().join("state.json"), b"\x00\xffnot json").unwrap();
    // Marked as a simulated-clock state_dir, so the simulated run below may use it.
    std::fs::write(e.state_dir().join("simulated-clock"), b"").unwrap();
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 2);
    assert!(ok, "{log}");
    assert!(log.contains("state file not usable") && log.contains("starting from scratch"));
}

#[test]
fn damage_limits_and_pause_file() {
    let e = plain();
    std::fs::create_dir_all(e.state_dir()).unwrap();
    std::fs::write(e.state_dir().join("pause"), b"").unwrap();
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(e.argv("scontrol").iter().all(|a| a[0] == "show") && e.argv("scancel").is_empty() && e.argv("notify").is_empty());
    assert!(e.audit().iter().any(|l| l["skip"] == "paused"));
    // Budget of zero drains: the drain is skipped and logged.
    let e = plain();
    let (ok, _) = e.run(&e.config("enforce", "max_drains_per_hour = 0"), T0, 40);
    assert!(ok);
    assert!(e.argv("scontrol").iter().all(|a| a[0] == "show"));
    assert!(e.audit().iter().any(|l| l["skip"] == "rate_limit" && l["action"] == "drain"));
}

/// Operator trial 14: a paused `run --once` with nothing to act on logged nothing about the
/// pause (only held-back actions said `paused`), so the operator could not tell a paused daemon
/// from one with nothing to do. Every paused cycle now logs one WARN line naming the pause
/// file, also when squeue fails and the cycle ends early.
#[test]
fn a_paused_cycle_says_so_even_with_nothing_to_act_on() {
    let paused_lines = |log: &str| {
        log_lines(log, |v| {
            v["fields"]["message"].as_str().unwrap_or("").starts_with("enforcement paused")
        })
    };
    for (mode, squeue) in [("observe", "ok"), ("enforce", "ok"), ("observe", "fail")] {
        let e = plain();
        std::fs::create_dir_all(e.state_dir()).unwrap();
        let pause = e.state_dir().join("pause");
        std::fs::write(&pause, b"").unwrap();
        e.set("squeue.mode", squeue);
        let clock = format!("{T0}:60");
        let out = e.output(
            &e.config(mode, ""),
            &["--log-format", "json", "--once", "--simulated-clock", &clock],
            true,
        );
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{log}");
        if squeue == "ok" {
            // Nothing to act on: the job is only watching, no action was held back.
            let cycle = log_lines(&log, |v| v["fields"]["message"] == "cycle");
            assert_eq!(cycle.len(), 1, "{log}");
            assert_eq!(cycle[0]["fields"]["actions_skipped"], 0, "{log}");
        }
        let lines = paused_lines(&log);
        assert_eq!(lines.len(), 1, "{mode}, squeue {squeue}: one pause line per cycle:\n{log}");
        let f = &lines[0]["fields"];
        assert_eq!(lines[0]["level"], "WARN", "{log}");
        assert_eq!(f["pause_file"], pause.display().to_string(), "{f}");
        assert_eq!(f["mode"], mode, "{f}");
        let msg = f["message"].as_str().unwrap();
        assert!(
            msg.contains(&pause.display().to_string()) && msg.contains("Remove the file to resume"),
            "{msg}"
        );
    }
    // Not paused: no such line.
    let e = plain();
    let (ok, log) = e.run(&e.config("observe", ""), T0, 2);
    assert!(ok, "{log}");
    assert!(paused_lines(&log).is_empty(), "{log}");
}

/// A pause file that is a dangling symbolic link (its target on a volume not mounted, or
/// removed) still pauses: `Path::exists` follows the link and reads it as no pause, so the
/// daemon drained while the operator had paused it (trial 14's helper found this).
#[test]
fn a_dangling_pause_symlink_still_pauses() {
    let e = plain();
    std::fs::create_dir_all(e.state_dir()).unwrap();
    std::os::unix::fs::symlink("/nonexistent/gpu-reaper-pause", e.state_dir().join("pause")).unwrap();
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(log.contains("enforcement paused"), "{log}");
    assert!(
        e.argv("scontrol").iter().all(|a| a[0] == "show") && e.argv("scancel").is_empty(),
        "a paused daemon acted: {:?} {:?}",
        e.argv("scontrol"),
        e.argv("scancel")
    );
}

#[test]
fn hostile_names_stay_inert() {
    let long = "z".repeat(300);
    let e = env_with_job(
        "5151_7",
        "5160",
        "$(touch x)",
        &format!(";rm -rf / $(touch x)\\n| {long}"),
        ";rm -rf /|$(touch y)",
    );
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(
        !e.dir.path().join("x").exists() && !e.dir.path().join("y").exists(),
        "nothing was executed"
    );
    let notify = e.argv("notify");
    assert_eq!(notify.len(), 1);
    assert_eq!(notify[0][1], "$(touch x)", "the user name arrives as one inert argument");
    assert_eq!(notify[0][2], "5151_7");
    let reason = &notify[0][3];
    // One line: the reason (under 200 characters) and what may follow and when.
    assert!(!reason.contains('\n') && reason.chars().count() < 600, "{reason:?}");
    for a in e.argv("scontrol").iter().chain(e.argv("scancel").iter()).flatten() {
        assert!(!a.contains('\n') && !a.contains("rm -rf"), "{a:?}");
    }
    assert_eq!(e.argv("scancel"), vec![vec!["--verbose".to_string(), "5151_7".to_string()]]);
}

#[test]
fn check_config_and_parse_commands() {
    let bin = env!("CARGO_BIN_EXE_enforcer");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[enforcer]\nnode = \"n\"\nmode = \"enforce\"\nmax_drains = 3\n").unwrap();
    let o = Command::new(bin).args(["check-config"]).arg(&bad).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("max_drains"));
    let example = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/enforcer.example.toml"));
    let o = Command::new(bin).args(["check-config"]).arg(&example).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("mode = \"observe\""));

    // Headerless nvidia-smi text is read only against the query list it was produced with.
    let headerless = "0, GPU-a, [N/A], 10, 80, [Not Supported], 400\n";
    let (ok, v) = parse("nvidia-smi", headerless, &[]);
    assert!(!ok && v["error"].as_str().unwrap().contains("--columns"), "{v}");
    let old = enforcer::parse::smi::GPU_QUERY_WITHOUT_MINOR.join(",");
    let (ok, v) = parse("nvidia-smi", headerless, &["--columns", &old]);
    assert!(ok);
    assert_eq!(v["gpus"][0]["util_pct"], serde_json::Value::Null, "missing is null");
    assert_eq!(v["gpus"][0]["mem_used_mib"], 10.0);
    assert_eq!(v["gpus"][0]["minor"], serde_json::Value::Null, "not queried: null");
    // The enforcer's own list ends with minor_number and mig.mode.current; a 7-field row does
    // not fit it, nor an 8-field one.
    let own = enforcer::parse::smi::GPU_QUERY.join(",");
    let (ok, v) = parse("nvidia-smi", headerless, &["--columns", &own]);
    assert!(!ok, "{v}");
    let (ok, v) = parse(
        "nvidia-smi",
        "0, GPU-a, [N/A], 10, 80, [Not Supported], 400, 6\n",
        &["--columns", &own],
    );
    assert!(!ok, "{v}");
    let (ok, v) = parse(
        "nvidia-smi",
        "0, GPU-a, [N/A], 10, 80, [Not Supported], 400, 6, Enabled\n",
        &["--columns", &own],
    );
    assert!(ok, "{v}");
    assert_eq!(v["gpus"][0]["mig_enabled"], serde_json::json!(true));
    let without_mig = enforcer::parse::smi::GPU_QUERY_WITHOUT_MIG.join(",");
    let (ok, v) = parse(
        "nvidia-smi",
        "0, GPU-a, [N/A], 10, 80, [Not Supported], 400, 6\n",
        &["--columns", &without_mig],
    );
    assert!(ok, "{v}");
    assert_eq!(
        (&v["gpus"][0]["index"], &v["gpus"][0]["minor"]),
        (&serde_json::json!(0), &serde_json::json!(6))
    );
    let (ok, v) = parse("nvidia-smi", "5, 77\n", &["--columns", "index,utilization.gpu"]);
    assert!(ok);
    assert_eq!(v["gpus"][0]["util_pct"], 77.0);
    // Trial 5: a misspelt column name was accepted and its readings silently null. A name
    // that looks like a misspelling of a field the enforcer reads is refused with the right
    // one; any other name (a field the enforcer does not read) is read and ignored.
    let (ok, v) = parse("nvidia-smi", "5, 77\n", &["--columns", "index,utilisation.gpu"]);
    let e = v["error"].as_str().unwrap_or("");
    assert!(
        !ok && e.contains("\"utilisation.gpu\"") && e.contains("did you mean \"utilization.gpu\""),
        "{v}"
    );
    let (ok, v) = parse("compute-apps", "GPU-a, 42, 100\n", &["--columns", "gpu_uuid,pid,used_memroy"]);
    let e = v["error"].as_str().unwrap_or("");
    assert!(!ok && e.contains("did you mean \"used_memory\""), "{v}");
    let (ok, v) = parse("nvidia-smi", "5, 30, 77\n", &["--columns", "index,fan.speed,utilization.gpu"]);
    assert!(ok, "{v}");
    assert_eq!(v["gpus"][0]["util_pct"], 77.0);
    let (ok, v) = parse("nvidia-smi", "No devices were found\n", &[]);
    assert!(!ok);
    assert!(v["error"].as_str().unwrap().contains("no_devices"));
    let (ok, v) = parse("hostlist", "gpu[001-002,005]", &[]);
    assert!(ok);
    assert_eq!(v["hosts"], serde_json::json!(["gpu001", "gpu002", "gpu005"]));
    let (ok, v) = parse("hostlist", "node[01", &[]);
    assert!(!ok && v["error"].is_string());
    let (ok, v) = parse("tres", "gres/gpu:a100=2,gres/gpu=2", &[]);
    assert!(ok);
    assert_eq!(v["gpus"], 2);
    let (ok, v) = parse(
        "squeue-json",
        "{\"jobs\": [{\"job_id\": 5, \"job_state\": \"RUNNING\", \"nodes\": \"n1\", \"tres_alloc_str\": \"gres/gpu=1\"}]}",
        &[],
    );
    assert!(ok);
    assert_eq!(v["jobs"][0]["job_id"], "5");
    for missing in ["user", "account", "partition", "qos", "name", "comment", "start_s", "sluid"] {
        assert_eq!(v["jobs"][0][missing], serde_json::Value::Null, "{missing} is missing: null");
    }
    let (ok, v) = parse(
        "scontrol-node",
        "NodeName=n1 State=MIXED+DRAIN\n   Reason=gpu-reaper: idle job 5 [root@2026-01-01T00:00:00]\n",
        &[],
    );
    assert!(ok);
    assert_eq!(v["reason"], "gpu-reaper: idle job 5");
    let (ok, v) = parse("compute-apps", "gpu_uuid, pid, used_memory [MiB]\nGPU-a, 12, 300\n", &[]);
    assert!(ok);
    assert_eq!(v["apps"][0]["pid"], 12);
    // Headerless compute-apps text defaults to the enforcer's own query order.
    let (ok, v) = parse("compute-apps", "GPU-a, 12, [N/A]\n", &[]);
    assert!(ok, "{v}");
    assert_eq!(
        (v["apps"][0]["gpu_uuid"].as_str(), v["apps"][0]["pid"].as_u64()),
        (Some("GPU-a"), Some(12))
    );
    assert_eq!(v["apps"][0]["used_memory_mib"], serde_json::Value::Null);
    let (ok, v) = parse("compute-apps", "No running processes found\n", &[]);
    assert!(ok, "{v}");
    assert_eq!(v["apps"], serde_json::json!([]));
    // squeue text is read as the daemon reads it: its header line first.
    let header = enforcer::parse::squeue_format::own_header();
    let (ok, v) = parse(
        "squeue",
        &format!("{header}\n9|9|N/A|N/A|RUNNING|u|a|p|q|N/A|n1|gres/gpu=1|\n"),
        &[],
    );
    assert!(ok, "{v}");
    assert_eq!(v["jobs"][0]["job_id"], "9");
    // The enforcer's own format has no name (review 15): the name is unknown, never "".
    assert_eq!(v["jobs"][0]["name"], serde_json::Value::Null, "{v}");
    let (ok, v) = parse("squeue", "9|9|N/A|N/A|RUNNING|u|a|p|q|N/A|n1|gres/gpu=1|\n", &[]);
    assert!(!ok && v["error"].as_str().is_some_and(|e| e.contains("no data")), "{v}");
}

#[test]
fn run_and_check_config_refuse_a_relative_state_dir_and_a_pasted_webhook_url() {
    let e = plain();
    let url = "https://hooks.slack.com/services/T000/B000/XXXX";
    for (extra, key) in [
        ("state_dir = \"\"", "enforcer.state_dir"),
        ("state_dir = \"state\"", "enforcer.state_dir"),
        (&*format!("webhook_url_env = \"{url}\""), "enforcer.webhook_url_env"),
    ] {
        let cfg = e.config("observe", extra);
        let (ok, log) = e.run(&cfg, T0, 1);
        assert!(!ok && log.contains(key), "{extra}: {log}");
        assert!(!log.contains("hooks.slack.com"), "{log}");
        let o = check_config(&cfg);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(key), "{extra}: {err}");
        assert!(!err.contains("hooks.slack.com"), "{err}");
        // Nothing was written into the working directory (`/` under systemd).
        for f in ["state.json", "audit.jsonl", "pause"] {
            assert!(!e.dir.path().join(f).exists(), "{extra}: {f} written into the cwd");
        }
    }
}

#[test]
fn demo_runs_and_shows_escalation() {
    let o = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["demo", "--cycles", "70"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "job 102    alert",
        "WOULD drain   gpu001 Reason=\"gpu-reaper: idle job 102\"",
        "WOULD cancel  job 102",
        "insufficient_evidence",
        "job 101    healthy",
    ] {
        assert!(out.contains(want), "demo output lacks {want:?}:\n{out}");
    }
}

#[test]
fn run_once_with_the_real_clock() {
    let e = plain();
    e.set(
        "jobs.tsv",
        "4242\t4242\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\trel:-7200\tgpu001\tgres/gpu=2\ttrain\t\n",
    );
    let path = format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["run", "--once", "--config"])
        .arg(e.config("observe", "metrics_listen = \"127.0.0.1:0\""))
        .env("PATH", path)
        .env("FAKE_DIR", e.fake_dir())
        .current_dir(e.dir.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("metrics page at http://127.0.0.1:"), "{log}");
    assert_eq!(e.argv("squeue").len(), 1, "one squeue per cycle");
    assert_eq!(e.argv("nvidia-smi").len(), 2, "query-gpu and query-compute-apps");
    let state = std::fs::read_to_string(e.state_dir().join("state.json")).unwrap();
    assert!(state.contains("\"mode\":\"observe\""));
}

#[test]
fn enforce_without_a_channel_to_the_user_is_refused_before_anything_runs() {
    let e = plain();
    let cfg = e.config("enforce", "notify_command = []");
    let (ok, log) = e.run(&cfg, T0, 40);
    assert!(
        !ok && log.contains("enforcer.notify_command") && log.contains("enforcer.webhook_url_env"),
        "{log}"
    );
    assert!(e.argv("scancel").is_empty() && e.argv("scontrol").is_empty() && e.argv("squeue").is_empty());
    let o = check_config(&cfg);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("enforcer.notify_command"), "{err}");
}

/// Trial 5 #3: a post to the webhook is not by itself the user's notice (the webhook often
/// reaches an ops channel, not the job's user). Enforce mode with a reachable cancel and only
/// a webhook is refused before anything runs, naming `webhook_reaches_users`; once the
/// operator says the webhook reaches users, the notice is posted there and the cancel follows.
#[test]
fn a_webhook_is_the_users_notice_only_when_the_config_says_it_reaches_users() {
    const VAR: &str = "GPU_REAPER_TEST_USERS_WEBHOOK_URL";
    std::env::set_var(VAR, "http://127.0.0.1:9/hook");
    let e = plain();
    let (hook, posts) = webhook_only(&e, VAR);
    let ops = e.config("enforce", &hook);
    let (ok, log) = e.run(&ops, T0, 40);
    assert!(!ok && log.contains("enforcer.webhook_reaches_users"), "{log}");
    assert!(e.argv("squeue").is_empty() && !posts.exists(), "refused before anything ran");
    let o = check_config(&ops);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("webhook_reaches_users = true"), "{err}");

    let users = e.config("enforce", &format!("{hook}\nwebhook_reaches_users = true"));
    let (ok, log) = e.run(&users, T0, 40);
    assert!(ok, "{log}");
    let posted = std::fs::read_to_string(&posts).unwrap();
    assert!(posted.contains("notice to user alice"), "{posted}");
    assert_eq!(e.argv("scancel").len(), 1, "{log}");
    assert!(e.argv("notify").is_empty());
}

/// Config lines for the webhook in `var` as the only channel (no notify command), posted by
/// a fake curl in `e`'s folder, and the file each post's curl config is appended to.
fn webhook_only(e: &Env, var: &str) -> (String, PathBuf) {
    let curl = e.dir.path().join("curl");
    let posts = e.dir.path().join("curl.stdin");
    std::fs::write(&curl, format!("#!/bin/sh\ncat >> {}\nexit 0\n", posts.display())).unwrap();
    std::fs::set_permissions(&curl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hook = format!("notify_command = []\nwebhook_url_env = \"{var}\"\ncurl = \"{}\"", curl.display());
    (hook, posts)
}

/// Trial 5 #4 and #5: `check-config` shows every signature's effective ceiling and warns
/// about a sample gap with no slack over the interval and about a cancel stage at "0s"; the
/// daemon logs the same warnings when it starts.
#[test]
fn check_config_shows_every_ceiling_and_warns_about_no_gap_slack_and_an_immediate_cancel() {
    let e = plain();
    let cfg = e.config("observe", "");
    let text: String = std::fs::read_to_string(&cfg)
        .unwrap()
        .lines()
        .map(|l| match l {
            l if l.starts_with("stages = ") => {
                "stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"0s\", verdict = \"cancel\" }]\n".to_string()
            }
            "interval = \"60s\"" => "interval = \"60s\"\nmax_sample_gap = \"60s\"\n".to_string(),
            l => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&cfg, text).unwrap();
    let o = check_config(&cfg);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("[policy.ceilings]\nhung = \"cancel\"\nidle = \"cancel\"\npartial = \"alert\""),
        "{out}"
    );
    assert!(err.contains("warning") && err.contains("policy.max_sample_gap = \"1m\""), "{err}");
    assert!(err.contains("cancel after \"0s\" does not cancel at once"), "{err}");
    let (ok, log) = e.run(&cfg, T0, 1);
    assert!(ok, "{log}");
    assert!(log.contains("config warning") && log.contains("policy.max_sample_gap"), "{log}");
}

#[test]
fn parse_refuses_empty_and_contradictory_input() {
    for kind in ["nvidia-smi", "compute-apps", "squeue", "squeue-json"] {
        for input in ["", "\n\n"] {
            let (ok, v) = parse(kind, input, &[]);
            assert!(!ok && v["error"].as_str().unwrap().contains("empty input"), "{kind} {input:?}: {v}");
        }
    }
    let (ok, v) = parse("nvidia-smi", "", &[]);
    assert!(!ok && v["error"].as_str().unwrap().contains("no_gpus"), "{v}");
    // A header and no row: what the daemon calls no_gpus.
    let (ok, v) = parse("nvidia-smi", "index, uuid, utilization.gpu [%]\n", &[]);
    assert!(!ok && v["error"].as_str().unwrap().contains("no_gpus"), "{v}");
    // "No running processes found" says so: an empty list, not an error.
    let (ok, v) = parse("compute-apps", "No running processes found\n", &[]);
    assert!(ok && v["apps"].as_array().unwrap().is_empty(), "{v}");
    // The same GPU twice with different readings: neither row is believed.
    let two = "index, uuid, utilization.gpu [%]\n0, GPU-a, 0\n0, GPU-a, 97\n1, GPU-b, 5\n";
    let (ok, v) = parse("nvidia-smi", two, &[]);
    assert!(ok, "{v}");
    assert_eq!(v["gpus"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["gpus"][0]["index"], 1);
    assert_eq!(v["row_errors"].as_array().unwrap().len(), 2, "{v}");
    let (ok, v) = parse("tres", "gres/gpu=4,gres/gpu=8", &[]);
    assert!(!ok && v["error"].as_str().unwrap().contains("twice"), "{v}");
    let jobs = r#"{"jobs": [
        {"job_id": 5, "user_name": "alice", "job_state": ["RUNNING"], "nodes": "gpu001"},
        {"job_id": 5, "user_name": "mallory", "job_state": ["RUNNING"], "nodes": "gpu002"}]}"#;
    let (ok, v) = parse("squeue-json", jobs, &[]);
    assert!(ok, "{v}");
    assert!(v["jobs"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["row_errors"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn simulated_clock_and_cycles_are_checked_not_overflowed() {
    let e = plain();
    let cfg = e.config("observe", "");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_enforcer"))
            .args(["run", "--config"])
            .arg(&cfg)
            .args(args)
            .env(
                "PATH",
                format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default()),
            )
            .env("FAKE_DIR", e.fake_dir())
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    // A clock that would leave the representable range is refused before anything runs,
    // whether or not --cycles bounds the run (trial 5: without --cycles it failed only at the
    // cycle that overflowed, after running the ones before).
    for (args, says) in [
        (
            &["--simulated-clock", "9223372036854775000:60000", "--cycles", "3"][..],
            "START_S 9223372036854775000",
        ),
        (
            &["--simulated-clock", "9223372036854775000:60000"][..],
            "START_S 9223372036854775000",
        ),
        (
            &["--simulated-clock", "9223372036854775000:60000", "--cycles", "1"][..],
            "9999-12-31",
        ),
        (
            &["--simulated-clock", "1900000000:9223372036854775000"][..],
            "STEP_S 9223372036854775000",
        ),
        (&["--simulated-clock=-5:60"][..], "START_S -5"),
        (&["--simulated-clock", "1900000000:0", "--cycles", "3"][..], "at least 1 second"),
        (&["--simulated-clock", "1900000000:-60", "--cycles", "3"][..], "at least 1 second"),
        (&["--simulated-clock", "1900000000", "--cycles", "3"][..], "START_S:STEP_S"),
        (&["--simulated-clock", "1900000000:60", "--cycles", "0"][..], "--cycles 0"),
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(says) && !err.contains("panicked"), "{args:?}: {err}");
        assert!(e.argv("squeue").is_empty(), "{args:?}: refused before any cycle ran");
    }
    // The last second of year 9999 with the largest step, run until stopped: every cycle's
    // time fits for longer than any run lasts, so it starts.
    let (code, err) = run(&["--simulated-clock", "253402300799:31622400", "--cycles", "2"]);
    assert_eq!(code, Some(0), "{err}");
}

/// `--simulated-clock` never reaches a real cluster by mistake: refused in enforce mode without
/// the test-only variable (before any Slurm command runs), and refused on a state_dir that
/// holds a real-clock run's state; allowed again on its own simulated state.
#[test]
fn simulated_clock_is_refused_in_enforce_mode_and_on_real_state() {
    let e = plain();
    let path = format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default());
    let run = |mode: &str, simulated: bool, allow: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_enforcer"));
        c.args(["run", "--once", "--config"])
            .arg(e.config(mode, ""))
            .env("PATH", &path)
            .env("FAKE_DIR", e.fake_dir())
            .env_remove("GPU_REAPER_ALLOW_SIMULATED_ENFORCE");
        if simulated {
            c.args(["--simulated-clock", &format!("{T0}:60")]);
        }
        if allow {
            c.env("GPU_REAPER_ALLOW_SIMULATED_ENFORCE", "1");
        }
        let o = c.output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = run("enforce", true, false);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("mode = \"enforce\": refused"), "{err}");
    assert!(e.argv("squeue").is_empty() && e.argv("scancel").is_empty(), "nothing ran");
    assert!(!e.state_dir().join("state.json").exists());
    // A real-clock observe run writes state; a simulated run on it is refused, even when
    // the test-only variable allows enforce mode.
    let (code, err) = run("observe", false, false);
    assert_eq!(code, Some(0), "{err}");
    assert!(e.state_dir().join("state.json").exists());
    for (mode, allow) in [("observe", false), ("enforce", true)] {
        let (code, err) = run(mode, true, allow);
        assert_eq!(code, Some(1), "{mode}: {err}");
        assert!(err.contains("written by a real-clock run"), "{mode}: {err}");
    }
    // A fresh state_dir: a simulated run is allowed, and again on its own state.
    std::fs::remove_dir_all(e.state_dir()).unwrap();
    for _ in 0..2 {
        let (code, err) = run("observe", true, false);
        assert_eq!(code, Some(0), "{err}");
    }
}

#[test]
fn every_cycle_logs_a_one_line_summary_even_when_nothing_alerts() {
    let e = plain();
    let path = format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["--log-format", "json", "run", "--once", "--config"])
        .arg(e.config("observe", ""))
        .args(["--simulated-clock", &format!("{T0}:60")])
        .env("PATH", path)
        .env("FAKE_DIR", e.fake_dir())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let lines = log_lines(&log, |v| v["fields"]["message"] == "cycle");
    assert_eq!(lines.len(), 1, "{log}");
    let f = &lines[0]["fields"];
    assert_eq!(lines[0]["level"], "INFO");
    assert_eq!(f["jobs_seen"], 1, "{f}");
    assert_eq!(f["jobs_on_node"], 1, "{f}");
    assert_eq!(f["gpus_read"], 2, "{f}");
    // A job started two hours ago on idle GPUs, first sample: breaching, not yet at alert.
    assert_eq!(f["verdicts"], "watching=1", "{f}");
    assert_eq!(f["t_s"], T0, "{f}");
    assert_eq!(f["actions_done"], 0, "{f}");
    assert_eq!(f["actions_skipped"], 0, "{f}");
}

/// Trial 10: a job in warmup was counted `healthy=1` in the cycle line, as if it had been
/// judged. The line now says how many of those are only too young to judge.
#[test]
fn the_cycle_line_counts_jobs_in_warmup_apart() {
    let e = plain();
    two_one_gpu_jobs(&e, [("4242", "alice", T0 - 300), ("4243", "bob", T0 - 7200)]);
    // Both GPUs busy: the old job is judged healthy, the young one is not judged.
    e.set("gpus.txt", "0 GPU-0 90 5 30000 81920 300 400\n1 GPU-1 90 5 30000 81920 301 400\n");
    e.set("apps.csv", "GPU-0, 5001, 30000\nGPU-1, 5002, 30000\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 2);
    assert!(ok, "{log}");
    let cycles = log_lines(&log, |v| v["fields"]["message"] == "cycle");
    assert_eq!(cycles.len(), 2, "{log}");
    for c in &cycles {
        let f = &c["fields"];
        assert_eq!(f["jobs_evaluated"], 2, "{f}");
        assert_eq!(f["verdicts"], "healthy=2", "{f}");
        assert_eq!(f["jobs_in_warmup"], 1, "{f}");
    }
}

/// Trial 10: a running job whose start time is later than the node's clock got no warning,
/// though it means the node's clock and slurmctld's disagree. Warned once per run of the job.
#[test]
fn a_start_time_later_than_the_clock_is_warned_once() {
    let e = plain();
    let ahead = T0 + 900;
    e.set(
        "jobs.tsv",
        &format!("4242\t4242\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\t{ahead}\tgpu001\tcpu=8,gres/gpu=2\ttrain\t\n"),
    );
    let (ok, log) = e.run(&e.config("observe", ""), T0, 3);
    assert!(ok, "{log}");
    let warned = log_lines(&log, |v| {
        v["level"] == "WARN"
            && v["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("later than this node's clock")
    });
    assert_eq!(warned.len(), 1, "{log}");
    assert_eq!(warned[0]["fields"]["job_id"], "4242");
    assert_eq!(warned[0]["fields"]["ahead_s"], 900);
    // A start in the past: nothing to say.
    let e = plain();
    let (ok, log) = e.run(&e.config("observe", ""), T0, 2);
    assert!(ok && !log.contains("later than this node's clock"), "{log}");
}

/// Trial 11: a second enforcer in enforce mode for the same node, given its own state_dir as
/// the state_dir lock's message advised, sent every notice twice and cancelled within its own
/// budget. Enforce mode now takes a node lock; observe mode beside it is still allowed.
#[test]
fn a_second_enforcing_daemon_for_one_node_is_refused_whatever_its_state_dir() {
    let e = plain();
    // The lock held by another process's open file (here: this test's).
    let held = enforcer::state::lock_node_for_enforce(&e.enforce_lock_dir(), "gpu001").unwrap();
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 1);
    assert!(!ok, "{log}");
    assert!(
        log.contains("node gpu001 is already enforced by another enforcer") && log.contains("gpu-reaper-enforce-gpu001.lock"),
        "{log}"
    );
    assert!(!e.state_dir().join("state.json").exists(), "it stopped before its first cycle");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 1);
    assert!(ok, "observe mode takes no node lock: {log}");
    // Another node's lock does not stand in the way, and a released one is taken.
    let other = enforcer::state::lock_node_for_enforce(&e.enforce_lock_dir(), "gpu002").unwrap();
    drop(held);
    let (ok, log) = e.run(&e.config("enforce", ""), T0 + 60, 1);
    assert!(ok, "{log}");
    drop(other);
}

/// Trial 10: a container's own /proc passed the start-up check (it has processes) though it
/// hides every job's. Compute processes none of which proc_root has, two reads in a row, are
/// warned about; one that is there, or one read alone, says nothing.
#[test]
fn compute_processes_hidden_from_proc_root_are_warned_about() {
    let warned = |log: &str| {
        log_lines(log, |v| {
            v["level"] == "WARN" && v["fields"]["message"].as_str().unwrap_or("").contains("another PID namespace")
        })
        .len()
    };
    // PIDs 7001 and 7002 are not in the fake proc root.
    let e = plain();
    e.set("apps.csv", "GPU-0, 7001, 30000\nGPU-1, 7002, 30000\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 3);
    assert!(ok, "{log}");
    assert_eq!(warned(&log), 1, "warned once, at the second read: {log}");
    let (ok, log) = e.run(&e.config("observe", ""), T0 + 3600, 1);
    assert!(ok && warned(&log) == 0, "one read says nothing: {log}");
    // One of them is there: the namespace is this one.
    let e = plain();
    std::fs::create_dir_all(e.fake_dir().join("proc/7001")).unwrap();
    e.set(
        "proc/7001/cgroup",
        "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
    );
    e.set("apps.csv", "GPU-0, 7001, 30000\nGPU-1, 7002, 30000\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 3);
    assert!(ok && warned(&log) == 0, "{log}");
}

impl Env {
    /// The state_dir's state.json, audit.jsonl and marker, byte for byte (empty when absent).
    fn state_bytes(&self) -> Vec<Vec<u8>> {
        ["state.json", "audit.jsonl", "simulated-clock"]
            .iter()
            .map(|f| std::fs::read(self.state_dir().join(f)).unwrap_or_default())
            .collect()
    }
}

fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The trial's case: 80 simulated cycles at 1,800,000,000 (weeks ahead of the real clock),
/// then a real-clock run on the same state_dir. The real run is refused before it reads or
/// writes anything, naming the state_dir and what to do; the state stays as it was, marker
/// included, so the simulated state never turns into real-clock state.
#[test]
fn real_clock_run_refuses_a_simulated_state_dir() {
    let e = plain();
    let cfg = e.config("observe", "");
    let sim_start = epoch_now() + 46 * 86_400;
    let (code, err) = e.run_with(&cfg, &["--simulated-clock", &format!("{sim_start}:60"), "--cycles", "80"]);
    assert_eq!(code, Some(0), "{err}");
    let before = e.state_bytes();
    assert!(!before[0].is_empty() && !before[2].is_empty(), "state and marker written");
    let squeue_calls = e.argv("squeue").len();
    let (code, err) = e.run_with(&cfg, &["--once"]);
    assert_eq!(code, Some(1), "{err}");
    let state_dir = e.state_dir().display().to_string();
    assert!(
        err.contains(&state_dir) && err.contains("--simulated-clock") && err.contains("Move the state_dir aside"),
        "{err}"
    );
    assert!(!err.contains("state restored"), "{err}");
    assert_eq!(e.state_bytes(), before, "nothing rewritten, marker kept");
    assert_eq!(e.argv("squeue").len(), squeue_calls, "refused before any Slurm read");
    // Even a marker with no state.json beside it (a simulated run that never saved) is refused:
    // the audit log may still hold simulated records.
    std::fs::remove_file(e.state_dir().join("state.json")).unwrap();
    let (code, err) = e.run_with(&cfg, &["--once"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!e.state_dir().join("state.json").exists());
    // The simulated run that wrote it may still go on with it.
    let (code, err) = e.run_with(
        &cfg,
        &["--simulated-clock", &format!("{}:60", sim_start + 80 * 60), "--cycles", "2"],
    );
    assert_eq!(code, Some(0), "{err}");
    // Moved aside as the message says, the real-clock run starts fresh.
    std::fs::rename(e.state_dir(), e.dir.path().join("state.simulated")).unwrap();
    let (code, err) = e.run_with(&cfg, &["--once"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(e.state_dir().join("state.json").exists() && !e.state_dir().join("simulated-clock").exists());
}

/// A state.json saved later than the real clock plus `policy.clock_skew` (a copied state, a
/// clock that was wrong when it was written) is refused by a real-clock run; one within the
/// skew is resumed.
#[test]
fn real_clock_run_refuses_state_saved_beyond_the_clock_skew() {
    for (ahead_s, accepted) in [(20, true), (600, false), (46 * 86_400, false)] {
        let e = plain();
        let cfg = e.config("observe", "");
        let (code, err) = e.run_with(&cfg, &["--simulated-clock", &format!("{}:60", epoch_now() + ahead_s), "--once"]);
        assert_eq!(code, Some(0), "{err}");
        // Without the marker, only saved_s tells the state's clock.
        std::fs::remove_file(e.state_dir().join("simulated-clock")).unwrap();
        let before = e.state_bytes();
        let (code, err) = e.run_with(&cfg, &["--once"]);
        if accepted {
            assert_eq!(code, Some(0), "{ahead_s}: {err}");
            assert!(err.contains("state restored"), "{err}");
        } else {
            assert_eq!(code, Some(1), "{ahead_s}: {err}");
            assert!(
                err.contains("policy.clock_skew (60 s)") && err.contains("state.json aside"),
                "{err}"
            );
            assert!(err.contains(&e.state_dir().display().to_string()), "{err}");
            assert_eq!(e.state_bytes(), before, "{ahead_s}: nothing rewritten");
        }
    }
}

/// A simulated run continues the clock of the state it resumes: a START_S earlier than the
/// state's saved_s is refused, the same or a later one is accepted.
#[test]
fn simulated_run_refuses_to_start_before_its_state() {
    let e = plain();
    let cfg = e.config("observe", "");
    let (code, err) = e.run_with(&cfg, &["--simulated-clock", &format!("{T0}:60"), "--cycles", "5"]);
    assert_eq!(code, Some(0), "{err}");
    let saved = T0 + 4 * 60;
    let before = e.state_bytes();
    for start in [T0, saved - 1] {
        let (code, err) = e.run_with(&cfg, &["--simulated-clock", &format!("{start}:60"), "--once"]);
        assert_eq!(code, Some(1), "{start}: {err}");
        assert!(
            err.contains(&format!("START_S {start} is earlier than the saved_s {saved}")),
            "{err}"
        );
        assert_eq!(e.state_bytes(), before, "{start}: nothing rewritten");
    }
    for start in [saved, saved + 600] {
        let (code, err) = e.run_with(&cfg, &["--simulated-clock", &format!("{start}:60"), "--once"]);
        assert_eq!(code, Some(0), "{start}: {err}");
    }
}

/// `check-config` takes the file as `--config FILE`, as `run` does, and positionally.
#[test]
fn check_config_takes_config_flag_or_positional_file() {
    let bin = env!("CARGO_BIN_EXE_enforcer");
    let example = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/enforcer.example.toml"));
    for args in [&["check-config", "--config"][..], &["check-config"][..]] {
        let o = Command::new(bin).args(args).arg(&example).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("mode = \"observe\""), "{args:?}");
    }
    let o = Command::new(bin).args(["check-config"]).output().unwrap();
    assert!(!o.status.success(), "no file given");
    let o = Command::new(bin)
        .args(["check-config", "--config"])
        .arg(&example)
        .arg(&example)
        .output()
        .unwrap();
    assert!(!o.status.success(), "both forms at once is ambiguous");
}

/// The demo config's comment states the suspect-collector defaults as the code has them.
#[test]
fn demo_config_comment_states_the_real_suspect_default() {
    let text = std::fs::read_to_string(fakes().join("demo/config.toml")).unwrap();
    let d = enforcer::config::EnforcerConfig::default();
    assert_eq!(d.suspect_frac, 0.5, "update the demo comment and this test with the default");
    let said = format!("from {} jobs, more than half alerting", d.suspect_min_jobs);
    assert!(text.contains(&said), "demo config.toml should say {said:?}");
}

/// The alerts in the audit log: (t_s, reason).
fn alerts(e: &Env) -> Vec<(i64, String)> {
    e.audit()
        .iter()
        .filter(|l| l["action"] == "alert")
        .map(|l| (l["t_s"].as_i64().unwrap(), l["reason"].as_str().unwrap().to_string()))
        .collect()
}

/// Restarts keep windows, not escalation: the breach found on the restored window is dated
/// from that window's start, at most one `window` before the restart. An alert made since then
/// still counts for the breach and is not repeated; an older one does not, and the user is
/// alerted again. The trial's "the first restart did not re-alert, the second did" is this
/// rule: the first restart came within a window of the last alert, the second long after it
/// (and after a downtime longer than the window, so the breach and its "for N m" start again
/// from the restart).
#[test]
fn restart_re_alerts_only_when_the_alert_predates_the_restored_window() {
    let e = plain();
    let cfg = e.config("observe", "");
    // Window 10m: the alert rung at T0+7m, the drain rung at T0+10m.
    let (ok, log) = e.run(&cfg, T0, 15);
    assert!(ok, "{log}");
    let first: Vec<i64> = alerts(&e).iter().map(|a| a.0).collect();
    assert_eq!(first, [T0 + 7 * 60, T0 + 10 * 60]);
    // Restart 1 at T0+15m: the restored window starts at T0+5m, before the last alert (T0+10m),
    // which therefore still counts. No new alert.
    let (ok, log) = e.run(&cfg, T0 + 15 * 60, 5);
    assert!(ok, "{log}");
    assert!(log.contains("state restored"), "{log}");
    assert_eq!(alerts(&e).len(), 2, "{:?}", alerts(&e));
    // Restart 2 at T0+40m, 21 minutes down: the window has emptied, the breach is dated from
    // the restart, and the T0+10m alert belongs to no breach the engine still sees.
    let restart = T0 + 40 * 60;
    let (ok, log) = e.run(&cfg, restart, 15);
    assert!(ok, "{log}");
    let again = alerts(&e);
    assert_eq!(again.len(), 4, "{again:?}");
    assert_eq!(again[2].0, restart + 7 * 60, "{again:?}");
    assert!(again[2].1.contains("for 7m"), "counted from the restart: {}", again[2].1);
}
/// A one-minute restart long after the last alert re-alerts at once: the restored window
/// starts after that alert, and the reason's "for N m" counts from that window's start.
#[test]
fn short_restart_long_after_the_last_alert_re_alerts_at_once() {
    let e = plain();
    let cfg = e.config("observe", "");
    let (ok, log) = e.run(&cfg, T0, 40);
    assert!(ok, "{log}");
    let before = alerts(&e);
    let last = before.last().unwrap().0;
    assert!(last < T0 + 29 * 60, "no alert in the last window before the restart: {before:?}");
    let restart = T0 + 40 * 60;
    let (ok, log) = e.run(&cfg, restart, 3);
    assert!(ok, "{log}");
    let after = alerts(&e);
    assert_eq!(after.len(), before.len() + 2, "alert, then the drain rung: {after:?}");
    let (t, reason) = &after[before.len()];
    assert_eq!(*t, restart, "{after:?}");
    assert!(reason.contains("alert idle") && reason.contains("for 9m"), "{reason}");
}

/// The trial's setup: our drain naming job 102 stands on gpu001, job_source = "format", and
/// squeue exits 0 with nothing on stderr but prints nothing, or only `CLUSTER: cluster1`
/// (samples B8). That is no reading of the queue: the cycle is skipped and the node is not
/// resumed. A header with no rows is the positive reading of an empty queue, and resumes.
#[test]
fn format_source_resumes_only_on_a_header_never_on_empty_output() {
    let e = plain();
    e.set("jobs.tsv", "");
    e.set("node.state", "MIXED+DRAIN\n");
    e.set("node.reason", "gpu-reaper: idle job 102");
    let header = "JOBID|JOBID|HET_JOB_ID|HET_JOB_OFFSET|STATE|USER|ACCOUNT|PARTITION|QOS|START_TIME|NODELIST|TRES_ALLOC|";
    let extra = "job_source = \"format\"\n[policy.exempt]\ncomment_marker = \"\"";
    let updates = |e: &Env| e.argv("scontrol").into_iter().filter(|a| a[0] == "update").collect::<Vec<_>>();
    for mode in ["observe", "enforce"] {
        let cfg = e.config(mode, extra);
        for text in ["", "CLUSTER: cluster1\n", "\n\n"] {
            e.set("squeue.txt", text);
            let (ok, log) = e.run(&cfg, T0, 1);
            assert!(ok, "{log}");
            assert!(
                !log.contains("would resume") && !log.contains("job 102 gone"),
                "{mode} {text:?}: {log}"
            );
            assert!(
                log.contains("cycle skipped") && log.contains("the queue was not read"),
                "{mode} {text:?}: {log}"
            );
            assert!(updates(&e).is_empty(), "{mode} {text:?}: {:?}", updates(&e));
        }
    }
    // One CLUSTER: line above the header is skipped with a note; the empty queue it shows is read.
    e.set("squeue.txt", &format!("CLUSTER: cluster1\n{header}\n"));
    let (ok, log) = e.run(&e.config("observe", extra), T0, 1);
    assert!(ok, "{log}");
    assert!(log.contains("CLUSTER: line") && log.contains("cluster1"), "{log}");
    assert!(log.contains("would resume") && log.contains("job 102 gone"), "{log}");
    assert!(updates(&e).is_empty(), "observe mode acts on nothing");
    e.set("squeue.txt", &format!("{header}\n"));
    let (ok, log) = e.run(&e.config("enforce", extra), T0, 1);
    assert!(ok, "{log}");
    assert_eq!(
        updates(&e),
        vec![vec!["update".to_string(), "NodeName=gpu001".into(), "State=RESUME".into()]],
        "{log}"
    );
}

/// Enforce mode whose only notice channel is a webhook variable that is not set: check-config
/// warns naming the variable (its environment may not be the daemon's) and exits 0; `run`
/// refuses to start before reading anything. With the variable set it runs; with a notify
/// command as well it runs and warns.
#[test]
fn an_unset_webhook_variable_warns_in_check_config_and_stops_an_enforce_run_when_it_is_the_only_channel() {
    const VAR: &str = "GPU_REAPER_TEST_NOPE_NOT_SET";
    let e = plain();
    let only = e.config(
        "enforce",
        &format!("notify_command = []\nwebhook_url_env = \"{VAR}\"\nwebhook_reaches_users = true"),
    );
    let cmd = |args: &[&str], cfg: &Path, url: Option<&str>| {
        let path = format!("{}:{}", fakes().display(), std::env::var("PATH").unwrap_or_default());
        let mut c = Command::new(env!("CARGO_BIN_EXE_enforcer"));
        c.args(args)
            .arg(cfg)
            .env("PATH", path)
            .env("FAKE_DIR", e.fake_dir())
            .env("GPU_REAPER_ALLOW_SIMULATED_ENFORCE", "1")
            .env_remove(VAR)
            .current_dir(e.dir.path());
        if let Some(u) = url {
            c.env(VAR, u);
        }
        let o = c.output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = cmd(&["check-config"], &only, None);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning") && err.contains(VAR) && err.contains("refuses to start"),
        "{err}"
    );
    let (code, err) = cmd(&["check-config"], &only, Some("http://127.0.0.1:9/hook"));
    // The config names node gpu001: on a host of another name check-config also warns about
    // that (see a_node_hostname_of_another_host_holds_every_action_and_check_config_warns).
    let others: Vec<&str> = err.lines().filter(|l| !l.contains("enforcer.node = \"gpu001\"")).collect();
    assert_eq!((code, others), (Some(0), vec![]), "set: no warning");

    let run = ["run", "--simulated-clock", "1900000000:60", "--cycles", "1", "--config"];
    let (code, err) = cmd(&run, &only, None);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains(VAR) && err.contains("only notice channel"), "{err}");
    assert!(e.argv("squeue").is_empty(), "refused before anything ran");
    let (code, err) = cmd(&run, &only, Some("http://127.0.0.1:9/hook"));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(e.argv("squeue").len(), 1);
    let both = e.config("enforce", &format!("webhook_url_env = \"{VAR}\""));
    let (code, err) = cmd(&run, &both, None);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("notice channel will fail") && err.contains(VAR), "{err}");
}

/// Review 4: our drain naming job 102 stands on gpu001, job_source = "format", and squeue
/// (a script printing `squeue.txt` on stdout and `squeue.err` on stderr, exit 0) prints
/// something that does not positively show the queue. None of these may resume the node.
/// Returns the cases that resumed it.
fn format_outputs_that_resume(cases: &[(&str, String, &str)]) -> Vec<String> {
    outputs_that_resume("format", cases)
}

/// [`format_outputs_that_resume`] for any `job_source` (`format` or `json`).
fn outputs_that_resume(source: &str, cases: &[(&str, String, &str)]) -> Vec<String> {
    let mut resumed = Vec::new();
    for (what, stdout, stderr) in cases {
        let e = plain();
        e.set("jobs.tsv", "");
        e.set("node.state", "MIXED+DRAIN\n");
        e.set("node.reason", "gpu-reaper: idle job 102");
        e.set("squeue.txt", stdout);
        e.set("squeue.err", stderr);
        let prog = e.dir.path().join("squeue-any");
        std::fs::write(
            &prog,
            "#!/bin/sh\ncat \"$FAKE_DIR/squeue.txt\"\ncat \"$FAKE_DIR/squeue.err\" >&2\nexit 0\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let extra = format!(
            "job_source = \"{source}\"\nsqueue = \"{}\"\n[policy.exempt]\ncomment_marker = \"\"",
            prog.display()
        );
        let cfg = e.config("enforce", &extra);
        let (ok, log) = e.run(&cfg, T0, 1);
        assert!(ok, "{what}: {log}");
        let resumes = e
            .argv("scontrol")
            .into_iter()
            .filter(|a| a.iter().any(|x| x == "State=RESUME"))
            .count();
        if resumes > 0 || log.contains("job 102 gone") {
            resumed.push(format!("{what}: {stdout:?} / stderr {stderr:?}"));
        }
    }
    resumed
}

const OWN_HEADER: &str = "JOBID|JOBID|HET_JOB_ID|HET_JOB_OFFSET|STATE|USER|ACCOUNT|PARTITION|QOS|START_TIME|NODELIST|TRES_ALLOC|";

/// Outputs that are not a reading of the queue: every one is refused today.
#[test]
fn format_outputs_without_the_queue_never_resume() {
    let h = OWN_HEADER;
    let h12 = h.replace("TRES_ALLOC|", "");
    let h14 = h.replace("TRES_ALLOC|", "TRES_ALLOC|COMMENT|");
    let with_name = format!("{h}NAME");
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), ""),
        ("blank lines", "\n \n\t\n".into(), ""),
        ("crlf blank", "\r\n\r\n".into(), ""),
        ("12 columns", format!("{h12}\n"), ""),
        ("14 columns", format!("{h14}\n"), ""),
        ("the header with NAME last (review 15)", format!("{with_name}\n"), ""),
        ("header with a trailing |", format!("{h}|\n"), ""),
        ("cluster crlf only", "CLUSTER: c1\r\n".into(), ""),
        ("bom before header", format!("\u{feff}{h}\n"), ""),
        ("cluster after header", format!("{h}\nCLUSTER: c2\n"), ""),
        ("cluster after blank after header", format!("{h}\n\n  CLUSTER: c2\n"), ""),
        ("two clusters", format!("CLUSTER: c1\nCLUSTER: c2\n{h}\n"), ""),
        ("warning line on stdout", format!("squeue: warning: x\n{h}\n"), ""),
        ("header twice", format!("{h}\n{h}\n"), ""),
        (
            "stderr timeout, exit 0",
            String::new(),
            "slurm_load_jobs error: Socket timed out on send/recv operation\n",
        ),
        (
            "stderr warning, exit 0, no header",
            "CLUSTER: c1\n".into(),
            "squeue: warning: something\n",
        ),
        (
            "row before header",
            format!("102|102|N/A|N/A|RUNNING|u|a|p|q|N/A|gpu002|gres/gpu=1|\n{h}\n"),
            "",
        ),
        (
            "header and an unreadable row",
            format!("{h}\n102|102|N/A|N/A|RUNNING|u|a|p|q|not-a-time|gpu001|gres/gpu=1|\n"),
            "",
        ),
    ];
    let resumed = format_outputs_that_resume(&cases);
    assert!(resumed.is_empty(), "resumed on: {resumed:#?}");
}

/// The positive readings of a queue without job 102 do resume (controls that the harness can
/// see a resume): a header with trailing spaces, CRLF line ends, one CLUSTER: line above it.
#[test]
fn format_positive_empty_queues_resume() {
    let h = OWN_HEADER;
    for (what, out) in [
        ("plain", format!("{h}\n")),
        ("trailing spaces", format!("{h}   \n")),
        ("crlf", format!("{h}\r\n")),
        ("bare CRs after the header (whitespace)", format!("{h}\r\r")),
        ("cluster crlf", format!("CLUSTER: c1\r\n{h}\r\n\r\n")),
    ] {
        let resumed = format_outputs_that_resume(&[(what, out, "")]);
        assert_eq!(resumed.len(), 1, "{what} must resume");
    }
}

/// A header with the right column count, `JOBID` first and `NAME` last, but other columns
/// between (here USER and STATE swapped, as a site wrapper that rewrites `--Format` would
/// print; or any one middle title replaced) is not the queue: read by position, job 102's
/// state would read "alice" and the drain naming the still running job would be resumed.
/// Every title must be squeue's own for its field.
#[test]
fn a_header_with_other_middle_columns_is_not_the_queue() {
    let swapped = OWN_HEADER.replace("STATE|USER", "USER|STATE");
    let row = "102|102|N/A|N/A|alice|RUNNING|ml|gpu|normal|N/A|gpu001|cpu=8,gres/gpu=2|\n";
    let mut cases = vec![("swapped middle columns", format!("{swapped}\n{row}"), "")];
    // Every other single title replaced, with no rows below: no queue either.
    let titles: Vec<&str> = OWN_HEADER.split('|').collect();
    for i in 1..titles.len() - 1 {
        let mut t = titles.clone();
        t[i] = "COMMENT";
        cases.push(("one middle title replaced", format!("{}\n", t.join("|")), ""));
    }
    let resumed = format_outputs_that_resume(&cases);
    assert!(resumed.is_empty(), "resumed on: {resumed:#?}");
    // Control: the right header over a row that puts job 102 elsewhere does resume.
    let row = "102|102|N/A|N/A|RUNNING|alice|ml|gpu|normal|N/A|gpu002|cpu=8,gres/gpu=2|\n";
    let resumed = format_outputs_that_resume(&[("elsewhere", format!("{OWN_HEADER}\n{row}"), "")]);
    assert_eq!(resumed.len(), 1, "job 102 on gpu002 must resume");
}

/// With the format source squeue prints one state word, and a recognized state *flag* is
/// printed instead of the base state (Slurm job_state_codes.html: "If a recognized flag is
/// present, it will be reported instead of the base state"): a RUNNING job being signalled
/// (`--signal=USR1@120`, a preemption notice) shows as `SIGNALING`, one being resized as
/// `RESIZING`. Such a row has no base state, and a flag with no base state says nothing
/// about whether the job ended: the state is unknown, never "gone", so while the row lists
/// gpu001 the drain naming job 102 stays (review 4 found it resumed). A base state that says
/// the job left (PENDING, COMPLETED, CANCELLED) still resumes it.
#[test]
fn a_state_flag_alone_does_not_mean_the_job_ended() {
    let h = OWN_HEADER;
    let mut resumed = Vec::new();
    for state in ["SIGNALING", "RESIZING", "CONFIGURING", "COMPLETING", "SOME_NEW_FLAG"] {
        let row = format!("102|102|N/A|N/A|{state}|alice|ml|gpu|normal|N/A|gpu001|cpu=8,gres/gpu=2|\n");
        resumed.extend(format_outputs_that_resume(&[(state, format!("{h}\n{row}"), "")]));
    }
    assert!(resumed.is_empty(), "resumed on: {resumed:#?}");
    // Control: a base state that says the job left the node does resume.
    for state in ["PENDING", "COMPLETED", "CANCELLED"] {
        let row = format!("102|102|N/A|N/A|{state}|alice|ml|gpu|normal|N/A||cpu=8,gres/gpu=2|\n");
        let resumed = format_outputs_that_resume(&[(state, format!("{h}\n{row}"), "")]);
        assert_eq!(resumed.len(), 1, "{state} must resume");
    }
}

/// A RUNNING (or SIGNALING) row for job 102 whose NodeList is empty, `(null)` or `N/A` must
/// not read as a job running on no node, which would resume the drain naming it (review 4).
/// A running job always has nodes: a RUNNING row without them is unreadable evidence (a row
/// error, which makes the read incomplete), never "elsewhere". The JSON source is checked by
/// the next test.
#[test]
fn a_running_job_without_nodes_is_not_gone_from_the_node() {
    let h = OWN_HEADER;
    let mut resumed = Vec::new();
    for nodes in ["", "(null)", "N/A"] {
        for state in ["RUNNING", "SIGNALING"] {
            let row = format!("102|102|N/A|N/A|{state}|alice|ml|gpu|normal|N/A|{nodes}|cpu=8,gres/gpu=2|\n");
            resumed.extend(format_outputs_that_resume(&[(state, format!("{h}\n{row}"), "")]));
        }
    }
    assert!(resumed.is_empty(), "resumed on: {resumed:#?}");
}

/// The JSON source, same drain: job 102 RUNNING with `nodes` empty, `null`, absent, `(null)`
/// or `N/A` is a row error (the read is incomplete, no job is gone), and a `job_state` that is
/// a flag alone (the string form older data parsers print, or a list without a base state)
/// is of unknown state, never ended, while the job lists gpu001. Controls: job 102 RUNNING
/// on gpu002, or PENDING with no nodes, does resume.
#[test]
fn json_a_running_job_without_nodes_or_with_a_flag_alone_is_not_gone_from_the_node() {
    let job = |state: &str, nodes: &str| {
        let nodes = if nodes.is_empty() {
            String::new()
        } else {
            format!(", \"nodes\": {nodes}")
        };
        format!(
            r#"{{"jobs": [{{"job_id": 102, "job_state": {state}, "user_name": "alice", "start_time": 1700000000, "tres_alloc_str": "cpu=8,gres/gpu=2", "name": "train"{nodes}}}], "errors": []}}"#
        )
    };
    let mut cases = Vec::new();
    for nodes in [r#""""#, "null", "", r#""(null)""#, r#""N/A""#] {
        cases.push(("running, no nodes", job(r#"["RUNNING"]"#, nodes), ""));
        cases.push(("running string, no nodes", job(r#""RUNNING""#, nodes), ""));
    }
    for state in [
        r#""SIGNALING""#,
        r#""RESIZING""#,
        r#""CONFIGURING""#,
        r#""COMPLETING""#,
        r#"["SIGNALING"]"#,
    ] {
        cases.push(("flag alone on gpu001", job(state, r#""gpu001""#), ""));
    }
    let resumed = outputs_that_resume("json", &cases);
    assert!(resumed.is_empty(), "resumed on: {resumed:#?}");
    for (what, out) in [
        ("running elsewhere", job(r#"["RUNNING"]"#, r#""gpu002""#)),
        ("pending", job(r#"["PENDING"]"#, r#""""#)),
    ] {
        let resumed = outputs_that_resume("json", &[(what, out, "")]);
        assert_eq!(resumed.len(), 1, "{what} must resume");
    }
}

/// This machine's host name up to the first dot, or `None` when it cannot be read.
fn this_short_hostname() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim().split('.').next()?.to_string();
    (!h.is_empty()).then_some(h)
}

#[test]
fn a_node_hostname_of_another_host_holds_every_action_and_check_config_warns() {
    // scontrol says the configured node gpu001 is another host: nothing is changed, nobody is
    // told, an ERROR names both names and the key.
    let e = plain();
    e.set("node.hostname", "reaper-other-host-0001.cluster.example");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
    assert!(ok, "{log}");
    assert!(e.argv("scontrol").iter().all(|a| a[0] == "show"), "{:?}", e.argv("scontrol"));
    assert!(e.argv("scancel").is_empty() && e.argv("notify").is_empty());
    let errors = log_lines(&log, |v| v["level"] == "ERROR" && v["fields"]["node_hostname"].is_string());
    assert_eq!(errors.len(), 40, "one a cycle");
    let m = errors[0]["fields"]["message"].as_str().unwrap();
    assert!(m.contains("enforcer.node"), "{m}");
    assert_eq!(errors[0]["fields"]["node"], "gpu001");
    assert_eq!(errors[0]["fields"]["node_hostname"], "reaper-other-host-0001.cluster.example");
    assert!(kinds(&e.audit(), "action").contains(&"alert".to_string()), "alerts still go out");

    // The same machine's name as an FQDN in another case: the daemon acts.
    if let Some(h) = this_short_hostname() {
        let e = plain();
        e.set("node.hostname", &format!("{}.cluster.example", h.to_uppercase()));
        let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
        assert!(ok, "{log}");
        assert_eq!(e.argv("scancel").len(), 1, "{log}");
        assert!(log_lines(&log, |v| v["fields"]["node_hostname"].is_string()).is_empty());

        // check-config warns when a written node is not this host, and only then.
        let cfg = e.config("observe", "");
        let out = check_config(&cfg);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        if h.eq_ignore_ascii_case("gpu001") {
            assert!(err.is_empty(), "{err}");
        } else {
            assert!(
                err.contains("warning") && err.contains("enforcer.node = \"gpu001\"") && err.contains(&h),
                "{err}"
            );
        }
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("node = \"gpu001\"\n", &format!("node = \"{}\"\n", h.to_uppercase()));
        std::fs::write(&cfg, text).unwrap();
        let out = check_config(&cfg);
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The real binary, squeue --json from the fake (with `gres_detail`), the fake nvidia-smi with
/// minor numbers that differ from the indices (index i is minor 3 - i), and a /proc in which
/// PID 5000 is job 1000's and PID 5001 job 999's. Job 1000 runs on GPUs 0 and 1 (IDX 2-3),
/// job 999 on GPU 2 (IDX 1); job 1001 is idle with no process on IDX 0, i.e. GPU 3. The first
/// cycle confirms the mapping, pins minor 0 down (jobs 1000 and 999 tell it apart from the
/// rest) and places job 1001 by it (the cycle line says so), and observe mode alerts it once
/// its window is full.
#[test]
fn binary_places_an_idle_job_by_slurm_device_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = Env { dir };
    std::fs::create_dir_all(e.fake_dir().join("proc/5000")).unwrap();
    e.set(
        "proc/5000/cgroup",
        "0::/system.slice/slurmstepd.scope/job_1000/step_0/user/task_0\n",
    );
    std::fs::create_dir_all(e.fake_dir().join("proc/5001")).unwrap();
    e.set("proc/5001/cgroup", "0::/system.slice/slurmstepd.scope/job_999/step_0/user/task_0\n");
    let start = T0 - 7200;
    e.set(
        "jobs.tsv",
        &format!(
            "1000\t1000\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,node=1\ttrain\t\t\"gpu:2(IDX:2-3)\"\n\
             1001\t1001\t0\t0\t0\t0\tRUNNING\tbob\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,node=1\tforgotten\t\t\"gpu:1(IDX:0)\"\n\
             999\t999\t0\t0\t0\t0\tRUNNING\tcarol\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,node=1\tshort\t\t\"gpu:1(IDX:1)\"\n"
        ),
    );
    e.set(
        "gpus.txt",
        "0 GPU-0 90 5 30000 81920 300 400 3\n1 GPU-1 90 5 30000 81920 300 400 2\n2 GPU-2 80 5 20000 81920 250 400 1\n3 GPU-3 0 0 3 81920 56 400 0\n",
    );
    e.set("apps.csv", "GPU-0, 5000, 30000\nGPU-1, 5000, 30000\nGPU-2, 5001, 20000\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 15);
    assert!(ok, "{log}");
    let cycles = log_lines(&log, |v| v["fields"]["message"] == "cycle");
    assert_eq!(cycles.len(), 15, "{log}");
    let first = &cycles[0]["fields"];
    assert_eq!(first["device_index"], "trusted", "{first}");
    assert_eq!(first["placed_by_device_index"], 1, "{first}");
    assert_eq!(first["jobs_skipped"], 0, "{first}");
    assert!(
        cycles[1..].iter().all(|c| c["fields"]["placed_by_device_index"] == 0),
        "kept, not placed again"
    );
    let alerts: Vec<_> = e.audit().into_iter().filter(|a| a["action"] == "alert").collect();
    assert!(alerts.iter().any(|a| a["job_id"] == "1001"), "{alerts:?}");
    assert!(!alerts.iter().any(|a| a["job_id"] == "1000" || a["job_id"] == "999"), "{alerts:?}");
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(e.state_dir().join("state.json")).unwrap()).unwrap();
    assert_eq!(state["attribution"]["1001"]["gpus"], serde_json::json!([3]), "minor 0 is GPU 3");
    assert_eq!(state["attribution"]["1001"]["by_device_index"], true);
    assert_eq!(state["device_index"]["confirmed"]["job_id"], "1000");
    assert_eq!(state["device_index"]["gpus"].as_array().map(Vec::len), Some(4));
    assert_eq!(state["device_index"]["pinned"], serde_json::json!([[2, 3], [1]]));
}

/// Trial 6 #6: a notify command that does not exist was called valid by check-config, and
/// every notice then failed as `notify command: spawn_failed`, holding every cancel forever.
/// Now check-config and run refuse it in enforce mode, naming the key and the program, and a
/// missing nvidia-smi is named in the cycle's log line with the OS error.
#[test]
fn a_missing_notify_program_is_refused_in_enforce_mode_and_a_missing_nvidia_smi_is_named() {
    let e = plain();
    let cfg = e.config("enforce", "notify_command = [\"/nonexistent/mailer\"]");
    let o = check_config(&cfg);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("enforcer.notify_command") && err.contains("/nonexistent/mailer") && err.contains("No such file"),
        "{err}"
    );
    let (ok, log) = e.run(&cfg, T0, 1);
    assert!(!ok && log.contains("enforcer.notify_command"), "{log}");
    assert!(e.argv("squeue").is_empty(), "refused before anything ran");
    // Observe mode: a warning, and the run goes on.
    let cfg = e.config(
        "observe",
        "notify_command = [\"/nonexistent/mailer\"]\nnvidia_smi = \"nvidia-smi-missing\"",
    );
    let o = check_config(&cfg);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("warning") && err.contains("enforcer.notify_command") && err.contains("enforcer.nvidia_smi"),
        "{err}"
    );
    let (ok, log) = e.run(&cfg, T0, 1);
    assert!(ok, "{log}");
    let no_data = log_lines(&log, |v| v["fields"]["kind"] == "spawn_failed");
    assert_eq!(no_data.len(), 1, "{log}");
    let said = no_data[0]["fields"]["nvidia_smi_said"].as_str().unwrap_or("");
    assert!(said.contains("nvidia-smi-missing") && said.contains("No such file"), "{said}");
}

/// Trial 6 #4: in observe mode, a webhook said to reach users got every alert, the
/// hypothetical drain and cancel naming the user included, though observe mode "contacts no
/// user". Now it gets nothing (the run warns once at start why), while an admins' webhook
/// still gets the alerts marked `[observe]`.
#[test]
fn observe_mode_posts_nothing_to_a_webhook_that_reaches_users() {
    const VAR: &str = "GPU_REAPER_TEST_OBSERVE_USERS_WEBHOOK_URL";
    std::env::set_var(VAR, "http://127.0.0.1:9/hook");
    let e = plain();
    let (hook, posts) = webhook_only(&e, VAR);
    let (ok, log) = e.run(&e.config("observe", &format!("{hook}\nwebhook_reaches_users = true")), T0, 40);
    assert!(ok, "{log}");
    assert!(!posts.exists(), "{}", std::fs::read_to_string(&posts).unwrap_or_default());
    let warned = log_lines(&log, |v| {
        v["fields"]["message"] == "config warning"
            && v["fields"]["problem"]
                .as_str()
                .unwrap_or("")
                .contains("observe mode contacts no user")
    });
    assert_eq!(warned.len(), 1, "{log}");
    let audit = e.audit();
    assert!(
        kinds(&audit, "would_action").contains(&"cancel".to_string()),
        "the run did escalate"
    );
    assert!(kinds(&audit, "action").contains(&"alert".to_string()), "alerts are still logged");
    // An admins' webhook gets observe mode's alerts.
    std::fs::remove_dir_all(e.state_dir()).unwrap();
    let (ok, log) = e.run(&e.config("observe", &hook), T0, 40);
    assert!(ok, "{log}");
    let posted = std::fs::read_to_string(&posts).unwrap();
    assert!(posted.contains("[observe] gpu-reaper: job 4242: alert idle"), "{posted}");
}

/// Trial 6 #8: the notify command got only the finding's reason, no consequence or timeline,
/// and the webhook's notice promised a drain and cancel whatever the signature's ceiling. Now
/// the notify command's message argument says what may follow and when; a notice for a new
/// breach of the same run (here after the daemon was down longer than the window) says so.
#[test]
fn the_notice_says_what_may_follow_and_when_and_a_new_breach_says_so() {
    let e = plain();
    let cfg = e.config("enforce", "");
    let (ok, log) = e.run(&cfg, T0, 12);
    assert!(ok, "{log}");
    let notify = e.argv("notify");
    assert_eq!(notify.len(), 1, "{log}");
    let msg = &notify[0][3];
    assert!(msg.starts_with("job 4242: looks idle"), "{msg}");
    assert!(
        msg.contains("If this continues, gpu-reaper may drain the node")
            && msg.contains("and cancel the job in about")
            && msg.contains(" UTC)"),
        "{msg}"
    );
    assert!(!msg.contains("told about this job") && !msg.contains('\n'), "{msg}");
    let (ok, log) = e.run(&cfg, T0 + 60 * 60, 12);
    assert!(ok, "{log}");
    let notify = e.argv("notify");
    assert_eq!(notify.len(), 2, "{log}");
    assert!(
        notify[1][3].contains("You were told about this job at") && notify[1][3].contains("this is a new one"),
        "{}",
        notify[1][3]
    );
}

/// Trial 6 #5: with `PrivateData=jobs`, an unprivileged squeue lists none of the other users'
/// jobs; observe mode then saw no job and said nothing, though processes in those jobs'
/// cgroups ran on the GPUs. Now it warns, naming the jobs and the likely cause, at most every
/// 10 minutes, once a job has been seen so in two cycles in a row.
#[test]
fn processes_of_jobs_squeue_does_not_list_are_warned_about() {
    let e = plain();
    // squeue shows no job (PrivateData=jobs, another user's job).
    e.set("jobs.tsv", "");
    std::fs::create_dir_all(e.fake_dir().join("proc/5000")).unwrap();
    e.set(
        "proc/5000/cgroup",
        "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
    );
    e.set("gpus.txt", "0 GPU-0 90 5 30000 81920 300 400\n1 GPU-1 90 5 30000 81920 300 400\n");
    e.set("apps.csv", "GPU-0, 5000, 30000\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 12);
    assert!(ok, "{log}");
    let warned = log_lines(&log, |v| {
        v["fields"]["message"].as_str().unwrap_or("").contains("squeue does not list")
    });
    assert_eq!(warned.len(), 2, "cycles 2 and 12 (10 minutes apart): {log}");
    assert_eq!(warned[0]["fields"]["job_ids"], "4242");
    assert!(warned[0]["fields"]["message"].as_str().unwrap().contains("PrivateData=jobs"));
    // squeue listing the job: nothing to say.
    let e = plain();
    std::fs::create_dir_all(e.fake_dir().join("proc/5000")).unwrap();
    e.set(
        "proc/5000/cgroup",
        "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
    );
    e.set("apps.csv", "GPU-0, 5000, 30000\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 3);
    assert!(ok && !log.contains("squeue does not list"), "{log}");
}

/// Trial 6 #9: "attribution ambiguous" was logged at INFO every cycle for every such job.
/// Now once per run of the job at INFO (then at DEBUG); the cycle line still counts it.
#[test]
fn ambiguous_attribution_is_logged_once_per_job_run_at_info() {
    let e = plain();
    two_one_gpu_jobs(&e, [("501", "alice", T0 - 7200), ("502", "bob", T0 - 7200)]);
    // Both jobs' processes on GPU 0: neither can be placed.
    e.set("apps.csv", "GPU-0, 5001, 100\nGPU-0, 5002, 100\n");
    let (ok, log) = e.run(&e.config("observe", ""), T0, 5);
    assert!(ok, "{log}");
    let info = log_lines(&log, |v| {
        v["level"] == "INFO" && v["fields"]["message"].as_str().unwrap_or("").starts_with("attribution ambiguous")
    });
    let jobs: Vec<&str> = info.iter().map(|v| v["fields"]["job_id"].as_str().unwrap()).collect();
    assert_eq!(jobs, ["501", "502"], "{log}");
    let cycles = log_lines(&log, |v| v["fields"]["message"] == "cycle");
    assert_eq!(cycles.len(), 5);
    assert!(
        cycles.iter().all(|c| c["fields"]["jobs_skipped_why"] == "ambiguous_attribution=2"),
        "{cycles:?}"
    );
}

/// Runs [`plain`] in observe mode for 5 cycles, changes its state file with `edit`, runs one
/// more cycle, and returns that run's log, having checked the run succeeded and restored the
/// file.
fn restart_with_edited_state(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let e = plain();
    let cfg = e.config("observe", "");
    let (ok, log) = e.run(&cfg, T0, 5);
    assert!(ok, "{log}");
    let path = e.state_dir().join("state.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let (ok, log) = e.run(&cfg, T0 + 5 * 60, 1);
    assert!(ok, "{log}");
    assert!(log.contains("state restored"), "the rest of the file should be restored: {log}");
    log
}

/// A state file whose windows hold an entry no engine writes (util 2,000,000,000
/// thousandths of a percent: damaged or hand-edited) is not believed (review 28 found the
/// policy reporting a peak of 2,000,000 % from one): that job's windows are left out, with a
/// warning naming the job, the entry and the value, and the rest of the file is restored.
#[test]
fn a_state_file_window_no_engine_writes_is_left_out_and_named() {
    let log = restart_with_edited_state(|v| {
        let entry = &mut v["engine"]["jobs"][0]["gpus"][0]["entries"][0];
        assert!(entry.is_object(), "the state file's layout changed");
        entry["util_milli"] = 2_000_000_000u32.into();
    });
    let warn = log
        .lines()
        .find(|l| l.contains("windows are not what gpu-reaper writes"))
        .unwrap_or_else(|| panic!("no warning about the window: {log}"));
    assert!(
        warn.contains("4242") && warn.contains("util_milli 2000000000") && warn.contains("GPU slot 0, entry 0"),
        "{warn}"
    );
}

/// Trial 16 (ROUGH): an engine `taken_s` hand-set past the clock (here `i64::MAX`) made the
/// restored engine see its first cycle as a clock step back and empty every window (safe),
/// without a word. Expected: a WARN naming the key and both times, and the rest of the file
/// restored.
#[test]
fn a_state_file_engine_time_past_the_clock_is_warned_about() {
    let log = restart_with_edited_state(|v| {
        assert!(v["engine"]["taken_s"].is_i64(), "the state file's layout changed");
        v["engine"]["taken_s"] = i64::MAX.into();
    });
    let warn = log
        .lines()
        .find(|l| l.contains("engine.taken_s"))
        .unwrap_or_else(|| panic!("no warning about engine.taken_s: {log}"));
    assert!(
        warn.contains("WARN") && warn.contains(&i64::MAX.to_string()) && warn.contains(&(T0 + 5 * 60).to_string()),
        "{warn}"
    );
}

/// Operator trial 17 (CRITICAL, narrow): a node of four GPUs lost one (minor number 1) before
/// the daemon's first cycle, scontrol showed no `Gres=` and squeue no device index. nvidia-smi
/// listed three GPUs, minors 0, 2 and 3; job 602's processes ran on minors 2 and 3, so job 601
/// (one GPU) was placed by elimination on the idle minor 0, which it may not hold, and was
/// noticed, drained and cancelled. Expected: the gap in the minor numbers says a GPU is missing,
/// so nothing is placed by elimination: job 601 is skipped as ambiguous and nothing is done to
/// it. With minors 0, 1, 2 (nothing missing) elimination places it as before, which shows the
/// test can tell the two apart.
#[test]
fn a_gap_in_the_minor_numbers_stops_placement_by_elimination() {
    for (minors, whole) in [([0, 2, 3], false), ([0, 1, 2], true)] {
        let e = plain();
        let start = T0 - 7200;
        e.set(
            "jobs.tsv",
            &format!(
                "601\t601\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,gres/gpu=1\tidle\t\n\
                 602\t602\t0\t0\t0\t0\tRUNNING\tbob\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,gres/gpu=2\tbusy\t\n"
            ),
        );
        e.set(
            "gpus.txt",
            &format!(
                "0 GPU-0 0 0 3 81920 55 400 {}\n1 GPU-2 95 4 60000 81920 350 400 {}\n2 GPU-3 96 4 60000 81920 340 400 {}\n",
                minors[0], minors[1], minors[2]
            ),
        );
        e.set("apps.csv", "GPU-2, 5602, 60000\nGPU-3, 5602, 60000\n");
        std::fs::create_dir_all(e.fake_dir().join("proc/5602")).unwrap();
        e.set("proc/5602/cgroup", "0::/system.slice/slurmstepd.scope/job_602/step_0/user/task_0\n");
        let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
        assert!(ok, "{log}");
        let cycles = log_lines(&log, |v| v["fields"]["message"] == "cycle");
        assert_eq!(cycles.len(), 40, "{log}");
        let acted: Vec<String> = e
            .audit()
            .iter()
            .filter(|l| l["record"] == "action" && l["job_id"] == "601")
            .map(|l| l["action"].as_str().unwrap_or("").to_string())
            .collect();
        if whole {
            assert!(
                acted.iter().any(|a| a == "drain"),
                "minors {minors:?}: job 601 is placed by elimination and drained: {acted:?}"
            );
        } else {
            assert!(acted.is_empty(), "minors {minors:?}: job 601 was acted on: {acted:?}");
            assert!(
                cycles.iter().all(|c| c["fields"]["jobs_skipped_why"] == "ambiguous_attribution=1"),
                "{cycles:?}"
            );
            let incomplete = log_lines(&log, |v| {
                v["fields"]["message"].as_str().unwrap_or("").starts_with("GPU list incomplete")
            });
            assert!(
                incomplete.first().is_some_and(|v| v["fields"]["highest_minor_number_says"] == 4),
                "{incomplete:?}"
            );
        }
    }
}

/// Operator trial 17: with nvidia-smi's last row cut off (GPU 1, minor 1), a job whose Slurm
/// device index names minor 1 got "names a GPU (minor number) that nvidia-smi does not list"
/// at WARN in every cycle, although nvidia-smi did list it: its row could not be read.
/// Expected: the warning says the GPU is in no row read this cycle because some rows could
/// not be read, it is logged at WARN once while it lasts (not every cycle), and nothing is
/// placed by elimination or done to the job.
#[test]
fn a_device_index_gpu_in_an_unreadable_row_is_warned_about_once_and_truthfully() {
    let e = plain();
    let start = T0 - 7200;
    e.set(
        "jobs.tsv",
        &format!("4242\t4242\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,node=1\ttrain\t\t\"gpu:2(IDX:0-1)\"\n"),
    );
    e.set("gpus.txt", "0 GPU-0 0 0 3 81920 55 400 0\n1 GPU-1 0 0 3 81920 56 400 1\n");
    e.set("smi.mode", "truncated");
    let (ok, log) = e.run(&e.config("enforce", ""), T0, 5);
    assert!(ok, "{log}");
    let unlisted = log_lines(&log, |v| {
        v["level"] == "WARN"
            && v["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("Slurm's device index for the job names a GPU")
    });
    assert_eq!(unlisted.len(), 1, "once, not every cycle: {log}");
    let m = unlisted[0]["fields"]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("in no nvidia-smi row read this cycle") && m.contains("some rows could not be read"),
        "{m}"
    );
    assert!(!m.contains("that nvidia-smi does not list"), "{m}");
    assert_eq!(
        (unlisted[0]["fields"]["job_id"].as_str(), unlisted[0]["fields"]["minor"].as_u64()),
        (Some("4242"), Some(1))
    );
    assert!(e.audit().iter().all(|a| a["job_id"] != "4242"), "{:?}", e.audit());
}

/// Operator trial 18 (BUG): a webhook that took each post and then timed out (curl exit 28)
/// was posted to in every cycle, since a failed alert was planned again in the next one: 9
/// alerts in 10 minutes. Expected: a failed alert is retried with the notices' growing delay
/// (one interval, then doubling), skipped as `alert_backoff` in between.
#[test]
fn a_failing_webhook_gets_alerts_with_a_growing_delay_not_every_cycle() {
    const VAR: &str = "GPU_REAPER_TEST_STALLING_WEBHOOK_URL";
    std::env::set_var(VAR, "http://127.0.0.1:9/hook");
    let e = plain();
    let curl = e.dir.path().join("curl");
    let posts = e.dir.path().join("curl.stdin");
    // Takes the post, then fails as curl does on --max-time.
    std::fs::write(&curl, format!("#!/bin/sh\ncat >> {}\necho '--' >> {0}\nexit 28\n", posts.display())).unwrap();
    std::fs::set_permissions(&curl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cfg = e.config("enforce", &format!("webhook_url_env = \"{VAR}\"\ncurl = \"{}\"", curl.display()));
    let (ok, log) = e.run(&cfg, T0, 30);
    assert!(ok, "{log}");
    let posted = std::fs::read_to_string(&posts).unwrap_or_default();
    let alerts = posted.matches("--\n").count();
    let failed = log_lines(&log, |v| {
        v["fields"]["message"] == "action failed" && v["fields"]["action"] == "alert"
    });
    assert_eq!(alerts, failed.len(), "{log}");
    // The first alert comes once the window is full (minute 10): 20 cycles at alert or above.
    assert!((2..=6).contains(&alerts), "{alerts} alert posts in 30 cycles: {posted}");
    let held = log_lines(&log, |v| v["fields"]["reason"] == "alert_backoff");
    assert!(!held.is_empty(), "{log}");
}

/// Job 4242 on two GPUs whose `gpus.txt` rows are `rows`, nvidia-smi in `smi_mode`, the job's
/// worker on each GPU in its cgroup (`hung` needs processes where known).
fn transcoding(rows: &str, smi_mode: &str) -> Env {
    let e = plain();
    e.set("gpus.txt", rows);
    e.set("smi.mode", smi_mode);
    e.set("apps.csv", "GPU-0, 5001, 6100\nGPU-1, 5002, 6100\n");
    for pid in [5001, 5002] {
        std::fs::create_dir_all(e.fake_dir().join(format!("proc/{pid}"))).unwrap();
        e.set(
            &format!("proc/{pid}/cgroup"),
            "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
        );
    }
    e
}

/// Review 33: a steady decode (2 % utilization.gpu, 95 % utilization.decoder, 80 W of 400)
/// folded in whole looked like a `spin` deadlock (near 100 % at low, flat power) and, with
/// `ceilings.spin = "cancel"`, was drained and cancelled. Codec work counts up to
/// `policy::CODEC_UTIL_CAP_PCT` (49 %): work, never spin; and a job whose GPUs' video engines
/// work in a cycle is held at alert in it (trial 21: 95 % utilization.gpu beside a 90 %
/// decoder was cancelled as `spin`). Control: utilization.gpu at 95 % with the engines idle
/// (a spinning kernel) is cancelled as `spin`.
#[test]
fn a_steady_decode_is_not_a_spin_deadlock_end_to_end() {
    // Trial 21: utilization.gpu itself at 95 % beside a decoder at 90 % is video work too.
    for (sm, dec) in [(2, 95), (95, 90), (95, 0)] {
        let e = transcoding(
            &format!("0 GPU-0 {sm} 0 6100 81559 80 400 0 Disabled 0 {dec}\n1 GPU-1 {sm} 0 6100 81559 81 400 1 Disabled 0 {dec}\n"),
            "ok",
        );
        let cfg = e.config("enforce", "");
        let text = std::fs::read_to_string(&cfg).unwrap();
        let spin = text.replace(
            "ceilings = { idle = \"cancel\" }",
            "ceilings = { idle = \"cancel\", spin = \"cancel\" }",
        );
        assert_ne!(text, spin);
        std::fs::write(&cfg, spin).unwrap();
        let (ok, log) = e.run(&cfg, T0, 60);
        assert!(ok, "{log}");
        let cancelled = !e.argv("scancel").is_empty();
        if dec > 0 {
            assert!(!cancelled, "decoding at {dec} %: {log}");
        } else {
            assert!(cancelled && log.contains("spin"), "control, a spinning kernel: {log}");
        }
    }
}

/// Operator trial 19 (CRITICAL): a transcoding job's work shows in `utilization.decoder` (and
/// `.encoder`), not in `utilization.gpu`, which counts SM kernels. Its GPUs read 0 % with 6 GB
/// held at 142 W of 700: `hung`, and it was drained and cancelled. Now the compute reading is
/// the highest of the three: the job stays healthy. The control, the same GPUs with the video
/// engines idle, is cancelled; a driver that refuses the codec fields is asked without them
/// (warned once), and reads on, holding the job at alert (review 33).
#[test]
fn video_engine_work_counts_as_work() {
    let rows = |dec: u32| format!("0 GPU-0 0 0 6100 81559 142 700 0 Disabled 0 {dec}\n1 GPU-1 0 0 6100 81559 139 700 1 Disabled {dec} 0\n");
    for (dec, mode) in [(35, "ok"), (0, "ok"), (35, "nocodec")] {
        let e = transcoding(&rows(dec), mode);
        let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
        assert!(ok, "{log}");
        let cancelled = !e.argv("scancel").is_empty();
        let drained = e
            .argv("scontrol")
            .iter()
            .any(|a| a[0] == "update" && a.iter().any(|x| x == "State=DRAIN"));
        if dec > 0 && mode == "ok" {
            assert!(!cancelled && !drained, "decoding at {dec} %: {log}");
            let q = e.argv("nvidia-smi");
            assert!(
                q.iter()
                    .any(|a| a[0].ends_with("mig.mode.current,utilization.encoder,utilization.decoder")),
                "{q:?}"
            );
        } else if mode == "ok" {
            assert!(
                cancelled && drained,
                "{mode}, decoder {dec} %: the idle-engine control is cancelled: {log}"
            );
        } else {
            // The codec fields refused: video work is unseen, so the compute reading is
            // unknown and the job is not judged (review 33: it was cancelled though decoding
            // at 35 %; review 36: held at alert, it was drained the cycle the hold lapsed).
            assert!(!cancelled && !drained, "codec fields refused: {log}");
            let unjudged = log_lines(&log, |v| {
                v["fields"]["message"].as_str().is_some_and(|m| m.contains("insufficient_evidence"))
            });
            assert!(!unjudged.is_empty(), "{log}");
        }
        if mode == "nocodec" {
            // Warned at the first refusal; asked again every 5 minutes, refused at INFO.
            let said = |level: &str| {
                log.lines()
                    .filter(|l| l.contains("utilization.encoder/utilization.decoder") && l.contains(&format!("\"level\":\"{level}\"")))
                    .count()
            };
            assert_eq!(said("WARN"), 1, "{log}");
            assert!(said("INFO") >= 5, "{log}");
        }
    }
}

/// Operator trial 19 (CRITICAL): on a node without `ConstrainDevices`, job 901 holds GPU 1
/// (`gres_detail` IDX 1), where it works (85 %) with a process nvidia-smi does not list; a
/// helper of the same job holds 30 GB on GPU 0 at 0 %. The job was placed by that process on
/// GPU 0, and drained and cancelled as `hung`, right after an ERROR saying its process ran
/// outside its Slurm device indices. Now such a job is held at alert for the rest of its run
/// (`index_disagrees`). The control, the same job with its own idle GPU 1 and its process
/// there, is cancelled.
#[test]
fn a_job_with_a_process_outside_its_device_indices_is_held_at_alert() {
    let e = plain();
    let start = T0 - 7200;
    e.set(
        "jobs.tsv",
        &format!(
            "901\t901\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\t{start}\tgpu001\tcpu=8,node=1,gres/gpu=1\ttrain\t\t\"gpu:1(IDX:1)\"\n"
        ),
    );
    std::fs::create_dir_all(e.fake_dir().join("proc/9101")).unwrap();
    e.set("proc/9101/cgroup", "0::/system.slice/slurmstepd.scope/job_901/step_0/user/task_0\n");
    for outside in [true, false] {
        if outside {
            e.set(
                "gpus.txt",
                "0 GPU-a0 0 0 30000 81920 60 400 0\n1 GPU-a1 85 10 30000 81920 300 400 1\n",
            );
            e.set("apps.csv", "GPU-a0, 9101, 30000\n");
        } else {
            e.set("gpus.txt", "0 GPU-a0 0 0 3 81920 55 400 0\n1 GPU-a1 0 0 30000 81920 60 400 1\n");
            e.set("apps.csv", "GPU-a1, 9101, 30000\n");
        }
        let _ = std::fs::remove_dir_all(e.state_dir());
        let _ = std::fs::remove_file(e.fake_dir().join("scancel.argv"));
        let (ok, log) = e.run(&e.config("enforce", ""), T0, 40);
        assert!(ok, "{log}");
        let cancelled = !e.argv("scancel").is_empty();
        if outside {
            assert!(!cancelled, "judged on a GPU outside its allocation and cancelled: {log}");
            assert!(log.contains("outside its Slurm device indices"), "{log}");
            assert!(log.contains("job held at alert"), "{log}");
        } else {
            assert!(cancelled, "control: the job idle on its own GPU is cancelled: {log}");
            // The audit record says which GPU the cancel was judged on, and how it was placed.
            let audit = e.audit();
            let cancel = audit
                .iter()
                .find(|l| l["record"] == "action" && l["action"] == "cancel")
                .expect("a cancel record");
            let p = &cancel["evidence"]["placement"];
            assert_eq!(p["gpus"][0]["uuid"], "GPU-a1", "{cancel}");
            assert_eq!(p["gpus"][0]["minor"], 1, "{cancel}");
            assert_eq!(p["placed_by"], "processes", "{cancel}");
        }
    }
}
