//! The sandbox an audit's re-run of a stranger's program runs in:
//! bubblewrap (`bwrap`, Debian package `bubblewrap`), never a home-made
//! one.
//!
//! Inside it the program sees the system read-only (`--ro-bind / /`) with
//! the auditor's home directory (and `/root`) hidden behind empty tmpfs
//! mounts, a private `/tmp`, its own `/dev` and `/proc`, and can write only
//! the re-run directory. It has no network (`--unshare-net`: only its own
//! loopback, so a port the auditor's machine listens on is out of reach),
//! its own pid, IPC and UTS namespaces, a new session (no terminal to
//! inject into), no capabilities, and dies with referee
//! (`--die-with-parent`). Its environment is exactly the one the audit
//! chose (`--clearenv`, then `--setenv` for each variable): the recorded
//! one, minus secrets, plus the harness's variables — never the auditor's.
//!
//! `--sandbox none` runs the program unsandboxed (still with that
//! environment only, through `env -i`); the report says so.

use super::error::SandboxError;
use std::path::{Path, PathBuf};

/// The program's command line as started, from its command and its
/// environment (the hook of crate::exec::ExecConfig).
pub type Wrap = Box<dyn Fn(&[String], &[(String, String)]) -> Vec<String> + Send + Sync>;

/// How the re-run is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// bubblewrap, at this path.
    Bwrap(PathBuf),
    /// No sandbox (`--sandbox none`): the program runs as the auditor.
    None,
}

/// What the auditor asked for (`--sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxChoice {
    #[default]
    Bwrap,
    None,
}

/// How to install bubblewrap, for messages.
pub const INSTALL_HINT: &str = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`; or scripts/install-ci-deps.sh), or give --sandbox none to re-run without a sandbox (the program then runs with your user's rights)";

/// The sandbox to use, or why there is none (the re-run is then not done).
pub fn resolve(choice: SandboxChoice) -> Result<Sandbox, SandboxError> {
    match choice {
        SandboxChoice::None => Ok(Sandbox::None),
        SandboxChoice::Bwrap => {
            let bwrap =
                find_in_path("bwrap").ok_or(SandboxError::NotInstalled { hint: INSTALL_HINT })?;
            probe(&bwrap)?;
            Ok(Sandbox::Bwrap(bwrap))
        }
    }
}

/// `name` found on `$PATH`.
fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// bubblewrap can create the namespaces the re-run needs here (a container
/// or a kernel may forbid them).
fn probe(bwrap: &Path) -> Result<(), SandboxError> {
    let o = std::process::Command::new(bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "true",
        ])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| SandboxError::CannotStart {
            bwrap: bwrap.to_path_buf(),
            message: e.to_string(),
        })?;
    if o.status.success() {
        return Ok(());
    }
    Err(SandboxError::NoNamespaces {
        status: o.status.to_string(),
        stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
    })
}

/// What the sandbox must expose.
#[derive(Debug, Clone, Default)]
pub struct Mounts {
    /// The only writable directory.
    pub rerun_dir: PathBuf,
    /// The program's working directory (inside `rerun_dir`).
    pub cwd: PathBuf,
    /// Datasets, read-only: (directory on this machine, path the program
    /// reads it at).
    pub data: Vec<(PathBuf, PathBuf)>,
    /// Further directories the auditor allows read-only (`--sandbox-ro`),
    /// e.g. a Python environment under the hidden home directory.
    pub read_only: Vec<PathBuf>,
}

impl Sandbox {
    /// One line for the report.
    pub fn describe(&self) -> String {
        match self {
            Sandbox::Bwrap(p) => format!(
                "bubblewrap ({}): system read-only, home hidden, writable only the re-run directory, private /tmp, no network, own pid namespace, dies with referee, environment cleared",
                p.display()
            ),
            Sandbox::None => "NONE (--sandbox none): the program ran unsandboxed, with this user's rights, files and network; only its environment was cleared".to_string(),
        }
    }

    /// The command line that runs `command` confined, with exactly `env`.
    pub fn wrap(&self, command: &[String], env: &[(String, String)], m: &Mounts) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        fn push(a: &mut Vec<String>, xs: &[&str]) {
            a.extend(xs.iter().map(|s| s.to_string()));
        }
        match self {
            Sandbox::None => {
                push(&mut a, &["env", "-i"]);
                for (k, v) in env {
                    a.push(format!("{k}={v}"));
                }
            }
            Sandbox::Bwrap(bwrap) => {
                a.push(bwrap.display().to_string());
                push(
                    &mut a,
                    &[
                        "--ro-bind",
                        "/",
                        "/",
                        "--dev",
                        "/dev",
                        "--proc",
                        "/proc",
                        "--tmpfs",
                        "/tmp",
                    ],
                );
                for hidden in hidden_dirs() {
                    a.extend(["--tmpfs".into(), hidden.display().to_string()]);
                }
                for ro in &m.read_only {
                    let p = ro.display().to_string();
                    a.extend(["--ro-bind".into(), p.clone(), p]);
                }
                for (src, dst) in &m.data {
                    a.extend([
                        "--ro-bind".into(),
                        src.display().to_string(),
                        dst.display().to_string(),
                    ]);
                }
                let rw = m.rerun_dir.display().to_string();
                a.extend(["--bind".into(), rw.clone(), rw]);
                push(
                    &mut a,
                    &[
                        "--unshare-net",
                        "--unshare-pid",
                        "--unshare-ipc",
                        "--unshare-uts",
                        "--unshare-cgroup-try",
                        "--die-with-parent",
                        "--new-session",
                        "--cap-drop",
                        "ALL",
                        "--clearenv",
                    ],
                );
                for (k, v) in env {
                    a.extend(["--setenv".into(), k.clone(), v.clone()]);
                }
                a.extend(["--chdir".into(), m.cwd.display().to_string(), "--".into()]);
            }
        }
        a.extend(command.iter().cloned());
        a
    }
}

/// The auditor's home directory and `/root`: hidden inside the sandbox.
pub fn hidden_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    for d in [
        std::env::var_os("HOME").map(PathBuf::from),
        Some(PathBuf::from("/root")),
    ]
    .into_iter()
    .flatten()
    {
        if d.is_absolute() && d != Path::new("/") && d.is_dir() && !v.contains(&d) {
            v.push(d);
        }
    }
    v
}

/// Where the program `prog` (resolved on `path` when it has no `/`) really
/// lives, when that is inside a directory the sandbox hides and not in one
/// of `read_only`: a note saying which `--sandbox-ro` shows it.
pub fn hidden_program(prog: &str, path: Option<&str>, read_only: &[PathBuf]) -> Option<String> {
    let found = if prog.contains('/') {
        PathBuf::from(prog)
    } else {
        std::env::split_paths(path?)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())?
    };
    let real = std::fs::canonicalize(&found).ok()?;
    let hidden = hidden_dirs().into_iter().find(|h| real.starts_with(h))?;
    if read_only.iter().any(|r| real.starts_with(r)) {
        return None;
    }
    // An interpreter's installation: two levels above its binary.
    let prefix = real
        .parent()
        .and_then(Path::parent)
        .filter(|p| p.starts_with(&hidden))
        .unwrap_or(&hidden);
    Some(format!(
        "the program {prog} is {}, inside {} which the sandbox hides: give --sandbox-ro {} to show it read-only",
        real.display(),
        hidden.display(),
        prefix.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bwrap_confines_and_clears_the_environment() {
        let m = Mounts {
            rerun_dir: "/a/rerun".into(),
            cwd: "/a/rerun/code".into(),
            data: vec![("/d/here".into(), "/d/recorded".into())],
            read_only: vec![],
        };
        let env = vec![("SEED".to_string(), "7".to_string())];
        let cmd = vec!["python3".to_string(), "train.py".to_string()];
        let w = Sandbox::Bwrap("/usr/bin/bwrap".into()).wrap(&cmd, &env, &m);
        let line = w.join(" ");
        for want in [
            "--ro-bind / /",
            "--tmpfs /tmp",
            "--bind /a/rerun /a/rerun",
            "--ro-bind /d/here /d/recorded",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "--clearenv --setenv SEED 7",
            "--chdir /a/rerun/code -- python3 train.py",
        ] {
            assert!(line.contains(want), "{want} not in {line}");
        }
        // The writable bind comes after every read-only one (a later mount
        // wins).
        let rw = w.iter().position(|x| x == "--bind").unwrap();
        assert!(w.iter().rposition(|x| x == "--ro-bind").unwrap() < rw);
        let n = Sandbox::None.wrap(&cmd, &env, &m);
        assert_eq!(n, ["env", "-i", "SEED=7", "python3", "train.py"]);
    }
}
