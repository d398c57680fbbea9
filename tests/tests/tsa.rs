//! `referee run --exec --tsa URL`: a clock anchored outside the submitter.
//! A local RFC 3161 authority on loopback (tests/fixtures/tsa/tsa_server.py,
//! answering with `openssl ts -reply`; its CA and TSA certificates are made
//! here with `openssl req`/`x509`) time-stamps each run of the fake
//! training program (tests/fixtures/exec/fake_lora.py); `check`, `verify`
//! and `audit` with `--tsa-ca` verify the tokens. The attack that beats the
//! witness (a shortened `time_ms`, the witness edited to match, re-signed)
//! is caught by them, and so is the same attack with a fresh end token
//! over the edited files (the logged run is too short for the interval);
//! times and an authority forged in a reply's unsigned status text are not
//! read; a token from another CA is rejected; an authority that cannot be
//! reached stops the session before it starts.

use referee_tests::{
    fake_exec_args, lock_file, referee, referee_bin, referee_in, repo_root, shared_fixture, sign,
    stderr, stdout,
};
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// In `dir`: a root CA (`ca.pem`), a TSA certificate it signed
/// (extendedKeyUsage critical timeStamping) and openssl's TSA
/// configuration (`tsa.cnf`); returns the CA file.
fn make_authority(dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let ca_subject = format!("/CN={name} Root CA");
    let tsa_subject = format!("/CN={name}");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            &ca_subject,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "tsa.key",
            "-out",
            "tsa.csr",
            "-subj",
            &tsa_subject,
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=critical,timeStamping\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "tsa.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "tsa.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    std::fs::write(dir.join("tsaserial"), "01\n").unwrap();
    std::fs::write(
        dir.join("tsa.cnf"),
        format!(
            "[ tsa ]\ndefault_tsa = tsa_config1\n[ tsa_config1 ]\ndir = {}\nserial = $dir/tsaserial\n\
             signer_cert = $dir/tsa.pem\nsigner_key = $dir/tsa.key\nsigner_digest = sha256\n\
             default_policy = 1.2.3.4.1\ndigests = sha256\naccuracy = secs:1\nclock_precision_digits = 3\n\
             ordering = yes\ntsa_name = yes\ness_cert_id_alg = sha256\n",
            dir.display()
        ),
    )
    .unwrap();
    dir.join("ca.pem")
}

/// A time-stamping authority listening on loopback; stopped on drop.
struct Authority {
    child: Child,
    url: String,
    ca: PathBuf,
}

impl Drop for Authority {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_authority(dir: &Path, name: &str) -> Authority {
    let ca = make_authority(dir, name);
    let mut child = Command::new("python3")
        .arg(repo_root().join("tests/fixtures/tsa/tsa_server.py"))
        .arg(dir.join("tsa.cnf"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut port = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    assert!(!port.trim().is_empty(), "the TSA did not start");
    Authority {
        child,
        url: format!("http://127.0.0.1:{}/", port.trim()),
        ca,
    }
}

/// `referee run --exec --json` of fake_lora.py (llama2_70b_lora) in `cwd`.
fn exec(cwd: &Path, out: &Path, runs: usize, extra: &[&str]) -> (i32, Value, String) {
    let args = fake_exec_args(out, runs, extra, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    referee_bin();
    let o = referee_in(&args, cwd);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let summary = serde_json::from_str(&stdout(&o)).unwrap_or(Value::Null);
    (o.status.code().unwrap(), summary, stderr(&o))
}

/// Ten anchored runs (the count llama2_70b_lora needs), packaged; the
/// authority is stopped once they are made (its key and configuration stay
/// in `tsa`, for the submitter who asks it again). → (root, runs, package
/// ORG, CA).
struct Anchored {
    /// The shared fixture's directory (read-only).
    root: PathBuf,
    /// A fresh directory of this test process for what a test writes.
    scratch: PathBuf,
    out: PathBuf,
    org: PathBuf,
    ca: PathBuf,
    tsa: PathBuf,
    summary: Value,
}

fn anchored() -> &'static Anchored {
    static RUNS: OnceLock<Anchored> = OnceLock::new();
    RUNS.get_or_init(|| {
        let recipe = format!(
            "{:?}",
            fake_exec_args(Path::new("OUT"), 10, &["--tsa"], &[])
        );
        let (root, summary) = shared_fixture("tsa-anchored-runs", &recipe, |root| {
            let tsa = start_authority(&root.join("tsa"), "Test TSA");
            let cwd = root.join("work");
            std::fs::create_dir_all(&cwd).unwrap();
            let out = root.join("runs");
            let (code, summary, err) = exec(&cwd, &out, 10, &["--tsa", &tsa.url]);
            assert_eq!(code, 0, "{summary:#}\n{err}");
            let pk = root.join("pkg");
            let p = referee(&[
                "package",
                out.to_str().unwrap(),
                "--out",
                pk.to_str().unwrap(),
            ]);
            assert_eq!(p.status.code(), Some(0), "{}{}", stdout(&p), stderr(&p));
            summary
        });
        Anchored {
            org: root.join("pkg/referee"),
            ca: root.join("tsa/ca.pem"),
            tsa: root.join("tsa"),
            out: root.join("runs"),
            scratch: tempfile::tempdir().unwrap().keep(),
            root,
            summary,
        }
    })
}

/// A signed copy of the package, after `damage`.
fn signed_copy(name: &str, damage: impl Fn(&Path)) -> PathBuf {
    let a = anchored();
    let dst = a.scratch.join(name);
    referee_tests::copy_tree(&a.org, &dst);
    damage(&dst);
    let key = a.scratch.join(format!("{name}.key"));
    let k = referee(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(k.status.success(), "{}", stderr(&k));
    sign(&dst, &key);
    dst
}

#[test]
fn anchored_runs_derive_their_seeds_package_their_tokens_and_verify() {
    let a = anchored();
    let runs = a.summary["runs"].as_array().unwrap();
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["tsa"]["seed"], "derived", "{r:#}");
        for phase in ["start", "end"] {
            assert!(a.out.join(format!("run_{i}.{phase}.tsr")).is_file());
        }
    }
    // The record's seeds are the derived ones.
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(a.out.join("referee_run.json")).unwrap())
            .unwrap();
    let seeds: Vec<u64> = runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(record["seeds"], serde_json::json!(seeds));
    // check --tsa-ca on the run directory: every log anchored.
    let ca = a.ca.to_str().unwrap();
    let c = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--tsa-ca",
        ca,
        a.out.to_str().unwrap(),
    ]);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    let notes = stdout(&c).matches("note[tsa-anchored]").count();
    assert_eq!(notes, 10, "{}", stdout(&c));
    assert!(
        stdout(&c).contains("anchored by /CN=Test TSA between"),
        "{}",
        stdout(&c)
    );
    assert!(stdout(&c).contains("init + run took at most"));
    // The package carries the tokens beside its record, signed with it.
    let imp = a
        .org
        .join("benchmarks/llama2_70b_lora/implementations/work");
    assert!(imp.join("referee_run_0.run_9.end.tsr").is_file());
    let org = signed_copy("intact", |_| {});
    let manifest = std::fs::read_to_string(org.join("MANIFEST")).unwrap();
    assert!(
        manifest.contains("referee_run_0.run_0.start.tsr"),
        "{manifest}"
    );
    let v = referee(&["verify", org.to_str().unwrap(), "--tsa-ca", ca]);
    assert_eq!(v.status.code(), Some(0), "{}{}", stdout(&v), stderr(&v));
    assert_eq!(
        stdout(&v).matches("anchored by /CN=Test TSA").count(),
        10,
        "{}",
        stdout(&v)
    );
    assert!(stdout(&v).contains("time-stamps: VERIFIED (10 anchored runs, 0 not anchored"));
    let j = referee(&["verify", org.to_str().unwrap(), "--tsa-ca", ca, "--json"]);
    let j: Value = serde_json::from_str(&stdout(&j)).unwrap();
    assert_eq!(j["time_stamps"]["ok"], true, "{j:#}");
    let first = &j["time_stamps"]["anchored"][0]["authorities"][0];
    assert!(
        first["at_most_seconds"].as_f64().unwrap() > 0.0,
        "{first:#}"
    );
    // audit --tsa-ca: the time-stamps step passes.
    let o = referee(&[
        "audit",
        org.to_str().unwrap(),
        "--json",
        "--tsa-ca",
        ca,
        "--out",
        a.scratch.join("audit-intact").to_str().unwrap(),
    ]);
    let r: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    let step = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "time-stamps")
        .unwrap();
    assert_eq!(step["status"], "passed", "{r:#}");
}

/// The `"time_ms": N` of an MLLOG line, as written.
fn time_ms_text(line: &str) -> &str {
    let at = line.find("\"time_ms\": ").unwrap() + "\"time_ms\": ".len();
    let rest = &line[at..];
    &rest[..rest.find(',').unwrap()]
}

/// Shorten result_0.txt's run_stop by half the run, edit the witness (and
/// the log's digest in the record) to match: what the witness cannot catch.
fn shorten_run(org: &Path) {
    let log = org.join("results/cpu_box/llama2_70b_lora/result_0.txt");
    let text = std::fs::read_to_string(&log).unwrap();
    let old_sha = sha256_hex(text.as_bytes());
    let find = |key: &str| {
        text.lines()
            .find(|l| l.contains(&format!("\"key\": \"{key}\"")))
            .unwrap()
            .to_string()
    };
    let (start, stop) = (find("run_start"), find("run_stop"));
    let t0: f64 = time_ms_text(&start).parse().unwrap();
    let t1: f64 = time_ms_text(&stop).parse().unwrap();
    let cut = ((t1 - t0) / 2.0).floor();
    assert!(cut >= 1.0, "run of {} ms", t1 - t0);
    let new_stop = stop.replacen(
        &format!("\"time_ms\": {}", time_ms_text(&stop)),
        &format!("\"time_ms\": {}", t1 - cut),
        1,
    );
    let edited = text.replacen(&stop, &new_stop, 1);
    std::fs::write(&log, &edited).unwrap();
    let rec = org.join("benchmarks/llama2_70b_lora/implementations/work/referee_run_0.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    let run = v["runs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["log_sha256"] == old_sha.as_str())
        .unwrap();
    run["log_sha256"] = sha256_hex(edited.as_bytes()).into();
    for l in run["witness"]["lines"].as_array_mut().unwrap() {
        if l["key"] == "run_stop" {
            l["time_ms"] = (l["time_ms"].as_f64().unwrap() - cut).into();
            for k in ["read_wall_ms", "read_mono_ms"] {
                l[k] = (l[k].as_u64().unwrap() - cut as u64).into();
            }
        }
    }
    std::fs::write(&rec, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// sha256 of bytes, by coreutils' `sha256sum`.
fn sha256_hex(b: &[u8]) -> String {
    use std::io::Write;
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    c.stdin.take().unwrap().write_all(b).unwrap();
    let o = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout)[..64].to_string()
}

#[test]
fn the_attack_that_beats_the_witness_is_caught_by_the_tokens() {
    let a = anchored();
    let org = signed_copy("shortened", shorten_run);
    let log = org.join("results/cpu_box/llama2_70b_lora/result_0.txt");
    // Without the tokens, the edit passes: signature, witness, rules.
    let c = referee(&["check", "--ruleset", "5.0.0", log.to_str().unwrap()]);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert!(
        stdout(&c).contains("note[witness-verified]"),
        "{}",
        stdout(&c)
    );
    let v = referee(&["verify", org.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
    // With them: the end token's imprint no longer matches, both times named.
    let ca = a.ca.to_str().unwrap();
    let c = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--tsa-ca",
        ca,
        log.to_str().unwrap(),
    ]);
    assert_eq!(c.status.code(), Some(1), "{}", stdout(&c));
    let out = stdout(&c);
    assert!(
        out.contains("error[tsa-token]") && out.contains("message imprint mismatch"),
        "{out}"
    );
    assert!(
        out.contains("changed after the end token: they were time-stamped between 20"),
        "{out}"
    );
    let v = referee(&["verify", org.to_str().unwrap(), "--tsa-ca", ca]);
    assert_eq!(v.status.code(), Some(1), "{}", stdout(&v));
    assert!(
        stdout(&v).contains("FAILED time-stamps of"),
        "{}",
        stdout(&v)
    );
    assert!(
        stdout(&v).contains("time-stamps: FAILED (9 anchored runs"),
        "{}",
        stdout(&v)
    );
    let o = referee(&[
        "audit",
        org.to_str().unwrap(),
        "--json",
        "--tsa-ca",
        ca,
        "--out",
        a.scratch.join("audit-shortened").to_str().unwrap(),
    ]);
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let step = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "time-stamps")
        .unwrap();
    assert_eq!(step["status"], "failed", "{r:#}");
    assert!(
        step["detail"]
            .as_str()
            .unwrap()
            .contains("imprint mismatch"),
        "{step}"
    );
    assert_eq!(r["verdict"], "FAIL");
}

#[test]
fn a_token_from_another_ca_is_rejected_and_a_package_without_tokens_is_not_anchored() {
    let a = anchored();
    let other = make_authority(&a.scratch.join("other-ca"), "Other TSA");
    let org = signed_copy("other-ca-check", |_| {});
    let v = referee(&[
        "verify",
        org.to_str().unwrap(),
        "--tsa-ca",
        other.to_str().unwrap(),
    ]);
    assert_eq!(v.status.code(), Some(1), "{}", stdout(&v));
    assert!(
        stdout(&v).contains("does not verify against CA"),
        "{}",
        stdout(&v)
    );
    assert!(!stdout(&v).contains("anchored by"), "{}", stdout(&v));
    // Tokens removed (and the run entries' time-stamps with them), re-signed.
    let bare = signed_copy("stripped", |org| {
        let imp = org.join("benchmarks/llama2_70b_lora/implementations/work");
        for f in std::fs::read_dir(&imp).unwrap().flatten() {
            if f.file_name().to_string_lossy().ends_with(".tsr") {
                std::fs::remove_file(f.path()).unwrap();
            }
        }
        let rec = imp.join("referee_run_0.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
        for r in v["runs"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("tsa");
        }
        std::fs::write(&rec, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    });
    let ca = a.ca.to_str().unwrap();
    let v = referee(&["verify", bare.to_str().unwrap(), "--tsa-ca", ca]);
    assert_eq!(v.status.code(), Some(1), "{}", stdout(&v));
    assert_eq!(
        stdout(&v).matches("not anchored: ").count(),
        10,
        "{}",
        stdout(&v)
    );
    let o = referee(&[
        "audit",
        bare.to_str().unwrap(),
        "--json",
        "--tsa-ca",
        ca,
        "--out",
        a.scratch.join("audit-stripped").to_str().unwrap(),
    ]);
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let step = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "time-stamps")
        .unwrap();
    assert_eq!(step["status"], "not_done", "{r:#}");
    assert_ne!(r["verdict"], "PASS");
}

#[test]
fn an_unreachable_authority_stops_the_session_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    // A loopback port that was just closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tmp.path().join("runs");
    let url = format!("http://127.0.0.1:{port}/");
    let (code, _, err) = exec(tmp.path(), &out, 1, &["--tsa", &url]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("time-stamping authority {url} cannot be reached")),
        "{err}"
    );
    assert!(
        !out.exists(),
        "nothing is written before the authority answers"
    );
}

#[test]
fn with_a_chosen_seed_the_record_says_the_start_is_not_proved() {
    let tmp = tempfile::tempdir().unwrap();
    let tsa = start_authority(&tmp.path().join("tsa"), "Test TSA");
    let out = tmp.path().join("runs");
    let (code, summary, err) = exec(tmp.path(), &out, 1, &["--tsa", &tsa.url, "--seed", "11"]);
    assert_eq!(code, 0, "{summary:#}\n{err}");
    assert_eq!(summary["runs"][0]["tsa"]["seed"], "chosen");
    let c = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--tsa-ca",
        tsa.ca.to_str().unwrap(),
        out.join("result_0.txt").to_str().unwrap(),
    ]);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert!(
        stdout(&c).contains("seed chosen, not derived: the start is not proved"),
        "{}",
        stdout(&c)
    );
}

/// `referee run mini_llm --tsa URL --json` into `out`: referee's own
/// benchmark, two training steps (it ends before the target: exit 1).
fn run_mini_llm(out: &Path, extra: &[&str]) -> (i32, Value, String) {
    let data = referee_tests::data_dir(&["shakespeare"]);
    let mut args = vec![
        "run",
        "mini_llm",
        "--runs",
        "1",
        "-j",
        "1",
        "--no-cache-clear",
        "--json",
        "--quiet",
        "--set",
        "total_steps=2",
        "--set",
        "warmup_steps=1",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = referee(&args);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let summary = serde_json::from_str(&stdout(&o)).unwrap_or(Value::Null);
    (o.status.code().unwrap(), summary, stderr(&o))
}

#[test]
fn an_anchored_run_of_an_own_benchmark_verifies_and_a_shortened_time_ms_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let tsa = start_authority(&tmp.path().join("tsa"), "Test TSA");
    let out = tmp.path().join("runs");
    let (code, summary, err) = run_mini_llm(&out, &["--tsa", &tsa.url]);
    assert_eq!(code, 1, "two steps end before the target: {err}");
    for phase in ["start", "end"] {
        assert!(out.join(format!("run_0.{phase}.tsr")).is_file(), "{phase}");
    }
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("referee_run.json")).unwrap())
            .unwrap();
    let run = &record["runs"][0];
    assert_eq!(run["tsa"]["seed"], "derived", "{run:#}");
    // No witness: the end token covers the result file and `null`.
    assert_eq!(run["tsa"]["witness_sha256"], sha256_hex(b"null").as_str());
    let log = out.join("result_0.txt");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        run["tsa"]["result_sha256"],
        sha256_hex(text.as_bytes()).as_str()
    );
    // The seed the run used (and logged) is the derived one, on record.
    assert_eq!(record["seeds"], serde_json::json!([run["seed"]]));
    assert_eq!(summary["runs"][0]["seed"], run["seed"]);
    let logged = format!("\"key\": \"seed\", \"value\": {}", run["seed"]);
    assert!(text.contains(&logged), "{logged}");
    let ca = tsa.ca.to_str().unwrap();
    let c = referee(&["check", "--tsa-ca", ca, log.to_str().unwrap()]);
    let o = stdout(&c);
    assert!(
        o.contains("note[tsa-anchored]")
            && o.contains("anchored by /CN=Test TSA between")
            && o.contains("seed derived from the start token"),
        "{o}"
    );
    assert!(!o.contains("error[tsa-"), "{o}");
    // A shortened time_ms in the result log: the end token is over the
    // original bytes.
    let stop = text
        .lines()
        .find(|l| l.contains("\"key\": \"run_stop\""))
        .unwrap();
    let t1: u64 = time_ms_text(stop).parse().unwrap();
    let shortened = stop.replacen(
        &format!("\"time_ms\": {t1}"),
        &format!("\"time_ms\": {}", t1 - 1),
        1,
    );
    std::fs::write(&log, text.replacen(stop, &shortened, 1)).unwrap();
    let c = referee(&["check", "--tsa-ca", ca, log.to_str().unwrap()]);
    let o = stdout(&c);
    assert_eq!(c.status.code(), Some(1), "{o}");
    assert!(
        o.contains("error[tsa-token]") && o.contains("message imprint mismatch"),
        "{o}"
    );
    assert!(!o.contains("note[tsa-anchored]"), "{o}");
    assert!(o.contains("changed after the end token"), "{o}");
    // The record's digest edited to match: the token still says otherwise.
    let rec = out.join("referee_run.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    let edited = std::fs::read(&log).unwrap();
    v["runs"][0]["tsa"]["result_sha256"] = sha256_hex(&edited).into();
    std::fs::write(&rec, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let c = referee(&["check", "--tsa-ca", ca, log.to_str().unwrap()]);
    let o = stdout(&c);
    assert_eq!(c.status.code(), Some(1), "{o}");
    assert!(o.contains("message imprint mismatch"), "{o}");
}

#[test]
fn an_own_benchmark_with_an_unreachable_authority_stops_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tmp.path().join("runs");
    let url = format!("http://127.0.0.1:{port}/");
    let (code, _, err) = run_mini_llm(&out, &["--tsa", &url]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("time-stamping authority {url} cannot be reached")),
        "{err}"
    );
    assert!(
        !out.exists(),
        "nothing is written before the authority answers"
    );
}

/// `openssl ARGS` in `dir`; its stdout.
fn openssl_out(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A DER TLV: `tag`, its length, `value`.
fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = value.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(value);
    out
}

/// The first TLV of `der` → (its value, the bytes after it, the TLV).
fn take_tlv(der: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let (len, head) = match der[1] {
        n if n < 0x80 => (n as usize, 2),
        n => {
            let k = (n & 0x7f) as usize;
            let len = der[2..2 + k]
                .iter()
                .fold(0usize, |a, b| (a << 8) | *b as usize);
            (len, 2 + k)
        }
    };
    (
        &der[head..head + len],
        &der[head + len..],
        &der[..head + len],
    )
}

/// `reply` (a DER TimeStampResp) with `text` as its PKIStatusInfo's
/// statusString: the part of a reply no signature covers, which
/// `openssl ts -reply -text` prints before the token's fields.
fn with_status_text(reply: &[u8], text: &str) -> Vec<u8> {
    let (resp, _, _) = take_tlv(reply);
    let (status_info, token, _) = take_tlv(resp);
    let (_, _, status) = take_tlv(status_info);
    let free_text = tlv(0x30, &tlv(0x0c, text.as_bytes()));
    let status_info = tlv(0x30, &[status, &free_text[..]].concat());
    tlv(0x30, &[&status_info[..], token].concat())
}

/// openssl's time (`Dec  7 21:00:00.123 2026 GMT`) `shift_ms` from the
/// RFC 3339 time `t` the run record shows, through `date`.
fn openssl_time(t: &str, shift_ms: i64) -> String {
    let o = Command::new("date")
        .args(["-u", "-d", t, "+%s%3N"])
        .output()
        .unwrap();
    let ms: i64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let ms = ms + shift_ms;
    let o = Command::new("date")
        .args(["-u", "-d", &format!("@{}.{:03}", ms / 1000, ms % 1000)])
        .arg("+%b %e %H:%M:%S.%3N %Y GMT")
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Fake fields for a reply's status text, in `openssl ts -text`'s form.
fn fake_fields(time: &str) -> String {
    format!("ok\nTime stamp: {time}\nAccuracy: unspecified\nTSA: DirName:/CN=Forged TSA\n")
}

/// The package's run record (of llama2_70b_lora) and its entry for the
/// result file `log` (found by its digest).
fn record_of(org: &Path) -> PathBuf {
    org.join("benchmarks/llama2_70b_lora/implementations/work/referee_run_0.json")
}

/// A submitter re-anchors the end of the run whose result file is `log`
/// (already edited, `log_sha256` updated): the record's digests brought
/// up to date, a fresh end token over them from the authority (anyone can
/// ask it), `forge` applied to the reply, the record's request nonce set.
fn reanchor_end(org: &Path, log: &Path, forge: impl Fn(&[u8], &Value) -> Vec<u8>) {
    let a = anchored();
    let bytes = std::fs::read(log).unwrap();
    let sha = sha256_hex(&bytes);
    let rec = record_of(org);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    let run = v["runs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["log_sha256"] == sha.as_str())
        .expect("the run of the log");
    // The witness's bytes as referee makes them (its source is public).
    let witness: referee_harness::common::witness::Witness =
        serde_json::from_value(run["witness"].clone()).unwrap();
    let witness_sha = sha256_hex(&referee_harness::tsa::witness_bytes(Some(&witness)));
    let digest = sha256_hex(&[unhex(&sha), unhex(&witness_sha)].concat());
    let name = org.file_name().unwrap().to_str().unwrap();
    // One reply at a time, in any test process: the authority's serial
    // file is read and written.
    let _one = lock_file(&a.tsa.join("serial.lock"));
    let q = a.scratch.join(format!("{name}.tsq"));
    let r = a.scratch.join(format!("{name}.tsr"));
    let qs = q.to_str().unwrap();
    openssl(
        &a.tsa,
        &[
            "ts", "-query", "-digest", &digest, "-sha256", "-cert", "-out", qs,
        ],
    );
    let text = openssl_out(&a.tsa, &["ts", "-query", "-in", qs, "-text"]);
    let nonce = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Nonce:"))
        .unwrap()
        .trim()
        .to_string();
    openssl(
        &a.tsa,
        &[
            "ts",
            "-reply",
            "-config",
            "tsa.cnf",
            "-queryfile",
            qs,
            "-out",
            r.to_str().unwrap(),
        ],
    );
    let tsa = &mut run["tsa"];
    tsa["result_sha256"] = sha.clone().into();
    tsa["witness_sha256"] = witness_sha.into();
    let au = &mut tsa["authorities"][0];
    au["end"]["request_nonce"] = nonce.into();
    let name = format!("referee_run_0.{}", au["end"]["token"].as_str().unwrap());
    let forged = forge(&std::fs::read(&r).unwrap(), au);
    std::fs::write(rec.parent().unwrap().join(name), forged).unwrap();
    std::fs::write(&rec, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// Every `"time_ms": N` of `text` moved by `shift`.
fn shift_times(text: &str, shift: i64) -> String {
    text.lines()
        .map(|l| match l.find("\"time_ms\": ") {
            Some(at) => {
                let t = time_ms_text(l);
                let n: i64 = t.parse().unwrap();
                let from = at + "\"time_ms\": ".len();
                format!("{}{}{}\n", &l[..from], n + shift, &l[from + t.len()..])
            }
            None => format!("{l}\n"),
        })
        .collect()
}

const DAY_MS: i64 = 86_400_000;

/// Backdate result_0.txt by a day (log, witness), re-anchor its end and
/// forge both tokens' status text to show the times a day earlier and
/// another authority: what `openssl ts -reply -text` would report.
fn backdate_with_forged_text(org: &Path) {
    let log = org.join("results/cpu_box/llama2_70b_lora/result_0.txt");
    let text = std::fs::read_to_string(&log).unwrap();
    let old_sha = sha256_hex(text.as_bytes());
    let edited = shift_times(&text, -DAY_MS);
    std::fs::write(&log, &edited).unwrap();
    let rec = record_of(org);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    let run = v["runs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["log_sha256"] == old_sha.as_str())
        .unwrap();
    run["log_sha256"] = sha256_hex(edited.as_bytes()).into();
    let w = &mut run["witness"];
    for k in ["spawn_wall_ms", "exit_wall_ms"] {
        w[k] = (w[k].as_i64().unwrap() - DAY_MS).into();
    }
    for l in w["lines"].as_array_mut().unwrap() {
        l["time_ms"] = (l["time_ms"].as_f64().unwrap() - DAY_MS as f64).into();
        l["read_wall_ms"] = (l["read_wall_ms"].as_i64().unwrap() - DAY_MS).into();
    }
    // The start token stays (the seed is derived from it); its status
    // text is forged.
    let au = &run["tsa"]["authorities"][0];
    let start = rec.parent().unwrap().join(format!(
        "referee_run_0.{}",
        au["start"]["token"].as_str().unwrap()
    ));
    let fake = openssl_time(au["start"]["time"].as_str().unwrap(), -DAY_MS);
    let forged = with_status_text(&std::fs::read(&start).unwrap(), &fake_fields(&fake));
    std::fs::write(&start, forged).unwrap();
    let end_time = au["end"]["time"].as_str().unwrap().to_string();
    std::fs::write(&rec, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    reanchor_end(org, &log, |reply, _| {
        with_status_text(reply, &fake_fields(&openssl_time(&end_time, -DAY_MS)))
    });
}

/// The audit's time-stamps step of `org` → (its status, its detail, the verdict).
fn audit_tsa_step(org: &Path, name: &str) -> (String, String, String) {
    let a = anchored();
    let o = referee(&[
        "audit",
        org.to_str().unwrap(),
        "--json",
        "--tsa-ca",
        a.ca.to_str().unwrap(),
        "--out",
        a.scratch.join(name).to_str().unwrap(),
    ]);
    let r: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    let step = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "time-stamps")
        .unwrap()
        .clone();
    (
        step["status"].as_str().unwrap().to_string(),
        step["detail"].as_str().unwrap_or("").to_string(),
        r["verdict"].as_str().unwrap().to_string(),
    )
}

#[test]
fn times_forged_in_the_unsigned_status_text_are_not_read() {
    let a = anchored();
    let org = signed_copy("forged-text", backdate_with_forged_text);
    let log = org.join("results/cpu_box/llama2_70b_lora/result_0.txt");
    // `openssl ts -reply -text` shows the forged fields first.
    let start = record_of(&org)
        .parent()
        .unwrap()
        .join("referee_run_0.run_0.start.tsr");
    let text = openssl_out(
        &a.root,
        &["ts", "-reply", "-in", start.to_str().unwrap(), "-text"],
    );
    assert!(text.contains("TSA: DirName:/CN=Forged TSA"), "{text}");
    let ca = a.ca.to_str().unwrap();
    let c = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--tsa-ca",
        ca,
        log.to_str().unwrap(),
    ]);
    let out = stdout(&c);
    assert_eq!(c.status.code(), Some(1), "{out}");
    assert!(!out.contains("Forged TSA"), "{out}");
    assert!(out.contains("outside the anchored interval"), "{out}");
    let v = referee(&["verify", org.to_str().unwrap(), "--tsa-ca", ca]);
    let out = stdout(&v);
    assert_eq!(v.status.code(), Some(1), "{out}");
    assert!(!out.contains("Forged TSA"), "{out}");
    assert!(out.contains("time-stamps: FAILED"), "{out}");
    let (status, detail, verdict) = audit_tsa_step(&org, "audit-forged-text");
    assert_eq!(status, "failed", "{detail}");
    assert!(!detail.contains("Forged TSA"), "{detail}");
    assert_eq!(verdict, "FAIL");
}

#[test]
fn a_shortened_run_with_a_fresh_end_token_fails_naming_both_durations() {
    let a = anchored();
    // The fresh token must be asked for some seconds after the run's end:
    // as it always is, the package being made after the runs.
    let rec: Value =
        serde_json::from_str(&std::fs::read_to_string(a.out.join("referee_run.json")).unwrap())
            .unwrap();
    let exit = rec["runs"][0]["witness"]["exit_wall_ms"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    if now < exit + 8_000 {
        std::thread::sleep(std::time::Duration::from_millis(exit + 8_000 - now));
    }
    let org = signed_copy("stretched", |org| {
        shorten_run(org);
        let log = org.join("results/cpu_box/llama2_70b_lora/result_0.txt");
        reanchor_end(org, &log, |reply, _| reply.to_vec());
    });
    let log = org.join("results/cpu_box/llama2_70b_lora/result_0.txt");
    let ca = a.ca.to_str().unwrap();
    let c = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--tsa-ca",
        ca,
        log.to_str().unwrap(),
    ]);
    let out = stdout(&c);
    assert_eq!(c.status.code(), Some(1), "{out}");
    assert!(out.contains("error[tsa-token]"), "{out}");
    assert!(
        out.contains("init + run as logged took") && out.contains("the tokens are"),
        "{out}"
    );
    let v = referee(&["verify", org.to_str().unwrap(), "--tsa-ca", ca]);
    let out = stdout(&v);
    assert_eq!(v.status.code(), Some(1), "{out}");
    assert!(
        out.contains("time-stamps: FAILED (9 anchored runs"),
        "{out}"
    );
    let (status, detail, verdict) = audit_tsa_step(&org, "audit-stretched");
    assert_eq!(status, "failed", "{detail}");
    assert!(detail.contains("init + run as logged took"), "{detail}");
    assert_eq!(verdict, "FAIL");
}
