//! `sim sweep`: every (configuration × workload × seed) run, plus the baselines, in parallel
//! with rayon; each (workload, seed) world is generated once and shared read-only.
//!
//! Output order never depends on the thread count: rows are sorted by (policy, config id,
//! workload, seed) before they are written.

use crate::baseline::Baseline;
use crate::drive::{self, EngineJudge};
use crate::generate::generate;
use crate::grid::GridConfig;
use crate::score::{Row, Tally};
use crate::workload::Workload;
use crate::world::World;
use rayon::prelude::*;
use std::path::Path;

/// What to sweep.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// The workloads (each generated once per seed).
    pub workloads: Vec<Workload>,
    /// The seeds; at least one.
    pub seeds: Vec<u64>,
    /// Simulated span per world, days.
    pub days: f64,
    /// Policy configurations; at least one.
    pub configs: Vec<GridConfig>,
    /// Run the baselines too.
    pub baselines: bool,
    /// `(i, n)`: run only work items whose index is `i` mod `n`.
    pub shard: Option<(usize, usize)>,
}

/// A sweep that cannot start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SweepError {
    /// No seeds.
    #[error("the seed count is 0: a sweep needs at least one seed (--seeds N or --seed-list a,b)")]
    NoSeeds,
    /// No configurations.
    #[error("the grid has no configurations")]
    NoConfigs,
    /// No workloads.
    #[error("no workloads")]
    NoWorkloads,
    /// Bad span.
    #[error("--days {0}: must be above 0 and at most 366")]
    Days(String),
    /// A generated world holds no job, so every score would be an empty 0 ([`no_jobs`]'s
    /// message: workload, seed, days, and the span that gives it jobs).
    #[error("{0}")]
    NoJobs(String),
    /// The worlds would not fit the memory budget ([`crate::budget::check_memory`]'s message).
    #[error("{0}")]
    Memory(String),
    /// Bad shard.
    #[error("--shard {0}/{1}: needs 0 <= i < N")]
    Shard(usize, usize),
    /// More seeds than [`crate::budget::MAX_SEEDS`].
    #[error("{0} seeds: a sweep may run at most {max} seeds", max = crate::budget::MAX_SEEDS)]
    TooManySeeds(usize),
    /// A seed given twice (it would count every run on it twice).
    #[error("seed {0} is given more than once (--seed-list); each seed may appear once")]
    DuplicateSeed(u64),
    /// Two workloads with the same name (their rows would count twice under one name).
    #[error("workload {0:?} is given more than once (--workload); each workload may appear once")]
    DuplicateWorkload(String),
}

/// One unit of work: a configuration (or baseline) on one world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// Grid configuration index.
    Config(usize),
    /// A baseline.
    Baseline(Baseline),
}

/// The result of a sweep.
#[derive(Clone, Debug)]
pub struct SweepResult {
    /// Rows, sorted.
    pub rows: Vec<Row>,
    /// Job-GPU-ticks evaluated by policy and baseline runs (the oracle is not run).
    pub job_gpu_ticks: u64,
    /// Runs done.
    pub runs: usize,
    /// Seconds spent generating worlds (wall clock; for the timing line only).
    pub generate_s: f64,
    /// Seconds spent running (wall clock; for the timing line only).
    pub run_s: f64,
}

impl SweepSpec {
    /// Checks the spec.
    ///
    /// # Errors
    /// [`SweepError`] for zero seeds, configurations or workloads, a repeated seed or workload
    /// name, a bad span or shard, or worlds that would not fit the memory budget.
    pub fn validate(&self) -> Result<(), SweepError> {
        if self.seeds.is_empty() {
            return Err(SweepError::NoSeeds);
        }
        if self.seeds.len() as u64 > crate::budget::MAX_SEEDS {
            return Err(SweepError::TooManySeeds(self.seeds.len()));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(&s) = self.seeds.iter().find(|&&s| !seen.insert(s)) {
            return Err(SweepError::DuplicateSeed(s));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(w) = self.workloads.iter().find(|w| !seen.insert(w.name.as_str())) {
            return Err(SweepError::DuplicateWorkload(w.name.clone()));
        }
        if self.configs.is_empty() {
            return Err(SweepError::NoConfigs);
        }
        if self.workloads.is_empty() {
            return Err(SweepError::NoWorkloads);
        }
        if !(self.days > 0.0 && self.days <= crate::budget::MAX_DAYS) {
            return Err(SweepError::Days(crate::budget::days_text(self.days)));
        }
        if let Some((i, n)) = self.shard {
            if n == 0 || i >= n {
                return Err(SweepError::Shard(i, n));
            }
        }
        // The results of every run are held until the reports are written: refuse too many
        // before listing the work items.
        let runners = self.configs.len() as u64 + if self.baselines { Baseline::ALL.len() as u64 } else { 0 };
        let shards = self.shard.map_or(1, |(_, n)| n as u64);
        let runs = runners
            .saturating_mul(self.workloads.len() as u64)
            .saturating_mul(self.seeds.len() as u64)
            .div_ceil(shards);
        crate::budget::check_memory_with_runs("sim sweep", &[], self.days, crate::budget::WORLD_SAMPLE_BYTES, runs)
            .map_err(|e| SweepError::Memory(e.to_string()))?;
        // Every world the items need is generated up front and held for the whole run.
        let needed: std::collections::BTreeSet<usize> = self.items().iter().map(|x| x.1).collect();
        let worlds = self.worlds();
        let held: Vec<&Workload> = needed.iter().map(|&i| &self.workloads[worlds[i].0]).collect();
        crate::budget::check_memory_with_runs("sim sweep", &held, self.days, crate::budget::WORLD_SAMPLE_BYTES, runs)
            .map_err(|e| SweepError::Memory(e.to_string()))?;
        Ok(())
    }

    /// Every work item in canonical order — configurations, then baselines, each over every
    /// (workload, seed) — filtered to this shard. The second field indexes [`Self::worlds`].
    pub fn items(&self) -> Vec<(Runner, usize)> {
        let nw = self.workloads.len() * self.seeds.len();
        let mut runners: Vec<Runner> = (0..self.configs.len()).map(Runner::Config).collect();
        if self.baselines {
            runners.extend(Baseline::ALL.into_iter().map(Runner::Baseline));
        }
        let mut items = Vec::new();
        for r in runners {
            for w in 0..nw {
                items.push((r, w));
            }
        }
        match self.shard {
            Some((i, n)) => items.into_iter().enumerate().filter(|(k, _)| k % n == i).map(|(_, x)| x).collect(),
            None => items,
        }
    }

    /// The (workload index, seed) of each world, in world-index order.
    pub fn worlds(&self) -> Vec<(usize, u64)> {
        let mut v = Vec::new();
        for wi in 0..self.workloads.len() {
            for &s in &self.seeds {
                v.push((wi, s));
            }
        }
        v
    }
}

/// Runs one work item on a world.
pub fn run_item(spec: &SweepSpec, runner: Runner, world: &World) -> (Row, u64) {
    match runner {
        Runner::Config(ci) => {
            let cfg = &spec.configs[ci];
            let mut judge = EngineJudge::new(cfg.policy.clone());
            let t = drive::run(world, &mut judge);
            (Row::new(&cfg.params, world, spec.days, &t), t.job_gpu_ticks)
        }
        Runner::Baseline(b) => {
            let t: Tally = match b.judge(world.gpus_per_node, world.nodes.len()) {
                Some(mut j) => drive::run(world, j.as_mut()),
                None => Tally::oracle(world),
            };
            let ticks = if b == Baseline::Oracle { 0 } else { t.job_gpu_ticks };
            (Row::new(&b.params(), world, spec.days, &t), ticks)
        }
    }
}

/// Work items run together: configurations over one world whose policies share windows (one
/// engine judges them all, see [`drive::run_policies`]), or one baseline.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Index into [`SweepSpec::worlds`].
    pub world: usize,
    /// The runners, in item order.
    pub runners: Vec<Runner>,
}

/// Groups items into batches: per world, each configuration joins the first batch whose
/// policies share its windows; baselines run alone. Batches and their runners keep item order.
pub fn batches(spec: &SweepSpec, items: &[(Runner, usize)]) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    for &(r, w) in items {
        if let Runner::Config(ci) = r {
            let joins = out.iter_mut().find(|b| {
                b.world == w
                    && matches!(b.runners[0], Runner::Config(first)
                        if spec.configs[first].policy.shares_windows_with(&spec.configs[ci].policy))
            });
            if let Some(b) = joins {
                b.runners.push(r);
                continue;
            }
        }
        out.push(Batch {
            world: w,
            runners: vec![r],
        });
    }
    out
}

/// Runs one batch on its world: one row per runner, in the batch's order.
pub fn run_batch(spec: &SweepSpec, batch: &Batch, world: &World) -> Vec<(Row, u64)> {
    let configs: Vec<usize> = batch
        .runners
        .iter()
        .filter_map(|r| match r {
            Runner::Config(ci) => Some(*ci),
            Runner::Baseline(_) => None,
        })
        .collect();
    if configs.len() < 2 {
        return batch.runners.iter().map(|&r| run_item(spec, r, world)).collect();
    }
    let policies = configs.iter().map(|&ci| spec.configs[ci].policy.clone()).collect();
    let Ok(tallies) = drive::run_policies(world, policies) else {
        // `batches` only groups policies that share windows; should that ever not hold,
        // run them one by one rather than fail.
        return batch.runners.iter().map(|&r| run_item(spec, r, world)).collect();
    };
    configs
        .iter()
        .zip(tallies)
        .map(|(&ci, t)| (Row::new(&spec.configs[ci].params, world, spec.days, &t), t.job_gpu_ticks))
        .collect()
}

/// Generates the worlds this spec's items need, in parallel. `None` for worlds no item uses.
pub fn generate_worlds(spec: &SweepSpec, items: &[(Runner, usize)]) -> Vec<Option<World>> {
    let needed: std::collections::BTreeSet<usize> = items.iter().map(|x| x.1).collect();
    spec.worlds()
        .into_par_iter()
        .enumerate()
        .map(|(i, (wi, seed))| needed.contains(&i).then(|| generate(&spec.workloads[wi], seed, spec.days)))
        .collect()
}

/// Why the world of `(w, seed)` over `days` holds no job, and the span that would give it some:
/// the workload's mean arrivals per day ([`crate::generate::arrivals_per_day`]).
pub fn no_jobs(w: &Workload, seed: u64, days: f64) -> String {
    let per_day = crate::generate::arrivals_per_day(w, seed);
    format!(
        "workload {} seed {seed} over {} days generated no job: \
         this workload starts about {per_day:.0} jobs per day (the first after about {:.4} days on average); \
         use --days {:.3} or more for about ten jobs",
        w.name,
        crate::budget::days_text(days),
        1.0 / per_day.max(f64::MIN_POSITIVE),
        10.0 / per_day.max(f64::MIN_POSITIVE)
    )
}

/// Runs the sweep on the current rayon pool. `tick` is called once per finished item (for a
/// progress bar).
///
/// # Errors
/// [`SweepError`] when the spec is invalid, or [`SweepError::NoJobs`] when a generated world
/// holds no job (before any run).
pub fn run(spec: &SweepSpec, tick: &(dyn Fn() + Sync)) -> Result<SweepResult, SweepError> {
    spec.validate()?;
    let items = spec.items();
    let t0 = std::time::Instant::now();
    let worlds = generate_worlds(spec, &items);
    let generate_s = t0.elapsed().as_secs_f64();
    for (world, &(wi, seed)) in worlds.iter().zip(&spec.worlds()) {
        if world.as_ref().is_some_and(|w| w.jobs.is_empty()) {
            return Err(SweepError::NoJobs(format!(
                "{}, and whole days for scores that mean something (a sweep scores jobs; with none every row would be 0)",
                no_jobs(&spec.workloads[wi], seed, spec.days)
            )));
        }
    }
    let t1 = std::time::Instant::now();
    let mut results: Vec<(Row, u64)> = batches(spec, &items)
        .par_iter()
        .with_max_len(1)
        .flat_map_iter(|b| {
            let world = worlds[b.world].as_ref().expect("world generated for every item");
            let out = run_batch(spec, b, world);
            for _ in 0..out.len() {
                tick();
            }
            out
        })
        .collect();
    let run_s = t1.elapsed().as_secs_f64();
    let job_gpu_ticks = results.iter().map(|r| r.1).sum();
    let mut rows: Vec<Row> = results.drain(..).map(|r| r.0).collect();
    sort_rows(&mut rows);
    Ok(SweepResult {
        runs: rows.len(),
        rows,
        job_gpu_ticks,
        generate_s,
        run_s,
    })
}

/// Rank of a `policy` value in reports: gpu-reaper first, then the baselines in order.
pub fn policy_rank(p: &str) -> usize {
    if p == "gpu-reaper" {
        0
    } else {
        1 + Baseline::ALL.iter().position(|b| b.name() == p).unwrap_or(Baseline::ALL.len())
    }
}

/// Sorts rows by (policy, config id, workload, seed): the CSV order.
pub fn sort_rows(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        (policy_rank(&a.policy), &a.config_id, &a.workload, a.seed).cmp(&(policy_rank(&b.policy), &b.config_id, &b.workload, b.seed))
    });
}

/// Writes rows as CSV.
///
/// # Errors
/// I/O and CSV errors, with the path.
pub fn write_csv(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut w = csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for r in rows {
        w.serialize(r).with_context(|| format!("writing {}", path.display()))?;
    }
    w.flush().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Reads rows written by [`write_csv`].
///
/// # Errors
/// A message naming the file and the line of a bad row, and for a value that does not parse
/// (a count that is negative or not a whole number, a number that is text) its column and the
/// value as written.
pub fn read_csv(path: &Path) -> anyhow::Result<Vec<Row>> {
    use anyhow::Context;
    let mut r = csv::Reader::from_path(path).with_context(|| format!("opening {}", path.display()))?;
    let headers = r
        .headers()
        .with_context(|| format!("{}: line 1: cannot read the header", path.display()))?
        .clone();
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.with_context(|| format!("{}: line {line}: not a sweep.csv row", path.display()))?;
        let line = rec.position().map_or(line as u64, |p| p.line());
        match rec.deserialize::<Row>(Some(&headers)) {
            Ok(row) => rows.push(row),
            Err(e) => {
                let at = match e.kind() {
                    csv::ErrorKind::Deserialize { err, .. } => err.field().map(|f| {
                        let f = f as usize;
                        format!(
                            ", column {} = {:?}",
                            headers.get(f).unwrap_or("(beyond the header)"),
                            rec.get(f).unwrap_or("")
                        )
                    }),
                    _ => None,
                };
                return Err(e).with_context(|| format!("{}: line {line}{}: not a sweep.csv row", path.display(), at.unwrap_or_default()));
            }
        }
    }
    Ok(rows)
}

/// Merges shard outputs: concatenates, refuses duplicate (policy, config, workload, seed)
/// keys, and sorts.
///
/// # Errors
/// A duplicate key, naming it.
pub fn merge_rows(parts: Vec<Vec<Row>>) -> anyhow::Result<Vec<Row>> {
    let mut rows: Vec<Row> = parts.into_iter().flatten().collect();
    sort_rows(&mut rows);
    for w in rows.windows(2) {
        if (&w[0].policy, &w[0].config_id, &w[0].workload, w[0].seed) == (&w[1].policy, &w[1].config_id, &w[1].workload, w[1].seed) {
            anyhow::bail!(
                "duplicate row for policy {} config {} workload {} seed {}: were the same shard's files given twice?",
                w[0].policy,
                w[0].config_id,
                w[0].workload,
                w[0].seed
            );
        }
    }
    Ok(rows)
}
