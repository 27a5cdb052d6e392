//! A state file's windows are checked on restore: entries no engine writes (readings beyond
//! guard 3's bounds, contradictory or unknown flags, times that do not increase, a window
//! count that does not match the allocation) are not restored. Only that job's windows are
//! left out, the rest of the snapshot is kept, and `Engine::restore_dropped` names the job,
//! the GPU slot, the entry and the value, for the enforcer's log.
//!
//! Review 28 found the general path believing such entries: a util of 2,000,000,000
//! thousandths of a percent came back as a peak of 2,000,000 % in the job's evidence.

mod trio;
use policy::{Engine, Mode, Observation, Policy, Scope};
use trio::*;

/// Two jobs stepped `cycles` times: "A" on 8 GPUs (the lane path), "B" on 4 (the general
/// path). Returns the snapshot JSON and the time of its last cycle.
fn snapshot_json(cycles: usize) -> (serde_json::Value, i64, Vec<policy::JobFacts>) {
    let mut b = eight("B", 2, 0);
    b.alloc.truncate(4);
    let jobs = vec![eight("A", 1, 0), b];
    let cfg = cfg_with(600, 60, 180);
    let mut e = build(&[Policy::new(&cfg).expect("valid")], Mode::Enforce, true);
    let mut out = Vec::new();
    let mut now = 100_000;
    for _ in 0..cycles {
        now += 60;
        busy_cycle(&mut e, &jobs, now, &mut out);
    }
    (serde_json::from_str(&json(&e, now)).expect("json"), now, jobs)
}

/// One cycle at `now` with every GPU of `jobs` busy.
fn busy_cycle(e: &mut Engine, jobs: &[policy::JobFacts], now: i64, out: &mut Vec<policy::Finding>) {
    let s = samples_of(jobs, now, Look::Busy, now);
    e.step(
        now,
        &Observation {
            jobs,
            samples: &s,
            scope: Scope::Whole,
            drains: &[],
        },
        out,
    );
}

fn restore(v: &serde_json::Value, now: i64) -> Engine {
    let snap: policy::EngineSnapshot = serde_json::from_value(v.clone()).expect("edited snapshot reads back");
    Engine::restore(Policy::new(&cfg_with(600, 60, 180)).expect("valid"), Mode::Enforce, snap, now)
}

/// Job `j`'s GPU `g`'s entry `k`, as JSON.
fn entry(v: &mut serde_json::Value, j: usize, g: usize, k: usize) -> &mut serde_json::Map<String, serde_json::Value> {
    v["jobs"][j]["gpus"][g]["entries"][k].as_object_mut().expect("an entry")
}

#[test]
fn an_untouched_snapshot_is_restored_whole() {
    let (v, now, _) = snapshot_json(6);
    let e = restore(&v, now);
    assert!(e.restore_dropped().is_empty(), "{:?}", e.restore_dropped());
    assert_eq!(e.tracked_jobs(), 2);
}

#[test]
fn entries_no_engine_writes_are_not_restored_and_are_named() {
    // (what, GPU slot, entry, key, value, what the restore must say)
    let edits: [(&str, usize, usize, &str, u64, &str); 7] = [
        (
            "util beyond 100 %",
            2,
            3,
            "util_milli",
            100_001,
            "GPU slot 2, entry 3: util_milli 100001",
        ),
        (
            "memory beyond the bound",
            0,
            0,
            "mem_mib",
            1_048_577,
            "GPU slot 0, entry 0: mem_mib 1048577",
        ),
        (
            "power beyond the bound",
            3,
            1,
            "power_dw",
            20_001,
            "GPU slot 3, entry 1: power_dw 20001",
        ),
        (
            "a flag no release sets",
            1,
            0,
            "flags",
            1 << 13,
            "GPU slot 1, entry 0: flags 0x2000",
        ),
        (
            "memory held and free",
            1,
            2,
            "flags",
            0b11,
            "GPU slot 1, entry 2: flags 0x0003 contradict",
        ),
        (
            "processes both > 0 and 0",
            1,
            2,
            "flags",
            0b1100,
            "GPU slot 1, entry 2: flags 0x000c contradict",
        ),
        (
            "power idle but unknown",
            1,
            2,
            "flags",
            1 << 5,
            "GPU slot 1, entry 2: flags 0x0020 contradict",
        ),
    ];
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let mut cases: Vec<(&str, Edit, &str)> = edits
        .iter()
        .map(|&(name, g, k, key, value, says)| {
            let edit: Edit = Box::new(move |v| {
                entry(v, 1, g, k).insert(key.into(), value.into());
            });
            (name, edit, says)
        })
        .collect();
    cases.push((
        "times not increasing",
        Box::new(|v| {
            let t = entry(v, 1, 0, 1)["t_off"].clone();
            entry(v, 1, 0, 2).insert("t_off".into(), t);
        }),
        "GPU slot 0, entry 2: t_off",
    ));
    cases.push((
        "a window missing",
        Box::new(|v| {
            v["jobs"][1]["gpus"].as_array_mut().expect("gpus").pop();
        }),
        "3 windows for an allocation of 4 GPUs",
    ));
    for (name, edit, says) in cases {
        let (mut v, now, jobs) = snapshot_json(6);
        edit(&mut v);
        let mut e = restore(&v, now);
        let d = e.restore_dropped().to_vec();
        assert!(
            d.len() == 1 && d[0].job_id == "B" && d[0].why.contains(says),
            "{name}: expected job B dropped with {says:?}: {d:?}"
        );
        assert!(!d[0].why.contains('\n'), "{name}: one line for the log");
        // Job A is kept; job B comes back as a new job, judged on its own new samples.
        assert_eq!(e.tracked_jobs(), 1, "{name}");
        let mut out = Vec::new();
        busy_cycle(&mut e, &jobs, now + 60, &mut out);
        assert_eq!(e.tracked_jobs(), 2, "{name}");
        assert_eq!(
            out[1].evidence.samples_max_per_gpu, 1,
            "{name}: job B's windows should start afresh: {:?}",
            out[1]
        );
        assert!(
            out[0].evidence.samples_max_per_gpu > 1,
            "{name}: job A's windows should be kept: {:?}",
            out[0]
        );
    }
}

/// Review 28's case on the general path: util 2,000,000,000 milli-percent in a state file.
/// Before the check, the restored job's evidence read a peak of 2,000,000 %.
#[test]
fn a_huge_util_in_a_state_file_never_reaches_the_evidence() {
    let (mut v, now, jobs) = snapshot_json(6);
    for g in 0..4 {
        for k in 0..6 {
            entry(&mut v, 1, g, k).insert("util_milli".into(), 2_000_000_000u32.into());
        }
    }
    let mut e = restore(&v, now);
    assert_eq!(e.restore_dropped().len(), 1);
    let mut out = Vec::new();
    busy_cycle(&mut e, &jobs, now + 60, &mut out);
    for f in &out {
        assert!(f.evidence.peak_util_pct <= 100.0, "a peak beyond 100 %: {f:?}");
    }
}

/// Entries exactly at the bounds are what ingest makes from samples at the limits: kept.
#[test]
fn entries_at_the_bounds_are_restored() {
    let (mut v, now, _) = snapshot_json(6);
    let en = entry(&mut v, 1, 0, 0);
    en.insert("util_milli".into(), 100_000.into());
    en.insert("mem_mib".into(), 1_048_576.into());
    en.insert("power_dw".into(), 20_000.into());
    // Every flag an entry can carry with power known (not memory free, no processes, nor
    // the all-zero flags, which need power unknown).
    en.insert("flags".into(), ((1u32 << 13) - 1 - 0b10 - 0b1000 - (1 << 8) - (1 << 11)).into());
    let e = restore(&v, now);
    assert!(e.restore_dropped().is_empty(), "{:?}", e.restore_dropped());
    assert_eq!(e.tracked_jobs(), 2);
}

#[test]
fn entries_after_the_snapshot_or_the_end_of_time_are_not_restored() {
    // The eleventh session's note: `base_t_s + t_off` is added unchecked by both paths; a
    // state file could put it past `i64::MAX`, or after the snapshot's cycle (then every real
    // sample after the restore is late, and the job is never judged again).
    let (v0, now, jobs) = snapshot_json(6);
    for base in [i64::MAX - 5, i64::MAX - 400, 200_000] {
        for j in 0..2 {
            let mut v = v0.clone();
            let gpus = v["jobs"][j]["gpus"].as_array().expect("gpus").len();
            for g in 0..gpus {
                v["jobs"][j]["gpus"][g]["base_t_s"] = serde_json::json!(base);
            }
            let mut e = restore(&v, now);
            let d = e.restore_dropped();
            assert_eq!(d.len(), 1, "base {base}, job {j}: {d:?}");
            assert!(d[0].why.contains("the latest time a sample could have been taken"), "{}", d[0].why);
            assert!(d[0].why.contains(&base.to_string()), "{}", d[0].why);
            // The job starts afresh, and the other one is kept.
            let mut out = Vec::new();
            busy_cycle(&mut e, &jobs, now + 60, &mut out);
            assert_eq!(out[j].evidence.samples_max_per_gpu, 1, "base {base}, job {j}: {:?}", out[j]);
            assert_eq!(out[1 - j].evidence.samples_max_per_gpu, 7, "base {base}, job {j}: {:?}", out[1 - j]);
        }
    }
}

#[test]
fn a_newest_or_invalid_time_after_the_snapshot_is_not_restored() {
    // Operator trial 16: `newest_t_s` set in the future made every real sample after the
    // restore late; the GPU took none for 30 cycles and its job was never judged, with no WARN.
    let (v0, now, jobs) = snapshot_json(6);
    for (key, value) in [
        ("newest_t_s", serde_json::json!(4_102_444_800i64)),
        ("newest_t_s", serde_json::json!(i64::MAX)),
        ("invalid", serde_json::json!([4_102_444_800i64])),
    ] {
        for j in 0..2 {
            let mut v = v0.clone();
            v["jobs"][j]["gpus"][3][key] = value.clone();
            let mut e = restore(&v, now);
            let d = e.restore_dropped();
            assert_eq!(d.len(), 1, "{key} = {value}, job {j}: {d:?}");
            assert!(
                d[0].why.contains("GPU slot 3") && d[0].why.contains("the latest time a sample could have been taken"),
                "{}",
                d[0].why
            );
            // The job gathers its window afresh: its GPUs take this cycle's samples.
            let mut out = Vec::new();
            busy_cycle(&mut e, &jobs, now + 60, &mut out);
            assert_eq!(out[j].evidence.samples_min_per_gpu, 1, "{key}, job {j}: {:?}", out[j]);
            assert_eq!(out[j].evidence.late_samples, 0, "{key}, job {j}: {:?}", out[j]);
        }
    }
    // At the bound itself (the snapshot's cycle plus the clock skew) the window is kept.
    let mut v = v0.clone();
    let skew = policy::PolicyConfig::default().clock_skew.0;
    v["jobs"][1]["gpus"][3]["invalid"] = serde_json::json!([now + skew]);
    assert!(restore(&v, now).restore_dropped().is_empty());
}
