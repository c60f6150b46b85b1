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
//! Nothing here allocates: VAs, VM-BOs and the index's nodes live in storage the caller
//! provides ([`Storage`]), and there is no `unsafe` code.
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
//! fn main() -> Result<(), gpuvm::Error> {
//!     let vas: [VaSlot<&str>; 16] = core::array::from_fn(|_| VaSlot::new());
//!     let bos: [BoSlot<Bo>; 4] = core::array::from_fn(|_| BoSlot::new());
//!     let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 32).align(0x1000), vas, bos)?;
//!     let bo = Bo(1);
//!     vm.map(Mapping::new(0x10000, 0x4000, &bo, 0), "whole")?;
//!     vm.unmap(0x11000, 0x1000)?; // splits the mapping in two
//!     let ranges: Vec<_> = vm.iter().map(|va| (va.addr(), va.range(), va.offset())).collect();
//!     assert_eq!(ranges, [(0x10000, 0x1000, 0), (0x12000, 0x2000, 0x2000)]);
//!     Ok(())
//! }
//! ```
//!
//! Code that only reads a VM can take `&dyn `[`VmView`] and name no storage type; the aliases
//! [`ArrayGpuvm`], [`SliceGpuvm`] and `VecGpuvm` (feature `alloc`) name the common ones.
//!
//! # Cost
//!
//! The VAs are indexed by a B+tree whose nodes ([`IndexNode`]) sit in a dense node storage of
//! their own: nodes of up to 16 start addresses with `u32` slot indices, kept at least half
//! full (nearly full when VAs are created in address order), leaves linked in address order.
//! A request finds its first overlapped VA with one root-to-leaf descent that reads only
//! nodes — O(log n) for n mappings, about log_16 n nodes, 5 or 6 levels for a million VAs —
//! and walks the k overlapped VAs leaf by leaf, O(1) each. The tree remembers the leaf it last
//! worked in, so the removal, replacement and insertion a split/merge step makes next to the
//! VA it found cost O(1), except when a leaf overflows or underflows and the tree splits,
//! borrows or merges upwards in O(log n) (amortised O(1)). So a map or unmap that touches a
//! bounded number of VAs is O(log n), and one that removes k VAs O(log n + k) amortised,
//! O(log n + k log n) in the worst case.
//!
//! Memory: a VA slot ([`VaSlot`]) is 48 bytes for `D = ()` (40 bytes of VA and the
//! `Option<D>`), 56 for `D = u64`; the node storage holds [`IndexNode::needed`]`(n)` 200-byte
//! nodes for n VA slots, at most 29 bytes per slot, of which the nodes in use take 14 bytes per
//! VA when the VAs were created in address order and about 20 after random churn. So a VA
//! costs 62 to 68 bytes of touched memory for `D = ()`, 77 bytes with the whole node reserve
//! (it was 152 when every VA slot carried a tree node). A VM-BO costs 72 bytes for a
//! pointer-sized object handle ([`BoSlot`]), a planned op 16 bytes ([`OpEntry`]).
//!
//! # Benchmark
//!
//! `cargo bench -p gpukit-gpuvm --bench sm` (criterion, `benches/sm.rs`) measures one `sm_map`
//! over a random existing one-page mapping (one unmap op plus one map op, applied through the
//! driver callbacks), and one `sm_unmap` followed by `sm_map` of the same page, with n
//! existing mappings, next to `rangemap` 1.8's `RangeMap::insert` / `remove` on the same
//! ranges from the same random sequence in the same run. Driver data is a `u64` (56-byte VA
//! slots, index nodes in their own storage). Median times per iteration, each the median of
//! three runs on the shared 2-core development machine (a VM, 4 KiB pages, about 170 to
//! 190 ns to DRAM, 8 to 10 MB of last-level cache in practice; single runs vary by up to ±30%
//! with the load of the host, so only the ratios within a run mean much):
//!
//! | n    | map: gpuvm | `rangemap` | ratio | unmap + map: gpuvm | `rangemap` | ratio | floor   |
//! |------|------------|------------|-------|--------------------|------------|-------|---------|
//! | 10^3 | 0.11 µs    | 0.18 µs    | 1.75x | 0.13 µs            | 0.27 µs    | 2.13x | 0.01 µs |
//! | 10^5 | 0.22 µs    | 0.38 µs    | 1.70x | 0.23 µs            | 0.54 µs    | 2.31x | 0.04 µs |
//! | 10^6 | 0.67 µs    | 0.74 µs    | 1.10x | 0.73 µs            | 0.95 µs    | 1.32x | 0.43 µs |
//!
//! (Ratio: `rangemap`'s time over gpuvm's in each run, median of the three runs; above 1
//! gpuvm is faster.) Walking the mappings in address order instead (`map_seq`, same requests
//! otherwise) the tree's memory of its last leaf turns the search into a few compares: 0.08
//! µs at every size against `rangemap`'s 0.09, 0.21 and 0.23 µs (1.2x, 2.5x, 2.8x). The time
//! per request grows with log n only while everything stays in cache (10^3 to 10^6 in address
//! order: flat); for random requests the growth from 10^3 to 10^6 is cache and TLB misses, on
//! both sides. Earlier runs the same day, before the overlap-check change below and with the
//! host busier, gave 1.2x for `map` at 10^5 and 10^6 and 1.5x and 1.4x for unmap + map: on
//! this machine the ratios move with the host's load about as much as with the code.
//!
//! The target of twice `rangemap`'s throughput at 10^5 and 10^6 mappings is met only for an
//! unmap plus map at 10^5, and at 10^6 this machine rules it out for a VA manager that keeps
//! drm_gpuvm's per-VM-BO VA lists and, like drm_gpuvm, takes a VA off its list when the VA is
//! removed. Removing a VA found by address means reading the index leaf that holds it, then
//! the VA record that leaf names (its object, offset and list links), then writing its two
//! neighbours on the VM-BO's list, which after random churn sit anywhere: three dependent
//! misses. The `floor` column (`chain_floor` in the benchmark) is that chain alone, over
//! arrays the size of the VM's, with no search, no inner levels and no ops, one request after
//! the other (a request is far longer than the CPU looks ahead, so consecutive ones do not
//! overlap): 0.43 µs at 10^6, more than half of `rangemap`'s 0.74 µs before gpuvm has done
//! any of its own work. `rangemap` keeps its values in its B-tree leaves and has no
//! per-object lists, so its chain is the descent alone. At 10^5 the chain fits in cache
//! (0.04 µs) and the target is not excluded that way; what gpuvm spends there beyond its
//! 0.11 µs in-cache cost is the index nodes' and VA slots' lines falling out of a last-level
//! cache about the size of the VM.
//!
//! Overlap checks take the VAs' start addresses from the index keys, so a request reads no
//! VA slot beyond the ones it changes and, for its start, the one just below it; in
//! particular a map into a hole no longer reads the slot of the VA after it. This benchmark
//! hardly sees that (its VA slots stay in address order, so that slot sat next to the one
//! just read); it matters when slots are not in address order.
//!
//! Tried and dropped, each within the noise of this machine: nodes and slots aligned to cache
//! lines (256-byte nodes, 64-byte slots), and, as an upper bound for unlinking VAs lazily in
//! batches, skipping the list writes altogether (not a valid VM). Earlier versions: 0.86x and
//! 0.97x for `map` at 10^5 and 10^6 with the tree nodes inside the VA slots (160-byte slots),
//! 0.5x with an AVL tree.
//!
//! Against the kernel's `drm_gpuvm.c`, in the same kernel (suite `gpukit_gpuvm_vs_c`, which
//! first checks that 3000 random requests give both the same op streams): 4K mappings every
//! 8K, then 4000 random unmap + map of one of them, both in immediate mode (this crate on
//! preallocated slots; C through `drm_gpuvm_sm_unmap` / `drm_gpuvm_sm_map` with callbacks that
//! allocate and free their `struct drm_gpuva`, as C drivers do). Under QEMU without KVM the
//! figures compare the two under identical conditions, not on hardware. Ratio = C time / Rust
//! time, one run each (as of commit `422b9bd`): `cargo xtask kernel-test` (lockdep and DMA-API
//! debugging, host clock), `cargo xtask kernel-bench` (no checkers, QEMU's instruction
//! counter as the clock) and `kernel-bench --wall-clock`:
//!
//! | mappings | kernel-test | kernel-bench (instructions) | kernel-bench --wall-clock |
//! |---------:|------------:|----------------------------:|--------------------------:|
//! | 10^3     | 3.64x       | 0.93x                       | 1.05x                     |
//! | 10^4     | 3.71x       | 1.01x                       | 1.49x                     |
//! | 10^5     | 4.12x       | 1.08x                       | 2.83x                     |
//! | 10^6     | 4.54x       | 1.14x                       | 3.04x                     |
//!
//! This crate executes about as many instructions per unmap + map as C (1212 against 1131 at
//! 10^3, 1353 against 1550 at 10^6) and wins where memory access dominates (C's interval
//! rbtree walks about twenty scattered nodes at 10^6 mappings, this B+tree four or five dense
//! ones), which instruction counting does not see.
//!
//! Measured with a QEMU plugin (`io-pgtable/tools/tcg_probe_gpuvm.py`, figures in
//! `xtask/KERNEL.md`), per unmap + map at 10^6 mappings: this crate touches 46 distinct
//! 64-byte lines and 12 pages and misses 9.3 lines in a modelled 1 MiB cache, C 81 lines, 38
//! pages and 36.1 misses (10^5: 5.6 against 21.9); the translated code is 14,033 host
//! instructions against 18,038 (even at 10^3: 13,025 against 12,991). By the host clock, ten
//! runs of the test alone on a quiet host: 1.09x at 10^3, 1.21x at 10^4, 2.34x at 10^5 (2.30x
//! to 2.54x) and 3.07x at 10^6 (3.04x to 3.21x; 2.85x to 3.12x in three full `kernel-bench
//! --wall-clock` runs): at the threshold. A side's time per op is about 0.09 ns per host
//! instruction plus 110-150 ns per modelled miss, so 3x at 10^5 would take a third less
//! translated code or at most two misses instead of 5.6: out of reach of a cheap change, and
//! by instruction count alone (`kernel-bench`) 3x would need fewer guest instructions than the
//! two searches from the root take now.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
mod kernel;

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
mod view;
mod vm;

pub use bind::{Bind, OpEntry};
pub use btree::Node as IndexNode;
pub use error::Error;
pub use gem::GemObject;
pub use sm::{CommitOps, Op, OpMap, OpMapped, OpRemap, OpRemapped, OpUnmap, OpUnmapped, SmOps};
pub use storage::Storage;
#[cfg(feature = "alloc")]
pub use view::VecGpuvm;
pub use view::{ArrayGpuvm, SliceGpuvm, VmView};
pub use vm::{BoSlot, Gpuvm, Mapping, Va, VaSlot, VmBo, VmConfig};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
