//! The thirteenth adversarial review, policy side. The ignored test fails on the engine as
//! reviewed and shows one finding.
//!
//! * `zero_util_with_power_unknown_is_not_cancelled_as_hung`: trial 6 #2 showed that 0 %
//!   `utilization.gpu` can sit beside a GPU that works (336 W of 400 W: a util counter that
//!   broke, or copy engines at work), and `hung` now refuses zero compute at high power
//!   (`gpu_is_hung`: `power_spin_low == power_known`). With the power unknown on every sample
//!   (`power.draw` `[N/A]`, as on GPUs and vGPU/MIG set-ups that do not report it) that check
//!   holds vacuously (0 == 0): the same GPU, its memory moving a little so the window is not
//!   identical, is `hung` and cancelled. The one reading that could tell a broken util counter
//!   from a deadlock is missing, and missing is read as "not high" (rule 1: unknown, never
//!   idle). The frozen check already holds a window without power at alert for the same
//!   reason ("held by freeze_undetectable").

mod harness;
use harness::*;
use policy::{Policy, Reading, Sample, Verdict};

/// Input: one GPU for four hours, default policy with a cancel stage at 2h: 0 % util, about
/// 30 GB held (moving by a few MiB, so nothing is frozen), one process, `power.draw` and
/// `power.limit` `[N/A]` on every sample.
///
/// What happens: `hung`, cancelled (the control with 70 W known is hung too; with 330 W known
/// it is not).
///
/// What should happen: with no power reading in the window, zero compute with memory held is
/// no ground for a drain or cancel (held at alert, as a window without power that could be
/// frozen is), since the reading that tells a broken util counter from a deadlock is unknown.
#[test]
fn zero_util_with_power_unknown_is_not_cancelled_as_hung() {
    let at = |power_w: Reading| {
        move |tick: i64, t: i64| Sample {
            util_pct: 0.0.into(),
            mem_used_mib: (30_000.0 + (tick % 7) as f64).into(),
            power_w,
            power_limit_w: if power_w.is_missing() { Reading::MISSING } else { 400.0.into() },
            procs: Some(1),
            ..base_sample(t)
        }
    };
    let policy = || Policy::new(&cfg_with_cancel(2 * 3600)).unwrap();
    assert_eq!(
        worst_of(policy(), 240, at(70.0.into())),
        (Verdict::Cancel, "hung"),
        "control: 70 W known"
    );
    let busy = worst_of(policy(), 240, at(330.0.into()));
    assert!(busy.0 <= Verdict::Alert, "control: 330 W known is never hung: {busy:?}");
    let unknown = worst_of(policy(), 240, at(Reading::MISSING));
    assert!(
        unknown.0 <= Verdict::Alert,
        "0 % util, memory held, power unknown on every sample: reached {} {}",
        unknown.0,
        unknown.1
    );
}
