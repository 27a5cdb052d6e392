//! The tenth adversarial review, enforcer side: GPUs keyed by UUID, kept attributions
//! revalidated by UUID, the `Gres=` floor, and `per_node_gpus` with uneven `gres_detail`.
//! Each ignored test fails on the enforcer as reviewed and shows one finding.
//!
//! * `an_uneven_split_given_as_counts_is_no_per_node_count`: the trial-6 fix
//!   (`per_node_gpus` is `None` when `gres_detail` gives different counts on different nodes)
//!   looks only at index lists, and only when *every* node's string has one. A node whose
//!   GPUs have no device files prints `gpu:3(CNT:3)` (no `IDX`), and a string that cannot be
//!   read empties the whole index list; either way the job's `gres_idx` says nothing, the
//!   uneven split goes unseen, and the TRES count is split evenly again: `--gpus=4` over two
//!   nodes as 1 + 3 counts as 2 here, and elimination places the job on a free GPU that is not
//!   its own.
//! * `a_placement_made_before_the_gres_floor_is_not_kept` and
//!   `the_gres_floor_survives_a_restart`: the `Gres=` floor (fewer GPUs listed than Slurm
//!   configures is not a whole list) holds only in cycles after a successful
//!   `scontrol show node` read, and `slurm_gpus` is not in the state file. A cycle without it
//!   (the first after start or restart, its read failed) places a busy job whose GPU is hidden
//!   on a free GPU by elimination; rule 1 keeps the placement in every later cycle, the floor
//!   notwithstanding, and the busy job is drained and cancelled as idle.
//! * `a_job_whose_gpu_is_unlisted_loses_its_kept_placement`: the same root cause with Slurm's
//!   device index: once a job is kept, `unlisted_devices` naming that very job (its own
//!   `IDX` is a GPU nvidia-smi does not list) neither drops the placement nor counts as a
//!   contradiction, and the busy job is cancelled on a free GPU.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, worst_verdicts, Cluster, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::{self, Attributed, DeviceIndexTrust, KeptMap, ProcReader};
use enforcer::daemon::Daemon;
use enforcer::executor::RealExecutor;
use enforcer::parse::smi::{AppsTable, ComputeApp, GpuReading};
use enforcer::parse::SlurmJob;
use enforcer::telemetry::{Telemetry, TelemetryRead};
use std::cell::RefCell;
use std::rc::Rc;

/// PID 200 is job 802's; any other PID does not exist in this /proc (another PID namespace).
struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        (pid == 200).then(|| "0::/system.slice/slurmstepd.scope/job_802/step_0/user/task_0\n".to_string())
    }
}

/// What the node shows, shared between a test and [`Node`].
#[derive(Clone)]
struct Shown {
    /// Per GPU (index = minor = `i`, UUID `GPU-i`): busy (95 %, 40 GB, 300 W) or idle.
    busy: Vec<bool>,
    /// Compute processes: (GPU, PID).
    apps: Vec<(u16, u32)>,
    /// A GPU whose `minor_number` reads `[N/A]`.
    no_minor: Option<u16>,
}

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
        (0..self.busy.len() as u16)
            .map(|i| {
                let mut g = gpu(i, self.busy[i as usize], cycle);
                if Some(i) == self.no_minor {
                    g.minor = None;
                }
                g
            })
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

type NodeDaemon = Daemon<FakeSlurm, Node, RealExecutor<FakeSlurm>>;

fn daemon(dir: &std::path::Path, jobs: Vec<SlurmJob>, shown: Shown) -> (NodeDaemon, Rc<RefCell<Cluster>>) {
    let c = cluster(jobs);
    let d = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            shown: Rc::new(RefCell::new(shown)),
            cycle: 0,
        },
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    (d, c)
}

/// Job 801 as `squeue --json` gives it: `--gpus=4` over [`NODE`] and `gpu002`, 1 GPU here
/// and 3 there, with `gres_detail` `detail` (a JSON list).
fn job_801(detail: &str) -> SlurmJob {
    let text = format!(
        r#"{{"jobs": [{{"job_id": 801, "job_state": ["RUNNING"], "nodes": "gpu[001-002]", "user_name": "bob", "start_time": {}, "tres_alloc_str": "cpu=2,gres/gpu=4", "gres_detail": {detail}}}]}}"#,
        T0 - 7200
    );
    let r = enforcer::parse::squeue_json::parse(&text).unwrap();
    assert!(r.row_errors.is_empty(), "{detail}: {r:?}");
    let j = r.jobs[0].clone();
    assert_eq!((j.gpus, j.nodes.as_slice()), (4, &[NODE.to_string(), "gpu002".to_string()][..]));
    j
}

/// The details that say 1 GPU on this node and 3 on the other, without an index list on
/// every node: GPUs without device files (`CNT`), a mixed pair, and one whose second string
/// cannot be read (the TRES count then stands, and `gres_idx` is empty).
const UNEVEN: [&str; 3] = [
    r#"["gpu:1(CNT:1)", "gpu:3(CNT:3)"]"#,
    r#"["gpu:1(IDX:0)", "gpu:3(CNT:3)"]"#,
    r#"["gpu:1(IDX:0)", "gpu:3(IDX:0-2"]"#,
];

/// See the module doc. On [`NODE`] (3 GPUs, `Gres=gpu:3`, so the list is whole): job 801
/// holds 1 GPU (GPU 0, busy, its process hidden), job 802 holds GPU 1 (its process, PID 200,
/// visible); GPU 2 is free and idle. Split evenly, job 801 "holds" 2 GPUs here, the counts
/// add up (2 + 1 = 3 listed), and elimination places it on GPUs 0 and 2: judged on GPU 2,
/// which is not its own (an idle GPU in a busy job: a partial or idle verdict, GPU-hours
/// charged for a GPU it never had).
///
/// What should happen: as with uneven index lists, the per-node count of a job whose
/// `gres_detail` gives different counts on different nodes is unknown (`per_node_gpus` is
/// `None`), and job 801 is never placed, kept or judged.
#[test]
fn an_uneven_split_given_as_counts_is_no_per_node_count() {
    let mut failures = Vec::new();
    for detail in UNEVEN {
        let j801 = job_801(detail);
        let per_node = attribution::per_node_gpus(&j801);
        // One attribution pass.
        let j802 = job("802", 802, 1, &[NODE]);
        let shown = Shown {
            busy: vec![true, true, false],
            apps: vec![(0, 999), (1, 200)],
            no_minor: None,
        };
        let r = attribution::attribute(
            &[&j801, &j802],
            &shown.gpus(0),
            Some(&shown.apps()),
            &Procs,
            true,
            &KeptMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        // End to end.
        let dir = tempfile::tempdir().unwrap();
        let (mut d, c) = daemon(dir.path(), vec![j801.clone(), j802.clone()], shown);
        c.borrow_mut().node_gres = Some("gpu:3".into());
        let worst = worst_verdicts(&mut d, 0, 40);
        assert_eq!(d.slurm_gpus, Some(3));
        let placed = !matches!(r.jobs["801"], Attributed::Ambiguous(_));
        if per_node.is_some() || placed || d.kept.contains_key("801") || worst.contains_key("801") {
            failures.push(format!(
                "{detail}: per_node_gpus {per_node:?}; one pass: {:?}; kept: {:?}; worst verdict: {:?}",
                r.jobs["801"],
                d.kept.get("801").map(|k| &k.gpus),
                worst.get("801"),
            ));
        }
    }
    assert!(failures.is_empty(), "job 801 placed on a GPU not its own:\n{}", failures.join("\n"));
}

/// Control: index lists on both nodes are read as the fix meant: uneven (the trial-6 case)
/// gives no per-node count, even ones give 2.
#[test]
fn uneven_index_lists_are_not_split_evenly() {
    let j = job_801(r#"["gpu:1(IDX:0)", "gpu:3(IDX:0-2)"]"#);
    assert_eq!(attribution::per_node_gpus(&j), None);
    let j = job_801(r#"["gpu:2(IDX:0-1)", "gpu:2(IDX:0-1)"]"#);
    assert_eq!(attribution::per_node_gpus(&j), Some(2));
}

// The `Gres=` floor arrives too late for a placement already kept.

/// PIDs 100 and 101 are job 10's; PID 999 (job 40's) does not exist in this /proc.
struct Procs10;
impl ProcReader for Procs10 {
    fn cgroup(&self, pid: u32) -> Option<String> {
        matches!(pid, 100 | 101).then(|| "0::/system.slice/slurmstepd.scope/job_10/step_0/user/task_0\n".to_string())
    }
}

/// Node [`NODE`] with 4 GPUs of which nvidia-smi lists 0-2: GPU 3 is hidden from the daemon's
/// first cycle on (a device cgroup, a GPU off the bus; the node has only ever shown 3). Job
/// 10 works on GPUs 0 and 1 with its processes visible; job 40 (1 GPU, read through squeue's
/// `--Format`, so no device index) works on GPU 3, unseen. GPU 2 is free and idle.
/// `scontrol show node` says `Gres=gpu:4`, except in the first cycle, whose read fails (here:
/// it answers with another node's record, which the daemon treats as a failed read; a
/// timeout of slurmctld does the same). `slurm_gpus` is also not in the state file, so the
/// first cycle after every restart is in the same position when its read fails.
///
/// What happens: the first cycle has no `Gres=` floor, the 3 GPUs listed read as whole, the
/// counts add up (2 + 1 = 3), and elimination places job 40 on GPU 2, which is kept. From the
/// second cycle on the daemon knows the list is short (`slurm_gpus` = 4, "no job is placed
/// by elimination"), but the kept placement is rule 1 and stands: the busy job 40 is judged
/// on the free idle GPU 2, alerted, drained and cancelled.
///
/// What should happen: a placement made by elimination is not kept (or is dropped) once the
/// list it was made on is known not to have been whole; or elimination does not run before
/// the node's `Gres=` count has been read (kept in the state file across restarts). Job 40
/// is never judged, and no drain or cancel names it.
#[test]
fn a_placement_made_before_the_gres_floor_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut j40 = job("40", 40, 1, &[NODE]);
    j40.gres_idx.clear();
    let c = cluster(vec![job("10", 10, 2, &[NODE]), j40]);
    c.borrow_mut().node_gres = Some("gpu:4".into());
    c.borrow_mut().node_name_shown = Some("gpu999".into());
    let mut d = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            shown: Rc::new(RefCell::new(Shown {
                busy: vec![true, true, false],
                apps: vec![(0, 100), (1, 101)],
                no_minor: None,
            })),
            cycle: 0,
        },
        real_executor(&c),
        Box::new(Procs10),
        T0,
    );
    let first = worst_verdicts(&mut d, 0, 1);
    let placed_first = d.kept.get("40").map(|k| k.gpus.clone());
    c.borrow_mut().node_name_shown = None;
    let worst = worst_verdicts(&mut d, 1, 100);
    assert_eq!(d.slurm_gpus, Some(4));
    let calls = c.borrow().calls.clone();
    let acted: Vec<&String> = calls
        .iter()
        .filter(|c| *c == "scancel 40" || (c.starts_with("drain") && c.ends_with("job 40")))
        .collect();
    // Fixed the first way: a placement made while the floor was unknown is dropped once the
    // floor shows its list was short (the first cycle's watching verdict is all it got).
    assert!(
        !d.kept.contains_key("40") && !worst.contains_key("40") && acted.is_empty(),
        "job 40 placed in the first cycle on {placed_first:?} (verdict {:?}), kept on {:?}; worst verdict after: {:?}; Slurm calls naming job 40: {acted:?}",
        first.get("40"),
        d.kept.get("40").map(|k| &k.gpus),
        worst.get("40"),
    );
}

/// Control: with the first read answering, job 40 is never placed (the floor holds).
#[test]
fn with_the_gres_floor_from_the_first_cycle_nothing_is_placed() {
    let dir = tempfile::tempdir().unwrap();
    let mut j40 = job("40", 40, 1, &[NODE]);
    j40.gres_idx.clear();
    let c = cluster(vec![job("10", 10, 2, &[NODE]), j40]);
    c.borrow_mut().node_gres = Some("gpu:4".into());
    let mut d = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            shown: Rc::new(RefCell::new(Shown {
                busy: vec![true, true, false],
                apps: vec![(0, 100), (1, 101)],
                no_minor: None,
            })),
            cycle: 0,
        },
        real_executor(&c),
        Box::new(Procs10),
        T0,
    );
    let worst = worst_verdicts(&mut d, 0, 5);
    assert!(!worst.contains_key("40") && !d.kept.contains_key("40"), "{worst:?} {:?}", d.kept);
    assert_eq!(worst.get("10"), Some(&policy::Verdict::Healthy), "{worst:?}");
}

/// The same hole after a restart: 5 cycles with `Gres=gpu:4` read place nothing; the daemon
/// restarts (`slurm_gpus` is not in the state file, and `most_gpus_seen` is 3, since GPU 3
/// was hidden all along), and the first cycle's `scontrol show node` fails. Elimination
/// places the busy job 40 on the free GPU 2 and keeps it; it is drained and cancelled.
///
/// What should happen: the `Gres=` count read before the restart still counts (kept in the
/// state file, like `most_gpus_seen`), and job 40 is never judged.
#[test]
fn the_gres_floor_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut j40 = job("40", 40, 1, &[NODE]);
    j40.gres_idx.clear();
    let c = cluster(vec![job("10", 10, 2, &[NODE]), j40]);
    c.borrow_mut().node_gres = Some("gpu:4".into());
    let start = |at: i64| {
        Daemon::new(
            config_with(POLICY, &dir.path().join("state"), "enforce", ""),
            FakeSlurm(c.clone()),
            Node {
                shown: Rc::new(RefCell::new(Shown {
                    busy: vec![true, true, false],
                    apps: vec![(0, 100), (1, 101)],
                    no_minor: None,
                })),
                cycle: 0,
            },
            real_executor(&c),
            Box::new(Procs10),
            at,
        )
    };
    let mut d = start(T0);
    let before = worst_verdicts(&mut d, 0, 5);
    assert!(!before.contains_key("40") && d.slurm_gpus == Some(4), "{before:?}");
    drop(d);
    let mut d = start(T0 + 5 * 60);
    c.borrow_mut().node_name_shown = Some("gpu999".into());
    let first = worst_verdicts(&mut d, 5, 1);
    c.borrow_mut().node_name_shown = None;
    let worst = worst_verdicts(&mut d, 6, 100);
    let calls = c.borrow().calls.clone();
    let acted: Vec<&String> = calls
        .iter()
        .filter(|c| *c == "scancel 40" || (c.starts_with("drain") && c.ends_with("job 40")))
        .collect();
    assert!(
        !first.contains_key("40") && !worst.contains_key("40") && acted.is_empty(),
        "after the restart: first cycle {:?}; worst verdict after: {:?}; Slurm calls naming job 40: {acted:?}",
        first.get("40"),
        worst.get("40"),
    );
}

/// The same hole seen through Slurm's device index, where the daemon itself says the job's
/// GPU is not listed. Job 10 (`IDX:0-1`) and job 40 (`IDX:3`, busy on hidden GPU 3) on the
/// node of [`a_placement_made_before_the_gres_floor_is_not_kept`]; `scontrol show node` shows
/// no `Gres=`. In the first cycle GPU 0's `minor_number` reads `[N/A]`, so there is no minor
/// map, no `unlisted_devices` check, and elimination places job 40 on GPU 2. From the second
/// cycle on every minor number is read and `attribute` reports job 40 in `unlisted_devices`
/// ("names a GPU (minor number) that nvidia-smi does not list"), but the kept placement is
/// rule 1, and the device-index contradiction check skips it too (`mapped` is `None` when an
/// index is unlisted): the busy job is judged on GPU 2, drained and cancelled.
///
/// What should happen: a job whose own Slurm device index names an unlisted GPU is not kept
/// on listed GPUs that its index list does not name; it is never judged, never drained.
#[test]
fn a_job_whose_gpu_is_unlisted_loses_its_kept_placement() {
    let dir = tempfile::tempdir().unwrap();
    let idx_job = |id: u64, gpus: u32, idx: &[u32]| {
        let mut j = job(&id.to_string(), id, gpus, &[NODE]);
        j.gres_idx = vec![Some(idx.to_vec())];
        j
    };
    let c = cluster(vec![idx_job(10, 2, &[0, 1]), idx_job(40, 1, &[3])]);
    let shown = Rc::new(RefCell::new(Shown {
        busy: vec![true, true, false],
        apps: vec![(0, 100), (1, 101)],
        no_minor: Some(0),
    }));
    let mut d = Daemon::new(
        config_with(POLICY, &dir.path().join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        Node {
            shown: shown.clone(),
            cycle: 0,
        },
        real_executor(&c),
        Box::new(Procs10),
        T0,
    );
    worst_verdicts(&mut d, 0, 1);
    let placed_first = d.kept.get("40").map(|k| k.gpus.clone());
    shown.borrow_mut().no_minor = None;
    // The pass the daemon runs from the second cycle on reports job 40's GPU as unlisted.
    let jobs = c.borrow().jobs.clone();
    let on_node: Vec<&SlurmJob> = jobs.iter().collect();
    let s = shown.borrow().clone();
    let r = attribution::attribute(
        &on_node,
        &s.gpus(0),
        Some(&s.apps()),
        &Procs10,
        true,
        &d.kept,
        &mut d.device_index.clone(),
    );
    let worst = worst_verdicts(&mut d, 1, 100);
    let calls = c.borrow().calls.clone();
    let acted: Vec<&String> = calls
        .iter()
        .filter(|c| *c == "scancel 40" || (c.starts_with("drain") && c.ends_with("job 40")))
        .collect();
    assert!(
        !worst.contains_key("40") && acted.is_empty(),
        "placed in the first cycle on {placed_first:?}; then unlisted_devices {:?} while job 40 is {:?}; worst verdict after: {:?}; Slurm calls naming job 40: {acted:?}",
        r.unlisted_devices,
        r.jobs.get("40"),
        worst.get("40"),
    );
}
