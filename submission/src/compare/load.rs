//! Finding and reading the two sides of a comparison.

use super::*;
use crate::perf::PerfRow;

struct Source {
    kind: SourceKind,
    dir: PathBuf,
    org_dir: Option<PathBuf>,
    benchmark: String,
    system: Option<String>,
    record: Option<serde_json::Value>,
    system_desc: Option<serde_json::Value>,
    files: Vec<PathBuf>,
}

/// A JSON file of a package (a record, a system description): a regular
/// file within the cap for configs, not a link (see
/// `referee_rules::untrusted`).
fn read_json(path: &Path) -> Option<serde_json::Value> {
    use referee_rules::untrusted::{self, FileKind, Links};
    let text = untrusted::read_to_string(path, FileKind::Config, Links::Refuse).ok()?;
    serde_json::from_str(&text).ok()
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The org folder above `ORG/results/SYSTEM/BENCHMARK`, if `dir` is one.
fn org_of_benchmark_dir(dir: &Path) -> Option<PathBuf> {
    let results = dir.parent()?.parent()?;
    let org = results.parent()?;
    (name_of(results) == "results" && layout::is_org(org)).then(|| org.to_path_buf())
}

fn walk(dir: &Path, usage: &str, depth: usize, out: &mut Vec<Source>) -> Result<(), CompareError> {
    let err = |e: std::io::Error| CompareError::Io {
        path: dir.to_path_buf(),
        source: e,
    };
    if layout::is_org(dir) {
        for bd in layout::benchmark_dirs(dir, usage).map_err(err)? {
            let files = layout::result_files(&bd.path).map_err(err)?;
            if files.is_empty() {
                continue;
            }
            out.push(Source {
                kind: SourceKind::Submission,
                system_desc: read_json(&dir.join("systems").join(format!("{}.json", bd.system))),
                dir: bd.path,
                org_dir: Some(dir.to_path_buf()),
                benchmark: bd.benchmark,
                system: Some(bd.system),
                record: None,
                files,
            });
        }
        return Ok(());
    }
    let files = layout::result_files(dir).map_err(err)?;
    if !files.is_empty() {
        let record = read_json(&dir.join("referee_run.json"));
        if let Some(rec) = record {
            out.push(Source {
                kind: SourceKind::RunOutput,
                dir: dir.to_path_buf(),
                org_dir: None,
                benchmark: rec["benchmark"].as_str().unwrap_or_default().to_string(),
                system: rec["system"].as_str().map(str::to_string),
                system_desc: read_json(&dir.join("system.json")),
                record: Some(rec),
                files,
            });
        } else if let Some(org) = org_of_benchmark_dir(dir) {
            let bd = layout::benchmark_dirs(&org, usage)
                .unwrap_or_default()
                .into_iter()
                .find(|b| b.path == dir);
            let system = name_of(dir.parent().unwrap_or(dir));
            out.push(Source {
                kind: SourceKind::ResultsDir,
                system_desc: read_json(&org.join("systems").join(format!("{system}.json"))),
                benchmark: bd.map(|b| b.benchmark).unwrap_or_else(|| name_of(dir)),
                system: Some(system),
                dir: dir.to_path_buf(),
                org_dir: Some(org),
                record: None,
                files,
            });
        } else {
            out.push(Source {
                kind: SourceKind::ResultsDir,
                dir: dir.to_path_buf(),
                org_dir: None,
                benchmark: String::new(),
                system: None,
                record: None,
                system_desc: None,
                files,
            });
        }
        return Ok(());
    }
    if depth >= 4 {
        return Ok(());
    }
    for sub in layout::sub_dirs(dir).map_err(err)? {
        walk(&sub, usage, depth + 1, out)?;
    }
    Ok(())
}

/// samples/s, tokens/s and MFU of one `throughput` event.
type Rates = (f64, Option<f64>, Option<f64>);

/// A throughput event: (samples_count, samples/s, tokens/s, mfu).
type Block = (f64, f64, Option<f64>, Option<f64>);

/// What referee reads from a log besides its score.
#[derive(Debug, Default, Clone)]
struct LogFacts {
    benchmark: Option<String>,
    platform: Option<String>,
    org: Option<String>,
    division: Option<String>,
    seed: Option<i64>,
    eval_key: Option<String>,
    evals_samples: Vec<(f64, f64)>,
    evals_epochs: Vec<(f64, f64)>,
    /// One per throughput event.
    blocks: Vec<Block>,
    /// The throughput-mode event (samples/s, tokens/s, mfu) and its window.
    window: Option<(Rates, (u64, u64))>,
    fingerprints: BTreeMap<String, String>,
    code: Option<String>,
    /// Timing of the run for the decomposition of its time to train.
    timing: RunTiming,
    /// Hyperparameters logged before `run_start` (key → value text).
    hyper: BTreeMap<String, String>,
    /// `referee_provenance`'s environment (variables that tune libraries).
    env: BTreeMap<String, String>,
}

/// Keys logged before `run_start` that are no hyperparameters.
fn is_hyperparameter(key: &str) -> bool {
    !(key.starts_with("submission_")
        || matches!(
            key,
            "seed"
                | "cache_clear"
                | "init_start"
                | "init_stop"
                | "run_start"
                | "referee_provenance"
                | "weights_initialization"
                | "throughput"
                | "tracked_stats"
        )
        || key.starts_with("eval_")
        || key.starts_with("block_")
        || key.starts_with("epoch_"))
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn log_facts(path: &Path) -> LogFacts {
    let mut f = LogFacts::default();
    let Ok(log) = mllog::read_file(path) else {
        return f;
    };
    let mut started = false;
    let mut eval_open: Option<f64> = None;
    for r in &log.records {
        let text = |v: &Value| v.as_str().map(str::to_string);
        let t = r.timestamp;
        match r.key() {
            "run_start" => {
                started = true;
                f.timing.run_start_ms.get_or_insert(t);
            }
            "run_stop" => {
                f.timing.run_stop_ms = Some(t);
                f.timing.stop_samples = num(r.meta("samples_count")).or(f.timing.stop_samples);
            }
            "eval_start" if started => eval_open = Some(t),
            "eval_stop" if started => {
                if let Some(a) = eval_open.take() {
                    f.timing.eval_ms += (t - a).max(0.0);
                    f.timing.evals += 1;
                }
            }
            "block_stop" | "epoch_stop" if started => {
                if let Some(x) = num(r.meta("samples_count")) {
                    f.timing.stop_samples = Some(x);
                }
            }
            k if !started && is_hyperparameter(k) => {
                f.hyper.insert(
                    k.to_string(),
                    r.value()
                        .as_str()
                        .map_or_else(|| r.value().json_compact(), str::to_string),
                );
            }
            _ => {}
        }
        match r.key() {
            "submission_benchmark" => f.benchmark = text(r.value()),
            "submission_platform" => f.platform = text(r.value()),
            "submission_org" => f.org = text(r.value()),
            "submission_division" => f.division = text(r.value()),
            "seed" => f.seed = num(Some(r.value())).map(|s| s as i64),
            k @ ("eval_accuracy" | "eval_error") => {
                if f.eval_key.is_none() {
                    f.eval_key = Some(k.to_string());
                }
                if f.eval_key.as_deref() != Some(k) {
                    continue;
                }
                let Some(y) = num(Some(r.value())) else {
                    continue;
                };
                if let Some(x) = num(r.meta("samples_count")) {
                    f.evals_samples.push((x, y));
                }
                if let Some(x) = num(r.meta("epoch_num")) {
                    f.evals_epochs.push((x, y));
                }
            }
            "throughput" => {
                let v = r.value();
                let Some(sps) = num(v.get("samples_per_second")) else {
                    continue;
                };
                let tps = num(v.get("tokens_per_second"));
                let mfu = num(v.get("mfu"));
                if let (Some(a), Some(b)) = (
                    num(r.meta("window_start_step")),
                    num(r.meta("window_end_step")),
                ) {
                    f.window = Some(((sps, tps, mfu), (a as u64, b as u64)));
                    f.timing.window_step_seconds = num(v.get("step_seconds"));
                } else if let Some(sc) = num(r.meta("samples_count")) {
                    f.blocks.push((sc, sps, tps, mfu));
                }
            }
            "referee_provenance" => {
                let v = r.value();
                if let Some(d) = v.get("dataset_fingerprints").and_then(Value::as_dict) {
                    for (k, x) in d {
                        if let Some(s) = x.as_str() {
                            f.fingerprints.insert(k.clone(), s.to_string());
                        }
                    }
                }
                let version = v.get("referee_version").and_then(Value::as_str);
                let commit = v.get("git_commit").and_then(Value::as_str);
                if version.is_some() || commit.is_some() {
                    f.code = Some(code_label(version, commit));
                }
                if let Some(d) = v.get("environment").and_then(Value::as_dict) {
                    for (k, x) in d {
                        if let Some(s) = x.as_str() {
                            f.env.insert(k.clone(), s.to_string());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    f
}

fn code_label(version: Option<&str>, commit: Option<&str>) -> String {
    let commit: String = commit.unwrap_or("?").chars().take(12).collect();
    format!("referee {} @ {commit}", version.unwrap_or("?"))
}

/// Throughput of a run: the throughput-mode window, or the blocks weighted
/// by their samples (total samples / total seconds).
fn run_throughput(f: &LogFacts) -> (Option<f64>, Option<f64>, Option<f64>) {
    if let Some(((sps, tps, mfu), _)) = f.window {
        return (Some(sps), tps, mfu);
    }
    let (rate, counted) = crate::perf::weighted_block_rate(f.blocks.iter().map(|b| (b.0, b.1)));
    let Some(sps) = rate else {
        return (None, None, None);
    };
    let first = |per: fn(&Block) -> Option<f64>| {
        counted
            .iter()
            .find_map(|&i| per(&f.blocks[i]).map(|x| x / f.blocks[i].1))
    };
    let tokens_per_sample = first(|b| b.2);
    let mfu_per_sps = first(|b| b.3);
    (
        Some(sps),
        tokens_per_sample.map(|t| t * sps),
        mfu_per_sps.map(|m| m * sps),
    )
}

/// Read one side: find its results, score every group as `referee
/// summarize` does, and read evaluations and throughput from the logs. A
/// side without MLLOG results may be NeMo or Megatron logs (a file or a
/// folder of them): see [`load_framework_side`].
pub fn load_side(root: &Path, rules: &dyn RulesProvider) -> Result<Side, CompareError> {
    if !root.exists() {
        return Err(CompareError::NoSuchPath(root.to_path_buf()));
    }
    if root.is_file() {
        return load_framework_side(root)?
            .ok_or_else(|| CompareError::NoFrameworkLog(root.to_path_buf()));
    }
    let usage = rules.usage();
    let mut sources = Vec::new();
    walk(root, &usage, 0, &mut sources)?;
    if sources.is_empty() {
        return load_framework_side(root)?
            .ok_or_else(|| CompareError::NoResults(root.to_path_buf()));
    }
    // Every log, read in parallel: its facts, then its score analysis.
    let files: Vec<(usize, PathBuf)> = sources
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.files.iter().map(move |p| (i, p.clone())))
        .collect();
    let facts: Vec<LogFacts> = files.par_iter().map(|(_, p)| log_facts(p)).collect();
    name_benchmarks(&mut sources, &files, &facts);
    let mut contexts: BTreeMap<String, Arc<ScoreContext>> = BTreeMap::new();
    for s in &sources {
        if !contexts.contains_key(&s.benchmark) {
            let ctx = rules
                .context(root, &s.benchmark)
                .map_err(CompareError::Rules)?;
            contexts.insert(s.benchmark.clone(), ctx);
        }
    }
    let analyses: Vec<RunAnalysis> = files
        .par_iter()
        .map(|(i, p)| analyze_run(&contexts[&sources[*i].benchmark], p, false))
        .collect();
    let read = SideLogs {
        sources: &sources,
        files: &files,
        facts: &facts,
        analyses: &analyses,
    };
    let sets = group_runs(&read)
        .into_iter()
        .map(|(key, members)| {
            let ctx = contexts[&key.2].clone();
            build_set(key, &members, &ctx, &read)
        })
        .collect();
    Ok(Side {
        root: root.to_path_buf(),
        sets,
    })
}

/// Benchmark names of plain results directories come from their logs.
fn name_benchmarks(sources: &mut [Source], files: &[(usize, PathBuf)], facts: &[LogFacts]) {
    for (i, s) in sources.iter_mut().enumerate() {
        if s.benchmark.is_empty() {
            s.benchmark = files
                .iter()
                .zip(facts)
                .find(|((j, _), f)| *j == i && f.benchmark.is_some())
                .and_then(|(_, f)| f.benchmark.clone())
                .unwrap_or_else(|| name_of(&s.dir));
        }
    }
}

/// Everything read from one side's logs, index-aligned with `files`.
struct SideLogs<'a> {
    sources: &'a [Source],
    files: &'a [(usize, PathBuf)],
    facts: &'a [LogFacts],
    analyses: &'a [RunAnalysis],
}

/// (org, system, benchmark, mode).
type GroupKey = (String, String, String, Mode);

/// Group the logs by (org, system, benchmark, mode).
fn group_runs(r: &SideLogs) -> BTreeMap<GroupKey, Vec<usize>> {
    let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
    for (k, (i, _)) in r.files.iter().enumerate() {
        let s = &r.sources[*i];
        let f = &r.facts[k];
        let throughput_mode = s
            .record
            .as_ref()
            .is_some_and(|r| !r["throughput_mode"].is_null())
            || f.window.is_some();
        let mode = if throughput_mode {
            Mode::Throughput
        } else {
            Mode::TimeToTrain
        };
        let org = s
            .system_desc
            .as_ref()
            .and_then(|d| d["submitter"].as_str().map(str::to_string))
            .or_else(|| {
                s.record
                    .as_ref()
                    .and_then(|r| r["org"].as_str().map(str::to_string))
            })
            .or_else(|| f.org.clone())
            .unwrap_or_default();
        let system = s
            .system
            .clone()
            .or_else(|| f.platform.clone())
            .unwrap_or_else(|| "unknown".into());
        groups
            .entry((org, system, s.benchmark.clone(), mode))
            .or_default()
            .push(k);
    }
    groups
}

/// A group's run set: scored as `referee summarize` scores it, with the
/// facts of its run records and its runs.
fn build_set(key: GroupKey, members: &[usize], ctx: &ScoreContext, r: &SideLogs) -> RunSet {
    let (org, system, benchmark, mode) = key;
    let mut dirs: Vec<usize> = members.iter().map(|&k| r.files[k].0).collect();
    dirs.dedup();
    let first = &r.sources[dirs[0]];
    let division = first
        .system_desc
        .as_ref()
        .and_then(|d| d["division"].as_str().map(str::to_string))
        .or_else(|| {
            first
                .record
                .as_ref()
                .and_then(|r| r["division"].as_str().map(str::to_string))
        })
        .or_else(|| members.iter().find_map(|&k| r.facts[k].division.clone()))
        .unwrap_or_else(|| "closed".into());
    let runs_an: Vec<RunAnalysis> = members.iter().map(|&k| r.analyses[k].clone()).collect();
    let bd = BenchmarkDir {
        org: first.org_dir.clone().unwrap_or_else(|| first.dir.clone()),
        system: system.clone(),
        benchmark: benchmark.clone(),
        scaling: None,
        path: first.dir.clone(),
    };
    // A submission's set: its system description, read once above; a run
    // output's: the description three folders up, as a package's would be.
    let nodes = match (&first.org_dir, &first.system_desc) {
        (Some(_), Some(d)) => d
            .get("number_of_nodes")
            .and_then(referee_rules::sysdesc::int_field),
        (Some(_), None) => None,
        (None, _) => referee_rules::score::nodes_of_set(&bd),
    };
    let score = score_dir(ctx, &bd, &division, nodes, &runs_an, &org);
    let mut set = RunSet {
        dirs: dirs
            .iter()
            .map(|&i| r.sources[i].dir.display().to_string())
            .collect(),
        usage: ctx.usage.clone(),
        ruleset: ctx.ruleset.clone(),
        division,
        convergence_unit: if ctx
            .facts
            .benchmark(&ctx.usage, &benchmark)
            .is_none_or(|b| b.converges_in_samples)
        {
            "samples"
        } else {
            "epochs"
        },
        score_minutes: score.score_minutes,
        scaling_factor: score.scaling_factor,
        max_dropped: score.max_dropped,
        dropped: score.dropped,
        score: Some(score),
        ..RunSet::empty(org, system, benchmark.clone(), mode, first.kind)
    };
    for &i in &dirs {
        if let Some(rec) = &r.sources[i].record {
            add_record(&mut set, rec);
            super::facts::from_record(rec, &mut set.recorded);
        }
        if let Some(d) = &r.sources[i].system_desc {
            super::facts::from_system(d, &mut set.recorded);
        }
    }
    for &k in members {
        let f = &r.facts[k];
        super::facts::from_log(&f.hyper, f.seed, &f.env, &mut set.recorded);
    }
    let rules = format!("{} {}", set.usage, set.ruleset);
    super::facts::add(
        &mut set.recorded,
        super::facts::Category::Rules,
        "rules.ruleset",
        &rules,
    );
    add_runs(&mut set, members, &runs_an, r.facts);
    set
}

/// What a `referee_run.json` says about its runs.
fn add_record(set: &mut RunSet, r: &serde_json::Value) {
    if let Some(t) = r.get("target").filter(|t| !t.is_null()) {
        set.target = Some(t.clone());
    }
    if let Some(d) = r["dataset_fingerprints"].as_object() {
        for (k, v) in d {
            if let Some(v) = v.as_str() {
                set.dataset_fingerprints
                    .entry(k.clone())
                    .or_default()
                    .insert(v.to_string());
            }
        }
    }
    let code = &r["code"];
    if code.is_object() {
        set.code.insert(code_label(
            code["referee_version"].as_str(),
            code["git_commit"].as_str(),
        ));
    }
    if let Some(c) = r["config_sha256"].as_str() {
        set.config_sha256.insert(c.to_string());
    }
    if let Some(d) = r["step_delay_ms"].as_u64() {
        set.step_delay_ms.insert(d);
    }
    let tm = &r["throughput_mode"];
    if let (Some(steps), Some(a), Some(b)) = (
        tm["steps"].as_u64(),
        tm["window"][0].as_u64(),
        tm["window"][1].as_u64(),
    ) {
        set.throughput_windows.insert((steps, a, b));
    }
}

/// The runs of a set, from their logs' facts and score analyses.
fn add_runs(set: &mut RunSet, members: &[usize], analyses: &[RunAnalysis], facts: &[LogFacts]) {
    let all_samples = members
        .iter()
        .all(|&k| facts[k].evals_samples.len() >= facts[k].evals_epochs.len());
    set.eval_unit = if all_samples { "samples" } else { "epochs" };
    for (&k, a) in members.iter().zip(analyses) {
        let f = &facts[k];
        for (d, fp) in &f.fingerprints {
            set.dataset_fingerprints
                .entry(d.clone())
                .or_default()
                .insert(fp.clone());
        }
        if let Some(c) = &f.code {
            set.code.insert(c.clone());
        }
        if set.eval_key.is_none() {
            set.eval_key = f.eval_key.clone();
        }
        let (sps, tps, mfu) = run_throughput(f);
        let conv = a.convergence.as_ref().ok();
        let converged = conv.is_some_and(|c| c.converged);
        set.runs.push(RunRecord {
            path: a.path.display().to_string(),
            minutes: a.minutes.as_ref().ok().copied(),
            dropped: a.minutes.as_ref().err().map(ToString::to_string),
            converged,
            samples_to_target: conv.filter(|c| c.converged).map(|c| c.point),
            samples_per_second: sps,
            tokens_per_second: tps,
            mfu,
            energy_joules: a.minutes.as_ref().ok().and_then(|m| {
                referee_rules::score::run_energy_joules(&a.path, m * 60_000.0).and_then(Result::ok)
            }),
            seed: f.seed,
            step_seconds: None,
            status: None,
            evals: if all_samples {
                f.evals_samples.clone()
            } else {
                f.evals_epochs.clone()
            },
            iterations: Vec::new(),
            timing: f.timing.clone(),
            gpus: None,
            peak_tflops: None,
        });
    }
}

/// A side of NeMo or Megatron logs (a file, or a folder searched as
/// `referee perf` searches it, each folder's `referee-perf.yaml` applying):
/// runs grouped by model and system, in throughput mode, each run's step
/// time its window mean (the recipes' window rule), samples/s, tokens/s and
/// MFU where its fields allow. `Ok(None)` when there is no such log.
pub fn load_framework_side(root: &Path) -> Result<Option<Side>, CompareError> {
    let rows = crate::perf::framework_runs(&[root.to_path_buf()]).map_err(CompareError::Perf)?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut groups: BTreeMap<(String, String), Vec<&PerfRow>> = BTreeMap::new();
    for r in &rows {
        let model = r
            .fields
            .model
            .as_ref()
            .map_or_else(|| "unknown model".to_string(), |m| m.value.clone());
        let system = r
            .fields
            .system
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |s| s.value.clone());
        groups.entry((model, system)).or_default().push(r);
    }
    let sets = groups
        .into_iter()
        .map(|((model, system), runs)| framework_set(model, system, &runs))
        .collect();
    Ok(Some(Side {
        root: root.to_path_buf(),
        sets,
    }))
}

/// The configuration a framework run set is defined by: GPUs, GBS,
/// sequence length, parallelism, precision (what must agree for step
/// times to compare).
fn perf_config(r: &PerfRow) -> String {
    let f = &r.fields;
    let n = |name: &str| f.value(name).map_or_else(|| "?".into(), |v| v.to_string());
    format!(
        "{} GPUs, GBS {}, seq {}, {}, {}",
        n("gpus"),
        n("gbs"),
        n("seq_len"),
        if f.parallelism().is_empty() {
            "parallelism ?".to_string()
        } else {
            f.parallelism()
        },
        f.precision
            .as_ref()
            .map_or("precision ?", |p| p.value.as_str())
    )
}

/// What a framework run states about its configuration.
fn framework_facts(r: &PerfRow, rec: &mut super::facts::Recorded) {
    use super::facts::{Category, add};
    let f = &r.fields;
    for (name, label) in crate::perf::fields::COUNTS {
        if let Some(v) = f.value(name) {
            add(
                rec,
                Category::Hyperparameters,
                format!("config.{label}"),
                &v.to_string(),
            );
        }
    }
    if let Some(p) = &f.precision {
        add(
            rec,
            Category::Hyperparameters,
            "config.precision",
            p.value.as_str(),
        );
    }
    if let Some(g) = &f.gpu {
        add(rec, Category::Hardware, "config.gpu", &g.value);
    }
    add(rec, Category::Software, "log format", r.format.as_str());
}

fn framework_set(model: String, system: String, runs: &[&PerfRow]) -> RunSet {
    let configs: BTreeSet<String> = runs.iter().map(|r| perf_config(r)).collect();
    let formats: BTreeSet<&str> = runs.iter().map(|r| r.format.as_str()).collect();
    let mut recorded = super::facts::Recorded::new();
    for r in runs {
        framework_facts(r, &mut recorded);
    }
    RunSet {
        recorded,
        dirs: runs
            .iter()
            .map(|r| {
                Path::new(&r.file)
                    .parent()
                    .map_or_else(String::new, |p| p.display().to_string())
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        usage: "framework log".into(),
        ruleset: formats.into_iter().collect::<Vec<_>>().join("+"),
        dropped: runs.iter().filter(|r| !r.complete()).count(),
        runs: runs.iter().map(|r| framework_run(r)).collect(),
        perf_config: Some(configs.into_iter().collect::<Vec<_>>().join("; ")),
        ..RunSet::empty(
            String::new(),
            system,
            model,
            Mode::Throughput,
            SourceKind::FrameworkLog,
        )
    }
}

/// A framework run; one whose status is not complete keeps its figures out
/// of the statistics (its status says why).
fn framework_run(r: &PerfRow) -> RunRecord {
    let ok = r.complete();
    let keep = |x: Option<f64>| x.filter(|_| ok);
    RunRecord {
        path: r.file.clone(),
        minutes: None,
        dropped: (!ok).then(|| format!("{}: {}", r.status.kind.as_str(), r.status.detail)),
        converged: false,
        samples_to_target: None,
        samples_per_second: keep(r.samples_per_second),
        tokens_per_second: keep(r.tokens_per_second),
        mfu: keep(r.mfu.as_ref().map(|m| m.value)),
        energy_joules: None,
        seed: None,
        step_seconds: keep(r.step_time_s.map(|s| s.mean)),
        status: Some(r.status.kind.as_str()),
        evals: Vec::new(),
        iterations: r.iterations.clone(),
        timing: super::RunTiming::default(),
        gpus: keep(r.fields.gpus.as_ref().map(|g| g.value as f64)),
        peak_tflops: keep(r.peak_tflops),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_of_blocks_is_weighted_by_samples() {
        let f = LogFacts {
            blocks: vec![
                (100.0, 10.0, Some(1280.0), None),
                (300.0, 20.0, Some(2560.0), None),
            ],
            ..Default::default()
        };
        // 300 samples in 100/10 + 200/20 = 20 s.
        let (sps, tps, mfu) = run_throughput(&f);
        assert_eq!(sps, Some(15.0));
        assert_eq!(tps, Some(15.0 * 128.0));
        assert_eq!(mfu, None);
    }
}
