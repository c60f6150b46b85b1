#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Measures `cargo check` of a generated register file (N registers of 8 fields each) declared
# with `register!` and, for comparison, the same layout declared with `bitbybit`.
#
#   register/tools/compile_time.sh [N] [WORKDIR]
#
# Prints the time of a clean check of the generated crate alone (dependencies already built) and
# of a clean check including its dependencies.
set -eu
N=${1:-500}
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

measure() {
    dir=$1
    export CARGO_TARGET_DIR=$dir/target CARGO_INCREMENTAL=0
    rm -rf "$CARGO_TARGET_DIR"
    start=$(date +%s.%N)
    cargo check --quiet --manifest-path "$dir/Cargo.toml" --offline 2>/dev/null \
        || cargo check --quiet --manifest-path "$dir/Cargo.toml"
    full=$(echo "$(date +%s.%N) - $start" | bc)
    touch "$dir/src/lib.rs"
    start=$(date +%s.%N)
    cargo check --quiet --manifest-path "$dir/Cargo.toml"
    own=$(echo "$(date +%s.%N) - $start" | bc)
    printf '%-16s crate alone %6.2f s   with dependencies %6.2f s\n' "$(basename "$dir")" "$own" "$full"
}

gen_register
gen_bitbybit
# Reuse the workspace's lock file so that the register crate's dependencies resolve offline.
cp "$ROOT/Cargo.lock" "$WORK/with-register/Cargo.lock" 2>/dev/null || true
echo "$N registers x 8 fields, rustc $(rustc --version | cut -d' ' -f2), in $WORK"
measure "$WORK/with-register"
measure "$WORK/with-bitbybit"
