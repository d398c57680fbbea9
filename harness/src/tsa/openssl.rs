//! The `openssl ts` command-line tool, run with explicit arguments (never
//! through a shell): requests, a token's fields (`-reply -text`), the
//! token itself (`-token_out`), and verification (`-verify -CAfile`).

use super::TsaError;
use chrono::{DateTime, NaiveDateTime, Utc};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// Run `openssl ARGS`; its stdout, or why it failed.
fn openssl(args: &[&OsStr]) -> Result<Vec<u8>, TsaError> {
    let shown = || {
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let out = Command::new("openssl")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| TsaError::OpensslMissing {
            args: shown(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout
            .lines()
            .chain(stderr.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("Using configuration"))
            // `…:ts_verify_cert:…:Verify error:unable to get local issuer
            // certificate` → the reason.
            .map(|l| l.rsplit_once("Verify error:").map_or(l, |(_, why)| why))
            .collect();
        return Err(TsaError::Openssl {
            args: shown(),
            stderr: lines.join("; "),
        });
    }
    Ok(out.stdout)
}

/// A time-stamp request over `digest` (sha256), asking for the TSA's
/// certificate in the token, written to `path`; returns the request's
/// nonce as `openssl` prints it (`0x…`).
pub fn query(digest: &[u8; 32], path: &Path) -> Result<String, TsaError> {
    let hex = hex::encode(digest);
    openssl(&[
        os("ts"),
        os("-query"),
        os("-digest"),
        os(&hex),
        os("-sha256"),
        os("-cert"),
        os("-out"),
        path.as_os_str(),
    ])?;
    let text = openssl(&[
        os("ts"),
        os("-query"),
        os("-in"),
        path.as_os_str(),
        os("-text"),
    ])?;
    let text = String::from_utf8_lossy(&text);
    field(&text, "Nonce:")
        .filter(|n| n.starts_with("0x"))
        .map(str::to_string)
        .ok_or_else(|| TsaError::Text {
            path: path.to_path_buf(),
            expected: "a `Nonce: 0x…` line",
            found: text.lines().take(12).collect::<Vec<_>>().join(" / "),
        })
}

/// What a `TimeStampResp` says, as `openssl ts -reply -in F -text` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenInfo {
    /// `Granted.`, `Rejection.`, …
    pub status: String,
    /// The token's time (`genTime`).
    pub gen_time: DateTime<Utc>,
    /// Its stated accuracy (0 when unspecified).
    pub accuracy_ms: u64,
    /// `0x…`, or `None` when the token has none.
    pub nonce: Option<String>,
    /// The hashed message's algorithm and bytes.
    pub hash_algorithm: String,
    pub imprint: Vec<u8>,
    /// The TSA's name (`DirName:/CN=…`), or `unspecified`.
    pub tsa: String,
    pub serial: String,
}

impl TokenInfo {
    /// Was a token granted?
    pub fn granted(&self) -> bool {
        self.status.starts_with("Granted")
    }

    /// The authority as people read it: its name in the token, else `url`.
    pub fn name(&self, url: &str) -> String {
        let n = self.tsa.strip_prefix("DirName:").unwrap_or(&self.tsa);
        if n == "unspecified" || n.is_empty() {
            url.to_string()
        } else {
            n.to_string()
        }
    }
}

/// The value after `label` on the first line that starts with it.
fn field<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(label))
        .map(str::trim)
}

/// The bytes of the hex dump after `Message data:` (`    0000 - 05 8a …-eb …   ascii`).
fn message_data(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lines = text.lines().skip_while(|l| l.trim() != "Message data:");
    lines.next();
    for l in lines {
        let Some((offset, rest)) = l.trim_start().split_once(" - ") else {
            break;
        };
        if !offset.chars().all(|c| c.is_ascii_hexdigit()) {
            break;
        }
        // 16 bytes as "xx " with a '-' between the 8th and the 9th: 48
        // characters; the printable column follows.
        let hex: String = rest.chars().take(48).collect();
        for tok in hex.replace('-', " ").split_whitespace() {
            match u8::from_str_radix(tok, 16) {
                Ok(b) if tok.len() == 2 => out.push(b),
                _ => return out,
            }
        }
    }
    out
}

/// `Nov 26 13:42:44 2026 GMT`, `Nov  6 13:42:44.123 2026 GMT`.
fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    NaiveDateTime::parse_from_str(&s, "%b %d %H:%M:%S%.f %Y GMT")
        .ok()
        .map(|t| t.and_utc())
}

/// A hex (`0x01`) or decimal integer as `openssl` prints it.
fn parse_int(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `0x01 seconds, 0x01F4 millis, unspecified micros` → ms (rounded up).
fn parse_accuracy(s: &str) -> Option<u64> {
    if s == "unspecified" {
        return Some(0);
    }
    let mut micros = 0u64;
    for part in s.split(',') {
        let mut w = part.split_whitespace();
        let (v, unit) = (w.next()?, w.next()?);
        let v = if v == "unspecified" { 0 } else { parse_int(v)? };
        micros += match unit {
            "seconds" => v * 1_000_000,
            "millis" => v * 1_000,
            "micros" => v,
            _ => return None,
        };
    }
    Some(micros.div_ceil(1_000))
}

/// Read a `TimeStampResp` file's fields.
pub fn inspect(tsr: &Path) -> Result<TokenInfo, TsaError> {
    let out = openssl(&[
        os("ts"),
        os("-reply"),
        os("-in"),
        tsr.as_os_str(),
        os("-text"),
    ])?;
    let text = String::from_utf8_lossy(&out).into_owned();
    parse_reply(&text, tsr)
}

fn parse_reply(text: &str, tsr: &Path) -> Result<TokenInfo, TsaError> {
    let bad = |expected: &'static str, found: &str| TsaError::Text {
        path: tsr.to_path_buf(),
        expected,
        found: found.to_string(),
    };
    let status = field(text, "Status:")
        .ok_or_else(|| bad("a `Status:` line", text))?
        .to_string();
    if !status.starts_with("Granted") {
        // No token to read further; the caller reports the status.
        return Ok(TokenInfo {
            status,
            gen_time: DateTime::<Utc>::UNIX_EPOCH,
            accuracy_ms: 0,
            nonce: None,
            hash_algorithm: String::new(),
            imprint: Vec::new(),
            tsa: String::new(),
            serial: String::new(),
        });
    }
    let time = field(text, "Time stamp:").ok_or_else(|| bad("a `Time stamp:` line", text))?;
    let gen_time =
        parse_time(time).ok_or_else(|| bad("a time such as `Nov 26 13:42:44 2026 GMT`", time))?;
    let acc = field(text, "Accuracy:").unwrap_or("unspecified");
    let accuracy_ms = parse_accuracy(acc).ok_or_else(|| {
        bad(
            "an accuracy such as `0x01 seconds, unspecified millis, unspecified micros`",
            acc,
        )
    })?;
    let nonce = field(text, "Nonce:")
        .filter(|n| *n != "unspecified")
        .map(str::to_string);
    let hash_algorithm = field(text, "Hash Algorithm:").unwrap_or("").to_string();
    let imprint = message_data(text);
    if imprint.is_empty() {
        return Err(bad("a `Message data:` hex dump", text));
    }
    Ok(TokenInfo {
        status,
        gen_time,
        accuracy_ms,
        nonce,
        hash_algorithm,
        imprint,
        tsa: field(text, "TSA:").unwrap_or("unspecified").to_string(),
        serial: field(text, "Serial number:").unwrap_or("").to_string(),
    })
}

/// The `TimeStampToken` (DER `ContentInfo`) inside a `TimeStampResp` file.
pub fn token_der(tsr: &Path) -> Result<Vec<u8>, TsaError> {
    openssl(&[
        os("ts"),
        os("-reply"),
        os("-in"),
        tsr.as_os_str(),
        os("-token_out"),
    ])
}

/// Verify a token: its signature, its signer's certificate (critical
/// extendedKeyUsage timeStamping) chaining to `ca_file`, and its message
/// imprint equal to `digest`. `Err(Openssl)` carries openssl's reason.
pub fn verify(tsr: &Path, digest: &[u8], ca_file: &Path) -> Result<(), TsaError> {
    let hex = hex::encode(digest);
    openssl(&[
        os("ts"),
        os("-verify"),
        os("-in"),
        tsr.as_os_str(),
        os("-digest"),
        os(&hex),
        os("-CAfile"),
        ca_file.as_os_str(),
    ])
    .map(drop)
}

/// A scratch directory for request and reply files, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new() -> Result<Scratch, TsaError> {
        let dir = tempfile::Builder::new()
            .prefix("referee-tsa-")
            .tempdir()
            .map_err(TsaError::io(std::env::temp_dir()))?;
        Ok(Scratch(dir.keep()))
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLY: &str = "Using configuration from /usr/lib/ssl/openssl.cnf
Status info:
Status: Granted.
Status description: unspecified
Failure info: unspecified

TST info:
Version: 1
Policy OID: tsa_policy1
Hash Algorithm: sha256
Message data:
    0000 - 05 8a 93 9d 9a 89 52 9f-eb 33 a5 1d 4e 56 f5 72   ......R..3..NV.r
    0010 - 1a ed 88 92 69 33 f0 da-aa 18 d1 7d 78 82 d0 08   ....i3.....}x...
Serial number: 0x02
Time stamp: Nov  6 13:42:44.25 2026 GMT
Accuracy: 0x01 seconds, 0x01F4 millis, unspecified micros
Ordering: yes
Nonce: 0xE613E18BD8E179F3
TSA: DirName:/CN=Test TSA
Extensions:
";

    #[test]
    fn a_reply_is_read_field_by_field() {
        let t = parse_reply(REPLY, Path::new("x.tsr")).unwrap();
        assert!(t.granted());
        assert_eq!(t.gen_time.to_rfc3339(), "2026-11-06T13:42:44.250+00:00");
        assert_eq!(t.accuracy_ms, 1_500);
        assert_eq!(t.nonce.as_deref(), Some("0xE613E18BD8E179F3"));
        assert_eq!(t.hash_algorithm, "sha256");
        assert_eq!(
            hex::encode(&t.imprint),
            "058a939d9a89529feb33a51d4e56f5721aed88926933f0daaa18d17d7882d008"
        );
        assert_eq!(t.name("http://x"), "/CN=Test TSA");
        // A line cut short is an error naming what was expected, not a panic.
        let cut = REPLY.replace(
            "Time stamp: Nov  6 13:42:44.25 2026 GMT",
            "Time stamp: soon",
        );
        let e = parse_reply(&cut, Path::new("x.tsr"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.tsr") && e.contains("soon"), "{e}");
        assert_eq!(parse_accuracy("unspecified"), Some(0));
    }
}
