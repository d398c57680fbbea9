//! The run side: a start token per authority before each run (its seed
//! derived from the first), an end token after it, both written beside
//! the run record, and the run's `tsa` entry that describes them.

use super::openssl::{self, Scratch, TokenInfo};
use super::{TsaError, client, end_digest, sha256};
use serde_json::{Value, json};
use std::path::Path;

/// One authority's token, as received and checked against its request.
struct Stamp {
    url: String,
    der: Vec<u8>,
    request_nonce: String,
    info: TokenInfo,
}

impl Stamp {
    fn entry(&self, file: &str) -> Value {
        json!({
            "token": file,
            "request_nonce": self.request_nonce,
            "time": super::verify::stamp(&self.info.gen_time),
            "accuracy_ms": self.info.accuracy_ms,
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

/// A token from `url` over `digest`, checked against its request (granted,
/// same nonce, same imprint). The reply is left in `scratch` as `reply.tsr`.
fn stamp(url: &str, digest: &[u8; 32], scratch: &Scratch) -> Result<Stamp, TsaError> {
    let q = scratch.path("query.tsq");
    let request_nonce = openssl::query(digest, &q)?;
    let query = std::fs::read(&q).map_err(TsaError::io(&q))?;
    let der = client::post(url, &query)?;
    let r = scratch.path("reply.tsr");
    std::fs::write(&r, &der).map_err(TsaError::io(&r))?;
    let info = openssl::inspect(&r).map_err(|e| TsaError::Unreachable {
        url: url.to_string(),
        message: format!("not a time-stamp reply ({e})"),
    })?;
    if !info.granted() {
        return Err(TsaError::NotGranted {
            url: url.to_string(),
            status: info.status,
        });
    }
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
    if info.imprint != digest {
        return Err(wrong(
            "message imprint",
            hex::encode(digest),
            hex::encode(&info.imprint),
        ));
    }
    Ok(Stamp {
        url: url.to_string(),
        der,
        request_nonce,
        info,
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
        let mut nonce = [0u8; 32];
        {
            use std::io::Read;
            let dev = Path::new("/dev/urandom");
            std::fs::File::open(dev)
                .and_then(|mut f| f.read_exact(&mut nonce))
                .map_err(TsaError::io(dev))?;
        }
        let digest = sha256(&nonce);
        let scratch = Scratch::new()?;
        let mut stamps = Vec::new();
        let mut derived_seed = 0;
        for url in &self.urls {
            let s = stamp(url, &digest, &scratch)?;
            if stamps.is_empty() {
                derived_seed = derive_seed(&openssl::token_der(&scratch.path("reply.tsr"))?);
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
        let scratch = Scratch::new()?;
        let mut authorities = Vec::new();
        for (k, (url, start)) in self.urls.iter().zip(&started.stamps).enumerate() {
            let end = stamp(url, &digest, &scratch)?;
            let (sname, ename) = (token_name(index, "start", k), token_name(index, "end", k));
            write(dir, &ename, &end.der)?;
            authorities.push(json!({
                "url": start.url,
                "tsa": start.info.name(url),
                "start": start.entry(&sname),
                "end": end.entry(&ename),
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
