//! Energy (issue 29): power measured under the harness from simulated
//! sources, packaged where the official layout expects it, its energy the
//! official summarizer's; and the power rules checked on real v5.0 power
//! logs (Lenovo's 1 Hz data: silent) and on damaged copies (each flagged
//! with its rule).

use referee_tests::{
    copy_tree, corpus_dir, fake_exec_args, official_package_ok, python, referee, referee_bin,
    referee_in, stderr, stdout,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `referee power sample` with `PATH` and extra variables set.
fn sample(source: &str, out: &Path, path_dir: Option<&Path>, env: &[(&str, &Path)]) -> Value {
    let mut c = Command::new(referee_bin());
    c.args([
        "power",
        "sample",
        "--source",
        source,
        "--out",
        out.to_str().unwrap(),
        "--seconds",
        "1.1",
        "--power-interval-ms",
        "200",
        "--json",
    ]);
    if let Some(d) = path_dir {
        c.env(
            "PATH",
            format!("{}:{}", d.display(), std::env::var("PATH").unwrap()),
        );
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{source}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    serde_json::from_str(stdout(&o).trim()).unwrap()
}

/// The values of a power log's readings.
fn readings(log: &Path) -> Vec<f64> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"power_reading\""))
        .map(|l| {
            let j: Value = serde_json::from_str(l.split_once(":::MLLOG").unwrap().1).unwrap();
            j["value"].as_f64().unwrap()
        })
        .collect()
}

fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn simulated_nvml_and_ipmi_sources_give_power_logs() {
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // Two GPUs: 150.5 W + 149.5 W.
    script(&bin, "nvidia-smi", "printf '150.5\\n149.5\\n'");
    script(
        &bin,
        "ipmitool",
        "printf '\\n    Instantaneous power reading:                   412 Watts\\n    Minimum during sampling period:                 84 Watts\\n'",
    );
    let nv = sample("nvml", &t.path().join("nvml.txt"), Some(&bin), &[]);
    assert!(nv["readings"].as_u64().unwrap() >= 3, "{nv}");
    assert!(
        readings(&t.path().join("nvml.txt"))
            .iter()
            .all(|w| *w == 300.0)
    );
    let nvml_log = std::fs::read_to_string(t.path().join("nvml.txt")).unwrap();
    assert!(nvml_log.contains("\"conversion_eff\", \"value\": 1, \"metadata\": {\"file\": \"referee\", \"lineno\": 0, \"measurement_type\": \"DC\"}"), "{nvml_log}");
    sample("ipmi", &t.path().join("ipmi.txt"), Some(&bin), &[]);
    assert!(
        readings(&t.path().join("ipmi.txt"))
            .iter()
            .all(|w| *w == 412.0)
    );
}

#[test]
fn simulated_rapl_counters_give_their_power() {
    // RAPL: a package counter advancing 50 J per second (50 W) and a DRAM
    // counter 5 J per second, written by a thread as the kernel would.
    let t = tempfile::tempdir().unwrap();
    let cap = t.path().join("powercap");
    for (d, name) in [("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "dram")] {
        std::fs::create_dir_all(cap.join(d)).unwrap();
        std::fs::write(cap.join(d).join("name"), name).unwrap();
        std::fs::write(cap.join(d).join("max_energy_range_uj"), "262143328850").unwrap();
        std::fs::write(cap.join(d).join("energy_uj"), "0").unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s2, c2) = (stop.clone(), cap.clone());
    let writer = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while !s2.load(std::sync::atomic::Ordering::SeqCst) {
            let us = t0.elapsed().as_micros() as u64;
            // Written to a temporary name and renamed: never half a number.
            for (d, rate) in [("intel-rapl:0", 50u64), ("intel-rapl:0:0", 5)] {
                let tmp = c2.join(d).join("energy_uj.tmp");
                std::fs::write(&tmp, (us * rate).to_string()).unwrap();
                std::fs::rename(&tmp, c2.join(d).join("energy_uj")).unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    sample(
        "rapl",
        &t.path().join("rapl.txt"),
        None,
        &[("REFEREE_POWERCAP_ROOT", &cap)],
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    let w = readings(&t.path().join("rapl.txt"));
    assert!(w.len() >= 3, "{w:?}");
    // Each reading is the counters' advance over one interval, so a writer
    // late by a few milliseconds (a loaded machine) moves single readings;
    // their mean spans the whole sampling and stays at 55 W.
    assert!(w.iter().all(|x| x.is_finite() && *x > 0.0), "{w:?}");
    let mean = w.iter().sum::<f64>() / w.len() as f64;
    assert!((52.0..58.5).contains(&mean), "55 W expected: {w:?}");
}

#[test]
fn simulated_redfish_source_gives_power_logs() {
    // Redfish: a Power resource on loopback.
    let t = tempfile::tempdir().unwrap();
    let www = t.path().join("www");
    std::fs::create_dir_all(www.join("redfish")).unwrap();
    std::fs::write(
        www.join("redfish/Power"),
        r#"{"@odata.id": "/redfish/v1/Chassis/1/Power", "PowerControl": [{"PowerConsumedWatts": 733}]}"#,
    )
    .unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Command::new(python())
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&www)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/redfish/Power");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    sample(
        &format!("redfish:{url}"),
        &t.path().join("redfish.txt"),
        None,
        &[],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        readings(&t.path().join("redfish.txt"))
            .iter()
            .all(|w| *w == 733.0)
    );
}

#[test]
fn a_failing_source_logs_missed_readings_and_invents_none() {
    let t = tempfile::tempdir().unwrap();
    let o = referee(&[
        "power",
        "sample",
        "--source",
        "cmd:exit 4",
        "--out",
        t.path().join("bad.txt").to_str().unwrap(),
        "--seconds",
        "0.5",
        "--power-interval-ms",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let bad = std::fs::read_to_string(t.path().join("bad.txt")).unwrap();
    assert!(readings(&t.path().join("bad.txt")).is_empty());
    assert!(
        bad.lines()
            .filter(|l| l.starts_with("referee: power reading missed"))
            .count()
            >= 3,
        "{bad}"
    );
}

/// Ten runs of the fake program under `run --exec`, each measured by a
/// source that reads `watts` (AC, conversion efficiency 0.94).
fn exec_with_power(work: &Path, out: &Path, seed: &str, watts: u32) -> std::process::Output {
    let source = format!("cmd:echo {watts}");
    let args = fake_exec_args(
        out,
        10,
        &[
            "--seed",
            seed,
            "--power",
            &source,
            "--power-interval-ms",
            "100",
            "--conversion-eff",
            "0.94",
        ],
        &[],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    referee_in(&args, work)
}

#[test]
fn run_exec_power_is_packaged_accepted_and_its_energy_is_the_official_summarizers() {
    let t = tempfile::tempdir().unwrap();
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let out = t.path().join("runs");
    let o = exec_with_power(&work, &out, "11", 300);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let run0 = &summary["runs"][0]["power"];
    assert!(run0["readings"].as_u64().unwrap() >= 1, "{summary:#}");
    assert!(
        stderr(&o).contains("power (cmd:echo 300):"),
        "{}",
        stderr(&o)
    );
    // Average power over the timed part: 300 W × 0.94.
    let avg = run0["average_watts"].as_f64().unwrap();
    assert!((avg - 282.0).abs() < 282.0 * 0.35, "{avg}");
    let node = out.join("power/result_0/node_0.txt");
    let text = std::fs::read_to_string(&node).unwrap();
    let log = std::fs::read_to_string(out.join("result_0.txt")).unwrap();
    let ms = |key: &str, s: &str| -> f64 {
        let l = s
            .lines()
            .find(|l| l.contains(&format!("\"key\": \"{key}\"")))
            .unwrap();
        let j: Value = serde_json::from_str(l.split_once(":::MLLOG").unwrap().1).unwrap();
        j["time_ms"].as_f64().unwrap()
    };
    assert!(ms("power_measurement_start", &text) <= ms("run_start", &log));
    assert!(ms("power_measurement_stop", &text) >= ms("run_stop", &log));

    let pkg = t.path().join("pkg");
    let p = referee(&[
        "package",
        out.to_str().unwrap(),
        "--out",
        pkg.to_str().unwrap(),
    ]);
    assert_eq!(p.status.code(), Some(0), "{}{}", stdout(&p), stderr(&p));
    let org = pkg.join("referee");
    let dir = org.join("results/cpu_box/llama2_70b_lora");
    for i in 0..10 {
        assert!(
            dir.join(format!("power/result_{i}/node_0.txt")).is_file(),
            "{i}"
        );
    }
    assert!(official_package_ok(&org, "5.0.0"));
    // The runs are seconds long: fewer than 60 readings is named; nothing else.
    let s = referee(&[
        "summarize",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--json",
    ]);
    let row: Value = serde_json::from_str(stdout(&s).trim()).unwrap();
    let codes: std::collections::BTreeSet<&str> = row["policy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        ["policy[power-readings]"]
    );
    let ours = row["energy"].as_f64().unwrap();
    // The official summarizer (it writes summary.json into its working directory).
    let cwd = t.path().join("summarizer");
    std::fs::create_dir_all(&cwd).unwrap();
    let o = Command::new(python())
        .args(["-m", "mlperf_logging.result_summarizer"])
        .arg(&org)
        .args(["training", "5.0.0"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let official: Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("summary.json")).unwrap()).unwrap();
    let theirs = official[0]["llama2_70b_lora:Energy"].as_f64().unwrap();
    // summary.json rounds to 10 decimals.
    assert!(
        ((ours - theirs) / theirs).abs() < 1e-9,
        "{ours} vs {theirs}"
    );

    // compare: the energy per run of a release drawing 400 W against this
    // one's 300 W, with its confidence interval.
    let out2 = t.path().join("runs-400w");
    let o = exec_with_power(&work, &out2, "12", 400);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let c = referee(&[
        "compare",
        out.to_str().unwrap(),
        out2.to_str().unwrap(),
        "--json",
    ]);
    let v: Value = serde_json::from_str(&stdout(&c)).unwrap();
    let m = v["groups"][0]["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "energy_joules")
        .cloned()
        .unwrap_or_else(|| panic!("{v:#}"));
    let (b, c) = (
        m["baseline"].as_f64().unwrap(),
        m["candidate"].as_f64().unwrap(),
    );
    // 400 W against 300 W: more energy per run, whatever the runs' lengths.
    assert!(c > b * 1.1, "{m:#}");
    let change = m["relative_change"].as_f64().unwrap();
    assert!(
        m["ci"]["lo"].as_f64().unwrap() < change && change < m["ci"]["hi"].as_f64().unwrap(),
        "{m:#}"
    );
}

/// Lenovo's v5.0 llama2_70b_lora results with 1 Hz power logs.
fn lenovo(root: &Path) -> PathBuf {
    let system = "SR780aV3-8xB200_SXM_180GB";
    let src = corpus_dir().join("training_results_v5.0/Lenovo");
    let org = root.join("Lenovo");
    std::fs::create_dir_all(org.join("systems")).unwrap();
    std::fs::copy(
        src.join(format!("systems/{system}.json")),
        org.join(format!("systems/{system}.json")),
    )
    .unwrap();
    copy_tree(
        &src.join(format!("results/{system}/llama2_70b_lora")),
        &org.join(format!("results/{system}/llama2_70b_lora")),
    );
    org
}

fn power_findings(org: &Path) -> Vec<(String, String)> {
    let o = referee(&[
        "package-check",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--json",
    ]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["verdict"], "PASS", "the official verdict stands: {v:#}");
    v["policy"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_string(),
                d["file"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .take(2)
                    .collect::<Vec<_>>()
                    .join("<"),
            )
        })
        .collect()
}

fn rewrite(path: &Path, f: impl Fn(Vec<String>) -> Vec<String>) {
    let lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    std::fs::write(path, f(lines).join("\n") + "\n").unwrap();
}

#[test]
fn the_power_rules_are_silent_on_1_hz_data_and_name_each_damage() {
    let t = tempfile::tempdir().unwrap();
    let org = lenovo(t.path());
    assert_eq!(power_findings(&org), Vec::<(String, String)>::new());
    let dir = org.join("results/SR780aV3-8xB200_SXM_180GB/llama2_70b_lora/power");
    let is_reading = |l: &String| l.contains("\"power_reading\"");
    // 2 s readings: every other one dropped.
    rewrite(&dir.join("result_1/node_0.txt"), |ls| {
        let mut k = 0;
        ls.into_iter()
            .filter(|l| {
                if !is_reading(l) {
                    return true;
                }
                k += 1;
                k % 2 == 0
            })
            .collect()
    });
    // 40 readings only (the rest of the timed part unmeasured).
    rewrite(&dir.join("result_2/node_0.txt"), |ls| {
        let mut k = 0;
        ls.into_iter()
            .filter(|l| {
                if !is_reading(l) {
                    return true;
                }
                k += 1;
                k <= 40
            })
            .collect()
    });
    // Measurement starting after run_start: its first 30 readings and the
    // start line moved 30 s late.
    rewrite(&dir.join("result_3/node_0.txt"), |ls| {
        let first = ls.iter().filter(|l| is_reading(l)).nth(30).unwrap().clone();
        let j: Value = serde_json::from_str(first.split_once(":::MLLOG").unwrap().1).unwrap();
        let late = j["time_ms"].as_i64().unwrap();
        let mut k = 0;
        ls.into_iter()
            .filter_map(|l| {
                if is_reading(&l) {
                    k += 1;
                    return (k > 30).then_some(l);
                }
                if l.contains("\"power_measurement_start\"") {
                    let mut j: Value =
                        serde_json::from_str(l.split_once(":::MLLOG").unwrap().1).unwrap();
                    j["time_ms"] = late.into();
                    return Some(format!(":::MLLOG {j}"));
                }
                Some(l)
            })
            .collect()
    });
    let f = power_findings(&org);
    let has = |code: &str, file: &str| f.iter().any(|(c, x)| c == code && x == file);
    assert!(
        has("policy[power-sampling]", "node_0.txt<result_1"),
        "{f:#?}"
    );
    assert!(
        has("policy[power-readings]", "node_0.txt<result_1"),
        "2 s: half the readings: {f:#?}"
    );
    assert!(
        has("policy[power-readings]", "node_0.txt<result_2"),
        "{f:#?}"
    );
    assert!(
        has("policy[power-sampling]", "node_0.txt<result_2"),
        "unmeasured to run_stop: {f:#?}"
    );
    assert!(has("policy[power-window]", "node_0.txt<result_3"), "{f:#?}");
    assert!(
        has("policy[power-sampling]", "node_0.txt<result_3"),
        "a 30 s gap after run_start: {f:#?}"
    );
    assert!(
        !f.iter()
            .any(|(_, x)| x.ends_with("result_0") || x.ends_with("result_4")),
        "{f:#?}"
    );

    // A node missing: the system description says two nodes.
    let sys = org.join("systems/SR780aV3-8xB200_SXM_180GB.json");
    let mut d: Value = serde_json::from_str(&std::fs::read_to_string(&sys).unwrap()).unwrap();
    d["number_of_nodes"] = "2".into();
    std::fs::write(&sys, serde_json::to_string_pretty(&d).unwrap()).unwrap();
    let f = power_findings(&org);
    assert_eq!(
        f.iter().filter(|(c, _)| c == "policy[power-nodes]").count(),
        10,
        "{f:#?}"
    );
    assert_eq!(
        f.iter()
            .filter(|(c, _)| c == "policy[power-interconnect]")
            .count(),
        10,
        "{f:#?}"
    );
}
