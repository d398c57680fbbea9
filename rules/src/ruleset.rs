//! Rule files: finding them, loading them, compiling their code.
//!
//! referee never ships the official rule files. It reads them at run time
//! from an installed `mlperf-logging` package (found through the Python
//! environment) or from a directory the user names, and compiles every code
//! snippet into the sandboxed interpreter's AST once per process.
//!
//! Rule-file dialect (official YAML, loaded with string-only scalars): a list
//! of single-key maps `BEGIN: {CODE}`, `KEY: {NAME, REQ, PRE, CHECK, POST,
//! FIRST_CHECK, ATLEAST_ONE_CHECK}` and `END: {PRE, CHECK}`.

use crate::py::{self, Expr, Stmt};
use crate::yaml::{self, Node};
use indexmap::IndexMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A code snippet: the text exactly as the rule file has it (padding
/// included, as the official messages print it) and its compiled form.
#[derive(Debug, Clone)]
pub struct Snippet<T> {
    pub text: String,
    pub code: T,
    /// 1-based line of the snippet in the rule file.
    pub line: usize,
}

/// Occurrence requirement of a KEY record.
#[derive(Debug, Clone, PartialEq)]
pub enum Req {
    None,
    ExactlyOne,
    AtLeastOne,
    AtLeast(usize),
    AtLeastOneOr(Vec<String>),
    Optional,
    /// Any other string: silently ignored by the official checker.
    Unknown(String),
}

#[derive(Debug, Clone)]
pub struct KeyRule {
    pub name: String,
    pub req: Req,
    pub pre: Option<Snippet<Vec<Stmt>>>,
    pub check: Vec<Snippet<Expr>>,
    pub post: Option<Snippet<Vec<Stmt>>>,
    pub first_check: Option<Snippet<Expr>>,
    pub atleast_one_check: Option<Snippet<Expr>>,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub enum Begin {
    Code(Snippet<Vec<Stmt>>),
    /// The 4.0.0–5.0.0 stable-diffusion block that groups FID and CLIP evals
    /// into synthetic `aggregated_eval_accuracy` records; run natively.
    AggregateEvalMetrics {
        line: usize,
    },
}

#[derive(Debug, Clone, Default)]
pub struct EndRule {
    pub pre: Option<Snippet<Vec<Stmt>>>,
    pub check: Vec<Snippet<Expr>>,
}

#[derive(Debug, Clone)]
pub struct RuleFile {
    /// The path as enqueued (relative to the rules root, or absolute).
    pub rel: String,
    /// Where it was read from (or `<embedded>/…`).
    pub origin: PathBuf,
    pub begin: Option<Begin>,
    /// NAME → record; a later record with the same NAME replaces the earlier
    /// one but keeps its position (Python dict semantics).
    pub keys: IndexMap<String, KeyRule>,
    pub end: Option<EndRule>,
}

/// A rule file that cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    pub file: String,
    pub line: Option<usize>,
    /// e.g. `KEY opt_name, CHECK`.
    pub record: Option<String>,
    pub message: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(r) = &self.record {
            write!(f, " ({r})")?;
        }
        write!(f, ": {}", self.message)
    }
}

fn is_sd_aggregation(code: &str) -> bool {
    code.contains("aggregated_eval_accuracy")
        && code.contains("loglines")
        && code.contains("agg_eval_lines")
}

/// Compile a rule file from its YAML text.
pub fn compile_rule_file(rel: &str, origin: PathBuf, text: &str) -> Result<RuleFile, RuleError> {
    let c = Compiler { rel };
    let doc = yaml::load(text)
        .map_err(|e| c.err(Some(e.line), None, format!("invalid YAML: {}", e.message)))?;
    let mut file = RuleFile {
        rel: rel.to_string(),
        origin,
        begin: None,
        keys: IndexMap::new(),
        end: None,
    };
    let Some(doc) = doc else {
        return Ok(file);
    };
    let Node::Seq(items, _) = doc else {
        return Err(c.err(
            Some(doc.line()),
            None,
            "the top level must be a list of BEGIN/KEY/END records".into(),
        ));
    };
    for item in &items {
        match item.first_key() {
            Some("BEGIN") => c.begin(item, &mut file)?,
            Some("KEY") => {
                let rule = c.key(item)?;
                file.keys.insert(rule.name.clone(), rule);
            }
            Some("END") => c.end(item, &mut file)?,
            // Other records are ignored by the official checker too.
            _ => {}
        }
    }
    Ok(file)
}

/// Compiles the records of one rule file (`rel` names it in errors).
struct Compiler<'a> {
    rel: &'a str,
}

impl Compiler<'_> {
    fn err(&self, line: Option<usize>, record: Option<String>, message: String) -> RuleError {
        RuleError {
            file: self.rel.to_string(),
            line,
            record,
            message,
        }
    }

    fn scalar(&self, n: &Node, what: &str, record: &str) -> Result<String, RuleError> {
        n.as_str().map(str::to_string).ok_or_else(|| {
            self.err(
                Some(n.line()),
                Some(record.into()),
                format!("{what} must be a string"),
            )
        })
    }

    /// Statements (`CODE`, `PRE`, `POST`).
    fn exec_snippet(&self, n: &Node, record: &str) -> Result<Snippet<Vec<Stmt>>, RuleError> {
        let text = self.scalar(n, "code", record)?;
        let code = py::compile_exec(&text)
            .map_err(|e| self.err(Some(n.line()), Some(record.into()), e.describe(text.trim())))?;
        Ok(Snippet {
            text,
            code,
            line: n.line(),
        })
    }

    /// One expression (`CHECK` items, `FIRST_CHECK`, `ATLEAST_ONE_CHECK`).
    fn expr_snippet(&self, n: &Node, record: &str) -> Result<Snippet<Expr>, RuleError> {
        let text = self.scalar(n, "expression", record)?;
        let code = py::compile_expr(&text)
            .map_err(|e| self.err(Some(n.line()), Some(record.into()), e.describe(text.trim())))?;
        Ok(Snippet {
            text,
            code,
            line: n.line(),
        })
    }

    /// `CHECK`: one expression or a list of them.
    fn expr_list(&self, n: Option<&Node>, record: &str) -> Result<Vec<Snippet<Expr>>, RuleError> {
        match n {
            None => Ok(Vec::new()),
            Some(Node::Seq(items, _)) => {
                items.iter().map(|i| self.expr_snippet(i, record)).collect()
            }
            Some(other) => Ok(vec![self.expr_snippet(other, record)?]),
        }
    }

    fn begin(&self, item: &Node, file: &mut RuleFile) -> Result<(), RuleError> {
        if file.begin.is_some() {
            return Err(self.err(
                Some(item.line()),
                Some("BEGIN".into()),
                "more than one BEGIN record".into(),
            ));
        }
        let body = item.get("BEGIN").expect("first key exists");
        let code = body.get("CODE").ok_or_else(|| {
            self.err(
                Some(body.line()),
                Some("BEGIN".into()),
                "BEGIN needs CODE".into(),
            )
        })?;
        let text = self.scalar(code, "CODE", "BEGIN CODE")?;
        file.begin = Some(if is_sd_aggregation(&text) {
            Begin::AggregateEvalMetrics { line: code.line() }
        } else {
            Begin::Code(self.exec_snippet(code, "BEGIN CODE")?)
        });
        Ok(())
    }

    fn key(&self, item: &Node) -> Result<KeyRule, RuleError> {
        let body = item.get("KEY").expect("first key exists");
        let name = body
            .get("NAME")
            .and_then(Node::as_str)
            .ok_or_else(|| {
                self.err(
                    Some(body.line()),
                    Some("KEY".into()),
                    "KEY record without NAME".into(),
                )
            })?
            .to_string();
        let rec = |field: &str| format!("KEY {name}, {field}");
        let req = match body.get("REQ").and_then(Node::as_str) {
            None => Req::None,
            Some(r) => parse_req(r),
        };
        Ok(KeyRule {
            req,
            pre: body
                .get("PRE")
                .map(|n| self.exec_snippet(n, &rec("PRE")))
                .transpose()?,
            check: self.expr_list(body.get("CHECK"), &rec("CHECK"))?,
            post: body
                .get("POST")
                .map(|n| self.exec_snippet(n, &rec("POST")))
                .transpose()?,
            first_check: body
                .get("FIRST_CHECK")
                .map(|n| self.expr_snippet(n, &rec("FIRST_CHECK")))
                .transpose()?,
            atleast_one_check: body
                .get("ATLEAST_ONE_CHECK")
                .map(|n| self.expr_snippet(n, &rec("ATLEAST_ONE_CHECK")))
                .transpose()?,
            line: item.line(),
            name,
        })
    }

    fn end(&self, item: &Node, file: &mut RuleFile) -> Result<(), RuleError> {
        if file.end.is_some() {
            return Err(self.err(
                Some(item.line()),
                Some("END".into()),
                "more than one END record".into(),
            ));
        }
        let body = item.get("END").expect("first key exists");
        file.end = Some(EndRule {
            pre: body
                .get("PRE")
                .map(|n| self.exec_snippet(n, "END PRE"))
                .transpose()?,
            check: self.expr_list(body.get("CHECK"), "END CHECK")?,
        });
        Ok(())
    }
}

fn parse_req(r: &str) -> Req {
    match r {
        "EXACTLY_ONE" => Req::ExactlyOne,
        "AT_LEAST_ONE" => Req::AtLeastOne,
        "OPTIONAL" => Req::Optional,
        _ => {
            if let Some(inner) = r
                .strip_prefix("AT_LEAST_ONE_OR(")
                .and_then(|x| x.strip_suffix(')'))
            {
                Req::AtLeastOneOr(inner.split(',').map(|s| s.trim().to_string()).collect())
            } else if let Some(n) = r
                .strip_prefix("AT_LEAST(")
                .and_then(|x| x.strip_suffix(')'))
                .and_then(|n| n.trim().parse().ok())
            {
                Req::AtLeast(n)
            } else {
                Req::Unknown(r.to_string())
            }
        }
    }
}

/// Why a rule file could not be obtained.
#[derive(Debug, Clone)]
pub enum LoadError {
    /// No such file (the official checker crashes with FileNotFoundError).
    NotFound(PathBuf),
    Invalid(RuleError),
}

/// Where rule files come from: an official rules root (the
/// `mlperf_logging/compliance_checker` directory, holding `training_X.Y.Z/`
/// folders) plus rule files registered in memory (referee's own).
pub struct RuleLibrary {
    root: Option<PathBuf>,
    package: Option<MlperfLogging>,
    embedded: HashMap<String, String>,
    cache: Mutex<HashMap<String, Result<Arc<RuleFile>, LoadError>>>,
    universes: Mutex<HashMap<String, Arc<std::collections::HashSet<String>>>>,
    constants: std::sync::OnceLock<Arc<std::collections::HashSet<String>>>,
}

impl std::fmt::Debug for RuleLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleLibrary")
            .field("root", &self.root)
            .field("embedded", &self.embedded.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl RuleLibrary {
    /// A library reading official rule files from `compliance_dir`.
    pub fn from_dir(compliance_dir: impl Into<PathBuf>) -> Self {
        RuleLibrary {
            root: Some(compliance_dir.into()),
            package: None,
            embedded: HashMap::new(),
            cache: Mutex::new(HashMap::new()),
            universes: Mutex::new(HashMap::new()),
            constants: std::sync::OnceLock::new(),
        }
    }

    /// A library of in-memory rule files only.
    pub fn embedded_only() -> Self {
        RuleLibrary {
            root: None,
            package: None,
            embedded: HashMap::new(),
            cache: Mutex::new(HashMap::new()),
            universes: Mutex::new(HashMap::new()),
            constants: std::sync::OnceLock::new(),
        }
    }

    pub fn from_package(pkg: MlperfLogging) -> Self {
        let mut lib = Self::from_dir(pkg.compliance_dir());
        lib.package = Some(pkg);
        lib
    }

    /// Register an in-memory rule file under a relative path such as
    /// `referee_1.0/mini_llm.yaml`.
    pub fn add_embedded(&mut self, rel: impl Into<String>, yaml: impl Into<String>) {
        self.embedded.insert(rel.into(), yaml.into());
    }

    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    pub fn package(&self) -> Option<&MlperfLogging> {
        self.package.as_ref()
    }

    /// Rulesets available for a usage (`training`, `hpc`), sorted.
    pub fn rulesets(&self, usage: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(root) = &self.root
            && let Ok(rd) = std::fs::read_dir(root)
        {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if let Some(ver) = name.strip_prefix(&format!("{usage}_"))
                    && is_version(ver)
                    && e.path().join("common.yaml").is_file()
                {
                    out.push(ver.to_string());
                }
            }
        }
        out.sort_by_key(|v| version_key(v));
        out
    }

    /// Load (and cache) a rule file by the path a rule enqueues.
    pub fn load(&self, rel: &str) -> Result<Arc<RuleFile>, LoadError> {
        if let Some(hit) = self.cache.lock().expect("cache lock").get(rel) {
            return hit.clone();
        }
        let result = self.load_uncached(rel);
        self.cache
            .lock()
            .expect("cache lock")
            .insert(rel.to_string(), result.clone());
        result
    }

    /// Every KEY NAME of every rule file in the ruleset folder `dir` (e.g.
    /// `training_5.0.0`): records with other keys can be read slim. Files
    /// that fail to load contribute nothing (they are reported when run).
    pub fn key_universe(&self, dir: &str) -> Arc<std::collections::HashSet<String>> {
        let mut cache = self.universes.lock().expect("universe lock");
        if let Some(u) = cache.get(dir) {
            return u.clone();
        }
        let mut names = std::collections::HashSet::new();
        let mut rels: Vec<String> = self
            .embedded
            .keys()
            .filter(|k| k.starts_with(&format!("{dir}/")))
            .cloned()
            .collect();
        if let Some(root) = &self.root
            && let Ok(rd) = std::fs::read_dir(root.join(dir))
        {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.ends_with(".yaml") {
                    rels.push(format!("{dir}/{n}"));
                }
            }
        }
        for rel in rels {
            if let Ok(f) = self.load(&rel) {
                names.extend(f.keys.keys().cloned());
            }
        }
        let u = Arc::new(names);
        cache.insert(dir.to_string(), u.clone());
        u
    }

    /// The key names the logging library defines (the string constants of
    /// `mlperf_logging/mllog/constants.py` beside the rules root, e.g.
    /// `opt_adamw_epsilon`): keys a log may carry though no rule reads them.
    /// Empty without an installed library.
    pub fn logging_constants(&self) -> Arc<std::collections::HashSet<String>> {
        self.constants
            .get_or_init(|| {
                let text = self
                    .root
                    .as_ref()
                    .and_then(|r| r.parent())
                    .and_then(|p| {
                        std::fs::read_to_string(p.join("mllog").join("constants.py")).ok()
                    })
                    .unwrap_or_default();
                Arc::new(string_constants(&text))
            })
            .clone()
    }

    /// Where a relative rule path resolves on disk (for messages).
    pub fn resolve(&self, rel: &str) -> PathBuf {
        let p = Path::new(rel);
        if p.is_absolute() {
            return p.to_path_buf();
        }
        match &self.root {
            Some(r) => r.join(rel),
            None => PathBuf::from(rel),
        }
    }

    fn load_uncached(&self, rel: &str) -> Result<Arc<RuleFile>, LoadError> {
        if let Some(text) = self.embedded.get(rel) {
            return compile_rule_file(rel, PathBuf::from("<embedded>").join(rel), text)
                .map(Arc::new)
                .map_err(LoadError::Invalid);
        }
        let path = self.resolve(rel);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => return Err(LoadError::NotFound(path)),
        };
        let text = String::from_utf8_lossy(&bytes);
        compile_rule_file(rel, path.clone(), &text)
            .map(Arc::new)
            .map_err(LoadError::Invalid)
    }
}

fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// Sort key for `X.Y.Z` strings.
/// The values of `NAME = "value"` lines (upper-case names, one string
/// literal) of a Python constants module.
fn string_constants(text: &str) -> std::collections::HashSet<String> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once('=')?;
            let name = name.trim();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            {
                return None;
            }
            let rest = rest.trim();
            let q = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let body = &rest[1..];
            let end = body.find(q)?;
            body[end + 1..]
                .trim()
                .is_empty()
                .then(|| body[..end].to_string())
        })
        .collect()
}

pub fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// An installed `mlperf_logging` Python package.
#[derive(Debug, Clone, PartialEq)]
pub struct MlperfLogging {
    /// The package directory (`…/site-packages/mlperf_logging`).
    pub dir: PathBuf,
    /// The distribution version from its `.dist-info`, when found.
    pub version: Option<String>,
}

impl MlperfLogging {
    pub fn compliance_dir(&self) -> PathBuf {
        self.dir.join("compliance_checker")
    }
    pub fn rcp_dir(&self) -> PathBuf {
        self.dir.join("rcp_checker")
    }

    fn at(dir: PathBuf) -> Option<Self> {
        if !dir.join("compliance_checker").is_dir() {
            return None;
        }
        let version = dir.parent().and_then(dist_version);
        Some(MlperfLogging { dir, version })
    }
}

fn dist_version(site: &Path) -> Option<String> {
    for e in std::fs::read_dir(site).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("mlperf_logging-") && name.ends_with(".dist-info") {
            let meta = std::fs::read_to_string(e.path().join("METADATA")).ok()?;
            return meta
                .lines()
                .find_map(|l| l.strip_prefix("Version: "))
                .map(|v| v.trim().to_string());
        }
    }
    None
}

/// How the official rules were (not) found.
#[derive(Debug, Clone)]
pub struct DiscoveryError {
    pub tried: Vec<String>,
}

impl std::fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "could not find the official MLPerf rule files (Python package mlperf-logging)."
        )?;
        writeln!(f, "Looked in:")?;
        for t in &self.tried {
            writeln!(f, "  - {t}")?;
        }
        write!(
            f,
            "Fix: `python3 -m pip install mlperf-logging==4.1.68` (in the active Python environment), \
             or pass --rules-dir DIR (the mlperf_logging package directory or its compliance_checker \
             directory), or set REFEREE_MLPERF_LOGGING=DIR."
        )
    }
}

impl std::error::Error for DiscoveryError {}

/// Interpret a directory the user named: the package dir, its
/// `compliance_checker` dir, or a site-packages dir holding the package.
pub fn package_from_dir(dir: &Path) -> Option<MlperfLogging> {
    if let Some(p) = MlperfLogging::at(dir.to_path_buf()) {
        return Some(p);
    }
    if dir.file_name().is_some_and(|n| n == "compliance_checker")
        && let Some(p) = dir
            .parent()
            .and_then(|p| MlperfLogging::at(p.to_path_buf()))
    {
        return Some(p);
    }
    MlperfLogging::at(dir.join("mlperf_logging"))
}

/// Where the official rules may come from: the environments the user
/// named and referee's own installation, never the current directory (a
/// package an auditor opens could carry `.venv/` or `mlperf_logging/`
/// there, docs/trust.md).
#[derive(Debug, Clone, Default)]
pub struct RuleSources {
    /// `$REFEREE_MLPERF_LOGGING`: the package directory itself.
    pub explicit: Option<PathBuf>,
    /// `$VIRTUAL_ENV`: the environment the user activated.
    pub virtual_env: Option<PathBuf>,
    /// The referee binary: `PREFIX/bin/referee` (a pip install beside its
    /// pinned mlperf-logging) or `ROOT/target/<profile>/referee` (a
    /// checkout with its `.venv`).
    pub exe: Option<PathBuf>,
    /// Interpreters asked, in order (`$REFEREE_PYTHON`, `python3`,
    /// `python`), each run isolated (`-I`) from a neutral directory.
    pub pythons: Vec<String>,
}

impl RuleSources {
    /// The sources of this process: its environment and its binary.
    pub fn of_this_process() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let mut pythons: Vec<String> = Vec::new();
        if let Ok(py) = std::env::var("REFEREE_PYTHON") {
            pythons.push(py);
        }
        pythons.extend(["python3".to_string(), "python".to_string()]);
        RuleSources {
            explicit: var("REFEREE_MLPERF_LOGGING").map(PathBuf::from),
            virtual_env: var("VIRTUAL_ENV").map(PathBuf::from),
            exe: std::env::current_exe().ok(),
            pythons,
        }
    }

    /// The virtual environments to look in, in order.
    fn venvs(&self) -> Vec<PathBuf> {
        let mut venvs: Vec<PathBuf> = self.virtual_env.iter().cloned().collect();
        let exe = self.exe.as_deref();
        // PREFIX/bin/referee → PREFIX (its lib/pythonX.Y/site-packages).
        if let Some(prefix) = exe
            .filter(|e| e.parent().and_then(Path::file_name) == Some("bin".as_ref()))
            .and_then(Path::parent)
            .and_then(Path::parent)
        {
            venvs.push(prefix.to_path_buf());
        }
        // ROOT/target/<profile>/[dir/]referee → ROOT/.venv.
        if let Some(root) = exe
            .and_then(|e| {
                e.ancestors()
                    .skip(1)
                    .take(3)
                    .find(|a| a.file_name() == Some("target".as_ref()))
            })
            .and_then(Path::parent)
        {
            venvs.push(root.join(".venv"));
        }
        venvs
    }
}

/// The directory an isolated interpreter is started in: one no package
/// can be in (`-I` already keeps the current directory off `sys.path`;
/// this also keeps the interpreter's relative paths away from it).
pub const NEUTRAL_DIR: &str = "/";

/// Find an installed `mlperf-logging` from [`RuleSources::of_this_process`]
/// (see [`discover_from`]).
pub fn discover_mlperf_logging() -> Result<MlperfLogging, DiscoveryError> {
    discover_from(&RuleSources::of_this_process())
}

/// Find `mlperf-logging`: the explicit directory, then the virtual
/// environments ([`RuleSources`]), then whatever each interpreter imports
/// when run isolated (`python3 -I`, from [`NEUTRAL_DIR`], its output read
/// as a path and checked to hold the rule files).
pub fn discover_from(src: &RuleSources) -> Result<MlperfLogging, DiscoveryError> {
    let mut tried = Vec::new();
    if let Some(d) = &src.explicit {
        if let Some(p) = package_from_dir(d) {
            return Ok(p);
        }
        tried.push(format!("$REFEREE_MLPERF_LOGGING={}", d.display()));
    }
    for venv in src.venvs() {
        let lib = venv.join("lib");
        if let Ok(rd) = std::fs::read_dir(&lib) {
            for e in rd.flatten() {
                let site = e.path().join("site-packages");
                if let Some(p) = MlperfLogging::at(site.join("mlperf_logging")) {
                    return Ok(p);
                }
            }
        }
        tried.push(format!("virtual environment {}", venv.display()));
    }
    for py in &src.pythons {
        let out = std::process::Command::new(py)
            .args([
                "-I",
                "-c",
                "import os, mlperf_logging; print(os.path.dirname(mlperf_logging.__file__))",
            ])
            .current_dir(NEUTRAL_DIR)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        if let Ok(out) = out
            && out.status.success()
        {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if let Some(p) = MlperfLogging::at(PathBuf::from(&dir)) {
                return Ok(p);
            }
        }
        tried.push(format!("`{py} -I -c 'import mlperf_logging'`"));
    }
    Err(DiscoveryError { tried })
}
