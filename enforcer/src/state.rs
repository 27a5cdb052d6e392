//! The state file: engine windows, node names, remembered actions and GPU attributions.
//! Written atomically (write a temporary file, fsync, rename, fsync the directory). A missing
//! file is a fresh start; a corrupt or unreadable one is logged by the caller and also means
//! a fresh start, which is safe: escalation begins again from the first alert.

use crate::attribution::KeptMap;
use crate::config::RunMode;
use crate::plan::ActionState;
use policy::{EngineSnapshot, NodeTable};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The current state-file format. Version 3 stores each GPU's window as its entries and
/// clocks only (counts and sums are rebuilt on load) and no escalation (a restart never
/// kept it); version 2 keyed kept attributions by job id and start time (version 1 had job
/// id only). A file of an older version is not read, which is a fresh start.
pub const STATE_VERSION: u32 = 3;

/// Everything persisted between cycles and across restarts.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The mode that wrote it; a different mode at load drops hypothetical records.
    pub mode: RunMode,
    /// When it was written, epoch seconds.
    pub saved_s: i64,
    /// Node names behind the snapshot's node ids.
    pub nodes: NodeTable,
    /// The engine's windows.
    pub engine: EngineSnapshot,
    /// Alerts, notices, drains and cancels made.
    pub actions: ActionState,
    /// Kept GPU attributions per job id, each with the start time of the run it belongs to.
    pub attribution: KeptMap,
}

/// What loading found.
#[derive(Debug)]
pub enum Loaded {
    /// No state file: first start.
    Missing,
    /// A usable state.
    State(Box<StateFile>),
    /// Unreadable or corrupt; the problem, for the log.
    Corrupt(String),
}

/// Loads the state file at `path`.
pub fn load(path: &Path) -> Loaded {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::Missing,
        Err(e) => return Loaded::Corrupt(format!("{}: {e}", path.display())),
    };
    match serde_json::from_slice::<StateFile>(&text) {
        Ok(s) if s.version == STATE_VERSION => Loaded::State(Box::new(s)),
        Ok(s) => Loaded::Corrupt(format!("{}: version {} (expected {STATE_VERSION})", path.display(), s.version)),
        Err(e) => Loaded::Corrupt(format!("{}: {e}", path.display())),
    }
}

/// Writes `state` to `path` atomically.
pub fn save(path: &Path, state: &StateFile) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("state")));
    {
        let mut f = std::fs::File::create(&tmp)?;
        serde_json::to_writer(&mut f, state).map_err(std::io::Error::other)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
