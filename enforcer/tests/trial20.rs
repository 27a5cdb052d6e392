//! Operator trial 20 (CRITICAL C1): with no device indices (squeue's format source, or JSON
//! without `gres_detail`) on a node without `ConstrainDevices`, job 901 works on GPU 0 and has
//! a stray helper on GPU 2, which Slurm gave job 902. Job 902 works on GPU 2, but its
//! processes are hidden from nvidia-smi (MPS clients, say). 901 was placed on {0, 2} by its
//! processes, 902 by elimination on the idle {1, 3}, and 902 was drained and cancelled as
//! `idle`. GPU 2's memory (30 GB) was not what its one listed process (500 MiB) held: that
//! unaccounted memory says processes are hidden, so elimination is not to be trusted.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NODE, POLICY, T0};
use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
use enforcer::telemetry::{Telemetry, TelemetryRead};

/// Four GPUs: 0 and 2 busy (80 %, 30 GB, ~300 W), 1 and 3 idle (0 %, 3 MiB, ~55 W). Listed
/// processes: PID 1001 (job 901) on GPU 0 with 30 GB, PID 1003 (job 901's helper) on GPU 2
/// with 30 GB (all of GPU 2's memory) before read `hidden_from`, `helper_mib` from then on.
struct Node {
    cycle: u32,
    helper_mib: f64,
    hidden_from: u32,
}

impl Telemetry for Node {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        let gpu = |i: u16, busy: bool| GpuReading {
            index: Some(i),
            uuid: Some(format!("GPU-{i}")),
            util_pct: Some(if busy { 78.0 + (n % 5) as f64 } else { 0.0 }),
            mem_used_mib: Some(if busy { 30_000.0 } else { 3.0 }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(if busy { 300.0 } else { 55.0 } + ((n + u32::from(i)) % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(u32::from(i)),
            mig_enabled: Some(false),
            ..Default::default()
        };
        let app = |uuid: &str, pid: u32, mib: f64| ComputeApp {
            gpu_uuid: Some(uuid.into()),
            pid: Some(pid),
            used_memory_mib: Some(mib),
            ..Default::default()
        };
        TelemetryRead {
            gpus: vec![gpu(0, true), gpu(1, false), gpu(2, true), gpu(3, false)],
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: vec![
                    app("GPU-0", 1001, 30_000.0),
                    app("GPU-2", 1003, if n < self.hidden_from { 30_000.0 } else { self.helper_mib }),
                ],
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// PIDs 1001 and 1003 are job 901's.
struct Procs;
impl enforcer::attribution::ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 1001 | 1003).then(|| "0::/system.slice/slurmstepd.scope/job_901/step_0/user/task_0\n".to_string())
    }
}

/// 902's drains and cancels over 3 hours of cycles, one a minute, enforce mode.
fn run(helper_mib: f64, hidden_from: u32) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("901", 901, 2, &[NODE]), job("902", 902, 2, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:4".into());
    let mut d = enforcer::daemon::Daemon::new(
        config_with(POLICY, dir.path(), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            cycle: 0,
            helper_mib,
            hidden_from,
        },
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    for m in 0..180 {
        d.cycle(T0 + m * 60);
    }
    let calls = c.borrow().calls.clone();
    calls
        .into_iter()
        .filter(|c| (c.starts_with("drain") || c.starts_with("scancel")) && c.contains("902"))
        .collect()
}

/// Input: the trial's node (GPU 2 reads 30 GB used, its one listed process 500 MiB).
/// Expected: job 902 is never drained or cancelled. Control: the same node with the helper's
/// process listed at 30 GB (every MiB accounted for, so no process is hidden) drains and
/// cancels 902, idle on the GPUs left to it.
#[test]
fn a_job_placed_by_elimination_beside_hidden_processes_is_not_drained_or_cancelled() {
    let acted = run(500.0, 0);
    assert!(acted.is_empty(), "memory on GPU 2 no listed process accounts for, yet: {acted:?}");
    let control = run(30_000.0, 0);
    assert!(
        control.iter().any(|c| c.starts_with("drain")) && control.iter().any(|c| c.starts_with("scancel")),
        "control: 902 idle on {{1, 3}} with every process shown is drained and cancelled: {control:?}"
    );
}

/// Input: the same node, but GPU 2's memory is all its listed process's for the first 25
/// minutes (902 is placed by elimination on {1, 3}, kept, and alerted as idle from about
/// minute 20), and from minute 25 on the helper lists 500 MiB of GPU 2's 30 GB. Expected: the
/// kept placement by elimination is held at alert from then on: no drain (due at about minute
/// 30) and no cancel.
#[test]
fn a_kept_placement_by_elimination_is_held_at_alert_once_processes_hide() {
    let acted = run(500.0, 25);
    assert!(acted.is_empty(), "hidden processes from minute 25, yet: {acted:?}");
}
