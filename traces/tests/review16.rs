//! The sixteenth adversarial review, traces side. Each ignored test fails on the importers as
//! reviewed and shows one finding.
//!
//! * `a_damaged_header_line_is_not_skipped_as_a_bad_row_under_lenient`: since this session
//!   an nvidia-smi log line that is not valid UTF-8 is a bad row, skipped and counted under
//!   `--lenient`. The header line is no row: when it is the damaged line, it is skipped like
//!   one, and every row below it is read as a headerless log, by position in the `--query`
//!   order (the default unless given). A log written with the same number of fields in
//!   another order imports without an error and without a note, each reading under another
//!   column's name; before, the whole log was refused.

use std::path::Path;
use traces::import::{self, ImportReport};

/// Input: an nvidia-smi log written with `--query-gpu=timestamp,index,uuid,power.draw,
/// utilization.gpu,memory.used,memory.total,power.limit` (the default's eight fields, power
/// before utilisation), whose header line has one damaged byte; rows of a GPU at 312.5 W and
/// 97 %. Imported with `--lenient` and the default `--query`.
///
/// What happens: the header is skipped as a bad row ("not valid UTF-8"), the rows are read in
/// the default order: 312.5 % utilisation (then dropped as implausible, or kept), 97 W, no
/// error and no note that the log's header was lost.
///
/// What should happen: a header line that cannot be read is no row to skip: the import fails
/// (as a header with a misspelt field does), or at least no row is read by the `--query`
/// order while the log had a header of its own.
#[test]
fn a_damaged_header_line_is_not_skipped_as_a_bad_row_under_lenient() {
    let mut log: Vec<u8> = Vec::new();
    log.extend_from_slice(
        b"timestamp, index, uuid, power.draw [W], utilization.gpu [\xff], memory.used [MiB], memory.total [MiB], power.limit [W]\n",
    );
    for s in 0..3 {
        log.extend_from_slice(
            format!(
                "2026/11/29 10:00:0{s}.000, 0, GPU-00000000-0000-0000-0000-000000000000, 312.50 W, 97 %, 30000 MiB, 81920 MiB, 400.00 W\n"
            )
            .as_bytes(),
        );
    }
    let opts = import::nvidia_smi::SmiOptions {
        node: "node001".into(),
        zone: import::Zone::parse("UTC").unwrap(),
        query: import::nvidia_smi::DEFAULT_QUERY.into(),
        lenient: true,
    };
    let mut r = ImportReport::default();
    let got = import::nvidia_smi::parse_bytes(&log, Path::new("smi.csv"), &opts, &mut r);
    if let Ok(raw) = &got {
        let read: Vec<(Option<f64>, Option<f64>)> = raw.iter().map(|s| (s.sample.util_pct.get(), s.sample.power_w.get())).collect();
        assert!(
            read.iter().all(|&x| x == (Some(97.0), Some(312.5))),
            "the log's rows were read by the --query order after its header was skipped: (util, power) {read:?}; skipped {:?}; notes {:?}",
            r.skipped.iter().map(|p| &p.problem).collect::<Vec<_>>(),
            r.notes
        );
    }
}
