// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Register offsets and bits of the simulated Mali-G610.
//!
//! A Mali CSF GPU exposes one MMIO window (2 MiB on the RK3588's G610) split into blocks:
//!
//! - **GPU_CONTROL** (`0x0000`): identification and feature registers, the GPU interrupt
//!   block, the GPU command register (reset, cache maintenance), power control of the L2
//!   cache, shader cores and tiler, time and cycle counters, and the MCU control registers.
//! - **JOB_CONTROL** (`0x1000`): the job interrupt block, through which the command-stream
//!   frontend signals the driver (one bit per command-stream group plus the global bit).
//! - **MMU_CONTROL** (`0x2000`): the MMU interrupt block (page fault and command-completed
//!   bits per address space), followed at `0x2400` by one 64-byte register set per address
//!   space (AS).
//! - **USER** (`0x10000`): `LATEST_FLUSH_ID`, readable by userspace.
//! - **Doorbells** (`0x80000 + n * 0x10000`): one 64 KiB page per doorbell, so each can be
//!   mapped on its own.
//!
//! Every interrupt block has the same four registers: `RAWSTAT` (what is pending; writing
//! sets bits, to raise an interrupt by hand), `CLEAR` (write 1 to clear a pending bit; reads
//! as zero), `MASK` (which pending bits reach the interrupt line) and `STATUS`
//! (`RAWSTAT & MASK`, read-only). The line is asserted while `STATUS` is non-zero.
//!
//! 64-bit quantities are split into `_LO`/`_HI` halves 4 bytes apart; the bus only carries
//! aligned 32-bit accesses. The offsets are the hardware's, as panthor's register headers
//! (`panthor_gpu_regs.h`, `panthor_mmu_regs.h`, `panthor_fw_regs.h`) give them.

/// Size of the MMIO window.
pub const MMIO_SIZE: usize = 0x20_0000;

/// GPU identification.
pub const GPU_ID: usize = 0x000;
/// L2 cache features.
pub const L2_FEATURES: usize = 0x004;
/// Shader core features.
pub const CORE_FEATURES: usize = 0x008;
/// Tiler features.
pub const TILER_FEATURES: usize = 0x00c;
/// Features of the memory system.
pub const MEM_FEATURES: usize = 0x010;
/// MMU features: VA bits 7:0, PA bits 15:8.
pub const MMU_FEATURES: usize = 0x014;
/// Bit mask of the address spaces present.
pub const AS_PRESENT: usize = 0x018;
/// Command-stream frontend version.
pub const CSF_ID: usize = 0x01c;
/// GPU interrupt block: raw status.
pub const GPU_IRQ_RAWSTAT: usize = 0x020;
/// GPU interrupt block: clear.
pub const GPU_IRQ_CLEAR: usize = 0x024;
/// GPU interrupt block: mask.
pub const GPU_IRQ_MASK: usize = 0x028;
/// GPU interrupt block: status.
pub const GPU_IRQ_STATUS: usize = 0x02c;
/// GPU command register.
pub const GPU_COMMAND: usize = 0x030;
/// GPU status.
pub const GPU_STATUS: usize = 0x034;
/// GPU fault status.
pub const GPU_FAULTSTATUS: usize = 0x03c;
/// GPU fault address, low half.
pub const GPU_FAULTADDRESS_LO: usize = 0x040;
/// GPU fault address, high half.
pub const GPU_FAULTADDRESS_HI: usize = 0x044;
/// L2 configuration.
pub const L2_CONFIG: usize = 0x048;
/// Power key (unlocks the override registers).
pub const PWR_KEY: usize = 0x050;
/// Power override 0.
pub const PWR_OVERRIDE0: usize = 0x054;
/// Power override 1.
pub const PWR_OVERRIDE1: usize = 0x058;
/// Timestamp offset, low half.
pub const TIMESTAMP_OFFSET_LO: usize = 0x088;
/// Timestamp offset, high half.
pub const TIMESTAMP_OFFSET_HI: usize = 0x08c;
/// Cycle counter, low half.
pub const CYCLE_COUNT_LO: usize = 0x090;
/// Cycle counter, high half.
pub const CYCLE_COUNT_HI: usize = 0x094;
/// System timestamp, low half.
pub const TIMESTAMP_LO: usize = 0x098;
/// System timestamp, high half.
pub const TIMESTAMP_HI: usize = 0x09c;

/// Whether the 32-bit register at `offset` (any byte of it) reads the GPU's time: the cycle
/// counter or the timestamp.
pub const fn reads_time(offset: usize) -> bool {
    matches!(
        offset & !3,
        CYCLE_COUNT_LO | CYCLE_COUNT_HI | TIMESTAMP_LO | TIMESTAMP_HI
    )
}
/// Maximum threads per core.
pub const THREAD_MAX_THREADS: usize = 0x0a0;
/// Maximum workgroup size.
pub const THREAD_MAX_WORKGROUP_SIZE: usize = 0x0a4;
/// Maximum barrier size.
pub const THREAD_MAX_BARRIER_SIZE: usize = 0x0a8;
/// Thread features.
pub const THREAD_FEATURES: usize = 0x0ac;
/// Texture features `n` (0 to 3): `TEXTURE_FEATURES_0 + 4 * n`.
pub const TEXTURE_FEATURES_0: usize = 0x0b0;
/// Shader cores present, low half.
pub const SHADER_PRESENT_LO: usize = 0x100;
/// Tilers present, low half.
pub const TILER_PRESENT_LO: usize = 0x110;
/// L2 slices present, low half.
pub const L2_PRESENT_LO: usize = 0x120;
/// Shader cores powered and ready, low half.
pub const SHADER_READY_LO: usize = 0x140;
/// Tilers ready, low half.
pub const TILER_READY_LO: usize = 0x150;
/// L2 ready, low half.
pub const L2_READY_LO: usize = 0x160;
/// Shader power-on request, low half.
pub const SHADER_PWRON_LO: usize = 0x180;
/// Tiler power-on request, low half.
pub const TILER_PWRON_LO: usize = 0x190;
/// L2 power-on request, low half.
pub const L2_PWRON_LO: usize = 0x1a0;
/// Shader power-off request, low half.
pub const SHADER_PWROFF_LO: usize = 0x1c0;
/// Tiler power-off request, low half.
pub const TILER_PWROFF_LO: usize = 0x1d0;
/// L2 power-off request, low half.
pub const L2_PWROFF_LO: usize = 0x1e0;
/// Shader cores in a power transition, low half.
pub const SHADER_PWRTRANS_LO: usize = 0x200;
/// Tilers in a power transition, low half.
pub const TILER_PWRTRANS_LO: usize = 0x210;
/// L2 in a power transition, low half.
pub const L2_PWRTRANS_LO: usize = 0x220;
/// Shader cores active, low half.
pub const SHADER_PWRACTIVE_LO: usize = 0x240;
/// Tilers active, low half.
pub const TILER_PWRACTIVE_LO: usize = 0x250;
/// L2 active, low half.
pub const L2_PWRACTIVE_LO: usize = 0x260;
/// Revision ID.
pub const REVIDR: usize = 0x280;
/// Coherency protocols supported.
pub const COHERENCY_FEATURES: usize = 0x300;
/// Coherency protocol selected.
pub const COHERENCY_ENABLE: usize = 0x304;
/// MCU control.
pub const MCU_CONTROL: usize = 0x700;
/// MCU status.
pub const MCU_STATUS: usize = 0x704;

/// Job interrupt block: raw status.
pub const JOB_IRQ_RAWSTAT: usize = 0x1000;
/// Job interrupt block: clear.
pub const JOB_IRQ_CLEAR: usize = 0x1004;
/// Job interrupt block: mask.
pub const JOB_IRQ_MASK: usize = 0x1008;
/// Job interrupt block: status.
pub const JOB_IRQ_STATUS: usize = 0x100c;

/// MMU interrupt block: raw status.
pub const MMU_IRQ_RAWSTAT: usize = 0x2000;
/// MMU interrupt block: clear.
pub const MMU_IRQ_CLEAR: usize = 0x2004;
/// MMU interrupt block: mask.
pub const MMU_IRQ_MASK: usize = 0x2008;
/// MMU interrupt block: status.
pub const MMU_IRQ_STATUS: usize = 0x200c;

/// First address-space register set.
pub const MMU_AS_BASE: usize = 0x2400;
/// Distance between address-space register sets.
pub const MMU_AS_STRIDE: usize = 0x40;
/// Register slots reserved for address spaces (the G610 implements 8 of them).
pub const MMU_AS_SLOTS: usize = 16;
/// Per-AS: translation table base, low half.
pub const AS_TRANSTAB_LO: usize = 0x00;
/// Per-AS: translation table base, high half.
pub const AS_TRANSTAB_HI: usize = 0x04;
/// Per-AS: memory attributes, low half.
pub const AS_MEMATTR_LO: usize = 0x08;
/// Per-AS: memory attributes, high half.
pub const AS_MEMATTR_HI: usize = 0x0c;
/// Per-AS: lock region, low half.
pub const AS_LOCKADDR_LO: usize = 0x10;
/// Per-AS: lock region, high half.
pub const AS_LOCKADDR_HI: usize = 0x14;
/// Per-AS: command.
pub const AS_COMMAND: usize = 0x18;
/// Per-AS: fault status.
pub const AS_FAULTSTATUS: usize = 0x1c;
/// Per-AS: fault address, low half.
pub const AS_FAULTADDRESS_LO: usize = 0x20;
/// Per-AS: fault address, high half.
pub const AS_FAULTADDRESS_HI: usize = 0x24;
/// Per-AS: status.
pub const AS_STATUS: usize = 0x28;
/// Per-AS: translation configuration, low half.
pub const AS_TRANSCFG_LO: usize = 0x30;
/// Per-AS: translation configuration, high half.
pub const AS_TRANSCFG_HI: usize = 0x34;
/// Per-AS: extra fault information, low half.
pub const AS_FAULTEXTRA_LO: usize = 0x38;
/// Per-AS: extra fault information, high half.
pub const AS_FAULTEXTRA_HI: usize = 0x3c;

/// The offset of register `reg` (one of the `AS_*` offsets) of address space `n`.
///
/// # Examples
///
/// ```
/// use mali_sim::regs::{as_reg, AS_COMMAND};
///
/// assert_eq!(as_reg(1, AS_COMMAND), 0x2458);
/// ```
pub const fn as_reg(n: usize, reg: usize) -> usize {
    MMU_AS_BASE
        .wrapping_add(n.wrapping_mul(MMU_AS_STRIDE))
        .wrapping_add(reg)
}

/// `LATEST_FLUSH_ID` in the USER page.
pub const LATEST_FLUSH_ID: usize = 0x1_0000;

/// First doorbell page.
pub const DOORBELL_BASE: usize = 0x8_0000;
/// Distance between doorbell pages.
pub const DOORBELL_STRIDE: usize = 0x1_0000;
/// Doorbells that fit the MMIO window.
pub const NUM_DOORBELLS: usize = (MMIO_SIZE - DOORBELL_BASE) / DOORBELL_STRIDE;

/// The offset of doorbell `n`.
pub const fn doorbell(n: usize) -> usize {
    DOORBELL_BASE.wrapping_add(n.wrapping_mul(DOORBELL_STRIDE))
}

/// Interrupt bits of the GPU interrupt block.
pub mod gpu_irq {
    /// A GPU fault (see `GPU_FAULTSTATUS`).
    pub const FAULT: u32 = 1 << 0;
    /// A fault in protected mode.
    pub const PROTM_FAULT: u32 = 1 << 1;
    /// A reset completed.
    pub const RESET_COMPLETED: u32 = 1 << 8;
    /// One power domain finished a transition.
    pub const POWER_CHANGED_SINGLE: u32 = 1 << 9;
    /// All pending power transitions finished.
    pub const POWER_CHANGED_ALL: u32 = 1 << 10;
    /// A cache clean/invalidate finished.
    pub const CLEAN_CACHES_COMPLETED: u32 = 1 << 17;
    /// Mirror of the doorbell line.
    pub const DOORBELL_MIRROR: u32 = 1 << 18;
    /// The MCU status changed.
    pub const MCU_STATUS_CHANGED: u32 = 1 << 19;
    /// Every bit the block implements.
    pub const ALL: u32 = FAULT
        | PROTM_FAULT
        | RESET_COMPLETED
        | POWER_CHANGED_SINGLE
        | POWER_CHANGED_ALL
        | CLEAN_CACHES_COMPLETED
        | DOORBELL_MIRROR
        | MCU_STATUS_CHANGED;
}

/// `GPU_COMMAND` values.
pub mod gpu_cmd {
    /// No operation.
    pub const NOP: u32 = 0;
    /// Soft reset: stop bus interfaces, then reset.
    pub const SOFT_RESET: u32 = 1 | 1 << 8;
    /// Hard reset.
    pub const HARD_RESET: u32 = 1 | 2 << 8;
    /// Command code of cache maintenance; the payload is `l2 | lsc << 4 | other << 8`
    /// shifted left by 8, each a 4-bit mode (bit 0 clean, bit 1 invalidate).
    pub const FLUSH_CACHES: u32 = 4;
    /// Clear `GPU_FAULTSTATUS`/`GPU_FAULTADDRESS`.
    pub const CLEAR_FAULT: u32 = 7;

    /// The cache maintenance command for the given per-cache modes.
    pub const fn flush_caches(l2: u32, lsc: u32, other: u32) -> u32 {
        FLUSH_CACHES | ((l2 & 0xf) | (lsc & 0xf) << 4 | (other & 0xf) << 8) << 8
    }
}

/// `GPU_STATUS` bits.
pub mod gpu_status {
    /// The GPU is executing work.
    pub const ACTIVE: u32 = 1 << 0;
    /// A power transition is in progress.
    pub const PWR_ACTIVE: u32 = 1 << 1;
    /// An MMU fault is pending in some address space.
    pub const PAGE_FAULT: u32 = 1 << 4;
}

/// `AS_COMMAND` values.
pub mod as_cmd {
    /// No operation.
    pub const NOP: u32 = 0;
    /// Latch `TRANSTAB`, `MEMATTR` and `TRANSCFG` and invalidate the AS's TLB.
    pub const UPDATE: u32 = 1;
    /// Lock the `LOCKADDR` region: accesses to it stall.
    pub const LOCK: u32 = 2;
    /// Invalidate the TLB for the locked region and unlock it.
    pub const UNLOCK: u32 = 3;
    /// Flush the L2 (page tables), invalidate the TLB for the region, unlock.
    pub const FLUSH_PT: u32 = 4;
    /// Drain memory accesses, flush the caches, invalidate the TLB for the region, unlock.
    pub const FLUSH_MEM: u32 = 5;
}

/// `AS_STATUS` bit: a command is in progress.
pub const AS_STATUS_ACTIVE: u32 = 1 << 0;

/// `MCU_CONTROL` / `MCU_STATUS` values.
pub mod mcu {
    /// Disable the MCU / the MCU is disabled.
    pub const DISABLED: u32 = 0;
    /// Enable the MCU / the MCU is running.
    pub const ENABLED: u32 = 1;
    /// Let the MCU power itself with the GPU (control only).
    pub const AUTO: u32 = 2;
    /// The MCU halted (status only).
    pub const HALT: u32 = 2;
    /// The MCU hit a fatal error (status only).
    pub const FATAL: u32 = 3;
}
