//! The sources of a node's power reading, each giving watts now.

use super::PowerError;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Where a node's power comes from (`--power`, `--source`).
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// GPU board power of every GPU, summed (`nvidia-smi --query-gpu=power.draw`; DC).
    Nvml,
    /// RAPL energy counters under `/sys/class/powercap` (every package and
    /// its DRAM domain), as watts between two readings; counter wrap
    /// handled (DC). `REFEREE_POWERCAP_ROOT` overrides the folder.
    Rapl,
    /// `ipmitool dcmi power reading` (the BMC's input power: AC).
    Ipmi,
    /// A Redfish Power resource (`PowerControl[0].PowerConsumedWatts`;
    /// AC). `REDFISH_USER`/`REDFISH_PASSWORD` for basic authentication.
    Redfish(String),
    /// Any command that prints the node's watts on its first line (`sh -c`).
    Cmd(String),
}

impl std::str::FromStr for Source {
    type Err = PowerError;
    fn from_str(s: &str) -> Result<Self, PowerError> {
        Ok(match s {
            "nvml" => Source::Nvml,
            "rapl" => Source::Rapl,
            "ipmi" => Source::Ipmi,
            _ => match s.split_once(':') {
                Some(("redfish", url)) if !url.is_empty() => Source::Redfish(url.to_string()),
                Some(("cmd", c)) if !c.is_empty() => Source::Cmd(c.to_string()),
                _ => return Err(PowerError::UnknownSource(s.to_string())),
            },
        })
    }
}

impl Source {
    /// The source as given on the command line.
    pub fn name(&self) -> String {
        match self {
            Source::Nvml => "nvml".into(),
            Source::Rapl => "rapl".into(),
            Source::Ipmi => "ipmi".into(),
            Source::Redfish(u) => format!("redfish:{u}"),
            Source::Cmd(c) => format!("cmd:{c}"),
        }
    }

    /// `AC` for wall (PSU input) power, `DC` for component power.
    pub fn measurement_type(&self) -> &'static str {
        match self {
            Source::Ipmi | Source::Redfish(_) | Source::Cmd(_) => "AC",
            Source::Nvml | Source::Rapl => "DC",
        }
    }

    /// A reader of this source (RAPL keeps its last counters).
    pub fn reader(&self) -> Reader {
        Reader {
            source: self.clone(),
            rapl_root: std::env::var_os("REFEREE_POWERCAP_ROOT")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/sys/class/powercap")),
            rapl: None,
        }
    }
}

/// RAPL counters read: (energy file, µJ, max_energy_range_uj) each.
type Counters = Vec<(PathBuf, u64, u64)>;

/// Reads one source repeatedly.
pub struct Reader {
    source: Source,
    rapl_root: PathBuf,
    rapl: Option<(Instant, Counters)>,
}

impl Reader {
    /// Watts now. RAPL's first call reads the counters and gives no
    /// reading (`Ok(None)`): watts need two.
    pub fn read(&mut self) -> Result<Option<f64>, PowerError> {
        let name = self.source.name();
        let fail = |message: String| PowerError::Reading {
            source_name: name.clone(),
            message,
        };
        match &self.source {
            Source::Nvml => {
                let out = run(Command::new("nvidia-smi")
                    .args(["--query-gpu=power.draw", "--format=csv,noheader,nounits"]))
                .map_err(fail)?;
                let mut total = 0.0;
                let mut n = 0;
                for l in out.lines().filter(|l| !l.trim().is_empty()) {
                    total += l.trim().parse::<f64>().map_err(|_| {
                        fail(format!("nvidia-smi printed `{}`, expected watts", l.trim()))
                    })?;
                    n += 1;
                }
                if n == 0 {
                    return Err(fail("nvidia-smi listed no GPU".into()));
                }
                Ok(Some(total))
            }
            Source::Ipmi => {
                let out = run(Command::new("ipmitool").args(["dcmi", "power", "reading"]))
                    .map_err(fail)?;
                parse_ipmi(&out).map(Some).ok_or_else(|| {
                    fail(format!(
                        "no `Instantaneous power reading: N Watts` line in: {}",
                        out.trim()
                    ))
                })
            }
            Source::Cmd(c) => {
                let out = run(Command::new("sh").args(["-c", c])).map_err(fail)?;
                let first = out.lines().next().unwrap_or("").trim().to_string();
                first
                    .split_whitespace()
                    .next()
                    .and_then(|w| w.parse::<f64>().ok())
                    .map(Some)
                    .ok_or_else(|| fail(format!("first line `{first}`, expected watts")))
            }
            Source::Redfish(url) => redfish(url).map(Some).map_err(fail),
            Source::Rapl => {
                let now = Instant::now();
                let counters = rapl_counters(&self.rapl_root).map_err(fail)?;
                let watts = self.rapl.as_ref().map(|(then, prev)| {
                    let dt = now.duration_since(*then).as_secs_f64().max(1e-6);
                    let uj: u64 = counters
                        .iter()
                        .map(|(p, e, range)| {
                            let before = prev
                                .iter()
                                .find(|(q, ..)| q == p)
                                .map(|x| x.1)
                                .unwrap_or(*e);
                            if *e >= before {
                                e - before
                            } else {
                                // The counter wrapped at max_energy_range_uj.
                                range - before + e
                            }
                        })
                        .sum();
                    uj as f64 / 1e6 / dt
                });
                self.rapl = Some((now, counters));
                Ok(watts)
            }
        }
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let prog = cmd.get_program().to_string_lossy().to_string();
    let o = cmd
        .output()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{prog} exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `Instantaneous power reading:   285 Watts` → 285.
pub fn parse_ipmi(out: &str) -> Option<f64> {
    out.lines()
        .find(|l| l.trim_start().starts_with("Instantaneous power reading"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Every package domain (`intel-rapl:N`) and its `dram` subdomain: (energy
/// file, µJ now, max_energy_range_uj). Nested domains other than DRAM
/// (core, uncore) are inside the package's count and left out.
fn rapl_counters(root: &Path) -> Result<Counters, String> {
    let read = |p: &Path| -> Result<u64, String> {
        std::fs::read_to_string(p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .trim()
            .parse()
            .map_err(|_| format!("{}: not a counter", p.display()))
    };
    let mut out = Vec::new();
    let rd = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for d in dirs {
        let n = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let Some(rest) = n.strip_prefix("intel-rapl:") else {
            continue;
        };
        let nested = rest.contains(':');
        let name = std::fs::read_to_string(d.join("name")).unwrap_or_default();
        if nested && name.trim() != "dram" {
            continue;
        }
        let e = read(&d.join("energy_uj"))?;
        let range = read(&d.join("max_energy_range_uj")).unwrap_or(u64::MAX);
        out.push((d.join("energy_uj"), e, range));
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no intel-rapl:N domain (is RAPL exposed, and readable?)",
            root.display()
        ));
    }
    Ok(out)
}

fn redfish(url: &str) -> Result<f64, String> {
    let credentials = std::env::var("REDFISH_USER").is_ok();
    let body = if url.starts_with("https://") || credentials {
        // No TLS stack is built in (docs/dependencies.md): curl does HTTPS
        // and authentication.
        let mut c = Command::new("curl");
        c.args(["--silent", "--show-error", "--fail", "--max-time", "5"]);
        if std::env::var_os("REDFISH_INSECURE").is_some() {
            c.arg("--insecure");
        }
        if let (Ok(u), Ok(p)) = (
            std::env::var("REDFISH_USER"),
            std::env::var("REDFISH_PASSWORD"),
        ) {
            c.args(["--user", &format!("{u}:{p}")]);
        }
        run(c.arg(url))?
    } else {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(5)))
            .build()
            .into();
        let mut resp = agent
            .get(url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        resp.body_mut()
            .read_to_string()
            .map_err(|e| format!("GET {url}: {e}"))?
    };
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("{url}: not JSON: {e}"))?;
    v.pointer("/PowerControl/0/PowerConsumedWatts")
        .and_then(|w| w.as_f64())
        .ok_or_else(|| format!("{url}: no PowerControl[0].PowerConsumedWatts"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_from_their_names() {
        assert_eq!("nvml".parse::<Source>().unwrap(), Source::Nvml);
        assert_eq!(
            "redfish:http://bmc/redfish/v1/Chassis/1/Power"
                .parse::<Source>()
                .unwrap(),
            Source::Redfish("http://bmc/redfish/v1/Chassis/1/Power".into())
        );
        assert_eq!(
            "cmd:echo 5".parse::<Source>().unwrap(),
            Source::Cmd("echo 5".into())
        );
        assert!("cmd:".parse::<Source>().is_err());
        assert!("gpu".parse::<Source>().is_err());
    }

    #[test]
    fn ipmi_output_is_read_as_its_instantaneous_reading() {
        let out = "\n    Instantaneous power reading:                   285 Watts\n    Minimum during sampling period:                 84 Watts\n";
        assert_eq!(parse_ipmi(out), Some(285.0));
        assert_eq!(parse_ipmi("Power reading not available"), None);
    }

    #[test]
    fn rapl_gives_watts_between_two_readings_across_a_counter_wrap() {
        let t = tempfile::tempdir().unwrap();
        let pkg = t.path().join("intel-rapl:0");
        let dram = t.path().join("intel-rapl:0:0");
        let core = t.path().join("intel-rapl:0:1");
        for (d, name) in [(&pkg, "package-0"), (&dram, "dram"), (&core, "core")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("name"), name).unwrap();
            std::fs::write(d.join("max_energy_range_uj"), "1000000000").unwrap();
        }
        std::fs::write(pkg.join("energy_uj"), "999000000").unwrap();
        std::fs::write(dram.join("energy_uj"), "5000000").unwrap();
        std::fs::write(core.join("energy_uj"), "1").unwrap();
        let c = rapl_counters(t.path()).unwrap();
        assert_eq!(c.len(), 2, "the core domain is inside the package's count");
        // 2 J on the package across the wrap, 1 J on DRAM.
        let mut r = Reader {
            source: Source::Rapl,
            rapl_root: t.path().to_path_buf(),
            rapl: Some((Instant::now() - std::time::Duration::from_secs(1), c)),
        };
        std::fs::write(pkg.join("energy_uj"), "1000000").unwrap();
        std::fs::write(dram.join("energy_uj"), "6000000").unwrap();
        let w = r.read().unwrap().unwrap();
        assert!((2.9..3.01).contains(&w), "{w}");
    }
}
