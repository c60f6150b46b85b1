// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Hand-written page tables for the simulator's own tests.

use std::vec::Vec;

use super::mem::{PhysAddr, PhysMemory, SimMemory};
use super::{regs, Gpu, IrqLine, Progress};

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

/// The test as the GPU's executor: steps until the GPU is idle, serving each interrupt by
/// clearing every bit of its `STATUS`. Returns the lines served, in order, and the steps that
/// moved time. Fails the test if the GPU does not settle within `max_steps`.
pub(crate) fn run_to_idle<M: PhysMemory>(
    gpu: &mut Gpu<M>,
    max_steps: usize,
) -> (Vec<IrqLine>, usize) {
    let mut served = Vec::new();
    let mut advanced = 0;
    let mut last = gpu.now_ns();
    for _ in 0..max_steps {
        match gpu.step(None) {
            Progress::Irq(lines) => {
                assert!(!lines.is_empty());
                for line in lines.iter() {
                    let (status, clear) = match line {
                        IrqLine::Gpu => (regs::GPU_IRQ_STATUS, regs::GPU_IRQ_CLEAR),
                        IrqLine::Job => (regs::JOB_IRQ_STATUS, regs::JOB_IRQ_CLEAR),
                        IrqLine::Mmu => (regs::MMU_IRQ_STATUS, regs::MMU_IRQ_CLEAR),
                    };
                    let bits = gpu.read32(status);
                    gpu.write32(clear, bits);
                    served.push(line);
                }
            }
            Progress::Advanced { now_ns } => {
                assert!(now_ns >= last, "time never goes back");
                assert_eq!(now_ns, gpu.now_ns());
                last = now_ns;
                advanced += 1;
            }
            Progress::Idle => return (served, advanced),
        }
    }
    panic!("the GPU did not settle in {max_steps} steps");
}
