//! Rotary position embeddings: the tables and the rotation both engines use
//! (the graph applies them as candle ops in `ops`).

use std::sync::Arc;

/// Rotary position embedding tables for head dim `dh` ("rotate-half" pairing
/// `(i, i + dh/2)`), angle `pos * base^(-2i/dh)`.
#[derive(Debug, Clone)]
pub struct Rope {
    pub dh: usize,
    pub max_t: usize,
    /// `[max_t, dh/2]`
    pub cos: Arc<Vec<f32>>,
    pub sin: Arc<Vec<f32>>,
}

impl Rope {
    pub fn new(dh: usize, max_t: usize, base: f64) -> Self {
        let half = dh / 2;
        let mut cos = Vec::with_capacity(max_t * half);
        let mut sin = Vec::with_capacity(max_t * half);
        for t in 0..max_t {
            for i in 0..half {
                let freq = base.powf(-2.0 * i as f64 / dh as f64);
                let a = t as f64 * freq;
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
        Self {
            dh,
            max_t,
            cos: Arc::new(cos),
            sin: Arc::new(sin),
        }
    }

    /// Rotates `src` (one head vector at position `t`) into `dst`; `inverse` applies the transpose.
    /// (Always inlined: the CPU engine calls it inside its AVX2 context, see
    /// `cpu::Isa::vectorised`.)
    #[inline(always)]
    pub fn rotate(&self, t: usize, src: &[f32], dst: &mut [f32], inverse: bool) {
        let h = self.dh / 2;
        let (c, s) = (&self.cos[t * h..(t + 1) * h], &self.sin[t * h..(t + 1) * h]);
        let (x1, x2) = src[..2 * h].split_at(h);
        let (y1, y2) = dst[..2 * h].split_at_mut(h);
        let sg = if inverse { -1.0 } else { 1.0 };
        for i in 0..h {
            let si = sg * s[i];
            y1[i] = x1[i] * c[i] - x2[i] * si;
            y2[i] = x2[i] * c[i] + x1[i] * si;
        }
    }

    /// [`Rope::rotate`] of `rows` head vectors at positions `0..rows`: row
    /// `p` of `src` starts at `p * src_stride`, of `dst` at `p * dst_stride`.
    pub fn rotate_rows(
        &self,
        rows: usize,
        src: &[f32],
        src_stride: usize,
        dst: &mut [f32],
        dst_stride: usize,
        inverse: bool,
    ) {
        for p in 0..rows {
            self.rotate(
                p,
                &src[p * src_stride..],
                &mut dst[p * dst_stride..],
                inverse,
            );
        }
    }
}
