//! `referee run` outputs → an MLCommons submission folder, checked right
//! after it is built with referee's own ruleset.

use crate::plan::Division;
use referee_rules::package::{PackageOptions, PackageReport, check_package};
use referee_rules::report::{Detail, Report};
use referee_submission::package::{PackageSpec, PackageSummary, RunDir, package};
use serde::Serialize;
use std::io::{self, Write};
use std::path::PathBuf;

/// What to package, as asked for.
#[derive(Debug, Clone)]
pub struct PackagingRequest {
    /// Output directories of `referee run`.
    pub runs: Vec<PathBuf>,
    /// Where the submission folder ORG/ is created.
    pub out: PathBuf,
    /// Submitting organisation (default: the runs' `org`).
    pub org: Option<String>,
    /// System name (default: the runs' `system`).
    pub system: Option<String>,
    /// The division every run must have been made in.
    pub division: Option<Division>,
}

/// The folder built and its check.
#[derive(Debug, Clone, Serialize)]
pub struct PackagingReport {
    pub package: PackageSummary,
    pub check: PackageReport,
}

impl PackagingReport {
    pub fn passed(&self) -> bool {
        self.check.verdict == referee_rules::Verdict::Pass
    }

    fn packaged_line(&self) -> String {
        format!(
            "packaged {} ({})",
            self.package.path.display(),
            self.package
                .benchmarks
                .iter()
                .map(|(b, n)| format!("{b}: {n} runs"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl Report for PackagingReport {
    fn write_human(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(out, "{}", self.packaged_line())?;
        self.check.write_human(out, detail)
    }
    fn write_markdown(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(out, "# Package\n\n{}\n", self.packaged_line())?;
        self.check.write_markdown(out, detail)
    }
}

/// Open the run directories, check their division, build the folder
/// (atomically) and check it. `Err`: nothing was built, with why.
pub fn package_runs(req: &PackagingRequest) -> Result<PackagingReport, String> {
    let runs = req
        .runs
        .iter()
        .map(|p| RunDir::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(d) = req.division {
        let want = d.as_str();
        if let Some(r) = runs.iter().find(|r| r.division() != want) {
            return Err(format!(
                "{} was run in the {} division, not {want}",
                r.path.display(),
                r.division()
            ));
        }
    }
    let recorded = |key: &str| runs[0].record[key].as_str().unwrap_or("").to_string();
    let facts = crate::own_benchmarks::meta();
    let required = crate::own_benchmarks::benchmark_names()
        .into_iter()
        .filter_map(|b| {
            facts
                .benchmark("training", b)
                .map(|m| (b.to_string(), m.result_files))
        })
        .collect();
    let spec = PackageSpec {
        org: req.org.clone().unwrap_or_else(|| recorded("org")),
        system: req.system.clone().unwrap_or_else(|| recorded("system")),
        required_runs: required,
        implementation: format!("referee-{}", crate::provenance::VERSION),
    };
    let summary = package(&runs, &spec, &req.out)?;
    let scoring = crate::own_benchmarks::own_score_context();
    let check = check_package(&scoring, &summary.path, PackageOptions::default(), &|| {});
    Ok(PackagingReport {
        package: summary,
        check,
    })
}
