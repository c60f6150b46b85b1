// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Cross-check: tables written by `io-pgtable` (ARM_64_LPAE_S1, as panthor and Tyr use it)
//! into simulated memory, walked by the simulator's independent MMU.

use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use io_pgtable::{Arm64LpaeS1, Config as PtConfig, NoFlush, PageTable, Prot, TableAlloc, TableMem};
use io_pgtable::{SZ_2M, SZ_4K};
use mali_sim::regs::{self, as_cmd, as_reg};
use mali_sim::{AccessType, Config, FaultKind, Gpu, PhysAddr, SimMemory};
use proptest::prelude::*;

/// Page-table memory from the simulator's physical memory.
struct SimTables(Arc<SimMemory>);

// SAFETY: Every table is a fresh, zeroed, page-aligned allocation of `SimMemory`, whose
// storage is atomic words that stay at a fixed address until `free` (see the `mem` module's
// soundness notes); allocations never overlap, and `table_cpu` returns the pointer of the
// allocation at that device address.
unsafe impl TableAlloc for SimTables {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        if size > 4096 {
            return None;
        }
        let pa = self.0.alloc_page().ok()?;
        let cpu = self.0.host_ptr_u64(pa).ok()?;
        Some(TableMem { cpu, dev: pa.0 })
    }

    unsafe fn free_table(&self, table: TableMem, _size: usize) {
        let _ = self.0.free(PhysAddr(table.dev));
    }

    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        self.0
            .host_ptr_u64(PhysAddr(dev))
            .unwrap_or(NonNull::dangling())
    }

    fn sync_for_device(&self, _dev: u64, _len: usize) {}
}

fn cases() -> ProptestConfig {
    let mut cfg = ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 64 });
    if cfg!(miri) {
        // Miri's isolation forbids the file access of failure persistence.
        cfg.failure_persistence = None;
    }
    cfg
}

fn setup() -> (Gpu, SimTables) {
    let mut cfg = Config::g610();
    cfg.timings.mmu_command_ns = 0;
    let gpu = Gpu::new(cfg);
    let tables = SimTables(gpu.memory().clone());
    (gpu, tables)
}

fn activate(gpu: &mut Gpu, pt: &PageTable<Arm64LpaeS1, &SimTables>) {
    let r = pt.mali_as_regs().unwrap();
    gpu.write64(as_reg(0, regs::AS_TRANSTAB_LO), r.transtab);
    gpu.write64(as_reg(0, regs::AS_MEMATTR_LO), r.memattr);
    gpu.write64(as_reg(0, regs::AS_TRANSCFG_LO), r.transcfg);
    gpu.write32(as_reg(0, regs::AS_COMMAND), as_cmd::UPDATE);
}

#[test]
fn pages_and_blocks_translate_with_their_permissions() {
    let (mut gpu, tables) = setup();
    let mut pt = PageTable::<Arm64LpaeS1, _>::new(
        PtConfig::new(SZ_4K | SZ_2M, 48, 40).coherent(true),
        &tables,
        NoFlush,
    )
    .unwrap();
    let rw = Prot::READ | Prot::WRITE | Prot::CACHE;
    pt.map(0x1000_0000, 0x80_0000_0000, 4 * SZ_4K, rw).unwrap();
    pt.map(
        0x2000_0000,
        0x81_0000_0000,
        SZ_2M,
        Prot::READ | Prot::NOEXEC,
    )
    .unwrap();
    pt.map(0x7f_ffff_f000, 0x1234_5000, SZ_4K, rw | Prot::NOEXEC)
        .unwrap();
    activate(&mut gpu, &pt);

    for i in 0..4u64 {
        let t = gpu
            .walk(0, 0x1000_0000 + i * 4096 + 0x10, AccessType::Read)
            .unwrap();
        assert_eq!(t.pa.0, 0x80_0000_0000 + i * 4096 + 0x10);
        assert_eq!((t.level, t.size), (3, 4096));
        assert!(t.perms.read && t.perms.write && t.perms.exec);
    }
    let t = gpu
        .walk(0, 0x2000_0000 + 0x12_3456, AccessType::Read)
        .unwrap();
    assert_eq!(t.pa.0, 0x81_0000_0000 + 0x12_3456);
    assert_eq!((t.level, t.size), (2, SZ_2M));
    assert!(!t.perms.write && !t.perms.exec);
    let f = gpu.walk(0, 0x2000_0000, AccessType::Write).unwrap_err();
    assert_eq!(f.kind, FaultKind::Permission { level: 2 });
    let t = gpu.walk(0, 0x7f_ffff_f800, AccessType::Write).unwrap();
    assert_eq!(t.pa.0, 0x1234_5800);
    assert!(!t.perms.exec);
    // Holes fault.
    assert!(gpu.walk(0, 0x1000_4000, AccessType::Read).is_err());
    // The MEMATTR io-pgtable computes never selects a faulting attribute.
    assert_ne!(t.memattr >> 6, 3);

    // Unmapping is visible to the checker's walk at once.
    assert_eq!(pt.unmap(0x1000_1000, SZ_4K, None).unwrap(), SZ_4K);
    assert_eq!(
        gpu.walk(0, 0x1000_1000, AccessType::Read).unwrap_err().kind,
        FaultKind::Translation { level: 3 }
    );
    assert!(gpu.bus_errors().is_empty());
}

#[derive(Clone, Debug)]
enum Op {
    Map {
        page: u64,
        count: u64,
        frame: u64,
        write: bool,
        exec: bool,
    },
    Unmap {
        page: u64,
        count: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..64, 1u64..8, 0u64..1024, any::<bool>(), any::<bool>()).prop_map(
            |(page, count, frame, write, exec)| Op::Map {
                page,
                count,
                frame,
                write,
                exec
            }
        ),
        (0u64..64, 1u64..8).prop_map(|(page, count)| Op::Unmap { page, count }),
    ]
}

proptest! {
    #![proptest_config(cases())]

    /// Random maps and unmaps: the simulator's walk agrees page by page with
    /// `iova_to_phys` and with a model of what was mapped.
    #[test]
    fn walker_agrees_with_io_pgtable(
        ops in proptest::collection::vec(op(), 1..if cfg!(miri) { 6 } else { 30 })
    ) {
        let (mut gpu, tables) = setup();
        let mut pt = PageTable::<Arm64LpaeS1, _>::new(
            PtConfig::new(SZ_4K | SZ_2M, 48, 40),
            &tables,
            NoFlush,
        )
        .unwrap();
        activate(&mut gpu, &pt);
        let base = 0x40_0000_0000u64 - 32 * 4096; // straddles a 1G boundary
        let mut model = std::collections::HashMap::new();
        for op in ops {
            match op {
                Op::Map { page, count, frame, write, exec } => {
                    let mut prot = Prot::READ;
                    if write { prot |= Prot::WRITE; }
                    if !exec { prot |= Prot::NOEXEC; }
                    let free = (page..page + count).all(|p| !model.contains_key(&p));
                    let r = pt.map(base + page * 4096, 0x100_0000 + frame * 4096, count * 4096, prot);
                    prop_assert_eq!(r.is_ok(), free);
                    if free {
                        for p in page..page + count {
                            model.insert(p, (0x100_0000 + (frame + p - page) * 4096, write, exec));
                        }
                    }
                }
                Op::Unmap { page, count } => {
                    for p in page..page + count {
                        if model.remove(&p).is_some() {
                            prop_assert_eq!(pt.unmap(base + p * 4096, 4096, None).unwrap(), 4096);
                        }
                    }
                }
            }
            for p in 0..72u64 {
                let va = base + p * 4096;
                let walked = gpu.walk(0, va, AccessType::Read);
                prop_assert_eq!(walked.as_ref().ok().map(|t| t.pa.0), pt.iova_to_phys(va));
                match model.get(&p) {
                    Some(&(pa, write, exec)) => {
                        let t = walked.unwrap();
                        prop_assert_eq!(t.pa.0, pa);
                        prop_assert_eq!((t.perms.write, t.perms.exec), (write, exec));
                    }
                    None => prop_assert!(walked.is_err()),
                }
            }
        }
    }
}
