#!/usr/bin/env bash
# Builds a release Lazaret (no test hooks) and installs it:
#   PREFIX/bin/lazaret                         the front end, on PATH
#   PREFIX/libexec/lazaret/                    lazaret-core, lazaret-router,
#                                              lazaret-init, lazaret-escalate, lazaret-gate
#   PREFIX/share/man/man1/lazaret.1, man5/lazaret.toml.5
#   PREFIX/share/bash-completion/completions/lazaret
#   /etc/apparmor.d/lazaret                    where AppArmor 4 is installed
#                                              (packaging/apparmor/lazaret)
#
#   scripts/install.sh [--prefix DIR] [--builddir DIR]
#
# Default prefix /usr/local (on every user's PATH; bash-completion and man
# look there too). The build runs as the invoking user; the install runs as
# root through sudo when the prefix is not writable. The helpers' directory
# is compiled into the binaries (meson's prefix): installing elsewhere means
# --prefix, not copying files.
#
# The AppArmor profile lets lazaret-core and runsc create user namespaces
# where AppArmor restricts them (Ubuntu 23.10 and later); it is installed
# and loaded when AppArmor 4's policy files are there (/etc/apparmor.d/abi/
# 4.0: its userns rule needs them) and the prefix is one it names (/usr,
# /usr/local), unless a package (the .deb) owns it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
bdir=$here/build-release
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --builddir) bdir=$2; shift 2 ;;
        *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be absolute" >&2; exit 2 ;; esac

if [ ! -f "$bdir/build.ninja" ]; then
    meson setup "$bdir" "$here" --prefix "$prefix" --buildtype release -Dtests=false -Dtest_hooks=false >/dev/null
elif ! meson configure "$bdir" | grep -Eq "^ *prefix +$prefix( |\$)"; then
    meson configure "$bdir" --prefix "$prefix" >/dev/null
fi
ninja -C "$bdir" >/dev/null

# Already installed, byte for byte: nothing to do (and no sudo prompt).
same=1
for f in "bin/lazaret:lazaret" "libexec/lazaret/lazaret-core:lazaret-core" \
    "libexec/lazaret/lazaret-router:lazaret-router" "libexec/lazaret/lazaret-init:lazaret-init" \
    "libexec/lazaret/lazaret-escalate:lazaret-escalate" "libexec/lazaret/lazaret-gate:lazaret-gate" \
    "share/bash-completion/completions/lazaret:$here/data/bash-completion/lazaret"; do
    dst=$prefix/${f%%:*} src=${f#*:}
    case "$src" in /*) ;; *) src=$bdir/$src ;; esac
    cmp -s "$src" "$dst" || { same=0; break; }
done
if [ "$same" -eq 0 ]; then
    # The parent of a prefix that does not exist yet decides who may create it.
    probe=$prefix
    while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
    if [ "$(id -u)" -eq 0 ] || [ -w "$probe" ] && { [ ! -e "$prefix/bin" ] || [ -w "$prefix/bin" ]; }; then
        meson install -C "$bdir" --no-rebuild --quiet
    else
        sudo meson install -C "$bdir" --no-rebuild --quiet
    fi
fi
# as_root CMD...: CMD as root, through sudo when not root already.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
profile=/etc/apparmor.d/lazaret
if [ -f /etc/apparmor.d/abi/4.0 ] && ! cmp -s "$here/packaging/apparmor/lazaret" "$profile" &&
    ! dpkg-query -S "$profile" >/dev/null 2>&1; then
    case "$prefix" in
        /usr | /usr/local)
            as_root install -m 0644 "$here/packaging/apparmor/lazaret" "$profile"
            if command -v aa-enabled >/dev/null && aa-enabled --quiet 2>/dev/null; then
                as_root apparmor_parser -r "$profile"
            fi ;;
        *) echo "note: $profile (packaging/apparmor/lazaret) names lazaret-core in /usr and /usr/local only;" \
            "where AppArmor restricts user namespaces, install it with $prefix/libexec/lazaret/lazaret-core" \
            "in its lazaret line" >&2 ;;
    esac
fi
echo "lazaret installed in $prefix (lazaret $("$prefix/bin/lazaret" --version 2>/dev/null | cut -d' ' -f2))"
