//! Facts about benchmarks and rulesets, each stated once.
//!
//! These are the numbers of the MLPerf Training rules as the official tools
//! apply them: required result files per benchmark, how many runs olympic
//! scoring may drop, which benchmarks a ruleset allows, which convergence
//! unit the RCP test reads, the 33 system-description fields. Every other
//! module asks here. referee's own benchmarks are added to a [`RulesetFacts`] at run
//! time by the harness (see [`RulesetFacts::with_benchmark`]).

use std::collections::HashMap;

/// What referee needs to know about one benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchmarkFacts {
    pub name: String,
    /// Exactly this many `result_*.txt` files per benchmark directory.
    pub result_files: usize,
    /// Olympic scoring drops this many runs at each end; also the number of
    /// failed runs a directory may contain.
    pub max_dropped: usize,
    /// Runs per submission in the RCP test (reference sets hold 2× this).
    pub rcp_submission_runs: Option<usize>,
    /// Convergence is read from `metadata.samples_count` (LLM-style); else
    /// from `metadata.epoch_num` rounded to 3 decimals.
    pub converges_in_samples: bool,
    /// The RCP JSON holds `samples to converge` rather than
    /// `Epochs to converge`.
    pub rcp_samples_field: bool,
}

/// Training benchmarks: (name, result files, RCP submission runs).
const TRAINING: &[(&str, usize, Option<usize>)] = &[
    ("bert", 10, Some(10)),
    ("dlrm", 5, None),
    ("dlrm_dcnv2", 10, Some(10)),
    ("gnmt", 10, None),
    ("gpt3", 3, Some(3)),
    ("maskrcnn", 5, Some(5)),
    ("minigo", 10, None),
    ("resnet", 5, Some(5)),
    ("ssd", 5, Some(5)),
    ("retinanet", 5, Some(5)),
    ("stable_diffusion", 10, Some(10)),
    ("transformer", 10, None),
    ("ncf", 10, None),
    ("rnnt", 10, Some(10)),
    ("unet3d", 40, Some(40)),
    ("gnn", 10, Some(10)),
    ("rgat", 10, Some(10)),
    ("llama2_70b_lora", 10, Some(10)),
    ("llama31_405b", 3, Some(3)),
    ("llama31_8b", 10, Some(10)),
    ("flux1", 10, Some(10)),
    ("gpt_oss_20b", 10, Some(10)),
    ("deepseekv3_671b", 3, Some(3)),
    ("qwen35_397b_grpo", 3, Some(3)),
    ("dlrmv4", 10, Some(10)),
];

const HPC: &[(&str, usize, Option<usize>)] = &[
    ("deepcam", 5, Some(5)),
    ("cosmoflow", 10, Some(10)),
    ("oc20", 5, Some(5)),
    ("openfold", 10, Some(10)),
];

/// Benchmarks whose RCP convergence point is `samples_count`.
const SAMPLES_CONVERGENCE: &[&str] = &[
    "llama2_70b_lora",
    "flux1",
    "llama31_405b",
    "llama31_8b",
    "gpt_oss_20b",
    "deepseekv3_671b",
    "qwen35_397b_grpo",
    "dlrmv4",
];

/// Allowed training benchmarks per `major.minor`, in summary column order.
const ALLOWED_TRAINING: &[(&str, &[&str])] = &[
    (
        "0.6",
        &[
            "resnet",
            "ssd",
            "maskrcnn",
            "gnmt",
            "transformer",
            "ncf",
            "minigo",
        ],
    ),
    (
        "0.7",
        &[
            "bert",
            "dlrm",
            "gnmt",
            "maskrcnn",
            "minigo",
            "resnet",
            "ssd",
            "transformer",
        ],
    ),
    (
        "1.0",
        &[
            "bert", "dlrm", "maskrcnn", "minigo", "resnet", "ssd", "rnnt", "unet3d",
        ],
    ),
    (
        "1.1",
        &[
            "bert", "dlrm", "maskrcnn", "minigo", "resnet", "ssd", "rnnt", "unet3d",
        ],
    ),
    (
        "2.0",
        &[
            "bert", "dlrm", "maskrcnn", "minigo", "resnet", "ssd", "rnnt", "unet3d",
        ],
    ),
    (
        "2.1",
        &[
            "bert", "dlrm", "maskrcnn", "minigo", "resnet", "ssd", "rnnt", "unet3d",
        ],
    ),
    (
        "3.0",
        &[
            "bert",
            "dlrm_dcnv2",
            "gpt3",
            "maskrcnn",
            "resnet",
            "ssd",
            "rnnt",
            "unet3d",
        ],
    ),
    (
        "3.1",
        &[
            "bert",
            "dlrm_dcnv2",
            "gpt3",
            "maskrcnn",
            "resnet",
            "ssd",
            "rnnt",
            "unet3d",
            "stable_diffusion",
        ],
    ),
    (
        "4.0",
        &[
            "bert",
            "dlrm_dcnv2",
            "gpt3",
            "resnet",
            "ssd",
            "unet3d",
            "stable_diffusion",
            "llama2_70b_lora",
            "gnn",
        ],
    ),
    (
        "4.1",
        &[
            "bert",
            "dlrm_dcnv2",
            "gpt3",
            "ssd",
            "stable_diffusion",
            "llama2_70b_lora",
            "gnn",
        ],
    ),
    (
        "5.0",
        &[
            "bert",
            "dlrm_dcnv2",
            "retinanet",
            "stable_diffusion",
            "llama2_70b_lora",
            "rgat",
            "llama31_405b",
        ],
    ),
    (
        "5.1",
        &[
            "llama31_8b",
            "dlrm_dcnv2",
            "retinanet",
            "flux1",
            "llama2_70b_lora",
            "rgat",
            "llama31_405b",
        ],
    ),
    (
        "6.0",
        &[
            "llama31_8b",
            "dlrm_dcnv2",
            "flux1",
            "llama2_70b_lora",
            "llama31_405b",
            "gpt_oss_20b",
            "deepseekv3_671b",
        ],
    ),
    (
        "6.1",
        &[
            "llama31_8b",
            "flux1",
            "llama2_70b_lora",
            "gpt_oss_20b",
            "deepseekv3_671b",
            "qwen35_397b_grpo",
            "dlrmv4",
        ],
    ),
];

const ALLOWED_HPC: &[(&str, &[&str])] = &[
    ("0.7", &["deepcam", "cosmoflow"]),
    ("1.0", &["deepcam", "cosmoflow", "oc20"]),
    ("2.0", &["deepcam", "cosmoflow", "oc20", "openfold"]),
    ("3.0", &["deepcam", "cosmoflow", "oc20", "openfold"]),
];

/// The 33 fields every system-description JSON must have.
pub const SYSTEM_REQUIRED_FIELDS: [&str; 33] = [
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processors_per_node",
    "host_processor_model_name",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_processor_frequency",
    "host_processor_caches",
    "host_processor_interconnect",
    "host_memory_capacity",
    "host_storage_type",
    "host_storage_capacity",
    "host_networking",
    "host_networking_topology",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_host_interconnect",
    "accelerator_frequency",
    "accelerator_on-chip_memories",
    "accelerator_memory_configuration",
    "accelerator_memory_capacity",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "cooling",
    "hw_notes",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
];

/// Allowed `status` values of a training system description (ruleset ≥ 4).
pub const SYSTEM_STATUS_VALUES: [&str; 4] = [
    "Available on-premise",
    "Available cloud",
    "Research, Development, or Internal (RDI)",
    "Preview",
];

/// Source files the seed rules consider (the official extension list).
pub const SEED_SOURCE_EXTENSIONS: &[&str] = &[
    "py", "cc", "cpp", "cxx", "c", "h", "hh", "hpp", "hxx", "sh", "sub", "cu", "cuh",
];

/// Initialisation budget before the clock starts, in minutes.
pub fn init_budget_minutes(division: &str) -> u64 {
    if division == "open" { 240 } else { 30 }
}

/// The llama31_405b RCP allowance: one evaluation interval of samples,
/// applied by the official checker for every ruleset ≥ 5.0.0.
pub const LLAMA31_405B_RCP_ALLOWANCE: f64 = 46080.0;

/// RCP significance level (one-sided t-test) and bisection tolerance.
pub const RCP_ALPHA: f64 = 0.05;
pub const RCP_TOLERANCE: f64 = 0.0001;

/// Rulesets that have seed and RCP checks.
pub fn has_seed_and_rcp_checks(ruleset: &str) -> bool {
    let v = version_tuple(ruleset);
    ((1, 0, 0)..=(6, 1, 0)).contains(&v)
}

/// The system-description `status` rule applies (training, major ≥ 4; the
/// official condition meant "≥ 4.1" but also matches 4.0).
pub fn status_rule_applies(usage: &str, ruleset: &str) -> bool {
    usage == "training" && version_tuple(ruleset).0 >= 4
}

/// `(major, minor, patch)` of an `X.Y.Z` string (missing parts are 0).
pub fn version_tuple(v: &str) -> (u32, u32, u32) {
    let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// The benchmark table in force: the official benchmarks plus any added.
#[derive(Debug, Clone)]
pub struct RulesetFacts {
    training: HashMap<String, BenchmarkFacts>,
    hpc: HashMap<String, BenchmarkFacts>,
    /// Extra allowed benchmarks per ruleset name (referee's own rulesets).
    extra_allowed: HashMap<String, Vec<String>>,
}

impl Default for RulesetFacts {
    fn default() -> Self {
        Self::official()
    }
}

fn benchmark_table(rows: &[(&str, usize, Option<usize>)]) -> HashMap<String, BenchmarkFacts> {
    rows.iter()
        .map(|(n, files, rcp)| {
            (
                n.to_string(),
                BenchmarkFacts {
                    name: n.to_string(),
                    result_files: *files,
                    max_dropped: if *n == "unet3d" { 4 } else { 1 },
                    rcp_submission_runs: *rcp,
                    converges_in_samples: SAMPLES_CONVERGENCE.contains(n),
                    rcp_samples_field: matches!(*n, "llama2_70b_lora" | "flux1"),
                },
            )
        })
        .collect()
}

impl RulesetFacts {
    pub fn official() -> Self {
        RulesetFacts {
            training: benchmark_table(TRAINING),
            hpc: benchmark_table(HPC),
            extra_allowed: HashMap::new(),
        }
    }

    /// Add a (training) benchmark allowed under `ruleset`.
    pub fn with_benchmark(mut self, ruleset: &str, b: BenchmarkFacts) -> Self {
        self.extra_allowed
            .entry(ruleset.to_string())
            .or_default()
            .push(b.name.clone());
        self.training.insert(b.name.clone(), b);
        self
    }

    pub fn benchmark(&self, usage: &str, name: &str) -> Option<&BenchmarkFacts> {
        match usage {
            "hpc" => self.hpc.get(name),
            _ => self.training.get(name),
        }
    }

    /// Benchmarks allowed in a ruleset (`X.Y.Z` or `X.Y`), in column order.
    pub fn allowed(&self, usage: &str, ruleset: &str) -> Vec<String> {
        if let Some(extra) = self.extra_allowed.get(ruleset) {
            return extra.clone();
        }
        let (maj, min, _) = version_tuple(ruleset);
        let key = format!("{maj}.{min}");
        let rows = if usage == "hpc" {
            ALLOWED_HPC
        } else {
            ALLOWED_TRAINING
        };
        let mut out: Vec<String> = Vec::new();
        if let Some((_, list)) = rows.iter().find(|(k, _)| *k == key) {
            for b in *list {
                if !out.iter().any(|x| x == b) {
                    out.push(b.to_string());
                }
            }
        }
        out
    }

    /// A ruleset defined at run time (referee's own), which follows the
    /// current rules.
    pub fn is_extra_ruleset(&self, ruleset: &str) -> bool {
        self.extra_allowed.contains_key(ruleset)
    }

    /// Seed and RCP checks apply (closed division).
    pub fn has_seed_and_rcp_checks(&self, ruleset: &str) -> bool {
        self.is_extra_ruleset(ruleset) || has_seed_and_rcp_checks(ruleset)
    }

    /// The system-description `status` rule applies.
    pub fn status_rule_applies(&self, usage: &str, ruleset: &str) -> bool {
        self.is_extra_ruleset(ruleset) || status_rule_applies(usage, ruleset)
    }

    /// Olympic drops for a benchmark (1 unless the table says otherwise).
    pub fn max_dropped(&self, usage: &str, name: &str) -> usize {
        self.benchmark(usage, name)
            .map(|b| b.max_dropped)
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_facts() {
        let m = RulesetFacts::official();
        assert_eq!(m.benchmark("training", "unet3d").unwrap().result_files, 40);
        assert_eq!(m.max_dropped("training", "unet3d"), 4);
        assert_eq!(m.max_dropped("training", "bert"), 1);
        assert_eq!(
            m.benchmark("training", "llama31_405b")
                .unwrap()
                .result_files,
            3
        );
        assert!(
            m.benchmark("training", "llama31_8b")
                .unwrap()
                .converges_in_samples
        );
        assert!(
            !m.benchmark("training", "bert")
                .unwrap()
                .converges_in_samples
        );
        assert!(m.benchmark("training", "flux1").unwrap().rcp_samples_field);
        assert_eq!(m.allowed("training", "5.0.0").len(), 7);
        assert_eq!(
            m.allowed("training", "4.0.0").len(),
            9,
            "the duplicate stable_diffusion entry collapses"
        );
        assert_eq!(
            m.allowed("hpc", "3.0.0"),
            vec!["deepcam", "cosmoflow", "oc20", "openfold"]
        );
        assert!(status_rule_applies("training", "4.0.0"));
        assert!(!status_rule_applies("training", "3.1.0"));
        assert!(has_seed_and_rcp_checks("5.0.0"));
        assert!(!has_seed_and_rcp_checks("0.7.0"));
        assert_eq!(SYSTEM_REQUIRED_FIELDS.len(), 33);
    }

    #[test]
    fn extra_benchmarks() {
        let m = RulesetFacts::official().with_benchmark(
            "referee-1.0",
            BenchmarkFacts {
                name: "mini_llm".into(),
                result_files: 5,
                max_dropped: 1,
                rcp_submission_runs: Some(5),
                converges_in_samples: true,
                rcp_samples_field: false,
            },
        );
        assert_eq!(m.allowed("training", "referee-1.0"), vec!["mini_llm"]);
        assert_eq!(m.benchmark("training", "mini_llm").unwrap().result_files, 5);
    }
}
