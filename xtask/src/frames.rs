// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Stack frames of the crates' code in a built kernel.
//!
//! A kernel thread's stack is small and fixed: 16 KiB on x86_64 and arm64, with no guard
//! against a deep chain of large frames except a panic ("kernel stack overflow") once it is
//! exceeded. The kernel's C code is held to `CONFIG_FRAME_WARN` (2048 bytes on 64-bit
//! machines) by the compiler; nothing checks Rust frames. Rust builds large frames easily: a
//! struct moved by value, or a temporary of a big type built to be copied, sits in the caller's
//! frame, and inlining adds every callee's locals to one frame. In this project the simulated
//! GPU runs on the driver's own thread (a probe or an ioctl polling a register steps it), so
//! the firmware's frames stack on the driver's: an arm64 probe overflowed that way.
//!
//! After each build this check disassembles `vmlinux`, measures the frame of every function
//! of the workspace's crates from its prologue (arm64: `stp x29, x30, [sp, #-N]!` and
//! `sub sp, sp, #N`; x86_64: `push`es and `sub $N, %rsp`), and fails if any exceeds its bound:
//! [`DRIVER_FRAME`] for the crates' code (a few named functions that run once per device,
//! [`ALLOWED`], have their own), [`TEST_FRAME`] for their KUnit and vs-C test code, which runs
//! once per boot from a test runner's thread.

use std::path::Path;
use std::process::Command;

use crate::kernel::Arch;

/// Largest frame of the crates' own code: the kernel's `CONFIG_FRAME_WARN` on 64-bit machines.
pub(crate) const DRIVER_FRAME: u64 = 2048;
/// Largest frame of test code (KUnit cases, the vs-C comparisons and their fixtures), which
/// runs from the KUnit runner's thread with little below it.
pub(crate) const TEST_FRAME: u64 = 6144;

/// Functions allowed a larger frame than [`DRIVER_FRAME`]: the start of the demangled name,
/// the bound, and why the frame is harmless. Each runs once per device, on a shallow stack.
/// The deep paths (probe, ioctls and work items stepping the simulated GPU) are measured at
/// run time as well: the Tyr driver records the least kernel stack left wherever the
/// simulator runs, and `tyr_demo` checks it against a margin (`/sys/kernel/tyr/stack`).
const ALLOWED: &[(&str, u64, &str)] = &[
    (
        "tyr::driver::probe::<",
        2560,
        "the probe's locals (the firmware, the MCU's VM, the interface) are held across the \
         firmware boot, a path the demo's stack check measures",
    ),
    (
        "tyr::driver::device_state::<",
        2560,
        "the device state, built once after the firmware boot has returned",
    ),
    (
        "<tyr::kernel::KernelBackend>::new_inner",
        2560,
        "makes the simulated GPU's configuration and state once, before the driver's probe",
    ),
];

/// Instructions of a function read for its prologue.
const PROLOGUE: usize = 24;

/// One function's frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Demangled name.
    pub(crate) name: String,
    /// Bytes the prologue takes from the stack pointer.
    pub(crate) bytes: u64,
    /// Whether the function is test code.
    pub(crate) test: bool,
}

impl Frame {
    fn bound(&self) -> u64 {
        if self.test {
            return TEST_FRAME;
        }
        ALLOWED
            .iter()
            .find(|(name, _, _)| self.name.starts_with(name))
            .map_or(DRIVER_FRAME, |&(_, bound, _)| bound)
    }
}

/// Whether a demangled symbol belongs to one of `crates`: a path segment `name::` that starts
/// the symbol or follows `<`, `&`, `*`, `(`, `[`, `,` or a space (so `kernel::io::register::`
/// is not the `register` crate).
fn ours(sym: &str, crates: &[&str]) -> bool {
    crates.iter().any(|c| {
        let pat = format!("{c}::");
        sym.match_indices(&pat).any(|(i, _)| {
            i == 0
                || matches!(
                    sym.as_bytes()[i - 1],
                    b'<' | b'&' | b'*' | b'(' | b'[' | b',' | b' '
                )
        })
    })
}

/// Whether a symbol of ours is test code.
fn is_test(sym: &str) -> bool {
    [
        "::kunit::",
        "::vs_c::",
        "::tests::",
        "gpuvm_kunit::",
        "::kunit_rust_wrapper",
    ]
    .iter()
    .any(|p| sym.contains(p))
}

/// Parses an immediate: `#0x1a0`, `#416`, `$0x1a0`.
fn imm(s: &str) -> Option<u64> {
    let s = s.trim().trim_start_matches(['#', '$']);
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Bytes one prologue instruction (`mnemonic operands`) takes from the stack pointer.
fn stack_bytes(arch: Arch, insn: &str) -> u64 {
    // Drop the disassembler's comment (`// =0x1000` on arm64, `# imm = 0x828` on x86_64).
    let comment = match arch {
        Arch::Arm64 => " //",
        Arch::X86_64 => " #",
    };
    let insn = insn.split(comment).next().unwrap_or(insn);
    let (op, args) = insn.split_once(char::is_whitespace).unwrap_or((insn, ""));
    let args = args.trim();
    match arch {
        Arch::Arm64 => match op {
            // `sub sp, sp, #N` or `sub sp, sp, #N, lsl #12`.
            "sub" => {
                let Some(rest) = args.strip_prefix("sp, sp, ") else {
                    return 0;
                };
                let mut parts = rest.split(", ");
                let n = parts.next().and_then(imm).unwrap_or(0);
                match parts.next() {
                    Some("lsl #12") => n << 12,
                    _ => n,
                }
            }
            // `stp x29, x30, [sp, #-N]!` and `str x19, [sp, #-N]!`: pre-indexed pushes.
            "stp" | "str" if args.ends_with("]!") => args
                .rsplit_once("[sp, #-")
                .and_then(|(_, n)| imm(n.trim_end_matches("]!")))
                .unwrap_or(0),
            _ => 0,
        },
        Arch::X86_64 => match op {
            "push" | "pushq" => 8,
            "sub" | "subq" => match args.split_once(',') {
                Some((n, r)) if r.trim() == "%rsp" => imm(n).unwrap_or(0),
                _ => 0,
            },
            _ => 0,
        },
    }
}

/// Reads `llvm-objdump -d --demangle` output: the frame of every function of `crates`.
pub(crate) fn parse(arch: Arch, disasm: &str, crates: &[&str]) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut cur: Option<(Frame, usize)> = None;
    for line in disasm.lines() {
        // A function starts with `ffff800080010000 <name>:`.
        if let Some(name) = line
            .split_once(" <")
            .filter(|(addr, rest)| {
                rest.ends_with(">:") && addr.bytes().all(|b| b.is_ascii_hexdigit())
            })
            .map(|(_, rest)| &rest[..rest.len() - 2])
        {
            frames.extend(cur.take().map(|(f, _)| f));
            if ours(name, crates) {
                let frame = Frame {
                    name: name.to_owned(),
                    bytes: 0,
                    test: is_test(name),
                };
                cur = Some((frame, 0));
            }
            continue;
        }
        let Some((frame, seen)) = cur.as_mut() else {
            continue;
        };
        // An instruction line: `ffff80008001000c:      \tsub\tsp, sp, #0x40`.
        let Some((addr, insn)) = line.split_once(':') else {
            continue;
        };
        if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        *seen += 1;
        if *seen <= PROLOGUE {
            frame.bytes += stack_bytes(arch, insn.trim().replace('\t', " ").as_str());
        }
    }
    frames.extend(cur.map(|(f, _)| f));
    frames
}

/// Disassembles `vmlinux` and checks the frames of `crates` against their bounds. Returns the
/// five largest frames of the crates' code and the three largest of their tests, or the list of
/// functions over their bound.
pub(crate) fn check(arch: Arch, vmlinux: &Path, crates: &[&str]) -> Result<Vec<Frame>, String> {
    let out = Command::new(crate::kernel::llvm_tool("llvm-objdump"))
        .args(["-d", "--no-show-raw-insn", "--demangle"])
        .arg(vmlinux)
        .output()
        .map_err(|e| format!("llvm-objdump: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "llvm-objdump {}: {}",
            vmlinux.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut frames = parse(arch, &String::from_utf8_lossy(&out.stdout), crates);
    if frames.is_empty() {
        return Err(format!(
            "no function of the crates found in {}: the frame check read nothing",
            vmlinux.display()
        ));
    }
    frames.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
    frames.dedup();
    let over: Vec<String> = frames
        .iter()
        .filter(|f| f.bytes > f.bound())
        .map(|f| format!("  {} bytes (bound {}): {}", f.bytes, f.bound(), f.name))
        .collect();
    if !over.is_empty() {
        return Err(format!(
            "{} function(s) of the crates have a stack frame over its bound in {} (a kernel \
             stack is 16 KiB):\n{}",
            over.len(),
            vmlinux.display(),
            over.join("\n")
        ));
    }
    let (mut driver, mut test): (Vec<Frame>, Vec<Frame>) =
        frames.into_iter().partition(|f| !f.test);
    driver.truncate(5);
    test.truncate(3);
    driver.append(&mut test);
    Ok(driver)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRATES: &[&str] = &["tyr", "mali_sim", "register"];

    #[test]
    fn symbols_are_attributed_by_path_segment() {
        assert!(ours("tyr::driver::probe::<x>", CRATES));
        assert!(ours(
            "<mali_sim::gpu::Gpu<tyr::kernel::dma::BusMemory>>::fw_serve",
            CRATES
        ));
        assert!(ours("core::ptr::drop_in_place::<tyr::X>", CRATES));
        assert!(ours("<register::io::Mmio as x>::read", CRATES));
        assert!(!ours("<kernel::io::register::Foo>::read", CRATES));
        assert!(!ours("platform_probe", CRATES));
        assert!(!ours("xtyr::f", CRATES));
        assert!(is_test("tyr::kernel::kunit::tests::kunit_rust_wrapper_x"));
        assert!(is_test(
            "<jobqueue::kernel::vs_c::tests::Ours as Drop>::drop"
        ));
        assert!(!is_test("<mali_sim::gpu::Gpu<B>>::fw_serve"));
    }

    #[test]
    fn arm64_prologues_are_measured() {
        let disasm = "\
ffff800080010000 <tyr::driver::probe::<K>::{closure#0}>:
ffff800080010000:      \tpaciasp
ffff800080010004:      \tstp\tx29, x30, [sp, #-96]!
ffff800080010008:      \tstp\tx28, x27, [sp, #16]
ffff80008001000c:      \tsub\tsp, sp, #0x1, lsl #12 // =0x1000
ffff800080010010:      \tstr\txzr, [sp]
ffff800080010010:      \tsub\tsp, sp, #0x40
ffff800080010014:      \tbl\tffff800080020000 <foo>

ffff800080020000 <platform_probe>:
ffff800080020000:      \tsub\tsp, sp, #0x4000

ffff800080030000 <<mali_sim::gpu::Gpu<B>>::fire_due>:
ffff800080030000:      \tstr\tx19, [sp, #-16]!
ffff800080030004:      \tret
";
        let frames = parse(Arch::Arm64, disasm, CRATES);
        assert_eq!(
            frames,
            [
                Frame {
                    name: "tyr::driver::probe::<K>::{closure#0}".into(),
                    bytes: 96 + 4096 + 64,
                    test: false,
                },
                Frame {
                    name: "<mali_sim::gpu::Gpu<B>>::fire_due".into(),
                    bytes: 16,
                    test: false,
                },
            ]
        );
    }

    #[test]
    fn x86_64_prologues_are_measured() {
        let disasm = "\
ffffffff81000000 <tyr::ioctl::vm_bind<K>>:
ffffffff81000000:      \tpushq\t%rbp
ffffffff81000001:      \tpushq\t%r15
ffffffff81000003:      \tsubq\t$0x828, %rsp # imm = 0x828
ffffffff8100000a:      \tsubq\t$0x8, %rax
";
        let frames = parse(Arch::X86_64, disasm, CRATES);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].bytes, 8 + 8 + 0x828);
    }

    #[test]
    fn bounds_are_chosen_by_kind_and_name() {
        let frame = |name: &str, test| Frame {
            name: name.into(),
            bytes: 0,
            test,
        };
        assert_eq!(
            frame("<mali_sim::gpu::Gpu<B>>::fw_serve", false).bound(),
            DRIVER_FRAME
        );
        assert_eq!(
            frame("tyr::kernel::kunit::tests::f", true).bound(),
            TEST_FRAME
        );
        assert_eq!(frame("tyr::driver::probe::<K>", false).bound(), 2560);
        for (_, bound, why) in ALLOWED {
            assert!(*bound > DRIVER_FRAME && *bound < TEST_FRAME && !why.is_empty());
        }
    }

    #[test]
    fn only_the_prologue_counts() {
        let mut disasm = String::from("ffff800080010000 <tyr::f>:\n");
        for i in 0..PROLOGUE + 4 {
            disasm.push_str(&format!(
                "ffff8000800100{i:02x}:      \tsub\tsp, sp, #0x10\n"
            ));
        }
        let frames = parse(Arch::Arm64, &disasm, CRATES);
        assert_eq!(frames[0].bytes, 16 * PROLOGUE as u64);
    }
}
