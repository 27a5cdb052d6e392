//! The harness reviews 28 and 29 share: a `Trio` of engines (the lane path on, off, and
//! switched at random) stepped on the same cycles and compared after every one (findings,
//! counters, tracked jobs, level dwells, snapshot JSON), a deterministic PRNG, and sample
//! makers.
#![allow(dead_code)]

use policy::{Engine, Finding, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Reading, Sample, StageConfig};

// ---------------------------------------------------------------------------------------------
// A deterministic PRNG.
// ---------------------------------------------------------------------------------------------

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Engines under comparison.
// ---------------------------------------------------------------------------------------------

pub fn stage(after_s: i64, verdict: &str) -> StageConfig {
    StageConfig {
        after: policy::DurationS(after_s),
        verdict: verdict.into(),
    }
}

pub struct Trio {
    pub on: Engine,
    pub off: Engine,
    pub flip: Engine,
    pub flip_on: bool,
    pub policies: Vec<Policy>,
    pub mode: Mode,
    pub outs: usize,
    pub lane_cycles: usize,
    /// Findings of the off engine, last cycle (policy 0).
    pub last: Vec<Finding>,
    /// A digest of everything the lane-on engine showed (see `digest_of_the_fuzz_runs`).
    pub digest: u64,
}

pub fn build(policies: &[Policy], mode: Mode, on: bool) -> Engine {
    let mut e = Engine::with_policies(policies.to_vec(), mode).expect("policies share windows");
    e.set_lane_path(on);
    e
}

pub fn json(e: &Engine, now: i64) -> String {
    serde_json::to_string(&e.snapshot(now)).expect("snapshot serialises")
}

/// FNV-1a over `s`, continuing from `h`.
pub fn mix(h: u64, s: &str) -> u64 {
    s.bytes()
        .fold(h ^ 0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

pub fn first_diff(a: &str, b: &str) -> String {
    let at = a.bytes().zip(b.bytes()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let from = at.saturating_sub(200);
    let cut = |s: &str| String::from_utf8_lossy(&s.as_bytes()[from.min(s.len())..(at + 120).min(s.len())]).into_owned();
    format!(
        "at byte {at} (lengths {} vs {})\n  A: …{}…\n  B: …{}…",
        a.len(),
        b.len(),
        cut(a),
        cut(b)
    )
}

pub fn same_findings(a: &[Finding], b: &[Finding]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || format!("{x:?}") == format!("{y:?}"))
}

impl Trio {
    pub fn new(policies: Vec<Policy>, mode: Mode, outs: usize) -> Trio {
        Trio {
            on: build(&policies, mode, true),
            off: build(&policies, mode, false),
            flip: build(&policies, mode, true),
            flip_on: true,
            policies,
            mode,
            outs,
            lane_cycles: 0,
            last: Vec::new(),
            digest: 0,
        }
    }

    pub fn toggle(&mut self) {
        self.flip_on = !self.flip_on;
        self.flip.set_lane_path(self.flip_on);
    }

    /// Steps all three, compares everything (snapshots too).
    pub fn step(&mut self, now: i64, obs: &Observation<'_>, ctx: &str) -> Result<(), String> {
        let mk = || vec![Vec::new(); self.outs];
        let (mut a, mut b, mut c) = (mk(), mk(), mk());
        self.on.step_each(now, obs, &mut a);
        self.off.step_each(now, obs, &mut b);
        self.flip.step_each(now, obs, &mut c);
        self.lane_cycles += self.on.lane_jobs();
        if self.off.lane_jobs() != 0 {
            return Err(format!("{ctx}: the off engine holds lane jobs"));
        }
        for p in 0..self.outs {
            if !same_findings(&a[p], &b[p]) {
                let i = (0..a[p].len().min(b[p].len())).find(|&i| format!("{:?}", a[p][i]) != format!("{:?}", b[p][i]));
                let show = |v: &[Finding]| i.map_or(format!("{} findings", v.len()), |i| format!("{:?}", v[i]));
                return Err(format!(
                    "{ctx} (now {now}) policy {p}: findings differ, job #{i:?}\n  on : {}\n  off: {}",
                    show(&a[p]),
                    show(&b[p])
                ));
            }
            if !same_findings(&c[p], &b[p]) {
                return Err(format!("{ctx} (now {now}) policy {p}: the switched engine's findings differ"));
            }
        }
        for (who, e) in [("on", &self.on), ("switched", &self.flip)] {
            if e.counters() != self.off.counters() {
                return Err(format!(
                    "{ctx} (now {now}): counters differ ({who}): {:?} vs {:?}",
                    e.counters(),
                    self.off.counters()
                ));
            }
            if e.tracked_jobs() != self.off.tracked_jobs() {
                return Err(format!("{ctx} (now {now}): tracked jobs differ ({who})"));
            }
            for pos in 0..obs.jobs.len() {
                if e.level_dwells_s(pos, now) != self.off.level_dwells_s(pos, now) {
                    return Err(format!("{ctx} (now {now}): level dwells of job #{pos} differ ({who})"));
                }
            }
        }
        let (x, y, z) = (json(&self.on, now), json(&self.off, now), json(&self.flip, now));
        if x != y {
            return Err(format!("{ctx} (now {now}): snapshots differ (on vs off) {}", first_diff(&x, &y)));
        }
        if z != y {
            return Err(format!(
                "{ctx} (now {now}): snapshots differ (switched vs off) {}",
                first_diff(&z, &y)
            ));
        }
        self.digest = mix(self.digest, &format!("{a:?}"));
        self.digest = mix(self.digest, &x);
        self.last = b.swap_remove(0);
        Ok(())
    }

    /// Snapshot through JSON and restore all three (first policy only).
    pub fn restart(&mut self, taken: i64, now: i64) {
        let p = self.policies[0].clone();
        let load = |s: String, on: bool| {
            let snap: policy::EngineSnapshot = serde_json::from_str(&s).expect("snapshot reads back");
            let mut e = Engine::restore(p.clone(), self.mode, snap, now);
            e.set_lane_path(on);
            e
        };
        // Crossed: each restored from another's file.
        let (x, y, z) = (json(&self.on, taken), json(&self.off, taken), json(&self.flip, taken));
        self.on = load(y, true);
        self.off = load(z, false);
        self.flip = load(x, self.flip_on);
        self.policies.truncate(1);
        self.outs = 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Readings.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Look {
    Busy,
    Idle,
    Hung,
    Spin,
    Starved,
    AllZero,
    NoPower,
}

pub const LOOKS: [Look; 7] = [
    Look::Busy,
    Look::Idle,
    Look::Hung,
    Look::Spin,
    Look::Starved,
    Look::AllZero,
    Look::NoPower,
];

pub fn reading(look: Look, t_s: i64, key: i64, g: GpuRef) -> Sample {
    let salt = (g.node.0 as i64 * 31 + g.gpu as i64 * 7 + key.rem_euclid(1 << 20) / 7).rem_euclid(11);
    let noise = salt as f64 * 0.37;
    let base = Sample {
        t_s,
        node: g.node,
        gpu: g.gpu,
        util_pct: 0.0.into(),
        mem_used_mib: 0.0.into(),
        mem_total_mib: 81_920.0.into(),
        power_w: (60.0 + noise).into(),
        power_limit_w: 400.0.into(),
        procs: Some(0),
        sm_active: Reading::MISSING,
    };
    match look {
        Look::Busy => Sample {
            util_pct: (88.0 + salt as f64).into(),
            mem_used_mib: (60_000.0 + salt as f64).into(),
            power_w: (300.0 + 5.0 * noise).into(),
            procs: Some(1),
            ..base
        },
        Look::Idle => base,
        Look::Hung => Sample {
            mem_used_mib: 40_000.0.into(),
            procs: Some(1),
            power_w: (70.0 + noise).into(),
            ..base
        },
        Look::Spin => Sample {
            util_pct: 100.0.into(),
            mem_used_mib: 40_000.0.into(),
            procs: Some(1),
            power_w: (70.0 + noise * 0.5).into(),
            ..base
        },
        Look::Starved => Sample {
            util_pct: (3.0 + (salt % 6) as f64).into(),
            mem_used_mib: 30_000.0.into(),
            procs: Some(1),
            power_w: (90.0 + noise).into(),
            ..base
        },
        Look::AllZero => Sample {
            util_pct: 0.0.into(),
            mem_used_mib: 0.0.into(),
            power_w: 0.0.into(),
            procs: None,
            ..base
        },
        Look::NoPower => Sample {
            util_pct: (salt as f64 * 0.1).into(),
            mem_used_mib: 40_000.0.into(),
            power_w: Reading::MISSING,
            procs: None,
            ..base
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Jobs and configs.
// ---------------------------------------------------------------------------------------------

pub fn eight(id: &str, node: u32, start_s: i64) -> JobFacts {
    JobFacts {
        job_id: id.into(),
        user: "u".into(),
        account: "ml".into(),
        partition: "p".into(),
        qos: "q".into(),
        name: "n".into(),
        comment: String::new(),
        start_s,
        alloc: (0..8)
            .map(|i| GpuRef {
                node: NodeId(node),
                gpu: i,
            })
            .collect(),
    }
}

pub fn samples_of(jobs: &[JobFacts], t: i64, look: Look, key: i64) -> Vec<Sample> {
    jobs.iter()
        .flat_map(|j| j.alloc.iter().map(move |&g| reading(look, t, key, g)))
        .collect()
}

pub fn cfg_with(window: i64, interval: i64, gap: i64) -> PolicyConfig {
    PolicyConfig {
        window: policy::DurationS(window),
        interval: policy::DurationS(interval),
        max_sample_gap: policy::DurationS(gap),
        warmup: policy::DurationS(0),
        notice: policy::DurationS(0),
        stages: vec![stage(0, "alert"), stage(300, "drain"), stage(900, "cancel")],
        ..PolicyConfig::default()
    }
}
