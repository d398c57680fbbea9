//! The facts this machine tells about itself, probed from /proc, /sys,
//! /etc and `nvidia-smi`: CPU model, sockets, cores, memory, OS, network
//! and storage, and accelerators when a driver is present (no driver is a
//! normal, quiet case).

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
    /// Highest clock in MHz, when the driver reports it.
    pub max_mhz: Option<f64>,
}

/// A line of `nvidia-smi`'s output cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmiError {
    #[error(
        "nvidia-smi output line {line}: expected `name, memory.total, clocks.max.sm`, found `{found}`"
    )]
    Columns { line: usize, found: String },
    #[error("nvidia-smi output line {line}: memory `{found}` is not a number of MiB")]
    Memory { line: usize, found: String },
}

/// GPUs as `nvidia-smi --query-gpu=name,memory.total,clocks.max.sm
/// --format=csv,noheader,nounits` lists them (one line per GPU; memory in
/// MiB). Lines of other models than the first are counted apart: a node of
/// mixed GPUs is described by its first model, and the caller says so.
pub fn parse_nvidia_smi(text: &str) -> Result<Vec<Accelerator>, SmiError> {
    let mut out: Vec<Accelerator> = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        let [name, mem, clock] = cols[..] else {
            return Err(SmiError::Columns {
                line: n + 1,
                found: line.to_string(),
            });
        };
        let memory_mib: f64 = mem.parse().map_err(|_| SmiError::Memory {
            line: n + 1,
            found: mem.to_string(),
        })?;
        match out.iter_mut().find(|a| a.name == name) {
            Some(a) => a.count += 1,
            None => out.push(Accelerator {
                name: name.to_string(),
                memory_gib: memory_mib / 1024.0,
                count: 1,
                max_mhz: clock.parse().ok(),
            }),
        }
    }
    Ok(out)
}

/// The GPUs of this node through `nvidia-smi` (empty when it is not
/// installed or finds no GPU: a CPU machine is a normal case).
pub fn probe_nvidia_smi() -> Result<Vec<Accelerator>, SmiError> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,memory.total,clocks.max.sm",
            "--format=csv,noheader,nounits",
        ])
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Err(_) => Ok(Vec::new()),
        Ok(o) if !o.status.success() => Ok(Vec::new()),
        Ok(o) => parse_nvidia_smi(&String::from_utf8_lossy(&o.stdout)),
    }
}

/// Network and storage facts read from `/sys` (under `sys_root`, `/sys`
/// on a real machine).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoFacts {
    /// InfiniBand ports: (device, rate text such as `400 Gb/sec (4X NDR)`).
    pub infiniband: Vec<(String, String)>,
    /// Physical Ethernet interfaces with a known speed: (name, Mb/s).
    pub ethernet: Vec<(String, u64)>,
    /// Whole disks: (name, bytes, rotational).
    pub disks: Vec<(String, u64, bool)>,
}

impl IoFacts {
    pub fn probe(sys_root: &std::path::Path) -> Self {
        let list = |dir: &str| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(sys_root.join(dir))
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().to_string())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        let text = |p: std::path::PathBuf| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .ok()
        };
        let mut f = IoFacts::default();
        for dev in list("class/infiniband") {
            for port in list(&format!("class/infiniband/{dev}/ports")) {
                if let Some(rate) =
                    text(sys_root.join(format!("class/infiniband/{dev}/ports/{port}/rate")))
                {
                    f.infiniband.push((dev.clone(), rate));
                }
            }
        }
        for ifc in list("class/net") {
            let base = sys_root.join("class/net").join(&ifc);
            let physical = base.join("device").exists();
            let speed = text(base.join("speed")).and_then(|s| s.parse::<i64>().ok());
            if let (true, Some(mbps)) = (physical, speed.filter(|s| *s > 0)) {
                f.ethernet.push((ifc, mbps as u64));
            }
        }
        for disk in list("block") {
            let skip = ["loop", "ram", "zram", "dm-", "md", "sr", "nbd"];
            if skip.iter().any(|p| disk.starts_with(p)) {
                continue;
            }
            let base = sys_root.join("block").join(&disk);
            let sectors = text(base.join("size")).and_then(|s| s.parse::<u64>().ok());
            let rotational = text(base.join("queue/rotational")).as_deref() == Some("1");
            if let Some(sectors) = sectors.filter(|s| *s > 0) {
                f.disks.push((disk, sectors * 512, rotational));
            }
        }
        f
    }
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
}
