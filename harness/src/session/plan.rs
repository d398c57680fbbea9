//! Planning a session of runs: a [`RunRequest`] (what the user asked for,
//! from flags or a caller) is resolved once into a [`SessionConfig`] — the
//! benchmark, its validated hyperparameters (defaults, then a config file,
//! then `--set` overrides; fixed ones enforced in the closed division), the
//! device and engine, the prepared data's fingerprints, the output
//! directory and one seed per run — before anything runs. Every later step
//! reads only the resolved form.

// A request names its division: callers that build one need not know
// where the type lives.
use crate::common::division::Division;
use crate::outdir::{default_system_name, os_seed, result_count, utc_stamp};
use crate::provenance::{CodeIdentity, filtered_env, json_sha256};
use crate::session::cpu_plans::CpuPlanSetting;
use crate::session::error::SessionError;
use crate::session::gpu::GpuInfo;
use crate::session::launch::Placement;
use crate::session::run::{RunPlan, ThroughputPlan};
use referee_datasets::rng::run_seeds;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a session measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Train to the quality target (MLPerf timing rules).
    TimeToTrain,
    /// A fixed number of steps; step time and throughput over a window.
    Throughput,
}

/// A session of runs as asked for (by `referee run`'s flags or a caller).
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub benchmark: String,
    /// Number of runs (default: the benchmark's N).
    pub runs: Option<usize>,
    /// Hyperparameters from a YAML or JSON file.
    pub config_file: Option<PathBuf>,
    /// `KEY=VALUE` overrides, applied after the file.
    pub sets: Vec<String>,
    /// Output directory (default: `out/BENCHMARK-TIMESTAMP`).
    pub out: Option<PathBuf>,
    /// Base seed of the run seeds (default: from the OS).
    pub seed: Option<u64>,
    pub division: Division,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// Where prepared datasets are (default: `$REFEREE_DATA_DIR` or `./data`).
    pub data_dir: Option<PathBuf>,
    pub org: String,
    /// System name (default: from the host name and CPU count).
    pub system: Option<String>,
    /// Do not try to drop the page cache.
    pub no_cache_clear: bool,
    /// Follow the whole schedule instead of stopping at the target.
    pub keep_going: bool,
    pub budget_minutes: Option<f64>,
    pub mode: Mode,
    /// Throughput mode: steps to run.
    pub steps: Option<u64>,
    /// Throughput mode: `A..B`, the steps averaged.
    pub window: Option<String>,
    /// Milliseconds added to every training step (to test regression gates).
    pub step_delay_ms: u64,
    /// RFC 3161 time-stamping authorities (`--tsa URL`; crate::tsa).
    pub tsa: Vec<String>,
    /// Power measured during each run (`--power`; crate::power).
    pub power: Option<crate::power::PowerRequest>,
}

/// A session of runs, resolved and validated.
pub struct SessionConfig {
    pub plan: RunPlan,
    /// One seed per run.
    pub seeds: Vec<u64>,
    pub placement: Placement,
    /// The GPU of this rank (None on CPU).
    pub gpu: Option<GpuInfo>,
    /// RFC 3161 time-stamping authorities (crate::tsa) and whether the
    /// seed was chosen (`--seed`) rather than derived from their tokens.
    pub tsa: Vec<String>,
    pub seed_chosen: bool,
    /// Power measured during each run, by the first rank of each node.
    pub power: Option<crate::power::PowerRequest>,
}

impl SessionConfig {
    /// Resolve a request into a run configuration (no work is done yet):
    /// the benchmark, its validated hyperparameters, the device, the prepared
    /// data, the output directory (never one that holds results), the seeds.
    pub fn resolve(a: &RunRequest, placement: Placement) -> Result<SessionConfig, SessionError> {
        let bench = crate::own_benchmarks::find_or_err(&a.benchmark)?;
        let spec = bench.spec();
        let closed = a.division == Division::Closed;
        let division = a.division.as_str();
        let config = resolve_config(bench, a.config_file.as_deref(), &a.sets, closed)?;
        let runs = a.runs.unwrap_or(spec.runs);
        if runs == 0 {
            return Err(SessionError::NoRuns);
        }
        let throughput = match a.mode {
            Mode::TimeToTrain => {
                if a.steps.is_some() || a.window.is_some() {
                    return Err(SessionError::StepsWithoutThroughput);
                }
                None
            }
            Mode::Throughput => {
                let steps = a.steps.ok_or(SessionError::NoSteps)?;
                let window = match &a.window {
                    Some(w) => parse_window(w)?,
                    None => ((steps / 2).max(1), steps + 1),
                };
                if window.1 > steps + 1 {
                    return Err(SessionError::WindowPastSteps { steps });
                }
                Some(ThroughputPlan { steps, window })
            }
        };
        let given = || a.device.clone();
        let ordinal =
            referee_workloads::parse_device(&a.device, placement.local_rank).map_err(|source| {
                SessionError::BadDevice {
                    given: given(),
                    source,
                }
            })?;
        let device = referee_workloads::open_device(ordinal, a.device.trim()).map_err(|e| {
            SessionError::Device {
                given: given(),
                message: e.to_string(),
            }
        })?;
        let gpu = ordinal
            .map(crate::session::gpu::probe)
            .transpose()
            .map_err(|source| SessionError::Gpu {
                given: given(),
                source,
            })?;
        let engine = referee_workloads::Engine::for_device(&device)
            .map_err(|e| SessionError::Engine(e.to_string()))?;
        let data_dir = a
            .data_dir
            .clone()
            .unwrap_or_else(referee_datasets::default_data_dir);
        let fingerprints = dataset_fingerprints(bench, &data_dir)?;
        let out_dir = match &a.out {
            Some(o) => o.clone(),
            None => {
                let now = utc_stamp();
                PathBuf::from("out").join(format!("{}-{now}", spec.name))
            }
        };
        let existing = result_count(&out_dir);
        if existing > 0 {
            return Err(SessionError::OutHoldsResults {
                out: out_dir,
                found: existing,
            });
        }
        let seeds = run_seeds(a.seed.unwrap_or_else(os_seed), runs);
        let system = a.system.clone().unwrap_or_else(default_system_name);
        let budget_minutes = a.budget_minutes.unwrap_or(spec.budget_minutes);
        if budget_minutes <= 0.0 {
            return Err(SessionError::BadBudget);
        }
        let mut plan = build_plan(
            bench,
            config,
            division,
            &a.org,
            &system,
            data_dir,
            out_dir,
            device,
            &a.device,
            engine,
            fingerprints,
        );
        plan.stop_at_target = !a.keep_going;
        plan.budget_minutes = budget_minutes;
        plan.cache_clear = !a.no_cache_clear;
        plan.throughput = throughput;
        plan.step_delay_ms = a.step_delay_ms;
        plan.peak_flops = gpu.as_ref().and_then(|g| g.peak_flops());
        plan.cpu_plan = CpuPlanSetting::from_env()?;
        Ok(SessionConfig {
            plan,
            seeds,
            placement,
            gpu,
            tsa: a.tsa.clone(),
            seed_chosen: a.seed.is_some(),
            power: a.power.clone(),
        })
    }
}

/// A run plan with the harness defaults (stop at target, the benchmark's
/// time budget, cache clearing, no throughput mode).
#[allow(clippy::too_many_arguments)]
pub fn build_plan(
    bench: &'static dyn referee_workloads::bench::Benchmark,
    config: Value,
    division: &str,
    org: &str,
    platform: &str,
    data_dir: PathBuf,
    out_dir: PathBuf,
    device: referee_workloads::Device,
    device_name: &str,
    engine: referee_workloads::Engine,
    dataset_fingerprints: BTreeMap<String, String>,
) -> RunPlan {
    RunPlan {
        bench,
        config_sha256: json_sha256(&config),
        config,
        division: division.into(),
        org: org.to_string(),
        platform: platform.to_string(),
        data_dir,
        out_dir,
        device,
        device_name: device_name.to_string(),
        engine,
        stop_at_target: true,
        budget_minutes: bench.spec().budget_minutes,
        init_budget_ms: referee_rules::ruleset_facts::init_budget_minutes(division) * 60_000,
        cache_clear: true,
        dataset_fingerprints,
        code: CodeIdentity::current(),
        env: filtered_env(std::env::vars()),
        peak_flops: None,
        throughput: None,
        step_delay_ms: 0,
        cpu_plan: CpuPlanSetting::default(),
    }
}

/// Fingerprints of the prepared datasets a benchmark needs; the error says
/// how to prepare them.
pub fn dataset_fingerprints(
    bench: &dyn referee_workloads::bench::Benchmark,
    data_dir: &Path,
) -> Result<BTreeMap<String, String>, referee_datasets::DataError> {
    let mut out = BTreeMap::new();
    for ds in bench.spec().datasets {
        let m = referee_datasets::open_manifest(ds, data_dir)?;
        out.insert(ds.to_string(), m.fingerprint);
    }
    Ok(out)
}

/// Parse a `--set` value as YAML (numbers, booleans, lists, strings).
fn parse_scalar(s: &str) -> Value {
    match yaml_rust2::YamlLoader::load_from_str(s) {
        Ok(docs) if docs.len() == 1 => yaml_to_json(&docs[0]),
        _ => Value::String(s.to_string()),
    }
}

fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => r
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or(Value::String(r.clone())),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    (
                        k.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("{k:?}")),
                        yaml_to_json(v),
                    )
                })
                .collect(),
        ),
        Yaml::Null | Yaml::BadValue => Value::Null,
        Yaml::Alias(_) => Value::Null,
    }
}

/// Read a YAML or JSON hyperparameter file into an object.
pub fn read_config_file(path: &Path) -> Result<serde_json::Map<String, Value>, SessionError> {
    let text = std::fs::read_to_string(path).map_err(|e| SessionError::ConfigRead {
        path: path.to_path_buf(),
        source: e,
    })?;
    let docs =
        yaml_rust2::YamlLoader::load_from_str(&text).map_err(|e| SessionError::ConfigSyntax {
            path: path.to_path_buf(),
            line: e.marker().line(),
            info: e.info().to_string(),
        })?;
    match docs.first().map(yaml_to_json) {
        Some(Value::Object(m)) => Ok(m),
        None => Ok(serde_json::Map::new()),
        Some(_) => Err(SessionError::ConfigNotAMapping {
            path: path.to_path_buf(),
        }),
    }
}

/// Merge overrides into the default configuration and validate it,
/// enforcing fixed hyperparameters in the closed division.
pub fn resolve_config(
    bench: &dyn referee_workloads::bench::Benchmark,
    file: Option<&Path>,
    sets: &[String],
    closed: bool,
) -> Result<Value, SessionError> {
    let default = bench.default_config();
    let mut cfg = default.clone();
    let obj = cfg.as_object_mut().expect("configs are objects");
    let mut overrides: Vec<(String, Value, String)> = Vec::new();
    if let Some(f) = file {
        for (k, v) in read_config_file(f)? {
            overrides.push((k, v, format!("--config {}", f.display())));
        }
    }
    for s in sets {
        let Some((k, v)) = s.split_once('=') else {
            return Err(SessionError::SetSyntax { given: s.clone() });
        };
        overrides.push((
            k.trim().to_string(),
            parse_scalar(v.trim()),
            format!("--set {s}"),
        ));
    }
    for (k, v, origin) in overrides {
        if !obj.contains_key(&k) {
            let mut keys: Vec<&String> = default.as_object().expect("object").keys().collect();
            keys.sort();
            return Err(SessionError::UnknownHyperparameter {
                origin,
                key: k,
                benchmark: bench.spec().name,
                known: keys.into_iter().cloned().collect(),
            });
        }
        if closed && bench.spec().fixed_fields.contains(&k.as_str()) && default.get(&k) != Some(&v)
        {
            return Err(SessionError::Fixed {
                origin,
                reference: Box::new(default[&k].clone()),
                key: k,
                given: Box::new(v),
            });
        }
        obj.insert(k, v);
    }
    bench
        .validate(&cfg)
        .map_err(|source| SessionError::InvalidConfig {
            benchmark: bench.spec().name,
            source,
        })?;
    Ok(cfg)
}

fn parse_window(w: &str) -> Result<(u64, u64), SessionError> {
    let bad = |problem| SessionError::Window {
        given: w.to_string(),
        problem,
    };
    let (a, b) = w.split_once("..").ok_or_else(|| bad("expected A..B"))?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|_| bad("A is not a step number"))?;
    let b: u64 = b
        .trim()
        .parse()
        .map_err(|_| bad("B is not a step number"))?;
    if a == 0 || b <= a {
        return Err(bad("need 1 <= A < B"));
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_resolution() {
        let b = crate::own_benchmarks::find("mini_resnet").unwrap();
        let c = resolve_config(
            b,
            None,
            &["batch_size=256".into(), "base_lr=0.2".into()],
            true,
        )
        .unwrap();
        assert_eq!(c["batch_size"], 256);
        assert_eq!(c["base_lr"], 0.2);
        let e = resolve_config(b, None, &["base_width=32".into()], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fixed in the closed division"), "{e}");
        assert!(resolve_config(b, None, &["base_width=32".into()], false).is_ok());
        let e = resolve_config(b, None, &["nonsense=1".into()], true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a hyperparameter") && e.contains("batch_size"),
            "{e}"
        );
        assert!(resolve_config(b, None, &["batch_size".into()], true).is_err());
        let e = resolve_config(b, None, &["batch_size=0".into()], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("batch_size"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(&f, "batch_size: 64\nwarmup_steps: 10\n").unwrap();
        let c = resolve_config(b, Some(&f), &["warmup_steps=5".into()], true).unwrap();
        assert_eq!(
            (c["batch_size"].as_u64(), c["warmup_steps"].as_u64()),
            (Some(64), Some(5))
        );
        std::fs::write(&f, "- not a map\n").unwrap();
        assert!(
            resolve_config(b, Some(&f), &[], true)
                .unwrap_err()
                .to_string()
                .contains("mapping")
        );
    }

    #[test]
    fn windows_and_stamps() {
        assert_eq!(parse_window("35..45").unwrap(), (35, 45));
        assert!(parse_window("0..3").is_err());
        assert!(parse_window("5..5").is_err());
        assert!(parse_window("x").is_err());
        let s = utc_stamp();
        assert_eq!(s.len(), 15);
        assert_eq!(&s[8..9], "-");
    }
}
