#!/usr/bin/env bash
# Builds a release Lazaret (no test hooks) and installs it:
#   PREFIX/bin/lazaret                         the front end, on PATH
#   PREFIX/libexec/lazaret/                    lazaret-core, lazaret-router,
#                                              lazaret-init, lazaret-escalate
#   PREFIX/share/man/man1/lazaret.1, man5/lazaret.toml.5
#   PREFIX/share/bash-completion/completions/lazaret
#
#   scripts/install.sh [--prefix DIR] [--builddir DIR]
#
# Default prefix /usr/local (on every user's PATH; bash-completion and man
# look there too). The build runs as the invoking user; the install runs as
# root through sudo when the prefix is not writable. The helpers' directory
# is compiled into the binaries (meson's prefix): installing elsewhere means
# --prefix, not copying files.
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
    "libexec/lazaret/lazaret-escalate:lazaret-escalate" \
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
echo "lazaret installed in $prefix (lazaret $("$prefix/bin/lazaret" --version 2>/dev/null | cut -d' ' -f2))"
