//! Importer for the Alibaba GenAI serving excerpt (`alibaba_gentd26_pod_gpu_excerpt.csv`,
//! columns `t_rel_s,pod,gpu_duty_cycle_pct,gpu_mem_used_bytes`, a 57 s step).
//!
//! * Each pod becomes one single-GPU job: job id, name and node are the pod name, GPU 0.
//!   The job runs from its first sample to its last sample plus one step (the pod's median
//!   step).
//! * `gpu_duty_cycle_pct` becomes `util_pct`; `gpu_mem_used_bytes` becomes `mem_used_mib`
//!   (bytes / 1,048,576). An empty cell is missing.
//! * The trace has **no power, no process count and no memory total**, and the publisher
//!   **scaled its values for anonymisation**: those fields stay missing, and absolute values
//!   are not to be trusted.
//! * `t_rel_s` is relative (the publisher shifted timestamps); `epoch_s` is added to it.
//! * Partition `serving`, QOS `serving`, comment names the source.

use super::ImportReport;
use crate::error::{RowLog, RowProblem, TraceError};
use crate::records::{fixed_csv, problem_at};
use crate::{GpuRef, JobFacts, Sample, Trace, TraceJob};
use std::collections::BTreeMap;
use std::path::Path;

/// Imports the Alibaba GenAI pod excerpt. `epoch_s` is added to `t_rel_s`. Errors name file,
/// line and column; `lenient` skips bad rows. A time that overflows (`--epoch-s` plus
/// `t_rel_s`) or times spanning more than [`crate::format::MAX_SPAN_S`] are errors naming the
/// row. Counters: `missing_util`, `missing_mem`.
pub fn import(csv_path: &Path, epoch_s: i64, lenient: bool) -> Result<(Trace, ImportReport), TraceError> {
    let mut report = ImportReport::default();
    let mut log = RowLog::new(lenient);
    let want = ["t_rel_s", "pod", "gpu_duty_cycle_pct", "gpu_mem_used_bytes"];
    let names: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    let mut rows = Vec::new();
    let mut span = super::ImportSpan::default();
    fixed_csv(csv_path, &want, &mut log, |rec, line| {
        let problem = |col: usize, what: String| problem_at(csv_path, &names, line, col, what);
        let num = |col: usize| -> Result<Option<f64>, RowProblem> {
            let t = rec[col].trim();
            if t.is_empty() {
                return Ok(None);
            }
            match t.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(problem(col, format!("{t:?} is not a number (empty means missing)"))),
            }
        };
        let t: i64 = rec[0]
            .trim()
            .parse()
            .map_err(|_| problem(0, format!("{:?} is not integer seconds", &rec[0])))?;
        let pod = rec[1].trim();
        if let Some(why) = crate::alloc::node_name_problem(pod) {
            return Err(problem(1, format!("bad pod name {pod:?}: {why}")));
        }
        let t_s = epoch_s
            .checked_add(t)
            .ok_or_else(|| problem(0, format!("--epoch-s {epoch_s} plus t_rel_s {t} does not fit in i64 seconds")))?;
        span.see(t_s, || problem(0, String::new()));
        rows.push((t_s, pod.to_string(), num(2)?, num(3)?));
        Ok(())
    })?;
    span.check()?;
    let mut pods: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    for (t, pod, util, mem_bytes) in rows {
        if util.is_none() {
            report.bump("missing_util");
        }
        if mem_bytes.is_none() {
            report.bump("missing_mem");
        }
        pods.entry(pod).or_default().push(Sample {
            t_s: t,
            util_pct: util.into(),
            mem_used_mib: mem_bytes.map(|b| b / 1_048_576.0).into(),
            ..Sample::default()
        });
    }
    let mut trace = Trace::default();
    for (pod, mut samples) in pods {
        samples.sort_by_key(|s| s.t_s);
        let node = trace.nodes.intern(&pod);
        let step = super::median_step_s(&samples).unwrap_or(57);
        let ji = trace.jobs.len() as u32;
        trace.jobs.push(TraceJob {
            facts: JobFacts {
                job_id: pod.clone(),
                user: String::new(),
                account: String::new(),
                partition: "serving".into(),
                qos: "serving".into(),
                name: pod.clone(),
                comment: "alibaba GenAI serving pod; values scaled for anonymisation".into(),
                start_s: samples[0].t_s,
                alloc: vec![GpuRef { node, gpu: 0 }],
            },
            end_s: samples[samples.len() - 1].t_s + step,
            time_limit_s: None,
        });
        for mut s in samples {
            s.node = node;
            trace.push_sample(s, ji, None);
        }
    }
    report.skipped = log.skipped;
    report
        .notes
        .push("no power, no process count, no memory total; values scaled by the publisher for anonymisation".into());
    trace.normalize();
    Ok((trace, report))
}
