// SPDX-License-Identifier: GPL-2.0 OR MIT

// The safe map needs exclusive access.
use io_pgtable::host::{Granule, HostAllocator};
use io_pgtable::{Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_4K};

fn main() {
    let mem = HostAllocator::new(Granule::Size4K, 4);
    let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K, 48, 40), &mem, NoFlush).unwrap();
    let shared = &pt;
    let _ = shared.map_pages(0, 0, SZ_4K, 1, Prot::READ);
}
