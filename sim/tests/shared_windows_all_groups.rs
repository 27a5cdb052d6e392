//! `drive::run_policies` against `drive::run` for every group of the built-in grid's
//! configurations that share windows (not only the first window's group, and not only every
//! fourth configuration), on other seeds than `shared_windows.rs`.

use sim::drive::{self, EngineJudge};
use sim::{generate, grid, Workload};

#[test]
fn every_sharing_group_matches_single_runs() {
    let configs = grid::builtin_default();
    let mut groups: Vec<Vec<policy::Policy>> = Vec::new();
    for c in &configs {
        match groups.iter_mut().find(|g| g[0].shares_windows_with(&c.policy)) {
            Some(g) => g.push(c.policy.clone()),
            None => groups.push(vec![c.policy.clone()]),
        }
    }
    assert!(groups.len() >= 2, "the grid has several windows");
    for (workload, seed) in [(Workload::builtin_traps(), 17u64), (Workload::builtin_default(), 23)] {
        let world = generate(&workload, seed, 0.4);
        for (gi, g) in groups.iter().enumerate() {
            // Every third member keeps debug builds quick while mixing the parameters.
            let members: Vec<policy::Policy> = g.iter().step_by(3).cloned().collect();
            let shared = drive::run_policies(&world, members.clone()).expect("members share windows");
            for (i, (p, t)) in members.into_iter().zip(&shared).enumerate() {
                let alone = drive::run(&world, &mut EngineJudge::new(p));
                assert_eq!(&alone, t, "{} seed {seed}: group {gi} member {i}", workload.name);
            }
        }
    }
}
