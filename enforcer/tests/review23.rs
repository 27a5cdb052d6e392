//! review23: probes of review 22's fix (Daemon::mig_jobs). The two device-index probes failed as
//! reviewed (8b903d2) and pass since remembered MIG jobs are marked for attribution.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, worst_verdicts, FakeSlurm, POLICY, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::telemetry::NvidiaSmi;

struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        match pid {
            6001 => Some("0::/system.slice/slurmstepd.scope/job_601/step_0/user/task_0\n".to_string()),
            6003 => Some("0::/system.slice/slurmstepd.scope/job_603/step_0/user/task_0\n".to_string()),
            _ => None,
        }
    }
}

/// GPU 0 in MIG mode; GPU 1 whole, busy with job 603.
const GPUS: &str = "\
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 5000 81920 62 400 0
1 GPU-aaaaaaaa-0000-0000-0000-000000000001 90 5 40000 81920 300 400 1
";

/// Job 601 holds a MIG slice of GPU 0 (gres type not MIG-named); job 603 holds GPU 1 whole,
/// and on this mixed node Slurm's device index names MIG devices (slices 0,1 of GPU 0, then
/// GPU 1 as index 2: trial 12). While 601's process runs, MIG is seen and nothing is checked
/// against the indices. Once it exits, the daemon still counts 601 as a MIG job
/// (`mig_jobs`), but `attribution::attribute` computes its own `mig_in_use` from `j.mig` and
/// MIG processes only: the index check runs, and job 603 "contradicts" it.
#[test]
fn review23_a_remembered_mig_job_still_keeps_the_device_index_unchecked() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (id, idx) in [("601", 0u32), ("603", 2u32)] {
        let mut j = job(id, id.parse().unwrap(), 1, &[common::cluster::NODE]);
        j.mig = false;
        j.gres_idx = vec![Some(vec![idx])];
        j.gres_counts = vec![Some(1)];
        jobs.push(j);
    }
    let c = cluster(jobs);
    std::fs::write(dir.path().join("gpus.txt"), GPUS).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\nGPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
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
    let _ = worst_verdicts(&mut d, 0, 5);
    assert!(d.device_index.contradicted.is_none(), "control: {:?}", d.device_index.contradicted);
    assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "control: {:?}", d.mig_jobs);
    // 601's process exits; it still holds its slice.
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    let _ = worst_verdicts(&mut d, 5, 8);
    assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "still a MIG job: {:?}", d.mig_jobs);
    assert!(
        d.device_index.contradicted.is_none(),
        "MIG still in use (job 601 remembered), yet the device index was checked and marked contradicted: {:?}",
        d.device_index.contradicted
    );
}

#[test]
fn review23_a_remembered_mig_job_still_keeps_the_device_index_unpinned() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (id, idx) in [("601", 0u32), ("603", 1u32)] {
        let mut j = job(id, id.parse().unwrap(), 1, &[common::cluster::NODE]);
        j.mig = false;
        j.gres_idx = vec![Some(vec![idx])];
        j.gres_counts = vec![Some(1)];
        jobs.push(j);
    }
    let c = cluster(jobs);
    std::fs::write(dir.path().join("gpus.txt"), GPUS).unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\nGPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
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
    let _ = worst_verdicts(&mut d, 0, 5);
    assert!(d.device_index.pinned.is_empty(), "control: {:?}", d.device_index.pinned);
    assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "control: {:?}", d.mig_jobs);
    // 601's process exits; it still holds its slice.
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    let _ = worst_verdicts(&mut d, 5, 8);
    assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "still a MIG job: {:?}", d.mig_jobs);
    assert!(d.device_index.contradicted.is_none(), "{:?}", d.device_index.contradicted);
    assert!(
        d.device_index.pinned.is_empty(),
        "MIG still in use (job 601 remembered), yet a set of Slurm's (MIG-numbered) indices was pinned: {:?}",
        d.device_index.pinned
    );
}

/// A file this release wrote with `mig_jobs` passes this release's "newer file" check, and a
/// file without the key (older) loads.
#[test]
fn review23_mig_jobs_key_and_the_newer_file_check() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.json");
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = {
        let c = cluster(vec![job("601", 601, 1, &[common::cluster::NODE])]);
        Daemon::new(
            config_with(POLICY, dir.path(), "enforce", ""),
            FakeSlurm(c.clone()),
            common::fake_nvidia_smi(dir.path()),
            real_executor(&c),
            Box::new(Procs),
            T0,
        )
    };
    let start = job("601", 601, 1, &[common::cluster::NODE]).start_s;
    d.mig_jobs.insert(("601".into(), start));
    let _ = d.cycle(T0);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("\"mig_jobs\""), "{text}");
    enforcer::state::check_not_newer(&p).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_object_mut().unwrap().remove("mig_jobs");
    std::fs::write(&p, v.to_string()).unwrap();
    enforcer::state::check_not_newer(&p).unwrap();
    assert!(matches!(enforcer::state::load(&p), enforcer::state::Loaded::State(_)));
}
