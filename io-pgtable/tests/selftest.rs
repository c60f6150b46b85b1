// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The cases of Linux's `io-pgtable-arm` KUnit selftest, one named test per configuration of
//! its matrix (every page-size set times every `ias <= oas` pair it uses), for
//! `ARM_64_LPAE_S1` and, where the format allows the configuration, `ARM_MALI_LPAE`.
//!
//! Each case, as in the C test: an empty table translates nothing; one mapping per page size
//! (1 GiB apart) succeeds, a second mapping over it is refused with `EEXIST`, and
//! `iova_to_phys` is exact; each mapping is unmapped in full, stops translating, and is
//! mapped again; the last largest page below `2^ias` maps and unmaps. In addition every
//! translation is checked against the independent walker reading the tables by device
//! address, and no table is leaked when the page table is dropped.
//!
//! Under Miri a representative subset runs: one case per granule, one Mali case, and the
//! non-coherent cases.

use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::walker::{self, Regime};
use io_pgtable::{
    Arm64LpaeS1, ArmMaliLpae, Config, Error, FlushOps, Format, Gather, PageTable, Prot, Quirks,
    SZ_16K, SZ_1G, SZ_2M, SZ_32M, SZ_4K, SZ_512M, SZ_64K,
};
use std::cell::Cell;

/// Checks every callback the way the C selftest's dummy ops do.
struct CheckingFlush {
    pgsize_bitmap: u64,
    calls: Cell<usize>,
}

impl FlushOps for CheckingFlush {
    fn tlb_flush_all(&self) {
        self.calls.set(self.calls.get() + 1);
    }
    fn tlb_flush_walk(&self, _iova: u64, size: u64, _granule: u64) {
        assert_ne!(size & self.pgsize_bitmap, 0, "flush of size {size:#x}");
        self.calls.set(self.calls.get() + 1);
    }
    fn tlb_add_page(&self, gather: &mut Gather, iova: u64, granule: u64) {
        self.tlb_flush_walk(iova, granule, granule);
        gather.add_page(iova, granule);
    }
}

fn slot(pgsizes: u64) -> Granule {
    match pgsizes.trailing_zeros() {
        12 => Granule::Size4K,
        14 => Granule::Size16K,
        _ => Granule::Size64K,
    }
}

fn run<F: Format>(
    pgsizes: u64,
    ias: u32,
    oas: u32,
    regime_of: fn(&PageTable<F, &HostAllocator, &CheckingFlush>) -> Regime,
) {
    run_with::<F>(pgsizes, ias, oas, true, regime_of)
}

fn run_with<F: Format>(
    pgsizes: u64,
    ias: u32,
    oas: u32,
    coherent: bool,
    regime_of: fn(&PageTable<F, &HostAllocator, &CheckingFlush>) -> Regime,
) {
    let mem = if coherent {
        HostAllocator::new(slot(pgsizes), 16)
    } else {
        HostAllocator::new_noncoherent(slot(pgsizes), 16)
    };
    let flush = CheckingFlush {
        pgsize_bitmap: pgsizes,
        calls: Cell::new(0),
    };
    let cfg = Config::new(pgsizes, ias, oas)
        .coherent(coherent)
        .with_quirks(if F::MALI {
            Quirks::empty()
        } else {
            Quirks::NO_WARN
        });
    {
        let mut pt = PageTable::<F, _, _>::new(cfg, &mem, &flush).expect("allocate table");
        let regime = regime_of(&pt);
        let bitmap = pt.cfg().pgsize_bitmap;
        let sizes: Vec<u64> = (0..64)
            .map(|b| 1u64 << b)
            .filter(|s| bitmap & s != 0)
            .collect();

        // Empty tables translate nothing.
        for iova in [42, SZ_1G + 42, 2 * SZ_1G + 42] {
            assert_eq!(pt.iova_to_phys(iova), None);
            assert!(walker::walk(&mem, &regime, iova).is_err());
        }

        // Distinct mappings of every page size.
        let rw = Prot::READ | Prot::WRITE | Prot::NOEXEC | Prot::CACHE;
        for (k, &size) in sizes.iter().enumerate() {
            let iova = k as u64 * SZ_1G;
            assert_eq!(
                pt.map_pages(iova, iova, size, 1, rw),
                (size, Ok(())),
                "size {size:#x}"
            );
            // Overlapping mappings are refused.
            assert_eq!(
                pt.map_pages(iova, iova + size, size, 1, Prot::READ | Prot::NOEXEC),
                (0, Err(Error::Exists))
            );
            assert_eq!(pt.iova_to_phys(iova + 42), Some(iova + 42));
            let t = walker::walk(&mem, &regime, iova + 42).expect("walker translates");
            assert_eq!((t.pa, t.size), (iova + 42, size));
        }

        // Full unmap, then remap of every size.
        for (k, &size) in sizes.iter().enumerate() {
            let iova = k as u64 * SZ_1G;
            assert_eq!(pt.unmap_pages(iova, size, 1, None), Ok(size));
            assert_eq!(pt.iova_to_phys(iova + 42), None);
            assert!(walker::walk(&mem, &regime, iova + 42).is_err());
            assert_eq!(
                pt.map_pages(iova, iova, size, 1, Prot::WRITE),
                (size, Ok(()))
            );
            assert_eq!(pt.iova_to_phys(iova + 42), Some(iova + 42));
            assert_eq!(
                walker::walk(&mem, &regime, iova + 42).map(|t| t.pa),
                Ok(iova + 42)
            );
        }

        // The last largest page of the input address space.
        let size = *sizes.last().unwrap();
        let iova = (1u64 << pt.cfg().ias) - size;
        // Identity where the output size allows it (the C matrix has ias <= oas).
        let pa = iova & ((1u64 << pt.cfg().oas) - 1);
        assert_eq!(pt.map_pages(iova, pa, size, 1, rw), (size, Ok(())));
        assert_eq!(
            walker::walk(&mem, &regime, iova + 42).map(|t| t.pa),
            Ok(pa + 42)
        );
        assert_eq!(pt.unmap_pages(iova, size, 1, None), Ok(size));
        assert_eq!(pt.iova_to_phys(iova + 42), None);
    }
    assert_eq!(mem.in_use(), 0, "tables leaked");
    assert!(flush.calls.get() >= 1);
}

fn s1_regime(pt: &PageTable<Arm64LpaeS1, &HostAllocator, &CheckingFlush>) -> Regime {
    Regime::from_s1(&pt.s1_regs(), false).unwrap()
}

fn mali_regime(pt: &PageTable<ArmMaliLpae, &HostAllocator, &CheckingFlush>) -> Regime {
    Regime::from_mali(&pt.mali_lpae_regs()).unwrap()
}

#[test]
fn s1_4k_ias32_oas32() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 32, 32, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias32_oas36() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 32, 36, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias36_oas36() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 36, 36, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias32_oas40() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 32, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias36_oas40() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 36, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias40_oas40() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 40, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias32_oas42() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 32, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias36_oas42() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 36, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias40_oas42() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 40, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias42_oas42() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 42, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias32_oas44() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 32, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias36_oas44() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 36, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias40_oas44() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 40, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias42_oas44() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 42, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias44_oas44() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 44, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias32_oas48() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 32, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias36_oas48() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 36, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias40_oas48() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 40, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias42_oas48() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 42, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_4k_ias44_oas48() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 44, 48, s1_regime);
}

#[test]
fn s1_4k_ias48_oas48() {
    run::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 48, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias32_oas32() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 32, 32, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias32_oas36() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 32, 36, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias36_oas36() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 36, 36, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias32_oas40() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 32, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias36_oas40() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 36, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias40_oas40() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 40, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias32_oas42() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 32, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias36_oas42() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 36, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias40_oas42() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 40, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias42_oas42() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 42, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias32_oas44() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 32, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias36_oas44() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 36, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias40_oas44() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 40, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias42_oas44() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 42, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias44_oas44() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 44, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias32_oas48() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 32, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias36_oas48() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 36, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias40_oas48() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 40, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias42_oas48() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 42, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_16k_ias44_oas48() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 44, 48, s1_regime);
}

#[test]
fn s1_16k_ias48_oas48() {
    run::<Arm64LpaeS1>(SZ_16K | SZ_32M, 48, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias32_oas32() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 32, 32, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias32_oas36() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 32, 36, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias36_oas36() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 36, 36, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias32_oas40() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 32, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias36_oas40() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 36, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias40_oas40() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 40, 40, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias32_oas42() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 32, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias36_oas42() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 36, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias40_oas42() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 40, 42, s1_regime);
}

#[test]
fn s1_64k_ias42_oas42() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 42, 42, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias32_oas44() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 32, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias36_oas44() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 36, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias40_oas44() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 40, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias42_oas44() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 42, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias44_oas44() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 44, 44, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias32_oas48() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 32, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias36_oas48() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 36, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias40_oas48() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 40, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias42_oas48() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 42, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias44_oas48() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 44, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn s1_64k_ias48_oas48() {
    run::<Arm64LpaeS1>(SZ_64K | SZ_512M, 48, 48, s1_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn mali_4k_ias32_oas32() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 32, 32, mali_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn mali_4k_ias32_oas36() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 32, 36, mali_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn mali_4k_ias36_oas36() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 36, 36, mali_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn mali_4k_ias32_oas40() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 32, 40, mali_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn mali_4k_ias36_oas40() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 36, 40, mali_regime);
}

#[test]
fn mali_4k_ias40_oas40() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 40, 40, mali_regime);
}

#[test]
#[cfg_attr(miri, ignore)]
fn mali_4k_ias48_oas40() {
    run::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 48, 40, mali_regime);
}

// The same cases with a walker that does not snoop the CPU caches: the walker reads a
// separate device copy that only `sync_for_device` updates.

#[test]
fn s1_4k_ias48_oas48_noncoherent() {
    run_with::<Arm64LpaeS1>(SZ_4K | SZ_2M | SZ_1G, 48, 48, false, s1_regime);
}

#[test]
fn s1_16k_ias36_oas40_noncoherent() {
    run_with::<Arm64LpaeS1>(SZ_16K | SZ_32M, 36, 40, false, s1_regime);
}

#[test]
fn s1_64k_ias42_oas44_noncoherent() {
    run_with::<Arm64LpaeS1>(SZ_64K | SZ_512M, 42, 44, false, s1_regime);
}

#[test]
fn mali_4k_ias40_oas40_noncoherent() {
    run_with::<ArmMaliLpae>(SZ_4K | SZ_2M | SZ_1G, 40, 40, false, mali_regime);
}
