// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Operand types: registers, scoreboard slots and masks, narrow immediates and the enumerated
//! fields of the instructions.

use core::fmt;

/// A 32-bit register of the command stream, `r0` to `r95` on Mali v10.
///
/// Any 8-bit number is representable and decodable: whether the register exists is checked by
/// the engine that runs the instruction, not by the decoder.
///
/// # Examples
///
/// ```
/// use csf::Reg;
/// assert_eq!(format!("{}", Reg(94)), "r94");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Reg(pub u8);

/// A 64-bit operand held in two consecutive registers, named by the first (`d4` is `r4:r5`).
///
/// The hardware wants an even first register; as for [`Reg`], the decoder accepts any 8-bit
/// number and the engine checks it.
///
/// # Examples
///
/// ```
/// use csf::{Reg, Reg64};
/// let d = Reg64(92);
/// assert_eq!((d.lo(), d.hi()), (Reg(92), Some(Reg(93))));
/// assert_eq!(format!("{d}"), "d92");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Reg64(pub u8);

impl Reg64 {
    /// The register holding the low 32 bits.
    pub const fn lo(self) -> Reg {
        Reg(self.0)
    }

    /// The register holding the high 32 bits (none past register 255).
    pub const fn hi(self) -> Option<Reg> {
        match self.0.checked_add(1) {
            Some(n) => Some(Reg(n)),
            None => None,
        }
    }

    /// Whether the pair starts on an even register, as the hardware requires.
    pub const fn is_aligned(self) -> bool {
        self.0 & 1 == 0
    }
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

impl fmt::Display for Reg64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

/// Defines an unsigned integer newtype that can only hold values of `$bits` bits.
macro_rules! narrow {
    ($(#[$m:meta])* $name:ident($t:ty), $bits:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name($t);

        impl $name {
            /// Width of the field in bits.
            pub const BITS: u32 = $bits;
            /// The largest value the field holds.
            pub const MAX: Self = Self(((1u64 << $bits) - 1) as $t);
            /// Zero.
            pub const ZERO: Self = Self(0);

            /// `v` if it fits in [`Self::BITS`] bits.
            pub const fn new(v: $t) -> Option<Self> {
                if v <= Self::MAX.0 {
                    Some(Self(v))
                } else {
                    None
                }
            }

            /// `V`, checked when the program is built: an out-of-range `V` does not compile.
            pub const fn of<const V: $t>() -> Self {
                const { assert!(V <= Self::MAX.0, "value does not fit in the field") };
                Self(V)
            }

            /// The low [`Self::BITS`] bits of `v`, the others dropped (what the hardware sees of
            /// a wider value).
            pub const fn from_low_bits(v: u64) -> Self {
                Self((v & Self::MAX.0 as u64) as $t)
            }

            /// The value.
            pub const fn get(self) -> $t {
                self.0
            }
        }

        impl TryFrom<$t> for $name {
            type Error = $t;

            /// `v` if it fits; `v` back as the error otherwise.
            fn try_from(v: $t) -> Result<Self, $t> {
                Self::new(v).ok_or(v)
            }
        }

        impl From<$name> for $t {
            fn from(v: $name) -> $t {
                v.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
    };
}

narrow! {
    /// A scoreboard slot (entry), `0` to `15` in the 4-bit fields that name one.
    ///
    /// An asynchronous instruction (a flush, a sync operation, ...) is tracked on the slot its
    /// `signal_slot` names; later instructions wait for it through a [`SlotMask`] or a
    /// [`WaitMask`]. Mali-G610 firmware reports 8 slots: the engine checks the number.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::Slot;
    /// assert_eq!(Slot::new(15).map(Slot::get), Some(15));
    /// assert_eq!(Slot::new(16), None);
    /// assert_eq!(Slot::of::<3>().get(), 3); // `Slot::of::<16>()` does not compile
    /// ```
    Slot(u8), 4
}

narrow! {
    /// The 48-bit immediate of `MOVE48`.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::Imm48;
    /// assert!(Imm48::new(0xffff_ffff_ffff).is_some());
    /// assert!(Imm48::new(1 << 48).is_none());
    /// assert_eq!(Imm48::from_low_bits(0xdead_0000_0000_1234).get(), 0x1234);
    /// ```
    Imm48(u64), 48
}

narrow! {
    /// The ignored 56-bit payload of a `NOP` (kept so that a `NOP` encodes back to its word).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::NopPayload;
    /// assert_eq!(NopPayload::MAX.get(), (1 << 56) - 1);
    /// ```
    NopPayload(u64), 56
}

narrow! {
    /// `RUN_COMPUTE`'s 14-bit task increment: how many workgroups a task covers along the
    /// task axis.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::TaskIncrement;
    /// assert_eq!(TaskIncrement::MAX.get(), 0x3fff);
    /// ```
    TaskIncrement(u16), 14
}

narrow! {
    /// `PROGRESS_WAIT`'s 5-bit queue number.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::ProgressQueue;
    /// assert_eq!(ProgressQueue::new(32), None);
    /// ```
    ProgressQueue(u8), 5
}

narrow! {
    /// One of the four 2-bit selectors of the run instructions: which of the four sets of
    /// resource-table (SRT), shader-program (SPD), thread-storage (TSD) or fast-access-uniform
    /// (FAU) registers the job uses.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::Select;
    /// assert_eq!(Select::MAX.get(), 3);
    /// ```
    Select(u8), 2
}

/// The 16-bit scoreboard mask of the asynchronous instructions (`wait_mask`, bits 31:16): bit
/// `n` makes the instruction wait, before it starts, until slot `n` has no pending work.
///
/// # Examples
///
/// ```
/// use csf::{Slot, SlotMask};
/// let m = SlotMask::NONE.with(Slot::of::<0>()).with(Slot::of::<3>());
/// assert_eq!(m.bits(), 0b1001);
/// assert!(m.contains(Slot::of::<3>()));
/// assert_eq!(SlotMask::first(8).bits(), 0xff);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SlotMask(u16);

impl SlotMask {
    /// No slot: do not wait.
    pub const NONE: Self = Self(0);

    /// The mask with these bits.
    pub const fn from_bits(bits: u16) -> Self {
        Self(bits)
    }

    /// The mask of the first `n` slots (`n` above 16 counts as 16).
    pub const fn first(n: u8) -> Self {
        if n >= 16 {
            Self(u16::MAX)
        } else {
            Self((1u16 << n) - 1)
        }
    }

    /// The mask of one slot.
    pub const fn of(slot: Slot) -> Self {
        Self(1 << slot.get())
    }

    /// This mask and `slot`.
    pub const fn with(self, slot: Slot) -> Self {
        Self(self.0 | 1 << slot.get())
    }

    /// Whether the mask holds `slot`.
    pub const fn contains(self, slot: Slot) -> bool {
        self.0 & 1 << slot.get() != 0
    }

    /// The bits of the mask.
    pub const fn bits(self) -> u16 {
        self.0
    }
}

/// The 8-bit scoreboard mask of `WAIT` (bits 23:16 on Mali v10): it can name slots 0 to 7 only.
///
/// # Examples
///
/// ```
/// use csf::{Slot, SlotMask, WaitMask};
/// assert_eq!(WaitMask::of(Slot::of::<0>()).map(WaitMask::bits), Some(1));
/// assert_eq!(WaitMask::of(Slot::of::<8>()), None);
/// assert_eq!(WaitMask::try_from(SlotMask::from_bits(0x100)), Err(SlotMask::from_bits(0x100)));
/// assert_eq!(SlotMask::from(WaitMask::ALL).bits(), 0xff);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct WaitMask(u8);

impl WaitMask {
    /// No slot.
    pub const NONE: Self = Self(0);
    /// All eight slots the field can name.
    pub const ALL: Self = Self(0xff);

    /// The mask with these bits.
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    /// The mask of one slot, if the field can name it (slots 0 to 7).
    pub const fn of(slot: Slot) -> Option<Self> {
        if slot.get() < 8 {
            Some(Self(1 << slot.get()))
        } else {
            None
        }
    }

    /// Whether the mask holds `slot`.
    pub const fn contains(self, slot: Slot) -> bool {
        slot.get() < 8 && self.0 & 1 << slot.get() != 0
    }

    /// The bits of the mask.
    pub const fn bits(self) -> u8 {
        self.0
    }
}

impl From<WaitMask> for SlotMask {
    fn from(m: WaitMask) -> Self {
        Self(u16::from(m.0))
    }
}

impl TryFrom<SlotMask> for WaitMask {
    type Error = SlotMask;

    /// The mask if it names slots 0 to 7 only; the mask back as the error otherwise.
    fn try_from(m: SlotMask) -> Result<Self, SlotMask> {
        match u8::try_from(m.0) {
            Ok(b) => Ok(Self(b)),
            Err(_) => Err(m),
        }
    }
}

/// Defines an enumerated instruction field: the enum, `from_bits`, `bits`, `ALL` and the
/// mnemonic the disassembler prints.
macro_rules! field_enum {
    (
        $(#[$m:meta])*
        $name:ident {
            $($(#[$vm:meta])* $v:ident = $n:literal => $mn:literal,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v = $n,)*
        }

        impl $name {
            /// Every defined value, in encoding order.
            pub const ALL: &'static [Self] = &[$(Self::$v,)*];

            /// The value a field holds, if it is defined.
            pub const fn from_bits(bits: u32) -> Option<Self> {
                match bits {
                    $($n => Some(Self::$v),)*
                    _ => None,
                }
            }

            /// The field's bits.
            pub const fn bits(self) -> u32 {
                self as u32
            }

            /// The name the disassembler prints.
            pub const fn mnemonic(self) -> &'static str {
                match self {
                    $(Self::$v => $mn,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.mnemonic())
            }
        }
    };
}

field_enum! {
    /// The axis `RUN_COMPUTE` splits the workgroups along (bits 15:14; 3 is undefined).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::TaskAxis;
    /// assert_eq!(TaskAxis::from_bits(2), Some(TaskAxis::Z));
    /// assert_eq!(TaskAxis::from_bits(3), None);
    /// ```
    TaskAxis {
        /// Along X.
        X = 0 => "x",
        /// Along Y.
        Y = 1 => "y",
        /// Along Z.
        Z = 2 => "z",
    }
}

field_enum! {
    /// The order `RUN_FRAGMENT` walks the tiles in (bits 7:4).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::TileOrder;
    /// assert_eq!(TileOrder::from_bits(5), Some(TileOrder::ReverseHorizontal));
    /// assert_eq!(TileOrder::from_bits(3), None);
    /// ```
    TileOrder {
        /// Z (Morton) order.
        ZOrder = 0 => "z_order",
        /// Row by row.
        Horizontal = 1 => "horizontal",
        /// Column by column.
        Vertical = 2 => "vertical",
        /// Row by row, from the end.
        ReverseHorizontal = 5 => "reverse_horizontal",
        /// Column by column, from the end.
        ReverseVertical = 6 => "reverse_vertical",
    }
}

field_enum! {
    /// The comparison of a `BRANCH` (bits 30:28), which compares its register, as a signed
    /// 32-bit value, with zero (7 is undefined).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::Condition;
    /// assert!(Condition::Nequal.holds(-3));
    /// assert!(!Condition::Greater.holds(0));
    /// assert!(Condition::Always.holds(0));
    /// ```
    Condition {
        /// Taken if the value is `<= 0`.
        Lequal = 0 => "le",
        /// Taken if the value is `> 0`.
        Greater = 1 => "gt",
        /// Taken if the value is `== 0`.
        Equal = 2 => "eq",
        /// Taken if the value is `!= 0`.
        Nequal = 3 => "ne",
        /// Taken if the value is `< 0`.
        Less = 4 => "lt",
        /// Taken if the value is `>= 0`.
        Gequal = 5 => "ge",
        /// Always taken.
        Always = 6 => "always",
    }
}

impl Condition {
    /// Whether a `BRANCH` with this condition is taken when its register holds `value`.
    pub const fn holds(self, value: i32) -> bool {
        match self {
            Self::Lequal => value <= 0,
            Self::Greater => value > 0,
            Self::Equal => value == 0,
            Self::Nequal => value != 0,
            Self::Less => value < 0,
            Self::Gequal => value >= 0,
            Self::Always => true,
        }
    }
}

field_enum! {
    /// The comparison of a `SYNC_WAIT32`/`SYNC_WAIT64` (bits 31:28): the only two Mali v10
    /// defines for them (the others of [`Condition`] are undefined here).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::WaitCondition;
    /// // Waits while the object is `<= value`, that is, goes on once it is greater.
    /// assert!(WaitCondition::Greater.satisfied(5, 4));
    /// assert_eq!(WaitCondition::from_bits(2), None);
    /// ```
    WaitCondition {
        /// Go on once the sync object is `<=` the value.
        Lequal = 0 => "le",
        /// Go on once the sync object is `>` the value.
        Greater = 1 => "gt",
    }
}

impl WaitCondition {
    /// Whether a stream waiting with this condition may go on, `object` being the sync
    /// object's value in memory and `value` the instruction's data operand.
    pub const fn satisfied(self, object: u64, value: u64) -> bool {
        match self {
            Self::Lequal => object <= value,
            Self::Greater => object > value,
        }
    }
}

impl From<WaitCondition> for Condition {
    fn from(c: WaitCondition) -> Self {
        match c {
            WaitCondition::Lequal => Self::Lequal,
            WaitCondition::Greater => Self::Greater,
        }
    }
}

field_enum! {
    /// What `FLUSH_CACHE2` does to the L2 cache (bits 3:0) and the load/store cache (bits 7:4);
    /// 2 and values above 3 are undefined.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::FlushMode;
    /// assert_eq!(FlushMode::CleanInvalidate.bits(), 3);
    /// assert_eq!(FlushMode::from_bits(2), None);
    /// ```
    FlushMode {
        /// Leave the cache alone.
        None = 0 => "none",
        /// Write dirty lines back.
        Clean = 1 => "clean",
        /// Write dirty lines back and drop every line.
        CleanInvalidate = 3 => "clean_inv",
    }
}

field_enum! {
    /// What `FLUSH_CACHE2` does to the other caches (bits 11:8); values other than 0 and 2 are
    /// undefined.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::OtherFlushMode;
    /// assert_eq!(OtherFlushMode::Invalidate.bits(), 2);
    /// ```
    OtherFlushMode {
        /// Leave them alone.
        None = 0 => "none",
        /// Drop every line.
        Invalidate = 2 => "inv",
    }
}

field_enum! {
    /// The scope of a `SYNC_ADD`/`SYNC_SET` (bits 2:1): which agents must see the write (1 and
    /// 3 are undefined).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::SyncScope;
    /// assert_eq!(SyncScope::Csg.bits(), 2);
    /// ```
    SyncScope {
        /// The whole system (the CPU included).
        System = 0 => "system",
        /// The command-stream group only.
        Csg = 2 => "csg",
    }
}

field_enum! {
    /// What `STORE_STATE` stores (bits 33:32).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::StateSel;
    /// assert_eq!(StateSel::from_bits(1), Some(StateSel::CycleCount));
    /// ```
    StateSel {
        /// The system timestamp (64 bits).
        Timestamp = 0 => "timestamp",
        /// The GPU cycle counter (64 bits).
        CycleCount = 1 => "cycle_count",
        /// The disjoint counter (32 bits).
        DisjointCount = 2 => "disjoint_count",
        /// The stream's error state (32 bits).
        ErrorState = 3 => "error_state",
    }
}

field_enum! {
    /// The event `HEAP_OPERATION` reports to the tiler heap (bits 33:32; 2 is undefined).
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::HeapOp;
    /// assert_eq!(HeapOp::from_bits(2), None);
    /// assert_eq!(HeapOp::FragmentCompleted.bits(), 3);
    /// ```
    HeapOp {
        /// Vertex and tiling work started.
        VertexTilerStarted = 0 => "vt_started",
        /// Vertex and tiling work completed.
        VertexTilerCompleted = 1 => "vt_completed",
        /// Fragment work completed.
        FragmentCompleted = 3 => "frag_completed",
    }
}

field_enum! {
    /// The exception a `SET_EXCEPTION_HANDLER` installs a handler for (bits 7:0): the tiler
    /// running out of heap memory is the only one defined.
    ///
    /// # Examples
    ///
    /// ```
    /// use csf::ExceptionType;
    /// assert_eq!(ExceptionType::from_bits(2), Some(ExceptionType::TilerOom));
    /// assert_eq!(ExceptionType::from_bits(0), None);
    /// ```
    ExceptionType {
        /// The tiler ran out of heap memory.
        TilerOom = 2 => "tiler_oom",
    }
}
