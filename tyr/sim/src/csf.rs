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
//! - global: request bits 10:0 are acknowledged (with `GLB_HALT` halting the MCU, and
//!   `COUNTER_EN`, a level, letting streams sample the counters with `STORE_STATE`), CSG
//!   doorbell requests are served; disabling the MCU (`MCU_CONTROL`) forgets every group and
//!   stream, so that enabling it again is a cold boot;
//! - power: the MCU starts only with the L2 ready, and work needs its hardware powered:
//!   `RUN_IDVS` with the shader cores or the tiler off faults the stream with
//!   [`CS_ENDPOINT_FAULT`](exception::CS_ENDPOINT_FAULT), and a stream doorbell rung while
//!   the MCU is halted or disabled is reported as a GPU fault
//!   ([`GPU_MCU_OFF_FAULT`](crate::GPU_MCU_OFF_FAULT)); the stream's work waits in its ring
//!   until the driver boots the MCU and starts the group again;
//! - CSG: the state request (`START` runs the group, `TERMINATE` stops it and forgets its
//!   streams, `SUSPEND` stops it between two instructions after saving what each stream needs
//!   to go on into the group's suspend buffer, `RESUME` runs it again from that buffer, on
//!   whichever slot, see [`suspend`]),
//!   `ENDPOINT_CONFIG` and `STATUS_UPDATE` are acknowledged (the latter refreshing
//!   `STATUS_STATE`'s idle bit); the `SYNC_UPDATE` and `IDLE` events are raised; `CONFIG` bits 3:0 select the group's address space;
//! - CS: the state request (`START`/`STOP`) and the other request bits are acknowledged;
//!   `FAULT` and `FATAL` events are raised with `FAULT`/`FAULT_INFO` and
//!   `FATAL`/`FATAL_INFO`. The ring buffer (`RINGBUF_BASE`, power-of-two `RINGBUF_SIZE`) is
//!   read in the group's address space; the insert/extract words (`RINGBUF_INPUT`,
//!   `RINGBUF_OUTPUT`) are MCU addresses, as panthor programs them.
//!
//! - tiler heaps: `HEAP_SET` names a stream's heap context and the simulator's tiling
//!   instruction (`RUN_IDVS`, see [`heap`]) writes into the heap's chunks; when the chunk list
//!   runs out the stream raises the `TILER_OOM` event and waits for the driver's answer.
//!
//! - priorities: the firmware reads the priority field of a group's `ENDPOINT_REQ` when the
//!   group starts or resumes and on `ENDPOINT_CONFIG`. In each engine step the groups of the
//!   highest priority run first; groups of a lower priority run in that step only if no group
//!   above them executed anything (all were blocked, hung, or out of work). Groups of equal
//!   priority all run, in an order that rotates from step to step. This is a simple model of
//!   the firmware's scheduling among resident groups, not its real time-slicing. Inside a
//!   group, the streams follow the same rule by their own priority (`CONFIG` bits 3:0 of the
//!   stream, read when it starts and when its group resumes): a stream runs in a step only if
//!   no stream of a higher priority in its group executed anything.
//!
//! Not simulated: protected mode (and its suspend buffer), fragment work (and with it
//! incremental rendering), performance counters, timers, the firmware's own CSG time-slicing,
//! and every instruction not listed in [`instr`] (those stop the stream with a fatal
//! `CS_INSTR_INVALID`).
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
    /// Request bit, level-style (the firmware follows the bit's value, not its toggles):
    /// let command streams sample the GPU's timestamp and cycle counters. While it is clear,
    /// `STORE_STATE` stores 0 for either counter (see [`instr`](super::instr)).
    pub const REQ_COUNTER_EN: u32 = 1 << 7;
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
    /// Input: endpoint request (bits 31:28: the group's priority, see [`EP_PRIORITY_SHIFT`]).
    pub const ENDPOINT_REQ: u64 = 0x34;
    /// Input: MCU address of the group's suspend buffer (64-bit; see [`super::suspend`]).
    pub const SUSPEND_BUF: u64 = 0x40;
    /// Input: group configuration; bits 3:0 are the address space.
    pub const CONFIG: u64 = 0x50;
    /// First bit of the priority field of `ENDPOINT_REQ` (4 bits, 15 highest).
    pub const EP_PRIORITY_SHIFT: u32 = 28;
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

pub mod suspend {
    //! The simulator's suspend-buffer layout (its own: real firmware's is opaque to the
    //! driver).
    //!
    //! `STATE_SUSPEND` stops a group between two instructions and writes, for each of its
    //! streams, one record of [`STREAM_RECORD`] bytes at `SUSPEND_BUF + s * STREAM_RECORD`
    //! through address space 0; `STATE_RESUME` reads them back, so the group may resume on any
    //! slot whose `SUSPEND_BUF` names the same buffer. The driver only sizes and maps the
    //! buffer ([`SIZE`] bytes, published as the CSG control's `SUSPEND_SIZE`).

    /// Bytes per stream record.
    pub const STREAM_RECORD: u64 = 0x400;
    /// Bytes of a whole suspend buffer.
    pub const SIZE: u64 = STREAM_RECORD * super::STREAMS_PER_CSG as u64;
    /// `u32` flags: [`STARTED`], [`TILER_RUN`], [`OOM_ANSWER`]; bits 15:8 the status.
    pub const FLAGS: u64 = 0x00;
    /// `u64`: the ring's extract position.
    pub const EXTRACT: u64 = 0x08;
    /// `u64`: the heap context (`HEAP_SET`).
    pub const HEAP_CTX: u64 = 0x10;
    /// `u32`: depth of the call stack (user streams being executed).
    pub const DEPTH: u64 = 0x18;
    /// Call frames, innermost last: `{pc, end}` pairs of `u64`.
    pub const FRAMES: u64 = 0x20;
    /// The `RUN_IDVS` in progress: chunk link and top (`u64`), words done, passes started
    /// and finished (`u32`).
    pub const TILER: u64 = 0x90;
    /// `u64`: the driver's answer to a `TILER_OOM` not used yet.
    pub const OOM: u64 = 0xb0;
    /// The 96 registers (`u32` each).
    pub const REGS: u64 = 0x100;
    /// Bytes of a record actually used.
    pub const USED: u64 = REGS + 4 * super::NUM_REGS as u64;
    /// Flag: the stream had been started.
    pub const STARTED: u32 = 1 << 0;
    /// Flag: a `RUN_IDVS` is in progress.
    pub const TILER_RUN: u32 = 1 << 1;
    /// Flag: [`OOM`] holds an answer.
    pub const OOM_ANSWER: u32 = 1 << 2;
    /// Status: ready to run (a stream that waited on a sync object, or for a `TILER_OOM`
    /// answer, resumes ready: it executes the waiting instruction again).
    pub const STATUS_READY: u32 = 0;
    /// Status: stopped by a fault.
    pub const STATUS_FAULTED: u32 = 1;
    /// Status: stopped by a fatal error.
    pub const STATUS_FATAL: u32 = 2;
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
    /// Input: configuration; bits 3:0 are the stream's priority (15 highest), bits 15:8 the
    /// doorbell.
    pub const CONFIG: u64 = 0x04;
    /// The priority field of [`CONFIG`].
    pub const CONFIG_PRIORITY_MASK: u32 = 0xf;
    /// Input: which acknowledged bits raise an interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x0c;
    /// Input: GPU address of the ring buffer.
    pub const RINGBUF_BASE: u64 = 0x10;
    /// Input: ring buffer size in bytes (a power of two).
    pub const RINGBUF_SIZE: u64 = 0x18;
    /// Input: the chunk the driver gives a stream stalled on `TILER_OOM`, encoded as a chunk
    /// link (see [`heap`](super::heap)); 0 when it has none.
    pub const HEAP_START: u64 = 0x20;
    /// Input: the end of that chunk (panthor writes the same link as `HEAP_START`; the
    /// simulator reads only `HEAP_START`).
    pub const HEAP_END: u64 = 0x28;
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
    /// Output, with `TILER_OOM`: tiling passes started on the heap.
    pub const HEAP_VT_START: u64 = 0xc0;
    /// Output, with `TILER_OOM`: tiling passes finished on the heap.
    pub const HEAP_VT_END: u64 = 0xc4;
    /// Output, with `TILER_OOM`: fragment passes finished on the heap.
    pub const HEAP_FRAG_END: u64 = 0xcc;
    /// Output, with `TILER_OOM`: GPU address of the heap context that ran out.
    pub const HEAP_ADDRESS: u64 = 0xd0;
    /// State request field.
    pub const STATE_MASK: u32 = 0x7;
    /// State: stop.
    pub const STATE_STOP: u32 = 0;
    /// State: start.
    pub const STATE_START: u32 = 1;
    /// Event: the tiler ran out of heap memory; the stream waits until the driver
    /// acknowledges it (having written `HEAP_START`/`HEAP_END`) and rings the stream's doorbell.
    pub const TILER_OOM: u32 = 1 << 26;
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
    /// Work reached an endpoint (shader cores, tiler) that is powered off.
    pub const CS_ENDPOINT_FAULT: u8 = 0x44;
    /// The tiler found no heap memory: the driver answered a `TILER_OOM` with no chunk.
    pub const OUT_OF_MEMORY: u8 = 0x60;
}

pub mod heap {
    //! Tiler heaps as the simulated tiler reads them.
    //!
    //! # The hardware
    //!
    //! The tiler sorts the primitives of a render pass into per-tile lists, which it writes into
    //! a *heap*: a singly linked list of *chunks* in GPU memory that the kernel driver allocates.
    //! Every chunk starts with a 64-byte header whose first word links to the next chunk: its
    //! GPU address in bits 63:12 and its size in 4 KiB pages in bits 11:0 (0 ends the list). The
    //! tiler also keeps a small *heap context* in GPU memory, whose address a stream sets with
    //! `HEAP_SET`; the driver only zeroes it. When the tiler has used every chunk, the firmware
    //! raises the stream's `TILER_OOM` event with the heap context address and the heap's
    //! render-pass counters in the stream's output block, and stalls the stream; the driver
    //! either links a new chunk (its link in `HEAP_START`) or answers 0, and acknowledges the
    //! event. With no chunk the tiler cannot go on: the stream faults with `OUT_OF_MEMORY`.
    //!
    //! # The simulation
    //!
    //! The heap context is [`CONTEXT_SIZE`] bytes in the simulator's own layout (the real one is
    //! not public): the current chunk's link ([`CTX_CHUNK`], 0 before the first use), the next
    //! free byte ([`CTX_TOP`]) and the tiling passes started and finished ([`CTX_VT_START`],
    //! [`CTX_VT_END`]). A zeroed context is an unused heap.
    //!
    //! Tiling is [`RUN_IDVS`](super::instr::RUN_IDVS): `RUN_IDVS first, count, tag` writes
    //! `count` 64-bit words (`tag + i` for word `i`, `tag` a register pair) one after the other
    //! into the heap, starting in the chunk whose link is in the pair `first` (what
    //! `TILER_HEAP_CREATE` returned, with the chunk size in bits 11:0) when the heap is unused,
    //! else where the last run stopped. A full chunk is left for the next one in its header's
    //! link; at the end of the list the stream raises `TILER_OOM` (`HEAP_FRAG_END` reads as
    //! `HEAP_VT_END`: there is no fragment work, so every finished tiling pass counts as
    //! rendered). A chunk the driver hands over is linked into the header of the last chunk, as
    //! the list grows, and the run goes on in it. Writes go through the stream's address space;
    //! a chunk that is not mapped faults the stream as any access does.

    /// Bytes of a heap context.
    pub const CONTEXT_SIZE: u64 = 32;
    /// Context: link of the chunk in use (0: the heap is unused).
    pub const CTX_CHUNK: u64 = 0x00;
    /// Context: GPU address of the next free byte in that chunk.
    pub const CTX_TOP: u64 = 0x08;
    /// Context: tiling passes started.
    pub const CTX_VT_START: u64 = 0x10;
    /// Context: tiling passes finished.
    pub const CTX_VT_END: u64 = 0x14;
    /// Bytes of a chunk header (the link, then 56 bytes that must be zero).
    pub const CHUNK_HEADER_SIZE: u64 = 64;
    /// Most words one `RUN_IDVS` writes (more is an invalid instruction).
    pub const MAX_RUN_WORDS: u32 = 1 << 16;

    /// The GPU address of the chunk a link names.
    pub const fn link_addr(link: u64) -> u64 {
        link & !0xfff
    }

    /// The size in bytes of the chunk a link names.
    pub const fn link_size(link: u64) -> u64 {
        (link & 0xfff) << 12
    }
}

/// The command-stream instruction set as the simulated engine reads it.
///
/// Every instruction is one 64-bit word with its opcode in bits 63:56 (Mali v10, the
/// architecture of the G610). Registers are 32 bits wide; a 64-bit operand is an even/odd pair
/// named by its even register. The opcodes are the hardware's: panthor's own ring-buffer
/// prologue (`panthor_sched.c`) emits `MOVE48` (1), `MOVE32` (2), `WAIT` (3), `CALL` (32) and
/// `SYNC_ADD64` (51) with these numbers. This module is the simulator's reading of them,
/// independent of any driver's encoders, so that a driver which emits a wrong opcode or puts a
/// field in the wrong bits gets a stream fault or a different operation, not a pass.
///
/// | operation                          | bits (after the opcode)                          | effect |
/// |------------------------------------|--------------------------------------------------|--------|
/// | `NOP`                              | —                                                | nothing |
/// | `MOVE48 d, imm`                    | d 55:48, imm 47:0                                | `d:d+1 = imm` |
/// | `MOVE32 r, imm`                    | r 55:48, imm 31:0                                | `r = imm` |
/// | `WAIT mask`                        | scoreboard mask 31:16                            | nothing here: every operation completes at once |
/// | `ADD_IMMEDIATE32 d, s, imm`        | d 55:48, s 47:40, imm 31:0                       | `d = s + imm`, wrapping |
/// | `ADD_IMMEDIATE64 d, s, imm`        | as above                                         | `d:d+1 = s:s+1 + imm` (sign-extended), wrapping |
/// | `LOAD_MULTIPLE b, [a + off], mask` | b 55:48, a 47:40, mask 31:16, off 15:0 (signed)  | `b+i = mem32[a + off + 4i]` for each set bit `i` |
/// | `STORE_MULTIPLE b, [a + off], mask`| as above                                         | `mem32[a + off + 4i] = b+i` for each set bit `i` |
/// | `CALL a, l`                        | a 47:40, l 39:32                                 | run the `l` (a register) bytes of instructions at `a:a+1`, then come back |
/// | `SYNC_ADD32/64 [a], d`             | a 47:40, d 39:32                                 | `mem[a] += d`, then the group's `SYNC_UPDATE` event |
/// | `SYNC_SET32/64 [a], d`             | a 47:40, d 39:32                                 | `mem[a] = d`, then `SYNC_UPDATE` |
/// | `SYNC_WAIT32/64 cond [a], d`       | a 47:40, d 39:32, condition 31:28                | block until `mem[a] cond d` |
/// | `HEAP_SET a`                       | a 47:40                                          | the stream's heap context is at `a:a+1` |
/// | `RUN_IDVS f, n, t`                 | f 55:48, n 47:40, t 39:32                        | tiling: `n` (a register) words `t:t+1 + i` into the heap (see [`heap`]) |
/// | `STORE_STATE [a + off], sel`       | a 47:40, sel 39:32, wait mask 31:16, off 15:0 (signed) | `mem64[a + off]` = the counter `sel` names ([`STATE_TIMESTAMP`](instr::STATE_TIMESTAMP), [`STATE_CYCLE_COUNT`](instr::STATE_CYCLE_COUNT)) |
///
/// `STORE_STATE` samples the GPU's counters as the stream reaches it: the system timestamp
/// (`TIMESTAMP`, ticking at [`Timings::timestamp_hz`](super::Timings::timestamp_hz) whatever the
/// GPU clock, plus `TIMESTAMP_OFFSET`) or the cycle counter (`CYCLE_COUNT`, ticking at the GPU
/// clock), the same values a register read gives at that moment. Streams only see the counters
/// while the driver has set the global `COUNTER_EN` request bit ([`glb::REQ_COUNTER_EN`]) and the
/// firmware has acknowledged it: until then `STORE_STATE` stores 0 for both (the registers
/// still count). The address must be 8-byte aligned; another selector (panthor's others, the
/// disjoint count and the error status, are not simulated) is an invalid instruction.
///
/// `RUN_IDVS` is the simulator's stand-in for tiling work: the hardware's instruction (same
/// opcode) takes its draw from many registers and runs shaders; the simulated one only
/// consumes heap memory, which is what the driver takes part in.
///
/// Bits the table does not name (scopes, error propagation, the `WAIT` of a `SYNC_*`) are read
/// as zero would be: the engine has no caches, scopes or deferred operations. Any other opcode,
/// or a condition the hardware does not define, is an invalid instruction: the stream stops
/// with a `FATAL` event and [`CS_INSTR_INVALID`](exception::CS_INSTR_INVALID).
///
/// [`Op::encode`](instr::Op::encode) goes the other way, for the simulator's own tests and for test harnesses
/// that feed it hand-written streams.
///
/// # Examples
///
/// ```
/// use mali_sim::csf::instr::{self, Op};
///
/// // `MOVE48 r2:r3, 0x1234`, as a driver would write it into a ring buffer.
/// let word = 0x0102_0000_0000_1234;
/// assert_eq!(instr::decode(word), Ok(Op::Move48 { d: 2, imm: 0x1234 }));
/// assert_eq!(Op::Move48 { d: 2, imm: 0x1234 }.encode(), word);
/// // `RUN_COMPUTE` (opcode 4) is not simulated.
/// assert_eq!(instr::decode(4 << 56), Err(instr::DecodeError::UnknownOpcode(4)));
/// ```
pub mod instr {
    /// Opcode of `NOP`.
    pub const NOP: u8 = 0;
    /// Opcode of `MOVE48`.
    pub const MOVE48: u8 = 1;
    /// Opcode of `MOVE32`.
    pub const MOVE32: u8 = 2;
    /// Opcode of `WAIT`.
    pub const WAIT: u8 = 3;
    /// Opcode of `RUN_IDVS` (the simulator's tiling; see [`heap`](super::heap)).
    pub const RUN_IDVS: u8 = 6;
    /// Opcode of `HEAP_SET`.
    pub const HEAP_SET: u8 = 48;
    /// Opcode of `ADD_IMMEDIATE32`.
    pub const ADD_IMMEDIATE32: u8 = 16;
    /// Opcode of `ADD_IMMEDIATE64`.
    pub const ADD_IMMEDIATE64: u8 = 17;
    /// Opcode of `LOAD_MULTIPLE`.
    pub const LOAD_MULTIPLE: u8 = 20;
    /// Opcode of `STORE_MULTIPLE`.
    pub const STORE_MULTIPLE: u8 = 21;
    /// Opcode of `CALL`.
    pub const CALL: u8 = 32;
    /// Opcode of `SYNC_ADD32`.
    pub const SYNC_ADD32: u8 = 37;
    /// Opcode of `SYNC_SET32`.
    pub const SYNC_SET32: u8 = 38;
    /// Opcode of `SYNC_WAIT32`.
    pub const SYNC_WAIT32: u8 = 39;
    /// Opcode of `SYNC_ADD64`.
    pub const SYNC_ADD64: u8 = 51;
    /// Opcode of `SYNC_SET64`.
    pub const SYNC_SET64: u8 = 52;
    /// Opcode of `SYNC_WAIT64`.
    pub const SYNC_WAIT64: u8 = 53;
    /// Opcode of `STORE_STATE`.
    pub const STORE_STATE: u8 = 40;
    /// `STORE_STATE` selector (bits 39:32): the system timestamp.
    pub const STATE_TIMESTAMP: u8 = 0;
    /// `STORE_STATE` selector: the GPU cycle counter.
    pub const STATE_CYCLE_COUNT: u8 = 1;

    /// The comparison of a `SYNC_WAIT` (bits 31:28).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Condition {
        /// Go on once `mem <= value`.
        Lequal = 0,
        /// Go on once `mem > value`.
        Greater = 1,
        /// Go on once `mem == value`.
        Equal = 2,
        /// Go on once `mem != value`.
        Nequal = 3,
        /// Go on once `mem < value`.
        Less = 4,
        /// Go on once `mem >= value`.
        Gequal = 5,
        /// Never wait.
        Always = 6,
    }

    impl Condition {
        /// The condition a 4-bit field names, if any.
        pub const fn from_field(field: u8) -> Option<Self> {
            match field {
                0 => Some(Self::Lequal),
                1 => Some(Self::Greater),
                2 => Some(Self::Equal),
                3 => Some(Self::Nequal),
                4 => Some(Self::Less),
                5 => Some(Self::Gequal),
                6 => Some(Self::Always),
                _ => None,
            }
        }

        /// Whether a stream waiting with this condition may go on, `mem` being the value in
        /// memory.
        pub const fn satisfied(self, mem: u64, value: u64) -> bool {
            match self {
                Self::Lequal => mem <= value,
                Self::Greater => mem > value,
                Self::Equal => mem == value,
                Self::Nequal => mem != value,
                Self::Less => mem < value,
                Self::Gequal => mem >= value,
                Self::Always => true,
            }
        }
    }

    /// One decoded instruction: its operation and operand fields, not yet checked against the
    /// stream's register count or alignment rules (the engine does that when it runs it).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Op {
        /// `NOP`.
        Nop,
        /// `MOVE48 d, imm`: `imm` has 48 significant bits.
        Move48 {
            /// Destination pair.
            d: u8,
            /// The immediate.
            imm: u64,
        },
        /// `MOVE32 r, imm`.
        Move32 {
            /// Destination register.
            r: u8,
            /// The immediate.
            imm: u32,
        },
        /// `WAIT mask`.
        Wait {
            /// Scoreboard slots waited for.
            mask: u16,
        },
        /// `ADD_IMMEDIATE32 d, s, imm`.
        AddImm32 {
            /// Destination register.
            d: u8,
            /// Source register.
            s: u8,
            /// The addend.
            imm: i32,
        },
        /// `ADD_IMMEDIATE64 d, s, imm`.
        AddImm64 {
            /// Destination pair.
            d: u8,
            /// Source pair.
            s: u8,
            /// The addend, sign-extended to 64 bits.
            imm: i32,
        },
        /// `LOAD_MULTIPLE base, [addr + offset], mask`.
        LoadMultiple {
            /// First destination register.
            base: u8,
            /// Pair holding the address.
            addr: u8,
            /// Byte offset added to the address.
            offset: i16,
            /// Which of the 16 words from the address are loaded.
            mask: u16,
        },
        /// `STORE_MULTIPLE base, [addr + offset], mask`.
        StoreMultiple {
            /// First source register.
            base: u8,
            /// Pair holding the address.
            addr: u8,
            /// Byte offset added to the address.
            offset: i16,
            /// Which of the 16 words from the address are stored.
            mask: u16,
        },
        /// `CALL addr, len`.
        Call {
            /// Pair holding the callee's address.
            addr: u8,
            /// Register holding its length in bytes.
            len: u8,
        },
        /// `SYNC_ADD32 [addr], data`.
        SyncAdd32 {
            /// Pair holding the sync object's address.
            addr: u8,
            /// Register holding the addend.
            data: u8,
        },
        /// `SYNC_SET32 [addr], data`.
        SyncSet32 {
            /// Pair holding the sync object's address.
            addr: u8,
            /// Register holding the value.
            data: u8,
        },
        /// `SYNC_WAIT32 cond [addr], data`.
        SyncWait32 {
            /// The comparison.
            cond: Condition,
            /// Pair holding the sync object's address.
            addr: u8,
            /// Register holding the value compared with.
            data: u8,
        },
        /// `SYNC_ADD64 [addr], data`.
        SyncAdd64 {
            /// Pair holding the sync object's address.
            addr: u8,
            /// Pair holding the addend.
            data: u8,
        },
        /// `SYNC_SET64 [addr], data`.
        SyncSet64 {
            /// Pair holding the sync object's address.
            addr: u8,
            /// Pair holding the value.
            data: u8,
        },
        /// `SYNC_WAIT64 cond [addr], data`.
        SyncWait64 {
            /// The comparison.
            cond: Condition,
            /// Pair holding the sync object's address.
            addr: u8,
            /// Pair holding the value compared with.
            data: u8,
        },
        /// `HEAP_SET addr`.
        HeapSet {
            /// Pair holding the heap context's address.
            addr: u8,
        },
        /// `STORE_STATE [addr + offset], state`.
        StoreState {
            /// Pair holding the address.
            addr: u8,
            /// Which counter ([`STATE_TIMESTAMP`], [`STATE_CYCLE_COUNT`]; others are refused
            /// when run).
            state: u8,
            /// Byte offset added to the address.
            offset: i16,
        },
        /// `RUN_IDVS first, count, tag`.
        RunIdvs {
            /// Pair holding the link of the heap's first chunk.
            first: u8,
            /// Register holding the number of words.
            count: u8,
            /// Pair holding the first word's value.
            tag: u8,
        },
    }

    /// Why a word is not an instruction the engine runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum DecodeError {
        /// The opcode (bits 63:56) is not one the simulator implements.
        UnknownOpcode(u8),
        /// A `SYNC_WAIT` with a condition field (bits 31:28) no condition has.
        UnknownCondition(u8),
    }

    /// The three register bytes of an instruction: bits 55:48, 47:40 and 39:32.
    const fn fields(d: u8, s: u8, t: u8) -> u64 {
        (d as u64) << 48 | (s as u64) << 40 | (t as u64) << 32
    }

    /// The byte of `word` starting at bit `lsb`.
    const fn byte(word: u64, lsb: u32) -> u8 {
        (word >> lsb) as u8
    }

    /// Splits an instruction word into its operation and operands.
    ///
    /// # Errors
    ///
    /// [`DecodeError`] for an opcode or a condition the simulator does not know.
    pub const fn decode(word: u64) -> Result<Op, DecodeError> {
        let opcode = byte(word, 56);
        let (d, s, t) = (byte(word, 48), byte(word, 40), byte(word, 32));
        let mask = (word >> 16) as u16;
        let cond = match Condition::from_field(byte(word, 28) & 0xf) {
            Some(c) => Ok(c),
            None => Err(DecodeError::UnknownCondition(byte(word, 28) & 0xf)),
        };
        Ok(match opcode {
            NOP => Op::Nop,
            MOVE48 => Op::Move48 {
                d,
                imm: word & 0xffff_ffff_ffff,
            },
            MOVE32 => Op::Move32 {
                r: d,
                imm: word as u32,
            },
            WAIT => Op::Wait { mask },
            ADD_IMMEDIATE32 => Op::AddImm32 {
                d,
                s,
                imm: word as u32 as i32,
            },
            ADD_IMMEDIATE64 => Op::AddImm64 {
                d,
                s,
                imm: word as u32 as i32,
            },
            LOAD_MULTIPLE => Op::LoadMultiple {
                base: d,
                addr: s,
                offset: word as u16 as i16,
                mask,
            },
            STORE_MULTIPLE => Op::StoreMultiple {
                base: d,
                addr: s,
                offset: word as u16 as i16,
                mask,
            },
            CALL => Op::Call { addr: s, len: t },
            HEAP_SET => Op::HeapSet { addr: s },
            STORE_STATE => Op::StoreState {
                addr: s,
                state: t,
                offset: word as u16 as i16,
            },
            RUN_IDVS => Op::RunIdvs {
                first: d,
                count: s,
                tag: t,
            },
            SYNC_ADD32 => Op::SyncAdd32 { addr: s, data: t },
            SYNC_SET32 => Op::SyncSet32 { addr: s, data: t },
            SYNC_ADD64 => Op::SyncAdd64 { addr: s, data: t },
            SYNC_SET64 => Op::SyncSet64 { addr: s, data: t },
            SYNC_WAIT32 | SYNC_WAIT64 => {
                let cond = match cond {
                    Ok(c) => c,
                    Err(e) => return Err(e),
                };
                if opcode == SYNC_WAIT32 {
                    Op::SyncWait32 {
                        cond,
                        addr: s,
                        data: t,
                    }
                } else {
                    Op::SyncWait64 {
                        cond,
                        addr: s,
                        data: t,
                    }
                }
            }
            other => return Err(DecodeError::UnknownOpcode(other)),
        })
    }

    impl Op {
        /// The opcode of this operation.
        pub const fn opcode(self) -> u8 {
            match self {
                Op::Nop => NOP,
                Op::Move48 { .. } => MOVE48,
                Op::Move32 { .. } => MOVE32,
                Op::Wait { .. } => WAIT,
                Op::AddImm32 { .. } => ADD_IMMEDIATE32,
                Op::AddImm64 { .. } => ADD_IMMEDIATE64,
                Op::LoadMultiple { .. } => LOAD_MULTIPLE,
                Op::StoreMultiple { .. } => STORE_MULTIPLE,
                Op::Call { .. } => CALL,
                Op::SyncAdd32 { .. } => SYNC_ADD32,
                Op::SyncSet32 { .. } => SYNC_SET32,
                Op::SyncWait32 { .. } => SYNC_WAIT32,
                Op::SyncAdd64 { .. } => SYNC_ADD64,
                Op::SyncSet64 { .. } => SYNC_SET64,
                Op::SyncWait64 { .. } => SYNC_WAIT64,
                Op::HeapSet { .. } => HEAP_SET,
                Op::RunIdvs { .. } => RUN_IDVS,
                Op::StoreState { .. } => STORE_STATE,
            }
        }

        /// The instruction word; [`decode`] gives `self` back (with `MOVE48`'s immediate cut
        /// to 48 bits).
        pub const fn encode(self) -> u64 {
            let rest = match self {
                Op::Nop => 0,
                Op::Move48 { d, imm } => fields(d, 0, 0) | imm & 0xffff_ffff_ffff,
                Op::Move32 { r, imm } => fields(r, 0, 0) | imm as u64,
                Op::Wait { mask } => (mask as u64) << 16,
                Op::AddImm32 { d, s, imm } | Op::AddImm64 { d, s, imm } => {
                    fields(d, s, 0) | imm as u32 as u64
                }
                Op::LoadMultiple {
                    base,
                    addr,
                    offset,
                    mask,
                }
                | Op::StoreMultiple {
                    base,
                    addr,
                    offset,
                    mask,
                } => fields(base, addr, 0) | (mask as u64) << 16 | offset as u16 as u64,
                Op::Call { addr, len } => fields(0, addr, len),
                Op::SyncAdd32 { addr, data }
                | Op::SyncSet32 { addr, data }
                | Op::SyncAdd64 { addr, data }
                | Op::SyncSet64 { addr, data } => fields(0, addr, data),
                Op::SyncWait32 { cond, addr, data } | Op::SyncWait64 { cond, addr, data } => {
                    fields(0, addr, data) | (cond as u64) << 28
                }
                Op::HeapSet { addr } => fields(0, addr, 0),
                Op::RunIdvs { first, count, tag } => fields(first, count, tag),
                Op::StoreState {
                    addr,
                    state,
                    offset,
                } => fields(0, addr, state) | offset as u16 as u64,
            };
            (self.opcode() as u64) << 56 | rest
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn encode_and_decode_agree() {
            let ops = [
                Op::Nop,
                Op::Move48 {
                    d: 94,
                    imm: 0xffff_ffff_ffff,
                },
                Op::Move32 { r: 95, imm: !0 },
                Op::Wait { mask: 0x8001 },
                Op::AddImm32 {
                    d: 1,
                    s: 2,
                    imm: -1,
                },
                Op::AddImm64 {
                    d: 4,
                    s: 6,
                    imm: i32::MIN,
                },
                Op::LoadMultiple {
                    base: 8,
                    addr: 10,
                    offset: -4,
                    mask: 0xffff,
                },
                Op::StoreMultiple {
                    base: 8,
                    addr: 10,
                    offset: 0x7ffc,
                    mask: 1,
                },
                Op::Call { addr: 40, len: 42 },
                Op::SyncAdd32 { addr: 2, data: 3 },
                Op::SyncSet32 { addr: 2, data: 3 },
                Op::SyncWait32 {
                    cond: Condition::Always,
                    addr: 2,
                    data: 3,
                },
                Op::SyncAdd64 { addr: 2, data: 4 },
                Op::SyncSet64 { addr: 2, data: 4 },
                Op::SyncWait64 {
                    cond: Condition::Lequal,
                    addr: 2,
                    data: 4,
                },
                Op::HeapSet { addr: 6 },
                Op::RunIdvs {
                    first: 8,
                    count: 10,
                    tag: 12,
                },
                Op::StoreState {
                    addr: 6,
                    state: STATE_CYCLE_COUNT,
                    offset: -8,
                },
            ];
            for op in ops {
                assert_eq!(decode(op.encode()), Ok(op), "{op:?}");
            }
            // Fields beyond 48 bits of `MOVE48` are not part of the instruction.
            let cut = Op::Move48 { d: 2, imm: !0 }.encode();
            assert_eq!(
                decode(cut),
                Ok(Op::Move48 {
                    d: 2,
                    imm: 0xffff_ffff_ffff
                })
            );
        }

        #[test]
        fn unknown_opcodes_and_conditions_are_refused() {
            let known = [
                NOP,
                MOVE48,
                MOVE32,
                WAIT,
                ADD_IMMEDIATE32,
                ADD_IMMEDIATE64,
                LOAD_MULTIPLE,
                STORE_MULTIPLE,
                CALL,
                SYNC_ADD32,
                SYNC_SET32,
                SYNC_WAIT32,
                SYNC_ADD64,
                SYNC_SET64,
                SYNC_WAIT64,
                HEAP_SET,
                RUN_IDVS,
                STORE_STATE,
            ];
            for opcode in 0..=u8::MAX {
                let r = decode(u64::from(opcode) << 56);
                if known.contains(&opcode) {
                    assert_eq!(r.map(Op::opcode), Ok(opcode));
                } else {
                    assert_eq!(r, Err(DecodeError::UnknownOpcode(opcode)));
                }
            }
            let bad = u64::from(SYNC_WAIT64) << 56 | 7 << 28;
            assert_eq!(decode(bad), Err(DecodeError::UnknownCondition(7)));
        }
    }
}
