#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR MIT
"""`tcg_probe.py` for gpuvm's timing workload: unmap + map of one 4K mapping among N.

    tcg_probe_gpuvm.py [BUILD] [--functions] [--l2kb=KIB]

Finds, in the bench vmlinux, the two timed loops of `timing_unmap_map_against_c` (this
crate's `sm_unmap` + `sm_map`, then `gpukit_c_vm_sm_unmap` + `gpukit_c_vm_sm_map`, each
between two `ktime_get` calls), then boots the kernel twice under TCG with only that test:

1. with the `tcg_window.c` plugin: a window per timed loop (4 sizes x 4 passes x 2 sides, in
   that order), the call of each iteration's unmap marking an operation. Per window and PC:
   guest instructions, loads, stores, TB entries; per window: distinct 64-byte lines and
   4 KiB pages touched per unmap + map, and misses in a modelled 32 KiB L1 / 1 MiB L2 (LRU,
   by virtual address, the L2's size set by `--l2kb`; a proxy for what hardware would see,
   which TCG does not model);
2. with `-d in_asm,out_asm` restricted to the functions the loops ran, weighting each TB's
   host code (its body, without the softmmu slow paths) by its executions, as `tcg_probe.py`.

Per size and side, the timed pass (1-3) with the fewest guest instructions counts. With
`--functions`, the guest instructions, loads, stores, TBs and modelled L1 and L2 misses are
also broken down by function.
"""
import bisect
import collections
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcg_probe import HERE, host_code, sh  # noqa: E402

SIZES = (1_000, 10_000, 100_000, 1_000_000)
PASSES = 4  # one untimed, three timed
OPS = 4000  # unmap + map per pass


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    by_function = "--functions" in sys.argv
    l2kb = next((int(a.split("=")[1]) for a in sys.argv if a.startswith("--l2kb=")), 1024)
    build = args[0] if args else sorted(
        glob.glob(os.path.expanduser("~/.cache/gpukit/kernel-bench/*/build")))[-1]
    vmlinux = os.path.join(build, "vmlinux")
    bzimage = os.path.join(build, "arch/x86/boot/bzImage")
    work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tcg_probe_gpuvm")
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
    wrapper = None
    for line in sh("nm", "-S", vmlinux).splitlines():
        f = line.split()
        if (len(f) == 4 and f[2] in "tT" and "timing_unmap_map_against_c" in f[3]
                and not f[3].startswith("__pfx")):
            wrapper = (int(f[0], 16), int(f[1], 16))
    dis = sh("objdump", "-d", "--no-show-raw-insn", vmlinux,
             "--start-address=%d" % wrapper[0], "--stop-address=%d" % sum(wrapper))
    ins = [(int(m.group(1), 16), m.group(2)) for m in
           (re.match(r"\s*(ffffffff[0-9a-f]+):\s*(.*)", l) for l in dis.splitlines()) if m]
    calls = [(i, a, t) for i, (a, t) in enumerate(ins) if "call" in t]
    # The three ktime_get calls around the loops: the one before the call of sm_unmap, the
    # one after the call of sm_map (before the C loop), the one after gpukit_c_vm_sm_map.
    kt = [k for k, (_, _, t) in enumerate(calls) if "<ktime_get>" in t]
    loops = None
    for a, b, c in zip(kt, kt[1:], kt[2:]):
        rust = [t for _, _, t in calls[a + 1:b]]
        cside = [t for _, _, t in calls[b + 1:c]]
        if (len(rust) == 2 and "sm_unmap" in rust[0] and "sm_map" in rust[1]
                and len(cside) == 2 and "gpukit_c_vm_sm_unmap" in cside[0]):
            loops = (a, b, c)
            break
    if loops is None:
        sys.exit("the timed loops were not found in timing_unmap_map_against_c")
    a, b, c = loops
    after = lambda k: ins[calls[k][0] + 1][0]  # noqa: E731
    start = "%#x:%#x" % (after(a), after(b))
    stop = "%#x:%#x" % (calls[b][1], calls[c][1])
    mark = "%#x:%#x" % (calls[a + 1][1], calls[b + 1][1])

    qemu = ["qemu-system-x86_64", "-accel", "tcg", "-nodefaults", "-m", "1024", "-kernel", bzimage,
            "-append", "nokaslr kunit.enable=1 console=ttyS0 kunit_shutdown=reboot "
            "kunit.filter_glob=gpukit_gpuvm_vs_c.timing_unmap_map_against_c",
            "-no-reboot", "-nographic", "-serial", "stdio", "-bios", "qboot.rom", "-cpu", "max"]
    counts = os.path.join(work, "counts.txt")
    out = sh(*qemu, "-plugin", "%s,start=%s,stop=%s,mark=%s,l2kb=%d,out=%s"
             % (plugin, start, stop, mark, l2kb, counts))
    if "ok 1 timing_unmap_map_against_c" not in out:
        sys.exit("the test did not pass under the plugin")
    guest = collections.defaultdict(lambda: [0, 0, 0, 0])
    tbs = collections.defaultdict(lambda: collections.defaultdict(int))
    per_fn = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0, 0, 0]))
    misses = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    funcs = set()
    for line in open(counts):
        w, pc, e, ld, st, tb = line.split()
        w, pc = int(w), int(pc, 16)
        fn = bisect.bisect_right(addrs, pc) - 1
        for k, x in enumerate((e, ld, st, tb)):
            guest[w][k] += int(x)
            per_fn[w][fn][k] += int(x)
        tbs[w][pc] += int(tb)
        if int(e) >= OPS:
            funcs.add(fn)
    for line in open(counts + ".miss"):
        w, pc, m1, m2 = line.split()
        fn = bisect.bisect_right(addrs, int(pc, 16)) - 1
        misses[int(w)][fn][0] += int(m1)
        misses[int(w)][fn][1] += int(m2)
    win = {}
    for line in open(counts + ".win"):
        f = [int(x) for x in line.split()]
        win[f[0]] = f[1:]

    host = host_code(qemu, work, syms, funcs)

    print("per unmap + map (mean over %d, each side's timed pass with the fewest guest "
          "instructions; L2 of %d KiB)" % (OPS, l2kb))
    print("%9s %-4s %6s %5s %6s %4s %6s %5s %5s %5s %6s %6s" % (
        "mappings", "side", "insns", "loads", "stores", "TBs", "host", "calls", "lines",
        "pages", "L1miss", "L2miss"))
    for s, n in enumerate(SIZES):
        for side, name in ((0, "rust"), (1, "C")):
            w = min((s * PASSES * 2 + p * 2 + side for p in range(1, PASSES)),
                    key=lambda w: guest[w][0])
            e, ld, st, tb = (x / OPS for x in guest[w])
            h = sum(x * host[pc][0] for pc, x in tbs[w].items() if pc in host) / OPS
            cs = sum(x * host[pc][1] for pc, x in tbs[w].items() if pc in host) / OPS
            marks, _, lines, pages, l1, l2 = win[w]
            print("%9d %-4s %6.0f %5.0f %6.0f %4.0f %6.0f %5.0f %5.1f %5.1f %6.1f %6.1f" % (
                n, name, e, ld, st, tb, h, cs, lines / marks, pages / marks, l1 / marks,
                l2 / marks))
            if by_function:
                for fn, v in sorted(per_fn[w].items(), key=lambda kv: -kv[1][0]):
                    if v[0] >= OPS:
                        print("      %6.0f %5.0f %5.0f %4.0f  L1 %5.1f L2 %5.1f  %s" % (
                            *(x / OPS for x in v), *(x / OPS for x in misses[w][fn]),
                            syms[fn][1][:90]))


if __name__ == "__main__":
    main()
