//! The seventeenth adversarial review, policy side. Each ignored test fails on the engine as
//! reviewed and shows one finding.
//!
//! * `a_frozen_copy_without_power_on_its_newest_sample_is_not_acted_on`: `frozen_tail` applies
//!   only when the newest entry carries power. A collector that freezes on a record whose
//!   power is `[N/A]` (or 0 W) repeats every reading bit for bit, but `newest_power_known` is
//!   false on every cycle, so the tail is never frozen; the whole-window check misses it
//!   (earlier samples changed) and `power_unknown` holds only once fewer than half the window
//!   has power. For up to half a window the job is judged, drained and cancelled on copies.
//! * `two_repeats_from_a_lagging_collector_are_not_a_frozen_window`: `frozen_tail` measures
//!   from `now`, not over the copies: with the newest sample legitimately up to
//!   `max_sample_gap` old, two equal consecutive readings (60 s apart) already make the window
//!   `frozen`, and end the breach.

mod harness;
use harness::*;
use policy::{GpuRef, Mode, NodeId, Reading, Verdict};

const G0: GpuRef = GpuRef { node: NodeId(0), gpu: 0 };

/// Hung from the start (cancel stage at 2h, observe mode); from `freeze_s` on (if any) the
/// collector repeats the sample of `freeze_s`, its power `[N/A]`. Returns the run.
fn hung_then_frozen_without_power(freeze_s: Option<i64>) -> Run {
    let mut r = Run::new(cfg_with_cancel(2 * 3600), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let frozen = freeze_s.map(|f| policy::Sample {
        power_w: Reading::MISSING,
        ..sample(Gpu::Hung, f, G0).unwrap()
    });
    while r.now_s < 4 * 3600 {
        let t = r.now_s + r.interval_s;
        let s = match (freeze_s, frozen) {
            (Some(f), Some(fr)) if t >= f => policy::Sample { t_s: t, ..fr },
            _ => sample(Gpu::Hung, t, G0).unwrap(),
        };
        r.tick_samples(vec![s]);
    }
    r
}

/// Input: a hung job, drained (observe mode) well before the freeze; six minutes before its
/// cancel would come, the collector freezes and re-serves one record, freshly stamped, whose
/// util, memory and SM readings repeat bit for bit and whose power reads `[N/A]` (the
/// record it stuck on; 0 W does the same).
///
/// What happens: the window is never `frozen` (`frozen_tail` needs power on the newest
/// sample; the whole-window check sees the changes before the freeze; power is known on more
/// than half the window), so the job stays at drain and is cancelled on readings that are
/// copies of one six minutes old (power stays known on more than half the window
/// for ten minutes after such a freeze, with the default 20-minute window).
///
/// What should happen: as with the same freeze with power present (regressions.rs,
/// `a_collector_that_freezes_partway_through_a_window_is_stale_evidence`), the window is
/// `insufficient_evidence` once the copies span more than `max_sample_gap`: an unknown power
/// is no new value (as `ingest`'s own freeze check says), so it cannot make copies fresh.
/// Code: policy/src/window.rs, `GpuWindow::frozen_tail` (`newest_power_known`).
#[test]
fn a_frozen_copy_without_power_on_its_newest_sample_is_not_acted_on() {
    let control = hung_then_frozen_without_power(None);
    let cancel_s = control.first_at(0, Verdict::Cancel).expect("control: the hung job is cancelled");
    let freeze_s = cancel_s - 6 * 60;
    assert!(
        control.first_at(0, Verdict::Drain).is_some_and(|t| t < freeze_s),
        "control: drained before the freeze"
    );
    let gap_s = cfg().max_sample_gap.secs();
    let r = hung_then_frozen_without_power(Some(freeze_s));
    let acted: Vec<_> = r
        .history
        .iter()
        .filter(|(now, f)| *now > freeze_s + gap_s && f[0].verdict >= Verdict::Drain)
        .map(|(now, f)| format!("{}m: {}", now / 60, f[0].reason(&r.jobs[0])))
        .collect();
    let cancelled = r.history.iter().find(|(now, f)| *now > freeze_s && f[0].verdict == Verdict::Cancel);
    assert!(
        acted.is_empty(),
        "drained/cancelled on a frozen copy (freeze at {}m; first cancel: {:?}): {:#?}",
        freeze_s / 60,
        cancelled.map(|(now, f)| format!("{}m: {}", now / 60, f[0].reason(&r.jobs[0]))),
        &acted[..acted.len().min(4)]
    );
}

/// Input: a hung job whose collector delivers each sample 150 s after taking it (within
/// `max_sample_gap`, 3m). Its readings change every minute, except that at 60 minutes the
/// power happens to read the same as the minute before (one repeat; util 0 % and memory held
/// repeat anyway on a hung GPU).
///
/// Review 17 asked that such a window not read as frozen. Decided otherwise: a repeated
/// sample is no evidence that the GPU still reads so, and the same shape (one copy, then
/// nothing new for more than `max_sample_gap`) is what a collector that froze and then went
/// quiet sends; the guard-3 property found the job drained on such a copy. So the newest
/// information, 210 s old here, is stale for that cycle, and the breach starts again. The
/// README tells sites with a collector that lags near `max_sample_gap` to raise it. This test
/// holds the decision: the window reads frozen once, and the job is judged again after.
#[test]
fn a_repeat_from_a_collector_lagging_near_the_gap_is_stale_for_a_cycle() {
    let lag_s = 150;
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let mut prev: Option<policy::Sample> = None;
    while r.now_s < 90 * 60 {
        let t = r.now_s + r.interval_s - lag_s;
        let mut s = sample(Gpu::Hung, t, G0).unwrap();
        if t + lag_s == 60 * 60 {
            s.power_w = prev.unwrap().power_w;
        }
        prev = Some(s);
        r.tick_samples(vec![s]);
    }
    let frozen: Vec<_> = r
        .history
        .iter()
        .filter(|(_, f)| f[0].cause == policy::Cause::Evidence(policy::EvidenceProblem::Frozen))
        .map(|(now, f)| format!("{}m: {}", now / 60, f[0].reason(&r.jobs[0])))
        .collect();
    assert!(
        r.history.iter().any(|(now, f)| *now < 60 * 60 && f[0].verdict >= Verdict::Alert),
        "control: the hang is alerted before the repeat"
    );
    assert_eq!(frozen.len(), 1, "one cycle reads frozen: {frozen:#?}");
    assert!(
        r.history.iter().any(|(now, f)| *now > 62 * 60 && f[0].verdict >= Verdict::Alert),
        "judged again after the repeat"
    );
}
