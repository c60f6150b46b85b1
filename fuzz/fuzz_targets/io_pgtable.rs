// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `io-pgtable` map/unmap sequences (ARM_64_LPAE_S1 and ARM_MALI_LPAE, 4K pages and 2M blocks)
//! against a model of the address space: one entry per 4K page of an 8 MiB window.
//!
//! Checked after every step: a map succeeds iff no page of its range is mapped (and fails with
//! `EEXIST` changing nothing otherwise), an unmap removes exactly the prefix it reports, and
//! `iova_to_phys` agrees with the model on every page touched. At the end every table page is
//! given back.

#![no_main]

use std::collections::BTreeMap;

use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::{
    Arm64LpaeS1, ArmMaliLpae, Config, Error, Format, NoFlush, PageTable, Prot, SZ_2M, SZ_4K,
};
use libfuzzer_sys::fuzz_target;

const WINDOW_PAGES: u64 = 2048;
const WINDOW_BASE: u64 = 0x4000_0000;

fn iova(page: u64) -> u64 {
    WINDOW_BASE + page * SZ_4K
}

fn run<F: Format>(data: &[u8], coherent: bool) {
    let mem = if coherent {
        HostAllocator::new(Granule::Size4K, 16)
    } else {
        HostAllocator::new_noncoherent(Granule::Size4K, 16)
    };
    let cfg = Config::new(SZ_4K | SZ_2M, 32, 40).coherent(coherent);
    let mut pt = PageTable::<F, _>::new(cfg, &mem, NoFlush).unwrap();
    let mut model: BTreeMap<u64, u64> = BTreeMap::new();
    for step in data.chunks_exact(6).take(48) {
        let page = u64::from(u16::from_le_bytes([step[1], step[2]])) % WINDOW_PAGES;
        let n = u64::from(u16::from_le_bytes([step[3], step[4]]) % 1024) + 1;
        let n = n.min(WINDOW_PAGES - page);
        let pa_page = u64::from(step[5]) << 9 | (page & 511);
        let (first, count) = match step[0] % 4 {
            0 | 1 => {
                // map(): blocks where the alignment allows.
                let pa = pa_page * SZ_4K;
                let prot = if step[0] & 4 != 0 {
                    Prot::READ
                } else {
                    Prot::READ | Prot::WRITE
                };
                let res = pt.map(iova(page), pa, n * SZ_4K, prot);
                if model.range(page..page + n).next().is_some() {
                    assert_eq!(res, Err(Error::Exists));
                } else {
                    assert_eq!(res, Ok(()));
                    for i in 0..n {
                        model.insert(page + i, pa + i * SZ_4K);
                    }
                }
                (page, n)
            }
            2 => {
                let before = model.clone();
                match pt.unmap(iova(page), n * SZ_4K, None) {
                    Ok(bytes) => {
                        assert_eq!(bytes % SZ_4K, 0);
                        assert!(bytes <= n * SZ_4K);
                        for p in page..page + bytes / SZ_4K {
                            model.remove(&p);
                        }
                    }
                    Err(e) => {
                        assert_eq!(e, Error::PartialBlock);
                        assert_eq!(model, before);
                    }
                }
                (page, n)
            }
            _ => {
                // Unmap exactly what one map made: the run of mapped pages starting at `page`.
                let Some((&start, _)) = model.range(page..).next() else {
                    continue;
                };
                let mut end = start;
                while model.contains_key(&end) && end - start < 1024 {
                    end += 1;
                }
                let res = pt.unmap(iova(start), (end - start) * SZ_4K, None);
                if let Ok(bytes) = res {
                    for p in start..start + bytes / SZ_4K {
                        model.remove(&p);
                    }
                }
                (start, end - start)
            }
        };
        let lo = first.saturating_sub(1);
        let hi = (first + count + 1).min(WINDOW_PAGES);
        for p in lo..hi {
            assert_eq!(
                pt.iova_to_phys(iova(p) + 8),
                model.get(&p).map(|pa| pa + 8),
                "page {p}"
            );
        }
    }
    drop(pt);
    assert_eq!(mem.in_use(), 0, "table pages leaked");
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => run::<Arm64LpaeS1>(rest, true),
        1 => run::<Arm64LpaeS1>(rest, false),
        2 => run::<ArmMaliLpae>(rest, true),
        _ => run::<ArmMaliLpae>(rest, false),
    }
});
