// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The firmware interface as the driver sees it, and shorthands for the command-stream
//! instructions.
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

use core::fmt::{self, Write as _};

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
    /// Output: fatal error information (the address of the instruction that failed).
    pub const FATAL_INFO: u64 = 0x90;
    /// Output: the scoreboard entries with operations in flight.
    pub const STATUS_SCOREBOARDS: u64 = 0x5c;
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

/// The command-stream instructions the driver's tests and the example userspace driver
/// (`umd`, with the `host` feature) write, as 64-bit words.
///
/// The instruction set is the [`csf`] crate's (Mali v10, the G610's architecture), which
/// the driver's ring prologue ([`crate::sched`]) and the simulated GPU use too. These are
/// shorthands over its typed [`Instr`](::csf::Instr), with registers as plain numbers:
/// `move48(2, va)` is `MOVE48 d2, #va`. Synchronisation operations are the simplest form: system
/// scope, no error propagation, no wait mask, signal slot 0. Remember that loads, stores and
/// sync operations are asynchronous: a register loaded by `LOAD_MULTIPLE` is there once the
/// stream's "other" scoreboard entry (0 unless `SET_SB_ENTRY` chose another) drains, see
/// [`wait`](instr::wait).
///
/// # Examples
///
/// ```
/// use tyr::csf::instr;
///
/// assert_eq!(instr::move48(2, 0x1234), 0x0102_0000_0000_1234);
/// assert_eq!(csf::Instr::decode(instr::wait(1)).unwrap().to_string(), "WAIT #0x1");
/// ```
pub mod instr {
    use ::csf::{Imm48, Instr, Reg, Reg64, Slot, SlotMask, SyncOp, WaitMask};
    pub use ::csf::{StateSel, WaitCondition as Condition};

    /// `STORE_STATE` of the system timestamp.
    pub const STATE_TIMESTAMP: StateSel = StateSel::Timestamp;
    /// `STORE_STATE` of the cycle counter.
    pub const STATE_CYCLE_COUNT: StateSel = StateSel::CycleCount;

    /// `NOP`.
    pub const fn nop() -> u64 {
        Instr::nop().encode()
    }

    /// `MOVE48 d, imm`; bits of `imm` above 48 are not part of the instruction.
    pub const fn move48(d: u8, imm: u64) -> u64 {
        Instr::move48(Reg64(d), Imm48::from_low_bits(imm)).encode()
    }

    /// `MOVE32 r, imm`.
    pub const fn move32(r: u8, imm: u32) -> u64 {
        Instr::move32(Reg(r), imm).encode()
    }

    /// `WAIT mask`: until no operation is in flight on the scoreboard entries of `mask`.
    pub const fn wait(mask: u8) -> u64 {
        Instr::wait(WaitMask::from_bits(mask)).encode()
    }

    /// `ADD_IMMEDIATE32 r, s, imm`.
    pub const fn add_imm32(r: u8, s: u8, imm: i32) -> u64 {
        Instr::add_imm32(Reg(r), Reg(s), imm).encode()
    }

    /// `ADD_IMMEDIATE64 d, s, imm`.
    pub const fn add_imm64(d: u8, s: u8, imm: i32) -> u64 {
        Instr::add_imm64(Reg64(d), Reg64(s), imm).encode()
    }

    /// `LOAD_MULTIPLE base, [addr + offset], mask`.
    pub const fn load_multiple(base: u8, addr: u8, offset: i16, mask: u16) -> u64 {
        Instr::load_multiple(Reg(base), Reg64(addr), offset, mask).encode()
    }

    /// `STORE_MULTIPLE base, [addr + offset], mask`.
    pub const fn store_multiple(base: u8, addr: u8, offset: i16, mask: u16) -> u64 {
        Instr::store_multiple(Reg(base), Reg64(addr), offset, mask).encode()
    }

    /// `CALL addr, len`: `addr` names a register pair, `len` a register holding the length
    /// in bytes.
    pub const fn call(addr: u8, len: u8) -> u64 {
        Instr::call(Reg64(addr), Reg(len)).encode()
    }

    /// `SYNC_ADD32 [addr], data`.
    pub const fn sync_add32(addr: u8, data: u8) -> u64 {
        Instr::sync_add32(SyncOp::new(Reg64(addr), Reg(data))).encode()
    }

    /// `SYNC_ADD64 [addr], data`.
    pub const fn sync_add64(addr: u8, data: u8) -> u64 {
        Instr::sync_add64(SyncOp::new(Reg64(addr), Reg64(data))).encode()
    }

    /// `SYNC_SET32 [addr], data`.
    pub const fn sync_set32(addr: u8, data: u8) -> u64 {
        Instr::sync_set32(SyncOp::new(Reg64(addr), Reg(data))).encode()
    }

    /// `SYNC_SET64 [addr], data`.
    pub const fn sync_set64(addr: u8, data: u8) -> u64 {
        Instr::sync_set64(SyncOp::new(Reg64(addr), Reg64(data))).encode()
    }

    /// `SYNC_WAIT32.cond [addr], data`.
    pub const fn sync_wait32(cond: Condition, addr: u8, data: u8) -> u64 {
        Instr::sync_wait32(cond, Reg64(addr), Reg(data)).encode()
    }

    /// `SYNC_WAIT64.cond [addr], data`.
    pub const fn sync_wait64(cond: Condition, addr: u8, data: u8) -> u64 {
        Instr::sync_wait64(cond, Reg64(addr), Reg64(data)).encode()
    }

    /// `HEAP_SET addr`: `addr` names the register pair holding the heap context's address.
    pub const fn heap_set(addr: u8) -> u64 {
        Instr::heap_set(Reg64(addr)).encode()
    }

    /// `STORE_STATE [addr + offset], state`: stores the counter `state` selects as a 64-bit
    /// word at the address in pair `addr` plus `offset` (8-byte aligned), as panthor's job
    /// profiling does; signalled on slot 0.
    pub const fn store_state(addr: u8, state: StateSel, offset: i16) -> u64 {
        Instr::store_state(state, Reg64(addr), offset, SlotMask::NONE, Slot::ZERO).encode()
    }
}

// ---------------------------------------------------------------- the firmware file

/// Longest firmware path ([`firmware_path`]).
const PATH_MAX: usize = 48;

/// The path of a firmware file, relative to the firmware directory.
#[derive(Clone, Copy)]
pub struct FwPath {
    // Zeroed past `len`, with room for a NUL after the longest path.
    buf: [u8; PATH_MAX + 1],
    len: usize,
}

impl FwPath {
    /// The path.
    pub fn as_str(&self) -> &str {
        // Only `write_str` fills the buffer, with whole `str`s.
        core::str::from_utf8(self.buf.get(..self.len).unwrap_or(&[])).unwrap_or("")
    }

    /// The path and a NUL after it, as C's firmware loader takes a name.
    pub fn as_bytes_with_nul(&self) -> &[u8] {
        self.buf.get(..=self.len).unwrap_or(&[0])
    }
}

impl fmt::Write for FwPath {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        if end > PATH_MAX {
            return Err(fmt::Error);
        }
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl fmt::Debug for FwPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for FwPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The firmware path for the GPU whose `GPU_ID` is `gpu_id`:
/// `arm/mali/arch<major>.<minor>/mali_csffw.bin`.
///
/// # Examples
///
/// ```
/// assert_eq!(
///     tyr::csf::firmware_path(0xa867_0005).as_str(),
///     "arm/mali/arch10.8/mali_csffw.bin"
/// );
/// assert_eq!(
///     tyr::csf::firmware_path(0xa867_0005).as_bytes_with_nul(),
///     b"arm/mali/arch10.8/mali_csffw.bin\0"
/// );
/// ```
pub fn firmware_path(gpu_id: u32) -> FwPath {
    let mut p = FwPath {
        buf: [0; PATH_MAX + 1],
        len: 0,
    };
    // At most 46 bytes: never fails.
    let _ = write!(
        p,
        "arm/mali/arch{}.{}/mali_csffw.bin",
        gpu_id >> 28,
        (gpu_id >> 24) & 0xf
    );
    p
}
