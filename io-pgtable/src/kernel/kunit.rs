// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_io_pgtable`: page tables in DMA-mapped memory of a faux device, walked
//! by device address as the GPU's MMU would.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_io_pgtable)]
mod tests {
    use crate::kernel::{key, DmaTableAlloc};
    use crate::memory::TableAlloc;
    use crate::walker::{walk, Regime};
    use crate::{Arm64LpaeS1, ArmMaliLpae, Config, Error, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    use ::kernel::device::Device;
    use ::kernel::faux;
    use ::kernel::prelude::*;

    extern "C" {
        fn gpukit_io_pgtable_test_dma_setup(dev: *mut core::ffi::c_void) -> core::ffi::c_int;
    }

    const RW: Prot = Prot::READ.union(Prot::WRITE).union(Prot::CACHE);

    /// A faux device with a 64-bit DMA mask: the "GPU" whose MMU walks the tables.
    fn gpu() -> Result<faux::Registration> {
        let reg = faux::Registration::new(c"gpukit-io-pgtable-kunit", None)?;
        let dev: &Device = reg.as_ref();
        // `Device` is `repr(transparent)` over the C `struct device`.
        let raw = core::ptr::from_ref(dev)
            .cast::<core::ffi::c_void>()
            .cast_mut();
        // SAFETY: `raw` is the registered faux device, alive while `reg` is.
        let ret = unsafe { gpukit_io_pgtable_test_dma_setup(raw) };
        if ret != 0 {
            return Err(::kernel::error::Error::from_errno(ret));
        }
        Ok(reg)
    }

    /// The Mali-G610 configuration: 4K pages and 2M blocks, a walker that does not snoop.
    fn config() -> Config {
        Config::new(SZ_4K | SZ_2M, 48, 40)
    }

    #[test]
    fn noncoherent_tables_walked_by_dma_address() -> Result {
        let gpu = gpu()?;
        let mem = DmaTableAlloc::new(gpu.as_ref(), false, 16, GFP_KERNEL)?;
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &*mem, NoFlush)?;
        assert!(!pt.cfg().coherent_walk);
        let (mapped, res) = pt.map_pages(0x10_0000, 0x8000_0000, SZ_4K, 16, RW);
        res?;
        assert_eq!(mapped, 16 * SZ_4K);
        assert_eq!(pt.iova_to_phys(0x10_0000), Some(0x8000_0000));
        assert_eq!(pt.iova_to_phys(0x10_f123), Some(0x8000_f123));
        assert_eq!(pt.iova_to_phys(0x11_0000), None);
        // Every write batch was synced for the walker.
        assert!(mem.syncs() > 0);
        // The hardware's view: the base register and every table descriptor hold the
        // addresses the DMA API returned, which is all the walker can follow.
        let regime = Regime::from_mali(&pt.mali_as_regs()?).ok_or(EINVAL)?;
        let t = walk(&*mem, &regime, 0x10_5678).map_err(|_| EFAULT)?;
        assert_eq!(t.pa, 0x8000_5678);
        assert_eq!(t.size, SZ_4K);
        assert_eq!(t.level, 3);
        assert!(walk(&*mem, &regime, 0x20_0000).is_err());
        // Root plus one table per level below it.
        assert!(mem.live() >= 3);
        let synced = mem.syncs();
        pt.unmap_pages(0x10_0000, SZ_4K, 16, None)?;
        assert!(mem.syncs() > synced);
        drop(pt);
        assert_eq!(mem.live(), 0);
        Ok(())
    }

    #[test]
    fn cpu_view_by_addition_agrees_with_the_index() -> Result {
        let gpu = gpu()?;
        let mem = DmaTableAlloc::new(gpu.as_ref(), false, 16, GFP_KERNEL)?;
        assert!(!mem.is_linear());
        let mut tables = KVec::new();
        for size in [4096usize, 64, 4096, 512, 4096] {
            let t = mem.alloc_table(size).ok_or(ENOMEM)?;
            tables.push((t, size), GFP_KERNEL)?;
        }
        // No IOMMU in front of the faux device: `dma_map_single` of `kmalloc` memory gives
        // its physical address, one fixed distance from the linear map.
        assert!(mem.is_linear());
        for (t, _) in tables.iter() {
            assert_eq!(mem.table_cpu(t.dev), t.cpu);
            let (base, cpu, _) = mem.containing(t.dev).ok_or(EINVAL)?;
            assert_eq!((base, cpu.cast()), (t.dev, t.cpu));
        }
        // A table at another distance (what an IOMMU would hand out; recorded by hand here
        // and forgotten before anything could unmap it) turns the shortcut off for good,
        // and the CPU views still come out right, from the index.
        let (first, _) = tables[0];
        let other = first.dev ^ (1 << 44);
        assert!(mem.insert(key(other, 12), other, first.cpu.cast()));
        assert!(!mem.is_linear());
        assert_eq!(mem.table_cpu(other), first.cpu);
        assert!(mem.remove(key(other, 12)).is_some());
        assert!(!mem.is_linear());
        for (t, _) in tables.iter() {
            assert_eq!(mem.table_cpu(t.dev), t.cpu);
        }
        for (t, size) in tables.into_iter() {
            // SAFETY: Allocated above with this size, used by nothing else.
            unsafe { mem.free_table(t, size) };
        }
        assert_eq!(mem.live(), 0);
        Ok(())
    }

    #[test]
    fn coherent_walker_gets_no_cache_maintenance() -> Result {
        let gpu = gpu()?;
        let mem = DmaTableAlloc::new(gpu.as_ref(), true, 16, GFP_KERNEL)?;
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config().coherent(true), &*mem, NoFlush)?;
        pt.map(0x4000_0000, 0x1_0000_0000, 4 * SZ_2M, RW)?;
        pt.map(0x20_0000, 0x9000_0000, 4 * SZ_4K, RW)?;
        let regime = Regime::from_mali(&pt.mali_as_regs()?).ok_or(EINVAL)?;
        for off in [0u64, 0x1234, SZ_2M + 8, 4 * SZ_2M - 8] {
            let t = walk(&*mem, &regime, 0x4000_0000 + off).map_err(|_| EFAULT)?;
            assert_eq!(Some(t.pa), pt.iova_to_phys(0x4000_0000 + off));
            assert_eq!(t.pa, 0x1_0000_0000 + off);
            assert_eq!(t.size, SZ_2M);
        }
        assert_eq!(mem.syncs(), 0);
        Ok(())
    }

    #[test]
    fn mali_lpae_format_in_dma_memory() -> Result {
        let gpu = gpu()?;
        let mem = DmaTableAlloc::new(gpu.as_ref(), false, 16, GFP_KERNEL)?;
        let cfg = Config::new(SZ_4K | SZ_2M, 48, 40);
        let mut pt = PageTable::<ArmMaliLpae, _>::new(cfg, &*mem, NoFlush)?;
        pt.map(0x60_0000, 0x5000_0000, 2 * SZ_4K, RW)?;
        pt.map(0x80_0000, 0x5020_0000, SZ_2M, RW)?;
        assert_eq!(pt.iova_to_phys(0x60_1abc), Some(0x5000_1abc));
        assert_eq!(pt.iova_to_phys(0x80_4321), Some(0x5020_4321));
        assert!(mem.syncs() > 0);
        Ok(())
    }

    #[test]
    fn mapping_over_a_mapping_is_eexist() -> Result {
        let gpu = gpu()?;
        let mem = DmaTableAlloc::new(gpu.as_ref(), false, 16, GFP_KERNEL)?;
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &*mem, NoFlush)?;
        pt.map(0x20_0000, 0x9000_0000, 4 * SZ_4K, RW)?;
        assert_eq!(
            pt.map(0x20_2000, 0xa000_0000, SZ_4K, RW),
            Err(Error::Exists)
        );
        // Nothing changed.
        assert_eq!(pt.iova_to_phys(0x20_2000), Some(0x9000_2000));
        let e: ::kernel::error::Error = Error::Exists.into();
        assert_eq!(e.to_errno(), EEXIST.to_errno());
        Ok(())
    }

    #[test]
    fn tables_are_unmapped_and_freed() -> Result {
        let gpu = gpu()?;
        let mem = DmaTableAlloc::new(gpu.as_ref(), false, 64, GFP_KERNEL)?;
        {
            let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &*mem, NoFlush)?;
            // Tables in several places, freed and allocated again: the index reuses its slots.
            for round in 0..4u64 {
                for i in 0..8u64 {
                    let iova = (i << 30) + (round << 21);
                    pt.map(iova, 0x7000_0000 + (i << 12), SZ_4K, RW)?;
                }
                for i in 0..8u64 {
                    let iova = (i << 30) + (round << 21);
                    assert_eq!(pt.iova_to_phys(iova), Some(0x7000_0000 + (i << 12)));
                    assert_eq!(pt.unmap_pages(iova, SZ_4K, 1, None)?, SZ_4K);
                }
            }
            assert!(mem.live() >= 1);
        }
        // Dropping the page table gave every table back (and DMA-API debugging saw each
        // mapping undone with its own size and direction).
        assert_eq!(mem.live(), 0);
        Ok(())
    }

    #[test]
    fn exhausted_allocator_is_enomem_and_leaves_nothing_mapped() -> Result {
        let gpu = gpu()?;
        // Room for the root and one more table only: a 4K mapping needs three levels below it.
        let mem = DmaTableAlloc::new(gpu.as_ref(), false, 2, GFP_KERNEL)?;
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &*mem, NoFlush)?;
        let r = pt.map(0x40_0000, 0x6000_0000, SZ_4K, RW);
        assert_eq!(r, Err(Error::NoMemory));
        assert_eq!(pt.iova_to_phys(0x40_0000), None);
        let e: ::kernel::error::Error = Error::NoMemory.into();
        assert_eq!(e.to_errno(), ENOMEM.to_errno());
        drop(pt);
        assert_eq!(mem.live(), 0);
        Ok(())
    }
}
