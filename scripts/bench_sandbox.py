"""What the audit's sandbox costs a re-run, measured in one run, interleaved
(sandboxed, unsandboxed, sandboxed, ...) so that both sides see the same
machine load; medians and the ratio are printed and recorded in the history
(docs/bench-history.jsonl).

The package: ten runs of tests/fixtures/exec/fake_lora.py (a llama2_70b_lora
stand-in that logs with the official mlperf_logging.mllog, which it carries
in its code) made by `referee run --exec`, packaged with its code and
signed. Each side is `referee audit --rerun 1 --allow-exec --rerun-seed
recorded` of it: wall time of the whole audit (verify, package check,
witness, the re-run, the comparison), and, separately, the re-run alone (the
program's spawn to its result file in place, as the re-run's record of its
supervision says). The two sides differ only in `--sandbox bwrap` versus
`--sandbox none` (as root, both run the program as `nobody`).

Usage: scripts/bench-sandbox.sh [PAIRS] [STEP_MS]   (default 7 pairs, 20 ms
per step of the fake program, which makes a re-run last a few seconds).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_history  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFEREE = os.path.join(REPO, "target", "release", "referee")
FAKE = os.path.join(REPO, "tests", "fixtures", "exec", "fake_lora.py")


def python_nobody_can_run():
    """As root, the re-run runs as nobody: an interpreter it can read."""
    if os.geteuid() != 0:
        return sys.executable
    for p in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        ok = os.path.isfile(p)
        d = p
        while ok and d != "/":
            d = os.path.dirname(d)
            ok = bool(os.stat(d).st_mode & 0o001)
        if ok:
            return p
    sys.exit("bench-sandbox: as root, a Python interpreter the user nobody can read is needed")


def run(cmd, cwd=None, env=None):
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"bench-sandbox: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


def package(root, step_ms):
    """The signed package and the key's fingerprint."""
    work = os.path.join(root, "work")
    os.makedirs(os.path.join(work, "mlperf_logging"))
    shutil.copy(FAKE, work)
    import mlperf_logging  # the official package, from this environment
    src = os.path.dirname(mlperf_logging.__file__)
    shutil.copy(os.path.join(src, "__init__.py"), os.path.join(work, "mlperf_logging"))
    shutil.copytree(os.path.join(src, "mllog"), os.path.join(work, "mlperf_logging", "mllog"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    runs = os.path.join(root, "runs")
    run([REFEREE, "run", "--exec", "--benchmark", "llama2_70b_lora", "--ruleset", "5.0.0",
         "--runs", "10", "--seed", "11", "--cache-clear-cmd", "true", "--json", "-q",
         "--out", runs, "--", python_nobody_can_run(), "fake_lora.py", "--step-ms", str(step_ms)],
        cwd=work)
    pkg = os.path.join(root, "pkg")
    run([REFEREE, "package", runs, "--out", pkg, "--code", work, "--json"])
    org = os.path.join(pkg, "referee")
    key = os.path.join(root, "key")
    fp = json.loads(run([REFEREE, "keygen", "--out", key, "--json"]).stdout)["fingerprint"]
    run([REFEREE, "sign", org, "--key", key])
    return org, fp


def audit(root, org, fp, sandbox, i):
    out = os.path.join(root, f"audit-{sandbox}-{i}")
    cmd = [REFEREE, "audit", org, "--json", "--out", out, "--signer", fp, "--rerun", "1",
           "--allow-exec", "--rerun-seed", "recorded", "--sandbox", sandbox]
    t = time.perf_counter()
    p = run(cmd)
    wall = time.perf_counter() - t
    report = json.loads(p.stdout)
    rerun = report["reruns"][0]
    if report["verdict"] != "PASS":
        sys.exit(f"bench-sandbox: the {sandbox} audit did not pass:\n{json.dumps(report, indent=1)[:4000]}")
    # The re-run alone: the supervision's own measure, from its MLLOG times.
    log = os.path.join(rerun["rerun_dir"], "result_0.txt")
    times = [json.loads(line.split(":::MLLOG ", 1)[1])["time_ms"]
             for line in open(log) if ":::MLLOG " in line]
    return wall, (max(times) - min(times)) / 1000.0


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    step_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    root = tempfile.mkdtemp(prefix="referee-bench-sandbox-")
    os.chmod(root, 0o755)
    try:
        org, fp = package(root, step_ms)
        sides = {"bwrap": [], "none": []}
        for i in range(pairs):
            for sandbox in ("bwrap", "none") if i % 2 == 0 else ("none", "bwrap"):
                sides[sandbox].append(audit(root, org, fp, sandbox, i))
        med = {k: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v))
               for k, v in sides.items()}
        print(f"{pairs} alternating pairs, fake_lora --step-ms {step_ms:g}, "
              f"{'as root (the program runs as nobody)' if os.geteuid() == 0 else 'as a user'}")
        print(f"{'':22}{'bwrap':>10}{'none':>10}{'ratio':>8}")
        for j, what in enumerate(("whole audit (s)", "re-run's log span (s)")):
            b, n = med["bwrap"][j], med["none"][j]
            print(f"{what:22}{b:10.3f}{n:10.3f}{b / n:8.3f}")
        bench_history.record("bench-sandbox.sh", "audit_rerun_s", "s",
                             f"audit --rerun 1, fake_lora --step-ms {step_ms:g}",
                             referee=med["bwrap"][0], peer=med["none"][0],
                             peer_name="--sandbox none", params={"PAIRS": pairs})
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
