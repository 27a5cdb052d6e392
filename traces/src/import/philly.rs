//! Importer for the Philly excerpt (Microsoft Philly traces, as sampled by the DRE project):
//! `philly_dre_gpu_util_excerpt.csv` (`jobid,status,gpu,minute_rel_to_job_start,gpu_util_pct`)
//! plus `--jobs philly_dre_jobs_excerpt.json` (the cluster job log fields: `jobid`, `status`,
//! `vc`, `user`, `start_time`, `end_time`, `detail[].ip`, `detail[].gpus`).
//!
//! * Utilisation is nvidia-smi's, averaged per minute; an empty cell or `-1` means the GPU
//!   reported nothing (missing, never 0). Memory, power and processes are not in the trace.
//! * `gpu` is `<machine>_gpu<N>`: node `<machine>`, GPU index `N` as Philly numbers it.
//! * Times in the job log have no zone; they are read as UTC. Only relative times matter here.
//! * Minutes before the job's start belong to no job and are dropped (`rows_before_start`).
//! * The excerpt ends 3 minutes after each start, so each job's `end_s` is clipped to
//!   `start + 4 min` (its last sample plus one step); the real end and status go in `comment`.
//! * The VC becomes both `account` and `partition`.

use super::ImportReport;
use crate::error::{RowLog, RowProblem, TraceError};
use crate::records::{fixed_csv, problem_at};
use crate::{GpuRef, JobFacts, Sample, Trace, TraceJob};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// Seconds after the start where the excerpt's data ends (+3 min sample plus one minute).
pub const CLIP_AFTER_START_S: i64 = 4 * 60;

#[derive(Deserialize)]
struct PhillyJob {
    jobid: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    vc: String,
    #[serde(default)]
    user: String,
    start_time: String,
    end_time: String,
    detail: Vec<PhillyDetail>,
}

#[derive(Deserialize)]
struct PhillyDetail {
    ip: String,
    gpus: Vec<String>,
}

fn parse_time(s: &str) -> Option<i64> {
    chrono::NaiveDateTime::parse_from_str(s.trim(), "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|t| t.and_utc().timestamp())
}

fn gpu_index(s: &str) -> Option<u16> {
    s.strip_prefix("gpu")?.parse().ok()
}

/// Imports the Philly excerpt. `util_csv` is the per-minute utilisation file, `jobs_json` the
/// job metadata. Errors name the file, and for the CSV the line and column; `lenient` skips
/// bad CSV rows instead (listed in the report). Counters: `rows_before_start`,
/// `missing_util` (empty or −1).
pub fn import(util_csv: &Path, jobs_json: &Path, lenient: bool) -> Result<(Trace, ImportReport), TraceError> {
    let mut report = ImportReport::default();
    let text = std::fs::read_to_string(jobs_json).map_err(|e| TraceError::io(jobs_json, e))?;
    let jobs: Vec<PhillyJob> = serde_json::from_str(&text).map_err(|e| {
        TraceError::Row(RowProblem {
            file: jobs_json.to_path_buf(),
            line: e.line() as u64,
            column: "-".into(),
            column_number: e.column(),
            problem: format!("not a Philly job list: {e}"),
        })
    })?;
    let mut trace = Trace::default();
    let mut by_id: HashMap<String, u32> = HashMap::new();
    for (k, j) in jobs.iter().enumerate() {
        let bad = |what: &str, v: &str| TraceError::file(jobs_json, format!("job #{k} ({}): {what} {v:?}", j.jobid));
        let start_s = parse_time(&j.start_time).ok_or_else(|| bad("start_time is not YYYY-MM-DD HH:MM:SS:", &j.start_time))?;
        let real_end_s = parse_time(&j.end_time).ok_or_else(|| bad("end_time is not YYYY-MM-DD HH:MM:SS:", &j.end_time))?;
        if real_end_s < start_s {
            return Err(bad("end_time is before start_time:", &j.end_time));
        }
        let mut alloc = Vec::new();
        for d in &j.detail {
            let node = trace.nodes.intern(d.ip.trim());
            for g in &d.gpus {
                let gpu = gpu_index(g).ok_or_else(|| bad("GPU name is not gpuN:", g))?;
                alloc.push(GpuRef { node, gpu });
            }
        }
        if by_id.insert(j.jobid.clone(), trace.jobs.len() as u32).is_some() {
            return Err(bad("job id appears twice:", &j.jobid));
        }
        trace.jobs.push(TraceJob {
            facts: JobFacts {
                job_id: j.jobid.clone(),
                user: j.user.clone(),
                account: j.vc.clone(),
                partition: j.vc.clone(),
                qos: String::new(),
                name: String::new(),
                comment: format!(
                    "philly status={} ran until {} (excerpt ends 3 min after start)",
                    j.status,
                    j.end_time.trim()
                ),
                start_s,
                alloc,
            },
            end_s: real_end_s.min(start_s.saturating_add(CLIP_AFTER_START_S)),
            time_limit_s: None,
        });
    }

    let mut log = RowLog::new(lenient);
    let want = ["jobid", "status", "gpu", "minute_rel_to_job_start", "gpu_util_pct"];
    let names: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    let mut rows = Vec::new();
    let mut span = super::ImportSpan::default();
    fixed_csv(util_csv, &want, &mut log, |rec, line| {
        let problem = |col: usize, what: String| problem_at(util_csv, &names, line, col, what);
        let jobid = rec[0].trim();
        let &ji = by_id
            .get(jobid)
            .ok_or_else(|| problem(0, format!("job {jobid:?} is not in the job file")))?;
        let bad_gpu = || problem(2, format!("{:?} is not <machine>_gpu<N>", &rec[2]));
        let (machine, g) = rec[2].trim().rsplit_once('_').ok_or_else(bad_gpu)?;
        let gpu = gpu_index(g).ok_or_else(bad_gpu)?;
        let job = &trace.jobs[ji as usize];
        let node = trace
            .nodes
            .get(machine)
            .filter(|n| job.facts.alloc.contains(&GpuRef { node: *n, gpu }))
            .ok_or_else(|| problem(2, format!("{:?} is not in the allocation of job {jobid}", &rec[2])))?;
        let minute: i64 = rec[3]
            .trim()
            .parse()
            .map_err(|_| problem(3, format!("{:?} is not an integer minute", &rec[3])))?;
        let u = rec[4].trim();
        let util = if u.is_empty() || u == "-1" {
            None
        } else {
            match u.parse::<f64>() {
                Ok(x) if x.is_finite() => Some(x),
                _ => return Err(problem(4, format!("{u:?} is not a number, empty or -1"))),
            }
        };
        let start_s = trace.jobs[ji as usize].facts.start_s;
        let t_s = minute.checked_mul(60).and_then(|d| start_s.checked_add(d)).ok_or_else(|| {
            problem(
                3,
                format!("minute {minute} after the job's start ({start_s} s) does not fit in i64 seconds"),
            )
        })?;
        if minute >= 0 {
            span.see(t_s, || problem(3, String::new()));
        }
        rows.push((ji, node, gpu, t_s, minute, util));
        Ok(())
    })?;
    span.check()?;
    for (ji, node, gpu, t_s, minute, util) in rows {
        if minute < 0 {
            report.bump("rows_before_start");
            continue;
        }
        if util.is_none() {
            report.bump("missing_util");
        }
        let sample = Sample {
            t_s,
            node,
            gpu,
            util_pct: util.into(),
            ..Sample::default()
        };
        trace.push_sample(sample, ji, None);
    }
    report.skipped = log.skipped;
    report
        .notes
        .push("Philly job-log times have no zone and are read as UTC; only times relative to the start matter.".into());
    report.notes.push(format!(
        "job ends are clipped to start + {} s, where the excerpt's data ends",
        CLIP_AFTER_START_S
    ));
    trace.normalize();
    Ok((trace, report))
}

/// GPUs of the imported jobs at one minute after start: how many there are and how many read
/// 0 % or nothing (missing or no row at all).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartMinute {
    /// Minutes after the job's start.
    pub minute: i64,
    /// Allocated GPUs over all jobs.
    pub gpus: u64,
    /// GPUs reading exactly 0 %.
    pub zero: u64,
    /// GPUs with no reading (empty, −1, or no row).
    pub missing: u64,
}

/// For minutes 0..=3 after each job's start, counts GPUs at zero and missing (see
/// [`StartMinute`]). Meant for an imported Philly trace.
pub fn start_profile(trace: &Trace) -> Vec<StartMinute> {
    let mut out: Vec<StartMinute> = (0..=3)
        .map(|m| StartMinute {
            minute: m,
            ..StartMinute::default()
        })
        .collect();
    let mut seen: HashMap<(u32, i64, u32, u16), Option<f64>> = HashMap::new();
    for (i, s) in trace.samples.iter().enumerate() {
        let j = trace.sample_job[i];
        let rel = s.t_s - trace.jobs[j as usize].facts.start_s;
        if rel % 60 == 0 && (0..=3 * 60).contains(&rel) {
            seen.insert((j, rel / 60, s.node.0, s.gpu), s.util_pct.get());
        }
    }
    for (ji, j) in trace.jobs.iter().enumerate() {
        for m in &mut out {
            for g in &j.facts.alloc {
                m.gpus += 1;
                match seen.get(&(ji as u32, m.minute, g.node.0, g.gpu)) {
                    Some(Some(u)) if *u == 0.0 => m.zero += 1,
                    Some(Some(_)) => {}
                    _ => m.missing += 1,
                }
            }
        }
    }
    out
}
