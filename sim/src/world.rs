//! The compact in-memory form of one generated workload: jobs with their phase scripts and
//! ground truth, and every GPU sample of every tick in 24 bytes. One `World` is generated per
//! (workload, seed, days) and shared read-only by every policy configuration of a sweep.

use policy::{JobFacts, NodeTable, Reading, Sample};
use traces::Truth;

/// Seconds per tick: one sampling interval (issue 3: 60 s by default).
pub const TICK_S: i64 = 60;

/// What a job is doing during a phase. Every GPU of the job that is used follows the phase;
/// unused GPUs of a partial job are idle throughout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PhaseKind {
    /// Staging data at the start: 0 % util (productive).
    Staging,
    /// Compute (productive).
    Compute,
    /// Checkpoint stall: memory held, 0 % util (productive).
    Checkpoint,
    /// Eval or CPU phase: low util (productive).
    Eval,
    /// Quiet period of a bursty RL or eval job: near 0 % util, memory held (productive).
    Quiet,
    /// Brief spin waiting on a straggler: high util at idle power (productive).
    BriefSpin,
    /// Starved compute: low but nonzero util (`starved`).
    Starved,
    /// Hung, 0 % util with memory held, until the time limit (`wasted`).
    Hung,
    /// Hung spinning: high util at flat near-idle power, until the time limit (`wasted`).
    Spin,
    /// The process exited; the allocation is held (`wasted`).
    Idle,
}

impl PhaseKind {
    /// Ground truth for a used GPU in this phase.
    pub fn truth(self) -> Truth {
        match self {
            PhaseKind::Starved => Truth::Starved,
            PhaseKind::Hung | PhaseKind::Spin | PhaseKind::Idle => Truth::Wasted,
            _ => Truth::Productive,
        }
    }
}

/// One phase of a job's script, over ticks `[start, end)` (absolute tick numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    /// First tick.
    pub start: u32,
    /// One past the last tick.
    pub end: u32,
    /// What the job does.
    pub kind: PhaseKind,
}

/// How a job ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Completes and releases its GPUs.
    Complete,
    /// Fails and releases its GPUs.
    Fail,
    /// Hangs with memory held until the time limit.
    Hung,
    /// Hangs spinning until the time limit.
    Spin,
    /// Goes idle (process exits) until the time limit.
    Idle,
}

/// One simulated job.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// Slurm facts handed to the policy; `start_s = start × 60`.
    pub facts: JobFacts,
    /// Index of its kind in the workload's `kinds`.
    pub kind: u16,
    /// First tick the job holds its GPUs.
    pub start: u32,
    /// Tick at which it releases them (exclusive); may lie beyond the horizon.
    pub end: u32,
    /// Time limit, ticks.
    pub time_limit: u32,
    /// How it ends.
    pub outcome: Outcome,
    /// Allocated GPUs; equals `facts.alloc.len()`.
    pub gpus: u16,
    /// GPUs it uses: slots `0..used` of the allocation; the rest are never used (partial job).
    pub used: u16,
    /// GPUs of the job's nodes it does not hold: what a drain of its nodes withholds.
    pub drain_extra_gpus: u16,
    /// The phase script, contiguous over `[start, end)`.
    pub phases: Vec<Phase>,
    /// First tick from which every GPU is `wasted` until the end, if any.
    pub wholly_wasted_from: Option<u32>,
}

impl SimJob {
    /// The phase at `tick` (clamped to the script).
    pub fn phase_at(&self, tick: u32) -> PhaseKind {
        let i = self.phases.partition_point(|p| p.end <= tick);
        self.phases.get(i).or(self.phases.last()).map_or(PhaseKind::Compute, |p| p.kind)
    }

    /// Ground truth of allocation slot `slot` at `tick`.
    pub fn truth_at(&self, tick: u32, slot: usize) -> Truth {
        if slot >= self.used as usize {
            Truth::Wasted
        } else {
            self.phase_at(tick).truth()
        }
    }

    /// True when some GPU of the job is `wasted` or `starved` at `tick` (a true alert).
    pub fn nonproductive_at(&self, tick: u32) -> bool {
        self.used < self.gpus || self.phase_at(tick).truth() != Truth::Productive
    }

    /// True when every GPU of the allocation (`facts.alloc`) is on one node: a job a per-node
    /// enforcer can drain and cancel (it holds a multi-node job at alert).
    pub fn single_node(&self) -> bool {
        self.facts.alloc.windows(2).all(|w| w[0].node == w[1].node)
    }

    /// True when every GPU is `wasted` at `tick` and stays so until the job ends (a correct
    /// cancel or a true drain).
    pub fn wholly_wasted_at(&self, tick: u32) -> bool {
        self.wholly_wasted_from.is_some_and(|w| tick >= w)
    }

    /// Onset of the non-productive episode that contains `tick`: the job's start for a
    /// partial job, else the start of the run of non-productive phases containing `tick`.
    pub fn episode_onset(&self, tick: u32) -> u32 {
        if self.used < self.gpus {
            return self.start;
        }
        let mut i = self
            .phases
            .partition_point(|p| p.end <= tick)
            .min(self.phases.len().saturating_sub(1));
        while i > 0 && self.phases[i - 1].kind.truth() != Truth::Productive {
            i -= 1;
        }
        self.phases.get(i).map_or(self.start, |p| p.start)
    }

    /// End of the last checkpoint stall completed by `tick`, or the job's start: the work lost
    /// by cancelling at `tick` is GPUs × (`tick` − this).
    pub fn last_checkpoint(&self, tick: u32) -> u32 {
        self.phases
            .iter()
            .filter(|p| p.kind == PhaseKind::Checkpoint && p.end <= tick)
            .map(|p| p.end)
            .next_back()
            .unwrap_or(self.start)
    }
}

/// A sample's missing fields, as bit flags in [`CompactSample::flags`].
pub mod na {
    /// `utilization.gpu` is `[N/A]`.
    pub const UTIL: u8 = 1;
    /// `memory.used` is `[N/A]`.
    pub const MEM: u8 = 2;
    /// `power.draw` is `[N/A]`.
    pub const POWER: u8 = 4;
    /// The process count is unknown (the exporter does not report it).
    pub const PROCS: u8 = 8;
}

/// One GPU sample in 24 bytes. `memory.total` and `power.limit` are the cluster's.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CompactSample {
    /// Index of the job in [`World::jobs`].
    pub job: u32,
    /// `memory.used`, MiB.
    pub mem_used_mib: u32,
    /// `power.draw`, watts, two decimals (as nvidia-smi prints it).
    pub power_w: f64,
    /// Node id (index into [`World::nodes`]).
    pub node: u16,
    /// GPU index on the node.
    pub gpu: u8,
    /// `utilization.gpu`, integer percent.
    pub util_pct: u8,
    /// Compute processes on the GPU.
    pub procs: u8,
    /// Missing fields, see [`na`].
    pub flags: u8,
}

/// One generated workload: the jobs, every sample, and the ground truth.
///
/// Invariants: `jobs` is sorted by (`start`, `job_id`) and job ids increase with the index;
/// `samples` is sorted by (tick, job index, allocation slot); `tick_offsets[t]..tick_offsets[t +
/// 1]` are the samples of tick `t` (stamped `t × 60` s); `start_offsets` likewise indexes the
/// jobs that start at each tick. A job is running at tick `t` when `start ≤ t < end`.
#[derive(Clone, Debug)]
pub struct World {
    /// Workload name.
    pub workload: String,
    /// Seed it was generated from.
    pub seed: u64,
    /// Simulated span, ticks.
    pub horizon: u32,
    /// Node names (`node001…`), ids dense from 0.
    pub nodes: NodeTable,
    /// GPUs per node.
    pub gpus_per_node: u16,
    /// `memory.total`, MiB.
    pub mem_total_mib: f64,
    /// `power.limit`, W.
    pub power_limit_w: f64,
    /// Workload kind names, indexed by [`SimJob::kind`].
    pub kind_names: Vec<String>,
    /// The jobs.
    pub jobs: Vec<SimJob>,
    /// Per tick, the first index into `samples`; length `horizon + 1`.
    pub tick_offsets: Vec<u32>,
    /// Per tick, the first index into `jobs` of the jobs starting then; length `horizon + 1`.
    pub start_offsets: Vec<u32>,
    /// Every sample.
    pub samples: Vec<CompactSample>,
}

impl World {
    /// The samples of tick `t`.
    pub fn samples_at(&self, t: u32) -> &[CompactSample] {
        &self.samples[self.tick_offsets[t as usize] as usize..self.tick_offsets[t as usize + 1] as usize]
    }

    /// Indices of the jobs starting at tick `t`.
    pub fn starting_at(&self, t: u32) -> std::ops::Range<usize> {
        self.start_offsets[t as usize] as usize..self.start_offsets[t as usize + 1] as usize
    }

    /// Expands a compact sample into the policy's [`Sample`].
    #[inline]
    pub fn expand(&self, c: &CompactSample, t_s: i64) -> Sample {
        let f = c.flags;
        Sample {
            t_s,
            node: policy::NodeId(c.node as u32),
            gpu: c.gpu as u16,
            util_pct: (f & na::UTIL == 0).then_some(c.util_pct as f64).into(),
            mem_used_mib: (f & na::MEM == 0).then_some(c.mem_used_mib as f64).into(),
            mem_total_mib: self.mem_total_mib.into(),
            power_w: (f & na::POWER == 0).then_some(c.power_w).into(),
            power_limit_w: self.power_limit_w.into(),
            procs: (f & na::PROCS == 0).then_some(c.procs as u32),
            sm_active: Reading::MISSING,
        }
    }

    /// Job-GPU-ticks: the sum over jobs of allocated GPUs × ticks held within the horizon.
    pub fn job_gpu_ticks(&self) -> u64 {
        self.jobs
            .iter()
            .map(|j| j.gpus as u64 * (j.end.min(self.horizon) - j.start) as u64)
            .sum()
    }

    /// GPU-ticks labelled `wasted` within the horizon.
    pub fn wasted_gpu_ticks(&self) -> u64 {
        self.jobs.iter().map(|j| self.truth_ticks(j, Truth::Wasted)).sum()
    }

    /// GPU-ticks of `job` with ground truth `truth` within the horizon.
    pub fn truth_ticks(&self, job: &SimJob, truth: Truth) -> u64 {
        let h = self.horizon;
        let unused = (job.gpus - job.used) as u64;
        let mut n = 0u64;
        for p in &job.phases {
            let len = p.end.min(h).saturating_sub(p.start) as u64;
            if p.kind.truth() == truth {
                n += job.used as u64 * len;
            }
            if truth == Truth::Wasted {
                n += unused * len;
            }
        }
        n
    }

    /// What the oracle recovers: for every job that becomes wholly wasted, its GPUs × the
    /// ticks from onset to its end, within the horizon.
    pub fn oracle_gpu_ticks(&self) -> u64 {
        self.jobs
            .iter()
            .filter_map(|j| {
                j.wholly_wasted_from
                    .map(|w| j.gpus as u64 * j.end.min(self.horizon).saturating_sub(w) as u64)
            })
            .sum()
    }
}
