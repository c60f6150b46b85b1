// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GPU virtual-address-space manager with the split/merge semantics of the kernel's
//! `drm_gpuvm`.
//!
//! Modern GPU APIs (Vulkan sparse binding, `VM_BIND` uAPIs) let userspace choose where buffers
//! live in the GPU's address space. The driver then has to turn "map this object here" and
//! "unmap that range" into page-table updates while keeping track of which mappings exist and
//! which objects back them. This crate is that bookkeeping: a [`Gpuvm`] holds the mappings
//! ([`Va`]s) in an ordered index (a B+tree), and [`Gpuvm::sm_map`] / [`Gpuvm::sm_unmap`]
//! compute the *split and merge* steps — map, remap (keep the parts of a mapping outside the
//! request) and unmap — in exactly the order and with exactly the `keep` hints of the C
//! implementation.
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
//! The VAs are indexed by a B+tree over the caller's storage: nodes of up to 8 start addresses
//! with `u32` slot indices, kept at least half full (and full when VAs are created in address
//! order), leaves linked in address order. A request finds its first overlapped VA with one
//! root-to-leaf descent — O(log n) for n mappings, but only about log_8 n nodes, 7 levels for a
//! million VAs — and walks the k overlapped VAs leaf by leaf, O(1) each. The tree remembers the
//! leaf it last worked in, so the removal, replacement and insertion a split/merge step makes
//! next to the VA it found cost O(1), except when a leaf overflows or underflows and the tree
//! splits, borrows or merges upwards in O(log n) (amortised O(1)). So a map or unmap that
//! touches a bounded number of VAs is O(log n), and one that removes k VAs O(log n + k)
//! amortised, O(log n + k log n) in the worst case. A VA costs 152 bytes for `D = ()`
//! ([`VaSlot`]: 40 bytes of VA, the `Option<D>`, and the 104-byte tree node every slot lends to
//! the index, so that the index needs no storage of its own), a VM-BO 72 bytes for a
//! pointer-sized object handle ([`BoSlot`]), a planned op 16 bytes ([`OpEntry`]).
//!
//! # Benchmark
//!
//! `cargo bench -p gpukit-gpuvm --bench sm` (criterion, `benches/sm.rs`) measures one `sm_map`
//! over a random existing one-page mapping (one unmap op plus one map op), and one `sm_unmap`
//! followed by `sm_map` of the same page, with n existing mappings, next to `rangemap` 1.8's
//! `RangeMap::insert` / `remove` on the same ranges in the same run. Driver data is a `u64`
//! (160-byte VA slots). Median times per iteration, each the median of three runs on the shared
//! 2-core development machine while other builds ran (load average 6 to 7.5, so absolute times
//! are about twice what an idle machine gives; single runs vary by up to ±30%, so only the
//! ratios within a run mean much):
//!
//! | n    | map: gpuvm | `rangemap` | ratio | unmap + map: gpuvm | `rangemap` | ratio |
//! |------|------------|------------|-------|--------------------|------------|-------|
//! | 10^3 | 0.24 µs    | 0.48 µs    | 1.98x | 0.23 µs            | 0.64 µs    | 2.62x |
//! | 10^5 | 1.51 µs    | 1.27 µs    | 0.86x | 1.52 µs            | 1.75 µs    | 1.18x |
//! | 10^6 | 2.91 µs    | 2.99 µs    | 0.97x | 3.79 µs            | 3.33 µs    | 0.89x |
//!
//! (Ratio: `rangemap`'s time over gpuvm's in the same run, median of the three runs; above 1
//! gpuvm is faster.) Walking the mappings in address order instead (`map_seq`, same requests
//! otherwise) the tree's memory of its last leaf turns the search into a few compares: 0.14,
//! 0.15 and 0.16 µs against `rangemap`'s 0.25, 0.50 and 0.58 µs (1.9x, 3.4x, 3.5x). In quieter
//! runs (load average 1.5 to 3) the random `map` ratios were 0.8x to 1.0x at 10^5 and 0.87x to
//! 0.9x at 10^6.
//!
//! With the binary (AVL) tree this replaced, the same benchmark gave 0.5x at 10^5 and 10^6 and
//! 1.2x at 10^3. The target of twice `rangemap`'s throughput is met at 10^3 (everything in
//! cache: 2x to 2.5x) but not at 10^5 and 10^6, where both sides are bound by cache and TLB
//! misses. A profile at 10^6 puts about two thirds of the time in the search (in about equal
//! parts the lowest inner level, the leaf, and the found VA's slot, each a miss), a tenth in
//! unlinking the VA from its VM-BO's list (two VAs at random places) and most of the rest in
//! inserting the new VA. `rangemap` keeps its values inside its B-tree leaves, so its chain of
//! dependent misses is a descent; here it is a descent, then the VA slot, then its list
//! neighbours — and every VA slot also carries its lent tree node, 160 bytes per VA against
//! `rangemap`'s 30-odd, which costs cache and TLB reach. A separate, dense node pool would cut
//! the slot to 56 bytes but needs its own storage argument in [`Gpuvm::new`].
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
mod btree;
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
