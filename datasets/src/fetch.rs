//! Scratch directories, atomic publication, and the external download tools
//! (`apt-get`, `dpkg-deb`, `python3 -m pip`).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{CommandFailure, DataError, DatasetLocation};
use crate::manifest::sha256_file;

/// Name of the folder under `DATA_DIR` that caches downloaded archives.
pub(crate) const DOWNLOADS_DIR: &str = "downloads";

/// A directory that is deleted on drop unless it was persisted.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
    keep: bool,
}

impl ScratchDir {
    /// Create a new, uniquely named directory `parent/<prefix><pid>-<nanos>-<i>`.
    pub fn new_in(
        parent: &Path,
        prefix: &str,
        ctx: &DatasetLocation,
    ) -> Result<ScratchDir, DataError> {
        fs::create_dir_all(parent).map_err(ctx.io(parent, "create directory"))?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut i = 0u32;
        loop {
            let path = parent.join(format!("{prefix}{}-{nanos}-{i}", std::process::id()));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(ScratchDir { path, keep: false }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && i < 1000 => i += 1,
                Err(e) => return Err(ctx.io(&path, "create directory")(e)),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Atomically rename the directory to `target` (which must not exist) and
    /// keep it.
    pub fn persist_as(mut self, target: &Path, ctx: &DatasetLocation) -> Result<(), DataError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&self.path, fs::Permissions::from_mode(0o755))
                .map_err(ctx.io(&self.path, "set permissions of"))?;
        }
        fs::rename(&self.path, target)
            .map_err(ctx.io(target, "rename the finished dataset directory to"))?;
        self.keep = true;
        Ok(())
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Delete scratch directories `parent/<prefix><pid>-...` left behind by a
/// process that no longer runs (an interrupted prepare). Only on systems
/// with `/proc`; directories of live processes are never touched.
pub(crate) fn remove_stale_scratch(parent: &Path, prefix: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Run an external program, mapping "not installed" and failures to errors
/// that say how to fix them. `failure_hint` turns the program's stderr into
/// advice.
pub(crate) fn run_tool(
    ctx: &DatasetLocation,
    program: &str,
    args: &[&OsStr],
    cwd: &Path,
    install_hint: &str,
    failure_hint: &dyn Fn(&str) -> String,
) -> Result<(), DataError> {
    let command_line = std::iter::once(program.to_owned())
        .chain(
            args.iter()
                .map(|a| crate::error::shell_quote(&a.to_string_lossy())),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let output = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DataError::MissingTool {
                program: program.to_owned(),
                dataset: ctx.name.clone(),
                hint: install_hint.to_owned(),
                fix: ctx.fix(),
            });
        }
        Err(e) => return Err(ctx.io(Path::new(program), "run")(e)),
    };
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    Err(DataError::CommandFailed(Box::new(CommandFailure {
        command: command_line,
        dataset: ctx.name.clone(),
        status: output.status.to_string(),
        stderr: tail(&text, 1500),
        hint: failure_hint(&text),
        fix: ctx.fix(),
    })))
}

fn tail(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.len() <= max {
        return s.to_owned();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// Return `DATA_DIR/downloads/<file_name>` with sha256 `sha256`, running
/// `download(dir)` (which must leave exactly that file, or a single file, in
/// `dir`) only when the cached copy is absent or wrong. The archive is
/// checked before it is returned.
pub(crate) fn cached_archive(
    ctx: &DatasetLocation,
    file_name: &str,
    sha256: &str,
    what: &str,
    download: &dyn Fn(&Path) -> Result<(), DataError>,
    step: &dyn Fn(String),
) -> Result<PathBuf, DataError> {
    let cache_dir = ctx.data_dir.join(DOWNLOADS_DIR);
    let cached = cache_dir.join(file_name);
    if cached.is_file() {
        let (found, _) = sha256_file(&cached).map_err(ctx.io(&cached, "read"))?;
        if found == sha256 {
            step(format!("using cached {}", cached.display()));
            return Ok(cached);
        }
        step(format!(
            "cached {} has the wrong sha256; downloading it again",
            cached.display()
        ));
        fs::remove_file(&cached).map_err(ctx.io(&cached, "remove"))?;
    }
    step(format!("downloading {what}"));
    remove_stale_scratch(&cache_dir, ".download-");
    let scratch = ScratchDir::new_in(&cache_dir, ".download-", ctx)?;
    download(scratch.path())?;
    let mut files: Vec<PathBuf> = fs::read_dir(scratch.path())
        .map_err(ctx.io(scratch.path(), "list directory"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    let got = if files
        .iter()
        .any(|p| p.file_name() == Some(OsStr::new(file_name)))
    {
        scratch.path().join(file_name)
    } else if files.len() == 1 {
        files.pop().expect("one file")
    } else {
        return Err(ctx.corrupt(
            scratch.path(),
            format!(
                "the download of {what} did not produce {file_name} (found {} files)",
                files.len()
            ),
        ));
    };
    let (found, _) = sha256_file(&got).map_err(ctx.io(&got, "read"))?;
    if found != sha256 {
        return Err(ctx.corrupt(
            &cached,
            format!(
                "downloaded archive has sha256 {found}, expected {sha256}: the registry served a different file for {what}; \
                 if this persists the pinned version has changed upstream"
            ),
        ));
    }
    fs::rename(&got, &cached).map_err(ctx.io(&cached, "move the downloaded archive to"))?;
    Ok(cached)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_dir_is_removed_unless_persisted() {
        let root = tempfile::tempdir().unwrap();
        let ctx = DatasetLocation::new("demo", root.path());
        let a = ScratchDir::new_in(root.path(), ".demo.partial-", &ctx).unwrap();
        let a_path = a.path().to_path_buf();
        fs::write(a_path.join("f"), b"x").unwrap();
        drop(a);
        assert!(!a_path.exists());
        let b = ScratchDir::new_in(root.path(), ".demo.partial-", &ctx).unwrap();
        fs::write(b.path().join("f"), b"x").unwrap();
        b.persist_as(&root.path().join("demo"), &ctx).unwrap();
        assert!(root.path().join("demo/f").is_file());
    }

    #[test]
    fn missing_tool_says_what_to_install_and_rerun() {
        let root = tempfile::tempdir().unwrap();
        let ctx = DatasetLocation::new("fashion_mnist", Path::new("/x/data"));
        let e = run_tool(
            &ctx,
            "referee-no-such-tool-xyz",
            &[],
            root.path(),
            "install it with `apt-get install xyz`",
            &|_| String::new(),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, DataError::MissingTool { .. }), "{msg}");
        assert!(
            msg.contains(
                "`referee-no-such-tool-xyz` was not found (needed to prepare `fashion_mnist`)"
            ),
            "{msg}"
        );
        assert!(
            msg.ends_with("run `referee data prepare fashion_mnist --data-dir /x/data`"),
            "{msg}"
        );
    }

    #[test]
    fn failing_tool_reports_stderr_and_hint() {
        let root = tempfile::tempdir().unwrap();
        let ctx = DatasetLocation::new("shakespeare", Path::new("/x/data"));
        let e = run_tool(
            &ctx,
            "sh",
            &[
                OsStr::new("-c"),
                OsStr::new("echo 'E: Unable to locate package foo' >&2; exit 100"),
            ],
            root.path(),
            "",
            &|stderr| {
                if stderr.contains("Unable to locate") {
                    "run `apt-get update`".into()
                } else {
                    "?".into()
                }
            },
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("E: Unable to locate package foo"), "{msg}");
        assert!(
            msg.contains("run `apt-get update`, then run `referee data prepare shakespeare"),
            "{msg}"
        );
    }
}
