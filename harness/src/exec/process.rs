//! The program's process group: spawning the program in a group of its
//! own, signalling and polling that group.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub(super) fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals the process group the
    // child leads (it was spawned with process_group(0)).
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

/// Spawn the program in its own process group with the run's variables
/// (`env.0`; only them when `env.1`), its stdout and stderr written to the
/// files `out` and `err`; as the user and group `run_as` when given (its
/// supplementary groups dropped); with each file of `fds` open read-only
/// at its descriptor number (bubblewrap's `--seccomp 3`).
pub(super) fn spawn(
    command: &[String],
    cwd: &Path,
    env: (&[(String, String)], bool),
    out: &Path,
    err: &Path,
    run_as: Option<(u32, u32)>,
    fds: &[(PathBuf, i32)],
) -> Result<Child, super::error::ExecError> {
    use super::error::ExecError;
    use std::os::fd::AsRawFd;
    let (prog, args) = command.split_first().ok_or(ExecError::NoCommand)?;
    let create = |p: &Path| File::create(p).map_err(|e| ExecError::io(p, e));
    let (env, clear) = env;
    let mut cmd = Command::new(prog);
    let given: Vec<(File, i32)> = fds
        .iter()
        .map(|(p, at)| {
            File::open(p)
                .map(|f| (f, *at))
                .map_err(|e| ExecError::io(p, e))
        })
        .collect::<Result<_, _>>()?;
    if !given.is_empty() {
        let pairs: Vec<(i32, i32)> = given.iter().map(|(f, at)| (f.as_raw_fd(), *at)).collect();
        // SAFETY: between fork and exec only dup2(2), which is
        // async-signal-safe; the descriptors stay open in the parent until
        // the spawn returns (`given` outlives it). dup2 leaves the new
        // descriptor without close-on-exec, so the program inherits it.
        unsafe {
            cmd.pre_exec(move || {
                for &(from, to) in &pairs {
                    if libc::dup2(from, to) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
    if clear {
        cmd.env_clear();
    }
    if let Some((uid, gid)) = run_as {
        // std drops the supplementary groups (setgroups(0)) before setuid
        // when it runs as root.
        cmd.uid(uid).gid(gid);
    }
    let child = cmd
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(create(out)?)
        .stderr(create(err)?)
        .process_group(0)
        .spawn()
        .map_err(|e| ExecError::Start {
            program: prog.clone(),
            source: e,
        });
    drop(given);
    child
}

/// Does process `pid` still run? Not when it is gone, nor when it is a
/// zombie (`Z`) or dead (`X`) that its reaper has not collected yet, as
/// `/proc/PID/stat` says.
pub fn process_running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
    }
}

/// Is any process of the group that `pid` leads still there?
pub(super) fn group_alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only asks whether the group exists.
    let r = unsafe { libc::kill(-(pid as libc::pid_t), 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
