//! A fake Slurm cluster shared by the in-process end-to-end tests: jobs, one node's state and
//! reason, and every call the daemon made, in order.

use enforcer::attribution::ProcReader;
use enforcer::config::Config;
use enforcer::parse::scontrol_node::{self, NodeState};
use enforcer::parse::{JobsRead, SlurmJob};
use enforcer::slurm::{CancelOutcome, CommandError, SlurmClient};
use std::cell::RefCell;
use std::rc::Rc;

/// The node under test.
pub const NODE: &str = "gpu001";
/// A cycle time, epoch seconds.
pub const T0: i64 = 1_900_000_000;

#[derive(Default)]
pub struct Cluster {
    pub jobs: Vec<SlurmJob>,
    pub node_state: String,
    pub node_reason: Option<String>,
    /// `NodeHostName=` (and `NodeAddr=`) shown for the node; `None` shows neither.
    pub node_hostname: Option<String>,
    /// The `NodeName=` scontrol answers with; `None`: the node asked for.
    pub node_name_shown: Option<String>,
    /// `Gres=` shown for the node (e.g. `gpu:4`); `None` shows none.
    pub node_gres: Option<String>,
    /// `SlurmdStartTime=` shown for the node; `None` shows none.
    pub node_slurmd_start: Option<String>,
    pub honour_drain: bool,
    pub scancel_fails: bool,
    pub squeue_fails: bool,
    pub calls: Vec<String>,
}

#[derive(Clone)]
pub struct FakeSlurm(pub Rc<RefCell<Cluster>>);

pub fn err(what: &str) -> CommandError {
    CommandError {
        command: what.into(),
        kind: "exit_1".into(),
        problem: "fake failure".into(),
    }
}

impl SlurmClient for FakeSlurm {
    fn jobs(&mut self) -> Result<JobsRead, CommandError> {
        let c = self.0.borrow();
        if c.squeue_fails {
            return Err(err("squeue"));
        }
        Ok(JobsRead {
            jobs: c.jobs.clone(),
            row_errors: vec![],
        })
    }
    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError> {
        let c = self.0.borrow();
        let shown = c.node_name_shown.as_deref().unwrap_or(node);
        let mut t = format!("NodeName={shown} State={}\n", c.node_state);
        if let Some(h) = &c.node_hostname {
            t.push_str(&format!("   NodeAddr={h} NodeHostName={h} Version=22.05.8\n"));
        }
        if let Some(g) = &c.node_gres {
            t.push_str(&format!("   Gres={g}\n"));
        }
        if let Some(s) = &c.node_slurmd_start {
            t.push_str(&format!("   BootTime=2026-11-29T20:46:14 SlurmdStartTime={s}\n"));
        }
        if let Some(r) = &c.node_reason {
            t.push_str(&format!("   Reason={r} [root@2026-01-01T00:00:00]\n"));
        }
        Ok(scontrol_node::parse(&t).unwrap())
    }
    fn drain(&mut self, node: &str, reason: &str) -> Result<(), CommandError> {
        let mut c = self.0.borrow_mut();
        c.calls.push(format!("drain {node} {reason}"));
        if c.honour_drain {
            c.node_state = "MIXED+DRAIN".into();
            c.node_reason = Some(reason.into());
        }
        Ok(())
    }
    fn resume(&mut self, node: &str) -> Result<(), CommandError> {
        let mut c = self.0.borrow_mut();
        c.calls.push(format!("resume {node}"));
        c.node_state = "MIXED".into();
        c.node_reason = None;
        Ok(())
    }
    fn set_admin_comment(&mut self, job_id: &str, text: &str) -> Result<(), CommandError> {
        self.0.borrow_mut().calls.push(format!("admincomment {job_id} {text}"));
        Ok(())
    }
    fn cancel(&mut self, job_id: &str) -> Result<CancelOutcome, CommandError> {
        let mut c = self.0.borrow_mut();
        c.calls.push(format!("scancel {job_id}"));
        if c.scancel_fails {
            return Err(err("scancel"));
        }
        c.jobs.retain(|j| j.job_id != job_id);
        Ok(CancelOutcome::Cancelled)
    }
}

/// A cluster with `jobs`, the node `MIXED`, drains honoured.
pub fn cluster(jobs: Vec<SlurmJob>) -> Rc<RefCell<Cluster>> {
    Rc::new(RefCell::new(Cluster {
        jobs,
        node_state: "MIXED".into(),
        honour_drain: true,
        ..Default::default()
    }))
}

/// A RUNNING job of alice's, started two hours before [`T0`].
pub fn job(id: &str, raw: u64, gpus: u32, nodes: &[&str]) -> SlurmJob {
    SlurmJob {
        job_id: id.into(),
        raw_id: Some(raw),
        state: "RUNNING".into(),
        user: "alice".into(),
        account: "ml".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        name: "train".into(),
        start_s: Some(T0 - 7200),
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        gpus,
        ..Default::default()
    }
}

/// The real executor over the fake cluster `c`, with `true` as the notify command.
pub fn real_executor(c: &Rc<RefCell<Cluster>>) -> enforcer::executor::RealExecutor<FakeSlurm> {
    enforcer::executor::RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(1),
    }
}

/// A /proc where no PID exists: no process is ever resolved to a job.
pub struct NoProc;
impl ProcReader for NoProc {
    fn cgroup(&self, _pid: u32) -> Option<String> {
        None
    }
}

/// The policy most in-process tests use: 20-minute window, alert at once, drain after 30
/// minutes, cancel after 60, `notice` 30 minutes, idle may be cancelled.
pub const POLICY: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "30m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "60m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// A config of `policy` (a `[policy]` section) and an `[enforcer]` section for [`NODE`] in
/// `mode`, state in `dir`, no metrics, `true` as the notify command, then `extra` (more
/// `[enforcer]` keys, or further tables).
pub fn config_with(policy: &str, dir: &std::path::Path, mode: &str, extra: &str) -> Config {
    let text = format!(
        "{policy}\n[enforcer]\nmode = \"{mode}\"\nnode = \"{NODE}\"\nstate_dir = \"{}\"\nmetrics_listen = \"\"\nnotify_command = [\"true\"]\n{extra}\n",
        dir.display()
    );
    Config::from_text(&text, "test.toml").unwrap()
}

/// The worst verdict each job reached over the cycles at minutes `from..from + cycles` after
/// [`T0`] (a job never judged is absent).
pub fn worst_verdicts<S: SlurmClient, T: enforcer::telemetry::Telemetry, E: enforcer::executor::Executor>(
    d: &mut enforcer::daemon::Daemon<S, T, E>,
    from: i64,
    cycles: i64,
) -> std::collections::BTreeMap<String, policy::Verdict> {
    let mut worst = std::collections::BTreeMap::new();
    for i in 0..cycles {
        for f in d.cycle(T0 + (from + i) * 60).findings {
            let w = worst.entry(f.job_id).or_insert(f.verdict);
            *w = (*w).max(f.verdict);
        }
    }
    worst
}

/// One idle GPU (index 0, UUID `GPU-0`, minor 0: 0 %, 3 MiB, no compute process); its power
/// jitters around 56 W so no window looks frozen, or is `[N/A]` (`power_known` false), when
/// every reading repeats.
pub struct OneIdleGpu {
    pub cycle: u32,
    pub power_known: bool,
}

impl enforcer::telemetry::Telemetry for OneIdleGpu {
    fn read(&mut self, _now_s: i64) -> enforcer::telemetry::TelemetryRead {
        self.cycle += 1;
        enforcer::telemetry::TelemetryRead {
            gpus: vec![enforcer::parse::smi::GpuReading {
                index: Some(0),
                uuid: Some("GPU-0".into()),
                util_pct: Some(0.0),
                mem_used_mib: Some(3.0),
                mem_total_mib: Some(81_920.0),
                power_w: self.power_known.then_some(55.0 + (self.cycle % 3) as f64),
                power_limit_w: Some(400.0),
                minor: Some(0),
                ..Default::default()
            }],
            apps: Some(enforcer::parse::smi::AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: Vec::new(),
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// Drain after 32 minutes (so that a notice first tried at 17 minutes, retried after 1, 2, 4, 8
/// minutes, is tried again in the drain's cycle), cancel after 42, `notice` 10 minutes, window 20.
pub const POLICY_DRAIN_32M: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "10m"
stages = [{ after = "0s", verdict = "alert" }, { after = "32m", verdict = "drain" }, { after = "42m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

/// A daemon for [`NODE`] (`Gres=gpu:1`) running job 802 (one GPU, alice's) under `policy` in
/// `mode` with state in `state`, reading `telemetry`, acting through [`real_executor`]; and
/// its cluster.
pub fn daemon_802<T: enforcer::telemetry::Telemetry>(
    policy: &str,
    state: &std::path::Path,
    mode: &str,
    telemetry: T,
) -> (
    Rc<RefCell<Cluster>>,
    enforcer::daemon::Daemon<FakeSlurm, T, enforcer::executor::RealExecutor<FakeSlurm>>,
) {
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let d = enforcer::daemon::Daemon::new(
        config_with(policy, state, mode, ""),
        FakeSlurm(c.clone()),
        telemetry,
        real_executor(&c),
        Box::new(NoProc),
        T0,
    );
    (c, d)
}

/// [`OneIdleGpu`] whose nvidia-smi gives no data (a timeout) in the cycles `from..to`
/// (counted from 0).
pub struct Outage {
    /// The GPU read outside the outage.
    pub gpu: OneIdleGpu,
    /// Reads so far.
    pub cycle: u32,
    /// First read (counted from 0) without data.
    pub from: u32,
    /// First read with data again.
    pub to: u32,
}

impl Outage {
    /// One idle GPU whose power is known, without data in the reads `reads` (from 0).
    pub fn of_idle_gpu(reads: std::ops::Range<u32>) -> Outage {
        Outage {
            gpu: OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            cycle: 0,
            from: reads.start,
            to: reads.end,
        }
    }
}

impl enforcer::telemetry::Telemetry for Outage {
    fn read(&mut self, now_s: i64) -> enforcer::telemetry::TelemetryRead {
        let n = self.cycle;
        self.cycle += 1;
        if (self.from..self.to).contains(&n) {
            return enforcer::telemetry::TelemetryRead {
                no_data: Some("timeout".into()),
                ..Default::default()
            };
        }
        self.gpu.read(now_s)
    }
}

/// One cycle of job 802 as [`cycles_802`] sees it: the kinds of the actions done, the skips as
/// (kind, action), and job 802's verdict.
pub type Cycle802 = (Vec<&'static str>, Vec<(enforcer::plan::SkipKind, &'static str)>, policy::Verdict);

/// Runs job 802 (one GPU, read through `telemetry`) in enforce mode under [`POLICY`] for
/// `cycles` one-minute cycles from [`T0`], in a fresh state folder.
pub fn cycles_802<T: enforcer::telemetry::Telemetry>(telemetry: T, cycles: i64) -> Vec<Cycle802> {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (_c, mut d) = daemon_802(POLICY, &state, "enforce", telemetry);
    (0..cycles)
        .map(|m| {
            let rep = d.cycle(T0 + m * 60);
            let done = rep
                .actions
                .iter()
                .filter(|(_, o)| matches!(o, enforcer::executor::Outcome::Done))
                .map(|(a, _)| a.kind())
                .collect();
            let skips = rep.skips.iter().map(|s| (s.kind, s.action)).collect();
            let v = rep
                .findings
                .iter()
                .find(|f| f.job_id == "802")
                .map_or(policy::Verdict::Healthy, |f| f.verdict);
            (done, skips, v)
        })
        .collect()
}

/// The first of `cycles` in which an action of `kind` was done.
pub fn first_done(cycles: &[Cycle802], kind: &str) -> usize {
    cycles
        .iter()
        .position(|(done, _, _)| done.contains(&kind))
        .unwrap_or_else(|| panic!("no {kind} in {} cycles", cycles.len()))
}

/// PID 1801 is job 801's, 1802 job 802's (their cgroups name the jobs).
pub struct Procs801And802;
impl ProcReader for Procs801And802 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 1801 | 1802).then(|| format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", pid - 1000))
    }
}

/// Read `n` of a node with two GPUs, job 801's process (PID 1801) on GPU-0 and job 802's
/// (PID 1802) on GPU-1 (see [`Procs801And802`]). A GPU is `hung` (0 %, 30 GB held, power
/// jittering near idle) unless `busy` says it works (88–92 %, ~300 W).
pub fn jobs_801_802_read(n: u32, busy: [bool; 2]) -> enforcer::telemetry::TelemetryRead {
    let gpu = |i: u16| enforcer::parse::smi::GpuReading {
        index: Some(i),
        uuid: Some(format!("GPU-{i}")),
        util_pct: Some(if busy[usize::from(i)] { 88.0 + (n % 5) as f64 } else { 0.0 }),
        mem_used_mib: Some(30_000.0),
        mem_total_mib: Some(81_920.0),
        power_w: Some(if busy[usize::from(i)] { 300.0 } else { 55.0 } + ((n + u32::from(i)) % 3) as f64),
        power_limit_w: Some(400.0),
        minor: Some(u32::from(i)),
        ..Default::default()
    };
    let app = |i: u16| enforcer::parse::smi::ComputeApp {
        gpu_uuid: Some(format!("GPU-{i}")),
        pid: Some(1801 + u32::from(i)),
        // The process holds its GPU's memory, less its context's share: nothing is hidden.
        used_memory_mib: Some(29_800.0),
        ..Default::default()
    };
    enforcer::telemetry::TelemetryRead {
        gpus: vec![gpu(0), gpu(1)],
        apps: Some(enforcer::parse::smi::AppsTable {
            columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
            apps: vec![app(0), app(1)],
            row_errors: Vec::new(),
        }),
        ..Default::default()
    }
}

/// Reviews 35 and 36: a node of 2 GPUs, Slurm gives no device indices. Job 902 (1 GPU) really
/// holds GPU-0, where its main process works at ~85 % (30 GB, ~300 W) but is not listed by
/// nvidia-smi (hidden, as in trial 20). Until read `helper_ends` a helper of 902 (PID 9202,
/// 2 GB) runs on GPU-1 (no ConstrainDevices: the case of trial 19). GPU-1 reads 0 %, ~55 W.
/// GPU-0's row gives no UUID in the reads of `no_uuid`.
pub struct HiddenMainVisibleHelper {
    pub cycle: u32,
    pub helper_ends: u32,
    pub no_uuid: Vec<u32>,
}

impl enforcer::telemetry::Telemetry for HiddenMainVisibleHelper {
    fn read(&mut self, _now_s: i64) -> enforcer::telemetry::TelemetryRead {
        use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
        let n = self.cycle;
        self.cycle += 1;
        let helper = n < self.helper_ends;
        let gpu0 = GpuReading {
            index: Some(0),
            uuid: (!self.no_uuid.contains(&n)).then(|| "GPU-0".into()),
            util_pct: Some(83.0 + (n % 5) as f64),
            mem_used_mib: Some(30_000.0),
            mem_total_mib: Some(81_920.0),
            power_w: Some(300.0 + (n % 7) as f64),
            power_limit_w: Some(400.0),
            minor: Some(0),
            mig_enabled: Some(false),
            ..Default::default()
        };
        let gpu1 = GpuReading {
            index: Some(1),
            uuid: Some("GPU-1".into()),
            util_pct: Some(0.0),
            mem_used_mib: Some(if helper { 2_000.0 } else { 3.0 }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(55.0 + (n % 3) as f64),
            power_limit_w: Some(400.0),
            minor: Some(1),
            mig_enabled: Some(false),
            ..Default::default()
        };
        let apps = if helper {
            vec![ComputeApp {
                gpu_uuid: Some("GPU-1".into()),
                pid: Some(9202),
                used_memory_mib: Some(2_000.0),
                ..Default::default()
            }]
        } else {
            vec![]
        };
        enforcer::telemetry::TelemetryRead {
            gpus: vec![gpu0, gpu1],
            apps: Some(AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps,
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// PID 9202 is job 902's (its cgroup); no other PID exists.
pub struct Proc9202;
impl enforcer::attribution::ProcReader for Proc9202 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 9202).then(|| "0::/system.slice/slurmstepd.scope/job_902/step_0/user/task_0\n".to_string())
    }
}
