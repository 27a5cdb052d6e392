//! Incomplete or broken telemetry is never evidence: attribution never guesses from an
//! incomplete GPU list, a GPU row with an unreadable value (`ERR!`) is no sample, and a cut-off
//! squeue answer is never a complete queue. Each case is a bug found by an adversarial review (a busy job placed on a
//! free idle GPU, then drained and cancelled; an overflow; a 64 MiB cut read as the queue).

mod common;

use common::cluster::{cluster, config_with, job, Cluster, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::{self, Attributed, KeptMap, ProcReader};
use enforcer::config::Config;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::smi::{AppsTable, GpuReading};
use enforcer::parse::SlurmJob;
use enforcer::slurm::SlurmClient;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

struct Procs(BTreeMap<u32, String>);
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        self.0.get(&pid).cloned()
    }
}

fn config(dir: &std::path::Path, mode: &str) -> Config {
    config_with(POLICY, dir, mode, "")
}

fn real_exec(c: &Rc<RefCell<Cluster>>) -> RealExecutor<FakeSlurm> {
    RealExecutor {
        slurm: FakeSlurm(c.clone()),
        notify_command: vec!["true".into()],
        webhook: None,
        notice_by_webhook: false,
        timeout: std::time::Duration::from_secs(1),
    }
}

type SmiDaemon = Daemon<FakeSlurm, enforcer::telemetry::NvidiaSmi, RealExecutor<FakeSlurm>>;

/// An enforce-mode daemon over `jobs`, reading GPUs from a fake `nvidia-smi` whose shell body
/// is `smi_body` (it may keep a call counter in `$D`, the test's directory), with `procs` as
/// /proc. The directory must outlive the daemon.
fn smi_daemon(dir: &std::path::Path, smi_body: &str, jobs: Vec<SlurmJob>, procs: &[(u32, u64)]) -> (SmiDaemon, Rc<RefCell<Cluster>>) {
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
    let procs = Procs(
        procs
            .iter()
            .map(|&(pid, job)| (pid, format!("0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n")))
            .collect(),
    );
    let d = Daemon::new(
        config(&dir.join("state"), "enforce"),
        FakeSlurm(c.clone()),
        telemetry,
        real_exec(&c),
        Box::new(procs),
        T0,
    );
    (d, c)
}

/// True when any drain or cancel was asked of Slurm.
fn acted(c: &Rc<RefCell<Cluster>>) -> bool {
    c.borrow().calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel"))
}

// ---------------------------------------------------------------------------------------
// Finding 1: an incomplete GPU list (a row nvidia-smi printed but that could not be read) is
// treated as the whole node by the "only job holds every visible GPU" rule, so a busy job
// whose own GPU row is unreadable is placed on a free, idle GPU and drained and cancelled.

/// The header line of the fake nvidia-smi's `--query-gpu` answer.
const SMI_HEADER: &str = "echo 'index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]'";

/// A fake `nvidia-smi` body for a 2-GPU node. GPU 0 (GPU-0) is free and idle; GPU 1 (GPU-1)
/// runs job 1000 at 97 %. `apps` is the compute-apps answer's rows; `gpu1` prints GPU 1's row,
/// with `$n` the call counter (power jitters with it, so no window looks frozen).
fn two_gpu_node(apps: &str, gpu1: &str) -> String {
    format!(
        r#"case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; {apps} exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
{SMI_HEADER}
echo "0, GPU-0, 0, 3, 81920, 6$((n % 3)).25, 400.00"
{gpu1}"#
    )
}

/// GPU 1's row when it reads well.
const GPU1_OK: &str = r#"echo "1, GPU-1, 97, 40000, 81920, 31$((n % 3)).5, 400.00""#;

/// A busy job whose own GPU row cannot be read, every cycle: its index is `[Unknown Error]`,
/// or the row is cut short. Its process (PID 4242, on GPU-1) is listed and resolvable.
#[test]
fn busy_job_is_never_judged_on_a_free_gpu_when_its_own_gpu_row_is_unreadable() {
    for gpu1 in [
        "echo '[Unknown Error], GPU-1, 97, 40000, 81920, 310.5, 400.00'",
        "echo '1, GPU-1, 97'",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let body = two_gpu_node("echo 'GPU-1, 4242, 40000';", gpu1);
        let (mut d, c) = smi_daemon(dir.path(), &body, vec![job("1000", 1000, 1, &[NODE])], &[(4242, 1000)]);
        for i in 0..100 {
            d.cycle(T0 + i * 60);
        }
        assert_eq!(d.kept.get("1000"), None, "{gpu1}: placed on the free GPU 0");
        assert!(
            !acted(&c),
            "{gpu1}: a job busy at 97 % was drained or cancelled: {:?}",
            c.borrow().calls
        );
    }
}

/// GPU 1's row is unreadable in one cycle only (the 6th call cuts it short), or missing from
/// the list altogether with no row error (a GPU fallen off the bus that nvidia-smi leaves
/// out), and job 1000's process is not listed at all (samples A9, "GPU is busy although no
/// process is listed": a container's PID namespace). The job cannot be placed before that
/// cycle (1 of 2 GPUs, no process), and must not be in it: a placement there would be kept
/// for the rest of the run although GPU 1 reads busy again.
#[test]
fn one_incomplete_gpu_list_never_pins_a_busy_job_to_a_free_gpu() {
    for once in ["echo '1, GPU-1, 97'", ":"] {
        let dir = tempfile::tempdir().unwrap();
        let gpu1 = format!("if [ \"$n\" = 5 ]; then {once}; else {GPU1_OK}; fi");
        let (mut d, c) = smi_daemon(dir.path(), &two_gpu_node("", &gpu1), vec![job("1000", 1000, 1, &[NODE])], &[]);
        for i in 0..120 {
            d.cycle(T0 + i * 60);
            assert_eq!(d.kept.get("1000"), None, "{once}: cycle {i}: placed on {:?}", d.kept.get("1000"));
        }
        assert!(!acted(&c), "{once}: {:?}", c.borrow().calls);
    }
}

/// A whole-node idle job (2 GPUs, 0–1 %, 3 MiB), placed in the first cycle, whose power then
/// reads `ERR!` (nvidia-smi's mark for a GPU or driver error) on every row: the rows are no
/// evidence, so the job is never drained or cancelled, nor alerted. The same job with power
/// `[N/A]` (unknown, as on GPUs without power readings) is judged on the rest: alerted as
/// idle, and held there (`power_unknown`, review 14 #8): the test tells the two apart. (Util
/// moves between 0 and 1 %: readings that never change with power unknown could be a frozen
/// collector, and are held at alert too, for another reason.)
#[test]
fn a_gpu_row_with_an_unreadable_value_is_no_evidence() {
    for (power, judged) in [("ERR!", false), ("nan", false), ("[N/A]", true)] {
        let dir = tempfile::tempdir().unwrap();
        let body = format!(
            r#"case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
{SMI_HEADER}
p="6$((n % 3)).5"; if [ "$n" -ge 2 ]; then p="{power}"; fi
u=$((n % 2))
echo "0, GPU-0, $u, 3, 81920, $p, 400.00"
echo "1, GPU-1, $u, 3, 81920, $p, 400.00""#
        );
        let (mut d, c) = smi_daemon(dir.path(), &body, vec![job("1000", 1000, 2, &[NODE])], &[]);
        let (mut worst, mut last, mut reason) = (policy::Verdict::Healthy, None, String::new());
        for i in 0..100 {
            for f in d.cycle(T0 + i * 60).findings {
                worst = worst.max(f.verdict);
                last = Some(f.verdict);
                reason = f.reason;
            }
        }
        assert!(!acted(&c), "power {power}: worst {worst:?}, calls {:?}", c.borrow().calls);
        if judged {
            assert_eq!(worst, policy::Verdict::Alert, "power {power}");
            assert!(reason.contains("held by power_unknown"), "power {power}: {reason}");
        } else {
            assert!(worst <= policy::Verdict::Watching, "power {power}: {worst:?}");
            assert_eq!(last, Some(policy::Verdict::InsufficientEvidence), "power {power}");
        }
    }
}

/// The elimination rule has the same hole: a 3-GPU node, job 2000 busy on GPU 0 (its process
/// listed and resolved), job 3000 busy at 97 % on GPU 2 with no process listed (A9), GPU 1
/// free. GPU 2's row has an unreadable index, so the visible GPUs are 0 and 1; the jobs' counts
/// (1 + 1) equal the visible count, and 3000 would be "eliminated" onto the free GPU 1.
#[test]
fn elimination_never_uses_an_incomplete_gpu_list() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        r#"case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; echo 'GPU-0, 4242, 30000'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
{SMI_HEADER}
echo "0, GPU-0, 95, 30000, 81920, 30$((n % 3)).25, 400.00"
echo "1, GPU-1, 0, 3, 81920, 6$((n % 3)).25, 400.00"
echo "[Unknown Error], GPU-2, 97, 40000, 81920, 31$((n % 3)).5, 400.00""#
    );
    let jobs = vec![job("2000", 2000, 1, &[NODE]), job("3000", 3000, 1, &[NODE])];
    let (mut d, c) = smi_daemon(dir.path(), &body, jobs, &[(4242, 2000)]);
    for i in 0..100 {
        d.cycle(T0 + i * 60);
        assert_eq!(d.kept.get("3000"), None, "cycle {i}");
    }
    let calls = c.borrow().calls.clone();
    assert!(!calls.iter().any(|c| c.contains("3000")), "{calls:?}");
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
    let r = std::panic::catch_unwind(|| {
        attribution::attribute(
            &jobs,
            &gpus(8),
            Some(&apps),
            &Procs(BTreeMap::new()),
            true,
            &KeptMap::new(),
            &mut attribution::DeviceIndexTrust::default(),
        )
    });
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
  for (i = 1; i < 524288; i++) printf "%-127s\n", (100000 + i) "|" (100000 + i) "|0|N/A|PENDING|bob|ml|gpu|normal|N/A|||";
  printf "%-127s\n", "4242|4242|0|N/A|RUNNING|alice|ml|gpu|normal|2030-03-17T10:00:00|gpu001|cpu=8,gres/gpu=1|";
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

/// Two hung jobs on one node, each placed by its own process. Our drain names the first; once
/// it is cancelled, the second takes the drain over (its Reason replaces ours) with no resume
/// in between, so the node never returns to service while a wasted job still holds it.
#[test]
fn a_second_wasted_job_takes_over_our_drain_without_a_resume_between() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        r#"case "$1" in --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; echo 'GPU-0, 4901, 40000'; echo 'GPU-1, 4902, 40000'; exit 0;; esac
n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$D/n"
{SMI_HEADER}
echo "0, GPU-0, 0, 40000, 81920, 7$((n % 3)).5, 400.00"
echo "1, GPU-1, 0, 40000, 81920, 7$((n % 3)).5, 400.00""#
    );
    let jobs = vec![job("901", 901, 1, &[NODE]), job("902", 902, 1, &[NODE])];
    let (mut d, c) = smi_daemon(dir.path(), &body, jobs, &[(4901, 901), (4902, 902)]);
    for i in 0..200 {
        d.cycle(T0 + i * 60);
        if c.borrow().calls.iter().filter(|c| c.starts_with("scancel")).count() == 2 {
            break;
        }
    }
    let calls: Vec<String> = c
        .borrow()
        .calls
        .iter()
        .filter(|c| !c.starts_with("admincomment"))
        .cloned()
        .collect();
    let first_cancel = calls.iter().position(|c| c.starts_with("scancel")).expect("a cancel");
    let (cancelled, other) = if calls[first_cancel] == "scancel 901" {
        ("901", "902")
    } else {
        ("902", "901")
    };
    assert_eq!(
        calls[first_cancel - 1],
        format!("drain gpu001 gpu-reaper: hung job {cancelled}"),
        "{calls:?}"
    );
    assert_eq!(
        calls[first_cancel + 1],
        format!("drain gpu001 gpu-reaper: hung job {other}"),
        "taken over, no resume between: {calls:?}"
    );
    assert!(
        calls.contains(&format!("scancel {other}")),
        "the second job is cancelled in turn: {calls:?}"
    );
}
