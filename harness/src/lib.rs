//! referee's harness: the `referee` command-line tool.
//!
//! Raw command-line flags are parsed by clap into the structs of
//! [`cli`]; each command then resolves them, in one place, into a validated
//! configuration before any work starts.
//!
//! The folders: [`session`] (referee's own benchmarks: plan, runs, ranks),
//! [`exec`] (a program of the submitter's own run under supervision),
//! [`common`] (what both share: the clock, the MLLOG writer, the witness,
//! fingerprints), [`system`] (probe and describe the machine); [`check`]
//! checks many logs; [`cli`] parses, resolves and renders.

pub mod audit;
pub mod check;
pub mod cli;
pub mod common;
pub mod exec;
pub mod fsutil;
pub mod outcome;
pub mod outdir;
pub mod own_benchmarks;
pub mod packaging;
pub mod power;
pub mod provenance;
pub mod rules_env;
pub mod session;
pub mod signing;
pub mod slurm;
pub mod system;
pub mod tsa;

/// Every program that links the harness (the `referee` binary, its tests)
/// allocates, once the CPU engine has started, blocks of 1 KiB or more at
/// a 64-byte cache line, so that the engine's 64-byte vector loads of its
/// buffers never span two lines, and blocks of 2 MiB or more in
/// transparent huge pages; before, and in commands that never train, as
/// glibc does (see [`referee_workloads::cpu::aligned`]).
#[global_allocator]
static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
    referee_workloads::cpu::aligned::CacheLineAligned::new();

#[cfg(test)]
mod tests {
    /// The allocator above is the one in force: a buffer the size of an
    /// engine's activations starts at a line (glibc alone starts it 16
    /// bytes past a page).
    #[test]
    fn buffers_start_at_a_cache_line() {
        referee_workloads::cpu::aligned::engage();
        for len in [256usize, 4096, 1 << 20] {
            let v = vec![0f32; len];
            assert_eq!(v.as_ptr() as usize % 64, 0, "{len} floats");
            let mut w: Vec<f32> = Vec::new();
            w.resize(len, 1.0);
            assert_eq!(w.as_ptr() as usize % 64, 0, "{len} floats, grown");
        }
    }

    /// The `crate::NAME` paths that a line of code (not a comment) names.
    fn crate_paths(line: &str) -> Vec<&str> {
        let code = line.split("//").next().unwrap_or_default();
        code.match_indices("crate::")
            .map(|(i, m)| {
                let rest = &code[i + m.len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect()
    }

    /// Every `.rs` file under `dir`, with its path relative to `root`.
    fn sources(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).unwrap();
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }

    /// The walls that each folder's first paragraph states: what is shared
    /// (common/ and the modules below both ways of running training) knows
    /// neither way, the audit nor the command line; session and exec know
    /// neither each other nor what stands above them. An import running
    /// back up fails here, naming the file, the line and the module.
    #[test]
    fn no_module_imports_what_stands_above_it() {
        const ABOVE: &[&str] = &["audit", "check", "cli", "packaging", "slurm"];
        let below_runs = [ABOVE, &["exec", "session"]].concat();
        let forbidden = |file: &str| -> Option<Vec<&str>> {
            let lower = [
                "tsa/",
                "power/",
                "system/",
                "fsutil.rs",
                "outcome.rs",
                "outdir.rs",
                "own_benchmarks.rs",
                "provenance.rs",
                "rules_env.rs",
                "signing.rs",
            ];
            if file.starts_with("exec/") {
                Some([ABOVE, &["session"]].concat())
            } else if file.starts_with("session/") {
                Some([ABOVE, &["exec"]].concat())
            } else if lower.iter().any(|l| file.starts_with(l)) {
                Some(below_runs.clone())
            } else {
                None
            }
        };
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &root, &mut files);
        let mut found = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            for (n, line) in text.lines().enumerate() {
                for m in crate_paths(line) {
                    // common/ knows no other module of the crate at all.
                    let bad = if file.starts_with("common/") {
                        m != "common"
                    } else {
                        forbidden(file).is_some_and(|f| f.contains(&m))
                    };
                    if bad {
                        found.push(format!("{file}:{}: crate::{m}", n + 1));
                    }
                }
            }
        }
        assert!(files.len() > 50, "the sources were found: {files:?}");
        assert!(
            found.is_empty(),
            "imports running back up:\n{}",
            found.join("\n")
        );
    }
}
