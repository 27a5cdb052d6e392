//! `/proc/PID/cgroup` → the Slurm job the process belongs to.
//!
//! Two layouts are read (slurm-26.05-sluid sample; cgroup.conf(5)):
//! * `job_<id>` path components (cgroup v1 `/slurm/uid_U/job_N/step_S`, and v2
//!   `/system.slice/slurmstepd.scope/job_N/...` before 26.05 or with `CgroupJobIdPaths=yes`);
//! * Slurm 26.05's default v2 layout keyed by SLUID:
//!   `/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0`.
//!
//! Only components below a `slurm*` component count, so an unrelated `job_1` elsewhere in a
//! path is never read as a Slurm job.

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

/// Reads the job of one `/proc/PID/cgroup` text. `Ok(None)` when the process is in no Slurm
/// job cgroup; an error when lines name different jobs.
pub fn parse(text: &str) -> Result<Option<CgroupJob>, CgroupError> {
    let mut found: Option<CgroupJob> = None;
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else { continue };
        let mut in_slurm = false;
        let mut job = None;
        for comp in path.split('/') {
            if comp.starts_with("slurm") {
                in_slurm = true;
                continue;
            }
            if !in_slurm {
                continue;
            }
            if let Some(n) = comp.strip_prefix("job_") {
                if let Ok(id) = n.parse::<u64>() {
                    job = Some(CgroupJob::JobId(id));
                    break;
                }
            } else if is_sluid(comp) {
                job = Some(CgroupJob::Sluid(comp.to_string()));
                break;
            }
        }
        if let Some(j) = job {
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
}
