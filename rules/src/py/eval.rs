//! Evaluator for the Python subset, with Python value semantics.
//!
//! Sandboxed by construction: there is no way to reach the file system, the
//! network, imports or arbitrary attributes. Only the names the official
//! checker provides exist (`s`, `v`, `ll`, `math`, `is_integer`,
//! `enqueue_config`, a whitelist of builtins), and every evaluation runs on a
//! step budget, so a hostile rule file cannot loop or blow the stack (the
//! parser bounds nesting depth).

use super::parser::{BinOp, CmpOp, Expr, Stmt, UnaryOp};
use crate::mllog::Record;
use crate::value::{Dict, Num, PyError, Value, py_cmp, py_contains, py_eq, type_name};
use indexmap::IndexMap;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;

/// Evaluation steps allowed for one snippet run.
pub const STEP_BUDGET: u64 = 200_000;
/// Longest string or list an expression may build.
pub const MAX_SEQUENCE: usize = 1_000_000;

pub const BUILTINS: &[&str] = &[
    "abs",
    "all",
    "any",
    "bool",
    "float",
    "int",
    "is_integer",
    "len",
    "max",
    "min",
    "round",
    "str",
    "sum",
    "enqueue_config",
];
pub const MATH_FUNCTIONS: &[&str] = &[
    "ceil", "floor", "trunc", "log2", "log10", "log", "sqrt", "exp", "fabs", "pow", "isclose",
    "isnan", "isinf", "isfinite",
];
pub const MATH_CONSTANTS: &[&str] = &["pi", "e", "inf", "nan"];
pub const RECORD_FIELDS: &[&str] = &["timestamp", "key", "value", "lineno", "full_string"];
pub const METHODS: &[&str] = &[
    "format",
    "lower",
    "upper",
    "strip",
    "startswith",
    "endswith",
    "get",
    "keys",
    "values",
    "items",
    "update",
    "is_integer",
    "count",
];

pub type Locals = IndexMap<String, Value>;

/// Side effects a snippet may have beyond `s`: the rule-file queue.
#[derive(Default, Debug)]
pub struct Effects {
    pub enqueued: RefCell<Vec<String>>,
}

/// Read-only view used while evaluating one expression.
struct Scope<'a> {
    s: &'a Value,
    ll: Option<&'a Record>,
    locals: &'a Locals,
    effects: &'a Effects,
    steps: &'a Cell<u64>,
}

type R<'a> = Result<Cow<'a, Value>, PyError>;

fn err<T>(kind: &'static str, msg: impl Into<String>) -> Result<T, PyError> {
    Err(PyError::new(kind, msg))
}

fn type_err<T>(msg: impl Into<String>) -> Result<T, PyError> {
    err("TypeError", msg)
}

/// Evaluate an expression for its truth value (CHECK semantics).
pub fn eval_truth(
    expr: &Expr,
    s: &Value,
    ll: Option<&Record>,
    effects: &Effects,
) -> Result<bool, PyError> {
    let steps = Cell::new(0);
    let locals = Locals::new();
    let sc = Scope {
        s,
        ll,
        locals: &locals,
        effects,
        steps: &steps,
    };
    Ok(sc.eval(expr)?.truthy())
}

/// Evaluate an expression to a value.
pub fn eval_value(
    expr: &Expr,
    s: &Value,
    ll: Option<&Record>,
    effects: &Effects,
) -> Result<Value, PyError> {
    let steps = Cell::new(0);
    let locals = Locals::new();
    let sc = Scope {
        s,
        ll,
        locals: &locals,
        effects,
        steps: &steps,
    };
    Ok(sc.eval(expr)?.into_owned())
}

/// Execute statements (PRE/POST/BEGIN/END semantics): `s` is the global
/// state; plain-name assignments go to a fresh local scope and are lost.
pub fn exec(
    stmts: &[Stmt],
    s: &mut Value,
    ll: Option<&Record>,
    effects: &Effects,
) -> Result<(), PyError> {
    let steps = Cell::new(0);
    let mut locals = Locals::new();
    exec_block(stmts, s, ll, &mut locals, effects, &steps)
}

fn exec_block(
    stmts: &[Stmt],
    s: &mut Value,
    ll: Option<&Record>,
    locals: &mut Locals,
    effects: &Effects,
    steps: &Cell<u64>,
) -> Result<(), PyError> {
    for st in stmts {
        match st {
            Stmt::Pass => {}
            Stmt::Expr(e) => {
                if let Some((target, arg)) = update_call(e) {
                    let new = {
                        let sc = Scope {
                            s,
                            ll,
                            locals,
                            effects,
                            steps,
                        };
                        sc.eval(arg)?.into_owned()
                    };
                    let Value::Dict(new) = new else {
                        return type_err(format!(
                            "'{}' object is not iterable as a mapping",
                            type_name(&new)
                        ));
                    };
                    let place = resolve_place(target, s, ll, locals, effects, steps)?;
                    match place {
                        Value::Dict(d) => {
                            for (k, v) in new {
                                d.insert(k, v);
                            }
                        }
                        other => {
                            return err(
                                "AttributeError",
                                format!("'{}' object has no attribute 'update'", type_name(other)),
                            );
                        }
                    }
                } else {
                    let sc = Scope {
                        s,
                        ll,
                        locals,
                        effects,
                        steps,
                    };
                    sc.eval(e)?;
                }
            }
            Stmt::Assign(targets, value) => {
                let v = {
                    let sc = Scope {
                        s,
                        ll,
                        locals,
                        effects,
                        steps,
                    };
                    sc.eval(value)?.into_owned()
                };
                for t in targets {
                    assign(t, v.clone(), s, ll, locals, effects, steps)?;
                }
            }
            Stmt::AugAssign(target, op, value) => {
                let (cur, rhs) = {
                    let sc = Scope {
                        s,
                        ll,
                        locals,
                        effects,
                        steps,
                    };
                    let cur = sc.eval(target)?.into_owned();
                    let rhs = sc.eval(value)?.into_owned();
                    (cur, rhs)
                };
                let new = binary(*op, &cur, &rhs)?;
                assign(target, new, s, ll, locals, effects, steps)?;
            }
            Stmt::If(branches, orelse) => {
                let mut taken = None;
                for (i, (test, _)) in branches.iter().enumerate() {
                    let t = {
                        let sc = Scope {
                            s,
                            ll,
                            locals,
                            effects,
                            steps,
                        };
                        sc.eval(test)?.truthy()
                    };
                    if t {
                        taken = Some(i);
                        break;
                    }
                }
                match taken {
                    Some(i) => exec_block(&branches[i].1, s, ll, locals, effects, steps)?,
                    None => exec_block(orelse, s, ll, locals, effects, steps)?,
                }
            }
        }
    }
    Ok(())
}

/// `X.update(arg)` as a statement: returns (X, arg).
pub(crate) fn update_call(e: &Expr) -> Option<(&Expr, &Expr)> {
    if let Expr::Call { func, args, kwargs } = e
        && let Expr::Attr(base, m) = func.as_ref()
        && m == "update"
        && args.len() == 1
        && kwargs.is_empty()
    {
        return Some((base, &args[0]));
    }
    None
}

/// Find the mutable value a target expression names (`s`, `s['a']['b']`,
/// a local name).
fn resolve_place<'v>(
    target: &Expr,
    s: &'v mut Value,
    ll: Option<&Record>,
    locals: &'v mut Locals,
    effects: &Effects,
    steps: &Cell<u64>,
) -> Result<&'v mut Value, PyError> {
    // Collect the subscript chain first (evaluating index expressions).
    let mut keys = Vec::new();
    let mut cur = target;
    while let Expr::Subscript(base, idx) = cur {
        let k = {
            let sc = Scope {
                s,
                ll,
                locals,
                effects,
                steps,
            };
            sc.eval(idx)?.into_owned()
        };
        keys.push(k);
        cur = base;
    }
    let Expr::Name(root) = cur else {
        return type_err("assignment target is outside the supported Python subset");
    };
    let mut place: &mut Value = if let Some(v) = locals.get_mut(root.as_str()) {
        v
    } else if root == "s" {
        s
    } else {
        return err("NameError", format!("name '{root}' is not defined"));
    };
    for k in keys.iter().rev() {
        place = subscript_mut(place, k)?;
    }
    Ok(place)
}

fn subscript_mut<'v>(base: &'v mut Value, key: &Value) -> Result<&'v mut Value, PyError> {
    match base {
        Value::Dict(d) => match key {
            Value::Str(k) => d
                .get_mut(k.as_str())
                .ok_or_else(|| PyError::new("KeyError", key.py_repr())),
            _ => err("KeyError", key.py_repr()),
        },
        Value::List(l) => {
            let i = list_index(l.len(), key)?;
            Ok(&mut l[i])
        }
        other => type_err(format!(
            "'{}' object is not subscriptable",
            type_name(other)
        )),
    }
}

fn assign(
    target: &Expr,
    v: Value,
    s: &mut Value,
    ll: Option<&Record>,
    locals: &mut Locals,
    effects: &Effects,
    steps: &Cell<u64>,
) -> Result<(), PyError> {
    match target {
        Expr::Name(n) => {
            locals.insert(n.clone(), v);
            Ok(())
        }
        Expr::Subscript(base, idx) => {
            let k = {
                let sc = Scope {
                    s,
                    ll,
                    locals,
                    effects,
                    steps,
                };
                sc.eval(idx)?.into_owned()
            };
            let place = resolve_place(base, s, ll, locals, effects, steps)?;
            match place {
                Value::Dict(d) => match k {
                    Value::Str(k) => {
                        d.insert(k, v);
                        Ok(())
                    }
                    other => type_err(format!(
                        "dictionary keys other than strings ({}) are outside the supported subset",
                        type_name(&other)
                    )),
                },
                Value::List(l) => {
                    let i = list_index(l.len(), &k)?;
                    l[i] = v;
                    Ok(())
                }
                other => type_err(format!(
                    "'{}' object does not support item assignment",
                    type_name(other)
                )),
            }
        }
        _ => type_err("assignment target is outside the supported Python subset"),
    }
}

fn list_index(len: usize, key: &Value) -> Result<usize, PyError> {
    let i = match key {
        Value::Int(i) => *i,
        Value::Bool(b) => *b as i64,
        other => {
            return type_err(format!(
                "list indices must be integers or slices, not {}",
                type_name(other)
            ));
        }
    };
    let j = if i < 0 { i + len as i64 } else { i };
    if j < 0 || j >= len as i64 {
        return err("IndexError", "list index out of range");
    }
    Ok(j as usize)
}

impl<'a> Scope<'a> {
    fn tick(&self) -> Result<(), PyError> {
        let n = self.steps.get() + 1;
        self.steps.set(n);
        if n > STEP_BUDGET {
            return err(
                "ResourceLimit",
                format!("evaluation exceeded {STEP_BUDGET} steps"),
            );
        }
        Ok(())
    }

    fn eval(&self, e: &'a Expr) -> R<'a> {
        self.tick()?;
        match e {
            Expr::Const(v) => Ok(Cow::Borrowed(v)),
            Expr::Name(n) => self.name(n),
            Expr::Attr(base, attr) => self.attribute(base, attr),
            Expr::Subscript(base, idx) => {
                let b = self.eval(base)?;
                let k = self.eval(idx)?;
                subscript(b, &k)
            }
            Expr::Call { func, args, kwargs } => self.call(func, args, kwargs).map(Cow::Owned),
            Expr::Unary(op, x) => {
                let v = self.eval(x)?;
                unary(*op, &v).map(Cow::Owned)
            }
            Expr::Binary(op, l, r) => {
                let a = self.eval(l)?;
                let b = self.eval(r)?;
                binary(*op, &a, &b).map(Cow::Owned)
            }
            Expr::And(items) => {
                let mut last = self.eval(&items[0])?;
                for it in &items[1..] {
                    if !last.truthy() {
                        return Ok(last);
                    }
                    last = self.eval(it)?;
                }
                Ok(last)
            }
            Expr::Or(items) => {
                let mut last = self.eval(&items[0])?;
                for it in &items[1..] {
                    if last.truthy() {
                        return Ok(last);
                    }
                    last = self.eval(it)?;
                }
                Ok(last)
            }
            Expr::Compare(first, rest) => {
                let mut left = self.eval(first)?;
                for (op, r) in rest {
                    let right = self.eval(r)?;
                    if !compare(*op, &left, &right)? {
                        return Ok(Cow::Owned(Value::Bool(false)));
                    }
                    left = right;
                }
                Ok(Cow::Owned(Value::Bool(true)))
            }
            Expr::IfExp { test, body, orelse } => {
                if self.eval(test)?.truthy() {
                    self.eval(body)
                } else {
                    self.eval(orelse)
                }
            }
            Expr::List(items) => Ok(Cow::Owned(Value::List(self.eval_all(items)?))),
            Expr::Tuple(items) => Ok(Cow::Owned(Value::Tuple(self.eval_all(items)?))),
            Expr::Set(items) => {
                let mut out: Vec<Value> = Vec::new();
                for v in self.eval_all(items)? {
                    if matches!(v, Value::List(_) | Value::Dict(_) | Value::Set(_)) {
                        return type_err(format!("unhashable type: '{}'", type_name(&v)));
                    }
                    if !out.iter().any(|x| py_eq(x, &v)) {
                        out.push(v);
                    }
                }
                Ok(Cow::Owned(Value::Set(out)))
            }
            Expr::Dict(pairs) => {
                let mut d = Dict::new();
                for (k, v) in pairs {
                    let k = self.eval(k)?.into_owned();
                    let v = self.eval(v)?.into_owned();
                    match k {
                        Value::Str(k) => {
                            d.insert(k, v);
                        }
                        other => {
                            return type_err(format!(
                                "dictionary keys other than strings ({}) are outside the supported subset",
                                type_name(&other)
                            ));
                        }
                    }
                }
                Ok(Cow::Owned(Value::Dict(d)))
            }
        }
    }

    fn eval_all(&self, items: &'a [Expr]) -> Result<Vec<Value>, PyError> {
        items
            .iter()
            .map(|i| self.eval(i).map(Cow::into_owned))
            .collect()
    }

    fn name(&self, n: &str) -> R<'a> {
        if let Some(v) = self.locals.get(n) {
            return Ok(Cow::Borrowed(v));
        }
        match n {
            "v" => match self.ll {
                Some(r) => Ok(Cow::Borrowed(&r.v)),
                None => err("NameError", "name 'v' is not defined"),
            },
            "s" => Ok(Cow::Borrowed(self.s)),
            "ll" | "math" => type_err(format!("'{n}' can only be used through its attributes")),
            _ if BUILTINS.contains(&n) => type_err(format!("builtin '{n}' can only be called")),
            _ => err("NameError", format!("name '{n}' is not defined")),
        }
    }

    fn attribute(&self, base: &'a Expr, attr: &str) -> R<'a> {
        if let Expr::Name(b) = base {
            if b == "ll" && !self.locals.contains_key("ll") {
                let Some(r) = self.ll else {
                    return err("NameError", "name 'll' is not defined");
                };
                return match attr {
                    "timestamp" => Ok(Cow::Owned(Value::Float(r.timestamp))),
                    "key" => Ok(Cow::Owned(match &r.key {
                        Some(k) => Value::Str(k.to_string()),
                        None => Value::None,
                    })),
                    "value" => Ok(Cow::Borrowed(&r.v)),
                    "lineno" => Ok(Cow::Owned(Value::Int(r.index))),
                    "full_string" => Ok(Cow::Owned(Value::Str(r.text.as_str().into_owned()))),
                    _ => err(
                        "AttributeError",
                        format!("'LogLine' object has no attribute '{attr}'"),
                    ),
                };
            }
            if b == "math" && !self.locals.contains_key("math") {
                return match attr {
                    "pi" => Ok(Cow::Owned(Value::Float(std::f64::consts::PI))),
                    "e" => Ok(Cow::Owned(Value::Float(std::f64::consts::E))),
                    "inf" => Ok(Cow::Owned(Value::Float(f64::INFINITY))),
                    "nan" => Ok(Cow::Owned(Value::Float(f64::NAN))),
                    _ => err(
                        "AttributeError",
                        format!("module 'math' has no attribute '{attr}'"),
                    ),
                };
            }
        }
        let v = self.eval(base)?;
        err(
            "AttributeError",
            format!("'{}' object has no attribute '{attr}'", type_name(&v)),
        )
    }

    fn call(
        &self,
        func: &'a Expr,
        args: &'a [Expr],
        kwargs: &'a [(String, Expr)],
    ) -> Result<Value, PyError> {
        match func {
            Expr::Name(n) if !self.locals.contains_key(n.as_str()) => {
                let argv = self.eval_all(args)?;
                let kw: Vec<(&str, Value)> = kwargs
                    .iter()
                    .map(|(k, e)| Ok((k.as_str(), self.eval(e)?.into_owned())))
                    .collect::<Result<_, PyError>>()?;
                if !kw.is_empty() {
                    return type_err(format!("{n}() takes no keyword arguments here"));
                }
                self.builtin(n, argv)
            }
            Expr::Attr(base, m) if matches!(base.as_ref(), Expr::Name(b) if b == "math" && !self.locals.contains_key("math")) =>
            {
                let argv = self.eval_all(args)?;
                let mut kw = Vec::new();
                for (k, e) in kwargs {
                    kw.push((k.as_str(), self.eval(e)?.into_owned()));
                }
                math_call(m, &argv, &kw)
            }
            Expr::Attr(base, m) => {
                if m == "update" {
                    return type_err("update() is only supported as a statement");
                }
                let obj = self.eval(base)?;
                let argv = self.eval_all(args)?;
                if !kwargs.is_empty() {
                    return type_err(format!("{m}() takes no keyword arguments here"));
                }
                method_call(&obj, m, argv)
            }
            _ => type_err("calling this expression is outside the supported Python subset"),
        }
    }

    fn builtin(&self, n: &str, a: Vec<Value>) -> Result<Value, PyError> {
        let want = |k: usize| -> Result<(), PyError> {
            if a.len() == k {
                Ok(())
            } else {
                type_err(format!(
                    "{n}() takes exactly {k} argument(s) ({} given)",
                    a.len()
                ))
            }
        };
        match n {
            "enqueue_config" => {
                want(1)?;
                match &a[0] {
                    Value::Str(p) => {
                        self.effects.enqueued.borrow_mut().push(p.clone());
                        Ok(Value::None)
                    }
                    other => type_err(format!(
                        "enqueue_config() needs a path string, not {}",
                        type_name(other)
                    )),
                }
            }
            "is_integer" => {
                want(1)?;
                // abs(round(x) - x) < 0.00001
                let r = round_half_even(&a[0], None)?;
                let d = binary(BinOp::Sub, &r, &a[0])?;
                let ad = abs(&d)?;
                Ok(Value::Bool(compare(
                    CmpOp::Lt,
                    &ad,
                    &Value::Float(0.00001),
                )?))
            }
            "abs" => {
                want(1)?;
                abs(&a[0])
            }
            "len" => {
                want(1)?;
                match &a[0] {
                    Value::Str(s) => Ok(Value::Int(s.chars().count() as i64)),
                    Value::List(l) | Value::Tuple(l) | Value::Set(l) => {
                        Ok(Value::Int(l.len() as i64))
                    }
                    Value::Dict(d) => Ok(Value::Int(d.len() as i64)),
                    other => type_err(format!(
                        "object of type '{}' has no len()",
                        type_name(other)
                    )),
                }
            }
            "int" => {
                want(1)?;
                to_int(&a[0])
            }
            "float" => {
                want(1)?;
                to_float(&a[0]).map(Value::Float)
            }
            "str" => {
                want(1)?;
                Ok(Value::Str(a[0].py_str()))
            }
            "bool" => {
                want(1)?;
                Ok(Value::Bool(a[0].truthy()))
            }
            "round" => match a.len() {
                1 => round_half_even(&a[0], None),
                2 => round_half_even(&a[0], Some(&a[1])),
                _ => type_err("round() takes 1 or 2 arguments"),
            },
            "min" | "max" => {
                let items: Vec<Value> = if a.len() == 1 { iter_items(&a[0])? } else { a };
                let mut it = items.into_iter();
                let Some(mut best) = it.next() else {
                    return err("ValueError", format!("{n}() arg is an empty sequence"));
                };
                for x in it {
                    let better = if n == "min" {
                        compare(CmpOp::Lt, &x, &best)?
                    } else {
                        compare(CmpOp::Gt, &x, &best)?
                    };
                    if better {
                        best = x;
                    }
                }
                Ok(best)
            }
            "sum" => {
                let items = match a.len() {
                    1 => iter_items(&a[0])?,
                    _ => return type_err("sum() takes exactly one iterable here"),
                };
                let mut acc = Value::Int(0);
                for x in items {
                    acc = binary(BinOp::Add, &acc, &x)?;
                }
                Ok(acc)
            }
            "any" | "all" => {
                want(1)?;
                let items = iter_items(&a[0])?;
                Ok(Value::Bool(if n == "any" {
                    items.iter().any(Value::truthy)
                } else {
                    items.iter().all(Value::truthy)
                }))
            }
            _ => err("NameError", format!("name '{n}' is not defined")),
        }
    }
}

fn iter_items(v: &Value) -> Result<Vec<Value>, PyError> {
    match v {
        Value::List(l) | Value::Tuple(l) | Value::Set(l) => Ok(l.clone()),
        Value::Dict(d) => Ok(d.keys().map(|k| Value::Str(k.clone())).collect()),
        Value::Str(s) => Ok(s.chars().map(|c| Value::Str(c.to_string())).collect()),
        other => type_err(format!("'{}' object is not iterable", type_name(other))),
    }
}

fn subscript<'a>(base: Cow<'a, Value>, key: &Value) -> R<'a> {
    match base {
        Cow::Borrowed(b) => subscript_ref(b, key).map(Cow::Borrowed),
        Cow::Owned(b) => subscript_ref(&b, key).map(|v| Cow::Owned(v.clone())),
    }
}

fn subscript_ref<'a>(base: &'a Value, key: &Value) -> Result<&'a Value, PyError> {
    match base {
        Value::Dict(d) => match key {
            Value::Str(k) => d
                .get(k.as_str())
                .ok_or_else(|| PyError::new("KeyError", key.py_repr())),
            Value::List(_) | Value::Dict(_) | Value::Set(_) => {
                type_err(format!("unhashable type: '{}'", type_name(key)))
            }
            _ => err("KeyError", key.py_repr()),
        },
        Value::List(l) | Value::Tuple(l) => {
            let i = list_index(l.len(), key)?;
            Ok(&l[i])
        }
        Value::Str(_) => type_err("string indexing is outside the supported Python subset"),
        other => type_err(format!(
            "'{}' object is not subscriptable",
            type_name(other)
        )),
    }
}

fn compare(op: CmpOp, a: &Value, b: &Value) -> Result<bool, PyError> {
    let ord = |sym: &str, f: fn(Ordering) -> bool| -> Result<bool, PyError> {
        Ok(py_cmp(a, b, sym)?.is_some_and(f))
    };
    match op {
        CmpOp::Eq => Ok(py_eq(a, b)),
        CmpOp::Ne => Ok(!py_eq(a, b)),
        CmpOp::Lt => ord("<", |o| o == Ordering::Less),
        CmpOp::Le => ord("<=", |o| o != Ordering::Greater),
        CmpOp::Gt => ord(">", |o| o == Ordering::Greater),
        CmpOp::Ge => ord(">=", |o| o != Ordering::Less),
        CmpOp::In => py_contains(b, a),
        CmpOp::NotIn => py_contains(b, a).map(|x| !x),
        CmpOp::Is => Ok(is_same(a, b)),
        CmpOp::IsNot => Ok(!is_same(a, b)),
    }
}

/// Identity for the singletons Python code tests with `is`.
fn is_same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        _ => false,
    }
}

fn unary(op: UnaryOp, v: &Value) -> Result<Value, PyError> {
    match op {
        UnaryOp::Not => Ok(Value::Bool(!v.truthy())),
        UnaryOp::Neg => match v.as_num() {
            Some(Num::I(i)) => Ok(i
                .checked_neg()
                .map(Value::Int)
                .unwrap_or(Value::Float(-(i as f64)))),
            Some(Num::F(f)) => Ok(Value::Float(-f)),
            None => type_err(format!("bad operand type for unary -: '{}'", type_name(v))),
        },
        UnaryOp::Pos => match v.as_num() {
            Some(Num::I(i)) => Ok(Value::Int(i)),
            Some(Num::F(f)) => Ok(Value::Float(f)),
            None => type_err(format!("bad operand type for unary +: '{}'", type_name(v))),
        },
        UnaryOp::Invert => match v {
            Value::Int(i) => Ok(Value::Int(!i)),
            Value::Bool(b) => Ok(Value::Int(!(*b as i64))),
            _ => type_err(format!("bad operand type for unary ~: '{}'", type_name(v))),
        },
    }
}

fn unsupported<T>(op: BinOp, a: &Value, b: &Value) -> Result<T, PyError> {
    type_err(format!(
        "unsupported operand type(s) for {}: '{}' and '{}'",
        op.symbol(),
        type_name(a),
        type_name(b)
    ))
}

fn int_or_float(r: Option<i64>, fallback: f64) -> Value {
    r.map(Value::Int).unwrap_or(Value::Float(fallback))
}

fn repeat(items: &[Value], n: i64) -> Result<Vec<Value>, PyError> {
    let n = n.max(0) as usize;
    if items.len().saturating_mul(n) > MAX_SEQUENCE {
        return err("ResourceLimit", "sequence repetition too large");
    }
    Ok(items
        .iter()
        .cloned()
        .cycle()
        .take(items.len() * n)
        .collect())
}

/// Python binary operators.
pub fn binary(op: BinOp, a: &Value, b: &Value) -> Result<Value, PyError> {
    use BinOp::*;
    if let Some(v) = sequence_binary(op, a, b)? {
        return Ok(v);
    }
    let (Some(x), Some(y)) = (a.as_num(), b.as_num()) else {
        return unsupported(op, a, b);
    };
    match op {
        BitOr | BitAnd | BitXor => bitwise(op, a, b, x, y),
        LShift | RShift => shift(op, a, b, x, y),
        Add => Ok(match (x, y) {
            (Num::I(p), Num::I(q)) => int_or_float(p.checked_add(q), p as f64 + q as f64),
            _ => Value::Float(x.as_f64() + y.as_f64()),
        }),
        Sub => Ok(match (x, y) {
            (Num::I(p), Num::I(q)) => int_or_float(p.checked_sub(q), p as f64 - q as f64),
            _ => Value::Float(x.as_f64() - y.as_f64()),
        }),
        Mul => Ok(match (x, y) {
            (Num::I(p), Num::I(q)) => int_or_float(p.checked_mul(q), p as f64 * q as f64),
            _ => Value::Float(x.as_f64() * y.as_f64()),
        }),
        Div => {
            if y.as_f64() == 0.0 {
                return err("ZeroDivisionError", "division by zero");
            }
            Ok(Value::Float(match (x, y) {
                // Python divides ints exactly-rounded; f64 division of exact
                // conversions is correct whenever both fit in 2^53.
                (Num::I(p), Num::I(q)) => p as f64 / q as f64,
                _ => x.as_f64() / y.as_f64(),
            }))
        }
        FloorDiv => floor_divide(x, y),
        Mod => modulo(x, y),
        Pow => power(x, y),
    }
}

/// `+` and `*` of strings and lists (and `%` on a string, outside the
/// subset); `None` when the operands are not sequences.
fn sequence_binary(op: BinOp, a: &Value, b: &Value) -> Result<Option<Value>, PyError> {
    use BinOp::*;
    Ok(Some(match (op, a, b) {
        (Add, Value::Str(x), Value::Str(y)) => {
            if x.len() + y.len() > MAX_SEQUENCE {
                return err("ResourceLimit", "string too large");
            }
            Value::Str(format!("{x}{y}"))
        }
        (Add, Value::List(x), Value::List(y)) => {
            if x.len() + y.len() > MAX_SEQUENCE {
                return err("ResourceLimit", "list too large");
            }
            Value::List(x.iter().chain(y).cloned().collect())
        }
        (Mul, Value::Str(s), n) | (Mul, n, Value::Str(s))
            if matches!(n, Value::Int(_) | Value::Bool(_)) =>
        {
            let k = n.as_num().map(|x| x.as_f64() as i64).unwrap_or(0).max(0) as usize;
            if s.len().saturating_mul(k) > MAX_SEQUENCE {
                return err("ResourceLimit", "string too large");
            }
            Value::Str(s.repeat(k))
        }
        (Mul, Value::List(l), n) | (Mul, n, Value::List(l))
            if matches!(n, Value::Int(_) | Value::Bool(_)) =>
        {
            let k = n.as_num().map(|x| x.as_f64() as i64).unwrap_or(0);
            Value::List(repeat(l, k)?)
        }
        (Mod, Value::Str(_), _) => {
            return type_err("'%' string formatting is outside the supported Python subset");
        }
        _ => return Ok(None),
    }))
}

/// `|`, `&`, `^`: of booleans a boolean, of integers an integer.
fn bitwise(op: BinOp, a: &Value, b: &Value, x: Num, y: Num) -> Result<Value, PyError> {
    let apply = |p: i64, q: i64| match op {
        BinOp::BitOr => p | q,
        BinOp::BitAnd => p & q,
        _ => p ^ q,
    };
    if let (Value::Bool(p), Value::Bool(q)) = (a, b) {
        return Ok(Value::Bool(apply(i64::from(*p), i64::from(*q)) != 0));
    }
    match (x, y) {
        (Num::I(p), Num::I(q)) => Ok(Value::Int(apply(p, q))),
        _ => unsupported(op, a, b),
    }
}

/// `<<` and `>>` of integers (a left shift past i64 becomes a float).
fn shift(op: BinOp, a: &Value, b: &Value, x: Num, y: Num) -> Result<Value, PyError> {
    let (Num::I(p), Num::I(q)) = (x, y) else {
        return unsupported(op, a, b);
    };
    if q < 0 {
        return err("ValueError", "negative shift count");
    }
    if op == BinOp::RShift {
        Ok(Value::Int(if q >= 64 {
            if p < 0 { -1 } else { 0 }
        } else {
            p >> q
        }))
    } else if q >= 64 {
        Ok(Value::Float((p as f64) * 2f64.powi(q as i32)))
    } else {
        Ok(int_or_float(
            p.checked_mul(1i64 << q.min(62)).filter(|_| q < 63),
            (p as f64) * 2f64.powi(q as i32),
        ))
    }
}

/// `//`: floor division, Python's sign rule.
fn floor_divide(x: Num, y: Num) -> Result<Value, PyError> {
    if y.as_f64() == 0.0 {
        return err("ZeroDivisionError", "integer division or modulo by zero");
    }
    Ok(match (x, y) {
        (Num::I(p), Num::I(q)) => match p.checked_div_euclid(q) {
            Some(_) => Value::Int(floor_div(p, q)),
            None => Value::Float((p as f64 / q as f64).floor()),
        },
        _ => Value::Float((x.as_f64() / y.as_f64()).floor()),
    })
}

/// `%`: the result takes the divisor's sign, as in Python.
fn modulo(x: Num, y: Num) -> Result<Value, PyError> {
    if y.as_f64() == 0.0 {
        return err("ZeroDivisionError", "integer division or modulo by zero");
    }
    Ok(match (x, y) {
        (Num::I(p), Num::I(q)) => Value::Int(
            p.checked_rem(q)
                .map(|r| {
                    if r != 0 && (r < 0) != (q < 0) {
                        r + q
                    } else {
                        r
                    }
                })
                .unwrap_or(0),
        ),
        _ => {
            let (p, q) = (x.as_f64(), y.as_f64());
            let mut r = p % q;
            if r != 0.0 && (r < 0.0) != (q < 0.0) {
                r += q;
            }
            Value::Float(r)
        }
    })
}

/// `**`: exact for integers with a non-negative exponent where it fits.
fn power(x: Num, y: Num) -> Result<Value, PyError> {
    match (x, y) {
        (Num::I(p), Num::I(q)) if q >= 0 => {
            let exact = u32::try_from(q).ok().and_then(|q| p.checked_pow(q));
            Ok(int_or_float(exact, (p as f64).powf(q as f64)))
        }
        _ => {
            let (p, q) = (x.as_f64(), y.as_f64());
            if p == 0.0 && q < 0.0 {
                return err(
                    "ZeroDivisionError",
                    "0.0 cannot be raised to a negative power",
                );
            }
            if p < 0.0 && q.fract() != 0.0 {
                return err(
                    "ValueError",
                    "complex results are outside the supported Python subset",
                );
            }
            Ok(Value::Float(p.powf(q)))
        }
    }
}

fn floor_div(p: i64, q: i64) -> i64 {
    let d = p / q;
    if (p % q != 0) && ((p < 0) != (q < 0)) {
        d - 1
    } else {
        d
    }
}

fn abs(v: &Value) -> Result<Value, PyError> {
    match v.as_num() {
        Some(Num::I(i)) => Ok(i
            .checked_abs()
            .map(Value::Int)
            .unwrap_or(Value::Float((i as f64).abs()))),
        Some(Num::F(f)) => Ok(Value::Float(f.abs())),
        None => type_err(format!("bad operand type for abs(): '{}'", type_name(v))),
    }
}

fn float_to_int(f: f64) -> Result<Value, PyError> {
    if f.is_nan() {
        return err("ValueError", "cannot convert float NaN to integer");
    }
    if f.is_infinite() {
        return err("OverflowError", "cannot convert float infinity to integer");
    }
    let t = f.trunc();
    // 2^63 is exactly representable: [-2^63, 2^63) is the i64 range.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&t) {
        Ok(Value::Int(t as i64))
    } else {
        // Beyond i64: keep the integral float (see value.rs).
        Ok(Value::Float(t))
    }
}

fn to_int(v: &Value) -> Result<Value, PyError> {
    match v {
        Value::Bool(b) => Ok(Value::Int(*b as i64)),
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Float(f) => float_to_int(*f),
        Value::Str(s) => {
            let t = s.trim();
            let digits: String = t.chars().filter(|c| *c != '_').collect();
            let ok = !t.contains("__")
                && !t.starts_with('_')
                && !t.ends_with('_')
                && !digits.is_empty()
                && digits
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
                && digits.trim_start_matches(['+', '-']).len() + 1 >= digits.len();
            match digits.parse::<i64>() {
                Ok(i) if ok => Ok(Value::Int(i)),
                _ => err(
                    "ValueError",
                    format!("invalid literal for int() with base 10: {}", v.py_repr()),
                ),
            }
        }
        other => type_err(format!(
            "int() argument must be a string, a bytes-like object or a real number, not '{}'",
            type_name(other)
        )),
    }
}

fn to_float(v: &Value) -> Result<f64, PyError> {
    match v {
        Value::Str(s) => crate::mllog::py_float(s).ok_or_else(|| {
            PyError::new(
                "ValueError",
                format!("could not convert string to float: {}", v.py_repr()),
            )
        }),
        other => other.as_f64().ok_or_else(|| {
            PyError::type_error(format!(
                "float() argument must be a string or a real number, not '{}'",
                type_name(other)
            ))
        }),
    }
}

/// Python `round(x)` (half to even, returns int) and `round(x, n)`.
fn round_half_even(v: &Value, ndigits: Option<&Value>) -> Result<Value, PyError> {
    let Some(x) = v.as_num() else {
        return type_err(format!(
            "type {} doesn't define __round__ method",
            type_name(v)
        ));
    };
    match ndigits {
        None => match x {
            Num::I(i) => Ok(Value::Int(i)),
            Num::F(f) => float_to_int(f.round_ties_even()),
        },
        Some(n) => {
            let Some(Num::I(n)) = n.as_num() else {
                return type_err("'float' object cannot be interpreted as an integer");
            };
            match x {
                Num::I(i) => Ok(Value::Int(i)),
                Num::F(f) => {
                    if !f.is_finite() {
                        return Ok(Value::Float(f));
                    }
                    let scale = 10f64.powi(n.clamp(-308, 308) as i32);
                    Ok(Value::Float((f * scale).round_ties_even() / scale))
                }
            }
        }
    }
}

fn num_arg(name: &str, v: &Value) -> Result<f64, PyError> {
    v.as_f64().ok_or_else(|| {
        PyError::type_error(format!(
            "math.{name}() needs a real number, not '{}'",
            type_name(v)
        ))
    })
}

fn math_call(name: &str, a: &[Value], kw: &[(&str, Value)]) -> Result<Value, PyError> {
    let one = || -> Result<f64, PyError> {
        if a.len() != 1 || !kw.is_empty() {
            return type_err(format!(
                "math.{name}() takes exactly one argument ({} given)",
                a.len()
            ));
        }
        num_arg(name, &a[0])
    };
    let domain = |ok: bool, v: f64| -> Result<Value, PyError> {
        if ok {
            Ok(Value::Float(v))
        } else {
            err("ValueError", "math domain error")
        }
    };
    match name {
        "ceil" | "floor" | "trunc" => {
            if let [Value::Int(i)] = a {
                return Ok(Value::Int(*i));
            }
            let x = one()?;
            float_to_int(match name {
                "ceil" => x.ceil(),
                "floor" => x.floor(),
                _ => x.trunc(),
            })
        }
        "log2" => {
            let x = one()?;
            domain(x > 0.0, x.log2())
        }
        "log10" => {
            let x = one()?;
            domain(x > 0.0, x.log10())
        }
        "sqrt" => {
            let x = one()?;
            domain(x >= 0.0, x.sqrt())
        }
        "exp" => Ok(Value::Float(one()?.exp())),
        "fabs" => Ok(Value::Float(one()?.abs())),
        "isnan" => Ok(Value::Bool(one()?.is_nan())),
        "isinf" => Ok(Value::Bool(one()?.is_infinite())),
        "isfinite" => Ok(Value::Bool(one()?.is_finite())),
        "log" => match a {
            [x] => {
                let x = num_arg(name, x)?;
                domain(x > 0.0, x.ln())
            }
            [x, b] => {
                let (x, b) = (num_arg(name, x)?, num_arg(name, b)?);
                domain(x > 0.0 && b > 0.0 && b != 1.0, x.ln() / b.ln())
            }
            _ => type_err("math.log() takes 1 or 2 arguments"),
        },
        "pow" => match a {
            [x, y] => Ok(Value::Float(num_arg(name, x)?.powf(num_arg(name, y)?))),
            _ => type_err("math.pow() takes exactly 2 arguments"),
        },
        "isclose" => {
            let [x, y] = a else {
                return type_err("math.isclose() takes exactly 2 positional arguments");
            };
            let (x, y) = (num_arg(name, x)?, num_arg(name, y)?);
            let mut rel = 1e-9;
            let mut abs_tol = 0.0;
            for (k, v) in kw {
                match *k {
                    "rel_tol" => rel = num_arg(name, v)?,
                    "abs_tol" => abs_tol = num_arg(name, v)?,
                    other => {
                        return type_err(format!(
                            "math.isclose() got an unexpected keyword argument '{other}'"
                        ));
                    }
                }
            }
            if x == y {
                return Ok(Value::Bool(true));
            }
            if x.is_infinite() || y.is_infinite() {
                return Ok(Value::Bool(false));
            }
            let diff = (x - y).abs();
            Ok(Value::Bool(
                diff <= (rel * y.abs()).max(rel * x.abs()) || diff <= abs_tol,
            ))
        }
        _ => err(
            "AttributeError",
            format!("module 'math' has no attribute '{name}'"),
        ),
    }
}

fn method_call(obj: &Value, m: &str, a: Vec<Value>) -> Result<Value, PyError> {
    let no_args = |a: &[Value]| -> Result<(), PyError> {
        if a.is_empty() {
            Ok(())
        } else {
            type_err(format!("{m}() takes no arguments ({} given)", a.len()))
        }
    };
    match (obj, m) {
        (Value::Str(s), "format") => str_format(s, &a),
        (Value::Str(s), "lower") => {
            no_args(&a)?;
            Ok(Value::Str(s.to_lowercase()))
        }
        (Value::Str(s), "upper") => {
            no_args(&a)?;
            Ok(Value::Str(s.to_uppercase()))
        }
        (Value::Str(s), "strip") => {
            no_args(&a)?;
            Ok(Value::Str(s.trim().to_string()))
        }
        (Value::Str(s), "startswith" | "endswith") => match a.as_slice() {
            [Value::Str(p)] => Ok(Value::Bool(if m == "startswith" {
                s.starts_with(p.as_str())
            } else {
                s.ends_with(p.as_str())
            })),
            _ => type_err(format!("{m}() needs one string argument")),
        },
        (Value::Dict(d), "get") => match a.as_slice() {
            [k] | [k, _] => {
                let default = a.get(1).cloned().unwrap_or(Value::None);
                Ok(match k {
                    Value::Str(k) => d.get(k.as_str()).cloned().unwrap_or(default),
                    Value::List(_) | Value::Dict(_) | Value::Set(_) => {
                        return type_err(format!("unhashable type: '{}'", type_name(k)));
                    }
                    _ => default,
                })
            }
            _ => type_err("get() takes 1 or 2 arguments"),
        },
        (Value::Dict(d), "keys") => {
            no_args(&a)?;
            Ok(Value::List(
                d.keys().map(|k| Value::Str(k.clone())).collect(),
            ))
        }
        (Value::Dict(d), "values") => {
            no_args(&a)?;
            Ok(Value::List(d.values().cloned().collect()))
        }
        (Value::Dict(d), "items") => {
            no_args(&a)?;
            Ok(Value::List(
                d.iter()
                    .map(|(k, v)| Value::Tuple(vec![Value::Str(k.clone()), v.clone()]))
                    .collect(),
            ))
        }
        (Value::Float(f), "is_integer") => {
            no_args(&a)?;
            Ok(Value::Bool(f.is_finite() && f.fract() == 0.0))
        }
        (Value::List(l) | Value::Tuple(l), "count") => match a.as_slice() {
            [x] => Ok(Value::Int(l.iter().filter(|y| py_eq(y, x)).count() as i64)),
            _ => type_err("count() takes exactly one argument"),
        },
        _ => err(
            "AttributeError",
            format!("'{}' object has no attribute '{m}'", type_name(obj)),
        ),
    }
}

/// `str.format` with `{}`, `{N}`, `{{`, `}}` and simple format specs.
fn str_format(fmt: &str, args: &[Value]) -> Result<Value, PyError> {
    let mut out = String::new();
    let mut auto = 0usize;
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut field = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(ch) => field.push(ch),
                        None => return err("ValueError", "expected '}' before end of string"),
                    }
                }
                let (name, spec) = match field.split_once(':') {
                    Some((n, s)) => (n, s),
                    None => (field.as_str(), ""),
                };
                let idx = if name.is_empty() {
                    auto += 1;
                    auto - 1
                } else {
                    name.parse::<usize>().map_err(|_| {
                        PyError::new(
                            "KeyError",
                            format!("format field {name:?} is outside the supported subset"),
                        )
                    })?
                };
                let Some(v) = args.get(idx) else {
                    return err(
                        "IndexError",
                        format!("Replacement index {idx} out of range for positional args tuple"),
                    );
                };
                out.push_str(&format_spec(v, spec)?);
            }
            '}' => return err("ValueError", "Single '}' encountered in format string"),
            c => out.push(c),
        }
    }
    Ok(Value::Str(out))
}

fn format_spec(v: &Value, spec: &str) -> Result<String, PyError> {
    if spec.is_empty() {
        return Ok(v.py_str());
    }
    let (prec, ty) = match spec.strip_prefix('.') {
        Some(rest) => {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let ty = &rest[digits.len()..];
            (digits.parse::<usize>().ok(), ty)
        }
        None => (None, spec),
    };
    match ty {
        "f" | "F" | "%" | "e" | "g" | "" => {
            let Some(x) = v.as_f64() else {
                return err(
                    "ValueError",
                    format!(
                        "Unknown format code '{ty}' for object of type '{}'",
                        type_name(v)
                    ),
                );
            };
            let p = prec.unwrap_or(6);
            Ok(match ty {
                "%" => format!("{:.*}%", p, x * 100.0),
                "e" => {
                    let s = format!("{:.*e}", p, x);
                    let (m, e) = s.split_once('e').expect("exponent");
                    let e: i32 = e.parse().expect("int exponent");
                    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
                }
                "g" | "" if prec.is_none() => v.py_str(),
                _ => format!("{:.*}", p, x),
            })
        }
        "d" => match v {
            Value::Int(i) => Ok(i.to_string()),
            Value::Bool(b) => Ok((*b as i64).to_string()),
            _ => err(
                "ValueError",
                format!(
                    "Unknown format code 'd' for object of type '{}'",
                    type_name(v)
                ),
            ),
        },
        "s" => match v {
            Value::Str(s) => Ok(s.clone()),
            _ => err(
                "ValueError",
                format!(
                    "Unknown format code 's' for object of type '{}'",
                    type_name(v)
                ),
            ),
        },
        _ => err(
            "ValueError",
            format!("format spec {spec:?} is outside the supported subset"),
        ),
    }
}
