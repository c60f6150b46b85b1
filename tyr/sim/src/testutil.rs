// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Hand-written page tables for the simulator's own tests.

use super::mem::{PhysAddr, SimMemory};

/// Leaf bits: AF, AP[1] (unprivileged), valid page.
pub(crate) const RW_PAGE: u64 = 1 << 10 | 1 << 6 | 0b11;
/// Read-only page.
pub(crate) const RO_PAGE: u64 = RW_PAGE | 1 << 7;

/// A 48-bit, 4-level table tree built by hand.
pub(crate) struct HandTables {
    pub(crate) root: PhysAddr,
}

impl HandTables {
    pub(crate) fn new(mem: &SimMemory) -> Self {
        HandTables {
            root: mem.alloc(1).unwrap(),
        }
    }

    /// Writes the level-3 descriptor for `va` (allocating tables on the way).
    pub(crate) fn set_page(&self, mem: &SimMemory, va: u64, desc: u64) {
        let mut table = self.root;
        for level in 0..3u32 {
            let shift = 39 - 9 * level;
            let slot = PhysAddr(table.0 + ((va >> shift) & 511) * 8);
            let d = mem.read_u64(slot).unwrap();
            table = if d & 3 == 3 {
                PhysAddr(d & 0x0000_ffff_ffff_f000)
            } else {
                let t = mem.alloc(1).unwrap();
                mem.write_u64(slot, t.0 | 3).unwrap();
                t
            };
        }
        mem.write_u64(PhysAddr(table.0 + ((va >> 12) & 511) * 8), desc)
            .unwrap();
    }

    pub(crate) fn map(&self, mem: &SimMemory, va: u64, pa: PhysAddr, flags: u64) {
        self.set_page(mem, va, pa.0 | flags);
    }

    pub(crate) fn unmap(&self, mem: &SimMemory, va: u64) {
        self.set_page(mem, va, 0);
    }
}
