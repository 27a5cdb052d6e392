//! Attribution never guesses from an incomplete GPU list, and a cut-off squeue answer is never
//! a complete queue. Each case is a bug found by an adversarial review (a busy job placed on a
//! free idle GPU, then drained and cancelled; an overflow; a 64 MiB cut read as the queue).

mod common;

use enforcer::attribution::{self, Attributed, KeptMap, ProcReader};
use enforcer::config::Config;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::scontrol_node::{self, NodeState};
use enforcer::parse::smi::{AppsTable, GpuReading};
use enforcer::parse::{JobsRead, SlurmJob};
use enforcer::slurm::{CancelOutcome, CommandError, SlurmClient};
use policy::Verdict;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

const NODE: &str = "gpu001";
const T0: i64 = 1_900_000_000;

// ---------------------------------------------------------------------------------------
// A small fake cluster (same shape as e2e_inprocess.rs).

#[derive(Default)]
struct Cluster {
    jobs: Vec<SlurmJob>,
    node_state: String,
    node_reason: Option<String>,
    calls: Vec<String>,
}

#[derive(Clone)]
struct FakeSlurm(Rc<RefCell<Cluster>>);

impl SlurmClient for FakeSlurm {
    fn jobs(&mut self) -> Result<JobsRead, CommandError> {
        Ok(JobsRead {
            jobs: self.0.borrow().jobs.clone(),
            row_errors: vec![],
        })
    }
    fn node_state(&mut self, node: &str) -> Result<NodeState, CommandError> {
        let c = self.0.borrow();
        let mut t = format!("NodeName={node} State={}\n", c.node_state);
        if let Some(r) = &c.node_reason {
            t.push_str(&format!("   Reason={r} [root@2026-01-01T00:00:00]\n"));
        }
        Ok(scontrol_node::parse(&t).unwrap())
    }
    fn drain(&mut self, node: &str, reason: &str) -> Result<(), CommandError> {
        let mut c = self.0.borrow_mut();
        c.calls.push(format!("drain {node} {reason}"));
        c.node_state = "MIXED+DRAIN".into();
        c.node_reason = Some(reason.into());
        Ok(())
    }
    fn resume(&mut self, node: &str) -> Result<(), CommandError> {
        let mut c = self.0.borrow_mut();
        c.calls.push(format!("resume {node}"));
        c.node_state = "MIXED".into();
        c.node_reason = None;
        Ok(())
    }
    fn set_admin_comment(&mut self, job_id: &str, _text: &str) -> Result<(), CommandError> {
        self.0.borrow_mut().calls.push(format!("admincomment {job_id}"));
        Ok(())
    }
    fn cancel(&mut self, job_id: &str) -> Result<CancelOutcome, CommandError> {
        let mut c = self.0.borrow_mut();
        c.calls.push(format!("scancel {job_id}"));
        c.jobs.retain(|j| j.job_id != job_id);
        Ok(CancelOutcome::Cancelled)
    }
}

struct Procs(BTreeMap<u32, String>);
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        self.0.get(&pid).cloned()
    }
}

fn job(id: &str, raw: u64, gpus: u32, nodes: &[&str]) -> SlurmJob {
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

const POLICY: &str = r#"
[policy]
window = "20m"
warmup = "15m"
interval = "60s"
notice = "30m"
stages = [{ after = "0s", verdict = "alert" }, { after = "30m", verdict = "drain" }, { after = "60m", verdict = "cancel" }]
ceilings = { idle = "cancel" }
"#;

fn config(dir: &std::path::Path, mode: &str) -> Config {
    let text = format!(
        "{POLICY}\n[enforcer]\nmode = \"{mode}\"\nnode = \"{NODE}\"\nstate_dir = \"{}\"\nmetrics_listen = \"\"\nnotify_command = [\"true\"]\n",
        dir.display()
    );
    Config::from_text(&text, "test.toml").unwrap()
}

fn cluster(jobs: Vec<SlurmJob>) -> Rc<RefCell<Cluster>> {
    Rc::new(RefCell::new(Cluster {
        jobs,
        node_state: "MIXED".into(),
        ..Default::default()
    }))
}

fn real_exec(c: &Rc<RefCell<Cluster>>) -> RealExecutor<FakeSlurm> {
    RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        timeout: std::time::Duration::from_secs(1),
    }
}

// ---------------------------------------------------------------------------------------
// Finding 1: an incomplete GPU list (a row nvidia-smi printed but that could not be read) is
// treated as the whole node by the "only job holds every visible GPU" rule, so a busy job
// whose own GPU row is unreadable is placed on a free, idle GPU and drained and cancelled.

/// A fake `nvidia-smi` for a 2-GPU node: GPU 0 (GPU-0) is free and idle; GPU 1 (GPU-1) runs
/// job 1000 at 97 %, but its row cannot be read: `variant` "index" prints its index as
/// `[Unknown Error]`; "cut" cuts the row short (the e2e suite's own "truncated" case). The
/// compute-apps query lists job 1000's process (PID 4242) on GPU-1. Power jitters by a
/// counter so no window looks frozen.
fn smi_script(dir: &std::path::Path, variant: &str) -> String {
    let gpu1 = match variant {
        "index" => "[Unknown Error], GPU-1, 97, 40000, 81920, 310.5, 400.00",
        _ => "1, GPU-1, 97",
    };
    common::script(
        dir,
        "nvidia-smi",
        &format!(
            r#"D="{d}"
case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; echo 'GPU-1, 4242, 40000'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'
echo "0, GPU-0, 0, 3, 81920, 6$((n % 3)).25, 400.00"
echo '{gpu1}'"#,
            d = dir.display()
        ),
    )
}

#[test]
fn busy_job_is_never_judged_on_a_free_gpu_when_its_own_gpu_row_is_unreadable() {
    for variant in ["index", "cut"] {
        let dir = tempfile::tempdir().unwrap();
        let smi = smi_script(dir.path(), variant);
        let telemetry = enforcer::telemetry::NvidiaSmi {
            program: smi,
            timeout: std::time::Duration::from_secs(5),
            kill: enforcer::run::KillMode::Ignore,
        };
        // Job 1000 holds 1 of the node's 2 GPUs (GPU 1, where its process runs).
        let c = cluster(vec![job("1000", 1000, 1, &[NODE])]);
        let procs = Procs([(4242, "0::/system.slice/slurmstepd.scope/job_1000/step_0/user/task_0\n".to_string())].into());
        let state = dir.path().join("state");
        let mut d = Daemon::new(
            config(&state, "enforce"),
            FakeSlurm(c.clone()),
            telemetry,
            real_exec(&c),
            Box::new(procs),
            T0,
        );
        let mut worst = Verdict::Healthy;
        for i in 0..100 {
            let r = d.cycle(T0 + i * 60);
            for f in r.findings {
                worst = worst.max(f.verdict);
            }
        }
        let calls = c.borrow().calls.clone();
        assert_eq!(
            d.kept.get("1000").map(|k| k.gpus.clone()),
            None,
            "{variant}: job 1000 runs on GPU 1 (its process is there) but was placed on GPU 0; calls {calls:?}"
        );
        assert!(
            !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
            "{variant}: a job busy at 97 % was drained/cancelled on an idle GPU it does not hold: {calls:?} (worst verdict {worst:?})"
        );
    }
}

/// The same node, but GPU 1's row is unreadable in one cycle only (the 6th nvidia-smi call
/// prints it cut short), and job 1000's process is not listed at all (samples A9, "GPU is busy
/// although no process is listed": a container's PID namespace). Before that cycle the job
/// cannot be placed (1 of 2 GPUs, no process): it is rightly ambiguous. In that one cycle the
/// node-exclusive rule places it on GPU 0, and the kept attribution then holds it there for
/// the rest of the run, although GPU 1's row is readable again and busy.
#[test]
fn one_unreadable_row_never_pins_a_busy_job_to_a_free_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let smi = common::script(
        dir.path(),
        "nvidia-smi",
        &format!(
            r#"D="{d}"
case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'
echo "0, GPU-0, 0, 3, 81920, 6$((n % 3)).25, 400.00"
if [ "$n" = 5 ]; then echo '1, GPU-1, 97'; else echo "1, GPU-1, 97, 40000, 81920, 31$((n % 3)).5, 400.00"; fi"#,
            d = dir.path().display()
        ),
    );
    let telemetry = enforcer::telemetry::NvidiaSmi {
        program: smi,
        timeout: std::time::Duration::from_secs(5),
        kill: enforcer::run::KillMode::Ignore,
    };
    let c = cluster(vec![job("1000", 1000, 1, &[NODE])]);
    let state = dir.path().join("state");
    let mut d = Daemon::new(
        config(&state, "enforce"),
        FakeSlurm(c.clone()),
        telemetry,
        real_exec(&c),
        Box::new(Procs(BTreeMap::new())),
        T0,
    );
    let mut placed = Vec::new();
    for i in 0..120 {
        d.cycle(T0 + i * 60);
        if let Some(k) = d.kept.get("1000") {
            placed.push((i, k.gpus.clone()));
        }
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "job 1000 is busy at 97 % on GPU 1 all along; calls {calls:?}; kept placements {:?}",
        &placed[..placed.len().min(3)]
    );
    assert!(
        placed.iter().all(|(_, g)| g != &vec![0u16]),
        "placed on the free GPU 0: {:?}",
        &placed[..placed.len().min(3)]
    );
}

/// The same, but in that one cycle GPU 1 is missing from the list altogether, with no row
/// error (a GPU fallen off the bus that nvidia-smi leaves out): fewer GPUs than the node has
/// shown is an incomplete list too.
#[test]
fn a_gpu_missing_from_the_list_never_lets_a_busy_job_be_placed_on_a_free_one() {
    let dir = tempfile::tempdir().unwrap();
    let smi = common::script(
        dir.path(),
        "nvidia-smi",
        &format!(
            r#"D="{d}"
case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'
echo "0, GPU-0, 0, 3, 81920, 6$((n % 3)).25, 400.00"
if [ "$n" != 5 ]; then echo "1, GPU-1, 97, 40000, 81920, 31$((n % 3)).5, 400.00"; fi"#,
            d = dir.path().display()
        ),
    );
    let telemetry = enforcer::telemetry::NvidiaSmi {
        program: smi,
        timeout: std::time::Duration::from_secs(5),
        kill: enforcer::run::KillMode::Ignore,
    };
    let c = cluster(vec![job("1000", 1000, 1, &[NODE])]);
    let state = dir.path().join("state");
    let mut d = Daemon::new(
        config(&state, "enforce"),
        FakeSlurm(c.clone()),
        telemetry,
        real_exec(&c),
        Box::new(Procs(BTreeMap::new())),
        T0,
    );
    for i in 0..120 {
        d.cycle(T0 + i * 60);
        assert_eq!(d.kept.get("1000"), None, "cycle {i}: placed on {:?}", d.kept.get("1000"));
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:?}"
    );
}

/// The elimination rule has the same hole: a 3-GPU node, job 2000 busy on GPU 0 (its process
/// listed and resolved), job 3000 busy at 97 % on GPU 2 with no process listed (A9), GPU 1
/// free. GPU 2's row has an unreadable index, so the visible GPUs are 0 and 1; the jobs' counts
/// (1 + 1) equal the visible count, and 3000 is "eliminated" onto the free GPU 1.
#[test]
fn elimination_never_uses_an_incomplete_gpu_list() {
    let dir = tempfile::tempdir().unwrap();
    let smi = common::script(
        dir.path(),
        "nvidia-smi",
        &format!(
            r#"D="{d}"
case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; echo 'GPU-0, 4242, 30000'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'
echo "0, GPU-0, 95, 30000, 81920, 30$((n % 3)).25, 400.00"
echo "1, GPU-1, 0, 3, 81920, 6$((n % 3)).25, 400.00"
echo "[Unknown Error], GPU-2, 97, 40000, 81920, 31$((n % 3)).5, 400.00""#,
            d = dir.path().display()
        ),
    );
    let telemetry = enforcer::telemetry::NvidiaSmi {
        program: smi,
        timeout: std::time::Duration::from_secs(5),
        kill: enforcer::run::KillMode::Ignore,
    };
    let c = cluster(vec![job("2000", 2000, 1, &[NODE]), job("3000", 3000, 1, &[NODE])]);
    let procs = Procs([(4242, "0::/system.slice/slurmstepd.scope/job_2000/step_0/user/task_0\n".to_string())].into());
    let state = dir.path().join("state");
    let mut d = Daemon::new(
        config(&state, "enforce"),
        FakeSlurm(c.clone()),
        telemetry,
        real_exec(&c),
        Box::new(procs),
        T0,
    );
    let mut placed = None;
    for i in 0..100 {
        d.cycle(T0 + i * 60);
        if placed.is_none() {
            placed = d.kept.get("3000").map(|k| k.gpus.clone());
        }
    }
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.contains("3000")),
        "job 3000 is busy on GPU 2 (row unreadable) but was placed on {placed:?}: {calls:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Finding 2: `attribute` sums per-node GPU counts in u32 with `u32::MAX / 4` standing for a
// count that does not divide over the job's nodes: four such jobs plus any job on the node
// overflow (a panic in debug builds and tests, a silent wrap in release).

fn gpus(n: u16) -> Vec<GpuReading> {
    (0..n)
        .map(|i| GpuReading {
            index: Some(i),
            uuid: Some(format!("GPU-{i}")),
            ..Default::default()
        })
        .collect()
}

#[test]
fn attribution_never_panics_with_uneven_multi_node_jobs() {
    // An 8-GPU node: four 2-node jobs of 3 GPUs each (--gpus=3 -N2: 1 here, 2 there, or 2
    // and 1), and one idle single-node 4-GPU job with no process listed.
    let uneven: Vec<SlurmJob> = (0..4).map(|i| job(&format!("{}", 10 + i), 10 + i, 3, &[NODE, "gpu002"])).collect();
    let idle = job("20", 20, 4, &[NODE]);
    let mut jobs: Vec<&SlurmJob> = uneven.iter().collect();
    jobs.push(&idle);
    let apps = AppsTable::default();
    let r =
        std::panic::catch_unwind(|| attribution::attribute(&jobs, &gpus(8), Some(&apps), &Procs(BTreeMap::new()), true, &KeptMap::new()));
    let r = r.expect("attribute panicked (attempt to add with overflow)");
    assert!(matches!(r.jobs["20"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
}

// ---------------------------------------------------------------------------------------
// Finding: the runner keeps at most 64 MiB of a child's stdout and drops the rest without a
// word (run::MAX_OUTPUT_BYTES); the caller gets `Exited { code: 0, .. }` as for a whole
// answer. With `job_source = "format"`, a cut that falls on a line boundary leaves a valid
// header and whole rows: the queue reads as complete, and every job below the cut is gone
// (its drain is resumed, its records forgotten, its windows dropped).

#[test]
fn a_truncated_squeue_answer_is_never_a_complete_queue() {
    let dir = tempfile::tempdir().unwrap();
    // Every line is exactly 128 bytes, so the 64 MiB cut falls on a line boundary: the header
    // and 524,287 pending jobs, then job 4242 running on gpu001.
    let header = enforcer::parse::squeue_format::own_header();
    let squeue = common::script(
        dir.path(),
        "squeue",
        &format!(
            r#"awk 'BEGIN {{
  printf "%-127s\n", "{header}";
  for (i = 1; i < 524288; i++) printf "%-127s\n", (100000 + i) "|" (100000 + i) "|0|N/A|PENDING|bob|ml|gpu|normal|N/A|||filler";
  printf "%-127s\n", "4242|4242|0|N/A|RUNNING|alice|ml|gpu|normal|2030-03-17T10:00:00|gpu001|cpu=8,gres/gpu=1|train";
}}'"#
        ),
    );
    let mut cli = enforcer::slurm::SlurmCli {
        squeue,
        scontrol: "false".into(),
        scancel: "false".into(),
        source: enforcer::slurm::JobSource::Format,
        timeout: std::time::Duration::from_secs(60),
    };
    match cli.jobs() {
        Err(_) => {}
        Ok(read) => {
            let complete = read.row_errors.is_empty();
            let has = read.jobs.iter().any(|j| j.job_id == "4242");
            assert!(
                has || !complete,
                "squeue printed job 4242 RUNNING on gpu001, but the read is complete ({} jobs, no row error) without it: the daemon takes 4242 as gone from gpu001",
                read.jobs.len()
            );
        }
    }
}
