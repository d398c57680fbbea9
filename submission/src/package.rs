//! Packaging: turn the output directories of `referee run` into a
//! submission folder in the MLCommons layout:
//!
//! ```text
//! OUT/ORG/systems/SYSTEM.json
//! OUT/ORG/results/SYSTEM/BENCHMARK/result_0.txt … result_{N-1}.txt
//! OUT/ORG/benchmarks/BENCHMARK/implementations/IMPL/README.md
//! OUT/ORG/benchmarks/BENCHMARK/implementations/IMPL/config.json
//! OUT/ORG/benchmarks/BENCHMARK/implementations/IMPL/referee_run_K.json
//! ```
//!
//! The folder is built under a temporary name next to its destination and
//! renamed into place at the end, so an interrupted `referee package` leaves
//! no half-written `OUT/ORG`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A `referee run` output directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
    /// `referee_run.json`.
    pub record: Value,
    /// `result_*.txt`, sorted.
    pub logs: Vec<PathBuf>,
    /// `system.json`.
    pub system: Value,
}

impl RunDir {
    pub fn open(path: &Path) -> Result<Self, String> {
        let read_json = |name: &str| -> Result<Value, String> {
            let p = path.join(name);
            let text = std::fs::read_to_string(&p).map_err(|e| {
                format!(
                    "{}: {e} (is {} the output directory of `referee run`?)",
                    p.display(),
                    path.display()
                )
            })?;
            serde_json::from_str(&text)
                .map_err(|e| format!("{}:{}: invalid JSON: {e}", p.display(), e.line()))
        };
        let record = read_json("referee_run.json")?;
        let system = read_json("system.json")?;
        let mut logs: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                n.starts_with("result_") && n.ends_with(".txt")
            })
            .collect();
        logs.sort_by_key(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix("result_"))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(u64::MAX)
        });
        if logs.is_empty() {
            return Err(format!("{}: no result_*.txt logs", path.display()));
        }
        let partial: Vec<String> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        if !partial.is_empty() {
            return Err(format!(
                "{}: unfinished logs {} (a run was interrupted); only finished runs can be packaged",
                path.display(),
                partial.join(", ")
            ));
        }
        Ok(RunDir {
            path: path.to_path_buf(),
            record,
            logs,
            system,
        })
    }

    pub fn benchmark(&self) -> &str {
        self.record["benchmark"].as_str().unwrap_or("")
    }
    pub fn division(&self) -> &str {
        self.record["division"].as_str().unwrap_or("")
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
}

/// What `package` produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PackageSummary {
    pub path: PathBuf,
    /// benchmark → number of result logs.
    pub benchmarks: BTreeMap<String, usize>,
}

fn first_value(log: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    for line in text.lines() {
        let Some(pos) = line.rfind(":::MLLOG ") else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&line[pos + 9..]) else {
            continue;
        };
        if v["key"] == key {
            return v["value"].as_str().map(str::to_string);
        }
    }
    None
}

fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Build the submission folder `out/ORG` from run directories.
pub fn package(runs: &[RunDir], spec: &PackageSpec, out: &Path) -> Result<PackageSummary, String> {
    for (what, v) in [("--org", &spec.org), ("--system", &spec.system)] {
        if !is_safe_name(v) {
            return Err(format!(
                "{what} {v:?}: use letters, digits, '-', '_' and '.' (the name becomes a folder; no spaces, no leading dot)"
            ));
        }
    }
    if runs.is_empty() {
        return Err("no run directories given".into());
    }
    let division = runs[0].division().to_string();
    let mut by_bench: BTreeMap<String, Vec<&RunDir>> = BTreeMap::new();
    for r in runs {
        if r.division() != division {
            return Err(format!(
                "{} was run in the {} division, {} in the {division} division; a package has one division",
                r.path.display(),
                r.division(),
                runs[0].path.display()
            ));
        }
        for log in &r.logs {
            for (key, want) in [
                ("submission_org", &spec.org),
                ("submission_platform", &spec.system),
            ] {
                let got = first_value(log, key).unwrap_or_default();
                if &got != want {
                    return Err(format!(
                        "{}: logs {key} = {got:?} but the package is for {want:?} (run with --org/--system matching the package)",
                        log.display()
                    ));
                }
            }
        }
        by_bench
            .entry(r.benchmark().to_string())
            .or_default()
            .push(r);
    }
    let mut counts = BTreeMap::new();
    for (b, rs) in &by_bench {
        let n: usize = rs.iter().map(|r| r.logs.len()).sum();
        if let Some(req) = spec.required_runs.get(b) {
            if n != *req {
                return Err(format!(
                    "{b}: {n} result logs in {}; the benchmark requires exactly {req} (select runs before packaging, never after seeing their results)",
                    rs.iter()
                        .map(|r| r.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        } else {
            return Err(format!("{b}: not a benchmark of this ruleset"));
        }
        counts.insert(b.clone(), n);
    }
    let dest = out.join(&spec.org);
    if dest.exists() {
        return Err(format!(
            "{} already exists; packaging never overwrites",
            dest.display()
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let tmp = out.join(format!(".{}.partial-{}", spec.org, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = build(&by_bench, spec, &division, &tmp);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    sync_tree(&tmp);
    std::fs::rename(&tmp, &dest)
        .map_err(|e| format!("{} → {}: {e}", tmp.display(), dest.display()))?;
    if let Ok(d) = std::fs::File::open(out) {
        let _ = d.sync_all();
    }
    Ok(PackageSummary {
        path: dest,
        benchmarks: counts,
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("{}: {e}", path.display()))
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

fn build(
    by_bench: &BTreeMap<String, Vec<&RunDir>>,
    spec: &PackageSpec,
    division: &str,
    tmp: &Path,
) -> Result<(), String> {
    // The system description: from the first run, named for the package.
    let first = by_bench
        .values()
        .next()
        .and_then(|v| v.first())
        .expect("non-empty");
    let mut system = first.system.clone();
    if let Some(obj) = system.as_object_mut() {
        obj.insert("submitter".into(), Value::String(spec.org.clone()));
        obj.insert("system_name".into(), Value::String(spec.system.clone()));
        obj.insert("division".into(), Value::String(division.to_string()));
    }
    write(
        &tmp.join("systems").join(format!("{}.json", spec.system)),
        (serde_json::to_string_pretty(&system).expect("serialisable") + "\n").as_bytes(),
    )?;
    for (bench, rs) in by_bench {
        let results = tmp.join("results").join(&spec.system).join(bench);
        std::fs::create_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
        let mut i = 0;
        for r in rs {
            for log in &r.logs {
                let dst = results.join(format!("result_{i}.txt"));
                std::fs::copy(log, &dst)
                    .map_err(|e| format!("{} → {}: {e}", log.display(), dst.display()))?;
                i += 1;
            }
        }
        let imp = tmp
            .join("benchmarks")
            .join(bench)
            .join("implementations")
            .join(&spec.implementation);
        let config = &rs[0].record["config"];
        for (k, r) in rs.iter().enumerate() {
            if r.record["config"] != *config {
                return Err(format!(
                    "{} used a different configuration than {}; one implementation per benchmark has one configuration",
                    r.path.display(),
                    rs[0].path.display()
                ));
            }
            write(
                &imp.join(format!("referee_run_{k}.json")),
                (serde_json::to_string_pretty(&r.record).expect("serialisable") + "\n").as_bytes(),
            )?;
        }
        write(
            &imp.join("config.json"),
            (serde_json::to_string_pretty(config).expect("serialisable") + "\n").as_bytes(),
        )?;
        write(&imp.join("README.md"), readme(bench, rs, spec).as_bytes())?;
    }
    Ok(())
}

fn readme(bench: &str, rs: &[&RunDir], spec: &PackageSpec) -> String {
    let rec = &rs[0].record;
    let cmd: Vec<String> = rec["command"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let code = &rec["code"];
    let mut s = String::new();
    s.push_str(&format!(
        "# {bench} — implementation `{}`\n\n",
        spec.implementation
    ));
    s.push_str("MLPerf-style result produced by referee; unverified by MLCommons.\n\n");
    s.push_str("## Exact run command\n\n```sh\n");
    s.push_str(&cmd.join(" "));
    s.push_str("\n```\n\n");
    s.push_str(&format!(
        "Run directories: {}.\n\n",
        rs.iter()
            .map(|r| format!("`{}`", r.path.display()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
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
    s.push_str("\n## Seeds\n\n");
    for r in rs {
        s.push_str(&format!("- {}\n", r.record["seeds"]));
    }
    s
}
