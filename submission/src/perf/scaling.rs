//! Scaling efficiency of one model's runs at several GPU counts.
//!
//! Runs are grouped by model, system and precision; a group with at least
//! two GPU counts gets a scaling view. The base is the smallest GPU count.
//! Efficiency at N GPUs = per-GPU throughput at N ÷ per-GPU throughput at
//! the base — for strong scaling (GBS fixed) that is speedup ÷ (N ÷ base),
//! for weak scaling (GBS ∝ GPUs) the ratio of per-GPU throughputs; the two
//! definitions coincide in this form. Per-GPU throughput is tokens/s/GPU
//! when every run of the group has it, else model TFLOP/s/GPU; several runs
//! at one count are averaged. The kind is weak when GBS ÷ GPUs is the same
//! at every count, strong when GBS is, mixed otherwise (or unknown without
//! GBS).

use serde::Serialize;
use std::collections::BTreeMap;

/// What scaling needs of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingInput {
    pub model: String,
    pub system: String,
    pub precision: String,
    pub gpus: u64,
    pub gbs: Option<u64>,
    pub tokens_per_gpu: Option<f64>,
    pub tflops_per_gpu: Option<f64>,
}

/// One GPU count of a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingPoint {
    pub gpus: u64,
    pub runs: usize,
    pub gbs: Option<u64>,
    /// Per-GPU throughput (mean over the runs), in the group's metric.
    pub per_gpu: f64,
    /// per_gpu ÷ the base's per_gpu.
    pub efficiency: f64,
}

/// A model's scaling view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingGroup {
    pub model: String,
    pub system: String,
    pub precision: String,
    /// `weak`, `strong`, `mixed` or `unknown` (GBS not stated).
    pub kind: &'static str,
    /// `tokens/s/GPU` or `TFLOP/s/GPU`.
    pub metric: &'static str,
    pub base_gpus: u64,
    pub points: Vec<ScalingPoint>,
}

/// The scaling views of `runs` (groups with at least two GPU counts).
pub fn scaling(runs: &[ScalingInput]) -> Vec<ScalingGroup> {
    let mut groups: BTreeMap<(String, String, String), Vec<&ScalingInput>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.model.clone(), r.system.clone(), r.precision.clone()))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((model, system, precision), members) in groups {
        let (metric, value): (&'static str, fn(&ScalingInput) -> Option<f64>) =
            if members.iter().all(|r| r.tokens_per_gpu.is_some()) {
                ("tokens/s/GPU", |r| r.tokens_per_gpu)
            } else if members.iter().all(|r| r.tflops_per_gpu.is_some()) {
                ("TFLOP/s/GPU", |r| r.tflops_per_gpu)
            } else {
                continue;
            };
        let mut by_count: BTreeMap<u64, Vec<&ScalingInput>> = BTreeMap::new();
        for r in &members {
            by_count.entry(r.gpus).or_default().push(r);
        }
        if by_count.len() < 2 {
            continue;
        }
        let mut points: Vec<ScalingPoint> = by_count
            .iter()
            .map(|(&gpus, rs)| {
                let vals: Vec<f64> = rs.iter().filter_map(|r| value(r)).collect();
                let gbs = rs[0].gbs.filter(|g| rs.iter().all(|r| r.gbs == Some(*g)));
                ScalingPoint {
                    gpus,
                    runs: rs.len(),
                    gbs,
                    per_gpu: vals.iter().sum::<f64>() / vals.len() as f64,
                    efficiency: f64::NAN,
                }
            })
            .collect();
        let base = points[0].per_gpu;
        for p in &mut points {
            p.efficiency = p.per_gpu / base;
        }
        let kind = if points.iter().any(|p| p.gbs.is_none()) {
            "unknown"
        } else {
            let gbs: Vec<u64> = points.iter().map(|p| p.gbs.expect("checked")).collect();
            let ratio_same = points.iter().all(|p| {
                p.gbs.expect("checked") as u128 * points[0].gpus as u128
                    == gbs[0] as u128 * p.gpus as u128
            });
            if gbs.iter().all(|g| *g == gbs[0]) {
                "strong"
            } else if ratio_same {
                "weak"
            } else {
                "mixed"
            }
        };
        out.push(ScalingGroup {
            model,
            system,
            precision,
            kind,
            metric,
            base_gpus: points[0].gpus,
            points,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(gpus: u64, gbs: u64, step_s: f64) -> ScalingInput {
        // seq 4096: tokens/s/GPU = 4096 × GBS ÷ step ÷ GPUs.
        ScalingInput {
            model: "m".into(),
            system: "s".into(),
            precision: "BF16".into(),
            gpus,
            gbs: Some(gbs),
            tokens_per_gpu: Some(4096.0 * gbs as f64 / step_s / gpus as f64),
            tflops_per_gpu: None,
        }
    }

    #[test]
    fn weak_scaling_by_hand() {
        // GBS 128 per 8 GPUs; the step time grows from 2.0 s to 2.5 s at 32:
        // efficiency 2.0 / 2.5 = 0.8; at 16, 2.0 / 2.2.
        let g = scaling(&[run(8, 128, 2.0), run(16, 256, 2.2), run(32, 512, 2.5)]);
        assert_eq!(g.len(), 1);
        let g = &g[0];
        assert_eq!((g.kind, g.metric, g.base_gpus), ("weak", "tokens/s/GPU", 8));
        assert_eq!(g.points[0].efficiency, 1.0);
        assert!((g.points[1].efficiency - 2.0 / 2.2).abs() < 1e-12);
        assert!((g.points[2].efficiency - 0.8).abs() < 1e-12);
    }

    #[test]
    fn strong_scaling_by_hand() {
        // GBS fixed at 512: 8 GPUs 10 s, 16 GPUs 6 s → speedup 10/6 on 2×
        // the GPUs: efficiency (10/6)/2 = 0.8333…; two runs at 16 averaged.
        let g = scaling(&[run(8, 512, 10.0), run(16, 512, 6.0), run(16, 512, 6.0)]);
        let g = &g[0];
        assert_eq!(g.kind, "strong");
        assert_eq!(g.points[1].runs, 2);
        assert!((g.points[1].efficiency - 10.0 / 6.0 / 2.0).abs() < 1e-12);
    }

    #[test]
    fn one_count_or_other_models_make_no_view() {
        let mut other = run(16, 256, 2.0);
        other.model = "other".into();
        assert!(scaling(&[run(8, 128, 2.0), other]).is_empty());
        // TFLOP/s/GPU when tokens are not known; GBS unknown → kind unknown.
        let a = ScalingInput {
            gbs: None,
            tokens_per_gpu: None,
            tflops_per_gpu: Some(400.0),
            ..run(8, 1, 1.0)
        };
        let b = ScalingInput {
            gpus: 64,
            tflops_per_gpu: Some(360.0),
            ..a.clone()
        };
        let g = &scaling(&[a, b])[0];
        assert_eq!((g.kind, g.metric), ("unknown", "TFLOP/s/GPU"));
        assert!((g.points[1].efficiency - 0.9).abs() < 1e-12);
    }
}
