//! Replaying a generated trace (written to CSV and read back) gives the same findings as the
//! in-memory simulation of the same seed: the same (time, job, verdict, signature, cap, cause)
//! changes.

use policy::{Cap, Cause, JobFacts, Policy, PolicyConfig, Sample, SignatureId, Verdict};
use sim::drive::{EngineJudge, Judge, Judgement};
use std::collections::BTreeMap;

type Change = (i64, String, Verdict, Option<SignatureId>, Option<Cap>, Cause);

/// The sweep's engine judge, recording every change of verdict, signature, cap or cause per
/// job (what replay's findings.csv writes a row for).
struct Recorder {
    inner: EngineJudge,
    last: BTreeMap<String, (Verdict, Option<SignatureId>, Option<Cap>, Cause)>,
    changes: Vec<Change>,
}

impl Judge for Recorder {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        self.inner.judge(now_s, jobs, samples, out);
        for (job, f) in jobs.iter().zip(self.inner.findings()) {
            let key = (f.verdict, f.signature, f.cap, f.cause);
            if self.last.get(&job.job_id) != Some(&key) {
                self.last.insert(job.job_id.clone(), key);
                self.changes
                    .push((now_s, job.job_id.clone(), f.verdict, f.signature, f.cap, f.cause));
            }
        }
    }
}

fn small_default() -> sim::workload::Workload {
    let mut w = sim::workload::Workload::builtin_default();
    w.cluster.nodes = 8;
    w
}

#[test]
fn replay_of_a_generated_trace_equals_the_simulation() {
    let w = small_default();
    let cfg = PolicyConfig::default();
    for seed in [1u64, 2] {
        let world = sim::generate::generate(&w, seed, 1.0);
        let mut rec = Recorder {
            inner: EngineJudge::new(Policy::new(&cfg).unwrap()),
            last: BTreeMap::new(),
            changes: Vec::new(),
        };
        sim::drive::run(&world, &mut rec);
        let mut expected = rec.changes;
        expected.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));

        let dir = tempfile::tempdir().unwrap();
        traces::write_trace(dir.path(), &sim::trace::to_trace(&world)).unwrap();
        let (trace, report) = traces::read_trace(dir.path(), false).unwrap();
        assert_eq!(report, traces::ReadReport::default());
        assert!(trace.has_truth());
        let res = traces::replay::replay(&trace, Policy::new(&cfg).unwrap(), 60);
        let mut got: Vec<Change> = res
            .rows
            .iter()
            .map(|r| {
                (
                    r.t_s,
                    trace.jobs[r.job as usize].facts.job_id.clone(),
                    r.finding.verdict,
                    r.finding.signature,
                    r.finding.cap,
                    r.finding.cause,
                )
            })
            .collect();
        got.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        assert!(expected.len() > world.jobs.len(), "seed {seed}: too few changes to compare");
        assert!(
            expected.iter().any(|c| c.2 >= Verdict::Alert),
            "seed {seed}: the workload should reach alert somewhere"
        );
        assert_eq!(got.len(), expected.len(), "seed {seed}");
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g, e, "seed {seed}");
        }
        assert!(res.safety.is_empty(), "seed {seed}: {:?}", res.safety.first());
    }
}

#[test]
fn replay_scores_a_generated_trace_as_the_sweep_does() {
    // A policy that reaches cancel, so every rule is exercised.
    let cfg = PolicyConfig {
        stages: [(0, "alert"), (60, "drain"), (120, "cancel")]
            .into_iter()
            .map(|(m, v)| policy::StageConfig {
                after: policy::DurationS(m * 60),
                verdict: v.into(),
            })
            .collect(),
        ..PolicyConfig::default()
    };
    let w = small_default();
    for seed in [1u64, 2] {
        let world = sim::generate::generate(&w, seed, 1.0);
        let tally = sim::drive::run(&world, &mut EngineJudge::new(Policy::new(&cfg).unwrap()));
        let trace = sim::trace::to_trace(&world);
        let res = traces::replay::replay(&trace, Policy::new(&cfg).unwrap(), 60);
        let scores: Vec<&traces::score::JobScore> = res.jobs.iter().map(|o| o.score.as_ref().unwrap()).collect();
        let sum = |f: &dyn Fn(&traces::score::JobScore) -> u64| scores.iter().map(|s| f(s)).sum::<u64>();
        assert_eq!(sum(&|s| s.true_alerts as u64), tally.true_alerts, "seed {seed}: true alerts");
        assert_eq!(sum(&|s| s.false_alerts as u64), tally.false_alerts, "seed {seed}: false alerts");
        assert_eq!(sum(&|s| s.false_drains as u64), tally.false_drains, "seed {seed}: false drains");
        assert_eq!(sum(&|s| s.cancel_correct.is_some() as u64), tally.cancels, "seed {seed}: cancels");
        assert_eq!(
            sum(&|s| (s.cancel_correct == Some(false)) as u64),
            tally.false_cancels,
            "seed {seed}: false cancels"
        );
        let recovered: f64 = scores.iter().map(|s| s.recovered_gpu_h).sum();
        // `gpu_h` rounds to 3 decimals.
        let sweep_h = sim::score::gpu_h(tally.recovered_gpu_ticks);
        assert!(
            (recovered - sweep_h).abs() < 1e-3,
            "seed {seed}: recovered {recovered} vs {sweep_h}"
        );
        assert!(tally.cancels > 0 || tally.true_alerts > 0, "seed {seed}: nothing to compare");
    }
}

/// Ground-truth waste in a replay does not depend on the replay interval: each sample counts
/// its GPU's sampling period (60 s in a generated trace), whatever `--interval` is. It also
/// stays within the simulation's own figure (ticks without samples carry no truth).
#[test]
fn replay_waste_does_not_depend_on_the_interval() {
    let world = sim::generate::generate(&small_default(), 1, 1.0);
    let trace = sim::trace::to_trace(&world);
    let wasted = |interval_s: i64| -> f64 {
        let res = traces::replay::replay(&trace, Policy::new(&PolicyConfig::default()).unwrap(), interval_s);
        res.jobs.iter().filter_map(|j| j.score.as_ref()).map(|s| s.wasted_gpu_h).sum()
    };
    let at_60 = wasted(60);
    assert!(at_60 > 0.0);
    for interval_s in [30, 120, 300] {
        let w = wasted(interval_s);
        assert!((w - at_60).abs() < 1e-6, "interval {interval_s}s: {w} GPU-h against {at_60} at 60s");
    }
    let sim_wasted_h = world.wasted_gpu_ticks() as f64 * 60.0 / 3600.0;
    assert!(
        at_60 <= sim_wasted_h + 1e-6,
        "replay {at_60} GPU-h above the simulation's {sim_wasted_h}"
    );
}
