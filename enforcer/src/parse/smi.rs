//! nvidia-smi output: `--query-gpu=... --format=csv,nounits`, `--query-compute-apps=...`,
//! `nvidia-smi -L` and the error texts nvidia-smi prints instead of a table.
//!
//! Every field is parsed on its own. `[N/A]`, `[Not Supported]` and
//! `[Insufficient Permissions]` mean the field is missing: `None`, never 0. Other bracketed
//! text in a reading (`[Unknown Error]`, `[GPU requires reset]`) reports an error on the GPU:
//! the reading is unreadable (`None`, a [`RowError`], and named in
//! [`GpuReading::unreadable`]). Bracketed text in `index`, `uuid` or `name` is missing. A value that is neither missing nor readable (`abc`, `nan`, `inf`,
//! `1e999`, an index that is not an integer) is also `None`, and its row gets a
//! [`RowError`] naming the column and the text. Columns are mapped by the header's names
//! (`utilization.gpu [%]` is `utilization.gpu`); a column this parser reads must carry the unit
//! nvidia-smi prints for it ([`unit_of`]) or none, and may be named once: a header with
//! `memory.used [GiB]` or two `utilization.gpu` columns is refused ([`SmiError::BadColumn`]),
//! and a value may carry only its column's own unit (`30000 MiB`; `1 GiB` is unreadable, never
//! 1 MiB). Headerless text needs the column names of the
//! query that produced it, and a headerless row that does not fit them (wrong field count, or
//! a value of the wrong type, as when `name` text lands in `utilization.gpu`) is rejected
//! whole: a wrong column list must never be read as data.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The enforcer's own `--query-gpu` field list, in order: [`GPU_QUERY_WITHOUT_MIG`], then
/// `mig.mode.current` (nvidia-smi `--help-query-gpu`: "MIG Mode - the current MIG mode",
/// `Enabled` or `Disabled`; `[N/A]` on a GPU without MIG). A driver whose nvidia-smi does not
/// know it (before MIG, R450) is asked [`GPU_QUERY_WITHOUT_MIG`] instead (see
/// [`crate::telemetry::NvidiaSmi`]).
pub const GPU_QUERY: [&str; 9] = plus_one(GPU_QUERY_WITHOUT_MIG, "mig.mode.current");

/// [`GPU_QUERY_WITHOUT_MINOR`], then `minor_number` (nvidia-smi `--help-query-gpu`: "the minor
/// number for the device is such that the Nvidia device node file for each GPU will have the
/// form /dev/nvidia[minor number]"; Linux only, else `[N/A]`): the query before MIG modes
/// were read, and the one used once nvidia-smi has refused `mig.mode.current` (until the
/// full query is tried again). A driver whose nvidia-smi does not know `minor_number` is asked
/// [`GPU_QUERY_WITHOUT_MINOR`] instead.
pub const GPU_QUERY_WITHOUT_MIG: [&str; 8] = plus_one(GPU_QUERY_WITHOUT_MINOR, "minor_number");

/// `base` with `last` appended (`M` must be `N + 1`).
const fn plus_one<const N: usize, const M: usize>(base: [&'static str; N], last: &'static str) -> [&'static str; M] {
    assert!(M == N + 1);
    let mut q = [""; M];
    let mut i = 0;
    while i < N {
        q[i] = base[i];
        i += 1;
    }
    q[N] = last;
    q
}

/// The query without `minor_number` and `mig.mode.current`: the query before the
/// device-index rule, and the one used once nvidia-smi has refused `minor_number` (a driver
/// that old has no MIG either; until the full query is tried again).
pub const GPU_QUERY_WITHOUT_MINOR: [&str; 7] = [
    "index",
    "uuid",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw",
    "power.limit",
];

/// The video-engine utilisation fields (nvidia-smi `--help-query-gpu`: "Percent of time over
/// the past sample period during which the GPU's video encoder/decoder was being used").
/// NVENC and NVDEC work does not show in `utilization.gpu`, which counts kernels on the SMs:
/// a transcoding job reads 0 % there (operator trial 19: one was drained and cancelled as
/// `hung`). The daemon appends them to its query (read by the header, so their place does not
/// matter) unless the driver refuses them (see `telemetry::NvidiaSmi`); the query lists above,
/// which `enforcer parse` uses for headerless text, do not carry them.
pub const CODEC_FIELDS: [&str; 2] = ["utilization.encoder", "utilization.decoder"];

/// The enforcer's own `--query-compute-apps` field list, in order.
pub const APPS_QUERY: [&str; 3] = ["gpu_uuid", "pid", "used_memory"];

/// One GPU row of `--query-gpu`. Every field is `None` when the column is absent or the
/// value is missing (`[N/A]` and friends) or unparsable (then the row also has a
/// [`RowError`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuReading {
    /// `index`: NVML's index of the GPU on this node.
    pub index: Option<u16>,
    /// `uuid`, e.g. `GPU-8f3c…`.
    pub uuid: Option<String>,
    /// `name`, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: Option<String>,
    /// `utilization.gpu`, percent.
    pub util_pct: Option<f64>,
    /// `utilization.encoder`, percent (NVENC).
    pub enc_pct: Option<f64>,
    /// `utilization.decoder`, percent (NVDEC).
    pub dec_pct: Option<f64>,
    /// `memory.used`, MiB.
    pub mem_used_mib: Option<f64>,
    /// `memory.total`, MiB.
    pub mem_total_mib: Option<f64>,
    /// `power.draw`, watts.
    pub power_w: Option<f64>,
    /// `power.limit`, watts.
    pub power_limit_w: Option<f64>,
    /// `minor_number`: the GPU's device minor number (`/dev/nvidia<minor>`), which Slurm's
    /// GRES index names (see [`crate::attribution`]). `None` when not queried, `[N/A]` (not
    /// Linux) or unreadable. It need not equal `index`.
    pub minor: Option<u32>,
    /// `mig.mode.current`: `Some(true)` for `Enabled` (the GPU is split into MIG devices, and
    /// its own readings are the parent's, shared by every slice's job), `Some(false)` for
    /// `Disabled`; `None` when not queried, `[N/A]` (a GPU without MIG) or unreadable.
    pub mig_enabled: Option<bool>,
    /// `mig.mode.current` was queried and read neither `Enabled`, `Disabled` nor a GPU without
    /// MIG (`[N/A]`, `[Not Supported]`): the GPU may be split into slices.
    pub mig_mode_unknown: bool,
    /// The reading columns (`utilization.*`, `memory.*`, `power.*`) whose value was present
    /// but could not be read (`ERR!`, nvidia-smi's mark for a GPU or driver error; `nan`;
    /// text). Such a row is no evidence at all: the daemon hands the engine those fields as
    /// present but invalid, which discards the whole sample, where a missing (`[N/A]`) field
    /// only makes that field unknown.
    pub unreadable: Vec<String>,
}

/// One row that could not be read. Other rows still count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowError {
    /// 1-based line number in the text.
    pub line: usize,
    /// The offending line.
    pub text: String,
    /// What is wrong.
    pub problem: String,
}

/// A parsed `--query-gpu` table.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuTable {
    /// The column names used (from the header, or as given for headerless text).
    pub columns: Vec<String>,
    /// Rows read.
    pub gpus: Vec<GpuReading>,
    /// Rows rejected (wrong field count; in headerless text also a value of the wrong type)
    /// and rows read with an unreadable value (that field is `None`).
    pub row_errors: Vec<RowError>,
}

/// One row of `--query-compute-apps`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ComputeApp {
    /// `gpu_uuid`: the GPU (or MIG device) the process runs on.
    pub gpu_uuid: Option<String>,
    /// `pid` as NVML reports it (a host PID; it may not exist in a container's namespace).
    pub pid: Option<u32>,
    /// `used_memory`, MiB.
    pub used_memory_mib: Option<f64>,
    /// `process_name` (or `name`).
    pub process_name: Option<String>,
}

/// A parsed `--query-compute-apps` table.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct AppsTable {
    /// The column names used.
    pub columns: Vec<String>,
    /// Rows read.
    pub apps: Vec<ComputeApp>,
    /// Rows rejected.
    pub row_errors: Vec<RowError>,
}

/// Why a whole nvidia-smi text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum SmiError {
    /// nvidia-smi printed an error text instead of a table; `kind` names it.
    #[error("nvidia-smi reported no data: {kind} ({line:?})")]
    NoData {
        /// Short name: `no_devices`, `nvml_init_failed`, `gpu_lost`, `device_handle`, `driver_unreachable`.
        kind: &'static str,
        /// The line that said so.
        line: String,
    },
    /// The text has no line at all (no header, no row): nvidia-smi with `--format=csv`
    /// always prints a header, so this is no data, never "no GPUs" or "no processes".
    #[error("nvidia-smi printed nothing (no header, no row): no data, never zero")]
    Empty,
    /// The header line names no column this parser knows.
    #[error("the header {0:?} names no known column")]
    BadHeader(String),
    /// A column this parser reads cannot be read safely: its unit (`memory.used [GiB]`) is not
    /// the one nvidia-smi prints for that field ([`unit_of`]), so every value would be misread
    /// by a factor; or the field is named in two columns, so which one holds it is unknown.
    #[error("{place}: {problem}")]
    BadColumn {
        /// Where: `header line N, column M` or `column list, column M` (1-based).
        place: String,
        /// What is wrong, naming the column as given.
        problem: String,
    },
}

/// The error texts nvidia-smi prints on stdout when it has no data, with their short names.
pub const NO_DATA_TEXTS: [(&str, &str); 6] = [
    ("No devices were found", "no_devices"),
    ("Failed to initialize NVML", "nvml_init_failed"),
    ("GPU is lost", "gpu_lost"),
    ("Unable to determine the device handle", "device_handle"),
    ("couldn't communicate with the NVIDIA driver", "driver_unreachable"),
    ("Unknown Error", "unknown_error"),
];

/// The first no-data error text in `text`, if any. `Unknown Error` only counts when it is a
/// whole line, since `[Unknown Error]` is also a per-field value.
pub fn no_data(text: &str) -> Option<SmiError> {
    for line in text.lines() {
        let l = line.trim();
        for (needle, kind) in NO_DATA_TEXTS {
            let hit = if kind == "unknown_error" { l == needle } else { l.contains(needle) };
            if hit {
                return Some(SmiError::NoData {
                    kind,
                    line: l.chars().take(200).collect(),
                });
            }
        }
    }
    None
}

/// Strips a unit suffix from a header name: `utilization.gpu [%]` → `utilization.gpu`.
fn header_name(h: &str) -> String {
    header_unit(h).0.to_string()
}

/// A header name and its unit: `utilization.gpu [%]` → (`utilization.gpu`, `Some("%")`).
/// A bracket that does not close at the end is kept as the unit's text (`[GiB` → `GiB`).
fn header_unit(h: &str) -> (&str, Option<&str>) {
    let h = h.trim();
    match h.find(" [") {
        Some(i) => {
            let u = h[i + 2..].trim();
            (&h[..i], Some(u.strip_suffix(']').unwrap_or(u).trim()))
        }
        None => (h, None),
    }
}

/// The unit nvidia-smi prints for a field this module reads, in the header
/// (`memory.used [MiB]`) and after each value without `nounits` (`300 MiB`); `None` for a field
/// printed without a unit (`index`, `uuid`, `name`, `minor_number`, `pid`, ...).
pub fn unit_of(field: &str) -> Option<&'static str> {
    match field {
        "utilization.gpu" | "utilization.encoder" | "utilization.decoder" => Some("%"),
        "memory.used" | "memory.total" | "used_memory" | "used_gpu_memory" => Some("MiB"),
        "power.draw" | "power.limit" => Some("W"),
        _ => None,
    }
}

/// The value a column name stands for: `used_gpu_memory` is `used_memory` and
/// `process_name` is `name` (both fill the same reading of a compute app).
fn same_field(c: &str) -> &str {
    match c {
        "used_gpu_memory" => "used_memory",
        "process_name" => "name",
        c => c,
    }
}

/// Checks the columns a table is read by: each column the caller reads (`known`) carries the
/// unit nvidia-smi prints for it, or none, and no field the caller reads is named twice.
/// Columns the caller does not read are not checked. `line` is the header's line, `None` for
/// a column list given for headerless text.
fn check_columns(raw: &[&str], line: Option<usize>, known: &dyn Fn(&str) -> bool) -> Result<(), SmiError> {
    let place = |i: usize| match line {
        Some(n) => format!("header line {n}, column {}", i + 1),
        None => format!("column list, column {}", i + 1),
    };
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in raw.iter().enumerate() {
        let (name, unit) = header_unit(r);
        if !known(name) {
            continue;
        }
        if let Some(u) = unit {
            if Some(u) != unit_of(name) {
                let want = unit_of(name).map_or("no unit".to_string(), |w| format!("[{w}]"));
                return Err(SmiError::BadColumn {
                    place: place(i),
                    problem: format!(
                        "{:?} gives the unit {u:?}, but nvidia-smi prints {name} with {want}; its values would be misread",
                        r.trim()
                    ),
                });
            }
        }
        if let Some(first) = seen.insert(same_field(name), i) {
            return Err(SmiError::BadColumn {
                place: place(i),
                problem: format!(
                    "{:?} names {} again (columns {} and {}): which column holds it cannot be told",
                    r.trim(),
                    same_field(name),
                    first + 1,
                    i + 1
                ),
            });
        }
    }
    Ok(())
}

/// A field value, or `None` for the missing markers (`[N/A]`, `[Not Supported]`, any other
/// bracketed text, bare `N/A`) and empty text.
fn value(s: &str) -> Option<&str> {
    let s = s.trim();
    if s.is_empty() || (s.starts_with('[') && s.ends_with(']')) || s == "N/A" {
        return None;
    }
    Some(s)
}

/// A field's reading: `Ok(None)` when missing, `Err(problem)` when present but unreadable.
type Field<T> = Result<Option<T>, String>;

/// Bracketed values nvidia-smi prints for a reading it does not have: the field is missing.
/// Any other bracketed text (`[Unknown Error]`, `[GPU requires reset]`) reports an error on
/// the GPU: for a reading, it is unreadable, not missing.
const MISSING_MARKERS: [&str; 3] = ["[N/A]", "[Not Supported]", "[Insufficient Permissions]"];

/// A finite number, tolerating the column's own unit left in (a query without `nounits`:
/// `300.00 W`, `45 %`, `30000 MiB`; see [`unit_of`]). Any other unit after the number
/// (`1 GiB`, `65 mW`, `70 kW`) makes the value unreadable: it is never read as the column's
/// unit.
fn number(column: &str, s: &str) -> Field<f64> {
    let raw = s.trim();
    if raw.starts_with('[') && raw.ends_with(']') && !MISSING_MARKERS.contains(&raw) {
        return Err(format!("{column} {raw:?} is an error, not a reading"));
    }
    let Some(t) = value(s) else { return Ok(None) };
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
    let suffix = &t[digits.len()..];
    let bare = digits.trim_end();
    let unit = unit_of(column);
    match bare.parse::<f64>() {
        Ok(_) if !suffix.is_empty() && Some(suffix) != unit => {
            let want = unit.map_or("no unit".to_string(), |u| format!("{u:?}"));
            Err(format!("{column} {t:?} has the unit {suffix:?}, but {column} is read in {want}"))
        }
        Ok(v) if v.is_finite() => Ok(Some(v)),
        Ok(_) => Err(format!("{column} {t:?} is not a finite number")),
        Err(_) => Err(format!("{column} {t:?} is not a number")),
    }
}

/// A non-negative integer (`index`, `pid`).
fn integer<T: std::str::FromStr>(column: &str, s: &str) -> Field<T> {
    let Some(t) = value(s) else { return Ok(None) };
    t.parse::<T>()
        .map(Some)
        .map_err(|_| format!("{column} {t:?} is not a non-negative integer in range"))
}

/// Reads `mig.mode.current` into `g`: `Enabled` or `Disabled` (any case) set
/// [`GpuReading::mig_enabled`]; `[N/A]` and `[Not Supported]` (a GPU without MIG) leave it
/// `None`, and so does bare `N/A`. Anything else leaves the mode unknown
/// ([`GpuReading::mig_mode_unknown`]): a denial (`[Insufficient Permissions]`) or an empty
/// field quietly, any other text as a problem for the row, and an
/// error mark (`[Unknown Error]`, `[GPU requires reset]`) also makes the GPU's readings
/// unreadable, as in any other column (reviews 25, 26: an error mark there was taken for "no
/// MIG", and later its GPU's 0 % was judged).
fn read_mig_mode(g: &mut GpuReading, column: &str, s: &str) -> Result<(), String> {
    let raw = s.trim();
    g.mig_enabled = None;
    g.mig_mode_unknown = false;
    // Bare `N/A` reads as missing in every column (`value`); so does it here.
    if raw == "[N/A]" || raw == "[Not Supported]" || raw == "N/A" {
        return Ok(());
    }
    if raw.eq_ignore_ascii_case("enabled") || raw.eq_ignore_ascii_case("disabled") {
        g.mig_enabled = Some(raw.eq_ignore_ascii_case("enabled"));
        return Ok(());
    }
    g.mig_mode_unknown = true;
    // A denial or an empty field says nothing of the GPU: unknown, without a row error, which
    // would keep the node's GPU list from reading whole and hold our drain's resume for ever
    // (reviews 26, 27).
    if raw == "[Insufficient Permissions]" || raw.is_empty() {
        return Ok(());
    }
    if raw.starts_with('[') && raw.ends_with(']') {
        g.unreadable.push(column.to_string());
        return Err(format!("{column} {raw:?} is an error, not a reading"));
    }
    Err(format!("{column} {raw:?} is neither Enabled nor Disabled"))
}

/// Free text (`uuid`, `name`, `process_name`).
fn free_text(s: &str) -> Field<String> {
    Ok(value(s).map(str::to_string))
}

/// Stores a field's reading in `slot`; a problem is returned for the row (the slot is `None`).
fn put<T>(slot: &mut Option<T>, reading: Field<T>) -> Result<(), String> {
    match reading {
        Ok(v) => {
            *slot = v;
            Ok(())
        }
        Err(problem) => {
            *slot = None;
            Err(problem)
        }
    }
}

/// True when `text` is empty or its last line ends in a line feed (blanks, tabs and CRs after
/// it aside): nvidia-smi ends every line it prints.
fn last_line_ended(text: &str) -> bool {
    let t = text.trim_end_matches([' ', '\t', '\r']);
    t.is_empty() || t.ends_with('\n')
}

/// Splits CSV text into (line number, fields), skipping blank lines and `#` comments.
fn rows(text: &str) -> impl Iterator<Item = (usize, &str, Vec<&str>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| (i + 1, l, l.split(',').collect()))
}

/// True when `line` looks like a `--query-gpu` header rather than a data row: some field is
/// a known column name, carries a unit in brackets (`memory.used [MiB]`), or is a dotted
/// lower-case query name (`temperature.gpu`).
pub fn looks_like_header(line: &str) -> bool {
    line.split(',').any(|f| {
        let f = f.trim();
        let name = header_name(f);
        let dotted = name.contains('.')
            && name
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        known_gpu_column(&name) || dotted || (f.contains(" [") && f.ends_with(']') && !f.starts_with('['))
    })
}

fn known_gpu_column(c: &str) -> bool {
    matches!(
        c,
        "index"
            | "uuid"
            | "name"
            | "utilization.gpu"
            | "utilization.encoder"
            | "utilization.decoder"
            | "memory.used"
            | "memory.total"
            | "power.draw"
            | "power.limit"
            | "minor_number"
            | "mig.mode.current"
    )
}

/// One row read: 1-based line number, the line (at most 200 characters), the row.
type Read<R> = (usize, String, R);

/// Rows of one CSV table, whatever it holds.
type Table<R> = (Vec<String>, Vec<Read<R>>, Vec<RowError>);

/// Reads a CSV table: header (or `columns`), then one `R` per row filled field by field by
/// `fill(row, column, text)`, which returns a problem for a value it cannot read. With a
/// header such a row is kept (that field `None`) and recorded; headerless (`columns` given),
/// it is rejected, since the list may not be the one the text was produced with. `known` says
/// whether a header name is one the caller reads; a header with none of them is rejected.
/// Lines for which `skip` is true are ignored. Text with no line at all is
/// [`SmiError::Empty`] when a header is expected.
fn read_table<R: Default>(
    text: &str,
    columns: Option<&[&str]>,
    known: &dyn Fn(&str) -> bool,
    skip: &dyn Fn(&str) -> bool,
    fill: &dyn Fn(&mut R, &str, &str) -> Result<(), String>,
) -> Result<Table<R>, SmiError> {
    if let Some(e) = no_data(text) {
        return Err(e);
    }
    let mut it = rows(text);
    let cols: Vec<String> = match columns {
        Some(c) => c.iter().map(|s| header_name(s)).collect(),
        None => match it.next() {
            None => return Err(SmiError::Empty),
            Some((n, line, f)) => {
                let c: Vec<String> = f.iter().map(|s| header_name(s)).collect();
                if !c.iter().any(|c| known(c)) {
                    return Err(SmiError::BadHeader(line.chars().take(200).collect()));
                }
                check_columns(&f, Some(n), known)?;
                c
            }
        },
    };
    if let Some(c) = columns {
        check_columns(c, None, known)?;
    }
    // nvidia-smi ends every line it prints: a last line without its end was cut short, and
    // its last field may be cut to a shorter number of the same shape (a power limit of 400
    // read as 40: trial 11, in a copied log).
    let cut_line = (!last_line_ended(text)).then(|| text.trim_end_matches([' ', '\t', '\r']).lines().count());
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for (n, line, f) in it {
        if skip(line.trim()) {
            continue;
        }
        if Some(n) == cut_line {
            errors.push(RowError {
                line: n,
                text: line.chars().take(200).collect(),
                problem: "the last line has no line end: the output was cut short, and its last field may be too".into(),
            });
            continue;
        }
        if f.len() != cols.len() {
            errors.push(RowError {
                line: n,
                text: line.chars().take(200).collect(),
                problem: format!("{} fields, expected {}", f.len(), cols.len()),
            });
            continue;
        }
        let mut r = R::default();
        let problems: Vec<String> = cols.iter().zip(&f).filter_map(|(c, v)| fill(&mut r, c, v).err()).collect();
        if !problems.is_empty() {
            let headerless = columns.is_some();
            errors.push(RowError {
                line: n,
                text: line.chars().take(200).collect(),
                problem: if headerless {
                    format!(
                        "{} (headerless row rejected: is the column list the query it was produced with?)",
                        problems.join("; ")
                    )
                } else {
                    problems.join("; ")
                },
            });
            if headerless {
                continue;
            }
        }
        out.push((n, line.chars().take(200).collect(), r));
    }
    Ok((cols, out, errors))
}

/// Parses `--query-gpu` CSV. With `columns = None` the first line is the header; otherwise
/// the text is headerless and `columns` must be the `--query-gpu` list it was produced with
/// (e.g. [`GPU_QUERY`]). Columns this parser does not know are read and ignored. Errors: an
/// nvidia-smi error text, or a header naming no known column. A row with the wrong field
/// count goes to `row_errors`, and so does a row with an unreadable value (kept with that
/// field `None` under a header; rejected whole when headerless).
pub fn parse_gpus(text: &str, columns: Option<&[&str]>) -> Result<GpuTable, SmiError> {
    let fill = |g: &mut GpuReading, c: &str, v: &str| {
        let reading = match c {
            "index" => return put(&mut g.index, integer(c, v)),
            "minor_number" => return put(&mut g.minor, integer(c, v)),
            "mig.mode.current" => return read_mig_mode(g, c, v),
            "uuid" => return put(&mut g.uuid, free_text(v)),
            "name" => return put(&mut g.name, free_text(v)),
            "utilization.gpu" => &mut g.util_pct,
            "utilization.encoder" => &mut g.enc_pct,
            "utilization.decoder" => &mut g.dec_pct,
            "memory.used" => &mut g.mem_used_mib,
            "memory.total" => &mut g.mem_total_mib,
            "power.draw" => &mut g.power_w,
            "power.limit" => &mut g.power_limit_w,
            _ => return Ok(()),
        };
        let r = put(reading, number(c, v));
        if r.is_err() {
            g.unreadable.push(c.to_string());
        }
        r
    };
    let (columns, rows, mut row_errors) = read_table(text, columns, &known_gpu_column, &|_| false, &fill)?;
    let gpus = reject_disagreeing_gpus(rows, &mut row_errors);
    Ok(GpuTable { columns, gpus, row_errors })
}

/// Rows naming the same GPU (same `index` or same `uuid`) must agree: when they differ, no
/// row can be believed over another, so every row of that GPU becomes a [`RowError`] and the
/// GPU is unknown. Identical repeats say the same thing and are kept once.
fn reject_disagreeing_gpus(rows: Vec<Read<GpuReading>>, errors: &mut Vec<RowError>) -> Vec<GpuReading> {
    let mut by_key: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (p, (_, _, g)) in rows.iter().enumerate() {
        if let Some(i) = g.index {
            by_key.entry(format!("index {i}")).or_default().push(p);
        }
        if let Some(u) = &g.uuid {
            by_key.entry(format!("uuid {u}")).or_default().push(p);
        }
    }
    let mut bad: BTreeMap<usize, String> = BTreeMap::new();
    let mut repeat: BTreeSet<usize> = BTreeSet::new();
    for (key, ps) in &by_key {
        let Some((&first, rest)) = ps.split_first() else { continue };
        if rest.iter().all(|&p| rows[p].2 == rows[first].2) {
            repeat.extend(rest.iter().copied());
            continue;
        }
        let lines: Vec<String> = ps.iter().map(|&p| rows[p].0.to_string()).collect();
        for &p in ps {
            bad.entry(p).or_insert_with(|| {
                format!(
                    "GPU {key} is on lines {} with different readings; that GPU is unknown this read",
                    lines.join(", ")
                )
            });
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for (p, (line, text, g)) in rows.into_iter().enumerate() {
        if let Some(problem) = bad.remove(&p) {
            errors.push(RowError { line, text, problem });
        } else if !repeat.contains(&p) {
            out.push(g);
        }
    }
    errors.sort_by_key(|e| e.line);
    out
}

/// Why a `--query-gpu` table gives no GPU to judge, as the daemon names it in
/// `gpu_reaper_read_errors_total`: `no_gpus` (no row at all) or `no_readable_rows` (rows, but
/// none with a readable index). `None` when some GPU has an index.
pub fn no_gpus_kind(t: &GpuTable) -> Option<&'static str> {
    if t.gpus.iter().any(|g| g.index.is_some()) {
        None
    } else if t.gpus.is_empty() && t.row_errors.is_empty() {
        Some("no_gpus")
    } else {
        Some("no_readable_rows")
    }
}

fn known_apps_column(c: &str) -> bool {
    matches!(c, "gpu_uuid" | "pid" | "used_memory" | "used_gpu_memory" | "process_name" | "name")
}

/// True when `line` looks like a `--query-compute-apps` header rather than a data row: some
/// field is a known column name or carries a unit in brackets (`used_memory [MiB]`).
pub fn looks_like_apps_header(line: &str) -> bool {
    line.split(',').any(|f| {
        let f = f.trim();
        known_apps_column(&header_name(f)) || (f.contains(" [") && f.ends_with(']') && !f.starts_with('['))
    })
}

/// The line nvidia-smi may print instead of compute-app rows.
const NO_PROCESSES: &str = "No running processes found";

/// Parses `--query-compute-apps` CSV, header first (or headerless with `columns`). Text with no
/// line at all is [`SmiError::Empty`] (with `--format=csv` the header is always printed). No
/// rows (or only "No running processes found") means no process was listed, which is not the same
/// as an idle GPU (see smi-util-without-processes: PIDs in another namespace are not listed).
pub fn parse_apps(text: &str, columns: Option<&[&str]>) -> Result<AppsTable, SmiError> {
    let fill = |a: &mut ComputeApp, c: &str, v: &str| match c {
        "gpu_uuid" => put(&mut a.gpu_uuid, free_text(v)),
        "pid" => put(&mut a.pid, integer(c, v)),
        "used_memory" | "used_gpu_memory" => put(&mut a.used_memory_mib, number(c, v)),
        "process_name" | "name" => put(&mut a.process_name, free_text(v)),
        _ => Ok(()),
    };
    let said_none = text.lines().any(|l| l.trim() == NO_PROCESSES);
    let mut kept: String = text
        .lines()
        .filter(|l| l.trim() != NO_PROCESSES)
        .map(|l| format!("{l}\n"))
        .collect();
    // A cut last line stays cut (see `read_table`).
    if !last_line_ended(text) && text.lines().last().is_some_and(|l| l.trim() != NO_PROCESSES) {
        kept.pop();
    }
    let text = kept;
    let (columns, apps, row_errors) = match read_table(&text, columns, &known_apps_column, &|_| false, &fill) {
        // "No running processes found" alone says so explicitly; empty text says nothing.
        Err(SmiError::Empty) if said_none => (Vec::new(), Vec::new(), Vec::new()),
        r => r?,
    };
    let apps = apps.into_iter().map(|(_, _, a)| a).collect();
    Ok(AppsTable { columns, apps, row_errors })
}

/// One device line of `nvidia-smi -L`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedDevice {
    /// `gpu` or `mig`.
    pub kind: &'static str,
    /// The device number on its line (`GPU 0:` / `Device 1:`).
    pub number: u32,
    /// The UUID as printed.
    pub uuid: String,
    /// For a MIG device: the parent GPU's UUID, from the old `MIG-GPU-<uuid>/gi/ci` form, or
    /// from the preceding `GPU` line for the new `MIG-<uuid>` form.
    pub parent_uuid: Option<String>,
}

/// Parses `nvidia-smi -L`: GPU lines and indented MIG lines, old and new MIG UUID forms,
/// any whitespace. Lines that match neither are ignored.
pub fn parse_list(text: &str) -> Vec<ListedDevice> {
    let mut out = Vec::new();
    let mut parent: Option<String> = None;
    for line in text.lines() {
        let l = line.trim();
        let Some(open) = l.rfind("(UUID:") else { continue };
        let uuid = l[open + 6..].trim().trim_end_matches(')').trim().to_string();
        let head: Vec<&str> = l[..open].split_whitespace().collect();
        if head.first() == Some(&"GPU") {
            let number = head.get(1).and_then(|s| s.trim_end_matches(':').parse().ok()).unwrap_or(0);
            parent = Some(uuid.clone());
            out.push(ListedDevice {
                kind: "gpu",
                number,
                uuid,
                parent_uuid: None,
            });
        } else if head.first() == Some(&"MIG") {
            let number = head
                .iter()
                .position(|w| *w == "Device")
                .and_then(|p| head.get(p + 1))
                .and_then(|s| s.trim_end_matches(':').parse().ok())
                .unwrap_or(0);
            let embedded = uuid
                .strip_prefix("MIG-")
                .filter(|r| r.starts_with("GPU-"))
                .and_then(|r| r.split('/').next());
            out.push(ListedDevice {
                kind: "mig",
                number,
                parent_uuid: embedded.map(str::to_string).or_else(|| parent.clone()),
                uuid,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_reading_is_named_so_its_row_is_no_evidence() {
        let t = parse_gpus(
            "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W]\n\
             0, GPU-a, 0, 3, 81920, ERR!, 400.00\n\
             1, GPU-b, nan, 3, 81920, [N/A], 400.00\n\
             2, GPU-c, 0, 3, 81920, 61.5, 400.00\n",
            None,
        )
        .unwrap();
        assert_eq!(t.gpus[0].unreadable, ["power.draw"]);
        assert_eq!(t.gpus[0].power_w, None);
        assert_eq!(t.gpus[1].unreadable, ["utilization.gpu"]);
        // `[N/A]` is missing, not unreadable.
        assert_eq!((t.gpus[1].power_w, t.gpus[1].unreadable.len()), (None, 1));
        assert!(t.gpus[2].unreadable.is_empty());
        assert_eq!(t.row_errors.len(), 2);
    }

    #[test]
    fn one_gpu_on_two_rows_that_disagree_is_unknown_and_empty_text_is_no_data() {
        let h = "index, uuid, utilization.gpu [%], memory.used [MiB]\n";
        // Same index, other UUID and readings; and same UUID under another index.
        for rows in [
            "0, GPU-a, 0, 10\n1, GPU-b, 3, 5\n0, GPU-c, 99, 10\n",
            "0, GPU-a, 0, 10\n1, GPU-b, 3, 5\n2, GPU-a, 0, 10\n",
        ] {
            let t = parse_gpus(&format!("{h}{rows}"), None).unwrap();
            assert_eq!(t.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [Some(1)], "{rows}: {t:?}");
            assert_eq!(t.row_errors.iter().map(|e| e.line).collect::<Vec<_>>(), [2, 4], "{rows}: {t:?}");
            assert!(t.row_errors[0].problem.contains("different readings"), "{t:?}");
        }
        let t = parse_gpus(&format!("{h}0, GPU-a, 0, 10\n0, GPU-a, 0, 10\n"), None).unwrap();
        assert_eq!(t.gpus.len(), 1, "an identical repeat counts once");
        assert!(t.row_errors.is_empty());
        assert_eq!(parse_gpus("", None), Err(SmiError::Empty));
        assert_eq!(parse_gpus(h, None).map(|t| no_gpus_kind(&t)), Ok(Some("no_gpus")));
        assert_eq!(parse_apps(" \n", None), Err(SmiError::Empty));
        assert!(parse_apps("No running processes found\n", None).unwrap().apps.is_empty());
    }

    #[test]
    fn header_or_data() {
        assert!(looks_like_header("index, uuid, utilization.gpu [%]"));
        assert!(looks_like_header("name, temperature.gpu"));
        assert!(looks_like_header("memory.used [MiB]"));
        assert!(!looks_like_header("0, GPU-a, [N/A], 10, 80, [Not Supported], 400"));
        assert!(!looks_like_header("12.5, 300"));
        assert!(!looks_like_header("[Not Supported]"));
    }

    #[test]
    fn an_unreadable_value_is_a_row_error_and_missing_never_zero() {
        let head = "index, uuid, utilization.gpu [%], memory.used [MiB]\n";
        for bad in ["abc", "nan", "NaN", "inf", "-inf", "1e999", "12.5.3", "0x10"] {
            let t = parse_gpus(&format!("{head}0, GPU-a, {bad}, 100\n"), None).unwrap();
            assert_eq!(t.gpus.len(), 1, "{bad}: the row is kept under a header");
            assert_eq!(t.gpus[0].util_pct, None, "{bad}");
            assert_eq!(t.gpus[0].mem_used_mib, Some(100.0), "{bad}: other fields still read");
            assert_eq!(t.row_errors.len(), 1, "{bad}");
            let e = &t.row_errors[0];
            assert_eq!(e.line, 2, "{bad}");
            assert!(
                e.problem.contains("utilization.gpu") && e.problem.contains(bad),
                "{bad}: {}",
                e.problem
            );
        }
        for missing in ["[N/A]", "[Not Supported]", "[Insufficient Permissions]", "N/A", ""] {
            let t = parse_gpus(&format!("{head}0, GPU-a, {missing}, 100\n"), None).unwrap();
            assert_eq!((t.gpus[0].util_pct, t.row_errors.len()), (None, 0), "{missing:?}");
        }
        // Other bracketed text is an error on the GPU: the reading is unreadable, not missing.
        for error in ["[Unknown Error]", "[GPU requires reset]", "[Unknown]"] {
            let t = parse_gpus(&format!("{head}0, GPU-a, {error}, 100\n"), None).unwrap();
            assert_eq!(t.gpus[0].util_pct, None, "{error}");
            assert_eq!(t.gpus[0].unreadable, ["utilization.gpu"], "{error}");
            assert!(t.row_errors[0].problem.contains("is an error"), "{error}: {:?}", t.row_errors);
        }
        for ok in ["45", "45 %", "12.5", "0"] {
            let t = parse_gpus(&format!("{head}0, GPU-a, {ok}, 100\n"), None).unwrap();
            assert!(t.gpus[0].util_pct.is_some() && t.row_errors.is_empty(), "{ok}");
        }
        let t = parse_gpus(&format!("{head}x1, GPU-a, 5, 100\n"), None).unwrap();
        assert!(t.gpus[0].index.is_none() && t.row_errors[0].problem.contains("index"));
        let a = parse_apps("gpu_uuid, pid, used_memory [MiB]\nGPU-a, -3, 10\n", None).unwrap();
        assert!(a.apps[0].pid.is_none() && a.row_errors[0].problem.contains("pid"), "{a:?}");
    }

    #[test]
    fn a_header_unit_other_than_nvidia_smis_own_is_refused_naming_column_and_unit() {
        let rows = "\n0, GPU-a, 97, 1, 80, 65100, 400\n";
        let head = [
            "index",
            "uuid",
            "utilization.gpu [%]",
            "memory.used [MiB]",
            "memory.total [MiB]",
            "power.draw [W]",
            "power.limit [W]",
        ];
        let t = parse_gpus(&format!("{}{rows}", head.join(", ")), None).unwrap();
        assert_eq!((t.gpus[0].mem_used_mib, t.gpus[0].power_w), (Some(1.0), Some(65100.0)));
        for (col, bad, unit) in [
            (4, "memory.used [GiB]", "GiB"),
            (6, "power.draw [mW]", "mW"),
            (7, "power.limit [kW]", "kW"),
            (3, "utilization.gpu [ratio]", "ratio"),
            (5, "memory.total [MB]", "MB"),
            (1, "index [n]", "n"),
        ] {
            let mut h = head;
            h[col - 1] = bad;
            let e = parse_gpus(&format!("# a comment\n{}{rows}", h.join(", ")), None).unwrap_err();
            let SmiError::BadColumn { place, problem } = &e else {
                panic!("{bad}: {e:?}")
            };
            assert_eq!(place, &format!("header line 2, column {col}"), "{bad}");
            assert!(problem.contains(bad) && problem.contains(&format!("{unit:?}")), "{bad}: {e}");
        }
        // Headerless, a column list with a wrong unit is refused the same way.
        let e = parse_gpus("0, 1\n", Some(&["index", "memory.used [GiB]"])).unwrap_err();
        assert!(
            e.to_string().contains("column list, column 2") && e.to_string().contains("GiB"),
            "{e}"
        );
        // A column this parser does not read keeps whatever unit it has.
        assert!(parse_gpus("index, clocks.sm [MHz], temperature.gpu [C]\n0, 1410, 40\n", None).is_ok());
        let e = parse_apps("gpu_uuid, pid, used_memory [KiB]\nGPU-a, 7, 10\n", None).unwrap_err();
        assert!(
            e.to_string().contains("used_memory [KiB]") && e.to_string().contains("column 3"),
            "{e}"
        );
    }

    #[test]
    fn a_value_whose_unit_is_not_its_columns_own_is_unreadable_never_stripped() {
        let head = "index, utilization.gpu [%], memory.used [MiB], power.draw [W]\n";
        let t = parse_gpus(&format!("{head}0, 97 %, 30000 MiB, 300.12 W\n1, 97%, 1, 65\n"), None).unwrap();
        assert!(t.row_errors.is_empty(), "{t:?}");
        assert_eq!(
            (t.gpus[0].util_pct, t.gpus[0].mem_used_mib, t.gpus[0].power_w),
            (Some(97.0), Some(30000.0), Some(300.12))
        );
        for (row, column, value) in [
            ("0, 97, 1 GiB, 300", "memory.used", "1 GiB"),
            ("0, 97, 30000, 65 mW", "power.draw", "65 mW"),
            ("0, 97, 30000, 70 kW", "power.draw", "70 kW"),
            ("0, 97 W, 30000, 300", "utilization.gpu", "97 W"),
            ("0, 97, 30000 %, 300", "memory.used", "30000 %"),
            ("0, 97, 12abc, 300", "memory.used", "12abc"),
        ] {
            let t = parse_gpus(&format!("{head}{row}\n"), None).unwrap();
            assert_eq!(t.gpus[0].unreadable, [column], "{row}");
            assert_eq!(t.row_errors.len(), 1, "{row}");
            let e = &t.row_errors[0];
            assert!(e.line == 2 && e.problem.contains(&format!("{column} {value:?}")), "{row}: {e:?}");
        }
        let g = |row: &str| parse_gpus(&format!("{head}{row}\n"), None).unwrap().gpus[0].clone();
        assert_eq!(g("0, 97, 1 GiB, 300").mem_used_mib, None);
        assert_eq!(g("0, 97, 30000, 65 mW").power_w, None);
        let a = parse_apps("gpu_uuid, pid, used_memory [MiB]\nGPU-a, 7, 10 GiB\nGPU-b, 8, 10 MiB\n", None).unwrap();
        assert_eq!(a.apps.iter().map(|a| a.used_memory_mib).collect::<Vec<_>>(), [None, Some(10.0)]);
        assert!(a.row_errors[0].problem.contains("used_memory \"10 GiB\""), "{a:?}");
    }

    #[test]
    fn a_header_naming_a_field_twice_is_refused_naming_both_columns() {
        let e = parse_gpus("index, uuid, utilization.gpu [%], utilization.gpu [%]\n0, GPU-a, 97, 0\n", None).unwrap_err();
        let SmiError::BadColumn { place, problem } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(place, "header line 1, column 4");
        assert!(problem.contains("utilization.gpu") && problem.contains("columns 3 and 4"), "{e}");
        let e = parse_gpus("0, 1, 2\n", Some(&["index", "power.draw", "power.draw"])).unwrap_err();
        assert!(
            e.to_string().contains("column list, column 3") && e.to_string().contains("columns 2 and 3"),
            "{e}"
        );
        // Two names for one reading of a compute app are the same field named twice.
        let e = parse_apps("gpu_uuid, used_memory [MiB], used_gpu_memory [MiB]\nGPU-a, 10, 20\n", None).unwrap_err();
        assert!(
            e.to_string().contains("used_memory") && e.to_string().contains("columns 2 and 3"),
            "{e}"
        );
        // A column this parser does not read may repeat.
        assert!(parse_gpus("index, temperature.gpu, temperature.gpu\n0, 40, 40\n", None).is_ok());
    }

    /// Trial 11: a last row without its line end was read, its last field cut short (a power
    /// limit of 400 read as 40). It is a row error; an ended last line (CRLF or trailing
    /// blanks after it included) is read.
    #[test]
    fn a_last_row_without_its_line_end_is_a_row_error() {
        let head = "index, uuid, utilization.gpu [%], power.draw [W], power.limit [W]\n0, GPU-a, 97, 300.5, 400\n";
        let t = parse_gpus(&format!("{head}1, GPU-b, 97, 300.5, 40"), None).unwrap();
        assert_eq!(t.gpus.len(), 1);
        assert_eq!(t.row_errors.len(), 1, "{t:?}");
        assert_eq!(t.row_errors[0].line, 3);
        assert!(t.row_errors[0].problem.contains("no line end"), "{t:?}");
        for tail in ["\n", "\r\n", "\n  ", "\n\n"] {
            let t = parse_gpus(&format!("{head}1, GPU-b, 97, 300.5, 400{tail}"), None).unwrap();
            assert_eq!((t.gpus.len(), t.row_errors.len()), (2, 0), "{tail:?}: {t:?}");
        }
        let a = parse_apps("gpu_uuid, pid, used_memory [MiB]\nGPU-a, 7, 10\nGPU-b, 8, 1", None).unwrap();
        assert_eq!((a.apps.len(), a.row_errors.len()), (1, 1), "{a:?}");
    }

    #[test]
    fn a_headerless_row_that_does_not_fit_the_column_list_is_rejected_whole() {
        let t = parse_gpus(
            "0, GPU-a, 5\n1, GPU-b, 5, 100\n",
            Some(&["index", "uuid", "utilization.gpu", "memory.used"]),
        )
        .unwrap();
        assert_eq!(t.gpus.len(), 1);
        assert_eq!(t.row_errors[0].problem, "3 fields, expected 4");
        let t = parse_gpus(
            "0, GPU-a, Tesla T4, 100\n",
            Some(&["index", "uuid", "utilization.gpu", "memory.used"]),
        )
        .unwrap();
        assert!(t.gpus.is_empty(), "{t:?}");
        assert!(t.row_errors[0].problem.contains("utilization.gpu \"Tesla T4\" is not a number"));
    }

    #[test]
    fn minor_numbers_are_read_missing_or_unreadable_never_the_index() {
        let t = parse_gpus(
            "index, uuid, utilization.gpu [%], minor_number\n\
             0, GPU-a, 5, 6\n\
             1, GPU-b, 5, [N/A]\n\
             2, GPU-c, 5, x7\n",
            None,
        )
        .unwrap();
        let minors: Vec<Option<u32>> = t.gpus.iter().map(|g| g.minor).collect();
        assert_eq!(minors, [Some(6), None, None]);
        assert_eq!(t.row_errors.len(), 1);
        assert!(t.row_errors[0].problem.contains("minor_number"), "{:?}", t.row_errors);
        // Headerless, with the enforcer's own list and with the list without minor_number.
        let row = "3, GPU-d, 0, 3, 81920, 60.5, 400.00";
        let t = parse_gpus(&format!("{row}, 0, [N/A]\n"), Some(&GPU_QUERY)).unwrap();
        assert_eq!((t.gpus[0].index, t.gpus[0].minor), (Some(3), Some(0)));
        let t = parse_gpus(&format!("{row}, 0\n"), Some(&GPU_QUERY_WITHOUT_MIG)).unwrap();
        assert_eq!((t.gpus[0].index, t.gpus[0].minor), (Some(3), Some(0)));
        let t = parse_gpus(&format!("{row}\n"), Some(&GPU_QUERY_WITHOUT_MINOR)).unwrap();
        assert_eq!((t.gpus[0].index, t.gpus[0].minor), (Some(3), None));
        // The old headerless list does not fit rows that carry the minor number.
        let t = parse_gpus(&format!("{row}, 0\n"), Some(&GPU_QUERY_WITHOUT_MINOR)).unwrap();
        assert!(t.gpus.is_empty() && t.row_errors.len() == 1, "{t:?}");
    }

    #[test]
    fn each_query_list_is_the_next_one_plus_its_last_field() {
        assert_eq!(GPU_QUERY[..8], GPU_QUERY_WITHOUT_MIG);
        assert_eq!(GPU_QUERY_WITHOUT_MIG[..7], GPU_QUERY_WITHOUT_MINOR);
    }

    #[test]
    fn mig_modes_are_read_missing_or_unreadable() {
        let t = parse_gpus(
            "index, uuid, utilization.gpu [%], mig.mode.current\n\
             0, GPU-a, 5, Enabled\n\
             1, GPU-b, 5, Disabled\n\
             2, GPU-c, 5, [N/A]\n\
             3, GPU-d, 5, Pending\n",
            None,
        )
        .unwrap();
        let modes: Vec<Option<bool>> = t.gpus.iter().map(|g| g.mig_enabled).collect();
        assert_eq!(modes, [Some(true), Some(false), None, None]);
        assert_eq!(t.row_errors.len(), 1);
        assert!(
            t.row_errors[0].problem.contains("mig.mode.current \"Pending\""),
            "{:?}",
            t.row_errors
        );
        // Headerless with the enforcer's own list: MIG mode is its last field.
        let t = parse_gpus("0, GPU-a, [N/A], 3, 81920, 63.0, 400.00, 0, Enabled\n", Some(&GPU_QUERY)).unwrap();
        assert_eq!((t.gpus[0].minor, t.gpus[0].mig_enabled), (Some(0), Some(true)));
    }
}
