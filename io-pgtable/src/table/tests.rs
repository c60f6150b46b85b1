// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Unit tests of the map/unmap/translate semantics.

use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::vec::Vec;

use super::*;
use crate::config::{SZ_1G, SZ_2M, SZ_4K, SZ_4T, SZ_512M, SZ_64K};
use crate::format::{Arm64LpaeS1, ArmMaliLpae};
use crate::host::{Granule, HostAllocator};
use crate::walker::{self, Fault, Regime};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    All,
    Walk(u64, u64, u64),
    Page(u64, u64),
}

#[derive(Default)]
struct Rec(Mutex<Vec<Ev>>);

impl Rec {
    fn take(&self) -> Vec<Ev> {
        core::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl FlushOps for Rec {
    fn tlb_flush_all(&self) {
        self.0.lock().unwrap().push(Ev::All);
    }
    fn tlb_flush_walk(&self, iova: u64, size: u64, granule: u64) {
        self.0.lock().unwrap().push(Ev::Walk(iova, size, granule));
    }
    fn tlb_add_page(&self, gather: &mut Gather, iova: u64, granule: u64) {
        self.0.lock().unwrap().push(Ev::Page(iova, granule));
        gather.add_page(iova, granule);
    }
}

const RW: Prot = Prot::READ.union(Prot::WRITE);
const PANTHOR: u64 = SZ_4K | SZ_2M;

fn s1<'a>(
    mem: &'a HostAllocator,
    rec: &'a Rec,
    ias: u32,
) -> PageTable<Arm64LpaeS1, &'a HostAllocator, &'a Rec> {
    let cfg = Config::new(SZ_4K | SZ_2M | SZ_1G, ias, 48).coherent(!mem.is_noncoherent());
    PageTable::new(cfg, mem, rec).unwrap()
}

fn check_walker<F: Format, T: FlushOps>(
    pt: &PageTable<F, &HostAllocator, T>,
    regime: &Regime,
    iova: u64,
) {
    let mine = pt.iova_to_phys(iova);
    let theirs = walker::walk(pt.allocator(), regime, iova)
        .ok()
        .map(|t| t.pa);
    assert_eq!(mine, theirs, "iova {iova:#x}");
}

fn s1_regime<T: FlushOps>(pt: &PageTable<Arm64LpaeS1, &HostAllocator, T>) -> Regime {
    Regime::from_s1(&pt.s1_regs(), false).unwrap()
}

#[test]
fn map_pages_stops_at_table_end() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    let iova = SZ_2M - 3 * SZ_4K;
    assert_eq!(
        pt.map_pages(iova, 0x100_0000, SZ_4K, 10, RW),
        (3 * SZ_4K, Ok(()))
    );
    assert_eq!(pt.iova_to_phys(iova + 2 * SZ_4K + 5), Some(0x100_2005));
    assert_eq!(pt.iova_to_phys(SZ_2M), None);
    // The next call continues in the next table.
    let (m, r) = pt.map_pages(SZ_2M, 0x100_3000, SZ_4K, 7, RW);
    assert_eq!((m, r), (7 * SZ_4K, Ok(())));
    assert_eq!(pt.iova_to_phys(SZ_2M + 6 * SZ_4K), Some(0x100_9000));
}

#[test]
fn map_over_leaf_is_exists_and_changes_nothing() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    pt.map_pages(0x5000, 0x5000, SZ_4K, 1, RW).1.unwrap();
    // A run that ends on the mapped page: nothing of it is written.
    assert_eq!(
        pt.map_pages(0x1000, 0x9000, SZ_4K, 5, RW),
        (0, Err(Error::Exists))
    );
    assert_eq!(pt.iova_to_phys(0x1000), None);
    assert_eq!(pt.iova_to_phys(0x5000), Some(0x5000));
    // A page inside a block.
    pt.map_pages(SZ_1G, SZ_1G, SZ_2M, 1, RW).1.unwrap();
    assert_eq!(
        pt.map_pages(SZ_1G + SZ_4K, 0, SZ_4K, 1, RW),
        (0, Err(Error::Exists))
    );
    // A block over a table that still maps a page.
    assert_eq!(pt.map_pages(0, 0, SZ_2M, 1, RW), (0, Err(Error::Exists)));
    assert_eq!(pt.iova_to_phys(0x5000), Some(0x5000));
}

#[test]
fn block_replaces_empty_table_and_frees_it() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    pt.map_pages(SZ_2M, 0x40_0000, SZ_4K, 4, RW).1.unwrap();
    let tables = mem.in_use();
    assert_eq!(tables, 4); // levels 0..3
    assert_eq!(pt.unmap_pages(SZ_2M, SZ_4K, 4, None), Ok(4 * SZ_4K));
    // The level-3 table stays, empty.
    assert_eq!(mem.in_use(), 4);
    rec.take();
    assert_eq!(
        pt.map_pages(SZ_2M, 0x80_0000, SZ_2M, 1, RW),
        (SZ_2M, Ok(()))
    );
    assert_eq!(mem.in_use(), 3);
    assert_eq!(rec.take(), [Ev::Walk(SZ_2M, SZ_2M, SZ_4K)]);
    assert_eq!(pt.iova_to_phys(SZ_2M + 0x1234), Some(0x80_1234));
    check_walker(&pt, &s1_regime(&pt), SZ_2M + 0x1234);
}

#[test]
fn unmap_part_of_block_is_refused() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    pt.map_pages(0, 0, SZ_2M, 1, RW).1.unwrap();
    assert_eq!(
        pt.unmap_pages(SZ_4K, SZ_4K, 1, None),
        Err(Error::PartialBlock)
    );
    assert_eq!(pt.unmap_pages(0, SZ_4K, 1, None), Err(Error::PartialBlock));
    assert_eq!(pt.unmap(0, SZ_4K, None), Err(Error::PartialBlock));
    assert_eq!(pt.iova_to_phys(SZ_4K), Some(SZ_4K));
    assert_eq!(pt.unmap_pages(0, SZ_2M, 1, None), Ok(SZ_2M));
}

#[test]
fn unmap_at_table_level_frees_subtree() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    pt.map_pages(SZ_1G, 0, SZ_4K, 3, RW).1.unwrap();
    assert_eq!(mem.in_use(), 4);
    rec.take();
    let mut g = Gather::new();
    assert_eq!(pt.unmap_pages(SZ_1G, SZ_1G, 1, Some(&mut g)), Ok(SZ_1G));
    assert_eq!(mem.in_use(), 2);
    assert_eq!(
        rec.take(),
        [Ev::Walk(SZ_1G, SZ_1G, SZ_4K), Ev::Page(SZ_1G, SZ_1G)]
    );
    assert_eq!(pt.iova_to_phys(SZ_1G), None);
}

#[test]
fn unmap_stops_at_hole_and_gathers() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    pt.map_pages(0, 0, SZ_4K, 2, RW).1.unwrap();
    pt.map_pages(3 * SZ_4K, 0, SZ_4K, 1, RW).1.unwrap();
    let mut g = Gather::new();
    assert_eq!(pt.unmap_pages(0, SZ_4K, 4, Some(&mut g)), Ok(2 * SZ_4K));
    assert_eq!(rec.take(), [Ev::Page(0, SZ_4K), Ev::Page(SZ_4K, SZ_4K)]);
    assert_eq!((g.start, g.end), (0, 2 * SZ_4K - 1));
    assert_eq!(pt.unmap_pages(0, SZ_4K, 4, None), Ok(0));
    assert_eq!(pt.iova_to_phys(3 * SZ_4K), Some(0));
    // A queued gather gets no per-page callbacks.
    let mut q = Gather {
        queued: true,
        ..Gather::new()
    };
    assert_eq!(pt.unmap_pages(3 * SZ_4K, SZ_4K, 1, Some(&mut q)), Ok(SZ_4K));
    assert!(rec.take().is_empty());
    assert!(q.is_empty());
}

#[test]
fn argument_errors_change_nothing() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 32);
    assert_eq!(
        pt.map_pages(0, 0, 0, 1, RW),
        (0, Err(Error::InvalidPageSize))
    );
    assert_eq!(
        pt.map_pages(0, 0, SZ_64K, 1, RW),
        (0, Err(Error::InvalidPageSize))
    );
    assert_eq!(
        pt.map_pages(0, 0, 3 * SZ_4K, 1, RW),
        (0, Err(Error::InvalidPageSize))
    );
    assert_eq!(
        pt.map_pages(1 << 32, 0, SZ_4K, 1, RW),
        (0, Err(Error::OutOfRange))
    );
    assert_eq!(
        pt.map_pages((1 << 32) - SZ_4K, 0, SZ_4K, 2, RW),
        (0, Err(Error::OutOfRange))
    );
    assert_eq!(
        pt.map_pages(0, 1 << 48, SZ_4K, 1, RW),
        (0, Err(Error::OutOfRange))
    );
    assert_eq!(
        pt.map_pages(0, 0, SZ_4K, usize::MAX, RW),
        (0, Err(Error::OutOfRange))
    );
    assert_eq!(
        pt.map_pages(0x800, 0, SZ_4K, 1, RW),
        (0, Err(Error::Misaligned))
    );
    assert_eq!(
        pt.map_pages(0, 0x1000, SZ_2M, 1, RW),
        (0, Err(Error::Misaligned))
    );
    assert_eq!(
        pt.map_pages(0, 0, SZ_4K, 1, Prot::CACHE),
        (0, Err(Error::InvalidProt))
    );
    assert_eq!(pt.map_pages(0, 0, SZ_4K, 0, RW), (0, Ok(())));
    assert_eq!(
        pt.unmap_pages(0, SZ_4K, 0, None),
        Err(Error::InvalidPageSize)
    );
    assert_eq!(pt.unmap_pages(0x10, SZ_4K, 1, None), Err(Error::Misaligned));
    assert_eq!(
        pt.unmap_pages(1 << 33, SZ_4K, 1, None),
        Err(Error::OutOfRange)
    );
    assert_eq!(pt.map(0, 0x10, SZ_4K, RW), Err(Error::Misaligned));
    assert_eq!(pt.iova_to_phys(1 << 40), None);
    assert_eq!(mem.in_use(), 1);
}

#[test]
fn unmappable_size_for_short_ias() {
    // ias 30 with 4K: two levels (2 and 3); 1G pages cannot be mapped.
    let mem = HostAllocator::new(Granule::Size4K, 4);
    let cfg = Config::new(SZ_4K | SZ_2M | SZ_1G, 30, 40);
    let mut pt = PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush).unwrap();
    assert_eq!(pt.geometry().start_level(), 2);
    assert_eq!(
        pt.map_pages(0, 0, SZ_1G, 1, RW),
        (0, Err(Error::InvalidPageSize))
    );
    pt.map_pages(SZ_2M, 0, SZ_2M, 1, RW).1.unwrap();
    assert_eq!(pt.iova_to_phys(SZ_2M + 1), Some(1));
}

#[test]
fn out_of_memory_reports_prefix_and_map_rolls_back() {
    // PGD + level 1 + level 2 + one level-3 table fit; a second level-3 table does not.
    let mem = HostAllocator::new(Granule::Size4K, 4);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    let iova = SZ_2M - 2 * SZ_4K;
    assert_eq!(pt.map_pages(iova, 0, SZ_4K, 4, RW), (2 * SZ_4K, Ok(())));
    assert_eq!(
        pt.map_pages(SZ_2M, 0, SZ_4K, 2, RW),
        (0, Err(Error::NoMemory))
    );
    assert_eq!(pt.unmap_pages(iova, SZ_4K, 2, None), Ok(2 * SZ_4K));
    // `map` is all or nothing.
    assert_eq!(
        pt.map(iova, 0x1000_0000, 4 * SZ_4K, RW),
        Err(Error::NoMemory)
    );
    assert_eq!(pt.iova_to_phys(iova), None);
    assert_eq!(pt.iova_to_phys(iova + SZ_4K), None);
    drop(pt);
    assert_eq!(mem.in_use(), 0);
}

#[test]
fn pgd_allocation_failure() {
    let mem = HostAllocator::new(Granule::Size4K, 0);
    let r = PageTable::<Arm64LpaeS1, _>::new(Config::new(PANTHOR, 48, 48), &mem, NoFlush);
    assert_eq!(r.err(), Some(Error::NoMemory));
    // 64K tables do not fit 4K slots.
    let r = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_64K, 48, 48), &mem, NoFlush);
    assert_eq!(r.err(), Some(Error::NoMemory));
}

#[test]
fn unencodable_table_address_is_out_of_memory() {
    let mem = HostAllocator::new(Granule::Size4K, 4).with_base(1 << 50);
    let r = PageTable::<Arm64LpaeS1, _>::new(Config::new(PANTHOR, 48, 48), &mem, NoFlush);
    assert_eq!(r.err(), Some(Error::NoMemory));
    assert_eq!(mem.in_use(), 0);
}

#[test]
fn map_range_uses_largest_pages() {
    let mem = HostAllocator::new(Granule::Size4K, 16);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    // 4K pages up to the 2M boundary, one 2M block, then 4K pages.
    let iova = SZ_2M - SZ_4K;
    pt.map(iova, 0x4000_0000 + iova, SZ_2M + 2 * SZ_4K, RW)
        .unwrap();
    let w = pt.walk_ptes(SZ_2M + 5);
    assert_eq!(w.ptes[3], None);
    assert!(pte::is_leaf(w.ptes[2].unwrap(), 2, false));
    let w = pt.walk_ptes(iova);
    assert!(pte::is_leaf(w.ptes[3].unwrap(), 3, false));
    assert_eq!(pt.iova_to_phys(2 * SZ_2M), Some(0x4000_0000 + 2 * SZ_2M));
    // A misaligned physical address forces 4K pages.
    pt.map(SZ_1G, SZ_4K, SZ_2M, RW).unwrap();
    assert!(pt.walk_ptes(SZ_1G).ptes[3].is_some());
    assert_eq!(pt.unmap(SZ_1G, SZ_2M, None), Ok(SZ_2M));
    assert_eq!(
        pt.unmap(iova, SZ_2M + 2 * SZ_4K, None),
        Ok(SZ_2M + 2 * SZ_4K)
    );
    assert_eq!(pt.iova_to_phys(SZ_2M), None);
}

#[test]
fn s1_descriptor_bits_through_walker() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    pt.map_pages(0, 0x1234_5000, SZ_4K, 1, Prot::READ | Prot::CACHE)
        .1
        .unwrap();
    let t = walker::walk(&mem, &s1_regime(&pt), 0x10).unwrap();
    assert_eq!(t.pa, 0x1234_5010);
    let d = t.desc;
    assert_eq!(d & pte::TYPE_MASK, pte::TYPE_PAGE);
    assert_ne!(d & pte::AF, 0);
    assert_ne!(d & pte::NG, 0);
    assert_ne!(d & pte::AP_RDONLY, 0);
    assert_ne!(d & pte::AP_UNPRIV, 0);
    assert_eq!(d & pte::SH_MASK, pte::SH_IS);
    assert_eq!((d & pte::ATTRINDX_MASK) >> 2, pte::ATTR_IDX_CACHE);
    assert_eq!(d & pte::XN, 0);
}

#[test]
fn mali_format_bits_and_levels() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let cfg = Config::new(SZ_4K | SZ_2M | SZ_1G, 32, 40).coherent(true);
    let mut pt = PageTable::<ArmMaliLpae, _, _>::new(cfg, &mem, &rec).unwrap();
    // Always four levels.
    assert_eq!(pt.geometry().start_level(), 0);
    pt.map_pages(0x3000, 0x7000, SZ_4K, 1, RW | Prot::NOEXEC)
        .1
        .unwrap();
    pt.map_pages(SZ_1G, SZ_1G, SZ_1G, 1, Prot::READ).1.unwrap();
    let regime = Regime::from_mali(&pt.mali_lpae_regs()).unwrap();
    let t = walker::walk(&mem, &regime, 0x3008).unwrap();
    assert_eq!((t.pa, t.level), (0x7008, 3));
    assert_eq!(t.desc & 3, 1);
    assert_eq!(t.desc & pte::AF, 0);
    assert_eq!(
        t.desc & (pte::MALI_READ | pte::MALI_WRITE),
        pte::MALI_READ | pte::MALI_WRITE
    );
    assert_eq!(t.desc & pte::XN, pte::XN);
    let t = walker::walk(&mem, &regime, SZ_1G + 5).unwrap();
    assert_eq!((t.pa, t.level, t.size), (SZ_1G + 5, 1, SZ_1G));
    assert_eq!(t.desc & pte::SH_MASK, pte::SH_OS);
    assert_eq!(pt.unmap_pages(0x3000, SZ_4K, 1, None), Ok(SZ_4K));
    assert_eq!(
        walker::walk(&mem, &regime, 0x3008),
        Err(Fault::Translation { level: 3 })
    );
}

#[test]
fn mali_rejects_what_c_rejects() {
    let mem = HostAllocator::new(Granule::Size4K, 2);
    let bad = [
        Config::new(SZ_4K, 49, 40),
        Config::new(SZ_4K, 48, 44),
        Config::new(SZ_64K, 48, 40),
        Config::new(SZ_4K, 48, 40).with_quirks(Quirks::NO_WARN),
    ];
    for cfg in bad {
        let r = PageTable::<ArmMaliLpae, _>::new(cfg, &mem, NoFlush);
        assert_eq!(r.err(), Some(Error::InvalidConfig), "{cfg:?}");
    }
}

#[test]
fn s1_rejects_what_c_rejects() {
    let mem = HostAllocator::new(Granule::Size64K, 2);
    let bad = [
        Config::new(SZ_4K, 48, 33),
        Config::new(SZ_4K, 53, 48),
        Config::new(SZ_2M, 48, 48),
        Config::new(SZ_4K, 48, 48)
            .coherent(true)
            .with_quirks(Quirks::ARM_OUTER_WBWA),
        Config::new(SZ_4K, 48, 48).with_quirks(Quirks::from_bits_retain(1 << 1)),
    ];
    for cfg in bad {
        let r = PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush);
        assert_eq!(r.err(), Some(Error::InvalidConfig), "{cfg:?}");
    }
    // ias above the granule's maximum is capped, not refused.
    let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K, 52, 48), &mem, NoFlush).unwrap();
    assert_eq!(pt.cfg().ias, 48);
}

#[test]
fn noncoherent_walker_sees_only_synced_state() {
    let mem = HostAllocator::new_noncoherent(Granule::Size4K, 16);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 40);
    let regime = s1_regime(&pt);
    pt.map(0x1000, 0x2000, 3 * SZ_4K, RW).unwrap();
    pt.map(SZ_1G, 0, SZ_1G, RW).unwrap();
    for iova in [0x1000, 0x2fff, 0x3000, 0x4000, SZ_1G + 77] {
        check_walker(&pt, &regime, iova);
    }
    // Table descriptors carry the software "synced" bit on the CPU side only.
    let w = pt.walk_ptes(0x1000);
    let l1 = w.ptes[1].unwrap();
    assert_ne!(l1 & pte::SW_SYNC, 0);
    assert_eq!(pt.unmap(0x1000, 3 * SZ_4K, None), Ok(3 * SZ_4K));
    assert_eq!(pt.unmap(SZ_1G, SZ_1G, None), Ok(SZ_1G));
    for iova in [0x1000, 0x3000, SZ_1G + 77] {
        check_walker(&pt, &regime, iova);
    }
    assert!(mem.syncs() > 0);
}

#[test]
fn ttbr1_upper_half() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let cfg = Config::new(PANTHOR, 39, 40).with_quirks(Quirks::ARM_TTBR1);
    let mut pt = PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush).unwrap();
    let top = u64::MAX << 39;
    assert_eq!(
        pt.map_pages(0x1000, 0, SZ_4K, 1, RW),
        (0, Err(Error::OutOfRange))
    );
    pt.map_pages(top | 0x1000, 0x5000, SZ_4K, 1, RW).1.unwrap();
    assert_eq!(pt.iova_to_phys(top | 0x1008), Some(0x5008));
    let regime = Regime::from_s1(&pt.s1_regs(), true).unwrap();
    assert_eq!(
        walker::walk(&mem, &regime, top | 0x1008).unwrap().pa,
        0x5008
    );
    assert_eq!(pt.s1_regs().tcr.tg, 2);
    assert_eq!(pt.unmap_pages(top | 0x1000, SZ_4K, 1, None), Ok(SZ_4K));
}

#[test]
fn drop_flushes_and_frees_everything() {
    let mem = HostAllocator::new(Granule::Size4K, 32);
    let rec = Rec::default();
    {
        let mut pt = s1(&mem, &rec, 48);
        pt.map(0, 0, 3 * SZ_2M + SZ_4K, RW).unwrap();
        pt.map(SZ_1G << 3, 0, SZ_4K, RW).unwrap();
        assert!(mem.in_use() > 4);
        rec.take();
    }
    assert_eq!(rec.take(), [Ev::All]);
    assert_eq!(mem.in_use(), 0);
}

#[test]
fn granule_64k_with_52_bit_output() {
    let mem = HostAllocator::new(Granule::Size64K, 4);
    let cfg = Config::new(SZ_64K | SZ_512M | SZ_4T, 52, 52).coherent(true);
    let mut pt = PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush).unwrap();
    assert_eq!(pt.cfg().pgsize_bitmap, SZ_64K | SZ_512M | SZ_4T);
    let pa = 0x000f_0000_1234_0000;
    pt.map_pages(0x10000, pa, SZ_64K, 1, RW).1.unwrap();
    pt.map_pages(SZ_4T, SZ_4T * 1000, SZ_4T, 1, RW).1.unwrap();
    assert_eq!(pt.iova_to_phys(0x10008), Some(pa + 8));
    let regime = s1_regime(&pt);
    check_walker(&pt, &regime, 0x10008);
    check_walker(&pt, &regime, SZ_4T + 0x1234_5678);
    assert_eq!(pt.s1_regs().tcr.ips, 6);
}

#[test]
fn concurrent_disjoint_maps_share_tables() {
    let mem = HostAllocator::new(Granule::Size4K, 64);
    let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(PANTHOR, 48, 48), &mem, NoFlush).unwrap();
    let threads: u64 = 4;
    let per = if cfg!(miri) { 2 } else { 64 };
    std::thread::scope(|s| {
        for t in 0..threads {
            let pt = &pt;
            s.spawn(move || {
                for i in 0..per {
                    // Interleave pages of all threads in the same level-3 tables, and give
                    // each thread its own 2M region too, so tables are raced for.
                    let iova = (i * threads + t) * SZ_4K;
                    // SAFETY: Each thread maps and unmaps only its own pages, and no
                    // operation unmaps or replaces a table.
                    let (m, r) = unsafe { pt.map_pages_shared(iova, iova + SZ_1G, SZ_4K, 1, RW) };
                    assert_eq!((m, r), (SZ_4K, Ok(())));
                    let blk = SZ_1G * (t + 1) + SZ_2M * i;
                    // SAFETY: As above; the block lies in this thread's own 1G region.
                    let (m, r) = unsafe { pt.map_pages_shared(blk, blk, SZ_2M, 1, RW) };
                    assert_eq!((m, r), (SZ_2M, Ok(())));
                }
                for i in (0..per).step_by(2) {
                    let iova = (i * threads + t) * SZ_4K;
                    // SAFETY: This thread's own page; the level-3 table is not removed.
                    let n = unsafe { pt.unmap_pages_shared(iova, SZ_4K, 1, None) };
                    assert_eq!(n, Ok(SZ_4K));
                }
            });
        }
    });
    for t in 0..threads {
        for i in 0..per {
            let iova = (i * threads + t) * SZ_4K;
            let want = (i % 2 == 1).then_some(iova + SZ_1G);
            assert_eq!(pt.iova_to_phys(iova), want);
            let blk = SZ_1G * (t + 1) + SZ_2M * i;
            assert_eq!(pt.iova_to_phys(blk + 3), Some(blk + 3));
        }
    }
}

#[test]
fn concurrent_table_install_race_noncoherent() {
    // All threads race to create the same intermediate tables; losers free theirs.
    let mem = HostAllocator::new_noncoherent(Granule::Size4K, 64);
    let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(PANTHOR, 48, 48), &mem, NoFlush).unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let pt = &pt;
            s.spawn(move || {
                let iova = (1 << 40) + t * SZ_4K;
                // SAFETY: Distinct pages, nothing is unmapped concurrently.
                let r = unsafe { pt.map_pages_shared(iova, iova, SZ_4K, 1, RW) };
                assert_eq!(r, (SZ_4K, Ok(())));
            });
        }
    });
    // PGD, one table per level below it: no table leaked by the losers.
    assert_eq!(mem.in_use(), 4);
    let regime = s1_regime(&pt);
    for t in 0..3u64 {
        let iova = (1 << 40) + t * SZ_4K + 9;
        check_walker(&pt, &regime, iova);
        assert_eq!(pt.iova_to_phys(iova), Some(iova));
    }
}

/// Host memory that claims it cannot reach a non-coherent walker (like kernel memory that was
/// never DMA-mapped for a device).
struct NoDevice(HostAllocator);

// SAFETY: Forwards to `HostAllocator`, which upholds the contract.
unsafe impl TableAlloc for NoDevice {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        self.0.alloc_table(size)
    }
    unsafe fn free_table(&self, table: TableMem, size: usize) {
        // SAFETY: The caller's guarantees are passed on unchanged.
        unsafe { self.0.free_table(table, size) }
    }
    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        self.0.table_cpu(dev)
    }
    fn sync_for_device(&self, dev: u64, len: usize) {
        self.0.sync_for_device(dev, len)
    }
    fn syncs_for_device(&self) -> bool {
        false
    }
}

#[test]
fn noncoherent_walker_needs_an_allocator_that_syncs() {
    let mem = NoDevice(HostAllocator::new(Granule::Size4K, 4));
    let cfg = Config::new(SZ_4K | SZ_2M, 48, 40);
    assert!(!cfg.coherent_walk);
    assert_eq!(
        PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush).err(),
        Some(Error::InvalidConfig)
    );
    // Refused before anything was allocated.
    assert_eq!(mem.0.in_use(), 0);
    // A coherent walker reads what the CPU wrote: accepted.
    assert!(PageTable::<Arm64LpaeS1, _>::new(cfg.coherent(true), &mem, NoFlush).is_ok());
}

/// Unmap checks and clears leaves a group at a time: a hole or an emptied subtable anywhere in
/// or across groups must still stop it (or take its slow path) at exactly that entry.
#[test]
fn unmap_stops_at_a_hole_wherever_it_lies_in_a_group() {
    for hole in 0..40usize {
        let mem = HostAllocator::new(Granule::Size4K, 8);
        let rec = Rec::default();
        let mut pt = s1(&mem, &rec, 48);
        let base = 7 * SZ_2M;
        pt.map_pages(base, 0x4000_0000, SZ_4K, 40, RW).1.unwrap();
        let at = base + hole as u64 * SZ_4K;
        assert_eq!(pt.unmap_pages(at, SZ_4K, 1, None), Ok(SZ_4K));
        // From the start: everything before the hole, nothing of what follows it.
        assert_eq!(
            pt.unmap_pages(base, SZ_4K, 40, None),
            Ok(hole as u64 * SZ_4K),
            "hole at {hole}"
        );
        for i in 0..40u64 {
            let mapped = pt.iova_to_phys(base + i * SZ_4K).is_some();
            assert_eq!(mapped, i > hole as u64, "hole at {hole}, page {i}");
        }
        // The rest, after the hole.
        let rest = 39 - hole as u64;
        if rest > 0 {
            assert_eq!(
                pt.unmap_pages(at + SZ_4K, SZ_4K, rest as usize, None),
                Ok(rest * SZ_4K)
            );
        }
        assert!((0..40).all(|i| pt.iova_to_phys(base + i * SZ_4K).is_none()));
    }
}

/// The same for 2M blocks, with a table descriptor (an emptied level-3 table) in a group:
/// the unmap takes it and its subtree away too, as the entry-by-entry path always did.
#[test]
fn unmap_of_blocks_takes_an_empty_table_inside_a_group() {
    let mem = HostAllocator::new(Granule::Size4K, 16);
    let rec = Rec::default();
    let mut pt = s1(&mem, &rec, 48);
    let base = 3 * SZ_1G;
    // Blocks 0..16 except 5, where a 4K page is mapped and unmapped again: an empty table.
    for i in (0..16u64).filter(|&i| i != 5) {
        pt.map_pages(base + i * SZ_2M, i * SZ_2M, SZ_2M, 1, RW)
            .1
            .unwrap();
    }
    pt.map_pages(base + 5 * SZ_2M, 0, SZ_4K, 1, RW).1.unwrap();
    assert_eq!(pt.unmap_pages(base + 5 * SZ_2M, SZ_4K, 1, None), Ok(SZ_4K));
    let tables = mem.in_use();
    assert_eq!(pt.unmap_pages(base, SZ_2M, 16, None), Ok(16 * SZ_2M));
    assert_eq!(mem.in_use(), tables - 1);
    assert!((0..16).all(|i| pt.iova_to_phys(base + i * SZ_2M).is_none()));
}

/// Mali leaves are block-typed at every level: the group test must take them as leaves (and
/// still stop at a hole).
#[test]
fn mali_unmap_clears_groups_and_stops_at_a_hole() {
    let mem = HostAllocator::new(Granule::Size4K, 8);
    let rec = Rec::default();
    let cfg = Config::new(SZ_4K | SZ_2M | SZ_1G, 32, 40).coherent(true);
    let mut pt = PageTable::<ArmMaliLpae, _, _>::new(cfg, &mem, &rec).unwrap();
    pt.map_pages(0, 0x10_0000, SZ_4K, 24, RW).1.unwrap();
    assert_eq!(pt.unmap_pages(19 * SZ_4K, SZ_4K, 1, None), Ok(SZ_4K));
    assert_eq!(pt.unmap_pages(0, SZ_4K, 24, None), Ok(19 * SZ_4K));
    assert_eq!(pt.iova_to_phys(20 * SZ_4K), Some(0x10_0000 + 20 * SZ_4K));
    assert_eq!(pt.unmap_pages(20 * SZ_4K, SZ_4K, 4, None), Ok(4 * SZ_4K));
    assert!((0..24).all(|i| pt.iova_to_phys(i * SZ_4K).is_none()));
}
