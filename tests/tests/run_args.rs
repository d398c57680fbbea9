//! `referee run` and `referee run --exec` parsed (no training): the
//! command lines users type resolve into the same requests, and clap
//! rejects the flags of one mode given to the other.

use clap::Parser;
use clap::error::ErrorKind;
use referee_harness::cli::{Cli, Command};
use referee_tests::{referee, stderr, stdout};

/// The request `argv` (after `referee`) resolves into, as text.
fn resolved(argv: &[&str]) -> String {
    let cli = Cli::try_parse_from(std::iter::once("referee").chain(argv.iter().copied()))
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let Command::Run(a) = cli.command else {
        panic!("{argv:?}: not `run`")
    };
    if a.exec {
        format!(
            "{:?} data={:?} quiet={} json={}",
            a.exec_request(),
            a.exec_args.data,
            a.common.quiet,
            a.common.json
        )
    } else {
        format!(
            "{:?} threads={:?} quiet={} json={}",
            a.request(),
            a.own.threads,
            a.common.quiet,
            a.common.json
        )
    }
}

const ACCEPTED: &[&[&str]] = &[
    &["run", "mini_llm"],
    &[
        "run",
        "mini_llm",
        "--org",
        "ACME",
        "--system",
        "cpu_box",
        "--no-cache-clear",
        "--out",
        "runs/llm",
    ],
    &["run", "mini_llm", "--tsa", "http://tsa.example/"],
    &[
        "run", "mini_llm", "--device", "cuda:0", "--runs", "1", "--power", "nvml",
    ],
    &[
        "run",
        "mini_llm",
        "--mode",
        "throughput",
        "--steps",
        "2",
        "--window",
        "1..2",
        "-j",
        "1",
    ],
    &[
        "run",
        "--benchmark",
        "mini_resnet",
        "--runs",
        "3",
        "--seed",
        "7",
        "--division",
        "open",
        "--device",
        "cuda:1",
        "--data-dir",
        "d",
        "--config",
        "c.yaml",
        "--set",
        "a=1",
        "--set",
        "b=2",
        "-j",
        "2",
        "--keep-going",
        "--budget-minutes",
        "5.5",
        "--json",
        "--tsa",
        "http://a",
        "--tsa",
        "http://b",
        "--power",
        "rapl",
        "--power-interval-ms",
        "500",
        "--conversion-eff",
        "0.9",
        "--step-delay-ms",
        "3",
        "-q",
    ],
    &[
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
        "--out",
        "runs/lora",
        "--",
        "torchrun",
        "--nproc-per-node",
        "8",
        "train.py",
        "--config",
        "lora.yaml",
    ],
    &[
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
        "--runs",
        "2",
        "--cache-clear-cmd",
        "true",
        "--json",
        "-q",
        "--out",
        "o",
        "--",
        "python3",
        "fake.py",
        "--fault",
    ],
    &[
        "run",
        "--exec",
        "--benchmark",
        "b",
        "--ruleset",
        "5.0.0",
        "--",
        "prog",
        "--help",
    ],
    &[
        "run",
        "--exec",
        "mini_llm",
        "--rules-dir",
        "R",
        "--no-cache-clear",
        "--witness-tolerance-ms",
        "50",
        "--grace-seconds",
        "1.5",
        "--seed",
        "3",
        "--division",
        "open",
        "--org",
        "O",
        "--system",
        "S",
        "--budget-minutes",
        "9",
        "--tsa",
        "u",
        "--power",
        "cmd:echo 5",
        "--conversion-eff",
        "0.8",
        "--data",
        "d1",
        "--data",
        "d2",
        "--",
        "prog",
    ],
    &[
        "run",
        "--exec",
        "--tsa",
        "http://tsa.example/",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
        "--cache-clear-cmd",
        "sudo /sbin/drop-caches",
        "--",
        "prog",
    ],
];

/// What the parser of one struct for both modes resolved ACCEPTED into.
const BEFORE: &[&str] = &[
    r#"RunRequest { benchmark: "mini_llm", runs: None, config_file: None, sets: [], out: None, seed: None, division: Closed, device: "cpu", data_dir: None, org: "referee", system: None, no_cache_clear: false, keep_going: false, budget_minutes: None, mode: TimeToTrain, steps: None, window: None, step_delay_ms: 0, tsa: [], power: None } threads=None quiet=false json=false"#,
    r#"RunRequest { benchmark: "mini_llm", runs: None, config_file: None, sets: [], out: Some("runs/llm"), seed: None, division: Closed, device: "cpu", data_dir: None, org: "ACME", system: Some("cpu_box"), no_cache_clear: true, keep_going: false, budget_minutes: None, mode: TimeToTrain, steps: None, window: None, step_delay_ms: 0, tsa: [], power: None } threads=None quiet=false json=false"#,
    r#"RunRequest { benchmark: "mini_llm", runs: None, config_file: None, sets: [], out: None, seed: None, division: Closed, device: "cpu", data_dir: None, org: "referee", system: None, no_cache_clear: false, keep_going: false, budget_minutes: None, mode: TimeToTrain, steps: None, window: None, step_delay_ms: 0, tsa: ["http://tsa.example/"], power: None } threads=None quiet=false json=false"#,
    r#"RunRequest { benchmark: "mini_llm", runs: Some(1), config_file: None, sets: [], out: None, seed: None, division: Closed, device: "cuda:0", data_dir: None, org: "referee", system: None, no_cache_clear: false, keep_going: false, budget_minutes: None, mode: TimeToTrain, steps: None, window: None, step_delay_ms: 0, tsa: [], power: Some(PowerRequest { source: Nvml, interval: 1s, conversion_eff: None }) } threads=None quiet=false json=false"#,
    r#"RunRequest { benchmark: "mini_llm", runs: None, config_file: None, sets: [], out: None, seed: None, division: Closed, device: "cpu", data_dir: None, org: "referee", system: None, no_cache_clear: false, keep_going: false, budget_minutes: None, mode: Throughput, steps: Some(2), window: Some("1..2"), step_delay_ms: 0, tsa: [], power: None } threads=Some(1) quiet=false json=false"#,
    r#"RunRequest { benchmark: "mini_resnet", runs: Some(3), config_file: Some("c.yaml"), sets: ["a=1", "b=2"], out: None, seed: Some(7), division: Open, device: "cuda:1", data_dir: Some("d"), org: "referee", system: None, no_cache_clear: false, keep_going: true, budget_minutes: Some(5.5), mode: TimeToTrain, steps: None, window: None, step_delay_ms: 3, tsa: ["http://a", "http://b"], power: Some(PowerRequest { source: Rapl, interval: 500ms, conversion_eff: Some(0.9) }) } threads=Some(2) quiet=true json=true"#,
    r#"ExecRequest { command: ["torchrun", "--nproc-per-node", "8", "train.py", "--config", "lora.yaml"], benchmark: "llama2_70b_lora", rules: RulesRequest { usage: "training", ruleset: Some("5.0.0"), rules_dir: None, rcp_dir: None, pruning: Official }, runs: None, seed: None, division: Closed, org: "referee", system: None, budget_minutes: None, out: Some("runs/lora"), cache_clear: DropCaches, tolerance_ms: 2000, grace: 30s, tsa: [], power: None, record_extra: {} } data=[] quiet=false json=false"#,
    r#"ExecRequest { command: ["python3", "fake.py", "--fault"], benchmark: "llama2_70b_lora", rules: RulesRequest { usage: "training", ruleset: Some("5.0.0"), rules_dir: None, rcp_dir: None, pruning: Official }, runs: Some(2), seed: None, division: Closed, org: "referee", system: None, budget_minutes: None, out: Some("o"), cache_clear: Command("true"), tolerance_ms: 2000, grace: 30s, tsa: [], power: None, record_extra: {} } data=[] quiet=true json=true"#,
    r#"ExecRequest { command: ["prog", "--help"], benchmark: "b", rules: RulesRequest { usage: "training", ruleset: Some("5.0.0"), rules_dir: None, rcp_dir: None, pruning: Official }, runs: None, seed: None, division: Closed, org: "referee", system: None, budget_minutes: None, out: None, cache_clear: DropCaches, tolerance_ms: 2000, grace: 30s, tsa: [], power: None, record_extra: {} } data=[] quiet=false json=false"#,
    r#"ExecRequest { command: ["prog"], benchmark: "mini_llm", rules: RulesRequest { usage: "training", ruleset: None, rules_dir: Some("R"), rcp_dir: None, pruning: Official }, runs: None, seed: Some(3), division: Open, org: "O", system: Some("S"), budget_minutes: Some(9.0), out: None, cache_clear: Skip, tolerance_ms: 50, grace: 1.5s, tsa: ["u"], power: Some(PowerRequest { source: Cmd("echo 5"), interval: 1s, conversion_eff: Some(0.8) }), record_extra: {} } data=["d1", "d2"] quiet=false json=false"#,
    r#"ExecRequest { command: ["prog"], benchmark: "llama2_70b_lora", rules: RulesRequest { usage: "training", ruleset: Some("5.0.0"), rules_dir: None, rcp_dir: None, pruning: Official }, runs: None, seed: None, division: Closed, org: "referee", system: None, budget_minutes: None, out: None, cache_clear: Command("sudo /sbin/drop-caches"), tolerance_ms: 2000, grace: 30s, tsa: ["http://tsa.example/"], power: None, record_extra: {} } data=[] quiet=false json=false"#,
];

/// The command lines of the README, docs/, scripts/ and tests/ (and every
/// flag of each mode) resolve as they did when one struct held the flags
/// of both modes: the requests below were printed by that parser.
#[test]
fn the_command_lines_users_type_resolve_as_before() {
    let mut wrong = Vec::new();
    for (argv, want) in ACCEPTED.iter().zip(BEFORE) {
        let got = resolved(argv);
        if got != *want {
            wrong.push(format!("{argv:?}\n  before: {want}\n  now:    {got}"));
        }
    }
    assert_eq!(ACCEPTED.len(), BEFORE.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Why clap's reading of `referee ARGV` is not a refusal of `kind`, exit
/// code 2 and a message that says each of `says`; None when it is.
fn not_refused(argv: &[&str], kind: ErrorKind, says: &[&str]) -> Option<String> {
    match Cli::try_parse_from(std::iter::once("referee").chain(argv.iter().copied())) {
        Ok(_) => Some(format!("{argv:?}: accepted")),
        Err(e) => {
            let text = e.to_string();
            let missing: Vec<&&str> = says.iter().filter(|s| !text.contains(**s)).collect();
            (e.kind() != kind || e.exit_code() != 2 || !missing.is_empty()).then(|| {
                format!(
                    "{argv:?}: {:?} (exit {}), not {kind:?}, or without {missing:?}:\n{text}",
                    e.kind(),
                    e.exit_code()
                )
            })
        }
    }
}

fn all_refused(cases: &[(Vec<&str>, ErrorKind, Vec<&str>)]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(argv, kind, says)| not_refused(argv, *kind, says))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A valid `run --exec` with `flags` added before the `--`.
fn exec_with<'a>(flags: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
    ];
    v.extend(flags);
    v.extend(["--", "python3", "train.py"]);
    v
}

/// A valid `run mini_llm` with `flags` added.
fn own_with<'a>(flags: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["run", "mini_llm"];
    v.extend(flags);
    v
}

/// The flags of referee's own benchmarks have no meaning for a program of
/// the user's: clap refuses them with --exec, wherever they stand, naming
/// both flags (before: --config, --set and --mode throughput were refused
/// by hand after parsing, the others silently dropped).
#[test]
fn clap_refuses_own_benchmark_flags_with_exec() {
    let mut cases = Vec::new();
    for (flag, shown) in [
        (&["--config", "c.yaml"][..], "--config <FILE>"),
        (&["--set", "batch_size=8"], "--set <KEY=VALUE>"),
        (&["--mode", "throughput"], "--mode <MODE>"),
        (&["--mode", "time-to-train"], "--mode <MODE>"),
        (&["--steps", "40"], "--steps <STEPS>"),
        (&["--window", "1..2"], "--window <A..B>"),
        (&["--device", "cuda:0"], "--device <DEVICE>"),
        (&["--data-dir", "d"], "--data-dir <DIR>"),
        (&["-j", "2"], "--threads <N>"),
        (&["--keep-going"], "--keep-going"),
        (&["--step-delay-ms", "5"], "--step-delay-ms <MS>"),
    ] {
        let says = vec!["cannot be used with", shown, "'--exec'"];
        cases.push((exec_with(flag), ErrorKind::ArgumentConflict, says.clone()));
        let mut first = vec!["run", "--exec"];
        first.extend(flag);
        first.extend(["--benchmark", "b", "--ruleset", "5.0.0", "--", "prog"]);
        cases.push((first, ErrorKind::ArgumentConflict, says));
    }
    all_refused(&cases);
}

/// The flags of --exec have no meaning for referee's own benchmarks: clap
/// asks for --exec (before: a command after `--` was refused by hand, the
/// others silently dropped; --data was clap's already).
#[test]
fn clap_refuses_exec_flags_without_exec() {
    let cases: Vec<_> = [
        &["--", "python3", "train.py"][..],
        &["--ruleset", "5.0.0"],
        &["--rules-dir", "R"],
        &["--cache-clear-cmd", "true"],
        &["--witness-tolerance-ms", "10"],
        &["--grace-seconds", "1"],
        &["--data", "d"],
    ]
    .into_iter()
    .map(|flag| {
        (
            own_with(flag),
            ErrorKind::MissingRequiredArgument,
            vec!["required arguments were not provided", "  --exec\n"],
        )
    })
    .collect();
    all_refused(&cases);
}

/// The rest that was refused by hand after parsing, or not at all.
#[test]
fn clap_refuses_what_no_mode_means() {
    all_refused(&[
        // --exec needs a benchmark's name (before: the empty name went on
        // to the rules lookup).
        (
            vec!["run", "--exec", "--ruleset", "5.0.0", "--", "prog"],
            ErrorKind::MissingRequiredArgument,
            vec!["<BENCHMARK>"],
        ),
        (
            vec!["run", "--exec", "mini_llm"],
            ErrorKind::MissingRequiredArgument,
            vec!["<CMD>"],
        ),
        (
            vec!["run", "mini_llm", "--benchmark", "mini_llm"],
            ErrorKind::ArgumentConflict,
            vec!["--benchmark <NAME>"],
        ),
        // A cache clear named and refused at once (before: the refusal
        // won, silently).
        (
            exec_with(&["--cache-clear-cmd", "true", "--no-cache-clear"]),
            ErrorKind::ArgumentConflict,
            vec!["--cache-clear-cmd <CMD>", "--no-cache-clear"],
        ),
        // Values checked by hand after parsing before.
        (
            exec_with(&["--grace-seconds", "NaN"]),
            ErrorKind::ValueValidation,
            vec!["--grace-seconds <S>", "non-negative"],
        ),
        (
            exec_with(&["--grace-seconds", "inf"]),
            ErrorKind::ValueValidation,
            vec!["--grace-seconds <S>", "non-negative"],
        ),
        (
            exec_with(&["--grace-seconds=-1"]),
            ErrorKind::ValueValidation,
            vec!["--grace-seconds <S>", "non-negative"],
        ),
        (
            exec_with(&["--power", "psu"]),
            ErrorKind::ValueValidation,
            vec!["--power <SOURCE>", "unknown power source `psu`"],
        ),
        (
            own_with(&["--power", "psu"]),
            ErrorKind::ValueValidation,
            vec!["--power <SOURCE>", "unknown power source `psu`"],
        ),
    ]);
}

/// The binary answers such a line with clap's error and exit code 2
/// (crate::cli's EXIT_USAGE, as before). The benchmark named is none, so
/// that a line clap let through would stop at its name, never run.
#[test]
fn the_binary_exits_2_with_clap_s_error() {
    for (argv, says) in [
        (
            &[
                "run",
                "--exec",
                "--benchmark",
                "no_such",
                "--ruleset",
                "5.0.0",
                "--config",
                "c.yaml",
                "--",
                "/nonexistent/prog",
            ][..],
            "error: the argument '--exec' cannot be used with '--config <FILE>'",
        ),
        (
            &["run", "no_such", "--ruleset", "5.0.0"],
            "error: the following required arguments were not provided:",
        ),
    ] {
        let o = referee(argv);
        assert_eq!(o.status.code(), Some(2), "{argv:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(says), "{argv:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("Usage: referee run"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{argv:?}: {}", stdout(&o));
    }
}

/// The sections of `referee run --help`: heading → the flags under it.
fn help_sections() -> Vec<(String, String)> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let run = cmd.find_subcommand_mut("run").expect("a run subcommand");
    let help = run.render_long_help().to_string();
    let mut out: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            out.push((line.trim_end_matches(':').to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

#[test]
fn help_lists_each_mode_s_flags_under_its_heading() {
    let sections = help_sections();
    let section = |name: &str| -> &str {
        sections
            .iter()
            .find(|(h, _)| h == name)
            .map(|(_, b)| b.as_str())
            .unwrap_or_else(|| panic!("no `{name}:` heading in {sections:#?}"))
    };
    let flag = |body: &str, f: &str| {
        body.lines()
            .any(|l| l.trim_start().starts_with(f) || l.contains(&format!(", {f}")))
    };
    let exec = section("With --exec");
    for f in [
        "--ruleset",
        "--rules-dir",
        "--cache-clear-cmd",
        "--witness-tolerance-ms",
        "--grace-seconds",
        "--data ",
        "[CMD]",
    ] {
        assert!(flag(exec, f), "{f} not under `With --exec`:\n{exec}");
    }
    let own = section("Referee's own benchmarks (not with --exec)");
    for f in [
        "--config",
        "--set",
        "--mode",
        "--steps",
        "--window",
        "--device",
        "--data-dir",
        "--threads",
        "--keep-going",
        "--step-delay-ms",
    ] {
        assert!(
            flag(own, f),
            "{f} not under the own benchmarks' heading:\n{own}"
        );
        assert!(!flag(exec, f), "{f} under `With --exec`");
    }
    let both = section("Options");
    for f in [
        "--exec",
        "--benchmark",
        "--runs",
        "--out",
        "--seed",
        "--division",
        "--org",
        "--system",
        "--quiet",
        "--no-cache-clear",
        "--budget-minutes",
        "--json",
        "--tsa",
        "--power ",
    ] {
        assert!(flag(both, f), "{f} not under Options:\n{both}");
    }
    // No flag of one mode is described as the other's in the shared list.
    assert!(!both.contains("With --exec:"), "{both}");
}
