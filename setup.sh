#!/usr/bin/env bash
# Set up onnxport in ./.venv (PyTorch pinned to the CPU build) and install graphviz's `dot`.
# Usage: bash setup.sh [--no-demo]
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v dot >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq graphviz >/dev/null) || echo "setup: could not install graphviz (plots will not render)"
  fi
fi
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q "torch==2.13.0"
.venv/bin/pip install -q -e ".[test]"
# torchvision for the tests and benchmarks, outside the venv's site-packages: the wheel the index serves
# for torch 2.13 carries compiled ops this CPU build cannot load, so a plain `import torchvision` fails,
# and so would transformers, which imports it when installed. tests/third_party.py imports it from here,
# and timm (its other dependencies come with transformers) beside it.
.venv/bin/pip install -q --no-deps --upgrade --target .venv/vision-packages "torchvision==0.28.0" "timm==1.0.31"
