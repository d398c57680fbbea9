//! File-tree helpers shared by packaging and the audit's re-runs (the
//! harness depends on this crate, not the reverse).

use std::io;
use std::path::{Path, PathBuf};

/// A file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// Creating, reading or writing `path` failed.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
    /// Copying `from` to `to` failed.
    #[error("{} → {}: {source}", .from.display(), .to.display())]
    Copy {
        from: PathBuf,
        to: PathBuf,
        source: io::Error,
    },
}

impl FsError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        FsError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Copy a tree: directories and regular files; symbolic links are not
/// followed and, like other special files, not copied; an entry whose name
/// `skip` accepts is left out (with everything under it).
pub fn copy_tree(
    from: &Path,
    to: &Path,
    skip: &dyn Fn(&std::ffi::OsStr) -> bool,
) -> Result<(), FsError> {
    std::fs::create_dir_all(to).map_err(|e| FsError::io(to, e))?;
    for e in std::fs::read_dir(from).map_err(|e| FsError::io(from, e))? {
        let e = e.map_err(|e| FsError::io(from, e))?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().map_err(|e| FsError::io(&src, e))?;
        if skip(&e.file_name()) {
            continue;
        }
        if ty.is_dir() {
            copy_tree(&src, &dst, skip)?;
        } else if ty.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| FsError::Copy {
                from: src.clone(),
                to: dst.clone(),
                source: e,
            })?;
        }
    }
    Ok(())
}
