#!/usr/bin/env bash
# A CPython 3.14 for the Python-stack tests (tests/test_python_stack.py reads PYTHON314), from Debian's
# package registry: no stable Debian release ships 3.14 yet, sid does, and sid's glibc is newer than a
# stable machine's. So sid's packages are unpacked (tools/unpack-debs.sh) into DIR, and a two-line
# launcher is linked against DIR's libpython, dynamic linker and libraries. Patching sid's own
# python3.14 instead would move its headers, and the core would no longer name its build-id.
# Usage: tools/python314.sh DIR  -- prints DIR/usr/bin/python3.14-shared on success.
set -euo pipefail
root=$(realpath -m "${1:?usage: tools/python314.sh DIR}")
arch=$(dpkg --print-architecture)
"$(dirname "$0")/unpack-debs.sh" sid "$arch" "$root" python3.14-minimal libpython3.14 libpython3.14-minimal \
    libpython3.14-stdlib libc6 zlib1g libexpat1 libffi8 libzstd1
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
loader=$(ls "$root"/usr/lib/"$multiarch"/ld-linux*.so.* | head -1)
printf 'extern int Py_BytesMain(int, char **);\nint main(int c, char **v) { return Py_BytesMain(c, v); }\n' \
    > "$root.apt/launch.c"
gcc -o "$root/usr/bin/python3.14-shared" "$root.apt/launch.c" "$root/usr/lib/$multiarch/libpython3.14.so.1.0" \
    -Wl,--dynamic-linker="$loader" -Wl,-rpath,"$root/usr/lib/$multiarch" -Wl,--disable-new-dtags \
    -Wl,--allow-shlib-undefined
"$root/usr/bin/python3.14-shared" -c 'import sys; assert sys.version_info[:2] == (3, 14)'
echo "$root/usr/bin/python3.14-shared"
