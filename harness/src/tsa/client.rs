//! POST a time-stamp request (`application/timestamp-query`) and read the
//! reply (`application/timestamp-reply`), with `ureq`.

use super::TsaError;
use std::time::Duration;

/// How long one authority may take to answer. It is also the most a
/// recorded round trip counts for when the run's duration is checked
/// (`verify::MAX_ROUND_TRIP_MS`): time a submitter could hide, so it is
/// kept short; an authority answers in well under a second.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The authority at `url`'s DER reply to the DER request `query`.
pub fn post(url: &str, query: &[u8]) -> Result<Vec<u8>, TsaError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .build()
        .into();
    let unreachable = |e: ureq::Error| TsaError::Unreachable {
        url: url.to_string(),
        message: e.to_string(),
    };
    let mut resp = agent
        .post(url)
        .header("Content-Type", "application/timestamp-query")
        .header("Accept", "application/timestamp-reply")
        .send(query)
        .map_err(unreachable)?;
    resp.body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .map_err(unreachable)
}
