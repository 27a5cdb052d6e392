//! The `squeue --Format=...` fallback, for sites where `--json` is unavailable.
//!
//! Every field is written `Field:|` (width 0: never truncated, `|` after it; squeue opts.c
//! `_parse_long_token`). A row with too many or too few fields is an error for that row, never
//! a shifted column. No field the enforcer asks for is free text a user writes: the job's name
//! and comment are not read in this mode (a line break in either would read as a row of its
//! own, review 15), so exemptions by name or by the comment's opt-out marker need `--json`.
//!
//! The enforcer asks for the header line and reads its own output with [`parse_own`]: a
//! header with no rows below it is an empty queue, while empty output, or output with no
//! header (a controller timeout that still exits 0, samples case B8), is no reading at all.
//!
//! StartTime is printed as local time of the host running squeue, with no UTC offset
//! (`%FT%T`, src/common/parse_time.c); `N/A`, `Unknown` and `None` mean no start time.

use super::{check_nodes, hostlist, split_state, tres, JobRowError, JobsRead, SlurmJob};
use chrono::{LocalResult, NaiveDateTime, TimeZone};

/// The fields the enforcer asks for, in order. None is free text a user writes (see [`TITLES`]).
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

/// The column titles squeue prints in its header for [`FIELDS`], in the same order. Each is the text the field's print function writes when it prints the header
/// (SchedMD/slurm `src/squeue/print.c`; field to function in `src/squeue/opts.c`
/// `_parse_format_long`), checked there for every entry:
///
/// | field | print.c function | title |
/// |---|---|---|
/// | JobID | `_print_job_job_id2` | `JOBID` |
/// | JobArrayID | `_print_job_job_id` | `JOBID` |
/// | HetJobID | `_print_job_het_job_id` | `HET_JOB_ID` |
/// | HetJobOffset | `_print_job_het_job_offset` | `HET_JOB_OFFSET` |
/// | State | `_print_job_job_state` | `STATE` |
/// | UserName | `_print_job_user_name` | `USER` |
/// | Account | `_print_job_account` | `ACCOUNT` |
/// | Partition | `_print_job_partition` | `PARTITION` |
/// | QOS | `_print_job_qos` | `QOS` |
/// | StartTime | `_print_job_time_start` | `START_TIME` |
/// | NodeList | `_print_job_nodes` | `NODELIST` |
/// | tres-alloc | `_print_job_tres_alloc` | `TRES_ALLOC` |
///
/// JobID and JobArrayID share the title `JOBID`, so those two columns cannot be told apart by
/// the header; every other column can.
///
/// There is no `Name` (review 15): squeue prints a job's name as its user gave it, and a name
/// may hold a line break. With the name in the output, the rest of such a name reads as a row
/// of its own, which a user can write to name any job id, node and state (a forged RUNNING
/// row got a node drained and another user's array cancelled). No field left is user text.
/// So the job name is unknown under this source: a configured `name_regex` exemption holds
/// every job at alert (as the missing comment already does for `comment_marker`).
pub const TITLES: [&str; 12] = [
    "JOBID",
    "JOBID",
    "HET_JOB_ID",
    "HET_JOB_OFFSET",
    "STATE",
    "USER",
    "ACCOUNT",
    "PARTITION",
    "QOS",
    "START_TIME",
    "NODELIST",
    "TRES_ALLOC",
];

const _: () = assert!(TITLES.len() == FIELDS.len(), "one title per field");

/// The header line squeue prints for [`format_arg`]: each of [`TITLES`] followed by `|` (every
/// field has width 0, so no title is padded or cut, and each has the suffix `|`).
pub fn own_header() -> String {
    TITLES.iter().map(|t| format!("{t}|")).collect()
}

/// True when `line` is the header of [`format_arg`] output: exactly [`TITLES`] in order, `|`
/// between them, each compared without surrounding blanks and ignoring ASCII case. Any other
/// title in any position (a wrapper that reorders or replaces `--Format` fields, whose rows
/// would be read by position under the wrong names) is not the header.
pub fn is_own_header(line: &str) -> bool {
    let line = line.trim_end();
    let f: Vec<&str> = line.strip_suffix('|').unwrap_or(line).split('|').map(str::trim).collect();
    f.len() == TITLES.len() && f.iter().zip(TITLES).all(|(got, want)| got.eq_ignore_ascii_case(want))
}

/// The `--Format=` argument for [`FIELDS`]: each with width 0 and the suffix `|`.
pub fn format_arg() -> String {
    let s: Vec<String> = FIELDS.iter().map(|f| format!("{f}:|")).collect();
    format!("--Format={}", s.join(","))
}

/// The column list [`parse`] expects for the enforcer's own format: [`FIELDS`].
pub fn own_columns() -> Vec<&'static str> {
    FIELDS.to_vec()
}

/// Reads the enforcer's own `squeue --Format=` output ([`format_arg`], header kept) and says
/// whether it positively shows the queue. The header line (every title as in [`TITLES`], see
/// [`is_own_header`]) must come before any row; rows after it are read as by [`parse`] with
/// [`own_columns`], keeping line numbers, except that every row must end with the `|` after
/// its last field (TRES_ALLOC), as squeue prints it: a row without it (output cut inside the
/// TRES, `gres/gpu=1` of `gres/gpu=16`) is a row error naming its line, never a job with a
/// wrong GPU count. Blanks or a CR after that `|` are no field.
///
/// One `CLUSTER: NAME` line before the header (squeue prints it with `-M`, which the enforcer
/// never passes, so a site wrapper added it) is skipped and its name returned for a note: the
/// rows below it are still that one cluster's queue. Errors, each meaning "no data", never
/// "no jobs": empty output; no header line; a line other than the header before it; a second
/// `CLUSTER:` line, or one after the header (output for several clusters, whose jobs cannot be
/// told apart).
pub fn parse_own(text: &str, tz: &dyn LocalTime) -> Result<(JobsRead, Option<String>), String> {
    let cols = own_columns();
    let mut cluster: Option<String> = None;
    let mut header_seen = false;
    let mut body = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = line.trim().strip_prefix("CLUSTER:") {
            let name = name.trim().to_string();
            if let Some(first) = &cluster {
                return Err(format!(
                    "line {}: a second CLUSTER: line ({name:?} after {first:?}): output for several clusters, whose jobs cannot be told apart",
                    i + 1
                ));
            }
            if header_seen {
                return Err(format!(
                    "line {}: CLUSTER: {name:?} after the header: output for several clusters, whose jobs cannot be told apart",
                    i + 1
                ));
            }
            cluster = Some(name);
            body.push('\n');
            continue;
        }
        if header_seen {
            body.push_str(line);
            body.push('\n');
            continue;
        }
        // Before the header: blank lines, one CLUSTER: line, then the header itself.
        body.push('\n');
        if line.trim().is_empty() {
            continue;
        }
        if is_own_header(line.trim_end().strip_suffix("NAME").unwrap_or("")) {
            return Err(format!(
                "line {}: the header ends in a NAME column, which this enforcer does not ask for (a job name can hold a line break and forge a row); a wrapper or an older capture? expected {:?}",
                i + 1,
                own_header()
            ));
        }
        if !is_own_header(line) {
            return Err(format!(
                "line {}: expected the header line {:?}, found {:?}",
                i + 1,
                own_header(),
                line.chars().take(160).collect::<String>()
            ));
        }
        header_seen = true;
    }
    if !header_seen {
        return Err(match &cluster {
            _ if text.trim().is_empty() => "empty output, no header line: the queue was not read".to_string(),
            Some(c) => format!("only CLUSTER: {c:?} and no header line: the queue was not read"),
            None => "no header line: the queue was not read".to_string(),
        });
    }
    Ok((parse_rows(&body, &cols, tz, true), cluster))
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
/// trailing `|` (the suffix of a `Field:|` last column, before any trailing blanks or CR) is
/// dropped and the field count must match exactly. Blank lines are skipped. `tz` converts StartTime. A job id on several lines
/// that disagree is a row error on each of them (the job is unknown).
pub fn parse(text: &str, columns: &[&str], tz: &dyn LocalTime) -> JobsRead {
    parse_rows(text, columns, tz, false)
}

/// [`parse`]; with `closed`, a row whose last field is not followed by `|` (before any
/// trailing blanks or CR) is a row error (see [`parse_own`]).
fn parse_rows(text: &str, columns: &[&str], tz: &dyn LocalTime, closed: bool) -> JobsRead {
    let cols: Vec<String> = columns.iter().map(|c| c.to_ascii_lowercase()).collect();
    let name_last = cols.last().is_some_and(|c| c == "name");
    let mut out = JobsRead::default();
    let mut read = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // A `Field:|` last column leaves one trailing `|` (after it, a CR of CRLF output or
        // padding is no field); a free-text Name last never does, and keeps its blanks.
        let body = if name_last {
            line
        } else {
            let line = line.trim_end_matches([' ', '\t', '\r']);
            match line.strip_suffix('|') {
                Some(body) => body,
                None if closed => {
                    let last = line.rsplit('|').next().unwrap_or(line);
                    out.row_errors.push(JobRowError {
                        row: i + 1,
                        job_id: None,
                        problem: format!(
                            "line {}: no closing \"|\" after the last field ({} {:?}): the row was cut short, so that field may be cut too: {:?}",
                            i + 1,
                            columns.last().unwrap_or(&"-"),
                            last.chars().take(60).collect::<String>(),
                            line.chars().take(120).collect::<String>()
                        ),
                    });
                    continue;
                }
                None => line,
            }
        };
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
            Ok(j) => read.push((i + 1, j)),
            Err((id, problem)) => out.row_errors.push(JobRowError {
                row: i + 1,
                job_id: id,
                problem,
            }),
        }
    }
    out.jobs = super::reject_disagreeing_jobs(read, &mut out.row_errors, &|n| format!("line {n}"));
    out
}

/// Reads a numeric id column strictly: `Ok(None)` when the column is absent, empty or `N/A`;
/// otherwise the text must be a decimal integer from 0 to `u32::MAX` (Slurm job ids, array
/// and het fields are `uint32_t`), or the error names the column and the text.
fn text_id(text: Option<&str>, column: &str) -> Result<Option<u32>, String> {
    let Some(t) = text.map(str::trim).filter(|t| !t.is_empty() && *t != "N/A") else {
        return Ok(None);
    };
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{column} {t:?} is not a non-negative integer"));
    }
    t.parse::<u32>()
        .map(Some)
        .map_err(|_| format!("{column} {t:?} is larger than {}", u32::MAX))
}

/// True for the JobArrayID shapes squeue prints (job_array.shtml): `N` (not an array), `N_M`
/// (one task) and `N_[a-b,c%t]` (pending tasks); every number must fit `u32`.
fn is_array_id(t: &str) -> bool {
    let num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u32>().is_ok();
    match t.split_once('_') {
        None => num(t),
        Some((base, task)) => {
            num(base)
                && (num(task)
                    || task.strip_prefix('[').and_then(|r| r.strip_suffix(']')).is_some_and(|r| {
                        let (ranges, throttle) = r.split_once('%').unwrap_or((r, "1"));
                        num(throttle)
                            && ranges
                                .split(',')
                                .all(|g| g.split_once('-').map_or(num(g), |(a, b)| num(a) && num(b)))
                    }))
        }
    }
}

fn row(cols: &[String], f: &[&str], tz: &dyn LocalTime) -> Result<SlurmJob, (Option<String>, String)> {
    let get = |name: &str| cols.iter().position(|c| c == name).map(|i| f[i]);
    let field = |name: &str| get(name).map(|s| s.trim().to_string()).unwrap_or_default();
    let raw = text_id(get("jobid"), "JobID").map_err(|e| (None, e))?;
    let shown = || raw.map(|r| r.to_string());
    let het_id = text_id(get("hetjobid"), "HetJobID").map_err(|e| (shown(), e))?.filter(|n| *n > 0);
    let het_off = text_id(get("hetjoboffset"), "HetJobOffset").map_err(|e| (shown(), e))?;
    let arr = field("jobarrayid");
    let arr = if arr == "N/A" { String::new() } else { arr };
    let het = match (het_id, het_off) {
        (Some(h), Some(o)) => Some(format!("{h}+{o}")),
        (Some(h), None) => return Err((shown(), format!("HetJobID {h} without HetJobOffset"))),
        _ => None,
    };
    // JobArrayID is squeue's `%i` (print.c `_print_job_job_id`), which gives a het component
    // as `N+K`: that form is read only when it is the component HetJobID and HetJobOffset name.
    if !arr.is_empty() && !is_array_id(&arr) && het.as_deref() != Some(arr.as_str()) {
        return Err((
            shown(),
            match &het {
                Some(h) => format!("JobArrayID {arr:?} is not N, N_M, N_[ranges] or the het component {h}"),
                None => format!("JobArrayID {arr:?} is not N, N_M or N_[ranges]"),
            },
        ));
    }
    let job_id = match (het, raw) {
        (Some(h), _) => h,
        _ if !arr.is_empty() => arr,
        (_, Some(0)) => return Err((None, "JobID 0 is not a job id".into())),
        (_, Some(r)) => r.to_string(),
        (_, None) => return Err((None, "no job id".into())),
    };
    let fail = |p: String| (Some(job_id.clone()), p);
    let state_text = field("state");
    let (state, state_flags) = split_state(state_text.split('+'));
    let nodes_text = field("nodelist");
    let nodes = hostlist::parse(&nodes_text).map_err(|e| fail(e.to_string()))?;
    check_nodes(&state, &state_flags, &nodes, &format!("NodeList {nodes_text:?}")).map_err(fail)?;
    let tres = tres::parse(&field("tres-alloc")).map_err(|e| fail(e.to_string()))?;
    let gpus = tres.gpus;
    let start_s = match get("starttime") {
        Some(s) => start_time(s, tz).map_err(fail)?,
        None => None,
    };
    // Exemption fields not among the columns (the enforcer's own format has no comment).
    let unknown_fields = [
        ("user_name", "username"),
        ("account", "account"),
        ("partition", "partition"),
        ("qos", "qos"),
        ("name", "name"),
        ("comment", "comment"),
    ]
    .into_iter()
    .filter(|(_, column)| get(column).is_none())
    .map(|(key, _)| key.to_string())
    .collect();
    Ok(SlurmJob {
        unknown_fields,
        raw_id: raw.map(u64::from),
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
        // `--Format` has no per-node GRES detail: no device indices.
        gres_idx: Vec::new(),
        gres_counts: Vec::new(),
        mig: tres.mig_slices(),
        job_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;
    use proptest::prelude::*;

    fn one(raw: &str, arr: &str, het: &str, off: &str) -> JobsRead {
        let tz = FixedOffset::east_opt(0).unwrap();
        let line = format!("{raw}|{arr}|{het}|{off}|RUNNING|u|a|p|q|N/A|n1|gres/gpu=1|");
        parse(&line, &own_columns(), &tz)
    }

    #[test]
    fn a_job_on_two_lines_that_disagree_is_unknown_and_an_identical_repeat_counts_once() {
        let tz = FixedOffset::east_opt(0).unwrap();
        let a = "9|9|N/A|N/A|RUNNING|alice|a|p|q|N/A|n1|gres/gpu=1|";
        let b = "9|9|N/A|N/A|RUNNING|mallory|a|p|q|N/A|n2|gres/gpu=1|";
        let c = "10|10|N/A|N/A|RUNNING|bob|a|p|q|N/A|n1|gres/gpu=1|";
        let r = parse(&format!("{a}\n{c}\n{b}\n"), &own_columns(), &tz);
        assert_eq!(r.jobs.iter().map(|j| j.job_id.as_str()).collect::<Vec<_>>(), ["10"], "{r:?}");
        assert_eq!(r.row_errors.iter().map(|e| e.row).collect::<Vec<_>>(), [1, 3], "{r:?}");
        assert!(r.row_errors[0].problem.contains("line 1, line 3"), "{r:?}");
        let r = parse(&format!("{a}\n{a}\n"), &own_columns(), &tz);
        assert_eq!(r.jobs.len(), 1);
        assert!(r.row_errors.is_empty());
    }

    #[test]
    fn an_id_column_that_is_not_an_exact_slurm_id_is_an_error_naming_column_and_text() {
        for (raw, arr, het, off, says) in [
            ("1.5", "N/A", "N/A", "N/A", r#"JobID "1.5""#),
            ("-5", "N/A", "N/A", "N/A", r#"JobID "-5""#),
            ("x", "N/A", "N/A", "N/A", r#"JobID "x""#),
            ("99999999999999999999999", "N/A", "N/A", "N/A", "larger than 4294967295"),
            ("4294967296", "N/A", "N/A", "N/A", r#"JobID "4294967296""#),
            ("0", "N/A", "N/A", "N/A", "JobID 0"),
            ("7", "7_1.5", "N/A", "N/A", r#"JobArrayID "7_1.5""#),
            ("7", "7_x; rm", "N/A", "N/A", "JobArrayID"),
            ("7", "N/A", "6", "-1", r#"HetJobOffset "-1""#),
            ("7", "N/A", "6", "N/A", "HetJobID 6 without HetJobOffset"),
            ("1230", "1229+1", "N/A", "N/A", r#"JobArrayID "1229+1" is not N"#),
            ("1230", "1229+2", "1229", "1", "or the het component 1229+1"),
            ("1230", "1229+1", "1228", "1", "or the het component 1228+1"),
        ] {
            let r = one(raw, arr, het, off);
            assert!(r.jobs.is_empty(), "{raw} {arr} {het} {off}: {r:?}");
            assert!(r.row_errors[0].problem.contains(says), "{says}: {}", r.row_errors[0].problem);
        }
        let ok = |raw, arr, het, off| one(raw, arr, het, off).jobs[0].job_id.clone();
        assert_eq!(ok("4294967295", "N/A", "N/A", "N/A"), "4294967295");
        assert_eq!(ok("8", "7_1", "N/A", "N/A"), "7_1");
        assert_eq!(ok("7", "7_[1-3,5%2]", "N/A", "N/A"), "7_[1-3,5%2]");
        assert_eq!(ok("7", "N/A", "6", "1"), "6+1");
        // What squeue prints for a het component: JobArrayID is `%i`, the `N+K` form.
        assert_eq!(ok("1229", "1229+0", "1229", "0"), "1229+0");
        assert_eq!(ok("1230", "1229+1", "1229", "1"), "1229+1");
        assert!(crate::parse::is_het_component(&ok("1230", "1229+1", "1229", "1")));
    }

    fn state_nodes(state: &str, nodes: &str) -> JobsRead {
        let tz = FixedOffset::east_opt(0).unwrap();
        let line = format!("9|9|N/A|N/A|{state}|u|a|p|q|N/A|{nodes}|gres/gpu=1|");
        parse(&line, &own_columns(), &tz)
    }

    /// Review: the last row cut inside the TRES field (`gres/gpu=1` of `gres/gpu=16`) was read
    /// with a wrong GPU count, since the closing `|` was optional.
    #[test]
    fn an_own_format_row_without_its_closing_bar_is_a_row_error_naming_its_line() {
        let tz = FixedOffset::east_opt(0).unwrap();
        let row = "9|9|N/A|N/A|RUNNING|u|a|p|q|N/A|n1|cpu=8,gres/gpu=16|";
        let cut = "10|10|N/A|N/A|RUNNING|u|a|p|q|N/A|n2|cpu=8,gres/gpu=1";
        let (r, _) = parse_own(&format!("{}\n{row}\n{cut}\n", own_header()), &tz).unwrap();
        assert_eq!(
            r.jobs.iter().map(|j| (j.job_id.as_str(), j.gpus)).collect::<Vec<_>>(),
            [("9", 16)],
            "{r:?}"
        );
        assert_eq!(r.row_errors.len(), 1, "{r:?}");
        let e = &r.row_errors[0];
        assert_eq!(e.row, 3);
        assert!(
            e.problem.contains("line 3") && e.problem.contains(r#"tres-alloc "cpu=8,gres/gpu=1""#),
            "{}",
            e.problem
        );
        // Blanks or a CR after the closing `|` are no field.
        for end in ["|", "|  ", "|\r", "| \t\r"] {
            let text = format!("{}\r\n9|9|N/A|N/A|RUNNING|u|a|p|q|N/A|n1|gres/gpu=16{end}\n", own_header());
            let (r, _) = parse_own(&text, &tz).unwrap();
            assert!(r.row_errors.is_empty() && r.jobs[0].gpus == 16, "{end:?}: {r:?}");
        }
        // A site's own columns (`parse`) keep the closing `|` optional.
        assert!(parse(cut, &own_columns(), &tz).row_errors.is_empty());
    }

    #[test]
    fn the_header_must_carry_every_title_in_order() {
        let h = own_header();
        assert!(is_own_header(&h));
        assert!(is_own_header(&format!("{h}  \r")));
        assert!(is_own_header(&h.to_ascii_lowercase()));
        assert!(!is_own_header(&h.replace("STATE|USER", "USER|STATE")));
        assert!(!is_own_header(&format!("{h}|")));
        assert!(!is_own_header(&h.replace("TRES_ALLOC|", "TRES_ALLOC|COMMENT|")));
        // Review 15: the header of the format with the job's name last (an older release's,
        // or a wrapper's) is no data, and the error says why.
        let tz = FixedOffset::east_opt(0).unwrap();
        let e = parse_own(&format!("{h}NAME\n9|9|N/A|N/A|RUNNING|u|a|p|q|N/A|n1|gres/gpu=1|x\n"), &tz).unwrap_err();
        assert!(e.contains("NAME column") && e.contains("line break"), "{e}");
        let titles: Vec<&str> = h.split('|').collect();
        for i in 0..titles.len() {
            let mut t = titles.clone();
            t[i] = "X";
            assert!(!is_own_header(&t.join("|")), "title {i} replaced");
        }
        let swapped = h.replace("STATE|USER", "USER|STATE");
        let e = parse_own(&format!("{swapped}\n9|9|N/A|N/A|u|RUNNING|a|p|q|N/A|n1|gres/gpu=1|\n"), &tz).unwrap_err();
        assert!(e.contains("line 1") && e.contains("USER|STATE"), "{e}");
    }

    #[test]
    fn a_flag_alone_is_an_unknown_state_that_may_hold_its_nodes() {
        for flag in ["SIGNALING", "RESIZING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "NEW_WORD"] {
            let r = state_nodes(flag, "n[1-2]");
            assert!(r.row_errors.is_empty(), "{flag}: {r:?}");
            let j = &r.jobs[0];
            assert!(j.state_unknown() && !j.is_judgeable(), "{flag}");
            assert_eq!(j.state_flags, [flag]);
            assert!(j.may_hold("n2") && !j.may_hold("n3"), "{flag}");
        }
        let r = state_nodes("RUNNING", "n1");
        assert!(r.jobs[0].may_hold("n1") && !r.jobs[0].state_unknown());
        for ended in ["PENDING", "COMPLETED", "CANCELLED", "FAILED"] {
            assert!(!state_nodes(ended, "n1").jobs[0].may_hold("n1"), "{ended}");
        }
    }

    #[test]
    fn a_running_row_without_nodes_is_a_row_error() {
        for nodes in ["", " ", "(null)", "N/A", "None assigned"] {
            for state in ["RUNNING", "SIGNALING", "RESIZING", "CONFIGURING"] {
                let r = state_nodes(state, nodes);
                assert!(r.jobs.is_empty(), "{state} {nodes:?}: {r:?}");
                assert_eq!(r.row_errors[0].job_id.as_deref(), Some("9"));
                assert!(r.row_errors[0].problem.contains("no nodes"), "{}", r.row_errors[0].problem);
            }
            // A job that holds no allocation may have none.
            for state in ["PENDING", "COMPLETED", "COMPLETING"] {
                let r = state_nodes(state, nodes);
                assert!(r.row_errors.is_empty() && r.jobs[0].nodes.is_empty(), "{state} {nodes:?}: {r:?}");
            }
        }
    }

    proptest! {
        /// Safety guard: a row is read either as an error or as a job that is RUNNING on at
        /// least one node, of unknown state (and then it may hold every node it lists), or in
        /// a base state other than RUNNING; never as RUNNING nowhere.
        #[test]
        fn a_row_is_never_running_nowhere_and_a_flag_alone_never_ends_a_job(
            words in proptest::collection::vec(prop_oneof![
                proptest::sample::select(crate::parse::BASE_JOB_STATES.to_vec()).prop_map(str::to_string),
                proptest::sample::select(vec!["SIGNALING", "RESIZING", "CONFIGURING", "COMPLETING", "REQUEUED", "STAGE_OUT"]).prop_map(str::to_string),
                "[A-Z_]{1,12}",
            ], 0..3),
            nodes in proptest::sample::select(vec!["", "(null)", "N/A", "n1", "n[1-3]", "m1"]),
        ) {
            let r = state_nodes(&words.join("+"), nodes);
            if let Some(j) = r.jobs.first() {
                if j.state == "RUNNING" {
                    prop_assert!(!j.nodes.is_empty());
                }
                if j.state_unknown() {
                    prop_assert!(!j.is_judgeable());
                    for n in &j.nodes {
                        prop_assert!(j.may_hold(n));
                    }
                }
            } else {
                prop_assert_eq!(r.row_errors.len(), 1);
            }
        }

        /// Safety guard: output with no header line is never a queue reading, whatever rows
        /// or CLUSTER: lines it holds; with a header above the same lines it is one.
        #[test]
        fn no_header_is_never_an_empty_or_any_queue(
            rows in proptest::collection::vec(prop_oneof![
                Just("CLUSTER: cluster1".to_string()),
                Just(String::new()),
                Just("9|9|N/A|N/A|RUNNING|u|a|p|q|N/A|n1|gres/gpu=1|".to_string()),
                "[ -~]{0,40}",
            ], 0..6)
        ) {
            let tz = FixedOffset::east_opt(0).unwrap();
            let text = rows.join("\n");
            if !rows.iter().any(|r| r.to_ascii_uppercase().starts_with("JOBID")) {
                prop_assert!(parse_own(&text, &tz).is_err(), "{text:?}");
            }
            let header = own_header();
            let body: Vec<&String> = rows.iter().filter(|r| !r.trim().starts_with("CLUSTER:")).collect();
            let with = format!("{header}\n{}", body.iter().map(|r| r.as_str()).collect::<Vec<_>>().join("\n"));
            let (read, cluster) = parse_own(&with, &tz).map_err(TestCaseError::fail)?;
            prop_assert!(cluster.is_none());
            prop_assert_eq!(read.jobs.len() + read.row_errors.len() >= 1, body.iter().any(|r| !r.trim().is_empty()));
        }


        /// Any JobID text that is accepted is exactly a u32 written in decimal, kept as given.
        #[test]
        fn an_accepted_job_id_text_round_trips_exactly(
            text in prop_oneof![
                any::<u64>().prop_map(|n| n.to_string()),
                any::<u32>().prop_map(|n| n.to_string()),
                any::<i64>().prop_map(|n| n.to_string()),
                "[0-9]{1,25}",
                "[-+ .0-9a-z]{1,12}",
            ]
        ) {
            let r = one(&text, "N/A", "N/A", "N/A");
            if let Some(j) = r.jobs.first() {
                let given: u32 = text.trim().parse().expect("only a decimal u32 may be accepted");
                prop_assert!(given > 0);
                prop_assert_eq!(&j.job_id, &given.to_string());
                prop_assert_eq!(j.raw_id, Some(u64::from(given)));
            } else {
                prop_assert_eq!(r.row_errors.len(), 1);
            }
        }
    }
}
