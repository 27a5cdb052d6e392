//! How long a breach has shown its current signature (`Finding::signature_dwell_s`), and the
//! reason line that states it (operator trial 19: a job starved for three hours and then hung
//! read "hung … for 219m" 39 minutes into the hang, and its notice said so).

mod harness;
use harness::*;
use policy::{Mode, Verdict};

const HANG_AT_S: i64 = 3 * 3600;

/// Input: one 2-GPU job, default config (window 20m), starved (3–8 % util, memory held) from
/// its start to 3h, then hung (0 %, memory held, processes) to 3h40m, one cycle a minute.
/// Expected: at 3h40m the finding says `hung`; its breach (`dwell_s`) runs from the starved
/// stretch, over three hours; the hung run (`signature_dwell_s`) is at most the 40 minutes
/// of the hang plus the one window in which it was first seen, and at least the 40 minutes
/// less one window; the reason line gives the hung run and names the whole breach apart.
#[test]
fn a_breach_that_changes_signature_counts_the_new_signature_from_its_own_start() {
    let mut run = Run::new(cfg(), Mode::Observe, vec![job("7", 0, &[(0, 2)])]);
    let end_s = HANG_AT_S + 40 * 60;
    run.run_until(end_s, |t, _, _| if t < HANG_AT_S { Gpu::Starved } else { Gpu::Hung });
    let starved_seen = run
        .history
        .iter()
        .any(|(_, f)| f[0].signature_name() == "starved" && f[0].verdict >= Verdict::Alert);
    assert!(starved_seen, "control: the starved stretch was a breach");
    let f = &run.out[0];
    assert_eq!(f.signature_name(), "hung", "{f:?}");
    assert!(f.dwell_s > 2 * 3600, "the breach began while starved: dwell {}", f.dwell_s);
    let window_s = 20 * 60;
    let hung_s = end_s - HANG_AT_S;
    assert!(
        f.signature_dwell_s <= hung_s + window_s && f.signature_dwell_s >= hung_s - window_s,
        "hung for {hung_s}s, signature_dwell_s {}",
        f.signature_dwell_s
    );
    let reason = f.reason(&run.jobs[0]);
    let want = format!(
        "hung on 2/2 GPUs for {}m of a {}m breach,",
        f.signature_dwell_s / 60,
        f.dwell_s / 60
    );
    assert!(reason.contains(&want), "{reason:?} lacks {want:?}");
}

/// Input: one idle 1-GPU job, default config, one cycle a minute for 2h.
/// Expected: every breaching finding's signature run equals its breach (the signature never
/// changed), so the reason gives one figure, "for Nm", and no "breach" clause.
#[test]
fn a_breach_with_one_signature_reads_one_duration() {
    let mut run = Run::new(cfg(), Mode::Observe, vec![job("8", 0, &[(0, 1)])]);
    run.run_until(2 * 3600, |_, _, _| Gpu::Idle);
    let mut breaches = 0;
    for (t, fs) in &run.history {
        let f = &fs[0];
        if f.dwell_s > 0 {
            breaches += 1;
            assert_eq!(f.signature_dwell_s, f.dwell_s, "at {t}: {f:?}");
            let reason = f.reason(&run.jobs[0]);
            assert!(reason.contains(&format!("for {}m, peak", f.dwell_s / 60)), "{reason}");
            assert!(!reason.contains("breach"), "{reason}");
        } else {
            assert_eq!(f.signature_dwell_s, 0, "at {t}: {f:?}");
        }
    }
    assert!(
        breaches > 60,
        "control: the idle job breached for most of the run ({breaches} cycles)"
    );
}
