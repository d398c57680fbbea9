"""Choose a benchmark's target and write its RCP table from calibration runs
(see scripts/calibrate.sh).

Target rule: at the evaluation at about 75 % of the default schedule, take
the metric of every default-batch-size run; the target is the value that
90 % of the runs meet there (lower-is-better: the 90th percentile, rounded up
to 2 decimals; higher-is-better: the 10th percentile, rounded down to 2
decimals). So at least 90 % of seeds reach it, most well before the end.
RCP points: per run, the samples count of the first evaluation meeting the
target (runs that never meet it are left out and reported).
"""
import datetime, glob, json, math, os, sys

bench, work = sys.argv[1], sys.argv[2]
lower = bench == "mini_llm"
runs = {"default": [], "alt": []}
engines, codes = set(), set()
for d in sorted(glob.glob(os.path.join(work, "*-*"))):
    variant = os.path.basename(d).split("-")[0]
    if variant not in runs:
        continue
    rec = json.load(open(os.path.join(d, "referee_run.json")))
    r = rec["runs"][0]
    engines.add(rec["engine"])
    codes.add(json.dumps(rec["code"], sort_keys=True))
    runs[variant].append({"seed": r["seed"], "config": rec["config"], "evals": [[e[0], e[1]] for e in r["evals"]]})
# One engine and one build for every run: the RCPs hold for what trained them.
assert len(engines) == 1, f"calibration runs on several engines: {sorted(engines)}"
assert len(codes) == 1, "calibration runs of several builds of referee"
engine = engines.pop()
code = json.loads(codes.pop())

default = runs["default"]
assert len(default) >= 10, f"need at least 10 default runs, have {len(default)}"
n_evals = min(len(r["evals"]) for r in default)
k = max(1, math.ceil(0.75 * n_evals)) - 1
at_k = sorted(r["evals"][k][1] for r in default)
if lower:
    q = at_k[math.ceil(0.9 * len(at_k)) - 1]
    target = math.ceil(q * 100) / 100
else:
    q = at_k[len(at_k) - math.ceil(0.9 * len(at_k))]
    target = math.floor(q * 100) / 100
meets = (lambda v: v <= target) if lower else (lambda v: v >= target)

def first_hit(r):
    for s, v in r["evals"]:
        if meets(v):
            return s
    return None

def engine_text(e):
    return f"CPU engine, {e[4:]} kernels" if e.startswith("cpu-") else f"{e} engine"


table, missing = {}, {}
for variant, rs in runs.items():
    if not rs:
        continue
    pts = [first_hit(r) for r in rs]
    bs = rs[0]["config"]["batch_size"]
    missing[f"{bench}_ref_{bs}"] = sum(p is None for p in pts)
    table[f"{bench}_ref_{bs}"] = {
        "Benchmark": bench,
        "Creator": "referee scripts/calibrate.sh",
        "When": datetime.date.today().isoformat(),
        "Platform": f"CPU, referee's {engine_text(engine)}",
        "Engine": engine,
        "Precision": "fp32",
        "BS": bs,
        "Hyperparams": {k: v for k, v in rs[0]["config"].items() if k in ("batch_size", "base_lr", "end_lr", "warmup_steps", "total_steps")},
        "Epochs to converge": sorted(p for p in pts if p is not None),
    }
reached = sum(first_hit(r) is not None for r in default)
cal = {
    "benchmark": bench,
    "engine": engine,
    "code": code,
    "direction": "lower" if lower else "higher",
    "rule": __doc__.strip(),
    "eval_index_for_target": k,
    "metric_at_that_eval": at_k,
    "target": target,
    "default_runs_reaching_target": f"{reached}/{len(default)}",
    "runs_without_convergence_point": missing,
    "runs": runs,
}
os.makedirs("workloads/rcps", exist_ok=True)
json.dump(cal, open(f"workloads/rcps/calibration_{bench}.json", "w"), indent=1)
json.dump(table, open(f"workloads/rcps/rcps_{bench}.json", "w"), indent=2)
print(f"{bench}: target {'<=' if lower else '>='} {target}; {reached}/{len(default)} default runs reach it")
for name, rec in table.items():
    print(f"  {name}: {len(rec['Epochs to converge'])} points {rec['Epochs to converge']} ({missing[name]} without)")
