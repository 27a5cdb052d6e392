//! Errors of the trace crate: every one names the file, and for row problems the line and
//! the column, so an operator can open the file at the right place.

use std::path::PathBuf;

/// Where a bad value was found: file, 1-based line, and column (name and 1-based number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowProblem {
    /// The file read.
    pub file: PathBuf,
    /// 1-based line number in the file (the header is line 1 of a CSV); 0 when the problem is
    /// the file as a whole (a dcgm page's name).
    pub line: u64,
    /// Column name (`util_pct`, `alloc` …) or `-` when the row as a whole is bad.
    pub column: String,
    /// 1-based column number, 0 when the row as a whole is bad.
    pub column_number: usize,
    /// What is wrong, quoting the offending text.
    pub problem: String,
}

/// `file: line L, column C (name): problem`; without a column (`column_number` 0)
/// `file: line L: problem`; without a line (0: the file as a whole, e.g. its name)
/// `file: problem`.
impl std::fmt::Display for RowProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column_number) {
            (0, _) => write!(f, "{}: {}", self.file.display(), self.problem),
            (line, 0) => write!(f, "{}: line {line}: {}", self.file.display(), self.problem),
            (line, n) => write!(
                f,
                "{}: line {line}, column {n} ({}): {}",
                self.file.display(),
                self.column,
                self.problem
            ),
        }
    }
}

/// Anything that goes wrong reading, writing or importing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read or written.
    #[error("{}: I/O error", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A row (or the header) holds a bad value.
    #[error("{0}")]
    Row(RowProblem),
    /// The file as a whole is unusable (no header, no rows where rows are required …).
    #[error("{}: {problem}", file.display())]
    File {
        /// The file or folder.
        file: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// An invalid option value given to an importer (`--tz`, `--node` …).
    #[error("option {option}: {problem}")]
    Option {
        /// The option, as typed on the command line.
        option: String,
        /// What is wrong, quoting the value.
        problem: String,
    },
}

impl TraceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> TraceError {
        TraceError::Io { path: path.into(), source }
    }

    pub(crate) fn file(file: impl Into<PathBuf>, problem: impl Into<String>) -> TraceError {
        TraceError::File {
            file: file.into(),
            problem: problem.into(),
        }
    }
}

/// Collects row problems: fails on the first one in strict mode, or counts and keeps them in
/// lenient mode (`--lenient`), where the row is skipped.
#[derive(Clone, Debug, Default)]
pub struct RowLog {
    /// True for `--lenient`.
    pub lenient: bool,
    /// The rows skipped, in the order met (lenient mode only).
    pub skipped: Vec<RowProblem>,
}

impl RowLog {
    /// A log in strict (`false`) or lenient (`true`) mode.
    pub fn new(lenient: bool) -> RowLog {
        RowLog {
            lenient,
            skipped: Vec::new(),
        }
    }

    /// Records a bad row: `Err` in strict mode, `Ok(())` (row to be skipped) in lenient mode.
    pub fn bad_row(&mut self, p: RowProblem) -> Result<(), TraceError> {
        if self.lenient {
            self.skipped.push(p);
            Ok(())
        } else {
            Err(TraceError::Row(p))
        }
    }
}
