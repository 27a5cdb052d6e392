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
    /// Gauge: estimated wasted GPU-hours of the current breaches, by signature.
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

/// A read-error kind as a metric label from a bounded set: a lower-case word
/// (`bad_row`, `timeout`, `no_devices`, ...) optionally ending in `_N` with at most three
/// digits (`exit_15`: process exit codes are 0..=255). Anything else (a line number, a value,
/// free text) becomes `other`, so no label can grow without bound; the details go to the log.
pub fn bounded_kind(kind: &str) -> &str {
    let (word, num) = match kind.rsplit_once('_') {
        Some((w, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => (w, n),
        _ => (kind, ""),
    };
    let word_ok = !word.is_empty() && word.len() <= 32 && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if word_ok && num.len() <= 3 {
        kind
    } else {
        "other"
    }
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
            "Estimated GPU-hours wasted in current breaches, by signature.",
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
        for ((a, o), n) in &self.actions {
            let _ = writeln!(s, "gpu_reaper_actions_total{{action=\"{}\",outcome=\"{}\"}} {n}", esc(a), esc(o));
        }
        head(&mut s, "gpu_reaper_action_errors_total", "counter", "Failed actions by kind.");
        for (a, n) in &self.action_errors {
            let _ = writeln!(s, "gpu_reaper_action_errors_total{{action=\"{}\"}} {n}", esc(a));
        }
        head(
            &mut s,
            "gpu_reaper_read_errors_total",
            "counter",
            "Failed reads by source and kind.",
        );
        for ((src, k), n) in &self.read_errors {
            let _ = writeln!(s, "gpu_reaper_read_errors_total{{source=\"{}\",kind=\"{}\"}} {n}", esc(src), esc(k));
        }
        head(&mut s, "gpu_reaper_skipped_total", "counter", "Jobs or actions skipped, by reason.");
        for (r, n) in &self.skipped {
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
    fn read_error_kinds_are_a_bounded_set() {
        for k in [
            "bad_row",
            "no_index",
            "timeout",
            "exit_15",
            "exit_255",
            "no_readable_rows",
            "spawn_failed",
        ] {
            assert_eq!(bounded_kind(k), k);
        }
        for k in [
            "bad_row:4",
            "bad_row_12345",
            "line 4",
            "exit_-1",
            "",
            "BadRow",
            "3 fields, expected 7",
        ] {
            assert_eq!(bounded_kind(k), "other", "{k}");
        }
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
