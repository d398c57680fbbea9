"""One line per measurement in docs/bench-history.jsonl: what the bench
scripts append their figures with (docs/performance.md, "The history").

From Python (the bench_*.py drivers):

    import bench_history
    bench_history.record("bench-check.sh", "check_corpus_s", "s", "v5.0 corpus",
                         referee=0.36, peer=26.1, peer_name="official checker")

From a shell script that sources scripts/bench-machine.sh:

    bench_record metric=step_ms unit=ms subject="mini_llm b16" referee=55.3 \
        peer=117.2 peer_name="PyTorch compiled-step" params.ROUNDS=2

(`key=value`: a number where it reads as one, `null`, `true`/`false`, else
text; `key:=JSON` for a list or an object; `params.K=V` and `extra.K=V`
fill those objects.) Each row gets the date and time (UTC), the machine
line of scripts/bench-machine.sh, the CPU's model name, family and model,
the number of CPUs and the commit (with a note when the working tree has
uncommitted changes). `ratio`, where the caller gives none, is referee ÷
peer; the caller gives it for rates (GFLOP/s, MB/s), where the convention
is referee's time ÷ the peer's, below 1: referee faster.

Environment: BENCH_HISTORY (the file; empty or `off`: record nothing),
BENCH_KEPT (`false` for an experiment that is not kept), BENCH_NOTE (a
note for every row of the run), BENCH_VIA (the script that ran this one).
"""
import datetime
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "docs", "bench-history.jsonl")
# Every row has these keys (docs/performance.md; tests/tests/docs.rs checks the file).
REQUIRED = ("date", "machine", "cpu", "family", "model", "cores", "commit", "script", "params",
            "metric", "unit", "subject", "referee", "peer", "ratio", "kept", "note")


# The order of the keys in a row (others follow it).
ORDER = ("date", "date_note", "time_utc", "machine", "cpu", "family", "model", "cores", "session", "commit",
         "commit_note", "script", "via", "command", "params", "kernels", "isa", "threads", "load", "metric", "unit",
         "subject", "referee", "peer_name", "peer", "ratio", "peer_forms", "runs_referee", "runs_peer", "extra",
         "marks", "kept", "note")
# What the recorder fills in itself: a caller cannot set these.
AUTO = ("date", "time_utc", "machine", "cpu", "family", "model", "cores", "commit", "commit_note", "via")


def history_path():
    """The file rows go to, or None when recording is off."""
    p = os.environ.get("BENCH_HISTORY")
    if p is None:
        return DEFAULT
    if p.strip() in ("", "off", "0"):
        return None
    return p


def _cpuinfo(field):
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == field:
                    return value.strip()
    except OSError:
        pass
    return None


def _run(argv):
    try:
        p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def machine_line():
    """The line scripts/bench-machine.sh prints (one definition of it)."""
    line = _run(["bash", "-c", ". scripts/bench-machine.sh && bench_machine_line"])
    if line and line.startswith("machine: "):
        return line[len("machine: "):]
    return f"{_cpuinfo('model name') or 'unknown CPU'} ({os.cpu_count()} CPUs)"


def commit():
    """(short commit, note or None)."""
    head = _run(["git", "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return head, ("with uncommitted changes" if dirty else None)


def _int(s):
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


def _number(x, key):
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{key}: expected a finite number or null, got {x!r}")
    return x


def make_row(script, metric, unit, subject, referee, peer=None, peer_name=None, ratio=None,
             params=None, note="", kept=None, **more):
    now = datetime.datetime.now(datetime.timezone.utc)
    head, dirty = commit()
    row = {
        "date": now.date().isoformat(),
        "time_utc": now.strftime("%H:%M"),
        "machine": machine_line(),
        "cpu": _cpuinfo("model name") or "unknown",
        "family": _int(_cpuinfo("cpu family")),
        "model": _int(_cpuinfo("model")),
        "cores": os.cpu_count(),
        "commit": head,
    }
    if dirty:
        row["commit_note"] = dirty
    row["script"] = script if script.startswith("scripts/") else "scripts/" + script
    via = os.environ.get("BENCH_VIA")
    if via:
        row["via"] = via
    if os.environ.get("ISA"):
        row["isa"] = os.environ["ISA"]
    row["params"] = dict(params or {})
    row.update(metric=metric, unit=unit, subject=subject)
    row["referee"] = _number(referee, "referee")
    if peer_name is not None:
        row["peer_name"] = peer_name
    row["peer"] = _number(peer, "peer")
    if ratio is None and row["referee"] is not None and row["peer"]:
        ratio = round(row["referee"] / row["peer"], 4)
    row["ratio"] = _number(ratio, "ratio")
    for k, v in more.items():
        if k in row or k in AUTO:
            raise ValueError(f"{k}: set by the recorder, not by the caller")
        row[k] = v
    if kept is None:
        kept = os.environ.get("BENCH_KEPT", "true").strip().lower() not in ("false", "0", "no")
    row["kept"] = bool(kept)
    notes = [n for n in (note, os.environ.get("BENCH_NOTE", "").strip()) if n]
    row["note"] = "; ".join(notes)
    if not row["kept"] and not row["note"]:
        raise ValueError("a row that is not kept needs a note saying what was tried (BENCH_NOTE)")
    first = [k for k in ORDER if k in row]
    return {k: row[k] for k in first + [k for k in row if k not in ORDER]}


def record(script, metric, unit, subject, referee, **kw):
    """Appends one row; returns it (None when recording is off)."""
    path = history_path()
    if path is None:
        return None
    row = make_row(script, metric, unit, subject, referee, **kw)
    line = json.dumps(row, ensure_ascii=False)
    # One write of one line in append mode: rows of two benchmarks that
    # finish at once do not interleave.
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    shown = os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path
    print(f"bench history: {row['metric']} {row['subject']}: appended to {shown}", file=sys.stderr)
    return row


# Keys whose values stay text even where they read as numbers.
# Git revisions among them: 1234567 is a commit, not a number.
TEXT = ("script", "unit", "subject", "peer_name", "note", "command", "load",
        "params.OLD", "params.NEW", "params.BEFORE", "params.AFTER")


def _value(text):
    if text == "null":
        return None
    if text in ("true", "false"):
        return text == "true"
    for conv in (int, float):
        try:
            v = conv(text)
        except ValueError:
            continue
        if isinstance(v, float) and not math.isfinite(v):
            break
        return v
    return text


def main(argv):
    if len(argv) < 2 or argv[1] != "add":
        sys.exit("usage: bench_history.py add script=NAME metric=M unit=U subject=S referee=X [key=value | key:=JSON | params.K=V | extra.K=V]...")
    fields, params, extra = {}, {}, {}
    for arg in argv[2:]:
        key, sep, raw = arg.partition("=")
        if not sep or not key:
            sys.exit(f"bench_history.py: expected key=value or key:=JSON, got {arg!r}")
        if key.endswith(":"):
            key = key[:-1]
            try:
                value = json.loads(raw)
            except ValueError as e:
                sys.exit(f"bench_history.py: {key}: not JSON ({e}): {raw!r}")
        elif key in TEXT:
            value = raw
        else:
            value = _value(raw)
        if key.startswith("params."):
            params[key[len("params."):]] = value
        elif key.startswith("extra."):
            extra[key[len("extra."):]] = value
        else:
            fields[key] = value
    missing = [k for k in ("script", "metric", "unit", "subject", "referee") if k not in fields]
    if missing:
        sys.exit(f"bench_history.py: missing {', '.join(missing)}")
    if ("params" in fields and params) or ("extra" in fields and extra):
        sys.exit("bench_history.py: give params (and extra) as params.K=V (extra.K=V) or as one params:=JSON, not both")
    for k in ("params", "extra"):
        if k in fields and not isinstance(fields[k], dict):
            sys.exit(f"bench_history.py: {k}: expected a JSON object")
    if extra:
        fields["extra"] = extra
    try:
        params = fields.pop("params", params)
        record(fields.pop("script"), fields.pop("metric"), fields.pop("unit"), fields.pop("subject"),
               fields.pop("referee"), params=params, **fields)
    except (TypeError, ValueError, OSError) as e:
        sys.exit(f"bench_history.py: {e}")


if __name__ == "__main__":
    main(sys.argv)
