//! A small, sandboxed interpreter for the Python subset of the official rule
//! files (see `docs/mlperf_logging_spec.md` §2.7 in the shared docs).
//!
//! Rule files embed Python expressions (`CHECK`, `ATLEAST_ONE_CHECK`,
//! `FIRST_CHECK`) and statement blocks (`BEGIN CODE`, `PRE`, `POST`, `END`).
//! They are compiled once, when a rule file is loaded, into an AST; anything
//! outside the subset (imports, loops, comprehensions, lambdas, unknown
//! functions or attributes) is rejected at that point with a clear error.
//! Evaluation has Python value semantics and a step budget.

pub mod eval;
pub mod lexer;
pub mod parser;

pub use eval::{Effects, eval_truth, eval_value, exec};
pub use parser::{Expr, Stmt};

use eval::{BUILTINS, MATH_CONSTANTS, MATH_FUNCTIONS, METHODS, RECORD_FIELDS};

/// A compile-time error: the construct is not Python or not in the subset.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    /// Byte offset in the (stripped) source, when known.
    pub pos: usize,
}

impl SyntaxError {
    pub fn new(message: impl Into<String>, pos: usize) -> Self {
        SyntaxError {
            message: message.into(),
            pos,
        }
    }

    /// `message (line L, column C)` relative to `src`.
    pub fn describe(&self, src: &str) -> String {
        let before = &src[..self.pos.min(src.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
        format!("{} (code line {line}, column {col})", self.message)
    }
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Compile an expression (as Python's `eval(text.strip())` would see it).
pub fn compile_expr(src: &str) -> Result<Expr, SyntaxError> {
    let src = src.trim();
    let toks = lexer::tokenize(src)?;
    let e = parser::Parser::new(&toks).parse_eval()?;
    validate_expr(&e)?;
    Ok(e)
}

/// Compile a statement block (as Python's `exec(text.strip())` would see it).
pub fn compile_exec(src: &str) -> Result<Vec<Stmt>, SyntaxError> {
    let src = src.trim();
    let toks = lexer::tokenize(src)?;
    let stmts = parser::Parser::new(&toks).parse_exec()?;
    validate_block(&stmts)?;
    Ok(stmts)
}

fn validate_block(stmts: &[Stmt]) -> Result<(), SyntaxError> {
    for st in stmts {
        match st {
            Stmt::Pass => {}
            Stmt::Expr(e) => match eval::update_call(e) {
                Some((target, arg)) => {
                    validate_target(target)?;
                    validate_expr(arg)?;
                }
                None => validate_expr(e)?,
            },
            Stmt::Assign(targets, value) => {
                for t in targets {
                    validate_target(t)?;
                }
                validate_expr(value)?;
            }
            Stmt::AugAssign(t, _, value) => {
                validate_target(t)?;
                validate_expr(value)?;
            }
            Stmt::If(branches, orelse) => {
                for (test, body) in branches {
                    validate_expr(test)?;
                    validate_block(body)?;
                }
                validate_block(orelse)?;
            }
        }
    }
    Ok(())
}

/// Assignment targets: local names, or subscripts rooted at a name other
/// than the record (`v`, `ll` are read-only here).
fn validate_target(t: &Expr) -> Result<(), SyntaxError> {
    let mut cur = t;
    while let Expr::Subscript(base, idx) = cur {
        validate_expr(idx)?;
        cur = base;
    }
    match cur {
        Expr::Name(n) if n == "v" || n == "ll" || n == "math" => {
            if std::ptr::eq(cur, t) && n != "math" {
                Ok(())
            } else {
                Err(SyntaxError::new(
                    format!("modifying '{n}' is outside the supported Python subset"),
                    0,
                ))
            }
        }
        Expr::Name(_) => Ok(()),
        _ => Err(SyntaxError::new(
            "this assignment target is outside the supported Python subset",
            0,
        )),
    }
}

fn validate_expr(e: &Expr) -> Result<(), SyntaxError> {
    match e {
        Expr::Const(_) => Ok(()),
        Expr::Name(n) => match n.as_str() {
            "ll" | "math" => Err(SyntaxError::new(
                format!("'{n}' may only be used through its attributes"),
                0,
            )),
            _ => Ok(()),
        },
        Expr::Attr(base, attr) => match base.as_ref() {
            Expr::Name(b) if b == "ll" => {
                if RECORD_FIELDS.contains(&attr.as_str()) {
                    Ok(())
                } else {
                    Err(SyntaxError::new(
                        format!("unknown record attribute 'll.{attr}'"),
                        0,
                    ))
                }
            }
            Expr::Name(b) if b == "math" => {
                if MATH_CONSTANTS.contains(&attr.as_str()) {
                    Ok(())
                } else {
                    Err(SyntaxError::new(
                        format!("'math.{attr}' is outside the supported Python subset"),
                        0,
                    ))
                }
            }
            _ => Err(SyntaxError::new(
                format!("attribute access '.{attr}' is outside the supported Python subset"),
                0,
            )),
        },
        Expr::Subscript(b, i) => {
            validate_expr(b)?;
            validate_expr(i)
        }
        Expr::Call { func, args, kwargs } => {
            match func.as_ref() {
                Expr::Name(n) => {
                    if !BUILTINS.contains(&n.as_str()) {
                        return Err(SyntaxError::new(
                            format!("function '{n}' is outside the supported Python subset"),
                            0,
                        ));
                    }
                }
                Expr::Attr(base, m) => match base.as_ref() {
                    Expr::Name(b) if b == "math" => {
                        if !MATH_FUNCTIONS.contains(&m.as_str()) {
                            return Err(SyntaxError::new(
                                format!("'math.{m}' is outside the supported Python subset"),
                                0,
                            ));
                        }
                    }
                    b => {
                        if m == "update" {
                            return Err(SyntaxError::new(
                                "'.update(...)' is supported only as a statement of its own",
                                0,
                            ));
                        }
                        if !METHODS.contains(&m.as_str()) {
                            return Err(SyntaxError::new(
                                format!("method '.{m}()' is outside the supported Python subset"),
                                0,
                            ));
                        }
                        validate_expr(b)?;
                    }
                },
                _ => {
                    return Err(SyntaxError::new(
                        "calling this expression is outside the supported Python subset",
                        0,
                    ));
                }
            }
            for a in args {
                validate_expr(a)?;
            }
            for (_, a) in kwargs {
                validate_expr(a)?;
            }
            Ok(())
        }
        Expr::Unary(_, x) => validate_expr(x),
        Expr::Binary(_, a, b) => {
            validate_expr(a)?;
            validate_expr(b)
        }
        Expr::And(items)
        | Expr::Or(items)
        | Expr::List(items)
        | Expr::Tuple(items)
        | Expr::Set(items) => items.iter().try_for_each(validate_expr),
        Expr::Compare(first, rest) => {
            validate_expr(first)?;
            rest.iter().try_for_each(|(_, x)| validate_expr(x))
        }
        Expr::IfExp { test, body, orelse } => {
            validate_expr(test)?;
            validate_expr(body)?;
            validate_expr(orelse)
        }
        Expr::Dict(pairs) => pairs.iter().try_for_each(|(k, v)| {
            validate_expr(k)?;
            validate_expr(v)
        }),
    }
}

#[cfg(test)]
mod tests;
