//! The fifteenth adversarial review, enforcer side. Each ignored test fails on the enforcer as
//! reviewed and shows one finding.
//!
//! * `a_state_file_of_another_node_that_saw_a_multi_node_job_here_is_moved_aside`: the check
//!   that a state file was written for this node (`Daemon::new`, trial 7) only asks whether the
//!   file's `NodeTable` holds this node's name. Every daemon interns the other nodes of the
//!   multi-node jobs it judges, and never forgets a name, so the state file of any node that
//!   once ran a multi-node job with this one passes the check: its alerts, notices, budgets,
//!   drains, overrides, `most_gpus_seen` and `slurm_gpus` are taken for this node's.
//! * `a_newline_in_a_job_name_forges_no_squeue_row`: with `job_source = "format"` each line of
//!   squeue's output is a row, and `Name` is the last field. A job name holding a newline
//!   ends its own row and starts another one, which is read as a job like any other: any user
//!   can put a RUNNING job of their making on any node. On an idle node the forged job is the
//!   only GPU job, placed on every GPU by node, judged idle, the node drained for it and then
//!   `scancel` run on the id it names, here the base id of another user's job array (which
//!   cancels every task of it; a het leader's id would cancel the whole het job).
//! * `a_job_its_user_stopped_is_not_judged_hung`: squeue JSON's `["RUNNING", "STOPPED"]` (a
//!   job sent SIGSTOP with `scancel --signal=STOP`: Slurm's `JOB_STOPPED` flag, "holding
//!   resources, but sent SIGSTOP") is judged like any running job: memory held, no compute,
//!   process resident, so `hung`, drained and cancelled, where a SUSPENDED job in the same
//!   condition is never judged, and the `--Format` source (which prints `STOPPED` alone) leaves
//!   the same job unjudged.
//! * `a_cgroup_a_user_named_slurm_is_no_slurm_job`: `cgroup::parse` reads a `job_<id>`
//!   component below *any* component starting with `slurm`. Under systemd a user owns the
//!   cgroup subtree of their `user@UID.service` (`Delegate=yes`), so a process they start
//!   outside Slurm (an ssh login on a node that does not adopt it into a job) can sit in
//!   `.../user@1000.service/app.slice/slurm-x.scope/job_555/` and be read as job 555's: its
//!   GPU counts as that job's, which places a job whose own processes cannot be seen (another
//!   PID namespace) on a GPU of the user's choosing.
//! * `a_notify_command_that_leaves_a_background_child_has_delivered`: `run::run` waits 500 ms
//!   for the output pipes after the program exits, and a grandchild that still holds them
//!   makes the run a `timeout`. A notify command that hands the mail to a background child (a
//!   mailer that forks its delivery, `cmd &` in a wrapper script) exits 0 having delivered,
//!   yet the notice is recorded as failed: it is sent again and again (1, 2, 4 ... 30 minutes
//!   apart, each one delivered) and no cancel ever follows.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, FakeSlurm, NoProc, OneIdleGpu, NODE, POLICY, T0};
use enforcer::daemon::Daemon;
use enforcer::parse::scontrol_node::NodeState;
use enforcer::parse::JobsRead;
use enforcer::slurm::{CancelOutcome, CommandError, SlurmClient};

/// Input: node gpu002's daemon runs 40 one-minute cycles with job 900, which runs on gpu002 and
/// on this node (gpu001), one GPU on each; it is idle, so gpu002 alerts on it (a multi-node
/// job stops at alert). Then the state_dir is used by this node's daemon (copied by mistake,
/// or one `state_dir` on shared storage for every node: the trial-7 case the check was made
/// for).
///
/// What happens: gpu002's file names gpu001 (interned for job 900's other node), so it is
/// restored as this node's: job 900 counts as alerted here, and gpu002's most GPUs seen and
/// budgets are this node's now (with a larger node, the GPU floor stops every resume of our
/// drains and every placement by elimination here for good).
///
/// What should happen: a state file is this node's only when it was written by this node's
/// daemon (say, a `node` field saved with it); gpu002's is moved aside like the one of
/// `restarts_and_suspends.rs`'s `a_state_file_written_for_another_node_is_moved_aside`.
#[test]
fn a_state_file_of_another_node_that_saw_a_multi_node_job_here_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let c = cluster(vec![job("900", 900, 2, &["gpu002", NODE])]);
    {
        let mut other = config_with(POLICY, &state, "enforce", "");
        other.node = "gpu002".into();
        let mut d = Daemon::new(
            other,
            FakeSlurm(c.clone()),
            OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            real_executor(&c),
            Box::new(NoProc),
            T0,
        );
        for i in 0..40 {
            d.cycle(T0 + i * 60);
        }
        assert!(
            d.actions.alerted.contains_key("900"),
            "control: gpu002 alerted on job 900: {:?}",
            d.actions
        );
    }
    let d = Daemon::new(
        config_with(POLICY, &state, "enforce", ""),
        FakeSlurm(c.clone()),
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
        real_executor(&c),
        Box::new(NoProc),
        T0 + 40 * 60,
    );
    let aside = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("state.json.corrupt-"));
    assert!(
        d.actions.alerted.is_empty() && d.most_gpus_seen == 0 && aside,
        "gpu002's state was restored as gpu001's: alerted {:?}, most_gpus_seen {}, moved aside: {aside}",
        d.actions.alerted,
        d.most_gpus_seen
    );
}

/// squeue with `job_source = "format"`: the enforcer's own `--Format` output, read by
/// `squeue_format::parse_own` as `SlurmCli` reads it (StartTime in UTC here); every other call
/// goes to the fake cluster.
struct FormatSqueue {
    text: String,
    inner: FakeSlurm,
}

impl SlurmClient for FormatSqueue {
    fn jobs(&mut self) -> Result<JobsRead, CommandError> {
        enforcer::parse::squeue_format::parse_own(&self.text, &chrono::Utc)
            .map(|(read, _)| read)
            .map_err(|p| CommandError {
                command: "squeue".into(),
                kind: "no_header".into(),
                problem: p,
            })
    }
    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError> {
        self.inner.node_state(node)
    }
    fn drain(&mut self, node: &str, reason: &str) -> Result<(), CommandError> {
        self.inner.drain(node, reason)
    }
    fn resume(&mut self, node: &str) -> Result<(), CommandError> {
        self.inner.resume(node)
    }
    fn set_admin_comment(&mut self, job_id: &str, text: &str) -> Result<(), CommandError> {
        self.inner.set_admin_comment(job_id, text)
    }
    fn cancel(&mut self, job_id: &str) -> Result<CancelOutcome, CommandError> {
        self.inner.cancel(job_id)
    }
}

/// Input: `job_source = "format"`. Node gpu001 is idle: no job on it, its one GPU at 0 %.
/// squeue lists bob's array 555 (task 555_1 running on gpu002, tasks 2-9 pending) and
/// mallory's job 4242 on gpu002, named
/// `x` + newline + `555|555|0|N/A|RUNNING|mallory|ml|gpu|normal|<2h ago>|gpu001|cpu=1,gres/gpu=1|y`
/// (`sbatch -J "$(printf 'x\n555|555|...')"`; Slurm keeps a job's name as given, and
/// squeue prints it as is).
///
/// What happens: the second line of 4242's row is read as job 555, RUNNING on gpu001 with one
/// GPU, since 2 hours: the only GPU job on the node, so it gets the node's GPU, is judged idle,
/// mallory is "notified", gpu001 is drained for "job 555", and 60 minutes in `scancel 555`
/// runs: every task of bob's array.
///
/// What should happen: a name that cannot be read whole is no row to act on. A line that does
/// not start a row the enforcer can tell from a name's continuation (say, a record separator
/// of its own, or a control character anywhere in the output) makes the read incomplete, and a
/// job seen only through `--Format` output is never cancelled by an id another row does not
/// back.
#[test]
fn a_newline_in_a_job_name_forges_no_squeue_row() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(Vec::new());
    let start = chrono::DateTime::from_timestamp(T0 - 7200, 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string();
    let header = enforcer::parse::squeue_format::own_header();
    let text = format!(
        "{header}\n\
         555|555_1|0|N/A|RUNNING|bob|ml|gpu|normal|{start}|gpu002|cpu=8,gres/gpu=1|sweep\n\
         556|555_[2-9]|0|N/A|PENDING|bob|ml|gpu|normal|N/A||cpu=8,gres/gpu=1|sweep\n\
         4242|4242|0|N/A|RUNNING|mallory|ml|gpu|normal|{start}|gpu002|cpu=1|x\n\
         555|555|0|N/A|RUNNING|mallory|ml|gpu|normal|{start}|{NODE}|cpu=1,gres/gpu=1|y\n"
    );
    let mut d = Daemon::new(
        config_with(
            POLICY,
            &dir.path().join("state"),
            "enforce",
            "job_source = \"format\"\n[policy.exempt]\ncomment_marker = \"\"\n",
        ),
        FormatSqueue {
            text,
            inner: FakeSlurm(c.clone()),
        },
        OneIdleGpu {
            cycle: 0,
            power_known: true,
        },
        real_executor(&c),
        Box::new(NoProc),
        T0,
    );
    for i in 0..120 {
        d.cycle(T0 + i * 60);
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "a row forged by a job name was acted on: {calls:?}"
    );
}

/// One GPU holding 30 GiB with no compute and its process resident (stopped): what a job sent
/// SIGSTOP shows. Power jitters around 61 W so no window looks frozen.
struct StoppedGpu {
    cycle: u32,
}

impl enforcer::telemetry::Telemetry for StoppedGpu {
    fn read(&mut self, _now_s: i64) -> enforcer::telemetry::TelemetryRead {
        self.cycle += 1;
        enforcer::telemetry::TelemetryRead {
            gpus: vec![enforcer::parse::smi::GpuReading {
                index: Some(0),
                uuid: Some("GPU-0".into()),
                util_pct: Some(0.0),
                mem_used_mib: Some(30_000.0),
                mem_total_mib: Some(81_920.0),
                power_w: Some(60.0 + f64::from(self.cycle % 3)),
                power_limit_w: Some(400.0),
                minor: Some(0),
                ..Default::default()
            }],
            apps: Some(enforcer::parse::smi::AppsTable {
                columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
                apps: vec![enforcer::parse::smi::ComputeApp {
                    gpu_uuid: Some("GPU-0".into()),
                    pid: Some(4242),
                    used_memory_mib: Some(29_500.0),
                    process_name: None,
                }],
                row_errors: Vec::new(),
            }),
            ..Default::default()
        }
    }
}

/// Input: alice's job 700, the node's only GPU job, 1 GPU, has been running for 2 hours; at T0
/// she pauses it with `scancel --signal=STOP 700` (to free the CPUs for an interactive session,
/// say). squeue --json shows `"job_state": ["RUNNING", "STOPPED"]` from then on; its process
/// stays on the GPU with its 30 GiB, at 0 %.
///
/// What happens: the job is judged as running, looks `hung` (ceiling cancel), and is drained
/// and then cancelled, its 2 hours of work lost. A SUSPENDED job in the same condition is never
/// judged (`SlurmJob::may_hold`, "a suspended job keeps its GPUs and their memory"), and under
/// `job_source = "format"` squeue prints `STOPPED` alone and the state is unknown, so the same
/// job is not judged there either.
///
/// What should happen: a job Slurm shows as stopped is, like a suspended one, not judged (or is
/// held at alert) until it is running again.
#[test]
fn a_job_its_user_stopped_is_not_judged_hung() {
    let dir = tempfile::tempdir().unwrap();
    let j = enforcer::parse::squeue_json::parse(&format!(
        r#"{{"jobs": [{{"job_id": 700, "job_state": ["RUNNING", "STOPPED"], "nodes": "{NODE}", "user_name": "alice", "account": "ml", "partition": "gpu", "qos": "normal", "name": "train", "comment": "", "start_time": {}, "tres_alloc_str": "cpu=8,gres/gpu=1"}}]}}"#,
        T0 - 7200
    ))
    .unwrap();
    assert!(j.row_errors.is_empty(), "{j:?}");
    let c = cluster(j.jobs);
    let mut d = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        StoppedGpu { cycle: 0 },
        real_executor(&c),
        Box::new(NoProc),
        T0,
    );
    let worst = common::cluster::worst_verdicts(&mut d, 0, 120);
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "a job its user stopped was acted on (worst verdict {worst:?}): {calls:?}"
    );
}

/// Input: `/proc/PID/cgroup` of a process a user started outside Slurm and moved into a cgroup
/// of their own delegated subtree, named to look like Slurm's.
///
/// What happens: it is read as a process of job 555.
///
/// What should happen: only Slurm's own layouts count (cgroup v1 `/slurm/uid_U/job_N/...`, v2
/// `/system.slice/slurmstepd.scope/job_N/...` or the SLUID form, as the samples show), never a
/// `slurm*` component anywhere in a user's tree.
#[test]
fn a_cgroup_a_user_named_slurm_is_no_slurm_job() {
    let text = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/slurm-x.scope/job_555/leaf\n";
    let got = enforcer::parse::cgroup::parse(text);
    assert_eq!(got, Ok(None), "a user's own cgroup was read as a Slurm job's");
}

/// Input: the notify command is a wrapper script that starts the mailer in the background and
/// exits 0 at once (`mailer "$@" &`; here the mailer is `sleep 3`, which inherits stdout and
/// stderr as any forked child does).
///
/// What happens: the notice's outcome is `failed` ("notify command ...: timeout"): the
/// planner retries it (each retry delivered again) and never counts a notice, so no cancel
/// follows.
///
/// What should happen: the notify command's exit status is its answer; output that a leftover
/// child keeps open is cut off, not taken for a failure (or the command's stdout and stderr
/// are not held open for its children: only its exit status is used).
#[test]
fn a_notify_command_that_leaves_a_background_child_has_delivered() {
    use enforcer::executor::{Executor, Outcome};
    let dir = tempfile::tempdir().unwrap();
    let notify = common::script(dir.path(), "notify", "sleep 3 &\nexit 0");
    let c = cluster(Vec::new());
    let mut ex = real_executor(&c);
    ex.notify_command = vec![notify];
    ex.timeout = std::time::Duration::from_secs(10);
    let out = ex.execute(&enforcer::plan::Action::Notice {
        job_id: "802".into(),
        user: "alice".into(),
        reason: "job 802: alert idle on 1/1 GPUs for 20m".into(),
    });
    assert_eq!(out, Outcome::Done, "the notify command exited 0");
}
