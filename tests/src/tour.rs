//! README's tour as the tests run it: its sections, the commands of each
//! and the output shown after them; a scratch repository root to run them
//! in, as a fresh clone after `scripts/demo.sh` looks; and the comparison
//! of the output shown with the output printed.
//!
//! tests/tests/docs.rs runs the sections that need no training data (in
//! seconds); tests/tests/submission_flow.rs runs the ones that train, on
//! the runs it trains once for all its tests.

use crate::{copy_tree, referee_bin, repo_root};
use regex::Regex;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;

/// One `sh` block of the tour and the `text` block shown after it.
#[derive(Debug, Clone)]
pub struct Step {
    /// README.md's line of the block's first command (1-based).
    pub line: usize,
    /// The commands, `\` continuations joined, comment lines left out.
    pub commands: Vec<String>,
    /// The lines of the output shown (empty when none is); a line `…`
    /// stands for lines left out, a `…` inside a line for text left out.
    pub shown: Vec<String>,
}

/// A `### ` part of the tour (the text before the first is a part with an
/// empty title).
#[derive(Debug, Clone)]
pub struct Section {
    pub title: String,
    pub steps: Vec<Step>,
}

impl Section {
    /// Whether a command of this part trains or needs the training data
    /// (`referee run`, `referee audit --rerun N` with N > 0, `referee
    /// data …`): those take minutes and the prepared datasets.
    pub fn trains(&self) -> bool {
        self.steps
            .iter()
            .flat_map(|s| &s.commands)
            .any(|c| command_trains(c))
    }
}

fn command_trains(command: &str) -> bool {
    let w = shell_words(command);
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["referee", "run", ..] | ["referee", "data", ..] => true,
        ["referee", "audit", rest @ ..] => {
            rest.windows(2).any(|p| p[0] == "--rerun" && p[1] != "0")
                || rest
                    .iter()
                    .any(|a| a.strip_prefix("--rerun=").is_some_and(|n| n != "0"))
        }
        _ => false,
    }
}

/// The text of README.md's `## Tour` section and its line number.
pub fn tour_text() -> (String, usize) {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    section_of(&text, "Tour")
}

/// The `## ` section of a Markdown text whose title starts with `title`
/// (without its heading) and the line number of its first line.
pub fn section_of(text: &str, title: &str) -> (String, usize) {
    let mut out = String::new();
    let mut first = 0;
    let mut inside = false;
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with("## ") {
            inside = line[3..].starts_with(title);
            if inside {
                first = i + 2;
            }
            continue;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.is_empty(), "README.md has no section `## {title}…`");
    (out, first)
}

/// README.md's tour, part by part.
pub fn readme_tour() -> Vec<Section> {
    let (text, first) = tour_text();
    parse_tour(&text, first).unwrap_or_else(|e| panic!("README.md's tour: {e}"))
}

/// The parts of a tour's text whose first line is line `first`.
pub fn parse_tour(text: &str, first: usize) -> Result<Vec<Section>, String> {
    let mut sections = vec![Section {
        title: String::new(),
        steps: Vec::new(),
    }];
    // The open fence: its language and the line it opened on.
    let mut fence: Option<(String, usize)> = None;
    let mut block: Vec<(usize, String)> = Vec::new();
    // Whether only blank lines lie between the last `sh` block and here.
    let mut after_sh = false;
    for (i, line) in text.lines().enumerate() {
        let n = first + i;
        let t = line.trim();
        if let Some(lang) = t.strip_prefix("```") {
            match fence.take() {
                None => {
                    fence = Some((lang.trim().to_string(), n));
                    block.clear();
                }
                Some((lang, opened)) => {
                    let lines = std::mem::take(&mut block);
                    let section = sections.last_mut().unwrap();
                    match lang.as_str() {
                        "sh" | "bash" => {
                            let commands = join_commands(&lines);
                            let Some(&(line, _)) = lines.iter().find(|(_, l)| {
                                let l = l.trim();
                                !l.is_empty() && !l.starts_with('#')
                            }) else {
                                return Err(format!("line {opened}: an empty sh block"));
                            };
                            section.steps.push(Step {
                                line,
                                commands,
                                shown: Vec::new(),
                            });
                            after_sh = true;
                            continue;
                        }
                        "text" => match section.steps.last_mut() {
                            Some(step) if after_sh && step.shown.is_empty() => {
                                step.shown = lines.into_iter().map(|(_, l)| l).collect();
                            }
                            _ => {
                                return Err(format!(
                                    "line {opened}: a text block that follows no sh block"
                                ));
                            }
                        },
                        other => {
                            return Err(format!(
                                "line {opened}: a ```{other} block (the tour has sh blocks, each followed by the text it prints)"
                            ));
                        }
                    }
                    after_sh = false;
                }
            }
            continue;
        }
        if fence.is_some() {
            block.push((n, line.to_string()));
            continue;
        }
        if let Some(title) = line.strip_prefix("### ") {
            sections.push(Section {
                title: title.trim().to_string(),
                steps: Vec::new(),
            });
        }
        if !t.is_empty() {
            after_sh = false;
        }
    }
    if let Some((_, opened)) = fence {
        return Err(format!("line {opened}: a code block that is never closed"));
    }
    Ok(sections)
}

/// The commands of an `sh` block: `\` continuations joined, blank and
/// comment lines left out.
fn join_commands(lines: &[(usize, String)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for (_, line) in lines {
        let t = line.trim();
        if pending.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(t);
        out.push(std::mem::take(&mut pending));
    }
    if !pending.is_empty() {
        out.push(pending.trim_end().to_string());
    }
    out
}

/// Words of a command line as a shell splits them (quotes; no expansion),
/// up to a `#` comment.
pub fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '#') if !any && cur.is_empty() => break,
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// How output lines are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Exactly, but for durations (`0.02 s`), rates (`25 MB/s`) and thread
    /// counts, which depend on the machine.
    Exact,
    /// Every number masked, a decimal one as a whole (`6538.1` and `25064`
    /// are one shape: the printers give fewer decimals to larger figures):
    /// a trained run's samples, seeds, times and rates vary.
    Shape,
}

static DURATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d+(\.\d+)? (s|ms|[kMG]B/s)\b").unwrap());
static THREADS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b\d+ threads?\b").unwrap());
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(\.\d+)?").unwrap());
static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").unwrap());

fn normalize(line: &str, how: Compare) -> String {
    let line = SPACES.replace_all(line.trim(), " ");
    match how {
        Compare::Exact => {
            let line = DURATION.replace_all(&line, "# $2");
            THREADS.replace_all(&line, "# threads").into_owned()
        }
        Compare::Shape => NUMBER.replace_all(&line, "#").into_owned(),
    }
}

/// Whether `actual` is the `shown` line, where each `…` in `shown` stands
/// for text left out.
fn line_matches(shown: &str, actual: &str) -> bool {
    let parts: Vec<&str> = shown.split('…').map(str::trim).collect();
    if parts.len() == 1 {
        return shown == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if actual.len() < first.len() + last.len()
        || !actual.starts_with(first)
        || !actual[first.len()..].ends_with(last)
    {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// The shown lines that the printed output lacks: each shown line (but `…`)
/// must be a printed line, in the order shown.
pub fn missing_lines(shown: &[String], printed: &str, how: Compare) -> Vec<String> {
    let printed: Vec<String> = printed.lines().map(|l| normalize(l, how)).collect();
    let mut at = 0;
    let mut missing = Vec::new();
    for line in shown {
        if line.trim() == "…" || line.trim().is_empty() {
            continue;
        }
        let want = normalize(line, how);
        match printed[at..].iter().position(|p| line_matches(&want, p)) {
            Some(i) => at += i + 1,
            None => missing.push(line.clone()),
        }
    }
    missing
}

/// A scratch repository root laid out as a fresh clone after
/// `scripts/demo.sh`: the repository's files (linked; `examples/` copied,
/// so that a command writing into it is seen), the binary at
/// `target/release/referee`, the prepared data at `data/` when given.
pub struct TourRoot {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    exports: Vec<String>,
    entries: Vec<String>,
}

impl TourRoot {
    pub fn new(data: Option<&Path>) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("referee");
        std::fs::create_dir(&dir).unwrap();
        let root = repo_root();
        for e in std::fs::read_dir(&root).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" || name.starts_with("target") || name == "data" || name == "out" {
                continue;
            }
            if name == "examples" {
                copy_tree(&e.path(), &dir.join(&name));
            } else {
                std::os::unix::fs::symlink(e.path(), dir.join(&name)).unwrap();
            }
        }
        let bin = dir.join("target/release");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(referee_bin(), bin.join("referee")).unwrap();
        if let Some(data) = data {
            std::os::unix::fs::symlink(data, dir.join("data")).unwrap();
        }
        let entries = top_level(&dir);
        TourRoot {
            _tmp: tmp,
            dir,
            exports: Vec::new(),
            entries,
        }
    }

    /// Runs one command of the tour with bash in the root, after the
    /// tour's earlier `export` lines, in the environment of a plain shell
    /// (no virtual environment activated, no referee variables but the
    /// planner's file); stdout
    /// and stderr together, in the order printed.
    pub fn run(&self, command: &str) -> Output {
        let script = format!(
            "set -euo pipefail\nexec 2>&1\n{}\n{command}\n",
            self.exports.join("\n")
        );
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(script).current_dir(&self.dir);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            // Where the CPU planner keeps its choices (scripts/test.sh: under
            // target/, not the user's ~/.cache) changes nothing shown.
            if (k.starts_with("REFEREE_") && k != "REFEREE_CPU_PLAN_FILE") || k == "VIRTUAL_ENV" {
                cmd.env_remove(&*k);
            }
        }
        cmd.output().expect("run bash")
    }

    /// Runs every command of `section` in order, each of which must exit
    /// 0, and compares the output of each step with the one shown. A
    /// command `substitute` answers (with its output) is not run. Returns
    /// the problems, `README.md:LINE: …`.
    pub fn run_section(
        &mut self,
        section: &Section,
        how: Compare,
        mut substitute: impl FnMut(&str, &Path) -> Option<String>,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        for step in &section.steps {
            let mut printed = String::new();
            for command in &step.commands {
                if command.starts_with("export ") {
                    self.exports.push(command.clone());
                    continue;
                }
                if let Some(out) = substitute(command, &self.dir) {
                    printed.push_str(&out);
                    continue;
                }
                let o = self.run(command);
                let out = String::from_utf8_lossy(&o.stdout).into_owned();
                if !o.status.success() {
                    problems.push(format!(
                        "README.md:{}: `{command}` exited {:?}:\n{out}",
                        step.line,
                        o.status.code()
                    ));
                    // What follows builds on it.
                    return problems;
                }
                printed.push_str(&out);
            }
            let missing = missing_lines(&step.shown, &printed, how);
            if !missing.is_empty() {
                problems.push(format!(
                    "README.md:{}: the output shown after `{}` is not what it printed; not printed (in this order):\n  {}\nprinted:\n{printed}",
                    step.line,
                    step.commands.join("; "),
                    missing.join("\n  ")
                ));
            }
        }
        problems
    }

    /// What the tour changed outside `out/`: new entries of the root, and
    /// files of `examples/` changed, added or removed.
    pub fn changes_outside_out(&self) -> Vec<String> {
        let mut changes: Vec<String> = top_level(&self.dir)
            .into_iter()
            .filter(|e| e != "out" && !self.entries.contains(e))
            .map(|e| format!("wrote {e} (the tour writes under out/ only)"))
            .collect();
        let ours = self.dir.join("examples");
        let theirs = repo_root().join("examples");
        let (a, b) = (files_of(&ours), files_of(&theirs));
        for f in a.iter().chain(&b) {
            let (x, y) = (
                std::fs::read(ours.join(f)).ok(),
                std::fs::read(theirs.join(f)).ok(),
            );
            if x != y && !changes.iter().any(|c| c.ends_with(f.as_str())) {
                changes.push(format!("changed examples/{f}"));
            }
        }
        changes
    }
}

fn top_level(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn files_of(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tour_parses_into_parts_steps_and_shown_output() {
        let text = "Intro\n\n```sh\nexport PATH=\"$PWD/x:$PATH\"\n```\n\n### One\n\n```sh\n# a comment\nreferee check a \\\n   b\nreferee perf c\n```\n```text\nPASS a\n…\n```\n\nprose\n\n```sh\nreferee run m --out out/x\n```\n\n### Two\n```sh\nreferee audit p --rerun 1\n```\n";
        let s = parse_tour(text, 10).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].steps[0].commands, ["export PATH=\"$PWD/x:$PATH\""]);
        assert_eq!(s[1].title, "One");
        assert_eq!(
            s[1].steps[0].commands,
            ["referee check a b", "referee perf c"]
        );
        assert_eq!(s[1].steps[0].line, 20, "the first command's line");
        assert_eq!(s[1].steps[0].shown, ["PASS a", "…"]);
        assert!(s[1].steps[1].shown.is_empty());
        assert!(s[1].trains() && s[2].trains() && !s[0].trains());
        for bad in [
            "prose\n```text\nx\n```\n",
            "```sh\nreferee a\n```\nprose\n```text\nx\n```\n",
            "```python\nx\n```\n",
            "```sh\nreferee a\n",
            "```sh\n# only a comment\n```\n",
        ] {
            assert!(parse_tour(bad, 1).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn shown_lines_must_be_printed_in_order_numbers_masked_as_asked() {
        let printed = "PASS a.txt (0.02 s, 2 threads)\nrun 1/5: success after 9216 samples\nVERIFIED pkg (key SHA256:abc, signer acme)\nend\n";
        let s = |v: &[&str]| v.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        let ok = s(&[
            "PASS a.txt  (1.50 s, 16 threads)",
            "…",
            "VERIFIED pkg (key SHA256:…, signer acme)",
        ]);
        assert!(missing_lines(&ok, printed, Compare::Exact).is_empty());
        // A number that is not a time differs.
        let run = s(&["run 2/5: success after 10752 samples"]);
        assert_eq!(missing_lines(&run, printed, Compare::Exact), run);
        assert!(missing_lines(&run, printed, Compare::Shape).is_empty());
        // A rate printed with fewer decimals on a faster machine.
        let rate = s(&["throughput: 51.0 samples/s, 6538.1 tokens/s"]);
        let faster = "throughput: 195.8 samples/s, 25064 tokens/s\n";
        assert!(missing_lines(&rate, faster, Compare::Shape).is_empty());
        assert_eq!(missing_lines(&rate, faster, Compare::Exact), rate);
        // Out of order, another signer, a word changed.
        let bad = s(&["end", "PASS a.txt (0.02 s, 2 threads)"]);
        assert_eq!(
            missing_lines(&bad, printed, Compare::Exact),
            s(&["PASS a.txt (0.02 s, 2 threads)"])
        );
        let bad = s(&["VERIFIED pkg (key SHA256:…, signer other)"]);
        assert_eq!(missing_lines(&bad, printed, Compare::Exact), bad);
        let bad = s(&["run 1/5: failure after 9216 samples"]);
        assert_eq!(missing_lines(&bad, printed, Compare::Shape), bad);
    }

    #[test]
    fn a_section_is_found_with_the_line_it_starts_on() {
        let text = "# T\n\n## Tour\n\nfirst\n```sh\n## not a heading\n```\n\n## Next\nother\n";
        let (section, line) = section_of(text, "Tour");
        assert_eq!(line, 4);
        assert!(section.starts_with("\nfirst\n") && section.contains("## not a heading"));
        assert!(!section.contains("other"), "{section}");
    }

    #[test]
    fn a_command_trains_when_it_runs_a_benchmark_or_re_runs_a_result() {
        assert!(command_trains("referee run mini_llm --out out/llm"));
        assert!(command_trains("referee data prepare mini_llm"));
        assert!(command_trains("referee audit p --rerun 1 --out a"));
        assert!(command_trains("referee audit p --rerun=2"));
        assert!(!command_trains("referee audit p --rerun 0"));
        assert!(!command_trains("referee check out/llm"));
        assert!(!command_trains("echo referee run"));
    }
}
