//! The byte-level BPE tokenizer: training (at prepare time) and the
//! [`Tokenizer`] wrapper used by workloads.

use std::fs;
use std::path::{Path, PathBuf};

use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer as HfTokenizer};

use crate::error::{DataError, DatasetLocation};
use crate::manifest::{read_manifest, sha256_hex};

/// File name of the tokenizer inside the dataset directory.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The end-of-text special token appended after every work.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Train a GPT-2 style byte-level BPE: no normaliser, `ByteLevel`
/// pre-tokenizer (GPT-2 regex, no prefix space) and decoder, the 256-byte
/// initial alphabet, `END_OF_TEXT` as special token id 0, `vocab_size` tokens
/// in total, `min_frequency` 0.
pub(crate) fn train_bpe(texts: &[&str], vocab_size: usize) -> tokenizers::Result<HfTokenizer> {
    let mut tok = HfTokenizer::new(BPE::default());
    tok.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tok.with_decoder(Some(ByteLevel::new(false, true, true)));
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .show_progress(false)
        .vocab_size(vocab_size)
        .min_frequency(0)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(vec![AddedToken::from(END_OF_TEXT, true)])
        .build()
        .into();
    tok.train(&mut trainer, texts.iter())?;
    Ok(tok)
}

/// A loaded `tokenizer.json`.
pub struct Tokenizer {
    inner: HfTokenizer,
    path: PathBuf,
    sha256: String,
    ctx: DatasetLocation,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

impl Tokenizer {
    /// Load `dir/tokenizer.json` of a text dataset prepared by `recipe` and
    /// check its sha256 against the `tokenizer_sha256` recorded in
    /// `dir/MANIFEST.json`.
    pub(crate) fn open_pinned(dir: &Path, recipe: &str) -> Result<Tokenizer, DataError> {
        let ctx = DatasetLocation::from_dataset_dir(dir);
        let manifest = read_manifest(dir, recipe, &ctx)?;
        let tok = Self::load(&dir.join(TOKENIZER_FILE), ctx)?;
        let manifest_path = dir.join(crate::MANIFEST_FILE);
        let pinned = manifest.param_str("tokenizer_sha256").ok_or_else(|| {
            tok.ctx
                .bad_manifest(&manifest_path, "no `tokenizer_sha256` parameter")
        })?;
        if pinned != tok.sha256 {
            return Err(tok.ctx.hash_mismatch(&tok.path, pinned, &tok.sha256));
        }
        Ok(tok)
    }

    /// Load any `tokenizer.json` (no pin check).
    pub fn from_file(path: &Path) -> Result<Tokenizer, DataError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::load(path, DatasetLocation::from_dataset_dir(dir))
    }

    fn load(path: &Path, ctx: DatasetLocation) -> Result<Tokenizer, DataError> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ctx.not_prepared(format!("no file {}", path.display())));
            }
            Err(e) => return Err(ctx.io(path, "read")(e)),
        };
        let inner = HfTokenizer::from_bytes(&bytes).map_err(|e| ctx.tokenizer(path, e))?;
        Ok(Tokenizer {
            inner,
            path: path.to_path_buf(),
            sha256: sha256_hex(&bytes),
            ctx,
        })
    }

    /// Number of token ids, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// sha256 of the `tokenizer.json` bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Id of [`END_OF_TEXT`], if the tokenizer has it.
    pub fn eot_id(&self) -> Option<u32> {
        self.inner.token_to_id(END_OF_TEXT)
    }

    /// Encode text to token ids (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DataError> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| self.ctx.tokenizer(&self.path, e))
    }

    /// Decode token ids to text (special tokens kept).
    pub fn decode(&self, ids: &[u32]) -> Result<String, DataError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| self.ctx.tokenizer(&self.path, e))
    }
}
