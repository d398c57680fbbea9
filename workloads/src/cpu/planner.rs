//! The measured planner of the dense products on the pool (the LLM's linear
//! layers and head) and of the attention: for each product shape it
//! chooses how [`dense::matmul_blocked`] cuts the product ([`Blocking`]:
//! under an AVX-512 kernel set, its own kernels or the AVX2 ones; threads'
//! blocks of rows or of columns, reduction block, packing of B, loop
//! order, packing of a transposed A, row blocks per thread, register tile
//! rows), and for each attention shape how many queries a block takes and
//! on which kernels ([`attention_plan`]), by timing candidates on the
//! machine at hand, once per shape, in the manner of FFTW's planner (a
//! choice imported from an earlier run is timed again against the
//! hand-chosen one at its first use: [`recheck`]); then a product's best
//! few candidates take turns in the model's own passes, where its
//! operands are as cold as in training, and the fastest there is kept
//! ([`begin_trials`]). Every
//! candidate gives bitwise the same product (each output value is one
//! chain of fused multiply-adds over K in order, whatever the blocks and
//! the vectors' width), so a choice changes the speed only, never a
//! result: calibration and RCPs hold whatever a machine measured, and a
//! noisy measurement costs time, not correctness.
//!
//! Owns: the candidates, their timing (synthetic and in the model's
//! passes), the process's table of choices (per
//! kernel set and thread count) and its import and export, and the opt-in
//! profile of the products as the model runs them ([`profile_products`]).
//! Does not know:
//! files (the harness keeps the table between runs, keyed by CPU model too,
//! and records it in the run's provenance), which model calls it, or how an
//! attention runs (its caller runs one for a given plan).

use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::dense::{self, Blocking, Layout, Threads};
use super::kernels::Isa;

/// Whether a product of a shape not in the table is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Shapes not in the table get the hand-chosen blocking
    /// ([`Blocking::default_for`]); nothing is timed. The library's
    /// default (tests, examples).
    Fixed,
    /// A shape not in the table is measured at its first product (what
    /// `referee run` does unless told otherwise).
    Measure,
}

/// A product on the pool: `m × k` times `k × n`, each operand stored as its
/// layout says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Layout,
    pub b: Layout,
}

impl Shape {
    /// Floating-point operations of one product (a multiply and an add per
    /// term).
    pub fn flops(&self) -> f64 {
        2.0 * (self.m * self.n * self.k) as f64
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = |l: Layout| if l == Layout::Transposed { "ᵀ" } else { "" };
        write!(
            f,
            "{}×{}{} · {}×{}{}",
            self.m,
            self.k,
            t(self.a),
            self.k,
            self.n,
            t(self.b)
        )
    }
}

/// One candidate's best time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub blocking: Blocking,
    /// Best of the rounds, microseconds per product.
    pub micros: f64,
}

/// The choice for one shape, with the timings it was chosen on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub shape: Shape,
    pub blocking: Blocking,
    /// Every candidate timed (empty where the entry was given, not measured).
    #[serde(default)]
    pub timings: Vec<Timing>,
    /// Where the choice was made by a trial in the model's own passes
    /// ([`begin_trials`]), its candidates' medians there, µs per product,
    /// the choice it started from first (empty otherwise). A choice made
    /// there is judged there again, by the next run's trial, not timed
    /// against the hand-chosen blocking on synthetic operands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_step: Vec<Timing>,
}

/// One shape's trial in the model's own passes, as [`end_trials`] settled
/// it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRecord {
    /// The shape's entry before the trial.
    pub before: Entry,
    /// Each candidate's median in the step, µs per product, the entry's
    /// choice before the trial first.
    pub medians: Vec<Timing>,
    /// The choice after it.
    pub chosen: Blocking,
}

impl TrialRecord {
    /// Whether the trial moved the choice.
    pub fn changed(&self) -> bool {
        self.chosen != self.before.blocking
    }

    /// The choice's median over that of the choice before the trial
    /// (below 1: the trial found a faster one).
    pub fn gain(&self) -> Option<f64> {
        let first = self.medians.first()?;
        let now = self.medians.iter().find(|t| t.blocking == self.chosen)?;
        Some(now.micros / first.micros)
    }
}

impl Entry {
    /// The chosen blocking's time over the hand-chosen one's, where both
    /// were timed (below 1: the measurement found a faster blocking).
    pub fn gain(&self) -> Option<f64> {
        Some(
            self.best_micros(self.blocking)?
                / self.best_micros(Blocking::default_for(self.shape.a))?,
        )
    }

    /// The best time measured with blocking `b`, µs, if it was timed.
    pub fn best_micros(&self, b: Blocking) -> Option<f64> {
        self.timings
            .iter()
            .filter(|t| t.blocking == b)
            .map(|t| t.micros)
            .reduce(f64::min)
    }
}

/// An attention on the pool: sequences of `t` tokens, `heads` heads of
/// `dh` values each (the number of sequences changes only how they are
/// shared out, not a block's work).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttentionShape {
    pub t: usize,
    pub heads: usize,
    pub dh: usize,
}

impl std::fmt::Display for AttentionShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "attention T {} · {}×{}", self.t, self.heads, self.dh)
    }
}

/// How an attention runs: its queries per block, and (under an AVX-512
/// kernel set) whether its products run on the AVX2 kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionPlan {
    pub block: usize,
    pub narrow: bool,
    /// The row-wise passes (softmax, RoPE, the copies) 16 lanes wide
    /// ([`Isa::vectorised_wide`]) rather than 8, under an AVX-512 set on
    /// its own kernels: faster where the 512-bit units are full width,
    /// slower where they are two 256-bit halves (rows of 16 to 128 keys
    /// leave longer scalar remainders at 16 lanes, and the halves do not
    /// pay for them), so the planner times both per machine. The same bits
    /// either way.
    pub wide: bool,
}

impl AttentionPlan {
    /// The hand-chosen plan: [`ATTENTION_BLOCK`] on the set's own kernels.
    pub const DEFAULT: AttentionPlan = AttentionPlan {
        block: ATTENTION_BLOCK,
        narrow: false,
        wide: false,
    };

    /// The kernels this plan's products run on under the kernel set `isa`
    /// at `shape`: the AVX2 ones where it asks for them and every product
    /// of the attention gives them the same columns as the set's own
    /// kernels ([`Blocking::kernels`] for their widths: `dh`, and
    /// the keys up to a block's end, a multiple of 16 or `t`), so that the
    /// attention is bitwise the same; else `isa`.
    pub fn kernels(self, isa: Isa, shape: AttentionShape) -> Isa {
        let b = Blocking {
            narrow: self.narrow,
            ..Blocking::default_for(Layout::Normal)
        };
        match (b.kernels(isa, shape.dh), b.kernels(isa, shape.t)) {
            (dh, t) if dh == t => dh,
            _ => isa,
        }
    }
}

/// The choice of queries per block (and kernels) for one attention shape,
/// with the timings it was chosen on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttentionEntry {
    pub shape: AttentionShape,
    pub block: usize,
    /// The products on the AVX2 kernels under an AVX-512 set
    /// ([`AttentionPlan::kernels`]); false in files from before this knob.
    #[serde(default)]
    pub narrow: bool,
    /// The row-wise passes 16 lanes wide ([`AttentionPlan::wide`]); false
    /// in files from before this knob.
    #[serde(default)]
    pub wide: bool,
    /// (block, best microseconds of a forward and backward pass) for every
    /// block timed on the set's own kernels (empty where the entry was
    /// given, not measured).
    #[serde(default)]
    pub timings: Vec<(usize, f64)>,
    /// The same on the AVX2 kernels, where they were an alternative.
    #[serde(default)]
    pub narrow_timings: Vec<(usize, f64)>,
    /// The same with the row-wise passes 16 lanes wide (the set's own
    /// kernels), where that is an alternative.
    #[serde(default)]
    pub wide_timings: Vec<(usize, f64)>,
}

impl AttentionEntry {
    /// The plan chosen.
    pub fn plan(&self) -> AttentionPlan {
        AttentionPlan {
            block: self.block,
            narrow: self.narrow,
            wide: self.wide,
        }
    }

    /// The best time measured with `plan`, µs, if it was timed.
    pub fn best_micros(&self, plan: AttentionPlan) -> Option<f64> {
        let list = if plan.wide {
            &self.wide_timings
        } else if plan.narrow {
            &self.narrow_timings
        } else {
            &self.timings
        };
        list.iter()
            .filter(|t| t.0 == plan.block)
            .map(|t| t.1)
            .reduce(f64::min)
    }

    /// The chosen plan's time over the hand-chosen one's
    /// ([`AttentionPlan::DEFAULT`]), where both were timed.
    pub fn gain(&self) -> Option<f64> {
        Some(self.best_micros(self.plan())? / self.best_micros(AttentionPlan::DEFAULT)?)
    }
}

/// How many knobs the attention's planner turns (queries per block,
/// kernels, the row-wise passes' width): a table kept between processes
/// records it, so that choices made before a knob existed are measured
/// again.
pub const ATTENTION_KNOBS: usize = 3;

/// The hand-chosen queries per block of an attention.
pub const ATTENTION_BLOCK: usize = 16;

/// The blocks of queries the planner tries for sequences of `t` tokens:
/// [`ATTENTION_BLOCK`] first, then its multiples by 2 below `t`, and one
/// block of the whole sequence. Only multiples of 16 queries: a block's
/// last key is then a multiple of every kernel set's vector width (or the
/// sequence's last), so every column of its scores is computed by the same
/// vector code whatever the block (a block of 8 on AVX-512 would leave
/// columns 8–15 of its first block to the scalar tail, other bits).
pub fn attention_blocks(t: usize) -> Vec<usize> {
    let mut out = vec![ATTENTION_BLOCK];
    let mut b = ATTENTION_BLOCK;
    while b < t {
        b *= 2;
        out.push(b);
    }
    out
}

struct Table {
    mode: Mode,
    /// (kernel set, threads, choice). A few dozen shapes at most: a list.
    entries: Vec<(Isa, usize, Entry)>,
    attention: Vec<(Isa, usize, AttentionEntry)>,
    /// Imported choices not yet timed again in this process ([`recheck`]).
    unchecked: Vec<(Isa, usize, Shape)>,
    /// The last trials in the step of each shape ([`end_trials`]).
    trials: Vec<(Isa, usize, TrialRecord)>,
    unchecked_attention: Vec<(Isa, usize, AttentionShape)>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    mode: Mode::Fixed,
    entries: Vec::new(),
    attention: Vec::new(),
    unchecked: Vec::new(),
    trials: Vec::new(),
    unchecked_attention: Vec::new(),
});

fn table() -> std::sync::MutexGuard<'static, Table> {
    // A panic while the lock was held leaves a table of whole entries.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets whether shapes not in the table are measured.
pub fn set_mode(mode: Mode) {
    table().mode = mode;
}

pub fn mode() -> Mode {
    table().mode
}

/// Adds `entries` (measured earlier on this machine, for `isa` on
/// `threads` threads) to the table, replacing those of the same shapes. In
/// [`Mode::Measure`], each is timed again at its first use ([`recheck`]).
pub fn import(isa: Isa, threads: usize, entries: Vec<Entry>) {
    let mut t = table();
    for e in &entries {
        mark_unchecked(&mut t.unchecked, isa, threads, e.shape);
    }
    replace_keyed(&mut t.entries, isa, threads, entries, |a, b| {
        a.shape == b.shape
    });
}

/// The table's entries for `isa` on `threads` threads, in the order they
/// were added.
pub fn export(isa: Isa, threads: usize) -> Vec<Entry> {
    keyed(&table().entries, isa, threads)
}

/// Adds attention `entries` (as [`import`] does products; each timed again
/// at its first use in [`Mode::Measure`]: [`recheck_attention`]).
pub fn import_attention(isa: Isa, threads: usize, entries: Vec<AttentionEntry>) {
    let mut t = table();
    for e in &entries {
        mark_unchecked(&mut t.unchecked_attention, isa, threads, e.shape);
    }
    replace_keyed(&mut t.attention, isa, threads, entries, |a, b| {
        a.shape == b.shape
    });
}

/// Records (`isa`, `threads`, `s`) as imported and not yet checked.
fn mark_unchecked<S: PartialEq>(list: &mut Vec<(Isa, usize, S)>, isa: Isa, threads: usize, s: S) {
    if !list
        .iter()
        .any(|(i, n, x)| *i == isa && *n == threads && *x == s)
    {
        list.push((isa, threads, s));
    }
}

/// Whether (`isa`, `threads`, `s`) was imported and not yet checked; from
/// now on, it counts as checked.
fn take_unchecked<S: PartialEq>(
    list: &mut Vec<(Isa, usize, S)>,
    isa: Isa,
    threads: usize,
    s: &S,
) -> bool {
    let before = list.len();
    list.retain(|(i, n, x)| !(*i == isa && *n == threads && x == s));
    list.len() < before
}

/// The trials in the step of the last [`end_trials`] for `isa` on
/// `threads` threads, in the table's order.
pub fn export_trials(isa: Isa, threads: usize) -> Vec<TrialRecord> {
    keyed(&table().trials, isa, threads)
}

/// The table's attention entries for `isa` on `threads` threads, in the
/// order they were added.
pub fn export_attention(isa: Isa, threads: usize) -> Vec<AttentionEntry> {
    keyed(&table().attention, isa, threads)
}

/// Puts `entries` into `list` under (`isa`, `threads`), each replacing the
/// one of the same shape (`same`) there.
fn replace_keyed<E>(
    list: &mut Vec<(Isa, usize, E)>,
    isa: Isa,
    threads: usize,
    entries: Vec<E>,
    same: impl Fn(&E, &E) -> bool,
) {
    for e in entries {
        list.retain(|(i, n, x)| !(*i == isa && *n == threads && same(x, &e)));
        list.push((isa, threads, e));
    }
}

/// Where in `list` the entry under (`isa`, `threads`) that `matches` is.
fn position_keyed<E>(
    list: &[(Isa, usize, E)],
    isa: Isa,
    threads: usize,
    matches: impl Fn(&E) -> bool,
) -> Option<usize> {
    list.iter()
        .position(|(i, n, e)| *i == isa && *n == threads && matches(e))
}

/// The entries of `list` under (`isa`, `threads`), in the order they were
/// added.
fn keyed<E: Clone>(list: &[(Isa, usize, E)], isa: Isa, threads: usize) -> Vec<E> {
    list.iter()
        .filter(|(i, n, _)| *i == isa && *n == threads)
        .map(|(_, _, e)| e.clone())
        .collect()
}

/// Empties the table (its mode stays).
pub fn clear() {
    let mut t = table();
    t.entries.clear();
    t.attention.clear();
    t.unchecked.clear();
    t.trials.clear();
    t.unchecked_attention.clear();
}

/// The plan of an attention of `shape` on `threads` threads: the table's
/// (in [`Mode::Measure`], an imported plan is timed again first, once, as
/// [`blocking_for`] does: [`recheck_attention`]), else (in
/// [`Mode::Measure`], measured first: `run(plan)` runs one forward and
/// backward pass as `plan` says, on the pool) [`AttentionPlan::DEFAULT`].
pub fn attention_plan(
    isa: Isa,
    threads: usize,
    shape: AttentionShape,
    run: &mut dyn FnMut(AttentionPlan),
) -> AttentionPlan {
    let mut t = table();
    let measuring = t.mode == Mode::Measure;
    if let Some(i) = position_keyed(&t.attention, isa, threads, |e| e.shape == shape) {
        // (The hand-chosen plan has nothing to be timed against.)
        let unchecked =
            measuring && take_unchecked(&mut t.unchecked_attention, isa, threads, &shape);
        if !unchecked || t.attention[i].2.plan() == AttentionPlan::DEFAULT {
            return t.attention[i].2.plan();
        }
        let mut time = repeat_timer(AttentionPlan::DEFAULT, run);
        let e = recheck_attention(isa, shape, t.attention[i].2.clone(), &mut time);
        t.attention[i].2 = e;
        return t.attention[i].2.plan();
    }
    if !measuring || shape.t == 0 {
        return AttentionPlan::DEFAULT;
    }
    // Measured with the lock held, as a product is.
    let mut time = repeat_timer(AttentionPlan::DEFAULT, run);
    let e = choose_attention(isa, shape, &mut time);
    let p = e.plan();
    t.attention.push((isa, threads, e));
    p
}

/// The plans the attention's planner times for `shape` under the kernel
/// set `isa`: every block of [`attention_blocks`] on the set's own
/// kernels ([`AttentionPlan::DEFAULT`] first), then on the AVX2 kernels
/// where they are an alternative ([`AttentionPlan::kernels`]), then, under
/// an AVX-512 set, on its own kernels with the row-wise passes 16 lanes
/// wide ([`AttentionPlan::wide`]).
pub fn attention_candidates(isa: Isa, shape: AttentionShape) -> Vec<AttentionPlan> {
    let blocks = attention_blocks(shape.t);
    let narrow = AttentionPlan {
        narrow: true,
        ..AttentionPlan::DEFAULT
    };
    let mut variants = vec![(false, false)];
    if narrow.kernels(isa, shape) != isa {
        variants.push((true, false));
    }
    if isa == Isa::Avx512 {
        variants.push((false, true));
    }
    variants
        .into_iter()
        .flat_map(|(narrow, wide)| {
            blocks.iter().map(move |&block| AttentionPlan {
                block,
                narrow,
                wide,
            })
        })
        .collect()
}

/// The plan [`attention_plan`] keeps for `shape` given `time` (its
/// microseconds per pass): the fastest of [`attention_candidates`] where
/// it beats the hand-chosen plan by more than [`MARGIN`], twice (in its
/// rounds and timed against it afresh).
pub fn choose_attention(
    isa: Isa,
    shape: AttentionShape,
    time: &mut dyn FnMut(AttentionPlan) -> f64,
) -> AttentionEntry {
    let cands = attention_candidates(isa, shape);
    let mut best = best_times(&cands, time);
    let (fastest, t) = cands
        .iter()
        .copied()
        .zip(best.iter().copied())
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .unwrap_or((AttentionPlan::DEFAULT, f64::INFINITY));
    let mut plan = AttentionPlan::DEFAULT;
    if clearly_faster(t, best[0]) {
        let (d, c) = confirm(AttentionPlan::DEFAULT, fastest, time);
        for (p, x) in [(AttentionPlan::DEFAULT, d), (fastest, c)] {
            if let Some(i) = cands.iter().position(|c| *c == p) {
                best[i] = x;
            }
        }
        if clearly_faster(c, d) {
            plan = fastest;
        }
    }
    let timed = |narrow: bool, wide: bool| -> Vec<(usize, f64)> {
        cands
            .iter()
            .zip(&best)
            .filter(|(c, _)| (c.narrow, c.wide) == (narrow, wide))
            .map(|(c, t)| (c.block, *t))
            .collect()
    };
    AttentionEntry {
        shape,
        block: plan.block,
        narrow: plan.narrow,
        wide: plan.wide,
        timings: timed(false, false),
        narrow_timings: timed(true, false),
        wide_timings: timed(false, true),
    }
}

/// `dst (+)= a · b` on the pool (as [`dense::matmul`] with
/// [`Threads::All`]), cut as the table says for this shape; in
/// [`Mode::Measure`], a shape not in it is measured first.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    a_layout: Layout,
    b: &[f32],
    b_layout: Layout,
    dst: &mut [f32],
    accumulate: bool,
) {
    let shape = Shape {
        m,
        n,
        k,
        a: a_layout,
        b: b_layout,
    };
    let threads = rayon::current_num_threads();
    let trial = trial_blocking(isa, threads, shape);
    let blocking = trial.unwrap_or_else(|| blocking_for(isa, threads, shape));
    let t0 = (trial.is_some() || PROFILING.load(std::sync::atomic::Ordering::Relaxed))
        .then(Instant::now);
    dense::matmul_blocked(
        isa,
        Threads::All,
        m,
        n,
        k,
        a,
        a_layout,
        b,
        b_layout,
        dst,
        accumulate,
        blocking,
    );
    let Some(t0) = t0 else { return };
    let took = t0.elapsed().as_secs_f64();
    if let Some(b) = trial {
        record_trial(isa, threads, shape, b, took * 1e6);
    }
    if PROFILING.load(std::sync::atomic::Ordering::Relaxed) {
        let mut p = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
        match p.iter_mut().find(|x| x.shape == shape) {
            Some(x) => {
                x.calls += 1;
                x.seconds += took;
            }
            None => p.push(ProductTime {
                shape,
                calls: 1,
                seconds: took,
            }),
        }
    }
}

/// The products of one shape timed while [`profile_products`] was on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProductTime {
    pub shape: Shape,
    pub calls: usize,
    /// Wall time of every call, seconds.
    pub seconds: f64,
}

impl ProductTime {
    /// The calls' rate, GFLOP/s.
    pub fn gflops(&self) -> f64 {
        self.shape.flops() * self.calls as f64 / self.seconds.max(1e-12) / 1e9
    }
}

static PROFILING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static PROFILE: Mutex<Vec<ProductTime>> = Mutex::new(Vec::new());

/// Times every product [`matmul`] runs from now on (`true`), per shape, as
/// the model runs them (operands where the model left them, not warmed up
/// as [`measure`] times them), or stops (`false`). Either way, the times so
/// far are cleared. Off by default: a diagnostic (`bench_step --products`).
pub fn profile_products(on: bool) {
    PROFILE.lock().unwrap_or_else(|e| e.into_inner()).clear();
    PROFILING.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The products timed since [`profile_products`]`(true)`, in the order
/// their shapes first ran.
pub fn product_times() -> Vec<ProductTime> {
    PROFILE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Candidates each shape tries in the model's own passes, at most
/// ([`trial_candidates`]).
pub const TRIAL_CANDIDATES: usize = 4;

/// Passes a trial takes per candidate ([`begin_trials`]).
pub const TRIAL_SAMPLES: usize = 3;

/// One shape's trial in the model's own passes.
struct Trial {
    isa: Isa,
    threads: usize,
    /// Its entry before the trial (the shape's).
    before: Entry,
    /// The table's choice first.
    cands: Vec<Blocking>,
    /// Microseconds of each call, per candidate.
    samples: Vec<Vec<f64>>,
    /// Calls in this pass so far.
    calls: usize,
}

/// The trials of [`begin_trials`] and the pass they are in.
struct Trials {
    list: Vec<Trial>,
    pass: usize,
}

static TRIALING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static TRIALS: Mutex<Trials> = Mutex::new(Trials {
    list: Vec::new(),
    pass: 0,
});

fn trials() -> std::sync::MutexGuard<'static, Trials> {
    TRIALS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The candidates a shape's trial takes turns with: its `chosen`
/// blocking, the hand-chosen one, for a transposed A (a weight gradient)
/// the choice with the fewest bytes moved, then the fastest others of
/// `timings` (synthetic, best first), each cutting the product differently
/// from those before it ([`Blocking::cut`]), [`TRIAL_CANDIDATES`] at most.
/// The fewest bytes: each thread a block of B's columns, read in place
/// (`split_columns`, no `pack_b`), so that B (`dy`, 6 MiB at the mini
/// LLM's b16) streams once through one thread, where the hand-chosen row
/// split copies it into a packed panel and streams that through every
/// thread. Synthetic timings, with B in the caches, cannot see what that
/// saves; where memory is the limit, the step can.
fn trial_candidates(isa: Isa, threads: usize, e: &Entry) -> Vec<Blocking> {
    let s = e.shape;
    let cut = |b: &Blocking| b.cut(isa, s.m, s.n, s.k, s.a, threads);
    let mut timed = e.timings.clone();
    timed.sort_by(|x, y| x.micros.total_cmp(&y.micros));
    let mut out: Vec<Blocking> = Vec::new();
    let least_traffic = (s.a == Layout::Transposed).then_some(Blocking {
        split_columns: true,
        pack_b: false,
        ..e.blocking
    });
    let order = [e.blocking, Blocking::default_for(s.a)];
    let firsts = order.into_iter().chain(least_traffic);
    for b in firsts.chain(timed.iter().map(|t| t.blocking)) {
        if out.len() == TRIAL_CANDIDATES {
            break;
        }
        if !out.iter().any(|o| cut(o) == cut(&b)) {
            out.push(b);
        }
    }
    out
}

/// Starts trials of the table's choices for `isa` on `threads` threads in
/// the model's own passes, and returns how many passes the caller is to
/// run (0: nothing to try), each after [`trial_pass`]; then
/// [`end_trials`]. Until then, each product of a shape in the table (on
/// the pool, through [`matmul`]) runs on one of its candidates
/// ([`TRIAL_CANDIDATES`]) and is timed where it runs, its operands where
/// the model's last pass left them. The candidates take turns by pass and
/// by the product's place in the pass (the `i`-th product of a shape in
/// pass `p` on candidate `(i + p) mod c`), so that over `c` passes each
/// candidate runs at every place once: the first product of a pass, whose
/// operands are the coldest, is not always the same candidate's. The planner's
/// synthetic timings warm the operands first, and a product's rate there
/// does not predict its rate in the step, where the operands come from L3
/// or memory and the weight gradients fall furthest below their synthetic
/// rate (`bench_step --products` shows both). Every candidate gives
/// bitwise the same product, so the passes' results are those of the
/// choice alone.
pub fn begin_trials(isa: Isa, threads: usize) -> usize {
    let mut t = table();
    t.trials.retain(|(i, n, _)| !(*i == isa && *n == threads));
    let mut tr = trials();
    tr.list.clear();
    tr.pass = 0;
    for (_, _, e) in t
        .entries
        .iter()
        .filter(|(i, n, _)| *i == isa && *n == threads)
    {
        let cands = trial_candidates(isa, threads, e);
        if cands.len() > 1 {
            tr.list.push(Trial {
                isa,
                threads,
                before: e.clone(),
                samples: vec![Vec::new(); cands.len()],
                cands,
                calls: 0,
            });
        }
    }
    TRIALING.store(!tr.list.is_empty(), std::sync::atomic::Ordering::Relaxed);
    let widest = tr.list.iter().map(|t| t.cands.len()).max().unwrap_or(0);
    widest * TRIAL_SAMPLES
}

/// Starts the next pass of the trials (before each).
pub fn trial_pass() {
    let mut tr = trials();
    tr.pass += 1;
    tr.list.iter_mut().for_each(|t| t.calls = 0);
}

/// Ends the trials [`begin_trials`] started: a shape whose every candidate
/// was timed takes the one of the lowest median where it beats its
/// choice's by more than [`MARGIN`] (its entry then records the trial:
/// [`Entry::in_step`]). Returns (and keeps, for [`export_trials`]) the
/// record of each such trial.
pub fn end_trials() -> Vec<TrialRecord> {
    TRIALING.store(false, std::sync::atomic::Ordering::Relaxed);
    let done = std::mem::take(&mut trials().list);
    let mut t = table();
    let mut records = Vec::new();
    for trial in done {
        let Some(medians) = trial
            .samples
            .iter()
            .map(|s| (!s.is_empty()).then(|| median(s)))
            .collect::<Option<Vec<f64>>>()
        else {
            continue;
        };
        let Some(i) = position_keyed(&t.entries, trial.isa, trial.threads, |e| {
            e.shape == trial.before.shape
        }) else {
            continue;
        };
        let medians: Vec<Timing> = trial
            .cands
            .iter()
            .zip(&medians)
            .map(|(b, m)| Timing {
                blocking: *b,
                micros: *m,
            })
            .collect();
        let e = &mut t.entries[i].2;
        let chosen = choose_in_step(&medians);
        if chosen != e.blocking {
            e.blocking = chosen;
            e.in_step = medians.clone();
        }
        let record = TrialRecord {
            before: trial.before,
            medians,
            chosen,
        };
        t.trials.push((trial.isa, trial.threads, record.clone()));
        records.push(record);
    }
    records
}

/// Of the candidates' medians in the step (the current choice first), the
/// fastest where it beats the first by more than [`MARGIN`], else the
/// first.
fn choose_in_step(medians: &[Timing]) -> Blocking {
    let first = medians.first().expect("a trial has candidates");
    let fastest = medians
        .iter()
        .min_by(|x, y| x.micros.total_cmp(&y.micros))
        .unwrap_or(first);
    if clearly_faster(fastest.micros, first.micros) {
        fastest.blocking
    } else {
        first.blocking
    }
}

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The blocking a product of `shape` takes while trials run (the next
/// candidate of its trial), or None (no trial of that shape).
fn trial_blocking(isa: Isa, threads: usize, shape: Shape) -> Option<Blocking> {
    if !TRIALING.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let mut tr = trials();
    let pass = tr.pass;
    let t = tr
        .list
        .iter_mut()
        .find(|t| t.isa == isa && t.threads == threads && t.before.shape == shape)?;
    let b = t.cands[(t.calls + pass) % t.cands.len()];
    t.calls += 1;
    Some(b)
}

/// Adds a timed call of `shape` on blocking `b` to its trial.
fn record_trial(isa: Isa, threads: usize, shape: Shape, b: Blocking, micros: f64) {
    let mut tr = trials();
    if let Some(t) = tr
        .list
        .iter_mut()
        .find(|t| t.isa == isa && t.threads == threads && t.before.shape == shape)
        && let Some(i) = t.cands.iter().position(|c| *c == b)
    {
        t.samples[i].push(micros);
    }
}

/// The blocking for `shape`: the table's (in [`Mode::Measure`], an
/// imported choice other than the hand-chosen one is timed again first,
/// once: [`recheck`]), else (measuring it first in [`Mode::Measure`]) the
/// hand-chosen one.
pub fn blocking_for(isa: Isa, threads: usize, shape: Shape) -> Blocking {
    let mut t = table();
    let measuring = t.mode == Mode::Measure;
    if let Some(i) = position_keyed(&t.entries, isa, threads, |e| e.shape == shape) {
        // (The hand-chosen blocking has nothing to be timed against; a
        // choice made in the step is judged there again, by the trials,
        // not by synthetic timings, which chose otherwise.)
        let unchecked = measuring && take_unchecked(&mut t.unchecked, isa, threads, &shape);
        let e = &t.entries[i].2;
        if !unchecked || e.blocking == Blocking::default_for(shape.a) || !e.in_step.is_empty() {
            return e.blocking;
        }
        let cached = t.entries[i].2.clone();
        let e = on_synthetic(isa, shape, &mut |time| {
            recheck(
                isa,
                shape,
                rayon::current_num_threads(),
                cached.clone(),
                time,
            )
        });
        t.entries[i].2 = e;
        return t.entries[i].2.blocking;
    }
    if !measuring || shape.m == 0 || shape.n == 0 || shape.k == 0 {
        return Blocking::default_for(shape.a);
    }
    // Measured with the lock held: another thread's product of the same
    // shape waits for the choice rather than measuring it again.
    let e = measure(isa, shape);
    let b = e.blocking;
    t.entries.push((isa, threads, e));
    b
}

/// Times the candidates for `shape` on synthetic operands (on the pool, as
/// the product will run) and returns the choice.
pub fn measure(isa: Isa, shape: Shape) -> Entry {
    on_synthetic(isa, shape, &mut |time| {
        search(isa, shape, rayon::current_num_threads(), time)
    })
}

/// A choice read from an earlier run's file (`cached`), timed again
/// against the hand-chosen blocking ([`ROUNDS`] rounds): kept, as it was
/// read, where it still beats it by more than [`MARGIN`]; otherwise the
/// shape is searched again ([`search`]). A choice made in a quiet spell of
/// a shared machine, or on a virtual machine since moved to another host,
/// does not stay for good: choices that won when measured can make the
/// step slower hours later. The hand-chosen blocking itself is kept
/// untimed.
pub fn recheck(
    isa: Isa,
    shape: Shape,
    threads: usize,
    cached: Entry,
    time: &mut dyn FnMut(Blocking) -> f64,
) -> Entry {
    let def = Blocking::default_for(shape.a);
    if cached.blocking == def {
        return cached;
    }
    let (d, c) = confirm(def, cached.blocking, time);
    if clearly_faster(c, d) {
        cached
    } else {
        search(isa, shape, threads, time)
    }
}

/// [`recheck`] for an attention: a plan other than the hand-chosen one is
/// timed against it again, kept where it still wins by [`MARGIN`], else
/// chosen again ([`choose_attention`]).
pub fn recheck_attention(
    isa: Isa,
    shape: AttentionShape,
    cached: AttentionEntry,
    time: &mut dyn FnMut(AttentionPlan) -> f64,
) -> AttentionEntry {
    if cached.plan() == AttentionPlan::DEFAULT {
        return cached;
    }
    let (d, c) = confirm(AttentionPlan::DEFAULT, cached.plan(), time);
    if clearly_faster(c, d) {
        cached
    } else {
        choose_attention(isa, shape, time)
    }
}

/// Runs `f` with a timer of `shape`'s product (µs per product, on the pool,
/// as the product will run) on synthetic operands.
/// (One function taking `f` as a trait object, never inlined: built
/// generic over `f`, a copy per caller, the same source compiled the
/// model's own products into slower code, a `mini_llm` step with the
/// hand-chosen blockings about a tenth slower than in this form or without
/// the re-check at all (541fe02). Which of the compiler's choices changed
/// was not found: the kernels' code and loop alignment were not it.)
#[inline(never)]
fn on_synthetic(isa: Isa, shape: Shape, f: &mut dyn FnMut(Timer) -> Entry) -> Entry {
    let Shape { m, n, k, a, b } = shape;
    let mut rng = crate::rng::Rng::new(0x5eed_91a7);
    let (x, y) = (rng.normal_vec(m * k, 1.0), rng.normal_vec(k * n, 1.0));
    let mut dst = vec![0f32; m * n];
    let mut product = |bl: Blocking| {
        dense::matmul_blocked(
            isa,
            Threads::All,
            m,
            n,
            k,
            &x,
            a,
            &y,
            b,
            &mut dst,
            false,
            bl,
        )
    };
    let mut time = repeat_timer(Blocking::default_for(a), &mut product);
    f(&mut time)
}

/// A product's timer: microseconds per product of a given blocking.
type Timer<'a> = &'a mut dyn FnMut(Blocking) -> f64;

/// Microseconds per `run(candidate)`. Short work is timed a few runs at a
/// time (a timer's resolution and a wake-up of the pool are
/// microseconds): as many as take [`MIN_TIMED_MICROS`] at `first`'s speed,
/// which is run once now to find it.
fn repeat_timer<T: Copy>(first: T, run: &mut dyn FnMut(T)) -> impl FnMut(T) -> f64 + '_ {
    let start = Instant::now();
    run(first);
    let once = start.elapsed().as_secs_f64() * 1e6;
    let reps = ((MIN_TIMED_MICROS / once.max(1.0)).ceil() as usize).clamp(1, 64);
    move |c: T| {
        let t0 = Instant::now();
        for _ in 0..reps {
            run(c);
        }
        t0.elapsed().as_secs_f64() * 1e6 / reps as f64
    }
}

/// Each of `cands` timed once per round for [`ROUNDS`] rounds
/// (interleaved, so that a slow spell of a shared machine hits all of
/// them): each one's best, in order.
fn best_times<T: Copy>(cands: &[T], time: &mut dyn FnMut(T) -> f64) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; cands.len()];
    for _ in 0..ROUNDS {
        for (c, b) in cands.iter().zip(best.iter_mut()) {
            *b = b.min(time(*c));
        }
    }
    best
}

/// `old` and `new` timed afresh against each other ([`ROUNDS`] rounds):
/// their best times. A choice other than the hand-chosen one must win
/// again here, so that a slow spell of the machine during its first
/// rounds does not make a choice kept for good.
fn confirm<T: Copy>(old: T, new: T, time: &mut dyn FnMut(T) -> f64) -> (f64, f64) {
    let (mut o, mut n) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..ROUNDS {
        o = o.min(time(old));
        n = n.min(time(new));
    }
    (o, n)
}

/// Rounds in which every candidate of a knob is timed once (interleaved, so
/// that a slow spell of a shared machine hits all of them); each keeps its
/// best.
const ROUNDS: usize = 4;

/// A timing shorter than this repeats the product.
const MIN_TIMED_MICROS: f64 = 400.0;

/// A candidate replaces the current choice only if it is this much faster
/// (a fraction): differences within a shared machine's noise keep the
/// hand-chosen blocking.
const MARGIN: f64 = 0.03;

/// Whether a time `t` beats `than` by more than [`MARGIN`]: the one test
/// every choice of the planner is made by.
fn clearly_faster(t: f64, than: f64) -> bool {
    t < than * (1.0 - MARGIN)
}

/// Coordinate search from the hand-chosen blocking: for each knob in turn
/// (the AVX2 kernels under an AVX-512 set, threads' blocks of rows or of
/// columns, reduction block, packing of B,
/// loop order, packing of A, row blocks per thread, register tile rows),
/// the values that make a difference at this shape are timed in
/// [`ROUNDS`] interleaved rounds, and the fastest replaces the current
/// value if it beats it by more than [`MARGIN`]. The result is then timed
/// against the hand-chosen blocking once more and kept only if it wins by
/// the margin again; the entry's timings are those of the last rounds each
/// took part in.
pub fn search(
    isa: Isa,
    shape: Shape,
    threads: usize,
    time: &mut dyn FnMut(Blocking) -> f64,
) -> Entry {
    let mut cur = Blocking::default_for(shape.a);
    let mut timings: Vec<Timing> = Vec::new();
    for knob in Knob::ALL {
        let cands = knob.candidates(isa, shape, threads, cur);
        if cands.len() < 2 {
            continue;
        }
        let best = best_times(&cands, time);
        let at = |bl: Blocking| cands.iter().position(|c| *c == bl);
        let now = at(cur).map_or(f64::INFINITY, |i| best[i]);
        let (fastest, t) = cands
            .iter()
            .zip(&best)
            .min_by(|x, y| x.1.total_cmp(y.1))
            .map(|(c, t)| (*c, *t))
            .unwrap_or((cur, now));
        for (c, t) in cands.iter().zip(&best) {
            match timings.iter_mut().find(|x| x.blocking == *c) {
                Some(x) => x.micros = x.micros.min(*t),
                None => timings.push(Timing {
                    blocking: *c,
                    micros: *t,
                }),
            }
        }
        if clearly_faster(t, now) {
            cur = fastest;
        }
    }
    let def = Blocking::default_for(shape.a);
    if cur != def {
        let (d, c) = confirm(def, cur, time);
        for (b, t) in [(def, d), (cur, c)] {
            if let Some(x) = timings.iter_mut().find(|x| x.blocking == b) {
                x.micros = t;
            }
        }
        if !clearly_faster(c, d) {
            cur = def;
        }
    }
    Entry {
        shape,
        blocking: cur,
        timings,
        in_step: Vec::new(),
    }
}

/// How many knobs the search turns: a table kept between processes (the
/// harness's file) records it, so that choices made before a knob existed
/// are measured again.
pub const KNOBS: usize = Knob::ALL.len();

#[derive(Debug, Clone, Copy)]
enum Knob {
    Narrow,
    SplitColumns,
    KBlock,
    PackB,
    RowsOuter,
    PackA,
    BlocksPerThread,
    TileRows,
}

impl Knob {
    /// Every knob, in the order the search takes them.
    const ALL: [Knob; 8] = [
        Knob::Narrow,
        Knob::SplitColumns,
        Knob::KBlock,
        Knob::PackB,
        Knob::RowsOuter,
        Knob::PackA,
        Knob::BlocksPerThread,
        Knob::TileRows,
    ];

    /// `cur` with this knob's values that cut `shape` differently
    /// ([`Blocking::cut`]; the current value first); one candidate where
    /// the knob changes nothing.
    fn candidates(self, isa: Isa, shape: Shape, threads: usize, cur: Blocking) -> Vec<Blocking> {
        let values: Vec<Blocking> = match self {
            Knob::Narrow => vec![Blocking {
                narrow: !cur.narrow,
                ..cur
            }],
            Knob::SplitColumns => vec![Blocking {
                split_columns: !cur.split_columns,
                ..cur
            }],
            Knob::KBlock => [128, 256, 512, 1024]
                .map(|k_block| Blocking { k_block, ..cur })
                .to_vec(),
            Knob::RowsOuter => vec![Blocking {
                rows_outer: !cur.rows_outer,
                ..cur
            }],
            Knob::PackB => vec![Blocking {
                pack_b: !cur.pack_b,
                ..cur
            }],
            Knob::PackA => vec![Blocking {
                pack_a: !cur.pack_a,
                ..cur
            }],
            Knob::BlocksPerThread => [1, 2, 4, 8]
                .map(|blocks_per_thread| Blocking {
                    blocks_per_thread,
                    ..cur
                })
                .to_vec(),
            // The tallest tile (0), and shorter ones where they exist.
            Knob::TileRows => [0, 16, 12, 8, 6, 4]
                .map(|tile_rows| Blocking { tile_rows, ..cur })
                .to_vec(),
        };
        let cut = |b: &Blocking| b.cut(isa, shape.m, shape.n, shape.k, shape.a, threads);
        let mut out = vec![cur];
        for v in values {
            if !out.iter().any(|o| cut(o) == cut(&v)) {
                out.push(v);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::each_product_case;

    /// Held by the tests that switch the process's mode, one at a time.
    static MODE: Mutex<()> = Mutex::new(());

    fn mode_lock() -> std::sync::MutexGuard<'static, ()> {
        MODE.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn shape(m: usize, n: usize, k: usize, a: Layout, b: Layout) -> Shape {
        Shape { m, n, k, a, b }
    }

    /// `a · b` at `s` on the hand-chosen blocking, on the current pool.
    fn hand_chosen(isa: Isa, s: Shape, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; s.m * s.n];
        dense::matmul(
            isa,
            Threads::All,
            s.m,
            s.n,
            s.k,
            a,
            s.a,
            b,
            s.b,
            &mut out,
            false,
        );
        out
    }

    /// Every blocking the search can try gives bitwise the hand-chosen
    /// blocking's product: overwriting and accumulating, every layout and
    /// kernel set, on 1 and 2 threads, with K in one block and in several
    /// (a last block shorter than the others).
    #[test]
    fn every_candidate_gives_bitwise_the_same_product() {
        // (96, 150, 200): B's rows far enough apart to be packed.
        let shapes = [
            (300, 40, 1100),
            (1030, 24, 300),
            (40, 130, 70),
            (96, 150, 200),
        ];
        each_product_case(9, &shapes, &[1, 2], |c| {
            let s = shape(c.m, c.n, c.k, c.a_layout, c.b_layout);
            let def = Blocking::default_for(c.a_layout);
            // Every knob's values, from the hand-chosen blocking and from
            // one with every other knob changed.
            let far = Blocking {
                k_block: 128,
                rows_outer: !def.rows_outer,
                pack_a: !def.pack_a,
                blocks_per_thread: 1,
                tile_rows: 4,
                pack_b: !def.pack_b,
                split_columns: !def.split_columns,
                narrow: !def.narrow,
            };
            let want = c.run(Threads::All, def);
            for knob in Knob::ALL {
                for from in [def, far] {
                    for cand in knob.candidates(c.isa, s, c.threads, from) {
                        assert!(c.run(Threads::All, cand) == want, "{c}: {cand:?}");
                    }
                }
            }
        });
    }

    /// The candidates differ in how they cut the shape: a knob that changes
    /// nothing at a shape (K in one block of every length, one row block
    /// per thread whatever the limit) offers no alternative.
    #[test]
    fn candidates_are_the_values_that_change_the_cut() {
        let nn = |m, n, k| shape(m, n, k, Layout::Normal, Layout::Normal);
        let def = Blocking::default_for(Layout::Normal);
        let isa = Isa::Avx2;
        let kb = |s| {
            Knob::KBlock
                .candidates(isa, s, 2, def)
                .iter()
                .map(|b| b.k_block)
                .collect::<Vec<_>>()
        };
        // K = 128: one block whatever the length.
        assert_eq!(kb(nn(2048, 768, 128)), vec![512]);
        // K = 2048: 4 blocks of 512, 16 of 128, 8 of 256, 2 of 1024.
        assert_eq!(kb(nn(128, 768, 2048)), vec![512, 128, 256, 1024]);
        // K = 384: blocks of 384 (512 and 1024 alike) or 128 or 192.
        assert_eq!(kb(nn(2048, 128, 384)), vec![512, 128, 256]);
        let per = |m| {
            Knob::BlocksPerThread
                .candidates(isa, nn(m, 64, 64), 2, def)
                .iter()
                .map(|b| b.blocks_per_thread)
                .collect::<Vec<_>>()
        };
        // 128 rows: one block per thread whatever the limit.
        assert_eq!(per(128), vec![4]);
        // 2,048 rows: 2, 4, 8 or 16 blocks.
        assert_eq!(per(2048), vec![4, 1, 2, 8]);
        // The AVX2 kernels are an alternative only under an AVX-512 set,
        // and only where they take the same columns into vectors.
        let nw = |isa, n| Knob::Narrow.candidates(isa, nn(2048, n, 128), 2, def).len();
        assert_eq!(nw(Isa::Avx2, 768), 1);
        if Isa::Avx512.available() && Isa::Avx2.available() {
            assert_eq!(nw(Isa::Avx512, 768), 2);
            assert_eq!(nw(Isa::Avx512, 40), 1);
        }
        // A is packed only where it is transposed with columns far apart.
        let pa = |m, a| {
            Knob::PackA
                .candidates(isa, shape(m, 64, 64, a, Layout::Normal), 2, def)
                .len()
        };
        assert_eq!(pa(2048, Layout::Transposed), 2);
        assert_eq!(pa(512, Layout::Transposed), 1);
        assert_eq!(pa(2048, Layout::Normal), 1);
        // B is packed only with rows far apart (128 floats and more) and
        // rows enough of A to reuse it: elsewhere, nothing to choose.
        let pb = |m, n| Knob::PackB.candidates(isa, nn(m, n, 64), 2, def).len();
        assert_eq!(pb(2048, 768), 2);
        assert_eq!(pb(2048, 128), 2);
        assert_eq!(pb(2048, 64), 1);
        assert_eq!(pb(32, 768), 1);
        // Register tiles no taller than the kernel set's tallest for the
        // product (AVX2: 6 rows two vectors wide, 12 one vector wide).
        let tiles = |isa: Isa, n| {
            Knob::TileRows
                .candidates(isa, nn(512, n, 256), 2, def)
                .iter()
                .map(|b| b.tile_rows)
                .collect::<Vec<_>>()
        };
        if Isa::Avx2.available() {
            assert_eq!(tiles(Isa::Avx2, 64), vec![0, 4]);
            assert_eq!(tiles(Isa::Avx2, 8), vec![0, 8, 6, 4]);
        }
        // No SIMD tile, nothing to choose.
        assert_eq!(tiles(Isa::Portable, 64), vec![0]);
    }

    /// The search keeps the hand-chosen blocking unless a candidate is more
    /// than MARGIN faster; then it takes the fastest, knob after knob, and
    /// records every time it measured.
    /// A machine whose AVX-512 kernels run a shape slower than its AVX2
    /// ones (a core that lowers its clock for 512-bit work) gets the AVX2
    /// kernels for that shape under the AVX-512 set, and the later knobs
    /// are timed on them; under the AVX2 set the knob is never timed.
    #[test]
    fn search_takes_the_avx2_kernels_where_avx512_is_slower() {
        let s = shape(128, 768, 2048, Layout::Transposed, Layout::Normal);
        let slow_wide = |b: Blocking| {
            if b.kernels(Isa::Avx512, s.n) == Isa::Avx2 {
                80.0
            } else {
                100.0
            }
        };
        let e = search(Isa::Avx2, s, 2, &mut |b| slow_wide(b));
        assert!(e.timings.iter().all(|t| !t.blocking.narrow), "{e:?}");
        if !(Isa::Avx512.available() && Isa::Avx2.available()) {
            eprintln!("skipped the AVX-512 half: this CPU has no AVX-512 kernel set");
            return;
        }
        let mut narrow_timed_with = Vec::new();
        let e = search(Isa::Avx512, s, 2, &mut |b| {
            if b.narrow {
                narrow_timed_with.push(b.tile_rows);
            }
            slow_wide(b)
        });
        assert!(e.blocking.narrow, "{e:?}");
        assert!((e.gain().unwrap() - 0.8).abs() < 1e-12);
        // The tile rows were tried with the AVX2 kernels (their tallest is 6).
        assert!(narrow_timed_with.contains(&4), "{narrow_timed_with:?}");
    }

    #[test]
    fn search_takes_only_a_clearly_faster_candidate() {
        let s = shape(2048, 768, 2048, Layout::Normal, Layout::Normal);
        let def = Blocking::default_for(Layout::Normal);
        // 2 % faster at k_block 256: within the margin, kept.
        let e = search(Isa::Avx2, s, 2, &mut |b| {
            if b.k_block == 256 { 98.0 } else { 100.0 }
        });
        assert_eq!(e.blocking, def);
        assert_eq!(e.gain(), Some(1.0));
        // 10 % faster at 256 and, given that, 20 % faster with 8 blocks per
        // thread: both taken.
        let mut calls = 0;
        let e = search(Isa::Avx2, s, 2, &mut |b| {
            calls += 1;
            let t = if b.k_block == 256 { 90.0 } else { 100.0 };
            if b.blocks_per_thread == 8 { t * 0.8 } else { t }
        });
        assert_eq!(
            e.blocking,
            Blocking {
                k_block: 256,
                blocks_per_thread: 8,
                ..def
            }
        );
        // The noisy best of ROUNDS: each round timed every candidate.
        assert_eq!(calls % ROUNDS, 0);
        let t = |b: Blocking| e.timings.iter().find(|x| x.blocking == b).map(|x| x.micros);
        assert_eq!(t(def), Some(100.0));
        assert_eq!(t(e.blocking), Some(72.0));
        assert!((e.gain().unwrap() - 0.72).abs() < 1e-12);
        // A candidate that was faster only while its knob was timed (a
        // quiet spell) loses the confirmation against the hand-chosen
        // blocking and is not kept.
        let mut calls = 0;
        let e = search(Isa::Avx2, s, 2, &mut |b| {
            calls += 1;
            if b.k_block == 256 && calls <= 4 * ROUNDS {
                90.0
            } else {
                100.0
            }
        });
        assert_eq!(e.blocking, def);
        // The best of the rounds, not the first: a slow first round of the
        // fastest candidate does not hide it.
        let mut first = true;
        let e = search(Isa::Avx2, s, 2, &mut |b| {
            if b.k_block == 1024 {
                if first {
                    first = false;
                    return 500.0;
                }
                return 50.0;
            }
            100.0
        });
        assert_eq!(e.blocking.k_block, 1024);
    }

    /// A choice read from a file is timed again against the hand-chosen
    /// blocking: kept as read where it still wins by the margin, searched
    /// again where it no longer does; the hand-chosen blocking is kept
    /// untimed.
    #[test]
    fn a_read_choice_is_kept_only_while_it_still_wins() {
        let s = shape(2048, 768, 2048, Layout::Normal, Layout::Normal);
        let def = Blocking::default_for(Layout::Normal);
        let cached = Entry {
            shape: s,
            blocking: Blocking {
                k_block: 256,
                ..def
            },
            timings: vec![Timing {
                blocking: def,
                micros: 1.0,
            }],
            in_step: vec![],
        };
        // Still 10 % faster: kept as read (its old timings too), after
        // ROUNDS timings of each.
        let mut timed = Vec::new();
        let e = recheck(Isa::Avx2, s, 2, cached.clone(), &mut |b| {
            timed.push(b);
            if b.k_block == 256 { 90.0 } else { 100.0 }
        });
        assert_eq!(e, cached);
        assert_eq!(timed.len(), 2 * ROUNDS, "{timed:?}");
        assert!(timed.iter().all(|b| *b == def || *b == cached.blocking));
        // Now 2 % faster only (within the margin) or slower: searched
        // again, and the search, with every k_block as fast, keeps the
        // hand-chosen blocking.
        for now in [98.0, 120.0] {
            let mut calls = 0;
            let e = recheck(Isa::Avx2, s, 2, cached.clone(), &mut |b| {
                calls += 1;
                if b.k_block == 256 { now } else { 100.0 }
            });
            assert_eq!(e.blocking, def, "{now}: {e:?}");
            assert!(
                calls > 2 * ROUNDS,
                "{now}: searched again ({calls} timings)"
            );
            assert!(e.timings.len() > 2, "{now}: {e:?}");
        }
        // Another value wins now: the search finds it.
        let e = recheck(Isa::Avx2, s, 2, cached.clone(), &mut |b| {
            if b.blocks_per_thread == 8 {
                70.0
            } else {
                100.0
            }
        });
        assert_eq!(
            e.blocking,
            Blocking {
                blocks_per_thread: 8,
                ..def
            }
        );
        // The hand-chosen blocking: nothing timed.
        let plain = Entry {
            blocking: def,
            ..cached
        };
        let e = recheck(Isa::Avx2, s, 2, plain.clone(), &mut |_| unreachable!());
        assert_eq!(e, plain);
    }

    /// [`recheck_attention`]: the same terms for an attention's plan.
    #[test]
    fn a_read_attention_plan_is_kept_only_while_it_still_wins() {
        let s = AttentionShape {
            t: 128,
            heads: 4,
            dh: 32,
        };
        let cached = AttentionEntry {
            shape: s,
            block: 64,
            narrow: false,
            wide: false,
            timings: vec![],
            narrow_timings: vec![],
            wide_timings: vec![],
        };
        let mut timed = Vec::new();
        let e = recheck_attention(Isa::Avx2, s, cached.clone(), &mut |p| {
            timed.push(p);
            if p.block == 64 { 80.0 } else { 100.0 }
        });
        assert_eq!(e, cached);
        assert_eq!(timed.len(), 2 * ROUNDS);
        // Slower now: chosen again among every candidate; 32 wins.
        let mut timed = Vec::new();
        let e = recheck_attention(Isa::Avx2, s, cached.clone(), &mut |p| {
            timed.push(p);
            match p.block {
                32 => 70.0,
                64 => 130.0,
                _ => 100.0,
            }
        });
        assert_eq!(e.block, 32, "{e:?}");
        for p in attention_candidates(Isa::Avx2, s) {
            assert!(timed.contains(&p), "{p:?} not timed again");
        }
        let plain = AttentionEntry {
            block: AttentionPlan::DEFAULT.block,
            ..cached
        };
        let e = recheck_attention(Isa::Avx2, s, plain.clone(), &mut |_| unreachable!());
        assert_eq!(e, plain);
    }

    /// The attention's candidates: the hand-chosen 16 queries, its
    /// doublings below the sequence's length and one block of it all.
    #[test]
    fn attention_candidates_are_multiples_of_16_up_to_the_sequence() {
        assert_eq!(attention_blocks(128), vec![16, 32, 64, 128]);
        assert_eq!(attention_blocks(100), vec![16, 32, 64, 128]);
        assert_eq!(attention_blocks(40), vec![16, 32, 64]);
        assert_eq!(attention_blocks(16), vec![16]);
        assert_eq!(attention_blocks(5), vec![16]);
        assert!(attention_blocks(4096).iter().all(|b| b % 16 == 0));
    }

    /// The attention's block changes only where a candidate is more than
    /// MARGIN faster in its rounds and again against the hand-chosen block.
    #[test]
    fn an_attention_block_is_taken_only_when_clearly_faster() {
        let s = AttentionShape {
            t: 128,
            heads: 4,
            dh: 32,
        };
        let isa = Isa::Avx2;
        let at = |block| AttentionPlan {
            block,
            narrow: false,
            wide: false,
        };
        // 2 % faster: kept at 16.
        let e = choose_attention(isa, s, &mut |p| if p == at(32) { 98.0 } else { 100.0 });
        assert_eq!(e.plan(), AttentionPlan::DEFAULT);
        assert_eq!(e.gain(), Some(1.0));
        assert_eq!((e.timings.len(), e.narrow_timings.len()), (4, 0));
        // 20 % faster at 64: taken, with its times.
        let e = choose_attention(isa, s, &mut |p| if p == at(64) { 80.0 } else { 100.0 });
        assert_eq!(e.plan(), at(64));
        assert!((e.gain().unwrap() - 0.8).abs() < 1e-12);
        // Faster only in its first rounds (a quiet spell): not kept.
        let mut calls = 0;
        let e = choose_attention(isa, s, &mut |p| {
            calls += 1;
            if p == at(64) && calls <= 4 * ROUNDS {
                80.0
            } else {
                100.0
            }
        });
        assert_eq!(e.plan(), AttentionPlan::DEFAULT);
        // Under an AVX-512 set, the AVX2 kernels and the 16-lane row-wise
        // passes are timed at every block and taken where clearly faster.
        if Isa::Avx512.available() && Isa::Avx2.available() {
            let e = choose_attention(Isa::Avx512, s, &mut |p| {
                if p.narrow && p.block == 32 {
                    70.0
                } else {
                    100.0
                }
            });
            let lists = |e: &AttentionEntry| {
                (
                    e.timings.len(),
                    e.narrow_timings.len(),
                    e.wide_timings.len(),
                )
            };
            assert_eq!(lists(&e), (4, 4, 4));
            assert_eq!(
                e.plan(),
                AttentionPlan {
                    block: 32,
                    narrow: true,
                    wide: false,
                }
            );
            assert!((e.gain().unwrap() - 0.7).abs() < 1e-12);
            assert_eq!(e.plan().kernels(Isa::Avx512, s), Isa::Avx2);
            let e = choose_attention(Isa::Avx512, s, &mut |p| if p.wide { 80.0 } else { 100.0 });
            assert_eq!(
                e.plan(),
                AttentionPlan {
                    wide: true,
                    ..AttentionPlan::DEFAULT
                }
            );
            assert!((e.gain().unwrap() - 0.8).abs() < 1e-12);
            assert_eq!(e.plan().kernels(Isa::Avx512, s), Isa::Avx512);
        }
        // Under the AVX2 set, 16 lanes are no alternative.
        assert!(attention_candidates(Isa::Avx2, s).iter().all(|p| !p.wide));
    }

    /// An attention shape is measured once in `Mode::Measure` (its first
    /// call runs the candidates), then served; `Mode::Fixed` and imported
    /// entries run nothing.
    #[test]
    fn the_table_measures_an_attention_once() {
        // A shape of its own (no model's), on a thread count no test uses.
        let _mode = mode_lock();
        let isa = Isa::detect();
        let s = AttentionShape {
            t: 48,
            heads: 3,
            dh: 8,
        };
        let mine = || {
            export_attention(isa, 7)
                .into_iter()
                .filter(|e| e.shape == s)
                .collect::<Vec<_>>()
        };
        let mut ran = Vec::new();
        set_mode(Mode::Fixed);
        assert_eq!(
            attention_plan(isa, 7, s, &mut |p| ran.push(p)),
            AttentionPlan::DEFAULT
        );
        assert!(ran.is_empty() && mine().is_empty());
        set_mode(Mode::Measure);
        let chosen = attention_plan(isa, 7, s, &mut |p| ran.push(p));
        set_mode(Mode::Fixed);
        for p in attention_candidates(isa, s) {
            assert!(ran.contains(&p), "{p:?} never ran: {ran:?}");
        }
        assert_eq!(mine().len(), 1);
        assert_eq!(mine()[0].plan(), chosen);
        let n = ran.len();
        set_mode(Mode::Measure);
        assert_eq!(attention_plan(isa, 7, s, &mut |p| ran.push(p)), chosen);
        assert_eq!(ran.len(), n, "a measured entry is served: nothing ran");
        // An imported plan other than the hand-chosen one is timed again
        // at its first use (here it is the faster: kept), then served.
        let read = AttentionEntry {
            shape: s,
            block: 32,
            narrow: false,
            wide: false,
            timings: vec![],
            narrow_timings: vec![],
            wide_timings: vec![],
        };
        let slow_but_32 = |p: AttentionPlan| {
            if p.block != 32 {
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        };
        import_attention(isa, 7, vec![read.clone()]);
        let mut ran = Vec::new();
        let mut run = |p: AttentionPlan| {
            ran.push(p);
            slow_but_32(p)
        };
        assert_eq!(attention_plan(isa, 7, s, &mut run).block, 32);
        assert_eq!(attention_plan(isa, 7, s, &mut run).block, 32);
        assert!(ran.contains(&AttentionPlan::DEFAULT), "{ran:?}");
        assert!(
            ran.iter()
                .all(|p| *p == AttentionPlan::DEFAULT || p.block == 32),
            "only the two were timed: {ran:?}"
        );
        let n = ran.len();
        assert_eq!(attention_plan(isa, 7, s, &mut |p| ran.push(p)).block, 32);
        assert_eq!(ran.len(), n, "checked once: then served");
        assert_eq!(mine(), vec![read.clone()], "kept as read");
        // Imported again, now the slower: chosen again.
        import_attention(isa, 7, vec![read.clone()]);
        let chosen = attention_plan(isa, 7, s, &mut |p| {
            if p.block == 32 {
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        });
        assert_ne!(chosen.block, 32);
        assert_eq!(mine().len(), 1);
        assert_eq!(mine()[0].plan(), chosen);
        // In Mode::Fixed an import is served untimed.
        set_mode(Mode::Fixed);
        import_attention(isa, 7, vec![read]);
        let mut ran = Vec::new();
        assert_eq!(attention_plan(isa, 7, s, &mut |p| ran.push(p)).block, 32);
        assert!(ran.is_empty(), "{ran:?}");
    }

    /// In `Mode::Measure` a new shape is measured once, then served from
    /// the table; `Mode::Fixed` serves the hand-chosen blocking and adds
    /// nothing. Export and import round-trip the table.
    #[test]
    fn the_table_measures_a_shape_once_and_round_trips() {
        // The table is the process's: the unit tests that measure switch
        // the mode under `mode_lock` (the others call `search` and `Knob`
        // directly), and each looks at its own shape's entries only
        // (another test's LLM products may add theirs meanwhile).
        let _mode = mode_lock();
        let isa = Isa::detect();
        let s = shape(256, 64, 300, Layout::Transposed, Layout::Normal);
        let mine = |threads| {
            export(isa, threads)
                .into_iter()
                .filter(|e| e.shape == s)
                .collect::<Vec<_>>()
        };
        set_mode(Mode::Fixed);
        assert_eq!(blocking_for(isa, 2, s), Blocking::default_for(s.a));
        assert!(mine(2).is_empty());
        set_mode(Mode::Measure);
        let chosen = blocking_for(isa, 2, s);
        set_mode(Mode::Fixed);
        let saved = mine(2);
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].blocking, chosen);
        assert!(saved[0].timings.len() >= 2, "{:?}", saved[0].timings);
        // Served from the table: no second entry.
        assert_eq!(blocking_for(isa, 2, s), chosen);
        assert_eq!(mine(2).len(), 1);
        // Other thread counts are other machines.
        assert!(mine(3).is_empty());
        // Imported entries replace those of the same shape and are served.
        let forced = Blocking {
            k_block: 128,
            ..chosen
        };
        import(
            isa,
            2,
            vec![Entry {
                shape: s,
                blocking: forced,
                timings: vec![],
                in_step: vec![],
            }],
        );
        assert_eq!(mine(2).len(), 1);
        assert_eq!(blocking_for(isa, 2, s), forced);
        let json = serde_json::to_string(&mine(2)).unwrap();
        let back: Vec<Entry> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, mine(2));
        // In Mode::Measure an imported choice is timed again at its first
        // use: one-row register tiles (far slower than the hand-chosen
        // tallest) lose, and the shape is searched again, once.
        let slow = Blocking {
            tile_rows: 1,
            ..Blocking::default_for(s.a)
        };
        import(
            isa,
            2,
            vec![Entry {
                shape: s,
                blocking: slow,
                timings: vec![],
                in_step: vec![],
            }],
        );
        set_mode(Mode::Measure);
        let again = blocking_for(isa, 2, s);
        let now = mine(2);
        assert_eq!(blocking_for(isa, 2, s), again);
        set_mode(Mode::Fixed);
        assert_ne!(again.tile_rows, 1, "{now:?}");
        assert_eq!(now.len(), 1);
        assert!(now[0].timings.len() >= 2, "searched again: {now:?}");
        assert_eq!(mine(2), now, "checked once: then served");
    }

    /// While profiling is on, every product `matmul` runs is counted and
    /// timed under its shape, and its result is the unprofiled product's;
    /// switching it (on or off) clears the times, and off records nothing.
    #[test]
    fn profiled_products_are_counted_per_shape() {
        let _mode = mode_lock();
        set_mode(Mode::Fixed);
        let isa = Isa::detect();
        // Shapes no other test runs (others' products may be recorded
        // meanwhile: each assertion looks at these only).
        let (s1, s2) = (
            shape(37, 29, 41, Layout::Normal, Layout::Normal),
            shape(23, 19, 71, Layout::Transposed, Layout::Normal),
        );
        let run = |s: Shape| {
            let mut rng = crate::rng::Rng::new(3);
            let (a, b) = (
                rng.normal_vec(s.m * s.k, 1.0),
                rng.normal_vec(s.k * s.n, 1.0),
            );
            let mut got = vec![0f32; s.m * s.n];
            matmul(isa, s.m, s.n, s.k, &a, s.a, &b, s.b, &mut got, false);
            assert!(got == hand_chosen(isa, s, &a, &b), "{s}");
        };
        let times = |s: Shape| product_times().into_iter().find(|p| p.shape == s);
        profile_products(true);
        run(s1);
        run(s2);
        run(s1);
        let (p1, p2) = (times(s1).unwrap(), times(s2).unwrap());
        assert_eq!((p1.calls, p2.calls), (2, 1));
        assert!(p1.seconds > 0.0 && p2.seconds > 0.0);
        let flops = 2.0 * (37 * 29 * 41 * 2) as f64;
        assert!((p1.gflops() - flops / p1.seconds / 1e9).abs() < 1e-9 * p1.gflops());
        profile_products(false);
        assert!(times(s1).is_none() && times(s2).is_none());
        run(s1);
        assert!(times(s1).is_none());
    }

    /// A trial's candidates: the table's choice, the hand-chosen blocking,
    /// for a weight gradient the choice that moves the fewest bytes, then
    /// the fastest of the synthetic timings, no two cutting the product
    /// alike, [`TRIAL_CANDIDATES`] at most.
    #[test]
    fn trial_candidates_are_the_choice_the_default_and_the_fastest_others() {
        let s = shape(2048, 256, 1024, Layout::Normal, Layout::Normal);
        let def = Blocking::default_for(s.a);
        let b = |k_block, blocks_per_thread| Blocking {
            k_block,
            blocks_per_thread,
            ..def
        };
        let t = |blocking, micros| Timing { blocking, micros };
        // The 6-row tile is the AVX2 set's tallest here: the hand-chosen
        // cut again, however fast its timing.
        let same_as_def = Blocking {
            tile_rows: 6,
            ..def
        };
        let e = Entry {
            shape: s,
            blocking: b(256, 4),
            timings: vec![
                t(b(128, 4), 90.0),
                t(def, 80.0),
                t(b(512, 2), 70.0),
                t(b(1024, 4), 60.0),
                t(same_as_def, 50.0),
                t(b(512, 8), 95.0),
            ],
            in_step: vec![],
        };
        assert_eq!(
            trial_candidates(Isa::Avx2, 2, &e),
            vec![b(256, 4), def, b(1024, 4), b(512, 2)]
        );
        // The hand-chosen blocking as the choice: listed once.
        let e = Entry {
            blocking: def,
            timings: vec![t(b(1024, 4), 60.0)],
            ..e
        };
        assert_eq!(trial_candidates(Isa::Avx2, 2, &e), vec![def, b(1024, 4)]);
        // A transposed A (a weight gradient): third, the choice with B's
        // columns split between the threads and read in place.
        let s = shape(128, 768, 2048, Layout::Transposed, Layout::Normal);
        let def = Blocking::default_for(s.a);
        let chosen = Blocking {
            k_block: 512,
            ..def
        };
        let e = Entry {
            shape: s,
            blocking: chosen,
            timings: vec![t(def, 80.0), t(b(1024, 4), 60.0), t(b(128, 4), 70.0)],
            in_step: vec![],
        };
        let least = Blocking {
            split_columns: true,
            pack_b: false,
            ..chosen
        };
        assert_eq!(
            trial_candidates(Isa::Avx2, 2, &e),
            vec![chosen, def, least, b(1024, 4)]
        );
    }

    /// The choice moves to another candidate only where its median in the
    /// step beats the choice's by more than the margin.
    #[test]
    fn a_trial_takes_only_a_clearly_faster_candidate() {
        let def = Blocking::default_for(Layout::Normal);
        let c = [
            def,
            Blocking {
                k_block: 128,
                ..def
            },
            Blocking {
                k_block: 256,
                ..def
            },
        ];
        let with = |us: [f64; 3]| -> Vec<Timing> {
            c.iter()
                .zip(us)
                .map(|(b, micros)| Timing {
                    blocking: *b,
                    micros,
                })
                .collect()
        };
        assert_eq!(choose_in_step(&with([100.0, 98.0, 99.0])), c[0]);
        assert_eq!(choose_in_step(&with([100.0, 95.0, 90.0])), c[2]);
        assert_eq!(choose_in_step(&with([100.0, 120.0, 130.0])), c[0]);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    /// Trials in the model's passes: every place of a shape's products in
    /// a pass runs each candidate once over as many passes; the table takes
    /// the candidate of the clearly lowest median and records them all; a
    /// product keeps the table's choice once the trials end, and products
    /// on other thread counts are never tried. (Thread count 7: no other
    /// test's products run there.)
    #[test]
    fn trials_take_turns_and_settle_on_a_clearly_faster_candidate() {
        let _mode = mode_lock();
        let (isa, threads) = (Isa::detect(), 7);
        let s = shape(2048, 256, 1024, Layout::Normal, Layout::Normal);
        let def = Blocking::default_for(s.a);
        // (One-row tiles: far slower on synthetic operands, so a check
        // there would replace the choice.)
        let other = Blocking {
            tile_rows: 1,
            ..def
        };
        let third = Blocking {
            blocks_per_thread: 1,
            ..def
        };
        let t = |blocking, micros| Timing { blocking, micros };
        import(
            isa,
            threads,
            vec![Entry {
                shape: s,
                blocking: def,
                timings: vec![t(other, 1.0), t(third, 2.0)],
                in_step: vec![],
            }],
        );
        let passes = begin_trials(isa, threads);
        assert_eq!(passes, 3 * TRIAL_SAMPLES);
        let mut seen = [Vec::new(), Vec::new()];
        for _ in 0..3 {
            trial_pass();
            for place in &mut seen {
                place.push(trial_blocking(isa, threads, s).expect("on trial"));
            }
        }
        for (i, place) in seen.iter().enumerate() {
            for c in [def, other, third] {
                assert!(place.contains(&c), "place {i}: {place:?}");
            }
        }
        assert_eq!(trial_blocking(isa, 2, s), None);
        // `other` 10 % faster in the step (samples as `matmul` records them).
        let runs = [(def, 100.0), (other, 90.0), (third, 99.0)];
        for (b, us) in runs {
            for _ in 0..TRIAL_SAMPLES {
                record_trial(isa, threads, s, b, us);
            }
        }
        let mine = || export(isa, threads).into_iter().find(|e| e.shape == s);
        let before = mine().expect("in the table");
        let records = end_trials();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert!(r.changed() && r.chosen == other, "{r:?}");
        assert_eq!(r.before, before);
        assert_eq!(r.gain(), Some(0.9));
        assert_eq!(export_trials(isa, threads), records);
        let e = mine().expect("in the table");
        assert_eq!(e.blocking, other);
        let recorded: Vec<(Blocking, f64)> =
            e.in_step.iter().map(|t| (t.blocking, t.micros)).collect();
        assert_eq!(recorded, runs.to_vec());
        assert_eq!(trial_blocking(isa, threads, s), None);
        // Again from `other`, the hand-chosen blocking 2 % faster: kept,
        // the entry as it was (the record of the trial that chose it).
        begin_trials(isa, threads);
        assert!(export_trials(isa, threads).is_empty());
        for (b, us) in [(other, 100.0), (def, 98.0), (third, 120.0)] {
            record_trial(isa, threads, s, b, us);
        }
        let records = end_trials();
        assert!(!records[0].changed() && records[0].chosen == other);
        assert_eq!(mine().expect("in the table"), e);
        // A candidate never timed: no record, the choice as it was.
        begin_trials(isa, threads);
        record_trial(isa, threads, s, def, 10.0);
        assert!(end_trials().is_empty());
        assert_eq!(mine().expect("in the table"), e);
        // A choice made in the step is not timed again on synthetic
        // operands when read back (the next trial judges it).
        import(isa, threads, vec![e.clone()]);
        set_mode(Mode::Measure);
        let served = blocking_for(isa, threads, s);
        set_mode(Mode::Fixed);
        assert_eq!(served, other);
        assert_eq!(mine().expect("in the table"), e);
    }

    /// Products on trial (through [`matmul`], on a pool) give bitwise the
    /// product of the hand-chosen blocking, and each call is timed into
    /// the trial's record.
    #[test]
    fn products_on_trial_give_the_same_bits() {
        let _mode = mode_lock();
        // (Not 7: the table keeps this test's entry, and the trials of the
        // test above take every entry of their thread count.)
        let (isa, threads) = (Isa::detect(), 5);
        let s = shape(256, 64, 300, Layout::Transposed, Layout::Normal);
        let def = Blocking::default_for(s.a);
        let t = |blocking| Timing {
            blocking,
            micros: 1.0,
        };
        let cands = [
            Blocking {
                k_block: 128,
                ..def
            },
            Blocking {
                split_columns: true,
                ..def
            },
        ];
        import(
            isa,
            threads,
            vec![Entry {
                shape: s,
                blocking: def,
                timings: cands.iter().map(|b| t(*b)).collect(),
                in_step: vec![],
            }],
        );
        let mut rng = crate::rng::Rng::new(11);
        let (a, b) = (
            rng.normal_vec(s.m * s.k, 1.0),
            rng.normal_vec(s.k * s.n, 1.0),
        );
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool");
        pool.install(|| {
            let want = hand_chosen(isa, s, &a, &b);
            let passes = begin_trials(isa, threads);
            for _ in 0..passes {
                trial_pass();
                let mut got = vec![f32::NAN; s.m * s.n];
                matmul(isa, s.m, s.n, s.k, &a, s.a, &b, s.b, &mut got, false);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "{s}"
                );
            }
            let records = end_trials();
            assert_eq!(records.len(), 1, "{records:?}");
            let m = &records[0].medians;
            assert_eq!(m.len(), 3, "{m:?}");
            assert!(m.iter().all(|t| t.micros > 0.0), "{m:?}");
        });
    }
}
