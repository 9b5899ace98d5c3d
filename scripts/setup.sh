#!/usr/bin/env bash
# Lazaret host setup for Debian 12 (bookworm). Idempotent; run as root
# (or through sudo). Installs every package the project needs to build,
# run and test, makes /dev/fuse and /dev/net/tun usable by unprivileged
# users (mode 0666, as stock distributions ship them), and creates the
# unprivileged test user with subordinate ID ranges.
set -euo pipefail

TEST_USER=${LAZARET_TEST_USER:-lztest}

if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=LAZARET_TEST_USER "$0" "$@"
fi

export DEBIAN_FRONTEND=noninteractive

# runsc from bookworm-backports: bookworm's own runsc cannot carry network
# traffic on current kernels (see docs/network.md).
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat > /etc/apt/sources.list.d/lazaret-backports.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    need_update=1
fi

pkgs=(
    build-essential meson ninja-build pkg-config clang clang-format llvm libclang-rt-14-dev
    libsqlite3-dev libsodium-dev libjansson-dev libarchive-dev libmnl-dev
    libgit2-dev libfuse3-dev libcmocka-dev libedit-dev
    fuse3 fuse-overlayfs uidmap slirp4netns iproute2 iputils-ping
    mmdebstrap skopeo busybox-static git zstd lintian
    python3-pytest python3-pytest-xdist python3-pexpect spin sqlite3 util-linux procps cppcheck
)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ! dpkg-query -W -f='${Version}' runsc 2>/dev/null | grep -q '2024'; then
    missing+=("runsc/bookworm-backports")
fi
if [ "${#missing[@]}" -gt 0 ] || [ -n "${need_update:-}" ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Stock distributions ship these 0666; some minimal images ship 0600.
chmod 0666 /dev/fuse /dev/net/tun

# ensure_subids USER: a range of 65536 subordinate uids and gids for USER,
# after every range already given (Lazaret maps them into each Domain so
# that processes inside can switch users, e.g. apt-get's _apt).
ensure_subids() {
    local user=$1 f start
    touch /etc/subuid /etc/subgid
    start=$(awk -F: 'BEGIN { m = 100000 } NF >= 3 && $2 + $3 > m { m = $2 + $3 } END { print m }' \
        /etc/subuid /etc/subgid)
    for f in /etc/subuid /etc/subgid; do
        grep -q "^$user:" "$f" || echo "$user:$start:65536" >> "$f"
    done
}

if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$TEST_USER"
fi
ensure_subids "$TEST_USER"
# The user who ran setup (directly, or through sudo) runs `lazaret run` too;
# root included (VMs and cloud machines often work as root).
ensure_subids "${SUDO_USER:-root}"
loginctl enable-linger "$TEST_USER" 2>/dev/null || true
echo "lazaret setup: done (test user: $TEST_USER)"
