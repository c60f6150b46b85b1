// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The command-stream frontend (CSF): firmware interface and instruction set.
//!
//! # The hardware
//!
//! A CSF GPU does not take jobs from registers. A microcontroller (the MCU), running
//! firmware the driver loads, schedules *command-stream groups* (CSGs) onto a small number of
//! hardware slots; each group has several *command streams* (CSs), each fed from a ring
//! buffer of 64-bit instructions in GPU memory that userspace fills and the driver announces
//! by ringing a doorbell. Driver and firmware talk through interface blocks in memory shared
//! at a fixed MCU virtual address (`0x0400_0000`, mapped through address space 0, the MCU's
//! own): a *global* block, one block per CSG slot and one per CS. Every block has a read-only
//! *control* part (what the firmware offers), an *input* part the driver writes and an
//! *output* part the firmware writes. Requests use toggle bits: the driver flips a bit of an
//! input `REQ` word and rings a doorbell; the firmware acknowledges by making the same bit of
//! the output `ACK` word equal. Events go the other way (the firmware flips `ACK` bits, the
//! driver acknowledges by copying them into `REQ`). Doorbell 0 is the global one; CSG slot `n`
//! is signalled through bit `n` of the global `DOORBELL_REQ` word, and a CS through its CSG's
//! `DOORBELL_REQ`. The `JOB_IRQ` block carries the firmware's interrupts: bit 31 for the
//! global interface, bit `n` for CSG slot `n`.
//!
//! # The simulation (a documented subset)
//!
//! There is no firmware binary: the simulated MCU is a fixed state machine. When the driver
//! enables the MCU (`MCU_CONTROL`), it writes the control blocks into the shared region,
//! which the driver must have mapped (readable and writable, [`SHARED_REGION_SIZE`] bytes at
//! [`SHARED_REGION_VA`]) in address space 0, and raises the global job interrupt; without
//! that mapping `MCU_STATUS` reads `FATAL`. The layout below is the simulator's own (panthor
//! reads the offsets from the control blocks, as the firmware publishes them); the field
//! offsets inside each block are those of panthor's interface structures. Implemented:
//!
//! - global: request bits 10:0 are acknowledged (with `GLB_HALT` halting the MCU), CSG
//!   doorbell requests are served;
//! - CSG: the state request (`START`/`RESUME` run the group, `SUSPEND`/`TERMINATE` stop it),
//!   `ENDPOINT_CONFIG` and `STATUS_UPDATE` are acknowledged (the latter refreshing
//!   `STATUS_STATE`'s idle bit); the `SYNC_UPDATE` and `IDLE` events are raised; `CONFIG` bits 3:0 select the group's address space;
//! - CS: the state request (`START`/`STOP`) and the other request bits are acknowledged;
//!   `FAULT` and `FATAL` events are raised with `FAULT`/`FAULT_INFO` and
//!   `FATAL`/`FATAL_INFO`. The ring buffer (`RINGBUF_BASE`, power-of-two `RINGBUF_SIZE`) is
//!   read in the group's address space; the insert/extract words (`RINGBUF_INPUT`,
//!   `RINGBUF_OUTPUT`) are MCU addresses, as panthor programs them.
//!
//! Not simulated: suspend buffers, protected mode, tiler heaps, performance counters,
//! timers, priorities (all running streams advance round-robin), and every instruction not
//! listed in [`instr`].
//!
//! The firmware reacts to a doorbell within the register write that rings it; streams then
//! run as simulated time advances ([`Timings::cs_step_ns`](super::Timings::cs_step_ns) per
//! step of up to 16 instructions per stream). Stream accesses to a region locked with the
//! `LOCK` MMU command stall until it is unlocked (the MCU's own accesses do not). A fault
//! stops the stream until the driver stops and restarts it (or resets the GPU).

/// MCU virtual address of the shared interface region.
pub const SHARED_REGION_VA: u64 = 0x0400_0000;
/// Size of the shared interface region the driver must map.
pub const SHARED_REGION_SIZE: u64 = 0x9000;
/// Interface version published in the global control block (1.1.0).
pub const IFACE_VERSION: u32 = 1 << 24 | 1 << 16;
/// Number of CSG slots.
pub const NUM_CSGS: usize = 8;
/// Command streams per CSG.
pub const STREAMS_PER_CSG: usize = 8;
/// Number of 32-bit registers of a command stream.
pub const NUM_REGS: usize = 96;
/// Maximum nesting of `CALL`s.
pub const MAX_CALL_DEPTH: usize = 8;

/// Offset of the global control block in the shared region.
pub const GLB_CONTROL: u64 = 0x0;
/// Offset of the global input block.
pub const GLB_INPUT: u64 = 0x100;
/// Offset of the global output block.
pub const GLB_OUTPUT: u64 = 0x200;
/// Offset of CSG slot 0's control block; slot `n` is `GROUP_STRIDE` further per slot.
pub const CSG_CONTROL_BASE: u64 = 0x1000;
/// Distance between CSG control blocks.
pub const GROUP_STRIDE: u64 = 0x1000;
/// Offset of a CSG's first CS control block from the CSG control block.
pub const STREAM_CONTROL_OFFSET: u64 = 0x40;
/// Distance between CS control blocks.
pub const STREAM_STRIDE: u64 = 12;

/// Offset of CSG `n`'s control block.
pub const fn csg_control(n: usize) -> u64 {
    CSG_CONTROL_BASE.wrapping_add((n as u64).wrapping_mul(GROUP_STRIDE))
}
/// Offset of CSG `n`'s input block.
pub const fn csg_input(n: usize) -> u64 {
    csg_control(n).wrapping_add(0x100)
}
/// Offset of CSG `n`'s output block.
pub const fn csg_output(n: usize) -> u64 {
    csg_control(n).wrapping_add(0x180)
}
/// Offset of CS `s` of CSG `n`'s control block.
pub const fn cs_control(n: usize, s: usize) -> u64 {
    csg_control(n)
        .wrapping_add(STREAM_CONTROL_OFFSET)
        .wrapping_add((s as u64).wrapping_mul(STREAM_STRIDE))
}
/// Offset of CS `s` of CSG `n`'s input block.
pub const fn cs_input(n: usize, s: usize) -> u64 {
    csg_control(n)
        .wrapping_add(0x200)
        .wrapping_add((s as u64).wrapping_mul(0x180))
}
/// Offset of CS `s` of CSG `n`'s output block.
pub const fn cs_output(n: usize, s: usize) -> u64 {
    cs_input(n, s).wrapping_add(0x80)
}

/// Field offsets of the global blocks.
pub mod glb {
    /// Control: interface version.
    pub const VERSION: u64 = 0x00;
    /// Control: features.
    pub const FEATURES: u64 = 0x04;
    /// Control: MCU address of the input block.
    pub const INPUT_VA: u64 = 0x08;
    /// Control: MCU address of the output block.
    pub const OUTPUT_VA: u64 = 0x0c;
    /// Control: number of CSG slots.
    pub const GROUP_NUM: u64 = 0x10;
    /// Control: distance between CSG control blocks.
    pub const GROUP_STRIDE: u64 = 0x14;
    /// Control: performance counter buffer size.
    pub const PERFCNT_SIZE: u64 = 0x18;
    /// Control: instrumentation features.
    pub const INSTR_FEATURES: u64 = 0x1c;
    /// Input/output: request (input) or acknowledge (output) word.
    pub const REQ: u64 = 0x00;
    /// Output: acknowledge word.
    pub const ACK: u64 = 0x00;
    /// Input: which acknowledged bits raise the job interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x04;
    /// Input: CSG doorbell requests (output: `DOORBELL_ACK`).
    pub const DOORBELL_REQ: u64 = 0x08;
    /// Output: CSG doorbell acknowledgements.
    pub const DOORBELL_ACK: u64 = 0x08;
    /// Output: why the MCU halted.
    pub const HALT_STATUS: u64 = 0x10;
    /// Request bit: halt the MCU.
    pub const REQ_HALT: u32 = 1 << 0;
    /// Request bit: ping.
    pub const REQ_PING: u32 = 1 << 8;
    /// Request bits the simulator acknowledges.
    pub const REQ_MASK: u32 = 0x7ff;
}

/// Field offsets and bits of the CSG blocks.
pub mod csg {
    /// Control: features.
    pub const FEATURES: u64 = 0x00;
    /// Control: MCU address of the input block.
    pub const INPUT_VA: u64 = 0x04;
    /// Control: MCU address of the output block.
    pub const OUTPUT_VA: u64 = 0x08;
    /// Control: suspend buffer size.
    pub const SUSPEND_SIZE: u64 = 0x0c;
    /// Control: protected-mode suspend buffer size.
    pub const PROTM_SUSPEND_SIZE: u64 = 0x10;
    /// Control: number of streams.
    pub const STREAM_NUM: u64 = 0x14;
    /// Control: distance between CS control blocks.
    pub const STREAM_STRIDE: u64 = 0x18;
    /// Input: request word (output: `ACK`).
    pub const REQ: u64 = 0x00;
    /// Output: acknowledge word.
    pub const ACK: u64 = 0x00;
    /// Input: which acknowledged bits raise the job interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x04;
    /// Input: CS doorbell requests (output: `DOORBELL_ACK`).
    pub const DOORBELL_REQ: u64 = 0x08;
    /// Output: CS doorbell acknowledgements.
    pub const DOORBELL_ACK: u64 = 0x08;
    /// Input: CS interrupt acknowledgements.
    pub const CS_IRQ_ACK: u64 = 0x0c;
    /// Output: CS interrupt requests (toggled per CS with events).
    pub const CS_IRQ_REQ: u64 = 0x0c;
    /// Input: group configuration; bits 3:0 are the address space.
    pub const CONFIG: u64 = 0x50;
    /// Output: group state (bit 0: idle).
    pub const STATUS_STATE: u64 = 0x18;
    /// State request field.
    pub const STATE_MASK: u32 = 0x7;
    /// State: terminate.
    pub const STATE_TERMINATE: u32 = 0;
    /// State: start.
    pub const STATE_START: u32 = 1;
    /// State: suspend.
    pub const STATE_SUSPEND: u32 = 2;
    /// State: resume.
    pub const STATE_RESUME: u32 = 3;
    /// Request: endpoint configuration.
    pub const ENDPOINT_CONFIG: u32 = 1 << 4;
    /// Request: status update.
    pub const STATUS_UPDATE: u32 = 1 << 5;
    /// Event: a sync object was updated.
    pub const SYNC_UPDATE: u32 = 1 << 28;
    /// Event: every stream of the group is idle.
    pub const IDLE: u32 = 1 << 29;
    /// Request bits the simulator acknowledges.
    pub const REQ_MASK: u32 = STATE_MASK | ENDPOINT_CONFIG | STATUS_UPDATE;
}

/// Field offsets and bits of the CS blocks.
pub mod cs {
    /// Control: features (work registers, scoreboards, endpoints).
    pub const FEATURES: u64 = 0x00;
    /// Control: MCU address of the input block.
    pub const INPUT_VA: u64 = 0x04;
    /// Control: MCU address of the output block.
    pub const OUTPUT_VA: u64 = 0x08;
    /// Input: request word (output: `ACK`).
    pub const REQ: u64 = 0x00;
    /// Output: acknowledge word.
    pub const ACK: u64 = 0x00;
    /// Input: configuration; bits 15:8 are the doorbell.
    pub const CONFIG: u64 = 0x04;
    /// Input: which acknowledged bits raise an interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x0c;
    /// Input: GPU address of the ring buffer.
    pub const RINGBUF_BASE: u64 = 0x10;
    /// Input: ring buffer size in bytes (a power of two).
    pub const RINGBUF_SIZE: u64 = 0x18;
    /// Input: MCU address of the `{insert, extract}` words the driver writes.
    pub const RINGBUF_INPUT: u64 = 0x30;
    /// Input: MCU address of the `{extract, active}` words the firmware writes.
    pub const RINGBUF_OUTPUT: u64 = 0x38;
    /// Output: address of the instruction the stream stopped at (blocked, stalled, faulted).
    pub const STATUS_CMD_PTR: u64 = 0x40;
    /// Output: wait status (bit 31: waiting on a sync object).
    pub const STATUS_WAIT: u64 = 0x48;
    /// Output: the sync object waited on.
    pub const STATUS_WAIT_SYNC_PTR: u64 = 0x50;
    /// Output: the value waited for (low half).
    pub const STATUS_WAIT_SYNC_VALUE: u64 = 0x58;
    /// Output: why the stream is blocked.
    pub const STATUS_BLOCKED_REASON: u64 = 0x60;
    /// Output: fault exception (bits 7:0) and data.
    pub const FAULT: u64 = 0x80;
    /// Output: fatal exception (bits 7:0) and data.
    pub const FATAL: u64 = 0x84;
    /// Output: fault address.
    pub const FAULT_INFO: u64 = 0x88;
    /// Output: fatal information (the instruction address).
    pub const FATAL_INFO: u64 = 0x90;
    /// State request field.
    pub const STATE_MASK: u32 = 0x7;
    /// State: stop.
    pub const STATE_STOP: u32 = 0;
    /// State: start.
    pub const STATE_START: u32 = 1;
    /// Event: fatal error.
    pub const FATAL_EVENT: u32 = 1 << 30;
    /// Event: fault.
    pub const FAULT_EVENT: u32 = 1 << 31;
    /// Request bits the simulator acknowledges.
    pub const REQ_MASK: u32 = STATE_MASK | 1 << 4 | 0xf << 8;
    /// Features of every simulated stream: 96 registers, 8 scoreboards, all endpoints.
    pub const FEATURES_VALUE: u32 = (super::NUM_REGS as u32 - 1) | 8 << 8 | 0x7 << 16;
    /// `STATUS_BLOCKED_REASON`: not blocked.
    pub const BLOCKED_UNBLOCKED: u32 = 0;
    /// `STATUS_BLOCKED_REASON`: waiting on a sync object.
    pub const BLOCKED_SYNC_WAIT: u32 = 3;
    /// `STATUS_WAIT` bit: waiting on a sync object.
    pub const STATUS_WAIT_SYNC: u32 = 1 << 31;
}

/// Offsets in the ring buffer's input and output words.
pub mod ring {
    /// Input: where the driver has written up to (bytes, monotonically increasing).
    pub const INSERT: u64 = 0x0;
    /// Input: the extract pointer as the driver last saw it.
    pub const INPUT_EXTRACT: u64 = 0x8;
    /// Output: where the stream has executed up to (bytes, monotonically increasing).
    pub const EXTRACT: u64 = 0x0;
    /// Output: non-zero while the stream is executing.
    pub const ACTIVE: u64 = 0x8;
}

/// Exception codes the simulated streams report (values of panthor's exception table).
pub mod exception {
    /// An instruction the simulator does not implement, or a malformed one.
    pub const CS_INSTR_INVALID: u8 = 0x49;
    /// Too many nested `CALL`s.
    pub const CS_CALL_STACK_OVERFLOW: u8 = 0x4a;
    /// A memory access hit memory that does not exist.
    pub const CS_BUS_FAULT: u8 = 0x48;
}

/// The instruction set, shared with the driver (which emits its ring-buffer instructions with
/// the same encoders).
pub use crate::csf::instr;
