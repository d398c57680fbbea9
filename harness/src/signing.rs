//! What `referee keygen`, `referee sign` and `referee verify` report, and
//! the verification of a signed directory with, optionally, its runs'
//! time-stamps. The signing itself is `referee_submission::sign`; the time-
//! stamps are [`crate::tsa`]. Must not know how the commands parse flags.

use crate::tsa::TsaError;
use crate::tsa::verify::TsaReport;
use referee_rules::escape::term;
use referee_rules::report::{Detail, Report};
use referee_submission::sign::{self, KeyInfo, SignError, SignSummary, Trust, VerifyReport};
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

/// What `referee keygen` wrote.
#[derive(Serialize)]
pub struct KeygenReport(pub KeyInfo);

impl Report for KeygenReport {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        let k = &self.0;
        writeln!(
            out,
            "wrote private key {} (mode 0600)",
            k.private_key.display()
        )?;
        writeln!(out, "wrote public key {}", k.public_key.display())?;
        writeln!(out, "key fingerprint {}", k.fingerprint)?;
        writeln!(out, "{}", k.public_line)?;
        writeln!(
            out,
            "hand auditors this allowed_signers line (for `referee verify/audit --allowed-signers FILE`), or the fingerprint (for --signer):"
        )?;
        writeln!(out, "{}", k.allowed_signers_line)
    }
    fn write_markdown(&self, out: &mut dyn Write, d: Detail) -> io::Result<()> {
        self.write_human(out, d)
    }
}

/// What `referee sign` did.
#[derive(Serialize)]
pub struct SignReport {
    pub dir: String,
    #[serde(flatten)]
    pub summary: SignSummary,
    pub seconds: f64,
    pub threads: usize,
}

impl Report for SignReport {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        let s = &self.summary;
        let mb = s.bytes as f64 / 1e6;
        writeln!(
            out,
            "wrote {} and {}",
            term(&s.manifest.display().to_string()),
            term(&s.signature.display().to_string())
        )?;
        writeln!(
            out,
            "SIGNED {} ({} files, {:.1} MB in {:.2} s, {:.0} MB/s, {} threads, key {})",
            term(&self.dir),
            s.files,
            mb,
            self.seconds,
            mb / self.seconds.max(1e-9),
            self.threads,
            s.key_fingerprint
        )
    }
    fn write_markdown(&self, out: &mut dyn Write, d: Detail) -> io::Result<()> {
        self.write_human(out, d)
    }
}

/// What `referee verify` found: the manifest and signature, and with a CA
/// the runs' time-stamps.
#[derive(Serialize)]
pub struct VerifyOutput {
    #[serde(flatten)]
    pub report: VerifyReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_stamps: Option<TsaReport>,
}

impl VerifyOutput {
    /// Every file is as signed, the key is the trusted signer (when one
    /// was given) and every time-stamp verifies (when asked).
    pub fn passed(&self) -> bool {
        self.report.ok && self.time_stamps.as_ref().is_none_or(|t| t.ok)
    }
}

impl Report for VerifyOutput {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(out, "{}", self.report)?;
        if let Some(t) = &self.time_stamps {
            writeln!(out, "{t}")?;
        }
        Ok(())
    }
    fn write_markdown(&self, out: &mut dyn Write, d: Detail) -> io::Result<()> {
        self.write_human(out, d)
    }
}

/// Why a directory could not be verified at all.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The signature check could not run (see [`sign::verify_dir`]).
    #[error(transparent)]
    Signature(#[from] SignError),
    /// The time-stamps could not be checked (e.g. an unreadable CA).
    #[error(transparent)]
    TimeStamps(#[from] TsaError),
}

/// Verify `dir` as `trust` says and, with `tsa_ca`, its runs' time-stamps.
pub fn verify(
    dir: &Path,
    trust: &Trust,
    tsa_ca: Option<&Path>,
) -> Result<VerifyOutput, VerifyError> {
    let report = sign::verify_dir_trusting(dir, trust)?;
    let time_stamps = tsa_ca
        .map(|ca| crate::tsa::verify_tree(dir, ca))
        .transpose()?;
    Ok(VerifyOutput {
        report,
        time_stamps,
    })
}

/// The one JSON object `referee verify --json` prints when the signature
/// check could not run.
pub fn verify_error_json(dir: &Path, e: &SignError) -> String {
    serde_json::json!({
        "dir": dir.display().to_string(),
        "ok": false,
        "error": e.to_string(),
    })
    .to_string()
}
