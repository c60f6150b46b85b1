// SPDX-License-Identifier: GPL-2.0 OR MIT

//! ARM LPAE I/O page tables.
//!
//! A device behind an IOMMU — or a GPU with its own MMU, such as an Arm Mali — sees memory
//! through page tables in the ARM *Large Physical Address Extension* format: a tree of
//! tables, each the size of the translation granule, whose 64-bit descriptors either point
//! to the next table or map a page or block of physical memory. This crate builds and edits
//! such tables with the behaviour of Linux's `io-pgtable-arm.c`, for the formats a GPU
//! driver needs:
//!
//! - [`Arm64LpaeS1`] (`ARM_64_LPAE_S1`), used by Mali CSF GPUs (panthor, Tyr) and SMMUs;
//! - [`ArmMaliLpae`] (`ARM_MALI_LPAE`), the legacy mode of older Mali GPUs.
//!
//! The crate is `no_std` and allocates nothing itself: table memory comes from a
//! [`TableAlloc`], TLB maintenance goes to [`FlushOps`]. With the `alloc` feature,
//! [`host::HostAllocator`] provides table memory on the host with synthetic device
//! addresses, and [`walker`] walks tables by device address as the hardware would.
//!
//! A Mali CSF GPU (what panthor and Tyr drive) uses the AArch64 stage-1 format,
//! [`Arm64LpaeS1`], and programs its address-space registers from
//! [`mali_as_regs`](PageTable::mali_as_regs); [`ArmMaliLpae`] is the legacy format of older
//! job-manager Malis.
//!
//! ```
//! use io_pgtable::host::{Granule, HostAllocator};
//! use io_pgtable::{Arm64LpaeS1, Config, Error, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
//!
//! fn main() -> Result<(), Error> {
//!     let mem = HostAllocator::new(Granule::Size4K, 64);
//!     let cfg = Config::new(SZ_4K | SZ_2M, 48, 40).coherent(true);
//!     let mut pt = PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush)?;
//!     let (iova, paddr, size) = (0x40_0000, 0x1_0000_0000, 4 * SZ_2M);
//!     pt.map(iova, paddr, size, Prot::READ | Prot::WRITE | Prot::CACHE)?;
//!     assert_eq!(pt.iova_to_phys(0x40_1234), Some(0x1_0000_1234));
//!     let regs = pt.mali_as_regs()?; // AS_TRANSTAB / AS_MEMATTR / AS_TRANSCFG, as panthor
//!     assert_eq!(regs.transtab, pt.root_dev_addr());
//!     Ok(())
//! }
//! ```

//!
//! # Concurrency
//!
//! The safe [`PageTable::map_pages`] and [`PageTable::unmap_pages`] take `&mut self`. As in
//! the C code, updates of disjoint ranges may also run concurrently:
//! [`PageTable::map_pages_shared`] and [`PageTable::unmap_pages_shared`] take `&self` and are
//! `unsafe`, the caller promising that concurrent operations do not overlap (the same contract
//! as the kernel's Rust `IoPageTable` binding). All descriptors are atomics and new tables
//! are published with compare-and-swap, so two threads racing to create the same table agree
//! on one and the loser frees its own (tested under Miri with threads).
//!
//! # In the Linux kernel
//!
//! With the `kernel` feature (built inside a Linux tree by `cargo xtask kernel-build`), the
//! `kernel` module's `DmaTableAlloc` puts the tables in memory mapped with the DMA API for
//! the GPU's `struct device`: descriptors hold DMA addresses, and a walker that does not snoop
//! the CPU caches gets a `dma_sync_single_for_device` after every batch of writes. A page
//! table whose configuration is not `coherent_walk` refuses an allocator that cannot make
//! writes visible to such a walker ([`TableAlloc::syncs_for_device`]).
//!
//! # Features
//!
//! The default features are empty: the crate is `no_std` and uses no `alloc`. `alloc` adds the
//! `host` module, table memory on the host over the `alloc` crate (still buildable for `no_std`
//! targets); `std` implies `alloc` and adds nothing else yet; `kernel` is described above.
#![cfg_attr(
    not(feature = "alloc"),
    doc = "",
    doc = "This documentation was built without `alloc`, so the `host` module is missing from it;",
    doc = "links to its items lead here.",
    doc = "",
    doc = "[`host::HostAllocator`]: crate#features"
)]
//!
//! # Performance
//!
//! `cargo bench -p gpukit-io-pgtable --bench vs_aarch64_paging` (or `cargo xtask bench`, which
//! runs every crate's comparison) runs both crates side by side in one process (4K granule,
//! level-1 root, fresh table per iteration, table creation and teardown not timed, a 1 GiB
//! range starting at 1 GiB + 2 MiB so neither side can use a 1G block). Both get the same
//! table memory policy: one arena allocated and touched up front, tables zeroed when reused
//! (the peer through its `Translation` hook), so neither pays the global allocator or page
//! faults while timed. Medians of one `cargo xtask bench --quick` run on the shared 2-core
//! machine (x86_64, other jobs running, so expect noise of 10-30%):
//!
//! | operation                                   | io-pgtable              | aarch64-paging 0.12.3 |
//! |---------------------------------------------|------------------------:|----------------------:|
//! | map 1 GiB as 4K pages                       | 0.107 ms (0.41 ns/page) | 0.84 ms (3.2 ns/page) |
//! | unmap 1 GiB of 4K pages, leaf by leaf       | 0.158 ms (0.60 ns/page) | -                     |
//! | unmap 1 GiB of 4K pages, range (drops level-3 tables) | 4.5 us        | 3.4 us                |
//! | map 1 GiB as 2M blocks                      | 0.29 us                 | 2.2 us                |
//! | unmap 1 GiB of 2M blocks                    | 0.34 us                 | 2.0 us                |
//! | map + unmap one 4K page (tables present)    | 53 ns                   | 57 ns                 |
//!
//! The floors measured in the same run: zeroing 512 recycled tables and writing each of
//! their descriptors once costs 0.21 ns/page, clearing each descriptor once 0.08 ns/page.
//! Mapping fills a new leaf table while it is private (plain stores the compiler vectorises)
//! and publishes it whole; leaf-by-leaf unmapping stays on atomic loads and stores, as a walker
//! may read the same table meanwhile.
//!
//! Against `drivers/iommu/io-pgtable-arm.c` in the same kernel (suite
//! `gpukit_io_pgtable_vs_c`, which first checks both against each other over about 1600
//! random steps per format): both with tables DMA-mapped for one device and synced for a
//! non-coherent walker, the sides alternating over three rounds, the best of each counting.
//! Under QEMU without KVM this compares the two under identical conditions, not on hardware.
//! Ratio = C time / Rust time, one run each (as of commit `dc5f367`): `cargo xtask
//! kernel-test` (lockdep and DMA-API debugging, host clock), `cargo xtask kernel-bench` (no
//! checkers, QEMU's instruction counter as the clock) and `kernel-bench --wall-clock`:
//!
//! | operation                                | kernel-test | kernel-bench (instructions) | kernel-bench --wall-clock |
//! |------------------------------------------|------------:|----------------------------:|--------------------------:|
//! | map 1 GiB as 4K pages                    | 1.28x       | 2.18x                       | 1.41x                     |
//! | unmap 1 GiB of 4K pages                  | 1.60x       | 3.22x                       | 1.99x                     |
//! | map 1 GiB as 2M blocks                   | 1.09x       | 2.23x                       | 1.51x                     |
//! | unmap 1 GiB of 2M blocks                 | 1.38x       | 3.19x                       | 2.03x                     |
//! | map + unmap one 4K page (tables present) | 1.01x       | 1.21x                       | 1.08x                     |
//!
//! Writing and syncing each descriptor once is more than half of a bulk 4K map on both sides
//! (the suite's `floor:` line), which bounds the time ratio. In the kernel `DmaTableAlloc`
//! finds a table's CPU view by one addition while its tables lie at one distance from their
//! DMA addresses (as C's `__va()`), through its index of live tables otherwise, and syncs the
//! table the page-table code names without a lookup. An unmap checks and clears leaves eight
//! at a time, and both map and unmap first descend through present table descriptors in a
//! tight loop. The host-clock columns come from a loaded host and move between runs; the
//! instruction counts do not. The single page costs this crate 704 instructions per map +
//! unmap against C's 852, and by the host clock 1.00x-1.23x in 16 runs (median 1.14x; one
//! run is in the table): under QEMU's translator host time follows loads, stores, branches
//! and helper calls more than instructions, so a single `map_pages`/`unmap_pages` keeps no
//! walk cursor and leaves its slow paths out of line (see `xtask/KERNEL.md`).

#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
pub mod kernel;

/// The prefix of this crate's kernel log lines (`pr_info!` and friends look for it here).
#[cfg(all(feature = "kernel", gpukit_kernel, CONFIG_GPUKIT_VS_C))]
const __LOG_PREFIX: &[u8] = b"gpukit_io_pgtable\0";

#[cfg(test)]
extern crate std;

pub mod config;
mod error;
pub mod flush;
pub mod format;
#[cfg(feature = "alloc")]
pub mod host;
pub mod memory;
pub mod prot;
pub mod pte;
pub mod regs;
mod table;
pub mod walker;

pub use config::{Config, Geometry, SZ_16K, SZ_1G, SZ_2M, SZ_32M, SZ_4K, SZ_4T, SZ_512M, SZ_64K};
pub use error::Error;
pub use flush::{FlushOps, Gather, NoFlush};
pub use format::{Arm64LpaeS1, ArmMaliLpae, Format};
pub use memory::{TableAlloc, TableMem};
pub use prot::{Prot, Quirks};
pub use table::{PageTable, PteWalk};

/// The README's example, run as a doctest.
#[cfg(all(doctest, feature = "alloc"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
