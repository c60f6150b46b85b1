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
//! The simulated MCU runs no code: it is a fixed state machine. It is given an image in Arm's
//! format (the board hands it the file the driver loads; the simulator has its own,
//! [`crate::firmware::IMAGE`]) and, at every cold boot, checks that the driver mapped each of
//! its sections in address space 0 as the image says and loaded its bytes there (see
//! [`crate::firmware`]; an MCU given no image checks only the shared region). When the driver
//! enables the MCU (`MCU_CONTROL`), it then writes the control blocks into the shared region,
//! which the driver must have mapped (readable and writable, [`SHARED_REGION_SIZE`] bytes at
//! [`SHARED_REGION_VA`]) in address space 0, and raises the global job interrupt; without
//! that mapping, or with a section of its image not in place, `MCU_STATUS` reads `FATAL`.
//! The layout below is the simulator's own (panthor reads the offsets from the control
//! blocks, as the firmware publishes them); the field offsets inside each block are those of panthor's interface structures. Implemented:
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
//! - instructions: every Mali v10 instruction, with scoreboards (see [`isa`]).
//!
//! Not simulated: protected mode (and its suspend buffer), shader execution (run
//! instructions occupy their scoreboard entry for a while and compute nothing), caches (a
//! cache flush only moves `LATEST_FLUSH_ID`), performance counters, timers and the firmware's
//! own CSG time-slicing.
//!
//! The firmware answers late, as real firmware does: it serves the global interface's requests
//! [`Timings::fw_ack_ns`](super::Timings::fw_ack_ns) (plus a seeded jitter of up to
//! [`fw_ack_jitter_ns`](super::Timings::fw_ack_jitter_ns)) after the ring of doorbell 0, and
//! the requests of each CSG slot whose doorbell bit it found there (with their streams'
//! requests) as long again later, each slot on its own draw: the acknowledgements of requests
//! rung together come in any order. A request takes effect when it is served, not when it is
//! rung: until then a group asked to terminate or suspend goes on running its streams (which
//! read their rings and write their memory), the suspend saves the state of that moment, and a
//! halt stops the MCU then. A request rung again before it is served is served once, with the
//! request words of that moment. Requests not served yet are lost when the firmware stops
//! (halt, MCU disabled, crash, GPU reset), as its memory of them is. `fw_ack_ns` and the jitter
//! both 0 serve a request within the register write that rings its doorbell (the engine's unit
//! tests use that); [`Gpu::fw_requests_pending`](super::Gpu::fw_requests_pending) shows what
//! the firmware has not served yet. Streams run as simulated time advances ([`Timings::cs_step_ns`](super::Timings::cs_step_ns) per
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
/// Scoreboard entries of a command stream (published in `CS_FEATURES` bits 15:8).
pub const SCOREBOARDS: u8 = 8;
/// Asynchronous operations a command stream may have issued and not seen finish; issuing one
/// more stalls the stream until one finishes.
pub const MAX_PENDING: usize = 16;

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
    /// `STORE_STATE` stores 0 for either counter (see [`isa`](super::isa)).
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
    /// `u64`: the progress counter.
    pub const PROGRESS: u64 = 0xb8;
    /// `u32`: the scoreboard entries (endpoint bits 7:0, other bits 15:8), the resources
    /// claimed (bits 19:16) and the error state (bit 24).
    pub const SB: u64 = 0xc0;
    /// `u64`: the tiler out-of-memory handler's address.
    pub const HANDLER_ADDR: u64 = 0xc8;
    /// `u32`: its length in bytes.
    pub const HANDLER_LEN: u64 = 0xd0;
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
    /// Flag: [`HANDLER_ADDR`] and [`HANDLER_LEN`] hold an exception handler.
    pub const HANDLER: u32 = 1 << 3;
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
    /// Output: the scoreboard entries with operations in flight (bit per entry).
    pub const STATUS_SCOREBOARDS: u64 = 0x5c;
    /// Output: why the stream is blocked.
    pub const STATUS_BLOCKED_REASON: u64 = 0x60;
    /// Output: the value waited for (high half, for a 64-bit sync object).
    pub const STATUS_WAIT_SYNC_VALUE_HI: u64 = 0x64;
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
    pub const FEATURES_VALUE: u32 =
        (super::NUM_REGS as u32 - 1) | (super::SCOREBOARDS as u32) << 8 | 0x7 << 16;
    /// `STATUS_BLOCKED_REASON`: not blocked.
    pub const BLOCKED_UNBLOCKED: u32 = 0;
    /// `STATUS_BLOCKED_REASON`: waiting for scoreboard entries (`WAIT`).
    pub const BLOCKED_SB_WAIT: u32 = 1;
    /// `STATUS_BLOCKED_REASON`: waiting for another stream's progress (`PROGRESS_WAIT`).
    pub const BLOCKED_PROGRESS_WAIT: u32 = 2;
    /// `STATUS_BLOCKED_REASON`: waiting on a sync object.
    pub const BLOCKED_SYNC_WAIT: u32 = 3;
    /// `STATUS_WAIT` bits 15:0: the scoreboard entries a `WAIT` waits for.
    pub const STATUS_WAIT_SB_MASK: u32 = 0xffff;
    /// `STATUS_WAIT` bits 19:16: what waits for them (8: a `WAIT` instruction).
    pub const STATUS_WAIT_SB_SRC_WAIT: u32 = 8 << 16;
    /// `STATUS_WAIT` bits 27:24: the sync wait's condition (0 less-or-equal, 1 greater).
    pub const STATUS_WAIT_SYNC_COND_SHIFT: u32 = 24;
    /// `STATUS_WAIT` bit: waiting for another stream's progress.
    pub const STATUS_WAIT_PROGRESS: u32 = 1 << 28;
    /// `STATUS_WAIT` bit: the sync object waited on is 64-bit.
    pub const STATUS_WAIT_SYNC_64B: u32 = 1 << 30;
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
    /// A sync wait that rejects errors found its sync object's error word set.
    pub const CS_INHERIT_FAULT: u8 = 0x4b;
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
    //! free byte ([`CTX_TOP`]) and the render passes' counters that `HEAP_OPERATION` bumps:
    //! tiling started ([`CTX_VT_START`]), tiling finished ([`CTX_VT_END`]) and fragment work
    //! finished ([`CTX_FRAG_END`]). A zeroed context is an unused heap.
    //!
    //! The tiler writes when `RUN_IDVS` runs with "malloc enable": `INDEX_COUNT * INSTANCE_COUNT`
    //! (registers [`SR_INDEX_COUNT`] and [`SR_INSTANCE_COUNT`]) 64-bit entries, one after the
    //! other, entry `i` holding the draw ID (the register the instruction names, if "draw ID
    //! register enable"; else 0) in bits 63:32 and `INDEX_OFFSET + i` ([`SR_INDEX_OFFSET`],
    //! wrapping) in bits 31:0. This stands for the polygon lists the real tiler writes; no
    //! vertex is shaded. An unused heap starts in its first chunk, which the tiler finds as
    //! silicon does: the tiler context (register pair [`SR_TILER_CTX`], 64-byte aligned) holds
    //! the address of a heap descriptor ([`TILER_HEAP`]), whose size ([`HEAP_SIZE`]) and base
    //! ([`HEAP_BASE`]) name the first chunk (what `TILER_HEAP_CREATE` returned). A used heap
    //! goes on where the last run stopped. A full chunk is left for the next one in its header's
    //! link; at the end of the list the stream raises `TILER_OOM` with the context's counters.
    //! A chunk the driver hands over is linked into the header of the last chunk, as the list
    //! grows, and the run goes on in it. Writes go through the stream's address space; a chunk
    //! that is not mapped faults the stream as any access does.

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
    /// Context: fragment passes finished (`u32`).
    pub const CTX_FRAG_END: u64 = 0x18;
    /// Bytes of a chunk header (the link, then 56 bytes that must be zero).
    pub const CHUNK_HEADER_SIZE: u64 = 64;
    /// Most entries one `RUN_IDVS` writes (more is an invalid instruction).
    pub const MAX_RUN_WORDS: u32 = 1 << 16;
    /// The register pair `RUN_IDVS` reads the tiler context's address from (`TILER_CTX`).
    pub const SR_TILER_CTX: usize = 40;
    /// The register `RUN_IDVS` reads the index count from (`INDEX_COUNT`).
    pub const SR_INDEX_COUNT: usize = 33;
    /// The register `RUN_IDVS` reads the instance count from (`INSTANCE_COUNT`).
    pub const SR_INSTANCE_COUNT: usize = 34;
    /// The register `RUN_IDVS` reads the first index from (`INDEX_OFFSET`).
    pub const SR_INDEX_OFFSET: usize = 35;
    /// Tiler context: GPU address of the heap descriptor (`u64`, the context's word 6).
    pub const TILER_HEAP: u64 = 0x18;
    /// Heap descriptor: chunk size in bytes (`u32`, word 1).
    pub const HEAP_SIZE: u64 = 0x04;
    /// Heap descriptor: GPU address of the first chunk (`u64`, word 2).
    pub const HEAP_BASE: u64 = 0x08;

    /// The GPU address of the chunk a link names.
    pub const fn link_addr(link: u64) -> u64 {
        link & !0xfff
    }

    /// The size in bytes of the chunk a link names.
    pub const fn link_size(link: u64) -> u64 {
        (link & 0xfff) << 12
    }
}

pub mod isa {
    //! The command-stream instruction set, as the simulated engine executes it.
    //!
    //! Streams are Mali v10 instructions (the G610's architecture), decoded with the
    //! [`csf`] crate: the opcode numbers and field positions are the hardware's, and every
    //! opcode of the architecture is executed. An undefined opcode, an undefined value of an
    //! enumerated field (a `SYNC_WAIT` condition other than less-or-equal and greater, a flush
    //! mode, a sync scope, ...) or an operand the stream does not have (a register past
    //! [`NUM_REGS`](super::NUM_REGS), an odd first register of a 64-bit pair, a scoreboard entry
    //! past [`SCOREBOARDS`](super::SCOREBOARDS), a misaligned address) stops the stream with a
    //! `FATAL` event and [`CS_INSTR_INVALID`](super::exception::CS_INSTR_INVALID).
    //!
    //! | instruction | what the engine does |
    //! |---|---|
    //! | `NOP`, `MOVE48`, `MOVE32`, `ADD_IMMEDIATE32/64`, `UMIN32` | register moves and arithmetic, wrapping |
    //! | `WAIT mask` | blocks until no operation is in flight on the entries of `mask` (see scoreboards below), then bumps the progress counter if asked |
    //! | `LOAD_MULTIPLE`, `STORE_MULTIPLE` | issued on the stream's "other" entry: the registers (stores: as they were at issue) move when the operation finishes |
    //! | `SYNC_ADD32/64`, `SYNC_SET32/64` | issued on `signal_slot` after the entries of `wait_mask` drain; when it finishes the value is written, with "error propagate" the stream's error state into the object's error word (at +4 or +8), and a system-scope operation raises the group's `SYNC_UPDATE` |
    //! | `SYNC_WAIT32/64` | blocks until `mem <= value` or `mem > value`; then the object's error word fails the stream with [`CS_INHERIT_FAULT`](super::exception::CS_INHERIT_FAULT) ("error reject") or becomes the stream's error state |
    //! | `STORE_STATE` | issued like a sync operation: stores the system timestamp, the cycle counter (both 0 until the driver sets `COUNTER_EN`), the disjoint count (GPU resets and MCU cold boots so far) or the error state |
    //! | `FLUSH_CACHE2` | issued like a sync operation; when it starts it compares the flush ID in its register with `LATEST_FLUSH_ID`: if a flush finished since that ID was sampled it does nothing, else it takes [`Timings::cache_flush_ns`](crate::Timings::cache_flush_ns) and bumps `LATEST_FLUSH_ID` (caches are not modelled: the ID is what a driver sees) |
    //! | `CALL`, `JUMP` | enter (or, from a called buffer, continue in) the buffer at a register pair, of a length in a register (both multiples of 8); calls nest [`MAX_CALL_DEPTH`](super::MAX_CALL_DEPTH) `- 1` deep below the ring, a deeper one is [`CS_CALL_STACK_OVERFLOW`](super::exception::CS_CALL_STACK_OVERFLOW); a `JUMP` in the ring itself is invalid |
    //! | `BRANCH cond r, offset` | compares `r`, as a signed 32-bit value, with 0 under any of the seven conditions; if it holds, execution goes on `offset` instructions after the next one |
    //! | `SET_SB_ENTRY` | chooses the endpoint entry (run and finish instructions) and the other entry (loads and stores); both start at 0 |
    //! | `REQ_RESOURCE` | claims endpoints (compute, fragment, tiler, IDVS), granted at once; a run instruction needs its endpoint claimed |
    //! | `RUN_COMPUTE`, `RUN_COMPUTE_INDIRECT`, `RUN_TILING`, `RUN_FRAGMENT`, `RUN_FULLSCREEN`, `FINISH_TILING`, `FINISH_FRAGMENT` | issued on the endpoint entry for [`Timings::cs_work_ns`](crate::Timings::cs_work_ns) (`FINISH_FRAGMENT` on its `signal_slot`, bumping the heap's fragment counter if asked); **no shader runs**: the work only occupies its entry. With the shader cores or the tiler off the stream faults with [`CS_ENDPOINT_FAULT`](super::exception::CS_ENDPOINT_FAULT) |
    //! | `RUN_IDVS` | as the other run instructions, and with "malloc enable" the tiler writes `INDEX_COUNT * INSTANCE_COUNT` entries into the heap (see [`heap`](super::heap)) |
    //! | `HEAP_SET`, `HEAP_OPERATION` | name the heap context; bump its tiling-started, tiling-completed or fragment-completed counter (issued like a sync operation) |
    //! | `SET_EXCEPTION_HANDLER` | sets the tiler out-of-memory handler: when the driver answers `TILER_OOM` with no chunk, the stream calls it and then runs the tiling instruction again, instead of faulting |
    //! | `PROGRESS_STORE`, `PROGRESS_LOAD`, `PROGRESS_WAIT` | set and read the stream's progress counter; wait until another stream of the group has reached a value |
    //! | `ERROR_BARRIER` | clears the stream's error state |
    //! | `TRACE_POINT` | waits and signals like a sync operation; the firmware enables no trace buffer, so nothing is written |
    //! | `PROT_REGION` | invalid: protected mode is not simulated |
    //!
    //! # Scoreboards
    //!
    //! Instructions that start work do not wait for it: they issue an operation, counted on a
    //! scoreboard entry, and the stream goes on. An operation starts once every operation
    //! issued before it on the entries of its `wait_mask` has finished, and its effect happens
    //! when it finishes, [`Timings::cs_mem_ns`](crate::Timings::cs_mem_ns) later for loads,
    //! stores and `STORE_STATE` (`cs_work_ns` for endpoint work, `cache_flush_ns` for a flush);
    //! a sync operation writes its object as soon as it starts. So a stream that writes a sync
    //! object without waiting for its work signals early, and
    //! [`Gpu::early_signals`](crate::Gpu::early_signals) counts it. A stream has at most [`MAX_PENDING`](super::MAX_PENDING) operations in flight; one
    //! more waits. A `WAIT` reports its mask in `CS_STATUS_WAIT` (source `WAIT`) with blocked
    //! reason `SB_WAIT`; `CS_STATUS_SCOREBOARDS` holds the entries with work in flight.
    //!
    //! # Examples
    //!
    //! ```
    //! use csf::{Imm48, Instr, Reg64};
    //!
    //! // `MOVE48 d2, #0x1234`, as a driver writes it into a ring buffer.
    //! let word = 0x0102_0000_0000_1234;
    //! assert_eq!(Instr::decode(word), Ok(Instr::move48(Reg64(2), Imm48::of::<0x1234>())));
    //! // Opcode 10 is not an instruction: a stream that reaches it stops with CS_INSTR_INVALID.
    //! assert!(Instr::decode(10 << 56).is_err());
    //! ```
}
