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
use crate::untrusted::{self, FileKind, Links};
use crate::value::{Dict, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

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
    pub key: Option<std::sync::Arc<str>>,
    /// `{"value": <value>, "metadata": <metadata>}`, the object rules call `v`.
    pub v: V,
    /// The stripped line from the marker on (the official `full_string`).
    pub text: Text,
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
        self.v = self.full_v().into_owned().into();
        self.slim = false;
    }

    /// `v`, decoding the line again when the record was read slim.
    pub fn full_v(&self) -> std::borrow::Cow<'_, Value> {
        if !self.slim {
            return std::borrow::Cow::Borrowed(&self.v);
        }
        match parse_marked(
            &self.text.bytes(),
            self.index,
            self.line,
            &Keys::default(),
            None,
        ) {
            Item::Record(full) => std::borrow::Cow::Owned(full.v.into_inner()),
            Item::Problem(_) => std::borrow::Cow::Borrowed(&self.v),
        }
    }
}

/// A record's `v`, boxed: a record is then 88 bytes instead of 152, and a
/// slim record (whose `v` is `None`) holds no allocation (a flood of a
/// million lines is a million records).
#[derive(Clone, Default)]
pub struct V(Option<Box<Value>>);

static NO_VALUE: Value = Value::None;

impl V {
    pub fn into_inner(self) -> Value {
        self.0.map_or(Value::None, |b| *b)
    }
}

impl From<Value> for V {
    fn from(v: Value) -> V {
        match v {
            Value::None => V(None),
            v => V(Some(Box::new(v))),
        }
    }
}

impl std::ops::Deref for V {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.0.as_deref().unwrap_or(&NO_VALUE)
    }
}

impl std::ops::DerefMut for V {
    fn deref_mut(&mut self) -> &mut Value {
        self.0.get_or_insert_with(|| Box::new(Value::None))
    }
}

impl std::fmt::Debug for V {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// The text of a record: the stripped line from the marker on, as
/// Latin-1 characters.
#[derive(Clone)]
pub enum Text {
    Owned(String),
    /// `len` bytes at offset `at` of a file that holds the line (the result
    /// file a supervisor writes): what slim records of a file being written
    /// keep, so that a million lines no rule reads cost no copy of their
    /// text. The file is only ever appended to; the text is read again
    /// when asked for (a failure message, a value no rule was expected to
    /// read).
    InFile(std::sync::Arc<std::fs::File>, u64, u32),
}

impl Text {
    /// The text (read from its file for [`Text::InFile`]; a note of the
    /// error when that fails).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Text::Owned(s) => std::borrow::Cow::Borrowed(s),
            Text::InFile(file, at, len) => match read_at(file, *at, *len) {
                Ok(b) => std::borrow::Cow::Owned(json::latin1(&b)),
                Err(e) => std::borrow::Cow::Owned(format!("<the line cannot be read again: {e}>")),
            },
        }
    }

    /// The line's bytes (Latin-1 characters turned back into bytes).
    fn bytes(&self) -> Vec<u8> {
        match self {
            Text::Owned(s) => s.chars().map(|c| c as u32 as u8).collect(),
            Text::InFile(file, at, len) => read_at(file, *at, *len).unwrap_or_default(),
        }
    }
}

/// `len` bytes of `file` at offset `at`.
fn read_at(file: &std::fs::File, at: u64, len: u32) -> std::io::Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    #[cfg(unix)]
    std::os::unix::fs::FileExt::read_exact_at(file, &mut b, at)?;
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(at))?;
        f.read_exact(&mut b)?;
    }
    Ok(b)
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::Owned(s)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::Owned(s.to_string())
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.as_str(), f)
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// Where the line given to [`LineParser::line_in`] lies in a file that
/// holds it: slim records then keep [`Text::InFile`] instead of a copy.
#[derive(Clone, Copy)]
pub struct At<'a> {
    pub file: &'a std::sync::Arc<std::fs::File>,
    /// The offset of the line's first byte.
    pub offset: u64,
}

/// Decides which keys keep their values (see [`Reader::keep_values`]).
pub type KeepFn = dyn Fn(&str) -> bool + Send + Sync;

/// The keys of a log's records: one shared string per run of equal keys
/// (logs repeat keys: a million `train_loss` lines hold one allocation of
/// the name between them), and whether each keeps its value.
#[derive(Default)]
struct Keys {
    keep: Option<std::sync::Arc<KeepFn>>,
    /// The last key seen and its answer.
    last: std::cell::RefCell<Option<(std::sync::Arc<str>, bool)>>,
}

impl Keys {
    /// The shared string for `k`, and whether its records keep their
    /// values (asked of the filter once per run of equal keys).
    fn get(&self, k: &str) -> (std::sync::Arc<str>, bool) {
        let mut last = self.last.borrow_mut();
        if let Some((key, kept)) = &*last
            && &**key == k
        {
            return (key.clone(), *kept);
        }
        let kept = self.keep.as_deref().is_none_or(|keep| keep(k));
        let key: std::sync::Arc<str> = k.into();
        *last = Some((key.clone(), kept));
        (key, kept)
    }
}

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

/// The per-line half of [`Reader`]: numbers the physical lines and the
/// MLLOG lines, and parses each marked line. A supervisor that writes a log
/// line by line feeds it the bytes it writes ([`LineParser::chunk`]) and so
/// holds, as it writes, what a [`Reader`] of the finished file would give.
pub struct LineParser {
    line_no: usize,
    index: i64,
    keys: Keys,
}

impl Default for LineParser {
    fn default() -> Self {
        LineParser::new(None)
    }
}

impl LineParser {
    /// Values kept only for keys `keep` accepts (see [`Reader::keep_values`]).
    pub fn new(keep: Option<std::sync::Arc<KeepFn>>) -> Self {
        LineParser {
            line_no: 0,
            index: 0,
            keys: Keys {
                keep,
                last: Default::default(),
            },
        }
    }

    /// Number of physical lines seen so far.
    pub fn lines_read(&self) -> usize {
        self.line_no
    }

    /// One physical line, without its terminator: its item when it carries
    /// the marker.
    pub fn line(&mut self, line: &[u8]) -> Option<Item> {
        self.line_in(line, None)
    }

    /// A physical line longer than the reader's cap (`max`, [`MAX_LINE`]
    /// unless set) that carries the marker (`len` bytes; `head`: its first
    /// bytes): one problem, its text not read.
    pub fn overlong(&mut self, head: &[u8], len: u64, max: usize) -> Item {
        self.line_no += 1;
        let index = self.index;
        self.index += 1;
        Item::Problem(LineProblem {
            index,
            line: self.line_no,
            text: json::latin1(&head[..head.len().min(160)]),
            message: format!(
                "the MLLOG line is {len} bytes long, more than the {max} bytes a line may have: it was not read"
            ),
            official_crash: false,
        })
    }

    /// [`LineParser::line`] of a line that lies in a file (`at`).
    pub fn line_in(&mut self, line: &[u8], at: Option<At>) -> Option<Item> {
        self.line_no += 1;
        let pos = rfind_marker(line)?;
        let index = self.index;
        self.index += 1;
        let at = at.map(|a| (a.file, a.offset + pos as u64));
        Some(parse_marked(
            &line[pos..],
            index,
            self.line_no,
            &self.keys,
            at,
        ))
    }

    /// Bytes up to and including one `\n` (or the last bytes of the
    /// input), split into physical lines as the [`Reader`] splits them (a
    /// lone `\r` also ends a line); `each` gets their items in order.
    pub fn chunk(&mut self, chunk: &[u8], each: impl FnMut(Item)) {
        self.chunk_in(chunk, each, None)
    }

    /// [`LineParser::chunk`] of bytes that lie in a file (`at`: where the
    /// chunk starts).
    pub fn chunk_in(&mut self, chunk: &[u8], mut each: impl FnMut(Item), at: Option<At>) {
        let mut start = 0;
        while start < chunk.len() {
            let (end, next) = segment(&chunk[start..]);
            let line_at = at.map(|a| At {
                file: a.file,
                offset: a.offset + start as u64,
            });
            if let Some(item) = self.line_in(&chunk[start..start + end], line_at) {
                each(item);
            }
            start += next;
        }
    }
}

/// The first physical line of `rest` (the rest of a chunk that ends with
/// `\n` or at the end of the input): its length without the terminator,
/// and where the next one starts.
fn segment(rest: &[u8]) -> (usize, usize) {
    match memchr::memchr(b'\r', rest) {
        Some(i) if i + 1 == rest.len() => (i, rest.len()),
        Some(i) if rest[i + 1] == b'\n' => (i, i + 2),
        Some(i) => (i, i + 1),
        None if rest.last() == Some(&b'\n') => (rest.len() - 1, rest.len()),
        None => (rest.len(), rest.len()),
    }
}

/// The longest line read (64 MiB; the longest line of the MLPerf Training
/// v5.0 round's logs is 2.9 KB, and a 10 MB value is read, tested): a
/// longer MLLOG line is one [`LineProblem`], not a line held in memory (a
/// 2 GB file without a newline would otherwise be one 2 GB string).
pub const MAX_LINE: usize = 64 << 20;

/// Unreadable lines kept in full per log ([`ParsedLog::problems`]); those
/// past them are only counted ([`ParsedLog::unkept_problems`]), so that a
/// log of a million junk lines costs the memory of a hundred.
pub const KEPT_PROBLEMS: usize = 100;

/// The most bytes of an unreadable line kept as its text (reports show the
/// first 160 characters).
pub const PROBLEM_TEXT: usize = 4096;

/// Iterator over the MLLOG items of a byte stream.
pub struct Reader<R> {
    input: R,
    buf: Vec<u8>,
    lines: LineParser,
    io_error: Option<std::io::Error>,
    /// The longest line read ([`MAX_LINE`] unless set).
    max_line: usize,
}

impl<R: BufRead> Reader<R> {
    pub fn new(input: R) -> Self {
        Reader {
            input,
            buf: Vec::with_capacity(1024),
            lines: LineParser::default(),
            io_error: None,
            max_line: MAX_LINE,
        }
    }

    /// Read lines of at most `max` bytes (an MLLOG line longer than that
    /// is one problem; see [`MAX_LINE`]).
    pub fn max_line(mut self, max: usize) -> Self {
        self.max_line = max;
        self
    }

    /// Keep values only for keys `keep` accepts; other records are still
    /// validated and counted but stored slim (see [`Record::inflate`]). This
    /// bounds memory on huge logs full of keys no rule reads.
    pub fn keep_values(mut self, keep: std::sync::Arc<KeepFn>) -> Self {
        self.lines.keys = Keys {
            keep: Some(keep),
            last: Default::default(),
        };
        self
    }

    /// An I/O error that ended iteration early, if any.
    pub fn take_io_error(&mut self) -> Option<std::io::Error> {
        self.io_error.take()
    }

    /// Number of physical lines seen so far.
    pub fn lines_read(&self) -> usize {
        self.lines.lines_read()
    }
}

/// A physical line read by [`read_line`].
struct LineRead {
    /// Its full length (more than the cap when it was cut).
    len: u64,
    /// The marker lies in the part past the cap (which was not kept).
    marker_past_cap: bool,
}

/// Looks for the marker in the bytes of a line past the cap, which are
/// dropped as they are read: the last bytes seen carry over, so a marker
/// split between two reads is found.
#[derive(Default)]
struct PastCap {
    carry: Vec<u8>,
    marker: bool,
}

impl PastCap {
    fn see(&mut self, kept: &[u8], dropped: &[u8]) {
        const CARRY: usize = MARKER.len() - 1;
        if self.marker || dropped.is_empty() {
            return;
        }
        if self.carry.is_empty() {
            self.carry = kept[kept.len().saturating_sub(CARRY)..].to_vec();
        }
        self.carry
            .extend_from_slice(&dropped[..dropped.len().min(CARRY)]);
        self.marker = memchr::memmem::find(&self.carry, MARKER).is_some()
            || memchr::memmem::find(dropped, MARKER).is_some();
        self.carry = if dropped.len() >= CARRY {
            dropped[dropped.len() - CARRY..].to_vec()
        } else {
            self.carry[self.carry.len().saturating_sub(CARRY)..].to_vec()
        };
    }
}

/// The next physical line of `input` into `buf` (without its terminator:
/// `\n`, `\r\n` or a lone `\r`, Python's universal newlines), at most
/// `max` bytes of it; `None` at the end of the input. The bytes past the
/// cap are read and dropped, not kept (only looked at for the marker).
fn read_line<R: BufRead>(
    input: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<LineRead>> {
    let mut past = PastCap::default();
    let mut keep = |buf: &mut Vec<u8>, bytes: &[u8]| {
        let room = max.saturating_sub(buf.len());
        let (kept, dropped) = bytes.split_at(bytes.len().min(room));
        buf.extend_from_slice(kept);
        past.see(buf, dropped);
    };
    let mut total: u64 = 0;
    let mut any = false;
    loop {
        // (bytes to consume, whether they end the line, whether in a `\r`)
        let (used, ended, cr) = {
            let available = match input.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(any.then_some(LineRead {
                    len: total,
                    marker_past_cap: past.marker,
                }));
            }
            any = true;
            match memchr::memchr2(b'\n', b'\r', available) {
                Some(i) => {
                    keep(buf, &available[..i]);
                    total += i as u64;
                    (i + 1, true, available[i] == b'\r')
                }
                None => {
                    keep(buf, available);
                    total += available.len() as u64;
                    (available.len(), false, false)
                }
            }
        };
        input.consume(used);
        if !ended {
            continue;
        }
        if cr {
            // `\r\n` ends one line, not two.
            loop {
                match input.fill_buf() {
                    Ok(a) => {
                        if a.first() == Some(&b'\n') {
                            input.consume(1);
                        }
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        return Ok(Some(LineRead {
            len: total,
            marker_past_cap: past.marker,
        }));
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            self.buf.clear();
            match read_line(&mut self.input, &mut self.buf, self.max_line) {
                Ok(None) => return None,
                Ok(Some(l)) if l.len > self.max_line as u64 => {
                    // Framework output may hold a long line; an MLLOG line
                    // that long is not read.
                    if l.marker_past_cap || rfind_marker(&self.buf).is_some() {
                        return Some(self.lines.overlong(&self.buf, l.len, self.max_line));
                    }
                    self.lines.line(b"");
                }
                Ok(Some(_)) => {
                    if let Some(item) = self.lines.line(&self.buf) {
                        return Some(item);
                    }
                }
                Err(e) => {
                    self.io_error = Some(e);
                    return None;
                }
            }
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

/// Parse the text of one line starting at its last marker (`at`: where
/// that is in a file that holds it).
fn parse_marked(
    from_marker: &[u8],
    index: i64,
    line: usize,
    keys: &Keys,
    at: Option<(&std::sync::Arc<std::fs::File>, u64)>,
) -> Item {
    let mut end = from_marker.len();
    while end > 0 && is_py_space(from_marker[end - 1]) {
        end -= 1;
    }
    let stripped = &from_marker[..end];
    let problem = |message: String, official_crash: bool| {
        Item::Problem(LineProblem {
            index,
            line,
            text: json::latin1(&stripped[..stripped.len().min(PROBLEM_TEXT)]),
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
    if keys.keep.is_some()
        && let Some(skim) = json::skim_record(doc)
        && let (key, false) = keys.get(skim.key)
    {
        let text = match at {
            Some((file, offset)) if u32::try_from(stripped.len()).is_ok() => {
                Text::InFile(file.clone(), offset, stripped.len() as u32)
            }
            _ => Text::Owned(json::latin1(stripped)),
        };
        return Item::Record(Record {
            index,
            line,
            timestamp: skim.time_ms,
            key: Some(key),
            v: V::default(),
            text,
            slim: true,
        });
    }
    let (obj, huge) = match json::parse_object(doc) {
        Ok((Value::Dict(d), huge)) => (d, huge),
        Ok((other, _)) => {
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
    if huge.iter().any(|m| m == "time_ms") {
        // Python reads the integer exactly and `float(time_ms)` raises
        // OverflowError, which the official parser does not catch: the
        // tool crashes. That crash is an accident (its parser catches only
        // ValueError, beside a "TODO check for weird values"), so referee
        // reports the line as its own error, marked as the official crash,
        // rather than reading the time as infinity (which is what `1e400`,
        // a float literal, means in Python too, and is read as such).
        return problem(
            "time_ms is an integer too large to convert to a float (Python: OverflowError)".into(),
            true,
        );
    }
    match record_from_object(obj, json::latin1(stripped), index, line, keys) {
        Ok(item) => item,
        Err((msg, crash)) => problem(msg, crash),
    }
}

fn record_from_object(
    mut obj: Dict,
    text: String,
    index: i64,
    line: usize,
    keys: &Keys,
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
    let (key, slim) = match obj.get("key") {
        Some(Value::Str(s)) => {
            let (key, kept) = keys.get(s);
            (Some(key), !kept)
        }
        _ => (None, false),
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
        v: v.into(),
        text: Text::Owned(text),
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
#[derive(Debug, Default, Clone)]
pub struct ParsedLog {
    pub records: Vec<Record>,
    /// The first [`KEPT_PROBLEMS`] unreadable lines, in file order.
    pub problems: Vec<LineProblem>,
    /// Unreadable lines after those (counted, not kept).
    pub unkept_problems: usize,
    /// Physical lines in the file.
    pub lines: usize,
    /// Lines that carried the marker.
    pub mllog_lines: usize,
}

impl ParsedLog {
    /// One item of the log, in file order.
    pub fn push(&mut self, item: Item) {
        match item {
            Item::Record(r) => self.records.push(r),
            Item::Problem(p) if self.problems.len() < KEPT_PROBLEMS => self.problems.push(p),
            Item::Problem(_) => self.unkept_problems += 1,
        }
    }

    /// Unreadable lines, kept or not.
    pub fn problem_count(&self) -> usize {
        self.problems.len() + self.unkept_problems
    }

    /// The counts, once `lines` physical lines have been read (every line
    /// that carried the marker is a record or a problem).
    pub fn count_lines(&mut self, lines: usize) {
        self.lines = lines;
        self.mllog_lines = self.records.len() + self.problem_count();
    }
}

/// Read and parse a whole log from any reader.
pub fn read_from<R: Read>(input: R) -> std::io::Result<ParsedLog> {
    collect(Reader::new(BufReader::with_capacity(256 * 1024, input)))
}

/// Open a log of a package for reading: a regular file of at most
/// [`FileKind::Log`]'s cap, read through a reader that stops there (see
/// [`crate::untrusted`]; `links`: whether the path may be a link, which
/// only a path the user typed may be).
pub fn open_log(path: &Path, links: Links) -> std::io::Result<untrusted::Bounded> {
    Ok(untrusted::open(path, FileKind::Log, links)?.reader())
}

/// Read a log file keeping values only for the keys `keep` accepts (a link
/// is refused: see [`open_log`]).
pub fn read_file_keeping(path: &Path, keep: std::sync::Arc<KeepFn>) -> std::io::Result<ParsedLog> {
    let f = open_log(path, Links::Refuse)?;
    collect(Reader::new(buffered(f)).keep_values(keep))
}

/// A package's log behind a read buffer of its size, at most 256 KiB.
fn buffered(f: untrusted::Bounded) -> BufReader<untrusted::Bounded> {
    BufReader::with_capacity(f.buffer_size(256 * 1024), f)
}

/// Read every item of `reader` into a [`ParsedLog`] (any byte source: a
/// file, or a stream as it is being written).
pub fn collect<R: BufRead>(mut reader: Reader<R>) -> std::io::Result<ParsedLog> {
    let mut out = ParsedLog::default();
    for item in reader.by_ref() {
        out.push(item);
    }
    if let Some(e) = reader.take_io_error() {
        return Err(e);
    }
    out.count_lines(reader.lines_read());
    Ok(out)
}

/// Read and parse a log file of a package (a link is refused: see
/// [`open_log`]).
pub fn read_file(path: &Path) -> std::io::Result<ParsedLog> {
    read_file_as(path, Links::Refuse)
}

/// [`read_file`] of a path that may be a link where `links` allows it (a
/// path the user typed).
pub fn read_file_as(path: &Path, links: Links) -> std::io::Result<ParsedLog> {
    collect(Reader::new(buffered(open_log(path, links)?)))
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
                memchr::memmem::rfind(c, MARKER),
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
    fn a_line_parser_fed_line_by_line_reads_as_the_reader_does() {
        let rec = |k: &str, t: u32| {
            format!(
                r#":::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "POINT_IN_TIME", "key": "{k}", "value": 1, "metadata": {{}}}}"#
            )
        };
        let log = format!(
            "hi\r\n{}\nx\r0: {}\r{}\n:::MLLOG {{bad\n{}",
            rec("train_loss", 1),
            rec("train_loss", 2),
            rec("seed", 3),
            rec("seed", 4)
        );
        let keep: std::sync::Arc<KeepFn> = std::sync::Arc::new(|k: &str| k != "train_loss");
        let whole = collect(Reader::new(log.as_bytes()).keep_values(keep.clone())).unwrap();
        let mut p = LineParser::new(Some(keep));
        let mut fed = ParsedLog::default();
        for chunk in log.as_bytes().split_inclusive(|&b| b == b'\n') {
            p.chunk(chunk, |item| fed.push(item));
        }
        fed.count_lines(p.lines_read());
        assert_eq!(format!("{fed:?}"), format!("{whole:?}"));
        assert_eq!(
            (whole.lines, whole.records.len(), whole.problems.len()),
            (7, 4, 1)
        );
        // Equal keys in a row share one string.
        let key = |i: usize| whole.records[i].key.clone().unwrap();
        assert!(std::sync::Arc::ptr_eq(&key(0), &key(1)));
        assert!(std::sync::Arc::ptr_eq(&key(2), &key(3)));
        assert!(whole.records[0].slim && !whole.records[2].slim);
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
        assert!(p.records[1].text.as_str().starts_with(":::MLLOG {"));
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

    /// A log read with lines capped at `max` bytes.
    fn parse_capped(log: &[u8], max: usize, capacity: usize) -> ParsedLog {
        collect(Reader::new(BufReader::with_capacity(capacity, log)).max_line(max)).unwrap()
    }

    #[test]
    fn an_over_long_mllog_line_is_one_problem_and_reading_goes_on() {
        const CAP: usize = 1 << 16;
        // An MLLOG line past the cap by one byte; 3 caps without a newline
        // whose marker lies 2 caps past the start; 3 caps of framework
        // output (no marker); a record.
        let mut log = MARKER.to_vec();
        log.extend(std::iter::repeat_n(b'x', CAP + 1 - log.len()));
        log.extend_from_slice(b"\n");
        log.extend(std::iter::repeat_n(b'\0', 2 * CAP));
        log.extend_from_slice(MARKER);
        log.extend(std::iter::repeat_n(b'\0', CAP - MARKER.len()));
        log.extend_from_slice(b"\r\n");
        log.extend(std::iter::repeat_n(b'y', 3 * CAP));
        log.extend_from_slice(format!("\n{OK}\n").as_bytes());
        for capacity in [256 * 1024, 4096, 7] {
            let p = parse_capped(&log, CAP, capacity);
            assert_eq!(p.records.len(), 1);
            assert_eq!(p.records[0].line, 4);
            let msgs: Vec<_> = p
                .problems
                .iter()
                .map(|x| (x.line, x.message.clone()))
                .collect();
            assert_eq!(msgs.len(), 2, "{msgs:?}");
            assert_eq!((msgs[0].0, msgs[1].0), (1, 2));
            assert!(
                msgs[0]
                    .1
                    .starts_with("the MLLOG line is 65537 bytes long, more than the 65536 bytes"),
                "{}",
                msgs[0].1
            );
            assert!(
                msgs[1].1.starts_with("the MLLOG line is 196608 bytes long"),
                "{}",
                msgs[1].1
            );
            assert!(p.problems.iter().all(|x| x.text.len() <= 160));
            assert_eq!(p.lines, 4);
        }
        // At the cap exactly, a line is read.
        let at_cap = format!("{OK}{}", " ".repeat(CAP - OK.len()));
        assert_eq!(parse_capped(at_cap.as_bytes(), CAP, 4096).records.len(), 1);
    }

    #[test]
    fn the_default_cap_reads_a_10_mb_line_and_refuses_one_past_64_mib() {
        let padded = |n: usize| format!("{}{}\n", &OK[..OK.len() - 1], " ".repeat(n) + "}");
        assert_eq!(parse(padded(10 << 20).as_bytes()).records.len(), 1);
        let p = parse(padded(MAX_LINE).as_bytes());
        assert!(p.records.is_empty());
        assert!(
            p.problems[0]
                .message
                .contains("more than the 67108864 bytes"),
            "{}",
            p.problems[0].message
        );
    }

    #[test]
    fn a_marker_split_between_reads_past_the_cap_is_found() {
        const CAP: usize = 1 << 16;
        // The marker starts at each offset around a 4 KiB read boundary.
        for shift in 0..MARKER.len() + 1 {
            let mut log = vec![b'z'; CAP + 4096 * 3 - shift];
            log.extend_from_slice(MARKER);
            log.extend_from_slice(b"tail\n");
            let p = parse_capped(&log, CAP, 4096);
            assert_eq!(p.problems.len(), 1, "shift {shift}");
        }
        // No marker at all: a long line of output, not a problem.
        let p = parse_capped(&vec![b'z'; CAP + 10], CAP, 4096);
        assert_eq!((p.problems.len(), p.lines), (0, 1));
    }

    #[test]
    fn junk_lines_past_the_kept_hundred_are_counted_not_kept() {
        let junk =
            ":::MLLOG {broken json, with a long tail of text to make the line a bit longer}\n";
        let log = format!("{}{OK}\n", junk.repeat(200_000));
        let p = parse(log.as_bytes());
        assert_eq!(p.problems.len(), KEPT_PROBLEMS);
        assert_eq!(p.unkept_problems, 200_000 - KEPT_PROBLEMS);
        assert_eq!(p.problem_count(), 200_000);
        assert_eq!(p.mllog_lines, 200_001);
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.problems[99].line, 100);
    }

    #[test]
    fn a_problem_keeps_a_bounded_text() {
        let long = format!(":::MLLOG {{\"a\": \"{}\"", "y".repeat(100_000));
        let p = parse(long.as_bytes());
        assert_eq!(p.problems.len(), 1);
        assert_eq!(p.problems[0].text.len(), PROBLEM_TEXT);
    }

    #[cfg(unix)]
    #[test]
    fn a_sparse_log_past_the_cap_is_refused_by_its_size() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("result_0.txt");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let e = read_file(&path).unwrap_err();
        assert!(
            e.to_string()
                .contains("2147483648 bytes, more than the 1073741824 bytes allowed for a log"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_key_member_last_wins() {
        let log = r#":::MLLOG {"time_ms": 1, "key": "submission_org", "key": "submission_benchmark", "value": "x", "metadata": {}}"#;
        let p = parse(log.as_bytes());
        assert_eq!(p.records[0].key(), "submission_benchmark");
    }

    /// One record line with `time_ms` and `value` as written.
    fn numbers_line(time_ms: &str, value: &str) -> String {
        format!(
            ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {time_ms}, \"event_type\": \"POINT_IN_TIME\", \"key\": \"seed\", \"value\": {value}, \"metadata\": {{}}}}\n"
        )
    }

    /// The log read whole, and read keeping no values (the skim path).
    fn both_ways(log: &str) -> [ParsedLog; 2] {
        let keep: std::sync::Arc<KeepFn> = std::sync::Arc::new(|_: &str| false);
        [
            parse(log.as_bytes()),
            collect(Reader::new(log.as_bytes()).keep_values(keep)).unwrap(),
        ]
    }

    #[test]
    fn a_time_ms_integer_too_large_for_a_float_is_the_official_crash() {
        let big = format!("1{}", "0".repeat(399));
        for p in both_ways(&numbers_line(&big, "1")) {
            assert!(p.records.is_empty());
            assert_eq!(p.problems.len(), 1);
            let pr = &p.problems[0];
            assert!(pr.official_crash, "{pr:?}");
            assert!(
                pr.message.contains("too large to convert to a float"),
                "{}",
                pr.message
            );
        }
        // Negative too; a float literal past f64's range is infinity, as
        // Python's float('1e400') is.
        for p in both_ways(&numbers_line(&format!("-{big}"), "1")) {
            assert!(p.problems[0].official_crash);
        }
        for p in both_ways(&numbers_line("1e400", "1")) {
            assert_eq!(p.records[0].timestamp, f64::INFINITY);
        }
    }

    #[test]
    fn time_ms_beyond_2_53_nan_and_infinity_are_pythons_floats() {
        // float(9007199254740993) == 9007199254740992.0 (ties to even).
        for (text, want) in [
            ("9007199254740993", 9_007_199_254_740_992.0),
            ("9223372036854775807", 9_223_372_036_854_775_808.0),
            ("18446744073709551617", 18_446_744_073_709_551_616.0),
            ("Infinity", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
        ] {
            for p in both_ways(&numbers_line(text, "1")) {
                assert_eq!(p.records[0].timestamp, want, "{text}");
            }
        }
        for p in both_ways(&numbers_line("NaN", "1")) {
            assert!(p.records[0].timestamp.is_nan());
        }
    }

    #[test]
    fn a_value_past_pythons_digit_limit_is_a_parse_error() {
        let log = numbers_line("1", &"9".repeat(5000));
        for p in both_ways(&log) {
            assert!(p.records.is_empty());
            let pr = &p.problems[0];
            assert!(!pr.official_crash);
            assert!(
                pr.message.starts_with("Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
                "{}",
                pr.message
            );
        }
        // A 400-digit value is read (as infinity: see json::parse), not an error.
        let big = format!("-1{}", "0".repeat(399));
        let p = parse(numbers_line("1", &big).as_bytes());
        assert_eq!(p.records[0].value().as_f64(), Some(f64::NEG_INFINITY));
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
