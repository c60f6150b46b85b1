// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_io_pgtable`: page tables in kernel memory, walked by physical address.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_io_pgtable)]
mod tests {
    use crate::kernel::KernelTableAlloc;
    use crate::walker::{walk, Regime};
    use crate::{Arm64LpaeS1, Config, Error, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    use ::kernel::prelude::*;

    const RW: Prot = Prot::READ.union(Prot::WRITE).union(Prot::CACHE);

    fn config() -> Config {
        Config::new(SZ_4K | SZ_2M, 48, 40).coherent(true)
    }

    #[test]
    fn map_4k_pages_and_walk_by_physical_address() -> Result {
        let mem = KernelTableAlloc::<16>::new(GFP_KERNEL);
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &mem, NoFlush)?;
        let (mapped, res) = pt.map_pages(0x10_0000, 0x8000_0000, SZ_4K, 16, RW);
        res?;
        assert_eq!(mapped, 16 * SZ_4K);
        assert_eq!(pt.iova_to_phys(0x10_0000), Some(0x8000_0000));
        assert_eq!(pt.iova_to_phys(0x10_f123), Some(0x8000_f123));
        assert_eq!(pt.iova_to_phys(0x11_0000), None);
        // The hardware's view: walk the tables through their physical addresses.
        let regime = Regime::from_mali(&pt.mali_as_regs()?).ok_or(EINVAL)?;
        let t = walk(&mem, &regime, 0x10_5678).map_err(|_| EFAULT)?;
        assert_eq!(t.pa, 0x8000_5678);
        assert_eq!(t.size, SZ_4K);
        assert_eq!(t.level, 3);
        assert!(walk(&mem, &regime, 0x20_0000).is_err());
        // Root plus one table per level below it.
        assert!(mem.live() >= 3);
        Ok(())
    }

    #[test]
    fn blocks_and_iova_to_phys_agree_with_walker() -> Result {
        let mem = KernelTableAlloc::<16>::new(GFP_KERNEL);
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &mem, NoFlush)?;
        pt.map(0x4000_0000, 0x1_0000_0000, 4 * SZ_2M, RW)?;
        let regime = Regime::from_mali(&pt.mali_as_regs()?).ok_or(EINVAL)?;
        for off in [0u64, 0x1234, SZ_2M + 8, 4 * SZ_2M - 8] {
            let t = walk(&mem, &regime, 0x4000_0000 + off).map_err(|_| EFAULT)?;
            assert_eq!(Some(t.pa), pt.iova_to_phys(0x4000_0000 + off));
            assert_eq!(t.pa, 0x1_0000_0000 + off);
            assert_eq!(t.size, SZ_2M);
        }
        Ok(())
    }

    #[test]
    fn mapping_over_a_mapping_is_eexist() -> Result {
        let mem = KernelTableAlloc::<16>::new(GFP_KERNEL);
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &mem, NoFlush)?;
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
    fn unmap_returns_size_and_frees_tables() -> Result {
        let mem = KernelTableAlloc::<16>::new(GFP_KERNEL);
        {
            let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &mem, NoFlush)?;
            pt.map(0x30_0000, 0x7000_0000, 8 * SZ_4K, RW)?;
            let unmapped = pt.unmap_pages(0x30_0000, SZ_4K, 8, None)?;
            assert_eq!(unmapped, 8 * SZ_4K);
            assert_eq!(pt.iova_to_phys(0x30_0000), None);
            assert!(mem.live() >= 1);
        }
        // Dropping the page table gave every table back.
        assert_eq!(mem.live(), 0);
        Ok(())
    }

    #[test]
    fn exhausted_allocator_is_enomem_and_leaves_nothing_mapped() -> Result {
        // Room for the root and one more table only: a 4K mapping needs three levels below it.
        let mem = KernelTableAlloc::<2>::new(GFP_KERNEL);
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(config(), &mem, NoFlush)?;
        let r = pt.map(0x40_0000, 0x6000_0000, SZ_4K, RW);
        assert_eq!(r, Err(Error::NoMemory));
        assert_eq!(pt.iova_to_phys(0x40_0000), None);
        let e: ::kernel::error::Error = Error::NoMemory.into();
        assert_eq!(e.to_errno(), ENOMEM.to_errno());
        Ok(())
    }
}
