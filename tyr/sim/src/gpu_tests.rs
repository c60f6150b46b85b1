// SPDX-License-Identifier: GPL-2.0 OR MIT

use super::*;
use crate::regs::*;
use crate::testutil::{HandTables, RO_PAGE, RW_PAGE};
use crate::walk::{mode, FAULTSTATUS_DECODER_FAULT};
use std::vec::Vec;

fn timings() -> super::super::Timings {
    super::super::Timings::default()
}

fn reset(gpu: &mut Gpu) {
    gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
    gpu.advance(timings().reset_ns);
    assert!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED != 0);
    gpu.write32(GPU_IRQ_CLEAR, gpu_irq::RESET_COMPLETED);
}

fn power_l2(gpu: &mut Gpu) {
    gpu.write32(L2_PWRON_LO, 1);
    gpu.advance(timings().power_ns);
    assert_eq!(gpu.read32(L2_READY_LO), 1);
}

/// Programs AS `n` for `root` (48-bit, 4K, write-back) and waits for the UPDATE.
fn enable_as(gpu: &mut Gpu, n: usize, root: PhysAddr) {
    gpu.write64(as_reg(n, AS_TRANSTAB_LO), root.0);
    gpu.write64(as_reg(n, AS_MEMATTR_LO), 0x8888_8888_8888_8888);
    gpu.write64(
        as_reg(n, AS_TRANSCFG_LO),
        WalkConfig::aarch64_4k(0, 48).transcfg,
    );
    as_command(gpu, n, as_cmd::UPDATE);
}

fn as_command(gpu: &mut Gpu, n: usize, cmd: u32) {
    assert_eq!(gpu.read32(as_reg(n, AS_STATUS)) & AS_STATUS_ACTIVE, 0);
    gpu.write32(as_reg(n, AS_COMMAND), cmd);
    gpu.advance(timings().mmu_command_ns);
    assert_eq!(gpu.read32(as_reg(n, AS_STATUS)) & AS_STATUS_ACTIVE, 0);
}

#[test]
fn identity_registers() {
    let mut gpu = Gpu::g610();
    assert_eq!(gpu.read32(GPU_ID), 0xa867_0005);
    assert_eq!(gpu.read32(L2_FEATURES), 0x0712_0306);
    assert_eq!(gpu.read32(MMU_FEATURES), 0x2830);
    assert_eq!(gpu.read32(AS_PRESENT), 0xff);
    assert_eq!(gpu.read32(TILER_FEATURES), 0x809);
    assert_eq!(gpu.read32(MEM_FEATURES), 0x301);
    assert_eq!(gpu.read64(SHADER_PRESENT_LO), 0x5_0005);
    assert_eq!(gpu.read64(L2_PRESENT_LO), 1);
    assert_eq!(gpu.read64(TILER_PRESENT_LO), 1);
    assert_eq!(gpu.read32(TEXTURE_FEATURES_0), 0xc1ff_ff9e);
    assert_eq!(gpu.read32(TEXTURE_FEATURES_0 + 12), 0);
    assert_eq!(gpu.read32(THREAD_MAX_THREADS), 0x800);
    assert_eq!(gpu.read32(COHERENCY_FEATURES), 1);
    assert_eq!(gpu.read32(CSF_ID), 0x40a0_0101);
    assert!(gpu.bus_errors().is_empty());
    let mut cfg = Config::g610();
    cfg.identity.gpu_id = 0x1234_0000;
    assert_eq!(Gpu::new(cfg).read32(GPU_ID), 0x1234_0000);
}

#[test]
fn bus_errors_are_recorded_not_fatal() {
    let mut gpu = Gpu::g610();
    assert_eq!(
        gpu.read32(0x060),
        0,
        "GPU_FEATURES does not exist before arch 11"
    );
    assert_eq!(gpu.read32(0x4000), 0);
    assert_eq!(gpu.read32(MMIO_SIZE), 0);
    assert_eq!(gpu.read32(usize::MAX - 3), 0);
    assert_eq!(gpu.read32(GPU_ID + 2), 0);
    gpu.write32(GPU_ID, 5);
    gpu.write32(GPU_IRQ_STATUS, 5);
    gpu.write32(GPU_COMMAND, 0x99);
    gpu.write32(GPU_COMMAND, 1 | 3 << 8);
    gpu.write32(as_reg(8, AS_TRANSTAB_LO), 1); // AS 8 does not exist on a G610
    gpu.write32(as_reg(0, AS_FAULTSTATUS), 1);
    gpu.write32(as_reg(0, AS_COMMAND), 9);
    gpu.write32(doorbell(2) + 4, 1);
    gpu.write32(0x1b0, 1); // hole between the PWRON registers
    let kinds: Vec<_> = gpu
        .bus_errors()
        .iter()
        .map(|e| (e.offset, e.kind))
        .collect();
    use BusErrorKind::*;
    assert_eq!(
        kinds,
        [
            (0x060, UnknownRegister),
            (0x4000, UnknownRegister),
            (MMIO_SIZE, UnknownRegister),
            (usize::MAX - 3, UnknownRegister),
            (GPU_ID + 2, Misaligned),
            (GPU_ID, ReadOnly),
            (GPU_IRQ_STATUS, ReadOnly),
            (GPU_COMMAND, InvalidValue),
            (GPU_COMMAND, InvalidValue),
            (as_reg(8, AS_TRANSTAB_LO), UnknownRegister),
            (as_reg(0, AS_FAULTSTATUS), ReadOnly),
            (as_reg(0, AS_COMMAND), InvalidValue),
            (doorbell(2) + 4, UnknownRegister),
            (0x1b0, UnknownRegister),
        ]
    );
    assert_eq!(gpu.bus_errors()[5].value, Some(5));
    assert_eq!(gpu.take_bus_errors().len(), 14);
    assert!(gpu.bus_errors().is_empty());
    assert_eq!(
        gpu.read32(GPU_ID),
        0xa867_0005,
        "read-only register unchanged"
    );
    assert!(!gpu.reset_in_progress());
}

#[test]
fn irq_status_is_rawstat_and_mask() {
    let mut gpu = Gpu::g610();
    // Writing RAWSTAT raises bits; CLEAR is write-one-to-clear and reads as zero.
    gpu.write32(
        GPU_IRQ_RAWSTAT,
        gpu_irq::FAULT | gpu_irq::POWER_CHANGED_ALL | 1 << 30,
    );
    assert_eq!(
        gpu.read32(GPU_IRQ_RAWSTAT),
        gpu_irq::FAULT | gpu_irq::POWER_CHANGED_ALL
    );
    assert_eq!(gpu.read32(GPU_IRQ_STATUS), 0);
    assert!(!gpu.irq_pending(IrqLine::Gpu));
    gpu.write32(GPU_IRQ_MASK, gpu_irq::FAULT);
    assert_eq!(gpu.read32(GPU_IRQ_STATUS), gpu_irq::FAULT);
    assert!(gpu.irq_pending(IrqLine::Gpu));
    assert_eq!(gpu.read32(GPU_IRQ_CLEAR), 0);
    gpu.write32(GPU_IRQ_CLEAR, gpu_irq::FAULT);
    assert!(!gpu.irq_pending(IrqLine::Gpu));
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT), gpu_irq::POWER_CHANGED_ALL);
    // Job and MMU blocks behave the same.
    gpu.raise_job_irq(1 << 31 | 1);
    assert!(!gpu.irq_pending(IrqLine::Job));
    gpu.write32(JOB_IRQ_MASK, 1 << 31);
    assert_eq!(gpu.read32(JOB_IRQ_STATUS), 1 << 31);
    assert!(gpu.irq_pending(IrqLine::Job));
    gpu.write32(JOB_IRQ_CLEAR, u32::MAX);
    assert!(!gpu.irq_pending(IrqLine::Job));
    gpu.write32(MMU_IRQ_RAWSTAT, 0xffff_ffff);
    assert_eq!(gpu.read32(MMU_IRQ_RAWSTAT), 0x00ff_00ff, "8 address spaces");
    gpu.write32(MMU_IRQ_MASK, 0x2);
    assert_eq!(gpu.irq_status(IrqLine::Mmu), 0x2);
    assert!(gpu.bus_errors().is_empty());
}

#[test]
fn soft_reset_takes_time_and_raises_reset_completed() {
    let mut gpu = Gpu::g610();
    let t = timings();
    gpu.write32(GPU_IRQ_MASK, gpu_irq::RESET_COMPLETED);
    gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
    assert!(gpu.reset_in_progress());
    assert_eq!(gpu.next_event_ns(), Some(t.reset_ns));
    gpu.advance(t.reset_ns - 1);
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT), 0);
    assert!(!gpu.irq_pending(IrqLine::Gpu));
    gpu.advance(1);
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT), gpu_irq::RESET_COMPLETED);
    assert!(gpu.irq_pending(IrqLine::Gpu), "GPU mask survives the reset");
    assert_eq!(gpu.resets_completed(), 1);
    assert!(!gpu.reset_in_progress());
    // Hard reset too.
    gpu.write32(GPU_IRQ_CLEAR, gpu_irq::RESET_COMPLETED);
    gpu.write32(GPU_COMMAND, gpu_cmd::HARD_RESET);
    gpu.advance(t.reset_ns);
    assert_eq!(gpu.resets_completed(), 2);
}

#[test]
fn reset_restores_power_mmu_and_masks() {
    let mut gpu = Gpu::g610();
    power_l2(&mut gpu);
    gpu.write32(MMU_IRQ_MASK, 0xff);
    gpu.write32(JOB_IRQ_MASK, 1 << 31);
    gpu.write64(as_reg(3, AS_TRANSTAB_LO), 0x1234_5000);
    gpu.write32(TIMESTAMP_OFFSET_LO, 77);
    gpu.advance(1_000);
    reset(&mut gpu);
    assert_eq!(gpu.read32(L2_READY_LO), 0);
    assert_eq!(gpu.read64(as_reg(3, AS_TRANSTAB_LO)), 0);
    assert_eq!(gpu.read32(MMU_IRQ_MASK), 0);
    assert_eq!(gpu.read32(JOB_IRQ_MASK), 0);
    assert_eq!(gpu.read32(TIMESTAMP_OFFSET_LO), 0);
    assert_eq!(gpu.read32(CYCLE_COUNT_LO), 0, "cycle counter restarts");
}

#[test]
fn reset_injection() {
    let t = timings();
    let mut cfg = Config::g610();
    cfg.faults.reset_never_completes = true;
    let mut gpu = Gpu::new(cfg);
    for _ in 0..3 {
        gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
        gpu.advance(100 * t.reset_ns);
    }
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED, 0);
    assert!(gpu.reset_in_progress());
    assert_eq!(gpu.next_event_ns(), None);
    // Turning the injection off lets the next reset through.
    gpu.faults_mut().reset_never_completes = false;
    reset(&mut gpu);

    let mut cfg = Config::g610();
    cfg.faults.reset_fails_once = true;
    let mut gpu = Gpu::new(cfg);
    gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
    gpu.advance(100 * t.reset_ns);
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED, 0);
    gpu.write32(GPU_COMMAND, gpu_cmd::HARD_RESET);
    gpu.advance(t.reset_ns);
    assert_ne!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED, 0);
    assert_eq!(gpu.resets_completed(), 1);
}

#[test]
fn l2_power_transition_timing() {
    let t = timings();
    let mut gpu = Gpu::g610();
    gpu.write32(GPU_IRQ_MASK, gpu_irq::POWER_CHANGED_ALL);
    gpu.write32(L2_PWRON_LO, 0xff); // only bit 0 is present
    assert_eq!(gpu.read32(L2_PWRTRANS_LO), 1);
    assert_eq!(
        gpu.read32(GPU_STATUS) & gpu_status::PWR_ACTIVE,
        gpu_status::PWR_ACTIVE
    );
    gpu.advance(t.power_ns - 1);
    assert_eq!(gpu.read32(L2_READY_LO), 0);
    gpu.advance(1);
    assert_eq!(gpu.read32(L2_READY_LO), 1);
    assert_eq!(gpu.read32(L2_PWRTRANS_LO), 0);
    assert_eq!(
        gpu.read32(GPU_IRQ_RAWSTAT),
        gpu_irq::POWER_CHANGED_SINGLE | gpu_irq::POWER_CHANGED_ALL
    );
    assert!(gpu.irq_pending(IrqLine::Gpu));
    assert_eq!(gpu.read32(GPU_STATUS), 0);
    assert_eq!(gpu.read32(L2_PWRON_LO), 0, "write-only");
    assert_eq!(gpu.read32(L2_PWRACTIVE_LO), 0);
    // Power off.
    gpu.write32(L2_PWROFF_LO, 1);
    assert_eq!(gpu.read32(L2_PWRTRANS_LO), 1);
    gpu.advance(t.power_ns);
    assert_eq!(gpu.read32(L2_READY_LO), 0);
    assert!(gpu.bus_errors().is_empty());
}

/// Powers the L2, then the shader cores and the tiler, in the order the simulator insists
/// on, and waits for each.
pub(crate) fn power_up<M: PhysMemory>(gpu: &mut Gpu<M>) {
    let t = gpu.config().timings;
    let id = gpu.config().identity;
    gpu.write64(L2_PWRON_LO, id.l2_present);
    gpu.advance(t.power_ns);
    gpu.write64(SHADER_PWRON_LO, id.shader_present);
    gpu.write64(TILER_PWRON_LO, id.tiler_present);
    gpu.advance(t.power_ns);
    assert_eq!(gpu.power_faults(), 0);
}

#[test]
fn power_order_is_enforced_not_waited_for() {
    let t = timings();
    let mut gpu = Gpu::g610();
    // Cores before the L2: refused, reported, nothing changes.
    gpu.write64(SHADER_PWRON_LO, u64::MAX);
    assert_eq!(gpu.power_faults(), 1);
    assert_ne!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::FAULT, 0);
    assert_eq!(gpu.read32(GPU_FAULTSTATUS), crate::GPU_POWER_ORDER_FAULT);
    gpu.write32(GPU_COMMAND, gpu_cmd::CLEAR_FAULT);
    gpu.write32(GPU_IRQ_CLEAR, gpu_irq::FAULT);
    gpu.write32(TILER_PWRON_LO, 1);
    assert_eq!(gpu.power_faults(), 2);
    gpu.advance(10 * t.power_ns);
    assert_eq!(gpu.read64(SHADER_READY_LO), 0, "no L2, no cores");
    assert_eq!(gpu.read64(SHADER_PWRTRANS_LO), 0, "the request was dropped");
    // While the L2 is still powering up, too.
    gpu.write32(L2_PWRON_LO, 1);
    gpu.write32(TILER_PWRON_LO, 1);
    assert_eq!(gpu.power_faults(), 3);
    // So is the MCU.
    gpu.write32(MCU_CONTROL, mcu::ENABLED);
    assert_eq!(gpu.power_faults(), 4);
    assert_eq!(gpu.read32(MCU_CONTROL), mcu::DISABLED);
    gpu.advance(t.power_ns);
    assert_eq!(gpu.power_ready(Domain::L2), 1);
    // The right order passes.
    gpu.write64(SHADER_PWRON_LO, 0x5_0005);
    gpu.write32(TILER_PWRON_LO, 1);
    gpu.advance(t.power_ns);
    assert_eq!(gpu.read64(SHADER_READY_LO), 0x5_0005);
    assert_eq!(gpu.read32(TILER_READY_LO), 1);
    assert_ne!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::POWER_CHANGED_ALL, 0);
    assert_eq!(gpu.power_faults(), 4);
    // The L2 may not go while the cores are up, nor while they are still going down.
    gpu.write32(L2_PWROFF_LO, 1);
    assert_eq!(gpu.power_faults(), 5);
    gpu.write64(SHADER_PWROFF_LO, 0x5_0005);
    gpu.write32(TILER_PWROFF_LO, 1);
    gpu.write32(L2_PWROFF_LO, 1);
    assert_eq!(gpu.power_faults(), 6);
    assert_eq!(gpu.read32(L2_PWRTRANS_LO), 0);
    gpu.advance(t.power_ns);
    assert_eq!(gpu.power_ready(Domain::Shader), 0);
    assert_eq!(gpu.power_ready(Domain::Tiler), 0);
    gpu.write32(L2_PWROFF_LO, 1);
    gpu.advance(t.power_ns);
    assert_eq!(gpu.read32(L2_READY_LO), 0);
    assert_eq!(gpu.power_transitioning(Domain::L2), 0);
    assert_eq!(gpu.power_faults(), 6);
    assert!(gpu.bus_errors().is_empty());
}

#[test]
fn a_clock_change_keeps_the_counters_continuous() {
    let mut gpu = Gpu::g610();
    let t = gpu.config().timings;
    assert_eq!(gpu.gpu_clock_hz(), t.gpu_clock_hz);
    gpu.advance(1_000_000);
    let (ts0, cy0) = (gpu.read64(TIMESTAMP_LO), gpu.read64(CYCLE_COUNT_LO));
    assert_eq!(cy0, 1_000_000, "1 ms at 1 GHz");
    assert!(!gpu.set_gpu_clock_hz(123), "not an operating point");
    assert!(gpu.set_gpu_clock_hz(t.opp_table[0]));
    assert_eq!(gpu.read64(CYCLE_COUNT_LO), cy0, "no jump at the change");
    assert_eq!(gpu.read64(TIMESTAMP_LO), ts0);
    gpu.advance(1_000_000);
    assert_eq!(gpu.read64(CYCLE_COUNT_LO), cy0 + t.opp_table[0] / 1000);
    assert_eq!(
        gpu.read64(TIMESTAMP_LO),
        ts0 + t.timestamp_hz / 1000,
        "the timestamp ignores the GPU clock"
    );
}

#[test]
fn power_domain_that_never_comes_up() {
    let t = timings();
    let mut cfg = Config::g610();
    cfg.faults.l2_never_powers_up = true;
    let mut gpu = Gpu::new(cfg);
    gpu.write32(L2_PWRON_LO, 1);
    gpu.advance(1_000 * t.power_ns);
    assert_eq!(gpu.read32(L2_READY_LO), 0);
    assert_eq!(gpu.read32(L2_PWRTRANS_LO), 1);
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::POWER_CHANGED_ALL, 0);
}

#[test]
fn time_counters() {
    let mut gpu = Gpu::g610();
    gpu.advance(1_000_000);
    assert_eq!(gpu.read64(TIMESTAMP_LO), 24_000);
    assert_eq!(gpu.read64(CYCLE_COUNT_LO), 1_000_000);
    gpu.write64(TIMESTAMP_OFFSET_LO, 1 << 40);
    assert_eq!(gpu.read64(TIMESTAMP_LO), (1 << 40) + 24_000);
    gpu.advance(u64::MAX);
    assert_eq!(gpu.now_ns(), u64::MAX, "time saturates");
}

#[test]
fn cache_flush_completes_and_bumps_flush_id() {
    let t = timings();
    let mut gpu = Gpu::g610();
    assert_eq!(gpu.read32(LATEST_FLUSH_ID), 0);
    gpu.write32(GPU_COMMAND, gpu_cmd::flush_caches(3, 3, 2));
    gpu.write32(GPU_COMMAND, gpu_cmd::flush_caches(3, 3, 2));
    assert_eq!(gpu.bus_errors()[0].kind, BusErrorKind::Busy);
    gpu.advance(t.cache_flush_ns - 1);
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT), 0);
    gpu.advance(1);
    assert_eq!(gpu.read32(GPU_IRQ_RAWSTAT), gpu_irq::CLEAN_CACHES_COMPLETED);
    assert_eq!(gpu.read32(LATEST_FLUSH_ID), 1);
    gpu.write32(LATEST_FLUSH_ID, 0);
    assert_eq!(gpu.bus_errors()[1].kind, BusErrorKind::ReadOnly);
}

#[test]
fn zero_delays_complete_within_the_write() {
    let mut cfg = Config::g610();
    cfg.timings.reset_ns = 0;
    cfg.timings.power_ns = 0;
    cfg.timings.mmu_command_ns = 0;
    let mut gpu = Gpu::new(cfg);
    gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
    assert_ne!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::RESET_COMPLETED, 0);
    gpu.write32(L2_PWRON_LO, 1);
    assert_eq!(gpu.read32(L2_READY_LO), 1);
    gpu.write32(as_reg(0, AS_COMMAND), as_cmd::UPDATE);
    assert_eq!(gpu.read32(as_reg(0, AS_STATUS)), 0);
    assert_eq!(
        gpu.read32(MMU_IRQ_RAWSTAT),
        1 << 16,
        "command completed bit"
    );
}

#[test]
fn mcu_without_shared_region_is_fatal() {
    let mut gpu = Gpu::g610();
    power_up(&mut gpu);
    gpu.write32(MCU_CONTROL, mcu::ENABLED);
    assert_eq!(gpu.read32(MCU_STATUS), mcu::DISABLED);
    gpu.advance(timings().mcu_ns);
    // AS 0 was never enabled, so the firmware cannot reach its interface.
    assert_eq!(gpu.read32(MCU_STATUS), mcu::FATAL);
    assert!(!gpu.csf_booted());
    assert_ne!(gpu.read32(GPU_IRQ_RAWSTAT) & gpu_irq::MCU_STATUS_CHANGED, 0);
    assert_ne!(
        gpu.read32(MMU_IRQ_RAWSTAT) & 1,
        0,
        "the MCU faulted in AS 0"
    );
    gpu.write32(MCU_CONTROL, mcu::DISABLED);
    assert_eq!(gpu.read32(MCU_STATUS), mcu::DISABLED);
    gpu.write32(MCU_CONTROL, 7);
    assert_eq!(gpu.bus_errors()[0].kind, BusErrorKind::InvalidValue);
}

#[test]
fn doorbells_count_rings() {
    let mut gpu = Gpu::g610();
    gpu.write32(doorbell(0), 1);
    gpu.write32(doorbell(5), 1);
    gpu.write32(doorbell(5), 0); // bit 0 clear: no ring
    gpu.write32(doorbell(NUM_DOORBELLS - 1), 1);
    assert_eq!(gpu.read32(doorbell(5)), 0);
    assert_eq!(gpu.doorbell_count(5), 1);
    assert_eq!(gpu.doorbell_count(1000), 0);
    assert_eq!(
        gpu.take_rung_doorbells().as_slice(),
        [0, 5, NUM_DOORBELLS - 1]
    );
    assert!(gpu.take_rung_doorbells().is_empty());
    assert!(gpu.bus_errors().is_empty());
}

#[test]
fn as_registers_and_command_busy() {
    let t = timings();
    let mut gpu = Gpu::g610();
    gpu.write64(as_reg(2, AS_TRANSTAB_LO), 0x0000_00ab_cdef_0000);
    gpu.write64(as_reg(2, AS_MEMATTR_LO), 0x1122_3344_5566_7788);
    gpu.write64(as_reg(2, AS_LOCKADDR_LO), 0x4000_000e);
    gpu.write64(as_reg(2, AS_TRANSCFG_LO), 1 << 34 | 0x1c6);
    assert_eq!(gpu.read64(as_reg(2, AS_TRANSTAB_LO)), 0x0000_00ab_cdef_0000);
    assert_eq!(gpu.read64(as_reg(2, AS_MEMATTR_LO)), 0x1122_3344_5566_7788);
    assert_eq!(gpu.read64(as_reg(2, AS_LOCKADDR_LO)), 0x4000_000e);
    assert_eq!(gpu.read64(as_reg(2, AS_TRANSCFG_LO)), 1 << 34 | 0x1c6);
    // Nothing is latched before UPDATE.
    assert_eq!(gpu.active_config(2).unwrap().transtab, 0);
    gpu.write32(as_reg(2, AS_COMMAND), as_cmd::UPDATE);
    assert_eq!(gpu.read32(as_reg(2, AS_STATUS)), AS_STATUS_ACTIVE);
    assert_eq!(gpu.read32(as_reg(2, AS_COMMAND)), 0);
    gpu.write32(as_reg(2, AS_COMMAND), as_cmd::LOCK);
    assert_eq!(
        gpu.bus_errors()[0],
        BusError {
            at_ns: 0,
            offset: as_reg(2, AS_COMMAND),
            value: Some(as_cmd::LOCK),
            kind: BusErrorKind::Busy
        }
    );
    gpu.advance(t.mmu_command_ns);
    assert_eq!(gpu.read32(as_reg(2, AS_STATUS)), 0);
    let active = gpu.active_config(2).unwrap();
    assert_eq!(active.transtab, 0x0000_00ab_cdef_0000);
    assert_eq!(active.pa_bits, 40);
    assert_eq!(gpu.read32(MMU_IRQ_RAWSTAT), 1 << 18);
    assert_eq!(gpu.locked_region(2), None, "the LOCK was dropped");
    // LOCK then UNLOCK.
    as_command(&mut gpu, 2, as_cmd::LOCK);
    assert!(gpu.is_locked(2, 0x4000_7fff));
    assert!(!gpu.is_locked(2, 0x4000_8000));
    as_command(&mut gpu, 2, as_cmd::UNLOCK);
    assert!(!gpu.is_locked(2, 0x4000_0000));
    assert_eq!(gpu.active_config(9), None);
}

#[test]
fn stuck_mmu_command() {
    let mut cfg = Config::g610();
    cfg.faults.mmu_command_stuck = true;
    let mut gpu = Gpu::new(cfg);
    gpu.write32(as_reg(0, AS_COMMAND), as_cmd::UPDATE);
    gpu.advance(1_000_000_000);
    assert_eq!(gpu.read32(as_reg(0, AS_STATUS)), AS_STATUS_ACTIVE);
    // A reset clears it.
    gpu.faults_mut().mmu_command_stuck = false;
    reset(&mut gpu);
    assert_eq!(gpu.read32(as_reg(0, AS_STATUS)), 0);
}

#[test]
fn translation_through_programmed_address_space() {
    let mut gpu = Gpu::g610();
    let mem = gpu.memory().clone();
    let tables = HandTables::new(&mem);
    let data = mem.alloc(2).unwrap();
    let va = 0x0000_7f00_1234_5000;
    tables.map(&mem, va, data, RW_PAGE);
    tables.map(&mem, va + 0x1000, PhysAddr(data.0 + 0x1000), RO_PAGE);
    // Before UPDATE the AS is disabled.
    let f = gpu.translate(1, va, AccessType::Read).unwrap_err();
    assert_eq!(f.kind, FaultKind::Disabled);
    assert_eq!(
        gpu.read32(as_reg(1, AS_FAULTSTATUS)),
        0xC0 | 2 << 8 | FAULTSTATUS_DECODER_FAULT
    );
    gpu.write32(MMU_IRQ_CLEAR, 0x2);
    enable_as(&mut gpu, 1, tables.root);
    assert_eq!(
        gpu.translate(1, va + 8, AccessType::Write),
        Ok(PhysAddr(data.0 + 8))
    );
    let t = gpu.walk(1, va + 0x1000, AccessType::Read).unwrap();
    assert!(t.perms.read && !t.perms.write);
    // GPU data accesses.
    gpu.gpu_write(1, va + 0x10, &[1, 2, 3, 4]).unwrap();
    assert_eq!(mem.read_u32(PhysAddr(data.0 + 0x10)).unwrap(), 0x0403_0201);
    let mut buf = [0; 4];
    gpu.gpu_read(1, va + 0x10, &mut buf).unwrap();
    assert_eq!(buf, [1, 2, 3, 4]);
    assert_eq!(
        gpu.gpu_atomic_add_u64(1, va + 0x10, 1).unwrap(),
        0x0403_0201
    );
    assert_eq!(mem.read_u32(PhysAddr(data.0 + 0x10)).unwrap(), 0x0403_0202);
    let f = gpu.gpu_write(1, va + 0x1000, &[0]).unwrap_err();
    assert_eq!(
        f,
        AccessError::Mmu(Fault {
            kind: FaultKind::Permission { level: 3 },
            va: va + 0x1000,
            access: AccessType::Write
        })
    );
    assert_eq!(gpu.read32(MMU_IRQ_RAWSTAT) & 0xffff, 0x2);
    assert_eq!(gpu.read32(as_reg(1, AS_FAULTSTATUS)), 0xCB | 3 << 8);
    assert_eq!(gpu.read64(as_reg(1, AS_FAULTADDRESS_LO)), va + 0x1000);
    assert_eq!(
        gpu.read32(GPU_STATUS) & gpu_status::PAGE_FAULT,
        gpu_status::PAGE_FAULT
    );
    // A second fault keeps the first one's registers until the driver clears the bit.
    let _ = gpu.translate_from(1, 0x1000, AccessType::Execute, 0x42);
    assert_eq!(gpu.read32(as_reg(1, AS_FAULTSTATUS)), 0xCB | 3 << 8);
    gpu.write32(MMU_IRQ_CLEAR, 0x2);
    let _ = gpu.translate_from(1, 0x1000, AccessType::Execute, 0x42);
    assert_eq!(
        gpu.read32(as_reg(1, AS_FAULTSTATUS)),
        0x42 << 16 | 1 << 8 | 0xC0
    );
    assert_eq!(gpu.read64(as_reg(1, AS_FAULTADDRESS_LO)), 0x1000);
    gpu.write32(MMU_IRQ_MASK, 0x2);
    assert!(gpu.irq_pending(IrqLine::Mmu));
    assert!(!gpu.irq_pending(IrqLine::Gpu));
    // A missing AS yields an unrecorded fault.
    assert_eq!(
        gpu.translate(8, 0, AccessType::Read).unwrap_err().kind,
        FaultKind::Disabled
    );
    assert_eq!(
        gpu.walk(8, 0, AccessType::Read).unwrap_err().kind,
        FaultKind::Disabled
    );
}

#[test]
fn tlb_keeps_stale_translations_until_maintenance() {
    let mut gpu = Gpu::g610();
    let mem = gpu.memory().clone();
    let tables = HandTables::new(&mem);
    let (old, new) = (mem.alloc(1).unwrap(), mem.alloc(1).unwrap());
    let va = 0x10_0000_0000;
    tables.map(&mem, va, old, RW_PAGE);
    enable_as(&mut gpu, 0, tables.root);
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(old));
    assert_eq!(gpu.tlb_stats(0).unwrap().misses, 1);
    // Remap without maintenance: the GPU still uses the old page, the checker sees the new.
    tables.map(&mem, va, new, RW_PAGE);
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(old));
    assert_eq!(gpu.walk(0, va, AccessType::Read).unwrap().pa, new);
    assert_eq!(gpu.tlb_stats(0).unwrap().hits, 1);
    // An unlock of an unrelated region does not help.
    gpu.write64(
        as_reg(0, AS_LOCKADDR_LO),
        LockRegion::encode(va + (1 << 30), 0x1000).unwrap(),
    );
    as_command(&mut gpu, 0, as_cmd::LOCK);
    as_command(&mut gpu, 0, as_cmd::UNLOCK);
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(old));
    // Lock + unlock covering the page does.
    gpu.write64(
        as_reg(0, AS_LOCKADDR_LO),
        LockRegion::encode(va, 0x1000).unwrap(),
    );
    as_command(&mut gpu, 0, as_cmd::LOCK);
    assert!(gpu.is_locked(0, va));
    as_command(&mut gpu, 0, as_cmd::UNLOCK);
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(new));
    // Unmapping without a flush keeps the page reachable; FLUSH_PT on the region fixes it.
    tables.unmap(&mem, va);
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(new));
    as_command(&mut gpu, 0, as_cmd::FLUSH_PT);
    assert_eq!(
        gpu.translate(0, va, AccessType::Read).unwrap_err().kind,
        FaultKind::Translation { level: 3 }
    );
    // UPDATE drops everything.
    tables.map(&mem, va, old, RO_PAGE);
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(old));
    tables.map(&mem, va, new, RW_PAGE);
    as_command(&mut gpu, 0, as_cmd::FLUSH_MEM); // same LOCKADDR region: flushes
    assert_eq!(gpu.translate(0, va, AccessType::Write), Ok(new));
    tables.map(&mem, va, old, RO_PAGE);
    as_command(&mut gpu, 0, as_cmd::UPDATE);
    assert_eq!(
        gpu.translate(0, va, AccessType::Write).unwrap_err().kind,
        FaultKind::Permission { level: 3 }
    );
    // The TLB caches permissions too: a hit checks them.
    assert_eq!(gpu.translate(0, va, AccessType::Read), Ok(old));
    assert_eq!(
        gpu.translate(0, va, AccessType::Write).unwrap_err().kind,
        FaultKind::Permission { level: 3 }
    );
}

#[test]
fn unbacked_data_is_a_gpu_bus_fault() {
    let mut gpu = Gpu::g610();
    let mem = gpu.memory().clone();
    let tables = HandTables::new(&mem);
    let gone = mem.alloc(1).unwrap();
    tables.map(&mem, 0x1000, gone, RW_PAGE);
    enable_as(&mut gpu, 0, tables.root);
    mem.free(gone).unwrap();
    gpu.write32(GPU_IRQ_MASK, gpu_irq::FAULT);
    let e = gpu.gpu_write(0, 0x1000, &[1]).unwrap_err();
    assert_eq!(e, AccessError::Bus(gone));
    assert!(gpu.irq_pending(IrqLine::Gpu));
    assert_eq!(
        gpu.read32(GPU_FAULTSTATUS),
        0x80 | 3 << 8 | 1 << 10 | 1 << 11
    );
    assert_eq!(gpu.read64(GPU_FAULTADDRESS_LO), gone.0);
    assert_eq!(
        gpu.bus_errors()[0].kind,
        BusErrorKind::UnbackedMemory { pa: gone }
    );
    gpu.write32(GPU_COMMAND, gpu_cmd::CLEAR_FAULT);
    assert_eq!(gpu.read32(GPU_FAULTSTATUS), 0);
    // Accesses may not cross a page.
    let mut buf = [0; 8];
    assert!(gpu.gpu_read(0, 0xffc, &mut buf).is_err());
    // A table in freed memory is a table bus fault.
    let t2 = HandTables::new(&mem);
    t2.map(&mem, 0x2000, gone, RW_PAGE);
    let l1 = mem.read_u64(t2.root).unwrap() & !0xfff;
    mem.free(PhysAddr(l1)).unwrap();
    enable_as(&mut gpu, 1, t2.root);
    let f = gpu.translate(1, 0x2000, AccessType::Read).unwrap_err();
    assert_eq!(f.exception_code(), 0xD1);
    assert_eq!(gpu.read32(as_reg(1, AS_FAULTSTATUS)) & 0xff, 0xD1);
}

#[test]
fn walk_config_modes_via_registers() {
    let mut gpu = Gpu::g610();
    gpu.write64(as_reg(0, AS_TRANSCFG_LO), mode::IDENTITY);
    as_command(&mut gpu, 0, as_cmd::UPDATE);
    assert_eq!(
        gpu.translate(0, 0x1234, AccessType::Read),
        Ok(PhysAddr(0x1234))
    );
    gpu.write64(as_reg(0, AS_TRANSCFG_LO), mode::UNMAPPED);
    as_command(&mut gpu, 0, as_cmd::UPDATE);
    assert_eq!(
        gpu.translate(0, 0x1234, AccessType::Read).unwrap_err().kind,
        FaultKind::Disabled
    );
}

#[test]
fn step_moves_time_event_by_event_and_stops_at_interrupts() {
    let t = timings();
    // The GPU borrows memory its caller owns: no `Arc`, no thread.
    let mem = crate::SimMemory::new(crate::MemConfig::default());
    let mut gpu = Gpu::with_memory(Config::g610(), &mem);
    assert_eq!(gpu.step(None), Progress::Idle);
    // With nothing scheduled, a limit (the executor's timer) is where time goes.
    assert_eq!(gpu.step(Some(1_000)), Progress::Advanced { now_ns: 1_000 });
    gpu.write32(GPU_IRQ_MASK, gpu_irq::ALL);
    gpu.write32(GPU_COMMAND, gpu_cmd::SOFT_RESET);
    // A limit before the next event stops there; the reset is still running.
    assert_eq!(gpu.step(Some(1_500)), Progress::Advanced { now_ns: 1_500 });
    assert!(gpu.reset_in_progress());
    // A limit at the current time completes what is due without moving.
    assert_eq!(gpu.step(Some(0)), Progress::Advanced { now_ns: 1_500 });
    let done = 1_000 + t.reset_ns;
    assert_eq!(
        gpu.step(Some(u64::MAX)),
        Progress::Advanced { now_ns: done }
    );
    let gpu_line = IrqLines::NONE.with(IrqLine::Gpu);
    assert_eq!(gpu.step(None), Progress::Irq(gpu_line));
    assert_eq!(gpu.step(Some(u64::MAX)), Progress::Irq(gpu_line));
    assert_eq!(gpu.now_ns(), done, "an asserted line holds time");
    assert_eq!(gpu.asserted_lines(), gpu_line);
    gpu.write32(GPU_IRQ_CLEAR, gpu_irq::RESET_COMPLETED);
    assert_eq!(gpu.step(None), Progress::Idle);

    // Power and an address-space update at once: the executor serves both lines.
    let tables = HandTables::new(&mem);
    let page = mem.alloc(1).unwrap();
    tables.map(&mem, 0x4000, page, RW_PAGE);
    gpu.write32(MMU_IRQ_MASK, 0xffff_ffff);
    gpu.write32(L2_PWRON_LO, 1);
    gpu.write64(as_reg(2, AS_TRANSTAB_LO), tables.root.0);
    gpu.write64(as_reg(2, AS_MEMATTR_LO), 0x8888_8888_8888_8888);
    gpu.write64(
        as_reg(2, AS_TRANSCFG_LO),
        WalkConfig::aarch64_4k(0, 48).transcfg,
    );
    gpu.write32(as_reg(2, AS_COMMAND), as_cmd::UPDATE);
    let (served, advanced) = crate::testutil::run_to_idle(&mut gpu, 100);
    assert!(served.contains(&IrqLine::Mmu), "{served:?}");
    assert!(served.contains(&IrqLine::Gpu), "{served:?}");
    assert_eq!(
        advanced, 2,
        "one step per event: the MMU command, the power-up"
    );
    assert_eq!(gpu.now_ns(), done + t.power_ns.max(t.mmu_command_ns));
    assert_eq!(gpu.read32(L2_READY_LO), 1);
    assert_eq!(
        gpu.translate(2, 0x4008, AccessType::Read),
        Ok(PhysAddr(page.0 + 8))
    );
    assert!(gpu.bus_errors().is_empty());
}

#[test]
fn logs_keep_the_first_entries_and_count_the_rest() {
    let mut gpu = Gpu::g610();
    for _ in 0..BUS_ERROR_LOG + 5 {
        gpu.read32(0x3);
    }
    assert_eq!(gpu.bus_errors().len(), BUS_ERROR_LOG);
    assert_eq!(gpu.bus_errors_dropped(), 5);
    let taken = gpu.take_bus_errors();
    assert_eq!((taken.len(), taken.dropped()), (BUS_ERROR_LOG, 5));
    assert!(gpu.bus_errors().is_empty() && gpu.bus_errors_dropped() == 0);
    for _ in 0..RUNG_LOG + 2 {
        gpu.write32(doorbell(3), 1);
    }
    let rung = gpu.take_rung_doorbells();
    assert_eq!((rung.len(), rung.dropped()), (RUNG_LOG, 2));
    assert_eq!(
        gpu.doorbell_count(3),
        (RUNG_LOG + 2) as u64,
        "every ring is counted"
    );
}

#[test]
fn in_place_init_and_reset_give_the_state_of_a_new_gpu() {
    use core::mem::MaybeUninit;
    use std::format;

    let fresh = Gpu::g610();
    let mut slot = std::boxed::Box::new(MaybeUninit::<Gpu>::uninit());
    let mem = std::sync::Arc::new(crate::SimMemory::new(crate::MemConfig::default()));
    // SAFETY: `slot` is valid for writes and nothing else reaches it.
    let done = unsafe { pin_init::Init::__init(Gpu::init(Config::g610(), mem), slot.as_mut_ptr()) };
    assert!(done.is_ok());
    // SAFETY: The initializer returned `Ok`: every field is written.
    let mut boxed = unsafe { slot.assume_init() };
    assert!(boxed.address_spaces == fresh.address_spaces && boxed.csf == fresh.csf);
    assert_eq!((boxed.rung.len(), boxed.bus_errors.len()), (0, 0));
    assert_eq!(boxed.read32(GPU_ID), fresh.config().identity.gpu_id);
    // Every other field too (formatting 75 KiB of state is too slow under Miri).
    if !cfg!(miri) {
        assert_eq!(format!("{boxed:?}"), format!("{fresh:?}"));
    }

    // Use the MMU (a latched configuration, a fault, TLB entries), then reset: every address
    // space is as new again.
    let mem = boxed.memory().clone();
    let tables = HandTables::new(&mem);
    let page = mem.alloc(1).unwrap();
    tables.map(&mem, 0x1000, page, RW_PAGE);
    enable_as(&mut boxed, 1, tables.root);
    assert!(boxed.translate(1, 0x1000, AccessType::Read).is_ok());
    assert!(boxed.translate(1, 0x9000, AccessType::Read).is_err());
    assert_eq!(boxed.tlb_stats(1).unwrap().entries, 1);
    assert!(boxed.address_spaces != fresh.address_spaces);
    reset(&mut boxed);
    assert!(boxed.address_spaces == fresh.address_spaces);
}
