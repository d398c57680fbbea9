//! Records the code identity of the build: the git commit and a hash of any
//! uncommitted diff of the workspace sources.

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
    println!("cargo:rustc-env=REFEREE_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=REFEREE_GIT_DIFF_SHA256={diff_hash}");
    // The git files that change with the commit or the index. In a linked
    // worktree `.git` is a file: HEAD and index live in the worktree's git
    // dir, refs in the common one. Only existing paths are named (cargo
    // reruns a build script on every build when a named path is missing).
    let dir = |arg: &str| {
        git(&["rev-parse", arg])
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
            .filter(|s| !s.is_empty())
            .map(|d| std::path::Path::new("..").join(d))
    };
    let mut watched: Vec<std::path::PathBuf> = Vec::new();
    if let Some(g) = dir("--git-dir") {
        watched.extend([g.join("HEAD"), g.join("index")]);
    }
    if let Some(c) = dir("--git-common-dir") {
        watched.extend([c.join("refs/heads"), c.join("packed-refs")]);
    }
    for p in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
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
