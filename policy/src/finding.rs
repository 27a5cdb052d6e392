//! The engine's output: one [`Finding`] per job per cycle.

use crate::input::JobFacts;
use crate::signature::SignatureId;
use crate::verdict::Verdict;
use crate::window::EvidenceProblem;
use std::fmt::Write as _;

/// Why the verdict is what it is. Together with the signature this is what the reason line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The job is younger than `warmup`.
    Warmup,
    /// Valid evidence over the window shows work (or shows nothing that breaches).
    NoBreach,
    /// The evidence is broken; see the problem.
    Evidence(EvidenceProblem),
    /// The samples breach but do not yet cover a full window.
    ShortCoverage,
    /// A breach is confirmed over a full window; the verdict follows the stages.
    Breach,
}

/// What capped the verdict below what the stages asked for, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    /// The signature's ceiling (guard 7).
    Ceiling,
    /// Only part of the allocation is observed (guard 9).
    PartialScope,
    /// The job is exempt (guard 8).
    Exempt,
    /// At most one rung per cycle above alert (guard 6).
    OneRung,
    /// No confirmed drain at least one window old (guard 6).
    DrainUnconfirmed,
    /// Less than `notice` since the first alert (guard 6).
    Notice,
    /// Every reading of some GPU stayed bit-identical over the window with power unknown, so
    /// a frozen collector cannot be told from a quiet GPU (guard 3): no drain or cancel on it.
    FreezeUndetectable,
    /// A GPU matched `hung` or `idle` with power on fewer than half its samples in the window:
    /// zero compute at high power is neither a deadlock nor an idle GPU (a util counter that
    /// broke, work in memory or processes the readings miss), and power is what would tell
    /// (guard 3: unknown is never evidence). No drain or cancel on it.
    PowerUnknown,
    /// Some GPU's window holds more than one invalid sample for every five it keeps (see
    /// [`Evidence::mostly_invalid`]): a collector that is wrong that often cannot be trusted
    /// on the samples left between its errors (trial 15: power read 0.5 W on two reads in
    /// three, and the job was drained and cancelled on the third). No drain or cancel on it.
    InvalidSamples,
}

impl Cap {
    /// Lowercase name for CSV and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Cap::Ceiling => "ceiling",
            Cap::PartialScope => "partial_scope",
            Cap::Exempt => "exempt",
            Cap::OneRung => "one_rung",
            Cap::DrainUnconfirmed => "drain_unconfirmed",
            Cap::Notice => "notice",
            Cap::FreezeUndetectable => "freeze_undetectable",
            Cap::PowerUnknown => "power_unknown",
            Cap::InvalidSamples => "invalid_samples",
        }
    }
}

/// The evidence behind a finding, over the observed GPUs of the job.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Evidence {
    /// Earliest valid sample in the window, epoch seconds (0 when none).
    pub window_start_s: i64,
    /// Latest valid sample in the window, epoch seconds (0 when none).
    pub window_end_s: i64,
    /// GPUs in the allocation.
    pub gpus_allocated: u32,
    /// GPUs observed (the whole allocation, or one node's part of it).
    pub gpus_observed: u32,
    /// Fewest valid samples in the window on any observed GPU.
    pub samples_min_per_gpu: u32,
    /// Most valid samples in the window on any observed GPU.
    pub samples_max_per_gpu: u32,
    /// Samples in the window with a rejected field (a sentinel, or an implausible value, which
    /// discards the whole sample), no compute reading, or a future stamp.
    pub invalid_samples: u32,
    /// Samples dropped as late over the job's life (not newer than the newest ingested).
    pub late_samples: u32,
    /// Observed GPUs whose window is frozen (bit-identical readings, power included).
    pub frozen_gpus: u32,
    /// Observed GPUs whose readings are identical but carry no power, so a freeze cannot be
    /// told from a quiet GPU.
    pub freeze_undetectable_gpus: u32,
    /// Highest compute reading on any observed GPU, percent.
    pub peak_util_pct: f64,
    /// Mean compute reading over every valid sample of the observed GPUs, percent.
    pub mean_util_pct: f64,
    /// Mean `memory.used` over every sample of the observed GPUs where known, MiB.
    pub mem_used_mean_mib: Option<f64>,
    /// Observed GPUs with memory held on every sample.
    pub mem_held_gpus: u32,
    /// Mean power over every sample of the observed GPUs where known, watts.
    pub power_mean_w: Option<f64>,
    /// No sample carried a process count.
    pub procs_unknown: bool,
    /// A GPU matched `hung` or `idle` with power on fewer than half its samples (see
    /// [`Cap::PowerUnknown`]).
    pub power_unknown: bool,
    /// GPUs the signature counts as wasted.
    pub wasted_gpus: u32,
    /// Some observed GPU's window holds more than one invalid sample for every five samples
    /// it keeps (see [`Evidence::mostly_invalid`]).
    pub invalid_share_exceeded: bool,
}

impl Evidence {
    /// True when some observed GPU's window holds more invalid samples than one for every
    /// five samples it keeps (`invalid × 5 > kept`, GPU by GPU): a collector wrong that
    /// often on any one GPU. A sample with a sentinel or 0 W is both invalid and kept (its
    /// other readings count), one with an impossible reading is invalid and dropped; either
    /// way more than about one read in six wrong is held. Such a job is held at alert
    /// ([`Cap::InvalidSamples`]): the samples between the collector's errors are not trusted
    /// with a drain or a cancel (review 30: counted over the job, seven good GPUs hid one
    /// wrong on three reads in five, and kept sentinels counted on both sides).
    pub fn mostly_invalid(&self) -> bool {
        self.invalid_share_exceeded
    }
}

/// The engine's conclusion about one job in one cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// Index of the job in [`crate::Observation::jobs`].
    pub job_index: u32,
    /// The verdict.
    pub verdict: Verdict,
    /// The breach signature, when the samples breach.
    pub signature: Option<SignatureId>,
    /// Why.
    pub cause: Cause,
    /// What held the verdict down, if anything.
    pub cap: Option<Cap>,
    /// `now − breach start`, seconds; 0 without a confirmed breach.
    pub dwell_s: i64,
    /// How long the breach has shown its current [`Finding::signature`], seconds: `now −` the
    /// start of the window in which it first showed it without a change since, and never more
    /// than [`Finding::dwell_s`]. A job starved for three hours and hung for the last 40
    /// minutes reads a `dwell_s` of about 220 minutes and a `signature_dwell_s` of about 40
    /// (operator trial 19: its notice said "hung … for 219m"). 0 without a confirmed breach.
    pub signature_dwell_s: i64,
    /// Evidence.
    pub evidence: Evidence,
    /// Estimated GPU-hours wasted so far in this breach: wasted GPUs × waste share × dwell.
    pub wasted_gpu_h: f64,
    /// True when the verdict shows what enforcement *would* do: observe mode, or a drain
    /// that was never really carried out.
    pub hypothetical: bool,
    /// Which exemption rule matched, if any (every use is recorded here).
    pub exempt: Option<std::sync::Arc<str>>,
}

impl Finding {
    /// The signature name, or `"none"`.
    pub fn signature_name(&self) -> &'static str {
        self.signature.map_or("none", SignatureId::name)
    }

    /// One line a user can read, for Slurm's AdminComment and the logs: no newlines or control
    /// characters, under 200 characters. `job` is the job this finding is about.
    pub fn reason(&self, job: &JobFacts) -> String {
        let mut s = String::with_capacity(160);
        let e = &self.evidence;
        let _ = match self.cause {
            Cause::Warmup => write!(s, "job {}: healthy, warmup", job.job_id),
            Cause::NoBreach => write!(s, "job {}: healthy, peak util {:.0}% over the window", job.job_id, e.peak_util_pct),
            Cause::Evidence(p) => write!(s, "job {}: insufficient evidence ({}), no action", job.job_id, p.as_str()),
            Cause::ShortCoverage => write!(
                s,
                "job {}: {} on {}/{} GPUs, window not yet covered",
                job.job_id,
                self.signature_name(),
                e.wasted_gpus,
                e.gpus_observed
            ),
            Cause::Breach => {
                let _ = write!(
                    s,
                    "job {}: {} {} on {}/{} GPUs for {}m",
                    job.job_id,
                    self.verdict,
                    self.signature_name(),
                    e.wasted_gpus,
                    e.gpus_allocated,
                    self.signature_dwell_s.clamp(0, self.dwell_s.max(0)) / 60,
                );
                // The breach began under another signature: say how long it has run in all,
                // so that neither figure is read as the other.
                if self.dwell_s / 60 > self.signature_dwell_s.max(0) / 60 {
                    let _ = write!(s, " of a {}m breach", self.dwell_s / 60);
                }
                write!(s, ", peak util {:.0}%", e.peak_util_pct)
            }
        };
        if self.cause == Cause::Breach {
            if let Some(m) = e.mem_used_mean_mib {
                let _ = write!(s, ", mem {m:.0} MiB");
            }
            if let Some(p) = e.power_mean_w {
                let _ = write!(s, ", {p:.0} W");
            }
            if e.procs_unknown {
                s.push_str(", processes unknown");
            }
        }
        if let Some(c) = self.cap {
            let _ = write!(s, "; held by {}", c.as_str());
        }
        if let Some(x) = &self.exempt {
            let _ = write!(s, "; exempt: {x}");
        }
        if self.hypothetical {
            s.push_str(" (hypothetical)");
        }
        one_line(&s, 199)
    }
}

/// Replaces every character that can break a line with a space and cuts to at most `max`
/// characters: control characters (C0 and C1, so `\n`, `\r` and U+0085 NEL too) and the
/// Unicode line and paragraph separators U+2028 and U+2029, which are not control characters.
pub fn one_line(s: &str, max: usize) -> String {
    let breaks = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    s.chars().map(|c| if breaks(c) { ' ' } else { c }).take(max).collect()
}
