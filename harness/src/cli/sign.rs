//! `referee keygen`, `referee sign`, `referee verify`: signed submission
//! directories.
//!
//! `sign` writes `DIR/MANIFEST` (every file's size and SHA-256, canonical
//! text) and `DIR/MANIFEST.sig` (an OpenSSH SSHSIG signature of it,
//! namespace `referee`); `verify` checks both and every file, so an auditor
//! can trust a directory without trusting the machine that produced it.
//! Compatible with `ssh-keygen -Y sign/verify -n referee`.
//!
//! Exit codes: 0 ok, 1 verification found a problem, 2 the command could not
//! do its job (bad paths, unreadable key, malformed allowed_signers, a tree
//! that cannot be signed).

use super::{EXIT_FAIL, EXIT_OK, init_threads, usage_error};
use crate::signing::{self, KeygenReport, SignReport, VerifyError};
use clap::Args;
use referee_rules::report::{Detail, Format, Report, render};
use referee_submission::sign::{self, Trust};
use std::io;
use std::path::PathBuf;
use std::time::Instant;

/// Flags of `referee keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the ed25519 private key (OpenSSH format, mode 0600);
    /// the public key goes to PATH.pub.
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// Comment stored with the key: the organisation that signs with it.
    /// It is also the principal of the allowed_signers line printed for
    /// auditors, and an audit requires the package's organisation to be
    /// that principal.
    #[arg(long, value_name = "ORG", default_value = "referee")]
    pub comment: String,
    /// Replace PATH and PATH.pub if they exist.
    #[arg(long)]
    pub force: bool,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `referee sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The submission directory to sign.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The ed25519 private key (OpenSSH format, unencrypted), e.g. from
    /// `referee keygen` or `ssh-keygen -t ed25519`.
    #[arg(long, value_name = "PATH")]
    pub key: PathBuf,
    /// Hashing threads (default: all cores).
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `referee verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The signed directory to check.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub signer: SignerArgs,
    /// Also verify the runs' RFC 3161 time-stamps against this CA
    /// certificate (PEM) and report each run's anchored interval (docs/tsa.md).
    #[arg(long, value_name = "FILE")]
    pub tsa_ca: Option<PathBuf>,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Hashing threads (default: all cores).
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

/// Who must have signed: `--allowed-signers FILE` or `--signer SHA256:…`
/// (shared by `verify` and `audit`).
#[derive(Debug, Args, Clone)]
pub struct SignerArgs {
    /// OpenSSH allowed_signers file: the signing key must be listed there
    /// for namespace `referee` (`referee keygen` prints the line to add).
    #[arg(long, value_name = "FILE", conflicts_with = "signer")]
    pub allowed_signers: Option<PathBuf>,
    /// The signing key's SHA256 fingerprint (pinned): only that key is
    /// trusted. Without this or --allowed-signers the signature shows only
    /// that the files are those some key signed, not who signed them.
    #[arg(long, value_name = "SHA256:…")]
    pub signer: Option<String>,
}

impl SignerArgs {
    /// The trust these flags ask for; `Err`: a malformed fingerprint.
    pub fn trust(&self) -> Result<Trust, String> {
        Ok(match (&self.allowed_signers, &self.signer) {
            (Some(p), _) => Trust::AllowedSigners(p.clone()),
            (None, Some(fp)) => {
                Trust::Fingerprint(sign::parse_fingerprint(fp).map_err(|e| e.to_string())?)
            }
            (None, None) => Trust::Unchecked,
        })
    }
}

/// Print `report` as a person or a program asked.
fn print(report: &impl Report, json: bool) {
    let format = if json { Format::Json } else { Format::Human };
    let _ = render(report, format, Detail::default(), &mut io::stdout().lock());
}

/// `referee keygen`.
pub fn run_keygen(a: KeygenArgs) -> i32 {
    match sign::keygen(&a.out, &a.comment, a.force) {
        Ok(info) => {
            print(&KeygenReport(info), a.json);
            EXIT_OK
        }
        Err(e) => usage_error(e),
    }
}

/// `referee sign`.
pub fn run_sign(a: SignArgs) -> i32 {
    let threads = init_threads(a.threads);
    let t0 = Instant::now();
    match sign::sign_dir(&a.dir, &a.key) {
        Ok(summary) => {
            let report = SignReport {
                dir: a.dir.display().to_string(),
                summary,
                seconds: t0.elapsed().as_secs_f64(),
                threads,
            };
            print(&report, a.json);
            EXIT_OK
        }
        Err(e) => usage_error(e),
    }
}

/// `referee verify`. Exit 0 when every file is as signed (and the key is
/// the trusted signer, when one was given).
pub fn run_verify(a: VerifyArgs) -> i32 {
    init_threads(a.threads);
    let trust = match a.signer.trust() {
        Ok(t) => t,
        Err(e) => return usage_error(e),
    };
    match signing::verify(&a.dir, &trust, a.tsa_ca.as_deref()) {
        Ok(output) => {
            let ok = output.passed();
            print(&output, a.json);
            if ok { EXIT_OK } else { EXIT_FAIL }
        }
        Err(VerifyError::Signature(e)) => {
            if a.json {
                println!("{}", signing::verify_error_json(&a.dir, &e));
            }
            usage_error(e)
        }
        Err(e) => usage_error(e),
    }
}
