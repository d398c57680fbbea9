//! 8-bit grayscale PNGs: how prepared image datasets are written and read.
//!
//! Owns the PNG settings of prepared data (their bytes enter dataset
//! fingerprints) and the conversion of any PNG to 8-bit luma. It knows
//! nothing of datasets, labels or batches.
//!
//! Built on the `png` crate alone. referee used `image` (which wraps the
//! same `png` crate) and kept only its PNG path; `image` brought colour
//! management crates (moxcms, pxfm) that referee never calls and about 8 %
//! of a cold release build (docs/performance.md, "Cold release build").
//! The encoder settings and the conversion below are the ones `image`
//! 0.25.9 applies to an sRGB image, so prepared files and decoded pixels are
//! unchanged; tests compare both with `image` (a dev-dependency) for every
//! colour type and depth. One case is not followed: a colour PNG whose cICP
//! chunk names other primaries, where `image` derives other weights.

use std::io::Cursor;

/// Encode 8-bit grayscale pixels as PNG: fast deflate, adaptive filtering.
pub(crate) fn encode(pixels: &[u8], width: u32, height: u32) -> Vec<u8> {
    let mut buf = Vec::with_capacity(pixels.len() / 2 + 64);
    let mut enc = png::Encoder::new(&mut buf, width, height);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    enc.set_filter(png::Filter::Adaptive);
    let mut w = enc
        .write_header()
        .expect("writing a PNG header into memory cannot fail");
    w.write_image_data(pixels)
        .expect("pixels match the header's size");
    w.finish().expect("finishing a PNG in memory cannot fail");
    buf
}

/// The sRGB (BT.709 primaries, D65) luma weights as f32, exactly as `image`
/// 0.25 derives them (its colour-management crate computes them from the
/// primaries; 0.2126, 0.7152, 0.0722 to 4 places). A test reads them back
/// from `image`.
const LUMA: [f32; 3] = [
    f32::from_bits(0x3e59_c05b),
    f32::from_bits(0x3f37_15fc),
    f32::from_bits(0x3d93_cf75),
];

/// `acc + a × b`, fused where `image` fuses it (x86 with FMA enabled at
/// compile time, aarch64), so that rounding is the same.
#[inline(always)]
fn mul_acc(acc: f32, a: f32, b: f32) -> f32 {
    if cfg!(any(
        all(
            any(target_arch = "x86", target_arch = "x86_64"),
            target_feature = "fma"
        ),
        all(target_arch = "aarch64", target_feature = "neon")
    )) {
        a.mul_add(b, acc)
    } else {
        a * b + acc
    }
}

/// Colour to 8-bit luma: each channel scaled to [0, 1] (× 1/max), weighted
/// and summed in f32, then × 255 and rounded.
fn luma(rgb: [u32; 3], max: f32) -> u8 {
    let scale = 1.0 / max;
    let l = rgb
        .iter()
        .zip(LUMA)
        .fold(0.0, |acc, (&c, k)| mul_acc(acc, c as f32 * scale, k));
    // A saturating cast: below 0 is 0, above 255 is 255.
    (l * 255.0).round() as u8
}

/// A 16-bit sample to 8 bits, rounded: round(v × 255 ÷ 65535).
fn to8(v: u32) -> u8 {
    ((v + 128) / 257) as u8
}

/// Decode a PNG of any colour type and depth into 8-bit luma: palettes and
/// depths below 8 expanded, alpha dropped, colour to luma in the sample's
/// own depth, 16-bit samples rounded to 8. Returns (pixels, height, width).
pub(crate) fn decode(bytes: &[u8]) -> Result<(Vec<u8>, usize, usize), png::DecodingError> {
    let mut dec = png::Decoder::new(Cursor::new(bytes));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut reader = dec.read_info()?;
    let (color, depth) = reader.output_color_type();
    let size = reader
        .output_buffer_size()
        .ok_or(png::DecodingError::LimitsExceeded)?;
    let mut buf = vec![0; size];
    let frame = reader.next_frame(&mut buf)?;
    buf.truncate(frame.buffer_size());
    let (w, h) = (frame.width as usize, frame.height as usize);
    let channels = color.samples();
    let wide = depth == png::BitDepth::Sixteen;
    if channels == 1 && !wide {
        // Already 8-bit luma (EXPAND widened depths below 8): the pixels.
        return Ok((buf, h, w));
    }
    let sample: Vec<u32> = if wide {
        buf.chunks_exact(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .collect()
    } else {
        buf.iter().map(|&b| u32::from(b)).collect()
    };
    let max = if wide { 65_535.0 } else { 255.0 };
    let out = sample
        .chunks_exact(channels)
        .map(|p| match (channels >= 3, wide) {
            (true, _) => luma([p[0], p[1], p[2]], max),
            (false, true) => to8(p[0]),
            (false, false) => p[0] as u8,
        })
        .collect();
    Ok((out, h, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::ImageEncoder;

    /// A PNG written by `image` in the given colour type.
    fn image_png(data: &[u8], w: u32, h: u32, ct: image::ExtendedColorType) -> Vec<u8> {
        let mut buf = Vec::new();
        image::codecs::png::PngEncoder::new(&mut buf)
            .write_image(data, w, h, ct)
            .unwrap();
        buf
    }

    fn image_luma(bytes: &[u8]) -> Vec<u8> {
        image::load_from_memory_with_format(bytes, image::ImageFormat::Png)
            .unwrap()
            .into_luma8()
            .into_raw()
    }

    /// Deterministic bytes covering 0 and 255.
    fn noise(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                match i % 17 {
                    0 => 0,
                    1 => 255,
                    _ => (x >> 8) as u8,
                }
            })
            .collect()
    }

    #[test]
    fn the_luma_weights_are_images() {
        for (c, &k) in LUMA.iter().enumerate() {
            let mut px = [0f32; 3];
            px[c] = 1.0;
            let img = image::Rgb32FImage::from_raw(1, 1, px.to_vec()).unwrap();
            let l = image::DynamicImage::ImageRgb32F(img)
                .to_luma32f()
                .into_raw()[0];
            assert_eq!(l.to_bits(), k.to_bits(), "channel {c}");
        }
    }

    #[test]
    fn encoding_gives_the_bytes_image_wrote() {
        let (w, h) = (28, 28);
        let px = noise(w * h, 1);
        assert_eq!(
            encode(&px, w as u32, h as u32),
            image_png(&px, w as u32, h as u32, image::ExtendedColorType::L8)
        );
    }

    #[test]
    fn every_colour_type_decodes_to_the_luma_image_gave() {
        use image::ExtendedColorType as C;
        let (w, h) = (13u32, 7u32);
        let n = (w * h) as usize;
        for (ct, bytes_per_px) in [
            (C::L8, 1),
            (C::La8, 2),
            (C::Rgb8, 3),
            (C::Rgba8, 4),
            (C::L16, 2),
            (C::La16, 4),
            (C::Rgb16, 6),
            (C::Rgba16, 8),
        ] {
            let data = noise(n * bytes_per_px, bytes_per_px as u32);
            let file = image_png(&data, w, h, ct);
            let (ours, hh, ww) = decode(&file).unwrap();
            assert_eq!((hh, ww), (h as usize, w as usize), "{ct:?}");
            assert_eq!(ours, image_luma(&file), "{ct:?}");
        }
        // Palettes and depths below 8 (written by `png` itself).
        for (color, depth, palette) in [
            (png::ColorType::Indexed, png::BitDepth::Four, true),
            (png::ColorType::Indexed, png::BitDepth::Eight, true),
            (png::ColorType::Grayscale, png::BitDepth::One, false),
            (png::ColorType::Grayscale, png::BitDepth::Two, false),
        ] {
            let bits = depth as usize;
            let row = (w as usize * bits).div_ceil(8);
            let data = noise(row * h as usize, bits as u32 + 7);
            let mut file = Vec::new();
            let mut enc = png::Encoder::new(&mut file, w, h);
            enc.set_color(color);
            enc.set_depth(depth);
            if palette {
                enc.set_palette(noise(3 * 256, 99));
            }
            let mut wr = enc.write_header().unwrap();
            wr.write_image_data(&data).unwrap();
            wr.finish().unwrap();
            let (ours, _, _) = decode(&file).unwrap();
            assert_eq!(ours, image_luma(&file), "{color:?} {depth:?}");
        }
    }

    #[test]
    fn a_broken_file_is_an_error_not_a_panic() {
        let mut file = encode(&noise(64, 3), 8, 8);
        file.truncate(file.len() / 2);
        assert!(decode(&file).is_err());
        assert!(decode(b"not a png").is_err());
    }
}
