// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Naming a VM without its storage types.
//!
//! A [`Gpuvm`] is generic over where its VA slots, VM-BO slots and index nodes live, which a
//! driver fixes once. Code that only looks at a VM (a debugfs dump, a fault handler finding the
//! mapping of a faulting address) should not have to repeat those parameters: it takes a
//! [`VmView`], a read-only, object-safe view every [`Gpuvm`] implements, or one of the aliases
//! for the common storage choices.
//!
//! # Examples
//!
//! ```
//! use gpuvm::{BoSlot, GemObject, Gpuvm, Mapping, VaSlot, VmConfig, VmView};
//!
//! #[derive(Clone)]
//! struct Bo(u64);
//! impl GemObject for Bo {
//!     fn id(&self) -> u64 { self.0 }
//!     fn size(&self) -> u64 { 0x10_0000 }
//!     fn resv_id(&self) -> u64 { 0 }
//! }
//!
//! /// Which object backs a faulting GPU address: no storage parameters in sight.
//! fn backing(vm: &dyn VmView<Bo, u32>, addr: u64) -> Option<u64> {
//!     vm.find_containing(addr).and_then(|va| va.obj().map(|o| o.0))
//! }
//!
//! fn main() -> Result<(), gpuvm::Error> {
//!     let vas: [VaSlot<u32>; 8] = core::array::from_fn(|_| VaSlot::new());
//!     let bos: [BoSlot<Bo>; 2] = core::array::from_fn(|_| BoSlot::new());
//!     let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 32), vas, bos)?;
//!     vm.map(Mapping::new(0x10000, 0x4000, &Bo(7), 0), 0)?;
//!     assert_eq!(backing(&vm, 0x12345), Some(7));
//!     assert_eq!(backing(&vm, 0x20000), None);
//!     Ok(())
//! }
//! ```

use core::ops::Range;

use crate::{BoSlot, GemObject, Gpuvm, IndexNode, Storage, Va, VaSlot};

/// A read-only view of a VM with objects `O` and per-VA driver data `D`, whatever its storage.
///
/// Object-safe: `&dyn VmView<O, D>` names any [`Gpuvm`] of those `O` and `D`.
pub trait VmView<O, D> {
    /// The number of VAs.
    fn len(&self) -> usize;

    /// Whether the VM has no VA.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The VM's whole address range.
    fn va_range(&self) -> Range<u64>;

    /// The VA that starts exactly at `addr` and covers exactly `range` bytes.
    fn find(&self, addr: u64, range: u64) -> Option<Va<'_, O, D>>;

    /// The VA containing `addr`.
    fn find_containing(&self, addr: u64) -> Option<Va<'_, O, D>>;

    /// Calls `f` for each VA overlapping `[addr, addr + range)`, in address order.
    fn for_each_in(&self, addr: u64, range: u64, f: &mut dyn FnMut(Va<'_, O, D>));
}

impl<O, D, VS, BS, NS> VmView<O, D> for Gpuvm<O, D, VS, BS, NS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
{
    fn len(&self) -> usize {
        Gpuvm::len(self)
    }

    fn va_range(&self) -> Range<u64> {
        Gpuvm::va_range(self)
    }

    fn find(&self, addr: u64, range: u64) -> Option<Va<'_, O, D>> {
        Gpuvm::find(self, addr, range)
    }

    fn find_containing(&self, addr: u64) -> Option<Va<'_, O, D>> {
        Gpuvm::find_containing(self, addr)
    }

    fn for_each_in(&self, addr: u64, range: u64, f: &mut dyn FnMut(Va<'_, O, D>)) {
        self.iter_range(addr, range).for_each(f)
    }
}

/// A VM whose slots are fixed-size arrays (no allocator at all).
pub type ArrayGpuvm<O, D, const VAS: usize, const BOS: usize> =
    Gpuvm<O, D, [VaSlot<D>; VAS], [BoSlot<O>; BOS]>;

/// A VM whose slots are borrowed slices (memory the caller manages).
pub type SliceGpuvm<'a, O, D> = Gpuvm<O, D, &'a mut [VaSlot<D>], &'a mut [BoSlot<O>]>;

/// A VM whose slots are growable vectors (feature `alloc`; [`Gpuvm::reserve`] grows them).
#[cfg(feature = "alloc")]
pub type VecGpuvm<O, D> = Gpuvm<O, D, alloc::vec::Vec<VaSlot<D>>, alloc::vec::Vec<BoSlot<O>>>;
