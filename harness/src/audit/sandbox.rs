//! The sandbox an audit's re-run of a stranger's program runs in:
//! bubblewrap (`bwrap`, Debian package `bubblewrap`), never a home-made
//! one, granting by allow-list.
//!
//! The program starts in an empty root. It sees read-only only what it
//! needs ([`Mounts::binds`]): the system's programs and libraries (`/usr`
//! and the `/bin`, `/lib*` links into it), a short list of `/etc` entries
//! the dynamic loader, Python and TLS read ([`ETC_ALLOWED`]), the
//! installation of its own interpreter as its command names it
//! ([`interpreter_dirs`]), the datasets given with `--data` and the
//! directories given with `--sandbox-ro`; it writes only its re-run
//! directory, a private `/tmp` and an empty home. Nothing of `/run`,
//! `/home`, `/root`, `/sys`, `/var` or the rest of `/etc` is there, so no
//! host socket (ssh-agent, D-Bus, Docker) can be reached; the network,
//! IPC, pid, UTS and cgroup namespaces are its own, and so is its user
//! namespace, in which it cannot create another (`--disable-userns`). It
//! has no capabilities, a new session (no terminal to inject into), a
//! system-call filter that refuses the calls a training program has no use
//! for and kernel exploits feed on ([`DENIED_CALLS`], `--seccomp`), and
//! dies with referee. Its environment is exactly the one the audit chose
//! (`--clearenv`, then `--setenv` for each variable).
//!
//! An auditor who is root never runs a package's program as root: the
//! program (bubblewrap with it) runs as the unprivileged user `nobody`
//! ([`unprivileged_user`]), every path it must read is checked to be
//! readable by that user first ([`readable_by`]), and its re-run
//! directory is handed to it.
//!
//! `--sandbox none` runs the program unsandboxed: its environment is still
//! exactly the audit's (cleared by referee, no `env(1)`), and as root it
//! still runs as `nobody`; the report says so.
//!
//! This module must not know how a run is supervised ([`crate::exec`]
//! starts what [`Sandbox::wrap`] returns).

use super::error::SandboxError;
use std::path::{Path, PathBuf};

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

/// The user and group a package's program runs as when referee runs as
/// root (`nobody`/`nogroup` on Debian, Fedora and most others).
pub const UNPRIVILEGED: (u32, u32) = (65534, 65534);

/// The user and group a package's program must run as: [`UNPRIVILEGED`]
/// when this process is root, else none (it runs as the auditor).
pub fn unprivileged_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid(2) has no failure mode.
    (unsafe { libc::geteuid() } == 0).then_some(UNPRIVILEGED)
}

/// The sandbox to use, or why there is none (the re-run is then not
/// done). `run_as`: the user bubblewrap must work as.
pub fn resolve(choice: SandboxChoice, run_as: Option<(u32, u32)>) -> Result<Sandbox, SandboxError> {
    match choice {
        SandboxChoice::None => Ok(Sandbox::None),
        SandboxChoice::Bwrap => {
            let bwrap =
                find_in_path("bwrap").ok_or(SandboxError::NotInstalled { hint: INSTALL_HINT })?;
            probe(&bwrap, run_as)?;
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

/// The namespaces and confinement every sandbox asks bubblewrap for.
const CONFINE: [&str; 12] = [
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--clearenv",
];

/// bubblewrap can create the namespaces the re-run needs here, as the
/// user it will run as (a container, a kernel or an AppArmor profile may
/// forbid them).
fn probe(bwrap: &Path, run_as: Option<(u32, u32)>) -> Result<(), SandboxError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(bwrap);
    cmd.args(system_binds().iter().flat_map(|b| b.args()))
        .args(["--proc", "/proc", "--dev", "/dev"])
        .args(CONFINE)
        .args(["--", "/usr/bin/true"])
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null());
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid);
    }
    let o = cmd.output().map_err(|e| SandboxError::CannotStart {
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

/// The entries of `/etc` the sandbox shows: what the dynamic loader,
/// Python (Debian's `/etc/python3*`), name lookups of local users and TLS
/// read. Never `shadow`, `ssh/`, `sudoers` or credentials of services.
pub const ETC_ALLOWED: [&str; 17] = [
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "mime.types",
    "os-release",
    "debian_version",
];

/// The top-level system directories, bound read-only where they are
/// directories and recreated where they are links into `/usr`.
const SYSTEM_DIRS: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// One thing the sandbox shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// Read-only: (here, where the program sees it, why).
    ReadOnly(PathBuf, PathBuf, &'static str),
    /// A link (target, path).
    Link(PathBuf, PathBuf),
}

impl Bind {
    fn args(&self) -> Vec<String> {
        match self {
            Bind::ReadOnly(src, dst, _) => vec![
                "--ro-bind".into(),
                src.display().to_string(),
                dst.display().to_string(),
            ],
            Bind::Link(target, path) => vec![
                "--symlink".into(),
                target.display().to_string(),
                path.display().to_string(),
            ],
        }
    }

    /// For the plan: `PATH (why)`.
    pub fn describe(&self) -> String {
        match self {
            Bind::ReadOnly(src, dst, why) if src == dst => format!("{} ({why})", dst.display()),
            Bind::ReadOnly(src, dst, why) => {
                format!("{} at {} ({why})", src.display(), dst.display())
            }
            Bind::Link(target, path) => format!("{} -> {}", path.display(), target.display()),
        }
    }
}

/// The system part of the allow-list, as this machine has it.
pub fn system_binds() -> Vec<Bind> {
    let mut v = Vec::new();
    for d in SYSTEM_DIRS {
        let p = Path::new(d);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(t) = std::fs::read_link(p) {
                    v.push(Bind::Link(t, p.to_path_buf()));
                }
            }
            Ok(m) if m.is_dir() => {
                v.push(Bind::ReadOnly(p.to_path_buf(), p.to_path_buf(), "system"))
            }
            _ => {}
        }
    }
    let mut etc: Vec<PathBuf> = ETC_ALLOWED
        .iter()
        .map(|n| Path::new("/etc").join(n))
        .collect();
    // Debian's site configuration of its Pythons (/etc/python3.11/).
    if let Ok(rd) = std::fs::read_dir("/etc") {
        etc.extend(
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
                .map(|e| e.path()),
        );
    }
    etc.sort();
    for p in etc {
        if std::fs::symlink_metadata(&p).is_ok() {
            v.push(Bind::ReadOnly(p.clone(), p, "system"));
        }
    }
    v
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
    /// Further directories the auditor allows read-only (`--sandbox-ro`).
    pub read_only: Vec<PathBuf>,
    /// The installation of the program's interpreter
    /// ([`interpreter_dirs`]).
    pub interpreter: Vec<PathBuf>,
    /// The program's home directory as its environment names it: an
    /// empty, writable directory there.
    pub home: Option<PathBuf>,
    /// The system-call filter ([`seccomp_program`]) is given to bubblewrap
    /// open at this descriptor number.
    pub seccomp_fd: Option<i32>,
}

impl Mounts {
    /// Everything shown read-only, in the order it is mounted.
    pub fn binds(&self) -> Vec<Bind> {
        let mut v = system_binds();
        for p in &self.interpreter {
            v.push(Bind::ReadOnly(
                p.clone(),
                p.clone(),
                "the program's interpreter",
            ));
        }
        for p in &self.read_only {
            v.push(Bind::ReadOnly(p.clone(), p.clone(), "--sandbox-ro"));
        }
        for (src, dst) in &self.data {
            v.push(Bind::ReadOnly(src.clone(), dst.clone(), "--data"));
        }
        v
    }

    /// The paths the program must be able to read, for [`readable_by`].
    pub fn must_read(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.interpreter.clone();
        v.extend(self.read_only.iter().cloned());
        v.extend(self.data.iter().map(|d| d.0.clone()));
        v
    }
}

impl Sandbox {
    /// One line for the report.
    pub fn describe(&self) -> String {
        match self {
            Sandbox::Bwrap(p) => format!(
                "bubblewrap ({}): an empty root with read-only only what is listed, writable only the re-run directory, a private /tmp and an empty home, no network, no host socket, own user, pid, IPC and UTS namespaces, no capabilities, dies with referee, environment cleared",
                p.display()
            ),
            Sandbox::None => "NONE (--sandbox none): the program ran unsandboxed, with this user's rights, files and network; only its environment was cleared".to_string(),
        }
    }

    /// The command line that runs `command` confined, and the exact
    /// environment to start that command line with.
    pub fn wrap(
        &self,
        command: &[String],
        env: &[(String, String)],
        m: &Mounts,
    ) -> (Vec<String>, Vec<(String, String)>) {
        let bwrap = match self {
            // referee clears the environment itself (no env(1), which
            // would read a variable named `--x` as an option).
            Sandbox::None => return (command.to_vec(), env.to_vec()),
            Sandbox::Bwrap(bwrap) => bwrap,
        };
        let mut a: Vec<String> = vec![bwrap.display().to_string()];
        let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
        push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        // The home first: a later bind over the same path wins.
        if let Some(h) = m
            .home
            .as_ref()
            .filter(|h| h.is_absolute() && *h != Path::new("/"))
        {
            a.extend(["--tmpfs".into(), h.display().to_string()]);
        }
        for b in m.binds() {
            a.extend(b.args());
        }
        let rw = m.rerun_dir.display().to_string();
        a.extend(["--bind".into(), rw.clone(), rw]);
        if let Some(fd) = m.seccomp_fd {
            a.extend(["--seccomp".into(), fd.to_string()]);
        }
        a.extend(CONFINE.iter().map(|s| s.to_string()));
        for (k, v) in env {
            a.extend(["--setenv".into(), k.clone(), v.clone()]);
        }
        a.extend(["--chdir".into(), m.cwd.display().to_string(), "--".into()]);
        a.extend(command.iter().cloned());
        (a, Vec::new())
    }
}

/// The system calls the sandboxed program is refused (`EPERM`), by name
/// and number on this architecture: the kernel's keyrings (root's keys,
/// and a favourite of kernel exploits), tracing and reading other
/// processes, loading BPF programs, `userfaultfd` and `io_uring` (the
/// two most used paths of recent kernel exploits), mounting, swapping,
/// rebooting, loading kernels and modules, setting the clocks, the
/// kernel log, quotas, file handles that bypass paths, and joining other
/// namespaces. A training program needs none of them; a denied call fails
/// as a call the kernel does not permit, so a program that probes for one
/// (Python's `os` module, PyTorch's io_uring probe) goes on.
pub const DENIED_CALLS: &[(&str, i64)] = &[
    ("add_key", libc::SYS_add_key),
    ("keyctl", libc::SYS_keyctl),
    ("request_key", libc::SYS_request_key),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kcmp", libc::SYS_kcmp),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("bpf", libc::SYS_bpf),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("adjtimex", libc::SYS_adjtimex),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("setns", libc::SYS_setns),
];

/// The filter of [`DENIED_CALLS`] as the BPF program bubblewrap's
/// `--seccomp` reads (an array of `struct sock_filter`, in this machine's
/// byte order), compiled by `seccompiler` for this architecture. It
/// begins with the architecture's check: a call made through another
/// ABI (32-bit `int 0x80` on x86-64) kills the program.
pub fn seccomp_program() -> Result<Vec<u8>, SandboxError> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| SandboxError::Seccomp {
        message: format!("{}: {e:?}", std::env::consts::ARCH),
    })?;
    let rules = DENIED_CALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| SandboxError::Seccomp {
        message: e.to_string(),
    })?;
    let program = BpfProgram::try_from(filter).map_err(|e| SandboxError::Seccomp {
        message: e.to_string(),
    })?;
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for f in &program {
        bytes.extend_from_slice(&f.code.to_ne_bytes());
        bytes.push(f.jt);
        bytes.push(f.jf);
        bytes.extend_from_slice(&f.k.to_ne_bytes());
    }
    Ok(bytes)
}

/// The auditor's home directory and `/root`: never shown as a whole.
pub fn hidden_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    for d in [
        std::env::var_os("HOME").map(PathBuf::from),
        Some(PathBuf::from("/root")),
    ]
    .into_iter()
    .flatten()
    {
        if d.is_absolute() && d != Path::new("/") && !v.contains(&d) {
            v.push(d);
        }
    }
    v
}

/// Is `p` under one of the system directories the sandbox always shows?
fn in_system(p: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| p.starts_with(d))
}

/// The installation the program `prog` runs from, found on `path` (the
/// recorded `PATH`) when it has no `/`: the directories the sandbox must
/// show read-only for it to start. Two levels above the program (a
/// virtual environment, a conda environment, a pyenv version:
/// `PREFIX/bin/python3`) where that holds `bin/` and either `lib/` or
/// `pyvenv.cfg`, and the same for the file it links to and, for a virtual
/// environment, the `home` its `pyvenv.cfg` names. Nothing under the
/// system directories (always shown), and never `/`, a home directory as
/// a whole or a directory above one.
pub fn interpreter_dirs(prog: &str, path: Option<&str>) -> Vec<PathBuf> {
    let found = if prog.contains('/') {
        Some(PathBuf::from(prog))
    } else {
        path.and_then(|path| {
            std::env::split_paths(path)
                .map(|d| d.join(prog))
                .find(|p| p.is_file())
        })
    };
    let Some(found) = found.filter(|f| f.is_absolute()) else {
        return Vec::new();
    };
    let mut candidates: Vec<PathBuf> = Vec::new();
    let prefix_of = |bin: &Path| bin.parent().and_then(Path::parent).map(Path::to_path_buf);
    candidates.extend(prefix_of(&found));
    if let Ok(real) = std::fs::canonicalize(&found) {
        candidates.extend(prefix_of(&real));
    }
    // A virtual environment's base interpreter (`home = /opt/py/bin`).
    let venv_homes: Vec<PathBuf> = candidates
        .iter()
        .filter_map(|c| std::fs::read_to_string(c.join("pyvenv.cfg")).ok())
        .filter_map(|cfg| {
            cfg.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == "home")
                .map(|(_, v)| PathBuf::from(v.trim()))
        })
        .filter_map(|home| {
            let real = std::fs::canonicalize(&home).unwrap_or(home);
            real.parent().map(Path::to_path_buf)
        })
        .collect();
    candidates.extend(venv_homes);
    let hidden = hidden_dirs();
    let mut out: Vec<PathBuf> = Vec::new();
    for c in candidates {
        let is_installation =
            c.join("bin").is_dir() && (c.join("lib").is_dir() || c.join("pyvenv.cfg").is_file());
        let too_wide =
            c.parent().is_none() || hidden.iter().any(|h| h.starts_with(&c)) || in_system(&c);
        if c.is_absolute() && is_installation && !too_wide && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Can the user `uid` in group `gid` (no supplementary groups) read `p`:
/// search every directory on its way, and read it (a directory: list it)?
/// `Err` names the first path that stops them, and its mode.
/// Both the path as given and the file it resolves to are walked.
pub fn readable_by(p: &Path, uid: u32, gid: u32) -> Result<(), String> {
    let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
    if p.is_absolute() && p != real {
        walk_readable(p, uid, gid)?;
    }
    walk_readable(&real, uid, gid)
}

fn walk_readable(real: &Path, uid: u32, gid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let allows = |m: &std::fs::Metadata, bit: u32| {
        let mode = m.mode();
        if m.uid() == uid {
            mode & (bit << 6) != 0
        } else if m.gid() == gid {
            mode & (bit << 3) != 0
        } else {
            mode & bit != 0
        }
    };
    let ancestors: Vec<&Path> = real.ancestors().collect();
    for dir in ancestors.iter().rev() {
        let m = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let last = *dir == real;
        let ok = if last {
            allows(&m, 0o4) && (!m.is_dir() || allows(&m, 0o1))
        } else {
            allows(&m, 0o1)
        };
        if !ok {
            return Err(format!(
                "{} (mode {:04o}, owner uid {})",
                dir.display(),
                m.mode() & 0o7777,
                m.uid()
            ));
        }
    }
    Ok(())
}

/// Hand `dir` and everything under it to `uid`:`gid` (links themselves,
/// never what they point to).
pub fn hand_over(dir: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
    if std::fs::symlink_metadata(dir)?.is_dir() {
        for e in std::fs::read_dir(dir)? {
            hand_over(&e?.path(), uid, gid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts() -> Mounts {
        Mounts {
            rerun_dir: "/a/rerun".into(),
            cwd: "/a/rerun/code".into(),
            data: vec![("/d/here".into(), "/d/recorded".into())],
            read_only: vec![],
            interpreter: vec!["/opt/venv".into()],
            home: Some("/home/someone".into()),
            seccomp_fd: Some(3),
        }
    }

    #[test]
    fn bwrap_grants_by_allow_list_and_clears_the_environment() {
        let m = mounts();
        let env = vec![("SEED".to_string(), "7".to_string())];
        let cmd = vec!["python3".to_string(), "train.py".to_string()];
        let (w, start_env) = Sandbox::Bwrap("/usr/bin/bwrap".into()).wrap(&cmd, &env, &m);
        assert!(start_env.is_empty());
        let line = w.join(" ");
        for want in [
            "--ro-bind /usr /usr",
            "--tmpfs /tmp",
            "--tmpfs /home/someone",
            "--ro-bind /opt/venv /opt/venv",
            "--bind /a/rerun /a/rerun",
            "--ro-bind /d/here /d/recorded",
            "--unshare-user",
            "--unshare-net",
            "--unshare-pid",
            "--disable-userns",
            "--die-with-parent",
            "--seccomp 3 --unshare-user",
            "--cap-drop ALL",
            "--clearenv --setenv SEED 7",
            "--chdir /a/rerun/code -- python3 train.py",
        ] {
            assert!(line.contains(want), "{want} not in {line}");
        }
        // Nothing of the host but the allow-list: no root bind, no /run,
        // no /home, no /etc as a whole, no shadow file.
        for never in [
            "--ro-bind / /",
            "--bind / /",
            " /run",
            "--ro-bind /home",
            "--ro-bind /etc /etc",
            "/etc/shadow",
            "--dev-bind",
        ] {
            assert!(!line.contains(never), "{never} in {line}");
        }
        // The writable bind comes after every read-only one, and the home's
        // tmpfs before them (a later mount wins).
        let rw = w.iter().position(|x| x == "--bind").unwrap();
        assert!(w.iter().rposition(|x| x == "--ro-bind").unwrap() < rw);
        let home = w.iter().position(|x| x == "/home/someone").unwrap();
        assert!(home < w.iter().position(|x| x == "--ro-bind").unwrap());
    }

    #[test]
    fn unsandboxed_the_environment_is_exact_and_no_env_tool_reads_it() {
        let m = mounts();
        let env = vec![
            ("--split-string".to_string(), "x".to_string()),
            ("SEED".to_string(), "7".to_string()),
        ];
        let cmd = vec!["python3".to_string(), "train.py".to_string()];
        let (w, start_env) = Sandbox::None.wrap(&cmd, &env, &m);
        assert_eq!(w, cmd);
        assert_eq!(start_env, env);
    }

    #[test]
    fn an_interpreter_installation_is_found_and_nothing_wider() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("pyenv/versions/3.11");
        std::fs::create_dir_all(base.join("bin")).unwrap();
        std::fs::create_dir_all(base.join("lib")).unwrap();
        std::fs::write(base.join("bin/python3"), "").unwrap();
        let venv = t.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3"), venv.join("bin/python3")).unwrap();
        let path = format!("/nonexistent:{}", venv.join("bin").display());
        let dirs = interpreter_dirs("python3", Some(&path));
        let real = |p: PathBuf| std::fs::canonicalize(p).unwrap();
        let dirs: Vec<PathBuf> = dirs.into_iter().map(real).collect();
        assert!(dirs.contains(&real(venv.clone())), "{dirs:?}");
        assert!(dirs.contains(&real(base.clone())), "{dirs:?}");
        assert_eq!(dirs.len(), 2, "{dirs:?}");
        // A program in a system directory needs nothing more; a program
        // two levels under a home directory does not show the home.
        assert!(interpreter_dirs("/usr/bin/true", None).is_empty());
        assert!(interpreter_dirs("true", Some("/usr/bin")).is_empty());
        assert!(interpreter_dirs("python3", None).is_empty());
        for h in hidden_dirs() {
            let bin = h.join("bin").join("x");
            assert!(interpreter_dirs(bin.to_str().unwrap(), None).is_empty());
        }
    }

    #[test]
    fn readable_by_walks_every_directory_on_the_way() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let inner = t.path().join("closed/open");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(inner.join("f"), "x").unwrap();
        let set = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(t.path(), 0o755);
        set(&t.path().join("closed"), 0o700);
        set(&inner, 0o755);
        set(&inner.join("f"), 0o644);
        // Owned by this process's user; ask for a user who owns nothing.
        let (uid, gid) = (4_000_000, 4_000_000);
        let e = readable_by(&inner.join("f"), uid, gid).unwrap_err();
        assert!(e.contains("closed") && e.contains("0700"), "{e}");
        set(&t.path().join("closed"), 0o711);
        readable_by(&inner.join("f"), uid, gid).unwrap();
        set(&inner.join("f"), 0o600);
        assert!(readable_by(&inner.join("f"), uid, gid).is_err());
        // The owner's bits count for the owner, not the others' bits.
        use std::os::unix::fs::MetadataExt;
        let me = std::fs::metadata(inner.join("f")).unwrap();
        readable_by(&inner.join("f"), me.uid(), me.gid()).unwrap();
    }

    #[test]
    fn the_filter_is_a_bpf_program_that_names_every_denied_call() {
        let p = seccomp_program().unwrap();
        // struct sock_filter is 8 bytes; a check of the architecture, one
        // jump per denied call and the returns.
        assert_eq!(p.len() % 8, 0);
        let insns: Vec<(u16, u32)> = p
            .chunks(8)
            .map(|c| {
                (
                    u16::from_ne_bytes([c[0], c[1]]),
                    u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect();
        assert!(insns.len() > DENIED_CALLS.len());
        // BPF_JMP|BPF_JEQ|BPF_K against each denied number.
        let compared: Vec<u32> = insns
            .iter()
            .filter(|(code, _)| *code == 0x15)
            .map(|(_, k)| *k)
            .collect();
        for (name, nr) in DENIED_CALLS {
            assert!(
                compared.contains(&(*nr as u32)),
                "{name} ({nr}) not in the filter"
            );
        }
        // Not read or write, which every program makes.
        assert!(!compared.contains(&(libc::SYS_read as u32)));
        assert!(!compared.contains(&(libc::SYS_write as u32)));
        // Returns EPERM (SECCOMP_RET_ERRNO | EPERM) and ALLOW.
        assert!(insns.contains(&(0x06, 0x0005_0000 | libc::EPERM as u32)));
        assert!(insns.contains(&(0x06, 0x7fff_0000)));
    }
}
