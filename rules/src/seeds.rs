//! Seed rules (closed division): every run logs at least one `seed` through
//! MLLOG, each seed value is an integer, and no two runs log the same seed
//! from the same source file and line (a seed must not be hard-coded).
//! Logging more than one seed is allowed with a warning.

use crate::diag::Diagnostic;
use crate::error::SeedError;
use crate::mllog::ParsedLog;
use crate::value::Value;

/// One logged seed: (metadata.file, metadata.lineno, seed) and its log line.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedRecord {
    pub file: String,
    pub lineno: String,
    pub seed: i64,
    pub line: usize,
}

/// The seeds of one run, or why they cannot be read (as the official
/// checker, which then reports `Error found when querying seeds`).
pub fn seeds_of(log: &ParsedLog) -> Result<Vec<SeedRecord>, SeedError> {
    if !log.problems.is_empty() {
        return Err(SeedError::Unreadable {
            count: log.problem_count(),
            first_line: log.problems[0].line,
        });
    }
    let mut out = Vec::new();
    for r in log
        .records
        .iter()
        .filter(|r| r.index >= 0 && r.key() == "seed")
    {
        let v = r.full_v();
        let meta = v.get("metadata");
        let field = |name: &str| -> Result<String, SeedError> {
            match meta.and_then(|m| m.get(name)) {
                Some(Value::Str(s)) => Ok(s.clone()),
                Some(other) => Ok(other.py_str()),
                None => Err(SeedError::NoMetadata {
                    line: r.line,
                    name: name.to_string(),
                }),
            }
        };
        let not_an_integer = |found: &Value| SeedError::NotAnInteger {
            line: r.line,
            found: found.py_repr(),
        };
        let file = field("file")?;
        let lineno = field("lineno")?;
        let value = v.get("value").cloned().unwrap_or_default();
        // Python int(): truncates floats, parses integer strings.
        let seed = match &value {
            Value::Int(i) => *i,
            Value::Bool(b) => *b as i64,
            Value::Float(f) if f.is_finite() => f.trunc() as i64,
            Value::Str(s) => s
                .trim()
                .parse::<i64>()
                .map_err(|_| not_an_integer(&value))?,
            other => return Err(not_an_integer(other)),
        };
        out.push(SeedRecord {
            file,
            lineno,
            seed,
            line: r.line,
        });
    }
    Ok(out)
}

/// Check the seed rules over the runs of one benchmark directory.
/// `runs` holds (log path for messages, its seeds).
pub fn check(runs: &[(String, Result<Vec<SeedRecord>, SeedError>)]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut seen: Vec<(&SeedRecord, &str)> = Vec::new();
    for (path, seeds) in runs {
        let seeds = match seeds {
            Ok(s) => s,
            Err(e) => {
                out.push(
                    Diagnostic::error("seeds", format!("cannot read the seeds: {e}"))
                        .rule("seeds", None)
                        .file(path.clone())
                        .official(format!("Error found when querying seeds from {path}: {e}")),
                );
                continue;
            }
        };
        if seeds.is_empty() {
            out.push(
                Diagnostic::error("seeds", "the run logs no seed")
                    .rule("seeds", None)
                    .key("seed")
                    .file(path.clone())
                    .expected("at least one `seed` line")
                    .found("none")
                    .official(format!("Result file {path} logs no seed.")),
            );
        }
        if seeds.len() > 1 {
            out.push(
                Diagnostic::warning("seeds", format!("the run logs {} seeds", seeds.len()))
                    .rule("seeds", None)
                    .key("seed")
                    .file(path.clone())
                    .line(seeds[1].line),
            );
        }
        for s in seeds {
            if let Some((_, first)) = seen
                .iter()
                .find(|(o, _)| o.file == s.file && o.lineno == s.lineno && o.seed == s.seed)
            {
                out.push(
                    Diagnostic::error(
                        "seeds",
                        format!("seed {} is logged from {}:{} in this run and in {first}", s.seed, s.file, s.lineno),
                    )
                    .rule("seeds", None)
                    .key("seed")
                    .file(path.clone())
                    .line(s.line)
                    .expected("a different seed in every run (seeds must not be fixed in code)")
                    .found(format!("seed {} again", s.seed))
                    .official(format!(
                        "Result file {path} logs seed {} on {}:{}. However, result file {first} already logs the same seed on the same line.",
                        s.seed, s.file, s.lineno
                    )),
                );
            } else {
                seen.push((s, path.as_str()));
            }
        }
    }
    out
}
