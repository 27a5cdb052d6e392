//! Replay on the generated fixtures in `traces/testdata/` (written by `sim generate`, truth
//! included): guards and scoring rules that must hold whatever the policy's tuning.

use policy::{DurationS, Policy, PolicyConfig, StageConfig, Verdict};
use std::path::Path;
use traces::replay::replay;
use traces::{read_trace, Truth};

fn fixture(name: &str) -> traces::Trace {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name);
    let (t, r) = read_trace(&dir, false).unwrap();
    assert_eq!(r, traces::ReadReport::default(), "{name}: generated traces are clean");
    t
}

/// An aggressive policy: alert at once, drain after 20 min, cancel after 40 min in breach.
fn aggressive() -> Policy {
    let cfg = PolicyConfig {
        stages: [(0, "alert"), (20, "drain"), (40, "cancel")]
            .into_iter()
            .map(|(m, v)| StageConfig {
                after: DurationS(m * 60),
                verdict: v.into(),
            })
            .collect(),
        ..PolicyConfig::default()
    };
    Policy::new(&cfg).unwrap()
}

#[test]
fn default_fixture_has_waste_and_the_default_policy_never_cancels() {
    let t = fixture("default-seed3");
    assert!(t.has_truth());
    assert!(t.truth.contains(&Some(Truth::Wasted)));
    let r = replay(&t, Policy::new(&PolicyConfig::default()).unwrap(), 60);
    assert!(r.safety.is_empty());
    assert!(r.jobs.iter().all(|o| o.first_cancel_s.is_none()), "default stages stop at drain");
    let wasted: f64 = r.jobs.iter().map(|o| o.score.as_ref().unwrap().wasted_gpu_h).sum();
    let oracle: f64 = r.jobs.iter().map(|o| o.score.as_ref().unwrap().oracle_recovered_gpu_h).sum();
    assert!(
        wasted > 0.0 && oracle > 0.0 && oracle <= wasted + 1e-9,
        "wasted {wasted}, oracle {oracle}"
    );
    // Every alert is scored exactly once, true or false.
    let alerts: u32 = r.jobs.iter().map(|o| o.alerts).sum();
    let scored: u32 = r
        .jobs
        .iter()
        .map(|o| o.score.as_ref().map_or(0, |s| s.true_alerts + s.false_alerts))
        .sum();
    assert_eq!(alerts, scored);
}

#[test]
fn in_the_trap_fixture_every_cancel_is_false_and_nothing_is_recoverable() {
    let t = fixture("traps-seed3");
    let r = replay(&t, aggressive(), 60);
    // Before policy bb6626b this fixture gave a drain exactly one window after a busy sample:
    // job 100001's breach start carried over from `partial` into `hung`. Now dwell counts only
    // while the signature's ceiling allows the stage, and nothing may come near a busy sample.
    assert!(r.safety.is_empty(), "{:?}", r.safety);
    // Under the default policy the long checkpoint stall is drained, and scored a false drain.
    let d = replay(&t, Policy::new(&PolicyConfig::default()).unwrap(), 60);
    let j = t.jobs.iter().position(|j| j.facts.job_id == "100001").unwrap();
    assert_eq!(d.jobs[j].highest, Some(Verdict::Drain));
    assert_eq!(d.jobs[j].score.as_ref().unwrap().false_drains, 1);
    assert!(d.safety.is_empty());
    let mut cancels = 0;
    for o in &r.jobs {
        let s = o.score.as_ref().unwrap();
        assert_eq!(s.oracle_recovered_gpu_h, 0.0, "no trap job is wholly wasted");
        assert_eq!(s.recovered_gpu_h, 0.0);
        if o.first_cancel_s.is_some() {
            cancels += 1;
            assert_eq!(s.cancel_correct, Some(false));
        }
    }
    // The long checkpoint stall (job 100001, ~70 min at 0 %) is cancelled by the aggressive
    // policy, and scored as a false cancel: the trap does what it is for.
    assert!(r.jobs[j].highest.unwrap() >= Verdict::Drain);
    assert!(cancels >= 1);
}

#[test]
fn a_stricter_threshold_never_adds_cancels_on_the_fixtures() {
    for name in ["default-seed3", "traps-seed3"] {
        let t = fixture(name);
        let mut last = usize::MAX;
        for th in [5.0, 15.0, 30.0, 50.0].iter().rev() {
            let mut cfg = PolicyConfig {
                util_threshold_pct: *th,
                ..PolicyConfig::default()
            };
            cfg.stages.push(StageConfig {
                after: DurationS(60 * 60),
                verdict: "cancel".into(),
            });
            let r = replay(&t, Policy::new(&cfg).unwrap(), 60);
            let n = r.jobs.iter().filter(|o| o.first_cancel_s.is_some()).count();
            // Thresholds go down (stricter), so cancels must not go up.
            assert!(n <= last, "{name}: threshold {th} gave {n} cancels after {last}");
            last = n;
        }
    }
}

mod row_order {
    use super::*;
    use proptest::prelude::*;

    /// The fixture's samples.csv rows, header first.
    fn rows() -> (String, Vec<String>) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/default-seed3");
        let text = std::fs::read_to_string(dir.join("samples.csv")).unwrap();
        let mut lines = text.lines().map(str::to_string);
        let header = lines.next().unwrap();
        (header, lines.collect())
    }

    fn replay_rows(header: &str, rows: &[String]) -> (Vec<(i64, u32, Verdict)>, traces::ReadReport) {
        let d = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/default-seed3/jobs.csv");
        std::fs::copy(src, d.path().join("jobs.csv")).unwrap();
        std::fs::write(d.path().join("samples.csv"), format!("{header}\n{}\n", rows.join("\n"))).unwrap();
        let (t, rep) = read_trace(d.path(), false).unwrap();
        let r = replay(&t, Policy::new(&PolicyConfig::default()).unwrap(), 60);
        (r.rows.iter().map(|x| (x.t_s, x.job, x.finding.verdict)).collect(), rep)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

        /// Findings do not depend on the order of samples.csv rows, and exact duplicate rows
        /// change nothing.
        #[test]
        fn findings_ignore_row_order_and_exact_duplicates(seed in any::<u64>(), dup_every in 2usize..50) {
            let (header, rows) = rows();
            let (base, _) = replay_rows(&header, &rows);
            let mut shuffled = rows.clone();
            // A deterministic shuffle from the seed (Fisher–Yates with an LCG).
            let mut x = seed | 1;
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            let dups: Vec<String> = shuffled.iter().step_by(dup_every).cloned().collect();
            let n_dups = dups.len() as u64;
            shuffled.extend(dups);
            let (got, rep) = replay_rows(&header, &shuffled);
            prop_assert_eq!(rep.exact_duplicates, n_dups);
            prop_assert_eq!(got, base);
        }
    }
}
