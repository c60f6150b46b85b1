// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Side-by-side benchmark with `aarch64-paging` (same machine, same run): mapping and
//! unmapping 1 GiB as 4K pages and as 2M blocks into a fresh table, and the latency of
//! mapping plus unmapping one 4K page in a table whose intermediate levels exist.
//!
//! Both build AArch64 stage-1 tables with a 4K granule and a level-1 root (39-bit input);
//! table memory is zeroed on allocation in both. Table creation and teardown are outside the
//! timed region. Run with `cargo bench -p gpukit-io-pgtable --bench vs_aarch64_paging`.
//!
//! For unmapping there are two io-pgtable rows: `unmap_pages` with the mapping's page size
//! (every leaf cleared, as the kernel's IOMMU core does when told the page size) and the
//! `unmap` range helper, which like `aarch64-paging`'s invalidation of a range drops whole
//! level-3 tables.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
use aarch64_paging::Mapping;
use criterion::{criterion_group, criterion_main, Criterion};
use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::{Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_1G, SZ_2M, SZ_4K};

type Peer = Mapping<IdTranslation<El1Attributes>, El1And0>;
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

fn peer() -> Peer {
    Peer::with_asid_and_va_range(IdTranslation::new(), 0, 1, El1And0, VaRange::Lower)
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

fn peer_map(p: &mut Peer, pgsize: u64) {
    p.map_range(
        &range(),
        PhysicalAddress(PA as usize),
        peer_flags(),
        constraints(pgsize),
    )
    .unwrap();
}

fn peer_unmap(p: &mut Peer, pgsize: u64) {
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
    for (name, pgsize) in [("4k", SZ_4K), ("2m", SZ_2M)] {
        let mut g = c.benchmark_group(format!("map_1g_{name}"));
        g.sample_size(10);
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
                    let mut p = peer();
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
        g.sample_size(10);
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
                    let mut p = peer();
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
    let mut p = peer();
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

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bulk, single
}
criterion_main!(benches);
