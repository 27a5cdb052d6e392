//! `sim calibrate`: compare the default workload's per-sample distributions of util, power and
//! memory used with the Seren CDFs of AcmeTrace (`../shared/traces/acme_util_cdfs/`), print the
//! Kolmogorov–Smirnov distance of each, and draw both CDFs into one SVG.

use anyhow::{Context, Result};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use traces::cdf::{ks_distance, QuantileCdf};

/// Arguments of `sim calibrate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload TOML file, or `default` / `traps`.
    #[arg(long, default_value = "default")]
    pub workload: String,
    /// RNG seed.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1)]
    pub seed: u64,
    /// Simulated span, days (the sweep's default span; above 0, at most 366).
    #[arg(long, allow_negative_numbers = true, default_value_t = 7.0)]
    pub days: f64,
    /// Folder holding `seren_GPU_UTIL_pct.csv`, `seren_GPU_POWER_W_aug2023.csv` and
    /// `seren_FB_USED_pct_of_80GB.csv`.
    #[arg(long, default_value = "../shared/traces/acme_util_cdfs")]
    pub cdfs: PathBuf,
    /// SVG to write. Without it, only the default run (workload `default`, seed 1, 7 days,
    /// the default CDF folder) writes `reports/calibration.svg`, the committed figure; any
    /// other run must name its SVG, so that it cannot replace that figure by accident.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Where the committed calibration figure lives (the default run's).
const DEFAULT_SVG: &str = "reports/calibration.svg";

impl Args {
    /// The SVG to write: `--svg`, or [`DEFAULT_SVG`] for the default run.
    ///
    /// # Errors
    /// A non-default run without `--svg`, naming the flags that make it non-default.
    fn svg_path(&self) -> Result<PathBuf> {
        if let Some(p) = &self.svg {
            return Ok(p.clone());
        }
        let mut flags = Vec::new();
        if self.workload != "default" {
            flags.push(format!("--workload {}", self.workload));
        }
        if self.seed != 1 {
            flags.push(format!("--seed {}", self.seed));
        }
        if self.days != 7.0 {
            flags.push(format!("--days {}", crate::budget::days_text(self.days)));
        }
        if self.cdfs != Path::new("../shared/traces/acme_util_cdfs") {
            flags.push(format!("--cdfs {}", self.cdfs.display()));
        }
        if flags.is_empty() {
            return Ok(PathBuf::from(DEFAULT_SVG));
        }
        anyhow::bail!(
            "{} {} this run differ from the default run, and only the default run writes {DEFAULT_SVG} without --svg (the committed figure, which this run would replace); give --svg FILE",
            flags.join(", "),
            if flags.len() == 1 { "makes" } else { "make" }
        )
    }
}

/// One compared metric.
#[derive(Clone, Debug)]
pub struct Metric {
    /// Name printed (`util_pct`, `power_w`, `mem_used_pct_of_80gib`).
    pub name: &'static str,
    /// Simulated samples, sorted.
    pub sim: Vec<f64>,
    /// The Seren reference.
    pub reference: QuantileCdf,
    /// KS distance.
    pub ks: f64,
}

/// The Seren tables compared, with the metric names.
pub const SEREN: [(&str, &str); 3] = [
    ("util_pct", "seren_GPU_UTIL_pct.csv"),
    ("power_w", "seren_GPU_POWER_W_aug2023.csv"),
    ("mem_used_pct_of_80gib", "seren_FB_USED_pct_of_80GB.csv"),
];

/// Generates the workload and measures the three distances. Memory used is compared as a
/// percentage of 80 GiB (81,920 MiB), as AcmeTrace reports it. Missing readings are left out.
///
/// # Errors
/// A metric with no simulated sample (naming workload, seed and days); an unreadable CDF file.
pub fn measure(w: &crate::Workload, seed: u64, days: f64, cdfs: &Path) -> Result<Vec<Metric>> {
    let world = crate::generate(w, seed, days);
    let mut util = Vec::new();
    let mut power = Vec::new();
    let mut mem = Vec::new();
    for c in &world.samples {
        let s = world.expand(c, 0);
        if let Some(u) = s.util_pct.get() {
            util.push(u);
        }
        if let Some(p) = s.power_w.get() {
            power.push(p);
        }
        if let Some(m) = s.mem_used_mib.get() {
            mem.push(m / 81_920.0 * 100.0);
        }
    }
    let mut out = Vec::new();
    for ((name, file), mut v) in SEREN.into_iter().zip([util, power, mem]) {
        anyhow::ensure!(
            !v.is_empty(),
            "workload {} seed {seed} over {} days gave no simulated sample with a {name} reading ({} samples in all), so there is nothing to compare with Seren; use more --days",
            w.name,
            crate::budget::days_text(days),
            world.samples.len()
        );
        let path = cdfs.join(file);
        // A missing file gets the hint about --cdfs; a bad one keeps its own line and column.
        let reference = if path.exists() {
            QuantileCdf::read(&path)?
        } else {
            QuantileCdf::read(&path).with_context(|| {
                format!(
                    "reading the Seren reference CDF: --cdfs (default ../shared/traces/acme_util_cdfs, relative to where you run sim) names the folder of AcmeTrace's CDFs, here {}; run from the repository's root with shared/ beside it, or give --cdfs",
                    cdfs.display()
                )
            })?
        };
        v.sort_by(f64::total_cmp);
        let ks = ks_distance(&v, &reference);
        out.push(Metric {
            name,
            sim: v,
            reference,
            ks,
        });
    }
    Ok(out)
}

/// Draws simulated and reference CDFs, one panel per metric.
pub fn draw(metrics: &[Metric], svg: &Path) -> Result<()> {
    if let Some(d) = svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let root = SVGBackend::new(svg, (1200, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, metrics.len().max(1)));
    for (m, area) in metrics.iter().zip(panels.iter()) {
        let x_max = m
            .reference
            .points
            .last()
            .map_or(1.0, |p| p.0)
            .max(m.sim.last().copied().unwrap_or(1.0))
            .max(1.0);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} (KS {:.3})", m.name, m.ks), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(0.0..x_max, 0.0..1.0)?;
        chart.configure_mesh().y_desc("CDF").draw()?;
        chart
            .draw_series(LineSeries::new(m.reference.points.iter().copied(), &BLUE))?
            .label("Seren")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLUE));
        let n = m.sim.len().max(1) as f64;
        let step = (m.sim.len() / 1000).max(1);
        let pts: Vec<(f64, f64)> = m
            .sim
            .iter()
            .enumerate()
            .step_by(step)
            .map(|(i, &v)| (v, (i + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, &RED))?
            .label("simulated")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], RED));
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    }
    root.present().with_context(|| format!("writing {}", svg.display()))?;
    Ok(())
}

/// The value at cumulative fraction `q` of sorted samples (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The value of a reference CDF at cumulative fraction `q`: the first point reaching it.
fn ref_quantile(c: &QuantileCdf, q: f64) -> f64 {
    c.points.iter().find(|p| p.1 >= q).or(c.points.last()).map_or(f64::NAN, |p| p.0)
}

/// Runs `sim calibrate`.
pub fn run(args: Args) -> Result<()> {
    use std::fmt::Write as _;
    let svg = args.svg_path()?;
    let w = crate::load_workload(&args.workload).with_context(|| format!("loading workload {}", args.workload))?;
    crate::budget::check_days(args.days)?;
    // The world, and util, power and memory as f64 per sample.
    crate::budget::check_memory(
        "sim calibrate",
        &[&w],
        args.days,
        crate::budget::WORLD_SAMPLE_BYTES + 3 * std::mem::size_of::<f64>() as u64,
    )?;
    let metrics = measure(&w, args.seed, args.days, &args.cdfs)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "calibration of workload {} (seed {}, {} days) against Seren:",
        w.name,
        args.seed,
        crate::budget::days_text(args.days)
    );
    for m in &metrics {
        let _ = writeln!(
            out,
            "  {:<24} KS distance {:.3} ({} simulated samples){}",
            m.name,
            m.ks,
            m.sim.len(),
            if m.ks <= 0.10 { "" } else { "  above 0.10" }
        );
        let zero_sim = m.sim.partition_point(|&v| v <= 0.0) as f64 / m.sim.len().max(1) as f64;
        let q = |f: f64| (quantile(&m.sim, f), ref_quantile(&m.reference, f));
        let (p25, p50, p75, p90) = (q(0.25), q(0.5), q(0.75), q(0.9));
        let _ = writeln!(
            out,
            "  {:<24} at 0: {:.1} % vs {:.1} %; p25 {:.1} vs {:.1}; p50 {:.1} vs {:.1}; p75 {:.1} vs {:.1}; p90 {:.1} vs {:.1} (simulated vs Seren)",
            "",
            100.0 * zero_sim,
            100.0 * m.reference.at(0.0),
            p25.0,
            p25.1,
            p50.0,
            p50.1,
            p75.0,
            p75.1,
            p90.0,
            p90.1
        );
    }
    draw(&metrics, &svg)?;
    let _ = writeln!(out, "wrote {}", svg.display());
    super::emit(&out);
    Ok(())
}
