// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Random VM_BIND sequences through the ioctls, checked after every call page by page
//! against the simulator's MMU (translation through its TLB, permissions from its walker) and
//! against a model of what should be mapped. Some requests are sparse
//! (`DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE`: every page onto the file's 2 MiB sparse backing at the
//! page's offset in its 2M block). Some binds are invalid as a whole (a request past the end of
//! its BO, a sparse request with a BO offset): they must change nothing.

mod driver_common;

use std::collections::BTreeMap;

use driver_common::*;
use proptest::prelude::*;
use tyr::backend::Lock as _;
use tyr::uapi::*;

const BASE: u64 = 0x4000_0000; // 2M aligned
const WINDOW_PAGES: u64 = 1024 + 16;
/// BO sizes in pages: two small ones and one 2M one (2M aligned, so blocks can be used).
const BO_PAGES: [u64; 3] = [16, 8, 512];

#[derive(Clone, Debug)]
enum Req {
    Map {
        bo: usize,
        bo_page: u64,
        page: u64,
        count: u64,
        readonly: bool,
        noexec: bool,
    },
    Unmap {
        page: u64,
        count: u64,
    },
    Sparse {
        page: u64,
        count: u64,
        readonly: bool,
        /// With a BO offset, which a sparse request must not have.
        bad: bool,
    },
}

fn req() -> impl Strategy<Value = Req> {
    prop_oneof![
        4 => (0usize..2, 0u64..20, 0u64..WINDOW_PAGES, 1u64..12, any::<bool>(), any::<bool>())
            .prop_map(|(bo, bo_page, page, count, readonly, noexec)| Req::Map {
                bo, bo_page, page, count, readonly, noexec
            }),
        // Whole 2M blocks of the big BO at 2M-aligned addresses, or unaligned pieces of it.
        2 => (prop_oneof![Just(0u64), Just(512u64), 0u64..WINDOW_PAGES], any::<bool>(), 0u64..8)
            .prop_map(|(page, whole, off)| {
                let (bo_page, count) = if whole { (0, 512) } else { (off * 8, 64) };
                Req::Map { bo: 2, bo_page, page, count, readonly: false, noexec: true }
            }),
        3 => (0u64..WINDOW_PAGES, 1u64..600).prop_map(|(page, count)| Req::Unmap { page, count }),
        // Sparse ranges: anywhere, or whole 2M blocks at 2M-aligned addresses.
        2 => (
            prop_oneof![
                (0u64..WINDOW_PAGES, 1u64..600),
                (prop_oneof![Just(0u64), Just(512u64)], prop_oneof![Just(512u64), Just(1024u64)]),
            ],
            any::<bool>(),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|((page, count), readonly, bad)| Req::Sparse { page, count, readonly, bad }),
    ]
}

fn cases() -> ProptestConfig {
    let mut cfg = ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 64 });
    if cfg!(miri) {
        cfg.failure_persistence = None;
    }
    cfg
}

/// Page -> (physical page, or `None` for the sparse backing; writable, executable).
type Model = BTreeMap<u64, (Option<u64>, bool, bool)>;

proptest! {
    #![proptest_config(cases())]

    #[test]
    #[cfg_attr(miri, ignore)] // a 2M BO per case: minutes under Miri
    fn random_binds_match_the_mmu_and_the_model(
        binds in proptest::collection::vec(
            proptest::collection::vec(req(), 1..4),
            1..if cfg!(miri) { 3 } else { 12 },
        )
    ) {
        let rig = rig();
        let handles: Vec<u32> = BO_PAGES
            .iter()
            .map(|&p| rig.bo_create(p * 4096, 0).unwrap())
            .collect();
        let pas: Vec<u64> = handles.iter().map(|&h| rig.bo_addr(h)).collect();
        let vm = rig.vm_create();
        let slot = rig.activate(vm);
        let mut model = Model::new();

        for bind in binds {
            let mut next = model.clone();
            let mut valid = true;
            let ops: Vec<VmBindOp> = bind
                .iter()
                .map(|r| match *r {
                    Req::Map { bo, bo_page, page, count, readonly, noexec } => {
                        if bo_page + count > BO_PAGES[bo] {
                            valid = false;
                        }
                        for i in 0..count {
                            next.insert(
                                page + i,
                                (Some(pas[bo] + (bo_page + i) * 4096), !readonly, !noexec),
                            );
                        }
                        let mut flags = 0;
                        if readonly {
                            flags |= DRM_PANTHOR_VM_BIND_OP_MAP_READONLY;
                        }
                        if noexec {
                            flags |= DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;
                        }
                        map_op(handles[bo], bo_page * 4096, BASE + page * 4096, count * 4096, flags)
                    }
                    Req::Unmap { page, count } => {
                        for i in 0..count {
                            next.remove(&(page + i));
                        }
                        unmap_op(BASE + page * 4096, count * 4096)
                    }
                    Req::Sparse { page, count, readonly, bad } => {
                        valid &= !bad;
                        for i in 0..count {
                            next.insert(page + i, (None, !readonly, false));
                        }
                        let mut flags = DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE
                            | DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;
                        if readonly {
                            flags |= DRM_PANTHOR_VM_BIND_OP_MAP_READONLY;
                        }
                        let offset = if bad { 0x1000 } else { 0 };
                        map_op(0, offset, BASE + page * 4096, count * 4096, flags)
                    }
                })
                .collect();
            let (err, _) = rig.bind(vm, &ops);
            if valid {
                prop_assert_eq!(err, 0);
                model = next;
            } else {
                prop_assert_eq!(err, -22);
            }
            // The sparse backing, once a sparse bind made it (2M aligned).
            let backing = {
                let v = rig.client.file().inner().vm(vm).unwrap();
                let v = v.guard();
                v.sparse_backing().map(|b| b.0.dma_addr())
            };
            prop_assert!(backing.is_none_or(|b| b % (2 << 20) == 0));
            for p in (0..WINDOW_PAGES + 1600).step_by(SWEEP) {
                let va = BASE + p * 4096;
                let expect = model.get(&p).map(|&(pa, w, x)| {
                    let pa = pa.unwrap_or_else(|| backing.unwrap() + va % (2 << 20));
                    (pa, w, x)
                });
                let r = check_page(rig.gpu(), slot, va, expect);
                prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            }
            prop_assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
        }
        // Everything unmapped at the end frees the tables again.
        prop_assert_eq!(rig.bind(vm, &[unmap_op(0, 1 << 40)]).0, 0);
        for p in (0..WINDOW_PAGES).step_by(7) {
            prop_assert!(check_page(rig.gpu(), slot, BASE + p * 4096, None).is_ok());
        }
        rig.gpu().with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
        // Closing the file and releasing the device gives every page back.
        let gpu = rig.gpu().clone();
        drop(rig);
        prop_assert_eq!(gpu.memory().allocated_pages(), 0);
    }
}

proptest! {
    #![proptest_config(cases())]

    /// CPU writes and reads of a buffer object at any offset and length (whole 64-bit words
    /// in the middle, parts of words at the edges) agree with a byte array, byte for byte, and
    /// what the GPU's memory holds is the same; a range past the end is refused and changes
    /// nothing.
    #[test]
    fn cpu_writes_and_reads_of_a_bo_match_a_byte_array(
        writes in proptest::collection::vec((0u64..0x2100, proptest::collection::vec(any::<u8>(), 0..40)), 1..24),
        reads in proptest::collection::vec((0u64..0x2000, 0usize..40), 1..8),
    ) {
        const SIZE: u64 = 0x2000;
        let rig = rig();
        let h = rig.bo_create(SIZE, 0).unwrap();
        let bo = rig.bo(h);
        let mut model = vec![0u8; SIZE as usize];
        for (off, data) in &writes {
            let r = bo.cpu_write(*off, data);
            if off + data.len() as u64 > SIZE {
                prop_assert!(r.is_err());
            } else {
                prop_assert!(r.is_ok());
                model[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
        for (off, len) in &reads {
            let len = (*len).min((SIZE - off) as usize);
            let mut buf = vec![0xa5u8; len];
            bo.cpu_read(*off, &mut buf).unwrap();
            prop_assert_eq!(&buf[..], &model[*off as usize..*off as usize + len]);
        }
        let mut all = vec![0u8; SIZE as usize];
        rig.gpu().memory().read_bytes(mali_sim::PhysAddr(rig.bo_addr(h)), &mut all).unwrap();
        prop_assert_eq!(all, model);
    }
}
