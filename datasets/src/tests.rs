//! Offline tests on generated fixtures (no network, no real data).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;
use crate::fashion_mnist::build_from_idx;
use crate::idx::{IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC, encode_idx};
use crate::image_folder::decode_png_gray;
use crate::rng::SplitMix64;
use crate::shakespeare::{TextRecipe, Work, build_from_works};

const SIDE: usize = 28;

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// Image `i` of a fixture split: pixels 0 and 1 encode `id = base + i`, the
/// rest is a pattern. Label `id % 10`.
fn fixture_image(id: usize) -> Vec<u8> {
    let mut px: Vec<u8> = (0..SIDE * SIDE)
        .map(|p| ((p * 7 + id * 13) % 251) as u8)
        .collect();
    px[0] = (id % 256) as u8;
    px[1] = (id / 256) as u8;
    px
}

fn id_of(pixels: &[f32]) -> usize {
    let raw = |v: f32| ((v * FASHION_MNIST_STD + FASHION_MNIST_MEAN) * 255.0).round() as usize;
    raw(pixels[0]) + 256 * raw(pixels[1])
}

/// Write the four gzipped IDX files; train ids are `0..n_train`, val ids
/// `1000..1000 + n_val`.
fn write_idx_fixture(dir: &Path, n_train: usize, n_val: usize) {
    fs::create_dir_all(dir).unwrap();
    for (prefix, base, n) in [("train", 0, n_train), ("t10k", 1000, n_val)] {
        let images: Vec<u8> = (0..n).flat_map(|i| fixture_image(base + i)).collect();
        let labels: Vec<u8> = (0..n).map(|i| ((base + i) % 10) as u8).collect();
        fs::write(
            dir.join(format!("{prefix}-images-idx3-ubyte.gz")),
            gz(&encode_idx(IDX_IMAGES_MAGIC, &[n, SIDE, SIDE], &images)),
        )
        .unwrap();
        fs::write(
            dir.join(format!("{prefix}-labels-idx1-ubyte.gz")),
            gz(&encode_idx(IDX_LABELS_MAGIC, &[n], &labels)),
        )
        .unwrap();
    }
}

fn prepare_fashion_fixture(
    data_dir: &Path,
    idx_dir: &Path,
    events: &RefCell<Vec<ProgressEvent>>,
) -> Result<Manifest, DataError> {
    let progress = |e: ProgressEvent| events.borrow_mut().push(e);
    prepare_with(
        fashion_mnist::NAME,
        fashion_mnist::RECIPE,
        data_dir,
        &progress,
        &|out, ctx| build_from_idx(out, idx_dir, false, fashion_mnist::source(), ctx, &progress),
    )
}

struct FashionFixture {
    _tmp: tempfile::TempDir,
    data_dir: PathBuf,
    idx_dir: PathBuf,
}

impl FashionFixture {
    fn new(n_train: usize, n_val: usize) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let data_dir = tmp.path().join("data");
        let idx_dir = tmp.path().join("idx");
        write_idx_fixture(&idx_dir, n_train, n_val);
        let events = RefCell::new(Vec::new());
        prepare_fashion_fixture(&data_dir, &idx_dir, &events).unwrap();
        FashionFixture {
            _tmp: tmp,
            data_dir,
            idx_dir,
        }
    }

    fn dir(&self) -> PathBuf {
        self.data_dir.join("fashion_mnist")
    }

    fn fix(&self) -> String {
        format!(
            "run `referee data prepare fashion_mnist --data-dir {}`",
            std::path::absolute(&self.data_dir).unwrap().display()
        )
    }
}

fn hidden_entries(data_dir: &Path) -> Vec<String> {
    fs::read_dir(data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

// ---------------------------------------------------------------- prepare / verify

#[test]
fn fashion_fixture_prepares_verifies_and_is_idempotent() {
    let fx = FashionFixture::new(30, 12);
    let m = verify("fashion_mnist", &fx.data_dir).unwrap();
    assert_eq!(m.count("train_samples"), Some(30));
    assert_eq!(m.count("val_samples"), Some(12));
    assert_eq!(m.count("classes"), Some(10));
    assert_eq!(m.files.len(), 42);
    assert!(m.file("train/3_Dress/00003.png").is_some());
    assert!(
        m.file("val/9_Ankle_boot/00009.png").is_some(),
        "val id 1009 has label 9"
    );
    assert!(m.files.windows(2).all(|w| w[0].path < w[1].path));
    assert_eq!(
        m.source.sha256,
        "39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0"
    );
    assert_eq!(
        open_manifest("fashion_mnist", &fx.data_dir)
            .unwrap()
            .fingerprint,
        m.fingerprint
    );
    assert!(
        hidden_entries(&fx.data_dir).is_empty(),
        "no scratch dirs left"
    );

    let events = RefCell::new(Vec::new());
    let again = prepare_fashion_fixture(&fx.data_dir, &fx.idx_dir, &events).unwrap();
    assert_eq!(again.fingerprint, m.fingerprint);
    assert_eq!(
        events.into_inner(),
        vec![ProgressEvent::UpToDate {
            dataset: "fashion_mnist".into(),
            fingerprint: m.fingerprint.clone()
        }]
    );
}

#[test]
fn png_round_trip_is_lossless() {
    let tmp = tempfile::tempdir().unwrap();
    let px = fixture_image(777);
    let path = tmp.path().join("x.png");
    fs::write(
        &path,
        crate::png_gray::encode(&px, SIDE as u32, SIDE as u32),
    )
    .unwrap();
    let (back, h, w) =
        decode_png_gray(&path, &error::DatasetLocation::new("t", tmp.path())).unwrap();
    assert_eq!((h, w), (SIDE, SIDE));
    assert_eq!(back, px);
}

#[test]
fn verify_detects_a_flipped_byte_and_prepare_rebuilds() {
    let fx = FashionFixture::new(20, 10);
    let fp = open_manifest("fashion_mnist", &fx.data_dir)
        .unwrap()
        .fingerprint;
    let victim = fx.dir().join("train/3_Dress/00013.png");
    let mut bytes = fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    fs::write(&victim, &bytes).unwrap();

    let e = verify("fashion_mnist", &fx.data_dir).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DataError::HashMismatch { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!("{}: sha256 mismatch (expected ", victim.display())),
        "{msg}"
    );
    assert!(msg.ends_with(&format!("{} to rebuild", fx.fix())), "{msg}");
    // open_manifest does not hash files, so it still succeeds.
    assert_eq!(
        open_manifest("fashion_mnist", &fx.data_dir)
            .unwrap()
            .fingerprint,
        fp
    );

    let events = RefCell::new(Vec::new());
    let m = prepare_fashion_fixture(&fx.data_dir, &fx.idx_dir, &events).unwrap();
    assert!(matches!(
        events.borrow()[0],
        ProgressEvent::Rebuilding { .. }
    ));
    assert!(matches!(
        events.borrow().last(),
        Some(ProgressEvent::Finished { .. })
    ));
    assert_eq!(m.fingerprint, fp, "the rebuild reproduces the same data");
    verify("fashion_mnist", &fx.data_dir).unwrap();
    assert!(
        hidden_entries(&fx.data_dir).is_empty(),
        "old and scratch dirs removed"
    );
}

#[test]
fn verify_detects_a_deleted_file() {
    let fx = FashionFixture::new(20, 10);
    let victim = fx.dir().join("val/0_T-shirt_top/00000.png");
    fs::remove_file(&victim).unwrap();
    let e = verify("fashion_mnist", &fx.data_dir).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DataError::MissingFile { .. }), "{msg}");
    assert_eq!(
        msg,
        format!(
            "{}: listed in the manifest but missing: {} to rebuild",
            victim.display(),
            fx.fix()
        )
    );
}

#[test]
fn verify_detects_a_size_change_a_stray_file_and_an_edited_manifest() {
    let fx = FashionFixture::new(20, 10);
    let victim = fx.dir().join("train/1_Trouser/00001.png");
    let mut bytes = fs::read(&victim).unwrap();
    bytes.push(0);
    fs::write(&victim, &bytes).unwrap();
    let e = verify("fashion_mnist", &fx.data_dir).unwrap_err();
    assert!(matches!(e, DataError::SizeMismatch { .. }), "{e}");
    bytes.pop();
    fs::write(&victim, &bytes).unwrap();
    verify("fashion_mnist", &fx.data_dir).unwrap();

    let stray = fx.dir().join("train/1_Trouser/extra.png");
    fs::write(&stray, b"x").unwrap();
    let e = verify("fashion_mnist", &fx.data_dir).unwrap_err();
    assert!(matches!(e, DataError::UnexpectedFile { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&stray.display().to_string()),
        "{e}"
    );
    fs::remove_file(&stray).unwrap();

    let manifest = fx.dir().join(MANIFEST_FILE);
    let text = fs::read_to_string(&manifest).unwrap();
    fs::write(
        &manifest,
        text.replacen("\"train_samples\": 20", "\"train_samples\": 21", 1),
    )
    .unwrap();
    for e in [
        verify("fashion_mnist", &fx.data_dir).unwrap_err(),
        open_manifest("fashion_mnist", &fx.data_dir).unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(
            msg.contains("MANIFEST.json: invalid manifest: fingerprint mismatch"),
            "{msg}"
        );
        assert!(msg.ends_with(&format!("{} to rebuild", fx.fix())), "{msg}");
    }
}

#[test]
fn missing_and_unknown_datasets_name_the_fix_command() {
    let tmp = tempfile::tempdir().unwrap();
    let e = verify("shakespeare", tmp.path()).unwrap_err();
    let abs = std::path::absolute(tmp.path()).unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "dataset `shakespeare` is not prepared in {} (no directory {}/shakespeare): run `referee data prepare shakespeare --data-dir {}`",
            abs.display(),
            abs.display(),
            abs.display()
        )
    );
    let e = open_manifest("cifar10", tmp.path()).unwrap_err();
    assert!(matches!(e, DataError::UnknownDataset { .. }));
    assert!(
        e.to_string()
            .contains("known datasets: fashion_mnist, shakespeare"),
        "{e}"
    );
    let e = prepare("cifar10", tmp.path(), &|_| {}).unwrap_err();
    assert!(matches!(e, DataError::UnknownDataset { .. }));
    assert_eq!(dataset_names(), ["fashion_mnist", "shakespeare"]);
}

#[test]
fn a_failed_prepare_leaves_no_final_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    // A build that writes part of its output, then fails.
    let e = prepare_with(
        "fashion_mnist",
        fashion_mnist::RECIPE,
        &data_dir,
        &|_| {},
        &|out, ctx| {
            fs::create_dir_all(out.join("train")).unwrap();
            fs::write(out.join("train/half.png"), b"x").unwrap();
            Err(ctx.corrupt(out, "simulated failure"))
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("simulated failure"));
    assert!(!data_dir.join("fashion_mnist").exists());
    assert!(
        hidden_entries(&data_dir).is_empty(),
        "{:?}",
        hidden_entries(&data_dir)
    );

    // A real conversion that fails mid-way: the train split converts, then
    // the validation images turn out truncated.
    let idx_dir = tmp.path().join("idx");
    write_idx_fixture(&idx_dir, 20, 10);
    let val_images = idx_dir.join("t10k-images-idx3-ubyte.gz");
    let raw = encode_idx(
        IDX_IMAGES_MAGIC,
        &[10, SIDE, SIDE],
        &vec![0u8; 10 * SIDE * SIDE - 5],
    );
    fs::write(&val_images, gz(&raw)).unwrap();
    let events = RefCell::new(Vec::new());
    let e = prepare_fashion_fixture(&data_dir, &idx_dir, &events).unwrap_err();
    assert!(e.to_string().contains("truncated IDX data"), "{e}");
    assert!(
        e.to_string().starts_with(&val_images.display().to_string()),
        "{e}"
    );
    assert!(
        events.borrow().iter().any(|ev| matches!(
            ev,
            ProgressEvent::Progress {
                done: 20,
                total: 20,
                ..
            }
        )),
        "the train split was written before the failure"
    );
    assert!(!data_dir.join("fashion_mnist").exists());
    assert!(hidden_entries(&data_dir).is_empty());
}

#[test]
fn scratch_dirs_of_dead_processes_are_cleaned_up() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    // pid 999999999 is above Linux's pid_max, so never alive.
    let stale = data_dir.join(".fashion_mnist.partial-999999999-1-0");
    fs::create_dir_all(stale.join("train")).unwrap();
    let other = data_dir.join(".shakespeare.partial-999999999-1-0");
    fs::create_dir_all(&other).unwrap();
    let idx_dir = tmp.path().join("idx");
    write_idx_fixture(&idx_dir, 5, 5);
    prepare_fashion_fixture(&data_dir, &idx_dir, &RefCell::new(Vec::new())).unwrap();
    if Path::new("/proc/self").exists() {
        assert!(!stale.exists());
    }
    assert!(
        other.exists(),
        "another dataset's scratch dirs are left to its own prepare"
    );
}

#[test]
fn pinned_idx_hashes_are_enforced() {
    let tmp = tempfile::tempdir().unwrap();
    let idx_dir = tmp.path().join("idx");
    write_idx_fixture(&idx_dir, 3, 2);
    let ctx = error::DatasetLocation::new("fashion_mnist", tmp.path());
    let out = tmp.path().join("out");
    let e =
        build_from_idx(&out, &idx_dir, true, fashion_mnist::source(), &ctx, &|_| {}).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("train-images-idx3-ubyte.gz: decompressed content has sha256"),
        "{msg}"
    );
    assert!(
        msg.contains("expected c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
        "{msg}"
    );
}

#[test]
fn apt_failures_suggest_apt_get_update() {
    // The messages apt-get prints with empty package lists / an unknown version.
    let hint = fashion_mnist::apt_hint("E: Unable to locate package dataset-fashion-mnist");
    assert!(
        hint.contains("package lists are missing or stale: run `apt-get update`"),
        "{hint}"
    );
    let hint = fashion_mnist::apt_hint(
        "E: Version '0.0~git2020' for 'dataset-fashion-mnist' was not found",
    );
    assert!(hint.contains("run `apt-get update`"), "{hint}");
}

// ---------------------------------------------------------------- ImageFolder

fn ids(batch: &ImageBatch) -> Vec<usize> {
    let px = batch.height * batch.width;
    (0..batch.n)
        .map(|i| id_of(&batch.pixels[i * px..(i + 1) * px]))
        .collect()
}

fn epoch_ids(folder: &ImageFolder, opts: &BatchOptions) -> Vec<Vec<usize>> {
    folder.batches(opts).map(|b| ids(&b.unwrap())).collect()
}

#[test]
fn image_folder_lists_classes_and_decodes_normalised_nchw() {
    let fx = FashionFixture::new(30, 12);
    let val = ImageFolder::open(&fx.dir(), "val").unwrap();
    assert_eq!(val.len(), 12);
    assert_eq!(val.classes()[0], "0_T-shirt_top");
    assert_eq!(val.classes()[9], "9_Ankle_boot");
    let batches: Vec<ImageBatch> = val
        .batches(&BatchOptions::new(5).shuffle(false))
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        batches.iter().map(|b| b.n).collect::<Vec<_>>(),
        vec![5, 5, 2]
    );
    let b = &batches[0];
    assert_eq!((b.height, b.width, b.pixels.len()), (28, 28, 5 * 28 * 28));
    // Unshuffled order is (class, file name): ids 1000 and 1010 have label 0.
    assert_eq!(ids(b), vec![1000, 1010, 1001, 1011, 1002]);
    assert_eq!(b.labels, vec![0, 0, 1, 1, 2]);
    // Normalisation: pixel 2 of image 1000 is (2*7 + 1000*13) % 251.
    let raw = ((2 * 7 + 1000 * 13) % 251) as f32;
    assert!((b.pixels[2] - (raw / 255.0 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD).abs() < 1e-5);
    // Labels match the class of every id.
    for batch in &batches {
        for (id, label) in ids(batch).into_iter().zip(&batch.labels) {
            assert_eq!(id % 10, *label as usize);
        }
    }
    let e = ImageFolder::open(&fx.dir(), "test").unwrap_err();
    assert!(matches!(e, DataError::NotPrepared { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("referee data prepare fashion_mnist --data-dir"),
        "{e}"
    );
}

#[test]
fn shuffling_is_deterministic_per_seed_and_epoch() {
    let fx = FashionFixture::new(40, 10);
    let train = ImageFolder::open(&fx.dir(), "train").unwrap();
    let opts = BatchOptions::new(8).seed(7, 0);
    let a = epoch_ids(&train, &opts);
    assert_eq!(
        a,
        epoch_ids(&train, &opts),
        "same seed and epoch, same order"
    );
    assert_ne!(
        a,
        epoch_ids(&train, &opts.clone().seed(7, 1)),
        "epochs differ"
    );
    assert_ne!(
        a,
        epoch_ids(&train, &opts.clone().seed(8, 0)),
        "seeds differ"
    );
    let unshuffled: Vec<usize> = epoch_ids(&train, &opts.clone().shuffle(false)).concat();
    assert_ne!(a.concat(), unshuffled);
    let mut sorted = a.concat();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..40).collect::<Vec<_>>(),
        "a permutation of the epoch"
    );
}

#[test]
fn prefetch_iterator_yields_every_sample_once() {
    let fx = FashionFixture::new(37, 10);
    let train = ImageFolder::open(&fx.dir(), "train").unwrap();
    let opts = BatchOptions::new(6).seed(3, 2);
    let it = train.batches(&opts);
    assert_eq!(it.size_hint(), (0, Some(7)));
    let mut all: Vec<usize> = it.flat_map(|b| ids(&b.unwrap())).collect();
    all.sort_unstable();
    assert_eq!(all, (0..37).collect::<Vec<_>>());
    // drop_last drops the short final batch.
    let dropped = epoch_ids(&train, &opts.clone().drop_last(true));
    assert_eq!(dropped.len(), 6);
    assert!(dropped.iter().all(|b| b.len() == 6));
    // Dropping an iterator early does not hang.
    let mut it = train.batches(&opts);
    assert!(it.next().is_some());
    drop(it);
}

#[test]
fn sharding_gives_disjoint_covering_slices_of_each_global_batch() {
    let fx = FashionFixture::new(41, 10);
    let train = ImageFolder::open(&fx.dir(), "train").unwrap();
    for world in [2usize, 3, 4] {
        let global = BatchOptions::new(8).seed(11, 5);
        let whole = epoch_ids(&train, &global);
        let per_rank: Vec<Vec<Vec<usize>>> = (0..world)
            .map(|r| epoch_ids(&train, &global.clone().shard(r, world)))
            .collect();
        for ranks in &per_rank {
            assert_eq!(
                ranks.len(),
                whole.len(),
                "every rank sees the same number of batches"
            );
        }
        for (b, global_batch) in whole.iter().enumerate() {
            let joined: Vec<usize> = per_rank.iter().flat_map(|r| r[b].clone()).collect();
            assert_eq!(
                &joined, global_batch,
                "world {world}, batch {b}: slices are in order, disjoint and cover"
            );
            let sizes: BTreeSet<usize> = per_rank.iter().map(|r| r[b].len()).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
    }
}

#[test]
fn a_corrupt_png_is_reported_by_the_loader() {
    let fx = FashionFixture::new(10, 10);
    let victim = fx.dir().join("train/4_Coat/00004.png");
    fs::write(&victim, b"not a png").unwrap();
    let train = ImageFolder::open(&fx.dir(), "train").unwrap();
    let results: Vec<_> = train
        .batches(&BatchOptions::new(4).shuffle(false))
        .collect();
    let err = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("an error");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}: cannot decode PNG", victim.display())),
        "{msg}"
    );
    assert!(msg.contains("referee data prepare fashion_mnist"), "{msg}");
    assert!(
        results.last().unwrap().is_err(),
        "iteration stops at the error"
    );
}

// ---------------------------------------------------------------- text

/// A small pseudo-English corpus: `n_works` works of `words` words each.
fn corpus(n_works: usize, words: usize) -> Vec<Work> {
    const VOCAB: [&str; 24] = [
        "the", "king", "queen", "my", "lord", "shall", "not", "be", "to", "thee", "thou", "art",
        "love", "night", "day", "sweet", "death", "what", "is", "a", "man", "good", "heaven",
        "speak",
    ];
    let mut rng = SplitMix64::new(99);
    let mut works: Vec<Work> = (0..n_works)
        .map(|w| {
            let mut text = format!("PLAY {w}\n\n");
            for i in 0..words {
                text.push_str(VOCAB[rng.below(VOCAB.len() as u64) as usize]);
                text.push(if i % 11 == 10 { '\n' } else { ' ' });
            }
            Work {
                file: format!("play_{}_gut.txt", (b'a' + w as u8) as char),
                text,
            }
        })
        .collect();
    works.sort_by(|a, b| a.file.cmp(&b.file));
    works
}

const TEST_RECIPE: TextRecipe<'static> = TextRecipe {
    validation: &["play_b"],
    vocab_size: 300,
    corpus_sha256: None,
    tokenizer_sha256: None,
};

fn prepare_text_fixture(data_dir: &Path, recipe: &TextRecipe<'_>) -> Result<Manifest, DataError> {
    prepare_with(
        shakespeare::NAME,
        shakespeare::RECIPE,
        data_dir,
        &|_| {},
        &|out, ctx| {
            build_from_works(
                out,
                corpus(4, 3000),
                recipe,
                shakespeare::source(),
                Path::new("fixture.tar.gz"),
                ctx,
                &|_| {},
            )
        },
    )
}

#[test]
fn text_split_is_by_whole_work_and_tokenizer_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("a"), tmp.path().join("b"));
    let m1 = prepare_text_fixture(&d1, &TEST_RECIPE).unwrap();
    let m2 = prepare_text_fixture(&d2, &TEST_RECIPE).unwrap();
    assert_eq!(
        m1.param_str("tokenizer_sha256"),
        m2.param_str("tokenizer_sha256"),
        "training is deterministic"
    );
    assert_eq!(m1.fingerprint, m2.fingerprint);
    assert_eq!(m1.params["validation_works"], serde_json::json!(["play_b"]));
    assert_eq!(m1.count("val_works"), Some(1));
    assert_eq!(m1.count("train_works"), Some(3));
    verify("shakespeare", &d1).unwrap();

    let dir = d1.join("shakespeare");
    let tok = Tokenizer::open(&dir).unwrap();
    assert_eq!(tok.vocab_size(), 300);
    assert_eq!(tok.eot_id(), Some(0));
    assert_eq!(Some(tok.sha256()), m1.param_str("tokenizer_sha256"));
    let text = "the king shall speak, my lord!\n";
    assert_eq!(tok.decode(&tok.encode(text).unwrap()).unwrap(), text);

    // val.bin is exactly the validation work followed by <|endoftext|>.
    let works = corpus(4, 3000);
    let val = TokenDataset::open(&dir, "val").unwrap();
    let val_ids: Vec<u32> = val.tokens().iter().map(|&t| t as u32).collect();
    assert_eq!(
        tok.decode(&val_ids).unwrap(),
        format!("{}{END_OF_TEXT}", works[1].text)
    );
    let train = TokenDataset::open(&dir, "train").unwrap();
    let train_ids: Vec<u32> = train.tokens().iter().map(|&t| t as u32).collect();
    let expected: String = [&works[0], &works[2], &works[3]]
        .iter()
        .map(|w| format!("{}{END_OF_TEXT}", w.text))
        .collect();
    assert_eq!(tok.decode(&train_ids).unwrap(), expected);
    assert_eq!(m1.count("train_tokens"), Some(train.len() as u64));
}

#[test]
fn tokenizer_pin_and_missing_validation_work_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let pinned = TextRecipe {
        tokenizer_sha256: Some("0000000000000000000000000000000000000000000000000000000000000000"),
        ..TEST_RECIPE
    };
    let e = prepare_text_fixture(tmp.path(), &pinned).unwrap_err();
    assert!(e.to_string().contains("but this build pins 0000"), "{e}");
    assert!(!tmp.path().join("shakespeare").exists());

    let missing = TextRecipe {
        validation: &["hamlet"],
        ..TEST_RECIPE
    };
    let e = prepare_text_fixture(tmp.path(), &missing).unwrap_err();
    assert!(
        e.to_string()
            .contains("validation work `hamlet_gut.txt` is not in the corpus"),
        "{e}"
    );

    let corpus_pin = TextRecipe {
        corpus_sha256: Some(shakespeare::CORPUS_SHA256),
        ..TEST_RECIPE
    };
    let e = prepare_text_fixture(tmp.path(), &corpus_pin).unwrap_err();
    assert!(e.to_string().contains("expected da68ca4e"), "{e}");

    prepare_text_fixture(tmp.path(), &TEST_RECIPE).unwrap();
    let tok_path = tmp.path().join("shakespeare").join(TOKENIZER_FILE);
    let mut json = fs::read_to_string(&tok_path).unwrap();
    json.push(' ');
    fs::write(&tok_path, json).unwrap();
    let e = Tokenizer::open(&tmp.path().join("shakespeare")).unwrap_err();
    assert!(matches!(e, DataError::HashMismatch { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&tok_path.display().to_string()),
        "{e}"
    );
    // The unpinned loader still reads it.
    assert_eq!(Tokenizer::from_file(&tok_path).unwrap().vocab_size(), 300);
}

fn token_fixture(tokens: &[u16]) -> (tempfile::TempDir, TokenDataset) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shakespeare");
    fs::create_dir_all(&dir).unwrap();
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    fs::write(dir.join("val.bin"), bytes).unwrap();
    let ds = TokenDataset::open(&dir, "val").unwrap();
    (tmp, ds)
}

#[test]
fn eval_windows_are_fixed_consecutive_and_identical_across_calls() {
    let tokens: Vec<u16> = (0..103).collect();
    let (_tmp, ds) = token_fixture(&tokens);
    let a: Vec<TokenBatch> = ds.eval_batches(4, 10, 1000).unwrap().collect();
    let b: Vec<TokenBatch> = ds.eval_batches(4, 10, 1000).unwrap().collect();
    assert_eq!(a, b);
    // (103 - 1) / 10 = 10 windows: batches of 4, 4, 2.
    assert_eq!(a.iter().map(|b| b.n).collect::<Vec<_>>(), vec![4, 4, 2]);
    let inputs: Vec<u32> = a.iter().flat_map(|b| b.inputs.clone()).collect();
    assert_eq!(
        inputs,
        (0..100).collect::<Vec<u32>>(),
        "consecutive, non-overlapping"
    );
    let targets: Vec<u32> = a.iter().flat_map(|b| b.targets.clone()).collect();
    assert_eq!(targets, (1..101).collect::<Vec<u32>>());
    let capped: Vec<TokenBatch> = ds.eval_batches(4, 10, 5).unwrap().collect();
    assert_eq!(capped.iter().map(|b| b.n).sum::<usize>(), 5);
    assert_eq!(capped[0], a[0]);
    assert!(
        ds.eval_batches(4, 200, 5).is_err(),
        "too short for one window"
    );
}

#[test]
fn train_windows_are_deterministic_and_sharded() {
    let tokens: Vec<u16> = (0..5000u32).map(|i| (i % 4000) as u16).collect();
    let (_tmp, ds) = token_fixture(&tokens);
    let take = |seed, rank, world| -> Vec<TokenBatch> {
        ds.train_batches(8, 16, seed, rank, world)
            .unwrap()
            .take(5)
            .collect()
    };
    let a = take(1, 0, 1);
    assert_eq!(a, take(1, 0, 1));
    assert_ne!(a, take(2, 0, 1));
    for b in &a {
        assert_eq!((b.n, b.inputs.len(), b.targets.len()), (8, 128, 128));
        for w in 0..b.n {
            let (inp, tgt) = (
                &b.inputs[w * 16..(w + 1) * 16],
                &b.targets[w * 16..(w + 1) * 16],
            );
            assert_eq!(&inp[1..], &tgt[..15], "targets are inputs shifted by one");
        }
    }
    let shards: Vec<Vec<TokenBatch>> = (0..3).map(|r| take(1, r, 3)).collect();
    for (step, global) in a.iter().enumerate() {
        let joined: Vec<u32> = shards.iter().flat_map(|s| s[step].inputs.clone()).collect();
        assert_eq!(
            joined, global.inputs,
            "step {step}: rank slices partition the global batch"
        );
        assert_eq!(
            shards.iter().map(|s| s[step].n).collect::<Vec<_>>(),
            vec![2, 3, 3]
        );
    }
}

#[test]
fn token_file_errors_name_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shakespeare");
    fs::create_dir_all(&dir).unwrap();
    let e = TokenDataset::open(&dir, "train").unwrap_err();
    assert!(matches!(e, DataError::NotPrepared { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("run `referee data prepare shakespeare --data-dir "),
        "{e}"
    );
    fs::write(dir.join("train.bin"), [1u8, 2, 3]).unwrap();
    let e = TokenDataset::open(&dir, "train").unwrap_err();
    assert!(e.to_string().contains("odd length 3"), "{e}");
}
