//! Which of this node's GPUs belong to which job.
//!
//! Three rules, in order; none of them guesses:
//! 1. **Kept.** An attribution made earlier for a job is kept while the same run of the job
//!    goes on: it is keyed by job id *and* start time, so a requeued job (same id, new start
//!    time) starts afresh. It is dropped and the job re-derived by the other rules when one of
//!    the job's own processes shows on a GPU outside it (the job moved or grew), and the job is
//!    ambiguous when a process of another job shows on one of its GPUs. This keeps the
//!    engine's allocation stable while an idle job's processes come and go. A kept
//!    attribution names its GPUs by UUID: each cycle it is found again at their current
//!    nvidia-smi indices, and dropped when one of them is not in the read
//!    ([`revalidate_kept`]); an index alone is never trusted across cycles, since a GPU
//!    dropping out of enumeration renumbers the ones after it.
//! 2. **By process.** nvidia-smi compute-app PIDs → `/proc/PID/cgroup` → job (`job_<id>` or
//!    a Slurm 26.05 SLUID). A job whose processes sit on exactly as many GPUs as it holds on
//!    this node, and on no GPU shared with another job, gets those GPUs.
//! 3. **By Slurm's device index.** A job rule 2 leaves short gets the GPUs Slurm names for it
//!    (see below), when that mapping is trusted on this node.
//! 4. **By node.** When the job set on the node is known completely: the only GPU job on a
//!    node that holds every visible GPU gets them all; and when the jobs' GPU counts add up to
//!    the visible GPUs and exactly one job is still short, it gets its own GPUs plus every GPU
//!    no process claims.
//!
//! Anything else is ambiguous: the job is skipped this cycle and counted.
//!
//! **Rule 3 in detail.** `squeue --json` gives each job's `gres_detail` (Slurm 21.08+), one
//! string per node, with the GPU indices Slurm allocated: `gpu:2(IDX:0-1)`
//! ([`SlurmJob::gres_idx`]). Slurm's index is the GPU's device-file index, i.e. the NVIDIA
//! minor number (`/dev/nvidia<minor>`), which is often nvidia-smi's `index` but not always
//! (PrincetonUniversity/jobstats issue #34: on AMD hosts `/dev/nvidia0` was nvidia-smi GPU 6,
//! and Slurm's `IDX:0` and the job's devices cgroup named the minor number). So an index is
//! mapped to a GPU through nvidia-smi's `minor_number`, never taken as an nvidia-smi index. A
//! job is placed this way only when all of these hold:
//! - the job runs on exactly one node (which `gres_detail` string belongs to which node of a
//!   multi-node job is not verified here; such jobs stop at alert on a per-node enforcer
//!   anyway);
//! - every visible GPU has a known minor number, and no two share one;
//! - the compute-apps query answered, with every row read;
//! - `complete`: the job list and the node's GPU list are whole (with a GPU missing, perhaps
//!   for good and Slurm's numbering redone since, the minor numbers seen are not the node's,
//!   and their atoms are not the node's either);
//! - the job's index list on its node has exactly its GPU count, and every index is the minor
//!   number of a visible GPU;
//! - no other job's process (nor one of a job not in the list) is on any of those GPUs, and
//!   none of them is already another job's;
//! - the mapping is trusted on this node ([`DeviceIndexTrust`]): confirmed at least once and
//!   never contradicted;
//! - the job's index list is pinned down by what jobs were seen doing on this node: each job
//!   seen with its processes on exactly the GPUs its whole list names proves that Slurm's
//!   index-to-device relation maps that set of minor numbers onto itself, and a list is used
//!   only when it is a union of the atoms those sets cut the node into
//!   ([`DeviceIndexTrust::pinned`], [`union_of_atoms`]). So one job seen on GPUs 0–1 pins
//!   {0,1} and {2,3} but not GPU 2 alone: if `gres.conf` listed its devices out of minor
//!   order, index 2 could be the device of minor 3. A busy job whose processes are hidden
//!   (another PID namespace) can then never have its idle-looking neighbour's GPU mistaken
//!   for its own.
//!
//! Every cycle the mapping is checked against what the processes show: for each job on one
//! node with an index list, every GPU its own processes run on must have a minor number in
//! that list; and a job placed by rule 1 or 2 whose index list maps to other GPUs contradicts
//! it too. At least one such process and no inconsistency confirms it; any inconsistency
//! switches the rule off on this node, kept in the state file, until the node's GPU set
//! (UUIDs and minor numbers) changes or an operator clears the record (README, "Placing a
//! job on its GPUs"). A placement made by rule 3 is then no longer kept either, nor in the
//! pass that finds the GPU set changed.

use crate::parse::cgroup::{self, CgroupJob};
use crate::parse::smi::{AppsTable, GpuReading};
use crate::parse::SlurmJob;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Reads `/proc/PID/cgroup` (or a synthetic tree in tests).
pub trait ProcReader {
    /// The cgroup file's text, or `None` when the PID does not exist here (another PID
    /// namespace, or it exited).
    fn cgroup(&self, pid: u32) -> Option<String>;
}

/// [`ProcReader`] over a directory laid out like `/proc`.
#[derive(Debug, Clone)]
pub struct ProcFs {
    /// Usually `/proc`.
    pub root: PathBuf,
}

impl ProcReader for ProcFs {
    fn cgroup(&self, pid: u32) -> Option<String> {
        std::fs::read_to_string(self.root.join(pid.to_string()).join("cgroup")).ok()
    }
}

/// The outcome for one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributed {
    /// The job's GPUs on this node (nvidia-smi indices, sorted).
    Gpus(Vec<u16>),
    /// No rule applies; the reason, for logs.
    Ambiguous(String),
}

/// The result of one attribution pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Per job id.
    pub jobs: BTreeMap<String, Attributed>,
    /// Compute processes whose PID could not be resolved to a job (not visible, not in a
    /// Slurm cgroup, or a job not on this node's list).
    pub unresolved_processes: u32,
    /// Jobs whose Slurm device index names a minor number that no listed GPU has, with that
    /// number: the node's GPU list is not whole this pass (elimination does not run).
    pub unlisted_devices: Vec<(String, u32)>,
    /// Jobs whose GPUs come from rule 4 (the only GPU job, or elimination), placed now or
    /// kept, each with the number of GPUs listed when it was placed: the daemon keeps this
    /// with the attribution ([`Kept::by_elimination`]).
    pub by_elimination: BTreeMap<String, u32>,
    /// What rule 3 (Slurm's device index) saw and did this pass.
    pub device_index: DeviceIndexReport,
    /// Jobs with a process, this pass, on a GPU whose minor number is not among the job's
    /// Slurm device indices (a helper process on another GPU without `ConstrainDevices`, a
    /// process left from before a requeue): which GPUs the job holds is in question, so the
    /// daemon holds it at alert. Checked in every pass, whatever the device-index rule's trust,
    /// except while MIG slices are in use (Slurm's indices then name MIG devices) (operator
    /// trial 19: after the ERROR saying so, the job was drained and cancelled on the readings
    /// of a GPU outside its allocation).
    pub outside_index: BTreeSet<String>,
}

/// One GPU of this node as the device-index rule knows it: nvidia-smi `uuid` and
/// `minor_number`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceMinor {
    /// nvidia-smi `uuid`.
    pub uuid: String,
    /// nvidia-smi `minor_number` (`/dev/nvidia<minor>`).
    pub minor: u32,
}

/// One job's processes seen against its Slurm device indices: the evidence behind a
/// confirmation or a contradiction of the device-index mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEvidence {
    /// Exact job id.
    pub job_id: String,
    /// The GPU (nvidia-smi `index`) the job's process runs on, or, for a contradiction between
    /// two placements, a GPU in one and not the other.
    pub gpu: u16,
    /// That GPU's `minor_number`.
    pub minor: u32,
    /// The job's Slurm device indices on this node (`gres_detail` `IDX:`).
    pub idx: Vec<u32>,
    /// What was seen, for the log: `process on the GPU`, or the two placements that differ.
    pub what: String,
}

/// Whether Slurm's device indices may place jobs on this node (rule 3), kept in the state
/// file so that a restart forgets neither a confirmation nor a contradiction.
///
/// Lifecycle: empty at first (the rule waits); `confirmed` once a cycle shows at least one
/// job's processes all on GPUs whose minor numbers are in its index list and no
/// inconsistency; `contradicted` at the first inconsistency, after which the rule is off and
/// no longer checked. The whole record is reset (the rule waits for a new confirmation) when a
/// whole read of the node's GPUs (every row read, no GPU missing, every job row read) shows
/// another set of UUIDs and minor numbers than [`DeviceIndexTrust::gpus`]: a reboot that
/// renumbered the devices, a GPU replaced, added or removed. A slurmd restart forgets the
/// confirmation and the pinned sets but not a contradiction
/// ([`DeviceIndexTrust::note_slurmd_start`]). An operator who has fixed the
/// cause of a contradiction on the same hardware re-enables the rule by stopping the daemon,
/// deleting the `device_index` key from `state.json`, and starting it again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceIndexTrust {
    /// The node's GPUs (UUID and minor number, sorted) when this record was started; empty
    /// until the first whole read with every minor number known.
    pub gpus: Vec<DeviceMinor>,
    /// The first confirmation.
    pub confirmed: Option<IndexEvidence>,
    /// The contradiction that switched the rule off.
    pub contradicted: Option<IndexEvidence>,
    /// Sets of minor numbers each seen held whole by one job: its processes on exactly the
    /// GPUs of these minor numbers, on no GPU shared with another job, and its Slurm device
    /// indices exactly these numbers. Whatever Slurm's index-to-device relation is, it maps
    /// each such set onto itself; so it maps onto itself every union of the atoms these sets
    /// cut the node's minor numbers into, and only such a union is used to place a job (see
    /// [`union_of_atoms`]). A set is kept only when it cuts an atom further, so there are
    /// fewer than the node's GPUs. Each sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<Vec<u32>>,
    /// slurmd's start time on this node (`scontrol show node` `SlurmdStartTime`) when the
    /// confirmation and the pinned sets were seen. slurmd reads gres.conf when it starts, so
    /// a restart may have changed Slurm's index-to-device relation: the confirmation and the
    /// pinned sets are then forgotten (see [`DeviceIndexTrust::note_slurmd_start`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmd_start: Option<String>,
}

impl DeviceIndexTrust {
    /// Takes note of slurmd's start time as `scontrol show node` now shows it (`None`: not
    /// shown, which changes nothing). When it differs from the one recorded, slurmd has
    /// restarted and may have read another gres.conf: the confirmation and the pinned sets
    /// are forgotten, so the rule waits for a new confirmation and places no job until pins
    /// are proven again. A contradiction stays (clearing it is the operator's act, after
    /// fixing its cause). Returns the start time recorded before, when it changed.
    pub fn note_slurmd_start(&mut self, now: Option<&str>) -> Option<String> {
        let now = now?;
        match self.slurmd_start.as_deref() {
            Some(before) if before == now => None,
            None => {
                self.slurmd_start = Some(now.to_string());
                None
            }
            Some(_) => {
                let before = self.slurmd_start.replace(now.to_string());
                self.confirmed = None;
                self.pinned.clear();
                before
            }
        }
    }
}

/// The atom of `minor` in the partition `pinned` cuts the minor numbers into: which pinned
/// sets hold it.
fn atom_of(minor: u32, pinned: &[Vec<u32>]) -> Vec<bool> {
    pinned.iter().map(|p| p.binary_search(&minor).is_ok()).collect()
}

/// True when `set` (minor numbers) is a union of atoms of the partition that the `pinned` sets
/// cut `universe` into: no two minor numbers of one atom fall on different sides of `set`.
/// With no pinned set the only atom is the whole node.
pub fn union_of_atoms(set: &[u32], pinned: &[Vec<u32>], universe: &[u32]) -> bool {
    let mut side: BTreeMap<Vec<bool>, bool> = BTreeMap::new();
    universe.iter().all(|&m| {
        let inside = set.contains(&m);
        *side.entry(atom_of(m, pinned)).or_insert(inside) == inside
    })
}

/// Rule 3's state in one pass, as the cycle line and the metrics name it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceIndexState {
    /// Not every visible GPU has a known, distinct minor number (nvidia-smi refused
    /// `minor_number`, printed `[N/A]`, or no GPU data), or no compute-apps table.
    #[default]
    Unavailable,
    /// Minor numbers known, but the mapping has not been confirmed yet.
    Untrusted,
    /// Confirmed and never contradicted: jobs may be placed by it.
    Trusted,
    /// Contradicted on this node: off until the GPU set changes or the record is cleared.
    Contradicted,
}

impl DeviceIndexState {
    /// The state's name: `unavailable`, `untrusted`, `trusted`, `contradicted`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceIndexState::Unavailable => "unavailable",
            DeviceIndexState::Untrusted => "untrusted",
            DeviceIndexState::Trusted => "trusted",
            DeviceIndexState::Contradicted => "contradicted",
        }
    }
}

/// What rule 3 saw and did in one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceIndexReport {
    /// The rule's state after this pass's self-check.
    pub state: DeviceIndexState,
    /// Jobs placed by the rule in this pass (not those kept from an earlier one).
    pub placed: Vec<String>,
    /// Every job whose GPUs come from the rule, placed now or kept from an earlier pass (the
    /// daemon keeps this mark with the attribution).
    pub derived: BTreeSet<String>,
    /// Jobs whose processes were all consistent with their index list in this pass.
    pub consistent_jobs: u32,
    /// True when this pass gave the mapping its first confirmation.
    pub newly_confirmed: bool,
    /// Sets added to [`DeviceIndexTrust::pinned`] in this pass.
    pub newly_pinned: u32,
    /// Inconsistencies found in this pass (each one an ERROR); the first is kept in
    /// [`DeviceIndexTrust::contradicted`].
    pub contradictions: Vec<IndexEvidence>,
    /// The GPU set recorded before, when this pass found another one and reset the record.
    pub reset_from: Option<Vec<DeviceMinor>>,
}

/// An attribution kept from an earlier cycle for one run of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kept {
    /// The job's start time when the attribution was made, epoch seconds (squeue `StartTime`);
    /// a requeued job keeps its id but gets a new start time, and the attribution is dropped.
    pub start_s: i64,
    /// The job's GPUs on this node (nvidia-smi indices, sorted) as of the read that kept
    /// them. An index is not an identity (a GPU dropping out renumbers the later ones): each
    /// cycle the kept GPUs are found again by [`Kept::uuids`] ([`revalidate_kept`]).
    pub gpus: Vec<u16>,
    /// The same GPUs' nvidia-smi `uuid`s, in the order of `gpus`. Absent in older files: such
    /// an entry is not trusted, and the job is derived afresh.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uuids: Vec<String>,
    /// True when the GPUs came from Slurm's device index (rule 3): such a placement is
    /// dropped once the mapping is contradicted on this node. Absent in older files (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_device_index: bool,
    /// Set when the GPUs came from rule 4 (the only GPU job, or elimination): the number of
    /// GPUs the node listed when the placement was made. The placement stands only while
    /// nothing shows the node to have more GPUs than that (Slurm's `Gres=`, the most it has
    /// shown, or a job's device index naming a GPU not listed): else the list it came from was
    /// short, a free GPU may stand in for a hidden one, and the job is derived afresh. A GPU
    /// dropping out *after* a placement made on a whole list does not void it (the kept GPUs
    /// are found again by UUID). Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_elimination: Option<u32>,
    /// True in every entry written since entries record how they were placed
    /// ([`Kept::by_elimination`]). An entry without it (an older state file) cannot say whether
    /// elimination made it, so it is not trusted and the job is derived afresh.
    #[serde(default)]
    pub marked: bool,
}

/// Kept attributions per exact job id.
pub type KeptMap = BTreeMap<String, Kept>;

/// The kept GPUs for `job` when they belong to the same run of it (same start time); `None`
/// when nothing is kept, the job has no start time, or it was requeued since.
pub fn kept_for<'a>(kept: &'a KeptMap, job: &SlurmJob) -> Option<&'a [u16]> {
    let k = kept.get(&job.job_id)?;
    (job.start_s == Some(k.start_s)).then_some(k.gpus.as_slice())
}

/// Why a kept attribution was dropped by [`revalidate_kept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptDropped {
    /// The entry has no UUIDs (a state file written before they were kept).
    NoUuids,
    /// One of its GPUs (by UUID) is not in this read: gone from the bus, or its row unread.
    GpuGone,
    /// The entry does not say how it was placed ([`Kept::marked`]: an older state file).
    Unmarked,
}

impl KeptDropped {
    /// For logs: `no_uuids`, `gpu_gone`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeptDropped::NoUuids => "no_uuids",
            KeptDropped::GpuGone => "gpu_gone",
            KeptDropped::Unmarked => "unmarked",
        }
    }
}

/// The kept attributions that still name GPUs of this read, with their nvidia-smi indices
/// brought up to date from their UUIDs (a GPU dropping out of enumeration renumbers the later
/// ones), and the jobs whose entry was dropped, with why: one without UUIDs (never matched by
/// index alone), or one of whose GPUs (UUIDs) is not in `gpus`, or not once.
pub fn revalidate_kept(kept: &KeptMap, gpus: &[GpuReading]) -> (KeptMap, Vec<(String, KeptDropped)>) {
    let mut at: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
    for g in gpus {
        if let (Some(u), Some(i)) = (g.uuid.as_deref(), g.index) {
            at.entry(u).or_default().push(i);
        }
    }
    let mut valid = KeptMap::new();
    let mut dropped = Vec::new();
    for (job, k) in kept {
        if k.uuids.is_empty() || k.uuids.len() != k.gpus.len() {
            dropped.push((job.clone(), KeptDropped::NoUuids));
            continue;
        }
        if !k.marked {
            dropped.push((job.clone(), KeptDropped::Unmarked));
            continue;
        }
        let now: Option<Vec<(u16, String)>> = k
            .uuids
            .iter()
            .map(|u| match at.get(u.as_str()).map(Vec::as_slice) {
                Some([i]) => Some((*i, u.clone())),
                _ => None,
            })
            .collect();
        let Some(mut now) = now else {
            dropped.push((job.clone(), KeptDropped::GpuGone));
            continue;
        };
        now.sort_unstable();
        let (gpus, uuids) = now.into_iter().unzip();
        valid.insert(job.clone(), Kept { gpus, uuids, ..k.clone() });
    }
    (valid, dropped)
}

/// The job's Slurm device indices on this node, for a job on exactly one node whose
/// `gres_detail` gives indices there; `None` otherwise (see [`SlurmJob::gres_idx`]).
pub fn single_node_indices(job: &SlurmJob) -> Option<&[u32]> {
    match (job.nodes.len(), job.gres_idx.as_slice()) {
        (1, [Some(idx)]) => Some(idx.as_slice()),
        _ => None,
    }
}

/// GPUs the job holds on each of its nodes: the TRES count divided evenly over its nodes;
/// `None` when it does not divide. A job on several nodes whose `gres_detail` lists a
/// different number of indices on different nodes (`--gpus=4` over two nodes may give 1 and
/// 3) is `None` too: which count is this node's is not verified (see
/// [`SlurmJob::gres_idx`]), and an even split would be a guess.
pub fn per_node_gpus(job: &SlurmJob) -> Option<u32> {
    let n = job.nodes.len() as u32;
    // With `gres_detail` given, a multi-node job's strings must all be read, one per node, and
    // agree; anything else (a `CNT:` 1 + 3, an unreadable string) leaves the count unknown.
    if n > 1 && !job.gres_counts.is_empty() {
        let counts: Option<Vec<u32>> = job.gres_counts.iter().copied().collect();
        counts.filter(|c| c.len() == n as usize && c.windows(2).all(|w| w[0] == w[1]))?;
    }
    (n > 0 && job.gpus % n == 0).then(|| job.gpus / n)
}

/// Attributes this node's GPUs. `jobs` are the GPU jobs running on this node (CONFIGURING
/// ones included, since they hold GPUs too); `complete` says both the job list (no squeue
/// row error) and `gpus`, the node's GPU list (no row unread, none missing), are known to be
/// whole: elimination (rule 4) runs only then, and only then is the GPU set compared with
/// `trust`'s. `kept` is the previous cycle's result (used only for the same run of a job, see
/// [`kept_for`]). `trust` is this node's device-index record: updated in place (confirmed,
/// contradicted or reset, see [`DeviceIndexTrust`]); the caller persists it.
pub fn attribute(
    jobs: &[&SlurmJob],
    gpus: &[GpuReading],
    apps: Option<&AppsTable>,
    proc: &dyn ProcReader,
    complete: bool,
    kept: &KeptMap,
    trust: &mut DeviceIndexTrust,
) -> Attribution {
    let mut out = Attribution::default();
    let visible: BTreeSet<u16> = gpus.iter().filter_map(|g| g.index).collect();
    let uuid_to_index: BTreeMap<&str, u16> = gpus.iter().filter_map(|g| Some((g.uuid.as_deref()?, g.index?))).collect();
    // Minor number -> nvidia-smi index, when every visible GPU has a minor number and no two
    // share one; otherwise rule 3 is unavailable this pass.
    let minor_to_index: Option<BTreeMap<u32, u16>> = {
        let pairs: Vec<(u32, u16)> = gpus
            .iter()
            .filter(|g| g.index.is_some())
            .map(|g| Some((g.minor?, g.index?)))
            .collect::<Option<_>>()
            .unwrap_or_default();
        let map: BTreeMap<u32, u16> = pairs.iter().copied().collect();
        (!pairs.is_empty() && map.len() == pairs.len() && map.len() == visible.len()).then_some(map)
    };
    let index_to_minor: BTreeMap<u16, u32> = minor_to_index.iter().flatten().map(|(m, i)| (*i, *m)).collect();
    // A GPU that Slurm says a job here holds (its device index, a minor number) but that
    // nvidia-smi does not list: the list is not whole, whatever the count of GPUs shown so far
    // says (a GPU hidden since the daemon started), so nothing is placed by elimination.
    if let Some(map) = &minor_to_index {
        for j in jobs {
            if let Some(m) = single_node_indices(j).and_then(|idx| idx.iter().find(|m| !map.contains_key(m))) {
                out.unlisted_devices.push((j.job_id.clone(), *m));
            }
        }
    }
    let complete = complete && out.unlisted_devices.is_empty();
    // The fewest GPUs the node is now known to have: those listed and those a job's device
    // index names but nvidia-smi does not list.
    let unlisted: BTreeSet<u32> = out.unlisted_devices.iter().map(|(_, m)| *m).collect();
    let known_gpus = (visible.len() + unlisted.len()) as u32;
    if let (true, Some(_)) = (complete, &minor_to_index) {
        let set: Option<Vec<DeviceMinor>> = gpus
            .iter()
            .filter(|g| g.index.is_some())
            .map(|g| {
                Some(DeviceMinor {
                    uuid: g.uuid.clone()?,
                    minor: g.minor?,
                })
            })
            .collect();
        if let Some(mut set) = set {
            set.sort();
            if trust.gpus.is_empty() {
                // A confirmation made before any GPU set was recorded is tied to no set, so
                // it cannot be known to hold for this one (trial 12: one made by a MIG job
                // survived a GPU added to the node); this read may confirm it again. A
                // contradiction stays.
                trust.confirmed = None;
                trust.gpus = set;
            } else if trust.gpus != set {
                out.device_index.reset_from = Some(std::mem::take(&mut trust.gpus));
                *trust = DeviceIndexTrust {
                    gpus: set,
                    ..DeviceIndexTrust::default()
                };
            }
        }
    }
    let contradicted_before = trust.contradicted.is_some();
    // Placements kept from rule 3 are not used once the mapping is contradicted, nor in the
    // pass that finds the node's GPU set changed (the minor numbers they came from may be
    // other devices now).
    let drop_kept_by_index = contradicted_before || out.device_index.reset_from.is_some();

    // Process claims: GPU index -> set of job positions (usize::MAX = a job not in the list).
    let mut claims: BTreeMap<u16, BTreeSet<usize>> = BTreeMap::new();
    if let Some(apps) = apps {
        for a in &apps.apps {
            let Some(idx) = a.gpu_uuid.as_deref().and_then(|u| resolve_uuid(u, &uuid_to_index)) else {
                out.unresolved_processes += 1;
                continue;
            };
            let job = a
                .pid
                .and_then(|pid| proc.cgroup(pid))
                .and_then(|t| cgroup::parse(&t).ok().flatten());
            let pos = match job {
                Some(CgroupJob::JobId(id)) => jobs.iter().position(|j| j.raw_id == Some(id)),
                Some(CgroupJob::Sluid(s)) => jobs.iter().position(|j| j.sluid.as_deref() == Some(s.as_str())),
                None => {
                    out.unresolved_processes += 1;
                    continue;
                }
            };
            claims.entry(idx).or_default().insert(pos.unwrap_or(usize::MAX));
            if pos.is_none() {
                out.unresolved_processes += 1;
            }
        }
    }

    let mut assigned: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    // Jobs whose kept GPUs came from rule 3.
    let mut kept_by_index: BTreeSet<usize> = BTreeSet::new();
    let mut short: Vec<usize> = Vec::new();
    for (pos, job) in jobs.iter().enumerate() {
        let foreign = |g: &u16| claims.get(g).is_some_and(|c| c.iter().any(|p| *p != pos));
        // The job's own processes on a GPU outside the kept list: the kept list is out of date
        // (the job moved or was restarted), so it is not used and the job is derived afresh.
        let strays = |k: &[u16]| claims.iter().any(|(g, c)| c.contains(&pos) && !k.contains(g));
        // A placement made by Slurm's device index is not kept once that mapping is
        // contradicted on this node, or the node's GPU set changed.
        let by_index = kept.get(&job.job_id).is_some_and(|k| k.by_device_index);
        // A placement made by elimination stands only while its ground does: not in a pass
        // whose GPU list a job's own device index shows to be short (a GPU hidden since the
        // placement was made; the daemon drops such placements too when fewer GPUs are
        // listed than the node should have).
        let by_elim = kept.get(&job.job_id).and_then(|k| k.by_elimination);
        let dropped = (by_index && drop_kept_by_index) || by_elim.is_some_and(|n| known_gpus > n);
        let kept_gpus = kept_for(kept, job).filter(|k| !dropped && !strays(k));
        if let Some(k) = kept_gpus {
            if k.iter().all(|g| visible.contains(g)) && Some(k.len() as u32) == per_node_gpus(job) {
                if k.iter().any(foreign) {
                    out.jobs.insert(
                        job.job_id.clone(),
                        Attributed::Ambiguous("another job's process on a kept GPU".into()),
                    );
                } else {
                    assigned.insert(pos, k.to_vec());
                    if by_index {
                        kept_by_index.insert(pos);
                    }
                    if let Some(n) = by_elim {
                        out.by_elimination.insert(job.job_id.clone(), n);
                    }
                }
                continue;
            }
        }
        let Some(want) = per_node_gpus(job) else {
            out.jobs.insert(
                job.job_id.clone(),
                Attributed::Ambiguous("GPU count does not divide over the job's nodes".into()),
            );
            continue;
        };
        let mine: Vec<u16> = claims.iter().filter(|(_, c)| c.contains(&pos)).map(|(g, _)| *g).collect();
        if mine.iter().any(foreign) {
            out.jobs
                .insert(job.job_id.clone(), Attributed::Ambiguous("a GPU is shared with another job".into()));
            continue;
        }
        if mine.len() as u32 == want && want > 0 {
            assigned.insert(pos, mine);
        } else if mine.len() as u32 > want {
            out.jobs.insert(
                job.job_id.clone(),
                Attributed::Ambiguous(format!("processes on {} GPUs, job holds {want}", mine.len())),
            );
        } else {
            short.push(pos);
        }
    }

    // Rule 3: check the mapping against the processes, then place the jobs left short.
    let mapped = |job: &SlurmJob| -> Option<Vec<u16>> {
        let idx = single_node_indices(job)?;
        let map = minor_to_index.as_ref()?;
        let mut g: Vec<u16> = idx.iter().map(|m| map.get(m).copied()).collect::<Option<_>>()?;
        g.sort_unstable();
        (per_node_gpus(job) == Some(g.len() as u32) && !g.is_empty()).then_some(g)
    };
    let report = &mut out.device_index;
    let mut pins: Vec<Vec<u32>> = Vec::new();
    let mut contradicted_kept: Vec<usize> = Vec::new();
    // While MIG slices are in use Slurm's indices name MIG devices, not GPUs, so nothing
    // is checked against them (trial 12: a MIG job confirmed the rule, and on a mixed node
    // MIG and whole-GPU jobs alike contradicted it). A confirmation also needs a whole read;
    // a contradiction does not (a GPU lost from the list is how stale indices show).
    let mig_in_use = jobs.iter().any(|j| j.mig)
        || apps.is_some_and(|a| a.apps.iter().any(|p| p.gpu_uuid.as_deref().is_some_and(|u| u.starts_with("MIG-"))));
    // Every pass: a job whose process runs on a GPU outside its Slurm device indices. A GPU's
    // own minor number is enough here, even when the node's map is not whole.
    if !mig_in_use {
        let minor_of: BTreeMap<u16, u32> = gpus.iter().filter_map(|g| Some((g.index?, g.minor?))).collect();
        for (pos, job) in jobs.iter().enumerate() {
            let Some(idx) = single_node_indices(job) else { continue };
            let outside = claims
                .iter()
                .filter(|(_, c)| c.contains(&pos))
                .any(|(g, _)| minor_of.get(g).is_some_and(|m| !idx.contains(m)));
            if outside {
                out.outside_index.insert(job.job_id.clone());
            }
        }
    }
    if minor_to_index.is_some() && !contradicted_before && !mig_in_use {
        for (pos, job) in jobs.iter().enumerate() {
            let Some(idx) = single_node_indices(job) else { continue };
            let mut seen = 0u32;
            let mut bad: Option<IndexEvidence> = None;
            for (g, c) in claims.iter().filter(|(_, c)| c.contains(&pos)) {
                let Some(&minor) = index_to_minor.get(g) else { continue };
                seen += 1;
                if !idx.contains(&minor) && bad.is_none() {
                    bad = Some(IndexEvidence {
                        job_id: job.job_id.clone(),
                        gpu: *g,
                        minor,
                        idx: idx.to_vec(),
                        what: format!("a process of the job runs on GPU {g} (minor {minor}), outside its Slurm device indices")
                            + if c.len() > 1 { " (the GPU is shared with another job)" } else { "" },
                    });
                }
            }
            // A job placed by rule 1 or 2 whose index list maps to other GPUs.
            if let (None, Some(have), Some(want)) = (&bad, assigned.get(&pos), mapped(job)) {
                if *have != want {
                    let g = have
                        .iter()
                        .find(|g| !want.contains(g))
                        .or_else(|| want.iter().find(|g| !have.contains(g)))
                        .copied()
                        .unwrap_or(0);
                    let how = if kept_for(kept, job).is_some() {
                        // A kept placement may have come from elimination, the weakest rule:
                        // it is not used once its job's own indices disagree with it.
                        contradicted_kept.push(pos);
                        "kept"
                    } else {
                        "placed by its processes"
                    };
                    bad = Some(IndexEvidence {
                        job_id: job.job_id.clone(),
                        gpu: g,
                        minor: index_to_minor.get(&g).copied().unwrap_or(u32::MAX),
                        idx: idx.to_vec(),
                        what: format!("{how} on GPUs {have:?}, but its Slurm device indices map to GPUs {want:?}"),
                    });
                }
            }
            match bad {
                Some(b) => report.contradictions.push(b),
                None if seen > 0 => {
                    report.consistent_jobs += 1;
                    // Held whole: processes on exactly as many GPUs as the list names (so on
                    // all of them, none of them shared), which pins the list's set.
                    let own: Vec<u16> = claims.iter().filter(|(_, c)| c.contains(&pos)).map(|(g, _)| *g).collect();
                    let unshared = own.iter().all(|g| claims.get(g).is_some_and(|c| c.len() == 1));
                    if unshared && own.len() == idx.len() && per_node_gpus(job) == Some(idx.len() as u32) {
                        let mut set = idx.to_vec();
                        set.sort_unstable();
                        pins.push(set);
                    }
                    if complete && trust.confirmed.is_none() && report.contradictions.is_empty() {
                        let g = claims.iter().find(|(_, c)| c.contains(&pos)).map_or(0, |(g, _)| *g);
                        trust.confirmed = Some(IndexEvidence {
                            job_id: job.job_id.clone(),
                            gpu: g,
                            minor: index_to_minor.get(&g).copied().unwrap_or(u32::MAX),
                            idx: idx.to_vec(),
                            what: "every process of the job runs on a GPU whose minor number is in its Slurm device indices".into(),
                        });
                        report.newly_confirmed = true;
                    }
                }
                None => {}
            }
        }
        if let Some(first) = report.contradictions.first() {
            trust.contradicted = Some(first.clone());
            if report.newly_confirmed {
                trust.confirmed = None;
                report.newly_confirmed = false;
            }
        } else if let Some(universe) = &minor_to_index {
            let universe: Vec<u32> = universe.keys().copied().collect();
            for set in pins {
                // Kept only when it cuts an atom further, i.e. is not already a union of atoms.
                if !trust.pinned.contains(&set) && !union_of_atoms(&set, &trust.pinned, &universe) {
                    trust.pinned.push(set);
                    report.newly_pinned += 1;
                }
            }
        }
    }
    // Such a job is short again: it counts against elimination's "exactly one job short",
    // so its GPUs are never handed to another job in this pass.
    for pos in contradicted_kept {
        assigned.remove(&pos);
        kept_by_index.remove(&pos);
        short.push(pos);
    }
    let apps_whole = apps.is_some_and(|a| a.row_errors.is_empty());
    report.state = match (&minor_to_index, &trust.contradicted, &trust.confirmed) {
        (_, Some(_), _) => DeviceIndexState::Contradicted,
        (None, _, _) => DeviceIndexState::Unavailable,
        _ if !apps_whole => DeviceIndexState::Unavailable,
        (Some(_), None, None) => DeviceIndexState::Untrusted,
        (Some(_), None, Some(_)) => DeviceIndexState::Trusted,
    };
    // A kept placement of rule 3 contradicted in this very pass is not used either.
    if report.state == DeviceIndexState::Contradicted {
        for pos in std::mem::take(&mut kept_by_index) {
            assigned.remove(&pos);
            out.jobs.insert(
                jobs[pos].job_id.clone(),
                Attributed::Ambiguous("kept from Slurm's device index, which this node's processes now contradict".into()),
            );
        }
    }
    // Why a job short of evidence was not placed by rule 3, for its ambiguity reason.
    let mut index_why: BTreeMap<usize, String> = BTreeMap::new();
    // Only on a whole read (every GPU the node has shown listed and read, every job row read):
    // with a GPU missing, the pieces the pinned sets cut are no longer all in view, and a GPU
    // lost for good leaves pins made under another numbering.
    // Not while MIG is in use: nothing is checked against the indices then, so a trust
    // earned before would go on placing jobs unchecked (review 21).
    if report.state == DeviceIndexState::Trusted && complete && !mig_in_use {
        let taken: BTreeSet<u16> = assigned.values().flatten().copied().collect();
        let mut candidates: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
        for &pos in &short {
            let job = jobs[pos];
            let Some(want) = mapped(job) else {
                let why = if job.nodes.len() != 1 {
                    "the job runs on several nodes"
                } else if single_node_indices(job).is_none() {
                    "squeue gave no device indices for it"
                } else {
                    "its device indices do not match its GPU count or this node's minor numbers"
                };
                index_why.insert(pos, why.into());
                continue;
            };
            let idx = single_node_indices(job).unwrap_or_default();
            // The node's minor numbers as recorded on a whole read (the pass's own otherwise).
            let universe: Vec<u32> = if trust.gpus.is_empty() {
                minor_to_index.iter().flat_map(|m| m.keys().copied()).collect()
            } else {
                trust.gpus.iter().map(|g| g.minor).collect()
            };
            if !union_of_atoms(idx, &trust.pinned, &universe) {
                index_why.insert(
                    pos,
                    "its device indices are not yet pinned down: no set of jobs seen on this node's GPUs tells its GPUs apart from others"
                        .into(),
                );
                continue;
            }
            if want.iter().any(|g| claims.get(g).is_some_and(|c| c.iter().any(|p| *p != pos))) {
                index_why.insert(pos, "another job's process is on one of its device-index GPUs".into());
            } else if want.iter().any(|g| taken.contains(g)) {
                index_why.insert(pos, "one of its device-index GPUs is already another job's".into());
            } else {
                candidates.insert(pos, want);
            }
        }
        // Two jobs naming one GPU: neither is placed.
        let mut count: BTreeMap<u16, u32> = BTreeMap::new();
        for g in candidates.values().flatten() {
            *count.entry(*g).or_insert(0) += 1;
        }
        for (pos, g) in candidates {
            if g.iter().any(|g| count[g] > 1) {
                index_why.insert(pos, "another job's device indices name one of its GPUs".into());
                continue;
            }
            report.placed.push(jobs[pos].job_id.clone());
            assigned.insert(pos, g);
            short.retain(|p| *p != pos);
        }
    } else {
        // Not whole comes first: then the rule is off this cycle whatever its state (trial
        // 10: a MIG node's jobs read "not yet confirmed", as if waiting would place them).
        let why = match report.state {
            DeviceIndexState::Contradicted => "off on this node since the processes contradicted it",
            _ if !complete => {
                "not used this cycle: the node's GPU list or job list is not whole, or MIG slices are in use (see the cycle's log)"
            }
            DeviceIndexState::Untrusted => "not yet confirmed on this node by any job's processes",
            _ => "minor numbers or the process list unknown",
        };
        for &pos in &short {
            if single_node_indices(jobs[pos]).is_some() {
                index_why.insert(pos, why.into());
            }
        }
    }
    report.derived = report
        .placed
        .iter()
        .cloned()
        .chain(kept_by_index.iter().map(|p| jobs[*p].job_id.clone()))
        .collect();

    if complete && short.len() == 1 {
        let pos = short[0];
        let job = jobs[pos];
        let want = per_node_gpus(job).unwrap_or(0) as usize;
        // A job whose count does not divide over its nodes counts as more GPUs than any node
        // has, so the total can never match (u64: no overflow, whatever the counts).
        let total: u64 = jobs.iter().map(|j| per_node_gpus(j).map_or(u64::from(u32::MAX), u64::from)).sum();
        if jobs.len() == 1 && want == visible.len() && claims.values().all(|c| c.iter().all(|p| *p == pos)) {
            // Node-exclusive: the only GPU job holds every GPU, and no process of another job
            // shows on any of them (with no process list there are no claims at all).
            assigned.insert(pos, visible.iter().copied().collect());
            out.by_elimination.insert(job.job_id.clone(), visible.len() as u32);
            short.clear();
        } else if apps.is_some() && total == visible.len() as u64 {
            let taken: BTreeSet<u16> = assigned.values().flatten().copied().collect();
            let mut mine: Vec<u16> = visible
                .iter()
                .copied()
                .filter(|g| !taken.contains(g) && claims.get(g).is_none_or(|c| c.iter().all(|p| *p == pos)))
                .collect();
            mine.sort_unstable();
            if mine.len() == want {
                assigned.insert(pos, mine);
                out.by_elimination.insert(job.job_id.clone(), visible.len() as u32);
                short.clear();
            }
        }
    }
    for pos in short {
        let why = match index_why.get(&pos) {
            Some(w) => format!("not enough evidence to place its GPUs (by Slurm's device index: {w})"),
            None => "not enough evidence to place its GPUs".into(),
        };
        out.jobs.insert(jobs[pos].job_id.clone(), Attributed::Ambiguous(why));
    }
    for (pos, mut g) in assigned {
        g.sort_unstable();
        out.jobs.insert(jobs[pos].job_id.clone(), Attributed::Gpus(g));
    }
    out
}

/// Maps a compute-app `gpu_uuid` to a GPU index: a GPU UUID directly, or an old-style
/// `MIG-GPU-<uuid>/gi/ci` through its embedded parent. `None` for anything else (a new-style
/// `MIG-<uuid>` names no parent).
pub fn resolve_uuid(uuid: &str, map: &BTreeMap<&str, u16>) -> Option<u16> {
    if let Some(&i) = map.get(uuid) {
        return Some(i);
    }
    let parent = uuid.strip_prefix("MIG-")?.split('/').next()?;
    map.get(parent).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::smi::ComputeApp;

    #[test]
    fn a_new_slurmd_start_forgets_confirmation_and_pins_but_keeps_a_contradiction() {
        let ev = |j: &str| IndexEvidence {
            job_id: j.into(),
            gpu: 0,
            minor: 0,
            idx: vec![0],
            what: "process on the GPU".into(),
        };
        let mut t = DeviceIndexTrust {
            confirmed: Some(ev("1")),
            pinned: vec![vec![0, 1]],
            ..DeviceIndexTrust::default()
        };
        // Not shown: nothing changes. First shown: recorded, nothing forgotten.
        assert_eq!(t.note_slurmd_start(None), None);
        assert_eq!(t.note_slurmd_start(Some("a")), None);
        assert_eq!(t.note_slurmd_start(Some("a")), None);
        assert!(t.confirmed.is_some() && t.pinned.len() == 1 && t.slurmd_start.as_deref() == Some("a"));
        // A restart.
        t.contradicted = Some(ev("2"));
        assert_eq!(t.note_slurmd_start(Some("b")).as_deref(), Some("a"));
        assert!(t.confirmed.is_none() && t.pinned.is_empty(), "{t:?}");
        assert_eq!(t.contradicted, Some(ev("2")));
        assert_eq!(t.slurmd_start.as_deref(), Some("b"));
    }

    struct FakeProc(BTreeMap<u32, String>);
    impl ProcReader for FakeProc {
        fn cgroup(&self, pid: u32) -> Option<String> {
            self.0.get(&pid).cloned()
        }
    }

    fn job(id: &str, raw: u64, gpus: u32, nodes: &[&str]) -> SlurmJob {
        SlurmJob {
            job_id: id.into(),
            raw_id: Some(raw),
            gpus,
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            state: "RUNNING".into(),
            start_s: Some(1000),
            ..Default::default()
        }
    }

    fn kept(rows: &[(&str, i64, &[u16])]) -> KeptMap {
        rows.iter()
            .map(|(id, start_s, g)| {
                (
                    id.to_string(),
                    Kept {
                        start_s: *start_s,
                        gpus: g.to_vec(),
                        uuids: g.iter().map(|i| format!("GPU-{i}")).collect(),
                        by_device_index: false,
                        by_elimination: None,
                        marked: true,
                    },
                )
            })
            .collect()
    }

    fn gpus(n: u16) -> Vec<GpuReading> {
        (0..n)
            .map(|i| GpuReading {
                index: Some(i),
                uuid: Some(format!("GPU-{i}")),
                ..Default::default()
            })
            .collect()
    }

    fn apps(rows: &[(u16, u32)]) -> AppsTable {
        AppsTable {
            apps: rows
                .iter()
                .map(|(g, pid)| ComputeApp {
                    gpu_uuid: Some(format!("GPU-{g}")),
                    pid: Some(*pid),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn procs() -> FakeProc {
        FakeProc(
            [
                (100, "0::/system.slice/slurmstepd.scope/job_11/step_0/user/task_0\n".to_string()),
                (
                    200,
                    "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0\n".to_string(),
                ),
                (300, "0::/user.slice/user-1000.slice\n".to_string()),
                (400, "0::/system.slice/slurmstepd.scope/job_40/step_0/user/task_0\n".to_string()),
            ]
            .into_iter()
            .collect(),
        )
    }

    /// One pass with [`procs`]; `on` lists (GPU, PID) compute processes, `None` for no
    /// compute-apps table.
    fn pass(
        jobs: &[&SlurmJob],
        g: &[GpuReading],
        on: Option<&[(u16, u32)]>,
        complete: bool,
        kept: &KeptMap,
        trust: &mut DeviceIndexTrust,
    ) -> Attribution {
        let table = on.map(apps);
        attribute(jobs, g, table.as_ref(), &procs(), complete, kept, trust)
    }

    #[test]
    fn by_process_legacy_and_sluid() {
        let a = job("10_1", 11, 2, &["n1"]);
        let mut b = job("20", 20, 1, &["n1"]);
        b.sluid = Some("sEKNKTV3WPV500".into());
        let r = pass(
            &[&a, &b],
            &gpus(3),
            Some(&[(0, 100), (1, 100), (2, 200)]),
            true,
            &BTreeMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        assert_eq!(r.jobs["10_1"], Attributed::Gpus(vec![0, 1]));
        assert_eq!(r.jobs["20"], Attributed::Gpus(vec![2]));
    }

    #[test]
    fn node_exclusive_and_elimination() {
        let a = job("10", 11, 4, &["n1"]);
        let r = pass(&[&a], &gpus(4), Some(&[]), true, &BTreeMap::new(), &mut DeviceIndexTrust::default());
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1, 2, 3]));
        // The only job, but it holds 2 of 4 GPUs and runs nothing: ambiguous.
        let a2 = job("10", 11, 2, &["n1"]);
        let r = pass(
            &[&a2],
            &gpus(4),
            Some(&[]),
            true,
            &BTreeMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)));
        // Two jobs, 2+2 = 4 visible; job 20 idle gets the two unclaimed GPUs.
        let b = job("20", 20, 2, &["n1"]);
        let r = pass(
            &[&a2, &b],
            &gpus(4),
            Some(&[(1, 100), (3, 100)]),
            true,
            &BTreeMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1, 3]));
        assert_eq!(r.jobs["20"], Attributed::Gpus(vec![0, 2]));
        // Same, but the job list may be incomplete: no elimination.
        let r = pass(
            &[&a2, &b],
            &gpus(4),
            Some(&[(1, 100), (3, 100)]),
            false,
            &BTreeMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        assert!(matches!(r.jobs["20"], Attributed::Ambiguous(_)));
    }

    #[test]
    fn shared_gpu_is_ambiguous_and_kept_attribution_survives_idle() {
        let a = job("10", 11, 1, &["n1"]);
        let mut b = job("20", 20, 1, &["n1"]);
        b.sluid = Some("sEKNKTV3WPV500".into());
        let r = pass(
            &[&a, &b],
            &gpus(2),
            Some(&[(0, 100), (0, 200)]),
            true,
            &BTreeMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)));
        assert!(matches!(r.jobs["20"], Attributed::Ambiguous(_)));
        let kept = kept(&[("10", 1000, &[1])]);
        let r = pass(&[&a], &gpus(2), Some(&[]), false, &kept, &mut DeviceIndexTrust::default());
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1]));
        let r = pass(
            &[&a, &b],
            &gpus(2),
            Some(&[(1, 200)]),
            false,
            &kept,
            &mut DeviceIndexTrust::default(),
        );
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)));
    }

    #[test]
    fn kept_attribution_is_for_one_run_of_the_job() {
        // Job 10 (1 GPU) was on GPU 0; it is requeued (new start time) and now idle with no
        // process: the old GPU is not reused, and with 2 GPUs visible it cannot be placed.
        let mut a = job("10", 11, 1, &["n1"]);
        let k = kept(&[("10", 1000, &[0])]);
        let r = pass(&[&a], &gpus(2), Some(&[]), true, &k, &mut DeviceIndexTrust::default());
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0]), "same run: kept");
        a.start_s = Some(2000);
        let r = pass(&[&a], &gpus(2), Some(&[]), true, &k, &mut DeviceIndexTrust::default());
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
        // No start time at all: nothing kept applies either.
        a.start_s = None;
        let r = pass(&[&a], &gpus(2), Some(&[]), true, &k, &mut DeviceIndexTrust::default());
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
    }

    #[test]
    fn own_process_outside_kept_gpus_rederives() {
        // Same run, kept on GPU 0, but its process now runs on GPU 1: it is placed on GPU 1.
        let a = job("10", 11, 1, &["n1"]);
        let k = kept(&[("10", 1000, &[0])]);
        let r = pass(&[&a], &gpus(2), Some(&[(1, 100)]), true, &k, &mut DeviceIndexTrust::default());
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1]));
        // A 2-GPU job kept on 0,1 with a process now on GPU 2 only: 1 of 2 GPUs placed by
        // process, and the rest cannot be derived (4 GPUs, 1 job): ambiguous, never guessed.
        let b = job("10", 11, 2, &["n1"]);
        let k = kept(&[("10", 1000, &[0, 1])]);
        let r = pass(&[&b], &gpus(4), Some(&[(2, 100)]), true, &k, &mut DeviceIndexTrust::default());
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{:?}", r.jobs);
        // Its process on a kept GPU only: the kept list stands.
        let r = pass(&[&b], &gpus(4), Some(&[(1, 100)]), true, &k, &mut DeviceIndexTrust::default());
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1]));
    }

    // ---- Rule 3: Slurm's device index -------------------------------------------------

    /// `n` GPUs, index i with minor number `minors[i]` (`None`: `[N/A]`).
    fn gpus_with_minors(minors: &[Option<u32>]) -> Vec<GpuReading> {
        minors
            .iter()
            .enumerate()
            .map(|(i, m)| GpuReading {
                index: Some(i as u16),
                uuid: Some(format!("GPU-{i}")),
                minor: *m,
                ..Default::default()
            })
            .collect()
    }

    /// Job `id` (start 1000) kept on `gpus`, placed there by its device index.
    fn kept_by_index(id: &str, gpus: &[u16]) -> KeptMap {
        let mut k = kept(&[(id, 1000, gpus)]);
        k.values_mut().for_each(|k| k.by_device_index = true);
        k
    }

    /// GPUs `(index, uuid)`, nothing else read.
    fn gpus_at(rows: &[(u16, &str)]) -> Vec<GpuReading> {
        rows.iter()
            .map(|(i, u)| GpuReading {
                index: Some(*i),
                uuid: Some(u.to_string()),
                ..Default::default()
            })
            .collect()
    }

    /// The trial's renumbering: GPU-1 falls off the bus and GPUs 2-3 become indices 1-2.
    /// Job 10 was kept on GPUs 0-1 (GPU-0, GPU-1): one of its GPUs is gone, so it is not kept
    /// (kept by index it would sit on GPU-2, job 20's). Job 20, kept on GPU-2 and GPU-3, is
    /// kept on them at their new indices 1-2.
    #[test]
    fn kept_attributions_follow_the_uuid_and_drop_when_one_is_gone() {
        let k = kept(&[("10", 1000, &[0, 1]), ("20", 1000, &[2, 3])]);
        let shifted = gpus_at(&[(0, "GPU-0"), (1, "GPU-2"), (2, "GPU-3")]);
        let (valid, dropped) = revalidate_kept(&k, &shifted);
        assert_eq!(dropped, [("10".to_string(), KeptDropped::GpuGone)]);
        assert_eq!(valid["20"].gpus, [1, 2]);
        assert_eq!(valid["20"].uuids, ["GPU-2", "GPU-3"]);
        // Unchanged enumeration: everything kept as it was.
        let (same, dropped) = revalidate_kept(&k, &gpus(4));
        assert!(dropped.is_empty() && same == k, "{same:?}");
        // Attribution over the shifted read: job 10, busy on GPU-0 only now (its process on
        // GPU-1 names no visible GPU), is not placed on job 20's GPU; job 20 stays on its own.
        let a = job("10", 11, 2, &["n1"]);
        let b = job("20", 20, 2, &["n1"]);
        let busy = apps(&[(0, 100), (1, 100)]);
        let pass = |k: &KeptMap| {
            attribute(
                &[&a, &b],
                &shifted,
                Some(&busy),
                &procs(),
                false,
                k,
                &mut DeviceIndexTrust::default(),
            )
        };
        let r = pass(&valid);
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{r:?}");
        assert_eq!(r.jobs["20"], Attributed::Gpus(vec![1, 2]));
        // The same pass with the stale, index-keyed entries puts job 10 on GPU-2 (index 1).
        let r = pass(&k);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1]), "the bug revalidation prevents");
    }

    proptest::proptest! {
        /// Operator trial 19's guard: `outside_index` holds exactly the jobs with a process on
        /// a GPU whose minor number is not among their Slurm device indices, whatever the
        /// device-index rule's trust (contradicted or not) and whether the read is whole.
        #[test]
        fn outside_index_is_exactly_the_jobs_with_a_process_outside_their_indices(
            n in 2u16..6, offset in 0u32..5,
            idx in proptest::collection::vec(proptest::collection::btree_set(0u16..6, 1..3), 1..4),
            procs in proptest::collection::vec((0usize..4, 0u16..6), 0..6),
            contradicted in proptest::bool::ANY, complete in proptest::bool::ANY,
        ) {
            // GPU i has minor number i + offset (a gap below, as on a node that lost GPU 0).
            let read: Vec<GpuReading> = (0..n)
                .map(|i| GpuReading { index: Some(i), uuid: Some(format!("GPU-{i}")), minor: Some(u32::from(i) + offset), ..Default::default() })
                .collect();
            let jobs: Vec<SlurmJob> = idx
                .iter()
                .enumerate()
                .map(|(k, gs)| {
                    let mut j = job(&format!("{}", 10 + k), 10 + k as u64, gs.len() as u32, &["n1"]);
                    j.gres_idx = vec![Some(gs.iter().map(|g| u32::from(*g) + offset).collect())];
                    j
                })
                .collect();
            let mut cg = BTreeMap::new();
            let mut apps = Vec::new();
            let mut want = BTreeSet::new();
            for (p, (k, g)) in procs.iter().enumerate() {
                let (k, g) = (*k % jobs.len(), *g % n);
                let pid = 100 + p as u32;
                cg.insert(pid, format!("0::/system.slice/slurmstepd.scope/job_{}/step_0/user/task_0\n", 10 + k));
                apps.push(crate::parse::smi::ComputeApp { gpu_uuid: Some(format!("GPU-{g}")), pid: Some(pid), used_memory_mib: Some(10.0), process_name: None });
                if !idx[k].contains(&g) {
                    want.insert(format!("{}", 10 + k));
                }
            }
            let table = AppsTable { columns: vec![], apps, row_errors: vec![] };
            let mut trust = DeviceIndexTrust::default();
            if contradicted {
                trust.contradicted = Some(IndexEvidence { job_id: "x".into(), gpu: 0, minor: 0, idx: vec![], what: String::new() });
            }
            let refs: Vec<&SlurmJob> = jobs.iter().collect();
            let a = attribute(&refs, &read, Some(&table), &FakeProc(cg), complete, &KeptMap::new(), &mut trust);
            proptest::prop_assert_eq!(a.outside_index, want);
        }

        /// Whatever GPUs drop out and however the rest are renumbered, a kept attribution
        /// that survives names, at its new indices, exactly the GPUs (UUIDs) it was kept on,
        /// and one is dropped exactly when one of its GPUs is not in the read.
        #[test]
        fn kept_gpus_are_always_the_same_physical_gpus(
            owner in proptest::collection::vec(0usize..4, 1..8),
            present in proptest::collection::vec(proptest::bool::ANY, 8),
            order in proptest::collection::vec(0u32..1000, 8),
        ) {
            // GPU i (UUID GPU-i, index i at first) belongs to job `owner[i]`.
            let mut k = KeptMap::new();
            for (i, o) in owner.iter().enumerate() {
                let e = k.entry(format!("{o}")).or_insert(Kept { start_s: 1, gpus: vec![], uuids: vec![], by_device_index: false, by_elimination: None, marked: true });
                e.gpus.push(i as u16);
                e.uuids.push(format!("GPU-{i}"));
            }
            // The new read: the GPUs still present, enumerated in another order.
            let mut left: Vec<usize> = (0..owner.len()).filter(|i| present[*i]).collect();
            left.sort_by_key(|i| (order[*i], *i));
            let read: Vec<GpuReading> = left
                .iter()
                .enumerate()
                .map(|(at, i)| GpuReading { index: Some(at as u16), uuid: Some(format!("GPU-{i}")), ..Default::default() })
                .collect();
            let uuid_at: BTreeMap<u16, String> = read.iter().map(|g| (g.index.unwrap(), g.uuid.clone().unwrap())).collect();
            let (valid, dropped) = revalidate_kept(&k, &read);
            for (job, before) in &k {
                let gone = before.uuids.iter().any(|u| !left.iter().any(|i| format!("GPU-{i}") == *u));
                proptest::prop_assert_eq!(gone, dropped.iter().any(|(j, _)| j == job));
                if let Some(now) = valid.get(job) {
                    let mut named: Vec<String> = now.gpus.iter().map(|g| uuid_at[g].clone()).collect();
                    proptest::prop_assert_eq!(&named, &now.uuids);
                    named.sort();
                    let mut was = before.uuids.clone();
                    was.sort();
                    proptest::prop_assert_eq!(named, was);
                }
            }
            // The engine's slot of each GPU does not move with its index.
            let mut slots = crate::gpu_slots::GpuSlots::default();
            slots.assign(&gpus(owner.len() as u16));
            let first = slots.clone();
            slots.assign(&read);
            proptest::prop_assert_eq!(slots, first);
        }
    }

    /// An entry from an older state file (indices only), one whose UUIDs do not match its
    /// indices in number, and one whose UUID shows twice in a read are never trusted.
    #[test]
    fn kept_attributions_without_matching_uuids_are_re_derived() {
        let mut k = kept(&[("10", 1000, &[0, 1]), ("20", 1000, &[2]), ("30", 1000, &[3])]);
        k.get_mut("10").unwrap().uuids.clear();
        k.get_mut("20").unwrap().uuids.push("GPU-9".into());
        let mut g = gpus(4);
        g.push(GpuReading {
            index: Some(4),
            uuid: Some("GPU-3".into()),
            ..Default::default()
        });
        let (valid, dropped) = revalidate_kept(&k, &g);
        assert!(valid.is_empty(), "{valid:?}");
        assert_eq!(
            dropped,
            [
                ("10".to_string(), KeptDropped::NoUuids),
                ("20".to_string(), KeptDropped::NoUuids),
                ("30".to_string(), KeptDropped::GpuGone)
            ]
        );
        // An older file's entry reads with no UUIDs at all.
        let old: Kept = serde_json::from_str(r#"{"start_s": 5, "gpus": [0, 1]}"#).unwrap();
        assert!(old.uuids.is_empty());
    }

    /// Rule 3 across a renumbering: GPU 0 (minor 0) falls off the bus, GPUs 1-4 become
    /// indices 0-3 with their minor numbers 1-4. Job 10 (IDX 2-3), kept on GPUs 2-3, is found
    /// there again by UUID, at indices 1-2, where its index list maps: no contradiction (kept
    /// by stale indices, [2, 3] against the mapped [1, 2], it would switch the rule off). Job
    /// 30 (IDX 1) is not placed: with a GPU missing the read is not whole, and the minor
    /// numbers seen are not the node's (minors {0,1} were pinned together; Slurm's index 1
    /// may be the missing device's).
    #[test]
    fn device_index_across_a_renumbering() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3), Some(4)]);
        let a = idx_job("10", 11, 2, &[2, 3]);
        let b = idx_job("30", 30, 1, &[1]);
        let mut trust = DeviceIndexTrust::default();
        let r = pass(&[&a], &g, Some(&[(2, 100), (3, 100)]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Trusted);
        assert_eq!(trust.gpus.len(), 5);
        trust.pinned = vec![vec![0, 1], vec![2, 3]];
        let k = kept(&[("10", 1000, &[2, 3])]);
        let mut shifted = gpus_with_minors(&[Some(1), Some(2), Some(3), Some(4)]);
        for (i, g) in shifted.iter_mut().enumerate() {
            g.uuid = Some(format!("GPU-{}", i + 1));
        }
        let (valid, dropped) = revalidate_kept(&k, &shifted);
        assert!(dropped.is_empty());
        let mut t = trust.clone();
        let r = pass(&[&a, &b], &shifted, Some(&[]), false, &valid, &mut t);
        assert_eq!(r.device_index.state, DeviceIndexState::Trusted, "{r:?}");
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![1, 2]));
        assert!(ambiguous_why(&r, "30").contains("not whole"), "{r:?}");
        let r = pass(&[&a, &b], &shifted, Some(&[]), false, &k, &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted, "stale indices: {r:?}");
    }

    /// A single-node job with Slurm device indices `idx` on node n1.
    fn idx_job(id: &str, raw: u64, gpus: u32, idx: &[u32]) -> SlurmJob {
        let mut j = job(id, raw, gpus, &["n1"]);
        j.gres_idx = vec![Some(idx.to_vec())];
        j
    }

    fn ambiguous_why(r: &Attribution, id: &str) -> String {
        match &r.jobs[id] {
            Attributed::Ambiguous(why) => why.clone(),
            other => panic!("{id}: {other:?}"),
        }
    }

    /// The case the rule exists for: 4 GPUs, job 10 busy on two (its processes), job 30 idle
    /// on one with no process, one GPU free. Counts 2 + 1 do not add up to 4, so elimination
    /// cannot place job 30; its device index can, once jobs' processes have confirmed the
    /// mapping and pinned its GPU down.
    #[test]
    fn idle_job_on_a_shared_node_is_placed_by_device_index() {
        let a = idx_job("10", 11, 2, &[0, 1]);
        let b = idx_job("30", 30, 1, &[2]);
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let busy = apps(&[(0, 100), (1, 100)]);
        let mut trust = DeviceIndexTrust::default();
        let r = attribute(&[&a, &b], &g, Some(&busy), &procs(), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1]));
        assert_eq!(r.device_index.state, DeviceIndexState::Trusted);
        assert!(r.device_index.newly_confirmed && r.device_index.contradictions.is_empty());
        assert_eq!(trust.confirmed.as_ref().map(|c| c.job_id.as_str()), Some("10"));
        assert_eq!(trust.gpus.len(), 4, "the GPU set is recorded on a whole read");
        // Job 10 pins {0,1}, so {2,3} too; but index 2 alone could still be minor 3's device.
        assert_eq!(trust.pinned, [vec![0, 1]]);
        assert!(ambiguous_why(&r, "30").contains("not yet pinned"), "{r:?}");
        // A job seen on GPU 3 alone (minor 3, its list IDX:3) pins {3}, so {2} too.
        let mut c = idx_job("20", 20, 1, &[3]);
        c.sluid = Some("sEKNKTV3WPV500".into());
        let r = pass(
            &[&a, &b, &c],
            &g,
            Some(&[(0, 100), (1, 100), (3, 200)]),
            true,
            &BTreeMap::new(),
            &mut trust,
        );
        assert_eq!(r.device_index.newly_pinned, 1);
        assert_eq!(r.jobs["30"], Attributed::Gpus(vec![2]));
        assert_eq!(r.device_index.placed, ["30"]);
        // Without device indices for job 30 the old rules cannot place it.
        let mut b2 = b.clone();
        b2.gres_idx.clear();
        let r = attribute(&[&a, &b2], &g, Some(&busy), &procs(), true, &BTreeMap::new(), &mut trust);
        assert!(ambiguous_why(&r, "30").contains("no device indices"), "{r:?}");
        // Once confirmed and pinned, that holds for later cycles with no process at all.
        let r = pass(&[&a, &b], &g, Some(&[]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.jobs["30"], Attributed::Gpus(vec![2]));
        assert!(!r.device_index.newly_confirmed);
    }

    /// review21: a rule confirmed and pinned before MIG is in use keeps placing whole-GPU jobs
    /// by device index once a MIG job shares the node, while no contradiction is looked for.
    #[test]
    fn review21_mig_on_the_node_hides_a_contradiction_while_the_rule_still_places() {
        let a = idx_job("10", 11, 2, &[0, 1]);
        let b = idx_job("30", 30, 1, &[2]);
        let mut c = idx_job("20", 20, 1, &[3]);
        c.sluid = Some("sEKNKTV3WPV500".into());
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let mut trust = DeviceIndexTrust::default();
        let r = pass(
            &[&a, &b, &c],
            &g,
            Some(&[(0, 100), (1, 100), (3, 200)]),
            true,
            &BTreeMap::new(),
            &mut trust,
        );
        assert_eq!(r.jobs["30"], Attributed::Gpus(vec![2]), "control");
        // Control: without MIG, job 10's process on GPU 3 (outside its indices 0-1) contradicts.
        let mut t2 = trust.clone();
        let r = pass(&[&a, &b], &g, Some(&[(3, 100)]), true, &BTreeMap::new(), &mut t2);
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted, "control: {r:?}");
        // Now a MIG job (no process) is also on the node: same read.
        let mut m = idx_job("40", 40, 1, &[3]);
        m.mig = true;
        let r = pass(&[&a, &b, &m], &g, Some(&[(3, 100)]), true, &BTreeMap::new(), &mut trust);
        eprintln!(
            "state {:?} contradictions {:?} job30 {:?}",
            r.device_index.state,
            r.device_index.contradictions,
            r.jobs.get("30")
        );
        assert!(
            r.device_index.state != DeviceIndexState::Trusted || !matches!(r.jobs["30"], Attributed::Gpus(_)),
            "job 10's process outside its indices went unseen, and job 30 was still placed by index: {:?} {:?}",
            r.device_index.state,
            r.jobs["30"]
        );
    }

    /// A `gres.conf` whose device list is out of minor order: Slurm's index 2 is the device of
    /// minor 3 and index 3 that of minor 2. Job 10 (indices 0–1, on minors 0–1) confirms the
    /// mapping, and job 40, busy on index 3 (minor 2's GPU, nvidia-smi GPU 2) with its process
    /// hidden (another PID namespace), shows nothing. Taking indices for minor numbers would
    /// put idle job 30 (index 2, really minor 3's GPU) on GPU 2, where job 40 works: the
    /// atoms keep {2,3} whole, so job 30 is not placed.
    #[test]
    fn an_index_not_pinned_down_is_never_used() {
        let a = idx_job("10", 11, 2, &[0, 1]);
        let b = idx_job("30", 30, 1, &[2]);
        let hidden = idx_job("40", 40, 1, &[3]);
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let mut trust = DeviceIndexTrust::default();
        for _ in 0..3 {
            let r = pass(
                &[&a, &b, &hidden],
                &g,
                Some(&[(0, 100), (1, 100)]),
                true,
                &BTreeMap::new(),
                &mut trust,
            );
            assert_eq!(r.device_index.state, DeviceIndexState::Trusted);
            assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)), "{r:?}");
            assert!(r.device_index.placed.is_empty());
        }
        assert!(union_of_atoms(&[2, 3], &trust.pinned, &[0, 1, 2, 3]));
        assert!(!union_of_atoms(&[2], &trust.pinned, &[0, 1, 2, 3]));
        assert!(union_of_atoms(&[0, 1, 2, 3], &[], &[0, 1, 2, 3]), "the whole node is one atom");
    }

    /// nvidia-smi index and minor number differ (the jobstats #34 case): Slurm's IDX is the
    /// minor number, so job 30's `IDX:0` is GPU 3, not GPU 0 (which job 10 is busy on).
    #[test]
    fn device_index_maps_through_the_minor_number_not_the_index() {
        let g = gpus_with_minors(&[Some(3), Some(2), Some(1), Some(0)]);
        let a = idx_job("10", 11, 2, &[2, 3]);
        let b = idx_job("30", 30, 1, &[0]);
        // Indices 2-3 were seen held whole, and so was index 1 (say by an earlier job).
        let mut trust = DeviceIndexTrust {
            pinned: vec![vec![1]],
            ..DeviceIndexTrust::default()
        };
        let r = pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.jobs["10"], Attributed::Gpus(vec![0, 1]));
        assert_eq!(r.jobs["30"], Attributed::Gpus(vec![3]), "{r:?}");
        assert_eq!(r.device_index.state, DeviceIndexState::Trusted);
        // Read as nvidia-smi indices, job 10's IDX 2,3 would not hold its processes on GPUs
        // 0,1: the same data with index == minor assumed is a contradiction.
        let same_as_index = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let mut trust = DeviceIndexTrust::default();
        let r = pass(
            &[&a, &b],
            &same_as_index,
            Some(&[(0, 100), (1, 100)]),
            true,
            &BTreeMap::new(),
            &mut trust,
        );
        assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)));
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted);
    }

    /// No process has confirmed the mapping yet: the job stays ambiguous, and says why.
    #[test]
    fn untrusted_mapping_places_nothing() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        // Job 10 runs processes but squeue gave it no device indices: nothing to check.
        let mut a = idx_job("10", 11, 2, &[0, 1]);
        a.gres_idx.clear();
        let b = idx_job("30", 30, 1, &[2]);
        let mut trust = DeviceIndexTrust::default();
        let r = pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Untrusted);
        assert!(ambiguous_why(&r, "30").contains("not yet confirmed"), "{r:?}");
        assert!(r.device_index.placed.is_empty() && trust.confirmed.is_none());
        // Nobody runs anything: still untrusted.
        let b_only = pass(&[&b], &g, Some(&[]), true, &BTreeMap::new(), &mut trust);
        assert!(matches!(b_only.jobs["30"], Attributed::Ambiguous(_)));
        assert!(trust.confirmed.is_none());
        // The list not whole this cycle (MIG slices in use, say): the rule is off whatever its
        // state, and the reason says so, not that confirmation is awaited.
        let r = pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), false, &BTreeMap::new(), &mut trust);
        let why = ambiguous_why(&r, "30");
        assert!(why.contains("not used this cycle") && !why.contains("not yet confirmed"), "{why}");
    }

    /// A job's process on a GPU whose minor number is outside its Slurm indices switches the
    /// rule off, and the record says so across a save and load (the state file), for later
    /// passes whatever they show, until the node's GPU set changes.
    #[test]
    fn contradiction_switches_the_rule_off_and_is_kept() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let a = idx_job("10", 11, 2, &[0, 1]);
        let b = idx_job("30", 30, 1, &[2]);
        let mut trust = DeviceIndexTrust::default();
        // Confirmed first.
        pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
        assert!(trust.confirmed.is_some());
        // Then job 10's process shows on GPU 3 (minor 3), outside IDX 0-1.
        let r = pass(&[&a, &b], &g, Some(&[(0, 100), (3, 100)]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted);
        let c = &r.device_index.contradictions;
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].job_id.as_str(), c[0].gpu, c[0].minor, c[0].idx.as_slice()),
            ("10", 3, 3, &[0, 1][..])
        );
        assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)), "{r:?}");
        // Persisted: a fresh load of the record still says contradicted, and consistent
        // processes later do not lift it.
        let mut loaded: DeviceIndexTrust = serde_json::from_str(&serde_json::to_string(&trust).unwrap()).unwrap();
        assert_eq!(loaded, trust);
        let r = pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut loaded);
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted);
        assert!(ambiguous_why(&r, "30").contains("contradicted"), "{r:?}");
        assert!(r.device_index.contradictions.is_empty(), "not checked again once off");
        // A placement kept from the device index is dropped as well.
        let k = kept_by_index("30", &[2]);
        let r = pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &k, &mut loaded);
        assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)), "{r:?}");
        // An incomplete read never resets it; a whole read of another GPU set (GPU 3
        // replaced) does, and the rule waits for a new confirmation.
        let mut other = g.clone();
        other[3].uuid = Some("GPU-new".into());
        pass(&[&a, &b], &other, Some(&[]), false, &BTreeMap::new(), &mut loaded);
        assert!(loaded.contradicted.is_some());
        let r = pass(&[&a, &b], &other, Some(&[]), true, &BTreeMap::new(), &mut loaded);
        assert_eq!(r.device_index.state, DeviceIndexState::Untrusted);
        assert!(r.device_index.reset_from.is_some() && loaded.contradicted.is_none() && loaded.confirmed.is_none());
    }

    /// A placement kept from the device index is not used in the pass that finds the node's
    /// GPU set changed: the rule is untrusted again, and the job is derived afresh.
    #[test]
    fn a_changed_gpu_set_drops_placements_kept_from_the_device_index() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let b = idx_job("30", 30, 1, &[2]);
        let mut trust = DeviceIndexTrust::default();
        let a = idx_job("10", 11, 2, &[0, 1]);
        pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
        let k = kept_by_index("30", &[2]);
        let r = pass(&[&b], &g, Some(&[]), false, &k, &mut trust);
        assert_eq!(r.jobs["30"], Attributed::Gpus(vec![2]), "same GPUs: kept");
        assert_eq!(r.device_index.derived.iter().collect::<Vec<_>>(), ["30"]);
        // GPU 2 and 3 swap minor numbers (a reboot renumbered them).
        let swapped = gpus_with_minors(&[Some(0), Some(1), Some(3), Some(2)]);
        let r = pass(&[&b], &swapped, Some(&[]), true, &k, &mut trust);
        assert!(r.device_index.reset_from.is_some());
        assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)), "{r:?}");
        assert!(r.device_index.derived.is_empty());
    }

    /// Confirmation and contradiction in the same pass: the contradiction wins.
    #[test]
    fn a_contradiction_in_the_confirming_pass_wins() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let a = idx_job("10", 11, 1, &[0]);
        let mut c = idx_job("20", 20, 1, &[3]);
        c.sluid = Some("sEKNKTV3WPV500".into());
        let b = idx_job("30", 30, 1, &[2]);
        let mut trust = DeviceIndexTrust::default();
        let r = pass(&[&a, &c, &b], &g, Some(&[(0, 100), (1, 200)]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted);
        assert!(trust.confirmed.is_none() && trust.contradicted.as_ref().is_some_and(|x| x.job_id == "20"));
        assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)));
    }

    /// A kept placement whose GPUs differ from what the job's device indices map to is a
    /// contradiction too.
    #[test]
    fn kept_placement_differing_from_the_device_index_contradicts_it() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let a = idx_job("10", 11, 2, &[2, 3]);
        let k = kept(&[("10", 1000, &[0, 1])]);
        let mut trust = DeviceIndexTrust::default();
        let r = pass(&[&a], &g, Some(&[]), true, &k, &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Contradicted, "{r:?}");
        assert!(r.device_index.contradictions[0].what.contains("kept on GPUs [0, 1]"), "{r:?}");
        // Second operator trial: the contradicted placement itself is not used (it may have
        // come from elimination on a list that was not whole), and the job is short again.
        assert!(matches!(r.jobs["10"], Attributed::Ambiguous(_)), "{r:?}");
    }

    /// Second operator trial: `--gpus=4` over two nodes gave 1 GPU on one and 3 on the other
    /// (`gres_detail` `["gpu:1(IDX:0)", "gpu:3(IDX:0-2)"]`); an even split (2 per node) placed
    /// the job on a free GPU by elimination and alerted it as partial. Which count is this
    /// node's is not verified, so the job has no per-node count at all.
    #[test]
    fn an_uneven_split_over_nodes_is_no_per_node_count() {
        let mut j = job("801", 801, 4, &["n1", "n2"]);
        j.gres_counts = vec![Some(1), Some(3)];
        assert_eq!(per_node_gpus(&j), None);
        j.gres_counts = vec![Some(2), None];
        assert_eq!(per_node_gpus(&j), None, "a string not read");
        j.gres_counts = vec![Some(2)];
        assert_eq!(per_node_gpus(&j), None, "one string for two nodes");
        j.gres_counts = vec![Some(2), Some(2)];
        assert_eq!(per_node_gpus(&j), Some(2));
        j.gres_counts = Vec::new();
        assert_eq!(per_node_gpus(&j), Some(2), "no detail: the TRES count split evenly");
        // On this node: job 801 (uneven) and job 802 (1 GPU, process on GPU 1); GPUs 0 and 2
        // free. Elimination places nothing.
        let mut uneven = job("801", 801, 4, &["n1", "n2"]);
        uneven.gres_counts = vec![Some(1), Some(3)];
        let other = job("802", 11, 1, &["n1"]);
        let r = pass(
            &[&uneven, &other],
            &gpus(3),
            Some(&[(1, 100)]),
            true,
            &BTreeMap::new(),
            &mut DeviceIndexTrust::default(),
        );
        assert!(matches!(r.jobs["801"], Attributed::Ambiguous(_)), "{r:?}");
        assert_eq!(r.jobs["802"], Attributed::Gpus(vec![1]));
    }

    /// Another job's process (here one of a job not on this node's list) on a GPU that the
    /// device index names: never placed there.
    #[test]
    fn foreign_process_on_a_device_index_gpu_is_ambiguous() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let a = idx_job("10", 11, 2, &[0, 1]);
        let b = idx_job("30", 30, 1, &[2]);
        let mut trust = DeviceIndexTrust {
            pinned: vec![vec![2]],
            ..DeviceIndexTrust::default()
        };
        // PID 200 is in the cgroup of a job (SLUID) that is not on the list.
        let r = pass(
            &[&a, &b],
            &g,
            Some(&[(0, 100), (1, 100), (2, 200)]),
            true,
            &BTreeMap::new(),
            &mut trust,
        );
        assert_eq!(r.device_index.state, DeviceIndexState::Trusted);
        assert!(ambiguous_why(&r, "30").contains("another job's process"), "{r:?}");
        assert!(r.device_index.placed.is_empty());
    }

    /// Without a known, distinct minor number for every visible GPU the rule is off.
    #[test]
    fn unknown_or_repeated_minor_numbers_switch_the_rule_off() {
        let a = idx_job("10", 11, 2, &[0, 1]);
        let b = idx_job("30", 30, 1, &[2]);
        for minors in [
            vec![Some(0), Some(1), Some(2), None],
            vec![None, None, None, None],
            vec![Some(0), Some(1), Some(2), Some(2)],
        ] {
            let g = gpus_with_minors(&minors);
            let mut trust = DeviceIndexTrust::default();
            let r = pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
            assert_eq!(r.device_index.state, DeviceIndexState::Unavailable, "{minors:?}");
            assert!(ambiguous_why(&r, "30").contains("minor numbers"), "{minors:?}: {r:?}");
            assert_eq!(trust, DeviceIndexTrust::default(), "{minors:?}: nothing learnt");
        }
        // No compute-apps table: the rule cannot tell a foreign process is absent.
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let mut trust = DeviceIndexTrust::default();
        pass(&[&a, &b], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
        let r = pass(&[&a, &b], &g, None, true, &BTreeMap::new(), &mut trust);
        assert_eq!(r.device_index.state, DeviceIndexState::Unavailable);
        assert!(matches!(r.jobs["30"], Attributed::Ambiguous(_)));
    }

    /// Trial 12: a MIG job confirmed the rule (and on a mixed node, MIG and whole-GPU jobs
    /// contradicted it), a read that was not whole confirmed it, and a confirmation made before
    /// any GPU set was recorded survived a GPU added. While MIG is in use nothing is checked;
    /// only a whole read confirms; a confirmation tied to no set is dropped when a set is.
    #[test]
    fn mig_and_reads_that_are_not_whole_neither_confirm_nor_contradict_the_device_index() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let a = idx_job("10", 11, 2, &[0, 1]);
        // A MIG job on the node (its index names a MIG device): its processes prove nothing,
        // and neither do the whole-GPU job's beside it.
        let mut m = idx_job("40", 40, 1, &[3]);
        m.mig = true;
        let mut trust = DeviceIndexTrust::default();
        let r = pass(
            &[&a, &m],
            &g,
            Some(&[(0, 100), (1, 100), (0, 400)]),
            true,
            &BTreeMap::new(),
            &mut trust,
        );
        assert!(trust.confirmed.is_none() && trust.contradicted.is_none(), "{trust:?}");
        assert!(r.device_index.contradictions.is_empty(), "{r:?}");
        // A process on a MIG device (old-style UUID) is MIG in use too.
        let mut mig_apps = apps(&[(0, 100), (1, 100)]);
        mig_apps.apps.push(ComputeApp {
            gpu_uuid: Some("MIG-GPU-2/1/0".into()),
            pid: Some(400),
            used_memory_mib: Some(10.0),
            process_name: None,
        });
        let mut trust = DeviceIndexTrust::default();
        attribute(&[&a], &g, Some(&mig_apps), &procs(), true, &BTreeMap::new(), &mut trust);
        assert!(trust.confirmed.is_none(), "{trust:?}");
        // The same consistent job confirms in a whole read, not in one that is not whole.
        let mut trust = DeviceIndexTrust::default();
        pass(&[&a], &g, Some(&[(0, 100), (1, 100)]), false, &BTreeMap::new(), &mut trust);
        assert!(trust.confirmed.is_none(), "{trust:?}");
        pass(&[&a], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
        assert!(trust.confirmed.is_some(), "{trust:?}");
        // A confirmation with no GPU set recorded is dropped when one is (no job confirms it
        // again in this read: nothing runs).
        let mut trust = DeviceIndexTrust {
            confirmed: Some(IndexEvidence {
                job_id: "301".into(),
                gpu: 0,
                minor: 0,
                idx: vec![0],
                what: "a MIG job".into(),
            }),
            ..DeviceIndexTrust::default()
        };
        pass(&[&a], &g, Some(&[]), true, &BTreeMap::new(), &mut trust);
        assert_eq!(trust.gpus.len(), 4);
        assert!(trust.confirmed.is_none(), "{trust:?}");
    }

    /// Multi-node jobs, and index lists that do not fit the job's count or the node's
    /// minor numbers, are never placed by device index.
    #[test]
    fn device_index_needs_one_node_and_a_fitting_list() {
        let g = gpus_with_minors(&[Some(0), Some(1), Some(2), Some(3)]);
        let a = idx_job("10", 11, 2, &[0, 1]);
        let mut multi = job("30", 30, 2, &["n1", "n2"]);
        multi.gres_idx = vec![Some(vec![2]), Some(vec![0])];
        let short_list = idx_job("31", 31, 2, &[2]);
        let absent = idx_job("32", 32, 1, &[9]);
        // `complete` false: elimination (which would place job 31 by counts) is out of play.
        // The rule is confirmed first, in a whole read (a read that is not whole confirms
        // nothing, trial 12).
        for other in [&multi, &short_list, &absent] {
            let mut trust = DeviceIndexTrust::default();
            pass(&[&a], &g, Some(&[(0, 100), (1, 100)]), true, &BTreeMap::new(), &mut trust);
            assert!(trust.confirmed.is_some());
            let r = pass(&[&a, other], &g, Some(&[(0, 100), (1, 100)]), false, &BTreeMap::new(), &mut trust);
            assert_eq!(r.device_index.state, DeviceIndexState::Trusted);
            assert!(matches!(r.jobs[&other.job_id], Attributed::Ambiguous(_)), "{}: {r:?}", other.job_id);
        }
    }
}
