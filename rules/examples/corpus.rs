use referee_rules::checker::*;
use referee_rules::compliance::CheckOptions;
use referee_rules::ruleset::*;
use std::sync::Arc;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pkg = discover_mlperf_logging().unwrap();
    let lib = Arc::new(RuleLibrary::from_package(pkg));
    let ck = Checker::new(lib, CheckOptions::default());
    let paths = collect_logs(&[args[1].clone().into()]).unwrap();
    let t = std::time::Instant::now();
    let res = ck.check_files(&paths, &RulesetChoice::Official { usage: "training".into(), version: args.get(2).cloned().unwrap_or("5.0.0".into()) });
    let mut fails = 0;
    for r in &res {
        match r {
            Ok(r) => if r.verdict == referee_rules::Verdict::Fail { fails += 1; println!("FAIL {} :: {:?}", r.path, r.diagnostics.first().map(|d| (&d.key, &d.message))); },
            Err(e) => println!("ERR {e}"),
        }
    }
    eprintln!("{} logs, {} fail, {:?}", res.len(), fails, t.elapsed());
}
