//! Reading and writing the trace folder: round trip, errors with file/line/column, lenient
//! mode, duplicates and out-of-order samples, and missing never read as 0.

mod common;
use common::*;
use traces::{read_trace, write_trace, TraceError, Truth};

fn one_job() -> String {
    format!("{JOBS_HEADER}7,alice,acct,gpu,normal,train,,1000,5000,7200,2,node001:0-1\n")
}

#[test]
fn reads_a_small_trace_and_keeps_missing_as_missing() {
    let samples = format!("{SAMPLES_HEADER}1060,7,node001,0,97,1000,81920,300,400,1,\n1060,7,node001,1,,,,,,,\n");
    let d = trace_dir(&one_job(), &samples);
    let (t, r) = read_trace(d.path(), false).unwrap();
    assert_eq!(t.jobs.len(), 1);
    assert_eq!(t.jobs[0].facts.alloc.len(), 2);
    assert_eq!(t.jobs[0].time_limit_s, Some(7200));
    assert_eq!(t.samples.len(), 2);
    assert_eq!(t.samples[0].util_pct, Some(97.0));
    assert_eq!(t.samples[0].procs, Some(1));
    assert_eq!(t.samples[0].sm_active, None);
    let s = &t.samples[1];
    assert_eq!(
        (s.util_pct.get(), s.mem_used_mib.get(), s.power_w.get(), s.procs),
        (None, None, None, None)
    );
    assert_eq!(r, traces::ReadReport::default());
    assert!(!t.has_truth());
}

#[test]
fn bad_cells_name_file_line_and_column() {
    for (cell, col, n) in [
        ("abc", "util_pct", 5),
        ("nan", "util_pct", 5),
        ("inf", "util_pct", 5),
        ("[N/A]", "util_pct", 5),
    ] {
        let samples = format!("{SAMPLES_HEADER}1060,7,node001,0,97,,,,,,\n1120,7,node001,0,{cell},,,,,,\n");
        let d = trace_dir(&one_job(), &samples);
        let e = read_trace(d.path(), false).unwrap_err();
        let TraceError::Row(p) = &e else { panic!("{e}") };
        assert!(p.file.ends_with("samples.csv"), "{e}");
        assert_eq!((p.line, p.column.as_str(), p.column_number), (3, col, n), "{e}");
        assert!(e.to_string().contains(cell), "{e}");
    }
    // Unknown job, GPU outside the allocation, short row, bad truth, bad alloc.
    let cases = [
        (format!("{SAMPLES_HEADER}1060,8,node001,0,1,,,,,,\n"), "job_id"),
        (format!("{SAMPLES_HEADER}1060,7,node001,5,1,,,,,,\n"), "gpu"),
        (format!("{SAMPLES_HEADER}1060,7,node001,0\n"), "util_pct"),
    ];
    for (samples, col) in cases {
        let d = trace_dir(&one_job(), &samples);
        match read_trace(d.path(), false).unwrap_err() {
            TraceError::Row(p) => assert_eq!((p.line, p.column.as_str()), (2, col)),
            e => panic!("{e}"),
        }
    }
    let d = trace_dir(&format!("{JOBS_HEADER}7,a,b,c,d,e,,1000,5000,,2,node001:0-x\n"), SAMPLES_HEADER);
    match read_trace(d.path(), false).unwrap_err() {
        TraceError::Row(p) => {
            assert!(p.file.ends_with("jobs.csv"));
            assert_eq!((p.line, p.column.as_str(), p.column_number), (2, "alloc", 12));
        }
        e => panic!("{e}"),
    }
    let d = trace_dir(&format!("{JOBS_HEADER}7,a,b,c,d,e,,1000,5000,,3,node001:0-1\n"), SAMPLES_HEADER);
    assert!(matches!(read_trace(d.path(), false).unwrap_err(), TraceError::Row(p) if p.column == "gpus"));
    let d = trace_dir(&format!("{JOBS_HEADER}7,a,b,c,d,e,,5000,1000,,2,node001:0-1\n"), SAMPLES_HEADER);
    assert!(matches!(read_trace(d.path(), false).unwrap_err(), TraceError::Row(p) if p.column == "end_s"));
    let d = trace_dir("job_id,user\n", SAMPLES_HEADER);
    assert!(read_trace(d.path(), false)
        .unwrap_err()
        .to_string()
        .contains("lacks column \"account\""));
    let header = SAMPLES_HEADER.replace("sm_active\n", "sm_active,truth\n");
    let d = trace_dir(&one_job(), &format!("{header}1060,7,node001,0,1,,,,,,,maybe\n"));
    assert!(matches!(read_trace(d.path(), false).unwrap_err(), TraceError::Row(p) if p.column == "truth"));
    let missing = tempfile::tempdir().unwrap();
    assert!(matches!(read_trace(missing.path(), false).unwrap_err(), TraceError::Io { .. }));
}

/// Operator trial 17: `sim replay` of a 0-byte samples.csv said `the header lacks column
/// "t_s" (header: )`, while a header-only file is told it holds no sample.
#[test]
fn an_empty_file_says_it_is_empty_and_names_the_file() {
    let d = trace_dir(&one_job(), "");
    let e = read_trace(d.path(), false).unwrap_err().to_string();
    assert!(
        e.contains("samples.csv: the file is empty (0 bytes), so it holds no row; expected a header line with the columns t_s,"),
        "{e}"
    );
    let d = trace_dir("\n\n", SAMPLES_HEADER);
    let e = read_trace(d.path(), false).unwrap_err().to_string();
    assert!(e.contains("jobs.csv: the file holds no header line (only blank lines)"), "{e}");
}

#[test]
fn lenient_mode_skips_and_counts_bad_rows() {
    let jobs = format!("{}8,a,b,c,d,e,,1000,5000,,1,node009:x\n", one_job());
    let samples = format!(
        "{SAMPLES_HEADER}1060,7,node001,0,97,,,,,,\n1120,7,node001,0,oops,,,,,,\n1180,7,node001,0,95,,,,,,\n1180,8,node009,0,1,,,,,,\n"
    );
    let d = trace_dir(&jobs, &samples);
    assert!(read_trace(d.path(), false).is_err());
    let (t, r) = read_trace(d.path(), true).unwrap();
    assert_eq!(t.jobs.len(), 1);
    assert_eq!(t.samples.len(), 2);
    assert_eq!(r.skipped.len(), 3);
    assert_eq!((r.skipped[0].line, r.skipped[0].column.as_str()), (3, "alloc"));
    assert_eq!((r.skipped[1].line, r.skipped[1].column.as_str()), (3, "util_pct"));
    assert_eq!((r.skipped[2].line, r.skipped[2].column.as_str()), (5, "job_id"));
}

#[test]
fn duplicates_and_out_of_order_samples_are_handled_as_documented() {
    let samples = format!(
        "{SAMPLES_HEADER}1180,7,node001,0,90,,,,,,\n1060,7,node001,0,97,,,,,,\n1060,7,node001,0,97,,,,,,\n1120,7,node001,0,10,,,,,,\n1120,7,node001,0,80,,,,,,\n1120,7,node001,1,5,,,,,,\n"
    );
    let d = trace_dir(&one_job(), &samples);
    let (t, r) = read_trace(d.path(), false).unwrap();
    assert_eq!(r.out_of_order_rows, 1);
    assert_eq!(r.exact_duplicates, 1);
    assert_eq!(r.conflicting_duplicates, 2);
    let got: Vec<(i64, u16, Option<f64>)> = t.samples.iter().map(|s| (s.t_s, s.gpu, s.util_pct.get())).collect();
    assert_eq!(got, vec![(1060, 0, Some(97.0)), (1120, 1, Some(5.0)), (1180, 0, Some(90.0))]);
}

#[test]
fn write_then_read_gives_the_same_trace() {
    let header = SAMPLES_HEADER.replace("sm_active\n", "sm_active,truth\n");
    let samples = format!("{header}1060,7,node001,0,97.25,1000.5,81920,300.125,400,2,0.5,productive\n1060,7,node001,1,0,,,,,,,wasted\n");
    let jobs = format!("{JOBS_HEADER}7,alice,acct,gpu,normal,\"name, with comma\",\"say \"\"hi\"\"\",1000,5000,,2,node001:0-1\n");
    let d = trace_dir(&jobs, &samples);
    let (t, _) = read_trace(d.path(), false).unwrap();
    assert_eq!(t.truth, vec![Some(Truth::Productive), Some(Truth::Wasted)]);
    assert_eq!(t.jobs[0].facts.name, "name, with comma");
    let out = tempfile::tempdir().unwrap();
    write_trace(out.path(), &t).unwrap();
    let (t2, _) = read_trace(out.path(), false).unwrap();
    assert_eq!(t2.jobs, t.jobs);
    assert_eq!(t2.samples, t.samples);
    assert_eq!(t2.truth, t.truth);
    // Byte-stable: writing the re-read trace gives the same files.
    let out2 = tempfile::tempdir().unwrap();
    write_trace(out2.path(), &t2).unwrap();
    for f in ["jobs.csv", "samples.csv"] {
        assert_eq!(
            std::fs::read(out.path().join(f)).unwrap(),
            std::fs::read(out2.path().join(f)).unwrap()
        );
    }
}

#[test]
fn a_trace_spanning_more_than_366_days_is_refused_naming_the_row() {
    // One job running "forever": a bad row of jobs.csv (skipped in lenient mode).
    for end in ["99999999999999", &i64::MAX.to_string()] {
        let jobs = format!("{JOBS_HEADER}7,alice,acct,gpu,normal,train,,1000,{end},,1,node001:0\n");
        let d = trace_dir(&jobs, SAMPLES_HEADER);
        let e = read_trace(d.path(), false).unwrap_err();
        let TraceError::Row(p) = &e else { panic!("{e}") };
        assert!(p.file.ends_with("jobs.csv"), "{e}");
        assert_eq!((p.line, p.column.as_str(), p.column_number), (2, "end_s", 9), "{e}");
        assert!(e.to_string().contains(end) && e.to_string().contains("366 days"), "{e}");
        let (t, r) = read_trace(d.path(), true).unwrap();
        assert!(t.jobs.is_empty());
        assert_eq!(r.skipped.len(), 1);
    }
    // Two short jobs 400 days apart: the later job's end is named, with the earliest start.
    let late = 1000 + 400 * 86_400;
    let jobs = format!(
        "{JOBS_HEADER}7,alice,acct,gpu,normal,train,,1000,5000,,1,node001:0\n8,bob,acct,gpu,normal,train,,{late},{},,1,node001:0\n",
        late + 60
    );
    for lenient in [false, true] {
        let d = trace_dir(&jobs, SAMPLES_HEADER);
        let e = read_trace(d.path(), lenient).unwrap_err();
        let TraceError::Row(p) = &e else { panic!("{e}") };
        assert_eq!((p.line, p.column.as_str()), (3, "end_s"), "{e}");
        assert!(e.to_string().contains("start_s 1000, jobs.csv line 2"), "{e}");
    }
    // A sample stamped far after the jobs.
    let samples = format!("{SAMPLES_HEADER}1060,7,node001,0,97,,,,,,\n{},7,node001,0,97,,,,,,\n", i64::MAX);
    let d = trace_dir(&one_job(), &samples);
    let e = read_trace(d.path(), false).unwrap_err();
    let TraceError::Row(p) = &e else { panic!("{e}") };
    assert!(p.file.ends_with("samples.csv"), "{e}");
    assert_eq!((p.line, p.column.as_str(), p.column_number), (3, "t_s", 1), "{e}");
    // Exactly 366 days is accepted.
    let jobs = format!(
        "{JOBS_HEADER}7,alice,acct,gpu,normal,train,,1000,{},,1,node001:0\n",
        1000 + 366 * 86_400
    );
    let d = trace_dir(&jobs, SAMPLES_HEADER);
    read_trace(d.path(), false).unwrap();
}
