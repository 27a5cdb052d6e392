//! The record loop shared by every CSV reader of the crate: unreadable rows and rows of the
//! wrong width become [`RowProblem`]s naming file, line and column, which fail the read in
//! strict mode and are skipped and kept in lenient mode.

use crate::error::{RowLog, RowProblem, TraceError};
use std::path::Path;

/// Calls `f(record, line)` for every record of `rdr`. An unreadable record (bad quoting,
/// invalid UTF-8) and every `Err` of `f` go to `log`.
pub(crate) fn each_record<R: std::io::Read>(
    rdr: &mut csv::Reader<R>,
    path: &Path,
    log: &mut RowLog,
    mut f: impl FnMut(&csv::StringRecord, u64) -> Result<(), RowProblem>,
) -> Result<(), TraceError> {
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => return Ok(()),
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
                    // No position to resume from (an I/O error): stop here.
                    return Ok(());
                }
                continue;
            }
        }
        let line = rec.position().map_or(0, |p| p.line());
        if let Err(p) = f(&rec, line) {
            log.bad_row(p)?;
        }
    }
}

/// A problem at `line` in column `col` (0-based) of a file whose columns are `names`.
pub(crate) fn problem_at(path: &Path, names: &[String], line: u64, col: usize, what: String) -> RowProblem {
    RowProblem {
        file: path.into(),
        line,
        column: names.get(col).cloned().unwrap_or_else(|| "-".into()),
        column_number: col + 1,
        problem: what,
    }
}

/// Fails unless the record has exactly `names.len()` fields; names the first missing column.
pub(crate) fn check_width(path: &Path, names: &[String], rec: &csv::StringRecord, line: u64) -> Result<(), RowProblem> {
    if rec.len() == names.len() {
        return Ok(());
    }
    Err(problem_at(
        path,
        names,
        line,
        rec.len().min(names.len()),
        format!("{} fields, the header has {}", rec.len(), names.len()),
    ))
}

/// Reads a CSV file whose header must be exactly `want`, calling `f(record, line)` on each
/// row of the right width.
pub(crate) fn fixed_csv(
    path: &Path,
    want: &[&str],
    log: &mut RowLog,
    mut f: impl FnMut(&csv::StringRecord, u64) -> Result<(), RowProblem>,
) -> Result<(), TraceError> {
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut rdr = csv::ReaderBuilder::new().flexible(true).from_reader(file);
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| TraceError::file(path, format!("cannot read the header: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    if header != want {
        return Err(TraceError::file(
            path,
            format!("header is {:?}, expected {}", header.join(","), want.join(",")),
        ));
    }
    each_record(&mut rdr, path, log, |rec, line| {
        check_width(path, &header, rec, line)?;
        f(rec, line)
    })
}
