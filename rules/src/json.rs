//! A JSON decoder that accepts exactly what Python's `json.loads` accepts.
//!
//! The official MLLOG parser calls `json.loads`, so referee must accept the
//! same documents and reject the same documents: bare `NaN`, `Infinity` and
//! `-Infinity` are values; a repeated object member silently replaces the
//! earlier one (keeping its position); leading and trailing whitespace
//! (space, tab, CR, LF) is allowed; anything after the value is an
//! `Extra data` error. Error messages use Python's wording and positions
//! (`Expecting ',' delimiter: line 1 column 32 (char 31)`).
//!
//! Input is bytes decoded as Latin-1 (every byte is one character), as the
//! official reader opens logs with `encoding='latin-1'`.

use crate::value::{Dict, Value};

/// Maximum nesting of arrays and objects. Python raises `RecursionError`
/// (and the official tool crashes) somewhere near 1000; referee reports a
/// parse error instead.
pub const MAX_DEPTH: usize = 512;

/// Python's limit on the digits of an integer it converts from text
/// (`sys.get_int_max_str_digits()`, 4300 by default since 3.11, a guard
/// against quadratic-time conversion). `json.loads` raises `ValueError`
/// for a longer integer literal, so the official parser drops the line
/// as a parse error; referee does the same, with Python's wording.
pub const INT_MAX_STR_DIGITS: usize = 4300;

#[derive(Clone, Debug, PartialEq)]
pub struct JsonError {
    pub message: std::borrow::Cow<'static, str>,
    /// Character (= byte) offset in the document.
    pub pos: usize,
    /// Python formats the error message with line/column computed from the
    /// document; the MLLOG parser only ever passes single lines.
    line: usize,
    col: usize,
}

impl JsonError {
    fn at(doc: &[u8], message: impl Into<std::borrow::Cow<'static, str>>, pos: usize) -> Self {
        let before = &doc[..pos.min(doc.len())];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let col = match before.iter().rposition(|b| *b == b'\n') {
            Some(nl) => pos - nl,
            None => pos + 1,
        };
        JsonError {
            message: message.into(),
            pos,
            line,
            col,
        }
    }
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: line {} column {} (char {})",
            self.message, self.line, self.col, self.pos
        )
    }
}

/// Decode one JSON document (Python `json.loads` semantics).
///
/// Numbers: an integer literal is an exact [`Value::Int`] when it fits an
/// `i64` (so integers beyond 2^53 keep every digit, as Python's do). One
/// beyond `i64` becomes the nearest `f64`, which is what Python makes of it
/// as soon as it meets a float, and orders exactly as Python's int does
/// against every number a rule file writes (all far inside `i64`); its
/// `str()` differs (`1.8446744073709552e+19` for `18446744073709551617`),
/// which only shows in messages. One too large for any `f64` (a 400-digit
/// integer) becomes ±infinity: the same order and equality against every
/// finite number as Python's exact int; Python would raise `OverflowError`
/// where it mixes it with a float (see [`parse_object`] for `time_ms`,
/// where that is the official parser's crash). A literal of more than
/// [`INT_MAX_STR_DIGITS`] digits is an error, as in Python. `NaN`,
/// `Infinity` and `-Infinity` are the IEEE values, as Python's `float`s.
pub fn parse(doc: &[u8]) -> Result<Value, JsonError> {
    parse_object(doc).map(|(v, _)| v)
}

/// [`parse`], and the names of the top-level object's members whose value
/// is an integer literal too large for an `f64` (read as ±infinity).
/// Python keeps such an integer exact and raises `OverflowError` when the
/// official parser calls `float()` on it: the caller tells that apart from
/// `1e400`, which is a float infinity in Python too.
pub fn parse_object(doc: &[u8]) -> Result<(Value, Vec<String>), JsonError> {
    let mut p = Parser {
        doc,
        pos: 0,
        huge_int: false,
        huge_members: Vec::new(),
    };
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != doc.len() {
        return Err(JsonError::at(doc, "Extra data", p.pos));
    }
    Ok((v, p.huge_members))
}

struct Parser<'a> {
    doc: &'a [u8],
    pos: usize,
    /// The last number read was an integer literal too large for an `f64`.
    huge_int: bool,
    /// Top-level members whose (last) value is such an integer.
    huge_members: Vec<String>,
}

impl<'a> Parser<'a> {
    fn err(&self, message: impl Into<std::borrow::Cow<'static, str>>, pos: usize) -> JsonError {
        JsonError::at(self.doc, message, pos)
    }

    fn peek(&self) -> Option<u8> {
        self.doc.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn starts_with(&self, lit: &[u8]) -> bool {
        self.doc[self.pos..].starts_with(lit)
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek() {
            Some(b'"') => {
                let start = self.pos;
                self.pos += 1;
                self.string(start).map(Value::Str)
            }
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("Nesting too deep", self.pos));
                }
                self.pos += 1;
                self.object(depth + 1)
            }
            Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("Nesting too deep", self.pos));
                }
                self.pos += 1;
                self.array(depth + 1)
            }
            Some(b'n') if self.starts_with(b"null") => {
                self.pos += 4;
                Ok(Value::None)
            }
            Some(b't') if self.starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Bool(true))
            }
            Some(b'f') if self.starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Bool(false))
            }
            Some(b'N') if self.starts_with(b"NaN") => {
                self.pos += 3;
                Ok(Value::Float(f64::NAN))
            }
            Some(b'I') if self.starts_with(b"Infinity") => {
                self.pos += 8;
                Ok(Value::Float(f64::INFINITY))
            }
            Some(b'-') if self.starts_with(b"-Infinity") => {
                self.pos += 9;
                Ok(Value::Float(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("Expecting value", self.pos)),
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let d = self.doc;
        let mut i = self.pos;
        if d.get(i) == Some(&b'-') {
            i += 1;
        }
        match d.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = d.get(i) {
                    i += 1;
                }
            }
            _ => return Err(self.err("Expecting value", start)),
        }
        let mut is_float = false;
        if d.get(i) == Some(&b'.') && matches!(d.get(i + 1), Some(b'0'..=b'9')) {
            is_float = true;
            i += 1;
            while let Some(b'0'..=b'9') = d.get(i) {
                i += 1;
            }
        }
        if let Some(b'e' | b'E') = d.get(i) {
            let mut j = i + 1;
            if let Some(b'+' | b'-') = d.get(j) {
                j += 1;
            }
            if matches!(d.get(j), Some(b'0'..=b'9')) {
                while let Some(b'0'..=b'9') = d.get(j) {
                    j += 1;
                }
                is_float = true;
                i = j;
            }
        }
        // The slice is ASCII digits, sign, '.', 'e': valid UTF-8.
        let text = std::str::from_utf8(&d[start..i]).expect("ASCII number");
        if !is_float {
            if let Ok(n) = text.parse::<i64>() {
                self.pos = i;
                return Ok(Value::Int(n));
            }
            let digits = text.trim_start_matches('-').len();
            if digits > INT_MAX_STR_DIGITS {
                return Err(self.err(
                    format!(
                        "Exceeds the limit ({INT_MAX_STR_DIGITS} digits) for integer string conversion: value has {digits} digits"
                    ),
                    start,
                ));
            }
        }
        self.pos = i;
        let f = text.parse::<f64>().expect("valid JSON number");
        self.huge_int = !is_float && f.is_infinite();
        Ok(Value::Float(f))
    }

    /// Parse a string body; `self.pos` is just after the opening quote.
    fn string(&mut self, start: usize) -> Result<String, JsonError> {
        let d = self.doc;
        let mut out = String::new();
        loop {
            // Copy the run of ordinary characters.
            let run_start = self.pos;
            while let Some(&b) = d.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            push_latin1(&mut out, &d[run_start..self.pos]);
            match d.get(self.pos) {
                None => return Err(self.err("Unterminated string starting at", start)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let esc_pos = self.pos;
                    self.pos += 1;
                    let Some(&c) = d.get(self.pos) else {
                        return Err(self.err("Unterminated string starting at", start));
                    };
                    self.pos += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4(esc_pos)?;
                            let ch = if (0xd800..0xdc00).contains(&hi)
                                && d.get(self.pos) == Some(&b'\\')
                                && d.get(self.pos + 1) == Some(&b'u')
                            {
                                let save = self.pos;
                                self.pos += 2;
                                let lo = self.hex4(save)?;
                                if (0xdc00..0xe000).contains(&lo) {
                                    char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                                } else {
                                    // Not a pair: decode the first alone, re-read the second.
                                    self.pos = save;
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            // Lone surrogates are legal in Python strings but not in
                            // Rust ones; they become U+FFFD.
                            out.push(ch.unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(self.err("Invalid \\escape", esc_pos)),
                    }
                }
                Some(_) => return Err(self.err("Invalid control character at", self.pos)),
            }
        }
    }

    fn hex4(&mut self, esc_pos: usize) -> Result<u32, JsonError> {
        let d = self.doc;
        let digits = d.get(self.pos..self.pos + 4);
        let parsed = digits
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match parsed {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => Err(self.err("Invalid \\uXXXX escape", esc_pos + 1)),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        let mut map = Dict::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Dict(map));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.err(
                    "Expecting property name enclosed in double quotes",
                    self.pos,
                ));
            }
            let start = self.pos;
            self.pos += 1;
            let key = self.string(start)?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.err("Expecting ':' delimiter", self.pos));
            }
            self.pos += 1;
            self.skip_ws();
            self.huge_int = false;
            let v = self.value(depth)?;
            if depth == 1 {
                // A number member of the top-level object (a container's
                // numbers do not count: its value is not a float).
                let huge = self.huge_int && matches!(v, Value::Float(_));
                self.huge_members.retain(|m| *m != key);
                if huge {
                    self.huge_members.push(key.clone());
                }
            }
            // Last one wins; IndexMap keeps the first position, like a dict.
            map.insert(key, v);
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Dict(map));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                _ => return Err(self.err("Expecting ',' delimiter", self.pos)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::List(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::List(items));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                _ => return Err(self.err("Expecting ',' delimiter", self.pos)),
            }
        }
    }
}

/// Append Latin-1 bytes as characters.
pub fn push_latin1(out: &mut String, bytes: &[u8]) {
    if bytes.is_ascii() {
        // SAFETY: ASCII is valid UTF-8 (checked just above).
        out.push_str(unsafe { std::str::from_utf8_unchecked(bytes) });
    } else {
        out.extend(bytes.iter().map(|&b| b as char));
    }
}

/// Decode Latin-1 bytes to a `String`.
pub fn latin1(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    push_latin1(&mut s, bytes);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(doc: &str) -> String {
        parse(doc.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn accepts_python_extensions() {
        let v = parse(br#" {"a": NaN, "b": Infinity, "c": -Infinity} "#).unwrap();
        assert!(v.get("a").unwrap().as_f64().unwrap().is_nan());
        assert_eq!(v.get("b").unwrap().as_f64(), Some(f64::INFINITY));
        assert_eq!(v.get("c").unwrap().as_f64(), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn duplicate_keys_last_wins_first_position() {
        let v = parse(br#"{"key": "a", "x": 1, "key": "b"}"#).unwrap();
        let d = v.as_dict().unwrap();
        assert_eq!(d.get("key").unwrap().as_str(), Some("b"));
        assert_eq!(d.keys().next().unwrap(), "key");
    }

    #[test]
    fn numbers_keep_int_float_distinction() {
        assert!(matches!(parse(b"16").unwrap(), Value::Int(16)));
        assert!(matches!(parse(b"16.0").unwrap(), Value::Float(f) if f == 16.0));
        assert!(matches!(parse(b"1e-05").unwrap(), Value::Float(f) if f == 1e-5));
        assert!(matches!(parse(b"-0").unwrap(), Value::Int(0)));
        // Beyond i64: Python keeps an exact int; referee falls back to a float.
        assert!(matches!(
            parse(b"123456789012345678901234").unwrap(),
            Value::Float(_)
        ));
    }

    #[test]
    fn python_error_messages() {
        assert_eq!(
            err(r#"{"namespace": "", "time_ms": 1,"#),
            "Expecting property name enclosed in double quotes: line 1 column 32 (char 31)"
        );
        assert_eq!(
            err(r#"{"a": 1} x"#),
            "Extra data: line 1 column 10 (char 9)"
        );
        assert_eq!(
            err(r#"{"a" 1}"#),
            "Expecting ':' delimiter: line 1 column 6 (char 5)"
        );
        assert_eq!(
            err(r#"{"a": 1 "b": 2}"#),
            "Expecting ',' delimiter: line 1 column 9 (char 8)"
        );
        assert_eq!(err(""), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(err("[1, ]"), "Expecting value: line 1 column 5 (char 4)");
        assert_eq!(
            err(r#""abc"#),
            "Unterminated string starting at: line 1 column 1 (char 0)"
        );
        assert_eq!(
            err("\"a\tb\""),
            "Invalid control character at: line 1 column 3 (char 2)"
        );
        assert_eq!(err(r#""\q""#), "Invalid \\escape: line 1 column 2 (char 1)");
        assert_eq!(err("1."), "Extra data: line 1 column 2 (char 1)");
        assert_eq!(err("01"), "Extra data: line 1 column 2 (char 1)");
    }

    #[test]
    fn escapes_and_latin1() {
        let v = parse(b"\"a\\u00e9\\n\\ud83d\\ude00\xe9\"").unwrap();
        assert_eq!(v.as_str(), Some("a\u{e9}\n\u{1f600}\u{e9}"));
        let lone = parse(br#""\ud800x""#).unwrap();
        assert_eq!(lone.as_str(), Some("\u{fffd}x"));
    }

    #[test]
    fn integers_beyond_2_53_keep_every_digit_within_i64() {
        // 2^53 + 1 has no f64; Python's int and referee's Int hold it.
        assert!(matches!(
            parse(b"9007199254740993").unwrap(),
            Value::Int(9_007_199_254_740_993)
        ));
        assert!(matches!(
            parse(b"9223372036854775807").unwrap(),
            Value::Int(i64::MAX)
        ));
        assert!(matches!(
            parse(b"-9223372036854775808").unwrap(),
            Value::Int(i64::MIN)
        ));
        // A float literal is a float, as in Python (rounded to even).
        assert!(
            matches!(parse(b"9007199254740993.0").unwrap(), Value::Float(f) if f == 9_007_199_254_740_992.0)
        );
    }

    #[test]
    fn integers_beyond_i64_are_the_nearest_float() {
        // Python: float(2**64 + 1) == 1.8446744073709552e+19.
        assert!(
            matches!(parse(b"18446744073709551617").unwrap(), Value::Float(f) if f == 18_446_744_073_709_551_616.0)
        );
        assert!(
            matches!(parse(b"-9223372036854775809").unwrap(), Value::Float(f) if f == -9_223_372_036_854_775_808.0)
        );
    }

    #[test]
    fn an_integer_too_large_for_a_float_is_infinite_and_noted_at_the_top_level() {
        let big = format!("1{}", "7".repeat(399));
        let doc = format!(r#"{{"time_ms": {big}, "value": -{big}, "list": [{big}], "f": 1e400}}"#);
        let (v, huge) = parse_object(doc.as_bytes()).unwrap();
        assert_eq!(v.get("time_ms").unwrap().as_f64(), Some(f64::INFINITY));
        assert_eq!(v.get("value").unwrap().as_f64(), Some(f64::NEG_INFINITY));
        // Only numbers that are members of the top-level object; 1e400 is
        // a float literal (infinite in Python too).
        assert_eq!(huge, ["time_ms", "value"]);
        // The last of repeated members counts.
        let doc = format!(r#"{{"time_ms": {big}, "time_ms": 5}}"#);
        assert!(parse_object(doc.as_bytes()).unwrap().1.is_empty());
        let doc = format!(r#"{{"time_ms": 5, "time_ms": {big}}}"#);
        assert_eq!(parse_object(doc.as_bytes()).unwrap().1, ["time_ms"]);
    }

    #[test]
    fn integers_past_pythons_digit_limit_are_an_error() {
        let ok = format!("-{}", "9".repeat(INT_MAX_STR_DIGITS));
        assert!(matches!(parse(ok.as_bytes()).unwrap(), Value::Float(f) if f == f64::NEG_INFINITY));
        let over = format!("[1, -{}]", "9".repeat(INT_MAX_STR_DIGITS + 1));
        assert_eq!(
            err(&over),
            "Exceeds the limit (4300 digits) for integer string conversion: value has 4301 digits: line 1 column 5 (char 4)"
        );
        // Python's float() has no such limit.
        let float = format!("{}.5", "9".repeat(5000));
        assert!(parse(float.as_bytes()).is_ok());
        let float = format!("{}e0", "9".repeat(5000));
        assert!(parse(float.as_bytes()).is_ok());
    }

    #[test]
    fn the_skimmer_leaves_integers_beyond_i64_to_the_full_decoder() {
        let line = |time: &str, value: &str| {
            format!(r#"{{"time_ms": {time}, "key": "k", "value": {value}, "metadata": {{}}}}"#)
        };
        let s = line("9007199254740993", "1");
        let skim = skim_record(s.as_bytes()).unwrap();
        assert_eq!(skim.time_ms, 9_007_199_254_740_992.0);
        for (t, v) in [
            (format!("1{}", "0".repeat(399)), "1".to_string()),
            ("18446744073709551617".to_string(), "1".to_string()),
            ("1".to_string(), "9".repeat(INT_MAX_STR_DIGITS + 1)),
        ] {
            assert_eq!(skim_record(line(&t, &v).as_bytes()), None, "{t} {v}");
        }
        // 4300 digits (a valid value no rule reads) are still skimmed.
        assert!(skim_record(line("1", &"9".repeat(INT_MAX_STR_DIGITS)).as_bytes()).is_some());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let doc = "[".repeat(10_000);
        assert!(err(&doc).starts_with("Nesting too deep"));
    }
}

/// What [`skim_record`] reads of an MLLOG object without building it.
#[derive(Debug, Clone, PartialEq)]
pub struct Skim<'a> {
    /// The last top-level `key` member, when it is a plain string.
    pub key: &'a str,
    /// The last top-level `time_ms` member, as the full decoder's value
    /// converts to milliseconds.
    pub time_ms: f64,
}

/// Read a document known to be in the plain subset of JSON that Python's
/// `json.loads` accepts: an object whose members `time_ms` (a number),
/// `key` (a string without escapes), `value` and `metadata` are present,
/// every value valid JSON (escapes, numbers, `NaN`/`Infinity` literals,
/// nesting up to [`MAX_DEPTH`]), member names without escapes. Repeated
/// members: the last wins, as in [`parse`].
///
/// `None` for anything else, including every document [`parse`] rejects:
/// the caller then decodes the document in full, which gives the verdict
/// and the error message. So for a document this accepts, [`parse`] gives
/// an object with the same `key` and `time_ms`; it is much cheaper, for
/// the lines whose value no rule reads.
pub fn skim_record(doc: &[u8]) -> Option<Skim<'_>> {
    let mut s = Skimmer { d: doc, i: 0 };
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    s.i += 1;
    let (mut key, mut time_ms) = (None, None);
    let (mut has_value, mut has_metadata) = (false, false);
    s.ws();
    if s.peek()? == b'}' {
        return None;
    }
    loop {
        let name = s.plain_string()?;
        s.ws();
        if s.peek()? != b':' {
            return None;
        }
        s.i += 1;
        s.ws();
        match name {
            b"key" => key = Some(s.plain_string()?),
            b"time_ms" => time_ms = Some(s.number()?),
            _ => {
                has_value |= name == b"value";
                has_metadata |= name == b"metadata";
                s.value()?;
            }
        }
        s.ws();
        match s.peek()? {
            b',' => {
                s.i += 1;
                s.ws();
            }
            b'}' => {
                s.i += 1;
                break;
            }
            _ => return None,
        }
    }
    s.ws();
    if s.i != doc.len() || !has_value || !has_metadata {
        return None;
    }
    Some(Skim {
        // SAFETY: a plain string's body is ASCII (see `NOT_PLAIN`).
        key: unsafe { std::str::from_utf8_unchecked(key?) },
        time_ms: time_ms?,
    })
}

/// Bytes that end the body of a plain string (a quote, a backslash, a
/// control character, anything not ASCII).
static NOT_PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b < 0x20 || b >= 0x80 || b == b'"' as usize || b == b'\\' as usize;
        b += 1;
    }
    t
};

/// Bytes that stop a scan through a string (its end, an escape, a control
/// character, which JSON does not allow unescaped).
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b < 0x20 || b == b'"' as usize || b == b'\\' as usize;
        b += 1;
    }
    t
};

/// Containers the skimmer follows (deeper values go to the full decoder).
const SKIM_DEPTH: u32 = 64;

/// The open containers of a value being skimmed, as bits (1: an object).
#[derive(Default)]
struct Containers {
    bits: u64,
    depth: u32,
}

impl Containers {
    fn push(&mut self, object: bool) {
        self.bits = (self.bits << 1) | object as u64;
        self.depth += 1;
    }
    fn pop(&mut self) {
        self.bits >>= 1;
        self.depth -= 1;
    }
    /// The innermost open container: is it an object?
    fn last(&self) -> Option<bool> {
        (self.depth > 0).then_some(self.bits & 1 == 1)
    }
}

/// A validating scanner that builds nothing (see [`skim_record`]).
struct Skimmer<'a> {
    d: &'a [u8],
    i: usize,
}

impl<'a> Skimmer<'a> {
    fn peek(&self) -> Option<u8> {
        self.d.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Index of the first byte at or after `from` that `table` marks.
    fn find(&self, from: usize, table: &[bool; 256]) -> Option<usize> {
        // Strings in MLLOG lines are short: a table lookup per byte beats
        // setting up a vector search for each of them.
        self.d[from..]
            .iter()
            .position(|&b| table[b as usize])
            .map(|n| from + n)
    }

    /// A string without escapes, of ASCII characters: its body.
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let end = self.find(start, &NOT_PLAIN)?;
        if self.d[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        Some(&self.d[start..end])
    }

    /// Any valid string (escapes checked, Latin-1 bytes allowed).
    fn string(&mut self) -> Option<()> {
        self.i += 1; // the opening quote
        loop {
            let at = self.find(self.i, &STRING_STOP)?;
            let stop = self.d[at];
            self.i = at + 1;
            if stop == b'"' {
                return Some(());
            }
            if stop != b'\\' {
                return None; // a control character
            }
            match self.peek()? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                b'u' => {
                    let hex = self.d.get(self.i + 1..self.i + 5)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.i += 5;
                }
                _ => return None,
            }
        }
    }

    /// A number in JSON's grammar (what [`parse`] reads whole); its value
    /// as the full decoder gives it (an integer when it is one and fits).
    fn number(&mut self) -> Option<f64> {
        let start = self.i;
        let float = self.number_text()?;
        // SAFETY: the grammar admits only ASCII digits, signs, `.`, `e`, `E`.
        let text = unsafe { std::str::from_utf8_unchecked(&self.d[start..self.i]) };
        if float {
            return text.parse::<f64>().ok();
        }
        // An integer beyond i64 (too many digits, too large for a float)
        // is left to the full decoder.
        text.parse::<i64>().ok().map(|n| n as f64)
    }

    /// Past a number in JSON's grammar (any such text reads as an f64, so
    /// a value no one reads is not converted); whether it has a fraction
    /// or an exponent.
    fn number_text(&mut self) -> Option<bool> {
        let d = self.d;
        let start = self.i;
        let mut i = start;
        if d.get(i) == Some(&b'-') {
            i += 1;
        }
        match d.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = d.get(i) {
                    i += 1;
                }
            }
            _ => return None,
        }
        let int_digits = i - start - (d[start] == b'-') as usize;
        let mut float = false;
        if d.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(d.get(i), Some(b'0'..=b'9')) {
                return None;
            }
            while let Some(b'0'..=b'9') = d.get(i) {
                i += 1;
            }
            float = true;
        }
        if let Some(b'e' | b'E') = d.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = d.get(i) {
                i += 1;
            }
            if !matches!(d.get(i), Some(b'0'..=b'9')) {
                return None;
            }
            while let Some(b'0'..=b'9') = d.get(i) {
                i += 1;
            }
            float = true;
        }
        if !float && int_digits > INT_MAX_STR_DIGITS {
            return None; // an error for the full decoder
        }
        self.i = i;
        Some(float)
    }

    /// Any JSON value, arrays and objects included (iteratively; a value
    /// nested deeper than [`SKIM_DEPTH`] is left to the full decoder).
    fn value(&mut self) -> Option<()> {
        // Open containers, innermost in the low bit: 1 for an object (its
        // members need names).
        let mut open = Containers::default();
        loop {
            // A value.
            match self.peek()? {
                b'"' => self.string()?,
                b'{' | b'[' => {
                    let object = self.peek()? == b'{';
                    if open.depth == SKIM_DEPTH {
                        return None;
                    }
                    self.i += 1;
                    self.ws();
                    let close = if object { b'}' } else { b']' };
                    if self.peek()? == close {
                        self.i += 1;
                    } else {
                        open.push(object);
                        if object {
                            self.member_name()?;
                        }
                        continue;
                    }
                }
                b'n' => self.literal(b"null")?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'N' => self.literal(b"NaN")?,
                b'I' => self.literal(b"Infinity")?,
                b'-' if self.d[self.i..].starts_with(b"-Infinity") => self.i += 9,
                b'-' | b'0'..=b'9' => {
                    self.number_text()?;
                }
                _ => return None,
            }
            // After a value: the next item, or the end of containers.
            loop {
                let Some(object) = open.last() else {
                    return Some(());
                };
                self.ws();
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        self.ws();
                        if object {
                            self.member_name()?;
                        }
                        break;
                    }
                    b'}' if object => {
                        self.i += 1;
                        open.pop();
                    }
                    b']' if !object => {
                        self.i += 1;
                        open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// `"name"` `:` inside an object, up to the member's value.
    fn member_name(&mut self) -> Option<()> {
        if self.peek()? != b'"' {
            return None;
        }
        self.string()?;
        self.ws();
        if self.peek()? != b':' {
            return None;
        }
        self.i += 1;
        self.ws();
        Some(())
    }

    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        if !self.d[self.i..].starts_with(lit) {
            return None;
        }
        self.i += lit.len();
        Some(())
    }
}
