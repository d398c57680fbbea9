//! The MLCommons submission layout:
//!
//! ```text
//! ORG/systems/SYSTEM.json
//! ORG/results/SYSTEM/BENCHMARK/result_*.txt       (training)
//! ORG/results/SYSTEM/{strong,weak}/BENCHMARK/…     (hpc)
//! ORG/benchmarks/BENCHMARK/implementations/…
//! ```
//!
//! Directory listings are sorted so that every report is deterministic
//! (the official tools follow the file system's order).

use crate::checker::is_result_name;
use crate::error::DirError;
use std::path::{Path, PathBuf};

/// Sorted sub-directories of a directory.
pub fn sub_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    Ok(out)
}

/// Entries of a run's power folder (`power/result_N/`) whose names start
/// with `node_` or `sw_`, in path order (empty when the folder cannot be
/// read): the one listing of power logs. Its two readers filter it
/// differently, on purpose:
///
/// - the energy score ([`crate::score::power_logs`]) takes only the
///   `node_*.txt` and `sw_*.txt` names, the power logs a submission's
///   power folder holds, and integrates exactly those;
/// - the power policy ([`crate::policy::power`]) takes every regular file
///   named `node_*` or `sw_*`, whatever its extension, so that a node's log
///   under another name is still counted and its readings checked rather
///   than silently passed over.
pub fn power_log_entries(folder: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| is_power_name(p, "node_") || is_power_name(p, "sw_"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// True when `p`'s file name starts with `prefix` (`node_`, `sw_`).
pub fn is_power_name(p: &Path, prefix: &str) -> bool {
    p.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
}

/// Sorted `result_*.txt` files directly in a benchmark directory.
pub fn result_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| {
            e.file_type()
                .map(|t| t.is_file() || t.is_symlink())
                .unwrap_or(false)
        })
        .filter(|e| is_result_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// An organisation folder holds `systems/` and `results/`.
pub fn is_org(dir: &Path) -> bool {
    dir.join("systems").is_dir() && dir.join("results").is_dir()
}

/// Expand inputs to organisation folders: an org folder as is, or every
/// org folder directly inside a parent (like the official `PREFIX{*}`).
pub fn find_orgs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, DirError> {
    let mut out = Vec::new();
    for p in inputs {
        if !p.is_dir() {
            return Err(DirError::NotADirectory { path: p.clone() });
        }
        if is_org(p) {
            out.push(p.clone());
            continue;
        }
        let subs = sub_dirs(p).map_err(|e| DirError::io(p, e))?;
        let orgs: Vec<PathBuf> = subs.into_iter().filter(|d| is_org(d)).collect();
        if orgs.is_empty() {
            return Err(DirError::NotASubmission { path: p.clone() });
        }
        out.extend(orgs);
    }
    Ok(out)
}

/// One `results/SYSTEM/BENCHMARK` directory.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchmarkDir {
    pub org: PathBuf,
    pub system: String,
    pub benchmark: String,
    /// `strong`/`weak` for HPC, `None` for training.
    pub scaling: Option<String>,
    pub path: PathBuf,
}

/// All benchmark directories of an organisation (sorted).
pub fn benchmark_dirs(org: &Path, usage: &str) -> std::io::Result<Vec<BenchmarkDir>> {
    let mut out = Vec::new();
    let results = org.join("results");
    for sys in sub_dirs(&results)? {
        let system = sys
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if usage == "hpc" {
            for scaling in sub_dirs(&sys)? {
                let sc = scaling
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                for b in sub_dirs(&scaling)? {
                    out.push(BenchmarkDir {
                        org: org.to_path_buf(),
                        system: system.clone(),
                        benchmark: alias(&b),
                        scaling: Some(sc.clone()),
                        path: b,
                    });
                }
            }
        } else {
            for b in sub_dirs(&sys)? {
                out.push(BenchmarkDir {
                    org: org.to_path_buf(),
                    system: system.clone(),
                    benchmark: alias(&b),
                    scaling: None,
                    path: b,
                });
            }
        }
    }
    Ok(out)
}

/// Directory name → benchmark (`mask` is the old name of `maskrcnn`).
fn alias(dir: &Path) -> String {
    let n = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if n == "mask" { "maskrcnn".into() } else { n }
}

/// Path relative to `base` for messages (falls back to the full path).
pub fn rel(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}
