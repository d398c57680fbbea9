//! Assembling a submission folder in the MLCommons layout from result logs:
//!
//! ```text
//! OUT/ORG/systems/SYSTEM.json
//! OUT/ORG/results/SYSTEM/BENCHMARK/result_0.txt … result_{N-1}.txt
//! OUT/ORG/benchmarks/BENCHMARK/implementations/IMPL/README.md
//! OUT/ORG/benchmarks/BENCHMARK/implementations/IMPL/config.json
//! OUT/ORG/benchmarks/BENCHMARK/implementations/IMPL/referee_run_K.json
//! ```
//!
//! The logs come from three kinds of directory ([`Origin`]): an output of
//! `referee run` (referee's own benchmarks), of `referee run --exec` (any
//! training program, supervised), or any folder of result logs (a
//! PyTorch, NeMo or JAX submitter's own). Logs are copied byte for byte.
//! The folder is built under a temporary name next to its destination and
//! renamed into place at the end, so an interrupted packaging leaves no
//! half-written `OUT/ORG`.

use crate::fs::{FsError, copy_tree};
use referee_rules::mllog;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a directory of result logs came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `referee run` of one of referee's benchmarks.
    Own,
    /// `referee run --exec`: a training program referee supervised.
    Exec,
    /// Result logs from elsewhere (no referee run record).
    Logs,
}

/// A directory of result logs.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
    pub origin: Origin,
    /// `referee_run.json`; for plain logs, one made from the logs
    /// (`benchmark`, `division`, `config`: their hyperparameters).
    pub record: Value,
    /// `result_*.txt`, sorted by number.
    pub logs: Vec<PathBuf>,
    /// `system.json`, when the directory has one.
    pub system: Option<Value>,
}

/// Why run directories cannot be packaged.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("{}:{line}: invalid JSON: {source}", .path.display())]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error(
        "{}: unfinished logs {} (a run was interrupted); only finished runs can be packaged",
        .dir.display(),
        .names.join(", ")
    )]
    Unfinished { dir: PathBuf, names: Vec<String> },
    #[error("{}: no result_*.txt logs", .dir.display())]
    NoLogs { dir: PathBuf },
    /// Two logs of a directory name different `submission_{key}` values.
    #[error(
        "{}: submission_{key} is {found:?}, {} says {expected:?}; one directory holds the runs of one benchmark",
        .log.display(),
        .first.display()
    )]
    LogsDisagree {
        log: PathBuf,
        key: &'static str,
        found: String,
        first: PathBuf,
        expected: String,
    },
    /// A log's hyperparameters differ from the first log's
    /// (`differences`: `KEY: found vs expected`).
    #[error(
        "{}: its configuration differs from {} ({}); one implementation per benchmark has one configuration",
        .log.display(),
        .first.display(),
        .differences.join("; ")
    )]
    LogConfigDiffers {
        log: PathBuf,
        first: PathBuf,
        differences: Vec<String>,
    },
    #[error(
        "{flag} {value:?}: use letters, digits, '-', '_' and '.' (the name becomes a folder; no spaces, no leading dot)"
    )]
    UnsafeName { flag: &'static str, value: String },
    #[error("no run directories given")]
    NoRuns,
    #[error("--code {}: not a directory", .path.display())]
    CodeNotADirectory { path: PathBuf },
    #[error(
        "{} was run in the {found} division, {} in the {expected} division; a package has one division",
        .dir.display(),
        .first.display()
    )]
    DivisionMismatch {
        dir: PathBuf,
        found: String,
        first: PathBuf,
        expected: String,
    },
    #[error("{benchmark}: not a benchmark of this ruleset")]
    UnknownBenchmark { benchmark: String },
    #[error(
        "{benchmark}: {found} result logs in {}; the benchmark requires exactly {required} (select runs before packaging, never after seeing their results)",
        .dirs.join(", ")
    )]
    RunCount {
        benchmark: String,
        found: usize,
        required: usize,
        dirs: Vec<String>,
    },
    #[error(
        "{} used a different configuration than {}; one implementation per benchmark has one configuration",
        .dir.display(),
        .first.display()
    )]
    ConfigDiffers { dir: PathBuf, first: PathBuf },
    #[error("no system description: give --system-json FILE (e.g. from `referee system`)")]
    NoSystem,
    #[error("{} already exists; packaging never overwrites", .path.display())]
    Exists { path: PathBuf },
    #[error("{file:?}: not a path inside {}", .root.display())]
    NotInside { file: String, root: PathBuf },
}

fn read_json(p: &Path) -> Result<Value, PackageError> {
    let text = std::fs::read_to_string(p).map_err(|e| FsError::io(p, e))?;
    serde_json::from_str(&text).map_err(|e| PackageError::Json {
        path: p.to_path_buf(),
        line: e.line(),
        source: e,
    })
}

/// `result_N.txt` → N.
fn result_number(p: &Path) -> Option<u64> {
    let n = p.file_name()?.to_str()?;
    n.strip_prefix("result_")?
        .strip_suffix(".txt")?
        .parse()
        .ok()
}

/// Keys whose values differ between faithful runs of one configuration.
fn varies_per_run(key: &str) -> bool {
    key == "seed"
        || key == "cache_clear"
        || key.starts_with("submission_")
        || key.ends_with("_start")
        || key.ends_with("_stop")
}

/// What a log says about itself before its clock starts: the
/// `submission_*` values and the hyperparameters (every other key logged
/// before `run_start`, first value), read with referee's MLLOG reader.
#[derive(Debug, Clone, Default)]
pub struct LogFacts {
    pub submission: BTreeMap<String, String>,
    pub hyperparameters: BTreeMap<String, Value>,
}

impl LogFacts {
    /// The facts of the log at `log`, read up to its `run_start` only: a
    /// run's million lines of losses after it are never parsed nor held.
    pub fn read(log: &Path) -> Result<LogFacts, FsError> {
        let input = mllog::open_log(log, referee_rules::untrusted::Links::Refuse)
            .map_err(|e| FsError::io(log, e))?;
        let buffer = input.buffer_size(referee_rules::checker::READ_BUFFER);
        let mut reader = mllog::Reader::new(std::io::BufReader::with_capacity(buffer, input));
        let mut f = LogFacts::default();
        for item in reader.by_ref() {
            let mllog::Item::Record(r) = item else {
                continue;
            };
            let k = r.key();
            if k == "run_start" {
                break;
            }
            if let Some(name) = k.strip_prefix("submission_") {
                let text = r.value().as_str().map(str::to_string).unwrap_or_default();
                f.submission.entry(name.to_string()).or_insert(text);
            } else if !varies_per_run(k) {
                f.hyperparameters
                    .entry(k.to_string())
                    .or_insert_with(|| Value::from(r.value()));
            }
        }
        match reader.take_io_error() {
            Some(e) => Err(FsError::io(log, e)),
            None => Ok(f),
        }
    }

    /// A `submission_NAME` value (`""` when not logged).
    pub fn get(&self, name: &str) -> &str {
        self.submission.get(name).map(String::as_str).unwrap_or("")
    }
}

impl RunDir {
    /// Open a directory of `result_*.txt` logs (a `referee run` output
    /// directory or any other). Refuses unfinished logs and, for plain
    /// logs, a directory whose logs disagree on their benchmark, division
    /// or hyperparameters.
    pub fn open(path: &Path) -> Result<Self, PackageError> {
        let entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| FsError::io(path, e))?
            .flatten()
            .map(|e| e.path())
            .collect();
        let partial: Vec<String> = entries
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .filter(|n| n.ends_with(".partial"))
            .collect();
        if !partial.is_empty() {
            return Err(PackageError::Unfinished {
                dir: path.to_path_buf(),
                names: partial,
            });
        }
        let mut logs: Vec<PathBuf> = entries
            .into_iter()
            .filter(|p| result_number(p).is_some())
            .collect();
        logs.sort_by_key(|p| result_number(p));
        if logs.is_empty() {
            return Err(PackageError::NoLogs {
                dir: path.to_path_buf(),
            });
        }
        let system_path = path.join("system.json");
        let system = if system_path.is_file() {
            Some(read_json(&system_path)?)
        } else {
            None
        };
        let record_path = path.join("referee_run.json");
        let (origin, record) = if record_path.is_file() {
            let record = read_json(&record_path)?;
            let origin = if record["mode"] == "exec" {
                Origin::Exec
            } else {
                Origin::Own
            };
            (origin, record)
        } else {
            (Origin::Logs, Self::record_from_logs(&logs)?)
        };
        Ok(RunDir {
            path: path.to_path_buf(),
            origin,
            record,
            logs,
            system,
        })
    }

    /// The record of plain logs: what they all say about themselves.
    fn record_from_logs(logs: &[PathBuf]) -> Result<Value, PackageError> {
        let first = LogFacts::read(&logs[0])?;
        for log in &logs[1..] {
            let f = LogFacts::read(log)?;
            for name in ["benchmark", "division"] {
                if f.get(name) != first.get(name) {
                    return Err(PackageError::LogsDisagree {
                        log: log.clone(),
                        key: name,
                        found: f.get(name).to_string(),
                        first: logs[0].clone(),
                        expected: first.get(name).to_string(),
                    });
                }
            }
            let differing: Vec<String> = first
                .hyperparameters
                .keys()
                .chain(f.hyperparameters.keys())
                .filter(|k| first.hyperparameters.get(*k) != f.hyperparameters.get(*k))
                .map(|k| {
                    format!(
                        "{k}: {} vs {}",
                        f.hyperparameters
                            .get(k)
                            .map(Value::to_string)
                            .unwrap_or("absent".into()),
                        first
                            .hyperparameters
                            .get(k)
                            .map(Value::to_string)
                            .unwrap_or("absent".into())
                    )
                })
                .collect();
            if !differing.is_empty() {
                return Err(PackageError::LogConfigDiffers {
                    log: log.clone(),
                    first: logs[0].clone(),
                    differences: differing,
                });
            }
        }
        Ok(serde_json::json!({
            "mode": "logs",
            "benchmark": first.get("benchmark"),
            "division": first.get("division"),
            "config": first.hyperparameters,
        }))
    }

    pub fn benchmark(&self) -> &str {
        self.record["benchmark"].as_str().unwrap_or("")
    }
    pub fn division(&self) -> &str {
        self.record["division"].as_str().unwrap_or("")
    }
    /// The ruleset a supervised run was checked with.
    pub fn ruleset(&self) -> Option<&str> {
        self.record["ruleset"].as_str()
    }
    /// What must be equal across the runs of one implementation: the
    /// resolved configuration, or the command of a supervised program.
    pub fn configuration(&self) -> Value {
        match self.origin {
            Origin::Exec => serde_json::json!({ "command": self.record["command"] }),
            Origin::Own | Origin::Logs => self.record["config"].clone(),
        }
    }
}

/// What to package.
#[derive(Debug, Clone)]
pub struct PackageSpec {
    pub org: String,
    pub system: String,
    /// Runs per benchmark the ruleset requires (benchmark → N).
    pub required_runs: BTreeMap<String, usize>,
    /// Implementation id (folder under implementations/).
    pub implementation: String,
    /// The system description (`--system-json`); default: the first run
    /// directory's `system.json`.
    pub system_json: Option<Value>,
    /// The training code to include under the implementation (`--code`,
    /// or the working directory of a supervised program).
    pub code: Option<PathBuf>,
    /// Only these files of `code` (relative paths: a git checkout's
    /// tracked files); `None`: the whole tree.
    pub code_files: Option<Vec<String>>,
    /// Where the code came from, in words (the README says it).
    pub code_source: String,
}

/// What `package` produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PackageSummary {
    pub path: PathBuf,
    /// benchmark → number of result logs.
    pub benchmarks: BTreeMap<String, usize>,
    /// Differences between the published organisation/system and what the
    /// logs say (accepted, reported).
    pub warnings: Vec<String>,
    /// Where the implementation's `code/` came from, or why there is none.
    pub code: String,
}

fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Where the logs' `submission_org` / `submission_platform` differ from
/// the organisation and system name the results are published under: one
/// warning per (key, logged value), naming the logs. The rules accept such
/// a folder (a published system name need not be the logged platform), so
/// this never refuses.
pub fn identity_warnings(
    logs: &[PathBuf],
    org: &str,
    system: &str,
) -> Result<Vec<String>, FsError> {
    let mut seen: BTreeMap<(&str, String), Vec<String>> = BTreeMap::new();
    for log in logs {
        let facts = LogFacts::read(log)?;
        for (name, want) in [("org", org), ("platform", system)] {
            let got = facts.get(name);
            if got != want {
                seen.entry((name, got.to_string()))
                    .or_default()
                    .push(log.display().to_string());
            }
        }
    }
    Ok(seen
        .into_iter()
        .map(|((name, got), logs)| {
            let (flag, want) = if name == "org" {
                ("--org", org)
            } else {
                ("--system", system)
            };
            format!(
                "the program logged submission_{name} = {got:?}, but the results are under {flag} {want:?} ({} log{}: {}{})",
                logs.len(),
                if logs.len() == 1 { "" } else { "s" },
                logs[0],
                if logs.len() > 1 { ", …" } else { "" }
            )
        })
        .collect())
}

/// Build the submission folder `out/ORG` from run directories.
pub fn package(
    runs: &[RunDir],
    spec: &PackageSpec,
    out: &Path,
) -> Result<PackageSummary, PackageError> {
    for (what, v) in [("--org", &spec.org), ("--system", &spec.system)] {
        if !is_safe_name(v) {
            return Err(PackageError::UnsafeName {
                flag: what,
                value: v.clone(),
            });
        }
    }
    if runs.is_empty() {
        return Err(PackageError::NoRuns);
    }
    if let Some(code) = &spec.code
        && !code.is_dir()
    {
        return Err(PackageError::CodeNotADirectory { path: code.clone() });
    }
    let division = runs[0].division().to_string();
    let mut warnings = Vec::new();
    let mut by_bench: BTreeMap<String, Vec<&RunDir>> = BTreeMap::new();
    for r in runs {
        if r.division() != division {
            return Err(PackageError::DivisionMismatch {
                dir: r.path.clone(),
                found: r.division().to_string(),
                first: runs[0].path.clone(),
                expected: division,
            });
        }
        warnings.extend(identity_warnings(&r.logs, &spec.org, &spec.system)?);
        by_bench
            .entry(r.benchmark().to_string())
            .or_default()
            .push(r);
    }
    let mut counts = BTreeMap::new();
    for (b, rs) in &by_bench {
        let n: usize = rs.iter().map(|r| r.logs.len()).sum();
        let Some(req) = spec.required_runs.get(b) else {
            return Err(PackageError::UnknownBenchmark {
                benchmark: b.clone(),
            });
        };
        if n != *req {
            return Err(PackageError::RunCount {
                benchmark: b.clone(),
                found: n,
                required: *req,
                dirs: rs.iter().map(|r| r.path.display().to_string()).collect(),
            });
        }
        let config = rs[0].configuration();
        if let Some(other) = rs.iter().find(|r| r.configuration() != config) {
            return Err(PackageError::ConfigDiffers {
                dir: other.path.clone(),
                first: rs[0].path.clone(),
            });
        }
        counts.insert(b.clone(), n);
    }
    let system = spec
        .system_json
        .clone()
        .or_else(|| runs.iter().find_map(|r| r.system.clone()))
        .ok_or(PackageError::NoSystem)?;
    let dest = out.join(&spec.org);
    if dest.exists() {
        return Err(PackageError::Exists { path: dest });
    }
    std::fs::create_dir_all(out).map_err(|e| FsError::io(out, e))?;
    let tmp = out.join(format!(".{}.partial-{}", spec.org, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = build(&by_bench, spec, system, &division, &tmp);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    sync_tree(&tmp);
    std::fs::rename(&tmp, &dest).map_err(|e| FsError::Copy {
        from: tmp.clone(),
        to: dest.clone(),
        source: e,
    })?;
    if let Ok(d) = std::fs::File::open(out) {
        let _ = d.sync_all();
    }
    Ok(PackageSummary {
        path: dest,
        benchmarks: counts,
        warnings,
        code: spec.code_source.clone(),
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|e| FsError::io(p, e))?;
    }
    let mut f = std::fs::File::create(path).map_err(|e| FsError::io(path, e))?;
    f.write_all(bytes).map_err(|e| FsError::io(path, e))
}

fn pretty(v: &Value) -> Vec<u8> {
    (serde_json::to_string_pretty(v).expect("serialisable") + "\n").into_bytes()
}

fn sync_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                sync_tree(&p);
            } else if let Ok(f) = std::fs::File::open(&p) {
                let _ = f.sync_all();
            }
        }
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Copy a code tree (not its `.git`, no symbolic links followed).
fn copy_code(from: &Path, to: &Path) -> Result<(), FsError> {
    copy_tree(from, to, &|name| name == ".git")
}

/// Copy `files` (relative to `from`) into `to`; a name that leaves the
/// tree is refused.
fn copy_files(from: &Path, files: &[String], to: &Path) -> Result<(), PackageError> {
    for f in files {
        let rel = Path::new(f);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(PackageError::NotInside {
                file: f.clone(),
                root: from.to_path_buf(),
            });
        }
        let (src, dst) = (from.join(rel), to.join(rel));
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| FsError::io(p, e))?;
        }
        std::fs::copy(&src, &dst).map_err(|e| FsError::Copy {
            from: src.clone(),
            to: dst.clone(),
            source: e,
        })?;
    }
    Ok(())
}

fn build(
    by_bench: &BTreeMap<String, Vec<&RunDir>>,
    spec: &PackageSpec,
    mut system: Value,
    division: &str,
    tmp: &Path,
) -> Result<(), PackageError> {
    if let Some(obj) = system.as_object_mut() {
        obj.insert("submitter".into(), Value::String(spec.org.clone()));
        obj.insert("system_name".into(), Value::String(spec.system.clone()));
        obj.insert("division".into(), Value::String(division.to_string()));
    }
    write(
        &tmp.join("systems").join(format!("{}.json", spec.system)),
        &pretty(&system),
    )?;
    for (bench, rs) in by_bench {
        let results = tmp.join("results").join(&spec.system).join(bench);
        std::fs::create_dir_all(&results).map_err(|e| FsError::io(&results, e))?;
        let mut i = 0;
        for r in rs {
            for log in &r.logs {
                let dst = results.join(format!("result_{i}.txt"));
                std::fs::copy(log, &dst).map_err(|e| FsError::Copy {
                    from: log.clone(),
                    to: dst.clone(),
                    source: e,
                })?;
                copy_power(log, &results.join("power").join(format!("result_{i}")))?;
                i += 1;
            }
        }
        let imp = tmp
            .join("benchmarks")
            .join(bench)
            .join("implementations")
            .join(&spec.implementation);
        for (k, r) in rs.iter().enumerate() {
            write(
                &imp.join(format!("referee_run_{k}.json")),
                &pretty(&r.record),
            )?;
            // Time-stamp tokens beside the record (`referee run --tsa`) as
            // referee_run_K.NAME.tsr, where the record's names find them.
            for f in std::fs::read_dir(&r.path).into_iter().flatten().flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                if name.ends_with(".tsr") && f.file_type().is_ok_and(|t| t.is_file()) {
                    let dst = imp.join(format!("referee_run_{k}.{name}"));
                    std::fs::copy(f.path(), &dst).map_err(|e| FsError::io(&dst, e))?;
                }
            }
        }
        write(&imp.join("config.json"), &pretty(&rs[0].configuration()))?;
        match (&spec.code, &spec.code_files) {
            (Some(code), Some(files)) => copy_files(code, files, &imp.join("code"))?,
            (Some(code), None) => copy_code(code, &imp.join("code"))?,
            _ => {}
        }
        write(&imp.join("README.md"), readme(bench, rs, spec).as_bytes())?;
    }
    Ok(())
}

/// The power logs of a run (`power/result_N/node_*.txt` and `sw_*.txt`
/// beside its `result_N.txt`, as `run --power` writes them) into the
/// official layout's `power/result_I/` of the published result.
fn copy_power(log: &Path, to: &Path) -> Result<(), FsError> {
    let (Some(dir), Some(n)) = (log.parent(), result_number(log)) else {
        return Ok(());
    };
    let from = dir.join("power").join(format!("result_{n}"));
    let Ok(rd) = std::fs::read_dir(&from) else {
        return Ok(());
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let is_power =
            (name.starts_with("node_") || name.starts_with("sw_")) && name.ends_with(".txt");
        if is_power && e.file_type().is_ok_and(|t| t.is_file()) {
            let dst = to.join(&name);
            std::fs::create_dir_all(to)
                .and_then(|_| std::fs::copy(e.path(), &dst))
                .map_err(|source| FsError::Copy {
                    from: e.path(),
                    to: dst.clone(),
                    source,
                })?;
        }
    }
    Ok(())
}

fn readme(bench: &str, rs: &[&RunDir], spec: &PackageSpec) -> String {
    let rec = &rs[0].record;
    let mut s = format!("# {bench} — implementation `{}`\n\n", spec.implementation);
    s.push_str("MLPerf-style result packaged by referee; unverified by MLCommons.\n\n");
    let dirs = rs
        .iter()
        .map(|r| format!("`{}`", r.path.display()))
        .collect::<Vec<_>>()
        .join(", ");
    match rs[0].origin {
        Origin::Own | Origin::Exec => {
            let cmd: Vec<&str> = rec["command"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            s.push_str("## Exact run command\n\n```sh\n");
            s.push_str(&cmd.join(" "));
            s.push_str("\n```\n\n");
            s.push_str(&format!("Run directories: {dirs}.\n\n"));
        }
        Origin::Logs => s.push_str(&format!(
            "Result logs from {dirs} (not run under referee; no run record).\n\n"
        )),
    }
    if rs[0].origin == Origin::Exec {
        s.push_str(&format!(
            "Supervised by `referee run --exec` in `{}` under {}; each run's witness of the clock, \
             its provenance (code, container, environment without secrets) and the sha256 of its \
             files are in `referee_run_K.json`.\n\n",
            rec["working_directory"].as_str().unwrap_or(""),
            rec["rules"].as_str().unwrap_or("")
        ));
    }
    if rs[0].origin == Origin::Own {
        let code = &rec["code"];
        s.push_str("## Code identity\n\n");
        for k in [
            "referee_version",
            "git_commit",
            "uncommitted_diff_sha256",
            "binary_sha256",
        ] {
            s.push_str(&format!("- {k}: `{}`\n", code[k].as_str().unwrap_or("")));
        }
        s.push_str(&format!(
            "\n## Resolved configuration (sha256 `{}`)\n\n```json\n",
            rec["config_sha256"].as_str().unwrap_or("")
        ));
        s.push_str(&serde_json::to_string_pretty(&rec["config"]).unwrap_or_default());
        s.push_str("\n```\n\n## Data\n\n");
        if let Some(m) = rec["dataset_fingerprints"].as_object() {
            for (k, v) in m {
                s.push_str(&format!(
                    "- {k}: fingerprint `{}` (`referee data prepare {k}`)\n",
                    v.as_str().unwrap_or("")
                ));
            }
        }
    } else {
        s.push_str("## Configuration\n\n```json\n");
        s.push_str(&serde_json::to_string_pretty(&rs[0].configuration()).unwrap_or_default());
        s.push_str("\n```\n");
    }
    if rs[0].origin != Origin::Logs {
        s.push_str("\n## Seeds\n\n");
        for r in rs {
            s.push_str(&format!("- {}\n", r.record["seeds"]));
        }
    }
    if spec.code.is_some() {
        s.push_str(&format!(
            "\nThe training code is in `code/`: {}.\n",
            spec.code_source
        ));
    }
    s
}
