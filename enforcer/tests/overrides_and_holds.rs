//! Cases from the sixth adversarial review, each a bug it proved: an admin's override that a
//! failed-but-applied drain, a suspend or a new breach's notices must not lose or distort; no
//! notice for another host's job when scontrol fails; `[Unknown Error]` is no evidence;
//! count-only `gres_detail`; the state_dir lock noticing its file is gone.

mod common;

use common::cluster::{cluster, job, Cluster, FakeSlurm, NODE, T0};
use enforcer::attribution::ProcReader;
use enforcer::config::Config;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::scontrol_node::NodeState;
use enforcer::parse::smi::GpuReading;
use enforcer::parse::{JobsRead, SlurmJob};
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

/// `n` idle GPUs (0 % util, 3 MiB used), power jittering a little so no window looks frozen.
struct IdleGpus {
    n: u16,
    calls: u32,
}

impl Telemetry for IdleGpus {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.calls += 1;
        let jitter = f64::from(self.calls % 3);
        TelemetryRead {
            gpus: (0..self.n)
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

/// Switches for [`Flaky`].
#[derive(Default)]
struct Faults {
    /// `scontrol show node` fails.
    node_state_fails: bool,
    /// `scontrol update ... State=DRAIN` is applied by Slurm, but the command reports a
    /// failure (a timeout under a loaded slurmctld, say).
    drain_applied_but_fails: bool,
}

/// The shared fake cluster, with faults switched on and off by the test.
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
        self.0.drain(node, reason)?;
        if self.1.borrow().drain_applied_but_fails {
            return Err(CommandError {
                command: "scontrol update".into(),
                kind: "timeout".into(),
                problem: "timeout".into(),
            });
        }
        Ok(())
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

fn flaky_daemon(c: &Rc<RefCell<Cluster>>, faults: &Rc<RefCell<Faults>>, dir: &Path, host: &str, notify: Vec<String>) -> FlakyDaemon {
    let slurm = Flaky(FakeSlurm(c.clone()), faults.clone());
    let exec = RealExecutor {
        slurm: slurm.clone(),
        notify_command: notify.clone(),
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(5),
    };
    let mut d = Daemon::new(config(dir, &notify), slurm, IdleGpus { n: 1, calls: 0 }, exec, Box::new(NoProc), T0);
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

// ---- 1. The this-host check is skipped whenever scontrol show node fails -----------------------

/// One config with `node = "gpu001"` pushed to every node; this daemon runs on gpu002, and
/// gpu001's NodeHostName says so. While `scontrol show node` answers, nothing is noticed
/// (operator_trial.rs). But the host check reads NodeHostName from that same answer, so in a
/// cycle where scontrol fails there is no check at all, and the plan (which holds drains and
/// cancels for an unknown node state, but not notices) sends alice a notice about job 102,
/// judged on gpu002's idle GPUs although it runs on gpu001.
#[test]
fn no_notice_for_another_hosts_job_when_scontrol_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (notify, notified) = logging_notify(dir.path());
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    c.borrow_mut().node_hostname = Some("gpu001.cluster.example".into());
    let faults = Rc::new(RefCell::new(Faults::default()));
    let mut d = flaky_daemon(&c, &faults, &dir.path().join("state"), "gpu002", notify);
    // 30 cycles with scontrol answering (past warm-up: the job alerts): no notice, the host
    // check holds it back.
    for i in 0..30 {
        d.cycle(T0 + i * 60);
    }
    assert!(d.metrics.skipped.contains_key("node_not_this_host"));
    assert!(
        !notified.exists(),
        "control: the host check holds the notice while scontrol answers"
    );
    // One cycle in which scontrol show node times out.
    faults.borrow_mut().node_state_fails = true;
    d.cycle(T0 + 30 * 60);
    faults.borrow_mut().node_state_fails = false;
    assert!(
        !notified.exists(),
        "alice was told about job 102 (running on gpu001) on gpu002's evidence: {:?}",
        std::fs::read_to_string(&notified).unwrap_or_default()
    );
}

// ---- 2. An admin's resume is an override only if our drain command reported success -----------

/// Our drain for job 102 is applied by Slurm but the command reports a failure (a timeout
/// under load). The next cycles read our Reason back and the plan treats the node as drained
/// by us for the job; no DrainRecord exists, though, so when an admin resumes the node while
/// the job runs, `observe_node` has nothing to compare and the resume is not taken as an
/// override: the job is drained again (and later cancelled) against the admin's decision.
#[test]
fn admin_resume_is_an_override_even_when_our_drain_command_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    let faults = Rc::new(RefCell::new(Faults {
        drain_applied_but_fails: true,
        ..Default::default()
    }));
    let mut d = flaky_daemon(&c, &faults, &dir.path().join("state"), "", vec!["true".into()]);
    let mut t = T0;
    while calls(&c, "drain") == 0 {
        d.cycle(t);
        t += 60;
        assert!(t < T0 + 3 * 3600, "never drained");
    }
    faults.borrow_mut().drain_applied_but_fails = false;
    // Two more cycles: our drain is seen standing (our Reason, DRAIN).
    d.cycle(t);
    d.cycle(t + 60);
    t += 120;
    assert_eq!(c.borrow().node_reason.as_deref(), Some("gpu-reaper: idle job 102"));
    assert_eq!(calls(&c, "scancel"), 0);
    // The admin resumes the node (clears DRAIN and the Reason); job 102 still runs.
    {
        let mut cl = c.borrow_mut();
        cl.node_state = "MIXED".into();
        cl.node_reason = None;
    }
    for i in 0..120 {
        d.cycle(t + i * 60);
    }
    assert_eq!(
        (calls(&c, "drain"), calls(&c, "scancel")),
        (1, 0),
        "the admin's resume was overridden: {:?}",
        c.borrow().calls
    );
}

// ---- 3. A per-field error in bracket form is read as "missing", not as unreadable ------------

type SmiDaemon = Daemon<FakeSlurm, enforcer::telemetry::NvidiaSmi, RealExecutor<FakeSlurm>>;

/// An enforce-mode daemon over `jobs`, reading GPUs from a fake `nvidia-smi` whose shell body
/// is `smi_body` (`$D` is the test's directory, for a call counter).
fn smi_daemon(dir: &Path, smi_body: &str, jobs: Vec<SlurmJob>) -> (SmiDaemon, Rc<RefCell<Cluster>>) {
    let smi = common::script(dir, "nvidia-smi", &format!("D=\"{}\"\n{smi_body}", dir.display()));
    let telemetry = enforcer::telemetry::NvidiaSmi {
        program: smi,
        timeout: std::time::Duration::from_secs(5),
        kill: enforcer::run::KillMode::Ignore,
        minor_refused: false,
        mig_refused: false,
        codec_refused: false,
        refused_at_s: None,
        refusals_warned: 0,
    };
    let c = cluster(jobs);
    let exec = RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(1),
    };
    let d = Daemon::new(
        config(&dir.join("state"), &["true".to_string()]),
        FakeSlurm(c.clone()),
        telemetry,
        exec,
        Box::new(NoProc),
        T0,
    );
    (d, c)
}

/// The same whole-node idle job as incomplete_telemetry.rs's
/// `a_gpu_row_with_an_unreadable_value_is_no_evidence`, whose power reads `ERR!` there (no
/// evidence: never drained). Here the power column reads nvidia-smi's bracketed per-field
/// error texts instead, `[Unknown Error]` or `[GPU is lost]` (parse/smi.rs itself notes that
/// `[Unknown Error]` is a per-field value). The parser files every bracketed text as missing,
/// like `[N/A]` on a GPU without power readings, so the rows stay evidence and the job is
/// judged on util alone, then drained and cancelled: the operator trial's ERR! bug again
/// under another spelling of the same driver error. (`[GPU is lost]` holds: that text makes
/// the whole read no data; `ERR!` is the control.)
#[test]
fn a_bracketed_error_reading_is_no_evidence() {
    let header = "echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'";
    let mut acted_on = Vec::new();
    for power in ["ERR!", "[Unknown Error]", "[GPU is lost]"] {
        let dir = tempfile::tempdir().unwrap();
        let body = format!(
            r#"case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
{header}
p="6$((n % 3)).5"; if [ "$n" -ge 2 ]; then p="{power}"; fi
echo "0, GPU-0, 0, 3, 81920, $p, 400.00"
echo "1, GPU-1, 0, 3, 81920, $p, 400.00""#
        );
        let (mut d, c) = smi_daemon(dir.path(), &body, vec![job("1000", 1000, 2, &[NODE])]);
        for i in 0..100 {
            d.cycle(T0 + i * 60);
        }
        let calls: Vec<String> = c
            .borrow()
            .calls
            .iter()
            .filter(|x| x.starts_with("drain") || x.starts_with("scancel"))
            .cloned()
            .collect();
        if !calls.is_empty() {
            acted_on.push((power, calls));
        }
    }
    assert!(acted_on.is_empty(), "drained/cancelled on a GPU error reading: {acted_on:?}");
}

// ---- 4. An override is forgotten when its job is seen SUSPENDED for one cycle ---------------

/// Runs until our drain for job 102 stands and has been seen (confirmed), then resumes the
/// node as an admin would (`scontrol update State=RESUME`, which clears the Reason).
fn drained_then_admin_resumed(c: &Rc<RefCell<Cluster>>, d: &mut FlakyDaemon) -> i64 {
    let mut t = T0;
    while calls(c, "drain") == 0 {
        d.cycle(t);
        t += 60;
        assert!(t < T0 + 3 * 3600, "never drained");
    }
    d.cycle(t);
    d.cycle(t + 60);
    t += 120;
    assert_eq!(c.borrow().node_reason.as_deref(), Some("gpu-reaper: idle job 102"));
    let mut cl = c.borrow_mut();
    cl.node_state = "MIXED".into();
    cl.node_reason = None;
    t
}

/// An admin resumed our drain while job 102 ran: an override "for the rest of that run". The
/// job is then suspended for a moment and resumed (`scontrol suspend/resume`, or gang
/// scheduling / PreemptMode=SUSPEND, which suspends and resumes jobs every time slice); its
/// run, start time and allocation are unchanged. `prune` keeps an override only for jobs that
/// are RUNNING or of unknown state, so one cycle that sees the job SUSPENDED forgets the
/// override, and the same run is drained again and cancelled against the admin's decision.
#[test]
fn an_override_survives_a_suspend_and_resume_of_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    let faults = Rc::new(RefCell::new(Faults::default()));
    let mut d = flaky_daemon(&c, &faults, &dir.path().join("state"), "", vec!["true".into()]);
    let t = drained_then_admin_resumed(&c, &mut d);
    for i in 0..5 {
        d.cycle(t + i * 60);
    }
    assert!(
        d.actions.overrides.contains_key("102"),
        "control: the admin's resume is an override"
    );
    assert_eq!(calls(&c, "drain"), 1);
    // One cycle with the job suspended, then it runs on (same run, same start time).
    c.borrow_mut().jobs[0].state = "SUSPENDED".into();
    d.cycle(t + 5 * 60);
    c.borrow_mut().jobs[0].state = "RUNNING".into();
    for i in 6..150 {
        d.cycle(t + i * 60);
    }
    assert_eq!(
        (calls(&c, "drain"), calls(&c, "scancel")),
        (1, 0),
        "override forgotten ({:?}): {:?}",
        d.actions.overrides,
        c.borrow().calls
    );
}

// ---- 5. A corrupt (or unreadable) state file drops the admin's override -----------------------

// ---- 6. Slurm's count-only GRES detail (`gpu(CNT:N)`) is a row error ---------------------------

/// Slurm writes a node's GRES detail as `name:N(IDX:list)` when the GRES has device files and
/// as `name(CNT:N)` when it has none (a gres.conf `Name=gpu Count=N` without `File=`):
/// src/common/gres.c, `gres_job_state_...details`, `"%s%s(CNT:%"PRIu64")"`. `gres_detail::gpu_count`
/// refuses a GPU item without an IDX list, and `gpus_of` parses gres_detail even when the
/// TRES already give the count, so such a job, which read fine from its TRES before today,
/// is now a row error.
#[test]
fn count_only_gres_detail_is_read_not_a_row_error() {
    for (tres, detail) in [
        ("cpu=2,gres/gpu=2", r#"["gpu(CNT:2)"]"#),
        ("cpu=2,gres/gpu=2", r#"["gpu:a100(CNT:2)"]"#),
        ("cpu=2", r#"["gpu(CNT:2)"]"#),
    ] {
        let text = format!(
            r#"{{"jobs": [{{"job_id": 77, "job_state": ["RUNNING"], "nodes": "gpu001", "user_name": "bob", "account": "a", "partition": "p", "qos": "normal", "name": "n", "comment": "", "start_time": 1, "tres_alloc_str": "{tres}", "gres_detail": {detail}}}]}}"#
        );
        let r = enforcer::parse::squeue_json::parse(&text).unwrap();
        assert!(r.row_errors.is_empty(), "{tres} {detail}: {:?}", r.row_errors);
        assert_eq!(r.jobs.len(), 1);
        assert_eq!(r.jobs[0].gpus, 2, "{tres} {detail}");
    }
}

/// The fake cluster's jobs plus job 9001, running on gpu099, read from squeue JSON.
#[derive(Clone)]
struct WithForeignJob(FakeSlurm);

const FOREIGN: &str = r#"{"jobs": [{"job_id": 9001, "job_state": ["RUNNING"], "nodes": "gpu099", "user_name": "bob", "account": "a", "partition": "p", "qos": "normal", "name": "n", "comment": "", "start_time": 1, "tres_alloc_str": "cpu=1,gres/gpu=1", "gres_detail": ["gpu(CNT:1)"]}]}"#;

impl SlurmClient for WithForeignJob {
    fn jobs(&mut self) -> Result<JobsRead, CommandError> {
        let mut r = self.0.jobs()?;
        let other = enforcer::parse::squeue_json::parse(FOREIGN).unwrap();
        r.jobs.extend(other.jobs);
        r.row_errors.extend(other.row_errors);
        Ok(r)
    }
    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError> {
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

/// squeue is read with `--all`, so every node's daemon reads every job of the cluster. One
/// running job anywhere whose gres_detail is `gpu(CNT:1)` makes every cycle on every node an
/// incomplete read: here, our drain on gpu001 for a job that has ended is never resumed (a
/// node kept out of service for as long as a job on another node runs).
#[test]
fn a_count_only_gres_job_elsewhere_never_blocks_our_resume() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    let exec = RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(5),
    };
    let mut d = Daemon::new(
        config(&dir.path().join("state"), &["true".to_string()]),
        FakeSlurm(c.clone()),
        IdleGpus { n: 1, calls: 0 },
        exec,
        Box::new(NoProc),
        T0,
    );
    // Control: without the foreign job, the idle job is drained, cancelled, and the node resumed.
    let mut t = T0;
    while calls(&c, "resume") == 0 {
        d.cycle(t);
        t += 60;
        assert!(t < T0 + 300 * 60, "control never resumed: {:?}", c.borrow().calls);
    }
    // The same with job 9001 (gpu099, count-only GRES) in the queue.
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    let exec = RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(5),
    };
    let mut d = Daemon::new(
        config(&dir.path().join("state"), &["true".to_string()]),
        WithForeignJob(FakeSlurm(c.clone())),
        IdleGpus { n: 1, calls: 0 },
        exec,
        Box::new(NoProc),
        T0,
    );
    // Our drain for 102 stands (made by an earlier run, before job 9001 started); 102 ends.
    {
        let mut cl = c.borrow_mut();
        cl.node_state = "IDLE+DRAIN".into();
        cl.node_reason = Some("gpu-reaper: idle job 102".into());
        cl.jobs.clear();
    }
    for i in 0..30 {
        d.cycle(T0 + i * 60);
    }
    assert_eq!(
        calls(&c, "resume"),
        1,
        "our drain of an ended job never resumed: {:?}",
        c.borrow().calls
    );
}

// ---- 7. The state_dir lock is bypassed once the lock file is removed or the dir moved ---------

/// `lock_state_dir` flocks `state_dir/lock` but never checks, then or later, that the file it
/// holds is still the one at that path. Removing the lock file (an operator clearing the
/// state_dir's files to start afresh, a tmpfiles cleanup) or moving the state_dir aside and
/// recreating it (as the refusal messages suggest for a stale state) while the first enforcer
/// runs lets a second enforcer lock a new file and run on the same state_dir, which the first
/// keeps writing by path (it recreates the directory at every save): two enforcers on one
/// state_dir, the situation the lock exists to prevent.
#[test]
fn the_state_dir_lock_holds_while_its_holder_runs() {
    // The lock file removed: the holder sees its lock is no longer the one at the path (the
    // daemon then stops), and a second enforcer may take the state_dir.
    let dir = tempfile::tempdir().unwrap();
    let first = enforcer::state::lock_state_dir(dir.path()).unwrap();
    assert!(first.is_current());
    assert!(enforcer::state::lock_state_dir(dir.path()).is_err(), "held while current");
    std::fs::remove_file(dir.path().join(enforcer::state::LOCK_FILE)).unwrap();
    assert!(!first.is_current(), "the holder must notice its lock file is gone");

    // The state_dir moved aside and recreated.
    let top = tempfile::tempdir().unwrap();
    let sd = top.path().join("state");
    std::fs::create_dir(&sd).unwrap();
    let first = enforcer::state::lock_state_dir(&sd).unwrap();
    std::fs::rename(&sd, top.path().join("state.old")).unwrap();
    std::fs::create_dir(&sd).unwrap();
    assert!(!first.is_current(), "the holder must notice its state_dir moved");
}

// ---- 8. Notice failures of an earlier breach still lengthen this breach's retry delay ---------

/// GPUs idle, or busy at 95 % while `busy` is set.
struct Toggle {
    busy: Rc<std::cell::Cell<bool>>,
    calls: u32,
}

impl Telemetry for Toggle {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.calls += 1;
        let jitter = f64::from(self.calls % 3);
        let busy = self.busy.get();
        TelemetryRead {
            gpus: vec![GpuReading {
                index: Some(0),
                uuid: Some("GPU-0".into()),
                util_pct: Some(if busy { 95.0 } else { 0.0 }),
                mem_used_mib: Some(if busy { 40000.0 } else { 3.0 }),
                mem_total_mib: Some(81920.0),
                power_w: Some(if busy { 300.0 } else { 60.0 } + jitter),
                power_limit_w: Some(400.0),
                ..Default::default()
            }],
            apps: Some(Default::default()),
            ..Default::default()
        }
    }
}

/// A notify command that always fails. Breach 1 runs long enough for several failed notices
/// (retried after 1, 2, 4, 8 ... min); the job then works for an hour (the breach ends), and
/// goes idle again (breach 2). ActionState documents that "a failure made before the current
/// breach began counts for nothing", and the plan does not wait on it for breach 2's first
/// attempt; but `notice_failed` adds to the old count, so after breach 2's first failure the
/// next try waits 2^k intervals (here the 30 min cap) instead of one interval.
#[test]
fn an_earlier_breachs_failed_notices_do_not_lengthen_this_breachs_retries() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let notify = vec![common::script(dir.path(), "notify", "exit 1")];
    let c = cluster(vec![job("102", 102, 1, &[NODE])]);
    let busy = Rc::new(std::cell::Cell::new(false));
    let exec = RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: notify.clone(),
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(5),
    };
    let mut d = Daemon::new(
        config(&state, &notify),
        FakeSlurm(c.clone()),
        Toggle {
            busy: busy.clone(),
            calls: 0,
        },
        exec,
        Box::new(NoProc),
        T0,
    );
    let mut t = T0;
    for _ in 0..70 {
        d.cycle(t);
        t += 60;
    }
    let breach1_end = t;
    busy.set(true);
    for _ in 0..60 {
        d.cycle(t);
        t += 60;
    }
    busy.set(false);
    for _ in 0..90 {
        d.cycle(t);
        t += 60;
    }
    let tries: Vec<i64> = std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["record"] == "action" && l["action"] == "notice")
        .map(|l| l["t_s"].as_i64().unwrap())
        .collect();
    let (b1, b2): (Vec<i64>, Vec<i64>) = tries.iter().partition(|t| **t < breach1_end);
    assert!(b1.len() >= 4, "breach 1 tries: {b1:?}");
    assert!(b2.len() >= 2, "breach 2 tries: {b2:?} (all: {tries:?})");
    assert_eq!(
        b2[1] - b2[0],
        60,
        "breach 2's second try waits on breach 1's failures: breach 1 {b1:?}, breach 2 {b2:?}"
    );
}
