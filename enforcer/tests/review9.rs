//! The ninth adversarial review, enforcer side: attribution rule 3 ("by Slurm's device index")
//! and its pinning. Each ignored test fails on the enforcer as reviewed and shows one finding;
//! the others pass and are kept for the coverage they add.
//!
//! The node in every test has 4 GPUs whose nvidia-smi index equals their minor number, and a
//! `gres.conf` that lists its devices out of minor order, the case pinning exists for:
//! Slurm's index 2 is `/dev/nvidia3` and index 3 is `/dev/nvidia2`. Job 10 (`IDX:0-1`) runs
//! visible processes on GPUs 0 and 1: it confirms the mapping and pins {0,1}, so {2,3} too,
//! but never index 2 or 3 alone. Job 30 (`IDX:3`, so really GPU 2) is busy, its process
//! hidden from this daemon (a PID that /proc here does not show: another PID namespace).
//! GPU 3 (Slurm's index 2) is free and idle.
//!
//! * `a_gpu_missing_from_the_list_does_not_pin_the_others`: `union_of_atoms` cuts the
//!   minor numbers nvidia-smi listed *this pass* into atoms, not the node's recorded GPU set.
//!   In a pass where one GPU is missing from the list (the daemon's own `missing` case: fewer
//!   GPUs than the node has shown), the complement of a pinned set loses that GPU, and an
//!   index list that was not pinned down becomes a "union of atoms". Job 30 is then placed on
//!   GPU 3, which is not its own; the placement is kept once the GPU is back, and the busy
//!   job is judged on the free GPU: idle, drained and cancelled.
//! * Passing: the same node with every GPU listed never places job 30 (the pinning guard
//!   itself holds), and a state file written before the device-index rule existed (no
//!   `device_index` key, kept attributions without `by_device_index`) loads with the rule
//!   waiting for confirmation and the kept attributions in place.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, worst_verdicts, Cluster, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::{self, Attributed, DeviceIndexTrust, KeptMap, ProcReader};
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
use enforcer::parse::SlurmJob;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use policy::Verdict;
use std::cell::RefCell;
use std::rc::Rc;

/// PIDs 100 and 101 are job 10's; PID 999 (job 30's) does not exist in this /proc.
struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 100 | 101).then(|| "0::/system.slice/slurmstepd.scope/job_10/step_0/user/task_0\n".to_string())
    }
}

/// GPU `i` of the node: index = minor = `i`. GPUs 0 and 1 (job 10) and 2 (job 30) busy,
/// GPU 3 free and idle. Power moves a little every cycle, so nothing looks frozen.
fn gpu(i: u16, cycle: u32) -> GpuReading {
    let busy = i < 3;
    GpuReading {
        index: Some(i),
        uuid: Some(format!("GPU-{i}")),
        util_pct: Some(if busy { 95.0 } else { 0.0 }),
        mem_used_mib: Some(if busy { 40_000.0 } else { 3.0 }),
        mem_total_mib: Some(81_920.0),
        power_w: Some(if busy { 300.0 } else { 55.0 } + (cycle % 3) as f64),
        power_limit_w: Some(400.0),
        minor: Some(u32::from(i)),
        ..Default::default()
    }
}

/// Compute processes: job 10's on GPUs 0 and 1, job 30's (hidden PID) on GPU 2.
fn apps() -> AppsTable {
    let app = |uuid: &str, pid: u32| ComputeApp {
        gpu_uuid: Some(uuid.into()),
        pid: Some(pid),
        used_memory_mib: Some(40_000.0),
        process_name: None,
    };
    AppsTable {
        columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
        apps: vec![app("GPU-0", 100), app("GPU-1", 101), app("GPU-2", 999)],
        row_errors: Vec::new(),
    }
}

/// The node's telemetry; `hide` (shared with the test) names a GPU nvidia-smi leaves out.
struct Node {
    hide: Hidden,
    cycle: u32,
}

impl Telemetry for Node {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.cycle += 1;
        let hide = *self.hide.borrow();
        TelemetryRead {
            gpus: (0..4).filter(|i| Some(*i) != hide).map(|i| gpu(i, self.cycle)).collect(),
            apps: Some(apps()),
            ..Default::default()
        }
    }
}

/// Job 10 (2 GPUs, `IDX:0-1`) and job 30 (1 GPU, `IDX:3`), both on [`NODE`].
fn jobs() -> Vec<SlurmJob> {
    let mut a = job("10", 10, 2, &[NODE]);
    a.gres_idx = vec![Some(vec![0, 1])];
    let mut b = job("30", 30, 1, &[NODE]);
    b.gres_idx = vec![Some(vec![3])];
    vec![a, b]
}

type NodeDaemon = Daemon<FakeSlurm, Node, RealExecutor<FakeSlurm>>;
/// Which GPU nvidia-smi leaves out, shared between the test and [`Node`].
type Hidden = Rc<RefCell<Option<u16>>>;

fn daemon(dir: &std::path::Path) -> (NodeDaemon, Rc<RefCell<Cluster>>, Hidden) {
    let c = cluster(jobs());
    let hide = Rc::new(RefCell::new(None));
    let d = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            hide: hide.clone(),
            cycle: 0,
        },
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    (d, c, hide)
}

/// Control: with every GPU listed, job 30's `IDX:3` is never pinned down (index 3 could be
/// minor 2's device, and it is), so job 30 is never placed, never judged, never drained.
#[test]
fn an_index_not_pinned_down_is_never_used_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c, _) = daemon(dir.path());
    let worst = worst_verdicts(&mut d, 0, 100);
    assert_eq!(worst.get("10"), Some(&Verdict::Healthy), "{worst:?}");
    assert_eq!(worst.get("30"), None, "job 30 was judged: {worst:?}");
    assert_eq!(d.device_index.pinned, [vec![0, 1]]);
    assert!(d.device_index.confirmed.is_some() && d.device_index.contradicted.is_none());
    assert!(!c.borrow().calls.iter().any(|c| c.contains("30")), "{:?}", c.borrow().calls);
}

/// See the module doc. One cycle in which nvidia-smi leaves GPU 2 out (job 30's real GPU: a
/// transient NVML hiccup, a GPU being reset) is enough: the atoms of that pass are {0,1} and
/// {3}, so `IDX:3` counts as pinned down and job 30 is placed on GPU 3 (minor 3, Slurm's index
/// 2), a free GPU. The placement is kept by rule 1 after GPU 2 is back (job 30's process stays
/// hidden, and its index list still maps to GPU 3, so nothing contradicts it), and the busy
/// job is alerted, drained and cancelled as idle on a GPU that is not its own.
///
/// What should happen: an index list is pinned down only against the node's whole GPU set
/// (the recorded [`DeviceIndexTrust::gpus`], or no placement while GPUs are missing); job 30 is
/// never placed, and no drain or cancel names it.
#[test]
#[ignore = "review9: a GPU missing from one nvidia-smi read shrinks the atoms, so an unpinned index places a busy job on a free GPU, then cancels it"]
fn a_gpu_missing_from_the_list_does_not_pin_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c, hide) = daemon(dir.path());
    let first = d.cycle(T0);
    assert!(first.placed_by_device_index.is_empty(), "{first:?}");
    assert_eq!(d.most_gpus_seen, 4);
    *hide.borrow_mut() = Some(2);
    let missing = d.cycle(T0 + 60);
    *hide.borrow_mut() = None;
    let worst = worst_verdicts(&mut d, 2, 100);
    let calls = c.borrow().calls.clone();
    let acted: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with("scancel 30") || (c.starts_with("drain") && c.contains("job 30")))
        .collect();
    assert!(
        missing.placed_by_device_index.is_empty() && !worst.contains_key("30") && acted.is_empty(),
        "placed by device index in the cycle with GPU 2 missing: {:?}; kept: {:?}; worst verdicts: {worst:?}; Slurm calls naming job 30: {acted:?}",
        missing.placed_by_device_index,
        d.kept.get("30"),
    );
}

/// The same hole at the level of one attribution pass, with nothing else in play: the pass
/// that lists GPUs 0, 1 and 3 (GPU 2 missing, `complete` false as the daemon passes it) places
/// job 30 on GPU 3 although `IDX:3` was not pinned down.
#[test]
#[ignore = "review9: union_of_atoms is taken over the minors listed this pass, so a missing GPU makes an unpinned index list usable"]
fn one_pass_with_a_gpu_missing_places_an_unpinned_index() {
    let jobs = jobs();
    let on_node: Vec<&SlurmJob> = jobs.iter().collect();
    let mut trust = DeviceIndexTrust::default();
    let all: Vec<GpuReading> = (0..4).map(|i| gpu(i, 0)).collect();
    let r = attribution::attribute(&on_node, &all, Some(&apps()), &Procs, true, &KeptMap::new(), &mut trust);
    assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)), "{r:?}");
    assert_eq!(trust.pinned, [vec![0, 1]]);
    let three: Vec<GpuReading> = [0, 1, 3].into_iter().map(|i| gpu(i, 1)).collect();
    let r = attribution::attribute(&on_node, &three, Some(&apps()), &Procs, false, &KeptMap::new(), &mut trust);
    assert!(
        matches!(r.jobs["30"], Attributed::Ambiguous(_)),
        "job 30 (IDX:3, not pinned down) placed with GPU 2 missing: {:?}",
        r.jobs["30"]
    );
}

/// A state file written before the device-index rule (no `device_index` key; kept
/// attributions without `by_device_index`) loads: the kept attribution is in place, not
/// marked as the device index's, and the rule waits for a confirmation.
#[test]
fn a_state_file_from_before_the_device_index_rule_loads() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, _, _) = daemon(dir.path());
    d.cycle(T0);
    drop(d);
    let path = dir.path().join("state/state.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    assert!(o.remove("device_index").is_some(), "{o:?}");
    for k in o["attribution"].as_object_mut().unwrap().values_mut() {
        k.as_object_mut().unwrap().remove("by_device_index");
    }
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let (d, _, _) = daemon(dir.path());
    assert_eq!(d.device_index, DeviceIndexTrust::default());
    assert_eq!(
        d.kept.get("10").map(|k| (k.gpus.clone(), k.by_device_index)),
        Some((vec![0, 1], false))
    );
}
