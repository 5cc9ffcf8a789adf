#!/usr/bin/env bash
# Build the Assay sandbox runtime root filesystem (Debian bookworm, minbase + the
# scientific Python stack from Debian packages, the resident compiled from resident.c and
# the sandbox-manager's start helper from spawn.c, both beside this script), cached under a
# key derived from the three files' content: editing the
# recipe yields a new key, an unchanged recipe is a no-op. Needs debootstrap, a C compiler
# and a static libc (gcc, libc6-dev) on the build host.
#
#   deploy/sandbox/build-rootfs.sh            # build if missing, print the rootfs path
#   deploy/sandbox/build-rootfs.sh --hash     # print the recipe hash only
#
# Env: ASSAY_SANDBOX_CACHE (default /var/cache/assay), ASSAY_DEBIAN_MIRROR (default: the
# first Debian mirror apt uses on this host).
set -euo pipefail

SCRIPT="$(readlink -f "${BASH_SOURCE[0]}")"
RESIDENT_SRC="$(dirname "$SCRIPT")/resident.c"
SPAWN_SRC="$(dirname "$SCRIPT")/spawn.c"
# The key must match assay_sandbox_manager.runtime.recipe_hash(): sha256 of this file,
# resident.c then spawn.c, 16 hex.
HASH="$(cat "$SCRIPT" "$RESIDENT_SRC" "$SPAWN_SRC" | sha256sum | cut -c1-16)"
if [[ "${1:-}" == "--hash" ]]; then echo "$HASH"; exit 0; fi

CACHE="${ASSAY_SANDBOX_CACHE:-/var/cache/assay}"
OUT="$CACHE/rootfs-$HASH"
if [[ -f "$OUT/.assay-rootfs-complete" ]]; then echo "$OUT"; exit 0; fi

PACKAGES=(
  python3 python3-numpy python3-pandas python3-scipy python3-statsmodels
  python3-sklearn python3-matplotlib python3-openpyxl python3-docx
  procps ca-certificates
)

find_mirror() {
  # deb822 (.sources) "URIs:" lines first, then one-line "deb URL suite" entries.
  local f
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    grep -hE '^(URIs:|deb )' "$f" | grep -oE 'https?://[^ ]*/debian/?' | grep -v security | head -n1
  done | head -n1
}
MIRROR="${ASSAY_DEBIAN_MIRROR:-$(find_mirror)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

mkdir -p "$CACHE"
TMP="$(mktemp -d "$CACHE/rootfs-$HASH.tmp.XXXXXX")"
RESIDENT="$(mktemp "$CACHE/resident-$HASH.XXXXXX")"
SPAWN="$(mktemp "$CACHE/spawn-$HASH.XXXXXX")"
cleanup() {
  for m in proc sys dev/pts dev; do umount -l "$TMP/$m" 2>/dev/null || true; done
  # --one-file-system: should an unmount have failed, never delete the host's /dev.
  rm -rf --one-file-system "$TMP"
  rm -f "$RESIDENT" "$SPAWN"
}
trap cleanup EXIT

# The resident (each sandbox's PID 1): static, so it runs on the rootfs's libc or any
# image's. Compiled first: a broken build fails before minutes of debootstrap.
cc -std=c11 -O2 -static -Wall -Wextra -Werror -pthread -o "$RESIDENT" "$RESIDENT_SRC"
# The start helper runs on the host (the sandbox-manager execs it from here as root, before
# bwrap): static too, so it needs nothing from the host's libraries.
cc -std=c11 -O2 -static -Wall -Wextra -Werror -o "$SPAWN" "$SPAWN_SRC"

echo "build-rootfs: debootstrap bookworm from $MIRROR into $TMP" >&2
debootstrap --variant=minbase bookworm "$TMP" "$MIRROR" >&2

# apt inside the chroot resolves dependencies properly (debootstrap --include does not
# handle every alternative); recommends are skipped to keep the image small.
mount -t proc proc "$TMP/proc"
mount --rbind /dev "$TMP/dev"
cp /etc/resolv.conf "$TMP/etc/resolv.conf" 2>/dev/null || true
chroot "$TMP" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update >&2
chroot "$TMP" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${PACKAGES[@]}" >&2
chroot "$TMP" useradd --uid 1000 --user-group --create-home --shell /bin/bash agent
mkdir -p "$TMP/workspace"
# mktemp made the root 0700: every sandbox uid must traverse it (bwrap root, image /).
chmod 0755 "$TMP"
chown 1000:1000 "$TMP/workspace"
umount -l "$TMP/dev" "$TMP/proc"

chroot "$TMP" apt-get clean
rm -rf --one-file-system "$TMP"/var/lib/apt/lists/* "$TMP"/var/cache/apt/*.bin "$TMP"/var/log/apt/* \
  "$TMP"/var/cache/debconf/*-old "$TMP"/usr/share/doc/* "$TMP"/usr/share/man/* \
  "$TMP"/etc/resolv.conf
: > "$TMP/etc/resolv.conf"
# debootstrap copies the build host's name in; the sandbox gets a neutral one.
echo sandbox > "$TMP/etc/hostname"
printf '127.0.0.1 localhost sandbox\n::1 localhost\n' > "$TMP/etc/hosts"
install -D -o root -g root -m 0755 "$RESIDENT" "$TMP/usr/libexec/assay/resident"
install -D -o root -g root -m 0755 "$SPAWN" "$TMP/usr/libexec/assay/spawn"
echo "$HASH" > "$TMP/.assay-rootfs-complete"

rm -rf "$OUT"
mv "$TMP" "$OUT"
rm -f "$RESIDENT" "$SPAWN"
trap - EXIT
echo "$OUT"
