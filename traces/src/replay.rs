//! The replay driver: runs the policy engine over a [`Trace`] cycle by cycle, as the enforcer
//! would have, and records what it would have done.
//!
//! Cycles run at `interval_s` from the first job start to the last job end. At cycle `now`
//! the running jobs are those with `start_s ≤ now < end_s` (in trace order) and the engine
//! gets the samples with `t_s` in `(now − interval_s, now]`; samples stamped before the first
//! cycle's interval, or after the last cycle, are never delivered and are counted. Stretches
//! with no running job and no sample are skipped (the engine holds no state then, so this
//! changes nothing). The engine runs in [`Mode::Observe`] with [`Scope::Whole`], so a drain
//! counts as confirmed one cycle later and drain/cancel findings are hypothetical.
//!
//! Output: a [`FindingRow`] whenever a job's verdict, signature, cap (what held the verdict
//! below its stages: `power_unknown`, `freeze_undetectable`, `notice` …) or cause (warmup, no
//! breach, an evidence problem by kind, short coverage, breach) changes, its first cycle
//! included, so a hold and the reason behind a verdict never go stale in the file; a [`JobOutcome`] per job, and a safety check: every cycle that gives `drain` or
//! `cancel` is checked for a sample of the job at work within one window before it, which
//! would be a safety bug ([`SafetyViolation`]): a compute reading at or above
//! `util_threshold_pct`, or, for `spin` (whose readings are near 100 % by definition), power
//! above spin's ceiling (`spin_power_frac` of `power.limit`, or `idle_power_w` without one).

use crate::error::TraceError;
use crate::format::write_text;
use crate::score::{JobScore, JobTruth};
use crate::{JobFacts, Trace, Truth};
use policy::{Cause, EngineCounters, Finding, Mode, Observation, Policy, Scope, SignatureId, Verdict};
use std::fmt::Write as _;
use std::path::Path;

/// One row of `findings.csv`: a change of verdict, signature, cap or cause.
#[derive(Clone, Debug, PartialEq)]
pub struct FindingRow {
    /// Cycle time, epoch seconds.
    pub t_s: i64,
    /// Index of the job in [`Trace::jobs`].
    pub job: u32,
    /// The finding (its `job_index` is the position among that cycle's running jobs).
    pub finding: Finding,
    /// [`Finding::reason`] for the job.
    pub reason: String,
}

/// Per-job outcome of a replay (a row of `jobs-summary.csv`).
#[derive(Clone, Debug, PartialEq)]
pub struct JobOutcome {
    /// Index of the job in [`Trace::jobs`].
    pub job: u32,
    /// Cycles the job was evaluated in.
    pub cycles: u64,
    /// Of those, cycles in which the job was younger than `warmup`, so not judged (its
    /// verdict reads `healthy` all the same).
    pub cycles_in_warmup: u64,
    /// Highest verdict reached (ladder order of [`Verdict`]); `None` if never evaluated.
    pub highest: Option<Verdict>,
    /// Signature with the highest verdict (first time it was reached).
    pub highest_signature: Option<SignatureId>,
    /// When the highest verdict was first reached, epoch seconds.
    pub highest_at_s: Option<i64>,
    /// First cycle with verdict alert or above.
    pub first_alert_s: Option<i64>,
    /// First cycle with verdict drain or above.
    pub first_drain_s: Option<i64>,
    /// First cycle with verdict cancel.
    pub first_cancel_s: Option<i64>,
    /// Longest stretch, seconds, over which every GPU of the job read below
    /// `util_threshold_pct` on every sample (see [`longest_quiet_s`]).
    pub longest_quiet_s: i64,
    /// Times the job climbed onto `alert` or above from below it (alert episodes).
    pub alerts: u32,
    /// Times the job climbed onto `drain` or above from below it.
    pub drains: u32,
    /// Cycles giving drain/cancel with a sample at work in the window (see [`SafetyViolation`]).
    pub safety_violations: u32,
    /// Scoring against `truth`, when the trace has it.
    pub score: Option<JobScore>,
    /// Some finding of the job named an exemption (guard 8: it never goes above `watching`).
    pub exempt: bool,
}

/// A drain or cancel given while a sample of the job within one window read at or above the
/// utilisation threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct SafetyViolation {
    /// Cycle time, epoch seconds.
    pub t_s: i64,
    /// Index of the job in [`Trace::jobs`].
    pub job: u32,
    /// The verdict given.
    pub verdict: Verdict,
    /// Time of the busy sample: one with a compute reading at or above `util_threshold_pct`,
    /// or, for a `spin` finding, power above spin's ceiling.
    pub busy_t_s: i64,
    /// Its compute reading, percent (NaN when it has none: a spin sample at working power).
    pub busy_util_pct: f64,
}

/// Everything a replay produces.
#[derive(Clone, Debug, Default)]
pub struct ReplayResult {
    /// Changes of verdict, signature, cap or cause, in cycle order, then job order.
    pub rows: Vec<FindingRow>,
    /// One per trace job, in trace order.
    pub jobs: Vec<JobOutcome>,
    /// Cycles evaluated (skipped empty stretches not counted).
    pub cycles: u64,
    /// Samples stamped at or before the first cycle's interval, never delivered.
    pub samples_before_first_cycle: u64,
    /// Samples stamped after the last cycle, never delivered.
    pub samples_after_last_cycle: u64,
    /// The engine's counters (unattributed samples: no running job holds that GPU).
    pub counters: EngineCounters,
    /// Every drain/cancel cycle with a busy sample in the window. Must be empty.
    pub safety: Vec<SafetyViolation>,
    /// The interval used, seconds.
    pub interval_s: i64,
    /// The trace's sampling period: over its GPUs, the median of each GPU's median gap
    /// between consecutive samples, seconds (`None` without two samples of one GPU).
    pub sample_period_s: Option<i64>,
    /// The policy's `max_sample_gap`, seconds.
    pub max_sample_gap_s: i64,
}

/// See [`ReplayResult::sample_period_s`].
fn typical_sample_period_s(trace: &Trace) -> Option<i64> {
    let mut times: std::collections::BTreeMap<(policy::NodeId, u16), Vec<i64>> = std::collections::BTreeMap::new();
    for s in &trace.samples {
        times.entry((s.node, s.gpu)).or_default().push(s.t_s);
    }
    let mut medians: Vec<i64> = times
        .into_values()
        .filter_map(|mut ts| {
            ts.sort_unstable();
            let mut gaps: Vec<i64> = ts.windows(2).map(|w| w[1].saturating_sub(w[0])).filter(|&g| g > 0).collect();
            gaps.sort_unstable();
            gaps.get(gaps.len() / 2).copied()
        })
        .collect();
    medians.sort_unstable();
    medians.get(medians.len() / 2).copied()
}

/// For each job's samples (as listed in `per_job`), the seconds of GPU time each stands for:
/// its GPU's sampling period, the median gap between that GPU's consecutive samples (an
/// outage only lengthens some gaps, so it does not move the median). A GPU with a single
/// sample takes the median over the trace's GPUs, and a trace with no gap at all takes
/// `fallback_s` (the replay interval). So ground-truth waste does not depend on the replay
/// interval, and ticks without samples carry no truth, as before.
fn sample_periods(trace: &Trace, per_job: &[Vec<u32>], fallback_s: i64) -> Vec<Vec<i64>> {
    use std::collections::BTreeMap;
    let mut per_gpu_median: Vec<BTreeMap<(policy::NodeId, u16), i64>> = Vec::with_capacity(per_job.len());
    let mut all_medians = Vec::new();
    for list in per_job {
        let mut times: BTreeMap<(policy::NodeId, u16), Vec<i64>> = BTreeMap::new();
        for &i in list {
            let s = &trace.samples[i as usize];
            times.entry((s.node, s.gpu)).or_default().push(s.t_s);
        }
        let mut medians = BTreeMap::new();
        for (gpu, mut ts) in times {
            ts.sort_unstable();
            let mut gaps: Vec<i64> = ts.windows(2).map(|w| w[1].saturating_sub(w[0])).filter(|&g| g > 0).collect();
            if !gaps.is_empty() {
                gaps.sort_unstable();
                let m = gaps[gaps.len() / 2];
                medians.insert(gpu, m);
                all_medians.push(m);
            }
        }
        per_gpu_median.push(medians);
    }
    all_medians.sort_unstable();
    let trace_median = all_medians.get(all_medians.len() / 2).copied().unwrap_or(fallback_s);
    per_job
        .iter()
        .zip(&per_gpu_median)
        .map(|(list, medians)| {
            list.iter()
                .map(|&i| {
                    let s = &trace.samples[i as usize];
                    medians.get(&(s.node, s.gpu)).copied().unwrap_or(trace_median)
                })
                .collect()
        })
        .collect()
}

/// The compute reading of a sample, percent, as the engine takes it: `util_pct`, else 0 where
/// `sm_active` is 0; `None` otherwise (SM activity above 0 is only a lower bound of
/// `util_pct`, see [`policy::Sample::sm_active`]).
pub fn compute_pct(s: &policy::Sample) -> Option<f64> {
    s.util_pct.get().or(s.sm_active.get().filter(|x| *x == 0.0))
}

/// Replays `trace` under `policy` at `interval_s` (> 0). Deterministic: the same trace and
/// policy give the same result. The work grows with the time the jobs run divided by
/// `interval_s`; [`crate::read_trace`] refuses traces spanning more than
/// [`crate::format::MAX_SPAN_S`], and times near the ends of `i64` end the walk instead of
/// overflowing.
pub fn replay(trace: &Trace, policy: Policy, interval_s: i64) -> ReplayResult {
    assert!(interval_s > 0, "interval_s must be positive");
    let cfg = policy.config().clone();
    let threshold = cfg.util_threshold_pct;
    let window_s = cfg.window.secs();
    let spin_id = policy::SignatureId::from_name("spin");
    let mut engine = policy::Engine::new(policy, Mode::Observe);
    let n = trace.jobs.len();
    let mut res = ReplayResult {
        interval_s,
        sample_period_s: typical_sample_period_s(trace),
        max_sample_gap_s: cfg.max_sample_gap.secs(),
        ..ReplayResult::default()
    };
    // Per-job sample lists (indices into trace.samples, time-ordered).
    let mut per_job: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, &j) in trace.sample_job.iter().enumerate() {
        per_job[j as usize].push(i as u32);
    }
    let with_truth = trace.has_truth();
    let mut truth: Vec<JobTruth> = trace.jobs.iter().map(|j| JobTruth::new(j.facts.alloc.len())).collect();
    if with_truth {
        let period_s = sample_periods(trace, &per_job, interval_s);
        for (j, list) in per_job.iter().enumerate() {
            let t = &mut truth[j];
            for (&i, &p) in list.iter().zip(&period_s[j]) {
                let s = &trace.samples[i as usize];
                match trace.truth[i as usize] {
                    Some(Truth::Wasted) => t.score.wasted_gpu_h += p as f64 / 3600.0,
                    Some(Truth::Starved) => t.score.starved_gpu_h += p as f64 / 3600.0,
                    _ => {}
                }
                if trace.truth[i as usize] != Some(Truth::Wasted) {
                    t.last_not_wasted_s = Some(t.last_not_wasted_s.map_or(s.t_s, |x| x.max(s.t_s)));
                }
            }
            let onset = list
                .iter()
                .map(|&i| trace.samples[i as usize].t_s)
                .find(|&ts| t.last_not_wasted_s.is_none_or(|l| ts > l));
            t.wasted_tail_onset_s = onset;
            if let Some(o) = onset {
                let end = trace.jobs[j].end_s;
                t.score.oracle_recovered_gpu_h = trace.jobs[j].facts.alloc.len() as f64 * end.saturating_sub(o).max(0) as f64 / 3600.0;
            }
        }
    }
    res.jobs = (0..n)
        .map(|j| JobOutcome {
            job: j as u32,
            cycles: 0,
            cycles_in_warmup: 0,
            highest: None,
            highest_signature: None,
            highest_at_s: None,
            first_alert_s: None,
            first_drain_s: None,
            first_cancel_s: None,
            longest_quiet_s: longest_quiet_s(trace, &per_job[j], threshold, cfg.max_sample_gap.secs()),
            alerts: 0,
            drains: 0,
            safety_violations: 0,
            score: None,
            exempt: false,
        })
        .collect();
    if n == 0 {
        res.samples_after_last_cycle = trace.samples.len() as u64;
        return res;
    }
    let first_s = trace.jobs[0].facts.start_s;
    let last_end_s = trace.jobs.iter().map(|j| j.end_s).max().unwrap_or(first_s);
    let samples = &trace.samples;
    let mut si = samples.partition_point(|s| s.t_s <= first_s.saturating_sub(interval_s));
    res.samples_before_first_cycle = si as u64;
    let mut next_job = 0usize;
    let mut running: Vec<u32> = Vec::new();
    let mut facts: Vec<JobFacts> = Vec::new();
    // What a job's last row said: a new row when any of these changes (see the module doc).
    #[allow(clippy::type_complexity)]
    let mut prev: Vec<Option<(Verdict, Option<SignatureId>, Option<policy::Cap>, Cause)>> = vec![None; n];
    let mut out: Vec<Finding> = Vec::new();
    let mut now = first_s;
    while now <= last_end_s {
        let mut changed = false;
        while next_job < n && trace.jobs[next_job].facts.start_s <= now {
            running.push(next_job as u32);
            next_job += 1;
            changed = true;
        }
        let before = running.len();
        running.retain(|&j| trace.jobs[j as usize].end_s > now);
        changed |= running.len() != before;
        let lo = si;
        while si < samples.len() && samples[si].t_s <= now {
            si += 1;
        }
        if running.is_empty() && lo == si {
            // Nothing runs and nothing arrives: jump to the cycle at or after the next start.
            if next_job >= n {
                break;
            }
            let next_start = trace.jobs[next_job].facts.start_s;
            let k = (i128::from(next_start) - i128::from(first_s) + i128::from(interval_s) - 1).div_euclid(i128::from(interval_s));
            let jump_to = i64::try_from(i128::from(first_s) + k * i128::from(interval_s)).unwrap_or(i64::MAX);
            if jump_to > now.saturating_add(interval_s) {
                // Samples in (now, jump_to − interval] would reach an engine with no jobs.
                let skip_to = samples.partition_point(|s| s.t_s <= jump_to.saturating_sub(interval_s));
                res.counters.unattributed_samples += (skip_to.max(si) - si) as u64;
                si = skip_to.max(si);
                now = jump_to;
                continue;
            }
        }
        if changed {
            facts.clear();
            facts.extend(running.iter().map(|&j| trace.jobs[j as usize].facts.clone()));
        }
        let obs = Observation {
            jobs: &facts,
            samples: &samples[lo..si],
            scope: Scope::Whole,
            drains: &[],
        };
        // Truth seen up to now.
        if with_truth {
            for (i, s) in samples.iter().enumerate().take(si).skip(lo) {
                let j = trace.sample_job[i] as usize;
                if let Some(slot) = trace.jobs[j].facts.alloc.iter().position(|g| g.node == s.node && g.gpu == s.gpu) {
                    truth[j].current[slot] = trace.truth[i];
                }
            }
        }
        engine.step(now, &obs, &mut out);
        res.cycles += 1;
        for f in &out {
            let j = running[f.job_index as usize] as usize;
            let o = &mut res.jobs[j];
            o.cycles += 1;
            o.cycles_in_warmup += u64::from(f.cause == Cause::Warmup);
            o.exempt |= f.exempt.is_some();
            let key = (f.verdict, f.signature, f.cap, f.cause);
            let old = prev[j];
            if o.highest.is_none_or(|h| f.verdict > h) {
                o.highest = Some(f.verdict);
                o.highest_signature = f.signature;
                o.highest_at_s = Some(now);
            }
            if f.verdict >= Verdict::Alert && o.first_alert_s.is_none() {
                o.first_alert_s = Some(now);
            }
            if f.verdict >= Verdict::Drain && o.first_drain_s.is_none() {
                o.first_drain_s = Some(now);
            }
            if f.verdict == Verdict::Cancel && o.first_cancel_s.is_none() {
                o.first_cancel_s = Some(now);
            }
            if f.verdict >= Verdict::Drain {
                let busy = if f.signature == spin_id {
                    // Spin reads near 100 % by definition: at work means power above its ceiling
                    // (trial 13: every correct spin drain counted as a violation).
                    spin_at_work(trace, &per_job[j], now, window_s, &cfg)
                } else {
                    busy_sample(trace, &per_job[j], now, window_s, threshold)
                };
                if let Some(v) = busy {
                    o.safety_violations += 1;
                    res.safety.push(SafetyViolation {
                        t_s: now,
                        job: j as u32,
                        verdict: f.verdict,
                        busy_t_s: v.0,
                        busy_util_pct: v.1,
                    });
                }
            }
            let was = old.map_or(Verdict::Healthy, |p| p.0);
            if f.verdict >= Verdict::Alert && was < Verdict::Alert {
                o.alerts += 1;
            }
            if f.verdict >= Verdict::Drain && was < Verdict::Drain {
                o.drains += 1;
            }
            if with_truth {
                truth[j].on_cycle(policy::Recovery::counts(f), now, cfg.window.secs());
                for rung in [Verdict::Alert, Verdict::Drain, Verdict::Cancel] {
                    if f.verdict >= rung && was < rung {
                        truth[j].on_rung(rung, now, trace.jobs[j].end_s);
                    }
                }
            }
            if old != Some(key) {
                prev[j] = Some(key);
                res.rows.push(FindingRow {
                    t_s: now,
                    job: j as u32,
                    finding: f.clone(),
                    reason: f.reason(&facts[f.job_index as usize]),
                });
            }
        }
        let Some(next) = now.checked_add(interval_s) else {
            break;
        };
        now = next;
    }
    res.samples_after_last_cycle = (samples.len() - si) as u64;
    let c = engine.counters();
    res.counters.unattributed_samples += c.unattributed_samples;
    res.counters.ignored_confirmations += c.ignored_confirmations;
    if with_truth {
        for (o, t) in res.jobs.iter_mut().zip(truth) {
            o.score = Some(t.score);
        }
    }
    res
}

/// The newest sample of the job in `[now − window_s, now]` drawing more power than `spin`
/// allows (`spin_power_frac` of its `power.limit`, or `idle_power_w` without one), with its
/// compute reading (NaN when it has none).
fn spin_at_work(trace: &Trace, list: &[u32], now: i64, window_s: i64, cfg: &policy::PolicyConfig) -> Option<(i64, f64)> {
    let lo = list.partition_point(|&i| trace.samples[i as usize].t_s < now.saturating_sub(window_s));
    let hi = list.partition_point(|&i| trace.samples[i as usize].t_s <= now);
    list[lo..hi].iter().rev().find_map(|&i| {
        let s = &trace.samples[i as usize];
        let ceiling_w = s.power_limit_w.get().map_or(cfg.idle_power_w, |l| cfg.spin_power_frac * l);
        s.power_w
            .get()
            .filter(|&p| p > ceiling_w)
            .map(|_| (s.t_s, compute_pct(s).unwrap_or(f64::NAN)))
    })
}

/// The newest sample of the job in `[now − window_s, now]` reading at or above `threshold`.
fn busy_sample(trace: &Trace, list: &[u32], now: i64, window_s: i64, threshold: f64) -> Option<(i64, f64)> {
    let lo = list.partition_point(|&i| trace.samples[i as usize].t_s < now.saturating_sub(window_s));
    let hi = list.partition_point(|&i| trace.samples[i as usize].t_s <= now);
    list[lo..hi].iter().rev().find_map(|&i| {
        let s = &trace.samples[i as usize];
        compute_pct(s).filter(|&u| u >= threshold).map(|u| (s.t_s, u))
    })
}

/// The longest quiet stretch of a job, seconds: over consecutive sample times of the job, each
/// with every reading present below `threshold` (and at least one reading), with no two
/// consecutive times more than `max_gap_s` apart. Its length is last time − first time, so a
/// single quiet sample counts 0. A sample with no compute reading ends the stretch: unknown
/// is not quiet.
pub fn longest_quiet_s(trace: &Trace, list: &[u32], threshold: f64, max_gap_s: i64) -> i64 {
    let mut best = 0i64;
    let mut run_start: Option<i64> = None;
    let mut last_t: Option<i64> = None;
    let mut i = 0;
    while i < list.len() {
        let t = trace.samples[list[i] as usize].t_s;
        let mut quiet = true;
        while i < list.len() && trace.samples[list[i] as usize].t_s == t {
            if compute_pct(&trace.samples[list[i] as usize]).is_none_or(|u| u >= threshold) {
                quiet = false;
            }
            i += 1;
        }
        let contiguous = last_t.is_some_and(|l| t.saturating_sub(l) <= max_gap_s);
        if quiet {
            let start = match run_start {
                Some(s) if contiguous => s,
                _ => t,
            };
            run_start = Some(start);
            best = best.max(t.saturating_sub(start));
        } else {
            run_start = None;
        }
        last_t = Some(t);
    }
    best
}

/// Name of a finding's cause for CSV: `warmup`, `no_breach`, `evidence:<problem>`,
/// `short_coverage`, `breach`.
pub fn cause_name(c: Cause) -> String {
    match c {
        Cause::Warmup => "warmup".into(),
        Cause::NoBreach => "no_breach".into(),
        Cause::Evidence(p) => format!("evidence:{}", p.as_str()),
        Cause::ShortCoverage => "short_coverage".into(),
        Cause::Breach => "breach".into(),
    }
}

/// Columns of `findings.csv`.
pub const FINDINGS_COLUMNS: [&str; 28] = [
    "t_s",
    "job_id",
    "verdict",
    "signature",
    "reason",
    "cause",
    "cap",
    "dwell_s",
    "wasted_gpu_h",
    "hypothetical",
    "exempt",
    "window_start_s",
    "window_end_s",
    "gpus_allocated",
    "gpus_observed",
    "samples_min_per_gpu",
    "samples_max_per_gpu",
    "invalid_samples",
    "late_samples",
    "frozen_gpus",
    "freeze_undetectable_gpus",
    "peak_util_pct",
    "mean_util_pct",
    "mem_used_mean_mib",
    "mem_held_gpus",
    "power_mean_w",
    "procs_unknown",
    "wasted_gpus",
];

/// Columns of `jobs-summary.csv`. `cycles_in_warmup` equal to `cycles` (above 0) marks a job
/// never judged: its `highest_verdict` reads `healthy` only because warmup does (operator
/// trial 13: the CSV could not tell it from a job judged healthy).
pub const SUMMARY_COLUMNS: [&str; 26] = [
    "job_id",
    "gpus",
    "start_s",
    "end_s",
    "cycles",
    "cycles_in_warmup",
    "highest_verdict",
    "signature",
    "highest_at_s",
    "first_alert_s",
    "first_drain_s",
    "first_cancel_s",
    "longest_quiet_s",
    "alerts",
    "drains",
    "safety_violations",
    "wasted_gpu_h",
    "starved_gpu_h",
    "true_alerts",
    "false_alerts",
    "true_drains",
    "false_drains",
    "cancel",
    "recovered_gpu_h",
    "oracle_recovered_gpu_h",
    "scored",
];

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map_or_else(String::new, |v| v.to_string())
}

fn rounded(x: f64) -> String {
    // Six decimals keep files stable and readable; the values are estimates.
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Writes `findings.csv` and `jobs-summary.csv` into `out` (created if absent).
pub fn write_replay(out: &Path, trace: &Trace, res: &ReplayResult) -> Result<(), TraceError> {
    std::fs::create_dir_all(out).map_err(|e| TraceError::io(out, e))?;
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |p: &Path| {
        let p = p.to_path_buf();
        move |e: csv::Error| TraceError::io(p.clone(), std::io::Error::other(e))
    };
    let fpath = out.join("findings.csv");
    w.write_record(FINDINGS_COLUMNS).map_err(err(&fpath))?;
    for r in &res.rows {
        let f = &r.finding;
        let e = &f.evidence;
        w.write_record([
            r.t_s.to_string(),
            trace.jobs[r.job as usize].facts.job_id.clone(),
            f.verdict.as_str().into(),
            f.signature_name().into(),
            r.reason.clone(),
            cause_name(f.cause),
            f.cap.map_or("", |c| c.as_str()).into(),
            f.dwell_s.to_string(),
            rounded(f.wasted_gpu_h),
            f.hypothetical.to_string(),
            f.exempt.as_deref().unwrap_or_default().to_string(),
            e.window_start_s.to_string(),
            e.window_end_s.to_string(),
            e.gpus_allocated.to_string(),
            e.gpus_observed.to_string(),
            e.samples_min_per_gpu.to_string(),
            e.samples_max_per_gpu.to_string(),
            e.invalid_samples.to_string(),
            e.late_samples.to_string(),
            e.frozen_gpus.to_string(),
            e.freeze_undetectable_gpus.to_string(),
            rounded(e.peak_util_pct),
            rounded(e.mean_util_pct),
            e.mem_used_mean_mib.map_or_else(String::new, rounded),
            e.mem_held_gpus.to_string(),
            e.power_mean_w.map_or_else(String::new, rounded),
            e.procs_unknown.to_string(),
            e.wasted_gpus.to_string(),
        ])
        .map_err(err(&fpath))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| TraceError::io(&fpath, std::io::Error::other(e.to_string())))?;
    write_text(&fpath, &String::from_utf8_lossy(&bytes))?;

    let spath = out.join("jobs-summary.csv");
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(SUMMARY_COLUMNS).map_err(err(&spath))?;
    for o in &res.jobs {
        let j = &trace.jobs[o.job as usize];
        let sc = o.score.as_ref();
        let s = |f: &dyn Fn(&JobScore) -> String| sc.map_or_else(String::new, f);
        w.write_record([
            j.facts.job_id.clone(),
            j.facts.alloc.len().to_string(),
            j.facts.start_s.to_string(),
            j.end_s.to_string(),
            o.cycles.to_string(),
            o.cycles_in_warmup.to_string(),
            opt(o.highest.map(Verdict::as_str)),
            o.highest
                .map_or(String::new(), |_| o.highest_signature.map_or("none", SignatureId::name).to_string()),
            opt(o.highest_at_s),
            opt(o.first_alert_s),
            opt(o.first_drain_s),
            opt(o.first_cancel_s),
            o.longest_quiet_s.to_string(),
            o.alerts.to_string(),
            o.drains.to_string(),
            o.safety_violations.to_string(),
            s(&|x| rounded(x.wasted_gpu_h)),
            s(&|x| rounded(x.starved_gpu_h)),
            s(&|x| x.true_alerts.to_string()),
            s(&|x| x.false_alerts.to_string()),
            s(&|x| x.true_drains.to_string()),
            s(&|x| x.false_drains.to_string()),
            s(&|x| match x.cancel_correct {
                None => "none".into(),
                Some(true) => "correct".into(),
                Some(false) => "false".into(),
            }),
            s(&|x| rounded(x.recovered_gpu_h)),
            s(&|x| rounded(x.oracle_recovered_gpu_h)),
            sc.is_some().to_string(),
        ])
        .map_err(err(&spath))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| TraceError::io(&spath, std::io::Error::other(e.to_string())))?;
    write_text(&spath, &String::from_utf8_lossy(&bytes))?;
    Ok(())
}

/// Pairs of jobs (their ids, in trace order) whose allocations share a GPU while both run
/// (`[start_s, end_s)` overlapping): the engine attributes such a GPU to neither (trial 7: the
/// replay dropped their samples without saying why).
pub fn overlapping_allocations(trace: &Trace) -> Vec<(String, String)> {
    let mut by_gpu: std::collections::BTreeMap<(u32, u16), Vec<usize>> = std::collections::BTreeMap::new();
    for (i, j) in trace.jobs.iter().enumerate() {
        for g in &j.facts.alloc {
            by_gpu.entry((g.node.0, g.gpu)).or_default().push(i);
        }
    }
    let mut pairs = std::collections::BTreeSet::new();
    for jobs in by_gpu.values() {
        for (k, &a) in jobs.iter().enumerate() {
            for &b in &jobs[k + 1..] {
                let (ja, jb) = (&trace.jobs[a], &trace.jobs[b]);
                if a != b && ja.facts.start_s < jb.end_s && jb.facts.start_s < ja.end_s {
                    pairs.insert((a.min(b), a.max(b)));
                }
            }
        }
    }
    pairs
        .into_iter()
        .map(|(a, b)| (trace.jobs[a].facts.job_id.clone(), trace.jobs[b].facts.job_id.clone()))
        .collect()
}

/// A short plain-text summary of a replay for the terminal: cycles, verdict counts, sample
/// accounting (with a warning for jobs that hold one GPU at the same time), safety check and,
/// with truth, the score totals.
pub fn summary_text(trace: &Trace, res: &ReplayResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "replay: {} jobs, {} samples, {} cycles at {} s, {} finding rows",
        trace.jobs.len(),
        trace.samples.len(),
        res.cycles,
        res.interval_s,
        res.rows.len()
    );
    // Per key: jobs, and of them exempt.
    let mut counts: std::collections::BTreeMap<&str, (u32, u32)> = std::collections::BTreeMap::new();
    for o in &res.jobs {
        // A job seen only in warmup was never judged, though its verdict reads healthy (trial
        // 11: a trace of jobs shorter than warmup read "healthy 50").
        let key = match o.highest {
            None => "not evaluated",
            Some(Verdict::Healthy) if o.cycles > 0 && o.cycles_in_warmup == o.cycles => "in warmup throughout (not judged)",
            Some(v) => v.as_str(),
        };
        let c = counts.entry(key).or_insert((0, 0));
        c.0 += 1;
        c.1 += u32::from(o.exempt);
    }
    // Operator trial 18: the Alibaba excerpt read "watching 8" without a word that all 8 were
    // exempt (held at watching by guard 8, not short of evidence).
    let line: Vec<String> = counts
        .iter()
        .map(|(k, (n, ex))| match *ex {
            0 => format!("{k} {n}"),
            ex if ex == *n => format!("{k} {n} (all exempt: held at watching)"),
            ex => format!("{k} {n} ({ex} exempt: held at watching)"),
        })
        .collect();
    let _ = writeln!(s, "highest verdict per job: {}", line.join(", "));
    let _ = writeln!(
        s,
        "samples never delivered: {} before the first cycle, {} after the last; unattributed: {}",
        res.samples_before_first_cycle, res.samples_after_last_cycle, res.counters.unattributed_samples
    );
    // Trial 11: a log written every 5 minutes against a 3-minute gap left every job
    // insufficient_evidence, with nothing to say why.
    if let Some(p) = res.sample_period_s.filter(|p| *p > res.max_sample_gap_s) {
        let _ = writeln!(
            s,
            "warning: the trace's GPUs were sampled about every {p} s, more than the policy's max_sample_gap ({} s): every window has holes, so jobs read insufficient_evidence (gap, stale); replay with a policy whose max_sample_gap is at least twice the sampling period, or log more often",
            res.max_sample_gap_s
        );
    }
    let overlaps = overlapping_allocations(trace);
    if !overlaps.is_empty() {
        let shown: Vec<String> = overlaps.iter().take(5).map(|(a, b)| format!("{a} and {b}")).collect();
        let _ = writeln!(
            s,
            "warning: {} of jobs {} the same GPU at the same time in the trace (e.g. {}); a GPU two running jobs claim is no job's evidence, so its samples there are unattributed and both jobs see a gap",
            if overlaps.len() == 1 { "1 pair".to_string() } else { format!("{} pairs", overlaps.len()) },
            if overlaps.len() == 1 { "holds" } else { "hold" },
            shown.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "safety check (no drain/cancel within one window after a sample at work: a reading at or above the threshold, or for spin power above its ceiling): {}",
        if res.safety.is_empty() {
            "passed".to_string()
        } else {
            format!("FAILED on {} cycles", res.safety.len())
        }
    );
    // Operator trial 20: the replay judges a job whole, on all its nodes, as a central
    // enforcer would; a per-node enforcer holds multi-node jobs and het-job components at
    // alert (guard 9), so their drains and cancels here are ones it does not make.
    let spans = |o: &JobOutcome| {
        let j = &trace.jobs[o.job as usize];
        let first = j.facts.alloc.first().map(|g| g.node);
        j.facts.alloc.iter().any(|g| Some(g.node) != first) || j.facts.job_id.contains('+')
    };
    let (multi_drains, multi_cancels) = res.jobs.iter().filter(|o| spans(o)).fold((0, 0), |(d, c), o| {
        (
            d + usize::from(o.first_drain_s.is_some()),
            c + usize::from(o.first_cancel_s.is_some()),
        )
    });
    if multi_drains + multi_cancels > 0 {
        let _ = writeln!(
            s,
            "note: of the jobs drained, {multi_drains} span more than one node or are het-job components (job id with '+'), and {multi_cancels} of those are cancelled: this replay judges each job whole, as one enforcer reading every node would; a per-node enforcer (`enforcer run` on each node) holds such jobs at alert and never drains or cancels them"
        );
    }
    if !trace.has_truth() {
        // Operator trial 18: a replay of real telemetry (which never has a truth column)
        // reported no GPU-hours at all. What the policy's verdicts would do can still be
        // counted; whether they are right cannot.
        let cancels: Vec<&JobOutcome> = res.jobs.iter().filter(|o| o.first_cancel_s.is_some()).collect();
        let freed_gpu_h: f64 = cancels
            .iter()
            .map(|o| {
                let j = &trace.jobs[o.job as usize];
                let t = o.first_cancel_s.unwrap_or(j.end_s);
                j.facts.alloc.len() as f64 * j.end_s.saturating_sub(t).max(0) as f64 / 3600.0
            })
            .sum();
        let drains = res.jobs.iter().filter(|o| o.first_drain_s.is_some()).count();
        let alerts = res.jobs.iter().filter(|o| o.first_alert_s.is_some()).count();
        let _ = writeln!(
            s,
            "unscored (the trace has no truth column): jobs the policy alerts on {alerts}, drains {drains}, cancels {}; the cancels free {} GPU-h between each cancel and the job's recorded end (an upper bound on what they recover: it counts the job's GPUs as held to that end, and whether each cancel was right is for you to check in findings.csv)",
            cancels.len(),
            rounded(freed_gpu_h)
        );
    }
    if trace.has_truth() {
        let mut t = JobScore::default();
        let (mut cancels, mut false_cancels) = (0, 0);
        for sc in res.jobs.iter().filter_map(|o| o.score.as_ref()) {
            t.wasted_gpu_h += sc.wasted_gpu_h;
            t.true_alerts += sc.true_alerts;
            t.false_alerts += sc.false_alerts;
            t.false_drains += sc.false_drains;
            t.recovered_gpu_h += sc.recovered_gpu_h;
            t.oracle_recovered_gpu_h += sc.oracle_recovered_gpu_h;
            match sc.cancel_correct {
                Some(true) => cancels += 1,
                Some(false) => false_cancels += 1,
                None => {}
            }
        }
        let _ = writeln!(
            s,
            "score: wasted {} GPU-h, recovered {} GPU-h (oracle {}), correct cancels {cancels}, false cancels {false_cancels}, false drains {}, alerts {} true / {} false",
            rounded(t.wasted_gpu_h),
            rounded(t.recovered_gpu_h),
            rounded(t.oracle_recovered_gpu_h),
            t.false_drains,
            t.true_alerts,
            t.false_alerts
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spin check finds a sample at working power in the window, and only there: above
    /// `spin_power_frac` of its limit, or above `idle_power_w` without one.
    #[test]
    fn spin_at_work_is_power_above_spins_ceiling() {
        let cfg = policy::PolicyConfig::default();
        let at = |t_s: i64, power_w: f64, limit_w: Option<f64>| policy::Sample {
            t_s,
            util_pct: 100.0.into(),
            power_w: power_w.into(),
            power_limit_w: limit_w.map_or(policy::Reading::MISSING, Into::into),
            ..Default::default()
        };
        let mut trace = Trace {
            samples: vec![at(60, 70.0, Some(400.0)), at(120, 119.0, Some(400.0)), at(180, 99.0, None)],
            ..Default::default()
        };
        let list = [0u32, 1, 2];
        // 30 % of 400 W is 120 W; without a limit the ceiling is idle_power_w (100 W).
        assert_eq!(spin_at_work(&trace, &list, 180, 1200, &cfg), None);
        trace.samples[1].power_w = 121.0.into();
        assert_eq!(spin_at_work(&trace, &list, 180, 1200, &cfg), Some((120, 100.0)));
        trace.samples[2].power_w = 101.0.into();
        assert_eq!(spin_at_work(&trace, &list, 180, 1200, &cfg), Some((180, 100.0)));
        // Outside the window: not seen.
        assert_eq!(spin_at_work(&trace, &list, 180 + 1200, 1100, &cfg), None);
    }
}
