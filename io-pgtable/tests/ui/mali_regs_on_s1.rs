// SPDX-License-Identifier: GPL-2.0 OR MIT

// The Mali LPAE registers exist only for `ArmMaliLpae` tables.
use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::{Arm64LpaeS1, Config, NoFlush, PageTable, SZ_4K};

fn main() {
    let mem = HostAllocator::new(Granule::Size4K, 1);
    let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K, 48, 40), &mem, NoFlush).unwrap();
    let _ = pt.mali_lpae_regs();
}
