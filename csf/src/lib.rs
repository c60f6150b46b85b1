// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The Arm Mali v10 (Valhall CSF, Mali-G610) command-stream instruction set: a typed encoder
//! and decoder for every instruction, and a disassembler.
//!
//! # The hardware
//!
//! A Mali GPU with the Command Stream Frontend (CSF) is not fed jobs register by register: the
//! driver (or userspace) writes *command streams* into GPU memory, and a small engine in the
//! GPU, run by the firmware, executes them. Each stream is a sequence of 64-bit instructions,
//! stored little-endian; the opcode is in bits 63:56 and the operands in the bits below.
//! Instructions move immediates into registers, do a little arithmetic, load and store
//! registers, branch, call other streams, start GPU work (compute, tiling, fragment jobs),
//! flush caches and operate on *sync objects* in memory (add, set, wait for a value).
//!
//! **Registers.** Each stream has a file of 32-bit registers, 96 of them on Mali v10 (`r0`
//! to `r95`). A 64-bit operand (an address, a 64-bit sync value) lives in two consecutive
//! registers named by the first, which must be even: `d4` is `r4` (low half) and `r5` (high
//! half). Instruction fields name registers with 8 bits, so a word can name registers that do
//! not exist, or an odd pair: this crate decodes them all as [`Reg`] and [`Reg64`], and leaves
//! the check to the engine that runs the stream.
//!
//! **Scoreboard slots.** Work an instruction starts may outlive it: a cache flush, a sync
//! operation, a job. Such an *asynchronous* instruction names a *signal slot* (a
//! [`Slot`], 4 bits) that tracks it until it completes. A later instruction waits for slots
//! through a mask: the `wait_mask` of an asynchronous instruction ([`SlotMask`], 16 bits) holds
//! it back until the slots it names are idle, and `WAIT` ([`WaitMask`], 8 bits on v10) stops
//! the stream until they are. Mali-G610 firmware reports 8 slots.
//!
//! **Opcodes.**
//!
//! | # | name | # | name | # | name |
//! | -: | ---- | -: | ---- | -: | ---- |
//! | 0 | `NOP` | 20 | `LOAD_MULTIPLE` | 39 | `SYNC_WAIT32` |
//! | 1 | `MOVE48` | 21 | `STORE_MULTIPLE` | 40 | `STORE_STATE` |
//! | 2 | `MOVE32` | 22 | `BRANCH` | 41 | `PROT_REGION` |
//! | 3 | `WAIT` | 23 | `SET_SB_ENTRY` | 42 | `PROGRESS_STORE` |
//! | 4 | `RUN_COMPUTE` | 24 | `PROGRESS_WAIT` | 43 | `PROGRESS_LOAD` |
//! | 5 | `RUN_TILING` | 25 | `SET_EXCEPTION_HANDLER` | 44 | `RUN_COMPUTE_INDIRECT` |
//! | 6 | `RUN_IDVS` | 32 | `CALL` | 47 | `ERROR_BARRIER` |
//! | 7 | `RUN_FRAGMENT` | 33 | `JUMP` | 48 | `HEAP_SET` |
//! | 8 | `RUN_FULLSCREEN` | 34 | `REQ_RESOURCE` | 49 | `HEAP_OPERATION` |
//! | 9 | `FINISH_TILING` | 36 | `FLUSH_CACHE2` | 50 | `TRACE_POINT` |
//! | 11 | `FINISH_FRAGMENT` | 37 | `SYNC_ADD32` | 51 | `SYNC_ADD64` |
//! | 16 | `ADD_IMMEDIATE32` | 38 | `SYNC_SET32` | 52 | `SYNC_SET64` |
//! | 17 | `ADD_IMMEDIATE64` | | | 53 | `SYNC_WAIT64` |
//! | 18 | `UMIN32` | | | | |
//!
//! Every other opcode is undefined. The field layout of each instruction is documented on its
//! [`Instr`] variant (numbers and bit positions as published in Mesa's `genxml/v10.xml`).
//!
//! # The API
//!
//! [`Instr`] has one variant per opcode with typed fields: registers, slots, masks, narrow
//! immediates ([`Imm48`], [`TaskIncrement`], ...) that cannot hold a value their bits cannot
//! encode, and an enum for every enumerated field ([`FlushMode`], [`WaitCondition`], ...).
//! [`Instr::encode`] gives the word, [`Instr::decode`] the instruction back or a
//! [`DecodeError`]; `Instr::decode(i.encode()) == Ok(i)` for every `i`. Bits outside an
//! instruction's fields are ignored by `decode`, as the hardware ignores them. `Display`
//! disassembles one instruction, [`Disasm`] a whole stream. Everything is `no_std`, allocates
//! nothing and cannot panic.
//!
//! # Examples
//!
//! The prologue panthor (and Tyr) puts in front of every job on a queue's ring: flush the
//! caches, call the job's stream, then add 1 to the queue's 64-bit sync object once everything
//! is done.
//!
//! ```
//! use csf::*;
//!
//! let (addr, val) = (Reg64(92), Reg(94));
//! let (flush_id, start, size, sync) = (7, 0x80_0000_1000, 0x40, 0x80_0000_2000);
//! let slot0 = Slot::of::<0>();
//! let ring = [
//!     Instr::move32(val, flush_id),
//!     Instr::flush_cache2(
//!         FlushMode::CleanInvalidate,
//!         FlushMode::CleanInvalidate,
//!         OtherFlushMode::Invalidate,
//!         val,
//!         SlotMask::NONE,
//!         slot0,
//!     ),
//!     Instr::move48(addr, Imm48::new(start).ok_or("address too wide")?),
//!     Instr::move32(val, size),
//!     Instr::wait(WaitMask::of(slot0).ok_or("slot too high")?),
//!     Instr::call(addr, val),
//!     Instr::move48(addr, Imm48::new(sync).ok_or("address too wide")?),
//!     Instr::move48(Reg64(94), Imm48::of::<1>()),
//!     Instr::wait(WaitMask::ALL),
//!     Instr::sync_add64(SyncOp::new(addr, Reg64(94)).propagate_error()),
//!     Instr::error_barrier(),
//! ];
//! let words = ring.map(|i| i.encode());
//! assert_eq!(words[1], 36 << 56 | 94 << 40 | 0x233);
//! assert_eq!(words[9], 51 << 56 | 92 << 40 | 94 << 32 | 1);
//! assert_eq!(words.map(Instr::decode), ring.map(Ok));
//! assert_eq!(ring[9].to_string(), "SYNC_ADD64.system.propagate [d92], d94, wait #0x0, signal #0");
//!
//! // A listing of the stream, as it would sit at GPU address 0x10000.
//! let listing = format!("{}", Disasm::new(&words, 0x10000));
//! assert!(listing.starts_with("0x0000000000010000: 025e000000000007  MOVE32 r94, #0x7\n"));
//! # Ok::<(), &str>(())
//! ```
//!
//! Decoding what a word holds, as an engine does:
//!
//! ```
//! use csf::{DecodeError, Instr, Reg, Reg64, WaitCondition};
//!
//! match Instr::decode(0x275c_0001_1000_0001) {
//!     Ok(Instr::SyncWait32(w)) => {
//!         assert_eq!(w.condition, WaitCondition::Greater);
//!         assert_eq!((w.address, w.data), (Reg64(0), Reg(1)));
//!         assert!(w.error_reject);
//!     }
//!     other => panic!("{other:?}"),
//! }
//! assert_eq!(Instr::decode(u64::MAX), Err(DecodeError::UndefinedOpcode(255)));
//! ```

#![no_std]
// No unsafe code; the kernel build's KUnit suite is the one exception (the `kunit_tests`
// macro expands to the registration statics the kernel needs).
#![cfg_attr(not(feature = "kernel"), forbid(unsafe_code))]
#![cfg_attr(feature = "kernel", deny(unsafe_code))]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
#[allow(unsafe_code)]
mod kunit;

mod disasm;
mod error;
mod instr;
mod opcode;
mod operand;

pub use disasm::Disasm;
pub use error::DecodeError;
pub use instr::{Instr, ShaderSelect, SyncOp, SyncWait};
pub use opcode::Opcode;
pub use operand::{
    Condition, ExceptionType, FlushMode, HeapOp, Imm48, NopPayload, OtherFlushMode, ProgressQueue,
    Reg, Reg64, Select, Slot, SlotMask, StateSel, SyncScope, TaskAxis, TaskIncrement, TileOrder,
    WaitCondition, WaitMask,
};
