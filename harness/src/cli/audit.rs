//! `referee audit DIR`: the flags become an [`AuditRequest`]; the audit
//! itself is crate::audit (which also asks the auditor, at a terminal,
//! before a package's program is run when `--allow-exec` was not given);
//! this file has it write `audit.md`/`audit.json` and prints the verdict.

use super::{EXIT_FAIL, EXIT_OK, usage_error};
use crate::audit::{AuditReport, AuditRequest, RerunSeed, ask_at_terminal, audit};
use crate::outdir::utc_stamp;
use clap::{Args, ValueEnum};
use referee_rules::report::{Detail, Format, render};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A signed submission folder (ORG with systems/, results/, MANIFEST, MANIFEST.sig).
    pub dir: PathBuf,
    /// Re-run this many results (the first K of each benchmark). A result
    /// of `run --exec` re-runs the program code the package carries, in a
    /// sandbox, and only with --allow-exec (or a `yes` typed at a terminal).
    #[arg(long, default_value_t = 0)]
    pub rerun: usize,
    /// Consent to running the package's program for --rerun (after the
    /// audit has shown its command, code and environment). Without it, and
    /// with no terminal to ask, those re-runs are not done.
    #[arg(long)]
    pub allow_exec: bool,
    /// How a package's program is confined when re-run: bubblewrap (an
    /// empty root showing read-only only the system, the program's
    /// interpreter, --data and --sandbox-ro; writable only the re-run
    /// directory; no network or host socket; a system-call filter;
    /// environment cleared; as root, run as nobody), or none (it runs with
    /// your rights, as root as nobody; the report says so). docs/trust.md.
    #[arg(long, value_enum, default_value_t = SandboxArg::Bwrap)]
    pub sandbox: SandboxArg,
    /// A further directory the sandbox shows read-only (repeatable), e.g.
    /// an environment the program uses that its recorded command does not
    /// name (the interpreter's own installation is shown without it).
    #[arg(long = "sandbox-ro", value_name = "DIR")]
    pub sandbox_ro: Vec<PathBuf>,
    /// A dataset of a `run --exec` result, in the order the run recorded
    /// them with --data (repeatable); refused when its fingerprint differs
    /// from the recorded one, unless --force.
    #[arg(long = "data", value_name = "DIR")]
    pub data: Vec<PathBuf>,
    /// Where audit.md, audit.json and the re-run logs go (default: audit-TIMESTAMP).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub signer: super::sign::SignerArgs,
    /// Verify the runs' RFC 3161 time-stamps against this CA certificate
    /// (PEM) and report the anchored interval of each (docs/tsa.md).
    #[arg(long, value_name = "FILE")]
    pub tsa_ca: Option<PathBuf>,
    #[command(flatten)]
    pub policy: super::common::PolicyArgs,
    /// Re-run even if the code or the data differ from the original's
    /// (recorded in the report).
    #[arg(long)]
    pub force: bool,
    /// The seed the re-runs train with: a number, or `recorded` (the
    /// original's; its curve must then be reproduced point by point).
    /// Default: a seed drawn now and recorded in the audit, so that a
    /// program that replays a log instead of training is caught.
    #[arg(long, value_name = "SEED|recorded", value_parser = parse_rerun_seed)]
    pub rerun_seed: Option<RerunSeed>,
    /// The organisation the signer must be: the trusted key must be
    /// allowed for it (allowed_signers principals) and the package must
    /// name it (its folder and each system's submitter). Without it, the
    /// package's organisation must be one of the key's principals.
    #[arg(long, value_name = "ORG")]
    pub principal: Option<String>,
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

/// `--rerun-seed`: a seed below 2^31 (numpy's and most frameworks'
/// range), or `recorded`.
fn parse_rerun_seed(s: &str) -> Result<RerunSeed, String> {
    if s == "recorded" {
        return Ok(RerunSeed::Recorded);
    }
    match s.parse::<u64>() {
        Ok(n) if n < 1 << 31 => Ok(RerunSeed::Auditor(n)),
        _ => Err(format!(
            "{s:?}: expected a seed below 2147483648, or `recorded`"
        )),
    }
}

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// bubblewrap (`bwrap`).
    Bwrap,
    /// No sandbox: the program runs with your user's rights.
    None,
}

pub fn run(a: AuditArgs) -> i32 {
    // SAFETY: called before any other thread of this process exists.
    unsafe { crate::session::configure_compute_threads(a.threads) };
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
        trust: match a.signer.trust() {
            Ok(t) => t,
            Err(e) => return usage_error(e),
        },
        allow_exec: a.allow_exec,
        confirm: Some(ask_at_terminal),
        sandbox: match a.sandbox {
            SandboxArg::Bwrap => crate::audit::sandbox::SandboxChoice::Bwrap,
            SandboxArg::None => crate::audit::sandbox::SandboxChoice::None,
        },
        sandbox_ro: a.sandbox_ro.clone(),
        data: a.data.clone(),
        force: a.force,
        data_dir: a
            .data_dir
            .clone()
            .unwrap_or_else(referee_datasets::default_data_dir),
        rules: a.rules.request(),
        tsa_ca: a.tsa_ca.clone(),
        policy: a.policy.mode(),
        principal: a.principal.clone(),
        rerun_seed: a
            .rerun_seed
            .unwrap_or_else(|| RerunSeed::Auditor(crate::outdir::os_seed() % (1 << 31))),
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
    eprintln!("{}", AuditReport::written_line(&out));
    if report.passed() { EXIT_OK } else { EXIT_FAIL }
}
