//! `TokenDataset`: a split of little-endian `u16` token ids, served as
//! random training windows or fixed evaluation windows.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{DataError, DatasetLocation};
use crate::prefetch::{PREFETCH_DEPTH, Prefetch};
use crate::rng::{DOMAIN_TOKEN_WINDOWS, SplitMix64, derive_seed, shard_range};

/// A batch of next-token-prediction windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBatch {
    /// `n × seq_len` input token ids, row-major.
    pub inputs: Vec<u32>,
    /// `n × seq_len` targets: `targets[i][t] = inputs[i][t + 1]` (the next token).
    pub targets: Vec<u32>,
    /// Number of windows (rows) in this batch.
    pub n: usize,
}

/// Token ids of one split (`DIR/<split>.bin`), held in memory.
#[derive(Debug, Clone)]
pub struct TokenDataset {
    path: PathBuf,
    tokens: Arc<Vec<u16>>,
    ctx: DatasetLocation,
}

/// Iterator over token batches, produced ahead by a background thread
/// (bounded to [`crate::PREFETCH_DEPTH`] batches).
pub struct TokenBatches {
    inner: Prefetch<TokenBatch>,
    remaining: Option<usize>,
}

impl Iterator for TokenBatches {
    type Item = TokenBatch;

    fn next(&mut self) -> Option<TokenBatch> {
        let item = self.inner.next();
        if let Some(r) = &mut self.remaining {
            *r = r.saturating_sub(1);
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining {
            Some(r) => (r, Some(r)),
            None => (usize::MAX, None),
        }
    }
}

impl TokenDataset {
    /// Read `dir/<split>.bin` (e.g. `DATA_DIR/shakespeare`, `"train"`).
    pub fn open(dir: &Path, split: &str) -> Result<TokenDataset, DataError> {
        let ctx = DatasetLocation::from_dataset_dir(dir);
        let path = dir.join(format!("{split}.bin"));
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ctx.not_prepared(format!("no file {}", path.display())));
            }
            Err(e) => return Err(ctx.io(&path, "read")(e)),
        };
        if bytes.len() % 2 != 0 {
            return Err(ctx.corrupt(
                &path,
                format!("odd length {} for a file of u16 tokens", bytes.len()),
            ));
        }
        let tokens: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        Ok(TokenDataset {
            path,
            tokens: Arc::new(tokens),
            ctx,
        })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True if the split has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The token ids.
    pub fn tokens(&self) -> &[u16] {
        &self.tokens
    }

    fn check_len(&self, seq_len: usize) -> Result<(), DataError> {
        if seq_len == 0 || self.tokens.len() <= seq_len {
            return Err(self.ctx.corrupt(
                &self.path,
                format!(
                    "{} tokens are too few for windows of seq_len {seq_len} (need seq_len + 1 tokens, seq_len > 0)",
                    self.tokens.len()
                ),
            ));
        }
        Ok(())
    }

    /// An endless stream of training batches of random windows.
    ///
    /// Step `s` (counting from 0) draws `batch_size` window starts uniformly
    /// from `0..=len - seq_len - 1` with
    /// `SplitMix64(derive_seed([seed, 0x22222222, s]))`; window `i` gives
    /// `inputs = tokens[start..start + seq_len]` and `targets` shifted by
    /// one. `batch_size` is global: rank `rank` of `world_size` gets the
    /// contiguous slice `batch_size*rank/world_size ..
    /// batch_size*(rank+1)/world_size` of the global batch, so the ranks'
    /// windows are disjoint slices of the same global batch. Take as many
    /// steps as needed (`.take(steps)`).
    ///
    /// # Panics
    /// If `batch_size == 0`, `world_size == 0` or `rank >= world_size`.
    pub fn train_batches(
        &self,
        batch_size: usize,
        seq_len: usize,
        seed: u64,
        rank: usize,
        world_size: usize,
    ) -> Result<TokenBatches, DataError> {
        assert!(batch_size > 0, "batch_size must be > 0");
        assert!(
            world_size > 0 && rank < world_size,
            "rank {rank} is not in 0..{world_size}"
        );
        self.check_len(seq_len)?;
        let tokens = Arc::clone(&self.tokens);
        let (lo, hi) = shard_range(batch_size, rank, world_size);
        let producer = (0u64..).map(move |step| {
            let mut rng = SplitMix64::new(derive_seed(&[seed, DOMAIN_TOKEN_WINDOWS, step]));
            let span = (tokens.len() - seq_len) as u64;
            let starts: Vec<usize> = (0..batch_size).map(|_| rng.below(span) as usize).collect();
            windows(&tokens, &starts[lo..hi], seq_len)
        });
        Ok(TokenBatches {
            inner: Prefetch::spawn("referee-token-prefetch", PREFETCH_DEPTH, producer),
            remaining: None,
        })
    }

    /// Fixed evaluation batches: the first `K = min(max_sequences, (len - 1)
    /// / seq_len)` consecutive, non-overlapping windows (window `k` starts at
    /// `k * seq_len`), in order, `batch_size` windows per batch (the last
    /// batch may be smaller). Every call yields exactly the same batches.
    ///
    /// # Panics
    /// If `batch_size == 0`.
    pub fn eval_batches(
        &self,
        batch_size: usize,
        seq_len: usize,
        max_sequences: usize,
    ) -> Result<TokenBatches, DataError> {
        assert!(batch_size > 0, "batch_size must be > 0");
        self.check_len(seq_len)?;
        let k = max_sequences.min((self.tokens.len() - 1) / seq_len);
        let tokens = Arc::clone(&self.tokens);
        let num_batches = k.div_ceil(batch_size);
        let producer = (0..num_batches).map(move |b| {
            let starts: Vec<usize> = (b * batch_size..((b + 1) * batch_size).min(k))
                .map(|w| w * seq_len)
                .collect();
            windows(&tokens, &starts, seq_len)
        });
        Ok(TokenBatches {
            inner: Prefetch::spawn("referee-token-eval", PREFETCH_DEPTH, producer),
            remaining: Some(num_batches),
        })
    }
}

fn windows(tokens: &[u16], starts: &[usize], seq_len: usize) -> TokenBatch {
    let mut inputs = Vec::with_capacity(starts.len() * seq_len);
    let mut targets = Vec::with_capacity(starts.len() * seq_len);
    for &s in starts {
        inputs.extend(tokens[s..s + seq_len].iter().map(|&t| t as u32));
        targets.extend(tokens[s + 1..s + seq_len + 1].iter().map(|&t| t as u32));
    }
    TokenBatch {
        inputs,
        targets,
        n: starts.len(),
    }
}
