//! Review 29: an adversarial look at the lane path's latest fixes (dd1db20 rings sized per
//! engine, d6977bf `within_guard_3`, b066741 the route memo, the `LanePool` commit). Every
//! comparison holds an engine with `set_lane_path(true)` to one with `set_lane_path(false)` and
//! a third switched at random (review 28's `Trio` harness, in `trio/mod.rs`): findings, counters,
//! tracked jobs, level dwells and snapshot JSON after every cycle.
#![allow(dead_code)]

use policy::{Engine, Finding, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Sample, Scope};

mod trio;
use trio::*;

// ---------------------------------------------------------------------------------------------
// Review 29's drivers.
// ---------------------------------------------------------------------------------------------

fn obs<'a>(jobs: &'a [JobFacts], samples: &'a [Sample]) -> Observation<'a> {
    Observation {
        jobs,
        samples,
        scope: Scope::Whole,
        drains: &[],
    }
}

/// Samples of `jobs` at `t`, every GPU reading `look`.
fn at(jobs: &[JobFacts], t: i64, look: Look) -> Vec<Sample> {
    samples_of(jobs, t, look, t)
}

/// A sample at guard 3's limits exactly: 100 % util, 1,048,576 MiB of 1,048,576 used, 2000 W
/// of a 2000 W limit (`util_milli` 100,000, `mem_mib` 1,048,576, `power_dw` 20,000).
fn at_the_limits(jobs: &[JobFacts], t: i64) -> Vec<Sample> {
    jobs.iter()
        .flat_map(|j| {
            j.alloc.iter().map(move |&g| Sample {
                t_s: t,
                node: g.node,
                gpu: g.gpu,
                util_pct: 100.0.into(),
                sm_active: 1.0.into(),
                mem_used_mib: 1_048_576.0.into(),
                mem_total_mib: 1_048_576.0.into(),
                power_w: 2000.0.into(),
                power_limit_w: 2000.0.into(),
                procs: Some(1),
            })
        })
        .collect()
}

fn policy_of(cfg: &PolicyConfig) -> Policy {
    Policy::new(cfg).unwrap_or_else(|e| panic!("config {:?}/{:?}: {e:?}", cfg.window, cfg.interval))
}

/// Steps a fresh trio `cycles` times every `step` seconds from `t0`, samples from `make(t)`;
/// returns the lane-on engine's lane jobs per cycle, or the first difference.
fn run_steps(
    cfg: &PolicyConfig,
    jobs: &[JobFacts],
    t0: i64,
    step: i64,
    cycles: usize,
    make: &dyn Fn(i64, usize) -> Vec<Sample>,
) -> Result<Vec<usize>, String> {
    let mut trio = Trio::new(vec![policy_of(cfg)], Mode::Enforce, 1);
    let mut lanes = Vec::new();
    let mut rng = Rng(step as u64 ^ cycles as u64);
    for c in 0..cycles {
        let now = t0 + c as i64 * step;
        let s = make(now, c);
        if rng.chance(0.05) {
            trio.toggle();
        }
        trio.step(now, &obs(jobs, &s), &format!("cycle {c}"))?;
        lanes.push(trio.on.lane_jobs());
    }
    Ok(lanes)
}

// ---------------------------------------------------------------------------------------------
// 1. Rings sized per engine (dd1db20).
// ---------------------------------------------------------------------------------------------

/// Windows of 123 to 127 intervals (rings of 128 rows up to 125; none from 126), intervals of
/// 1 s, 7 s and 60 s, windows a whole number of intervals and one second short of the next;
/// drivers at the interval, 10 % faster (the ring fills: the job leaves the lanes), and with
/// collectors stamping up to half an interval late, alternately. Everything equal every
/// cycle; at the interval, a window of ≤ 125 intervals stays on the lanes, 126 never takes them.
#[test]
fn rings_near_the_128_row_limit() {
    let jobs = [eight("a", 1, 0)];
    // Every snapshot of every cycle is compared: a debug build (CI) takes the limits only.
    let qs: &[i64] = if cfg!(debug_assertions) {
        &[125, 126]
    } else {
        &[123, 124, 125, 126, 127]
    };
    for interval in [1i64, 7, 60] {
        for &q in qs {
            for extra in [0, interval - 1] {
                let window = q * interval + extra;
                for (kind, step) in [
                    ("at interval", interval),
                    ("faster", (interval * 9 / 10).max(1)),
                    ("jitter", interval),
                ] {
                    if kind == "faster" && step == interval {
                        continue;
                    }
                    let cfg = cfg_with(window, interval, (3 * interval).max(3).min(window - 1));
                    let half = interval / 2;
                    let make = |t: i64, c: usize| {
                        let lag = if kind == "jitter" && c % 2 == 1 { half } else { 0 };
                        let look = if c % 40 < 20 { Look::Hung } else { Look::Spin };
                        at(&jobs, t - lag, look)
                    };
                    let cycles = q as usize + 40;
                    let ctx = format!("window {window} interval {interval} ({kind}, step {step})");
                    let lanes = run_steps(&cfg, &jobs, 1_700_000_000, step, cycles, &make).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    if kind == "at interval" {
                        if q <= 125 {
                            assert!(lanes.iter().all(|&n| n == 1), "{ctx}: lanes {lanes:?}");
                        } else {
                            assert!(lanes.iter().all(|&n| n == 0), "{ctx}: lanes {lanes:?}");
                        }
                    }
                }
            }
        }
    }
}

/// The smallest rings (a window under two intervals: window ÷ interval = 1, a ring of 4
/// rows), drivers stepping at 60, 30, 20, 15 and 1 s against a 60 s interval anyway; one-second
/// intervals with windows of 2, 3 and 120 s; the longest window (whose ring hint is clamped to
/// 4096 + 2). (An interval longer than the window is refused by `Policy::new`.)
#[test]
fn tiny_and_huge_rings() {
    let jobs = [eight("a", 1, 0), eight("b", 2, 0)];
    for (window, interval, gap, step, cycles) in [
        (119i64, 60i64, 60i64, 60i64, 80usize),
        (119, 60, 60, 30, 80),
        (119, 60, 60, 20, 80),
        (119, 60, 60, 15, 80),
        (119, 60, 60, 1, 300),
        (60, 60, 59, 60, 80),
        (61, 60, 60, 60, 80),
        (120, 1, 3, 1, 300),
        (2, 1, 1, 1, 50),
        (3, 1, 2, 1, 50),
        (7 * 86_400, 1, 180, 60, 60),
        (7 * 86_400, 60, 180, 60, 60),
        (5000 * 60, 60, 180, 60, 60),
    ] {
        let mut cfg = cfg_with(window, interval, gap);
        cfg.clock_skew = policy::DurationS(cfg.clock_skew.0.min(window));
        if let Err(e) = Policy::new(&cfg) {
            eprintln!("window {window} interval {interval}: refused by Policy::new: {e:?}");
            continue;
        }
        let make = |t: i64, c: usize| at(&jobs, t, LOOKS[(c / 25) % LOOKS.len()]);
        let lanes = run_steps(&cfg, &jobs, 1_700_000_000, step, cycles, &make)
            .unwrap_or_else(|e| panic!("window {window} interval {interval} step {step}: {e}"));
        eprintln!(
            "window {window} interval {interval} step {step}: lane jobs at the end {:?}",
            lanes.last()
        );
    }
}

/// A snapshot taken under one interval, restored under another: the window key leaves the
/// interval out (it only sizes rings), so the windows are kept, and a restored engine's ring
/// may be smaller than the windows it restores (120 rows into 32) or larger (20 into 128), or
/// there may be no lane ring at all (interval 5 s: 240 rows). The driver keeps stepping at the
/// old pace or at the new one. Everything equal every cycle.
#[test]
fn restore_under_another_interval() {
    let jobs = [eight("a", 1, 0), eight("b", 2, 0)];
    for (from, to, pace_after) in [
        (10i64, 60i64, 10i64),
        (10, 60, 60),
        (60, 10, 10),
        (60, 10, 60),
        (10, 5, 10),
        (5, 60, 60),
        (60, 9, 9),
    ] {
        let cfg_a = cfg_with(1200, from, 180);
        let cfg_b = cfg_with(1200, to, 180);
        let mut trio = Trio::new(vec![policy_of(&cfg_a)], Mode::Enforce, 1);
        let mut now = 1_700_000_000;
        let ctx = format!("interval {from} → {to}, pace {pace_after}");
        for c in 0..150 {
            now += from;
            let s = at(&jobs, now, if c < 100 { Look::Busy } else { Look::Hung });
            trio.step(now, &obs(&jobs, &s), &format!("{ctx}: cycle {c}"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        // Restart under the other interval (crossed files, as review 28's `restart`).
        let p = policy_of(&cfg_b);
        let load = |s: String, on: bool| {
            let snap: policy::EngineSnapshot = serde_json::from_str(&s).expect("snapshot reads back");
            let mut e = Engine::restore(p.clone(), Mode::Enforce, snap, now);
            e.set_lane_path(on);
            e
        };
        let (x, y, z) = (json(&trio.on, now), json(&trio.off, now), json(&trio.flip, now));
        trio.on = load(y, true);
        trio.off = load(z, false);
        trio.flip = load(x, trio.flip_on);
        trio.policies = vec![p.clone()];
        let mut lanes = Vec::new();
        for c in 0..200 {
            now += pace_after;
            let s = at(&jobs, now, if c % 50 < 30 { Look::Hung } else { Look::Spin });
            trio.step(now, &obs(&jobs, &s), &format!("{ctx}: cycle {c} after the restore"))
                .unwrap_or_else(|e| panic!("{e}"));
            lanes.push(trio.on.lane_jobs());
        }
        eprintln!("{ctx}: lane jobs after the restore {:?}…{:?}", &lanes[..5], lanes.last());
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Guard 3's bounds (d6977bf) and byte counts at 128 rows.
// ---------------------------------------------------------------------------------------------

/// Samples at guard 3's limits exactly, in rings of 128 rows (window 125 intervals) filled to
/// the last row (a driver at 58 s against a 60 s interval: 128 rows after eviction, every row
/// flagged alike, so each flag count byte reads 128), then leaving the lanes and coming back.
/// The lane sums at their largest (128 × 1,048,576 MiB = 134,217,728) and the count bytes at
/// 128 must read exactly as the per-GPU windows'. Also the all-zero, idle and no-power looks,
/// whose flags are set on every row.
#[test]
fn full_128_row_rings_at_the_limits() {
    let jobs = [eight("a", 1, 0)];
    let cfg = cfg_with(125 * 60, 60, 180);
    // Every snapshot of every cycle is compared: a debug build (CI) takes fewer cases.
    let (looks, steps): (&[Option<Look>], &[i64]) = if cfg!(debug_assertions) {
        (&[None, Some(Look::NoPower)], &[60, 58])
    } else {
        (
            &[None, Some(Look::AllZero), Some(Look::Idle), Some(Look::NoPower), Some(Look::Spin)],
            &[60, 59, 58, 55],
        )
    };
    for &look in looks {
        for &step in steps {
            let make = |t: i64, c: usize| match look {
                None => at_the_limits(&jobs, t),
                // Leave the lanes for a while (a sample missing), then come back.
                Some(l) if c == 200 => at(&jobs, t, l).into_iter().skip(1).collect(),
                Some(l) => at(&jobs, t, l),
            };
            let lanes = run_steps(&cfg, &jobs, 1_700_000_000, step, 400, &make).unwrap_or_else(|e| panic!("{look:?} step {step}: {e}"));
            // All-zero samples (0 W) are invalid samples: never on the lanes, by design.
            if look != Some(Look::AllZero) {
                assert!(
                    lanes.iter().take(100).all(|&n| n == 1),
                    "{look:?} step {step}: the lanes were not used: {lanes:?}"
                );
            }
        }
    }
}

/// Restores a snapshot whose every entry was set by `edit`, under `cfg`, and steps on;
/// returns the lane-on engine's lane jobs per cycle after the restore, and what the restore
/// did not take (`Engine::restore_dropped`, the same for every engine of the trio).
fn restore_with(
    cfg: &PolicyConfig,
    cycles_before: usize,
    edit: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>),
    look: Look,
) -> Result<(Vec<usize>, Vec<policy::RestoreDrop>), String> {
    let jobs = [eight("1", 1, 0)];
    let policies = vec![policy_of(cfg)];
    let mut e = build(&policies, Mode::Enforce, false);
    let mut out = Vec::new();
    let mut now = 100_000;
    let step = cfg.interval.0;
    for _ in 0..cycles_before {
        now += step;
        let s = at(&jobs, now, look);
        e.step(now, &obs(&jobs, &s), &mut out);
    }
    let mut v: serde_json::Value = serde_json::from_str(&json(&e, now)).expect("json");
    for g in v["jobs"][0]["gpus"].as_array_mut().expect("gpus") {
        for en in g["entries"].as_array_mut().expect("entries") {
            edit(en.as_object_mut().expect("entry"));
        }
    }
    let text = v.to_string();
    let load = |on: bool| {
        let snap: policy::EngineSnapshot = serde_json::from_str(&text).expect("edited snapshot reads back");
        let mut e = Engine::restore(policies[0].clone(), Mode::Enforce, snap, now);
        e.set_lane_path(on);
        e
    };
    let dropped = load(true).restore_dropped().to_vec();
    if load(false).restore_dropped() != dropped.as_slice() {
        return Err("the lane-on and lane-off engines dropped different jobs on restore".into());
    }
    let mut trio = Trio {
        on: load(true),
        off: load(false),
        flip: load(true),
        flip_on: true,
        policies: policies.clone(),
        mode: Mode::Enforce,
        outs: 1,
        lane_cycles: 0,
        last: Vec::new(),
        digest: 0,
    };
    let mut lanes = Vec::new();
    // The first cycles bring no samples, so the restored entries stay in the window.
    for c in 0..6 {
        now += step;
        let s = if c < 3 { Vec::new() } else { at(&jobs, now, look) };
        trio.step(now, &obs(&jobs, &s), &format!("cycle {c} after the restore"))?;
        lanes.push(trio.on.lane_jobs());
    }
    Ok((lanes, dropped))
}

/// Entries exactly at guard 3's bounds (util 100,000 milli, 1,048,576 MiB, 20,000 dW) are
/// what ingest makes from samples at the limits, and are taken back into lanes after a
/// restore, with 127 of them in a 128-row ring (the largest sums a lane job can hold). One
/// unit more in any of them is no entry an engine writes: the restore does not take the
/// job's windows, and names the field and the value (`Engine::restore_dropped`); the job is
/// then a new job. Everything equal with the lane path on and off either way.
#[test]
fn restored_entries_at_and_just_beyond_guard_3() {
    let cfg = cfg_with(125 * 60, 60, 180);
    let set = |u: u64, m: u64, p: u64| {
        move |e: &mut serde_json::Map<String, serde_json::Value>| {
            e.insert("util_milli".into(), u.into());
            e.insert("mem_mib".into(), m.into());
            e.insert("power_dw".into(), p.into());
        }
    };
    let (at_bounds, dropped) =
        restore_with(&cfg, 124, &set(100_000, 1_048_576, 20_000), Look::Busy).unwrap_or_else(|e| panic!("at the bounds: {e}"));
    assert!(dropped.is_empty(), "entries at the bounds were not restored: {dropped:?}");
    assert!(
        at_bounds[1..3].iter().all(|&n| n == 1),
        "entries at the bounds did not return to the lanes: {at_bounds:?}"
    );
    for (name, u, m, p, says) in [
        ("util + 1", 100_001u64, 1_048_576u64, 20_000u64, "util_milli 100001"),
        ("mem + 1", 100_000, 1_048_577, 20_000, "mem_mib 1048577"),
        ("power + 1", 100_000, 1_048_576, 20_001, "power_dw 20001"),
        (
            "all max",
            u64::from(u32::MAX),
            u64::from(u32::MAX),
            u64::from(u16::MAX),
            "util_milli 4294967295",
        ),
    ] {
        let (_, dropped) = restore_with(&cfg, 124, &set(u, m, p), Look::Busy).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            dropped.len() == 1
                && dropped[0].job_id == "1"
                && dropped[0].why.contains(says)
                && dropped[0].why.contains("GPU slot 0, entry 0"),
            "{name}: the restore should drop job 1's windows naming {says:?}: {dropped:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. The route memo (b066741).
// ---------------------------------------------------------------------------------------------

fn job_on(id: &str, gpus: &[(u32, u16)], start_s: i64) -> JobFacts {
    JobFacts {
        alloc: gpus.iter().map(|&(n, g)| GpuRef { node: NodeId(n), gpu: g }).collect(),
        ..eight(id, 0, start_s)
    }
}

/// The route memo under job-set changes: jobs handed in another order, a job's allocation
/// reordered (same GPUs), two jobs swapping a GPU, a requeue, a job replaced by another on
/// the same GPUs, a job id twice, stray samples of no job, a sample missing or sent twice,
/// the samples' order changed only among one job's GPUs, a restart; two policies. The samples'
/// GPU order stays the same from cycle to cycle wherever the script does not change it, so
/// the memo is used most cycles.
#[test]
fn route_memo_under_job_set_changes() {
    let mut rng = Rng(29);
    let g8 = |n: u32| -> Vec<(u32, u16)> { (0..8).map(|g| (n, g)).collect() };
    let mut a = job_on("A", &g8(1), 0);
    let mut b = job_on("B", &g8(2), 0);
    let mut c = job_on("C", &g8(3), 0);
    let d2 = job_on("D", &[(4, 0), (4, 1)], 0);
    let cfg = cfg_with(600, 60, 180);
    let cfg2 = PolicyConfig {
        stages: vec![stage(120, "alert"), stage(600, "drain")],
        ..cfg.clone()
    };
    let mut trio = Trio::new(vec![policy_of(&cfg), policy_of(&cfg2)], Mode::Enforce, 2);
    let mut now = 1_700_000_000;
    let stray = |t: i64, n: u32| reading(Look::Busy, t, t, GpuRef { node: NodeId(n), gpu: 0 });
    for cy in 0..260usize {
        now += 60;
        // Job-set changes.
        match cy {
            20 => b.start_s += 1,              // requeue
            40 => c.alloc.swap(0, 7),          // same GPUs, new order
            60 => a = job_on("A2", &g8(1), 0), // A replaced on its GPUs
            80 => {
                // B and C swap a GPU.
                let (x, y) = (b.alloc[3], c.alloc[3]);
                b.alloc[3] = y;
                c.alloc[3] = x;
            }
            120 => c.alloc.swap(0, 7),
            _ => {}
        }
        let mut jobs = vec![a.clone(), b.clone(), c.clone(), d2.clone()];
        if cy % 7 == 3 {
            jobs.reverse();
        }
        if (150..170).contains(&cy) {
            jobs.push(b.clone()); // B twice
        }
        if (100..110).contains(&cy) {
            jobs.remove(jobs.len() - 1); // D away (memo after a leave)
        }
        // Samples: fixed GPU order (node by node), strays in fixed places.
        let look = |j: &str| match (j, cy / 30 % 3) {
            ("A" | "A2", _) => Look::Hung,
            ("B", 0) => Look::Busy,
            ("B", _) => Look::Idle,
            (_, 1) => Look::Spin,
            _ => Look::Starved,
        };
        let mut s: Vec<Sample> = Vec::new();
        s.push(stray(now, 90));
        for n in 1..=3u32 {
            let owner = [&a, &b, &c]
                .into_iter()
                .find(|j| j.alloc.iter().any(|g| g.node.0 == n))
                .expect("owner");
            for g in 0..8u16 {
                let who = [&a, &b, &c]
                    .into_iter()
                    .find(|j| j.alloc.contains(&GpuRef { node: NodeId(n), gpu: g }))
                    .unwrap_or(owner);
                s.push(reading(look(&who.job_id), now, now, GpuRef { node: NodeId(n), gpu: g }));
            }
        }
        s.push(stray(now, 91));
        s.extend(d2.alloc.iter().map(|&g| reading(Look::Idle, now, now, g)));
        match cy % 23 {
            5 => {
                s.remove(3); // one GPU's sample missing
            }
            9 => {
                let dup = s[4];
                s.insert(5, dup); // one sent twice
            }
            13 => s.swap(2, 3), // order changed within job A
            17 => {
                // The same number of samples, one GPU twice and one missing.
                s[6] = s[5];
            }
            _ => {}
        }
        if rng.chance(0.03) {
            trio.toggle();
        }
        trio.step(now, &obs(&jobs, &s), &format!("cycle {cy}"))
            .unwrap_or_else(|e| panic!("{e}"));
        if cy == 200 {
            trio.restart(now, now);
            trio.outs = 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. `LanePool` against per-lane briefs: job-level Future and Stale, short coverage.
// ---------------------------------------------------------------------------------------------

/// A restore at a time before the snapshot's (the clock of the restarted host is behind): the
/// restored windows hold samples from the future, the job goes back to the lanes on the first
/// cycle (no sample is taken: they are late), and the lanes' pool decides Future for the whole
/// job; then cycles without samples until the window is stale, then samples again, a job
/// starting inside the window (short coverage) and now lagging samples stamped up to the skew
/// ahead.
#[test]
fn pool_future_stale_and_short() {
    let jobs = [eight("a", 1, 1_700_000_000 - 3000), eight("b", 2, 1_700_000_000 + 300)];
    let cfg = cfg_with(600, 60, 180);
    let skew = cfg.clock_skew.0;
    for back in [0i64, 1, skew, skew + 1, 200, 3000] {
        let mut trio = Trio::new(vec![policy_of(&cfg)], Mode::Enforce, 1);
        let mut now = 1_700_000_000;
        for c in 0..30 {
            now += 60;
            // Stamped up to the skew ahead of now.
            let s = at(&jobs, now + (c % 3) * skew / 2, Look::Hung);
            trio.step(now, &obs(&jobs, &s), &format!("back {back}: cycle {c}"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let taken = now;
        now -= back;
        trio.restart(taken, now);
        for c in 0..40 {
            now += if c < 20 { 10 } else { 60 };
            let s = if (5..25).contains(&c) {
                Vec::new()
            } else {
                at(&jobs, now, Look::Hung)
            };
            trio.step(now, &obs(&jobs, &s), &format!("back {back}: cycle {c} after the restore"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The Trio's engines all route the same samples the same way, so a route-memo bug would
/// show in all three alike. Here three engines (two policies each) get one cycle's samples in
/// three orders: as the driver hands them, GPU order unchanged from cycle to cycle (the memo
/// is used); the same runs of samples rotated by one more run each cycle (direct routing
/// redone every cycle, no memo); and sorted by GPU index first (never direct: the sorted
/// path). Findings never depend on arrival order, so all three must agree, counters
/// (unattributed samples) and snapshots included. The job-set changes come after a cycle
/// whose samples were routed directly and name the same GPUs in the same order, so that only
/// `changed` stands between them and a stale memo: a requeue, a job replaced by another on
/// its GPUs (every later job renumbered), a job leaving (its samples now unattributed) and
/// coming back, a job appearing on GPUs whose samples were unattributed, a job id twice.
/// (Mutation check: with `changed ||` removed from `Engine::step_each_body`, this fails; the
/// Trio-based `route_memo_under_job_set_changes` does not.)
#[test]
fn route_memo_against_fresh_routing() {
    let g8 = |n: u32| -> Vec<(u32, u16)> { (0..8).map(|g| (n, g)).collect() };
    let mut a = job_on("A", &g8(1), 0);
    let mut b = job_on("B", &g8(2), 0);
    let mut c = job_on("C", &g8(3), 0);
    let d2 = job_on("D", &[(4, 0), (4, 1)], 0);
    let e1 = job_on("E", &[(90, 0)], 0);
    let cfg = cfg_with(600, 60, 180);
    let cfg2 = PolicyConfig {
        stages: vec![stage(120, "alert"), stage(600, "drain")],
        ..cfg.clone()
    };
    let policies = vec![policy_of(&cfg), policy_of(&cfg2)];
    let mut es: Vec<Engine> = (0..3).map(|k| build(&policies, Mode::Enforce, k != 2)).collect();
    let mut now = 1_700_000_000;
    let stray = |t: i64, n: u32| reading(Look::Busy, t, t, GpuRef { node: NodeId(n), gpu: 0 });
    for cy in 0..260usize {
        now += 60;
        match cy {
            20 => b.start_s += 1,
            40 => c.alloc.swap(0, 7),
            45 => c.alloc.swap(0, 7),
            62 => a = job_on("A2", &g8(1), 0),
            _ => {}
        }
        let mut jobs = vec![a.clone(), b.clone(), c.clone()];
        if !(100..112).contains(&cy) {
            jobs.push(d2.clone());
        }
        if (180..192).contains(&cy) {
            jobs.push(e1.clone());
        }
        if cy % 7 == 3 {
            jobs.reverse();
        }
        if (150..170).contains(&cy) {
            jobs.push(b.clone());
        }
        let look = |j: &str| match (j, cy / 30 % 3) {
            ("A" | "A2", _) => Look::Hung,
            ("B", 0) => Look::Busy,
            ("B", _) => Look::Idle,
            (_, 1) => Look::Spin,
            _ => Look::Starved,
        };
        let mut s: Vec<Sample> = vec![stray(now, 90)];
        for n in 1..=3u32 {
            for g in 0..8u16 {
                let gr = GpuRef { node: NodeId(n), gpu: g };
                let who = [&a, &b, &c]
                    .into_iter()
                    .find(|j| j.alloc.contains(&gr))
                    .map_or("none", |j| j.job_id.as_str());
                s.push(reading(look(who), now, now, gr));
            }
        }
        s.push(stray(now, 91));
        s.extend(d2.alloc.iter().map(|&g| reading(Look::Idle, now, now, g)));
        match cy % 23 {
            5 => {
                s.remove(3);
            }
            9 => {
                let dup = s[4];
                s.insert(5, dup);
            }
            13 => s.swap(2, 3),
            17 => s[6] = s[5],
            _ => {}
        }
        // Runs of one node, rotated.
        let mut runs: Vec<Vec<Sample>> = Vec::new();
        for x in &s {
            match runs.last_mut() {
                Some(r) if r[0].node == x.node => r.push(*x),
                _ => runs.push(vec![*x]),
            }
        }
        let k = cy % runs.len();
        runs.rotate_left(k);
        let rotated: Vec<Sample> = runs.concat();
        let mut sorted = s.clone();
        sorted.sort_by_key(|x| (x.gpu, x.node.0, x.t_s));
        let orders = [&s, &rotated, &sorted];
        let mut outs: Vec<Vec<Vec<Finding>>> = Vec::new();
        for (e, smp) in es.iter_mut().zip(orders) {
            let mut o = vec![Vec::new(), Vec::new()];
            e.step_each(now, &obs(&jobs, smp), &mut o);
            outs.push(o);
        }
        for k in 1..3 {
            for (p, (x, y)) in outs[0].iter().zip(&outs[k]).enumerate() {
                assert!(
                    same_findings(x, y),
                    "cycle {cy} policy {p}: findings of order {k} differ:\n{x:?}\n{y:?}"
                );
            }
            assert_eq!(es[0].counters(), es[k].counters(), "cycle {cy}: counters of order {k}");
            let (x, y) = (json(&es[0], now), json(&es[k], now));
            assert!(x == y, "cycle {cy}: snapshots of order {k} differ {}", first_diff(&x, &y));
        }
    }
}
