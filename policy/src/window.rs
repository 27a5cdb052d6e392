//! One GPU's sliding window, kept incrementally: O(1) amortised work per sample, and no
//! rescans when the engine evaluates.
//!
//! Every valid sample becomes an [`Entry`] whose predicates (memory held, power at idle …) are
//! decided once, at ingest, against the policy's fixed thresholds; the window keeps counts of
//! each predicate, sums for means and variance, and a monotonic deque for the peak.

use crate::config::PolicyConfig;
use crate::input::Sample;
use crate::sample_check::{self, RawKey};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

const MEM_HELD: u16 = 1 << 0;
const MEM_FREE: u16 = 1 << 1;
const PROCS_POS: u16 = 1 << 2;
const PROCS_ZERO: u16 = 1 << 3;
const POWER_KNOWN: u16 = 1 << 4;
const POWER_IDLE: u16 = 1 << 5;
const POWER_SPIN_LOW: u16 = 1 << 6;
const UTIL_SPIN: u16 = 1 << 7;
const ALL_ZERO: u16 = 1 << 8;
const CHANGED: u16 = 1 << 9;
const GAP_BEFORE: u16 = 1 << 10;
const MEM_KNOWN: u16 = 1 << 11;
const NFLAGS: usize = 12;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Entry {
    t_s: i64,
    util_milli: u32,
    power_mw: u32,
    mem_mib: u32,
    flags: u16,
}

/// Thresholds decided at ingest, copied out of the policy config.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IngestThresholds {
    window_s: i64,
    max_gap_s: i64,
    skew_s: i64,
    mem_held_frac: f64,
    mem_held_mib: f64,
    idle_power_frac: f64,
    idle_power_w: f64,
    spin_power_frac: f64,
    spin_util_milli: u32,
}

impl IngestThresholds {
    pub(crate) fn new(c: &PolicyConfig) -> Self {
        IngestThresholds {
            window_s: c.window.0,
            max_gap_s: c.max_sample_gap.0,
            skew_s: c.clock_skew.0,
            mem_held_frac: c.mem_held_frac,
            mem_held_mib: c.mem_held_mib,
            idle_power_frac: c.idle_power_frac,
            idle_power_w: c.idle_power_w,
            spin_power_frac: c.spin_power_frac,
            spin_util_milli: (c.spin_util_pct * 1000.0).round() as u32,
        }
    }
}

/// What one GPU's window shows at evaluation time. Counts are over valid samples in the
/// window `(now − window_s, now]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuStats {
    /// Valid samples in the window.
    pub samples: u32,
    /// Time of the first valid sample in the window, epoch seconds (0 when none).
    pub first_t_s: i64,
    /// Time of the last valid sample in the window, epoch seconds (0 when none).
    pub last_t_s: i64,
    /// Highest compute reading, percent.
    pub peak_util_pct: f64,
    /// Mean compute reading, percent.
    pub mean_util_pct: f64,
    /// Samples with memory known.
    pub mem_known: u32,
    /// Samples with memory held (≥ `mem_held_frac` of total, or ≥ `mem_held_mib`).
    pub mem_held: u32,
    /// Samples with memory known and not held.
    pub mem_free: u32,
    /// Mean `memory.used` over samples where it is known, MiB.
    pub mem_used_mean_mib: Option<f64>,
    /// Samples with a process count > 0.
    pub procs_pos: u32,
    /// Samples with a process count of exactly 0.
    pub procs_zero: u32,
    /// Samples with power known.
    pub power_known: u32,
    /// Samples with power at idle (≤ `idle_power_frac` of the limit, or ≤ `idle_power_w`).
    pub power_idle: u32,
    /// Samples with power low enough for `spin` (≤ `spin_power_frac` of the limit, or ≤
    /// `idle_power_w`).
    pub power_spin_low: u32,
    /// Samples with util ≥ `spin_util_pct`.
    pub util_spin: u32,
    /// Mean power where known, watts.
    pub power_mean_w: Option<f64>,
    /// Coefficient of variation of power where known (population std / mean).
    pub power_cv: Option<f64>,
    /// Samples in the window with at least one rejected field, or no valid compute reading,
    /// or stamped in the future.
    pub invalid: u32,
}

/// Why one GPU's window cannot be judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceProblem {
    /// No valid sample in the window.
    NoSamples,
    /// The newest valid sample is older than `max_sample_gap`.
    Stale,
    /// A hole between valid samples inside the window is larger than `max_sample_gap`.
    Gap,
    /// Every sample reads exactly 0 %, 0 MiB, 0 W: a broken exporter.
    AllZero,
    /// Every reading, power included, is bit-identical across the window: a frozen collector.
    Frozen,
    /// The observed part of the job has no GPUs (the job is not on the observed node).
    MissingNode,
}

impl EvidenceProblem {
    /// Lowercase name for CSV and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceProblem::NoSamples => "no_samples",
            EvidenceProblem::Stale => "stale",
            EvidenceProblem::Gap => "gap",
            EvidenceProblem::AllZero => "all_zero",
            EvidenceProblem::Frozen => "frozen",
            EvidenceProblem::MissingNode => "missing_node",
        }
    }
}

/// The coverage verdict for one GPU's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coverage {
    /// Valid samples cover the whole window.
    Full,
    /// No holes and fresh, but the first valid sample is later than `now − window + gap`.
    Short,
    /// Broken evidence.
    Broken(EvidenceProblem),
}

/// One GPU's window state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct GpuWindow {
    entries: VecDeque<Entry>,
    /// Monotonic deque of (t, util) with decreasing util: front is the window peak.
    peak: VecDeque<(i64, u32)>,
    /// Times of invalid samples still in the window.
    invalid: VecDeque<i64>,
    #[serde(skip)]
    pub(crate) pending: Vec<Sample>,
    counts: [u32; NFLAGS],
    sum_util_milli: u64,
    sum_power_mw: u64,
    sum_power_sq: u128,
    sum_mem_mib: u64,
    newest_t: Option<i64>,
    last_valid_t: Option<i64>,
    prev_raw: Option<RawKey>,
    /// Samples dropped as late over the GPU's life.
    pub(crate) late: u32,
}

impl GpuWindow {
    fn add_counts(&mut self, e: &Entry, sign: i64) {
        for (bit, c) in self.counts.iter_mut().enumerate() {
            if e.flags & (1 << bit) != 0 {
                *c = (*c as i64 + sign) as u32;
            }
        }
        if sign > 0 {
            self.sum_util_milli += e.util_milli as u64;
            if e.flags & POWER_KNOWN != 0 {
                self.sum_power_mw += e.power_mw as u64;
                self.sum_power_sq += (e.power_mw as u128) * (e.power_mw as u128);
            }
            if e.flags & MEM_KNOWN != 0 {
                self.sum_mem_mib += e.mem_mib as u64;
            }
        } else {
            self.sum_util_milli -= e.util_milli as u64;
            if e.flags & POWER_KNOWN != 0 {
                self.sum_power_mw -= e.power_mw as u64;
                self.sum_power_sq -= (e.power_mw as u128) * (e.power_mw as u128);
            }
            if e.flags & MEM_KNOWN != 0 {
                self.sum_mem_mib -= e.mem_mib as u64;
            }
        }
    }

    /// Sorts and ingests the pending samples of this cycle. Returns nothing; late samples are
    /// counted in `self.late`.
    pub(crate) fn ingest_pending(&mut self, now_s: i64, th: &IngestThresholds) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        if pending.len() > 1 {
            // Order-independent: by time, then by the bit pattern of the readings.
            pending.sort_by(|a, b| {
                a.t_s
                    .cmp(&b.t_s)
                    .then_with(|| sample_check::raw_key(a).0.cmp(&sample_check::raw_key(b).0))
            });
        }
        for s in &pending {
            self.ingest(s, now_s, th);
        }
        pending.clear();
        self.pending = pending;
    }

    fn ingest(&mut self, s: &Sample, now_s: i64, th: &IngestThresholds) {
        if s.t_s > now_s + th.skew_s {
            // Guard 10: a sample from the future is invalid evidence; it must not move
            // `newest_t`, or every later real sample would be dropped as late.
            self.invalid.push_back(now_s);
            return;
        }
        if self.newest_t.is_some_and(|n| s.t_s <= n) {
            self.late += 1;
            return;
        }
        self.newest_t = Some(s.t_s);
        let c = sample_check::check(s);
        let Some(util_milli) = c.util_milli else {
            self.invalid.push_back(s.t_s);
            return;
        };
        if c.invalid_fields > 0 {
            self.invalid.push_back(s.t_s);
        }
        let mut flags = 0u16;
        if let Some(used) = c.mem_used_mib {
            flags |= MEM_KNOWN;
            let held = match c.mem_total_mib {
                Some(total) => used >= th.mem_held_frac * total,
                None => used >= th.mem_held_mib,
            };
            flags |= if held { MEM_HELD } else { MEM_FREE };
        }
        match c.procs {
            Some(0) => flags |= PROCS_ZERO,
            Some(_) => flags |= PROCS_POS,
            None => {}
        }
        if let Some(p) = c.power_w {
            flags |= POWER_KNOWN;
            let (idle, spin_low) = match c.power_limit_w {
                Some(limit) => (p <= th.idle_power_frac * limit, p <= th.spin_power_frac * limit),
                None => (p <= th.idle_power_w, p <= th.idle_power_w),
            };
            if idle {
                flags |= POWER_IDLE;
            }
            if spin_low {
                flags |= POWER_SPIN_LOW;
            }
        }
        if util_milli >= th.spin_util_milli {
            flags |= UTIL_SPIN;
        }
        if c.all_zero_raw {
            flags |= ALL_ZERO;
        }
        let key = sample_check::raw_key(s);
        if self.prev_raw != Some(key) {
            flags |= CHANGED;
        }
        self.prev_raw = Some(key);
        if self.last_valid_t.is_some_and(|prev| s.t_s - prev > th.max_gap_s) {
            flags |= GAP_BEFORE;
        }
        self.last_valid_t = Some(s.t_s);
        let e = Entry {
            t_s: s.t_s,
            util_milli,
            power_mw: c.power_w.map_or(0, |p| (p * 1000.0).round() as u32),
            mem_mib: c.mem_used_mib.map_or(0, |m| m.round() as u32),
            flags,
        };
        while self.peak.back().is_some_and(|&(_, u)| u <= util_milli) {
            self.peak.pop_back();
        }
        self.peak.push_back((s.t_s, util_milli));
        self.add_counts(&e, 1);
        self.entries.push_back(e);
    }

    /// Drops everything at or before `now − window`.
    pub(crate) fn evict(&mut self, now_s: i64, th: &IngestThresholds) {
        let cutoff = now_s - th.window_s;
        while let Some(e) = self.entries.front().copied() {
            if e.t_s > cutoff {
                break;
            }
            self.add_counts(&e, -1);
            self.entries.pop_front();
        }
        while self.peak.front().is_some_and(|&(t, _)| t <= cutoff) {
            self.peak.pop_front();
        }
        while self.invalid.front().is_some_and(|&t| t <= cutoff) {
            self.invalid.pop_front();
        }
    }

    /// Statistics and coverage of the window ending at `now_s`. Call [`GpuWindow::evict`] first.
    pub(crate) fn stats(&self, now_s: i64, th: &IngestThresholds) -> (GpuStats, Coverage) {
        let n = self.entries.len() as u32;
        let cnt = |flag: u16| self.counts[flag.trailing_zeros() as usize];
        let mut st = GpuStats {
            samples: n,
            invalid: self.invalid.len() as u32,
            ..GpuStats::default()
        };
        let (Some(first), Some(last)) = (self.entries.front(), self.entries.back()) else {
            return (st, Coverage::Broken(EvidenceProblem::NoSamples));
        };
        st.first_t_s = first.t_s;
        st.last_t_s = last.t_s;
        st.peak_util_pct = self.peak.front().map_or(0, |p| p.1) as f64 / 1000.0;
        st.mean_util_pct = self.sum_util_milli as f64 / n as f64 / 1000.0;
        st.mem_known = cnt(MEM_KNOWN);
        st.mem_held = cnt(MEM_HELD);
        st.mem_free = cnt(MEM_FREE);
        if st.mem_known > 0 {
            st.mem_used_mean_mib = Some(self.sum_mem_mib as f64 / st.mem_known as f64);
        }
        st.procs_pos = cnt(PROCS_POS);
        st.procs_zero = cnt(PROCS_ZERO);
        st.power_known = cnt(POWER_KNOWN);
        st.power_idle = cnt(POWER_IDLE);
        st.power_spin_low = cnt(POWER_SPIN_LOW);
        st.util_spin = cnt(UTIL_SPIN);
        if st.power_known > 0 {
            let k = st.power_known as f64;
            let mean = self.sum_power_mw as f64 / k;
            let var = (self.sum_power_sq as f64 / k - mean * mean).max(0.0);
            st.power_mean_w = Some(mean / 1000.0);
            st.power_cv = Some(if mean > 0.0 { var.sqrt() / mean } else { 0.0 });
        }

        let coverage = if now_s - last.t_s > th.max_gap_s {
            Coverage::Broken(EvidenceProblem::Stale)
        } else if cnt(GAP_BEFORE) - (first.flags & GAP_BEFORE != 0) as u32 > 0 {
            Coverage::Broken(EvidenceProblem::Gap)
        } else if cnt(ALL_ZERO) == n {
            Coverage::Broken(EvidenceProblem::AllZero)
        } else if n >= 2 && cnt(CHANGED) - (first.flags & CHANGED != 0) as u32 == 0 && st.power_known == n {
            Coverage::Broken(EvidenceProblem::Frozen)
        } else if first.t_s > now_s - th.window_s + th.max_gap_s {
            Coverage::Short
        } else {
            Coverage::Full
        };
        (st, coverage)
    }

    /// True when every sample in the window is bit-identical but power is missing, so a
    /// frozen collector cannot be told from a quiet GPU.
    pub(crate) fn freeze_undetectable(&self) -> bool {
        let n = self.entries.len() as u32;
        let cnt = |flag: u16| self.counts[flag.trailing_zeros() as usize];
        match self.entries.front() {
            Some(first) => n >= 2 && cnt(CHANGED) - (first.flags & CHANGED != 0) as u32 == 0 && cnt(POWER_KNOWN) < n,
            None => false,
        }
    }

    /// Drops window contents older than one window before `now_s` and every pending sample;
    /// used when restoring a snapshot.
    pub(crate) fn restore_trim(&mut self, now_s: i64, th: &IngestThresholds) {
        self.pending.clear();
        self.evict(now_s, th);
    }
}
