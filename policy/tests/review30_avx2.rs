//! Review 30: a four-engine differential (lane path on/off × AVX2 on/off) on readings at
//! every edge the classifier and the pool decide on: guard 3's bounds and their neighbours,
//! the thresholds (as fractions of the limit and total), −0.0, subnormals, NaNs with payloads
//! (the missing marker's neighbours included), sentinels, process counts at their limits,
//! whole jobs holding one reading for a stretch (frozen and all-zero windows), rings of 32,
//! 64 and 128 rows, jobs leaving and re-entering the lane path, and restarts through JSON.
//! Every engine must write the same findings (bit for bit, Debug text) and snapshots.

mod trio;

use policy::{Engine, Mode, Observation, Policy, PolicyConfig, Reading, Sample};
use proptest::prelude::*;
use trio::*;

/// Values for one field: bounds and their neighbours, zeros, subnormals, NaNs, sentinels.
fn palette(field: usize) -> Vec<f64> {
    let around = |x: f64| [f64::from_bits(x.to_bits() - 1), x, f64::from_bits(x.to_bits() + 1)];
    let missing = f64::from_bits(Reading::MISSING.to_bits());
    let mut v = vec![
        0.0,
        -0.0,
        f64::from_bits(1),
        -f64::from_bits(1),
        f64::MIN_POSITIVE,
        f64::NAN,
        -f64::NAN,
        missing,
        f64::from_bits(missing.to_bits() ^ 1),
        f64::from_bits(missing.to_bits() ^ (1 << 63)),
        f64::INFINITY,
        4_294_967_295.0,
        2_147_483_632.0,
        140_737_488_355_328.0,
    ];
    let bounds: &[f64] = match field {
        // util %, thresholds: 5 % low util, 90 % spin util (defaults), 100 % bound
        0 => &[100.0, 90.0, 5.0, 0.5, 0.0005, 0.000_499_999_999_999_999_9],
        // SM activity
        1 => &[1.0, 0.9, 0.05],
        // memory used: held frac of 81,920 (default 0.02 → 1,638.4), the total, the bound
        2 => &[1_638.4, 81_920.0, 1_048_576.0, 1_024.0, 0.5],
        // power: idle frac × 400 (0.25 → 100 W?), spin frac, min and max bounds
        3 => &[1.0, 2000.0, 100.0, 140.0, 120.0, 80.0, 60.0, 0.5],
        // power limit
        4 => &[1.0, 2000.0, 400.0],
        // memory total
        _ => &[1_048_576.0, 81_920.0, 1.0],
    };
    for &b in bounds {
        v.extend(around(b));
    }
    v
}

fn engines(cfg: &PolicyConfig) -> [Engine; 4] {
    let p = Policy::new(cfg).expect("valid");
    std::array::from_fn(|k| {
        let mut e = Engine::new(p.clone(), Mode::Enforce);
        e.set_lane_path(k & 1 == 0);
        e.set_avx2(k & 2 == 0);
        e
    })
}

fn config(kind: u8) -> PolicyConfig {
    let window = match kind % 3 {
        0 => 1200, // 32 rows
        1 => 2400, // 64 rows
        _ => 6000, // 128 rows
    };
    PolicyConfig {
        window: policy::DurationS(window),
        max_sample_gap: policy::DurationS(180),
        warmup: policy::DurationS(0),
        notice: policy::DurationS(0),
        stages: vec![stage(0, "alert"), stage(300, "drain"), stage(900, "cancel")],
        ..PolicyConfig::default()
    }
}

/// One GPU's readings for a cycle: a base look, with some fields replaced from the palette.
#[derive(Clone, Debug)]
struct Pick {
    look: u8,
    /// (field, palette index) replacements.
    edits: Vec<(u8, u16)>,
    procs: u8,
}

fn pick() -> impl Strategy<Value = Pick> {
    (
        0u8..7,
        prop_oneof![4 => Just(Vec::new()), 1 => proptest::collection::vec((0u8..6, any::<u16>()), 1..3)],
        0u8..8,
    )
        .prop_map(|(look, edits, procs)| Pick { look, edits, procs })
}

/// True when `x` is within guard 3's bound for `field` (so that the lane path may take it).
fn in_bounds(field: u8, x: f64) -> bool {
    let nz = x == 0.0 && x.is_sign_negative();
    match field {
        0 => nz || (0.0..=100.0).contains(&x),
        1 => nz || (0.0..=1.0).contains(&x),
        2 => nz || (0.0..=81_920.0).contains(&x),
        3 | 4 => (1.0..=2000.0).contains(&x),
        _ => (81_920.0..=1_048_576.0).contains(&x),
    }
}

fn make(p: &Pick, wild: bool, t: i64, key: i64, g: policy::GpuRef) -> Sample {
    let look = if !wild && p.look == 5 { 0 } else { p.look };
    let mut s = reading(LOOKS[look as usize], t, key, g);
    for &(f, i) in &p.edits {
        let mut pal = palette(f as usize);
        if !wild {
            pal.retain(|&x| in_bounds(f, x));
        }
        let x = Reading::value(pal[i as usize % pal.len()]);
        match f {
            0 => s.util_pct = x,
            1 => s.sm_active = x,
            2 => s.mem_used_mib = x,
            3 => s.power_w = x,
            4 => s.power_limit_w = x,
            _ => s.mem_total_mib = x,
        }
    }
    s.procs = match if wild { p.procs } else { p.procs % 3 + 5 } {
        0 => None,
        1 => Some(0),
        2 => Some(4096),
        3 => Some(4097),
        4 => Some(u32::MAX),
        _ => s.procs,
    };
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 24 } else { 160 }))]

    /// Four engines (lanes × AVX2) agree on every finding and snapshot, cycle by cycle.
    #[test]
    fn four_engines_agree_on_edge_readings(
        kind in 0u8..3,
        clock in 0u8..4,
        // Per cycle: the job's picks (one per GPU, or one for all), a hold of the last cycle's
        // readings (a freeze), a skipped cycle, a restart.
        cycles in proptest::collection::vec(
            (proptest::collection::vec(pick(), 8), any::<bool>(), 0u8..10, 0u8..40, 0u8..30, 0u8..25),
            1..150,
        ),
    ) {
        let cfg = config(kind);
        let p = Policy::new(&cfg).expect("valid");
        let mut es = engines(&cfg);
        // Clocks: ordinary, near the top and the bottom of i64.
        let (t0, start) = match clock {
            0 | 1 => (1_000_000i64, 0i64),
            2 => (i64::MAX - 400_000, i64::MAX - 500_000),
            _ => (i64::MIN + 100_000, i64::MIN),
        };
        let jobs = vec![eight("1", 1, start), eight("2", 2, start)];
        let mut t = t0;
        let mut last: Vec<Sample> = Vec::new();
        let mut frozen = 0u8;
        let mut lane_cycles = 0usize;
        for (k, (picks, same, hold, skip, restart, wild)) in cycles.iter().enumerate() {
            let wild = *wild == 0;
            // A gap, samples faster than the interval (rings fill), or the interval.
            t += match *skip {
                0 => 240,
                1..=4 => 20,
                _ => 60,
            };
            let samples: Vec<Sample> = if frozen > 0 && !last.is_empty() {
                frozen -= 1;
                last.iter().map(|s| Sample { t_s: t, ..*s }).collect()
            } else {
                jobs.iter()
                    .flat_map(|j| {
                        j.alloc.iter().enumerate().map(|(i, &g)| make(&picks[if *same { 0 } else { i }], wild, t, k as i64, g)).collect::<Vec<_>>()
                    })
                    .collect()
            };
            if *hold == 0 {
                frozen = 25;
            }
            last = samples.clone();
            if *restart == 0 {
                for e in es.iter_mut() {
                    let j = serde_json::to_string(&e.snapshot(t - 60)).expect("snapshot");
                    let snap: policy::EngineSnapshot = serde_json::from_str(&j).expect("reads back");
                    *e = Engine::restore(p.clone(), Mode::Enforce, snap, t);
                }
                for (k, e) in es.iter_mut().enumerate() {
                    e.set_lane_path(k & 1 == 0);
                    e.set_avx2(k & 2 == 0);
                }
            }
            let obs = Observation { jobs: &jobs, samples: &samples, scope: policy::Scope::Whole, drains: &[] };
            let mut outs: Vec<Vec<policy::Finding>> = vec![Vec::new(); 4];
            for (e, out) in es.iter_mut().zip(outs.iter_mut()) {
                e.step(t, &obs, out);
            }
            lane_cycles += es[0].lane_jobs();
            prop_assert_eq!(es[1].lane_jobs() + es[3].lane_jobs(), 0);
            let want = format!("{:?}", outs[3]);
            for (w, out) in outs.iter().enumerate().take(3) {
                prop_assert_eq!(&format!("{:?}", out), &want, "cycle {} engine {} (lanes {}, avx2 {})", k, w, w & 1 == 0, w & 2 == 0);
            }
            let snaps: Vec<String> = es.iter().map(|e| json(e, t)).collect();
            for w in 0..3 {
                if snaps[w] != snaps[3] {
                    prop_assert!(false, "cycle {} engine {}: snapshots differ {}", k, w, first_diff(&snaps[w], &snaps[3]));
                }
            }
        }
        if std::env::var_os("REVIEW30_SHOW").is_some() {
            eprintln!("{} cycles, {} lane job-cycles", cycles.len(), lane_cycles);
        }
    }
}
