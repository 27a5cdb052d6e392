//! Scoring on small hand-made worlds, with the right answers worked out by hand in comments.

use policy::{DurationS, GpuRef, JobFacts, NodeId, NodeTable, Policy, PolicyConfig, Sample, StageConfig, Verdict};
use sim::drive::{self, EngineJudge, Judge, Judgement};
use sim::score::{Row, RowParams, Tally};
use sim::world::{CompactSample, Outcome, Phase, PhaseKind, SimJob, World};

/// A job on node 0 holding `gpus` (GPU indices on the node), with a phase script.
fn job(idx: usize, gpus: &[u16], used: u16, start: u32, end: u32, phases: &[(u32, u32, PhaseKind)]) -> SimJob {
    let phases: Vec<Phase> = phases.iter().map(|&(start, end, kind)| Phase { start, end, kind }).collect();
    let wholly_wasted_from = phases
        .last()
        .filter(|p| matches!(p.kind, PhaseKind::Hung | PhaseKind::Spin | PhaseKind::Idle))
        .map(|p| p.start);
    SimJob {
        facts: JobFacts {
            job_id: format!("{}", 100 + idx),
            start_s: start as i64 * 60,
            alloc: gpus.iter().map(|&g| GpuRef { node: NodeId(0), gpu: g }).collect(),
            ..JobFacts::default()
        },
        kind: 0,
        start,
        end,
        time_limit: end - start,
        outcome: Outcome::Complete,
        gpus: gpus.len() as u16,
        used,
        drain_extra_gpus: 8 - gpus.len() as u16,
        phases,
        wholly_wasted_from,
    }
}

/// A one-node, 8-GPU world. `sampler` gives each running job's samples (or none).
fn world(mut jobs: Vec<SimJob>, horizon: u32, sampler: impl Fn(&SimJob, u32, usize) -> Option<CompactSample>) -> World {
    // World invariant: jobs sorted by start.
    jobs.sort_by_key(|j| j.start);
    let mut nodes = NodeTable::new();
    nodes.intern("node001");
    let mut w = World {
        workload: "hand".into(),
        seed: 0,
        horizon,
        nodes,
        gpus_per_node: 8,
        mem_total_mib: 81920.0,
        power_limit_w: 400.0,
        kind_names: vec!["hand".into()],
        jobs,
        tick_offsets: Vec::new(),
        start_offsets: Vec::new(),
        samples: Vec::new(),
    };
    for t in 0..horizon {
        w.tick_offsets.push(w.samples.len() as u32);
        w.start_offsets.push(w.jobs.iter().filter(|j| j.start < t).count() as u32);
        for (ji, j) in w.jobs.iter().enumerate() {
            if j.start <= t && t < j.end {
                for slot in 0..j.gpus as usize {
                    if let Some(mut s) = sampler(j, t, slot) {
                        s.job = ji as u32;
                        s.gpu = j.facts.alloc[slot].gpu as u8;
                        w.samples.push(s);
                    }
                }
            }
        }
    }
    w.tick_offsets.push(w.samples.len() as u32);
    w.start_offsets.push(w.jobs.len() as u32);
    w
}

/// The sweep row of tally `t` over world `w` (policy `test`, config `x`, 1 day).
fn test_row(w: &World, t: &Tally) -> Row {
    Row::new(
        &RowParams {
            policy: "test".into(),
            config_id: "x".into(),
            ..Default::default()
        },
        w,
        1.0,
        t,
    )
}

/// Verdicts by (job id, tick) from a table of (job id, from tick, verdict), last match wins.
struct Scripted(Vec<(&'static str, u32, Verdict)>);

impl Judge for Scripted {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], _: &[Sample], out: &mut Vec<Judgement>) {
        let tick = (now_s / 60) as u32;
        out.clear();
        for j in jobs {
            let v = self
                .0
                .iter()
                .filter(|(id, from, _)| *id == j.job_id && *from <= tick)
                .map(|x| x.2)
                .next_back()
                .unwrap_or(Verdict::Healthy);
            out.push(Judgement {
                verdict: v,
                signature: None,
                healthy: v == Verdict::Healthy,
            });
        }
    }
}

#[test]
fn scripted_verdicts_are_scored_as_worked_out_by_hand() {
    use PhaseKind::*;
    // Node of 8 GPUs.
    // A (100): GPUs 0-1, ticks [0,180): compute, checkpoint [50,55), compute, hung from 100 to
    //   its time limit at 180. Wholly wasted from 100. Drain withholds 8 - 2 = 6 GPUs.
    // B (101): GPU 2, [10,150): compute, checkpoint [40,45), compute. Productive throughout.
    // C (102): GPU 3, [0,120): starved throughout.
    // D (103): GPUs 4-5, [0,100): compute on GPU 4 only; GPU 5 never used (partial).
    let jobs = vec![
        job(
            0,
            &[0, 1],
            2,
            0,
            180,
            &[(0, 50, Compute), (50, 55, Checkpoint), (55, 100, Compute), (100, 180, Hung)],
        ),
        job(1, &[2], 1, 10, 150, &[(10, 40, Compute), (40, 45, Checkpoint), (45, 150, Compute)]),
        job(2, &[3], 1, 0, 120, &[(0, 120, Starved)]),
        job(3, &[4, 5], 1, 0, 100, &[(0, 100, Compute)]),
    ];
    let w = world(jobs, 200, |_, _, _| None);
    let mut judge = Scripted(vec![
        ("100", 110, Verdict::Alert),
        ("100", 130, Verdict::Drain),
        ("100", 140, Verdict::Cancel),
        ("101", 60, Verdict::Alert),
        ("101", 70, Verdict::Drain),
        ("101", 80, Verdict::Cancel),
        ("102", 30, Verdict::Alert),
        ("103", 50, Verdict::Cancel),
    ]);
    let t = drive::run(&w, &mut judge);

    // Alerts: A at 110 (hung since 100: true, latency 10 ticks), C at 30 (starved since its
    // start 0: true, latency 30), D at 50 (partial: an unused GPU since 0: true, latency 50),
    // B at 60 (productive: false).
    assert_eq!((t.true_alerts, t.false_alerts), (3, 1));
    // Drains: A at 130 (wholly wasted: true), B at 70 and D at 50 (not wholly wasted: false).
    assert_eq!((t.drains, t.false_drains), (3, 2));
    // Drained GPU-ticks: A ticks 130..=140 × 6 = 66; B ticks 70..=80 × 7 = 77; D tick 50 × 6 = 6.
    assert_eq!(t.drained_gpu_ticks, 149);
    // Cancels: A at 140 is correct and recovers 2 GPUs × (180 - 140) = 80 GPU-ticks, latency
    // 140 - 100 = 40 ticks. B at 80 is false and loses 1 × (80 - 45) = 35 GPU-ticks (last
    // checkpoint ended at 45). D at 50 is false (partial) and loses 2 × (50 - 0) = 100.
    assert_eq!((t.cancels, t.false_cancels), (3, 2));
    assert_eq!(t.recovered_gpu_ticks, 80);
    assert_eq!(t.false_cancel_lost_gpu_ticks, 135);
    assert_eq!(t.cancel_latency, vec![40]);
    // Ground truth: A wastes 2 × 80 = 160 GPU-ticks, D's unused GPU 100; C is starved 120.
    assert_eq!(t.wasted_gpu_ticks, 260);
    assert_eq!(t.starved_gpu_ticks, 120);
    // The oracle recovers A from onset: 2 × (180 - 100) = 160.
    assert_eq!(t.oracle_gpu_ticks, 160);
    // Job-GPU-ticks: A 2 × 140 (cancelled at 140, counted through that tick: 141 ticks),
    // checked through the row below instead of by hand here.

    let row = test_row(&w, &t);
    assert_eq!(row.recovered_gpu_h, 1.333); // 80 / 60
    assert_eq!(row.wasted_gpu_h, 4.333); // 260 / 60
    assert_eq!(row.recovered_share, Some(0.308)); // 80 / 260
    assert_eq!(row.oracle_recovered_gpu_h, 2.667);
    assert_eq!(row.false_cancel_lost_gpu_h, 2.25); // 135 / 60
    assert_eq!(row.drained_gpu_h, 2.483); // 149 / 60
                                          // Alert latencies 10, 30, 50 ticks: nearest-rank p50 = 30 ticks, p95 = 50 ticks.
    assert_eq!((row.alert_latency_p50_s, row.alert_latency_p95_s), (Some(1800), Some(3000)));
    assert_eq!((row.cancel_latency_p50_s, row.cancel_latency_p95_s), (Some(2400), Some(2400)));
    // The row obeys every relation `sim merge` checks.
    assert_eq!(row.check_values(), Ok(()));
}

#[test]
fn without_recovery_a_drain_stands_until_its_job_leaves() {
    use PhaseKind::*;
    // A judge without a recovery window (the baselines, which model tools that do not
    // resume) has its drains stand until the job leaves the node, not end with the breach.
    // Node of 8 GPUs.
    // E (100): GPUs 0-1, [0,200), productive. Drain at 60, back to alert at 70 and healthy at
    //   80 (its breach ended), drain again at 120, healthy at 130. Its node stays drained from
    //   60 to its end at 200: one drain, false, withholding 6 × (200 - 60) = 840 GPU-ticks
    //   (the verdict stood at drain for only 20 ticks: 120 by the old count, and two drains).
    // F (101): GPU 2, [0,400), hung from 100; drained at 150, runs past the horizon (300):
    //   a true drain, 7 × (300 - 150) = 1050 GPU-ticks.
    // G (102): GPU 3, [0,250), hung from 100; drained at 150, cancelled at 170: resumed on the
    //   cycle after the cancel, 7 × (171 - 150) = 147 GPU-ticks.
    let jobs = vec![
        job(0, &[0, 1], 2, 0, 200, &[(0, 200, Compute)]),
        job(1, &[2], 1, 0, 400, &[(0, 100, Compute), (100, 400, Hung)]),
        job(2, &[3], 1, 0, 250, &[(0, 100, Compute), (100, 250, Hung)]),
    ];
    let w = world(jobs, 300, |_, _, _| None);
    let mut judge = Scripted(vec![
        ("100", 50, Verdict::Alert),
        ("100", 60, Verdict::Drain),
        ("100", 70, Verdict::Alert),
        ("100", 80, Verdict::Healthy),
        ("100", 110, Verdict::Alert),
        ("100", 120, Verdict::Drain),
        ("100", 130, Verdict::Healthy),
        ("101", 140, Verdict::Alert),
        ("101", 150, Verdict::Drain),
        ("102", 140, Verdict::Alert),
        ("102", 150, Verdict::Drain),
        ("102", 170, Verdict::Cancel),
    ]);
    let t = drive::run(&w, &mut judge);
    assert_eq!((t.drains, t.false_drains), (3, 1));
    assert_eq!(t.drained_gpu_ticks, 840 + 1050 + 147);
}

/// [`Scripted`] with the engine's recovery rule: a drained job whose verdict is `healthy` for
/// two windows of `window_s` has its drain resumed.
struct ScriptedRecovering(Scripted, i64);

impl Judge for ScriptedRecovering {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        self.0.judge(now_s, jobs, samples, out);
    }
    fn recovery_window_s(&self) -> Option<i64> {
        Some(self.1)
    }
}

#[test]
fn a_drain_is_resumed_once_its_job_works_again_for_two_windows_as_the_enforcers_is() {
    use PhaseKind::*;
    // The enforcer resumes our drain when its job leaves the node or works again
    // (policy::Recovery: healthy for two windows; enforcer/src/plan.rs, "Undrain"). Window 20
    // minutes: two windows are 40 ticks. Node of 8 GPUs.
    // E (100): GPUs 0-1, [0,300), productive. Drained at 60, healthy from 80: resumed at 120,
    //   6 × (120 - 60) = 360. Alert at 150, drained at 160, healthy from 170: resumed at 210,
    //   6 × (210 - 160) = 300. Two drains, both false, both resumed.
    // F (101): GPU 2, [0,400), hung from 100, drained at 150, never healthy, past the horizon
    //   (300): a true drain, 7 × (300 - 150) = 1050.
    // G (102): GPU 3, [0,250), hung from 100, drained at 150, healthy 160..180 (20 ticks: not
    //   two windows), drain again at 180 (the same drain, still standing), cancelled at 190:
    //   resumed on the cycle after, 7 × (191 - 150) = 287. One drain, true.
    let jobs = vec![
        job(0, &[0, 1], 2, 0, 300, &[(0, 300, Compute)]),
        job(1, &[2], 1, 0, 400, &[(0, 100, Compute), (100, 400, Hung)]),
        job(2, &[3], 1, 0, 250, &[(0, 100, Compute), (100, 250, Hung)]),
    ];
    let w = world(jobs, 300, |_, _, _| None);
    let script = Scripted(vec![
        ("100", 50, Verdict::Alert),
        ("100", 60, Verdict::Drain),
        ("100", 80, Verdict::Healthy),
        ("100", 150, Verdict::Alert),
        ("100", 160, Verdict::Drain),
        ("100", 170, Verdict::Healthy),
        ("101", 140, Verdict::Alert),
        ("101", 150, Verdict::Drain),
        ("102", 140, Verdict::Alert),
        ("102", 150, Verdict::Drain),
        ("102", 160, Verdict::Healthy),
        ("102", 180, Verdict::Drain),
        ("102", 190, Verdict::Cancel),
    ]);
    let t = drive::run(&w, &mut ScriptedRecovering(script, 1200));
    assert_eq!((t.drains, t.false_drains, t.drains_resumed), (4, 2, 2));
    assert_eq!(t.drained_gpu_ticks, 360 + 300 + 1050 + 287);
}

#[test]
fn recovery_from_multi_node_jobs_is_left_out_of_the_single_node_column() {
    use PhaseKind::*;
    // H (100): GPUs 0-1 of node 0, hung from 10, cancelled at 50: recovers 2 × (100 - 50) = 100.
    // I (101): GPU 2 of node 0 and GPU 0 of node 1, hung from 10, cancelled at 60: recovers
    //   2 × (100 - 60) = 80, which a per-node enforcer (holding it at alert) cannot make.
    let mut multi = job(1, &[2, 0], 2, 0, 100, &[(0, 10, Compute), (10, 100, Hung)]);
    multi.facts.alloc[1].node = NodeId(1);
    let jobs = vec![job(0, &[0, 1], 2, 0, 100, &[(0, 10, Compute), (10, 100, Hung)]), multi];
    let mut w = world(jobs, 120, |_, _, _| None);
    w.nodes.intern("node002");
    assert!(w.jobs[0].single_node() && !w.jobs[1].single_node());
    let mut judge = Scripted(vec![
        ("100", 20, Verdict::Alert),
        ("100", 40, Verdict::Drain),
        ("100", 50, Verdict::Cancel),
        ("101", 20, Verdict::Alert),
        ("101", 40, Verdict::Drain),
        ("101", 60, Verdict::Cancel),
    ]);
    let t = drive::run(&w, &mut judge);
    assert_eq!((t.cancels, t.false_cancels), (2, 0));
    assert_eq!(t.recovered_gpu_ticks, 180);
    assert_eq!(t.recovered_single_node_gpu_ticks, 100);
    let row = test_row(&w, &t);
    assert_eq!((row.recovered_gpu_h, row.recovered_single_node_gpu_h), (3.0, 1.667));
    assert_eq!(row.check_values(), Ok(()));
    // The oracle cancels both at onset (10): 2 × 90 each, of which H's from one node.
    let o = Tally::oracle(&w);
    assert_eq!((o.recovered_gpu_ticks, o.recovered_single_node_gpu_ticks), (360, 180));
    let mut bad = row.clone();
    bad.recovered_single_node_gpu_h = 3.5;
    assert_eq!(bad.check_values().unwrap_err().0, "recovered_single_node_gpu_h");
}

#[test]
fn drains_of_multi_node_jobs_are_left_out_of_the_single_node_drain_columns() {
    use PhaseKind::*;
    // The per-node enforcer holds a multi-node job at alert and never drains it: only the
    // drains of single-node jobs are drains it would make.
    // H (100): GPUs 0-1 of node 0, hung from 10, drained at 40: a true single-node drain.
    // I (101): GPU 2 of node 0 and GPU 0 of node 1, productive, drained at 40: a false drain
    //   the per-node enforcer would not make.
    // J (102): GPU 3 of node 0, productive, drained at 50 (and again at 70, after a healthy
    //   spell: the drain stands, one drain): a false single-node drain.
    // K (103): GPU 4 of node 0 and GPU 1 of node 1, hung from 10, drained at 40: a true
    //   multi-node drain.
    let mut multi = job(1, &[2, 0], 2, 0, 100, &[(0, 100, Compute)]);
    multi.facts.alloc[1].node = NodeId(1);
    let mut multi_hung = job(3, &[4, 1], 2, 0, 100, &[(0, 10, Compute), (10, 100, Hung)]);
    multi_hung.facts.alloc[1].node = NodeId(1);
    let jobs = vec![
        job(0, &[0, 1], 2, 0, 100, &[(0, 10, Compute), (10, 100, Hung)]),
        multi,
        job(2, &[3], 1, 0, 100, &[(0, 100, Compute)]),
        multi_hung,
    ];
    let mut w = world(jobs, 120, |_, _, _| None);
    w.nodes.intern("node002");
    let mut judge = Scripted(vec![
        ("100", 20, Verdict::Alert),
        ("100", 40, Verdict::Drain),
        ("101", 20, Verdict::Alert),
        ("101", 40, Verdict::Drain),
        ("102", 30, Verdict::Alert),
        ("102", 50, Verdict::Drain),
        ("102", 60, Verdict::Healthy),
        ("102", 70, Verdict::Drain),
        ("103", 20, Verdict::Alert),
        ("103", 40, Verdict::Drain),
    ]);
    let t = drive::run(&w, &mut judge);
    assert_eq!((t.drains, t.false_drains), (4, 2));
    assert_eq!((t.drains_single_node, t.false_drains_single_node), (2, 1));
    let row = test_row(&w, &t);
    assert_eq!((row.drains, row.false_drains), (4, 2));
    assert_eq!((row.drains_single_node, row.false_drains_single_node), (2, 1));
    assert_eq!(row.check_values(), Ok(()));
    // The oracle drains nothing.
    let o = Tally::oracle(&w);
    assert_eq!((o.drains_single_node, o.false_drains_single_node), (0, 0));
    // The relations a row read back from a sweep.csv must obey.
    let bad = |edit: fn(&mut Row)| {
        let mut r = row.clone();
        edit(&mut r);
        r.check_values().unwrap_err()
    };
    let e = bad(|r| r.false_drains_single_node = 3);
    assert_eq!((e.0, e.1.as_str()), ("false_drains_single_node", "3"));
    assert_eq!(e.2, "must not exceed drains_single_node (2)");
    let e = bad(|r| r.drains_single_node = 5);
    assert_eq!((e.0, e.2.as_str()), ("drains_single_node", "must not exceed drains (4)"));
    let e = bad(|r| {
        r.drains_single_node = 3;
        r.false_drains_single_node = 3;
    });
    assert_eq!(
        (e.0, e.2.as_str()),
        ("false_drains_single_node", "must not exceed false_drains (2)")
    );
}

/// Verdicts and signatures by (job id, tick) from a table of (job id, from tick, verdict,
/// signature name), last match wins.
struct SignedScript(Vec<(&'static str, u32, Verdict, &'static str)>);

impl Judge for SignedScript {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], _: &[Sample], out: &mut Vec<Judgement>) {
        let tick = (now_s / 60) as u32;
        out.clear();
        for j in jobs {
            let (verdict, sig) = self
                .0
                .iter()
                .filter(|(id, from, _, _)| *id == j.job_id && *from <= tick)
                .map(|x| (x.2, x.3))
                .next_back()
                .unwrap_or((Verdict::Healthy, ""));
            out.push(Judgement {
                verdict,
                signature: policy::signature::SignatureId::from_name(sig),
                healthy: verdict == Verdict::Healthy,
            });
        }
    }
}

#[test]
fn a_jobs_alerts_count_under_the_signature_of_its_highest_verdict() {
    use PhaseKind::*;
    let jobs = vec![
        job(0, &[0], 1, 0, 100, &[(0, 100, Hung)]),
        job(1, &[1], 1, 0, 100, &[(0, 100, Idle)]),
        job(2, &[2], 1, 0, 100, &[(0, 100, Spin)]),
    ];
    let w = world(jobs, 100, |_, _, _| None);
    let mut judge = SignedScript(vec![
        // 100: alerted as idle, then cancelled as hung in the same episode: its one alert
        // counts under hung, with its cancel.
        ("100", 5, Verdict::Alert, "idle"),
        ("100", 10, Verdict::Cancel, "hung"),
        // 101: alerted as partial, healthy again, alerted as starved, drained as idle, back to
        // alert as starved: its highest verdict (drain) named idle, so both alerts count there.
        ("101", 5, Verdict::Alert, "partial"),
        ("101", 8, Verdict::Healthy, ""),
        ("101", 12, Verdict::Alert, "starved"),
        ("101", 15, Verdict::Drain, "idle"),
        ("101", 18, Verdict::Alert, "starved"),
        // 102: alerted as spin and left there.
        ("102", 5, Verdict::Alert, "spin"),
    ]);
    let t = drive::run(&w, &mut judge);
    assert_eq!(t.true_alerts + t.false_alerts, 4);
    let row = Row::new(&RowParams::default(), &w, 1.0, &t);
    let alerts = [
        row.alerts_spin,
        row.alerts_hung,
        row.alerts_idle,
        row.alerts_starved,
        row.alerts_partial,
        row.alerts_unknown,
    ];
    assert_eq!(alerts, [1, 1, 2, 0, 0, 0]);
    assert_eq!((row.cancels, row.cancels_hung), (1, 1));
    for (sig, (a, c, _, _)) in sim::score::SIG_COLUMNS.iter().zip(row.by_signature()) {
        assert!(c <= a, "{sig}: {c} cancels, {a} alerts");
    }
    assert_eq!(row.check_values(), Ok(()));
}

#[test]
fn no_signature_in_the_committed_summary_shows_more_cancels_than_alerts() {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../reports/summary.md"));
    let text = std::fs::read_to_string(path).unwrap();
    let table = text
        .split("## Per-signature breakdown of the recommended configuration")
        .nth(1)
        .expect("the summary has the per-signature table");
    let mut rows = 0;
    for line in table.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | workload | signature | alerts | cancels | false cancels | recovered GPU-h |
        if cells.len() != 8 {
            continue;
        }
        let (Ok(alerts), Ok(cancels)) = (cells[3].parse::<u64>(), cells[4].parse::<u64>()) else {
            continue;
        };
        rows += 1;
        assert!(cancels <= alerts, "reports/summary.md: {line}");
    }
    assert!(rows >= 6, "{rows} table rows read");
}

#[test]
fn oracle_cancels_wholly_wasted_jobs_at_onset() {
    use PhaseKind::*;
    // Horizon 250 ticks.
    // E: 4 GPUs, [0, 300), idle from 120: recovered 4 × (250 − 120) = 520 (clipped at the horizon).
    // F: 2 GPUs, [0, 100), hung from 40: 2 × (100 − 40) = 120.
    // G: partial, never wholly wasted: nothing.
    let jobs = vec![
        job(0, &[0, 1, 2, 3], 4, 0, 300, &[(0, 120, Compute), (120, 300, Idle)]),
        job(1, &[4, 5], 2, 0, 100, &[(0, 40, Compute), (40, 100, Hung)]),
        job(2, &[6, 7], 1, 0, 80, &[(0, 80, Compute)]),
    ];
    let w = world(jobs, 250, |_, _, _| None);
    let t = Tally::oracle(&w);
    assert_eq!(t.recovered_gpu_ticks, 640);
    assert_eq!((t.cancels, t.false_cancels), (2, 0));
    assert_eq!(t.cancel_latency, vec![0, 0]);
    // Waste within the horizon: E 4 × 130 = 520, F 2 × 60 = 120, G's unused GPU 1 × 80 = 80.
    assert_eq!(t.wasted_gpu_ticks, 720);
}

fn busy_or_hung(j: &SimJob, t: u32, slot: usize) -> Option<CompactSample> {
    // Compute: 95 %, 40,000 MiB, ~300 W; hung: 0 %, 40,000 MiB, ~65 W. Power moves a little
    // every sample, as real power does (a bit-identical window would be a frozen collector).
    let wiggle = ((t as usize * 7 + slot * 3) % 11) as u32 * 10;
    let (util, power_w) = match j.phase_at(t) {
        PhaseKind::Hung => (0, 65.0 + wiggle as f64 / 100.0),
        _ => (95, 300.0 + wiggle as f64 / 100.0),
    };
    Some(CompactSample {
        mem_used_mib: 40_000,
        power_w,
        util_pct: util,
        procs: 1,
        ..CompactSample::default()
    })
}

fn policy_with_cancel_after(cancel_s: i64) -> Policy {
    let mut cfg = PolicyConfig::default();
    cfg.stages.push(StageConfig {
        after: DurationS(cancel_s),
        verdict: "cancel".into(),
    });
    Policy::new(&cfg).unwrap()
}

#[test]
fn the_engine_cancels_a_hung_job_when_worked_out_by_hand() {
    use PhaseKind::*;
    // One 8-GPU job on a whole node, [0, 600), computing until tick 60, then hung to its
    // time limit. Default policy (window 20m, warmup 15m, gap 3m, alert at 0, drain at 60m,
    // notice 30m) plus a cancel stage at 2h.
    //
    // * The window (now − 1200 s, now] holds ticks t−19..t. It first holds only hung samples
    //   at t = 79: the breach is confirmed, breach start = its first sample, tick 60, so the
    //   alert comes at 79 (latency 19 ticks = 1140 s).
    // * Drain at dwell 60m: t = 120. Observe mode confirms it at 121.
    // * Cancel at dwell 2h: t = 180 (drain confirmed at 121 ≤ 180 − 20; notice 180 − 79 ≥ 30).
    // * Recovered: 8 × (600 − 180) = 3360 GPU-ticks = 56 GPU-h; latency 120 ticks = 7200 s.
    // * The drain withholds nothing: the job holds the whole node.
    let jobs = vec![job(0, &[0, 1, 2, 3, 4, 5, 6, 7], 8, 0, 600, &[(0, 60, Compute), (60, 600, Hung)])];
    let w = world(jobs, 700, busy_or_hung);
    let mut judge = EngineJudge::new(policy_with_cancel_after(7200));
    let t = drive::run(&w, &mut judge);
    assert_eq!((t.true_alerts, t.false_alerts), (1, 0));
    assert_eq!(t.alert_latency, vec![19]);
    assert_eq!((t.drains, t.false_drains, t.drained_gpu_ticks), (1, 0, 0));
    assert_eq!((t.cancels, t.false_cancels), (1, 0));
    assert_eq!(t.cancel_latency, vec![120]);
    assert_eq!(t.recovered_gpu_ticks, 3360);
    // The hung signature named it.
    let hung = policy::SignatureId::from_name("hung").unwrap().0 as usize;
    assert_eq!(t.cancels_by_sig[hung], 1);
    // Job-GPU-ticks stop at the cancel: 8 GPUs × ticks 0..=180.
    assert_eq!(t.job_gpu_ticks, 8 * 181);
}

#[test]
fn a_checkpoint_stall_shorter_than_the_cancel_stage_is_never_cancelled() {
    use PhaseKind::*;
    // A 45-minute stall (memory held, 0 %) in a job that computes before and after. The breach
    // starts at 100 and ends when compute resumes at 145: dwell never reaches 2h, so at most a
    // drain (a false one) and no cancel.
    let jobs = vec![job(
        0,
        &[0, 1, 2, 3, 4, 5, 6, 7],
        8,
        0,
        400,
        &[(0, 100, Compute), (100, 145, Checkpoint), (145, 400, Compute)],
    )];
    let sampler = |j: &SimJob, t: u32, slot: usize| {
        let mut s = busy_or_hung(j, t, slot)?;
        if j.phase_at(t) == Checkpoint {
            s.util_pct = 0;
            s.power_w = 70.0 + (t % 9) as f64 / 10.0;
        }
        Some(s)
    };
    let w = world(jobs, 400, sampler);
    let t = drive::run(&w, &mut EngineJudge::new(policy_with_cancel_after(7200)));
    assert_eq!(t.cancels, 0);
    // Alert at 119 (first window of stall samples 100..119): a false alert, the job is productive.
    assert_eq!((t.true_alerts, t.false_alerts), (0, 1));
    assert_eq!(t.drains, 0, "dwell reached only 144 - 100 = 44 min < 60 min");
}

#[test]
fn a_partial_job_that_checkpoints_is_never_cancelled() {
    use PhaseKind::*;
    // 8 GPUs, 4 used. GPUs 4-7 are idle from the start (a `partial` breach, ceiling alert).
    // At tick 300 the used GPUs stall 45 minutes for a checkpoint: for that while every GPU
    // looks low and the allocation matches `hung` (ceiling cancel). The job is never wholly
    // wasted, so any cancel is false. With a cancel stage at 2h, a 45-minute stall must not be
    // enough: dwell for the cancel-ceiling signature is at most 45 minutes.
    let jobs = vec![job(
        0,
        &[0, 1, 2, 3, 4, 5, 6, 7],
        4,
        0,
        600,
        &[(0, 300, Compute), (300, 345, Checkpoint), (345, 600, Compute)],
    )];
    let sampler = |j: &SimJob, t: u32, slot: usize| {
        let mut s = busy_or_hung(j, t, slot)?;
        if slot >= j.used as usize {
            s.util_pct = 0;
            s.mem_used_mib = 0;
            s.procs = 0;
            s.power_w = 60.0 + (t % 13) as f64 / 10.0;
        } else if j.phase_at(t) == Checkpoint {
            s.util_pct = 0;
            s.power_w = 70.0 + (t % 9) as f64 / 10.0;
        }
        Some(s)
    };
    let w = world(jobs, 600, sampler);
    let t = drive::run(&w, &mut EngineJudge::new(policy_with_cancel_after(7200)));
    assert_eq!(t.false_cancels, 0, "a 45-minute checkpoint of a partial job was cancelled");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A job of 1–4 GPUs on its own GPUs of node 0, computing, with a checkpoint, and ending
    /// either productive or in a wasted phase held to its end.
    fn arb_job() -> impl Strategy<Value = (u32, u32, u32, u8, u16)> {
        // (start, length, turn point, terminal kind 0..=3, gpus)
        (0u32..50, 20u32..150, 5u32..140, 0u8..4, 1u16..=2)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever a judge does: every cancel is either correct or false; recovery never beats
        /// the oracle (which cancels at onset); alerts split into true and false; and the row
        /// obeys every relation between columns that `sim merge` checks, whatever signatures
        /// the findings name.
        #[test]
        fn scoring_is_consistent_for_any_verdicts(specs in prop::collection::vec(arb_job(), 1..4),
                                                  script in prop::collection::vec((0usize..4, 0u32..200, 0u8..4, 0usize..7), 0..12)) {
            use PhaseKind::*;
            let mut jobs = Vec::new();
            let mut next_gpu = 0u16;
            for (i, &(start, len, turn, term, gpus)) in specs.iter().enumerate() {
                let end = start + len;
                let turn = start + 1 + turn % (len - 1);
                let last = [Compute, Hung, Idle, Spin][term as usize];
                let alloc: Vec<u16> = (next_gpu..next_gpu + gpus).collect();
                next_gpu += gpus;
                jobs.push(job(i, &alloc, gpus, start, end, &[(start, turn, Checkpoint), (turn, end, last)]));
            }
            let w = world(jobs, 220, |_, _, _| None);
            let verdicts = [Verdict::Watching, Verdict::Alert, Verdict::Drain, Verdict::Cancel];
            // Every registered signature, and none.
            let sigs = ["spin", "hung", "idle", "starved", "partial", "unknown", ""];
            let table: Vec<(&'static str, u32, Verdict, &'static str)> = {
                let mut t: Vec<(usize, u32, Verdict, &'static str)> = script
                    .iter()
                    .map(|&(j, at, v, sig)| (j % specs.len(), at, verdicts[v as usize], sigs[sig]))
                    .collect();
                t.sort_by_key(|x| (x.0, x.1));
                t.into_iter()
                    .map(|(j, at, v, sig)| (&*Box::leak(format!("{}", 100 + j).into_boxed_str()), at, v, sig))
                    .collect()
            };
            let t = drive::run(&w, &mut SignedScript(table));
            let correct = t.cancel_latency.len() as u64;
            prop_assert_eq!(t.cancels, correct + t.false_cancels);
            prop_assert!(t.recovered_gpu_ticks <= t.oracle_gpu_ticks);
            prop_assert!(t.oracle_gpu_ticks <= t.wasted_gpu_ticks);
            prop_assert_eq!(t.alert_latency.len() as u64, t.true_alerts);
            prop_assert!(t.false_drains <= t.drains);
            prop_assert!(t.false_drains_single_node <= t.drains_single_node);
            prop_assert!(t.drains_single_node <= t.drains);
            prop_assert!(t.false_drains_single_node <= t.false_drains);
            let row = Row::new(&RowParams::default(), &w, 1.0, &t);
            prop_assert_eq!(row.check_values(), Ok(()));
        }
    }
}

/// Records how many samples of each job the judge saw per tick, and cancels on a script.
struct Recorder {
    script: Scripted,
    seen: Vec<(u32, Vec<usize>)>,
}

impl Judge for Recorder {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        let per_gpu: Vec<usize> = (0..8u16).map(|g| samples.iter().filter(|s| s.gpu == g).count()).collect();
        self.seen.push(((now_s / 60) as u32, per_gpu));
        self.script.judge(now_s, jobs, samples, out);
    }
}

#[test]
fn a_cancelled_job_leaves_and_its_samples_stop() {
    use PhaseKind::*;
    // Three jobs on GPUs {0,1}, {2,3}, {4,5}, all [0, 100). The middle one is cancelled at 40:
    // from tick 41 the judge sees no sample from GPUs 2-3, and still sees the others'.
    let jobs = vec![
        job(0, &[0, 1], 2, 0, 100, &[(0, 100, Compute)]),
        job(1, &[2, 3], 2, 0, 100, &[(0, 100, Compute)]),
        job(2, &[4, 5], 2, 0, 100, &[(0, 100, Compute)]),
    ];
    let w = world(jobs, 100, busy_or_hung);
    let mut r = Recorder {
        script: Scripted(vec![("101", 40, Verdict::Cancel)]),
        seen: Vec::new(),
    };
    let t = drive::run(&w, &mut r);
    assert_eq!((t.cancels, t.false_cancels), (1, 1));
    for (tick, per_gpu) in &r.seen {
        let middle = if *tick <= 40 { 1 } else { 0 };
        assert_eq!(per_gpu[..6], [1, 1, middle, middle, 1, 1], "tick {tick}");
    }
    // 3 jobs × 2 GPUs for ticks 0..=40, then 2 jobs × 2 GPUs for 41..100.
    assert_eq!(t.job_gpu_ticks, 6 * 41 + 4 * 59);
}

#[test]
fn every_row_of_the_committed_sweep_csv_passes_the_merge_value_checks() {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../reports/sweep.csv"));
    let rows = sim::sweep::read_csv(path).unwrap();
    assert!(!rows.is_empty());
    for (i, r) in rows.iter().enumerate() {
        if let Err(bad) = r.check_values() {
            panic!("reports/sweep.csv line {}: {bad:?}", i + 2);
        }
    }
}
