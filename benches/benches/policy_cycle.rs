//! Issue 2's performance target: one engine cycle of 10,000 jobs × 8 GPUs, one new sample per
//! GPU, with a 20-sample window (20m window, 60 s interval). The figure is cycle time ÷
//! (jobs × GPUs): the cost per new GPU-sample, that cycle's evaluation included. Only
//! `Engine::step` is timed; stamping the next cycle's samples is the caller's work.
//! Target: ≤ 20 ns on one core.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use policy::{Engine, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, Reading, Sample, Scope};
use std::hint::black_box;
use std::time::{Duration, Instant};

const JOBS: usize = 10_000;
const GPUS: usize = 8;

fn setup(n_jobs: usize) -> (Engine, Vec<JobFacts>, Vec<Sample>) {
    let jobs: Vec<JobFacts> = (0..n_jobs)
        .map(|j| JobFacts {
            job_id: format!("{}", 1_000_000 + j),
            user: format!("user{}", j % 97),
            account: "acct".into(),
            partition: "gpu".into(),
            qos: "normal".into(),
            name: "train".into(),
            comment: String::new(),
            start_s: 0,
            alloc: (0..GPUS)
                .map(|g| GpuRef {
                    node: NodeId(j as u32),
                    gpu: g as u16,
                })
                .collect(),
        })
        .collect();
    let mut samples = Vec::with_capacity(n_jobs * GPUS);
    for j in 0..n_jobs {
        for g in 0..GPUS {
            // A mix: most jobs busy, every 10th idle, every 17th hung.
            let (util, mem, power) = if j % 10 == 0 {
                (0.0, 0.0, 60.0)
            } else if j % 17 == 0 {
                (0.0, 30_000.0, 70.0)
            } else {
                (95.0, 60_000.0, 350.0)
            };
            samples.push(Sample {
                t_s: 0,
                node: NodeId(j as u32),
                gpu: g as u16,
                util_pct: util.into(),
                mem_used_mib: mem.into(),
                mem_total_mib: 81_920.0.into(),
                power_w: power.into(),
                power_limit_w: 400.0.into(),
                procs: Some(if mem > 0.0 { 1 } else { 0 }),
                sm_active: Reading::MISSING,
            });
        }
    }
    let engine = Engine::new(Policy::default(), Mode::Observe);
    (engine, jobs, samples)
}

fn bench(c: &mut Criterion) {
    cycle(c, JOBS, "cycle_10k_jobs_x_8_gpus");
    // The simulator's default cluster (64 nodes × 8 GPUs): the working set fits in cache.
    cycle(c, 64, "cycle_64_jobs_x_8_gpus");
}

fn cycle(c: &mut Criterion, n_jobs: usize, name: &str) {
    let (mut engine, jobs, mut samples) = setup(n_jobs);
    let base_power_w: Vec<f64> = samples.iter().map(|s| s.power_w.get().unwrap_or(0.0)).collect();
    let mut out = Vec::with_capacity(JOBS);
    let mut now = 0i64;
    // The caller's part: stamp this cycle's samples. Not timed: the figure is the engine's.
    let mut next_samples = |samples: &mut Vec<Sample>| {
        now += 60;
        let k = (now / 60) as usize;
        for (i, s) in samples.iter_mut().enumerate() {
            s.t_s = now;
            // Power always fluctuates a little on real GPUs.
            s.power_w = (base_power_w[i] + ((k + i) & 7) as f64 * 0.1).into();
        }
        now
    };
    let step = |engine: &mut Engine, now: i64, samples: &[Sample], out: &mut Vec<_>| {
        let obs = Observation {
            jobs: &jobs,
            samples,
            scope: Scope::Whole,
            drains: &[],
        };
        engine.step(now, &obs, out);
    };
    // Fill the windows (and pass warmup) before measuring.
    for _ in 0..40 {
        let now = next_samples(&mut samples);
        step(&mut engine, now, &samples, &mut out);
    }
    // Every job here has 8 GPUs whose samples arrive together: all take the lane path.
    assert_eq!(engine.lane_jobs(), n_jobs, "the bench's jobs should all be on the lane path");
    let mut g = c.benchmark_group("policy");
    g.throughput(Throughput::Elements((n_jobs * GPUS) as u64));
    g.sample_size(30);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let now = next_samples(&mut samples);
                let t0 = Instant::now();
                step(&mut engine, now, &samples, &mut out);
                timed += t0.elapsed();
                black_box(out.len());
            }
            timed
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
