// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Building a Mali GPU address space with `ARM_64_LPAE_S1` page tables.
//!
//! A Mali CSF GPU (panthor, Tyr) translates GPU virtual addresses through stage-1 LPAE tables
//! that the driver builds in memory and points an address space at (`AS_TRANSTAB`, with the
//! attributes in `AS_MEMATTR` and the walk configuration in `AS_TRANSCFG`). This example
//! builds such tables in host memory: a 2 MiB block and four scattered 4 KiB pages, prints the
//! register values, translates addresses both with the table's own lookup and with the crate's
//! independent walker (which reads the tables by device address, as the GPU's MMU would), then
//! unmaps everything and checks that translations fault and that table memory is returned.

use std::sync::atomic::{AtomicUsize, Ordering};

use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::walker::{self, Fault, Regime};
use io_pgtable::{Arm64LpaeS1, Config, FlushOps, PageTable, Prot, SZ_2M, SZ_4K};

/// TLB maintenance that only counts the walk-cache invalidations it is asked for.
#[derive(Default)]
struct CountingFlush(AtomicUsize);

impl FlushOps for CountingFlush {
    fn tlb_flush_all(&self) {}
    fn tlb_flush_walk(&self, _iova: u64, _size: u64, _granule: u64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

const BLOCK_VA: u64 = 0x4000_0000;
const BLOCK_PA: u64 = 0x8_0000_0000;
const PAGES_VA: u64 = BLOCK_VA + SZ_2M;

fn main() -> Result<(), String> {
    let mem = HostAllocator::new(Granule::Size4K, 16);
    // As panthor: 4K pages and 2M blocks, 48-bit GPU VA, 40-bit PA, an IO-coherent GPU.
    let cfg = Config::new(SZ_4K | SZ_2M, 48, 40).coherent(true);
    let mut pt = PageTable::<Arm64LpaeS1, _, _>::new(cfg, &mem, CountingFlush::default())
        .map_err(|e| format!("table creation: {e}"))?;
    let rw = Prot::READ | Prot::WRITE | Prot::CACHE;

    // One 2M block, then four 4K pages right after it, each backed by a scattered page.
    let mut expect = vec![(BLOCK_VA, BLOCK_PA, SZ_2M)];
    expect.extend((0..4).map(|i| (PAGES_VA + i * SZ_4K, 0x9_0000_0000 + i * 3 * SZ_4K, SZ_4K)));
    for &(va, pa, size) in &expect {
        let (mapped, res) = pt.map_pages(va, pa, size, 1, rw);
        res.map_err(|e| format!("map {va:#x}: {e}"))?;
        if mapped != size {
            return Err(format!("map {va:#x}: only {mapped:#x} bytes mapped"));
        }
        println!(
            "mapped {:>4} KiB  va {va:#012x} -> pa {pa:#012x}",
            size / 1024
        );
    }
    println!(
        "page-table pages in use: {} (root, L1, L2, one L3)",
        mem.in_use()
    );

    let regs = pt
        .mali_as_regs()
        .map_err(|e| format!("AS registers: {e}"))?;
    println!("AS_TRANSTAB  = {:#018x}", regs.transtab);
    println!("AS_MEMATTR   = {:#018x}", regs.memattr);
    println!("AS_TRANSCFG  = {:#018x}", regs.transcfg);
    let regime = Regime::from_mali(&regs).ok_or("the walker rejects the AS registers")?;
    if regs.transtab != pt.root_dev_addr() || mem.in_use() != 4 {
        return Err("unexpected TRANSTAB or table count".into());
    }

    for &(va, pa, size) in &expect {
        let probe = va + size / 2 + 0x123;
        let want = pa + size / 2 + 0x123;
        let by_table = pt.iova_to_phys(probe);
        let walk = walker::walk(&mem, &regime, probe).map_err(|f| format!("{probe:#x}: {f:?}"))?;
        println!(
            "translate {probe:#012x}: iova_to_phys {:#012x}, walker {:#012x} (level {} leaf)",
            by_table.unwrap_or(0),
            walk.pa,
            walk.level
        );
        if by_table != Some(want) || walk.pa != want || walk.size != size {
            return Err(format!("{probe:#x} should translate to {want:#x}"));
        }
    }

    // Unmapping the two 2M ranges drops the block and, with the second, the whole L3 table.
    let unmapped = pt
        .unmap(BLOCK_VA, 2 * SZ_2M, None)
        .map_err(|e| e.to_string())?;
    let flushes = pt.flush_ops().0.load(Ordering::Relaxed);
    println!(
        "unmap of 2 x 2M: {} KiB reported (the L3 table entry counts as 2M), \
         {flushes} walk-cache flush, tables in use {}",
        unmapped / 1024,
        mem.in_use()
    );
    for &(va, ..) in &expect {
        let fault = walker::walk(&mem, &regime, va);
        if pt.iova_to_phys(va).is_some() || !matches!(fault, Err(Fault::Translation { .. })) {
            return Err(format!("{va:#x} still translates after unmap"));
        }
    }
    println!(
        "every address now faults: {:?}",
        walker::walk(&mem, &regime, PAGES_VA)
    );
    if unmapped != 2 * SZ_2M || mem.in_use() != 3 || flushes != 1 {
        return Err("the L3 table was not freed as expected".into());
    }
    drop(pt);
    println!("after dropping the table: {} pages in use", mem.in_use());
    if mem.in_use() != 0 {
        return Err("the page table leaked table memory".into());
    }
    println!("all checks passed");
    Ok(())
}
