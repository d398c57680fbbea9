//! Tokenizer for the Python subset used in rule files.
//!
//! Produces Python's logical-line structure: NEWLINE at the end of each
//! logical line, INDENT/DEDENT for block structure, and no NEWLINE inside
//! brackets (implicit line joining). Comments and blank lines are skipped.

use super::SyntaxError;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    Op(&'static str),
    Newline,
    Indent,
    Dedent,
    End,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    /// Byte offset in the source.
    pub pos: usize,
}

const OPS: &[&str] = &[
    "**=", "//=", ">>=", "<<=", "...", "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "->", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "<", ">", "=", "(", ")",
    "[", "]", "{", "}", ",", ":", ".", ";", "|", "&", "^", "~", "@",
];

pub fn tokenize(src: &str) -> Result<Vec<Token>, SyntaxError> {
    let mut lx = Lexer {
        src,
        b: src.as_bytes(),
        out: Vec::new(),
        indents: vec![0],
        depth: 0,
        i: 0,
        at_line_start: true,
    };
    while lx.i < lx.b.len() {
        if lx.at_line_start && lx.depth == 0 && !lx.indentation()? {
            continue;
        }
        lx.token()?;
    }
    lx.finish()
}

/// The tokenizer's state over one source text.
struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    out: Vec<Token>,
    /// Columns of the open indentation levels (0 at the bottom).
    indents: Vec<usize>,
    /// Bracket nesting (no NEWLINE inside brackets).
    depth: usize,
    i: usize,
    at_line_start: bool,
}

impl Lexer<'_> {
    fn push(&mut self, tok: Tok, pos: usize) {
        self.out.push(Token { tok, pos });
    }

    fn current_indent(&self) -> usize {
        *self.indents.last().expect("indent stack never empty")
    }

    /// Measure the indentation of a physical line and emit INDENT/DEDENT.
    /// `false` when the line is blank or only a comment (skipped: it does
    /// not affect indentation).
    fn indentation(&mut self) -> Result<bool, SyntaxError> {
        let b = self.b;
        let start = self.i;
        let mut col = 0usize;
        while self.i < b.len() && (b[self.i] == b' ' || b[self.i] == b'\t') {
            col += if b[self.i] == b'\t' { 8 - col % 8 } else { 1 };
            self.i += 1;
        }
        if self.i >= b.len() || matches!(b[self.i], b'\n' | b'\r' | b'#') {
            while self.i < b.len() && b[self.i] != b'\n' {
                self.i += 1;
            }
            self.i += 1;
            return Ok(false);
        }
        self.at_line_start = false;
        if col > self.current_indent() {
            self.indents.push(col);
            self.push(Tok::Indent, start);
            return Ok(true);
        }
        while col < self.current_indent() {
            self.indents.pop();
            self.push(Tok::Dedent, start);
        }
        if col != self.current_indent() {
            return Err(SyntaxError::new(
                "unindent does not match any outer indentation level",
                start,
            ));
        }
        Ok(true)
    }

    /// One token (or whitespace, a comment, a line end) at `self.i`.
    fn token(&mut self) -> Result<(), SyntaxError> {
        let (b, i) = (self.b, self.i);
        match b[i] {
            b' ' | b'\t' | 0x0c => self.i += 1,
            b'\r' | b'\n' => self.line_end(),
            b'#' => {
                while self.i < b.len() && b[self.i] != b'\n' {
                    self.i += 1;
                }
            }
            b'\\' if matches!(b.get(i + 1), Some(b'\n') | Some(b'\r')) => {
                // Explicit line joining.
                self.i += 2;
                if b.get(self.i - 1) == Some(&b'\r') && b.get(self.i) == Some(&b'\n') {
                    self.i += 1;
                }
            }
            b'0'..=b'9' => self.number()?,
            b'.' if matches!(b.get(i + 1), Some(b'0'..=b'9')) => self.number()?,
            b'\'' | b'"' => {
                let (s, n) = string(&self.src[i..], i, false)?;
                self.push(Tok::Str(s), i);
                self.i += n;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => self.word()?,
            _ => self.operator()?,
        }
        Ok(())
    }

    /// A physical line ends: a NEWLINE unless inside brackets or after
    /// nothing (no empty logical lines).
    fn line_end(&mut self) {
        self.i += 1;
        if self.depth != 0 {
            return;
        }
        if !matches!(
            self.out.last().map(|t| &t.tok),
            None | Some(Tok::Newline) | Some(Tok::Indent) | Some(Tok::Dedent)
        ) {
            self.push(Tok::Newline, self.i - 1);
        }
        self.at_line_start = true;
    }

    fn number(&mut self) -> Result<(), SyntaxError> {
        let (tok, n) = number(&self.src[self.i..], self.i)?;
        self.push(tok, self.i);
        self.i += n;
        Ok(())
    }

    /// A name, or a string with a prefix (`r'…'`, `u'…'`; other prefixes
    /// are outside the subset).
    fn word(&mut self) -> Result<(), SyntaxError> {
        let (b, src) = (self.b, self.src);
        let start = self.i;
        while self.i < b.len()
            && (b[self.i].is_ascii_alphanumeric() || b[self.i] == b'_' || b[self.i] >= 0x80)
        {
            self.i += 1;
        }
        let word = &src[start..self.i];
        if matches!(b.get(self.i), Some(b'\'') | Some(b'"')) {
            let raw = match word.to_ascii_lowercase().as_str() {
                "r" => Some(true),
                "u" => Some(false),
                "f" | "b" | "rb" | "br" | "fr" | "rf" => {
                    return Err(SyntaxError::new(
                        format!("{word}-string literals are outside the supported Python subset"),
                        start,
                    ));
                }
                _ => None,
            };
            if let Some(raw) = raw {
                let (s, n) = string(&src[self.i..], self.i, raw)?;
                self.push(Tok::Str(s), start);
                self.i += n;
                return Ok(());
            }
        }
        self.push(Tok::Name(word.to_string()), start);
        Ok(())
    }

    /// An operator or a bracket (brackets counted for implicit joining).
    fn operator(&mut self) -> Result<(), SyntaxError> {
        let i = self.i;
        let rest = &self.src[i..];
        let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) else {
            let ch = rest.chars().next().unwrap_or('?');
            return Err(SyntaxError::new(format!("invalid character {ch:?}"), i));
        };
        match *op {
            "(" | "[" | "{" => self.depth += 1,
            ")" | "]" | "}" => {
                if self.depth == 0 {
                    return Err(SyntaxError::new(format!("unmatched '{op}'"), i));
                }
                self.depth -= 1;
            }
            _ => {}
        }
        self.push(Tok::Op(op), i);
        self.i += op.len();
        Ok(())
    }

    /// The end of the source: a last NEWLINE, the open levels closed, END.
    fn finish(mut self) -> Result<Vec<Token>, SyntaxError> {
        let end = self.b.len();
        if self.depth != 0 {
            return Err(SyntaxError::new(
                "unexpected end of code inside brackets",
                end,
            ));
        }
        if !matches!(
            self.out.last().map(|t| &t.tok),
            None | Some(Tok::Newline) | Some(Tok::Dedent)
        ) {
            self.push(Tok::Newline, end);
        }
        while self.indents.len() > 1 {
            self.indents.pop();
            self.push(Tok::Dedent, end);
        }
        self.push(Tok::End, end);
        Ok(self.out)
    }
}

fn number(s: &str, pos: usize) -> Result<(Tok, usize), SyntaxError> {
    let b = s.as_bytes();
    // Hex / octal / binary integers.
    if b[0] == b'0' && matches!(b.get(1), Some(b'x' | b'X' | b'o' | b'O' | b'b' | b'B')) {
        let radix = match b[1] | 0x20 {
            b'x' => 16,
            b'o' => 8,
            _ => 2,
        };
        let mut n = 2;
        while n < b.len() && (b[n].is_ascii_alphanumeric() || b[n] == b'_') {
            n += 1;
        }
        let digits: String = s[2..n].chars().filter(|c| *c != '_').collect();
        let v = i64::from_str_radix(&digits, radix)
            .map_err(|_| SyntaxError::new(format!("invalid integer literal {:?}", &s[..n]), pos))?;
        return Ok((Tok::Int(v), n));
    }
    let mut n = 0;
    let digits = |n: &mut usize| {
        while *n < b.len()
            && (b[*n].is_ascii_digit()
                || (b[*n] == b'_' && b.get(*n + 1).is_some_and(u8::is_ascii_digit)))
        {
            *n += 1;
        }
    };
    digits(&mut n);
    let mut is_float = false;
    if b.get(n) == Some(&b'.') {
        is_float = true;
        n += 1;
        digits(&mut n);
    }
    if matches!(b.get(n), Some(b'e' | b'E')) {
        let mut m = n + 1;
        if matches!(b.get(m), Some(b'+' | b'-')) {
            m += 1;
        }
        if b.get(m).is_some_and(u8::is_ascii_digit) {
            is_float = true;
            n = m;
            digits(&mut n);
        } else {
            return Err(SyntaxError::new("invalid decimal literal", pos));
        }
    }
    if b.get(n)
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        return Err(SyntaxError::new("invalid decimal literal", pos));
    }
    let text: String = s[..n].chars().filter(|c| *c != '_').collect();
    if is_float {
        let v = text
            .parse::<f64>()
            .map_err(|_| SyntaxError::new(format!("invalid float literal {text:?}"), pos))?;
        Ok((Tok::Float(v), n))
    } else {
        if text.len() > 1 && text.starts_with('0') && text.bytes().any(|c| c != b'0') {
            return Err(SyntaxError::new(
                "leading zeros in decimal integer literals are not permitted",
                pos,
            ));
        }
        match text.parse::<i64>() {
            Ok(v) => Ok((Tok::Int(v), n)),
            // Larger than i64: keep the magnitude as a float (see value.rs).
            Err(_) => Ok((Tok::Float(text.parse::<f64>().unwrap_or(f64::INFINITY)), n)),
        }
    }
}

fn string(s: &str, pos: usize, raw: bool) -> Result<(String, usize), SyntaxError> {
    let b = s.as_bytes();
    let q = b[0];
    let triple = b.len() >= 3 && b[1] == q && b[2] == q;
    let open = if triple { 3 } else { 1 };
    let mut i = open;
    let mut out = String::new();
    loop {
        if i >= b.len() {
            return Err(SyntaxError::new("unterminated string literal", pos));
        }
        let c = b[i];
        if c == q {
            if !triple {
                return Ok((out, i + 1));
            }
            if b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                return Ok((out, i + 3));
            }
        }
        if !triple && (c == b'\n' || c == b'\r') {
            return Err(SyntaxError::new("unterminated string literal", pos));
        }
        if c == b'\\' && !raw {
            let Some(&e) = b.get(i + 1) else {
                return Err(SyntaxError::new("unterminated string literal", pos));
            };
            i += 2;
            match e {
                b'\n' => {}
                b'\\' => out.push('\\'),
                b'\'' => out.push('\''),
                b'"' => out.push('"'),
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'a' => out.push('\u{7}'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'v' => out.push('\u{b}'),
                b'0'..=b'7' => {
                    let mut v = (e - b'0') as u32;
                    let mut k = 0;
                    while k < 2 && b.get(i).is_some_and(|d| (b'0'..=b'7').contains(d)) {
                        v = v * 8 + (b[i] - b'0') as u32;
                        i += 1;
                        k += 1;
                    }
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
                b'x' | b'u' | b'U' => {
                    let n = match e {
                        b'x' => 2,
                        b'u' => 4,
                        _ => 8,
                    };
                    let hex = s
                        .get(i..i + n)
                        .filter(|h| h.bytes().all(|d| d.is_ascii_hexdigit()));
                    let Some(hex) = hex else {
                        return Err(SyntaxError::new("truncated \\x/\\u escape", pos + i));
                    };
                    let v = u32::from_str_radix(hex, 16).expect("hex digits");
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    i += n;
                }
                other => {
                    // Python keeps unknown escapes verbatim.
                    out.push('\\');
                    out.push(other as char);
                }
            }
            continue;
        }
        // Copy one UTF-8 character.
        let ch = s[i..].chars().next().expect("in bounds");
        out.push(ch);
        i += ch.len_utf8();
    }
}
