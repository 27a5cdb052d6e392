//! trial13 (operator trial, 2026-11-30): replay's safety check ("no drain/cancel within one
//! window after a reading at or above the threshold", `safety_violations` "must be 0") counts
//! every drain and cancel of a `spin` job as a violation: spin is ~100 % util at flat, low
//! power, so its readings are always above the threshold. With the spin ceiling at `cancel`
//! (the sweep's c039, the demo's config) a replay of a genuine NCCL deadlock prints
//! "safety check ... FAILED" while the score says the cancel is correct. Fails as reported.

mod common;
use common::*;
use policy::{Policy, PolicyConfig, StageConfig, Verdict};
use traces::read_trace;
use traces::replay::replay;

#[test]
fn a_spin_cancel_is_not_a_safety_violation() {
    let mut jobs = String::from(JOBS_HEADER);
    jobs.push_str("s,u,a,p,q,n,,0,14400,,1,n1:0\n");
    let mut samples = SAMPLES_HEADER.replace("sm_active\n", "sm_active,truth\n");
    for t in (0..14400).step_by(60) {
        // NCCL deadlock: 99-100 % util, memory held, flat ~75 W of 400 W.
        let util = 99 + (t / 60) % 2;
        let power = 75.0 + ((t / 60) % 3) as f64 * 0.5;
        samples.push_str(&format!("{t},s,n1,0,{util},30000,81920,{power},400,1,,wasted\n"));
    }
    let d = trace_dir(&jobs, &samples);
    let trace = read_trace(d.path(), false).unwrap().0;

    let mut c = PolicyConfig::default();
    c.stages.push(StageConfig {
        after: policy::DurationS(2 * 3600),
        verdict: "cancel".into(),
    });
    c.ceilings.insert("spin".into(), "cancel".into());
    let r = replay(&trace, Policy::new(&c).unwrap(), 60);
    let o = &r.jobs[0];
    assert_eq!(o.highest, Some(Verdict::Cancel));
    assert_eq!(o.score.as_ref().unwrap().cancel_correct, Some(true), "the cancel is scored correct");
    assert!(
        r.safety.is_empty(),
        "a correct spin cancel is reported as {} safety violations (first: {:?})",
        r.safety.len(),
        r.safety.first()
    );
}
