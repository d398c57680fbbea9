//! Fashion-MNIST: Debian package -> verified IDX -> ImageNet-style PNG tree.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use rayon::prelude::*;
use serde_json::json;

use crate::ProgressEvent;
use crate::error::{DataError, DatasetLocation};
use crate::fetch::{ScratchDir, cached_archive, run_tool};
use crate::idx::{IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC, IdxArray, decode_idx, read_maybe_gz};
use crate::image_folder::{FASHION_MNIST_MEAN, FASHION_MNIST_STD};
use crate::manifest::{FileEntry, Manifest, Source, sha256_hex, write_file};

/// Dataset name.
pub(crate) const NAME: &str = "fashion_mnist";
/// Conversion recipe; bump when the produced files change.
pub(crate) const RECIPE: &str = "fashion_mnist/png-tree/v1";

const DEB_PACKAGE: &str = "dataset-fashion-mnist";
const DEB_VERSION: &str = "0.0~git20200523.55506a9-1";
const DEB_FILE: &str = "dataset-fashion-mnist_0.0~git20200523.55506a9-1_all.deb";
const DEB_SHA256: &str = "39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0";
const IDX_DIR_IN_DEB: &str = "usr/share/datasets/fashion-mnist";

/// One IDX input: its name (read as `NAME.gz`, else `NAME`), the sha256 of
/// its decompressed content, and its magic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdxInput {
    pub name: &'static str,
    pub sha256: &'static str,
    pub magic: u32,
}

pub(crate) const TRAIN_IMAGES: IdxInput = IdxInput {
    name: "train-images-idx3-ubyte",
    sha256: "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    magic: IDX_IMAGES_MAGIC,
};
pub(crate) const TRAIN_LABELS: IdxInput = IdxInput {
    name: "train-labels-idx1-ubyte",
    sha256: "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    magic: IDX_LABELS_MAGIC,
};
pub(crate) const VAL_IMAGES: IdxInput = IdxInput {
    name: "t10k-images-idx3-ubyte",
    sha256: "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    magic: IDX_IMAGES_MAGIC,
};
pub(crate) const VAL_LABELS: IdxInput = IdxInput {
    name: "t10k-labels-idx1-ubyte",
    sha256: "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    magic: IDX_LABELS_MAGIC,
};

/// The ten Fashion-MNIST classes, by label.
pub const FASHION_MNIST_CLASSES: [&str; 10] = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
];

/// Folder name of class `label`: `<label>_<name>` with `/` and spaces made `_`
/// (`0_T-shirt_top`, ..., `9_Ankle_boot`).
pub(crate) fn class_dir(label: usize) -> String {
    format!(
        "{label}_{}",
        FASHION_MNIST_CLASSES[label].replace(['/', ' '], "_")
    )
}

pub(crate) fn source() -> Source {
    Source {
        kind: "deb".into(),
        package: DEB_PACKAGE.into(),
        version: DEB_VERSION.into(),
        archive: DEB_FILE.into(),
        sha256: DEB_SHA256.into(),
    }
}

pub(crate) fn apt_hint(stderr: &str) -> String {
    if stderr.contains("Unable to locate package")
        || stderr.contains("has no installation candidate")
    {
        "the apt package lists are missing or stale: run `apt-get update` (as root)".into()
    } else if stderr.contains("was not found") {
        format!(
            "version {DEB_VERSION} of {DEB_PACKAGE} is not in the apt package lists: run `apt-get update` and check that \
             the apt sources include Debian's main archive"
        )
    } else {
        "check that the apt sources are reachable and run `apt-get update`".into()
    }
}

/// Download (or reuse the cached) .deb, verify it, extract it and convert.
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
    let pin = format!("{DEB_PACKAGE}={DEB_VERSION}");
    let deb = cached_archive(
        ctx,
        DEB_FILE,
        DEB_SHA256,
        &format!("Debian package {pin}"),
        &|dir| {
            run_tool(
                ctx,
                "apt-get",
                &[OsStr::new("download"), OsStr::new(&pin)],
                dir,
                "this needs a Debian-based system with apt (`apt-get download` fetches the package without installing it)",
                &apt_hint,
            )
        },
        &step,
    )?;
    step(format!("extracting {}", deb.display()));
    let scratch = ScratchDir::new_in(&ctx.data_dir, &format!(".{NAME}.extract-"), ctx)?;
    run_tool(
        ctx,
        "dpkg-deb",
        &[
            OsStr::new("-x"),
            deb.as_os_str(),
            scratch.path().as_os_str(),
        ],
        &ctx.data_dir,
        "install dpkg (`apt-get install dpkg`)",
        &|_| format!("{} may be damaged: delete it", deb.display()),
    )?;
    build_from_idx(
        out,
        &scratch.path().join(IDX_DIR_IN_DEB),
        true,
        source(),
        ctx,
        progress,
    )
}

fn load_idx(
    dir: &Path,
    input: IdxInput,
    check_hash: bool,
    ctx: &DatasetLocation,
    hashes: &mut BTreeMap<String, String>,
) -> Result<IdxArray, DataError> {
    let gz = dir.join(format!("{}.gz", input.name));
    let path = if gz.is_file() {
        gz
    } else {
        dir.join(input.name)
    };
    if !path.is_file() {
        return Err(ctx.corrupt(
            &path,
            format!(
                "missing from the extracted package (expected {} or {}.gz)",
                input.name, input.name
            ),
        ));
    }
    let bytes = read_maybe_gz(&path, ctx)?;
    let hash = sha256_hex(&bytes);
    if check_hash && hash != input.sha256 {
        return Err(ctx.corrupt(
            &path,
            format!(
                "decompressed content has sha256 {hash}, expected {}",
                input.sha256
            ),
        ));
    }
    hashes.insert(input.name.to_owned(), hash);
    decode_idx(&bytes, input.magic, &path, ctx)
}

/// Convert the four IDX files in `idx_dir` into the PNG tree under `out`.
/// `check_hashes` compares the decompressed IDX files with the pinned
/// hashes (off only for test fixtures).
pub(crate) fn build_from_idx(
    out: &Path,
    idx_dir: &Path,
    check_hashes: bool,
    source: Source,
    ctx: &DatasetLocation,
    progress: &dyn Fn(ProgressEvent),
) -> Result<Manifest, DataError> {
    let mut files: Vec<FileEntry> = Vec::new();
    let mut counts = BTreeMap::new();
    let mut idx_hashes = BTreeMap::new();
    let mut per_class = BTreeMap::new();
    let mut shape = (0usize, 0usize);
    let splits = [
        ("train", TRAIN_IMAGES, TRAIN_LABELS),
        ("val", VAL_IMAGES, VAL_LABELS),
    ];
    for (split, images_in, labels_in) in splits {
        progress(ProgressEvent::Step {
            dataset: NAME.into(),
            message: format!("decoding {} and {}", images_in.name, labels_in.name),
        });
        let images = load_idx(idx_dir, images_in, check_hashes, ctx, &mut idx_hashes)?;
        let labels = load_idx(idx_dir, labels_in, check_hashes, ctx, &mut idx_hashes)?;
        let images_path = idx_dir.join(images_in.name);
        if images.dims.len() != 3 {
            return Err(ctx.corrupt(
                &images_path,
                format!("expected 3 dimensions, found {:?}", images.dims),
            ));
        }
        let (n, rows, cols) = (images.dims[0], images.dims[1], images.dims[2]);
        if labels.dims != [n] {
            return Err(ctx.corrupt(
                &idx_dir.join(labels_in.name),
                format!(
                    "{} labels for {n} images",
                    labels.dims.first().copied().unwrap_or(0)
                ),
            ));
        }
        if let Some(bad) = labels
            .data
            .iter()
            .find(|&&l| l as usize >= FASHION_MNIST_CLASSES.len())
        {
            return Err(ctx.corrupt(
                &idx_dir.join(labels_in.name),
                format!("label {bad} out of range 0..10"),
            ));
        }
        if shape != (0, 0) && shape != (rows, cols) {
            return Err(ctx.corrupt(
                &images_path,
                format!("images are {rows}x{cols}, train images are {shape:?}"),
            ));
        }
        shape = (rows, cols);
        for label in 0..FASHION_MNIST_CLASSES.len() {
            let d = out.join(split).join(class_dir(label));
            fs::create_dir_all(&d).map_err(ctx.io(&d, "create directory"))?;
        }
        let mut class_counts = [0u64; 10];
        for &l in &labels.data {
            class_counts[l as usize] += 1;
        }
        per_class.insert(split.to_owned(), class_counts.to_vec());
        counts.insert(format!("{split}_samples"), n as u64);

        let px = rows * cols;
        const CHUNK: usize = 5000;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            let chunk: Result<Vec<FileEntry>, DataError> = (start..end)
                .into_par_iter()
                .map(|i| {
                    let png = crate::png_gray::encode(
                        &images.data[i * px..(i + 1) * px],
                        cols as u32,
                        rows as u32,
                    );
                    let rel = format!("{split}/{}/{i:05}.png", class_dir(labels.data[i] as usize));
                    write_file(out, &rel, &png, ctx)
                })
                .collect();
            files.extend(chunk?);
            progress(ProgressEvent::Progress {
                dataset: NAME.into(),
                message: format!("writing {split} PNGs"),
                done: end as u64,
                total: n as u64,
            });
        }
    }
    counts.insert("classes".into(), FASHION_MNIST_CLASSES.len() as u64);
    let mut params = BTreeMap::new();
    params.insert("class_names".into(), json!(FASHION_MNIST_CLASSES));
    params.insert(
        "class_dirs".into(),
        json!(
            (0..FASHION_MNIST_CLASSES.len())
                .map(class_dir)
                .collect::<Vec<_>>()
        ),
    );
    params.insert("image_shape_chw".into(), json!([1, shape.0, shape.1]));
    params.insert("idx_sha256_decompressed".into(), json!(idx_hashes));
    params.insert("per_class_samples".into(), json!(per_class));
    params.insert(
        "normalization".into(),
        json!({"mean": format!("{FASHION_MNIST_MEAN:.4}"), "std": format!("{FASHION_MNIST_STD:.4}"), "formula": "(p / 255 - mean) / std"}),
    );
    params.insert(
        "val_split".into(),
        json!("the official 10,000-image t10k test set"),
    );
    Ok(Manifest::new(NAME, RECIPE, source, counts, params, files))
}
