// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Side-by-side benchmark with `aarch64-paging` (same machine, same run): mapping and
//! unmapping 1 GiB as 4K pages and as 2M blocks into a fresh table, and the latency of
//! mapping plus unmapping one 4K page in a table whose intermediate levels exist.
//!
//! Both build AArch64 stage-1 tables with a 4K granule and a level-1 root (39-bit input).
//! Table creation and teardown are outside the timed region. Run with
//! `cargo bench -p gpukit-io-pgtable --bench vs_aarch64_paging` (or all peers at once with
//! `cargo xtask bench`).
//!
//! # Same memory policy on both sides
//!
//! Our tables come from a [`HostAllocator`]: one arena, allocated and touched once, whose
//! slots are zeroed when they are handed out again. The peer gets the same through its
//! allocator hook ([`Translation`]): [`PoolTranslation`] hands out 4K pages of one arena,
//! allocated and touched once, zeroing a page when it is reused. Neither side calls the
//! global allocator or takes a page fault in the timed region. (With `IdTranslation`, the
//! peer's default, every table is a fresh global allocation whose pages glibc returns to the
//! kernel between iterations, so most of the peer's time would be page faults.)
//!
//! For unmapping there are two io-pgtable rows: `unmap_pages` with the mapping's page size
//! (as the kernel's IOMMU core does when told the page size) and the `unmap` range helper,
//! which picks the largest size the range allows and so drops whole level-3 tables.
//!
//! # Floors
//!
//! `floor_1g_4k/zero_and_write` is what mapping 1 GiB of 4K pages costs at the least on this
//! machine with that memory policy: 512 recycled 4K tables zeroed and then every one of their
//! 262 144 descriptors written once, with plain stores and nothing else (no walk, no checks).
//! `floor_1g_4k/clear` is the least an unmap that clears every leaf can cost: every
//! descriptor of the 512 tables stored once as zero.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::cell::RefCell;
use std::ptr::NonNull;

use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::paging::{
    Constraints, El1And0, MemoryRegion, PageTable as PeerTable, Translation, VaRange,
};
use aarch64_paging::Mapping;
use criterion::{criterion_group, criterion_main, Criterion};
use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::{Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_1G, SZ_2M, SZ_4K};

type Peer<'a> = Mapping<PoolTranslation<'a>, El1And0>;

/// A pool of 4K table pages for the peer, with the policy of our [`HostAllocator`]: one
/// arena allocated and touched up front, pages zeroed when handed out again.
struct Pool {
    pages: *mut Page,
    len: usize,
    free: Vec<usize>,
    dirty: Vec<bool>,
}

#[derive(Clone)]
#[repr(C, align(4096))]
struct Page([u8; 4096]);

impl Pool {
    fn new(len: usize) -> Self {
        // `vec!` clones the page into every element: each page is written (touched) now, so
        // no page fault lands in a timed region.
        let pages = Box::into_raw(vec![Page([0; 4096]); len].into_boxed_slice()).cast::<Page>();
        Pool {
            pages,
            len,
            free: (0..len).rev().collect(),
            dirty: vec![false; len],
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let all = std::ptr::slice_from_raw_parts_mut(self.pages, self.len);
        // SAFETY: `all` is the boxed slice `new` leaked; the peer's tables are gone.
        drop(unsafe { Box::from_raw(all) });
    }
}

/// The peer's allocator hook over a [`Pool`] (identity-mapped, as `IdTranslation`).
struct PoolTranslation<'a>(&'a RefCell<Pool>);

impl Translation<El1Attributes> for PoolTranslation<'_> {
    fn allocate_table(&mut self) -> (NonNull<PeerTable<El1Attributes>>, PhysicalAddress) {
        let mut pool = self.0.borrow_mut();
        let i = pool.free.pop().expect("peer pool exhausted");
        let p = pool.pages.wrapping_add(i);
        if std::mem::replace(&mut pool.dirty[i], true) {
            // SAFETY: Page `i` is inside the pool and free, so nothing else uses it.
            unsafe { p.write_bytes(0, 1) };
        }
        let t = NonNull::new(p.cast::<PeerTable<El1Attributes>>()).unwrap();
        (t, PhysicalAddress(p as usize))
    }

    unsafe fn deallocate_table(&mut self, table: NonNull<PeerTable<El1Attributes>>) {
        let mut pool = self.0.borrow_mut();
        let i = (table.as_ptr() as usize - pool.pages as usize) / 4096;
        pool.free.push(i);
    }

    fn physical_to_virtual(&self, pa: PhysicalAddress) -> NonNull<PeerTable<El1Attributes>> {
        NonNull::new(pa.0 as *mut PeerTable<El1Attributes>).unwrap()
    }
}
type Ours<'a> = PageTable<Arm64LpaeS1, &'a HostAllocator>;

const LEN: u64 = SZ_1G;
const PA: u64 = 4 * SZ_1G;

/// Start of the mapped range: 2M- but not 1G-aligned, so that neither side can use a 1G
/// block when mapping with 2M blocks (the range holds no aligned 1G chunk).
const IOVA: u64 = SZ_1G + SZ_2M;

fn prot() -> Prot {
    Prot::READ | Prot::WRITE | Prot::CACHE
}

fn peer_flags() -> El1Attributes {
    El1Attributes::VALID
        | El1Attributes::ATTRIBUTE_INDEX_1
        | El1Attributes::INNER_SHAREABLE
        | El1Attributes::USER
        | El1Attributes::ACCESSED
        | El1Attributes::NON_GLOBAL
}

fn ours(mem: &HostAllocator) -> Ours<'_> {
    let cfg = Config::new(SZ_4K | SZ_2M | SZ_1G, 39, 48).coherent(true);
    PageTable::new(cfg, mem, NoFlush).unwrap()
}

fn peer(pool: &RefCell<Pool>) -> Peer<'_> {
    Peer::with_asid_and_va_range(PoolTranslation(pool), 0, 1, El1And0, VaRange::Lower)
}

fn ours_map(pt: &mut Ours<'_>, pgsize: u64) {
    let mut done = 0;
    while done < LEN {
        let count = ((LEN - done) / pgsize) as usize;
        let (m, r) = pt.map_pages(IOVA + done, PA + done, pgsize, count, prot());
        r.unwrap();
        done += m;
    }
}

fn ours_unmap(pt: &mut Ours<'_>, pgsize: u64) {
    let mut done = 0;
    while done < LEN {
        let count = ((LEN - done) / pgsize) as usize;
        done += pt.unmap_pages(IOVA + done, pgsize, count, None).unwrap();
    }
}

fn range() -> MemoryRegion {
    MemoryRegion::new(IOVA as usize, (IOVA + LEN) as usize)
}

fn constraints(pgsize: u64) -> Constraints {
    if pgsize == SZ_4K {
        Constraints::NO_BLOCK_MAPPINGS
    } else {
        Constraints::empty()
    }
}

fn peer_map(p: &mut Peer<'_>, pgsize: u64) {
    p.map_range(
        &range(),
        PhysicalAddress(PA as usize),
        peer_flags(),
        constraints(pgsize),
    )
    .unwrap();
}

fn peer_unmap(p: &mut Peer<'_>, pgsize: u64) {
    p.map_range(
        &range(),
        PhysicalAddress(PA as usize),
        El1Attributes::empty(),
        constraints(pgsize),
    )
    .unwrap();
}

fn bulk(c: &mut Criterion) {
    let mem = HostAllocator::new(Granule::Size4K, 1024);
    let pool = RefCell::new(Pool::new(1024));
    for (name, pgsize) in [("4k", SZ_4K), ("2m", SZ_2M)] {
        let mut g = c.benchmark_group(format!("map_1g_{name}"));
        g.bench_function("io-pgtable", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut pt = ours(&mem);
                    let t = Instant::now();
                    ours_map(&mut pt, pgsize);
                    total += t.elapsed();
                    black_box(&pt);
                }
                total
            })
        });
        g.bench_function("aarch64-paging", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut p = peer(&pool);
                    let t = Instant::now();
                    peer_map(&mut p, pgsize);
                    total += t.elapsed();
                    black_box(&p);
                }
                total
            })
        });
        g.finish();

        let mut g = c.benchmark_group(format!("unmap_1g_{name}"));
        g.bench_function("io-pgtable", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut pt = ours(&mem);
                    ours_map(&mut pt, pgsize);
                    let t = Instant::now();
                    ours_unmap(&mut pt, pgsize);
                    total += t.elapsed();
                    black_box(&pt);
                }
                total
            })
        });
        // `unmap()` (as `iommu_unmap()`): picks the largest size the IOVA allows, so it
        // removes whole level-3 tables as `aarch64-paging` does when it invalidates a range.
        g.bench_function("io-pgtable-range", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut pt = ours(&mem);
                    ours_map(&mut pt, pgsize);
                    let t = Instant::now();
                    assert_eq!(pt.unmap(IOVA, LEN, None), Ok(LEN));
                    total += t.elapsed();
                    black_box(&pt);
                }
                total
            })
        });
        g.bench_function("aarch64-paging", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut p = peer(&pool);
                    peer_map(&mut p, pgsize);
                    let t = Instant::now();
                    peer_unmap(&mut p, pgsize);
                    total += t.elapsed();
                    black_box(&p);
                }
                total
            })
        });
        g.finish();
    }
}

fn single(c: &mut Criterion) {
    let mem = HostAllocator::new(Granule::Size4K, 16);
    let pool = RefCell::new(Pool::new(16));
    let mut g = c.benchmark_group("map_unmap_one_4k");
    let mut pt = ours(&mem);
    // Create the intermediate tables once.
    pt.map_pages(IOVA, PA, SZ_4K, 2, prot()).1.unwrap();
    g.bench_function("io-pgtable", |b| {
        b.iter(|| {
            let (m, r) = pt.map_pages(black_box(IOVA + 0x10_0000), PA, SZ_4K, 1, prot());
            r.unwrap();
            assert_eq!(pt.unmap_pages(IOVA + 0x10_0000, SZ_4K, 1, None), Ok(m));
        })
    });
    let mut p = peer(&pool);
    p.map_range(
        &MemoryRegion::new(IOVA as usize, (IOVA + 2 * SZ_4K) as usize),
        PhysicalAddress(PA as usize),
        peer_flags(),
        Constraints::NO_BLOCK_MAPPINGS,
    )
    .unwrap();
    g.bench_function("aarch64-paging", |b| {
        let va = (IOVA + 0x10_0000) as usize;
        let r = MemoryRegion::new(va, va + SZ_4K as usize);
        b.iter(|| {
            p.map_range(
                black_box(&r),
                PhysicalAddress(PA as usize),
                peer_flags(),
                Constraints::NO_BLOCK_MAPPINGS,
            )
            .unwrap();
            p.map_range(
                &r,
                PhysicalAddress(PA as usize),
                El1Attributes::empty(),
                Constraints::NO_BLOCK_MAPPINGS,
            )
            .unwrap();
        })
    });
    g.finish();
}

/// The floors of mapping and unmapping 1 GiB of 4K pages (see the module docs).
fn floors(c: &mut Criterion) {
    const TABLES: usize = (LEN / SZ_2M) as usize;
    let mem = HostAllocator::new(Granule::Size4K, TABLES);
    let mut g = c.benchmark_group("floor_1g_4k");
    // The same arena memory our tables live in, as plain words.
    let words: &mut [u64] = {
        let t = io_pgtable::TableAlloc::alloc_table(&mem, 4096).unwrap();
        // SAFETY: The arena holds `TABLES` contiguous 4K slots starting at slot 0, which `t`
        // is; nothing else uses the arena while this benchmark runs.
        unsafe { std::slice::from_raw_parts_mut(t.cpu.as_ptr().cast::<u64>(), TABLES * 512) }
    };
    let attrs = 0x0040_0000_0000_0743u64;
    g.bench_function("zero_and_write", |b| {
        b.iter(|| {
            for t in words.chunks_exact_mut(512) {
                t.fill(0);
                black_box(&mut *t);
                let mut pa = PA;
                for w in t.iter_mut() {
                    *w = attrs | pa;
                    pa += SZ_4K;
                }
            }
            black_box(&mut *words);
        })
    });
    g.bench_function("clear", |b| {
        b.iter(|| {
            words.fill(0);
            black_box(&mut *words);
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bulk, single, floors
}
criterion_main!(benches);
