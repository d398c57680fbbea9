//! The graph ops: argument checks and the RoPE tables (the ops themselves
//! are checked against the CPU engine in `engine.rs`).

use candle_core::{Device, Tensor};
use referee_workloads::ops;
use referee_workloads::rng::Rng;

#[test]
fn bad_arguments_are_errors() {
    let x = Tensor::zeros((6, 11), candle_core::DType::F32, &Device::Cpu).unwrap();
    assert!(ops::cross_entropy(&x, &[0, 1]).is_err());
    assert!(ops::cross_entropy(&x, &[0, 1, 2, 3, 4, 11]).is_err());
    assert!(ops::cross_entropy(&x, &[0, 1, 2, 3, 4, 10]).is_ok());
    let img = Tensor::zeros((1, 5, 5, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
    let w = Tensor::zeros((9 * 2, 4), candle_core::DType::F32, &Device::Cpu).unwrap();
    let e = ops::conv2d_nhwc(&img, &w, 3, 1, 1).unwrap_err().to_string();
    assert!(e.contains("does not match k=3 cin=3"), "{e}");
}

#[test]
fn rope_rotation_is_relative() {
    // <rot(q, m), rot(k, n)> depends only on m - n, and position 0 is the identity.
    let rope = referee_workloads::rope::Rope::new(8, 32, 10_000.0);
    let q: Vec<f32> = Rng::new(1).normal_vec(8, 1.0);
    let k: Vec<f32> = Rng::new(2).normal_vec(8, 1.0);
    let dot = |m: usize, n: usize| {
        let (mut a, mut b) = (vec![0f32; 8], vec![0f32; 8]);
        rope.rotate(m, &q, &mut a, false);
        rope.rotate(n, &k, &mut b, false);
        a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()
    };
    assert!((dot(5, 2) - dot(13, 10)).abs() < 1e-4);
    assert!((dot(7, 7) - dot(0, 0)).abs() < 1e-4);
    assert!(
        (dot(3, 0) - dot(0, 3)).abs() > 1e-3,
        "rotation must depend on the sign of m - n"
    );
    let mut a = vec![0f32; 8];
    rope.rotate(0, &q, &mut a, false);
    assert_eq!(a, q);
    // inverse undoes the rotation; norm is preserved.
    let mut back = vec![0f32; 8];
    rope.rotate(11, &q, &mut a, false);
    rope.rotate(11, &a, &mut back, true);
    assert!(q.iter().zip(&back).all(|(x, y)| (x - y).abs() < 1e-5));
    let n1: f32 = q.iter().map(|x| x * x).sum();
    let n2: f32 = a.iter().map(|x| x * x).sum();
    assert!((n1 - n2).abs() < 1e-4);
}

#[test]
fn rope_rows_rotate_each_position() {
    let rope = referee_workloads::rope::Rope::new(8, 6, 10_000.0);
    let x: Vec<f32> = Rng::new(3).normal_vec(6 * 12, 1.0);
    let mut y = vec![0f32; 6 * 8];
    rope.rotate_rows(6, &x, 12, &mut y, 8, false);
    for p in 0..6 {
        let mut want = vec![0f32; 8];
        rope.rotate(p, &x[p * 12..p * 12 + 8], &mut want, false);
        assert_eq!(&y[p * 8..p * 8 + 8], &want[..]);
    }
}
