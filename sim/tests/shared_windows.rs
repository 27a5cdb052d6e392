//! The sweep judges each world's configurations that share windows through one engine
//! (`drive::run_policies`). These tests hold it to what running each configuration alone
//! gives, tally by tally, on both built-in workloads.

use sim::drive::{self, EngineJudge};
use sim::{generate, grid, Workload};

/// The built-in grid's configurations that share windows with its first one (10m window):
/// they differ in threshold, cancel stage, spin ceiling and exemptions.
fn sharing_policies() -> Vec<policy::Policy> {
    let configs = grid::builtin_default();
    let first = configs[0].policy.clone();
    let sharing: Vec<policy::Policy> = configs
        .iter()
        .map(|c| c.policy.clone())
        .filter(|p| p.shares_windows_with(&first))
        .collect();
    assert!(
        sharing.len() >= 8,
        "only {} configurations share the first one's windows",
        sharing.len()
    );
    // Every fourth keeps the test short in debug builds and still mixes every parameter.
    sharing.into_iter().step_by(4).collect()
}

fn check(workload: &Workload, seed: u64, days: f64) {
    let world = generate(workload, seed, days);
    let policies = sharing_policies();
    let shared = drive::run_policies(&world, policies.clone()).expect("the policies share windows");
    assert_eq!(shared.len(), policies.len());
    let mut cancels = 0;
    for (i, (p, t)) in policies.into_iter().zip(&shared).enumerate() {
        let alone = drive::run(&world, &mut EngineJudge::new(p));
        assert_eq!(&alone, t, "{}: policy {i} differs when judged with the others", workload.name);
        cancels += alone.cancels;
    }
    // The comparison means something only if policies cancel (so jobs leave some of them).
    assert!(cancels > 0, "{}: no policy cancelled anything", workload.name);
}

#[test]
fn shared_windows_match_single_runs_on_the_default_workload() {
    check(&Workload::builtin_default(), 3, 1.0);
}

#[test]
fn shared_windows_match_single_runs_on_the_trap_workload() {
    check(&Workload::builtin_traps(), 4, 1.0);
}

#[test]
fn policies_that_shape_windows_differently_are_refused() {
    let configs = grid::builtin_default();
    let a = configs[0].policy.clone();
    let b = configs
        .iter()
        .map(|c| c.policy.clone())
        .find(|p| !p.shares_windows_with(&a))
        .expect("the grid has several windows");
    let world = generate(&Workload::builtin_default(), 1, 0.05);
    assert!(drive::run_policies(&world, vec![a, b]).is_err());
    assert!(drive::run_policies(&world, Vec::new()).is_err());
}
