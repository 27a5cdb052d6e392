//! Reports from sweep rows alone (so `sim merge` can write them from shard CSVs):
//! `summary.md`, `frontier.svg` and the short table printed at the end of a sweep.

use crate::score::{round3, Row, RowParams, SIG_COLUMNS};
use crate::sweep::policy_rank;
use crate::workload::{JobKind, Workload};
use crate::world::TICK_S;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One configuration (or baseline) summed over its rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregate {
    /// `policy` column.
    pub policy: String,
    /// `config_id`.
    pub config_id: String,
    /// A row of this configuration (for its parameters).
    pub first: Row,
    /// Rows summed.
    pub rows: usize,
    /// Recovered GPU-hours, summed.
    pub recovered_gpu_h: f64,
    /// Wasted GPU-hours in the ground truth, summed.
    pub wasted_gpu_h: f64,
    /// Oracle recovery, summed.
    pub oracle_gpu_h: f64,
    /// False cancels, summed.
    pub false_cancels: u64,
    /// Rows with at least one false cancel.
    pub rows_with_false_cancels: usize,
    /// Lost GPU-hours of false cancels, summed.
    pub lost_gpu_h: f64,
    /// Drains, summed.
    pub drains: u64,
    /// False drains, summed.
    pub false_drains: u64,
    /// Drained GPU-hours, summed.
    pub drained_gpu_h: f64,
    /// True alerts, summed.
    pub true_alerts: u64,
    /// False alerts, summed.
    pub false_alerts: u64,
    /// Cancels, summed.
    pub cancels: u64,
    /// Recovered GPU-hours from single-node jobs, summed.
    pub recovered_single_node_gpu_h: f64,
    /// Drains of single-node jobs, summed.
    pub drains_single_node: u64,
    /// False drains of single-node jobs, summed.
    pub false_drains_single_node: u64,
}

impl Aggregate {
    fn add(&mut self, r: &Row) {
        if self.rows == 0 {
            self.policy = r.policy.clone();
            self.config_id = r.config_id.clone();
            self.first = r.clone();
        }
        self.rows += 1;
        self.recovered_gpu_h += r.recovered_gpu_h;
        self.wasted_gpu_h += r.wasted_gpu_h;
        self.oracle_gpu_h += r.oracle_recovered_gpu_h;
        self.false_cancels += r.false_cancels;
        self.rows_with_false_cancels += (r.false_cancels > 0) as usize;
        self.lost_gpu_h += r.false_cancel_lost_gpu_h;
        self.drains += r.drains;
        self.false_drains += r.false_drains;
        self.drained_gpu_h += r.drained_gpu_h;
        self.true_alerts += r.true_alerts;
        self.false_alerts += r.false_alerts;
        self.cancels += r.cancels;
        self.recovered_single_node_gpu_h += r.recovered_single_node_gpu_h;
        self.drains_single_node += r.drains_single_node;
        self.false_drains_single_node += r.false_drains_single_node;
    }

    /// False drains as a share of drains, as `"12.3 %"`; `"–"` without drains.
    pub fn false_drain_rate(&self) -> String {
        pct(self.false_drains as f64, self.drains as f64)
    }
}

/// `part` as a percentage of `whole`, one decimal (`"12.3 %"`); `"–"` when `whole` is 0.
fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1} %", 100.0 * part / whole)
    } else {
        "–".into()
    }
}

/// Sums rows per (policy, config id), optionally only rows of one workload. Ordered by policy
/// rank then config id.
pub fn aggregate(rows: &[Row], workload: Option<&str>) -> Vec<Aggregate> {
    let mut m: BTreeMap<(usize, String), Aggregate> = BTreeMap::new();
    for r in rows.iter().filter(|r| workload.is_none_or(|w| r.workload == w)) {
        m.entry((policy_rank(&r.policy), r.config_id.clone())).or_default().add(r);
    }
    m.into_values()
        .map(|mut a| {
            a.recovered_gpu_h = round3(a.recovered_gpu_h);
            a.wasted_gpu_h = round3(a.wasted_gpu_h);
            a.oracle_gpu_h = round3(a.oracle_gpu_h);
            a.lost_gpu_h = round3(a.lost_gpu_h);
            a.drained_gpu_h = round3(a.drained_gpu_h);
            a.recovered_single_node_gpu_h = round3(a.recovered_single_node_gpu_h);
            a
        })
        .collect()
}

/// The recommended configuration: among gpu-reaper configurations with zero false cancels on
/// every row (every seed of every workload) and no trap phase of `workloads` that could
/// outlast their earliest cancel ([`trap_margin_ok`]), the one recovering the most
/// GPU-hours; ties go to fewer false drains, then fewer false alerts, then the lowest config
/// id (summary.md states this rule and names the configurations only the id separated:
/// [`tied_with`]). `workloads` empty (not at hand): no trap check.
pub fn recommend<'a>(aggs: &'a [Aggregate], workloads: &[Workload]) -> Option<&'a Aggregate> {
    aggs.iter()
        .filter(|a| a.policy == "gpu-reaper" && a.false_cancels == 0 && trap_margin_ok(a, workloads))
        .min_by(|a, b| {
            b.recovered_gpu_h
                .total_cmp(&a.recovered_gpu_h)
                .then(a.false_drains.cmp(&b.false_drains))
                .then(a.false_alerts.cmp(&b.false_alerts))
                .then(a.config_id.cmp(&b.config_id))
        })
}

/// True unless a trap phase of `workloads` (the longest one `a` could cancel) could outlast
/// `a`'s earliest cancel: a negative margin in summary.md's "What the zero false cancels rests
/// on". Such a configuration's zero false cancels rests on the seeds' draws, not on its
/// stages (operator trial 23: a workload whose staging ran to 200 min had a 3h configuration
/// recommended "to deploy" at a margin of −20 min; other seeds gave it up to 4 false
/// cancels).
pub fn trap_margin_ok(a: &Aggregate, workloads: &[Workload]) -> bool {
    let p = a.first.params();
    match (earliest_cancel_s(&p), longest_trap(&p, workloads)) {
        (Some(c), Some((longest_min, ..))) => c as f64 / 60.0 >= longest_min,
        _ => true,
    }
}

/// The gpu-reaper configurations the recommendation's rule cannot separate from `rec`: zero
/// false cancels, a trap margin that is not negative ([`trap_margin_ok`]), and the same
/// recovered GPU-hours, false drains and false alerts, so only the config id decided.
/// Ordered by config id; `rec` itself is not included.
pub fn tied_with<'a>(aggs: &'a [Aggregate], rec: &Aggregate, workloads: &[Workload]) -> Vec<&'a Aggregate> {
    let mut tied: Vec<&Aggregate> = aggs
        .iter()
        .filter(|a| {
            a.policy == "gpu-reaper"
                && a.config_id != rec.config_id
                && a.false_cancels == 0
                && trap_margin_ok(a, workloads)
                && a.recovered_gpu_h == rec.recovered_gpu_h
                && a.false_drains == rec.false_drains
                && a.false_alerts == rec.false_alerts
        })
        .collect();
    tied.sort_by(|a, b| a.config_id.cmp(&b.config_id));
    tied
}

/// The `Tied:` paragraph of summary.md for `rec` and the configurations [`tied_with`] it:
/// their ids, the rule's tie-break, and how each differs from `rec` (the parameters of
/// [`describe`] that differ, and the true alerts when they differ). Empty when none is tied.
fn tie_paragraph(rec: &Aggregate, tied: &[&Aggregate]) -> String {
    if tied.is_empty() {
        return String::new();
    }
    let ids: Vec<&str> = tied.iter().map(|a| a.config_id.as_str()).collect();
    let mine = describe(&rec.first.params());
    let mine: Vec<&str> = mine.split(", ").collect();
    let diffs: Vec<String> = tied
        .iter()
        .map(|a| {
            let theirs = describe(&a.first.params());
            let mut d: Vec<String> = theirs
                .split(", ")
                .zip(&mine)
                .filter(|(t, m)| t != *m)
                .map(|(t, _)| t.to_string())
                .collect();
            if d.is_empty() {
                d.push("the same parameters".into());
            }
            if a.true_alerts != rec.true_alerts {
                d.push(format!("{} true alerts ({}: {})", a.true_alerts, rec.config_id, rec.true_alerts));
            }
            format!("{}: {}", a.config_id, d.join(", "))
        })
        .collect();
    let one = ids.len() == 1;
    let how = if one {
        // One tied configuration: its differences alone, without repeating its id.
        format!(
            "It differs from {} in: {}.",
            rec.config_id,
            diffs[0].split_once(": ").map_or("", |(_, d)| d)
        )
    } else {
        format!("How they differ from {}: {}.", rec.config_id, diffs.join("; "))
    };
    format!(
        "**Tied:** {} also recover{} {:.1} GPU-hours with 0 false cancels, {} false drains and {} false alerts, so the rule \
         cannot separate {} from {}; the lowest config id is shown. {how}\n",
        ids.join(", "),
        if one { "s" } else { "" },
        rec.recovered_gpu_h,
        rec.false_drains,
        rec.false_alerts,
        if one { "it" } else { "them" },
        rec.config_id,
    )
}

/// The configuration to deploy when `rec` raises the spin ceiling: the gpu-reaper
/// configuration with `rec`'s parameters but the spin ceiling at `alert` (the "Spin ceiling"
/// section's advice), if the sweep ran it. `None` when `rec`'s ceiling is already `alert`.
pub fn deploy_variant<'a>(aggs: &'a [Aggregate], rec: &Aggregate) -> Option<&'a Aggregate> {
    if rec.first.spin_ceiling == "alert" {
        return None;
    }
    let mut want = rec.first.params();
    want.spin_ceiling = "alert".into();
    aggs.iter().find(|a| {
        let mut p = a.first.params();
        p.config_id.clone_from(&want.config_id);
        a.policy == "gpu-reaper" && p == want
    })
}

/// The earliest time from the onset of a stretch that looks wasted to the engine's cancel,
/// seconds, as the engine counts it (policy/src/engine.rs): the stage dwell counts from the
/// start of the first breaching window, i.e. the onset; the first alert comes when that
/// window is full; the drain one cycle after the alert at the earliest, and the cancel needs
/// the drain confirmed (one cycle later in observe mode) a full window before and `notice`
/// since the first alert. So: max(cancel after, max(drain after, window + cycle) + cycle +
/// window, window + notice), with the simulator's 60 s cycle. `None` without a cancel stage.
pub fn earliest_cancel_s(p: &RowParams) -> Option<i64> {
    let cancel = p.cancel_after_s?;
    let window = p.window_s.unwrap_or(0);
    let drain = p.drain_after_s.unwrap_or(0).max(window + TICK_S) + TICK_S + window;
    let notice = window + p.notice_s.unwrap_or(0);
    Some(cancel.max(drain).max(notice))
}

/// The phases of a productive job of `kind` that can look wasted, with their length range in
/// minutes as the workload file gives them: `staging`, `checkpoint`, `eval`, `quiet`,
/// `brief spin` (each only when the kind has it).
pub fn trap_phases(kind: &JobKind) -> Vec<(&'static str, [f64; 2])> {
    let mut v = Vec::new();
    if kind.staging_min.0[1] > 0.0 {
        v.push(("staging", kind.staging_min.0));
    }
    let timed = [
        ("checkpoint", kind.checkpoint_every_min.is_some(), kind.checkpoint_min.0),
        ("eval", kind.eval_every_min.is_some(), kind.eval_min.0),
        ("quiet", kind.quiet_every_min.is_some(), kind.quiet_min.0),
        ("brief spin", kind.brief_spin_every_min.is_some(), kind.brief_spin_min.0),
    ];
    v.extend(timed.into_iter().filter(|(_, on, r)| *on && r[1] > 0.0).map(|(n, _, r)| (n, r)));
    v
}

/// The longest trap phase configuration `p` could cancel, over `workloads`: kinds whose QOS it
/// exempts are left out, and brief spins unless its spin ceiling is `cancel`. Returns
/// (minutes, workload, kind, phase).
pub fn longest_trap<'a>(p: &RowParams, workloads: &'a [Workload]) -> Option<(f64, &'a str, &'a str, &'static str)> {
    let exempt = |q: &str| p.exempt_qos.split('+').any(|e| e == q);
    workloads
        .iter()
        .flat_map(|w| w.kinds.iter().map(move |k| (w, k)))
        .filter(|(_, k)| !exempt(&k.qos))
        .flat_map(|(w, k)| {
            trap_phases(k)
                .into_iter()
                .map(move |(ph, r)| (r[1], w.name.as_str(), k.name.as_str(), ph))
        })
        .filter(|x| x.3 != "brief spin" || p.spin_ceiling == "cancel")
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn minutes(m: f64) -> String {
    if m.fract() == 0.0 {
        format!("{m:.0}")
    } else {
        format!("{m}")
    }
}

/// The section of summary.md saying which trap durations the zero false cancels rests on,
/// read from `workloads`, and the margin of each configuration in `configs` over the longest.
fn trap_margin_section(s: &mut String, configs: &[&Aggregate], workloads: &[Workload]) {
    let _ = writeln!(s, "## What the zero false cancels rests on\n");
    if workloads.is_empty() {
        let _ = writeln!(
            s,
            "The workload files were not at hand (a merge of shards whose workloads are not the built-in ones), so the trap \
             durations are not listed here: read them in the workload files.\n"
        );
        return;
    }
    let _ = writeln!(
        s,
        "Productive jobs look wasted for a while: staging before the first step, checkpoint stalls, eval or quiet phases, brief \
         spins. No evidence rule tells these from waste; only time does: a configuration makes no false cancel on them because \
         each ends before its earliest cancel. Their lengths, minutes, as the workload files give them (each phase drawn \
         uniformly in its range):\n"
    );
    let _ = writeln!(s, "| workload | kind | qos | staging | checkpoint | eval | quiet | brief spin |");
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|");
    for w in workloads {
        for k in &w.kinds {
            let phases = trap_phases(k);
            let cell = |name: &str| {
                phases
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or("–".to_string(), |(_, r)| format!("{}–{}", minutes(r[0]), minutes(r[1])))
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                w.name,
                k.name,
                k.qos,
                cell("staging"),
                cell("checkpoint"),
                cell("eval"),
                cell("quiet"),
                cell("brief spin")
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "The earliest cancel counts from the onset of such a phase, as the engine counts it: max(cancel after; drain after (at \
         least window + one cycle) + one cycle to confirm the drain + window; window + notice), with a 60 s cycle. The margin \
         is that minus the longest phase the configuration could cancel (kinds of an exempt QOS left out; brief spins only \
         with the spin ceiling at `cancel`). A trap phase longer than the earliest cancel is cancelled: the zero holds only for \
         traps as short as these.\n"
    );
    for a in configs {
        let p = a.first.params();
        match (earliest_cancel_s(&p), longest_trap(&p, workloads)) {
            (Some(c), Some((m, w, k, ph))) => {
                let margin_min = (c as f64 / 60.0 - m).round() as i64;
                let _ = writeln!(
                    s,
                    "* **{}**: cancel after {}, earliest cancel {} after onset; longest trap it could cancel: {ph} of `{k}` \
                     (workload {w}), up to {} min; margin **{} min**.",
                    a.config_id,
                    dur(p.cancel_after_s),
                    dur(Some(c)),
                    minutes(m),
                    margin_min
                );
            }
            (None, _) => {
                let _ = writeln!(s, "* **{}**: no cancel stage, so no cancel at all.", a.config_id);
            }
            (Some(c), None) => {
                let _ = writeln!(
                    s,
                    "* **{}**: earliest cancel {} after onset; no trap phase it could cancel.",
                    a.config_id,
                    dur(Some(c))
                );
            }
        }
    }
    let _ = writeln!(s);
}

/// One configuration's headline figures over all rows: recovery (and the part from
/// single-node jobs, next to the oracle's single-node part `oracle_single_node_gpu_h` when the
/// oracle ran), false cancels, drains (and those of single-node jobs), alerts.
fn headline(a: &Aggregate, oracle_single_node_gpu_h: Option<f64>) -> String {
    let oracle_single = oracle_single_node_gpu_h.map_or(String::new(), |o| {
        format!(
            "; the oracle's single-node part is {o:.1}, of which this is {}",
            pct(a.recovered_single_node_gpu_h, o)
        )
    });
    format!(
        "it recovers {:.1} GPU-hours of the oracle's {:.1} ({}), with {} false cancels; {} drains, {} of them false ({} \
         false-drain rate; {} of the drains and {} of the false ones were of single-node jobs, the only drains a per-node \
         enforcer makes), withholding {:.1} GPU-hours of their nodes' other GPUs; {} true and {} false alerts. Of the \
         recovered GPU-hours {:.1} ({} of the oracle's {:.1}{oracle_single}) come from single-node jobs: the simulator \
         judges whole allocations, but a per-node enforcer holds a multi-node job at alert, so only these are cancels it \
         can make.",
        a.recovered_gpu_h,
        a.oracle_gpu_h,
        pct(a.recovered_gpu_h, a.oracle_gpu_h),
        a.false_cancels,
        a.drains,
        a.false_drains,
        a.false_drain_rate(),
        a.drains_single_node,
        a.false_drains_single_node,
        a.drained_gpu_h,
        a.true_alerts,
        a.false_alerts,
        a.recovered_single_node_gpu_h,
        pct(a.recovered_single_node_gpu_h, a.oracle_gpu_h),
        a.oracle_gpu_h,
    )
}

/// Pareto front over (false cancels ↓, recovered GPU-hours ↑) among gpu-reaper configs.
pub fn pareto(aggs: &[Aggregate]) -> Vec<&Aggregate> {
    let cands: Vec<&Aggregate> = aggs.iter().filter(|a| a.policy == "gpu-reaper").collect();
    let mut front: Vec<&Aggregate> = cands
        .iter()
        .copied()
        .filter(|a| {
            !cands.iter().any(|b| {
                b.false_cancels <= a.false_cancels
                    && b.recovered_gpu_h >= a.recovered_gpu_h
                    && (b.false_cancels < a.false_cancels || b.recovered_gpu_h > a.recovered_gpu_h)
            })
        })
        .collect();
    // Configurations at the same point are shown once, by the recommendation's tie-break
    // (fewer false drains, then fewer false alerts, then the lower id), so that the front's
    // zero-false-cancel point and the recommended configuration agree.
    front.sort_by(|a, b| {
        a.false_cancels
            .cmp(&b.false_cancels)
            .then(b.recovered_gpu_h.total_cmp(&a.recovered_gpu_h))
            .then(a.false_drains.cmp(&b.false_drains))
            .then(a.false_alerts.cmp(&b.false_alerts))
            .then(a.config_id.cmp(&b.config_id))
    });
    front.dedup_by(|a, b| a.false_cancels == b.false_cancels && a.recovered_gpu_h == b.recovered_gpu_h);
    front
}

fn dur(v: Option<i64>) -> String {
    match v {
        None => "none".into(),
        Some(s) if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        Some(s) if s % 60 == 0 => format!("{}m", s / 60),
        Some(s) => format!("{s}s"),
    }
}

/// Describes a configuration's parameters in one line.
pub fn describe(r: &RowParams) -> String {
    format!(
        "util_threshold_pct {}, window {}, warmup {}, max_sample_gap {}, drain after {}, cancel after {}, notice {}, spin ceiling {}, exempt qos {}",
        r.util_threshold_pct.map_or("–".into(), |u| u.to_string()),
        dur(r.window_s),
        dur(r.warmup_s),
        dur(r.max_sample_gap_s),
        dur(r.drain_after_s),
        dur(r.cancel_after_s),
        dur(r.notice_s),
        if r.spin_ceiling.is_empty() { "–" } else { &r.spin_ceiling },
        if r.exempt_qos.is_empty() { "none" } else { &r.exempt_qos }
    )
}

/// The short table printed after a sweep: the recommended configuration, the one to deploy
/// (its spin-ceiling-`alert` twin, when the recommendation's ceiling is higher: see
/// [`deploy_variant`]) and the baselines, summed over every workload and seed, then one line
/// naming both as `summary.md` does (operator trial 16: the table named only the rule's
/// choice, c039, while `summary.md` and the README say deploy c037).
///
/// `workloads`: the sweep's workloads, for the trap check of [`recommend`] (empty when not at
/// hand).
pub fn short_table(rows: &[Row], workloads: &[Workload]) -> String {
    let aggs = aggregate(rows, None);
    let rec = recommend(&aggs, workloads);
    let deploy = rec.and_then(|r| deploy_variant(&aggs, r));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:<12} {:>13} {:>13} {:>13} {:>12} {:>12} {:>12}",
        "policy", "config", "recovered_h", "oracle_h", "false_cancel", "false_drain", "true_alert", "false_alert"
    );
    let mut show: Vec<&Aggregate> = rec.into_iter().chain(deploy).collect();
    show.extend(aggs.iter().filter(|a| a.policy != "gpu-reaper"));
    for a in show {
        let _ = writeln!(
            s,
            "{:<12} {:<12} {:>13.1} {:>13.1} {:>13} {:>12} {:>12} {:>12}",
            a.policy, a.config_id, a.recovered_gpu_h, a.oracle_gpu_h, a.false_cancels, a.false_drains, a.true_alerts, a.false_alerts
        );
    }
    match rec {
        None => s.push_str("no gpu-reaper configuration had zero false cancels on every seed of every workload\n"),
        Some(r) => {
            let tied: Vec<&str> = tied_with(&aggs, r, workloads).iter().map(|a| a.config_id.as_str()).collect();
            if !tied.is_empty() {
                let _ = writeln!(
                    s,
                    "tied with {}: {} (same recovered GPU-hours, false drains and false alerts; the lowest id is shown, see summary.md)",
                    r.config_id,
                    tied.join(", ")
                );
            }
            match deploy {
                Some(d) => {
                    let _ = writeln!(
                        s,
                        "recommended by the rule: {}; to deploy: {}, the same with the spin ceiling at alert (see summary.md, \"Spin ceiling\")",
                        r.config_id, d.config_id
                    );
                }
                None => {
                    let _ = writeln!(s, "recommended by the rule, and to deploy: {}", r.config_id);
                }
            }
        }
    }
    if let Some(w) = few_jobs_warning(rows) {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// `summary.md`, from the rows alone.
/// Below this many jobs in a world, the summary warns that its recommendation says little.
pub const FEW_JOBS: u64 = 100;

/// A warning when some world of the sweep holds fewer than [`FEW_JOBS`] jobs (its job count
/// is read from its rows), naming the smallest.
pub fn few_jobs_warning(rows: &[Row]) -> Option<String> {
    let mut world_jobs: std::collections::BTreeMap<(&str, u64), u64> = std::collections::BTreeMap::new();
    for r in rows {
        world_jobs.entry((r.workload.as_str(), r.seed)).or_insert(r.jobs);
    }
    let ((w, seed), jobs) = world_jobs.into_iter().min_by_key(|&(_, j)| j).filter(|&(_, j)| j < FEW_JOBS)?;
    Some(format!(
        "world {w} seed {seed} holds only {jobs} job(s) (fewer than {FEW_JOBS}); a recommendation from so few jobs says little, so sweep more days or seeds"
    ))
}

///
/// `workload_files`: the sweep's workloads, for the trap durations the zero false cancels rests on;
/// empty when they are not at hand (the section then says so).
pub fn summary_md(rows: &[Row], workload_files: &[Workload]) -> String {
    let mut s = String::new();
    let workloads: Vec<String> = {
        let mut v: Vec<String> = rows.iter().map(|r| r.workload.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let seeds: Vec<u64> = {
        let mut v: Vec<u64> = rows.iter().map(|r| r.seed).collect();
        v.sort();
        v.dedup();
        v
    };
    let aggs = aggregate(rows, None);
    let configs = aggs.iter().filter(|a| a.policy == "gpu-reaper").count();
    let days = rows.first().map_or(0.0, |r| r.days);
    let _ = writeln!(s, "# gpu-reaper sweep summary\n");
    let _ = writeln!(
        s,
        "{} policy configurations and the baselines, on {} workload(s) ({}) × {} seed(s) ({}), {} simulated days each. \
         Rows: {}. Every column is documented in `reports/README.md`.\n",
        configs,
        workloads.len(),
        workloads.join(", "),
        seeds.len(),
        seeds.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "),
        days,
        rows.len()
    );

    if let Some(w) = few_jobs_warning(rows) {
        let _ = writeln!(s, "**Too few jobs to choose from:** {w}\n");
    }
    let _ = writeln!(s, "## Recommended configuration\n");
    let rec = recommend(&aggs, workload_files);
    let oracle_single = aggs.iter().find(|a| a.policy == "oracle").map(|a| a.recovered_single_node_gpu_h);
    match rec {
        Some(a) => {
            let _ = writeln!(
                s,
                "Rule: the gpu-reaper configuration that recovers the most GPU-hours with zero false cancels on every seed of \
                 every workload and no trap phase that could outlast its earliest cancel (a margin below 0 in \"What the zero \
                 false cancels rests on\"); ties go to fewer false drains, then fewer false alerts, then the lowest config id.\n\n**{}**: \
                 {}.\n\nOver all rows {}\n",
                a.config_id,
                describe(&a.first.params()),
                headline(a, oracle_single)
            );
            let tie = tie_paragraph(a, &tied_with(&aggs, a, workload_files));
            if !tie.is_empty() {
                let _ = writeln!(s, "{tie}");
            }
            if let Some(d) = deploy_variant(&aggs, a) {
                let _ = writeln!(
                    s,
                    "**To deploy: {}**, the same with the spin ceiling at `alert` (see \"Spin ceiling\" below: the simulator \
                     lacks long healthy spins). Over all rows {}\n",
                    d.config_id,
                    headline(d, oracle_single)
                );
            }
            if a.first.cancel_after_s.is_none() {
                let _ = writeln!(
                    s,
                    "It has no cancel stage: no configuration with a cancel stage had zero false cancels on every seed of every \
                     workload. The section \"False cancels of gpu-reaper configurations, by signature\" shows which signature \
                     made them, and the Pareto front below what cancelling would recover at what cost.\n"
                );
            }
        }
        None => {
            let _ = writeln!(
                s,
                "No gpu-reaper configuration had zero false cancels on every seed of every workload.\n"
            );
        }
    }

    if let Some(a) = rec {
        let mut shown = vec![a];
        shown.extend(deploy_variant(&aggs, a));
        trap_margin_section(&mut s, &shown, workload_files);
    }

    let _ = writeln!(s, "## Recommended configuration next to the baselines\n");
    let _ = writeln!(
        s,
        "Per workload, summed over seeds (latencies: mean over seeds of the per-seed percentile, seconds). A drain stands \
         until its job leaves the node or works again (healthy for two windows), as the enforcer's does; drained GPU-h is the capacity of the drained nodes' other \
         GPUs it withholds.\n"
    );
    for w in &workloads {
        let _ = writeln!(s, "### Workload `{w}`\n");
        let _ = writeln!(
            s,
            "| policy | config | recovered GPU-h | single-node recovered GPU-h | recovered share | oracle GPU-h | wasted GPU-h | false cancels | lost GPU-h | false drains / drains | drained GPU-h | true alerts | false alerts | alert p50 / p95 s | cancel p50 / p95 s |"
        );
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let waggs = aggregate(rows, Some(w));
        let mut show: Vec<&Aggregate> = Vec::new();
        if let Some(r) = rec {
            show.extend(waggs.iter().filter(|a| a.policy == r.policy && a.config_id == r.config_id));
            if let Some(d) = deploy_variant(&aggs, r) {
                show.extend(waggs.iter().filter(|a| a.policy == d.policy && a.config_id == d.config_id));
            }
        }
        show.extend(waggs.iter().filter(|a| a.policy != "gpu-reaper"));
        for a in show {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.workload == *w && r.policy == a.policy && r.config_id == a.config_id)
                .collect();
            let lat = |f: fn(&Row) -> Option<i64>| {
                mean(mine.iter().filter_map(|r| f(r)).map(|x| x as f64)).map_or("–".into(), |x| format!("{x:.0}"))
            };
            let share = if a.wasted_gpu_h > 0.0 {
                format!("{:.1} %", 100.0 * a.recovered_gpu_h / a.wasted_gpu_h)
            } else {
                "–".into()
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {} | {:.1} | {} / {} | {:.1} | {} | {} | {} / {} | {} / {} |",
                a.policy,
                a.config_id,
                a.recovered_gpu_h,
                a.recovered_single_node_gpu_h,
                share,
                a.oracle_gpu_h,
                a.wasted_gpu_h,
                a.false_cancels,
                a.lost_gpu_h,
                a.false_drains,
                a.drains,
                a.drained_gpu_h,
                a.true_alerts,
                a.false_alerts,
                lat(|r| r.alert_latency_p50_s),
                lat(|r| r.alert_latency_p95_s),
                lat(|r| r.cancel_latency_p50_s),
                lat(|r| r.cancel_latency_p95_s),
            );
        }
        let _ = writeln!(s);
    }

    let _ = writeln!(s, "## Baselines: how they are modelled\n");
    let _ = writeln!(
        s,
        "Each baseline is modelled from its public description, not run from its own code:\n\n\
         * **jds** (job_defense_shield, its documented example config): evaluated every 15 minutes; a job whose utilisation \
         averages exactly 0 from its start to 120 minutes is cancelled (warnings, counted as the alert, at 60 and 105 minutes); \
         after that a sliding 300-minute window applies. Memory is ignored; a job is idle when any one GPU is idle.\n\
         * **reaper-v0.1** (the previous gpu-reaper): peak util below 15 % over 20 minutes with at least 8 samples; no check \
         that the window is covered or fresh; `[N/A]` read as 0; cancel after alert then drain. Its stage times are not \
         published: modelled as alert at breach, drain after 60 minutes, cancel 20 minutes later.\n\
         * **naive-mean**: mean util below 15 % over 20 minutes (missing values skipped), same ladder as reaper-v0.1.\n\
         * **oracle**: cancels every wholly wasted job at the onset of its waste: the ceiling on recovery.\n"
    );

    if let Some(a) = rec {
        let _ = writeln!(s, "## Per-signature breakdown of the recommended configuration\n");
        let _ = writeln!(
            s,
            "Summed over seeds. A cancel, its recovered or lost GPU-hours count under the signature its finding named. \
             All of a job's alerts count under one signature: the one its latest finding at its highest verdict named \
             (for a cancelled job, the cancel's). So a job alerted as idle and cancelled as hung counts under hung, and \
             no signature shows more cancels than alerts.\n"
        );
        let _ = writeln!(s, "| workload | signature | alerts | cancels | false cancels | recovered GPU-h |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
        for w in &workloads {
            let mut sums = [(0u64, 0u64, 0u64, 0f64); 6];
            for r in rows
                .iter()
                .filter(|r| r.workload == *w && r.policy == a.policy && r.config_id == a.config_id)
            {
                for (i, x) in r.by_signature().iter().enumerate() {
                    sums[i].0 += x.0;
                    sums[i].1 += x.1;
                    sums[i].2 += x.2;
                    sums[i].3 += x.3;
                }
            }
            for (i, name) in SIG_COLUMNS.iter().enumerate() {
                let x = sums[i];
                let _ = writeln!(s, "| {w} | {name} | {} | {} | {} | {:.1} |", x.0, x.1, x.2, x.3);
            }
        }
        let _ = writeln!(s);
    }

    let _ = writeln!(s, "## False cancels of gpu-reaper configurations, by signature\n");
    let _ = writeln!(
        s,
        "Summed over every gpu-reaper configuration with a cancel stage and every seed; a configuration qualifies for the \
         recommendation only with zero false cancels on every row.\n"
    );
    let _ = writeln!(s, "| workload | configurations with false cancels | {} |", SIG_COLUMNS.join(" | "));
    let _ = writeln!(s, "|---|---:|{}", "---:|".repeat(SIG_COLUMNS.len()));
    for w in &workloads {
        let mut by = [0u64; 6];
        let mut configs_fc: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for r in rows
            .iter()
            .filter(|r| r.workload == *w && r.policy == "gpu-reaper" && r.cancel_after_s.is_some())
        {
            for (i, x) in r.by_signature().iter().enumerate() {
                by[i] += x.2;
            }
            if r.false_cancels > 0 {
                configs_fc.insert(&r.config_id);
            }
        }
        let cells: Vec<String> = by.iter().map(|x| x.to_string()).collect();
        let _ = writeln!(s, "| {w} | {} | {} |", configs_fc.len(), cells.join(" | "));
    }
    let _ = writeln!(s);

    serving_section(&mut s, rows, &aggs, workload_files);

    let _ = writeln!(s, "## Spin ceiling\n");
    let spin_up: Vec<&Aggregate> = aggs
        .iter()
        .filter(|a| {
            a.policy == "gpu-reaper"
                && a.first.cancel_after_s.is_some()
                && (a.first.spin_ceiling == "drain" || a.first.spin_ceiling == "cancel")
        })
        .collect();
    let shortest = spin_up.iter().filter_map(|a| a.first.cancel_after_s).min();
    let trap_spin_fc = |a: &Aggregate| -> u64 {
        rows.iter()
            .filter(|r| r.workload == "traps" && r.policy == a.policy && r.config_id == a.config_id)
            .map(|r| r.false_cancels_spin)
            .sum()
    };
    let with_fc = spin_up.iter().filter(|a| trap_spin_fc(a) > 0).count();
    let total_fc: u64 = spin_up.iter().map(|a| trap_spin_fc(a)).sum();
    let best_spin = spin_up
        .iter()
        .map(|a| {
            let rec: f64 = rows
                .iter()
                .filter(|r| r.policy == a.policy && r.config_id == a.config_id)
                .map(|r| r.recovered_gpu_h_spin)
                .sum();
            (round3(rec), a.config_id.as_str())
        })
        .max_by(|x, y| x.0.total_cmp(&y.0).then(y.1.cmp(x.1)));
    if workloads.iter().any(|w| w == "traps") && !spin_up.is_empty() {
        let _ = writeln!(
            s,
            "{} configurations raise the spin ceiling above alert and have a cancel stage (the shortest swept: {}). On the trap \
             workload, whose brief spins last 5–40 minutes, {} of them made spin false cancels ({} in all).",
            spin_up.len(),
            dur(shortest),
            with_fc,
            total_fc
        );
        if let Some((rec, id)) = best_spin {
            let _ = writeln!(
                s,
                "The most spin recovery among them: {rec:.1} GPU-hours from spin cancels ({id}, all workloads and seeds).\n"
            );
        }
        if with_fc == 0 {
            let _ = writeln!(
                s,
                "**Finding:** a spin ceiling of `cancel` caused no spin false cancel on the trap workload with any swept cancel \
                 stage of {} or more. Raising the spin ceiling above alert is safe on this evidence wherever a cancel stage of at \
                 least that dwell is itself safe (see the recommended configuration and the false-cancel table above). \
                 The evidence covers only the spins the simulator has (hung spins and brief productive spins); real \
                 clusters also show long, healthy phases at high util and low power (reports/real-traces.md, \
                 calibration), which it lacks: until it has them, deploy with the spin ceiling at `alert`.\n",
                dur(shortest)
            );
        } else {
            let _ = writeln!(
                s,
                "**Finding:** spin false cancels occurred on the trap workload: keep the spin ceiling at `alert`.\n"
            );
        }
    } else {
        let _ = writeln!(s, "The sweep had no trap workload or no configuration raising the spin ceiling with a cancel stage, so it says nothing about the spin ceiling.\n");
    }

    let _ = writeln!(s, "## Pareto front (gpu-reaper configurations)\n");
    let _ = writeln!(s, "| config | false cancels | recovered GPU-h | parameters |");
    let _ = writeln!(s, "|---|---:|---:|---|");
    for a in pareto(&aggs) {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {} |",
            a.config_id,
            a.false_cancels,
            a.recovered_gpu_h,
            describe(&a.first.params())
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "GPU-hours are counted within the simulated span. Alert latencies are from the onset of a job's non-productive \
         episode; cancel latencies from the onset of whole waste. Baselines name no signature, so their per-signature \
         columns are 0."
    );
    s
}

/// `frontier.svg`: recovered GPU-hours against false cancels (summed over every workload and
/// seed), the Pareto front highlighted and the baselines marked.
///
/// # Errors
/// A drawing error from plotters.
pub fn frontier_svg(rows: &[Row]) -> anyhow::Result<String> {
    use plotters::prelude::*;
    let aggs = aggregate(rows, None);
    let front = pareto(&aggs);
    let max_x = aggs.iter().map(|a| a.false_cancels).max().unwrap_or(1).max(1) as f64;
    let max_y = aggs.iter().map(|a| a.recovered_gpu_h.max(a.oracle_gpu_h)).fold(1.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("gpu-reaper sweep: recovered GPU-hours vs false cancels", ("sans-serif", 20))
            .margin(20)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..max_x * 1.05 + 0.5, 0f64..max_y * 1.08)
            .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?;
        chart
            .configure_mesh()
            .x_desc("false cancels (all workloads and seeds)")
            .y_desc("recovered GPU-hours")
            .draw()
            .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?;
        let grey = RGBColor(150, 150, 150);
        chart
            .draw_series(
                aggs.iter()
                    .filter(|a| a.policy == "gpu-reaper")
                    .map(|a| Circle::new((a.false_cancels as f64, a.recovered_gpu_h), 3, grey.filled())),
            )
            .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?
            .label("gpu-reaper configuration")
            .legend(move |(x, y)| Circle::new((x, y), 3, grey.filled()));
        chart
            .draw_series(LineSeries::new(
                front.iter().map(|a| (a.false_cancels as f64, a.recovered_gpu_h)),
                RED.stroke_width(2),
            ))
            .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?
            .label("Pareto front")
            .legend(|(x, y)| PathElement::new(vec![(x - 8, y), (x + 8, y)], RED.stroke_width(2)));
        chart
            .draw_series(
                front
                    .iter()
                    .map(|a| Circle::new((a.false_cancels as f64, a.recovered_gpu_h), 5, RED.filled())),
            )
            .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?;
        let colours = [BLUE, GREEN, MAGENTA, BLACK];
        for (i, a) in aggs.iter().filter(|a| a.policy != "gpu-reaper").enumerate() {
            let c = colours[i % colours.len()];
            let name = a.policy.clone();
            chart
                .draw_series(std::iter::once(TriangleMarker::new(
                    (a.false_cancels as f64, a.recovered_gpu_h),
                    8,
                    c.filled(),
                )))
                .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?
                .label(name)
                .legend(move |(x, y)| TriangleMarker::new((x, y), 6, c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("frontier.svg: {e}"))?;
    }
    Ok(svg)
}

/// `## Serving jobs and the QOS exemption`: false cancels of jobs in QOS
/// [`crate::score::SERVING_QOS`] by cancel stage, without and with that QOS exempt, and the best
/// configuration of each kind.
fn serving_section(s: &mut String, rows: &[Row], aggs: &[Aggregate], workloads: &[Workload]) {
    use crate::score::SERVING_QOS;
    let _ = writeln!(s, "## Serving jobs and the QOS exemption\n");
    let exempts = |r: &Row| r.exempt_qos.split('+').any(|q| q == SERVING_QOS);
    let reaper: Vec<&Row> = rows.iter().filter(|r| r.policy == "gpu-reaper").collect();
    if !reaper.iter().any(|r| exempts(r)) || !reaper.iter().any(|r| !exempts(r)) {
        let _ = writeln!(
            s,
            "The sweep did not compare configurations with and without `exempt.qos = [\"{SERVING_QOS}\"]`, so it says \
             nothing about the exemption.\n"
        );
        return;
    }
    let _ = writeln!(
        s,
        "Inference servers run as batch jobs (QOS `{SERVING_QOS}`, the `serving` kind of both workloads) sit at 0 % util \
         with memory held for 30 minutes to about 4.3 hours between bursts, as real serving pods do \
         (reports/real-traces.md): to the engine that is `hung`. False cancels of serving jobs, summed over every seed and \
         workload, by cancel stage:\n"
    );
    let _ = writeln!(
        s,
        "| cancel after | exempt qos | configurations | with serving false cancels | serving false cancels | all false cancels |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
    // (cancel_after_s, exempt) -> counts over that group's rows.
    #[derive(Default)]
    struct Group<'a> {
        configs: std::collections::BTreeSet<&'a str>,
        configs_with_serving_fc: std::collections::BTreeSet<&'a str>,
        serving_fc: u64,
        all_fc: u64,
    }
    let mut by: BTreeMap<(i64, bool), Group> = BTreeMap::new();
    for r in reaper.iter().filter(|r| r.cancel_after_s.is_some()) {
        let e = by.entry((r.cancel_after_s.unwrap_or(0), exempts(r))).or_default();
        e.configs.insert(&r.config_id);
        if r.false_cancels_serving > 0 {
            e.configs_with_serving_fc.insert(&r.config_id);
        }
        e.serving_fc += r.false_cancels_serving;
        e.all_fc += r.false_cancels;
    }
    for ((c, ex), g) in &by {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            dur(Some(*c)),
            if *ex { SERVING_QOS } else { "none" },
            g.configs.len(),
            g.configs_with_serving_fc.len(),
            g.serving_fc,
            g.all_fc
        );
    }
    let _ = writeln!(s);
    let safe_without: Vec<i64> = by
        .iter()
        .filter(|((_, ex), g)| !ex && g.serving_fc == 0)
        .map(|((c, _), _)| *c)
        .collect();
    let unsafe_without: Vec<i64> = by
        .iter()
        .filter(|((_, ex), g)| !ex && g.serving_fc > 0)
        .map(|((c, _), _)| *c)
        .collect();
    let best = |ex: bool| {
        recommend(
            &aggs
                .iter()
                .filter(|a| a.policy == "gpu-reaper" && exempts(&a.first) == ex)
                .cloned()
                .collect::<Vec<_>>(),
            workloads,
        )
        .cloned()
    };
    let list = |v: &[i64]| v.iter().map(|c| dur(Some(*c))).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        s,
        "**Finding:** without the exemption, every swept cancel stage of {} made serving false cancels; {}.",
        if unsafe_without.is_empty() {
            "–".to_string()
        } else {
            list(&unsafe_without)
        },
        if safe_without.is_empty() {
            "no swept cancel stage was free of them".to_string()
        } else {
            format!(
                "cancel stages of {} made none (the cancel stage counts from the start of a quiet period, and no serving job's quiet period in these worlds lasted that long; the window, drain and notice run alongside it, not after it)",
                list(&safe_without)
            )
        }
    );
    match (best(false), best(true)) {
        (Some(n), Some(e)) => {
            let _ = writeln!(
                s,
                "The best configuration without the exemption and zero false cancels is {} ({:.1} GPU-hours recovered, {} false \
                 drains); with `exempt.qos = [\"{SERVING_QOS}\"]` it is {} ({:.1} GPU-hours, {} false drains).\n",
                n.config_id, n.recovered_gpu_h, n.false_drains, e.config_id, e.recovered_gpu_h, e.false_drains
            );
        }
        (None, Some(e)) => {
            let _ = writeln!(
                s,
                "No configuration without the exemption has zero false cancels; with `exempt.qos = [\"{SERVING_QOS}\"]` the \
                 best is {} ({:.1} GPU-hours recovered).\n",
                e.config_id, e.recovered_gpu_h
            );
        }
        _ => {
            let _ = writeln!(s, "No configuration of either kind has zero false cancels.\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(id: &str, recovered_gpu_h: f64, false_cancels: u64, false_drains: u64) -> Aggregate {
        Aggregate {
            policy: "gpu-reaper".into(),
            config_id: id.into(),
            rows: 1,
            recovered_gpu_h,
            false_cancels,
            false_drains,
            ..Aggregate::default()
        }
    }

    #[test]
    fn the_front_shows_tied_points_by_the_recommendations_tie_break() {
        // c002 and c006 sit at the same point; c006 has fewer false drains.
        let aggs = [
            agg("c002", 50.0, 0, 9),
            agg("c006", 50.0, 0, 3),
            agg("c007", 40.0, 0, 0),
            agg("c010", 70.0, 2, 0),
        ];
        let rec = recommend(&aggs, &[]).expect("a zero-false-cancel configuration exists");
        assert_eq!(rec.config_id, "c006");
        let front: Vec<&str> = pareto(&aggs).iter().map(|a| a.config_id.as_str()).collect();
        assert_eq!(front, ["c006", "c010"]);
        assert_eq!(front[0], rec.config_id, "the front's zero-false-cancel point is the recommendation");
    }

    /// One row of `config` (warmup `warmup_s`) over world default seed 1 with the given
    /// outcome.
    fn row(config: &str, warmup_s: i64, recovered_gpu_h: f64, false_drains: u64, true_alerts: u64) -> Row {
        Row {
            policy: "gpu-reaper".into(),
            config_id: config.into(),
            workload: "default".into(),
            seed: 1,
            util_threshold_pct: Some(5.0),
            window_s: Some(2400),
            warmup_s: Some(warmup_s),
            max_sample_gap_s: Some(180),
            drain_after_s: Some(3600),
            cancel_after_s: Some(7200),
            notice_s: Some(1800),
            spin_ceiling: "alert".into(),
            jobs: 500,
            wasted_gpu_h: 200.0,
            recovered_gpu_h,
            oracle_recovered_gpu_h: 150.0,
            false_drains,
            true_alerts,
            false_alerts: 4,
            days: 7.0,
            ..Row::default()
        }
    }

    #[test]
    fn a_recommendation_tied_on_every_headline_metric_names_the_tied_configs_and_the_tie_break() {
        let rows = [
            row("c039", 900, 100.0, 3, 20),
            // Same outcome but fewer true alerts: the rule does not look at true alerts.
            row("c097", 900, 100.0, 3, 19),
            row("c012", 1800, 100.0, 3, 20),
            // Fewer GPU-hours: not tied.
            row("c050", 900, 90.0, 0, 20),
            // Same GPU-hours, more false drains: the rule separates it.
            row("c060", 900, 100.0, 4, 20),
        ];
        let md = summary_md(&rows, &[]);
        let rec = md.split("## Recommended configuration next to").next().unwrap();
        assert!(rec.contains("**c012**"), "{rec}");
        // The rule, tie-break included, is in the report itself.
        assert!(
            rec.contains("fewer false drains, then fewer false alerts, then the lowest config id"),
            "{rec}"
        );
        // The tie is said, the tied configurations named, and only those.
        assert!(rec.contains("**Tied:**"), "{rec}");
        assert!(rec.contains("c039, c097"), "{rec}");
        assert!(!rec.contains("c050") && !rec.contains("c060"), "{rec}");
        // How each differs from the one shown.
        assert!(rec.contains("c039: warmup 15m;"), "{rec}");
        assert!(rec.contains("c097: warmup 15m, 19 true alerts (c012: 20)."), "{rec}");
        let table = short_table(&rows, &[]);
        assert!(table.contains("tied with c012: c039, c097 "), "{table}");
        // Same input, same bytes, whatever the row order.
        assert_eq!(md, summary_md(&rows, &[]));
        let mut reversed = rows.clone();
        reversed.reverse();
        assert_eq!(md, summary_md(&reversed, &[]));
        // One tied configuration: named, with its difference.
        let rows = [row("c039", 900, 100.0, 3, 20), row("c097", 1800, 100.0, 3, 20)];
        let md = summary_md(&rows, &[]);
        assert!(
            md.contains("**Tied:** c097 also recovers 100.0 GPU-hours with 0 false cancels, 3 false drains and 4 false alerts, so the rule cannot separate it from c039; the lowest config id is shown. It differs from c039 in: warmup 30m.\n"),
            "{md}"
        );
    }

    #[test]
    fn a_recommendation_without_a_tie_says_none() {
        let rows = [row("c039", 900, 100.0, 3, 20), row("c097", 1800, 100.0, 4, 20)];
        let md = summary_md(&rows, &[]);
        assert!(md.contains("**c039**") && !md.contains("Tied"), "{md}");
        assert!(md.contains("then the lowest config id"), "{md}");
        assert!(!short_table(&rows, &[]).contains("tied"));
    }

    #[test]
    fn the_earliest_cancel_counts_drain_confirmation_window_and_notice_as_the_engine_does() {
        let mut p = row("c039", 900, 0.0, 0, 0).params();
        // window 40m, drain 1h, cancel 2h, notice 30m: max(2h, 1h + 1m + 40m, 40m + 30m) = 2h.
        assert_eq!(earliest_cancel_s(&p), Some(7200));
        // A short cancel stage waits for the drain to be confirmed a window before.
        p.cancel_after_s = Some(3600);
        assert_eq!(earliest_cancel_s(&p), Some(3600 + 60 + 2400));
        // A long notice waits from the first alert, a window after onset.
        p.notice_s = Some(3 * 3600);
        assert_eq!(earliest_cancel_s(&p), Some(2400 + 3 * 3600));
        p.cancel_after_s = None;
        assert_eq!(earliest_cancel_s(&p), None);
    }

    #[test]
    fn the_longest_trap_is_read_from_the_workload_leaving_out_exempt_qos_and_spins_below_cancel() {
        let traps = [Workload::builtin_traps()];
        let mut p = row("c039", 900, 0.0, 0, 0).params();
        p.exempt_qos = "serving".into();
        // The built-in trap workload's long staging: 30-120 minutes.
        assert_eq!(longest_trap(&p, &traps), Some((120.0, "traps", "long_staging", "staging")));
        // Without the exemption the serving jobs' quiet periods are the longest.
        p.exempt_qos = String::new();
        assert_eq!(longest_trap(&p, &traps).map(|x| (x.2, x.3)), Some(("serving", "quiet")));
        // Longer staging in the file: read, not assumed.
        let mut long = Workload::builtin_traps();
        long.kinds.iter_mut().find(|k| k.name == "long_staging").unwrap().staging_min = crate::dist::Range([150.0, 240.0]);
        p.exempt_qos = "serving".into();
        assert_eq!(longest_trap(&p, &[long.clone()]).map(|x| x.0), Some(240.0));
        // Brief spins count only for a spin ceiling of cancel.
        let spin = |ceiling: &str| {
            let mut w = long.clone();
            w.kinds.retain(|k| k.name == "brief_spin");
            w.kinds[0].staging_min = crate::dist::Range([0.0, 0.0]);
            w.kinds[0].checkpoint_every_min = None;
            let mut q = p.clone();
            q.spin_ceiling = ceiling.into();
            longest_trap(&q, &[w]).map(|x| x.3)
        };
        assert_eq!(spin("alert"), None);
        assert_eq!(spin("cancel"), Some("brief spin"));
    }

    /// Operator trial 23: a configuration whose earliest cancel comes before the longest trap
    /// phase of the sweep's workloads (a negative margin) is never recommended, though it
    /// recovers the most with zero false cancels on the seeds drawn; without the workloads at
    /// hand it is. Built-in traps: long staging up to 120 min; here up to 200.
    #[test]
    fn a_configuration_a_trap_could_outlast_is_not_recommended() {
        let aggs_of = |rows: &[Row]| aggregate(rows, None);
        let mut short = row("c001", 900, 500.0, 0, 0);
        short.cancel_after_s = Some(3 * 3600);
        let mut long = row("c002", 900, 400.0, 0, 0);
        long.cancel_after_s = Some(4 * 3600);
        let rows = [short, long];
        let aggs = aggs_of(&rows);
        let mut staging = Workload::builtin_traps();
        staging.kinds.iter_mut().find(|k| k.name == "long_staging").unwrap().staging_min = crate::dist::Range([30.0, 200.0]);
        staging.kinds.retain(|k| k.qos != "serving");
        let w = [staging];
        assert!(!trap_margin_ok(&aggs[0], &w) && trap_margin_ok(&aggs[1], &w));
        assert_eq!(recommend(&aggs, &w).map(|a| a.config_id.as_str()), Some("c002"));
        assert_eq!(recommend(&aggs, &[]).map(|a| a.config_id.as_str()), Some("c001"), "control");
        assert!(short_table(&rows, &w).contains("to deploy: c002"), "{}", short_table(&rows, &w));
        // The built-in traps (staging up to 120 min) leave both: c001's margin is 60 min.
        let mut builtin = Workload::builtin_traps();
        builtin.kinds.retain(|k| k.qos != "serving");
        assert_eq!(recommend(&aggs, &[builtin]).map(|a| a.config_id.as_str()), Some("c001"));
    }

    #[test]
    fn the_summary_names_the_deploy_variant_the_trap_margin_and_single_node_recovery() {
        let mut rec = row("c039", 900, 100.0, 0, 20);
        rec.spin_ceiling = "cancel".into();
        rec.exempt_qos = "serving".into();
        rec.cancels = 3;
        rec.recovered_single_node_gpu_h = 60.0;
        rec.drains = 8;
        rec.false_drains = 2;
        rec.drains_single_node = 5;
        rec.false_drains_single_node = 1;
        let mut deploy = row("c037", 900, 80.0, 0, 20);
        deploy.exempt_qos = "serving".into();
        deploy.cancels = 2;
        deploy.recovered_single_node_gpu_h = 50.0;
        deploy.drains = 6;
        deploy.false_drains = 3;
        deploy.drains_single_node = 4;
        deploy.false_drains_single_node = 2;
        let rows = [rec, deploy];
        let md = summary_md(&rows, &[Workload::builtin_traps()]);
        let head = md.split("## Recommended configuration next to").next().unwrap();
        assert!(head.contains("**c039**"), "{head}");
        assert!(head.contains("**To deploy: c037**"), "{head}");
        assert!(head.contains("recovers 80.0 GPU-hours of the oracle's 150.0 (53.3 %)"), "{head}");
        assert!(
            head.contains("Of the recovered GPU-hours 50.0 (33.3 % of the oracle's 150.0) come from single-node jobs"),
            "{head}"
        );
        assert!(
            head.contains(
                "8 drains, 2 of them false (25.0 % false-drain rate; 5 of the drains and 1 of the false ones were of \
                 single-node jobs, the only drains a per-node enforcer makes), withholding"
            ),
            "{head}"
        );
        // The deploy variant's own single-node drains.
        assert!(
            head.contains("6 drains, 3 of them false (50.0 % false-drain rate; 4 of the drains and 2 of the false ones"),
            "{head}"
        );
        assert!(head.contains("| traps | long_staging | normal | 30–120 |"), "{head}");
        assert!(
            head.contains("longest trap it could cancel: staging of `long_staging` (workload traps), up to 120 min; margin **0 min**"),
            "{head}"
        );
        // The tables show the deploy variant too.
        assert!(md.contains("| gpu-reaper | c037 | 80.0 | 50.0 |"), "{md}");
        // Without the workload files the section says so.
        assert!(summary_md(&rows, &[]).contains("The workload files were not at hand"));
    }
}
