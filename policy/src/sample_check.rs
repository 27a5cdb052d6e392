//! Guard 3, field by field: missing is not zero, broken is not idle.
//!
//! A field is *invalid* (and then treated exactly like a missing one) when it holds a vendor
//! sentinel or a value out of physical bounds. Invalid fields are counted, never zeroed.

use crate::input::Sample;

/// `0xFFFFFFFF`, printed by tools that read an unsigned NVML field that is not available.
pub const SENTINEL_U32: f64 = 4_294_967_295.0;
/// DCGM's blank INT32 value (`DCGM_INT32_BLANK`, dcgm_structs.h).
pub const DCGM_INT32_BLANK: f64 = 2_147_483_632.0;
/// DCGM's blank INT64 value (`DCGM_INT64_BLANK`, dcgm_structs.h).
pub const DCGM_INT64_BLANK: f64 = 9_223_372_036_854_775_792.0;
/// DCGM's blank FP64 value (`DCGM_FP64_BLANK` = 2^47, dcgm_structs.h).
pub const DCGM_FP64_BLANK: f64 = 140_737_488_355_328.0;

/// Upper bound for a plausible board power draw or limit, watts.
pub const MAX_POWER_W: f64 = 2000.0;
/// Lower bound for a plausible board power draw or limit, watts: no GPU board draws less than
/// this while powered (idle datacenter boards draw tens of watts). Exactly 0 is how some
/// tools print "not supported" (unknown); anything else below this is implausible.
pub const MIN_POWER_W: f64 = 1.0;
/// Upper bound for a plausible memory total: 1 TiB in MiB.
pub const MAX_MEM_MIB: f64 = 1_048_576.0;
/// Upper bound for a plausible compute-process count on one GPU.
pub const MAX_PROCS: u32 = 4096;

/// True for any of the vendor "no value" sentinels above, or a value within rounding of
/// one of them (some exporters print them through a float, some multiply them by 100).
pub fn is_sentinel(v: f64) -> bool {
    [
        SENTINEL_U32,
        DCGM_INT32_BLANK,
        DCGM_INT64_BLANK,
        DCGM_FP64_BLANK,
        DCGM_FP64_BLANK * 100.0,
    ]
    .iter()
    .any(|s| (v - s).abs() <= s * 1e-9)
}

/// True when a sample holds an *implausible* reading: a present value out of bounds that is
/// not a vendor "no value" sentinel (a negative power, memory above 1 TiB, a util of 150 %, a
/// NaN; a power, limit or total of exactly 0 counts as "no value" too), memory used above a
/// valid total, or a process count above [`MAX_PROCS`] other than the `u32` sentinel. A collector that reports such values is broken, and nothing else it
/// says in that sample is taken as evidence: the engine counts the sample as invalid and keeps
/// none of it. A sentinel only means "no value": that field is unknown and the rest of the
/// sample is kept. Runs only for samples with a rejected field.
#[cold]
#[inline(never)]
pub(crate) fn has_implausible_field(s: &Sample) -> bool {
    let bad = |r: crate::input::Reading, ok: bool| r.get().is_some_and(|v| !ok && !is_sentinel(v));
    // A power, power limit or memory total of exactly 0 is how some tools print "not
    // supported": unknown, like a sentinel, not implausible.
    let bad_nonzero = |r: crate::input::Reading, ok: bool| r.get().is_some_and(|v| v != 0.0) && bad(r, ok);
    let (mt_ok, mu_ok) = (s.mem_total_mib.within_positive(MAX_MEM_MIB), s.mem_used_mib.within(MAX_MEM_MIB));
    bad(s.util_pct, s.util_pct.within(100.0))
        || bad(s.sm_active, s.sm_active.within(1.0))
        || bad_nonzero(s.mem_total_mib, mt_ok)
        || bad(s.mem_used_mib, mu_ok)
        || (mt_ok && mu_ok && s.mem_used_mib.raw() > s.mem_total_mib.raw())
        || bad_nonzero(s.power_w, s.power_w.within_from(MIN_POWER_W, MAX_POWER_W))
        || bad_nonzero(s.power_limit_w, s.power_limit_w.within_from(MIN_POWER_W, MAX_POWER_W))
        || s.procs.is_some_and(|p| p > MAX_PROCS && p != u32::MAX)
}

/// A sample after field checks. Fields are `None` when missing or invalid. The engine's
/// ingest applies the same rules in one pass (`window::GpuWindow::ingest`); this
/// field-by-field form is the reference its tests compare it with.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Checked {
    /// The compute reading in thousandths of a percent: `util_pct`, or 0 when `util_pct` is
    /// missing and `sm_active` is 0 (above 0 it is only a lower bound of `util_pct`).
    pub util_milli: Option<u32>,
    pub mem_used_mib: Option<f64>,
    pub mem_total_mib: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub procs: Option<u32>,
    /// How many present fields were rejected.
    pub invalid_fields: u8,
    /// The raw sample reads exactly 0 % util, 0 MiB and 0 W: the broken-exporter pattern.
    pub all_zero_raw: bool,
}

/// Keeps `v` if it lies in `[lo, hi]` (or `(lo, hi]` when `open_lo`); otherwise counts it as
/// invalid. NaN and infinities fail the comparisons. Every vendor sentinel (≥ 2³¹ − 16) lies
/// above every upper bound used here, so the bounds reject sentinels too; see
/// `bounds_reject_every_sentinel`.
#[cfg_attr(not(test), allow(dead_code))]
#[inline(always)]
fn keep(v: Option<f64>, lo: f64, open_lo: bool, hi: f64, invalid: &mut u8) -> Option<f64> {
    let x = v?;
    let above_lo = if open_lo { x > lo } else { x >= lo };
    if above_lo && x <= hi {
        Some(x)
    } else {
        *invalid += 1;
        None
    }
}

/// True when `s` is a complete reading of its GPU: it carries a compute reading (`util_pct`,
/// or `sm_active` when that is missing) and no field that guard 3 rejects (a vendor sentinel,
/// NaN for a value the tool printed but could not give, such as `ERR!`, a value out of
/// bounds, or 0 W). Missing fields (`[N/A]` power, say) do not make a reading incomplete.
/// The enforcer drains, cancels and notices a job only in a cycle whose reading of every one
/// of its GPUs is complete: the engine's windows tolerate a hole of up to `max_sample_gap`,
/// so without this a job would be acted on in a cycle whose own reading was lost (review 32:
/// a job that had just started working, whose `power.draw` read `ERR!`, was cancelled on
/// readings a minute old).
pub fn is_complete_reading(s: &Sample) -> bool {
    let c = check(s);
    c.util_milli.is_some() && c.invalid_fields == 0
}

/// The most a GPU's video-engine utilisation lends its compute reading, percent: 49, one
/// below the lowest `spin_util_pct` accepted ([`crate::config::MIN_SPIN_UTIL_PCT`]).
pub const CODEC_UTIL_CAP_PCT: f64 = crate::config::MIN_SPIN_UTIL_PCT - 1.0;

/// A GPU's compute reading with its video engines' work folded in, percent: the highest of
/// `util_pct` (`utilization.gpu` / `DCGM_FI_DEV_GPU_UTIL`, kernels on the SMs) and each of
/// `codec_pct` (`utilization.encoder`/`.decoder`, `DCGM_FI_DEV_ENC_UTIL`/`DEC_UTIL`), each
/// codec value taken at most [`CODEC_UTIL_CAP_PCT`].
///
/// NVENC and NVDEC work does not show in `utilization.gpu`: a transcoding GPU reads 0 % and
/// would look `hung` (operator trial 19). Up to 49 % the codec work clears every low-util
/// signature (under any `util_threshold_pct` up to 49; the default is 15), and it can never
/// make `spin`, which needs `spin_util_pct` of at least 50: a steady decode at 95 % and 80 W
/// is work, not a spinning NCCL kernel (review 33: folded in whole, it was cancelled as
/// `spin`). A NaN codec value is ignored here; callers decide what an unreadable one means.
pub fn fold_codec_util(util_pct: f64, codec_pct: impl IntoIterator<Item = f64>) -> f64 {
    codec_pct.into_iter().map(|c| c.min(CODEC_UTIL_CAP_PCT)).fold(util_pct, f64::max)
}

/// Applies the bounds of guard 3 to one sample.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn check(s: &Sample) -> Checked {
    let mut bad = 0u8;
    let util = keep(s.util_pct.get(), 0.0, false, 100.0, &mut bad);
    let sm = keep(s.sm_active.get(), 0.0, false, 1.0, &mut bad);
    let mem_total = keep(s.mem_total_mib.get(), 0.0, true, MAX_MEM_MIB, &mut bad);
    let mut mem_used = keep(s.mem_used_mib.get(), 0.0, false, MAX_MEM_MIB, &mut bad);
    if let (Some(u), Some(t)) = (mem_used, mem_total) {
        if u > t {
            bad += 1;
            mem_used = None;
        }
    }
    let power = keep(s.power_w.get(), MIN_POWER_W, false, MAX_POWER_W, &mut bad);
    let limit = keep(s.power_limit_w.get(), MIN_POWER_W, false, MAX_POWER_W, &mut bad);
    let procs = match s.procs {
        Some(p) if p > MAX_PROCS => {
            bad += 1;
            None
        }
        p => p,
    };
    let compute = match (util, sm) {
        (Some(u), _) => Some(u),
        // SM activity is a lower bound of utilization.gpu: only 0 is a compute reading (see
        // `window::classify`).
        (None, Some(f)) => (f == 0.0).then_some(0.0),
        (None, None) => None,
    };
    // The broken-exporter pattern on the compute reading in use (util, or SM activity when
    // util is missing) and the raw memory and power.
    let all_zero_raw = compute == Some(0.0) && s.mem_used_mib.get() == Some(0.0) && s.power_w.get() == Some(0.0);
    Checked {
        // Non-negative and bounded, so adding 0.5 and truncating rounds to nearest.
        util_milli: compute.map(|u| (u * 1000.0 + 0.5) as u32),
        mem_used_mib: mem_used,
        mem_total_mib: mem_total,
        power_w: power,
        power_limit_w: limit,
        procs,
        invalid_fields: bad,
        all_zero_raw,
    }
}

/// The bit pattern of every reading of a sample: two samples of one GPU at one instant that
/// differ in any bit conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RawKey(pub(crate) [u64; 7]);

impl RawKey {
    /// The words in the order that breaks ties between two samples of one GPU with the same
    /// time: a missing reading sorts after every present one (`u64::MAX − 1`), as it always has.
    pub(crate) fn tie_order(&self) -> [u64; 7] {
        let mut k = self.0;
        for (i, w) in k.iter_mut().enumerate() {
            // Word 5 is the process count (missing: `u64::MAX`); the others are readings.
            let missing = if i == PROCS_WORD {
                u64::MAX
            } else {
                crate::input::Reading::MISSING.to_bits()
            };
            if *w == missing {
                *w = u64::MAX - 1;
            }
        }
        k
    }
}

/// The index of the process count in a [`RawKey`].
const PROCS_WORD: usize = 5;

/// Every reading's bits; a missing reading has [`crate::Reading::MISSING`]'s own pattern, and
/// a missing process count `u64::MAX`, which no `u32` count reaches.
#[inline(always)]
pub(crate) fn raw_key(s: &Sample) -> RawKey {
    RawKey([
        s.util_pct.to_bits(),
        s.mem_used_mib.to_bits(),
        s.mem_total_mib.to_bits(),
        s.power_w.to_bits(),
        s.power_limit_w.to_bits(),
        s.procs.map_or(u64::MAX, u64::from),
        s.sm_active.to_bits(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> Sample {
        Sample {
            util_pct: Some(50.0).into(),
            mem_used_mib: Some(1000.0).into(),
            mem_total_mib: Some(81920.0).into(),
            power_w: Some(300.0).into(),
            power_limit_w: Some(400.0).into(),
            procs: Some(1),
            ..Default::default()
        }
    }

    #[test]
    fn sentinels_are_invalid_not_values() {
        for v in [
            SENTINEL_U32,
            DCGM_INT32_BLANK,
            DCGM_INT64_BLANK,
            DCGM_FP64_BLANK,
            1.407_374_883_553_28e16,
        ] {
            let c = check(&Sample {
                util_pct: Some(v).into(),
                ..s()
            });
            assert_eq!(c.util_milli, None, "{v}");
            assert_eq!(c.invalid_fields, 1);
            let c = check(&Sample {
                mem_used_mib: Some(v).into(),
                ..s()
            });
            assert_eq!(c.mem_used_mib, None, "{v}");
        }
        let c = check(&Sample {
            procs: Some(4_294_967_295),
            ..s()
        });
        assert_eq!((c.procs, c.invalid_fields), (None, 1));
    }

    #[test]
    fn bounds_reject_every_sentinel() {
        for v in [
            SENTINEL_U32,
            DCGM_INT32_BLANK,
            DCGM_INT64_BLANK,
            DCGM_FP64_BLANK,
            DCGM_FP64_BLANK * 100.0,
        ] {
            assert!(is_sentinel(v));
            let c = check(&Sample {
                util_pct: Some(v).into(),
                sm_active: Some(v).into(),
                mem_used_mib: Some(v).into(),
                mem_total_mib: Some(v).into(),
                power_w: Some(v).into(),
                power_limit_w: Some(v).into(),
                ..s()
            });
            assert_eq!(c.invalid_fields, 6, "{v}");
            assert_eq!(
                (c.util_milli, c.mem_used_mib, c.mem_total_mib, c.power_w, c.power_limit_w),
                (None, None, None, None, None)
            );
        }
        assert!(!is_sentinel(100.0) && !is_sentinel(81_920.0));
    }

    #[test]
    fn out_of_bounds_fields_are_invalid() {
        assert_eq!(
            check(&Sample {
                util_pct: Some(101.0).into(),
                ..s()
            })
            .util_milli,
            None
        );
        assert_eq!(
            check(&Sample {
                util_pct: Some(-1.0).into(),
                ..s()
            })
            .util_milli,
            None
        );
        assert_eq!(
            check(&Sample {
                util_pct: Some(f64::NAN).into(),
                ..s()
            })
            .util_milli,
            None
        );
        assert_eq!(
            check(&Sample {
                power_w: Some(0.0).into(),
                ..s()
            })
            .power_w,
            None
        );
        assert_eq!(
            check(&Sample {
                power_w: Some(2000.5).into(),
                ..s()
            })
            .power_w,
            None
        );
        assert_eq!(
            check(&Sample {
                mem_used_mib: Some(90000.0).into(),
                ..s()
            })
            .mem_used_mib,
            None
        );
        assert_eq!(
            check(&Sample {
                mem_total_mib: Some(2.0 * MAX_MEM_MIB).into(),
                ..s()
            })
            .mem_total_mib,
            None
        );
        let ok = check(&s());
        assert_eq!((ok.util_milli, ok.invalid_fields), (Some(50_000), 0));
    }

    #[test]
    fn missing_stays_missing_and_sm_active_is_the_fallback_only_at_zero() {
        let c = check(&Sample {
            util_pct: None.into(),
            ..s()
        });
        assert_eq!((c.util_milli, c.invalid_fields), (None, 0));
        // SM activity is a lower bound of utilization.gpu: above 0 it says some kernel ran,
        // not how long (trial 23), so it is no compute reading; 0 says none ran.
        for (sm, want) in [(0.42, None), (0.008, None), (0.0, Some(0))] {
            let c = check(&Sample {
                util_pct: None.into(),
                sm_active: Some(sm).into(),
                ..s()
            });
            assert_eq!((c.util_milli, c.invalid_fields), (want, 0), "sm_active {sm}");
        }
    }

    #[test]
    fn all_zero_pattern_needs_all_three_present() {
        let z = Sample {
            util_pct: Some(0.0).into(),
            mem_used_mib: Some(0.0).into(),
            power_w: Some(0.0).into(),
            ..s()
        };
        assert!(check(&z).all_zero_raw);
        assert!(!check(&Sample { power_w: None.into(), ..z }).all_zero_raw);
    }
}

#[cfg(test)]
mod complete_reading_tests {
    use super::*;
    use crate::Reading;

    fn busy() -> Sample {
        Sample {
            t_s: 60,
            util_pct: Reading::from(90.0),
            mem_used_mib: Reading::from(30_000.0),
            mem_total_mib: Reading::from(81_920.0),
            power_w: Reading::from(350.0),
            power_limit_w: Reading::from(400.0),
            procs: Some(1),
            ..Default::default()
        }
    }

    #[test]
    fn a_reading_is_complete_only_with_a_compute_reading_and_no_rejected_field() {
        assert!(is_complete_reading(&busy()));
        // Missing power is not incomplete; SM activity of 0 stands in for a missing util, and
        // SM activity above 0 does not (a lower bound of it).
        assert!(is_complete_reading(&Sample {
            power_w: Reading::MISSING,
            power_limit_w: Reading::MISSING,
            ..busy()
        }));
        assert!(is_complete_reading(&Sample {
            util_pct: Reading::MISSING,
            sm_active: Reading::from(0.0),
            ..busy()
        }));
        assert!(!is_complete_reading(&Sample {
            util_pct: Reading::MISSING,
            sm_active: Reading::from(0.5),
            ..busy()
        }));
        // No compute reading; a value printed but unreadable (NaN); a sentinel; out of bounds; 0 W.
        assert!(!is_complete_reading(&Sample {
            util_pct: Reading::MISSING,
            ..busy()
        }));
        assert!(!is_complete_reading(&Sample {
            power_w: Reading::from(f64::NAN),
            ..busy()
        }));
        assert!(!is_complete_reading(&Sample {
            mem_used_mib: Reading::from(SENTINEL_U32),
            ..busy()
        }));
        assert!(!is_complete_reading(&Sample {
            util_pct: Reading::from(101.0),
            ..busy()
        }));
        assert!(!is_complete_reading(&Sample {
            power_w: Reading::from(0.0),
            ..busy()
        }));
    }
}
