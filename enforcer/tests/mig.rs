//! End to end: MIG slices are not whole GPUs (trial 7). The node has two GPUs: GPU 0 in MIG
//! mode (nvidia-smi shows `[N/A]` for its utilisation and memory) with two 1g.10gb slices
//! allocated, one to job 601 (a process on its MIG device) and one to job 602 (nothing
//! running yet); GPU 1 is a whole GPU, free. The two jobs' counts (1 + 1) add up to the two
//! GPUs listed, and no `Gres=` line says otherwise, yet job 602's slice is on GPU 0: placing it
//! on GPU 1 by elimination would judge it on a free GPU's readings and cancel it. With MIG in
//! use (a job's MIG type, or a process on a MIG device) counts and device indices place no job.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, worst_verdicts, Cluster, FakeSlurm, POLICY, T0};
use enforcer::attribution::{DeviceIndexTrust, DeviceMinor, IndexEvidence, ProcReader};
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::telemetry::NvidiaSmi;
use policy::Verdict;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

/// PID 6001 is in job 601's cgroup.
struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 6001).then(|| "0::/system.slice/slurmstepd.scope/job_601/step_0/user/task_0\n".to_string())
    }
}

/// `gpus.txt` for the fake nvidia-smi: index uuid util jitter mem_used mem_total power
/// power_limit minor.
const GPUS: &str = "\
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 [N/A] 0 [N/A] [N/A] 120 400 0
1 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 0 81920 50 400 1
";

/// Runs 90 cycles with jobs 601 and 602 (Slurm device indices 0 and 1), `mig_type_shown`
/// saying whether their TRES name the MIG type, the compute-apps rows `apps`, and the
/// device-index rule's record `trust` as a state file from before would leave it.
fn run(dir: &Path, mig_type_shown: bool, apps: &str, trust: DeviceIndexTrust) -> (BTreeMap<String, Verdict>, Rc<RefCell<Cluster>>) {
    run_with_gpus(dir, GPUS, mig_type_shown, apps, trust)
}

fn run_with_gpus(
    dir: &Path,
    gpus: &str,
    mig_type_shown: bool,
    apps: &str,
    trust: DeviceIndexTrust,
) -> (BTreeMap<String, Verdict>, Rc<RefCell<Cluster>>) {
    let jobs = [("601", 0), ("602", 1)]
        .iter()
        .map(|(id, idx)| {
            let mut j = job(id, id.parse().unwrap(), 1, &[common::cluster::NODE]);
            j.mig = mig_type_shown;
            j.gres_idx = vec![Some(vec![*idx])];
            j.gres_counts = vec![Some(1)];
            j
        })
        .collect();
    let c = cluster(jobs);
    std::fs::write(dir.join("gpus.txt"), gpus).unwrap();
    std::fs::write(dir.join("apps.csv"), apps).unwrap();
    std::fs::write(dir.join("smi.mode"), "ok").unwrap();
    let smi: NvidiaSmi = common::fake_nvidia_smi(dir);
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        smi,
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    d.device_index = trust;
    (worst_verdicts(&mut d, 0, 90), c)
}

fn assert_untouched(worst: &BTreeMap<String, Verdict>, c: &Rc<RefCell<Cluster>>) {
    assert!(worst.get("602").is_none_or(|v| *v < Verdict::Alert), "{worst:?}");
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:?}"
    );
}

#[test]
fn a_job_holding_a_mig_slice_is_never_placed_on_a_whole_gpu_by_elimination() {
    // Both signs: the jobs' MIG type and the process on a MIG device (old-style UUID).
    let dir = tempfile::tempdir().unwrap();
    let (worst, c) = run(
        dir.path(),
        true,
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\n",
        DeviceIndexTrust::default(),
    );
    assert_untouched(&worst, &c);
}

#[test]
fn a_process_on_a_mig_device_alone_keeps_counts_from_placing_jobs() {
    // The jobs' TRES name no MIG type (a cluster whose gres.conf gives slices no type).
    let dir = tempfile::tempdir().unwrap();
    let (worst, c) = run(
        dir.path(),
        false,
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\n",
        DeviceIndexTrust::default(),
    );
    assert_untouched(&worst, &c);
}

#[test]
fn a_mig_type_alone_keeps_device_indices_from_placing_jobs() {
    // No process on any MIG device: only the jobs' MIG type tells. The device-index rule was
    // confirmed, and every index pinned, before GPU 0 was put in MIG mode (its UUID and minor
    // numbers are unchanged), so without the MIG type job 602's index 1 (a MIG device index)
    // would place it on GPU 1, whose minor number is 1.
    let minor = |uuid: &str, minor| DeviceMinor { uuid: uuid.into(), minor };
    let trust = DeviceIndexTrust {
        gpus: vec![
            minor("GPU-aaaaaaaa-0000-0000-0000-000000000000", 0),
            minor("GPU-aaaaaaaa-0000-0000-0000-000000000001", 1),
        ],
        confirmed: Some(IndexEvidence {
            job_id: "500".into(),
            gpu: 0,
            minor: 0,
            idx: vec![0],
            what: "process on the GPU".into(),
        }),
        pinned: vec![vec![0], vec![1]],
        ..DeviceIndexTrust::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let (worst, c) = run(dir.path(), true, "", trust);
    assert_untouched(&worst, &c);
}

/// Trial 12: with the parent GPU's utilisation read as 0 rather than `[N/A]`, job 601 (a MIG
/// slice, its process on the slice under an old-style UUID) was placed on the parent GPU by
/// its process and judged on the whole GPU's readings, up to a would-cancel. A job holding
/// MIG slices is never judged: whole-GPU readings are not its own.
#[test]
fn a_job_holding_a_mig_slice_is_never_judged_on_its_parent_gpus_readings() {
    let zero_util = GPUS.replacen("[N/A] 0 [N/A] [N/A] 120 400 0", "0 0 5000 81920 62 400 0", 1);
    assert_ne!(zero_util, GPUS);
    let dir = tempfile::tempdir().unwrap();
    let (worst, c) = run_with_gpus(
        dir.path(),
        &zero_util,
        true,
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\n",
        DeviceIndexTrust::default(),
    );
    assert_eq!(worst.get("601"), None, "job 601 was judged: {worst:?}");
    assert_untouched(&worst, &c);
}

/// Review 21: the skip went by the gres type name alone; a site whose MIG gres has no
/// `<n>g.<m>gb` type would have had the job above judged on its parent GPU. A job with a
/// process on a MIG device is a MIG job too.
#[test]
fn a_job_with_a_process_on_a_mig_device_is_never_judged_whatever_its_gres_type() {
    let zero_util = GPUS.replacen("[N/A] 0 [N/A] [N/A] 120 400 0", "0 0 5000 81920 62 400 0", 1);
    let dir = tempfile::tempdir().unwrap();
    let (worst, c) = run_with_gpus(
        dir.path(),
        &zero_util,
        false,
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\n",
        DeviceIndexTrust::default(),
    );
    assert_eq!(worst.get("601"), None, "job 601 was judged: {worst:?}");
    assert_untouched(&worst, &c);
}
