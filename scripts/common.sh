# Shared by scripts/start and scripts/test: install what is missing, then
# configure and build. Idempotent: a second run does no apt work and an
# incremental build. Run as root on Debian 12.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${MICRODDP_BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"
# ccache keys on paths relative to the checkout, so a fresh clone in another
# folder (CI's) reuses what an earlier build of the same sources compiled;
# the build directory's own path is not hashed either (sanitizer builds use -g).
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1

# What compiles microddp, all from Debian's archive (deploy/Dockerfile
# installs these in its build stage too).
BUILD_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libspdlog-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  libdnnl-dev libopenblas-dev zlib1g-dev libssl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libboost-dev
  libgloo-dev  # --backend gloo (core/comm/gloo)
)
# What the jobs read: Fashion-MNIST (the main job's) and English text for
# the GPT (--dataset text:/usr/share/games/fortunes, docs/text.md).
RUN_PACKAGES=(dataset-fashion-mnist fortunes)
# What only the tests use: GoogleTest, the independent TLS clients, network
# namespaces, the compose lab and the Docker engine it runs on
# (deploy/engine.sh), the bare root of the release test, the browser test,
# promtool, the formatter, clang for the fuzzers, the PyTorch oracle.
TEST_PACKAGES=(
  libgtest-dev libgmock-dev
  openssl iproute2 procps curl xz-utils docker-compose docker.io debootstrap
  nodejs chromium fonts-dejavu-core prometheus clang-format
  clang-14 libclang-rt-14-dev  # scripts/fuzz (libFuzzer)
  python3-torch  # the PyTorch oracle (tests/pytorch/)
)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing ${#missing[@]} Debian packages: ${missing[*]}"
    [[ $(id -u) -eq 0 ]] || { echo "need root to install packages (run with sudo)"; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# The npm packages, exactly as each package-lock.json says: the dashboard's
# (its chart libraries, compiled into the binary, and playwright-core for
# the browser test) and, given "tests", deploy/k8s/validate's (the
# Kubernetes schemas for fault.k8s_manifests).
install_npm_packages() {
  if ! command -v npm >/dev/null; then install_packages npm; fi
  local dirs=("$ROOT/dashboard") dir
  [[ "${1:-}" == tests ]] && dirs+=("$ROOT/deploy/k8s/validate")
  for dir in "${dirs[@]}"; do
    if [[ ! -d "$dir/node_modules" || "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]]; then
      say "installing the npm packages of ${dir#"$ROOT"/}"
      npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
    fi
  done
}

# configure DIR [cmake -D options]: every time (a second run takes a second
# or two and finds what a package installed since brought, e.g. GoogleTest).
configure() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
  grep -E "^-- microddp" "$dir/configure.log" || true
}

# build DIR [TARGET...]: everything, or only the targets named.
build() {
  local dir="$1" targets=()
  shift
  (($#)) && targets=(--target "$@")
  say "building ${*:-everything} in $dir ($JOBS jobs)"
  cmake --build "$dir" -j "$JOBS" "${targets[@]}"
}

# configure_fuzz DIR [core]: the clang build of scripts/fuzz (libFuzzer; every
# library and test under ASan + UBSan); "core" builds core/ only, which is
# also what scripts/test runs its AddressSanitizer tests from.
configure_fuzz() {
  local dir="$1" core=()
  [[ "${2:-}" == core ]] && core=(-DMICRODDP_CORE_ONLY=ON)
  say "configuring $dir (clang-14, libFuzzer, ASan + UBSan)"
  configure "$dir" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DMICRODDP_FUZZ=ON \
    -DMICRODDP_CUDA=OFF "${core[@]}"
}

configure_and_build() {
  local dir="$1"
  shift
  configure "$dir" "$@"
  build "$dir"
}

# Phase timings, printed at the end of a run so a slow phase shows in every log.
PHASES=()
phase_start() { PHASE_NAME="$1"; PHASE_T0=$(date +%s); say "$1"; }
phase_end() { PHASES+=("$(printf '%-44s %5d s' "$PHASE_NAME" $(($(date +%s) - PHASE_T0)))"); }
print_phases() {
  ((${#PHASES[@]})) || return 0
  say "phases"
  printf '  %s\n' "${PHASES[@]}"
}
