//! Importer for the CSV log written by
//! `nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,memory.total,power.draw,power.limit --format=csv -l N`.
//!
//! * **Header.** The first line names the fields, with units in brackets
//!   (`utilization.gpu [%]`); columns are found by name, so any order and extra fields work.
//!   A log written with `noheader` is read with the field list given as `query` (default:
//!   the list above). A header line repeated later (the logger restarted) is skipped.
//! * **Units.** A header unit of a field the importer reads must be the one nvidia-smi prints
//!   for it ([`unit_of`]: `[%]`, `[MiB]`, `[W]`); any other (`memory.used [GiB]`,
//!   `power.draw [mW]`) is an error naming the line, column and unit, whatever `--lenient`
//!   says, since every value below it would be misread. After a value only that field's own
//!   unit is removed (` %`, ` MiB`, ` W`); another (`65100 mW`, `97 W` in `utilization.gpu`)
//!   is a bad row. `nounits` logs work too.
//! * **Columns named twice.** A header (or `--query`) naming a field the importer reads twice
//!   (`uuid` and `gpu_uuid` count as one) is an error naming the field and both columns,
//!   whatever `--lenient` says: which column holds the reading cannot be told.
//! * **Missing.** `[N/A]`, `[Not Supported]`, `[Insufficient Permissions]`, `[Unknown Error]`,
//!   `[GPU is lost]` or any other bracketed text, and `N/A`, are missing (counted as
//!   `missing_<field>`), never 0.
//! * **Time.** `timestamp` is `YYYY/MM/DD HH:MM:SS.mmm` in the local time of the machine
//!   that ran nvidia-smi; it is read in `zone` (`--tz`, default the importing machine's zone)
//!   and floored to whole seconds. In the repeated hour when clocks go back the earlier instant
//!   is taken (counted as `ambiguous_local_times`); a time in the skipped hour is a bad row.
//! * **GPU numbering.** `index` is NVML's index. It equals Slurm's GRES index when the node's
//!   `gres.conf` lists GPUs in PCI bus order (the usual `AutoDetect=nvml` case); otherwise
//!   map the indices before using `--jobs`. A log with `minor_number` is numbered by it
//!   instead: Slurm's GRES index is the device minor number, which no renumbering changes.
//! * **A GPU is its UUID.** With a `uuid` (or `gpu_uuid`) column, a GPU keeps the index its
//!   UUID had when first seen in the log, even after nvidia-smi renumbers it (a GPU fell off
//!   the bus); see [`super::identify_gpus`]. Without one, GPUs are their indices, and a note
//!   says so.
//! * **One GPU twice at one time** (its UUID, else its index, at one whole second): identical
//!   copies are kept once (`exact_duplicate_samples`); copies that differ (other readings, or
//!   one UUID at two indices) are all dropped (`conflicting_duplicate_samples`), as `sim
//!   replay` drops a trace's conflicting duplicates, with a warning naming the GPU, the time
//!   and the lines (and the hour repeated when clocks go back, whose two passes are read as one
//!   instant).
//! * **Bytes.** A line that is not valid UTF-8 is a bad row (file, line), skipped and counted
//!   with `lenient`.
//! * **Field names.** A name in the header or `--query` within two edits of a field the
//!   importer reads (`utilisation.gpu`) is an error naming it and that field: its reading would
//!   otherwise be silently missing. Known fields the importer does not read
//!   ([`IGNORED_FIELDS`], [`IGNORED_FIELD_PREFIXES`]) are ignored; other unknown names (a newer
//!   driver's field) are ignored and listed in a note.
//! * `node` names the host (`--node`); jobs come from [`super::Attribution`].

use super::{build_trace, Attribution, ImportReport, RawSample, Zone};
use crate::error::{RowLog, RowProblem, TraceError};
use crate::records::{check_width, each_record, problem_at};
use crate::{Sample, Trace};
use std::path::Path;

/// The nvidia-smi fields the policy reads; a log without one of them is imported, with a note.
pub const POLICY_FIELDS: [&str; 5] = ["utilization.gpu", "memory.used", "memory.total", "power.draw", "power.limit"];

/// The video engines' utilisation (NVENC, NVDEC): read when the log has them, and the
/// sample's compute reading is the highest of these and `utilization.gpu`, as the enforcer
/// takes it (operator trial 19: a transcoding GPU reads 0 % in `utilization.gpu`, and a
/// replay cancelled it as `hung`). A codec field that gave a value earlier on a GPU and gives
/// none in a later row makes that row's compute reading unknown, as the enforcer reads it
/// (`codec_lost_samples`).
pub const CODEC_FIELDS: [&str; 2] = ["utilization.encoder", "utilization.decoder"];

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

/// `nvidia-smi --query-gpu` field names (and their documented aliases, from
/// `nvidia-smi --help-query-gpu`) that the importer knows but does not read: a log or `--query`
/// naming one of them imports, the column is ignored. The fields it reads are
/// `timestamp`, `index`, `uuid` (or its alias `gpu_uuid`, listed here) and [`POLICY_FIELDS`].
pub const IGNORED_FIELDS: [&str; 96] = [
    "driver_version",
    "count",
    "name",
    "gpu_name",
    "serial",
    "gpu_serial",
    "uuid",
    "gpu_uuid",
    "pci.bus_id",
    "gpu_bus_id",
    "pci.domain",
    "pci.bus",
    "pci.device",
    "pci.device_id",
    "pci.sub_device_id",
    "pcie.link.gen.current",
    "pcie.link.gen.gpucurrent",
    "pcie.link.gen.max",
    "pcie.link.gen.gpumax",
    "pcie.link.gen.hostmax",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "display_mode",
    "display_active",
    "persistence_mode",
    "addressing_mode",
    "accounting.mode",
    "accounting.buffer_size",
    "driver_model.current",
    "driver_model.pending",
    "vbios_version",
    "inforom.img",
    "inforom.image",
    "inforom.oem",
    "inforom.ecc",
    "inforom.pwr",
    "gom.current",
    "gom.pending",
    "fan.speed",
    "pstate",
    "memory.reserved",
    "memory.free",
    "compute_mode",
    "compute_cap",
    "utilization.memory",
    "utilization.jpeg",
    "utilization.ofa",
    "encoder.stats.sessionCount",
    "encoder.stats.averageFps",
    "encoder.stats.averageLatency",
    "ecc.mode.current",
    "ecc.mode.pending",
    "temperature.gpu",
    "temperature.memory",
    "temperature.gpu.tlimit",
    "power.management",
    "power.draw.average",
    "power.draw.instant",
    "enforced.power.limit",
    "power.default_limit",
    "power.min_limit",
    "power.max_limit",
    "module.power.draw.average",
    "module.power.draw.instant",
    "module.power.limit",
    "clocks.current.graphics",
    "clocks.gr",
    "clocks.current.sm",
    "clocks.sm",
    "clocks.current.memory",
    "clocks.mem",
    "clocks.current.video",
    "clocks.video",
    "clocks.applications.graphics",
    "clocks.applications.gr",
    "clocks.applications.memory",
    "clocks.applications.mem",
    "clocks.default_applications.graphics",
    "clocks.default_applications.gr",
    "clocks.default_applications.memory",
    "clocks.default_applications.mem",
    "clocks.max.graphics",
    "clocks.max.gr",
    "clocks.max.sm",
    "clocks.max.memory",
    "clocks.max.mem",
    "mig.mode.current",
    "mig.mode.pending",
    "fabric.state",
    "fabric.status",
    "reset_status.reset_required",
    "reset_status.drain_and_reset_recommended",
    "protected_memory.total",
    "protected_memory.used",
    "protected_memory.free",
    "gpu_recovery_action",
];

/// Families of `nvidia-smi --query-gpu` fields named by prefix (ECC counters, throttle and
/// clock-event reasons, retired pages, remapped rows): known, not read, ignored.
pub const IGNORED_FIELD_PREFIXES: [&str; 5] = [
    "ecc.errors.",
    "clocks_throttle_reasons.",
    "clocks_event_reasons.",
    "retired_pages.",
    "remapped_rows.",
];

/// Whether `name` is an `nvidia-smi --query-gpu` field the importer knows (reads or ignores).
pub fn is_known_field(name: &str) -> bool {
    name == "timestamp"
        || name == "index"
        || name == "minor_number"
        || POLICY_FIELDS.contains(&name)
        || CODEC_FIELDS.contains(&name)
        || IGNORED_FIELDS.contains(&name)
        || IGNORED_FIELD_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The field this importer reads that `name` is probably a misspelling of: an unknown name
/// within 2 edits of `timestamp`, `index` or one of [`POLICY_FIELDS`]. Such a name is an
/// error (the reading it should carry would silently be missing); any other unknown name
/// (a field of a newer driver, say) is ignored with a note.
fn typo_of_needed_field(name: &str) -> Option<&'static str> {
    if is_known_field(name) {
        return None;
    }
    let needed = ["timestamp", "index"].into_iter().chain(POLICY_FIELDS);
    needed
        .map(|k| (strsim::levenshtein(name, k), k))
        .min()
        .and_then(|(d, k)| (d <= 2).then_some(k))
}

fn typo_problem(name: &str, meant: &str) -> String {
    format!("{name:?} is not an nvidia-smi --query-gpu field; did you mean {meant:?}? (see `nvidia-smi --help-query-gpu`)")
}

fn note_unknown(report: &mut ImportReport, names: &[&str], source: &str) {
    let unknown: Vec<&str> = names.iter().copied().filter(|n| !is_known_field(n)).collect();
    if !unknown.is_empty() {
        report.notes.push(format!(
            "{source}: ignored field(s) this importer does not know: {}",
            unknown.join(", ")
        ));
    }
}

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

/// The unit in brackets after a header name (`memory.used [MiB]` → `MiB`), if any.
fn field_unit(h: &str) -> Option<&str> {
    let h = h.trim();
    h.find(" [").map(|i| {
        let u = h[i + 2..].trim();
        u.strip_suffix(']').unwrap_or(u).trim()
    })
}

/// The unit nvidia-smi prints for a field the importer reads, in the header
/// (`utilization.gpu [%]`) and after each value without `nounits` (`97 %`); `None` for
/// `timestamp`, `index` and `uuid`, printed without one.
pub fn unit_of(field: &str) -> Option<&'static str> {
    match field {
        "utilization.gpu" | "utilization.encoder" | "utilization.decoder" => Some("%"),
        "memory.used" | "memory.total" => Some("MiB"),
        "power.draw" | "power.limit" => Some("W"),
        _ => None,
    }
}

/// The field a name the importer reads stands for (`gpu_uuid` is `uuid`); `None` for a name
/// it does not read.
fn read_field(name: &str) -> Option<&str> {
    match name {
        "gpu_uuid" | "uuid" => Some("uuid"),
        "timestamp" | "index" => Some(name),
        n if POLICY_FIELDS.contains(&n) || CODEC_FIELDS.contains(&n) => Some(name),
        _ => None,
    }
}

/// The first field the importer reads that `names` gives twice: (field, first column, second
/// column), 0-based.
fn named_twice<S: AsRef<str>>(names: &[S]) -> Option<(&str, usize, usize)> {
    names.iter().enumerate().find_map(|(j, n)| {
        let f = read_field(n.as_ref())?;
        let i = names[..j].iter().position(|m| read_field(m.as_ref()) == Some(f))?;
        Some((f, i, j))
    })
}

fn twice_problem(field: &str, first: usize, second: usize) -> String {
    format!(
        "{field} is named twice (columns {} and {}): which column holds it cannot be told",
        first + 1,
        second + 1
    )
}

/// Imports an nvidia-smi CSV log. See the module docs for the rules.
pub fn import(log_path: &Path, opts: &SmiOptions, attribution: Attribution) -> Result<(Trace, ImportReport), TraceError> {
    let bytes = std::fs::read(log_path).map_err(|e| TraceError::io(log_path, e))?;
    let mut report = ImportReport::default();
    let raw = parse_bytes(&bytes, log_path, opts, &mut report)?;
    // The offset used, named (trial 11: "local" alone left a wrong zone unnoticed, and a
    // wrong zone hands a job's samples to its neighbour).
    let first = raw.iter().map(|r| r.sample.t_s).min();
    let offset = first.and_then(|t| opts.zone.offset_at(t)).map_or(String::new(), |o| {
        format!(", UTC{o} at the first sample: if the node's clock kept another zone, import again with --tz")
    });
    let trace = build_trace(raw, attribution, &mut report);
    report.notes.push(format!("timestamps read in zone {}{offset}", opts.zone));
    Ok((trace, report))
}

/// Parses the text of a log into raw samples (pure: no I/O). `path` is used in errors only.
/// Sample times spanning more than [`crate::format::MAX_SPAN_S`] are an error naming the row of
/// the latest time (and where the earliest was read).
pub fn parse(text: &str, path: &Path, opts: &SmiOptions, report: &mut ImportReport) -> Result<Vec<RawSample>, TraceError> {
    parse_bytes(text.as_bytes(), path, opts, report)
}

/// [`parse`] on the log's bytes: a line that is not valid UTF-8 is a bad row naming the file
/// and line (skipped and counted with `lenient`), not a failure of the whole log.
pub fn parse_bytes(text: &[u8], path: &Path, opts: &SmiOptions, report: &mut ImportReport) -> Result<Vec<RawSample>, TraceError> {
    if let Some(why) = crate::alloc::node_name_problem(opts.node.trim()) {
        return Err(TraceError::Option {
            option: "--node".into(),
            problem: format!("{:?} is not a usable node name: {why}", opts.node),
        });
    }
    let query: Vec<&str> = opts.query.split(',').map(str::trim).collect();
    if let Some((bad, meant)) = query.iter().find_map(|f| typo_of_needed_field(f).map(|m| (*f, m))) {
        return Err(TraceError::Option {
            option: "--query".into(),
            problem: typo_problem(bad, meant),
        });
    }
    if let Some((f, i, j)) = named_twice(&query) {
        return Err(TraceError::Option {
            option: "--query".into(),
            problem: twice_problem(f, i, j),
        });
    }
    // A damaged line is a bad row, skipped under --lenient; a damaged header is not: the rows
    // below it would be read under another header's columns, or by --query's order (review
    // 16). The import stops at it, whatever --lenient says.
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if std::str::from_utf8(line).is_ok() {
            continue;
        }
        let lossy = String::from_utf8_lossy(line);
        if lossy.split(',').any(|h| HEADER_FIELDS.contains(&field_name(h).as_str())) {
            return Err(TraceError::Row(RowProblem {
                file: path.into(),
                line: i as u64 + 1,
                column: "-".into(),
                column_number: 0,
                problem: "a header line that is not valid UTF-8 (is the file damaged?): the columns of the rows below it cannot be known, so none is read; repair or remove the line".into(),
            }));
        }
    }
    // nvidia-smi ends every line it writes; a last line without its end was cut while the log
    // was written (copied from a running `nvidia-smi -l`). Its last field may be cut to a
    // shorter number of the same shape (a limit of 400 read as 40: trial 11), so it is
    // dropped, with a warning, whatever --lenient says.
    // The bytes after the last line end (all of them in a one-line log: review 20).
    let kept_len = text.iter().rposition(|&b| b == b'\n').map_or(0, |end| end + 1);
    let text = if text[kept_len..].iter().all(u8::is_ascii_whitespace) {
        text
    } else {
        let line = text[..kept_len].iter().filter(|&&b| b == b'\n').count() + 1;
        report.warnings.push(format!(
            "{}: line {line}, the last, has no line end: the log was cut while nvidia-smi wrote it (copied from a running `nvidia-smi -l`?), and its last field may be cut short, so the line is dropped",
            path.display()
        ));
        report.add("unterminated_last_line", 1);
        &text[..kept_len]
    };
    let mut log = RowLog::new(opts.lenient);
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(crate::records::CrlfToLf::new(text));
    let mut fields: Option<Vec<String>> = None;
    let mut header_line: Option<Vec<String>> = None;
    let mut out = Vec::new();
    // Per sample of `out`: its line and whether its local time was ambiguous.
    let mut read_at: Vec<(u64, bool)> = Vec::new();
    // Which codec fields gave a value, per sample of `out` (see `unknown_after_codec_lost`).
    let mut codec: Vec<super::CodecPresent> = Vec::new();
    let mut absent_noted = false;
    let mut first_data_line: Option<u64> = None;
    let mut span = super::ImportSpan::default();
    // A header whose unit or repeated column is refused stops the import, whatever --lenient
    // says: skipped, the rows below it would be read under the previous header or --query.
    let mut refused_header: Option<RowProblem> = None;
    let read = each_record(&mut rdr, path, &mut log, |rec, line| {
        if refused_header.is_some() || (rec.len() == 1 && rec[0].is_empty()) {
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
            if let Some((i, meant)) = named.iter().enumerate().find_map(|(i, n)| typo_of_needed_field(n).map(|m| (i, m))) {
                return Err(problem_at(path, &named, line, i, typo_problem(&named[i], meant)));
            }
            let wrong_unit = raw_fields.iter().enumerate().find_map(|(i, h)| {
                let (name, unit) = (read_field(&named[i])?, field_unit(h)?);
                (Some(unit) != unit_of(name)).then(|| {
                    let want = unit_of(name).map_or("no unit".to_string(), |w| format!("[{w}]"));
                    (i, format!("{h:?} gives the unit {unit:?}, but nvidia-smi prints {name} with {want}; every value in the column would be misread"))
                })
            });
            if let Some((i, what)) = wrong_unit.or_else(|| named_twice(&named).map(|(f, a, b)| (b, twice_problem(f, a, b)))) {
                refused_header = Some(problem_at(path, &named, line, i, what));
                return Ok(());
            }
            if header_line.is_none() {
                note_unknown(report, &named.iter().map(String::as_str).collect::<Vec<_>>(), "header");
            }
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
        if fields.is_none() {
            note_unknown(report, &query, "--query");
        }
        let names = fields.get_or_insert_with(|| query.iter().map(|s| s.to_string()).collect()).clone();
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
            let no_codec: Vec<&str> = CODEC_FIELDS.iter().copied().filter(|f| col(f).is_none()).collect();
            if !no_codec.is_empty() {
                // Operator trial 23: a log taken without them replayed a transcoding job (0 %
                // in utilization.gpu, its encoder at 30-60 %) as `idle` and cancelled it, where
                // the enforcer, which reads them, sees it working.
                report.notes.push(format!(
                    "the log has no {} column: video encoding and decoding (NVENC, NVDEC) do not show in utilization.gpu, so a job doing only video work looks idle or hung in a replay, though the enforcer (which reads them) sees it working; log them too (add utilization.encoder,utilization.decoder to --query-gpu)",
                    no_codec.join(", ")
                ));
            }
            if col("minor_number").is_some() {
                report.notes.push(
                    "GPUs are numbered by the log's minor_number (Slurm's GRES index, as in --jobs' alloc), not by nvidia-smi's index"
                        .to_string(),
                );
            }
        }
        let problem = |i: usize, what: String| problem_at(path, &names, line, i, what);
        if header_line.is_none() && rec.len() != names.len() {
            let first = *first_data_line.get_or_insert(line);
            let default = if opts.query.trim() == DEFAULT_QUERY { " (the default)" } else { "" };
            return Err(problem(
                rec.len().min(names.len()),
                format!(
                    "{} fields, but the log has no header line (its first line, line {first}, looks like data, not a header), so its columns are read in the --query order, which has {}: {}{default}; give --query with the fields in the order the log was written, or log with a header: `nvidia-smi --query-gpu={DEFAULT_QUERY} --format=csv -l N`",
                    rec.len(),
                    names.len(),
                    names.join(",")
                ),
            ));
        }
        first_data_line.get_or_insert(line);
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
            // With a `minor_number` column, GPUs are numbered by it: Slurm's GRES index is the
            // device minor number (/dev/nvidia<minor>), which need not be NVML's index, and it
            // does not change when another GPU falls off the bus (operator trial 18: the
            // column was ignored, and a job's `alloc` in Slurm's numbering was matched to
            // NVML's).
            let gpu: u16 = match col("minor_number") {
                Some(mi) => rec[mi].trim().parse().map_err(|_| {
                    problem(
                        mi,
                        format!(
                            "{:?} is not a GPU minor number (a log with the minor_number field numbers its GPUs by it, so every row needs one)",
                            &rec[mi]
                        ),
                    )
                })?,
                None => rec[ii]
                    .parse()
                    .map_err(|_| problem(ii, format!("{:?} is not a GPU index", &rec[ii])))?,
            };
            // The GPU's identity; `[N/A]` or an empty cell leaves it unknown.
            let uuid = col("uuid")
                .or_else(|| col("gpu_uuid"))
                .map(|i| rec[i].trim())
                .filter(|u| !u.is_empty() && !u.starts_with('[') && *u != "N/A")
                .map(str::to_string);
            let mut value = |name: &'static str, missing_key: &'static str| -> Result<Option<f64>, RowProblem> {
                let Some(i) = col(name) else { return Ok(None) };
                let v = rec[i].trim();
                if v.starts_with('[') || v == "N/A" || v.is_empty() {
                    report.bump(missing_key);
                    return Ok(None);
                }
                let unit = unit_of(name).unwrap_or_default();
                let num = v.strip_suffix(&format!(" {unit}")).unwrap_or(v).trim();
                match num.parse::<f64>() {
                    Ok(x) if x.is_finite() => Ok(Some(x)),
                    _ => Err(problem(
                        i,
                        format!("{v:?} is not a number, a number in {name}'s unit ({unit:?}) or [N/A]"),
                    )),
                }
            };
            let present: super::CodecPresent;
            let r = RawSample {
                node: opts.node.trim().to_string(),
                gpu,
                uuid,
                sample: Sample {
                    t_s,
                    gpu,
                    util_pct: {
                        let util = value("utilization.gpu", "missing_util")?;
                        let enc = value("utilization.encoder", "missing_encoder")?;
                        let dec = value("utilization.decoder", "missing_decoder")?;
                        present = [enc.is_some(), dec.is_some()];
                        util.map(|u| policy::fold_codec_util(u, [enc, dec].into_iter().flatten())).into()
                    },
                    mem_used_mib: value("memory.used", "missing_mem_used")?.into(),
                    mem_total_mib: value("memory.total", "missing_mem_total")?.into(),
                    power_w: value("power.draw", "missing_power")?.into(),
                    power_limit_w: value("power.limit", "missing_power_limit")?.into(),
                    ..Sample::default()
                },
            };
            out.push(r);
            codec.push(present);
            read_at.push((line, ambiguous));
            Ok(())
        }
    });
    if let Some(p) = refused_header {
        return Err(TraceError::Row(p));
    }
    read?;
    span.check()?;
    report.skipped.extend(log.skipped);
    super::unknown_after_codec_lost(&mut out, &codec, report);
    drop_conflicting_duplicates(&mut out, &read_at, opts.node.trim(), report);
    super::identify_gpus(&mut out, report);
    Ok(out)
}

/// One GPU (its UUID, else its index) read more than once at one time (whole seconds): copies
/// with the same index and readings are kept once (`exact_duplicate_samples`); copies that
/// differ are all dropped (`conflicting_duplicate_samples`), as `sim replay` drops a trace's
/// conflicting duplicates: which reading is right is unknown, so the GPU has a gap there. A
/// warning names the GPUs, times and lines. `read_at` is each sample's line and whether its
/// local time was ambiguous (the hour repeated when clocks go back); `node` names the host.
fn drop_conflicting_duplicates(out: &mut Vec<RawSample>, read_at: &[(u64, bool)], node: &str, report: &mut ImportReport) {
    use std::collections::BTreeMap;
    // The GPU's identity: its UUID, else its index.
    let mut groups: BTreeMap<(i64, Option<&str>, u16), Vec<usize>> = BTreeMap::new();
    for (i, r) in out.iter().enumerate() {
        let index = if r.uuid.is_some() { 0 } else { r.gpu };
        groups.entry((r.sample.t_s, r.uuid.as_deref(), index)).or_default().push(i);
    }
    let mut keep = vec![true; out.len()];
    let mut cases: Vec<String> = Vec::new();
    let (mut conflicting, mut in_repeated_hour) = (0u64, 0usize);
    for ((t_s, uuid, _), idx) in groups.iter().filter(|(_, v)| v.len() > 1) {
        let first = &out[idx[0]];
        let same = |r: &RawSample| r.gpu == first.gpu && r.sample == first.sample;
        if idx.iter().all(|&i| same(&out[i])) {
            report.add("exact_duplicate_samples", idx.len() as u64 - 1);
            for &i in &idx[1..] {
                keep[i] = false;
            }
            continue;
        }
        conflicting += idx.len() as u64;
        for &i in idx {
            keep[i] = false;
        }
        let lines: Vec<String> = idx.iter().map(|&i| read_at[i].0.to_string()).collect();
        let mut indices: Vec<u16> = idx.iter().map(|&i| out[i].gpu).collect();
        indices.sort_unstable();
        indices.dedup();
        let gpu = match uuid {
            Some(u) if indices.len() > 1 => {
                let at: Vec<String> = indices.iter().map(u16::to_string).collect();
                format!("{u} (at indices {})", at.join(", "))
            }
            Some(u) => format!("{u} (index {})", first.gpu),
            None => format!("index {}", first.gpu),
        };
        cases.push(format!("{gpu} at {} (lines {})", super::when(*t_s), lines.join(", ")));
        in_repeated_hour += usize::from(idx.iter().any(|&i| read_at[i].1));
    }
    let mut k = keep.into_iter();
    out.retain(|_| k.next().unwrap_or(false));
    if conflicting == 0 {
        return;
    }
    report.add("conflicting_duplicate_samples", conflicting);
    let dst = if in_repeated_hour > 0 {
        format!(
            " {in_repeated_hour} of these times are in the hour repeated when clocks went back, whose two passes are both read as its earlier instant (`--tz`)."
        )
    } else {
        String::new()
    };
    report.warnings.push(format!(
        "{node}: {conflicting} samples dropped: the same GPU read with different values at one time (whole seconds: the trace format keeps no fraction, so a log taken more often than once a second, `nvidia-smi -lms`, puts several readings in one second; log with `-l 60`), so which reading is right is unknown (its jobs have a gap there: insufficient evidence, never idle): {}.{dst}",
        super::listed(&cases, 8)
    ));
}
