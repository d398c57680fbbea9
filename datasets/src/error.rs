//! The crate's error type.
//!
//! Every message names the file or dataset concerned and ends with the exact
//! command (or action) that fixes it, so it can be shown to a user as is.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// An error from preparing, verifying or loading a dataset.
///
/// The `Display` text always names the file or dataset and the command that
/// fixes the problem (usually `referee data prepare NAME --data-dir DIR`,
/// available programmatically as the `fix` field).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// The name is not one of [`crate::dataset_names`].
    #[error(
        "unknown dataset `{name}` (known datasets: {known}): run `{fix}` with one of the known names"
    )]
    UnknownDataset {
        /// The name that was asked for.
        name: String,
        /// The known names, comma separated.
        known: String,
        /// A command that would work.
        fix: String,
    },

    /// The dataset directory or its `MANIFEST.json` does not exist.
    #[error("dataset `{dataset}` is not prepared in {} ({detail}): run `{fix}`", .data_dir.display())]
    NotPrepared {
        /// Dataset name.
        dataset: String,
        /// The data directory that was searched.
        data_dir: PathBuf,
        /// What exactly is missing.
        detail: String,
        /// The command that prepares it.
        fix: String,
    },

    /// A file's content differs from the sha256 recorded for it.
    #[error("{}: sha256 mismatch (expected {expected}, found {found}): run `{fix}` to rebuild", .path.display())]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// Expected lowercase hex sha256.
        expected: String,
        /// Actual lowercase hex sha256.
        found: String,
        /// The command that rebuilds it.
        fix: String,
    },

    /// A file's size differs from the size recorded for it.
    #[error("{}: size mismatch (expected {expected} bytes, found {found}): run `{fix}` to rebuild", .path.display())]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// Expected size in bytes.
        expected: u64,
        /// Actual size in bytes.
        found: u64,
        /// The command that rebuilds it.
        fix: String,
    },

    /// A file listed in the manifest is missing.
    #[error("{}: listed in the manifest but missing: run `{fix}` to rebuild", .path.display())]
    MissingFile {
        /// The missing file.
        path: PathBuf,
        /// The command that rebuilds it.
        fix: String,
    },

    /// A prepared dataset directory contains a file that the manifest does not list.
    #[error("{}: not listed in the manifest (a stray file inside a prepared dataset): delete it, or run `{fix}` to rebuild", .path.display())]
    UnexpectedFile {
        /// The stray file.
        path: PathBuf,
        /// The command that rebuilds the dataset.
        fix: String,
    },

    /// `MANIFEST.json` cannot be parsed, was edited, or describes another dataset.
    #[error("{}: invalid manifest: {reason}: run `{fix}` to rebuild", .path.display())]
    BadManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
        /// The command that rebuilds it.
        fix: String,
    },

    /// The dataset was prepared by a different recipe (an older or newer build
    /// of this crate), so its files are not the ones this build expects.
    #[error("{}: prepared with recipe `{found}`, but this build expects `{expected}`: run `{fix}` to rebuild", .path.display())]
    Outdated {
        /// The manifest file.
        path: PathBuf,
        /// Recipe recorded in the manifest.
        found: String,
        /// Recipe this build produces.
        expected: String,
        /// The command that rebuilds it.
        fix: String,
    },

    /// A data file (source archive, IDX, PNG, token file, text) cannot be decoded.
    #[error("{}: {reason}: run `{fix}`", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
        /// The command that fixes it.
        fix: String,
    },

    /// An I/O operation failed.
    #[error("{}: cannot {op}: {source} (check the path, permissions and free disk space, then run `{fix}`)", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done ("read", "create directory", ...).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
        /// The command to run once the cause is fixed.
        fix: String,
    },

    /// An external program needed to download a dataset is not installed.
    #[error("`{program}` was not found (needed to prepare `{dataset}`): {hint}, then run `{fix}`")]
    MissingTool {
        /// The program.
        program: String,
        /// Dataset being prepared.
        dataset: String,
        /// How to install it.
        hint: String,
        /// The command to rerun.
        fix: String,
    },

    /// An external program (apt-get, dpkg-deb, pip) failed.
    #[error("{0}")]
    CommandFailed(Box<CommandFailure>),

    /// Training, loading or using the tokenizer failed.
    #[error("{}: tokenizer error: {reason}: run `{fix}`", .path.display())]
    Tokenizer {
        /// The tokenizer file (or the dataset directory while training).
        path: PathBuf,
        /// What went wrong.
        reason: String,
        /// The command that fixes it.
        fix: String,
    },
}

/// Details of [`DataError::CommandFailed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFailure {
    /// The command line.
    pub command: String,
    /// Dataset being prepared.
    pub dataset: String,
    /// Exit status description.
    pub status: String,
    /// The tail of the program's standard error (or output).
    pub stderr: String,
    /// What probably fixes it.
    pub hint: String,
    /// The command to rerun afterwards.
    pub fix: String,
}

impl std::fmt::Display for CommandFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` failed ({}) while preparing `{}`: {}\n{}, then run `{}`",
            self.command, self.status, self.dataset, self.stderr, self.hint, self.fix
        )
    }
}

/// Quote a string for a POSIX shell if it needs quoting.
pub(crate) fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'/' | b'.' | b'_' | b'-' | b'+' | b'=' | b':' | b',' | b'@' | b'%'
                )
        });
    if plain {
        s.to_owned()
    } else {
        let mut out = String::from("'");
        for c in s.chars() {
            if c == '\'' {
                out.push_str("'\\''");
            } else {
                out.push(c);
            }
        }
        out.push('\'');
        out
    }
}

/// Make `p` absolute (without touching the file system) so messages and fix
/// commands work from any working directory.
pub(crate) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The command that (re)prepares dataset `name` in `data_dir`.
pub(crate) fn prepare_command(name: &str, data_dir: &Path) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "referee data prepare {} --data-dir {}",
        shell_quote(name),
        shell_quote(&absolute(data_dir).to_string_lossy())
    );
    s
}

/// Where errors are reported from: a dataset in a data directory. Builds the
/// `fix` command for every error.
#[derive(Debug, Clone)]
pub(crate) struct DatasetLocation {
    pub name: String,
    pub data_dir: PathBuf,
}

impl DatasetLocation {
    pub fn new(name: &str, data_dir: &Path) -> Self {
        DatasetLocation {
            name: name.to_owned(),
            data_dir: absolute(data_dir),
        }
    }

    /// Context for a loader opened on a dataset directory `DATA_DIR/NAME`.
    pub fn from_dataset_dir(dir: &Path) -> Self {
        let dir = absolute(dir);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "DATASET".to_owned());
        let data_dir = dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        DatasetLocation { name, data_dir }
    }

    pub fn dataset_dir(&self) -> PathBuf {
        self.data_dir.join(&self.name)
    }

    pub fn fix(&self) -> String {
        prepare_command(&self.name, &self.data_dir)
    }

    pub fn io(&self, path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> DataError + '_ {
        let path = path.to_path_buf();
        move |source| DataError::Io {
            path,
            op,
            source,
            fix: self.fix(),
        }
    }

    pub fn corrupt(&self, path: &Path, reason: impl Into<String>) -> DataError {
        DataError::Corrupt {
            path: path.to_path_buf(),
            reason: reason.into(),
            fix: self.fix(),
        }
    }

    pub fn not_prepared(&self, detail: impl Into<String>) -> DataError {
        DataError::NotPrepared {
            dataset: self.name.clone(),
            data_dir: self.data_dir.clone(),
            detail: detail.into(),
            fix: self.fix(),
        }
    }

    pub fn hash_mismatch(&self, path: &Path, expected: &str, found: &str) -> DataError {
        DataError::HashMismatch {
            path: path.to_path_buf(),
            expected: expected.to_owned(),
            found: found.to_owned(),
            fix: self.fix(),
        }
    }

    pub fn bad_manifest(&self, path: &Path, reason: impl Into<String>) -> DataError {
        DataError::BadManifest {
            path: path.to_path_buf(),
            reason: reason.into(),
            fix: self.fix(),
        }
    }

    pub fn tokenizer(&self, path: &Path, reason: impl std::fmt::Display) -> DataError {
        DataError::Tokenizer {
            path: path.to_path_buf(),
            reason: reason.to_string(),
            fix: self.fix(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_only_when_needed() {
        assert_eq!(shell_quote("/x/data"), "/x/data");
        assert_eq!(shell_quote("/x/my data"), "'/x/my data'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn not_prepared_names_dataset_and_command() {
        let e = DatasetLocation::new("fashion_mnist", Path::new("/x/data"))
            .not_prepared("no directory /x/data/fashion_mnist");
        let msg = e.to_string();
        assert!(
            msg.starts_with("dataset `fashion_mnist` is not prepared in /x/data"),
            "{msg}"
        );
        assert!(
            msg.ends_with("run `referee data prepare fashion_mnist --data-dir /x/data`"),
            "{msg}"
        );
    }
}
