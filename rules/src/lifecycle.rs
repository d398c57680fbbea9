//! The MLLOG keys referee acts on of its own accord, whatever the rule
//! files say, and what each part does with them — one list: the keys whose
//! lines the harness witnesses one by one (`referee run --exec`), the keys
//! logged while the clock runs (a rule about one of them cannot be decided
//! at `init_stop`), and the keys whose values the checking engine itself
//! reads (so they are never kept slim).

/// What referee does with one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRole {
    /// Its lines are witnessed one by one (every line is checked live).
    pub witnessed: bool,
    /// Logged while the clock runs.
    pub run_phase: bool,
    /// Its value is read by the checking engine.
    pub engine_reads: bool,
}

const fn role(witnessed: bool, run_phase: bool, engine_reads: bool) -> KeyRole {
    KeyRole {
        witnessed,
        run_phase,
        engine_reads,
    }
}

/// Every key referee acts on, with its role (W: witnessed, R: run phase,
/// E: read by the engine).
pub const KEYS: [(&str, KeyRole); 19] = [
    ("init_start", role(true, false, true)),
    ("init_stop", role(true, false, false)),
    ("run_start", role(true, true, true)),
    ("run_stop", role(true, true, false)),
    ("eval_start", role(true, true, false)),
    ("eval_stop", role(true, true, false)),
    ("eval_accuracy", role(true, true, true)),
    ("cache_clear", role(true, false, false)),
    ("epoch_start", role(false, true, false)),
    ("epoch_stop", role(false, true, false)),
    ("block_start", role(false, true, false)),
    ("block_stop", role(false, true, false)),
    ("train_loss", role(false, true, false)),
    ("tracked_stats", role(false, true, false)),
    ("samples_count", role(false, true, false)),
    ("epoch_count", role(false, true, false)),
    ("first_epoch_num", role(false, true, false)),
    ("submission_benchmark", role(false, false, true)),
    ("submission_division", role(false, false, true)),
];

/// The role of `key`, when referee acts on it.
pub fn key_role(key: &str) -> Option<KeyRole> {
    KEYS.iter().find(|(k, _)| *k == key).map(|(_, r)| *r)
}

/// Are `key`'s lines witnessed one by one?
pub fn is_witnessed(key: &str) -> bool {
    key_role(key).is_some_and(|r| r.witnessed)
}

/// Is `key` logged while the clock runs?
pub fn is_run_phase(key: &str) -> bool {
    key_role(key).is_some_and(|r| r.run_phase)
}

/// Does the checking engine read `key`'s value?
pub fn engine_reads(key: &str) -> bool {
    key_role(key).is_some_and(|r| r.engine_reads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roles_are_the_three_lists_they_replace() {
        let of = |f: fn(&str) -> bool| -> Vec<&str> {
            KEYS.iter().map(|(k, _)| *k).filter(|k| f(k)).collect()
        };
        assert_eq!(
            of(is_witnessed),
            [
                "init_start",
                "init_stop",
                "run_start",
                "run_stop",
                "eval_start",
                "eval_stop",
                "eval_accuracy",
                "cache_clear"
            ]
        );
        assert_eq!(of(is_run_phase).len(), 14);
        assert_eq!(
            of(engine_reads),
            [
                "init_start",
                "run_start",
                "eval_accuracy",
                "submission_benchmark",
                "submission_division"
            ]
        );
        assert!(!is_witnessed("seed") && key_role("seed").is_none());
    }
}
