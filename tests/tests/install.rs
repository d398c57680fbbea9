//! The conventions of an installed command-line tool: shell completions and
//! manual pages that cover every command, `--version` naming the commit and
//! features built, and the official rules found beside an installed binary
//! (`pip install referee-mlperf` puts `PREFIX/bin/referee` and its pinned
//! mlperf-logging in `PREFIX/lib/pythonX.Y/site-packages`).

use clap::CommandFactory;
use referee_harness::cli::Cli;
use referee_tests::{corpus_dir, mlperf_logging, referee, referee_bin, repo_root, stderr, stdout};
use std::process::Command;

/// Every (visible) sub-command of `referee`, from the clap definition.
fn subcommands() -> Vec<String> {
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    assert!(names.len() > 15, "{names:?}");
    names
}

#[test]
fn bash_completions_name_every_subcommand() {
    let o = referee(&["completions", "bash"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("complete -F"), "not a bash completion script");
    for name in subcommands() {
        // The bash script lists the words completed after `referee`.
        assert!(
            text.split_whitespace().any(|w| w == name),
            "bash completions lack the sub-command {name}"
        );
    }
    // The other shells clap_complete knows, and a clear error otherwise.
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = referee(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains("package-check"), "{shell}");
    }
    let o = referee(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bash"), "{}", stderr(&o));
}

#[test]
fn man_page_is_roff_naming_every_subcommand() {
    let o = referee(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with(".ie") || text.starts_with(".TH"),
        "not roff"
    );
    assert!(text.contains(".TH referee 1"), "{}", &text[..200]);
    assert!(text.contains(".SH SUBCOMMANDS"));
    for name in subcommands() {
        // Each is a roff item of the SUBCOMMANDS section: `referee\-NAME(1)`
        // (roff escapes the hyphen).
        let item = format!("referee\\-{}(1)", name.replace('-', "\\-"));
        assert!(text.contains(&item), "the man page lacks {item}");
    }

    // --out: one page per command, with the sub-command's own options.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let o = referee(&["man", "--out", out.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let pages = listed["pages"].as_array().unwrap();
    assert!(out.join("referee.1").is_file());
    for name in subcommands() {
        let page = out.join(format!("referee-{name}.1"));
        assert!(page.is_file(), "no page {}", page.display());
        assert!(
            pages.iter().any(|p| p.as_str() == page.to_str()),
            "{page:?} not listed"
        );
    }
    let check = std::fs::read_to_string(out.join("referee-check.1")).unwrap();
    assert!(check.contains("\\-\\-rules\\-dir"), "check's options");
}

#[test]
fn version_names_the_commit_and_features() {
    let o = referee(&["--version"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let line = stdout(&o);
    assert!(
        line.starts_with(&format!("referee {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    assert!(line.contains("; features: "), "{line}");
    // The test binary and referee were built from the same tree.
    let features = line.split("features: ").nth(1).unwrap().trim_end();
    assert_eq!(
        features, "none)",
        "a default build has no optional features"
    );
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|r| r.split([' ', ';']).next())
        .unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(repo_root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(head) => {
            let short = git(&["rev-parse", "--short", "HEAD"]).unwrap();
            assert!(
                commit.len() >= 7 && head.starts_with(commit),
                "--version says commit {commit}, the tree is at {short}"
            );
            assert_eq!(commit, short);
        }
        // Not a git checkout (a source tarball): the build says so.
        None => assert_eq!(commit, "unknown"),
    }
    // Sub-commands print the same.
    let o = referee(&["check", "--version"]);
    assert_eq!(stdout(&o), line.replacen("referee ", "referee-check ", 1));
}

/// `PREFIX/bin/referee` with mlperf-logging in `PREFIX/lib/python3.X/site-packages`
/// (what a wheel installs) finds the rules with no environment: no venv
/// activated, no python on PATH, a working directory without `.venv`.
#[test]
fn installed_binary_finds_rules_of_its_own_prefix() {
    let pkg = mlperf_logging();
    let prefix = tempfile::tempdir().unwrap();
    let bin = prefix.path().join("bin");
    let site = prefix.path().join("lib/python3.12/site-packages");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&site).unwrap();
    std::fs::copy(referee_bin(), bin.join("referee")).unwrap();
    std::os::unix::fs::symlink(&pkg.dir, site.join("mlperf_logging")).unwrap();
    let log = corpus_dir().join(
        "training_results_v5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_0.txt",
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let run = |exe: &std::path::Path| {
        Command::new(exe)
            .args([
                "check",
                "--ruleset",
                "5.0.0",
                log.to_str().unwrap(),
                "--json",
            ])
            .current_dir(elsewhere.path())
            .env_clear()
            .env("PATH", "/nonexistent")
            .output()
            .unwrap()
    };
    let o = run(&bin.join("referee"));
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    // Without the package in its prefix the same binary cannot find rules
    // (so the pass above came from the prefix).
    std::fs::remove_file(site.join("mlperf_logging")).unwrap();
    let o = run(&bin.join("referee"));
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("could not find the official MLPerf rule files"));
    assert!(
        stderr(&o).contains(prefix.path().to_str().unwrap()),
        "{}",
        stderr(&o)
    );
}
