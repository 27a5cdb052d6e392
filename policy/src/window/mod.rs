//! One GPU's sliding window, kept incrementally: O(1) amortised work per sample, and no
//! rescans when the engine evaluates.
//!
//! Every valid sample becomes an [`Entry`] whose predicates (memory held, power at idle …) are
//! decided once, at ingest, against the policy's fixed thresholds; the window keeps counts of
//! each predicate, sums for means and variance, and a two-stack sliding maximum for the peak
//! (the ring's front part holds suffix maxima, its back part a running maximum; the front
//! part is rebuilt once per window's worth of evictions, so O(1) amortised).

pub(crate) mod lanes;

use crate::config::PolicyConfig;
use crate::input::{Reading, Sample};
use crate::sample_check;
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
/// Compute reads 0, and memory used and power each read 0 or are unknown (missing, a sentinel,
/// 0 W): what a broken exporter shows (guard 3), even one that now and then leaves a field out.
const ZERO_OR_MISSING: u16 = 1 << 8;
const CHANGED: u16 = 1 << 9;
const GAP_BEFORE: u16 = 1 << 10;
/// Compute, memory used and power all read exactly 0: a sample no live GPU gives (a working
/// GPU never draws 0 W). A window is the broken exporter's only when it has one.
const ALL_ZERO: u16 = 1 << 11;
const NFLAGS: usize = 12;
/// Not a counted lane (bits 0–11 are): this entry is the first with new readings after a
/// stretch of copies longer than `max_sample_gap` (review 18), so a hole lies before it. It
/// counts as one only where the window has power on two samples (review 20), decided when the
/// window is judged; `GpuWindow::copy_holes` counts these entries.
const COPY_GAP: u16 = 1 << 12;
const _: () = assert!(NFLAGS <= 12, "counts hold 12 flags");

/// For each 4-bit group of flags, the u128 with a 1 in the 32-bit lane of every set bit.
const LANES: [u128; 16] = {
    let mut t = [0u128; 16];
    let mut i = 0;
    while i < 16 {
        let mut b = 0;
        while b < 4 {
            if i & (1 << b) != 0 {
                t[i] |= 1u128 << (32 * b);
            }
            b += 1;
        }
        i += 1;
    }
    t
};

/// One valid sample in a window: 20 bytes. Time is an offset from the window's `base_t_s`;
/// power is kept in tenths of a watt (decisions use full precision at ingest; only the
/// evidence's mean and the spin CV see the rounding).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    t_off: u32,
    util_milli: u32,
    mem_mib: u32,
    power_dw: u16,
    flags: u16,
    /// For entries in the front ("out") part of the ring: the highest util from this entry to
    /// the end of the front part. Unused in the back part.
    suffix_max_milli: u32,
}

/// Thresholds decided at ingest, copied out of the policy config.
#[derive(Clone, Copy, Debug, PartialEq)]
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
    /// Ring capacity to reserve: the samples a window holds at the configured interval.
    ring_hint: usize,
    /// A window's peak (thousandths of a percent) is low exactly when below this: the
    /// integer form of [`crate::signature::peak_is_low`].
    pub(crate) low_below_milli: u32,
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
            ring_hint: (c.window.0 / c.interval.0.max(1)).clamp(1, 4096) as usize + 2,
            low_below_milli: low_below_milli(c),
        }
    }

    /// True when windows kept under `self` and under `other` are the same for every input:
    /// every field but the policy-specific `low_below_milli` and the capacity hint
    /// `ring_hint` (rings grow as they must, so it changes no result) agrees. Two policies
    /// that differ only in `interval` therefore share windows (review 29).
    pub(crate) fn same_windows(&self, other: &IngestThresholds) -> bool {
        IngestThresholds {
            low_below_milli: other.low_below_milli,
            ring_hint: other.ring_hint,
            ..*self
        } == *other
    }

    /// `self` with the larger of the two capacity hints: an engine of several policies
    /// reserves rings for the one with the shortest interval.
    pub(crate) fn with_ring_hint_of(self, other: &IngestThresholds) -> IngestThresholds {
        IngestThresholds {
            ring_hint: self.ring_hint.max(other.ring_hint),
            ..self
        }
    }

    /// What decided the flags and hole marks of every entry kept in a window: the window, the
    /// gap, the skew and every ingest threshold (not the ring's capacity hint). Windows kept
    /// under one key mean nothing under another, so a snapshot carries its key and a restore
    /// under a different one starts the windows afresh (see `Engine::restore`). Floats are
    /// kept as their bits, so the key survives any serialiser exactly.
    pub(crate) fn key(&self) -> WindowKey {
        WindowKey {
            window_s: self.window_s,
            max_gap_s: self.max_gap_s,
            skew_s: self.skew_s,
            mem_held_frac_bits: self.mem_held_frac.to_bits(),
            mem_held_mib_bits: self.mem_held_mib.to_bits(),
            idle_power_frac_bits: self.idle_power_frac.to_bits(),
            idle_power_w_bits: self.idle_power_w.to_bits(),
            spin_power_frac_bits: self.spin_power_frac.to_bits(),
            spin_util_milli: self.spin_util_milli,
            rules: WINDOW_RULES,
        }
    }

    /// The limits of one evaluation cycle at `now_s`, computed once per cycle.
    pub(crate) fn cycle(&self, now_s: i64) -> Cycle {
        let cutoff_s = now_s.saturating_sub(self.window_s);
        Cycle {
            now_s,
            future_after_s: now_s.saturating_add(self.skew_s),
            cutoff_s,
            short_after_s: cutoff_s.saturating_add(self.max_gap_s),
        }
    }
}

/// See [`IngestThresholds::key`]. Serialised into the engine's snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WindowKey {
    window_s: i64,
    max_gap_s: i64,
    skew_s: i64,
    mem_held_frac_bits: u64,
    mem_held_mib_bits: u64,
    idle_power_frac_bits: u64,
    idle_power_w_bits: u64,
    spin_power_frac_bits: u64,
    spin_util_milli: u32,
    /// The version of the rules that flag entries ([`WINDOW_RULES`]); 0 in files from before
    /// the key.
    #[serde(default)]
    rules: u32,
}

/// The version of the rules by which ingest flags entries, kept in every snapshot's
/// [`WindowKey`]: entries flagged under other rules are not kept across a restart. 1: the
/// hole after a stretch of copies (`COPY_GAP`, review 18). A file from before it carries
/// entries without that flag, and a freeze that had ended vanished from the restored window
/// (review 24: the job was drained 16 minutes early).
const WINDOW_RULES: u32 = 1;

/// The least peak, in thousandths of a percent, that [`crate::signature::peak_is_low`] does
/// not call low (a peak of up to 100 % is 100,000; `u32::MAX` when every peak is low).
fn low_below_milli(c: &PolicyConfig) -> u32 {
    let guess = (c.util_threshold_pct * 1000.0).floor().clamp(0.0, 200_000.0) as u32;
    let mut p = guess.saturating_sub(4);
    while p <= guess.saturating_add(4) {
        if !crate::signature::peak_is_low(p, c) {
            return p;
        }
        p += 1;
    }
    u32::MAX
}

/// The limits of one evaluation cycle, epoch seconds; see [`IngestThresholds::cycle`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cycle {
    /// The evaluation time.
    pub(crate) now_s: i64,
    /// A sample stamped after this is from the future (guard 10).
    pub(crate) future_after_s: i64,
    /// Entries at or before this have left the window.
    cutoff_s: i64,
    /// A window whose first valid sample is after this is short (guard 2).
    short_after_s: i64,
}

/// What one GPU's window shows at evaluation time. Counts are over valid samples in the
/// window `(now − window_s, now]`. Kept as integer sums so that building it costs no
/// division; the float views are methods.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuStats {
    /// Valid samples in the window.
    pub samples: u32,
    /// Time of the first valid sample in the window, epoch seconds (0 when none).
    pub first_t_s: i64,
    /// Time of the last valid sample in the window, epoch seconds (0 when none).
    pub last_t_s: i64,
    /// Highest compute reading, thousandths of a percent.
    pub peak_util_milli: u32,
    /// Sum of compute readings, thousandths of a percent.
    pub sum_util_milli: u64,
    /// Samples with memory known.
    pub mem_known: u32,
    /// Samples with memory held (≥ `mem_held_frac` of total, or ≥ `mem_held_mib`).
    pub mem_held: u32,
    /// Samples with memory known and not held.
    pub mem_free: u32,
    /// Sum of `memory.used` where known, MiB (rounded per sample).
    pub sum_mem_mib: u64,
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
    /// Sum of power where known, tenths of a watt.
    pub sum_power_dw: u64,
    /// Sum of squared power where known, in (tenths of a watt)².
    pub sum_power_sq: u64,
    /// Samples in the window with at least one rejected field, or no valid compute reading,
    /// or stamped in the future.
    pub invalid: u32,
}

impl GpuStats {
    /// Highest compute reading, percent.
    pub fn peak_util_pct(&self) -> f64 {
        self.peak_util_milli as f64 / 1000.0
    }

    /// Mean compute reading, percent (0 without samples).
    pub fn mean_util_pct(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.sum_util_milli as f64 / self.samples as f64 / 1000.0
        }
    }

    /// Mean `memory.used` where known, MiB.
    pub fn mem_used_mean_mib(&self) -> Option<f64> {
        (self.mem_known > 0).then(|| self.sum_mem_mib as f64 / self.mem_known as f64)
    }

    /// Mean power where known, watts.
    pub fn power_mean_w(&self) -> Option<f64> {
        (self.power_known > 0).then(|| self.sum_power_dw as f64 / self.power_known as f64 / 10.0)
    }

    /// Coefficient of variation of power where known (population std / mean).
    pub fn power_cv(&self) -> Option<f64> {
        if self.power_known == 0 {
            return None;
        }
        let k = self.power_known as f64;
        let mean = self.sum_power_dw as f64 / k;
        let var = (self.sum_power_sq as f64 / k - mean * mean).max(0.0);
        Some(if mean > 0.0 { var.sqrt() / mean } else { 0.0 })
    }
}

/// Why one GPU's window cannot be judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceProblem {
    /// No sample in the window at all.
    NoSamples,
    /// Samples in the window, but none valid: each lacked a compute reading (`utilization.gpu`
    /// `[N/A]`, as MIG GPUs report it, with no SM activity), or had a sentinel or an
    /// implausible value (trial 9: this read "no_samples" though samples came).
    NoValidSamples,
    /// The newest valid sample is older than `max_sample_gap`.
    Stale,
    /// A hole between valid samples inside the window is larger than `max_sample_gap`.
    Gap,
    /// Every sample reads exactly 0 %, 0 MiB, 0 W: a broken exporter. Also a window with such
    /// a sample whose readings never change after its first sample (the samples with a
    /// reading are then copies of one: a frozen collector whose exporter now sends zeros), or
    /// where such samples are more than half (session 11: one copy with power left among 19
    /// all-zero samples matched a signature at alert, between the frozen and the all-zero
    /// verdicts).
    AllZero,
    /// Every reading, power included, is bit-identical across the window: a frozen collector.
    Frozen,
    /// The observed part of the job has no GPUs (the job is not on the observed node).
    MissingNode,
    /// The newest sample in the window is stamped later than now plus `clock_skew`: the clock
    /// went back since it was taken (guard 10). Until the clock passes it, the window's
    /// samples cannot be placed in time, and newer readings count as late.
    Future,
}

impl EvidenceProblem {
    /// Lowercase name for CSV and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceProblem::NoSamples => "no_samples",
            EvidenceProblem::NoValidSamples => "no_valid_samples",
            EvidenceProblem::Stale => "stale",
            EvidenceProblem::Gap => "gap",
            EvidenceProblem::AllZero => "all_zero",
            EvidenceProblem::Frozen => "frozen",
            EvidenceProblem::MissingNode => "missing_node",
            EvidenceProblem::Future => "future",
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

/// The part of one GPU's window statistics that every evaluation needs; the full
/// [`GpuStats`] is built only for jobs that may match a signature. Times are epoch seconds,
/// util in thousandths of a percent, power in tenths of a watt.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Brief {
    pub samples: u32,
    pub first_t_s: i64,
    pub last_t_s: i64,
    pub peak_util_milli: u32,
    pub sum_util_milli: u64,
    pub mem_known: u32,
    /// Memory held on every sample.
    pub mem_held_all: bool,
    pub sum_mem_mib: u64,
    pub power_known: u32,
    pub sum_power_dw: u64,
    pub invalid: u32,
    pub coverage: Coverage,
    /// Bit-identical readings without power: a freeze that cannot be told from a quiet GPU.
    pub freeze_undetectable: bool,
    /// Every sample at spin util with known, low power: the GPU may be part of `spin`.
    pub spin_candidate: bool,
}

impl Default for Brief {
    fn default() -> Self {
        Brief {
            samples: 0,
            first_t_s: 0,
            last_t_s: 0,
            peak_util_milli: 0,
            sum_util_milli: 0,
            mem_known: 0,
            mem_held_all: false,
            sum_mem_mib: 0,
            power_known: 0,
            sum_power_dw: 0,
            invalid: 0,
            coverage: Coverage::Broken(EvidenceProblem::NoSamples),
            freeze_undetectable: false,
            spin_candidate: false,
        }
    }
}

const NO_TIME: i64 = i64::MIN;

/// The readings the freeze check compares: util, SM activity, memory used and power. A frozen
/// collector repeats them bit for bit; the process count (another query, often live when the
/// GPU metrics are stuck) and the fixed totals and limits take no part.
const FROZEN_FIELDS: usize = 4;

/// `last_bits` of a GPU with no reading yet: every field missing.
fn never_present() -> [u64; FROZEN_FIELDS] {
    [Reading::MISSING.to_bits(); FROZEN_FIELDS]
}

/// One GPU's window state: a ring of [`Entry`]s (oldest at `head`) with its counts and sums.
///
/// Serialised (for the enforcer's state file) as its entries and clocks only; counts, sums
/// and the sliding maximum are rebuilt from the entries on load, so a state file cannot carry
/// counts that disagree with its entries.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "WindowRepr", from = "WindowRepr")]
pub(crate) struct GpuWindow {
    /// Ring storage; its length is the capacity (grown by doubling when full).
    ring: Box<[Entry]>,
    /// Index of the oldest entry.
    head: u32,
    /// Entries in the window.
    len: u32,
    /// How many entries from `head` form the "out" part (with suffix maxima).
    out_len: u32,
    /// Highest util among the entries after the "out" part.
    in_max_milli: u32,
    /// Per-flag counts over the entries, as three u128 words of four 32-bit lanes each
    /// (flag bit `b` is lane `b % 4` of word `b / 4`), so that adding or removing an entry
    /// is three additions. Lanes cannot overflow: a window never holds 2³² entries.
    counts: [u128; 3],
    sum_util_milli: u64,
    sum_power_dw: u64,
    sum_power_sq: u64,
    sum_mem_mib: u64,
    /// Entry times are offsets from this (the first ingested sample's time).
    base_t_s: i64,
    newest_t_s: i64,
    last_valid_t_s: i64,
    /// The last present bits of each reading the freeze check compares (see [`FROZEN_FIELDS`]).
    last_bits: [u64; FROZEN_FIELDS],
    /// Times of invalid samples still in the window; allocated only when there is one, to keep
    /// the common window small.
    #[allow(clippy::box_collection)]
    invalid: Option<Box<VecDeque<i64>>>,
    /// Samples dropped as late over the GPU's life.
    pub(crate) late: u32,
    /// Offset from `base_t_s` of the newest entry whose readings changed (flag `CHANGED`), or
    /// `u32::MAX` for none; kept by `push`, so a restored window rebuilds it from its entries.
    last_change_off: u32,
    /// Entries pushed since that one: each repeated the readings before it.
    copies_since_change: u16,
    /// Entries in the window flagged [`COPY_GAP`].
    copy_holes: u32,
}

/// See [`WindowRepr::last_change`].
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LastChange {
    /// Offset from `base_t_s` of the newest entry whose readings changed.
    off: u32,
    /// Entries pushed since that one.
    copies: u16,
}

/// The serialised form of a [`GpuWindow`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowRepr {
    entries: Vec<Entry>,
    invalid: Vec<i64>,
    base_t_s: i64,
    newest_t_s: i64,
    last_valid_t_s: i64,
    #[serde(default = "never_present")]
    last_bits: [u64; FROZEN_FIELDS],
    late: u32,
    /// The newest change of readings (`GpuWindow::last_change_off`) and the copies pushed
    /// since: kept because the change may have left the window while its copies have not
    /// (review 20: rebuilt from the entries alone, a restart during a long freeze lost it, and
    /// the copies stopped counting as a hole). Absent in older files: rebuilt from the
    /// entries, as then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_change: Option<LastChange>,
    /// The freeze check's old 64-bit mix, which `last_bits` replaced: read (and dropped) so
    /// that a file of that time still loads; never written. Any other key is unknown and
    /// refused (a newer release's: see the enforcer's `state::check_not_newer`).
    #[serde(default, rename = "prev_raw", skip_serializing)]
    _prev_raw: Option<serde::de::IgnoredAny>,
}

impl From<GpuWindow> for WindowRepr {
    fn from(w: GpuWindow) -> WindowRepr {
        WindowRepr {
            entries: w.iter().copied().collect(),
            invalid: w.invalid.map(|v| v.into_iter().collect()).unwrap_or_default(),
            base_t_s: w.base_t_s,
            newest_t_s: w.newest_t_s,
            last_valid_t_s: w.last_valid_t_s,
            last_bits: w.last_bits,
            late: w.late,
            last_change: (w.last_change_off != u32::MAX).then_some(LastChange {
                off: w.last_change_off,
                copies: w.copies_since_change,
            }),
            _prev_raw: None,
        }
    }
}

impl From<WindowRepr> for GpuWindow {
    fn from(r: WindowRepr) -> GpuWindow {
        let mut w = GpuWindow {
            base_t_s: r.base_t_s,
            newest_t_s: r.newest_t_s,
            last_valid_t_s: r.last_valid_t_s,
            last_bits: r.last_bits,
            late: r.late,
            invalid: (!r.invalid.is_empty()).then(|| Box::new(r.invalid.into_iter().collect())),
            ..GpuWindow::default()
        };
        for e in r.entries {
            w.push(e);
        }
        // The newest entry is the last valid sample (entries are pushed only with one, and
        // leave only from the front), so the entries decide that time; a file that says
        // otherwise is not believed (review 24: a later `last_valid_t_s` made a stale window
        // read fresh).
        let newest_entry_t = w.iter().next_back().map(|e| w.base_t_s.saturating_add(e.t_off as i64));
        if let Some(t) = newest_entry_t {
            w.last_valid_t_s = t;
            w.newest_t_s = w.newest_t_s.max(t);
        }
        // Where the entries show no change (it has left the window: every entry is a copy),
        // the newest change lies before the first entry. The file's `last_change` says where,
        // and is believed only if it does lie before it; otherwise (a file from before the
        // key, or one that says something the entries contradict) the change is taken to be
        // at the first entry: the latest it can be, so the copies' stretch is never taken
        // for shorter than the entries show (review 21: a file from before the key, restored
        // during a freeze, lost it, and the job was drained 19 minutes early). Where the
        // entries show a change, they decide.
        if w.last_change_off == u32::MAX {
            if let Some(first) = w.front().copied() {
                let copies = u16::try_from(w.len).unwrap_or(u16::MAX);
                (w.last_change_off, w.copies_since_change) = match r.last_change {
                    Some(c) if c.off < first.t_off => (c.off, c.copies.max(copies)),
                    _ => (first.t_off, copies),
                };
            } else if w.last_valid_t_s != NO_TIME {
                // An empty window (an outage emptied it): the file's change is believed if it
                // is no newer than the newest valid sample; otherwise (a file from before the
                // key, or one that says a newer one) the change is taken to be that newest
                // valid sample, the latest it can be (reviews 22, 23: with none, copies after
                // the outage counted as evidence and the restored engine alerted 13 minutes
                // early).
                let newest = w.last_valid_t_s.saturating_sub(w.base_t_s).clamp(0, i64::from(u32::MAX - 1)) as u32;
                (w.last_change_off, w.copies_since_change) = match r.last_change {
                    Some(c) if c.off <= newest => (c.off, c.copies),
                    _ => (newest, 0),
                };
            }
        }
        w
    }
}

/// What one sample's readings say, decided against the ingest thresholds: guard 3 field by
/// field, and the entry flags that do not depend on the window (not `CHANGED`, `GAP_BEFORE`
/// or `COPY_GAP`). Shared by [`GpuWindow::ingest`] and the lane path, so that both decide
/// every sample alike.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Classified {
    /// A compute reading is usable: util, or SM activity of 0 when util is not.
    pub(crate) compute_ok: bool,
    /// Some present field is rejected (out of bounds, a sentinel, memory used over total).
    pub(crate) any_bad: bool,
    pub(crate) util_milli: u32,
    pub(crate) mem_mib: u32,
    pub(crate) power_dw: u16,
    pub(crate) flags: u16,
    /// The bits of the readings the freeze check compares, and whether each is known.
    pub(crate) bits: [u64; FROZEN_FIELDS],
    pub(crate) known: [bool; FROZEN_FIELDS],
}

/// See [`Classified`]. Guard 3 is applied here field by field (see `sample_check`): a field
/// that is absent, a sentinel or out of bounds is unknown, never zero. `sample_check::check`
/// states the same rules one field at a time; `ingest_agrees_with_check` holds the two
/// together.
#[inline(always)]
pub(crate) fn classify(s: &Sample, th: &IngestThresholds) -> Classified {
    use sample_check::{MAX_MEM_MIB, MAX_POWER_W, MAX_PROCS, MIN_POWER_W};
    let (u, sm, mt, mu, p, l) = (s.util_pct, s.sm_active, s.mem_total_mib, s.mem_used_mib, s.power_w, s.power_limit_w);
    let u_ok = u.within(100.0);
    let sm_ok = sm.within(1.0);
    let mt_ok = mt.within_positive(MAX_MEM_MIB);
    let mu_in = mu.within(MAX_MEM_MIB);
    // Memory used above a valid total is rejected too (it counts as a second bad field).
    let mu_over = mu_in & mt_ok & (mu.raw() > mt.raw());
    let mu_ok = mu_in & !mu_over;
    let p_ok = p.within_from(MIN_POWER_W, MAX_POWER_W);
    let l_ok = l.within_from(MIN_POWER_W, MAX_POWER_W);
    let procs = s.procs.unwrap_or(u32::MAX);
    let procs_bad = s.procs.is_some() & (procs > MAX_PROCS);
    let bad = |r: Reading, ok: bool| !r.is_missing() & !ok;
    let any_bad = bad(u, u_ok) | bad(sm, sm_ok) | bad(mt, mt_ok) | bad(mu, mu_in) | mu_over | bad(p, p_ok) | bad(l, l_ok) | procs_bad;
    let compute = if u_ok {
        u.raw()
    } else if sm_ok {
        sm.raw() * 100.0
    } else {
        0.0
    };
    // Non-negative and bounded, so adding 0.5 and truncating rounds to nearest.
    let util_milli = (compute * 1000.0 + 0.5) as u32;
    let (mu_v, mt_v, p_v, l_v) = (mu.raw(), mt.raw(), p.raw(), l.raw());
    let held = if mt_ok {
        mu_v >= th.mem_held_frac * mt_v
    } else {
        mu_v >= th.mem_held_mib
    };
    let (idle, spin_low) = if l_ok {
        (p_v <= th.idle_power_frac * l_v, p_v <= th.spin_power_frac * l_v)
    } else {
        (p_v <= th.idle_power_w, p_v <= th.idle_power_w)
    };
    let bit = |c: bool, f: u16| (c as u16) * f;
    let flags = bit(mu_ok & held, MEM_HELD)
        | bit(mu_ok & !held, MEM_FREE)
        | bit(procs == 0, PROCS_ZERO)
        | bit((procs != 0) & (procs <= MAX_PROCS), PROCS_POS)
        | bit(p_ok, POWER_KNOWN)
        | bit(p_ok & idle, POWER_IDLE)
        | bit(p_ok & spin_low, POWER_SPIN_LOW)
        | bit(util_milli >= th.spin_util_milli, UTIL_SPIN)
        // The broken-exporter pattern on the compute reading in use (util, or SM activity
        // when util is missing) and the raw memory and power (a missing one is NaN and never
        // equals 0; −0.0 does, as it did as an `Option<f64>`).
        | bit((compute == 0.0) & (mu_v == 0.0) & (p_v == 0.0), ALL_ZERO)
        // Power 0 W is itself unknown (no live GPU draws it), so `!p_ok` covers it.
        | bit((compute == 0.0) & ((mu_v == 0.0) | !mu_ok) & !p_ok, ZERO_OR_MISSING);
    Classified {
        // SM activity is a lower bound of utilization.gpu (a kernel on one SM of 132 reads
        // 0.008 while utilization.gpu reads 100 %): only a 0 shows that no kernel ran, so only
        // a 0 is a compute reading when util is missing (trial 23: a GPU kept busy on one SM
        // read 0.8 % and was cancelled as `hung` in a replay of dcgm pages).
        compute_ok: u_ok | (sm_ok & (sm.raw() == 0.0)),
        any_bad,
        util_milli,
        // Both are bounded (guard 3) and non-negative: +0.5 and truncation rounds.
        power_dw: if p_ok { (p_v * 10.0 + 0.5) as u16 } else { 0 },
        mem_mib: if mu_ok { (mu_v + 0.5) as u32 } else { 0 },
        flags,
        bits: [u.to_bits(), sm.to_bits(), s.mem_used_mib.to_bits(), s.power_w.to_bits()],
        known: [u_ok, sm_ok, mu_ok, p_ok],
    }
}

impl Default for GpuWindow {
    fn default() -> Self {
        GpuWindow {
            ring: Box::new([]),
            head: 0,
            len: 0,
            out_len: 0,
            in_max_milli: 0,
            counts: [0; 3],
            sum_util_milli: 0,
            sum_power_dw: 0,
            sum_power_sq: 0,
            sum_mem_mib: 0,
            base_t_s: NO_TIME,
            newest_t_s: NO_TIME,
            last_valid_t_s: NO_TIME,
            last_bits: never_present(),
            invalid: None,
            late: 0,
            last_change_off: u32::MAX,
            copies_since_change: 0,
            copy_holes: 0,
        }
    }
}

impl GpuWindow {
    #[cold]
    fn note_invalid(&mut self, t_s: i64) {
        self.invalid.get_or_insert_with(Default::default).push_back(t_s);
    }

    fn invalid_count(&self) -> u32 {
        self.invalid.as_ref().map_or(0, |v| v.len() as u32)
    }

    /// The first entry no ingest could have made, described for a log (review 28: a state
    /// file held a util of 2,000,000,000 thousandths of a percent, which the general path
    /// believed and reported as a peak of 2,000,000 %): a reading beyond guard 3's bounds
    /// (util above 100 %, memory above [`crate::MAX_MEM_MIB`], power above
    /// [`crate::MAX_POWER_W`], as the entry keeps them), flags that contradict each other or
    /// that no release sets, times that do not increase, or a time (an entry's, an invalid
    /// sample's, the newest or last valid sample's) after `latest_ok_s`, the latest a sample
    /// of the snapshot's cycle could be stamped. `None` when every entry could have come from
    /// ingest. Used on restore, where a window may hold anything.
    pub(crate) fn implausible_entry(&self, latest_ok_s: i64) -> Option<String> {
        use crate::sample_check::{MAX_MEM_MIB, MAX_POWER_W, MIN_POWER_W};
        const KNOWN: u16 = (COPY_GAP << 1) - 1;
        if self.len > 0 && self.base_t_s == NO_TIME {
            // Review 30: the next sample would become the base, and move every entry's time.
            return Some(format!("{} entries but no base time", self.len));
        }
        let mut prev_off: Option<u32> = None;
        for (k, e) in self.iter().enumerate() {
            let why = if e.util_milli > 100_000 {
                Some(format!("util_milli {} is above 100,000 (100 %)", e.util_milli))
            } else if f64::from(e.mem_mib) > MAX_MEM_MIB {
                Some(format!("mem_mib {} is above {MAX_MEM_MIB}", e.mem_mib))
            } else if f64::from(e.power_dw) > MAX_POWER_W * 10.0 {
                Some(format!("power_dw {} is above {} ({MAX_POWER_W} W)", e.power_dw, MAX_POWER_W * 10.0))
            } else if e.flags & !KNOWN != 0 {
                Some(format!("flags {:#06x} has bits no release sets", e.flags))
            } else if e.flags & (MEM_HELD | MEM_FREE) == MEM_HELD | MEM_FREE
                || e.flags & (PROCS_POS | PROCS_ZERO) == PROCS_POS | PROCS_ZERO
                || (e.flags & (POWER_IDLE | POWER_SPIN_LOW) != 0 && e.flags & POWER_KNOWN == 0)
                || (e.flags & (ALL_ZERO | ZERO_OR_MISSING) != 0 && e.flags & POWER_KNOWN != 0)
            {
                Some(format!(
                    "flags {:#06x} contradict each other (memory both held and free, processes both > 0 and 0, power low but unknown, or power known in an all-zero sample)",
                    e.flags
                ))
            } else if (e.flags & POWER_KNOWN != 0) != (f64::from(e.power_dw) >= MIN_POWER_W * 10.0) {
                // Review 30: ingest keeps power as 0 when unknown, and known power is at
                // least `MIN_POWER_W`; 0 dW "known" went into the evidence's mean power.
                Some(format!(
                    "power_dw {} does not match flags {:#06x} (power known is at least {} dW, unknown is 0)",
                    e.power_dw,
                    e.flags,
                    MIN_POWER_W * 10.0
                ))
            } else if self.base_t_s.checked_add(i64::from(e.t_off)).is_none_or(|t| t > latest_ok_s) {
                // Every entry was a sample taken no later than the cycle's future bound; one
                // beyond the last cycle's, or beyond the end of time, is no engine's (the lanes
                // and the general path add `t_off` to the base unchecked). Restored, it would
                // be the newest sample: every real one after it late, the job never judged.
                Some(format!(
                    "t_off {} from base {} is after {latest_ok_s}, the latest time a sample could have been taken",
                    e.t_off, self.base_t_s
                ))
            } else if prev_off.is_some_and(|p| e.t_off <= p) {
                Some(format!(
                    "t_off {} does not follow the entry before it ({})",
                    e.t_off,
                    prev_off.unwrap_or(0)
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Some(format!("entry {k}: {why}"));
            }
            prev_off = Some(e.t_off);
        }
        // Operator trial 16 (the entries checked, the clocks): a newest sample time after the snapshot's cycle made every real
        // sample after the restore late, so the GPU took none and its job was never judged.
        for (what, t) in [("newest_t_s", self.newest_t_s), ("last_valid_t_s", self.last_valid_t_s)] {
            if t > latest_ok_s {
                return Some(format!(
                    "{what} {t} is after {latest_ok_s}, the latest time a sample could have been taken"
                ));
            }
        }
        if let Some(t) = self.invalid.iter().flat_map(|q| q.iter()).find(|&&t| t > latest_ok_s) {
            return Some(format!(
                "an invalid sample at {t} is after {latest_ok_s}, the latest time a sample could have been taken"
            ));
        }
        None
    }

    /// The entries, oldest first.
    fn iter(&self) -> impl DoubleEndedIterator<Item = &Entry> {
        let cap = self.ring.len();
        let (h, n) = (self.head as usize, self.len as usize);
        let first = &self.ring[h.min(cap)..(h + n).min(cap)];
        let wrapped = &self.ring[..(h + n).saturating_sub(cap)];
        first.iter().chain(wrapped)
    }

    fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Entry> {
        let cap = self.ring.len();
        let (h, n) = (self.head as usize, self.len as usize);
        let (wrapped, first) = self.ring.split_at_mut(h.min(cap));
        let first = &mut first[..n.min(cap - h.min(cap))];
        let wrapped_n = (h + n).saturating_sub(cap);
        first.iter_mut().chain(wrapped[..wrapped_n].iter_mut())
    }

    #[inline(always)]
    fn front(&self) -> Option<&Entry> {
        (self.len > 0).then(|| &self.ring[self.head as usize])
    }

    /// Doubles the ring (at least `hint` entries), keeping the entries in order from index 0.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, hint: usize) {
        let cap = (self.ring.len() * 2).max(hint).max(4);
        let mut v: Vec<Entry> = Vec::with_capacity(cap);
        v.extend(self.iter().copied());
        v.resize(cap, Entry::default());
        self.ring = v.into_boxed_slice();
        self.head = 0;
    }

    /// Appends `e` and counts it.
    #[inline(always)]
    fn push(&mut self, e: Entry) {
        if self.len as usize == self.ring.len() {
            self.grow(0);
        }
        let mut i = self.head as usize + self.len as usize;
        if i >= self.ring.len() {
            i -= self.ring.len();
        }
        self.ring[i] = e;
        self.len += 1;
        self.in_max_milli = self.in_max_milli.max(e.util_milli);
        self.count::<true>(&e);
        if e.flags & CHANGED != 0 {
            self.last_change_off = e.t_off;
            self.copies_since_change = 0;
        } else {
            self.copies_since_change = self.copies_since_change.saturating_add(1);
        }
    }

    /// Adds (`ADD`) or removes an entry's flag counts and sums.
    #[inline(always)]
    fn count<const ADD: bool>(&mut self, e: &Entry) {
        for (w, c) in self.counts.iter_mut().enumerate() {
            let lanes = LANES[((e.flags >> (4 * w)) & 0xf) as usize];
            *c = if ADD { c.wrapping_add(lanes) } else { c.wrapping_sub(lanes) };
        }
        // Power and memory are stored as 0 when unknown, so they can be summed unmasked.
        let p = e.power_dw as u64;
        let m = e.mem_mib as u64;
        let copy_gap = u32::from(e.flags & COPY_GAP != 0);
        if ADD {
            self.copy_holes += copy_gap;
            self.sum_util_milli += e.util_milli as u64;
            self.sum_power_dw += p;
            self.sum_power_sq += p * p;
            self.sum_mem_mib += m;
        } else {
            self.copy_holes -= copy_gap;
            self.sum_util_milli -= e.util_milli as u64;
            self.sum_power_dw -= p;
            self.sum_power_sq -= p * p;
            self.sum_mem_mib -= m;
        }
    }

    /// A sample stamped at `t_s`, before its job started: no evidence about the job, counted
    /// invalid (at its own time, so it leaves the count with the window).
    #[cold]
    pub(crate) fn ingest_before_start(&mut self, t_s: i64) {
        self.note_invalid(t_s);
    }

    /// Takes note of a sample stamped `t_s` whose readings cannot be used (it conflicts with
    /// another sample of the same instant): like a sample without a compute reading, it
    /// counts as invalid and as this GPU's newest, so the rest of that instant is late.
    pub(crate) fn ingest_unusable(&mut self, t_s: i64, cyc: &Cycle) {
        if t_s > cyc.future_after_s {
            self.note_invalid(cyc.now_s);
            return;
        }
        if self.newest_t_s != NO_TIME && t_s <= self.newest_t_s {
            self.late = self.late.saturating_add(1);
            return;
        }
        self.newest_t_s = t_s;
        self.note_invalid(t_s);
    }

    /// Ingests one sample. Callers hand a GPU's samples of one cycle in (time, readings)
    /// order; a sample not newer than the newest ingested is dropped and counted in `late`.
    ///
    /// Guard 3 is applied here field by field (see `sample_check`): a field that is absent,
    /// a sentinel or out of bounds is unknown, never zero, and a present but rejected field
    /// marks the sample invalid. `sample_check::check` states the same rules one field at a
    /// time; `ingest_agrees_with_check` holds the two together.
    #[inline(always)]
    pub(crate) fn ingest(&mut self, s: &Sample, cyc: &Cycle, th: &IngestThresholds) {
        if s.t_s > cyc.future_after_s {
            // Guard 10: a sample from the future is invalid evidence; it must not move
            // `newest_t`, or every later real sample would be dropped as late.
            self.note_invalid(cyc.now_s);
            return;
        }
        if self.newest_t_s != NO_TIME && s.t_s <= self.newest_t_s {
            self.late = self.late.saturating_add(1);
            return;
        }
        self.newest_t_s = s.t_s;
        if self.base_t_s == NO_TIME {
            self.base_t_s = s.t_s;
            self.grow(th.ring_hint);
        }
        let c = classify(s, th);
        if !c.compute_ok {
            self.note_invalid(s.t_s);
            return;
        }
        if c.any_bad {
            self.note_invalid(s.t_s);
            // Broken is not idle: an implausible reading discredits the whole sample.
            if sample_check::has_implausible_field(s) {
                return;
            }
        }
        let mut flags = c.flags;
        // The freeze check: a reading changed when it is known (present and valid) and differs
        // from its last known value. An unknown reading (missing, a sentinel, 0 W) is no new
        // value, so a stuck collector that now and then leaves a field out still reads as
        // frozen.
        let mut changed = self.last_valid_t_s == NO_TIME;
        for ((last, now), known) in self.last_bits.iter_mut().zip(c.bits).zip(c.known) {
            changed |= known & (now != *last);
            *last = if known { now } else { *last };
        }
        if changed {
            flags |= CHANGED;
        }
        if self.last_valid_t_s != NO_TIME && s.t_s.saturating_sub(self.last_valid_t_s) > th.max_gap_s {
            flags |= GAP_BEFORE;
        }
        if changed
            && self.copies_since_change >= 1
            && self.last_change_off != u32::MAX
            && s.t_s.saturating_sub(self.base_t_s.saturating_add(self.last_change_off as i64)) > th.max_gap_s
        {
            flags |= COPY_GAP;
        }
        self.last_valid_t_s = s.t_s;
        // Offsets beyond u32 (136 years) cannot occur for one running job; saturate anyway.
        let t_off = s.t_s.saturating_sub(self.base_t_s).clamp(0, u32::MAX as i64) as u32;
        self.push(Entry {
            t_off,
            util_milli: c.util_milli,
            power_dw: c.power_dw,
            mem_mib: c.mem_mib,
            flags,
            suffix_max_milli: 0,
        });
    }

    /// Moves every entry into the "out" part, computing suffix maxima back to front.
    #[cold]
    #[inline(never)]
    fn rebuild_suffix_max(&mut self) {
        let mut m = 0;
        for e in self.iter_mut().rev() {
            m = m.max(e.util_milli);
            e.suffix_max_milli = m;
        }
        self.out_len = self.len;
        self.in_max_milli = 0;
    }

    /// Highest util in the window, thousandths of a percent.
    #[inline(always)]
    fn peak_milli(&self) -> u32 {
        let out = if self.out_len > 0 {
            self.front().map_or(0, |e| e.suffix_max_milli)
        } else {
            0
        };
        out.max(self.in_max_milli)
    }

    #[cold]
    fn evict_invalid(&mut self, cutoff: i64) {
        if let Some(inv) = &mut self.invalid {
            while inv.front().is_some_and(|&t| t <= cutoff) {
                inv.pop_front();
            }
            if inv.is_empty() {
                self.invalid = None;
            }
        }
    }

    /// Drops everything at or before `now − window`.
    #[inline(always)]
    pub(crate) fn evict(&mut self, cyc: &Cycle) {
        let cutoff = cyc.cutoff_s;
        if self.invalid.is_some() {
            self.evict_invalid(cutoff);
        }
        if self.base_t_s == NO_TIME || cutoff < self.base_t_s {
            return;
        }
        // Entries at offset ≤ off_cut are at or before the cutoff.
        let off_cut = cutoff.saturating_sub(self.base_t_s).min(u32::MAX as i64) as u32;
        while self.len > 0 {
            let e = self.ring[self.head as usize];
            if e.t_off > off_cut {
                break;
            }
            if self.out_len == 0 {
                self.rebuild_suffix_max();
            }
            self.count::<false>(&e);
            self.head += 1;
            if self.head as usize == self.ring.len() {
                self.head = 0;
            }
            self.len -= 1;
            self.out_len -= 1;
        }
    }

    /// Count of entries in the window with `flag` set.
    #[inline(always)]
    fn lane(&self, flag: u16) -> u32 {
        let b = flag.trailing_zeros() as usize;
        (self.counts[b / 4] >> (32 * (b % 4))) as u32
    }

    /// What every evaluation needs from the window ending at `now_s`, and its coverage. Call
    /// [`GpuWindow::evict`] first.
    #[inline(always)]
    pub(crate) fn brief(&self, cyc: &Cycle, th: &IngestThresholds) -> Brief {
        let n = self.len;
        let Some(first) = self.front() else {
            let invalid = self.invalid_count();
            return Brief {
                invalid,
                coverage: if invalid > 0 {
                    Coverage::Broken(EvidenceProblem::NoValidSamples)
                } else {
                    Coverage::Broken(EvidenceProblem::NoSamples)
                },
                ..Brief::default()
            };
        };
        // The newest entry is the last valid sample ingested (entries are only ever pushed
        // with it), so its time is `last_valid_t_s`: no need to read the ring's other end.
        brief_of(
            &WindowView {
                // `COPY_GAP` is not a counted lane: `copy_holes` counts it.
                count: |f| if f == COPY_GAP { self.copy_holes } else { self.lane(f) },
                n,
                first_flags: first.flags,
                first_t_s: self.base_t_s + first.t_off as i64,
                last_t_s: self.last_valid_t_s,
                base_t_s: self.base_t_s,
                last_change_off: self.last_change_off,
                copies_since_change: self.copies_since_change,
                peak_util_milli: self.peak_milli(),
                sum_util_milli: self.sum_util_milli,
                sum_mem_mib: self.sum_mem_mib,
                sum_power_dw: self.sum_power_dw,
                invalid: self.invalid_count(),
            },
            cyc,
            th,
        )
    }

    /// The full statistics of the window summarised by `b` (this window's [`Brief`]), for
    /// signature matching.
    pub(crate) fn stats(&self, b: &Brief) -> GpuStats {
        stats_of(b, |f| self.lane(f), self.sum_power_sq)
    }

    /// Forgets every sample, keeping only the count of late ones: after the clock went back,
    /// the window's samples were all taken before the step, so they cannot be placed against
    /// the new clock, and newer readings (stamped earlier) must not be dropped as late (review
    /// 14). The window fills again from the next sample.
    pub(crate) fn forget_after_clock_step(&mut self) {
        *self = GpuWindow {
            late: self.late,
            ..GpuWindow::default()
        };
    }

    /// Drops window contents older than one window before `now_s` and every pending sample;
    /// used when restoring a snapshot.
    pub(crate) fn restore_trim(&mut self, now_s: i64, th: &IngestThresholds) {
        self.evict(&th.cycle(now_s));
    }
}

/// What a window's [`Brief`] is made from: [`GpuWindow`] and the lane path each give one, and
/// [`brief_of`] decides the same way for both. `count(flag)` is the number of entries in the
/// window with `flag`; times are epoch seconds, util thousandths of a percent.
pub(crate) struct WindowView<C: Fn(u16) -> u32> {
    pub(crate) count: C,
    /// Entries in the window (at least one).
    pub(crate) n: u32,
    /// The flags of the oldest entry.
    pub(crate) first_flags: u16,
    pub(crate) first_t_s: i64,
    pub(crate) last_t_s: i64,
    pub(crate) base_t_s: i64,
    pub(crate) last_change_off: u32,
    pub(crate) copies_since_change: u16,
    pub(crate) peak_util_milli: u32,
    pub(crate) sum_util_milli: u64,
    pub(crate) sum_mem_mib: u64,
    pub(crate) sum_power_dw: u64,
    pub(crate) invalid: u32,
}

/// The [`Brief`] of a window of at least one entry, and its coverage.
///
/// The frozen tail: true when the window's newest new information is older than
/// `max_sample_gap`: its newest samples repeat the readings before them bit for bit, and the
/// newest sample whose readings changed is more than `max_sample_gap` before now. A repeated
/// sample is no evidence that the GPU still reads so: a collector that froze partway through
/// the window (trial 10: a job was cancelled on a window whose newest 36 of 40 samples were
/// one copy) re-serves its last answer. An unknown reading is no new value, so a copy whose
/// power reads `[N/A]` is as frozen as one whose power repeats (review 17). One repeat is
/// enough when the newest change is that old (a copy followed by an outage, or a collector
/// lagging by most of the gap: review 17; the property
/// `prop_guard_3_a_collector_frozen_partway_is_stale` found the outage). Only where the window
/// has power on at least two samples: a GPU that never reports power looks the same when
/// quiet, and is held at alert instead (`freeze_undetectable`, `Cap::PowerUnknown`).
#[inline(always)]
pub(crate) fn brief_of<C: Fn(u16) -> u32>(v: &WindowView<C>, cyc: &Cycle, th: &IngestThresholds) -> Brief {
    let n = v.n;
    let has = |flag: u16| u32::from(v.first_flags & flag != 0);
    let power_known = (v.count)(POWER_KNOWN);
    // Holes and changes are flagged on the sample after them; the first entry's flags refer
    // to a sample outside the window.
    let copy_holes = if power_known >= 2 { (v.count)(COPY_GAP) - has(COPY_GAP) } else { 0 };
    let holes = (v.count)(GAP_BEFORE) - has(GAP_BEFORE) + copy_holes;
    let identical = n >= 2 && (v.count)(CHANGED) - has(CHANGED) == 0;
    let frozen_tail = power_known >= 2
        && v.copies_since_change >= 1
        && v.last_change_off != u32::MAX
        && cyc.now_s.saturating_sub(v.base_t_s.saturating_add(v.last_change_off as i64)) > th.max_gap_s;
    let (first_t, last_t) = (v.first_t_s, v.last_t_s);
    let coverage = if last_t > cyc.future_after_s {
        Coverage::Broken(EvidenceProblem::Future)
    } else if cyc.now_s.saturating_sub(last_t) > th.max_gap_s {
        Coverage::Broken(EvidenceProblem::Stale)
    } else if holes > 0 {
        Coverage::Broken(EvidenceProblem::Gap)
    } else if (v.count)(ALL_ZERO) > 0 && ((v.count)(ZERO_OR_MISSING) == n || identical || (v.count)(ALL_ZERO) * 2 > n) {
        Coverage::Broken(EvidenceProblem::AllZero)
    } else if (identical && power_known >= 2) || frozen_tail {
        Coverage::Broken(EvidenceProblem::Frozen)
    } else if first_t > cyc.short_after_s {
        Coverage::Short
    } else {
        Coverage::Full
    };
    let held = (v.count)(MEM_HELD);
    Brief {
        samples: n,
        first_t_s: first_t,
        last_t_s: last_t,
        peak_util_milli: v.peak_util_milli,
        sum_util_milli: v.sum_util_milli,
        mem_known: held + (v.count)(MEM_FREE),
        mem_held_all: held == n,
        sum_mem_mib: v.sum_mem_mib,
        power_known,
        sum_power_dw: v.sum_power_dw,
        invalid: v.invalid,
        coverage,
        freeze_undetectable: identical && power_known < 2,
        spin_candidate: (v.count)(UTIL_SPIN) == n && power_known == n && (v.count)(POWER_SPIN_LOW) == n,
    }
}

/// The full statistics of the window summarised by `b`, for signature matching; `count` and
/// `sum_power_sq` as in [`WindowView`].
pub(crate) fn stats_of(b: &Brief, count: impl Fn(u16) -> u32, sum_power_sq: u64) -> GpuStats {
    if b.samples == 0 {
        return GpuStats {
            invalid: b.invalid,
            ..GpuStats::default()
        };
    }
    GpuStats {
        samples: b.samples,
        first_t_s: b.first_t_s,
        last_t_s: b.last_t_s,
        peak_util_milli: b.peak_util_milli,
        sum_util_milli: b.sum_util_milli,
        mem_known: b.mem_known,
        mem_held: count(MEM_HELD),
        mem_free: count(MEM_FREE),
        sum_mem_mib: b.sum_mem_mib,
        procs_pos: count(PROCS_POS),
        procs_zero: count(PROCS_ZERO),
        power_known: b.power_known,
        power_idle: count(POWER_IDLE),
        power_spin_low: count(POWER_SPIN_LOW),
        util_spin: count(UTIL_SPIN),
        sum_power_dw: b.sum_power_dw,
        sum_power_sq,
        invalid: b.invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The engine's integer test for a low peak agrees with `peak_is_low` at every peak
        /// near the threshold, and at the ends of the range.
        #[test]
        fn integer_low_peak_agrees_with_peak_is_low(threshold in 0.000_1f64..=100.0, delta in -20i64..=20) {
            let cfg = PolicyConfig { util_threshold_pct: threshold, ..PolicyConfig::default() };
            let th = IngestThresholds::new(&cfg);
            let near = ((threshold * 1000.0).floor() as i64 + delta).clamp(0, 100_000) as u32;
            for p in [0, near, 100_000] {
                proptest::prop_assert_eq!(p < th.low_below_milli, crate::signature::peak_is_low(p, &cfg), "peak {}", p);
            }
        }
    }

    #[test]
    fn integer_low_peak_at_exact_thresholds() {
        for t in [0.001, 1.0, 14.999, 15.0, 15.0005, 33.333_333, 99.999, 100.0] {
            let cfg = PolicyConfig {
                util_threshold_pct: t,
                ..PolicyConfig::default()
            };
            let th = IngestThresholds::new(&cfg);
            for p in 0..=100_000u32 {
                assert_eq!(
                    p < th.low_below_milli,
                    crate::signature::peak_is_low(p, &cfg),
                    "threshold {t}, peak {p}"
                );
            }
        }
    }
}

/// A differential test of the one-pass `ingest` against the field-by-field reference (`sample_check::check`'s rules applied to the raw `Option<f64>`
/// fields, as the code before `Reading` did, plus the old flag logic).
#[cfg(test)]
mod ingest_agrees_with_check {
    use super::*;
    use crate::sample_check::{MAX_MEM_MIB, MAX_POWER_W, MAX_PROCS};
    use proptest::prelude::*;

    /// A power or power limit: valid in `[MIN_POWER_W, MAX_POWER_W]`.
    fn keep_power(v: Option<f64>, bad: &mut u8) -> Option<f64> {
        let x = v?;
        if (crate::sample_check::MIN_POWER_W..=MAX_POWER_W).contains(&x) {
            Some(x)
        } else {
            *bad += 1;
            None
        }
    }

    /// A power or limit that discredits its sample: present, not valid, not a sentinel, not 0.
    fn oob_power(v: Option<f64>) -> bool {
        v.is_some_and(|x| keep_power(Some(x), &mut 0).is_none() && !crate::sample_check::is_sentinel(x) && x != 0.0)
    }

    /// The old `keep`, on a raw optional value.
    fn keep(v: Option<f64>, open_lo: bool, hi: f64, bad: &mut u8) -> Option<f64> {
        let x = v?;
        let above = if open_lo { x > 0.0 } else { x >= 0.0 };
        if above && x <= hi {
            Some(x)
        } else {
            *bad += 1;
            None
        }
    }

    #[derive(Clone, Copy, Debug)]
    struct Raw {
        util: Option<f64>,
        sm: Option<f64>,
        mem_used: Option<f64>,
        mem_total: Option<f64>,
        power: Option<f64>,
        limit: Option<f64>,
        procs: Option<u32>,
    }

    /// The old ingest's outcome for one sample: (entry fields without CHANGED/GAP, invalid?).
    fn reference(r: &Raw, th: &IngestThresholds) -> (Option<(u32, u32, u16, u16)>, bool) {
        let mut bad = 0u8;
        let util = keep(r.util, false, 100.0, &mut bad);
        let sm = keep(r.sm, false, 1.0, &mut bad);
        let mem_total = keep(r.mem_total, true, MAX_MEM_MIB, &mut bad);
        let mut mem_used = keep(r.mem_used, false, MAX_MEM_MIB, &mut bad);
        if let (Some(u), Some(t)) = (mem_used, mem_total) {
            if u > t {
                bad += 1;
                mem_used = None;
            }
        }
        let power = keep_power(r.power, &mut bad);
        let limit = keep_power(r.limit, &mut bad);
        let procs = match r.procs {
            Some(p) if p > MAX_PROCS => {
                bad += 1;
                None
            }
            p => p,
        };
        let compute = match (util, sm) {
            (Some(u), _) => Some(u),
            // SM activity is a compute reading only at 0 (trial 23).
            (None, Some(f)) => (f == 0.0).then_some(0.0),
            (None, None) => None,
        };
        let all_zero_raw = compute == Some(0.0) && r.mem_used == Some(0.0) && r.power == Some(0.0);
        let zero_or_missing = compute == Some(0.0) && mem_used.is_none_or(|x| x == 0.0) && power.is_none();
        let Some(util_milli) = compute.map(|u| (u * 1000.0 + 0.5) as u32) else {
            return (None, true);
        };
        // A present value out of bounds that is not a sentinel (or memory used above a valid
        // total, or an implausible process count) discredits the whole sample.
        let oob = |v: Option<f64>, open_lo: bool, hi: f64| {
            v.is_some_and(|x| {
                keep(Some(x), open_lo, hi, &mut 0).is_none() && !crate::sample_check::is_sentinel(x) && !(open_lo && x == 0.0)
            })
        };
        let over = matches!((keep(r.mem_used, false, MAX_MEM_MIB, &mut 0), mem_total), (Some(u), Some(t)) if u > t);
        let implausible = oob(r.util, false, 100.0)
            || oob(r.sm, false, 1.0)
            || oob(r.mem_total, true, MAX_MEM_MIB)
            || oob(r.mem_used, false, MAX_MEM_MIB)
            || over
            || oob_power(r.power)
            || oob_power(r.limit)
            || r.procs.is_some_and(|p| p > MAX_PROCS && p != u32::MAX);
        if implausible {
            return (None, true);
        }
        let mut flags = 0u16;
        if let Some(used) = mem_used {
            let held = match mem_total {
                Some(total) => used >= th.mem_held_frac * total,
                None => used >= th.mem_held_mib,
            };
            flags |= if held { MEM_HELD } else { MEM_FREE };
        }
        match procs {
            Some(0) => flags |= PROCS_ZERO,
            Some(_) => flags |= PROCS_POS,
            None => {}
        }
        if let Some(p) = power {
            flags |= POWER_KNOWN;
            let (idle, spin_low) = match limit {
                Some(l) => (p <= th.idle_power_frac * l, p <= th.spin_power_frac * l),
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
        if all_zero_raw {
            flags |= ALL_ZERO;
        }
        if zero_or_missing {
            flags |= ZERO_OR_MISSING;
        }
        let power_dw = power.map_or(0, |p| (p * 10.0 + 0.5) as u16);
        let mem_mib = mem_used.map_or(0, |m| (m + 0.5) as u32);
        (Some((util_milli, mem_mib, power_dw, flags)), bad > 0)
    }

    fn field(hi: f64) -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(f64::NAN)),
            1 => Just(Some(-f64::NAN)),
            1 => Just(Some(f64::from_bits(0x7ff8_6d69_7373_696e))),
            1 => Just(Some(f64::from_bits(0x7ff0_0000_0000_0001))),
            1 => Just(Some(0.0)),
            1 => Just(Some(-0.0)),
            1 => Just(Some(f64::INFINITY)),
            1 => Just(Some(f64::NEG_INFINITY)),
            1 => Just(Some(f64::MIN_POSITIVE / 4.0)),
            1 => Just(Some(-f64::MIN_POSITIVE / 4.0)),
            1 => Just(Some(hi)),
            1 => Just(Some(f64::from_bits(hi.to_bits() + 1))),
            1 => Just(Some(crate::SENTINEL_U32)),
            1 => Just(Some(crate::DCGM_INT32_BLANK)),
            1 => Just(Some(crate::DCGM_INT64_BLANK)),
            1 => Just(Some(crate::DCGM_FP64_BLANK)),
            1 => Just(Some(f64::MAX)),
            4 => (0.0..=hi).prop_map(Some),
            2 => (-10.0..hi * 2.0).prop_map(Some),
            2 => any::<u64>().prop_map(|b| Some(f64::from_bits(b))),
        ]
    }

    fn raw() -> impl Strategy<Value = Raw> {
        (
            field(100.0),
            field(1.0),
            field(MAX_MEM_MIB),
            field(MAX_MEM_MIB),
            field(MAX_POWER_W),
            field(MAX_POWER_W),
            prop_oneof![
                Just(None),
                Just(Some(0)),
                Just(Some(MAX_PROCS)),
                Just(Some(MAX_PROCS + 1)),
                Just(Some(u32::MAX)),
                any::<u32>().prop_map(Some)
            ],
        )
            .prop_map(|(util, sm, mem_used, mem_total, power, limit, procs)| Raw {
                util,
                sm,
                mem_used,
                mem_total,
                power,
                limit,
                procs,
            })
    }

    proptest::proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn ingest_agrees_with_check(r in raw(), frac in 0.0f64..=1.0, idle_w in 0.0f64..=2000.0, held_mib in 0.0f64..=1e6, sfrac in 0.0f64..=1.0, spin in 0.0f64..=100.0) {
            let cfg = PolicyConfig {
                mem_held_frac: frac,
                idle_power_w: idle_w,
                mem_held_mib: held_mib,
                idle_power_frac: frac,
                spin_power_frac: sfrac,
                spin_util_pct: spin,
                ..PolicyConfig::default()
            };
            let th = IngestThresholds::new(&cfg);
            let s = Sample {
                t_s: 1000,
                util_pct: r.util.into(),
                sm_active: r.sm.into(),
                mem_used_mib: r.mem_used.into(),
                mem_total_mib: r.mem_total.into(),
                power_w: r.power.into(),
                power_limit_w: r.limit.into(),
                procs: r.procs,
                ..Sample::default()
            };
            // The field-by-field reference on the Readings agrees with the raw reference.
            let c = sample_check::check(&s);
            let (want, want_invalid) = reference(&r, &th);
            let kept = c.util_milli.filter(|_| !sample_check::has_implausible_field(&s));
            prop_assert_eq!(kept, want.map(|w| w.0));
            prop_assert_eq!(c.invalid_fields > 0 || c.util_milli.is_none(), want_invalid);
            let mut w = GpuWindow::default();
            w.ingest(&s, &th.cycle(1000), &th);
            let got = w.front().map(|e| (e.util_milli, e.mem_mib, e.power_dw, e.flags & !(CHANGED | GAP_BEFORE)));
            prop_assert_eq!(got, want, "{:?}", r);
            prop_assert_eq!(w.invalid_count() > 0, want_invalid, "{:?}", r);
        }
    }
}
