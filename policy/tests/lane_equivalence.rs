//! Differential harness for the lane fast path: two engines, one with
//! [`Engine::set_lane_path`]`(true)` and one with `(false)`, fed the same cycles, must write
//! the same findings every cycle (every policy's list), keep the same counters and level
//! dwells, serialise to the same snapshot, and stay equal once restored from it.
//!
//! The lane path keeps jobs of exactly 8 GPUs in a compact state and falls back to the general
//! per-GPU windows on any exception, so the generator's common cycle is the lane path's case
//! (one sample per GPU, all at one time, each job's samples together and in slot order, every
//! 60 s) and every exception is mixed in at random cycles, on 8-GPU jobs mostly and on jobs of
//! 1, 4 and 16 GPUs (two nodes) too: missing GPUs, silent jobs (stale, gap), skewed stamps,
//! late samples, duplicates (equal and conflicting), invalid fields, util missing with SM
//! activity present, future stamps, stamps before the job's start, frozen readings (with and
//! without power), the clock stepping back and jumping ahead, jobs leaving and arriving,
//! requeues, new allocations, reordered job lists, shuffled samples, stray samples inside a
//! job's run, a job listed twice, node scope over part of a 16-GPU job, drain confirmations
//! (hypothetical and real, covering and not), and restarts from a snapshot mid-run. Jobs of 8
//! GPUs also come split 4 + 4 and 7 + 1 over two nodes, with GPU indices 0, 2, …, 14, and with
//! their allocation in reversed or interleaved order; small jobs sometimes share (or overlap)
//! another job's node.
//!
//! A third engine has its lane path switched off and on again mid-run ([`Ev::Toggle`]) and is
//! held to the same findings and snapshots: a switch that leaves a per-cycle cache stale shows
//! up there. Findings must be identical, floats bit for bit (a NaN equals itself).
//!
//! `PROPTEST_CASES=2000 cargo test -p policy --test lane_equivalence` runs a longer soak
//! (about a minute in debug on 2 cores; the default 64 cases take about 1 s).

use policy::{
    DrainConfirmation, Engine, Finding, GpuRef, JobFacts, Mode, NodeId, Observation, Policy, PolicyConfig, Reading, Sample, Scope,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// The plan of a run.
// ---------------------------------------------------------------------------------------------

/// An epoch second far from 0, so that negative offsets and `start_s` arithmetic are real.
const T0: i64 = 1_700_000_040;
const INTERVAL_S: i64 = 60;

/// What a GPU shows, before any exception.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Look {
    /// High util, memory held, high fluctuating power.
    Busy,
    /// 0 %, no memory, idle power, no process.
    Idle,
    /// 0 %, memory held, idle power, a process: a deadlocked rank.
    Hung,
    /// 100 % util at ~70 W of 400 W, memory held: an NCCL spin.
    Spin,
    /// 3–8 % util, memory held.
    Starved,
    /// 0 %, 0 MiB, 0 W, no process count: the broken exporter.
    AllZero,
}

/// A field made invalid (a sentinel, an implausible value) or missing.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bad {
    Util150,
    UtilNegative,
    /// A present NaN (not missing): implausible.
    UtilNaN,
    /// Util and SM activity both missing (`[N/A]`): no compute reading.
    UtilMissing,
    UtilSentinel,
    MemSentinel,
    DcgmBlankPower,
    MemOverTotal,
    Power0,
    Power5000,
    PowerMissing,
    ProcsHuge,
    ProcsSentinel,
    LimitMissing,
}

/// One exception, at one cycle. Job indices are taken modulo the number of job slots, GPU
/// indices modulo the job's GPU count.
#[derive(Clone, Debug)]
enum Ev {
    /// One GPU's sample is missing.
    MissingGpu(usize, u16),
    /// The whole job's samples are missing for this many cycles.
    Silent(usize, u8),
    /// One GPU stamped this many seconds off the others (never 0).
    Skew(usize, u16, i64),
    /// One GPU's sample stamped `k` intervals before its last sample (0: the same time):
    /// not newer than the last.
    Late(usize, u16, i64),
    /// One GPU gets an extra sample stamped `k` intervals back, besides its current one.
    LateExtra(usize, u16, i64),
    /// One GPU's sample twice, identical.
    DupEqual(usize, u16),
    /// One GPU's sample twice at the same time, readings differing.
    DupConflict(usize, u16),
    /// One GPU's sample with a bad field.
    Invalid(usize, u16, Bad),
    /// Every GPU of the job with a bad field.
    InvalidAll(usize, Bad),
    /// One GPU with util missing and SM activity present.
    SmOnly(usize, u16),
    /// Every GPU of the job with util missing and SM activity present.
    SmOnlyAll(usize),
    /// One GPU stamped this many seconds in the future.
    Future(usize, u16, i64),
    /// One GPU stamped this many intervals before the job's start.
    BeforeStart(usize, u16, i64),
    /// The job's readings freeze (bit-identical, stamps still advance) for this many cycles,
    /// with power or without.
    Freeze(usize, u8, bool),
    /// The clock steps back this many intervals.
    ClockBack(i64),
    /// The clock jumps ahead this many intervals (a missed stretch of cycles).
    ClockJump(i64),
    /// The job leaves for this many cycles, then a new job (new id) arrives in its place.
    Leave(usize, u8),
    /// The job leaves and a new job (new id, starting now) takes its place at once.
    Replace(usize),
    /// The job is requeued: same id, a new start this many intervals ago.
    Requeue(usize, i64),
    /// The job's allocation moves to other nodes (same id, same start).
    NewAlloc(usize),
    /// The job list is permuted (seeded).
    Reorder(u64),
    /// The cycle's samples are shuffled (seeded).
    Shuffle(u64),
    /// A sample of a GPU no job holds, inside the job's run of samples.
    Stray(usize),
    /// The job is listed twice.
    Twice(usize),
    /// This cycle only, the scope flips (Whole ↔ the job's first node).
    ScopeFlip(usize),
    /// A drain confirmation for the job: hypothetical or real, confirmed this many seconds
    /// ago (negative: in the future), covering all of its nodes or only the first.
    Drain(usize, bool, i64, bool),
    /// Both engines are snapshotted (the JSON must be equal) and restored at once.
    Restart,
    /// The whole job resends its last samples (same stamps, same readings): a stuck
    /// exporter cache. Every one is late.
    JobRepeat(usize),
    /// Every GPU of the job stamped this many seconds off `now`, all alike (still one time
    /// for the whole job).
    JobOffset(usize, i64),
    /// The third engine's lane path is switched (on → off → on …) before this cycle.
    Toggle,
}

#[derive(Clone, Debug)]
struct JobSpec {
    gpus: u16,
    /// First GPU index on the node, for jobs of fewer than 8 GPUs.
    gpu_base: u16,
    /// Start, in intervals relative to the first cycle (negative: started before the run). The
    /// job is listed from cycle `max(0, start)` on.
    start: i64,
    /// Repeating (look, cycles) pattern of the whole job.
    looks: Vec<(Look, u8)>,
    /// One GPU that shows another look.
    odd: Option<(u16, Look)>,
    /// An account other jobs do not have (the exempt one in some configs).
    exempt_account: bool,
    /// The collector's stamps jitter: each cycle the whole job is stamped up to 19 s before
    /// `now` (one time for all its GPUs), so intervals are not exactly 60 s.
    jitter: bool,
    /// Allocation order: 0 by node then GPU index, 1 reversed, 2 interleaved (odd slots
    /// first; for 16 GPUs, the two nodes alternate). Samples follow the allocation's order.
    alloc_order: u8,
    /// 0: one node (two for 16 GPUs, 8 each), GPU indices from 0 (or `gpu_base`); 1: an 8-GPU
    /// job split 4 + 4 over two nodes; 2: split 7 + 1; 3: GPU indices spaced by 2 (0, 2, …).
    layout: u8,
    /// A job of fewer than 8 GPUs placed on job slot 0's node instead of its own: beside a
    /// small job there (GPUs shared only if their ranges meet), or inside an 8- or 16-GPU
    /// job's allocation, so those GPUs are claimed twice and their samples unattributed.
    share: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum CfgKind {
    /// The defaults, with a cancel stage at 90 m.
    Default,
    /// Window 10 m, warmup 5 m, notice 10 m, alert at 0, drain at 5 m, cancel at 15 m.
    Short,
    /// `Short` with account `lab` exempt and `idle` capped at drain.
    ShortExempt,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ScopeKind {
    Whole,
    /// The first node of job slot `n`.
    FirstNode(usize),
    /// The last node of job slot `n` (the second of a 16-GPU job).
    LastNode(usize),
}

#[derive(Clone, Debug)]
struct Plan {
    cfg: CfgKind,
    mode: Mode,
    /// Two policies sharing windows (`with_policies` + `step_each`).
    two_policies: bool,
    /// With two policies, pass only one output list (the second policy still steps).
    one_out: bool,
    scope: ScopeKind,
    /// Under node scope, drop the samples of other nodes (a per-node collector).
    scope_samples_only: bool,
    /// Act as a driver would on the lane-on engine's findings: confirm every drain verdict
    /// the next cycle (real in enforce mode, hypothetical otherwise), and replace a
    /// cancelled job by a new one.
    auto: bool,
    jobs: Vec<JobSpec>,
    cycles: Vec<Vec<Ev>>,
    /// Cycles after the final snapshot and restore.
    tail: Vec<Vec<Ev>>,
    /// Intervals between the final snapshot and the restore (a restart after downtime: the
    /// restored windows are trimmed to one window before the restore time).
    restore_after: i64,
}

// ---------------------------------------------------------------------------------------------
// Configs.
// ---------------------------------------------------------------------------------------------

fn stage(after_s: i64, verdict: &str) -> policy::StageConfig {
    policy::StageConfig {
        after: policy::DurationS(after_s),
        verdict: verdict.into(),
    }
}

fn configs(kind: CfgKind) -> (PolicyConfig, PolicyConfig) {
    let mut a = PolicyConfig::default();
    match kind {
        CfgKind::Default => a.stages.push(stage(90 * 60, "cancel")),
        CfgKind::Short | CfgKind::ShortExempt => {
            a.window = policy::DurationS(10 * 60);
            a.warmup = policy::DurationS(5 * 60);
            a.notice = policy::DurationS(10 * 60);
            a.stages = vec![stage(0, "alert"), stage(5 * 60, "drain"), stage(15 * 60, "cancel")];
            if kind == CfgKind::ShortExempt {
                a.exempt.accounts = vec!["lab".into()];
                a.ceilings.insert("idle".into(), "drain".into());
            }
        }
    }
    // The second policy shares the windows (same window, gap, skew, interval and ingest
    // thresholds) and differs in everything else it may.
    let mut b = a.clone();
    b.util_threshold_pct = 30.0;
    b.warmup = policy::DurationS(a.warmup.0 + 120);
    b.notice = policy::DurationS(0);
    b.stages = vec![stage(60, "alert"), stage(2 * 60, "drain"), stage(a.window.0 + 180, "cancel")];
    b.ceilings.insert("hung".into(), "drain".into());
    b.exempt.accounts = vec!["ml".into()];
    (a, b)
}

// ---------------------------------------------------------------------------------------------
// Readings.
// ---------------------------------------------------------------------------------------------

/// The sample GPU `r` in `look` reports, stamped `t_s`; `key` (a time) decides the noise, so
/// that two samples with one key are bit-identical (a freeze) and others differ.
fn reading(look: Look, t_s: i64, key: i64, r: GpuRef) -> Sample {
    let salt = (r.node.0 as i64 * 31 + r.gpu as i64 * 7 + key.div_euclid(INTERVAL_S)).rem_euclid(11);
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
    }
}

fn spoil(s: &mut Sample, bad: Bad) {
    match bad {
        Bad::Util150 => s.util_pct = 150.0.into(),
        Bad::UtilNegative => s.util_pct = (-3.0).into(),
        Bad::UtilNaN => s.util_pct = Reading::value(f64::NAN),
        Bad::UtilMissing => {
            s.util_pct = Reading::MISSING;
            s.sm_active = Reading::MISSING;
        }
        Bad::UtilSentinel => s.util_pct = policy::SENTINEL_U32.into(),
        Bad::MemSentinel => s.mem_used_mib = policy::SENTINEL_U32.into(),
        Bad::DcgmBlankPower => s.power_w = policy::DCGM_FP64_BLANK.into(),
        Bad::MemOverTotal => s.mem_used_mib = 90_000.0.into(),
        Bad::Power0 => s.power_w = 0.0.into(),
        Bad::Power5000 => s.power_w = 5000.0.into(),
        Bad::PowerMissing => s.power_w = Reading::MISSING,
        Bad::ProcsHuge => s.procs = Some(5000),
        Bad::ProcsSentinel => s.procs = Some(u32::MAX),
        Bad::LimitMissing => s.power_limit_w = Reading::MISSING,
    }
}

/// Util moved to SM activity: util missing, SM activity the same compute reading.
fn sm_only(s: &mut Sample) {
    if let Some(u) = s.util_pct.get() {
        s.sm_active = (u / 100.0).into();
        s.util_pct = Reading::MISSING;
    }
}

/// A small deterministic PRNG for seeded shuffles (splitmix64).
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

// ---------------------------------------------------------------------------------------------
// The world the plan describes, cycle by cycle.
// ---------------------------------------------------------------------------------------------

/// One job slot's current state.
struct Slot {
    spec: JobSpec,
    /// Generation: a new job (new id) in this slot each time it is replaced.
    gen: u32,
    /// Allocation generation: moves the job's nodes.
    alloc_gen: u32,
    start_s: i64,
    /// Listed from this cycle on (leaves and arrivals).
    listed_from: usize,
    silent_until: usize,
    /// (until cycle, key time, with power).
    frozen: Option<(usize, i64, bool)>,
    /// Per GPU, the stamp of the last sample sent.
    last_sent: Vec<Option<i64>>,
}

impl Slot {
    fn id(&self, k: usize) -> String {
        if self.gen == 0 {
            format!("{}", 1000 + k)
        } else {
            format!("{}_{}", 1000 + k, self.gen)
        }
    }

    fn nodes(&self, k: usize) -> Vec<NodeId> {
        let slot = if self.spec.share && self.spec.gpus < 8 { 0 } else { k as u32 };
        // Odd allocation generations (a job moved by `NewAlloc`) land on node ids of 2^20 and
        // up, which the engine routes through its sparse map rather than its dense table.
        let far = if self.alloc_gen % 2 == 1 { 1 << 20 } else { 0 };
        let first = far + slot * 2 + self.alloc_gen * 100;
        if self.spec.gpus > 8 || (self.spec.gpus == 8 && matches!(self.spec.layout % 4, 1 | 2)) {
            vec![NodeId(first), NodeId(first + 1)]
        } else {
            vec![NodeId(first)]
        }
    }

    /// Per node of the job, its GPU indices `lo..hi` (before [`JobSpec::layout`]'s spacing).
    fn ranges(&self) -> Vec<(u16, u16)> {
        let b = self.spec.gpu_base;
        match (self.spec.gpus, self.spec.layout % 4) {
            (16, _) => vec![(0, 8), (0, 8)],
            (8, 1) => vec![(0, 4), (0, 4)],
            (8, 2) => vec![(0, 7), (0, 1)],
            (8, _) => vec![(0, 8)],
            (g, _) => vec![(b, b + g)],
        }
    }

    fn facts(&self, k: usize) -> JobFacts {
        let mut alloc = Vec::new();
        let spaced = self.spec.layout % 4 == 3;
        for (n, (lo, hi)) in self.nodes(k).into_iter().zip(self.ranges()) {
            alloc.extend((lo..hi).map(|g| GpuRef {
                node: n,
                gpu: if spaced { g * 2 } else { g },
            }));
        }
        match self.spec.alloc_order % 3 {
            1 => alloc.reverse(),
            2 if self.spec.gpus > 8 && self.spec.layout % 4 == 0 => {
                // n0g0, n1g0, n0g1, n1g1, …
                let (a, b) = alloc.split_at(8);
                alloc = a.iter().zip(b).flat_map(|(x, y)| [*x, *y]).collect();
            }
            2 => {
                let odd = alloc.iter().skip(1).step_by(2);
                let even = alloc.iter().step_by(2);
                alloc = odd.chain(even).copied().collect();
            }
            _ => {}
        }
        JobFacts {
            job_id: self.id(k),
            user: format!("u{k}"),
            account: if self.spec.exempt_account { "lab".into() } else { "ml".into() },
            partition: "gpu".into(),
            qos: "normal".into(),
            name: "train".into(),
            comment: String::new(),
            start_s: self.start_s,
            alloc,
        }
    }

    fn look_at(&self, cycle: usize) -> Look {
        let total: usize = self.spec.looks.iter().map(|l| l.1.max(1) as usize).sum();
        let mut t = cycle % total.max(1);
        for &(l, n) in &self.spec.looks {
            let n = n.max(1) as usize;
            if t < n {
                return l;
            }
            t -= n;
        }
        Look::Busy
    }
}

/// The two (or three) engines under test and what the run compares.
struct Pair {
    on: Engine,
    off: Engine,
    /// A third engine whose lane path is switched at every [`Ev::Toggle`] (starting on),
    /// held to the same findings: switching mid-run changes nothing either.
    flip: Option<(Engine, bool)>,
    policies: Vec<Policy>,
    mode: Mode,
    /// Lists handed to `step_each`.
    outs: usize,
    /// Jobs on the lane path in the lane-on engine, summed over cycles: the harness proves
    /// nothing unless the lane path ran.
    lane_job_cycles: usize,
}

impl Pair {
    fn new(policies: Vec<Policy>, mode: Mode, outs: usize) -> Pair {
        let build = |on: bool| {
            let mut e = Engine::with_policies(policies.clone(), mode).expect("policies share windows");
            e.set_lane_path(on);
            // The lane-off engine also runs the plain build of `step_each`, so the pair holds
            // the AVX2 twin (where the CPU has it) to the same results too.
            e.set_avx2(on);
            e
        };
        // The switched engine runs the plain build: where the CPU has AVX2, the lane-on
        // engine runs the lane path's hand-written AVX2 (`lanes_avx2.rs`) and this one its
        // scalar form, so both are held to the general path.
        let mut flip = build(true);
        flip.set_avx2(false);
        Pair {
            on: build(true),
            off: build(false),
            flip: Some((flip, true)),
            policies,
            mode,
            outs,
            lane_job_cycles: 0,
        }
    }

    fn toggle(&mut self) {
        if let Some((e, on)) = &mut self.flip {
            *on = !*on;
            e.set_lane_path(*on);
        }
    }

    /// Snapshots both engines at `now`; the JSON must be equal. Restores each from its own
    /// snapshot (through JSON) with its own lane setting; the restored engines hold the first
    /// policy only (there is no restore of several).
    fn restart(&mut self, now: i64, ctx: &str) -> Result<(), String> {
        let (a, b) = self.snapshots(now, ctx)?;
        let p = self.policies[0].clone();
        let load = |json: &str, on: bool| {
            let snap: policy::EngineSnapshot = serde_json::from_str(json).expect("snapshot JSON reads back");
            let mut e = Engine::restore(p.clone(), self.mode, snap, now);
            e.set_lane_path(on);
            e
        };
        self.on = load(&a, true);
        self.off = load(&b, false);
        if let Some((e, on)) = &mut self.flip {
            let json = serde_json::to_string(&e.snapshot(now)).expect("snapshot serialises");
            same_json(ctx, "switched engine", &json, &b)?;
            *e = load(&json, *on);
            e.set_avx2(false);
        }
        self.policies.truncate(1);
        self.outs = 1;
        Ok(())
    }

    fn snapshots(&self, now: i64, ctx: &str) -> Result<(String, String), String> {
        let a = serde_json::to_string(&self.on.snapshot(now)).expect("snapshot serialises");
        let b = serde_json::to_string(&self.off.snapshot(now)).expect("snapshot serialises");
        same_json(ctx, "lane on", &a, &b)?;
        Ok((a, b))
    }
}

/// `Err` showing where two snapshots' JSON first differ.
fn same_json(ctx: &str, who: &str, a: &str, b: &str) -> Result<(), String> {
    if a == b {
        return Ok(());
    }
    let at = a.bytes().zip(b.bytes()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let from = at.saturating_sub(120);
    let cut = |s: &str| String::from_utf8_lossy(&s.as_bytes()[from.min(s.len())..(at + 120).min(s.len())]).into_owned();
    Err(format!(
        "{ctx}: snapshots differ ({who} vs lane off) at byte {at} (lengths {} vs {})\n  {who}: …{}…\n  lane off: …{}…",
        a.len(),
        b.len(),
        cut(a),
        cut(b),
    ))
}

/// The first difference between two cycles' findings, readably.
fn diff_findings(jobs: &[JobFacts], on: &[Finding], off: &[Finding]) -> Option<String> {
    if on.len() != off.len() {
        return Some(format!("{} findings with the lane path, {} without", on.len(), off.len()));
    }
    for (i, (a, b)) in on.iter().zip(off).enumerate() {
        // `!=` alone would call two NaN figures different; their Debug forms are the same
        // (and distinct values, −0.0 and 0.0 included, print differently).
        if a != b && format!("{a:?}") != format!("{b:?}") {
            let job = jobs
                .get(i)
                .map_or("?".to_string(), |j| format!("{} ({} GPUs)", j.job_id, j.alloc.len()));
            let mut fields = Vec::new();
            macro_rules! cmp {
                ($($f:ident).+) => {
                    if a.$($f).+ != b.$($f).+ {
                        fields.push(format!("{}: {:?} (on) vs {:?} (off)", stringify!($($f).+), a.$($f).+, b.$($f).+));
                    }
                };
            }
            cmp!(job_index);
            cmp!(verdict);
            cmp!(signature);
            cmp!(cause);
            cmp!(cap);
            cmp!(dwell_s);
            cmp!(wasted_gpu_h);
            cmp!(hypothetical);
            cmp!(exempt);
            cmp!(evidence.window_start_s);
            cmp!(evidence.window_end_s);
            cmp!(evidence.gpus_allocated);
            cmp!(evidence.gpus_observed);
            cmp!(evidence.samples_min_per_gpu);
            cmp!(evidence.samples_max_per_gpu);
            cmp!(evidence.invalid_samples);
            cmp!(evidence.late_samples);
            cmp!(evidence.frozen_gpus);
            cmp!(evidence.freeze_undetectable_gpus);
            cmp!(evidence.peak_util_pct);
            cmp!(evidence.mean_util_pct);
            cmp!(evidence.mem_used_mean_mib);
            cmp!(evidence.mem_held_gpus);
            cmp!(evidence.power_mean_w);
            cmp!(evidence.procs_unknown);
            cmp!(evidence.power_unknown);
            cmp!(evidence.wasted_gpus);
            if fields.is_empty() {
                fields.push(format!("on {a:?}\n  off {b:?}"));
            }
            return Some(format!("job #{i} {job}: {}", fields.join("; ")));
        }
    }
    None
}

/// Runs a plan; `Err` names the first divergence.
fn run_plan(plan: &Plan) -> Result<Stats, String> {
    let (ca, cb) = configs(plan.cfg);
    let mut policies = vec![Policy::new(&ca).expect("config a is valid")];
    if plan.two_policies {
        policies.push(Policy::new(&cb).expect("config b is valid"));
    }
    let outs = if plan.two_policies && plan.one_out { 1 } else { policies.len() };
    let mut pair = Pair::new(policies, plan.mode, outs);
    let mut world = World::new(plan);
    let mut stats = Stats::default();
    for (c, evs) in plan.cycles.iter().enumerate() {
        world.cycle(&mut pair, c, evs, &mut stats, "run")?;
    }
    stats.lane_job_cycles += pair.lane_job_cycles;
    let taken = world.now;
    let ctx = format!("final snapshot at {taken}");
    let (a, b) = pair.snapshots(taken, &ctx)?;
    if let Some((e, _)) = &pair.flip {
        let json = serde_json::to_string(&e.snapshot(taken)).expect("snapshot serialises");
        same_json(&ctx, "switched engine", &json, &b)?;
    }
    world.now += plan.restore_after * INTERVAL_S;
    let now = world.now;
    // Restore each snapshot (single policy) with each lane setting; all must agree while
    // stepped further, the cross-restored one included.
    let p = pair.policies[0].clone();
    let load = |json: &str, on: bool| {
        let snap: policy::EngineSnapshot = serde_json::from_str(json).expect("snapshot JSON reads back");
        let mut e = Engine::restore(p.clone(), plan.mode, snap, now);
        e.set_lane_path(on);
        e
    };
    let mut pair = Pair {
        on: load(&a, true),
        off: load(&b, false),
        // The switched engine resumes with the lane path off; the tail's toggles turn it on.
        // It runs the plain build (see `Pair::new`).
        flip: Some((
            {
                let mut e = load(&a, false);
                e.set_avx2(false);
                e
            },
            false,
        )),
        policies: vec![p.clone()],
        mode: plan.mode,
        outs: 1,
        lane_job_cycles: 0,
    };
    let mut cross = Pair {
        on: load(&b, true),
        off: load(&a, false),
        flip: None,
        policies: vec![p],
        mode: plan.mode,
        outs: 1,
        lane_job_cycles: 0,
    };
    let base = plan.cycles.len();
    for (c, evs) in plan.tail.iter().enumerate() {
        // Both pairs see the same cycle: the world advances once, the cross pair replays it.
        let obs = world.cycle(&mut pair, base + c, evs, &mut stats, "after restore")?;
        let (now, jobs, samples, scope, drains) = obs;
        let o = Observation {
            jobs: &jobs,
            samples: &samples,
            scope,
            drains: &drains,
        };
        compare_step(&mut cross, now, &o, &format!("after restore (cross) cycle {}", base + c))?;
    }
    pair.snapshots(world.now, "tail snapshot")?;
    stats.lane_job_cycles += pair.lane_job_cycles + cross.lane_job_cycles;
    Ok(stats)
}

/// What a run exercised, to check that the generators reach the lane path's exceptions.
#[derive(Default, Debug)]
struct Stats {
    cycles: usize,
    findings: usize,
    alerts: usize,
    drains: usize,
    cancels: usize,
    evidence_problems: usize,
    /// See `Pair::lane_job_cycles`.
    lane_job_cycles: usize,
}

/// Steps both engines of `pair` on `obs` and compares everything they show.
fn compare_step(pair: &mut Pair, now: i64, obs: &Observation<'_>, ctx: &str) -> Result<Vec<Vec<Finding>>, String> {
    let mut a: Vec<Vec<Finding>> = vec![Vec::new(); pair.outs];
    let mut b: Vec<Vec<Finding>> = vec![Vec::new(); pair.outs];
    pair.on.step_each(now, obs, &mut a);
    // The lane-off engine gets the cycle's samples ordered by GPU index first, so that no
    // job's samples lie together: it always routes them by sorting, while the lane-on engine
    // routes directly and keeps last cycle's routing where the samples name the same GPUs
    // (`Engine::route_direct_again`). Findings never depend on arrival order.
    let mut by_gpu = obs.samples.to_vec();
    by_gpu.sort_by_key(|s| (s.gpu, s.node.0, s.t_s));
    let by_gpu_obs = Observation { samples: &by_gpu, ..*obs };
    pair.off.step_each(now, &by_gpu_obs, &mut b);
    pair.lane_job_cycles += pair.on.lane_jobs();
    if pair.off.lane_jobs() != 0 {
        return Err(format!(
            "{ctx} (now {now}): the lane-off engine holds {} jobs on the lane path",
            pair.off.lane_jobs()
        ));
    }
    for p in 0..pair.outs {
        if let Some(d) = diff_findings(obs.jobs, &a[p], &b[p]) {
            return Err(format!("{ctx} (now {now}), policy {p}: lane path on and off disagree: {d}"));
        }
    }
    if let Some((e, on)) = &mut pair.flip {
        let mut c: Vec<Vec<Finding>> = vec![Vec::new(); pair.outs];
        e.step_each(now, obs, &mut c);
        for p in 0..pair.outs {
            if let Some(d) = diff_findings(obs.jobs, &c[p], &b[p]) {
                let now_on = if *on { "on" } else { "off" };
                return Err(format!(
                    "{ctx} (now {now}), policy {p}: the engine whose lane path was switched (now {now_on}) and the lane-off one disagree (\"on\" below is the switched one): {d}"
                ));
            }
        }
        if e.counters() != pair.off.counters() || e.tracked_jobs() != pair.off.tracked_jobs() {
            return Err(format!("{ctx} (now {now}): the switched engine's counters or tracked jobs differ"));
        }
        for pos in 0..obs.jobs.len() {
            if e.level_dwells_s(pos, now) != pair.off.level_dwells_s(pos, now) {
                return Err(format!(
                    "{ctx} (now {now}): the switched engine's level dwells of job #{pos} differ"
                ));
            }
        }
    }
    if pair.on.counters() != pair.off.counters() {
        return Err(format!(
            "{ctx} (now {now}): counters differ: on {:?}, off {:?}",
            pair.on.counters(),
            pair.off.counters()
        ));
    }
    if pair.on.tracked_jobs() != pair.off.tracked_jobs() {
        return Err(format!(
            "{ctx} (now {now}): tracked jobs differ: on {}, off {}",
            pair.on.tracked_jobs(),
            pair.off.tracked_jobs()
        ));
    }
    for pos in 0..obs.jobs.len() {
        let (x, y) = (pair.on.level_dwells_s(pos, now), pair.off.level_dwells_s(pos, now));
        if x != y {
            return Err(format!("{ctx} (now {now}): level dwells of job #{pos} differ: on {x:?}, off {y:?}"));
        }
    }
    Ok(a)
}

type Cycle = (i64, Vec<JobFacts>, Vec<Sample>, Scope, Vec<DrainConfirmation>);

struct World {
    slots: Vec<Slot>,
    now: i64,
    scope: ScopeKind,
    scope_samples_only: bool,
    mode: Mode,
    auto: bool,
    /// Slots whose job got a drain verdict (policy 0) last cycle, with that job's id.
    drained: Vec<(usize, String)>,
    /// Slots whose job was cancelled last cycle.
    cancelled: Vec<usize>,
}

impl World {
    fn new(plan: &Plan) -> World {
        let slots = plan
            .jobs
            .iter()
            .map(|s| Slot {
                spec: s.clone(),
                gen: 0,
                alloc_gen: 0,
                start_s: T0 + s.start * INTERVAL_S,
                listed_from: s.start.max(0) as usize,
                silent_until: 0,
                frozen: None,
                last_sent: vec![None; s.gpus as usize],
            })
            .collect();
        World {
            slots,
            now: T0 - INTERVAL_S,
            scope: plan.scope,
            scope_samples_only: plan.scope_samples_only,
            mode: plan.mode,
            auto: plan.auto,
            drained: Vec::new(),
            cancelled: Vec::new(),
        }
    }

    fn scope_node(&self, k: ScopeKind) -> Scope {
        match k {
            ScopeKind::Whole => Scope::Whole,
            ScopeKind::FirstNode(n) => {
                let k = n % self.slots.len();
                Scope::Node(self.slots[k].nodes(k)[0])
            }
            ScopeKind::LastNode(n) => {
                let k = n % self.slots.len();
                Scope::Node(*self.slots[k].nodes(k).last().unwrap())
            }
        }
    }

    /// Builds cycle `c` from its events, steps `pair` on it and compares.
    fn cycle(&mut self, pair: &mut Pair, c: usize, evs: &[Ev], stats: &mut Stats, phase: &str) -> Result<Cycle, String> {
        let ns = self.slots.len();
        let js = |j: &usize| *j % ns;
        let gs = |slots: &[Slot], j: usize, g: &u16| (*g % slots[j].spec.gpus) as usize;

        // Time first.
        self.now += INTERVAL_S;
        for ev in evs {
            match ev {
                Ev::ClockBack(k) => self.now -= k * INTERVAL_S,
                Ev::ClockJump(k) => self.now += k * INTERVAL_S,
                _ => {}
            }
        }
        let now = self.now;

        // The job set. Jobs the driver cancelled last cycle are gone; new ones take their slots.
        for k in std::mem::take(&mut self.cancelled) {
            let s = &mut self.slots[k];
            s.gen += 1;
            s.start_s = now - INTERVAL_S;
            s.last_sent.iter_mut().for_each(|t| *t = None);
        }
        for ev in evs {
            match ev {
                Ev::Leave(j, n) => {
                    let k = js(j);
                    let s = &mut self.slots[k];
                    s.gen += 1;
                    s.listed_from = c + 1 + *n as usize;
                    s.start_s = now + (1 + *n as i64) * INTERVAL_S;
                    s.last_sent.iter_mut().for_each(|t| *t = None);
                }
                Ev::Replace(j) => {
                    let k = js(j);
                    let s = &mut self.slots[k];
                    s.gen += 1;
                    s.listed_from = s.listed_from.min(c);
                    s.start_s = now - INTERVAL_S;
                    s.last_sent.iter_mut().for_each(|t| *t = None);
                }
                Ev::Requeue(j, ago) => {
                    let s = &mut self.slots[js(j)];
                    s.start_s = now - ago * INTERVAL_S;
                }
                Ev::NewAlloc(j) => {
                    let s = &mut self.slots[js(j)];
                    s.alloc_gen += 1;
                    s.last_sent.iter_mut().for_each(|t| *t = None);
                }
                Ev::Silent(j, n) => {
                    let s = &mut self.slots[js(j)];
                    s.silent_until = s.silent_until.max(c + *n as usize);
                }
                Ev::Freeze(j, n, power) => {
                    let s = &mut self.slots[js(j)];
                    s.frozen = Some((c + *n as usize, now, *power));
                }
                _ => {}
            }
        }
        let listed: Vec<usize> = (0..ns).filter(|&k| self.slots[k].listed_from <= c).collect();
        let mut jobs: Vec<JobFacts> = listed.iter().map(|&k| self.slots[k].facts(k)).collect();

        // Samples, each job's together in slot order.
        let mut samples: Vec<Sample> = Vec::new();
        for &k in &listed {
            let s = &self.slots[k];
            if s.silent_until > c {
                continue;
            }
            let facts = &jobs[listed.iter().position(|&x| x == k).unwrap()];
            let look = s.look_at(c);
            let frozen = s.frozen.filter(|f| f.0 > c);
            let mut stamp = now;
            if s.spec.jitter {
                stamp -= ((c as i64 * 7 + k as i64 * 3) * 2_654_435_761).rem_euclid(20);
            }
            for ev in evs {
                if let Ev::JobOffset(j, d) = ev {
                    if js(j) == k {
                        stamp = now + d;
                    }
                }
            }
            let repeat = evs.iter().any(|e| matches!(e, Ev::JobRepeat(j) if js(j) == k));
            let mut mine: Vec<Sample> = Vec::new();
            for (gi, &r) in facts.alloc.iter().enumerate() {
                let l = match s.spec.odd {
                    Some((g, o)) if (g % s.spec.gpus) as usize == gi => o,
                    _ => look,
                };
                let key = frozen.map_or(stamp, |f| f.1);
                let mut smp = reading(l, stamp, key, r);
                if repeat {
                    if let Some(t) = s.last_sent[gi] {
                        smp = reading(l, t, frozen.map_or(t, |f| f.1), r);
                    }
                }
                if frozen.is_some_and(|f| !f.2) {
                    smp.power_w = Reading::MISSING;
                }
                let mut skip = false;
                let mut extra: Vec<Sample> = Vec::new();
                for ev in evs {
                    match ev {
                        Ev::MissingGpu(j, g) if js(j) == k && gs(&self.slots, k, g) == gi => skip = true,
                        Ev::Skew(j, g, d) if js(j) == k && gs(&self.slots, k, g) == gi => smp.t_s += d,
                        Ev::Late(j, g, back) if js(j) == k && gs(&self.slots, k, g) == gi => {
                            smp.t_s = s.last_sent[gi].unwrap_or(now - INTERVAL_S) - back * INTERVAL_S;
                        }
                        Ev::LateExtra(j, g, back) if js(j) == k && gs(&self.slots, k, g) == gi => {
                            let t = now - back * INTERVAL_S;
                            extra.push(reading(l, t, t, r));
                        }
                        Ev::DupEqual(j, g) if js(j) == k && gs(&self.slots, k, g) == gi => extra.push(smp),
                        Ev::DupConflict(j, g) if js(j) == k && gs(&self.slots, k, g) == gi => {
                            let mut o = smp;
                            o.util_pct = (o.util_pct.get().unwrap_or(0.0) + 1.0).min(100.0).into();
                            o.power_w = (o.power_w.get().unwrap_or(100.0) + 7.5).into();
                            extra.push(o);
                        }
                        Ev::Invalid(j, g, bad) if js(j) == k && gs(&self.slots, k, g) == gi => spoil(&mut smp, *bad),
                        Ev::InvalidAll(j, bad) if js(j) == k => spoil(&mut smp, *bad),
                        Ev::SmOnly(j, g) if js(j) == k && gs(&self.slots, k, g) == gi => sm_only(&mut smp),
                        Ev::SmOnlyAll(j) if js(j) == k => sm_only(&mut smp),
                        Ev::Future(j, g, d) if js(j) == k && gs(&self.slots, k, g) == gi => smp.t_s = now + d,
                        Ev::BeforeStart(j, g, back) if js(j) == k && gs(&self.slots, k, g) == gi => {
                            smp.t_s = s.start_s - back * INTERVAL_S;
                        }
                        _ => {}
                    }
                }
                if !skip {
                    mine.push(smp);
                }
                mine.extend(extra);
            }
            for ev in evs {
                if let Ev::Stray(j) = ev {
                    if js(j) == k && !mine.is_empty() {
                        // GPU 31 of the job's first node: no job holds it (jobs use 0..16).
                        let r = GpuRef {
                            node: facts.alloc[0].node,
                            gpu: 31,
                        };
                        let at = mine.len() / 2;
                        mine.insert(at, reading(Look::Busy, now, now, r));
                    }
                }
            }
            samples.extend(mine);
        }
        // Remember what each GPU was last sent (the newest stamp).
        for &k in &listed {
            let facts = self.slots[k].facts(k);
            let s = &mut self.slots[k];
            for smp in &samples {
                if let Some(gi) = facts.alloc.iter().position(|g| g.node == smp.node && g.gpu == smp.gpu) {
                    s.last_sent[gi] = Some(s.last_sent[gi].map_or(smp.t_s, |t| t.max(smp.t_s)));
                }
            }
        }

        // Scope, then the list's and samples' order.
        let mut scope = self.scope_node(self.scope);
        for ev in evs {
            if let Ev::ScopeFlip(j) = ev {
                scope = match scope {
                    Scope::Whole => self.scope_node(ScopeKind::FirstNode(*j)),
                    Scope::Node(_) => Scope::Whole,
                };
            }
        }
        if let (Scope::Node(n), true) = (scope, self.scope_samples_only) {
            samples.retain(|s| s.node == n);
        }
        let mut drains = Vec::new();
        for (k, id) in std::mem::take(&mut self.drained) {
            if self.slots[k].id(k) == id && self.slots[k].listed_from <= c {
                drains.push(DrainConfirmation {
                    job_id: id,
                    nodes: self.slots[k].nodes(k),
                    confirmed_s: now - 30,
                    hypothetical: self.mode != Mode::Enforce,
                });
            }
        }
        for ev in evs {
            match ev {
                Ev::Reorder(seed) => shuffle(&mut jobs, *seed),
                Ev::Shuffle(seed) => shuffle(&mut samples, *seed),
                Ev::Twice(j) => {
                    let k = js(j);
                    if let Some(f) = jobs.iter().find(|f| f.job_id == self.slots[k].id(k)).cloned() {
                        jobs.push(f);
                    }
                }
                Ev::Drain(j, hyp, ago, all) => {
                    let k = js(j);
                    let nodes = self.slots[k].nodes(k);
                    drains.push(DrainConfirmation {
                        job_id: self.slots[k].id(k),
                        nodes: if *all { nodes } else { nodes[..1].to_vec() },
                        confirmed_s: now - ago,
                        hypothetical: *hyp,
                    });
                }
                _ => {}
            }
        }

        for ev in evs {
            if let Ev::Toggle = ev {
                pair.toggle();
            }
        }
        let ctx = format!("{phase} cycle {c} events {evs:?}");
        let obs = Observation {
            jobs: &jobs,
            samples: &samples,
            scope,
            drains: &drains,
        };
        let found = compare_step(pair, now, &obs, &ctx)?;
        stats.cycles += 1;
        if self.auto {
            for f in found.first().into_iter().flatten() {
                let id = &jobs[f.job_index as usize].job_id;
                let Some(k) = (0..ns).find(|&k| self.slots[k].id(k) == *id) else {
                    continue;
                };
                if f.verdict == policy::Verdict::Cancel {
                    if !self.cancelled.contains(&k) {
                        self.cancelled.push(k);
                    }
                } else if f.verdict == policy::Verdict::Drain {
                    self.drained.push((k, id.clone()));
                }
            }
        }
        for f in found.iter().flatten() {
            stats.findings += 1;
            match f.verdict {
                policy::Verdict::Alert => stats.alerts += 1,
                policy::Verdict::Drain => stats.drains += 1,
                policy::Verdict::Cancel => stats.cancels += 1,
                policy::Verdict::InsufficientEvidence => stats.evidence_problems += 1,
                _ => {}
            }
        }
        if evs.iter().any(|e| matches!(e, Ev::Restart)) {
            pair.restart(now, &ctx)?;
        }
        Ok((now, jobs, samples, scope, drains))
    }
}

// ---------------------------------------------------------------------------------------------
// Generators.
// ---------------------------------------------------------------------------------------------

fn look() -> impl Strategy<Value = Look> {
    prop_oneof![
        3 => Just(Look::Busy),
        3 => Just(Look::Idle),
        3 => Just(Look::Hung),
        2 => Just(Look::Spin),
        1 => Just(Look::Starved),
        1 => Just(Look::AllZero),
    ]
}

fn bad() -> impl Strategy<Value = Bad> {
    prop_oneof![
        Just(Bad::Util150),
        Just(Bad::UtilNegative),
        Just(Bad::UtilNaN),
        Just(Bad::UtilMissing),
        Just(Bad::UtilSentinel),
        Just(Bad::MemSentinel),
        Just(Bad::DcgmBlankPower),
        Just(Bad::MemOverTotal),
        Just(Bad::Power0),
        Just(Bad::Power5000),
        Just(Bad::PowerMissing),
        Just(Bad::ProcsHuge),
        Just(Bad::ProcsSentinel),
        Just(Bad::LimitMissing),
    ]
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        prop_oneof![7 => Just(8u16), 1 => Just(1u16), 1 => Just(4u16), 2 => Just(16u16)],
        prop_oneof![Just(0u16), Just(4u16)],
        -40i64..8,
        prop::collection::vec((look(), 3u8..40), 1..4),
        prop::option::weighted(0.25, (0u16..16, look())),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.25),
        prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        prop::bool::weighted(0.3),
        prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
    )
        .prop_map(
            |(gpus, gpu_base, start, looks, odd, exempt_account, jitter, alloc_order, share, layout)| JobSpec {
                gpus,
                gpu_base,
                start,
                looks,
                odd,
                exempt_account,
                jitter,
                alloc_order,
                share,
                layout,
            },
        )
}

fn ev() -> impl Strategy<Value = Ev> {
    let j = 0usize..8;
    let g = 0u16..16;
    prop_oneof![
        4 => (j.clone(), g.clone()).prop_map(|(j, g)| Ev::MissingGpu(j, g)),
        2 => (j.clone(), 2u8..8).prop_map(|(j, n)| Ev::Silent(j, n)),
        3 => (j.clone(), g.clone(), prop_oneof![-59i64..0, 1i64..60]).prop_map(|(j, g, d)| Ev::Skew(j, g, d)),
        2 => (j.clone(), g.clone(), 0i64..3).prop_map(|(j, g, k)| Ev::Late(j, g, k)),
        2 => (j.clone(), g.clone(), 1i64..4).prop_map(|(j, g, k)| Ev::LateExtra(j, g, k)),
        2 => (j.clone(), g.clone()).prop_map(|(j, g)| Ev::DupEqual(j, g)),
        2 => (j.clone(), g.clone()).prop_map(|(j, g)| Ev::DupConflict(j, g)),
        4 => (j.clone(), g.clone(), bad()).prop_map(|(j, g, b)| Ev::Invalid(j, g, b)),
        1 => (j.clone(), bad()).prop_map(|(j, b)| Ev::InvalidAll(j, b)),
        2 => (j.clone(), g.clone()).prop_map(|(j, g)| Ev::SmOnly(j, g)),
        1 => j.clone().prop_map(Ev::SmOnlyAll),
        2 => (j.clone(), g.clone(), prop_oneof![Just(61i64), Just(121), Just(600), Just(3600)]).prop_map(|(j, g, d)| Ev::Future(j, g, d)),
        1 => (j.clone(), g.clone(), 1i64..4).prop_map(|(j, g, k)| Ev::BeforeStart(j, g, k)),
        2 => (j.clone(), 10u8..25, any::<bool>()).prop_map(|(j, n, p)| Ev::Freeze(j, n, p)),
        1 => (1i64..6).prop_map(Ev::ClockBack),
        1 => (2i64..30).prop_map(Ev::ClockJump),
        1 => (j.clone(), 0u8..4).prop_map(|(j, n)| Ev::Leave(j, n)),
        1 => j.clone().prop_map(Ev::Replace),
        1 => (j.clone(), 0i64..4).prop_map(|(j, a)| Ev::Requeue(j, a)),
        1 => j.clone().prop_map(Ev::NewAlloc),
        2 => any::<u64>().prop_map(Ev::Reorder),
        2 => any::<u64>().prop_map(Ev::Shuffle),
        1 => j.clone().prop_map(Ev::Stray),
        1 => j.clone().prop_map(Ev::Twice),
        1 => j.clone().prop_map(Ev::ScopeFlip),
        4 => (j.clone(), any::<bool>(), prop_oneof![Just(-60i64), 0i64..900], prop::bool::weighted(0.8))
            .prop_map(|(j, h, a, all)| Ev::Drain(j, h, a, all)),
        1 => Just(Ev::Restart),
        1 => j.clone().prop_map(Ev::JobRepeat),
        1 => (j.clone(), prop_oneof![-59i64..0, 1i64..59]).prop_map(|(j, d)| Ev::JobOffset(j, d)),
        2 => Just(Ev::Toggle),
    ]
}

fn cycle_events() -> impl Strategy<Value = Vec<Ev>> {
    prop_oneof![
        12 => Just(Vec::new()),
        5 => prop::collection::vec(ev(), 1..2),
        2 => prop::collection::vec(ev(), 2..4),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        (
            prop_oneof![Just(CfgKind::Default), Just(CfgKind::Short), Just(CfgKind::ShortExempt)],
            prop_oneof![3 => Just(Mode::Observe), 3 => Just(Mode::Enforce), 1 => Just(Mode::ObserveReported)],
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.2),
            prop_oneof![
                6 => Just(ScopeKind::Whole),
                1 => (0usize..8).prop_map(ScopeKind::FirstNode),
                1 => (0usize..8).prop_map(ScopeKind::LastNode),
            ],
            any::<bool>(),
            prop::bool::weighted(0.6),
        ),
        prop::collection::vec(job_spec(), 1..7),
        prop::collection::vec(cycle_events(), 20..60),
        prop::collection::vec(cycle_events(), 5..20),
        prop_oneof![3 => Just(0i64), 1 => 1i64..40],
    )
        .prop_map(
            |((cfg, mode, two_policies, one_out, scope, scope_samples_only, auto), jobs, cycles, tail, restore_after)| Plan {
                cfg,
                mode,
                two_policies,
                one_out,
                scope,
                scope_samples_only,
                auto,
                jobs,
                cycles,
                tail,
                restore_after,
            },
        )
}

/// 64 cases (about a second in debug); `PROPTEST_CASES=N` runs more.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Lane path on and off: the same findings every cycle (every policy), the same counters,
    /// level dwells and tracked jobs, the same snapshot JSON at every restart and at the end,
    /// and the same findings from engines restored from either snapshot (crossed too).
    #[test]
    fn lane_path_on_and_off_agree(plan in plan()) {
        if let Err(msg) = run_plan(&plan) {
            prop_assert!(false, "{}", msg);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Named, deterministic scenarios.
// ---------------------------------------------------------------------------------------------

fn eight(start: i64, looks: &[(Look, u8)]) -> JobSpec {
    JobSpec {
        gpus: 8,
        gpu_base: 0,
        start,
        looks: looks.to_vec(),
        odd: None,
        exempt_account: false,
        jitter: false,
        alloc_order: 0,
        share: false,
        layout: 0,
    }
}

fn plan_of(cfg: CfgKind, mode: Mode, jobs: Vec<JobSpec>, cycles: Vec<Vec<Ev>>, tail: usize) -> Plan {
    Plan {
        cfg,
        mode,
        two_policies: false,
        one_out: false,
        scope: ScopeKind::Whole,
        scope_samples_only: false,
        auto: true,
        jobs,
        cycles,
        tail: vec![Vec::new(); tail],
        restore_after: 0,
    }
}

/// Ten 8-GPU jobs (hung, idle, spin, busy, mixed) for 120 cycles, with one exception of
/// every kind at a fixed cycle, each on a job that is by then well into its window.
fn cluster_plan(cfg: CfgKind, mode: Mode, two_policies: bool) -> Plan {
    use Look::*;
    let jobs = vec![
        eight(-30, &[(Hung, 200)]),
        eight(-30, &[(Idle, 200)]),
        eight(-30, &[(Spin, 200)]),
        eight(-30, &[(Busy, 200)]),
        eight(-10, &[(Busy, 25), (Hung, 40)]),
        eight(-10, &[(Idle, 30), (Busy, 5)]),
        eight(0, &[(Hung, 200)]),
        JobSpec {
            odd: Some((3, Idle)),
            ..eight(-30, &[(Busy, 200)])
        },
        JobSpec {
            jitter: true,
            ..eight(-30, &[(Starved, 200)])
        },
        eight(-30, &[(AllZero, 10), (Hung, 60)]),
    ];
    let mut cycles: Vec<Vec<Ev>> = vec![Vec::new(); 120];
    let mut at = |c: usize, e: Ev| cycles[c].push(e);
    at(20, Ev::MissingGpu(0, 3));
    at(22, Ev::Silent(1, 5));
    at(24, Ev::Skew(2, 5, 17));
    at(26, Ev::Late(0, 7, 0));
    at(27, Ev::Late(6, 2, 2));
    at(28, Ev::LateExtra(3, 1, 2));
    at(30, Ev::DupEqual(0, 0));
    at(32, Ev::DupConflict(6, 4));
    at(34, Ev::Invalid(0, 1, Bad::Util150));
    at(35, Ev::Invalid(1, 2, Bad::UtilMissing));
    at(36, Ev::Invalid(2, 3, Bad::UtilSentinel));
    at(37, Ev::Invalid(6, 4, Bad::MemOverTotal));
    at(38, Ev::Invalid(0, 5, Bad::Power0));
    at(39, Ev::Invalid(1, 6, Bad::Power5000));
    at(40, Ev::Invalid(6, 7, Bad::ProcsHuge));
    at(41, Ev::Invalid(0, 0, Bad::UtilNaN));
    at(42, Ev::Invalid(2, 1, Bad::ProcsSentinel));
    at(43, Ev::InvalidAll(1, Bad::PowerMissing));
    at(44, Ev::SmOnly(0, 2));
    at(45, Ev::SmOnlyAll(6));
    at(46, Ev::Future(0, 4, 600));
    at(47, Ev::Future(1, 0, 121));
    at(48, Ev::BeforeStart(6, 1, 2));
    at(50, Ev::Freeze(0, 14, true));
    at(52, Ev::Freeze(6, 12, false));
    at(70, Ev::ClockBack(3));
    at(72, Ev::Leave(5, 2));
    at(74, Ev::Replace(9));
    at(76, Ev::Requeue(4, 1));
    at(78, Ev::NewAlloc(7));
    at(80, Ev::Reorder(7));
    at(81, Ev::Reorder(8));
    at(82, Ev::Shuffle(11));
    at(84, Ev::Stray(0));
    at(85, Ev::Twice(2));
    at(86, Ev::ScopeFlip(0));
    at(88, Ev::Drain(0, true, 0, true));
    at(88, Ev::Drain(6, false, 0, true));
    at(89, Ev::Drain(0, false, 120, true));
    at(90, Ev::Drain(1, true, -60, true));
    at(92, Ev::Restart);
    at(95, Ev::ClockJump(12));
    at(60, Ev::Toggle);
    at(66, Ev::Toggle);
    at(93, Ev::Toggle);
    at(96, Ev::JobRepeat(6));
    at(98, Ev::JobOffset(0, -40));
    at(100, Ev::Shuffle(3));
    at(100, Ev::MissingGpu(3, 0));
    let mut p = plan_of(cfg, mode, jobs, cycles, 15);
    p.two_policies = two_policies;
    // With two policies, the final restore comes 7 minutes after the snapshot.
    p.restore_after = if two_policies { 7 } else { 0 };
    p
}

#[test]
fn ten_8gpu_jobs_120_cycles_one_exception_of_each_kind() {
    for (cfg, mode, two) in [
        (CfgKind::Short, Mode::Observe, false),
        (CfgKind::Short, Mode::Enforce, true),
        (CfgKind::Default, Mode::Observe, true),
        (CfgKind::ShortExempt, Mode::Enforce, false),
        (CfgKind::Default, Mode::ObserveReported, false),
    ] {
        let plan = cluster_plan(cfg, mode, two);
        let stats = run_plan(&plan).unwrap_or_else(|m| panic!("{cfg:?} {mode:?} two_policies={two}: {m}"));
        assert_eq!(stats.cycles, 120 + 15);
        // Most of the cluster's jobs take the lane path on most cycles.
        assert!(stats.lane_job_cycles > 120 * 5, "{cfg:?} {mode:?}: {stats:?}");
        if cfg != CfgKind::Default {
            // The scenario must reach the ladder's top rungs, or it tests too little.
            assert!(stats.alerts > 0 && stats.drains > 0, "{cfg:?} {mode:?}: {stats:?}");
        }
        assert!(stats.evidence_problems > 0, "{stats:?}");
    }
}

/// 30 clean cycles, one exception, 30 clean cycles: each 8-GPU job leaves the lane path for
/// the exception and may come back; findings must match throughout, for every kind.
#[test]
fn clean_exception_clean() {
    use Look::*;
    let exceptions = vec![
        Ev::MissingGpu(0, 4),
        Ev::Silent(0, 5),
        Ev::Skew(0, 2, -20),
        Ev::Late(0, 1, 0),
        Ev::LateExtra(0, 1, 1),
        Ev::DupEqual(0, 6),
        Ev::DupConflict(0, 6),
        Ev::Invalid(0, 3, Bad::Util150),
        Ev::Invalid(0, 3, Bad::MemSentinel),
        Ev::Invalid(0, 3, Bad::DcgmBlankPower),
        Ev::InvalidAll(0, Bad::UtilMissing),
        Ev::SmOnly(0, 5),
        Ev::Future(0, 0, 3600),
        Ev::BeforeStart(0, 0, 1),
        Ev::Freeze(0, 12, true),
        Ev::Freeze(0, 12, false),
        Ev::ClockBack(2),
        Ev::ClockJump(15),
        Ev::Leave(0, 1),
        Ev::Replace(0),
        Ev::Requeue(0, 0),
        Ev::NewAlloc(0),
        Ev::Reorder(1),
        Ev::Shuffle(5),
        Ev::Stray(0),
        Ev::Twice(0),
        Ev::ScopeFlip(0),
        Ev::Drain(0, false, 0, false),
        Ev::Restart,
        Ev::JobRepeat(0),
        Ev::JobOffset(0, -25),
        Ev::Toggle,
    ];
    for ex in exceptions {
        for (cfg, mode) in [
            (CfgKind::Short, Mode::Observe),
            (CfgKind::Short, Mode::Enforce),
            (CfgKind::Default, Mode::Observe),
        ] {
            let jobs = vec![eight(-20, &[(Hung, 200)]), eight(-20, &[(Busy, 200)]), eight(-20, &[(Spin, 200)])];
            let mut cycles = vec![Vec::new(); 61];
            cycles[30].push(ex.clone());
            if let Ev::Toggle = ex {
                // Off at 30, on again at 32.
                cycles[32].push(Ev::Toggle);
            }
            let plan = plan_of(cfg, mode, jobs, cycles, 10);
            run_plan(&plan).unwrap_or_else(|m| panic!("{ex:?} under {cfg:?} {mode:?}: {m}"));
        }
    }
}

/// Node scope over half of a 16-GPU job, with an 8-GPU job on that node's neighbour and a
/// 4-GPU and 1-GPU job sharing nothing: partial scope caps at alert, and the lane path must
/// not treat the observed half as a whole 8-GPU job.
#[test]
fn node_scope_over_half_a_16gpu_job() {
    use Look::*;
    for (scope, only) in [
        (ScopeKind::FirstNode(0), false),
        (ScopeKind::LastNode(0), true),
        (ScopeKind::FirstNode(1), true),
    ] {
        let jobs = vec![
            JobSpec {
                gpus: 16,
                ..eight(-20, &[(Hung, 200)])
            },
            eight(-20, &[(Idle, 200)]),
            JobSpec {
                gpus: 4,
                gpu_base: 4,
                ..eight(-20, &[(Hung, 200)])
            },
            JobSpec {
                gpus: 1,
                ..eight(-20, &[(Idle, 200)])
            },
        ];
        let mut cycles = vec![Vec::new(); 60];
        cycles[25].push(Ev::MissingGpu(0, 9));
        cycles[35].push(Ev::Drain(0, false, 0, false));
        cycles[36].push(Ev::Drain(0, false, 0, true));
        cycles[40].push(Ev::ScopeFlip(1));
        let mut plan = plan_of(CfgKind::Short, Mode::Enforce, jobs, cycles, 10);
        plan.scope = scope;
        plan.scope_samples_only = only;
        run_plan(&plan).unwrap_or_else(|m| panic!("{scope:?}: {m}"));
    }
}

/// The generators reach what they claim: in a fixed sample of plans, every exception kind
/// occurs, and the runs reach alert, drain, cancel and insufficient evidence.
#[test]
fn generators_cover_every_exception_and_rung() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let mut seen = std::collections::BTreeSet::new();
    let mut totals = Stats::default();
    for _ in 0..24 {
        let plan = plan().new_tree(&mut runner).unwrap().current();
        for e in plan.cycles.iter().chain(&plan.tail).flatten() {
            let name = format!("{e:?}");
            seen.insert(name.split('(').next().unwrap().to_string());
        }
        let s = run_plan(&plan).unwrap_or_else(|m| panic!("{m}"));
        totals.alerts += s.alerts;
        totals.drains += s.drains;
        totals.cancels += s.cancels;
        totals.evidence_problems += s.evidence_problems;
        totals.lane_job_cycles += s.lane_job_cycles;
    }
    assert_eq!(seen.len(), 30, "exception kinds seen: {seen:?}");
    assert!(
        totals.alerts > 0 && totals.drains > 0 && totals.cancels > 0 && totals.evidence_problems > 0 && totals.lane_job_cycles > 0,
        "{totals:?}"
    );
}

/// An 8-GPU job split 4 + 4 (and 7 + 1) over two nodes, observed on one of them: eight GPUs
/// allocated, four (or seven, or one) observed. Beside it, an 8-GPU job with GPU indices
/// 0, 2, …, 14 and one in reversed allocation order.
#[test]
fn split_and_spaced_8gpu_jobs() {
    use Look::*;
    for (scope, only) in [
        (ScopeKind::Whole, false),
        (ScopeKind::FirstNode(0), false),
        (ScopeKind::LastNode(0), true),
        (ScopeKind::LastNode(1), false),
    ] {
        let jobs = vec![
            JobSpec {
                layout: 1,
                ..eight(-20, &[(Hung, 200)])
            },
            JobSpec {
                layout: 2,
                ..eight(-20, &[(Idle, 200)])
            },
            JobSpec {
                layout: 3,
                ..eight(-20, &[(Spin, 200)])
            },
            JobSpec {
                alloc_order: 1,
                ..eight(-20, &[(Hung, 200)])
            },
        ];
        let mut cycles = vec![Vec::new(); 60];
        cycles[20].push(Ev::MissingGpu(0, 5));
        cycles[24].push(Ev::Shuffle(9));
        cycles[28].push(Ev::DupConflict(2, 3));
        cycles[30].push(Ev::Drain(0, false, 0, false));
        cycles[31].push(Ev::Drain(0, false, 0, true));
        cycles[40].push(Ev::Toggle);
        cycles[45].push(Ev::ScopeFlip(0));
        cycles[50].push(Ev::Toggle);
        let mut plan = plan_of(CfgKind::Short, Mode::Enforce, jobs, cycles, 10);
        plan.scope = scope;
        plan.scope_samples_only = only;
        run_plan(&plan).unwrap_or_else(|m| panic!("{scope:?}: {m}"));
    }
}
