//! The documentation holds: every link in README.md and docs/*.md resolves
//! (relative files and `#anchors` to headings), every `referee …` line of
//! README's tour is a subcommand and flag set the binary accepts, and
//! README's command list names exactly the binary's subcommands. Cheap: the
//! binary is only asked for `--help`.

use referee_tests::{referee_bin, repo_root, stderr, stdout};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let mut out = String::new();
    let mut inside = false;
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with("## ") {
            inside = line[3..].starts_with(title);
            continue;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.is_empty(), "README.md has no section `## {title}…`");
    out
}

/// The `referee …` command lines in the `sh` code blocks of a Markdown
/// text (`\` continuations joined), split into words as a shell would
/// (quotes; no expansion).
fn referee_lines(section: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in section.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && (t == "```sh" || t == "```bash");
            continue;
        }
        if !in_sh {
            continue;
        }
        pending.push_str(t.trim_end_matches('\\'));
        pending.push(' ');
        if t.ends_with('\\') {
            continue;
        }
        let command = std::mem::take(&mut pending);
        let command = command.split(" #").next().unwrap().trim().to_string();
        if let Some(rest) = command.strip_prefix("referee ") {
            out.push(shell_words(rest));
        }
    }
    out
}

fn shell_words(s: &str) -> Vec<String> {
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
        Ok(())
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

#[test]
fn every_command_of_the_readme_tour_is_accepted() {
    let lines = referee_lines(&readme_section("Tour"));
    let subcommands: BTreeSet<&str> = lines.iter().map(|l| l[0].as_str()).collect();
    for sub in [
        "run", "check", "package", "keygen", "sign", "verify", "audit", "perf", "compare",
    ] {
        assert!(
            subcommands.contains(sub),
            "README's tour shows no `referee {sub}` (it shows {subcommands:?})"
        );
    }
    let failures: Vec<String> = lines.iter().filter_map(|l| accepted(l).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The check itself rejects what clap rejects.
    let bad = |s: &str| shell_words(s);
    assert!(accepted(&bad("run mini_llm --no-such-flag")).is_err());
    assert!(accepted(&bad("run mini_llm --division nowhere")).is_err());
    assert!(accepted(&bad("no-such-command")).is_err());
    assert!(
        accepted(&bad(
            "run --exec --benchmark b --ruleset 5.0.0 -- prog --help"
        ))
        .is_ok()
    );
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
