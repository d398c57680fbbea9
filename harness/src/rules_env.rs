//! Locating the official rules (rule files and RCP tables) for commands
//! that need them, with one error message when they cannot be found.

use referee_rules::ruleset::{
    MlperfLogging, RuleLibrary, discover_mlperf_logging, package_from_dir,
};
use std::path::{Path, PathBuf};

/// The official rule files, resolved from `--rules-dir` or discovery.
#[derive(Debug, Clone)]
pub struct OfficialRules {
    /// The `compliance_checker` directory (holds `training_X.Y.Z/`).
    pub compliance_dir: PathBuf,
    /// The `rcp_checker` directory when known.
    pub rcp_dir: Option<PathBuf>,
    /// Human description ("mlperf-logging 4.1.68 at …").
    pub origin: String,
}

impl OfficialRules {
    /// Resolve: an explicit directory wins; otherwise find the installed
    /// Python package.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, String> {
        let pkg: MlperfLogging = match explicit {
            Some(dir) => {
                if !dir.is_dir() {
                    return Err(format!("--rules-dir {}: no such directory", dir.display()));
                }
                match package_from_dir(dir) {
                    Some(p) => p,
                    None => {
                        // A bare directory of `<usage>_<X.Y.Z>/` folders.
                        let has_rulesets = std::fs::read_dir(dir)
                            .map(|rd| rd.flatten().any(|e| e.path().join("common.yaml").is_file()))
                            .unwrap_or(false);
                        if !has_rulesets {
                            return Err(format!(
                                "--rules-dir {}: expected the mlperf_logging package directory, its \
                                 compliance_checker directory, or a directory of <usage>_<X.Y.Z>/ rule folders",
                                dir.display()
                            ));
                        }
                        return Ok(OfficialRules {
                            compliance_dir: dir.to_path_buf(),
                            rcp_dir: None,
                            origin: format!("rule files in {}", dir.display()),
                        });
                    }
                }
            }
            None => discover_mlperf_logging().map_err(|e| e.to_string())?,
        };
        let origin = match &pkg.version {
            Some(v) => format!("mlperf-logging {v}"),
            None => format!("mlperf-logging at {}", pkg.dir.display()),
        };
        Ok(OfficialRules {
            compliance_dir: pkg.compliance_dir(),
            rcp_dir: Some(pkg.rcp_dir()),
            origin,
        })
    }

    pub fn library(&self) -> RuleLibrary {
        RuleLibrary::from_dir(&self.compliance_dir)
    }
}
