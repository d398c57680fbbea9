//! RFC 3161 time-stamps: a clock anchored outside the submitter.
//!
//! This module owns everything referee does with time-stamping
//! authorities (TSAs). On the run side ([`anchor`]), `referee run --tsa
//! URL` asks each authority, before a run starts, for a token over a fresh
//! 32-byte nonce (message imprint: sha256 of the nonce) and derives the
//! run's seed from the first token; when the run ends it asks for a second
//! token over sha256(sha256(result file) ‖ sha256(the run's witness as
//! recorded)). The tokens are stored as DER `TimeStampResp` files
//! (`run_I.start.tsr`, `run_I.end.tsr`) beside the run record and described
//! in the run's `tsa` entry. On the checking side ([`verify`]), `check`,
//! `verify` and `audit` with `--tsa-ca FILE` verify each token (its chain
//! to that CA, its imprint against the digests recomputed from the files,
//! its nonce), and report the anchored interval: every claimed
//! `init_start`…`run_stop` must lie between the two tokens' times, so
//! init + run took at most T2 − T1 — whoever held the signing key.
//!
//! The anchored interval bounds init + run from above; the run side also
//! records how long the token requests took and how far they lay from
//! `init_start` and `run_stop`, and the checking side fails a run whose
//! logged init + run is shorter than T2 − T1 by more than those overheads
//! (each capped), both accuracies and a margin: an end token asked for
//! later, over a log whose times were shortened, no longer passes.
//!
//! Maintained implementations do the cryptography and the wire format:
//! RustCrypto's `der`, `cms` and `x509-cert` read a reply's DER and build
//! requests ([`token`]); every field comes from the `TSTInfo` inside the
//! signed data, never from text. The `openssl ts` command-line tool
//! ([`openssl`], run with explicit arguments, never through a shell)
//! verifies the signature and the chain on the same bytes; `ureq` POSTs
//! `application/timestamp-query` ([`client`]).

pub mod anchor;
pub mod client;
pub mod openssl;
pub mod token;
pub mod verify;

pub use anchor::{Anchors, derive_seed};
pub use verify::{TsaReport, check_log, verify_tree};

use std::path::PathBuf;

/// What can stop time-stamping or its verification from being done at
/// all (findings about tokens are in [`verify::TsaReport`]).
#[derive(Debug, thiserror::Error)]
pub enum TsaError {
    /// The authority could not be reached or answered with an error.
    #[error("time-stamping authority {url} cannot be reached: {message}")]
    Unreachable { url: String, message: String },
    /// The authority answered, but did not grant a token.
    #[error("time-stamping authority {url} did not grant a time-stamp: {status}")]
    NotGranted { url: String, status: String },
    /// The authority's token does not answer the request sent.
    #[error(
        "time-stamping authority {url} answered another request: {what}: expected {expected}, found {found}"
    )]
    WrongAnswer {
        url: String,
        what: &'static str,
        expected: String,
        found: String,
    },
    /// `openssl` could not be started.
    #[error(
        "`openssl {args}` could not start: {source} (referee needs OpenSSL's command-line tool: Debian package `openssl`)"
    )]
    OpensslMissing {
        args: String,
        source: std::io::Error,
    },
    /// `openssl` ran and failed.
    #[error("`openssl {args}` failed: {stderr}")]
    Openssl { args: String, stderr: String },
    /// A reply is not DER of the structure expected.
    #[error("{origin}: not an RFC 3161 time-stamp reply: expected {expected}: {source}")]
    Der {
        origin: String,
        expected: &'static str,
        source: der::Error,
    },
    /// A reply decodes, but a field is not what RFC 3161 allows.
    #[error("{origin}: not an RFC 3161 time-stamp reply: expected {expected}, found {found}")]
    Malformed {
        origin: String,
        expected: &'static str,
        found: String,
    },
    /// A reply file that is not a regular file (it is not opened further).
    #[error(
        "{path}: {found}, not a regular file: a time-stamp reply is read from a regular file only"
    )]
    NotRegularFile { path: PathBuf, found: &'static str },
    /// A reply file larger than [`token::MAX_REPLY_BYTES`].
    #[error("{path}: larger than {limit} bytes, the most a time-stamp reply may have")]
    TooLarge { path: PathBuf, limit: u64 },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl TsaError {
    fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> TsaError {
        let path = path.into();
        move |source| TsaError::Io { path, source }
    }
}

/// sha256 of bytes, as raw bytes.
fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).into()
}

/// The digest an end token is over: sha256(sha256(result) ‖ sha256(witness)).
pub fn end_digest(result_sha256: &[u8; 32], witness_sha256: &[u8; 32]) -> [u8; 32] {
    let mut both = Vec::with_capacity(64);
    both.extend_from_slice(result_sha256);
    both.extend_from_slice(witness_sha256);
    sha256(&both)
}

/// The bytes of a run's witness an end token covers: its compact JSON
/// (`null` for a run referee did not supervise). The record's witness,
/// read back and written again, gives the same bytes.
pub fn witness_bytes<W: serde::Serialize>(witness: Option<&W>) -> Vec<u8> {
    serde_json::to_vec(&witness).expect("a witness is serialisable")
}
