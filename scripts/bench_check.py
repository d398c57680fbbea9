"""Driver of scripts/bench-check.sh (see there); appends its figures to
docs/bench-history.jsonl (scripts/bench_history.py)."""
import csv, os, statistics, subprocess, sys, time, resource
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_history

corpus = os.path.abspath(sys.argv[1])
root = os.path.join(corpus, "training_results_v5.0")
rows = list(csv.DictReader(open(os.path.join(corpus, "expected/v5.0.verdicts.tsv")), delimiter="\t"))
referee = os.path.abspath("target/release/referee")
env = dict(os.environ, VIRTUAL_ENV=os.path.abspath(".venv"))
nproc = os.cpu_count()

def run(cmd):
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t
    return p.returncode, wall

# 1. Whole corpus, referee, one process, all cores (median of 5).
walls = []
for _ in range(5):
    rc, w = run([referee, "check", "--ruleset", "5.0.0", "--json", root])
    assert rc in (0, 1), rc
    walls.append(w)
ref_total = statistics.median(walls)
# Its peak memory, once more under GNU time.
p = subprocess.run(["/usr/bin/time", "-f", "%M", referee, "check", "--ruleset", "5.0.0", "--json", root],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
ref_total_rss_kib = int(p.stderr.strip().splitlines()[-1])
official_total = sum(float(r["cli_wall_s"]) for r in rows)
official_rss = [int(r["cli_maxrss_kb"]) for r in rows]

# 2. Live sample: 20 logs spread over the corpus, one process per log, both tools.
sample = [rows[i * len(rows) // 20] for i in range(20)]
off_w, ref_w, ref_rss, off_rss = [], [], [], []
for r in sample:
    path = os.path.join(root, r["path"])
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "mlperf_logging.compliance_checker",
                        "--usage", "training", "--ruleset", "5.0.0", "--log_output", "/dev/null", path],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    off_w.append(time.perf_counter() - t)
    off_rss.append(int(p.stderr.strip().splitlines()[-1]))
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", referee, "check", "--ruleset", "5.0.0", "-j", "1", path],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    ref_w.append(time.perf_counter() - t)
    ref_rss.append(int(p.stderr.strip().splitlines()[-1]))

# 3. The official checker at its best: one Python process over the whole
#    corpus (a fresh checker per log, as its CLI makes one; no start-up
#    per log), timed inside that process; its FAIL count must be the
#    corpus's 10.
inproc = r"""
import logging, os, sys, time
logging.disable(logging.CRITICAL)
from mlperf_logging.compliance_checker import mlp_compliance as m
cfg = os.path.join(os.path.dirname(m.__file__), "training_5.0.0", "common.yaml")
paths = [l.rstrip("\n") for l in sys.stdin]
t = time.perf_counter()
fails = 0
for p in paths:
    c = m.make_checker("training", "5.0.0", True, False)
    try:
        ok = c.check_file(p, cfg)
    except Exception:
        ok = False
    fails += not ok
print(time.perf_counter() - t, fails)
"""
p = subprocess.run([sys.executable, "-c", inproc], input="\n".join(os.path.join(root, r["path"]) for r in rows),
                   capture_output=True, text=True, env=env)
inproc_s, inproc_fails = p.stdout.split()
inproc_s = float(inproc_s)
assert int(inproc_fails) == sum(r["verdict"] == "FAIL" for r in rows), p.stdout

def ms(x): return f"{x*1000:8.1f} ms"
print(f"machine: {nproc} cores; official checker: 1 thread per process; referee: {nproc} threads (whole corpus), 1 thread (sample)")
print()
print(f"{'':40} {'referee':>14} {'official':>14} {'ratio':>9}")
print(f"{'whole corpus, official in one process':40} {ref_total:12.2f} s {inproc_s:12.1f} s {inproc_s/ref_total:8.1f}x"
      f"   (both live; official: one Python process, timed inside it; referee: median of 5)")
print(f"{'whole corpus, official one process/log':40} {ref_total:12.2f} s {official_total:12.1f} s {official_total/ref_total:8.0f}x"
      f"   (official: recorded total of its CLI, one process per log)")
mo, mr = statistics.median(off_w), statistics.median(ref_w)
print(f"{'20-log sample, per log (median wall)':40} {ms(mr):>14} {ms(mo):>14} {mo/mr:8.0f}x   (both live, same machine)")
print(f"{'20-log sample, peak RSS per log (median)':40} {statistics.median(ref_rss)/1024:11.1f} MiB {statistics.median(off_rss)/1024:11.1f} MiB")
print(f"{'20-log sample, peak RSS per log (max)':40} {max(ref_rss)/1024:11.1f} MiB {max(off_rss)/1024:11.1f} MiB")
print(f"{'corpus, official peak RSS per log (max)':40} {'':>14} {max(official_rss)/1024:11.1f} MiB")
print(f"{'whole corpus, referee peak RSS':40} {ref_total_rss_kib/1024:11.1f} MiB")

# The history (docs/bench-history.jsonl).
command = os.environ.get("BENCH_COMMAND", "scripts/bench-check.sh")
subject = f"v5.0 corpus ({len(rows):,} logs)"
rec = lambda *a, **k: bench_history.record("bench-check.sh", *a, command=command, **k)
rec("check_corpus_s", "s", subject + ", the official checker in one Python process", round(ref_total, 3),
    peer=round(inproc_s, 2), peer_name="official checker, one Python process", params={"referee_runs": 5},
    note=f"{inproc_s / ref_total:.0f}× faster; referee on {nproc} threads, the official checker on one")
rec("check_corpus_s", "s", subject + ", the official CLI once per log (recorded total)", round(ref_total, 3),
    peer=round(official_total, 1), peer_name="official CLI once per log (recorded total)", note=f"{official_total / ref_total:.0f}×")
rec("check_corpus_rss_mib", "MiB", subject + ", referee's peak RSS", round(ref_total_rss_kib / 1024, 1))
rec("check_log_ms", "ms", "20-log sample, one process per log, median", round(mr * 1000, 1), peer=round(mo * 1000, 1),
    peer_name="official CLI", note=f"{mo / mr:.0f}×; both live on the same machine")
rec("check_rss_mib", "MiB", "peak RSS per log, 20-log sample, median", round(statistics.median(ref_rss) / 1024, 1),
    peer=round(statistics.median(off_rss) / 1024, 1), peer_name="official CLI",
    extra={"max_mib": round(max(ref_rss) / 1024, 1), "peer_max_mib": round(max(off_rss) / 1024, 1)})
