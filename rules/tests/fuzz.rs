//! Property-based fuzzing of the reader, the JSON decoder and the
//! interpreter: arbitrary input never panics, and structure is preserved.

use proptest::prelude::*;
use referee_rules::json;
use referee_rules::mllog;
use referee_rules::py;
use referee_rules::value::{Dict, Value, py_eq};

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::None),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<f64>().prop_map(Value::Float),
        "[ -~é\\\\\"\n\t]{0,12}".prop_map(Value::Str),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::List),
            prop::collection::vec(("[a-z_]{1,6}", inner), 0..5).prop_map(|kv| {
                let mut d = Dict::new();
                for (k, v) in kv {
                    d.insert(k, v);
                }
                Value::Dict(d)
            }),
        ]
    })
}

/// NaN != NaN in Python too; compare structurally with NaN equal to itself.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) if x.is_nan() && y.is_nan() => true,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => py_eq(a, b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn json_round_trips(v in arb_value()) {
        let text = v.json_compact();
        let back = json::parse(text.as_bytes()).expect("our own encoding decodes");
        prop_assert!(same(&v, &back), "{text}");
    }

    #[test]
    fn json_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = json::parse(&bytes);
    }

    #[test]
    fn reader_never_panics_and_counts_lines(chunks in prop::collection::vec(
        prop_oneof![
            Just(b":::MLLOG ".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(br#"{"time_ms": 1, "key": "k", "value": 1, "metadata": {}}"#.to_vec()),
            prop::collection::vec(any::<u8>(), 0..20),
        ],
        0..30,
    )) {
        let bytes: Vec<u8> = chunks.concat();
        let log = mllog::read_from(&bytes[..]).unwrap();
        // Physical lines: every terminator ends one, plus a final partial line.
        let mut expected = 0usize;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => { expected += 1; i += 2; continue; }
                b'\r' | b'\n' => expected += 1,
                _ => {}
            }
            i += 1;
        }
        if !bytes.is_empty() && !matches!(bytes.last(), Some(b'\n') | Some(b'\r')) {
            expected += 1;
        }
        prop_assert_eq!(log.lines, expected);
        prop_assert_eq!(log.mllog_lines, log.records.len() + log.problems.len());
        for r in &log.records {
            prop_assert!(r.line >= 1 && r.line <= log.lines);
        }
    }

    #[test]
    fn compiler_never_panics(src in "[ -~\n]{0,60}") {
        let _ = py::compile_expr(&src);
        let _ = py::compile_exec(&src);
    }

    #[test]
    fn evaluator_never_panics(src in expr_source()) {
        if let Ok(e) = py::compile_expr(&src) {
            let mut s = Dict::new();
            s.insert("a".into(), Value::Int(3));
            s.insert("b".into(), Value::Float(0.5));
            s.insert("t".into(), Value::Str("x".into()));
            let _ = py::eval_value(&e, &Value::Dict(s), None, &py::Effects::default());
        }
    }
}

/// Random expressions over the subset's grammar.
fn expr_source() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("s['a']".to_string()),
        Just("s['b']".to_string()),
        Just("s['t']".to_string()),
        Just("s['missing']".to_string()),
        Just("None".to_string()),
        Just("True".to_string()),
        (-5i64..5).prop_map(|i| i.to_string()),
        Just("0.0".to_string()),
        Just("1e308".to_string()),
        Just("'q'".to_string()),
        Just("[1, 'a']".to_string()),
        Just("{'k': 1}".to_string()),
    ];
    atom.prop_recursive(5, 40, 3, |inner| {
        let bin = prop_oneof![
            Just("+"),
            Just("-"),
            Just("*"),
            Just("/"),
            Just("//"),
            Just("%"),
            Just("**"),
            Just("|"),
            Just("&"),
            Just("^"),
            Just("<<"),
            Just(">>"),
            Just("=="),
            Just("<"),
            Just(">="),
            Just("in"),
            Just("not in"),
            Just("and"),
            Just("or"),
            Just("is not"),
        ];
        let call = prop_oneof![
            Just("abs"),
            Just("int"),
            Just("float"),
            Just("len"),
            Just("round"),
            Just("str"),
            Just("is_integer"),
            Just("math.ceil"),
            Just("math.log2"),
            Just("math.sqrt"),
        ];
        prop_oneof![
            (inner.clone(), bin, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (call, inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| format!("({a} if {b} else {c})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("min({a}, {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}[{b}]")),
            inner.prop_map(|a| format!("not {a}")),
        ]
    })
}

/// Fragments that make MLLOG-like objects, valid and broken.
fn arb_record_text() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        arb_value().prop_map(|v| v.json_compact()),
        Just("NaN".to_string()),
        Just("-Infinity".to_string()),
        Just("1.".to_string()),
        Just("01".to_string()),
        Just("1e".to_string()),
        Just("\"a\\x\"".to_string()),
        Just("\"\\u00e9\\ud800\"".to_string()),
        Just("\"tab\there\"".to_string()),
        Just("[1, {\"k\": [2, 3]}, \"s\"]".to_string()),
        Just("{\"a\": }".to_string()),
        Just("[1 2]".to_string()),
        Just("\"\u{e9}\"".to_string()),
    ];
    let name = prop_oneof![
        Just("time_ms"),
        Just("key"),
        Just("value"),
        Just("metadata"),
        Just("namespace"),
        Just("k\\u0065y"),
    ];
    let member = (
        name,
        value,
        prop_oneof![Just(": "), Just(":"), Just(" :\t")],
    )
        .prop_map(|(n, v, sep)| format!("\"{n}\"{sep}{v}"));
    (
        prop::collection::vec(member, 0..7),
        prop_oneof![Just(", "), Just(","), Just(" ,")],
        prop_oneof![Just(""), Just(" "), Just("x"), Just("}")],
    )
        .prop_map(|(members, sep, tail)| format!("{{{}}}{tail}", members.join(sep)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, .. ProptestConfig::default() })]

    /// The skim is only a shortcut: a document it reads is one the full
    /// decoder accepts as an object with the same `key` and `time_ms`.
    #[test]
    fn skim_agrees_with_the_full_decoder(text in arb_record_text()) {
        if let Some(skim) = json::skim_record(text.as_bytes()) {
            let full = json::parse(text.as_bytes());
            let Ok(Value::Dict(d)) = full else {
                return Err(TestCaseError::fail(format!("skim read {text:?}; full: {full:?}")));
            };
            prop_assert!(matches!(d.get("key"), Some(Value::Str(k)) if k == skim.key), "{}", text);
            let t = match d.get("time_ms") {
                Some(Value::Int(i)) => *i as f64,
                Some(Value::Float(f)) => *f,
                other => return Err(TestCaseError::fail(format!("{text:?}: time_ms {other:?}"))),
            };
            prop_assert!(t == skim.time_ms || (t.is_nan() && skim.time_ms.is_nan()), "{}", text);
            prop_assert!(d.contains_key("value") && d.contains_key("metadata"), "{}", text);
        }
    }
}

#[test]
fn skim_reads_plain_lines_and_leaves_the_rest_to_the_decoder() {
    let line = r#"{"namespace": "", "time_ms": 1746108563514, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": 2.05, "x": [NaN, -Infinity, "\u00e9\n"]}, "metadata": {"file": "a.py", "lineno": 195, "step": 1920}}"#;
    let s = json::skim_record(line.as_bytes()).unwrap();
    assert_eq!((s.key, s.time_ms), ("tracked_stats", 1746108563514.0));
    // The last of repeated members wins, as in the full decoder.
    let dup =
        r#"{"time_ms": 1, "key": "a", "value": 1, "metadata": {}, "time_ms": 2.5, "key": "b"}"#;
    let s = json::skim_record(dup.as_bytes()).unwrap();
    assert_eq!((s.key, s.time_ms), ("b", 2.5));
    for other in [
        r#"{"time_ms": "1", "key": "a", "value": 1, "metadata": {}}"#, // a string time
        r#"{"time_ms": 1, "key": "\u0061", "value": 1, "metadata": {}}"#, // an escaped key
        r#"{"time_ms": 1, "key": "a", "value": 1}"#,                   // no metadata
        r#"{"time_ms": 1, "key": "a", "value": [1 2], "metadata": {}}"#, // invalid
        r#"{"time_ms": 1, "key": "a", "value": 1, "metadata": {}} x"#, // extra data
        r#"[{"time_ms": 1}]"#,
        "{\"time_ms\": 1, \"key\": \"a\", \"value\": \"tab\there\", \"metadata\": {}}", // a raw control character
        "{\"time_ms\": 1, \"k\u{e9}y\": 2, \"key\": \"a\", \"value\": 1, \"metadata\": {}}", // a name not plain ASCII
        "{\"time_ms\": 1, \"key\": \"\u{e9}\", \"value\": 1, \"metadata\": {}}", // a key not plain ASCII
    ] {
        assert_eq!(json::skim_record(other.as_bytes()), None, "{other}");
    }
    // Nesting: followed to 64 containers, deeper left to the decoder
    // (which reads both).
    let nested = |depth: usize| {
        let (open, close): (String, String) = (0..depth)
            .map(|i| {
                if i % 2 == 0 {
                    ("[", "]")
                } else {
                    ("{\"a\": ", "}")
                }
            })
            .unzip();
        let close: String = close.chars().rev().collect();
        format!("{{\"time_ms\": 1, \"key\": \"a\", \"value\": {open}1{close}, \"metadata\": {{}}}}")
    };
    assert!(json::skim_record(nested(64).as_bytes()).is_some());
    for depth in [64, 65, 100] {
        let doc = nested(depth);
        assert!(
            matches!(json::parse(doc.as_bytes()), Ok(Value::Dict(_))),
            "{depth}"
        );
    }
    assert_eq!(json::skim_record(nested(65).as_bytes()), None);
}
