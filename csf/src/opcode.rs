// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The opcodes (bits 63:56 of an instruction) Mali v10 defines.

use core::fmt;

/// Defines [`Opcode`] from its table: variant, number, name.
macro_rules! opcodes {
    ($($(#[$m:meta])* $v:ident = $n:literal => $name:literal,)*) => {
        /// An opcode Mali v10 defines (bits 63:56 of an instruction).
        ///
        /// Every other value (10, 12 to 15, 19, 26 to 31, 35, 45, 46, 54 to 255) is undefined.
        ///
        /// # Examples
        ///
        /// ```
        /// use csf::Opcode;
        /// assert_eq!(Opcode::from_u8(36), Some(Opcode::FlushCache2));
        /// assert_eq!(Opcode::FlushCache2 as u8, 36);
        /// assert_eq!(Opcode::FlushCache2.name(), "FLUSH_CACHE2");
        /// assert_eq!(Opcode::from_u8(10), None);
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $($(#[$m])* $v = $n,)*
        }

        impl Opcode {
            /// Every defined opcode, in numerical order.
            pub const ALL: &'static [Self] = &[$(Self::$v,)*];

            /// The opcode with this number, if it is defined.
            pub const fn from_u8(n: u8) -> Option<Self> {
                match n {
                    $($n => Some(Self::$v),)*
                    _ => None,
                }
            }

            /// The instruction's name, as the disassembler prints it (`"FLUSH_CACHE2"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$v => $name,)*
                }
            }
        }
    };
}

opcodes! {
    /// `NOP`: does nothing.
    Nop = 0 => "NOP",
    /// `MOVE48`: loads a 48-bit immediate into a register pair.
    Move48 = 1 => "MOVE48",
    /// `MOVE32`: loads a 32-bit immediate into a register.
    Move32 = 2 => "MOVE32",
    /// `WAIT`: waits for scoreboard slots.
    Wait = 3 => "WAIT",
    /// `RUN_COMPUTE`: starts a compute job.
    RunCompute = 4 => "RUN_COMPUTE",
    /// `RUN_TILING`: starts a tiling job.
    RunTiling = 5 => "RUN_TILING",
    /// `RUN_IDVS`: starts an index-driven vertex shading job.
    RunIdvs = 6 => "RUN_IDVS",
    /// `RUN_FRAGMENT`: starts a fragment job.
    RunFragment = 7 => "RUN_FRAGMENT",
    /// `RUN_FULLSCREEN`: starts a full-screen fragment job.
    RunFullscreen = 8 => "RUN_FULLSCREEN",
    /// `FINISH_TILING`: ends the tiling of a render pass.
    FinishTiling = 9 => "FINISH_TILING",
    /// `FINISH_FRAGMENT`: ends the fragment work of a render pass, releasing heap chunks.
    FinishFragment = 11 => "FINISH_FRAGMENT",
    /// `ADD_IMMEDIATE32`: adds a signed immediate to a register.
    AddImmediate32 = 16 => "ADD_IMMEDIATE32",
    /// `ADD_IMMEDIATE64`: adds a sign-extended immediate to a register pair.
    AddImmediate64 = 17 => "ADD_IMMEDIATE64",
    /// `UMIN32`: the unsigned minimum of two registers. Mesa's opcode table names this
    /// opcode `COMPARE_SELECT32`; the instruction it describes is `UMIN32`.
    Umin32 = 18 => "UMIN32",
    /// `LOAD_MULTIPLE`: loads registers from memory.
    LoadMultiple = 20 => "LOAD_MULTIPLE",
    /// `STORE_MULTIPLE`: stores registers to memory.
    StoreMultiple = 21 => "STORE_MULTIPLE",
    /// `BRANCH`: a conditional relative branch.
    Branch = 22 => "BRANCH",
    /// `SET_SB_ENTRY`: chooses the scoreboard slots of endpoint and other tasks.
    SetSbEntry = 23 => "SET_SB_ENTRY",
    /// `PROGRESS_WAIT`: waits for a progress counter.
    ProgressWait = 24 => "PROGRESS_WAIT",
    /// `SET_EXCEPTION_HANDLER`: installs an exception handler.
    SetExceptionHandler = 25 => "SET_EXCEPTION_HANDLER",
    /// `CALL`: runs a sub-stream and returns.
    Call = 32 => "CALL",
    /// `JUMP`: continues in another stream.
    Jump = 33 => "JUMP",
    /// `REQ_RESOURCE`: requests (or releases) the iterators the stream uses.
    ReqResource = 34 => "REQ_RESOURCE",
    /// `FLUSH_CACHE2`: cleans or invalidates the GPU's caches.
    FlushCache2 = 36 => "FLUSH_CACHE2",
    /// `SYNC_ADD32`: adds to a 32-bit sync object.
    SyncAdd32 = 37 => "SYNC_ADD32",
    /// `SYNC_SET32`: sets a 32-bit sync object.
    SyncSet32 = 38 => "SYNC_SET32",
    /// `SYNC_WAIT32`: waits on a 32-bit sync object.
    SyncWait32 = 39 => "SYNC_WAIT32",
    /// `STORE_STATE`: stores a counter or the error state to memory.
    StoreState = 40 => "STORE_STATE",
    /// `PROT_REGION`: marks the protected-mode region that follows.
    ProtRegion = 41 => "PROT_REGION",
    /// `PROGRESS_STORE`: stores the progress counter.
    ProgressStore = 42 => "PROGRESS_STORE",
    /// `PROGRESS_LOAD`: loads the progress counter.
    ProgressLoad = 43 => "PROGRESS_LOAD",
    /// `RUN_COMPUTE_INDIRECT`: starts a compute job with its size read from registers.
    RunComputeIndirect = 44 => "RUN_COMPUTE_INDIRECT",
    /// `ERROR_BARRIER`: clears the stream's error state after the preceding work ends.
    ErrorBarrier = 47 => "ERROR_BARRIER",
    /// `HEAP_SET`: sets the tiler heap context.
    HeapSet = 48 => "HEAP_SET",
    /// `HEAP_OPERATION`: reports a tiler heap event.
    HeapOperation = 49 => "HEAP_OPERATION",
    /// `TRACE_POINT`: emits a trace point with registers.
    TracePoint = 50 => "TRACE_POINT",
    /// `SYNC_ADD64`: adds to a 64-bit sync object.
    SyncAdd64 = 51 => "SYNC_ADD64",
    /// `SYNC_SET64`: sets a 64-bit sync object.
    SyncSet64 = 52 => "SYNC_SET64",
    /// `SYNC_WAIT64`: waits on a 64-bit sync object.
    SyncWait64 = 53 => "SYNC_WAIT64",
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
