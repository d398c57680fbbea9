#!/usr/bin/env bash
# CI's check of commit messages (scripts/test.sh): every commit after BASE
# has a subject of at most 72 characters and a blank line before its body
# (scripts/commit_msg.py, the rule the commit-msg hook in .githooks/ applies
# when committing). Commits up to BASE are history written before the rule.
#
# Usage: scripts/check-commits.sh [BASE]
#   BASE (default ed35b4b, the last commit with an old-style subject)
#   CHECK_COMMITS_REPO: the repository to check (default: this one)
# Exits 0 with a message, checking nothing, where BASE is not in the clone
# (a shallow clone) or there is no git repository; 1 if a commit breaks the
# rule, naming it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=${CHECK_COMMITS_REPO:-$(dirname "$here")}
base=${1:-ed35b4b}
if ! git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    echo "check-commits: $repo is not a git checkout: skipped" >&2
    exit 0
fi
if ! git -C "$repo" rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
    echo "check-commits: the base commit $base is not in this clone (a shallow clone?): skipped" >&2
    exit 0
fi
n=$(git -C "$repo" rev-list --count "$base..HEAD")
if ! git -C "$repo" log -z --format='%h%x00%B' "$base..HEAD" | python3 "$here/commit_msg.py" --log; then
    echo "check-commits: commit messages after $base that break the rule above (a subject of at most 72 characters, a blank line, the body); reword them (git rebase -i $base)" >&2
    exit 1
fi
echo "check-commits: $n commit(s) after $base, every message as the rule wants" >&2
