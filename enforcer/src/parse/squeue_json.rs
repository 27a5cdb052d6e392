//! `squeue --json` (data_parser v0.0.3x–v0.0.4x). Times are epoch seconds.
//!
//! Two shapes are accepted for each versioned field (SchedMD/slurm data_parser
//! v0.0.40 `parsers.c`): `job_state` as a string or a list of state words with flags, and
//! numbers as plain numbers or `{set, infinite, number}` (only `set && !infinite` is a value).
//! Slurm 23.02–24.05.0 ignore filters with `--json`, so every state appears; callers filter.

use super::{hostlist, split_state, tres, JobRowError, JobsRead, SlurmJob};
use serde_json::Value;

/// Why a whole `squeue --json` output was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
pub enum SqueueJsonError {
    /// Not JSON.
    #[error("squeue --json: not JSON: {0}")]
    NotJson(String),
    /// No top-level `jobs` list.
    #[error("squeue --json: no top-level \"jobs\" list")]
    NoJobs,
    /// The top-level `errors` list is not empty (for example a controller timeout).
    #[error("squeue --json reported errors: {0}")]
    Reported(String),
}

/// A number in either shape; `None` when unset, infinite, or not a number.
pub fn number(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64)),
        Value::Object(o) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(false);
            let inf = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            if set && !inf {
                number(o.get("number"))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// Parses `squeue --json` output. A job that cannot be read (no `job_id`, bad hostlist, bad
/// TRES) is a row error; the others still count.
pub fn parse(text: &str) -> Result<JobsRead, SqueueJsonError> {
    let v: Value = serde_json::from_str(text).map_err(|e| SqueueJsonError::NotJson(e.to_string()))?;
    if let Some(errs) = v.get("errors").and_then(Value::as_array) {
        if !errs.is_empty() {
            let msg: Vec<String> = errs
                .iter()
                .map(|e| {
                    let d = e.get("description").and_then(Value::as_str).unwrap_or("");
                    let x = e.get("error").and_then(Value::as_str).unwrap_or("");
                    format!("{d} {x}").trim().to_string()
                })
                .collect();
            return Err(SqueueJsonError::Reported(msg.join("; ")));
        }
    }
    let jobs = v.get("jobs").and_then(Value::as_array).ok_or(SqueueJsonError::NoJobs)?;
    let mut out = JobsRead::default();
    for (i, j) in jobs.iter().enumerate() {
        match job(j) {
            Ok(job) => out.jobs.push(job),
            Err((id, problem)) => out.row_errors.push(JobRowError {
                row: i,
                job_id: id,
                problem,
            }),
        }
    }
    Ok(out)
}

fn job(j: &Value) -> Result<SlurmJob, (Option<String>, String)> {
    let raw = number(j.get("job_id")).filter(|n| *n > 0).ok_or((None, "no job_id".to_string()))? as u64;
    let het_id = number(j.get("het_job_id")).filter(|n| *n > 0);
    let het_off = number(j.get("het_job_offset"));
    let arr_id = number(j.get("array_job_id")).filter(|n| *n > 0);
    let arr_task = number(j.get("array_task_id"));
    let job_id = match (het_id, het_off, arr_id, arr_task) {
        (Some(h), Some(o), _, _) => format!("{h}+{o}"),
        (_, _, Some(a), Some(t)) => format!("{a}_{t}"),
        _ => raw.to_string(),
    };
    let fail = |p: String| (Some(job_id.clone()), p);
    let (state, state_flags) = match j.get("job_state") {
        Some(Value::String(s)) => split_state(s.split('+')),
        Some(Value::Array(a)) => split_state(a.iter().filter_map(Value::as_str)),
        _ => return Err(fail("no job_state".into())),
    };
    let nodes_text = match j.get("nodes") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => return Err(fail(format!("nodes is not a string: {other}"))),
    };
    let nodes = hostlist::parse(&nodes_text).map_err(|e| fail(e.to_string()))?;
    let tres_text = string(j.get("tres_alloc_str"));
    let gpus = tres::parse(&tres_text).map_err(|e| fail(e.to_string()))?.gpus;
    let sluid = j.get("sluid").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    Ok(SlurmJob {
        raw_id: Some(raw),
        sluid,
        state,
        state_flags,
        user: string(j.get("user_name")),
        account: string(j.get("account")),
        partition: string(j.get("partition")),
        qos: string(j.get("qos")),
        name: string(j.get("name")),
        comment: string(j.get("comment")),
        start_s: number(j.get("start_time")).filter(|t| *t > 0),
        nodes,
        gpus,
        job_id,
    })
}
