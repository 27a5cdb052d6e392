//! The sixteenth adversarial review, enforcer side. Each ignored test fails on the enforcer as
//! reviewed and shows one finding.
//!
//! * `a_key_a_newer_release_adds_inside_the_engine_stops_the_start`: `check_not_newer` refuses
//!   a state file of this version holding a key this binary does not know, on the promise
//!   that "every persisted struct now denies unknown fields". The engine's snapshot
//!   (`policy::EngineSnapshot`, its per-job `JobState` and their `JobFacts`), the window
//!   representation and the `NodeTable` do not: a key a newer release adds there is dropped
//!   in silence and the start goes on, exactly the rollback the check was made for.
//! * `children_left_holding_nvidia_smi_s_output_do_not_pile_up`: `run::run` promises that
//!   hung children cannot pile up (an abandoned child makes `run` refuse its program until it
//!   ends). A program that exits while a child it left running holds its output
//!   (`RunOutcome::OutputCutOff`) is new and not covered: the child is neither tracked, nor
//!   killed, nor does it keep the program from starting again, and two reader threads stay
//!   with it in the daemon. An nvidia-smi (or a site's wrapper of it) whose leftover child
//!   hangs leaves one more of each every cycle, for as long as the daemon runs.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NoProc, OneIdleGpu, NODE, POLICY, T0};
use enforcer::daemon::Daemon;
use enforcer::telemetry::Telemetry;

/// Input: a daemon runs 30 one-minute cycles with job 900 (one idle GPU on this node) and
/// saves its state file. Then, one at a time, a key that this release does not know is added
/// to the file (as a newer release would write it): at the top, inside `actions`, inside
/// `engine`, inside one of `engine.jobs`, inside `nodes`.
///
/// What happens: the first two stop the start (`check_not_newer` errs); the keys inside
/// `engine`, its jobs, and `nodes` pass, and the file is then loaded with them dropped.
///
/// What should happen: as promised (state.rs, commit 6d8f3fa), any key this binary does not
/// know, wherever it is, stops the start.
#[test]
fn a_key_a_newer_release_adds_inside_the_engine_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = cluster(vec![job("900", 900, 1, &[NODE])]);
    {
        let mut d = Daemon::new(
            config_with(POLICY, &state, "enforce", ""),
            FakeSlurm(c.clone()),
            OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            real_executor(&c),
            Box::new(NoProc),
            T0,
        );
        for i in 0..30 {
            d.cycle(T0 + i * 60);
        }
    }
    let path = state.join("state.json");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(enforcer::state::check_not_newer(&path).is_ok(), "control: the file as saved starts");
    assert!(
        saved["engine"]["jobs"].as_array().is_some_and(|j| !j.is_empty()),
        "control: the engine kept job 900: {}",
        saved["engine"]
    );
    let mut passed = Vec::new();
    for (what, pointer) in [
        ("top level", ""),
        ("actions", "/actions"),
        ("engine", "/engine"),
        ("engine.jobs[0]", "/engine/jobs/0"),
        ("nodes", "/nodes"),
    ] {
        let mut v = saved.clone();
        let Some(obj) = v.pointer_mut(pointer).and_then(|o| o.as_object_mut()) else {
            panic!("{what} is no object in {saved}");
        };
        obj.insert("added_by_a_later_release".into(), serde_json::json!(1));
        std::fs::write(&path, v.to_string()).unwrap();
        if enforcer::state::check_not_newer(&path).is_ok() {
            passed.push(what);
        }
    }
    assert!(
        passed.is_empty(),
        "a key this release does not know passed check_not_newer (and is dropped on load) in: {passed:?}"
    );
}

/// Input: an nvidia-smi that prints its header, leaves a child holding its stdout (a hung
/// helper: here `sleep 20`) and exits 0; the daemon's telemetry reads it five times, as five
/// cycles would.
///
/// What happens: each read is `output_cut_off` (no data: right), and each leaves its child
/// alive and untracked (`run::abandoned_alive` counts none, nothing is refused): five hung
/// children after five cycles, with ten reader threads, and one more each cycle after.
///
/// What should happen: as for a child abandoned after a timeout, a child left holding the
/// output keeps its program from starting again while it lives (a `hung_child` read), or is
/// ended with its process group: at most one such child at a time.
#[test]
fn children_left_holding_nvidia_smi_s_output_do_not_pile_up() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let program = dir.path().join("nvidia-smi");
    let header = enforcer::parse::smi::GPU_QUERY.join(", ");
    std::fs::write(
        &program,
        format!("#!/bin/sh\necho '{header}'\nsleep 20 &\necho $! >> '{}'\nexit 0\n", pids.display()),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut smi = enforcer::telemetry::NvidiaSmi::new(
        program.display().to_string(),
        std::time::Duration::from_secs(10),
        enforcer::run::KillMode::Kill,
    );
    let mut kinds = Vec::new();
    for i in 0..5 {
        kinds.push(smi.read(T0 + i * 60).no_data);
    }
    let alive: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        // SAFETY: kill(2) with signal 0 only checks that the process exists.
        .filter(|&pid| unsafe { libc::kill(pid, 0) } == 0)
        // A killed child its new parent has not reaped yet is a zombie: it holds nothing.
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| st.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
                .unwrap_or(false)
        })
        .collect();
    let tracked = enforcer::run::abandoned_alive(Some(&program.display().to_string()));
    for &pid in &alive {
        // SAFETY: ends the `sleep` children this test's fake nvidia-smi started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    assert!(kinds.iter().all(|k| k.is_some()), "control: no read gave data: {kinds:?}");
    assert!(
        alive.len() <= 1,
        "{} children left holding nvidia-smi's output after 5 reads ({tracked} tracked): {kinds:?}",
        alive.len()
    );
}
