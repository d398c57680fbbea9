//! Recursive-descent parser for the Python subset (expressions follow
//! Python's precedence table; statements are the simple ones plus `if`).

use super::SyntaxError;
use super::lexer::{Tok, Token};
use crate::value::Value;

/// Deepest expression nesting accepted (guards the evaluator's recursion).
pub const MAX_NESTING: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    BitOr,
    BitAnd,
    BitXor,
    LShift,
    RShift,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::BitOr => "|",
            BinOp::BitAnd => "&",
            BinOp::BitXor => "^",
            BinOp::LShift => "<<",
            BinOp::RShift => ">>",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Is,
    IsNot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Pos,
    Not,
    Invert,
}

#[derive(Clone, Debug)]
pub enum Expr {
    Const(Value),
    Name(String),
    Attr(Box<Expr>, String),
    Subscript(Box<Expr>, Box<Expr>),
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        kwargs: Vec<(String, Expr)>,
    },
    Unary(UnaryOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    IfExp {
        test: Box<Expr>,
        body: Box<Expr>,
        orelse: Box<Expr>,
    },
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
    Set(Vec<Expr>),
    Dict(Vec<(Expr, Expr)>),
}

#[derive(Clone, Debug)]
pub enum Stmt {
    Expr(Expr),
    Assign(Vec<Expr>, Expr),
    AugAssign(Expr, BinOp, Expr),
    If(Vec<(Expr, Vec<Stmt>)>, Vec<Stmt>),
    Pass,
}

pub struct Parser<'t> {
    toks: &'t [Token],
    i: usize,
    depth: usize,
}

impl<'t> Parser<'t> {
    pub fn new(toks: &'t [Token]) -> Self {
        Parser {
            toks,
            i: 0,
            depth: 0,
        }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }

    fn pos(&self) -> usize {
        self.toks[self.i].pos
    }

    fn advance(&mut self) -> &Tok {
        let t = &self.toks[self.i].tok;
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(o) if *o == op)
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Name(n) if n == kw)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.is_op(op) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> Result<(), SyntaxError> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{op}'")))
        }
    }

    fn unexpected(&self, wanted: &str) -> SyntaxError {
        let found = match self.peek() {
            Tok::Name(n) => format!("'{n}'"),
            Tok::Int(i) => i.to_string(),
            Tok::Float(f) => f.to_string(),
            Tok::Str(_) => "a string".into(),
            Tok::Op(o) => format!("'{o}'"),
            Tok::Newline => "end of line".into(),
            Tok::Indent => "an indent".into(),
            Tok::Dedent => "a dedent".into(),
            Tok::End => "end of code".into(),
        };
        SyntaxError::new(format!("expected {wanted}, found {found}"), self.pos())
    }

    fn enter(&mut self) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(SyntaxError::new(
                format!("expression nested deeper than {MAX_NESTING} levels"),
                self.pos(),
            ));
        }
        Ok(())
    }

    /// A whole expression program: one expression, then the end.
    pub fn parse_eval(&mut self) -> Result<Expr, SyntaxError> {
        while matches!(self.peek(), Tok::Newline) {
            self.advance();
        }
        let e = self.expr_or_tuple()?;
        while matches!(self.peek(), Tok::Newline) {
            self.advance();
        }
        if !matches!(self.peek(), Tok::End) {
            return Err(self.unexpected("end of expression"));
        }
        Ok(e)
    }

    /// A statement program (`exec`).
    pub fn parse_exec(&mut self) -> Result<Vec<Stmt>, SyntaxError> {
        let mut out = Vec::new();
        while !matches!(self.peek(), Tok::End) {
            if matches!(self.peek(), Tok::Newline) {
                self.advance();
                continue;
            }
            if matches!(self.peek(), Tok::Indent) {
                return Err(SyntaxError::new("unexpected indent", self.pos()));
            }
            out.extend(self.statement()?);
        }
        Ok(out)
    }

    fn statement(&mut self) -> Result<Vec<Stmt>, SyntaxError> {
        if self.is_kw("if") {
            return Ok(vec![self.if_statement()?]);
        }
        for kw in [
            "for", "while", "def", "class", "try", "with", "lambda", "import", "from", "return",
            "del", "global", "nonlocal", "raise", "assert", "yield", "async",
        ] {
            if self.is_kw(kw) {
                return Err(SyntaxError::new(
                    format!("'{kw}' statements are outside the supported Python subset"),
                    self.pos(),
                ));
            }
        }
        self.simple_statements()
    }

    fn simple_statements(&mut self) -> Result<Vec<Stmt>, SyntaxError> {
        let mut out = vec![self.small_statement()?];
        while self.eat_op(";") {
            if matches!(self.peek(), Tok::Newline | Tok::End) {
                break;
            }
            out.push(self.small_statement()?);
        }
        match self.peek() {
            Tok::Newline => {
                self.advance();
            }
            Tok::End | Tok::Dedent => {}
            _ => return Err(self.unexpected("end of statement")),
        }
        Ok(out)
    }

    fn small_statement(&mut self) -> Result<Stmt, SyntaxError> {
        if self.eat_kw("pass") {
            return Ok(Stmt::Pass);
        }
        let start = self.pos();
        let first = self.expr_or_tuple()?;
        const AUG: [(&str, BinOp); 12] = [
            ("+=", BinOp::Add),
            ("-=", BinOp::Sub),
            ("*=", BinOp::Mul),
            ("/=", BinOp::Div),
            ("//=", BinOp::FloorDiv),
            ("%=", BinOp::Mod),
            ("**=", BinOp::Pow),
            ("|=", BinOp::BitOr),
            ("&=", BinOp::BitAnd),
            ("^=", BinOp::BitXor),
            ("<<=", BinOp::LShift),
            (">>=", BinOp::RShift),
        ];
        for (sym, op) in AUG {
            if self.eat_op(sym) {
                check_target(&first, start)?;
                let value = self.expr_or_tuple()?;
                return Ok(Stmt::AugAssign(first, op, value));
            }
        }
        if self.is_op("=") {
            let mut targets = vec![first];
            let mut value;
            loop {
                self.expect_op("=")?;
                value = self.expr_or_tuple()?;
                if self.is_op("=") {
                    targets.push(value);
                } else {
                    break;
                }
            }
            for t in &targets {
                check_target(t, start)?;
            }
            return Ok(Stmt::Assign(targets, value));
        }
        Ok(Stmt::Expr(first))
    }

    fn if_statement(&mut self) -> Result<Stmt, SyntaxError> {
        let mut branches = Vec::new();
        let mut orelse = Vec::new();
        self.advance(); // 'if'
        let test = self.expr()?;
        self.expect_op(":")?;
        let body = self.suite()?;
        branches.push((test, body));
        loop {
            if self.eat_kw("elif") {
                let test = self.expr()?;
                self.expect_op(":")?;
                let body = self.suite()?;
                branches.push((test, body));
            } else if self.eat_kw("else") {
                self.expect_op(":")?;
                orelse = self.suite()?;
                break;
            } else {
                break;
            }
        }
        Ok(Stmt::If(branches, orelse))
    }

    fn suite(&mut self) -> Result<Vec<Stmt>, SyntaxError> {
        if matches!(self.peek(), Tok::Newline) {
            self.advance();
            if !matches!(self.peek(), Tok::Indent) {
                return Err(SyntaxError::new("expected an indented block", self.pos()));
            }
            self.advance();
            let mut body = Vec::new();
            while !matches!(self.peek(), Tok::Dedent | Tok::End) {
                if matches!(self.peek(), Tok::Newline) {
                    self.advance();
                    continue;
                }
                body.extend(self.statement()?);
            }
            if matches!(self.peek(), Tok::Dedent) {
                self.advance();
            }
            Ok(body)
        } else {
            self.simple_statements()
        }
    }

    /// `a, b` at the top level makes a tuple.
    fn expr_or_tuple(&mut self) -> Result<Expr, SyntaxError> {
        let first = self.expr()?;
        if !self.is_op(",") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.starts_expr() {
                items.push(self.expr()?);
            } else {
                break;
            }
        }
        Ok(Expr::Tuple(items))
    }

    fn starts_expr(&self) -> bool {
        match self.peek() {
            Tok::Name(n) => !matches!(
                n.as_str(),
                "if" | "else" | "elif" | "for" | "in" | "and" | "or" | "is"
            ),
            Tok::Int(_) | Tok::Float(_) | Tok::Str(_) => true,
            Tok::Op(o) => matches!(*o, "(" | "[" | "{" | "-" | "+" | "~"),
            _ => false,
        }
    }

    /// Full expression including the conditional `A if C else B`.
    pub fn expr(&mut self) -> Result<Expr, SyntaxError> {
        self.enter()?;
        if self.is_kw("lambda") {
            return Err(SyntaxError::new(
                "lambda is outside the supported Python subset",
                self.pos(),
            ));
        }
        let body = self.or_expr()?;
        let out = if self.eat_kw("if") {
            let test = self.or_expr()?;
            if !self.eat_kw("else") {
                return Err(self.unexpected("'else'"));
            }
            let orelse = self.expr()?;
            Expr::IfExp {
                test: Box::new(test),
                body: Box::new(body),
                orelse: Box::new(orelse),
            }
        } else {
            body
        };
        self.depth -= 1;
        Ok(out)
    }

    fn or_expr(&mut self) -> Result<Expr, SyntaxError> {
        let first = self.and_expr()?;
        if !self.is_kw("or") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_kw("or") {
            items.push(self.and_expr()?);
        }
        Ok(Expr::Or(items))
    }

    fn and_expr(&mut self) -> Result<Expr, SyntaxError> {
        let first = self.not_expr()?;
        if !self.is_kw("and") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_kw("and") {
            items.push(self.not_expr()?);
        }
        Ok(Expr::And(items))
    }

    fn not_expr(&mut self) -> Result<Expr, SyntaxError> {
        if self.eat_kw("not") {
            self.enter()?;
            let e = self.not_expr()?;
            self.depth -= 1;
            return Ok(Expr::Unary(UnaryOp::Not, Box::new(e)));
        }
        self.comparison()
    }

    fn comp_op(&mut self) -> Option<CmpOp> {
        let op = match self.peek() {
            Tok::Op("==") => CmpOp::Eq,
            Tok::Op("!=") => CmpOp::Ne,
            Tok::Op("<") => CmpOp::Lt,
            Tok::Op("<=") => CmpOp::Le,
            Tok::Op(">") => CmpOp::Gt,
            Tok::Op(">=") => CmpOp::Ge,
            Tok::Name(n) if n == "in" => CmpOp::In,
            Tok::Name(n) if n == "is" => {
                self.advance();
                if self.eat_kw("not") {
                    return Some(CmpOp::IsNot);
                }
                return Some(CmpOp::Is);
            }
            Tok::Name(n) if n == "not" => {
                // `not in`
                if matches!(&self.toks.get(self.i + 1).map(|t| &t.tok), Some(Tok::Name(m)) if m == "in")
                {
                    self.advance();
                    self.advance();
                    return Some(CmpOp::NotIn);
                }
                return None;
            }
            _ => return None,
        };
        self.advance();
        Some(op)
    }

    fn comparison(&mut self) -> Result<Expr, SyntaxError> {
        let first = self.bitor()?;
        let mut rest = Vec::new();
        while let Some(op) = self.comp_op() {
            rest.push((op, self.bitor()?));
        }
        if rest.is_empty() {
            Ok(first)
        } else {
            Ok(Expr::Compare(Box::new(first), rest))
        }
    }

    fn binary_level(
        &mut self,
        ops: &[(&str, BinOp)],
        next: fn(&mut Self) -> Result<Expr, SyntaxError>,
    ) -> Result<Expr, SyntaxError> {
        let mut left = next(self)?;
        let entry_depth = self.depth;
        'outer: loop {
            for (sym, op) in ops {
                if self.is_op(sym) {
                    self.advance();
                    // A left-deep chain nests like parentheses do.
                    self.enter()?;
                    let right = next(self)?;
                    left = Expr::Binary(*op, Box::new(left), Box::new(right));
                    continue 'outer;
                }
            }
            self.depth = entry_depth;
            return Ok(left);
        }
    }

    fn bitor(&mut self) -> Result<Expr, SyntaxError> {
        self.binary_level(&[("|", BinOp::BitOr)], Self::bitxor)
    }
    fn bitxor(&mut self) -> Result<Expr, SyntaxError> {
        self.binary_level(&[("^", BinOp::BitXor)], Self::bitand)
    }
    fn bitand(&mut self) -> Result<Expr, SyntaxError> {
        self.binary_level(&[("&", BinOp::BitAnd)], Self::shift)
    }
    fn shift(&mut self) -> Result<Expr, SyntaxError> {
        self.binary_level(&[("<<", BinOp::LShift), (">>", BinOp::RShift)], Self::arith)
    }
    fn arith(&mut self) -> Result<Expr, SyntaxError> {
        self.binary_level(&[("+", BinOp::Add), ("-", BinOp::Sub)], Self::term)
    }
    fn term(&mut self) -> Result<Expr, SyntaxError> {
        self.binary_level(
            &[
                ("*", BinOp::Mul),
                ("//", BinOp::FloorDiv),
                ("/", BinOp::Div),
                ("%", BinOp::Mod),
            ],
            Self::factor,
        )
    }

    fn factor(&mut self) -> Result<Expr, SyntaxError> {
        let op = match self.peek() {
            Tok::Op("-") => Some(UnaryOp::Neg),
            Tok::Op("+") => Some(UnaryOp::Pos),
            Tok::Op("~") => Some(UnaryOp::Invert),
            _ => None,
        };
        if let Some(op) = op {
            self.advance();
            self.enter()?;
            let e = self.factor()?;
            self.depth -= 1;
            // Fold negative literals so `-1` is a constant.
            return Ok(match (op, e) {
                (UnaryOp::Neg, Expr::Const(Value::Int(i))) if i != i64::MIN => {
                    Expr::Const(Value::Int(-i))
                }
                (UnaryOp::Neg, Expr::Const(Value::Float(f))) => Expr::Const(Value::Float(-f)),
                (op, e) => Expr::Unary(op, Box::new(e)),
            });
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr, SyntaxError> {
        let base = self.primary()?;
        if self.eat_op("**") {
            self.enter()?;
            let exp = self.factor()?; // right-associative, binds unary on the right
            self.depth -= 1;
            return Ok(Expr::Binary(BinOp::Pow, Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.atom()?;
        loop {
            if self.eat_op(".") {
                match self.advance().clone() {
                    Tok::Name(n) => e = Expr::Attr(Box::new(e), n),
                    _ => return Err(SyntaxError::new("expected an attribute name", self.pos())),
                }
            } else if self.eat_op("(") {
                let mut args = Vec::new();
                let mut kwargs = Vec::new();
                while !self.is_op(")") {
                    if self.is_op("*") || self.is_op("**") {
                        return Err(SyntaxError::new(
                            "argument unpacking is outside the supported Python subset",
                            self.pos(),
                        ));
                    }
                    let is_kw = matches!(self.peek(), Tok::Name(_))
                        && matches!(
                            self.toks.get(self.i + 1).map(|t| &t.tok),
                            Some(Tok::Op("="))
                        );
                    if is_kw {
                        let Tok::Name(name) = self.advance().clone() else {
                            unreachable!("checked above")
                        };
                        self.advance(); // '='
                        kwargs.push((name, self.expr()?));
                    } else {
                        if !kwargs.is_empty() {
                            return Err(SyntaxError::new(
                                "positional argument follows keyword argument",
                                self.pos(),
                            ));
                        }
                        args.push(self.expr()?);
                    }
                    if !self.eat_op(",") {
                        break;
                    }
                }
                self.expect_op(")")?;
                e = Expr::Call {
                    func: Box::new(e),
                    args,
                    kwargs,
                };
            } else if self.eat_op("[") {
                if self.is_op(":") {
                    return Err(SyntaxError::new(
                        "slicing is outside the supported Python subset",
                        self.pos(),
                    ));
                }
                let idx = self.expr_or_tuple()?;
                if self.is_op(":") {
                    return Err(SyntaxError::new(
                        "slicing is outside the supported Python subset",
                        self.pos(),
                    ));
                }
                self.expect_op("]")?;
                e = Expr::Subscript(Box::new(e), Box::new(idx));
            } else {
                return Ok(e);
            }
        }
    }

    fn atom(&mut self) -> Result<Expr, SyntaxError> {
        let pos = self.pos();
        let start = self.i;
        match self.advance().clone() {
            Tok::Int(i) => Ok(Expr::Const(Value::Int(i))),
            Tok::Float(f) => Ok(Expr::Const(Value::Float(f))),
            Tok::Str(s) => {
                // Adjacent literals concatenate.
                let mut s = s;
                while let Tok::Str(more) = self.peek().clone() {
                    self.advance();
                    s.push_str(&more);
                }
                Ok(Expr::Const(Value::Str(s)))
            }
            Tok::Name(n) => match n.as_str() {
                "True" => Ok(Expr::Const(Value::Bool(true))),
                "False" => Ok(Expr::Const(Value::Bool(false))),
                "None" => Ok(Expr::Const(Value::None)),
                "if" | "else" | "elif" | "and" | "or" | "not" | "in" | "is" | "for" | "while"
                | "def" | "class" | "return" | "import" | "from" | "lambda" | "pass" | "yield"
                | "await" => Err(SyntaxError::new(format!("unexpected keyword '{n}'"), pos)),
                _ => Ok(Expr::Name(n)),
            },
            Tok::Op("(") => {
                self.enter()?;
                if self.eat_op(")") {
                    self.depth -= 1;
                    return Ok(Expr::Tuple(vec![]));
                }
                let first = self.expr()?;
                let out = if self.is_op(",") {
                    let mut items = vec![first];
                    while self.eat_op(",") {
                        if self.is_op(")") {
                            break;
                        }
                        items.push(self.expr()?);
                    }
                    Expr::Tuple(items)
                } else {
                    self.no_comprehension()?;
                    first
                };
                self.expect_op(")")?;
                self.depth -= 1;
                Ok(out)
            }
            Tok::Op("[") => {
                self.enter()?;
                let mut items = Vec::new();
                while !self.is_op("]") {
                    items.push(self.expr()?);
                    self.no_comprehension()?;
                    if !self.eat_op(",") {
                        break;
                    }
                }
                self.expect_op("]")?;
                self.depth -= 1;
                Ok(Expr::List(items))
            }
            Tok::Op("{") => {
                self.enter()?;
                if self.eat_op("}") {
                    self.depth -= 1;
                    return Ok(Expr::Dict(vec![]));
                }
                let first = self.expr()?;
                let out = if self.eat_op(":") {
                    let v = self.expr()?;
                    self.no_comprehension()?;
                    let mut pairs = vec![(first, v)];
                    while self.eat_op(",") {
                        if self.is_op("}") {
                            break;
                        }
                        let k = self.expr()?;
                        self.expect_op(":")?;
                        let v = self.expr()?;
                        pairs.push((k, v));
                    }
                    Expr::Dict(pairs)
                } else {
                    self.no_comprehension()?;
                    let mut items = vec![first];
                    while self.eat_op(",") {
                        if self.is_op("}") {
                            break;
                        }
                        items.push(self.expr()?);
                    }
                    Expr::Set(items)
                };
                self.expect_op("}")?;
                self.depth -= 1;
                Ok(out)
            }
            _ => {
                self.i = start;
                Err(self.unexpected("an expression"))
            }
        }
    }

    fn no_comprehension(&self) -> Result<(), SyntaxError> {
        if self.is_kw("for") {
            return Err(SyntaxError::new(
                "comprehensions are outside the supported Python subset",
                self.pos(),
            ));
        }
        Ok(())
    }
}

fn check_target(e: &Expr, pos: usize) -> Result<(), SyntaxError> {
    match e {
        Expr::Name(_) | Expr::Subscript(..) => Ok(()),
        Expr::Attr(..) => Err(SyntaxError::new(
            "assignment to an attribute is outside the supported Python subset",
            pos,
        )),
        _ => Err(SyntaxError::new("cannot assign to this expression", pos)),
    }
}
