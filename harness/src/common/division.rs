//! The MLPerf division of a run: closed (fixed hyperparameters keep their
//! reference values) or open. Both ways of running training are asked
//! for one, and packaging and the audit read it back.

/// The MLPerf division of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Division {
    /// Fixed hyperparameters must keep their reference values.
    Closed,
    Open,
}

impl Division {
    pub fn as_str(self) -> &'static str {
        match self {
            Division::Closed => "closed",
            Division::Open => "open",
        }
    }
}
