//! High-level compliance checking of log files: ruleset selection, file
//! discovery, one log at a time (the harness checks many in parallel).

use crate::compliance::{self, CheckOptions};
use crate::diag::{Diagnostic, Verdict};
use crate::error::ChoiceError;
use crate::mllog;
use crate::ruleset::RuleLibrary;
use crate::untrusted::Links;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which rules a log is checked against.
#[derive(Debug, Clone, PartialEq)]
pub enum RulesetChoice {
    /// An official ruleset: `<usage>_<version>/common.yaml` and its chain.
    Official { usage: String, version: String },
    /// One rule file (like the official `--config`), relative to the rules
    /// root or absolute.
    Config(String),
    /// Pick per log: referee's own rule file when the log's
    /// `submission_benchmark` is one of referee's benchmarks.
    Auto,
}

/// The verdict on one log.
#[derive(Debug, Clone, Serialize)]
pub struct LogReport {
    pub path: String,
    pub verdict: Verdict,
    pub ruleset: Option<String>,
    pub benchmark: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
    /// Findings left out because a root cause explains them.
    #[serde(skip_serializing_if = "is_zero")]
    pub suppressed: usize,
    pub records: usize,
    pub rule_files: Vec<String>,
    /// Findings beyond the official verdict ([`crate::policy`]); they never
    /// change `verdict`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<Diagnostic>,
    /// The configuration the log disclosed (for the result-set checks).
    #[serde(skip)]
    pub disclosed: crate::policy::log::Disclosed,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A file that could not be checked at all (I/O, or no rules apply).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {problem}", .path.display())]
pub struct CheckError {
    pub path: PathBuf,
    pub problem: CheckProblem,
}

/// Why a file could not be checked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckProblem {
    /// Opening or reading the log failed.
    #[error("cannot read: {0}")]
    Read(Arc<std::io::Error>),
    /// An input path cannot be looked at.
    #[error("cannot access: {0}")]
    Access(Arc<std::io::Error>),
    /// A directory given cannot be listed.
    #[error("cannot list directory: {0}")]
    List(Arc<std::io::Error>),
    /// No ruleset applies to the log.
    #[error(transparent)]
    Ruleset(#[from] ChoiceError),
}

impl CheckError {
    /// `path` could not be checked because of `problem`.
    pub fn new(path: &Path, problem: impl Into<CheckProblem>) -> Self {
        CheckError {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }
}

/// The largest read buffer of a log (a large log is read in pieces of it).
pub const READ_BUFFER: usize = 256 * 1024;

pub struct Checker {
    pub lib: Arc<RuleLibrary>,
    pub opts: CheckOptions,
    /// referee's own benchmarks: `submission_benchmark` → (ruleset name,
    /// rule file path in `lib`).
    pub own: HashMap<String, (String, String)>,
}

impl Checker {
    pub fn new(lib: Arc<RuleLibrary>, opts: CheckOptions) -> Self {
        Checker {
            lib,
            opts,
            own: HashMap::new(),
        }
    }

    /// The keys whose values checking under `choice` needs (`None`: all);
    /// values of the others are kept slim.
    pub fn kept_keys(&self, choice: &RulesetChoice) -> Option<Arc<mllog::KeepFn>> {
        match choice {
            RulesetChoice::Official { usage, version } => {
                let universe = self.lib.key_universe(&format!("{usage}_{version}"));
                Some(Arc::new(move |k: &str| {
                    universe.contains(k) || crate::lifecycle::engine_reads(k)
                }))
            }
            _ => None,
        }
    }

    /// A reader of a log for checking under `choice` from any byte source.
    pub fn reader<R: std::io::BufRead>(
        &self,
        input: R,
        choice: &RulesetChoice,
    ) -> mllog::Reader<R> {
        let reader = mllog::Reader::new(input);
        match self.kept_keys(choice) {
            Some(keep) => reader.keep_values(keep),
            None => reader,
        }
    }

    /// Read a log of a package for checking under `choice` (values of keys
    /// no rule of an official ruleset reads are kept slim). The log must be
    /// a regular file within the cap for logs; a link is refused (see
    /// [`crate::untrusted`]).
    pub fn read(
        &self,
        path: &Path,
        choice: &RulesetChoice,
    ) -> Result<mllog::ParsedLog, CheckError> {
        self.read_as(path, choice, Links::Refuse)
    }

    /// [`Checker::read`] of a path that may be a link where `links` allows
    /// it (a path the user typed).
    pub fn read_as(
        &self,
        path: &Path,
        choice: &RulesetChoice,
        links: Links,
    ) -> Result<mllog::ParsedLog, CheckError> {
        let file = mllog::open_log(path, links)
            .map_err(|e| CheckError::new(path, CheckProblem::Read(e.into())))?;
        let buffer = file.buffer_size(READ_BUFFER);
        self.read_from(path, file, choice, buffer)
    }

    /// Read the log at `path` from `input` (its bytes, however they are
    /// got: e.g. through a reader that hashes them on the way) through a
    /// read buffer of `buffer` bytes (at most [`READ_BUFFER`]; the file's
    /// size where it is known: `untrusted::Bounded::buffer_size`).
    pub fn read_from(
        &self,
        path: &Path,
        input: impl std::io::Read,
        choice: &RulesetChoice,
        buffer: usize,
    ) -> Result<mllog::ParsedLog, CheckError> {
        let input = std::io::BufReader::with_capacity(buffer.min(READ_BUFFER), input);
        mllog::collect(self.reader(input, choice))
            .map_err(|e| CheckError::new(path, CheckProblem::Read(e.into())))
    }

    /// Check one log file (a link is refused, see [`Checker::read`]).
    pub fn check_file(&self, path: &Path, choice: &RulesetChoice) -> Result<LogReport, CheckError> {
        self.check_file_as(path, choice, Links::Refuse)
    }

    /// [`Checker::check_file`] of a path that may be a link where `links`
    /// allows it (a path the user typed).
    pub fn check_file_as(
        &self,
        path: &Path,
        choice: &RulesetChoice,
        links: Links,
    ) -> Result<LogReport, CheckError> {
        let mut parsed = self.read_as(path, choice, links)?;
        self.check_parsed(&path.display().to_string(), &mut parsed, choice)
            .map_err(|e| CheckError::new(path, e))
    }

    /// Check an already parsed log.
    pub fn check_parsed(
        &self,
        display: &str,
        parsed: &mut mllog::ParsedLog,
        choice: &RulesetChoice,
    ) -> Result<LogReport, ChoiceError> {
        let (ruleset, start) = match choice {
            RulesetChoice::Official { usage, version } => (
                Some(version.clone()),
                format!("{usage}_{version}/common.yaml"),
            ),
            RulesetChoice::Config(c) => (None, c.clone()),
            RulesetChoice::Auto => {
                let bench = parsed
                    .records
                    .iter()
                    .find(|r| r.key() == "submission_benchmark")
                    .and_then(|r| r.value().as_str());
                match bench.and_then(|b| self.own.get(b)) {
                    Some((name, rel)) => (Some(name.clone()), rel.clone()),
                    None => {
                        return Err(match bench {
                            Some(b) => ChoiceError::NotOwnBenchmark {
                                benchmark: b.to_string(),
                            },
                            None => ChoiceError::NoBenchmark,
                        });
                    }
                }
            }
        };
        let out = compliance::check(&self.lib, parsed, &start, self.opts);
        let diagnostics = out
            .diagnostics
            .into_iter()
            .map(|mut d| {
                if d.file.is_none() {
                    d.file = Some(display.to_string());
                }
                d
            })
            .collect();
        let usage = match choice {
            RulesetChoice::Official { usage, .. } => Some(usage.as_str()),
            _ => None,
        };
        let (policy, disclosed) = crate::policy::log::check_log(
            &crate::policy::log::LogContext {
                lib: &self.lib,
                display,
                usage,
                ruleset: ruleset.as_deref(),
                rule_files: &out.rule_files,
            },
            parsed,
        );
        Ok(LogReport {
            path: display.to_string(),
            verdict: out.verdict,
            ruleset,
            benchmark: out.benchmark,
            diagnostics,
            suppressed: out.suppressed,
            records: out.records,
            rule_files: out.rule_files,
            policy,
            disclosed,
        })
    }
}

/// Expand command-line paths: files as given; directories searched
/// recursively for `result_*.txt` (sorted).
pub fn collect_logs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, CheckError> {
    let mut out = Vec::new();
    for p in inputs {
        let meta =
            std::fs::metadata(p).map_err(|e| CheckError::new(p, CheckProblem::Access(e.into())))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, 0, &mut found)
                .map_err(|(at, e)| CheckError::new(&at, CheckProblem::List(e.into())))?;
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// The `result_*.txt` entries under `dir`, whatever their type (a link or
/// a FIFO of that name is then refused by name when it is read). Links to
/// directories are not followed; a directory deeper than
/// [`crate::untrusted::MAX_DEPTH`] or one that cannot be listed is an error
/// naming it.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, std::io::Error)> {
    if depth > crate::untrusted::MAX_DEPTH {
        return Err((dir.to_path_buf(), crate::untrusted::too_deep()));
    }
    let at = |e| (dir.to_path_buf(), e);
    for e in std::fs::read_dir(dir).map_err(at)? {
        let e = e.map_err(at)?;
        let ft = e.file_type().map_err(at)?;
        let path = e.path();
        if ft.is_dir() {
            walk(&path, depth + 1, out)?;
        } else if is_result_name(&e.file_name().to_string_lossy()) {
            out.push(path);
        }
    }
    Ok(())
}

/// The official glob `result_*.txt`.
pub fn is_result_name(name: &str) -> bool {
    name.starts_with("result_") && name.ends_with(".txt") && name.len() >= "result_.txt".len()
}
