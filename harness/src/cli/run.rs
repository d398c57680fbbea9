//! `referee run BENCHMARK`: train to the quality target N times under the
//! harness's rules, one log per run, then check the logs.
//!
//! Flags are resolved here, once, into a [`RunConfig`] (benchmark,
//! validated hyperparameters, seeds, directories, device) before anything
//! runs; every later step reads only the resolved form.

use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::clock::{Clock, SystemClock};
use crate::collective::Collective;
use crate::launch::Placement;
use crate::provenance::{CodeIdentity, filtered_env, json_sha256};
use crate::registry;
use crate::run::{Observer, RunPlan, RunResult, ThroughputPlan, run_once};
use crate::sysinfo::{HostFacts, SystemIdentity, system_description};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use referee_rules::checker::RulesetChoice;
use referee_rules::score::olympic_mean;
use referee_workloads::bench::Direction;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DivisionArg {
    Closed,
    Open,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Train to the quality target (MLPerf timing rules).
    TimeToTrain,
    /// A fixed number of steps; step time and throughput over a window.
    Throughput,
}

/// Raw flags of `referee run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The benchmark (mini_resnet, mini_llm).
    pub benchmark: String,
    /// Number of runs (default: the benchmark's N).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Hyperparameters from a YAML or JSON file (keys of the benchmark's config).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override one hyperparameter (repeatable), e.g. --set batch_size=256.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Output directory (default: out/BENCHMARK-TIMESTAMP).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base seed; run i uses a seed derived from it (default: from the OS).
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long, value_enum, default_value_t = DivisionArg::Closed)]
    pub division: DivisionArg,
    /// cpu or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Where prepared datasets are (default: $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Submitting organisation logged as submission_org.
    #[arg(long, default_value = "referee")]
    pub org: String,
    /// System name (submission_platform; the system description's id).
    #[arg(long)]
    pub system: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Compute threads (default: all cores).
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Do not try to drop the page cache.
    #[arg(long)]
    pub no_cache_clear: bool,
    /// Follow the whole schedule instead of stopping at the target
    /// (calibration; such logs end aborted and are not results).
    #[arg(long)]
    pub keep_going: bool,
    /// Stop a run (aborted) after this many minutes.
    #[arg(long)]
    pub budget_minutes: Option<f64>,
    #[arg(long, value_enum, default_value_t = ModeArg::TimeToTrain)]
    pub mode: ModeArg,
    /// Throughput mode: steps to run.
    #[arg(long)]
    pub steps: Option<u64>,
    /// Throughput mode: steps averaged, A..B (1-based, B excluded).
    #[arg(long, value_name = "A..B")]
    pub window: Option<String>,
    /// Print the run summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Add this many milliseconds to every training step (for testing
    /// regression gates such as `referee compare`; recorded in the run record).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub step_delay_ms: u64,
}

/// The resolved, validated form of `RunArgs`.
pub struct RunConfig {
    pub plan: RunPlan,
    pub seeds: Vec<u64>,
    pub quiet: bool,
    pub json: bool,
    pub placement: Placement,
    /// The GPU of this rank (None on CPU).
    pub gpu: Option<crate::gpu::GpuInfo>,
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
pub fn read_config_file(path: &Path) -> Result<serde_json::Map<String, Value>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).map_err(|e| {
        format!(
            "--config {}:{}: invalid YAML/JSON: {}",
            path.display(),
            e.marker().line(),
            e.info()
        )
    })?;
    match docs.first().map(yaml_to_json) {
        Some(Value::Object(m)) => Ok(m),
        None => Ok(serde_json::Map::new()),
        Some(_) => Err(format!(
            "--config {}: expected a mapping of hyperparameter names to values",
            path.display()
        )),
    }
}

/// Merge overrides into the default configuration and validate it,
/// enforcing fixed hyperparameters in the closed division.
pub fn resolve_config(
    bench: &dyn referee_workloads::bench::Benchmark,
    file: Option<&Path>,
    sets: &[String],
    closed: bool,
) -> Result<Value, String> {
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
            return Err(format!("--set {s}: expected KEY=VALUE"));
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
            return Err(format!(
                "{origin}: `{k}` is not a hyperparameter of {}; known: {}",
                bench.spec().name,
                keys.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if closed && bench.spec().fixed_fields.contains(&k.as_str()) && default.get(&k) != Some(&v)
        {
            return Err(format!(
                "{origin}: `{k}` is fixed in the closed division (reference {}, given {v}); use --division open to change it",
                default[&k]
            ));
        }
        obj.insert(k, v);
    }
    bench
        .validate(&cfg)
        .map_err(|e| format!("invalid configuration of {}: {e}", bench.spec().name))?;
    Ok(cfg)
}

fn os_seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    u64::from_le_bytes(b) ^ t
}

/// Distinct seeds for N runs: derived from a base seed (splitmix64), kept
/// below 2^31 so every tool reads them as plain integers.
pub fn derive_seeds(base: u64, n: usize) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(n);
    let mut x = base;
    while out.len() < n {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let s = z % (1 << 31);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() { "local".into() } else { t }
}

fn parse_window(w: &str) -> Result<(u64, u64), String> {
    let (a, b) = w
        .split_once("..")
        .ok_or_else(|| format!("--window {w}: expected A..B"))?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|_| format!("--window {w}: A is not a step number"))?;
    let b: u64 = b
        .trim()
        .parse()
        .map_err(|_| format!("--window {w}: B is not a step number"))?;
    if a == 0 || b <= a {
        return Err(format!("--window {w}: need 1 <= A < B"));
    }
    Ok((a, b))
}

/// Resolve flags into a run configuration (no work is done yet).
pub fn resolve(a: &RunArgs, placement: Placement) -> Result<RunConfig, String> {
    let bench = registry::find_or_err(&a.benchmark)?;
    let spec = bench.spec();
    let closed = a.division == DivisionArg::Closed;
    let division = if closed { "closed" } else { "open" };
    let config = resolve_config(bench, a.config.as_deref(), &a.sets, closed)?;
    let runs = a.runs.unwrap_or(spec.runs);
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let throughput = match a.mode {
        ModeArg::TimeToTrain => {
            if a.steps.is_some() || a.window.is_some() {
                return Err("--steps and --window belong to --mode throughput".into());
            }
            None
        }
        ModeArg::Throughput => {
            let steps = a.steps.ok_or("--mode throughput needs --steps S")?;
            let window = match &a.window {
                Some(w) => parse_window(w)?,
                None => ((steps / 2).max(1), steps + 1),
            };
            if window.1 > steps + 1 {
                return Err(format!("--window ends after step {steps}"));
            }
            Some(ThroughputPlan { steps, window })
        }
    };
    let at = |e: String| format!("--device {}: {e}", a.device);
    let ordinal = referee_workloads::parse_device(&a.device, placement.local_rank).map_err(at)?;
    let device =
        referee_workloads::open_device(ordinal, a.device.trim()).map_err(|e| at(e.to_string()))?;
    let gpu = ordinal.map(crate::gpu::probe).transpose().map_err(at)?;
    let engine = referee_workloads::Engine::for_device(&device).map_err(|e| e.to_string())?;
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(referee_datasets::default_data_dir);
    let fingerprints = dataset_fingerprints(bench, &data_dir)?;
    let out_dir = match &a.out {
        Some(o) => o.clone(),
        None => {
            let now = chrono_like_stamp();
            PathBuf::from("out").join(format!("{}-{now}", spec.name))
        }
    };
    if out_dir.is_dir() {
        let existing: Vec<_> = referee_rules::tree::result_files(&out_dir).unwrap_or_default();
        if !existing.is_empty() {
            return Err(format!(
                "{} already holds {} result file(s); choose another --out (a log is never overwritten)",
                out_dir.display(),
                existing.len()
            ));
        }
    }
    let seeds = derive_seeds(a.seed.unwrap_or_else(os_seed), runs);
    let host = HostFacts::probe();
    let system = a
        .system
        .clone()
        .unwrap_or_else(|| sanitize(&format!("{}_{}cpu", host.hostname, host.logical_cpus)));
    let budget_minutes = a.budget_minutes.unwrap_or(spec.budget_minutes);
    if budget_minutes <= 0.0 {
        return Err("--budget-minutes must be positive".into());
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
    Ok(RunConfig {
        plan,
        seeds,
        quiet: a.quiet || !std::io::stderr().is_terminal(),
        json: a.json,
        placement,
        gpu,
    })
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
        init_budget_ms: referee_rules::meta::init_budget_minutes(division) * 60_000,
        cache_clear: true,
        dataset_fingerprints,
        code: CodeIdentity::current(),
        env: filtered_env(std::env::vars()),
        peak_flops: None,
        throughput: None,
        step_delay_ms: 0,
    }
}

/// Fingerprints of the prepared datasets a benchmark needs; the error says
/// how to prepare them.
pub fn dataset_fingerprints(
    bench: &dyn referee_workloads::bench::Benchmark,
    data_dir: &Path,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for ds in bench.spec().datasets {
        let m = referee_datasets::open_manifest(ds, data_dir).map_err(|e| e.to_string())?;
        out.insert(ds.to_string(), m.fingerprint);
    }
    Ok(out)
}

/// `YYYYMMDD-HHMMSS` (UTC) without a date crate.
pub fn chrono_like_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

struct Bar {
    pb: ProgressBar,
    target: String,
    last: std::sync::Mutex<Option<f64>>,
}

impl Observer for Bar {
    fn phase(&self, what: &str) {
        self.pb.set_message(what.to_string());
    }
    fn step(&self, samples: u64, max: u64, loss: f32, sps: f64) {
        if self.pb.length() != Some(max) {
            self.pb.set_length(max);
        }
        self.pb.set_position(samples);
        let last = self
            .last
            .lock()
            .expect("lock")
            .map(|m| format!("{m:.4}"))
            .unwrap_or_else(|| "-".into());
        self.pb.set_message(format!(
            "loss {loss:.3} · eval {last} (target {}) · {sps:.0} samples/s",
            self.target
        ));
    }
    fn eval(&self, _samples: u64, metric: f64) {
        *self.last.lock().expect("lock") = Some(metric);
    }
}

/// Run the resolved plan: N runs, then the run record and the check.
pub fn execute(cfg: &RunConfig, coll: &mut dyn Collective) -> Result<Vec<RunResult>, String> {
    let plan = &cfg.plan;
    let spec = plan.bench.spec();
    let leader = coll.rank() == 0;
    if leader {
        std::fs::create_dir_all(&plan.out_dir)
            .map_err(|e| format!("{}: {e}", plan.out_dir.display()))?;
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::default());
    let target = match spec.metric.direction {
        Direction::HigherIsBetter => format!("≥ {}", spec.metric.target),
        Direction::LowerIsBetter => format!("≤ {}", spec.metric.target),
    };
    let mut results = Vec::new();
    for (i, seed) in cfg.seeds.iter().enumerate() {
        let pb = if cfg.quiet || !leader {
            ProgressBar::hidden()
        } else {
            let pb = ProgressBar::new(plan.bench.max_samples(&plan.config));
            pb.set_style(
                ProgressStyle::with_template(&format!(
                    "run {}/{} {} {{bar:25}} {{pos}}/{{len}} samples · {{msg}} · {{elapsed}} (ETA {{eta}})",
                    i + 1,
                    cfg.seeds.len(),
                    spec.name
                ))
                .expect("template"),
            );
            pb
        };
        let bar = Bar {
            pb,
            target: target.clone(),
            last: std::sync::Mutex::new(None),
        };
        let r = run_once(plan, i, *seed, clock.clone(), coll, &bar)?;
        bar.pb.finish_and_clear();
        if leader {
            let best = r
                .evals
                .last()
                .map(|e| format!("{:.4}", e.1))
                .unwrap_or_else(|| "-".into());
            eprintln!(
                "run {}/{}: {} after {} samples in {:.2} min (seed {}, last eval {best}, target {target}, {:.0} samples/s{})",
                i + 1,
                cfg.seeds.len(),
                r.status,
                r.samples,
                r.time_to_train_minutes,
                r.seed,
                r.throughput.samples_per_second,
                r.throughput
                    .tokens_per_second
                    .map(|t| format!(", {t:.0} tokens/s"))
                    .unwrap_or_default()
            );
        }
        results.push(r);
    }
    if leader {
        write_records(cfg, &results)?;
    }
    Ok(results)
}

/// `system.json` and `referee_run.json` next to the logs.
fn write_records(cfg: &RunConfig, results: &[RunResult]) -> Result<(), String> {
    let plan = &cfg.plan;
    let host = HostFacts::probe();
    let framework = match plan.engine {
        referee_workloads::Engine::Cpu(isa) => format!(
            "referee {} (CPU engine, {} kernels, Rust)",
            crate::provenance::VERSION,
            isa.name()
        ),
        referee_workloads::Engine::Graph => format!(
            "referee {} (candle {} graph, Rust)",
            crate::provenance::VERSION,
            "0.11"
        ),
    };
    // One GPU per rank: a node holds as many as it has ranks.
    let per_node = cfg
        .placement
        .world_size
        .div_ceil(cfg.placement.nodes.max(1));
    let accel = cfg.gpu.as_ref().map(|g| g.accelerator(per_node));
    let id = SystemIdentity {
        submitter: &plan.org,
        division: &plan.division,
        status: "Research, Development, or Internal (RDI)",
        system_name: &plan.platform,
        framework: &framework,
        nodes: cfg.placement.nodes.max(1),
    };
    let sys = system_description(&id, &host, accel.as_ref());
    let write = |name: &str, v: &Value| -> Result<(), String> {
        let p = plan.out_dir.join(name);
        crate::fsutil::write_atomic(
            &p,
            serde_json::to_string_pretty(v)
                .expect("serialisable")
                .as_bytes(),
        )
        .map_err(|e| format!("{}: {e}", p.display()))
    };
    write("system.json", &sys)?;
    let record = serde_json::json!({
        "benchmark": plan.bench.spec().name,
        "ruleset": referee_workloads::bench::RULESET,
        "division": plan.division,
        "org": plan.org,
        "system": plan.platform,
        "config": plan.config,
        "config_sha256": plan.config_sha256,
        "code": plan.code,
        "dataset_fingerprints": plan.dataset_fingerprints,
        "device": plan.device_name,
        "engine": plan.engine.name(),
        "world_size": cfg.placement.world_size,
        "stop_at_target": plan.stop_at_target,
        "target": {
            "key": plan.bench.spec().metric.key,
            "metric": plan.bench.spec().metric.name,
            "value": plan.bench.spec().metric.target,
            "direction": match plan.bench.spec().metric.direction {
                Direction::HigherIsBetter => "higher",
                Direction::LowerIsBetter => "lower",
            },
        },
        "step_delay_ms": plan.step_delay_ms,
        "throughput_mode": plan.throughput.map(|t| serde_json::json!({"steps": t.steps, "window": [t.window.0, t.window.1]})),
        "seeds": cfg.seeds,
        "command": std::env::args().collect::<Vec<_>>(),
        "runs": results,
    });
    write("referee_run.json", &record)
}

pub fn run(a: RunArgs) -> i32 {
    let placement = match Placement::from_env(|k| std::env::var(k).ok()) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    // Thread settings must be in place before any compute thread starts.
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // SAFETY: called before any other thread of this process exists.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
    let cfg = match resolve(&a, placement) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let mut coll: Box<dyn Collective> =
        match crate::collective::for_device(&placement, cfg.gpu.as_ref().map(|g| g.ordinal)) {
            Ok(c) => c,
            Err(e) => return usage_error(e),
        };
    let results = match execute(&cfg, coll.as_mut()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("referee: error: {e}");
            return EXIT_USAGE;
        }
    };
    if coll.rank() != 0 {
        return EXIT_OK;
    }
    summarize_runs(&cfg, &results)
}

/// Check every log with the benchmark's rule file, print the olympic score,
/// and decide the exit code.
fn summarize_runs(cfg: &RunConfig, results: &[RunResult]) -> i32 {
    let checker = registry::own_checker();
    let mut all_ok = true;
    let mut verdicts = Vec::new();
    for r in results {
        let Some(p) = &r.log else { continue };
        match checker.check_file(p, &RulesetChoice::Auto) {
            Ok(rep) => {
                let ok = rep.verdict == referee_rules::Verdict::Pass;
                all_ok &= ok && r.status == "success";
                if !ok && !cfg.json {
                    let mut out = std::io::stderr().lock();
                    let _ = referee_rules::report::Sink::log(
                        &mut referee_rules::report::HumanSink::new(&mut out, true),
                        &rep,
                    );
                }
                verdicts.push((p.display().to_string(), rep.verdict.as_str()));
            }
            Err(e) => {
                all_ok = false;
                verdicts.push((p.display().to_string(), "ERROR"));
                eprintln!("referee: error: {e}");
            }
        }
    }
    let times: Vec<f64> = results
        .iter()
        .filter(|r| r.status == "success")
        .map(|r| r.time_to_train_minutes)
        .collect();
    let dropped = results.len() - times.len();
    let score = (results.len() >= 3 && dropped <= 1)
        .then(|| olympic_mean(&times, dropped, 1))
        .flatten();
    if cfg.json {
        let v = serde_json::json!({
            "out": cfg.plan.out_dir.display().to_string(),
            "benchmark": cfg.plan.bench.spec().name,
            "runs": results,
            "checks": verdicts.iter().map(|(p, v)| serde_json::json!({"path": p, "verdict": v})).collect::<Vec<_>>(),
            "score_minutes": score,
        });
        println!("{v}");
    } else {
        for (p, v) in &verdicts {
            println!("{v} {p}");
        }
        match score {
            Some(s) => println!(
                "{}: olympic mean time to train {s:.3} min over {} runs ({} dropped); logs in {}",
                cfg.plan.bench.spec().name,
                results.len(),
                dropped,
                cfg.plan.out_dir.display()
            ),
            None => println!(
                "{}: {} of {} runs reached the target; logs in {}",
                cfg.plan.bench.spec().name,
                times.len(),
                results.len(),
                cfg.plan.out_dir.display()
            ),
        }
    }
    if all_ok { EXIT_OK } else { EXIT_FAIL }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_distinct_and_reproducible() {
        let a = derive_seeds(42, 10);
        assert_eq!(a, derive_seeds(42, 10));
        let mut b = a.clone();
        b.sort();
        b.dedup();
        assert_eq!(b.len(), 10);
        assert!(a.iter().all(|s| *s < (1 << 31)));
        assert_ne!(a, derive_seeds(43, 10));
    }

    #[test]
    fn config_resolution() {
        let b = registry::find("mini_resnet").unwrap();
        let c = resolve_config(
            b,
            None,
            &["batch_size=256".into(), "base_lr=0.2".into()],
            true,
        )
        .unwrap();
        assert_eq!(c["batch_size"], 256);
        assert_eq!(c["base_lr"], 0.2);
        let e = resolve_config(b, None, &["base_width=32".into()], true).unwrap_err();
        assert!(e.contains("fixed in the closed division"), "{e}");
        assert!(resolve_config(b, None, &["base_width=32".into()], false).is_ok());
        let e = resolve_config(b, None, &["nonsense=1".into()], true).unwrap_err();
        assert!(
            e.contains("not a hyperparameter") && e.contains("batch_size"),
            "{e}"
        );
        assert!(resolve_config(b, None, &["batch_size".into()], true).is_err());
        let e = resolve_config(b, None, &["batch_size=0".into()], true).unwrap_err();
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
                .contains("mapping")
        );
    }

    #[test]
    fn windows_and_stamps() {
        assert_eq!(parse_window("35..45").unwrap(), (35, 45));
        assert!(parse_window("0..3").is_err());
        assert!(parse_window("5..5").is_err());
        assert!(parse_window("x").is_err());
        let s = chrono_like_stamp();
        assert_eq!(s.len(), 15);
        assert_eq!(&s[8..9], "-");
    }
}
