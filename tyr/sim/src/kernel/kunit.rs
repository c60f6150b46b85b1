// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_mali_sim`: the simulated Mali-G610 inside the kernel, its memory from
//! `vmalloc` and its lock a kernel `Mutex`, driven by the test itself as its executor.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_mali_sim)]
mod tests {
    use crate::kernel::{KernelFrames, KernelLocks};
    use crate::regs::{gpu_cmd, gpu_irq, GPU_COMMAND, GPU_ID, GPU_IRQ_MASK, GPU_IRQ_RAWSTAT};
    use crate::{Config, Gpu, MemConfig, PhysAddr, Progress, SimError, SimMemory};
    use ::kernel::alloc::VBox;
    use ::kernel::prelude::*;

    type Memory = SimMemory<KernelFrames, KernelLocks>;

    fn memory(page_limit: Option<usize>) -> Result<Memory> {
        let cfg = MemConfig {
            page_limit,
            ..MemConfig::default()
        };
        SimMemory::with_alloc(cfg, KernelFrames::new(GFP_KERNEL)).map_err(|_| ENOMEM)
    }

    #[test]
    fn memory_from_vmalloc_reads_back_and_runs_out_cleanly() -> Result {
        let mem = memory(Some(4))?;
        let pa = mem.alloc(2).map_err(|_| ENOMEM)?;
        let at = pa.offset(0x1ffc).ok_or(EINVAL)?;
        mem.write_u32(at, 0x1234_5678).map_err(|_| EIO)?;
        assert_eq!(mem.read_u32(at), Ok(0x1234_5678));
        // Fresh frames read as zero.
        assert_eq!(mem.read_u32(pa), Ok(0));
        // Past the page limit: an error, and what was allocated stays as it was.
        assert_eq!(mem.alloc(3), Err(SimError::OutOfMemory));
        assert_eq!(mem.allocated_pages(), 2);
        assert_eq!(mem.free(pa), Ok(2));
        assert_eq!(mem.allocated_pages(), 0);
        assert!(mem.read_u32(PhysAddr(0)).is_err());
        Ok(())
    }

    #[test]
    fn gpu_built_in_place_reports_its_id_and_resets() -> Result {
        let mem = memory(None)?;
        // About 74 KB: built where it lives, in `vmalloc` memory.
        let mut gpu = VBox::init(Gpu::init(Config::g610(), &mem), GFP_KERNEL)?;
        assert_eq!(gpu.read32(GPU_ID), 0xa867_0005);
        gpu.write32(GPU_IRQ_MASK, gpu_irq::RESET_COMPLETED);
        gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
        // The test is the executor: step until the reset's interrupt is raised.
        let mut steps = 0;
        let lines = loop {
            match gpu.step(None) {
                Progress::Irq(lines) => break lines,
                Progress::Advanced { .. } => {}
                Progress::Idle => return Err(ETIMEDOUT),
            }
            steps += 1;
            if steps > 1000 {
                return Err(ETIMEDOUT);
            }
        };
        assert!(lines.contains(crate::IrqLine::Gpu));
        assert_ne!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED, 0);
        assert_eq!(gpu.resets_completed(), 1);
        Ok(())
    }
}
