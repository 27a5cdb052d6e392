//! review27: adversarial probes of 2e3b97c's dcgm time rules (dcgm.rs `line_time_problem`:
//! a line time between 2000 and 2100 OR within a day of its page's name; `parse_page`: a page
//! named at or after 2100 as seconds is a bad row).

use traces::import::{self, ImportReport};

fn line(t_ms: i64) -> String {
    format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",Hostname=\"n1\"}} 50 {t_ms}\n")
}

fn parse(page_t: i64, text: &str) -> Result<Vec<i64>, String> {
    import::dcgm::parse_pages(&[(page_t, "p", text)], None, false, &mut ImportReport::default())
        .map(|raw| raw.iter().map(|s| s.sample.t_s).collect())
        .map_err(|e| e.to_string())
}

/// The wrong units the window is meant to catch, on a real (2026) page: seconds, microseconds,
/// nanoseconds are refused, and none of them can land between 2000 and 2100 as milliseconds
/// (seconds read as ms fall in 1970, µs and ns after 2100). Holds.
#[test]
fn review27_wrong_units_of_a_real_page_never_land_in_the_window() {
    let page_t: i64 = 1_795_946_400;
    for (unit, t) in [("s", page_t), ("us", page_t * 1_000_000), ("ns", page_t * 1_000_000_000)] {
        assert!(parse(page_t, &line(t)).is_err(), "{unit}: {:?}", parse(page_t, &line(t)));
    }
    // The edges of the window hold at the ends of the plausible years.
    assert!(parse(page_t, &line(946_684_800_000)).is_ok());
    assert!(parse(page_t, &line(946_684_799_999)).is_err());
    assert!(parse(page_t, &line(4_102_444_799_999)).is_ok());
    assert!(parse(page_t, &line(4_102_444_800_000)).is_err());
}

/// A page named in the first day of 1970 (as tests and synthetic traces do) whose lines carry
/// SECONDS where milliseconds belong (trial 13's mistake): `near(t_s)` accepts them, since
/// t/1000 is within a day of t for any t below ~86,486 s; every sample is read at 1/1000 of
/// its time, silently (dcgm.rs:226-229). Expected: refused as "they look like seconds", as on
/// a real page. (ROUGH: toy data only.) Decided: left, since tests name pages in early 1970 on
/// purpose and read small line times within a day of them; a real page (2000 to 2100) refuses
/// seconds (`review27_wrong_units_of_a_real_page_never_land_in_the_window`). This holds the
/// toy case as it is, so a change to it is seen.
#[test]
fn review27_seconds_on_a_page_named_in_the_first_day_of_1970_are_read_as_milliseconds() {
    let page_t: i64 = 3600;
    let got = parse(page_t, &line(page_t));
    eprintln!("{got:?}");
    assert_eq!(got, Ok(vec![3]), "toy page of early 1970: the line is read as milliseconds");
}

/// A backfilled-looking page whose lines are a YEAR off its name (an exporter host whose clock
/// is wrong by a year, or a page misnamed by a year): before 2e3b97c a bad row ("check the
/// clock of the host that wrote them"), now read at the line's time with no warning at all.
/// With `--jobs`, such samples are attributed to whatever job held that GPU a year earlier.
/// Expected: read if you like (backfill), but a warning naming the spread between the page's
/// name and its lines. (WRONG/ROUGH; fails.)
#[test]
fn review27_a_line_a_year_off_its_page_is_read_without_a_word() {
    let page_t: i64 = 1_795_946_400;
    let mut r = ImportReport::default();
    let raw = import::dcgm::parse_pages(
        &[(page_t, "1795946400.prom", &line((page_t - 365 * 86_400) * 1000))],
        None,
        false,
        &mut r,
    )
    .unwrap();
    eprintln!(
        "t_s {:?}, warnings {:?}",
        raw.iter().map(|s| s.sample.t_s).collect::<Vec<_>>(),
        r.warnings
    );
    assert!(!r.warnings.is_empty(), "line dated a year before its page read silently");
}

/// A page named in milliseconds whose every line carries its own plausible millisecond time:
/// the name is never used for those lines ("a plausible line time wins wherever its page says
/// it was taken"), yet the page is refused whole by its name (dcgm.rs:364-377) before any line
/// is read. Expected: lines with their own plausible times read (the name matters only for
/// unstamped lines). (ROUGH.) Decided: the page is refused, since a name that is no epoch
/// time says the pages were written by something other than the documented tooling; the
/// message says to rename them. Held here so that a change is seen.
#[test]
fn review27_a_page_named_in_ms_whose_lines_all_carry_times_is_refused() {
    let t_ms: i64 = 1_795_946_400_000;
    let got = parse(t_ms, &line(t_ms));
    eprintln!("{got:?}");
    assert!(got.as_ref().is_err_and(|e| e.contains("looks like milliseconds")), "{got:?}");
}

/// Review 26's ROUGH finding "25 hours off is said to be '1 days' off, at most 1 day" lost its
/// test when 2e3b97c rewrote it for a plausible page (review26.rs:221-233): the message still
/// rounds down into the bound for any page where the window does not apply (a 1970 page).
/// Expected: the offset not said as "1 days" when it exceeds the 1-day bound. (ROUGH; fails.)
#[test]
fn review27_the_25_hours_said_1_days_message_still_arises() {
    let page_t: i64 = 200_000;
    let e = parse(page_t, &line((page_t + 25 * 3600) * 1000)).unwrap_err();
    eprintln!("{e}");
    assert!(!e.contains("1 days after"), "{e}");
}
