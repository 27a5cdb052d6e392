//! Cases from the seventh review, each a bug it proved: what the daemon knows of the node
//! (the most GPUs it has listed, the configured node's host) survives a restart, and a
//! suspended job still holds the node our drain names (no resume, no hand-over).

mod common;

use common::cluster::{cluster, job, Cluster, FakeSlurm, NODE, T0};
use enforcer::attribution::ProcReader;
use enforcer::config::Config;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::scontrol_node::NodeState;
use enforcer::parse::smi::GpuReading;
use enforcer::parse::JobsRead;
use enforcer::slurm::{CancelOutcome, CommandError, SlurmClient};
use enforcer::telemetry::{Telemetry, TelemetryRead};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

const POLICY: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "30m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "60m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

fn config(dir: &Path, notify: &[String]) -> Config {
    let notify = notify.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    let text = format!(
        "{POLICY}\n[enforcer]\nmode = \"enforce\"\nnode = \"{NODE}\"\nstate_dir = \"{}\"\nmetrics_listen = \"\"\nnotify_command = [{notify}]\n",
        dir.display()
    );
    Config::from_text(&text, "test.toml").unwrap()
}

struct NoProc;
impl ProcReader for NoProc {
    fn cgroup(&self, _pid: u32) -> Option<String> {
        None
    }
}

/// `n` idle GPUs listed (0 % util, 3 MiB used), power jittering so no window looks frozen.
struct IdleGpus {
    n: Rc<RefCell<u16>>,
    calls: u32,
}

impl Telemetry for IdleGpus {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.calls += 1;
        let jitter = f64::from(self.calls % 3);
        let n = *self.n.borrow();
        TelemetryRead {
            gpus: (0..n)
                .map(|i| GpuReading {
                    index: Some(i),
                    uuid: Some(format!("GPU-{i}")),
                    util_pct: Some(0.0),
                    mem_used_mib: Some(3.0),
                    mem_total_mib: Some(81920.0),
                    power_w: Some(60.0 + jitter),
                    power_limit_w: Some(400.0),
                    ..Default::default()
                })
                .collect(),
            apps: Some(Default::default()),
            ..Default::default()
        }
    }
}

#[derive(Default)]
struct Faults {
    node_state_fails: bool,
}

#[derive(Clone)]
struct Flaky(FakeSlurm, Rc<RefCell<Faults>>);

impl SlurmClient for Flaky {
    fn jobs(&mut self) -> Result<JobsRead, CommandError> {
        self.0.jobs()
    }
    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError> {
        if self.1.borrow().node_state_fails {
            return Err(common::cluster::err("scontrol show node"));
        }
        self.0.node_state(node)
    }
    fn drain(&mut self, node: &str, reason: &str) -> Result<(), CommandError> {
        self.0.drain(node, reason)
    }
    fn resume(&mut self, node: &str) -> Result<(), CommandError> {
        self.0.resume(node)
    }
    fn set_admin_comment(&mut self, job_id: &str, text: &str) -> Result<(), CommandError> {
        self.0.set_admin_comment(job_id, text)
    }
    fn cancel(&mut self, job_id: &str) -> Result<CancelOutcome, CommandError> {
        self.0.cancel(job_id)
    }
}

type FlakyDaemon = Daemon<Flaky, IdleGpus, RealExecutor<Flaky>>;

#[allow(clippy::too_many_arguments)]
fn daemon(
    c: &Rc<RefCell<Cluster>>,
    faults: &Rc<RefCell<Faults>>,
    dir: &Path,
    host: &str,
    notify: Vec<String>,
    gpus: &Rc<RefCell<u16>>,
    now: i64,
) -> FlakyDaemon {
    let slurm = Flaky(FakeSlurm(c.clone()), faults.clone());
    let exec = RealExecutor {
        slurm: slurm.clone(),
        notify_command: notify.clone(),
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(5),
    };
    let tel = IdleGpus { n: gpus.clone(), calls: 0 };
    let mut d = Daemon::new(config(dir, &notify), slurm, tel, exec, Box::new(NoProc), now);
    d.host = host.into();
    d
}

fn calls(c: &Rc<RefCell<Cluster>>, prefix: &str) -> usize {
    c.borrow().calls.iter().filter(|x| x.starts_with(prefix)).count()
}

/// A notify command that appends each message it delivers to `dir/notified` and succeeds.
fn logging_notify(dir: &Path) -> (Vec<String>, std::path::PathBuf) {
    let log = dir.join("notified");
    let body = format!("echo \"$@\" >> {}; exit 0", log.display());
    (vec![common::script(dir, "notify", &body)], log)
}

/// e775e82 keeps the last NodeHostName across a failed scontrol read, but only in memory
/// (`Daemon::last_node_hostname`, never saved). The config names gpu001, this daemon runs on
/// gpu002: the host check holds alice's notice for 30 cycles. The daemon restarts (same
/// state_dir) while `scontrol show node` times out: the hold is gone and alice is told about
/// job 102, which runs on gpu001, on gpu002's idle GPUs.
#[test]
fn the_this_host_hold_survives_a_restart_while_scontrol_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (notify, notified) = logging_notify(dir.path());
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    c.borrow_mut().node_hostname = Some("gpu001.cluster.example".into());
    let faults = Rc::new(RefCell::new(Faults::default()));
    let gpus = Rc::new(RefCell::new(1u16));
    let state = dir.path().join("state");
    let mut d = daemon(&c, &faults, &state, "gpu002", notify.clone(), &gpus, T0);
    for i in 0..30 {
        d.cycle(T0 + i * 60);
    }
    assert!(d.metrics.skipped.contains_key("node_not_this_host"));
    assert!(
        !notified.exists(),
        "control: the host check holds the notice while scontrol answers"
    );
    drop(d);
    // Restart, same config and state_dir; slurmctld is slow and scontrol show node times out.
    faults.borrow_mut().node_state_fails = true;
    let t = T0 + 31 * 60;
    let mut d = daemon(&c, &faults, &state, "gpu002", notify, &gpus, t);
    for i in 0..30 {
        d.cycle(t + i * 60);
    }
    assert!(
        !notified.exists(),
        "after a restart alice was told about job 102 (running on gpu001) on gpu002's evidence: {:?}",
        std::fs::read_to_string(&notified).unwrap_or_default()
    );
}

/// df58da6: no resume while the GPU list is not whole, "fewer GPUs than seen" judged against
/// `Daemon::most_gpus_seen`, which is never saved. A 2-GPU node: our drain for the idle job
/// 102 stands and the job is cancelled. The daemon restarts (same state_dir) while one GPU has
/// fallen off the bus (nvidia-smi now lists 1): the fresh daemon has seen 1 at most, calls the
/// list whole and resumes the node although one of its GPUs cannot be read.
#[test]
fn no_resume_after_a_restart_while_a_gpu_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (notify, _notified) = logging_notify(dir.path());
    let c = cluster(vec![job("102", 102, 2, &[NODE])]);
    let faults = Rc::new(RefCell::new(Faults::default()));
    let gpus = Rc::new(RefCell::new(2u16));
    let state = dir.path().join("state");
    let mut d = daemon(&c, &faults, &state, NODE, notify.clone(), &gpus, T0);
    let mut t = T0;
    while calls(&c, "scancel") == 0 {
        d.cycle(t);
        t += 60;
        assert!(t < T0 + 300 * 60, "never cancelled: {:?}", c.borrow().calls);
    }
    assert_eq!(calls(&c, "resume"), 0);
    // Control: without a restart, the missing GPU holds the resume.
    *gpus.borrow_mut() = 1;
    d.cycle(t);
    t += 60;
    assert_eq!(calls(&c, "resume"), 0, "control: the running daemon holds the resume");
    drop(d);
    // Restart (same state_dir), the GPU still missing.
    let mut d = daemon(&c, &faults, &state, NODE, notify, &gpus, t);
    for _ in 0..3 {
        d.cycle(t);
        t += 60;
    }
    assert_eq!(
        calls(&c, "resume"),
        0,
        "resumed after a restart while one of the node's 2 GPUs is missing: {:?}",
        c.borrow().calls
    );
}

/// Our drain for job 201 stands; an admin suspends 201 (`scontrol suspend 201`). A suspended
/// job keeps its allocation (its GPUs and memory stay its own until it is resumed), and the
/// override rule of 014a801 itself counts a suspend as part of the same run. But the resume
/// check (`running_here`, from `SlurmJob::may_hold`) counts only RUNNING jobs, so the node is
/// resumed at once while 201 still holds it; when 201 is resumed it runs on an undrained node.
#[test]
fn no_resume_while_the_drained_job_is_suspended() {
    let dir = tempfile::tempdir().unwrap();
    let (notify, _notified) = logging_notify(dir.path());
    let mut a = job("201", 201, 1, &[NODE]);
    a.state = "SUSPENDED".into();
    let c = cluster(vec![a]);
    {
        let mut cl = c.borrow_mut();
        cl.node_state = "MIXED+DRAIN".into();
        cl.node_reason = Some("gpu-reaper: idle job 201".into());
    }
    let faults = Rc::new(RefCell::new(Faults::default()));
    let gpus = Rc::new(RefCell::new(1u16));
    let mut d = daemon(&c, &faults, &dir.path().join("state"), NODE, notify, &gpus, T0);
    for i in 0..3 {
        d.cycle(T0 + i * 60);
    }
    assert_eq!(
        calls(&c, "resume"),
        0,
        "resumed while job 201 (our drain's job) is suspended on the node: {:?}",
        c.borrow().calls
    );
}

/// The hand-over of 1dae808 with the same gap: our drain names job 201 (no GPU of its own
/// here, so only the Reason speaks for it) and job 202 on the node is idle; 202 becomes due
/// for a drain while 201 runs (held: the node is drained for 201). Then 201 is suspended,
/// still holding its allocation. The hand-over reads 201 as gone and rewrites the Reason to
/// 202: the drain for 201 is lost while 201 still holds the node (and once 202 is cancelled,
/// the node is resumed with 201 on it).
#[test]
fn no_handover_while_the_drained_job_is_suspended() {
    let dir = tempfile::tempdir().unwrap();
    let (notify, _notified) = logging_notify(dir.path());
    let a = job("201", 201, 0, &[NODE]);
    let b = job("202", 202, 1, &[NODE]);
    let c = cluster(vec![a, b]);
    {
        let mut cl = c.borrow_mut();
        cl.node_state = "MIXED+DRAIN".into();
        cl.node_reason = Some("gpu-reaper: idle job 201".into());
    }
    let faults = Rc::new(RefCell::new(Faults::default()));
    let gpus = Rc::new(RefCell::new(1u16));
    let mut d = daemon(&c, &faults, &dir.path().join("state"), NODE, notify, &gpus, T0);
    let mut t = T0;
    // Until 202 is due for a drain and held back because the node is drained for 201.
    while !d.metrics.skipped.contains_key("node_special_state") {
        d.cycle(t);
        t += 60;
        assert!(t < T0 + 200 * 60, "202 never due for a drain: {:?}", c.borrow().calls);
    }
    assert!(
        c.borrow().calls.is_empty(),
        "control: nothing done while 201 runs: {:?}",
        c.borrow().calls
    );
    // `scontrol suspend 201`.
    c.borrow_mut().jobs[0].state = "SUSPENDED".into();
    d.cycle(t);
    let calls_seen = c.borrow().calls.clone();
    assert!(
        calls_seen.is_empty(),
        "our drain for suspended job 201 was taken over or resumed: {calls_seen:?}"
    );
    assert_eq!(c.borrow().node_reason.as_deref(), Some("gpu-reaper: idle job 201"));
}

/// The same lost memory, worse: "whole" also gates placing a job by elimination (a busy job
/// whose own GPU is missing from the list would be placed on a free one). A 2-GPU node with
/// one 1-GPU job, 102, whose GPU is not told by any process (no compute-apps rows), so it is
/// never placed while both GPUs are listed. GPU 1 (102's) falls off the bus: the running
/// daemon keeps the list "not whole" and places nothing (control). After a restart the fresh
/// daemon has seen 1 GPU at most, so the list is "whole", 102 is placed by elimination on the
/// idle GPU 0 and is drained and cancelled on a GPU that was never its own.
#[test]
fn no_placement_by_elimination_after_a_restart_while_a_gpu_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (notify, _notified) = logging_notify(dir.path());
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    let faults = Rc::new(RefCell::new(Faults::default()));
    let gpus = Rc::new(RefCell::new(2u16));
    let state = dir.path().join("state");
    let mut d = daemon(&c, &faults, &state, NODE, notify.clone(), &gpus, T0);
    let mut t = T0;
    for _ in 0..10 {
        d.cycle(t);
        t += 60;
    }
    *gpus.borrow_mut() = 1;
    for _ in 0..150 {
        d.cycle(t);
        t += 60;
    }
    assert!(
        c.borrow().calls.is_empty(),
        "control: nothing done while a GPU is missing: {:?}",
        c.borrow().calls
    );
    drop(d);
    let mut d = daemon(&c, &faults, &state, NODE, notify, &gpus, t);
    for _ in 0..150 {
        d.cycle(t);
        t += 60;
    }
    assert!(
        c.borrow().calls.is_empty(),
        "job 102 was acted on after a restart, judged on a GPU placed by elimination while one GPU is missing: {:?}",
        c.borrow().calls
    );
}

/// Trial 7: a state file written for another node (a state_dir copied or shared by mistake)
/// was restored without a word, its drains, notices and attributions taken for this node's.
/// It is now moved aside like an unreadable one, and the daemon starts afresh.
#[test]
fn a_state_file_written_for_another_node_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    let gpus = Rc::new(RefCell::new(1u16));
    let faults = Rc::new(RefCell::new(Faults::default()));
    {
        let mut d = daemon(&c, &faults, dir.path(), NODE, vec!["true".into()], &gpus, T0);
        for i in 0..40 {
            d.cycle(T0 + i * 60);
        }
        assert!(!d.actions.alerted.is_empty());
    }
    let other = format!(
        "{POLICY}\n[enforcer]\nmode = \"enforce\"\nnode = \"gpu777\"\nstate_dir = \"{}\"\nmetrics_listen = \"\"\nnotify_command = [\"true\"]\n",
        dir.path().display()
    );
    let d = Daemon::new(
        Config::from_text(&other, "test.toml").unwrap(),
        FakeSlurm(c.clone()),
        IdleGpus { n: gpus, calls: 0 },
        common::cluster::real_executor(&c),
        Box::new(NoProc),
        T0 + 40 * 60,
    );
    assert!(d.actions.alerted.is_empty(), "{:?}", d.actions);
    let aside = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("state.json.corrupt-"));
    assert!(aside, "the other node's file is kept aside");
}
