//! squeue prints StartTime in the local time of the host running it, without an offset
//! (squeue-starttime-values sample). This test binary runs on its own so it can set TZ.

mod common;

use enforcer::parse::squeue_format::start_time;

#[test]
fn dst_fold_takes_the_later_instant_and_gap_is_an_error() {
    let Some(t) = common::sample_raw("squeue-starttime-values.txt") else {
        return;
    };
    assert!(t.contains("2023-10-29T02:30:00 occurs twice in Europe/Berlin"));
    if !std::path::Path::new("/usr/share/zoneinfo/Europe/Berlin").exists() {
        eprintln!("skipped: no tz database on this machine");
        return;
    }
    // The only test in this binary, so setting TZ cannot race another test.
    std::env::set_var("TZ", "Europe/Berlin");
    // 02:30 CEST (UTC+2) = 00:30Z; 02:30 CET (UTC+1) = 01:30Z. The later one makes the job
    // look younger, which can only delay a verdict.
    assert_eq!(start_time("2023-10-29T02:30:00", &chrono::Local), Ok(Some(1_698_543_000)));
    // 2023-03-26T02:30 does not exist in Berlin.
    assert!(start_time("2023-03-26T02:30:00", &chrono::Local).is_err());
    // An ordinary winter time: UTC+1.
    assert_eq!(start_time("2019-01-31T10:35:53", &chrono::Local), Ok(Some(1_548_927_353)));
}
