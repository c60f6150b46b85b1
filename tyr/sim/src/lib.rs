// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A register-level simulated Arm Mali-G610: the "silicon" a Mali CSF driver is tested on.
//!
//! The crate knows nothing of any driver. It has its own description of the hardware, written
//! from the GPU's and panthor's definitions: the register map and its bit fields ([`regs`]),
//! the firmware-interface layout and the command-stream engine ([`csf`], [`csf::isa`]; the
//! instructions themselves are decoded with the `gpukit-csf` crate, whose encodings are checked
//! field by field against the hardware's published layout). A driver that gets an offset, a
//! bit or an opcode wrong therefore meets a
//! GPU that does something else, or records a bus error, or faults the stream, as silicon
//! would: `gpukit-tyr`'s `hw_contract` test compares the driver's view with this one.
//!
//! The whole crate is `no_std` and never uses the `alloc` crate, so it builds wherever the
//! driver does, a Linux kernel included. The simulated GPU keeps its state in fixed-size
//! arrays sized like the hardware's (address spaces, TLB entries, command-stream groups and
//! call stacks); the only memory it asks for is its simulated RAM, which comes from a
//! [`FrameAlloc`] (fallible: running out is [`SimError::OutOfMemory`], never an abort), and
//! the only lock it takes guards that RAM's allocation table and comes from a [`LockFamily`].
//! The feature `std` adds the host implementations of both ([`StdFrames`], [`StdLocks`], the
//! defaults of [`SimMemory`] and [`Gpu`] with `std`) and [`SharedGpu`], a thread-safe handle.
//!
//! # The hardware
//!
//! A Mali CSF GPU is driven through one MMIO window and through memory the GPU reads itself.
//! The window holds the GPU_CONTROL block (identity, features, interrupts, the command
//! register for resets and cache maintenance, power control of the L2 cache, shader cores
//! and tiler, counters), JOB_CONTROL (the job interrupt), MMU_CONTROL (the MMU interrupt and
//! one register set per address space), and doorbell pages; [`regs`] lists them. A driver
//! brings the GPU up by resetting it and waiting for the `RESET_COMPLETED` interrupt bit,
//! powering the L2 on and waiting for `L2_READY`, reading the identity registers to find out
//! which GPU it drives, and then programming address spaces for GPU virtual memory.
//!
//! Every GPU memory access goes through the GPU's MMU, which translates virtual addresses
//! with page tables in system memory ([`walk`] describes the format and the fault codes;
//! [`mmu`] how an address space is programmed and maintained).
//!
//! # The simulation
//!
//! [`Gpu`] models those registers and their behaviour, deterministically and without threads.
//! Time is simulated: it starts at zero and only moves when the user calls [`Gpu::advance`] (a
//! driver's backend does from its delay and sleep) or [`Gpu::step`], the entry point of an
//! *executor*: whatever runs the simulation between the driver's calls (a host thread in
//! `gpukit-tyr`'s host backend, a kernel work item, a test's own loop). A step reports asserted
//! interrupt lines without moving time, or moves it to the next event (or the executor's next
//! timer), one event at a time. Resets, power transitions, MMU commands and cache flushes
//! complete after [`Timings`] delays. Physical memory is any [`PhysMemory`], normally a
//! [`SimMemory`] shared with the driver's backend, which allocates its DMA memory (page tables,
//! buffers) from it; the MMU reads the page tables from there by physical address, with a
//! walker written independently of the page-table crate so that each checks the other.
//!
//! Accesses a real bus would reject (unknown or misaligned offsets, writes to read-only
//! registers, invalid commands, commands while one is running) never panic: they are
//! recorded as [`BusError`]s that tests can inspect.
//!
//! Work reaches a CSF GPU through firmware interfaces in shared memory and command streams
//! in GPU memory; [`csf`] describes the simulated firmware (a documented subset) and the
//! instructions its command-stream engine executes through the MMU.
//!
//! [`Config`] selects what the GPU reports and which failures to inject; more failures
//! (hanging streams, faulting accesses, memory exhaustion) can be injected at run time.
//!
//! # Examples
//!
//! Probing the way Tyr does:
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use mali_sim::{regs, Gpu, IrqLine};
//!
//! let mut gpu = Gpu::g610();
//! gpu.write32(regs::GPU_IRQ_MASK, regs::gpu_irq::RESET_COMPLETED);
//! gpu.write32(regs::GPU_COMMAND, regs::gpu_cmd::SOFT_RESET);
//! while gpu.read32(regs::GPU_IRQ_RAWSTAT) & regs::gpu_irq::RESET_COMPLETED == 0 {
//!     gpu.advance(1_000); // the driver's poll interval
//! }
//! assert!(gpu.irq_pending(IrqLine::Gpu));
//! gpu.write32(regs::GPU_IRQ_CLEAR, regs::gpu_irq::RESET_COMPLETED);
//!
//! gpu.write32(regs::L2_PWRON_LO, 1);
//! while gpu.read32(regs::L2_READY_LO) != 1 {
//!     gpu.advance(1_000);
//! }
//! let id = gpu.read32(regs::GPU_ID);
//! assert_eq!((id >> 28, (id >> 16) & 0xf), (10, 7)); // arch 10, product 7: a G610
//! assert!(gpu.bus_errors().is_empty());
//! # }
//! ```

#![no_std]
// `Gpu::init` initialises every field through one `pin_init::init!`, a recursive macro.
#![recursion_limit = "512"]
// The overview links to the host conveniences, which only exist with `std`.
#![cfg_attr(not(feature = "std"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "std")]
extern crate std;

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
pub mod kernel;

pub mod csf;
pub mod regs;

mod config;
mod error;
pub mod firmware;
pub mod frames;
mod gpu;
mod list;
pub mod lock;
pub mod mem;
pub mod mmu;
mod power;
#[cfg(feature = "std")]
mod shared;
pub mod walk;

#[cfg(all(test, feature = "std"))]
mod proptests;
#[cfg(all(test, feature = "std"))]
mod testutil;

pub use config::{Config, FaultInjection, Identity, Timings, OPP_COUNT};
pub use error::SimError;
pub use frames::FrameAlloc;
#[cfg(feature = "std")]
pub use frames::StdFrames;
pub use gpu::{
    AccessError, BusError, BusErrorKind, Gpu, IrqLine, IrqLines, Progress, BUS_ERROR_LOG,
    GPU_BUS_FAULT, GPU_MCU_OFF_FAULT, GPU_POWER_ORDER_FAULT, RUNG_LOG,
};
pub use list::FixedList;
#[cfg(feature = "std")]
pub use lock::StdLocks;
pub use lock::{Lock, LockFamily};
pub use mem::{MemConfig, PhysAddr, PhysMemory, SimMemory, PAGE_SIZE};
pub use mmu::{LockRegion, TlbStats};
pub use power::Domain;
#[cfg(feature = "std")]
pub use shared::{GpuGuard, SharedGpu};
pub use walk::{AccessType, Fault, FaultKind, Perms, Translation, WalkConfig};
