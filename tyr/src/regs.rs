// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The registers of a Mali CSF GPU.
//!
//! A Mali CSF GPU is programmed through one MMIO window split into blocks:
//!
//! - **GPU_CONTROL** (`0x0000`): identity and feature registers, the GPU interrupt block, the
//!   command register (resets, cache maintenance) and power control of the L2 cache, shader
//!   cores and tiler.
//! - **JOB_CONTROL** (`0x1000`): the job interrupt block, raised by the command-stream frontend.
//! - **MMU_CONTROL** (`0x2000`): the MMU interrupt block (fault bits in 15:0, command-completed
//!   bits in 31:16, one per address space), then at `0x2400` one 64-byte register set per
//!   address space (AS).
//! - **USER** (`0x10000`): `LATEST_FLUSH_ID`, the page userspace maps read-only.
//! - **Doorbells** (`0x80000 + n * 0x10000`): one 64 KiB page each.
//!
//! Each interrupt block has `RAWSTAT` (pending bits), `CLEAR` (write 1 to acknowledge), `MASK`
//! (bits that reach the line) and `STATUS` (`RAWSTAT & MASK`). 64-bit quantities are split in
//! `_LO`/`_HI` halves; they are declared here as one 64-bit register and the backend splits the
//! access.
//!
//! The declarations use [`register!`](register::register), so every field is a
//! [`Bounded`](bounded::Bounded) integer and writes cannot truncate.
//!
//! # Examples
//!
//! ```
//! use register::io::{Io, MemRegion};
//! use tyr::regs::{GPU_ID, MMU_FEATURES};
//!
//! let io = MemRegion::<0x4000>::new();
//! io.write32(0xa867_0005, 0x0);
//! io.write32(0x2830, 0x14);
//! let id = io.read(GPU_ID);
//! assert_eq!((id.arch_major().get(), id.prod_major().get()), (10, 7));
//! assert_eq!(io.read(MMU_FEATURES).va_bits().get(), 48);
//! ```

use register::register;

/// Number of address-space register sets the MMIO window reserves.
pub const MAX_AS: usize = 16;

register! {
    /// GPU identification.
    pub GPU_ID(u32) @ 0x000 {
        /// Major architecture version.
        31:28 arch_major;
        /// Minor architecture version.
        27:24 arch_minor;
        /// Architecture revision.
        23:20 arch_rev;
        /// Product major ID.
        19:16 prod_major;
        /// Major version (the `r` of `rNpM`).
        15:12 ver_major;
        /// Minor version (the `p` of `rNpM`).
        11:4 ver_minor;
        /// Version status.
        3:0 ver_status;
    }

    /// L2 cache features.
    pub L2_FEATURES(u32) @ 0x004 {
        /// log2 of the cache line size.
        7:0 line_size;
        /// log2 of the associativity.
        15:8 associativity;
        /// log2 of the cache slice size.
        23:16 cache_size;
        /// log2 of the external bus width in bits.
        31:24 bus_width;
    }

    /// Features of the shader cores.
    pub CORE_FEATURES(u32) @ 0x008 {
        /// Core variant.
        7:0 core_variant;
    }

    /// Features of the tiler.
    pub TILER_FEATURES(u32) @ 0x00c {
        /// Raw value.
        31:0 value;
    }

    /// Features of the memory system.
    pub MEM_FEATURES(u32) @ 0x010 {
        /// The GPU has coherent accesses to the CPU's caches.
        0:0 coherent_core_group => bool;
        /// log2 of the number of L2 slices minus one.
        11:8 l2_slices;
    }

    /// MMU features.
    pub MMU_FEATURES(u32) @ 0x014 {
        /// Virtual address bits.
        7:0 va_bits;
        /// Physical address bits.
        15:8 pa_bits;
    }

    /// Address spaces present (one bit each, contiguous from bit 0).
    pub AS_PRESENT(u32) @ 0x018 {
        /// The mask.
        31:0 present;
    }

    /// Command-stream frontend version.
    pub CSF_ID(u32) @ 0x01c {
        /// Raw value.
        31:0 value;
    }

    /// GPU interrupts, raw status.
    pub GPU_IRQ_RAWSTAT(u32) @ 0x020 {
        /// A GPU fault.
        0:0 fault => bool;
        /// A fault in protected mode.
        1:1 protected_fault => bool;
        /// A reset completed.
        8:8 reset_completed => bool;
        /// One power domain finished a transition.
        9:9 power_changed_single => bool;
        /// Every power transition finished.
        10:10 power_changed_all => bool;
        /// A cache clean/invalidate completed.
        17:17 clean_caches_completed => bool;
        /// The doorbell mirror.
        18:18 doorbell_mirror => bool;
        /// The MCU status changed.
        19:19 mcu_status_changed => bool;
    }

    /// GPU interrupts, clear (write 1 to acknowledge).
    pub GPU_IRQ_CLEAR(u32) @ 0x024 {
        /// The bits to clear.
        31:0 bits;
    }

    /// GPU interrupts, mask.
    pub GPU_IRQ_MASK(u32) @ 0x028 {
        /// The enabled bits.
        31:0 bits;
    }

    /// GPU interrupts, status.
    pub GPU_IRQ_STATUS(u32) @ 0x02c {
        /// The pending, enabled bits.
        31:0 bits;
    }

    /// GPU command.
    pub GPU_COMMAND(u32) @ 0x030 {
        /// Command code.
        7:0 code;
        /// Command payload (reset mode, cache maintenance modes).
        31:8 payload;
    }

    /// GPU status.
    pub GPU_STATUS(u32) @ 0x034 {
        /// The GPU is active.
        0:0 active => bool;
        /// A power transition is in progress.
        1:1 power_active => bool;
        /// A page fault is pending.
        4:4 page_fault => bool;
    }

    /// GPU fault status.
    pub GPU_FAULTSTATUS(u32) @ 0x03c {
        /// Exception code.
        7:0 exception_type;
    }

    /// GPU fault address.
    pub GPU_FAULTADDRESS(u64) @ 0x040 {
        /// The address.
        63:0 address;
    }

    /// Timestamp offset.
    pub TIMESTAMP_OFFSET(u64) @ 0x088 {
        /// The offset.
        63:0 value;
    }

    /// Cycle counter.
    pub CYCLE_COUNT(u64) @ 0x090 {
        /// The count.
        63:0 value;
    }

    /// System timestamp.
    pub TIMESTAMP(u64) @ 0x098 {
        /// The timestamp.
        63:0 value;
    }

    /// Maximum threads per core.
    pub THREAD_MAX_THREADS(u32) @ 0x0a0 {
        /// The count.
        31:0 value;
    }

    /// Maximum workgroup size.
    pub THREAD_MAX_WORKGROUP_SIZE(u32) @ 0x0a4 {
        /// The size.
        31:0 value;
    }

    /// Maximum barrier size.
    pub THREAD_MAX_BARRIER_SIZE(u32) @ 0x0a8 {
        /// The size.
        31:0 value;
    }

    /// Thread features.
    pub THREAD_FEATURES(u32) @ 0x0ac {
        /// Raw value.
        31:0 value;
    }

    /// Texture features (four registers).
    pub TEXTURE_FEATURES(u32)[4] @ 0x0b0 {
        /// Raw value.
        31:0 value;
    }

    /// Shader cores present.
    pub SHADER_PRESENT(u64) @ 0x100 {
        /// One bit per core.
        63:0 mask;
    }

    /// Tilers present.
    pub TILER_PRESENT(u64) @ 0x110 {
        /// One bit per tiler.
        63:0 mask;
    }

    /// L2 slices present.
    pub L2_PRESENT(u64) @ 0x120 {
        /// One bit per slice.
        63:0 mask;
    }

    /// L2 slices powered and ready, low half.
    pub L2_READY_LO(u32) @ 0x160 {
        /// One bit per slice.
        31:0 ready;
    }

    /// L2 power-on request, low half.
    pub L2_PWRON_LO(u32) @ 0x1a0 {
        /// One bit per slice to power on.
        31:0 request;
    }

    /// L2 slices in a power transition, low half.
    pub L2_PWRTRANS_LO(u32) @ 0x220 {
        /// One bit per slice.
        31:0 transitioning;
    }

    /// Shader cores powered and ready.
    pub SHADER_READY(u64) @ 0x140 {
        /// One bit per instance.
        63:0 ready;
    }

    /// Tilers powered and ready.
    pub TILER_READY(u64) @ 0x150 {
        /// One bit per instance.
        63:0 ready;
    }

    /// L2 slices powered and ready (both halves).
    pub L2_READY(u64) @ 0x160 {
        /// One bit per instance.
        63:0 ready;
    }

    /// Shader core power-on request.
    pub SHADER_PWRON(u64) @ 0x180 {
        /// One bit per instance.
        63:0 request;
    }

    /// Tiler power-on request.
    pub TILER_PWRON(u64) @ 0x190 {
        /// One bit per instance.
        63:0 request;
    }

    /// L2 power-on request (both halves).
    pub L2_PWRON(u64) @ 0x1a0 {
        /// One bit per instance.
        63:0 request;
    }

    /// Shader core power-off request.
    pub SHADER_PWROFF(u64) @ 0x1c0 {
        /// One bit per instance.
        63:0 request;
    }

    /// Tiler power-off request.
    pub TILER_PWROFF(u64) @ 0x1d0 {
        /// One bit per instance.
        63:0 request;
    }

    /// L2 power-off request.
    pub L2_PWROFF(u64) @ 0x1e0 {
        /// One bit per instance.
        63:0 request;
    }

    /// Shader cores in a power transition.
    pub SHADER_PWRTRANS(u64) @ 0x200 {
        /// One bit per instance.
        63:0 transitioning;
    }

    /// Tilers in a power transition.
    pub TILER_PWRTRANS(u64) @ 0x210 {
        /// One bit per instance.
        63:0 transitioning;
    }

    /// L2 slices in a power transition (both halves).
    pub L2_PWRTRANS(u64) @ 0x220 {
        /// One bit per instance.
        63:0 transitioning;
    }

    /// Revision ID.
    pub REVIDR(u32) @ 0x280 {
        /// Raw value.
        31:0 value;
    }

    /// Coherency protocols supported.
    pub COHERENCY_FEATURES(u32) @ 0x300 {
        /// One bit per protocol.
        31:0 protocols;
    }

    /// Coherency protocol in use.
    pub COHERENCY_ENABLE(u32) @ 0x304 {
        /// The protocol number.
        31:0 protocol;
    }

    /// Control of the microcontroller.
    pub MCU_CONTROL(u32) @ 0x700 {
        /// Requested state ([`mcu`]).
        1:0 request;
    }

    /// MCU status.
    pub MCU_STATUS(u32) @ 0x704 {
        /// Current state ([`mcu`]).
        1:0 status;
    }

    /// Job interrupts, raw status.
    pub JOB_IRQ_RAWSTAT(u32) @ 0x1000 {
        /// One bit per command-stream group.
        30:0 csg;
        /// The global interface.
        31:31 global => bool;
    }

    /// Job interrupts, clear.
    pub JOB_IRQ_CLEAR(u32) @ 0x1004 {
        /// The bits to clear.
        31:0 bits;
    }

    /// Job interrupts, mask.
    pub JOB_IRQ_MASK(u32) @ 0x1008 {
        /// The enabled bits.
        31:0 bits;
    }

    /// Job interrupts, status.
    pub JOB_IRQ_STATUS(u32) @ 0x100c {
        /// The pending, enabled bits.
        31:0 bits;
    }

    /// MMU interrupts, raw status.
    pub MMU_IRQ_RAWSTAT(u32) @ 0x2000 {
        /// Page fault, one bit per address space.
        15:0 fault;
        /// Command completed, one bit per address space.
        31:16 command_completed;
    }

    /// MMU interrupts, clear.
    pub MMU_IRQ_CLEAR(u32) @ 0x2004 {
        /// The bits to clear.
        31:0 bits;
    }

    /// MMU interrupts, mask.
    pub MMU_IRQ_MASK(u32) @ 0x2008 {
        /// The enabled bits.
        31:0 bits;
    }

    /// MMU interrupts, status.
    pub MMU_IRQ_STATUS(u32) @ 0x200c {
        /// The pending, enabled bits.
        31:0 bits;
    }

    /// Translation table base of each address space.
    pub AS_TRANSTAB(u64)[MAX_AS ; 0x40] @ 0x2400 {
        /// Device address of the root table (and walk attributes in the low bits).
        63:0 value;
    }

    /// Memory attributes (MAIR-like) of each address space.
    pub AS_MEMATTR(u64)[MAX_AS ; 0x40] @ 0x2408 {
        /// Eight attribute bytes.
        63:0 value;
    }

    /// Lock region of each address space.
    pub AS_LOCKADDR(u64)[MAX_AS ; 0x40] @ 0x2410 {
        /// log2 of the region size minus one.
        5:0 width;
        /// Base address of the region (only the bits above the size count).
        63:12 base;
    }

    /// Command register of each address space.
    pub AS_COMMAND(u32)[MAX_AS ; 0x40] @ 0x2418 {
        /// The command ([`as_command`]).
        7:0 command;
    }

    /// Fault status of each address space.
    pub AS_FAULTSTATUS(u32)[MAX_AS ; 0x40] @ 0x241c {
        /// Exception code.
        7:0 exception_type;
        /// Access type of the faulting access.
        9:8 access_type;
        /// Source of the faulting access.
        31:16 source_id;
    }

    /// Fault address of each address space.
    pub AS_FAULTADDRESS(u64)[MAX_AS ; 0x40] @ 0x2420 {
        /// The virtual address.
        63:0 address;
    }

    /// Status of each address space.
    pub AS_STATUS(u32)[MAX_AS ; 0x40] @ 0x2428 {
        /// A command is in progress.
        0:0 active => bool;
    }

    /// Translation configuration of each address space.
    pub AS_TRANSCFG(u64)[MAX_AS ; 0x40] @ 0x2430 {
        /// Address mode ([`transcfg`]) in bits 3:0, input-address size and walk attributes above.
        63:0 value;
    }

    /// The flush ID, the first register of the USER page (`0x10000`), the one page of the
    /// window userspace may map: it moves on every cache flush, so a command stream can skip a
    /// flush that already happened since the ID it was built against.
    pub LATEST_FLUSH_ID(u32) @ 0x1_0000 {
        /// The ID.
        31:0 value;
    }

    /// The doorbell pages; writing 1 to one rings it. A 2 MiB register window (the G610's)
    /// holds 24 of them: doorbell 0 is the firmware's global one, 1 to 23 serve group slots.
    pub DOORBELL(u32)[24 ; 0x1_0000] @ 0x8_0000 {
        /// Write 1 to ring.
        0:0 ring => bool;
    }
}

/// `GPU_COMMAND` codes and payloads.
pub mod gpu_command {
    /// Reset command code.
    pub const RESET: u32 = 1;
    /// Soft-reset payload.
    pub const RESET_SOFT: u32 = 1;
    /// Hard-reset payload.
    pub const RESET_HARD: u32 = 2;
    /// Cache maintenance command code.
    pub const FLUSH_CACHES: u32 = 4;
    /// Cache maintenance mode: clean.
    pub const CACHE_CLEAN: u32 = 1 << 0;
    /// Cache maintenance mode: invalidate.
    pub const CACHE_INV: u32 = 1 << 1;
}

/// `AS_COMMAND` values.
pub mod as_command {
    /// Latch `TRANSTAB`/`MEMATTR`/`TRANSCFG`.
    pub const UPDATE: u32 = 1;
    /// Lock the `LOCKADDR` region.
    pub const LOCK: u32 = 2;
    /// Invalidate the locked region's TLB entries and unlock.
    pub const UNLOCK: u32 = 3;
    /// Flush page-table writes, invalidate, unlock.
    pub const FLUSH_PT: u32 = 4;
    /// Flush memory, invalidate, unlock.
    pub const FLUSH_MEM: u32 = 5;
}

/// `MCU_CONTROL` requests and `MCU_STATUS` states.
pub mod mcu {
    /// Disable / disabled.
    pub const DISABLED: u32 = 0;
    /// Enable / enabled.
    pub const ENABLED: u32 = 1;
    /// Halted (status).
    pub const HALT: u32 = 2;
    /// Fatal error (status).
    pub const FATAL: u32 = 3;
}

/// `AS_TRANSCFG` address modes.
pub mod transcfg {
    /// Every access faults.
    pub const ADRMODE_UNMAPPED: u64 = 1;
    /// AArch64 4K-granule tables.
    pub const ADRMODE_AARCH64_4K: u64 = 6;
}

/// Smallest lock region, as log2 of its size (32 KiB).
pub const LOCK_REGION_MIN_SHIFT: u32 = 15;

/// Encodes the smallest naturally aligned power-of-two region covering `[start, start + size)`
/// as an `AS_LOCKADDR` value, the way panthor computes it; returns the value and the region
/// actually locked (`None` for an empty or overflowing range).
///
/// # Examples
///
/// ```
/// use tyr::regs::lock_region;
///
/// // One page is rounded up to the 32 KiB minimum.
/// assert_eq!(lock_region(0x1234_5000, 0x1000), Some((0x1234_4000 | 14, 0x1234_0000, 0x8000)));
/// // A range that crosses a 2 MiB boundary needs a 4 MiB region.
/// assert_eq!(lock_region(0x1f_f000, 0x2000).map(|r| (r.1, r.2)), Some((0, 0x40_0000)));
/// ```
pub const fn lock_region(start: u64, size: u64) -> Option<(u64, u64, u64)> {
    if size == 0 {
        return None;
    }
    let end = match start.checked_add(size) {
        Some(e) => e,
        None => return None,
    };
    // The highest bit in which the first and last address differ must lie inside the region.
    let differing = 64 - (start ^ (end - 1)).leading_zeros();
    let top = if differing > LOCK_REGION_MIN_SHIFT {
        differing
    } else {
        LOCK_REGION_MIN_SHIFT
    };
    let width = top - 1;
    // panthor keeps the bit `width` of the start (the hardware ignores it).
    let value = (start & !((1u64 << width) - 1)) | width as u64;
    let (base, len) = if top >= 64 {
        (0, u64::MAX)
    } else {
        (start & !((1u64 << top) - 1), 1u64 << top)
    };
    Some((value, base, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_hardware() {
        assert_eq!(AS_TRANSTAB::OFFSET, 0x2400);
        assert_eq!(AS_COMMAND::OFFSET + 3 * 0x40, 0x24d8);
        assert_eq!(AS_TRANSCFG::OFFSET, 0x2430);
        assert_eq!(DOORBELL::OFFSET + 0x1_0000, 0x9_0000);
        assert_eq!(L2_PWRON_LO::OFFSET, 0x1a0);
        assert_eq!(MMU_IRQ_RAWSTAT::OFFSET, 0x2000);
    }

    #[test]
    fn lock_regions_cover_the_range() {
        for (start, size) in [
            (0u64, 1u64),
            (0x1000, 0x1000),
            (0x7fff_f000, 0x2000),
            (0x1_0000_0000, 0x20_0000),
            (0xffff_ffff_f000, 0x1000),
            (0x12_3456_7000, 0x7654_3000),
        ] {
            let (value, base, len) = lock_region(start, size).unwrap();
            assert!(base <= start && start + size - 1 <= base + (len - 1));
            assert_eq!(base % len, 0);
            assert!(len >= 1 << LOCK_REGION_MIN_SHIFT);
            assert_eq!(1u64 << ((value & 0x3f) + 1), len);
        }
        assert_eq!(lock_region(0, 0), None);
        assert_eq!(lock_region(u64::MAX, 2), None);
    }
}
