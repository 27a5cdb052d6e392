//! The twentieth adversarial review, traces side.

use std::path::Path;
use traces::import::{self, ImportReport};

/// Input: a headerless nvidia-smi log (the default query's columns) of one line, copied
/// while `nvidia-smi -l` wrote its first sample: no line end, and the power limit cut from
/// `400` to `40` (trial 11's case, in a log of one line).
///
/// What happens: 10b05c5 drops a last line without its line end only when the text holds a
/// line end somewhere before it (traces/src/import/nvidia_smi.rs: `rposition(b'\n')` is
/// `None` for a one-line text, and the text is read whole), so the cut line is imported with
/// a power limit of 40 W, without a word.
///
/// What should happen: as for any cut last line: dropped, with the warning.
#[test]
fn a_one_line_log_without_its_line_end_is_dropped_too() {
    let cut = "2026/11/29 10:01:00.000, 0, GPU-a, 97, 30000, 81920, 343.34, 40";
    let o = import::nvidia_smi::SmiOptions {
        node: "node001".into(),
        zone: import::Zone::parse("UTC").unwrap(),
        query: import::nvidia_smi::DEFAULT_QUERY.into(),
        lenient: false,
    };
    let mut report = ImportReport::default();
    let raw = import::nvidia_smi::parse(cut, Path::new("smi.csv"), &o, &mut report);
    let read: Vec<_> = raw.iter().flatten().map(|r| r.sample.power_limit_w.get()).collect();
    assert!(
        read.is_empty() && report.count("unterminated_last_line") == 1,
        "a cut one-line log was read: power limits {read:?}, unterminated_last_line = {}",
        report.count("unterminated_last_line")
    );
}
