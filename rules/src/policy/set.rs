//! Policy checks of one result set (the runs of one benchmark on one
//! system): one configuration across the runs ([`super::DISCLOSURE`]), the
//! config file each run names exists in the submitted implementation
//! ([`super::CONFIG_FILE`]), the number of runs ([`super::RUNS_PER_SET`])
//! unique seeds where the official seed checker did not run
//! ([`super::SEEDS`]), and the organisation each run names
//! ([`super::SUBMISSION_ORG`]).

use super::log::{DISCLOSURE_KEYS, Disclosed};
use super::{CONFIG_FILE, DISCLOSURE, RUNS_PER_SET, SEEDS, SUBMISSION_ORG};
use crate::diag::Diagnostic;
use crate::seeds::SeedRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The result set and where its implementation is.
pub struct SetContext<'a> {
    /// The result folder (`results/SYSTEM/BENCHMARK`).
    pub dir: &'a Path,
    /// Folders that hold the submitted implementation: the package's
    /// `benchmarks/BENCHMARK/implementations/*/`, or `--code`.
    pub code_dirs: Vec<PathBuf>,
    /// Runs a result set holds (0: unknown).
    pub required_runs: usize,
    /// Did the official seed checker judge these runs?
    pub official_seed_check: bool,
    /// The name of the organisation folder the set lies in.
    pub org_folder: Option<String>,
}

/// One run of the set.
pub struct SetRun<'a> {
    pub path: &'a Path,
    pub disclosed: &'a Disclosed,
    pub seeds: Option<&'a [SeedRecord]>,
}

/// The policy findings of one result set.
pub fn check_set(ctx: &SetContext, runs: &[SetRun]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    one_configuration(ctx, runs, &mut out);
    config_files(ctx, runs, &mut out);
    run_count(ctx, runs, &mut out);
    submission_org(ctx, runs, &mut out);
    if !ctx.official_seed_check {
        unique_seeds(ctx, runs, &mut out);
    }
    out
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| p.display().to_string())
}

/// Every disclosure key logged by any run has one value across the runs,
/// and is logged by all of them.
fn one_configuration(ctx: &SetContext, runs: &[SetRun], out: &mut Vec<Diagnostic>) {
    for key in DISCLOSURE_KEYS {
        let mut by_value: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut missing: Vec<String> = Vec::new();
        for r in runs {
            match r.disclosed.values.get(key) {
                Some((v, line)) => by_value
                    .entry(v.as_str())
                    .or_default()
                    .push(format!("{}:{line}", name(r.path))),
                None => missing.push(name(r.path)),
            }
        }
        if by_value.is_empty() {
            continue;
        }
        if by_value.len() > 1 {
            let found: Vec<String> = by_value
                .iter()
                .map(|(v, at)| format!("{v} in {}", at.join(", ")))
                .collect();
            out.push(
                DISCLOSURE
                    .finding(format!(
                        "`{key}` differs across the runs of one result set ({} values)",
                        by_value.len()
                    ))
                    .file(ctx.dir.display().to_string())
                    .key(key)
                    .expected("one value in every run")
                    .found(found.join("; ")),
            );
        }
        if !missing.is_empty() {
            out.push(
                DISCLOSURE
                    .finding(format!(
                        "`{key}` is logged by {} of {} runs",
                        runs.len() - missing.len(),
                        runs.len()
                    ))
                    .file(ctx.dir.display().to_string())
                    .key(key)
                    .expected("every run of the set logs it")
                    .found(format!("missing in {}", missing.join(", "))),
            );
        }
    }
}

/// Each `config_filename` names a file of the submitted implementation.
fn config_files(ctx: &SetContext, runs: &[SetRun], out: &mut Vec<Diagnostic>) {
    let mut named: BTreeMap<&str, Vec<(String, usize)>> = BTreeMap::new();
    for r in runs {
        if let Some((v, line)) = r.disclosed.values.get("config_filename") {
            named
                .entry(v.as_str())
                .or_default()
                .push((r.path.display().to_string(), *line));
        }
    }
    if named.is_empty() {
        return;
    }
    let files = FileIndex::of(&ctx.code_dirs);
    for (config, at) in named {
        if files.has(config) {
            continue;
        }
        let where_ = if ctx.code_dirs.is_empty() {
            "no implementation folder to look in (benchmarks/BENCHMARK/implementations/ or --code)"
                .to_string()
        } else {
            ctx.code_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (file, line) = &at[0];
        out.push(
            CONFIG_FILE
                .finding(format!(
                    "config_filename `{config}` (named by {} run{}) is not a file of the submitted implementation",
                    at.len(),
                    if at.len() == 1 { "" } else { "s" }
                ))
                .file(file.clone())
                .line(*line)
                .key("config_filename")
                .expected(format!("a file `{config}` in {where_}"))
                .found(format!("{} files looked at, none of that name", files.files)),
        );
    }
}

/// The files under the implementation folders, by relative path and by
/// name. Symbolic links are not followed (a package is untrusted input) and
/// the walk stops after 200,000 entries.
struct FileIndex {
    rel: std::collections::HashSet<String>,
    names: std::collections::HashSet<String>,
    files: usize,
}

impl FileIndex {
    fn of(dirs: &[PathBuf]) -> FileIndex {
        let mut ix = FileIndex {
            rel: Default::default(),
            names: Default::default(),
            files: 0,
        };
        let mut budget = 200_000usize;
        for root in dirs {
            let mut stack = vec![root.clone()];
            while let Some(d) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&d) else {
                    continue;
                };
                for e in rd.flatten() {
                    if budget == 0 {
                        return ix;
                    }
                    budget -= 1;
                    let Ok(ft) = e.file_type() else { continue };
                    let p = e.path();
                    if ft.is_dir() {
                        stack.push(p);
                    } else if ft.is_file() {
                        ix.files += 1;
                        ix.names.insert(e.file_name().to_string_lossy().to_string());
                        if let Ok(r) = p.strip_prefix(root) {
                            ix.rel.insert(r.to_string_lossy().to_string());
                        }
                    }
                }
            }
        }
        ix
    }

    /// Is `config` (a relative path, an absolute path from the submitter's
    /// machine, or a bare name) one of the files? A path matches by its
    /// trailing components, a bare name by name.
    fn has(&self, config: &str) -> bool {
        let parts: Vec<&str> = config
            .split(['/', '\\'])
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        let Some(last) = parts.last() else {
            return false;
        };
        if !self.names.contains(*last) {
            return false;
        }
        if parts.len() == 1 || config.starts_with('/') {
            // A bare name, or a path on the submitter's machine (e.g.
            // /workspace/code/configs/x.sh): the name is what can be found.
            return true;
        }
        // A relative path: a file at that path under an implementation
        // folder (or under one of its sub-folders).
        let joined = parts.join("/");
        self.rel
            .iter()
            .any(|r| *r == joined || r.ends_with(&format!("/{joined}")))
    }
}

/// The value mlperf-logging writes when the submitter set none: a log that
/// names no organisation names no other one.
const ORG_PLACEHOLDER: &str = "SUBMISSION_ORG_PLACEHOLDER";

/// Runs whose `submission_org` names another organisation than the folder
/// they lie in (letter case aside): one finding per set, naming them.
fn submission_org(ctx: &SetContext, runs: &[SetRun], out: &mut Vec<Diagnostic>) {
    let Some(folder) = ctx.org_folder.as_deref() else {
        return;
    };
    let mut others: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for r in runs {
        if let Some((org, line)) = &r.disclosed.org
            && org != ORG_PLACEHOLDER
            && !org.eq_ignore_ascii_case(folder)
        {
            others
                .entry(org.as_str())
                .or_default()
                .push(format!("{}:{line}", name(r.path)));
        }
    }
    if others.is_empty() {
        return;
    }
    let n: usize = others.values().map(Vec::len).sum();
    let found: Vec<String> = others
        .iter()
        .map(|(org, at)| format!("`{org}` in {}", at.join(", ")))
        .collect();
    out.push(
        SUBMISSION_ORG
            .finding(format!(
                "{n} of {} runs name another submitter than the folder `{folder}` in submission_org",
                runs.len()
            ))
            .file(ctx.dir.display().to_string())
            .key("submission_org")
            .expected(format!("`{folder}` (or no organisation set)"))
            .found(found.join("; ")),
    );
}

/// More runs than a result set holds leave the choice of the scored runs to
/// the submitter (the official checker accepts that under weak scaling).
fn run_count(ctx: &SetContext, runs: &[SetRun], out: &mut Vec<Diagnostic>) {
    if ctx.required_runs > 0 && runs.len() > ctx.required_runs {
        out.push(
            RUNS_PER_SET
                .finding(format!(
                    "{} runs where a result set is {}: which runs are scored is left to the submitter",
                    runs.len(),
                    ctx.required_runs
                ))
                .file(ctx.dir.display().to_string())
                .expected(format!("{} runs", ctx.required_runs))
                .found(runs.len().to_string()),
        );
    }
}

/// Seeds repeated across runs, where the official seed check did not run.
fn unique_seeds(ctx: &SetContext, runs: &[SetRun], out: &mut Vec<Diagnostic>) {
    let mut by_seed: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for r in runs {
        let Some(seeds) = r.seeds else { continue };
        let mut own: Vec<i64> = seeds.iter().map(|s| s.seed).collect();
        own.sort_unstable();
        own.dedup();
        for s in own {
            by_seed.entry(s).or_default().push(name(r.path));
        }
    }
    for (seed, at) in by_seed.into_iter().filter(|(_, at)| at.len() > 1) {
        out.push(
            SEEDS
                .finding(format!(
                    "seed {seed} is used by {} runs of one result set",
                    at.len()
                ))
                .file(ctx.dir.display().to_string())
                .key("seed")
                .expected("a different seed in every run")
                .found(at.join(", ")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disc(pairs: &[(&str, &str)]) -> Disclosed {
        Disclosed {
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), (v.to_string(), 7)))
                .collect(),
            org: None,
        }
    }

    #[test]
    fn a_run_naming_another_submitter_is_named() {
        let with_org = |o: &str| Disclosed {
            org: Some((o.to_string(), 3)),
            ..Disclosed::default()
        };
        let (own, placeholder, other, upper) = (
            with_org("Dell"),
            with_org(ORG_PLACEHOLDER),
            with_org("NVIDIA"),
            with_org("DELL"),
        );
        let paths: Vec<PathBuf> = (0..4)
            .map(|i| PathBuf::from(format!("/r/result_{i}.txt")))
            .collect();
        let runs: Vec<SetRun> = [&own, &placeholder, &other, &upper]
            .iter()
            .zip(&paths)
            .map(|(d, p)| SetRun {
                path: p,
                disclosed: d,
                seeds: None,
            })
            .collect();
        let dir = Path::new("/r");
        let mut c = ctx(dir, vec![]);
        c.org_folder = Some("Dell".into());
        let mut out = Vec::new();
        submission_org(&c, &runs, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].code, "policy[submission-org]");
        assert!(
            out[0].message.starts_with("1 of 4 runs"),
            "{}",
            out[0].message
        );
        assert_eq!(out[0].found.as_deref(), Some("`NVIDIA` in result_2.txt:3"));
        // Every run in its own folder: nothing.
        c.org_folder = Some("NVIDIA".into());
        let mut out = Vec::new();
        submission_org(&c, &runs[2..3], &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    fn ctx(dir: &Path, code: Vec<PathBuf>) -> SetContext<'_> {
        SetContext {
            dir,
            code_dirs: code,
            required_runs: 2,
            official_seed_check: true,
            org_folder: None,
        }
    }

    #[test]
    fn a_differing_or_missing_disclosure_value_is_named_with_its_runs() {
        let a = disc(&[("tensor_parallelism", "4"), ("micro_batch_size", "1")]);
        let b = disc(&[("tensor_parallelism", "8")]);
        let (pa, pb) = (Path::new("/r/result_0.txt"), Path::new("/r/result_1.txt"));
        let runs = [
            SetRun {
                path: pa,
                disclosed: &a,
                seeds: None,
            },
            SetRun {
                path: pb,
                disclosed: &b,
                seeds: None,
            },
        ];
        let f = check_set(&ctx(Path::new("/r"), vec![]), &runs);
        assert_eq!(f.len(), 2, "{f:#?}");
        assert_eq!(f[0].code, "policy[disclosure]");
        assert_eq!(f[0].key.as_deref(), Some("tensor_parallelism"));
        assert_eq!(
            f[0].found.as_deref(),
            Some("4 in result_0.txt:7; 8 in result_1.txt:7")
        );
        assert_eq!(f[1].key.as_deref(), Some("micro_batch_size"));
        assert_eq!(f[1].found.as_deref(), Some("missing in result_1.txt"));
        // One configuration: silent.
        let runs = [
            SetRun {
                path: pa,
                disclosed: &a,
                seeds: None,
            },
            SetRun {
                path: pb,
                disclosed: &a,
                seeds: None,
            },
        ];
        assert!(check_set(&ctx(Path::new("/r"), vec![]), &runs).is_empty());
    }

    #[test]
    fn a_config_file_is_found_by_relative_path_or_name_and_its_absence_named() {
        let t = tempfile::tempdir().unwrap();
        let imp = t.path().join("implementations/nemo");
        std::fs::create_dir_all(imp.join("configs")).unwrap();
        std::fs::write(imp.join("configs/config_8x.sh"), "x").unwrap();
        let ix = FileIndex::of(std::slice::from_ref(&imp.parent().unwrap().to_path_buf()));
        assert!(ix.has("config_8x.sh"));
        assert!(ix.has("configs/config_8x.sh"));
        assert!(ix.has("nemo/configs/config_8x.sh"));
        assert!(ix.has("/workspace/code/configs/config_8x.sh"));
        assert!(!ix.has("other/config_8x.sh"));
        assert!(!ix.has("config_16x.sh"));
        assert!(!ix.has(""));

        let good = disc(&[("config_filename", "config_8x.sh")]);
        let bad = disc(&[("config_filename", "config_16x.sh")]);
        let p = Path::new("/r/result_0.txt");
        let dir = Path::new("/r");
        let c = || ctx(dir, vec![imp.clone()]);
        assert!(
            check_set(
                &c(),
                &[SetRun {
                    path: p,
                    disclosed: &good,
                    seeds: None
                }]
            )
            .is_empty()
        );
        let f = check_set(
            &c(),
            &[SetRun {
                path: p,
                disclosed: &bad,
                seeds: None,
            }],
        );
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].code, "policy[config-file]");
        assert_eq!(f[0].line, Some(7));
        assert!(f[0].message.contains("`config_16x.sh`"), "{}", f[0].message);
    }

    #[test]
    fn more_runs_than_a_set_holds_and_repeated_seeds_are_named() {
        let d = Disclosed::default();
        let seed = |s: i64| SeedRecord {
            file: "x".into(),
            lineno: "1".into(),
            seed: s,
            line: 1,
        };
        let (s1, s2) = ([seed(5)], [seed(5)]);
        let paths = [
            Path::new("/r/result_0.txt"),
            Path::new("/r/result_1.txt"),
            Path::new("/r/result_2.txt"),
        ];
        let runs: Vec<SetRun> = paths
            .iter()
            .zip([Some(&s1[..]), Some(&s2[..]), None])
            .map(|(p, s)| SetRun {
                path: p,
                disclosed: &d,
                seeds: s,
            })
            .collect();
        let mut c = ctx(Path::new("/r"), vec![]);
        let f = check_set(&c, &runs);
        assert_eq!(
            f.iter().map(|x| x.code).collect::<Vec<_>>(),
            ["policy[runs-per-set]"]
        );
        c.official_seed_check = false;
        let f = check_set(&c, &runs);
        assert_eq!(f.len(), 2);
        assert_eq!(f[1].code, "policy[seeds]");
        assert_eq!(f[1].found.as_deref(), Some("result_0.txt, result_1.txt"));
    }
}
