// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The firmware interface as the driver sees it, and the command-stream instruction set.
//!
//! The MCU publishes its interface in the shared region (see [`crate::fw`]): each block's
//! control part holds the MCU addresses of its input part (written by the driver) and output
//! part (written by the firmware). The offsets below are those of panthor's interface
//! structures; the driver reads the block addresses from the control blocks at boot rather than
//! assuming a layout.
//!
//! Requests are toggle bits: to request something the driver flips a bit of an input `REQ`
//! word and rings the doorbell of the block; the firmware acknowledges by making the same bit
//! of the output `ACK` word equal. Events travel the other way: the firmware flips an `ACK`
//! bit and the driver acknowledges by flipping its `REQ` bit back into agreement.

/// Global block fields.
pub mod glb {
    /// Control: MCU address of the input block.
    pub const INPUT_VA: u64 = 0x08;
    /// Control: MCU address of the output block.
    pub const OUTPUT_VA: u64 = 0x0c;
    /// Input: request bits / output: acknowledged bits.
    pub const REQ: u64 = 0x00;
    /// Input: which acknowledged requests raise an interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x04;
    /// Input: one toggle bit per group slot whose requests should be looked at.
    pub const DOORBELL_REQ: u64 = 0x08;
    /// Output: MCU halt status.
    pub const HALT_STATUS: u64 = 0x10;
    /// `REQ` bit, a level: halt the MCU (panthor's `GLB_HALT`).
    pub const REQ_HALT: u32 = 1 << 0;
    /// `REQ` bit, a level: let command streams sample the timestamp and cycle counters
    /// (panthor's `GLB_COUNTER_EN`, set at boot since uAPI 1.6).
    pub const REQ_COUNTER_EN: u32 = 1 << 7;
}

/// Command-stream group (CSG) block fields.
pub mod csg {
    /// Control: MCU address of the input block.
    pub const INPUT_VA: u64 = 0x04;
    /// Control: MCU address of the output block.
    pub const OUTPUT_VA: u64 = 0x08;
    /// Control: bytes of suspend buffer a group needs.
    pub const SUSPEND_SIZE: u64 = 0x0c;
    /// Control: distance between the stream control blocks.
    pub const STREAM_STRIDE: u64 = 0x18;
    /// Input: requests / output: acknowledgements and events.
    pub const REQ: u64 = 0x00;
    /// Input: which acknowledgements and events raise an interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x04;
    /// Input: one toggle bit per stream whose requests should be looked at.
    pub const DOORBELL_REQ: u64 = 0x08;
    /// Output: the stream doorbells the firmware has seen.
    pub const DOORBELL_ACK: u64 = 0x08;
    /// Input: acknowledged stream interrupts (output: requested ones).
    pub const CS_IRQ_ACK: u64 = 0x0c;
    /// Output: stream interrupt requests.
    pub const CS_IRQ_REQ: u64 = 0x0c;
    /// Input: endpoint request; its priority field is bits 31:28.
    pub const ENDPOINT_REQ: u64 = 0x34;
    /// Input: MCU address of the group's suspend buffer (64-bit).
    pub const SUSPEND_BUF: u64 = 0x40;
    /// Input: configuration; bits 3:0 select the address space.
    pub const CONFIG: u64 = 0x50;
    /// First bit of the priority field of `ENDPOINT_REQ` (4 bits, 15 highest).
    pub const EP_PRIORITY_SHIFT: u32 = 28;
    /// State request field of `REQ`.
    pub const STATE_MASK: u32 = 0x7;
    /// State: terminate.
    pub const STATE_TERMINATE: u32 = 0;
    /// State: start.
    pub const STATE_START: u32 = 1;
    /// State: suspend (save the streams into the suspend buffer and stop).
    pub const STATE_SUSPEND: u32 = 2;
    /// State: resume from the suspend buffer.
    pub const STATE_RESUME: u32 = 3;
    /// Request: the endpoint request (priority) changed.
    pub const ENDPOINT_CONFIG: u32 = 1 << 4;
    /// Event: a stream updated a sync object.
    pub const SYNC_UPDATE: u32 = 1 << 28;
    /// Event: every stream of the group went idle.
    pub const IDLE: u32 = 1 << 29;
}

/// Command-stream (CS) block fields.
pub mod cs {
    /// Control: MCU address of the input block.
    pub const INPUT_VA: u64 = 0x04;
    /// Control: MCU address of the output block.
    pub const OUTPUT_VA: u64 = 0x08;
    /// Input: requests / output: acknowledgements and events.
    pub const REQ: u64 = 0x00;
    /// Input: configuration; bits 3:0 are the stream's priority within its group (15
    /// highest, panthor's `CS_CONFIG_PRIORITY`), bits 15:8 name its doorbell.
    pub const CONFIG: u64 = 0x04;
    /// Where the doorbell field of [`CONFIG`] starts.
    pub const CONFIG_DOORBELL_SHIFT: u32 = 8;
    /// Input: which acknowledgements raise an interrupt.
    pub const ACK_IRQ_MASK: u64 = 0x0c;
    /// Input: GPU address of the ring buffer.
    pub const RINGBUF_BASE: u64 = 0x10;
    /// Input: ring buffer size in bytes.
    pub const RINGBUF_SIZE: u64 = 0x18;
    /// Input: the chunk given to a stream that reported `TILER_OOM` (a heap chunk link: GPU
    /// address in bits 63:12, size in pages in bits 11:0), 0 for none.
    pub const HEAP_START: u64 = 0x20;
    /// Input: the end of that chunk (panthor writes the same link as `HEAP_START`).
    pub const HEAP_END: u64 = 0x28;
    /// Input: MCU address of the `{insert, extract}` words the driver writes.
    pub const RINGBUF_INPUT: u64 = 0x30;
    /// Input: MCU address of the `{extract, active}` words the firmware writes.
    pub const RINGBUF_OUTPUT: u64 = 0x38;
    /// Output: why the stream is blocked.
    pub const STATUS_BLOCKED_REASON: u64 = 0x60;
    /// `STATUS_BLOCKED_REASON`: waiting on a sync object.
    pub const BLOCKED_SYNC_WAIT: u32 = 3;
    /// Output: fault exception code (bits 7:0).
    pub const FAULT: u64 = 0x80;
    /// Output: fatal exception code (bits 7:0).
    pub const FATAL: u64 = 0x84;
    /// Output: faulting address.
    pub const FAULT_INFO: u64 = 0x88;
    /// Output: render passes whose tiling started on the heap that ran out.
    pub const HEAP_VT_START: u64 = 0xc0;
    /// Output: render passes whose tiling finished.
    pub const HEAP_VT_END: u64 = 0xc4;
    /// Output: render passes whose fragment work finished.
    pub const HEAP_FRAG_END: u64 = 0xcc;
    /// Output: GPU address of the heap context that ran out.
    pub const HEAP_ADDRESS: u64 = 0xd0;
    /// State request field of `REQ`.
    pub const STATE_MASK: u32 = 0x7;
    /// State: start.
    pub const STATE_START: u32 = 1;
    /// Event: the tiler needs another heap chunk (acknowledged once it is answered).
    pub const TILER_OOM: u32 = 1 << 26;
    /// Event: fatal error.
    pub const FATAL_EVENT: u32 = 1 << 30;
    /// Event: fault.
    pub const FAULT_EVENT: u32 = 1 << 31;
}

/// Encoders of the command-stream instructions the driver emits and the simulator executes (Mali v10 encodings: opcode in bits
/// 63:56). Registers are 32-bit; 64-bit operands use an even/odd pair named by its first
/// register.
///
/// | instruction            | effect                                                         |
/// |------------------------|----------------------------------------------------------------|
/// | `NOP`                  | nothing                                                        |
/// | `MOVE48 d, imm`        | `d:d+1 = imm` (48-bit immediate)                               |
/// | `MOVE32 r, imm`        | `r = imm`                                                      |
/// | `WAIT mask`            | wait for scoreboard slots (a no-op: every operation is synchronous here) |
/// | `ADD_IMMEDIATE32 r, s, imm` | `r = s + imm` (wrapping)                                 |
/// | `ADD_IMMEDIATE64 d, s, imm` | `d:d+1 = s:s+1 + imm` (sign-extended, wrapping)          |
/// | `LOAD_MULTIPLE b, [a + off], mask`  | `b+i = mem32[a + off + 4i]` for each bit i of mask |
/// | `STORE_MULTIPLE b, [a + off], mask` | `mem32[a + off + 4i] = b+i` for each bit i of mask |
/// | `CALL a, l`            | execute the `l` bytes of instructions at address `a:a+1`, then return |
/// | `SYNC_ADD32/64 [a], d` | `mem[a] += d`, then signal `SYNC_UPDATE`                       |
/// | `SYNC_SET32/64 [a], d` | `mem[a] = d`, then signal `SYNC_UPDATE`                        |
/// | `SYNC_WAIT32/64 cond [a], d` | block until `mem[a] cond d` holds                        |
/// | `HEAP_SET a`           | the stream's tiler heap context is at `a:a+1`                  |
/// | `RUN_IDVS f, n, t`     | tiling (the simulator's reading): `n` words into the heap, starting in the chunk linked by `f:f+1` if the heap is unused |
/// | `STORE_STATE [a + off], sel` | `mem64[a + off]` = the GPU timestamp (`sel` [`STATE_TIMESTAMP`](instr::STATE_TIMESTAMP)) or cycle count ([`STATE_CYCLE_COUNT`](instr::STATE_CYCLE_COUNT)); needs `COUNTER_EN` |
pub mod instr {
    /// `NOP`.
    pub const NOP: u8 = 0;
    /// `MOVE48`.
    pub const MOVE48: u8 = 1;
    /// `MOVE32`.
    pub const MOVE32: u8 = 2;
    /// `WAIT`.
    pub const WAIT: u8 = 3;
    /// `ADD_IMMEDIATE32`.
    pub const ADD_IMMEDIATE32: u8 = 16;
    /// `ADD_IMMEDIATE64`.
    pub const ADD_IMMEDIATE64: u8 = 17;
    /// `LOAD_MULTIPLE`.
    pub const LOAD_MULTIPLE: u8 = 20;
    /// `STORE_MULTIPLE`.
    pub const STORE_MULTIPLE: u8 = 21;
    /// `CALL`.
    pub const CALL: u8 = 32;
    /// `SYNC_ADD32`.
    pub const SYNC_ADD32: u8 = 37;
    /// `SYNC_SET32`.
    pub const SYNC_SET32: u8 = 38;
    /// `SYNC_WAIT32`.
    pub const SYNC_WAIT32: u8 = 39;
    /// `SYNC_ADD64`.
    pub const SYNC_ADD64: u8 = 51;
    /// `SYNC_SET64`.
    pub const SYNC_SET64: u8 = 52;
    /// `SYNC_WAIT64`.
    pub const SYNC_WAIT64: u8 = 53;
    /// `RUN_IDVS`.
    pub const RUN_IDVS: u8 = 6;
    /// `HEAP_SET`.
    pub const HEAP_SET: u8 = 48;
    /// `STORE_STATE`.
    pub const STORE_STATE: u8 = 40;
    /// `STORE_STATE` selector: the system timestamp (`TIMESTAMP`).
    pub const STATE_TIMESTAMP: u8 = 0;
    /// `STORE_STATE` selector: the GPU cycle counter (`CYCLE_COUNT`).
    pub const STATE_CYCLE_COUNT: u8 = 1;

    /// Conditions of `SYNC_WAIT` (bits 31:28).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Condition {
        /// Proceed when `mem <= value`.
        Lequal = 0,
        /// Proceed when `mem > value`.
        Greater = 1,
        /// Proceed when `mem == value`.
        Equal = 2,
        /// Proceed when `mem != value`.
        Nequal = 3,
        /// Proceed when `mem < value`.
        Less = 4,
        /// Proceed when `mem >= value`.
        Gequal = 5,
        /// Always proceed.
        Always = 6,
    }

    impl Condition {
        /// Decodes a condition field.
        pub const fn from_bits(v: u64) -> Option<Self> {
            Some(match v {
                0 => Condition::Lequal,
                1 => Condition::Greater,
                2 => Condition::Equal,
                3 => Condition::Nequal,
                4 => Condition::Less,
                5 => Condition::Gequal,
                6 => Condition::Always,
                _ => return None,
            })
        }

        /// Whether `mem` satisfies the condition against `value`.
        pub const fn holds(self, mem: u64, value: u64) -> bool {
            match self {
                Condition::Lequal => mem <= value,
                Condition::Greater => mem > value,
                Condition::Equal => mem == value,
                Condition::Nequal => mem != value,
                Condition::Less => mem < value,
                Condition::Gequal => mem >= value,
                Condition::Always => true,
            }
        }
    }

    const fn op(opcode: u8) -> u64 {
        (opcode as u64) << 56
    }

    /// `NOP`.
    pub const fn nop() -> u64 {
        op(NOP)
    }

    /// `MOVE48 d, imm` (the immediate is truncated to 48 bits).
    ///
    /// # Examples
    ///
    /// ```
    /// use tyr::csf::instr;
    ///
    /// assert_eq!(instr::move48(2, 0x1234), 0x0102_0000_0000_1234);
    /// ```
    pub const fn move48(d: u8, imm: u64) -> u64 {
        op(MOVE48) | (d as u64) << 48 | (imm & 0xffff_ffff_ffff)
    }

    /// `MOVE32 r, imm`.
    pub const fn move32(r: u8, imm: u32) -> u64 {
        op(MOVE32) | (r as u64) << 48 | imm as u64
    }

    /// `WAIT mask` on scoreboard slots.
    pub const fn wait(mask: u8) -> u64 {
        op(WAIT) | (mask as u64) << 16
    }

    /// `ADD_IMMEDIATE32 r, s, imm`.
    pub const fn add_imm32(r: u8, s: u8, imm: i32) -> u64 {
        op(ADD_IMMEDIATE32) | (r as u64) << 48 | (s as u64) << 40 | imm as u32 as u64
    }

    /// `ADD_IMMEDIATE64 d, s, imm`.
    pub const fn add_imm64(d: u8, s: u8, imm: i32) -> u64 {
        op(ADD_IMMEDIATE64) | (d as u64) << 48 | (s as u64) << 40 | imm as u32 as u64
    }

    /// `LOAD_MULTIPLE base, [addr + offset], mask`.
    pub const fn load_multiple(base: u8, addr: u8, offset: i16, mask: u16) -> u64 {
        op(LOAD_MULTIPLE)
            | (base as u64) << 48
            | (addr as u64) << 40
            | (mask as u64) << 16
            | offset as u16 as u64
    }

    /// `STORE_MULTIPLE base, [addr + offset], mask`.
    pub const fn store_multiple(base: u8, addr: u8, offset: i16, mask: u16) -> u64 {
        op(STORE_MULTIPLE)
            | (base as u64) << 48
            | (addr as u64) << 40
            | (mask as u64) << 16
            | offset as u16 as u64
    }

    /// `CALL addr, len`: `addr` names a register pair, `len` a register holding the length
    /// in bytes.
    pub const fn call(addr: u8, len: u8) -> u64 {
        op(CALL) | (addr as u64) << 40 | (len as u64) << 32
    }

    /// `SYNC_ADD32 [addr], data`.
    pub const fn sync_add32(addr: u8, data: u8) -> u64 {
        op(SYNC_ADD32) | (addr as u64) << 40 | (data as u64) << 32
    }

    /// `SYNC_ADD64 [addr], data`.
    pub const fn sync_add64(addr: u8, data: u8) -> u64 {
        op(SYNC_ADD64) | (addr as u64) << 40 | (data as u64) << 32
    }

    /// `SYNC_SET32 [addr], data`.
    pub const fn sync_set32(addr: u8, data: u8) -> u64 {
        op(SYNC_SET32) | (addr as u64) << 40 | (data as u64) << 32
    }

    /// `SYNC_SET64 [addr], data`.
    pub const fn sync_set64(addr: u8, data: u8) -> u64 {
        op(SYNC_SET64) | (addr as u64) << 40 | (data as u64) << 32
    }

    /// `SYNC_WAIT32 cond [addr], data`.
    pub const fn sync_wait32(cond: Condition, addr: u8, data: u8) -> u64 {
        op(SYNC_WAIT32) | (addr as u64) << 40 | (data as u64) << 32 | (cond as u64) << 28
    }

    /// `SYNC_WAIT64 cond [addr], data`.
    pub const fn sync_wait64(cond: Condition, addr: u8, data: u8) -> u64 {
        op(SYNC_WAIT64) | (addr as u64) << 40 | (data as u64) << 32 | (cond as u64) << 28
    }

    /// `HEAP_SET addr`: `addr` names the register pair holding the heap context's address.
    pub const fn heap_set(addr: u8) -> u64 {
        op(HEAP_SET) | (addr as u64) << 40
    }

    /// `RUN_IDVS first, count, tag`: pairs `first` (the link of the heap's first chunk) and
    /// `tag` (the value of the first word), register `count` (words to write). The simulated
    /// GPU's tiling: it writes `count` words `tag + i` into the heap set by `HEAP_SET`.
    pub const fn run_idvs(first: u8, count: u8, tag: u8) -> u64 {
        op(RUN_IDVS) | (first as u64) << 48 | (count as u64) << 40 | (tag as u64) << 32
    }

    /// `STORE_STATE [addr + offset], state`: stores the counter `state` selects
    /// ([`STATE_TIMESTAMP`], [`STATE_CYCLE_COUNT`]) as a 64-bit word at the address in pair
    /// `addr` plus `offset` (8-byte aligned), as panthor's job profiling does.
    pub const fn store_state(addr: u8, state: u8, offset: i16) -> u64 {
        op(STORE_STATE) | (addr as u64) << 40 | (state as u64) << 32 | offset as u16 as u64
    }
}
