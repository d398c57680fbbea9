//! `referee system`: flags → a [`SystemRequest`] (crate::system) → the
//! description written (`--out`) and its report printed.

use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::system::{SystemRequest, describe};
use clap::Args;
use referee_rules::report::{Detail, Format, render};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SystemArgs {
    /// Write the system JSON (the 33 fields) to FILE, e.g. systems/NAME.json.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Set a field (repeatable), e.g. --set status="Available on-premise".
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub sets: Vec<String>,
    /// Start from an existing description: its values override what is discovered.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// The ruleset whose system-description rules judge the result
    /// (default: referee's own).
    #[arg(long, value_name = "X.Y.Z")]
    pub ruleset: Option<String>,
    /// The report as JSON (the description, each field's source, the check).
    #[arg(long, group = "format")]
    pub json: bool,
    /// The report as Markdown.
    #[arg(long, group = "format")]
    pub markdown: bool,
    /// Instead of the description: probe NCCL over this node's GPUs (one
    /// communicator over all of them, a checked all-reduce, then the median
    /// time and bandwidth of all-reduces of --nccl-mib MiB per GPU).
    #[arg(long)]
    pub nccl: bool,
    /// With --nccl: MiB per GPU of the timed all-reduces.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    pub nccl_mib: u64,
}

pub fn run(a: SystemArgs) -> i32 {
    let format = Format::from_flags(a.json, a.markdown);
    if a.nccl {
        let probe = match crate::session::nccl_probe::probe(a.nccl_mib << 20, 20) {
            Ok(p) => p,
            Err(e) => return usage_error(e),
        };
        if render(
            &probe,
            format,
            Detail::default(),
            &mut std::io::stdout().lock(),
        )
        .is_err()
        {
            return EXIT_USAGE;
        }
        return if probe.sum_correct {
            EXIT_OK
        } else {
            EXIT_FAIL
        };
    }
    let req = SystemRequest {
        from: a.from.clone(),
        sets: a.sets.clone(),
        ruleset: a
            .ruleset
            .clone()
            .unwrap_or_else(|| referee_workloads::bench::RULESET.to_string()),
        sys_root: PathBuf::from("/sys"),
    };
    let report = match describe(&req) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    if let Some(p) = &a.out {
        let text = serde_json::to_string_pretty(&report.system).expect("json") + "\n";
        if let Err(e) = crate::fsutil::write_atomic(p, text.as_bytes()) {
            return usage_error(format!("{}: {e}", p.display()));
        }
        eprintln!("referee: wrote {}", p.display());
    }
    if render(
        &report,
        format,
        Detail::default(),
        &mut std::io::stdout().lock(),
    )
    .is_err()
    {
        return EXIT_USAGE;
    }
    if report.passed() { EXIT_OK } else { EXIT_FAIL }
}
