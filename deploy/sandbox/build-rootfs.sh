#!/usr/bin/env bash
# Build the Assay sandbox runtime root filesystem (Debian bookworm, minbase + the
# scientific Python stack from Debian packages), cached under a key derived from this
# script's content: editing the recipe yields a new key, an unchanged recipe is a no-op.
#
#   deploy/sandbox/build-rootfs.sh            # build if missing, print the rootfs path
#   deploy/sandbox/build-rootfs.sh --hash     # print the recipe hash only
#
# Env: ASSAY_SANDBOX_CACHE (default /var/cache/assay), ASSAY_DEBIAN_MIRROR (default: the
# first Debian mirror apt uses on this host).
set -euo pipefail

SCRIPT="$(readlink -f "${BASH_SOURCE[0]}")"
# The key must match assay.sandbox_manager.runtime.recipe_hash(): sha256 of this file, 16 hex.
HASH="$(sha256sum "$SCRIPT" | cut -c1-16)"
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
cleanup() {
  for m in proc sys dev/pts dev; do umount -l "$TMP/$m" 2>/dev/null || true; done
  # --one-file-system: should an unmount have failed, never delete the host's /dev.
  rm -rf --one-file-system "$TMP"
}
trap cleanup EXIT

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
echo "$HASH" > "$TMP/.assay-rootfs-complete"

rm -rf "$OUT"
mv "$TMP" "$OUT"
trap - EXIT
echo "$OUT"
