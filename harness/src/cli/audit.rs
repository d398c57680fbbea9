//! `referee audit DIR`: verify a signed submission folder, check it, and
//! re-run K of its results on this machine from their recorded
//! configuration and seed, comparing convergence with the original and
//! with the benchmark's reference convergence points.

use super::run::{build_plan, chrono_like_stamp, dataset_fingerprints};
use super::{EXIT_FAIL, EXIT_OK, usage_error};
use crate::clock::{Clock, SystemClock};
use crate::collective::Local;
use crate::provenance::CodeIdentity;
use crate::registry;
use crate::run::{Quiet, RunResult, run_once};
use clap::Args;
use referee_rules::Verdict;
use referee_rules::mllog;
use referee_rules::package::{PackageOptions, check_package};
use referee_rules::rcp::RcpTable;
use referee_rules::tree;
use referee_submission::sign::verify_dir;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A signed submission folder (ORG with systems/, results/, MANIFEST, MANIFEST.sig).
    pub dir: PathBuf,
    /// Re-run this many results (the first K of each benchmark).
    #[arg(long, default_value_t = 0)]
    pub rerun: usize,
    /// Where audit.md, audit.json and the re-run logs go (default: audit-TIMESTAMP).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// allowed_signers file (OpenSSH format) the signing key must be in.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Re-run even if the code or the data differ from the original's
    /// (recorded in the report).
    #[arg(long)]
    pub force: bool,
    /// Where prepared datasets are (default: $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Compute threads.
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

/// What an original log says about its run.
struct Curve {
    /// (samples_count, metric) of every evaluation.
    points: Vec<(u64, f64)>,
    /// The last evaluation before a successful run_stop.
    converged_at: Option<u64>,
    /// The `referee_provenance` value.
    provenance: Value,
}

fn curve(log: &Path, key: &str) -> Result<Curve, String> {
    let p = mllog::read_file(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut c = Curve {
        points: Vec::new(),
        converged_at: None,
        provenance: Value::Null,
    };
    for r in &p.records {
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
            _ => {}
        }
    }
    Ok(c)
}

/// Relative tolerance on each common evaluation point of original and re-run.
pub const CURVE_TOLERANCE: f64 = 0.02;

pub fn run(a: AuditArgs) -> i32 {
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // SAFETY: called before any other thread of this process exists.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
    if !a.dir.is_dir() {
        return usage_error(format!("{}: no such directory", a.dir.display()));
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("audit-{}", chrono_like_stamp())));
    if let Err(e) = std::fs::create_dir_all(&out) {
        return usage_error(format!("{}: {e}", out.display()));
    }
    let mut ok = true;
    let mut md = String::from("# referee audit\n\n");
    md.push_str(&format!(
        "Submission: `{}`  \nAudited on: this machine, referee {}\n\n",
        a.dir.display(),
        crate::provenance::VERSION
    ));

    // 1. Signature and digests.
    let verify = match verify_dir(&a.dir, a.allowed_signers.as_deref()) {
        Ok(v) => v,
        Err(e) => return usage_error(e.to_string()),
    };
    ok &= verify.ok;
    md.push_str(&format!(
        "## 1. Signature\n\n{}: {} files, key {}\n\n",
        if verify.ok { "VERIFIED" } else { "FAILED" },
        verify.files,
        verify.key_fingerprint.as_deref().unwrap_or("?")
    ));
    for p in &verify.problems {
        md.push_str(&format!("- {p}\n"));
    }
    if !verify.ok {
        md.push_str("\nThe package does not verify; nothing further is trusted or re-run.\n");
        return finish(
            &out,
            &md,
            json!({"verify": verify, "verdict": "FAIL"}),
            false,
        );
    }

    // 2. Package check with referee's rules.
    let ctx = registry::own_score_context();
    let pkg = check_package(&ctx, &a.dir, PackageOptions::default(), &|| {});
    ok &= pkg.verdict == Verdict::Pass;
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

    // 3. Re-runs.
    md.push_str("## 3. Re-runs\n\n");
    let data_dir = a
        .data_dir
        .clone()
        .unwrap_or_else(referee_datasets::default_data_dir);
    let current = CodeIdentity::current();
    let engine = match referee_workloads::Engine::for_device(&referee_workloads::Device::Cpu) {
        Ok(e) => e,
        Err(e) => return usage_error(e.to_string()),
    };
    let mut reruns = Vec::new();
    let dirs = tree::benchmark_dirs(&a.dir, "training").unwrap_or_default();
    if a.rerun == 0 {
        md.push_str("No re-run requested (`--rerun K`).\n");
    }
    for d in dirs {
        let Some(bench) = registry::find(&d.benchmark) else {
            md.push_str(&format!(
                "- `{}`: not a referee benchmark; cannot be re-run here\n",
                d.benchmark
            ));
            continue;
        };
        let key = bench.spec().metric.key;
        let impl_dir = a
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
            ok = false;
            md.push_str(&format!(
                "- `{}`: no implementations/*/config.json; cannot re-run\n",
                d.benchmark
            ));
            continue;
        };
        let config: Value = match std::fs::read_to_string(&config_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
        {
            Some(c) => c,
            None => {
                return usage_error(format!(
                    "{}: unreadable configuration",
                    config_path.display()
                ));
            }
        };
        let division = referee_rules::sysdesc::SystemDesc::load(
            &a.dir.join("systems").join(format!("{}.json", d.system)),
        )
        .ok()
        .and_then(|s| s.text("division"))
        .unwrap_or_else(|| "closed".into());
        let logs = tree::result_files(&d.path).unwrap_or_default();
        for log in logs.iter().take(a.rerun) {
            let Curve {
                points: orig,
                converged_at: orig_conv,
                provenance: prov,
            } = match curve(log, key) {
                Ok(c) => c,
                Err(e) => return usage_error(e),
            };
            let seed = prov["seed"].as_u64();
            let Some(seed) = seed else {
                ok = false;
                md.push_str(&format!(
                    "- `{}`: no recorded seed (referee_provenance); cannot re-run\n",
                    log.display()
                ));
                continue;
            };
            // Same code and data, or --force.
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
            let fingerprints = match dataset_fingerprints(bench, &data_dir) {
                Ok(f) => f,
                Err(e) => return usage_error(e),
            };
            for (ds, fp) in &fingerprints {
                let orig_fp = prov["dataset_fingerprints"][ds].as_str().unwrap_or("");
                if orig_fp != fp {
                    differences.push(format!("dataset {ds}: original {orig_fp}, here {fp}"));
                }
            }
            if !differences.is_empty() && !a.force {
                ok = false;
                md.push_str(&format!(
                    "- `{}`: refused to re-run: {} (use --force to re-run anyway)\n",
                    log.display(),
                    differences.join("; ")
                ));
                reruns.push(json!({"log": log.display().to_string(), "refused": differences}));
                continue;
            }
            let rerun_dir = out.join(format!(
                "rerun-{}-{}",
                d.benchmark,
                log.file_stem()
                    .map(|s| s.to_string_lossy().to_string())
                    .unwrap_or_default()
            ));
            let _ = std::fs::remove_dir_all(&rerun_dir);
            if let Err(e) = std::fs::create_dir_all(&rerun_dir) {
                return usage_error(format!("{}: {e}", rerun_dir.display()));
            }
            let org = prov_str(log, "submission_org");
            let platform = prov_str(log, "submission_platform");
            let mut plan = build_plan(
                bench,
                config.clone(),
                &division,
                &org,
                &platform,
                data_dir.clone(),
                rerun_dir.clone(),
                referee_workloads::Device::Cpu,
                "cpu",
                engine,
                fingerprints.clone(),
            );
            plan.cache_clear = false;
            let clock: Arc<dyn Clock> = Arc::new(SystemClock::default());
            eprintln!("referee: re-running {} (seed {seed})", log.display());
            let r: RunResult = match run_once(&plan, 0, seed, clock, &mut Local, &Quiet) {
                Ok(r) => r,
                Err(e) => {
                    ok = false;
                    md.push_str(&format!("- `{}`: re-run failed: {e}\n", log.display()));
                    continue;
                }
            };
            let comparison = compare(bench, &config, &orig, orig_conv, &r);
            ok &= comparison["verdict"] == "PASS";
            md.push_str(&format!(
                "- `{}` (seed {seed}){}: {} — original converged at {}, re-run at {}; RCP bounds {}; curve max relative difference {}\n",
                log.display(),
                if differences.is_empty() { String::new() } else { format!(" [forced: {}]", differences.join("; ")) },
                comparison["verdict"].as_str().unwrap_or(""),
                orig_conv.map(|x| x.to_string()).unwrap_or_else(|| "never".into()),
                comparison["rerun_converged_at"],
                comparison["rcp_bounds"],
                comparison["curve_max_relative_difference"]
            ));
            reruns.push(json!({
                "log": log.display().to_string(),
                "seed": seed,
                "forced": !differences.is_empty(),
                "differences": differences,
                "rerun_dir": rerun_dir.display().to_string(),
                "comparison": comparison,
            }));
        }
    }
    let verdict = if ok { "PASS" } else { "FAIL" };
    md.push_str(&format!("\n## Verdict\n\n**{verdict}**\n"));
    finish(
        &out,
        &md,
        json!({"dir": a.dir.display().to_string(), "verify": verify, "package_check": pkg, "reruns": reruns, "verdict": verdict}),
        ok,
    )
}

fn prov_str(log: &Path, key: &str) -> String {
    mllog::read_file(log)
        .ok()
        .and_then(|p| {
            p.records
                .iter()
                .find(|r| r.key() == key)
                .and_then(|r| r.value().as_str().map(str::to_string))
        })
        .unwrap_or_default()
}

/// Compare a re-run with its original and with the RCP bounds.
fn compare(
    bench: &dyn referee_workloads::bench::Benchmark,
    config: &Value,
    orig: &[(u64, f64)],
    orig_conv: Option<u64>,
    r: &RunResult,
) -> Value {
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
    let gbs = bench.global_batch_size(config) as f64;
    let meta = registry::meta();
    let bounds = RcpTable::from_json(
        bench.rcp_json(),
        "rcps",
        "training",
        referee_workloads::bench::RULESET,
        bench.spec().name,
        &meta,
    )
    .ok()
    .and_then(|t| {
        let rec = t
            .records
            .iter()
            .find(|x| x.bs == gbs)
            .cloned()
            .or_else(|| {
                let lo = t.records.iter().rfind(|x| x.bs < gbs)?;
                let hi = t.records.iter().find(|x| x.bs > gbs)?;
                Some(t.interpolate(gbs, lo, hi))
            })?;
        Some((rec.min_epochs, rec.mean, rec.stdev, rec.name))
    });
    let within = match (rerun_conv, &bounds) {
        (Some(c), Some((min, mean, sd, _))) => {
            Some((c as f64) >= *min && (c as f64) <= mean + 3.0 * sd)
        }
        _ => None,
    };
    let curves_agree = common > 0 && max_rel <= CURVE_TOLERANCE;
    let pass = rerun_conv.is_some() && within != Some(false) && curves_agree;
    json!({
        "verdict": if pass { "PASS" } else { "FAIL" },
        "original_converged_at": orig_conv,
        "rerun_converged_at": rerun_conv,
        "rcp_bounds": bounds.as_ref().map(|(min, mean, sd, name)| json!({"record": name, "min_acceptable": min, "mean": mean, "stdev": sd, "upper_3sd": mean + 3.0 * sd})),
        "within_rcp_bounds": within,
        "common_eval_points": common,
        "curve_max_relative_difference": max_rel,
        "curve_tolerance": CURVE_TOLERANCE,
        "original_curve": orig,
        "rerun_curve": r.evals.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
    })
}

fn finish(out: &Path, md: &str, report: Value, ok: bool) -> i32 {
    let w = |name: &str, bytes: &[u8]| crate::fsutil::write_atomic(&out.join(name), bytes);
    if let Err(e) = w("audit.md", md.as_bytes()).and_then(|_| {
        w(
            "audit.json",
            serde_json::to_string_pretty(&report)
                .expect("json")
                .as_bytes(),
        )
    }) {
        return usage_error(format!("{}: {e}", out.display()));
    }
    println!(
        "{}",
        md.lines()
            .rev()
            .find(|l| l.starts_with("**") || l.contains("FAILED"))
            .unwrap_or("")
    );
    println!(
        "audit report: {} and {}",
        out.join("audit.md").display(),
        out.join("audit.json").display()
    );
    if ok { EXIT_OK } else { EXIT_FAIL }
}
