//! `sim merge`: joins the `sweep.csv` of each `sim sweep --shard i/N` run and writes the three
//! reports, after checking with each shard's `shard.toml` that the shards are exactly the
//! shards `0..N` of one sweep.

use crate::manifest::{self, ShardManifest};
use anyhow::{bail, Context};
use std::path::PathBuf;

/// `sim merge` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Shard output folders (each holding a sweep.csv and a shard.toml) or their sweep.csv files.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub inputs: Vec<PathBuf>,
    /// Output folder for sweep.csv, frontier.svg and summary.md. Required: `reports/` holds
    /// the default run's committed reports, which a merge of other shards would replace
    /// (`--out reports` replaces them on purpose).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `sim merge`.
///
/// # Errors
/// An input that does not exist (named as given), unreadable or malformed inputs, a shard
/// without `shard.toml`, shards of different sweeps, a shard given twice, an incomplete set, a
/// `sweep.csv` whose row count differs from its manifest or holding a row the shard did not
/// run (workload, seed, configuration or days edited), duplicate rows, output errors.
pub fn run(args: Args) -> anyhow::Result<()> {
    super::check_out(&args.out)?;
    // Writing the merged reports into a shard's own folder would overwrite its sweep.csv and
    // leave that shard unmergeable: refuse before reading anything.
    if let Ok(out) = args.out.canonicalize() {
        for p in &args.inputs {
            let dir = if p.is_dir() {
                p.clone()
            } else {
                p.parent().map(PathBuf::from).unwrap_or_default()
            };
            let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
            if dir.canonicalize().is_ok_and(|d| d == out) {
                bail!(
                    "--out {}: is the shard folder {}; merging there would overwrite that shard's sweep.csv. Give another folder",
                    args.out.display(),
                    p.display()
                );
            }
        }
    }
    let mut parts = Vec::new();
    let mut manifests = Vec::new();
    for p in &args.inputs {
        if !p.exists() {
            bail!(
                "{}: no such file or directory; give each shard's output folder (holding sweep.csv and {}) or its sweep.csv",
                p.display(),
                manifest::FILE_NAME
            );
        }
        let (dir, file) = if p.is_dir() {
            (p.clone(), p.join("sweep.csv"))
        } else {
            let dir = p.parent().map_or_else(
                || PathBuf::from("."),
                |d| {
                    if d.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        d.to_path_buf()
                    }
                },
            );
            if !dir.join(manifest::FILE_NAME).is_file() {
                bail!(
                    "{}: not a directory, and there is no {} next to it (in {}); give each shard's output folder (holding sweep.csv and {}) or its sweep.csv",
                    p.display(),
                    manifest::FILE_NAME,
                    dir.display(),
                    manifest::FILE_NAME
                );
            }
            (dir, p.clone())
        };
        let m = ShardManifest::read(&dir)?;
        let rows = crate::sweep::read_csv(&file).with_context(|| format!("reading shard {}", file.display()))?;
        if rows.len() != m.rows {
            bail!(
                "shard {}: sweep.csv holds {} rows but its {} says {}; was sweep.csv overwritten by another run?",
                dir.display(),
                rows.len(),
                manifest::FILE_NAME,
                m.rows
            );
        }
        m.check_rows(&dir, &file, &rows)?;
        parts.push(rows);
        manifests.push((dir, m));
    }
    manifest::check_set(&manifests)?;
    let rows = crate::sweep::merge_rows(parts)?;
    if rows.is_empty() {
        bail!("the inputs hold no rows");
    }
    let m = &manifests[0].1;
    let runners = m.configs + if m.baselines { crate::baseline::Baseline::ALL.len() } else { 0 };
    let want = runners * m.workloads.len() * m.seeds.len();
    if rows.len() != want {
        bail!("the shards hold {} rows together but their sweep has {want} runs", rows.len());
    }
    super::write_reports(&args.out, &rows, &m.builtin_workloads())?;
    super::emit(&crate::report::short_table(&rows, &m.builtin_workloads()));
    super::emit(&format!("merged {} rows into {}/\n", rows.len(), args.out.display()));
    Ok(())
}
