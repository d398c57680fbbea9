//! The re-run of a result that `referee run --exec` supervised: the
//! package is a stranger's, so its program runs only
//!
//! - with the auditor's consent (`--allow-exec`, or `yes` typed at a
//!   terminal) after the audit has shown the exact command, the code it
//!   runs and the environment it passes; without it the step is not done;
//! - from the code the package carries (`benchmarks/<b>/implementations/
//!   <i>/code/`, covered by the signed manifest), copied into a fresh
//!   re-run directory under the audit's `--out` — never from a directory of
//!   the auditor's machine that the record names (paths inside the recorded
//!   working directory are mapped to the copy);
//! - in a sandbox ([`super::sandbox`]), with the recorded environment
//!   (minus secrets) and the harness's variables, never the auditor's;
//! - on the same code and data as the original, or not at all unless
//!   `--force`: the package's code against the run's `code_fingerprint`,
//!   each `--data DIR` against the run's `datasets`.
//!
//! The re-run's result file, its raw stdout/stderr and its MLLOG file stay
//! in the re-run directory for the auditor to read.

use super::error::AuditError;
use super::sandbox::{self, Mounts, Sandbox};
use super::{Rerun, Rerunner, StepStatus, compare, rcp_bounds, read_curve};
use crate::common::fingerprint::{TreeFingerprint, fingerprint_dir, fingerprint_files, list_files};
use referee_rules::escape::{markdown, markdown_code, markdown_code_block, term};
use referee_submission::fs::copy_tree;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The variables the harness gives every run (crate::exec): they replace
/// recorded ones of the same name.
pub const HARNESS_VARIABLES: [&str; 8] = [
    "SEED",
    "COMPLIANCE_FILE",
    "LOGDIR",
    "NEXP",
    "DATESTAMP",
    "PYTHONUNBUFFERED",
    "REFEREE_RUN_INDEX",
    "REFEREE_OUT_DIR",
];

/// What a re-run will run, shown before anything runs.
#[derive(Debug, Clone, Serialize)]
pub struct RerunPlan {
    /// The command as the program is started (recorded paths mapped).
    pub command: Vec<String>,
    /// The command as the run record has it.
    pub recorded_command: Vec<String>,
    /// The program's working directory: the copy of the package's code.
    pub working_directory: String,
    /// The package's code that is copied there.
    pub code: String,
    /// Its fingerprint.
    pub code_fingerprint: String,
    /// The environment passed (recorded, minus secrets), before the
    /// harness's variables are added.
    pub env: BTreeMap<String, String>,
    pub harness_variables: Vec<String>,
    /// Datasets, read-only: here → where the program reads them.
    pub datasets: Vec<String>,
    /// How it is confined.
    pub sandbox: String,
    /// What the sandbox shows read-only, each with why.
    pub read_only: Vec<String>,
    /// The user it runs as: `nobody (uid 65534)` when the auditor is root.
    pub user: String,
    /// Facts the auditor should know (paths read from this machine, code
    /// not tied to the run).
    pub notes: Vec<String>,
}

impl RerunPlan {
    /// The plan for people (stderr, the consent prompt, audit.md). Every
    /// value is the package's and is shown through [`term`]: one line
    /// each, nothing a terminal would act on.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "  command: {}\n",
            term(&shell_words(&self.command))
        ));
        if self.command != self.recorded_command {
            s.push_str(&format!(
                "  (recorded: {})\n",
                term(&shell_words(&self.recorded_command))
            ));
        }
        s.push_str(&format!(
            "  working directory: {}\n",
            term(&self.working_directory)
        ));
        s.push_str(&format!(
            "  code: {} ({})\n",
            term(&self.code),
            term(&self.code_fingerprint)
        ));
        s.push_str("  environment (recorded, secrets removed):\n");
        for (k, v) in &self.env {
            s.push_str(&format!("    {}={}\n", term(k), term(v)));
        }
        s.push_str(&format!(
            "  plus the harness's variables: {}\n",
            self.harness_variables.join(", ")
        ));
        for d in &self.datasets {
            s.push_str(&format!("  dataset (read-only): {}\n", term(d)));
        }
        s.push_str(&format!("  sandbox: {}\n", term(&self.sandbox)));
        for r in &self.read_only {
            s.push_str(&format!("    read-only: {}\n", term(r)));
        }
        s.push_str(&format!("  runs as: {}\n", self.user));
        for n in &self.notes {
            s.push_str(&format!("  note: {}\n", term(n)));
        }
        s
    }
}

/// Words joined for display, quoted where a shell would need it.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The recorded command with every path inside the recorded working
/// directory `wd` mapped to the same path under `cwd` (the copy of the
/// code); paths elsewhere on this machine are noted.
fn map_paths(command: &[String], wd: &str, cwd: &Path, notes: &mut Vec<String>) -> Vec<String> {
    let wd = wd.trim_end_matches('/');
    command
        .iter()
        .map(|a| {
            if !wd.is_empty() && wd != "/" {
                if a == wd {
                    return cwd.display().to_string();
                }
                if let Some(rest) = a.strip_prefix(wd).and_then(|r| r.strip_prefix('/')) {
                    return cwd.join(rest).display().to_string();
                }
            }
            if a.starts_with('/') && Path::new(a).exists() {
                notes.push(format!(
                    "{a} is a path of this machine outside the recorded working directory: the package does not carry it; the sandbox shows it only where it lies in a directory shown read-only (the system, the program's interpreter, --sandbox-ro, --data)"
                ));
            }
            a.clone()
        })
        .collect()
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Rerunner<'_> {
    /// Planned, shown, not run.
    fn not_run(&mut self, log: &Path, why: String, plan: RerunPlan) {
        self.md.push_str(&format!(
            "- {}: not re-run: {}\n\n{}\n\n",
            markdown_code(&log.display().to_string()),
            markdown(&why),
            markdown_code_block("text", &plan.text())
        ));
        self.steps.push(super::Step::new(
            format!("re-run {}", log.display()),
            StepStatus::NotDone,
            why.clone(),
        ));
        self.reruns.push(Rerun::NotRun {
            log: log.display().to_string(),
            not_run: why,
            plan: Box::new(plan),
        });
    }

    /// A re-run not done, with why, in the report and in audit.md.
    fn exec_not_done(&mut self, log: &Path, why: String) {
        self.md.push_str(&format!(
            "- {}: not re-run: {}\n",
            markdown_code(&log.display().to_string()),
            markdown(&why)
        ));
        self.not_done(log, why);
    }

    /// Re-run one result of a supervised program (see the module's doc).
    pub(super) fn rerun_exec(&mut self, benchmark: &str, log: &Path) -> Result<(), AuditError> {
        let Some(rec) = self.exec_record(log) else {
            return Ok(());
        };
        let code_fp = list_files(&rec.code)
            .and_then(|files| fingerprint_files(&rec.code, &files, "the package's code"))?;
        let Some(inputs) = self.exec_inputs(log, &rec, &code_fp)? else {
            return Ok(());
        };
        if !inputs.differences.is_empty() && !self.req.force {
            self.refuse(log, inputs.differences);
            return Ok(());
        }
        let rerun_dir = absolute(&self.rerun_dir(benchmark, log));
        let cwd = rerun_dir.join("code");
        let run_as = sandbox::unprivileged_user();
        let (plan, sandbox, env, mounts) = self.exec_plan(
            &rec,
            &code_fp,
            (&rerun_dir, &cwd),
            inputs.notes,
            (inputs.datasets, inputs.binds),
            run_as,
        );
        let seeds = self.seeds(rec.seed);
        eprintln!(
            "referee: the re-run of {} (seed {}, the original's {}) would run:\n{}",
            term(&log.display().to_string()),
            seeds.rerun,
            rec.seed,
            plan.text()
        );
        let consent = self.req.allow_exec || self.req.confirm.is_some_and(|ask| ask(&plan.text()));
        if !consent {
            self.not_run(
                log,
                "not done: needs --allow-exec (the package's program runs only with the auditor's consent; the plan is in audit.md)".into(),
                plan,
            );
            return Ok(());
        }
        let sandbox = match sandbox {
            Ok(s) => s,
            Err(why) => {
                self.not_run(log, format!("not done: {why}"), plan);
                return Ok(());
            }
        };
        if let Some((uid, gid)) = run_as
            && let Some(why) = unreadable(&mounts, &plan.command[0], env.get("PATH"), uid, gid)
        {
            self.not_run(log, format!("not done: {why}"), plan);
            return Ok(());
        }
        // The system-call filter, beside the re-run directory (the
        // program cannot write it), given to bubblewrap at SECCOMP_FD.
        let mut fds = Vec::new();
        if mounts.seccomp_fd.is_some() {
            let filter = rerun_dir.with_extension("seccomp.bpf");
            let written = sandbox::seccomp_program()
                .map_err(|e| e.to_string())
                .and_then(|p| {
                    std::fs::write(&filter, p).map_err(|e| format!("{}: {e}", filter.display()))
                });
            if let Err(why) = written {
                self.not_run(log, format!("not done: {why}"), plan);
                return Ok(());
            }
            fds.push((filter, SECCOMP_FD));
        }
        copy_tree(&rec.code, &cwd, &|_| false)?;
        if let Some((uid, gid)) = run_as {
            sandbox::hand_over(&rerun_dir, uid, gid).map_err(|source| AuditError::Io {
                path: rerun_dir.clone(),
                source,
            })?;
        }
        let shown_sandbox = match sandbox {
            Sandbox::Bwrap(_) => "bubblewrap",
            Sandbox::None => "NONE (--sandbox none)",
        };
        let confined = Confined {
            mounts,
            env,
            sandbox,
            run_as,
            fds,
        };
        let cfg = self.exec_config(benchmark, &rec, plan.command.clone(), confined, seeds.rerun)?;
        eprintln!(
            "referee: re-running {} (seed {}) in {}, sandbox: {}",
            term(&log.display().to_string()),
            seeds.rerun,
            term(&rerun_dir.display().to_string()),
            shown_sandbox
        );
        let r = match crate::exec::run_one(&cfg, 0, seeds.rerun) {
            Ok(r) => r,
            Err(e) => {
                self.failed(log, e.to_string());
                return Ok(());
            }
        };
        let orig = read_curve(log, "eval_accuracy")?;
        let again = read_curve(&r.log, "eval_accuracy")?;
        let bounds = match (self.scoring.table(benchmark), orig.global_batch_size) {
            (Ok(t), Some(gbs)) => rcp_bounds(&t, gbs),
            _ => None,
        };
        let comparison = compare(
            bounds,
            &orig.points,
            orig.converged_at,
            &again.points,
            again.converged_at,
            seeds,
        );
        self.md.push_str(&format!(
            "- {}: re-run in {} (stdout, stderr and MLLOG in run_0/, result in result_0.txt):\n\n{}\n\n",
            markdown_code(&log.display().to_string()),
            markdown_code(&rerun_dir.display().to_string()),
            markdown_code_block("text", &plan.text())
        ));
        let forced = inputs.differences;
        self.done(
            log,
            seeds.rerun,
            forced,
            rerun_dir,
            comparison,
            Some(Box::new(plan)),
        );
        Ok(())
    }

    /// The run record of `log`, its seed and command, and the code the
    /// package carries for it; `None` (the re-run not done, with why) when
    /// any of them is missing.
    fn exec_record(&mut self, log: &Path) -> Option<ExecRecord> {
        let found = match crate::exec::witness::find(log) {
            Ok(Some(f)) => f,
            Ok(None) => {
                self.exec_not_done(
                    log,
                    "no run record in the implementation holds this log (matched by its sha256)"
                        .into(),
                );
                return None;
            }
            Err(e) => {
                self.exec_not_done(log, e.to_string());
                return None;
            }
        };
        let (session, run) = (&found.session, &found.run);
        let recorded_command: Vec<String> = session["command"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let Some(seed) = run["seed"].as_u64() else {
            let why = format!("{}: the run has no seed", found.record.display());
            self.exec_not_done(log, why);
            return None;
        };
        if recorded_command.is_empty() {
            let why = format!(
                "{}: the run record holds no command",
                found.record.display()
            );
            self.exec_not_done(log, why);
            return None;
        }
        let imp = found
            .record
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let code = imp.join("code");
        let shown = code
            .strip_prefix(&self.req.dir)
            .unwrap_or(&code)
            .display()
            .to_string();
        if !code.is_dir() {
            let why = format!(
                "the package carries no code for this result ({shown}/ is missing): referee re-runs only the code a signed package carries, never a directory of this machine (the submitter packages it: `referee package` includes a git checkout's tracked files, or --code DIR)"
            );
            self.exec_not_done(log, why);
            return None;
        }
        Some(ExecRecord {
            session: found.session.clone(),
            run: found.run.clone(),
            seed,
            recorded_command,
            code,
            shown,
        })
    }

    /// The package's code and the `--data` directories against what the
    /// run recorded; `None` (the re-run not done, with why) when the
    /// datasets given do not match the datasets the run read.
    fn exec_inputs(
        &mut self,
        log: &Path,
        rec: &ExecRecord,
        code_fp: &TreeFingerprint,
    ) -> Result<Option<ExecInputs>, AuditError> {
        let session = &rec.session;
        let mut differences = Vec::new();
        let mut notes = Vec::new();
        match serde_json::from_value::<TreeFingerprint>(session["code_fingerprint"].clone()) {
            Ok(rec) if rec.fingerprint != code_fp.fingerprint => differences.push(format!(
                "code: the run's working directory held {} ({} files), the package carries {} ({} files)",
                rec.fingerprint, rec.files, code_fp.fingerprint, code_fp.files
            )),
            Ok(_) => {}
            Err(_) => notes.push(
                "the run recorded no fingerprint of its code (its working directory was not a git checkout): nothing ties the package's code to the run".into(),
            ),
        }
        let recorded_data: Vec<TreeFingerprint> =
            serde_json::from_value(session["datasets"].clone()).unwrap_or_default();
        if recorded_data.len() != self.req.data.len() && !recorded_data.is_empty() {
            let why = format!(
                "the run read {} dataset(s) ({}): give --data DIR for each, in that order ({} given)",
                recorded_data.len(),
                recorded_data
                    .iter()
                    .map(|d| format!("{} {}", d.path, d.fingerprint))
                    .collect::<Vec<_>>()
                    .join(", "),
                self.req.data.len()
            );
            self.exec_not_done(log, why);
            return Ok(None);
        }
        let mut binds = Vec::new();
        let mut datasets = Vec::new();
        for (rec, dir) in recorded_data.iter().zip(&self.req.data) {
            let here = fingerprint_dir(dir).map_err(AuditError::Data)?;
            if here.fingerprint != rec.fingerprint {
                differences.push(format!(
                    "dataset {}: original {} ({} files), here {} {} ({} files)",
                    rec.path, rec.fingerprint, rec.files, here.path, here.fingerprint, here.files
                ));
            }
            datasets.push(format!(
                "{} → {} ({})",
                here.path, rec.path, here.fingerprint
            ));
            binds.push((absolute(dir), PathBuf::from(&rec.path)));
        }
        Ok(Some(ExecInputs {
            differences,
            notes,
            binds,
            datasets,
        }))
    }

    /// What the re-run would run (shown before consent), the sandbox (or
    /// why there is none), the environment it passes and what the sandbox
    /// shows. `dirs`: the re-run directory and the code's copy in it;
    /// `data`: the datasets as shown and their binds.
    #[allow(clippy::type_complexity)]
    fn exec_plan(
        &self,
        rec: &ExecRecord,
        code_fp: &TreeFingerprint,
        dirs: (&Path, &Path),
        mut notes: Vec<String>,
        data: (Vec<String>, Vec<(PathBuf, PathBuf)>),
        run_as: Option<(u32, u32)>,
    ) -> (
        RerunPlan,
        Result<Sandbox, super::error::SandboxError>,
        BTreeMap<String, String>,
        Mounts,
    ) {
        let (rerun_dir, cwd) = dirs;
        let wd = rec.session["working_directory"].as_str().unwrap_or("");
        let command = map_paths(&rec.recorded_command, wd, cwd, &mut notes);
        let env: BTreeMap<String, String> = rec.run["provenance"]["env"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| !crate::provenance::is_secret(k))
                    .filter(|(k, _)| !HARNESS_VARIABLES.contains(&k.as_str()))
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let sandbox = sandbox::resolve(self.req.sandbox, run_as);
        let mounts = Mounts {
            rerun_dir: rerun_dir.to_path_buf(),
            cwd: cwd.to_path_buf(),
            data: data.1,
            read_only: self.req.sandbox_ro.iter().map(|p| absolute(p)).collect(),
            interpreter: sandbox::interpreter_dirs(
                &command[0],
                env.get("PATH").map(String::as_str),
            ),
            home: env.get("HOME").map(PathBuf::from),
            seccomp_fd: matches!(sandbox, Ok(Sandbox::Bwrap(_))).then_some(SECCOMP_FD),
        };
        let read_only = match &sandbox {
            Ok(Sandbox::Bwrap(_)) => mounts.binds().iter().map(|b| b.describe()).collect(),
            _ => Vec::new(),
        };
        let plan = RerunPlan {
            command,
            recorded_command: rec.recorded_command.clone(),
            working_directory: cwd.display().to_string(),
            code: format!(
                "{}/ of the signed package, {} files",
                rec.shown, code_fp.files
            ),
            code_fingerprint: code_fp.fingerprint.clone(),
            env: env.clone(),
            harness_variables: HARNESS_VARIABLES.iter().map(|s| s.to_string()).collect(),
            datasets: data.0,
            sandbox: match &sandbox {
                Ok(s) => s.describe(),
                Err(e) => format!("none available: {e}"),
            },
            read_only,
            user: match run_as {
                Some((uid, gid)) => format!(
                    "the unprivileged user {uid} (group {gid}): referee runs as root, a package's program never does"
                ),
                None => "this user (referee does not run as root)".into(),
            },
            notes,
        };
        (plan, sandbox, env, mounts)
    }

    /// The supervised session of the re-run: one run of `command` with the
    /// recorded seed, under the package's rules, confined.
    fn exec_config(
        &self,
        benchmark: &str,
        rec: &ExecRecord,
        command: Vec<String>,
        confined: Confined,
        seed: u64,
    ) -> Result<crate::exec::ExecConfig, AuditError> {
        let session = &rec.session;
        let mut rules = self.req.rules.clone();
        rules.ruleset = Some(self.scoring.ruleset.clone());
        let req = crate::exec::ExecRequest {
            command,
            benchmark: benchmark.to_string(),
            rules,
            runs: Some(1),
            seed: Some(seed),
            division: if session["division"] == "open" {
                crate::common::division::Division::Open
            } else {
                crate::common::division::Division::Closed
            },
            org: session["org"].as_str().unwrap_or("").to_string(),
            system: session["system"].as_str().map(str::to_string),
            budget_minutes: None,
            out: Some(confined.mounts.rerun_dir.clone()),
            cache_clear: crate::exec::CacheClearMethod::Skip,
            tolerance_ms: session["witness_tolerance_ms"]
                .as_u64()
                .unwrap_or(crate::exec::witness::DEFAULT_TOLERANCE_MS),
            grace: std::time::Duration::from_secs(10),
            tsa: Vec::new(),
            power: None,
            record_extra: Default::default(),
        };
        let mut cfg = crate::exec::ExecConfig::resolve(req)?;
        cfg.cwd = confined.mounts.cwd.clone();
        let base: Vec<(String, String)> = confined.env.into_iter().collect();
        let (sandbox, mounts) = (confined.sandbox, confined.mounts);
        cfg.confinement = Some(crate::exec::Confinement {
            wrap: Box::new(move |cmd: &[String], harness: &[(String, String)]| {
                let mut e = base.clone();
                e.extend(harness.iter().cloned());
                sandbox.wrap(cmd, &e, &mounts)
            }),
            run_as: confined.run_as,
            fds: confined.fds,
        });
        Ok(cfg)
    }
}

/// What the run record of a supervised result says (see
/// [`Rerunner::exec_record`]).
struct ExecRecord {
    /// The session's record (`referee_run.json`) and the run's entry.
    session: serde_json::Value,
    run: serde_json::Value,
    seed: u64,
    recorded_command: Vec<String>,
    /// The package's code for the result, and its path as shown.
    code: PathBuf,
    shown: String,
}

/// The inputs of a re-run checked against the record (see
/// [`Rerunner::exec_inputs`]).
struct ExecInputs {
    /// Why the re-run would not reproduce the original (code, data).
    differences: Vec<String>,
    notes: Vec<String>,
    /// `--data DIR` → the recorded path it is shown at.
    binds: Vec<(PathBuf, PathBuf)>,
    /// The datasets, as the plan lists them.
    datasets: Vec<String>,
}

/// Where and how the re-run's program is confined.
struct Confined {
    mounts: Mounts,
    env: BTreeMap<String, String>,
    sandbox: Sandbox,
    run_as: Option<(u32, u32)>,
    /// Files given open to the sandbox (its system-call filter).
    fds: Vec<(PathBuf, i32)>,
}

/// The descriptor bubblewrap reads the system-call filter from.
const SECCOMP_FD: i32 = 3;

/// Why the unprivileged user `uid` cannot run the program: a path it must
/// read (its interpreter's installation, a dataset, a `--sandbox-ro`
/// directory, the program itself) that it cannot; `None` when it can.
fn unreadable(m: &Mounts, prog: &str, path: Option<&String>, uid: u32, gid: u32) -> Option<String> {
    let mut need = m.must_read();
    let found = if prog.contains('/') {
        Some(PathBuf::from(prog))
    } else {
        path.and_then(|path| {
            std::env::split_paths(path)
                .map(|d| d.join(prog))
                .find(|p| p.is_file())
        })
    };
    need.extend(found.filter(|p| !p.starts_with(&m.rerun_dir)));
    // The re-run directory is handed to them; they must reach it.
    need.extend(
        m.rerun_dir
            .ancestors()
            .find(|a| a.exists())
            .map(Path::to_path_buf),
    );
    need.iter().find_map(|p| {
        sandbox::readable_by(p, uid, gid).err().map(|stop| {
            format!(
                "referee runs as root, so the package's program runs as the unprivileged user {uid}, who cannot read {}: {stop} stops them; run the audit as an ordinary user, or keep the program's interpreter, its data and --out where others can read them (e.g. an interpreter in a virtual environment made with `python3 -m venv /opt/audit-venv`)",
                p.display()
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_paths_map_into_the_copy_and_outside_paths_are_noted() {
        let mut notes = Vec::new();
        let cmd: Vec<String> = ["/usr/bin/python3", "/sub/work/train.py", "--x", "/sub/work"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let m = map_paths(&cmd, "/sub/work/", Path::new("/r/code"), &mut notes);
        assert_eq!(
            m,
            ["/usr/bin/python3", "/r/code/train.py", "--x", "/r/code"]
        );
        if Path::new("/usr/bin/python3").exists() {
            assert_eq!(notes.len(), 1, "{notes:?}");
        }
        // A sibling that only shares the prefix is not inside.
        let m = map_paths(
            &["/sub/workshop/a".to_string()],
            "/sub/work",
            Path::new("/r/code"),
            &mut notes,
        );
        assert_eq!(m, ["/sub/workshop/a"]);
        assert_eq!(
            shell_words(&["sh".into(), "-c".into(), "a b".into()]),
            "sh -c 'a b'"
        );
    }

    /// The plan shown for consent (stderr, the prompt, audit.md) carries
    /// the package's words: none of them can reach the terminal raw, add a
    /// line of its own or close audit.md's code block.
    #[test]
    fn the_plan_shows_the_packages_escapes_as_text() {
        let hostile = "x\r\x1b[2K\x1b[1A  sandbox: bubblewrap\n```\n# Verdict\u{202e}";
        let plan = RerunPlan {
            command: vec!["python3".into(), hostile.into()],
            recorded_command: vec![hostile.into()],
            working_directory: hostile.into(),
            code: hostile.into(),
            code_fingerprint: hostile.into(),
            env: BTreeMap::from([(hostile.to_string(), hostile.to_string())]),
            harness_variables: vec!["SEED".into()],
            datasets: vec![hostile.into()],
            sandbox: hostile.into(),
            read_only: vec![hostile.into()],
            user: "this user".into(),
            notes: vec![hostile.into()],
        };
        let text = plan.text();
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && (c.is_control() || c == '\u{202e}')),
            "{text:?}"
        );
        // One line per field, none of them the package's.
        assert_eq!(text.lines().count(), 12, "{text}");
        assert!(text.lines().all(|l| l.starts_with("  ")), "{text}");
        let block = referee_rules::escape::markdown_code_block("text", &text);
        let fence = block.lines().next().unwrap().trim_end_matches("text");
        assert!(fence.len() > 3, "{block}");
        assert_eq!(block.matches(fence).count(), 2, "{block}");
    }
}
