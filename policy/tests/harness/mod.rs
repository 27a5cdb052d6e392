//! A tiny driver for policy tests: jobs on numbered nodes, GPU behaviour as a function of
//! time, one cycle per `interval_s`, samples stamped at the cycle time.

#![allow(dead_code)]

use policy::{
    DrainConfirmation, Engine, Finding, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Reading, Sample, Scope, Verdict,
};

/// What a GPU shows at one tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gpu {
    /// Training: high util, memory held, high power that fluctuates.
    Busy,
    /// Allocation held, nothing running: 0 %, no memory, idle power, no processes.
    Idle,
    /// Deadlocked rank: 0 %, memory held, idle power, processes resident.
    Hung,
    /// NCCL spin: 100 % util, ~70 W (limit 400 W), small noise.
    Spin,
    /// Dataloader-starved: 3–8 % util, memory held.
    Starved,
    /// Checkpoint stall: like hung (memory held, procs, 0 %), but transient.
    Stall,
    /// No sample at all this tick.
    Missing,
    /// A sample whose utilisation is `[N/A]` (MIG), memory unreadable.
    NaUtil,
    /// The broken exporter: 0 %, 0 MiB, 0 W.
    AllZero,
    /// A sample stamped one hour in the future, otherwise idle.
    Future,
    /// Busy at exactly the given util, otherwise idle-looking.
    Util(u8),
}

pub fn cfg() -> PolicyConfig {
    PolicyConfig::default()
}

/// The default config with a cancel stage at `cancel_after_s`.
pub fn cfg_with_cancel(cancel_after_s: i64) -> PolicyConfig {
    let mut c = PolicyConfig::default();
    c.stages.push(policy::StageConfig {
        after: policy::DurationS(cancel_after_s),
        verdict: "cancel".into(),
    });
    c
}

pub fn job(id: &str, start_s: i64, nodes: &[(u32, u16)]) -> JobFacts {
    JobFacts {
        job_id: id.into(),
        user: "alice".into(),
        account: "ml".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        name: "train".into(),
        comment: String::new(),
        start_s,
        alloc: nodes
            .iter()
            .flat_map(|&(n, k)| (0..k).map(move |g| GpuRef { node: NodeId(n), gpu: g }))
            .collect(),
    }
}

/// The sample a GPU in state `g` reports at `t_s`. `salt` varies the noise per GPU.
pub fn sample(g: Gpu, t_s: i64, r: GpuRef) -> Option<Sample> {
    let salt = (r.node.0 as i64 * 31 + r.gpu as i64 * 7 + t_s / 60) % 11;
    let noise = salt as f64 * 0.37;
    let base = Sample {
        t_s,
        node: r.node,
        gpu: r.gpu,
        util_pct: 0.0.into(),
        mem_used_mib: 0.0.into(),
        mem_total_mib: 81_920.0.into(),
        power_w: (60.0 + noise).into(),
        power_limit_w: 400.0.into(),
        procs: Some(0),
        sm_active: Reading::MISSING,
    };
    Some(match g {
        Gpu::Busy => Sample {
            util_pct: (90.0 + salt as f64).into(),
            mem_used_mib: 60_000.0.into(),
            power_w: (300.0 + 5.0 * noise).into(),
            procs: Some(1),
            ..base
        },
        Gpu::Idle => base,
        Gpu::Hung | Gpu::Stall => Sample {
            mem_used_mib: 40_000.0.into(),
            procs: Some(1),
            power_w: (70.0 + noise).into(),
            ..base
        },
        Gpu::Spin => Sample {
            util_pct: 100.0.into(),
            mem_used_mib: 40_000.0.into(),
            procs: Some(1),
            power_w: (70.0 + noise * 0.5).into(),
            ..base
        },
        Gpu::Starved => Sample {
            util_pct: (3.0 + (salt % 6) as f64).into(),
            mem_used_mib: 30_000.0.into(),
            procs: Some(1),
            power_w: (90.0 + noise).into(),
            ..base
        },
        Gpu::Missing => return None,
        Gpu::NaUtil => Sample {
            util_pct: Reading::MISSING,
            mem_used_mib: Reading::MISSING,
            mem_total_mib: Reading::MISSING,
            ..base
        },
        Gpu::AllZero => Sample {
            util_pct: 0.0.into(),
            mem_used_mib: 0.0.into(),
            power_w: 0.0.into(),
            procs: None,
            ..base
        },
        Gpu::Future => Sample { t_s: t_s + 3600, ..base },
        Gpu::Util(u) => Sample {
            util_pct: (u as f64).into(),
            ..base
        },
    })
}

/// A running scenario.
pub struct Run {
    pub engine: Engine,
    pub jobs: Vec<JobFacts>,
    pub scope: Scope,
    pub now_s: i64,
    pub interval_s: i64,
    pub out: Vec<Finding>,
    /// Findings of every cycle so far: (now_s, findings).
    pub history: Vec<(i64, Vec<Finding>)>,
    pub drains: Vec<DrainConfirmation>,
}

impl Run {
    pub fn new(cfg: PolicyConfig, mode: Mode, jobs: Vec<JobFacts>) -> Run {
        let interval_s = cfg.interval.secs();
        Run {
            engine: Engine::new(Policy::new(&cfg).expect("test config is valid"), mode),
            jobs,
            scope: Scope::Whole,
            now_s: 0,
            interval_s,
            out: Vec::new(),
            history: Vec::new(),
            drains: Vec::new(),
        }
    }

    /// Advances one cycle; `state(t, job index, gpu)` says what each GPU shows.
    pub fn tick(&mut self, mut state: impl FnMut(i64, usize, GpuRef) -> Gpu) -> &[Finding] {
        self.now_s += self.interval_s;
        let now = self.now_s;
        let mut samples = Vec::new();
        for (ji, j) in self.jobs.iter().enumerate() {
            for &r in &j.alloc {
                if let Some(s) = sample(state(now, ji, r), now, r) {
                    samples.push(s);
                }
            }
        }
        self.tick_with(samples)
    }

    /// Advances one cycle and evaluates with exactly these samples.
    pub fn tick_samples(&mut self, samples: Vec<Sample>) -> &[Finding] {
        self.now_s += self.interval_s;
        self.tick_with(samples)
    }

    /// Evaluates at the current `now_s` with the given samples.
    pub fn tick_with(&mut self, samples: Vec<Sample>) -> &[Finding] {
        let drains = std::mem::take(&mut self.drains);
        let obs = Observation {
            jobs: &self.jobs,
            samples: &samples,
            scope: self.scope,
            drains: &drains,
        };
        self.engine.step(self.now_s, &obs, &mut self.out);
        self.history.push((self.now_s, self.out.clone()));
        &self.out
    }

    /// Runs until `until_s` with a fixed state per (job, gpu) given by `state`.
    pub fn run_until(&mut self, until_s: i64, mut state: impl FnMut(i64, usize, GpuRef) -> Gpu) {
        while self.now_s + self.interval_s <= until_s {
            self.tick(&mut state);
        }
    }

    /// The verdict of job `ji` in the latest cycle.
    pub fn verdict(&self, ji: usize) -> Verdict {
        self.out[ji].verdict
    }

    /// Highest verdict job `ji` ever reached.
    pub fn max_verdict(&self, ji: usize) -> Verdict {
        self.history.iter().map(|(_, f)| f[ji].verdict).max().unwrap_or(Verdict::Healthy)
    }

    /// First time job `ji` reached at least `v`.
    pub fn first_at(&self, ji: usize, v: Verdict) -> Option<i64> {
        self.history.iter().find(|(_, f)| f[ji].verdict >= v).map(|(t, _)| *t)
    }
}

/// One cycle at `t` with every GPU observed and no drains.
pub fn step_whole(e: &mut Engine, jobs: &[JobFacts], t: i64, samples: &[Sample], out: &mut Vec<Finding>) {
    let obs = Observation {
        jobs,
        samples,
        scope: Scope::Whole,
        drains: &[],
    };
    e.step(t, &obs, out);
}

/// Runs one single-GPU job (GPU 0 on node 0, started at 0) under `policy` for `ticks`
/// one-minute cycles, the sample of each tick made by `at(tick, t_s)`; returns the highest
/// verdict reached, with its signature.
pub fn worst_of(policy: Policy, ticks: i64, at: impl Fn(i64, i64) -> Sample) -> (Verdict, &'static str) {
    let jobs = vec![job("1", 0, &[(0, 1)])];
    let mut e = Engine::new(policy, Mode::Observe);
    let mut out = Vec::new();
    let mut worst = (Verdict::Healthy, "");
    for tick in 1..=ticks {
        let t = tick * 60;
        step_whole(&mut e, &jobs, t, &[at(tick, t)], &mut out);
        if out[0].verdict > worst.0 {
            worst = (out[0].verdict, out[0].signature_name());
        }
    }
    worst
}

/// An idle-looking sample of GPU 0 on node 0 at `t_s`: util missing, no memory, 60 W of
/// 400 W, no process.
pub fn base_sample(t_s: i64) -> Sample {
    Sample {
        t_s,
        node: NodeId(0),
        gpu: 0,
        util_pct: Reading::MISSING,
        mem_used_mib: 0.0.into(),
        mem_total_mib: 81_920.0.into(),
        power_w: 60.0.into(),
        power_limit_w: 400.0.into(),
        procs: Some(0),
        sm_active: Reading::MISSING,
    }
}
