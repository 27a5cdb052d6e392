//! Exemptions are decided again whenever a breaching job's facts change (guard 8), also
//! after the engine kept the last decision's facts in its compact form (`FactsSeen`):
//! a user who adds the opt-out marker mid-breach is honoured from the next cycle, one who
//! removes it loses the exemption, and bytes moved from one fact to the next are a change.

mod harness;
use harness::*;
use policy::{Cap, Mode, Verdict};

/// An idle job of 8 GPUs on one node (the lane path) and one of 1 GPU (the general path).
fn jobs() -> Vec<policy::JobFacts> {
    let mut j = vec![job("1", 0, &[(0, 8)]), job("2", 0, &[(1, 1)])];
    for x in &mut j {
        x.user = "ab".into();
        x.account = "c".into();
    }
    j
}

#[test]
fn exemption_follows_the_facts_of_a_breaching_job() {
    let mut c = cfg_with_cancel(2 * 3600);
    c.exempt.accounts = vec!["bc".into()];
    let mut r = Run::new(c, Mode::Observe, jobs());
    // Into a confirmed breach, not exempt.
    r.run_until(3600, |_, _, _| Gpu::Idle);
    for ji in 0..2 {
        assert!(r.verdict(ji) >= Verdict::Alert, "job {ji}: {:?}", r.out[ji]);
        assert_eq!(r.out[ji].exempt, None, "job {ji}");
    }
    // The user adds the marker: exempt from the next cycle on, and held there.
    for j in &mut r.jobs {
        j.comment = "please keep gpu-reaper:exempt".into();
    }
    r.tick(|_, _, _| Gpu::Idle);
    for ji in 0..2 {
        assert_eq!(r.out[ji].exempt.as_deref(), Some("comment marker"), "job {ji}");
        assert_eq!(r.out[ji].cap, Some(Cap::Exempt), "job {ji}");
    }
    // The marker goes: the exemption goes with it.
    for j in &mut r.jobs {
        j.comment.clear();
    }
    r.tick(|_, _, _| Gpu::Idle);
    for ji in 0..2 {
        assert_eq!(r.out[ji].exempt, None, "job {ji}");
    }
    // One byte moved from the user to the account ("ab", "c" -> "a", "bc"): the same bytes
    // in the same order, but the account is now an exempt one.
    for j in &mut r.jobs {
        j.user = "a".into();
        j.account = "bc".into();
    }
    r.tick(|_, _, _| Gpu::Idle);
    for ji in 0..2 {
        assert!(
            r.out[ji].exempt.as_deref().is_some_and(|e| e.contains("bc")),
            "job {ji}: {:?}",
            r.out[ji].exempt
        );
    }
    // And back: no longer exempt, and the job climbs again as it would have.
    for j in &mut r.jobs {
        j.user = "ab".into();
        j.account = "c".into();
    }
    r.run_until(8 * 3600, |_, _, _| Gpu::Idle);
    for ji in 0..2 {
        assert_eq!(r.out[ji].exempt, None, "job {ji}");
        assert_eq!(r.verdict(ji), Verdict::Cancel, "job {ji}");
    }
    assert_eq!(r.engine.lane_jobs(), 1, "the 8-GPU job should be on the lane path");
}
