//! How runs and their logs end, shared by the two ways referee runs
//! training (`session`: its own benchmarks; `exec`: a submitter's program)
//! and by the audit that re-runs them: the run's status (`run_stop`'s
//! `success`/`aborted`) and the verdict on its log (`PASS`/`FAIL`/`ERROR`).
//! Each serialises to the strings the JSON reports have always carried.
//! Must not know how a run is driven or a log is checked.

use serde::Serialize;

/// How a run ended: `success` (the program logged run_stop with status
/// success), otherwise `aborted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Success,
    Aborted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Aborted => "aborted",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one log (serialised as `PASS`, `FAIL`, `ERROR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum LogVerdict {
    Pass,
    Fail,
    /// The log could not be checked.
    Error,
}

impl std::fmt::Display for LogVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogVerdict::Pass => "PASS",
            LogVerdict::Fail => "FAIL",
            LogVerdict::Error => "ERROR",
        })
    }
}
