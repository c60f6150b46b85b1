// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The driver's view of the hardware against the simulator's.
//!
//! `gpukit-mali-sim` describes the Mali-G610 on its own (register map, bit fields,
//! firmware-interface layout); nothing of it comes from this crate. These tests hold the two
//! descriptions against each other, so that a wrong offset or bit in the driver fails here by
//! name rather than as a hang somewhere in the ioctl suites. The instruction set is neither's:
//! both use the `gpukit-csf` crate, whose encodings are checked field by field against the
//! hardware's published layout; what is checked here is that the driver's ring job is
//! panthor's, word for word.

use csf::Instr;
use tyr::regs;
use tyr::sched::{job_instrs, JOB_INSTRS, KREG};

/// Panthor's ring job (`prepare_job_instrs` in `panthor_sched.c`, profiling off), word by word
/// as its comments spell the encodings, with its registers at `KREG` and padded with `NOP`s.
fn panthor_job(start: u64, size: u32, flush: u32, sync: u64, waitall: u64) -> [u64; 16] {
    let (addr_reg, val_reg) = (u64::from(KREG), u64::from(KREG) + 2);
    let mut w = [0u64; 16];
    let seq = [
        2 << 56 | val_reg << 48 | u64::from(flush),
        36 << 56 | val_reg << 40 | 0x233,
        1 << 56 | addr_reg << 48 | start,
        2 << 56 | val_reg << 48 | u64::from(size),
        3 << 56 | 1 << 16,
        32 << 56 | addr_reg << 40 | val_reg << 32,
        1 << 56 | addr_reg << 48 | sync,
        1 << 56 | val_reg << 48 | 1,
        3 << 56 | waitall << 16,
        51 << 56 | addr_reg << 40 | val_reg << 32 | 1,
        47 << 56,
    ];
    w[..seq.len()].copy_from_slice(&seq);
    w
}

/// Tyr's ring job is panthor's, instruction for instruction: the cache flush with userspace's
/// flush ID, the wait for it, the call, the wait for every scoreboard entry, the sync-object
/// increment that propagates errors, and the error barrier.
#[test]
fn the_ring_job_is_panthors() {
    assert_eq!(JOB_INSTRS, 16);
    for (start, size, flush, sync) in [
        (0x10_0000, 0x40, 0, 0x20_0000),
        (0xffff_ffff_ffc0, 0x8000, 0x00ff_ffff, 0x7fff_fff8),
        (0x1234_5640, 8, 0x8000_0001, 0x40),
    ] {
        let words = job_instrs(start, size, flush, sync, 8);
        assert_eq!(
            words,
            panthor_job(start, size, flush, sync, 0xff),
            "{start:#x}"
        );
        // And the simulated GPU runs every word of it.
        for w in words {
            assert!(Instr::decode(w).is_ok(), "{w:#018x}");
        }
    }
    // The wait covers exactly the entries the firmware reports.
    assert_eq!(job_instrs(0x1000, 8, 0, 0x2000, 4)[8], 3 << 56 | 0xf << 16);
}

/// A job without a stream keeps the flush, the waits and the signal, with no call.
#[test]
fn a_job_without_a_stream_only_synchronises() {
    let words = job_instrs(0, 0, 7, 0x2000, 8);
    let nop = Instr::nop().encode();
    assert_eq!(words[2..4], [nop, nop]);
    assert_eq!(words[5], nop);
    let mut expected = panthor_job(0, 0, 7, 0x2000, 0xff);
    expected[2] = nop;
    expected[3] = nop;
    expected[5] = nop;
    assert_eq!(words, expected);
}

/// The global request bits the driver sets are those the simulated firmware knows.
#[test]
fn the_global_request_bits_agree() {
    assert_eq!(tyr::csf::glb::REQ_HALT, mali_sim::csf::glb::REQ_HALT);
    assert_eq!(
        tyr::csf::glb::REQ_COUNTER_EN,
        mali_sim::csf::glb::REQ_COUNTER_EN
    );
}

#[test]
fn every_register_the_driver_declares_is_where_the_simulator_has_it() {
    use mali_sim::regs as sim;
    let fixed = [
        ("GPU_ID", regs::GPU_ID::OFFSET, sim::GPU_ID),
        ("L2_FEATURES", regs::L2_FEATURES::OFFSET, sim::L2_FEATURES),
        (
            "CORE_FEATURES",
            regs::CORE_FEATURES::OFFSET,
            sim::CORE_FEATURES,
        ),
        (
            "TILER_FEATURES",
            regs::TILER_FEATURES::OFFSET,
            sim::TILER_FEATURES,
        ),
        (
            "MEM_FEATURES",
            regs::MEM_FEATURES::OFFSET,
            sim::MEM_FEATURES,
        ),
        (
            "MMU_FEATURES",
            regs::MMU_FEATURES::OFFSET,
            sim::MMU_FEATURES,
        ),
        ("AS_PRESENT", regs::AS_PRESENT::OFFSET, sim::AS_PRESENT),
        ("CSF_ID", regs::CSF_ID::OFFSET, sim::CSF_ID),
        (
            "GPU_IRQ_RAWSTAT",
            regs::GPU_IRQ_RAWSTAT::OFFSET,
            sim::GPU_IRQ_RAWSTAT,
        ),
        (
            "GPU_IRQ_CLEAR",
            regs::GPU_IRQ_CLEAR::OFFSET,
            sim::GPU_IRQ_CLEAR,
        ),
        (
            "GPU_IRQ_MASK",
            regs::GPU_IRQ_MASK::OFFSET,
            sim::GPU_IRQ_MASK,
        ),
        (
            "GPU_IRQ_STATUS",
            regs::GPU_IRQ_STATUS::OFFSET,
            sim::GPU_IRQ_STATUS,
        ),
        ("GPU_COMMAND", regs::GPU_COMMAND::OFFSET, sim::GPU_COMMAND),
        ("GPU_STATUS", regs::GPU_STATUS::OFFSET, sim::GPU_STATUS),
        (
            "GPU_FAULTSTATUS",
            regs::GPU_FAULTSTATUS::OFFSET,
            sim::GPU_FAULTSTATUS,
        ),
        (
            "GPU_FAULTADDRESS",
            regs::GPU_FAULTADDRESS::OFFSET,
            sim::GPU_FAULTADDRESS_LO,
        ),
        (
            "TIMESTAMP_OFFSET",
            regs::TIMESTAMP_OFFSET::OFFSET,
            sim::TIMESTAMP_OFFSET_LO,
        ),
        (
            "CYCLE_COUNT",
            regs::CYCLE_COUNT::OFFSET,
            sim::CYCLE_COUNT_LO,
        ),
        ("TIMESTAMP", regs::TIMESTAMP::OFFSET, sim::TIMESTAMP_LO),
        (
            "LATEST_FLUSH_ID",
            regs::LATEST_FLUSH_ID::OFFSET,
            sim::LATEST_FLUSH_ID,
        ),
        (
            "THREAD_MAX_THREADS",
            regs::THREAD_MAX_THREADS::OFFSET,
            sim::THREAD_MAX_THREADS,
        ),
        (
            "THREAD_MAX_WORKGROUP_SIZE",
            regs::THREAD_MAX_WORKGROUP_SIZE::OFFSET,
            sim::THREAD_MAX_WORKGROUP_SIZE,
        ),
        (
            "THREAD_MAX_BARRIER_SIZE",
            regs::THREAD_MAX_BARRIER_SIZE::OFFSET,
            sim::THREAD_MAX_BARRIER_SIZE,
        ),
        (
            "THREAD_FEATURES",
            regs::THREAD_FEATURES::OFFSET,
            sim::THREAD_FEATURES,
        ),
        (
            "TEXTURE_FEATURES",
            regs::TEXTURE_FEATURES::OFFSET,
            sim::TEXTURE_FEATURES_0,
        ),
        (
            "SHADER_PRESENT",
            regs::SHADER_PRESENT::OFFSET,
            sim::SHADER_PRESENT_LO,
        ),
        (
            "TILER_PRESENT",
            regs::TILER_PRESENT::OFFSET,
            sim::TILER_PRESENT_LO,
        ),
        ("L2_PRESENT", regs::L2_PRESENT::OFFSET, sim::L2_PRESENT_LO),
        ("L2_READY_LO", regs::L2_READY_LO::OFFSET, sim::L2_READY_LO),
        ("L2_PWRON_LO", regs::L2_PWRON_LO::OFFSET, sim::L2_PWRON_LO),
        (
            "SHADER_READY",
            regs::SHADER_READY::OFFSET,
            sim::SHADER_READY_LO,
        ),
        (
            "TILER_READY",
            regs::TILER_READY::OFFSET,
            sim::TILER_READY_LO,
        ),
        ("L2_READY", regs::L2_READY::OFFSET, sim::L2_READY_LO),
        (
            "SHADER_PWRON",
            regs::SHADER_PWRON::OFFSET,
            sim::SHADER_PWRON_LO,
        ),
        (
            "TILER_PWRON",
            regs::TILER_PWRON::OFFSET,
            sim::TILER_PWRON_LO,
        ),
        ("L2_PWRON", regs::L2_PWRON::OFFSET, sim::L2_PWRON_LO),
        (
            "SHADER_PWROFF",
            regs::SHADER_PWROFF::OFFSET,
            sim::SHADER_PWROFF_LO,
        ),
        (
            "TILER_PWROFF",
            regs::TILER_PWROFF::OFFSET,
            sim::TILER_PWROFF_LO,
        ),
        ("L2_PWROFF", regs::L2_PWROFF::OFFSET, sim::L2_PWROFF_LO),
        (
            "SHADER_PWRTRANS",
            regs::SHADER_PWRTRANS::OFFSET,
            sim::SHADER_PWRTRANS_LO,
        ),
        (
            "TILER_PWRTRANS",
            regs::TILER_PWRTRANS::OFFSET,
            sim::TILER_PWRTRANS_LO,
        ),
        (
            "L2_PWRTRANS",
            regs::L2_PWRTRANS::OFFSET,
            sim::L2_PWRTRANS_LO,
        ),
        (
            "L2_PWRTRANS_LO",
            regs::L2_PWRTRANS_LO::OFFSET,
            sim::L2_PWRTRANS_LO,
        ),
        ("REVIDR", regs::REVIDR::OFFSET, sim::REVIDR),
        (
            "COHERENCY_FEATURES",
            regs::COHERENCY_FEATURES::OFFSET,
            sim::COHERENCY_FEATURES,
        ),
        (
            "COHERENCY_ENABLE",
            regs::COHERENCY_ENABLE::OFFSET,
            sim::COHERENCY_ENABLE,
        ),
        ("MCU_CONTROL", regs::MCU_CONTROL::OFFSET, sim::MCU_CONTROL),
        ("MCU_STATUS", regs::MCU_STATUS::OFFSET, sim::MCU_STATUS),
        (
            "JOB_IRQ_RAWSTAT",
            regs::JOB_IRQ_RAWSTAT::OFFSET,
            sim::JOB_IRQ_RAWSTAT,
        ),
        (
            "JOB_IRQ_CLEAR",
            regs::JOB_IRQ_CLEAR::OFFSET,
            sim::JOB_IRQ_CLEAR,
        ),
        (
            "JOB_IRQ_MASK",
            regs::JOB_IRQ_MASK::OFFSET,
            sim::JOB_IRQ_MASK,
        ),
        (
            "JOB_IRQ_STATUS",
            regs::JOB_IRQ_STATUS::OFFSET,
            sim::JOB_IRQ_STATUS,
        ),
        (
            "MMU_IRQ_RAWSTAT",
            regs::MMU_IRQ_RAWSTAT::OFFSET,
            sim::MMU_IRQ_RAWSTAT,
        ),
        (
            "MMU_IRQ_CLEAR",
            regs::MMU_IRQ_CLEAR::OFFSET,
            sim::MMU_IRQ_CLEAR,
        ),
        (
            "MMU_IRQ_MASK",
            regs::MMU_IRQ_MASK::OFFSET,
            sim::MMU_IRQ_MASK,
        ),
        (
            "MMU_IRQ_STATUS",
            regs::MMU_IRQ_STATUS::OFFSET,
            sim::MMU_IRQ_STATUS,
        ),
        ("DOORBELL", regs::DOORBELL::OFFSET, sim::doorbell(0)),
    ];
    for (name, driver, sim) in fixed {
        assert_eq!(
            driver, sim,
            "{name}: driver {driver:#x}, simulator {sim:#x}"
        );
    }
    // Address-space registers, for every address space the simulator reserves room for.
    assert_eq!(regs::MAX_AS, sim::MMU_AS_SLOTS);
    let per_as = [
        (
            "AS_TRANSTAB",
            regs::AS_TRANSTAB::OFFSET,
            regs::AS_TRANSTAB::STRIDE,
            sim::AS_TRANSTAB_LO,
        ),
        (
            "AS_MEMATTR",
            regs::AS_MEMATTR::OFFSET,
            regs::AS_MEMATTR::STRIDE,
            sim::AS_MEMATTR_LO,
        ),
        (
            "AS_LOCKADDR",
            regs::AS_LOCKADDR::OFFSET,
            regs::AS_LOCKADDR::STRIDE,
            sim::AS_LOCKADDR_LO,
        ),
        (
            "AS_COMMAND",
            regs::AS_COMMAND::OFFSET,
            regs::AS_COMMAND::STRIDE,
            sim::AS_COMMAND,
        ),
        (
            "AS_FAULTSTATUS",
            regs::AS_FAULTSTATUS::OFFSET,
            regs::AS_FAULTSTATUS::STRIDE,
            sim::AS_FAULTSTATUS,
        ),
        (
            "AS_FAULTADDRESS",
            regs::AS_FAULTADDRESS::OFFSET,
            regs::AS_FAULTADDRESS::STRIDE,
            sim::AS_FAULTADDRESS_LO,
        ),
        (
            "AS_STATUS",
            regs::AS_STATUS::OFFSET,
            regs::AS_STATUS::STRIDE,
            sim::AS_STATUS,
        ),
        (
            "AS_TRANSCFG",
            regs::AS_TRANSCFG::OFFSET,
            regs::AS_TRANSCFG::STRIDE,
            sim::AS_TRANSCFG_LO,
        ),
    ];
    for (name, offset, stride, sim_reg) in per_as {
        for n in 0..regs::MAX_AS {
            assert_eq!(offset + n * stride, sim::as_reg(n, sim_reg), "{name}[{n}]");
        }
    }
    for n in 0..24 {
        assert_eq!(
            regs::DOORBELL::OFFSET + n * regs::DOORBELL::STRIDE,
            sim::doorbell(n),
            "DOORBELL[{n}]"
        );
    }
}

#[test]
fn the_driver_reads_and_writes_the_bits_the_simulator_has() {
    use mali_sim::regs::{as_cmd, gpu_cmd, gpu_irq, gpu_status, mcu};

    let irq = regs::GPU_IRQ_RAWSTAT::from_raw;
    assert!(irq(gpu_irq::FAULT).fault());
    assert!(irq(gpu_irq::PROTM_FAULT).protected_fault());
    assert!(irq(gpu_irq::RESET_COMPLETED).reset_completed());
    assert!(irq(gpu_irq::POWER_CHANGED_SINGLE).power_changed_single());
    assert!(irq(gpu_irq::POWER_CHANGED_ALL).power_changed_all());
    assert!(irq(gpu_irq::CLEAN_CACHES_COMPLETED).clean_caches_completed());
    assert!(irq(gpu_irq::DOORBELL_MIRROR).doorbell_mirror());
    assert!(irq(gpu_irq::MCU_STATUS_CHANGED).mcu_status_changed());

    let status = regs::GPU_STATUS::from_raw;
    assert!(status(gpu_status::ACTIVE).active());
    assert!(status(gpu_status::PWR_ACTIVE).power_active());
    assert!(status(gpu_status::PAGE_FAULT).page_fault());

    // GPU_COMMAND: the command code in bits 7:0 and its payload above.
    let cmd = regs::GPU_COMMAND::from_raw(gpu_cmd::SOFT_RESET);
    assert_eq!(cmd.code().get(), regs::gpu_command::RESET);
    assert_eq!(cmd.payload().get(), regs::gpu_command::RESET_SOFT);
    let cmd = regs::GPU_COMMAND::from_raw(gpu_cmd::HARD_RESET);
    assert_eq!(cmd.payload().get(), regs::gpu_command::RESET_HARD);
    let clean_inv = regs::gpu_command::CACHE_CLEAN | regs::gpu_command::CACHE_INV;
    let cmd = regs::GPU_COMMAND::from_raw(gpu_cmd::flush_caches(clean_inv, clean_inv, 0));
    assert_eq!(cmd.code().get(), regs::gpu_command::FLUSH_CACHES);
    assert_eq!(cmd.payload().get(), clean_inv | clean_inv << 4);

    assert_eq!(regs::as_command::UPDATE, as_cmd::UPDATE);
    assert_eq!(regs::as_command::LOCK, as_cmd::LOCK);
    assert_eq!(regs::as_command::UNLOCK, as_cmd::UNLOCK);
    assert_eq!(regs::as_command::FLUSH_PT, as_cmd::FLUSH_PT);
    assert_eq!(regs::as_command::FLUSH_MEM, as_cmd::FLUSH_MEM);
    assert!(regs::AS_STATUS::from_raw(mali_sim::regs::AS_STATUS_ACTIVE).active());

    assert_eq!(regs::mcu::DISABLED, mcu::DISABLED);
    assert_eq!(regs::mcu::ENABLED, mcu::ENABLED);
    assert_eq!(regs::mcu::HALT, mcu::HALT);
    assert_eq!(regs::mcu::FATAL, mcu::FATAL);

    // JOB_IRQ: bit 31 for the global interface, bit n for group slot n.
    assert_eq!(
        regs::JOB_IRQ_RAWSTAT::zeroed().with_global(true).into_raw(),
        1 << 31
    );
    // MMU_IRQ: the fault bit of AS n in 15:0, its command-completed bit in 31:16.
    let mmu = regs::MMU_IRQ_RAWSTAT::from_raw(1 << 3 | 1 << (16 + 5));
    assert_eq!(
        (mmu.fault().get(), mmu.command_completed().get()),
        (1 << 3, 1 << 5)
    );
}

#[test]
fn the_firmware_interface_fields_match() {
    use mali_sim::csf as sim;
    use tyr::csf as drv;

    assert_eq!(tyr::fw::MCU_SHARED_REGION_START, sim::SHARED_REGION_VA);
    assert_eq!(tyr::fw::CSF_GROUP_CONTROL_OFFSET, sim::csg_control(0));
    assert_eq!(
        tyr::fw::CSF_GROUP_CONTROL_OFFSET + tyr::fw::CSF_STREAM_CONTROL_OFFSET,
        sim::cs_control(0, 0)
    );
    const { assert!(sim::NUM_CSGS <= tyr::fw::MAX_CSGS) };
    const { assert!(sim::STREAMS_PER_CSG <= tyr::fw::MAX_CS_PER_CSG) };

    let glb = [
        (drv::glb::INPUT_VA, sim::glb::INPUT_VA),
        (drv::glb::OUTPUT_VA, sim::glb::OUTPUT_VA),
        (drv::glb::REQ, sim::glb::REQ),
        (drv::glb::ACK_IRQ_MASK, sim::glb::ACK_IRQ_MASK),
        (drv::glb::DOORBELL_REQ, sim::glb::DOORBELL_REQ),
        (drv::glb::HALT_STATUS, sim::glb::HALT_STATUS),
    ];
    let csg = [
        (drv::csg::INPUT_VA, sim::csg::INPUT_VA),
        (drv::csg::OUTPUT_VA, sim::csg::OUTPUT_VA),
        (drv::csg::STREAM_STRIDE, sim::csg::STREAM_STRIDE),
        (drv::csg::REQ, sim::csg::REQ),
        (drv::csg::ACK_IRQ_MASK, sim::csg::ACK_IRQ_MASK),
        (drv::csg::DOORBELL_REQ, sim::csg::DOORBELL_REQ),
        (drv::csg::CS_IRQ_ACK, sim::csg::CS_IRQ_ACK),
        (drv::csg::CS_IRQ_REQ, sim::csg::CS_IRQ_REQ),
        (drv::csg::CONFIG, sim::csg::CONFIG),
        (drv::csg::SUSPEND_SIZE, sim::csg::SUSPEND_SIZE),
        (drv::csg::ENDPOINT_REQ, sim::csg::ENDPOINT_REQ),
        (drv::csg::SUSPEND_BUF, sim::csg::SUSPEND_BUF),
        (
            drv::cs::STATUS_BLOCKED_REASON,
            sim::cs::STATUS_BLOCKED_REASON,
        ),
    ];
    let cs = [
        (drv::cs::INPUT_VA, sim::cs::INPUT_VA),
        (drv::cs::OUTPUT_VA, sim::cs::OUTPUT_VA),
        (drv::cs::REQ, sim::cs::REQ),
        (drv::cs::CONFIG, sim::cs::CONFIG),
        (drv::cs::ACK_IRQ_MASK, sim::cs::ACK_IRQ_MASK),
        (drv::cs::RINGBUF_BASE, sim::cs::RINGBUF_BASE),
        (drv::cs::RINGBUF_SIZE, sim::cs::RINGBUF_SIZE),
        (drv::cs::RINGBUF_INPUT, sim::cs::RINGBUF_INPUT),
        (drv::cs::RINGBUF_OUTPUT, sim::cs::RINGBUF_OUTPUT),
        (drv::cs::FAULT, sim::cs::FAULT),
        (drv::cs::FATAL, sim::cs::FATAL),
        (drv::cs::FAULT_INFO, sim::cs::FAULT_INFO),
    ];
    for (block, fields) in [("glb", &glb[..]), ("csg", &csg[..]), ("cs", &cs[..])] {
        for (i, (driver, sim)) in fields.iter().enumerate() {
            assert_eq!(driver, sim, "{block} field #{i}");
        }
    }
    let bits = [
        (drv::csg::STATE_MASK, sim::csg::STATE_MASK),
        (drv::csg::STATE_TERMINATE, sim::csg::STATE_TERMINATE),
        (drv::csg::STATE_START, sim::csg::STATE_START),
        (drv::csg::STATE_SUSPEND, sim::csg::STATE_SUSPEND),
        (drv::csg::STATE_RESUME, sim::csg::STATE_RESUME),
        (drv::csg::ENDPOINT_CONFIG, sim::csg::ENDPOINT_CONFIG),
        (drv::csg::EP_PRIORITY_SHIFT, sim::csg::EP_PRIORITY_SHIFT),
        (drv::cs::BLOCKED_SYNC_WAIT, sim::cs::BLOCKED_SYNC_WAIT),
        (drv::csg::SYNC_UPDATE, sim::csg::SYNC_UPDATE),
        (drv::csg::IDLE, sim::csg::IDLE),
        (drv::cs::STATE_MASK, sim::cs::STATE_MASK),
        (drv::cs::STATE_START, sim::cs::STATE_START),
        (drv::cs::FATAL_EVENT, sim::cs::FATAL_EVENT),
        (drv::cs::FAULT_EVENT, sim::cs::FAULT_EVENT),
    ];
    for (i, (driver, sim)) in bits.into_iter().enumerate() {
        assert_eq!(driver, sim, "request/event bits #{i}");
    }
}
