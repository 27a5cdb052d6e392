//! The lane fast path on the simulator's workloads: the sweep's driver (`drive::run`) runs
//! one judge that steps two engines, lane path on and off, on every tick of the same seeded
//! world, and fails at the first tick whose findings differ (any policy), or whose counters,
//! tracked jobs or snapshots differ. Cancels follow the lane-on engine, so both engines see
//! the same jobs leave, as in the sweep.
//!
//! No hook in the sim is needed: `drive::Judge` is public, and this judge builds its engines
//! as `EngineJudge` (one policy) and `drive::run_policies` (several sharing windows) do, in
//! `Mode::Observe` and `Scope::Whole`.

use policy::{Engine, Finding, JobFacts, Mode, Observation, Policy, PolicyConfig, Sample, Scope};
use sim::drive::{self, Judge, Judgement};
use sim::{generate, grid, Workload};

struct Dual {
    on: Engine,
    off: Engine,
    a: Vec<Vec<Finding>>,
    b: Vec<Vec<Finding>>,
    label: String,
    ticks: u64,
    /// Findings compared, and of those, for jobs of exactly 8 GPUs (the lane path's case).
    compared: u64,
    compared_8: u64,
    /// Jobs on the lane path in the lane-on engine, summed over ticks.
    lane_job_ticks: u64,
    /// The first policy's window, for the drains' recovery rule (as the sweep's judge).
    window_s: i64,
}

impl Dual {
    fn new(policies: Vec<Policy>, label: &str) -> Dual {
        let n = policies.len();
        let build = |on: bool| {
            let mut e = Engine::with_policies(policies.clone(), Mode::Observe).expect("policies share windows");
            e.set_lane_path(on);
            e
        };
        Dual {
            on: build(true),
            off: build(false),
            a: vec![Vec::new(); n],
            b: vec![Vec::new(); n],
            label: label.to_string(),
            ticks: 0,
            compared: 0,
            compared_8: 0,
            lane_job_ticks: 0,
            window_s: policies[0].config().window.secs(),
        }
    }

    fn same_snapshots(&self, now_s: i64) {
        // The snapshot as the enforcer's state file holds it: every window's entries, clocks
        // and counts. (Not its `Debug` form, which also shows where in its ring buffer each
        // window happens to keep them.)
        let json = |e: &Engine| serde_json::to_string(&e.snapshot(now_s)).expect("snapshot serialises");
        let (x, y) = (json(&self.on), json(&self.off));
        if x != y {
            let at = x.bytes().zip(y.bytes()).position(|(p, q)| p != q).unwrap_or(x.len().min(y.len()));
            let from = at.saturating_sub(150);
            panic!(
                "{}: snapshots at {now_s} differ at byte {at}\n  on : …{}…\n  off: …{}…",
                self.label,
                &x[from..(at + 150).min(x.len())],
                &y[from..(at + 150).min(y.len())]
            );
        }
    }
}

impl Judge for Dual {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        let obs = Observation {
            jobs,
            samples,
            scope: Scope::Whole,
            drains: &[],
        };
        self.on.step_each(now_s, &obs, &mut self.a);
        self.off.step_each(now_s, &obs, &mut self.b);
        self.lane_job_ticks += self.on.lane_jobs() as u64;
        assert_eq!(self.off.lane_jobs(), 0, "{}: the lane-off engine holds lane jobs", self.label);
        for (p, (a, b)) in self.a.iter().zip(&self.b).enumerate() {
            assert_eq!(a.len(), b.len(), "{}: at {now_s}, policy {p}: finding counts differ", self.label);
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                // Debug forms too, so that a NaN figure equals itself.
                assert!(
                    x == y || format!("{x:?}") == format!("{y:?}"),
                    "{}: at {now_s}, policy {p}, job {} ({} GPUs): lane path on and off disagree\n  on : {x:?}\n  off: {y:?}",
                    self.label,
                    jobs[i].job_id,
                    jobs[i].alloc.len()
                );
                self.compared += 1;
                if jobs[i].alloc.len() == 8 {
                    self.compared_8 += 1;
                }
            }
        }
        assert_eq!(self.on.counters(), self.off.counters(), "{}: counters at {now_s}", self.label);
        assert_eq!(
            self.on.tracked_jobs(),
            self.off.tracked_jobs(),
            "{}: tracked jobs at {now_s}",
            self.label
        );
        self.ticks += 1;
        if self.ticks % 240 == 0 {
            self.same_snapshots(now_s);
        }
        out.clear();
        out.extend(self.a[0].iter().map(|f| Judgement {
            verdict: f.verdict,
            signature: f.signature,
            healthy: policy::Recovery::counts(f),
        }));
    }

    fn recovery_window_s(&self) -> Option<i64> {
        Some(self.window_s)
    }
}

fn check(workload: &Workload, seed: u64, days: f64, policies: Vec<Policy>) {
    let world = generate(workload, seed, days);
    let label = format!("{} seed {seed}, {} policies", workload.name, policies.len());
    let mut dual = Dual::new(policies.clone(), &label);
    let tally = drive::run(&world, &mut dual);
    dual.same_snapshots(world.horizon as i64 * 60);
    // The comparison means something only if 8-GPU jobs were judged, and if the run reached
    // the ladder (cancels make jobs leave mid-run).
    assert!(dual.compared_8 > 1000, "{label}: only {} findings of 8-GPU jobs", dual.compared_8);
    // The comparison proves nothing unless the lane path ran for most of those findings.
    let n_policies = dual.a.len() as u64;
    assert!(
        dual.lane_job_ticks * 2 * n_policies > dual.compared_8,
        "{label}: {} lane job-ticks for {} findings of 8-GPU jobs under {n_policies} policies",
        dual.lane_job_ticks,
        dual.compared_8
    );
    assert!(
        tally.true_alerts + tally.false_alerts > 0 && tally.drains > 0,
        "{label}: nothing reached the ladder: {tally:?}"
    );
    // With one policy the run is exactly the sweep's own (`EngineJudge`).
    if policies.len() == 1 {
        let alone = drive::run(&world, &mut drive::EngineJudge::new(policies[0].clone()));
        assert_eq!(alone, tally, "{label}: the dual judge's run differs from the sweep's");
    }
}

fn cancel_cfg() -> PolicyConfig {
    let mut c = PolicyConfig::default();
    c.stages.push(policy::StageConfig {
        after: policy::DurationS(90 * 60),
        verdict: "cancel".into(),
    });
    c
}

#[test]
fn lane_path_on_and_off_agree_on_the_default_workload() {
    let p = Policy::new(&cancel_cfg()).unwrap();
    check(&Workload::builtin_default(), 1, 1.0, vec![p]);
}

#[test]
fn lane_path_on_and_off_agree_on_the_trap_workload() {
    let p = Policy::new(&cancel_cfg()).unwrap();
    check(&Workload::builtin_traps(), 4, 1.0, vec![p]);
}

/// The sweep's own configurations that share windows, judged together (`step_each`), as
/// `drive::run_policies` judges them.
#[test]
fn lane_path_on_and_off_agree_with_the_grid_sharing_windows() {
    let configs = grid::builtin_default();
    let first = configs[0].policy.clone();
    let sharing: Vec<Policy> = configs
        .iter()
        .map(|c| c.policy.clone())
        .filter(|p| p.shares_windows_with(&first))
        .step_by(4)
        .collect();
    assert!(sharing.len() >= 2);
    check(&Workload::builtin_traps(), 5, 1.0, sharing);
}
