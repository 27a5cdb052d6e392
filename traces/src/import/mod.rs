//! Importers: convert public traces and operators' own logs into a [`crate::Trace`].
//!
//! Each importer is a pure-ish function of its input files and options that returns the trace
//! and an [`ImportReport`] of what it dropped or could not read. None of them ever turns a
//! missing or unreadable value into 0.

use std::collections::BTreeMap;

/// Counts of what an importer did besides keeping samples, by name (e.g. `missing_util`,
/// `rows_before_start`). Ordered for stable printing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Named counters.
    pub counts: BTreeMap<&'static str, u64>,
    /// Rows skipped in lenient mode.
    pub skipped: Vec<crate::RowProblem>,
    /// Notes the operator should read (assumptions made, e.g. the time zone used).
    pub notes: Vec<String>,
    /// Things the operator must check before trusting the replay (GPUs renumbered in the
    /// source, samples dropped because their GPU could not be identified).
    pub warnings: Vec<String>,
}

impl ImportReport {
    pub(crate) fn bump(&mut self, key: &'static str) {
        *self.counts.entry(key).or_insert(0) += 1;
    }

    /// Adds `n` to `key` (a count of 0 is not recorded).
    pub(crate) fn add(&mut self, key: &'static str, n: u64) {
        if n > 0 {
            *self.counts.entry(key).or_insert(0) += n;
        }
    }

    /// The count for `key` (0 when never bumped).
    pub fn count(&self, key: &str) -> u64 {
        self.counts.get(key).copied().unwrap_or(0)
    }
}

/// The earliest and latest sample times an importer read, each with the input row it came
/// from, to refuse at import time what `sim replay` would refuse later: times further apart
/// than [`crate::format::MAX_SPAN_S`] (366 days), and times so near either end of `i64` that
/// a job's end (last sample plus one step, at most that span) could not be computed.
#[derive(Default)]
pub(crate) struct ImportSpan {
    earliest: Option<(i64, crate::RowProblem)>,
    latest: Option<(i64, crate::RowProblem)>,
}

impl ImportSpan {
    /// Records a sample time read at `at` (a [`crate::RowProblem`] whose `problem` is filled in
    /// when the time is refused).
    pub(crate) fn see(&mut self, t_s: i64, at: impl Fn() -> crate::RowProblem) {
        if self.earliest.as_ref().is_none_or(|e| t_s < e.0) {
            self.earliest = Some((t_s, at()));
        }
        if self.latest.as_ref().is_none_or(|l| t_s > l.0) {
            self.latest = Some((t_s, at()));
        }
    }

    /// Refuses a span above [`crate::format::MAX_SPAN_S`] (naming the row of the latest time
    /// and where the earliest was read) and a time within that span of `i64::MIN`/`i64::MAX`.
    pub(crate) fn check(self) -> Result<(), crate::TraceError> {
        use crate::format::MAX_SPAN_S;
        let (Some((lo, mut lo_at)), Some((hi, mut hi_at))) = (self.earliest, self.latest) else {
            return Ok(());
        };
        if hi.checked_add(MAX_SPAN_S).is_none() {
            hi_at.problem = format!("time {hi} s is too late: it is within {} days of the largest time this tool can hold (i64 seconds), so the job's end cannot be computed", MAX_SPAN_S / 86_400);
            return Err(crate::TraceError::Row(hi_at));
        }
        if lo.checked_sub(MAX_SPAN_S).is_none() {
            lo_at.problem = format!(
                "time {lo} s is too early: it is within {} days of the smallest time this tool can hold (i64 seconds)",
                MAX_SPAN_S / 86_400
            );
            return Err(crate::TraceError::Row(lo_at));
        }
        let span_s = i128::from(hi) - i128::from(lo);
        if span_s <= i128::from(MAX_SPAN_S) {
            return Ok(());
        }
        hi_at.problem = format!(
            "time {hi} s is {} days after the earliest time of the import ({lo} s, read at {}); a trace may span at most {} days",
            span_s / 86_400,
            where_read(&lo_at),
            MAX_SPAN_S / 86_400
        );
        Err(crate::TraceError::Row(hi_at))
    }
}

/// `file line L` (or just `file` for line 0), for naming a second row inside an error.
fn where_read(at: &crate::RowProblem) -> String {
    if at.line == 0 {
        at.file.display().to_string()
    } else {
        format!("{} line {}", at.file.display(), at.line)
    }
}

pub mod alibaba;
pub mod dcgm;
pub mod nvidia_smi;
pub mod philly;

use crate::{GpuRef, JobFacts, Sample, Trace, TraceJob};

/// One reading before it is attributed to a job: the node by name and the GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct RawSample {
    /// Node (host) name.
    pub node: String,
    /// The GPU: the index its UUID had when first seen in the source (see [`identify_gpus`]),
    /// or, for a node whose source has no UUID, the index as the source numbers it (NVML index
    /// / DCGM `gpu` label).
    pub gpu: u16,
    /// The GPU's UUID (nvidia-smi `uuid`, dcgm-exporter `UUID`/`uuid` label), when the source
    /// has one.
    pub uuid: Option<String>,
    /// The reading; its `node` field is set when attributed.
    pub sample: Sample,
}

/// For each node identified by index only: a warning when the number of GPUs sampled at one
/// time falls below the most seen at an earlier time and stays below to the end. That is how
/// a GPU falling off the bus looks in a log without UUIDs, and the GPUs after it were then
/// renumbered (NVML indices are dense), so their later readings are another GPU's: a busy
/// job can be judged on an idle neighbour's readings (operator trial 18). The samples are
/// kept (a row missing at a few times is common and harmless); the warning names the node,
/// the times and the counts, so the operator knows which of the replay's findings to distrust.
fn warn_index_only_shrinks(raw: &[RawSample], with_uuid: &std::collections::BTreeSet<String>, report: &mut ImportReport) {
    use std::collections::BTreeSet;
    let mut per_node: BTreeMap<&str, BTreeMap<i64, BTreeSet<u16>>> = BTreeMap::new();
    for r in raw.iter().filter(|r| !with_uuid.contains(&r.node)) {
        per_node.entry(&r.node).or_default().entry(r.sample.t_s).or_default().insert(r.gpu);
    }
    for (node, times) in per_node {
        // The most GPUs seen so far, and when; the first time with fewer after it.
        let mut most = (0usize, i64::MIN);
        let mut fell: Option<(usize, i64, usize, i64)> = None;
        for (t, gpus) in &times {
            let n = gpus.len();
            if n > most.0 {
                most = (n, *t);
                fell = None;
            } else if n < most.0 && fell.is_none() {
                fell = Some((most.0, most.1, n, *t));
            } else if n == most.0 {
                // Back to the most seen: what fell came back (a row missing for a while).
                fell = None;
            }
        }
        if let Some((was, was_t, now, from_t)) = fell {
            report.warnings.push(format!(
                "{node}: {was} GPUs were sampled at t_s {was_t}, but only {now} from t_s {from_t} to the end of the source; without GPU UUIDs this is how a GPU falling off the bus looks, and the GPUs after it were then renumbered, so from t_s {from_t} their readings may be given to the wrong GPUs and their jobs judged on another GPU's readings (log `uuid` to have each GPU followed)"
            ));
        }
    }
}

/// Which video-engine fields gave a value in one sample: `[encoder, decoder]`
/// (`utilization.encoder`/`.decoder`, `DCGM_FI_DEV_ENC_UTIL`/`DEC_UTIL`).
pub(crate) type CodecPresent = [bool; 2];

/// A codec field that gave a value earlier in a GPU's series (the node and its UUID, else its
/// index) and gives none in a later sample (`[N/A]`, blank, absent) makes that sample's
/// compute reading missing (unknown), not "no video work": the enforcer reads its GPUs so (review 33),
/// and a replay must not judge on what the enforcer would not (operator trial 21: a
/// transcoding GPU whose decoder turned `[N/A]` was judged on its 2 % `utilization.gpu`).
/// `present[i]` belongs to `raw[i]`; samples are taken in time order per GPU, whatever the
/// order of `raw`. Counted as `codec_lost_samples`, with a note naming the GPUs.
pub(crate) fn unknown_after_codec_lost(raw: &mut [RawSample], present: &[CodecPresent], report: &mut ImportReport) {
    use std::collections::BTreeMap;
    debug_assert_eq!(raw.len(), present.len());
    let key = |r: &RawSample| (r.node.clone(), r.uuid.clone().unwrap_or_else(|| format!("index {}", r.gpu)));
    let mut order: Vec<usize> = (0..raw.len().min(present.len())).collect();
    order.sort_by_key(|&i| (key(&raw[i]), raw[i].sample.t_s, i));
    let mut seen: BTreeMap<(String, String), CodecPresent> = BTreeMap::new();
    let mut lost: BTreeMap<(String, String), u64> = BTreeMap::new();
    for i in order {
        let k = key(&raw[i]);
        let was = seen.entry(k.clone()).or_default();
        let gone = (0..2).any(|c| was[c] && !present[i][c]);
        for c in 0..2 {
            was[c] |= present[i][c];
        }
        if gone {
            // Missing: a trace spells unknown as an empty cell (trial 23: a NaN here was written
            // to samples.csv, which `sim replay` then refused). A sample without a compute
            // reading is no evidence, as the enforcer's unknown one.
            raw[i].sample.util_pct = policy::Reading::MISSING;
            *lost.entry(k).or_default() += 1;
        }
    }
    if !lost.is_empty() {
        let n: u64 = lost.values().sum();
        report.add("codec_lost_samples", n);
        let gpus: Vec<String> = lost.iter().map(|((node, gpu), c)| format!("{node} {gpu} ({c})")).collect();
        report.notes.push(format!(
            "{n} samples have no utilization.encoder or .decoder value where the GPU gave one earlier: their compute reading is unknown (video work may be unseen), as the enforcer reads it; GPUs (samples): {}",
            gpus.join(", ")
        ));
    }
}

/// What [`identify_gpus`] learnt about one GPU (one UUID) of a node.
struct UuidGpu {
    /// The index it had when first seen: its GPU number in the trace. `None` when another
    /// UUID already held that index then (which GPU Slurm knows it as is unknown).
    slot: Option<u16>,
    /// The index it had when first seen.
    first_index: u16,
    /// Other indices it was later read at.
    moved_to: std::collections::BTreeSet<u16>,
    /// Its samples read at an index other than `first_index`.
    moved: u64,
    /// Its samples dropped (`slot` is `None`).
    dropped: u64,
    /// Its latest sample time.
    last_t_s: i64,
}

/// What [`identify_gpus`] learnt about one node whose samples carry UUIDs.
struct UuidNode {
    /// Its GPUs by UUID.
    gpus: BTreeMap<String, UuidGpu>,
    /// The indices some UUID holds (had when first seen).
    held: std::collections::BTreeSet<u16>,
    /// Samples without a UUID (dropped).
    without_uuid: u64,
    /// Its latest time of a sample with a UUID.
    last_t_s: i64,
}

/// Epoch seconds as `T (YYYY-MM-DD HH:MM:SS UTC)`, for warnings.
fn when(t_s: i64) -> String {
    match chrono::DateTime::from_timestamp(t_s, 0) {
        Some(d) => format!("{t_s} ({} UTC)", d.format("%Y-%m-%d %H:%M:%S")),
        None => t_s.to_string(),
    }
}

/// At most `max` items joined with `, `, then `and N more`.
fn listed(items: &[String], max: usize) -> String {
    let mut s = items.iter().take(max).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > max {
        s.push_str(&format!(" and {} more", items.len() - max));
    }
    s
}

/// A GPU is its UUID. nvidia-smi's `index` (and dcgm-exporter's `gpu` label) is an enumeration
/// order: when a GPU falls off the bus the GPUs after it are renumbered, each one down, and
/// keep their UUIDs. Slurm's GRES indices, which a `jobs.csv` `alloc` names, were fixed when
/// `slurmd` started and do not move. So, per node whose samples carry UUIDs, every sample's
/// `gpu` becomes the index its UUID had when first seen in `raw`'s order, the source's (an
/// nvidia-smi log's line order, which local-time stamps may not follow across a clock change;
/// dcgm pages by time):
///
/// * a UUID read later at another index is still that GPU (counted `renumbered_samples`);
/// * an index that later shows another UUID is not the earlier GPU: the earlier GPU simply has
///   no samples from then on (a gap: insufficient evidence for its job);
/// * a UUID first seen at an index another UUID already held cannot be placed (which GPU
///   Slurm knows it as is unknown): its samples are dropped
///   (`samples_of_gpus_new_at_a_held_index`);
/// * on such a node a sample without a UUID is dropped (`samples_without_uuid`): its GPU is
///   unknown.
///
/// Each of these gives a warning with counts in `report`. A node none of whose samples has a
/// UUID keeps the source's indices, and a note says its GPUs are identified by index only.
/// The rule assumes the source starts before any renumbering (else the first index seen is
/// already a renumbered one). Mirrors the enforcer's `gpu_slots.rs`, which instead gives a
/// newcomer the lowest free slot, as it also maps the allocations.
pub fn identify_gpus(raw: &mut Vec<RawSample>, report: &mut ImportReport) {
    use std::collections::BTreeSet;
    let with_uuid: BTreeSet<String> = raw.iter().filter(|r| r.uuid.is_some()).map(|r| r.node.clone()).collect();
    let index_only: BTreeSet<&str> = raw.iter().map(|r| r.node.as_str()).filter(|n| !with_uuid.contains(*n)).collect();
    if !index_only.is_empty() {
        report.notes.push(format!(
            "{}: the source has no GPU UUID (nvidia-smi `uuid` field, dcgm-exporter `UUID` label), so GPUs are identified by index only: if a GPU fell off the bus and the GPUs after it were renumbered, their readings were given to the wrong GPUs (log `uuid` to have each GPU followed)",
            listed(&index_only.into_iter().map(str::to_string).collect::<Vec<_>>(), 8)
        ));
    }
    warn_index_only_shrinks(raw, &with_uuid, report);
    if with_uuid.is_empty() {
        return;
    }
    // Per node: GPUs by UUID, which UUID holds each index, samples without a UUID, last time.
    let mut nodes: BTreeMap<String, UuidNode> = BTreeMap::new();
    let mut keep = vec![true; raw.len()];
    for (i, r) in raw.iter_mut().enumerate() {
        if !with_uuid.contains(&r.node) {
            continue;
        }
        let n = nodes.entry(r.node.clone()).or_insert_with(|| UuidNode {
            gpus: BTreeMap::new(),
            held: BTreeSet::new(),
            without_uuid: 0,
            last_t_s: i64::MIN,
        });
        let Some(uuid) = &r.uuid else {
            n.without_uuid += 1;
            keep[i] = false;
            continue;
        };
        n.last_t_s = n.last_t_s.max(r.sample.t_s);
        let g = n.gpus.entry(uuid.clone()).or_insert_with(|| {
            // The index is this GPU's unless another UUID took it first.
            UuidGpu {
                slot: n.held.insert(r.gpu).then_some(r.gpu),
                first_index: r.gpu,
                moved_to: BTreeSet::new(),
                moved: 0,
                dropped: 0,
                last_t_s: r.sample.t_s,
            }
        });
        g.last_t_s = g.last_t_s.max(r.sample.t_s);
        match g.slot {
            None => {
                g.dropped += 1;
                keep[i] = false;
            }
            Some(slot) => {
                if slot != r.gpu {
                    g.moved += 1;
                    g.moved_to.insert(r.gpu);
                }
                r.gpu = slot;
                r.sample.gpu = slot;
            }
        }
    }
    let mut k = keep.into_iter();
    raw.retain(|_| k.next().unwrap_or(false));
    for (
        node,
        UuidNode {
            gpus,
            without_uuid: without,
            last_t_s: last,
            ..
        },
    ) in nodes
    {
        let moved: u64 = gpus.values().map(|g| g.moved).sum();
        let dropped: u64 = gpus.values().map(|g| g.dropped).sum();
        report.add("renumbered_samples", moved);
        report.add("samples_of_gpus_new_at_a_held_index", dropped);
        report.add("samples_without_uuid", without);
        if moved > 0 {
            let movers: Vec<String> = gpus
                .iter()
                .filter(|(_, g)| g.moved > 0)
                .map(|(u, g)| {
                    let to: Vec<String> = g.moved_to.iter().map(u16::to_string).collect();
                    format!(
                        "{u} first at index {}, later at {} ({} samples)",
                        g.first_index,
                        to.join(", "),
                        g.moved
                    )
                })
                .collect();
            let gone: Vec<String> = gpus
                .iter()
                .filter(|(_, g)| g.slot.is_some() && g.last_t_s < last)
                .map(|(u, g)| format!("{u} (GPU {}) after {}", g.first_index, when(g.last_t_s)))
                .collect();
            let gone = if gone.is_empty() {
                String::new()
            } else {
                format!(
                    "; no sample of {} (their jobs have a gap there: insufficient evidence, never idle)",
                    listed(&gone, 8)
                )
            };
            report.warnings.push(format!(
                "{node}: GPUs were renumbered (as NVML does when a GPU falls off the bus): {moved} samples read at another index were kept as the GPU their UUID names, numbered by the index it had when first seen in the source (Slurm's index if the source starts before the renumbering): {}{gone}",
                listed(&movers, 8)
            ));
        }
        if dropped > 0 {
            let newcomers: Vec<String> = gpus
                .iter()
                .filter(|(_, g)| g.slot.is_none())
                .map(|(u, g)| format!("{u} at index {}", g.first_index))
                .collect();
            report.warnings.push(format!(
                "{node}: {dropped} samples dropped of GPU(s) first seen at an index another UUID already held ({}): which Slurm GPU they are is unknown",
                listed(&newcomers, 8)
            ));
        }
        if without > 0 {
            report.warnings.push(format!(
                "{node}: {without} samples without a GPU UUID dropped (other samples of this node have one, so an index alone does not say which GPU read it)"
            ));
        }
    }
}

/// How samples are attributed to jobs.
#[derive(Clone, Debug)]
pub enum Attribution {
    /// One pseudo-job per (node, GPU), named `<node>-gpu<N>`, from its first sample to its
    /// last sample plus one sampling step (the median step of that GPU, at least 1 s).
    PseudoJobPerGpu,
    /// The jobs of a `jobs.csv`: a sample goes to the job whose `alloc` holds its node and
    /// GPU and that runs at its time (`start_s ≤ t_s < end_s`); other samples are dropped and
    /// counted as `unattributed_samples`. Jobs with no GPU on the imported nodes are left out.
    Jobs(Trace),
}

/// Builds a trace from raw samples. Counts `unattributed_samples` in `report`.
pub fn build_trace(raw: Vec<RawSample>, attribution: Attribution, report: &mut ImportReport) -> Trace {
    match attribution {
        Attribution::PseudoJobPerGpu => pseudo_jobs(raw),
        Attribution::Jobs(jobs) => attribute(raw, jobs, report),
    }
}

fn pseudo_jobs(raw: Vec<RawSample>) -> Trace {
    let mut trace = Trace::default();
    let mut by_gpu: BTreeMap<(String, u16), Vec<Sample>> = BTreeMap::new();
    for r in raw {
        by_gpu.entry((r.node, r.gpu)).or_default().push(r.sample);
    }
    for ((node, gpu), mut samples) in by_gpu {
        samples.sort_by_key(|s| s.t_s);
        let id = trace.nodes.intern(&node);
        let first = samples[0].t_s;
        let last = samples[samples.len() - 1].t_s;
        let step = median_step_s(&samples).unwrap_or(1);
        let ji = trace.jobs.len() as u32;
        trace.jobs.push(TraceJob {
            facts: JobFacts {
                job_id: format!("{node}-gpu{gpu}"),
                name: format!("{node} gpu{gpu}"),
                comment: "pseudo-job: one per GPU, no Slurm job attribution".into(),
                start_s: first,
                alloc: vec![GpuRef { node: id, gpu }],
                ..JobFacts::default()
            },
            end_s: last.saturating_add(step),
            time_limit_s: None,
        });
        for mut s in samples {
            s.node = id;
            s.gpu = gpu;
            trace.push_sample(s, ji, None);
        }
    }
    trace.normalize();
    trace
}

/// The median positive step between consecutive samples (sorted by time), seconds; `None`
/// with fewer than two distinct times.
pub fn median_step_s(samples: &[Sample]) -> Option<i64> {
    let mut steps: Vec<i64> = samples.windows(2).map(|w| w[1].t_s - w[0].t_s).filter(|d| *d > 0).collect();
    steps.sort_unstable();
    steps.get(steps.len() / 2).copied()
}

fn attribute(raw: Vec<RawSample>, jobs: Trace, report: &mut ImportReport) -> Trace {
    let mut trace = Trace {
        nodes: jobs.nodes,
        jobs: jobs.jobs,
        ..Trace::default()
    };
    let imported: std::collections::BTreeSet<String> = raw.iter().map(|r| r.node.clone()).collect();
    // Owners per (node, gpu): job indices, to be checked against time.
    let mut owners: std::collections::HashMap<(u32, u16), Vec<u32>> = std::collections::HashMap::new();
    for (ji, j) in trace.jobs.iter().enumerate() {
        for g in &j.facts.alloc {
            owners.entry((g.node.0, g.gpu)).or_default().push(ji as u32);
        }
    }
    let mut used = vec![false; trace.jobs.len()];
    for r in raw {
        let Some(node) = trace.nodes.get(&r.node) else {
            report.bump("unattributed_samples");
            continue;
        };
        let t = r.sample.t_s;
        let owner = owners.get(&(node.0, r.gpu)).and_then(|list| {
            let mut running = list.iter().filter(|&&j| {
                let job = &trace.jobs[j as usize];
                job.facts.start_s <= t && t < job.end_s
            });
            let first = running.next().copied();
            // Two jobs claiming one GPU at one time: attribute to neither.
            if running.next().is_some() {
                None
            } else {
                first
            }
        });
        match owner {
            Some(j) => {
                let mut s = r.sample;
                s.node = node;
                s.gpu = r.gpu;
                used[j as usize] = true;
                trace.push_sample(s, j, None);
            }
            None => report.bump("unattributed_samples"),
        }
    }
    // Keep the jobs that hold a GPU on an imported node; remap sample job indices.
    let keep: Vec<bool> = trace
        .jobs
        .iter()
        .map(|j| j.facts.alloc.iter().any(|g| imported.contains(trace.nodes.name(g.node))))
        .collect();
    let mut new_index = vec![u32::MAX; trace.jobs.len()];
    let mut next = 0u32;
    for (i, k) in keep.iter().enumerate() {
        if *k {
            new_index[i] = next;
            next += 1;
        } else {
            report.bump("jobs_not_on_imported_nodes");
        }
    }
    let mut i = 0;
    trace.jobs.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    for j in trace.sample_job.iter_mut() {
        *j = new_index[*j as usize];
    }
    let _ = used;
    trace.normalize();
    trace
}

/// The time zone local timestamps are read in (`--tz`): the importing machine's zone
/// (default), an IANA name such as `Europe/Berlin`, `UTC`, or a fixed offset like `+02:00`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Zone {
    /// The zone of the machine doing the import (`TZ`, else `/etc/localtime`).
    Local,
    /// An IANA zone.
    Named(chrono_tz::Tz),
    /// A fixed offset from UTC.
    Fixed(chrono::FixedOffset),
}

/// As the user would type it for `--tz`: `local`, the IANA name, or the offset (`+02:00`).
impl std::fmt::Display for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Zone::Local => f.write_str("local (the importing machine's zone)"),
            Zone::Named(tz) => f.write_str(tz.name()),
            Zone::Fixed(o) => write!(f, "{o}"),
        }
    }
}

impl Zone {
    /// The zone's offset from UTC at the instant `t_s` (epoch seconds), as `+02:00`; `None`
    /// when `t_s` is out of chrono's range.
    pub fn offset_at(&self, t_s: i64) -> Option<String> {
        use chrono::{Offset, TimeZone};
        let utc = chrono::DateTime::from_timestamp(t_s, 0)?.naive_utc();
        let o = match self {
            Zone::Local => chrono::Local.offset_from_utc_datetime(&utc).fix(),
            Zone::Named(tz) => tz.offset_from_utc_datetime(&utc).fix(),
            Zone::Fixed(o) => *o,
        };
        Some(o.to_string())
    }

    /// Parses a `--tz` value: `local`, an IANA name, `UTC`, or `±HH:MM`.
    pub fn parse(text: &str) -> Result<Zone, crate::TraceError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        if let Ok(tz) = t.parse::<chrono_tz::Tz>() {
            return Ok(Zone::Named(tz));
        }
        if let Ok(dt) = chrono::DateTime::parse_from_str(&format!("2000-01-01 00:00:00 {t}"), "%Y-%m-%d %H:%M:%S %:z") {
            return Ok(Zone::Fixed(*dt.offset()));
        }
        Err(crate::TraceError::Option {
            option: "--tz".into(),
            problem: format!("{t:?} is not `local`, an IANA zone name (e.g. Europe/Berlin) or an offset like +02:00"),
        })
    }

    /// Epoch seconds of a local wall-clock time. An ambiguous time (the repeated hour when
    /// clocks go back) takes the earlier instant and sets the flag; a time that does not
    /// exist (skipped when clocks go forward) is `None`.
    pub fn to_epoch_s(self, local: chrono::NaiveDateTime) -> Option<(i64, bool)> {
        use chrono::{LocalResult, TimeZone};
        fn pick<T: TimeZone>(r: LocalResult<chrono::DateTime<T>>) -> Option<(i64, bool)> {
            match r {
                LocalResult::Single(t) => Some((t.timestamp(), false)),
                LocalResult::Ambiguous(a, b) => Some((a.timestamp().min(b.timestamp()), true)),
                LocalResult::None => None,
            }
        }
        match self {
            Zone::Local => pick(chrono::Local.from_local_datetime(&local)),
            Zone::Named(tz) => pick(tz.from_local_datetime(&local)),
            Zone::Fixed(o) => pick(o.from_local_datetime(&local)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index-only note names at most 8 nodes, then how many more.
    #[test]
    fn the_index_only_note_lists_few_nodes() {
        let mut raw: Vec<RawSample> = (0..10)
            .map(|n| RawSample {
                node: format!("n{n:02}"),
                gpu: 0,
                uuid: None,
                sample: Sample::default(),
            })
            .collect();
        let mut r = ImportReport::default();
        identify_gpus(&mut raw, &mut r);
        assert_eq!(raw.len(), 10);
        assert_eq!(r.notes.len(), 1);
        assert!(
            r.notes[0].starts_with("n00, n01, n02, n03, n04, n05, n06, n07 and 2 more: the source has no GPU UUID"),
            "{}",
            r.notes[0]
        );
    }

    #[test]
    fn zones_parse_and_convert_with_dst() {
        let t = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
        let utc = Zone::parse("UTC").unwrap();
        assert_eq!(utc.to_epoch_s(t("1970-01-01 00:01:00")), Some((60, false)));
        let fixed = Zone::parse("+02:00").unwrap();
        assert_eq!(fixed.to_epoch_s(t("1970-01-01 02:00:00")), Some((0, false)));
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        // 2026-03-29 02:30 does not exist in Berlin; 2026-10-25 02:30 happens twice.
        assert_eq!(berlin.to_epoch_s(t("2026-03-29 02:30:00")), None);
        let (e, amb) = berlin.to_epoch_s(t("2026-10-25 02:30:00")).unwrap();
        assert!(amb);
        assert_eq!(e, 1_792_888_200); // 00:30 UTC, the earlier of the two
        assert!(Zone::parse("Mars/Olympus").is_err());
        assert_eq!(Zone::parse("local").unwrap(), Zone::Local);
    }
}
