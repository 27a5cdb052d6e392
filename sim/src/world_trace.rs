//! A generated [`World`] as a [`traces::Trace`]: what `sim generate` writes and what the
//! replay-equals-simulation test replays.
//!
//! Every job keeps its facts; its `end_s` is clipped to the simulated horizon (the world has no
//! samples beyond it), and `time_limit_s` is its time limit. Every sample keeps its values,
//! `memory.total` and `power.limit` are the cluster's, and `truth` is the job's ground truth for
//! that GPU at that tick ([`crate::world::SimJob::truth_at`]).

use crate::world::{World, TICK_S};
use traces::{Trace, TraceJob};

/// Converts a world to a trace. The trace's job order is the world's when job ids sort as the
/// world numbers them; [`Trace::normalize`] restores the trace invariants either way.
pub fn world_to_trace(world: &World) -> Trace {
    let mut trace = Trace {
        nodes: world.nodes.clone(),
        ..Trace::default()
    };
    for j in &world.jobs {
        trace.jobs.push(TraceJob {
            facts: j.facts.clone(),
            end_s: j.end.min(world.horizon) as i64 * TICK_S,
            time_limit_s: Some(j.time_limit as i64 * TICK_S),
        });
    }
    trace.samples.reserve(world.samples.len());
    for tick in 0..world.horizon {
        let t_s = tick as i64 * TICK_S;
        for c in world.samples_at(tick) {
            let job = &world.jobs[c.job as usize];
            let s = world.expand(c, t_s);
            let slot = job.facts.alloc.iter().position(|g| g.node == s.node && g.gpu == s.gpu);
            trace.samples.push(s);
            trace.sample_job.push(c.job);
            trace.truth.push(slot.map(|k| job.truth_at(tick, k)));
        }
    }
    trace.normalize();
    trace
}
