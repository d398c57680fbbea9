"""Supervision overhead of `referee run --exec`, measured in one run,
interleaved (alone, supervised, alone, supervised, ...) so that both see the
same machine load; medians and the ratio are printed.

Programs (tests/fixtures/exec/fake_lora.py, a llama2_70b_lora stand-in that
logs with the official mlperf_logging.mllog):
  * flood: 1,000,000 extra MLLOG lines on stdout plus its ~70 lifecycle lines
    in COMPLIANCE_FILE;
  * sleep: a program that sleeps 3 s and logs nothing.
"Alone" is the program with the same environment (SEED, COMPLIANCE_FILE),
its stdout and stderr written to files, as a batch system would. "Supervised"
is `referee run --exec --runs 1` of it: wall time of the whole command (spawn,
live reading and dedup of every line, witness, atomic result file parsed as
it is written, then the 5.0.0 rules over the parsed log), and separately the
supervision alone (spawn → result file in place) and the closing check (what
is left of it once the program has ended).
Threads: the program is one Python process that writes its stdout and stderr
to files in the run directory itself; referee follows those files and the
MLLOG file on one thread (woken by inotify; it hashes the captures and splits
lines), handles lines (deduplication, writing the result, parsing it as
written) on one, writes and hashes the result on one and waits for its data
to reach the disk on one (all at nice 10; the program keeps the priority of
the command), waits for the program's exit on one; the rules then run on one.

"| cat" is what a supervisor that reads the output from a pipe costs at
least: the program's stdout through a pipe to `cat`, which writes it to a
file, and nothing else (referee no longer uses pipes; it also hashes, parses
and writes the result file).

Live-check delay: a program logs lora_rank 8 (closed division: 16) and then
would train forever; the delay is from the moment referee read init_stop to
the SIGTERM it sent (`stop_delay_ms` of the run record).
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
import bench_history  # noqa: E402  (the history: docs/bench-history.jsonl)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFEREE = os.path.join(REPO, "target", "release", "referee")
FAKE = os.path.join(REPO, "tests", "fixtures", "exec", "fake_lora.py")
PY = sys.executable


def alone(tmp, argv, through_cat=False):
    """The program alone, its stdout and stderr written to files. With
    `through_cat`: the floor of any supervisor that captures the output —
    stdout through a pipe to a second process (`cat`) that writes it to the
    file, and nothing else (no parsing, hashing or second copy)."""
    name = "piped" if through_cat else "alone"
    env = dict(os.environ, SEED="11", COMPLIANCE_FILE=os.path.join(tmp, f"{name}_mllog.txt"),
               PYTHONUNBUFFERED="1")
    open(env["COMPLIANCE_FILE"], "w").close()
    with open(os.path.join(tmp, f"{name}_out.txt"), "wb") as out, \
         open(os.path.join(tmp, f"{name}_err.txt"), "wb") as err:
        t = time.perf_counter()
        cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=out) if through_cat else None
        subprocess.run(argv, env=env, stdout=cat.stdin if cat else out, stderr=err,
                       stdin=subprocess.DEVNULL, check=True)
        if cat:
            cat.stdin.close()
            cat.wait()
        return time.perf_counter() - t


def supervised(tmp, argv, i):
    out = os.path.join(tmp, f"sup{i}")
    cmd = [REFEREE, "run", "--exec", "--benchmark", "llama2_70b_lora", "--ruleset", "5.0.0",
           "--runs", "1", "--seed", "11", "--cache-clear-cmd", "true", "--json", "-q",
           "--out", out, "--"] + argv
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, cwd=tmp)
    wall = time.perf_counter() - t
    s = json.loads(p.stdout)
    shutil.rmtree(out, ignore_errors=True)
    return wall, s["runs"][0]["supervised_seconds"], s["check_seconds"], s


def med(xs):
    return statistics.median(xs)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    programs = {
        "flood (1,000,000 MLLOG lines)": [PY, FAKE, "--extra-lines", "1000000"],
        "sleep 3 s": [PY, "-c", "import time; time.sleep(3)"],
    }
    print(f"referee run --exec overhead, {reps} interleaved repetitions each, "
          f"{os.cpu_count()} CPUs; medians")
    print()
    print(f"{'program':32} {'alone s':>8} {'referee s':>9} {'ratio':>6} "
          f"{'supervised s':>12} {'ratio':>6} {'check s':>8} {'| cat s':>8} {'ratio':>6}")
    command = os.environ.get("BENCH_COMMAND", f"scripts/bench-exec.sh {reps}")
    recorded = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in programs.items():
            a, w, sv, ck, pc = [], [], [], [], []
            for i in range(reps):
                # The order rotates: the run after another one can be slower.
                for step in (0, 1, 2)[i % 3:] + (0, 1, 2)[:i % 3]:
                    if step == 0:
                        a.append(alone(tmp, argv))
                    elif step == 1:
                        wall, sup, check, _ = supervised(tmp, argv, i)
                        w.append(wall)
                        sv.append(sup)
                        ck.append(check)
                    else:
                        pc.append(alone(tmp, argv, through_cat=True))
            print(f"{name:32} {med(a):8.2f} {med(w):9.2f} {med(w) / med(a):6.3f} "
                  f"{med(sv):12.2f} {med(sv) / med(a):6.3f} {med(ck):8.2f} "
                  f"{med(pc):8.2f} {med(pc) / med(a):6.3f}")
            recorded.append((name, med(w), med(a), {
                "supervision_s": round(med(sv), 3), "supervision_ratio": round(med(sv) / med(a), 4),
                "closing_check_s": round(med(ck), 3), "pipe_cat_s": round(med(pc), 3),
                "pipe_cat_ratio": round(med(pc) / med(a), 4)}))
        delays, walls = [], []
        for i in range(reps):
            wall, _, _, s = supervised(tmp, [PY, FAKE, "--lora-rank", "8", "--hang"], 100 + i)
            delays.append(s["runs"][0]["stop_delay_ms"])
            walls.append(wall)
    print()
    print(f"live-check delay (init_stop read → SIGTERM), {reps} runs: "
          f"median {med(delays):.1f} ms, max {max(delays):.1f} ms; "
          f"whole command median {med(walls):.2f} s")
    for name, wall, alone_s, extra in recorded:
        bench_history.record("bench-exec.sh", "exec_wall_s", "s", name, round(wall, 3), peer=round(alone_s, 3),
                             peer_name="the program alone", command=command, params={"REPS": reps}, extra=extra,
                             note="medians; interleaved with the program alone and with | cat")
    bench_history.record("bench-exec.sh", "live_check_delay_ms", "ms",
                         "init_stop read → SIGTERM for a closed-division violation (lora_rank 8)", round(med(delays), 2),
                         command=command, params={"REPS": reps}, extra={"max_ms": round(max(delays), 2)})


if __name__ == "__main__":
    main()
