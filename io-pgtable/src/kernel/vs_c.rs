// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_io_pgtable_vs_c`: this crate and the kernel's own
//! `drivers/iommu/io-pgtable-arm.c`, driven with the same random operations in one kernel.
//!
//! Each case builds one page table of each implementation for the same faux device, with the
//! same configuration (4K granule with 2M blocks, 48-bit input, 40-bit output, a walker that
//! does not snoop the CPU caches, so both DMA-map their tables and sync every write), and
//! applies a seeded random sequence of valid operations to both: maps of runs of 4K pages,
//! unmaps of mapped runs, 2M block maps (also over a level-3 table emptied earlier, which both
//! free and replace), block unmaps. After every step:
//!
//! - `map_pages`/`unmap_pages` returned the same status and byte counts;
//! - `iova_to_phys` agrees on every 4K page of the 2M region the step touched, and every 64th
//!   step on the whole window;
//! - the descriptors read on the way to a sample of addresses are bit-identical for leaves
//!   (address, attributes, software bits) and equal outside the address field for table
//!   descriptors, whose addresses legitimately differ (each side allocates its own tables).
//!
//! Only valid operations are generated: the C code warns (`WARN_ON`) where this crate returns
//! an error (a map over a mapping, an unmap of nothing, half a block), and a warning fails the
//! run through the kernel-log check of `cargo xtask kernel-test`.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_io_pgtable_vs_c)]
mod tests {
    use core::ffi::{c_int, c_void};
    use core::ptr::NonNull;

    use crate::kernel::DmaTableAlloc;
    use crate::{
        Arm64LpaeS1, ArmMaliLpae, Config, Format, NoFlush, PageTable, Prot, TableAlloc, SZ_2M,
        SZ_4K,
    };
    use ::kernel::device::Device;
    use ::kernel::faux;
    use ::kernel::prelude::*;

    // `kernel/vs_c.c` and `kernel/dma.c`.
    extern "C" {
        fn gpukit_io_pgtable_test_dma_setup(dev: *mut c_void) -> c_int;
        fn gpukit_c_pgtable_new(
            mali: bool,
            dev: *mut c_void,
            pgsize_bitmap: u64,
            ias: u32,
            oas: u32,
            coherent: bool,
        ) -> *mut c_void;
        fn gpukit_c_pgtable_map(
            t: *mut c_void,
            iova: u64,
            paddr: u64,
            pgsize: u64,
            pgcount: u64,
            prot: c_int,
            mapped: *mut u64,
        ) -> c_int;
        fn gpukit_c_pgtable_unmap(t: *mut c_void, iova: u64, pgsize: u64, pgcount: u64) -> u64;
        fn gpukit_c_pgtable_iova_to_phys(t: *mut c_void, iova: u64) -> u64;
        fn gpukit_c_pgtable_walk(t: *mut c_void, iova: u64, ptes: *mut u64) -> c_int;
        fn gpukit_c_pgtable_free(t: *mut c_void);
    }

    /// The C page table.
    ///
    /// # Invariants
    ///
    /// `0` came from `gpukit_c_pgtable_new` and is freed only by `drop`.
    struct CTable(NonNull<c_void>);

    impl CTable {
        fn new(mali: bool, dev: *mut c_void, cfg: &Config) -> Result<Self> {
            // SAFETY: `dev` is a live device with a DMA mask; the function copies `cfg`'s
            // values and returns NULL or a new table.
            let t = unsafe {
                gpukit_c_pgtable_new(
                    mali,
                    dev,
                    cfg.pgsize_bitmap,
                    cfg.ias,
                    cfg.oas,
                    cfg.coherent_walk,
                )
            };
            NonNull::new(t).map(CTable).ok_or(ENOMEM)
        }

        fn map(
            &self,
            iova: u64,
            paddr: u64,
            pgsize: u64,
            pgcount: u64,
            prot: Prot,
        ) -> (u64, c_int) {
            let mut mapped = 0;
            // SAFETY: `self.0` is a live table (type invariant).
            let ret = unsafe {
                gpukit_c_pgtable_map(
                    self.0.as_ptr(),
                    iova,
                    paddr,
                    pgsize,
                    pgcount,
                    prot.bits() as c_int,
                    &mut mapped,
                )
            };
            (mapped, ret)
        }

        fn unmap(&self, iova: u64, pgsize: u64, pgcount: u64) -> u64 {
            // SAFETY: As above.
            unsafe { gpukit_c_pgtable_unmap(self.0.as_ptr(), iova, pgsize, pgcount) }
        }

        fn iova_to_phys(&self, iova: u64) -> u64 {
            // SAFETY: As above.
            unsafe { gpukit_c_pgtable_iova_to_phys(self.0.as_ptr(), iova) }
        }

        fn walk(&self, iova: u64) -> [u64; 4] {
            let mut ptes = [0u64; 4];
            // SAFETY: As above; `ptes` has room for the four levels.
            unsafe { gpukit_c_pgtable_walk(self.0.as_ptr(), iova, ptes.as_mut_ptr()) };
            ptes
        }
    }

    impl Drop for CTable {
        fn drop(&mut self) {
            // SAFETY: `self.0` is a live table, freed once here.
            unsafe { gpukit_c_pgtable_free(self.0.as_ptr()) };
        }
    }

    /// xorshift64*: small, fast, and reproducible from the seed printed with a failure.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// 2M regions of the window: three groups of eight, each group under its own level-1
    /// entry, so level-2 tables are shared within a group and not across.
    const SLOTS: usize = 24;
    const PAGES: usize = 512;

    fn slot_iova(i: usize) -> u64 {
        (1 << 30) + (i as u64 / 8) * (1 << 30) + (i as u64 % 8) * SZ_2M
    }

    /// What the model knows of one 2M region.
    #[derive(Clone, Copy)]
    struct Slot {
        block: bool,
        pages: [u64; PAGES / 64],
    }

    impl Slot {
        fn mapped(&self, p: usize) -> bool {
            self.pages[p / 64] & (1 << (p % 64)) != 0
        }
        fn set(&mut self, p: usize, on: bool) {
            if on {
                self.pages[p / 64] |= 1 << (p % 64);
            } else {
                self.pages[p / 64] &= !(1 << (p % 64));
            }
        }
        fn any_page(&self) -> bool {
            self.pages.iter().any(|w| *w != 0)
        }
    }

    /// Mask of the output-address field of a 4K-granule descriptor (bits 47:12).
    const ADDR: u64 = 0x0000_ffff_ffff_f000;

    const PROTS: [Prot; 5] = [
        Prot::READ.union(Prot::WRITE).union(Prot::CACHE),
        Prot::READ,
        Prot::READ.union(Prot::NOEXEC),
        Prot::READ.union(Prot::WRITE).union(Prot::MMIO),
        Prot::READ.union(Prot::WRITE).union(Prot::PRIV),
    ];

    /// Checks every page of slot `i` with `iova_to_phys`, and the walks of a few of them.
    fn check_slot<F: Format>(
        rust: &PageTable<F, &DmaTableAlloc, NoFlush>,
        c: &CTable,
        i: usize,
        rng: &mut Rng,
    ) -> bool {
        let base = slot_iova(i);
        for p in 0..PAGES as u64 {
            let iova = base + p * SZ_4K + rng.below(SZ_4K);
            if rust.iova_to_phys(iova).unwrap_or(0) != c.iova_to_phys(iova) {
                return false;
            }
        }
        for _ in 0..4 {
            let iova = base + rng.below(SZ_2M);
            let ours = rust.walk_ptes(iova).ptes;
            let theirs = c.walk(iova);
            for lvl in 0..4 {
                let (a, b) = (ours[lvl].unwrap_or(0), theirs[lvl]);
                let table = lvl < 3 && a & 3 == 3;
                let ok = if table {
                    a & !ADDR == b & !ADDR && b & 3 == 3
                } else {
                    a == b
                };
                if !ok {
                    return false;
                }
                if !table {
                    break;
                }
            }
        }
        true
    }

    /// The `struct device` under a `Device`, for the C side.
    fn raw_dev(dev: &Device) -> *mut c_void {
        // `Device` is `repr(transparent)` over the C `struct device`.
        core::ptr::from_ref(dev).cast::<c_void>().cast_mut()
    }

    /// A faux device with a 64-bit DMA mask, whose tables both implementations map.
    fn gpu() -> Result<faux::Registration> {
        let gpu = faux::Registration::new(c"gpukit-io-pgtable-vs-c", None)?;
        // SAFETY: The registered faux device, alive while `gpu` is.
        if unsafe { gpukit_io_pgtable_test_dma_setup(raw_dev(gpu.as_ref())) } != 0 {
            return Err(EIO);
        }
        Ok(gpu)
    }

    /// Runs `steps` random operations on both implementations; returns the number of steps
    /// that changed a mapping, or `EINVAL` at the first disagreement.
    fn differential<F: Format>(mali: bool, seed: u64, steps: u32) -> Result<u32> {
        let gpu = gpu()?;
        let dev: &Device = gpu.as_ref();
        let raw = raw_dev(dev);
        let cfg = Config::new(SZ_4K | SZ_2M, 48, 40);
        let mem = DmaTableAlloc::new(dev, false, 256, GFP_KERNEL)?;
        let mut rust = PageTable::<F, _>::new(cfg, &*mem, NoFlush)?;
        let c = CTable::new(mali, raw, rust.cfg())?;
        let mut rng = Rng(seed);
        let mut model = [Slot {
            block: false,
            pages: [0; PAGES / 64],
        }; SLOTS];
        let mut changed = 0;
        for step in 0..steps {
            let i = rng.below(SLOTS as u64) as usize;
            let base = slot_iova(i);
            let prot = PROTS[rng.below(PROTS.len() as u64) as usize];
            let slot = model[i];
            let agreed = match rng.below(10) {
                // Map a run of free 4K pages.
                0..=3 if !slot.block => {
                    let start = rng.below(PAGES as u64) as usize;
                    let len = 1 + rng.below(64.min(PAGES - start) as u64) as usize;
                    if (start..start + len).any(|p| slot.mapped(p)) {
                        continue;
                    }
                    let iova = base + start as u64 * SZ_4K;
                    let pa = rng.below(1 << 28) * SZ_4K;
                    let (rm, rr) = rust.map_pages(iova, pa, SZ_4K, len, prot);
                    let (cm, cr) = c.map(iova, pa, SZ_4K, len as u64, prot);
                    for p in start..start + len {
                        model[i].set(p, true);
                    }
                    rm == cm && rr.is_ok() == (cr == 0) && rm == len as u64 * SZ_4K
                }
                // Unmap a run of mapped 4K pages (at most to the end of the run).
                4..=6 if slot.any_page() => {
                    let mut start = rng.below(PAGES as u64) as usize;
                    while !slot.mapped(start) {
                        start = (start + 1) % PAGES;
                    }
                    let max = 1 + rng.below(64) as usize;
                    let mut len = 0;
                    while len < max && start + len < PAGES && slot.mapped(start + len) {
                        len += 1;
                    }
                    let iova = base + start as u64 * SZ_4K;
                    let ru = rust.unmap_pages(iova, SZ_4K, len, None);
                    let cu = c.unmap(iova, SZ_4K, len as u64);
                    for p in start..start + len {
                        model[i].set(p, false);
                    }
                    ru == Ok(cu) && cu == len as u64 * SZ_4K
                }
                // Map a 2M block where no page is mapped (an emptied table is replaced).
                7 | 8 if !slot.block && !slot.any_page() => {
                    let pa = rng.below(1 << 19) * SZ_2M;
                    let (rm, rr) = rust.map_pages(base, pa, SZ_2M, 1, prot);
                    let (cm, cr) = c.map(base, pa, SZ_2M, 1, prot);
                    model[i].block = true;
                    rm == cm && rr.is_ok() == (cr == 0) && rm == SZ_2M
                }
                // Unmap a block.
                _ if slot.block => {
                    let ru = rust.unmap_pages(base, SZ_2M, 1, None);
                    let cu = c.unmap(base, SZ_2M, 1);
                    model[i].block = false;
                    ru == Ok(cu) && cu == SZ_2M
                }
                _ => continue,
            };
            changed += 1;
            let consistent = agreed
                && check_slot(&rust, &c, i, &mut rng)
                && (step % 64 != 0 || (0..SLOTS).all(|j| check_slot(&rust, &c, j, &mut rng)));
            if !consistent {
                pr_err!(
                    "io-pgtable vs C: {} disagrees at step {step} (seed {seed:#x}, slot {i})\n",
                    if mali {
                        "ARM_MALI_LPAE"
                    } else {
                        "ARM_64_LPAE_S1"
                    }
                );
                return Err(EINVAL);
            }
        }
        // Both empty again once everything is unmapped.
        for (i, slot) in model.iter().enumerate() {
            let base = slot_iova(i);
            if slot.block {
                rust.unmap_pages(base, SZ_2M, 1, None)?;
                c.unmap(base, SZ_2M, 1);
            }
            for p in 0..PAGES {
                if slot.mapped(p) {
                    rust.unmap_pages(base + p as u64 * SZ_4K, SZ_4K, 1, None)?;
                    c.unmap(base + p as u64 * SZ_4K, SZ_4K, 1);
                }
            }
        }
        if !(0..SLOTS).all(|j| check_slot(&rust, &c, j, &mut rng)) {
            return Err(EINVAL);
        }
        drop(rust);
        if mem.live() != 0 {
            return Err(EINVAL);
        }
        pr_info!(
            "differential: io-pgtable/{}: {changed} random steps, seed {seed:#x}, identical\n",
            if mali {
                "ARM_MALI_LPAE"
            } else {
                "ARM_64_LPAE_S1"
            }
        );
        Ok(changed)
    }

    #[test]
    fn arm_64_lpae_s1_matches_c() -> Result {
        assert!(differential::<Arm64LpaeS1>(false, 0x5eed_0001, 3000)? > 1000);
        Ok(())
    }

    #[test]
    fn arm_mali_lpae_matches_c() -> Result {
        assert!(differential::<ArmMaliLpae>(true, 0x5eed_0002, 3000)? > 1000);
        Ok(())
    }

    /// Nanoseconds on the monotonic clock.
    fn now_ns() -> i64 {
        // SAFETY: Reads the monotonic clock.
        unsafe { ::kernel::bindings::ktime_get() }
    }

    /// Maps `size` bytes as `pg` pages, calling again while the call maps less (the C code
    /// stops at the end of a table).
    fn map_all<F: Format>(
        rust: &mut PageTable<F, &DmaTableAlloc, NoFlush>,
        c: Option<&CTable>,
        iova: u64,
        pa: u64,
        size: u64,
        pg: u64,
    ) -> Result {
        let prot = PROTS[0];
        let mut done = 0;
        while done < size {
            let count = (size - done) / pg;
            let mapped = match c {
                Some(c) => {
                    let (m, r) = c.map(iova + done, pa + done, pg, count, prot);
                    if r != 0 {
                        return Err(ENOMEM);
                    }
                    m
                }
                None => {
                    let (m, r) = rust.map_pages(iova + done, pa + done, pg, count as usize, prot);
                    r?;
                    m
                }
            };
            if mapped == 0 {
                return Err(EINVAL);
            }
            done += mapped;
        }
        Ok(())
    }

    fn unmap_all<F: Format>(
        rust: &mut PageTable<F, &DmaTableAlloc, NoFlush>,
        c: Option<&CTable>,
        iova: u64,
        size: u64,
        pg: u64,
    ) -> Result {
        let mut done = 0;
        while done < size {
            let count = (size - done) / pg;
            let n = match c {
                Some(c) => c.unmap(iova + done, pg, count),
                None => rust.unmap_pages(iova + done, pg, count as usize, None)?,
            };
            if n == 0 {
                return Err(EINVAL);
            }
            done += n;
        }
        Ok(())
    }

    /// Times the bulk and single-page workloads on both implementations, each with tables
    /// DMA-mapped for the same device and synced for a non-coherent walker (the same memory
    /// policy). The sides alternate, three rounds each, and the best round counts: under
    /// QEMU without KVM the first run of a code path also pays for its translation.
    fn timings() -> Result {
        const GIB: u64 = 1 << 30;
        const SINGLE: usize = 4096;
        let gpu = gpu()?;
        let dev: &Device = gpu.as_ref();
        let raw = raw_dev(dev);
        let cfg = Config::new(SZ_4K | SZ_2M, 48, 40);
        let mem = DmaTableAlloc::new(dev, false, 4096, GFP_KERNEL)?;
        let mut rust = PageTable::<Arm64LpaeS1, _>::new(cfg, &*mem, NoFlush)?;
        let c = CTable::new(false, raw, rust.cfg())?;
        let pa = 4 * GIB;
        // Best time per workload, [rust, C].
        let mut best = [[i64::MAX; 2]; 5];
        let mut keep = |w: usize, side: usize, t: i64| best[w][side] = best[w][side].min(t);
        // One page in every 2M of the third GiB puts all its tables in place for the
        // single-page workload, next to the pages it maps.
        let single = 16 * GIB;
        for side in [None, Some(&c)] {
            for i in 0..512u64 {
                map_all(&mut rust, side, single + i * SZ_2M, pa, SZ_4K, SZ_4K)?;
            }
        }
        let mut rng = Rng(0x5eed_0005);
        let mut picks = KVec::with_capacity(SINGLE, GFP_KERNEL)?;
        for _ in 0..SINGLE {
            picks.push(
                single + rng.below(512) * SZ_2M + (1 + rng.below(511)) * SZ_4K,
                GFP_KERNEL,
            )?;
        }
        for _round in 0..3 {
            for (s, side) in [None, Some(&c)].into_iter().enumerate() {
                let t = now_ns();
                map_all(&mut rust, side, GIB, pa, GIB, SZ_4K)?;
                keep(0, s, now_ns() - t);
                let t = now_ns();
                unmap_all(&mut rust, side, GIB, GIB, SZ_4K)?;
                keep(1, s, now_ns() - t);
                // A GiB of its own: level-3 tables of the 4K run may stay behind.
                let t = now_ns();
                map_all(&mut rust, side, 8 * GIB, pa, GIB, SZ_2M)?;
                keep(2, s, now_ns() - t);
                let t = now_ns();
                unmap_all(&mut rust, side, 8 * GIB, GIB, SZ_2M)?;
                keep(3, s, now_ns() - t);
                let t = now_ns();
                for &at in picks.iter() {
                    map_all(&mut rust, side, at, pa, SZ_4K, SZ_4K)?;
                    unmap_all(&mut rust, side, at, SZ_4K, SZ_4K)?;
                }
                keep(4, s, (now_ns() - t) / SINGLE as i64);
            }
        }
        let names = [
            "map 1 GiB as 4K pages",
            "unmap 1 GiB of 4K pages",
            "map 1 GiB as 2M blocks",
            "unmap 1 GiB of 2M blocks",
        ];
        for (w, what) in names.iter().enumerate() {
            let [r, cns] = best[w].map(|t| t.max(1) as u64);
            let x100 = cns * 100 / r;
            pr_info!(
                "vs-C: io-pgtable/{what}: rust {} us, C {} us, ratio {}.{:02}x\n",
                r / 1000,
                cns / 1000,
                x100 / 100,
                x100 % 100
            );
        }
        let [r, cns] = best[4].map(|t| t.max(1) as u64);
        let x100 = cns * 100 / r;
        pr_info!(
            "vs-C: io-pgtable/map + unmap one 4K page, tables present: rust {r} ns, C {cns} ns, ratio {}.{:02}x\n",
            x100 / 100,
            x100 % 100
        );
        // The least any implementation can do to map 1 GiB as 4K pages into level-3 tables
        // that exist: read and write each of the 262144 descriptors and sync each table once
        // (the check that nothing is mapped, the write, the cache maintenance).
        let mut tables = KVec::with_capacity(512, GFP_KERNEL)?;
        for _ in 0..512 {
            tables.push(mem.alloc_table(4096).ok_or(ENOMEM)?, GFP_KERNEL)?;
        }
        let mut floor = i64::MAX;
        for _round in 0..3 {
            let t = now_ns();
            for (i, table) in tables.iter().enumerate() {
                // SAFETY: `table` is a live 4 KiB table of `mem`, used by nothing else.
                let slots = unsafe { core::slice::from_raw_parts(table.cpu.as_ptr(), 512) };
                let mut pa = pa + i as u64 * SZ_2M;
                for slot in slots {
                    if slot.load(core::sync::atomic::Ordering::Acquire) != 0 {
                        return Err(EEXIST);
                    }
                    slot.store(pa | 0x743, core::sync::atomic::Ordering::Relaxed);
                    pa += SZ_4K;
                }
                // SAFETY: `table` is live, allocated with 4096 bytes.
                unsafe { mem.sync_table_for_device(*table, 0, 4096) };
            }
            floor = floor.min(now_ns() - t);
            for table in tables.iter() {
                // SAFETY: As above.
                let slots = unsafe { core::slice::from_raw_parts(table.cpu.as_ptr(), 512) };
                for slot in slots {
                    slot.store(0, core::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        for table in tables.iter() {
            // SAFETY: Allocated above with this size; nothing uses it any more.
            unsafe { mem.free_table(*table, 4096) };
        }
        pr_info!(
            "floor: io-pgtable/read, write and sync every descriptor of 1 GiB of 4K pages: {} us\n",
            floor / 1000
        );
        // What finding a table's CPU view from the DMA address in a descriptor costs: an
        // addition while the allocator's tables all lie at one distance from their DMA
        // addresses (as C's `__va()`), a lookup in its index of live tables otherwise. A
        // single-page map or unmap finds three tables that way; its syncs name the table they
        // write and need no lookup.
        const LOOKUPS: i64 = 100_000;
        let root = rust.root_dev_addr();
        let t = now_ns();
        for _ in 0..LOOKUPS {
            core::hint::black_box(mem.table_cpu(core::hint::black_box(root)));
        }
        let by_view = (now_ns() - t) / LOOKUPS;
        let t = now_ns();
        for _ in 0..LOOKUPS {
            core::hint::black_box(mem.containing(core::hint::black_box(root)));
        }
        let by_index = (now_ns() - t) / LOOKUPS;
        let how = if mem.is_linear() {
            "by addition"
        } else {
            "by index lookup (tables at different distances)"
        };
        pr_info!(
            "floor: io-pgtable/CPU view of a DMA address: {by_view} ns {how}, {by_index} ns by index lookup\n"
        );
        Ok(())
    }

    #[test]
    fn timing_against_c() -> Result {
        timings()
    }
}
