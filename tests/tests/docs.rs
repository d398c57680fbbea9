//! The documentation holds: every link in README.md and docs/*.md resolves
//! (relative files and `#anchors` to headings); README's tour runs from the
//! repository alone: every `referee …` line of it is a subcommand and flag
//! set the binary accepts (its parser, in process, for the flags that go
//! together), its parts that need no training are run here in
//! a scratch repository root and print what the tour shows (the parts that
//! train run in tests/tests/submission_flow.rs), and README names no path
//! outside the repository nor, anywhere, a commit id or a date; README's
//! command list names exactly the binary's subcommands. docs/performance.md
//! stays a reference (at most 300 lines) and every line of its history,
//! docs/bench-history.jsonl, has the fields the bench scripts write
//! (`bench_record` is run here to show it). Commit messages: the commit-msg
//! hook (.githooks/) and CI's check (scripts/check-commits.sh) are tried on
//! scratch repositories.

use clap::Parser;
use referee_tests::{referee_bin, repo_root, stderr, stdout, tour};
use regex::Regex;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

/// README.md and every Markdown file under docs/.
fn doc_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files
}

/// The lines of a Markdown text outside fenced code blocks, with their
/// 1-based line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// A line without its inline code spans (links inside them are text).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let close = "`".repeat(ticks);
        match after.find(&close) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The link targets of one line: `[text](target)`, `![alt](target)` and
/// reference definitions `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    let t = line.trim_start();
    if t.starts_with('[')
        && let Some(i) = t.find("]:")
    {
        if let Some(target) = t[i + 2..].split_whitespace().next() {
            out.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        }
        return out;
    }
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        // The target ends at the `)` that closes the parenthesis (targets
        // may hold balanced parentheses) or at a title after a space.
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = j;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        rest = &after[end.min(after.len())..];
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation other than `-`
/// and `_` dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    // Links in a heading count by their text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        let close = rest[i..].find(')').map(|j| i + j + 1).unwrap_or(rest.len());
        text.push_str(&rest[..i]);
        rest = &rest[close..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor the headings of a Markdown text define (duplicates get
/// `-1`, `-2`, … as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let title = line[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(title);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every broken link of `files`, as `file:line: target: why`, and how many
/// links were checked.
fn broken_links(files: &[PathBuf]) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in files {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let shown = file.strip_prefix(repo_root()).unwrap_or(file);
                let at = format!("{}:{n}: {target}", shown.display());
                if path.is_empty() && anchor.is_none() {
                    problems.push(format!("{at}: an empty link"));
                } else if !resolved.exists() {
                    problems.push(format!("{at}: no such file"));
                } else if let Some(anchor) = anchor
                    && resolved.extension().is_some_and(|x| x == "md")
                {
                    let known = anchors(&std::fs::read_to_string(&resolved).unwrap());
                    if !known.contains(anchor) {
                        problems.push(format!(
                            "{at}: no heading with the anchor #{anchor} there (its anchors: {})",
                            known.into_iter().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
        }
    }
    (problems, checked)
}

#[test]
fn every_link_in_readme_and_docs_resolves() {
    let files = doc_files();
    assert!(files.len() >= 5, "README.md and docs/*.md: {files:?}");
    let (problems, checked) = broken_links(&files);
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    // README links into docs/: a parser that finds nothing would pass above.
    assert!(checked >= 20, "only {checked} relative links found");
}

#[test]
fn the_link_checker_catches_a_missing_file_and_a_missing_anchor() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.md");
    std::fs::write(
        tmp.path().join("b.md"),
        "# Title\n\n## `referee run --exec` overhead\n\n## Same\n\n## Same\n\n```sh\n# not a heading\n```\n",
    )
    .unwrap();
    std::fs::write(
        &a,
        "[ok](b.md) [ok](b.md#title) [ok](b.md#referee-run---exec-overhead) [ok](b.md#same-1)\n\
         [ok](https://example.org/x.md) `[code](nowhere.md)` [ok](#here)\n\
         # Here\n\
         [bad](c.md) [bad](b.md#not-a-heading) [bad](#nowhere)\n\
         ```\n[code](nowhere.md)\n```\n",
    )
    .unwrap();
    let (problems, checked) = broken_links(&[a]);
    assert_eq!(checked, 8, "{problems:?}");
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].contains("a.md:4: c.md: no such file"),
        "{}",
        problems[0]
    );
    assert!(problems[1].contains("#not-a-heading"), "{}", problems[1]);
    assert!(problems[2].contains("#nowhere"), "{}", problems[2]);
}

/// The section of README.md under the `## ` heading that starts with `title`.
fn readme_section(title: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    tour::section_of(&text, title).0
}

/// `referee ARGS --help` (before a `--`, after which words go to a
/// program): clap rejects an unknown subcommand or flag, or a bad value,
/// met before `--help` with exit 2; exit 0 means every word was accepted.
fn accepted(args: &[String]) -> Result<(), String> {
    let mut with_help: Vec<&str> = Vec::new();
    let mut helped = false;
    for a in args {
        if a == "--" && !helped {
            with_help.push("--help");
            helped = true;
        }
        with_help.push(a);
    }
    if !helped {
        with_help.push("--help");
    }
    let o = Command::new(referee_bin())
        .args(&with_help)
        .output()
        .expect("run referee");
    let usage = format!("Usage: referee {}", args[0]);
    if o.status.code() == Some(0) && stdout(&o).contains(&usage) {
        // `--help` stops clap before it checks which flags go together:
        // the whole line, as the binary's parser reads it.
        referee_harness::cli::Cli::try_parse_from(
            std::iter::once("referee").chain(args.iter().map(String::as_str)),
        )
        .map(|_| ())
        .map_err(|e| format!("`referee {}` is refused:\n{e}", args.join(" ")))
    } else {
        Err(format!(
            "`referee {}` is not accepted (exit {:?}):\n{}{}",
            args.join(" "),
            o.status.code(),
            stdout(&o),
            stderr(&o)
        ))
    }
}

/// The `referee …` commands of README's tour, split into words (without
/// `referee`).
fn tour_referee_commands() -> Vec<Vec<String>> {
    tour::readme_tour()
        .iter()
        .flat_map(|s| &s.steps)
        .flat_map(|s| &s.commands)
        .map(|c| tour::shell_words(c))
        .filter(|w| w.first().is_some_and(|w| w == "referee"))
        .map(|w| w[1..].to_vec())
        .collect()
}

#[test]
fn every_command_of_the_readme_tour_is_accepted() {
    let lines = tour_referee_commands();
    let subcommands: BTreeSet<&str> = lines.iter().map(|l| l[0].as_str()).collect();
    for sub in [
        "data",
        "run",
        "check",
        "package-check",
        "summarize",
        "package",
        "keygen",
        "sign",
        "verify",
        "audit",
        "perf",
        "compare",
    ] {
        assert!(
            subcommands.contains(sub),
            "README's tour shows no `referee {sub}` (it shows {subcommands:?})"
        );
    }
    let failures: Vec<String> = lines.iter().filter_map(|l| accepted(l).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The check itself rejects what clap rejects.
    let bad = |s: &str| tour::shell_words(s);
    assert!(accepted(&bad("run mini_llm --no-such-flag")).is_err());
    assert!(accepted(&bad("run mini_llm --division nowhere")).is_err());
    assert!(accepted(&bad("no-such-command")).is_err());
    assert!(
        accepted(&bad(
            "run --exec --benchmark b --ruleset 5.0.0 --config c.yaml -- prog"
        ))
        .is_err()
    );
    assert!(accepted(&bad("run mini_llm --ruleset 5.0.0")).is_err());
    assert!(
        accepted(&bad(
            "run --exec --benchmark b --ruleset 5.0.0 -- prog --help"
        ))
        .is_ok()
    );
}

/// Runs every part of README's tour that needs no training (the parts
/// that train run in tests/tests/submission_flow.rs, on the runs it
/// trains), in a scratch repository root, and compares what each command
/// prints with the output shown: the verdicts, scores and comparison of
/// real results are deterministic, so all but times must be as shown.
#[test]
fn the_readme_tour_s_parts_without_training_run_from_the_repository() {
    let tour = tour::readme_tour();
    let mut root = tour::TourRoot::new(None);
    let mut problems = Vec::new();
    let mut ran = Vec::new();
    for section in &tour {
        // The text before the first part (the PATH) is the first "part".
        if !section.trains() {
            problems.extend(root.run_section(section, tour::Compare::Exact, |_, _| None));
            ran.push(section.title.clone());
        }
    }
    assert!(
        ran.len() >= 2,
        "no part of the tour without training: {ran:?}"
    );
    assert!(
        tour.iter().any(tour::Section::trains),
        "no part of the tour trains (tests/tests/submission_flow.rs runs that part)"
    );
    problems.extend(root.changes_outside_out());
    assert!(
        problems.is_empty(),
        "README's tour ({ran:?}):\n{}",
        problems.join("\n\n")
    );
}

#[test]
fn the_scratch_root_sees_what_a_tour_writes_outside_out() {
    let root = tour::TourRoot::new(None);
    assert!(root.changes_outside_out().is_empty());
    let o = root.run(
        "mkdir -p out/x && target/release/referee keygen --out out/x/k >/dev/null && echo $PWD",
    );
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(root.changes_outside_out().is_empty(), "out/ is the tour's");
    let log = "examples/training_results_v5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_0.txt";
    for command in [format!("echo >> {log}"), "touch acme.key".to_string()] {
        assert!(root.run(&command).status.success(), "{command}");
    }
    let changes = root.changes_outside_out();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes[0].contains("acme.key") && changes[1].contains("result_0.txt"));
    // The repository's own copy is untouched.
    let text = std::fs::read_to_string(repo_root().join(log)).unwrap();
    assert!(!text.ends_with("\n\n"));
}

/// What ties a text to one machine or one moment: a path outside the
/// repository (absolute, `~`, `$HOME`, or one with a `..` component), a
/// commit id (7 to 40 lower-case hex digits with a digit and a letter) or
/// a date; as `line N: what: the word`. Cheap to fool, it is there to
/// catch the honest slip of pasting a lab note.
fn outside_the_repository(text: &str, first_line: usize) -> Vec<String> {
    static PATH_OUT: LazyLock<Regex> = LazyLock::new(|| {
        // A word that starts a path: after a space, quote, backtick,
        // parenthesis, `=` or the line's start.
        Regex::new(r#"(?:^|[\s`'"(=\[])((?:/|~|\$HOME\b|\$\{HOME\})[^\s`'")\]]*)"#).unwrap()
    });
    static DOTDOT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"(?:^|[\s`'"(=/\[])\.\.(?:/|[\s`'")\]]|$)"#).unwrap());
    static COMMIT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b[0-9a-f]{7,40}\b").unwrap());
    static DATE: LazyLock<Regex> = LazyLock::new(|| {
        let month = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\\.?";
        Regex::new(&format!(
            r"\b(?:(?:19|20)\d\d[-/.](?:0[1-9]|1[0-2])[-/.](?:0[1-9]|[12]\d|3[01])|(?:19|20)\d{{6}}T\d{{4,6}}|\d{{1,2}} {month},? (?:19|20)\d\d|{month} \d{{1,2}},? (?:19|20)\d\d|{month} (?:19|20)\d\d)\b"
        ))
        .unwrap()
    });
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = first_line + i;
        // A URL's path is not a file's.
        let without_urls: String = line
            .split_whitespace()
            .map(|w| if w.contains("://") { "" } else { w })
            .collect::<Vec<_>>()
            .join(" ");
        for m in PATH_OUT.captures_iter(&without_urls) {
            out.push(format!(
                "line {n}: a path outside the repository: {}",
                &m[1]
            ));
        }
        if DOTDOT.is_match(&without_urls) {
            out.push(format!(
                "line {n}: a path outside the repository (`..`): {line}"
            ));
        }
        for m in COMMIT.find_iter(line) {
            let w = m.as_str();
            // ed25519, the signature scheme, is hex too.
            if w != "ed25519"
                && w.bytes().any(|b| b.is_ascii_digit())
                && w.bytes().any(|b| b.is_ascii_lowercase())
            {
                out.push(format!("line {n}: a commit id: {w}"));
            }
        }
        for m in DATE.find_iter(line) {
            out.push(format!("line {n}: a date: {}", m.as_str()));
        }
    }
    out
}

/// README.md is read in a fresh clone anywhere: it names no path outside
/// the repository, and its tour, which a reader runs as is, no commit and
/// no date (what it shows is what the checkout at hand prints).
#[test]
fn the_readme_names_no_path_outside_the_repository_nor_a_commit_or_date() {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let problems = outside_the_repository(&text, 1);
    assert!(
        problems.is_empty(),
        "README.md ties itself to a machine or a moment:\n{}",
        problems.join("\n")
    );
    let (tour, _) = tour::tour_text();
    assert!(
        tour.contains("examples/training_results_v5.0"),
        "the tour's real results are the repository's"
    );
}

#[test]
fn the_outside_check_catches_paths_commits_and_dates() {
    let good = "Run `referee check examples/x` (see [docs](docs/a.md), https://example.org/a/b/../c).\n\
                export PATH=\"$PWD/target/release:$PATH\"\n\
                tokens/s/GPU; run 1/5; seed 20250601, 1000000 lines, fingerprint cafebabe, v5.0, 2048-token BPE, 4.26\n\
                ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKLgSVQqMrHvHkseXV0f94YskUAAfoY2uXI7DBom/11L\n";
    let found = outside_the_repository(good, 1);
    assert!(found.is_empty(), "{found:#?}");
    for (bad, want) in [
        ("referee compare ../shared/corpus/a b", "`..`"),
        ("see `/work/shared/corpus`", "/work/shared/corpus"),
        ("data in ~/data", "~/data"),
        ("--data-dir=$HOME/data", "$HOME/data"),
        ("`referee check a/../../b`", "`..`"),
        ("as run at commit 4a09849 on", "4a09849"),
        ("(data preparation at 93a6b76f0e)", "93a6b76f0e"),
        ("measured 2026-12-07 on", "2026-12-07"),
        ("on 7 Dec 2026 on", "7 Dec 2026"),
        ("on December 7, 2026", "December 7, 2026"),
        ("out/mini_llm-20261207T101500", "20261207T1015"),
    ] {
        let found = outside_the_repository(&format!("fine\n{bad}\n"), 10);
        assert!(
            found.len() == 1 && found[0].starts_with("line 11: ") && found[0].contains(want),
            "{bad}: expected one finding naming {want}, got {found:?}"
        );
    }
}

/// The subcommands `referee --help` lists.
fn binary_subcommands() -> BTreeSet<String> {
    let o = Command::new(referee_bin()).arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let mut out = BTreeSet::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            if line.starts_with("   ") {
                continue; // a wrapped description
            }
            let name = line.split_whitespace().next().unwrap().to_string();
            if name != "help" {
                out.insert(name);
            }
        }
    }
    assert!(out.len() >= 10, "{text}");
    out
}

#[test]
fn readme_lists_exactly_the_binary_s_commands() {
    let section = readme_section("Commands");
    let mut listed = BTreeSet::new();
    for line in section.lines() {
        // `| `referee NAME …` | what it does |` or `- `referee NAME …` …`
        let mut rest = line;
        while let Some(i) = rest.find("`referee ") {
            let name = rest[i + 9..]
                .split(|c: char| c.is_whitespace() || c == '`')
                .next()
                .unwrap();
            listed.insert(name.to_string());
            rest = &rest[i + 9..];
        }
    }
    let binary = binary_subcommands();
    let missing: Vec<_> = binary.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&binary).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README's Commands section: missing {missing:?}, not commands of the binary {extra:?}"
    );
}

/// docs/performance.md is a reference: the current figure of each claim,
/// short enough to read; the history is docs/bench-history.jsonl.
#[test]
fn performance_md_is_a_reference_of_at_most_300_lines() {
    let path = repo_root().join("docs/performance.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "docs/performance.md has {lines} lines (at most 300): the current figures belong \
         there, earlier ones and experiments in docs/bench-history.jsonl"
    );
    // The old lab log's session marks: a reference names date, machine
    // and commit instead.
    let marks: Vec<(usize, char)> = text
        .lines()
        .enumerate()
        .flat_map(|(i, l)| {
            l.chars()
                .filter(|c| "☆◎◇◆◈✦✧★▲‖".contains(*c))
                .map(move |c| (i + 1, c))
        })
        .collect();
    assert!(
        marks.is_empty(),
        "docs/performance.md: session marks at (line, mark) {marks:?}"
    );
}

/// The keys every line of docs/bench-history.jsonl has (the same list as
/// `REQUIRED` in scripts/bench_history.py, which writes the lines).
const HISTORY_KEYS: [&str; 17] = [
    "date", "machine", "cpu", "family", "model", "cores", "commit", "script", "params", "metric",
    "unit", "subject", "referee", "peer", "ratio", "kept", "note",
];

/// What is wrong with the lines of a benchmark history, as `line N: …`.
fn history_problems(text: &str) -> Vec<String> {
    use serde_json::Value;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let row: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.push(format!("line {n}: not JSON ({e})"));
                continue;
            }
        };
        let Some(obj) = row.as_object() else {
            out.push(format!("line {n}: not a JSON object"));
            continue;
        };
        for key in HISTORY_KEYS {
            if !obj.contains_key(key) {
                out.push(format!("line {n}: no `{key}`"));
            }
        }
        let text_of = |k: &str| obj.get(k).and_then(Value::as_str);
        let date = text_of("date").unwrap_or("");
        let b = date.as_bytes();
        let iso = b.len() == 10
            && b.iter().enumerate().all(|(j, c)| {
                if j == 4 || j == 7 {
                    *c == b'-'
                } else {
                    c.is_ascii_digit()
                }
            });
        if obj.contains_key("date") && !iso {
            out.push(format!("line {n}: `date` {date:?} is not YYYY-MM-DD"));
        }
        for k in ["machine", "cpu", "script", "metric", "subject"] {
            if obj.contains_key(k) && text_of(k).is_none_or(str::is_empty) {
                out.push(format!("line {n}: `{k}` is not a non-empty string"));
            }
        }
        for k in ["unit", "note"] {
            if obj.contains_key(k) && text_of(k).is_none() {
                out.push(format!("line {n}: `{k}` is not a string"));
            }
        }
        for k in ["family", "model", "cores"] {
            if let Some(v) = obj.get(k)
                && !(v.is_null() || v.is_u64())
            {
                out.push(format!("line {n}: `{k}` is {v}, not a count or null"));
            }
        }
        if let Some(v) = obj.get("commit")
            && !(v.is_null()
                || v.as_str().is_some_and(|c| {
                    (7..=40).contains(&c.len()) && c.chars().all(|ch| ch.is_ascii_hexdigit())
                }))
        {
            out.push(format!(
                "line {n}: `commit` is {v}, not an abbreviated hash or null"
            ));
        }
        if let Some(v) = obj.get("params")
            && !v.is_object()
        {
            out.push(format!("line {n}: `params` is {v}, not an object"));
        }
        for k in ["referee", "peer", "ratio"] {
            if let Some(v) = obj.get(k)
                && !(v.is_null() || v.is_number())
            {
                out.push(format!("line {n}: `{k}` is {v}, not a number or null"));
            }
        }
        match obj.get("kept") {
            Some(Value::Bool(false)) if text_of("note").is_none_or(str::is_empty) => {
                out.push(format!(
                    "line {n}: an experiment not kept needs a `note` saying what was tried"
                ));
            }
            Some(Value::Bool(_)) | None => {}
            Some(v) => out.push(format!("line {n}: `kept` is {v}, not true or false")),
        }
    }
    out
}

#[test]
fn every_line_of_the_bench_history_has_the_required_fields() {
    let text = std::fs::read_to_string(repo_root().join("docs/bench-history.jsonl")).unwrap();
    let problems = history_problems(&text);
    assert!(
        problems.is_empty(),
        "docs/bench-history.jsonl: {} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    // A checker that reads nothing would pass above.
    assert!(text.lines().count() >= 500, "the history lost its lines");
    assert!(
        text.lines().any(|l| l.contains("\"kept\": false")),
        "no experiment measured and not kept"
    );
}

#[test]
fn the_history_check_catches_what_breaks_a_line() {
    let good = r#"{"date": "2026-12-07", "machine": "m", "cpu": "c", "family": 25, "model": 1, "cores": 2, "commit": "08024f2", "script": "scripts/bench-x.sh", "params": {}, "metric": "step_ms", "unit": "ms", "subject": "mini_llm b16", "referee": 1.5, "peer": 3, "ratio": 0.5, "kept": true, "note": ""}"#;
    assert!(
        history_problems(good).is_empty(),
        "{:?}",
        history_problems(good)
    );
    let cases = [
        (good.replace("2026-12-07", "07.12.2026"), "`date`"),
        (good.replace(r#""cpu": "c", "#, ""), "no `cpu`"),
        (
            good.replace(r#""referee": 1.5"#, r#""referee": "fast""#),
            "`referee`",
        ),
        (
            good.replace(r#""commit": "08024f2""#, r#""commit": "HEAD""#),
            "`commit`",
        ),
        (
            good.replace(r#""family": 25"#, r#""family": -1"#),
            "`family`",
        ),
        (
            good.replace(r#""params": {}"#, r#""params": []"#),
            "`params`",
        ),
        (
            good.replace(r#""kept": true"#, r#""kept": false"#),
            "not kept",
        ),
        (good.replace(r#""kept": true"#, r#""kept": "no""#), "`kept`"),
        (good[..good.len() - 1].to_string(), "not JSON"),
        ("[1, 2]".to_string(), "not a JSON object"),
    ];
    for (line, want) in cases {
        let text = format!("{good}\n{line}\n");
        let problems = history_problems(&text);
        assert!(
            problems.len() == 1
                && problems[0].starts_with("line 2: ")
                && problems[0].contains(want),
            "{line}: expected one problem naming {want}, got {problems:?}"
        );
    }
}

#[test]
fn the_history_writer_requires_the_keys_the_check_requires() {
    let py = std::fs::read_to_string(repo_root().join("scripts/bench_history.py")).unwrap();
    let start = py
        .find("REQUIRED = (")
        .expect("REQUIRED in bench_history.py");
    let end = start + py[start..].find(')').unwrap();
    let keys: BTreeSet<&str> = py[start + "REQUIRED = (".len()..end]
        .split(',')
        .map(|k| k.trim().trim_matches('"'))
        .filter(|k| !k.is_empty())
        .collect();
    assert_eq!(keys, HISTORY_KEYS.into_iter().collect::<BTreeSet<_>>());
}

/// A bench script's `bench_record` line, as the scripts run it: a script
/// under scripts/ names itself; returns (exit code, stderr, the history).
fn bench_record_run(script_body: &str, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("history.jsonl");
    let script = tmp.path().join("bench-fake.sh");
    std::fs::write(
        &script,
        format!(
            "set -euo pipefail\ncd {}\n. scripts/bench-machine.sh\n{script_body}\n",
            repo_root().display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .arg("--flag")
        .env("BENCH_HISTORY", &history);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run bash");
    let written = std::fs::read_to_string(&history).unwrap_or_default();
    (o.status.code(), stderr(&o), written)
}

#[test]
fn bench_record_appends_a_line_the_history_check_accepts() {
    let (code, err, written) = bench_record_run(
        "bench_record metric=step_ms unit=ms subject='mini_llm b16' referee=55.3 peer=110.6 \
         peer_name='PyTorch compiled' params.ROUNDS=2 params.OLD=0123456 extra.pairs:='[[1,2]]'",
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(written.lines().count(), 1, "{written}");
    assert!(
        history_problems(&written).is_empty(),
        "{:?}",
        history_problems(&written)
    );
    let row: serde_json::Value = serde_json::from_str(written.trim()).unwrap();
    assert_eq!(row["script"], "scripts/bench-fake.sh");
    assert_eq!(row["command"], "scripts/bench-fake.sh --flag");
    assert_eq!(row["subject"], "mini_llm b16");
    assert_eq!(row["ratio"], 0.5);
    assert_eq!(row["params"]["ROUNDS"], 2);
    assert_eq!(row["params"]["OLD"], "0123456", "a revision stays text");
    assert_eq!(row["extra"]["pairs"][0][1], 2);
    assert_eq!(row["kept"], true);
    assert!(
        row["machine"].as_str().unwrap().contains("load average"),
        "the machine line of bench-machine.sh: {row}"
    );

    // An experiment not kept says what was tried; a figure is a number.
    for (body, env, want) in [
        (
            "bench_record metric=m unit=u subject=s referee=1",
            vec![("BENCH_KEPT", "false")],
            "needs a note",
        ),
        (
            "bench_record metric=m unit=u subject=s referee=fast",
            vec![],
            "finite number",
        ),
        (
            "bench_record metric=m unit=u subject=s referee=1 date=2020-01-01",
            vec![],
            "set by the recorder",
        ),
        (
            "bench_record metric=m unit=u referee=1",
            vec![],
            "missing subject",
        ),
    ] {
        let (code, err, written) = bench_record_run(body, &env);
        assert_ne!(code, Some(0), "{body}: accepted");
        assert!(err.contains(want), "{body}: {err}");
        assert!(written.is_empty(), "{body}: wrote {written}");
    }
    let (code, err, written) = bench_record_run(
        "bench_record metric=m unit=u subject=s referee=1",
        &[("BENCH_KEPT", "false"), ("BENCH_NOTE", "tiles of 8 rows")],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(written.contains(r#""kept": false"#) && written.contains("tiles of 8 rows"));
    let (code, err, written) = bench_record_run(
        "bench_record metric=m unit=u subject=s referee=1",
        &[("BENCH_HISTORY", "off")],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(written.is_empty(), "BENCH_HISTORY=off wrote {written}");
}

/// `git ARGS` in `dir`, with no user or system configuration.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git")
}

/// Commits `message` in `dir` (through the hooks unless `verify` is false);
/// returns git's exit code and stderr.
fn commit(dir: &Path, message: &str, verify: bool) -> (Option<i32>, String) {
    let file = dir.join(".git/test-message");
    std::fs::write(&file, message).unwrap();
    let hooks = format!("core.hooksPath={}", repo_root().join(".githooks").display());
    let file = file.to_str().unwrap();
    let mut args = vec!["-c", &hooks, "commit", "--allow-empty", "-q", "-F", file];
    if !verify {
        args.push("--no-verify");
    }
    let o = git(dir, &args);
    (o.status.code(), stderr(&o))
}

fn commits(dir: &Path) -> usize {
    let o = git(dir, &["rev-list", "--count", "--all"]);
    stdout(&o).trim().parse().unwrap_or(0)
}

#[test]
fn the_commit_msg_hook_takes_a_short_subject_and_a_blank_line_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(git(dir, &["init", "-q"]).status.success());
    let accepted = [
        "Bound the line length\n\nThe body: why, with figures.\n".to_string(),
        "Bound the line length\n".to_string(),
        format!(
            "{}\n\nA subject of exactly 72 characters.\n",
            "s".repeat(72)
        ),
        // Characters, not bytes: 72 of them take 144 bytes.
        format!("{}\n", "é".repeat(72)),
        // git's comment lines are not the message.
        format!(
            "# {}\nBound the line length\n\n# Please enter the commit message\n",
            "c".repeat(100)
        ),
        // Rewritten by `git rebase --autosquash` before it lands.
        format!("fixup! {}\n", "s".repeat(72)),
    ];
    for (i, message) in accepted.iter().enumerate() {
        let (code, err) = commit(dir, message, true);
        assert_eq!(code, Some(0), "{message:?}: rejected: {err}");
        assert_eq!(commits(dir), i + 1);
    }
    let before = commits(dir);
    for (message, want) in [
        (format!("{}\n", "s".repeat(73)), "73 characters"),
        (
            "Bound the line length\nand then more\n".to_string(),
            "line 2 is not blank",
        ),
        ("\n# only a comment\n".to_string(), "empty"),
    ] {
        let (code, err) = commit(dir, &message, true);
        assert_ne!(code, Some(0), "{message:?}: accepted");
        assert!(err.contains(want), "{message:?}: {err}");
        assert_eq!(commits(dir), before, "{message:?}: committed all the same");
    }
}

#[test]
fn check_commits_flags_the_commits_after_the_base_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    assert!(git(&dir, &["init", "-q"]).status.success());
    let head = |dir: &Path| {
        stdout(&git(dir, &["rev-parse", "--short", "HEAD"]))
            .trim()
            .to_string()
    };
    let old_style = format!("{}\n", "h".repeat(120));
    commit(&dir, &old_style, false);
    commit(&dir, "Mark the base\n", false);
    let base = head(&dir);
    let check = |dir: &Path, base: &str| {
        let o = Command::new(repo_root().join("scripts/check-commits.sh"))
            .arg(base)
            .env("CHECK_COMMITS_REPO", dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("run check-commits.sh");
        (o.status.code(), stdout(&o), stderr(&o))
    };
    // Nothing after the base: the old-style subject before it is history.
    let (code, out, err) = check(&dir, &base);
    assert_eq!(code, Some(0), "{out}{err}");
    commit(&dir, "Add a check\n\nWith a body.\n", false);
    assert_eq!(check(&dir, &base).0, Some(0));
    commit(&dir, &format!("{}\n", "l".repeat(80)), false);
    let long = head(&dir);
    commit(&dir, "No blank line\nbefore the body\n", false);
    let glued = head(&dir);
    commit(&dir, "fixup! Add a check\n", false);
    let fixup = head(&dir);
    let (code, out, err) = check(&dir, &base);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.contains(&long) && out.contains("80 characters"),
        "{out}"
    );
    assert!(out.contains(&glued) && out.contains("line 2"), "{out}");
    assert!(out.contains(&fixup) && out.contains("squash"), "{out}");
    assert!(
        !out.contains(&"h".repeat(40)),
        "checked before the base: {out}"
    );
    // A clone without the base (CI's shallow clones) skips, saying so.
    let shallow = tmp.path().join("shallow");
    let url = format!("file://{}", dir.display());
    let o = git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            &url,
            shallow.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (code, out, err) = check(&shallow, &base);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        err.contains("not in this clone") && err.contains("skipped"),
        "{err}"
    );
}
