//! Every official rule file of the supported rulesets loads: the YAML reads
//! exactly as PyYAML's BaseLoader reads it, and every code snippet compiles
//! into referee's interpreter.

use referee_rules::ruleset::compile_rule_file;
use referee_rules::yaml::{self, Node};
use referee_tests::{mlperf_logging, python};
use std::path::PathBuf;
use std::process::Command;

const SUPPORTED: &[&str] = &[
    "training_4.0.0",
    "training_4.1.0",
    "training_5.0.0",
    "training_5.1.0",
    "training_6.0.0",
    "training_6.1.0",
    "hpc_3.0.0",
];

fn rule_files() -> Vec<(String, PathBuf)> {
    let root = mlperf_logging().compliance_dir();
    let mut out = Vec::new();
    for dir in SUPPORTED {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        for p in files {
            out.push((
                format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()),
                p,
            ));
        }
    }
    // 4.0.0 resnet reaches into 3.1.0.
    for f in ["closed_resnet_lars.yaml", "closed_resnet_sgd.yaml"] {
        out.push((
            format!("training_3.1.0/{f}"),
            root.join("training_3.1.0").join(f),
        ));
    }
    out
}

#[test]
fn all_supported_rule_files_compile() {
    let files = rule_files();
    assert!(files.len() > 100, "found only {} rule files", files.len());
    let mut errors = Vec::new();
    let mut keys = 0;
    for (rel, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        match compile_rule_file(rel, path.clone(), &text) {
            Ok(f) => keys += f.keys.len(),
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(keys > 900, "only {keys} KEY records compiled");
}

fn to_json(n: &Node) -> serde_json::Value {
    match n {
        Node::Scalar(s, _) => serde_json::Value::String(s.clone()),
        Node::Seq(items, _) => serde_json::Value::Array(items.iter().map(to_json).collect()),
        Node::Map(pairs, _) => {
            let mut m = serde_json::Map::new();
            for (k, v) in pairs {
                m.insert(k.as_str().expect("string keys").to_string(), to_json(v));
            }
            serde_json::Value::Object(m)
        }
    }
}

#[test]
fn yaml_reads_exactly_as_pyyaml_baseloader() {
    let files = rule_files();
    let paths: Vec<String> = files.iter().map(|(_, p)| p.display().to_string()).collect();
    let script = "import sys, json, yaml\n\
                  out = {}\n\
                  for p in sys.argv[1:]:\n\
                  \x20   with open(p) as f:\n\
                  \x20       out[p] = yaml.load(f, Loader=yaml.BaseLoader)\n\
                  print(json.dumps(out))\n";
    let o = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(&paths)
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut compared = 0;
    for p in &paths {
        let text = std::fs::read_to_string(p).unwrap();
        let ours = yaml::load(&text)
            .unwrap()
            .map(|n| to_json(&n))
            .unwrap_or(serde_json::Value::Null);
        assert_eq!(ours, theirs[p.as_str()], "{p} reads differently");
        compared += 1;
    }
    assert_eq!(compared, files.len());
}
