//! Issue 3's performance target: job-GPU-ticks evaluated per second per core by the sweep.
//! The slice: one work item of the default sweep — one gpu-reaper configuration (the default
//! policy plus a cancel stage at 2h) over one day of the default workload (seed 1) — run on one
//! thread. Throughput is the world's job-GPU-ticks. Target: ≥ 50 M job-GPU-ticks/s/core.
//!
//! `driver_only` runs the same world through a judge that does nothing, to show the driver's
//! own cost (sample expansion, job bookkeeping, scoring) apart from the policy engine's.
//!
//! `sweep_batch_default_1day` is the unit of work the sweep really runs: every configuration
//! of the built-in grid that shares the 20m window (32 of its 100) judged over one day of the
//! same world by one engine (`drive::run_policies`), on one thread. Throughput is the sum of
//! the job-GPU-ticks each configuration evaluates, as the sweep's timing line counts them.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use policy::{JobFacts, Policy, PolicyConfig, Sample, StageConfig, Verdict};
use sim::drive::{self, EngineJudge, Judge, Judgement};
use std::hint::black_box;

struct Nothing;

impl Judge for Nothing {
    fn judge(&mut self, _: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        black_box(samples.len());
        out.clear();
        out.extend(jobs.iter().map(|_| Judgement {
            verdict: Verdict::Healthy,
            signature: None,
            healthy: true,
        }));
    }
}

fn bench(c: &mut Criterion) {
    let world = sim::generate(&sim::Workload::builtin_default(), 1, 1.0);
    let mut cfg = PolicyConfig::default();
    cfg.stages.push(StageConfig {
        after: policy::DurationS(7200),
        verdict: "cancel".into(),
    });
    let policy = Policy::new(&cfg).expect("valid policy");
    // Cancelled jobs leave early, so count what a run really evaluates.
    let evaluated = drive::run(&world, &mut EngineJudge::new(policy.clone())).job_gpu_ticks;
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(evaluated));
    g.sample_size(10);
    g.bench_function("sweep_item_default_1day", |b| {
        b.iter(|| {
            let t = drive::run(&world, &mut EngineJudge::new(policy.clone()));
            black_box(t.recovered_gpu_ticks)
        })
    });
    g.bench_function("driver_only_default_1day", |b| {
        b.iter(|| black_box(drive::run(&world, &mut Nothing).job_gpu_ticks))
    });
    g.finish();

    let configs = sim::grid::builtin_default();
    let in_20m: Vec<Policy> = configs
        .iter()
        .map(|c| c.policy.clone())
        .filter(|p| p.config().window.0 == 1200)
        .collect();
    let batch: Vec<Policy> = in_20m.iter().filter(|p| p.shares_windows_with(&in_20m[0])).cloned().collect();
    let tallies = drive::run_policies(&world, batch.clone()).expect("the batch shares windows");
    let evaluated: u64 = tallies.iter().map(|t| t.job_gpu_ticks).sum();
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(evaluated));
    g.sample_size(10);
    g.bench_function(format!("sweep_batch_default_1day_{}_configs", batch.len()), |b| {
        b.iter(|| black_box(drive::run_policies(&world, batch.clone()).map(|t| t.len())))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
