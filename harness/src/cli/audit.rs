//! `referee audit DIR`: the flags become an [`AuditRequest`]; the audit
//! itself is crate::audit; this file writes `audit.md`/`audit.json` and
//! prints the verdict.

use super::{EXIT_FAIL, EXIT_OK, usage_error};
use crate::audit::{AuditRequest, audit};
use crate::outdir::utc_stamp;
use clap::Args;
use referee_rules::report::{Detail, Format, render};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A signed submission folder (ORG with systems/, results/, MANIFEST, MANIFEST.sig).
    pub dir: PathBuf,
    /// Re-run this many results (the first K of each benchmark).
    #[arg(long, default_value_t = 0)]
    pub rerun: usize,
    /// Where audit.md, audit.json and the re-run logs go (default: audit-TIMESTAMP).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// allowed_signers file (OpenSSH format) the signing key must be in.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Verify the runs' RFC 3161 time-stamps against this CA certificate
    /// (PEM) and report the anchored interval of each (docs/tsa.md).
    #[arg(long, value_name = "FILE")]
    pub tsa_ca: Option<PathBuf>,
    /// Re-run even if the code or the data differ from the original's
    /// (recorded in the report).
    #[arg(long)]
    pub force: bool,
    /// Where prepared datasets are (default: $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub rules: super::common::RulesetArgs,
    /// Compute threads.
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    /// The report (audit.json's content) on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: AuditArgs) -> i32 {
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // SAFETY: called before any other thread of this process exists.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
    if !a.dir.is_dir() {
        return usage_error(format!("{}: no such directory", a.dir.display()));
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("audit-{}", utc_stamp())));
    if let Err(e) = std::fs::create_dir_all(&out) {
        return usage_error(format!("{}: {e}", out.display()));
    }
    let req = AuditRequest {
        dir: a.dir.clone(),
        rerun: a.rerun,
        out: out.clone(),
        allowed_signers: a.allowed_signers.clone(),
        force: a.force,
        data_dir: a
            .data_dir
            .clone()
            .unwrap_or_else(referee_datasets::default_data_dir),
        rules: a.rules.request(),
        tsa_ca: a.tsa_ca.clone(),
    };
    let report = match audit(&req) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    if let Err(e) = report.write(&out) {
        return usage_error(format!("{}: {e}", out.display()));
    }
    let format = if a.json { Format::Json } else { Format::Human };
    let mut stdout = std::io::stdout().lock();
    let _ = render(&report, format, Detail::default(), &mut stdout);
    eprintln!(
        "audit report: {} and {}",
        out.join("audit.md").display(),
        out.join("audit.json").display()
    );
    if report.passed() { EXIT_OK } else { EXIT_FAIL }
}
