//! Dynamically typed values with Python semantics.
//!
//! MLLOG values are JSON, and the official rule files inspect them with Python
//! expressions. Verdicts depend on Python's value semantics (`True == 1`,
//! `16 == 16.0`, `"0.95" != 0.95`, ordering a string against a number raises),
//! so this module reproduces them: equality, ordering, truthiness, `str()`,
//! `repr()` and `json.dumps(sort_keys=True, indent=2)`.
//!
//! Deliberate difference: Python integers are unbounded; here they are `i64`
//! and an arithmetic overflow promotes the result to a float. No rule file of
//! the supported rulesets computes with integers near that bound. How a
//! logged integer beyond `i64` (or beyond any `f64`) is read, and where that
//! differs from Python, is documented at [`crate::json::parse`].

use indexmap::IndexMap;
use std::cmp::Ordering;
use std::fmt::Write as _;

/// A JSON object / Python dict with string keys, in insertion order.
pub type Dict = IndexMap<String, Value>;

/// A Python value as produced by JSON decoding or by rule-file expressions.
#[derive(Clone, Debug, Default)]
pub enum Value {
    #[default]
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    /// A tuple literal; behaves like a list except in `str()`.
    Tuple(Vec<Value>),
    /// A set literal (membership only).
    Set(Vec<Value>),
    Dict(Dict),
}

/// The Python type name of a value, as used in error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::None => "NoneType",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::List(_) => "list",
        Value::Tuple(_) => "tuple",
        Value::Set(_) => "set",
        Value::Dict(_) => "dict",
    }
}

/// A number view of a value: bools and ints are integers, floats are floats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    I(i64),
    F(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    /// The numeric view (bool, int, float), or `None` for other types.
    pub fn as_num(&self) -> Option<Num> {
        match self {
            Value::Bool(b) => Some(Num::I(*b as i64)),
            Value::Int(i) => Some(Num::I(*i)),
            Value::Float(f) => Some(Num::F(*f)),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        self.as_num().map(Num::as_f64)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_dict(&self) -> Option<&Dict> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// `d[key]` for a dict with a string key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_dict().and_then(|d| d.get(key))
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Value::None => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) | Value::Tuple(l) | Value::Set(l) => !l.is_empty(),
            Value::Dict(d) => !d.is_empty(),
        }
    }

    /// Python `str(value)`.
    pub fn py_str(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            other => other.py_repr(),
        }
    }

    /// Python `repr(value)`.
    pub fn py_repr(&self) -> String {
        let mut out = String::new();
        write_repr(&mut out, self);
        out
    }

    /// Python `json.dumps(value, sort_keys=True, indent=2)`.
    pub fn json_pretty(&self) -> String {
        let mut out = String::new();
        write_json(&mut out, self, Some(2), 0, true);
        out
    }

    /// Python `json.dumps(value)` (one line, `", "` and `": "` separators,
    /// insertion order): the encoding the MLLOG writer uses.
    pub fn json_compact(&self) -> String {
        let mut out = String::new();
        write_json(&mut out, self, None, 0, false);
        out
    }
}

/// Python `==`. Numbers compare by value across bool/int/float; containers
/// compare element-wise; values of unrelated types are unequal.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        return num_cmp(x, y) == Some(Ordering::Equal);
    }
    match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Set(x), Value::Set(y)) => {
            x.len() == y.len() && x.iter().all(|p| y.iter().any(|q| py_eq(p, q)))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => false,
    }
}

/// Exact comparison of two numbers (Python compares int and float exactly).
/// `None` when a NaN is involved (every ordering test is then false).
pub fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (Num::I(i), Num::F(f)) => int_float_cmp(i, f),
        (Num::F(f), Num::I(i)) => int_float_cmp(i, f).map(Ordering::reverse),
    }
}

fn int_float_cmp(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    if f.is_infinite() {
        return Some(if f > 0.0 {
            Ordering::Less
        } else {
            Ordering::Greater
        });
    }
    // Every i64 is within f64's range; compare via the float first and break
    // ties exactly using the integral part of the float.
    let fi = i as f64;
    match fi.partial_cmp(&f)? {
        Ordering::Equal => {
            // f is integral here (it equals a rounded integer) and |f| <= 2^63.
            if f >= 9_223_372_036_854_775_808.0 {
                return Some(Ordering::Less);
            }
            let fint = f as i64;
            Some(i.cmp(&fint))
        }
        o => Some(o),
    }
}

/// Errors raised by value operations, named after the Python exception.
#[derive(Clone, Debug, PartialEq)]
pub struct PyError {
    pub kind: &'static str,
    pub message: String,
}

impl PyError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        PyError {
            kind,
            message: message.into(),
        }
    }
    pub fn type_error(message: impl Into<String>) -> Self {
        Self::new("TypeError", message)
    }
}

impl std::fmt::Display for PyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Python ordering (`<` and friends). Raises `TypeError` for unrelated types
/// (e.g. `'0.95' < 1.0`, `None <= 3.3`). `Ok(None)` means "unordered" (NaN):
/// every ordering operator is then false.
pub fn py_cmp(a: &Value, b: &Value, op: &str) -> Result<Option<Ordering>, PyError> {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        return Ok(num_cmp(x, y));
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Ok(Some(x.as_str().cmp(y.as_str()))),
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            for (p, q) in x.iter().zip(y) {
                if !py_eq(p, q) {
                    return py_cmp(p, q, op);
                }
            }
            Ok(Some(x.len().cmp(&y.len())))
        }
        _ => Err(PyError::type_error(format!(
            "'{}' not supported between instances of '{}' and '{}'",
            op,
            type_name(a),
            type_name(b)
        ))),
    }
}

/// Python `needle in haystack`.
pub fn py_contains(haystack: &Value, needle: &Value) -> Result<bool, PyError> {
    match haystack {
        Value::Dict(d) => match needle {
            Value::Str(k) => Ok(d.contains_key(k.as_str())),
            Value::List(_) | Value::Dict(_) | Value::Set(_) => Err(PyError::type_error(format!(
                "unhashable type: '{}'",
                type_name(needle)
            ))),
            // Keys of JSON objects are strings: no other value can match.
            _ => Ok(false),
        },
        Value::List(l) | Value::Tuple(l) | Value::Set(l) => Ok(l.iter().any(|x| py_eq(x, needle))),
        Value::Str(s) => match needle {
            Value::Str(n) => Ok(s.contains(n.as_str())),
            _ => Err(PyError::type_error(format!(
                "'in <string>' requires string as left operand, not {}",
                type_name(needle)
            ))),
        },
        _ => Err(PyError::type_error(format!(
            "argument of type '{}' is not iterable",
            type_name(haystack)
        ))),
    }
}

/// Python's `repr()` of a float: the shortest round-trip digits, in
/// positional notation for exponents in [-4, 16), scientific otherwise.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1; // position of the decimal point relative to the digits
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            for _ in 0..(-decpt) {
                out.push('0');
            }
            out.push_str(&digits);
        } else if decpt as usize >= digits.len() {
            out.push_str(&digits);
            for _ in 0..(decpt as usize - digits.len()) {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt as usize]);
            out.push('.');
            out.push_str(&digits[decpt as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    out
}

fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (0x80..0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

fn write_repr(out: &mut String, v: &Value) {
    match v {
        Value::None => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&float_repr(*f)),
        Value::Str(s) => write_str_repr(out, s),
        Value::List(l) | Value::Tuple(l) | Value::Set(l) => {
            let (open, close) = match v {
                Value::List(_) => ('[', ']'),
                Value::Tuple(_) => ('(', ')'),
                _ => ('{', '}'),
            };
            out.push(open);
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, x);
            }
            if matches!(v, Value::Tuple(_)) && l.len() == 1 {
                out.push(',');
            }
            out.push(close);
        }
        Value::Dict(d) => {
            out.push('{');
            for (i, (k, x)) in d.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str_repr(out, k);
                out.push_str(": ");
                write_repr(out, x);
            }
            out.push('}');
        }
    }
}

/// JSON string encoding with `ensure_ascii=True`, as Python's `json` does.
pub fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_json_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        out.push_str(&float_repr(f));
    }
}

fn newline_indent(out: &mut String, indent: Option<usize>, level: usize) {
    if let Some(n) = indent {
        out.push('\n');
        for _ in 0..n * level {
            out.push(' ');
        }
    }
}

fn write_json(out: &mut String, v: &Value, indent: Option<usize>, level: usize, sort: bool) {
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v {
        Value::None => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => write_json_float(out, *f),
        Value::Str(s) => write_json_str(out, s),
        Value::List(l) | Value::Tuple(l) | Value::Set(l) => {
            if l.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline_indent(out, indent, level + 1);
                write_json(out, x, indent, level + 1, sort);
            }
            newline_indent(out, indent, level);
            out.push(']');
        }
        Value::Dict(d) => {
            if d.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            let mut entries: Vec<(&String, &Value)> = d.iter().collect();
            if sort {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline_indent(out, indent, level + 1);
                write_json_str(out, k);
                out.push_str(": ");
                write_json(out, x, indent, level + 1, sort);
            }
            newline_indent(out, indent, level);
            out.push('}');
        }
    }
}

impl From<&Value> for serde_json::Value {
    fn from(v: &Value) -> serde_json::Value {
        match v {
            Value::None => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                // JSON has no NaN/Infinity: keep Python's spelling as a string.
                .unwrap_or_else(|| {
                    let mut s = String::new();
                    write_json_float(&mut s, *f);
                    serde_json::Value::String(s)
                }),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::List(l) | Value::Tuple(l) | Value::Set(l) => {
                serde_json::Value::Array(l.iter().map(Into::into).collect())
            }
            Value::Dict(d) => {
                serde_json::Value::Object(d.iter().map(|(k, x)| (k.clone(), x.into())).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (1.0, "1.0"),
            (0.95, "0.95"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1700000000000.0, "1700000000000.0"),
            (9e99, "9e+99"),
            (-0.0, "-0.0"),
            (4e-06, "4e-06"),
            (123.456, "123.456"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.5e-7, "1.5e-07"),
            (2.5e300, "2.5e+300"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "repr({f:?})");
        }
    }

    #[test]
    fn equality_follows_python() {
        assert!(py_eq(&Value::Bool(true), &Value::Int(1)));
        assert!(py_eq(&Value::Bool(false), &Value::Float(0.0)));
        assert!(py_eq(&Value::Int(16), &Value::Float(16.0)));
        assert!(!py_eq(&Value::str("0.95"), &Value::Float(0.95)));
        assert!(!py_eq(&Value::None, &Value::Int(0)));
        assert!(!py_eq(&Value::Float(f64::NAN), &Value::Float(f64::NAN)));
        assert!(py_eq(
            &Value::List(vec![Value::Int(1), Value::str("a")]),
            &Value::List(vec![Value::Float(1.0), Value::str("a")])
        ));
    }

    #[test]
    fn int_float_comparison_is_exact() {
        // 2**53 + 1 is not representable as a float; Python still orders it.
        let big = (1i64 << 53) + 1;
        assert_eq!(
            num_cmp(Num::I(big), Num::F((1u64 << 53) as f64)),
            Some(Ordering::Greater)
        );
        assert_eq!(num_cmp(Num::I(3), Num::F(3.5)), Some(Ordering::Less));
        assert_eq!(
            num_cmp(Num::I(i64::MAX), Num::F(9.3e18)),
            Some(Ordering::Less)
        );
        assert_eq!(num_cmp(Num::I(1), Num::F(f64::NAN)), None);
    }

    #[test]
    fn ordering_unrelated_types_raises() {
        let e = py_cmp(&Value::str("0.95"), &Value::Float(1.0), "<").unwrap_err();
        assert_eq!(e.kind, "TypeError");
        assert!(e.message.contains("'str' and 'float'"), "{}", e.message);
        assert!(py_cmp(&Value::None, &Value::Float(3.3), "<=").is_err());
        assert_eq!(
            py_cmp(&Value::str("a"), &Value::str("b"), "<").unwrap(),
            Some(Ordering::Less)
        );
    }

    #[test]
    fn membership() {
        let mut d = Dict::new();
        d.insert("epoch_num".into(), Value::Int(1));
        let d = Value::Dict(d);
        assert!(py_contains(&d, &Value::str("epoch_num")).unwrap());
        assert!(!py_contains(&d, &Value::Int(1)).unwrap());
        assert!(py_contains(&Value::str("FID score"), &Value::str("FID")).unwrap());
        assert!(py_contains(&Value::None, &Value::str("x")).is_err());
        assert!(py_contains(&Value::str("abc"), &Value::Int(1)).is_err());
        let l = Value::List(vec![Value::str("closed"), Value::str("open")]);
        assert!(py_contains(&l, &Value::str("open")).unwrap());
    }

    #[test]
    fn str_and_repr() {
        assert_eq!(Value::Bool(true).py_str(), "True");
        assert_eq!(Value::None.py_str(), "None");
        assert_eq!(Value::str("llama31_8b").py_str(), "llama31_8b");
        let mut d = Dict::new();
        d.insert("a".into(), Value::Int(1));
        d.insert("b".into(), Value::str("x"));
        assert_eq!(Value::Dict(d).py_str(), "{'a': 1, 'b': 'x'}");
        assert_eq!(Value::str("it's").py_repr(), "\"it's\"");
    }

    #[test]
    fn json_pretty_matches_python_dumps() {
        let mut meta = Dict::new();
        meta.insert("lineno".into(), Value::Int(1));
        meta.insert("file".into(), Value::str("train.py"));
        let mut v = Dict::new();
        v.insert("value".into(), Value::Float(0.99));
        v.insert("metadata".into(), Value::Dict(meta));
        let got = Value::Dict(v).json_pretty();
        let want = "{\n  \"metadata\": {\n    \"file\": \"train.py\",\n    \"lineno\": 1\n  },\n  \"value\": 0.99\n}";
        assert_eq!(got, want);
        assert_eq!(Value::Dict(Dict::new()).json_pretty(), "{}");
        assert_eq!(Value::Float(f64::NAN).json_pretty(), "NaN");
        assert_eq!(Value::str("é").json_compact(), "\"\\u00e9\"");
    }

    #[test]
    fn truthiness() {
        for (v, t) in [
            (Value::None, false),
            (Value::Int(0), false),
            (Value::Float(0.0), false),
            (Value::str(""), false),
            (Value::List(vec![]), false),
            (Value::Dict(Dict::new()), false),
            (Value::Int(2), true),
            (Value::str("0"), true),
            (Value::Float(f64::NAN), true),
        ] {
            assert_eq!(v.truthy(), t, "{v:?}");
        }
    }
}
