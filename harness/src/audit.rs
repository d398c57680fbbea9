//! The audit of a signed submission folder, in three stages:
//!
//! 1. **signature**: the manifest's signature and every file's digest
//!    ([`referee_submission::sign::verify_dir`]); a package that does not
//!    verify is trusted no further;
//! 2. **package check**: the folder judged with referee's rules;
//! 3. **re-runs**: the first K results of each benchmark trained again on
//!    this machine from their recorded configuration and seed (refused when
//!    the code or the data differ, unless forced), their convergence
//!    compared with the original's curve and with the benchmark's RCP
//!    bounds.
//!
//! [`audit`] returns an [`AuditReport`]; its Markdown form is `audit.md`,
//! its JSON form `audit.json` ([`AuditReport::write`]).

use crate::clock::{Clock, SystemClock};
use crate::collective::Local;
use crate::plan::{build_plan, dataset_fingerprints};
use crate::provenance::CodeIdentity;
use crate::run::{Quiet, RunResult, run_once};
use referee_rules::Verdict;
use referee_rules::mllog;
use referee_rules::package::{PackageOptions, PackageReport, check_package};
use referee_rules::rcp::RcpTable;
use referee_rules::report::{Detail, Report, pass_fail};
use referee_rules::tree as layout; // TODO(rename)
use referee_submission::sign::{VerifyReport, verify_dir};
use referee_workloads::bench::Benchmark;
use serde::Serialize;
use serde_json::Value;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Relative tolerance on each common evaluation point of original and re-run.
pub const CURVE_TOLERANCE: f64 = 0.02;

/// What the auditor asked for.
#[derive(Debug, Clone)]
pub struct AuditRequest {
    /// The signed submission folder.
    pub dir: PathBuf,
    /// Re-run this many results of each benchmark (the first K).
    pub rerun: usize,
    /// Where the re-runs' logs go.
    pub out: PathBuf,
    /// allowed_signers file the signing key must be in.
    pub allowed_signers: Option<PathBuf>,
    /// Re-run even if the code or the data differ from the original's.
    pub force: bool,
    /// Where prepared datasets are.
    pub data_dir: PathBuf,
}

/// The RCP bounds a re-run's convergence is held to.
#[derive(Debug, Clone, Serialize)]
pub struct RcpBounds {
    pub record: String,
    pub min_acceptable: f64,
    pub mean: f64,
    pub stdev: f64,
    pub upper_3sd: f64,
}

/// A re-run compared with its original and with the RCP bounds.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// `PASS` or `FAIL`.
    pub verdict: &'static str,
    pub original_converged_at: Option<u64>,
    pub rerun_converged_at: Option<u64>,
    pub rcp_bounds: Option<RcpBounds>,
    pub within_rcp_bounds: Option<bool>,
    pub common_eval_points: usize,
    pub curve_max_relative_difference: f64,
    pub curve_tolerance: f64,
    pub original_curve: Vec<(u64, f64)>,
    pub rerun_curve: Vec<(u64, f64)>,
}

/// One result the audit tried to re-run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Rerun {
    /// Not re-run: the code or the data differ and `--force` was not given.
    Refused { log: String, refused: Vec<String> },
    /// Re-run and compared.
    Done {
        log: String,
        seed: u64,
        forced: bool,
        differences: Vec<String>,
        rerun_dir: String,
        comparison: Box<Comparison>,
    },
}

/// The audit's findings, in the order they were made.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    pub verify: VerifyReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_check: Option<PackageReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reruns: Option<Vec<Rerun>>,
    /// `PASS` or `FAIL`.
    pub verdict: &'static str,
    /// `audit.md`, built as the stages ran.
    #[serde(skip)]
    pub markdown: String,
}

impl AuditReport {
    pub fn passed(&self) -> bool {
        self.verdict == "PASS"
    }

    /// Write `audit.md` and `audit.json` into `out`, each atomically.
    pub fn write(&self, out: &Path) -> io::Result<()> {
        let w = |name: &str, bytes: &[u8]| crate::fsutil::write_atomic(&out.join(name), bytes);
        w("audit.md", self.markdown.as_bytes())?;
        w(
            "audit.json",
            serde_json::to_string_pretty(self).expect("json").as_bytes(),
        )
    }
}

impl Report for AuditReport {
    /// The verdict line of `audit.md` (or the signature failure).
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(
            out,
            "{}",
            self.markdown
                .lines()
                .rev()
                .find(|l| l.starts_with("**") || l.contains("FAILED"))
                .unwrap_or("")
        )
    }
    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        out.write_all(self.markdown.as_bytes())
    }
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

/// Audit `req.dir`. `Err` only when the audit cannot be carried out at all
/// (an unreadable folder, configuration or log); findings are in the report.
pub fn audit(req: &AuditRequest) -> Result<AuditReport, String> {
    let mut md = format!(
        "# referee audit\n\nSubmission: `{}`  \nAudited on: this machine, referee {}\n\n",
        req.dir.display(),
        crate::provenance::VERSION
    );
    let verify = verify_dir(&req.dir, req.allowed_signers.as_deref()).map_err(|e| e.to_string())?;
    signature_section(&mut md, &verify);
    if !verify.ok {
        md.push_str("\nThe package does not verify; nothing further is trusted or re-run.\n");
        return Ok(AuditReport {
            dir: None,
            verify,
            package_check: None,
            reruns: None,
            verdict: "FAIL",
            markdown: md,
        });
    }
    let scoring = crate::own_benchmarks::own_score_context();
    let pkg = check_package(&scoring, &req.dir, PackageOptions::default(), &|| {});
    package_section(&mut md, &pkg);
    let mut rerunner = Rerunner::new(req, md)?;
    rerunner.rerun_all()?;
    let ok = pkg.verdict == Verdict::Pass && rerunner.ok;
    let verdict = pass_fail(ok);
    let mut md = rerunner.md;
    md.push_str(&format!("\n## Verdict\n\n**{verdict}**\n"));
    Ok(AuditReport {
        dir: Some(req.dir.display().to_string()),
        verify,
        package_check: Some(pkg),
        reruns: Some(rerunner.reruns),
        verdict,
        markdown: md,
    })
}

/// Section 1 of `audit.md`.
fn signature_section(md: &mut String, verify: &VerifyReport) {
    md.push_str(&format!(
        "## 1. Signature\n\n{}: {} files, key {}\n\n",
        if verify.ok { "VERIFIED" } else { "FAILED" },
        verify.files,
        verify.key_fingerprint.as_deref().unwrap_or("?")
    ));
    for p in &verify.problems {
        md.push_str(&format!("- {p}\n"));
    }
}

/// Section 2 of `audit.md`.
fn package_section(md: &mut String, pkg: &PackageReport) {
    md.push_str(&format!(
        "## 2. Package check\n\n{}\n\n",
        pkg.verdict.as_str()
    ));
    for d in pkg.diagnostics.iter().filter(|d| d.is_error()) {
        md.push_str(&format!(
            "- {} `{}`: {}\n",
            d.file.as_deref().unwrap_or(""),
            d.code,
            d.message
        ));
    }
}

/// What an original log says about its run.
struct Curve {
    /// (samples_count, metric) of every evaluation.
    points: Vec<(u64, f64)>,
    /// The last evaluation before a successful run_stop.
    converged_at: Option<u64>,
    /// The `referee_provenance` value.
    provenance: Value,
    /// `submission_org` and `submission_platform`.
    org: String,
    platform: String,
}

/// Read an original log once: its evaluation curve, convergence point,
/// provenance and submission keys.
fn read_curve(log: &Path, key: &str) -> Result<Curve, String> {
    let parsed = mllog::read_file(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut c = Curve {
        points: Vec::new(),
        converged_at: None,
        provenance: Value::Null,
        org: String::new(),
        platform: String::new(),
    };
    let text = |r: &mllog::Record| r.value().as_str().map(str::to_string);
    for r in &parsed.records {
        match r.key() {
            k if k == key => {
                if let (Some(s), Some(v)) = (
                    r.meta("samples_count").and_then(|x| x.as_f64()),
                    r.value().as_f64(),
                ) {
                    c.points.push((s as u64, v));
                }
            }
            "run_stop" if r.meta("status").and_then(|s| s.as_str()) == Some("success") => {
                c.converged_at = c.points.last().map(|x| x.0);
            }
            "referee_provenance" => c.provenance = serde_json::Value::from(r.value()),
            // The first occurrence counts, as the original reader took it.
            "submission_org" if c.org.is_empty() => c.org = text(r).unwrap_or_default(),
            "submission_platform" if c.platform.is_empty() => {
                c.platform = text(r).unwrap_or_default()
            }
            _ => {}
        }
    }
    Ok(c)
}

/// Stage 3: the re-runs, with the state they share.
struct Rerunner<'a> {
    req: &'a AuditRequest,
    md: String,
    ok: bool,
    reruns: Vec<Rerun>,
    current: CodeIdentity,
    engine: referee_workloads::Engine,
}

/// A benchmark directory's recorded configuration and division.
struct Recorded {
    bench: &'static dyn Benchmark,
    config: Value,
    division: String,
}

impl<'a> Rerunner<'a> {
    fn new(req: &'a AuditRequest, mut md: String) -> Result<Self, String> {
        md.push_str("## 3. Re-runs\n\n");
        if req.rerun == 0 {
            md.push_str("No re-run requested (`--rerun K`).\n");
        }
        let engine = referee_workloads::Engine::for_device(&referee_workloads::Device::Cpu)
            .map_err(|e| e.to_string())?;
        Ok(Rerunner {
            req,
            md,
            ok: true,
            reruns: Vec::new(),
            current: CodeIdentity::current(),
            engine,
        })
    }

    /// Every benchmark directory: its first K results re-run.
    fn rerun_all(&mut self) -> Result<(), String> {
        for d in layout::benchmark_dirs(&self.req.dir, "training").unwrap_or_default() {
            let Some(recorded) = self.recorded(&d)? else {
                continue;
            };
            let logs = layout::result_files(&d.path).unwrap_or_default();
            for log in logs.iter().take(self.req.rerun) {
                self.rerun_one(&d.benchmark, &recorded, log)?;
            }
        }
        Ok(())
    }

    /// The benchmark's recorded configuration, or `None` (with the reason
    /// in the report) when it cannot be re-run here.
    fn recorded(&mut self, d: &layout::BenchmarkDir) -> Result<Option<Recorded>, String> {
        let Some(bench) = crate::own_benchmarks::find(&d.benchmark) else {
            self.md.push_str(&format!(
                "- `{}`: not a referee benchmark; cannot be re-run here\n",
                d.benchmark
            ));
            return Ok(None);
        };
        let impl_dir = self
            .req
            .dir
            .join("benchmarks")
            .join(&d.benchmark)
            .join("implementations");
        let config_path = std::fs::read_dir(&impl_dir).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path().join("config.json"))
                .find(|p| p.is_file())
        });
        let Some(config_path) = config_path else {
            self.ok = false;
            self.md.push_str(&format!(
                "- `{}`: no implementations/*/config.json; cannot re-run\n",
                d.benchmark
            ));
            return Ok(None);
        };
        let config: Value = std::fs::read_to_string(&config_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| format!("{}: unreadable configuration", config_path.display()))?;
        let division = referee_rules::sysdesc::SystemDesc::load(
            &self
                .req
                .dir
                .join("systems")
                .join(format!("{}.json", d.system)),
        )
        .ok()
        .and_then(|s| s.text("division"))
        .unwrap_or_else(|| "closed".into());
        Ok(Some(Recorded {
            bench,
            config,
            division,
        }))
    }

    /// Why a re-run would not reproduce the original: other code, other data.
    fn differences(
        &self,
        prov: &Value,
        fingerprints: &std::collections::BTreeMap<String, String>,
    ) -> Vec<String> {
        let current = &self.current;
        let mut differences = Vec::new();
        if prov["git_commit"].as_str() != Some(current.git_commit.as_str())
            || prov["uncommitted_diff_sha256"].as_str()
                != Some(current.uncommitted_diff_sha256.as_str())
        {
            differences.push(format!(
                "code: original {} (diff {}), this referee {} (diff {})",
                prov["git_commit"].as_str().unwrap_or("?"),
                prov["uncommitted_diff_sha256"].as_str().unwrap_or(""),
                current.git_commit,
                current.uncommitted_diff_sha256
            ));
        }
        for (ds, fp) in fingerprints {
            let orig_fp = prov["dataset_fingerprints"][ds].as_str().unwrap_or("");
            if orig_fp != fp {
                differences.push(format!("dataset {ds}: original {orig_fp}, here {fp}"));
            }
        }
        differences
    }

    /// Re-run one result and compare it.
    fn rerun_one(&mut self, benchmark: &str, rec: &Recorded, log: &Path) -> Result<(), String> {
        let orig = read_curve(log, rec.bench.spec().metric.key)?;
        let Some(seed) = orig.provenance["seed"].as_u64() else {
            self.ok = false;
            self.md.push_str(&format!(
                "- `{}`: no recorded seed (referee_provenance); cannot re-run\n",
                log.display()
            ));
            return Ok(());
        };
        let fingerprints = dataset_fingerprints(rec.bench, &self.req.data_dir)?;
        let differences = self.differences(&orig.provenance, &fingerprints);
        if !differences.is_empty() && !self.req.force {
            self.ok = false;
            self.md.push_str(&format!(
                "- `{}`: refused to re-run: {} (use --force to re-run anyway)\n",
                log.display(),
                differences.join("; ")
            ));
            self.reruns.push(Rerun::Refused {
                log: log.display().to_string(),
                refused: differences,
            });
            return Ok(());
        }
        let rerun_dir = self.req.out.join(format!(
            "rerun-{benchmark}-{}",
            log.file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default()
        ));
        let _ = std::fs::remove_dir_all(&rerun_dir);
        std::fs::create_dir_all(&rerun_dir).map_err(|e| format!("{}: {e}", rerun_dir.display()))?;
        let mut plan = build_plan(
            rec.bench,
            rec.config.clone(),
            &rec.division,
            &orig.org,
            &orig.platform,
            self.req.data_dir.clone(),
            rerun_dir.clone(),
            referee_workloads::Device::Cpu,
            "cpu",
            self.engine,
            fingerprints,
        );
        plan.cache_clear = false;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::default());
        eprintln!("referee: re-running {} (seed {seed})", log.display());
        let r: RunResult = match run_once(&plan, 0, seed, clock, &mut Local, &Quiet) {
            Ok(r) => r,
            Err(e) => {
                self.ok = false;
                self.md
                    .push_str(&format!("- `{}`: re-run failed: {e}\n", log.display()));
                return Ok(());
            }
        };
        let comparison = compare(rec.bench, &rec.config, &orig.points, orig.converged_at, &r);
        self.ok &= comparison.verdict == "PASS";
        self.md
            .push_str(&rerun_line(log, seed, &differences, &comparison));
        self.reruns.push(Rerun::Done {
            log: log.display().to_string(),
            seed,
            forced: !differences.is_empty(),
            differences,
            rerun_dir: rerun_dir.display().to_string(),
            comparison: Box::new(comparison),
        });
        Ok(())
    }
}

/// The `audit.md` line of one re-run.
fn rerun_line(log: &Path, seed: u64, differences: &[String], c: &Comparison) -> String {
    format!(
        "- `{}` (seed {seed}){}: {} — original converged at {}, re-run at {}; RCP bounds {}; curve max relative difference {}\n",
        log.display(),
        if differences.is_empty() {
            String::new()
        } else {
            format!(" [forced: {}]", differences.join("; "))
        },
        c.verdict,
        c.original_converged_at
            .map(|x| x.to_string())
            .unwrap_or_else(|| "never".into()),
        json(&c.rerun_converged_at),
        json(&c.rcp_bounds),
        json(&c.curve_max_relative_difference)
    )
}

/// JSON text of a value (as `audit.md` shows numbers, nulls and records).
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serialisable")
}

/// The RCP record a re-run at global batch size `gbs` is held to: the
/// table's record for that size, or one interpolated between its
/// neighbours.
fn rcp_bounds(bench: &dyn Benchmark, gbs: f64) -> Option<RcpBounds> {
    let facts = crate::own_benchmarks::meta();
    let table = RcpTable::from_json(
        bench.rcp_json(),
        "rcps",
        "training",
        referee_workloads::bench::RULESET,
        bench.spec().name,
        &facts,
    )
    .ok()?;
    let rec = record_for(&table, gbs)?;
    Some(RcpBounds {
        record: rec.name,
        min_acceptable: rec.min_epochs,
        mean: rec.mean,
        stdev: rec.stdev,
        upper_3sd: rec.mean + 3.0 * rec.stdev,
    })
}

/// Compare a re-run with its original and with the RCP bounds.
fn compare(
    bench: &dyn Benchmark,
    config: &Value,
    orig: &[(u64, f64)],
    orig_conv: Option<u64>,
    r: &RunResult,
) -> Comparison {
    let rerun_conv = (r.status == "success")
        .then(|| r.evals.last().map(|e| e.0))
        .flatten();
    let mut max_rel = 0.0f64;
    let mut common = 0;
    for (s, v) in orig {
        if let Some(e) = r.evals.iter().find(|e| e.0 == *s) {
            common += 1;
            let rel = (e.1 - v).abs() / v.abs().max(1e-12);
            max_rel = max_rel.max(rel);
        }
    }
    let bounds = rcp_bounds(bench, bench.global_batch_size(config) as f64);
    let within = match (rerun_conv, &bounds) {
        (Some(c), Some(b)) => Some((c as f64) >= b.min_acceptable && (c as f64) <= b.upper_3sd),
        _ => None,
    };
    let curves_agree = common > 0 && max_rel <= CURVE_TOLERANCE;
    let pass = rerun_conv.is_some() && within != Some(false) && curves_agree;
    Comparison {
        verdict: pass_fail(pass),
        original_converged_at: orig_conv,
        rerun_converged_at: rerun_conv,
        rcp_bounds: bounds,
        within_rcp_bounds: within,
        common_eval_points: common,
        curve_max_relative_difference: max_rel,
        curve_tolerance: CURVE_TOLERANCE,
        original_curve: orig.to_vec(),
        rerun_curve: r.evals.iter().map(|e| (e.0, e.1)).collect(),
    }
}

/// TODO(move to rcp.rs)
fn record_for(t: &RcpTable, gbs: f64) -> Option<referee_rules::rcp::RcpRecord> {
    t.records.iter().find(|x| x.bs == gbs).cloned().or_else(|| {
        let lo = t.records.iter().rfind(|x| x.bs < gbs)?;
        let hi = t.records.iter().find(|x| x.bs > gbs)?;
        Some(t.interpolate(gbs, lo, hi))
    })
}
