//! What a side recorded about how its runs were made — logged
//! hyperparameters, the system description (its `other_software_stack`
//! entry by entry), `referee run`'s and `run --exec`'s records (container,
//! program commit, library-tuning environment variables, Python packages),
//! the ruleset, the seeds — gathered as (category, name) → values seen, for
//! [`super::explain::what_changed`].

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What kind of fact, in the order a difference plausibly moves speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// Logged hyperparameters, batch size, parallelism, precision.
    Hyperparameters,
    /// The hardware fields of the system description.
    Hardware,
    /// Framework, `other_software_stack` entries, container, packages, OS.
    Software,
    /// Environment variables that tune libraries (`NCCL_*`, `CUDA_*`, …).
    Environment,
    /// Code identities: the program's git commit, referee's version.
    Code,
    /// Ruleset (and with it the RCP tables).
    Rules,
    /// Other fields of the system description (names, status).
    Other,
    /// Seeds: expected to differ, never a cause.
    Seeds,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Hyperparameters => "hyperparameters",
            Category::Hardware => "hardware",
            Category::Software => "software",
            Category::Environment => "environment",
            Category::Code => "code",
            Category::Rules => "rules",
            Category::Other => "other",
            Category::Seeds => "seeds",
        }
    }
}

/// (category, name) → every value the side's runs recorded.
pub type Recorded = BTreeMap<(Category, String), BTreeSet<String>>;

/// Prefixes of environment variables that tune libraries.
pub const TUNING_ENV_PREFIXES: &[&str] = &[
    "NCCL_", "CUDA_", "CUDNN_", "CUBLAS", "TORCH_", "PYTORCH_", "XLA_", "NVTE_", "TF_", "JAX_",
    "OMP_", "MKL_", "HIP_", "ROCM_", "HSA_", "RCCL_", "UCX_", "NVIDIA_",
];

/// Is `name` an environment variable that tunes a library?
pub fn is_tuning_env(name: &str) -> bool {
    TUNING_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

pub(super) fn add(rec: &mut Recorded, cat: Category, name: impl Into<String>, value: &str) {
    let v = value.trim();
    if v.is_empty() {
        return;
    }
    rec.entry((cat, name.into()))
        .or_default()
        .insert(v.to_string());
}

fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Hardware fields of a system description.
fn is_hardware(field: &str) -> bool {
    [
        "accelerator",
        "host_",
        "number_of_nodes",
        "cooling",
        "hw_notes",
        "disk_",
        "filesystem",
        "nics_",
        "network_",
        "number_of_type_nics",
        "power_",
        "other_hardware",
        "boot_firmware",
        "management_firmware",
    ]
    .iter()
    .any(|p| field.starts_with(p))
}

/// One entry of an `other_software_stack` string (`TransformerEngine-385d10eb`,
/// `PyTorch 2.6.0`, `cuda: 12.4`): (name, version).
pub fn stack_entry(entry: &str) -> (String, String) {
    let e = entry.trim();
    for sep in [':', '='] {
        if let Some((n, v)) = e.split_once(sep) {
            return (n.trim().to_string(), v.trim().to_string());
        }
    }
    let versionish = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == 'v' || c == 'V')
            || s.chars().all(|c| c.is_ascii_hexdigit())
    };
    for sep in [' ', '-'] {
        if let Some((n, v)) = e.rsplit_once(sep)
            && !n.is_empty()
            && versionish(v)
        {
            return (n.trim().to_string(), v.trim().to_string());
        }
    }
    (e.to_string(), "present".to_string())
}

/// A system description's fields (`system.FIELD`), its
/// `other_software_stack` entry by entry (`system.other_software_stack.NAME`).
pub fn from_system(desc: &serde_json::Value, rec: &mut Recorded) {
    let Some(m) = desc.as_object() else {
        return;
    };
    for (k, v) in m {
        if k == "other_software_stack" {
            match v {
                serde_json::Value::Object(o) => {
                    for (n, x) in o {
                        add(
                            rec,
                            Category::Software,
                            format!("system.other_software_stack.{n}"),
                            &json_text(x),
                        );
                    }
                }
                serde_json::Value::String(s) => {
                    for entry in s.split([',', ';']).filter(|e| !e.trim().is_empty()) {
                        let (n, x) = stack_entry(entry);
                        add(
                            rec,
                            Category::Software,
                            format!("system.other_software_stack.{n}"),
                            &x,
                        );
                    }
                }
                other => add(
                    rec,
                    Category::Software,
                    "system.other_software_stack",
                    &json_text(other),
                ),
            }
            continue;
        }
        let cat = if matches!(
            k.as_str(),
            "framework" | "framework_name" | "operating_system" | "sw_notes"
        ) {
            Category::Software
        } else if is_hardware(k) || k == "accelerators_per_node" {
            Category::Hardware
        } else {
            Category::Other
        };
        add(rec, cat, format!("system.{k}"), &json_text(v));
    }
}

/// A log's hyperparameters (`log.KEY`), seed and provenance environment.
pub(super) fn from_log(
    hyper: &BTreeMap<String, String>,
    seed: Option<i64>,
    env: &BTreeMap<String, String>,
    rec: &mut Recorded,
) {
    for (k, v) in hyper {
        add(rec, Category::Hyperparameters, format!("log.{k}"), v);
    }
    if let Some(s) = seed {
        add(rec, Category::Seeds, "log.seed", &s.to_string());
    }
    for (k, v) in env.iter().filter(|(k, _)| is_tuning_env(k)) {
        add(rec, Category::Environment, format!("env.{k}"), v);
    }
}

/// A `referee_run.json`: the resolved configuration, device and engine,
/// referee's identity, and — for `run --exec` — each run's provenance
/// (container, the program's commit, its environment, its Python packages).
pub(super) fn from_record(r: &serde_json::Value, rec: &mut Recorded) {
    if let Some(c) = r["config"].as_object() {
        for (k, v) in c {
            add(
                rec,
                Category::Hyperparameters,
                format!("config.{k}"),
                &json_text(v),
            );
        }
    }
    for (k, cat) in [
        ("world_size", Category::Hyperparameters),
        ("step_delay_ms", Category::Hyperparameters),
        ("device", Category::Hardware),
        ("engine", Category::Software),
    ] {
        if !r[k].is_null() {
            add(rec, cat, format!("run.{k}"), &json_text(&r[k]));
        }
    }
    let code = &r["code"];
    for (k, name) in [
        ("referee_version", "referee.version"),
        ("git_commit", "referee.git_commit"),
    ] {
        if let Some(v) = code[k].as_str() {
            add(rec, Category::Code, name, v);
        }
    }
    if r["mode"] == "exec"
        && let Some(cmd) = r["command"].as_array()
    {
        let words: Vec<String> = cmd.iter().map(json_text).collect();
        add(rec, Category::Code, "program.command", &words.join(" "));
    }
    let sw = &r["software"];
    for (key, prefix) in [("python_packages", "python"), ("conda_packages", "conda")] {
        for (k, v) in sw[key].as_object().into_iter().flatten() {
            add(
                rec,
                Category::Software,
                format!("{prefix}.{k}"),
                &json_text(v),
            );
        }
    }
    for (key, name) in [
        ("nvidia_driver", "nvidia.driver_version"),
        ("cuda_driver_version", "nvidia.cuda_driver_version"),
    ] {
        if let Some(v) = sw[key].as_str() {
            add(rec, Category::Software, name, v);
        }
    }
    for s in r["seeds"].as_array().into_iter().flatten() {
        add(rec, Category::Seeds, "run.seed", &json_text(s));
    }
    for run in r["runs"].as_array().into_iter().flatten() {
        let p = &run["provenance"];
        if !p.is_object() {
            continue;
        }
        for (k, v) in p["container"].as_object().into_iter().flatten() {
            add(
                rec,
                Category::Software,
                format!("container.{k}"),
                &json_text(v),
            );
        }
        if let Some(c) = p["git_commit"].as_str() {
            add(rec, Category::Code, "program.git_commit", c);
        }
        if let Some(d) = p["uncommitted_diff_sha256"].as_str() {
            let d = if d.is_empty() { "none" } else { d };
            add(rec, Category::Code, "program.uncommitted_diff_sha256", d);
        }
        for (k, v) in p["env"].as_object().into_iter().flatten() {
            if is_tuning_env(k) {
                add(
                    rec,
                    Category::Environment,
                    format!("env.{k}"),
                    &json_text(v),
                );
            }
        }
        for (k, v) in p["python_packages"].as_object().into_iter().flatten() {
            add(
                rec,
                Category::Software,
                format!("python.{k}"),
                &json_text(v),
            );
        }
    }
}

/// Rank of a fact within its category: the software entries that most
/// often move speed first (framework, CUDA, NCCL, cuDNN, cuBLAS, drivers,
/// kernel), then by name.
pub fn rank(name: &str) -> usize {
    let n = name.to_ascii_lowercase();
    const ORDER: &[&str] = &[
        "global_batch_size",
        "gbs",
        "precision",
        "framework",
        "cuda_version",
        "nccl",
        "cudnn",
        "cublas",
        "transformer",
        "torch",
        "driver",
        "kernel",
        "container",
        "rocm",
        "hip",
    ];
    ORDER
        .iter()
        .position(|k| n.contains(k))
        .unwrap_or(ORDER.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_entries_split_into_name_and_version() {
        assert_eq!(
            stack_entry(" TransformerEngine-385d10eb"),
            ("TransformerEngine".into(), "385d10eb".into())
        );
        assert_eq!(
            stack_entry("nemo-v2.0.0.rc0.beta"),
            ("nemo".into(), "v2.0.0.rc0.beta".into())
        );
        assert_eq!(
            stack_entry("PyTorch 2.6.0"),
            ("PyTorch".into(), "2.6.0".into())
        );
        assert_eq!(stack_entry("cuda: 12.4"), ("cuda".into(), "12.4".into()));
        assert_eq!(
            stack_entry("flash-attn"),
            ("flash-attn".into(), "present".into())
        );
    }

    #[test]
    fn system_fields_are_classified() {
        let mut rec = Recorded::new();
        from_system(
            &serde_json::json!({
                "framework": "NeMo 25.04",
                "accelerator_model_name": "GB200",
                "system_name": "tyche",
                "host_storage_type": "",
                "other_software_stack": {"cuda_version": "12.9"},
            }),
            &mut rec,
        );
        let keys: Vec<(Category, &str)> = rec.keys().map(|(c, n)| (*c, n.as_str())).collect();
        assert_eq!(
            keys,
            vec![
                (Category::Hardware, "system.accelerator_model_name"),
                (Category::Software, "system.framework"),
                (
                    Category::Software,
                    "system.other_software_stack.cuda_version"
                ),
                (Category::Other, "system.system_name"),
            ]
        );
    }
}
