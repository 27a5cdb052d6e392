//! Baselines run on the same worlds as the policy, each modelled from its public description
//! (the report says so):
//!
//! * **jds**, job_defense_shield as in its documented example config: evaluated every 15
//!   minutes; a job whose utilisation averages exactly 0 from its start to 120 minutes is
//!   cancelled (warnings at 60 and 105 minutes); after that a sliding 300-minute window
//!   applies. Memory is ignored and a job counts as idle when any one of its GPUs is idle. A
//!   GPU with no sample in the window has no average and does not count as idle.
//! * **reaper-v0.1**, the previous gpu-reaper: peak util below 15 % over 20 minutes with at
//!   least 8 samples; no check that the window is covered or fresh; `[N/A]` read as 0; cancel
//!   after alert then drain. The description gives no stage times; this model uses today's
//!   default ladder (alert at breach, drain after 60 min) and cancels one window (20 min) after
//!   the drain.
//! * **naive-mean**: mean util (missing values skipped) below 15 % over 20 minutes, with the
//!   same ladder as reaper-v0.1.
//! * **oracle**: see [`crate::score::Tally::oracle`].

use crate::drive::{Judge, Judgement};
use policy::{JobFacts, Sample, Verdict};
use std::collections::HashMap;

/// Which baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Baseline {
    /// job_defense_shield's documented example config.
    Jds,
    /// The previous gpu-reaper.
    ReaperV01,
    /// Mean util below the threshold.
    NaiveMean,
    /// Cancels wholly wasted jobs at onset (computed from the ground truth, not run).
    Oracle,
}

impl Baseline {
    /// Every baseline, in report order.
    pub const ALL: [Baseline; 4] = [Baseline::Jds, Baseline::ReaperV01, Baseline::NaiveMean, Baseline::Oracle];

    /// The `policy` column value.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Jds => "jds",
            Baseline::ReaperV01 => "reaper-v0.1",
            Baseline::NaiveMean => "naive-mean",
            Baseline::Oracle => "oracle",
        }
    }

    /// The parameters written to the row's config columns.
    pub fn params(self) -> crate::score::RowParams {
        let mut p = crate::score::RowParams {
            policy: self.name().to_string(),
            config_id: self.name().to_string(),
            ..Default::default()
        };
        match self {
            Baseline::Jds => {
                p.util_threshold_pct = Some(0.0);
                p.window_s = Some(JDS_WINDOW_S);
                p.warmup_s = Some(JDS_FIRST_S);
                p.cancel_after_s = Some(0);
            }
            Baseline::ReaperV01 | Baseline::NaiveMean => {
                p.util_threshold_pct = Some(LADDER_THRESHOLD_PCT);
                p.window_s = Some(LADDER_WINDOW_S);
                p.drain_after_s = Some(LADDER_DRAIN_S);
                p.cancel_after_s = Some(LADDER_CANCEL_S);
            }
            Baseline::Oracle => {}
        }
        p
    }

    /// A judge for this baseline (`None` for the oracle, which is not run).
    pub fn judge(self, gpus_per_node: u16, nodes: usize) -> Option<Box<dyn Judge>> {
        let state = GpuTable::new(gpus_per_node, nodes);
        match self {
            Baseline::Jds => Some(Box::new(Jds {
                gpus: state,
                jobs: HashMap::new(),
            })),
            Baseline::ReaperV01 => Some(Box::new(Ladder {
                gpus: state,
                jobs: HashMap::new(),
                rule: LadderRule::PeakNaAsZero,
            })),
            Baseline::NaiveMean => Some(Box::new(Ladder {
                gpus: state,
                jobs: HashMap::new(),
                rule: LadderRule::Mean,
            })),
            Baseline::Oracle => None,
        }
    }
}

const JDS_EVERY_S: i64 = 15 * 60;
const JDS_WARN_S: i64 = 60 * 60;
const JDS_FIRST_S: i64 = 120 * 60;
const JDS_WINDOW_S: i64 = 300 * 60;
const LADDER_THRESHOLD_PCT: f64 = 15.0;
const LADDER_WINDOW_S: i64 = 20 * 60;
const LADDER_MIN_SAMPLES: usize = 8;
const LADDER_DRAIN_S: i64 = 60 * 60;
const LADDER_CANCEL_S: i64 = LADDER_DRAIN_S + LADDER_WINDOW_S;
const RING: usize = 32;

/// Recent history of one GPU.
#[derive(Clone, Copy)]
struct GpuHist {
    t_s: [i64; RING],
    /// Util, or NaN for `[N/A]`.
    util: [f32; RING],
    head: usize,
    len: usize,
    last_valid_s: i64,
    last_nonzero_s: i64,
}

impl Default for GpuHist {
    fn default() -> Self {
        GpuHist {
            t_s: [0; RING],
            util: [0.0; RING],
            head: 0,
            len: 0,
            last_valid_s: i64::MIN,
            last_nonzero_s: i64::MIN,
        }
    }
}

impl GpuHist {
    fn push(&mut self, s: &Sample) {
        let u = s.util_pct.get().filter(|u| (0.0..=100.0).contains(u));
        self.t_s[self.head] = s.t_s;
        self.util[self.head] = u.map_or(f32::NAN, |u| u as f32);
        self.head = (self.head + 1) % RING;
        self.len = (self.len + 1).min(RING);
        if let Some(u) = u {
            self.last_valid_s = s.t_s;
            if u > 0.0 {
                self.last_nonzero_s = s.t_s;
            }
        }
    }

    /// Samples with `t > since`, newest first.
    fn recent(&self, since: i64) -> impl Iterator<Item = (i64, f32)> + '_ {
        (0..self.len)
            .map(move |k| (self.head + RING - 1 - k) % RING)
            .map(move |i| (self.t_s[i], self.util[i]))
            .take_while(move |&(t, _)| t > since)
    }
}

/// Per-GPU history for the whole cluster, indexed by node × GPUs per node + GPU.
struct GpuTable {
    gpn: usize,
    gpus: Vec<GpuHist>,
}

impl GpuTable {
    fn new(gpus_per_node: u16, nodes: usize) -> GpuTable {
        GpuTable {
            gpn: gpus_per_node as usize,
            gpus: vec![GpuHist::default(); gpus_per_node as usize * nodes],
        }
    }

    fn index(&self, node: u32, gpu: u16) -> Option<usize> {
        let i = node as usize * self.gpn + gpu as usize;
        (i < self.gpus.len() && (gpu as usize) < self.gpn).then_some(i)
    }

    /// Resets the history of a new job's GPUs, then ingests the tick's samples.
    fn update(&mut self, known: &mut HashMap<String, JobMemo>, jobs: &[JobFacts], samples: &[Sample]) {
        for j in jobs {
            if !known.contains_key(j.job_id.as_str()) {
                for g in &j.alloc {
                    if let Some(i) = self.index(g.node.0, g.gpu) {
                        self.gpus[i] = GpuHist::default();
                    }
                }
                known.insert(j.job_id.clone(), JobMemo::default());
            }
        }
        for s in samples {
            if let Some(i) = self.index(s.node.0, s.gpu) {
                self.gpus[i].push(s);
            }
        }
    }
}

#[derive(Clone, Copy, Default)]
struct JobMemo {
    breach_start_s: Option<i64>,
    verdict: Verdict,
}

fn forget_departed(known: &mut HashMap<String, JobMemo>, jobs: &[JobFacts]) {
    if known.len() > 2 * jobs.len() + 64 {
        let live: std::collections::HashSet<&str> = jobs.iter().map(|j| j.job_id.as_str()).collect();
        known.retain(|k, _| live.contains(k.as_str()));
    }
}

/// job_defense_shield's example config.
struct Jds {
    gpus: GpuTable,
    jobs: HashMap<String, JobMemo>,
}

impl Judge for Jds {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        forget_departed(&mut self.jobs, jobs);
        self.gpus.update(&mut self.jobs, jobs, samples);
        out.clear();
        let evaluate = now_s % JDS_EVERY_S == 0;
        for j in jobs {
            let memo = self.jobs.get_mut(j.job_id.as_str()).expect("every running job has a memo");
            if evaluate {
                let age = now_s - j.start_s;
                let since = if age <= JDS_WINDOW_S { j.start_s - 1 } else { now_s - JDS_WINDOW_S };
                // Any one GPU averaging exactly 0 (all its valid samples 0) counts as idle.
                let idle = j.alloc.iter().any(|g| {
                    self.gpus.index(g.node.0, g.gpu).is_some_and(|i| {
                        let h = &self.gpus.gpus[i];
                        h.last_valid_s > since && h.last_nonzero_s <= since
                    })
                });
                memo.verdict = if !idle || age < JDS_WARN_S {
                    Verdict::Healthy
                } else if age < JDS_FIRST_S {
                    Verdict::Alert
                } else {
                    Verdict::Cancel
                };
            }
            out.push(Judgement {
                verdict: memo.verdict,
                signature: None,
                healthy: memo.verdict == Verdict::Healthy,
            });
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LadderRule {
    /// reaper-v0.1: peak util below the threshold on every GPU, ≥ 8 samples per GPU,
    /// `[N/A]` read as 0.
    PeakNaAsZero,
    /// naive-mean: the mean of valid samples over the job's GPUs below the threshold.
    Mean,
}

/// reaper-v0.1 and naive-mean: a breach rule and the alert → drain → cancel ladder.
struct Ladder {
    gpus: GpuTable,
    jobs: HashMap<String, JobMemo>,
    rule: LadderRule,
}

impl Judge for Ladder {
    fn judge(&mut self, now_s: i64, jobs: &[JobFacts], samples: &[Sample], out: &mut Vec<Judgement>) {
        forget_departed(&mut self.jobs, jobs);
        self.gpus.update(&mut self.jobs, jobs, samples);
        out.clear();
        let since = now_s - LADDER_WINDOW_S;
        for j in jobs {
            let breach = match self.rule {
                LadderRule::PeakNaAsZero => j.alloc.iter().all(|g| {
                    self.gpus.index(g.node.0, g.gpu).is_some_and(|i| {
                        let mut n = 0;
                        let mut peak = 0f32;
                        for (_, u) in self.gpus.gpus[i].recent(since) {
                            n += 1;
                            peak = peak.max(if u.is_nan() { 0.0 } else { u });
                        }
                        n >= LADDER_MIN_SAMPLES && (peak as f64) < LADDER_THRESHOLD_PCT
                    })
                }),
                LadderRule::Mean => {
                    let (mut sum, mut n) = (0f64, 0u32);
                    for g in &j.alloc {
                        if let Some(i) = self.gpus.index(g.node.0, g.gpu) {
                            for (_, u) in self.gpus.gpus[i].recent(since) {
                                if !u.is_nan() {
                                    sum += u as f64;
                                    n += 1;
                                }
                            }
                        }
                    }
                    n > 0 && sum / (n as f64) < LADDER_THRESHOLD_PCT
                }
            };
            let memo = self.jobs.get_mut(j.job_id.as_str()).expect("every running job has a memo");
            memo.verdict = if breach {
                let start = *memo.breach_start_s.get_or_insert(now_s);
                let dwell = now_s - start;
                if dwell >= LADDER_CANCEL_S {
                    Verdict::Cancel
                } else if dwell >= LADDER_DRAIN_S {
                    Verdict::Drain
                } else {
                    Verdict::Alert
                }
            } else {
                memo.breach_start_s = None;
                Verdict::Healthy
            };
            out.push(Judgement {
                verdict: memo.verdict,
                signature: None,
                healthy: memo.verdict == Verdict::Healthy,
            });
        }
    }
}
