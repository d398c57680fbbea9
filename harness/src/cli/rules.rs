//! `referee rules export|show`: referee's own rule files, generated from the
//! benchmark declarations, for use with the official checker's `--config`.

use super::{EXIT_FAIL, EXIT_OK, usage_error};
use clap::{Args, Subcommand};
use referee_workloads::{bench, rulegen};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    pub command: RulesCommand,
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Write every referee rule file (BENCHMARK.yaml) into DIR.
    Export {
        /// Target directory (default: workloads/rules).
        #[arg(long, default_value = "workloads/rules")]
        dir: PathBuf,
        /// Only report whether DIR is up to date (exit 1 if not).
        #[arg(long)]
        check: bool,
    },
    /// Print one benchmark's rule file.
    Show { benchmark: String },
}

pub fn run(a: RulesArgs) -> i32 {
    match a.command {
        RulesCommand::Show { benchmark } => match bench::find(&benchmark) {
            Some(b) => {
                print!("{}", rulegen::rule_file(b));
                EXIT_OK
            }
            None => usage_error(format!("unknown benchmark `{benchmark}`")),
        },
        RulesCommand::Export { dir, check } => {
            let mut stale = Vec::new();
            for b in bench::registry() {
                let p = dir.join(format!("{}.yaml", b.spec().name));
                let text = rulegen::rule_file(b);
                if check {
                    if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
                        stale.push(p.display().to_string());
                    }
                    continue;
                }
                if let Err(e) = std::fs::create_dir_all(&dir)
                    .and_then(|_| crate::fsutil::write_atomic(&p, text.as_bytes()))
                {
                    return usage_error(format!("{}: {e}", p.display()));
                }
                println!("wrote {}", p.display());
            }
            if stale.is_empty() {
                EXIT_OK
            } else {
                eprintln!(
                    "out of date: {} (run `referee rules export`)",
                    stale.join(", ")
                );
                EXIT_FAIL
            }
        }
    }
}
