#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian 12 machine (root, package registries only). Re-running it is fast:
# every step checks first and does nothing twice.
#   1. Debian packages: docker.io (the engine), debootstrap (offline image builds), chromium (the headless
#      browser tests/test_ui_browser.py drives both UIs with), postgresql (server binaries only: the throwaway
#      cluster tests/test_postgres_scale_out.py starts; Debian's own default cluster is not started here)
#   2. the Docker engine: started in the background when installed but not running
#   3. the virtual environment .venv with the pinned packages (re-installed only when pyproject.toml changes)
#   4. the sandbox image (rebuilt only when sandbox_images/base changes)
#   5. the Dagster instance folder under the data folder, with the gpu pool limited to 1
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export BASHGYM_HOME="${BASHGYM_HOME:-$ROOT/.bashgym}"
PY="${PYTHON:-python3}"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf '\033[31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }

# 1. Debian packages ---------------------------------------------------------------------------------------
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
"$PY" -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing Debian packages: ${need[*]}. Install them as root: apt-get install -y ${need[*]}"
  log "installing Debian packages: ${need[*]} (about a minute)"
  export DEBIAN_FRONTEND=noninteractive
  if [[ " ${need[*]} " == *" postgresql "* ]]; then  # binaries only: no always-on "main" cluster on port 5432
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/bashgym.conf
  fi
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# 2. the Docker engine -------------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "the Docker engine is not running and only root can start it: run 'sudo dockerd &' or 'sudo systemctl start docker'"
  log "starting the Docker engine (log: /var/log/dockerd.log)"
  setsid nohup dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || die "dockerd did not come up within 60 s. Last lines of /var/log/dockerd.log:
$(tail -n 15 /var/log/dockerd.log 2>/dev/null)"
fi

# 3. the virtual environment -------------------------------------------------------------------------------
stamp=".venv/.bashgym-installed"
want="$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing Python packages into .venv (about 3 minutes the first time)"
  # (pip's notes about configured package folders that do not exist on this machine are filtered out)
  quiet_pip() { .venv/bin/pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
  # torch first, pinned. Without an NVIDIA GPU: the CPU build (torch==2.13.0+cpu, ~200 MB), from the configured
  # package sources if one has it, else from PyTorch's CPU index; PyPI's own Linux wheel would pull several GB of
  # CUDA libraries that such a machine cannot use. With a GPU: PyPI's CUDA build.
  if command -v nvidia-smi >/dev/null 2>&1 || ls /dev/nvidia0 >/dev/null 2>&1; then
    quiet_pip install -q "torch==2.13.0"
  elif ! quiet_pip install -q "torch==2.13.0+cpu" 2>/dev/null; then
    log "no GPU: installing the CPU build of torch from PyTorch's CPU index"
    quiet_pip install -q "torch==2.13.0+cpu" --extra-index-url https://download.pytorch.org/whl/cpu
  fi
  quiet_pip install -q -e '.[dev]'
  echo "$want" > "$stamp"
fi

# 4. the sandbox image -------------------------------------------------------------------------------------
.venv/bin/python -m bashgym_assets.images

# 5. the Dagster instance ----------------------------------------------------------------------------------
DAGSTER_HOME="$(.venv/bin/python -c 'from bashgym_assets.instance import ensure_dagster_home; print(ensure_dagster_home())')"
export DAGSTER_HOME
# (the limit lives in the instance's storage: one marker per storage, SQLite or each BASHGYM_DAGSTER_PG_URL)
marker="$DAGSTER_HOME/.gpu-pool-set${BASHGYM_DAGSTER_PG_URL:+-$(printf %s "$BASHGYM_DAGSTER_PG_URL" | sha256sum | cut -c1-12)}"
if [ ! -f "$marker" ]; then
  .venv/bin/dagster instance concurrency set gpu 1 >/dev/null
  touch "$marker"
fi
# 6. the offline base model ------------------------------------------------------------------------------
# SmolLM2-135M-Instruct from its offline package, converted once to a transformers folder in the data folder
# (about 45 s on 2 cores; later runs find it and return at once). Skipped when BASHGYM_BASE_MODEL names another.
if [ -z "${BASHGYM_BASE_MODEL:-}" ]; then
  .venv/bin/python -c 'from bashgym_assets.training.base_model import default_model_dir, MARKER, prepare_smollm2
if not (default_model_dir() / MARKER).exists():
    print("preparing the offline base model (SmolLM2-135M-Instruct, about 45 s the first time)", flush=True)
    print("base model:", prepare_smollm2().path)'
fi

# 7. llama.cpp for the export's GGUF verification ---------------------------------------------------------
# node-llama-cpp's prebuilt linux-x64 CPU binary, at the exact version tools/llama/package-lock.json pins (no
# compiler, no GPU, no download at test time). `npm ci` runs again only when the lock file changes;
# --omit=optional leaves out the other platforms' and the CUDA/Vulkan builds, --ignore-scripts the package's
# postinstall (which would try to download and build llama.cpp where no prebuilt fits). The probe then loads the
# binary with build "never": it fails here, loudly, rather than in the first export.
LLAMA_DIR="tools/llama"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "node and npm are missing: install Node.js 20 or newer (apt-get install -y nodejs npm)"
  log "installing Node.js and npm (Debian packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
llama_stamp="$LLAMA_DIR/node_modules/.bashgym-installed"
llama_want="$(cat "$LLAMA_DIR/package.json" "$LLAMA_DIR/package-lock.json" | sha256sum | cut -c1-16)"
if [ "$(cat "$llama_stamp" 2>/dev/null)" != "$llama_want" ]; then
  log "installing node-llama-cpp (prebuilt llama.cpp, CPU) into $LLAMA_DIR/node_modules (about 10 s)"
  (cd "$LLAMA_DIR" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  node "$LLAMA_DIR/llama_check.mjs" --probe >/dev/null \
    || die "node-llama-cpp's prebuilt llama.cpp binary does not load on this machine (see the error above)"
  echo "$llama_want" > "$llama_stamp"
fi

log "ready: data folder $BASHGYM_HOME, DAGSTER_HOME $DAGSTER_HOME"
