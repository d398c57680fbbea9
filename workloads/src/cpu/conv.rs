//! Batches of NHWC images with a zero border, and 2-D convolutions on them
//! through the indirect GEMM of [`super::kernels`].
//!
//! * forward: one GEMM per output row, A = the padded input read in place;
//! * weight gradient: one GEMM per (image, kernel row) with rows = weight
//!   rows and the reduction over the image's pixels;
//! * input gradient, stride 1: the forward kernel on the padded output
//!   gradient with the kernel flipped and transposed;
//! * input gradient, stride > 1: `dcols = dy · Wᵀ` for one image (in
//!   cache), scattered onto the input gradient's pixels.

use rayon::prelude::*;

use super::kernels::{
    AMat, BMat, Isa, Offsets, PackedB, Plan, RowTable, igemm, igemm_planned, igemm_rows,
};

/// A batch of NHWC images with a border of `pad` pixels on every side.
///
/// A convolution's input needs a zero border (the padding taps read it);
/// the buffers here are zero when allocated and kernels write interiors
/// only, except the input-gradient scatter of a strided convolution, whose
/// target border is scratch (never read as data).
#[derive(Debug, Clone, Default)]
pub struct Image {
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub pad: usize,
    pub data: Vec<f32>,
}

impl Image {
    /// Gives the buffer this shape. Keeping the per-image layout (h, w, c,
    /// pad) keeps every existing value, borders included; new images and a
    /// new layout start as zeros.
    pub fn ensure(&mut self, n: usize, h: usize, w: usize, c: usize, pad: usize) {
        if (self.h, self.w, self.c, self.pad) != (h, w, c, pad) {
            self.data.clear();
            (self.h, self.w, self.c, self.pad) = (h, w, c, pad);
        }
        self.n = n;
        self.data.resize(n * self.image_len(), 0.0);
    }

    /// Padded height.
    pub fn hp(&self) -> usize {
        self.h + 2 * self.pad
    }
    /// Padded width.
    pub fn wp(&self) -> usize {
        self.w + 2 * self.pad
    }
    /// Values per image, border included.
    pub fn image_len(&self) -> usize {
        self.hp() * self.wp() * self.c
    }
    /// Values of one interior row.
    pub fn row_len(&self) -> usize {
        self.w * self.c
    }
    /// Offset of interior pixel (y, x) within one image's slice.
    pub fn local(&self, y: usize, x: usize) -> usize {
        ((y + self.pad) * self.wp() + x + self.pad) * self.c
    }
    /// Offset of interior pixel (y, x) of image `i` in `data`.
    pub fn at(&self, i: usize, y: usize, x: usize) -> usize {
        i * self.image_len() + self.local(y, x)
    }
    /// Interior row `y` of image `i`.
    pub fn row(&self, i: usize, y: usize) -> &[f32] {
        let s = self.at(i, y, 0);
        &self.data[s..s + self.row_len()]
    }
    /// Whether `other` has the same interior shape (n, h, w, c).
    pub fn same_interior(&self, other: &Image) -> bool {
        (self.n, self.h, self.w, self.c) == (other.n, other.h, other.w, other.c)
    }
}

/// Runs `f(i, image_slice)` for every image of `img`, in parallel.
pub fn par_images(img: &mut Image, f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    let len = img.image_len();
    if len == 0 {
        return;
    }
    img.data
        .par_chunks_mut(len)
        .enumerate()
        .for_each(|(i, s)| f(i, s));
}

/// Splits `0..n` into one contiguous range per worker thread (fewer if n is small).
pub fn thread_ranges(n: usize) -> Vec<std::ops::Range<usize>> {
    let parts = rayon::current_num_threads().clamp(1, n.max(1));
    let (q, r) = (n / parts, n % parts);
    let mut out = Vec::with_capacity(parts);
    let mut s = 0;
    for p in 0..parts {
        let len = q + usize::from(p < r);
        out.push(s..s + len);
        s += len;
    }
    out
}

/// Geometry of a convolution without bias; weights HWIO `[k·k·cin, cout]`
/// (row `(ky·k + kx)·cin + ci`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv {
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    pub cin: usize,
    pub cout: usize,
}

impl Conv {
    /// Output side for an input side `h`.
    pub fn out_size(&self, h: usize) -> usize {
        (h + 2 * self.pad - self.k) / self.stride + 1
    }

    pub fn weight_len(&self) -> usize {
        self.k * self.k * self.cin * self.cout
    }

    /// Border the output gradient needs for [`Conv::grad_input`].
    pub fn grad_pad(&self) -> usize {
        if self.stride == 1 {
            self.k - 1 - self.pad
        } else {
            0
        }
    }

    fn check_io(&self, x: &Image, y: &Image) {
        assert!(
            x.c == self.cin && y.c == self.cout && x.n == y.n,
            "conv: channels or batch do not match"
        );
        assert!(
            y.h == self.out_size(x.h) && y.w == self.out_size(x.w),
            "conv: output size does not match"
        );
    }

    /// `y = conv(x, w)` (or `y += …` when `accumulate`); `x.pad ≥ self.pad`
    /// with a zero border. Writes the interior of `y` only.
    ///
    /// One GEMM per image over all its output pixels ([`igemm_rows`]), so
    /// that the register tiles take their full height on narrow images
    /// (7 and 14 pixels a row); the sums are bitwise those of one GEMM per
    /// output row ([`Conv::forward_by_rows`]).
    pub fn forward(&self, isa: Isa, x: &Image, w: &[f32], y: &mut Image, accumulate: bool) {
        self.check_io(x, y);
        assert!(x.pad >= self.pad, "conv: input border too narrow");
        assert_eq!(w.len(), self.weight_len(), "conv: weight size");
        let (c, wp, s) = (self.cin, x.wp(), self.stride);
        let koff = self.tap_offsets(wp);
        let bkoff = Offsets::dense(self.weight_len() / self.cout, self.cout);
        let off0 = x.pad - self.pad;
        let (hp, ow, cout) = (x.hp(), y.w, self.cout);
        // Each output pixel's window in the image, and its place in `y`'s image.
        let pixels = y.h * ow;
        let a_rows: Vec<usize> = (0..pixels)
            .map(|p| ((p / ow) * s * wp + (p % ow) * s) * c)
            .collect();
        let out_rows: Vec<usize> = (0..pixels).map(|p| y.local(p / ow, p % ow)).collect();
        let table = RowTable {
            a: &a_rows,
            out: &out_rows,
        };
        par_images(y, |i, yimg| {
            let a = AMat {
                data: &x.data,
                base: ((i * hp + off0) * wp + off0) * c,
                row_stride: 0,
                koff: &koff,
            };
            let b = BMat {
                data: w,
                base: 0,
                koff: &bkoff,
            };
            igemm_rows(isa, table, cout, a, b, yimg, accumulate);
        });
    }

    /// The offsets of a window's k·k·cin taps from its first, in an image
    /// `wp` pixels wide.
    fn tap_offsets(&self, wp: usize) -> Offsets {
        let c = self.cin;
        Offsets::new(
            (0..self.k)
                .flat_map(|ky| (0..self.k * c).map(move |j| ky * wp * c + j))
                .collect(),
        )
    }

    /// [`Conv::forward`] as one GEMM per output row (what it was before
    /// [`igemm_rows`]): the reference its bits are tested against.
    #[cfg(test)]
    fn forward_by_rows(&self, isa: Isa, x: &Image, w: &[f32], y: &mut Image, accumulate: bool) {
        self.check_io(x, y);
        let (c, wp, s) = (self.cin, x.wp(), self.stride);
        let koff = self.tap_offsets(wp);
        let bkoff = Offsets::dense(self.weight_len() / self.cout, self.cout);
        let off0 = x.pad - self.pad;
        let (hp, ow, cout) = (x.hp(), y.w, self.cout);
        let row0: Vec<usize> = (0..y.h).map(|oy| y.local(oy, 0)).collect();
        par_images(y, |i, yimg| {
            for (oy, &r0) in row0.iter().enumerate() {
                let a = AMat {
                    data: &x.data,
                    base: ((i * hp + oy * s + off0) * wp + off0) * c,
                    row_stride: s * c,
                    koff: &koff,
                };
                let b = BMat {
                    data: w,
                    base: 0,
                    koff: &bkoff,
                };
                igemm(isa, ow, cout, a, b, &mut yimg[r0..], cout, accumulate);
            }
        });
    }

    /// `dw = Σ_pixels x_window ⊗ dy` (overwrites `dw`); `x` as given to
    /// [`Conv::forward`], `dy` of the output's shape (any border).
    pub fn grad_weight(&self, isa: Isa, x: &Image, dy: &Image, dw: &mut [f32]) {
        let kc = self.k * self.cin;
        // Transposed, `dwᵀ = dyᵀ · x_window` (rows = output channels, the
        // window's k·cin values in vectors): where the output channels are
        // one or two vectors, each broadcast of the plain form feeds one or
        // two FMAs, and the kernel waits on loads; transposed, a broadcast
        // feeds three or more. Every sum adds the same products in the same
        // pixel order from the same start: the result is bitwise the same.
        let transposed =
            isa == Isa::Avx512 && self.cout <= 32 && kc.is_multiple_of(16) && kc > self.cout;
        self.grad_weight_as(isa, x, dy, dw, transposed);
    }

    fn grad_weight_as(&self, isa: Isa, x: &Image, dy: &Image, dw: &mut [f32], transposed: bool) {
        self.check_io(x, dy);
        assert!(x.pad >= self.pad, "conv: input border too narrow");
        assert_eq!(dw.len(), self.weight_len(), "conv: weight size");
        let (c, wp, hp, s, k) = (self.cin, x.wp(), x.hp(), self.stride, self.k);
        let (oh, ow, cout) = (dy.h, dy.w, self.cout);
        let xoff = Offsets::new(
            (0..oh * ow)
                .map(|p| ((p / ow) * s * wp + (p % ow) * s) * c)
                .collect(),
        );
        let dyoff = Offsets::new(
            (0..oh * ow)
                .map(|p| dy.local(p / ow, p % ow) - dy.local(0, 0))
                .collect(),
        );
        let off0 = x.pad - self.pad;
        let kc = k * c;
        let partials: Vec<Vec<f32>> = thread_ranges(x.n)
            .into_par_iter()
            .map(|imgs| {
                let mut part = vec![0f32; dw.len()];
                for i in imgs {
                    for ky in 0..k {
                        let xm = AMat {
                            data: &x.data,
                            base: ((i * hp + ky + off0) * wp + off0) * c,
                            row_stride: 1,
                            koff: &xoff,
                        };
                        let out = &mut part[ky * kc * cout..(ky + 1) * kc * cout];
                        if transposed {
                            // part holds dwᵀ per kernel row: [cout, k·cin].
                            let a = AMat {
                                data: &dy.data,
                                base: dy.at(i, 0, 0),
                                row_stride: 1,
                                koff: &dyoff,
                            };
                            let b = BMat {
                                data: xm.data,
                                base: xm.base,
                                koff: xm.koff,
                            };
                            igemm(isa, cout, kc, a, b, out, kc, true);
                        } else {
                            let b = BMat {
                                data: &dy.data,
                                base: dy.at(i, 0, 0),
                                koff: &dyoff,
                            };
                            igemm(isa, kc, cout, xm, b, out, cout, true);
                        }
                    }
                }
                part
            })
            .collect();
        dw.fill(0.0);
        for p in &partials {
            if transposed {
                for (dk, pk) in dw
                    .chunks_exact_mut(kc * cout)
                    .zip(p.chunks_exact(kc * cout))
                {
                    for (co, prow) in pk.chunks_exact(kc).enumerate() {
                        for (j, v) in prow.iter().enumerate() {
                            dk[j * cout + co] += v;
                        }
                    }
                }
            } else {
                dw.iter_mut().zip(p).for_each(|(d, v)| *d += v);
            }
        }
    }

    /// Input gradient into the interior of `dx` (`+=` when `accumulate`).
    /// Stride 1: `dy.pad ≥ self.grad_pad()` with a zero border. Stride > 1:
    /// `dx.pad ≥ self.pad`, and the border of `dx` receives scratch.
    pub fn grad_input(&self, isa: Isa, dy: &Image, w: &[f32], dx: &mut Image, accumulate: bool) {
        self.grad_input_as(isa, dy, w, dx, accumulate, false);
    }

    /// `by_rows`: a strided convolution's GEMMs one per output row (what
    /// they were before), the tests' reference.
    fn grad_input_as(
        &self,
        isa: Isa,
        dy: &Image,
        w: &[f32],
        dx: &mut Image,
        accumulate: bool,
        by_rows: bool,
    ) {
        self.check_io(dx, dy);
        assert_eq!(w.len(), self.weight_len(), "conv: weight size");
        let (k, cin, cout) = (self.k, self.cin, self.cout);
        if self.stride == 1 {
            // dx = conv(dy, w flipped in space, transposed in channels).
            let mut wf = vec![0f32; w.len()];
            for ky in 0..k {
                for kx in 0..k {
                    let src = ((k - 1 - ky) * k + (k - 1 - kx)) * cin;
                    let dst = (ky * k + kx) * cout;
                    for ci in 0..cin {
                        for co in 0..cout {
                            wf[(dst + co) * cin + ci] = w[(src + ci) * cout + co];
                        }
                    }
                }
            }
            let flipped = Conv {
                k,
                stride: 1,
                pad: self.grad_pad(),
                cin: cout,
                cout: cin,
            };
            flipped.forward(isa, dy, &wf, dx, accumulate);
            return;
        }
        assert!(dx.pad >= self.pad, "conv: gradient border too narrow");
        // Wᵀ: [cout, k·k·cin]
        let kc = k * k * cin;
        let mut wt = vec![0f32; w.len()];
        for r in 0..kc {
            for co in 0..cout {
                wt[co * kc + r] = w[r * cout + co];
            }
        }
        let akoff = Offsets::dense(cout, 1);
        let bkoff = Offsets::dense(cout, kc);
        let (oh, ow, s) = (dy.h, dy.w, self.stride);
        let (wp, off0) = (dx.wp(), dx.pad - self.pad);
        let b = BMat {
            data: &wt,
            base: 0,
            koff: &bkoff,
        };
        // Without a border (the engine's case: `grad_pad` is 0 for a
        // strided convolution) the output gradient's pixels are evenly
        // spaced over a whole image: one GEMM per image, Wᵀ packed once for
        // all, in place of one per output row (7 or 14 rows: short register
        // tiles, and Wᵀ packed by none of them). The same sums: bitwise the
        // same.
        let whole = dy.pad == 0 && !by_rows;
        let mut packed = PackedB::default();
        let shared = whole && packed.pack(isa, &b, kc);
        let plan = Plan {
            packed_b: shared.then_some(&packed),
            ..Plan::default()
        };
        // Adds one output row's columns `dcols` (`ow` pixels × k·k·cin) onto
        // the input gradient's pixels.
        let scatter = |ximg: &mut [f32], oy: usize, dcols: &[f32]| {
            for ox in 0..ow {
                let src = &dcols[ox * kc..(ox + 1) * kc];
                for ky in 0..k {
                    for kx in 0..k {
                        let p = ((oy * s + ky + off0) * wp + ox * s + kx + off0) * cin;
                        let t = (ky * k + kx) * cin;
                        for (d, v) in ximg[p..p + cin].iter_mut().zip(&src[t..t + cin]) {
                            *d += v;
                        }
                    }
                }
            }
        };
        par_images(dx, |i, ximg| {
            if !accumulate {
                ximg.fill(0.0);
            }
            DCOLS.with_borrow_mut(|dcols| {
                // Overwritten by the GEMM before it is read.
                dcols.resize(if whole { oh * ow * kc } else { ow * kc }, 0.0);
                if whole {
                    let a = AMat {
                        data: &dy.data,
                        base: dy.at(i, 0, 0),
                        row_stride: cout,
                        koff: &akoff,
                    };
                    igemm_planned(isa, oh * ow, kc, a, b, dcols, kc, false, plan);
                    for oy in 0..oh {
                        scatter(ximg, oy, &dcols[oy * ow * kc..(oy + 1) * ow * kc]);
                    }
                    return;
                }
                for oy in 0..oh {
                    let a = AMat {
                        data: &dy.data,
                        base: dy.at(i, oy, 0),
                        row_stride: cout,
                        koff: &akoff,
                    };
                    igemm(isa, ow, kc, a, b, dcols, kc, false);
                    scatter(ximg, oy, dcols);
                }
            });
        });
    }
}

thread_local! {
    /// One thread's columns of a strided convolution's input gradient.
    static DCOLS: std::cell::RefCell<Vec<f32>> = std::cell::RefCell::default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::bits;
    use crate::rng::Rng;

    fn random_image(seed: u64, n: usize, h: usize, c: usize, pad: usize) -> Image {
        let mut img = Image::default();
        img.ensure(n, h, h, c, pad);
        let v = Rng::new(seed).normal_vec(n * h * h * c, 1.0);
        let len = img.row_len();
        for i in 0..n {
            for y in 0..h {
                let s = img.at(i, y, 0);
                let src = ((i * h) + y) * len;
                img.data[s..s + len].copy_from_slice(&v[src..src + len]);
            }
        }
        img
    }

    fn px(img: &Image, i: usize, y: isize, x: isize, c: usize) -> f64 {
        if y < 0 || x < 0 || y >= img.h as isize || x >= img.w as isize {
            return 0.0;
        }
        f64::from(img.data[img.at(i, y as usize, x as usize) + c])
    }

    /// Direct 7-loop convolution, its weight gradient and its input gradient.
    fn naive(g: &Conv, x: &Image, w: &[f32], dy: &Image) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (oh, ow) = (g.out_size(x.h), g.out_size(x.w));
        let mut y = vec![0f64; x.n * oh * ow * g.cout];
        let mut dw = vec![0f64; w.len()];
        let mut dx = vec![0f64; x.n * x.h * x.w * g.cin];
        for i in 0..x.n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for ky in 0..g.k {
                        for kx in 0..g.k {
                            let iy = (oy * g.stride + ky) as isize - g.pad as isize;
                            let ix = (ox * g.stride + kx) as isize - g.pad as isize;
                            for ci in 0..g.cin {
                                let xv = px(x, i, iy, ix, ci);
                                for co in 0..g.cout {
                                    let wi = ((ky * g.k + kx) * g.cin + ci) * g.cout + co;
                                    let yi = ((i * oh + oy) * ow + ox) * g.cout + co;
                                    let d = px(dy, i, oy as isize, ox as isize, co);
                                    y[yi] += xv * f64::from(w[wi]);
                                    dw[wi] += xv * d;
                                    if iy >= 0 && ix >= 0 && iy < x.h as isize && ix < x.w as isize
                                    {
                                        let xi = ((i * x.h + iy as usize) * x.w + ix as usize)
                                            * g.cin
                                            + ci;
                                        dx[xi] += d * f64::from(w[wi]);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        (y, dw, dx)
    }

    fn interior(img: &Image) -> Vec<f32> {
        let mut v = Vec::new();
        for i in 0..img.n {
            for y in 0..img.h {
                v.extend_from_slice(img.row(i, y));
            }
        }
        v
    }

    fn close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (j, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-3 * (1.0 + w.abs()),
                "{what}[{j}]: {g} vs {w}"
            );
        }
    }

    /// A convolution padded by half its kernel.
    fn same_padded(k: usize, stride: usize, cin: usize, cout: usize) -> Conv {
        Conv {
            k,
            stride,
            pad: k / 2,
            cin,
            cout,
        }
    }

    #[test]
    fn forward_and_both_gradients_match_a_direct_convolution() {
        // (k, stride, cin, cout, side): the shapes of mini_resnet and odd ones.
        for &(k, s, cin, cout, h) in &[
            (3, 1, 1, 16, 9),
            (3, 1, 16, 16, 7),
            (3, 2, 16, 32, 8),
            (1, 2, 16, 32, 8),
            (3, 2, 3, 5, 7),
            (3, 1, 5, 3, 6),
            (1, 1, 4, 8, 5),
        ] {
            let g = same_padded(k, s, cin, cout);
            let x = random_image(1, 2, h, cin, 1);
            let w = Rng::new(2).normal_vec(g.weight_len(), 0.5);
            let oh = g.out_size(h);
            let dy = random_image(3, 2, oh, cout, g.grad_pad());
            let (y_ref, dw_ref, dx_ref) = naive(&g, &x, &w, &dy);
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                let what = format!("{} k{k} s{s} {cin}->{cout} h{h}", isa.name());
                let mut y = Image::default();
                y.ensure(2, oh, oh, cout, 0);
                g.forward(isa, &x, &w, &mut y, false);
                close(&y.data, &y_ref, &format!("{what} forward"));
                let mut dw = vec![7f32; w.len()];
                g.grad_weight(isa, &x, &dy, &mut dw);
                close(&dw, &dw_ref, &format!("{what} dw"));
                let mut dx = Image::default();
                dx.ensure(2, h, h, cin, 1);
                dx.data.fill(3.0); // stale values must not leak through
                g.grad_input(isa, &dy, &w, &mut dx, false);
                close(&interior(&dx), &dx_ref, &format!("{what} dx"));
                // accumulate adds to what is there
                g.grad_input(isa, &dy, &w, &mut dx, true);
                let twice: Vec<f64> = dx_ref.iter().map(|v| 2.0 * v).collect();
                close(&interior(&dx), &twice, &format!("{what} dx accumulated"));
            }
        }
    }

    #[test]
    fn the_transposed_weight_gradient_is_bitwise_the_plain_one() {
        // The transposed form adds the same products in the same order: the
        // calibration's curves depend on it being exact, not close.
        for &(k, s, cin, cout, h) in &[(3, 1, 16, 16, 28), (3, 2, 16, 32, 14), (3, 1, 32, 32, 9)] {
            let g = same_padded(k, s, cin, cout);
            let x = random_image(4, 5, h, cin, 1);
            let dy = random_image(5, 5, g.out_size(h), cout, 0);
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                let mut plain = vec![0f32; g.weight_len()];
                g.grad_weight_as(isa, &x, &dy, &mut plain, false);
                let mut transposed = vec![0f32; g.weight_len()];
                g.grad_weight_as(isa, &x, &dy, &mut transposed, true);
                assert_eq!(
                    bits(&transposed),
                    bits(&plain),
                    "{} k{k} s{s} {cin}->{cout}",
                    isa.name()
                );
            }
        }
    }

    #[test]
    fn the_forward_over_whole_images_is_bitwise_the_forward_by_rows() {
        // One GEMM per image (rows from a table) against one per output row:
        // the same sums in the same order, so the same bits, for every shape
        // of mini_resnet (narrow images, strides, 1x1 and column tails),
        // overwriting and accumulating, and the stride-1 input gradient
        // (the forward on the flipped kernel) with its wider border.
        for &(k, s, cin, cout, h) in &[
            (3, 1, 1, 16, 28),
            (3, 1, 16, 16, 9),
            (3, 2, 16, 32, 14),
            (1, 2, 16, 32, 14),
            (3, 1, 64, 64, 7),
            (3, 2, 32, 64, 7),
            (3, 1, 5, 12, 6),
        ] {
            let g = same_padded(k, s, cin, cout);
            let x = random_image(6, 3, h, cin, 2);
            let w = Rng::new(7).normal_vec(g.weight_len(), 0.5);
            let o = g.out_size(h);
            let init = random_image(8, 3, o, cout, 1);
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                for acc in [false, true] {
                    let (mut want, mut got) = (init.clone(), init.clone());
                    g.forward_by_rows(isa, &x, &w, &mut want, acc);
                    g.forward(isa, &x, &w, &mut got, acc);
                    let what = format!("{} k{k} s{s} {cin}->{cout} h{h} acc {acc}", isa.name());
                    assert_eq!(bits(&got.data), bits(&want.data), "{what}");
                }
            }
        }
    }

    #[test]
    fn the_strided_input_gradient_over_whole_images_is_bitwise_by_rows() {
        // One GEMM per image (Wᵀ packed once) against one per output row,
        // overwriting and accumulating: the same bits. mini_resnet's strided
        // shapes, and a border on the output gradient (by rows either way).
        for &(k, cin, cout, h, dy_pad) in &[
            (3, 16, 32, 28, 0),
            (1, 16, 32, 28, 0),
            (3, 32, 64, 14, 0),
            (1, 32, 64, 14, 0),
            (3, 5, 12, 9, 0),
            (3, 16, 32, 14, 1),
        ] {
            let g = same_padded(k, 2, cin, cout);
            let w = Rng::new(9).normal_vec(g.weight_len(), 0.5);
            let dy = random_image(10, 3, g.out_size(h), cout, dy_pad);
            let init = random_image(11, 3, h, cin, 1);
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                for acc in [false, true] {
                    let (mut want, mut got) = (init.clone(), init.clone());
                    g.grad_input_as(isa, &dy, &w, &mut want, acc, true);
                    g.grad_input_as(isa, &dy, &w, &mut got, acc, false);
                    let what = format!("{} k{k} {cin}->{cout} h{h} acc {acc}", isa.name());
                    assert_eq!(bits(&got.data), bits(&want.data), "{what}");
                }
            }
        }
    }

    #[test]
    fn ensure_keeps_layout_and_zeroes_new_images() {
        let mut img = Image::default();
        img.ensure(2, 3, 3, 2, 1);
        assert_eq!(img.data.len(), 2 * 5 * 5 * 2);
        assert!(img.data.iter().all(|v| *v == 0.0));
        let at = img.at(1, 2, 2);
        img.data[at] = 4.0;
        img.ensure(3, 3, 3, 2, 1);
        assert_eq!(img.data[at], 4.0);
        assert!(img.data[2 * img.image_len()..].iter().all(|v| *v == 0.0));
        img.ensure(1, 4, 4, 2, 1);
        assert!(img.data.iter().all(|v| *v == 0.0));
        assert_eq!(img.local(0, 0), (6 + 1) * 2);
    }

    #[test]
    fn thread_ranges_partition_the_batch() {
        for n in 0..20 {
            let r = thread_ranges(n);
            assert_eq!(r.first().map(|r| r.start), Some(0));
            assert_eq!(r.last().map(|r| r.end), Some(n));
            for w in r.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
        }
    }
}
