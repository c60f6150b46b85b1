// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The probe sequence Tyr runs (soft reset, L2 power-on, GPU info, model lookup), driven
//! against the simulator through a shared handle with poll loops that advance simulated
//! time, including the failures a driver must report.

use mali_sim::regs::{self, gpu_cmd, gpu_irq};
use mali_sim::{Config, Gpu, SharedGpu};

#[derive(Debug, PartialEq)]
enum ProbeError {
    ResetTimeout,
    PowerTimeout,
    UnknownGpu(u32),
}

/// Poll interval (coarser under Miri, where every iteration is expensive).
const POLL_NS: u64 = if cfg!(miri) { 100_000 } else { 1_000 };

/// Polls `cond` every `POLL_NS` of simulated time, for at most `timeout_ns`.
fn poll(gpu: &SharedGpu, timeout_ns: u64, mut cond: impl FnMut(&SharedGpu) -> bool) -> bool {
    let deadline = gpu.now_ns() + timeout_ns;
    loop {
        if cond(gpu) {
            return true;
        }
        if gpu.now_ns() >= deadline {
            return false;
        }
        gpu.advance(POLL_NS);
    }
}

fn probe(gpu: &SharedGpu) -> Result<&'static str, ProbeError> {
    gpu.write32(regs::GPU_IRQ_CLEAR, gpu_irq::RESET_COMPLETED);
    gpu.write32(regs::GPU_COMMAND, gpu_cmd::SOFT_RESET);
    if !poll(gpu, 100_000_000, |g| {
        g.read32(regs::GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED != 0
    }) {
        return Err(ProbeError::ResetTimeout);
    }
    gpu.write32(regs::L2_PWRON_LO, 1);
    if !poll(gpu, 100_000_000, |g| g.read32(regs::L2_READY_LO) == 1) {
        return Err(ProbeError::PowerTimeout);
    }
    let id = gpu.read32(regs::GPU_ID);
    match (id >> 28, (id >> 16) & 0xf) {
        (10, 7) => Ok("g610"),
        _ => Err(ProbeError::UnknownGpu(id)),
    }
}

#[test]
fn probe_succeeds_on_a_g610() {
    let gpu = SharedGpu::new(Gpu::g610());
    assert_eq!(probe(&gpu), Ok("g610"));
    let elapsed = gpu.now_ns();
    // 20 us of reset and 5 us of L2 power-up, each seen at the next poll.
    assert!(
        (25_000..=25_000 + 2 * POLL_NS).contains(&elapsed),
        "took {elapsed} ns"
    );
    gpu.with(|g| assert!(g.bus_errors().is_empty()));
    assert_eq!(gpu.read32(regs::MMU_FEATURES), 0x2830);
}

#[test]
fn probe_reports_failures() {
    let mut cfg = Config::g610();
    cfg.identity.gpu_id = 0x9091_0000; // a Mali-G57
    assert_eq!(
        probe(&SharedGpu::new(Gpu::new(cfg))),
        Err(ProbeError::UnknownGpu(0x9091_0000))
    );

    let mut cfg = Config::g610();
    cfg.faults.reset_never_completes = true;
    let gpu = SharedGpu::new(Gpu::new(cfg));
    assert_eq!(probe(&gpu), Err(ProbeError::ResetTimeout));
    assert!(gpu.now_ns() >= 100_000_000);

    let mut cfg = Config::g610();
    cfg.faults.l2_never_powers_up = true;
    assert_eq!(
        probe(&SharedGpu::new(Gpu::new(cfg))),
        Err(ProbeError::PowerTimeout)
    );

    // A reset that fails once: the first probe times out, a retry succeeds.
    let mut cfg = Config::g610();
    cfg.faults.reset_fails_once = true;
    let gpu = SharedGpu::new(Gpu::new(cfg));
    assert_eq!(probe(&gpu), Err(ProbeError::ResetTimeout));
    assert_eq!(probe(&gpu), Ok("g610"));
}
