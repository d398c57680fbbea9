//! The fused CPU ops agree with the composed-candle-op references, forward and backward.

use candle_core::{Device, Tensor, Var};
use referee_workloads::ops;
use referee_workloads::rng::Rng;

fn rand_var(seed: u64, shape: &[usize]) -> Var {
    let n: usize = shape.iter().product();
    let v = Rng::new(seed).normal_vec(n, 1.0);
    Var::from_tensor(&Tensor::from_vec(v, shape, &Device::Cpu).unwrap()).unwrap()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Compares outputs and the gradients of `sum(out * r)` w.r.t. every input.
fn check(inputs: &[&Var], fused: impl Fn() -> Tensor, reference: impl Fn() -> Tensor, tol: f32) {
    let yf = fused();
    let yr = reference();
    assert_eq!(yf.dims(), yr.dims());
    let d = max_abs_diff(&yf, &yr);
    assert!(d < tol, "forward differs by {d}");
    let r = Tensor::from_vec(
        Rng::new(99).normal_vec(yf.elem_count(), 1.0),
        yf.shape(),
        &Device::Cpu,
    )
    .unwrap();
    let gf = (yf * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let gr = (yr * &r).unwrap().sum_all().unwrap().backward().unwrap();
    for (i, v) in inputs.iter().enumerate() {
        let a = gf.get(v.as_tensor()).expect("fused grad");
        let b = gr.get(v.as_tensor()).expect("reference grad");
        let d = max_abs_diff(a, b);
        assert!(d < tol, "grad of input {i} differs by {d}");
    }
}

#[test]
fn conv_im2col_matches_candle_conv2d() {
    for &(k, stride, cin, cout, hw) in &[
        (3, 1, 3, 5, 7),
        (3, 2, 4, 6, 8),
        (1, 2, 4, 6, 8),
        (1, 1, 3, 2, 5),
        // stage-1 shape of mini_resnet: GEMMs large enough to be split over threads
        (3, 1, 16, 16, 28),
        // again after a larger one: the reused im2col scratch buffers hold
        // stale values, and padding taps must still read as zeros
        (3, 1, 3, 5, 7),
        (3, 2, 4, 6, 8),
    ] {
        let x = rand_var(1, &[2, hw, hw, cin]);
        let w = rand_var(2, &[k * k * cin, cout]);
        check(
            &[&x, &w],
            || ops::conv2d_nhwc(&x, &w, k, stride, k / 2).unwrap(),
            || ops::conv2d_nhwc_reference(&x, &w, k, stride, k / 2).unwrap(),
            1e-3,
        );
    }
}

#[test]
fn batch_norm_matches_reference() {
    for relu in [false, true] {
        let x = rand_var(3, &[300, 6]);
        let g = rand_var(4, &[6]);
        let b = rand_var(5, &[6]);
        check(
            &[&x, &g, &b],
            || ops::batch_norm_train(&x, &g, &b, 1e-5, relu).unwrap().0,
            || {
                ops::batch_norm_train_reference(&x, &g, &b, 1e-5, relu)
                    .unwrap()
                    .0
            },
            1e-3,
        );
        let (_, s1) = ops::batch_norm_train(&x, &g, &b, 1e-5, relu).unwrap();
        let (_, s2) = ops::batch_norm_train_reference(&x, &g, &b, 1e-5, relu).unwrap();
        for j in 0..6 {
            assert!((s1.mean[j] - s2.mean[j]).abs() < 1e-5);
            assert!((s1.var[j] - s2.var[j]).abs() < 1e-4);
        }
    }
}

#[test]
fn rms_norm_swiglu_add_relu_match_reference() {
    let x = rand_var(6, &[7, 16]);
    let g = rand_var(7, &[16]);
    check(
        &[&x, &g],
        || ops::rms_norm(&x, &g, 1e-5).unwrap(),
        || ops::rms_norm_reference(&x, &g, 1e-5).unwrap(),
        1e-4,
    );
    check(
        &[&x],
        || ops::swiglu(&x).unwrap(),
        || ops::swiglu_reference(&x).unwrap(),
        1e-4,
    );
    let y = rand_var(8, &[7, 16]);
    check(
        &[&x, &y],
        || ops::add_relu(&x, &y).unwrap(),
        || (x.as_tensor() + y.as_tensor()).unwrap().relu().unwrap(),
        1e-6,
    );
}

#[test]
fn causal_attention_matches_reference() {
    let (b, t, h, dh) = (2, 9, 3, 8);
    let rope = ops::Rope::new(dh, 16, 10_000.0);
    let qkv = rand_var(9, &[b, t, 3, h, dh]);
    check(
        &[&qkv],
        || ops::causal_attention(&qkv, &rope).unwrap(),
        || ops::causal_attention_reference(&qkv, &rope).unwrap(),
        1e-4,
    );
}

#[test]
fn cross_entropy_matches_candle_nn() {
    let x = rand_var(10, &[6, 11]);
    let targets = [0u32, 3, 10, 5, 5, 1];
    let tt = Tensor::new(&targets, &Device::Cpu).unwrap();
    check(
        &[&x],
        || ops::cross_entropy(&x, &targets).unwrap(),
        || candle_nn::loss::cross_entropy(&x, &tt).unwrap(),
        1e-5,
    );
    assert!(ops::cross_entropy(&x, &[0, 1]).is_err());
    assert!(ops::cross_entropy(&x, &[0, 1, 2, 3, 4, 11]).is_err());
}

#[test]
fn rope_rotation_is_relative() {
    // <rot(q, m), rot(k, n)> depends only on m - n, and position 0 is the identity.
    let rope = ops::Rope::new(8, 32, 10_000.0);
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
