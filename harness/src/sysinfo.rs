//! The system description (the 33 MLCommons fields), captured from the
//! machine: CPU model, sockets, cores, memory, OS, software versions, and
//! accelerators when a GPU back end is compiled in and a driver is present
//! (no driver is a normal, quiet case).

use serde_json::{Map, Value, json};

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Facts read from /proc and /etc.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    pub cpu_model: String,
    pub sockets: usize,
    pub cores_per_socket: usize,
    pub logical_cpus: usize,
    pub cpu_mhz: Option<f64>,
    pub cache: String,
    pub memory_gib: f64,
    pub os: String,
    pub kernel: String,
    pub hostname: String,
}

/// Parse `/proc/cpuinfo` text.
pub fn parse_cpuinfo(text: &str) -> (String, usize, usize, usize, Option<f64>, String) {
    let mut model = String::new();
    let mut physical = std::collections::BTreeSet::new();
    let mut cores = 0usize;
    let mut logical = 0usize;
    let mut mhz = None;
    let mut cache = String::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "processor" => logical += 1,
            "model name" if model.is_empty() => model = v.to_string(),
            "physical id" => {
                physical.insert(v.to_string());
            }
            "cpu cores" if cores == 0 => cores = v.parse().unwrap_or(0),
            "cpu MHz" if mhz.is_none() => mhz = v.parse().ok(),
            "cache size" if cache.is_empty() => cache = v.to_string(),
            _ => {}
        }
    }
    let sockets = physical.len().max(1);
    (model, sockets, cores.max(1), logical.max(1), mhz, cache)
}

/// `MemTotal` of `/proc/meminfo` in GiB.
pub fn parse_meminfo_gib(text: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(0.0)
}

/// `PRETTY_NAME` of `/etc/os-release`.
pub fn parse_os_release(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into())
}

impl HostFacts {
    pub fn probe() -> Self {
        let (cpu_model, sockets, cores_per_socket, logical_cpus, cpu_mhz, cache) =
            parse_cpuinfo(&read("/proc/cpuinfo"));
        HostFacts {
            cpu_model: if cpu_model.is_empty() {
                std::env::consts::ARCH.to_string()
            } else {
                cpu_model
            },
            sockets,
            cores_per_socket,
            logical_cpus: logical_cpus.max(
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
            ),
            cpu_mhz,
            cache,
            memory_gib: parse_meminfo_gib(&read("/proc/meminfo")),
            os: parse_os_release(&read("/etc/os-release")),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
        }
    }
}

/// An accelerator as the system description needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Accelerator {
    pub name: String,
    pub memory_gib: f64,
    pub count: usize,
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

/// The 33-field system description JSON.
pub fn system_description(
    id: &SystemIdentity,
    host: &HostFacts,
    accel: Option<&Accelerator>,
) -> Value {
    let SystemIdentity {
        submitter,
        division,
        status,
        system_name,
        framework,
        nodes,
    } = *id;
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("submitter", json!(submitter));
    put("division", json!(division));
    put("status", json!(status));
    put("system_name", json!(system_name));
    put("number_of_nodes", json!(nodes.to_string()));
    put("host_processors_per_node", json!(host.sockets.to_string()));
    put("host_processor_model_name", json!(host.cpu_model));
    put(
        "host_processor_core_count",
        json!(host.cores_per_socket.to_string()),
    );
    put(
        "host_processor_vcpu_count",
        json!(host.logical_cpus.to_string()),
    );
    put(
        "host_processor_frequency",
        json!(
            host.cpu_mhz
                .map(|f| format!("{f:.0} MHz"))
                .unwrap_or_default()
        ),
    );
    put("host_processor_caches", json!(host.cache));
    put("host_processor_interconnect", json!(""));
    put(
        "host_memory_capacity",
        json!(format!("{:.1} GiB", host.memory_gib)),
    );
    put("host_storage_type", json!(""));
    put("host_storage_capacity", json!(""));
    put("host_networking", json!(""));
    put("host_networking_topology", json!(""));
    put("host_memory_configuration", json!(""));
    put(
        "accelerators_per_node",
        json!(accel.map(|a| a.count).unwrap_or(0).to_string()),
    );
    put(
        "accelerator_model_name",
        json!(
            accel
                .map(|a| a.name.clone())
                .unwrap_or_else(|| "none (CPU)".into())
        ),
    );
    put("accelerator_host_interconnect", json!(""));
    put("accelerator_frequency", json!(""));
    put("accelerator_on-chip_memories", json!(""));
    put("accelerator_memory_configuration", json!(""));
    put(
        "accelerator_memory_capacity",
        json!(
            accel
                .map(|a| format!("{:.0} GiB", a.memory_gib))
                .unwrap_or_default()
        ),
    );
    put("accelerator_interconnect", json!(""));
    put("accelerator_interconnect_topology", json!(""));
    put("cooling", json!(""));
    put("hw_notes", json!(""));
    put("framework", json!(framework));
    put(
        "other_software_stack",
        json!(format!("Linux {}", host.kernel)),
    );
    put("operating_system", json!(host.os));
    put("sw_notes", json!("captured automatically by referee"));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let cpu = "processor\t: 0\nmodel name\t: AMD EPYC 9575F\nphysical id\t: 0\ncpu cores\t: 64\ncpu MHz\t\t: 3300.000\ncache size\t: 1024 KB\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9575F\nphysical id\t: 1\ncpu cores\t: 64\n";
        let (model, sockets, cores, logical, mhz, cache) = parse_cpuinfo(cpu);
        assert_eq!(
            (model.as_str(), sockets, cores, logical),
            ("AMD EPYC 9575F", 2, 64, 2)
        );
        assert_eq!(mhz, Some(3300.0));
        assert_eq!(cache, "1024 KB");
        assert!((parse_meminfo_gib("MemTotal:       24641920 kB\n") - 23.5).abs() < 0.01);
        assert_eq!(
            parse_os_release("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
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
        for f in referee_rules::meta::SYSTEM_REQUIRED_FIELDS {
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
