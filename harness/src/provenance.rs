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
            crate::common::harness_process::yield_to_the_program(c"referee-prov");
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

/// How long one query of the software stack may take (a `pip list` of a
/// large environment on a network file system takes seconds).
const STACK_QUERY_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The standard output of `program args…` when it exits 0 within `limit`
/// (killed otherwise); `None` when it cannot be run, fails or takes longer.
fn output_within(program: &str, args: &[&str], limit: std::time::Duration) -> Option<String> {
    use std::io::Read;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).ok().map(|_| s)
    });
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = reader.join().ok().flatten();
    status.filter(|s| s.success()).and(out)
}

/// The Python interpreter the program runs under: its first word when that
/// is a Python (`python3 train.py`), the interpreter of a script's `#!`
/// line (`torchrun …`, `./train.py`), else `python3` from `PATH`.
pub fn program_python(command: &[String]) -> Option<String> {
    let first = command.first()?;
    let is_python = |p: &str| {
        std::path::Path::new(p)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("python"))
    };
    if is_python(first) {
        return Some(first.clone());
    }
    let script = if first.contains('/') {
        Some(std::path::PathBuf::from(first))
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(first))
                .find(|p| p.is_file())
        })
    };
    if let Some(line) = script
        .and_then(|p| std::fs::File::open(p).ok())
        .and_then(|f| {
            use std::io::BufRead;
            let mut l = String::new();
            std::io::BufReader::new(f).read_line(&mut l).ok().map(|_| l)
        })
        && let Some(shebang) = line.strip_prefix("#!")
    {
        let mut words = shebang.split_whitespace();
        let interp = words.next().unwrap_or_default();
        // `#!/usr/bin/env python3`
        let interp = if interp.ends_with("/env") {
            words.find(|w| !w.starts_with('-')).unwrap_or_default()
        } else {
            interp
        };
        if is_python(interp) {
            return Some(interp.to_string());
        }
    }
    Some("python3".into())
}

/// `pip list --format=json` → name → version.
pub fn parse_pip_list(json: &str) -> Option<BTreeMap<String, String>> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    Some(
        v.as_array()?
            .iter()
            .filter_map(|p| {
                Some((
                    p["name"].as_str()?.to_string(),
                    p["version"].as_str()?.to_string(),
                ))
            })
            .collect(),
    )
}

/// `CUDA Version: 12.8` in `nvidia-smi`'s banner → `12.8`.
pub fn parse_cuda_version(smi: &str) -> Option<String> {
    let rest = &smi[smi.find("CUDA Version:")? + "CUDA Version:".len()..];
    rest.split_whitespace()
        .next()
        .map(|v| v.trim_end_matches('|').to_string())
        .filter(|v| !v.is_empty())
}

/// The software the program runs on, as far as it can be asked without
/// running the program's code: the Python packages of its interpreter
/// (`PYTHON -I -m pip list`), conda's packages in a conda environment
/// (`$CONDA_EXE list --json`), the NVIDIA driver and the CUDA version it
/// supports (`nvidia-smi`). Each part is left out when it cannot be read
/// within a minute. Run once per session, alongside the first run.
pub fn software_stack(command: &[String]) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if let Some(py) = program_python(command) {
        out.insert("python".into(), py.clone().into());
        if let Some(pk) = output_within(
            &py,
            &[
                // Isolated: nothing of the current directory or PYTHON*
                // variables is imported.
                "-I",
                "-m",
                "pip",
                "list",
                "--format=json",
                "--disable-pip-version-check",
            ],
            STACK_QUERY_LIMIT,
        )
        .as_deref()
        .and_then(parse_pip_list)
        {
            out.insert("python_packages".into(), serde_json::json!(pk));
        }
    }
    if let (Ok(conda), Ok(prefix)) = (std::env::var("CONDA_EXE"), std::env::var("CONDA_PREFIX"))
        && let Some(pk) = output_within(
            &conda,
            &["list", "--json", "-p", &prefix],
            STACK_QUERY_LIMIT,
        )
        .as_deref()
        .and_then(parse_pip_list)
    {
        out.insert("conda_packages".into(), serde_json::json!(pk));
    }
    if let Some(d) = output_within(
        "nvidia-smi",
        &["--query-gpu=driver_version", "--format=csv,noheader"],
        STACK_QUERY_LIMIT,
    )
    .and_then(|o| o.lines().next().map(|l| l.trim().to_string()))
    .filter(|d| !d.is_empty())
    {
        out.insert("nvidia_driver".into(), d.into());
        if let Some(c) = output_within("nvidia-smi", &[], STACK_QUERY_LIMIT)
            .as_deref()
            .and_then(parse_cuda_version)
        {
            out.insert("cuda_driver_version".into(), c.into());
        }
    }
    serde_json::Value::Object(out)
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
    fn the_programs_python_and_its_packages_are_read() {
        let c = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            program_python(&c(&["/opt/venv/bin/python3.12", "train.py"])).as_deref(),
            Some("/opt/venv/bin/python3.12")
        );
        let t = tempfile::tempdir().unwrap();
        let script = t.path().join("torchrun");
        std::fs::write(&script, "#!/opt/conda/bin/python\nimport sys\n").unwrap();
        assert_eq!(
            program_python(&c(&[script.to_str().unwrap(), "x"])).as_deref(),
            Some("/opt/conda/bin/python")
        );
        std::fs::write(&script, "#!/usr/bin/env -S python3 -u\n").unwrap();
        assert_eq!(
            program_python(&c(&[script.to_str().unwrap()])).as_deref(),
            Some("python3")
        );
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(
            program_python(&c(&[script.to_str().unwrap()])).as_deref(),
            Some("python3")
        );
        let pk = parse_pip_list(r#"[{"name": "torch", "version": "2.9.0"}, {"name": "nvidia-nccl-cu12", "version": "2.27.3"}]"#).unwrap();
        assert_eq!(pk["torch"], "2.9.0");
        assert_eq!(pk["nvidia-nccl-cu12"], "2.27.3");
        assert_eq!(
            parse_cuda_version(
                "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0     |"
            )
            .as_deref(),
            Some("13.0")
        );
        assert_eq!(parse_cuda_version("no banner"), None);
        // A command that outlives its limit gives nothing (and is killed).
        let t0 = std::time::Instant::now();
        assert_eq!(
            output_within("sleep", &["5"], std::time::Duration::from_millis(200)),
            None
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(4));
        assert_eq!(
            output_within("echo", &["hi"], STACK_QUERY_LIMIT).as_deref(),
            Some("hi\n")
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
