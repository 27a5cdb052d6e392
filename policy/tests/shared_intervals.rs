//! Policies that differ only in `interval` share one engine's windows (review 29 found them
//! refused: `same_windows` compared the rings' capacity hint, which the interval sets and
//! which changes no result). Each policy's findings from the shared engine equal those of an
//! engine of that policy alone, on the lane path and the general path, with samples coming
//! faster than the longer interval (so the rings of the longer one would fill).

mod trio;
use policy::{Engine, Finding, Mode, Observation, Policy, Scope};
use trio::*;

#[test]
fn policies_differing_only_in_interval_share_an_engine() {
    let a = cfg_with(1200, 60, 180);
    let b = policy::PolicyConfig {
        interval: policy::DurationS(20),
        stages: vec![stage(0, "alert"), stage(120, "drain"), stage(600, "cancel")],
        ..a.clone()
    };
    let policies = vec![Policy::new(&a).expect("valid"), Policy::new(&b).expect("valid")];
    assert!(policies[0].shares_windows_with(&policies[1]));
    let mut shared = Engine::with_policies(policies.clone(), Mode::Observe).expect("only the interval differs");
    let mut singles: Vec<Engine> = policies.iter().map(|p| Engine::new(p.clone(), Mode::Observe)).collect();
    let mut four = eight("C", 3, 0);
    four.alloc.truncate(4);
    let jobs = vec![eight("A", 1, 0), eight("B", 2, 0), four];
    let mut outs: Vec<Vec<Finding>> = vec![Vec::new(); 2];
    let mut single_out = Vec::new();
    let mut lane_cycles = 0;
    let mut breaches = 0;
    let mut now = 1_700_000_000;
    for c in 0..400 {
        // Every 20 s: three samples per minute, 60 per 20-minute window.
        now += 20;
        let look = |j: usize| match (j, c / 100) {
            (0, _) => Look::Hung,
            (1, 0 | 2) => Look::Busy,
            (1, _) => Look::Idle,
            _ => Look::Starved,
        };
        let s: Vec<_> = jobs
            .iter()
            .enumerate()
            .flat_map(|(j, jf)| samples_of(std::slice::from_ref(jf), now, look(j), now))
            .collect();
        let obs = Observation {
            jobs: &jobs,
            samples: &s,
            scope: Scope::Whole,
            drains: &[],
        };
        shared.step_each(now, &obs, &mut outs);
        for (p, e) in singles.iter_mut().enumerate() {
            e.step(now, &obs, &mut single_out);
            assert_eq!(outs[p], single_out, "policy {p}, cycle {c}");
        }
        lane_cycles += usize::from(shared.lane_jobs() == 2);
        breaches += outs[1].iter().filter(|f| f.verdict >= policy::Verdict::Drain).count();
    }
    // The shared engine's rings are sized for the 20 s interval: both 8-GPU jobs stay on the
    // lane path, and the short policy escalates.
    assert!(lane_cycles > 350, "the lane path was used in only {lane_cycles} cycles");
    assert!(breaches > 0, "policy 1 never drained: the test does not reach escalation");
}
