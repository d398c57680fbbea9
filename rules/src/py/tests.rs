//! Unit tests of each evaluator construct and the Python-semantics corner
//! cases the rule files depend on.

use super::*;
use crate::mllog::Record;
use crate::value::{Dict, Value};

fn record(value: Value, meta: &[(&str, Value)]) -> Record {
    let mut m = Dict::new();
    for (k, v) in meta {
        m.insert((*k).into(), v.clone());
    }
    let mut v = Dict::new();
    v.insert("value".into(), value);
    v.insert("metadata".into(), Value::Dict(m));
    Record {
        index: 18,
        line: 19,
        timestamp: 1_700_000_000_000.0,
        key: Some("k".into()),
        v: Value::Dict(v).into(),
        text: ":::MLLOG {}".into(),
        slim: false,
    }
}

fn state(pairs: &[(&str, Value)]) -> Value {
    let mut d = Dict::new();
    for (k, v) in pairs {
        d.insert((*k).into(), v.clone());
    }
    Value::Dict(d)
}

fn ev_with(src: &str, r: &Record, s: &Value) -> Result<Value, String> {
    let e = compile_expr(src).map_err(|e| format!("compile: {e}"))?;
    eval_value(&e, s, Some(r), &Effects::default()).map_err(|e| e.to_string())
}

fn ev(src: &str) -> Result<Value, String> {
    ev_with(
        src,
        &record(Value::Float(0.95), &[("samples_count", Value::Int(79872))]),
        &state(&[]),
    )
}

fn truth(src: &str) -> bool {
    ev(src).unwrap_or_else(|e| panic!("{src}: {e}")).truthy()
}

#[test]
fn bool_is_a_number() {
    assert!(truth("True == 1"));
    assert!(truth("False == 0"));
    assert!(truth("True + True == 2"));
    assert!(truth("16 == 16.0"));
    assert!(!truth("'0.95' == 0.95"));
    assert!(truth("'0.95' != 0.95"));
}

#[test]
fn comparing_str_with_number_raises() {
    let e = ev("'0.95' < 1.0").unwrap_err();
    assert!(
        e.starts_with("TypeError: '<' not supported between instances of 'str' and 'float'"),
        "{e}"
    );
    assert!(ev("None <= 3.3").unwrap_err().starts_with("TypeError"));
}

#[test]
fn division_and_integer_functions() {
    assert!(matches!(ev("3 / 2").unwrap(), Value::Float(f) if f == 1.5));
    assert!(matches!(ev("4 / 2").unwrap(), Value::Float(f) if f == 2.0));
    assert!(matches!(ev("7 // 2").unwrap(), Value::Int(3)));
    assert!(matches!(ev("-7 // 2").unwrap(), Value::Int(-4)));
    assert!(matches!(ev("-7 % 3").unwrap(), Value::Int(2)));
    assert!(matches!(ev("math.ceil(2.1)").unwrap(), Value::Int(3)));
    assert!(matches!(ev("math.floor(-2.1)").unwrap(), Value::Int(-3)));
    assert!(matches!(ev("int(-2.9)").unwrap(), Value::Int(-2)));
    assert!(matches!(ev("int('42')").unwrap(), Value::Int(42)));
    assert!(matches!(ev("math.log2(8)").unwrap(), Value::Float(f) if f == 3.0));
    assert!(ev("1 / 0").unwrap_err().starts_with("ZeroDivisionError"));
    assert!(ev("math.log2(0)").unwrap_err().starts_with("ValueError"));
}

#[test]
fn power_semantics() {
    assert!(matches!(ev("2 ** 10").unwrap(), Value::Int(1024)));
    assert!(matches!(ev("2 ** -1").unwrap(), Value::Float(f) if f == 0.5));
    assert!(matches!(ev("-2 ** 2").unwrap(), Value::Int(-4)));
    assert!(matches!(ev("2 ** 3 ** 2").unwrap(), Value::Int(512)));
    assert!(matches!(ev("(1024 / 256) ** 0.5").unwrap(), Value::Float(f) if f == 2.0));
    // Overflow promotes to float rather than wrapping.
    assert!(matches!(ev("10 ** 30").unwrap(), Value::Float(f) if f == 1e30));
}

#[test]
fn chained_comparisons_short_circuit() {
    assert!(truth("0.0 <= 0.5 <= 1.0"));
    assert!(!truth("0.0 <= 1.5 <= 1.0"));
    // The second comparison is never evaluated (it would raise).
    assert!(!truth("2 < 1 < 'x'"));
}

#[test]
fn bitwise_or_on_booleans_is_a_boolean() {
    assert!(matches!(
        ev("('epoch_num' in v['metadata']) | ('samples_count' in v['metadata'])").unwrap(),
        Value::Bool(true)
    ));
    assert!(matches!(ev("False | False").unwrap(), Value::Bool(false)));
    assert!(matches!(ev("True | 2").unwrap(), Value::Int(3)));
    assert!(matches!(ev("6 & 3").unwrap(), Value::Int(2)));
}

#[test]
fn membership_on_dict_list_str() {
    assert!(truth("'samples_count' in v['metadata']"));
    assert!(!truth("'epoch_num' in v['metadata']"));
    assert!(truth("'closed' in ['closed', 'open']"));
    assert!(truth("'FID' in 'FID_score'"));
    assert!(truth("'x' not in {'a': 1}"));
    assert!(truth(
        "'InitialTrainingDataloaderPT' in {'InitialTrainingDataloaderPT', 'InitialTrainingDataloaderPQ'}"
    ));
    assert!(ev("'a' in None").unwrap_err().starts_with("TypeError"));
}

#[test]
fn and_or_return_operands_and_truthiness() {
    assert!(matches!(ev("0 or 'x'").unwrap(), Value::Str(s) if s == "x"));
    assert!(matches!(ev("[] and 1").unwrap(), Value::List(l) if l.is_empty()));
    assert!(matches!(ev("1 and 2").unwrap(), Value::Int(2)));
    assert!(!truth("''"));
    assert!(!truth("{}"));
    assert!(!truth("None"));
    assert!(truth("not 0.0"));
}

#[test]
fn conditional_expression() {
    assert!(truth(
        "'first_epoch_num' in v['metadata'] if 'epoch_count' in v['metadata'] else True"
    ));
    assert!(matches!(
        ev("240 if 'open' == 'open' else 30").unwrap(),
        Value::Int(240)
    ));
}

#[test]
fn builtins_and_helpers() {
    assert!(matches!(ev("abs(-2.5)").unwrap(), Value::Float(f) if f == 2.5));
    assert!(matches!(ev("min(3, 1, 2)").unwrap(), Value::Int(1)));
    assert!(matches!(ev("max([1, 5, 2])").unwrap(), Value::Int(5)));
    assert!(matches!(ev("len('abcd')").unwrap(), Value::Int(4)));
    assert!(matches!(ev("len([1, 2])").unwrap(), Value::Int(2)));
    assert!(truth("is_integer(math.log2(0.0008 / 0.0001))"));
    assert!(!truth("is_integer(2.5)"));
    assert!(ev("is_integer('3')").unwrap_err().starts_with("TypeError"));
    assert!(ev("is_integer(None)").unwrap_err().starts_with("TypeError"));
    assert!(truth("math.isclose(1e-6, 1.0000000001e-6)"));
    assert!(matches!(ev("round(2.5)").unwrap(), Value::Int(2)));
    assert!(matches!(ev("round(3.5)").unwrap(), Value::Int(4)));
}

#[test]
fn string_methods_and_format() {
    assert!(
        matches!(ev("'training_5.0.0/{}_common.yaml'.format('closed')").unwrap(), Value::Str(s) if s == "training_5.0.0/closed_common.yaml")
    );
    assert!(
        matches!(ev("'{} {{x}} {}'.format(1, 2.0)").unwrap(), Value::Str(s) if s == "1 {x} 2.0")
    );
    assert!(matches!(ev("'{0}-{0}'.format('a')").unwrap(), Value::Str(s) if s == "a-a"));
    assert!(matches!(ev("'{:.2f}'.format(3.14159)").unwrap(), Value::Str(s) if s == "3.14"));
    assert!(matches!(ev("'LAMB'.lower()").unwrap(), Value::Str(s) if s == "lamb"));
    assert!(matches!(ev("{'a': 1}.get('b')").unwrap(), Value::None));
    assert!(matches!(ev("{'a': 1}.get('b', 7)").unwrap(), Value::Int(7)));
    assert!(truth("(2.0).is_integer()"));
}

#[test]
fn literals() {
    assert!(matches!(ev("1_200_000").unwrap(), Value::Int(1_200_000)));
    assert!(matches!(ev("0.").unwrap(), Value::Float(f) if f == 0.0));
    assert!(matches!(ev("1.0e-6").unwrap(), Value::Float(f) if f == 1e-6));
    assert!(matches!(ev("9e99").unwrap(), Value::Float(f) if f == 9e99));
    assert!(matches!(ev("\"dq\" 'sq'").unwrap(), Value::Str(s) if s == "dqsq"));
    assert!(matches!(ev("{'a': 1, 'b': [1, 2],}").unwrap(), Value::Dict(d) if d.len() == 2));
    assert!(matches!(ev("-1").unwrap(), Value::Int(-1)));
}

#[test]
fn record_attributes() {
    let r = record(Value::Int(1), &[]);
    let s = state(&[
        ("first_init_start", Value::Float(1_699_999_000_000.0)),
        ("compile_time_mins", Value::Int(30)),
    ]);
    assert!(
        ev_with(
            "ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3)",
            &r,
            &s
        )
        .unwrap()
        .truthy()
    );
    assert!(matches!(
        ev_with("ll.lineno", &r, &s).unwrap(),
        Value::Int(18)
    ));
    assert!(matches!(ev_with("ll.key", &r, &s).unwrap(), Value::Str(k) if k == "k"));
}

#[test]
fn exact_float_equality_is_ieee_left_to_right() {
    // llama31_405b: base lr * 1152 == gbs * 8e-5
    let r = record(Value::Float(8e-5), &[]);
    let s = state(&[("global_batch_size", Value::Int(1152))]);
    assert!(
        ev_with("v['value'] * 1152 == s['global_batch_size'] * 8e-5", &r, &s)
            .unwrap()
            .truthy()
    );
    let r = record(Value::Float(0.00016), &[]);
    let s = state(&[("global_batch_size", Value::Int(2304))]);
    let got = ev_with("v['value'] * 1152 == s['global_batch_size'] * 8e-5", &r, &s)
        .unwrap()
        .truthy();
    assert_eq!(got, 0.00016 * 1152.0 == 2304.0 * 8e-5);
}

#[test]
fn missing_keys_and_none_raise() {
    assert!(
        ev("v['metadata']['epoch_num']")
            .unwrap_err()
            .starts_with("KeyError: 'epoch_num'")
    );
    let r = Record {
        v: state(&[("value", Value::None), ("metadata", Value::None)]).into(),
        ..record(Value::None, &[])
    };
    let e = ev_with("'samples_count' in v['metadata']", &r, &state(&[])).unwrap_err();
    assert!(
        e.starts_with("TypeError: argument of type 'NoneType' is not iterable"),
        "{e}"
    );
    assert!(ev("undefined_name").unwrap_err().starts_with("NameError"));
}

#[test]
fn statements_update_state_and_enqueue() {
    let code = compile_exec(
        " enqueue_config('training_5.0.0/{}_common.yaml'.format(v['value'])); s['compile_time_mins'] = 240 if v['value'] == 'open' else 30 ",
    )
    .unwrap();
    let r = record(Value::str("closed"), &[]);
    let mut s = state(&[]);
    let fx = Effects::default();
    exec(&code, &mut s, Some(&r), &fx).unwrap();
    assert_eq!(
        fx.enqueued.borrow().as_slice(),
        ["training_5.0.0/closed_common.yaml"]
    );
    assert!(matches!(s.get("compile_time_mins"), Some(Value::Int(30))));
}

#[test]
fn multiline_post_with_if_block_and_augmented_assignment() {
    let code = compile_exec(
        "s['global_batch_size'] = v['value']\n\
         s['learning_rate'] = 1.0e-6 * (s['global_batch_size'] / 256) ** 0.5\n\
         s['validation_start_samples'] = v['value'] * math.ceil(2.5 + 3840 / v['value'])\n\
         s['next'] = s['validation_start_samples']\n\
         if s['next'] == 4608:\n\
         \x20   s['next'] += s['global_batch_size']\n\
         # a comment\n",
    )
    .unwrap();
    let r = record(Value::Int(256), &[]);
    let mut s = state(&[]);
    exec(&code, &mut s, Some(&r), &Effects::default()).unwrap();
    assert!(matches!(
        s.get("validation_start_samples"),
        Some(Value::Int(4608))
    ));
    assert!(matches!(s.get("next"), Some(Value::Int(4864))));
    assert!(matches!(s.get("learning_rate"), Some(Value::Float(f)) if *f == 1e-6));
}

#[test]
fn update_and_plain_names_are_local() {
    let code = compile_exec(
        "s.update({\n    'init_started': False,\n    'first_init_start': 9e99,\n})\nx = 3\ns['y'] = x + 1",
    )
    .unwrap();
    let mut s = state(&[]);
    exec(&code, &mut s, None, &Effects::default()).unwrap();
    assert!(matches!(s.get("init_started"), Some(Value::Bool(false))));
    assert!(matches!(s.get("y"), Some(Value::Int(4))));
    assert!(s.get("x").is_none());
}

#[test]
fn inline_if_statement() {
    let code = compile_exec(
        "if (v['value'] == 'LAMB'): enqueue_config('hpc_3.0.0/closed_deepcam_lamb.yaml')",
    )
    .unwrap();
    let fx = Effects::default();
    exec(
        &code,
        &mut state(&[]),
        Some(&record(Value::str("LAMB"), &[])),
        &fx,
    )
    .unwrap();
    assert_eq!(fx.enqueued.borrow().len(), 1);
}

#[test]
fn is_not_none_and_get() {
    let r = record(Value::Float(1.0e-6), &[]);
    let s = state(&[
        ("lr_min", Value::Float(0.5e-6)),
        ("lr_max", Value::Float(1.5e-6)),
    ]);
    assert!(ev_with(
        "s['lr_min'] is not None and s['lr_min'] * (1 - 1e-9) <= v['value'] <= s['lr_max'] * (1 + 1e-9)",
        &r,
        &s
    )
    .unwrap()
    .truthy());
    assert!(
        ev_with("s.get('missing') is None", &r, &s)
            .unwrap()
            .truthy()
    );
}

#[test]
fn outside_the_subset_is_a_compile_error() {
    for src in [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "[x for x in v]",
        "lambda: 1",
        "v.__class__",
        "f'{v}'",
        "s['a'][1:2]",
        "eval('1')",
    ] {
        assert!(compile_expr(src).is_err(), "{src} should be rejected");
    }
    for src in [
        "import os",
        "for x in s: pass",
        "while True: pass",
        "def f(): pass",
        "v['value'] = 1",
    ] {
        assert!(compile_exec(src).is_err(), "{src} should be rejected");
    }
    let e = compile_exec("import os").unwrap_err();
    assert!(
        e.message.contains("outside the supported Python subset"),
        "{}",
        e.message
    );
}

#[test]
fn resource_limits() {
    // Deep nesting is refused by the parser.
    let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
    assert!(compile_expr(&deep).is_err());
    // Huge sequences are refused at run time.
    assert!(
        ev("'x' * 100000000")
            .unwrap_err()
            .starts_with("ResourceLimit")
    );
    // A left-deep chain is bounded like nesting (no evaluator recursion blow-up).
    let long = vec!["1"; 300_000].join(" + ");
    assert!(compile_expr(&long).is_err());
    // A flat but huge expression runs out of steps instead of running on.
    let flat = vec!["1"; 300_000].join(" and ");
    let e = compile_expr(&flat).unwrap();
    let r = eval_value(&e, &state(&[]), None, &Effects::default());
    assert_eq!(r.unwrap_err().kind, "ResourceLimit");
}
