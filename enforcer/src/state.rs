//! The state file: engine windows, node names, remembered actions and GPU attributions.
//! Written atomically (write a temporary file, fsync, rename, fsync the directory). A missing
//! file is a fresh start; a corrupt or unreadable one is logged by the caller and also means
//! a fresh start, which is safe: escalation begins again from the first alert.

use crate::attribution::{DeviceIndexTrust, KeptMap};
use crate::config::RunMode;
use crate::gpu_slots::GpuSlots;
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
    /// The node whose daemon wrote it (`enforcer.node`). Absent in older files, whose writer
    /// is the first name in `nodes` (a daemon that starts afresh interns its own node first).
    /// Only its writer restores a file: another node's names this one too once they shared a
    /// multi-node job (review 15).
    #[serde(default)]
    pub node: Option<String>,
    /// Node names behind the snapshot's node ids.
    pub nodes: NodeTable,
    /// The engine's windows.
    pub engine: EngineSnapshot,
    /// Alerts, notices, drains and cancels made.
    pub actions: ActionState,
    /// Kept GPU attributions per job id, each with the start time of the run it belongs to.
    pub attribution: KeptMap,
    /// The most GPUs nvidia-smi has listed on this node (see `Daemon::most_gpus_seen`), so a
    /// restart does not forget a GPU that has gone missing. Absent in older files (0).
    #[serde(default)]
    pub most_gpus_seen: usize,
    /// The GPUs Slurm configures on this node (`Gres=`, see `Daemon::slurm_gpus`), so a restart
    /// whose first `scontrol show node` fails still knows the list is short. Absent in older
    /// files (unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_gpus: Option<u32>,
    /// The configured node's NodeHostName last seen (see `Daemon::last_node_hostname`), so a
    /// restart while `scontrol show node` fails keeps the this-host hold. Absent in older
    /// files.
    #[serde(default)]
    pub last_node_hostname: Option<String>,
    /// Whether Slurm's device indices may place jobs on this node: its GPU set, the first
    /// confirmation, the contradiction that switched the rule off (see
    /// [`crate::attribution::DeviceIndexTrust`]). Absent in older files (nothing confirmed).
    /// Deleting this key (daemon stopped) re-enables a contradicted rule, which then waits
    /// for a new confirmation.
    #[serde(default)]
    pub device_index: DeviceIndexTrust,
    /// The engine's GPU id (slot) per GPU UUID (see [`crate::gpu_slots`]): the engine's
    /// windows are keyed by these slots. Absent in older files, whose windows were keyed by
    /// nvidia-smi index: their windows are not restored (warmup starts again).
    #[serde(default)]
    pub gpu_slots: Option<GpuSlots>,
    /// Runs (job id, start time) seen with a process on a MIG device: MIG jobs for the rest
    /// of their run, though their processes come and go (review 22). Absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_jobs: Vec<(String, Option<i64>)>,
    /// Runs (job id, start time) seen with a process on a GPU outside their Slurm device
    /// indices: held at alert for the rest of their run, across restarts and mode changes
    /// (review 33: after a restart the hold was gone, the kept placement on the other GPU was
    /// not, and the working job was cancelled on that GPU's idle readings). Absent in older
    /// files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index_disagreed: Vec<(String, Option<i64>)>,
    /// The (GPU UUID, codec field) pairs that have given a value (see the daemon's
    /// `codec_seen`). Absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codec_seen: Vec<(String, u8)>,
    /// Runs (job id, start time) seen on the node beside hidden memory (see the daemon's
    /// `hidden_runs`). Absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_runs: Vec<(String, Option<i64>)>,
    /// The last cycle (epoch seconds) in which nvidia-smi refused the codec fields (see the
    /// daemon's `codec_unread_last_s`): every job is held at alert until a full window has
    /// passed since. Absent in older files and when no such cycle is within a window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec_unread_last_s: Option<i64>,
}

/// The node whose daemon wrote `s`: its `node`, or in an older file without one, the first
/// node it interned (a daemon starting afresh interns its own node first); `None` when the
/// file names no node at all.
pub fn writer(s: &StateFile) -> Option<&str> {
    match &s.node {
        Some(n) => Some(n.as_str()),
        None => (!s.nodes.is_empty()).then(|| s.nodes.name(policy::NodeId(0))),
    }
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

/// Refuses a state file that exists but cannot be read (a permission, an I/O error): it may
/// hold admins' overrides of our drains and the hourly budgets, which a fresh start would
/// forget (review 13), and it is no corrupt file to move aside. The daemon does not start;
/// the error names the file and the OS error. A missing file, or one that reads but does not
/// parse, is for [`load`].
pub fn check_readable(path: &Path) -> anyhow::Result<()> {
    // A symlink to nothing (a volume that did not mount) is no fresh start either (trial 8).
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) && !path.exists() {
        anyhow::bail!(
            "state file {} is a symbolic link to {}, which does not exist (a volume not mounted?); the daemon does not start, since a fresh start would forget admins' overrides and the hourly budgets",
            path.display(),
            std::fs::read_link(path).map_or_else(|e| format!("an unreadable target ({e})"), |t| t.display().to_string())
        );
    }
    match std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut [0u8; 1])) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => anyhow::bail!(
            "state file {} exists but cannot be read ({e}); it may hold admins' overrides of our drains and the hourly budgets, so the daemon does not start without it: give the daemon's user access to it (or, to start afresh on purpose, move it away)",
            path.display()
        ),
    }
}

/// Refuses a state file written by a newer gpu-reaper: a `version` above [`STATE_VERSION`],
/// or this version with a key or value this binary does not know (a newer release adds
/// fields without a new version when older files still read correctly). Such a file is no
/// corrupt one: it holds notices' promised times, admins' overrides and the hourly budgets,
/// and an older binary that dropped it, or read it without the keys it does not know, could
/// drain or cancel before a time a user was told. So after a rollback the daemon does not
/// start; the error names the file, the version or the key, and the two ways on. A missing
/// file, an older version, or one that does not parse as a state at all is for [`load`]
/// (a fresh start, the file moved aside).
pub fn check_not_newer(path: &Path) -> anyhow::Result<()> {
    let Ok(text) = std::fs::read(path) else {
        return Ok(());
    };
    #[derive(Deserialize)]
    struct Probe {
        version: u32,
    }
    let Ok(probe) = serde_json::from_slice::<Probe>(&text) else {
        return Ok(());
    };
    let ways = "run the gpu-reaper that wrote it, or, to start afresh on purpose (forgetting the times users were told, admins' overrides and the hourly budgets), move the file away";
    if probe.version > STATE_VERSION {
        anyhow::bail!(
            "state file {} has format version {}, written by a newer gpu-reaper; this one reads version {STATE_VERSION}; the daemon does not start: {ways}",
            path.display(),
            probe.version
        );
    }
    if probe.version == STATE_VERSION {
        if let Err(e) = serde_json::from_slice::<StateFile>(&text) {
            let what = e.to_string();
            if what.starts_with("unknown field") || what.starts_with("unknown variant") {
                anyhow::bail!(
                    "state file {} holds what this gpu-reaper does not know ({what}): written by another release of gpu-reaper, most likely a newer one; the daemon does not start: {ways}",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// Loads the state file at `path`. A job whose windows do not parse is left out with a
/// WARN naming it (see `salvage`).
pub fn load(path: &Path) -> Loaded {
    load_with(path, true)
}

/// [`load`] without the WARNs about jobs left out: for a look at the file before the daemon
/// loads it (and warns) itself, so that each WARN is logged once (operator trial 16).
pub fn load_quietly(path: &Path) -> Loaded {
    load_with(path, false)
}

fn load_with(path: &Path, warn: bool) -> Loaded {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::Missing,
        Err(e) => return Loaded::Corrupt(format!("{}: {e}", path.display())),
    };
    let parsed = serde_json::from_slice::<StateFile>(&text).or_else(|e| salvage(path, &text, warn).ok_or(e));
    match parsed {
        Ok(s) if s.version == STATE_VERSION => Loaded::State(Box::new(s)),
        Ok(s) => Loaded::Corrupt(format!("{}: version {} (expected {STATE_VERSION})", path.display(), s.version)),
        Err(e) => Loaded::Corrupt(format!("{}: {e}", path.display())),
    }
}

/// A state file that does not parse only because some jobs' engine windows do not (a value
/// of the wrong type: a fraction, a negative or a string where a count belongs, from a
/// hand edit or damage), read without those jobs' windows, each left out with a WARN naming
/// the job and what does not parse. Those jobs gather a full window again, as when their
/// windows hold values no engine writes (`Engine::restore_dropped`); the rest of the file
/// (admins' overrides, the hourly budgets, the times users were told) is kept (trial 15: a
/// fraction in one job's window dropped the whole file, and a drain an admin had resumed was
/// made again). `None` when the file does not parse with every unreadable job left out, or
/// when no job's windows are the problem: then the file is corrupt, as before.
fn salvage(path: &Path, text: &[u8], warn: bool) -> Option<StateFile> {
    let mut v: serde_json::Value = serde_json::from_slice(text).ok()?;
    let engine = v.get_mut("engine")?.as_object_mut()?;
    let head: serde_json::Map<String, serde_json::Value> = engine
        .iter()
        .filter(|(k, _)| k.as_str() != "jobs")
        .map(|(k, x)| (k.clone(), x.clone()))
        .collect();
    let jobs = engine.get_mut("jobs")?.as_array_mut()?;
    let mut dropped = Vec::new();
    jobs.retain(|job| {
        let mut one = head.clone();
        one.insert("jobs".into(), serde_json::Value::Array(vec![job.clone()]));
        match serde_json::from_value::<EngineSnapshot>(serde_json::Value::Object(one)) {
            Ok(_) => true,
            Err(e) => {
                let id = job.get("job_id").and_then(|x| x.as_str()).unwrap_or("(no job_id)").to_string();
                dropped.push((id, e.to_string()));
                false
            }
        }
    });
    // A key or variant this binary does not know is a newer release's, never a typo: that
    // file is not read at all (`check_not_newer`).
    if dropped.is_empty()
        || dropped
            .iter()
            .any(|(_, e)| e.starts_with("unknown field") || e.starts_with("unknown variant"))
    {
        return None;
    }
    let s: StateFile = serde_json::from_value(v).ok()?;
    for (job_id, problem) in dropped.iter().filter(|_| warn) {
        tracing::warn!(path = %path.display(), job_id = %job_id, problem = %problem, "state file: this job's windows do not parse, so they are not restored; the job's evidence is gathered afresh (the rest of the file is restored)");
    }
    Some(s)
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

/// The name of the lock file in `state_dir` ([`lock_state_dir`]).
pub const LOCK_FILE: &str = "lock";

/// An exclusive lock on a state_dir, held until dropped (or until the process ends, when the
/// kernel releases it: a crash never leaves a stale lock). The lock file itself is left in
/// place; its presence means nothing, only the lock on it does.
#[derive(Debug)]
pub struct StateDirLock {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl StateDirLock {
    /// True while the lock file at the state_dir's path is still the file this lock holds.
    /// False once it was removed or replaced, or the state_dir was moved or recreated: the
    /// lock then no longer keeps a second enforcer out of the path this one writes to, so the
    /// daemon stops (see `run` in main.rs).
    pub fn is_current(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
            _ => false,
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The node lock of enforce mode: `<enforce_lock_dir>/gpu-reaper-enforce-<node>.lock`.
pub fn enforce_lock_path(enforce_lock_dir: &Path, node: &str) -> std::path::PathBuf {
    enforce_lock_dir.join(format!("gpu-reaper-enforce-{node}.lock"))
}

/// Takes enforce mode's node lock (see [`enforce_lock_path`]), creating `enforce_lock_dir` if
/// needed: one enforcing daemon per node, whatever its state_dir (trial 11: a second daemon
/// with its own state_dir, as the state_dir lock's message then advised, sent every notice
/// twice, took the first one's drain for its own and cancelled within its own budget).
///
/// Errors: [`LockError::NodeHeld`] when another process holds it; [`LockError::Io`] when the
/// directory or file cannot be made or locked.
pub fn lock_node_for_enforce(enforce_lock_dir: &Path, node: &str) -> Result<StateDirLock, LockError> {
    let lock = enforce_lock_path(enforce_lock_dir, node);
    let io = |source| LockError::Io {
        dir: format!("enforcer.enforce_lock_dir {}", enforce_lock_dir.display()),
        lock: lock.display().to_string(),
        source,
    };
    std::fs::create_dir_all(enforce_lock_dir).map_err(io)?;
    flock_exclusive(&lock).map_err(|e| match e {
        Some(source) => io(source),
        None => LockError::NodeHeld {
            node: node.to_string(),
            lock: lock.display().to_string(),
        },
    })
}

/// An exclusive, non-blocking flock(2) on `path`, creating the file if needed; `Err(None)`
/// when another open file holds it.
fn flock_exclusive(path: &Path) -> Result<StateDirLock, Option<std::io::Error>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(Some)?;
    // flock(2) directly rather than `File::try_lock` (the same call, stable only since Rust
    // 1.89; the workspace's rust-version is older).
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor owned by `file`, which outlives the call.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(StateDirLock {
            file,
            path: path.to_path_buf(),
        });
    }
    let e = std::io::Error::last_os_error();
    Err((e.kind() != std::io::ErrorKind::WouldBlock).then_some(e))
}

/// Why a state_dir could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process (another enforcer) holds the lock.
    #[error(
        "state_dir {dir} is held by another enforcer (lock on {lock}); two enforcers on one state_dir would both alert, notify, drain and cancel and overrun the hourly budgets. Stop the other one (systemctl status gpu-reaper-enforcer; or `fuser {lock}` finds it), or, to run one beside it, give this one its own state_dir in observe mode (enforce mode allows one daemon per node)"
    )]
    Held {
        /// The state_dir.
        dir: String,
        /// The lock file.
        lock: String,
    },
    /// Another process (another enforcer in enforce mode) holds the node's enforce lock.
    #[error(
        "node {node} is already enforced by another enforcer (lock on {lock}): two enforcing daemons for one node would each notify, drain and cancel within their own hourly budgets, and each take the other's drains for its own. Stop the other one (systemctl status gpu-reaper-enforcer; or `fuser {lock}` finds it), or run this one in observe mode"
    )]
    NodeHeld {
        /// The node.
        node: String,
        /// The lock file.
        lock: String,
    },
    /// The lock file could not be opened or locked.
    #[error("{dir}: cannot lock {lock}: {source}")]
    Io {
        /// What was being locked: the state_dir, or the enforce_lock_dir.
        dir: String,
        /// The lock file.
        lock: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Takes an exclusive, non-blocking lock (flock(2)) on
/// `state_dir/lock`, creating the file if needed. `state_dir` must exist.
///
/// Errors: [`LockError::Held`] when another open of that file (another process, or another
/// handle in this one) holds the lock; [`LockError::Io`] when it cannot be opened or locked.
/// The file is opened close-on-exec (as std opens every file), so a child such as squeue
/// never inherits the lock and an abandoned child never keeps it.
pub fn lock_state_dir(state_dir: &Path) -> Result<StateDirLock, LockError> {
    let lock = state_dir.join(LOCK_FILE);
    flock_exclusive(&lock).map_err(|e| match e {
        Some(source) => LockError::Io {
            dir: format!("state_dir {}", state_dir.display()),
            lock: lock.display().to_string(),
            source,
        },
        None => LockError::Held {
            dir: state_dir.display().to_string(),
            lock: lock.display().to_string(),
        },
    })
}

/// Moves an unreadable state file at `path` aside to `<path>.corrupt-<now_s>` (with `-2`,
/// `-3`, … appended if that name is taken), so a fresh start never overwrites it. Returns
/// the new path.
pub fn move_aside(path: &Path, now_s: i64) -> std::io::Result<std::path::PathBuf> {
    let base = format!("{}.corrupt-{now_s}", path.display());
    let mut to = std::path::PathBuf::from(&base);
    let mut n = 1;
    while to.exists() {
        n += 1;
        to = std::path::PathBuf::from(format!("{base}-{n}"));
    }
    std::fs::rename(path, &to)?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_state_dir_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_state_dir(dir.path()).unwrap();
        match lock_state_dir(dir.path()) {
            Err(e @ LockError::Held { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains(&dir.path().display().to_string()) && m.contains("another enforcer"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        drop(first);
        lock_state_dir(dir.path()).unwrap();
    }

    #[test]
    fn a_state_file_that_cannot_be_read_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        // Missing: fine (a fresh start). Readable: fine (load decides).
        assert!(check_readable(&path).is_ok());
        std::fs::write(&path, "{}").unwrap();
        assert!(check_readable(&path).is_ok());
        // Present but unreadable (a directory here; EACCES or EIO in the field).
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let e = check_readable(&path).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("cannot be read") && e.contains("overrides"),
            "{e}"
        );
        // A symlink to nothing (trial 8).
        std::fs::remove_dir(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("mnt/state.json"), &path).unwrap();
        let e = check_readable(&path).unwrap_err().to_string();
        assert!(e.contains("symbolic link") && e.contains("mnt/state.json"), "{e}");
    }

    /// Session 6 left this: a state file from a newer release (a new key, a new version) was
    /// moved aside by an older binary after a rollback, and the promises and overrides went
    /// with it. Now the start stops, and the file stays where it is.
    #[test]
    fn a_state_file_from_a_newer_release_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        // Missing, garbage, an older version: for `load` (a fresh start).
        assert!(check_not_newer(&path).is_ok());
        std::fs::write(&path, "{ not json").unwrap();
        assert!(check_not_newer(&path).is_ok());
        std::fs::write(&path, r#"{"version": 2, "mode": "observe"}"#).unwrap();
        assert!(check_not_newer(&path).is_ok());
        // This version and well formed: fine; with a key added by a newer release: refused.
        let state = StateFile {
            version: STATE_VERSION,
            mode: RunMode::Enforce,
            saved_s: 1_900_000_000,
            node: Some("n1".into()),
            nodes: NodeTable::new(),
            engine: policy::Engine::new(policy::Policy::default(), policy::Mode::Enforce).snapshot(1_900_000_000),
            actions: ActionState::default(),
            attribution: KeptMap::new(),
            most_gpus_seen: 0,
            slurm_gpus: None,
            last_node_hostname: None,
            device_index: DeviceIndexTrust::default(),
            gpu_slots: None,
            mig_jobs: Vec::new(),
            index_disagreed: Vec::new(),
            codec_seen: Vec::new(),
            codec_unread_last_s: None,
            hidden_runs: Vec::new(),
        };
        save(&path, &state).unwrap();
        assert!(check_not_newer(&path).is_ok());
        assert!(matches!(load(&path), Loaded::State(_)));
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["promised_by_a_later_release"] = serde_json::json!(true);
        std::fs::write(&path, v.to_string()).unwrap();
        let e = check_not_newer(&path).unwrap_err().to_string();
        assert!(e.contains("promised_by_a_later_release") && e.contains("newer one"), "{e}");
        assert!(e.contains(&path.display().to_string()) && e.contains("move the file away"), "{e}");
        // A newer version: refused, naming both versions.
        v.as_object_mut().unwrap().remove("promised_by_a_later_release");
        v["version"] = serde_json::json!(STATE_VERSION + 1);
        std::fs::write(&path, v.to_string()).unwrap();
        let e = check_not_newer(&path).unwrap_err().to_string();
        assert!(
            e.contains(&format!("version {}", STATE_VERSION + 1)) && e.contains(&format!("reads version {STATE_VERSION}")),
            "{e}"
        );
        // A broken value of a known key is corruption, not a newer release.
        v["version"] = serde_json::json!(STATE_VERSION);
        v["saved_s"] = serde_json::json!("yesterday");
        std::fs::write(&path, v.to_string()).unwrap();
        assert!(check_not_newer(&path).is_ok());
    }

    #[test]
    fn a_corrupt_state_file_is_moved_aside_never_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        std::fs::write(&p, "{ not json").unwrap();
        let a = move_aside(&p, 1_900_000_000).unwrap();
        assert_eq!(a, dir.path().join("state.json.corrupt-1900000000"));
        assert!(!p.exists());
        std::fs::write(&p, "second").unwrap();
        let b = move_aside(&p, 1_900_000_000).unwrap();
        assert_eq!(b, dir.path().join("state.json.corrupt-1900000000-2"));
        assert_eq!(std::fs::read_to_string(a).unwrap(), "{ not json");
        assert_eq!(std::fs::read_to_string(b).unwrap(), "second");
    }
}
