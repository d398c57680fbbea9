//! The compliance engine: runs a chain of rule files over one log with the
//! official checker's algorithm, and reports structured diagnostics.
//!
//! Algorithm per rule file (mirrors the official `configured_checks`):
//! fresh state `s`; BEGIN; drop earlier keyed messages for keys this file
//! defines; for every record whose key the file names: PRE, each CHECK,
//! POST (only on the first occurrence for `submission_*` keys),
//! FIRST_CHECK on the first occurrence, ATLEAST_ONE_CHECK on every one; then
//! the occurrence requirements (REQ) and END. Rule files enqueue their
//! successors (`enqueue_config`); files run first-in first-out.
//!
//! Message semantics are kept: a later failure of the same key replaces the
//! earlier one in place; warnings (repeated identical EXACTLY_ONE values)
//! do not fail a log unless `werror`.
//!
//! Where the official checker crashes (an exception in BEGIN or in an
//! ATLEAST_ONE_CHECK, a missing rule file, a malformed record), referee
//! reports an error diagnostic that says so and goes on; the log fails, as
//! it does (with a traceback) under the official tool.

use crate::diag::{Diagnostic, Severity, Verdict};
use crate::mllog::{LineProblem, ParsedLog, Record};
use crate::py::{self, Effects};
use crate::ruleset::{Begin, KeyRule, LoadError, Req, RuleFile, RuleLibrary, Snippet};
use crate::value::{Dict, PyError, Value, py_contains, py_eq};
use indexmap::{IndexMap, IndexSet};
use std::collections::{HashMap, HashSet, VecDeque};

#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Repeated identical EXACTLY_ONE values become errors.
    pub werror: bool,
    /// Drop warnings.
    pub quiet: bool,
}

/// The result of checking one log.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub verdict: Verdict,
    /// Errors first (in the official order), then warnings.
    pub diagnostics: Vec<Diagnostic>,
    /// Findings that are consequences of a root cause already reported
    /// (two runs in one file) and are left out of `diagnostics`.
    pub suppressed: usize,
    /// Rule files run, in order.
    pub rule_files: Vec<String>,
    pub benchmark: Option<String>,
    pub division: Option<String>,
    pub records: usize,
}

impl Outcome {
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }
}

#[derive(Default)]
struct Store {
    warnings: IndexMap<String, Diagnostic>,
    keyed: IndexMap<String, Diagnostic>,
    unkeyed: Vec<Diagnostic>,
    opts: CheckOptions,
}

impl Store {
    fn keyed(&mut self, key: &str, d: Diagnostic) {
        // Replacing keeps the position, like a dict assignment.
        self.keyed.insert(key.to_string(), d);
    }
    fn warn(&mut self, key: &str, mut d: Diagnostic) {
        if self.opts.werror {
            d.severity = Severity::Error;
            self.keyed(key, d);
        } else if !self.opts.quiet {
            self.warnings.insert(key.to_string(), d);
        }
    }
}

/// Check a parsed log, starting the rule chain at `start` (e.g.
/// `training_5.0.0/common.yaml`, or an absolute path).
///
/// Records synthesised by rule files are removed again before returning, so
/// the log can be read further (scores, RCP, seeds); slim records a rule
/// needed stay inflated.
pub fn check(lib: &RuleLibrary, log: &mut ParsedLog, start: &str, opts: CheckOptions) -> Outcome {
    let ParsedLog {
        records,
        problems,
        unkept_problems,
        ..
    } = log;
    let original_len = records.len();
    let mut store = Store {
        opts,
        ..Store::default()
    };

    let benchmark = first_str(records, "submission_benchmark");
    let division = first_str(records, "submission_division");
    let record_count = records.len();

    report_problems(problems, *unkept_problems, &mut store);
    if records.is_empty() {
        store.unkeyed.push(
            Diagnostic::error("no-records", "the file holds no MLLOG lines")
                .expected("lines of the form `:::MLLOG {json}`")
                .found("none")
                .official("No log lines detected"),
        );
    }

    let index = KeyIndex::build(records);
    let mut queue: VecDeque<String> = VecDeque::from([start.to_string()]);
    let mut ran = Vec::new();
    while let Some(rel) = queue.pop_front() {
        ran.push(rel.clone());
        match lib.load(&rel) {
            Ok(file) => {
                let ruled = index.of_keys(file.keys.keys());
                for &i in &ruled {
                    records[i].inflate();
                }
                run_file(&file, records, (&ruled, index.len), &mut store, &mut queue)
            }
            Err(LoadError::NotFound(path)) => {
                store.unkeyed.push(
                    Diagnostic::error(
                        "rule-file-missing",
                        format!(
                            "rule file {rel} does not exist (the official checker stops here with FileNotFoundError)"
                        ),
                    )
                    .rule(rel.clone(), None)
                    .key(rule_file_key(&rel))
                    .found(path.display().to_string())
                    .official(format!("Could not find config file: {}", path.display())),
                );
            }
            Err(LoadError::Invalid(e)) => {
                store.unkeyed.push(
                    Diagnostic::error("rule-file-invalid", format!("cannot use rule file: {e}"))
                        .rule(rel.clone(), e.line),
                );
            }
        }
    }

    let concatenated = concatenated_runs(records, &index);
    records.truncate(original_len);
    let mut diagnostics: Vec<Diagnostic> = store.keyed.into_values().collect();
    diagnostics.extend(store.unkeyed);
    diagnostics.extend(store.warnings.into_values());
    let mut suppressed = 0;
    if let Some(d) = concatenated {
        suppressed = diagnostics.len();
        diagnostics = vec![d];
    }
    let verdict = Verdict::from_ok(!diagnostics.iter().any(Diagnostic::is_error));
    Outcome {
        verdict,
        diagnostics,
        suppressed,
        rule_files: ran,
        benchmark,
        division,
        records: record_count,
    }
}

/// The benchmark part of a rule-file name, used as the key of a
/// missing-file diagnostic (`training_6.1.0/closed_resnet.yaml` →
/// `submission_benchmark`; the benchmark chose that file).
fn rule_file_key(rel: &str) -> String {
    if rel.ends_with("_common.yaml") {
        "submission_division".into()
    } else {
        "submission_benchmark".into()
    }
}

fn first_str(records: &[Record], key: &str) -> Option<String> {
    records
        .iter()
        .find(|r| r.key.as_deref() == Some(key))
        .and_then(|r| r.value().as_str().map(str::to_string))
}

/// One finding per kept unreadable line, then one that counts the lines
/// past those (`unkept`), so that a log of junk costs a bounded report.
fn report_problems(problems: &[LineProblem], unkept: usize, store: &mut Store) {
    let mut first_value_error = true;
    for p in problems {
        let excerpt: String = if p.text.chars().count() > 160 {
            let cut: String = p.text.chars().take(160).collect();
            format!("{cut}…")
        } else {
            p.text.clone()
        };
        let mut d = if p.official_crash {
            Diagnostic::error(
                "malformed-record",
                format!("{} (the official checker crashes on this line)", p.message),
            )
        } else {
            Diagnostic::error(
                "parse-error",
                format!("unreadable MLLOG line: {}", p.message),
            )
        };
        d = d
            .line(p.line)
            .expected("`:::MLLOG ` followed by one JSON object with time_ms, key, value, metadata")
            .found(excerpt);
        if !p.official_crash && first_value_error {
            d = d.official("Log lines had parsing errors.");
            first_value_error = false;
        }
        store.unkeyed.push(d);
    }
    if unkept > 0 {
        let mut d = Diagnostic::error(
            "parse-error",
            format!(
                "and {unkept} more unreadable MLLOG line{} (only the first {} are listed)",
                if unkept == 1 { "" } else { "s" },
                problems.len()
            ),
        )
        .expected("`:::MLLOG ` followed by one JSON object with time_ms, key, value, metadata")
        .found(format!(
            "{} unreadable lines in all",
            problems.len() + unkept
        ));
        if first_value_error {
            d = d.official("Log lines had parsing errors.");
        }
        store.unkeyed.push(d);
    }
}

fn exec_snippet(
    sn: &Snippet<Vec<py::Stmt>>,
    s: &mut Value,
    ll: Option<&Record>,
    fx: &Effects,
) -> Result<(), PyError> {
    py::exec(&sn.code, s, ll, fx)
}

/// Where each key's records are, read once per log: a rule file's run
/// visits the records of its keys only (a log of a million `train_loss`
/// lines is not walked again for every rule file).
struct KeyIndex {
    /// Per key, the runs of consecutive records that carry it, in file
    /// order (a flooded log is a few runs, not a million positions).
    by_key: HashMap<std::sync::Arc<str>, Vec<std::ops::Range<usize>>>,
    /// Records at and after this position were added by rules after the
    /// index was built.
    len: usize,
}

impl KeyIndex {
    fn build(records: &[Record]) -> KeyIndex {
        let mut by_key: HashMap<std::sync::Arc<str>, Vec<std::ops::Range<usize>>> = HashMap::new();
        let mut i = 0;
        while i < records.len() {
            let Some(k) = &records[i].key else {
                i += 1;
                continue;
            };
            let start = i;
            i += 1;
            // The reader shares one string between a run of equal keys.
            while let Some(Some(next)) = records.get(i).map(|r| &r.key)
                && (std::sync::Arc::ptr_eq(next, k) || **next == **k)
            {
                i += 1;
            }
            by_key.entry(k.clone()).or_default().push(start..i);
        }
        KeyIndex {
            by_key,
            len: records.len(),
        }
    }

    /// The positions of the records of `keys`, in file order.
    fn of_keys<'k>(&self, keys: impl Iterator<Item = &'k String>) -> Vec<usize> {
        let mut at: Vec<usize> = keys
            .filter_map(|k| self.by_key.get(k.as_str()))
            .flatten()
            .flat_map(|r| r.clone())
            .collect();
        at.sort_unstable();
        at
    }
}

/// Run one rule file over the records: BEGIN, the KEY rules record by
/// record (`ruled`: the records of its keys among the first `indexed`, in
/// file order; every record after those), the
/// ATLEAST_ONE_CHECK verdicts, the occurrence requirements and END. Rule
/// files enqueued by its code are appended to `queue`.
fn run_file(
    file: &RuleFile,
    records: &mut Vec<Record>,
    (ruled, indexed): (&[usize], usize),
    store: &mut Store,
    queue: &mut VecDeque<String>,
) {
    let mut run = RuleFileRun::new(file);
    run.begin(records, store);
    // A file that defines a key supersedes earlier messages for it.
    for k in file.keys.keys() {
        store.keyed.shift_remove(k.as_str());
    }
    // Records of other keys have no rule here; records that rules added
    // after the index was built (BEGIN's aggregates) are all visited.
    let added = indexed.min(records.len())..records.len();
    for i in ruled.iter().copied().chain(added) {
        run.record(i, &records[i], store);
    }
    // Effects of POST code (enqueue) take effect in order.
    queue.extend(run.effects.enqueued.borrow_mut().drain(..));
    run.report_atleast_one(records, store);
    run.check_occurrences(records, store);
    run.end(store);
}

/// How the ATLEAST_ONE_CHECK of one key fared over the log.
struct AtLeastOneTally {
    /// Lines for which the test held.
    held: usize,
    /// Lines evaluated.
    checked: usize,
    /// Index of the last record evaluated.
    last: usize,
}

/// The state of one rule file's run over a log (the locals of the official
/// `configured_checks`).
struct RuleFileRun<'f> {
    file: &'f RuleFile,
    rel: &'f str,
    /// The rule file's state dictionary `s`.
    state: Value,
    effects: Effects,
    /// Record indices seen per KEY name (every NAME has a slot, in file order).
    seen: IndexMap<&'f str, Vec<usize>>,
    /// `submission_*` keys whose PRE, CHECK and POST have run (they run on
    /// the first occurrence only).
    has_been_exec: HashSet<&'f str>,
    /// Keys whose FIRST_CHECK has run.
    first_check_seen: HashSet<&'f str>,
    atleast: IndexMap<&'f str, AtLeastOneTally>,
    /// Keys whose ATLEAST_ONE_CHECK raised (reported once).
    atleast_raised: HashSet<&'f str>,
}

impl<'f> RuleFileRun<'f> {
    fn new(file: &'f RuleFile) -> Self {
        RuleFileRun {
            file,
            rel: file.rel.as_str(),
            state: Value::Dict(Dict::new()),
            effects: Effects::default(),
            seen: file.keys.keys().map(|k| (k.as_str(), Vec::new())).collect(),
            has_been_exec: HashSet::new(),
            first_check_seen: HashSet::new(),
            atleast: IndexMap::new(),
            atleast_raised: HashSet::new(),
        }
    }

    /// The BEGIN record: its code, or the native stable-diffusion
    /// aggregation (which adds records).
    fn begin(&mut self, records: &mut Vec<Record>, store: &mut Store) {
        let rel = self.rel;
        match &self.file.begin {
            Some(Begin::Code(sn)) => {
                if let Err(e) = exec_snippet(sn, &mut self.state, None, &self.effects) {
                    store.unkeyed.push(
                        Diagnostic::error(
                            "code-raised",
                            format!("BEGIN code raised {e} (the official checker crashes here)"),
                        )
                        .rule(rel, Some(sn.line))
                        .test(sn.text.trim()),
                    );
                }
            }
            Some(Begin::AggregateEvalMetrics { line }) => {
                if let Err(e) = aggregate_eval_metrics(records) {
                    store.unkeyed.push(
                        Diagnostic::error(
                            "code-raised",
                            format!("aggregating FID/CLIP evaluations failed: {e} (the official checker crashes here)"),
                        )
                        .rule(rel, Some(*line))
                        .key("eval_accuracy"),
                    );
                }
            }
            None => {}
        }
    }

    /// One record whose key the file names: PRE, each CHECK and POST (only
    /// on the first occurrence for `submission_*` keys), FIRST_CHECK on the
    /// first occurrence, ATLEAST_ONE_CHECK on every one.
    fn record(&mut self, i: usize, rec: &Record, store: &mut Store) {
        let Some(key) = rec.key.as_deref() else {
            return;
        };
        let Some(rule) = self.file.keys.get(key) else {
            return;
        };
        let rel = self.rel;
        let key: &'f str = rule.name.as_str();
        self.seen
            .get_mut(key)
            .expect("every NAME has a slot")
            .push(i);

        if !self.has_been_exec.contains(key) {
            if let Some(pre) = &rule.pre
                && let Err(e) = exec_snippet(pre, &mut self.state, Some(rec), &self.effects)
            {
                store.keyed(key, code_raised(rel, rule, pre, "PRE", rec, &e));
            }
            for check in &rule.check {
                self.run_check(rule, check, "CHECK", rec, store);
            }
            if let Some(post) = &rule.post
                && let Err(e) = exec_snippet(post, &mut self.state, Some(rec), &self.effects)
            {
                store.keyed(key, code_raised(rel, rule, post, "POST", rec, &e));
            }
        }
        if let Some(fc) = &rule.first_check
            && self.first_check_seen.insert(key)
        {
            self.run_check(rule, fc, "FIRST_CHECK", rec, store);
        }
        if let Some(ac) = &rule.atleast_one_check {
            self.atleast_one_check(key, ac, i, rec, store);
        }
        if key.contains("submission_") {
            self.has_been_exec.insert(key);
        }
    }

    /// Evaluate a CHECK or FIRST_CHECK on a record; a failure or an
    /// exception replaces the key's earlier message.
    fn run_check(
        &self,
        rule: &KeyRule,
        check: &Snippet<py::Expr>,
        kind: &str,
        rec: &Record,
        store: &mut Store,
    ) {
        let (rel, s) = (self.rel, &self.state);
        match py::eval_truth(&check.code, s, Some(rec), &self.effects) {
            Ok(true) => {}
            Ok(false) => {
                let official = format!(
                    "CHECK for '{}' failed in line {}:\n{}\nfailed test: {}\ncurrent context[s]={}\ncurrent line[v]={}",
                    rule.name,
                    rec.index,
                    rec.text,
                    check.text,
                    s.json_pretty(),
                    rec.v.json_pretty()
                );
                store.keyed(
                    &rule.name,
                    Diagnostic::error(
                        "check-failed",
                        format!("`{}` fails {kind} `{}`", rule.name, check.text.trim()),
                    )
                    .rule(rel, Some(check.line))
                    .key(rule.name.as_str())
                    .at(Some(rec.line))
                    .test(check.text.trim())
                    .expected(check.text.trim())
                    .found(found_for(&check.text, rec, s))
                    .official(official),
                );
            }
            Err(e) => {
                let official = format!(
                    "Failed executing CHECK code:\n{}\ntriggered by line:\n{}\ncurrent context[s]={}",
                    check.text,
                    rec.text,
                    s.json_pretty()
                );
                store.keyed(
                    &rule.name,
                    Diagnostic::error(
                        "check-raised",
                        format!("`{}` {kind} `{}` raised {e}", rule.name, check.text.trim()),
                    )
                    .rule(rel, Some(check.line))
                    .key(rule.name.as_str())
                    .at(Some(rec.line))
                    .test(check.text.trim())
                    .found(found_for(&check.text, rec, s))
                    .official(official),
                );
            }
        }
    }

    /// Tally an ATLEAST_ONE_CHECK on one record; its first exception is
    /// reported (the official checker crashes there).
    fn atleast_one_check(
        &mut self,
        key: &'f str,
        ac: &Snippet<py::Expr>,
        i: usize,
        rec: &Record,
        store: &mut Store,
    ) {
        let tally = self.atleast.entry(key).or_insert(AtLeastOneTally {
            held: 0,
            checked: 0,
            last: i,
        });
        tally.checked += 1;
        tally.last = i;
        match py::eval_truth(&ac.code, &self.state, Some(rec), &self.effects) {
            Ok(true) => tally.held += 1,
            Ok(false) => {}
            Err(e) => {
                if self.atleast_raised.insert(key) {
                    store.unkeyed.push(
                        Diagnostic::error(
                            "check-raised",
                            format!(
                                "ATLEAST_ONE_CHECK raised {e} (the official checker crashes with a traceback here)"
                            ),
                        )
                        .rule(self.rel, Some(ac.line))
                        .key(key)
                        .at(Some(rec.line))
                        .test(ac.text.trim())
                        .found(found_for(&ac.text, rec, &self.state)),
                    );
                }
            }
        }
    }

    /// An error for each key none of whose lines satisfied its
    /// ATLEAST_ONE_CHECK.
    fn report_atleast_one(&self, records: &[Record], store: &mut Store) {
        for (name, tally) in &self.atleast {
            if tally.held > 0 {
                continue;
            }
            let checked = tally.checked;
            let ac = self.file.keys[*name]
                .atleast_one_check
                .as_ref()
                .expect("has ATLEAST_ONE_CHECK");
            let last_rec = &records[tally.last];
            store.unkeyed.push(
                Diagnostic::error(
                    "target-not-reached",
                    format!(
                        "no `{name}` line satisfies `{}` ({checked} line{} checked)",
                        ac.text.trim(),
                        if checked == 1 { "" } else { "s" }
                    ),
                )
                .rule(self.rel, Some(ac.line))
                .key(*name)
                .at(Some(last_rec.line))
                .test(ac.text.trim())
                .expected(format!(
                    "at least one `{name}` line for which the test holds"
                ))
                .found(format!(
                    "last one: {}",
                    found_for(&ac.text, last_rec, &self.state)
                ))
                .official(format!("Failed checks for {name} : {}", ac.text)),
            );
        }
    }

    /// The occurrence requirements (REQ) of every key, then those of the
    /// AT_LEAST_ONE_OR groups.
    fn check_occurrences(&self, records: &[Record], store: &mut Store) {
        let rel = self.rel;
        let mut groups: IndexSet<Vec<String>> = IndexSet::new();
        for (k, rule) in &self.file.keys {
            let seen = &self.seen[k.as_str()];
            let n = seen.len();
            match &rule.req {
                Req::ExactlyOne if n != 1 => exactly_one_violation(rel, rule, seen, records, store),
                Req::AtLeastOne if n < 1 => store.keyed(
                    k,
                    Diagnostic::error(
                        "required-count",
                        format!("`{k}` is missing; at least one is required"),
                    )
                    .rule(rel, Some(rule.line))
                    .key(k.as_str())
                    .expected(format!("at least one `{k}` line"))
                    .found("none")
                    .official(format!(
                        "Required AT_LEAST_ONE occurrence of '{k}' but found {n}"
                    )),
                ),
                Req::AtLeast(m) if n < *m => store.keyed(
                    k,
                    Diagnostic::error(
                        "required-count",
                        format!(
                            "`{k}` appears {n} time{}; at least {m} are required",
                            if n == 1 { "" } else { "s" }
                        ),
                    )
                    .rule(rel, Some(rule.line))
                    .key(k.as_str())
                    .expected(format!("at least {m} `{k}` lines"))
                    .found(if n == 0 {
                        "none".to_string()
                    } else {
                        seen_lines(seen, records)
                    })
                    .official(format!(
                        "Required AT_LEAST({m}) occurrence of '{k}' but found {n}"
                    )),
                ),
                Req::AtLeastOneOr(alts) => {
                    let mut g: Vec<String> = alts.clone();
                    g.push(k.clone());
                    g.sort();
                    g.dedup();
                    groups.insert(g);
                }
                _ => {}
            }
        }
        for g in groups {
            self.at_least_one_of(&g, store);
        }
    }

    /// An error when no key of an AT_LEAST_ONE_OR group was logged.
    fn at_least_one_of(&self, group: &[String], store: &mut Store) {
        let any = group
            .iter()
            .any(|k| self.seen.get(k.as_str()).is_some_and(|v| !v.is_empty()));
        if any {
            return;
        }
        let quoted: Vec<String> = group.iter().map(|k| format!("'{k}'")).collect();
        let ticked: Vec<String> = group.iter().map(|k| format!("`{k}`")).collect();
        store.unkeyed.push(
            Diagnostic::error(
                "required-count",
                format!(
                    "none of {} is logged; at least one is required",
                    ticked.join(" or ")
                ),
            )
            .rule(self.rel, None)
            .key(group[0].as_str())
            .expected(format!("at least one of {}", ticked.join(", ")))
            .found("none")
            .official(format!(
                "Required AT_LEAST_ONE occurrence of {}",
                quoted.join(" or ")
            )),
        );
    }

    /// The END record: its PRE code, then each CHECK on the final state.
    fn end(&mut self, store: &mut Store) {
        let Some(end) = &self.file.end else {
            return;
        };
        let rel = self.rel;
        if let Some(pre) = &end.pre
            && let Err(e) = exec_snippet(pre, &mut self.state, None, &self.effects)
        {
            store.unkeyed.push(
                Diagnostic::error(
                    "code-raised",
                    format!("END PRE raised {e} (the official checker crashes here)"),
                )
                .rule(rel, Some(pre.line)),
            );
        }
        let s = &self.state;
        for c in &end.check {
            match py::eval_truth(&c.code, s, None, &self.effects) {
                Ok(true) => {}
                Ok(false) => store.unkeyed.push(
                    Diagnostic::error(
                        "check-failed",
                        format!("END CHECK failed: {}", c.text.trim()),
                    )
                    .rule(rel, Some(c.line))
                    .test(c.text.trim())
                    .found(format!("s = {}", s.json_compact()))
                    .official(format!(
                        "failed test: {}\ncurrent context[s]={}",
                        c.text,
                        s.json_pretty()
                    )),
                ),
                Err(e) => store.unkeyed.push(
                    Diagnostic::error("check-raised", format!("END CHECK raised {e}"))
                        .rule(rel, Some(c.line))
                        .test(c.text.trim())
                        .official(format!(
                            "Failed executing CHECK code:\n{}\ncurrent context[s]={}",
                            c.text,
                            s.json_pretty()
                        )),
                ),
            }
        }
    }
}

/// `line(s) L1, L2, …` of the records seen for a key (at most eight).
fn seen_lines(seen: &[usize], records: &[Record]) -> String {
    let n = seen.len();
    let ls: Vec<String> = seen
        .iter()
        .take(8)
        .map(|&i| records[i].line.to_string())
        .collect();
    let more = if n > 8 {
        format!(", … ({n} in all)")
    } else {
        String::new()
    };
    format!(
        "line{} {}{more}",
        if n == 1 { "" } else { "s" },
        ls.join(", ")
    )
}

/// An EXACTLY_ONE key logged `n != 1` times: a warning when every
/// occurrence has the same value (an error under `werror`), else an error.
fn exactly_one_violation(
    rel: &str,
    rule: &KeyRule,
    seen: &[usize],
    records: &[Record],
    store: &mut Store,
) {
    let k = &rule.name;
    let n = seen.len();
    let values: Vec<&Value> = seen.iter().map(|&i| records[i].value()).collect();
    let base = format!("Required EXACTLY_ONE occurrence of '{k}' but found {n}");
    let first_line = seen.first().map(|&i| records[i].line);
    let second_line = seen.get(1).map(|&i| records[i].line);
    if n > 0 && values.iter().all(|v| py_eq(v, values[0])) {
        store.warn(
            k,
            Diagnostic::warning(
                "required-count",
                format!("`{k}` is logged {n} times with the same value; exactly one is required"),
            )
            .rule(rel, Some(rule.line))
            .key(k.as_str())
            .at(second_line)
            .expected(format!("exactly one `{k}` line"))
            .found(seen_lines(seen, records))
            .official(base),
        );
        return;
    }
    let mut distinct: Vec<String> = Vec::new();
    for v in &values {
        let s = v.py_str();
        if !distinct.contains(&s) {
            distinct.push(s);
        }
    }
    let official = if n > 0 {
        format!("{base} with different values: [{}]", distinct.join(", "))
    } else {
        base
    };
    let found = if n == 0 {
        "none".to_string()
    } else {
        format!(
            "{} with different values [{}]",
            seen_lines(seen, records),
            distinct.join(", ")
        )
    };
    store.keyed(
        k,
        Diagnostic::error(
            "required-count",
            if n == 0 {
                format!("`{k}` is missing; exactly one is required")
            } else {
                format!("`{k}` is logged {n} times with different values; exactly one is required")
            },
        )
        .rule(rel, Some(rule.line))
        .key(k.as_str())
        .at(second_line.or(first_line))
        .expected(format!("exactly one `{k}` line"))
        .found(found)
        .official(official),
    );
}

fn code_raised(
    rel: &str,
    rule: &KeyRule,
    sn: &Snippet<Vec<py::Stmt>>,
    which: &str,
    rec: &Record,
    e: &PyError,
) -> Diagnostic {
    Diagnostic::error(
        "code-raised",
        format!("`{}` {which} code raised {e}", rule.name),
    )
    .rule(rel, Some(sn.line))
    .key(rule.name.as_str())
    .at(Some(rec.line))
    .test(sn.text.trim())
    .found(found_for(&sn.text, rec, &Value::None))
    .official(format!(
        "Failed executing code {which} code triggered by line :\n{}",
        rec.text
    ))
}

/// What the test looked at, compactly: the value, the metadata and the
/// state entries it names.
fn found_for(test: &str, rec: &Record, s: &Value) -> String {
    let mut parts = Vec::new();
    parts.push(format!("value={}", rec.value().json_compact()));
    if test.contains("metadata") {
        parts.push(format!("metadata={}", rec.metadata().json_compact()));
    }
    if test.contains("ll.timestamp") {
        parts.push(format!(
            "time_ms={}",
            crate::value::float_repr(rec.timestamp)
        ));
        // The init-budget rule: say it in minutes.
        if let (Some(first), Some(limit)) = (
            s.get("first_init_start").and_then(Value::as_f64),
            s.get("compile_time_mins").and_then(Value::as_f64),
        ) && test.contains("first_init_start")
            && first < 1e90
        {
            parts.push(format!(
                "initialisation took {:.1} min where {} min are allowed",
                (rec.timestamp - first) / 60_000.0,
                crate::value::float_repr(limit).trim_end_matches(".0")
            ));
        }
    }
    let mut seen = Vec::new();
    let mut rest = test;
    while let Some(pos) = rest.find("s['") {
        let after = &rest[pos + 3..];
        if let Some(end) = after.find('\'') {
            let name = &after[..end];
            if !seen.contains(&name) {
                seen.push(name);
                let v = s
                    .get(name)
                    .map(Value::py_repr)
                    .unwrap_or_else(|| "<unset>".into());
                parts.push(format!("s['{name}']={v}"));
            }
            rest = &after[end..];
        } else {
            break;
        }
    }
    parts.join(", ")
}

/// Hashable view of a JSON scalar, with Python's numeric key equality
/// (`1 == 1.0 == True` are one dict key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HashKey {
    None,
    Int(i64),
    Float(u64),
    Str(String),
}

fn hash_key(v: &Value) -> Result<HashKey, PyError> {
    Ok(match v {
        Value::None => HashKey::None,
        Value::Bool(b) => HashKey::Int(*b as i64),
        Value::Int(i) => HashKey::Int(*i),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                HashKey::Int(*f as i64)
            } else {
                HashKey::Float(f.to_bits())
            }
        }
        Value::Str(s) => HashKey::Str(s.clone()),
        other => {
            return Err(PyError::type_error(format!(
                "unhashable type: '{}'",
                crate::value::type_name(other)
            )));
        }
    })
}

/// The stable-diffusion BEGIN block of rulesets 4.0.0–5.0.0, natively:
/// group `eval_accuracy` lines that carry a `metric` by `samples_count` and
/// append one synthetic `aggregated_eval_accuracy` record per group whose
/// value maps `samples_count` and each metric name to its value, with the
/// latest timestamp of the group.
pub fn aggregate_eval_metrics(records: &mut Vec<Record>) -> Result<(), PyError> {
    let mut groups: IndexMap<HashKey, Record> = IndexMap::new();
    for rec in records.iter() {
        if rec.key.as_deref() != Some("eval_accuracy") {
            continue;
        }
        let metadata = rec.metadata();
        if !py_contains(metadata, &Value::str("metric"))? {
            continue;
        }
        let sc = metadata
            .get("samples_count")
            .ok_or_else(|| PyError::new("KeyError", "'samples_count'"))?;
        let hk = hash_key(sc)?;
        let agg = groups.entry(hk).or_insert_with(|| {
            let mut inner = Dict::new();
            inner.insert("samples_count".into(), sc.clone());
            let mut v = Dict::new();
            v.insert("value".into(), Value::Dict(inner));
            v.insert("metadata".into(), Value::Dict(Dict::new()));
            Record {
                index: -1,
                line: rec.line,
                timestamp: rec.timestamp,
                key: Some("aggregated_eval_accuracy".into()),
                v: Value::Dict(v).into(),
                text: String::new().into(),
                slim: false,
            }
        });
        if rec.timestamp > agg.timestamp {
            agg.timestamp = rec.timestamp;
        }
        let metric = metadata.get("metric").expect("checked above").py_str();
        if let Value::Dict(v) = &mut *agg.v
            && let Some(Value::Dict(inner)) = v.get_mut("value")
        {
            inner.insert(metric, rec.value().clone());
        }
    }
    records.extend(groups.into_values());
    Ok(())
}

/// Two or more runs in one file: an `init_start` after a `run_start`.
fn concatenated_runs(records: &[Record], index: &KeyIndex) -> Option<Diagnostic> {
    // The init_start and run_start records in file order: the indexed ones,
    // then those rules added.
    let mut marks: Vec<(usize, bool)> = ["init_start", "run_start"]
        .iter()
        .filter_map(|k| index.by_key.get(*k).map(|runs| (runs, *k == "init_start")))
        .flat_map(|(runs, init)| {
            runs.iter()
                .flat_map(move |r| r.clone().map(move |i| (i, init)))
        })
        .collect();
    marks.sort_unstable();
    marks.extend(
        records
            .iter()
            .enumerate()
            .skip(index.len)
            .filter_map(|(i, r)| match r.key.as_deref() {
                Some("init_start") => Some((i, true)),
                Some("run_start") => Some((i, false)),
                _ => None,
            }),
    );
    let mut starts: Vec<usize> = Vec::new(); // record indices where runs begin
    let mut run_started = false;
    for (i, init) in marks {
        if init && (starts.is_empty() || run_started) {
            starts.push(i);
            run_started = false;
        } else if !init {
            run_started = true;
        }
    }
    if starts.len() < 2 {
        return None;
    }
    let last_line = records.iter().map(|r| r.line).max().unwrap_or(0);
    let spans: Vec<String> = starts
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let from = records[i].line;
            let to = starts
                .get(n + 1)
                .map(|&j| records[j].line.saturating_sub(1))
                .unwrap_or(last_line);
            format!("run {} at lines {from}–{to}", n + 1)
        })
        .collect();
    Some(
        Diagnostic::error(
            "concatenated-runs",
            format!(
                "this file holds {} runs one after another ({}); every attempt needs its own log file",
                starts.len(),
                spans.join(", ")
            ),
        )
        .key("init_start")
        .line(records[starts[1]].line)
        .expected("one init_start … run_stop sequence per file")
        .found(format!("{} sequences", starts.len())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize, key: &str) -> Record {
        Record {
            index: i as i64,
            line: i + 1,
            timestamp: i as f64,
            key: Some(key.into()),
            v: Value::None.into(),
            text: String::new().into(),
            slim: false,
        }
    }

    fn log(keys: &[&str]) -> Vec<Record> {
        keys.iter().enumerate().map(|(i, k)| rec(i, k)).collect()
    }

    #[test]
    fn the_key_index_holds_runs_of_equal_keys_in_file_order() {
        let mut records = log(&["a", "b", "b", "b", "a", "c", "b"]);
        // Equal keys in separate allocations count as equal.
        records[2].key = Some("b".into());
        let index = KeyIndex::build(&records);
        assert_eq!(index.by_key["b"], [1..4, 6..7]);
        assert_eq!(index.by_key["a"], [0..1, 4..5]);
        let keys = ["c".to_string(), "b".to_string()];
        assert_eq!(index.of_keys(keys.iter()), [1, 2, 3, 5, 6]);
    }

    #[test]
    fn concatenated_runs_start_at_an_init_start_after_a_run_start() {
        let one = log(&["init_start", "init_start", "run_start", "x", "run_stop"]);
        assert!(concatenated_runs(&one, &KeyIndex::build(&one)).is_none());
        let two = log(&[
            "init_start",
            "run_start",
            "run_stop",
            "init_start",
            "init_start",
            "run_start",
        ]);
        let d = concatenated_runs(&two, &KeyIndex::build(&two)).expect("two runs");
        assert_eq!(d.line, Some(4), "{d:?}");
        assert!(d.message.contains("2 runs"), "{}", d.message);
        // Records rules added after the index was built count too.
        let mut added = log(&["init_start", "run_start"]);
        let index = KeyIndex::build(&added);
        added.push(rec(2, "init_start"));
        assert!(concatenated_runs(&added, &index).is_some());
    }
}
