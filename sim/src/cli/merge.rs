//! `sim merge`: joins the `sweep.csv` of each `sim sweep --shard i/N` run and writes the three
//! reports.

use anyhow::{bail, Context};
use std::path::PathBuf;

/// `sim merge` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Shard output folders (each holding a sweep.csv) or sweep.csv files.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub inputs: Vec<PathBuf>,
    /// Output folder for sweep.csv, frontier.svg and summary.md.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
}

/// Runs `sim merge`.
///
/// # Errors
/// Unreadable or malformed inputs, duplicate rows, output errors.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut parts = Vec::new();
    for p in &args.inputs {
        let file = if p.is_dir() { p.join("sweep.csv") } else { p.clone() };
        parts.push(crate::sweep::read_csv(&file).with_context(|| format!("reading shard {}", file.display()))?);
    }
    let rows = crate::sweep::merge_rows(parts)?;
    if rows.is_empty() {
        bail!("the inputs hold no rows");
    }
    super::write_reports(&args.out, &rows)?;
    super::emit(&crate::report::short_table(&rows));
    super::emit(&format!("merged {} rows into {}/\n", rows.len(), args.out.display()));
    Ok(())
}
