// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Helpers shared by the integration tests.

#![allow(dead_code, unreachable_pub)]

use gpuvm::{
    BoSlot, CommitOps, Error, GemObject, Gpuvm, IndexNode, Mapping, Op, OpEntry, OpMap, OpMapped,
    OpRemap, OpRemapped, OpUnmap, OpUnmapped, SmOps, Storage, VaSlot, VmConfig,
};

/// Page size used by the tests.
pub const P: u64 = 0x1000;

/// A GEM object: id, size and reservation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bo {
    pub id: u64,
    pub size: u64,
    pub resv: u64,
}

impl GemObject for Bo {
    fn id(&self) -> u64 {
        self.id
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn resv_id(&self) -> u64 {
        self.resv
    }
}

/// A VM-private object (resv 0) of 1 MiB.
pub fn bo(id: u64) -> Bo {
    Bo {
        id,
        size: 1 << 20,
        resv: 0,
    }
}

/// Growable test storage with an optional limit to provoke `NoMemory`.
pub struct VecStore<T> {
    pub v: Vec<T>,
    pub limit: usize,
}

impl<T> VecStore<T> {
    pub fn new(limit: usize) -> Self {
        VecStore {
            v: Vec::new(),
            limit,
        }
    }
}

impl<T> Storage<T> for VecStore<T> {
    type Nodes = VecStore<IndexNode>;
    fn new_nodes(&self) -> Self::Nodes {
        VecStore::new(usize::MAX)
    }
    fn as_slice(&self) -> &[T] {
        &self.v
    }
    fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.v
    }
    fn try_grow(&mut self, additional: usize, fill: fn() -> T) -> Result<(), Error> {
        if self.v.len() + additional > self.limit {
            return Err(Error::NoMemory);
        }
        for _ in 0..additional {
            self.v.push(fill());
        }
        Ok(())
    }
}

pub type Vm = Gpuvm<Bo, u32, VecStore<VaSlot<u32>>, VecStore<BoSlot<Bo>>>;

/// A VM over `[0, 1 GiB)` with unlimited growable storage and `reserve` slots in the pools.
pub fn vm() -> Vm {
    vm_with(VmConfig::new(0, 1 << 30), usize::MAX)
}

pub fn vm_with(cfg: VmConfig, limit: usize) -> Vm {
    let mut vm = Gpuvm::new(cfg, VecStore::new(limit), VecStore::new(limit)).unwrap();
    let _ = vm.reserve(4, 2);
    vm
}

/// An owned mapping description: (addr, range, object id, offset).
pub type M = (u64, u64, Option<u64>, u64);

pub fn m(mp: &Mapping<'_, Bo>) -> M {
    (mp.addr, mp.range, mp.obj.map(|o| o.id), mp.offset)
}

/// An owned op description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rec {
    Map(M),
    Unmap(M, bool),
    Remap(M, Option<M>, Option<M>, bool),
}

pub fn rec(op: &Op<'_, Bo>) -> Rec {
    match op {
        Op::Map(mp) => Rec::Map(m(mp)),
        Op::Unmap { va, keep } => Rec::Unmap(m(va), *keep),
        Op::Remap {
            va,
            prev,
            next,
            keep,
        } => Rec::Remap(m(va), prev.as_ref().map(m), next.as_ref().map(m), *keep),
    }
}

/// A driver that records every op and applies it. New VAs get `tag`, pieces inherit the data
/// of their VA.
#[derive(Default)]
pub struct Recorder {
    pub ops: Vec<Rec>,
    pub tag: u32,
    /// Fail (without applying) at this op index.
    pub fail_at: Option<usize>,
    pub removed: Vec<u32>,
}

impl Recorder {
    fn check_fail(&self) -> Result<(), Error> {
        if self.fail_at == Some(self.ops.len()) {
            Err(Error::Busy)
        } else {
            Ok(())
        }
    }
}

impl SmOps<Bo, u32> for Recorder {
    type Error = Error;

    fn sm_step_map<'op>(&mut self, op: OpMap<'op, Bo, u32>) -> Result<OpMapped<'op>, Error> {
        self.check_fail()?;
        self.ops.push(Rec::Map(m(&op.mapping())));
        Ok(op.insert(self.tag))
    }

    fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, Bo, u32>) -> Result<OpUnmapped<'op>, Error> {
        self.check_fail()?;
        self.ops.push(Rec::Unmap(m(&op.va().mapping()), op.keep()));
        let (done, d) = op.remove();
        self.removed.push(d);
        Ok(done)
    }

    fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, Bo, u32>) -> Result<OpRemapped<'op>, Error> {
        self.check_fail()?;
        self.ops.push(Rec::Remap(
            m(&op.va().mapping()),
            op.prev().as_ref().map(m),
            op.next().as_ref().map(m),
            op.keep(),
        ));
        let (done, d) = op.remap(|old, _| *old);
        self.removed.push(d);
        Ok(done)
    }
}

/// Commit driver: new VAs get consecutive tags from `tags` in op order.
#[derive(Default)]
pub struct Committer {
    pub ops: Vec<Rec>,
    pub tags: Vec<u32>,
}

impl CommitOps<Bo, u32> for Committer {
    fn map<'op>(&mut self, op: OpMap<'op, Bo, u32>) -> OpMapped<'op> {
        self.ops.push(Rec::Map(m(&op.mapping())));
        let t = self.tags.remove(0);
        op.insert(t)
    }

    fn unmap<'op>(&mut self, op: OpUnmap<'op, Bo, u32>) -> OpUnmapped<'op> {
        self.ops.push(Rec::Unmap(m(&op.va().mapping()), op.keep()));
        op.remove().0
    }

    fn remap<'op>(&mut self, op: OpRemap<'op, Bo, u32>) -> OpRemapped<'op> {
        self.ops.push(Rec::Remap(
            m(&op.va().mapping()),
            op.prev().as_ref().map(m),
            op.next().as_ref().map(m),
            op.keep(),
        ));
        op.remap(|old, _| *old).0
    }
}

/// Everything observable about a VM apart from the size of its free pools (planning a batch
/// may grow them; that memory stays with the VM for later use).
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub vas: Vec<(M, u32, u32)>,
    pub bos: Vec<(u64, Vec<M>, bool, bool)>,
    pub extobjs: Vec<u64>,
    pub evicted: Vec<u64>,
}

pub fn snapshot(vm: &Vm) -> Snapshot {
    Snapshot {
        vas: vm
            .iter()
            .map(|va| (m(&va.mapping()), va.flags(), *va.data().unwrap()))
            .collect(),
        bos: vm
            .vm_bos()
            .map(|b| {
                (
                    b.obj().id,
                    b.vas().map(|va| m(&va.mapping())).collect(),
                    b.is_extobj(),
                    b.is_evicted(),
                )
            })
            .collect(),
        extobjs: vm.extobjs().map(|o| o.id).collect(),
        evicted: vm.evicted().map(|o| o.id).collect(),
    }
}

/// The VAs as owned descriptions.
pub fn vas(vm: &Vm) -> Vec<M> {
    vm.iter().map(|va| m(&va.mapping())).collect()
}

/// Maps with the recorder and returns the ops.
pub fn sm_map(vm: &mut Vm, req: Mapping<'_, Bo>) -> Vec<Rec> {
    let mut r = Recorder::default();
    vm.reserve(2, 1).unwrap();
    vm.sm_map(&mut r, req).unwrap();
    r.ops
}

pub fn sm_unmap(vm: &mut Vm, addr: u64, range: u64) -> Vec<Rec> {
    let mut r = Recorder::default();
    vm.sm_unmap(&mut r, addr, range).unwrap();
    r.ops
}

pub fn ops_buf() -> VecStore<OpEntry> {
    VecStore::new(usize::MAX)
}
