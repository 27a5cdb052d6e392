//! Runs a decision-maker over a [`World`], tick by tick, and scores what it does.
//!
//! The same driver runs the policy engine and the baselines: each is a [`Judge`] that sees the
//! running jobs and the tick's new samples and says, per job, a verdict and a signature. A
//! cancel is carried out at once (the job leaves and its samples stop); drains in observe mode
//! are hypothetical and confirmed by the engine itself one cycle later.

use crate::score::Tally;
use crate::world::{World, TICK_S};
use policy::{Engine, Finding, JobFacts, Mode, Observation, Policy, Sample, Scope, SignatureId, Verdict};

/// What a judge says about one job in one cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// The signature that named the breach, when there is one.
    pub signature: Option<SignatureId>,
    /// The finding counts toward a drained job's recovery (`policy::Recovery::counts`:
    /// `healthy` on valid evidence). Baselines set it to `verdict == Healthy`; it matters
    /// only for a judge whose [`Judge::recovery_window_s`] is set.
    pub healthy: bool,
}

/// A decision-maker the driver can run: the policy engine or a baseline.
pub trait Judge {
    /// One cycle at `now_s`: `jobs` are the running jobs (in a stable order), `samples` the
    /// tick's new samples. Writes one judgement per job, in order, into `out` (cleared first).
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>);

    /// The window, seconds, by which a drained job that works again has its drain resumed
    /// (`policy::Recovery`, as the enforcer does); `None` (the default, for the baselines,
    /// which model tools that do not): a drain stands until its job leaves.
    fn recovery_window_s(&self) -> Option<i64> {
        None
    }
}

/// The policy engine as a [`Judge`]: `Mode::Observe`, `Scope::Whole`, no real drains.
pub struct EngineJudge {
    engine: Engine,
    findings: Vec<Finding>,
    window_s: i64,
}

impl EngineJudge {
    /// A fresh engine for one run.
    pub fn new(policy: Policy) -> EngineJudge {
        let window_s = policy.config().window.secs();
        EngineJudge {
            engine: Engine::new(policy, Mode::Observe),
            findings: Vec::new(),
            window_s,
        }
    }

    /// The engine's findings of the last [`Judge::judge`] call, one per job in its order.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }
}

impl Judge for EngineJudge {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        let obs = Observation {
            jobs,
            samples,
            scope: Scope::Whole,
            drains: &[],
        };
        self.engine.step(now_s, &obs, &mut self.findings);
        out.clear();
        out.extend(self.findings.iter().map(|f| Judgement {
            verdict: f.verdict,
            signature: f.signature,
            healthy: policy::Recovery::counts(f),
        }));
    }

    fn recovery_window_s(&self) -> Option<i64> {
        Some(self.window_s)
    }
}

/// Runs `judge` over the whole of `world` and returns the tally.
///
/// Per tick the driver: drops jobs that ended or were cancelled, adds jobs that start, copies
/// the tick's samples of running jobs into one reused buffer, calls the judge once, and scores
/// the judgements (alerts, drains, cancels, with their ground truth at that tick).
pub fn run(world: &World, judge: &mut dyn Judge) -> Tally {
    let mut tally = Tally::new(world);
    tally.recovery_window_s = judge.recovery_window_s();
    let mut running: Vec<JobFacts> = Vec::new();
    let mut run_idx: Vec<u32> = Vec::new();
    let mut prev: Vec<Verdict> = Vec::new();
    let mut cancelled = vec![false; world.jobs.len()];
    let mut cancelled_live: Vec<u32> = Vec::new();
    let mut samples: Vec<Sample> = Vec::with_capacity(world.jobs.len().min(4096));
    let mut out: Vec<Judgement> = Vec::new();
    let mut running_gpus = 0u64;
    for tick in 0..world.horizon {
        // Departures (natural end or cancel), keeping order.
        if run_idx.iter().any(|&j| world.jobs[j as usize].end <= tick || cancelled[j as usize]) {
            let mut k = 0;
            for i in 0..run_idx.len() {
                let j = run_idx[i] as usize;
                if world.jobs[j].end > tick && !cancelled[j] {
                    // Stable compaction: kept jobs keep their order.
                    run_idx.swap(k, i);
                    running.swap(k, i);
                    prev.swap(k, i);
                    k += 1;
                } else {
                    running_gpus -= world.jobs[j].gpus as u64;
                }
            }
            run_idx.truncate(k);
            running.truncate(k);
            prev.truncate(k);
        }
        for j in world.starting_at(tick) {
            run_idx.push(j as u32);
            running.push(world.jobs[j].facts.clone());
            prev.push(Verdict::Healthy);
            running_gpus += world.jobs[j].gpus as u64;
        }
        let now_s = tick as i64 * TICK_S;
        samples.clear();
        // Cancelled jobs' samples stay in the world until their natural end; skip them.
        cancelled_live.retain(|&j| world.jobs[j as usize].end > tick);
        let tick_samples = world.samples_at(tick);
        // A tick's samples are sorted by job index, so each cancelled job's samples form one
        // run: copy the stretches between those runs.
        let mut from = 0;
        for &j in &cancelled_live {
            let lo = from + tick_samples[from..].partition_point(|c| c.job < j);
            let hi = lo + tick_samples[lo..].partition_point(|c| c.job <= j);
            samples.extend(tick_samples[from..lo].iter().map(|c| world.expand(c, now_s)));
            from = hi;
        }
        samples.extend(tick_samples[from..].iter().map(|c| world.expand(c, now_s)));
        judge.judge(now_s, &running, &samples, &mut out);
        for (i, jd) in out.iter().enumerate() {
            let j = run_idx[i];
            let before = prev[i];
            prev[i] = jd.verdict;
            if (jd.verdict >= Verdict::Alert || before >= Verdict::Alert || tally.is_drained(j))
                && tally.observe(world, tick, j, before, *jd)
            {
                cancelled[j as usize] = true;
                let at = cancelled_live.partition_point(|&x| x < j);
                cancelled_live.insert(at, j);
            }
        }
        tally.job_gpu_ticks += running_gpus;
    }
    tally
}

/// Runs several gpu-reaper policies over the whole of `world` in one pass, and returns one
/// tally per policy, each equal to what [`run`] gives for that policy alone.
///
/// The policies must share their windows (see [`policy::Engine::with_policies`]): one
/// engine checks and windows each sample once, and each policy keeps its own escalation.
/// Each policy's cancels are its own: a job it cancelled is no longer scored for it, and the
/// job leaves the shared engine once every policy has cancelled it. Jobs are judged
/// independently of each other, so a job another policy keeps changes nothing for this one.
///
/// # Errors
/// [`policy::SharedWindowError`] when the policies do not share windows (or there are none).
pub fn run_policies(world: &World, policies: Vec<Policy>) -> Result<Vec<Tally>, policy::SharedWindowError> {
    let np = policies.len();
    let windows_s: Vec<i64> = policies.iter().map(|p| p.config().window.secs()).collect();
    let mut engine = Engine::with_policies(policies, Mode::Observe)?;
    let mut tallies: Vec<Tally> = windows_s
        .iter()
        .map(|&w| Tally {
            recovery_window_s: Some(w),
            ..Tally::new(world)
        })
        .collect();
    let mut findings: Vec<Vec<Finding>> = (0..np).map(|_| Vec::new()).collect();
    // Per policy, per world job: cancelled by that policy.
    let mut cancelled: Vec<Vec<bool>> = vec![vec![false; world.jobs.len()]; np];
    // Per world job: how many policies have cancelled it; it leaves at `np`.
    let mut cancel_count = vec![0usize; world.jobs.len()];
    let mut gone_live: Vec<u32> = Vec::new();
    let mut running: Vec<JobFacts> = Vec::new();
    let mut run_idx: Vec<u32> = Vec::new();
    // Per policy, per running position: last verdict.
    let mut prev: Vec<Vec<Verdict>> = vec![Vec::new(); np];
    let mut running_gpus = vec![0u64; np];
    let mut samples: Vec<Sample> = Vec::with_capacity(world.jobs.len().min(4096));
    for tick in 0..world.horizon {
        // Departures: natural end, or cancelled by every policy.
        if run_idx
            .iter()
            .any(|&j| world.jobs[j as usize].end <= tick || cancel_count[j as usize] == np)
        {
            let mut k = 0;
            for i in 0..run_idx.len() {
                let j = run_idx[i] as usize;
                let ended = world.jobs[j].end <= tick;
                if !ended && cancel_count[j] < np {
                    run_idx.swap(k, i);
                    running.swap(k, i);
                    for p in prev.iter_mut() {
                        p.swap(k, i);
                    }
                    k += 1;
                } else if ended {
                    for (p, rg) in running_gpus.iter_mut().enumerate() {
                        if !cancelled[p][j] {
                            *rg -= world.jobs[j].gpus as u64;
                        }
                    }
                }
            }
            run_idx.truncate(k);
            running.truncate(k);
            for p in prev.iter_mut() {
                p.truncate(k);
            }
        }
        for j in world.starting_at(tick) {
            run_idx.push(j as u32);
            running.push(world.jobs[j].facts.clone());
            for p in prev.iter_mut() {
                p.push(Verdict::Healthy);
            }
            for rg in running_gpus.iter_mut() {
                *rg += world.jobs[j].gpus as u64;
            }
        }
        let now_s = tick as i64 * TICK_S;
        samples.clear();
        // Jobs every policy cancelled keep their samples in the world until their natural
        // end; skip them, as `run` does.
        gone_live.retain(|&j| world.jobs[j as usize].end > tick);
        let tick_samples = world.samples_at(tick);
        let mut from = 0;
        for &j in &gone_live {
            let lo = from + tick_samples[from..].partition_point(|c| c.job < j);
            let hi = lo + tick_samples[lo..].partition_point(|c| c.job <= j);
            samples.extend(tick_samples[from..lo].iter().map(|c| world.expand(c, now_s)));
            from = hi;
        }
        samples.extend(tick_samples[from..].iter().map(|c| world.expand(c, now_s)));
        let obs = Observation {
            jobs: &running,
            samples: &samples,
            scope: Scope::Whole,
            drains: &[],
        };
        engine.step_each(now_s, &obs, &mut findings);
        for p in 0..np {
            let tally = &mut tallies[p];
            // This tick's running GPU count, before its cancels (which `run` removes only
            // from the next tick on).
            tally.job_gpu_ticks += running_gpus[p];
            for (i, f) in findings[p].iter().enumerate() {
                let j = run_idx[i];
                if cancelled[p][j as usize] {
                    continue;
                }
                let jd = Judgement {
                    verdict: f.verdict,
                    signature: f.signature,
                    healthy: policy::Recovery::counts(f),
                };
                let before = prev[p][i];
                prev[p][i] = jd.verdict;
                if (jd.verdict >= Verdict::Alert || before >= Verdict::Alert || tally.is_drained(j))
                    && tally.observe(world, tick, j, before, jd)
                {
                    cancelled[p][j as usize] = true;
                    running_gpus[p] -= world.jobs[j as usize].gpus as u64;
                    cancel_count[j as usize] += 1;
                    if cancel_count[j as usize] == np {
                        let at = gone_live.partition_point(|&x| x < j);
                        gone_live.insert(at, j);
                    }
                }
            }
        }
    }
    Ok(tallies)
}
