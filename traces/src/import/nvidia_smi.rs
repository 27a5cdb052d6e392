//! Importer for the CSV log written by
//! `nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,memory.total,power.draw,power.limit --format=csv -l N`.
//!
//! * **Header.** The first line names the fields, with units in brackets
//!   (`utilization.gpu [%]`); columns are found by name, so any order and extra fields work.
//!   A log written with `noheader` is read with the field list given as `query` (default:
//!   the list above). A header line repeated later (the logger restarted) is skipped.
//! * **Units.** ` %`, ` MiB` and ` W` after a value are removed; `nounits` logs work too.
//! * **Missing.** `[N/A]`, `[Not Supported]`, `[Insufficient Permissions]`, `[Unknown Error]`,
//!   `[GPU is lost]` or any other bracketed text, and `N/A`, are missing (counted as
//!   `missing_<field>`), never 0.
//! * **Time.** `timestamp` is `YYYY/MM/DD HH:MM:SS.mmm` in the local time of the machine
//!   that ran nvidia-smi; it is read in `zone` (`--tz`, default the importing machine's zone)
//!   and floored to whole seconds. In the repeated hour when clocks go back the earlier instant
//!   is taken (counted as `ambiguous_local_times`); a time in the skipped hour is a bad row.
//! * **GPU numbering.** `index` is NVML's index. It equals Slurm's GRES index when the node's
//!   `gres.conf` lists GPUs in PCI bus order (the usual `AutoDetect=nvml` case); otherwise
//!   map the indices before using `--jobs`.
//! * `node` names the host (`--node`); jobs come from [`super::Attribution`].

use super::{build_trace, Attribution, ImportReport, RawSample, Zone};
use crate::error::{RowLog, RowProblem, TraceError};
use crate::records::{check_width, each_record, problem_at};
use crate::{Sample, Trace};
use std::path::Path;

/// The nvidia-smi fields the policy reads; a log without one of them is imported, with a note.
pub const POLICY_FIELDS: [&str; 5] = ["utilization.gpu", "memory.used", "memory.total", "power.draw", "power.limit"];

/// `nvidia-smi --query-gpu` field names a header line may hold; a line naming one of them is a
/// header (no data value is such a name).
const HEADER_FIELDS: [&str; 16] = [
    "timestamp",
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "driver_version",
    "pstate",
    "temperature.gpu",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "memory.free",
    "power.draw",
    "power.limit",
    "clocks.sm",
];

/// The field list the command line queries, used for headerless logs.
pub const DEFAULT_QUERY: &str = "timestamp,index,uuid,utilization.gpu,memory.used,memory.total,power.draw,power.limit";

/// Options of the `nvidia-smi-log` importer.
#[derive(Clone, Debug)]
pub struct SmiOptions {
    /// Host name the log was taken on (`--node`).
    pub node: String,
    /// Zone of the timestamps (`--tz`).
    pub zone: Zone,
    /// Field list for headerless logs (`--query`).
    pub query: String,
    /// Skip malformed rows instead of failing (`--lenient`).
    pub lenient: bool,
}

fn field_name(h: &str) -> String {
    let h = h.trim();
    match h.find(" [") {
        Some(i) => h[..i].trim().to_string(),
        None => h.to_string(),
    }
}

/// Imports an nvidia-smi CSV log. See the module docs for the rules.
pub fn import(log_path: &Path, opts: &SmiOptions, attribution: Attribution) -> Result<(Trace, ImportReport), TraceError> {
    let text = std::fs::read_to_string(log_path).map_err(|e| TraceError::io(log_path, e))?;
    let mut report = ImportReport::default();
    let raw = parse(&text, log_path, opts, &mut report)?;
    let trace = build_trace(raw, attribution, &mut report);
    report.notes.push(format!("timestamps read in zone {}", opts.zone));
    Ok((trace, report))
}

/// Parses the text of a log into raw samples (pure: no I/O). `path` is used in errors only.
/// Sample times spanning more than [`crate::format::MAX_SPAN_S`] are an error naming the row of
/// the latest time (and where the earliest was read).
pub fn parse(text: &str, path: &Path, opts: &SmiOptions, report: &mut ImportReport) -> Result<Vec<RawSample>, TraceError> {
    if opts.node.trim().is_empty() || opts.node.contains([':', ';', ',']) {
        return Err(TraceError::Option {
            option: "--node".into(),
            problem: format!("{:?} is not a usable host name", opts.node),
        });
    }
    let mut log = RowLog::new(opts.lenient);
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(crate::records::CrlfToLf::new(text.as_bytes()));
    let mut fields: Option<Vec<String>> = None;
    let mut header_line: Option<Vec<String>> = None;
    let mut out = Vec::new();
    let mut absent_noted = false;
    let mut span = super::ImportSpan::default();
    each_record(&mut rdr, path, &mut log, |rec, line| {
        if rec.len() == 1 && rec[0].is_empty() {
            return Ok(());
        }
        let raw_fields: Vec<String> = rec.iter().map(str::to_string).collect();
        let named: Vec<String> = raw_fields.iter().map(|h| field_name(h)).collect();
        if named.iter().any(|n| HEADER_FIELDS.contains(&n.as_str())) {
            if header_line.is_some() {
                report.bump("repeated_headers");
            }
            let lacks: Vec<&str> = ["timestamp", "index"]
                .into_iter()
                .filter(|f| !named.iter().any(|n| n == f))
                .collect();
            fields = Some(named);
            header_line = Some(raw_fields);
            if !lacks.is_empty() {
                return Err(RowProblem {
                    file: path.into(),
                    line,
                    column: "-".into(),
                    column_number: 0,
                    problem: format!(
                        "the header has no {} column, which the importer needs; log with `nvidia-smi --query-gpu={DEFAULT_QUERY} --format=csv -l N`",
                        lacks.join(" or ")
                    ),
                });
            }
            return Ok(());
        }
        let names = fields
            .get_or_insert_with(|| opts.query.split(',').map(|s| s.trim().to_string()).collect())
            .clone();
        let col = |name: &str| names.iter().position(|n| n == name);
        if !absent_noted {
            absent_noted = true;
            let absent: Vec<&str> = POLICY_FIELDS.iter().copied().filter(|f| col(f).is_none()).collect();
            if !absent.is_empty() {
                report.notes.push(format!(
                    "the log has no {} column: those readings are unknown in every sample (the policy never reads a missing field as 0)",
                    absent.join(", ")
                ));
            }
        }
        let problem = |i: usize, what: String| problem_at(path, &names, line, i, what);
        check_width(path, &names, rec, line)?;
        let (Some(ti), Some(ii)) = (col("timestamp"), col("index")) else {
            return Err(problem(0, format!("the fields {:?} lack timestamp or index", names.join(","))));
        };
        {
            let ts = &rec[ti];
            let local = chrono::NaiveDateTime::parse_from_str(ts, "%Y/%m/%d %H:%M:%S%.f").map_err(|_| {
                let hint = if header_line.is_none() {
                    format!(
                        " (the log has no header line, so its columns are read in the --query order {}; give --query in the order the log was written, or log with a header: `nvidia-smi --query-gpu={DEFAULT_QUERY} --format=csv -l N`)",
                        names.join(",")
                    )
                } else {
                    String::new()
                };
                problem(ti, format!("timestamp {ts:?} is not YYYY/MM/DD HH:MM:SS.mmm{hint}"))
            })?;
            let (t_s, ambiguous) = opts
                .zone
                .to_epoch_s(local)
                .ok_or_else(|| problem(ti, format!("{ts:?} does not exist in zone {} (clocks went forward)", opts.zone)))?;
            span.see(t_s, || problem(ti, String::new()));
            if ambiguous {
                report.bump("ambiguous_local_times");
            }
            let gpu: u16 = rec[ii]
                .parse()
                .map_err(|_| problem(ii, format!("{:?} is not a GPU index", &rec[ii])))?;
            let mut value = |name: &'static str, missing_key: &'static str| -> Result<Option<f64>, RowProblem> {
                let Some(i) = col(name) else { return Ok(None) };
                let v = rec[i].trim();
                if v.starts_with('[') || v == "N/A" || v.is_empty() {
                    report.bump(missing_key);
                    return Ok(None);
                }
                let num = [" %", " MiB", " W"].iter().find_map(|u| v.strip_suffix(u)).unwrap_or(v).trim();
                match num.parse::<f64>() {
                    Ok(x) if x.is_finite() => Ok(Some(x)),
                    _ => Err(problem(i, format!("{v:?} is not a number, a unit-suffixed number or [N/A]"))),
                }
            };
            let r = RawSample {
                node: opts.node.trim().to_string(),
                gpu,
                sample: Sample {
                    t_s,
                    gpu,
                    util_pct: value("utilization.gpu", "missing_util")?,
                    mem_used_mib: value("memory.used", "missing_mem_used")?,
                    mem_total_mib: value("memory.total", "missing_mem_total")?,
                    power_w: value("power.draw", "missing_power")?,
                    power_limit_w: value("power.limit", "missing_power_limit")?,
                    ..Sample::default()
                },
            };
            out.push(r);
            Ok(())
        }
    })?;
    span.check()?;
    report.skipped.extend(log.skipped);
    Ok(out)
}
