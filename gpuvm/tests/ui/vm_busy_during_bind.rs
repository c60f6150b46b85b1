// SPDX-License-Identifier: GPL-2.0 OR MIT

// The VM cannot be changed behind an open VM_BIND batch.

use gpuvm::{BoSlot, GemObject, Gpuvm, Mapping, OpEntry, VaSlot, VmConfig};

#[derive(Clone)]
struct Bo;

impl GemObject for Bo {
    fn id(&self) -> u64 {
        0
    }
    fn size(&self) -> u64 {
        1 << 20
    }
    fn resv_id(&self) -> u64 {
        0
    }
}

fn main() {
    let vas: [VaSlot<()>; 8] = core::array::from_fn(|_| VaSlot::new());
    let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 20), vas, [BoSlot::<Bo>::new()]).unwrap();
    let mut ops = [OpEntry::new(); 4];
    let mut bind = vm.bind(&mut ops).unwrap();
    bind.unmap(0, 0x1000).unwrap();
    vm.map(Mapping::sparse(0, 0x1000), ()).unwrap();
    drop(bind);
}
