//! One named test per safety guard of the policy (ARCHITECTURE.md lists them as invariants).
//! Each guard also has a proptest property in `properties.rs`.

mod harness;
use harness::*;
use policy::{Cap, Cause, DrainConfirmation, EvidenceProblem, GpuRef, Mode, NodeId, Policy, Scope, Verdict};

#[test]
fn guard_1_warmup_job_is_never_judged() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 2)])]);
    r.run_until(cfg().warmup.secs() - 1, |_, _, _| Gpu::Idle);
    for (_, f) in &r.history {
        assert_eq!((f[0].verdict, f[0].cause), (Verdict::Healthy, Cause::Warmup));
    }
    assert!(r.out[0].reason(&r.jobs[0]).contains("warmup"));
}

#[test]
fn guard_2_alert_needs_a_covered_window() {
    let c = cfg();
    let mut r = Run::new(c.clone(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(4 * 3600, |_, _, _| Gpu::Idle);
    // Samples start at 60 s; the window is covered once the first sample is no later than
    // now − window + gap.
    let first_alert = r.first_at(0, Verdict::Alert).unwrap();
    assert_eq!(first_alert, 60 + c.window.secs() - c.max_sample_gap.secs());
    assert_eq!(
        r.history.iter().find(|(t, _)| *t == first_alert - 60).unwrap().1[0].verdict,
        Verdict::Watching
    );
}

#[test]
fn guard_2_a_hole_longer_than_the_gap_is_insufficient_evidence() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    // Idle, with a 4-minute hole (gap is 3 minutes) at 2 h.
    r.run_until(
        4 * 3600,
        |t, _, _| if (7200..7200 + 240).contains(&t) { Gpu::Missing } else { Gpu::Idle },
    );
    let at = |t: i64| r.history.iter().find(|(h, _)| *h == t).unwrap().1[0].clone();
    assert_eq!(at(7200 + 240).cause, Cause::Evidence(EvidenceProblem::Gap));
    assert_eq!(at(7200 + 240).verdict, Verdict::InsufficientEvidence);
    // While the hole is inside the window (the sample before it, at 7140, is still in the
    // window), nothing escalates.
    for t in (7200 + 240..7140 + 1200).step_by(60) {
        assert_eq!(at(t).verdict, Verdict::InsufficientEvidence, "at {t}");
    }
}

#[test]
fn guard_2_a_stale_window_is_insufficient_evidence() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3600, |_, _, _| Gpu::Idle);
    r.run_until(3600 + 240, |_, _, _| Gpu::Missing);
    assert_eq!(r.out[0].cause, Cause::Evidence(EvidenceProblem::Stale));
}

#[test]
fn guard_3_sentinels_and_out_of_bounds_are_not_zero() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    let bad = [
        4_294_967_295.0,
        2_147_483_632.0,
        9_223_372_036_854_775_792.0,
        140_737_488_355_328.0,
        -1.0,
        101.0,
        f64::NAN,
    ];
    let mut i = 0;
    while r.now_s < 3 * 3600 {
        let t = r.now_s + 60;
        let mut s = sample(Gpu::Idle, t, GpuRef { node: NodeId(0), gpu: 0 }).unwrap();
        s.util_pct = bad[i % bad.len()].into();
        i += 1;
        r.tick_samples(vec![s]);
        assert!(r.verdict(0) <= Verdict::InsufficientEvidence);
    }
    assert!(r.out[0].evidence.invalid_samples >= 19);
}

#[test]
fn guard_4_one_sample_at_the_threshold_clears_low_utilisation() {
    let c = cfg();
    let thr = c.util_threshold_pct as u8;
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    // Idle throughout, except one sample at exactly the threshold every 15 min.
    r.run_until(6 * 3600, |t, _, _| if t % 900 == 0 { Gpu::Util(thr) } else { Gpu::Idle });
    assert!(r.max_verdict(0) < Verdict::Alert, "reached {}", r.max_verdict(0));
    assert!(r.out[0].evidence.mean_util_pct < 2.0, "the mean is far below the threshold");
    // …while just below the threshold the job is alerted.
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(6 * 3600, |t, _, _| if t % 900 == 0 { Gpu::Util(thr - 1) } else { Gpu::Idle });
    assert!(r.max_verdict(0) >= Verdict::Alert);
}

#[test]
fn guard_5_stages_follow_dwell_and_a_gap_restarts_escalation() {
    let c = cfg();
    let mut r = Run::new(c.clone(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    let alert = r.first_at(0, Verdict::Alert).unwrap();
    let drain = r.first_at(0, Verdict::Drain).unwrap();
    // Breach start is the first sample (60 s); drain at dwell ≥ 60 m.
    assert_eq!(drain, 60 + 3600);
    assert!(alert < drain);
    assert_eq!(r.verdict(0), Verdict::Drain);
    assert!(r.out[0].hypothetical, "observe-mode drains are hypothetical");
    // An evidence gap ends the breach; escalation starts again from the first alert.
    r.run_until(3 * 3600 + 300, |_, _, _| Gpu::Missing);
    assert_eq!(r.verdict(0), Verdict::InsufficientEvidence);
    let restart = r.now_s;
    r.run_until(8 * 3600, |_, _, _| Gpu::Idle);
    let again = r
        .history
        .iter()
        .filter(|(t, _)| *t > restart)
        .find(|(_, f)| f[0].verdict >= Verdict::Alert)
        .unwrap();
    assert_eq!(again.1[0].verdict, Verdict::Alert, "escalation restarts at alert, not at drain");
    let drain_again = r
        .history
        .iter()
        .filter(|(t, _)| *t > restart)
        .find(|(_, f)| f[0].verdict >= Verdict::Drain)
        .unwrap()
        .0;
    assert!(
        drain_again >= restart + 3600,
        "drain again only after a fresh 60 m dwell: {drain_again}"
    );
}

#[test]
fn guard_6_cancel_needs_a_confirmed_drain_one_window_old_and_notice() {
    let c = cfg_with_cancel(2 * 3600);
    let mut r = Run::new(c.clone(), Mode::Observe, vec![job("1", 0, &[(0, 2)])]);
    r.run_until(6 * 3600, |_, _, _| Gpu::Idle);
    let alert = r.first_at(0, Verdict::Alert).unwrap();
    let drain = r.first_at(0, Verdict::Drain).unwrap();
    let cancel = r.first_at(0, Verdict::Cancel).unwrap();
    // Hypothetical confirmation one cycle after the drain verdict; cancel at least one window
    // after it, after notice, and at the cancel stage's dwell.
    assert!(cancel >= drain + 60 + c.window.secs());
    assert!(cancel - alert >= c.notice.secs());
    assert_eq!(cancel, 60 + 2 * 3600);
    assert!(r.out[0].hypothetical);
}

#[test]
fn guard_6_enforce_mode_ignores_hypothetical_confirmations_and_needs_real_ones() {
    let c = cfg_with_cancel(2 * 3600);
    let mut r = Run::new(c.clone(), Mode::Enforce, vec![job("1", 0, &[(0, 2)])]);
    let mut confirmed = None;
    while r.now_s < 8 * 3600 {
        if r.history.last().is_some_and(|(_, f)| f[0].verdict == Verdict::Drain) {
            // A hypothetical confirmation is offered every cycle; it must be ignored.
            r.drains.push(DrainConfirmation {
                job_id: "1".into(),
                nodes: vec![NodeId(0)],
                confirmed_s: r.now_s,
                hypothetical: true,
            });
        }
        r.tick(|_, _, _| Gpu::Idle);
        assert_ne!(r.verdict(0), Verdict::Cancel, "cancelled on hypothetical drains at {}", r.now_s);
        if r.verdict(0) == Verdict::Drain && r.now_s > 5 * 3600 && confirmed.is_none() {
            confirmed = Some(r.now_s);
        }
    }
    assert_eq!(r.out[0].cap, Some(Cap::DrainUnconfirmed));
    // A real confirmation that does not cover the job's nodes is ignored.
    let elsewhere = DrainConfirmation {
        job_id: "1".into(),
        nodes: vec![NodeId(7)],
        confirmed_s: r.now_s,
        hypothetical: false,
    };
    r.drains.push(elsewhere);
    r.tick(|_, _, _| Gpu::Idle);
    // A real confirmation, one window after the cycle that hears of it (the next, at t0 + 60:
    // review 16), allows the cancel.
    let t0 = r.now_s;
    r.drains.push(DrainConfirmation {
        job_id: "1".into(),
        nodes: vec![NodeId(0)],
        confirmed_s: t0,
        hypothetical: false,
    });
    r.run_until(t0 + 2 * c.window.secs(), |_, _, _| Gpu::Idle);
    let cancel = r.first_at(0, Verdict::Cancel).unwrap();
    assert_eq!(cancel, t0 + 60 + c.window.secs());
    assert!(!r.out[0].hypothetical);
    assert!(r.engine.counters().ignored_confirmations > 0);
}

#[test]
fn guard_6_a_drain_older_than_the_breach_counts_from_the_breach_start() {
    // After a restart the enforcer finds its own standing drain; the breach must still be
    // re-confirmed and then last a full window before a cancel.
    let mut c = cfg();
    c.stages = ["alert", "drain", "cancel"]
        .iter()
        .map(|v| policy::StageConfig {
            after: policy::DurationS(0),
            verdict: v.to_string(),
        })
        .collect();
    c.notice = policy::DurationS(0);
    let mut r = Run::new(c.clone(), Mode::Enforce, vec![job("1", 0, &[(0, 1)])]);
    let drain_s = -500;
    let mut breach_seen = None;
    while r.now_s < 3 * 3600 {
        r.drains.push(DrainConfirmation {
            job_id: "1".into(),
            nodes: vec![NodeId(0)],
            confirmed_s: drain_s,
            hypothetical: false,
        });
        r.tick(|_, _, _| Gpu::Idle);
        if breach_seen.is_none() && r.out[0].cause == Cause::Breach {
            breach_seen = Some(r.now_s - r.out[0].dwell_s);
        }
    }
    let breach_start = breach_seen.unwrap();
    assert!(breach_start > drain_s);
    let cancel = r.first_at(0, Verdict::Cancel).unwrap();
    assert!(
        cancel >= breach_start + c.window.secs(),
        "cancel {cancel} breach start {breach_start}"
    );
    assert!(
        cancel > r.first_at(0, Verdict::Drain).unwrap() + 60,
        "the drain's age alone would allow the cancel one cycle after it"
    );
}

#[test]
fn guard_6_no_jump_from_healthy_to_cancel() {
    // Every stage at 0 and the highest ceilings: the ladder still climbs one rung per cycle.
    let mut c = cfg();
    c.stages = vec![policy::StageConfig {
        after: policy::DurationS(0),
        verdict: "cancel".into(),
    }];
    c.notice = policy::DurationS(0);
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    let mut prev = Verdict::Healthy;
    for (t, f) in &r.history {
        let v = f[0].verdict;
        if v > Verdict::Alert {
            assert!(prev >= Verdict::Alert && v as u8 <= prev as u8 + 1, "{prev} → {v} at {t}");
        }
        prev = v;
    }
    assert_eq!(r.verdict(0), Verdict::Cancel);
}

#[test]
fn guard_7_ceilings_apply_per_signature() {
    let c = cfg_with_cancel(2 * 3600);
    let mut r = Run::new(c.clone(), Mode::Observe, vec![job("1", 0, &[(0, 2)]), job("2", 0, &[(1, 2)])]);
    r.run_until(6 * 3600, |_, ji, _| if ji == 0 { Gpu::Spin } else { Gpu::Starved });
    assert_eq!(r.out[0].signature_name(), "spin");
    assert_eq!(r.max_verdict(0), Verdict::Alert);
    assert_eq!(r.out[0].cap, Some(Cap::Ceiling));
    assert_eq!(r.out[1].signature_name(), "starved");
    assert_eq!(r.max_verdict(1), Verdict::Alert);
    // Raising spin's ceiling lets it climb.
    let mut c2 = c;
    c2.ceilings.insert("spin".into(), "drain".into());
    let mut r = Run::new(c2, Mode::Observe, vec![job("1", 0, &[(0, 2)])]);
    r.run_until(6 * 3600, |_, _, _| Gpu::Spin);
    assert_eq!(r.max_verdict(0), Verdict::Drain);
}

/// Review 13: with `ceilings.idle = "drain"` and no drain stage (alert at once, cancel after
/// 2h), the engine never drained, though notices and check-config promised a drain at the
/// cancel stage's dwell. A stage above the ceiling counts at the ceiling's level.
#[test]
fn guard_7_a_stage_above_the_ceiling_drains_at_its_dwell() {
    let mut c = policy::PolicyConfig {
        stages: vec![
            policy::StageConfig {
                after: policy::DurationS(0),
                verdict: "alert".into(),
            },
            policy::StageConfig {
                after: policy::DurationS(2 * 3600),
                verdict: "cancel".into(),
            },
        ],
        ..policy::PolicyConfig::default()
    };
    c.ceilings.insert("idle".into(), "drain".into());
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(6 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.max_verdict(0), Verdict::Drain);
    let drained_at = r.first_at(0, Verdict::Drain).unwrap();
    let f = &r.history.iter().find(|(t, _)| *t == drained_at).unwrap().1[0];
    assert!(
        f.dwell_s >= 2 * 3600 && f.dwell_s < 2 * 3600 + 120,
        "drained at dwell {}",
        f.dwell_s
    );
    assert_eq!(r.out[0].cap, Some(Cap::Ceiling));
    // The drain level has stood as long as the breach; a drain ceiling opens no cancel level.
    let (drain, cancel) = r.engine.level_dwells_s(0, r.now_s);
    assert_eq!((drain, cancel), (Some(r.out[0].dwell_s), None));
    assert_eq!(r.engine.level_dwells_s(1, r.now_s), (None, None), "no job at position 1");
}

#[test]
fn guard_8_exemptions_hold_at_watching_and_are_recorded() {
    let mut c = cfg_with_cancel(2 * 3600);
    c.exempt.users = vec!["BOB".into()];
    c.exempt.name_regex = "^jupyter".into();
    let mut jobs = vec![
        job("1", 0, &[(0, 1)]),
        job("2", 0, &[(1, 1)]),
        job("3", 0, &[(2, 1)]),
        job("4", 0, &[(3, 1)]),
    ];
    jobs[0].user = "bob".into();
    jobs[1].name = "jupyter-lab".into();
    jobs[2].comment = "debug run gpu-reaper:exempt".into();
    let mut r = Run::new(c, Mode::Observe, jobs);
    r.run_until(6 * 3600, |_, _, _| Gpu::Idle);
    for ji in 0..3 {
        assert_eq!(r.max_verdict(ji), Verdict::Watching, "job {ji}");
        assert_eq!(r.out[ji].cap, Some(Cap::Exempt));
        assert!(r.out[ji].exempt.is_some());
        assert!(r.out[ji].reason(&r.jobs[ji]).contains("exempt"));
    }
    assert_eq!(r.out[2].exempt.as_deref(), Some("comment marker"));
    assert_eq!(r.max_verdict(3), Verdict::Cancel);
    assert!(Policy::new(&policy::PolicyConfig {
        exempt: policy::ExemptConfig {
            name_regex: "([".into(),
            ..Default::default()
        },
        ..cfg()
    })
    .is_err());
}

#[test]
fn guard_9_partial_scope_stops_at_alert() {
    let c = cfg_with_cancel(2 * 3600);
    // Two-node job seen from node 0 only, and a one-node job on node 0.
    let mut second = job("2", 0, &[(0, 4)]);
    for g in &mut second.alloc {
        g.gpu += 4;
    }
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 4), (1, 4)]), second]);
    r.scope = Scope::Node(NodeId(0));
    r.run_until(6 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.max_verdict(0), Verdict::Alert);
    assert_eq!(r.out[0].cap, Some(Cap::PartialScope));
    assert_eq!(r.out[0].evidence.gpus_observed, 4);
    assert_eq!(r.max_verdict(1), Verdict::Cancel);
}

#[test]
fn guard_9_a_missing_node_is_insufficient_evidence() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 4), (1, 4)])]);
    r.run_until(6 * 3600, |_, _, g| if g.node == NodeId(1) { Gpu::Missing } else { Gpu::Idle });
    assert_eq!(r.max_verdict(0), Verdict::InsufficientEvidence);
}

#[test]
fn guard_10_future_samples_are_invalid_and_a_clock_jump_resets() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(4 * 3600, |_, _, _| Gpu::Future);
    assert_eq!(r.max_verdict(0), Verdict::InsufficientEvidence);
    assert!(r.out[0].evidence.invalid_samples > 0);
    // A clock that jumps back never takes a job up the ladder.
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.verdict(0), Verdict::Drain);
    r.now_s -= 7200;
    r.tick(|_, _, _| Gpu::Idle);
    assert!(r.verdict(0) <= Verdict::Alert, "{}", r.verdict(0));
}

/// Trial 7 follow-up and review 14: after the clock went back an hour, the window still held
/// the last hour's samples, now stamped in the future, while every new reading counted as
/// late, so the job was judged on that frozen hour, and later on hour-old samples. A step back
/// empties every window: the job is judged again only on a full window gathered after it.
#[test]
fn guard_10_a_clock_step_back_empties_the_windows() {
    let c = cfg_with_cancel(90 * 60);
    let mut r = Run::new(c.clone(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    assert!(r.verdict(0) >= Verdict::Alert);
    // The clock goes back one hour; the GPU stays idle.
    r.now_s -= 3600;
    let (back_s, from) = (r.now_s, r.history.len());
    r.run_until(back_s + 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.history.len() - from, 60);
    let first_alert = r.history[from..]
        .iter()
        .find(|(_, f)| f[0].verdict >= Verdict::Alert)
        .map(|(t, _)| *t);
    // Not before a window of new samples covers it (the first at back_s + 60).
    assert_eq!(first_alert, Some(back_s + 60 + c.window.secs() - c.max_sample_gap.secs()));
    for (_, f) in &r.history[from..] {
        assert!(
            f[0].evidence.window_start_s > back_s,
            "judged on a sample from before the step: {:?}",
            f[0].evidence
        );
    }
    // And a job working again after the step is healthy on its new samples, not late.
    let mut r = Run::new(c, Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    r.now_s -= 3600;
    let back_s = r.now_s;
    r.run_until(back_s + 1800, |_, _, _| Gpu::Busy);
    assert_eq!(r.verdict(0), Verdict::Healthy);
    assert_eq!(r.out[0].evidence.late_samples, 0);
}

#[test]
fn reason_is_one_short_line() {
    let mut j = job("1", 0, &[(0, 1)]);
    j.job_id = format!("{}\n;rm -rf /", "9".repeat(300));
    let mut r = Run::new(cfg(), Mode::Observe, vec![j]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    for (_, f) in &r.history {
        let reason = f[0].reason(&r.jobs[0]);
        assert!(reason.chars().count() < 200 && !reason.contains('\n'), "{reason:?}");
    }
}

#[test]
fn jobs_that_leave_are_forgotten() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)]), job("2", 0, &[(1, 1)])]);
    r.run_until(3000, |_, _, _| Gpu::Idle);
    assert_eq!(r.engine.tracked_jobs(), 2);
    r.jobs.remove(0);
    r.tick(|_, _, _| Gpu::Idle);
    assert_eq!(r.engine.tracked_jobs(), 1);
    assert_eq!(r.out.len(), 1);
    assert_eq!(r.verdict(0), Verdict::Alert, "the remaining job keeps its state");
}

#[test]
fn samples_for_unallocated_or_shared_gpus_are_not_attributed() {
    let mut r = Run::new(cfg(), Mode::Observe, vec![job("1", 0, &[(0, 1)]), job("2", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    // Both jobs claim node 0 GPU 0: neither may be judged on the other's samples.
    assert_eq!(r.max_verdict(0), Verdict::InsufficientEvidence);
    assert_eq!(r.max_verdict(1), Verdict::InsufficientEvidence);
    assert!(r.engine.counters().unattributed_samples > 0);
    let _ = GpuRef { node: NodeId(0), gpu: 0 };
}

#[test]
fn snapshot_restore_keeps_windows_but_restarts_escalation() {
    let c = cfg();
    let mut r = Run::new(c.clone(), Mode::Observe, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(3 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.verdict(0), Verdict::Drain);
    let snap = r.engine.snapshot(r.now_s);
    let json = serde_json::to_string(&snap).unwrap();
    let snap: policy::EngineSnapshot = serde_json::from_str(&json).unwrap();
    r.engine = policy::Engine::restore(Policy::new(&c).unwrap(), Mode::Observe, snap, r.now_s);
    r.tick(|_, _, _| Gpu::Idle);
    assert_eq!(r.verdict(0), Verdict::Alert, "the window survives, the escalation does not");
}

#[test]
fn guard_6_observe_reported_confirms_only_what_the_driver_reports() {
    let c = cfg_with_cancel(2 * 3600);
    // Never reported: the job stays at drain, marked hypothetical.
    let mut r = Run::new(c.clone(), Mode::ObserveReported, vec![job("1", 0, &[(0, 1)])]);
    r.run_until(6 * 3600, |_, _, _| Gpu::Idle);
    assert_eq!(r.max_verdict(0), Verdict::Drain);
    assert!(r.out[0].hypothetical);
    assert_eq!(r.out[0].cap, Some(Cap::DrainUnconfirmed));
    // Reported (hypothetically) every cycle after the drain verdict: the cancel follows.
    let mut r = Run::new(c, Mode::ObserveReported, vec![job("1", 0, &[(0, 1)])]);
    while r.now_s < 6 * 3600 {
        if r.history.last().is_some_and(|(_, f)| f[0].verdict >= Verdict::Drain) {
            let d = DrainConfirmation {
                job_id: "1".into(),
                nodes: vec![NodeId(0)],
                confirmed_s: r.now_s + 60,
                hypothetical: true,
            };
            r.drains.push(d);
        }
        r.tick(|_, _, _| Gpu::Idle);
    }
    assert_eq!(r.max_verdict(0), Verdict::Cancel);
    assert!(r.out[0].hypothetical);
}
