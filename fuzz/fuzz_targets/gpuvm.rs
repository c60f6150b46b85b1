// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `gpuvm` map/unmap sequences (object-backed and sparse mappings over whatever is there)
//! against a model with one entry per page: which object and object page backs it, and the
//! data of the request that mapped it.
//!
//! Checked after every step: a request the model calls invalid fails and changes nothing; a
//! valid one succeeds; the VAs are sorted and disjoint and, page by page, say exactly what the
//! model says (split VAs keep their data, as drm_gpuvm's remap keeps the pieces); `find` and
//! `find_containing` agree with the list.

#![no_main]

use std::collections::BTreeMap;

use gpuvm::{BoSlot, Error, GemObject, Gpuvm, Mapping, VaSlot, VmConfig};
use libfuzzer_sys::fuzz_target;

const P: u64 = 0x1000;
const BASE: u64 = 0x10_0000;
const PAGES: u64 = 256;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Bo {
    id: u64,
    size: u64,
}

impl GemObject for Bo {
    fn id(&self) -> u64 {
        self.id
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn resv_id(&self) -> u64 {
        0
    }
}

type Vm = Gpuvm<Bo, u32, Vec<VaSlot<u32>>, Vec<BoSlot<Bo>>>;

/// Page -> (object id or `None` for sparse, object page, data).
type Model = BTreeMap<u64, (Option<u64>, u64, u32)>;

fn pages_of(vm: &Vm) -> Model {
    let mut out = Model::new();
    let mut last_end = 0;
    for va in vm.iter() {
        assert!(va.addr() >= last_end, "VAs overlap or are out of order");
        assert!(va.range() > 0 && va.addr() % P == 0 && va.range() % P == 0);
        last_end = va.addr() + va.range();
        let data = *va.data().expect("every VA carries data");
        assert_eq!(va.is_sparse(), va.obj().is_none());
        for i in 0..va.range() / P {
            let page = (va.addr() - BASE) / P + i;
            out.insert(page, (va.obj().map(|o| o.id), va.offset() / P + i, data));
        }
        assert_eq!(
            vm.find(va.addr(), va.range())
                .map(|f| (f.addr(), f.range())),
            Some((va.addr(), va.range()))
        );
        assert_eq!(
            vm.find_containing(va.addr() + va.range() - 1)
                .map(|f| f.addr()),
            Some(va.addr())
        );
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let bos: Vec<Bo> = (1..=3)
        .map(|id| Bo {
            id,
            size: 16 * id * P,
        })
        .collect();
    let cfg = VmConfig::new(BASE, PAGES * P).align(P);
    let mut vm: Vm = Gpuvm::new(cfg, Vec::new(), Vec::new()).unwrap();
    let mut model = Model::new();
    for (n, step) in data.chunks_exact(5).take(64).enumerate() {
        let tag = n as u32;
        let page = u64::from(step[1]) + u64::from(step[0] >> 7) * 8;
        let count = u64::from(step[2] % 40);
        let offset = u64::from(step[3] % 48);
        let obj = &bos[usize::from(step[4]) % 3];
        let addr = BASE + page * P;
        let in_vm = count > 0 && page + count <= PAGES;
        match step[0] % 3 {
            0 | 1 => {
                let sparse = step[0] % 3 == 1 && step[4] & 0x80 != 0;
                let req = if sparse {
                    Mapping::sparse(addr, count * P)
                } else {
                    Mapping::new(addr, count * P, obj, offset * P)
                };
                let valid = in_vm && (sparse || (offset + count) * P <= obj.size);
                let res = vm.map(req, tag);
                if valid {
                    assert_eq!(res, Ok(()), "map {page}+{count} failed");
                    for i in 0..count {
                        let backing = if sparse { None } else { Some(obj.id) };
                        model.insert(page + i, (backing, offset + i, tag));
                    }
                } else {
                    assert!(res.is_err(), "invalid map {page}+{count} accepted");
                }
            }
            _ => {
                let res = vm.unmap(addr, count * P);
                if in_vm {
                    assert_eq!(res, Ok(()));
                    for i in 0..count {
                        model.remove(&(page + i));
                    }
                } else {
                    assert!(matches!(
                        res,
                        Err(Error::ZeroRange | Error::OutOfVm | Error::Overflow)
                    ));
                }
            }
        }
        let got = pages_of(&vm);
        // Sparse pages carry no object page: compare them without it.
        let norm = |m: &Model| -> Model {
            m.iter()
                .map(|(p, (o, off, d))| (*p, (*o, if o.is_some() { *off } else { 0 }, *d)))
                .collect()
        };
        assert_eq!(norm(&got), norm(&model), "after step {n}");
    }
});
