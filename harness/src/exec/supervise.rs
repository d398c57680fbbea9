//! Supervising one run of an external training program (`referee run
//! --exec`): the program runs in its own process group with stdin closed;
//! its stdout and stderr are captured unmodified (the program writes them
//! to files in the run directory itself, as under a batch system, and the
//! harness follows the files as they grow); MLLOG lines are read live from
//! both streams and from the MLLOG file the program appends to
//! (`COMPLIANCE_FILE`), each line counted once; the run ends when every
//! process of the program's group has; the harness witnesses the
//! clock ([`super::witness`]), runs the ruleset's rules when `init_stop`
//! arrives (a closed-division violation stops the run at once), enforces
//! the init and run budgets (SIGTERM to the group, SIGKILL after a grace
//! period), and finalises the result file atomically: the program's whole
//! output with every MLLOG line, `result_i.txt.partial` renamed at the end.
//! The result file is parsed for the closing check as it is written: each
//! line is parsed once, when the harness writes it, by the per-line half of
//! the reader that `referee check` uses ([`mllog::LineParser`]), so the
//! check's input is the file's bytes by construction, the witness reads
//! keys and times from the same records, and a program that floods its log
//! does not wait for a second pass at the end.

use super::dedup::{Arrivals, payload};
use super::error::ExecError;
use super::follower::{CHANNEL_CHUNKS, Followed, Msg, Source, Wakeup, follow_files};
use super::process::{group_alive, signal_group, spawn};
use super::writeback::Tee;
use crate::common::harness_process::yield_to_the_program;
use crate::common::witness::{Witness, WitnessedLine};
pub use crate::outcome::RunStatus;
use referee_rules::diag::Diagnostic;
use referee_rules::mllog::{self, KeepFn, LineParser, ParsedLog};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One run of the program, as the session prepared it.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Variables added to the harness's environment.
    pub env: Vec<(String, String)>,
    /// Start with `env` only, not the harness's environment.
    pub clear_env: bool,
    /// The program's working directory.
    pub cwd: PathBuf,
    /// A fresh directory for this run: raw captures and the MLLOG file.
    pub run_dir: PathBuf,
    /// The MLLOG file the program appends to (`COMPLIANCE_FILE`).
    pub compliance_file: PathBuf,
    /// The result file (written through `PATH.partial`).
    pub result: PathBuf,
    /// MLLOG lines of the harness's own that open the result file.
    pub opening_lines: Vec<String>,
    /// `init_stop` must arrive within this time of the spawn.
    pub init_budget: Duration,
    /// The whole run must end within this time of the spawn.
    pub run_budget: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    pub tolerance_ms: u64,
    /// The unprivileged user and group the program runs as (referee runs
    /// as root and the program is not the user's own): the run directory
    /// and the MLLOG file are handed to them.
    pub run_as: Option<(u32, u32)>,
    /// Files given to the program open at these descriptor numbers.
    pub fds: Vec<(PathBuf, i32)>,
}

/// The ruleset's rules, run on the MLLOG lines read so far.
pub trait LiveRules: Sync {
    /// Errors that are final once `init_stop` has been logged (fixed
    /// hyperparameters, required keys of the initialisation). `so_far`:
    /// the result file up to and including `init_stop`, as parsed while it
    /// was written (records slim as [`LiveRules::kept_keys`] says).
    fn at_init_stop(&self, so_far: ParsedLog) -> Vec<Diagnostic>;

    /// The keys whose values the closing check reads (`None`: all): the
    /// result file is parsed with this filter as it is written.
    fn kept_keys(&self) -> Option<Arc<KeepFn>> {
        None
    }
}

/// How a supervised run ended.
#[derive(Debug)]
pub struct Supervised {
    pub status: RunStatus,
    /// Why it is aborted (the program's own status, or what the harness did).
    pub reason: Option<String>,
    /// The program's exit code, or the signal that ended it.
    pub exit: String,
    pub witness: Witness,
    /// Live findings: the init-time rule violations, the witness's.
    pub diagnostics: Vec<Diagnostic>,
    /// Claimed run_stop − run_start.
    pub time_to_train_ms: Option<f64>,
    /// Files written for this run → sha256.
    pub files: BTreeMap<String, String>,
    /// Milliseconds from reading the line that made the harness stop the
    /// program to sending SIGTERM (the live-check delay).
    pub stop_delay_ms: Option<f64>,
    /// Seconds from the spawn to the result file renamed into place.
    pub supervised_seconds: f64,
    /// The result file as the rules' reader reads it (parsed while it was
    /// written, with [`LiveRules::kept_keys`]).
    pub parsed: ParsedLog,
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The state of one supervision, from spawn to the final rename.
struct Run<'a> {
    spec: &'a ChildSpec,
    live: &'a dyn LiveRules,
    /// The program's process (and group) id.
    pid: u32,
    spawned: Instant,
    result: Tee,
    /// The result file as the rules' reader reads it, parsed as written.
    lines: LineParser,
    parsed: ParsedLog,
    /// MLLOG payloads seen, per source.
    seen: Arrivals,
    witness: Witness,
    diagnostics: Vec<Diagnostic>,
    init_stop_seen: bool,
    /// The program's run_stop status, when it logged one.
    run_stop: Option<String>,
    run_start_ms: Option<f64>,
    run_stop_ms: Option<f64>,
    /// Why the harness stopped the program, and when it sent SIGTERM.
    stopped: Option<(String, Instant)>,
    stop_delay_ms: Option<f64>,
    killed: bool,
}

impl Run<'_> {
    /// Write one line (terminated, as the file keeps it) to the result and
    /// parse it as a read of the file will: its records and problems join
    /// [`Run::parsed`]. `cr`: the line may hold a `\r` (which also ends a
    /// line for the reader); without one it is a single physical line.
    fn write_result(&mut self, bytes: &[u8], cr: bool) -> std::io::Result<()> {
        let Run {
            result,
            lines,
            parsed,
            ..
        } = self;
        let offset = result.len;
        result.write(bytes)?;
        let ended = bytes.ends_with(b"\n");
        if !ended {
            result.write(b"\n")?;
        }
        // Slim records keep where their text is in the result file.
        let at = Some(mllog::At {
            file: &result.file,
            offset,
        });
        let mut add = |item| parsed.push(item);
        if !cr && let Some(line) = bytes.strip_suffix(b"\n") {
            if let Some(item) = lines.line_in(line, at) {
                add(item);
            }
        } else if ended {
            lines.chunk_in(bytes, &mut add, at);
        } else {
            lines.chunk_in(&[bytes, b"\n"].concat(), &mut add, at);
        }
        Ok(())
    }

    /// One line read from the program (`cr`: as for [`Run::write_result`]).
    fn take(&mut self, src: Source, line: &[u8], at: Instant, cr: bool) -> std::io::Result<()> {
        let Some(p) = payload(line) else {
            // Framework output, kept as it is (the MLLOG file holds only MLLOG).
            if src != Source::File {
                self.write_result(line, cr)?;
            }
            return Ok(());
        };
        if !self.seen.is_new(p) {
            return Ok(());
        }
        let (records, problems) = (self.parsed.records.len(), self.parsed.problem_count());
        self.write_result(line, cr)?;
        self.witness.mllog_lines +=
            (self.parsed.records.len() - records + self.parsed.problem_count() - problems) as u64;
        for i in records..self.parsed.records.len() {
            self.on_record(i, at);
        }
        Ok(())
    }

    /// A new MLLOG record (`parsed.records[i]`): witness it, and act on the
    /// lifecycle keys.
    fn on_record(&mut self, i: usize, at: Instant) {
        let rec = &self.parsed.records[i];
        let (Some(key), time_ms) = (rec.key.as_deref(), rec.timestamp) else {
            return;
        };
        let mono = at.duration_since(self.spawned).as_millis() as u64;
        let read_wall_ms = self.witness.spawn_wall_ms + mono;
        let witnessed = referee_rules::lifecycle::is_witnessed(key);
        if witnessed || !self.witness.plausible(time_ms, read_wall_ms) {
            let line = WitnessedLine {
                index: rec.index as usize,
                key: key.to_string(),
                time_ms,
                read_wall_ms,
                read_mono_ms: mono,
            };
            self.diagnostics.extend(self.witness.check_line(&line));
            if witnessed {
                self.witness.lines.push(line);
            }
        }
        let status = (key == "run_stop" && self.run_stop.is_none()).then(|| {
            let v = rec.full_v();
            let status = v.get("metadata").and_then(|m| m.get("status"));
            status.and_then(|s| s.as_str()).unwrap_or("").to_string()
        });
        match key {
            "init_stop" if !self.init_stop_seen => {
                self.init_stop_seen = true;
                // The text of the records so far is in the file before the
                // rules may read it.
                if let Err(e) = self.result.sync() {
                    self.diagnostics
                        .push(Diagnostic::error("io", format!("writing the result: {e}")));
                }
                let mut so_far = self.parsed.clone();
                so_far.count_lines(self.lines.lines_read());
                let errors = self.live.at_init_stop(so_far);
                if !errors.is_empty() {
                    let why = errors
                        .iter()
                        .map(|d| d.message.clone())
                        .collect::<Vec<_>>()
                        .join("; ");
                    self.diagnostics.extend(errors);
                    self.stop(format!("the rules fail at init_stop: {why}"));
                    self.stop_delay_ms = Some(at.elapsed().as_secs_f64() * 1e3);
                }
            }
            "run_start" if self.run_start_ms.is_none() => self.run_start_ms = Some(time_ms),
            "run_stop" if self.run_stop.is_none() => {
                self.run_stop_ms = Some(time_ms);
                self.run_stop = status;
            }
            _ => {}
        }
    }

    /// SIGTERM to the program's group (once), with the reason.
    fn stop(&mut self, reason: String) {
        if self.stopped.is_some() {
            return;
        }
        signal_group(self.pid, libc::SIGTERM);
        self.stopped = Some((reason, Instant::now()));
    }

    /// Budgets and the grace period.
    fn enforce(&mut self) {
        let elapsed = self.spawned.elapsed();
        if !self.init_stop_seen && elapsed > self.spec.init_budget {
            self.stop(format!(
                "no init_stop within the init budget of {}",
                minutes(self.spec.init_budget)
            ));
        }
        if elapsed > self.spec.run_budget {
            self.stop(format!(
                "the run exceeded its budget of {}",
                minutes(self.spec.run_budget)
            ));
        }
        if let Some((_, at)) = &self.stopped
            && !self.killed
            && at.elapsed() > self.spec.grace
        {
            signal_group(self.pid, libc::SIGKILL);
            self.killed = true;
        }
    }
}

/// `2 min`, `0.05 min`: a budget as the user gave it.
fn minutes(d: Duration) -> String {
    let m = d.as_secs_f64() / 60.0;
    format!("{} min", (m * 1000.0).round() / 1000.0)
}

/// The harness's `run_stop` for a run the program did not end itself.
fn aborted_line(reason: &str) -> String {
    let meta = [
        ("status", referee_rules::value::Value::str("aborted")),
        (
            "reason",
            referee_rules::value::Value::str(reason.to_string()),
        ),
    ];
    crate::common::logger::MlLogger::render(
        "",
        &crate::common::logger::Event {
            time_ms: wall_ms(),
            event_type: crate::common::logger::INTERVAL_END,
            key: "run_stop",
            value: &referee_rules::value::Value::None,
            meta: &meta,
        },
        "referee",
        0,
    )
}

/// Run the program once under supervision; `on_spawn` is called once the
/// program has started (for work that should not delay its start).
pub fn supervise(
    spec: &ChildSpec,
    live: &dyn LiveRules,
    on_spawn: &mut dyn FnMut(),
) -> Result<Supervised, ExecError> {
    std::fs::create_dir_all(&spec.run_dir).map_err(|e| ExecError::io(&spec.run_dir, e))?;
    File::create(&spec.compliance_file).map_err(|e| ExecError::io(&spec.compliance_file, e))?;
    if let Some((uid, gid)) = spec.run_as {
        for p in [&spec.run_dir, &spec.compliance_file] {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(|e| ExecError::io(p, e))?;
        }
    }
    let partial = crate::common::logger::partial_path(&spec.result);
    let result = Tee::create(&partial)?;
    let (out, err) = (
        spec.run_dir.join("stdout.txt"),
        spec.run_dir.join("stderr.txt"),
    );
    let spawn_wall_ms = wall_ms();
    let spawned = Instant::now();
    let mut child = spawn(
        &spec.command,
        &spec.cwd,
        (&spec.env, spec.clear_env),
        &out,
        &err,
        spec.run_as,
        &spec.fds,
    )
    .inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })?;
    let pid = child.id();
    let (tx, rx) = mpsc::sync_channel(CHANNEL_CHUNKS);
    let followed = [
        (Source::Stdout, out.as_path()),
        (Source::Stderr, err.as_path()),
        (Source::File, spec.compliance_file.as_path()),
    ];
    let opened = followed
        .iter()
        .map(|&(src, p)| Followed::open(src, p))
        .collect::<Result<Vec<_>, _>>()
        .map(|files| {
            let paths: Vec<&Path> = followed.iter().map(|f| f.1).collect();
            (files, Wakeup::new(&paths))
        });
    let (files, wakeup) = match opened {
        Ok(x) => x,
        Err(e) => {
            signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let wakeup = Arc::new(wakeup);
    let follower = follow_files(files, tx.clone(), wakeup.clone());
    // The program's exit, the moment it happens.
    std::thread::spawn(move || {
        let _ = tx.send(Msg::Exited(child.wait()));
    });
    on_spawn();
    // The rule files are read once, here, while the program starts (its
    // first lines wait in the channel).
    let lines = LineParser::new(live.kept_keys());
    let mut run = Run {
        spec,
        live,
        pid,
        spawned,
        result,
        lines,
        parsed: ParsedLog::default(),
        seen: Arrivals::default(),
        witness: Witness {
            tolerance_ms: spec.tolerance_ms,
            spawn_wall_ms,
            exit_wall_ms: 0,
            exit_mono_ms: 0,
            mllog_lines: 0,
            lines: Vec::new(),
        },
        diagnostics: Vec::new(),
        init_stop_seen: false,
        run_stop: None,
        run_start_ms: None,
        run_stop_ms: None,
        stopped: None,
        stop_delay_ms: None,
        killed: false,
    };
    for l in &spec.opening_lines {
        run.take(
            Source::File,
            format!("{l}\n").as_bytes(),
            Instant::now(),
            true,
        )
        .map_err(|e| ExecError::io(&partial, e))?;
    }
    // The program inherits the priority of the thread that spawns it: the
    // supervision runs on a thread of its own that yields to the program.
    let exit = std::thread::scope(|s| {
        s.spawn(|| {
            yield_to_the_program(c"referee-superv");
            follow(&mut run, rx, &wakeup)
        })
        .join()
        .map_err(|_| ExecError::SupervisorPanicked)
    })??;
    let captures = follower
        .join()
        .map_err(|_| ExecError::ReaderPanicked {
            run_dir: spec.run_dir.clone(),
        })?
        .into_iter()
        .map(|(p, h)| (p.display().to_string(), h))
        .collect();
    finish(run, exit, &partial, captures)
}

/// Read until the program and every process of its group have ended and
/// the follower (told through `follower`) has read their output to its end.
fn follow(
    run: &mut Run,
    rx: mpsc::Receiver<Msg>,
    follower: &Wakeup,
) -> Result<std::process::ExitStatus, ExecError> {
    let label = run_label(run);
    let io = |e: std::io::Error| ExecError::WriteResult {
        result: label.clone(),
        source: e,
    };
    // The program's exit status, and when it was seen.
    let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
    let mut finishing = false;
    let mut last_poll = Instant::now();
    loop {
        // Once the program has exited, look for the rest of its group
        // often (usually there is none left).
        let wait = if exited.is_some() && !finishing {
            1
        } else {
            50
        };
        match rx.recv_timeout(Duration::from_millis(wait)) {
            Ok(Msg::Lines(src, lines, at)) => {
                // Lines without a `\r` are one physical line each: asked
                // once per chunk rather than once per line.
                let cr = memchr::memchr(b'\r', &lines).is_some();
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', &lines) {
                    run.take(src, &lines[start..=end], at, cr).map_err(io)?;
                    start = end + 1;
                }
                if start < lines.len() {
                    run.take(src, &lines[start..], at, cr).map_err(io)?;
                }
            }
            Ok(Msg::Exited(status)) => {
                let status = status.map_err(ExecError::Wait)?;
                exited = Some((status, Instant::now()));
            }
            Ok(Msg::Closed) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // Budgets and the program's group, at most every 20 ms while it
        // runs.
        if exited.is_none() && last_poll.elapsed() < Duration::from_millis(20) {
            continue;
        }
        last_poll = Instant::now();
        run.enforce();
        let Some((_, at)) = exited else { continue };
        if finishing {
            continue;
        }
        // A process the program left behind may still write its output:
        // once the grace period has passed since the program exited, end
        // its group, and read what was written up to then.
        let lingering = group_alive(run.pid);
        if lingering && at.elapsed() > run.spec.grace && !run.killed {
            signal_group(run.pid, libc::SIGKILL);
            run.killed = true;
        }
        if !lingering || (run.killed && at.elapsed() > run.spec.grace * 2) {
            finishing = true;
            follower.finish();
        }
    }
    exited
        .map(|(status, _)| status)
        .ok_or(ExecError::ExitNotSeen { result: label })
}

fn run_label(run: &Run) -> String {
    run.spec.result.display().to_string()
}

/// End the result file (the harness's `run_stop` when the program did not
/// end the run), rename it into place; the sha256 of every file written
/// (`captures`: stdout, stderr and the MLLOG file, hashed as they were read);
/// the result as parsed while it was written.
fn finish(
    mut run: Run,
    exit: std::process::ExitStatus,
    partial: &Path,
    captures: Vec<(String, String)>,
) -> Result<Supervised, ExecError> {
    use std::os::unix::process::ExitStatusExt;
    run.witness.exit_mono_ms = run.spawned.elapsed().as_millis() as u64;
    run.witness.exit_wall_ms = run.witness.spawn_wall_ms + run.witness.exit_mono_ms;
    let exit_text = match (exit.code(), exit.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    };
    let (status, reason) = match (&run.stopped, &run.run_stop) {
        (Some((why, _)), _) => (
            RunStatus::Aborted,
            Some(format!("stopped by referee: {why}")),
        ),
        (None, Some(s)) if s == "success" => (RunStatus::Success, None),
        (None, Some(s)) => (
            RunStatus::Aborted,
            Some(format!("the program logged run_stop with status {s:?}")),
        ),
        (None, None) => (
            RunStatus::Aborted,
            Some(format!("the program ended ({exit_text}) without run_stop")),
        ),
    };
    if run.run_stop.is_none() || run.stopped.is_some() {
        let line = aborted_line(reason.as_deref().unwrap_or(""));
        run.write_result(line.as_bytes(), true)
            .map_err(ExecError::CloseResult)?;
    }
    let io = |e: std::io::Error| ExecError::io(partial, e);
    let result_sha = run.result.finish().map_err(io)?;
    std::fs::rename(partial, &run.spec.result).map_err(io)?;
    let supervised_seconds = run.spawned.elapsed().as_secs_f64();
    let mut parsed = std::mem::take(&mut run.parsed);
    parsed.count_lines(run.lines.lines_read());
    let mut files: BTreeMap<String, String> = captures.into_iter().collect();
    files.insert(run.spec.result.display().to_string(), result_sha);
    run.diagnostics.extend(run.witness.check_duration());
    Ok(Supervised {
        status,
        reason,
        exit: exit_text,
        time_to_train_ms: run.run_start_ms.zip(run.run_stop_ms).map(|(a, b)| b - a),
        witness: run.witness,
        diagnostics: run.diagnostics,
        files,
        stop_delay_ms: run.stop_delay_ms,
        supervised_seconds,
        parsed,
    })
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;

    /// Live rules that keep the values of every key but `train_loss`.
    struct SlimLoss;
    impl LiveRules for SlimLoss {
        fn at_init_stop(&self, _: ParsedLog) -> Vec<Diagnostic> {
            Vec::new()
        }
        fn kept_keys(&self) -> Option<Arc<KeepFn>> {
            Some(Arc::new(|k: &str| k != "train_loss"))
        }
    }

    fn spec_in(dir: &Path, command: Vec<String>) -> ChildSpec {
        ChildSpec {
            command,
            env: Vec::new(),
            clear_env: false,
            cwd: dir.to_path_buf(),
            run_dir: dir.join("run"),
            compliance_file: dir.join("run/mllog.txt"),
            result: dir.join("result.txt"),
            opening_lines: Vec::new(),
            init_budget: Duration::from_secs(60),
            run_budget: Duration::from_secs(60),
            grace: Duration::from_secs(1),
            tolerance_ms: 2000,
            run_as: None,
            fds: Vec::new(),
        }
    }

    #[test]
    fn the_result_parsed_as_written_equals_a_read_of_the_finished_file() {
        // \r\n, lone \r before a marker and after one, a rank prefix, a
        // duplicate (dropped from the result), a broken line, a slim key,
        // no final newline.
        let log: &[u8] = b"framework says hi\r\n\
            :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \"key\": \"train_loss\", \"value\": 1.5, \"metadata\": {\"lineno\": 1}}\n\
            [rank0]: :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \"key\": \"train_loss\", \"value\": 1.5, \"metadata\": {\"lineno\": 1}}\n\
            :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \"key\": \"seed\", \"value\": 1, \"metadata\": {}}\rtail\n\
            progress 10%\rprogress 20%\r\
            0: :::MLLOG {\"namespace\": \"\", \"time_ms\": 6, \"event_type\": \"INTERVAL_END\", \"key\": \"run_stop\", \"value\": null, \"metadata\": {\"status\": \"success\"}}\n\
            :::MLLOG {\"key\": broken\n\
            :::MLLOG {\"namespace\": \"\", \"time_ms\": 7, \"event_type\": \"POINT_IN_TIME\", \"key\": \"eval_accuracy\", \"value\": 0.9, \"metadata\": {}}";
        let run = |log: &[u8]| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("log.txt"), log).unwrap();
            let spec = spec_in(dir.path(), vec!["cat".into(), "log.txt".into()]);
            let s = supervise(&spec, &SlimLoss, &mut || {}).unwrap();
            let keep = SlimLoss.kept_keys().unwrap();
            let file = std::fs::File::open(&spec.result).unwrap();
            let reader = mllog::Reader::new(std::io::BufReader::new(file)).keep_values(keep);
            let read = mllog::collect(reader).unwrap();
            assert_eq!(format!("{:?}", s.parsed), format!("{read:?}"));
            (s, read)
        };
        // Output without any `\r` takes the one-line-per-line path.
        let plain: Vec<u8> = log
            .iter()
            .map(|&b| if b == b'\r' { b' ' } else { b })
            .collect();
        let (_, read) = run(&plain);
        let keys: Vec<&str> = read.records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["train_loss", "run_stop", "eval_accuracy"]);
        assert_eq!((read.problems.len(), read.lines), (2, 6));
        let (s, read) = run(log);
        let keys: Vec<&str> = read.records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["train_loss", "seed", "run_stop", "eval_accuracy"]);
        assert_eq!(read.problems.len(), 1);
        assert!(read.records[0].slim && !read.records[2].slim);
        assert_eq!(read.lines, 9);
        // The witness read the lifecycle line from the same record.
        assert_eq!(s.status, RunStatus::Success);
        let stop = s
            .witness
            .lines
            .iter()
            .find(|l| l.key == "run_stop")
            .unwrap();
        assert_eq!((stop.index, stop.time_ms), (2, 6.0));
        assert_eq!(s.witness.mllog_lines, 5);
    }

    /// Live rules that keep what the check at init_stop was given.
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<(String, usize, bool)>>);
    impl LiveRules for Recorder {
        fn at_init_stop(&self, so_far: ParsedLog) -> Vec<Diagnostic> {
            let mut seen = self.0.lock().unwrap();
            for r in &so_far.records {
                seen.push((r.key().to_string(), r.line, r.slim));
            }
            assert_eq!(so_far.mllog_lines, so_far.records.len() + 1);
            assert_eq!(so_far.problems.len(), 1);
            Vec::new()
        }
        fn kept_keys(&self) -> Option<Arc<KeepFn>> {
            Some(Arc::new(|k: &str| k != "train_loss"))
        }
    }

    #[test]
    fn the_check_at_init_stop_gets_the_records_parsed_so_far() {
        let line = |t: u32, key: &str, ty: &str| {
            format!(
                ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {t}, \"event_type\": \"{ty}\", \"key\": \"{key}\", \"value\": null, \"metadata\": {{}}}}\n"
            )
        };
        let log = [
            "framework says hello\n".to_string(),
            line(1, "init_start", "INTERVAL_START"),
            line(2, "train_loss", "POINT_IN_TIME"),
            ":::MLLOG {broken\n".to_string(),
            format!("0: {}", line(3, "init_stop", "INTERVAL_END")),
            line(4, "run_start", "INTERVAL_START"),
        ]
        .concat();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("log.txt"), log).unwrap();
        let spec = spec_in(dir.path(), vec!["cat".into(), "log.txt".into()]);
        let live = Recorder::default();
        let mut spawned = 0;
        supervise(&spec, &live, &mut || spawned += 1).unwrap();
        assert_eq!(spawned, 1);
        // Up to and including init_stop, with the result file's line
        // numbers and the value filter of the closing check.
        assert_eq!(
            *live.0.lock().unwrap(),
            [
                ("init_start".to_string(), 2, false),
                ("train_loss".to_string(), 3, true),
                ("init_stop".to_string(), 5, false),
            ]
        );
    }

    struct NoRules;
    impl LiveRules for NoRules {
        fn at_init_stop(&self, _: ParsedLog) -> Vec<Diagnostic> {
            Vec::new()
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_program_keeps_the_harness_priority_while_the_supervision_yields() {
        let dir = tempfile::tempdir().unwrap();
        // The program prints its own nice value, then the name and nice
        // value (field 19 of stat) of each of the harness's own threads
        // (its parent's, named referee-*) while they supervise it.
        let spec = spec_in(
            dir.path(),
            vec![
                "sh".into(),
                "-c".into(),
                // (It waits up to 10 s for both threads to start.)
                "nice; i=0; while [ $i -lt 200 ]; do c=$(cat /proc/$PPID/task/*/comm); \
                 case $c in *referee-follow*) case $c in *referee-superv*) break;; esac;; esac; \
                 sleep 0.05; i=$((i+1)); done; \
                 for t in /proc/$PPID/task/*; do n=$(cat $t/comm); \
                 case $n in referee-*) echo \"$n $(cut -d' ' -f19 $t/stat)\";; esac; \
                 done; echo done"
                    .into(),
            ],
        );
        // SAFETY: getpriority of this thread.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        let out = std::fs::read_to_string(dir.path().join("run/stdout.txt")).unwrap();
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some(own.to_string().as_str()), "{out}");
        assert_eq!(out.lines().last(), Some("done"), "{out}");
        // The result keeps the output; no run_stop, so the harness's own.
        let result = std::fs::read_to_string(&spec.result).unwrap();
        assert!(result.starts_with(&out), "{result}");
        assert_eq!(s.status, RunStatus::Aborted);
        assert_eq!(s.parsed.records.len(), 1);
        assert_eq!(s.parsed.records[0].key(), "run_stop");
        // The supervision's own threads yielded: the follower that reads the
        // program's files and the supervisor that parses them ran at nice
        // 10 (or more) while the program ran at the harness's own.
        let threads: Vec<(&str, i32)> = out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, v)| (n, v.trim().parse().unwrap()))
            .collect();
        for name in ["referee-follow", "referee-superv"] {
            let seen: Vec<i32> = threads
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|t| t.1)
                .collect();
            assert!(!seen.is_empty(), "no {name} thread seen: {out}");
            assert!(
                seen.iter().all(|&v| v >= 10),
                "{name} at nice {seen:?}: {out}"
            );
        }
    }

    #[test]
    fn the_output_is_a_file_the_program_writes_itself_and_is_hashed_as_read() {
        let dir = tempfile::tempdir().unwrap();
        // `stat -L` of the program's own stdout and stderr: regular files
        // (never a pipe, which would make it wait for the harness).
        let spec = spec_in(
            dir.path(),
            vec![
                "sh".into(),
                "-c".into(),
                "stat -L -c %F /dev/stdout; stat -L -c %F /dev/stderr >&2".into(),
            ],
        );
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        let out = dir.path().join("run/stdout.txt");
        let err = dir.path().join("run/stderr.txt");
        // (empty when `stat` looks: nothing is written yet)
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "regular empty file\n"
        );
        assert_eq!(
            std::fs::read_to_string(&err).unwrap(),
            "regular empty file\n"
        );
        // The captures' and the MLLOG file's digests are of the files as
        // they stand.
        for p in [&out, &err, &spec.compliance_file] {
            assert_eq!(
                s.files.get(&p.display().to_string()),
                crate::fsutil::file_sha256(p).as_ref(),
                "{}",
                p.display()
            );
        }
        // The result keeps both streams' lines.
        let result = std::fs::read_to_string(&spec.result).unwrap();
        assert!(result.starts_with("regular"), "{result}");
        assert_eq!(result.matches("regular").count(), 2, "{result}");
    }

    #[test]
    fn output_of_a_process_the_program_left_behind_is_read_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        // The program exits at once; a process of its group writes an
        // MLLOG line 0.3 s later.
        let late = r#":::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "late", "value": null, "metadata": {}}"#;
        let spec = spec_in(
            dir.path(),
            vec![
                "sh".into(),
                "-c".into(),
                format!("(sleep 0.3; echo '{late}') & echo early"),
            ],
        );
        let t = Instant::now();
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        let out = std::fs::read_to_string(dir.path().join("run/stdout.txt")).unwrap();
        assert_eq!(out, format!("early\n{late}\n"));
        let keys: Vec<&str> = s.parsed.records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["late", "run_stop"]);
    }

    #[test]
    fn a_process_left_behind_past_the_grace_period_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("left.pid");
        let mut spec = spec_in(
            dir.path(),
            vec![
                "sh".into(),
                "-c".into(),
                format!("sleep 30 & echo $! > {}; echo left", pid_file.display()),
            ],
        );
        spec.grace = Duration::from_millis(200);
        let t = Instant::now();
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // The program itself exited normally; its group was ended.
        assert_eq!(s.exit, "exit code 0");
        let out = std::fs::read_to_string(dir.path().join("run/stdout.txt")).unwrap();
        assert_eq!(out, "left\n");
        // The process it left behind is dead (gone, or a zombie that its
        // reaper has not collected yet), not merely no longer waited for.
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = super::super::process::process_running(pid);
        if alive {
            // SAFETY: the test's own leftover `sleep`.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert!(!alive, "the process left behind (pid {pid}) still runs");
    }
}
