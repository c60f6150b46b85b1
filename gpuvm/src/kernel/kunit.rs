// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_gpuvm`: split/merge of the VA manager inside the kernel.
//!
//! Built by `cargo xtask kernel-build` as a crate of its own (`gpuvm_kunit`, with
//! `--extern gpuvm`), since `gpuvm` forbids the `unsafe` code of the suite registration. The
//! VM's slots live in kernel memory (`KBox`), as a driver would allocate them.

#![no_std]

use ::kernel::prelude::*;

/// The prefix of the suite's kernel log lines (`pr_info!` and friends look for it here).
#[cfg(CONFIG_GPUKIT_VS_C)]
const __LOG_PREFIX: &[u8] = b"gpukit_gpuvm\0";

#[cfg(CONFIG_GPUKIT_VS_C)]
mod vs_c;

#[kunit_tests(gpukit_gpuvm)]
mod tests {
    use ::kernel::prelude::*;
    use gpuvm::{
        BoSlot, Error, GemObject, Gpuvm, IndexNode, Mapping, OpMap, OpMapped, OpRemap, OpRemapped,
        OpUnmap, OpUnmapped, SmOps, VaSlot, VmConfig,
    };

    #[derive(Clone)]
    struct Bo(u64);

    impl GemObject for Bo {
        fn id(&self) -> u64 {
            self.0
        }
        fn size(&self) -> u64 {
            0x10_0000
        }
        fn resv_id(&self) -> u64 {
            0
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Step {
        Map(u64, u64),
        Unmap(u64, bool),
        Remap(u64, bool, bool, bool),
    }

    /// Records the ops it applies, without allocating (as a fence-signalling path must).
    struct Log {
        steps: [Option<Step>; 8],
        len: usize,
    }

    impl Log {
        fn new() -> Self {
            Log {
                steps: [None; 8],
                len: 0,
            }
        }

        fn push(&mut self, s: Step) -> core::result::Result<(), Error> {
            let slot = self.steps.get_mut(self.len).ok_or(Error::NoMemory)?;
            *slot = Some(s);
            self.len += 1;
            Ok(())
        }

        fn steps(&self) -> &[Option<Step>] {
            &self.steps[..self.len]
        }
    }

    impl SmOps<Bo, u32> for Log {
        type Error = Error;

        fn sm_step_map<'op>(
            &mut self,
            op: OpMap<'op, Bo, u32>,
        ) -> core::result::Result<OpMapped<'op>, Error> {
            self.push(Step::Map(op.addr(), op.range()))?;
            Ok(op.insert(0))
        }

        fn sm_step_unmap<'op>(
            &mut self,
            op: OpUnmap<'op, Bo, u32>,
        ) -> core::result::Result<OpUnmapped<'op>, Error> {
            self.push(Step::Unmap(op.va().addr(), op.keep()))?;
            Ok(op.remove().0)
        }

        fn sm_step_remap<'op>(
            &mut self,
            op: OpRemap<'op, Bo, u32>,
        ) -> core::result::Result<OpRemapped<'op>, Error> {
            let s = Step::Remap(
                op.va().addr(),
                op.prev().is_some(),
                op.next().is_some(),
                op.keep(),
            );
            self.push(s)?;
            Ok(op.remap(|old, _| *old).0)
        }
    }

    /// VA, VM-BO and index-node slots in kernel memory, as a driver allocates them.
    struct Slots {
        vas: KBox<[VaSlot<u32>; 8]>,
        bos: KBox<[BoSlot<Bo>; 4]>,
        nodes: KBox<[IndexNode; 8]>,
    }

    type Vm<'a> = Gpuvm<Bo, u32, &'a mut [VaSlot<u32>], &'a mut [BoSlot<Bo>], &'a mut [IndexNode]>;

    impl Slots {
        fn new() -> Result<Self> {
            Ok(Slots {
                vas: KBox::new(core::array::from_fn(|_| VaSlot::new()), GFP_KERNEL)?,
                bos: KBox::new(core::array::from_fn(|_| BoSlot::new()), GFP_KERNEL)?,
                nodes: KBox::new([IndexNode::new(); 8], GFP_KERNEL)?,
            })
        }

        /// A VM over `[0, 4 GiB)` with all of them.
        fn vm(&mut self) -> Result<Vm<'_>> {
            Ok(Gpuvm::with_nodes(
                VmConfig::new(0, 1 << 32),
                &mut self.vas[..],
                &mut self.bos[..],
                &mut self.nodes[..],
            )?)
        }
    }

    #[test]
    fn map_into_empty_space_is_one_map_op() -> Result {
        let mut slots = Slots::new()?;
        let mut vm = slots.vm()?;
        let bo = Bo(1);
        let mut log = Log::new();
        vm.sm_map(&mut log, Mapping::new(0x10000, 0x4000, &bo, 0))?;
        assert_eq!(log.steps(), &[Some(Step::Map(0x10000, 0x4000))]);
        assert_eq!(vm.len(), 1);
        Ok(())
    }

    #[test]
    fn identical_request_unmaps_with_keep_then_maps() -> Result {
        let mut slots = Slots::new()?;
        let mut vm = slots.vm()?;
        let bo = Bo(1);
        vm.map(Mapping::new(0x0, 0x3000, &bo, 0), 7)?;
        let mut log = Log::new();
        vm.sm_map(&mut log, Mapping::new(0x0, 0x3000, &bo, 0))?;
        assert_eq!(
            log.steps(),
            &[Some(Step::Unmap(0x0, true)), Some(Step::Map(0x0, 0x3000))]
        );
        // Another object over the same range: nothing can be kept.
        let other = Bo(2);
        let mut log = Log::new();
        vm.sm_map(&mut log, Mapping::new(0x0, 0x3000, &other, 0))?;
        assert_eq!(
            log.steps(),
            &[Some(Step::Unmap(0x0, false)), Some(Step::Map(0x0, 0x3000))]
        );
        assert_eq!(vm.len(), 1);
        Ok(())
    }

    #[test]
    fn map_inside_a_mapping_remaps_both_sides() -> Result {
        let mut slots = Slots::new()?;
        let mut vm = slots.vm()?;
        let bo = Bo(1);
        vm.map(Mapping::new(0x0, 0x3000, &bo, 0), 1)?;
        let mut log = Log::new();
        // Same object at the matching offset: the pieces outside may be kept.
        vm.sm_map(&mut log, Mapping::new(0x1000, 0x1000, &bo, 0x1000))?;
        assert_eq!(
            log.steps(),
            &[
                Some(Step::Remap(0x0, true, true, true)),
                Some(Step::Map(0x1000, 0x1000))
            ]
        );
        assert_eq!(vm.len(), 3);
        let mut ranges = [(0u64, 0u64); 3];
        for (r, va) in ranges.iter_mut().zip(vm.iter()) {
            *r = (va.addr(), va.range());
        }
        assert_eq!(ranges, [(0x0, 0x1000), (0x1000, 0x1000), (0x2000, 0x1000)]);
        Ok(())
    }

    #[test]
    fn unmap_splits_then_removes() -> Result {
        let mut slots = Slots::new()?;
        let mut vm = slots.vm()?;
        let bo = Bo(1);
        vm.map(Mapping::new(0x10000, 0x4000, &bo, 0), 3)?;
        let mut log = Log::new();
        vm.sm_unmap(&mut log, 0x11000, 0x1000)?;
        assert_eq!(
            log.steps(),
            &[Some(Step::Remap(0x10000, true, true, false))]
        );
        assert_eq!(vm.len(), 2);
        let mut log = Log::new();
        vm.sm_unmap(&mut log, 0x10000, 0x4000)?;
        assert_eq!(
            log.steps(),
            &[
                Some(Step::Unmap(0x10000, false)),
                Some(Step::Unmap(0x12000, false))
            ]
        );
        assert_eq!(vm.len(), 0);
        Ok(())
    }

    #[test]
    fn bad_requests_change_nothing_and_map_to_errno() -> Result {
        let mut slots = Slots::new()?;
        let mut vm = slots.vm()?;
        let bo = Bo(1);
        vm.map(Mapping::new(0x0, 0x1000, &bo, 0), 0)?;
        let mut log = Log::new();
        let r = vm.sm_map(&mut log, Mapping::new(1 << 32, 0x1000, &bo, 0));
        assert_eq!(r, Err(Error::OutOfVm));
        assert_eq!(log.len, 0);
        assert_eq!(vm.len(), 1);
        let e: kernel::error::Error = Error::OutOfVm.into();
        assert_eq!(e.to_errno(), EINVAL.to_errno());
        let e: kernel::error::Error = Error::NoMemory.into();
        assert_eq!(e.to_errno(), ENOMEM.to_errno());
        Ok(())
    }
}
