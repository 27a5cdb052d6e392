//! What a driver hands the engine each cycle: running jobs, new samples, scope and drains.

use serde::{Deserialize, Serialize};

/// A node, as a small integer chosen by the driver (see [`crate::NodeTable`] for an interner).
///
/// The policy never needs node names; drivers map ids back to names for display and actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct NodeId(pub u32);

/// One allocated GPU: a node and the GPU's index on that node as Slurm numbers it in the
/// allocation (`GRES_IDX` / `alloc`), not necessarily NVML's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRef {
    /// The node.
    pub node: NodeId,
    /// GPU index on the node.
    pub gpu: u16,
}

/// The facts of one running job, from Slurm (`squeue --json`, or a trace's `jobs.csv`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobFacts {
    /// Slurm job id as a string: `N`, array task `N_M`, het component `N+K`. Distinct ids are
    /// distinct jobs.
    pub job_id: String,
    /// Submitting user.
    pub user: String,
    /// Slurm account.
    pub account: String,
    /// Partition the job runs in.
    pub partition: String,
    /// Quality of service.
    pub qos: String,
    /// Job name (may contain any characters).
    pub name: String,
    /// Job comment (`--comment`); may carry the opt-out marker.
    pub comment: String,
    /// Start time, epoch seconds.
    pub start_s: i64,
    /// The allocation: every GPU the job holds, across all its nodes.
    pub alloc: Vec<GpuRef>,
}

/// One optional reading of a [`Sample`]: a value, or missing. Eight bytes, where
/// `Option<f64>` takes sixteen; a sample is read once per GPU per cycle, so its size is the
/// engine's memory traffic.
///
/// Missing is a NaN with a payload of its own. A present NaN (which guard 3 rejects as
/// invalid) is stored as the ordinary quiet NaN, so it can never be read back as missing:
/// missing stays missing, and a bad value stays a bad value. Serialised as an `Option<f64>`.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(from = "Option<f64>", into = "Option<f64>")]
pub struct Reading(f64);

/// The bit pattern of [`Reading::MISSING`]: a quiet NaN whose payload no arithmetic produces.
const MISSING_BITS: u64 = 0x7ff8_6d69_7373_696e;
/// The bit pattern of −0.0.
const NEG_ZERO_BITS: u64 = 1 << 63;

impl Reading {
    /// No value (an absent field, or `[N/A]`).
    pub const MISSING: Reading = Reading(f64::from_bits(MISSING_BITS));

    /// A present value, kept bit for bit. A NaN is kept as present (and rejected by guard 3),
    /// never as missing: the one NaN that carries the missing payload is stored as the plain
    /// quiet NaN.
    #[inline]
    pub fn value(v: f64) -> Reading {
        if v.to_bits() == MISSING_BITS {
            Reading(f64::NAN)
        } else {
            Reading(v)
        }
    }

    /// The value, or `None` when missing.
    #[inline]
    pub fn get(self) -> Option<f64> {
        (!self.is_missing()).then_some(self.0)
    }

    /// True when there is no value.
    #[inline]
    pub fn is_missing(self) -> bool {
        self.0.to_bits() == MISSING_BITS
    }

    /// The raw bits: [`Reading::MISSING`]'s own pattern when missing. Two readings with equal
    /// bits are the same reading; the engine's frozen-collector check compares these.
    #[inline]
    pub fn to_bits(self) -> u64 {
        self.0.to_bits()
    }

    /// The value as stored: NaN (with the missing payload) when missing. Every float
    /// comparison on it is false when missing.
    #[inline]
    pub(crate) fn raw(self) -> f64 {
        self.0
    }

    /// True when present and within `[0, hi]`, for a non-negative, non-NaN `hi`. Integer
    /// comparisons on the bits: the bits of non-negative values order like the values, every
    /// negative value, NaN (missing included) and infinity has a pattern above `hi`'s, and
    /// −0.0 (sign bit only) is let in by name.
    #[inline(always)]
    pub(crate) fn within(self, hi: f64) -> bool {
        let b = self.0.to_bits();
        (b <= hi.to_bits()) | (b == NEG_ZERO_BITS)
    }

    /// True when present and within `[lo, hi]`, for `0 < lo <= hi`, neither NaN: one
    /// subtraction and one comparison on the bits (see [`Reading::within`]); values below
    /// `lo` wrap to above the range.
    #[inline(always)]
    pub(crate) fn within_from(self, lo: f64, hi: f64) -> bool {
        self.0.to_bits().wrapping_sub(lo.to_bits()) <= hi.to_bits() - lo.to_bits()
    }

    /// True when present and within `(0, hi]`, for a positive, non-NaN `hi` (see
    /// [`Reading::within`]).
    #[inline(always)]
    pub(crate) fn within_positive(self, hi: f64) -> bool {
        self.0.to_bits().wrapping_sub(1) < hi.to_bits()
    }
}

impl Default for Reading {
    /// Missing.
    #[inline]
    fn default() -> Reading {
        Reading::MISSING
    }
}

impl From<Option<f64>> for Reading {
    #[inline]
    fn from(v: Option<f64>) -> Reading {
        v.map_or(Reading::MISSING, Reading::value)
    }
}

impl From<f64> for Reading {
    #[inline]
    fn from(v: f64) -> Reading {
        Reading::value(v)
    }
}

impl From<Reading> for Option<f64> {
    #[inline]
    fn from(r: Reading) -> Option<f64> {
        r.get()
    }
}

impl PartialEq for Reading {
    /// Bitwise: a reading equals itself even when it is a NaN.
    #[inline]
    fn eq(&self, other: &Reading) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(v) => write!(f, "{v:?}"),
            None => f.write_str("missing"),
        }
    }
}

impl PartialEq<Option<f64>> for Reading {
    fn eq(&self, other: &Option<f64>) -> bool {
        *self == Reading::from(*other)
    }
}

/// One reading of one GPU at one time. Every field but `t_s`, `node` and `gpu` is optional
/// ([`Reading::MISSING`], or `None` for `procs`): missing stays missing and is never read as
/// zero. 72 bytes.
///
/// Values are checked by the engine (guard 3, see `sample_check`): out-of-bounds values and
/// vendor sentinels make a field invalid, not zero.
#[derive(Clone, Copy, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Sample {
    /// When the reading was taken, epoch seconds.
    pub t_s: i64,
    /// `utilization.gpu` (nvidia-smi) or `DCGM_FI_DEV_GPU_UTIL`, percent 0–100.
    pub util_pct: Reading,
    /// `memory.used`, MiB.
    pub mem_used_mib: Reading,
    /// `memory.total`, MiB.
    pub mem_total_mib: Reading,
    /// `power.draw`, watts.
    pub power_w: Reading,
    /// `power.limit`, watts.
    pub power_limit_w: Reading,
    /// `DCGM_FI_PROF_SM_ACTIVE`, a fraction 0–1. Used as the compute reading only when
    /// `util_pct` is missing, and then only a 0 (no kernel ran): the share of SMs busy is a
    /// lower bound of `utilization.gpu`, which a kernel on one SM of 132 keeps at 100 %
    /// (operator trial 23), so a value above 0 says work of an unknown amount and the sample
    /// has no compute reading.
    pub sm_active: Reading,
    /// Count of compute processes (`--query-compute-apps` rows for this GPU).
    pub procs: Option<u32>,
    /// Node the GPU is on.
    pub node: NodeId,
    /// GPU index on the node, as in [`GpuRef::gpu`].
    pub gpu: u16,
}

/// Which part of each allocation the caller observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Scope {
    /// Every GPU of every job (central mode, the simulator, replay).
    #[default]
    Whole,
    /// Only the GPUs on this node (a per-node enforcer). Verdicts above `alert` then need the
    /// job to live entirely on this node.
    Node(NodeId),
}

/// A drain the caller has carried out and confirmed (`scontrol show node` shows DRAIN with our
/// Reason), reported back to the engine.
///
/// Report every standing drain every cycle: the engine only takes a confirmation while the
/// job is in a confirmed breach (so one sent during an evidence gap, or right after a restart,
/// is ignored and must come again). A drain confirmed before the current breach began counts
/// from the breach start. Confirmations stamped after `now` are ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainConfirmation {
    /// The job the drain was made for.
    pub job_id: String,
    /// The drained nodes.
    pub nodes: Vec<NodeId>,
    /// When the drain was confirmed, epoch seconds.
    pub confirmed_s: i64,
    /// True when nothing was really drained (observe mode). An engine in
    /// [`crate::Mode::Enforce`] ignores these.
    pub hypothetical: bool,
}

/// Everything the engine is told in one cycle. Slices are borrowed; the engine copies what it
/// keeps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Observation<'a> {
    /// The running jobs. Findings come back in this order, one per job.
    pub jobs: &'a [JobFacts],
    /// New samples since the last cycle, in any order.
    pub samples: &'a [Sample],
    /// Which part of each allocation is observed.
    pub scope: Scope,
    /// Drains confirmed since the last cycle.
    pub drains: &'a [DrainConfirmation],
}

/// Interns node names into dense [`NodeId`]s. A plain data structure; drivers own it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeTable {
    names: Vec<String>,
    #[serde(skip)]
    index: std::collections::HashMap<String, u32>,
}

impl NodeTable {
    /// An empty table.
    pub fn new() -> NodeTable {
        NodeTable::default()
    }

    /// The id of `name`, adding it if new. Ids are dense and assigned in first-seen order.
    pub fn intern(&mut self, name: &str) -> NodeId {
        if self.index.len() != self.names.len() {
            self.rebuild_index();
        }
        if let Some(&i) = self.index.get(name) {
            return NodeId(i);
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        NodeId(i)
    }

    /// The id of `name` if it was interned.
    pub fn get(&self, name: &str) -> Option<NodeId> {
        match self.index.get(name) {
            Some(&i) => Some(NodeId(i)),
            None => self.names.iter().position(|n| n == name).map(|i| NodeId(i as u32)),
        }
    }

    /// The name of `id`; `"?"` for an id this table never handed out.
    pub fn name(&self, id: NodeId) -> &str {
        self.names.get(id.0 as usize).map(String::as_str).unwrap_or("?")
    }

    /// Number of interned nodes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no node was interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    fn rebuild_index(&mut self) {
        self.index = self.names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_72_bytes() {
        assert_eq!(std::mem::size_of::<Sample>(), 72);
    }

    #[test]
    fn readings_keep_missing_apart_from_nan() {
        assert_eq!(Reading::from(None).get(), None);
        assert_eq!(Reading::from(Some(3.5)).get(), Some(3.5));
        // A NaN value, even one carrying the missing payload, stays a present (bad) value.
        let nan = Reading::value(f64::from_bits(MISSING_BITS));
        assert!(!nan.is_missing() && nan.get().is_some_and(f64::is_nan));
        assert!(Reading::value(f64::NAN).get().is_some());
        assert!(Reading::default().is_missing());
        assert!(Reading::MISSING.raw().partial_cmp(&0.0).is_none());
        assert_eq!(Reading::value(-0.0).to_bits(), NEG_ZERO_BITS, "−0.0 is kept bit for bit");
        let payload = f64::from_bits(0x7ff8_0000_0000_0001);
        assert_eq!(Reading::value(payload).to_bits(), payload.to_bits(), "NaN payloads are kept");
        let json = serde_json::to_string(&[Reading::from(Some(1.5)), Reading::MISSING]).unwrap();
        assert_eq!(json, "[1.5,null]");
        let back: Vec<Reading> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec![Reading::from(Some(1.5)), Reading::MISSING]);
    }

    proptest::proptest! {
        /// The one-comparison bounds checks agree with the float comparisons they replace,
        /// for every bit pattern (so for NaNs, infinities, −0.0 and subnormals too).
        #[test]
        fn integer_bounds_agree_with_float_bounds(bits in proptest::num::u64::ANY, hi in 0.0f64..5000.0) {
            let x = f64::from_bits(bits);
            let r = Reading::value(x);
            proptest::prop_assert_eq!(r.within(hi), x >= 0.0 && x <= hi);
            if hi > 0.0 {
                proptest::prop_assert_eq!(r.within_positive(hi), x > 0.0 && x <= hi);
            }
            proptest::prop_assert!(!Reading::MISSING.within(hi) && !Reading::MISSING.within_positive(hi));
            if hi >= 1.0 {
                proptest::prop_assert_eq!(r.within_from(1.0, hi), x >= 1.0 && x <= hi);
                proptest::prop_assert!(!Reading::MISSING.within_from(1.0, hi));
            }
        }
    }

    #[test]
    fn node_table_interns_densely() {
        let mut t = NodeTable::new();
        let a = t.intern("node001");
        let b = t.intern("node002");
        assert_eq!(t.intern("node001"), a);
        assert_eq!((a, b), (NodeId(0), NodeId(1)));
        assert_eq!(t.name(b), "node002");
        assert_eq!(t.get("node003"), None);
        assert_eq!(t.name(NodeId(9)), "?");
    }
}
