//! The ninth adversarial review, enforcer side: attribution rule 3 ("by Slurm's device index")
//! and its pinning. Each test that was ignored failed on the enforcer as reviewed and showed
//! one finding; all three pass since rule 3 places only on a whole read (no GPU missing, no
//! squeue row unread). The others pass and are kept for the coverage they add.
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
//! * `a_gpu_lost_for_good_resets_the_device_index_record`: the record resets only on a
//!   *whole* read showing another GPU set, and with a GPU gone for good no read is ever whole
//!   (fewer GPUs than the node has shown), so pins learnt under Slurm's old numbering outlive
//!   a slurmd restart that renumbered the remaining GPUs: a busy job is placed on another
//!   job's idle GPU, drained and cancelled. (Taking the atoms over the recorded set would not
//!   fix this one: the stale pins themselves are wrong.)
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

/// PIDs 100 and 101 are job 10's, PID 102 is job 20's; PID 999 (job 30's, later job 50's)
/// does not exist in this /proc.
struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        let job = match pid {
            100 | 101 => 10,
            102 => 20,
            _ => return None,
        };
        Some(format!("0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n"))
    }
}

/// What the node shows, shared between a test and [`Node`].
#[derive(Clone)]
struct Shown {
    /// A GPU nvidia-smi leaves out of its list.
    hide: Option<u16>,
    /// Per GPU: busy (95 %, 40 GB, 300 W) or idle (0 %, 3 MiB, 55 W).
    busy: [bool; 4],
    /// Compute processes: (GPU, PID).
    apps: Vec<(u16, u32)>,
}

impl Default for Shown {
    /// GPUs 0 and 1 (job 10, PIDs 100 and 101) and 2 (job 30, hidden PID 999) busy, GPU 3
    /// free and idle.
    fn default() -> Self {
        Shown {
            hide: None,
            busy: [true, true, true, false],
            apps: vec![(0, 100), (1, 101), (2, 999)],
        }
    }
}

/// GPU `i` of the node: index = minor = `i`, busy or idle. Power moves a little every cycle,
/// so nothing looks frozen.
fn gpu(i: u16, busy: bool, cycle: u32) -> GpuReading {
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

impl Shown {
    fn gpus(&self, cycle: u32) -> Vec<GpuReading> {
        (0..4)
            .filter(|i| Some(*i) != self.hide)
            .map(|i| gpu(i, self.busy[i as usize], cycle))
            .collect()
    }

    fn apps(&self) -> AppsTable {
        let app = |&(g, pid): &(u16, u32)| ComputeApp {
            gpu_uuid: Some(format!("GPU-{g}")),
            pid: Some(pid),
            used_memory_mib: Some(40_000.0),
            process_name: None,
        };
        AppsTable {
            columns: vec!["gpu_uuid".into(), "pid".into(), "used_memory".into()],
            apps: self.apps.iter().map(app).collect(),
            row_errors: Vec::new(),
        }
    }
}

/// The node's telemetry, as [`Shown`] says.
struct Node {
    shown: Rc<RefCell<Shown>>,
    cycle: u32,
}

impl Telemetry for Node {
    fn read(&mut self, _now_s: i64) -> TelemetryRead {
        self.cycle += 1;
        let s = self.shown.borrow();
        TelemetryRead {
            gpus: s.gpus(self.cycle),
            apps: Some(s.apps()),
            ..Default::default()
        }
    }
}

/// A one-GPU-per-index job `id` on [`NODE`] holding `idx.len()` GPUs with those Slurm device
/// indices.
fn idx_job(id: u64, idx: &[u32]) -> SlurmJob {
    let mut j = job(&id.to_string(), id, idx.len() as u32, &[NODE]);
    j.gres_idx = vec![Some(idx.to_vec())];
    j
}

/// Job 10 (2 GPUs, `IDX:0-1`) and job 30 (1 GPU, `IDX:3`), both on [`NODE`].
fn jobs() -> Vec<SlurmJob> {
    vec![idx_job(10, &[0, 1]), idx_job(30, &[3])]
}

type NodeDaemon = Daemon<FakeSlurm, Node, RealExecutor<FakeSlurm>>;

fn daemon(dir: &std::path::Path) -> (NodeDaemon, Rc<RefCell<Cluster>>, Rc<RefCell<Shown>>) {
    let c = cluster(jobs());
    let shown = Rc::new(RefCell::new(Shown::default()));
    let d = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            shown: shown.clone(),
            cycle: 0,
        },
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    (d, c, shown)
}

/// The Slurm calls that name job `id`: a drain for it, or its cancel.
fn acted_on(c: &Rc<RefCell<Cluster>>, id: &str) -> Vec<String> {
    let calls = c.borrow().calls.clone();
    calls
        .into_iter()
        .filter(|c| *c == format!("scancel {id}") || (c.starts_with("drain") && c.ends_with(&format!("job {id}"))))
        .collect()
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
    assert!(acted_on(&c, "30").is_empty(), "{:?}", c.borrow().calls);
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
fn a_gpu_missing_from_the_list_does_not_pin_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c, shown) = daemon(dir.path());
    let first = d.cycle(T0);
    assert!(first.placed_by_device_index.is_empty(), "{first:?}");
    assert_eq!(d.most_gpus_seen, 4);
    shown.borrow_mut().hide = Some(2);
    let missing = d.cycle(T0 + 60);
    shown.borrow_mut().hide = None;
    let worst = worst_verdicts(&mut d, 2, 100);
    let acted = acted_on(&c, "30");
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
fn one_pass_with_a_gpu_missing_places_an_unpinned_index() {
    let jobs = jobs();
    let on_node: Vec<&SlurmJob> = jobs.iter().collect();
    let mut trust = DeviceIndexTrust::default();
    let mut shown = Shown::default();
    let mut pass = |shown: &Shown, complete: bool| {
        attribution::attribute(
            &on_node,
            &shown.gpus(0),
            Some(&shown.apps()),
            &Procs,
            complete,
            &KeptMap::new(),
            &mut trust,
        )
    };
    let r = pass(&shown, true);
    assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)), "{r:?}");
    shown.hide = Some(2);
    let r = pass(&shown, false);
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

/// A GPU lost for good never resets the record, though README promises a reset when "a whole
/// read of the node's GPUs shows another set of UUIDs and minor numbers (a GPU replaced,
/// added or removed ...)": with one GPU gone every later read lists fewer GPUs than the node
/// has shown, so no read is ever whole, and the pins learnt under the old Slurm numbering
/// stay in force.
///
/// Here jobs 10 (`IDX:0-1`) and 20 (`IDX:2`) pin every GPU while the node has four (gres.conf
/// in minor order). Then GPU 1 falls off the bus for good; the operator restarts slurmd so
/// the node carries on with three GPUs, and Slurm numbers them afresh: index 0 is minor 0,
/// index 1 minor 2, index 2 minor 3. Job 50 (`IDX:2`, so GPU 3) works with its process hidden;
/// job 40 (`IDX:1`, GPU 2) holds its GPU and runs nothing. The old pins place job 50 on minor
/// 2's GPU, job 40's idle one, and the busy job 50 is drained and cancelled as idle.
///
/// What should happen: the node's GPU set changed (a GPU removed), so the record resets and
/// the rule waits for a new confirmation (or stays off while GPUs are missing); job 50 is
/// never placed by device index, and no drain or cancel names it. Fixed the second way: the
/// rule places only on a whole read, and a node short of a GPU it has shown never has one.
#[test]
fn a_gpu_lost_for_good_stops_placement_by_device_index() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c, shown) = daemon(dir.path());
    c.borrow_mut().jobs = vec![idx_job(10, &[0, 1]), idx_job(20, &[2])];
    shown.borrow_mut().apps = vec![(0, 100), (1, 101), (2, 102)];
    worst_verdicts(&mut d, 0, 3);
    assert!(d.device_index.pinned.contains(&vec![0, 1]) && d.device_index.pinned.contains(&vec![2]));
    let before = d.device_index.gpus.clone();
    assert_eq!(before.len(), 4);
    // GPU 1 gone for good; Slurm renumbered; jobs 40 (idle) and 50 (busy, hidden) run.
    c.borrow_mut().jobs = vec![idx_job(40, &[1]), idx_job(50, &[2])];
    *shown.borrow_mut() = Shown {
        hide: Some(1),
        busy: [false, false, false, true],
        apps: vec![(3, 999)],
    };
    let worst = worst_verdicts(&mut d, 3, 100);
    let acted = acted_on(&c, "50");
    assert!(
        !worst.contains_key("50") && acted.is_empty(),
        "record reset: {}; kept for job 50: {:?}; worst verdicts: {worst:?}; Slurm calls naming job 50: {acted:?}",
        d.device_index.gpus != before,
        d.kept.get("50"),
    );
}

// Second operator trial (trial 6), finding 1: a job placed by elimination on a free GPU while
// its own GPU was not listed, then cancelled.

/// GPU 3 is hidden from nvidia-smi from the daemon's first cycle on (a device cgroup, a GPU
/// off the bus): the node has only ever shown 3 GPUs. Job 10 (`IDX:0-1`) works on GPUs 0 and
/// 1 with its processes; job 40 holds GPU 3 (`IDX:3`) and works there, unseen. The counts add
/// up (2 + 1 = 3 listed), so elimination used to place job 40 on GPU 2, a free idle GPU, and
/// the busy job was drained and cancelled. Slurm's device index names a minor number nvidia-smi
/// does not list: the list is not whole, and job 40 is never placed.
#[test]
fn a_device_index_naming_an_unlisted_gpu_stops_elimination() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c, shown) = daemon(dir.path());
    c.borrow_mut().jobs = vec![idx_job(10, &[0, 1]), idx_job(40, &[3])];
    *shown.borrow_mut() = Shown {
        hide: Some(3),
        busy: [true, true, false, true],
        apps: vec![(0, 100), (1, 101)],
    };
    let worst = worst_verdicts(&mut d, 0, 100);
    assert_eq!(worst.get("40"), None, "job 40 was judged on a GPU not its own: {worst:?}");
    assert!(acted_on(&c, "40").is_empty(), "{:?}", c.borrow().calls);
    assert!(!d.kept.contains_key("40"));
}

/// The same node read through squeue's `--Format` (no device indices): `scontrol show node`
/// says `Gres=gpu:4`, and a list of 3 GPUs is not whole, so elimination does not run either.
/// Control: without the `Gres=` line the old rule places job 40 on the free GPU (the test
/// tells the two apart).
#[test]
fn fewer_gpus_listed_than_slurm_configures_stops_elimination() {
    for (gres, placed) in [(Some("gpu:4(S:0-1)"), false), (None, true)] {
        let dir = tempfile::tempdir().unwrap();
        let (mut d, c, shown) = daemon(dir.path());
        let mut j40 = job("40", 40, 1, &[NODE]);
        j40.gres_idx.clear();
        c.borrow_mut().jobs = vec![job("10", 10, 2, &[NODE]), j40];
        c.borrow_mut().node_gres = gres.map(str::to_string);
        *shown.borrow_mut() = Shown {
            hide: Some(3),
            busy: [true, true, false, true],
            apps: vec![(0, 100), (1, 101)],
        };
        let _ = worst_verdicts(&mut d, 0, 3);
        assert_eq!(d.kept.contains_key("40"), placed, "Gres {gres:?}: {:?}", d.kept);
        if gres.is_some() {
            assert_eq!(d.slurm_gpus, Some(4));
        }
    }
}
