//! Prometheus text exposition (format 0.0.4) of the enforcer's counters, and a minimal
//! HTTP server for it. No metric carries a job id label (cardinality; job ids are in the
//! logs and the audit log).
//!
//! The page is hand-written rather than built with prometheus-client: it is a few counters
//! and gauges with fixed label sets, and one GET handler on loopback does not justify an
//! async HTTP stack in a daemon whose job is to stay small and predictable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The enforcer's metrics. Counters only grow; gauges describe the last cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Gauge: findings in the last cycle by (verdict, signature, partition).
    pub findings: BTreeMap<(String, String, String), u64>,
    /// Gauge: estimated wasted GPU-hours of the current confirmed breaches (findings whose
    /// cause is [`policy::Cause::Breach`]; not jobs still `watching`), by signature.
    pub wasted_gpu_h: BTreeMap<String, f64>,
    /// Counter: actions by (action, outcome); outcome is done, would, already_gone, failed.
    pub actions: BTreeMap<(String, String), u64>,
    /// Counter: action errors by action.
    pub action_errors: BTreeMap<String, u64>,
    /// Counter: read errors by (source, kind); kinds pass through [`bounded_kind`].
    pub read_errors: BTreeMap<(String, String), u64>,
    /// Counter: jobs or actions skipped by reason (ambiguous_attribution, node_special_state,
    /// rate_limit, suspect_collector, paused, ...).
    pub skipped: BTreeMap<String, u64>,
    /// Counter: cycles run.
    pub cycles: u64,
    /// Gauge: epoch seconds of the last cycle (also advances on a skipped cycle).
    pub last_cycle_s: i64,
    /// Gauge: epoch seconds of the last cycle that evaluated jobs on fresh data: squeue read
    /// and nvidia-smi gave data. 0 until the first such cycle.
    pub last_evaluated_s: i64,
    /// Counter: failed writes of the daemon's records, by file (`audit` for audit.jsonl,
    /// `state` for state.json).
    pub record_write_failures: BTreeMap<String, u64>,
    /// Gauge: 1 while the last write of the audit log or of the state file failed (drains
    /// and cancels are then held).
    pub records_unwritable: u8,
    /// Gauge: 1 in enforce mode, 0 in observe mode.
    pub enforce: u8,
    /// Gauge: 1 while the pause file exists.
    pub paused: u8,
    /// Gauge: GPU jobs evaluated in the last cycle.
    pub jobs_evaluated: u64,
    /// Gauge: Slurm jobs whose processes ran on this node's GPUs in the last cycle and the one
    /// before but that squeue did not list (see [`crate::unlisted`]).
    pub jobs_not_in_squeue: u64,
    /// Counter: children abandoned after a timeout (would not die).
    pub abandoned_children: u64,
    /// Counter: jobs placed on their GPUs by Slurm's device index (`gres_detail` IDX through
    /// nvidia-smi `minor_number`); a placement kept from an earlier cycle is not counted again.
    pub jobs_placed_by_device_index: u64,
    /// Counter: inconsistencies found between Slurm's device indices and the GPUs a job's
    /// processes run on (each one switches the rule off on this node).
    pub device_index_contradictions: u64,
    /// Gauge: the device-index rule's state in the last cycle: `unavailable`, `untrusted`,
    /// `trusted` or `contradicted` (empty before the first cycle: all four 0). A cycle whose
    /// squeue or nvidia-smi read failed shows `contradicted` while the state file says so, else
    /// `unavailable`.
    pub device_index_state: &'static str,
}

/// The reasons of `gpu_reaper_skipped_total` that the daemon counts itself, besides the
/// planner's [`crate::plan::SkipKind`]s: jobs it could not evaluate and its own holds.
pub const DAEMON_SKIP_REASONS: [&str; 11] = [
    "ambiguous_attribution",
    "no_start_time",
    "exemption_unknown",
    "index_disagrees",
    "codec_unread",
    "memory_unaccounted",
    "codec_active",
    "resume_held_gpus_unread",
    "gpu_jobs_unseen",
    "job_not_in_squeue",
    "drain_not_applied",
];

/// How a command can fail besides an exit code (`crate::run::RunOutcome::label`), plus
/// `hung_child` (an earlier instance still running).
const PROCESS_KINDS: [&str; 8] = [
    "timeout",
    "abandoned",
    "signal",
    "spawn_failed",
    "refused",
    "output_too_large",
    "output_cut_off",
    "hung_child",
];

/// nvidia-smi's exit codes other than 0: the man page's RETURN VALUE list, and 18 (NVML's
/// driver/library version mismatch, seen in the field).
const SMI_EXIT_KINDS: [&str; 13] = [
    "exit_2", "exit_3", "exit_4", "exit_6", "exit_8", "exit_9", "exit_10", "exit_12", "exit_13", "exit_14", "exit_15", "exit_18",
    "exit_255",
];

/// The sources of `gpu_reaper_read_errors_total`.
pub const READ_ERROR_SOURCES: [&str; 5] = ["squeue", "scontrol", "nvidia-smi", "compute-apps", "state"];

/// The kinds of read error `source` can have as a metric label: a closed set, every one on
/// the page from the first scrape (at 0), so an alert on the counter's rate sees the first
/// error of any kind. `other` ends every list.
pub fn read_error_kinds(source: &str) -> Vec<&'static str> {
    let smi_no_data = crate::parse::smi::NO_DATA_TEXTS.iter().map(|(_, k)| *k);
    let own: Vec<&'static str> = match source {
        "squeue" => ["exit_1", "controller_error", "parse", "no_header", "row"]
            .into_iter()
            .chain(PROCESS_KINDS)
            .collect(),
        "scontrol" => ["exit_1", "parse", "wrong_node"].into_iter().chain(PROCESS_KINDS).collect(),
        "nvidia-smi" => ["no_gpus", "bad_header", "bad_row", "no_index", "no_uuid", "field_refused"]
            .into_iter()
            .chain(smi_no_data)
            .chain(SMI_EXIT_KINDS)
            .chain(PROCESS_KINDS)
            .collect(),
        "compute-apps" => ["bad_row", "parse", "field_refused"]
            .into_iter()
            .chain(smi_no_data)
            .chain(SMI_EXIT_KINDS)
            .chain(PROCESS_KINDS)
            .collect(),
        "state" => vec!["write"],
        _ => Vec::new(),
    };
    own.into_iter().chain(["other"]).collect()
}

/// `kind` as the metric label for a read error of `source`: itself when it is one of
/// [`read_error_kinds`], else `other` (an exit code nvidia-smi does not document, a line
/// number or free text), so no label appears that the first scrape did not show; the details
/// go to the log.
pub fn read_error_label(source: &str, kind: &str) -> &'static str {
    read_error_kinds(source).into_iter().find(|k| *k == kind).unwrap_or("other")
}

/// `counts` with every key of `known` that it lacks added at 0.
fn with_zeros<K: Ord + Clone>(known: impl IntoIterator<Item = K>, counts: &BTreeMap<K, u64>) -> BTreeMap<K, u64> {
    let mut all: BTreeMap<K, u64> = known.into_iter().map(|k| (k, 0)).collect();
    all.extend(counts.iter().map(|(k, n)| (k.clone(), *n)));
    all
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    /// Adds one to a labelled counter.
    pub fn inc<K: Ord>(map: &mut BTreeMap<K, u64>, key: K) {
        *map.entry(key).or_insert(0) += 1;
    }

    /// The text page.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let head = |s: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        head(
            &mut s,
            "gpu_reaper_findings",
            "gauge",
            "Findings in the last cycle by verdict, signature and partition.",
        );
        for ((v, sig, p), n) in &self.findings {
            let _ = writeln!(
                s,
                "gpu_reaper_findings{{verdict=\"{}\",signature=\"{}\",partition=\"{}\"}} {n}",
                esc(v),
                esc(sig),
                esc(p)
            );
        }
        head(
            &mut s,
            "gpu_reaper_wasted_gpu_hours",
            "gauge",
            "Estimated GPU-hours wasted in current confirmed breaches (a whole window breaching, exempt jobs included), by signature.",
        );
        for (sig, h) in &self.wasted_gpu_h {
            let _ = writeln!(s, "gpu_reaper_wasted_gpu_hours{{signature=\"{}\"}} {h}", esc(sig));
        }
        head(
            &mut s,
            "gpu_reaper_actions_total",
            "counter",
            "Actions by kind and outcome (would = observe mode).",
        );
        // Every counter is on the page from the first scrape, at 0 for each known label value,
        // so `rate()` and `increase()` see the first event of any series.
        let actions = with_zeros(
            crate::plan::Action::KINDS.iter().flat_map(|a| {
                let outcomes: &[&str] = match *a {
                    "cancel" => &["done", "would", "already_gone", "failed"],
                    "notice" | "drain" | "resume" => &["done", "would", "failed"],
                    _ => &["done", "failed"],
                };
                outcomes.iter().map(|o| (a.to_string(), o.to_string()))
            }),
            &self.actions,
        );
        for ((a, o), n) in &actions {
            let _ = writeln!(s, "gpu_reaper_actions_total{{action=\"{}\",outcome=\"{}\"}} {n}", esc(a), esc(o));
        }
        head(&mut s, "gpu_reaper_action_errors_total", "counter", "Failed actions by kind.");
        let action_errors = with_zeros(
            crate::plan::Action::KINDS
                .iter()
                .chain(&["cancel_not_effective"])
                .map(|a| a.to_string()),
            &self.action_errors,
        );
        for (a, n) in &action_errors {
            let _ = writeln!(s, "gpu_reaper_action_errors_total{{action=\"{}\"}} {n}", esc(a));
        }
        head(
            &mut s,
            "gpu_reaper_read_errors_total",
            "counter",
            "Failed reads by source and kind.",
        );
        let read_errors = with_zeros(
            READ_ERROR_SOURCES
                .iter()
                .flat_map(|src| read_error_kinds(src).into_iter().map(|k| (src.to_string(), k.to_string()))),
            &self.read_errors,
        );
        for ((src, k), n) in &read_errors {
            let _ = writeln!(s, "gpu_reaper_read_errors_total{{source=\"{}\",kind=\"{}\"}} {n}", esc(src), esc(k));
        }
        head(&mut s, "gpu_reaper_skipped_total", "counter", "Jobs or actions skipped, by reason.");
        let skipped = with_zeros(
            crate::plan::SkipKind::ALL
                .iter()
                .map(|k| k.as_str())
                .chain(DAEMON_SKIP_REASONS)
                .map(str::to_string),
            &self.skipped,
        );
        for (r, n) in &skipped {
            let _ = writeln!(s, "gpu_reaper_skipped_total{{reason=\"{}\"}} {n}", esc(r));
        }
        head(
            &mut s,
            "gpu_reaper_record_write_failures_total",
            "counter",
            "Failed writes of the audit log (file=audit) or the state file (file=state).",
        );
        for f in ["audit", "state"] {
            let n = self.record_write_failures.get(f).copied().unwrap_or(0);
            let _ = writeln!(s, "gpu_reaper_record_write_failures_total{{file=\"{f}\"}} {n}");
        }
        for (name, kind, help, v) in [
            ("gpu_reaper_cycles_total", "counter", "Cycles run.", self.cycles as f64),
            (
                "gpu_reaper_last_cycle_timestamp_seconds",
                "gauge",
                "Time of the last cycle.",
                self.last_cycle_s as f64,
            ),
            (
                "gpu_reaper_last_evaluated_timestamp_seconds",
                "gauge",
                "Time of the last cycle that evaluated jobs on fresh data (squeue and nvidia-smi both read); 0 before the first.",
                self.last_evaluated_s as f64,
            ),
            (
                "gpu_reaper_records_unwritable",
                "gauge",
                "1 while the last audit log or state file write failed; drains and cancels are held.",
                self.records_unwritable as f64,
            ),
            (
                "gpu_reaper_enforce_mode",
                "gauge",
                "1 in enforce mode, 0 in observe mode.",
                self.enforce as f64,
            ),
            ("gpu_reaper_paused", "gauge", "1 while the pause file exists.", self.paused as f64),
            (
                "gpu_reaper_jobs_evaluated",
                "gauge",
                "GPU jobs evaluated in the last cycle.",
                self.jobs_evaluated as f64,
            ),
            (
                "gpu_reaper_jobs_not_in_squeue",
                "gauge",
                "Slurm jobs whose processes run on this node's GPUs (two cycles in a row) but that squeue does not list: PrivateData=jobs, or squeue run as a user who cannot see every job.",
                self.jobs_not_in_squeue as f64,
            ),
            (
                "gpu_reaper_abandoned_children_total",
                "counter",
                "Commands abandoned after a timeout because they would not die.",
                self.abandoned_children as f64,
            ),
            (
                "gpu_reaper_jobs_placed_by_device_index_total",
                "counter",
                "Jobs placed on their GPUs by Slurm's device index (gres_detail IDX through nvidia-smi minor_number).",
                self.jobs_placed_by_device_index as f64,
            ),
            (
                "gpu_reaper_device_index_contradictions_total",
                "counter",
                "Inconsistencies between Slurm's device indices and the GPUs a job's processes run on; each switches the rule off on this node.",
                self.device_index_contradictions as f64,
            ),
        ] {
            head(&mut s, name, kind, help);
            let _ = writeln!(s, "{name} {v}");
        }
        head(
            &mut s,
            "gpu_reaper_device_index_state",
            "gauge",
            "1 for the device-index placement rule's state in the last cycle (unavailable, untrusted, trusted, contradicted), 0 for the others.",
        );
        for st in ["unavailable", "untrusted", "trusted", "contradicted"] {
            let _ = writeln!(
                s,
                "gpu_reaper_device_index_state{{state=\"{st}\"}} {}",
                (self.device_index_state == st) as u8
            );
        }
        s
    }
}

/// Serves `page` at `GET /metrics` (and `/`) on `addr` from a background thread. Each
/// connection gets 2 s to send its request.
pub fn serve(addr: &str, page: Arc<Mutex<String>>) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = c.set_write_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 2048];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("");
            let resp = if req.starts_with("GET ") && (path == "/metrics" || path == "/") {
                let body = page.lock().map(|p| p.clone()).unwrap_or_default();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = c.write_all(resp.as_bytes());
        }
    });
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_has_no_job_label_and_escapes() {
        let mut m = Metrics::default();
        Metrics::inc(&mut m.findings, ("alert".into(), "idle".into(), "gpu\"x".into()));
        Metrics::inc(&mut m.skipped, "rate_limit".to_string());
        let p = m.render();
        assert!(p.contains("gpu_reaper_findings{verdict=\"alert\",signature=\"idle\",partition=\"gpu\\\"x\"} 1"));
        assert!(p.contains("gpu_reaper_skipped_total{reason=\"rate_limit\"} 1"));
        assert!(!p.contains("job_id"));
    }

    #[test]
    fn read_error_kinds_are_a_closed_set() {
        for (src, k) in [
            ("nvidia-smi", "bad_row"),
            ("nvidia-smi", "no_index"),
            ("nvidia-smi", "timeout"),
            ("nvidia-smi", "exit_15"),
            ("nvidia-smi", "exit_255"),
            ("nvidia-smi", "gpu_lost"),
            ("compute-apps", "exit_9"),
            ("squeue", "spawn_failed"),
            ("squeue", "exit_1"),
            ("scontrol", "wrong_node"),
            ("state", "write"),
        ] {
            assert_eq!(read_error_label(src, k), k, "{src}");
        }
        for (src, k) in [
            ("nvidia-smi", "bad_row:4"),
            ("nvidia-smi", "bad_row_12345"),
            ("nvidia-smi", "line 4"),
            ("nvidia-smi", "exit_-1"),
            ("nvidia-smi", "exit_7"),
            ("squeue", "exit_15"),
            ("squeue", ""),
            ("squeue", "BadRow"),
            ("state", "3 fields, expected 7"),
            ("elsewhere", "timeout"),
        ] {
            assert_eq!(read_error_label(src, k), "other", "{src} {k}");
        }
    }

    /// Trial 5 #12: `rate(gpu_reaper_read_errors_total[15m]) > 0` cannot see a series'
    /// first increment, so every series an operator alerts on is on the page, at 0, from the
    /// first scrape.
    #[test]
    fn every_counter_to_alert_on_is_on_the_first_page_at_0() {
        let p = Metrics::default().render();
        for line in [
            "gpu_reaper_read_errors_total{source=\"squeue\",kind=\"exit_1\"} 0",
            "gpu_reaper_read_errors_total{source=\"squeue\",kind=\"timeout\"} 0",
            "gpu_reaper_read_errors_total{source=\"squeue\",kind=\"row\"} 0",
            "gpu_reaper_read_errors_total{source=\"nvidia-smi\",kind=\"exit_15\"} 0",
            "gpu_reaper_read_errors_total{source=\"nvidia-smi\",kind=\"gpu_lost\"} 0",
            "gpu_reaper_read_errors_total{source=\"nvidia-smi\",kind=\"bad_row\"} 0",
            "gpu_reaper_read_errors_total{source=\"compute-apps\",kind=\"bad_row\"} 0",
            "gpu_reaper_read_errors_total{source=\"scontrol\",kind=\"wrong_node\"} 0",
            "gpu_reaper_read_errors_total{source=\"state\",kind=\"write\"} 0",
            "gpu_reaper_read_errors_total{source=\"nvidia-smi\",kind=\"other\"} 0",
            "gpu_reaper_action_errors_total{action=\"cancel\"} 0",
            "gpu_reaper_action_errors_total{action=\"notice\"} 0",
            "gpu_reaper_action_errors_total{action=\"cancel_not_effective\"} 0",
            "gpu_reaper_actions_total{action=\"drain\",outcome=\"failed\"} 0",
            "gpu_reaper_skipped_total{reason=\"records_unwritable\"} 0",
            "gpu_reaper_skipped_total{reason=\"node_not_this_host\"} 0",
            "gpu_reaper_skipped_total{reason=\"gpu_jobs_unseen\"} 0",
            "gpu_reaper_record_write_failures_total{file=\"audit\"} 0",
        ] {
            assert!(p.lines().any(|l| l == line), "{line} missing:\n{p}");
        }
        // A count replaces the 0, once.
        let mut m = Metrics::default();
        Metrics::inc(&mut m.read_errors, ("squeue".to_string(), "exit_1".to_string()));
        let p = m.render();
        let squeue_exit_1: Vec<&str> = p.lines().filter(|l| l.contains("source=\"squeue\",kind=\"exit_1\"")).collect();
        assert_eq!(
            squeue_exit_1,
            vec!["gpu_reaper_read_errors_total{source=\"squeue\",kind=\"exit_1\"} 1"]
        );
    }

    #[test]
    fn serves_over_loopback() {
        let page = Arc::new(Mutex::new("gpu_reaper_cycles_total 3\n".to_string()));
        let addr = serve("127.0.0.1:0", page).unwrap();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("gpu_reaper_cycles_total 3\n"),
            "{out}"
        );
    }
}
