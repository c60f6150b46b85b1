// SPDX-License-Identifier: GPL-2.0 OR MIT

// A driver that claims to have applied a map op without doing it.

use gpuvm::{Error, GemObject, OpMap, OpMapped, OpRemap, OpRemapped, OpUnmap, OpUnmapped, SmOps};

#[derive(Clone)]
struct Bo;

impl GemObject for Bo {
    fn id(&self) -> u64 {
        0
    }
    fn size(&self) -> u64 {
        0
    }
    fn resv_id(&self) -> u64 {
        0
    }
}

struct Lazy;

impl SmOps<Bo, ()> for Lazy {
    type Error = Error;

    fn sm_step_map<'op>(&mut self, _op: OpMap<'op, Bo, ()>) -> Result<OpMapped<'op>, Error> {
        Ok(OpMapped {
            _p: core::marker::PhantomData,
        })
    }

    fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, Bo, ()>) -> Result<OpUnmapped<'op>, Error> {
        Ok(op.remove().0)
    }

    fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, Bo, ()>) -> Result<OpRemapped<'op>, Error> {
        Ok(op.remap(|_, _| ()).0)
    }
}

fn main() {}
