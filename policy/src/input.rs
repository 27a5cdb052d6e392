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

/// One reading of one GPU at one time. Every field but `t_s`, `node` and `gpu` is optional:
/// missing stays missing and is never read as zero.
///
/// Values are checked by the engine (see `sample_check`): out-of-bounds values and vendor
/// sentinels make a field invalid, not zero.
#[derive(Clone, Copy, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Sample {
    /// When the reading was taken, epoch seconds.
    pub t_s: i64,
    /// Node the GPU is on.
    pub node: NodeId,
    /// GPU index on the node, as in [`GpuRef::gpu`].
    pub gpu: u16,
    /// `utilization.gpu` (nvidia-smi) or `DCGM_FI_DEV_GPU_UTIL`, percent 0–100.
    pub util_pct: Option<f64>,
    /// `memory.used`, MiB.
    pub mem_used_mib: Option<f64>,
    /// `memory.total`, MiB.
    pub mem_total_mib: Option<f64>,
    /// `power.draw`, watts.
    pub power_w: Option<f64>,
    /// `power.limit`, watts.
    pub power_limit_w: Option<f64>,
    /// Count of compute processes (`--query-compute-apps` rows for this GPU).
    pub procs: Option<u32>,
    /// `DCGM_FI_PROF_SM_ACTIVE`, a fraction 0–1. Used as the compute reading only when
    /// `util_pct` is missing.
    pub sm_active: Option<f64>,
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
