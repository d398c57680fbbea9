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
use clap::Args;
use referee_submission::sign;
use std::path::PathBuf;
use std::time::Instant;

/// Flags of `referee keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the ed25519 private key (OpenSSH format, mode 0600);
    /// the public key goes to PATH.pub.
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// Comment stored with the key (e.g. who signs with it).
    #[arg(long, value_name = "C", default_value = "referee")]
    pub comment: String,
    /// Replace PATH and PATH.pub if they exist.
    #[arg(long)]
    pub force: bool,
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
}

/// Flags of `referee verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The signed directory to check.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// OpenSSH allowed_signers file: the signing key must be listed there
    /// (for namespace `referee`). Without it, the key's fingerprint is
    /// printed for a human to compare.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
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

/// `referee keygen`.
pub fn run_keygen(a: KeygenArgs) -> i32 {
    match sign::keygen(&a.out, &a.comment, a.force) {
        Ok(info) => {
            println!(
                "wrote private key {} (mode 0600)",
                info.private_key.display()
            );
            println!("wrote public key {}", info.public_key.display());
            println!("key fingerprint {}", info.fingerprint);
            println!("{}", info.public_line);
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
        Ok(s) => {
            let secs = t0.elapsed().as_secs_f64();
            let mb = s.bytes as f64 / 1e6;
            println!(
                "wrote {} and {}",
                s.manifest.display(),
                s.signature.display()
            );
            println!(
                "SIGNED {} ({} files, {:.1} MB in {:.2} s, {:.0} MB/s, {} threads, key {})",
                a.dir.display(),
                s.files,
                mb,
                secs,
                mb / secs.max(1e-9),
                threads,
                s.key_fingerprint
            );
            EXIT_OK
        }
        Err(e) => usage_error(e),
    }
}

/// `referee verify`.
pub fn run_verify(a: VerifyArgs) -> i32 {
    init_threads(a.threads);
    match sign::verify_dir(&a.dir, a.allowed_signers.as_deref()) {
        Ok(report) => {
            // The runs' time-stamps (crate::tsa), with --tsa-ca.
            let tsa = match a
                .tsa_ca
                .as_deref()
                .map(|ca| crate::tsa::verify_tree(&a.dir, ca))
            {
                Some(Err(e)) => return usage_error(e),
                t => t.and_then(Result::ok),
            };
            if a.json {
                let mut v: serde_json::Value =
                    serde_json::from_str(&report.to_json()).expect("json");
                if let Some(t) = &tsa {
                    v["time_stamps"] = serde_json::to_value(t).expect("json");
                }
                println!("{v}");
            } else {
                println!("{report}");
                if let Some(t) = &tsa {
                    println!("{t}");
                }
            }
            if report.ok && tsa.is_none_or(|t| t.ok) {
                EXIT_OK
            } else {
                EXIT_FAIL
            }
        }
        Err(e) => {
            if a.json {
                let v = serde_json::json!({
                    "dir": a.dir.display().to_string(),
                    "ok": false,
                    "error": e.to_string(),
                });
                println!("{v}");
            }
            usage_error(e)
        }
    }
}
