//! The step function: `step(now, observation) -> findings`, with per-job state kept across
//! cycles. Three drivers share it: the simulator's sweep, trace replay and the enforcer.

use crate::config::Policy;
use crate::finding::{Cap, Cause, Evidence, Finding};
use crate::input::{GpuRef, JobFacts, NodeId, Observation, Sample, Scope};
use crate::sample_check;
use crate::signature;
use crate::verdict::Verdict;
use crate::window::lanes::{self, LaneJob};
use crate::window::{Brief, Coverage, Cycle, EvidenceProblem, GpuStats, GpuWindow, IngestThresholds, WindowKey};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// How drain confirmations are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Simulator, replay and observe-mode enforcer: a drain verdict counts as confirmed one
    /// cycle later, flagged hypothetical, so findings show what enforcement would do. Drain
    /// and cancel findings are marked hypothetical.
    Observe,
    /// Enforce mode: only real confirmations passed in [`Observation::drains`] count;
    /// hypothetical ones are ignored.
    Enforce,
    /// Observe mode for a driver that decides itself which would-drains it would really have
    /// made (the enforcer skips some: damage limits, a node drained for another job). Only
    /// the hypothetical confirmations it passes in count; nothing is confirmed automatically.
    /// Drain and cancel findings are marked hypothetical.
    ObserveReported,
}

/// Why [`Engine::with_policies`] refused a set of policies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SharedWindowError {
    /// The list of policies is empty.
    #[error("an engine needs at least one policy")]
    NoPolicy,
    /// A policy's windows differ from the first policy's.
    #[error("policy {index} shapes its windows differently from policy 0 (window, max_sample_gap, clock_skew or an ingest threshold differ), so they cannot share windows")]
    Differs {
        /// Index of the policy in the list.
        index: usize,
    },
}

/// A job of a snapshot whose windows [`Engine::restore`] did not take, and why: they are
/// not what any engine writes (a damaged or hand-edited state file). The job is taken as a
/// new job when it is next seen, so its evidence is gathered afresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreDrop {
    /// The job's id, as in the snapshot.
    pub job_id: String,
    /// What is wrong, naming the GPU slot, the entry and the value: one line, for the log.
    pub why: String,
}

/// Counters over the engine's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Samples for a GPU no running job holds, or that two running jobs both claim.
    pub unattributed_samples: u64,
    /// Drain confirmations ignored (hypothetical in enforce mode, unknown job, no breach, or
    /// not covering the job's nodes).
    pub ignored_confirmations: u64,
}

/// A small, fast, deterministic hasher for in-memory maps (FxHash's multiply-rotate).
/// Iteration order of these maps never reaches the output.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        for &b in chunks.remainder() {
            self.add(b as u64);
        }
    }
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

const CONFLICT: u32 = u32::MAX;
/// A sample no running job claims, in [`Engine::slots`].
const NO_SLOT: u32 = u32::MAX;
/// A job with no samples yet in this cycle's routing.
const UNSET: u32 = u32::MAX;
const VACANT: u32 = u32::MAX - 1;
/// Node ids below this are routed through a dense table; larger ones through a map.
const DENSE_NODES: u32 = 1 << 20;

/// Maps (node, GPU) to (job state index, allocation slot). A GPU claimed by two running jobs
/// maps to neither: its samples are unattributed, and both jobs see a gap.
#[derive(Default)]
struct Router {
    dense: Vec<Vec<(u32, u32)>>,
    sparse: FxMap<(u32, u16), (u32, u32)>,
}

impl Router {
    fn clear(&mut self) {
        for row in &mut self.dense {
            row.clear();
        }
        self.sparse.clear();
    }

    fn insert(&mut self, g: GpuRef, val: (u32, u32)) {
        let claim = |cell: &mut (u32, u32)| *cell = if cell.0 == VACANT { val } else { (CONFLICT, 0) };
        if g.node.0 < DENSE_NODES {
            let n = g.node.0 as usize;
            if self.dense.len() <= n {
                self.dense.resize_with(n + 1, Vec::new);
            }
            let row = &mut self.dense[n];
            if row.len() <= g.gpu as usize {
                row.resize(g.gpu as usize + 1, (VACANT, 0));
            }
            claim(&mut row[g.gpu as usize]);
        } else {
            claim(self.sparse.entry((g.node.0, g.gpu)).or_insert((VACANT, 0)));
        }
    }

    #[inline]
    fn get(&self, node: NodeId, gpu: u16) -> Option<(u32, u32)> {
        let v = if node.0 < DENSE_NODES {
            *self.dense.get(node.0 as usize)?.get(gpu as usize)?
        } else {
            *self.sparse.get(&(node.0, gpu))?
        };
        (v.0 < VACANT).then_some(v)
    }
}

/// A job id kept inline for fast comparison (ids up to 24 bytes, which covers Slurm's
/// `N`, `N_M` and `N+K` forms); longer ids fall back to comparing the full string.
#[derive(Clone, Copy, Debug, Default)]
struct IdKey {
    bytes: [u8; 24],
    /// Length, or `u8::MAX` when the id is too long to keep inline.
    len: u8,
}

impl IdKey {
    fn new(id: &str) -> IdKey {
        let mut k = IdKey {
            bytes: [0; 24],
            len: u8::MAX,
        };
        if id.len() <= 24 {
            k.bytes[..id.len()].copy_from_slice(id.as_bytes());
            k.len = id.len() as u8;
        }
        k
    }

    #[inline(always)]
    fn matches(&self, full: &str, candidate: &str) -> bool {
        if self.len == u8::MAX {
            full == candidate
        } else if candidate.len() != self.len as usize {
            false
        } else {
            // Compared as a zero-padded copy: three word compares, no call.
            let mut c = [0u8; 24];
            c[..candidate.len()].copy_from_slice(candidate.as_bytes());
            c == self.bytes
        }
    }
}

/// One sample of this cycle, routed: `key` is job state index << 32 | allocation slot.
#[derive(Clone, Copy, Debug)]
struct Routed {
    key: u64,
    t_s: i64,
    idx: u32,
    /// Another sample of the same GPU at the same time disagrees with this one.
    conflict: bool,
}

/// Per-job window state kept across cycles, shared by every policy of the engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobState {
    job_id: String,
    #[serde(skip)]
    id_key: IdKey,
    start_s: i64,
    #[serde(skip)]
    seen: u64,
    alloc: Vec<GpuRef>,
    /// The first [`ALLOC_INLINE`] GPUs of `alloc`, kept inline: every cycle compares the
    /// allocation, and this copy sits with the rest of the job's state (see `same_alloc`).
    #[serde(skip, default = "no_alloc_inline")]
    alloc_inline: [GpuRef; ALLOC_INLINE],
    /// One window per allocation slot; empty while the job is on the lane path.
    gpus: Vec<GpuWindow>,
    /// The job's windows on the lane path (see `window::lanes`), or `None`. Never
    /// serialised: a snapshot carries the per-GPU windows (`Engine::snapshot`).
    #[serde(skip)]
    lane: Option<Box<LaneJob>>,
    /// The engine cycle from which a job off the lane path may try it again (each try reads
    /// the whole window, so tries are spaced a ring apart: O(1) amortised per sample).
    #[serde(skip)]
    lane_retry_cycle: u64,
}

/// How many jobs ahead the engine asks for a breaching job's facts (those exemptions are
/// decided on: see `FactsSeen`) to be loaded: a hint, no result changes.
const AHEAD_FACTS: usize = 16;

/// See `JobState::alloc_inline`.
const ALLOC_INLINE: usize = 8;

/// An `alloc_inline` before it is filled (a restore fills it from `alloc`).
fn no_alloc_inline() -> [GpuRef; ALLOC_INLINE] {
    [GpuRef { node: NodeId(0), gpu: 0 }; ALLOC_INLINE]
}

/// The first [`ALLOC_INLINE`] GPUs of `alloc`; the rest as in [`no_alloc_inline`].
fn alloc_inline(alloc: &[GpuRef]) -> [GpuRef; ALLOC_INLINE] {
    let mut a = no_alloc_inline();
    for (d, g) in a.iter_mut().zip(alloc) {
        *d = *g;
    }
    a
}

impl JobState {
    /// True when `alloc` is this job's allocation, GPU for GPU.
    #[inline(always)]
    fn same_alloc(&self, alloc: &[GpuRef]) -> bool {
        if alloc.len() != self.alloc.len() {
            return false;
        }
        if alloc.len() <= ALLOC_INLINE {
            self.alloc_inline[..alloc.len()] == *alloc
        } else {
            self.alloc == alloc
        }
    }

    /// A job with no samples yet; on the lane path with rings of `lane_cap` rows if given
    /// and the job has [`lanes::L`] GPUs.
    fn new(job: &JobFacts, lane_cap: Option<u32>) -> JobState {
        let lane = lane_cap.filter(|_| job.alloc.len() == lanes::L).map(LaneJob::empty);
        JobState {
            job_id: job.job_id.clone(),
            id_key: IdKey::new(&job.job_id),
            start_s: job.start_s,
            seen: 0,
            alloc: job.alloc.clone(),
            alloc_inline: alloc_inline(&job.alloc),
            gpus: if lane.is_some() {
                Vec::new()
            } else {
                vec![GpuWindow::default(); job.alloc.len()]
            },
            lane,
            lane_retry_cycle: 0,
        }
    }

    /// Takes the job off the lane path: its lanes become per-GPU windows.
    #[cold]
    #[inline(never)]
    fn leave_lanes(&mut self, th: &IngestThresholds, cycle: u64) {
        if let Some(l) = self.lane.take() {
            self.gpus = l.to_windows(th);
            self.lane_retry_cycle = cycle + u64::from(l.cap());
        }
    }

    /// Puts the job on the lane path when its windows line up (see
    /// `LaneJob::from_windows`); otherwise tries again a ring later.
    #[cold]
    #[inline(never)]
    fn try_lanes(&mut self, cycle: u64, cap: u32) {
        match LaneJob::from_windows(&self.gpus, cap) {
            Some(l) => {
                self.lane = Some(l);
                self.gpus = Vec::new();
            }
            None => self.lane_retry_cycle = cycle + u64::from(cap),
        }
    }

    /// The job without its windows.
    fn clone_facts(&self) -> JobState {
        JobState {
            job_id: self.job_id.clone(),
            id_key: self.id_key,
            start_s: self.start_s,
            seen: self.seen,
            alloc: self.alloc.clone(),
            alloc_inline: self.alloc_inline,
            gpus: Vec::new(),
            lane: None,
            lane_retry_cycle: 0,
        }
    }

    /// Per-GPU windows of the job, whichever path it is on.
    fn windows(&self, th: &IngestThresholds) -> Vec<GpuWindow> {
        match &self.lane {
            Some(l) => l.to_windows(th),
            None => self.gpus.clone(),
        }
    }
}

/// One policy's escalation state for one job (guards 5 and 6), kept across cycles.
#[derive(Clone, Debug, Default)]
struct Ladder {
    breach_start_s: Option<i64>,
    /// The signature of the breach's latest cycle, and the start of the unbroken run of
    /// cycles that showed it ([`Finding::signature_dwell_s`]).
    signature_run: Option<(signature::SignatureId, i64)>,
    /// Start of the unbroken run of cycles whose signature's ceiling allows drain.
    drain_level_start_s: Option<i64>,
    /// Start of the unbroken run of cycles whose signature's ceiling allows cancel.
    cancel_level_start_s: Option<i64>,
    rung: Verdict,
    first_alert_s: Option<i64>,
    drain_confirmed_s: Option<i64>,
    /// The job's user, account, partition, QOS, name and comment when exemptions were last
    /// decided; exemptions are decided again when any of them changes.
    facts_seen: Option<FactsSeen>,
    exempt: Option<std::sync::Arc<str>>,
}

impl Ladder {
    /// Ends the breach: escalation starts again from the first alert; earlier alerts and
    /// drains no longer count (guard 5).
    fn end_breach(&mut self) {
        // Most jobs are healthy cycle after cycle: leaving a clear ladder untouched keeps its
        // cache line clean, so it is not written back to memory (issue 2's cost per sample).
        if self.breach_start_s.is_none()
            && self.signature_run.is_none()
            && self.drain_level_start_s.is_none()
            && self.cancel_level_start_s.is_none()
            && self.rung == Verdict::Healthy
            && self.first_alert_s.is_none()
            && self.drain_confirmed_s.is_none()
        {
            return;
        }
        self.breach_start_s = None;
        self.signature_run = None;
        self.drain_level_start_s = None;
        self.cancel_level_start_s = None;
        self.rung = Verdict::Healthy;
        self.first_alert_s = None;
        self.drain_confirmed_s = None;
    }
}

/// What one job's windows show in one cycle, before any policy's ladder: the pooled
/// evidence and what decides whether a policy needs the signatures.
struct Look {
    ev: Evidence,
    problem: Option<EvidenceProblem>,
    any_short: bool,
    /// Every GPU of the allocation is observed.
    whole: bool,
    /// Lowest peak over the observed GPUs, thousandths of a percent.
    min_peak_milli: u32,
    /// Every observed GPU is a spin candidate.
    all_spin: bool,
}

/// A serialisable copy of the engine's windows, for the enforcer's state file.
///
/// Restoring keeps the sample windows (trimmed to one window before the restore time) but
/// not the escalation: every job starts again below the first alert (see [`Engine::restore`]).
/// Windows are kept only under the same window and ingest thresholds they were built with.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSnapshot {
    /// Time the snapshot was taken, epoch seconds.
    pub taken_s: i64,
    /// The window and ingest thresholds the windows were built under; absent in snapshots
    /// written before it existed, whose windows are then not kept.
    #[serde(default)]
    windows_key: Option<WindowKey>,
    jobs: Vec<JobState>,
}

/// The decision engine. Pure: no I/O, no clock, no RNG; time comes in as `now_s`.
///
/// Memory is O(jobs × GPUs × samples in a window). Each sample costs O(1) amortised work;
/// evaluating a job costs O(its observed GPUs + signatures).
pub struct Engine {
    /// The policies judged, at least one; all share `th` (see [`Engine::with_policies`]).
    policies: Vec<Policy>,
    /// Per policy, its integer low-peak limit (`IngestThresholds::low_below_milli`).
    low_below_milli: Vec<u32>,
    th: IngestThresholds,
    mode: Mode,
    jobs: Vec<JobState>,
    /// One ladder per (job, policy): job `j`'s ladder for policy `p` is at `j × policies + p`.
    ladders: Vec<Ladder>,
    by_id: FxMap<String, u32>,
    router: Router,
    /// This cycle's samples, routed to their job and slot (general path only).
    routed: Vec<Routed>,
    /// Per sample of this cycle, its allocation slot, or [`NO_SLOT`] (direct path only).
    slots: Vec<u32>,
    /// True when this cycle's samples were taken in input order (the direct path); then
    /// `ranges` index `obs.samples` and `slots`, otherwise `routed`.
    direct: bool,
    /// Per job state, its range in `routed` or in the cycle's samples.
    ranges: Vec<(u32, u32)>,
    cycle: u64,
    last_now_s: Option<i64>,
    order: Vec<u32>,
    /// Last cycle's `order`: the state index of each input position, tried first.
    prev_order: Vec<u32>,
    /// Scratch: old job state index → new, when jobs leave.
    remap: Vec<u32>,
    scratch: Vec<GpuStats>,
    /// The job whose observed GPUs' statistics `scratch` holds, in this cycle.
    stats_of: Option<usize>,
    /// This cycle's scope.
    scope: Scope,
    counters: EngineCounters,
    /// Jobs of [`lanes::L`] GPUs use the lane path (see [`Engine::set_lane_path`]).
    lane_path: bool,
    /// The CPU runs [`Engine::step_each_wide`].
    wide: bool,
    /// The GPU of each sample of the last cycle whose direct routing stands in `slots` and
    /// `ranges` (see [`route_key`]); empty when none does.
    route_memo: Vec<u64>,
    /// The unattributed samples of that routing.
    route_unattributed: u64,
    /// See [`Engine::restore_dropped`].
    restore_dropped: Vec<RestoreDrop>,
}

impl Engine {
    /// A new engine with no history.
    pub fn new(policy: Policy, mode: Mode) -> Engine {
        let th = IngestThresholds::new(policy.config());
        Engine {
            low_below_milli: vec![th.low_below_milli],
            policies: vec![policy],
            th,
            mode,
            jobs: Vec::new(),
            ladders: Vec::new(),
            by_id: FxMap::default(),
            router: Router::default(),
            routed: Vec::new(),
            slots: Vec::new(),
            direct: false,
            ranges: Vec::new(),
            cycle: 0,
            last_now_s: None,
            order: Vec::new(),
            prev_order: Vec::new(),
            remap: Vec::new(),
            scratch: Vec::new(),
            stats_of: None,
            scope: Scope::Whole,
            counters: EngineCounters::default(),
            lane_path: true,
            wide: wide_cpu(),
            route_memo: Vec::new(),
            route_unattributed: 0,
            restore_dropped: Vec::new(),
        }
    }

    /// An engine that judges every job under several policies at once, sharing one set of
    /// windows: each sample is checked and windowed once, and each policy keeps its own
    /// escalation per job. [`Engine::step_each`] writes one list of findings per policy,
    /// each exactly what an engine of that policy alone would write.
    ///
    /// The policies must agree on everything that shapes a window: `window`,
    /// `max_sample_gap`, `clock_skew` and the thresholds decided at ingest
    /// (`mem_held_frac`, `mem_held_mib`, `idle_power_frac`, `idle_power_w`,
    /// `spin_power_frac`, `spin_util_pct`). They may differ in everything else, `interval`
    /// included (it only sizes the rings, which are then sized for the shortest).
    ///
    /// Errors: no policy, or the index of the first policy whose windows differ from the
    /// first's.
    pub fn with_policies(policies: Vec<Policy>, mode: Mode) -> Result<Engine, SharedWindowError> {
        let Some(first) = policies.first() else {
            return Err(SharedWindowError::NoPolicy);
        };
        let th = IngestThresholds::new(first.config());
        let mut low_below_milli = Vec::with_capacity(policies.len());
        let mut shared = th;
        for (i, p) in policies.iter().enumerate() {
            let t = IngestThresholds::new(p.config());
            if !t.same_windows(&th) {
                return Err(SharedWindowError::Differs { index: i });
            }
            low_below_milli.push(t.low_below_milli);
            shared = shared.with_ring_hint_of(&t);
        }
        let mut e = Engine::new(policies[0].clone(), mode);
        e.policies = policies;
        e.low_below_milli = low_below_milli;
        e.th = shared;
        Ok(e)
    }

    /// The policy in force (the first, for an engine of several).
    pub fn policy(&self) -> &Policy {
        &self.policies[0]
    }

    /// Every policy judged, in the order of [`Engine::step_each`]'s outputs.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// For the job at position `pos` of the last step's `Observation::jobs`, under the first
    /// policy: how long, at `now_s`, its breach has stood at a level whose signature's ceiling
    /// allows a drain, and allows a cancel, seconds. These are what the drain and cancel stages
    /// are counted against (guard 5: a job that looked `partial`, ceiling alert, and now looks
    /// `idle` starts them afresh); the enforcer's notices count from them. `None` where the
    /// breach is not at such a level, or `pos` names no job of the last step. (Kept out of
    /// [`Finding`], which every cycle writes for every job: its size is memory traffic.)
    pub fn level_dwells_s(&self, pos: usize, now_s: i64) -> (Option<i64>, Option<i64>) {
        // After a step, `prev_order` holds that step's position → job state mapping.
        let Some(&ji) = self.prev_order.get(pos).filter(|&&ji| (ji as usize) < self.jobs.len()) else {
            return (None, None);
        };
        let Some(l) = self.ladders.get(ji as usize * self.policies.len()) else {
            return (None, None);
        };
        let dwell = |t: Option<i64>| t.map(|t| now_s.saturating_sub(t));
        (dwell(l.drain_level_start_s), dwell(l.cancel_level_start_s))
    }

    /// The confirmation mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Life-time counters.
    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// Number of jobs with state.
    pub fn tracked_jobs(&self) -> usize {
        self.jobs.len()
    }

    /// Turns the lane path on (the default) or off. The lane path keeps the windows of a job
    /// of exactly 8 GPUs whose samples arrive together in a compact form (see the policy
    /// crate's `window/lanes.rs`), for speed; findings, snapshots and counters are identical
    /// either way (`policy/tests/lane_equivalence.rs`). Off, every job keeps per-GPU windows,
    /// as before the lane path existed: for those tests and for A/B measurements. Jobs already
    /// tracked move to per-GPU windows at once when it is turned off, and to lanes over the
    /// next cycles when it is turned on.
    pub fn set_lane_path(&mut self, on: bool) {
        self.lane_path = on;
        if !on {
            let cycle = self.cycle;
            for j in &mut self.jobs {
                j.leave_lanes(&self.th, cycle);
            }
        }
    }

    /// Turns off (or back on, where the CPU has AVX2) the AVX2 twin of [`Engine::step_each`].
    /// Results are the same either way; for tests that hold them so.
    #[doc(hidden)]
    pub fn set_avx2(&mut self, on: bool) {
        self.wide = on && wide_cpu();
    }

    /// The rows of a lane job's ring, or `None` when no job takes the lane path (it is off,
    /// or the policy's window holds too many samples for it: see `lanes::lane_cap`).
    fn lane_cap(&self) -> Option<u32> {
        if self.lane_path {
            lanes::lane_cap(&self.th)
        } else {
            None
        }
    }

    /// Number of tracked jobs on the lane path now (see [`Engine::set_lane_path`]).
    pub fn lane_jobs(&self) -> usize {
        self.jobs.iter().filter(|j| j.lane.is_some()).count()
    }

    /// The jobs of the snapshot [`Engine::restore`] did not take, in snapshot order; empty
    /// for an engine not restored.
    pub fn restore_dropped(&self) -> &[RestoreDrop] {
        &self.restore_dropped
    }

    /// Copies the windows for persistence.
    pub fn snapshot(&self, now_s: i64) -> EngineSnapshot {
        EngineSnapshot {
            taken_s: now_s,
            windows_key: Some(self.th.key()),
            jobs: self
                .jobs
                .iter()
                .map(|j| JobState {
                    gpus: j.windows(&self.th),
                    lane: None,
                    ..j.clone_facts()
                })
                .collect(),
        }
    }

    /// An engine resumed from a snapshot at `now_s`. Window contents older than one window are
    /// dropped, and escalation starts again from the first alert: no job keeps a breach,
    /// rung, alert time or drain confirmation across a restart.
    ///
    /// Each kept sample's predicates (memory held, power at idle, a hole before it …) were
    /// decided when it was ingested, under the snapshot's config. When `policy` differs in
    /// any of them (window, gap, skew or an ingest threshold), or the snapshot does not say
    /// which it was built under, no window is kept: every job gathers a full window again. A
    /// first cycle earlier than the snapshot's `taken_s` is a clock step back, handled as in
    /// [`Engine::step`].
    pub fn restore(policy: Policy, mode: Mode, snap: EngineSnapshot, now_s: i64) -> Engine {
        let mut e = Engine::new(policy, mode);
        // The snapshot was taken at its engine's last cycle: a first cycle earlier than that is
        // a clock step back, as in an engine that never stopped (review 24: across a restart
        // the windows of before the step were kept, and the restored engine alerted at once and
        // drained 18 minutes before one that never restarted).
        e.last_now_s = Some(snap.taken_s);
        if snap.windows_key != Some(e.th.key()) {
            return e;
        }
        // The latest a kept sample can be stamped: the future bound of the snapshot's cycle.
        let latest_ok_s = e.th.cycle(snap.taken_s).future_after_s;
        for mut j in snap.jobs {
            // A job whose windows no engine could have written is not restored: it is taken
            // as a new job when it is next seen (its evidence gathered afresh, which is safe).
            // Only that job's windows are lost, never the rest of the file.
            let why = if j.gpus.len() != j.alloc.len() {
                Some(format!("{} windows for an allocation of {} GPUs", j.gpus.len(), j.alloc.len()))
            } else {
                j.gpus
                    .iter()
                    .enumerate()
                    .find_map(|(slot, g)| g.implausible_entry(latest_ok_s).map(|w| format!("GPU slot {slot}, {w}")))
            };
            if let Some(why) = why {
                e.restore_dropped.push(RestoreDrop { job_id: j.job_id, why });
                continue;
            }
            e.ladders.push(Ladder::default());
            j.id_key = IdKey::new(&j.job_id);
            j.alloc_inline = alloc_inline(&j.alloc);
            // `seen` is not serialised, but an in-memory snapshot keeps it: a restored job
            // has not been seen in the new engine's cycles.
            j.seen = 0;
            for g in &mut j.gpus {
                g.restore_trim(now_s, &e.th);
            }
            e.by_id.insert(j.job_id.clone(), e.jobs.len() as u32);
            e.jobs.push(j);
        }
        e.rebuild_router();
        e
    }

    fn rebuild_router(&mut self) {
        self.router.clear();
        for (ji, j) in self.jobs.iter().enumerate() {
            for (slot, g) in j.alloc.iter().enumerate() {
                self.router.insert(*g, (ji as u32, slot as u32));
            }
        }
    }

    /// One evaluation cycle at `now_s` (epoch seconds). Writes one finding per job of
    /// `obs.jobs`, in that order, into `out` (cleared first). Jobs not in `obs.jobs` are
    /// forgotten.
    ///
    /// A `now_s` earlier than the previous cycle's is treated as a clock jump: every job's
    /// breach ends and escalation starts again (no clock jump can take a job up the ladder),
    /// and every window is emptied (its samples were taken before the step).
    pub fn step(&mut self, now_s: i64, obs: &Observation<'_>, out: &mut Vec<Finding>) {
        self.step_each(now_s, obs, std::slice::from_mut(out));
    }

    /// [`Engine::step`] for an engine of several policies: writes into `outs[p]` the
    /// findings of policy `p` (see [`Engine::with_policies`]). Each list is cleared first.
    /// Extra lists are left empty; policies without a list are still stepped, so their
    /// escalation stays in step with time.
    pub fn step_each(&mut self, now_s: i64, obs: &Observation<'_>, outs: &mut [Vec<Finding>]) {
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only where the CPU has every feature enabled there.
            unsafe { self.step_each_wide(now_s, obs, outs) };
            return;
        }
        self.step_each_body(now_s, obs, outs, false);
    }

    /// [`Engine::step_each`] compiled for CPUs with AVX2 (x86-64-v3: every x86 server CPU
    /// since about 2015): the same code, so the same results (Rust never contracts or
    /// reorders float operations), with wider vectors for the lane path's loops. (AVX-512
    /// measured no faster here, and needs Rust 1.89.)
    ///
    /// # Safety
    /// The CPU must have every feature named.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    unsafe fn step_each_wide(&mut self, now_s: i64, obs: &Observation<'_>, outs: &mut [Vec<Finding>]) {
        // The lane path's hand-written AVX2 (`lanes/avx2.rs`) runs here, and only here.
        self.step_each_body(now_s, obs, outs, true);
    }

    /// `wide`: called from [`Engine::step_each_wide`], so the CPU has its features.
    #[inline(always)]
    fn step_each_body(&mut self, now_s: i64, obs: &Observation<'_>, outs: &mut [Vec<Finding>], wide: bool) {
        for out in outs.iter_mut() {
            out.clear();
        }
        let np = self.policies.len();
        self.cycle += 1;
        let cycle = self.cycle;
        let clock_went_back = self.last_now_s.is_some_and(|t| now_s < t);
        self.last_now_s = Some(now_s);

        // 1. Reconcile the job set.
        let mut changed = false;
        let lane_cap = self.lane_cap();
        self.order.clear();
        for (pos, job) in obs.jobs.iter().enumerate() {
            // Drivers usually pass the same jobs in the same order each cycle: try the state
            // this position had last cycle before hashing the id.
            let hint = self.prev_order.get(pos).copied().filter(|&i| {
                (i as usize) < self.jobs.len() && self.jobs[i as usize].id_key.matches(&self.jobs[i as usize].job_id, &job.job_id)
            });
            let found = hint.or_else(|| self.by_id.get(job.job_id.as_str()).copied());
            let idx = match found {
                Some(i) if self.jobs[i as usize].seen != cycle => {
                    let st = &mut self.jobs[i as usize];
                    // A requeued job gets a new start time, and a driver's view of a job's
                    // GPUs can change (the enforcer re-attributes them): either way the old
                    // windows say nothing about the new allocation, so the job starts afresh.
                    if st.start_s != job.start_s || !st.same_alloc(&job.alloc) {
                        *st = JobState::new(job, lane_cap);
                        for l in &mut self.ladders[i as usize * np..(i as usize + 1) * np] {
                            *l = Ladder::default();
                        }
                        changed = true;
                    }
                    i
                }
                Some(_) => {
                    // The same job id twice in one cycle: keep the first, judge the second
                    // as a job with no evidence.
                    u32::MAX
                }
                None => {
                    let i = self.jobs.len() as u32;
                    self.jobs.push(JobState::new(job, lane_cap));
                    self.ladders.resize_with(self.ladders.len() + np, Ladder::default);
                    self.by_id.insert(job.job_id.clone(), i);
                    changed = true;
                    i
                }
            };
            if idx != u32::MAX {
                self.jobs[idx as usize].seen = cycle;
                if clock_went_back {
                    for l in &mut self.ladders[idx as usize * np..(idx as usize + 1) * np] {
                        l.end_breach();
                    }
                    // Every sample held was taken before the step: none can be placed against
                    // the new clock (guard 10), and a job is judged again only on a full
                    // window gathered after it.
                    let st = &mut self.jobs[idx as usize];
                    for g in &mut st.gpus {
                        g.forget_after_clock_step();
                    }
                    if let Some(l) = &mut st.lane {
                        l.forget_after_clock_step();
                    }
                }
            }
            self.order.push(idx);
        }
        if self.jobs.iter().any(|j| j.seen != cycle) {
            // Forget the jobs that left, and renumber the rest without rehashing their ids.
            let mut remap = std::mem::take(&mut self.remap);
            remap.clear();
            let mut next = 0u32;
            for j in &self.jobs {
                if j.seen == cycle {
                    remap.push(next);
                    next += 1;
                } else {
                    remap.push(u32::MAX);
                    self.by_id.remove(j.job_id.as_str());
                }
            }
            let mut k = 0;
            for (ji, j) in self.jobs.iter().enumerate() {
                if j.seen == cycle {
                    for p in 0..np {
                        self.ladders.swap(k, ji * np + p);
                        k += 1;
                    }
                }
            }
            self.ladders.truncate(k);
            self.jobs.retain(|j| j.seen == cycle);
            for v in self.by_id.values_mut() {
                *v = remap[*v as usize];
            }
            for o in self.order.iter_mut().filter(|o| **o != u32::MAX) {
                *o = remap[*o as usize];
            }
            self.remap = remap;
            changed = true;
        }
        if changed {
            self.rebuild_router();
        }

        // 2. Route samples to their job and slot. Verdicts must not depend on arrival order,
        //    so each job's samples are ingested in (slot, time, readings) order. Drivers
        //    usually hand one sample per GPU, each job's together and in allocation order:
        //    then the samples are taken where they lie (the direct path). Anything else
        //    (a GPU twice, a job's samples split or out of slot order) is sorted.
        //    A driver also hands its samples in the same GPU order cycle after cycle: when
        //    the jobs and that order are as last cycle's direct routing found them, its result
        //    stands (it depends on nothing else), and the router is not consulted.
        if changed || !self.route_direct_again(obs.samples) {
            self.route_memo.clear();
            if self.route_direct(obs.samples) {
                self.route_memo.extend(obs.samples.iter().map(route_key));
            } else {
                self.route_sorted(obs.samples);
            }
        }

        // 3. Drain confirmations, offered to every policy's ladder of the job.
        for d in obs.drains {
            let accepted = (|| {
                match (self.mode, d.hypothetical) {
                    (Mode::Enforce, true) | (Mode::ObserveReported, false) => return false,
                    _ => {}
                }
                let Some(&ji) = self.by_id.get(d.job_id.as_str()) else {
                    return false;
                };
                let st = &self.jobs[ji as usize];
                if d.confirmed_s > now_s || !st.alloc.iter().all(|g| d.nodes.contains(&g.node)) {
                    return false;
                }
                let mut taken = false;
                for l in &mut self.ladders[ji as usize * np..(ji as usize + 1) * np] {
                    if l.drain_level_start_s.is_none() {
                        continue;
                    }
                    taken = true;
                    // A confirmation counts only once this breach's drain verdict has been
                    // given, in an earlier cycle, and from the cycle that hears of it: as a
                    // drain made for that verdict would be confirmed. A drain that already
                    // stood (from an earlier breach of the job, or before a restart) brings no
                    // cancel sooner (review 16: a second breach skipped the drain stage, its
                    // confirmation and the window after it, and was cancelled where the sweep,
                    // whose drains are confirmed one cycle after the verdict, showed none).
                    if l.rung >= Verdict::Drain && l.drain_confirmed_s.is_none() {
                        l.drain_confirmed_s = Some(now_s);
                    }
                }
                taken
            })();
            if !accepted {
                self.counters.ignored_confirmations += 1;
            }
        }

        // 4. Ingest and evaluate, in input order.
        let mut order = std::mem::take(&mut self.order);
        let cyc = self.th.cycle(now_s);
        self.scope = obs.scope;
        // Jobs ahead whose lanes are prefetched (see `LaneJob::prefetch_header`): the state
        // first, its rows once that has arrived.
        const AHEAD_HEADER: usize = 8;
        const AHEAD_ROWS: usize = 4;
        fn lane_at<'a>(jobs: &'a [JobState], order: &[u32], k: usize) -> Option<&'a LaneJob> {
            order.get(k).and_then(|&a| jobs.get(a as usize)).and_then(|j| j.lane.as_deref())
        }
        for (pos, &ji) in order.iter().enumerate() {
            if let Some(l) = lane_at(&self.jobs, &order, pos + AHEAD_HEADER) {
                l.prefetch_header();
            }
            if let Some(l) = lane_at(&self.jobs, &order, pos + AHEAD_ROWS) {
                l.prefetch_rows();
            }
            // A job in a confirmed breach compares its facts with the last decision's
            // (exemptions, in `judge`): start loading both strings.
            if let (Some(&a), Some(ahead)) = (order.get(pos + AHEAD_FACTS), obs.jobs.get(pos + AHEAD_FACTS)) {
                if let Some(ls) = self.ladders.get(a as usize * np..(a as usize + 1) * np) {
                    for l in ls.iter().filter(|l| l.breach_start_s.is_some()) {
                        FactsSeen::prefetch(l.facts_seen.as_ref(), ahead);
                    }
                }
            }
            let job = &obs.jobs[pos];
            if ji == u32::MAX {
                for out in outs.iter_mut() {
                    out.push(Self::duplicate_finding(pos as u32, job));
                }
                continue;
            }
            let look = self.look(ji as usize, &cyc, obs, wide);
            for p in 0..np {
                let f = self.judge(ji as usize, p, pos as u32, job, &look, now_s);
                if let Some(out) = outs.get_mut(p) {
                    out.push(f);
                }
            }
        }
        std::mem::swap(&mut self.prev_order, &mut order);
        order.clear();
        self.order = order;
    }

    /// The direct path of routing: true, with `slots` and `ranges` filled, when every job's
    /// samples lie together and in strictly increasing slot order (so at most one per GPU).
    /// Samples no running job claims may lie anywhere; they are counted as unattributed.
    fn route_direct(&mut self, samples: &[Sample]) -> bool {
        self.direct = false;
        self.route_unattributed = 0;
        self.ranges.clear();
        self.ranges.resize(self.jobs.len(), (UNSET, UNSET));
        self.slots.clear();
        let mut unattributed = 0u64;
        let mut run: Option<(u32, u32)> = None;
        for (i, s) in samples.iter().enumerate() {
            let Some((ji, slot)) = self.router.get(s.node, s.gpu) else {
                unattributed += 1;
                self.slots.push(NO_SLOT);
                continue;
            };
            match run {
                Some((rj, rs)) if rj == ji => {
                    if slot <= rs {
                        return false;
                    }
                }
                _ => {
                    let r = &mut self.ranges[ji as usize];
                    if r.0 != UNSET {
                        return false;
                    }
                    r.0 = i as u32;
                }
            }
            self.ranges[ji as usize].1 = i as u32 + 1;
            run = Some((ji, slot));
            self.slots.push(slot);
        }
        for r in &mut self.ranges {
            if r.0 == UNSET {
                *r = (0, 0);
            }
        }
        self.counters.unattributed_samples += unattributed;
        self.route_unattributed = unattributed;
        self.direct = true;
        true
    }

    /// True, with last cycle's direct routing kept, when `samples` name the same GPUs in the
    /// same order as the samples it routed (`route_memo`), and the jobs have not changed since
    /// (the caller's `changed`).
    #[inline(always)]
    fn route_direct_again(&mut self, samples: &[Sample]) -> bool {
        let same = !self.route_memo.is_empty()
            && self.route_memo.len() == samples.len()
            && self.route_memo.iter().zip(samples).all(|(&k, s)| k == route_key(s));
        if same {
            self.direct = true;
            self.counters.unattributed_samples += self.route_unattributed;
        }
        same
    }

    /// The general path of routing: sorts the cycle's samples into (job, slot, time,
    /// readings) order in `routed`, and fills `ranges`.
    fn route_sorted(&mut self, samples: &[Sample]) {
        self.routed.clear();
        for (i, s) in samples.iter().enumerate() {
            match self.router.get(s.node, s.gpu) {
                Some((ji, slot)) => self.routed.push(Routed {
                    key: (ji as u64) << 32 | slot as u64,
                    t_s: s.t_s,
                    idx: i as u32,
                    conflict: false,
                }),
                None => self.counters.unattributed_samples += 1,
            }
        }
        // Ties in time on one GPU are broken by the readings' bit patterns, so that which of
        // two same-time samples is kept (the other counts as late) does not depend on order.
        let cmp = |a: &Routed, b: &Routed| {
            a.key.cmp(&b.key).then(a.t_s.cmp(&b.t_s)).then_with(|| {
                sample_check::raw_key(&samples[a.idx as usize])
                    .tie_order()
                    .cmp(&sample_check::raw_key(&samples[b.idx as usize]).tie_order())
            })
        };
        self.routed.sort_unstable_by(cmp);
        // Two samples of one GPU stamped at the same instant that disagree: that instant has no
        // usable evidence (which one is right cannot be told), so every one of them is marked,
        // and `look` takes none of their readings.
        let mut i = 0;
        while i < self.routed.len() {
            let (key, t) = (self.routed[i].key, self.routed[i].t_s);
            let mut j = i + 1;
            while j < self.routed.len() && self.routed[j].key == key && self.routed[j].t_s == t {
                j += 1;
            }
            if j - i > 1 {
                let first = sample_check::raw_key(&samples[self.routed[i].idx as usize]);
                let differ = self.routed[i + 1..j]
                    .iter()
                    .any(|r| sample_check::raw_key(&samples[r.idx as usize]) != first);
                if differ {
                    for r in &mut self.routed[i..j] {
                        r.conflict = true;
                    }
                }
            }
            i = j;
        }
        self.ranges.clear();
        self.ranges.resize(self.jobs.len(), (0, 0));
        let mut i = 0;
        while i < self.routed.len() {
            let ji = (self.routed[i].key >> 32) as usize;
            let start = i;
            while i < self.routed.len() && (self.routed[i].key >> 32) as usize == ji {
                i += 1;
            }
            self.ranges[ji] = (start as u32, i as u32);
        }
    }

    fn duplicate_finding(pos: u32, job: &JobFacts) -> Finding {
        Finding {
            job_index: pos,
            verdict: Verdict::InsufficientEvidence,
            signature: None,
            cause: Cause::Evidence(EvidenceProblem::NoSamples),
            cap: None,
            dwell_s: 0,
            signature_dwell_s: 0,
            evidence: Evidence {
                gpus_allocated: job.alloc.len() as u32,
                ..Evidence::default()
            },
            wasted_gpu_h: 0.0,
            hypothetical: false,
            exempt: None,
        }
    }

    /// Ingests job `ji`'s samples of this cycle, evicts what left its windows, and pools
    /// the evidence of its observed GPUs. Inlined into [`Engine::step_each`]'s body, so that
    /// the lane path is compiled for the wide CPUs too.
    #[inline(always)]
    fn look(&mut self, ji: usize, cyc: &Cycle, obs: &Observation<'_>, wide: bool) -> Look {
        let th = self.th;
        let cycle = self.cycle;
        let lane_cap = self.lane_cap();
        let st = &mut self.jobs[ji];
        let (from, to) = self.ranges[ji];
        let (from, to) = (from as usize, to as usize);
        let scope = obs.scope;
        let whole_scope = scope == Scope::Whole;
        // A sample stamped before the job started says nothing about the job (the GPU's
        // earlier history, re-sent or scraped as a range): it is counted invalid, never
        // evidence, so no window reaching before the start is ever covered.
        let start_s = st.start_s;
        if let Some(lane) = st.lane.as_deref_mut() {
            // The lane path: every GPU observed, and none or one sample per GPU in slot order.
            let observed_all = whole_scope || st.alloc.iter().all(|g| observed(scope, g));
            let taken = observed_all
                && if from == to {
                    true
                } else if to - from != lanes::L {
                    false
                } else if self.direct {
                    let slots = &self.slots[from..to];
                    slots.iter().enumerate().all(|(i, &s)| s == i as u32)
                        && lane.ingest(|i| &obs.samples[from + i], start_s, cyc, &th, wide)
                } else {
                    let routed = &self.routed[from..to];
                    routed
                        .iter()
                        .enumerate()
                        .all(|(i, r)| (r.key & 0xffff_ffff) == i as u64 && !r.conflict)
                        && lane.ingest(|i| &obs.samples[routed[i].idx as usize], start_s, cyc, &th, wide)
                };
            if taken {
                lane.evict(cyc);
                let mut acc = Accum::new(st.alloc.len() as u32);
                #[cfg(target_arch = "x86_64")]
                let pooled = if self.wide {
                    // SAFETY: `wide` is set only where the CPU has every feature enabled there.
                    unsafe { lane.pool_avx2(cyc, &th) }
                } else {
                    lane.pool(cyc, &th)
                };
                #[cfg(not(target_arch = "x86_64"))]
                let pooled = lane.pool(cyc, &th);
                match pooled {
                    Some(p) => acc.take_lanes(&p),
                    None => {
                        for i in 0..lanes::L {
                            acc.take(&lane.brief(i, cyc, &th));
                        }
                    }
                }
                self.stats_of = None;
                return acc.finish(lane.late_total());
            }
            st.leave_lanes(&th, cycle);
        }
        if self.direct {
            for (s, &slot) in obs.samples[from..to].iter().zip(&self.slots[from..to]) {
                if slot != NO_SLOT {
                    let w = &mut st.gpus[slot as usize];
                    if s.t_s < start_s {
                        w.ingest_before_start(s.t_s);
                    } else {
                        w.ingest(s, cyc, &th);
                    }
                }
            }
        } else {
            for r in &self.routed[from..to] {
                let w = &mut st.gpus[(r.key & 0xffff_ffff) as usize];
                if r.t_s < start_s {
                    w.ingest_before_start(r.t_s);
                } else if r.conflict {
                    w.ingest_unusable(r.t_s, cyc);
                } else {
                    w.ingest(&obs.samples[r.idx as usize], cyc, &th);
                }
            }
        }
        // Ingest everything first, so late samples are always counted.
        let mut acc = Accum::new(st.alloc.len() as u32);
        let mut late = 0;
        let mut observed_all = true;
        for (w, g) in st.gpus.iter_mut().zip(&st.alloc) {
            late = w.late.saturating_add(late);
            // Under `Scope::Whole` every GPU is observed; the allocation is not even read.
            if !whole_scope && !observed(scope, g) {
                acc.look.whole = false;
                observed_all = false;
                continue;
            }
            w.evict(cyc);
            acc.take(&w.brief(cyc, &th));
        }
        if let Some(cap) = lane_cap.filter(|_| observed_all && st.gpus.len() == lanes::L && cycle >= st.lane_retry_cycle) {
            st.try_lanes(cycle, cap);
        }
        self.stats_of = None;
        acc.finish(late)
    }

    /// Policy `p`'s finding for job `ji` (input position `pos`) from this cycle's look,
    /// moving the job up or down that policy's ladder.
    fn judge(&mut self, ji: usize, p: usize, pos: u32, job: &JobFacts, look: &Look, now_s: i64) -> Finding {
        let policy = &self.policies[p];
        let cfg = policy.config();
        let mut f = Finding {
            job_index: pos,
            verdict: Verdict::Healthy,
            signature: None,
            cause: Cause::NoBreach,
            cap: None,
            dwell_s: 0,
            signature_dwell_s: 0,
            evidence: look.ev,
            wasted_gpu_h: 0.0,
            hypothetical: false,
            exempt: None,
        };
        let np = self.policies.len();
        let l = &mut self.ladders[ji * np + p];

        // Guard 1: warmup.
        if now_s.saturating_sub(job.start_s) < cfg.warmup.0 {
            l.end_breach();
            f.cause = Cause::Warmup;
            return f;
        }
        // Guards 2, 3 and 10: broken evidence never escalates and ends any breach.
        if let Some(problem) = look.problem {
            l.end_breach();
            f.verdict = Verdict::InsufficientEvidence;
            f.cause = Cause::Evidence(problem);
            return f;
        }
        // Every signature needs a low GPU, or every GPU a spin candidate (see
        // `signature::peak_is_low`); jobs with neither skip the full statistics.
        let classified = if look.min_peak_milli < self.low_below_milli[p] || look.all_spin {
            if self.stats_of != Some(ji) {
                self.scratch.clear();
                let st = &self.jobs[ji];
                let cyc = self.th.cycle(now_s);
                if let Some(l) = &st.lane {
                    // The lane path runs only with every GPU observed.
                    self.scratch.extend(l.stats_all());
                } else {
                    for (w, g) in st.gpus.iter().zip(&st.alloc) {
                        if self.scope == Scope::Whole || observed(self.scope, g) {
                            self.scratch.push(w.stats(&w.brief(&cyc, &self.th)));
                        }
                    }
                }
                self.stats_of = Some(ji);
            }
            signature::classify_view(&self.scratch, cfg, look.whole)
        } else {
            None
        };
        let l = &mut self.ladders[ji * np + p];
        let Some((sig, m)) = classified else {
            l.end_breach();
            return f;
        };
        f.signature = Some(sig);
        f.evidence.wasted_gpus = m.wasted_gpus;
        f.evidence.procs_unknown = m.procs_unknown;
        f.evidence.power_unknown = m.power_unknown;
        let gpu_share = m.wasted_gpus as f64 * m.waste_frac;
        if look.any_short {
            l.end_breach();
            f.verdict = Verdict::Watching;
            f.cause = Cause::ShortCoverage;
            f.wasted_gpu_h = gpu_share * now_s.saturating_sub(f.evidence.window_start_s).max(0) as f64 / 3600.0;
            return f;
        }
        // A confirmed breach over a full window. Exemptions matter only now, so the job's
        // facts are read (and compared with the last decision) only for breaching jobs.
        if !l.facts_seen.as_ref().is_some_and(|seen| seen.matches(job)) {
            l.facts_seen = Some(FactsSeen::of(job));
            l.exempt = policy.exemption(job).map(std::sync::Arc::from);
        }
        f.exempt = l.exempt.clone();
        f.cause = Cause::Breach;
        let window_start = f.evidence.window_start_s;
        let breach_start = *l.breach_start_s.get_or_insert(window_start);
        let dwell = now_s.saturating_sub(breach_start);
        f.dwell_s = dwell;
        // A signature that shows for the first time in this breach counts from the current
        // window's start (as the drain and cancel levels do), never before the breach's.
        let run_start = match l.signature_run {
            Some((s, t)) if s == sig => t,
            _ => window_start.max(breach_start),
        };
        l.signature_run = Some((sig, run_start));
        f.signature_dwell_s = now_s.saturating_sub(run_start);
        f.wasted_gpu_h = gpu_share * dwell as f64 / 3600.0;
        // Dwell toward drain and cancel counts only while the signature's ceiling allows
        // them: a partial job (ceiling alert) that looks hung (ceiling cancel) during a
        // checkpoint starts its drain and cancel dwell afresh, at the current window's start.
        let ceiling = policy.ceiling(sig);
        l.drain_level_start_s = (ceiling >= Verdict::Drain).then(|| l.drain_level_start_s.unwrap_or(window_start));
        l.cancel_level_start_s = (ceiling >= Verdict::Cancel).then(|| l.cancel_level_start_s.unwrap_or(window_start));
        if l.drain_level_start_s.is_none() {
            l.drain_confirmed_s = None;
        }

        // Observe mode: last cycle's drain verdict counts as confirmed now.
        if self.mode == Mode::Observe && l.rung >= Verdict::Drain && l.drain_confirmed_s.is_none() {
            l.drain_confirmed_s = Some(now_s);
        }

        // Guard 5: stages, each against the dwell of its own level.
        let level_start = |v: Verdict| match v {
            Verdict::Cancel => l.cancel_level_start_s,
            Verdict::Drain => l.drain_level_start_s,
            _ => Some(breach_start),
        };
        let staged = |by_level: bool| {
            let stages = policy.stages.iter();
            let reached = stages.filter(|s| {
                if by_level {
                    // A stage above the signature's ceiling counts at the ceiling's level: with
                    // `ceilings.hung = "drain"` and only a cancel stage, hung jobs are drained at
                    // that stage's dwell (review 13: they were never drained, while notices and
                    // check-config promised it). The ceiling then caps the verdict.
                    level_start(s.verdict.min(ceiling)).is_some_and(|t| now_s.saturating_sub(t) >= s.after_s)
                } else {
                    dwell >= s.after_s
                }
            });
            reached.map(|s| s.verdict).max().unwrap_or(Verdict::Watching)
        };
        let mut v = staged(true);
        let mut cap = None;
        if staged(false) > ceiling {
            cap = Some(Cap::Ceiling);
        }
        let mut limit = |v: &mut Verdict, to: Verdict, why: Cap| {
            if *v > to {
                *v = to;
                cap.get_or_insert(why);
            }
        };
        // Guard 8: exemptions; guard 7: ceilings; guard 9: whole allocation.
        if l.exempt.is_some() {
            limit(&mut v, Verdict::Watching, Cap::Exempt);
        }
        limit(&mut v, policy.ceiling(sig), Cap::Ceiling);
        // Guard 3: a window that may be a frozen collector is no ground for a drain or cancel.
        if f.evidence.freeze_undetectable_gpus > 0 {
            limit(&mut v, Verdict::Alert, Cap::FreezeUndetectable);
        }
        // Guard 3: zero compute with memory held is hung only where power could have said
        // otherwise.
        if m.power_unknown {
            limit(&mut v, Verdict::Alert, Cap::PowerUnknown);
        }
        // Guard 3: a GPU whose collector is often wrong is no ground for a drain or cancel.
        if f.evidence.mostly_invalid() {
            limit(&mut v, Verdict::Alert, Cap::InvalidSamples);
        }
        if !look.whole {
            limit(&mut v, Verdict::Alert, Cap::PartialScope);
        }
        // Guard 6: at most one rung per cycle above alert.
        if v > Verdict::Alert {
            let next = if l.rung >= Verdict::Alert {
                l.rung.next_action_rung()
            } else {
                Verdict::Alert
            };
            limit(&mut v, next, Cap::OneRung);
        }
        // Guard 6: a cancel needs a confirmed drain one window old, and notice.
        if v == Verdict::Cancel {
            // The drain, and the cancel-capable breach, have both stood a full window.
            let cancel_start = l.cancel_level_start_s.unwrap_or(i64::MAX);
            let drained = l
                .drain_confirmed_s
                .is_some_and(|t| t.max(cancel_start) <= now_s.saturating_sub(cfg.window.0));
            let noticed = l.first_alert_s.is_some_and(|t| now_s.saturating_sub(t) >= cfg.notice.0);
            if !drained {
                limit(&mut v, Verdict::Drain, Cap::DrainUnconfirmed);
            } else if !noticed {
                limit(&mut v, Verdict::Drain, Cap::Notice);
            }
        }
        if v >= Verdict::Alert && l.first_alert_s.is_none() {
            l.first_alert_s = Some(now_s);
        }
        l.rung = v;
        f.verdict = v;
        f.cap = cap;
        f.hypothetical = self.mode != Mode::Enforce && v >= Verdict::Drain;
        f
    }
}

/// True when GPU `g` is in the part of the allocation that `scope` observes.
fn observed(scope: Scope, g: &GpuRef) -> bool {
    match scope {
        Scope::Whole => true,
        Scope::Node(n) => g.node == n,
    }
}

/// A job's user, account, partition, QOS, name and comment when its exemptions were last
/// decided, as one allocation: the six byte lengths (`u64`, little-endian), then the six
/// strings' bytes back to back. One allocation rather than six `String`s behind a box: a
/// breaching job's check is one or two cache lines of ours, which the engine prefetches
/// with the job's own strings (issue 2's cost per sample: at 10,000 jobs with 10 % breaching,
/// not comparing at all, which is not exact, saved about a fifth of a cycle; this form and the
/// prefetch recover a part of that, ARCHITECTURE.md says how much).
#[derive(Clone, Debug)]
struct FactsSeen(Box<[u8]>);

impl FactsSeen {
    /// The facts exemptions are decided on, in a fixed order.
    fn fields(job: &JobFacts) -> [&str; 6] {
        [&job.user, &job.account, &job.partition, &job.qos, &job.name, &job.comment]
    }

    fn of(job: &JobFacts) -> FactsSeen {
        let f = Self::fields(job);
        let mut v = Vec::with_capacity(8 * f.len() + f.iter().map(|s| s.len()).sum::<usize>());
        for s in f {
            v.extend_from_slice(&(s.len() as u64).to_le_bytes());
        }
        for s in f {
            v.extend_from_slice(s.as_bytes());
        }
        FactsSeen(v.into_boxed_slice())
    }

    /// True when `job`'s facts are exactly the ones kept, byte for byte.
    fn matches(&self, job: &JobFacts) -> bool {
        let f = Self::fields(job);
        let Some((lens, mut rest)) = self.0.split_at_checked(8 * f.len()) else {
            return false;
        };
        if !lens.chunks_exact(8).zip(f).all(|(n, s)| *n == (s.len() as u64).to_le_bytes()) {
            return false;
        }
        // Every length matches, so the bytes kept are exactly as long as the job's.
        for s in f {
            let Some((kept, tail)) = rest.split_at_checked(s.len()) else {
                return false;
            };
            if kept != s.as_bytes() {
                return false;
            }
            rest = tail;
        }
        rest.is_empty()
    }

    /// Asks the CPU to start loading the kept facts and `job`'s: a hint, no result changes.
    #[inline(always)]
    fn prefetch(seen: Option<&FactsSeen>, job: &JobFacts) {
        if let Some(seen) = seen {
            lanes::prefetch(seen.0.as_ptr());
        }
        for s in Self::fields(job) {
            lanes::prefetch(s.as_ptr());
        }
    }
}

/// One job's look being gathered, GPU by GPU, from each observed GPU's [`Brief`]: the same
/// for the general path and the lane path.
struct Accum {
    look: Look,
    pool: Pool,
}

impl Accum {
    #[inline(always)]
    fn new(gpus_allocated: u32) -> Accum {
        Accum {
            look: Look {
                ev: Evidence {
                    gpus_allocated,
                    ..Evidence::default()
                },
                problem: None,
                any_short: false,
                whole: true,
                min_peak_milli: u32::MAX,
                all_spin: true,
            },
            pool: Pool::default(),
        }
    }

    #[inline(always)]
    fn take(&mut self, b: &Brief) {
        let look = &mut self.look;
        if b.freeze_undetectable {
            look.ev.freeze_undetectable_gpus += 1;
        }
        match b.coverage {
            Coverage::Full => {}
            Coverage::Short => look.any_short = true,
            Coverage::Broken(p) => {
                if p == EvidenceProblem::Frozen {
                    look.ev.frozen_gpus += 1;
                }
                look.problem = Some(look.problem.map_or(p, |q| q.min(p)));
            }
        }
        look.min_peak_milli = look.min_peak_milli.min(b.peak_util_milli);
        look.all_spin &= b.spin_candidate;
        self.pool.add(b);
    }

    /// Takes all [`lanes::L`] lanes of a lane job at once: what [`Accum::take`] of each
    /// lane's brief would give.
    #[inline(always)]
    fn take_lanes(&mut self, p: &lanes::LanePool) {
        let look = &mut self.look;
        look.ev.freeze_undetectable_gpus += p.freeze_undetectable_gpus;
        look.ev.frozen_gpus += p.frozen_gpus;
        look.any_short |= p.any_short;
        if let Some(q) = p.problem {
            look.problem = Some(look.problem.map_or(q, |r| r.min(q)));
        }
        look.min_peak_milli = look.min_peak_milli.min(p.min_peak_milli);
        look.all_spin &= p.all_spin;
        let pool = &mut self.pool;
        let lanes = lanes::L as u32;
        pool.gpus += lanes;
        pool.start = pool.start.min(p.first_t_s);
        pool.end = pool.end.max(p.last_t_s);
        pool.mem_held_gpus += p.mem_held_gpus;
        pool.smin = pool.smin.min(p.samples);
        pool.smax = pool.smax.max(p.samples);
        pool.n += u64::from(p.samples) * u64::from(lanes);
        pool.peak = pool.peak.max(p.peak_milli);
        pool.util_sum += p.util_sum;
        pool.mem_sum += p.mem_sum;
        pool.mem_n += p.mem_n;
        pool.pw_sum += p.pw_sum;
        pool.pw_n += p.pw_n;
    }

    /// The look, given the samples dropped as late over every GPU of the job.
    #[inline(always)]
    fn finish(mut self, late: u32) -> Look {
        let look = &mut self.look;
        look.ev.late_samples = late;
        look.ev.gpus_observed = self.pool.gpus;
        if self.pool.gpus == 0 {
            look.problem = Some(EvidenceProblem::MissingNode);
        }
        self.pool.finish(&mut look.ev);
        self.look
    }
}

/// The evidence pooled over a job's observed GPUs. Means are pooled over samples (one
/// division each per job, none per GPU).
struct Pool {
    gpus: u32,
    start: i64,
    end: i64,
    smin: u32,
    smax: u32,
    n: u64,
    invalid: u32,
    /// Some GPU holds more than one invalid sample for every five it keeps.
    invalid_high: bool,
    mem_held_gpus: u32,
    peak: u32,
    util_sum: u64,
    mem_sum: u64,
    mem_n: u64,
    pw_sum: u64,
    pw_n: u64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            gpus: 0,
            start: i64::MAX,
            end: i64::MIN,
            smin: u32::MAX,
            smax: 0,
            n: 0,
            invalid: 0,
            invalid_high: false,
            mem_held_gpus: 0,
            peak: 0,
            util_sum: 0,
            mem_sum: 0,
            mem_n: 0,
            pw_sum: 0,
            pw_n: 0,
        }
    }
}

impl Pool {
    #[inline(always)]
    fn add(&mut self, g: &Brief) {
        self.gpus += 1;
        if g.samples > 0 {
            self.start = self.start.min(g.first_t_s);
            self.end = self.end.max(g.last_t_s);
            self.mem_held_gpus += g.mem_held_all as u32;
        }
        self.smin = self.smin.min(g.samples);
        self.smax = self.smax.max(g.samples);
        self.n += g.samples as u64;
        self.invalid += g.invalid;
        self.invalid_high |= u64::from(g.invalid) * 5 > u64::from(g.samples);
        self.peak = self.peak.max(g.peak_util_milli);
        self.util_sum += g.sum_util_milli;
        self.mem_sum += g.sum_mem_mib;
        self.mem_n += g.mem_known as u64;
        self.pw_sum += g.sum_power_dw;
        self.pw_n += g.power_known as u64;
    }

    /// Writes the pooled figures into `ev` (nothing when no GPU was observed).
    fn finish(&self, ev: &mut Evidence) {
        if self.gpus == 0 {
            return;
        }
        ev.mem_held_gpus = self.mem_held_gpus;
        ev.invalid_samples = self.invalid;
        ev.invalid_share_exceeded = self.invalid_high;
        if self.start != i64::MAX {
            ev.window_start_s = self.start;
            ev.window_end_s = self.end;
        }
        ev.samples_min_per_gpu = self.smin;
        ev.samples_max_per_gpu = self.smax;
        ev.peak_util_pct = self.peak as f64 / 1000.0;
        ev.mean_util_pct = if self.n > 0 {
            self.util_sum as f64 / self.n as f64 / 1000.0
        } else {
            0.0
        };
        ev.mem_used_mean_mib = (self.mem_n > 0).then(|| self.mem_sum as f64 / self.mem_n as f64);
        ev.power_mean_w = (self.pw_n > 0).then(|| self.pw_sum as f64 / self.pw_n as f64 / 10.0);
    }
}

/// The nodes of an allocation, in first-seen order without repeats.
pub fn alloc_nodes(alloc: &[GpuRef]) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = Vec::new();
    for g in alloc {
        if !v.contains(&g.node) {
            v.push(g.node);
        }
    }
    v
}

/// A sample's GPU as one word, for [`Engine::route_direct_again`].
#[inline(always)]
fn route_key(s: &Sample) -> u64 {
    u64::from(s.node.0) << 16 | u64::from(s.gpu)
}

/// True when this CPU has the features [`Engine::step_each_wide`] is compiled for.
fn wide_cpu() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("bmi2")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("lzcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job_with(f: &[String; 6]) -> JobFacts {
        let [user, account, partition, qos, name, comment] = f.clone();
        JobFacts {
            user,
            account,
            partition,
            qos,
            name,
            comment,
            ..JobFacts::default()
        }
    }

    /// Strings drawn from a small alphabet, so that equal and nearly equal facts are common.
    fn facts() -> impl Strategy<Value = [String; 6]> {
        let s = || prop_oneof![Just(String::new()), "[ab]{1,3}", "[ab\u{e9}#]{0,40}"];
        (s(), s(), s(), s(), s(), s()).prop_map(|(a, b, c, d, e, f)| [a, b, c, d, e, f])
    }

    #[test]
    fn facts_seen_tells_bytes_moved_between_fields() {
        let kept = FactsSeen::of(&job_with(&["ab".into(), "c".into(), "".into(), "".into(), "".into(), "".into()]));
        let moved = job_with(&["a".into(), "bc".into(), "".into(), "".into(), "".into(), "".into()]);
        assert!(!kept.matches(&moved));
        let same = job_with(&["ab".into(), "c".into(), "".into(), "".into(), "".into(), "".into()]);
        assert!(kept.matches(&same));
    }

    proptest! {
        /// The kept facts match a job exactly when its six facts are the kept ones, string
        /// for string: an exemption is decided again whenever any of them changes.
        #[test]
        fn facts_seen_matches_exactly_equal_facts(a in facts(), b in facts(), copy in any::<bool>()) {
            let b = if copy { a.clone() } else { b };
            let kept = FactsSeen::of(&job_with(&a));
            prop_assert_eq!(kept.matches(&job_with(&b)), a == b);
        }
    }
}
