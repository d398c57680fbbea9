//! `--device cuda:N` on a build or a machine without GPUs: a clear message
//! and exit code 2, never a panic.

use referee_tests::{referee_bin, stderr};
use std::process::Command;

fn run_on(device: &str) -> std::process::Output {
    let tmp = tempfile::tempdir().unwrap();
    Command::new(referee_bin())
        .args([
            "run", "mini_llm", "--runs", "1", "--quiet", "--device", device, "--out",
        ])
        .arg(tmp.path().join("run"))
        .output()
        .unwrap()
}

#[test]
fn cuda_without_a_gpu_is_a_clear_usage_error() {
    for device in ["cuda:0", "cuda", "cuda:3"] {
        let o = run_on(device);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{device}: {err}");
        assert!(!err.contains("panicked"), "{device}: {err}");
        assert!(
            err.starts_with("referee: error: --device "),
            "{device}: {err}"
        );
        // The default build has no GPU back end and says how to get one; a
        // CUDA build on a machine without a driver says there is none.
        assert!(
            err.contains("--features cuda") || err.contains("CUDA is not available"),
            "{device}: {err}"
        );
    }
}

#[test]
fn malformed_devices_are_usage_errors() {
    for device in ["gpu", "cuda:x", "tpu:0"] {
        let o = run_on(device);
        assert_eq!(o.status.code(), Some(2), "{device}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("bad device"),
            "{device}: {}",
            stderr(&o)
        );
    }
}
