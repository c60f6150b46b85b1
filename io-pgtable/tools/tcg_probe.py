#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR MIT
"""What QEMU's translator makes of the single-page workload of `gpukit_io_pgtable_vs_c`.

    tcg_probe.py [BUILD]     # BUILD: the kernel-bench build directory (vmlinux, bzImage)

Finds, in the bench vmlinux, the timed loop of "map + unmap one 4K page, tables present" in
`timing_against_c` (the `map_all` call followed by `unmap_all`, between two `ktime_get`
calls), then boots the kernel twice under TCG with only that test:

1. with the `tcg_window.c` plugin, counting per guest PC what runs inside that loop: guest
   instructions, loads, stores and translation-block (TB) entries. The loop runs 4096 times
   per round, the sides alternating (Rust in even windows, C in odd ones), three rounds each;
2. with `-d in_asm,out_asm` restricted to the functions the loop ran, to read the host code
   TCG generated for each TB: host instructions in the TB body (the slow paths of the softmmu
   TLB, after the body, are not counted) and the calls in it (helpers such as the flags
   computation a `jo` needs, or the TB lookup behind a `ret`; a conditional branch's exit
   that calls counts even when the branch is not taken, so this is an upper bound).

Weighting each TB's host code by how often it ran gives, per side and per map + unmap, the
host instructions the translated code executes: a model of host time that, unlike the guest
instruction count, charges each guest memory access its inline TLB check (about ten host
instructions) and each helper call its call.
"""
import bisect
import collections
import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PER_ROUND = 4096  # picks per round in `timing_against_c`


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def parse_asm_log(path):
    """Each translation block's guest PC -> (host instructions in its fast path, helper
    calls among them), from QEMU's `-d in_asm,out_asm` log."""
    host = {}
    tb_pc, mode, body, calls = None, None, 0, 0
    for line in open(path):
        if line.startswith("IN:"):
            mode, tb_pc = "in", None
        elif mode == "in":
            m = re.match(r"0x([0-9a-f]+):", line)
            if m and tb_pc is None:
                tb_pc = int(m.group(1), 16)
            if line.startswith("OUT:"):
                mode, body, calls = "out", 0, 0
        elif mode == "out":
            if "tb slow paths" in line or line.startswith("---") or not line.strip():
                host[tb_pc] = (body, calls)
                mode = None
            elif re.match(r"0x[0-9a-f]+:", line):
                body += 1
                calls += "callq" in line
    return host


def host_code(qemu, work, syms, funcs):
    """Boots `qemu` again with the translator's log limited to the functions `funcs` (indices
    into `syms`) and returns `parse_asm_log` of it."""
    ranges = ",".join("%#x..%#x" % (syms[i][0], syms[i + 1][0] - 1) for i in sorted(funcs))
    log = os.path.join(work, "asm.log")
    if os.path.exists(log):
        os.unlink(log)
    sh(*qemu, "-d", "in_asm,out_asm", "-D", log, "-dfilter", ranges)
    return parse_asm_log(log)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else sorted(
        glob.glob(os.path.expanduser("~/.cache/gpukit/kernel-bench/*/build")))[-1]
    vmlinux = os.path.join(build, "vmlinux")
    bzimage = os.path.join(build, "arch/x86/boot/bzImage")
    work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tcg_probe")
    os.makedirs(work, exist_ok=True)
    plugin = os.path.join(work, "tcg_window.so")
    sh("cc", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o", plugin,
       os.path.join(HERE, "tcg_window.c"))

    syms = []
    for line in sh("nm", "-n", vmlinux).splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2]))
    addrs = [a for a, _ in syms]
    sizes = None
    for line in sh("nm", "-S", vmlinux).splitlines():
        f = line.split()
        if (len(f) == 4 and f[2] in "tT" and f[3].endswith("timing_against_c")
                and "io_pgtable" in f[3] and not f[3].startswith("__pfx")):
            sizes = (int(f[0], 16), int(f[1], 16))
    dis = sh("objdump", "-d", "--no-show-raw-insn", vmlinux,
             "--start-address=%d" % sizes[0], "--stop-address=%d" % (sizes[0] + sizes[1]))
    ins = [(int(m.group(1), 16), m.group(2)) for m in
           (re.match(r"\s*(ffffffff[0-9a-f]+):\s*(.*)", l) for l in dis.splitlines()) if m]
    start = stop = None
    for i, (a, text) in enumerate(ins):
        if "call" in text and "map_all" in text and "unmap_all" not in text:
            j = next(k for k in range(i + 1, len(ins)) if "call" in ins[k][1])
            if "unmap_all" in ins[j][1]:
                k = max(k for k in range(i) if "call" in ins[k][1] and "ktime_get" in ins[k][1])
                start = ins[k + 1][0]
                stop = next(ins[m][0] for m in range(j, len(ins))
                            if "call" in ins[m][1] and "ktime_get" in ins[m][1])
                break
    if start is None:
        sys.exit("the single-page loop was not found in timing_against_c")

    # As `kernel-bench --wall-clock` runs it (no -icount, which changes the generated code).
    qemu = ["qemu-system-x86_64", "-accel", "tcg", "-nodefaults", "-m", "1024", "-kernel", bzimage,
            "-append", "nokaslr kunit.enable=1 console=ttyS0 kunit_shutdown=reboot "
            "kunit.filter_glob=gpukit_io_pgtable_vs_c.timing_against_c",
            "-no-reboot", "-nographic", "-serial", "stdio", "-bios", "qboot.rom", "-cpu", "max"]
    counts = os.path.join(work, "counts.txt")
    sh(*qemu, "-plugin", "%s,start=%#x,stop=%#x,out=%s" % (plugin, start, stop, counts))
    # Per window (a side's round); each side's round with the fewest guest instructions
    # counts, as the benchmark keeps each side's best round (timer interrupts that land in a
    # round add to it).
    guest = collections.defaultdict(lambda: [0, 0, 0, 0])
    tbs = collections.defaultdict(lambda: collections.defaultdict(int))
    funcs = set()
    for line in open(counts):
        w, pc, e, ld, st, tb = line.split()
        w, pc = int(w), int(pc, 16)
        for k, x in enumerate((e, ld, st, tb)):
            guest[w][k] += int(x)
        tbs[w][pc] += int(tb)
        if int(e) >= PER_ROUND:
            funcs.add(bisect.bisect_right(addrs, pc) - 1)
    best = {side: min((w for w in guest if w % 2 == side), key=lambda w: guest[w][0])
            for side in (0, 1)}

    host = host_code(qemu, work, syms, funcs)

    n = PER_ROUND
    print("per map + unmap of one 4K page (mean over %d, each side's best round)" % n)
    for side, name in ((0, "rust"), (1, "C")):
        w = best[side]
        e, ld, st, tb = (x / n for x in guest[w])
        h = sum(x * host[pc][0] for pc, x in tbs[w].items() if pc in host) / n
        c = sum(x * host[pc][1] for pc, x in tbs[w].items() if pc in host) / n
        print("%-4s guest: %5.0f instructions, %4.0f loads, %4.0f stores, %4.0f TBs; "
              "host: %5.0f instructions in TB bodies, %3.0f call sites in them"
              % (name, e, ld, st, tb, h, c))


if __name__ == "__main__":
    main()
