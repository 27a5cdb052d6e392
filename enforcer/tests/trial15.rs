//! trial15 (operator trial): a collector whose readings are impossible most of the time is
//! still trusted for a drain and a cancel.
//!
//! Failed before session 11's fix (2026-11-30, a02d851). The README's rule: "a reading that cannot be true (a
//! negative power or one below 1 W, …) makes the whole sample invalid, since nothing else that
//! collector said then can be trusted". The engine drops each such sample and judges the job on
//! the readings left between them, as long as no hole is longer than `max_sample_gap`. So a
//! GPU whose nvidia-smi reports 0.50 W on two of every three queries (and 60 W on the third)
//! has its job, at 0 % and 30 GB held, drained and cancelled as `hung` on 7 valid samples per
//! GPU of a 20-minute window, with 26 of the window's 40 samples invalid (the `starting`
//! record's evidence says so). Nothing in the daemon's log mentions an invalid sample.
//! What an operator expects: a window in which most samples are impossible is no evidence for
//! a drain or a cancel (held at alert at most, as `power_unknown` and `freeze_undetectable`
//! are), and the log says the collector is reporting impossible readings.

mod common;

use std::path::Path;
use std::process::Command;

fn setup(dir: &Path) -> String {
    let demo = common::fakes().join("demo");
    for f in ["jobs.tsv", "apps.csv"] {
        std::fs::copy(demo.join(f), dir.join(f)).unwrap();
    }
    // Only job 101's process stays, so it is placed by its process on GPUs 0 and 1.
    std::fs::write(
        dir.join("apps.csv"),
        "GPU-00000000-0000-0000-0000-000000000000, 1001, 30000\nGPU-00000000-0000-0000-0000-000000000001, 1001, 30000\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("jobs.tsv"),
        "101\t101\t0\t0\t0\t0\tRUNNING\talice\tml\tgpu\tnormal\t1799996400\tgpu001\tcpu=16,mem=64G,node=1,gres/gpu=2\ttrain\t\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("gpus.txt"),
        "0 GPU-00000000-0000-0000-0000-000000000000 0 0 30000 81920 60 400\n\
         1 GPU-00000000-0000-0000-0000-000000000001 0 0 30000 81920 60 400\n",
    )
    .unwrap();
    let proc_dir = dir.join("proc/1001");
    std::fs::create_dir_all(&proc_dir).unwrap();
    std::fs::write(
        proc_dir.join("cgroup"),
        "0::/system.slice/slurmstepd.scope/job_101/step_0/user/task_0\n",
    )
    .unwrap();
    let fakes = common::fakes();
    // nvidia-smi: the repo's fake, with power.draw replaced by 0.50 W (below 1 W: the
    // sample cannot be true) on two of every three --query-gpu calls.
    let smi = common::script(
        dir,
        "nvidia-smi",
        &format!(
            "out=$('{fake}' \"$@\"); rc=$?\n\
             n=$(cat \"$FAKE_DIR/smi.count\" 2>/dev/null || echo 0)\n\
             if [ $((n % 3)) != 1 ]; then out=$(printf '%s\\n' \"$out\" | awk -F', ' -v OFS=', ' 'NR>1 && $6 !~ /^\\[/ {{ $6 = \"0.50\" }} {{print}}'); fi\n\
             printf '%s\\n' \"$out\"; exit $rc",
            fake = fakes.join("nvidia-smi").display()
        ),
    );
    let wrap = |name: &str| {
        common::script(
            dir,
            &format!("{name}-w"),
            &format!("FAKE_DIR='{}' exec '{}' \"$@\"", dir.display(), fakes.join(name).display()),
        )
    };
    let smi_w = common::script(dir, "nvidia-smi-w", &format!("FAKE_DIR='{}' exec '{smi}' \"$@\"", dir.display()));
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let config = format!(
        r#"[policy]
stages = [{{ after = "0s", verdict = "alert" }}, {{ after = "30m", verdict = "drain" }}, {{ after = "60m", verdict = "cancel" }}]
[enforcer]
mode = "enforce"
node = "gpu001"
state_dir = "{state}"
enforce_lock_dir = "{state}"
metrics_listen = ""
squeue = "{squeue}"
scontrol = "{scontrol}"
scancel = "{scancel}"
nvidia_smi = "{smi_w}"
notify_command = ["{notify}"]
proc_root = "{proc}"
nvidia_smi_timeout = "5s"
command_timeout = "5s"
"#,
        state = state.display(),
        squeue = wrap("squeue"),
        scontrol = wrap("scontrol"),
        scancel = wrap("scancel"),
        notify = wrap("notify"),
        proc = dir.join("proc").display(),
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, config).unwrap();
    path.display().to_string()
}

#[test]
fn a_collector_impossible_on_most_reads_is_no_evidence_for_a_drain_or_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let config = setup(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["run", "--config", &config, "--simulated-clock", "1800000000:60", "--cycles", "90"])
        .env("GPU_REAPER_ALLOW_SIMULATED_ENFORCE", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let acted: Vec<_> = common::audit(&dir.path().join("state"))
        .into_iter()
        .filter(|r| r["record"] == "starting")
        .map(|r| {
            format!(
                "{} on evidence invalid_samples={} samples_min_per_gpu={}",
                r["action"], r["evidence"]["invalid_samples"], r["evidence"]["samples_min_per_gpu"]
            )
        })
        .collect();
    assert!(
        acted.is_empty(),
        "job 101 was drained/cancelled on a window where most samples were impossible: {acted:?}"
    );
}

/// trial15: Failed before session 11's fix (2026-11-30, a02d851). README ("One drain per node"): "Once that job
/// has left the node, another job of ours due for a drain takes the drain over in the same
/// cycle (its Reason replaces ours …), so the node is not resumed in between and no new job
/// lands on it while a wasted job still holds it". When the hourly drain budget is spent, the
/// takeover is skipped as `rate_limit` and the node is resumed instead, then drained again
/// once the budget allows: on the demo node with `max_drains_per_hour = 1`, job 102's drain
/// (t = 30m) is followed by its cancel (60m), a RESUME at 61m while hung job 103 (at its drain
/// stage) still holds the node, and a new DRAIN for 103 at 90m: the node takes new jobs for
/// 29 minutes. (With the default budget of 2 the same happens when two drains fell within the
/// hour, e.g. after an admin's resume of our drain.) Expected: the takeover is made (it adds
/// no drained node), or the node stays drained; in no case a resume between the two.
#[test]
fn a_drain_takeover_is_not_turned_into_a_resume_by_the_drain_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = common::fakes().join("demo");
    for f in ["jobs.tsv", "apps.csv", "gpus.txt"] {
        std::fs::copy(demo.join(f), d.join(f)).unwrap();
    }
    for pid in ["1001", "1003", "1004", "1005"] {
        std::fs::create_dir_all(d.join("proc").join(pid)).unwrap();
        std::fs::copy(demo.join("proc").join(pid).join("cgroup"), d.join("proc").join(pid).join("cgroup")).unwrap();
    }
    let fakes = common::fakes();
    let wrap = |name: &str| {
        common::script(
            d,
            &format!("{name}-w"),
            &format!("FAKE_DIR='{}' exec '{}' \"$@\"", d.display(), fakes.join(name).display()),
        )
    };
    let state = d.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let config = format!(
        r#"[policy]
stages = [{{ after = "0s", verdict = "alert" }}, {{ after = "30m", verdict = "drain" }}, {{ after = "60m", verdict = "cancel" }}]
ceilings = {{ idle = "cancel", hung = "cancel", spin = "cancel" }}
[enforcer]
mode = "enforce"
node = "gpu001"
state_dir = "{state}"
enforce_lock_dir = "{state}"
metrics_listen = ""
squeue = "{squeue}"
scontrol = "{scontrol}"
scancel = "{scancel}"
nvidia_smi = "{smi}"
notify_command = ["{notify}"]
proc_root = "{proc}"
suspect_min_jobs = 6
max_drains_per_hour = 1
nvidia_smi_timeout = "5s"
command_timeout = "5s"
"#,
        state = state.display(),
        squeue = wrap("squeue"),
        scontrol = wrap("scontrol"),
        scancel = wrap("scancel"),
        smi = wrap("nvidia-smi"),
        notify = wrap("notify"),
        proc = d.join("proc").display(),
    );
    std::fs::write(d.join("config.toml"), config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["run", "--config", &d.join("config.toml").display().to_string()])
        .args(["--simulated-clock", "1800000000:60", "--cycles", "100"])
        .env("GPU_REAPER_ALLOW_SIMULATED_ENFORCE", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let argv = std::fs::read_to_string(d.join("scontrol.argv")).unwrap();
    let updates: Vec<String> = argv
        .split('\u{1e}')
        .map(|c| c.replace('\u{1f}', " ").trim().to_string())
        .filter(|c| c.starts_with("update NodeName"))
        .collect();
    // The first drain (job 102) and, later, one for job 103; a resume between two drains
    // means the node was opened while a wasted job due for a drain still held it.
    let first_drain = updates.iter().position(|u| u.contains("State=DRAIN")).expect("no drain at all");
    let resume = updates.iter().position(|u| u.contains("State=RESUME"));
    let later_drain = updates.iter().rposition(|u| u.contains("State=DRAIN"));
    if let (Some(r), Some(l)) = (resume, later_drain) {
        assert!(
            !(first_drain < r && r < l),
            "the node was resumed between two of our drains: {updates:#?}"
        );
    }
    // Trial 16: while the takeover waits, the node's Reason names job 102, which has left;
    // each cycle says why the node is not resumed.
    let held: Vec<_> = common::audit(&state)
        .into_iter()
        .filter(|r| r["record"] == "skipped" && r["skip"] == "handover_pending")
        .map(|r| {
            (
                r["action"].as_str().unwrap_or("").to_string(),
                r["job_id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(!held.is_empty(), "no handover_pending skip while the takeover waited: {log}");
    assert!(held.iter().all(|(a, j)| a == "resume" && j == "102"), "{held:?}");
    assert!(
        log.contains("reason=\"handover_pending\"") || log.contains("reason=handover_pending"),
        "{log}"
    );
}

/// The demo node cut down to jobs 101 (busy, GPUs 0–1, placed by its process) and 102 (idle,
/// GPUs 2–3, placed by elimination) on 4 GPUs, in enforce mode; returns the config path.
fn two_job_node(d: &Path) -> String {
    let demo = common::fakes().join("demo");
    let keep = |f: &str, pred: &dyn Fn(&str) -> bool| {
        let t = std::fs::read_to_string(demo.join(f)).unwrap();
        let kept: String = t.lines().filter(|l| pred(l)).map(|l| format!("{l}\n")).collect();
        std::fs::write(d.join(f), kept).unwrap();
    };
    keep("jobs.tsv", &|l| l.starts_with("101\t") || l.starts_with("102\t"));
    keep("apps.csv", &|l| l.contains(", 1001,"));
    keep("gpus.txt", &|l| ["0 ", "1 ", "2 ", "3 "].iter().any(|p| l.starts_with(p)));
    std::fs::create_dir_all(d.join("proc/1001")).unwrap();
    std::fs::copy(demo.join("proc/1001/cgroup"), d.join("proc/1001/cgroup")).unwrap();
    let fakes = common::fakes();
    let wrap = |name: &str| {
        common::script(
            d,
            &format!("{name}-w"),
            &format!("FAKE_DIR='{}' exec '{}' \"$@\"", d.display(), fakes.join(name).display()),
        )
    };
    let state = d.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let config = format!(
        r#"[policy]
stages = [{{ after = "0s", verdict = "alert" }}, {{ after = "30m", verdict = "drain" }}, {{ after = "60m", verdict = "cancel" }}]
[enforcer]
mode = "enforce"
node = "gpu001"
state_dir = "{state}"
enforce_lock_dir = "{state}"
metrics_listen = ""
squeue = "{squeue}"
scontrol = "{scontrol}"
scancel = "{scancel}"
nvidia_smi = "{smi}"
notify_command = ["{notify}"]
proc_root = "{proc}"
nvidia_smi_timeout = "5s"
command_timeout = "5s"
"#,
        state = state.display(),
        squeue = wrap("squeue"),
        scontrol = wrap("scontrol"),
        scancel = wrap("scancel"),
        smi = wrap("nvidia-smi"),
        notify = wrap("notify"),
        proc = d.join("proc").display(),
    );
    let path = d.join("config.toml");
    std::fs::write(&path, config).unwrap();
    path.display().to_string()
}

fn run_cycles(config: &str, start_s: u64, cycles: u32) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_enforcer"))
        .args(["run", "--config", config, "--simulated-clock", &format!("{start_s}:60")])
        .args(["--cycles", &cycles.to_string()])
        .env("GPU_REAPER_ALLOW_SIMULATED_ENFORCE", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    log
}

fn node_updates(d: &Path) -> Vec<String> {
    std::fs::read_to_string(d.join("scontrol.argv"))
        .unwrap_or_default()
        .split('\u{1e}')
        .map(|c| c.replace('\u{1f}', " ").trim().to_string())
        .filter(|c| c.starts_with("update NodeName"))
        .collect()
}

/// trial15: Failed before session 11's fix (2026-11-30, a02d851). README, restarts: "Windows no engine writes
/// are not kept. A job whose windows hold an entry that no ingest makes (a reading beyond
/// guard 3's bounds, such as a util above 100 % …), from a damaged or hand-edited file,
/// gathers a full window again. … The rest of the file is restored." That holds for
/// `util_milli = 150000` (a WARN, job 101's window dropped, the rest kept). But the same field
/// hand-edited to `85000.5` (or `-1`, or `"85000"`, or 2^32) makes the whole file "not parse":
/// it is moved aside with an ERROR saying "starting from scratch (safe: no escalation carried
/// over)", and with it go the admin's override of our drain for job 102, the hourly budgets
/// and the times users were told. Here job 102, whose drain an admin had resumed (override
/// recorded), is drained again after the restart, because of a typo in *another* job's window.
/// Expected: a window entry that cannot be read costs that job its window, as one out of
/// bounds does; the overrides, budgets and notices are restored.
#[test]
fn a_typo_in_one_window_entry_does_not_forget_an_admins_override() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = two_job_node(d);
    run_cycles(&config, 1_800_000_000, 33);
    assert!(
        node_updates(d)
            .iter()
            .any(|u| u.contains("State=DRAIN Reason=gpu-reaper: idle job 102")),
        "setup: job 102 was not drained: {:?}",
        node_updates(d)
    );
    // An admin resumes the node while job 102 runs: an override.
    std::fs::write(d.join("node.state"), "MIXED").unwrap();
    std::fs::write(d.join("node.reason"), "").unwrap();
    let log = run_cycles(&config, 1_800_002_000, 3);
    assert!(log.contains("an admin resumed our drain"), "{log}");
    let state_path = d.join("state/state.json");
    let mut state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    assert!(
        state["actions"]["overrides"].get("102").is_some(),
        "setup: no override: {}",
        state["actions"]
    );
    // Hand-edit one reading of job 101's window (not job 102's) to a fraction.
    let jobs = state["engine"]["jobs"].as_array_mut().unwrap();
    let j101 = jobs.iter_mut().find(|j| j["job_id"] == "101").expect("job 101's window");
    j101["gpus"][0]["entries"][3]["util_milli"] = serde_json::json!(85000.5);
    std::fs::write(&state_path, serde_json::to_string(&state).unwrap()).unwrap();
    std::fs::write(d.join("scontrol.argv"), "").unwrap();
    let log = run_cycles(&config, 1_800_002_300, 60);
    let updates = node_updates(d);
    assert!(
        !updates.iter().any(|u| u.contains("State=DRAIN")),
        "job 102, which an admin had resumed, was drained again after a typo in job 101's window \
         dropped the whole state file: {updates:?}\n{}",
        log.lines().filter(|l| l.contains("ERROR")).collect::<Vec<_>>().join("\n")
    );
    // Fixed: only job 101's windows are left out, with a WARN naming the job and the value.
    let warn = log
        .lines()
        .find(|l| l.contains("windows do not parse"))
        .unwrap_or_else(|| panic!("no WARN about job 101's windows:\n{log}"));
    assert!(warn.contains("101") && warn.contains("85000.5"), "{warn}");
    // Once, not once for the start's clock check and again for the daemon (operator trial 16).
    assert_eq!(log.matches("windows do not parse").count(), 1, "{log}");
    assert!(!log.contains("moved aside"), "the file was moved aside:\n{log}");
}
