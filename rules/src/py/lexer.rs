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
    let b = src.as_bytes();
    let mut out: Vec<Token> = Vec::new();
    let mut indents: Vec<usize> = vec![0];
    let mut depth = 0usize; // bracket nesting
    let mut i = 0usize;
    let mut at_line_start = true;

    while i < b.len() {
        if at_line_start && depth == 0 {
            // Measure indentation of this physical line.
            let start = i;
            let mut col = 0usize;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                col += if b[i] == b'\t' { 8 - col % 8 } else { 1 };
                i += 1;
            }
            // Blank or comment-only lines do not affect indentation.
            if i >= b.len() || b[i] == b'\n' || b[i] == b'\r' || b[i] == b'#' {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                i += 1;
                continue;
            }
            at_line_start = false;
            let cur = *indents.last().expect("indent stack never empty");
            if col > cur {
                indents.push(col);
                out.push(Token {
                    tok: Tok::Indent,
                    pos: start,
                });
            } else {
                while col < *indents.last().expect("indent stack never empty") {
                    indents.pop();
                    out.push(Token {
                        tok: Tok::Dedent,
                        pos: start,
                    });
                }
                if col != *indents.last().expect("indent stack never empty") {
                    return Err(SyntaxError::new(
                        "unindent does not match any outer indentation level",
                        start,
                    ));
                }
            }
        }
        let c = b[i];
        match c {
            b' ' | b'\t' | 0x0c => i += 1,
            b'\r' | b'\n' => {
                i += 1;
                if depth == 0 {
                    if !matches!(
                        out.last().map(|t| &t.tok),
                        None | Some(Tok::Newline) | Some(Tok::Indent) | Some(Tok::Dedent)
                    ) {
                        out.push(Token {
                            tok: Tok::Newline,
                            pos: i - 1,
                        });
                    }
                    at_line_start = true;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\\' if matches!(b.get(i + 1), Some(b'\n') | Some(b'\r')) => {
                // Explicit line joining.
                i += 2;
                if b.get(i - 1) == Some(&b'\r') && b.get(i) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'0'..=b'9' => {
                let (tok, n) = number(&src[i..], i)?;
                out.push(Token { tok, pos: i });
                i += n;
            }
            b'.' if matches!(b.get(i + 1), Some(b'0'..=b'9')) => {
                let (tok, n) = number(&src[i..], i)?;
                out.push(Token { tok, pos: i });
                i += n;
            }
            b'\'' | b'"' => {
                let (s, n) = string(&src[i..], i, false)?;
                out.push(Token {
                    tok: Tok::Str(s),
                    pos: i,
                });
                i += n;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80)
                {
                    i += 1;
                }
                let word = &src[start..i];
                // String prefixes.
                if matches!(b.get(i), Some(b'\'') | Some(b'"')) {
                    let lower = word.to_ascii_lowercase();
                    match lower.as_str() {
                        "r" => {
                            let (s, n) = string(&src[i..], i, true)?;
                            out.push(Token {
                                tok: Tok::Str(s),
                                pos: start,
                            });
                            i += n;
                            continue;
                        }
                        "u" => {
                            let (s, n) = string(&src[i..], i, false)?;
                            out.push(Token {
                                tok: Tok::Str(s),
                                pos: start,
                            });
                            i += n;
                            continue;
                        }
                        "f" | "b" | "rb" | "br" | "fr" | "rf" => {
                            return Err(SyntaxError::new(
                                format!(
                                    "{word}-string literals are outside the supported Python subset"
                                ),
                                start,
                            ));
                        }
                        _ => {}
                    }
                }
                out.push(Token {
                    tok: Tok::Name(word.to_string()),
                    pos: start,
                });
            }
            _ => {
                let rest = &src[i..];
                let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) else {
                    let ch = rest.chars().next().unwrap_or('?');
                    return Err(SyntaxError::new(format!("invalid character {ch:?}"), i));
                };
                match *op {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => {
                        if depth == 0 {
                            return Err(SyntaxError::new(format!("unmatched '{op}'"), i));
                        }
                        depth -= 1;
                    }
                    _ => {}
                }
                out.push(Token {
                    tok: Tok::Op(op),
                    pos: i,
                });
                i += op.len();
            }
        }
    }
    if depth != 0 {
        return Err(SyntaxError::new(
            "unexpected end of code inside brackets",
            b.len(),
        ));
    }
    if !matches!(
        out.last().map(|t| &t.tok),
        None | Some(Tok::Newline) | Some(Tok::Dedent)
    ) {
        out.push(Token {
            tok: Tok::Newline,
            pos: b.len(),
        });
    }
    while indents.len() > 1 {
        indents.pop();
        out.push(Token {
            tok: Tok::Dedent,
            pos: b.len(),
        });
    }
    out.push(Token {
        tok: Tok::End,
        pos: b.len(),
    });
    Ok(out)
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
