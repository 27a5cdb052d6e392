//! The text of a user's notice: the finding's reason, then what may follow and when under this
//! site's policy, for that job. The same text goes to the notify command (its message
//! argument) and to the webhook when the webhook is the notice channel.
//!
//! What may follow is the lower of the signature's ceiling and the highest stage, and alert
//! only for a job the per-node enforcer never drains or cancels (on several nodes, a het-job
//! component, or one whose drain an admin resumed in this run). The times are the earliest
//! the engine and the planner allow, from the notice: a drain at the drain stage's dwell
//! (at least one cycle away, one rung per cycle); a cancel at the cancel stage's dwell, once
//! that drain has been confirmed and stood one window (guard 6), and `notice` after this
//! notice. Budgets, restarts and failed reads only make them later.

use crate::config::stage_after_s as stage_s;
use crate::plan::{Announced, JobView};
use policy::{Policy, Verdict};

/// `t_s` (epoch seconds) as `2026-11-30 07:05 UTC`; the number itself when out of range.
fn utc_minute(t_s: i64) -> String {
    chrono::DateTime::from_timestamp(t_s, 0).map_or_else(|| format!("{t_s} (epoch s)"), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
}

/// "in about 43m (2026-11-30 07:05 UTC)".
fn when(now_s: i64, in_s: i64) -> String {
    format!("in about {} ({})", policy::DurationS(in_s), utc_minute(now_s.saturating_add(in_s)))
}

/// The most the enforcer may do to a job with finding `f` while it looks as it does now: the
/// lower of its signature's ceiling and the highest stage, `Alert` when `alert_only` (see
/// [`crate::plan::JobView::reachable`]).
pub fn reachable(policy: &Policy, f: &policy::Finding, alert_only: bool) -> Verdict {
    let ceiling = f.signature.map_or(Verdict::Alert, |s| policy.ceiling(s));
    let staged = policy.stages().iter().map(|s| s.verdict).max().unwrap_or(Verdict::Alert);
    // The engine holds a job at alert while a GPU's readings repeat with power unknown (guard
    // 3: a freeze it cannot tell from a quiet GPU), and while a hung GPU has no power reading
    // (`Cap::PowerUnknown`). Should power come back, what may follow rises, and a new notice
    // is due before any cancel.
    // So while more than one sample in five of the window is invalid (`Cap::InvalidSamples`).
    if alert_only || f.evidence.freeze_undetectable_gpus > 0 || f.evidence.power_unknown || f.evidence.mostly_invalid() {
        Verdict::Alert
    } else {
        ceiling.min(staged).max(Verdict::Alert)
    }
}

/// The notice for the job of `view`, sent at `now_s`. `alert_only` says the enforcer will not
/// drain or cancel this job whatever its verdict (several nodes, a het-job component, an
/// admin's override). `earlier_notice_s` is when the job's user was given notice for an
/// earlier breach of the same run of the job, if they were: the notice then says this is a
/// new breach and that the notice period starts again. `drained_since_s` is when our drain
/// for this job was first seen standing (or, in observe mode, would have been), if it stands:
/// then no drain is announced, and the cancel is counted from that drain, not from a drain
/// yet to come (a notice that went out late, or in a new breach with our drain still
/// standing, must never name a cancel later than the real one). One line, with the times it
/// names ([`Announced`]: the planner holds a drain or cancel until then).
pub fn text(
    policy: &Policy,
    view: &JobView<'_>,
    now_s: i64,
    alert_only: bool,
    earlier_notice_s: Option<i64>,
    drained_since_s: Option<i64>,
) -> (String, Announced) {
    let drain = drained_since_s.map(OurDrain::Standing);
    text_keeping(policy, view, now_s, alert_only, earlier_notice_s, drain, Announced::default())
}

/// Our drain for the job, as a notice tells of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OurDrain {
    /// Seen standing (scontrol), counted from this time, epoch seconds.
    Standing(i64),
    /// Made in this very cycle, before the notice: counted from now, but not yet seen
    /// standing, so the notice says the node "is being drained" (trial 8: a drain Slurm
    /// never applied was announced as standing).
    MadeNow,
}

/// What a job with signature `sig` looks like, in words a user reads after "looks" (trial 11:
/// "looks spin").
fn looks(sig: &str) -> &str {
    match sig {
        "spin" => "like a spin (busy counters at flat, low power)",
        "partial" => "partly unused",
        "unknown" => "unused (no known pattern)",
        other => other,
    }
}

/// [`text`], keeping the times an earlier notice of this run of the job named (`kept`): a
/// drain or cancel it named is never named earlier now, so a user once told "not before T" is
/// told so again, whatever the stages are now (review 14: after a restart with shortened
/// stages, a new breach's notice named times before the old ones). The planner holds the
/// actions until these times.
pub fn text_keeping(
    policy: &Policy,
    view: &JobView<'_>,
    now_s: i64,
    alert_only: bool,
    earlier_notice_s: Option<i64>,
    drain: Option<OurDrain>,
    kept: Announced,
) -> (String, Announced) {
    let drained_since_s = drain.map(|d| match d {
        OurDrain::Standing(t) => t,
        OurDrain::MadeNow => now_s,
    });
    let drained_now = if drain == Some(OurDrain::MadeNow) {
        "The node is being drained now"
    } else {
        "The node is drained now"
    };
    let not_before = |at: Option<i64>| at.map_or(0, |t| t.saturating_sub(now_s).max(0));
    let mut announced = Announced::default();
    let f = view.finding;
    let c = policy.config();
    // The reason line without what held the verdict down (`held by one_rung`, say): those are
    // the engine's terms for the log, and the rest of the notice says what may follow.
    let mut out = policy::Finding { cap: None, ..f.clone() }.reason(view.job);
    // The reason opens with the engine's verdict ("job 401: drain hung on ..."), which a user
    // reads as done, though the drain may be held or made by nobody yet (trial 10): the
    // notice says what the job looks like, and the rest says what gpu-reaper does about it.
    if f.cause == policy::Cause::Breach {
        let opening = format!("job {}: {} {} ", view.job.job_id, f.verdict, f.signature_name());
        if let Some(rest) = out.strip_prefix(&opening) {
            out = format!("job {}: looks {} {rest}", view.job.job_id, looks(f.signature_name()));
        }
    }
    // What the daemon says may follow (budgets and the node's state included), at most what
    // the policy allows.
    let top = reachable(policy, f, alert_only).min(view.reachable);
    let sig = looks(f.signature_name());
    let dwell = f.dwell_s.max(0);
    // The engine counts the drain and cancel stages from the start of the breach's drain- and
    // cancel-capable level (review 13: a job that looked partial, then idle, was told the
    // drain came in 1m; it came in 11m).
    let drain_dwell = view.level_dwells_s.0.unwrap_or(dwell).max(0);
    let cancel_dwell = view.level_dwells_s.1.unwrap_or(dwell).max(0);
    let interval = c.interval.secs();
    // A cancel stage without a drain stage drains on its way, at the cancel stage's dwell.
    let drain_in = stage_s(policy, Verdict::Drain)
        .or_else(|| stage_s(policy, Verdict::Cancel))
        .map(|after| (after - drain_dwell).max(interval));
    let window = c.window.secs();
    match (top, drain_in) {
        (Verdict::Cancel, Some(d)) if drained_since_s.is_some() => {
            // A drain that stands counts for this breach only from the cycle after the
            // breach's own drain verdict (the engine's rule since review 16): before that
            // verdict, the cancel is as far off as with no drain at all (review 18: a new
            // breach was told a cancel 16 minutes early). After it, the engine counts the
            // drain from the later of its confirmation and the start of the cancel-capable
            // level; it must have stood one window. No interval is added: earlier is the safe
            // side of "at the earliest".
            let drain_part = if f.verdict < Verdict::Drain {
                d.max(not_before(kept.drain_at_s)) + interval + window
            } else {
                // The breach's own drain verdict came no earlier than its drain stage
                // (`drain_dwell − after` ago), and the drain counts from the cycle after it
                // (review 20: a notice sent at that very verdict counted from the standing
                // drain and named a cancel 11 minutes early).
                let after = stage_s(policy, Verdict::Drain).or_else(|| stage_s(policy, Verdict::Cancel)).unwrap_or(0);
                let verdict_s = now_s.saturating_sub((drain_dwell - after).max(0));
                let since = drained_since_s
                    .unwrap_or(now_s)
                    .max(now_s.saturating_sub(cancel_dwell))
                    .max(verdict_s.saturating_add(interval));
                since.saturating_add(window).saturating_sub(now_s).max(0)
            };
            let staged_in = stage_s(policy, Verdict::Cancel).map_or(0, |after| after - cancel_dwell);
            let cancel_in = staged_in.max(drain_part).max(c.notice.secs()).max(not_before(kept.cancel_at_s));
            announced.cancel_at_s = Some(now_s.saturating_add(cancel_in));
            out.push_str(&format!(
                ". {drained_now} (no new job starts on it). If this continues, gpu-reaper may cancel the job {}, at the earliest",
                when(now_s, cancel_in)
            ));
        }
        (Verdict::Drain, Some(_)) if drained_since_s.is_some() => out.push_str(&format!(
            ". {drained_now} (no new job starts on it; this job keeps running); gpu-reaper does not cancel the job while it looks {sig}"
        )),
        (Verdict::Cancel, Some(d)) => {
            let d = d.max(not_before(kept.drain_at_s));
            let staged_in = stage_s(policy, Verdict::Cancel).map_or(0, |after| after - cancel_dwell);
            let cancel_in = staged_in.max(d + interval + window).max(c.notice.secs()).max(not_before(kept.cancel_at_s));
            announced.drain_at_s = Some(now_s.saturating_add(d));
            announced.cancel_at_s = Some(now_s.saturating_add(cancel_in));
            out.push_str(&format!(
                ". If this continues, gpu-reaper may drain the node (no new job starts on it) {} and cancel the job {}, at the earliest",
                when(now_s, d),
                when(now_s, cancel_in)
            ));
        }
        (Verdict::Drain, Some(d)) => {
            let d = d.max(not_before(kept.drain_at_s));
            announced.drain_at_s = Some(now_s.saturating_add(d));
            out.push_str(&format!(
                ". If this continues, gpu-reaper may drain the node (no new job starts on it; this job keeps running) {} at the earliest; it does not cancel the job while it looks {sig}",
                when(now_s, d)
            ))
        }
        _ if alert_only => out.push_str(". This is an alert only: gpu-reaper does not drain the node or cancel this job as things stand, and tells you first if that changes"),
        _ if f.evidence.power_unknown && sig == "idle" => out.push_str(
            ". This is an alert only while the GPUs' power cannot be read: zero utilisation with nothing in memory looks idle, but only the power draw tells an idle GPU from one doing work its counters miss, so gpu-reaper does not drain the node or cancel the job on it",
        ),
        _ if f.evidence.power_unknown && sig == "hung" => out.push_str(
            ". This is an alert only while the GPUs' power cannot be read: zero utilisation with memory held looks hung, but only the power draw tells a deadlock from a utilisation counter that is wrong, so gpu-reaper does not drain the node or cancel the job on it",
        ),
        // `partial` and `unknown` carry the same hold for GPUs that look idle or hung (review
        // 18), where a site raised their ceilings.
        _ if f.evidence.power_unknown => out.push_str(
            ". This is an alert only while the GPUs' power cannot be read: zero utilisation looks like waste, but only the power draw tells an idle or deadlocked GPU from one doing work its counters miss, so gpu-reaper does not drain the node or cancel the job on it",
        ),
        _ if f.evidence.freeze_undetectable_gpus > 0 => out.push_str(
            ". This is an alert only while the GPUs' power cannot be read: their readings repeat unchanged, which a stuck collector shows too, so gpu-reaper does not drain the node or cancel the job on them",
        ),
        _ => out.push_str(&format!(
            ". This is an alert only: gpu-reaper does not drain the node or cancel the job while it looks {sig}"
        )),
    }
    // An earlier notice in this very breach announced less than now may follow.
    // The notice period is what stands before a cancel: it is said to start again only when a
    // cancel may follow (trial 8: an alert-only notice said so).
    let period = if top >= Verdict::Cancel {
        ", so the notice period starts again now"
    } else {
        ""
    };
    let same_breach = earlier_notice_s.filter(|t| *t >= now_s.saturating_sub(dwell));
    if let Some(t) = same_breach {
        out.push_str(&format!(
            ". You were told about this job at {}; since then more may follow (it looks {sig}, or the site's settings changed){period}",
            utc_minute(t)
        ));
    } else if let Some(t) = earlier_notice_s {
        out.push_str(&format!(
            ". You were told about this job at {}; that breach ended (the GPUs worked, their readings had a gap, or gpu-reaper restarted) and this is a new one{period}",
            utc_minute(t)
        ));
    }
    (out, announced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{Cause, Evidence, Finding, GpuRef, JobFacts, NodeId, PolicyConfig, SignatureId};

    fn policy(text: &str) -> Policy {
        let cfg: PolicyConfig = toml::from_str(text).unwrap();
        Policy::new(&cfg).unwrap()
    }

    fn job() -> JobFacts {
        JobFacts {
            job_id: "202".into(),
            user: "bob".into(),
            start_s: 0,
            alloc: vec![GpuRef { node: NodeId(0), gpu: 0 }],
            ..Default::default()
        }
    }

    fn finding(sig: &str, dwell_s: i64) -> Finding {
        Finding {
            job_index: 0,
            verdict: Verdict::Alert,
            signature: SignatureId::from_name(sig),
            cause: Cause::Breach,
            cap: None,
            dwell_s,
            signature_dwell_s: dwell_s,
            evidence: Evidence::default(),
            wasted_gpu_h: 0.0,
            hypothetical: false,
            exempt: None,
        }
    }

    const NOW: i64 = 1_800_000_000; // 2027-01-15 08:00 UTC

    fn notice_of(p: &Policy, f: &Finding) -> String {
        let (j, nodes) = (job(), vec!["gpu001".to_string()]);
        let view = JobView {
            job: &j,
            finding: f,
            nodes: &nodes,
            reachable: reachable(p, f, false),
            alert_only: false,
            level_dwells_s: (None, None),
        };
        text(p, &view, NOW, false, None, None).0
    }

    fn notice(p: &Policy, sig: &str, dwell_s: i64, alert_only: bool, earlier: Option<i64>) -> String {
        let (j, f, nodes) = (job(), finding(sig, dwell_s), vec!["gpu001".to_string()]);
        let view = JobView {
            job: &j,
            finding: &f,
            nodes: &nodes,
            reachable: reachable(p, &f, alert_only),
            alert_only,
            level_dwells_s: (None, None),
        };
        text(p, &view, NOW, alert_only, earlier, None).0
    }

    /// Trial 8: a drain made in the notice's own cycle is not yet seen standing (Slurm may
    /// not apply it): the notice says the node is being drained, and counts the cancel from
    /// now; a drain seen standing is "drained now".
    #[test]
    fn a_drain_made_this_cycle_is_being_drained_not_drained() {
        let p = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]");
        let (j, f, nodes) = (job(), finding("idle", 3600), vec!["gpu001".to_string()]);
        let view = JobView {
            job: &j,
            finding: &f,
            nodes: &nodes,
            reachable: Verdict::Cancel,
            alert_only: false,
            level_dwells_s: (None, None),
        };
        let (t, _) = text_keeping(&p, &view, NOW, false, None, Some(OurDrain::MadeNow), Announced::default());
        assert!(t.contains("The node is being drained now (no new job starts on it)"), "{t}");
        let (t, _) = text_keeping(
            &p,
            &view,
            NOW,
            false,
            None,
            Some(OurDrain::Standing(NOW - 600)),
            Announced::default(),
        );
        assert!(t.contains("The node is drained now (no new job starts on it)"), "{t}");
    }

    /// Review 14 #8: an idle job held at alert for unknown power is told why in idle's terms,
    /// not hung's ("memory held"), and that nothing follows.
    #[test]
    fn power_unknown_is_explained_in_the_signature_s_terms() {
        let p = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }]");
        let (j, nodes) = (job(), vec!["gpu001".to_string()]);
        for (sig, says) in [
            ("idle", "nothing in memory looks idle"),
            ("hung", "memory held looks hung"),
            ("partial", "an idle or deadlocked GPU"),
            ("unknown", "an idle or deadlocked GPU"),
        ] {
            let mut f = finding(sig, 0);
            f.evidence.power_unknown = true;
            let view = JobView {
                job: &j,
                finding: &f,
                nodes: &nodes,
                reachable: reachable(&p, &f, false),
                alert_only: false,
                level_dwells_s: (None, None),
            };
            let (t, _) = text(&p, &view, NOW, false, None, None);
            assert!(t.contains(says) && t.contains("does not drain the node or cancel"), "{sig}: {t}");
            assert!(!t.contains("may drain"), "{sig}: {t}");
        }
    }

    /// Trial 10: a notice opened "job 401: drain hung on ..." while nothing was drained; it
    /// says what the job looks like, whatever the verdict.
    #[test]
    fn the_notice_does_not_open_with_the_engine_s_verdict() {
        let p = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }]");
        for v in [Verdict::Alert, Verdict::Drain, Verdict::Cancel] {
            let f = Finding {
                verdict: v,
                ..finding("hung", 5940)
            };
            let t = notice_of(&p, &f);
            assert!(t.starts_with("job 202: looks hung on "), "{v}: {t}");
        }
        // Trial 11: "looks spin" was no English; each signature reads as words.
        for (sig, says) in [
            ("spin", "job 202: looks like a spin (busy counters at flat, low power) on "),
            ("partial", "job 202: looks partly unused on "),
            ("unknown", "job 202: looks unused (no known pattern) on "),
            ("idle", "job 202: looks idle on "),
        ] {
            let t = notice_of(&p, &finding(sig, 600));
            assert!(t.starts_with(says), "{sig}: {t}");
            assert!(!t.contains(&format!("looks {sig}")) || sig == "idle", "{sig}: {t}");
        }
    }

    /// Trial 7: the notice carried the engine's own terms ("held by one_rung").
    #[test]
    fn the_notice_leaves_out_what_held_the_verdict_down() {
        let p = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }]");
        let (j, nodes) = (job(), vec!["gpu001".to_string()]);
        let f = Finding {
            cap: Some(policy::Cap::OneRung),
            ..finding("idle", 0)
        };
        assert!(f.reason(&j).contains("held by one_rung"));
        let view = JobView {
            job: &j,
            finding: &f,
            nodes: &nodes,
            reachable: Verdict::Drain,
            alert_only: false,
            level_dwells_s: (None, None),
        };
        let (t, _) = text(&p, &view, NOW, false, None, None);
        assert!(!t.contains("held by") && t.starts_with("job 202: "), "{t}");
    }

    /// Trial 6 #8: the notice said "may be drained and cancelled if this continues" whatever
    /// the signature's ceiling, and the notify command got no consequence at all.
    #[test]
    fn the_notice_says_what_may_follow_and_when_for_that_signature() {
        let p = policy(
            "stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]\nnotice = \"30m\"\nwindow = \"20m\"",
        );
        // idle: ceiling cancel. Drain 1h from the breach start, cancel at 2h (the drain stood
        // a window by 1h21m, notice 30m from now).
        let t = notice(&p, "idle", 0, false, None);
        assert!(t.starts_with("job 202: "), "{t}");
        assert!(
            t.contains("drain the node (no new job starts on it) in about 1h (2027-01-15 09:00 UTC)")
                && t.contains("cancel the job in about 2h (2027-01-15 10:00 UTC), at the earliest"),
            "{t}"
        );
        assert!(!t.contains('\n') && !t.contains("told about this job"), "{t}");
        // partial: ceiling alert, so no drain or cancel is promised.
        let t = notice(&p, "partial", 0, false, None);
        assert!(
            t.contains("alert only") && t.contains("while it looks partly unused") && !t.contains("in about"),
            "{t}"
        );
        // A job the enforcer never drains here (multi-node, het, override).
        assert!(notice(&p, "idle", 0, true, None).contains("alert only"));
        // A drain ceiling: drained, never cancelled.
        let d = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]\nceilings = { idle = \"drain\" }");
        let t = notice(&d, "idle", 0, false, None);
        assert!(
            t.contains("drain the node") && t.contains("does not cancel the job while it looks idle") && !t.contains("cancel the job in"),
            "{t}"
        );
        // The default stages have no cancel stage.
        let t = notice(&policy(""), "hung", 0, false, None);
        assert!(t.contains("in about 1h") && t.contains("does not cancel"), "{t}");
        // Notice longer than the stages: the cancel waits for it, counted from this notice.
        let n = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"10m\", verdict = \"drain\" }, { after = \"20m\", verdict = \"cancel\" }]\nnotice = \"1h\"\nwindow = \"10m\"");
        assert!(
            notice(&n, "idle", 0, false, None).contains("cancel the job in about 1h ("),
            "notice dominates"
        );
        // Already 50 minutes into the breach (an alert stage after 50m): times count from now.
        let t = notice(&p, "idle", 50 * 60, false, None);
        assert!(
            t.contains("drain the node (no new job starts on it) in about 10m") && t.contains("cancel the job in about 1h10m"),
            "{t}"
        );
    }

    #[test]
    fn a_notice_for_a_new_breach_says_so() {
        let p = policy("stages = [{ after = \"0s\", verdict = \"alert\" }, { after = \"1h\", verdict = \"drain\" }, { after = \"2h\", verdict = \"cancel\" }]");
        let t = notice(&p, "idle", 0, false, Some(NOW - 3600));
        assert!(
            t.contains("You were told about this job at 2027-01-15 07:00 UTC")
                && t.contains("this is a new one")
                && t.contains("starts again"),
            "{t}"
        );
        // Trial 8: where no cancel may follow there is no notice period to speak of.
        let t = notice(&policy(""), "idle", 0, false, Some(NOW - 3600));
        assert!(t.contains("this is a new one") && !t.contains("notice period"), "{t}");
    }
}
