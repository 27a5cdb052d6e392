//! Guard 3: a window in which more than one sample in five was invalid is no ground for a
//! drain or a cancel (`Cap::InvalidSamples`, `Evidence::mostly_invalid`). Trial 15: a
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

/// One in ten invalid is below the limit: the job climbs the ladder as without them.
#[test]
fn a_collector_wrong_on_one_read_in_ten_still_drains_and_cancels() {
    let (v, _) = hung_with(|t| t % 10 == 0);
    assert_eq!(v, Verdict::Cancel);
}

/// The limit itself: one in five (four valid per invalid) is not above it; more is.
#[test]
fn the_limit_is_one_in_five() {
    let ev = |invalid, min, gpus| policy::Evidence {
        invalid_samples: invalid,
        samples_min_per_gpu: min,
        gpus_observed: gpus,
        ..policy::Evidence::default()
    };
    assert!(!ev(5, 20, 1).mostly_invalid());
    assert!(ev(6, 20, 1).mostly_invalid());
    assert!(!ev(10, 5, 8).mostly_invalid());
    assert!(ev(11, 5, 8).mostly_invalid());
    assert!(!ev(0, 0, 0).mostly_invalid());
    assert!(ev(1, 0, 8).mostly_invalid());
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
