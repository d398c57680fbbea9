"""Compare the calibration's default runs with the same seeds trained on
other kernel sets of the CPU engine (scripts/calibrate-kernels.sh): per
kernel set, the largest difference of any evaluation's metric from the
calibration's, and per seed the samples to target under each kernel set.
Writes workloads/rcps/kernels_BENCHMARK.json and prints a summary."""
import glob, json, os, sys

bench, work = sys.argv[1], sys.argv[2]
cal = json.load(open(f"workloads/rcps/calibration_{bench}.json"))
target, lower = cal["target"], cal["direction"] == "lower"
meets = (lambda v: v <= target) if lower else (lambda v: v >= target)


def first_hit(evals):
    return next((s for s, v in evals if meets(v)), None)


reference = {r["seed"]: r["evals"] for r in cal["runs"]["default"]}
sets = {cal["engine"]: {"runs": [{"seed": s, "samples_to_target": first_hit(e), "evals": e}
                                 for s, e in sorted(reference.items())]}}
unfinished = []
for d in sorted(glob.glob(os.path.join(work, "kernels-*"))):
    if not os.path.exists(os.path.join(d, "referee_run.json")):
        unfinished.append(os.path.basename(d))  # still running, or killed
        continue
    rec = json.load(open(os.path.join(d, "referee_run.json")))
    r = rec["runs"][0]
    evals = [[e[0], e[1]] for e in r["evals"]]
    run = {"seed": r["seed"], "samples_to_target": first_hit(evals), "evals": evals}
    if r.get("status") != "success":
        # e.g. stopped by the time budget before its next evaluation
        run["status"], run["reason"] = r.get("status"), r.get("reason")
    sets.setdefault(rec["engine"], {"runs": []})["runs"].append(run)

summary = {}
for engine, s in sets.items():
    s["runs"].sort(key=lambda r: r["seed"])
    diffs, same, compared = [], 0, 0
    for r in s["runs"]:
        ref = reference.get(r["seed"])
        if ref is None:
            continue
        compared += 1
        same += first_hit(ref) == r["samples_to_target"]
        diffs += [abs(a[1] - b[1]) for a, b in zip(ref, r["evals"]) if a[0] == b[0]]
    s["seeds_compared"] = compared
    s["same_samples_to_target"] = same
    s["max_metric_difference"] = max(diffs) if diffs else None
    s["identical_curves"] = bool(diffs) and max(diffs) == 0.0
    summary[engine] = {k: v for k, v in s.items() if k != "runs"}
    summary[engine]["samples_to_target"] = [r["samples_to_target"] for r in s["runs"]]
    summary[engine]["runs_not_ended_by_target"] = [
        {"seed": r["seed"], "status": r["status"], "reason": r["reason"]}
        for r in s["runs"] if "status" in r]

out = {
    "benchmark": bench,
    "calibrated_on": cal["engine"],
    "target": target,
    "direction": cal["direction"],
    "note": __doc__.strip(),
    "summary": summary,
    "unfinished": unfinished,
    "kernel_sets": sets,
}
json.dump(out, open(f"workloads/rcps/kernels_{bench}.json", "w"), indent=1)
print(f"{bench}: target {'<=' if lower else '>='} {target}, calibrated on {cal['engine']}")
for engine, s in summary.items():
    print(f"  {engine}: {s['same_samples_to_target']}/{s['seeds_compared']} seeds reach the target at the same "
          f"evaluation; largest metric difference {s['max_metric_difference']}; samples to target {s['samples_to_target']}")
    for r in s["runs_not_ended_by_target"]:
        print(f"    seed {r['seed']}: {r['status']} ({r['reason']})")
if unfinished:
    print(f"  not finished (no run record): {', '.join(unfinished)}")
