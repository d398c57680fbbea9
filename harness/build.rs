//! Records the code identity of the build: the git commit and a hash of any
//! uncommitted diff of the workspace sources, and the cargo features built
//! (for `referee --version`). Outside a git checkout (a source tarball, a
//! crate download) the commit is "unknown".

use sha2::{Digest, Sha256};
use std::process::Command;

fn git(args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .args(args)
        .current_dir("..")
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"])
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let diff = git(&[
        "diff",
        "HEAD",
        "--binary",
        "--",
        "Cargo.toml",
        "Cargo.lock",
        "harness",
        "workloads",
        "datasets",
        "rules",
        "submission",
    ])
    .unwrap_or_default();
    let diff_hash = if diff.is_empty() {
        String::new()
    } else {
        hex::encode(Sha256::digest(&diff))
    };
    let short = git(&["rev-parse", "--short", "HEAD"])
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    // Cargo sets CARGO_FEATURE_<NAME> for each feature of this package built.
    let features: Vec<&str> = ["mpi", "gpu", "cuda", "graph"]
        .into_iter()
        .filter(|f| std::env::var_os(format!("CARGO_FEATURE_{}", f.to_uppercase())).is_some())
        .collect();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(", ")
    };
    println!("cargo:rustc-env=REFEREE_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=REFEREE_GIT_COMMIT_SHORT={short}");
    println!("cargo:rustc-env=REFEREE_GIT_DIFF_SHA256={diff_hash}");
    println!("cargo:rustc-env=REFEREE_FEATURES={features}");
    // What `referee --version` prints after the version number.
    let modified = if diff_hash.is_empty() {
        ""
    } else {
        " with uncommitted changes"
    };
    println!(
        "cargo:rustc-env=REFEREE_VERSION_LINE={} (commit {short}{modified}; features: {features})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
    // The files that move when HEAD moves. In a linked worktree `.git` is a
    // file and HEAD lives under the main repository's `.git/worktrees/`, so
    // ask git where they are; a new commit on the checked-out branch moves
    // the branch's ref file (or packed-refs).
    let git_path = |p: &str| {
        git(&["rev-parse", "--path-format=absolute", "--git-path", p])
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let mut watch: Vec<String> = Vec::new();
    if let Some(head) = git_path("HEAD") {
        watch.push(head);
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let r = String::from_utf8_lossy(&r).trim().to_string();
            watch.extend(git_path(&r));
        }
        watch.extend(git_path("packed-refs"));
        watch.extend(git_path("index"));
    }
    for p in &watch {
        // A path that does not exist (an unpacked ref, no packed-refs)
        // would make cargo rerun this script on every build.
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    for p in [
        "../Cargo.toml",
        "../harness/src",
        "../workloads/src",
        "../datasets/src",
        "../rules/src",
        "../submission/src",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
}
