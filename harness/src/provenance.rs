//! Provenance written into every result log (as metadata the official
//! tools ignore): referee version, code identity (git commit of the build
//! plus a hash of any uncommitted diff, and the binary's own hash), the
//! resolved config's hash, dataset fingerprints, seeds, and a filtered
//! environment (no secrets).

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// `git rev-parse HEAD` when the binary was built ("unknown" outside git).
pub const GIT_COMMIT: &str = env!("REFEREE_GIT_COMMIT");
/// `git rev-parse --short HEAD` when the binary was built ("unknown" outside git).
pub const GIT_COMMIT_SHORT: &str = env!("REFEREE_GIT_COMMIT_SHORT");
/// The cargo features of referee-harness built in ("mpi, gpu", or "none").
pub const FEATURES: &str = env!("REFEREE_FEATURES");
/// `--version`: "0.1.0 (commit abc1234; features: none)".
pub const VERSION_LINE: &str = env!("REFEREE_VERSION_LINE");
/// sha256 of `git diff HEAD` at build time ("" when the tree was clean).
pub const GIT_DIFF_SHA256: &str = env!("REFEREE_GIT_DIFF_SHA256");

/// What code produced a result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CodeIdentity {
    pub referee_version: String,
    pub git_commit: String,
    /// Empty when the build tree had no uncommitted changes.
    pub uncommitted_diff_sha256: String,
    pub binary_sha256: String,
}

impl CodeIdentity {
    pub fn current() -> Self {
        CodeIdentity {
            referee_version: VERSION.to_string(),
            git_commit: GIT_COMMIT.to_string(),
            uncommitted_diff_sha256: GIT_DIFF_SHA256.to_string(),
            binary_sha256: binary_sha256(),
        }
    }

    /// Same source? (binary hashes may differ between machines and builds).
    pub fn same_source(&self, other: &CodeIdentity) -> bool {
        self.git_commit == other.git_commit
            && self.uncommitted_diff_sha256 == other.uncommitted_diff_sha256
    }
}

/// The running binary's sha256 (read once per process).
fn binary_sha256() -> String {
    BINARY_DIGEST
        .get_or_init(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| crate::fsutil::file_sha256(&p))
                .unwrap_or_default()
        })
        .clone()
}

static BINARY_DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Start computing referee's own digest on a thread of its own that
/// yields to the program being run, so that the provenance written at the
/// end of a run does not wait for it (the binary is tens of megabytes).
pub fn prepare_identity() {
    if BINARY_DIGEST.get().is_none() {
        std::thread::spawn(|| {
            crate::exec::process::yield_to_the_program(c"referee-prov");
            binary_sha256()
        });
    }
}

/// sha256 of a JSON value's canonical text (keys sorted, compact).
pub fn json_sha256(v: &serde_json::Value) -> String {
    fn canon(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let sorted: BTreeMap<&String, serde_json::Value> =
                    m.iter().map(|(k, x)| (k, canon(x))).collect();
                serde_json::Value::Object(sorted.into_iter().map(|(k, x)| (k.clone(), x)).collect())
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(canon).collect()),
            other => other.clone(),
        }
    }
    hex::encode(Sha256::digest(canon(v).to_string().as_bytes()))
}

/// Names whose values are never recorded.
pub fn is_secret(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD"]
        .iter()
        .any(|s| up.contains(s))
}

/// The environment without secrets, sorted.
pub fn filtered_env(vars: impl Iterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.filter(|(k, _)| !is_secret(k)).collect()
}

/// The git commit of `dir` and the sha256 of its uncommitted diff ("" when
/// clean), when `dir` is in a git checkout.
pub fn git_identity(dir: &std::path::Path) -> Option<(String, String)> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    let commit = String::from_utf8_lossy(&git(&["rev-parse", "HEAD"])?)
        .trim()
        .to_string();
    let diff = git(&["diff", "HEAD"]).unwrap_or_default();
    let diff_sha = if diff.is_empty() {
        String::new()
    } else {
        hex::encode(Sha256::digest(&diff))
    };
    Some((commit, diff_sha))
}

/// Variables through which container runtimes name the image a job runs in.
const CONTAINER_VARS: [&str; 6] = [
    "SINGULARITY_CONTAINER",
    "APPTAINER_CONTAINER",
    "SLURM_CONTAINER_IMAGE",
    "PYXIS_CONTAINER_IMAGE",
    "ENROOT_IMAGE",
    "CONTAINER_IMAGE",
];

/// The provenance of one run of an external program: what ran, where, in
/// which code and container, how it ended, and the sha256 of every file
/// written for it.
///
/// `git`: [`git_identity`] of `cwd`, taken once the program had started.
pub fn external(
    command: &[String],
    cwd: &std::path::Path,
    git: Option<(String, String)>,
    extra_env: &[(String, String)],
    exit: &str,
    seed: u64,
    files: &BTreeMap<String, String>,
) -> serde_json::Value {
    let env = filtered_env(std::env::vars().chain(extra_env.iter().cloned()));
    let container: BTreeMap<&str, &String> = CONTAINER_VARS
        .iter()
        .filter_map(|k| env.get(*k).map(|v| (*k, v)))
        .collect();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "command": command,
        "working_directory": cwd.display().to_string(),
        "git_commit": git.as_ref().map(|g| g.0.clone()),
        "uncommitted_diff_sha256": git.as_ref().map(|g| g.1.clone()),
        "container": container,
        "hostname": hostname,
        "nodes": env.get("SLURM_JOB_NODELIST"),
        "exit": exit,
        "seed": seed,
        "referee": CodeIdentity::current(),
        "env": env,
        "files_sha256": files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_dropped() {
        let vars = [
            ("PATH", "/bin"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("HF_TOKEN", "x"),
            ("db_password", "x"),
            ("SSH_AUTH_SOCK", "/tmp/s"),
            ("MY_API_KEY", "x"),
            ("OMP_NUM_THREADS", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = filtered_env(vars);
        assert_eq!(
            env.keys().collect::<Vec<_>>(),
            vec!["OMP_NUM_THREADS", "PATH", "SSH_AUTH_SOCK"]
        );
    }

    #[test]
    fn json_hash_ignores_key_order() {
        let a = serde_json::json!({"b": 1, "a": [1, {"y": 2, "x": 3}]});
        let b = serde_json::json!({"a": [1, {"x": 3, "y": 2}], "b": 1});
        assert_eq!(json_sha256(&a), json_sha256(&b));
        assert_ne!(json_sha256(&a), json_sha256(&serde_json::json!({"b": 2})));
    }

    #[test]
    fn code_identity_is_recorded() {
        let c = CodeIdentity::current();
        assert_eq!(c.referee_version, VERSION);
        assert!(!c.git_commit.is_empty());
        assert_eq!(c.binary_sha256.len(), 64);
    }
}
