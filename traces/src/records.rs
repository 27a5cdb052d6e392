//! The record loop shared by every CSV reader of the crate: unreadable rows and rows of the
//! wrong width become [`RowProblem`]s naming file, line and column, which fail the read in
//! strict mode and are skipped and kept in lenient mode.

use crate::error::{RowLog, RowProblem, TraceError};
use std::io::{BufRead, Read};
use std::path::Path;

/// Reads `inner` with every CR LF pair turned into a single LF (a lone CR is kept).
///
/// The csv crate counts a line when it consumes an LF, but it stops a CR LF record at the CR,
/// so with Windows line endings every record's [`csv::Position::line`] is one line early
/// (BurntSushi/rust-csv#395). Every CSV reader of this crate reads through this adapter, so
/// the lines named in errors are the lines an editor shows. (Fields are trimmed or numeric, so
/// a CR LF inside a quoted field reading as LF changes no value the crate uses.)
///
/// It also keeps where each line ends, so that [`CrlfToLf::line_of`] gives a record's real
/// line: the csv crate skips blank lines without counting them (a bad row on line 4 after two
/// blank lines was reported as line 2).
pub(crate) struct CrlfToLf<R> {
    inner: R,
    pending_cr: bool,
    /// Bytes handed out so far.
    out_pos: u64,
    /// The offset, in the bytes handed out, of every LF handed out.
    line_ends: Vec<u64>,
}

impl<R: BufRead> CrlfToLf<R> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: R) -> CrlfToLf<R> {
        CrlfToLf {
            inner,
            pending_cr: false,
            out_pos: 0,
            line_ends: Vec::new(),
        }
    }
}

impl<R> CrlfToLf<R> {
    /// The 1-based line of the record starting at `offset` of the bytes handed out (its
    /// [`csv::Position::byte`]), once they have been read. The csv crate places a record
    /// after blank lines at the start of those lines, so they are stepped over.
    pub(crate) fn line_of(&self, offset: u64) -> u64 {
        let before = self.line_ends.partition_point(|&e| e < offset);
        let blank = self.line_ends[before..]
            .iter()
            .zip(offset..)
            .take_while(|(e, at)| **e == *at)
            .count();
        (before + blank) as u64 + 1
    }
}

impl<R: BufRead> Read for CrlfToLf<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < out.len() {
            let avail = self.inner.fill_buf()?;
            if avail.is_empty() {
                if std::mem::take(&mut self.pending_cr) {
                    out[n] = b'\r';
                    n += 1;
                }
                break;
            }
            let mut used = 0;
            for &b in avail {
                if n == out.len() {
                    break;
                }
                if std::mem::take(&mut self.pending_cr) && b != b'\n' {
                    // A lone CR: keep it, then look at `b` again (it may not fit).
                    out[n] = b'\r';
                    n += 1;
                    if n == out.len() {
                        break;
                    }
                }
                used += 1;
                if b == b'\r' {
                    self.pending_cr = true;
                } else {
                    out[n] = b;
                    n += 1;
                }
            }
            self.inner.consume(used);
            if n > 0 {
                break;
            }
        }
        let start = self.out_pos;
        self.line_ends.extend(
            out[..n]
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| start + i as u64),
        );
        self.out_pos += n as u64;
        Ok(n)
    }
}

/// A CSV reader over `file` through [`CrlfToLf`], flexible (rows of any width; checked by
/// [`check_width`]), with a header row.
pub(crate) fn csv_file_reader(file: std::fs::File) -> csv::Reader<CrlfToLf<std::io::BufReader<std::fs::File>>> {
    csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(true)
        .from_reader(CrlfToLf::new(std::io::BufReader::new(file)))
}

/// Calls `f(record, line)` for every record of `rdr`. An unreadable record (bad quoting,
/// invalid UTF-8) and every `Err` of `f` go to `log`.
pub(crate) fn each_record<R: BufRead>(
    rdr: &mut csv::Reader<CrlfToLf<R>>,
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
                let line = e.position().map_or(0, |p| rdr.get_ref().line_of(p.byte()));
                let problem = match e.kind() {
                    csv::ErrorKind::Utf8 { err, .. } => {
                        format!("field {} is not valid UTF-8 text (is the file damaged?)", err.field() + 1)
                    }
                    _ => format!("unreadable row: {e}"),
                };
                log.bad_row(RowProblem {
                    file: path.into(),
                    line,
                    column: "-".into(),
                    column_number: 0,
                    problem,
                })?;
                if line == 0 {
                    // No position to resume from (an I/O error): stop here.
                    return Ok(());
                }
                continue;
            }
        }
        let line = rec.position().map_or(0, |p| rdr.get_ref().line_of(p.byte()));
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
    let mut rdr = csv_file_reader(file);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn through(input: &[u8], chunk: usize) -> Vec<u8> {
        let mut r = CrlfToLf::new(std::io::BufReader::with_capacity(3, input));
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn crlf_becomes_lf_and_lone_cr_stays_whatever_the_buffer_sizes() {
        let input = b"a,b\r\n1,2\r\n\r\nx\ry\r";
        for chunk in 1..8 {
            assert_eq!(through(input, chunk), b"a,b\n1,2\n\nx\ry\r", "chunk {chunk}");
        }
    }

    #[test]
    fn record_lines_are_the_same_for_lf_and_crlf_files() {
        for text in ["value,cdf_pct\n0,0\n1,50\nabc,100\n", "value,cdf_pct\r\n0,0\r\n1,50\r\nabc,100\r\n"] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.csv");
            std::fs::write(&path, text).unwrap();
            let mut lines = Vec::new();
            fixed_csv(&path, &["value", "cdf_pct"], &mut RowLog::new(false), |rec, line| {
                lines.push((rec[0].to_string(), line));
                Ok(())
            })
            .unwrap();
            assert_eq!(lines, [("0".into(), 2), ("1".into(), 3), ("abc".into(), 4)], "{text:?}");
        }
    }

    /// The csv crate skips blank lines without counting them: a row after two blank lines
    /// was named as two lines early (found in review). Lines are counted here.
    #[test]
    fn record_lines_count_blank_lines() {
        for text in [
            "value,cdf_pct\n0,0\n\n\n1,50\n\nabc,100\n",
            "value,cdf_pct\r\n0,0\r\n\r\n\r\n1,50\r\n\r\nabc,100",
            "\nvalue,cdf_pct\n0,0\n  \n\n1,50\n\nabc,100\n",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.csv");
            std::fs::write(&path, text).unwrap();
            let mut lines = Vec::new();
            let _ = fixed_csv(&path, &["value", "cdf_pct"], &mut RowLog::new(true), |rec, line| {
                lines.push((rec[0].to_string(), line));
                Ok(())
            });
            let shift = u64::from(text.starts_with('\n'));
            let want: Vec<(String, u64)> = vec![("0".into(), 2 + shift), ("1".into(), 5 + shift), ("abc".into(), 7 + shift)];
            let got: Vec<(String, u64)> = lines.into_iter().filter(|(v, _)| !v.trim().is_empty()).collect();
            assert_eq!(got, want, "{text:?}");
        }
    }
}
