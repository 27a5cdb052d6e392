//! End to end: a GPU drops out of enumeration and nvidia-smi renumbers the GPUs after it
//! (operator trial 5, finding 2). The daemon runs in process with the repository's fake
//! `nvidia-smi` (`tests/fakes`), a fake /proc and the real executor against a fake Slurm.
//!
//! Five GPUs: job 101 busy on GPU-A and GPU-B (indices 0-1, its processes), job 102 idle on
//! GPU-C and GPU-D (indices 2-3, no process: placed by elimination), job 103 busy on GPU-E
//! (index 4). Then GPU-B falls off the bus: C, D and E become indices 1, 2 and 3. Keyed by
//! index, job 101 would be kept on A and C (job 102's idle GPU: `alert partial`, its means
//! mixed from two physical GPUs) and job 102 on D and E (job 103's). Keyed by UUID, job 101
//! has lost a GPU and is not judged (its placement cannot be re-derived with a GPU missing),
//! job 102 goes on being judged idle on C and D, and job 103 stays healthy on E.

mod common;

use common::cluster::{cluster, config_with, job, real_executor, Cluster, FakeSlurm, NODE, POLICY, T0};
use enforcer::attribution::ProcReader;
use enforcer::daemon::{CycleReport, Daemon};
use enforcer::executor::RealExecutor;
use enforcer::telemetry::NvidiaSmi;
use policy::Verdict;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

type SmiDaemon = Daemon<FakeSlurm, NvidiaSmi, RealExecutor<FakeSlurm>>;

const A: &str = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const B: &str = "GPU-bbbbbbbb-0000-0000-0000-000000000000";
const C: &str = "GPU-cccccccc-0000-0000-0000-000000000000";
const D: &str = "GPU-dddddddd-0000-0000-0000-000000000000";
const E: &str = "GPU-eeeeeeee-0000-0000-0000-000000000000";

/// `gpus.txt` rows (index uuid util jitter mem_used mem_total power power_limit) for `uuids`
/// listed in this order: A, B and E busy, C and D idle with 3 MiB in memory.
fn gpus_txt(uuids: &[&str]) -> String {
    uuids
        .iter()
        .enumerate()
        .map(|(i, u)| match *u {
            C | D => format!("{i} {u} 0 0 3 81920 55 400\n"),
            _ => format!("{i} {u} 90 5 30000 81920 300 400\n"),
        })
        .collect()
}

/// Compute apps: job 101 (PID 1001) on A and B, job 103 (PID 1003) on E. After B is gone
/// nvidia-smi still lists job 101's process there (the row names a GPU no longer listed).
const APPS: &str = "\
GPU-aaaaaaaa-0000-0000-0000-000000000000, 1001, 30000
GPU-bbbbbbbb-0000-0000-0000-000000000000, 1001, 30000
GPU-eeeeeeee-0000-0000-0000-000000000000, 1003, 30000
";

struct Procs;
impl ProcReader for Procs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        let job = match pid {
            1001 => 101,
            1003 => 103,
            _ => return None,
        };
        Some(format!("0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n"))
    }
}

/// Writes the fake's inputs for `uuids` and returns the fake nvidia-smi.
fn fake_smi(dir: &Path, uuids: &[&str]) -> NvidiaSmi {
    std::fs::write(dir.join("gpus.txt"), gpus_txt(uuids)).unwrap();
    std::fs::write(dir.join("apps.csv"), APPS).unwrap();
    common::fake_nvidia_smi(dir)
}

fn daemon(dir: &Path, uuids: &[&str]) -> (SmiDaemon, Rc<RefCell<Cluster>>) {
    let c = cluster(vec![
        job("101", 101, 2, &[NODE]),
        job("102", 102, 2, &[NODE]),
        job("103", 103, 1, &[NODE]),
    ]);
    let d = Daemon::new(
        config_with(POLICY, &dir.join("state"), "enforce", ""),
        FakeSlurm(c.clone()),
        fake_smi(dir, uuids),
        real_executor(&c),
        Box::new(Procs),
        T0,
    );
    (d, c)
}

/// Runs cycles `from..from + n` (minutes after T0) and returns their reports.
fn run(d: &mut SmiDaemon, from: i64, n: i64) -> Vec<CycleReport> {
    (from..from + n).map(|m| d.cycle(T0 + m * 60)).collect()
}

/// Each job's findings over `reps`, in order: (verdict, signature).
fn per_job(reps: &[CycleReport]) -> BTreeMap<String, Vec<(Verdict, &'static str)>> {
    let mut out: BTreeMap<String, Vec<(Verdict, &'static str)>> = BTreeMap::new();
    for r in reps {
        for f in &r.findings {
            out.entry(f.job_id.clone()).or_default().push((f.verdict, f.signature));
        }
    }
    out
}

fn audit(dir: &Path) -> Vec<serde_json::Value> {
    common::audit(&dir.join("state"))
}

/// Before the shift: jobs placed, job 102 alerted idle, the others healthy.
fn before_the_shift(d: &mut SmiDaemon) {
    let j = per_job(&run(d, 0, 20));
    assert!(j["101"].iter().all(|(v, _)| *v == Verdict::Healthy), "{j:?}");
    assert!(j["103"].iter().all(|(v, _)| *v == Verdict::Healthy), "{j:?}");
    assert_eq!(j["102"].last(), Some(&(Verdict::Alert, "idle")), "{j:?}");
    assert_eq!(d.kept["102"].uuids, [C, D]);
    assert_eq!(d.kept["101"].uuids, [A, B]);
}

/// After the shift: job 101 is never judged (so never alerted), job 102 is judged idle in
/// every cycle on its own GPUs, up to a drain naming it alone, whose evidence holds only the
/// idle GPUs' memory; job 103 stays healthy.
fn after_the_shift(dir: &Path, d: &mut SmiDaemon, c: &Rc<RefCell<Cluster>>, from: i64) {
    let reps = run(d, from, 40);
    let j = per_job(&reps);
    assert_eq!(j.get("101"), None, "job 101 judged with a GPU gone: {j:?}");
    assert!(reps.iter().all(|r| r.ambiguous.contains(&"101".to_string())), "{:?}", reps[0]);
    assert_eq!(j["102"].len(), 40, "job 102 judged every cycle: {j:?}");
    assert!(j["102"].iter().all(|(v, s)| *v >= Verdict::Alert && *s == "idle"), "{j:?}");
    assert!(j["103"].iter().all(|(v, _)| *v == Verdict::Healthy), "{j:?}");
    assert_eq!(d.kept["102"].gpus, [1, 2], "C and D at their new indices");
    assert_eq!(d.kept["102"].uuids, [C, D]);
    assert_eq!(d.kept["103"].uuids, [E]);
    let calls = c.borrow().calls.clone();
    let drains: Vec<&String> = calls.iter().filter(|c| c.starts_with("drain")).collect();
    assert!(!drains.is_empty() && drains.iter().all(|c| c.contains("job 102")), "{calls:?}");
    let audit = audit(dir);
    assert!(
        !audit.iter().any(|a| a["job_id"] == "101" && a["action"] == "alert"),
        "the busy job was alerted: {audit:?}"
    );
    let drain = audit
        .iter()
        .find(|a| a["record"] == "action" && a["action"] == "drain")
        .expect("a drain record");
    assert_eq!(drain["job_id"], "102");
    assert!(drain["evidence"]["mem_used_mean_mib"].as_f64().is_some_and(|m| m <= 3.0), "{drain}");
}

/// A state dir left by a daemon that ran [`before_the_shift`] and stopped.
fn stopped_after_the_first_twenty_minutes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, _) = daemon(dir.path(), &[A, B, C, D, E]);
    before_the_shift(&mut d);
    dir
}

#[test]
fn a_gpu_dropping_out_never_puts_a_job_on_another_jobs_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, c) = daemon(dir.path(), &[A, B, C, D, E]);
    before_the_shift(&mut d);
    std::fs::write(dir.path().join("gpus.txt"), gpus_txt(&[A, C, D, E])).unwrap();
    after_the_shift(dir.path(), &mut d, &c, 20);
}

/// The same shift while the daemon is stopped: the state file's UUIDs and slots route each
/// GPU's samples back into its own windows, so job 102 is alerted in the first cycle after
/// the restart (its windows restored, not restarted from empty).
#[test]
fn a_restart_across_the_shift_keeps_each_gpu_its_windows() {
    let dir = stopped_after_the_first_twenty_minutes();
    let (mut d, c) = daemon(dir.path(), &[A, C, D, E]);
    let first = d.cycle(T0 + 20 * 60);
    let f102 = first.findings.iter().find(|f| f.job_id == "102").expect("job 102 judged");
    assert_eq!((f102.verdict, f102.signature), (Verdict::Alert, "idle"), "{first:?}");
    after_the_shift(dir.path(), &mut d, &c, 21);
}

/// A state file written before GPUs were keyed by UUID (kept GPUs without UUIDs, no slots):
/// nothing of it is trusted for GPUs; the kept placements are derived afresh and the windows
/// start empty, so no job is judged on evidence gathered under another numbering.
#[test]
fn an_older_state_file_is_not_trusted_for_gpus() {
    let dir = stopped_after_the_first_twenty_minutes();
    let path = dir.path().join("state/state.json");
    let mut s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    s.as_object_mut().unwrap().remove("gpu_slots");
    for k in s["attribution"].as_object_mut().unwrap().values_mut() {
        k.as_object_mut().unwrap().remove("uuids");
    }
    std::fs::write(&path, s.to_string()).unwrap();
    let (mut d, _) = daemon(dir.path(), &[A, C, D, E]);
    assert!(d.kept.values().all(|k| k.uuids.is_empty()));
    let first = d.cycle(T0 + 20 * 60);
    assert!(first.findings.iter().all(|f| f.verdict < Verdict::Alert), "{first:?}");
    assert!(first.ambiguous.contains(&"101".to_string()), "{first:?}");
    assert!(d.gpu_slots.slot(E).is_some() && d.kept.values().all(|k| !k.uuids.is_empty()));
}

/// A GPU row without a UUID is no evidence: no sample, no placement through it, counted,
/// and the GPU list is not whole. Here C's UUID reads `[N/A]`: job 102, kept on C and D, is
/// not judged on D alone nor on whatever index 2 names.
#[test]
fn a_gpu_without_a_uuid_is_no_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, _) = daemon(dir.path(), &[A, B, C, D, E]);
    before_the_shift(&mut d);
    let text = gpus_txt(&[A, B, C, D, E]).replace(C, "[N/A]");
    std::fs::write(dir.path().join("gpus.txt"), text).unwrap();
    let reps = run(&mut d, 20, 3);
    let j = per_job(&reps);
    assert_eq!(j.get("102"), None, "{j:?}");
    assert!(j["101"].iter().all(|(v, _)| *v == Verdict::Healthy), "{j:?}");
    assert_eq!(
        d.metrics.read_errors.get(&("nvidia-smi".to_string(), "no_uuid".to_string())),
        Some(&3)
    );
}
