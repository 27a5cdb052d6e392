//! Guard 3: a GPU whose window holds more than one invalid sample for every five it keeps is
//! no ground for a drain or a cancel (`Cap::InvalidSamples`, `Evidence::mostly_invalid`).
//! Trial 15: a
//! collector that read power 0.5 W (a reading no live GPU gives) on two queries in three had
//! its hung job drained and cancelled on the third, since no hole between valid samples was
//! longer than `max_sample_gap`.

mod harness;
use harness::*;
use policy::{Cap, Policy, Verdict};

/// A hung GPU (0 %, 30 GB held, a process, about 60 W), whose power reads 0.5 W on the ticks
/// `bad` picks; the highest verdict over four hours, and the cap of its last finding.
fn hung_with(bad: impl Fn(i64) -> bool) -> (Verdict, Option<Cap>) {
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = policy::Engine::new(Policy::new(&cfg_with_cancel(3600)).expect("valid"), policy::Mode::Observe);
    let mut out = Vec::new();
    let mut worst = (Verdict::Healthy, None);
    for tick in 1..=240 {
        let t = tick * 60;
        let s = policy::Sample {
            util_pct: 0.0.into(),
            mem_used_mib: 30_000.0.into(),
            procs: Some(1),
            power_w: if bad(tick) {
                0.5.into()
            } else {
                (60.0 + (tick % 7) as f64 * 0.1).into()
            },
            ..base_sample(t)
        };
        step_whole(&mut e, &jobs, t, &[s], &mut out);
        if out[0].verdict >= worst.0 {
            worst = (out[0].verdict, out[0].cap);
        }
    }
    worst
}

#[test]
fn a_collector_wrong_on_two_reads_in_three_is_held_at_alert() {
    let (v, cap) = hung_with(|t| t % 3 != 0);
    assert_eq!((v, cap), (Verdict::Alert, Some(Cap::InvalidSamples)));
}

#[test]
fn a_collector_wrong_on_one_read_in_two_is_held_at_alert() {
    let (v, cap) = hung_with(|t| t % 2 == 0);
    assert_eq!((v, cap), (Verdict::Alert, Some(Cap::InvalidSamples)));
}

/// One in four: 5 invalid for 15 kept, more than one for every five kept.
#[test]
fn a_collector_wrong_on_one_read_in_four_is_held_at_alert() {
    let (v, cap) = hung_with(|t| t % 4 == 0);
    assert_eq!((v, cap), (Verdict::Alert, Some(Cap::InvalidSamples)));
}

/// One in ten invalid is below the limit: the job climbs the ladder as without them.
#[test]
fn a_collector_wrong_on_one_read_in_ten_still_drains_and_cancels() {
    let (v, _) = hung_with(|t| t % 10 == 0);
    assert_eq!(v, Verdict::Cancel);
}

/// One read in five wrong: the window's 20 samples hold 4 invalid for 16 kept, more than
/// one for every five kept.
#[test]
fn a_collector_wrong_on_one_read_in_five_is_held_at_alert() {
    let (v, cap) = hung_with(|t| t % 5 == 0);
    assert_eq!((v, cap), (Verdict::Alert, Some(Cap::InvalidSamples)));
}

/// The limit is GPU by GPU, and read from the evidence.
#[test]
fn mostly_invalid_reads_the_evidence() {
    let ev = |x| policy::Evidence {
        invalid_share_exceeded: x,
        invalid_samples: 3,
        ..policy::Evidence::default()
    };
    assert!(ev(true).mostly_invalid());
    assert!(!ev(false).mostly_invalid());
}

proptest::proptest! {
    /// Whatever the pattern of invalid samples, no finding whose window is mostly invalid is
    /// above alert.
    #[test]
    fn prop_no_drain_or_cancel_on_a_mostly_invalid_window(bits in proptest::collection::vec(proptest::bool::weighted(0.3), 240)) {
        let jobs = vec![job("1", 0, &[(0, 1)])];
        let mut e = policy::Engine::new(Policy::new(&cfg_with_cancel(3600)).expect("valid"), policy::Mode::Observe);
        let mut out = Vec::new();
        for tick in 1..=240i64 {
            let t = tick * 60;
            let s = policy::Sample {
                util_pct: 0.0.into(),
                mem_used_mib: 30_000.0.into(),
                procs: Some(1),
                power_w: if bits[tick as usize - 1] { 0.5.into() } else { (60.0 + (tick % 7) as f64 * 0.1).into() },
                ..base_sample(t)
            };
            step_whole(&mut e, &jobs, t, &[s], &mut out);
            if out[0].evidence.mostly_invalid() {
                proptest::prop_assert!(out[0].verdict <= Verdict::Alert, "{:?} at {t}", out[0]);
            }
        }
    }
}
