//! `/proc/PID/cgroup` → the Slurm job the process belongs to.
//!
//! Only Slurm's own layouts are read, anchored at the root of the hierarchy (slurm-26.05-sluid
//! sample; cgroup.conf(5)):
//! * cgroup v1: `/slurm/uid_U/job_N/...` (`/slurm_<nodename>/uid_U/job_N/...` when several
//!   slurmd run on one host);
//! * cgroup v2: `/system.slice/slurmstepd.scope/job_N/...` (before Slurm 26.05, or with
//!   `CgroupJobIdPaths=yes`), and Slurm 26.05's default keyed by SLUID:
//!   `/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0`.
//!
//! Both roots are made by root (slurmd, systemd's system slice); a user cannot create them.
//! Any other path is no Slurm job, whatever its components are named: under systemd a user
//! owns their `user@UID.service` subtree (`Delegate=yes`) and can name cgroups there
//! `slurm-x.scope/job_555`, which must never make their process another job's.

use serde::Serialize;

/// The job key found in a cgroup file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum CgroupJob {
    /// A numeric job id (`job_<id>`), the raw id unique to an array task or het component.
    JobId(u64),
    /// A Slurm 26.05 SLUID.
    Sluid(String),
}

/// Why a cgroup file could not be read as one job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("cgroup: {0}")]
pub struct CgroupError(pub String);

/// True for `s` + 13 upper-case Crockford base32 characters (no I, L, O, U).
pub fn is_sluid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 14
        && b[0] == b's'
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_digit() || (c.is_ascii_uppercase() && !b"ILOU".contains(c)))
}

/// `job_<digits>` → the job id.
fn job_id(comp: &str) -> Option<u64> {
    let n = comp.strip_prefix("job_")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The job of one cgroup path (the third field of a `/proc/PID/cgroup` line), when it is in
/// one of Slurm's layouts (see the module doc); `None` otherwise.
fn slurm_job(path: &str) -> Option<CgroupJob> {
    let mut comps = path.strip_prefix('/')?.split('/');
    let top = comps.next()?;
    if top == "system.slice" {
        // cgroup v2: the scope slurmstepd runs in, then the job's own cgroup.
        if comps.next()? != "slurmstepd.scope" {
            return None;
        }
        let job = comps.next()?;
        return match job_id(job) {
            Some(id) => Some(CgroupJob::JobId(id)),
            None => is_sluid(job).then(|| CgroupJob::Sluid(job.to_string())),
        };
    }
    // cgroup v1: `slurm` (or `slurm_<nodename>`), `uid_<uid>`, `job_<id>`.
    if top != "slurm" && top.strip_prefix("slurm_").is_none_or(str::is_empty) {
        return None;
    }
    let uid = comps.next()?.strip_prefix("uid_")?;
    if uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    job_id(comps.next()?).map(CgroupJob::JobId)
}

/// Reads the job of one `/proc/PID/cgroup` text (lines `hierarchy-ID:controllers:path`,
/// cgroups(7)). `Ok(None)` when no line's path is in one of Slurm's layouts (see the module
/// doc): the process is in no Slurm job's cgroup. An error when lines name different jobs.
pub fn parse(text: &str) -> Result<Option<CgroupJob>, CgroupError> {
    let mut found: Option<CgroupJob> = None;
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else { continue };
        if let Some(j) = slurm_job(path) {
            match &found {
                Some(f) if *f != j => return Err(CgroupError(format!("lines name different jobs: {f:?} and {j:?}"))),
                _ => found = Some(j),
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts() {
        assert_eq!(
            parse("0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n").unwrap(),
            Some(CgroupJob::JobId(123))
        );
        assert_eq!(
            parse("4:memory:/slurm/uid_1000/job_77/step_batch/task_0\n1:name=systemd:/user.slice\n").unwrap(),
            Some(CgroupJob::JobId(77))
        );
        assert_eq!(
            parse("0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0").unwrap(),
            Some(CgroupJob::Sluid("sEKNKTV3WPV500".into()))
        );
        assert_eq!(parse("0::/user.slice/job_5/x").unwrap(), None);
        assert!(parse("4:memory:/slurm/uid_1/job_1/x\n3:cpu:/slurm/uid_1/job_2/x").is_err());
        assert!(!is_sluid("sEKNKTV3WPV50O") && !is_sluid("xEKNKTV3WPV500") && is_sluid("sBR1JB8J1YM400"));
    }

    #[test]
    fn the_multiple_slurmd_v1_root_is_slurm_and_the_node_name() {
        assert_eq!(
            parse("7:devices:/slurm_gpu001/uid_1000/job_88/step_0/task_0\n").unwrap(),
            Some(CgroupJob::JobId(88))
        );
        assert_eq!(parse("7:devices:/slurm_/uid_1000/job_88/step_0\n").unwrap(), None);
    }

    /// Review 15: a `slurm*` component anywhere in a path made the `job_N` below it a Slurm
    /// job's, so a user could name a cgroup of their own delegated subtree after another job.
    #[test]
    fn only_slurms_own_roots_make_a_slurm_job() {
        for path in [
            "/user.slice/user-1000.slice/user@1000.service/app.slice/slurm-x.scope/job_555/leaf",
            "/user.slice/user-1000.slice/user@1000.service/slurmstepd.scope/job_555",
            "/user.slice/user-1000.slice/user@1000.service/system.slice/slurmstepd.scope/job_555",
            "/user.slice/slurm/uid_1000/job_555/step_0",
            "/slurmx/uid_1000/job_555/step_0",
            "/slurm/job_555/step_0",
            "/slurm/uid_/job_555",
            "/slurm/uid_1000/step_0/job_555",
            "/system.slice/slurmd.service/job_555",
            "/system.slice/slurmstepd.scope/step_0/job_555",
            "/system.slice/slurmstepd.scope/job_+555/step_0",
            "/system.slice/slurmstepd.scope/job_/step_0",
            "system.slice/slurmstepd.scope/job_555",
        ] {
            assert_eq!(parse(&format!("0::{path}\n")), Ok(None), "{path}");
        }
        // A user's look-alike next to the real cgroup of another hierarchy names no second job.
        let text = "4:memory:/slurm/uid_1000/job_77/step_0\n0::/user.slice/user-1000.slice/user@1000.service/slurm/uid_1/job_5/x\n";
        assert_eq!(parse(text), Ok(Some(CgroupJob::JobId(77))));
    }
}
