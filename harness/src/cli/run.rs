//! `referee run BENCHMARK`: the flags become a [`RunRequest`], resolved
//! once by [`SessionConfig::resolve`] (crate::plan); the session runs in
//! crate::session; this file draws progress and prints the summary.

use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::collective::Collective;
use crate::launch::Placement;
use crate::plan::{Division, Mode, RunRequest, SessionConfig};
use crate::run::{Observer, RunResult};
use crate::session::{self, SessionObserver};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use referee_rules::report::{Detail, Format, HumanSink, Sink, render};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DivisionArg {
    Closed,
    Open,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Train to the quality target (MLPerf timing rules).
    TimeToTrain,
    /// A fixed number of steps; step time and throughput over a window.
    Throughput,
}

/// Raw flags of `referee run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The benchmark (mini_resnet, mini_llm).
    pub benchmark: String,
    /// Number of runs (default: the benchmark's N).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Hyperparameters from a YAML or JSON file (keys of the benchmark's config).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override one hyperparameter (repeatable), e.g. --set batch_size=256.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Output directory (default: out/BENCHMARK-TIMESTAMP).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base seed; run i uses a seed derived from it (default: from the OS).
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long, value_enum, default_value_t = DivisionArg::Closed)]
    pub division: DivisionArg,
    /// cpu or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Where prepared datasets are (default: $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Submitting organisation logged as submission_org.
    #[arg(long, default_value = "referee")]
    pub org: String,
    /// System name (submission_platform; the system description's id).
    #[arg(long)]
    pub system: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Compute threads (default: all cores).
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Do not try to drop the page cache.
    #[arg(long)]
    pub no_cache_clear: bool,
    /// Follow the whole schedule instead of stopping at the target
    /// (calibration; such logs end aborted and are not results).
    #[arg(long)]
    pub keep_going: bool,
    /// Stop a run (aborted) after this many minutes.
    #[arg(long)]
    pub budget_minutes: Option<f64>,
    #[arg(long, value_enum, default_value_t = ModeArg::TimeToTrain)]
    pub mode: ModeArg,
    /// Throughput mode: steps to run.
    #[arg(long)]
    pub steps: Option<u64>,
    /// Throughput mode: steps averaged, A..B (1-based, B excluded).
    #[arg(long, value_name = "A..B")]
    pub window: Option<String>,
    /// Print the run summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Add this many milliseconds to every training step (for testing
    /// regression gates such as `referee compare`; recorded in the run record).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub step_delay_ms: u64,
}

impl RunArgs {
    /// The session these flags ask for.
    pub fn request(&self) -> RunRequest {
        RunRequest {
            benchmark: self.benchmark.clone(),
            runs: self.runs,
            config_file: self.config.clone(),
            sets: self.sets.clone(),
            out: self.out.clone(),
            seed: self.seed,
            division: match self.division {
                DivisionArg::Closed => Division::Closed,
                DivisionArg::Open => Division::Open,
            },
            device: self.device.clone(),
            data_dir: self.data_dir.clone(),
            org: self.org.clone(),
            system: self.system.clone(),
            no_cache_clear: self.no_cache_clear,
            keep_going: self.keep_going,
            budget_minutes: self.budget_minutes,
            mode: match self.mode {
                ModeArg::TimeToTrain => Mode::TimeToTrain,
                ModeArg::Throughput => Mode::Throughput,
            },
            steps: self.steps,
            window: self.window.clone(),
            step_delay_ms: self.step_delay_ms,
        }
    }
}

/// Progress bars on stderr: one per run, on the leading rank of a
/// terminal session; each run's outcome line when it ends.
struct ProgressBars {
    show: bool,
    leader: bool,
    benchmark: &'static str,
    target: String,
}

impl SessionObserver for ProgressBars {
    fn run_starting(&self, index: usize, runs: usize, max_samples: u64) -> Box<dyn Observer> {
        let pb = if self.show && self.leader {
            let pb = ProgressBar::new(max_samples);
            pb.set_style(
                ProgressStyle::with_template(&format!(
                    "run {}/{} {} {{bar:25}} {{pos}}/{{len}} samples · {{msg}} · {{elapsed}} (ETA {{eta}})",
                    index + 1,
                    runs,
                    self.benchmark
                ))
                .expect("template"),
            );
            pb
        } else {
            ProgressBar::hidden()
        };
        Box::new(RunProgress {
            pb,
            target: self.target.clone(),
            last: std::sync::Mutex::new(None),
        })
    }

    fn run_finished(&self, observer: Box<dyn Observer>, _: &RunResult, summary: &str) {
        drop(observer);
        if self.leader {
            eprintln!("{summary}");
        }
    }
}

/// The progress bar of one run.
struct RunProgress {
    pb: ProgressBar,
    target: String,
    last: std::sync::Mutex<Option<f64>>,
}

impl Drop for RunProgress {
    fn drop(&mut self) {
        self.pb.finish_and_clear();
    }
}

impl Observer for RunProgress {
    fn phase(&self, what: &str) {
        self.pb.set_message(what.to_string());
    }
    fn step(&self, samples: u64, max: u64, loss: f32, sps: f64) {
        if self.pb.length() != Some(max) {
            self.pb.set_length(max);
        }
        self.pb.set_position(samples);
        let last = self
            .last
            .lock()
            .expect("lock")
            .map(|m| format!("{m:.4}"))
            .unwrap_or_else(|| "-".into());
        self.pb.set_message(format!(
            "loss {loss:.3} · eval {last} (target {}) · {sps:.0} samples/s",
            self.target
        ));
    }
    fn eval(&self, _samples: u64, metric: f64) {
        *self.last.lock().expect("lock") = Some(metric);
    }
}

pub fn run(a: RunArgs) -> i32 {
    let placement = match Placement::from_env(|k| std::env::var(k).ok()) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    // Thread settings must be in place before any compute thread starts.
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // SAFETY: called before any other thread of this process exists.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
    let cfg = match SessionConfig::resolve(&a.request(), placement) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let mut coll: Box<dyn Collective> =
        match crate::collective::for_device(&placement, cfg.gpu.as_ref().map(|g| g.ordinal)) {
            Ok(c) => c,
            Err(e) => return usage_error(e),
        };
    let progress = ProgressBars {
        show: !a.quiet && std::io::stderr().is_terminal(),
        leader: coll.rank() == 0,
        benchmark: cfg.plan.bench.spec().name,
        target: session::target_text(&cfg),
    };
    let results = match session::execute(&cfg, coll.as_mut(), &progress) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("referee: error: {e}");
            return EXIT_USAGE;
        }
    };
    if coll.rank() != 0 {
        return EXIT_OK;
    }
    let summary = session::closing_check(&cfg, results);
    print_summary(&summary, a.json)
}

/// Failed logs' diagnostics on stderr (text form only), then the summary.
fn print_summary(summary: &session::RunSummary, json: bool) -> i32 {
    if !json {
        let mut err = std::io::stderr().lock();
        let mut sink = HumanSink::new(&mut err, true);
        for rep in &summary.failed_logs {
            let _ = sink.log(rep);
        }
    }
    for e in &summary.errors {
        eprintln!("referee: error: {e}");
    }
    let format = if json { Format::Json } else { Format::Human };
    let mut out = std::io::stdout().lock();
    if render(summary, format, Detail::default(), &mut out).is_err() {
        return EXIT_USAGE;
    }
    if summary.passed { EXIT_OK } else { EXIT_FAIL }
}
