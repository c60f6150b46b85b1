#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Measures `cargo check` of a generated register file (N registers of 8 fields each) declared
# with `register!` and, for comparison, the same layout declared with `bitbybit`.
#
#   register/tools/compile_time.sh [N] [WORKDIR]
#
# Prints the time of a clean check of the generated crate alone (dependencies already built; the
# best of REPEAT runs, 5 by default) and of a clean check including its dependencies, then the
# ratio of the two crate-alone times (`register!` / `bitbybit`, lower is better). The runs of the
# two crates alternate, so that a change in the load of a shared host reaches both alike.
#
# If a Linux 7.2 tree is available (`LINUX_SRC`, or the path `../shared/tools/linux-src` prints),
# it also times the register declarations of Linux 7.2's Tyr (`drivers/gpu/drm/tyr/regs.rs`)
# and nova-core (`drivers/gpu/nova-core/regs.rs`) compiled against this crate: `linux_regs.py`
# keeps their `register!` blocks and stubs what those refer to (see its header).
set -eu
N=${1:-500}
REPEAT=${REPEAT:-5}
WORK=${2:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$(cd "$HERE/.." && pwd)

gen_register() {
    dir=$WORK/with-register
    mkdir -p "$dir/src"
    cat > "$dir/Cargo.toml" <<TOML
[package]
name = "regs-register"
version = "0.0.0"
edition = "2021"
[dependencies]
register = { package = "gpukit-register", path = "$HERE", default-features = false }
[workspace]
TOML
    {
        echo "#![no_std]"
        echo "#![allow(missing_docs)]"
        echo "register::register! {"
        i=0
        while [ $i -lt "$N" ]; do
            printf '    pub R%d(u32) @ 0x%x {\n' $i $((i * 4))
            f=0
            while [ $f -lt 8 ]; do
                printf '        %d:%d f%d;\n' $((31 - f * 4)) $((28 - f * 4)) $f
                f=$((f + 1))
            done
            echo "    }"
            i=$((i + 1))
        done
        echo "}"
    } > "$dir/src/lib.rs"
}

gen_bitbybit() {
    dir=$WORK/with-bitbybit
    mkdir -p "$dir/src"
    cat > "$dir/Cargo.toml" <<TOML
[package]
name = "regs-bitbybit"
version = "0.0.0"
edition = "2021"
[dependencies]
bitbybit = "=2.0.1"
arbitrary-int = "2"
[workspace]
TOML
    {
        echo "#![no_std]"
        echo "use arbitrary_int::u4;"
        echo "use bitbybit::bitfield;"
        i=0
        while [ $i -lt "$N" ]; do
            echo "#[bitfield(u32, default = 0)]"
            printf 'pub struct R%d {\n' $i
            f=0
            while [ $f -lt 8 ]; do
                printf '    #[bits(%d..=%d, rw)]\n    f%d: u4,\n' $((28 - f * 4)) $((31 - f * 4)) $f
                f=$((f + 1))
            done
            echo "}"
            i=$((i + 1))
        done
    } > "$dir/src/lib.rs"
}

# Clean check of crate $1 with its dependencies; prints nothing, sets FULL.
prepare() {
    dir=$1
    export CARGO_TARGET_DIR=$dir/target CARGO_INCREMENTAL=0
    rm -rf "$CARGO_TARGET_DIR"
    start=$(date +%s.%N)
    cargo check --quiet --manifest-path "$dir/Cargo.toml" --offline 2>/dev/null \
        || cargo check --quiet --manifest-path "$dir/Cargo.toml"
    FULL=$(echo "$(date +%s.%N) - $start" | bc)
}

# One check of crate $1 alone (its dependencies already built); sets T.
check_once() {
    dir=$1
    export CARGO_TARGET_DIR=$dir/target CARGO_INCREMENTAL=0
    touch "$dir/src/lib.rs"
    start=$(date +%s.%N)
    cargo check --quiet --manifest-path "$dir/Cargo.toml"
    T=$(echo "$(date +%s.%N) - $start" | bc)
}

# The smaller of $1 and $2 (either may be empty).
best() {
    if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc)" = 1 ]; then echo "$2"; else echo "$1"; fi
}

report() {
    printf '%-16s crate alone %6.2f s   with dependencies %6.2f s\n' "$(basename "$1")" "$2" "$3"
}

# Crate $1 alone, best of REPEAT runs.
measure() {
    prepare "$1"
    full=$FULL
    own=
    r=0
    while [ $r -lt "$REPEAT" ]; do
        check_once "$1"
        own=$(best "$own" "$T")
        r=$((r + 1))
    done
    report "$1" "$own" "$full"
}

gen_linux() {
    name=$1
    file=$2
    dir=$WORK/linux-$name
    mkdir -p "$dir/src"
    cat > "$dir/Cargo.toml" <<TOML
[package]
name = "linux-$name-regs"
version = "0.0.0"
edition = "2021"
[dependencies]
register = { package = "gpukit-register", path = "$HERE", default-features = false }
[workspace]
TOML
    cp "$ROOT/Cargo.lock" "$dir/Cargo.lock" 2>/dev/null || true
    printf '%-16s ' "linux-$name"
    python3 "$HERE/tools/linux_regs.py" "$file" "$dir/src/lib.rs"
}

gen_register
gen_bitbybit
# Reuse the workspace's lock file so that the register crate's dependencies resolve offline.
cp "$ROOT/Cargo.lock" "$WORK/with-register/Cargo.lock" 2>/dev/null || true
echo "$N registers x 8 fields, rustc $(rustc --version | cut -d' ' -f2), in $WORK"
prepare "$WORK/with-register"
full_ours=$FULL
prepare "$WORK/with-bitbybit"
full_peer=$FULL
ours=
peer=
r=0
while [ $r -lt "$REPEAT" ]; do
    check_once "$WORK/with-register"
    ours=$(best "$ours" "$T")
    check_once "$WORK/with-bitbybit"
    peer=$(best "$peer" "$T")
    r=$((r + 1))
done
report "$WORK/with-register" "$ours" "$full_ours"
report "$WORK/with-bitbybit" "$peer" "$full_peer"
printf 'ratio register!/bitbybit (crate alone): %.2f\n' "$(echo "$ours / $peer" | bc -l)"

LINUX=${LINUX_SRC:-}
if [ -z "$LINUX" ] && [ -x "$ROOT/../shared/tools/linux-src" ]; then
    LINUX=$("$ROOT/../shared/tools/linux-src" 2>/dev/null | tail -n 1) || LINUX=
fi
if [ -n "$LINUX" ] && [ -f "$LINUX/drivers/gpu/drm/tyr/regs.rs" ]; then
    echo "Linux register files from $LINUX, compiled against register!:"
    gen_linux tyr "$LINUX/drivers/gpu/drm/tyr/regs.rs"
    gen_linux nova-core "$LINUX/drivers/gpu/nova-core/regs.rs"
    measure "$WORK/linux-tyr"
    measure "$WORK/linux-nova-core"
else
    echo "no Linux tree (set LINUX_SRC): Tyr and nova-core register files not timed"
fi
