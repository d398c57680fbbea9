//! Audits an auditor can trust (issue 27): a stranger's package runs
//! nothing without consent, and under bubblewrap its program cannot write
//! outside its re-run directory, read the auditor's environment or reach a
//! port of the auditor's machine; a signature counts only when its key is
//! checked against a trusted signer; the code the package carries is what
//! re-runs; a dataset that differs is refused; a difference between the
//! published organisation/system and the logged one is a warning.
//!
//! The program is tests/fixtures/exec/fake_lora.py, copied into a git
//! checkout (so that `referee package` includes it as the tracked files of
//! the program's working directory).

use referee_tests::{
    copy_tree, fake_exec_args_with, keygen, open_tempdir, python, referee, referee_in, repo_root,
    rerun_python, shared_fixture, sign, stderr, stdout, vendor_mllog,
};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The shared package: ten faithful runs of the fake program (the count
/// llama2_70b_lora needs), made in a git checkout with one dataset,
/// packaged and signed.
struct Fixture {
    /// A fresh directory of this test process for what a test writes.
    root: PathBuf,
    /// The shared fixture's directory (read-only): `work/`, `runs/`, …
    shared: PathBuf,
    /// The dataset the runs recorded (`--data`).
    data: PathBuf,
    /// The signed package (ORG folder).
    org: PathBuf,
    /// The signer's fingerprint and allowed_signers file.
    fingerprint: String,
    allowed_signers: PathBuf,
    /// `referee package --json`.
    package: Value,
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {}", stderr(&ok));
}

/// `referee run --exec` of the fake program as the shared runs ran it:
/// from the working directory `python fake_lora.py`, ten runs, seed 11,
/// system cpu_box, the dataset `data`, the outputs in `out`.
fn run_args(out: &Path, data: &str, py: &str) -> Vec<String> {
    let extra = ["--seed", "11", "--system", "cpu_box", "--data", data];
    fake_exec_args_with(out, 10, &extra, &[], py, "fake_lora.py")
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let py = rerun_python().display().to_string();
        let recipe = format!("{:?}", run_args(Path::new("OUT"), "DATA", &py));
        // Reachable by the unprivileged user a root auditor's re-run runs
        // as; the program carries the logging library it imports, so that
        // any interpreter runs it.
        let (shared, made) = shared_fixture("audit_trust-signed-package", &recipe, |root| {
            make_package(root, &py)
        });
        Fixture {
            root: open_tempdir(),
            data: shared.join("dataset"),
            org: shared.join("pkg/referee"),
            fingerprint: made["fingerprint"].as_str().unwrap().to_string(),
            allowed_signers: shared.join("allowed_signers"),
            package: made["package"].clone(),
            shared,
        }
    })
}

/// Ten runs of the fake program from a git checkout, packaged and signed,
/// in `root`: the signer's fingerprint and `referee package --json`.
fn make_package(root: &Path, py: &str) -> Value {
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(
        repo_root().join("tests/fixtures/exec/fake_lora.py"),
        work.join("fake_lora.py"),
    )
    .unwrap();
    vendor_mllog(&work);
    git(&work, &["init", "-q"]);
    git(&work, &["add", "fake_lora.py", "mlperf_logging"]);
    git(&work, &["commit", "-q", "-m", "fake"]);
    let data = root.join("dataset");
    std::fs::create_dir_all(data.join("shard")).unwrap();
    std::fs::write(data.join("shard/a.bin"), b"tokens").unwrap();
    let out = root.join("runs");
    let args = run_args(&out, data.to_str().unwrap(), py);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = referee_in(&args, &work);
    let summary: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    assert_eq!(summary["passed"], true, "{summary:#}");
    assert_eq!(summary["warnings"], serde_json::json!([]), "{summary:#}");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("referee_run.json")).unwrap())
            .unwrap();
    assert_eq!(
        record["datasets"][0]["files"], 1,
        "{:#}",
        record["datasets"]
    );
    assert!(
        record["code_fingerprint"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let pk = root.join("pkg");
    let p = referee(&[
        "package",
        out.to_str().unwrap(),
        "--out",
        pk.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(p.status.code(), Some(0), "{}{}", stdout(&p), stderr(&p));
    let package: Value = serde_json::from_str(&stdout(&p)).unwrap();
    let org = pk.join("referee");
    let key = root.join("key");
    let (fingerprint, line) = keygen(&key);
    let allowed_signers = root.join("allowed_signers");
    std::fs::write(&allowed_signers, format!("{line}\n")).unwrap();
    sign(&org, &key);
    serde_json::json!({"fingerprint": fingerprint, "package": package})
}

fn imp(org: &Path) -> PathBuf {
    org.join("benchmarks/llama2_70b_lora/implementations/work")
}

/// `referee audit ORG --json --out OUT ARGS…` with extra environment:
/// (exit code, report).
fn audit(org: &Path, out: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let mut a = vec![
        "audit",
        org.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    a.extend_from_slice(args);
    let mut cmd = Command::new(referee_tests::referee_bin());
    cmd.args(&a).current_dir(repo_root()).env(
        "REFEREE_MLPERF_LOGGING",
        &referee_tests::mlperf_logging().dir,
    );
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    (o.status.code(), r)
}

fn step<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no step {name}: {r:#}"))
}

/// A copy of the package, `edit`ed, re-signed with a fresh key: (ORG,
/// the fresh key's fingerprint).
fn tampered(name: &str, edit: impl FnOnce(&Path)) -> (PathBuf, String) {
    let f = fixture();
    let dir = f.root.join(name);
    let org = dir.join("referee");
    copy_tree(&f.org, &org);
    edit(&org);
    let key = dir.join("fresh-key");
    let (fp, _) = keygen(&key);
    sign(&org, &key);
    (org, fp)
}

/// The package with run 0's recorded command replaced by `sh -c SCRIPT`.
fn with_command(name: &str, script: String) -> (PathBuf, String) {
    tampered(name, move |org| {
        let p = imp(org).join("referee_run_0.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["command"] = serde_json::json!(["sh", "-c", script]);
        std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    })
}

#[test]
fn a_signature_counts_only_against_a_trusted_signer() {
    let f = fixture();
    let out = f.root.join("audit-untrusted");
    let (code, r) = audit(&f.org, &out, &[], &[]);
    let sig = step(&r, "signature");
    assert_eq!(sig["status"], "not_done", "{r:#}");
    assert!(
        sig["detail"]
            .as_str()
            .unwrap()
            .contains("not checked against a trusted signer"),
        "{sig}"
    );
    assert_eq!(r["verdict"], "INCOMPLETE");
    assert_ne!(code, Some(0));

    let allowed = f.allowed_signers.to_str().unwrap();
    let (code, r) = audit(
        &f.org,
        &f.root.join("audit-allowed"),
        &["--allowed-signers", allowed],
        &[],
    );
    assert_eq!(step(&r, "signature")["status"], "passed", "{r:#}");
    assert_eq!(
        (code, r["verdict"].as_str()),
        (Some(0), Some("PASS")),
        "{r:#}"
    );

    let (code, r) = audit(
        &f.org,
        &f.root.join("audit-pinned"),
        &["--signer", &f.fingerprint],
        &[],
    );
    assert_eq!(
        (code, r["verdict"].as_str()),
        (Some(0), Some("PASS")),
        "{r:#}"
    );

    // The same package re-signed by another key: refused by both.
    let (org, _) = tampered("resigned", |_| {});
    let (_, r) = audit(
        &org,
        &f.root.join("audit-other-key"),
        &["--signer", &f.fingerprint],
        &[],
    );
    assert_eq!(step(&r, "signature")["status"], "failed", "{r:#}");
    assert_eq!(r["verdict"], "FAIL");
    let (_, r) = audit(
        &org,
        &f.root.join("audit-other-key-2"),
        &["--allowed-signers", allowed],
        &[],
    );
    assert_eq!(r["verdict"], "FAIL", "{r:#}");

    // `referee verify` says the same.
    let o = referee(&["verify", f.org.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("not checked against a trusted signer"),
        "{}",
        stdout(&o)
    );
    let o = referee(&["verify", org.to_str().unwrap(), "--signer", &f.fingerprint]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

#[test]
fn a_malicious_package_runs_nothing_without_consent() {
    let f = fixture();
    let marker = f.root.join("PWNED-no-consent");
    let (org, fp) = with_command(
        "evil-no-consent",
        format!(
            "touch {}; exec {} fake_lora.py",
            marker.display(),
            rerun_python().display()
        ),
    );
    let out = f.root.join("audit-no-consent");
    let data = f.data.to_str().unwrap();
    let (code, r) = audit(
        &org,
        &out,
        // Unsandboxed, so that only the consent stands between the
        // command and this machine.
        &[
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--data",
            data,
            "--sandbox",
            "none",
        ],
        &[],
    );
    assert!(
        !marker.exists(),
        "the package's command ran without consent"
    );
    let rerun = step(&r, "re-run");
    assert_eq!(rerun["status"], "not_done", "{r:#}");
    assert!(
        rerun["detail"]
            .as_str()
            .unwrap()
            .contains("needs --allow-exec"),
        "{rerun}"
    );
    assert_eq!(r["verdict"], "INCOMPLETE");
    assert_ne!(code, Some(0));
    // The auditor is shown what would run.
    let md = std::fs::read_to_string(out.join("audit.md")).unwrap();
    assert!(md.contains("PWNED-no-consent"), "{md}");
    assert!(md.contains("sandbox: NONE"), "{md}");
}

#[test]
fn under_bubblewrap_the_program_cannot_write_out_read_secrets_or_reach_the_network() {
    let f = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // A host socket outside the home directory (an ssh-agent's, D-Bus's
    // under /run): a read-only bind would still let the program connect.
    let sock = repo_root()
        .join("target")
        .join(format!("audit-trust-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    unix.set_nonblocking(true).unwrap();
    // One marker under /tmp (private in the sandbox), one in the
    // repository's target directory (not shown in the sandbox).
    let tmp_marker = f.root.join("PWNED-tmp");
    let sys_marker = repo_root()
        .join("target")
        .join(format!("PWNED-audit-trust-{}", std::process::id()));
    let py = rerun_python().display().to_string();
    let repo_file = repo_root().join("Cargo.toml");
    let script = format!(
        "touch {tmp} 2>>probe.txt; touch {sys} 2>>probe.txt; \
         echo \"secret=[$SECRET_TOKEN]\" >> probe.txt; \
         echo \"uid=$(id -u)\" >> probe.txt; \
         cat /etc/shadow >/dev/null 2>&1 && echo shadow-read >> probe.txt; \
         ls /run >/dev/null 2>&1 && echo run-visible >> probe.txt; \
         cat {repo_file} >/dev/null 2>&1 && echo repo-read >> probe.txt; \
         v=$(cat /proc/sys/kernel/core_pattern); \
         (printf '%s\\n' \"$v\" > /proc/sys/kernel/core_pattern) 2>/dev/null && echo sysctl-written >> probe.txt; \
         {py} -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{sock}\")' 2>/dev/null && echo unix-connected >> probe.txt; \
         {py} -c 'import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); r=l.syscall({keyctl}, 0, -4, 0); sys.exit(0 if r < 0 and ctypes.get_errno() == 1 else 1)' && echo keyctl-denied >> probe.txt; \
         if {py} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)' 2>>probe.txt; \
         then echo connected >> probe.txt; else echo refused >> probe.txt; fi; \
         exec {py} fake_lora.py",
        tmp = tmp_marker.display(),
        sys = sys_marker.display(),
        repo_file = repo_file.display(),
        sock = sock.display(),
        // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING): the user's
        // keyring, refused by the sandbox's system-call filter (EPERM).
        keyctl = libc::SYS_keyctl,
    );
    let (org, fp) = with_command("evil-sandboxed", script);
    let out = f.root.join("audit-sandboxed");
    let (_, r) = audit(
        &org,
        &out,
        &[
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--allow-exec",
            "--data",
            f.data.to_str().unwrap(),
        ],
        &[("SECRET_TOKEN", "hunter2")],
    );
    let _ = std::fs::remove_file(&sock);
    assert!(!tmp_marker.exists(), "wrote {}", tmp_marker.display());
    assert!(!sys_marker.exists(), "wrote {}", sys_marker.display());
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the sandboxed program reached 127.0.0.1:{port}"
    );
    assert!(
        matches!(unix.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the sandboxed program reached the host socket {}",
        sock.display()
    );
    let rerun = r["reruns"][0].clone();
    let dir = PathBuf::from(
        rerun["rerun_dir"]
            .as_str()
            .unwrap_or_else(|| panic!("{r:#}")),
    );
    assert!(dir.starts_with(&out), "{}", dir.display());
    let probe = std::fs::read_to_string(dir.join("code/probe.txt")).unwrap();
    assert!(probe.contains("secret=[]"), "{probe}");
    assert!(!probe.contains("hunter2"), "{probe}");
    assert!(
        probe.contains("refused") && !probe.contains("connected"),
        "{probe}"
    );
    for leak in [
        "shadow-read",
        "run-visible",
        "repo-read",
        "sysctl-written",
        "unix-connected",
    ] {
        assert!(!probe.contains(leak), "{leak}: {probe}");
    }
    assert!(probe.contains("keyctl-denied"), "{probe}");
    // An auditor who is root never runs the package's program as root.
    assert!(!probe.contains("uid=0\n"), "{probe}");
    // The re-run's captures and result stay for the auditor.
    for f in ["run_0/stdout.txt", "run_0/stderr.txt", "result_0.txt"] {
        assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
    }
    assert!(
        std::fs::read_to_string(dir.join("run_0/stdout.txt"))
            .unwrap()
            .contains("fake_lora: done"),
        "the package's own program ran to its end"
    );
    assert!(
        rerun["plan"]["sandbox"]
            .as_str()
            .unwrap()
            .starts_with("bubblewrap"),
        "{rerun:#}"
    );
    assert!(rerun["plan"]["env"].get("SECRET_TOKEN").is_none());
    // The plan lists what the sandbox shows; nothing of the host's root.
    let shown = rerun["plan"]["read_only"].to_string();
    assert!(shown.contains("/usr (system)"), "{shown}");
    assert!(!shown.contains("\"/ ("), "{shown}");
}

/// git reads a checkout's configuration, which can name commands
/// (`diff.external`, `core.fsmonitor`): referee never runs git on a
/// package's code outside the sandbox.
#[test]
fn no_git_runs_on_a_package_s_code_outside_the_sandbox() {
    let f = fixture();
    let marker = f.root.join("PWNED-git");
    let (org, fp) = tampered("evil-git", |org| {
        let code = imp(org).join("code");
        std::fs::write(code.join("notes.txt"), "one\n").unwrap();
        git(&code, &["init", "-q"]);
        git(&code, &["add", "notes.txt"]);
        git(&code, &["commit", "-q", "-m", "notes"]);
        std::fs::write(code.join("notes.txt"), "two\n").unwrap();
        git(
            &code,
            &[
                "config",
                "diff.external",
                &format!("touch {}; true", marker.display()),
            ],
        );
        git(
            &code,
            &[
                "config",
                "core.fsmonitor",
                &format!("touch {}; true", marker.display()),
            ],
        );
    });
    // An auditor's git that trusts every directory (common in CI
    // containers), so that git's check of the owner does not hide the
    // attack.
    let gitconfig = f.root.join("auditor-gitconfig");
    std::fs::write(&gitconfig, "[safe]\n\tdirectory = *\n").unwrap();
    let (_, r) = audit(
        &org,
        &f.root.join("audit-git"),
        &[
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--allow-exec",
            "--force",
            "--sandbox",
            "none",
            "--data",
            f.data.to_str().unwrap(),
        ],
        &[("GIT_CONFIG_GLOBAL", gitconfig.to_str().unwrap())],
    );
    assert!(
        r["reruns"][0]["rerun_dir"].is_string(),
        "the re-run was not done: {r:#}"
    );
    assert!(
        !marker.exists(),
        "a command of the package's git configuration ran: {r:#}"
    );
}

/// A root auditor's re-run runs as nobody; what nobody cannot read is
/// refused before anything runs, saying what stops it and what to do.
#[test]
fn as_root_a_program_nobody_can_read_is_refused_saying_how() {
    if referee_harness::audit::sandbox::unprivileged_user().is_none() {
        eprintln!("not root: re-runs run as this user; nothing to refuse");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let closed = f.root.join("closed");
    std::fs::create_dir_all(closed.join("bin")).unwrap();
    std::fs::create_dir_all(closed.join("lib")).unwrap();
    let hidden_py = closed.join("bin/python3");
    let _ = std::fs::remove_file(&hidden_py);
    std::os::unix::fs::symlink(rerun_python(), &hidden_py).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let marker = f.root.join("PWNED-closed");
    let (org, fp) = with_command(
        "closed-interpreter",
        format!(
            "touch {}; exec {} fake_lora.py",
            marker.display(),
            hidden_py.display()
        ),
    );
    let (_, r) = audit(
        &org,
        &f.root.join("audit-closed"),
        &[
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--allow-exec",
            "--data",
            f.data.to_str().unwrap(),
            "--sandbox-ro",
            closed.to_str().unwrap(),
        ],
        &[],
    );
    let s = step(&r, "re-run");
    assert_eq!(s["status"], "not_done", "{r:#}");
    let why = s["detail"].as_str().unwrap();
    assert!(
        why.contains("unprivileged user 65534") && why.contains("0700"),
        "{why}"
    );
    assert!(why.contains("ordinary user"), "{why}");
    assert!(!marker.exists());
}

#[test]
fn sandbox_none_runs_unsandboxed_and_says_so() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    // Writable by anyone: unsandboxed, the program writes where its user
    // may (as root, the auditor's re-run runs as nobody).
    let anyone = f.root.join("anyone");
    std::fs::create_dir_all(&anyone).unwrap();
    std::fs::set_permissions(&anyone, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let marker = anyone.join("PWNED-unsandboxed");
    let (org, fp) = with_command(
        "evil-unsandboxed",
        format!(
            "touch {}; exec {} fake_lora.py",
            marker.display(),
            rerun_python().display()
        ),
    );
    let out = f.root.join("audit-unsandboxed");
    let (_, r) = audit(
        &org,
        &out,
        &[
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--allow-exec",
            "--sandbox",
            "none",
            "--data",
            f.data.to_str().unwrap(),
        ],
        &[],
    );
    assert!(marker.exists(), "consented, unsandboxed: the command ran");
    let plan = &r["reruns"][0]["plan"];
    assert!(
        plan["sandbox"].as_str().unwrap().starts_with("NONE"),
        "{r:#}"
    );
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(&marker).unwrap().uid();
    if referee_harness::audit::sandbox::unprivileged_user().is_some() {
        assert_eq!(owner, 65534, "a root auditor's re-run ran as root");
        assert!(plan["user"].as_str().unwrap().contains("65534"), "{plan:#}");
    }
}

#[test]
fn the_code_and_the_data_the_package_names_are_the_ones_re_run() {
    let f = fixture();
    assert!(
        f.package["package"]["code"]
            .as_str()
            .unwrap()
            .contains("git tracks"),
        "{:#}",
        f.package
    );
    assert!(imp(&f.org).join("code/fake_lora.py").is_file());

    // Without its code, a package cannot be re-run.
    let (org, fp) = tampered("no-code", |org| {
        std::fs::remove_dir_all(imp(org).join("code")).unwrap();
    });
    let (_, r) = audit(
        &org,
        &f.root.join("audit-no-code"),
        &["--rerun", "1", "--signer", &fp, "--allow-exec"],
        &[],
    );
    let s = step(&r, "re-run");
    assert_eq!(s["status"], "not_done", "{r:#}");
    assert!(
        s["detail"].as_str().unwrap().contains("carries no code"),
        "{s}"
    );

    // Code that is not what ran: refused.
    let (org, fp) = tampered("other-code", |org| {
        std::fs::write(imp(org).join("code/fake_lora.py"), "print('other')\n").unwrap();
    });
    let (_, r) = audit(
        &org,
        &f.root.join("audit-other-code"),
        &[
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--allow-exec",
            "--data",
            f.data.to_str().unwrap(),
        ],
        &[],
    );
    let s = step(&r, "re-run");
    assert_eq!(s["status"], "not_done", "{r:#}");
    assert!(s["detail"].as_str().unwrap().contains("code:"), "{s}");

    // Another dataset: refused (before anything runs); none given: not done.
    let other = f.root.join("other-dataset");
    copy_tree(&f.data, &other);
    std::fs::write(other.join("shard/a.bin"), b"tokenz").unwrap();
    let out = f.root.join("audit-other-data");
    let (_, r) = audit(
        &f.org,
        &out,
        &[
            "--rerun",
            "1",
            "--signer",
            &f.fingerprint,
            "--allow-exec",
            "--data",
            other.to_str().unwrap(),
        ],
        &[],
    );
    let s = step(&r, "re-run");
    assert_eq!(s["status"], "not_done", "{r:#}");
    assert!(s["detail"].as_str().unwrap().contains("dataset"), "{s}");
    let (_, r) = audit(
        &f.org,
        &f.root.join("audit-no-data"),
        &["--rerun", "1", "--signer", &f.fingerprint, "--allow-exec"],
        &[],
    );
    assert!(
        step(&r, "re-run")["detail"]
            .as_str()
            .unwrap()
            .contains("give --data DIR"),
        "{r:#}"
    );
}

#[test]
fn a_system_name_other_than_the_logged_platform_is_a_warning_and_is_published() {
    let f = fixture();
    let runs = f.shared.join("runs");
    let pk = f.root.join("pkg-renamed");
    let p = referee(&[
        "package",
        runs.to_str().unwrap(),
        "--out",
        pk.to_str().unwrap(),
        "--system",
        "Box_EPYC_published",
        "--json",
    ]);
    assert_eq!(p.status.code(), Some(0), "{}{}", stdout(&p), stderr(&p));
    let v: Value = serde_json::from_str(&stdout(&p)).unwrap();
    let w = v["package"]["warnings"].to_string();
    assert!(w.contains("submission_platform = \\\"cpu_box\\\""), "{w}");
    assert!(w.contains("Box_EPYC_published"), "{w}");
    let org = pk.join("referee");
    assert!(
        org.join("results/Box_EPYC_published/llama2_70b_lora")
            .is_dir()
    );
    assert!(org.join("systems/Box_EPYC_published.json").is_file());

    // The run summary warns too.
    let tmp = tempfile::tempdir().unwrap();
    let py = python().display().to_string();
    let fake = repo_root().join("tests/fixtures/exec/fake_lora.py");
    let out = tmp.path().join("one");
    let o = referee_in(
        &[
            "run",
            "--exec",
            "--benchmark",
            "llama2_70b_lora",
            "--ruleset",
            "5.0.0",
            "--runs",
            "1",
            "--seed",
            "3",
            "--cache-clear-cmd",
            "true",
            "--org",
            "Evil",
            "--system",
            "box",
            "--out",
            out.to_str().unwrap(),
            "--",
            &py,
            fake.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let text = stdout(&o);
    assert!(
        text.contains("warning: the program logged submission_org = \"referee\", but the results are under --org \"Evil\""),
        "{text}{}",
        stderr(&o)
    );
    assert!(text.contains("submission_platform = \"cpu_box\""), "{text}");
}

/// A key an auditor trusts vouches only for its own organisation: a
/// package it signed that names another organisation fails, and
/// `--principal` names the one the auditor expects.
#[test]
fn a_trusted_key_signing_another_organisation_s_package_fails() {
    let f = fixture();
    let line = std::fs::read_to_string(&f.allowed_signers).unwrap();
    // The same key, listed for another organisation.
    let (principal, rest) = line.split_once(' ').unwrap();
    assert_eq!(principal, "referee", "{line}");
    let other = f.root.join("allowed_signers_other");
    std::fs::write(&other, format!("globex {rest}")).unwrap();
    let (code, r) = audit(
        &f.org,
        &f.root.join("audit-identity-other"),
        &["--allowed-signers", other.to_str().unwrap()],
        &[],
    );
    assert_eq!(step(&r, "signature")["status"], "passed", "{r:#}");
    let id = step(&r, "identity");
    assert_eq!(id["status"], "failed", "{r:#}");
    assert!(id["detail"].as_str().unwrap().contains("globex"), "{id}");
    assert_eq!((code, r["verdict"].as_str()), (Some(1), Some("FAIL")));
    // A pinned key names no owner: --principal does.
    let (_, r) = audit(
        &f.org,
        &f.root.join("audit-identity-pinned"),
        &["--signer", &f.fingerprint, "--principal", "globex"],
        &[],
    );
    assert_eq!(step(&r, "identity")["status"], "failed", "{r:#}");
    let (_, r) = audit(
        &f.org,
        &f.root.join("audit-identity-pinned-ok"),
        &["--signer", &f.fingerprint, "--principal", "referee"],
        &[],
    );
    assert_eq!(step(&r, "identity")["status"], "passed", "{r:#}");
    assert_eq!(r["verdict"], "PASS", "{r:#}");
}

/// In a package with run records, every result is one of their entries
/// and every entry a result: a result edited by hand (its record left as
/// it was) no longer drops out of the witness step.
#[test]
fn every_result_is_a_recorded_run_and_every_recorded_run_a_result() {
    let f = fixture();
    let results = |org: &Path| org.join("results/cpu_box/llama2_70b_lora");
    let (org, fp) = tampered("hand-edited", |org| {
        let log = results(org).join("result_3.txt");
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::write(
            &log,
            text.replacen("\"eval_accuracy\"", "\"eval_accuracy\" ", 1),
        )
        .unwrap();
    });
    let (code, r) = audit(
        &org,
        &f.root.join("audit-hand-edited"),
        &["--signer", &fp],
        &[],
    );
    let w = step(&r, "witness");
    assert_eq!(w["status"], "failed", "{r:#}");
    let detail = w["detail"].as_str().unwrap();
    assert!(
        detail.contains("result_3.txt") && detail.contains("no entry of the package's run records"),
        "{detail}"
    );
    assert_eq!(code, Some(1));
    let (org, fp) = tampered("one-removed", |org| {
        std::fs::remove_file(results(org).join("result_9.txt")).unwrap();
    });
    let (_, r) = audit(
        &org,
        &f.root.join("audit-one-removed"),
        &["--signer", &fp],
        &[],
    );
    let w = step(&r, "witness");
    assert_eq!(w["status"], "failed", "{r:#}");
    assert!(
        w["detail"]
            .as_str()
            .unwrap()
            .contains("is not among the package's results"),
        "{w}"
    );
}

/// The re-run trains with a seed the auditor draws: a "training program"
/// that replays the original's run whatever its seed says gives the
/// original's curve under another seed, and fails.
#[test]
fn a_program_that_replays_its_run_instead_of_training_fails_the_re_run() {
    let f = fixture();
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(imp(&f.org).join("referee_run_0.json")).unwrap(),
    )
    .unwrap();
    let seed = record["runs"][0]["seed"].as_u64().unwrap();
    let (org, fp) = with_command(
        "replay",
        format!("SEED={seed} exec {} fake_lora.py", rerun_python().display()),
    );
    let run = |name: &str, extra: &[&str]| {
        let mut a = vec![
            "--rerun",
            "1",
            "--signer",
            &fp,
            "--allow-exec",
            "--data",
            f.data.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        audit(&org, &f.root.join(name), &a, &[]).1
    };
    let r = run("audit-replay", &["--rerun-seed", "4242"]);
    let c = &r["reruns"][0]["comparison"];
    assert_eq!(c["rerun_seed"], 4242, "{r:#}");
    assert_eq!(c["seed"], "auditor");
    assert_eq!(c["identical_curve"], true, "{c:#}");
    assert_eq!(step(&r, "re-run")["status"], "failed", "{r:#}");
    // The faithful program under the same seed: another curve, a pass.
    let r = audit(
        &f.org,
        &f.root.join("audit-faithful-seed"),
        &[
            "--rerun",
            "1",
            "--signer",
            &f.fingerprint,
            "--allow-exec",
            "--data",
            f.data.to_str().unwrap(),
            "--rerun-seed",
            "4242",
        ],
        &[],
    )
    .1;
    let c = &r["reruns"][0]["comparison"];
    assert_eq!(c["identical_curve"], false, "{c:#}");
    assert_eq!(step(&r, "re-run")["status"], "passed", "{r:#}");
}
