"""Driver of scripts/bench-summarize.sh (see there); appends its figures to
docs/bench-history.jsonl (scripts/bench_history.py)."""
import csv, os, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_history

corpus = os.path.abspath(sys.argv[1])
root = os.path.join(corpus, "training_results_v5.0")
referee = os.path.abspath("target/release/referee")
env = dict(os.environ, VIRTUAL_ENV=os.path.abspath(".venv"))
nproc = os.cpu_count()

def wall(cmd, cwd=None):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    return p.returncode, time.perf_counter() - t

def median_of(cmd, n=5):
    ws = []
    for _ in range(n):
        rc, w = wall(cmd)
        ws.append(w)
    return statistics.median(ws)

sum_ref = median_of([referee, "summarize", "--ruleset", "5.0.0", "--json", root])
pkg_ref = median_of([referee, "package-check", "--ruleset", "5.0.0", "--json", root])
pkg_rows = list(csv.DictReader(open(os.path.join(corpus, "expected/v5.0.package_checker.tsv")), delimiter="\t"))
pkg_official_total = sum(float(r["wall_s"]) for r in pkg_rows)
SUM_OFFICIAL_TOTAL = 232.29  # recorded in expected/v5.0.scores.tsv

# Live, same machine, one submitter (the official tools modify the tree: work on a copy).
org = "Dell"
with tempfile.TemporaryDirectory() as tmp:
    copy = os.path.join(tmp, org)
    shutil.copytree(os.path.join(root, org), copy)
    for d, _, fs in os.walk(copy):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    _, off_sum = wall([sys.executable, "-m", "mlperf_logging.result_summarizer", copy, "training", "5.0.0", "--csv", os.path.join(tmp, "s.csv")], cwd=tmp)
    _, off_pkg = wall([sys.executable, "-m", "mlperf_logging.package_checker", copy, "training", "5.0.0", "--log_output", "/dev/null"], cwd=tmp)
    ref_sum_live = median_of([referee, "summarize", "--ruleset", "5.0.0", "--json", copy], 3)
    ref_pkg_live = median_of([referee, "package-check", "--ruleset", "5.0.0", "--json", copy], 3)

print(f"machine: {nproc} cores; official tools: 1 thread; referee: {nproc} threads (rayon)")
print()
print(f"{'':46} {'referee':>10} {'official':>10} {'ratio':>8}")
print(f"{'summarize, whole v5.0 corpus (1,717 logs)':46} {sum_ref:9.2f}s {SUM_OFFICIAL_TOTAL:9.1f}s {SUM_OFFICIAL_TOTAL/sum_ref:7.0f}x   (official: recorded)")
print(f"{'package-check, all 19 submitters':46} {pkg_ref:9.2f}s {pkg_official_total:9.1f}s {pkg_official_total/pkg_ref:7.0f}x   (official: recorded, summed)")
print(f"{'summarize, ' + org + ' (live, same machine)':46} {ref_sum_live:9.2f}s {off_sum:9.1f}s {off_sum/ref_sum_live:7.0f}x")
print(f"{'package-check, ' + org + ' (live, same machine)':46} {ref_pkg_live:9.2f}s {off_pkg:9.1f}s {off_pkg/ref_pkg_live:7.0f}x")

# The history (docs/bench-history.jsonl).
command = os.environ.get("BENCH_COMMAND", "scripts/bench-summarize.sh")
rec = lambda *a, **k: bench_history.record("bench-summarize.sh", *a, command=command, **k)
rec("summarize_s", "s", "summarize, whole v5.0 corpus", round(sum_ref, 3), peer=SUM_OFFICIAL_TOTAL,
    peer_name="official result_summarizer (recorded)", params={"referee_runs": 5}, note=f"{SUM_OFFICIAL_TOTAL / sum_ref:.0f}×")
rec("package_check_s", "s", "package-check, all 19 submitters", round(pkg_ref, 3), peer=round(pkg_official_total, 1),
    peer_name="official package_checker (recorded, summed)", params={"referee_runs": 5}, note=f"{pkg_official_total / pkg_ref:.0f}×")
rec("summarize_s", "s", f"summarize, one submitter ({org}), live", round(ref_sum_live, 3), peer=round(off_sum, 2),
    peer_name="official result_summarizer, live", params={"referee_runs": 3}, note=f"{off_sum / ref_sum_live:.0f}×")
rec("package_check_s", "s", f"package-check, one submitter ({org}), live", round(ref_pkg_live, 3), peer=round(off_pkg, 2),
    peer_name="official package_checker, live", params={"referee_runs": 3}, note=f"{off_pkg / ref_pkg_live:.0f}×")
