//! Shared helpers of referee's end-to-end tests: where the repository, the
//! corpus and the official rules are, and how to run the `referee` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub mod tour;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository root")
        .to_path_buf()
}

/// The shared corpus of real MLPerf logs (`../shared/corpus` next to the
/// checkout, or `$REFEREE_CORPUS`). Panics with the fix when absent: the
/// parity tests are the proof that referee's rules are right.
pub fn corpus_dir() -> PathBuf {
    let dir = std::env::var_os("REFEREE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/corpus"));
    assert!(
        dir.join("training_results_v5.0").is_dir(),
        "the MLPerf log corpus is missing at {} (set REFEREE_CORPUS to the directory holding training_results_v5.0/ and expected/)",
        dir.display()
    );
    dir
}

/// The installed `mlperf-logging` package (official rule files). The test
/// script installs it into `.venv`; panics with the fix when absent.
pub fn mlperf_logging() -> referee_rules::ruleset::MlperfLogging {
    static FOUND: OnceLock<referee_rules::ruleset::MlperfLogging> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let venv = repo_root().join(".venv");
            if std::env::var_os("VIRTUAL_ENV").is_none() && venv.is_dir() {
                // SAFETY: set once, before any other thread reads it.
                unsafe { std::env::set_var("VIRTUAL_ENV", &venv) };
            }
            referee_rules::ruleset::discover_mlperf_logging()
                .unwrap_or_else(|e| panic!("{e}\n(run scripts/setup.sh first)"))
        })
        .clone()
}

/// `target/<profile>/` of these tests, and whether it is the release profile.
fn profile_dir() -> (PathBuf, bool) {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let release = dir.file_name().is_some_and(|n| n == "release");
    (dir, release)
}

/// `cargo build` of the `referee` binary in the profile of these tests, with
/// referee-harness's `features` when given; true on success.
fn cargo_build_referee(features: Option<&str>) -> bool {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "referee-harness",
        "--bin",
        "referee",
    ]);
    if let Some(f) = features {
        cmd.args(["--features", f]);
    }
    if profile_dir().1 {
        cmd.arg("--release");
    }
    cmd.current_dir(repo_root())
        .status()
        .expect("run cargo build")
        .success()
}

/// Builds the `referee` binary with `features` and copies it to
/// `target/<profile>/<name>` (a relative path), all under an exclusive lock shared by every test
/// binary: two tests never build into the same path at once, and each runs
/// its own copy, which no later build replaces. `check` must hold for the
/// copy (the right feature set). After a build with features, the default
/// binary is built again (a re-link of cached artifacts, no compile) so that
/// `target/<profile>/referee` stays the default build for scripts.
fn build_copy(features: Option<&str>, name: &str, check: impl Fn(&[u8]) -> bool) -> PathBuf {
    let (dir, _) = profile_dir();
    let _lock = lock_file(&dir.join(".referee-test-build.lock"));
    let what = features.map_or("the default build".to_string(), |f| {
        format!("--features {f}")
    });
    // scripts/test.sh builds the binary from this source before the tests
    // and says so (`REFEREE_TESTS_BUILT`): while it is the default build (a
    // workspace build of the tests links it with their features; a test
    // process that finds it so builds it again), a cargo run per test
    // process is spared.
    let built = dir.join("referee");
    let built_already = features.is_none()
        && std::env::var_os("REFEREE_TESTS_BUILT").is_some()
        && std::fs::read(&built).is_ok_and(|b| check(&b));
    assert!(
        built_already || cargo_build_referee(features),
        "building referee ({what}) failed{}",
        if features.is_some_and(|f| f.contains("mpi")) {
            ": is MPI installed? (scripts/install-ci-deps.sh installs libopenmpi-dev, openmpi-bin, libclang-dev)"
        } else {
            ""
        }
    );
    let bytes = std::fs::read(&built).expect("read the built binary");
    assert!(check(&bytes), "{} is not {what}", built.display());
    let copy = dir.join(name);
    std::fs::create_dir_all(copy.parent().expect("a file name")).expect("create the copy's folder");
    let tmp = copy.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, &bytes).expect("copy the referee binary");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&tmp, &copy).expect("rename the copy");
    if features.is_some() {
        assert!(
            cargo_build_referee(None),
            "re-linking the default referee failed"
        );
    }
    copy
}

/// Path of the `referee` binary of the profile these tests were built with
/// (a copy of the tests' own, `test-bin/referee`: named `referee`, as
/// its usage lines say), building it first.
pub fn referee_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        build_copy(None, "test-bin/referee", |b| {
            !memchr_find(b, b"MPI_Iallreduce") && !memchr_find(b, b"features: graph")
        })
    })
    .clone()
}

/// Run `referee ARGS` with the official rules discoverable.
pub fn referee(args: &[&str]) -> Output {
    referee_in(args, &repo_root())
}

/// Run `referee ARGS` in `dir`.
pub fn referee_in(args: &[&str], dir: &Path) -> Output {
    let pkg = mlperf_logging();
    Command::new(referee_bin())
        .args(args)
        .current_dir(dir)
        .env("REFEREE_MLPERF_LOGGING", &pkg.dir)
        .output()
        .expect("run referee")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Read a TSV with a header row (lines starting with `#` and blank lines
/// skipped) into rows of (column → value).
pub fn read_tsv(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .expect("header row")
        .split('\t')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(
                    l.split('\t')
                        .map(str::to_string)
                        .chain(std::iter::repeat(String::new())),
                )
                .collect()
        })
        .collect()
}

/// The Python interpreter of the environment that holds `mlperf-logging`
/// (it has PyYAML and the official tools).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("REFEREE_PYTHON") {
        return PathBuf::from(p);
    }
    let pkg = mlperf_logging();
    // <venv>/lib/pythonX.Y/site-packages/mlperf_logging
    let venv = pkg.dir.ancestors().nth(4).map(Path::to_path_buf);
    match venv.map(|v| v.join("bin/python")).filter(|p| p.is_file()) {
        Some(p) => p,
        None => PathBuf::from("python3"),
    }
}

/// A Python interpreter an audit's re-run can start: the tests' own, or,
/// when the tests run as root (whose re-runs run a package's program as
/// the unprivileged user nobody, docs/trust.md), the first of the tests'
/// own, `/usr/bin/python3` and `/usr/local/bin/python3` that nobody can
/// read. A program it runs imports `mlperf_logging` from its own code
/// ([`vendor_mllog`]), not from the tests' environment.
pub fn rerun_python() -> PathBuf {
    use referee_harness::audit::sandbox::{readable_by, unprivileged_user};
    let Some((uid, gid)) = unprivileged_user() else {
        return python();
    };
    let own = std::fs::canonicalize(python()).unwrap_or_else(|_| python());
    [own, "/usr/bin/python3".into(), "/usr/local/bin/python3".into()]
        .into_iter()
        .find(|p| p.is_file() && readable_by(p, uid, gid).is_ok())
        .expect("the tests run as root: an audit's re-run needs a Python interpreter that the user nobody can read (install Debian's python3)")
}

/// Copy the official logging library (`mlperf_logging/__init__.py` and
/// `mllog/`, standard library only) into a program's code directory, so
/// that the program imports it from there under any interpreter.
pub fn vendor_mllog(code: &Path) {
    let pkg = mlperf_logging();
    let to = code.join("mlperf_logging");
    std::fs::create_dir_all(&to).unwrap();
    std::fs::copy(pkg.dir.join("__init__.py"), to.join("__init__.py")).unwrap();
    copy_tree(&pkg.dir.join("mllog"), &to.join("mllog"));
    for e in walk_files(&to) {
        if e.extension().is_some_and(|x| x == "pyc") {
            std::fs::remove_file(e).unwrap();
        }
    }
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A fresh temporary directory that the unprivileged user of an audit's
/// re-run can reach (mode 0755; tempfile makes them 0700), kept.
pub fn open_tempdir() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap().keep();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Split one CSV line (RFC 4180 quoting; no embedded newlines).
pub fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The prepared data directory (`$REFEREE_DATA_DIR` or `./data` of the
/// checkout); panics with the fix when a dataset is missing.
pub fn data_dir(datasets: &[&str]) -> PathBuf {
    let dir = std::env::var_os("REFEREE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("data"));
    for d in datasets {
        assert!(
            dir.join(d).join("MANIFEST.json").is_file(),
            "dataset {d} is not prepared in {}: run `referee data prepare {d} --data-dir {}` (scripts/test.sh does)",
            dir.display(),
            dir.display()
        );
    }
    dir
}

/// The MPI build of referee (`--features mpi,gpu`), `referee-mpi`.
pub fn referee_mpi_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        build_copy(Some("mpi,gpu"), "referee-mpi", |b| {
            memchr_find(b, b"MPI_Iallreduce") && memchr_find(b, b"ncclCommInitRank")
        })
    })
    .clone()
}

/// The build of referee with the graph engine (`--features graph`),
/// `test-bin/referee-graph`: the one `scripts/test.sh` kept from the
/// workspace's test build (`REFEREE_GRAPH_BIN`: the tests turn `graph` on,
/// so the workspace links the binary with it), or else built here.
pub fn referee_graph_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let graph = |b: &[u8]| memchr_find(b, b"features: graph") && !memchr_find(b, b"MPI_Iallreduce");
    BIN.get_or_init(|| {
        if let Some(kept) = std::env::var_os("REFEREE_GRAPH_BIN").map(PathBuf::from)
            && std::fs::read(&kept).is_ok_and(|b| graph(&b))
        {
            return kept;
        }
        build_copy(Some("graph"), "test-bin/referee-graph", graph)
    })
    .clone()
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `mpirun` with the flags the tests need on a CI machine (root allowed,
/// more ranks than cores), or a panic naming the fix.
pub fn mpirun() -> Command {
    let ok = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "mpirun is not installed: scripts/install-ci-deps.sh installs openmpi-bin"
    );
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe"]);
    c
}

/// Copy the tree `from` into `to` (created), leaving every copied file
/// writable (the corpus may be read-only) so tests can damage the copy.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            let mut p = std::fs::metadata(&dst).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            p.set_readonly(false);
            std::fs::set_permissions(&dst, p).unwrap();
        }
    }
}

/// The scoring context of an official training ruleset, with the rules and
/// RCP tables of the installed mlperf-logging.
pub fn official_score_context(ruleset: &str) -> referee_rules::score::ScoreContext {
    use referee_rules::{checker::Checker, compliance::CheckOptions, ruleset_facts::RulesetFacts};
    let pkg = mlperf_logging();
    let lib = std::sync::Arc::new(referee_rules::ruleset::RuleLibrary::from_package(
        pkg.clone(),
    ));
    let checker = std::sync::Arc::new(Checker::new(lib, CheckOptions::default()));
    referee_rules::score::ScoreContext::new(
        checker,
        "training",
        ruleset,
        RulesetFacts::official(),
        Some(pkg.rcp_dir()),
    )
}

/// The official package checker's verdict on a submission folder: "FOUND NO ERRORS" vs "FOUND ERRORS" in its log.
pub fn official_package_ok(org: &Path, ruleset: &str) -> bool {
    let o = std::process::Command::new(python())
        .args(["-m", "mlperf_logging.package_checker"])
        .arg(org)
        .args(["training", ruleset, "--log_output", "/dev/null"])
        .output()
        .expect("run the official package checker");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the official package checker always exits 0:\n{err}"
    );
    if err.contains("PACKAGE CHECKER FOUND NO ERRORS") {
        true
    } else if err.contains("PACKAGE CHECKER FOUND ERRORS") {
        false
    } else {
        panic!("no verdict from the official package checker:\n{err}")
    }
}

/// Headless Chromium (`$REFEREE_CHROMIUM`, or the system's): the HTML
/// reports are checked in a real browser.
pub fn chromium() -> PathBuf {
    let candidates = [
        std::env::var_os("REFEREE_CHROMIUM").map(PathBuf::from),
        Some(PathBuf::from("/usr/bin/chromium")),
        Some(PathBuf::from("/usr/bin/chromium-browser")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "headless Chromium is needed to check the HTML report: install it (`apt-get install -y chromium`) or set REFEREE_CHROMIUM"
            )
        })
}

/// Headless Chromium with a fresh profile and nothing in the background.
fn headless(profile: &Path) -> Command {
    let mut c = Command::new(chromium());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// A screenshot of `page` by headless Chromium into `png` (1200×1600).
pub fn screenshot(page: &Path, png: &Path) {
    let profile = tempfile::tempdir().unwrap();
    let shot = headless(profile.path())
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,1600")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        png.is_file(),
        "chromium wrote no screenshot: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
}

/// The document headless Chromium built from `page` (its DOM serialised):
/// what a browser makes of the HTML, not the bytes referee wrote.
pub fn dom(page: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = headless(profile.path())
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        dom.contains("</html>"),
        "chromium gave no document: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    dom
}

/// Width, height and RGB pixels of an 8-bit PNG.
pub fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let px = buf[..info.buffer_size()]
        .chunks_exact(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width, info.height, px)
}

/// The fake training program of the `run --exec` tests
/// (tests/fixtures/exec/fake_lora.py, a stand-in for llama2_70b_lora).
pub fn fake_lora() -> String {
    repo_root()
        .join("tests/fixtures/exec/fake_lora.py")
        .display()
        .to_string()
}

/// The arguments of `referee run --exec --json -q` of [`fake_lora`]
/// (llama2_70b_lora under 5.0.0, `runs` runs, the cache clear a no-op,
/// the outputs in `out`), with `extra` flags and `fault` flags of the
/// program.
pub fn fake_exec_args(out: &Path, runs: usize, extra: &[&str], fault: &[&str]) -> Vec<String> {
    let python = python().display().to_string();
    fake_exec_args_with(out, runs, extra, fault, &python, &fake_lora())
}

/// [`fake_exec_args`] with the program run as `python PROGRAM` (a
/// program in the working directory, as a package's code runs at re-run).
pub fn fake_exec_args_with(
    out: &Path,
    runs: usize,
    extra: &[&str],
    fault: &[&str],
    python: &str,
    program: &str,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
        "--runs",
        &runs.to_string(),
        "--cache-clear-cmd",
        "true",
        "--json",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--".into(), python.to_string(), program.to_string()]);
    args.extend(fault.iter().map(|s| s.to_string()));
    args
}

/// `referee keygen --json` at `path`, which must succeed: (fingerprint,
/// allowed_signers line).
pub fn keygen(path: &Path) -> (String, String) {
    let o = referee(&["keygen", "--out", path.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    (
        v["fingerprint"].as_str().unwrap().to_string(),
        v["allowed_signers_line"].as_str().unwrap().to_string(),
    )
}

/// `referee sign DIR --key KEY`, which must succeed.
pub fn sign(dir: &Path, key: &Path) {
    let s = referee(&[
        "sign",
        dir.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(s.status.success(), "{}", stderr(&s));
}

/// A fixture made once and shared by every test process of a suite run
/// (cargo-nextest runs each test in a process of its own, so an in-process
/// `OnceLock` would make it once per test).
///
/// `make` fills a fresh directory that the unprivileged user of an audit's
/// re-run can reach ([`open_tempdir`]) and returns what the tests need to
/// know of it besides its files (a summary, what was printed). The
/// directory and that value are recorded under
/// `target/<profile>/test-fixtures/NAME.json`, under an exclusive lock, with
/// `recipe` (the inputs that define the fixture) and the SHA-256 of the
/// `referee` binary: a later test, in any process, gets the same directory
/// while both match; a new build or recipe makes it again.
/// `scripts/test.sh` names each suite run (`REFEREE_TEST_RUN`), which is
/// part of the match, so that every suite run makes each fixture once.
/// Tests must treat the directory as read-only (copy it first to change
/// it: [`copy_tree`]).
pub fn shared_fixture(
    name: &str,
    recipe: &str,
    make: impl FnOnce(&Path) -> serde_json::Value,
) -> (PathBuf, serde_json::Value) {
    use serde_json::json;
    let binary = referee_digest();
    let recipe = format!(
        "{recipe} (suite run {})",
        std::env::var("REFEREE_TEST_RUN").unwrap_or_default()
    );
    let fixtures = profile_dir().0.join("test-fixtures");
    std::fs::create_dir_all(&fixtures).expect("create target/<profile>/test-fixtures");
    let _lock = lock_file(&fixtures.join(format!("{name}.lock")));
    let record = fixtures.join(format!("{name}.json"));
    if let Some(r) = std::fs::read(&record)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    {
        let dir = r["dir"].as_str().map(PathBuf::from);
        if r["recipe"] == recipe.as_str()
            && r["binary"] == binary.as_str()
            && let Some(dir) = dir.filter(|d| d.join(".made").is_file())
        {
            return (dir, r["value"].clone());
        }
        // The earlier fixture goes, if it is one (a record names any path).
        if let Some(old) = r["dir"].as_str().map(Path::new)
            && old.join(".made").is_file()
        {
            let _ = std::fs::remove_dir_all(old);
        }
    }
    let dir = open_tempdir();
    let value = make(&dir);
    std::fs::write(dir.join(".made"), name).expect("mark the fixture made");
    let r = json!({"recipe": recipe, "binary": binary, "dir": dir, "value": value});
    let tmp = record.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&r).unwrap()).expect("write the fixture record");
    std::fs::rename(&tmp, &record).expect("rename the fixture record");
    (dir, value)
}

/// An exclusive lock on `path` (made if missing), shared with every test
/// process; held until the returned file is dropped.
pub fn lock_file(path: &Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open the lock {}: {e}", path.display()));
    // SAFETY: flock on a descriptor we own; released when `lock` is dropped.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    lock
}

/// SHA-256 (hex) of the `referee` binary the tests run.
fn referee_digest() -> &'static String {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| {
        use sha2::Digest;
        let bytes = std::fs::read(referee_bin()).expect("read the referee binary");
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

/// The arguments of the suite's five mini_llm runs ([`mini_llm_runs`]):
/// README's tour's `referee run` line is these but for the ones tests add
/// (a fixed seed, no page cache dropped, no progress bar, the data
/// directory).
pub const MINI_LLM_RUN_ARGS: [&str; 14] = [
    "run",
    "mini_llm",
    "--runs",
    "5",
    "--seed",
    "7",
    "--org",
    "ACME",
    "--system",
    "cpu_box",
    "--no-cache-clear",
    "--quiet",
    "--out",
    "out/llm",
];

/// Five finished mini_llm runs trained to the target, made once for the
/// suite run and shared by every test that needs real runs of a built-in
/// benchmark ([`shared_fixture`]): their folder and what `referee run`
/// printed (stdout and stderr, in order).
pub fn mini_llm_runs() -> &'static (PathBuf, String) {
    static RUNS: OnceLock<(PathBuf, String)> = OnceLock::new();
    RUNS.get_or_init(|| {
        let data = data_dir(&["shakespeare"]);
        let recipe = MINI_LLM_RUN_ARGS.join(" ");
        let (dir, printed) = shared_fixture("mini_llm-5-runs", &recipe, |dir| {
            let printed = dir.join("printed.txt");
            let file = std::fs::File::create(&printed).unwrap();
            let status = Command::new(referee_bin())
                .args(MINI_LLM_RUN_ARGS)
                .arg("--data-dir")
                .arg(&data)
                .current_dir(dir)
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .status()
                .unwrap();
            let printed = std::fs::read_to_string(printed).unwrap();
            assert!(
                status.code() == Some(0) || status.code() == Some(1),
                "{printed}"
            );
            printed.into()
        });
        (dir.join("out/llm"), printed.as_str().unwrap().to_string())
    })
}
