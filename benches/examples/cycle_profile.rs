//! Runs engine cycles over a synthetic cluster, for profilers that count instructions
//! (`valgrind --tool=callgrind`), which stay repeatable on a busy machine.
//! Usage: `cycle_profile [jobs] [cycles] [gpus_per_job]`.
//!
//! Prints the second half's cost per GPU-sample as wall time and as this thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`): on a machine shared with other work the CPU time leaves out
//! the time the thread waited for a core (not the caches the others disturbed), so it is the
//! better of the two for A/B comparisons there. The bench is the figure.

use policy::{Engine, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, Sample, Scope};

fn main() {
    let mut args = std::env::args().skip(1);
    let jobs_n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let cycles: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let per_job: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let jobs: Vec<JobFacts> = (0..jobs_n)
        .map(|j| JobFacts {
            job_id: format!("{}", 1_000_000 + j),
            // The facts as the bench has them: each its own heap block, as a driver's are.
            user: format!("user{}", j % 97),
            account: "acct".into(),
            partition: "gpu".into(),
            qos: "normal".into(),
            name: "train".into(),
            start_s: 0,
            alloc: (0..per_job as u16)
                .map(|g| GpuRef {
                    node: NodeId(j as u32),
                    gpu: g,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let mut samples: Vec<Sample> = (0..jobs_n * per_job)
        .map(|i| Sample {
            node: NodeId((i / per_job) as u32),
            gpu: (i % per_job) as u16,
            util_pct: (if i % 80 < 8 { 0.0 } else { 95.0 }).into(),
            mem_used_mib: (if i % 80 < 8 { 0.0 } else { 60_000.0 }).into(),
            mem_total_mib: 81_920.0.into(),
            power_w: 300.0.into(),
            power_limit_w: 400.0.into(),
            procs: Some(1),
            ..Default::default()
        })
        .collect();
    let mut engine = Engine::new(Policy::default(), Mode::Observe);
    engine.set_lane_path(std::env::var_os("LANES_OFF").is_none());
    let mut out = Vec::new();
    let mut verdicts = 0usize;
    let mut timed = std::time::Duration::ZERO;
    let mut cpu_ns = 0i128;
    for c in 1..=cycles {
        let now = c * 60;
        for (i, s) in samples.iter_mut().enumerate() {
            s.t_s = now;
            s.power_w = (300.0 + ((c as usize + i) & 7) as f64 * 0.1).into();
        }
        let t0 = std::time::Instant::now();
        let c0 = thread_cpu_ns();
        engine.step(
            now,
            &Observation {
                jobs: &jobs,
                samples: &samples,
                scope: Scope::Whole,
                drains: &[],
            },
            &mut out,
        );
        if c > cycles / 2 {
            timed += t0.elapsed();
            cpu_ns += thread_cpu_ns() - c0;
        }
        verdicts += out.iter().filter(|f| f.verdict.is_actionable()).count();
    }
    println!(
        "{} cycles × {} GPU-samples, {verdicts} actionable findings, {} of {} jobs on the lane path",
        cycles,
        jobs_n * per_job,
        engine.lane_jobs(),
        engine.tracked_jobs()
    );
    let measured = (cycles - cycles / 2) as f64 * (jobs_n * per_job) as f64;
    println!(
        "second half: {:.1} ns per GPU-sample (wall time, for a quick look; the bench is the figure)",
        timed.as_nanos() as f64 / measured
    );
    println!("second half: {:.1} ns per GPU-sample (thread CPU time)", cpu_ns as f64 / measured);
}

/// This thread's CPU time, nanoseconds.
fn thread_cpu_ns() -> i128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}
