// SPDX-License-Identifier: GPL-2.0 OR MIT

// A TCR/MAIR is meaningless for the Mali LPAE format.
use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::{ArmMaliLpae, Config, NoFlush, PageTable, SZ_4K};

fn main() {
    let mem = HostAllocator::new(Granule::Size4K, 1);
    let pt = PageTable::<ArmMaliLpae, _>::new(Config::new(SZ_4K, 48, 40), &mem, NoFlush).unwrap();
    let _ = pt.s1_regs();
}
