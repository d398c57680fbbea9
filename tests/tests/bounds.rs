//! Hostile files against the reviewer's machine: special files that would
//! hang a read, links that would read another submitter's results (or
//! /dev/zero), small files that would expand without bound, and results
//! trees that hide directories. Each case ran against referee before the
//! files of a package were opened through `referee_rules::untrusted` and
//! broke it (hung, ran out of memory, or passed in silence); each command
//! here must now answer promptly, with a finding naming the file.
//!
//! Every command runs under a deadline: a regression fails the test
//! instead of hanging it.

use referee_tests::{copy_tree, corpus_dir, mlperf_logging, referee_bin, repo_root, stdout};
use serde_json::Value;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const SYSTEM: &str = "MI300X_EPYC_9575F_pytorch";
const BENCH: &str = "results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora";

/// `referee ARGS`, killed and failed when it has not finished within `secs`.
fn referee_within(secs: u64, args: &[&str]) -> Output {
    let pkg = mlperf_logging();
    let child = Command::new(referee_bin())
        .args(args)
        .current_dir(repo_root())
        .env("REFEREE_MLPERF_LOGGING", &pkg.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run referee");
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(o) => o.expect("wait for referee"),
        Err(_) => {
            // SAFETY: a plain kill of the child this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("referee {} did not finish within {secs} s", args.join(" "));
        }
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "mkfifo {}",
        p.display()
    );
}

/// A copy of AMD's v5.0 package (one system kept) at `root/name`.
fn org(root: &Path, name: &str) -> PathBuf {
    let src = corpus_dir().join("training_results_v5.0/AMD");
    let org = root.join(name);
    copy_tree(&src.join("systems"), &org.join("systems"));
    copy_tree(&src.join(BENCH), &org.join(BENCH));
    let other = org.join("systems/MI325X_EPYC_9575F_pytorch.json");
    let _ = std::fs::remove_file(other);
    org
}

fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn package_check(org: &Path) -> (Option<i32>, Value) {
    let o = referee_within(
        120,
        &[
            "package-check",
            "--ruleset",
            "5.0.0",
            "--json",
            org.to_str().unwrap(),
        ],
    );
    let v = json_lines(&o).into_iter().next().unwrap_or_else(|| {
        panic!(
            "no JSON from package-check: {}{}",
            stdout(&o),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), v)
}

/// The diagnostics of a package-check report with this code.
fn with_code<'a>(v: &'a Value, code: &str) -> Vec<&'a Value> {
    v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == code)
        .collect()
}

#[test]
fn a_fifo_or_a_link_to_one_as_a_result_log_is_named_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org(tmp.path(), "AMD");
    let bench = org.join(BENCH);
    let fifo = tmp.path().join("fifo");
    mkfifo(&fifo);
    std::fs::remove_file(bench.join("result_0.txt")).unwrap();
    mkfifo(&bench.join("result_0.txt"));
    std::fs::remove_file(bench.join("result_1.txt")).unwrap();
    symlink(&fifo, bench.join("result_1.txt")).unwrap();

    // check of the folder, and of the FIFO typed on the command line.
    let o = referee_within(
        60,
        &[
            "check",
            "--ruleset",
            "5.0.0",
            "--json",
            bench.to_str().unwrap(),
        ],
    );
    let out = stdout(&o);
    assert!(out.contains("is a FIFO, not a regular file"), "{out}");
    assert!(
        out.contains("is a symbolic link; links inside a package are not followed"),
        "{out}"
    );
    assert_eq!(o.status.code(), Some(2), "{out}");
    let o = referee_within(60, &["check", "--ruleset", "5.0.0", fifo.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("is a FIFO, not a regular file"),
        "{}",
        stdout(&o)
    );

    // package-check: two runs that cannot be read fail the set.
    let (code, v) = package_check(&org);
    assert_eq!(code, Some(1), "{v:#}");
    let unread: Vec<String> = with_code(&v, "noncompliant-log")
        .iter()
        .map(|d| d["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        unread.iter().any(|m| m.contains("is a FIFO"))
            && unread.iter().any(|m| m.contains("symbolic link")),
        "{unread:?}"
    );

    // summarize: the runs are not counted, and say why.
    let o = referee_within(
        60,
        &[
            "summarize",
            "--ruleset",
            "5.0.0",
            "--json",
            org.to_str().unwrap(),
        ],
    );
    let text = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("is a FIFO, not a regular file"), "{text}");
}

#[test]
fn a_link_to_dev_zero_as_a_result_log_is_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    symlink("/dev/zero", dir.join("result_0.txt")).unwrap();
    let o = referee_within(30, &["check", "--ruleset", "5.0.0", dir.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("error: cannot read: is a symbolic link"),
        "{}",
        stdout(&o)
    );
    // Typed on the command line, the link is followed, and its target is
    // not a regular file.
    let typed = dir.join("result_0.txt");
    let o = referee_within(
        30,
        &["check", "--ruleset", "5.0.0", typed.to_str().unwrap()],
    );
    assert!(
        stdout(&o).contains("is a character device, not a regular file"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_sparse_2_gb_log_is_one_bounded_error() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("result_0.txt");
    std::fs::File::create(&log)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let o = referee_within(
        30,
        &[
            "check",
            "--ruleset",
            "5.0.0",
            "--json",
            log.to_str().unwrap(),
        ],
    );
    let out = stdout(&o);
    assert!(
        out.contains("2147483648 bytes, more than the 1073741824 bytes allowed for a log"),
        "{out}"
    );
    assert!(out.len() < 2000, "{out}");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_log_of_200000_junk_lines_keeps_a_hundred_findings_and_counts_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("result_0.txt");
    let junk = ":::MLLOG {\"time_ms\": 1, this is not JSON and never will be, padding padding}\n";
    std::fs::write(&log, junk.repeat(200_000)).unwrap();
    let o = referee_within(
        60,
        &[
            "check",
            "--ruleset",
            "5.0.0",
            "--json",
            log.to_str().unwrap(),
        ],
    );
    let rep = &json_lines(&o)[0];
    let parse: Vec<&Value> = rep["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "parse-error")
        .collect();
    assert_eq!(parse.len(), 101, "{rep:#}");
    assert_eq!(
        parse[100]["message"],
        "and 199900 more unreadable MLLOG lines (only the first 100 are listed)"
    );
    assert_eq!(parse[100]["found"], "200000 unreadable lines in all");
    assert_eq!(rep["verdict"], "FAIL");
    assert!(stdout(&o).len() < 200_000, "{}", stdout(&o).len());
}

/// A NeMo log in a folder of its own.
fn perf_dir(root: &Path) -> PathBuf {
    let dir = root.join("perf");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo_root()
            .join("tests/fixtures/perf/nemo/log-pretrain_llama3_8b_fp8_gpus8_tp1_pp1_cp2_vp1_mbs1_gbs128_4242.out"),
        dir.join("run.out"),
    )
    .unwrap();
    dir
}

#[test]
fn a_yaml_alias_bomb_beside_the_logs_is_a_typed_error_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = perf_dir(tmp.path());
    let mut bomb = String::from(
        "gpus: 8\nx: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        bomb.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 9].join(",")
        ));
    }
    assert!(bomb.len() < 500);
    std::fs::write(dir.join("referee-perf.yaml"), &bomb).unwrap();
    let t = std::time::Instant::now();
    let o = referee_within(30, &["perf", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("expands to more than 1000000 nodes"),
        "{err}{}",
        stdout(&o)
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_fifo_as_model_config_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = perf_dir(tmp.path());
    mkfifo(&dir.join("config.json"));
    std::fs::write(dir.join("referee-perf.yaml"), "model_config: config.json\n").unwrap();
    let o = referee_within(30, &["perf", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is a FIFO, not a regular file"), "{err}");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn perf_does_not_follow_links_to_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = perf_dir(tmp.path());
    for i in 0..5 {
        symlink(".", dir.join(format!("again{i}"))).unwrap();
    }
    let o = referee_within(60, &["perf", "--json", dir.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["rows"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(v["summary"]["runs"], 1);
    assert_eq!(v["not_read"].as_array().unwrap().len(), 5, "{v:#}");
}

#[test]
fn results_that_are_links_into_another_submitters_folder_are_not_scored() {
    let tmp = tempfile::tempdir().unwrap();
    let amd = org(tmp.path(), "AMD");
    // Every log a link into AMD's folder.
    let evil = tmp.path().join("Evil");
    copy_tree(&amd.join("systems"), &evil.join("systems"));
    let bench = evil.join(BENCH);
    std::fs::create_dir_all(&bench).unwrap();
    for i in 0..10 {
        let name = format!("result_{i}.txt");
        symlink(amd.join(BENCH).join(&name), bench.join(&name)).unwrap();
    }
    let (code, v) = package_check(&evil);
    assert_eq!(
        (code, v["verdict"].as_str()),
        (Some(1), Some("FAIL")),
        "{v:#}"
    );
    let unread = with_code(&v, "noncompliant-log");
    assert_eq!(unread.len(), 10, "{v:#}");
    assert!(
        unread[0]["message"]
            .as_str()
            .unwrap()
            .contains("is a symbolic link"),
        "{v:#}"
    );

    // The benchmark folder a link into AMD's.
    let evil2 = tmp.path().join("Evil2");
    copy_tree(&amd.join("systems"), &evil2.join("systems"));
    std::fs::create_dir_all(evil2.join("results").join(SYSTEM)).unwrap();
    symlink(amd.join(BENCH), evil2.join(BENCH)).unwrap();
    let (code, v) = package_check(&evil2);
    assert_eq!(
        (code, v["verdict"].as_str()),
        (Some(1), Some("FAIL")),
        "{v:#}"
    );
    let links = with_code(&v, "link");
    assert_eq!(links.len(), 1, "{v:#}");
    assert_eq!(links[0]["file"], evil2.join(BENCH).display().to_string());
    assert!(v["benchmarks"].as_array().unwrap().is_empty(), "{v:#}");
    let o = referee_within(
        60,
        &[
            "summarize",
            "--ruleset",
            "5.0.0",
            "--json",
            evil2.to_str().unwrap(),
        ],
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symbolic link in the results tree"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A log copied from AMD's folder names AMD.
    let evil3 = tmp.path().join("Evil3");
    copy_tree(&amd, &evil3);
    let (code, v) = package_check(&evil3);
    assert_eq!(
        (code, v["verdict"].as_str()),
        (Some(0), Some("PASS")),
        "{v:#}"
    );
    let orgs: Vec<&Value> = v["policy"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "policy[submission-org]")
        .collect();
    assert_eq!(orgs.len(), 1, "{v:#}");
    assert!(
        orgs[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("10 of 10 runs name another submitter than the folder `Evil3`"),
        "{v:#}"
    );
}

#[test]
fn a_directory_nested_past_the_walks_depth_is_a_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org(tmp.path(), "AMD");
    let mut deep = org.join("benchmarks/llama2_70b_lora/implementations/x");
    for _ in 0..80 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("bad name.txt"), "x").unwrap();
    let (code, v) = package_check(&org);
    assert_eq!(code, Some(1), "{v:#}");
    let repo = with_code(&v, "repo");
    assert_eq!(repo.len(), 1, "{v:#}");
    assert!(
        repo[0]["message"]
            .as_str()
            .unwrap()
            .contains("nested more than 64 directories deep"),
        "{v:#}"
    );
}

#[test]
fn a_directory_with_a_look_alike_letter_is_named_with_the_letter_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org(tmp.path(), "AMD");
    // "results" with a Cyrillic е (U+0435), holding a copy of the results.
    copy_tree(&org.join("results"), &org.join("r\u{435}sults"));
    // and a benchmark folder "llama2_70b_lor\u{430}" (Cyrillic а).
    copy_tree(
        &org.join(BENCH),
        &org.join("results")
            .join(SYSTEM)
            .join("llama2_70b_lor\u{430}"),
    );
    let (code, v) = package_check(&org);
    assert_eq!(
        (code, v["verdict"].as_str()),
        (Some(0), Some("PASS")),
        "{v:#}"
    );
    let unexpected = with_code(&v, "unexpected-dir");
    assert_eq!(unexpected.len(), 1, "{v:#}");
    assert!(
        unexpected[0]["message"]
            .as_str()
            .unwrap()
            .contains("directory `r\\u{435}sults` is no part of the results layout"),
        "{v:#}"
    );
    assert_eq!(unexpected[0]["severity"], "warning");
    let skipped = with_code(&v, "layout");
    assert!(
        skipped.iter().any(|d| d["message"]
            .as_str()
            .unwrap()
            .contains("`llama2_70b_lor\\u{430}` is not a benchmark of ruleset 5.0.0")),
        "{v:#}"
    );
}

#[test]
fn a_manifest_linked_to_dev_zero_and_a_fifo_signature_are_unreadable_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pkg");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    symlink("/dev/zero", dir.join("MANIFEST")).unwrap();
    mkfifo(&dir.join("MANIFEST.sig"));
    let o = referee_within(30, &["verify", "--json", dir.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["ok"], false);
    let unreadable: Vec<(String, String)> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "unreadable")
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_string(),
                p["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(unreadable.len(), 2, "{v:#}");
    assert!(unreadable[0].1.contains("symbolic link"), "{unreadable:?}");
    assert!(unreadable[1].1.contains("is a FIFO"), "{unreadable:?}");
}
