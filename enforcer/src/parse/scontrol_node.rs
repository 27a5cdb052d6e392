//! `scontrol show node NAME` output: the node's state words and its Reason.
//!
//! Records are `Key=Value` tokens over several indented lines; values may contain spaces
//! (`OS=Linux 5.14 #1 SMP`), so a word without `=` belongs to the previous value. `Reason=`
//! runs to the end of its line and ends with `[user@time]`, which is stripped (the drain's
//! author and time are not part of the reason). State is `BASE+FLAG+...`, each word possibly
//! followed by a symbol (`*` not responding, `~` powered off, `#`, `!`, `%`, `$`, `@`, `^`, `-`).

use serde::Serialize;
use std::collections::BTreeMap;

/// State symbols (sinfo(1) NODE STATE CODES) and the flag each stands for.
pub const STATE_SYMBOLS: [(char, &str); 9] = [
    ('*', "NOT_RESPONDING"),
    ('~', "POWERED_OFF"),
    ('#', "POWERING_UP"),
    ('!', "POWER_DOWN_PENDING"),
    ('%', "POWERING_DOWN"),
    ('$', "MAINT"),
    ('@', "REBOOT_PENDING"),
    ('^', "REBOOTING"),
    ('-', "PLANNED"),
];

/// The prefix of every Reason the enforcer writes: `gpu-reaper: <signature> job <id>`.
pub const REASON_PREFIX: &str = "gpu-reaper: ";

/// One node as `scontrol show node` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct NodeState {
    /// `NodeName`.
    pub name: String,
    /// Every state word, upper case, without symbols: base first, then flags, e.g.
    /// `["MIXED", "DRAIN"]`. A state symbol adds its flag (see [`STATE_SYMBOLS`]), e.g.
    /// `DOWN*` gives `["DOWN", "NOT_RESPONDING"]` and `MIXED$` gives `["MIXED", "MAINT"]`.
    pub state: Vec<String>,
    /// `Reason` without the trailing `[user@time]`; `None` when absent or `(null)`/`none`.
    pub reason: Option<String>,
    /// Every other key, for `enforcer parse scontrol-node`.
    pub fields: BTreeMap<String, String>,
}

/// Why a `scontrol show node` text was rejected. The messages do not name the program: the
/// caller does, as configured (`crate::slurm::SlurmCli`, operator trial 16).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum NodeParseError {
    /// No `NodeName=` key.
    #[error("no NodeName= in the output ({0:?})")]
    NoNodeName(String),
    /// No `State=` key.
    #[error("no State= for node {0}")]
    NoState(String),
    /// scontrol said the node does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The text holds more than one node record (a wrapper, or a name that matched several
    /// nodes): which one is ours cannot be told. The first two NodeNames.
    #[error("more than one node record (NodeName={0} and NodeName={1}); expected exactly one")]
    MoreThanOneNode(String, String),
    /// A key is given twice in the record (outside the free-text Comment and Extra): which
    /// value holds cannot be told. The key and the NodeName.
    #[error("{0}= is given twice for node {1}; expected each key once")]
    RepeatedKey(String, String),
}

/// States under which the node may be drained by us: a node in any other state (drained,
/// down, failed, maintenance, reserved, not responding, powered off, rebooting, unknown flags)
/// is left alone.
pub const ORDINARY_STATES: [&str; 6] = ["IDLE", "MIXED", "ALLOCATED", "ALLOC", "MIX", "COMPLETING"];

impl NodeState {
    /// The GPUs Slurm has configured on the node: the sum of the counts of the `gpu` items of
    /// `Gres=` (`gpu:4`, `gpu:a100:4(S:0-1)`, `gpu:a100:2,gpu:v100:2`, `gpu:4,mps:400`; source:
    /// `scontrol show node`, slurm.conf(5) `Gres`). `Some(0)` when `Gres=` names no GPU or is
    /// `(null)`; `None` when it is absent or a GPU item cannot be read, or when it mixes an
    /// untyped item with typed ones (which would count GPUs twice). On a MIG node Slurm may
    /// count slices, more than nvidia-smi lists: the list then never reads as whole, the safe
    /// side.
    pub fn gres_gpus(&self) -> Option<u32> {
        let text = self.fields.get("Gres")?.trim();
        if text.is_empty() || text == "(null)" {
            return Some(0);
        }
        let (mut total, mut typed, mut untyped) = (0u32, false, false);
        let mut depth = 0u32;
        let mut start = 0;
        let mut items = Vec::new();
        for (i, c) in text.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.checked_sub(1)?,
                ',' if depth == 0 => {
                    items.push(&text[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if depth != 0 {
            return None;
        }
        items.push(&text[start..]);
        for item in items {
            let head = item.split('(').next().unwrap_or(item);
            let parts: Vec<&str> = head.split(':').collect();
            if parts[0] != "gpu" {
                continue;
            }
            match parts.len() {
                2 => untyped = true,
                3 => typed = true,
                _ => return None,
            }
            total = total.checked_add(parts.last()?.parse().ok()?)?;
        }
        (!(typed && untyped)).then_some(total)
    }

    /// When slurmd last started on the node, as `scontrol show node` prints it
    /// (`SlurmdStartTime=2026-11-30T03:10:10`; slurm.conf and gres.conf are read at that
    /// start). `None` when the field is absent, empty or `None` (slurmd not yet registered).
    /// Kept as text: only a change matters.
    pub fn slurmd_start_time(&self) -> Option<&str> {
        let v = self.fields.get("SlurmdStartTime")?.trim();
        (!v.is_empty() && v != "None" && v != "(null)" && v != "Unknown").then_some(v)
    }

    /// True when any state word is a drain (`DRAIN`, `DRAINING`, `DRAINED`).
    pub fn has_drain(&self) -> bool {
        self.state.iter().any(|s| s.starts_with("DRAIN"))
    }

    /// True when the node is in anything but an ordinary state (see [`ORDINARY_STATES`]).
    pub fn is_special(&self) -> bool {
        self.state
            .iter()
            .any(|s| !ORDINARY_STATES.contains(&s.as_str()) && s != "PLANNED" && s != "CLOUD")
    }

    /// True when some state word is neither ordinary nor a drain: the node is also down,
    /// failed, not responding, in maintenance, rebooting, powered off, reserved, ...
    pub fn is_special_besides_drain(&self) -> bool {
        self.state
            .iter()
            .any(|s| !ORDINARY_STATES.contains(&s.as_str()) && s != "PLANNED" && s != "CLOUD" && !s.starts_with("DRAIN"))
    }

    /// The job named in the Reason when the Reason is exactly one of ours.
    pub fn our_reason_job(&self) -> Option<String> {
        parse_reason(self.reason.as_deref()?).map(|(_, job)| job)
    }
}

/// The Reason the enforcer writes for a drain.
pub fn reason(signature: &str, job_id: &str) -> String {
    format!("{REASON_PREFIX}{signature} job {job_id}")
}

/// `(signature, job id)` when `text` is exactly a Reason of ours.
pub fn parse_reason(text: &str) -> Option<(String, String)> {
    let rest = text.trim().strip_prefix(REASON_PREFIX)?;
    let mut w = rest.split(' ');
    let (sig, kw, job) = (w.next()?, w.next()?, w.next()?);
    if w.next().is_some() || kw != "job" || sig.is_empty() || job.is_empty() {
        return None;
    }
    let id_ok = job.bytes().all(|b| b.is_ascii_digit() || b == b'_' || b == b'+');
    (id_ok && policy::signature::names().contains(&sig)).then(|| (sig.to_string(), job.to_string()))
}

/// Strips scontrol's trailing ` [user@time]` from a Reason.
pub fn strip_author(reason: &str) -> &str {
    let r = reason.trim_end();
    if r.ends_with(']') {
        if let Some(open) = r.rfind(" [") {
            if r[open..].contains('@') {
                return r[..open].trim_end();
            }
        }
    }
    r
}

/// Keys whose value is free text running to the end of its line (and over any further lines
/// that are not key lines): a node's `Comment` and `Extra`, set by admins and tools.
pub const FREE_TEXT_KEYS: [&str; 2] = ["Comment", "Extra"];

/// True when `k` can be a key of scontrol's `Key=Value` output.
fn is_key(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Parses `scontrol show node NAME` output: exactly one node record. More than one record (a
/// line starting `NodeName=` after the first), or a key given twice, is an error naming it,
/// never the first one picked.
pub fn parse(text: &str) -> Result<NodeState, NodeParseError> {
    let t = text.trim();
    if t.contains("not found") && !t.contains("NodeName=") {
        return Err(NodeParseError::NotFound(t.lines().next().unwrap_or("").chars().take(200).collect()));
    }
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut reason: Option<String> = None;
    // Reason state: not seen yet / its lines are being read / done. scontrol prints a
    // multi-line Reason as its first line (with the author) and each further line indented
    // deeper than a key line (src/api/node_info.c); they are kept, so such a Reason is never
    // exactly one of ours.
    let (mut reason_seen, mut in_reason) = (false, false);
    // The free-text key (Comment, Extra) whose value is being read: its line is not split
    // into keys, and lines after it that are not key lines (at the key indent, `Key=` first)
    // are more of its text (a Comment with a newline in it).
    let mut free_text: Option<String> = None;
    let key_indent = t.lines().nth(1).map_or(3, |l| l.len() - l.trim_start().len());
    let name_of = |fields: &BTreeMap<String, String>| fields.get("NodeName").cloned().unwrap_or_default();
    for (i, line) in t.lines().enumerate() {
        let l = line.trim_start();
        let indent = line.len() - l.len();
        if i > 0 && indent == 0 {
            if let Some(second) = l.strip_prefix("NodeName=") {
                let second = second.split_whitespace().next().unwrap_or("").to_string();
                return Err(NodeParseError::MoreThanOneNode(name_of(&fields), second));
            }
        }
        if l.is_empty() {
            continue;
        }
        if in_reason && indent > key_indent {
            if let Some(r) = reason.as_mut() {
                r.push('\n');
                r.push_str(l.trim_end());
            }
            continue;
        }
        in_reason = false;
        let key_line = (i == 0 || indent == key_indent) && l.split_once('=').is_some_and(|(k, _)| is_key(k));
        if let Some(k) = free_text.as_ref().filter(|_| !key_line) {
            if let Some(v) = fields.get_mut(k) {
                v.push('\n');
                v.push_str(line.trim_end());
            }
            continue;
        }
        free_text = None;
        if let Some(r) = l.strip_prefix("Reason=") {
            if reason_seen {
                return Err(NodeParseError::RepeatedKey("Reason".into(), name_of(&fields)));
            }
            reason_seen = true;
            in_reason = true;
            let r = strip_author(r);
            if !r.is_empty() && r != "(null)" && !r.eq_ignore_ascii_case("none") {
                reason = Some(r.to_string());
            }
            continue;
        }
        if let Some((k, v)) = l.split_once('=').filter(|(k, _)| FREE_TEXT_KEYS.contains(k)) {
            if fields.contains_key(k) {
                return Err(NodeParseError::RepeatedKey(k.into(), name_of(&fields)));
            }
            fields.insert(k.to_string(), v.trim_end().to_string());
            free_text = Some(k.to_string());
            continue;
        }
        let mut last: Option<String> = None;
        for word in l.split_whitespace() {
            match word.split_once('=') {
                Some((k, _)) if is_key(k) && fields.contains_key(k) => {
                    return Err(NodeParseError::RepeatedKey(k.into(), name_of(&fields)));
                }
                Some((k, v)) if is_key(k) => {
                    fields.insert(k.to_string(), v.to_string());
                    last = Some(k.to_string());
                }
                _ => {
                    if let Some(k) = &last {
                        if let Some(v) = fields.get_mut(k) {
                            v.push(' ');
                            v.push_str(word);
                        }
                    }
                }
            }
        }
    }
    let name = fields
        .get("NodeName")
        .cloned()
        .ok_or_else(|| NodeParseError::NoNodeName(t.chars().take(120).collect()))?;
    let st = fields.get("State").cloned().ok_or_else(|| NodeParseError::NoState(name.clone()))?;
    let mut state: Vec<String> = Vec::new();
    let mut flags: Vec<&str> = Vec::new();
    for w in st.split('+') {
        let clean: String = w.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        for c in w.chars() {
            if let Some((_, flag)) = STATE_SYMBOLS.iter().find(|(s, _)| *s == c) {
                flags.push(flag);
            }
        }
        if !clean.is_empty() {
            state.push(clean.to_ascii_uppercase());
        }
    }
    if state.is_empty() {
        return Err(NodeParseError::NoState(name));
    }
    for f in flags {
        if !state.iter().any(|s| s == f) {
            state.push(f.to_string());
        }
    }
    Ok(NodeState {
        name,
        state,
        reason,
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "NodeName=gpu001 Arch=x86_64 CoresPerSocket=32\n   OS=Linux 5.14.0-362 #1 SMP\n   State=MIXED+DRAIN ThreadsPerCore=1\n   Reason=gpu-reaper: idle job 1230_4 [root@2025-11-06T10:00:00]\n";

    #[test]
    fn reads_state_and_strips_author() {
        let n = parse(NODE).unwrap();
        assert_eq!(n.name, "gpu001");
        assert_eq!(n.state, vec!["MIXED", "DRAIN"]);
        assert!(n.has_drain() && n.is_special());
        assert_eq!(n.reason.as_deref(), Some("gpu-reaper: idle job 1230_4"));
        assert_eq!(n.our_reason_job().as_deref(), Some("1230_4"));
        assert_eq!(n.fields["OS"], "Linux 5.14.0-362 #1 SMP");
    }

    #[test]
    fn special_states() {
        for (st, special) in [
            ("IDLE", false),
            ("MIXED", false),
            ("ALLOCATED", false),
            ("DOWN*", true),
            ("IDLE+MAINT", true),
            ("MIXED+RESERVED", true),
            ("IDLE+DRAIN", true),
            ("FAIL", true),
            ("IDLE~", true),
            ("MIXED$", true),
            ("MIXED-", false),
            ("IDLE+POWERED_DOWN", true),
        ] {
            let n = parse(&format!("NodeName=n State={st}\n")).unwrap();
            assert_eq!(n.is_special(), special, "{st}");
        }
    }

    #[test]
    fn free_text_never_overrides_the_state_or_the_reason() {
        // Comment and Extra come after State and Reason (src/api/node_info.c) and are free text.
        let n = parse(
            "NodeName=gpu001 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason=bad PSU [admin@2026-01-01T00:00:00]\n   Comment=moved State=IDLE\nReason=gpu-reaper: idle job 5\n   Extra=State=MIXED\n",
        )
        .unwrap();
        assert_eq!(n.state, vec!["IDLE", "DRAIN"]);
        assert_eq!(n.reason.as_deref(), Some("bad PSU"));
        assert_eq!(n.our_reason_job(), None);
        assert_eq!(n.fields["Comment"], "moved State=IDLE\nReason=gpu-reaper: idle job 5");
        assert_eq!(n.fields["Extra"], "State=MIXED");
        // A multi-line Reason whose first line looks like ours is not exactly ours.
        let m = parse(
            "NodeName=gpu001 Arch=x86_64\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason=gpu-reaper: idle job 5 [admin@2026-01-01T00:00:00]\n          and a bad PSU, ticket 4411\n   Comment=x\n",
        )
        .unwrap();
        assert_eq!(m.reason.as_deref(), Some("gpu-reaper: idle job 5\nand a bad PSU, ticket 4411"));
        assert_eq!(m.our_reason_job(), None);
        assert_eq!(m.fields["Comment"], "x");
        assert_eq!(parse(NODE).unwrap().our_reason_job().as_deref(), Some("1230_4"));
    }

    #[test]
    fn more_than_one_node_record_is_an_error_naming_both() {
        // Trial 5: the second record was silently dropped and the first one used.
        let two = "NodeName=gpu001 Arch=x86_64 CoresPerSocket=32\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason=gpu-reaper: idle job 102 [root@2026-01-01T00:00:00]\nNodeName=gpu002 Arch=x86_64 CoresPerSocket=32\n   State=MIXED ThreadsPerCore=1\n";
        let e = parse(two).unwrap_err();
        assert_eq!(e, NodeParseError::MoreThanOneNode("gpu001".into(), "gpu002".into()));
        assert!(e.to_string().contains("gpu001") && e.to_string().contains("gpu002"), "{e}");
        // Records as `scontrol show node` prints them for several nodes: a blank line between.
        let blank = "NodeName=gpu001 State=IDLE\n\nNodeName=gpu003 State=MIXED\n";
        assert_eq!(
            parse(blank).unwrap_err(),
            NodeParseError::MoreThanOneNode("gpu001".into(), "gpu003".into())
        );
    }

    #[test]
    fn a_key_given_twice_is_an_error_naming_it() {
        // Trial 5: State= twice, the first was kept.
        let e = parse("NodeName=gpu001 Arch=x86_64 CoresPerSocket=32\n   State=MIXED ThreadsPerCore=1\n   State=DOWN\n").unwrap_err();
        assert_eq!(e, NodeParseError::RepeatedKey("State".into(), "gpu001".into()));
        assert!(e.to_string().contains("State") && e.to_string().contains("gpu001"), "{e}");
        let e = parse("NodeName=gpu001 NodeHostName=a\n   State=IDLE NodeHostName=b\n").unwrap_err();
        assert_eq!(e, NodeParseError::RepeatedKey("NodeHostName".into(), "gpu001".into()));
        let e = parse("NodeName=gpu001 State=IDLE+DRAIN\n   Reason=a [x@2026-01-01T00:00:00]\n   Reason=b\n").unwrap_err();
        assert_eq!(e, NodeParseError::RepeatedKey("Reason".into(), "gpu001".into()));
        // The real 22.05 capture has no key twice.
        let real = include_str!("../../tests/data/slurm-22.05-loopback/scontrol-show-node.txt");
        assert!(parse(real).is_ok(), "{:?}", parse(real));
    }

    #[test]
    fn only_exact_reasons_are_ours() {
        assert_eq!(parse_reason("gpu-reaper: hung job 93+1"), Some(("hung".into(), "93+1".into())));
        assert_eq!(parse_reason("gpu-reaper: hung job 93+1 and more"), None);
        assert_eq!(parse_reason("admin: gpu-reaper: hung job 93"), None);
        assert_eq!(parse_reason("gpu-reaper: sleepy job 93"), None);
        assert_eq!(strip_author("bad psu [admin@2024-01-01T00:00:00]"), "bad psu");
        assert_eq!(strip_author("see [ticket 12]"), "see [ticket 12]");
    }
    #[test]
    fn slurmd_start_time_is_read_only_when_shown() {
        let node = |v: Option<&str>| NodeState {
            name: "n1".into(),
            state: vec!["IDLE".into()],
            reason: None,
            fields: v.map(|g| ("SlurmdStartTime".to_string(), g.to_string())).into_iter().collect(),
        };
        for (v, want) in [
            (Some("2026-11-30T03:10:10"), Some("2026-11-30T03:10:10")),
            (Some("None"), None),
            (Some(""), None),
            (Some("Unknown"), None),
            (None, None),
        ] {
            assert_eq!(node(v).slurmd_start_time(), want, "{v:?}");
        }
        // Our own capture from Slurm 22.05 on loopback.
        let text = include_str!("../../tests/data/slurm-22.05-loopback/scontrol-show-node.txt");
        assert_eq!(parse(text).unwrap().slurmd_start_time(), Some("2026-11-30T03:10:10"));
    }

    #[test]
    fn gres_gpus_counts_the_gpu_items_of_gres() {
        let node = |gres: Option<&str>| NodeState {
            name: "n1".into(),
            state: vec!["IDLE".into()],
            reason: None,
            fields: gres.map(|g| ("Gres".to_string(), g.to_string())).into_iter().collect(),
        };
        for (gres, want) in [
            (Some("gpu:4"), Some(4)),
            (Some("gpu:a100:4(S:0-1)"), Some(4)),
            (Some("gpu:a100:2,gpu:v100:2"), Some(4)),
            (Some("gpu:4(S:0),mps:400"), Some(4)),
            (Some("gg:g0:1"), Some(0)),
            (Some("(null)"), Some(0)),
            (None, None),
            (Some("gpu:a100:x"), None),
            (Some("gpu"), None),
            (Some("gpu:4,gpu:a100:4"), None),
            (Some("gpu:4(S:0"), None),
            (Some("gpu:4(S:0))"), None),
        ] {
            assert_eq!(node(gres).gres_gpus(), want, "{gres:?}");
        }
    }
}
