#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Turns a Linux register file (Tyr's or nova-core's `regs.rs`) into a crate that compiles
# against `gpukit-register`, for `compile_time.sh`:
#
#   linux_regs.py REGS_RS OUT_LIB_RS
#
# Only the `register! { ... }` blocks are kept, each in the module it was declared in; the
# driver's own code around them (impl blocks, enums, kernel imports) is dropped. What the blocks
# refer to is replaced by stubs: an empty type per base family (`@ Base + 0x..`), an enum per
# converted field type (declared with `bounded_enum!`, one variant for `?=>`, every value for
# `=>`), and the constants used as array sizes, copied with their value. The generated file is
# a measurement input, written at run time from the Linux tree and never committed.

import re
import sys

PRIMITIVES = {"bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64"}


def blocks(text):
    """Yields (module path, block text) for every `register! { ... }` block."""
    mods = []  # (name, depth at which its body opened)
    depth = 0
    i = 0
    n = len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        m = re.compile(r"(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z0-9_]+)\s*\{").match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            depth += 1
            mods.append((m.group(1), depth))
            i = m.end()
            continue
        m = re.compile(r"register!\s*\{").match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            start = m.end()
            level = 1
            j = start
            while level:
                if text.startswith("//", j):
                    j = text.find("\n", j)
                    continue
                if text[j] == "{":
                    level += 1
                elif text[j] == "}":
                    level -= 1
                j += 1
            yield [name for name, _ in mods], text[start : j - 1]
            i = j
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            if mods and mods[-1][1] == depth:
                mods.pop()
            depth -= 1
        i += 1


def main():
    src = open(sys.argv[1]).read()
    found = list(blocks(src))
    families = set()
    enums = {}  # name -> (width, total)
    consts = {}
    extra = {}  # module path -> lines
    regs = {}  # register name -> storage
    for path, body in found:
        for reg, store in re.findall(r"([A-Z][A-Z0-9_]*)\s*\((u8|u16|u32|u64)\)", body):
            regs[reg] = (store, tuple(path))
        families.update(re.findall(r"@\s*([A-Z][A-Za-z0-9_]*)\s*\+", body))
        families.update(re.findall(r"=>\s*([A-Z][A-Za-z0-9_]*)\s*\+", body))
        for store, fields in re.findall(
            r"\((u8|u16|u32|u64)\)[^{]*\{([^}]*)\}", body
        ):
            for hi, lo, arrow, ty in re.findall(
                r"(\d+)\s*:\s*(\d+)\s+[a-z_0-9]+\s*(\?=>|=>)\s*([A-Za-z_][A-Za-z0-9_]*)\s*;",
                fields,
            ):
                if ty not in PRIMITIVES and ty not in enums:
                    enums[ty] = (store, int(hi) - int(lo) + 1, arrow == "=>")
        sizes = re.findall(r"\[\s*([A-Z][A-Z0-9_]*)\s*[\],;]", body)
        sizes += re.findall(r"stride\s*=\s*([A-Z][A-Z0-9_]*)", body)
        sizes += re.findall(r";\s*([A-Z][A-Z0-9_]*)\s*\]", body)
        for name in sizes:
            m = re.search(r"const\s+" + name + r"\s*:\s*usize\s*=\s*([^;]+);", src)
            consts[name] = m.group(1).strip() if m else "4"

    out = ["#![no_std]", "#![allow(missing_docs, dead_code, unused_imports)]", ""]
    out.append("use register::{bounded_enum, register};")
    for name in sorted(families):
        out.append(f"pub struct {name};")
    for name, value in sorted(consts.items()):
        out.append(f"pub const {name}: usize = {value};")
    for name, (store, width, total) in sorted(enums.items()):
        if name in regs:
            # A register used as the type of another register's field: converted through its
            # raw value (the driver writes these two impls by hand), next to its declaration.
            inner, path = regs[name]
            extra.setdefault(path, []).extend(
                [
                    f"impl From<register::Bounded<{store}, {width}>> for {name} {{",
                    f"    fn from(v: register::Bounded<{store}, {width}>) -> Self {{",
                    f"        Self::from_raw(v.get() as {inner})",
                    "    }",
                    "}",
                    f"impl From<{name}> for register::Bounded<{store}, {width}> {{",
                    f"    fn from(v: {name}) -> Self {{",
                    f"        Self::from_expr(v.into_raw() as {store})",
                    "    }",
                    "}",
                ]
            )
            continue
        out.append("bounded_enum! {")
        out.append("    #[derive(Debug, Clone, Copy, PartialEq, Eq)]")
        if total:
            out.append(f"    pub enum {name}: Bounded<{store}, {width}> => {{")
            for v in range(1 << width):
                out.append(f"        V{v} = {v},")
            out.append("    }")
        else:
            out.append(f"    pub enum {name}: Bounded<{store}, {width}> ?=> {{ V0 = 0 }}")
        out.append("}")

    tree = {}
    for path, body in found:
        node = tree
        for name in path:
            node = node.setdefault(name, {})
        node.setdefault("", []).append(body)

    def emit(node, indent, path):
        pad = "    " * indent
        for body in node.get("", []):
            out.append(f"{pad}register! {{{body}}}")
        for line in extra.get(tuple(path), []):
            out.append(pad + line)
        for name, child in node.items():
            if name:
                out.append(f"{pad}pub mod {name} {{")
                out.append(f"{pad}    use crate::*;")
                emit(child, indent + 1, path + [name])
                out.append(f"{pad}}}")

    emit(tree, 0, [])
    open(sys.argv[2], "w").write("\n".join(out) + "\n")
    count = sum(len(re.findall(r"[A-Z][A-Z0-9_]*\s*\((?:u8|u16|u32|u64)\)", b)) for _, b in found)
    print(f"{count} registers in {len(found)} register! blocks")


main()
