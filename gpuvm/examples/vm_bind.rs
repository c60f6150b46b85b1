// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A `VM_BIND` batch that maps over the middle of an existing mapping.
//!
//! A GPU VM tracks which GEM object (BO) backs each range of GPU virtual addresses. When user
//! space binds a new BO over part of an existing mapping, the VM manager plans the change as
//! ops in the order `drm_gpuvm` uses: the old mapping is *remapped* (split into the pieces
//! before and after the request, `prev` and `next`) and the new one is mapped. The driver
//! inspects the plan (to preallocate page-table memory), then commits it, updating its page
//! tables op by op. Here the "page tables" are a map from GPU page to (BO, offset), checked
//! against a reference built by applying the requests naively page by page. A request into
//! the kernel-reserved region is refused with its errno and changes nothing.

use std::collections::BTreeMap;

use gpuvm::{BoSlot, CommitOps, GemObject, Gpuvm, Mapping, Op, OpEntry, OpMap, OpMapped};
use gpuvm::{OpRemap, OpRemapped, OpUnmap, OpUnmapped, VaSlot, VmConfig};

const PAGE: u64 = 0x1000;

#[derive(Clone, Debug)]
struct Bo {
    name: char,
    size: u64,
}

impl GemObject for Bo {
    fn id(&self) -> u64 {
        u64::from(self.name)
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn resv_id(&self) -> u64 {
        0 // shares the VM's reservation object
    }
}

/// Simulated GPU page tables: GPU page -> (BO, byte offset in the BO).
#[derive(Default)]
struct PageTables(BTreeMap<u64, (char, u64)>);

impl PageTables {
    fn set(&mut self, m: &Mapping<'_, Bo>) {
        for p in (0..m.range).step_by(PAGE as usize) {
            let bo = m.obj.map_or('-', |b| b.name);
            self.0.insert(m.addr + p, (bo, m.offset + p));
        }
    }
    fn clear(&mut self, addr: u64, range: u64) {
        (addr..addr + range).step_by(PAGE as usize).for_each(|p| {
            self.0.remove(&p);
        });
    }
}

impl CommitOps<Bo, ()> for PageTables {
    fn map<'op>(&mut self, op: OpMap<'op, Bo, ()>) -> OpMapped<'op> {
        self.set(&op.mapping());
        op.insert(())
    }
    fn unmap<'op>(&mut self, op: OpUnmap<'op, Bo, ()>) -> OpUnmapped<'op> {
        if !op.keep() {
            self.clear(op.va().addr(), op.va().range());
        }
        op.remove().0
    }
    fn remap<'op>(&mut self, op: OpRemap<'op, Bo, ()>) -> OpRemapped<'op> {
        let (va, prev, next) = (op.va(), op.prev(), op.next());
        let start = prev.map_or(va.addr(), |p| p.end());
        let end = next.map_or(va.end(), |n| n.addr);
        if !op.keep() {
            self.clear(start, end - start);
        }
        op.remap(|_, _| ()).0
    }
}

fn show(m: &Mapping<'_, Bo>) -> String {
    let bo = m.obj.map_or('-', |b| b.name);
    format!(
        "[{:#08x}..{:#08x}) BO {bo} @ +{:#x}",
        m.addr,
        m.end(),
        m.offset
    )
}

fn main() -> Result<(), String> {
    const VA_BITS: u32 = 48;
    let reserved = (1u64 << VA_BITS) - (1 << 32); // the top 4 GiB belong to the kernel
    let cfg = VmConfig::new(0, 1 << VA_BITS)
        .reserve(reserved, 1 << 32)
        .align(PAGE);
    let vas: [VaSlot<()>; 32] = core::array::from_fn(|_| VaSlot::new());
    let bos: [BoSlot<Bo>; 4] = core::array::from_fn(|_| BoSlot::new());
    let mut vm = Gpuvm::new(cfg, vas, bos).map_err(|e| e.to_string())?;
    let bo = |name, size| Bo { name, size };
    let (a, b) = (bo('A', 0x10_0000), bo('B', 0x4_0000));
    let (mut pts, mut reference) = (PageTables::default(), PageTables::default());
    let mut ops = [OpEntry::new(); 8];

    let batches = [
        vec![
            Mapping::new(0x10_0000, 0x10_0000, &a, 0),
            Mapping::new(0x40_0000, 0x4_0000, &b, 0),
        ],
        vec![Mapping::new(0x14_0000, 0x2_0000, &b, 0x1_0000)], // over the middle of A
    ];
    for (n, batch) in batches.iter().enumerate() {
        let mut bind = vm.bind(&mut ops).map_err(|e| e.to_string())?;
        for req in batch {
            println!("VM_BIND #{n}: map {}", show(req));
            bind.map(*req).map_err(|e| format!("plan: {e}"))?;
            reference.set(req);
        }
        println!("  planned ops:");
        let mut split = false;
        for op in bind.ops() {
            match op {
                Op::Map(m) => println!("    map   {}", show(&m)),
                Op::Unmap { va, keep } => println!("    unmap {} keep={keep}", show(&va)),
                Op::Remap {
                    va,
                    prev,
                    next,
                    keep,
                } => {
                    println!("    remap {} keep={keep}", show(&va));
                    for (label, piece) in [("prev", prev), ("next", next)] {
                        if let Some(p) = piece {
                            println!("          {label} {}", show(&p));
                        }
                    }
                    split |= prev.is_some() && next.is_some();
                }
            }
        }
        if n == 1 && (!split || bind.len() != 2) {
            return Err("expected a remap with prev and next, then a map".into());
        }
        bind.commit(&mut pts);
    }

    println!("mappings after commit:");
    let mut from_vm = PageTables::default();
    for va in vm.iter() {
        println!("    {}", show(&va.mapping()));
        from_vm.set(&va.mapping());
    }
    if pts.0 != reference.0 || from_vm.0 != reference.0 || vm.len() != 4 {
        return Err("page tables or VM disagree with the page-by-page reference".into());
    }
    println!("page tables ({} pages) match the reference", pts.0.len());

    // A request into the kernel-reserved region: refused, nothing planned or changed.
    let mut bind = vm.bind(&mut ops).map_err(|e| e.to_string())?;
    match bind.map(Mapping::new(reserved - PAGE, 2 * PAGE, &a, 0)) {
        Err(e @ gpuvm::Error::KernelReserved) => println!(
            "map at {:#x}: refused: {e} (errno {})",
            reserved - PAGE,
            e.to_errno()
        ),
        other => return Err(format!("reserved-region request gave {other:?}")),
    }
    if !bind.is_empty() {
        return Err("the refused request left ops behind".into());
    }
    drop(bind);
    if vm.len() != 4 {
        return Err("the refused request changed the VM".into());
    }
    println!("all checks passed");
    Ok(())
}
