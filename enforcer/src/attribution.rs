//! Which of this node's GPUs belong to which job.
//!
//! Three rules, in order; none of them guesses:
//! 1. **Kept.** An attribution made earlier for a job is kept while the same run of the job
//!    goes on: it is keyed by job id *and* start time, so a requeued job (same id, new start
//!    time) starts afresh. It is dropped and the job re-derived by the other rules when one of
//!    the job's own processes shows on a GPU outside it (the job moved or grew), and the job is
//!    ambiguous when a process of another job shows on one of its GPUs. This keeps the
//!    engine's allocation stable while an idle job's processes come and go.
//! 2. **By process.** nvidia-smi compute-app PIDs → `/proc/PID/cgroup` → job (`job_<id>` or
//!    a Slurm 26.05 SLUID). A job whose processes sit on exactly as many GPUs as it holds on
//!    this node, and on no GPU shared with another job, gets those GPUs.
//! 3. **By node.** When the job set on the node is known completely: the only GPU job on a
//!    node that holds every visible GPU gets them all; and when the jobs' GPU counts add up to
//!    the visible GPUs and exactly one job is still short, it gets its own GPUs plus every GPU
//!    no process claims.
//!
//! Anything else is ambiguous: the job is skipped this cycle and counted.

use crate::parse::cgroup::{self, CgroupJob};
use crate::parse::smi::{AppsTable, GpuReading};
use crate::parse::SlurmJob;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Reads `/proc/PID/cgroup` (or a synthetic tree in tests).
pub trait ProcReader {
    /// The cgroup file's text, or `None` when the PID does not exist here (another PID
    /// namespace, or it exited).
    fn cgroup(&self, pid: u32) -> Option<String>;
}

/// [`ProcReader`] over a directory laid out like `/proc`.
#[derive(Debug, Clone)]
pub struct ProcFs {
    /// Usually `/proc`.
    pub root: PathBuf,
}

impl ProcReader for ProcFs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup")).ok()
    }
}

/// The outcome for one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributed {
    /// The job's GPUs on this node (nvidia-smi indices, sorted).
    Gpus(Vec<u16>),
    /// No rule applies; the reason, for logs.
    Ambiguous(String),
}

/// The result of one attribution pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Per job id.
    pub jobs: BTreeMap<String, Attributed>,
    /// Compute processes whose PID could not be resolved to a job (not visible, not in a
    /// Slurm cgroup, or a job not on this node's list).
    pub unresolved_processes: u32,
}

/// An attribution kept from an earlier cycle for one run of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kept {
    /// The job's start time when the attribution was made, epoch seconds (squeue `StartTime`);
    /// a requeued job keeps its id but gets a new start time, and the attribution is dropped.
    pub start_s: i64,
    /// The job's GPUs on this node (nvidia-smi indices, sorted).
    pub gpus: Vec<u16>,
}

/// Kept attributions per exact job id.
pub type KeptMap = BTreeMap<String, Kept>;

/// The kept GPUs for `job` when they belong to the same run of it (same start time); `None`
/// when nothing is kept, the job has no start time, or it was requeued since.
pub fn kept_for<'a>(kept: &'a KeptMap, job: &SlurmJob) -> Option<&'a [u16]> {
    let k = kept.get(&job.job_id)?;
    (job.start_s == Some(k.start_s)).then_some(k.gpus.as_slice())
}

/// GPUs the job holds on each of its nodes: the TRES count divided evenly over its nodes;
/// `None` when it does not divide.
pub fn per_node_gpus(job: &SlurmJob) -> Option<u32> {
    let n = job.nodes.len() as u32;
    (n > 0 && job.gpus % n == 0).then(|| job.gpus / n)
}

/// Attributes this node's GPUs. `jobs` are the GPU jobs running on this node (CONFIGURING
/// ones included, since they hold GPUs too); `complete` says both the job list (no squeue
/// row error) and `gpus`, the node's GPU list (no row unread, none missing), are known to be
/// whole: elimination (rule 3) runs only then. `kept` is the previous cycle's result (used
/// only for the same run of a job, see [`kept_for`]).
pub fn attribute(
    jobs: &[&SlurmJob],
    gpus: &[GpuReading],
    apps: Option<&AppsTable>,
    proc: &dyn ProcReader,
    complete: bool,
    kept: &KeptMap,
) -> Attribution {
    let mut out = Attribution::default();
    let visible: BTreeSet<u16> = gpus.iter().filter_map(|g| g.index).collect();
    let uuid_to_index: BTreeMap<&str, u16> = gpus.iter().filter_map(|g| Some((g.uuid.as_deref()?, g.index?))).collect();

    // Process claims: GPU index -> set of job positions (usize::MAX = a job not in the list).
    let mut claims: BTreeMap<u16, BTreeSet<usize>> = BTreeMap::new();
    if let Some(apps) = apps {
        for a in &apps.apps {
            let Some(idx) = a.gpu_uuid.as_deref().and_then(|u| resolve_uuid(u, &uuid_to_index)) else {
                out.unresolved_processes += 1;
                continue;
            };
            let job = a
                .pid
                .and_then(|pid| proc.cgroup(pid))
                .and_then(|t| cgroup::parse(&t).ok().flatten());
            let pos = match job {
                Some(CgroupJob::JobId(id)) => jobs.iter().position(|j| j.raw_id == Some(id)),
                Some(CgroupJob::Sluid(s)) => jobs.iter().position(|j| j.sluid.as_deref() == Some(s.as_str())),
                None => {
                    out.unresolved_processes += 1;
                    continue;
                }
            };
            claims.entry(idx).or_default().insert(pos.unwrap_or(usize::MAX));
            if pos.is_none() {
                out.unresolved_processes += 1;
            }
        }
    }

    let mut assigned: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    let mut short: Vec<usize> = Vec::new();
    for (pos, job) in jobs.iter().enumerate() {
        let foreign = |g: &u16| claims.get(g).is_some_and(|c| c.iter().any(|p| *p != pos));
        // The job's own processes on a GPU outside the kept list: the kept list is out of date
        // (the job moved or was restarted), so it is not used and the job is derived afresh.
        let strays = |k: &[u16]| claims.iter().any(|(g, c)| c.contains(&pos) && !k.contains(g));
        if let Some(k) = kept_for(kept, job).filter(|k| !strays(k)) {
            if k.iter().all(|g| visible.contains(g)) && Some(k.len() as u32) == per_node_gpus(job) {
                if k.iter().any(foreign) {
                    out.jobs.insert(
                        job.job_id.clone(),
                        Attributed::Ambiguous("another job's process on a kept GPU".into()),
                    );
                } else {
                    assigned.insert(pos, k.to_vec());
                }
                continue;
            }
        }
        let Some(want) = per_node_gpus(job) else {
            out.jobs.insert(
                job.job_id.clone(),
                Attributed::Ambiguous("GPU count does not divide over the job's nodes".into()),
            );
            continue;
        };
        let mine: Vec<u16> = claims.iter().filter(|(_, c)| c.contains(&pos)).map(|(g, _)| *g).collect();
        if mine.iter().any(foreign) {
            out.jobs
                .insert(job.job_id.clone(), Attributed::Ambiguous("a GPU is shared with another job".into()));
            continue;
        }
        if mine.len() as u32 == want && want > 0 {
            assigned.insert(pos, mine);
        } else if mine.len() as u32 > want {
            out.jobs.insert(
                job.job_id.clone(),
                Attributed::Ambiguous(format!("processes on {} GPUs, job holds {want}", mine.len())),
            );
        } else {
            short.push(pos);
        }
    }

    if complete && short.len() == 1 {
        let pos = short[0];
        let job = jobs[pos];
        let want = per_node_gpus(job).unwrap_or(0) as usize;
        // A job whose count does not divide over its nodes counts as more GPUs than any node
        // has, so the total can never match (u64: no overflow, whatever the counts).
        let total: u64 = jobs.iter().map(|j| per_node_gpus(j).map_or(u64::from(u32::MAX), u64::from)).sum();
        if jobs.len() == 1 && want == visible.len() && claims.values().all(|c| c.iter().all(|p| *p == pos)) {
            // Node-exclusive: the only GPU job holds every GPU, and no process of another job
            // shows on any of them (with no process list there are no claims at all).
            assigned.insert(pos, visible.iter().copied().collect());
            short.clear();
        } else if apps.is_some() && total == visible.len() as u64 {
            let taken: BTreeSet<u16> = assigned.values().flatten().copied().collect();
            let mut mine: Vec<u16> = visible
                .iter()
                .copied()
                .filter(|g| !taken.contains(g) && claims.get(g).is_none_or(|c| c.iter().all(|p| *p == pos)))
                .collect();
            mine.sort_unstable();
            if mine.len() == want {
                assigned.insert(pos, mine);
                short.clear();
            }
        }
    }
    for pos in short {
        out.jobs.insert(
            jobs[pos].job_id.clone(),
            Attributed::Ambiguous("not enough evidence to place its GPUs".into()),
        );
    }
    for (pos, mut g) in assigned {
        g.sort_unstable();
        out.jobs.insert(jobs[pos].job_id.clone(), Attributed::Gpus(g));
    }
    out
}

/// Maps a compute-app `gpu_uuid` to a GPU index: a GPU UUID directly, or an old-style
/// `MIG-GPU-<uuid>/gi/ci` through its embedded parent. `None` for anything else (a new-style
/// `MIG-<uuid>` names no parent).
pub fn resolve_uuid(uuid: &str, map: &BTreeMap<&str, u16>) -> Option<u16> {
    if let Some(&i) = map.get(uuid) {
        return Some(i);
    }
    let parent = uuid.strip_prefix("MIG-")?.split('/').next()?;
    map.get(parent).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::smi::ComputeApp;

    struct FakeProc(BTreeMap<u32, String>);
    impl ProcReader for FakeProc {
        fn cgroup(&self, pid: u32) -> Option<String> {
            self.0.get(&pid).cloned()
        }
    }

    fn job(id: &str, raw: u64, gpus: u32, nodes: &[&str]) -> SlurmJob {
        SlurmJob {
            job_id: id.into(),
            raw_id: Some(raw),
            gpus,
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            state: "RUNNING".into(),
            start_s: Some(1000),
            ..Default::default()
        }
    }

    fn kept(rows: &[(&str, i64, &[u16])]) -> KeptMap {
        rows.iter()
            .map(|(id, start_s, g)| {
                (
                    id.to_string(),
                    Kept {
                        start_s: *start_s,
                        gpus: g.to_vec(),
                    },
                )
            })
            .collect()
    }

    fn gpus(n: u16) -> Vec<GpuReading> {
        (0..n)
            .map(|i| GpuReading {
                index: Some(i),
                uuid: Some(format!("GPU-{i}")),
                ..Default::default()
            })
            .collect()
    }

    fn apps(rows: &[(u16, u32)]) -> AppsTable {
        AppsTable {
            apps: rows
                .iter()
                .map(|(g, pid)| ComputeApp {
                    gpu_uuid: Some(format!("GPU-{g}")),
                    pid: Some(*pid),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn procs() -> FakeProc {
        FakeProc(
            [
                (100, "0::/system.slice/slurmstepd.scope/job_11/step_0/user/task_0\n".to_string()),
                (
                    200,
                    "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0\n".to_string(),
                ),
                (300, "0::/user.slice/user-1000.slice\n".to_string()),
            ]
            .into_iter()
            .collect(),
        )
    }

    #[test]
    fn by_process_legacy_and_sluid() {
        let a = job("10_1", 11, 2, &["n1"]);
        let mut b = job("20", 20, 1, &["n1"]);
        b.sluid = Some("sEKNKTV3WPV500".into());
        let r = attribute(
            &[&a, &b],
            &gpus(3),
            Some(&apps(&[(0, 100), (1, 100), (2, 200)])),
            &procs(),
            true,
            &BTreeMap::new(),
        );
        assert_eq!(r.jobs["10_1"], Attributed::Gpus(vec![0, 1]));
        assert_eq!(r.jobs["20"], Attributed::Gpus(vec![2]));
    }

    #[test]
    fn node_exclusive_and_elimination() {
        let a = job("10", 11, 4, &["n1"]);
        let r = attribute(&[&a], &gpus(4), Some(&apps(&[])), &procs(), true, &BTreeMap::new());
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1, 2, 3]));
        // The only job, but it holds 2 of 4 GPUs and runs nothing: ambiguous.
        let a2 = job("10", 11, 2, &["n1"]);
        let r = attribute(&[&a2], &gpus(4), Some(&apps(&[])), &procs(), true, &BTreeMap::new());
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)));
        // Two jobs, 2+2 = 4 visible; job 20 idle gets the two unclaimed GPUs.
        let b = job("20", 20, 2, &["n1"]);
        let r = attribute(
            &[&a2, &b],
            &gpus(4),
            Some(&apps(&[(1, 100), (3, 100)])),
            &procs(),
            true,
            &BTreeMap::new(),
        );
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1, 3]));
        assert_eq!(r.jobs["20"], Attributed::Gpus(vec![0, 2]));
        // Same, but the job list may be incomplete: no elimination.
        let r = attribute(
            &[&a2, &b],
            &gpus(4),
            Some(&apps(&[(1, 100), (3, 100)])),
            &procs(),
            false,
            &BTreeMap::new(),
        );
        assert!(matches!(r.jobs["20"], Attributed::Ambiguous(_)));
    }

    #[test]
    fn shared_gpu_is_ambiguous_and_kept_attribution_survives_idle() {
        let a = job("10", 11, 1, &["n1"]);
        let mut b = job("20", 20, 1, &["n1"]);
        b.sluid = Some("sEKNKTV3WPV500".into());
        let r = attribute(
            &[&a, &b],
            &gpus(2),
            Some(&apps(&[(0, 100), (0, 200)])),
            &procs(),
            true,
            &BTreeMap::new(),
        );
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)));
        assert!(matches!(r.jobs["20"], Attributed::Ambiguous(_)));
        let kept = kept(&[("10", 1000, &[1])]);
        let r = attribute(&[&a], &gpus(2), Some(&apps(&[])), &procs(), false, &kept);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1]));
        let r = attribute(&[&a, &b], &gpus(2), Some(&apps(&[(1, 200)])), &procs(), false, &kept);
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)));
    }

    #[test]
    fn kept_attribution_is_for_one_run_of_the_job() {
        // Job 10 (1 GPU) was on GPU 0; it is requeued (new start time) and now idle with no
        // process: the old GPU is not reused, and with 2 GPUs visible it cannot be placed.
        let mut a = job("10", 11, 1, &["n1"]);
        let k = kept(&[("10", 1000, &[0])]);
        let r = attribute(&[&a], &gpus(2), Some(&apps(&[])), &procs(), true, &k);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0]), "same run: kept");
        a.start_s = Some(2000);
        let r = attribute(&[&a], &gpus(2), Some(&apps(&[])), &procs(), true, &k);
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
        // No start time at all: nothing kept applies either.
        a.start_s = None;
        let r = attribute(&[&a], &gpus(2), Some(&apps(&[])), &procs(), true, &k);
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
    }

    #[test]
    fn own_process_outside_kept_gpus_rederives() {
        // Same run, kept on GPU 0, but its process now runs on GPU 1: it is placed on GPU 1.
        let a = job("10", 11, 1, &["n1"]);
        let k = kept(&[("10", 1000, &[0])]);
        let r = attribute(&[&a], &gpus(2), Some(&apps(&[(1, 100)])), &procs(), true, &k);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1]));
        // A 2-GPU job kept on 0,1 with a process now on GPU 2 only: 1 of 2 GPUs placed by
        // process, and the rest cannot be derived (4 GPUs, 1 job): ambiguous, never guessed.
        let b = job("10", 11, 2, &["n1"]);
        let k = kept(&[("10", 1000, &[0, 1])]);
        let r = attribute(&[&b], &gpus(4), Some(&apps(&[(2, 100)])), &procs(), true, &k);
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
        // Its process on a kept GPU only: the kept list stands.
        let r = attribute(&[&b], &gpus(4), Some(&apps(&[(1, 100)])), &procs(), true, &k);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1]));
    }
}
