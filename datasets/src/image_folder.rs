//! `ImageFolder`: an ImageNet-style folder tree of PNG files, decoded by a
//! background prefetch thread.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{DataError, DatasetLocation};
use crate::prefetch::{PREFETCH_DEPTH, Prefetch};
use crate::rng::{epoch_order, shard_range};

/// Mean of Fashion-MNIST training pixels scaled to `[0, 1]` (computed over
/// all 60,000 × 784 training pixels: 0.28604).
pub const FASHION_MNIST_MEAN: f32 = 0.2860;
/// Standard deviation of Fashion-MNIST training pixels scaled to `[0, 1]`
/// (population std over all training pixels: 0.35302).
pub const FASHION_MNIST_STD: f32 = 0.3530;

/// An image classification split laid out as `DIR/<split>/<class>/<file>.png`.
///
/// Classes are the sub-folders of `DIR/<split>`. Folder names of the form
/// `<n>_<name>` (as written by `prepare`) are ordered by `n`; otherwise they
/// are ordered by name. The label of a class is its position in that order.
/// Within a class, files are ordered by name; sample `i` is the `i`-th file
/// in (class, file name) order.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    samples: Arc<Vec<(PathBuf, u32)>>,
    ctx: DatasetLocation,
}

/// One batch of images in NCHW layout.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageBatch {
    /// `n × 1 × height × width` grayscale pixels, normalised as
    /// `(p / 255 - mean) / std` (by default the Fashion-MNIST constants
    /// [`FASHION_MNIST_MEAN`] and [`FASHION_MNIST_STD`]).
    pub pixels: Vec<f32>,
    /// Class labels, one per image.
    pub labels: Vec<u32>,
    /// Number of images in this batch (this rank's slice).
    pub n: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Image width in pixels.
    pub width: usize,
}

/// How to iterate over an [`ImageFolder`] for one epoch.
///
/// `batch_size` is the *global* batch size. With `world_size > 1`, each
/// global batch is cut into `world_size` contiguous slices (sizes differ by at
/// most one, `lo = len*rank/world_size`) and rank `rank` gets slice `rank`;
/// all ranks see the same number of batches (a rank's slice of a short last
/// batch may be empty, `n == 0`), and the slices of all ranks are disjoint and
/// cover the epoch.
///
/// The order is `0..len` when `shuffle` is false, else a Fisher–Yates
/// shuffle driven by `SplitMix64(derive_seed([seed, 0x11111111, epoch]))` (see
/// the crate docs): the same for every rank and for every run with the same
/// `(seed, epoch)`.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchOptions {
    /// Global batch size (> 0).
    pub batch_size: usize,
    /// Shuffle seed.
    pub seed: u64,
    /// Epoch number; each epoch gets a different shuffle.
    pub epoch: u64,
    /// Shuffle the samples (training) or keep the folder order (evaluation).
    pub shuffle: bool,
    /// Drop the last global batch if it is smaller than `batch_size`.
    pub drop_last: bool,
    /// This process's rank in `0..world_size`.
    pub rank: usize,
    /// Number of data-parallel ranks (> 0).
    pub world_size: usize,
    /// Normalisation mean (pixels scaled to `[0, 1]`).
    pub mean: f32,
    /// Normalisation standard deviation.
    pub std: f32,
}

impl BatchOptions {
    /// Defaults: seed 0, epoch 0, shuffle, keep the last batch, rank 0 of 1,
    /// Fashion-MNIST normalisation.
    pub fn new(batch_size: usize) -> Self {
        BatchOptions {
            batch_size,
            seed: 0,
            epoch: 0,
            shuffle: true,
            drop_last: false,
            rank: 0,
            world_size: 1,
            mean: FASHION_MNIST_MEAN,
            std: FASHION_MNIST_STD,
        }
    }

    /// Set the seed and the epoch.
    pub fn seed(mut self, seed: u64, epoch: u64) -> Self {
        self.seed = seed;
        self.epoch = epoch;
        self
    }

    /// Set whether to shuffle.
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// Set whether to drop a short last batch.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Set this process's shard.
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }
}

/// Iterator over the batches of one epoch, decoded ahead of time by a
/// background thread (bounded to [`PREFETCH_DEPTH`] batches). Yields an error
/// (and then stops) if a file cannot be read or decoded.
pub struct ImageBatches {
    inner: Prefetch<Result<ImageBatch, DataError>>,
    remaining: usize,
}

impl Iterator for ImageBatches {
    type Item = Result<ImageBatch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next();
        match &item {
            Some(Ok(_)) => self.remaining = self.remaining.saturating_sub(1),
            _ => self.remaining = 0,
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

impl ImageFolder {
    /// List `dir/<split>` (e.g. `DATA_DIR/fashion_mnist`, `"train"`). Reads
    /// directory entries only; no image is opened.
    pub fn open(dir: &Path, split: &str) -> Result<ImageFolder, DataError> {
        let ctx = DatasetLocation::from_dataset_dir(dir);
        let root = dir.join(split);
        if !root.is_dir() {
            return Err(ctx.not_prepared(format!("no directory {}", root.display())));
        }
        let mut class_dirs: Vec<String> = list(&root, &ctx)?
            .into_iter()
            .filter(|(_, is_dir)| *is_dir)
            .map(|(name, _)| name)
            .collect();
        let numeric = |s: &str| s.split_once('_').and_then(|(n, _)| n.parse::<u64>().ok());
        if class_dirs.iter().all(|d| numeric(d).is_some()) {
            class_dirs.sort_by(|a, b| (numeric(a), a).cmp(&(numeric(b), b)));
        } else {
            class_dirs.sort();
        }
        let mut samples = Vec::new();
        for (label, class) in class_dirs.iter().enumerate() {
            let mut files: Vec<String> = list(&root.join(class), &ctx)?
                .into_iter()
                .filter(|(name, is_dir)| !*is_dir && name.to_ascii_lowercase().ends_with(".png"))
                .map(|(name, _)| name)
                .collect();
            files.sort();
            samples.extend(
                files
                    .into_iter()
                    .map(|f| (root.join(class).join(f), label as u32)),
            );
        }
        if samples.is_empty() {
            return Err(ctx.not_prepared(format!("no PNG files under {}", root.display())));
        }
        Ok(ImageFolder {
            root,
            classes: class_dirs,
            samples: Arc::new(samples),
            ctx,
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True if there are no images (never, for an opened folder).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Class folder names, indexed by label.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The split directory (`DIR/<split>`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Label of sample `i`.
    pub fn label(&self, i: usize) -> u32 {
        self.samples[i].1
    }

    /// Number of batches one epoch yields with these options.
    pub fn num_batches(&self, opts: &BatchOptions) -> usize {
        if opts.drop_last {
            self.len() / opts.batch_size
        } else {
            self.len().div_ceil(opts.batch_size)
        }
    }

    /// Iterate over one epoch (see [`BatchOptions`]), decoding on a
    /// background thread.
    ///
    /// # Panics
    /// If `batch_size == 0`, `world_size == 0` or `rank >= world_size`.
    pub fn batches(&self, opts: &BatchOptions) -> ImageBatches {
        assert!(opts.batch_size > 0, "batch_size must be > 0");
        assert!(
            opts.world_size > 0 && opts.rank < opts.world_size,
            "rank {} is not in 0..{}",
            opts.rank,
            opts.world_size
        );
        let order = epoch_order(self.len(), opts.seed, opts.epoch, opts.shuffle);
        let num_batches = self.num_batches(opts);
        let samples = Arc::clone(&self.samples);
        let ctx = self.ctx.clone();
        let o = opts.clone();
        let mut failed = false;
        let mut dims: Option<(usize, usize)> = None;
        let producer = (0..num_batches).map_while(move |b| {
            if failed {
                return None;
            }
            let start = b * o.batch_size;
            let end = (start + o.batch_size).min(order.len());
            let (lo, hi) = shard_range(end - start, o.rank, o.world_size);
            let result = decode_batch(
                &samples,
                &order[start + lo..start + hi],
                &mut dims,
                o.mean,
                o.std,
                &ctx,
            );
            failed = result.is_err();
            Some(result)
        });
        ImageBatches {
            inner: Prefetch::spawn("referee-image-prefetch", PREFETCH_DEPTH, producer),
            remaining: num_batches,
        }
    }
}

fn list(dir: &Path, ctx: &DatasetLocation) -> Result<Vec<(String, bool)>, DataError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(ctx.io(dir, "list directory"))? {
        let entry = entry.map_err(ctx.io(dir, "list directory"))?;
        let is_dir = entry
            .file_type()
            .map_err(ctx.io(&entry.path(), "stat"))?
            .is_dir();
        out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    Ok(out)
}

/// Read and decode one PNG as 8-bit grayscale.
pub(crate) fn decode_png_gray(
    path: &Path,
    ctx: &DatasetLocation,
) -> Result<(Vec<u8>, usize, usize), DataError> {
    let bytes = fs::read(path).map_err(ctx.io(path, "read"))?;
    crate::png_gray::decode(&bytes)
        .map_err(|e| ctx.corrupt(path, format!("cannot decode PNG: {e}")))
}

fn decode_batch(
    samples: &[(PathBuf, u32)],
    indices: &[u32],
    dims: &mut Option<(usize, usize)>,
    mean: f32,
    std: f32,
    ctx: &DatasetLocation,
) -> Result<ImageBatch, DataError> {
    let scale = 1.0 / (255.0 * std);
    let offset = mean / std;
    let mut pixels = Vec::new();
    let mut labels = Vec::with_capacity(indices.len());
    for &i in indices {
        let (path, label) = &samples[i as usize];
        let (raw, h, w) = decode_png_gray(path, ctx)?;
        match *dims {
            None => *dims = Some((h, w)),
            Some(d) if d != (h, w) => {
                return Err(ctx.corrupt(
                    path,
                    format!("image is {h}x{w}, other images are {}x{}", d.0, d.1),
                ));
            }
            Some(_) => {}
        }
        if pixels.capacity() == 0 {
            pixels.reserve_exact(indices.len() * h * w);
        }
        pixels.extend(raw.iter().map(|&p| p as f32 * scale - offset));
        labels.push(*label);
    }
    let (height, width) = dims.unwrap_or((0, 0));
    Ok(ImageBatch {
        pixels,
        labels,
        n: indices.len(),
        height,
        width,
    })
}
