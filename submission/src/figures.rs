//! Numbers and tables as the human reports of `referee compare` and
//! `referee perf` print them.

use std::io::{self, Write};

/// A figure with a sensible number of digits: four decimals below 1, three
/// below 100, one below 10,000 and none from there (`0.1234`, `12.345`,
/// `1234.5`, `12345`).
pub fn fig(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        "—".into()
    } else if a == 0.0 {
        "0".into()
    } else if a >= 1e4 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// A relative change as a signed percentage: `+5.2 %` (`—` when not
/// finite).
pub fn pct_change(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1} %", x * 100.0)
    } else {
        "—".into()
    }
}

/// A table in columns as wide as their widest cell (counted in characters),
/// two spaces apart, trailing spaces trimmed: the header, then the rows.
pub fn write_aligned(
    out: &mut dyn Write,
    head: &[impl AsRef<str>],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let mut widths: Vec<usize> = head.iter().map(|h| h.as_ref().chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        cells
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    writeln!(out, "{}", line(&mut head.iter().map(|h| h.as_ref())))?;
    for r in rows {
        writeln!(out, "{}", line(&mut r.iter().map(String::as_str)))?;
    }
    Ok(())
}
