//! The Slurm client against a real Slurm: the loopback cluster `.ci/slurm/up` starts (cluster
//! `reaper`, node `node1` with `Gres=gpu:4`, partition `gpu`, no slurmdbd).
//!
//! The test drains and resumes `node1` and cancels the jobs it submits, so it runs only on a
//! cluster named `reaper`, and is otherwise skipped with the reason printed. With
//! `GPU_REAPER_REQUIRE_SLURM=1` a missing cluster is a failure instead.

use enforcer::parse::scontrol_node;
use enforcer::parse::SlurmJob;
use enforcer::slurm::{CancelOutcome, JobSource, SlurmCli, SlurmClient};
use std::process::Command;
use std::time::{Duration, Instant};

const CLUSTER: &str = "reaper";
const NODE: &str = "node1";

/// Why the loopback cluster cannot be used, or `None` when it answers.
fn unavailable() -> Option<String> {
    let out = match Command::new("scontrol").args(["show", "config"]).output() {
        Ok(o) => o,
        Err(e) => return Some(format!("scontrol cannot run: {e}")),
    };
    if !out.status.success() {
        return Some(format!(
            "scontrol show config failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let name = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("ClusterName")
            .map(|r| r.trim().trim_start_matches('=').trim().to_string())
    });
    match name {
        Some(n) if n == CLUSTER => None,
        other => Some(format!(
            "the cluster is {other:?}, not the loopback cluster {CLUSTER:?} of .ci/slurm/up; a real cluster is never touched"
        )),
    }
}

/// True when the test should run; prints why it is skipped otherwise.
fn slurm_here() -> bool {
    let Some(why) = unavailable() else { return true };
    if std::env::var("GPU_REAPER_REQUIRE_SLURM").as_deref() == Ok("1") {
        panic!("GPU_REAPER_REQUIRE_SLURM=1 but {why} (start it with .ci/slurm/up)");
    }
    eprintln!("skipped: {why} (run .ci/slurm/up, or set GPU_REAPER_REQUIRE_SLURM=1 to make this a failure)");
    false
}

fn cli(source: JobSource) -> SlurmCli {
    SlurmCli {
        squeue: "squeue".into(),
        scontrol: "scontrol".into(),
        scancel: "scancel".into(),
        source,
        timeout: Duration::from_secs(20),
    }
}

fn sbatch(args: &[&str]) -> String {
    let out = Command::new("sbatch")
        .args(["--parsable", "--output=/dev/null", "--job-name=gpu-reaper-test"])
        .args(args)
        .args(["--wrap", "sleep 600"])
        .output()
        .expect("sbatch runs");
    assert!(out.status.success(), "sbatch {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Polls the JSON read until `want` holds for the job with exact id `id`, or 60 s pass.
fn wait_for(id: &str, want: impl Fn(Option<&SlurmJob>) -> bool) -> Option<SlurmJob> {
    let start = Instant::now();
    loop {
        let read = cli(JobSource::Json).jobs().expect("squeue --json reads");
        let job = read.jobs.iter().find(|j| j.job_id == id);
        if want(job) {
            return job.cloned();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "job {id}: still {job:?} after 60 s");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Resumes the node and cancels the test's jobs, also when an assertion fails.
struct CleanUp;
impl Drop for CleanUp {
    fn drop(&mut self) {
        let _ = Command::new("scancel").args(["--name=gpu-reaper-test"]).status();
        let _ = Command::new("scontrol")
            .args(["update", &format!("NodeName={NODE}"), "State=RESUME"])
            .status();
    }
}

#[test]
fn reads_drains_resumes_comments_and_cancels_on_a_real_slurm() {
    if !slurm_here() {
        return;
    }
    // One run at a time on this cluster, whatever process runs it (the clean-up below cancels
    // every job of the test's name).
    let lock = std::fs::File::create(std::env::temp_dir().join("gpu-reaper-real-slurm.lock")).unwrap();
    lock.lock().unwrap();
    let _clean = CleanUp;
    let mut slurm = cli(JobSource::Json);

    // A 2-GPU job, read back by both sources.
    let id = sbatch(&["--gres=gpu:2"]);
    let job = wait_for(&id, |j| j.is_some_and(|j| j.state == "RUNNING")).unwrap();
    assert_eq!(job.nodes, [NODE]);
    assert!(job.is_judgeable(), "{job:?}");
    // No slurmdbd, so no gres/gpu in the TRES: the count comes from gres_detail.
    assert_eq!(job.gpus, 2, "{job:?}");
    let by_format = cli(JobSource::Format).jobs().expect("squeue --Format reads");
    let row = by_format
        .jobs
        .iter()
        .find(|j| j.job_id == id)
        .expect("the --Format read lists the job");
    assert_eq!((row.state.as_str(), row.nodes.as_slice()), ("RUNNING", &[NODE.to_string()][..]));
    assert!(by_format.row_errors.is_empty(), "{:?}", by_format.row_errors);

    // Drain with our reason, read it back as ours, resume.
    let node = slurm.node_state(NODE).unwrap();
    assert!(!node.is_special(), "{node:?}");
    let reason = scontrol_node::reason("idle", &id);
    slurm.drain(NODE, &reason).unwrap();
    let drained = slurm.node_state(NODE).unwrap();
    assert!(drained.state.iter().any(|s| s == "DRAIN"), "{drained:?}");
    let read_back = drained
        .reason
        .as_deref()
        .map(scontrol_node::strip_author)
        .and_then(scontrol_node::parse_reason);
    assert_eq!(read_back, Some(("idle".to_string(), id.clone())), "{drained:?}");
    slurm.resume(NODE).unwrap();
    let resumed = slurm.node_state(NODE).unwrap();
    assert!(!resumed.state.iter().any(|s| s == "DRAIN"), "{resumed:?}");

    // AdminComment, then the cancel, then a second cancel of the gone job.
    slurm.set_admin_comment(&id, "gpu-reaper test: idle").unwrap();
    let shown = Command::new("scontrol").args(["show", "job", &id]).output().unwrap();
    assert!(String::from_utf8_lossy(&shown.stdout).contains("AdminComment=gpu-reaper test: idle"));
    assert_eq!(slurm.cancel(&id).unwrap(), CancelOutcome::Cancelled);
    wait_for(&id, |j| j.is_none_or(|j| j.state != "RUNNING"));
    assert_eq!(slurm.cancel(&id).unwrap(), CancelOutcome::AlreadyGone);

    // An array: each task has its exact id `N_M`, and cancelling one leaves the other.
    let base = sbatch(&["--gres=gpu:1", "--array=0-1"]);
    let (t0, t1) = (format!("{base}_0"), format!("{base}_1"));
    for t in [&t0, &t1] {
        let j = wait_for(t, |j| j.is_some_and(|j| j.state == "RUNNING")).unwrap();
        assert_eq!((j.gpus, j.raw_id.is_some()), (1, true), "{j:?}");
    }
    assert_eq!(slurm.cancel(&t1).unwrap(), CancelOutcome::Cancelled);
    wait_for(&t1, |j| j.is_none_or(|j| j.state != "RUNNING"));
    let still = wait_for(&t0, |j| j.is_some()).unwrap();
    assert_eq!(still.state, "RUNNING", "cancelling {t1} must leave {t0} running");
}
