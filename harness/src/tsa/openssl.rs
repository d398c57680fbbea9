//! The `openssl ts` command-line tool, run with explicit arguments (never
//! through a shell), for what needs cryptography: verifying a token's
//! signature and its chain (`-verify -CAfile`). Fields are never read from
//! its text output (see [`super::token`]).

use super::TsaError;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// Run `openssl ARGS`; its stdout, or why it failed.
fn openssl(args: &[&OsStr]) -> Result<Vec<u8>, TsaError> {
    let shown = || {
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let out = Command::new("openssl")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| TsaError::OpensslMissing {
            args: shown(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout
            .lines()
            .chain(stderr.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("Using configuration"))
            // `…:ts_verify_cert:…:Verify error:unable to get local issuer
            // certificate` → the reason.
            .map(|l| l.rsplit_once("Verify error:").map_or(l, |(_, why)| why))
            .collect();
        return Err(TsaError::Openssl {
            args: shown(),
            // A token's content can reach openssl's messages.
            stderr: super::token::escape(&lines.join("; ")),
        });
    }
    Ok(out.stdout)
}

/// Verify a reply's token: its signature, its signer's certificate
/// (critical extendedKeyUsage timeStamping) chaining to `ca_file`, and its
/// message imprint equal to `digest`. `reply` is the reply's DER, the
/// bytes whose fields were read ([`super::token::parse`]): they are
/// written to a private file and verified there, so that what is verified
/// is what was read. `Err(Openssl)` carries openssl's reason.
pub fn verify(reply: &[u8], digest: &[u8], ca_file: &Path) -> Result<(), TsaError> {
    let scratch = Scratch::new()?;
    let tsr = scratch.path("reply.tsr");
    std::fs::write(&tsr, reply).map_err(TsaError::io(&tsr))?;
    let hex = hex::encode(digest);
    openssl(&[
        os("ts"),
        os("-verify"),
        os("-in"),
        tsr.as_os_str(),
        os("-digest"),
        os(&hex),
        os("-CAfile"),
        ca_file.as_os_str(),
    ])
    .map(drop)
}

/// A scratch directory for request and reply files, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new() -> Result<Scratch, TsaError> {
        let dir = tempfile::Builder::new()
            .prefix("referee-tsa-")
            .tempdir()
            .map_err(TsaError::io(std::env::temp_dir()))?;
        Ok(Scratch(dir.keep()))
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
