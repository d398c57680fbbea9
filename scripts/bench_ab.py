"""Two referee binaries, alternating in one run (scripts/bench-ab.sh).

Usage: bench_ab.py OLD_BINARY NEW_BINARY

For each of PAIRS pairs, in an order that alternates which side goes first:
  * check: `referee check --ruleset 5.0.0 --json CORPUS/training_results_v5.0`
    (stdout kept: both sides must print the same verdicts);
  * exec: `referee run --exec --runs 1` of tests/fixtures/exec/fake_lora.py
    with LINES extra MLLOG lines on stdout, and that program alone (its
    output to files, the same environment) just before it.
Wall time (time.perf_counter around the child) and peak RSS (the child's
ru_maxrss from wait4, which covers the referee process, not its children:
the program's own memory is not counted against referee).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_history  # noqa: E402  (the history: docs/bench-history.jsonl)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(REPO, "tests", "fixtures", "exec", "fake_lora.py")
PY = sys.executable


def timed(argv, stdout, cwd=None, env=None):
    """(wall s, peak RSS MiB, exit code) of one command."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                         cwd=cwd, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss / 1024, p.returncode


def check(binary, corpus, tmp, tag):
    out = os.path.join(tmp, f"check-{tag}.jsonl")
    with open(out, "wb") as f:
        wall, rss, code = timed([binary, "check", "--ruleset", "5.0.0", "--json", corpus], f)
    if code not in (0, 1):
        sys.exit(f"{binary} check exited {code}")
    verdicts = []
    with open(out, encoding="utf-8") as f:
        for line in f:
            v = json.loads(line)
            if "path" in v:
                verdicts.append((v["path"], v.get("verdict")))
    return wall, rss, sorted(verdicts)


def alone(tmp, lines):
    env = dict(os.environ, SEED="11", COMPLIANCE_FILE=os.path.join(tmp, "alone_mllog.txt"),
               PYTHONUNBUFFERED="1")
    open(env["COMPLIANCE_FILE"], "w").close()
    with open(os.path.join(tmp, "alone_out.txt"), "wb") as f:
        wall, _, code = timed([PY, FAKE, "--extra-lines", str(lines)], f, env=env)
    if code != 0:
        sys.exit(f"the program alone exited {code}")
    return wall


def exec_run(binary, tmp, lines, i, tag):
    out = os.path.join(tmp, f"exec-{tag}-{i}")
    argv = [binary, "run", "--exec", "--benchmark", "llama2_70b_lora", "--ruleset", "5.0.0",
            "--runs", "1", "--seed", "11", "--cache-clear-cmd", "true", "--json", "-q",
            "--out", out, "--", PY, FAKE, "--extra-lines", str(lines)]
    with open(os.path.join(tmp, f"exec-{tag}-{i}.json"), "wb") as f:
        wall, rss, code = timed(argv, f, cwd=tmp)
    if code != 0:
        sys.exit(f"{binary} run --exec exited {code}")
    return wall, rss


def med(xs):
    return statistics.median(xs)


def main():
    old, new = sys.argv[1], sys.argv[2]
    # Both sides read the official rules from the repository's environment
    # (an older referee looked for them only in the current directory's).
    venv = os.path.join(REPO, ".venv")
    os.environ.setdefault("VIRTUAL_ENV", venv)
    os.environ["PATH"] = os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", "")
    pairs = int(os.environ.get("PAIRS", "7"))
    corpus = os.path.join(os.environ.get("CORPUS", os.path.join(REPO, "..", "shared", "corpus")),
                          "training_results_v5.0")
    lines = int(os.environ.get("LINES", "1000000"))
    old_rev, new_rev = os.environ.get("OLD_REV", old), os.environ.get("NEW_REV", new)
    print(f"old: {old_rev} ({old})\nnew: {new_rev} ({new})\n{pairs} pairs, alternating; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'pair':>4} {'check old s':>11} {'new s':>7} {'old MiB':>8} {'new MiB':>8} "
          f"{'exec old s':>10} {'new s':>7} {'alone s':>8} {'old MB':>7} {'new MB':>7}")
    c = {"old": ([], []), "new": ([], [])}
    e = {"old": ([], []), "new": ([], [])}
    a = []
    verdicts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in range(pairs):
            order = ("old", "new") if p % 2 == 0 else ("new", "old")
            for side in order:
                wall, rss, v = check(old if side == "old" else new, corpus, tmp, side)
                c[side][0].append(wall)
                c[side][1].append(rss)
                verdicts[side] = v
            for side in order:
                a.append(alone(tmp, lines))
                wall, rss = exec_run(old if side == "old" else new, tmp, lines, p, side)
                e[side][0].append(wall)
                e[side][1].append(rss)
            print(f"{p + 1:4d} {c['old'][0][-1]:11.3f} {c['new'][0][-1]:7.3f} {c['old'][1][-1]:8.1f} "
                  f"{c['new'][1][-1]:8.1f} {e['old'][0][-1]:10.2f} {e['new'][0][-1]:7.2f} {a[-1]:8.2f} "
                  f"{e['old'][1][-1] * 1.048576:7.0f} {e['new'][1][-1] * 1.048576:7.0f}")
    same = verdicts["old"] == verdicts["new"]
    n_logs = len(verdicts["new"])
    print(f"verdicts: {'the same on both sides' if same else 'DIFFER'} ({n_logs} logs)")
    mc = {s: (med(c[s][0]), med(c[s][1])) for s in c}
    me = {s: (med(e[s][0]), med(e[s][1])) for s in e}
    ma = med(a)
    print(f"check, v5.0 corpus: old {mc['old'][0]:.3f} s {mc['old'][1]:.1f} MiB; "
          f"new {mc['new'][0]:.3f} s {mc['new'][1]:.1f} MiB; new/old {mc['new'][0] / mc['old'][0]:.3f} time, "
          f"{mc['new'][1] / mc['old'][1]:.3f} memory")
    print(f"run --exec, {lines:,} lines: program alone {ma:.2f} s; old {me['old'][0]:.2f} s "
          f"({me['old'][0] / ma:.3f}× alone) {me['old'][1] * 1.048576:.0f} MB; new {me['new'][0]:.2f} s "
          f"({me['new'][0] / ma:.3f}× alone) {me['new'][1] * 1.048576:.0f} MB")
    command = os.environ.get("BENCH_COMMAND", "scripts/bench-ab.sh")
    params = {"OLD": old_rev, "NEW": new_rev, "PAIRS": pairs, "LINES": lines}
    bench_history.record("bench-ab.sh", "check_corpus_s", "s", "referee check --json, v5.0 corpus, new against old",
                         round(mc["new"][0], 4), peer=round(mc["old"][0], 4), peer_name=f"referee at {old_rev}",
                         command=command, params=params,
                         extra={"new_peak_rss_mib": round(mc["new"][1], 1), "old_peak_rss_mib": round(mc["old"][1], 1),
                                "logs": n_logs, "same_verdicts": same})
    bench_history.record("bench-ab.sh", "exec_wall_s", "s", f"run --exec, {lines:,} MLLOG lines, new against alone",
                         round(me["new"][0], 3), peer=round(ma, 3), peer_name="the program alone",
                         command=command, params=params,
                         extra={"old_wall_s": round(me["old"][0], 3),
                                "new_peak_rss_mb": round(me["new"][1] * 1.048576),
                                "old_peak_rss_mb": round(me["old"][1] * 1.048576)})
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
