#!/usr/bin/env bash
# One-time set-up for referee on a fresh machine (idempotent):
#   * .venv/ with the official MLCommons tools, mlperf-logging 4.1.68: referee
#     reads their rule files and RCP tables at run time, and the tests use them
#     as the peer to match;
#   * with --for-tests, the system packages the tests need (OpenSSH's
#     ssh-keygen, headless Chromium, Open MPI) — see scripts/install-ci-deps.sh;
#   * in a git checkout, the repository's hooks (.githooks/: commit messages
#     as the field writes them), unless the checkout already names others.
set -euo pipefail
cd "$(dirname "$0")/.."

MLPERF_LOGGING_VERSION=4.1.68

if [ "${1:-}" = "--for-tests" ] && [ -x scripts/install-ci-deps.sh ]; then
  scripts/install-ci-deps.sh
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  python3 -m venv .venv
fi
have=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mlperf-logging"))' 2>/dev/null || true)
if [ "$have" != "$MLPERF_LOGGING_VERSION" ]; then
  echo "setup: installing mlperf-logging==$MLPERF_LOGGING_VERSION into .venv" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "mlperf-logging==$MLPERF_LOGGING_VERSION"
fi
# The commit-msg hook the repository ships (a user's own hooks path is left
# as it is, with a note).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  hooks=$(git config --get core.hooksPath || true)
  if [ -z "$hooks" ]; then
    git config core.hooksPath .githooks
    echo "setup: commit messages checked by .githooks/commit-msg (git config core.hooksPath .githooks)" >&2
  elif [ "$hooks" != .githooks ]; then
    echo "setup: core.hooksPath is $hooks: .githooks/commit-msg not enabled" >&2
  fi
fi
