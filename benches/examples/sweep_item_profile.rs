//! Runs one work item of the default sweep (the `sim_sweep` bench's slice: the default policy
//! plus a cancel stage at 2h, over `[days]` of the default workload, seed 1) once, for
//! profilers that count instructions (`valgrind --tool=callgrind`).
//! Usage: `sweep_item_profile [days]`.

use policy::{Policy, PolicyConfig, StageConfig};
use sim::drive::{self, EngineJudge};

fn main() {
    let days: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let world = sim::generate(&sim::Workload::builtin_default(), 1, days);
    let mut cfg = PolicyConfig::default();
    cfg.stages.push(StageConfig {
        after: policy::DurationS(7200),
        verdict: "cancel".into(),
    });
    let policy = Policy::new(&cfg).expect("the default policy with a cancel stage is valid");
    let t = drive::run(&world, &mut EngineJudge::new(policy));
    println!("{} job-GPU-ticks, {} recovered GPU-ticks", t.job_gpu_ticks, t.recovered_gpu_ticks);
}
