//! Arbitrary bytes never make a parser panic (they may return errors).

use enforcer::parse::{cgroup, gres_detail, hostlist, scontrol_node, smi, squeue_format, squeue_json, tres};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        // Arbitrary bytes, lossily decoded, as the runner does with child output.
        proptest::collection::vec(any::<u8>(), 0..400).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        // Text built from the characters these formats are made of.
        "[a-zA-Z0-9\\[\\]\\-,|=:+_/. \\n{}\"%#@*()]{0,300}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_parser_panics(t in text()) {
        let _ = hostlist::parse(&t);
        let _ = tres::parse(&t);
        let _ = gres_detail::gpu_count(&t);
        let _ = gres_detail::gpu_indices(&t);
        let _ = smi::parse_gpus(&t, None);
        let _ = smi::parse_gpus(&t, Some(&smi::GPU_QUERY));
        let _ = smi::parse_apps(&t, None);
        let _ = smi::parse_list(&t);
        let _ = smi::no_data(&t);
        let _ = squeue_json::parse(&t);
        let _ = squeue_format::parse(&t, &squeue_format::own_columns(), &chrono::Utc);
        let _ = squeue_format::parse_own(&t, &chrono::Utc);
        let _ = squeue_format::start_time(&t, &chrono::Utc);
        let _ = scontrol_node::parse(&t);
        let _ = scontrol_node::parse_reason(&t);
        let _ = scontrol_node::strip_author(&t);
        let _ = cgroup::parse(&t);
    }

    #[test]
    fn hostlist_expansions_stay_bounded(prefix in "[a-z]{1,4}", lo in 0u32..50, span in 0u32..50, width in 1usize..5) {
        let hi = lo + span;
        let expr = format!("{prefix}[{lo:0width$}-{hi:0width$}]");
        let got = hostlist::parse(&expr).unwrap();
        prop_assert_eq!(got.len() as u32, span + 1);
        prop_assert!(got.iter().all(|h| h.starts_with(&prefix)));
    }

    #[test]
    fn gres_detail_counts_every_index_of_every_gpu_item(
        items in proptest::collection::vec((proptest::collection::vec((0u32..40, 0u32..4), 1..4), "[a-z0-9]{0,5}"), 1..4),
        big in prop_oneof![Just(0u32), Just(u32::MAX - 1), Just(u32::MAX)],
    ) {
        // Each item: `gpu[:TYPE]:N(IDX:a-b,c,…)` with N printed as the true count, plus a
        // non-GPU item that must be skipped.
        let mut want = 0u32;
        let mut parts = Vec::new();
        for (ranges, ty) in &items {
            let list: Vec<String> = ranges.iter().map(|(lo, span)| if *span == 0 { lo.to_string() } else { format!("{lo}-{}", lo + span) }).collect();
            let n: u32 = ranges.iter().map(|(_, span)| span + 1).sum();
            want += n;
            let head = if ty.is_empty() { format!("gpu:{n}") } else { format!("gpu:{ty}:{n}") };
            parts.push(format!("{head}(IDX:{})", list.join(",")));
        }
        parts.push("gg:g0(CNT:1)".to_string());
        prop_assert_eq!(gres_detail::gpu_count(&parts.join(",")).unwrap(), want);
        // A range reaching u32::MAX is an error or a count, never a panic.
        let _ = gres_detail::gpu_count(&format!("gpu(IDX:{big}-{})", u32::MAX));
        let _ = gres_detail::gpu_count(&format!("gpu(IDX:0-{big},0-{big})"));
    }

    #[test]
    fn gres_detail_index_lists_round_trip(
        set in proptest::collection::btree_set(0u32..300, 1..24),
        cuts in proptest::collection::vec(any::<bool>(), 24),
        merge in proptest::collection::vec(any::<bool>(), 24),
        types in proptest::collection::vec("[a-z][a-z0-9]{0,5}", 4),
        typed in any::<bool>(),
    ) {
        // The set, written as runs `a-b` (a run may also be written index by index), split
        // into several items (`gpu:TYPE:N(IDX:…)` or untyped), with non-GPU GRES between them.
        let v: Vec<u32> = set.iter().copied().collect();
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for (i, &x) in v.iter().enumerate() {
            match runs.last_mut() {
                Some((_, hi)) if *hi + 1 == x && merge[i] => *hi = x,
                _ => runs.push((x, x)),
            }
        }
        let mut items: Vec<Vec<String>> = vec![Vec::new()];
        for (i, (lo, hi)) in runs.iter().enumerate() {
            if i > 0 && cuts[i] {
                items.push(Vec::new());
            }
            let text = if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") };
            items.last_mut().unwrap().push(text);
        }
        let mut parts = Vec::new();
        for (i, list) in items.iter().enumerate() {
            let n: u32 = list.iter().map(|r| match r.split_once('-') {
                Some((a, b)) => b.parse::<u32>().unwrap() - a.parse::<u32>().unwrap() + 1,
                None => 1,
            }).sum();
            let head = if typed { format!("gpu:{}:{n}", types[i % types.len()]) } else { "gpu".to_string() };
            parts.push(format!("{head}(IDX:{})", list.join(",")));
            if i % 2 == 0 {
                parts.push("gg:g0(CNT:1)".to_string());
            }
        }
        let text = parts.join(",");
        prop_assert_eq!(gres_detail::gpu_indices(&text).unwrap(), Some(v.clone()), "{}", text);
        prop_assert_eq!(gres_detail::gpu_count(&text).unwrap(), v.len() as u32, "{}", text);
        // One count-only GPU item anywhere: no indices, never a partial list.
        let with_cnt = format!("{text},gpu:x(CNT:1)");
        prop_assert_eq!(gres_detail::gpu_indices(&with_cnt).unwrap(), None);
        // Any index given twice is an error, never a list with a repeat.
        let twice = format!("{text},gpu(IDX:{})", v[v.len() / 2]);
        prop_assert!(gres_detail::gpu_indices(&twice).is_err(), "{}", twice);
    }

    #[test]
    fn squeue_json_from_structured_junk(id in any::<i64>(), state in "[A-Z_]{0,12}", nodes in "[a-z0-9\\[\\],-]{0,20}", tres in "[a-z/=:0-9,]{0,30}") {
        let j = serde_json::json!({"jobs": [{"job_id": id, "job_state": [state], "nodes": nodes, "tres_alloc_str": tres, "start_time": {"set": true, "number": id}}]});
        let _ = squeue_json::parse(&j.to_string());
    }
}
