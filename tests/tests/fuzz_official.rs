//! Differential fuzz: real MLPerf Training v5.0 logs, each damaged once
//! (seeded, reproducible), checked by referee and by the official
//! compliance checker. Referee must never panic, and its verdict must equal
//! the official checker's wherever the official checker finishes in time.
//!
//! Knobs (environment): `REFEREE_FUZZ_SEED` (default a fixed seed; printed),
//! `REFEREE_FUZZ_N` (logs, default 240), `REFEREE_FUZZ_LIMIT_S` (seconds the
//! official checker gets per log, default 3; the checks it does not finish
//! are counted and left out of the comparison: it spends over 20 s on a
//! 1 MB value, whose line its marker regex scans quadratically, and minutes
//! on a value nested thousands deep).
//!
//! A mismatch prints the seed, the case number, the damage and the source
//! log, so `REFEREE_FUZZ_SEED=<seed> cargo test -p referee-tests --test
//! fuzz_official` reproduces it (the damaged files are kept when
//! `REFEREE_FUZZ_KEEP=DIR` names a directory).

use referee_tests::{corpus_dir, python, read_tsv, referee, repo_root, stderr, stdout};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// SplitMix64: a small, well-known generator, so a seed gives the same
/// damage on every machine and every version of the dependencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The kinds of damage; case `i` gets kind `i % KINDS.len()`, so every
/// kind is tried about as often.
const KINDS: &[&str] = &[
    "flip_bytes",
    "truncate",
    "repeat_line",
    "invalid_utf8",
    "value_1mb",
    "deep_nesting",
    "nan_infinity",
    "digits_400",
    "beyond_2_53",
    "empty",
    "crlf",
    "digits_5000",
];

/// Byte ranges of the lines of `b` (without their `\n`).
fn lines(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' {
            out.push((start, i));
            start = i + 1;
        }
    }
    if start < b.len() {
        out.push((start, b.len()));
    }
    out
}

fn is_mllog(line: &[u8]) -> bool {
    line.windows(9).any(|w| w == b":::MLLOG ")
}

/// Where the number after `"member": ` starts and ends in `line`.
fn number_after(line: &[u8], member: &str) -> Option<(usize, usize)> {
    let pat = format!("\"{member}\": ");
    let at = line.windows(pat.len()).position(|w| w == pat.as_bytes())? + pat.len();
    let end = at
        + line[at..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
            .count();
    (end > at && line[at] != b'+').then_some((at, end))
}

/// Replace the number of `time_ms` or of `value` (chosen at random, among
/// those present) of a random MLLOG line with `new`; half the time the
/// line is one whose value a rule reads (a key the rules name).
fn replace_number(log: &[u8], rng: &mut Rng, new: &str) -> (Vec<u8>, String) {
    const READ: &[&str] = &[
        "\"eval_accuracy\"",
        "\"global_batch_size\"",
        "\"seed\"",
        "\"opt_base_learning_rate\"",
        "\"gradient_accumulation_steps\"",
        "\"train_samples\"",
        "\"eval_samples\"",
        "\"epoch_num\"",
        "\"samples_count\"",
    ];
    let ls = lines(log);
    let mut spots = Vec::new(); // (line, member, start, end)
    for (n, &(s, e)) in ls.iter().enumerate() {
        let line = &log[s..e];
        if !is_mllog(line) {
            continue;
        }
        for member in ["time_ms", "value"] {
            if let Some((a, b)) = number_after(line, member) {
                spots.push((n, member, s + a, s + b));
            }
        }
    }
    if spots.is_empty() {
        return (log.to_vec(), "no number to replace".into());
    }
    let read: Vec<_> = spots
        .iter()
        .filter(|(n, member, ..)| {
            let (s, e) = ls[*n];
            *member == "value"
                && READ
                    .iter()
                    .any(|k| log[s..e].windows(k.len()).any(|w| w == k.as_bytes()))
        })
        .cloned()
        .collect();
    let &(n, member, a, b) = if !read.is_empty() && rng.below(2) == 0 {
        rng.pick(&read)
    } else {
        rng.pick(&spots)
    };
    let mut out = log[..a].to_vec();
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&log[b..]);
    let shown = if new.len() > 40 {
        format!("{}...({} chars)", &new[..20], new.len())
    } else {
        new.to_string()
    };
    let old = String::from_utf8_lossy(&log[a..b]);
    (out, format!("line {}: {member} {old} -> {shown}", n + 1))
}

/// Replace the value of a random MLLOG line with `new` (JSON text).
fn replace_value(log: &[u8], rng: &mut Rng, new: &[u8], what: &str) -> (Vec<u8>, String) {
    let ls = lines(log);
    let candidates: Vec<(usize, usize, usize)> = ls
        .iter()
        .enumerate()
        .filter_map(|(n, &(s, e))| {
            let line = &log[s..e];
            let pat = b"\"value\": ";
            let at = line.windows(pat.len()).position(|w| w == pat)? + pat.len();
            let meta = line.windows(14).position(|w| w == b", \"metadata\": ")?;
            (is_mllog(line) && meta > at).then_some((n, s + at, s + meta))
        })
        .collect();
    if candidates.is_empty() {
        return (log.to_vec(), "no value to replace".into());
    }
    let &(n, a, b) = rng.pick(&candidates);
    let mut out = log[..a].to_vec();
    out.extend_from_slice(new);
    out.extend_from_slice(&log[b..]);
    (out, format!("line {}: value -> {what}", n + 1))
}

/// Damage `log` with `kind`; the damaged bytes and what was done.
fn damage(log: &[u8], kind: &str, rng: &mut Rng) -> (Vec<u8>, String) {
    let mllog: Vec<(usize, usize, usize)> = lines(log)
        .into_iter()
        .enumerate()
        .filter(|(_, (s, e))| is_mllog(&log[*s..*e]))
        .map(|(n, (s, e))| (n, s, e))
        .collect();
    match kind {
        "flip_bytes" => {
            let mut out = log.to_vec();
            let k = 1 + rng.below(8);
            let mut at = Vec::new();
            for _ in 0..k {
                let i = rng.below(out.len().max(1));
                if let Some(b) = out.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                    at.push(i);
                }
            }
            (out, format!("{k} bits flipped at bytes {at:?}"))
        }
        "truncate" => {
            let at = rng.below(log.len().max(1));
            (
                log[..at].to_vec(),
                format!("cut at byte {at} of {}", log.len()),
            )
        }
        "repeat_line" => {
            let &(n, s, e) = rng.pick(&mllog);
            let mut out = log[..e].to_vec();
            out.push(b'\n');
            out.extend_from_slice(&log[s..]);
            (out, format!("line {} repeated", n + 1))
        }
        "invalid_utf8" => {
            let &(n, s, e) = rng.pick(&mllog);
            let at = s + rng.below(e - s + 1);
            let junks: [&[u8]; 4] = [b"\xff\xfe", b"\xc3\x28", b"\xe9", b"\x80\x80\x80"];
            let junk = *rng.pick(&junks);
            let mut out = log[..at].to_vec();
            out.extend_from_slice(junk);
            out.extend_from_slice(&log[at..]);
            (
                out,
                format!(
                    "line {}: bytes {junk:02x?} inserted at column {}",
                    n + 1,
                    at - s + 1
                ),
            )
        }
        "value_1mb" => {
            let mut v = b"\"".to_vec();
            v.extend(std::iter::repeat_n(b'x', 1 << 20));
            v.push(b'"');
            replace_value(log, rng, &v, "a 1 MB string")
        }
        "deep_nesting" => {
            // Python's json decoder raises RecursionError (the official tool
            // crashes) at about 1,000 levels, referee reports a parse error
            // from 512 on: the depths tried lie outside the band between,
            // where the answer depends on the official tool's call stack.
            let depth = *rng.pick(&[3usize, 50, 300, 2_000, 5_000]);
            let mut v = "[".repeat(depth).into_bytes();
            v.push(b'1');
            v.extend(std::iter::repeat_n(b']', depth));
            replace_value(log, rng, &v, &format!("1 nested {depth} deep"))
        }
        "nan_infinity" => {
            let n = *rng.pick(&["NaN", "Infinity", "-Infinity"]);
            replace_number(log, rng, n)
        }
        "digits_400" => {
            let mut d = String::from("1");
            for _ in 1..400 {
                d.push((b'0' + rng.below(10) as u8) as char);
            }
            if rng.below(3) == 0 {
                d.insert(0, '-');
            }
            replace_number(log, rng, &d)
        }
        "digits_5000" => {
            // Beyond Python's 4,300-digit limit on converting a string to an int.
            let d = format!("9{}", "0".repeat(4_999));
            replace_number(log, rng, &d)
        }
        "beyond_2_53" => {
            let n = *rng.pick(&[
                "9007199254740993",
                "9007199254740993.0",
                "9223372036854775807",
                "9223372036854775808",
                "-9223372036854775809",
                "18446744073709551617",
                "123456789012345678901234567890",
                "1e400",
            ]);
            replace_number(log, rng, n)
        }
        "empty" => (Vec::new(), "empty file".into()),
        "crlf" => {
            let mut out = Vec::with_capacity(log.len() + log.len() / 50);
            for &b in log {
                if b == b'\n' {
                    out.push(b'\r');
                }
                out.push(b);
            }
            (out, "CRLF line endings".into())
        }
        other => unreachable!("kind {other}"),
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Case {
    source: String,
    kind: &'static str,
    what: String,
    path: PathBuf,
}

/// Official verdicts of `paths` (one Python process; see the driver).
fn official(paths: &[PathBuf], dir: &Path, limit_s: f64) -> HashMap<PathBuf, (String, String)> {
    let list = dir.join("list.txt");
    let text: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
    std::fs::write(&list, text).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("tests/fixtures/fuzz/official_verdicts.py"))
        .arg("5.0.0")
        .arg(limit_s.to_string())
        .arg(&list)
        .output()
        .expect("run the official checker's driver");
    assert!(out.status.success(), "the driver failed: {}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let p = PathBuf::from(f.next().unwrap());
            let v = f.next().unwrap_or("").to_string();
            let d = f.next().unwrap_or("").to_string();
            (p, (v, d))
        })
        .collect()
}

#[test]
fn damaged_logs_get_the_official_verdict() {
    let seed: u64 = env_or("REFEREE_FUZZ_SEED", 20_261_126);
    let n: usize = env_or("REFEREE_FUZZ_N", 240);
    let limit_s: f64 = env_or("REFEREE_FUZZ_LIMIT_S", 3.0);
    eprintln!("fuzz_official: seed {seed}, {n} logs, {limit_s} s per official check");
    let mut rng = Rng(seed);

    let corpus = corpus_dir();
    let root = corpus.join("training_results_v5.0");
    // Logs under 512 KB (almost all of them), to keep the time bounded.
    let rows: Vec<String> = read_tsv(&corpus.join("expected/v5.0.verdicts.tsv"))
        .into_iter()
        .filter(|r| r["size_bytes"].parse::<u64>().is_ok_and(|s| s < 512 * 1024))
        .map(|r| r["path"].clone())
        .collect();
    assert!(rows.len() > 1000, "{} logs", rows.len());

    let keep = std::env::var_os("REFEREE_FUZZ_KEEP").map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let dir = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();

    let mut cases = Vec::new();
    for i in 0..n {
        let source = rng.pick(&rows).clone();
        let kind = KINDS[i % KINDS.len()];
        let log = std::fs::read(root.join(&source)).unwrap();
        let (bytes, what) = damage(&log, kind, &mut rng);
        let path = dir.join(format!("case_{i:03}_{kind}.txt"));
        std::fs::write(&path, bytes).unwrap();
        cases.push(Case {
            source,
            kind,
            what,
            path,
        });
    }

    // Referee: every damaged log in one call.
    let mut args = vec!["check", "--ruleset", "5.0.0", "--json"];
    let paths: Vec<String> = cases.iter().map(|c| c.path.display().to_string()).collect();
    args.extend(paths.iter().map(String::as_str));
    let o = referee(&args);
    let err = stderr(&o);
    assert!(
        !err.contains("panicked"),
        "referee panicked (seed {seed}):\n{err}"
    );
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "referee exit {:?} (seed {seed}):\n{err}",
        o.status
    );
    let mut ours: HashMap<PathBuf, String> = HashMap::new();
    for line in stdout(&o).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("every stdout line is JSON");
        ours.insert(
            PathBuf::from(v["path"].as_str().unwrap()),
            v["verdict"].as_str().unwrap().to_string(),
        );
    }
    assert_eq!(ours.len(), n, "one JSON object per log (seed {seed})");

    let theirs = official(
        &cases.iter().map(|c| c.path.clone()).collect::<Vec<_>>(),
        &dir,
        limit_s,
    );
    let (mut compared, mut timed_out, mut crashes) = (0, Vec::new(), 0);
    let mut mismatches = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let (verdict, detail) = theirs
            .get(&c.path)
            .unwrap_or_else(|| panic!("no official answer for {}", c.path.display()));
        let official = match verdict.as_str() {
            "TIMEOUT" => {
                timed_out.push(format!("case {i} {}", c.kind));
                continue;
            }
            // The official command line prints a traceback and exits 1.
            "CRASH" => {
                crashes += 1;
                "FAIL"
            }
            v => v,
        };
        compared += 1;
        let ours = &ours[&c.path];
        if ours != official {
            mismatches.push(format!(
                "case {i} (seed {seed}) {}: {} — {}: referee {ours}, official {verdict} {detail}",
                c.kind, c.source, c.what
            ));
        }
    }
    eprintln!(
        "fuzz_official: {compared} compared ({crashes} official crashes), {} official checks past {limit_s} s: {timed_out:?}",
        timed_out.len()
    );
    assert!(
        compared * 4 >= n * 3,
        "too few comparisons: {compared} of {n}"
    );
    assert!(
        mismatches.is_empty(),
        "{} verdicts differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
