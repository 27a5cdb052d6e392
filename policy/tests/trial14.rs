//! Trial 14 (a fresh operator's trial, 2026-11-30): the lane path against the general path
//! under configs the lane harness does not sweep (windows longer than a 32-row ring,
//! sub-minute and odd intervals, a constant collector lag, stamps off the cycle grid), and
//! which configs keep 8-GPU jobs on the lane path. The trial found that jobs of every window
//! longer than 31 intervals (the recommended c037–c041 use 40m) never took it: rings are now
//! sized per engine (`lanes::lane_cap`).

mod harness;
use harness::*;
use policy::{DurationS, Engine, Mode, Observation, Policy, PolicyConfig, Scope, StageConfig};

fn lcg(s: &mut u64) -> u64 {
    *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *s >> 33
}

fn states() -> [Gpu; 7] {
    [
        Gpu::Busy,
        Gpu::Idle,
        Gpu::Hung,
        Gpu::Spin,
        Gpu::Starved,
        Gpu::Missing,
        Gpu::Util(20),
    ]
}

fn run(cfg: &PolicyConfig, seed: u64, lag_s: i64, jitter: bool, cycles: usize) {
    let jobs = vec![job("8a", 0, &[(0, 8)]), job("8b", 0, &[(1, 8)]), job("4", 0, &[(2, 4)])];
    let p = Policy::new(cfg).expect("valid");
    let mut on = Engine::new(p.clone(), Mode::Observe);
    let mut off = Engine::new(p, Mode::Observe);
    off.set_lane_path(false);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut s = seed;
    // Each job holds one behaviour for a stretch; some GPUs deviate now and then.
    let mut cur = [Gpu::Idle; 3];
    let iv = cfg.interval.secs();
    let mut lane_seen = false;
    for c in 1..=cycles {
        let now = c as i64 * iv;
        for st in cur.iter_mut() {
            if lcg(&mut s) % 40 == 0 {
                *st = states()[(lcg(&mut s) % 7) as usize];
            }
        }
        let mut samples = Vec::new();
        for (ji, j) in jobs.iter().enumerate() {
            for &r in &j.alloc {
                let g = if lcg(&mut s) % 200 == 0 {
                    states()[(lcg(&mut s) % 7) as usize]
                } else {
                    cur[ji]
                };
                let t = now - lag_s - if jitter { (lcg(&mut s) % 5) as i64 } else { 0 };
                if let Some(x) = sample(g, t, r) {
                    samples.push(x);
                }
            }
        }
        let obs = Observation {
            jobs: &jobs,
            samples: &samples,
            scope: Scope::Whole,
            drains: &[],
        };
        on.step(now, &obs, &mut a);
        off.step(now, &obs, &mut b);
        lane_seen |= on.lane_jobs() > 0;
        assert_eq!(
            a,
            b,
            "cfg window {} interval {} seed {seed} lag {lag_s} jitter {jitter} cycle {c}",
            cfg.window.secs(),
            iv
        );
        assert_eq!(on.counters(), off.counters(), "counters at cycle {c}");
    }
    // The comparison proves nothing about the lane path unless it ran (with jitter, a job's
    // GPUs are never in step, and it must not).
    assert_eq!(
        lane_seen,
        !jitter,
        "window {} interval {iv} jitter {jitter}: lane path taken",
        cfg.window.secs()
    );
}

fn cfg_of(window_s: i64, interval_s: i64, gap_s: i64) -> PolicyConfig {
    let mut c = PolicyConfig {
        window: DurationS(window_s),
        interval: DurationS(interval_s),
        max_sample_gap: DurationS(gap_s),
        clock_skew: DurationS(interval_s.min(window_s)),
        ..PolicyConfig::default()
    };
    c.stages.push(StageConfig {
        after: DurationS(2 * 3600),
        verdict: "cancel".into(),
    });
    c
}

#[test]
fn lane_path_matches_general_path_across_ring_sizes_and_intervals() {
    let combos = [
        (20 * 60, 60, 180),
        (31 * 60, 60, 180),
        (32 * 60, 60, 180),
        (33 * 60, 60, 180),
        (40 * 60, 60, 180),
        (20 * 60, 30, 90),
        (20 * 60, 37, 120),
        (60 * 60, 90, 270),
        (10 * 60, 20, 60),
    ];
    for (w, iv, gap) in combos {
        let cfg = cfg_of(w, iv, gap);
        for seed in 1..=6u64 {
            for (lag, jit) in [(0, false), (45, false), (0, true), (iv - 1, false)] {
                run(&cfg, seed, lag, jit, 600);
            }
        }
    }
}

/// Which configs keep an 8-GPU job on the lane path once its window is full.
#[test]
fn lane_path_occupancy_by_window() {
    for (w, iv) in [
        (20 * 60, 60),
        (30 * 60, 60),
        (31 * 60, 60),
        (32 * 60, 60),
        (40 * 60, 60),
        (20 * 60, 30),
        (120 * 60, 60),
    ] {
        let cfg = cfg_of(w, iv, 3 * iv);
        let jobs = vec![job("8a", 0, &[(0, 8)])];
        let mut e = Engine::new(Policy::new(&cfg).unwrap(), Mode::Observe);
        let mut out = Vec::new();
        let mut on = 0;
        let n = 200;
        for c in 1..=n {
            let now = c * iv;
            let samples: Vec<_> = jobs[0].alloc.iter().filter_map(|&r| sample(Gpu::Busy, now, r)).collect();
            step_whole(&mut e, &jobs, now, &samples, &mut out);
            if c > n / 2 {
                on += e.lane_jobs();
            }
        }
        // Rings are sized from window ÷ interval (a power of two above it, at most 128 rows),
        // so every one of these windows takes the lane path once its samples arrive.
        assert_eq!(
            on,
            n as usize / 2,
            "window {w}s interval {iv}s: lane path in {on} of {} late cycles",
            n / 2
        );
    }
}

/// Frozen collectors (every reading repeated bit for bit from some instant on, on all or
/// some of a job's GPUs, for a while or for good), lane path on against off.
#[test]
fn lane_path_matches_general_path_on_frozen_collectors() {
    for (w, iv) in [(20 * 60, 60), (31 * 60, 60), (10 * 60, 60), (15 * 60, 30)] {
        let cfg = cfg_of(w, iv, 3 * iv);
        let (mut lane_cycles, mut frozen_findings, mut actionable) = (0, 0, 0);
        for seed in 1..=12u64 {
            let jobs = vec![job("8a", 0, &[(0, 8)]), job("8b", 0, &[(1, 8)])];
            let p = Policy::new(&cfg).unwrap();
            let mut on = Engine::new(p.clone(), Mode::Observe);
            let mut off = Engine::new(p, Mode::Observe);
            off.set_lane_path(false);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut s = seed;
            let mut st = [Gpu::Idle, Gpu::Hung];
            // Per GPU: Some(t) = readings frozen at those of time t.
            let mut frozen: Vec<Option<i64>> = vec![None; 16];
            for c in 1..=400i64 {
                let now = c * iv;
                if lcg(&mut s) % 30 == 0 {
                    st[(lcg(&mut s) % 2) as usize] = [Gpu::Idle, Gpu::Hung, Gpu::Busy, Gpu::Spin][(lcg(&mut s) % 4) as usize];
                }
                match lcg(&mut s) % 25 {
                    0 => frozen.iter_mut().for_each(|f| *f = Some(now)),
                    1 => {
                        let k = (lcg(&mut s) % 16) as usize;
                        frozen[k] = Some(now);
                    }
                    2 => frozen.iter_mut().for_each(|f| *f = None),
                    3 => {
                        let k = (lcg(&mut s) % 8) as usize * 2 % 16;
                        frozen[k] = None;
                    }
                    _ => {}
                }
                let mut samples = Vec::new();
                for (ji, j) in jobs.iter().enumerate() {
                    for (gi, &r) in j.alloc.iter().enumerate() {
                        let k = ji * 8 + gi;
                        let t_read = frozen[k].unwrap_or(now);
                        if let Some(mut x) = sample(st[ji], t_read, r) {
                            x.t_s = now;
                            samples.push(x);
                        }
                    }
                }
                let obs = Observation {
                    jobs: &jobs,
                    samples: &samples,
                    scope: Scope::Whole,
                    drains: &[],
                };
                on.step(now, &obs, &mut a);
                off.step(now, &obs, &mut b);
                assert_eq!(a, b, "window {w} interval {iv} seed {seed} cycle {c}");
                lane_cycles += usize::from(on.lane_jobs() > 0);
                frozen_findings += a.iter().filter(|f| f.evidence.frozen_gpus > 0).count();
                actionable += a.iter().filter(|f| f.verdict.is_actionable()).count();
            }
        }
        eprintln!("trial14: frozen, window {w} interval {iv}: {lane_cycles} cycles with a lane job, {frozen_findings} findings with frozen GPUs, {actionable} actionable");
    }
}
