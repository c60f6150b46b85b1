// SPDX-License-Identifier: GPL-2.0 OR MIT

//! [`Instr`]: one typed instruction, its encoding and its decoding.

use crate::operand::{
    Condition, ExceptionType, FlushMode, HeapOp, Imm48, NopPayload, OtherFlushMode, ProgressQueue,
    Reg, Reg64, Select, Slot, SlotMask, StateSel, SyncScope, TaskAxis, TaskIncrement, TileOrder,
    WaitCondition, WaitMask,
};
use crate::{DecodeError, Opcode};

/// The four resource selectors of the run instructions (`RUN_COMPUTE`, `RUN_TILING`,
/// `RUN_COMPUTE_INDIRECT`): SRT bits 41:40, SPD 43:42, TSD 45:44, FAU 47:46.
///
/// # Examples
///
/// ```
/// use csf::{Select, ShaderSelect};
/// let s = ShaderSelect { fau: Select::of::<1>(), ..ShaderSelect::default() };
/// assert_eq!(s.fau.get(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ShaderSelect {
    /// Which shader-resource-table register set.
    pub srt: Select,
    /// Which shader-program-descriptor register set.
    pub spd: Select,
    /// Which thread-storage-descriptor register set.
    pub tsd: Select,
    /// Which fast-access-uniform register set.
    pub fau: Select,
}

/// The operands of `SYNC_ADD32`/`SYNC_SET32` (`D` = [`Reg`]) and `SYNC_ADD64`/`SYNC_SET64`
/// (`D` = [`Reg64`]).
///
/// # Examples
///
/// ```
/// use csf::{Reg64, Slot, SlotMask, SyncOp, SyncScope};
/// let op = SyncOp::new(Reg64(0), Reg64(2)).propagate_error().signal(Slot::of::<1>());
/// assert_eq!(op.scope, SyncScope::System);
/// assert!(op.error_propagate);
/// assert_eq!(op.wait_mask, SlotMask::NONE);
/// assert_eq!(op.signal_slot.get(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyncOp<D> {
    /// Pair holding the sync object's address (bits 47:40).
    pub address: Reg64,
    /// Register (or pair) holding the addend or the value (bits 39:32).
    pub data: D,
    /// Who must see the write (bits 2:1).
    pub scope: SyncScope,
    /// Whether the stream's error state is propagated into the sync object (bit 0).
    pub error_propagate: bool,
    /// The slots to wait for before the operation (bits 31:16).
    pub wait_mask: SlotMask,
    /// The slot the operation is tracked on (bits 51:48).
    pub signal_slot: Slot,
}

impl<D> SyncOp<D> {
    /// A system-scope operation without error propagation that waits for nothing and is
    /// tracked on slot 0.
    pub const fn new(address: Reg64, data: D) -> Self {
        Self {
            address,
            data,
            scope: SyncScope::System,
            error_propagate: false,
            wait_mask: SlotMask::NONE,
            signal_slot: Slot::ZERO,
        }
    }

    /// The same operation with error propagation on.
    pub const fn propagate_error(mut self) -> Self {
        self.error_propagate = true;
        self
    }

    /// The same operation with another scope.
    pub const fn scope(mut self, scope: SyncScope) -> Self {
        self.scope = scope;
        self
    }

    /// The same operation waiting for `mask` first.
    pub const fn wait(mut self, mask: SlotMask) -> Self {
        self.wait_mask = mask;
        self
    }

    /// The same operation tracked on `slot`.
    pub const fn signal(mut self, slot: Slot) -> Self {
        self.signal_slot = slot;
        self
    }
}

/// The operands of `SYNC_WAIT32` (`D` = [`Reg`]) and `SYNC_WAIT64` (`D` = [`Reg64`]).
///
/// # Examples
///
/// ```
/// use csf::{Reg, Reg64, SyncWait, WaitCondition};
/// let w = SyncWait::new(WaitCondition::Greater, Reg64(4), Reg(6));
/// assert!(!w.error_reject);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyncWait<D> {
    /// Pair holding the sync object's address (bits 47:40).
    pub address: Reg64,
    /// Register (or pair) holding the value compared with (bits 39:32).
    pub data: D,
    /// The comparison (bits 31:28).
    pub condition: WaitCondition,
    /// Whether an error state in the sync object fails the stream (bit 0).
    pub error_reject: bool,
}

impl<D> SyncWait<D> {
    /// A wait without error rejection.
    pub const fn new(condition: WaitCondition, address: Reg64, data: D) -> Self {
        Self {
            address,
            data,
            condition,
            error_reject: false,
        }
    }
}

/// One Mali v10 command-stream instruction, with typed operands.
///
/// Every field's type holds only what the field's bits can encode, so [`Instr::encode`] never
/// drops a bit of a value and `Instr::decode(i.encode()) == Ok(i)` for every `Instr`. The bit
/// ranges of each field are in its documentation.
///
/// # Examples
///
/// ```
/// use csf::{Imm48, Instr, Reg64};
/// let i = Instr::move48(Reg64(2), Imm48::of::<0x1234>());
/// assert_eq!(i.encode(), 1 << 56 | 2 << 48 | 0x1234);
/// assert_eq!(Instr::decode(i.encode()), Ok(i));
/// assert_eq!(i.to_string(), "MOVE48 d2, #0x1234");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    /// `NOP` (0).
    Nop {
        /// Bits 55:0, ignored by the hardware.
        payload: NopPayload,
    },
    /// `MOVE48` (1): `dest = imm`, the high 16 bits cleared.
    Move48 {
        /// Bits 55:48.
        dest: Reg64,
        /// Bits 47:0.
        imm: Imm48,
    },
    /// `MOVE32` (2): `dest = imm`.
    Move32 {
        /// Bits 55:48.
        dest: Reg,
        /// Bits 31:0.
        imm: u32,
    },
    /// `WAIT` (3): waits until every slot of `mask` is idle.
    Wait {
        /// Bits 23:16.
        mask: WaitMask,
        /// Bit 32.
        progress_increment: bool,
    },
    /// `RUN_COMPUTE` (4).
    RunCompute {
        /// Bits 13:0.
        task_increment: TaskIncrement,
        /// Bits 15:14.
        task_axis: TaskAxis,
        /// Bit 32.
        progress_increment: bool,
        /// Bits 47:40.
        select: ShaderSelect,
    },
    /// `RUN_TILING` (5).
    RunTiling {
        /// Bits 31:0.
        flags_override: u32,
        /// Bit 32.
        progress_increment: bool,
        /// Bits 47:40.
        select: ShaderSelect,
    },
    /// `RUN_IDVS` (6).
    RunIdvs {
        /// Bits 31:0.
        flags_override: u32,
        /// Bit 32.
        progress_increment: bool,
        /// Bit 33.
        malloc_enable: bool,
        /// Bit 34: whether `draw_id` is used.
        draw_id_register_enable: bool,
        /// Bit 35.
        varying_srt_select: bool,
        /// Bit 36.
        varying_fau_select: bool,
        /// Bit 37.
        varying_tsd_select: bool,
        /// Bit 38.
        fragment_srt_select: bool,
        /// Bit 39.
        fragment_tsd_select: bool,
        /// Bits 47:40.
        draw_id: Reg,
    },
    /// `RUN_FRAGMENT` (7).
    RunFragment {
        /// Bit 0: tile enable map.
        enable_tem: bool,
        /// Bits 7:4.
        tile_order: TileOrder,
        /// Bit 32.
        progress_increment: bool,
    },
    /// `RUN_FULLSCREEN` (8).
    RunFullscreen {
        /// Bits 31:0.
        flags_override: u32,
        /// Bit 32.
        progress_increment: bool,
        /// Bits 47:40: pair holding the draw call descriptor's address.
        dcd: Reg64,
    },
    /// `FINISH_TILING` (9).
    FinishTiling {
        /// Bit 32.
        progress_increment: bool,
    },
    /// `FINISH_FRAGMENT` (11).
    FinishFragment {
        /// Bit 0.
        increment_fragment_completed: bool,
        /// Bits 31:16.
        wait_mask: SlotMask,
        /// Bits 39:32.
        last_heap_chunk: Reg64,
        /// Bits 47:40.
        first_heap_chunk: Reg64,
        /// Bits 51:48.
        signal_slot: Slot,
    },
    /// `ADD_IMMEDIATE32` (16): `dest = source + imm`, wrapping.
    AddImmediate32 {
        /// Bits 55:48.
        dest: Reg,
        /// Bits 47:40.
        source: Reg,
        /// Bits 31:0.
        imm: i32,
    },
    /// `ADD_IMMEDIATE64` (17): `dest = source + imm` (sign-extended), wrapping.
    AddImmediate64 {
        /// Bits 55:48.
        dest: Reg64,
        /// Bits 47:40.
        source: Reg64,
        /// Bits 31:0.
        imm: i32,
    },
    /// `UMIN32` (18): `dest = min(source0, source1)`, unsigned.
    Umin32 {
        /// Bits 55:48.
        dest: Reg,
        /// Bits 47:40.
        source0: Reg,
        /// Bits 39:32.
        source1: Reg,
    },
    /// `LOAD_MULTIPLE` (20): for each bit `i` of `mask`, register `base + i` is loaded from
    /// `address + offset + 4 * i`.
    LoadMultiple {
        /// Bits 55:48.
        base: Reg,
        /// Bits 47:40.
        address: Reg64,
        /// Bits 15:0, in bytes.
        offset: i16,
        /// Bits 31:16.
        mask: u16,
    },
    /// `STORE_MULTIPLE` (21): for each bit `i` of `mask`, register `base + i` is stored to
    /// `address + offset + 4 * i`.
    StoreMultiple {
        /// Bits 55:48.
        base: Reg,
        /// Bits 47:40.
        address: Reg64,
        /// Bits 15:0, in bytes.
        offset: i16,
        /// Bits 31:16.
        mask: u16,
    },
    /// `BRANCH` (22): if `condition` holds for `value` (as an `i32`, compared with 0), jumps
    /// `offset` instructions from the next one.
    Branch {
        /// Bits 30:28.
        condition: Condition,
        /// Bits 47:40.
        value: Reg,
        /// Bits 15:0, in instructions.
        offset: i16,
    },
    /// `SET_SB_ENTRY` (23).
    SetSbEntry {
        /// Bits 3:0: the slot of endpoint tasks.
        endpoint_entry: Slot,
        /// Bits 7:4: the slot of other asynchronous work.
        other_entry: Slot,
    },
    /// `PROGRESS_WAIT` (24).
    ProgressWait {
        /// Bits 4:0.
        queue: ProgressQueue,
        /// Bits 47:40.
        source: Reg64,
    },
    /// `SET_EXCEPTION_HANDLER` (25).
    SetExceptionHandler {
        /// Bits 7:0.
        exception_type: ExceptionType,
        /// Bits 47:40: pair holding the handler's address.
        address: Reg64,
        /// Bits 39:32: register holding its length in bytes.
        length: Reg,
    },
    /// `CALL` (32): runs the stream at `address`, `length` bytes long, then comes back.
    Call {
        /// Bits 47:40.
        address: Reg64,
        /// Bits 39:32.
        length: Reg,
    },
    /// `JUMP` (33): continues with the stream at `address`, `length` bytes long.
    Jump {
        /// Bits 47:40.
        address: Reg64,
        /// Bits 39:32.
        length: Reg,
    },
    /// `REQ_RESOURCE` (34): the iterators the stream needs (none: it releases them).
    ReqResource {
        /// Bit 0.
        compute: bool,
        /// Bit 1.
        fragment: bool,
        /// Bit 2.
        tiler: bool,
        /// Bit 3.
        idvs: bool,
    },
    /// `FLUSH_CACHE2` (36).
    FlushCache2 {
        /// Bits 3:0.
        l2_flush_mode: FlushMode,
        /// Bits 7:4.
        lsc_flush_mode: FlushMode,
        /// Bits 11:8.
        other_flush_mode: OtherFlushMode,
        /// Bits 31:16.
        wait_mask: SlotMask,
        /// Bits 47:40: register holding the flush ID read when the work was submitted, so
        /// that a flush already done since is skipped.
        latest_flush_id: Reg,
        /// Bits 51:48.
        signal_slot: Slot,
    },
    /// `SYNC_ADD32` (37): adds a register to a 32-bit sync object.
    SyncAdd32(SyncOp<Reg>),
    /// `SYNC_SET32` (38): writes a register to a 32-bit sync object.
    SyncSet32(SyncOp<Reg>),
    /// `SYNC_WAIT32` (39): waits until a 32-bit sync object passes the condition.
    SyncWait32(SyncWait<Reg>),
    /// `STORE_STATE` (40).
    StoreState {
        /// Bits 33:32.
        state: StateSel,
        /// Bits 47:40.
        address: Reg64,
        /// Bits 15:0, in bytes.
        offset: i16,
        /// Bits 31:16.
        wait_mask: SlotMask,
        /// Bits 51:48.
        signal_slot: Slot,
    },
    /// `PROT_REGION` (41).
    ProtRegion {
        /// Bits 15:0: the region's size in units of 8 bytes (one instruction).
        size: u16,
    },
    /// `PROGRESS_STORE` (42).
    ProgressStore {
        /// Bits 47:40.
        source: Reg64,
    },
    /// `PROGRESS_LOAD` (43).
    ProgressLoad {
        /// Bits 55:48.
        dest: Reg64,
    },
    /// `RUN_COMPUTE_INDIRECT` (44).
    RunComputeIndirect {
        /// Bits 15:0.
        workgroups_per_task: u16,
        /// Bit 32.
        progress_increment: bool,
        /// Bits 47:40.
        select: ShaderSelect,
    },
    /// `ERROR_BARRIER` (47).
    ErrorBarrier,
    /// `HEAP_SET` (48).
    HeapSet {
        /// Bits 47:40: pair holding the heap context's address.
        address: Reg64,
    },
    /// `HEAP_OPERATION` (49).
    HeapOperation {
        /// Bits 33:32.
        operation: HeapOp,
        /// Bits 31:16.
        wait_mask: SlotMask,
        /// Bits 51:48.
        signal_slot: Slot,
    },
    /// `TRACE_POINT` (50).
    TracePoint {
        /// Bits 39:32.
        base_register: Reg,
        /// Bits 47:40.
        register_count: u8,
        /// Bits 31:16.
        wait_mask: SlotMask,
        /// Bits 51:48.
        signal_slot: Slot,
    },
    /// `SYNC_ADD64` (51): adds a pair to a 64-bit sync object.
    SyncAdd64(SyncOp<Reg64>),
    /// `SYNC_SET64` (52): writes a pair to a 64-bit sync object.
    SyncSet64(SyncOp<Reg64>),
    /// `SYNC_WAIT64` (53): waits until a 64-bit sync object passes the condition.
    SyncWait64(SyncWait<Reg64>),
}

/// Bits `lo + n - 1 : lo` of `w`.
const fn bits(w: u64, lo: u32, n: u32) -> u64 {
    (w >> lo) & ((1u64 << n) - 1)
}

/// Bit `at` of `w`.
const fn flag(w: u64, at: u32) -> bool {
    (w >> at) & 1 != 0
}

/// `v` as bit `at`.
const fn put_flag(v: bool, at: u32) -> u64 {
    if v {
        1 << at
    } else {
        0
    }
}

/// The 8-bit register number at bit `lo`.
const fn reg(w: u64, lo: u32) -> Reg {
    Reg(bits(w, lo, 8) as u8)
}

/// The 8-bit pair number at bit `lo`.
const fn pair(w: u64, lo: u32) -> Reg64 {
    Reg64(bits(w, lo, 8) as u8)
}

/// The 4-bit slot at bit `lo`.
const fn slot(w: u64, lo: u32) -> Slot {
    Slot::from_low_bits(w >> lo)
}

/// The 16-bit wait mask of bits 31:16.
const fn wait_mask(w: u64) -> SlotMask {
    SlotMask::from_bits(bits(w, 16, 16) as u16)
}

/// The shader selectors of bits 47:40.
const fn select(w: u64) -> ShaderSelect {
    ShaderSelect {
        srt: Select::from_low_bits(w >> 40),
        spd: Select::from_low_bits(w >> 42),
        tsd: Select::from_low_bits(w >> 44),
        fau: Select::from_low_bits(w >> 46),
    }
}

const fn put_select(s: ShaderSelect) -> u64 {
    (s.srt.get() as u64) << 40
        | (s.spd.get() as u64) << 42
        | (s.tsd.get() as u64) << 44
        | (s.fau.get() as u64) << 46
}

/// The common fields of the sync operations: error flag, scope, wait mask, address, slot.
const fn put_sync(
    flag0: bool,
    scope: SyncScope,
    mask: SlotMask,
    data: u8,
    address: Reg64,
    signal: Slot,
) -> u64 {
    put_flag(flag0, 0)
        | (scope.bits() as u64) << 1
        | (mask.bits() as u64) << 16
        | (data as u64) << 32
        | (address.0 as u64) << 40
        | (signal.get() as u64) << 48
}

const fn put_wait(w: &SyncWait<u8>) -> u64 {
    put_flag(w.error_reject, 0)
        | (w.condition.bits() as u64) << 28
        | (w.data as u64) << 32
        | (w.address.0 as u64) << 40
}

/// Decodes an enumerated field or returns its [`DecodeError::UndefinedField`].
macro_rules! enum_field {
    ($opcode:expr, $name:literal, $ty:ty, $value:expr) => {{
        let value = $value as u32;
        match <$ty>::from_bits(value) {
            Some(v) => v,
            None => {
                return Err(DecodeError::UndefinedField {
                    opcode: $opcode,
                    field: $name,
                    value,
                })
            }
        }
    }};
}

/// The sync operation fields of `w`, the data operand built by `$data` from its 8 bits.
macro_rules! sync_op {
    ($opcode:expr, $w:expr, $data:path) => {{
        let w = $w;
        SyncOp {
            address: pair(w, 40),
            data: $data(bits(w, 32, 8) as u8),
            scope: enum_field!($opcode, "scope", SyncScope, bits(w, 1, 2)),
            error_propagate: flag(w, 0),
            wait_mask: wait_mask(w),
            signal_slot: slot(w, 48),
        }
    }};
}

/// The sync wait fields of `w`, the data operand built by `$data` from its 8 bits.
macro_rules! sync_wait {
    ($opcode:expr, $w:expr, $data:path) => {{
        let w = $w;
        SyncWait {
            address: pair(w, 40),
            data: $data(bits(w, 32, 8) as u8),
            condition: enum_field!($opcode, "condition", WaitCondition, bits(w, 28, 4)),
            error_reject: flag(w, 0),
        }
    }};
}

impl Instr {
    /// The instruction's opcode.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::{Instr, Opcode};
    /// assert_eq!(Instr::error_barrier().opcode(), Opcode::ErrorBarrier);
    /// ```
    pub const fn opcode(self) -> Opcode {
        match self {
            Self::Nop { .. } => Opcode::Nop,
            Self::Move48 { .. } => Opcode::Move48,
            Self::Move32 { .. } => Opcode::Move32,
            Self::Wait { .. } => Opcode::Wait,
            Self::RunCompute { .. } => Opcode::RunCompute,
            Self::RunTiling { .. } => Opcode::RunTiling,
            Self::RunIdvs { .. } => Opcode::RunIdvs,
            Self::RunFragment { .. } => Opcode::RunFragment,
            Self::RunFullscreen { .. } => Opcode::RunFullscreen,
            Self::FinishTiling { .. } => Opcode::FinishTiling,
            Self::FinishFragment { .. } => Opcode::FinishFragment,
            Self::AddImmediate32 { .. } => Opcode::AddImmediate32,
            Self::AddImmediate64 { .. } => Opcode::AddImmediate64,
            Self::Umin32 { .. } => Opcode::Umin32,
            Self::LoadMultiple { .. } => Opcode::LoadMultiple,
            Self::StoreMultiple { .. } => Opcode::StoreMultiple,
            Self::Branch { .. } => Opcode::Branch,
            Self::SetSbEntry { .. } => Opcode::SetSbEntry,
            Self::ProgressWait { .. } => Opcode::ProgressWait,
            Self::SetExceptionHandler { .. } => Opcode::SetExceptionHandler,
            Self::Call { .. } => Opcode::Call,
            Self::Jump { .. } => Opcode::Jump,
            Self::ReqResource { .. } => Opcode::ReqResource,
            Self::FlushCache2 { .. } => Opcode::FlushCache2,
            Self::SyncAdd32(_) => Opcode::SyncAdd32,
            Self::SyncSet32(_) => Opcode::SyncSet32,
            Self::SyncWait32(_) => Opcode::SyncWait32,
            Self::StoreState { .. } => Opcode::StoreState,
            Self::ProtRegion { .. } => Opcode::ProtRegion,
            Self::ProgressStore { .. } => Opcode::ProgressStore,
            Self::ProgressLoad { .. } => Opcode::ProgressLoad,
            Self::RunComputeIndirect { .. } => Opcode::RunComputeIndirect,
            Self::ErrorBarrier => Opcode::ErrorBarrier,
            Self::HeapSet { .. } => Opcode::HeapSet,
            Self::HeapOperation { .. } => Opcode::HeapOperation,
            Self::TracePoint { .. } => Opcode::TracePoint,
            Self::SyncAdd64(_) => Opcode::SyncAdd64,
            Self::SyncSet64(_) => Opcode::SyncSet64,
            Self::SyncWait64(_) => Opcode::SyncWait64,
        }
    }

    /// The instruction word (little-endian in memory).
    ///
    /// Bits that belong to no field of the instruction are zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::{FlushMode, Instr, OtherFlushMode, Reg, Slot, SlotMask};
    /// let flush = Instr::flush_cache2(
    ///     FlushMode::CleanInvalidate,
    ///     FlushMode::CleanInvalidate,
    ///     OtherFlushMode::Invalidate,
    ///     Reg(5),
    ///     SlotMask::from_bits(1),
    ///     Slot::of::<3>(),
    /// );
    /// assert_eq!(flush.encode(), 36 << 56 | 3 << 48 | 5 << 40 | 1 << 16 | 0x233);
    /// ```
    pub const fn encode(self) -> u64 {
        let fields = match self {
            Self::Nop { payload } => payload.get(),
            Self::Move48 { dest, imm } => (dest.0 as u64) << 48 | imm.get(),
            Self::Move32 { dest, imm } => (dest.0 as u64) << 48 | imm as u64,
            Self::Wait {
                mask,
                progress_increment,
            } => (mask.bits() as u64) << 16 | put_flag(progress_increment, 32),
            Self::RunCompute {
                task_increment,
                task_axis,
                progress_increment,
                select,
            } => {
                task_increment.get() as u64
                    | (task_axis.bits() as u64) << 14
                    | put_flag(progress_increment, 32)
                    | put_select(select)
            }
            Self::RunTiling {
                flags_override,
                progress_increment,
                select,
            } => flags_override as u64 | put_flag(progress_increment, 32) | put_select(select),
            Self::RunIdvs {
                flags_override,
                progress_increment,
                malloc_enable,
                draw_id_register_enable,
                varying_srt_select,
                varying_fau_select,
                varying_tsd_select,
                fragment_srt_select,
                fragment_tsd_select,
                draw_id,
            } => {
                flags_override as u64
                    | put_flag(progress_increment, 32)
                    | put_flag(malloc_enable, 33)
                    | put_flag(draw_id_register_enable, 34)
                    | put_flag(varying_srt_select, 35)
                    | put_flag(varying_fau_select, 36)
                    | put_flag(varying_tsd_select, 37)
                    | put_flag(fragment_srt_select, 38)
                    | put_flag(fragment_tsd_select, 39)
                    | (draw_id.0 as u64) << 40
            }
            Self::RunFragment {
                enable_tem,
                tile_order,
                progress_increment,
            } => {
                put_flag(enable_tem, 0)
                    | (tile_order.bits() as u64) << 4
                    | put_flag(progress_increment, 32)
            }
            Self::RunFullscreen {
                flags_override,
                progress_increment,
                dcd,
            } => flags_override as u64 | put_flag(progress_increment, 32) | (dcd.0 as u64) << 40,
            Self::FinishTiling { progress_increment } => put_flag(progress_increment, 32),
            Self::FinishFragment {
                increment_fragment_completed,
                wait_mask,
                last_heap_chunk,
                first_heap_chunk,
                signal_slot,
            } => {
                put_flag(increment_fragment_completed, 0)
                    | (wait_mask.bits() as u64) << 16
                    | (last_heap_chunk.0 as u64) << 32
                    | (first_heap_chunk.0 as u64) << 40
                    | (signal_slot.get() as u64) << 48
            }
            Self::AddImmediate32 { dest, source, imm } => {
                (dest.0 as u64) << 48 | (source.0 as u64) << 40 | imm as u32 as u64
            }
            Self::AddImmediate64 { dest, source, imm } => {
                (dest.0 as u64) << 48 | (source.0 as u64) << 40 | imm as u32 as u64
            }
            Self::Umin32 {
                dest,
                source0,
                source1,
            } => (dest.0 as u64) << 48 | (source0.0 as u64) << 40 | (source1.0 as u64) << 32,
            Self::LoadMultiple {
                base,
                address,
                offset,
                mask,
            }
            | Self::StoreMultiple {
                base,
                address,
                offset,
                mask,
            } => {
                (base.0 as u64) << 48
                    | (address.0 as u64) << 40
                    | (mask as u64) << 16
                    | offset as u16 as u64
            }
            Self::Branch {
                condition,
                value,
                offset,
            } => (condition.bits() as u64) << 28 | (value.0 as u64) << 40 | offset as u16 as u64,
            Self::SetSbEntry {
                endpoint_entry,
                other_entry,
            } => endpoint_entry.get() as u64 | (other_entry.get() as u64) << 4,
            Self::ProgressWait { queue, source } => queue.get() as u64 | (source.0 as u64) << 40,
            Self::SetExceptionHandler {
                exception_type,
                address,
                length,
            } => exception_type.bits() as u64 | (address.0 as u64) << 40 | (length.0 as u64) << 32,
            Self::Call { address, length } | Self::Jump { address, length } => {
                (address.0 as u64) << 40 | (length.0 as u64) << 32
            }
            Self::ReqResource {
                compute,
                fragment,
                tiler,
                idvs,
            } => {
                put_flag(compute, 0)
                    | put_flag(fragment, 1)
                    | put_flag(tiler, 2)
                    | put_flag(idvs, 3)
            }
            Self::FlushCache2 {
                l2_flush_mode,
                lsc_flush_mode,
                other_flush_mode,
                wait_mask,
                latest_flush_id,
                signal_slot,
            } => {
                l2_flush_mode.bits() as u64
                    | (lsc_flush_mode.bits() as u64) << 4
                    | (other_flush_mode.bits() as u64) << 8
                    | (wait_mask.bits() as u64) << 16
                    | (latest_flush_id.0 as u64) << 40
                    | (signal_slot.get() as u64) << 48
            }
            Self::SyncAdd32(s) | Self::SyncSet32(s) => put_sync(
                s.error_propagate,
                s.scope,
                s.wait_mask,
                s.data.0,
                s.address,
                s.signal_slot,
            ),
            Self::SyncAdd64(s) | Self::SyncSet64(s) => put_sync(
                s.error_propagate,
                s.scope,
                s.wait_mask,
                s.data.0,
                s.address,
                s.signal_slot,
            ),
            Self::SyncWait32(w) => put_wait(&SyncWait {
                address: w.address,
                data: w.data.0,
                condition: w.condition,
                error_reject: w.error_reject,
            }),
            Self::SyncWait64(w) => put_wait(&SyncWait {
                address: w.address,
                data: w.data.0,
                condition: w.condition,
                error_reject: w.error_reject,
            }),
            Self::StoreState {
                state,
                address,
                offset,
                wait_mask,
                signal_slot,
            } => {
                offset as u16 as u64
                    | (wait_mask.bits() as u64) << 16
                    | (state.bits() as u64) << 32
                    | (address.0 as u64) << 40
                    | (signal_slot.get() as u64) << 48
            }
            Self::ProtRegion { size } => size as u64,
            Self::ProgressStore { source } => (source.0 as u64) << 40,
            Self::ProgressLoad { dest } => (dest.0 as u64) << 48,
            Self::RunComputeIndirect {
                workgroups_per_task,
                progress_increment,
                select,
            } => workgroups_per_task as u64 | put_flag(progress_increment, 32) | put_select(select),
            Self::ErrorBarrier => 0,
            Self::HeapSet { address } => (address.0 as u64) << 40,
            Self::HeapOperation {
                operation,
                wait_mask,
                signal_slot,
            } => {
                (wait_mask.bits() as u64) << 16
                    | (operation.bits() as u64) << 32
                    | (signal_slot.get() as u64) << 48
            }
            Self::TracePoint {
                base_register,
                register_count,
                wait_mask,
                signal_slot,
            } => {
                (wait_mask.bits() as u64) << 16
                    | (base_register.0 as u64) << 32
                    | (register_count as u64) << 40
                    | (signal_slot.get() as u64) << 48
            }
        };
        (self.opcode() as u64) << 56 | fields
    }

    /// The instruction a word holds.
    ///
    /// Bits outside the instruction's fields are ignored, as the hardware ignores them, so
    /// `Instr::decode(w)?.encode()` is `w` with those bits cleared; for every `Instr` `i`,
    /// `Instr::decode(i.encode()) == Ok(i)`. Register numbers are not checked against the
    /// register file here (any 8-bit number decodes): the engine that runs the instruction
    /// does that, as it checks that a pair starts on an even register.
    ///
    /// # Errors
    ///
    /// [`DecodeError::UndefinedOpcode`] for an opcode Mali v10 does not define,
    /// [`DecodeError::UndefinedField`] for an enumerated field holding an undefined value
    /// (including a `SYNC_WAIT` condition other than `le` and `gt`).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::{Instr, Reg, Reg64};
    /// // CALL d92, r94, with junk in the ignored low bits.
    /// let w = 32 << 56 | 92 << 40 | 94 << 32 | 0xbeef;
    /// let call = Instr::decode(w).unwrap();
    /// assert_eq!(call, Instr::call(Reg64(92), Reg(94)));
    /// assert_eq!(call.encode(), w & !0xffff);
    /// ```
    pub const fn decode(word: u64) -> Result<Instr, DecodeError> {
        let w = word;
        let n = (w >> 56) as u8;
        let Some(op) = Opcode::from_u8(n) else {
            return Err(DecodeError::UndefinedOpcode(n));
        };
        Ok(match op {
            Opcode::Nop => Self::Nop {
                payload: NopPayload::from_low_bits(w),
            },
            Opcode::Move48 => Self::Move48 {
                dest: pair(w, 48),
                imm: Imm48::from_low_bits(w),
            },
            Opcode::Move32 => Self::Move32 {
                dest: reg(w, 48),
                imm: w as u32,
            },
            Opcode::Wait => Self::Wait {
                mask: WaitMask::from_bits(bits(w, 16, 8) as u8),
                progress_increment: flag(w, 32),
            },
            Opcode::RunCompute => Self::RunCompute {
                task_increment: TaskIncrement::from_low_bits(w),
                task_axis: enum_field!(op, "task_axis", TaskAxis, bits(w, 14, 2)),
                progress_increment: flag(w, 32),
                select: select(w),
            },
            Opcode::RunTiling => Self::RunTiling {
                flags_override: w as u32,
                progress_increment: flag(w, 32),
                select: select(w),
            },
            Opcode::RunIdvs => Self::RunIdvs {
                flags_override: w as u32,
                progress_increment: flag(w, 32),
                malloc_enable: flag(w, 33),
                draw_id_register_enable: flag(w, 34),
                varying_srt_select: flag(w, 35),
                varying_fau_select: flag(w, 36),
                varying_tsd_select: flag(w, 37),
                fragment_srt_select: flag(w, 38),
                fragment_tsd_select: flag(w, 39),
                draw_id: reg(w, 40),
            },
            Opcode::RunFragment => Self::RunFragment {
                enable_tem: flag(w, 0),
                tile_order: enum_field!(op, "tile_order", TileOrder, bits(w, 4, 4)),
                progress_increment: flag(w, 32),
            },
            Opcode::RunFullscreen => Self::RunFullscreen {
                flags_override: w as u32,
                progress_increment: flag(w, 32),
                dcd: pair(w, 40),
            },
            Opcode::FinishTiling => Self::FinishTiling {
                progress_increment: flag(w, 32),
            },
            Opcode::FinishFragment => Self::FinishFragment {
                increment_fragment_completed: flag(w, 0),
                wait_mask: wait_mask(w),
                last_heap_chunk: pair(w, 32),
                first_heap_chunk: pair(w, 40),
                signal_slot: slot(w, 48),
            },
            Opcode::AddImmediate32 => Self::AddImmediate32 {
                dest: reg(w, 48),
                source: reg(w, 40),
                imm: w as u32 as i32,
            },
            Opcode::AddImmediate64 => Self::AddImmediate64 {
                dest: pair(w, 48),
                source: pair(w, 40),
                imm: w as u32 as i32,
            },
            Opcode::Umin32 => Self::Umin32 {
                dest: reg(w, 48),
                source0: reg(w, 40),
                source1: reg(w, 32),
            },
            Opcode::LoadMultiple => Self::LoadMultiple {
                base: reg(w, 48),
                address: pair(w, 40),
                offset: w as u16 as i16,
                mask: bits(w, 16, 16) as u16,
            },
            Opcode::StoreMultiple => Self::StoreMultiple {
                base: reg(w, 48),
                address: pair(w, 40),
                offset: w as u16 as i16,
                mask: bits(w, 16, 16) as u16,
            },
            Opcode::Branch => Self::Branch {
                condition: enum_field!(op, "condition", Condition, bits(w, 28, 3)),
                value: reg(w, 40),
                offset: w as u16 as i16,
            },
            Opcode::SetSbEntry => Self::SetSbEntry {
                endpoint_entry: slot(w, 0),
                other_entry: slot(w, 4),
            },
            Opcode::ProgressWait => Self::ProgressWait {
                queue: ProgressQueue::from_low_bits(w),
                source: pair(w, 40),
            },
            Opcode::SetExceptionHandler => Self::SetExceptionHandler {
                exception_type: enum_field!(op, "exception_type", ExceptionType, bits(w, 0, 8)),
                address: pair(w, 40),
                length: reg(w, 32),
            },
            Opcode::Call => Self::Call {
                address: pair(w, 40),
                length: reg(w, 32),
            },
            Opcode::Jump => Self::Jump {
                address: pair(w, 40),
                length: reg(w, 32),
            },
            Opcode::ReqResource => Self::ReqResource {
                compute: flag(w, 0),
                fragment: flag(w, 1),
                tiler: flag(w, 2),
                idvs: flag(w, 3),
            },
            Opcode::FlushCache2 => Self::FlushCache2 {
                l2_flush_mode: enum_field!(op, "l2_flush_mode", FlushMode, bits(w, 0, 4)),
                lsc_flush_mode: enum_field!(op, "lsc_flush_mode", FlushMode, bits(w, 4, 4)),
                other_flush_mode: enum_field!(
                    op,
                    "other_flush_mode",
                    OtherFlushMode,
                    bits(w, 8, 4)
                ),
                wait_mask: wait_mask(w),
                latest_flush_id: reg(w, 40),
                signal_slot: slot(w, 48),
            },
            Opcode::SyncAdd32 => Self::SyncAdd32(sync_op!(op, w, Reg)),
            Opcode::SyncSet32 => Self::SyncSet32(sync_op!(op, w, Reg)),
            Opcode::SyncWait32 => Self::SyncWait32(sync_wait!(op, w, Reg)),
            Opcode::SyncAdd64 => Self::SyncAdd64(sync_op!(op, w, Reg64)),
            Opcode::SyncSet64 => Self::SyncSet64(sync_op!(op, w, Reg64)),
            Opcode::SyncWait64 => Self::SyncWait64(sync_wait!(op, w, Reg64)),
            Opcode::StoreState => Self::StoreState {
                state: enum_field!(op, "state", StateSel, bits(w, 32, 2)),
                address: pair(w, 40),
                offset: w as u16 as i16,
                wait_mask: wait_mask(w),
                signal_slot: slot(w, 48),
            },
            Opcode::ProtRegion => Self::ProtRegion { size: w as u16 },
            Opcode::ProgressStore => Self::ProgressStore {
                source: pair(w, 40),
            },
            Opcode::ProgressLoad => Self::ProgressLoad { dest: pair(w, 48) },
            Opcode::RunComputeIndirect => Self::RunComputeIndirect {
                workgroups_per_task: w as u16,
                progress_increment: flag(w, 32),
                select: select(w),
            },
            Opcode::ErrorBarrier => Self::ErrorBarrier,
            Opcode::HeapSet => Self::HeapSet {
                address: pair(w, 40),
            },
            Opcode::HeapOperation => Self::HeapOperation {
                operation: enum_field!(op, "operation", HeapOp, bits(w, 32, 2)),
                wait_mask: wait_mask(w),
                signal_slot: slot(w, 48),
            },
            Opcode::TracePoint => Self::TracePoint {
                base_register: reg(w, 32),
                register_count: bits(w, 40, 8) as u8,
                wait_mask: wait_mask(w),
                signal_slot: slot(w, 48),
            },
        })
    }

    /// The slots this instruction waits for before it starts (`WAIT`'s mask included), if it
    /// has a wait mask.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::{Instr, SlotMask, WaitMask};
    /// assert_eq!(Instr::wait(WaitMask::ALL).wait_mask(), Some(SlotMask::first(8)));
    /// assert_eq!(Instr::error_barrier().wait_mask(), None);
    /// ```
    pub const fn wait_mask(self) -> Option<SlotMask> {
        match self {
            Self::Wait { mask, .. } => Some(SlotMask::from_bits(mask.bits() as u16)),
            Self::FinishFragment { wait_mask, .. }
            | Self::FlushCache2 { wait_mask, .. }
            | Self::StoreState { wait_mask, .. }
            | Self::HeapOperation { wait_mask, .. }
            | Self::TracePoint { wait_mask, .. } => Some(wait_mask),
            Self::SyncAdd32(s) | Self::SyncSet32(s) => Some(s.wait_mask),
            Self::SyncAdd64(s) | Self::SyncSet64(s) => Some(s.wait_mask),
            _ => None,
        }
    }

    /// The slot this asynchronous instruction is tracked on, if it has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::{Instr, Reg64, Slot, SyncOp};
    /// let op = SyncOp::new(Reg64(0), Reg64(2)).signal(Slot::of::<2>());
    /// assert_eq!(Instr::sync_add64(op).signal_slot(), Some(Slot::of::<2>()));
    /// ```
    pub const fn signal_slot(self) -> Option<Slot> {
        match self {
            Self::FinishFragment { signal_slot, .. }
            | Self::FlushCache2 { signal_slot, .. }
            | Self::StoreState { signal_slot, .. }
            | Self::HeapOperation { signal_slot, .. }
            | Self::TracePoint { signal_slot, .. } => Some(signal_slot),
            Self::SyncAdd32(s) | Self::SyncSet32(s) => Some(s.signal_slot),
            Self::SyncAdd64(s) | Self::SyncSet64(s) => Some(s.signal_slot),
            _ => None,
        }
    }
}

/// Builders for the forms a driver writes most.
impl Instr {
    /// `NOP` with a zero payload.
    pub const fn nop() -> Self {
        Self::Nop {
            payload: NopPayload::ZERO,
        }
    }

    /// `MOVE48 dest, #imm`.
    pub const fn move48(dest: Reg64, imm: Imm48) -> Self {
        Self::Move48 { dest, imm }
    }

    /// `MOVE32 dest, #imm`.
    pub const fn move32(dest: Reg, imm: u32) -> Self {
        Self::Move32 { dest, imm }
    }

    /// `WAIT #mask`, without progress increment.
    pub const fn wait(mask: WaitMask) -> Self {
        Self::Wait {
            mask,
            progress_increment: false,
        }
    }

    /// `ADD_IMMEDIATE32 dest, source, #imm`.
    pub const fn add_imm32(dest: Reg, source: Reg, imm: i32) -> Self {
        Self::AddImmediate32 { dest, source, imm }
    }

    /// `ADD_IMMEDIATE64 dest, source, #imm`.
    pub const fn add_imm64(dest: Reg64, source: Reg64, imm: i32) -> Self {
        Self::AddImmediate64 { dest, source, imm }
    }

    /// `LOAD_MULTIPLE` of the registers `base + i` for each bit `i` of `mask`.
    pub const fn load_multiple(base: Reg, address: Reg64, offset: i16, mask: u16) -> Self {
        Self::LoadMultiple {
            base,
            address,
            offset,
            mask,
        }
    }

    /// `STORE_MULTIPLE` of the registers `base + i` for each bit `i` of `mask`.
    pub const fn store_multiple(base: Reg, address: Reg64, offset: i16, mask: u16) -> Self {
        Self::StoreMultiple {
            base,
            address,
            offset,
            mask,
        }
    }

    /// `BRANCH.cond value, #offset` (in instructions, from the next one).
    pub const fn branch(condition: Condition, value: Reg, offset: i16) -> Self {
        Self::Branch {
            condition,
            value,
            offset,
        }
    }

    /// `CALL address, length`.
    pub const fn call(address: Reg64, length: Reg) -> Self {
        Self::Call { address, length }
    }

    /// `JUMP address, length`.
    pub const fn jump(address: Reg64, length: Reg) -> Self {
        Self::Jump { address, length }
    }

    /// `FLUSH_CACHE2` of the L2, load/store and other caches, skipped if the flush ID in
    /// `latest_flush_id` is already out of date.
    pub const fn flush_cache2(
        l2: FlushMode,
        lsc: FlushMode,
        other: OtherFlushMode,
        latest_flush_id: Reg,
        wait_mask: SlotMask,
        signal_slot: Slot,
    ) -> Self {
        Self::FlushCache2 {
            l2_flush_mode: l2,
            lsc_flush_mode: lsc,
            other_flush_mode: other,
            wait_mask,
            latest_flush_id,
            signal_slot,
        }
    }

    /// `SYNC_ADD32`.
    pub const fn sync_add32(op: SyncOp<Reg>) -> Self {
        Self::SyncAdd32(op)
    }

    /// `SYNC_SET32`.
    pub const fn sync_set32(op: SyncOp<Reg>) -> Self {
        Self::SyncSet32(op)
    }

    /// `SYNC_ADD64`.
    pub const fn sync_add64(op: SyncOp<Reg64>) -> Self {
        Self::SyncAdd64(op)
    }

    /// `SYNC_SET64`.
    pub const fn sync_set64(op: SyncOp<Reg64>) -> Self {
        Self::SyncSet64(op)
    }

    /// `SYNC_WAIT32.cond [address], data`, without error rejection.
    pub const fn sync_wait32(condition: WaitCondition, address: Reg64, data: Reg) -> Self {
        Self::SyncWait32(SyncWait::new(condition, address, data))
    }

    /// `SYNC_WAIT64.cond [address], data`, without error rejection.
    pub const fn sync_wait64(condition: WaitCondition, address: Reg64, data: Reg64) -> Self {
        Self::SyncWait64(SyncWait::new(condition, address, data))
    }

    /// `STORE_STATE.state [address + offset]`.
    pub const fn store_state(
        state: StateSel,
        address: Reg64,
        offset: i16,
        wait_mask: SlotMask,
        signal_slot: Slot,
    ) -> Self {
        Self::StoreState {
            state,
            address,
            offset,
            wait_mask,
            signal_slot,
        }
    }

    /// `SET_SB_ENTRY #endpoint, #other`.
    pub const fn set_sb_entry(endpoint_entry: Slot, other_entry: Slot) -> Self {
        Self::SetSbEntry {
            endpoint_entry,
            other_entry,
        }
    }

    /// `HEAP_SET address`.
    pub const fn heap_set(address: Reg64) -> Self {
        Self::HeapSet { address }
    }

    /// `ERROR_BARRIER`.
    pub const fn error_barrier() -> Self {
        Self::ErrorBarrier
    }
}
