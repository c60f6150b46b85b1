// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Model-based property test of block splitting and table reservations (issue 39).
//!
//! A window of 8 MiB (four 2M blocks) starts with random mappings, blocks among them. Then a
//! random batch of maps and `unmap_split`s is planned: its tables are counted with
//! `tables_to_map` / `tables_to_split` and reserved, the allocator is made to refuse every
//! allocation, and the batch runs through the `Reservation`. Checked: no step fails for want
//! of memory, no step takes more tables than its own bound, the allocator is never asked, and
//! after every step each 4K page of the window translates as a reference model says (through
//! `iova_to_phys` and the independent walker). Splits never fail with `PartialBlock`.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::walker::{self, Regime};
use io_pgtable::{
    Arm64LpaeS1, Config, Error, NoFlush, PageTable, Prot, TableAlloc, TableMem, SZ_2M, SZ_4K,
};
use proptest::prelude::*;

const WINDOW_PAGES: u64 = 2048;
const WINDOW_BASE: u64 = 0x4000_0000;

/// Host memory that refuses every allocation once told to, and counts what it was asked.
struct Exhaustible {
    mem: HostAllocator,
    dry: AtomicBool,
    asked_while_dry: AtomicUsize,
}

// SAFETY: Forwards to `HostAllocator`, which upholds the contract (refusing is allowed).
unsafe impl TableAlloc for Exhaustible {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        if self.dry.load(Ordering::Relaxed) {
            self.asked_while_dry.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        self.mem.alloc_table(size)
    }
    unsafe fn free_table(&self, table: TableMem, size: usize) {
        // SAFETY: The caller's guarantees are passed on unchanged.
        unsafe { self.mem.free_table(table, size) }
    }
    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        self.mem.table_cpu(dev)
    }
    fn sync_for_device(&self, dev: u64, len: usize) {
        self.mem.sync_for_device(dev, len)
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// `map()` of `pages` pages; `pa_aligned` keeps the physical address congruent with the
    /// IOVA modulo 2M (so blocks are used).
    Map {
        page: u64,
        pages: u64,
        pa_page: u64,
        pa_aligned: bool,
    },
    /// `unmap_split()` of `pages` pages.
    Split { page: u64, pages: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            0..WINDOW_PAGES,
            1..=1200u64,
            0..(1u64 << 20),
            prop::bool::weighted(0.8)
        )
            .prop_map(|(page, pages, pa_page, pa_aligned)| Step::Map {
                page,
                pages,
                pa_page,
                pa_aligned
            }),
        (0..WINDOW_PAGES, 1..=600u64).prop_map(|(page, pages)| Step::Split { page, pages }),
        // Across a block boundary, ends near it (inside blocks when they are mapped so).
        (1..4u64, 1..64u64, 1..64u64).prop_map(|(block, before, after)| Step::Split {
            page: block * 512 - before,
            pages: before + after,
        }),
    ]
}

fn iova_of(page: u64) -> u64 {
    WINDOW_BASE + page * SZ_4K
}

/// Page in the window -> physical address.
type Model = BTreeMap<u64, u64>;

fn pa_for(page: u64, pa_page: u64, aligned: bool) -> u64 {
    let pa = pa_page * SZ_4K;
    if aligned {
        (pa & !(SZ_2M - 1)) | (iova_of(page) & (SZ_2M - 1))
    } else {
        pa
    }
}

fn check_all(
    pt: &PageTable<Arm64LpaeS1, &Exhaustible>,
    mem: &Exhaustible,
    regime: &Regime,
    model: &Model,
) -> Result<(), TestCaseError> {
    let step = if cfg!(miri) { 61 } else { 1 };
    for page in (0..WINDOW_PAGES).step_by(step) {
        let iova = iova_of(page) + 0x7f8;
        let want = model.get(&page).map(|pa| pa + 0x7f8);
        prop_assert_eq!(pt.iova_to_phys(iova), want, "iova_to_phys({:#x})", iova);
        let walked = walker::walk(&mem.mem, regime, iova).ok().map(|t| t.pa);
        prop_assert_eq!(walked, want, "walker({:#x})", iova);
    }
    Ok(())
}

/// Maps of whole blocks for the starting state (so that splits have blocks to cut).
fn blocks() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (0..4u64, 1..=4u64, 0..(1u64 << 8)).prop_map(|(block, n, pa_block)| Step::Map {
            page: block * 512,
            pages: n * 512,
            pa_page: pa_block * 512,
            pa_aligned: true,
        }),
        0..3,
    )
}

fn run(before: Vec<Step>, batch: Vec<Step>, coherent: bool) -> Result<(), TestCaseError> {
    let host = if coherent {
        HostAllocator::new(Granule::Size4K, 64)
    } else {
        HostAllocator::new_noncoherent(Granule::Size4K, 64)
    };
    let mem = Exhaustible {
        mem: host,
        dry: AtomicBool::new(false),
        asked_while_dry: AtomicUsize::new(0),
    };
    let cfg = Config::new(SZ_4K | SZ_2M, 32, 40).coherent(coherent);
    let mut pt = PageTable::<Arm64LpaeS1, _>::new(cfg, &mem, NoFlush).unwrap();
    let regime = Regime::from_s1(&pt.s1_regs(), false).unwrap();
    let mut model = Model::new();
    // The state the batch meets: maps that fit, blocks where the phase allows.
    for s in before {
        if let Step::Map {
            page,
            pages,
            pa_page,
            pa_aligned,
        } = s
        {
            let pages = pages.min(WINDOW_PAGES - page);
            if (page..page + pages).any(|p| model.contains_key(&p)) {
                continue;
            }
            let pa = pa_for(page, pa_page, pa_aligned);
            pt.map(iova_of(page), pa, pages * SZ_4K, Prot::READ | Prot::WRITE)
                .unwrap();
            for i in 0..pages {
                model.insert(page + i, pa + i * SZ_4K);
            }
        }
    }
    // Plan: each step's bound, the sum reserved.
    let bound = |pt: &PageTable<Arm64LpaeS1, &Exhaustible>, s: &Step| match *s {
        Step::Map {
            page,
            pages,
            pa_page,
            pa_aligned,
        } => {
            let pages = pages.min(WINDOW_PAGES - page);
            pt.tables_to_map(
                iova_of(page),
                pa_for(page, pa_page, pa_aligned),
                pages * SZ_4K,
            )
        }
        Step::Split { page, pages } => {
            pt.tables_to_split(iova_of(page), pages.min(WINDOW_PAGES - page) * SZ_4K)
        }
    };
    let bounds: Vec<usize> = batch.iter().map(|s| bound(&pt, s)).collect();
    let need: usize = bounds.iter().sum();
    let mut res = pt.reserve_tables(need).unwrap();
    mem.dry.store(true, Ordering::Relaxed);
    for (s, b) in batch.into_iter().zip(bounds) {
        let left = res.remaining();
        match s {
            Step::Map {
                page,
                pages,
                pa_page,
                pa_aligned,
            } => {
                let pages = pages.min(WINDOW_PAGES - page);
                let pa = pa_for(page, pa_page, pa_aligned);
                let r = res.map(iova_of(page), pa, pages * SZ_4K, Prot::READ);
                if (page..page + pages).any(|p| model.contains_key(&p)) {
                    prop_assert_eq!(r, Err(Error::Exists));
                } else {
                    prop_assert_eq!(r, Ok(()));
                    for i in 0..pages {
                        model.insert(page + i, pa + i * SZ_4K);
                    }
                }
            }
            Step::Split { page, pages } => {
                let pages = pages.min(WINDOW_PAGES - page);
                let n = res.unmap_split(iova_of(page), pages * SZ_4K, None);
                let n = match n {
                    Ok(n) => n,
                    Err(e) => return Err(TestCaseError::fail(format!("unmap_split: {e:?}"))),
                };
                prop_assert!(n <= pages * SZ_4K && n % SZ_4K == 0);
                if model.contains_key(&page) {
                    prop_assert!(n > 0);
                }
                for p in page..page + n / SZ_4K {
                    model.remove(&p);
                }
            }
        }
        let used = left - res.remaining();
        prop_assert!(used <= b, "a step took {} tables, bound {}", used, b);
        check_all(&res, &mem, &regime, &model)?;
    }
    drop(res);
    prop_assert_eq!(mem.asked_while_dry.load(Ordering::Relaxed), 0);
    prop_assert_eq!(pt.reserved_tables(), 0);
    drop(pt);
    prop_assert_eq!(mem.mem.in_use(), 0);
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 1 } else { 128 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn steps(max: usize) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(step(), 0..if cfg!(miri) { 3 } else { max })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reserved_split_batches_match_model(
        before in (blocks(), steps(8)).prop_map(|(mut b, s)| { b.extend(s); b }),
        batch in steps(16),
        coherent in any::<bool>(),
    ) {
        run(before, batch, coherent)?;
    }
}
