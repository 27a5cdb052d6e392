//! Reading and writing a trace folder: `jobs.csv` and `samples.csv` (see `traces/README.md`).
//!
//! Reading is strict by default: the first bad row is an error naming file, line and column.
//! In lenient mode bad rows are skipped and listed in the [`ReadReport`]. A value is never
//! guessed: an empty cell is missing, and text that is not a finite number is an error, never 0.
//!
//! Deliberate handling of awkward but valid input:
//! * **Out-of-order samples** are sorted by time (then job, node, GPU); the number of rows
//!   that came earlier than the row before them is reported.
//! * **Duplicate samples** (same `t_s`, `node`, `gpu`): exact copies collapse into one;
//!   copies that disagree in any value are all dropped, leaving a gap (the replay then sees
//!   missing evidence, which can only lower a verdict). Both are counted.

use crate::alloc::{format_alloc, parse_alloc};
use crate::error::{RowLog, RowProblem, TraceError};
use crate::records::{check_width, csv_file_reader, each_record, CrlfToLf};
use crate::{JobFacts, Sample, Trace, TraceJob, Truth};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Columns of `jobs.csv`, in the order written.
pub const JOBS_COLUMNS: [&str; 12] = [
    "job_id",
    "user",
    "account",
    "partition",
    "qos",
    "name",
    "comment",
    "start_s",
    "end_s",
    "time_limit_s",
    "gpus",
    "alloc",
];

/// Columns of `samples.csv`, in the order written; `truth` follows when present.
pub const SAMPLES_COLUMNS: [&str; 11] = [
    "t_s",
    "job_id",
    "node",
    "gpu",
    "util_pct",
    "mem_used_mib",
    "mem_total_mib",
    "power_w",
    "power_limit_w",
    "procs",
    "sm_active",
];

/// The longest time a trace may cover, seconds: 366 days, the cap of `sim sweep --days`. The
/// replay walks a trace one cycle per interval, so a trace whose times (earliest `start_s` or
/// `t_s` to latest `end_s` or `t_s`) lie further apart is refused by [`read_trace`], and a job
/// running longer is a bad row of `jobs.csv`.
pub const MAX_SPAN_S: i64 = 366 * 86_400;

/// What reading a trace found besides the rows it kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Rows skipped in lenient mode, with the reason (file, line, column, problem).
    pub skipped: Vec<RowProblem>,
    /// Sample rows stamped earlier than the row before them in the file (they are sorted).
    pub out_of_order_rows: u64,
    /// Sample rows that exactly repeat another row's `t_s,node,gpu` and values (collapsed).
    pub exact_duplicates: u64,
    /// Sample rows sharing `t_s,node,gpu` with a row holding other values (all dropped).
    pub conflicting_duplicates: u64,
}

/// Reads `DIR/jobs.csv` and `DIR/samples.csv`. `lenient` skips malformed rows (listed in the
/// report) instead of failing on the first one. The result satisfies [`Trace`]'s invariants.
///
/// # Errors
/// I/O errors and bad rows (strict mode), naming file, line and column; and, in both modes, a
/// trace whose times span more than [`MAX_SPAN_S`], naming the row and column of the latest
/// time and where the earliest was read.
pub fn read_trace(dir: &Path, lenient: bool) -> Result<(Trace, ReadReport), TraceError> {
    let mut log = RowLog::new(lenient);
    let mut trace = Trace::default();
    let jobs_path = dir.join("jobs.csv");
    let samples_path = dir.join("samples.csv");
    let mut extent = Extent {
        limited: true,
        ..Extent::default()
    };
    read_jobs(&jobs_path, &mut trace, &mut log, &mut extent)?;
    let mut report = ReadReport::default();
    read_samples(&samples_path, &mut trace, &mut log, &mut report, &mut extent)?;
    extent.check()?;
    report.skipped = log.skipped;
    Ok((trace, report))
}

/// The earliest and latest times of the rows kept, each with where it was read (a
/// [`RowProblem`] whose `problem` is filled in when the span is refused). `limited`: whether
/// [`MAX_SPAN_S`] applies (it does to a trace read for replay, not to an importer's `--jobs`).
#[derive(Default)]
struct Extent {
    limited: bool,
    earliest: Option<(i64, RowProblem)>,
    latest: Option<(i64, RowProblem)>,
}

impl Extent {
    fn see(&mut self, row: &Row<'_>, earliest: (i64, &str), latest: (i64, &str)) {
        if self.earliest.as_ref().is_none_or(|e| earliest.0 < e.0) {
            self.earliest = Some((earliest.0, row.problem(earliest.1, String::new())));
        }
        if self.latest.as_ref().is_none_or(|l| latest.0 > l.0) {
            self.latest = Some((latest.0, row.problem(latest.1, String::new())));
        }
    }

    /// Refuses a span above [`MAX_SPAN_S`], pointing at the latest time.
    fn check(self) -> Result<(), TraceError> {
        let (Some((lo, lo_at)), Some((hi, mut hi_at))) = (self.earliest, self.latest) else {
            return Ok(());
        };
        let span_s = i128::from(hi) - i128::from(lo);
        if !self.limited || span_s <= i128::from(MAX_SPAN_S) {
            return Ok(());
        }
        hi_at.problem = format!(
            "{} {hi} is {} days after the earliest time of the trace ({} {lo}, {} line {}); a trace may span at most {} days",
            hi_at.column,
            span_s / 86_400,
            lo_at.column,
            lo_at
                .file
                .file_name()
                .map_or_else(|| lo_at.file.display().to_string(), |n| n.to_string_lossy().into_owned()),
            lo_at.line,
            MAX_SPAN_S / 86_400
        );
        Err(TraceError::Row(hi_at))
    }
}

struct Csv {
    path: PathBuf,
    reader: csv::Reader<CrlfToLf<std::io::BufReader<std::fs::File>>>,
    cols: HashMap<String, usize>,
    header: Vec<String>,
}

impl Csv {
    fn open(path: &Path, required: &[&str]) -> Result<Csv, TraceError> {
        let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
        let mut reader = csv_file_reader(file);
        let header: Vec<String> = reader
            .headers()
            .map_err(|e| TraceError::file(path, format!("cannot read the header: {e}")))?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        // Operator trial 17: a 0-byte samples.csv was told "the header lacks column \"t_s\"
        // (header: )" while a header-only one is told it holds no sample.
        if header.iter().all(String::is_empty) {
            let what = match std::fs::metadata(path) {
                Ok(m) if m.len() == 0 => "the file is empty (0 bytes)".to_string(),
                _ => "the file holds no header line (only blank lines)".to_string(),
            };
            return Err(TraceError::file(
                path,
                format!(
                    "{what}, so it holds no row; expected a header line with the columns {}",
                    required.join(",")
                ),
            ));
        }
        let mut cols = HashMap::new();
        for (i, h) in header.iter().enumerate() {
            if cols.insert(h.clone(), i).is_some() {
                return Err(TraceError::Row(RowProblem {
                    file: path.to_path_buf(),
                    line: 1,
                    column: h.clone(),
                    column_number: i + 1,
                    problem: format!("column {h:?} appears twice in the header"),
                }));
            }
        }
        for r in required {
            if !cols.contains_key(*r) {
                return Err(TraceError::Row(RowProblem {
                    file: path.to_path_buf(),
                    line: 1,
                    column: (*r).to_string(),
                    column_number: 0,
                    problem: format!("the header lacks column {r:?} (header: {})", header.join(",")),
                }));
            }
        }
        Ok(Csv {
            path: path.to_path_buf(),
            reader,
            cols,
            header,
        })
    }
}

/// One record with its position, for field access that reports file, line and column.
struct Row<'a> {
    path: &'a Path,
    cols: &'a HashMap<String, usize>,
    rec: &'a csv::StringRecord,
    line: u64,
}

impl Row<'_> {
    fn problem(&self, col: &str, problem: String) -> RowProblem {
        RowProblem {
            file: self.path.to_path_buf(),
            line: self.line,
            column: col.to_string(),
            column_number: self.cols.get(col).map_or(0, |i| i + 1),
            problem,
        }
    }

    fn text(&self, col: &str) -> &str {
        self.cols.get(col).and_then(|&i| self.rec.get(i)).unwrap_or("")
    }

    fn int<T: std::str::FromStr>(&self, col: &str) -> Result<T, RowProblem> {
        let t = self.text(col).trim();
        if t.is_empty() {
            return Err(self.problem(col, "empty, but this column is required".into()));
        }
        t.parse::<T>()
            .map_err(|_| self.problem(col, format!("{t:?} is not a valid integer here")))
    }

    fn opt_int<T: std::str::FromStr>(&self, col: &str) -> Result<Option<T>, RowProblem> {
        if self.text(col).trim().is_empty() {
            return Ok(None);
        }
        self.int(col).map(Some)
    }

    fn opt_f64(&self, col: &str) -> Result<Option<f64>, RowProblem> {
        let t = self.text(col).trim();
        if t.is_empty() {
            return Ok(None);
        }
        match t.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(self.problem(col, format!("{t:?} is not a finite number (leave the cell empty for missing)"))),
        }
    }
}

fn rows_of(csv: &mut Csv, log: &mut RowLog, mut each: impl FnMut(&Row<'_>) -> Result<(), RowProblem>) -> Result<(), TraceError> {
    let Csv {
        path,
        reader,
        cols,
        header,
    } = csv;
    each_record(reader, path, log, |rec, line| {
        check_width(path, header, rec, line)?;
        each(&Row { path, cols, rec, line })
    })
}

/// Reads a `jobs.csv` alone (for importers' `--jobs`): the nodes and jobs of a trace with no
/// samples, sorted by (`start_s`, `job_id`). The [`MAX_SPAN_S`] limit does not apply here
/// (the importers do not walk time); [`read_trace`] applies it to the imported trace.
pub fn read_jobs_file(path: &Path, log: &mut RowLog) -> Result<Trace, TraceError> {
    let mut trace = Trace::default();
    read_jobs(path, &mut trace, log, &mut Extent::default())?;
    Ok(trace)
}

fn read_jobs(path: &Path, trace: &mut Trace, log: &mut RowLog, extent: &mut Extent) -> Result<(), TraceError> {
    let mut csv = Csv::open(path, &JOBS_COLUMNS)?;
    let mut seen: HashMap<String, u64> = HashMap::new();
    let nodes = &mut trace.nodes;
    let jobs = &mut trace.jobs;
    rows_of(&mut csv, log, |row| {
        let job_id = row.text("job_id").trim().to_string();
        if job_id.is_empty() {
            return Err(row.problem("job_id", "empty job id".into()));
        }
        if let Some(first) = seen.get(&job_id) {
            return Err(row.problem("job_id", format!("job {job_id:?} already defined on line {first}")));
        }
        let start_s: i64 = row.int("start_s")?;
        let end_s: i64 = row.int("end_s")?;
        if end_s < start_s {
            return Err(row.problem("end_s", format!("end_s {end_s} is before start_s {start_s}")));
        }
        let run_s = i128::from(end_s) - i128::from(start_s);
        if extent.limited && run_s > i128::from(MAX_SPAN_S) {
            return Err(row.problem(
                "end_s",
                format!(
                    "end_s {end_s} is {} days after start_s {start_s}; a job (and a trace) may span at most {} days",
                    run_s / 86_400,
                    MAX_SPAN_S / 86_400
                ),
            ));
        }
        let time_limit_s: Option<i64> = row.opt_int("time_limit_s")?;
        if let Some(t) = time_limit_s {
            if t <= 0 {
                return Err(row.problem("time_limit_s", format!("time limit {t} is not positive")));
            }
        }
        let gpus: usize = row.int("gpus")?;
        // Intern into a scratch copy so a rejected row leaves no node behind.
        let mut scratch = nodes.clone();
        let alloc = parse_alloc(row.text("alloc"), &mut scratch).map_err(|e| row.problem("alloc", e))?;
        if alloc.len() != gpus {
            return Err(row.problem("gpus", format!("gpus is {gpus} but alloc lists {} GPUs", alloc.len())));
        }
        *nodes = scratch;
        seen.insert(job_id.clone(), row.line);
        extent.see(row, (start_s, "start_s"), (end_s, "end_s"));
        jobs.push(TraceJob {
            facts: JobFacts {
                job_id,
                user: row.text("user").to_string(),
                account: row.text("account").to_string(),
                partition: row.text("partition").to_string(),
                qos: row.text("qos").to_string(),
                name: row.text("name").to_string(),
                comment: row.text("comment").to_string(),
                start_s,
                alloc,
            },
            end_s,
            time_limit_s,
        });
        Ok(())
    })?;
    trace
        .jobs
        .sort_by(|a, b| (a.facts.start_s, &a.facts.job_id).cmp(&(b.facts.start_s, &b.facts.job_id)));
    Ok(())
}

fn read_samples(path: &Path, trace: &mut Trace, log: &mut RowLog, report: &mut ReadReport, extent: &mut Extent) -> Result<(), TraceError> {
    let mut required: Vec<&str> = SAMPLES_COLUMNS.to_vec();
    required.retain(|c| *c != "truth");
    let mut csv = Csv::open(path, &required)?;
    let has_truth = csv.cols.contains_key("truth");
    let job_index: HashMap<&str, u32> = trace
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.facts.job_id.as_str(), i as u32))
        .collect();
    let mut rows: Vec<(Sample, u32, Option<Truth>)> = Vec::new();
    let mut last_t: Option<i64> = None;
    let mut out_of_order = 0u64;
    let nodes = &trace.nodes;
    let jobs = &trace.jobs;
    rows_of(&mut csv, log, |row| {
        let t_s: i64 = row.int("t_s")?;
        let job_id = row.text("job_id").trim();
        let Some(&ji) = job_index.get(job_id) else {
            return Err(row.problem("job_id", format!("job {job_id:?} is not in jobs.csv")));
        };
        let node_name = row.text("node").trim();
        let Some(node) = nodes.get(node_name) else {
            return Err(row.problem("node", format!("node {node_name:?} is in no job's alloc")));
        };
        let gpu: u16 = row.int("gpu")?;
        if !jobs[ji as usize].facts.alloc.iter().any(|g| g.node == node && g.gpu == gpu) {
            return Err(row.problem("gpu", format!("{node_name}:{gpu} is not in the alloc of job {job_id}")));
        }
        let s = Sample {
            t_s,
            node,
            gpu,
            util_pct: row.opt_f64("util_pct")?.into(),
            mem_used_mib: row.opt_f64("mem_used_mib")?.into(),
            mem_total_mib: row.opt_f64("mem_total_mib")?.into(),
            power_w: row.opt_f64("power_w")?.into(),
            power_limit_w: row.opt_f64("power_limit_w")?.into(),
            procs: row.opt_int("procs")?,
            sm_active: row.opt_f64("sm_active")?.into(),
        };
        let truth = if has_truth {
            let t = row.text("truth").trim();
            if t.is_empty() {
                None
            } else {
                Some(Truth::from_name(t).ok_or_else(|| row.problem("truth", format!("{t:?} is not productive, starved or wasted")))?)
            }
        } else {
            None
        };
        if last_t.is_some_and(|l| t_s < l) {
            out_of_order += 1;
        }
        last_t = Some(t_s);
        extent.see(row, (t_s, "t_s"), (t_s, "t_s"));
        rows.push((s, ji, truth));
        Ok(())
    })?;
    report.out_of_order_rows = out_of_order;
    rows.sort_by_key(|a| sample_order(&a.0, a.1));
    // Duplicates by (t_s, node, gpu).
    let mut groups: BTreeMap<(i64, u32, u16), Vec<usize>> = BTreeMap::new();
    for (i, (s, _, _)) in rows.iter().enumerate() {
        groups.entry((s.t_s, s.node.0, s.gpu)).or_default().push(i);
    }
    let mut keep = vec![true; rows.len()];
    for idx in groups.values().filter(|v| v.len() > 1) {
        let first = &rows[idx[0]];
        let all_same = idx
            .iter()
            .all(|&i| rows[i].0 == first.0 && rows[i].1 == first.1 && rows[i].2 == first.2);
        if all_same {
            report.exact_duplicates += (idx.len() - 1) as u64;
            for &i in &idx[1..] {
                keep[i] = false;
            }
        } else {
            report.conflicting_duplicates += idx.len() as u64;
            for &i in idx {
                keep[i] = false;
            }
        }
    }
    for (i, (s, ji, truth)) in rows.into_iter().enumerate() {
        if keep[i] {
            trace.push_sample(s, ji, truth);
        }
    }
    Ok(())
}

fn sample_order(s: &Sample, job: u32) -> (i64, u32, u32, u16) {
    (s.t_s, job, s.node.0, s.gpu)
}

impl Trace {
    /// Restores the invariants after building a trace by hand (importers, the generator):
    /// sorts jobs by (`start_s`, `job_id`), remaps `sample_job`, and sorts samples by
    /// (`t_s`, job, node, GPU), stably. `truth` is padded with `None` if shorter.
    pub fn normalize(&mut self) {
        let mut order: Vec<usize> = (0..self.jobs.len()).collect();
        order.sort_by(|&a, &b| {
            let (ja, jb) = (&self.jobs[a].facts, &self.jobs[b].facts);
            (ja.start_s, &ja.job_id).cmp(&(jb.start_s, &jb.job_id))
        });
        let mut new_index = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new as u32;
        }
        let mut jobs: Vec<Option<TraceJob>> = std::mem::take(&mut self.jobs).into_iter().map(Some).collect();
        self.jobs = order.iter().map(|&o| jobs[o].take().expect("each job moved once")).collect();
        self.truth.resize(self.samples.len(), None);
        let mut rows: Vec<(Sample, u32, Option<Truth>)> = self
            .samples
            .drain(..)
            .zip(self.sample_job.drain(..))
            .zip(self.truth.drain(..))
            .map(|((s, j), t)| (s, new_index[j as usize], t))
            .collect();
        rows.sort_by_key(|a| sample_order(&a.0, a.1));
        for (s, j, t) in rows {
            self.push_sample(s, j, t);
        }
    }

    /// True when any sample carries ground truth.
    pub fn has_truth(&self) -> bool {
        self.truth.iter().any(Option::is_some)
    }
}

fn cell_f64(x: Option<f64>) -> String {
    x.map_or_else(String::new, |v| v.to_string())
}

/// Writes `DIR/jobs.csv` and `DIR/samples.csv` (creating `DIR`). The `truth` column is
/// written when any sample has truth. Numbers are written in Rust's shortest round-trip form,
/// so reading the files back gives the same trace.
pub fn write_trace(dir: &Path, trace: &Trace) -> Result<(), TraceError> {
    std::fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
    let jobs_path = dir.join("jobs.csv");
    let mut w = csv_writer(&jobs_path)?;
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e: csv::Error| TraceError::io(p.clone(), std::io::Error::other(e))
    };
    w.write_record(JOBS_COLUMNS).map_err(io(&jobs_path))?;
    for j in &trace.jobs {
        let f = &j.facts;
        w.write_record([
            f.job_id.as_str(),
            &f.user,
            &f.account,
            &f.partition,
            &f.qos,
            &f.name,
            &f.comment,
            &f.start_s.to_string(),
            &j.end_s.to_string(),
            &j.time_limit_s.map_or_else(String::new, |t| t.to_string()),
            &f.alloc.len().to_string(),
            &format_alloc(&f.alloc, &trace.nodes),
        ])
        .map_err(io(&jobs_path))?;
    }
    w.flush().map_err(|e| TraceError::io(&jobs_path, e))?;

    let samples_path = dir.join("samples.csv");
    let mut w = csv_writer(&samples_path)?;
    let with_truth = trace.has_truth();
    let mut header: Vec<&str> = SAMPLES_COLUMNS.to_vec();
    if with_truth {
        header.push("truth");
    }
    w.write_record(&header).map_err(io(&samples_path))?;
    let mut rec: Vec<String> = Vec::with_capacity(header.len());
    for (i, s) in trace.samples.iter().enumerate() {
        rec.clear();
        rec.push(s.t_s.to_string());
        rec.push(trace.jobs[trace.sample_job[i] as usize].facts.job_id.clone());
        rec.push(trace.nodes.name(s.node).to_string());
        rec.push(s.gpu.to_string());
        rec.push(cell_f64(s.util_pct.get()));
        rec.push(cell_f64(s.mem_used_mib.get()));
        rec.push(cell_f64(s.mem_total_mib.get()));
        rec.push(cell_f64(s.power_w.get()));
        rec.push(cell_f64(s.power_limit_w.get()));
        rec.push(s.procs.map_or_else(String::new, |p| p.to_string()));
        rec.push(cell_f64(s.sm_active.get()));
        if with_truth {
            rec.push(trace.truth.get(i).copied().flatten().map_or("", Truth::as_str).to_string());
        }
        w.write_record(&rec).map_err(io(&samples_path))?;
    }
    w.flush().map_err(|e| TraceError::io(&samples_path, e))?;
    Ok(())
}

fn csv_writer(path: &Path) -> Result<csv::Writer<std::io::BufWriter<std::fs::File>>, TraceError> {
    let f = std::fs::File::create(path).map_err(|e| TraceError::io(path, e))?;
    Ok(csv::WriterBuilder::new().from_writer(std::io::BufWriter::new(f)))
}

/// Writes `text` to `path`, naming the file on error.
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), TraceError> {
    let mut f = std::fs::File::create(path).map_err(|e| TraceError::io(path, e))?;
    f.write_all(text.as_bytes()).map_err(|e| TraceError::io(path, e))
}
