//! `referee system`: this machine described as the MLCommons system JSON
//! (the 33 fields), every field with where its value came from —
//! discovered on the machine, read from a file (`--from`), or given
//! (`--set`) — and the fields nobody filled listed for the user, never
//! invented. The result is judged with the system-description rules of
//! the ruleset named. `referee run` writes its `system.json` with the same
//! code ([`system_description`]).

use super::probe::{Accelerator, HostFacts, IoFacts, probe_nvidia_smi};
use referee_rules::diag::Diagnostic;
use referee_rules::escape::{markdown, term};
use referee_rules::report::{Detail, Report, pass_fail, write_diagnostic};
use referee_rules::ruleset_facts::SYSTEM_REQUIRED_FIELDS;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where a field's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Read off this machine.
    Discovered,
    /// From the `--from` file.
    File,
    /// Given by the caller (`--set`, or `referee run`'s identity).
    Given,
    /// Nobody knows it: the value is empty, for the user to fill.
    Missing,
}

/// A system description under construction: the 33 fields in the
/// official order (then any extra field a file brought), each with its source.
#[derive(Debug, Clone)]
pub struct Description {
    fields: Vec<(String, Value, Source)>,
}

impl Description {
    /// The 33 fields, filled from `discovered` where it has them.
    pub fn new(discovered: &[(&'static str, String)]) -> Self {
        let fields = SYSTEM_REQUIRED_FIELDS
            .iter()
            .map(|f| match discovered.iter().find(|(k, _)| k == f) {
                Some((_, v)) => (f.to_string(), Value::String(v.clone()), Source::Discovered),
                None => (f.to_string(), Value::String(String::new()), Source::Missing),
            })
            .collect();
        Description { fields }
    }

    /// Set one field (an unknown name is appended after the 33).
    pub fn set(&mut self, field: &str, value: impl Into<Value>, source: Source) {
        let value = value.into();
        match self.fields.iter_mut().find(|(k, _, _)| k == field) {
            Some(slot) => {
                slot.1 = value;
                slot.2 = source;
            }
            None => self.fields.push((field.to_string(), value, source)),
        }
    }

    /// The JSON object, fields in order.
    pub fn json(&self) -> Map<String, Value> {
        self.fields
            .iter()
            .map(|(k, v, _)| (k.clone(), v.clone()))
            .collect()
    }

    /// Fields nobody filled.
    pub fn missing(&self) -> Vec<String> {
        self.fields
            .iter()
            .filter(|(_, _, s)| *s == Source::Missing)
            .map(|(k, _, _)| k.clone())
            .collect()
    }
}

/// What `referee system` is asked for.
#[derive(Debug, Clone, Default)]
pub struct SystemRequest {
    /// An existing description whose values override what is discovered.
    pub from: Option<PathBuf>,
    /// `field=value` settings, applied last.
    pub sets: Vec<String>,
    /// The ruleset whose system-description rules judge the result.
    pub ruleset: String,
    /// `/sys` (tests point it elsewhere).
    pub sys_root: PathBuf,
}

/// The description, where each value came from, and its check.
#[derive(Debug, Clone, Serialize)]
pub struct SystemReport {
    /// The 33-field system JSON.
    pub system: Map<String, Value>,
    pub sources: BTreeMap<String, Source>,
    /// Fields left empty: give them with `--set field=value`.
    pub to_fill: Vec<String>,
    /// Notes on what discovery saw (several GPU models, nvidia-smi errors).
    pub notes: Vec<String>,
    pub ruleset: String,
    /// `PASS` or `FAIL`: the ruleset's system-description check.
    pub verdict: &'static str,
    pub diagnostics: Vec<Diagnostic>,
}

impl SystemReport {
    pub fn passed(&self) -> bool {
        self.verdict == "PASS"
    }
}

/// Read a `--from` file: a JSON object of fields.
fn read_from(path: &Path) -> Result<Map<String, Value>, DescribeError> {
    let text = std::fs::read_to_string(path).map_err(|e| DescribeError::Read {
        path: path.to_path_buf(),
        source: e,
    })?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(DescribeError::NotAnObject {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(DescribeError::Json {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            source: e,
        }),
    }
}

/// Why this machine cannot be described as asked.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    #[error("--from {}: {source}", .path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("--from {}: expected a JSON object of system-description fields", .path.display())]
    NotAnObject { path: std::path::PathBuf },
    #[error("--from {}:{line}:{column}: invalid JSON: {source}", .path.display())]
    Json {
        path: std::path::PathBuf,
        line: usize,
        column: usize,
        source: serde_json::Error,
    },
    #[error("--set {given}: expected FIELD=VALUE")]
    SetSyntax { given: String },
    #[error(
        "--set {given}: `{field}` is not a system-description field; the fields are: {}",
        SYSTEM_REQUIRED_FIELDS.join(", ")
    )]
    UnknownField { given: String, field: String },
}

/// Parse `field=value`; the field must be one of the 33 (a typo would
/// otherwise add a field nobody reads).
fn parse_set(s: &str) -> Result<(String, String), DescribeError> {
    let (k, v) = s.split_once('=').ok_or_else(|| DescribeError::SetSyntax {
        given: s.to_string(),
    })?;
    let k = k.trim();
    if !SYSTEM_REQUIRED_FIELDS.contains(&k) {
        return Err(DescribeError::UnknownField {
            given: s.to_string(),
            field: k.to_string(),
        });
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// The accelerator of this node as `nvidia-smi` sees it, with notes.
fn node_accelerator(notes: &mut Vec<String>) -> Option<Accelerator> {
    let gpus = match probe_nvidia_smi() {
        Ok(g) => g,
        Err(e) => {
            notes.push(e.to_string());
            return None;
        }
    };
    if gpus.len() > 1 {
        notes.push(format!(
            "several GPU models on this node ({}); described by the first",
            gpus.iter()
                .map(|g| format!("{} × {}", g.count, g.name))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    gpus.into_iter().next()
}

/// Describe this machine: discovered facts, then `--from`, then `--set`;
/// then the ruleset's system-description check.
pub fn describe(req: &SystemRequest) -> Result<SystemReport, DescribeError> {
    let sets = req
        .sets
        .iter()
        .map(|s| parse_set(s))
        .collect::<Result<Vec<_>, _>>()?;
    let from = req.from.as_deref().map(read_from).transpose()?;
    let mut notes = Vec::new();
    let accel = node_accelerator(&mut notes);
    let io = IoFacts::probe(&req.sys_root);
    let mut d = Description::new(&discovered_fields(&HostFacts::probe(), &io, accel.as_ref()));
    d.set("number_of_nodes", "1", Source::Discovered);
    for (k, v) in from.into_iter().flatten() {
        d.set(&k, v, Source::File);
    }
    for (k, v) in sets {
        d.set(&k, v, Source::Given);
    }
    let system = d.json();
    let diagnostics = check(&system, &req.ruleset);
    Ok(SystemReport {
        sources: d.fields.iter().map(|(k, _, s)| (k.clone(), *s)).collect(),
        to_fill: d.missing(),
        notes,
        ruleset: req.ruleset.clone(),
        verdict: pass_fail(diagnostics.iter().all(|x| !x.is_error())),
        diagnostics,
        system,
    })
}

/// The ruleset's system-description check of `system`.
fn check(system: &Map<String, Value>, ruleset: &str) -> Vec<Diagnostic> {
    let name = system
        .get("system_name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("system");
    let desc = referee_rules::sysdesc::SystemDesc {
        id: name.to_string(),
        json: system.clone(),
    };
    let facts = crate::own_benchmarks::ruleset_facts();
    referee_rules::sysdesc::check(
        &desc,
        Path::new(&format!("{name}.json")),
        facts.status_rule_applies("training", ruleset),
    )
}

impl Report for SystemReport {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        // The keys and values can be a given file's (--from).
        let width = self.system.keys().map(|k| term(k).len()).max().unwrap_or(0);
        for (k, v) in &self.system {
            let key = term(k);
            let shown = match v {
                Value::String(s) => term(s).into_owned(),
                other => term(&other.to_string()).into_owned(),
            };
            let source = self.sources.get(k).copied().unwrap_or(Source::Given);
            let tag = match source {
                Source::Discovered => "discovered",
                Source::File => "from file",
                Source::Given => "given",
                Source::Missing => "TO FILL",
            };
            writeln!(out, "{key:width$}  {shown}  [{tag}]")?;
        }
        for n in &self.notes {
            writeln!(out, "note: {}", term(n))?;
        }
        if !self.to_fill.is_empty() {
            writeln!(
                out,
                "{} field(s) could not be discovered; give them with --set FIELD=VALUE: {}",
                self.to_fill.len(),
                term(&self.to_fill.join(", "))
            )?;
        }
        for d in &self.diagnostics {
            write_diagnostic(out, d, "")?;
        }
        writeln!(
            out,
            "{}: system-description check of training {}",
            self.verdict,
            term(&self.ruleset)
        )
    }

    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(
            out,
            "# System description\n\n{}: system-description check of training {}.\n",
            self.verdict,
            markdown(&self.ruleset)
        )?;
        writeln!(out, "| field | value | source |\n| --- | --- | --- |")?;
        for (k, v) in &self.system {
            let shown = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let source =
                serde_json::to_value(self.sources.get(k).copied().unwrap_or(Source::Given))
                    .ok()
                    .and_then(|s| s.as_str().map(str::to_string))
                    .unwrap_or_default();
            writeln!(out, "| {} | {} | {source} |", markdown(k), markdown(&shown))?;
        }
        Ok(())
    }

    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

/// Who and what a system description is about (besides the probed facts).
#[derive(Debug, Clone, Copy)]
pub struct SystemIdentity<'a> {
    pub submitter: &'a str,
    pub division: &'a str,
    /// One of the four MLCommons availability values.
    pub status: &'a str,
    pub system_name: &'a str,
    pub framework: &'a str,
    pub nodes: usize,
}

/// The facts this machine tells about itself, as system-description
/// fields. A field that cannot be discovered is absent, never guessed.
pub fn discovered_fields(
    host: &HostFacts,
    io: &IoFacts,
    accel: Option<&Accelerator>,
) -> Vec<(&'static str, String)> {
    let mut f: Vec<(&'static str, String)> = vec![
        ("host_processors_per_node", host.sockets.to_string()),
        ("host_processor_model_name", host.cpu_model.clone()),
        (
            "host_processor_core_count",
            host.cores_per_socket.to_string(),
        ),
        ("host_processor_vcpu_count", host.logical_cpus.to_string()),
        (
            "host_memory_capacity",
            format!("{:.1} GiB", host.memory_gib),
        ),
        ("operating_system", host.os.clone()),
        ("other_software_stack", format!("Linux {}", host.kernel)),
        (
            "accelerators_per_node",
            accel.map(|a| a.count).unwrap_or(0).to_string(),
        ),
        (
            "accelerator_model_name",
            accel
                .map(|a| a.name.clone())
                .unwrap_or_else(|| "none (CPU)".into()),
        ),
    ];
    if let Some(mhz) = host.cpu_mhz {
        f.push(("host_processor_frequency", format!("{mhz:.0} MHz")));
    }
    if !host.cache.is_empty() {
        f.push(("host_processor_caches", host.cache.clone()));
    }
    if let Some(a) = accel {
        f.push((
            "accelerator_memory_capacity",
            format!("{:.0} GiB", a.memory_gib),
        ));
        if let Some(mhz) = a.max_mhz {
            f.push(("accelerator_frequency", format!("{mhz:.0} MHz")));
        }
    }
    let mut nets: Vec<String> = io
        .infiniband
        .iter()
        .map(|(d, r)| format!("InfiniBand {r} ({d})"))
        .collect();
    nets.extend(
        io.ethernet
            .iter()
            .map(|(n, s)| format!("Ethernet {} Gb/s ({n})", *s as f64 / 1000.0)),
    );
    if !nets.is_empty() {
        f.push(("host_networking", nets.join(", ")));
    }
    if !io.disks.is_empty() {
        let total: u64 = io.disks.iter().map(|d| d.1).sum();
        f.push((
            "host_storage_capacity",
            format!("{:.0} GB", total as f64 / 1e9),
        ));
        let kinds: std::collections::BTreeSet<&str> = io
            .disks
            .iter()
            .map(|(n, _, rot)| match (n.starts_with("nvme"), rot) {
                (true, _) => "NVMe SSD",
                (false, true) => "HDD",
                (false, false) => "SSD",
            })
            .collect();
        f.push((
            "host_storage_type",
            kinds.into_iter().collect::<Vec<_>>().join(", "),
        ));
    }
    f
}

/// The 33-field system description JSON of a `referee run`: the identity
/// given, the facts discovered, every other field empty.
pub fn system_description(
    id: &SystemIdentity,
    host: &HostFacts,
    accel: Option<&Accelerator>,
) -> Value {
    let io = IoFacts::probe(std::path::Path::new("/sys"));
    let mut d = Description::new(&discovered_fields(host, &io, accel));
    for (k, v) in [
        ("submitter", id.submitter.to_string()),
        ("division", id.division.to_string()),
        ("status", id.status.to_string()),
        ("system_name", id.system_name.to_string()),
        ("number_of_nodes", id.nodes.to_string()),
        ("framework", id.framework.to_string()),
        ("sw_notes", "captured automatically by referee".to_string()),
    ] {
        d.set(k, v, Source::Given);
    }
    Value::Object(d.json())
}

#[cfg(test)]
mod tests {
    use super::super::probe::parse_nvidia_smi;
    use super::*;

    fn request(sets: &[&str]) -> SystemRequest {
        SystemRequest {
            from: None,
            sets: sets.iter().map(|s| s.to_string()).collect(),
            ruleset: "5.0.0".into(),
            sys_root: PathBuf::from("/nonexistent-sys"),
        }
    }

    const IDENTITY: [&str; 5] = [
        "submitter=ACME",
        "division=closed",
        "status=Available on-premise",
        "system_name=box",
        "framework=PyTorch 2.5",
    ];

    #[test]
    fn undiscoverable_fields_are_listed_not_invented() {
        let r = describe(&request(&[])).unwrap();
        assert_eq!(r.system.len(), 33);
        let keys: Vec<&str> = r.system.keys().map(String::as_str).collect();
        assert_eq!(keys, SYSTEM_REQUIRED_FIELDS.to_vec());
        for f in [
            "submitter",
            "division",
            "status",
            "system_name",
            "framework",
            "cooling",
        ] {
            assert!(r.to_fill.contains(&f.to_string()), "{f} not listed");
            assert_eq!(r.system[f], "", "{f} invented");
            assert_eq!(r.sources[f], Source::Missing);
        }
        assert_eq!(r.sources["host_processor_model_name"], Source::Discovered);
        // No /sys: nothing about networks or disks is claimed.
        assert_eq!(r.sources["host_networking"], Source::Missing);
        // An empty status is not one of the allowed values.
        assert!(!r.passed());
        assert!(
            r.diagnostics
                .iter()
                .any(|d| d.key.as_deref() == Some("status"))
        );
    }

    #[test]
    fn given_fields_make_it_pass_and_a_file_is_overridden_by_set() {
        let r = describe(&request(&IDENTITY)).unwrap();
        assert!(r.passed(), "{:?}", r.diagnostics);
        assert_eq!(r.sources["status"], Source::Given);
        assert!(!r.to_fill.contains(&"framework".to_string()));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("old.json");
        std::fs::write(&f, r#"{"cooling": "liquid", "framework": "JAX 0.4"}"#).unwrap();
        let mut req = request(&IDENTITY);
        req.from = Some(f.clone());
        let r = describe(&req).unwrap();
        assert_eq!(
            (r.system["cooling"].as_str(), r.sources["cooling"]),
            (Some("liquid"), Source::File)
        );
        assert_eq!(r.system["framework"], "PyTorch 2.5");
        std::fs::write(&f, "[1, 2]").unwrap();
        let e = describe(&req).unwrap_err().to_string();
        assert!(e.contains("old.json") && e.contains("JSON object"), "{e}");
        std::fs::write(&f, "{\n  \"cooling\": \n").unwrap();
        let e = describe(&req).unwrap_err().to_string();
        assert!(e.contains("old.json:3:"), "{e}");
    }

    #[test]
    fn unknown_fields_and_malformed_settings_are_refused() {
        let e = describe(&request(&["colling=air"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`colling` is not a system-description field"),
            "{e}"
        );
        let e = describe(&request(&["cooling"])).unwrap_err().to_string();
        assert!(e.contains("FIELD=VALUE"), "{e}");
    }

    #[test]
    fn sys_tree_gives_networks_and_disks() {
        let root = tempfile::tempdir().unwrap();
        let w = |p: &str, text: &str| {
            let p = root.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(
            "class/infiniband/mlx5_0/ports/1/rate",
            "400 Gb/sec (4X NDR)\n",
        );
        w("class/net/eth0/speed", "25000\n");
        w("class/net/eth0/device/vendor", "0x15b3\n");
        w("class/net/lo/speed", "-1\n");
        w("block/nvme0n1/size", "7501476528\n");
        w("block/nvme0n1/queue/rotational", "0\n");
        w("block/loop0/size", "100\n");
        let io = IoFacts::probe(root.path());
        assert_eq!(io.ethernet, vec![("eth0".to_string(), 25_000)]);
        assert_eq!(io.disks.len(), 1);
        let host = HostFacts::default();
        let f = discovered_fields(&host, &io, None);
        let get = |k: &str| f.iter().find(|(x, _)| *x == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("host_networking").unwrap(),
            "InfiniBand 400 Gb/sec (4X NDR) (mlx5_0), Ethernet 25 Gb/s (eth0)"
        );
        assert_eq!(get("host_storage_type").unwrap(), "NVMe SSD");
        assert_eq!(get("host_storage_capacity").unwrap(), "3841 GB");
    }

    #[test]
    fn nvidia_smi_lines_become_accelerators() {
        let g = parse_nvidia_smi(
            "NVIDIA H100 80GB HBM3, 81559, 1980\nNVIDIA H100 80GB HBM3, 81559, 1980\n",
        )
        .unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!(
            (g[0].count, g[0].memory_gib.round(), g[0].max_mhz),
            (2, 80.0, Some(1980.0))
        );
        let e = parse_nvidia_smi("NVIDIA H100, lots, 1980\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("MiB"), "{e}");
        assert!(
            parse_nvidia_smi("just a name\n")
                .unwrap_err()
                .to_string()
                .contains("expected")
        );
    }

    #[test]
    fn description_has_the_33_fields_and_passes_the_checker() {
        let host = HostFacts::probe();
        let id = SystemIdentity {
            submitter: "ACME",
            division: "closed",
            status: "Research, Development, or Internal (RDI)",
            system_name: "box",
            framework: "referee",
            nodes: 1,
        };
        let v = system_description(&id, &host, None);
        let obj = v.as_object().unwrap();
        for f in referee_rules::ruleset_facts::SYSTEM_REQUIRED_FIELDS {
            assert!(obj.contains_key(f), "missing {f}");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("box.json");
        std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        let desc = referee_rules::sysdesc::SystemDesc::load(&p).unwrap();
        assert!(referee_rules::sysdesc::check(&desc, &p, true).is_empty());
        assert!(!host.cpu_model.is_empty() && host.logical_cpus >= 1 && host.memory_gib > 0.0);
    }
}
