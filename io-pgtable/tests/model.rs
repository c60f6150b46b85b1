// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Model-based property test: random map/unmap sequences against a reference model of the
//! address space (one entry per 4K page), checked after every step through `iova_to_phys`
//! and through the independent walker reading the tables by device address.
//!
//! The model predicts exactly: whether a map succeeds or fails with `EEXIST` (it fails iff
//! any page of the range is mapped, and then changes nothing), how many bytes `map_pages`
//! maps (up to the end of the leaf table), and that unmapping exactly a range mapped earlier
//! unmaps all of it. For arbitrary unmaps it checks that exactly the reported prefix was
//! unmapped and nothing else changed.

use std::collections::BTreeMap;

use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::walker::{self, Regime};
use io_pgtable::{
    Arm64LpaeS1, ArmMaliLpae, Config, Error, Format, NoFlush, PageTable, Prot, SZ_2M, SZ_4K,
};
use proptest::prelude::*;

/// Pages in the tested window (8 MiB: four 2M blocks).
const WINDOW_PAGES: u64 = 2048;
/// Offset of the window in the IOVA space (not at 0, and crossing no 1G boundary).
const WINDOW_BASE: u64 = 0x4000_0000;

#[derive(Clone, Debug)]
enum Op {
    /// `map()` of `pages` pages; `pa_aligned` keeps the physical address congruent with the
    /// IOVA modulo 2M so that blocks are used.
    Map {
        page: u64,
        pages: u64,
        pa_page: u64,
        pa_aligned: bool,
        write: bool,
    },
    /// Raw `map_pages()` of 4K pages or 2M blocks.
    MapPages {
        page: u64,
        count: usize,
        block: bool,
        pa_page: u64,
    },
    /// `unmap()` of an arbitrary range.
    Unmap { page: u64, pages: u64 },
    /// Raw `unmap_pages()`.
    UnmapPages {
        page: u64,
        count: usize,
        block: bool,
    },
    /// `unmap()` of exactly the n-th live region mapped earlier.
    UnmapRegion { n: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..WINDOW_PAGES, 1..=1024u64, 0..(1u64 << 20), any::<bool>(), any::<bool>()).prop_map(
            |(page, pages, pa_page, pa_aligned, write)| Op::Map { page, pages, pa_page, pa_aligned, write }
        ),
        2 => (0..WINDOW_PAGES, 1..700usize, any::<bool>(), 0..(1u64 << 20)).prop_map(
            |(page, count, block, pa_page)| Op::MapPages { page, count, block, pa_page }
        ),
        2 => (0..WINDOW_PAGES, 1..=1024u64).prop_map(|(page, pages)| Op::Unmap { page, pages }),
        1 => (0..WINDOW_PAGES, 1..700usize, any::<bool>()).prop_map(
            |(page, count, block)| Op::UnmapPages { page, count, block }
        ),
        2 => (0..64usize).prop_map(|n| Op::UnmapRegion { n }),
    ]
}

/// The reference: page index in the window -> physical address of that page.
#[derive(Default)]
struct Model {
    pages: BTreeMap<u64, u64>,
    /// Ranges (first page, page count) mapped by one successful call and untouched since.
    regions: Vec<(u64, u64)>,
}

impl Model {
    fn any_mapped(&self, first: u64, n: u64) -> bool {
        self.pages.range(first..first + n).next().is_some()
    }

    fn insert(&mut self, first: u64, n: u64, pa: u64) {
        for i in 0..n {
            self.pages.insert(first + i, pa + i * SZ_4K);
        }
        self.regions.push((first, n));
    }

    fn remove(&mut self, first: u64, n: u64) {
        for i in first..first + n {
            self.pages.remove(&i);
        }
        self.regions
            .retain(|&(a, len)| a + len <= first || first + n <= a);
    }
}

fn iova_of(page: u64) -> u64 {
    WINDOW_BASE + page * SZ_4K
}

/// Compares every page of the window with the model, through `iova_to_phys` and the walker.
fn check_all<F: Format>(
    pt: &PageTable<F, &HostAllocator>,
    mem: &HostAllocator,
    regime: &Regime,
    model: &Model,
) -> Result<(), TestCaseError> {
    let step = if cfg!(miri) { 61 } else { 1 };
    for page in (0..WINDOW_PAGES).step_by(step) {
        let off = ((page * 40) % SZ_4K) & !7;
        let iova = iova_of(page) + off;
        let want = model.pages.get(&page).map(|pa| pa + off);
        prop_assert_eq!(pt.iova_to_phys(iova), want, "iova_to_phys({:#x})", iova);
        let walked = walker::walk(mem, regime, iova).ok().map(|t| t.pa);
        prop_assert_eq!(walked, want, "walker({:#x})", iova);
    }
    Ok(())
}

/// Checks the effect of an unmap that reported `n` bytes from `page`.
fn check_unmapped_prefix<F: Format>(
    pt: &PageTable<F, &HostAllocator>,
    model: &mut Model,
    page: u64,
    n: u64,
    asked: u64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(n % SZ_4K, 0);
    prop_assert!(n <= asked, "unmapped {:#x} of {:#x}", n, asked);
    let pages = n / SZ_4K;
    for p in page..page + pages {
        prop_assert_eq!(pt.iova_to_phys(iova_of(p)), None);
    }
    model.remove(page, pages);
    Ok(())
}

fn run<F: Format>(
    ops: Vec<Op>,
    coherent: bool,
    regime_of: fn(&PageTable<F, &HostAllocator>) -> Regime,
) -> Result<(), TestCaseError> {
    let mem = if coherent {
        HostAllocator::new(Granule::Size4K, 16)
    } else {
        HostAllocator::new_noncoherent(Granule::Size4K, 16)
    };
    let cfg = Config::new(SZ_4K | SZ_2M, 32, 40).coherent(coherent);
    let mut pt = PageTable::<F, _>::new(cfg, &mem, NoFlush).unwrap();
    let regime = regime_of(&pt);
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Map {
                page,
                pages,
                pa_page,
                pa_aligned,
                write,
            } => {
                let pages = pages.min(WINDOW_PAGES - page);
                let mut pa = pa_page * SZ_4K;
                if pa_aligned {
                    pa = (pa & !(SZ_2M - 1)) | (iova_of(page) & (SZ_2M - 1));
                }
                let prot = if write {
                    Prot::READ | Prot::WRITE
                } else {
                    Prot::READ
                };
                let res = pt.map(iova_of(page), pa, pages * SZ_4K, prot);
                if model.any_mapped(page, pages) {
                    prop_assert_eq!(res, Err(Error::Exists));
                } else {
                    prop_assert_eq!(res, Ok(()));
                    model.insert(page, pages, pa);
                }
            }
            Op::MapPages {
                page,
                count,
                block,
                pa_page,
            } => {
                let (pgsize, page) = if block {
                    (SZ_2M, page & !511)
                } else {
                    (SZ_4K, page)
                };
                let per = pgsize / SZ_4K;
                // Leaves of one table: up to the next 2M (4K pages) or 1G (2M blocks) boundary,
                // and the test keeps inside the window.
                let table_span = if block { 1 << 30 } else { SZ_2M };
                let iova = iova_of(page);
                let to_end = (table_span - (iova & (table_span - 1))) / pgsize;
                let in_window = (WINDOW_PAGES - page) / per;
                let count = (count as u64).min(in_window);
                if count == 0 {
                    continue;
                }
                let pa = (pa_page * SZ_4K) & !(pgsize - 1);
                let expect_n = count.min(to_end);
                let (mapped, res) =
                    pt.map_pages(iova, pa, pgsize, count as usize, Prot::READ | Prot::WRITE);
                if model.any_mapped(page, expect_n * per) {
                    prop_assert_eq!((mapped, res), (0, Err(Error::Exists)));
                } else {
                    prop_assert_eq!((mapped, res), (expect_n * pgsize, Ok(())));
                    model.insert(page, expect_n * per, pa);
                }
            }
            Op::Unmap { page, pages } => {
                let pages = pages.min(WINDOW_PAGES - page);
                let before = model.pages.clone();
                match pt.unmap(iova_of(page), pages * SZ_4K, None) {
                    Ok(n) => check_unmapped_prefix(&pt, &mut model, page, n, pages * SZ_4K)?,
                    Err(e) => {
                        prop_assert_eq!(e, Error::PartialBlock);
                        prop_assert_eq!(&model.pages, &before);
                    }
                }
            }
            Op::UnmapPages { page, count, block } => {
                let (pgsize, page) = if block {
                    (SZ_2M, page & !511)
                } else {
                    (SZ_4K, page)
                };
                let per = pgsize / SZ_4K;
                let count = (count as u64).min((WINDOW_PAGES - page) / per);
                if count == 0 {
                    continue;
                }
                match pt.unmap_pages(iova_of(page), pgsize, count as usize, None) {
                    Ok(n) => check_unmapped_prefix(&pt, &mut model, page, n, count * pgsize)?,
                    Err(e) => prop_assert_eq!(e, Error::PartialBlock),
                }
            }
            Op::UnmapRegion { n } => {
                if model.regions.is_empty() {
                    continue;
                }
                let (page, pages) = model.regions[n % model.regions.len()];
                let res = pt.unmap(iova_of(page), pages * SZ_4K, None);
                prop_assert_eq!(res, Ok(pages * SZ_4K));
                model.remove(page, pages);
            }
        }
        check_all(&pt, &mem, &regime, &model)?;
    }
    drop(pt);
    prop_assert_eq!(mem.in_use(), 0);
    Ok(())
}

fn s1_regime(pt: &PageTable<Arm64LpaeS1, &HostAllocator>) -> Regime {
    Regime::from_s1(&pt.s1_regs(), false).unwrap()
}

fn mali_regime(pt: &PageTable<ArmMaliLpae, &HostAllocator>) -> Regime {
    Regime::from_mali(&pt.mali_lpae_regs()).unwrap()
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 1 } else { 96 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..if cfg!(miri) { 4 } else { 32 })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn s1_matches_model(ops in ops(), coherent in any::<bool>()) {
        run::<Arm64LpaeS1>(ops, coherent, s1_regime)?;
    }

    #[test]
    fn mali_matches_model(ops in ops(), coherent in any::<bool>()) {
        run::<ArmMaliLpae>(ops, coherent, mali_regime)?;
    }
}
