#!/usr/bin/env bash
# The root file system of the container backend's test image: the host's own programs that
# the adversarial suite runs (bash, python3 with its standard library, coreutils, git, curl),
# each with the shared libraries ldd names, in the host's merged-/usr layout. Writes a tar
# to $1. The same files as on the host, so an attack behaves as it does under the process
# backend; nothing else of the host is in it.
set -euo pipefail
out=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
progs="bash sh dash python3 cat ls ln mv rm touch mkdir rmdir stat id sleep kill git curl printf
echo env true false chmod cp head tail grep sed readlink realpath timeout setsid dd find test
uname ps wc sort tr cut xargs tee mktemp basename dirname nproc seq awk"
files=()
for p in $progs; do
    f=$(PATH=/usr/local/bin:/usr/bin:/bin type -P "$p") || { echo "toolbox: no $p on this host" >&2; exit 1; }
    files+=("$f" "$(readlink -f "$f")")
done
# git's helpers (git-remote-http and friends) live under its exec path.
files+=("$(git --exec-path)/git-remote-http")
for f in "${files[@]}"; do
    ldd "$f" 2>/dev/null | grep -oE '/[^ ]+' || true
done | sort -u >"$root.libs"
mkdir -p "$root"/usr/bin "$root"/usr/lib "$root"/usr/lib64 "$root"/usr/sbin "$root"/etc "$root"/tmp \
    "$root"/proc "$root"/dev "$root"/sys "$root"/root "$root"/run "$root"/var/tmp
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
ln -s usr/sbin "$root/sbin"
chmod 1777 "$root/tmp" "$root/var/tmp"
copy() {
    # The path as the host has it, through the merged-/usr links.
    local src=$1 real dest
    real=$(readlink -f "$src")
    dest=$root$(realpath -s --relative-to=/ "$src" | sed 's,^,/,; s,^/bin/,/usr/bin/,; s,^/lib/,/usr/lib/,; s,^/lib64/,/usr/lib64/,; s,^/sbin/,/usr/sbin/,')
    mkdir -p "$(dirname "$dest")"
    if [ -L "$src" ] && [ "$src" != "$real" ]; then
        # Straight to the file the chain ends at (/usr/bin/awk -> /etc/alternatives/awk ->
        # /usr/bin/mawk): the links between are not in the image.
        [ -e "$dest" ] || [ -L "$dest" ] || ln -s "$real" "$dest"
        copy "$real"
    else
        [ -e "$dest" ] || cp -p "$src" "$dest"
    fi
}
while read -r f; do copy "$f"; done < <(printf '%s\n' "${files[@]}" | sort -u; cat "$root.libs")
rm -f "$root.libs"
# python3's standard library and git's templates.
cp -a /usr/lib/python3.11 "$root/usr/lib/"
rm -rf "$root/usr/lib/python3.11/test" "$root/usr/lib/python3.11/__pycache__"
mkdir -p "$root/usr/share"
cp -a /usr/share/git-core "$root/usr/share/" 2>/dev/null || true
# Where this git looks for its helpers (/usr/lib/git-core, or /usr/local/libexec/git-core
# for a git built on the host).
exec_path=$(git --exec-path)
mkdir -p "$root$(dirname "$exec_path")"
cp -a "$exec_path" "$root$(dirname "$exec_path")/"
# Users root and nobody, and a hosts file.
printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
tar --create --file "$out" --directory "$root" --numeric-owner .
