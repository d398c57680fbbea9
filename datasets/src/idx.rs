//! IDX files (the MNIST / Fashion-MNIST container), optionally gzipped.
//!
//! Layout: a big-endian `u32` magic `0x0000TTNN` where `TT = 0x08` means
//! unsigned bytes and `NN` is the number of dimensions; then `NN` big-endian
//! `u32` dimension sizes; then the row-major `u8` data, exactly
//! `product(dims)` bytes. Images use magic `0x00000803` (`[n, rows, cols]`),
//! labels `0x00000801` (`[n]`).

use std::fs;
use std::io::Read;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::{DataError, DatasetLocation};

/// Magic of an IDX file of `u8` images `[n, rows, cols]`.
pub(crate) const IDX_IMAGES_MAGIC: u32 = 0x0000_0803;
/// Magic of an IDX file of `u8` labels `[n]`.
pub(crate) const IDX_LABELS_MAGIC: u32 = 0x0000_0801;

/// A decoded IDX array of bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Read a file, gunzipping it if it starts with the gzip magic.
pub(crate) fn read_maybe_gz(path: &Path, ctx: &DatasetLocation) -> Result<Vec<u8>, DataError> {
    let raw = fs::read(path).map_err(ctx.io(path, "read"))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 2);
        MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| ctx.corrupt(path, format!("invalid gzip data: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Decode IDX bytes, requiring the given magic. `path` is only used in errors.
pub(crate) fn decode_idx(
    bytes: &[u8],
    expected_magic: u32,
    path: &Path,
    ctx: &DatasetLocation,
) -> Result<IdxArray, DataError> {
    let be32 = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let magic = be32(0).ok_or_else(|| {
        ctx.corrupt(
            path,
            format!(
                "truncated IDX file: {} bytes, too short for the magic number",
                bytes.len()
            ),
        )
    })?;
    if magic != expected_magic {
        return Err(ctx.corrupt(
            path,
            format!("bad IDX magic 0x{magic:08x} (expected 0x{expected_magic:08x})"),
        ));
    }
    let ndims = (magic & 0xff) as usize;
    let header = 4 + 4 * ndims;
    let mut dims = Vec::with_capacity(ndims);
    for i in 0..ndims {
        let d = be32(4 + 4 * i).ok_or_else(|| {
            ctx.corrupt(
                path,
                format!(
                    "truncated IDX header: {} bytes, expected {header}",
                    bytes.len()
                ),
            )
        })?;
        dims.push(d as usize);
    }
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ctx.corrupt(path, format!("IDX dimensions {dims:?} overflow")))?;
    let found = bytes.len() - header;
    if found < expected {
        return Err(ctx.corrupt(
            path,
            format!("truncated IDX data: dimensions {dims:?} need {expected} bytes after the header, found {found}"),
        ));
    }
    if found > expected {
        return Err(ctx.corrupt(
            path,
            format!(
                "{} unexpected trailing bytes after the IDX data (dimensions {dims:?})",
                found - expected
            ),
        ));
    }
    Ok(IdxArray {
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// Encode an IDX array (used to build test fixtures).
#[cfg(test)]
pub(crate) fn encode_idx(magic: u32, dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = magic.to_be_bytes().to_vec();
    for &d in dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn ctx() -> DatasetLocation {
        DatasetLocation::new("fashion_mnist", Path::new("/x/data"))
    }

    #[test]
    fn decodes_images_and_labels() {
        let data: Vec<u8> = (0..12).collect();
        let bytes = encode_idx(IDX_IMAGES_MAGIC, &[3, 2, 2], &data);
        let a = decode_idx(&bytes, IDX_IMAGES_MAGIC, Path::new("x"), &ctx()).unwrap();
        assert_eq!(a.dims, vec![3, 2, 2]);
        assert_eq!(a.data, data);
        let l = decode_idx(
            &encode_idx(IDX_LABELS_MAGIC, &[2], &[7, 9]),
            IDX_LABELS_MAGIC,
            Path::new("y"),
            &ctx(),
        )
        .unwrap();
        assert_eq!((l.dims, l.data), (vec![2], vec![7, 9]));
    }

    #[test]
    fn bad_magic_is_an_error_naming_the_file_and_fix() {
        let bytes = encode_idx(IDX_LABELS_MAGIC, &[2], &[1, 2]);
        let e = decode_idx(
            &bytes,
            IDX_IMAGES_MAGIC,
            Path::new("/d/train-images-idx3-ubyte"),
            &ctx(),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "/d/train-images-idx3-ubyte: bad IDX magic 0x00000801 (expected 0x00000803)"
            ),
            "{msg}"
        );
        assert!(
            msg.contains("referee data prepare fashion_mnist --data-dir /x/data"),
            "{msg}"
        );
    }

    #[test]
    fn truncated_files_are_errors() {
        let full = encode_idx(IDX_IMAGES_MAGIC, &[2, 2, 2], &[0; 8]);
        let e = decode_idx(
            &full[..full.len() - 1],
            IDX_IMAGES_MAGIC,
            Path::new("f"),
            &ctx(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("truncated IDX data"), "{e}");
        let e = decode_idx(&full[..6], IDX_IMAGES_MAGIC, Path::new("f"), &ctx()).unwrap_err();
        assert!(e.to_string().contains("truncated IDX header"), "{e}");
        let e = decode_idx(&full[..2], IDX_IMAGES_MAGIC, Path::new("f"), &ctx()).unwrap_err();
        assert!(e.to_string().contains("too short for the magic"), "{e}");
        let mut long = full.clone();
        long.push(0);
        let e = decode_idx(&long, IDX_IMAGES_MAGIC, Path::new("f"), &ctx()).unwrap_err();
        assert!(e.to_string().contains("trailing bytes"), "{e}");
    }

    #[test]
    fn reads_gzip_and_plain() {
        let dir = tempfile::tempdir().unwrap();
        let raw = encode_idx(IDX_LABELS_MAGIC, &[3], &[1, 2, 3]);
        let plain = dir.path().join("l");
        fs::write(&plain, &raw).unwrap();
        let gz = dir.path().join("l.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&raw).unwrap();
        fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(read_maybe_gz(&plain, &ctx()).unwrap(), raw);
        assert_eq!(read_maybe_gz(&gz, &ctx()).unwrap(), raw);
        let bad = dir.path().join("bad.gz");
        fs::write(&bad, [0x1f, 0x8b, 0, 0, 0]).unwrap();
        assert!(
            read_maybe_gz(&bad, &ctx())
                .unwrap_err()
                .to_string()
                .contains("invalid gzip")
        );
    }
}
