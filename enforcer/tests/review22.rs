//! review22: probes of review 21's MIG skip. The test failed as reviewed (3159dff) and
//! passes since MIG jobs are remembered for their run (`Daemon::mig_jobs`, kept in the state
//! file); its restart variant holds the state file's part.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, worst_verdicts, FakeSlurm, POLICY, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::telemetry::NvidiaSmi;
use policy::Verdict;

struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 6001).then(|| "0::/system.slice/slurmstepd.scope/job_601/step_0/user/task_0\n".to_string())
    }
}

/// GPU 0 in MIG mode, its parent readings 0 % (trial 12's driver); GPU 1 whole and free.
const GPUS: &str = "\
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 5000 81920 62 400 0
1 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 0 81920 50 400 1
";

/// Jobs 601 and 602 each hold one MIG slice of GPU 0; their gres names no `<n>g.<m>gb` type
/// (review 21's case). Job 601's process runs on its slice for the first 10 cycles, then
/// exits (the job still holds its slice: between steps, or in a shell). The per-cycle
/// `mig_by_process` set forgets job 601 as soon as its process is gone.
#[test]
fn review22_a_mig_job_whose_process_exits_is_judged_on_whole_gpus() {
    mig_job_whose_process_exits(false);
}

#[test]
fn a_mig_job_is_remembered_across_a_restart() {
    mig_job_whose_process_exits(true);
}

fn mig_job_whose_process_exits(restart: bool) {
    let dir = tempfile::tempdir().unwrap();
    let jobs = [("601", 0), ("602", 1)]
        .iter()
        .map(|(id, idx)| {
            let mut j = job(id, id.parse().unwrap(), 1, &[common::cluster::NODE]);
            j.mig = false;
            j.gres_idx = vec![Some(vec![*idx])];
            j.gres_counts = vec![Some(1)];
            j
        })
        .collect();
    let c = cluster(jobs);
    std::fs::write(dir.path().join("gpus.txt"), GPUS).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("smi.mode"), "ok").unwrap();
    let smi: NvidiaSmi = common::fake_nvidia_smi(dir.path());
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        smi,
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    let before = worst_verdicts(&mut d, 0, 10);
    std::fs::write(dir.path().join("apps.csv"), "").unwrap();
    if restart {
        // The daemon restarts (state saved each cycle): the memory comes from the file.
        drop(d);
        d = Daemon::new(
            config_with(POLICY, &dir.path().join("state"), "enforce", ""),
            FakeSlurm(c.clone()),
            common::fake_nvidia_smi(dir.path()),
            real_executor(&c),
            Box::new(Procs),
            T0 + 10 * 60,
        );
        assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "{:?}", d.mig_jobs);
    }
    let after = worst_verdicts(&mut d, 10, 120);
    let calls = c.borrow().calls.clone();
    eprintln!("before {before:?}\nafter {after:?}\ncalls {calls:?}");
    assert_eq!(before.get("601"), None, "control: judged while its process ran");
    assert!(
        after.get("601").is_none_or(|v| *v < Verdict::Alert) && after.get("602").is_none_or(|v| *v < Verdict::Alert),
        "a MIG job was judged on whole-GPU readings: {after:?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:?}"
    );
}

/// PID 6001 in job 601's cgroup, PID 6003 in job 603's.
struct TwoProcs;
impl ProcReader for TwoProcs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        match pid {
            6001 | 6003 => Some(format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", pid - 5400)),
            _ => None,
        }
    }
}

/// A remembered MIG job keeps MIG in use on the node for attribution too: while Slurm's
/// indices may name MIG devices, a whole-GPU job whose process runs outside its index list
/// (index 0, process on GPU 1) proves nothing, after the MIG job's process has exited as
/// before. Without the mark, the rule was contradicted, and the contradiction is kept.
#[test]
fn a_remembered_mig_job_keeps_device_indices_unchecked() {
    let dir = tempfile::tempdir().unwrap();
    let mut mig = job("601", 601, 1, &[common::cluster::NODE]);
    mig.gres_idx = vec![Some(vec![0])];
    mig.gres_counts = vec![Some(1)];
    let mut whole = job("603", 603, 1, &[common::cluster::NODE]);
    whole.gres_idx = vec![Some(vec![0])];
    whole.gres_counts = vec![Some(1)];
    let c = cluster(vec![mig, whole]);
    std::fs::write(dir.path().join("gpus.txt"), GPUS).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\nGPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 9000\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("smi.mode"), "ok").unwrap();
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        common::fake_nvidia_smi(dir.path()),
        real_executor(&c),
        Box::new(TwoProcs),
        T0,
    );
    worst_verdicts(&mut d, 0, 5);
    assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "{:?}", d.mig_jobs);
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 9000\n",
    )
    .unwrap();
    worst_verdicts(&mut d, 5, 10);
    assert!(d.device_index.contradicted.is_none(), "{:?}", d.device_index.contradicted);
}
