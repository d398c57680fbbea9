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
