//! Fingerprints of file trees: what `referee run --exec --data DIR` records
//! of each dataset the program read, and of the program's code, so that an
//! audit's re-run can refuse other data or other code.
//!
//! A fingerprint is the sha256 of a sorted manifest, one line per file:
//! `<sha256 of the content>  <size>  <path relative to the root>`. Files
//! are hashed in parallel (rayon) with a progress bar on stderr (shown only
//! on a terminal). Symbolic links are followed (datasets are often links
//! into a shared store); a directory entry that cannot be read is an error
//! naming it.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io;
use std::path::{Path, PathBuf};

/// A tree could not be listed or hashed.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    #[error("{}: more than 64 levels deep (a link loop?)", .0.display())]
    TooDeep(PathBuf),
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl FingerprintError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        FingerprintError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The fingerprint of one tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeFingerprint {
    /// The tree's root, as given (absolute).
    pub path: String,
    /// `sha256:<hex>` of the sorted manifest.
    pub fingerprint: String,
    pub files: usize,
    pub bytes: u64,
}

/// Every regular file under `root` (links followed), relative, sorted.
pub fn list_files(root: &Path) -> Result<Vec<String>, FingerprintError> {
    let mut out = Vec::new();
    walk(root, root, &mut out, 0)?;
    out.sort();
    Ok(out)
}

fn walk(
    root: &Path,
    dir: &Path,
    out: &mut Vec<String>,
    depth: usize,
) -> Result<(), FingerprintError> {
    if depth > 64 {
        return Err(FingerprintError::TooDeep(dir.to_path_buf()));
    }
    let rd = std::fs::read_dir(dir).map_err(|e| FingerprintError::io(dir, e))?;
    for e in rd {
        let e = e.map_err(|e| FingerprintError::io(dir, e))?;
        let p = e.path();
        let meta = std::fs::metadata(&p).map_err(|e| FingerprintError::io(&p, e))?;
        if meta.is_dir() {
            walk(root, &p, out, depth + 1)?;
        } else if meta.is_file() {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// The fingerprint of `files` (relative to `root`), hashed in parallel;
/// `what` labels the progress bar.
pub fn fingerprint_files(
    root: &Path,
    files: &[String],
    what: &str,
) -> Result<TreeFingerprint, FingerprintError> {
    let sizes: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(root.join(f)).ok())
        .map(|m| m.len())
        .sum();
    let bar = ProgressBar::with_draw_target(Some(sizes), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "referee: hashing {msg} {bar:30} {bytes}/{total_bytes} ({eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_string());
    let lines: Vec<Result<(String, u64), FingerprintError>> = files
        .par_iter()
        .map(|f| {
            let p = root.join(f);
            let (size, digest) = referee_submission::manifest::hash_file(&p)
                .map_err(|e| FingerprintError::io(&p, e))?;
            bar.inc(size);
            Ok((format!("{}  {size}  {f}\n", hex::encode(digest)), size))
        })
        .collect();
    bar.finish_and_clear();
    let mut h = Sha256::new();
    let mut bytes = 0;
    for l in lines {
        let (line, size) = l?;
        h.update(line.as_bytes());
        bytes += size;
    }
    Ok(TreeFingerprint {
        path: absolute(root).display().to_string(),
        fingerprint: format!("sha256:{}", hex::encode(h.finalize())),
        files: files.len(),
        bytes,
    })
}

/// The fingerprint of every file under `root`.
pub fn fingerprint_dir(root: &Path) -> Result<TreeFingerprint, FingerprintError> {
    if !root.is_dir() {
        return Err(FingerprintError::NotADirectory(root.to_path_buf()));
    }
    let files = list_files(root)?;
    fingerprint_files(root, &files, &root.display().to_string())
}

/// The files git tracks in the checkout `dir` (relative to `dir`, sorted),
/// or `None` when `dir` is not in a git checkout. Tracked files that are
/// absent from the working tree (deleted, not committed) are left out.
pub fn git_tracked_files(dir: &Path) -> Option<Vec<String>> {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["ls-files", "-z", "--cached"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let mut files: Vec<String> = o
        .stdout
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .filter(|f| dir.join(f).is_file())
        .collect();
    files.sort();
    Some(files)
}

/// The fingerprint of the code a program ran from `dir`: its git-tracked
/// files, when `dir` is a git checkout (`None` otherwise).
pub fn code_fingerprint(dir: &Path) -> Option<Result<TreeFingerprint, FingerprintError>> {
    let files = git_tracked_files(dir)?;
    Some(fingerprint_files(dir, &files, "the program's code"))
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_changes_with_a_byte_a_name_or_a_file() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("ds");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a.bin"), b"abc").unwrap();
        std::fs::write(d.join("sub/b.bin"), b"def").unwrap();
        let f0 = fingerprint_dir(&d).unwrap();
        assert_eq!((f0.files, f0.bytes), (2, 6));
        assert_eq!(fingerprint_dir(&d).unwrap(), f0, "deterministic");
        std::fs::write(d.join("sub/b.bin"), b"deg").unwrap();
        let f1 = fingerprint_dir(&d).unwrap();
        assert_ne!(f1.fingerprint, f0.fingerprint);
        std::fs::rename(d.join("sub/b.bin"), d.join("sub/c.bin")).unwrap();
        assert_ne!(fingerprint_dir(&d).unwrap().fingerprint, f1.fingerprint);
        assert!(fingerprint_dir(&d.join("absent")).is_err());
    }
}
