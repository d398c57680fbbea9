//! The run side: a start token per authority before each run (its seed
//! derived from the first), an end token after it, both written beside
//! the run record, and the run's `tsa` entry that describes them —
//! with what the checking side needs to bound the clock from below: how
//! long each token request took, and how far the start tokens lay before
//! `init_start` and the end requests after `run_stop`.

use super::token::{self, TokenInfo};
use super::{TsaError, client, end_digest, sha256};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

/// One authority's token, as received and checked against its request.
struct Stamp {
    url: String,
    /// The reply's DER, as the authority sent it.
    der: Vec<u8>,
    request_nonce: String,
    info: TokenInfo,
    /// Wall clock (Unix ms) when the request was sent and when the reply
    /// had come, and the round trip on the monotonic clock.
    sent_ms: i64,
    received_ms: i64,
    round_trip_ms: u64,
}

impl Stamp {
    fn entry(&self, file: &str) -> Value {
        json!({
            "token": file,
            "request_nonce": self.request_nonce,
            "time": super::verify::stamp(&self.info.gen_time),
            "accuracy_ms": self.info.accuracy_ms,
            "round_trip_ms": self.round_trip_ms,
        })
    }
}

/// A run's start: its nonce, each authority's token, the derived seed.
struct Started {
    index: usize,
    nonce: [u8; 32],
    stamps: Vec<Stamp>,
    derived_seed: u64,
}

/// The time-stamping of a session's runs (`referee run --tsa URL…`).
/// Empty (no authority) it changes nothing.
pub struct Anchors {
    urls: Vec<String>,
    seed_chosen: bool,
    started: Option<Started>,
}

/// The seed a start token gives: the first 8 bytes of sha256 of the
/// token's DER (`TimeStampToken`), big-endian, reduced to 31 bits like
/// every seed referee draws (programs often take 32-bit seeds).
pub fn derive_seed(token_der: &[u8]) -> u64 {
    let h = sha256(token_der);
    u64::from_be_bytes(h[..8].try_into().expect("8 bytes")) % (1 << 31)
}

/// The file name of run `index`'s `phase` token from authority `k`.
fn token_name(index: usize, phase: &str, k: usize) -> String {
    if k == 0 {
        format!("run_{index}.{phase}.tsr")
    } else {
        format!("run_{index}.{phase}.{k}.tsr")
    }
}

/// Random bytes from the kernel.
fn random<const N: usize>() -> Result<[u8; N], TsaError> {
    use std::io::Read;
    let mut out = [0u8; N];
    let dev = Path::new("/dev/urandom");
    std::fs::File::open(dev)
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(TsaError::io(dev))?;
    Ok(out)
}

/// The wall clock in Unix ms, the clock MLLOG's `time_ms` is on.
fn wall_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A token from `url` over `digest`, checked against its request (granted,
/// same nonce, same imprint). The request is built here, in DER, with a
/// nonce drawn here: no process is started between the two clock readings
/// around the round trip, which keep the overhead recorded small.
fn stamp(url: &str, digest: &[u8; 32]) -> Result<Stamp, TsaError> {
    let (query, request_nonce) = token::request(digest, random::<8>()?);
    let sent_ms = wall_ms();
    let t0 = Instant::now();
    let der = client::post(url, &query)?;
    let round_trip_ms = t0.elapsed().as_millis() as u64;
    let received_ms = wall_ms();
    let reply =
        token::parse(&der, &format!("the reply of {url}")).map_err(|e| TsaError::Unreachable {
            url: url.to_string(),
            message: format!("not a time-stamp reply ({e})"),
        })?;
    let status = reply.status_line();
    let Some(info) = reply.token.filter(|_| reply.status.granted()) else {
        return Err(TsaError::NotGranted {
            url: url.to_string(),
            status,
        });
    };
    let wrong = |what, expected: String, found: String| TsaError::WrongAnswer {
        url: url.to_string(),
        what,
        expected,
        found,
    };
    if info.nonce.as_deref() != Some(request_nonce.as_str()) {
        return Err(wrong(
            "nonce",
            request_nonce,
            info.nonce.unwrap_or_else(|| "none".into()),
        ));
    }
    if info.hash_algorithm != "sha256" || info.imprint != digest {
        return Err(wrong(
            "message imprint",
            format!("sha256 {}", hex::encode(digest)),
            format!("{} {}", info.hash_algorithm, hex::encode(&info.imprint)),
        ));
    }
    Ok(Stamp {
        url: url.to_string(),
        der,
        request_nonce,
        info,
        sent_ms,
        received_ms,
        round_trip_ms,
    })
}

fn write(dir: &Path, name: &str, der: &[u8]) -> Result<(), TsaError> {
    let p = dir.join(name);
    crate::fsutil::write_atomic(&p, der).map_err(TsaError::io(&p))
}

impl Anchors {
    /// The authorities at `urls`. With any, run 0's start tokens are
    /// obtained now, before anything is written: an authority that cannot
    /// be reached stops the session before it starts.
    pub fn new(urls: &[String], seed_chosen: bool) -> Result<Anchors, TsaError> {
        let mut a = Anchors {
            urls: urls.to_vec(),
            seed_chosen,
            started: None,
        };
        if !urls.is_empty() {
            a.started = Some(a.obtain_start(0)?);
        }
        Ok(a)
    }

    fn obtain_start(&self, index: usize) -> Result<Started, TsaError> {
        let nonce = random::<32>()?;
        let digest = sha256(&nonce);
        let mut stamps = Vec::new();
        let mut derived_seed = 0;
        for url in &self.urls {
            let s = stamp(url, &digest)?;
            if stamps.is_empty() {
                derived_seed = derive_seed(&s.info.token_der);
            }
            stamps.push(s);
        }
        Ok(Started {
            index,
            nonce,
            stamps,
            derived_seed,
        })
    }

    /// Before run `index`: its start tokens written into `dir`; the seed
    /// it runs with (derived from the first token unless chosen).
    pub fn start(&mut self, index: usize, dir: &Path, seed: u64) -> Result<u64, TsaError> {
        if self.urls.is_empty() {
            return Ok(seed);
        }
        let started = match self.started.take() {
            Some(s) if s.index == index => s,
            _ => self.obtain_start(index)?,
        };
        for (k, s) in started.stamps.iter().enumerate() {
            write(dir, &token_name(index, "start", k), &s.der)?;
        }
        let seed = if self.seed_chosen {
            seed
        } else {
            started.derived_seed
        };
        self.started = Some(started);
        Ok(seed)
    }

    /// After run `index`: the end tokens over its finished `result` file
    /// and `witness` (the bytes of [`super::witness_bytes`]) written into
    /// `dir`; the run's `tsa` entry (`None` without authorities).
    pub fn finish(
        &mut self,
        index: usize,
        dir: &Path,
        result: &Path,
        witness: &[u8],
    ) -> Result<Option<Value>, TsaError> {
        if self.urls.is_empty() {
            return Ok(None);
        }
        let Some(started) = self.started.take().filter(|s| s.index == index) else {
            return Ok(None);
        };
        let result_bytes = std::fs::read(result).map_err(TsaError::io(result))?;
        let (result_sha, witness_sha) = (sha256(&result_bytes), sha256(witness));
        let digest = end_digest(&result_sha, &witness_sha);
        // The run as logged: what the checking side compares with T2 − T1
        // (`None` for a log without one `init_start` and one `run_stop`).
        let span = super::verify::logged_span(result).ok();
        let mut authorities = Vec::new();
        for (k, (url, start)) in self.urls.iter().zip(&started.stamps).enumerate() {
            let end = stamp(url, &digest)?;
            let (sname, ename) = (token_name(index, "start", k), token_name(index, "end", k));
            write(dir, &ename, &end.der)?;
            let mut s = start.entry(&sname);
            let mut e = end.entry(&ename);
            s["to_init_start_ms"] = span
                .map(|(init_start, _)| (init_start - start.received_ms as f64).round() as i64)
                .into();
            e["after_run_stop_ms"] = span
                .map(|(_, run_stop)| (end.sent_ms as f64 - run_stop).round() as i64)
                .into();
            authorities.push(json!({
                "url": start.url,
                "tsa": start.info.name(url),
                "start": s,
                "end": e,
            }));
        }
        Ok(Some(json!({
            "seed": if self.seed_chosen { "chosen" } else { "derived" },
            "nonce": hex::encode(started.nonce),
            "result_sha256": hex::encode(result_sha),
            "witness_sha256": hex::encode(witness_sha),
            "authorities": authorities,
        })))
    }
}
