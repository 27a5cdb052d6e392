//! Slurm jobs that run on this node's GPUs but that squeue does not list.
//!
//! A compute process whose `/proc/PID/cgroup` names a Slurm job (`job_<id>` or a SLUID) that
//! no squeue row has, in a read without row errors, is a job squeue does not show. Most
//! often squeue cannot see other users' jobs: `PrivateData=jobs` in slurm.conf, with the
//! daemon running as a user who is neither root, the SlurmUser nor a Slurm operator. Then the
//! enforcer judges nothing on the node and would say nothing of it, since no job it can see
//! holds GPUs. Processes of a job that ended and linger in its cgroup look the same for a
//! moment, so a job counts only once it has been seen so in two cycles in a row.

use crate::attribution::ProcReader;
use crate::parse::cgroup::{self, CgroupJob};
use crate::parse::smi::AppsTable;
use crate::parse::SlurmJob;
use std::collections::BTreeSet;

/// The least time between two warnings about unlisted jobs, seconds (the metric is updated
/// every cycle).
pub const WARN_EVERY_S: i64 = 600;

/// The Slurm jobs (raw job id, or SLUID) of the compute processes in `apps` (nvidia-smi
/// `--query-compute-apps`) that no job of `jobs` (squeue's whole answer, every state) is: by
/// `raw_id` against `job_<id>`, by `sluid` against a SLUID cgroup. A process whose cgroup
/// cannot be read or names no Slurm job counts for nothing here.
pub fn jobs_not_listed(apps: &AppsTable, proc: &dyn ProcReader, jobs: &[SlurmJob]) -> BTreeSet<String> {
    let raw: BTreeSet<u64> = jobs.iter().filter_map(|j| j.raw_id).collect();
    let sluids: BTreeSet<&str> = jobs.iter().filter_map(|j| j.sluid.as_deref()).collect();
    apps.apps
        .iter()
        .filter_map(|a| cgroup::parse(&proc.cgroup(a.pid?)?).ok().flatten())
        .filter_map(|j| match j {
            CgroupJob::JobId(id) => (!raw.contains(&id)).then(|| id.to_string()),
            CgroupJob::Sluid(s) => (!sluids.contains(s.as_str())).then_some(s),
        })
        .collect()
}

/// What the daemon remembers between cycles: the jobs found unlisted last cycle, and when it
/// last warned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unlisted {
    /// Jobs found unlisted in the last cycle that looked (empty after a cycle that could
    /// not look).
    pub last: BTreeSet<String>,
    /// When the last warning was logged, epoch seconds.
    pub warned_s: Option<i64>,
}

impl Unlisted {
    /// Takes this cycle's finding (`None`: the cycle could not look: squeue had row errors,
    /// or the compute-apps query gave no table) and returns the jobs unlisted in this cycle
    /// and the last one, and whether to warn now (some are, and the last warning is at least
    /// [`WARN_EVERY_S`] old).
    pub fn observe(&mut self, now_s: i64, found: Option<BTreeSet<String>>) -> (Vec<String>, bool) {
        let found = found.unwrap_or_default();
        let steady: Vec<String> = found.intersection(&self.last).cloned().collect();
        self.last = found;
        let warn = !steady.is_empty() && self.warned_s.is_none_or(|t| now_s.saturating_sub(t) >= WARN_EVERY_S);
        if warn {
            self.warned_s = Some(now_s);
        }
        (steady, warn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::smi::ComputeApp;
    use std::collections::BTreeMap;

    struct Procs(BTreeMap<u32, &'static str>);
    impl ProcReader for Procs {
        fn cgroup(&self, pid: u32) -> Option<String> {
            self.0.get(&pid).map(|s| s.to_string())
        }
    }

    fn apps(pids: &[u32]) -> AppsTable {
        AppsTable {
            apps: pids
                .iter()
                .map(|p| ComputeApp {
                    pid: Some(*p),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Trial 6 #5: with `PrivateData=jobs` an unprivileged squeue lists none of the other
    /// users' jobs, and observe mode saw nothing and said nothing.
    #[test]
    fn processes_of_jobs_squeue_does_not_list_are_found() {
        let procs = Procs(
            [
                (10, "0::/system.slice/slurmstepd.scope/job_501/step_0/user/task_0\n"),
                (11, "0::/system.slice/slurmstepd.scope/job_502/step_0/user/task_0\n"),
                (12, "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0\n"),
                (13, "0::/user.slice/user-1000.slice/session-3.scope\n"),
            ]
            .into_iter()
            .collect(),
        );
        let listed = SlurmJob {
            job_id: "77_3".into(),
            raw_id: Some(502),
            ..Default::default()
        };
        let all = apps(&[10, 11, 12, 13, 99]);
        let got = jobs_not_listed(&all, &procs, std::slice::from_ref(&listed));
        assert_eq!(got, ["501", "sEKNKTV3WPV500"].into_iter().map(String::from).collect());
        let with_sluid = SlurmJob {
            sluid: Some("sEKNKTV3WPV500".into()),
            raw_id: Some(501),
            ..Default::default()
        };
        assert!(jobs_not_listed(&all, &procs, &[listed, with_sluid]).is_empty());
    }

    #[test]
    fn a_job_counts_after_two_cycles_and_the_warning_is_rate_limited() {
        let set = |ids: &[&str]| Some(ids.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>());
        let mut u = Unlisted::default();
        assert_eq!(u.observe(0, set(&["501"])), (vec![], false), "one cycle: a job may just have ended");
        assert_eq!(u.observe(60, set(&["501", "502"])), (vec!["501".to_string()], true));
        assert_eq!(
            u.observe(120, set(&["501", "502"])),
            (vec!["501".to_string(), "502".to_string()], false)
        );
        assert!(u.observe(660, set(&["501"])).1, "ten minutes after the last warning");
        // A cycle that could not look forgets the last finding.
        assert_eq!(u.observe(720, None), (vec![], false));
        assert_eq!(u.observe(1400, set(&["501"])), (vec![], false));
    }
}
