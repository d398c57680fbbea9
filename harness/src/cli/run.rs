//! `referee run BENCHMARK`: the flags become a [`RunRequest`], resolved
//! once by [`SessionConfig::resolve`] (crate::plan); the session runs in
//! crate::session, its progress drawn by crate::session::progress; this
//! file prints the summary.
//! `referee run --exec … -- CMD`: see [`super::run_exec`].

use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::common::division::Division;
use crate::session::collective::Collective;
use crate::session::launch::Placement;
use crate::session::plan::{Mode, RunRequest, SessionConfig};
use crate::session::{self, progress::SessionProgress};
use clap::{Args, ValueEnum};
use referee_rules::report::{Detail, Format, HumanSink, Sink, render};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

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

/// Raw flags of `referee run`: the benchmark, the flags both modes read,
/// then those of referee's own benchmarks and those of `--exec`, each set
/// under its own heading of `--help`. clap refuses the flags of one mode
/// given to the other (`conflicts_with`/`requires` on `exec`), so neither
/// mode's request drops a flag the user typed.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The benchmark (mini_resnet, mini_llm; with --exec also an official
    /// one such as llama2_70b_lora).
    #[arg(required_unless_present = "benchmark_flag")]
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
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub own: OwnArgs,
    #[command(flatten)]
    pub exec_args: ExecArgs,
}

/// The flags of both modes.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Number of runs (default: the benchmark's N).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Output directory (default: out/BENCHMARK-TIMESTAMP).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base seed; run i uses a seed derived from it (default: from the OS).
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long, value_enum, default_value_t = DivisionArg::Closed)]
    pub division: DivisionArg,
    /// Submitting organisation logged as submission_org.
    #[arg(long, default_value = "referee")]
    pub org: String,
    /// System name (submission_platform; the system description's id).
    #[arg(long)]
    pub system: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Do not try to drop the page cache.
    #[arg(long)]
    pub no_cache_clear: bool,
    /// Stop a run (aborted) after this many minutes.
    #[arg(long)]
    pub budget_minutes: Option<f64>,
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
    pub power: Option<crate::power::Source>,
    #[command(flatten)]
    pub power_opts: super::power::SourceArgs,
}

/// The flags of referee's own benchmarks: an external program reads its
/// own configuration, and `referee perf` reads its throughput.
#[derive(Debug, Args)]
#[command(next_help_heading = "Referee's own benchmarks (not with --exec)")]
pub struct OwnArgs {
    /// Hyperparameters from a YAML or JSON file (keys of the benchmark's config).
    #[arg(long, value_name = "FILE", conflicts_with = "exec")]
    pub config: Option<PathBuf>,
    /// Override one hyperparameter (repeatable), e.g. --set batch_size=256.
    #[arg(long = "set", value_name = "KEY=VALUE", conflicts_with = "exec")]
    pub sets: Vec<String>,
    /// What the runs measure (a program's own throughput under --exec:
    /// `referee perf` reads it from the logs).
    #[arg(long, value_enum, default_value_t = ModeArg::TimeToTrain, conflicts_with = "exec")]
    pub mode: ModeArg,
    /// Throughput mode: steps to run.
    #[arg(long, conflicts_with = "exec")]
    pub steps: Option<u64>,
    /// Throughput mode: steps averaged, A..B (1-based, B excluded).
    #[arg(long, value_name = "A..B", conflicts_with = "exec")]
    pub window: Option<String>,
    /// cpu or cuda:N.
    #[arg(long, default_value = "cpu", conflicts_with = "exec")]
    pub device: String,
    /// Where prepared datasets are (default: $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR", conflicts_with = "exec")]
    pub data_dir: Option<PathBuf>,
    /// Compute threads (default: all cores).
    #[arg(short = 'j', long, value_name = "N", conflicts_with = "exec")]
    pub threads: Option<usize>,
    /// Follow the whole schedule instead of stopping at the target
    /// (calibration; such logs end aborted and are not results).
    #[arg(long, conflicts_with = "exec")]
    pub keep_going: bool,
    /// Add this many milliseconds to every training step (for testing
    /// regression gates such as `referee compare`; recorded in the run record).
    #[arg(long, default_value_t = 0, value_name = "MS", conflicts_with = "exec")]
    pub step_delay_ms: u64,
}

/// The flags of `--exec`: the rules that judge the program's logs, how
/// it is supervised, and the program itself.
#[derive(Debug, Args)]
#[group(id = "exec_flags", multiple = true, requires = "exec")]
#[command(next_help_heading = "With --exec")]
pub struct ExecArgs {
    /// The official ruleset (e.g. 5.0.0) the logs are judged by.
    #[arg(long, value_name = "X.Y.Z")]
    pub ruleset: Option<String>,
    /// The official rule files' directory (default: the installed mlperf-logging).
    #[arg(long, value_name = "DIR")]
    pub rules_dir: Option<PathBuf>,
    /// Clear the page cache with this shell command instead of `sync; echo
    /// 3 > /proc/sys/vm/drop_caches` (e.g. `sudo
    /// /usr/local/sbin/drop-caches`, or an `srun` that reaches every node).
    #[arg(long, value_name = "CMD", conflicts_with = "no_cache_clear")]
    pub cache_clear_cmd: Option<String>,
    /// Allowance (ms) for clock skew and output buffering when the witness
    /// compares a line's time_ms with the harness's clock.
    #[arg(long, default_value_t = crate::exec::witness::DEFAULT_TOLERANCE_MS, value_name = "MS")]
    pub witness_tolerance_ms: u64,
    /// Seconds between SIGTERM and SIGKILL when a run is stopped.
    #[arg(long = "grace-seconds", default_value = "30", value_name = "S", value_parser = grace_seconds)]
    pub grace: Duration,
    /// A dataset directory the program reads (repeatable): its fingerprint
    /// (sha256 of every file) goes into the run record, and an audit's
    /// re-run refuses other data unless forced.
    #[arg(long = "data", value_name = "DIR")]
    pub data: Vec<PathBuf>,
    /// The training command and its arguments.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--grace-seconds S`: a finite, non-negative number of seconds.
fn grace_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    Duration::try_from_secs_f64(v).map_err(|_| "must be a finite, non-negative number".to_string())
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

    /// The session of referee's own benchmark these flags ask for.
    pub fn request(&self) -> RunRequest {
        let (c, o) = (&self.common, &self.own);
        RunRequest {
            benchmark: self.benchmark_name(),
            runs: c.runs,
            config_file: o.config.clone(),
            sets: o.sets.clone(),
            out: c.out.clone(),
            seed: c.seed,
            division: c.division.into(),
            device: o.device.clone(),
            data_dir: o.data_dir.clone(),
            org: c.org.clone(),
            system: c.system.clone(),
            no_cache_clear: c.no_cache_clear,
            keep_going: o.keep_going,
            budget_minutes: c.budget_minutes,
            mode: match o.mode {
                ModeArg::TimeToTrain => Mode::TimeToTrain,
                ModeArg::Throughput => Mode::Throughput,
            },
            steps: o.steps,
            window: o.window.clone(),
            step_delay_ms: o.step_delay_ms,
            tsa: c.tsa.clone(),
            power: c.power_request(),
        }
    }
}

impl CommonArgs {
    /// `--power SOURCE` with its interval and conversion efficiency.
    pub fn power_request(&self) -> Option<crate::power::PowerRequest> {
        self.power.clone().map(|source| crate::power::PowerRequest {
            source,
            interval: Duration::from_millis(self.power_opts.interval_ms.max(1)),
            conversion_eff: self.power_opts.conversion_eff,
        })
    }
}

/// `referee run BENCHMARK` (with `--exec`, crate::cli dispatches to
/// [`super::run_exec::run_exec`] instead).
pub fn run(a: RunArgs) -> i32 {
    let placement = match Placement::from_env(|k| std::env::var(k).ok()) {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    // Thread settings must be in place before any compute thread starts.
    // SAFETY: called before any other thread of this process exists.
    unsafe { crate::session::configure_compute_threads(a.own.threads) };
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
        show: !a.common.quiet && std::io::stderr().is_terminal(),
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
    print_summary(&summary, a.common.json)
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
