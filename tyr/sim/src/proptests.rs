// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Model-based property tests of the memory and of translation with its TLB.

use std::collections::HashMap;
use std::vec::Vec;

use proptest::prelude::*;

use super::regs::{as_cmd, as_reg, AS_COMMAND, AS_LOCKADDR_LO, AS_MEMATTR_LO};
use super::regs::{AS_TRANSCFG_LO, AS_TRANSTAB_LO};
use super::testutil::{HandTables, RO_PAGE, RW_PAGE};
use super::*;

/// Operation-sequence length: shorter under Miri.
fn max_ops(n: usize) -> usize {
    if cfg!(miri) {
        12
    } else {
        n
    }
}

fn cases() -> ProptestConfig {
    let mut cfg = ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 });
    if cfg!(miri) {
        // Miri's isolation forbids the file access of failure persistence.
        cfg.failure_persistence = None;
    }
    cfg
}

#[derive(Clone, Debug)]
enum MemOp {
    Alloc(usize),
    Free(usize),
    Write(usize, u16, Vec<u8>),
    Read(usize, u16, u16),
    Limit(Option<usize>),
    /// Attach a run of the test's own at page `.0` of the window (or past it), `.1` pages.
    Attach(usize, usize),
    Detach(usize),
}

/// A run of the test's own for `attach`: zeroed, page aligned; freed with [`free_run`].
fn run(pages: usize) -> core::ptr::NonNull<u8> {
    let layout = std::alloc::Layout::from_size_align(pages * 4096, 4096).unwrap();
    // SAFETY: The layout has a non-zero size.
    core::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).unwrap()
}

fn free_run(frames: core::ptr::NonNull<u8>, pages: usize) {
    let layout = std::alloc::Layout::from_size_align(pages * 4096, 4096).unwrap();
    // SAFETY: `frames` came from `run(pages)`, that is from `alloc_zeroed(layout)`.
    unsafe { std::alloc::dealloc(frames.as_ptr(), layout) };
}

fn mem_op() -> impl Strategy<Value = MemOp> {
    prop_oneof![
        (1usize..4).prop_map(MemOp::Alloc),
        any::<usize>().prop_map(MemOp::Free),
        (
            any::<usize>(),
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 0..24)
        )
            .prop_map(|(i, o, d)| MemOp::Write(i, o, d)),
        (any::<usize>(), any::<u16>(), 0u16..24).prop_map(|(i, o, l)| MemOp::Read(i, o, l)),
        proptest::option::of(0usize..12).prop_map(MemOp::Limit),
        (0usize..18, 1usize..4).prop_map(|(p, n)| MemOp::Attach(p, n)),
        any::<usize>().prop_map(MemOp::Detach),
    ]
}

proptest! {
    #![proptest_config(cases())]

    /// Allocations, attachments, frees, detachments and byte accesses agree with a map of
    /// byte vectors (each with the run it was attached with, if it was).
    #[test]
    fn memory_matches_model(ops in proptest::collection::vec(mem_op(), 1..max_ops(40))) {
        let mem = SimMemory::new(MemConfig {
            base: PhysAddr(0x10_0000),
            end: PhysAddr(0x10_0000 + 16 * 4096),
            page_limit: None,
        });
        let mut model: Vec<(PhysAddr, Vec<u8>)> = Vec::new();
        let mut attached: HashMap<u64, core::ptr::NonNull<u8>> = HashMap::new();
        let mut limit = None;
        for op in ops {
            match op {
                MemOp::Alloc(n) => {
                    let used: usize = model.iter().map(|(_, b)| b.len() / 4096).sum();
                    let r = mem.alloc(n);
                    if limit.is_some_and(|l| used + n > l) {
                        prop_assert_eq!(r, Err(SimError::OutOfMemory));
                    } else if let Ok(pa) = r {
                        for (p, b) in &model {
                            let disjoint = pa.0 + (n as u64) * 4096 <= p.0
                                || p.0 + b.len() as u64 <= pa.0;
                            prop_assert!(disjoint);
                        }
                        model.push((pa, std::vec![0; n * 4096]));
                    } else {
                        // The small window may be fragmented or full.
                        prop_assert_eq!(r, Err(SimError::OutOfMemory));
                    }
                }
                MemOp::Free(i) if !model.is_empty() => {
                    let k = i % model.len();
                    let pa = model[k].0;
                    if attached.contains_key(&pa.0) {
                        // Not the memory's to free: refused, nothing changes.
                        prop_assert_eq!(mem.free(pa), Err(SimError::NotAllocated(pa)));
                        prop_assert!(mem.is_backed(pa, 1));
                    } else {
                        let (pa, b) = model.swap_remove(k);
                        prop_assert_eq!(mem.free(pa), Ok(b.len() / 4096));
                        prop_assert!(!mem.is_backed(pa, 1));
                    }
                }
                MemOp::Attach(page, n) => {
                    let pa = PhysAddr(0x10_0000 + page as u64 * 4096);
                    let end = pa.0 + n as u64 * 4096;
                    let used: usize = model.iter().map(|(_, b)| b.len() / 4096).sum();
                    let frames = run(n);
                    // SAFETY: The run is the test's; it is freed only after it is detached,
                    // or after the memory is gone, or now if the call failed.
                    let r = unsafe { mem.attach(pa, frames, n) };
                    let overlaps = model
                        .iter()
                        .any(|(p, b)| p.0 < end && pa.0 < p.0 + b.len() as u64);
                    if end > 0x10_0000 + 16 * 4096 {
                        prop_assert_eq!(r, Err(SimError::InvalidSize));
                    } else if overlaps {
                        prop_assert_eq!(r, Err(SimError::Occupied(pa)));
                    } else if limit.is_some_and(|l| used + n > l) {
                        prop_assert_eq!(r, Err(SimError::OutOfMemory));
                    } else {
                        prop_assert_eq!(r, Ok(()));
                    }
                    if r.is_ok() {
                        attached.insert(pa.0, frames);
                        model.push((pa, std::vec![0; n * 4096]));
                    } else {
                        free_run(frames, n);
                    }
                }
                MemOp::Detach(i) if !model.is_empty() => {
                    let k = i % model.len();
                    let pa = model[k].0;
                    match attached.remove(&pa.0) {
                        Some(frames) => {
                            let (_, b) = model.swap_remove(k);
                            let pages = b.len() / 4096;
                            prop_assert_eq!(mem.detach(pa), Ok((frames, pages)));
                            prop_assert!(!mem.is_backed(pa, 1));
                            // What the GPU wrote is in the owner's run.
                            // SAFETY: The detached run is the test's again, `b.len()` bytes.
                            let bytes = unsafe { core::slice::from_raw_parts(frames.as_ptr(), b.len()) };
                            prop_assert_eq!(bytes, &b[..]);
                            free_run(frames, pages);
                        }
                        None => {
                            prop_assert_eq!(mem.detach(pa), Err(SimError::NotAllocated(pa)));
                            prop_assert!(mem.is_backed(pa, 1));
                        }
                    }
                }
                MemOp::Write(i, off, data) if !model.is_empty() => {
                    let k = i % model.len();
                    let (pa, b) = &mut model[k];
                    let off = usize::from(off) % b.len();
                    let r = mem.write_bytes(PhysAddr(pa.0 + off as u64), &data);
                    if off + data.len() <= b.len() {
                        prop_assert_eq!(r, Ok(()));
                        b[off..off + data.len()].copy_from_slice(&data);
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                MemOp::Read(i, off, len) if !model.is_empty() => {
                    let k = i % model.len();
                    let (pa, b) = &model[k];
                    let off = usize::from(off) % b.len();
                    let mut buf = std::vec![0; usize::from(len)];
                    let r = mem.read_bytes(PhysAddr(pa.0 + off as u64), &mut buf);
                    if off + buf.len() <= b.len() {
                        prop_assert_eq!(r, Ok(()));
                        prop_assert_eq!(&buf[..], &b[off..off + buf.len()]);
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                MemOp::Limit(l) => {
                    limit = l;
                    mem.set_page_limit(l);
                }
                _ => {}
            }
            let used: usize = model.iter().map(|(_, b)| b.len() / 4096).sum();
            prop_assert_eq!(mem.allocated_pages(), used);
            prop_assert_eq!(mem.live_allocations(), model.len());
        }
        // The memory frees what it allocated and leaves the attached runs to their owner.
        drop(mem);
        for (pa, b) in &model {
            if let Some(frames) = attached.remove(&pa.0) {
                free_run(frames, b.len() / 4096);
            }
        }
        prop_assert!(attached.is_empty());
    }
}

#[derive(Clone, Debug)]
enum MmuOp {
    Map { page: usize, frame: usize, ro: bool },
    Unmap(usize),
    Access { page: usize, write: bool },
    LockUnlock { page: usize, pages: u64 },
    Update,
}

const PAGES: usize = 24;
const FRAMES: usize = 4;

/// VA of test page `i`: spread over two level-2 and two level-1 entries.
fn va_of(i: usize) -> u64 {
    let i = i as u64;
    (i % 8) << 12 | ((i / 8) % 2) << 21 | (i / 16) << 30
}

fn mmu_op() -> impl Strategy<Value = MmuOp> {
    prop_oneof![
        (0..PAGES, 0..FRAMES, any::<bool>()).prop_map(|(page, frame, ro)| MmuOp::Map {
            page,
            frame,
            ro
        }),
        (0..PAGES).prop_map(MmuOp::Unmap),
        (0..PAGES, any::<bool>()).prop_map(|(page, write)| MmuOp::Access { page, write }),
        (0..PAGES, 1u64..600).prop_map(|(page, pages)| MmuOp::LockUnlock { page, pages }),
        Just(MmuOp::Update),
    ]
}

proptest! {
    #![proptest_config(cases())]

    /// GPU translations agree with a model of the tables and of a TLB that only
    /// UPDATE and unlocks empty; the checker walk always agrees with the tables.
    #[test]
    fn translation_matches_model(ops in proptest::collection::vec(mmu_op(), 1..max_ops(60))) {
        let mut cfg = Config::g610();
        cfg.timings.mmu_command_ns = 0;
        let mut gpu = Gpu::new(cfg);
        let mem = gpu.memory().clone();
        let tables = HandTables::new(&mem);
        let frames: Vec<PhysAddr> = (0..FRAMES).map(|_| mem.alloc(1).unwrap()).collect();
        gpu.write64(as_reg(0, AS_TRANSTAB_LO), tables.root.0);
        gpu.write64(as_reg(0, AS_MEMATTR_LO), 0x8888_8888_8888_8888);
        gpu.write64(as_reg(0, AS_TRANSCFG_LO), WalkConfig::aarch64_4k(0, 48).transcfg);
        gpu.write32(as_reg(0, AS_COMMAND), as_cmd::UPDATE);
        let mut table_model: HashMap<usize, (usize, bool)> = HashMap::new();
        let mut tlb_model: HashMap<usize, (usize, bool)> = HashMap::new();
        for op in ops {
            match op {
                MmuOp::Map { page, frame, ro } => {
                    let flags = if ro { RO_PAGE } else { RW_PAGE };
                    tables.map(&mem, va_of(page), frames[frame], flags);
                    table_model.insert(page, (frame, ro));
                }
                MmuOp::Unmap(page) => {
                    tables.unmap(&mem, va_of(page));
                    table_model.remove(&page);
                }
                MmuOp::Access { page, write } => {
                    let access = if write { AccessType::Write } else { AccessType::Read };
                    let va = va_of(page) | 0x18;
                    let got = gpu.translate(0, va, access);
                    let entry = match tlb_model.get(&page) {
                        Some(e) => Some(*e),
                        None => table_model.get(&page).copied(),
                    };
                    match entry {
                        Some((frame, ro)) if !(ro && write) => {
                            prop_assert_eq!(got, Ok(PhysAddr(frames[frame].0 | 0x18)));
                            tlb_model.insert(page, (frame, ro));
                        }
                        Some(_) => prop_assert_eq!(
                            got.unwrap_err().kind,
                            FaultKind::Permission { level: 3 }
                        ),
                        None => {
                            let kind = got.unwrap_err().kind;
                            let is_translation = matches!(kind, FaultKind::Translation { .. });
                            prop_assert!(is_translation, "unexpected {:?}", kind);
                            let walked = gpu.walk(0, va, access).unwrap_err().kind;
                            prop_assert_eq!(kind, walked);
                        }
                    }
                }
                MmuOp::LockUnlock { page, pages } => {
                    let lockaddr = LockRegion::encode(va_of(page), pages * 4096).unwrap();
                    let region = LockRegion::decode(lockaddr);
                    gpu.write64(as_reg(0, AS_LOCKADDR_LO), lockaddr);
                    gpu.write32(as_reg(0, AS_COMMAND), as_cmd::LOCK);
                    gpu.write32(as_reg(0, AS_COMMAND), as_cmd::UNLOCK);
                    tlb_model.retain(|p, _| !region.contains(va_of(*p)));
                }
                MmuOp::Update => {
                    gpu.write32(as_reg(0, AS_COMMAND), as_cmd::UPDATE);
                    tlb_model.clear();
                }
            }
            prop_assert_eq!(gpu.tlb_stats(0).unwrap().entries, tlb_model.len());
            for page in 0..PAGES {
                let walked = gpu.walk(0, va_of(page), AccessType::Read).ok().map(|t| t.pa);
                let expected = table_model.get(&page).map(|(f, _)| frames[*f]);
                prop_assert_eq!(walked, expected);
            }
        }
        prop_assert!(gpu.bus_errors().is_empty());
    }
}
