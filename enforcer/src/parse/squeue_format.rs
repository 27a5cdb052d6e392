//! The `squeue --noheader --Format=...` fallback, for sites where `--json` is unavailable.
//!
//! Every field but the last is written `Field:|` (width 0: never truncated, `|` after it;
//! squeue opts.c `_parse_long_token`); the last is `Name:` (width 0, no suffix) so a name
//! containing `|`, spaces or any unicode is still read whole. A row with too few fields is an
//! error for that row, never a shifted column. The comment is not read in this mode (it is
//! free text and cannot share a row with the name safely); use `--json` for the opt-out marker.
//!
//! StartTime is printed as local time of the host running squeue, with no UTC offset
//! (`%FT%T`, src/common/parse_time.c); `N/A`, `Unknown` and `None` mean no start time.

use super::{hostlist, split_state, tres, JobRowError, JobsRead, SlurmJob};
use chrono::{LocalResult, NaiveDateTime, TimeZone};

/// The fields the enforcer asks for, in order. `Name` must stay last.
pub const FIELDS: [&str; 12] = [
    "JobID",
    "JobArrayID",
    "HetJobID",
    "HetJobOffset",
    "State",
    "UserName",
    "Account",
    "Partition",
    "QOS",
    "StartTime",
    "NodeList",
    "tres-alloc",
];

/// The `--Format=` argument for [`FIELDS`] plus `Name` last.
pub fn format_arg() -> String {
    let mut s: Vec<String> = FIELDS.iter().map(|f| format!("{f}:|")).collect();
    s.push("Name:".to_string());
    format!("--Format={}", s.join(","))
}

/// The column list [`parse`] expects for the enforcer's own format.
pub fn own_columns() -> Vec<&'static str> {
    let mut v = FIELDS.to_vec();
    v.push("Name");
    v
}

/// Converts a wall-clock time with no offset to epoch seconds in some time zone.
pub trait LocalTime {
    /// Epoch seconds for `t`; `None` when `t` does not exist (a DST gap). When `t` occurs
    /// twice (DST fold) the later instant is returned: the job then looks younger, which can
    /// only delay a verdict.
    fn epoch_s(&self, t: NaiveDateTime) -> Option<i64>;
}

impl<Tz: TimeZone> LocalTime for Tz {
    fn epoch_s(&self, t: NaiveDateTime) -> Option<i64> {
        match self.from_local_datetime(&t) {
            LocalResult::Single(d) => Some(d.timestamp()),
            LocalResult::Ambiguous(a, b) => Some(a.timestamp().max(b.timestamp())),
            LocalResult::None => None,
        }
    }
}

/// Reads a StartTime literal. `Ok(None)` for N/A, Unknown, None; an error for anything that is
/// not `YYYY-MM-DDTHH:MM:SS` (a relative or custom SLURM_TIME_FORMAT, `####`).
pub fn start_time(text: &str, tz: &dyn LocalTime) -> Result<Option<i64>, String> {
    let t = text.trim();
    if matches!(t, "N/A" | "Unknown" | "None" | "") {
        return Ok(None);
    }
    let naive = NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S")
        .map_err(|_| format!("start time {t:?} is not YYYY-MM-DDTHH:MM:SS (is SLURM_TIME_FORMAT set?)"))?;
    tz.epoch_s(naive)
        .map(Some)
        .ok_or_else(|| format!("start time {t:?} does not exist in local time (DST gap)"))
}

/// Parses `--noheader --Format` output whose columns are `columns` (names as in `-O`, case
/// insensitive). When the last column is `Name` it takes the rest of the line; otherwise one
/// trailing `|` (the suffix of a `Field:|` last column) is dropped and the field count must
/// match exactly. Blank lines are skipped. `tz` converts StartTime.
pub fn parse(text: &str, columns: &[&str], tz: &dyn LocalTime) -> JobsRead {
    let cols: Vec<String> = columns.iter().map(|c| c.to_ascii_lowercase()).collect();
    let name_last = cols.last().is_some_and(|c| c == "name");
    let mut out = JobsRead::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // A `Field:|` last column leaves one trailing `|`; a free-text Name last never does.
        let body = if name_last { line } else { line.strip_suffix('|').unwrap_or(line) };
        let fields: Vec<&str> = if name_last {
            body.splitn(cols.len(), '|').collect()
        } else {
            body.split('|').collect()
        };
        if fields.len() != cols.len() {
            out.row_errors.push(JobRowError {
                row: i + 1,
                job_id: None,
                problem: format!(
                    "{} fields, expected {}: {:?}",
                    fields.len(),
                    cols.len(),
                    line.chars().take(120).collect::<String>()
                ),
            });
            continue;
        }
        match row(&cols, &fields, tz) {
            Ok(j) => out.jobs.push(j),
            Err((id, problem)) => out.row_errors.push(JobRowError {
                row: i + 1,
                job_id: id,
                problem,
            }),
        }
    }
    out
}

fn row(cols: &[String], f: &[&str], tz: &dyn LocalTime) -> Result<SlurmJob, (Option<String>, String)> {
    let get = |name: &str| cols.iter().position(|c| c == name).map(|i| f[i]);
    let field = |name: &str| get(name).map(|s| s.trim().to_string()).unwrap_or_default();
    let raw: Option<u64> = get("jobid").and_then(|s| s.trim().parse().ok());
    let het_id: Option<u64> = get("hetjobid").and_then(|s| s.trim().parse().ok()).filter(|n| *n > 0);
    let het_off: Option<u64> = get("hetjoboffset").and_then(|s| s.trim().parse().ok());
    let arr = field("jobarrayid");
    let job_id = match (het_id, het_off) {
        (Some(h), Some(o)) => format!("{h}+{o}"),
        _ if !arr.is_empty() && arr != "N/A" => arr,
        _ => field("jobid"),
    };
    if job_id.is_empty() {
        return Err((None, "no job id".into()));
    }
    let fail = |p: String| (Some(job_id.clone()), p);
    let state_text = field("state");
    let (state, state_flags) = split_state(state_text.split('+'));
    let nodes = hostlist::parse(&field("nodelist")).map_err(|e| fail(e.to_string()))?;
    let gpus = tres::parse(&field("tres-alloc")).map_err(|e| fail(e.to_string()))?.gpus;
    let start_s = match get("starttime") {
        Some(s) => start_time(s, tz).map_err(fail)?,
        None => None,
    };
    Ok(SlurmJob {
        raw_id: raw,
        sluid: get("sluid").map(|s| s.trim().to_string()).filter(|s| !s.is_empty() && s != "N/A"),
        state,
        state_flags,
        user: field("username"),
        account: field("account"),
        partition: field("partition"),
        qos: field("qos"),
        name: get("name").unwrap_or("").to_string(),
        comment: field("comment"),
        start_s,
        nodes,
        gpus,
        job_id,
    })
}
