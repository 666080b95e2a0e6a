#!/usr/bin/env bash
# The relocatable release (scripts/bundle) in a bare root: a debootstrap
# --variant=minbase Debian, which has glibc and libstdc++ and none of
# microddp's libraries (oneDNN, OpenBLAS, gloo, spdlog, ...). The
# release is unpacked in a user's home there and run as that user, not root:
#   1. `ldd` finds every library of bin/microddp inside the release;
#   2. `microddp --help`, a `train --steps 20` on Fashion-MNIST copied in,
#      and a 2-rank `run` (coordinator, workers, shared memory) succeed;
#   3. with one bundled library removed, the binary fails naming it: what a
#      dependency linked but not bundled does, so this test catches one.
# Prints the release's size. Needs root (chroot, mounts) and debootstrap;
# skips (77) otherwise, but fails under CI=true, where scripts/test installs it.
#   release_test.sh REPO BUILD_DIR
set -uo pipefail
REPO="$(cd "$1" && pwd)"
BUILD_DIR="$(cd "$2" && pwd)"
T0=$(date +%s)
say() { echo "[release +$(($(date +%s) - T0))s] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
missing() {
  if [[ "${CI:-}" == "true" ]]; then fail "$1 (CI=true: bash scripts/test installs what this test needs)"; fi
  echo "SKIP: $1"; exit 77
}
[[ $(id -u) -eq 0 ]] || missing "chroot and mounts need root"
command -v debootstrap >/dev/null || [[ -x /usr/sbin/debootstrap ]] || missing "debootstrap is not installed"
WORK="$(mktemp -d /var/tmp/mddp-release.XXXXXX)"
ROOTFS="$WORK/root"
cleanup() {
  umount -R "$ROOTFS/proc" "$ROOTFS/dev" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the release -------------------------------------------------------------------
# (xz -1: the test checks the release, not how small xz makes it)
MDDP_XZ_LEVEL=1 bash "$REPO/scripts/bundle" --build "$BUILD_DIR" --out "$WORK/dist" >"$WORK/bundle.log" 2>&1 ||
  { cat "$WORK/bundle.log"; fail "scripts/bundle failed"; }
TARBALL="$(ls "$WORK"/dist/microddp-*.tar.xz)"
NAME="$(basename "$TARBALL" .tar.xz)"
say "$(grep -o "release: .*" "$WORK/bundle.log")"

# ---- the bare root -----------------------------------------------------------------
suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
# The archive apt already uses for this release (its codename, as deploy/engine.sh finds it).
mirror="${MDDP_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(ORIGIN)' 2>/dev/null |
  sort -u | awk -v s="$suite" '$2 == s && $3 == "Debian" {print $1; exit}')}"
[[ -n "$mirror" ]] || fail "apt has no archive for '$suite': set MDDP_DEBIAN_MIRROR=URL"
debootstrap --variant=minbase "$suite" "$ROOTFS" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
  { tail -n 20 "$WORK/debootstrap.log"; fail "debootstrap failed"; }
say "bare root: debootstrap --variant=minbase $suite ($(du -sm "$ROOTFS" | cut -f1) MB)"
for lib in libgrpc++ libprotobuf libdnnl libopenblas libgloo libspdlog; do
  ! compgen -G "$ROOTFS/usr/lib/*/$lib*" >/dev/null || fail "the bare root has $lib: not bare"
done

USER_ID=4242
mkdir -p "$ROOTFS/home/user/data"
tar -xJf "$TARBALL" -C "$ROOTFS/home/user"
cp /usr/share/datasets/fashion-mnist/*.gz "$ROOTFS/home/user/data/"
chown -R "$USER_ID:$USER_ID" "$ROOTFS/home/user"
mount -t proc proc "$ROOTFS/proc" || fail "cannot mount /proc in the bare root"
mount --rbind /dev "$ROOTFS/dev" || fail "cannot bind /dev in the bare root"
# as_user CMD...: CMD in the bare root as an unprivileged user, in the release's folder.
as_user() {
  chroot --userspec "$USER_ID:$USER_ID" "$ROOTFS" /usr/bin/env -i HOME=/home/user PATH=/usr/bin:/bin \
    TMPDIR=/tmp /bin/sh -c "cd /home/user && exec \"\$@\"" sh "$@"
}
MDDP="/home/user/$NAME/bin/microddp"

# ---- 1. every library found inside the release -----------------------------------------
as_user ldd "$MDDP" >"$WORK/ldd.txt" 2>&1
! grep -q "not found" "$WORK/ldd.txt" || { cat "$WORK/ldd.txt"; fail "libraries not found in the bare root"; }
outside="$(awk '$3 ~ /^\// && $3 !~ /\/home\/user\// {print $1}' "$WORK/ldd.txt" | sort | tr '\n' ' ')"
say "from the system: ${outside:-nothing}; the rest from the release"

# ---- 2. it runs ----------------------------------------------------------------------
as_user "$MDDP" --help >"$WORK/help.txt" 2>&1 || { cat "$WORK/help.txt"; fail "microddp --help"; }
grep -q "Commands:\|Subcommands:" "$WORK/help.txt" || { cat "$WORK/help.txt"; fail "--help lists no commands"; }
as_user "$MDDP" train --steps 20 --dataset idx:/home/user/data --run-dir /home/user/runs/train \
  >"$WORK/train.txt" 2>&1 || { tail -n 20 "$WORK/train.txt"; fail "train --steps 20 in the bare root"; }
grep -q "step 20\|20 steps\|test accuracy" "$WORK/train.txt" || { tail -n 20 "$WORK/train.txt"; fail "train printed no progress"; }
as_user "$MDDP" run --nproc 2 --steps 20 --dataset idx:/home/user/data --run-dir /home/user/runs/run \
  --http-port -1 >"$WORK/run.txt" 2>&1 || { tail -n 30 "$WORK/run.txt"; fail "run --nproc 2 in the bare root"; }
grep -q "all 2 ranks finished" "$WORK/run.txt" || { tail -n 20 "$WORK/run.txt"; fail "run did not finish"; }
say "--help, train --steps 20 and run --nproc 2 ran as user $USER_ID"

# ---- 3. a missing library is named ---------------------------------------------------
victim="$(ls "$ROOTFS/home/user/$NAME/lib" | grep -m1 '^libdnnl\.so')"
[[ -n "$victim" ]] || fail "the release has no libdnnl"
mv "$ROOTFS/home/user/$NAME/lib/$victim" "$WORK/"
if as_user "$MDDP" --help >"$WORK/broken.txt" 2>&1; then fail "ran without $victim"; fi
grep -q "$victim" "$WORK/broken.txt" || { cat "$WORK/broken.txt"; fail "the failure does not name $victim"; }
say "without $victim: $(head -n1 "$WORK/broken.txt")"
echo "PASS: the release ($(du -m "$TARBALL" | cut -f1) MB packed, $(du -sm "$ROOTFS/home/user/$NAME" | cut -f1) MB unpacked) runs in a bare root"
