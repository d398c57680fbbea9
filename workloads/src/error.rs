//! The crate's error types: [`Error`] for models and training (what
//! [`crate::Result`] carries), and the typed errors of configurations,
//! devices, kernel sets and training data.

/// A model or training error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Raised by this crate: the message says what was wrong.
    #[error("{0}")]
    Msg(String),
    /// The graph engine was asked for, and this build has none.
    #[error(
        "this referee was built without the graph engine (candle's autograd); rebuild with `cargo build --release -p referee-harness --features graph`"
    )]
    NoGraph,
    /// Raised by candle (the graph engine).
    #[cfg(feature = "graph")]
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

/// A benchmark configuration is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key's value does not fit the hyperparameters (`key`: the first
    /// key whose value alone, on the defaults, fails).
    #[error("`{key}`: {source}")]
    Key {
        key: String,
        source: serde_json::Error,
    },
    /// The configuration does not fit, and no single key is to blame.
    #[error(transparent)]
    Invalid(serde_json::Error),
    #[error("batch_size must be positive")]
    ZeroBatchSize,
    #[error("warmup_steps exceeds total_steps")]
    WarmupExceedsTotal,
    #[error("vocab_size must be {expected} (the prepared tokenizer)")]
    VocabSize { expected: usize },
}

/// Training or evaluation data cannot be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum DataStreamError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Data(#[from] referee_datasets::DataError),
}

/// A device string is not `cpu`, `cuda` or `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad device {given:?}: expected \"cpu\", \"cuda\" or \"cuda:N\"")]
pub struct DeviceError {
    /// The string given (trimmed).
    pub given: String,
}

/// `REFEREE_CPU_KERNELS` names no kernel set this CPU runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    #[error("REFEREE_CPU_KERNELS={given}: expected one of avx512, avx2, portable")]
    Unknown { given: String },
    #[error(
        "REFEREE_CPU_KERNELS={given}: this CPU cannot run the {given} kernels (detected: {detected})"
    )]
    Unavailable {
        given: String,
        detected: &'static str,
    },
}
