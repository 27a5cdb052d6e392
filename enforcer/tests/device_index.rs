//! End to end: placing an idle job by Slurm's device index. The daemon runs in process with
//! the repository's fake `nvidia-smi` (`tests/fakes`, minor numbers that differ from the
//! indices), jobs read from `squeue --json` text with `gres_detail`, a fake /proc, and the
//! real executor against a fake Slurm, so each drain Slurm would receive is checked.
//!
//! The node has 4 GPUs; nvidia-smi index i has minor number 3 - i. Job 1000 runs processes
//! on GPUs 0 and 1 (minors 3 and 2); job 1001 holds one GPU and runs nothing; GPU 2 is free.
//! The counts (2 + 1) do not add up to 4, so no earlier rule can place job 1001. Job 1000
//! alone pins minors {2,3} (and so {0,1}) but not minor 0 by itself; a short job 999 seen on
//! GPU 2 (minor 1) pins {1}, and with it {0}.

mod common;

use common::cluster::{cluster, config_with, real_executor, worst_verdicts, Cluster, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::{DeviceIndexState, ProcReader};
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::squeue_json;
use enforcer::telemetry::NvidiaSmi;
use policy::Verdict;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

/// PID 4242 is in job 1000's cgroup, PID 4343 in job 999's.
struct Procs(BTreeMap<u32, String>);
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        self.0.get(&pid).cloned()
    }
}

type SmiDaemon = Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>>;

/// `gpus.txt` for the fake nvidia-smi: index uuid util jitter mem_used mem_total power
/// power_limit minor. GPUs 0 and 1 busy (job 1000), 2 and 3 idle with nothing in memory.
const GPUS: &str = "\
0 GPU-00000000-0000-0000-0000-000000000000 90 5 30000 81920 300 400 3
1 GPU-00000000-0000-0000-0000-000000000001 90 5 30000 81920 300 400 2
2 GPU-00000000-0000-0000-0000-000000000002 0 0 3 81920 55 400 1
3 GPU-00000000-0000-0000-0000-000000000003 0 0 3 81920 56 400 0
";

/// Job 1000's processes on GPUs 0 and 1.
const APPS: &str = "\
GPU-00000000-0000-0000-0000-000000000000, 4242, 30000
GPU-00000000-0000-0000-0000-000000000001, 4242, 30000
";

/// [`APPS`] plus job 999's process on GPU 2.
const APPS_WITH_999: &str = "\
GPU-00000000-0000-0000-0000-000000000000, 4242, 30000
GPU-00000000-0000-0000-0000-000000000001, 4242, 30000
GPU-00000000-0000-0000-0000-000000000002, 4343, 500
";

/// squeue --json as Slurm 22.05 gives it on a cluster without `gres/gpu` in the TRES: the
/// GPUs only in `gres_detail`. `busy` and `idle` are the two jobs' detail strings.
fn squeue(busy: &str, idle: &str) -> Vec<enforcer::parse::SlurmJob> {
    squeue_rows(&[(1000, "train", busy), (1001, "forgotten", idle)])
}

/// squeue --json (as [`squeue`]) with one row per `(job id, name, gres_detail string)`.
fn squeue_rows(rows: &[(u32, &str, &str)]) -> Vec<enforcer::parse::SlurmJob> {
    let start = T0 - 7200;
    let row = |id: u32, name: &str, detail: &str| {
        format!(
            r#"{{"job_id": {id}, "job_state": ["RUNNING"], "user_name": "alice", "account": "ml", "partition": "gpu", "qos": "normal", "name": "{name}", "comment": "", "start_time": {{"set": true, "infinite": false, "number": {start}}}, "nodes": "{NODE}", "tres_alloc_str": "cpu=2,mem=8G,node=1,billing=2", "gres_detail": ["{detail}"]}}"#
        )
    };
    let rows: Vec<String> = rows.iter().map(|(id, name, detail)| row(*id, name, detail)).collect();
    let text = format!(r#"{{"jobs": [{}], "errors": [], "warnings": []}}"#, rows.join(", "));
    let r = squeue_json::parse(&text).unwrap();
    assert!(r.row_errors.is_empty(), "{r:?}");
    r.jobs
}

/// The fake nvidia-smi of `tests/fakes`, run with `dir` as its FAKE_DIR (a wrapper script,
/// since the daemon passes no environment of its own).
fn fake_smi(dir: &Path, mode: &str) -> NvidiaSmi {
    std::fs::write(dir.join("gpus.txt"), GPUS).unwrap();
    std::fs::write(dir.join("apps.csv"), APPS).unwrap();
    std::fs::write(dir.join("smi.mode"), mode).unwrap();
    common::fake_nvidia_smi(dir)
}

fn daemon(dir: &Path, jobs: Vec<enforcer::parse::SlurmJob>, smi_mode: &str) -> (SmiDaemon, Rc<RefCell<Cluster>>) {
    let c = cluster(jobs);
    let procs = Procs(
        [
            (4242, "0::/system.slice/slurmstepd.scope/job_1000/step_0/user/task_0\n".to_string()),
            (4343, "0::/system.slice/slurmstepd.scope/job_999/step_0/user/task_0\n".to_string()),
        ]
        .into_iter()
        .collect(),
    );
    let d = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        fake_smi(dir, smi_mode),
        real_executor(&c),
        Box::new(procs),
        T0,
    );
    (d, c)
}

/// One cycle at [`T0`] in which job 999 (`IDX:1`) runs on GPU 2 (minor 1) beside jobs 1000
/// and 1001, pinning index 1; afterwards job 999 has gone again.
fn cycle_with_short_job_999(d: &mut SmiDaemon, c: &Rc<RefCell<Cluster>>, dir: &Path) -> enforcer::daemon::CycleReport {
    c.borrow_mut().jobs = squeue_rows(&[
        (1000, "train", "gpu:2(IDX:2-3)"),
        (1001, "forgotten", "gpu:1(IDX:0)"),
        (999, "short", "gpu:1(IDX:1)"),
    ]);
    std::fs::write(dir.join("apps.csv"), APPS_WITH_999).unwrap();
    let report = d.cycle(T0);
    c.borrow_mut().jobs = squeue("gpu:2(IDX:2-3)", "gpu:1(IDX:0)");
    std::fs::write(dir.join("apps.csv"), APPS).unwrap();
    report
}

/// The `--query-gpu` calls the fake nvidia-smi received, in order.
fn gpu_queries(dir: &Path) -> Vec<String> {
    let argv = std::fs::read(dir.join("nvidia-smi.argv")).unwrap();
    argv.split(|b| *b == 0x1e)
        .map(|call| String::from_utf8_lossy(call).into_owned())
        .filter(|call| call.starts_with("--query-gpu="))
        .collect()
}

fn audit(dir: &Path) -> Vec<serde_json::Value> {
    common::audit(&dir.join("state"))
}

/// Job 1000's indices are minors 2-3 (GPUs 1 and 0: its processes confirm the mapping);
/// job 1001's `IDX:0` is minor 0, GPU 3. Job 1000 alone does not tell minor 0 from minor 1,
/// so job 1001 is not placed; once job 999 (`IDX:1`) is seen on GPU 2 (minor 1) for one cycle
/// it is placed on GPU 3, judged idle, alerted and, with the test policy's drain stage at 30
/// minutes, drained; the busy job stays healthy.
#[test]
fn idle_job_without_processes_on_a_shared_node_is_alerted_and_drained() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), squeue("gpu:2(IDX:2-3)", "gpu:1(IDX:0)"), "ok");
    let before = d.cycle(T0 - 60);
    assert_eq!(before.device_index, DeviceIndexState::Trusted, "{before:?}");
    assert!(before.placed_by_device_index.is_empty(), "{before:?}");
    assert!(!d.kept.contains_key("1001"));
    let first = cycle_with_short_job_999(&mut d, &c, dir.path());
    assert_eq!(first.device_index, DeviceIndexState::Trusted, "{first:?}");
    assert_eq!(first.placed_by_device_index, ["1001"]);
    let kept = &d.kept["1001"];
    assert_eq!(
        (kept.gpus.as_slice(), kept.by_device_index),
        (&[3][..], true),
        "minor 0 is GPU 3, not GPU 0"
    );
    assert_eq!(d.kept["1000"].gpus, [0, 1]);
    assert_eq!(d.metrics.jobs_placed_by_device_index, 1);
    let worst = worst_verdicts(&mut d, 1, 70);
    assert_eq!(worst.get("1000"), Some(&Verdict::Healthy), "{worst:?}");
    assert!(worst.get("1001").is_some_and(|v| *v >= Verdict::Alert), "{worst:?}");
    let calls = c.borrow().calls.clone();
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with(&format!("drain {NODE}")) && c.contains("job 1001")),
        "{calls:?}"
    );
    assert!(!calls.iter().any(|c| c.contains("job 1000")), "{calls:?}");
    assert!(audit(dir.path()).iter().any(|a| a["action"] == "alert" && a["job_id"] == "1001"));
    // Placed once, then kept: the counter does not grow per cycle.
    assert_eq!(d.metrics.jobs_placed_by_device_index, 1);
    let page = d.metrics.render();
    assert!(page.contains("gpu_reaper_jobs_placed_by_device_index_total 1"), "{page}");
    assert!(page.contains("gpu_reaper_device_index_state{state=\"trusted\"} 1"), "{page}");
}

/// slurmd reads gres.conf when it starts, so after a restart (a new `SlurmdStartTime`) Slurm's
/// indices may name other devices: what they were shown to mean is forgotten. Job 1001 was
/// placed on GPU 3 through the pin job 999 proved; after the restart that placement is dropped
/// and, with only job 1000's pin proven again, job 1001 is never placed, judged or drained.
#[test]
fn a_slurmd_restart_forgets_the_pins_and_the_placements_made_from_them() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), squeue("gpu:2(IDX:2-3)", "gpu:1(IDX:0)"), "ok");
    c.borrow_mut().node_slurmd_start = Some("2026-11-30T03:10:10".into());
    let first = cycle_with_short_job_999(&mut d, &c, dir.path());
    assert_eq!(first.placed_by_device_index, ["1001"]);
    assert_eq!(d.device_index.slurmd_start.as_deref(), Some("2026-11-30T03:10:10"));
    // The same start time changes nothing.
    d.cycle(T0 + 60);
    assert!(d.kept["1001"].by_device_index, "{:?}", d.kept);
    // slurmd restarts.
    c.borrow_mut().node_slurmd_start = Some("2026-11-30T05:00:00".into());
    let after = d.cycle(T0 + 120);
    assert!(!d.kept.get("1001").is_some_and(|k| k.by_device_index), "{:?}", d.kept);
    assert!(after.placed_by_device_index.is_empty(), "{after:?}");
    assert!(!d.device_index.pinned.contains(&vec![1]), "{:?}", d.device_index);
    assert_eq!(d.device_index.slurmd_start.as_deref(), Some("2026-11-30T05:00:00"));
    let worst = worst_verdicts(&mut d, 3, 70);
    assert!(worst.get("1001").is_none_or(|v| *v < Verdict::Alert), "{worst:?}");
    assert!(
        !c.borrow().calls.iter().any(|c| c.starts_with("drain") && c.contains("job 1001")),
        "{:?}",
        c.borrow().calls
    );
}

/// Job 1000's `gres_detail` says minors 0-1 (GPUs 3 and 2) while its processes run on GPUs
/// 0 and 1: the mapping is contradicted in the first cycle, so job 1001 (whose `IDX:2` would
/// name GPU 1, job 1000's own) is never placed and never judged; the contradiction is an
/// audit record, a metric, and survives a restart.
#[test]
fn with_a_contradicting_mapping_the_idle_job_is_never_judged() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), squeue("gpu:2(IDX:0-1)", "gpu:1(IDX:2)"), "ok");
    let worst = worst_verdicts(&mut d, 0, 70);
    assert_eq!(worst.get("1001"), None, "job 1001 was judged: {worst:?}");
    assert!(!d.kept.contains_key("1001"));
    assert!(!c.borrow().calls.iter().any(|c| c.starts_with("drain")), "{:?}", c.borrow().calls);
    let contradiction = d.device_index.contradicted.clone().expect("contradicted");
    assert_eq!(contradiction.job_id, "1000");
    assert_eq!(contradiction.idx, [0, 1]);
    assert_eq!(d.metrics.device_index_contradictions, 1, "found once, then the rule is off");
    let records: Vec<_> = audit(dir.path())
        .into_iter()
        .filter(|a| a["record"] == "device_index_contradiction")
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["job_id"], "1000");
    // A restart reads the contradiction back: still off, job 1001 still not judged.
    drop(d);
    let (mut d, _) = daemon(dir.path(), squeue("gpu:2(IDX:0-1)", "gpu:1(IDX:2)"), "ok");
    assert_eq!(d.device_index.contradicted.as_ref(), Some(&contradiction));
    let rep = d.cycle(T0 + 80 * 60);
    assert_eq!(rep.device_index, DeviceIndexState::Contradicted);
    assert!(
        rep.jobs_skipped
            .iter()
            .any(|(j, why)| j == "1001" && *why == "ambiguous_attribution"),
        "{rep:?}"
    );
    // A cycle without GPU data still reports the standing contradiction (no flapping alert).
    std::fs::write(dir.path().join("smi.mode"), "exit15").unwrap();
    let rep = d.cycle(T0 + 81 * 60);
    assert!(rep.telemetry_no_data.is_some(), "{rep:?}");
    assert_eq!(rep.device_index, DeviceIndexState::Contradicted);
    assert!(d
        .metrics
        .render()
        .contains("gpu_reaper_device_index_state{state=\"contradicted\"} 1"));
}

/// An nvidia-smi that refuses `minor_number` (an older driver: exit 2 and `Field
/// "minor_number" is not a valid field to query.`): the same cycle reads the GPUs with the old
/// query, later cycles ask the old one but for a try of the full one every 5 minutes, the busy
/// job is still judged, and the device-index rule stays off.
#[test]
fn an_nvidia_smi_without_minor_number_keeps_telemetry_and_the_rule_off() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), squeue("gpu:2(IDX:2-3)", "gpu:1(IDX:0)"), "nominor");
    let first = d.cycle(T0);
    assert_eq!(first.telemetry_no_data, None, "{first:?}");
    assert_eq!(first.device_index, DeviceIndexState::Unavailable);
    assert_eq!(d.most_gpus_seen, 4, "the GPUs were read in the first cycle");
    let worst = worst_verdicts(&mut d, 1, 30);
    assert_eq!(worst.get("1000"), Some(&Verdict::Healthy), "{worst:?}");
    assert_eq!(worst.get("1001"), None, "{worst:?}");
    assert!(d.telemetry.minor_refused);
    let queries = gpu_queries(dir.path());
    // Asked again every 5 minutes (a driver upgraded under the daemon knows it): at 0, 5, …,
    // 30 minutes, each time refused and asked again without it.
    assert_eq!(
        queries.iter().filter(|q| q.contains("minor_number")).count(),
        7,
        "asked every 5 minutes: {queries:?}"
    );
    assert_eq!(queries.len(), 31 + 7, "31 cycles, 7 of them asking twice: {queries:?}");
    assert!(!c.borrow().calls.iter().any(|c| c.starts_with("drain")));
}

/// How nvidia-smi's refusal of a query field is read, whatever its exit code: a refusal of
/// `minor_number` falls back to the old list (the GPUs are read, minor numbers unknown); a
/// refusal of any other field is no data, never a fallback that drops a reading.
#[test]
fn a_refused_query_field_is_read_by_its_words() {
    use enforcer::telemetry::Telemetry;
    let header = "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]";
    for (refusal, code, falls_back) in [
        (r#"Field "minor_number" is not a valid field to query."#, 2, true),
        (r#"Field "minor_number" is not a valid field to query."#, 0, true),
        (r#"Field "power.limit" is not a valid field to query."#, 2, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let body = format!(
            "case \"$1\" in\n  --query-compute-apps=*) echo 'gpu_uuid, pid, used_gpu_memory [MiB]'; exit 0 ;;\n  *minor_number*) echo '{refusal}'; exit {code} ;;\nesac\necho '{header}'\necho '0, GPU-a, 5, 100, 81920, 60.5, 400.00'"
        );
        let mut smi = NvidiaSmi::new(
            common::script(dir.path(), "nvidia-smi", &body),
            std::time::Duration::from_secs(5),
            enforcer::run::KillMode::Ignore,
        );
        let r = smi.read(T0);
        assert_eq!(smi.minor_refused, falls_back, "{refusal} (exit {code}): {r:?}");
        if falls_back {
            assert_eq!(r.no_data, None, "{r:?}");
            assert_eq!((r.gpus.len(), r.gpus[0].minor), (1, None), "{r:?}");
        } else {
            assert_eq!(r.no_data.as_deref(), Some("field_refused"), "{r:?}");
            assert!(r.no_data_detail.as_deref().is_some_and(|d| d.contains("power.limit")), "{r:?}");
            assert!(r.gpus.is_empty());
        }
    }
}

/// Trial 8: once Slurm's indices are contradicted on a node (job 1000's process runs on GPU 0,
/// minor 0, while Slurm gave it index 1), counts say nothing sure either: job 1001, idle,
/// whose Slurm index 0 names the GPU job 1000 works on, was placed by elimination on the free
/// GPU 1 and drained on its readings. No job is placed by elimination on such a node.
#[test]
fn after_a_contradiction_no_job_is_placed_by_elimination() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(
        dir.path(),
        squeue_rows(&[(1000, "train", "gpu:1(IDX:1)"), (1001, "forgotten", "gpu:1(IDX:0)")]),
        "ok",
    );
    std::fs::write(
        dir.path().join("gpus.txt"),
        "0 GPU-00000000-0000-0000-0000-000000000000 90 5 30000 81920 300 400 0\n1 GPU-00000000-0000-0000-0000-000000000001 0 0 3 81920 55 400 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("apps.csv"),
        "GPU-00000000-0000-0000-0000-000000000000, 4242, 30000\n",
    )
    .unwrap();
    let worst = worst_verdicts(&mut d, 0, 90);
    assert_eq!(d.cycle(T0 + 90 * 60).device_index, DeviceIndexState::Contradicted);
    assert!(worst.get("1001").is_none_or(|v| *v < Verdict::Alert), "{worst:?}");
    assert!(d.kept.get("1001").is_none_or(|k| k.by_elimination.is_none()), "{:?}", d.kept);
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:?}"
    );
}

/// GPU 3 (job 1001's, minor 0) in MIG mode: nvidia-smi's `mig.mode.current` reads `Enabled`
/// there. Its readings are the parent's, shared by every slice's job, so the job that holds it
/// is never judged on them, and with MIG in use no job on the node is placed by Slurm's device
/// index or by elimination (review 24: a slice job without a process or a MIG gres type was
/// placed on the parent, drained and cancelled). The same run without MIG mode drains it (the
/// test above).
#[test]
fn a_gpu_in_mig_mode_places_and_judges_no_job_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), squeue("gpu:2(IDX:2-3)", "gpu:1(IDX:0)"), "ok");
    std::fs::write(dir.path().join("gpus.txt"), GPUS.replace("400 0\n", "400 0 Enabled\n")).unwrap();
    d.cycle(T0 - 60);
    let first = cycle_with_short_job_999(&mut d, &c, dir.path());
    assert!(first.placed_by_device_index.is_empty(), "{first:?}");
    assert!(!d.kept.contains_key("1001"), "{:?}", d.kept);
    let worst = worst_verdicts(&mut d, 1, 70);
    assert_eq!(worst.get("1000"), Some(&Verdict::Healthy), "{worst:?}");
    assert_eq!(worst.get("1001"), None, "never judged: {worst:?}");
    let calls = c.borrow().calls.clone();
    assert!(
        !calls.iter().any(|c| c.starts_with("drain") || c.starts_with("scancel")),
        "{calls:?}"
    );
    let argv = std::fs::read(dir.path().join("nvidia-smi.argv")).unwrap();
    assert!(String::from_utf8_lossy(&argv).contains("mig.mode.current"), "MIG mode is asked for");
}

/// An nvidia-smi from before MIG refuses `mig.mode.current`: the same cycle asks without it
/// (minor numbers still read, so the device-index rule stays on), the full query is tried
/// again every 5 minutes, and the idle job is placed and drained as before.
#[test]
fn an_nvidia_smi_without_mig_modes_keeps_telemetry_and_minor_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), squeue("gpu:2(IDX:2-3)", "gpu:1(IDX:0)"), "nomig");
    let before = d.cycle(T0 - 60);
    assert_eq!(before.telemetry_no_data, None, "{before:?}");
    assert_eq!(before.device_index, DeviceIndexState::Trusted, "{before:?}");
    assert!(d.telemetry.mig_refused && !d.telemetry.minor_refused);
    let first = cycle_with_short_job_999(&mut d, &c, dir.path());
    assert_eq!(first.placed_by_device_index, ["1001"]);
    let worst = worst_verdicts(&mut d, 1, 70);
    assert!(worst.get("1001").is_some_and(|v| *v >= Verdict::Alert), "{worst:?}");
    let queries = gpu_queries(dir.path());
    // Asked again every 5 minutes, from T0 − 1 min to T0 + 70 min: 15 times.
    assert_eq!(
        queries.iter().filter(|q| q.contains("mig.mode.current")).count(),
        15,
        "asked every 5 minutes: {queries:?}"
    );
    assert!(queries.iter().all(|q| q.contains("minor_number")), "{queries:?}");
    assert!(c.borrow().calls.iter().any(|c| c.starts_with("drain")));
}
