#!/usr/bin/env bash
# Lazaret host setup for Debian 12 (bookworm) and Debian 13 (trixie).
# Idempotent; run as root (or through sudo). Installs every package the
# project needs to build, run and test, makes /dev/fuse and /dev/net/tun
# usable by unprivileged users (mode 0666, as stock distributions ship
# them), and creates the unprivileged test user with subordinate ID ranges.
#
#   scripts/setup.sh                                  set this host up
#   scripts/setup.sh --print-packages [OS-RELEASE]    what it would install
#
# The release comes from /etc/os-release (ID and VERSION_CODENAME):
#   bookworm  runsc from bookworm-backports (bookworm's own cannot carry
#             network traffic on current kernels, docs/network.md), which
#             it adds to the APT sources; its kernel (6.1) is below the 6.9
#             that Lazaret needs: boot one from bookworm-backports
#             (`lazaret doctor` says so; setup installs no kernel)
#   trixie    its own packages (runsc 20240729, kernel 6.12): no backports
# Any other system is refused with what is supported. On a derivative of
# one of them, LAZARET_SETUP_RELEASE=bookworm|trixie uses that release's
# package set (untested: the names may differ). --print-packages prints
# the release, the APT suites it would add and the exact arguments of its
# `apt-get install` on a fresh machine, one a line, and changes nothing.
set -euo pipefail

# setup_release OS-RELEASE-FILE: prints the supported Debian release the
# file names (bookworm or trixie), or says what is supported and fails.
setup_release() {
    local file=$1 key val id="" codename="" version_id="" pretty=""
    case "${LAZARET_SETUP_RELEASE:-}" in
        bookworm | trixie) echo "$LAZARET_SETUP_RELEASE"; return 0 ;;
        '') ;;
        *)
            echo "setup.sh: LAZARET_SETUP_RELEASE=$LAZARET_SETUP_RELEASE: it names bookworm or trixie" >&2
            return 1 ;;
    esac
    if [ ! -r "$file" ]; then
        echo "setup.sh: cannot read $file: cannot tell which system this is" >&2
        return 1
    fi
    # Read, not sourced: nothing of the file runs.
    while IFS='=' read -r key val; do
        val=${val%\"} val=${val#\"} val=${val%\'} val=${val#\'}
        case "$key" in
            ID) id=$val ;;
            VERSION_CODENAME) codename=$val ;;
            VERSION_ID) version_id=$val ;;
            PRETTY_NAME) pretty=$val ;;
        esac
    done <"$file"
    case "$id:$codename:$version_id" in
        debian:bookworm:* | debian::12) echo bookworm ;;
        debian:trixie:* | debian::13) echo trixie ;;
        *)
            cat >&2 <<MSG
setup.sh: ${pretty:-this system (ID=${id:-?} VERSION_CODENAME=${codename:-?})} is not supported.
Supported: Debian 12 (bookworm; runsc and a kernel >= 6.9 from
bookworm-backports) and Debian 13 (trixie). On another system install the
packages by hand (README.md, "Supported systems"; on Ubuntu 24.04 and later
also the AppArmor profile packaging/apparmor/lazaret), or, on a derivative
of one of them, set LAZARET_SETUP_RELEASE=bookworm or trixie to use that
release's package names (untested).
MSG
            return 1 ;;
    esac
}

# setup_suites RELEASE: the APT suites setup adds, one a line.
setup_suites() {
    case "$1" in
        bookworm) echo bookworm-backports ;;
        trixie) ;;
    esac
}

# setup_packages RELEASE: the arguments of `apt-get install` on a fresh
# machine, one a line; NAME/SUITE takes NAME from SUITE.
setup_packages() {
    printf '%s\n' \
        build-essential meson ninja-build clang clang-format llvm \
        libsqlite3-dev libsodium-dev libjansson-dev libarchive-dev libmnl-dev libssl-dev \
        libgit2-dev libfuse3-dev liburing-dev libcmocka-dev libedit-dev \
        fuse3 fuse-overlayfs uidmap slirp4netns iproute2 iputils-ping dnsmasq-base nodejs \
        mmdebstrap skopeo busybox-static git zstd lintian \
        python3-pytest python3-pytest-xdist python3-pexpect spin sqlite3 util-linux procps cppcheck
    # pkg-config is a transitional package in trixie (pkgconf's); the
    # sanitizer runtimes of the release's default clang; runsc 2024 or
    # newer (bookworm's own is 20221219).
    case "$1" in
        bookworm) printf '%s\n' pkg-config libclang-rt-14-dev runsc/bookworm-backports ;;
        trixie) printf '%s\n' pkgconf libclang-rt-19-dev runsc ;;
    esac
}

if [ "${1:-}" = --print-packages ]; then
    release=$(setup_release "${2:-/etc/os-release}")
    echo "release $release"
    setup_suites "$release" | sed 's/^/suite /'
    setup_packages "$release" | sed 's/^/package /'
    exit 0
fi
[ $# -eq 0 ] || { echo "setup.sh: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2; }

TEST_USER=${LAZARET_TEST_USER:-lztest}

if [ "$(id -u)" -ne 0 ]; then
    exec sudo --preserve-env=LAZARET_TEST_USER,LAZARET_SETUP_RELEASE,LAZARET_SETUP_FUSE_URING "$0" "$@"
fi

export DEBIAN_FRONTEND=noninteractive
release=$(setup_release /etc/os-release)

for suite in $(setup_suites "$release"); do
    if ! grep -rqs "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then
        cat >"/etc/apt/sources.list.d/lazaret-$suite.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        need_update=1
    fi
done

missing=()
while read -r p; do
    name=${p%%/*}
    if [ "$name" = runsc ]; then
        # Any runsc of 2024 or later will do, wherever it came from.
        v=$(dpkg-query -W -f='${Version}' runsc 2>/dev/null) || v=""
        [ -n "$v" ] && dpkg --compare-versions "$v" ge 0.0~20240101 && continue
    elif dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q 'install ok installed'; then
        continue
    fi
    missing+=("$p")
done < <(setup_packages "$release")
if [ "${#missing[@]}" -gt 0 ] || [ -n "${need_update:-}" ]; then
    apt-get update -qq
    [ "${#missing[@]}" -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$release" = bookworm ]; then
    kernel=$(uname -r)
    if [ "$(printf '%s\n' 6.9 "${kernel%%-*}" | sort -V | head -1)" != 6.9 ]; then
        echo "lazaret setup: note: Linux $kernel is below 6.9: install linux-image-amd64/bookworm-backports and reboot"
    fi
fi

# Stock distributions ship these 0666; some minimal images ship 0600.
chmod 0666 /dev/fuse /dev/net/tun

# FUSE over io_uring for the workspace routers (docs/state.md, "The
# router's transport"): a kernel built with CONFIG_FUSE_IO_URING (6.14+)
# has the fuse module's enable_uring parameter, off by default and root's
# to switch. It is host-wide: every FUSE server that asks for io_uring gets
# it; one that does not ask is unchanged. Opt-in: it gained 19 % on the
# create/stat storm and 25 % on the npm-like burst, under the 25 % asked of it
# (docs/notes/2026-12-05-router-transport.md), and it opens new kernel code
# to every user who can mount FUSE. LAZARET_SETUP_FUSE_URING=1 switches it
# on and keeps it on; without it, it is left as it is (scripts/test.sh
# switches it on for its own run only, and puts it back).
uring=/sys/module/fuse/parameters/enable_uring
if [ ! -e "$uring" ]; then
    echo "lazaret setup: note: this kernel has no FUSE over io_uring ($uring): the routers use /dev/fuse"
elif [ "${LAZARET_SETUP_FUSE_URING:-0}" != 1 ]; then
    echo "lazaret setup: FUSE over io_uring left as it is ($uring = $(cat "$uring");" \
        "LAZARET_SETUP_FUSE_URING=1 switches it on)"
else
    echo Y > "$uring"
    # Kept across boots: tmpfiles.d when fuse is built in or loaded early,
    # the module option when it is a module loaded later.
    kept=/etc/tmpfiles.d/lazaret-fuse-uring.conf
    printf 'w %s - - - - Y\n' "$uring" > "$kept"
    if [ -e /sys/module/fuse/initstate ]; then
        echo "options fuse enable_uring=Y" > /etc/modprobe.d/lazaret-fuse-uring.conf
        kept="$kept and /etc/modprobe.d/lazaret-fuse-uring.conf"
    fi
    echo "lazaret setup: FUSE over io_uring switched on ($uring = $(cat "$uring"); kept across boots by $kept)"
fi

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
echo "lazaret setup: done (test user: $TEST_USER, Debian $release)"
