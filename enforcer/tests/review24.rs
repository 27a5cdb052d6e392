//! review24: adversarial probes of the enforcer's MIG memory (8b903d2, f1e5762, 3159dff) and of
//! a restart across a clock step (the window-restore rule seen from the daemon).

mod common;

use common::cluster::{cluster, config_with, job, real_executor, worst_verdicts, FakeSlurm, OneIdleGpu, NODE, POLICY, T0};
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

/// GPU 0 in MIG mode (`mig.mode.current` Enabled, as nvidia-smi reports it since the fix of
/// these findings), its parent readings 0 % (trial 12's driver); GPU 1 whole and free.
const GPUS: &str = "\
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 5000 81920 62 400 0 Enabled
1 GPU-aaaaaaaa-0000-0000-0000-000000000001 0 0 0 81920 50 400 1
";

/// How the state file looks when the daemon restarts.
#[derive(Clone, Copy, Debug)]
enum File {
    /// As this release wrote it.
    Current,
    /// As the release before 8b903d2 wrote it: no `mig_jobs` key.
    NoMigJobs,
    /// No file (a first start, or one moved aside as corrupt or as another node's).
    Deleted,
    /// No restart; nvidia-smi fails (exit 9) for 5 cycles once the process has exited.
    NoRestartSmiOutage,
}

/// Review 22's scenario (jobs 601 and 602 each hold a MIG slice of GPU 0, gres type not
/// MIG-named; 601's process runs on its slice for 10 cycles, then exits), with a restart at
/// cycle 10 from `file`. Returns (worst verdicts after the restart, Slurm calls).
fn mig_restart(file: File) -> (std::collections::BTreeMap<String, Verdict>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let jobs = [("601", 0), ("602", 1)]
        .iter()
        .map(|(id, idx)| {
            let mut j = job(id, id.parse().unwrap(), 1, &[NODE]);
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
    let state = dir.path().join("state");
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &state, "enforce", ""),
        FakeSlurm(c.clone()),
        common::fake_nvidia_smi(dir.path()),
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    let before = worst_verdicts(&mut d, 0, 10);
    assert_eq!(before.get("601"), None, "control: judged while its process ran");
    assert!(d.mig_jobs.iter().any(|(id, _)| id == "601"), "control: {:?}", d.mig_jobs);
    std::fs::write(dir.path().join("apps.csv"), "").unwrap();
    if let File::NoRestartSmiOutage = file {
        std::fs::write(dir.path().join("smi.mode"), "exit9").unwrap();
        let mut after = worst_verdicts(&mut d, 10, 5);
        std::fs::write(dir.path().join("smi.mode"), "ok").unwrap();
        after.extend(worst_verdicts(&mut d, 15, 115));
        let calls = c.borrow().calls.clone();
        eprintln!("{file:?}: after {after:?}\ncalls {calls:?}");
        return (after, calls);
    }
    drop(d);
    let path = state.join("state.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(v.get("mig_jobs").is_some(), "the file remembers the MIG job: {v}");
    eprintln!("kept attributions in the file: {}", v["attribution"]);
    if let File::NoMigJobs = file {
        v.as_object_mut().unwrap().remove("mig_jobs");
    }
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    if let File::Deleted = file {
        std::fs::remove_file(&path).unwrap();
    }
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &state, "enforce", ""),
        FakeSlurm(c.clone()),
        common::fake_nvidia_smi(dir.path()),
        real_executor(&c),
        Box::new(Procs),
        T0 + 10 * 60,
    );
    let after = worst_verdicts(&mut d, 10, 120);
    let calls = c.borrow().calls.clone();
    eprintln!("{file:?}: after {after:?}\ncalls {calls:?}");
    (after, calls)
}

fn judged_on_whole_gpus(after: &std::collections::BTreeMap<String, Verdict>, calls: &[String]) -> bool {
    after.get("601").is_some_and(|v| *v >= Verdict::Alert)
        || after.get("602").is_some_and(|v| *v >= Verdict::Alert)
        || calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel"))
}

/// Control: the current file carries the memory across the restart (passes).
#[test]
fn review24_mig_memory_survives_a_restart_from_the_current_file() {
    let (after, calls) = mig_restart(File::Current);
    assert!(!judged_on_whole_gpus(&after, &calls), "{after:?} {calls:?}");
}

/// Upgrading from the release before 8b903d2 while a MIG job's process has exited: the file
/// has no `mig_jobs` (absent in older files, state.rs:71-74), so nothing marks job 601 as
/// MIG. With no MIG process in view the node counts as MIG-free, the list as whole, and the
/// jobs are placed on whole GPUs: the file's kept attribution places 601 on GPU 0 (made while
/// its old-style `MIG-GPU-<parent>/1/0` process ran: the parent GPU), so 601 is judged on the
/// parent's readings, and 602 is placed by elimination on GPU 1, which it does not hold, then
/// drained and cancelled. (A fresh start, with no kept attribution, places neither: see the
/// next test.)
#[test]
fn review24_an_older_state_file_forgets_the_mig_job() {
    let (after, calls) = mig_restart(File::NoMigJobs);
    assert!(
        !judged_on_whole_gpus(&after, &calls),
        "a MIG job (or its neighbour) judged on whole-GPU readings after a restart from an older file: {after:?} {calls:?}"
    );
}

/// Control: a fresh start (no state file, e.g. one moved aside) places neither job: with no
/// kept attribution, elimination cannot tell the two one-GPU jobs apart (passes).
#[test]
fn review24_a_fresh_start_places_neither_mig_job() {
    let (after, calls) = mig_restart(File::Deleted);
    assert!(
        !judged_on_whole_gpus(&after, &calls),
        "a MIG job (or its neighbour) judged on whole-GPU readings after a fresh start: {after:?} {calls:?}"
    );
}

/// Control: an nvidia-smi outage after the process exited changes nothing (passes).
#[test]
fn review24_mig_memory_survives_an_nvidia_smi_outage() {
    let (after, calls) = mig_restart(File::NoRestartSmiOutage);
    assert!(!judged_on_whole_gpus(&after, &calls), "{after:?} {calls:?}");
}

struct Procs13;
impl ProcReader for Procs13 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 6001 | 6003).then(|| format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", pid - 5400))
    }
}

/// The memory is per run, so it says nothing about a slice job that never showed a process.
/// GPU 0 in MIG mode (parent readings 0 %, trial 12's driver), GPU 1 whole and busy with job
/// 603 (its process on GPU 1). Jobs 601 and 602 each hold a slice of GPU 0 (gres types not
/// MIG-named); 601's process runs, 602 never shows one. At cycle 10 job 601 ends (its slice's
/// memory freed): no MIG job is remembered and no MIG process is in view, so the node reads
/// as MIG-free, and 602, the only job left unplaced, is placed by elimination on GPU 0 and
/// judged on the parent GPU's readings, which the design says never happens
/// (daemon.rs:837-846).
///
/// With Slurm's indices (IDX:1, the slice) this passes, by accident: the placement on GPU 0
/// "contradicts" index 1, the device-index rule is switched off for good on the node (a
/// false gres.conf warning), the placement is dropped and 602 is ambiguous after two cycles
/// of `watching` on the parent. Without indices (next test) 602 is drained and cancelled as
/// idle on the parent's readings.
#[test]
fn review24_a_slice_job_without_a_process_is_judged_on_the_parent_once_its_neighbour_ends() {
    slice_job_after_neighbour_ends(true);
}

/// The same where squeue gives no device indices (`gres_idx` unknown): job 602 is placed by
/// elimination on the MIG parent GPU 0, judged idle on its readings (0 %, 3 MiB, 63 W), the
/// node drained and the job cancelled (fails).
#[test]
fn review24_a_slice_job_without_a_process_or_indices_is_judged_on_the_parent() {
    slice_job_after_neighbour_ends(false);
}

fn slice_job_after_neighbour_ends(indices: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (id, idx) in [("601", 0u32), ("602", 1u32)] {
        let mut j = job(id, id.parse().unwrap(), 1, &[NODE]);
        j.mig = false;
        if indices {
            j.gres_idx = vec![Some(vec![idx])];
        }
        j.gres_counts = vec![Some(1)];
        jobs.push(j);
    }
    jobs.push(job("603", 603, 1, &[NODE]));
    let c = cluster(jobs);
    std::fs::write(
        dir.path().join("gpus.txt"),
        "0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 5000 81920 62 400 0 Enabled\n1 GPU-aaaaaaaa-0000-0000-0000-000000000001 90 5 40000 81920 300 400 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "MIG-GPU-aaaaaaaa-0000-0000-0000-000000000000/1/0, 6001, 9000\nGPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("smi.mode"), "ok").unwrap();
    let mut d: Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>> = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        common::fake_nvidia_smi(dir.path()),
        real_executor(&c),
        Box::new(Procs13),
        T0,
    );
    let before = worst_verdicts(&mut d, 0, 10);
    assert_eq!(before.get("602"), None, "control: not judged while MIG is seen: {before:?}");
    // Job 601 ends; its slice's memory is freed (the parent now shows 3 MiB used).
    c.borrow_mut().jobs.retain(|j| j.job_id != "601");
    std::fs::write(
        dir.path().join("gpus.txt"),
        "0 GPU-aaaaaaaa-0000-0000-0000-000000000000 0 0 3 81920 62 400 0 Enabled\n1 GPU-aaaaaaaa-0000-0000-0000-000000000001 90 5 40000 81920 300 400 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-aaaaaaaa-0000-0000-0000-000000000001, 6003, 40000\n",
    )
    .unwrap();
    let mut after = std::collections::BTreeMap::new();
    for i in 10..130 {
        let r = d.cycle(T0 + i * 60);
        for f in r.findings.iter().filter(|f| f.job_id == "602") {
            eprintln!("{i}m 602 {:?} {} {}", f.verdict, f.signature, f.reason);
        }
        for f in r.findings {
            let w = after.entry(f.job_id).or_insert(f.verdict);
            *w = (*w).max(f.verdict);
        }
        if i % 20 == 0 {
            eprintln!("{i}m skipped {:?} ambiguous {:?}", r.jobs_skipped, r.ambiguous);
        }
    }
    eprintln!(
        "device index: contradicted {:?} confirmed {:?}",
        d.device_index.contradicted, d.device_index.confirmed
    );
    let last = d.cycle(T0 + 130 * 60);
    let f602: Vec<_> = last
        .findings
        .iter()
        .filter(|f| f.job_id == "602")
        .map(|f| (f.verdict, f.signature, f.reason.clone()))
        .collect();
    let calls = c.borrow().calls.clone();
    eprintln!("before {before:?}\nafter {after:?}\n602 at 130m: {f602:?}\ncalls {calls:?}");
    assert!(
        f602.is_empty() && after.get("602").is_none_or(|v| *v < Verdict::Alert) && !calls.iter().any(|c| c.contains("602")),
        "slice job 602 judged on its parent GPU once the remembered MIG job ended: {after:?} {calls:?}"
    );
}

fn policy_30m_1h() -> String {
    "[policy]\nwindow = \"20m\"\nwarmup = \"15m\"\ninterval = \"60s\"\nnotice = \"30m\"\nstages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"30m\", verdict = \"drain\" }, { after = \"1h\", verdict = \"cancel\" }]\nceilings = { idle = \"cancel\" }\n".to_string()
}

/// An idle one-GPU job under a daemon whose clock steps back across a restart. The last
/// cycle before it ran at T0+49m; the daemon restarts and its first cycle runs 30 s earlier
/// than that (an NTP step during the restart; 30 s is within `clock_skew`, so main.rs:459
/// accepts the file). Returns the first minute after the step at which the job stood at
/// alert or above, and whether a cycle reported the step.
fn clock_back(restart: bool) -> (Option<i64>, bool) {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(vec![job("802", 802, 1, &[NODE])]);
    c.borrow_mut().node_gres = Some("gpu:1".into());
    let state = dir.path().join("state");
    let mk = |now: i64| -> Daemon<FakeSlurm, OneIdleGpu, RealExecutor<FakeSlurm>> {
        Daemon::new(
            config_with(&policy_30m_1h(), &state, "enforce", ""),
            FakeSlurm(c.clone()),
            OneIdleGpu {
                cycle: 0,
                power_known: true,
            },
            real_executor(&c),
            Box::new(common::cluster::NoProc),
            now,
        )
    };
    let mut d = mk(T0);
    for i in 0..50 {
        d.cycle(T0 + i * 60);
    }
    assert!(
        c.borrow().calls.iter().any(|c| c.starts_with("drain")),
        "control: {:?}",
        c.borrow().calls
    );
    let back = T0 + 49 * 60 - 30;
    if restart {
        drop(d);
        d = mk(back);
    }
    let mut reported = false;
    let mut first = None;
    for i in 0..40 {
        let r = d.cycle(back + i * 60);
        reported |= r.clock_went_back_s.is_some();
        if first.is_none() && r.findings.iter().any(|f| f.verdict >= Verdict::Alert) {
            first = Some(i);
        }
    }
    (first, reported)
}

/// Without a restart the step is reported and the job is judged again only on a full window
/// gathered after it (no alert for 17 cycles); across a restart the daemon neither reports the
/// step nor empties the windows (`Engine::restore` ignores `taken_s`, the new engine's
/// `last_now_s` is `None`, the daemon's `metrics.cycles` is 0): it alerts at once, and its
/// drain and cancel dwell count from the pre-step window's start.
#[test]
fn review24_a_clock_step_back_across_a_restart_is_not_a_clock_step() {
    let plain = clock_back(false);
    let restarted = clock_back(true);
    eprintln!("plain (first alert after the step, reported) {plain:?}; restarted {restarted:?}");
    assert!(plain.1 && plain.0.is_none_or(|m| m >= 17), "control: {plain:?}");
    assert!(restarted.1, "the restarted daemon did not report the clock step: {restarted:?}");
    assert!(
        restarted.0.is_none_or(|m| m >= 17),
        "restarted across a 30 s clock step: alerted {restarted:?} cycles after it, on samples taken before it (plain: {plain:?})"
    );
}
