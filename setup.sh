#!/usr/bin/env bash
# Set up onnxport in a virtual environment with the test dependencies, and install graphviz's `dot`.
# Usage: bash setup.sh [--torch 2.13|2.15]
#   --torch 2.13 (default): ./.venv, torch 2.13.0+cpu (the CPU build: a wheel pip already finds, else PyTorch's
#                           CPU index, https://download.pytorch.org/whl/cpu)
#   --torch 2.15:           ./.venv-torch2.15, torch 2.15 and torchvision 0.29.2 from the package index
#                           (a CUDA build of several GB, which runs on the CPU; pip's cache keeps it)
set -euo pipefail
cd "$(dirname "$0")"
TORCH=2.13
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --torch) TORCH="$2"; shift ;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if ! command -v dot >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq graphviz >/dev/null) || echo "setup: could not install graphviz (plots will not render)"
  fi
fi
# Chromium, where the system's package manager has it: the report test renders the HTML report headless
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -qq chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)) \
    || echo "setup: could not install chromium (the report's rendering test will skip)"
fi
# The speech toolkits for the speech tests and benchmarks/speech.py, with --no-deps (each would bring its own
# torch, lightning, librosa...) in <venv>/speech-packages, outside site-packages: torchaudio 2.11 (its last
# release) ships a compiled extension built for CUDA and torch 2.11 that does not load beside this torch, so a
# plain `import torchaudio` fails, and so would transformers, which imports it when it finds it.
# tests/third_party.py's import_torchaudio imports it from there with the extension marked unavailable (its
# models, transforms and compliance modules are pure Python). Beside the toolkits, the modules they import
# that the test extras do not bring. ESPnet 202511: later releases need Python >= 3.12.
SPEECH=("torchaudio==2.11.0" "speechbrain==1.1.2" "espnet==202511" "asteroid==0.7.0" "asteroid-filterbanks==0.4.0"
        "encodec==0.1.1" "hyperpyyaml==1.2.3" "ruamel.yaml==0.19.1" "joblib==1.6.0" "einops==0.8.2"
        "soundfile==0.14.0" "cffi==2.1.1" "requests==2.34.2" "urllib3==2.8.0" "certifi==2026.10.19.post1"
        "charset-normalizer==3.5.3")
# diffusers for the UNet test (tests/models/test_unet_diffusers.py), with --no-deps as timm: its dependencies
# (huggingface-hub, safetensors, Pillow, regex, filelock, numpy) come with the test extras, but for requests, whose
# installation its import checks.
DIFFUSERS=("diffusers==0.42.1" "requests==2.34.2" "urllib3==2.8.0" "certifi==2026.10.19.post1"
           "charset-normalizer==3.5.3")
# segmentation-models-pytorch for benchmarks/graph_size.py, with --no-deps as timm: its dependencies (timm,
# torchvision, huggingface-hub, safetensors, Pillow, tqdm, numpy) are installed already.
SMP=("segmentation-models-pytorch==0.6.0")
speech_packages() {
  "$1/bin/pip" install -q --no-deps --no-build-isolation --upgrade --target "$1/speech-packages" "${SPEECH[@]}"
}
case "$TORCH" in
  2.13)
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    # the CPU build by its local version: the index's plain torch==2.13.0 is a CUDA build on Linux. A wheel pip
    # finds already (a --find-links folder of the machine's pip configuration) is taken without asking PyTorch's
    # index; else PyTorch's CPU index is asked too
    if ! .venv/bin/pip install -q "torch==2.13.0+cpu" 2>/dev/null; then
      .venv/bin/pip install -q --extra-index-url https://download.pytorch.org/whl/cpu "torch==2.13.0+cpu"
    fi
    .venv/bin/pip install -q -e ".[test,openvino]"
    # torchvision for the tests and benchmarks, outside the venv's site-packages: the wheel the index serves
    # for torch 2.13 carries compiled ops this CPU build cannot load, so a plain `import torchvision` fails,
    # and so would transformers, which imports it when installed. tests/third_party.py imports it from here,
    # and timm (its other dependencies come with transformers) beside it; diffusers too (DIFFUSERS above).
    .venv/bin/pip install -q --no-deps --upgrade --target .venv/vision-packages "torchvision==0.28.0" "timm==1.0.31" \
      "${DIFFUSERS[@]}" "${SMP[@]}"
    speech_packages .venv
    ;;
  2.15)
    # a machine-wide pip configuration may cap torch below 2.15: this environment reads no pip configuration
    export PIP_CONFIG_FILE=/dev/null
    python3 -m venv .venv-torch2.15
    .venv-torch2.15/bin/pip install -q --upgrade pip
    # the wheels (about 3 GB with the CUDA libraries torch depends on) are kept in a folder of their own,
    # reused by the next set-up on this machine: the package index's responses are not kept by pip's cache
    WHEELS="${ONNXPORT_WHEELS:-$HOME/.cache/onnxport/wheels-torch2.15}"
    TORCH_REQ=("torch==2.15.*" "torchvision==0.29.2")
    if ! .venv-torch2.15/bin/pip install -q --no-index --find-links "$WHEELS" "${TORCH_REQ[@]}" 2>/dev/null; then
      .venv-torch2.15/bin/pip download -q -d "$WHEELS" "${TORCH_REQ[@]}"
      .venv-torch2.15/bin/pip install -q --no-index --find-links "$WHEELS" "${TORCH_REQ[@]}"
    fi
    .venv-torch2.15/bin/pip install -q -e ".[test,openvino]" "timm==1.0.31"
    .venv-torch2.15/bin/pip install -q --no-deps "${DIFFUSERS[@]}" "${SMP[@]}"
    speech_packages .venv-torch2.15
    ;;
  *) echo "setup.sh: --torch takes 2.13 or 2.15" >&2; exit 2 ;;
esac
