//! Converts a generated [`World`] into a [`traces::Trace`], truth included, so that
//! `sim generate` can write it and replay can be checked against the in-memory simulation.

use crate::world::{World, TICK_S};
use traces::{Trace, TraceJob};

/// The world as a trace: jobs in (`start_s`, `job_id`) order, samples sorted by (`t_s`, job
/// index, allocation slot), each with its job index and ground truth.
///
/// GPU-ticks without a sample (collector outages) have no row, so their truth is not in the
/// trace. A job cancelled by nothing runs to its `end`; `time_limit_s` is its time limit.
pub fn to_trace(world: &World) -> Trace {
    let jobs: Vec<TraceJob> = world
        .jobs
        .iter()
        .map(|j| TraceJob {
            facts: j.facts.clone(),
            end_s: j.end.min(world.horizon) as i64 * TICK_S,
            time_limit_s: Some(j.time_limit as i64 * TICK_S),
        })
        .collect();
    let mut samples = Vec::with_capacity(world.samples.len());
    let mut sample_job = Vec::with_capacity(world.samples.len());
    let mut truth = Vec::with_capacity(world.samples.len());
    for t in 0..world.horizon {
        let t_s = t as i64 * TICK_S;
        for c in world.samples_at(t) {
            let job = &world.jobs[c.job as usize];
            let slot = job
                .facts
                .alloc
                .iter()
                .position(|g| g.node.0 == c.node as u32 && g.gpu == c.gpu as u16)
                .unwrap_or(0);
            samples.push(world.expand(c, t_s));
            sample_job.push(c.job);
            truth.push(Some(job.truth_at(t, slot)));
        }
    }
    Trace {
        nodes: world.nodes.clone(),
        jobs,
        samples,
        sample_job,
        truth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate;
    use crate::workload::Workload;

    #[test]
    fn trace_keeps_every_sample_in_order_with_truth() {
        let world = generate(&Workload::builtin_default(), 5, 0.25);
        let tr = to_trace(&world);
        assert_eq!(tr.samples.len(), world.samples.len());
        assert_eq!(tr.truth.len(), tr.samples.len());
        for (s, j) in tr.samples.windows(2).zip(tr.sample_job.windows(2)) {
            assert!((s[0].t_s, j[0]) <= (s[1].t_s, j[1]));
        }
        for p in tr.jobs.windows(2) {
            assert!(
                (p[0].facts.start_s, p[0].facts.job_id.len(), &p[0].facts.job_id)
                    <= (p[1].facts.start_s, p[1].facts.job_id.len(), &p[1].facts.job_id)
            );
        }
        assert!(tr.truth.iter().all(|t| t.is_some()));
        assert!(tr.truth.contains(&Some(traces::Truth::Wasted)));
    }
}
