//! The fourteenth adversarial review, policy side. Each ignored test fails on the engine as
//! reviewed and shows one finding.
//!
//! * `after_the_clock_goes_back_no_job_is_judged_on_samples_from_before_the_step`: today's
//!   `EvidenceProblem::Future` holds every window whose newest sample lies ahead of the clock,
//!   and readings stamped before the newest one seen are late (dropped). Once the clock passes
//!   that newest sample again, the window is whole at once: it is made of the samples taken
//!   before the step (in real time, more than the step ago), and the first minute after it.
//!   The hour of readings in between (here: the job worked) was dropped, and the job is judged
//!   idle on evidence an hour old, its dwell counted from it.
//! * `one_power_reading_in_a_window_does_not_make_zero_util_hung`: `Cap::PowerUnknown` holds a
//!   hung job at alert only when a GPU has no power reading at all in the window
//!   (`g.power_known == 0` in `Hung::matches`). A power sensor that answers `[N/A]` on all
//!   but one sample of the window lifts the hold: the job is drained and cancelled as hung on
//!   one low reading, though 19 of 20 samples cannot tell a deadlock from a broken util
//!   counter.
//! * `zero_util_without_memory_and_power_unknown_is_not_cancelled_as_idle`: the hung half of
//!   trial 7's lesson got `Cap::PowerUnknown`; the idle half did not. `idle_power_frac` is now
//!   capped at 0.4 because a GPU with nothing in memory and no process drawing more "is doing
//!   work its counters do not show" (trial 7: cancelled as idle at 0.6), but `gpu_is_idle`'s
//!   power test (`power_idle == power_known`) holds vacuously with power `[N/A]`: the same GPU
//!   is cancelled as idle whenever its readings are not bit-identical (memory.used moving by
//!   a MiB is enough to escape the freeze hold).

mod harness;
use harness::*;
use policy::{Mode, Policy, Reading, Sample, Verdict};

/// Input: one idle 1-GPU job, default window 20m, gap 3m, stages alert 0s / drain 30m /
/// cancel 2h. The engine runs one cycle a minute up to t = 3h (the job idle: alert, drain,
/// cancel in observe mode). Then the clock steps back one hour (an NTP step, a VM snapshot
/// restored) and the daemon goes on each minute: for that repeated hour the job works (busy
/// readings, stamped by the stepped clock, so earlier than the newest seen: late, dropped).
/// From the moment the clock passes 3h again the GPU reads idle.
///
/// What happens: at 3h + 1m the window is "covered" (20 minutes of samples stamped 2h41m..3h,
/// taken an hour of real time earlier, plus one new one) and the job is at alert at once; the
/// breach's dwell starts from those old samples.
///
/// What should happen (as the daemon's own clock-step warning promises: "jobs are judged
/// again only once the clock has passed the last cycle's time and a full window has been
/// gathered after it"): no verdict at alert or above before a window's worth of samples
/// stamped after the step has been gathered (3h + window − max_sample_gap at the earliest).
#[test]
fn after_the_clock_goes_back_no_job_is_judged_on_samples_from_before_the_step() {
    let mut run = Run::new(cfg_with_cancel(2 * 3600), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    run.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    assert!(
        run.max_verdict(0) >= Verdict::Drain,
        "control: the idle job escalated before the step"
    );
    let caught_up_s = run.now_s;
    // The clock steps back one hour; the job works through the repeated hour.
    run.now_s -= 3600;
    run.run_until(caught_up_s, |_, _, _| Gpu::Busy);
    // The clock passes the newest sample seen; the GPU reads idle from now on.
    let window_s = 20 * 60;
    let gap_s = 3 * 60;
    let mut early = Vec::new();
    while run.now_s < caught_up_s + window_s {
        let f = run.tick(|_, _, _| Gpu::Idle)[0].clone();
        if run.now_s < caught_up_s + window_s - gap_s && f.verdict >= Verdict::Alert {
            early.push(((run.now_s - caught_up_s) / 60, f.verdict, f.dwell_s / 60));
        }
    }
    assert!(
        early.is_empty(),
        "judged on pre-step samples, (minutes after catching up, verdict, dwell minutes): {early:?}"
    );
}

/// Input: one GPU for four hours, default policy with a cancel stage at 2h: 0 % util, about
/// 30 GB held (moving by a few MiB), one process; `power.draw` `[N/A]` except on one sample in
/// twenty (70 W of 400 W then).
///
/// What happens: `hung`, cancelled (with no reading at all it is held at alert, review 13).
///
/// What should happen: power counts as known for the hung test only where it covers the
/// window as utilisation must (or at least most of it); one reading in twenty leaves the
/// GPU's power unknown for the rest, so the job is held at alert (`Cap::PowerUnknown`).
#[test]
fn one_power_reading_in_a_window_does_not_make_zero_util_hung() {
    let at = |one_in: i64| {
        move |tick: i64, t: i64| {
            let known = one_in > 0 && tick % one_in == 0;
            Sample {
                util_pct: 0.0.into(),
                mem_used_mib: (30_000.0 + (tick % 7) as f64).into(),
                power_w: if known { 70.0.into() } else { Reading::MISSING },
                power_limit_w: 400.0.into(),
                procs: Some(1),
                ..base_sample(t)
            }
        }
    };
    let policy = || Policy::new(&cfg_with_cancel(2 * 3600)).unwrap();
    let none = worst_of(policy(), 240, at(0));
    assert!(
        none.0 <= Verdict::Alert,
        "control: no power reading at all is held at alert: {none:?}"
    );
    let one = worst_of(policy(), 240, at(20));
    assert!(
        one.0 <= Verdict::Alert,
        "0 % util, memory held, power read on 1 sample in 20: reached {} {}",
        one.0,
        one.1
    );
}

/// Input: one GPU for four hours, default policy with a cancel stage at 2h: 0 % util, 0 or 1
/// MiB used (alternating), process count 0, `power.draw` and `power.limit` `[N/A]` on every
/// sample.
///
/// What happens: `idle`, cancelled (control: with the power known at 300 W of 400 W, i.e.
/// above `idle_power_frac`, it is not idle).
///
/// What should happen: with no power reading in the window, "idle" rests on util and memory
/// only, the readings trial 7 showed can miss work; the job is held at alert as a hung one
/// with unknown power is (`Cap::PowerUnknown`), or `idle` needs power known.
#[test]
fn zero_util_without_memory_and_power_unknown_is_not_cancelled_as_idle() {
    let at = |power_w: Reading| {
        move |tick: i64, t: i64| Sample {
            util_pct: 0.0.into(),
            mem_used_mib: ((tick % 2) as f64).into(),
            power_w,
            power_limit_w: if power_w.is_missing() { Reading::MISSING } else { 400.0.into() },
            procs: Some(0),
            ..base_sample(t)
        }
    };
    let policy = || Policy::new(&cfg_with_cancel(2 * 3600)).unwrap();
    let busy = worst_of(policy(), 240, at(300.0.into()));
    assert!(busy.0 <= Verdict::Alert, "control: 300 W known is not idle: {busy:?}");
    let unknown = worst_of(policy(), 240, at(Reading::MISSING));
    assert!(
        unknown.0 <= Verdict::Alert,
        "0 % util, no memory, no process, power unknown on every sample: reached {} {}",
        unknown.0,
        unknown.1
    );
}
