#!/usr/bin/env bash
# Prints the python of a venv with torch, numpy and pillow from PyPI (for
# scripts/torch_twin.py and scripts/torch_train.py), creating it once.
# NOT part of CI: the torch wheel is large. VENV (default /tmp/torchvenv).
set -euo pipefail
VENV=${VENV:-/tmp/torchvenv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch, numpy, PIL" 2>/dev/null; then
    echo "creating $VENV with torch, numpy, pillow (large download, once)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch numpy pillow >&2
fi
echo "$VENV/bin/python"
