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
use crate::{Sample, Trace};
use std::path::Path;

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
    report.notes.push(format!("timestamps read in zone {:?}", opts.zone));
    Ok((trace, report))
}

/// Parses the text of a log into raw samples (pure: no I/O). `path` is used in errors only.
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
        .from_reader(text.as_bytes());
    let mut fields: Option<Vec<String>> = None;
    let mut header_line: Option<Vec<String>> = None;
    let mut out = Vec::new();
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                log.bad_row(RowProblem {
                    file: path.into(),
                    line,
                    column: "-".into(),
                    column_number: 0,
                    problem: format!("unreadable row: {e}"),
                })?;
                if line == 0 {
                    break;
                }
                continue;
            }
        }
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() == 1 && rec[0].is_empty() {
            continue;
        }
        let raw_fields: Vec<String> = rec.iter().map(str::to_string).collect();
        if rec.get(0).is_some_and(|f| f.starts_with("timestamp")) {
            if header_line.is_some() {
                report.bump("repeated_headers");
            }
            fields = Some(raw_fields.iter().map(|h| field_name(h)).collect());
            header_line = Some(raw_fields);
            continue;
        }
        let names = fields
            .get_or_insert_with(|| opts.query.split(',').map(|s| s.trim().to_string()).collect())
            .clone();
        let col = |name: &str| names.iter().position(|n| n == name);
        let problem = |i: usize, what: String| RowProblem {
            file: path.into(),
            line,
            column: names.get(i).cloned().unwrap_or_else(|| "-".into()),
            column_number: i + 1,
            problem: what,
        };
        if rec.len() != names.len() {
            log.bad_row(problem(
                rec.len().min(names.len()),
                format!("{} fields, the header has {}", rec.len(), names.len()),
            ))?;
            continue;
        }
        let (Some(ti), Some(ii)) = (col("timestamp"), col("index")) else {
            return Err(TraceError::file(
                path,
                format!("the fields {:?} lack timestamp or index", names.join(",")),
            ));
        };
        let row = (|| -> Result<RawSample, RowProblem> {
            let ts = &rec[ti];
            let local = chrono::NaiveDateTime::parse_from_str(ts, "%Y/%m/%d %H:%M:%S%.f")
                .map_err(|_| problem(ti, format!("{ts:?} is not YYYY/MM/DD HH:MM:SS.mmm")))?;
            let (t_s, ambiguous) = opts
                .zone
                .to_epoch_s(local)
                .ok_or_else(|| problem(ti, format!("{ts:?} does not exist in zone {:?} (clocks went forward)", opts.zone)))?;
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
                let num = v
                    .trim_end_matches(" %")
                    .trim_end_matches(" MiB")
                    .trim_end_matches(" W")
                    .trim_end_matches('%')
                    .trim();
                match num.parse::<f64>() {
                    Ok(x) if x.is_finite() => Ok(Some(x)),
                    _ => Err(problem(i, format!("{v:?} is not a number, a unit-suffixed number or [N/A]"))),
                }
            };
            Ok(RawSample {
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
            })
        })();
        match row {
            Ok(r) => out.push(r),
            Err(p) => log.bad_row(p)?,
        }
    }
    report.skipped.extend(log.skipped);
    Ok(out)
}
