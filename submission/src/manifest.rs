//! The manifest of a submission directory: every regular file, its size and
//! its SHA-256, in one canonical text that a signature can cover.
//!
//! # Canonical encoding (`referee-manifest v1`)
//!
//! ```text
//! referee-manifest v1
//! <sha256>  <size>  <path>
//! <sha256>  <size>  <path>
//! ...
//! ```
//!
//! * UTF-8, LF line endings, every line (the last one included) ends in `\n`;
//!   no carriage returns, no blank lines, no comments.
//! * The first line is exactly `referee-manifest v1`.
//! * One line per regular file: the SHA-256 of its bytes as 64 lower-case hex
//!   digits, two spaces, its size in bytes in decimal (no sign, no leading
//!   zeros; an empty file is `0`), two spaces, its path relative to the
//!   manifest's directory.
//! * Paths use `/` as separator, have no leading or trailing `/`, no empty,
//!   `.` or `..` components, and no control characters (U+0000–U+001F,
//!   U+007F: this rules out tabs, CR and LF). Everything after the second
//!   two-space separator, up to the LF, is the path, so paths may contain
//!   spaces.
//! * Lines are sorted by the UTF-8 bytes of the path, strictly increasing
//!   (so no path appears twice).
//! * The top-level files `MANIFEST` and `MANIFEST.sig` are never listed
//!   (they hold the manifest and its signature); files of those names in
//!   subdirectories are listed like any other.
//! * Only regular files are listed. Empty directories leave no trace.
//!   Symbolic links, sockets, FIFOs and devices are refused: a signature must
//!   cover real bytes.
//!
//! The encoding is a function of the directory's contents alone: the same
//! tree gives byte-identical text on every machine, whatever the order in
//! which the file system lists it or the number of threads hashing it.

use rayon::prelude::*;
use referee_rules::escape::term;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// First line of every manifest.
pub const HEADER: &str = "referee-manifest v1";
/// Name of the manifest file at the top of a signed directory.
pub const MANIFEST_FILE: &str = "MANIFEST";
/// Name of the signature file at the top of a signed directory.
pub const SIGNATURE_FILE: &str = "MANIFEST.sig";

/// Size and SHA-256 of a file.
type Digest32 = (u64, [u8; 32]);

/// Read buffer for hashing: big files are streamed through it.
const CHUNK: usize = 1 << 20;

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Relative path, `/`-separated, UTF-8.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the file's bytes.
    #[serde(serialize_with = "ser_hex")]
    pub sha256: [u8; 32],
}

impl Entry {
    /// The SHA-256 as 64 lower-case hex digits.
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.sha256)
    }
}

fn ser_hex<S: serde::Serializer>(d: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(d))
}

/// The files of a directory, in canonical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Manifest {
    entries: Vec<Entry>,
}

/// One difference between two manifests (see [`Manifest::diff`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// In the new manifest only.
    Added(String),
    /// In the old manifest only.
    Removed(String),
    /// In both, with different size or content.
    Modified {
        path: String,
        old_size: u64,
        new_size: u64,
        #[serde(serialize_with = "ser_hex")]
        old_sha256: [u8; 32],
        #[serde(serialize_with = "ser_hex")]
        new_sha256: [u8; 32],
    },
}

impl Change {
    /// The path the change concerns.
    pub fn path(&self) -> &str {
        match self {
            Change::Added(p) | Change::Removed(p) => p,
            Change::Modified { path, .. } => path,
        }
    }
}

/// For people: the path is the package's, shown through [`term`].
impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Added(p) => write!(f, "added: {}", term(p)),
            Change::Removed(p) => write!(f, "removed: {}", term(p)),
            Change::Modified {
                path,
                old_size,
                new_size,
                old_sha256,
                new_sha256,
            } => {
                write!(f, "changed: {} (", term(path))?;
                if old_size != new_size {
                    write!(f, "size was {old_size}, now {new_size}; ")?;
                }
                write!(
                    f,
                    "sha256 was {}, now {})",
                    hex::encode(old_sha256),
                    hex::encode(new_sha256)
                )
            }
        }
    }
}

/// Why a manifest could not be built or parsed.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: file name is not valid UTF-8", .0.display())]
    NotUtf8(PathBuf),
    #[error(
        "{path:?}: file name contains a control character (newline, tab, ...); it cannot be listed in a manifest"
    )]
    BadName { path: String },
    #[error("{path}: is a symbolic link; refusing to sign it (a signature must cover real bytes)")]
    Symlink { path: String },
    #[error(
        "{path}: not a regular file or directory (socket, FIFO or device); refusing to sign it"
    )]
    NotRegular { path: String },
    #[error("manifest line {line}: {problem}")]
    Parse { line: usize, problem: LineProblem },
}

/// What is wrong with a line of a manifest (or with an entry's path).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineProblem {
    #[error("empty manifest (no header line)")]
    Empty,
    #[error("missing final newline")]
    NoFinalNewline,
    #[error("carriage return (manifests use LF line endings)")]
    CarriageReturn,
    #[error("expected header {HEADER:?}, found {found:?}")]
    Header { found: String },
    #[error("expected `<sha256>  <size>  <path>`, found {found:?}")]
    Shape { found: String },
    #[error("sha256 must be 64 lower-case hex digits, found {found:?}")]
    Sha256Digits { found: String },
    #[error("bad sha256: {0}")]
    Sha256(#[from] hex::FromHexError),
    #[error("expected two spaces after the sha256")]
    SpacesAfterSha256,
    #[error("expected a decimal size after the sha256")]
    NoSize,
    #[error("size {size:?} has leading zeros")]
    LeadingZeros { size: String },
    #[error("size {size:?} does not fit in 64 bits")]
    SizeTooLarge { size: String },
    #[error("expected two spaces after the size")]
    SpacesAfterSize,
    #[error("{path:?} is never listed in a manifest")]
    Reserved { path: String },
    #[error("empty path")]
    EmptyPath,
    #[error("path {path:?} contains control character {found:?}")]
    ControlCharacter { path: String, found: char },
    #[error(
        "path {path:?} is not a clean relative path (empty, `.` or `..` component, or leading/trailing `/`)"
    )]
    NotClean { path: String },
    #[error("path {path:?} listed twice")]
    Twice { path: String },
    #[error("path {path:?} out of order (must sort after {after:?})")]
    OutOfOrder { path: String, after: String },
}

impl ManifestError {
    /// The relative path this error concerns, when it concerns one file.
    pub fn rel_path(&self) -> Option<&str> {
        match self {
            ManifestError::BadName { path }
            | ManifestError::Symlink { path }
            | ManifestError::NotRegular { path } => Some(path),
            _ => None,
        }
    }
}

/// The result of walking a directory without stopping at the first problem:
/// what could be hashed, and a problem for each path that could not.
#[derive(Debug, Default)]
pub struct Scan {
    /// The files that could be hashed, in canonical order.
    pub manifest: Manifest,
    /// One error per file or directory that could not be listed or hashed,
    /// in path order. Paths named here are in neither list of `manifest`.
    pub errors: Vec<(String, ManifestError)>,
}

impl Manifest {
    /// List and hash every regular file under `dir` (see the module doc).
    /// Fails on the first problem in path order: a symlink, a special file, a
    /// name that is not UTF-8 or holds a control character, an I/O error.
    pub fn build(dir: &Path) -> Result<Manifest, ManifestError> {
        let scan = Self::scan(dir)?;
        match scan.errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(scan.manifest),
        }
    }

    /// Like [`Manifest::build`], but go on past per-file problems and report
    /// them all. Fails only if `dir` itself is not a readable directory.
    pub fn scan(dir: &Path) -> Result<Scan, ManifestError> {
        let meta = fs::metadata(dir).map_err(|source| ManifestError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(ManifestError::NotADirectory(dir.to_path_buf()));
        }
        fs::read_dir(dir).map_err(|source| ManifestError::Io {
            path: dir.to_path_buf(),
            source,
        })?;

        let mut files = Vec::new();
        let mut errors = Vec::new();
        walk(dir, "", &mut files, &mut errors);

        let hashed: Vec<(String, io::Result<Digest32>)> = files
            .into_par_iter()
            .map(|rel| {
                let r = hash_file(&dir.join(&rel));
                (rel, r)
            })
            .collect();
        let mut entries = Vec::with_capacity(hashed.len());
        for (path, r) in hashed {
            match r {
                Ok((size, sha256)) => entries.push(Entry { path, size, sha256 }),
                Err(source) => {
                    let e = ManifestError::Io {
                        path: PathBuf::from(&path),
                        source,
                    };
                    errors.push((path, e));
                }
            }
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        errors.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Scan {
            manifest: Manifest { entries },
            errors,
        })
    }

    /// A manifest from entries in any order. Fails if a path is invalid or
    /// appears twice.
    pub fn from_entries(mut entries: Vec<Entry>) -> Result<Manifest, ManifestError> {
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        for (i, e) in entries.iter().enumerate() {
            if let Err(problem) = check_path(&e.path) {
                return Err(ManifestError::Parse { line: 0, problem });
            }
            if i > 0 && entries[i - 1].path == e.path {
                return Err(ManifestError::Parse {
                    line: 0,
                    problem: LineProblem::Twice {
                        path: e.path.clone(),
                    },
                });
            }
        }
        Ok(Manifest { entries })
    }

    /// The entries, in canonical order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no file is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sum of the file sizes.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The entry for `path`, if listed.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The canonical text (see the module doc).
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(HEADER.len() + 1 + self.entries.len() * 100);
        s.push_str(HEADER);
        s.push('\n');
        for e in &self.entries {
            s.push_str(&hex::encode(e.sha256));
            s.push_str("  ");
            s.push_str(&e.size.to_string());
            s.push_str("  ");
            s.push_str(&e.path);
            s.push('\n');
        }
        s
    }

    /// Parse canonical text, strictly: anything [`Manifest::to_text`] would
    /// not have written is an error naming the (1-based) line.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let err = |line: usize, problem: LineProblem| ManifestError::Parse { line, problem };
        if text.is_empty() {
            return Err(err(1, LineProblem::Empty));
        }
        if !text.ends_with('\n') {
            let n = text.split('\n').count();
            return Err(err(n, LineProblem::NoFinalNewline));
        }
        let body = &text[..text.len() - 1];
        let mut entries: Vec<Entry> = Vec::new();
        for (i, line) in body.split('\n').enumerate() {
            let n = i + 1;
            if line.contains('\r') {
                return Err(err(n, LineProblem::CarriageReturn));
            }
            if i == 0 {
                if line != HEADER {
                    return Err(err(
                        n,
                        LineProblem::Header {
                            found: line.to_string(),
                        },
                    ));
                }
                continue;
            }
            let e = parse_line(line).map_err(|m| err(n, m))?;
            if let Some(prev) = entries.last()
                && prev.path.as_bytes() >= e.path.as_bytes()
            {
                let m = if prev.path == e.path {
                    LineProblem::Twice {
                        path: e.path.clone(),
                    }
                } else {
                    LineProblem::OutOfOrder {
                        path: e.path.clone(),
                        after: prev.path.clone(),
                    }
                };
                return Err(err(n, m));
            }
            entries.push(e);
        }
        Ok(Manifest { entries })
    }

    /// What changed going from `self` (the old, e.g. signed, manifest) to
    /// `other` (the new, e.g. rebuilt from disk): files only in `other` are
    /// `Added`, files only in `self` are `Removed`, files in both with a
    /// different size or hash are `Modified`. Sorted by path.
    pub fn diff(&self, other: &Manifest) -> Vec<Change> {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        let (a, b) = (&self.entries, &other.entries);
        while i < a.len() || j < b.len() {
            let ord = match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) => x.path.as_bytes().cmp(y.path.as_bytes()),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, _) => std::cmp::Ordering::Greater,
            };
            match ord {
                std::cmp::Ordering::Less => {
                    out.push(Change::Removed(a[i].path.clone()));
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(Change::Added(b[j].path.clone()));
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let (x, y) = (&a[i], &b[j]);
                    if x.size != y.size || x.sha256 != y.sha256 {
                        out.push(Change::Modified {
                            path: x.path.clone(),
                            old_size: x.size,
                            new_size: y.size,
                            old_sha256: x.sha256,
                            new_sha256: y.sha256,
                        });
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        out
    }
}

fn parse_line(line: &str) -> Result<Entry, LineProblem> {
    let b = line.as_bytes();
    if b.len() < 64 + 2 + 1 + 2 + 1 {
        return Err(LineProblem::Shape {
            found: line.to_string(),
        });
    }
    let hex_part = &line[..64];
    if !hex_part
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    {
        return Err(LineProblem::Sha256Digits {
            found: hex_part.to_string(),
        });
    }
    let mut sha256 = [0u8; 32];
    hex::decode_to_slice(hex_part, &mut sha256)?;
    let rest = &line[64..];
    let rest = rest
        .strip_prefix("  ")
        .ok_or(LineProblem::SpacesAfterSha256)?;
    let size_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if size_len == 0 {
        return Err(LineProblem::NoSize);
    }
    let size_str = &rest[..size_len];
    if size_str.len() > 1 && size_str.starts_with('0') {
        return Err(LineProblem::LeadingZeros {
            size: size_str.to_string(),
        });
    }
    let size: u64 = size_str.parse().map_err(|_| LineProblem::SizeTooLarge {
        size: size_str.to_string(),
    })?;
    let path = rest[size_len..]
        .strip_prefix("  ")
        .ok_or(LineProblem::SpacesAfterSize)?;
    check_path(path)?;
    if path == MANIFEST_FILE || path == SIGNATURE_FILE {
        return Err(LineProblem::Reserved {
            path: path.to_string(),
        });
    }
    Ok(Entry {
        path: path.to_string(),
        size,
        sha256,
    })
}

/// Whether `path` is a valid manifest path (see the module doc).
fn check_path(path: &str) -> Result<(), LineProblem> {
    if path.is_empty() {
        return Err(LineProblem::EmptyPath);
    }
    if let Some(c) = path.chars().find(|c| c.is_ascii_control()) {
        return Err(LineProblem::ControlCharacter {
            path: path.to_string(),
            found: c,
        });
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(LineProblem::NotClean {
            path: path.to_string(),
        });
    }
    Ok(())
}

/// Collect the relative paths of the regular files under `dir/rel`.
fn walk(
    root: &Path,
    rel: &str,
    files: &mut Vec<String>,
    errors: &mut Vec<(String, ManifestError)>,
) {
    let abs = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let rd = match fs::read_dir(&abs) {
        Ok(rd) => rd,
        Err(source) => {
            let key = rel.to_string();
            errors.push((key, ManifestError::Io { path: abs, source }));
            return;
        }
    };
    // Sorted children: deterministic error order and walk order.
    let mut children = BTreeMap::new();
    for ent in rd {
        match ent {
            Ok(ent) => {
                children.insert(ent.file_name(), ent);
            }
            Err(source) => errors.push((
                rel.to_string(),
                ManifestError::Io {
                    path: abs.clone(),
                    source,
                },
            )),
        }
    }
    for (name, ent) in children {
        let Some(name) = name.to_str() else {
            let p = abs.join(&name);
            errors.push((lossy_rel(rel, &p), ManifestError::NotUtf8(p)));
            continue;
        };
        let child = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        if name.chars().any(|c| c.is_ascii_control()) {
            errors.push((child.clone(), ManifestError::BadName { path: child }));
            continue;
        }
        let ft = match ent.file_type() {
            Ok(ft) => ft,
            Err(source) => {
                errors.push((
                    child,
                    ManifestError::Io {
                        path: ent.path(),
                        source,
                    },
                ));
                continue;
            }
        };
        // The top-level manifest and signature are not part of what they
        // cover. (A *directory* of that name is walked like any other, so
        // nothing can hide inside it.)
        if rel.is_empty() && (name == MANIFEST_FILE || name == SIGNATURE_FILE) && !ft.is_dir() {
            continue;
        }
        if ft.is_symlink() {
            errors.push((child.clone(), ManifestError::Symlink { path: child }));
        } else if ft.is_dir() {
            walk(root, &child, files, errors);
        } else if ft.is_file() {
            files.push(child);
        } else {
            errors.push((child.clone(), ManifestError::NotRegular { path: child }));
        }
    }
}

fn lossy_rel(rel: &str, p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if rel.is_empty() {
        name
    } else {
        format!("{rel}/{name}")
    }
}

/// SHA-256 and length of a file, streamed in [`CHUNK`]-sized reads. The
/// file must be a regular file and not a link (it is one of a package's:
/// a FIFO swapped in after the walk saw a file must not hang the hash).
pub fn hash_file(path: &Path) -> io::Result<(u64, [u8; 32])> {
    use referee_rules::untrusted::{self, FileKind, Links};
    let mut f = untrusted::open(path, FileKind::Streamed, Links::Refuse)?.reader();
    hash_reader(&mut f)
}

/// SHA-256 and length of everything `r` yields, streamed.
pub fn hash_reader(r: &mut impl Read) -> io::Result<(u64, [u8; 32])> {
    thread_local! {
        // One read buffer per hashing thread, reused across files: many
        // small files must not cost one 1 MiB allocation each.
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|cell| {
        let mut guard = cell.try_borrow_mut();
        let mut local = Vec::new();
        let buf: &mut Vec<u8> = match guard.as_deref_mut() {
            Ok(b) => b,
            Err(_) => &mut local,
        };
        if buf.len() < CHUNK {
            buf.resize(CHUNK, 0);
        }
        let mut h = Sha256::new();
        let mut n: u64 = 0;
        loop {
            let k = match r.read(buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            h.update(&buf[..k]);
            n += k as u64;
        }
        Ok((n, h.finalize().into()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(path: &str, size: u64, b: u8) -> Entry {
        Entry {
            path: path.into(),
            size,
            sha256: [b; 32],
        }
    }

    #[test]
    fn text_round_trip_and_order() {
        let m = Manifest::from_entries(vec![e("b", 2, 2), e("a b/c", 1, 1), e("a", 0, 0)]).unwrap();
        let t = m.to_text();
        assert!(t.starts_with("referee-manifest v1\n"));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[1], format!("{}  0  a", "00".repeat(32)));
        assert_eq!(lines[2], format!("{}  1  a b/c", "01".repeat(32)));
        assert_eq!(Manifest::parse(&t).unwrap(), m);
    }

    #[test]
    fn parse_is_strict() {
        let h = "00".repeat(32);
        let bad = [
            ("", 1),
            ("referee-manifest v2\n", 1),
            ("referee-manifest v1", 1),
            ("referee-manifest v1\r\n", 1),
            (&*format!("referee-manifest v1\n{h}  1  a"), 2),
            (&*format!("referee-manifest v1\n{h} 1  a\n"), 2),
            (&*format!("referee-manifest v1\n{h}  01  a\n"), 2),
            (
                &*format!("referee-manifest v1\n{}  1  a\n", "AA".repeat(32)),
                2,
            ),
            (&*format!("referee-manifest v1\n{h}  1  b\n{h}  1  a\n"), 3),
            (&*format!("referee-manifest v1\n{h}  1  a\n{h}  1  a\n"), 3),
            (&*format!("referee-manifest v1\n{h}  1  a//b\n"), 2),
            (&*format!("referee-manifest v1\n{h}  1  ../a\n"), 2),
            (&*format!("referee-manifest v1\n{h}  1  MANIFEST\n"), 2),
            ("referee-manifest v1\n\n", 2),
        ];
        for (text, line) in bad {
            match Manifest::parse(text) {
                Err(ManifestError::Parse { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(Manifest::parse("referee-manifest v1\n").unwrap().is_empty());
    }

    #[test]
    fn diff_reports_each_kind() {
        let old = Manifest::from_entries(vec![e("a", 1, 1), e("b", 1, 1), e("c", 1, 1)]).unwrap();
        let new = Manifest::from_entries(vec![e("b", 1, 2), e("c", 1, 1), e("d", 1, 1)]).unwrap();
        let d = old.diff(&new);
        assert_eq!(d.len(), 3);
        assert_eq!(d[0], Change::Removed("a".into()));
        assert!(matches!(&d[1], Change::Modified { path, .. } if path == "b"));
        assert_eq!(d[2], Change::Added("d".into()));
        assert!(old.diff(&old).is_empty());
        // Whatever one side has past the other's last path is reported too.
        let short = Manifest::from_entries(vec![e("b", 1, 1)]).unwrap();
        assert_eq!(
            old.diff(&short),
            [Change::Removed("a".into()), Change::Removed("c".into())]
        );
        assert_eq!(
            short.diff(&old),
            [Change::Added("a".into()), Change::Added("c".into())]
        );
        assert_eq!(
            Manifest::default().diff(&short),
            [Change::Added("b".into())]
        );
    }

    #[test]
    fn parse_names_each_line_problem() {
        let h = "00".repeat(32);
        let problem = |text: &str| match Manifest::parse(text) {
            Err(ManifestError::Parse { problem, .. }) => problem,
            other => panic!("{text:?}: {other:?}"),
        };
        assert!(matches!(
            problem(&format!("referee-manifest v1\n{h}  1  a\n{h}  1  a\n")),
            LineProblem::Twice { path } if path == "a"
        ));
        assert!(matches!(
            problem(&format!("referee-manifest v1\n{h}  1  b\n{h}  1  a\n")),
            LineProblem::OutOfOrder { path, after } if path == "a" && after == "b"
        ));
        // Lines too short to hold a hash, a size and a name (the last has
        // every separator but an empty name).
        for short in [format!("{h}  1"), format!("{h}  1  ")] {
            assert!(
                matches!(
                    problem(&format!("referee-manifest v1\n{short}\n")),
                    LineProblem::Shape { .. }
                ),
                "{short:?}"
            );
        }
        assert!(matches!(
            problem("referee-manifest v2\n"),
            LineProblem::Header { found } if found == "referee-manifest v2"
        ));
        // The shortest line there can be (a one-byte name) parses.
        let m = Manifest::parse(&format!("referee-manifest v1\n{h}  0  a\n")).unwrap();
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn entries_from_a_list_are_checked_like_a_parsed_manifest() {
        assert!(matches!(
            Manifest::from_entries(vec![e("a", 1, 1), e("b", 1, 1), e("a", 2, 2)]),
            Err(ManifestError::Parse {
                problem: LineProblem::Twice { .. },
                ..
            })
        ));
        assert!(Manifest::from_entries(vec![e("../a", 1, 1)]).is_err());
        let m = Manifest::from_entries(vec![e("b", 5, 2), e("a", 3, 1)]).unwrap();
        assert_eq!(m.len(), 2);
        assert!(!m.is_empty());
        assert_eq!(m.total_bytes(), 8);
        assert_eq!(m.entries()[0].path, "a");
        assert_eq!(m.get("b").map(|x| x.size), Some(5));
        assert_eq!(m.get("c"), None);
        assert_eq!(m.entries()[1].sha256_hex(), "02".repeat(32));
        assert!(Manifest::default().is_empty());
    }

    #[test]
    fn changes_print_their_path_and_what_differs() {
        let modified = |old_size, new_size| Change::Modified {
            path: "d/f".into(),
            old_size,
            new_size,
            old_sha256: [0; 32],
            new_sha256: [255; 32],
        };
        let (z, f) = ("00".repeat(32), "ff".repeat(32));
        assert_eq!(
            modified(1, 2).to_string(),
            format!("changed: d/f (size was 1, now 2; sha256 was {z}, now {f})")
        );
        assert_eq!(
            modified(1, 1).to_string(),
            format!("changed: d/f (sha256 was {z}, now {f})")
        );
        assert_eq!(modified(1, 1).path(), "d/f");
        assert_eq!(Change::Added("x".into()).to_string(), "added: x");
        assert_eq!(Change::Removed("y".into()).path(), "y");
        assert_eq!(Change::Removed("y".into()).to_string(), "removed: y");
    }

    #[test]
    fn errors_name_the_file_they_concern() {
        for e in [
            ManifestError::BadName { path: "a".into() },
            ManifestError::Symlink { path: "a".into() },
            ManifestError::NotRegular { path: "a".into() },
        ] {
            assert_eq!(e.rel_path(), Some("a"), "{e:?}");
        }
        assert_eq!(ManifestError::NotUtf8(PathBuf::from("x")).rel_path(), None);
    }

    /// A read interrupted by a signal is retried, not an error, and every
    /// byte after it is hashed.
    #[test]
    fn hashing_retries_interrupted_reads() {
        struct Flaky(u8, Vec<u8>);
        impl Read for Flaky {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.0 += 1;
                match self.0 {
                    1 => Err(io::Error::from(io::ErrorKind::Interrupted)),
                    2 => {
                        buf[..self.1.len()].copy_from_slice(&self.1);
                        Ok(self.1.len())
                    }
                    _ => Ok(0),
                }
            }
        }
        let (n, h) = hash_reader(&mut Flaky(0, b"abc".to_vec())).unwrap();
        assert_eq!(n, 3);
        assert_eq!(h, hash_reader(&mut &b"abc"[..]).unwrap().1);
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        assert!(hash_reader(&mut Broken).is_err());
    }

    /// A name that is not UTF-8 is reported under its lossy form, with the
    /// directory it is in. (Linux: other systems refuse such a name.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_name_that_is_not_utf8_is_reported_where_it_is() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("d")).unwrap();
        let name = std::ffi::OsStr::from_bytes(b"x\xff");
        fs::write(t.path().join("d").join(name), "x").unwrap();
        let scan = Manifest::scan(t.path()).unwrap();
        assert_eq!(scan.errors.len(), 1);
        assert_eq!(scan.errors[0].0, "d/x\u{fffd}");
        assert!(matches!(scan.errors[0].1, ManifestError::NotUtf8(_)));
    }
}
