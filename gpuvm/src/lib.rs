// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GPU virtual-address-space manager with the split/merge semantics of the kernel's
//! `drm_gpuvm`.
//!
//! Modern GPU APIs (Vulkan sparse binding, `VM_BIND` uAPIs) let userspace choose where buffers
//! live in the GPU's address space. The driver then has to turn "map this object here" and
//! "unmap that range" into page-table updates while keeping track of which mappings exist and
//! which objects back them. This crate is that bookkeeping: a [`Gpuvm`] holds the mappings
//! ([`Va`]s) in an ordered tree, and [`Gpuvm::sm_map`] / [`Gpuvm::sm_unmap`] compute the *split
//! and merge* steps — map, remap (keep the parts of a mapping outside the request) and unmap —
//! in exactly the order and with exactly the `keep` hints of the C implementation.
//!
//! Ops are applied in one of two ways:
//!
//! - **Immediately** ([`Gpuvm::sm_map`]): a driver implementing [`SmOps`] receives each typed
//!   op and must apply it, returning a proof token ([`OpMapped`], [`OpUnmapped`],
//!   [`OpRemapped`]) that only applying the op can produce — forgetting an op is a compile
//!   error.
//! - **As a batch** ([`Gpuvm::bind`]): several map/unmap requests of one `VM_BIND` are planned
//!   first (each sees the effect of the ones before), the driver inspects the ops and
//!   preallocates page tables, then [`Bind::commit`] applies everything with no failure path.
//!   Dropping the batch instead leaves the VM exactly as it was.
//!
//! Nothing here allocates: VAs and VM-BOs live in slots the caller provides ([`Storage`]), and
//! there is no `unsafe` code.
//!
//! # Cost
//!
//! The VAs sit in an AVL tree whose links are `u32` slot indices. A request finds its first
//! overlapped VA in O(log n) for n mappings and walks the k overlapped ones in O(1) amortised
//! each. A request changes at most three VAs besides the ones it removes; every insertion or
//! removal rebalances bottom-up and stops at the first subtree that keeps its height, which is
//! O(log n) in the worst case and a few levels in practice. So a map or unmap that replaces a
//! bounded number of VAs is O(log n), and one that removes k VAs is at most O(log n + k log n)
//! (O(log n + k) walking, O(k log n) worst-case rebalancing). A VA costs 64 bytes for `D = ()`
//! ([`VaSlot`]), a VM-BO 72 bytes for a pointer-sized object handle ([`BoSlot`]), a planned op
//! 16 bytes ([`OpEntry`]).
//!
//! # Benchmark
//!
//! `cargo bench -p gpukit-gpuvm --bench sm` (criterion, `benches/sm.rs`) measures one `sm_map`
//! over a random existing one-page mapping (one unmap op plus one map op), and one `sm_unmap`
//! followed by `sm_map` of the same page, with n existing mappings, next to `rangemap` 1.8's
//! `RangeMap::insert` / `remove` on the same ranges in the same run. Driver data is a `u64`
//! (72-byte VA slots). Median times per iteration, measured on the shared 2-core development
//! machine while other builds ran (load average about 11, so absolute times are several times
//! too high; the ratios are what the run shows):
//!
//! | n         | gpuvm map | rangemap insert | gpuvm unmap + map | rangemap remove + insert |
//! |-----------|-----------|-----------------|-------------------|--------------------------|
//! | 10^3      | 0.61 µs   | 0.74 µs         | 0.68 µs           | 1.23 µs                  |
//! | 10^5      | 4.7 µs    | 2.2 µs          | 4.1 µs            | 2.4 µs                   |
//! | 10^6      | 11.8 µs   | 5.9 µs          | 12.8 µs           | 6.7 µs                   |
//!
//! Growth is logarithmic, but with many mappings the binary tree loses to `rangemap`'s B-tree:
//! a profile shows about two thirds of the time in the one root-to-leaf descent that finds the
//! first overlapped VA, i.e. one cache miss per tree level, where a B-tree node holds many keys
//! per cache line. Beating `rangemap` at 10^5 and more needs a B-tree-like node layout over the
//! caller's storage.
//!
//! # Examples
//!
//! ```
//! use gpuvm::{BoSlot, GemObject, Gpuvm, Mapping, VaSlot, VmConfig};
//!
//! #[derive(Clone)]
//! struct Bo(u64);
//! impl GemObject for Bo {
//!     fn id(&self) -> u64 { self.0 }
//!     fn size(&self) -> u64 { 0x10_0000 }
//!     fn resv_id(&self) -> u64 { 0 }
//! }
//!
//! let vas: [VaSlot<&str>; 16] = core::array::from_fn(|_| VaSlot::new());
//! let bos: [BoSlot<Bo>; 4] = core::array::from_fn(|_| BoSlot::new());
//! let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 32).align(0x1000), vas, bos)?;
//! let bo = Bo(1);
//! vm.map(Mapping::new(0x10000, 0x4000, &bo, 0), "whole")?;
//! vm.unmap(0x11000, 0x1000)?; // splits the mapping in two
//! let ranges: Vec<_> = vm.iter().map(|va| (va.addr(), va.range(), va.offset())).collect();
//! assert_eq!(ranges, [(0x10000, 0x1000, 0), (0x12000, 0x2000, 0x2000)]);
//! # Ok::<(), gpuvm::Error>(())
//! ```

#![no_std]
#![forbid(unsafe_code)]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(test)]
extern crate std;

mod bind;
mod error;
mod gem;
mod list;
#[cfg(test)]
mod model_test;
mod sm;
mod storage;
mod tree;
mod vm;

pub use bind::{Bind, OpEntry};
pub use error::Error;
pub use gem::GemObject;
pub use sm::{CommitOps, Op, OpMap, OpMapped, OpRemap, OpRemapped, OpUnmap, OpUnmapped, SmOps};
pub use storage::Storage;
pub use vm::{BoSlot, Gpuvm, Mapping, Va, VaSlot, VmBo, VmConfig};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
