//! `referee run BENCHMARK`: the flags become a [`RunRequest`], resolved
//! once by [`SessionConfig::resolve`] (crate::plan); the session runs in
//! crate::session, its progress drawn by crate::session::progress; this
//! file prints the summary.
//! `referee run --exec … -- CMD`: see [`super::run_exec`].

use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::session::collective::Collective;
use crate::session::launch::Placement;
use crate::session::plan::{Division, Mode, RunRequest, SessionConfig};
use crate::session::{self, progress::SessionProgress};
use clap::{Args, ValueEnum};
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
    /// The benchmark (mini_resnet, mini_llm; with --exec also an official
    /// one such as llama2_70b_lora).
    #[arg(required_unless_present_any = ["exec", "benchmark_flag"])]
    pub benchmark: Option<String>,
    /// Run your own training program (the command after `--`) under
    /// referee's clock, rules and witness, instead of a built-in benchmark.
    #[arg(long, requires = "command")]
    pub exec: bool,
    /// The benchmark (the same as the positional BENCHMARK).
    #[arg(
        long = "benchmark",
        id = "benchmark_flag",
        value_name = "NAME",
        conflicts_with = "benchmark"
    )]
    pub benchmark_flag: Option<String>,
    /// With --exec: the official ruleset (e.g. 5.0.0) the logs are judged by.
    #[arg(long, value_name = "X.Y.Z")]
    pub ruleset: Option<String>,
    /// With --exec: the official rule files' directory (default: the installed mlperf-logging).
    #[arg(long, value_name = "DIR")]
    pub rules_dir: Option<PathBuf>,
    /// With --exec: clear the page cache with this shell command instead
    /// of `sync; echo 3 > /proc/sys/vm/drop_caches` (e.g. `sudo
    /// /usr/local/sbin/drop-caches`, or an `srun` that reaches every node).
    #[arg(long, value_name = "CMD")]
    pub cache_clear_cmd: Option<String>,
    /// With --exec: allowance (ms) for clock skew and output buffering
    /// when the witness compares a line's time_ms with the harness's clock.
    #[arg(long, default_value_t = crate::exec::witness::DEFAULT_TOLERANCE_MS, value_name = "MS")]
    pub witness_tolerance_ms: u64,
    /// With --exec: seconds between SIGTERM and SIGKILL when a run is stopped.
    #[arg(long, default_value_t = 30.0, value_name = "S")]
    pub grace_seconds: f64,
    /// With --exec: a dataset directory the program reads (repeatable):
    /// its fingerprint (sha256 of every file) goes into the run record, and
    /// an audit's re-run refuses other data unless forced.
    #[arg(long = "data", value_name = "DIR", requires = "exec")]
    pub data: Vec<PathBuf>,
    /// With --exec: the training command and its arguments.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
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
    /// An RFC 3161 time-stamping authority (repeatable): a token before
    /// each run (its seed derived from it unless --seed) and one after it,
    /// over the result file and the witness, kept beside the run record
    /// (docs/tsa.md). An authority that cannot be reached stops the session.
    #[arg(long = "tsa", value_name = "URL")]
    pub tsa: Vec<String>,
    /// Measure this node's power during each run: nvml, rapl, ipmi,
    /// redfish:URL or cmd:COMMAND; the power log is written to
    /// power/result_i/node_N.txt from before run_start to after run_stop.
    #[arg(long, value_name = "SOURCE")]
    pub power: Option<String>,
    #[command(flatten)]
    pub power_opts: super::power::SourceArgs,
    /// Add this many milliseconds to every training step (for testing
    /// regression gates such as `referee compare`; recorded in the run record).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub step_delay_ms: u64,
}

impl From<DivisionArg> for Division {
    fn from(d: DivisionArg) -> Division {
        match d {
            DivisionArg::Closed => Division::Closed,
            DivisionArg::Open => Division::Open,
        }
    }
}

impl RunArgs {
    pub(super) fn benchmark_name(&self) -> String {
        self.benchmark
            .clone()
            .or_else(|| self.benchmark_flag.clone())
            .unwrap_or_default()
    }

    pub(super) fn division(&self) -> Division {
        self.division.into()
    }

    /// The session these flags ask for (`--power` validated by
    /// [`RunArgs::power_request`] first).
    pub fn request(&self) -> RunRequest {
        RunRequest {
            benchmark: self.benchmark_name(),
            runs: self.runs,
            config_file: self.config.clone(),
            sets: self.sets.clone(),
            out: self.out.clone(),
            seed: self.seed,
            division: self.division(),
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
            tsa: self.tsa.clone(),
            power: self.power_request().ok().flatten(),
        }
    }

    /// `--power SOURCE` with its interval and conversion efficiency.
    pub fn power_request(&self) -> Result<Option<crate::power::PowerRequest>, String> {
        match &self.power {
            Some(src) => Ok(Some(crate::power::PowerRequest {
                source: src
                    .parse()
                    .map_err(|e: crate::power::PowerError| e.to_string())?,
                interval: std::time::Duration::from_millis(self.power_opts.interval_ms.max(1)),
                conversion_eff: self.power_opts.conversion_eff,
            })),
            None => Ok(None),
        }
    }
}

/// `referee run BENCHMARK` (with `--exec`, crate::cli dispatches to
/// [`super::run_exec::run_exec`] instead).
pub fn run(a: RunArgs) -> i32 {
    if !a.command.is_empty() {
        return usage_error("a command after `--` runs only with --exec");
    }
    if let Err(e) = a.power_request() {
        return usage_error(e);
    }
    let placement = match Placement::from_env(|k| std::env::var(k).ok()) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    // Thread settings must be in place before any compute thread starts.
    // SAFETY: called before any other thread of this process exists.
    unsafe { crate::session::configure_compute_threads(a.threads) };
    let cfg = match SessionConfig::resolve(&a.request(), placement) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let mut coll: Box<dyn Collective> = match crate::session::collective::for_device(
        &placement,
        cfg.gpu.as_ref().map(|g| g.ordinal),
    ) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let progress = SessionProgress {
        show: !a.quiet && std::io::stderr().is_terminal(),
        leader: coll.rank() == 0,
        benchmark: cfg.plan.bench.spec().name,
        target: session::target_text(&cfg),
    };
    let results = match session::execute(&cfg, coll.as_mut(), &progress) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
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
        super::error_line(e);
    }
    let format = if json { Format::Json } else { Format::Human };
    let mut out = std::io::stdout().lock();
    if render(summary, format, Detail::default(), &mut out).is_err() {
        return EXIT_USAGE;
    }
    if summary.passed { EXIT_OK } else { EXIT_FAIL }
}
