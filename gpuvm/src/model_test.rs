// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Model-based property test: random map / unmap / VM_BIND batch / evict / validate sequences
//! against a sorted list of ranges.
//!
//! After every step the VM's mappings, its VM-BOs (VA lists, external and evicted lists) and the
//! ops it emitted must agree with the model. The expected ops are derived from the model
//! independently of the split/merge code: every overlapped range in address order becomes an
//! unmap (covered entirely) or a remap (with the pieces outside the request), `keep` holds when
//! the range is backed by the requested object at the same object-to-VA displacement, and a map
//! request ends with its map op.

use std::vec::Vec;

use proptest::prelude::*;

use crate::{
    BoSlot, CommitOps, Error, GemObject, Gpuvm, IndexNode, Mapping, Op, OpMap, OpMapped, OpRemap,
    OpRemapped, OpUnmap, OpUnmapped, SmOps, Storage, VaSlot, VmConfig,
};

const P: u64 = 0x1000;
const VM_PAGES: u64 = 64;
const RES: (u64, u64) = (48, 52);

#[derive(Clone, Debug)]
struct Bo(u64);

impl GemObject for Bo {
    fn id(&self) -> u64 {
        self.0
    }
    fn size(&self) -> u64 {
        32 * P
    }
    fn resv_id(&self) -> u64 {
        // Objects 3 and 4 are external.
        if self.0 >= 3 {
            9
        } else {
            0
        }
    }
}

struct TVec<T>(Vec<T>, usize);

impl<T> Storage<T> for TVec<T> {
    type Nodes = TVec<IndexNode>;
    fn new_nodes(&self) -> Self::Nodes {
        TVec(Vec::new(), usize::MAX)
    }
    fn as_slice(&self) -> &[T] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.0
    }
    fn try_grow(&mut self, n: usize, fill: fn() -> T) -> Result<(), Error> {
        if self.0.len() + n > self.1 {
            return Err(Error::NoMemory);
        }
        self.0.extend((0..n).map(|_| fill()));
        Ok(())
    }
}

type Vm = Gpuvm<Bo, u32, TVec<VaSlot<u32>>, TVec<BoSlot<Bo>>>;

/// (addr, range, object id, offset, flags, tag)
type MVa = (u64, u64, Option<u64>, u64, u32, u32);
type MM = (u64, u64, Option<u64>, u64);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rec {
    Map(MM),
    Unmap(MM, bool),
    Remap(MM, Option<MM>, Option<MM>, bool),
}

fn mm(m: &Mapping<'_, Bo>) -> MM {
    (m.addr, m.range, m.obj.map(|o| o.0), m.offset)
}

fn rec(op: &Op<'_, Bo>) -> Rec {
    match op {
        Op::Map(m) => Rec::Map(mm(m)),
        Op::Unmap { va, keep } => Rec::Unmap(mm(va), *keep),
        Op::Remap {
            va,
            prev,
            next,
            keep,
        } => Rec::Remap(mm(va), prev.as_ref().map(mm), next.as_ref().map(mm), *keep),
    }
}

struct Driver {
    ops: Vec<Rec>,
    tags: Vec<u32>,
}

impl Driver {
    fn new(tags: Vec<u32>) -> Self {
        Driver {
            ops: Vec::new(),
            tags,
        }
    }
}

impl SmOps<Bo, u32> for Driver {
    type Error = Error;
    fn sm_step_map<'op>(&mut self, op: OpMap<'op, Bo, u32>) -> Result<OpMapped<'op>, Error> {
        Ok(CommitOps::map(self, op))
    }
    fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, Bo, u32>) -> Result<OpUnmapped<'op>, Error> {
        Ok(CommitOps::unmap(self, op))
    }
    fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, Bo, u32>) -> Result<OpRemapped<'op>, Error> {
        Ok(CommitOps::remap(self, op))
    }
}

impl CommitOps<Bo, u32> for Driver {
    fn map<'op>(&mut self, op: OpMap<'op, Bo, u32>) -> OpMapped<'op> {
        self.ops.push(Rec::Map(mm(&op.mapping())));
        let tag = self.tags.remove(0);
        op.insert(tag)
    }
    fn unmap<'op>(&mut self, op: OpUnmap<'op, Bo, u32>) -> OpUnmapped<'op> {
        self.ops.push(Rec::Unmap(mm(&op.va().mapping()), op.keep()));
        op.remove().0
    }
    fn remap<'op>(&mut self, op: OpRemap<'op, Bo, u32>) -> OpRemapped<'op> {
        self.ops.push(Rec::Remap(
            mm(&op.va().mapping()),
            op.prev().as_ref().map(mm),
            op.next().as_ref().map(mm),
            op.keep(),
        ));
        op.remap(|old, _| *old).0
    }
}

#[derive(Clone, Debug)]
enum Req {
    Map {
        addr: u64,
        pages: u64,
        obj: Option<u64>,
        off: u64,
        flags: u32,
    },
    Unmap {
        addr: u64,
        pages: u64,
    },
}

#[derive(Clone, Debug)]
enum Step {
    One(Req),
    Madvise(Req),
    Batch(Vec<Req>, bool, usize),
    Evict(u64, bool),
    Validate,
}

fn req() -> impl Strategy<Value = Req> {
    prop_oneof![
        3 => (0..VM_PAGES + 2, 1u64..12, prop::option::weighted(0.85, 1u64..=4), 0u64..24, 0u32..3)
            .prop_map(|(addr, pages, obj, off, flags)| Req::Map { addr, pages, obj, off, flags }),
        1 => (0..VM_PAGES + 2, 1u64..20).prop_map(|(addr, pages)| Req::Unmap { addr, pages }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => req().prop_map(Step::One),
        1 => req().prop_filter("map", |r| matches!(r, Req::Map { .. })).prop_map(Step::Madvise),
        2 => (prop::collection::vec(req(), 1..6), any::<bool>(), 0usize..24)
            .prop_map(|(r, c, l)| Step::Batch(r, c, l)),
        1 => (1u64..=4, any::<bool>()).prop_map(|(o, e)| Step::Evict(o, e)),
        1 => Just(Step::Validate),
    ]
}

/// The reference: sorted, non-overlapping ranges plus the evicted objects in order.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    vas: Vec<MVa>,
    evicted: Vec<u64>,
}

impl Model {
    fn check(&self, addr: u64, range: u64) -> Result<u64, Error> {
        let end = addr + range;
        if end > VM_PAGES * P {
            Err(Error::OutOfVm)
        } else if addr < RES.1 * P && RES.0 * P < end {
            Err(Error::KernelReserved)
        } else {
            Ok(end)
        }
    }

    fn overlapping(&self, addr: u64, end: u64) -> Vec<MVa> {
        self.vas
            .iter()
            .copied()
            .filter(|v| v.0 < end && addr < v.0 + v.1)
            .collect()
    }

    /// The ops a request must produce, and the model after it.
    fn apply(&mut self, r: &Req, tag: u32) -> Result<Vec<Rec>, Error> {
        let (addr, range, map) = match *r {
            Req::Map {
                addr,
                pages,
                obj,
                off,
                flags,
            } => {
                if obj.is_some() && (off + pages) * P > 32 * P {
                    self.check(addr * P, pages * P)?;
                    return Err(Error::OutOfObject);
                }
                (addr * P, pages * P, Some((obj, off * P, flags)))
            }
            Req::Unmap { addr, pages } => (addr * P, pages * P, None),
        };
        let end = self.check(addr, range)?;
        let mut ops = Vec::new();
        for v in self.overlapping(addr, end) {
            let (va, vr, vo, voff, vf, vt) = v;
            let vend = va + vr;
            let keep = match map {
                Some((obj, off, _)) => {
                    vo.is_some() && vo == obj && voff.wrapping_sub(va) == off.wrapping_sub(addr)
                }
                None => false,
            };
            let prev = (va < addr).then(|| (va, addr - va, vo, voff));
            let next = (vend > end).then(|| (end, vend - end, vo, voff + (end - va)));
            self.vas.retain(|x| *x != v);
            for p in [prev, next].into_iter().flatten() {
                self.vas.push((p.0, p.1, p.2, p.3, vf, vt));
            }
            ops.push(if prev.is_none() && next.is_none() {
                Rec::Unmap((va, vr, vo, voff), keep)
            } else {
                Rec::Remap((va, vr, vo, voff), prev, next, keep)
            });
        }
        if let Some((obj, off, flags)) = map {
            let off = if obj.is_some() { off } else { 0 };
            self.vas.push((addr, range, obj, off, flags, tag));
            ops.push(Rec::Map((addr, range, obj, off)));
        }
        self.vas.sort();
        Ok(ops)
    }

    /// The ops of a madvise request (split sparse VAs at the request's bounds, map the part
    /// inside again), and the model after it.
    fn madvise(&mut self, r: &Req, tag: u32) -> Result<Vec<Rec>, Error> {
        let Req::Map {
            addr,
            pages,
            obj,
            off,
            flags,
        } = *r
        else {
            unreachable!()
        };
        let (addr, range) = (addr * P, pages * P);
        let end = self.check(addr, range)?;
        if obj.is_some() && (off + pages) * P > 32 * P {
            return Err(Error::OutOfObject);
        }
        let mut ops = Vec::new();
        for v in self.overlapping(addr, end) {
            let (va, vr, vo, voff, vf, vt) = v;
            let vend = va + vr;
            if vo.is_some() || (va >= addr && vend <= end) {
                continue;
            }
            let prev = (va < addr).then(|| (va, addr - va, None, voff));
            let next = (vend > end).then(|| (end, vend - end, None, voff + (end - va)));
            let inner = if va <= addr && vend >= end {
                let off = if obj.is_some() { off * P } else { 0 };
                (addr, range, obj, off, flags)
            } else {
                let (s, e) = (va.max(addr), vend.min(end));
                (s, e - s, None, 0, 0)
            };
            self.vas.retain(|x| *x != v);
            for p in [prev, next].into_iter().flatten() {
                self.vas.push((p.0, p.1, p.2, p.3, vf, vt));
            }
            self.vas
                .push((inner.0, inner.1, inner.2, inner.3, inner.4, tag));
            ops.push(Rec::Remap((va, vr, vo, voff), prev, next, false));
            ops.push(Rec::Map((inner.0, inner.1, inner.2, inner.3)));
        }
        self.vas.sort();
        Ok(ops)
    }

    /// VM-BOs without VAs are destroyed at the end of an operation, and with them their
    /// evicted state.
    fn drop_unbound(&mut self) {
        let vas = &self.vas;
        self.evicted.retain(|o| vas.iter().any(|v| v.2 == Some(*o)));
    }
}

fn mapping<'a>(r: &Req, objs: &'a [Bo]) -> Option<Mapping<'a, Bo>> {
    match *r {
        Req::Map {
            addr,
            pages,
            obj,
            off,
            flags,
        } => Some(
            match obj {
                Some(o) => Mapping::new(addr * P, pages * P, &objs[o as usize], off * P),
                None => Mapping::sparse(addr * P, pages * P),
            }
            .with_flags(flags),
        ),
        Req::Unmap { .. } => None,
    }
}

fn compare(vm: &Vm, model: &Model, objs: &[Bo]) {
    vm.check_invariants();
    let got: Vec<MVa> = vm
        .iter()
        .map(|v| {
            (
                v.addr(),
                v.range(),
                v.obj().map(|o| o.0),
                v.offset(),
                v.flags(),
                *v.data().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, model.vas);
    for o in &objs[1..] {
        let want: Vec<MM> = model
            .vas
            .iter()
            .filter(|v| v.2 == Some(o.0))
            .map(|v| (v.0, v.1, v.2, v.3))
            .collect();
        match vm.vm_bo(o) {
            None => assert!(want.is_empty()),
            Some(b) => {
                let mut have: Vec<MM> = b.vas().map(|v| mm(&v.mapping())).collect();
                have.sort();
                assert_eq!(have, want);
                assert_eq!(b.is_extobj(), o.0 >= 3);
                assert_eq!(b.is_evicted(), model.evicted.contains(&o.0));
            }
        }
    }
    let mut ext: Vec<u64> = vm.extobjs().map(|o| o.0).collect();
    ext.sort();
    let mut want_ext: Vec<u64> = model
        .vas
        .iter()
        .filter_map(|v| v.2)
        .filter(|&o| o >= 3)
        .collect();
    want_ext.sort();
    want_ext.dedup();
    assert_eq!(ext, want_ext);
    assert_eq!(vm.evicted().map(|o| o.0).collect::<Vec<_>>(), model.evicted);
}

type Snap = (Vec<MVa>, Vec<(u64, usize, bool, bool)>, Vec<u64>, Vec<u64>);

fn snap(vm: &Vm) -> Snap {
    (
        vm.iter()
            .map(|v| {
                (
                    v.addr(),
                    v.range(),
                    v.obj().map(|o| o.0),
                    v.offset(),
                    v.flags(),
                    *v.data().unwrap(),
                )
            })
            .collect(),
        vm.vm_bos()
            .map(|b| (b.obj().0, b.va_count(), b.is_extobj(), b.is_evicted()))
            .collect(),
        vm.extobjs().map(|o| o.0).collect(),
        vm.evicted().map(|o| o.0).collect(),
    )
}

fn run(steps: Vec<Step>) {
    let objs: Vec<Bo> = (0..=4).map(Bo).collect();
    let cfg = VmConfig::new(0, VM_PAGES * P)
        .reserve(RES.0 * P, (RES.1 - RES.0) * P)
        .align(P);
    let mut vm: Vm = Gpuvm::new(cfg, TVec(Vec::new(), usize::MAX), TVec(Vec::new(), 8)).unwrap();
    let mut model = Model::default();
    for (n, s) in steps.into_iter().enumerate() {
        let tag = n as u32 * 100;
        match s {
            Step::One(r) => {
                let mut next = model.clone();
                let want = next.apply(&r, tag);
                let mut d = Driver::new(std::vec![tag]);
                let got = match mapping(&r, &objs) {
                    Some(m) => vm.reserve(2, 1).and_then(|_| vm.sm_map(&mut d, m)),
                    None => match r {
                        Req::Unmap { addr, pages } => vm
                            .reserve(1, 0)
                            .and_then(|_| vm.sm_unmap(&mut d, addr * P, pages * P)),
                        Req::Map { .. } => unreachable!(),
                    },
                };
                match want {
                    Ok(ops) => {
                        assert_eq!(got, Ok(()));
                        assert_eq!(d.ops, ops);
                        model = next;
                    }
                    Err(e) => {
                        assert_eq!(got, Err(e));
                        assert!(d.ops.is_empty());
                    }
                }
            }
            Step::Madvise(r) => {
                let mut next = model.clone();
                let want = next.madvise(&r, tag);
                let mut d = Driver::new(std::vec![tag; 2]);
                let got = match mapping(&r, &objs) {
                    Some(m) => vm.reserve(2, 1).and_then(|_| vm.sm_madvise(&mut d, m)),
                    None => unreachable!(),
                };
                match want {
                    Ok(ops) => {
                        assert_eq!(got, Ok(()));
                        assert_eq!(d.ops, ops);
                        model = next;
                    }
                    Err(e) => {
                        assert_eq!(got, Err(e));
                        assert!(d.ops.is_empty());
                    }
                }
            }
            Step::Batch(reqs, commit, limit) => {
                let before = snap(&vm);
                let mut next = model.clone();
                let mut want_ops = Vec::new();
                let mut tags = Vec::new();
                let mut store = TVec(Vec::new(), limit);
                let mut bind = vm.bind(&mut store).unwrap();
                for (j, r) in reqs.iter().enumerate() {
                    let t = tag + j as u32;
                    let mut trial = next.clone();
                    let want = trial.apply(r, t);
                    let got = match mapping(r, &objs) {
                        Some(m) => bind.map(m),
                        None => match *r {
                            Req::Unmap { addr, pages } => bind.unmap(addr * P, pages * P),
                            Req::Map { .. } => unreachable!(),
                        },
                    };
                    match want {
                        Ok(ops) if want_ops.len() + ops.len() <= limit => {
                            assert_eq!(got, Ok(()));
                            if matches!(r, Req::Map { .. }) {
                                tags.push(t);
                            }
                            want_ops.extend(ops);
                            next = trial;
                        }
                        Ok(_) => assert_eq!(got, Err(Error::NoMemory)),
                        Err(e) => assert_eq!(got, Err(e)),
                    }
                    let planned: Vec<Rec> = bind.ops().map(|o| rec(&o)).collect();
                    assert_eq!(planned, want_ops);
                }
                if commit {
                    let mut d = Driver::new(tags);
                    bind.commit(&mut d);
                    assert_eq!(d.ops, want_ops);
                    model = next;
                } else {
                    drop(bind);
                    assert_eq!(snap(&vm), before);
                }
            }
            Step::Evict(o, e) => {
                let present = model.vas.iter().any(|v| v.2 == Some(o));
                let got = vm.bo_evict(&objs[o as usize], e);
                if !present {
                    assert_eq!(got, Err(Error::NotFound));
                } else {
                    assert_eq!(got, Ok(()));
                    let has = model.evicted.contains(&o);
                    if e && !has {
                        model.evicted.push(o);
                    } else if !e {
                        model.evicted.retain(|x| *x != o);
                    }
                }
            }
            Step::Validate => {
                let mut seen = Vec::new();
                vm.validate(|o| {
                    seen.push(o.0);
                    Ok::<(), ()>(())
                })
                .unwrap();
                assert_eq!(seen, model.evicted);
                model.evicted.clear();
            }
        }
        model.drop_unbound();
        compare(&vm, &model, &objs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Miri isolates the test from the file system: no failure persistence there.
        failure_persistence: if cfg!(miri) {
            None
        } else {
            ProptestConfig::default().failure_persistence
        },
        ..ProptestConfig::with_cases(if cfg!(miri) { 3 } else { 400 })
    })]

    #[test]
    fn vm_matches_model(steps in prop::collection::vec(step(), 1..if cfg!(miri) { 12 } else { 60 })) {
        run(steps);
    }
}
