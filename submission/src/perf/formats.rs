//! Reading training logs: format detection and the line parsers of NeMo,
//! Megatron-LM / Megatron-Bridge and MLLOG (the last through
//! `referee_rules::mllog`, the one MLLOG reader).
//!
//! The lines, as the frameworks print them (each form is a fixture of the
//! tests below, with its source):
//!
//! * NeMo 2 (`ProgressPrinter`), iterations numbered from 0, the
//!   denominator being the last iteration:
//!   `Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121
//!   | global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 |
//!   train_step_timing in s: 0.03146 | val_loss: 4.106`, with
//!   `| TFLOPS_per_GPU: 1.249e+03` when NeMo's FLOPs callback is on;
//! * Megatron-LM and Megatron-Bridge (`training_log`, printed by the last
//!   rank), iterations numbered from 1: ` [2024-04-06 03:02:12] iteration
//!   71/     100 | consumed samples: 9088 | elapsed time per iteration (ms):
//!   5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | … | global batch
//!   size:   128 | … | grad norm: 1.300 | …`; Megatron-Bridge also writes
//!   `… | 300.0 MODEL_TFLOP/s/GPU` and `throughput 501.0 TFLOP/s/GPU`;
//!   Megatron prints its arguments once (`  seq_length ........ 1024`,
//!   between `---- arguments ----` and `---- end of arguments ----`) and
//!   `using world size: 1, data-parallel-size: 1, tensor-model-parallel
//!   size: 1, pipeline-model-parallel size: 1`;
//! * NeMo 1 / PyTorch Lightning progress bars, `\r`-separated updates on
//!   one line: `Epoch 0:   1%|          | 795/77225 [9:07:58<878:01:48,
//!   41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090,
//!   global_step=794.0, consumed_samples=1.63e+6]` (NVIDIA/NeMo-Framework-
//!   Launcher#55); the step time is `train_step_timing in s=` when the bar
//!   carries it, else the bar's rate (`s/it`, or the inverse of `it/s`:
//!   tqdm's smoothed rate); the iteration is `global_step` + 1 when given,
//!   else the bar's count, numbered from 1;
//! * torchtitan: `step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps:
//!   5,856  tflops: 339.16  mfu: 34.29%` (pytorch/torchtitan#1287), ANSI
//!   colours stripped;
//! * Hugging Face Trainer / Accelerate: per-step dicts `{'loss': 2.119,
//!   'grad_norm': 37.65, 'learning_rate': 4.58e-05, 'epoch': 0.25}`
//!   (counted; a NaN `grad_norm` marks the run) and the final
//!   `{'train_runtime': 110.5948, 'train_samples_per_second': 1.808, …}`;
//! * MLLOG (`:::MLLOG {…}`): referee's `throughput` events, the official
//!   keys (`global_batch_size`, `max_sequence_length`,
//!   `submission_benchmark`, `submission_platform`, `run_stop`) and NVIDIA's
//!   `tracked_stats` throughput.
//!
//! The recipes' parser facts (NVIDIA/dgxc-benchmarking,
//! `cli/llmb-run/tests/test_pretrain_log_parser.py`): a timing value counts
//! only on a line that carries `iteration N/M`; milliseconds become
//! seconds; scientific notation is a number; a NaN gradient norm anywhere
//! makes the run invalid; bytes that are not UTF-8 do not stop the parser.
//!
//! Multi-rank output (`srun --label`'s `0: `, torchrun's `[rank0]:` and
//! `[default0]:`, Open MPI's `[1,0]<stdout>:`): every timing line is read
//! with its rank; per iteration only one rank counts — the lowest-numbered
//! rank that printed timing lines (unlabelled lines count only when no
//! labelled rank printed any) — and the other ranks' lines are counted and
//! reported, never averaged in.
//!
//! Speed: the file is read in 32 MiB blocks by a reader thread; each block
//! is cut at line ends into pieces scanned in parallel (rayon). A piece is
//! searched with memchr's `memmem` for the few byte strings that can start
//! a relevant line; only those lines are parsed, and line numbers come
//! from one vectorised count of newlines.

use memchr::memmem::Finder;
use rayon::prelude::*;
use referee_rules::mllog;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

/// The log's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// NeMo 2 iteration lines (`train_step_timing in s:`).
    Nemo,
    /// Megatron-LM / Megatron-Bridge `training_log` lines.
    Megatron,
    /// NeMo 1 / PyTorch Lightning progress bars (`Epoch 0: … N/M [… s/it, …]`).
    Lightning,
    /// torchtitan's `step: … tps: … tflops: … mfu: …%` lines.
    Torchtitan,
    /// Hugging Face Trainer / Accelerate (`{'train_runtime': …}`).
    HfTrainer,
    /// MLLOG (`:::MLLOG`).
    Mllog,
    /// Nothing referee can read throughput from.
    Unknown,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Nemo => "NeMo",
            Format::Megatron => "Megatron",
            Format::Lightning => "Lightning",
            Format::Torchtitan => "torchtitan",
            Format::HfTrainer => "HF Trainer",
            Format::Mllog => "MLLOG",
            Format::Unknown => "unknown",
        }
    }
}

/// Which framework's spelling a timing line used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Nemo,
    Megatron,
    Lightning,
}

/// Lines without a rank prefix.
pub const NO_RANK: u64 = u64::MAX;

/// One timing line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The rank prefix as a sortable key ([`NO_RANK`] without one).
    pub rank: u64,
    pub dialect: Dialect,
    pub iteration: u64,
    /// The `M` of `iteration N/M`: the run's final iteration.
    pub last: u64,
    pub step_s: Option<f64>,
    pub tflops: Option<f64>,
    pub gbs: Option<u64>,
    /// 1-based line in the file.
    pub line: usize,
}

/// A line referee could not read as what it looked like.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    pub message: String,
    pub expected: String,
    pub found: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} (expected {}, found {})",
            self.file, self.line, self.message, self.expected, self.found
        )
    }
}

/// One torchtitan metrics line.
#[derive(Debug, Clone, PartialEq)]
pub struct TitanStep {
    pub rank: u64,
    pub step: u64,
    /// Tokens per second per GPU.
    pub tps: Option<f64>,
    pub tflops: Option<f64>,
    /// A fraction (the log's percent ÷ 100).
    pub mfu: Option<f64>,
    pub line: usize,
}

/// What a Hugging Face Trainer log states.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HfFacts {
    /// Per-step dicts (`{'loss': …}`).
    pub steps: usize,
    /// `train_runtime` (s), `train_samples_per_second`,
    /// `train_steps_per_second`, and the line.
    pub summary: Option<(f64, f64, Option<f64>, usize)>,
}

/// The first NaN gradient norm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NanGrad {
    pub line: usize,
    pub iteration: Option<u64>,
}

/// Everything one pass over a file found.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub bytes: u64,
    pub lines: usize,
    /// Timing lines of every rank, in file order.
    pub samples: Vec<Sample>,
    pub nan_grad: Option<NanGrad>,
    /// `(line, text)` of every line carrying `:::MLLOG `.
    pub mllog: Vec<(usize, Vec<u8>)>,
    /// Megatron's arguments (and its `using world size:` line): the first
    /// value of each name, with its line.
    pub args: Vec<(String, String, usize)>,
    pub problems: Vec<Problem>,
    /// Timing values on lines without `iteration N/M` (ignored, as the
    /// recipes do).
    pub unmarked: usize,
    /// Rank key → its prefix as printed (first seen).
    pub prefixes: BTreeMap<u64, String>,
    /// torchtitan metrics lines.
    pub titan: Vec<TitanStep>,
    pub hf: HfFacts,
}

impl Scan {
    /// Append the scan of the text that follows this one.
    fn append(&mut self, mut o: Scan) {
        let off = self.lines;
        for s in &mut o.samples {
            s.line += off;
        }
        self.samples.append(&mut o.samples);
        for p in &mut o.problems {
            p.line += off;
        }
        self.problems.append(&mut o.problems);
        for (l, t) in o.mllog {
            self.mllog.push((l + off, t));
        }
        for (k, v, l) in o.args {
            if !self.args.iter().any(|(n, _, _)| *n == k) {
                self.args.push((k, v, l + off));
            }
        }
        if self.nan_grad.is_none() {
            self.nan_grad = o.nan_grad.map(|mut n| {
                n.line += off;
                n
            });
        }
        for (k, v) in o.prefixes {
            self.prefixes.entry(k).or_insert(v);
        }
        for mut t in o.titan {
            t.line += off;
            self.titan.push(t);
        }
        self.hf.steps += o.hf.steps;
        if let Some((a, b, c, l)) = o.hf.summary {
            self.hf.summary = Some((a, b, c, l + off));
        }
        self.unmarked += o.unmarked;
        self.lines += o.lines;
        self.bytes += o.bytes;
    }

    /// The format the timing lines (or MLLOG lines) say.
    pub fn format(&self) -> Format {
        if !self.samples.is_empty() {
            let n = |d: Dialect| self.samples.iter().filter(|s| s.dialect == d).count();
            let (nemo, megatron, lightning) = (
                n(Dialect::Nemo),
                n(Dialect::Megatron),
                n(Dialect::Lightning),
            );
            if lightning > nemo && lightning > megatron {
                Format::Lightning
            } else if nemo >= megatron {
                Format::Nemo
            } else {
                Format::Megatron
            }
        } else if !self.mllog.is_empty() {
            Format::Mllog
        } else if !self.titan.is_empty() {
            Format::Torchtitan
        } else if self.hf.summary.is_some() || self.hf.steps > 0 {
            Format::HfTrainer
        } else {
            Format::Unknown
        }
    }

    /// A Megatron argument's value.
    pub fn arg(&self, name: &str) -> Option<(&str, usize)> {
        self.args
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, l)| (v.as_str(), *l))
    }
}

struct Finders {
    iteration: Finder<'static>,
    mllog: Finder<'static>,
    grad_space: Finder<'static>,
    grad_under: Finder<'static>,
    dots: Finder<'static>,
    world: Finder<'static>,
    nemo_step: Finder<'static>,
    megatron_step: Finder<'static>,
    nemo_tflops: Finder<'static>,
    megatron_tflops: Finder<'static>,
    tflop_unit: Finder<'static>,
    gbs_nemo: Finder<'static>,
    gbs_megatron: Finder<'static>,
    bar_sit: Finder<'static>,
    bar_its: Finder<'static>,
    titan_tps: Finder<'static>,
    hf_loss: Finder<'static>,
    hf_runtime: Finder<'static>,
}

fn finders() -> &'static Finders {
    static F: OnceLock<Finders> = OnceLock::new();
    F.get_or_init(|| Finders {
        iteration: Finder::new("iteration"),
        mllog: Finder::new(mllog::MARKER),
        grad_space: Finder::new("grad norm"),
        grad_under: Finder::new("grad_norm"),
        dots: Finder::new(" .."),
        world: Finder::new("using world size:"),
        nemo_step: Finder::new("train_step_timing in s"),
        megatron_step: Finder::new("elapsed time per iteration (ms):"),
        nemo_tflops: Finder::new("TFLOPS_per_GPU:"),
        megatron_tflops: Finder::new("(TFLOP/s/GPU):"),
        tflop_unit: Finder::new("TFLOP/s/GPU"),
        gbs_nemo: Finder::new("global_batch_size:"),
        gbs_megatron: Finder::new("global batch size:"),
        bar_sit: Finder::new("s/it"),
        bar_its: Finder::new("it/s"),
        titan_tps: Finder::new("tps:"),
        hf_loss: Finder::new("{'loss':"),
        hf_runtime: Finder::new("{'train_runtime':"),
    })
}

/// Newlines in `s` (a loop LLVM vectorises: byte counters per 128-byte
/// chunk cannot overflow).
pub fn count_newlines(s: &[u8]) -> usize {
    let mut n = 0usize;
    let mut chunks = s.chunks_exact(128);
    for c in &mut chunks {
        let mut k = 0u8;
        for &b in c {
            k += (b == b'\n') as u8;
        }
        n += k as usize;
    }
    n + chunks.remainder().iter().filter(|&&b| b == b'\n').count()
}

/// Scan one piece of text that starts at a line start; line numbers are
/// relative to the piece (1-based).
pub fn scan_piece(hay: &[u8]) -> Scan {
    let f = finders();
    let mut starts: Vec<usize> = Vec::new();
    for finder in [
        &f.iteration,
        &f.nemo_step,
        &f.mllog,
        &f.grad_space,
        &f.grad_under,
        &f.dots,
        &f.world,
        &f.bar_sit,
        &f.bar_its,
        &f.titan_tps,
        &f.hf_loss,
        &f.hf_runtime,
    ] {
        let mut pos = 0;
        while let Some(i) = finder.find(&hay[pos..]) {
            let at = pos + i;
            let start = memchr::memrchr(b'\n', &hay[..at]).map_or(0, |j| j + 1);
            starts.push(start);
            pos = memchr::memchr(b'\n', &hay[at..]).map_or(hay.len(), |j| at + j + 1);
            if pos >= hay.len() {
                break;
            }
        }
    }
    starts.sort_unstable();
    starts.dedup();
    let mut scan = Scan {
        bytes: hay.len() as u64,
        ..Default::default()
    };
    let (mut counted_to, mut line_no) = (0usize, 1usize);
    for start in starts {
        line_no += count_newlines(&hay[counted_to..start]);
        counted_to = start;
        let end = memchr::memchr(b'\n', &hay[start..]).map_or(hay.len(), |j| start + j);
        let mut line = &hay[start..end];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        parse_line(line, line_no, &mut scan);
    }
    scan.lines = count_newlines(hay) + usize::from(!hay.is_empty() && hay.last() != Some(&b'\n'));
    scan
}

fn parse_line(line: &[u8], line_no: usize, scan: &mut Scan) {
    let f = finders();
    if f.mllog.find(line).is_none() && line.contains(&b'\r') {
        // Progress-bar updates overwrite each other with `\r`: each is read;
        // of consecutive updates of one iteration the last counts.
        for seg in line.split(|b| *b == b'\r') {
            let before = scan.samples.len();
            parse_segment(seg, line_no, scan);
            let n = scan.samples.len();
            if n == before + 1 && before > 0 {
                let (a, b) = (&scan.samples[before - 1], &scan.samples[before]);
                if a.line == b.line
                    && a.dialect == Dialect::Lightning
                    && b.dialect == Dialect::Lightning
                    && a.iteration == b.iteration
                    && a.rank == b.rank
                {
                    scan.samples.remove(before - 1);
                }
            }
        }
        return;
    }
    parse_segment(line, line_no, scan);
}

fn parse_segment(line: &[u8], line_no: usize, scan: &mut Scan) {
    let f = finders();
    let (rank, body) = rank_prefix(line);
    if f.mllog.find(body).is_some() {
        scan.mllog.push((line_no, line.to_vec()));
        return;
    }
    if lightning_bar(body, rank, line_no, scan) {
        note_prefix(line, body, rank, scan);
        return;
    }
    if f.titan_tps.find(body).is_some() && titan_line(body, rank, line_no, scan) {
        note_prefix(line, body, rank, scan);
        return;
    }
    if hf_line(body, line_no, scan) {
        return;
    }
    let iteration = iteration_marker(body);
    if scan.nan_grad.is_none() && nan_grad_norm(body) {
        scan.nan_grad = Some(NanGrad {
            line: line_no,
            iteration: iteration.map(|(n, _)| n),
        });
    }
    if let Some(i) = f.world.find(body) {
        world_line(&body[i..], line_no, scan);
        return;
    }
    if f.dots.find(body).is_some() && argument_line(body, line_no, scan) {
        return;
    }
    timing_line(body, rank, iteration, line_no, scan);
    note_prefix(line, body, rank, scan);
}

fn note_prefix(line: &[u8], body: &[u8], rank: u64, scan: &mut Scan) {
    if rank != NO_RANK && !scan.prefixes.contains_key(&rank) {
        let prefix_len = line.len() - body.len();
        let p = String::from_utf8_lossy(&line[..prefix_len])
            .trim()
            .to_string();
        scan.prefixes.insert(rank, p);
    }
}

fn bad(line_no: usize, what: &str, expected: &str, tok: &[u8]) -> Problem {
    Problem {
        file: String::new(),
        line: line_no,
        message: format!("unreadable {what}"),
        expected: expected.to_string(),
        found: if tok.is_empty() {
            "nothing".to_string()
        } else {
            format!("`{}`", String::from_utf8_lossy(tok))
        },
    }
}

/// A Lightning / NeMo 1 progress-bar update: `Epoch E: … N/M [elapsed<left,
/// RATE, key=value, …]`. True when the segment is one (read or diagnosed).
fn lightning_bar(body: &[u8], rank: u64, line_no: usize, scan: &mut Scan) -> bool {
    let t = trim_start(body);
    let Some(rest) = t.strip_prefix(b"Epoch ") else {
        return false;
    };
    let Some((_, rest)) = digits(rest) else {
        return false;
    };
    if !rest.starts_with(b":") {
        return false;
    }
    let Some(open) = memchr::memchr(b'[', rest) else {
        return false;
    };
    let head = &rest[..open];
    let count = value_before(head, head.len());
    let count = count.rsplit(|b| *b == b'|').next().unwrap_or(count);
    let mut nm = count.splitn(2, |b| *b == b'/');
    let (Some((n, _)), Some((m, _))) = (nm.next().and_then(digits), nm.next().and_then(digits))
    else {
        return false;
    };
    let inner = &rest[open + 1..];
    let inner = memchr::memchr(b']', inner).map_or(inner, |j| &inner[..j]);
    let mut step_s = None;
    let mut timing = None;
    let mut global_step = None;
    for part in inner.split(|b| *b == b',') {
        let p = trim_start(part);
        let p = &p[..p.len() - p.iter().rev().take_while(|b| **b == b' ').count()];
        let problems = &mut scan.problems;
        let rate = |x: &[u8], expected: &str, problems: &mut Vec<Problem>| {
            read_field(
                x,
                p,
                positive,
                line_no,
                "progress-bar rate",
                expected,
                problems,
            )
        };
        if let Some(x) = p.strip_suffix(b"s/it") {
            let expected = "a positive number before `s/it`";
            step_s = rate(x, expected, problems).or(step_s);
        } else if let Some(x) = p.strip_suffix(b"it/s") {
            if x != b"?" {
                let expected = "a positive number (or `?`) before `it/s`";
                step_s = rate(x, expected, problems).map(|v| 1.0 / v).or(step_s);
            }
        } else if let Some(x) = p.strip_prefix(b"train_step_timing in s=") {
            let expected = "a positive number of seconds after `train_step_timing in s=`";
            timing =
                read_field(x, x, positive, line_no, "step time", expected, problems).or(timing);
        } else if let Some(x) = p.strip_prefix(b"global_step=") {
            global_step = number(x).filter(|v| v.is_finite() && *v >= 0.0 && v.fract() == 0.0);
        }
    }
    let iteration = global_step.map_or(n, |g| g as u64 + 1);
    scan.samples.push(Sample {
        rank,
        dialect: Dialect::Lightning,
        iteration,
        last: m + iteration.saturating_sub(n),
        step_s: timing.or(step_s),
        tflops: None,
        gbs: None,
        line: line_no,
    });
    true
}

/// Remove ANSI colour sequences (`ESC [ … m`).
fn strip_ansi(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == 0x1b && s.get(i + 1) == Some(&b'[') {
            i += 2;
            while i < s.len() && !s[i].is_ascii_alphabetic() {
                i += 1;
            }
            i += 1;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// The token after `key` in `s`, if `key` occurs.
fn field<'a>(s: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let i = memchr::memmem::find(s, key.as_bytes())?;
    let t = trim_start(&s[i + key.len()..]);
    let n = t.iter().take_while(|b| !matches!(b, b' ' | b'\t')).count();
    Some(&t[..n])
}

/// torchtitan's `step: N  loss: …  tps: 1,234  tflops: …  mfu: …%`. True
/// when the line is one.
fn titan_line(body: &[u8], rank: u64, line_no: usize, scan: &mut Scan) -> bool {
    let clean = strip_ansi(body);
    let Some(step) = field(&clean, "step:").and_then(digits).map(|(n, _)| n) else {
        return false;
    };
    let mut get = |key: &str, expected: &str, strip: &[u8]| -> Option<f64> {
        let tok = field(&clean, key)?;
        let t: Vec<u8> = tok.iter().copied().filter(|b| *b != b',').collect();
        let t = t.strip_suffix(strip).unwrap_or(&t);
        let what = key.trim_end_matches(':');
        read_field(
            t,
            tok,
            non_negative,
            line_no,
            what,
            expected,
            &mut scan.problems,
        )
    };
    let tps = get("tps:", "tokens per second per GPU (`1,234`)", b"");
    let tflops = get("tflops:", "a number of TFLOP/s per GPU", b"");
    let mfu = get("mfu:", "a percentage (`34.29%`)", b"%").map(|m| m / 100.0);
    scan.titan.push(TitanStep {
        rank,
        step,
        tps,
        tflops,
        mfu,
        line: line_no,
    });
    true
}

/// A Hugging Face Trainer dict line: `{'loss': …}` (counted; a NaN
/// `grad_norm` noted) or `{'train_runtime': …}`. True when the line is one.
fn hf_line(body: &[u8], line_no: usize, scan: &mut Scan) -> bool {
    let f = finders();
    let value = |key: &str| -> Option<&[u8]> {
        let k = format!("'{key}':");
        let i = memchr::memmem::find(body, k.as_bytes())?;
        let t = trim_start(&body[i + k.len()..]);
        let n = t.iter().take_while(|b| !matches!(b, b',' | b'}')).count();
        let v = &t[..n];
        Some(
            v.strip_prefix(b"'")
                .and_then(|v| v.strip_suffix(b"'"))
                .unwrap_or(v),
        )
    };
    if f.hf_runtime.find(body).is_some() {
        let mut num = |key: &str| -> Option<f64> {
            let tok = value(key)?;
            let expected = format!("a positive number after `'{key}':`");
            read_field(
                tok,
                tok,
                positive,
                line_no,
                key,
                &expected,
                &mut scan.problems,
            )
        };
        let runtime = num("train_runtime");
        let sps = num("train_samples_per_second");
        let steps = num("train_steps_per_second");
        if let (Some(r), Some(s)) = (runtime, sps) {
            scan.hf.summary = Some((r, s, steps, line_no));
        }
        return true;
    }
    if f.hf_loss.find(body).is_some() {
        scan.hf.steps += 1;
        if scan.nan_grad.is_none()
            && value("grad_norm").is_some_and(|v| v.eq_ignore_ascii_case(b"nan"))
        {
            scan.nan_grad = Some(NanGrad {
                line: line_no,
                iteration: None,
            });
        }
        return true;
    }
    false
}

/// Strip rank prefixes; returns the rank key and the rest of the line.
pub fn rank_prefix(line: &[u8]) -> (u64, &[u8]) {
    let mut rest = line;
    let mut labels: Vec<u32> = Vec::new();
    loop {
        let t = trim_start(rest);
        if let Some((n, after)) = srun_label(t)
            .or_else(|| bracket_label(t, b"[rank", b"]:"))
            .or_else(|| bracket_label(t, b"[default", b"]:"))
            .or_else(|| mpi_label(t))
        {
            labels.push(n);
            rest = after;
            if labels.len() == 2 {
                break;
            }
        } else {
            break;
        }
    }
    let key = match labels.as_slice() {
        [] => NO_RANK,
        [a] => (*a as u64) << 32,
        [a, b, ..] => ((*a as u64) << 32) | (*b as u64 + 1),
    };
    (key, if labels.is_empty() { line } else { rest })
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| **b == b' ' || **b == b'\t').count();
    &s[n..]
}

fn digits(s: &[u8]) -> Option<(u64, &[u8])> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 18 {
        return None;
    }
    let v = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
    Some((v, &s[n..]))
}

/// `0: ` (srun --label).
fn srun_label(t: &[u8]) -> Option<(u32, &[u8])> {
    let (n, rest) = digits(t)?;
    let rest = rest.strip_prefix(b": ")?;
    Some((u32::try_from(n).ok()?, rest))
}

/// `[rank3]:`, `[default3]:`.
fn bracket_label<'a>(t: &'a [u8], open: &[u8], close: &[u8]) -> Option<(u32, &'a [u8])> {
    let (n, rest) = digits(t.strip_prefix(open)?)?;
    Some((u32::try_from(n).ok()?, rest.strip_prefix(close)?))
}

/// `[1,3]<stdout>:` (Open MPI --tag-output; the rank is the second number).
fn mpi_label(t: &[u8]) -> Option<(u32, &[u8])> {
    let (_, rest) = digits(t.strip_prefix(b"[")?)?;
    let (n, rest) = digits(rest.strip_prefix(b",")?)?;
    let rest = rest.strip_prefix(b"]")?;
    let rest = rest
        .strip_prefix(b"<stdout>:")
        .or_else(|| rest.strip_prefix(b"<stderr>:"))?;
    Some((u32::try_from(n).ok()?, rest))
}

/// `iteration N/M` (spaces allowed around the numbers and the slash).
pub fn iteration_marker(body: &[u8]) -> Option<(u64, u64)> {
    let f = finders();
    let mut pos = 0;
    while let Some(i) = f.iteration.find(&body[pos..]) {
        let after = &body[pos + i + "iteration".len()..];
        pos += i + 1;
        let t = trim_start(after);
        if t.len() == after.len() {
            continue;
        }
        let Some((n, rest)) = digits(t) else { continue };
        let Some(rest) = trim_start(rest).strip_prefix(b"/") else {
            continue;
        };
        let Some((m, _)) = digits(trim_start(rest)) else {
            continue;
        };
        return Some((n, m));
    }
    None
}

/// The token after `key` and an optional `:` or `=`.
fn value_after(s: &[u8]) -> &[u8] {
    let t = trim_start(s);
    let t = t
        .strip_prefix(b":")
        .or_else(|| t.strip_prefix(b"="))
        .unwrap_or(t);
    let t = trim_start(t);
    let n = t
        .iter()
        .take_while(|b| !matches!(b, b' ' | b'\t' | b'|' | b','))
        .count();
    &t[..n]
}

/// The token just before `at` (skipping spaces).
fn value_before(s: &[u8], at: usize) -> &[u8] {
    let head = &s[..at];
    let end = head.len() - head.iter().rev().take_while(|b| **b == b' ').count();
    let start = head[..end]
        .iter()
        .rposition(|b| matches!(b, b' ' | b'\t' | b'|'))
        .map_or(0, |i| i + 1);
    &head[start..end]
}

fn number(tok: &[u8]) -> Option<f64> {
    std::str::from_utf8(tok).ok()?.parse::<f64>().ok()
}

fn positive(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

fn non_negative(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// One numeric field of a line, every format's way: the number `tok`
/// holds when `ok` accepts it; otherwise `None`, and a problem (`what`
/// unreadable on line `line_no`, `expected`, found `shown`: the token as
/// the line has it) added to `problems`.
fn read_field(
    tok: &[u8],
    shown: &[u8],
    ok: fn(f64) -> bool,
    line_no: usize,
    what: &str,
    expected: &str,
    problems: &mut Vec<Problem>,
) -> Option<f64> {
    let v = number(tok).filter(|v| ok(*v));
    if v.is_none() {
        problems.push(bad(line_no, what, expected, shown));
    }
    v
}

fn nan_grad_norm(body: &[u8]) -> bool {
    let f = finders();
    for finder in [&f.grad_space, &f.grad_under] {
        let mut pos = 0;
        while let Some(i) = finder.find(&body[pos..]) {
            let at = pos + i + "grad norm".len();
            let tok = value_after(&body[at..]);
            let lower = tok.to_ascii_lowercase();
            if matches!(lower.as_slice(), b"nan" | b"-nan" | b"+nan") {
                return true;
            }
            pos = at;
        }
    }
    false
}

/// `using world size: 16, data-parallel size: 2, context-parallel size: 1,
/// tensor-model-parallel size: 8, pipeline-model-parallel size: 1`.
fn world_line(s: &[u8], line_no: usize, scan: &mut Scan) {
    let text = String::from_utf8_lossy(s);
    for part in text.split(',') {
        let Some((name, v)) = part.rsplit_once(':') else {
            continue;
        };
        let name = name.trim().trim_start_matches("using ").replace('-', "_");
        let key = match name.as_str() {
            "world size" => "world_size",
            "tensor_model_parallel size" => "tensor_model_parallel_size",
            "pipeline_model_parallel size" => "pipeline_model_parallel_size",
            "context_parallel size" => "context_parallel_size",
            "data_parallel size" | "data_parallel_size" => "data_parallel_size",
            _ => continue,
        };
        if !scan.args.iter().any(|(n, _, _)| n == key) {
            scan.args
                .push((key.to_string(), v.trim().to_string(), line_no));
        }
    }
}

/// Megatron's argument names referee reads.
pub const ARGS: &[&str] = &[
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "global_batch_size",
    "micro_batch_size",
    "seq_length",
    "world_size",
    "data_parallel_size",
    "train_iters",
    "bf16",
    "fp16",
    "fp8",
    "use_torch_fsdp2",
    "use_custom_fsdp",
    "use_megatron_fsdp",
];

/// `  seq_length ...................................... 1024`; true when
/// the line is one.
fn argument_line(body: &[u8], line_no: usize, scan: &mut Scan) -> bool {
    let t = trim_start(body);
    let n = t
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if n == 0 || t.get(n) != Some(&b' ') {
        return false;
    }
    let rest = &t[n + 1..];
    let dots = rest.iter().take_while(|b| **b == b'.').count();
    if dots < 2 || rest.get(dots) != Some(&b' ') {
        return false;
    }
    let name = String::from_utf8_lossy(&t[..n]).to_string();
    if ARGS.contains(&name.as_str()) && !scan.args.iter().any(|(k, _, _)| *k == name) {
        let v = String::from_utf8_lossy(&rest[dots..]).trim().to_string();
        scan.args.push((name, v, line_no));
    }
    true
}

fn timing_line(
    body: &[u8],
    rank: u64,
    iteration: Option<(u64, u64)>,
    line_no: usize,
    scan: &mut Scan,
) {
    let f = finders();
    let mut dialect = None;
    let mut step_s = None;
    // Kept only for a line that is a timing line of an iteration.
    let mut problems = Vec::new();
    // The step time: NeMo's in seconds, Megatron's in milliseconds.
    let step = if let Some(i) = f.nemo_step.find(body) {
        let tok = value_after(&body[i + "train_step_timing in s".len()..]);
        let expected = "a positive number of seconds after `train_step_timing in s:`";
        Some((Dialect::Nemo, tok, expected, 1.0))
    } else if let Some(i) = f.megatron_step.find(body) {
        let tok = value_after(&body[i + "elapsed time per iteration (ms):".len()..]);
        let expected = "a positive number of milliseconds after `elapsed time per iteration (ms):`";
        Some((Dialect::Megatron, tok, expected, 1000.0))
    } else {
        None
    };
    if let Some((d, tok, expected, per_s)) = step {
        dialect = Some(d);
        let what = "step time";
        step_s = read_field(tok, tok, positive, line_no, what, expected, &mut problems)
            .map(|v| v / per_s);
    }
    let mut tflops = None;
    let tf = if let Some(i) = f.nemo_tflops.find(body) {
        dialect.get_or_insert(Dialect::Nemo);
        Some((
            "TFLOPS_per_GPU:",
            value_after(&body[i + "TFLOPS_per_GPU:".len()..]),
        ))
    } else if let Some(i) = f.megatron_tflops.find(body) {
        dialect.get_or_insert(Dialect::Megatron);
        Some((
            "throughput per GPU (TFLOP/s/GPU):",
            value_after(&body[i + "(TFLOP/s/GPU):".len()..]),
        ))
    } else if let Some(i) = f.tflop_unit.find(body) {
        dialect.get_or_insert(Dialect::Megatron);
        let at = if body[..i].ends_with(b"MODEL_") {
            i - 6
        } else {
            i
        };
        Some(("TFLOP/s/GPU", value_before(body, at)))
    } else {
        None
    };
    if let Some((key, tok)) = tf {
        let expected = format!("a number with `{key}`");
        let what = "model TFLOP/s per GPU";
        tflops = read_field(
            tok,
            tok,
            non_negative,
            line_no,
            what,
            &expected,
            &mut problems,
        );
    }
    let Some(dialect) = dialect else { return };
    let Some((iteration, last)) = iteration else {
        scan.unmarked += 1;
        return;
    };
    let gbs = f
        .gbs_nemo
        .find(body)
        .map(|i| i + "global_batch_size:".len())
        .or_else(|| {
            f.gbs_megatron
                .find(body)
                .map(|i| i + "global batch size:".len())
        })
        .and_then(|at| number(value_after(&body[at..])))
        .filter(|v| v.fract() == 0.0 && *v > 0.0 && *v < 1e15)
        .map(|v| v as u64);
    scan.problems.extend(problems);
    scan.samples.push(Sample {
        rank,
        dialect,
        iteration,
        last,
        step_s,
        tflops,
        gbs,
        line: line_no,
    });
}

/// Scan a whole text (the pieces in parallel when it is large).
pub fn scan_bytes(text: &[u8]) -> Scan {
    const PIECE_MIN: usize = 4 << 20;
    let threads = rayon::current_num_threads().max(1);
    if text.len() < PIECE_MIN || threads == 1 {
        return scan_piece(text);
    }
    let n = (threads * 2).min(text.len() / PIECE_MIN).max(1);
    let mut cuts = vec![0];
    for k in 1..n {
        let want = text.len() * k / n;
        let at = memchr::memchr(b'\n', &text[want..]).map_or(text.len(), |j| want + j + 1);
        if at > *cuts.last().expect("non-empty") && at < text.len() {
            cuts.push(at);
        }
    }
    cuts.push(text.len());
    let parts: Vec<Scan> = cuts
        .par_windows(2)
        .map(|w| scan_piece(&text[w[0]..w[1]]))
        .collect();
    let mut out = Scan::default();
    for p in parts {
        out.append(p);
    }
    out
}

/// Read and scan one file: blocks of 32 MiB read by a second thread while
/// the previous block is scanned.
///
/// `links`: whether `path` may be a link (a path the user typed); the file
/// must be a regular file within the cap for logs (see
/// `referee_rules::untrusted`), and is read through a reader that stops
/// there.
pub fn scan_file(path: &Path, links: referee_rules::untrusted::Links) -> std::io::Result<Scan> {
    const BLOCK: usize = 32 << 20;
    let opened =
        referee_rules::untrusted::open(path, referee_rules::untrusted::FileKind::Log, links)?;
    let len = opened.size();
    let mut file = opened.reader();
    if len <= BLOCK as u64 {
        let mut buf = Vec::with_capacity(len as usize + 1);
        file.read_to_end(&mut buf)?;
        return Ok(scan_bytes(&buf));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<Vec<u8>>>(1);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|sc| {
        sc.spawn(move || {
            let mut carry: Vec<u8> = Vec::new();
            loop {
                let mut buf = back_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BLOCK + (1 << 20)));
                buf.clear();
                buf.append(&mut carry);
                // `read_to_end` through `take` fills the spare capacity
                // without zeroing it first (File reads into uninitialised
                // memory).
                let want = BLOCK.saturating_sub(buf.len()).max(1 << 20);
                let eof = match (&mut file).take(want as u64).read_to_end(&mut buf) {
                    Ok(k) => k < want,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if !eof && let Some(nl) = memchr::memrchr(b'\n', &buf) {
                    carry.extend_from_slice(&buf[nl + 1..]);
                    buf.truncate(nl + 1);
                }
                if (!buf.is_empty() && tx.send(Ok(buf)).is_err()) || eof {
                    return;
                }
            }
        });
        let mut out = Scan::default();
        for block in rx {
            let block = block?;
            out.append(scan_bytes(&block));
            let _ = back_tx.send(block);
        }
        Ok(out)
    })
}

/// Facts read from MLLOG records.
#[derive(Debug, Clone, Default)]
pub struct MllogFacts {
    pub benchmark: Option<(String, usize)>,
    pub platform: Option<(String, usize)>,
    pub gbs: Option<(u64, usize)>,
    pub seq_len: Option<(u64, usize)>,
    pub precision: Option<(String, usize)>,
    /// referee's throughput-mode event.
    pub window: Option<WindowEvent>,
    /// Per-block `throughput` events: (samples_count, samples/s, line).
    pub blocks: Vec<(f64, f64, usize)>,
    /// NVIDIA's `tracked_stats` throughput: (step, samples/s, line).
    pub tracked: Vec<(Option<u64>, f64, usize)>,
    pub run_stop: Option<(String, usize)>,
    pub problems: Vec<Problem>,
}

/// referee's `throughput` event of a throughput-mode run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowEvent {
    pub samples_per_second: f64,
    pub tokens_per_second: Option<f64>,
    pub achieved_flops: Option<f64>,
    pub mfu: Option<f64>,
    pub step_seconds: Option<f64>,
    /// `[start, end)` steps, as `referee run --window` gives them.
    pub start: u64,
    pub end: u64,
    pub line: usize,
}

/// Read the MLLOG lines a scan collected, through `rules::mllog`, and
/// gather the keys perf uses. Line numbers are the file's.
pub fn mllog_facts(lines: &[(usize, Vec<u8>)]) -> MllogFacts {
    use referee_rules::value::Value;
    // The MLLOG reader ends lines at a lone `\r` too (as the official
    // parser does): map each of its lines back to the file's line.
    let mut joined = Vec::new();
    let mut file_line = Vec::new();
    for (n, t) in lines {
        joined.extend_from_slice(t);
        joined.push(b'\n');
        let inner = t.strip_suffix(b"\r").unwrap_or(t);
        let segments = 1 + inner.iter().filter(|b| **b == b'\r').count();
        file_line.extend(std::iter::repeat_n(*n, segments));
    }
    let mut f = MllogFacts::default();
    let Ok(log) = mllog::read_from(joined.as_slice()) else {
        return f;
    };
    let last = lines.last().map_or(1, |(n, _)| *n);
    let at = |l: usize| file_line.get(l.wrapping_sub(1)).copied().unwrap_or(last);
    for p in &log.problems {
        f.problems.push(Problem {
            file: String::new(),
            line: at(p.line),
            message: format!("unreadable MLLOG line: {}", p.message),
            expected: "`:::MLLOG ` and a JSON object with time_ms, key, value and metadata".into(),
            found: format!("`{}`", p.text.chars().take(120).collect::<String>()),
        });
    }
    let num = |v: Option<&Value>| v.and_then(Value::as_f64).filter(|x| x.is_finite());
    for r in &log.records {
        let line = at(r.line);
        let text = r.value().as_str().map(str::to_string);
        match r.key() {
            "submission_benchmark" => f.benchmark = text.map(|t| (t, line)),
            "submission_platform" => f.platform = text.map(|t| (t, line)),
            "global_batch_size" => f.gbs = num(Some(r.value())).map(|v| (v as u64, line)),
            "max_sequence_length" => f.seq_len = num(Some(r.value())).map(|v| (v as u64, line)),
            "lowest_numerical_precision_in_linear" => f.precision = text.map(|t| (t, line)),
            "run_stop" => {
                let status = r
                    .meta("status")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string();
                f.run_stop = Some((status, line));
            }
            "tracked_stats" => {
                if let Some(t) = num(r.value().get("throughput")) {
                    f.tracked
                        .push((num(r.meta("step")).map(|s| s as u64), t, line));
                }
            }
            "throughput" => {
                let v = r.value();
                let Some(sps) = num(v.get("samples_per_second")) else {
                    continue;
                };
                match (
                    num(r.meta("window_start_step")),
                    num(r.meta("window_end_step")),
                ) {
                    (Some(a), Some(b)) => {
                        f.window = Some(WindowEvent {
                            samples_per_second: sps,
                            tokens_per_second: num(v.get("tokens_per_second")),
                            achieved_flops: num(v.get("achieved_flops")),
                            mfu: num(v.get("mfu")),
                            step_seconds: num(v.get("step_seconds")),
                            start: a as u64,
                            end: b as u64,
                            line,
                        })
                    }
                    _ => {
                        if let Some(sc) = num(r.meta("samples_count")) {
                            f.blocks.push((sc, sps, line));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    f
}

#[cfg(test)]
mod tests;
