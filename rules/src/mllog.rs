//! Streaming MLLOG reader.
//!
//! Tolerant exactly as the official parser is (and no more):
//! * bytes are Latin-1 characters, so decoding never fails;
//! * lines end at `\n`, `\r\n` or a lone `\r` (Python's universal newlines);
//! * a line counts only if it contains the marker `:::MLLOG ` (with the
//!   space) anywhere; the text before the **last** marker is dropped, so
//!   `[rank0]: :::MLLOG {...}` is accepted;
//! * the rest is stripped of Python whitespace and decoded as JSON with
//!   Python's `json.loads` rules (see [`crate::json`]);
//! * `time_ms` may be a number, a boolean or a numeric string (`"7"`).
//!
//! Each kept line gets two numbers: its 0-based index among MLLOG lines (what
//! the official tool prints as "line N") and its 1-based line in the file
//! (what referee prints). Where the official tool would crash (a member
//! missing, a top-level value that is not an object, `time_ms` null), referee
//! reports a [`LineProblem`] marked `official_crash` and carries on.

use crate::json;
use crate::value::{Dict, Value};
use memchr::memmem;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::LazyLock;

pub const MARKER: &[u8] = b":::MLLOG ";

/// Where the last [`MARKER`] in `line` starts (the official parser reads a
/// line from its last marker). A reverse SIMD scan for the marker's `M`
/// (rare in JSON text), each hit checked in place.
pub fn rfind_marker(line: &[u8]) -> Option<usize> {
    const BEFORE: usize = 3; // ":::" before the `M`
    memchr::memrchr_iter(b'M', line)
        .filter(|&m| m >= BEFORE)
        .map(|m| m - BEFORE)
        .find(|&start| line[start..].starts_with(MARKER))
}

/// One parsed MLLOG event.
#[derive(Clone, Debug)]
pub struct Record {
    /// 0-based index among the file's MLLOG lines (the official "line N");
    /// -1 for records synthesised by rules.
    pub index: i64,
    /// 1-based line number in the file.
    pub line: usize,
    /// `float(time_ms)`.
    pub timestamp: f64,
    /// The `key` member when it is a string. Records whose key is not a string
    /// are kept (they count as MLLOG lines) but no rule can match them.
    pub key: Option<String>,
    /// `{"value": <value>, "metadata": <metadata>}`, the object rules call `v`.
    pub v: Value,
    /// The stripped line from the marker on (the official `full_string`).
    pub text: String,
    /// The value was not kept (no rule looks at this key); [`Record::inflate`]
    /// restores it from `text`.
    pub slim: bool,
}

impl Record {
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or("")
    }
    /// The `value` member.
    pub fn value(&self) -> &Value {
        self.v.get("value").unwrap_or(&Value::None)
    }
    /// The `metadata` member (any JSON value; usually an object).
    pub fn metadata(&self) -> &Value {
        self.v.get("metadata").unwrap_or(&Value::None)
    }
    /// `metadata[name]` when metadata is an object holding `name`.
    pub fn meta(&self, name: &str) -> Option<&Value> {
        self.metadata().get(name)
    }

    /// Restore the value of a slim record by decoding its text again.
    pub fn inflate(&mut self) {
        if !self.slim {
            return;
        }
        self.v = self.full_v().into_owned();
        self.slim = false;
    }

    /// `v`, decoding the line again when the record was read slim.
    pub fn full_v(&self) -> std::borrow::Cow<'_, Value> {
        if !self.slim {
            return std::borrow::Cow::Borrowed(&self.v);
        }
        // `text` holds Latin-1 characters: turn them back into bytes.
        let bytes: Vec<u8> = self.text.chars().map(|c| c as u32 as u8).collect();
        match parse_marked(&bytes, self.index, self.line, None) {
            Item::Record(full) => std::borrow::Cow::Owned(full.v),
            Item::Problem(_) => std::borrow::Cow::Borrowed(&self.v),
        }
    }
}

/// Decides which keys keep their values (see [`Reader::keep_values`]).
pub type KeepFn = dyn Fn(&str) -> bool + Send + Sync;

/// A line that carries the marker but could not become a record.
#[derive(Clone, Debug, PartialEq)]
pub struct LineProblem {
    pub index: i64,
    pub line: usize,
    pub text: String,
    pub message: String,
    /// The official tool does not survive this line (it raises an uncaught
    /// exception and prints a traceback) instead of reporting a parse error.
    pub official_crash: bool,
}

/// Either a record or a problem, in file order.
#[derive(Clone, Debug)]
pub enum Item {
    Record(Record),
    Problem(LineProblem),
}

/// The key and time of one MLLOG line, read without building its value:
/// what a supervisor needs of every line of a live stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Head<'a> {
    pub key: std::borrow::Cow<'a, str>,
    pub time_ms: f64,
}

/// The [`Head`] of a line from its marker (`:::MLLOG {…}`), as the full
/// reader would read that line's record (the same `key`, and `time_ms` as a
/// number, last member wins); `None` when the line is not a record.
///
/// Lines in the official logger's own layout (`{"namespace": "…",
/// "time_ms": N, "event_type": "…", "key": "…", …}` with no second
/// `time_ms` or `key` member) are read from their first bytes; any other
/// line goes through the full reader.
pub fn head(from_marker: &[u8]) -> Option<Head<'_>> {
    let json = from_marker.strip_prefix(MARKER)?;
    if let Some((key, time_ms)) = head_in_logger_layout(json) {
        return Some(Head {
            key: std::borrow::Cow::Borrowed(key),
            time_ms,
        });
    }
    match Reader::new(from_marker).next() {
        Some(Item::Record(rec)) => Some(Head {
            key: std::borrow::Cow::Owned(rec.key?),
            time_ms: rec.timestamp,
        }),
        _ => None,
    }
}

/// `(key, time_ms)` of a line in the official logger's layout; `None` for
/// anything else (the caller then reads the line in full).
fn head_in_logger_layout(json: &[u8]) -> Option<(&str, f64)> {
    /// A plain string's body (no escapes, ASCII) up to its closing quote.
    fn plain_string(s: &[u8]) -> Option<(&[u8], &[u8])> {
        let q = memchr::memchr(b'"', s)?;
        let body = &s[..q];
        (body.is_ascii() && !body.contains(&b'\\')).then_some((body, &s[q + 1..]))
    }
    let rest = json.strip_prefix(b"{\"namespace\": \"")?;
    let (_, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(b", \"time_ms\": ")?;
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    // At most 15 digits: exact in an f64, as Python's int → float is.
    if digits == 0 || digits > 15 || (digits > 1 && rest[0] == b'0') {
        return None;
    }
    let time_ms = std::str::from_utf8(&rest[..digits])
        .ok()?
        .parse::<u64>()
        .ok()? as f64;
    let rest = rest[digits..].strip_prefix(b", \"event_type\": \"")?;
    let (_, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(b", \"key\": \"")?;
    let (key, rest) = plain_string(rest)?;
    // A later top-level `time_ms` or `key` member would win: read in full.
    static TIME_MS: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"time_ms\""));
    static KEY: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"key\""));
    if !rest.starts_with(b", ") || TIME_MS.find(rest).is_some() || KEY.find(rest).is_some() {
        return None;
    }
    Some((std::str::from_utf8(key).ok()?, time_ms))
}

/// Iterator over the MLLOG items of a byte stream.
pub struct Reader<R> {
    input: R,
    buf: Vec<u8>,
    /// Pending segments of the current chunk (split at lone `\r`).
    seg_start: usize,
    chunk_len: usize,
    have_chunk: bool,
    line_no: usize,
    index: i64,
    /// The last key asked of `keep`, and its answer (logs repeat keys).
    last_keep: std::cell::RefCell<Option<(String, bool)>>,
    io_error: Option<std::io::Error>,
    keep: Option<std::sync::Arc<KeepFn>>,
}

impl<R: BufRead> Reader<R> {
    pub fn new(input: R) -> Self {
        Reader {
            input,
            buf: Vec::with_capacity(1024),
            seg_start: 0,
            chunk_len: 0,
            have_chunk: false,
            line_no: 0,
            index: 0,
            last_keep: std::cell::RefCell::new(None),
            io_error: None,
            keep: None,
        }
    }

    /// Keep values only for keys `keep` accepts; other records are still
    /// validated and counted but stored slim (see [`Record::inflate`]). This
    /// bounds memory on huge logs full of keys no rule reads.
    pub fn keep_values(mut self, keep: std::sync::Arc<KeepFn>) -> Self {
        self.keep = Some(keep);
        self
    }

    /// An I/O error that ended iteration early, if any.
    pub fn take_io_error(&mut self) -> Option<std::io::Error> {
        self.io_error.take()
    }

    /// Number of physical lines seen so far.
    pub fn lines_read(&self) -> usize {
        self.line_no
    }

    /// Next physical line (without its terminator) as a byte range of `buf`.
    fn next_line(&mut self) -> Option<(usize, usize)> {
        loop {
            if self.have_chunk && self.seg_start < self.chunk_len {
                let rest = &self.buf[self.seg_start..self.chunk_len];
                // A chunk ends with '\n' (or EOF); lone '\r' also ends a line.
                let (end, next) = match memchr::memchr(b'\r', rest) {
                    Some(i) if i + 1 == rest.len() => (i, rest.len()),
                    Some(i) if rest[i + 1] == b'\n' => (i, i + 2),
                    Some(i) => (i, i + 1),
                    None => {
                        let e = if rest.last() == Some(&b'\n') {
                            rest.len() - 1
                        } else {
                            rest.len()
                        };
                        (e, rest.len())
                    }
                };
                let s = self.seg_start;
                self.seg_start += next;
                self.line_no += 1;
                return Some((s, s + end));
            }
            self.buf.clear();
            self.seg_start = 0;
            match read_line(&mut self.input, &mut self.buf) {
                Ok(0) => return None,
                Ok(n) => {
                    self.chunk_len = n;
                    self.have_chunk = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.io_error = Some(e);
                    return None;
                }
            }
        }
    }
}

/// `BufRead::read_until(b'\n')` with the memchr crate's SIMD search.
fn read_line<R: BufRead>(input: &mut R, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut read = 0;
    loop {
        let (done, used) = {
            let available = match input.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            match memchr::memchr(b'\n', available) {
                Some(i) => {
                    buf.extend_from_slice(&available[..=i]);
                    (true, i + 1)
                }
                None => {
                    buf.extend_from_slice(available);
                    (available.is_empty(), available.len())
                }
            }
        };
        input.consume(used);
        read += used;
        if done {
            return Ok(read);
        }
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            let (s, e) = self.next_line()?;
            let line = &self.buf[s..e];
            let Some(pos) = rfind_marker(line) else {
                continue;
            };
            let index = self.index;
            self.index += 1;
            let item = match self.keep.as_deref() {
                Some(keep) => {
                    let memo = |k: &str| {
                        let mut last = self.last_keep.borrow_mut();
                        match &*last {
                            Some((key, kept)) if key == k => *kept,
                            _ => {
                                let kept = keep(k);
                                *last = Some((k.to_string(), kept));
                                kept
                            }
                        }
                    };
                    parse_marked(&line[pos..], index, self.line_no, Some(&memo))
                }
                None => parse_marked(&line[pos..], index, self.line_no, None),
            };
            return Some(item);
        }
    }
}

/// Python's `str.strip()` whitespace, for Latin-1 characters.
fn is_py_space(b: u8) -> bool {
    matches!(
        b,
        b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' ' | 0x85 | 0xa0
    )
}

/// Parse the text of one line starting at its last marker.
fn parse_marked(
    from_marker: &[u8],
    index: i64,
    line: usize,
    keep: Option<&dyn Fn(&str) -> bool>,
) -> Item {
    let mut end = from_marker.len();
    while end > 0 && is_py_space(from_marker[end - 1]) {
        end -= 1;
    }
    let stripped = &from_marker[..end];
    let text = json::latin1(stripped);
    let problem = |message: String, official_crash: bool| {
        Item::Problem(LineProblem {
            index,
            line,
            text: text.clone(),
            message,
            official_crash,
        })
    };
    if !stripped.starts_with(MARKER) {
        // ":::MLLOG " followed only by whitespace: the strip ate the space.
        return problem("does not match regex".into(), false);
    }
    let doc = &stripped[MARKER.len()..];
    // A line whose value no rule reads: validated and read without
    // building it, when it is plain JSON (else decoded in full below).
    if let Some(keep) = keep
        && let Some(skim) = json::skim_record(doc)
        && !keep(skim.key)
    {
        return Item::Record(Record {
            index,
            line,
            timestamp: skim.time_ms,
            key: Some(skim.key.to_string()),
            v: Value::None,
            text,
            slim: true,
        });
    }
    let obj = match json::parse(doc) {
        Ok(Value::Dict(d)) => d,
        Ok(other) => {
            return problem(
                format!(
                    "the MLLOG payload is a JSON {} where an object with time_ms, key, value and metadata was expected",
                    crate::value::type_name(&other)
                ),
                true,
            );
        }
        Err(e) => return problem(e.to_string(), false),
    };
    match record_from_object(obj, text.clone(), index, line, keep) {
        Ok(item) => item,
        Err((msg, crash)) => problem(msg, crash),
    }
}

fn record_from_object(
    mut obj: Dict,
    text: String,
    index: i64,
    line: usize,
    keep: Option<&dyn Fn(&str) -> bool>,
) -> Result<Item, (String, bool)> {
    let missing: Vec<&str> = ["time_ms", "key", "value", "metadata"]
        .into_iter()
        .filter(|m| !obj.contains_key(*m))
        .collect();
    if !missing.is_empty() {
        return Err((
            format!(
                "missing member{} {} (every MLLOG line needs time_ms, key, value and metadata)",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", ")
            ),
            true,
        ));
    }
    let timestamp = match &obj["time_ms"] {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => *b as i64 as f64,
        Value::Str(s) => match py_float(s) {
            Some(f) => f,
            None => {
                return Err((
                    format!(
                        "could not convert string to float: {}",
                        Value::str(s.clone()).py_repr()
                    ),
                    false,
                ));
            }
        },
        other => {
            return Err((
                format!(
                    "time_ms is {} where a number of milliseconds was expected",
                    match other {
                        Value::None => "null".to_string(),
                        o => format!("a JSON {}", crate::value::type_name(o)),
                    }
                ),
                true,
            ));
        }
    };
    let key = match obj.get("key") {
        Some(Value::Str(s)) => Some(s.clone()),
        _ => None,
    };
    let slim = match (&key, keep) {
        (Some(k), Some(keep)) => !keep(k),
        _ => false,
    };
    let v = if slim {
        Value::None
    } else {
        let metadata = obj.swap_remove("metadata").unwrap_or_default();
        let value = obj.swap_remove("value").unwrap_or_default();
        let mut v = Dict::with_capacity(2);
        v.insert("value".into(), value);
        v.insert("metadata".into(), metadata);
        Value::Dict(v)
    };
    Ok(Item::Record(Record {
        index,
        line,
        timestamp,
        key,
        v,
        text,
        slim,
    }))
}

/// Python's `float(str)`: surrounding whitespace, `_` between digits,
/// `inf`/`infinity`/`nan` in any case.
pub fn py_float(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c.is_whitespace());
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if lower.len() - unsigned.len() > 1 {
        return None;
    }
    match unsigned {
        "inf" | "infinity" => {
            return Some(if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    // Underscores are allowed only between digits.
    let b = t.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'_'
            && !(i > 0
                && b[i - 1].is_ascii_digit()
                && b.get(i + 1).is_some_and(|n| n.is_ascii_digit()))
        {
            return None;
        }
    }
    let cleaned: String = t.chars().filter(|c| *c != '_').collect();
    if cleaned.is_empty()
        || !cleaned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return None;
    }
    cleaned.parse::<f64>().ok()
}

/// Everything read from one log.
#[derive(Debug, Default)]
pub struct ParsedLog {
    pub records: Vec<Record>,
    pub problems: Vec<LineProblem>,
    /// Physical lines in the file.
    pub lines: usize,
    /// Lines that carried the marker.
    pub mllog_lines: usize,
}

/// Read and parse a whole log from any reader.
pub fn read_from<R: Read>(input: R) -> std::io::Result<ParsedLog> {
    collect(Reader::new(BufReader::with_capacity(256 * 1024, input)))
}

/// Read a log file keeping values only for the keys `keep` accepts.
pub fn read_file_keeping(path: &Path, keep: std::sync::Arc<KeepFn>) -> std::io::Result<ParsedLog> {
    let f = std::fs::File::open(path)?;
    collect(Reader::new(BufReader::with_capacity(256 * 1024, f)).keep_values(keep))
}

/// Read every item of `reader` into a [`ParsedLog`] (any byte source: a
/// file, or a stream as it is being written).
pub fn collect<R: BufRead>(mut reader: Reader<R>) -> std::io::Result<ParsedLog> {
    let mut out = ParsedLog::default();
    for item in reader.by_ref() {
        match item {
            Item::Record(r) => out.records.push(r),
            Item::Problem(p) => out.problems.push(p),
        }
    }
    if let Some(e) = reader.take_io_error() {
        return Err(e);
    }
    out.lines = reader.lines_read();
    out.mllog_lines = out.records.len() + out.problems.len();
    Ok(out)
}

/// Read and parse a log file.
pub fn read_file(path: &Path) -> std::io::Result<ParsedLog> {
    read_from(std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_marker_is_found_as_a_substring_search_finds_it() {
        let cases: &[&[u8]] = &[
            b":::MLLOG {}",
            b"0: :::MLLOG {\"a\": \":::MLLOG x\"}",
            b"::::MLLOG {}",
            b":::MLLOG",
            b"MLLOG :::MLLOG ",
            b"M:::MLLOG M",
            b"::MLLOG {}",
            b"",
            b"MMMM",
            b":::MLLOG :::MLLOG :::MLLOG",
        ];
        for c in cases {
            assert_eq!(
                rfind_marker(c),
                memmem::rfind(c, MARKER),
                "{}",
                String::from_utf8_lossy(c)
            );
        }
    }

    #[test]
    fn a_repeated_key_is_asked_of_the_filter_once_and_answered_the_same() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let asked = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let keep: std::sync::Arc<KeepFn> = std::sync::Arc::new(move |k: &str| {
            counter.fetch_add(1, Ordering::Relaxed);
            k == "eval_accuracy"
        });
        let line = |k: &str| {
            format!(
                ":::MLLOG {{\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \"key\": \"{k}\", \"value\": 0.5, \"metadata\": {{}}}}\n"
            )
        };
        let log: String = [
            "train_loss",
            "train_loss",
            "eval_accuracy",
            "eval_accuracy",
            "train_loss",
            "",
        ]
        .iter()
        .map(|k| line(k))
        .collect();
        let parsed = collect(Reader::new(log.as_bytes()).keep_values(keep)).unwrap();
        let slim: Vec<bool> = parsed.records.iter().map(|r| r.slim).collect();
        assert_eq!(slim, [true, true, false, false, true, true]);
        assert_eq!(parsed.records[2].value().as_f64(), Some(0.5));
        // train_loss, eval_accuracy, train_loss, "": one question per change of key.
        assert_eq!(asked.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn head_reads_key_and_time_as_the_full_reader_does() {
        let h = |l: &str| head(l.as_bytes()).map(|h| (h.key.into_owned(), h.time_ms));
        // The official logger's layout: read from its first bytes.
        let std_line = r#":::MLLOG {"namespace": "", "time_ms": 1746126171791, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"x": 1}, "metadata": {"file": "a.py", "lineno": 2}}"#;
        assert_eq!(h(std_line), Some(("tracked_stats".into(), 1746126171791.0)));
        // Nested `key` members do not count, but a later top-level member
        // wins, as in Python's json.loads: the full reader decides.
        let nested = r#":::MLLOG {"namespace": "", "time_ms": 5, "event_type": "POINT_IN_TIME", "key": "a", "value": {"key": "b"}, "metadata": {}}"#;
        assert_eq!(h(nested), Some(("a".into(), 5.0)));
        let dup_time = r#":::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "POINT_IN_TIME", "key": "run_stop", "value": null, "metadata": {}, "time_ms": 7}"#;
        assert_eq!(h(dup_time), Some(("run_stop".into(), 7.0)));
        let dup_key = r#":::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "POINT_IN_TIME", "key": "x", "value": null, "metadata": {}, "key": "run_start"}"#;
        assert_eq!(h(dup_key), Some(("run_start".into(), 1000.0)));
        // Other layouts, escapes, numbers as strings, NaN: the full reader.
        assert_eq!(
            h(r#":::MLLOG {"key": "k\u0041", "time_ms": "12.5", "value": 1, "metadata": {}}"#),
            Some(("kA".into(), 12.5))
        );
        assert_eq!(
            h(
                r#":::MLLOG {"namespace": "", "time_ms": 01, "event_type": "x", "key": "k", "value": NaN, "metadata": {}}"#
            ),
            None
        );
        // Not a record: no head.
        assert_eq!(
            h(
                ":::MLLOG {\"namespace\": \"\", \"time_ms\": 3, \"event_type\": \"x\", \"key\": \"k\""
            ),
            None
        );
        assert_eq!(
            h(r#":::MLLOG {"time_ms": 3, "value": 1, "metadata": {}}"#),
            None
        );
        assert_eq!(h(":::MLLOG [1, 2]"), None);
    }

    fn parse(s: &[u8]) -> ParsedLog {
        read_from(s).unwrap()
    }

    const OK: &str = r#":::MLLOG {"namespace": "", "time_ms": 7, "event_type": "POINT_IN_TIME", "key": "seed", "value": 1, "metadata": {"file": "t.py", "lineno": 3}}"#;

    #[test]
    fn marker_anywhere_last_occurrence_wins() {
        let log = format!("noise\n[rank0]: {OK}\njunk :::MLLOG junk {OK}\n:::MLLOG{{\"x\": 1}}\n");
        let p = parse(log.as_bytes());
        assert_eq!(p.records.len(), 2);
        assert!(p.problems.is_empty());
        assert_eq!(p.records[0].line, 2);
        assert_eq!(p.records[0].index, 0);
        assert_eq!(p.records[1].line, 3);
        assert_eq!(p.records[1].index, 1);
        assert!(p.records[1].text.starts_with(":::MLLOG {"));
        assert_eq!(p.lines, 4);
    }

    #[test]
    fn universal_newlines() {
        let log = format!("a\r{OK}\r\nb\n{OK}\rc");
        let p = parse(log.as_bytes());
        assert_eq!(
            p.records.iter().map(|r| r.line).collect::<Vec<_>>(),
            vec![2, 4]
        );
        assert_eq!(p.lines, 5);
    }

    #[test]
    fn latin1_and_values() {
        let log = b":::MLLOG {\"time_ms\": \"7\", \"key\": \"k\xe9\", \"value\": NaN, \"metadata\": null}\n";
        let p = parse(log);
        assert_eq!(p.records.len(), 1);
        let r = &p.records[0];
        assert_eq!(r.key(), "k\u{e9}");
        assert_eq!(r.timestamp, 7.0);
        assert!(r.value().as_f64().unwrap().is_nan());
        assert!(r.metadata().is_none());
    }

    #[test]
    fn problems_are_reported_not_fatal() {
        let log = concat!(
            ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \n",
            ":::MLLOG {\"time_ms\": \"1.2.3\", \"key\": \"a\", \"value\": 1, \"metadata\": {}}\n",
            ":::MLLOG {\"key\": \"a\", \"value\": 1, \"metadata\": {}}\n",
            ":::MLLOG [1,2,3]\n",
            ":::MLLOG {\"time_ms\": null, \"key\": \"a\", \"value\": 1, \"metadata\": {}}\n",
            ":::MLLOG \n",
            ":::MLLOG {\"time_ms\": 1, \"key\": \"a\", \"value\": 1, \"metadata\": {}} trailing\n",
        );
        let p = parse(log.as_bytes());
        assert!(p.records.is_empty());
        let msgs: Vec<(&str, bool, usize)> = p
            .problems
            .iter()
            .map(|x| (x.message.as_str(), x.official_crash, x.line))
            .collect();
        assert_eq!(
            msgs[0],
            (
                "Expecting property name enclosed in double quotes: line 1 column 32 (char 31)",
                false,
                1
            )
        );
        assert_eq!(msgs[1].0, "could not convert string to float: '1.2.3'");
        assert!(msgs[2].0.contains("missing member time_ms") && msgs[2].1);
        assert!(msgs[3].0.contains("JSON list") && msgs[3].1);
        assert!(msgs[4].0.contains("time_ms is null") && msgs[4].1);
        assert_eq!(msgs[5].0, "does not match regex");
        assert!(msgs[6].0.starts_with("Extra data"));
        assert_eq!(p.mllog_lines, 7);
    }

    #[test]
    fn duplicate_key_member_last_wins() {
        let log = r#":::MLLOG {"time_ms": 1, "key": "submission_org", "key": "submission_benchmark", "value": "x", "metadata": {}}"#;
        let p = parse(log.as_bytes());
        assert_eq!(p.records[0].key(), "submission_benchmark");
    }

    #[test]
    fn python_float_strings() {
        assert_eq!(py_float(" 7 "), Some(7.0));
        assert_eq!(py_float("1_000.5"), Some(1000.5));
        assert_eq!(py_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(py_float("nan").unwrap().is_nan());
        assert_eq!(py_float("1.2.3"), None);
        assert_eq!(py_float("1__0"), None);
        assert_eq!(py_float("_1"), None);
        assert_eq!(py_float(""), None);
        assert_eq!(py_float("--1"), None);
    }
}
