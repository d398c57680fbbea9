//! The progress of a session of referee's own benchmarks on stderr: one
//! bar per run (samples, loss, last evaluation against the target, rate),
//! drawn by the leading rank of a terminal session, and each run's outcome
//! line when it ends. It owns only drawing; it must not know how the
//! session runs (it is told through [`SessionObserver`] and [`Observer`])
//! nor how a command parses its flags.

use super::SessionObserver;
use super::run::{Observer, RunResult};
use indicatif::{ProgressBar, ProgressStyle};

/// Progress bars on stderr: one per run, on the leading rank of a
/// terminal session; each run's outcome line when it ends.
pub struct SessionProgress {
    /// Draw the bars (a terminal, and not `--quiet`).
    pub show: bool,
    /// This rank leads (rank 0): only it draws and prints.
    pub leader: bool,
    pub benchmark: &'static str,
    /// The quality target as the bar shows it.
    pub target: String,
}

impl SessionObserver for SessionProgress {
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
            leader: self.leader,
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
    /// This rank leads: its warnings are printed (with `--quiet` too).
    leader: bool,
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
    fn warn(&self, what: &str) {
        if !self.leader {
            return;
        }
        if self.pb.is_hidden() {
            eprintln!("warning: {what}");
        } else {
            self.pb.println(format!("warning: {what}"));
        }
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
