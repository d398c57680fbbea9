"""Commit messages as the field writes them: a subject of at most 72
characters, then a blank line, then the body (the reasons and figures).

    commit_msg.py FILE      the commit-msg hook's check (.githooks/commit-msg):
                            FILE as git hands it over, comments included
    commit_msg.py --log     the CI check (scripts/check-commits.sh): on stdin,
                            `git log -z --format=%h%x00%B` of the commits to check

Prints one line per problem (the commit, the subject, what is wrong) and
exits 1 if there is any, 2 on a usage error.
"""
import sys

MAX_SUBJECT = 72
# Subjects that `git rebase --autosquash` rewrites before they land: the hook
# lets them through (their length is the original subject's), CI does not.
AUTOSQUASH = ("fixup! ", "squash! ", "amend! ")
SCISSORS = "------------------------ >8 ------------------------"


def clean(text, comment_char="#"):
    """The message as git stores it: comment lines and everything below the
    scissors line dropped, blank lines at either end removed."""
    lines = []
    for line in text.splitlines():
        if line.startswith(comment_char):
            if SCISSORS in line:
                break
            continue
        lines.append(line.rstrip())
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def problems(lines, autosquash_ok):
    """What is wrong with a cleaned message (empty: nothing)."""
    if not lines:
        return ["the message is empty"]
    out = []
    subject = lines[0]
    counted = subject
    while True:
        prefix = next((p for p in AUTOSQUASH if counted.startswith(p)), None)
        if prefix is None:
            break
        if not autosquash_ok and counted is subject:
            out.append(f"a {prefix.strip()} commit: squash it into the commit it amends before it lands")
        counted = counted[len(prefix):]
    if len(counted) > MAX_SUBJECT:
        out.append(f"the subject is {len(counted)} characters long (at most {MAX_SUBJECT}): "
                   "say what the commit does in the subject, why and the figures in the body")
    if len(lines) > 1 and lines[1].strip():
        out.append("line 2 is not blank: a blank line separates the subject from the body")
    return out


def main(argv):
    if len(argv) == 2 and argv[1] != "--log":
        try:
            with open(argv[1], encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"commit-msg: {e}", file=sys.stderr)
            return 2
        lines = clean(text)
        found = problems(lines, autosquash_ok=True)
        for p in found:
            print(f"commit-msg: {p}", file=sys.stderr)
        if found:
            subject = lines[0] if lines else ""
            print(f"commit-msg: subject: {subject!r}; the message is kept in {argv[1]}", file=sys.stderr)
        return 1 if found else 0
    if len(argv) == 2 and argv[1] == "--log":
        data = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        fields = data.split("\0")
        if fields and fields[-1].strip() == "":
            fields.pop()
        bad = 0
        for i in range(0, len(fields) - 1, 2):
            commit, message = fields[i].strip(), fields[i + 1]
            lines = clean(message, comment_char="\0")  # stored messages have no comments
            for p in problems(lines, autosquash_ok=False):
                subject = lines[0] if lines else ""
                print(f"{commit} {subject[:60]!r}: {p}")
                bad += 1
        return 1 if bad else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
