//! The lane path: the windows of a job of exactly [`L`] GPUs whose samples arrive together,
//! kept as one compact state with the job's GPUs as lanes.
//!
//! It is another form of the same [`GpuWindow`]s, not another policy: every sample is
//! decided by the same [`classify`], and every figure the engine reads ([`Brief`],
//! [`GpuStats`]) equals the one the per-GPU windows give (`policy/tests/lane_equivalence.rs`
//! holds engines with and without the lane path to identical findings).
//!
//! Why: issue 2 prices a cycle per new GPU-sample. Per-GPU windows put each GPU's ring
//! behind its own pointer; here a job's rows are one allocation, a row holds one instant of
//! every GPU (128 bytes, two cache lines), and the per-lane work is loops over `[_; L]`
//! arrays that the compiler turns into vector code.
//!
//! What the lane path takes (`LaneJob::ingest`): one sample per GPU, all stamped at one
//! instant newer than the last, not from the future, not before the job's start, every field
//! plausible, with a compute reading. Anything else (a GPU missing or late, an invalid or
//! conflicting sample, a full ring) is an exception: the engine turns the lanes back into
//! per-GPU windows ([`LaneJob::to_windows`]) and runs the general path. A job goes back to
//! lanes ([`LaneJob::from_windows`]) once its windows line up again: no invalid sample left
//! in them, and every GPU's entries at the same instants.

// Lane loops index several arrays by GPU at once: that is the layout.
#![allow(clippy::needless_range_loop)]

use super::*;

#[cfg(target_arch = "x86_64")]
mod avx2;
mod pool;
#[cfg(target_arch = "x86_64")]
mod pool_avx2;
mod stats;

/// GPUs per lane job: one node of the common 8-GPU servers (HGX, DGX).
pub(crate) const L: usize = 8;
/// The most rows a lane job's ring may have. Rings are sized per engine ([`lane_cap`]); a
/// policy whose window needs more rows keeps every job on the general path.
pub(crate) const MAX_CAP: usize = 128;
const _: () = assert!(MAX_CAP.is_power_of_two() && MAX_CAP <= u8::MAX as usize, "counts are bytes");

/// The rows of a lane job's ring under thresholds `th`: a power of two above the rows a
/// window holds at the configured interval (`window ÷ interval + 1`, and one pushed before
/// the eviction), or `None` when that is more than [`MAX_CAP`]. 32 at the defaults (20m,
/// 60 s), 64 for a 40m window. A job whose samples come faster than the interval fills its
/// ring and leaves the lane path (`LaneJob::ingest`).
pub(crate) fn lane_cap(th: &IngestThresholds) -> Option<u32> {
    let cap = (th.ring_hint + 1).next_power_of_two();
    (cap <= MAX_CAP).then_some(cap as u32)
}

/// A hint to load the cache line holding `p`: changes no state and no result.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` reads nothing and cannot fault, whatever the address: it is a
    // hint. (Callers pass addresses inside a `LaneJob` anyway.)
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`spread`] of every byte, looked up rather than computed per row and lane.
const SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut x = 0;
    while x < 256 {
        t[x] = spread(x as u64);
        x += 1;
    }
    t
};

/// The flag counts' increment for a row's flags on one lane: byte `f % 8` of word `f / 8` is
/// flag bit `f` (see `LaneJob::counts`).
#[inline(always)]
fn spread_flags(flags: u16) -> [u64; 2] {
    [SPREAD[usize::from(flags & 0xff)], SPREAD[usize::from(flags >> 8)]]
}

/// The low 8 bits of `x` spread one per byte: bit `b` becomes byte `b` (0 or 1).
#[inline(always)]
const fn spread(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Byte b keeps only bit b of x; adding 0x7f sets each byte's top bit exactly when that
    // byte is non-zero, without carrying into the next.
    ((((x & 0xff).wrapping_mul(ONES) & 0x8040_2010_0804_0201) + 0x7f7f_7f7f_7f7f_7f7f) >> 7) & ONES
}

/// One instant of a job's window, one lane per GPU: 128 bytes, two cache lines.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(64))]
struct Row {
    util_milli: [u32; L],
    mem_mib: [u32; L],
    /// For rows in the front ("out") part of the ring: the highest util from this row to the
    /// end of that part (see [`GpuWindow`]'s two-stack maximum).
    suffix_max_milli: [u32; L],
    power_dw: [u16; L],
    flags: [u16; L],
}

/// A job's windows as lanes. Sums fit their widths: a ring holds at most [`MAX_CAP`] (128)
/// rows of util ≤ 100,000 milli-percent, memory ≤ 1,048,576 MiB and power ≤ 20,000 dW (guard
/// 3's bounds, which ingest applies and [`LaneJob::from_windows`] checks, since a window read
/// from a state file may hold anything), so `u32` sums stay below 135 M, and counts, bytes,
/// at most 128.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct LaneJob {
    /// First, so that each field's eight lanes are one cache line of their own: a field no
    /// lane changed is not stored (`ingest_avx2`), and its line stays clean.
    last_bits: [[u64; L]; FROZEN_FIELDS],
    base_t_s: i64,
    newest_t_s: i64,
    last_valid_t_s: i64,
    head: u32,
    len: u32,
    out_len: u32,
    copies_since_change: [u16; L],
    late: [u32; L],
    last_change_off: [u32; L],
    /// Flag counts, one byte each: byte `f % 8` of `counts[f / 8][i]` counts the rows in the
    /// window with flag bit `f` on lane `i` (see [`spread`]). A byte cannot overflow: a ring
    /// holds at most its `cap` rows (at most [`MAX_CAP`]).
    counts: [[u64; L]; 2],
    sum_util_milli: [u32; L],
    sum_power_dw: [u32; L],
    sum_mem_mib: [u32; L],
    in_max_milli: [u32; L],
    sum_power_sq: [u64; L],
    /// Per ring slot, the row's time as an offset from `base_t_s` (the first `cap` used).
    t_off: [u32; MAX_CAP],
    /// The ring: a power of two of rows ([`lane_cap`]).
    rows: Box<[Row]>,
}

/// Flag bit number of a flag constant.
const fn nr(flag: u16) -> usize {
    flag.trailing_zeros() as usize
}

/// True when an entry's readings are within guard 3's bounds, as every entry ingest makes is:
/// util at most 100 %, memory at most `MAX_MEM_MIB`, power at most `MAX_POWER_W` (each as
/// the entry keeps it, rounded). An entry read from a state file may hold anything (review
/// 28: 2,000,000,000 overflowed the lanes' `u32` sums); a window with one stays per-GPU.
fn within_guard_3(e: &Entry) -> bool {
    use crate::sample_check::{MAX_MEM_MIB, MAX_POWER_W};
    e.util_milli <= 100_000 && f64::from(e.mem_mib) <= MAX_MEM_MIB && f64::from(e.power_dw) <= MAX_POWER_W * 10.0
}

impl LaneJob {
    /// The lanes of a job with no samples yet (each lane as [`GpuWindow::default`]).
    pub(crate) fn empty(cap: u32) -> Box<LaneJob> {
        debug_assert!(cap.is_power_of_two() && cap as usize <= MAX_CAP);
        Box::new(LaneJob {
            base_t_s: NO_TIME,
            newest_t_s: NO_TIME,
            last_valid_t_s: NO_TIME,
            head: 0,
            len: 0,
            out_len: 0,
            copies_since_change: [0; L],
            late: [0; L],
            last_change_off: [u32::MAX; L],
            counts: [[0; L]; 2],
            sum_util_milli: [0; L],
            sum_power_dw: [0; L],
            sum_mem_mib: [0; L],
            in_max_milli: [0; L],
            sum_power_sq: [0; L],
            last_bits: [[Reading::MISSING.to_bits(); L]; FROZEN_FIELDS],
            t_off: [0; MAX_CAP],
            rows: vec![Row::default(); cap as usize].into_boxed_slice(),
        })
    }

    /// The lanes holding exactly what `ws` hold, or `None` when they cannot: not [`L`]
    /// windows, an invalid sample still in one, as many rows as `cap` or more, or windows whose
    /// entries, base or clocks are not at the same instants.
    pub(crate) fn from_windows(ws: &[GpuWindow], cap: u32) -> Option<Box<LaneJob>> {
        if ws.len() != L {
            return None;
        }
        let w0 = &ws[0];
        let n = w0.len as usize;
        if n >= cap as usize {
            return None;
        }
        for w in ws {
            if w.invalid.is_some()
                || w.len != w0.len
                || w.base_t_s != w0.base_t_s
                || w.newest_t_s != w0.newest_t_s
                || w.last_valid_t_s != w0.last_valid_t_s
                || w.out_len != w0.out_len
                || !w.iter().map(|e| e.t_off).eq(w0.iter().map(|e| e.t_off))
                || !w.iter().all(within_guard_3)
            {
                return None;
            }
        }
        let mut j = LaneJob::empty(cap);
        j.base_t_s = w0.base_t_s;
        j.newest_t_s = w0.newest_t_s;
        j.last_valid_t_s = w0.last_valid_t_s;
        for (k, e) in w0.iter().enumerate() {
            j.t_off[k] = e.t_off;
        }
        for (i, w) in ws.iter().enumerate() {
            for (k, e) in w.iter().enumerate() {
                let r = &mut j.rows[k];
                r.util_milli[i] = e.util_milli;
                r.mem_mib[i] = e.mem_mib;
                r.power_dw[i] = e.power_dw;
                r.flags[i] = e.flags;
                r.suffix_max_milli[i] = e.suffix_max_milli;
            }
            j.in_max_milli[i] = w.in_max_milli;
            j.copies_since_change[i] = w.copies_since_change;
            j.late[i] = w.late;
            j.last_change_off[i] = w.last_change_off;
            for f in 0..FROZEN_FIELDS {
                j.last_bits[f][i] = w.last_bits[f];
            }
        }
        j.len = n as u32;
        j.out_len = w0.out_len;
        for k in 0..n {
            let r = j.rows[k];
            j.add(&r);
        }
        Some(j)
    }

    /// The per-GPU windows holding exactly what the lanes hold, in slot order.
    pub(crate) fn to_windows(&self, th: &IngestThresholds) -> Vec<GpuWindow> {
        (0..L)
            .map(|i| {
                let mut w = GpuWindow {
                    base_t_s: self.base_t_s,
                    newest_t_s: self.newest_t_s,
                    last_valid_t_s: self.last_valid_t_s,
                    late: self.late[i],
                    ..GpuWindow::default()
                };
                for f in 0..FROZEN_FIELDS {
                    w.last_bits[f] = self.last_bits[f][i];
                }
                if self.base_t_s != NO_TIME {
                    w.grow(th.ring_hint.max(self.len as usize));
                }
                for k in 0..self.len {
                    let s = self.slot(k);
                    let r = &self.rows[s];
                    w.push(Entry {
                        t_off: self.t_off[s],
                        util_milli: r.util_milli[i],
                        mem_mib: r.mem_mib[i],
                        power_dw: r.power_dw[i],
                        flags: r.flags[i],
                        suffix_max_milli: r.suffix_max_milli[i],
                    });
                }
                // The two-stack maximum as the lanes keep it, so that the window is the very
                // one the general path would hold (a snapshot shows it).
                w.out_len = self.out_len;
                w.in_max_milli = self.in_max_milli[i];
                // `push` tracks the newest change among the entries; the lanes know it even
                // where it has left the window.
                w.last_change_off = self.last_change_off[i];
                w.copies_since_change = self.copies_since_change[i];
                w
            })
            .collect()
    }

    /// Asks the CPU to start loading the state before the rows, which the next
    /// [`LaneJob::ingest`], [`LaneJob::evict`] and [`LaneJob::brief`] of this job read. The
    /// engine calls it some jobs ahead, and [`LaneJob::prefetch_rows`] fewer jobs ahead: each
    /// job's state is its own allocation, a page or more apart, so the hardware prefetchers do
    /// not follow from one job to the next. A hint only: it changes no state and no result.
    #[inline(always)]
    pub(crate) fn prefetch_header(&self) {
        let base = self as *const LaneJob as *const u8;
        let end = std::mem::offset_of!(LaneJob, t_off);
        let mut off = 0;
        while off < end {
            // In bounds: `off` is below the offset of a field of `self`.
            prefetch(base.wrapping_add(off));
            off += 64;
        }
    }

    /// Asks the CPU to start loading the rows the next cycle touches: the one the push
    /// writes, and the oldest two (eviction, and the front's suffix maximum). Reads `head`
    /// and `len`, so it comes after [`LaneJob::prefetch_header`].
    #[inline(always)]
    pub(crate) fn prefetch_rows(&self) {
        for k in [self.slot(self.len), self.slot(0)] {
            let row = &self.rows[k] as *const Row as *const u8;
            prefetch(row);
            prefetch(row.wrapping_add(64));
            prefetch(&self.t_off[k] as *const u32 as *const u8);
        }
        // Of the second oldest row only its suffix maximum is read (the front's maximum once
        // the oldest is evicted), in the row's second line.
        let k = self.slot(1);
        prefetch(self.rows[k].suffix_max_milli.as_ptr() as *const u8);
        prefetch(&self.t_off[k] as *const u32 as *const u8);
    }

    /// The rows of the ring.
    pub(crate) fn cap(&self) -> u32 {
        self.rows.len() as u32
    }

    /// Ring slot of the `k`-th row from the oldest.
    #[inline(always)]
    fn slot(&self, k: u32) -> usize {
        (self.head.wrapping_add(k) as usize) & (self.rows.len() - 1)
    }

    #[inline(always)]
    fn add(&mut self, r: &Row) {
        for i in 0..L {
            let [lo, hi] = spread_flags(r.flags[i]);
            self.counts[0][i] += lo;
            self.counts[1][i] += hi;
            let p = u32::from(r.power_dw[i]);
            self.sum_util_milli[i] += r.util_milli[i];
            self.sum_power_dw[i] += p;
            self.sum_power_sq[i] += u64::from(p) * u64::from(p);
            self.sum_mem_mib[i] += r.mem_mib[i];
        }
    }

    #[inline(always)]
    fn remove(&mut self, r: &Row) {
        for i in 0..L {
            let [lo, hi] = spread_flags(r.flags[i]);
            self.counts[0][i] -= lo;
            self.counts[1][i] -= hi;
            let p = u32::from(r.power_dw[i]);
            self.sum_util_milli[i] -= r.util_milli[i];
            self.sum_power_dw[i] -= p;
            self.sum_power_sq[i] -= u64::from(p) * u64::from(p);
            self.sum_mem_mib[i] -= r.mem_mib[i];
        }
    }

    /// The checks of [`LaneJob::ingest`] on one cycle's samples stamped `t`, `fine` when
    /// every lane is classified fine at `t`: `None`, having changed nothing, when the lane
    /// path does not take them; else where and how the row goes, having set the clocks.
    #[inline(always)]
    fn admit(&mut self, t: i64, fine: bool, start_s: i64, cyc: &Cycle, th: &IngestThresholds) -> Option<Admit> {
        let fine = fine && t <= cyc.future_after_s && t >= start_s && (self.newest_t_s == NO_TIME || t > self.newest_t_s);
        let base = if self.base_t_s == NO_TIME { t } else { self.base_t_s };
        let t_off = t.saturating_sub(base);
        if !fine || self.len as usize >= self.rows.len() || !(0..=u32::MAX as i64).contains(&t_off) {
            return None;
        }
        let t_off = t_off as u32;
        self.newest_t_s = t;
        self.base_t_s = base;
        let first = self.last_valid_t_s == NO_TIME;
        let gap = !first && t.saturating_sub(self.last_valid_t_s) > th.max_gap_s;
        // A copy gap needs the newest change more than the gap before `t`: its offset below
        // this (`t_off − gap − 1`, or none when negative).
        let copy_before = i64::from(t_off) - th.max_gap_s;
        Some(Admit {
            s: self.slot(self.len),
            t_off,
            first,
            gap,
            copy_before,
        })
    }

    /// Ingests one cycle's samples of the job, `sample(i)` being slot `i`'s, as
    /// [`GpuWindow::ingest`] would for each GPU. Returns false, having changed nothing, when
    /// they are not the lane path's (see the module's doc): the caller then runs the general
    /// path on per-GPU windows. `wide`: the CPU has the features `Engine::step_each_wide` is
    /// compiled for, and the AVX2 form (`lanes/avx2.rs`, the same results) runs.
    #[inline(always)]
    pub(crate) fn ingest<'a>(
        &mut self,
        sample: impl Fn(usize) -> &'a Sample,
        start_s: i64,
        cyc: &Cycle,
        th: &IngestThresholds,
        wide: bool,
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the caller passes `wide` only where the CPU has every feature the AVX2
            // form is compiled for (`Engine::step_each_wide`).
            return unsafe { self.ingest_avx2(&sample, start_s, cyc, th) };
        }
        let _ = wide;
        let t = sample(0).t_s;
        let c = classify_lanes(&sample, th);
        let Some(Admit {
            s,
            t_off,
            first,
            gap,
            copy_before,
        }) = self.admit(t, c.fine && c.same_t(t), start_s, cyc, th)
        else {
            return false;
        };
        let row = &mut self.rows[s];
        // The freeze check, lane by lane and field by field (as `GpuWindow::ingest`), in
        // all-ones masks so that each loop is one vector operation.
        let mut changed = [if first { u64::MAX } else { 0 }; L];
        for f in 0..FROZEN_FIELDS {
            let (bits, known, last) = (&c.bits[f], &c.known[f], &mut self.last_bits[f]);
            for i in 0..L {
                let k = u64::from(known[i]).wrapping_neg();
                changed[i] |= k & u64::from(bits[i] != last[i]).wrapping_neg();
                last[i] = (bits[i] & k) | (last[i] & !k);
            }
        }
        let mut flags = [0u16; L];
        for i in 0..L {
            let ch = changed[i] != 0;
            let lco = self.last_change_off[i];
            let copies = self.copies_since_change[i];
            let copy_gap = ch & (copies >= 1) & (lco != u32::MAX) & (i64::from(lco) < copy_before);
            flags[i] = c.flags[i] | (ch as u16 * CHANGED) | (gap as u16 * GAP_BEFORE) | (copy_gap as u16 * COPY_GAP);
            self.last_change_off[i] = if ch { t_off } else { lco };
            self.copies_since_change[i] = if ch { 0 } else { copies.saturating_add(1) };
            self.in_max_milli[i] = self.in_max_milli[i].max(c.util_milli[i]);
        }
        row.util_milli = c.util_milli;
        // A pushed row joins the back part, whose suffix maxima are unused (0, as
        // `GpuWindow::ingest` pushes them).
        row.suffix_max_milli = [0; L];
        row.mem_mib = c.mem_mib;
        row.power_dw = c.power_dw;
        row.flags = flags;
        self.t_off[s] = t_off;
        self.last_valid_t_s = t;
        self.len += 1;
        let row = self.rows[s];
        self.add(&row);
        true
    }

    /// Drops every row at or before `now − window`, as [`GpuWindow::evict`].
    #[inline(always)]
    pub(crate) fn evict(&mut self, cyc: &Cycle) {
        let cutoff = cyc.cutoff_s;
        if self.base_t_s == NO_TIME || cutoff < self.base_t_s {
            return;
        }
        let off_cut = cutoff.saturating_sub(self.base_t_s).min(u32::MAX as i64) as u32;
        while self.len > 0 && self.t_off[self.head as usize] <= off_cut {
            if self.out_len == 0 {
                self.rebuild_suffix_max();
            }
            let r = self.rows[self.head as usize];
            self.remove(&r);
            self.head = (self.head + 1) & (self.rows.len() as u32 - 1);
            self.len -= 1;
            self.out_len -= 1;
        }
    }

    #[cold]
    #[inline(never)]
    fn rebuild_suffix_max(&mut self) {
        let mut m = [0u32; L];
        for k in (0..self.len).rev() {
            let s = self.slot(k);
            let r = &mut self.rows[s];
            for i in 0..L {
                m[i] = m[i].max(r.util_milli[i]);
            }
            r.suffix_max_milli = m;
        }
        self.out_len = self.len;
        self.in_max_milli = [0; L];
    }

    /// Lane `i`'s count of rows with `flag`.
    #[inline(always)]
    fn count(&self, flag: u16, i: usize) -> u32 {
        let f = nr(flag);
        ((self.counts[f / 8][i] >> (8 * (f % 8))) & 0xff) as u32
    }

    /// Samples dropped as late, over every lane.
    pub(crate) fn late_total(&self) -> u32 {
        self.late.iter().fold(0u32, |a, &x| a.saturating_add(x))
    }

    /// Lane `i`'s [`Brief`], exactly as [`GpuWindow::brief`] gives it. Call
    /// [`LaneJob::evict`] first.
    #[inline(always)]
    pub(crate) fn brief(&self, i: usize, cyc: &Cycle, th: &IngestThresholds) -> Brief {
        let n = self.len;
        if n == 0 {
            // No invalid sample is ever kept in lanes.
            return Brief::default();
        }
        let h = self.head as usize;
        let out = if self.out_len > 0 { self.rows[h].suffix_max_milli[i] } else { 0 };
        brief_of(
            &WindowView {
                count: |f| self.count(f, i),
                n,
                first_flags: self.rows[h].flags[i],
                first_t_s: self.base_t_s + self.t_off[h] as i64,
                last_t_s: self.last_valid_t_s,
                base_t_s: self.base_t_s,
                last_change_off: self.last_change_off[i],
                copies_since_change: self.copies_since_change[i],
                peak_util_milli: out.max(self.in_max_milli[i]),
                sum_util_milli: u64::from(self.sum_util_milli[i]),
                sum_mem_mib: u64::from(self.sum_mem_mib[i]),
                sum_power_dw: u64::from(self.sum_power_dw[i]),
                invalid: 0,
            },
            cyc,
            th,
        )
    }

    /// [`LaneJob::pool`] written lane by lane, as `brief_of` reads: the reference the tests
    /// hold `pool` to, and its fallback for clocks near the ends of `i64` (see
    /// `LaneJob::frozen_tail_below`).
    #[cold]
    #[inline(never)]
    fn pool_lanewise(&self, cyc: &Cycle, th: &IngestThresholds) -> Option<LanePool> {
        let n = self.len;
        if n == 0 {
            return None;
        }
        let h = self.head as usize;
        let (first_t, last_t) = (self.base_t_s + self.t_off[h] as i64, self.last_valid_t_s);
        // The clocks are the job's: every lane is from the future, or stale, or neither.
        let job_problem = if last_t > cyc.future_after_s {
            Some(EvidenceProblem::Future)
        } else if cyc.now_s.saturating_sub(last_t) > th.max_gap_s {
            Some(EvidenceProblem::Stale)
        } else {
            None
        };
        let counts = |flag: u16| {
            let f = nr(flag);
            let mut c = [0u32; L];
            for i in 0..L {
                c[i] = ((self.counts[f / 8][i] >> (8 * (f % 8))) & 0xff) as u32;
            }
            c
        };
        let first = &self.rows[h].flags;
        let has = |flag: u16| {
            let mut c = [0u32; L];
            for i in 0..L {
                c[i] = u32::from(first[i] & flag != 0);
            }
            c
        };
        let (pk, cg, gap, ch, zom, az) = (
            counts(POWER_KNOWN),
            counts(COPY_GAP),
            counts(GAP_BEFORE),
            counts(CHANGED),
            counts(ZERO_OR_MISSING),
            counts(ALL_ZERO),
        );
        let (held, free, spin, spin_low) = (counts(MEM_HELD), counts(MEM_FREE), counts(UTIL_SPIN), counts(POWER_SPIN_LOW));
        let (has_cg, has_gap, has_ch) = (has(COPY_GAP), has(GAP_BEFORE), has(CHANGED));
        let mut p = LanePool {
            samples: n,
            first_t_s: first_t,
            last_t_s: last_t,
            problem: None,
            any_short: false,
            frozen_gpus: 0,
            freeze_undetectable_gpus: 0,
            min_peak_milli: u32::MAX,
            peak_milli: 0,
            all_spin: true,
            mem_held_gpus: 0,
            util_sum: 0,
            mem_sum: 0,
            mem_n: 0,
            pw_sum: 0,
            pw_n: 0,
        };
        let short = first_t > cyc.short_after_s;
        for i in 0..L {
            // As `brief_of`, lane by lane.
            let copy_holes = if pk[i] >= 2 { cg[i] - has_cg[i] } else { 0 };
            let holes = gap[i] - has_gap[i] + copy_holes;
            let identical = n >= 2 && ch[i] - has_ch[i] == 0;
            let lco = self.last_change_off[i];
            let frozen_tail = pk[i] >= 2
                && self.copies_since_change[i] >= 1
                && lco != u32::MAX
                && cyc.now_s.saturating_sub(self.base_t_s.saturating_add(lco as i64)) > th.max_gap_s;
            let lane_problem = job_problem.or(if holes > 0 {
                Some(EvidenceProblem::Gap)
            } else if az[i] > 0 && (zom[i] == n || identical || az[i] * 2 > n) {
                Some(EvidenceProblem::AllZero)
            } else if (identical && pk[i] >= 2) || frozen_tail {
                Some(EvidenceProblem::Frozen)
            } else {
                None
            });
            // As the engine's `Accum::take` and `Pool::add`.
            p.freeze_undetectable_gpus += u32::from(identical && pk[i] < 2);
            p.frozen_gpus += u32::from(lane_problem == Some(EvidenceProblem::Frozen));
            p.any_short |= lane_problem.is_none() && short;
            if let Some(q) = lane_problem {
                p.problem = Some(p.problem.map_or(q, |r| r.min(q)));
            }
            let out = if self.out_len > 0 { self.rows[h].suffix_max_milli[i] } else { 0 };
            let peak = out.max(self.in_max_milli[i]);
            p.min_peak_milli = p.min_peak_milli.min(peak);
            p.peak_milli = p.peak_milli.max(peak);
            p.all_spin &= spin[i] == n && pk[i] == n && spin_low[i] == n;
            p.mem_held_gpus += u32::from(held[i] == n);
            p.util_sum += u64::from(self.sum_util_milli[i]);
            p.mem_sum += u64::from(self.sum_mem_mib[i]);
            p.mem_n += u64::from(held[i] + free[i]);
            p.pw_sum += u64::from(self.sum_power_dw[i]);
            p.pw_n += u64::from(pk[i]);
        }
        Some(p)
    }

    /// Lane `i`'s full statistics, as [`GpuWindow::stats`] gives them for the window whose
    /// brief is `b`: the reference for [`LaneJob::stats_all`], which the engine uses.
    #[cfg(test)]
    pub(crate) fn stats(&self, i: usize, b: &Brief) -> GpuStats {
        stats_of(b, |f| self.count(f, i), self.sum_power_sq[i])
    }

    /// Forgets every sample, keeping only the late counts, as
    /// [`GpuWindow::forget_after_clock_step`] does for each lane.
    pub(crate) fn forget_after_clock_step(&mut self) {
        let late = self.late;
        *self = *LaneJob::empty(self.rows.len() as u32);
        self.late = late;
    }
}

/// Where and how [`LaneJob::ingest`] pushes a row it takes (see `LaneJob::admit`).
struct Admit {
    /// The ring slot.
    s: usize,
    t_off: u32,
    /// The lanes' first valid sample.
    first: bool,
    /// More than the gap since the last valid sample.
    gap: bool,
    /// A change at an offset below this is more than the gap before `t_off`.
    copy_before: i64,
}

/// What [`LaneJob::pool`] gives: a non-empty window's lanes pooled as the engine pools
/// briefs (see `engine::Accum`). Every lane holds `samples` rows, the first at `first_t_s`,
/// the last at `last_t_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LanePool {
    pub(crate) samples: u32,
    pub(crate) first_t_s: i64,
    pub(crate) last_t_s: i64,
    /// The least problem of any lane (`EvidenceProblem`'s order).
    pub(crate) problem: Option<EvidenceProblem>,
    /// Some lane's coverage is short (and has no problem).
    pub(crate) any_short: bool,
    pub(crate) frozen_gpus: u32,
    pub(crate) freeze_undetectable_gpus: u32,
    pub(crate) min_peak_milli: u32,
    pub(crate) peak_milli: u32,
    pub(crate) all_spin: bool,
    pub(crate) mem_held_gpus: u32,
    pub(crate) util_sum: u64,
    pub(crate) mem_sum: u64,
    pub(crate) mem_n: u64,
    pub(crate) pw_sum: u64,
    pub(crate) pw_n: u64,
}

/// One cycle's samples of a lane job, decided lane by lane as [`classify`] decides each.
struct LaneClass {
    /// Every lane has a compute reading and no rejected field.
    fine: bool,
    t_s: [i64; L],
    util_milli: [u32; L],
    mem_mib: [u32; L],
    power_dw: [u16; L],
    flags: [u16; L],
    bits: [[u64; L]; FROZEN_FIELDS],
    known: [[bool; L]; FROZEN_FIELDS],
}

impl LaneClass {
    #[inline(always)]
    fn same_t(&self, t: i64) -> bool {
        self.t_s.iter().fold(true, |a, &x| a & (x == t))
    }
}

/// [`classify`] for the [`L`] samples of one cycle, written over arrays of lanes so that the
/// compiler can decide all lanes at once. `classify_lanes_agrees_with_classify` holds it to
/// [`classify`], lane by lane.
#[inline(always)]
fn classify_lanes<'a>(sample: &impl Fn(usize) -> &'a Sample, th: &IngestThresholds) -> LaneClass {
    use crate::sample_check::{MAX_MEM_MIB, MAX_POWER_W, MAX_PROCS, MIN_POWER_W};
    let mut c = LaneClass {
        fine: true,
        t_s: [0; L],
        util_milli: [0; L],
        mem_mib: [0; L],
        power_dw: [0; L],
        flags: [0; L],
        bits: [[0; L]; FROZEN_FIELDS],
        known: [[false; L]; FROZEN_FIELDS],
    };
    let (mut u, mut sm, mut mt, mut mu, mut p, mut l) = (
        [Reading::MISSING; L],
        [Reading::MISSING; L],
        [Reading::MISSING; L],
        [Reading::MISSING; L],
        [Reading::MISSING; L],
        [Reading::MISSING; L],
    );
    let mut procs = [0u32; L];
    let mut procs_some = [false; L];
    for i in 0..L {
        let s = sample(i);
        c.t_s[i] = s.t_s;
        (u[i], sm[i], mt[i], mu[i], p[i], l[i]) = (s.util_pct, s.sm_active, s.mem_total_mib, s.mem_used_mib, s.power_w, s.power_limit_w);
        procs[i] = s.procs.unwrap_or(u32::MAX);
        procs_some[i] = s.procs.is_some();
    }
    let mut fine = true;
    for i in 0..L {
        let u_ok = u[i].within(100.0);
        let sm_ok = sm[i].within(1.0);
        let mt_ok = mt[i].within_positive(MAX_MEM_MIB);
        let mu_in = mu[i].within(MAX_MEM_MIB);
        let mu_over = mu_in & mt_ok & (mu[i].raw() > mt[i].raw());
        let mu_ok = mu_in & !mu_over;
        let p_ok = p[i].within_from(MIN_POWER_W, MAX_POWER_W);
        let l_ok = l[i].within_from(MIN_POWER_W, MAX_POWER_W);
        let procs_bad = procs_some[i] & (procs[i] > MAX_PROCS);
        let bad = |r: Reading, ok: bool| !r.is_missing() & !ok;
        let any_bad = bad(u[i], u_ok)
            | bad(sm[i], sm_ok)
            | bad(mt[i], mt_ok)
            | bad(mu[i], mu_in)
            | mu_over
            | bad(p[i], p_ok)
            | bad(l[i], l_ok)
            | procs_bad;
        // SM activity is a compute reading only at 0 (see `classify`).
        fine &= (u_ok | (sm_ok & (sm[i].raw() == 0.0))) & !any_bad;
        let compute = if u_ok { u[i].raw() } else { sm[i].raw() * 100.0 };
        let compute = if u_ok | sm_ok { compute } else { 0.0 };
        let util_milli = (compute * 1000.0 + 0.5) as u32;
        let (mu_v, mt_v, p_v, l_v) = (mu[i].raw(), mt[i].raw(), p[i].raw(), l[i].raw());
        let held = if mt_ok {
            mu_v >= th.mem_held_frac * mt_v
        } else {
            mu_v >= th.mem_held_mib
        };
        let idle = if l_ok {
            p_v <= th.idle_power_frac * l_v
        } else {
            p_v <= th.idle_power_w
        };
        let spin_low = if l_ok {
            p_v <= th.spin_power_frac * l_v
        } else {
            p_v <= th.idle_power_w
        };
        let bit = |c: bool, f: u16| (c as u16) * f;
        c.flags[i] = bit(mu_ok & held, MEM_HELD)
            | bit(mu_ok & !held, MEM_FREE)
            | bit(procs[i] == 0, PROCS_ZERO)
            | bit((procs[i] != 0) & (procs[i] <= MAX_PROCS), PROCS_POS)
            | bit(p_ok, POWER_KNOWN)
            | bit(p_ok & idle, POWER_IDLE)
            | bit(p_ok & spin_low, POWER_SPIN_LOW)
            | bit(util_milli >= th.spin_util_milli, UTIL_SPIN)
            | bit((compute == 0.0) & (mu_v == 0.0) & (p_v == 0.0), ALL_ZERO)
            | bit((compute == 0.0) & ((mu_v == 0.0) | !mu_ok) & !p_ok, ZERO_OR_MISSING);
        c.util_milli[i] = util_milli;
        c.power_dw[i] = if p_ok { (p_v * 10.0 + 0.5) as u16 } else { 0 };
        c.mem_mib[i] = if mu_ok { (mu_v + 0.5) as u32 } else { 0 };
        c.bits[0][i] = u[i].to_bits();
        c.bits[1][i] = sm[i].to_bits();
        c.bits[2][i] = mu[i].to_bits();
        c.bits[3][i] = p[i].to_bits();
        c.known[0][i] = u_ok;
        c.known[1][i] = sm_ok;
        c.known[2][i] = mu_ok;
        c.known[3][i] = p_ok;
    }
    c.fine = fine;
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyConfig;
    use proptest::prelude::*;

    fn reading() -> impl Strategy<Value = Reading> {
        prop_oneof![
            Just(Reading::MISSING),
            Just(Reading::value(0.0)),
            Just(Reading::value(-0.0)),
            Just(Reading::value(f64::NAN)),
            Just(Reading::value(4_294_967_295.0)),
            (-10.0f64..3000.0).prop_map(Reading::value),
            (0.0f64..1.0).prop_map(Reading::value),
            (0.0f64..100.0).prop_map(Reading::value),
            (0u32..200_000).prop_map(|x| Reading::value(f64::from(x))),
        ]
    }

    fn sample() -> impl Strategy<Value = Sample> {
        (
            (reading(), reading(), reading(), reading(), reading(), reading()),
            prop_oneof![Just(None), (0u32..5).prop_map(Some), Just(Some(u32::MAX)), Just(Some(5000))],
        )
            .prop_map(|((u, sm, mt, mu, p, l), procs)| Sample {
                t_s: 60,
                util_pct: u,
                sm_active: sm,
                mem_total_mib: mt,
                mem_used_mib: mu,
                power_w: p,
                power_limit_w: l,
                procs,
                ..Sample::default()
            })
    }

    proptest! {
        /// The lane path's classifier decides every lane exactly as the general path's
        /// [`classify`] decides that sample: flags, readings, freeze bits, and whether the
        /// lane path may take it at all.
        #[test]
        fn classify_lanes_agrees_with_classify(samples in proptest::collection::vec(sample(), L), held_frac in 0.002f64..0.5, idle_frac in 0.0f64..1.0, spin_frac in 0.0f64..1.0) {
            let cfg = PolicyConfig { mem_held_frac: held_frac, idle_power_frac: idle_frac, spin_power_frac: spin_frac, ..PolicyConfig::default() };
            let th = IngestThresholds::new(&cfg);
            let lanes = classify_lanes(&|i| &samples[i], &th);
            let mut fine = true;
            for (i, s) in samples.iter().enumerate() {
                let c = classify(s, &th);
                fine &= c.compute_ok & !c.any_bad;
                if c.compute_ok {
                    prop_assert_eq!(lanes.util_milli[i], c.util_milli, "lane {}", i);
                    prop_assert_eq!(lanes.flags[i], c.flags, "lane {}", i);
                }
                prop_assert_eq!(lanes.mem_mib[i], c.mem_mib, "lane {}", i);
                prop_assert_eq!(lanes.power_dw[i], c.power_dw, "lane {}", i);
                for f in 0..FROZEN_FIELDS {
                    prop_assert_eq!(lanes.bits[f][i], c.bits[f], "lane {} field {}", i, f);
                    prop_assert_eq!(lanes.known[f][i], c.known[f], "lane {} field {}", i, f);
                }
            }
            prop_assert_eq!(lanes.fine, fine);
        }

        /// [`LaneJob::pool`] equals pooling the lanes' briefs one by one, on lanes filled by
        /// random cycles: readings busy, idle, frozen (repeated) or all-zero, some GPUs
        /// without power, cycles skipped (gaps and stale windows) and judged at times late
        /// or early (future samples are refused by ingest, so `now` may lag the samples).
        #[test]
        fn lane_pool_agrees_with_briefs(
            steps in proptest::collection::vec((0u8..4, prop_oneof![8 => Just(60i64), 1 => 1i64..90, 1 => 90i64..600], 0u8..4, 0i64..200), 1..60),
            per_lane in proptest::collection::vec(0u8..4, L),
            palette in proptest::collection::vec(0u8..7, 4),
        ) {
            let th = IngestThresholds::new(&PolicyConfig::default());
            let mut j = LaneJob::empty(lane_cap(&th).expect("the defaults take the lane path"));
            let mut t = 1_000_000i64;
            for (k, &(pick, dt, judge, lag)) in steps.iter().enumerate() {
                // A few kinds of readings per case, so that a window can hold one kind only.
                let kind = palette[pick as usize];
                t += dt;
                let samples: Vec<Sample> = (0..L)
                    .map(|i| {
                        let v = (per_lane[i] + kind) % 7;
                        // Power −1 stands for a GPU that reports none this time.
                        let (u, mu, pw) = match v {
                            0 => (95.0 + (k % 3) as f64, 60_000.0, 300.0 + k as f64),
                            1 => (0.0, 0.0, 60.0),
                            2 => (0.0, 30_000.0, 70.0),
                            3 => (100.0, 50_000.0, 70.0),
                            4 => (0.0, 0.0, 0.0),
                            5 => (0.0, 0.0, -1.0),
                            _ => (42.0, 1_000.0, 150.0),
                        };
                        Sample {
                            t_s: t,
                            util_pct: u.into(),
                            mem_used_mib: mu.into(),
                            mem_total_mib: 81_920.0.into(),
                            power_w: if per_lane[i] == 3 || pw < 0.0 { Reading::MISSING } else { pw.into() },
                            power_limit_w: 400.0.into(),
                            procs: Some(u32::from(mu > 0.0)),
                            ..Sample::default()
                        }
                    })
                    .collect();
                let now = t + lag;
                let cyc = th.cycle(now);
                if j.ingest(|i| &samples[i], 0, &cyc, &th, false) {
                    j.evict(&cyc);
                }
                if judge == 0 {
                    continue;
                }
                let got = j.pool(&cyc, &th);
                if let Some(wide) = pool::tests::pool_avx2(&j, &cyc, &th) {
                    prop_assert_eq!(got, wide);
                }
                prop_assert_eq!(got, pool::tests::pooled_briefs(&j, &cyc, &th));
                let briefs: Vec<Brief> = (0..L).map(|i| j.brief(i, &cyc, &th)).collect();
                let each: Vec<GpuStats> = briefs.iter().enumerate().map(|(i, b)| j.stats(i, b)).collect();
                prop_assert_eq!(j.stats_all().to_vec(), each);
                if j.len == 0 {
                    prop_assert!(got.is_none());
                    continue;
                }
                let p = got.expect("a non-empty window pools");
                let mut problem: Option<EvidenceProblem> = None;
                let (mut short, mut frozen, mut undetectable) = (false, 0, 0);
                for b in &briefs {
                    prop_assert_eq!((b.samples, b.first_t_s, b.last_t_s), (p.samples, p.first_t_s, p.last_t_s));
                    undetectable += u32::from(b.freeze_undetectable);
                    match b.coverage {
                        Coverage::Full => {}
                        Coverage::Short => short = true,
                        Coverage::Broken(q) => {
                            frozen += u32::from(q == EvidenceProblem::Frozen);
                            problem = Some(problem.map_or(q, |r| r.min(q)));
                        }
                    }
                }
                prop_assert_eq!(p.problem, problem);
                prop_assert_eq!(p.any_short, short);
                prop_assert_eq!(p.frozen_gpus, frozen);
                prop_assert_eq!(p.freeze_undetectable_gpus, undetectable);
                prop_assert_eq!(p.min_peak_milli, briefs.iter().map(|b| b.peak_util_milli).min().unwrap());
                prop_assert_eq!(p.peak_milli, briefs.iter().map(|b| b.peak_util_milli).max().unwrap());
                prop_assert_eq!(p.all_spin, briefs.iter().all(|b| b.spin_candidate));
                prop_assert_eq!(p.mem_held_gpus, briefs.iter().filter(|b| b.mem_held_all).count() as u32);
                prop_assert_eq!(p.util_sum, briefs.iter().map(|b| b.sum_util_milli).sum::<u64>());
                prop_assert_eq!(p.mem_sum, briefs.iter().map(|b| b.sum_mem_mib).sum::<u64>());
                prop_assert_eq!(p.mem_n, briefs.iter().map(|b| u64::from(b.mem_known)).sum::<u64>());
                prop_assert_eq!(p.pw_sum, briefs.iter().map(|b| b.sum_power_dw).sum::<u64>());
                prop_assert_eq!(p.pw_n, briefs.iter().map(|b| u64::from(b.power_known)).sum::<u64>());
            }
        }

        /// Spreading a byte's bits one per byte, as the flag counts need.
        #[test]
        fn spread_puts_each_bit_in_its_byte(x in 0u64..=u64::MAX) {
            let got = spread(x);
            for b in 0..8 {
                prop_assert_eq!((got >> (8 * b)) & 0xff, (x >> b) & 1);
            }
            // And the table of the two bytes of a row's flags.
            let flags = x as u16;
            let [lo, hi] = spread_flags(flags);
            for f in 0..16 {
                let byte = if f < 8 { (lo >> (8 * f)) & 0xff } else { (hi >> (8 * (f - 8))) & 0xff };
                prop_assert_eq!(byte, u64::from((flags >> f) & 1), "flag bit {}", f);
            }
        }
    }
}
