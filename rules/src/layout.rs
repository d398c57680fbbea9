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
use crate::diag::Diagnostic;
use crate::error::DirError;
use std::ffi::OsString;
use std::fs::FileType;
use std::path::{Path, PathBuf};

/// Sorted sub-directories of a directory. A link to a directory is not one
/// (links inside a package are not followed; [`results_tree`] reports
/// them).
pub fn sub_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    Ok(entries(dir)?
        .into_iter()
        .filter(|(_, _, ft)| ft.is_dir())
        .map(|(p, _, _)| p)
        .collect())
}

/// A directory's entries with their own types (a link is a link, not what
/// it points to), sorted by path.
fn entries(dir: &Path) -> std::io::Result<Vec<(PathBuf, OsString, FileType)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        out.push((e.path(), e.file_name(), ft));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Is `p` a directory itself (not a link to one)?
pub fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
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

/// Sorted `result_*.txt` entries directly in a benchmark directory that
/// are not directories: the files the official glob counts. A link, a FIFO
/// or a device of that name is listed too, and refused when it is read
/// ([`crate::untrusted`]), so that it is named rather than counted or
/// skipped in silence.
pub fn result_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| e.file_type().map(|t| !t.is_dir()).unwrap_or(false))
        .filter(|e| is_result_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// An organisation folder holds `systems/` and `results/` (directories,
/// not links to them).
pub fn is_org(dir: &Path) -> bool {
    is_real_dir(&dir.join("systems")) && is_real_dir(&dir.join("results"))
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

/// All benchmark directories of an organisation (sorted); see
/// [`results_tree`] for what else the tree holds.
pub fn benchmark_dirs(org: &Path, usage: &str) -> std::io::Result<Vec<BenchmarkDir>> {
    results_tree(org, usage).map(|t| t.dirs)
}

/// An organisation's `results/` tree, every entry accounted for.
#[derive(Debug, Clone, Default)]
pub struct ResultsTree {
    /// The benchmark directories (sorted).
    pub dirs: Vec<BenchmarkDir>,
    /// What the tree holds beside what the rules read, in path order:
    /// errors for links (not followed: a result that is a link into
    /// another folder is not this submitter's), for special files (FIFOs,
    /// devices, sockets) and for directories that cannot be listed;
    /// warnings for directories no rule expects (not looked into). A
    /// `result_*.txt` link or special file in a benchmark directory is not
    /// listed here: reading it names it.
    pub findings: Vec<Diagnostic>,
}

/// The directories of an organisation folder.
const ORG_DIRS: [&str; 3] = ["systems", "results", "benchmarks"];

/// Walk the organisation folder's own entries and `ORG/results`
/// (`results/SYSTEM/BENCHMARK/{result_*.txt, power/result_N/…}`; for HPC
/// `results/SYSTEM/{strong,weak}/BENCHMARK/…`) without following links.
/// `Err` only when the folder or its `results/` cannot be listed.
pub fn results_tree(org: &Path, usage: &str) -> std::io::Result<ResultsTree> {
    let mut t = ResultsTree::default();
    // The organisation folder's own entries: a second `results` spelt with
    // a look-alike letter is a directory no rule reads, named as such.
    for (p, name, ft) in entries(org)? {
        if !ft.is_dir() {
            odd_entry(&p, ft, &mut t.findings);
        } else if !ORG_DIRS.iter().any(|d| name == *d) && !name.to_string_lossy().starts_with('.') {
            // (Names starting with a dot are the repository checks' finding.)
            t.findings.push(unexpected_dir(&p));
        }
    }
    let results = org.join("results");
    for (sys, _, ft) in entries(&results)? {
        if !ft.is_dir() {
            odd_entry(&sys, ft, &mut t.findings);
            continue;
        }
        let system = file_name(&sys);
        let Some(sys_entries) = listed(&sys, &mut t.findings) else {
            continue;
        };
        let mut bench_parents = Vec::new();
        for (p, _, ft) in sys_entries {
            if !ft.is_dir() {
                odd_entry(&p, ft, &mut t.findings);
            } else if usage == "hpc" {
                let scaling = file_name(&p);
                let Some(in_scaling) = listed(&p, &mut t.findings) else {
                    continue;
                };
                for (b, _, ft) in in_scaling {
                    if ft.is_dir() {
                        bench_parents.push((b, Some(scaling.clone())));
                    } else {
                        odd_entry(&b, ft, &mut t.findings);
                    }
                }
            } else {
                bench_parents.push((p, None));
            }
        }
        for (b, scaling) in bench_parents {
            benchmark_dir_entries(&b, &mut t.findings);
            t.dirs.push(BenchmarkDir {
                org: org.to_path_buf(),
                system: system.clone(),
                benchmark: alias(&b),
                scaling,
                path: b,
            });
        }
    }
    Ok(t)
}

/// The entries of a benchmark directory beside its result files: `power/`
/// and its run folders are walked; any other directory is unexpected.
fn benchmark_dir_entries(dir: &Path, out: &mut Vec<Diagnostic>) {
    let Some(list) = listed(dir, out) else { return };
    for (p, name, ft) in list {
        if ft.is_dir() && name == "power" {
            let Some(runs) = listed(&p, out) else {
                continue;
            };
            for (run, _, ft) in runs {
                if !ft.is_dir() {
                    odd_entry(&run, ft, out);
                    continue;
                }
                let Some(files) = listed(&run, out) else {
                    continue;
                };
                for (f, _, ft) in files {
                    if ft.is_dir() {
                        out.push(unexpected_dir(&f));
                    } else {
                        odd_entry(&f, ft, out);
                    }
                }
            }
        } else if ft.is_dir() {
            out.push(unexpected_dir(&p));
        } else if !is_result_name(&name.to_string_lossy()) {
            odd_entry(&p, ft, out);
        }
    }
}

/// A directory's entries, or an error finding naming it.
fn listed(dir: &Path, out: &mut Vec<Diagnostic>) -> Option<Vec<(PathBuf, OsString, FileType)>> {
    match entries(dir) {
        Ok(e) => Some(e),
        Err(e) => {
            out.push(
                Diagnostic::error(
                    "unreadable-dir",
                    format!("cannot list this directory: {e}; nothing in it is checked"),
                )
                .rule("layout", None)
                .file(dir.display().to_string()),
            );
            None
        }
    }
}

/// A finding for an entry that is neither a directory nor a regular file.
fn odd_entry(p: &Path, ft: FileType, out: &mut Vec<Diagnostic>) {
    if ft.is_file() {
        return;
    }
    let d = if ft.is_symlink() {
        Diagnostic::error(
            "link",
            "symbolic link in the results tree: links inside a package are not followed, so what it points to is not this submission's",
        )
        .expected("regular files and directories")
    } else {
        Diagnostic::error(
            "special-file",
            format!(
                "{} in the results tree: only regular files are read",
                crate::untrusted::type_name(ft)
            ),
        )
        .expected("regular files and directories")
    };
    out.push(d.rule("layout", None).file(p.display().to_string()));
}

/// A warning for a directory no rule reads.
fn unexpected_dir(p: &Path) -> Diagnostic {
    Diagnostic::warning(
        "unexpected-dir",
        format!(
            "directory `{}` is no part of the results layout: nothing in it is checked",
            shown_name(p)
        ),
    )
    .rule("layout", None)
    .file(p.display().to_string())
    .expected("ORG/{systems,results,benchmarks}/, results/SYSTEM/BENCHMARK/ holding result_*.txt and power/result_N/")
}

/// A file name for a message, its non-ASCII characters escaped (`\u{435}`)
/// so that a look-alike letter shows as what it is.
pub fn shown_name(p: &Path) -> String {
    let n = file_name(p);
    if n.is_ascii() {
        n
    } else {
        n.escape_default().to_string()
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
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
