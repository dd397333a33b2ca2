#!/usr/bin/env bash
# Install the peer tools for bench_pack.py into benchmarks/work/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p work
(cd work && npm install --silent repomix@1.18.1)
python3 -m venv work/venv
work/venv/bin/pip install -q gitingest==0.3.1
echo "repomix:   $(pwd)/work/node_modules/.bin/repomix"
echo "gitingest: $(pwd)/work/venv/bin/gitingest"
