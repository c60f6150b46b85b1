// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The firmware's latency: requests are served, and take effect, some time after their
//! doorbell, in any order; what a driver that does not wait for them runs into.

use std::vec::Vec;

use super::{ci_of, instr, map_range, Fw, CALLEE, DATA};
use crate::csf::{self, csg, glb};
use crate::regs::{self, as_cmd, as_reg, doorbell, mcu};
use crate::testutil::HandTables;
use crate::{Config, IrqLine, PhysAddr};

/// A configuration with the MMU's commands immediate and the firmware's latency `ack_ns` plus
/// up to `jitter_ns`, seeded with `seed`.
fn late(ack_ns: u64, jitter_ns: u64, seed: u64) -> Config {
    let mut cfg = Config::g610();
    cfg.timings.mmu_command_ns = 0;
    cfg.timings.fw_ack_ns = ack_ns;
    cfg.timings.fw_ack_jitter_ns = jitter_ns;
    cfg.timings.fw_seed = seed;
    cfg
}

/// Output block of CSG `n`.
fn co_of(n: usize) -> u64 {
    Fw::shared(csf::csg_output(n))
}

/// Whether CSG `n`'s state request is acknowledged.
fn state_acked(fw: &Fw, n: usize) -> bool {
    (fw.rd32(ci_of(n) + csg::REQ) ^ fw.rd32(co_of(n) + csg::ACK)) & csg::STATE_MASK == 0
}

/// Requests `state` for CSG `n` and rings the global doorbell (no wait).
fn request_state(fw: &mut Fw, n: usize, state: u32) {
    let req = fw.rd32(ci_of(n) + csg::REQ);
    fw.wr32(ci_of(n) + csg::REQ, (req & !csg::STATE_MASK) | state);
    fw.glb_doorbell_csg(n);
}

/// Advances in steps of `step_ns` until CSG `n`'s state request is acknowledged; returns the
/// time it took.
fn wait_state(fw: &mut Fw, n: usize, step_ns: u64) -> u64 {
    let start = fw.gpu.now_ns();
    for _ in 0..100_000 {
        if state_acked(fw, n) {
            return fw.gpu.now_ns() - start;
        }
        fw.gpu.advance(step_ns);
    }
    panic!("CSG {n}: never acknowledged");
}

/// [`wait_state`] in steps of 1 us for CSG 0, returning what stream 0 of the slot had executed
/// just before the acknowledgement (which forgets the stream's state) and the time it took.
fn wait_state_running(fw: &mut Fw) -> (u64, u64) {
    let start = fw.gpu.now_ns();
    let mut ran = 0;
    while !state_acked(fw, 0) {
        assert!(fw.gpu.now_ns() - start < 1_000_000, "never acknowledged");
        ran = fw.gpu.stream_instructions(0, 0);
        fw.gpu.advance(1_000);
    }
    (ran, fw.gpu.now_ns() - start)
}

#[test]
fn the_default_firmware_answers_in_tens_of_microseconds() {
    let t = Config::g610().timings;
    assert!(t.fw_ack_ns >= 10_000 && t.fw_ack_ns + t.fw_ack_jitter_ns <= 50_000);
    assert!(
        t.fw_ack_jitter_ns > 0,
        "acknowledgements may come in any order"
    );
}

#[test]
fn a_global_request_is_served_after_the_latency_with_its_interrupt() {
    let mut fw = Fw::boot_late(late(10_000, 0, 1));
    let (i, o) = (Fw::shared(csf::GLB_INPUT), Fw::shared(csf::GLB_OUTPUT));
    fw.wr32(i + glb::ACK_IRQ_MASK, glb::REQ_PING);
    fw.toggle(i + glb::REQ, o + glb::ACK, glb::REQ_PING);
    fw.gpu.write32(doorbell(0), 1);
    assert_ne!(fw.rd32(o + glb::ACK), fw.rd32(i + glb::REQ), "not yet");
    assert_eq!(fw.gpu.fw_requests_pending(), 1);
    assert!(!fw.gpu.irq_pending(IrqLine::Job));
    // Ringing again while the firmware has not got to it changes nothing.
    fw.gpu.advance(5_000);
    fw.gpu.write32(doorbell(0), 1);
    fw.gpu.advance(4_999);
    assert_ne!(fw.rd32(o + glb::ACK), fw.rd32(i + glb::REQ));
    assert_eq!(fw.gpu.next_event_ns(), Some(fw.gpu.now_ns() + 1));
    fw.gpu.advance(1);
    assert_eq!(fw.rd32(o + glb::ACK), fw.rd32(i + glb::REQ));
    assert_eq!(fw.gpu.fw_requests_pending(), 0);
    assert_eq!(fw.gpu.read32(regs::JOB_IRQ_STATUS), 1 << 31);
    // A halt takes effect when it is served: the MCU runs until then.
    fw.toggle(i + glb::REQ, o + glb::ACK, glb::REQ_HALT);
    fw.gpu.write32(doorbell(0), 1);
    assert_eq!(fw.gpu.read32(regs::MCU_STATUS), mcu::ENABLED);
    fw.gpu.advance(10_000);
    assert_eq!(fw.gpu.read32(regs::MCU_STATUS), mcu::HALT);
}

#[test]
fn a_group_starts_when_the_firmware_gets_to_it() {
    let mut fw = Fw::boot_late(late(10_000, 0, 1));
    fw.request_start(0, 0, 0);
    fw.glb_doorbell_csg(0);
    // The global interface takes the doorbell after 10 us, the slot's requests after 10 more.
    fw.gpu.advance(10_000);
    assert_eq!(fw.gpu.fw_requests_pending(), 1 << 1, "slot 0 queued");
    assert!(!state_acked(&fw, 0));
    fw.submit(0, &[instr::move48(2, DATA), instr::move32(4, 7)]);
    fw.gpu.advance(9_999);
    assert_eq!(
        fw.gpu.stream_instructions(0, 0),
        0,
        "the group does not run yet"
    );
    fw.gpu.advance(1);
    assert!(state_acked(&fw, 0));
    assert_ne!(
        fw.gpu.read32(regs::JOB_IRQ_RAWSTAT) & 1,
        0,
        "the slot's interrupt"
    );
    fw.run();
    assert_eq!(fw.gpu.stream_instructions(0, 0), 2);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; `memory_freed_before_...` runs the same paths.
fn requests_rung_together_are_acknowledged_in_either_order() {
    let mut orders = [0u32; 3];
    for seed in 0..16 {
        let mut fw = Fw::boot_late(late(10_000, 20_000, seed));
        fw.request_start(0, 0, 0);
        fw.request_start(1, 1, 0);
        // Both slots' doorbell bits, one ring.
        fw.toggle(
            Fw::shared(csf::GLB_INPUT + glb::DOORBELL_REQ),
            Fw::shared(csf::GLB_OUTPUT + glb::DOORBELL_ACK),
            0b11,
        );
        fw.gpu.write32(doorbell(0), 1);
        let first = loop {
            fw.gpu.advance(100);
            match (state_acked(&fw, 0), state_acked(&fw, 1)) {
                (false, false) => continue,
                (true, false) => break 0,
                (false, true) => break 1,
                (true, true) => break 2,
            }
        };
        orders[first] += 1;
        // Each within the bounds of two hops.
        wait_state(&mut fw, 0, 100);
        wait_state(&mut fw, 1, 100);
        assert!(fw.gpu.now_ns() < 200_000);
    }
    assert!(
        orders[0] > 0 && orders[1] > 0,
        "slot 0 first {} times, slot 1 first {} times",
        orders[0],
        orders[1]
    );
}

/// A stream on CSG 0 running a long user stream (480 instructions, 30 engine steps of 1 us):
/// returns the booted firmware with the stream a few steps in.
fn busy_group(ack_ns: u64) -> Fw {
    let mut cfg = late(ack_ns, 0, 1);
    cfg.timings.cs_step_ns = 1_000;
    let mut fw = Fw::boot_late(cfg);
    fw.request_start(0, 0, 0);
    fw.glb_doorbell_csg(0);
    wait_state(&mut fw, 0, 1_000);
    let callee: Vec<u64> = (0..480).map(|_| instr::add_imm32(4, 4, 1)).collect();
    for (i, w) in callee.iter().enumerate() {
        fw.user_wr64(CALLEE + 8 * i as u64, *w);
    }
    fw.submit(
        0,
        &[
            instr::move48(40, CALLEE),
            instr::move32(42, 8 * callee.len() as u32),
            instr::call(40, 42),
            instr::move48(2, DATA),
            instr::store_multiple(4, 2, 0, 1),
        ],
    );
    fw.gpu.advance(3_000);
    assert!(fw.gpu.stream_instructions(0, 0) > 0);
    fw
}

/// Unmaps the user stream's page from AS 1 and invalidates the AS's TLB, as a driver that
/// frees the memory does.
fn unmap_callee(fw: &mut Fw) {
    let root = PhysAddr(fw.gpu.read64(as_reg(1, regs::AS_TRANSTAB_LO)));
    HandTables { root }.unmap(&fw.mem, CALLEE);
    fw.gpu.write32(as_reg(1, regs::AS_COMMAND), as_cmd::UPDATE);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; `memory_freed_before_...` runs the same paths.
fn a_terminated_group_runs_until_the_acknowledgement() {
    let mut fw = busy_group(10_000);
    request_state(&mut fw, 0, csg::STATE_TERMINATE);
    let before = fw.gpu.stream_instructions(0, 0);
    let (at_ack, took) = wait_state_running(&mut fw);
    assert!(took >= 20_000, "two hops of 10 us: {took}");
    assert!(
        at_ack > before + 100,
        "ran {before} -> {at_ack} while pending"
    );
    // Acknowledged, the group no longer runs: its memory may go.
    unmap_callee(&mut fw);
    fw.gpu.advance(100_000);
    assert_eq!(fw.gpu.read32(as_reg(1, regs::AS_FAULTSTATUS)), 0);
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert!(fw.gpu.bus_errors().is_empty());
}

#[test]
fn memory_freed_before_the_acknowledgement_is_still_used() {
    // What a driver that does not wait for the termination runs into: the stream goes on
    // until the firmware gets to the request and faults on the memory taken from it.
    let mut fw = busy_group(10_000);
    request_state(&mut fw, 0, csg::STATE_TERMINATE);
    unmap_callee(&mut fw);
    wait_state(&mut fw, 0, 1_000);
    let status = fw.gpu.read32(as_reg(1, regs::AS_FAULTSTATUS));
    assert_ne!(status, 0, "the GPU used the memory after it was unmapped");
    assert_ne!(fw.gpu.read32(regs::MMU_IRQ_RAWSTAT) & (1 << 1), 0);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; `memory_freed_before_...` runs the same paths.
fn a_suspend_saves_the_state_of_the_acknowledgement() {
    let mut fw = busy_group(10_000);
    let root = PhysAddr(fw.gpu.read64(as_reg(0, regs::AS_TRANSTAB_LO)));
    map_range(
        &HandTables { root },
        &fw.mem,
        super::SUSPEND,
        csf::suspend::SIZE / 4096,
    );
    fw.wr64(ci_of(0) + csg::SUSPEND_BUF, super::SUSPEND);
    request_state(&mut fw, 0, csg::STATE_SUSPEND);
    let before = fw.gpu.stream_instructions(0, 0);
    let (saved, _) = wait_state_running(&mut fw);
    assert!(
        saved > before + 100,
        "ran {before} -> {saved} until the suspend was served"
    );
    fw.gpu.advance(100_000);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 0, "stopped and forgotten");
}

#[test]
fn requests_not_served_are_lost_with_the_firmware() {
    // Disabling the MCU: a cold boot follows, with nothing requested.
    let mut fw = Fw::boot_late(late(10_000, 0, 1));
    fw.request_start(0, 0, 0);
    fw.glb_doorbell_csg(0);
    fw.gpu.advance(15_000);
    assert_eq!(fw.gpu.fw_requests_pending(), 1 << 1);
    fw.gpu.write32(regs::MCU_CONTROL, mcu::DISABLED);
    assert_eq!(fw.gpu.fw_requests_pending(), 0);
    fw.gpu.advance(100_000);
    assert!(!state_acked(&fw, 0));
    // A GPU reset.
    let mut fw = Fw::boot_late(late(10_000, 0, 1));
    fw.request_start(0, 0, 0);
    fw.glb_doorbell_csg(0);
    fw.gpu.write32(regs::GPU_COMMAND, regs::gpu_cmd::SOFT_RESET);
    fw.gpu.advance(fw.gpu.config().timings.reset_ns);
    assert_eq!(fw.gpu.resets_completed(), 1);
    assert_eq!(fw.gpu.fw_requests_pending(), 0);
    assert_eq!(fw.gpu.next_event_ns(), None);
}
