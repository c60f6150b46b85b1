// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Typed registers: the traits and locations behind the [`register!`](crate::register!) macro.
//!
//! A hardware register is a word of I/O space whose bits are split into fields. Reading a field
//! by hand means shifting and masking, and writing one means masking the old bits out and the new
//! value in; both are easy to get wrong (wrong shift, value wider than the field silently
//! truncated, register accessed with the wrong width or at the wrong offset). The
//! [`register!`](crate::register!) macro turns a short declaration into a type per register with
//! one getter and several setters per field, all typed with
//! [`Bounded`](::bounded::Bounded) integers so that no value is ever truncated silently.
//!
//! Registers come in four kinds, each with a location type that the [`Io`](crate::io::Io)
//! accessors take:
//!
//! | kind | declaration | location |
//! | --- | --- | --- |
//! | fixed offset | `REG(u32) @ 0x100` | the constant `REG` ([`FixedRegisterLoc`]) |
//! | relative to a base | `REG(u32) @ Base + 0x10` | `REG::of::<B>()` ([`RelativeRegisterLoc`]) |
//! | array | `REG(u32)[16] @ 0x80` | `REG::at(i)` ([`RegisterArrayLoc`]) |
//! | relative array | `REG(u32)[16] @ Base + 0x80` | `REG::of::<B>().at(i)` ([`RelativeRegisterArrayLoc`]) |
//!
//! Registers declared in a `register! { @first_series ... }` invocation also get the accessors
//! of the first kernel series: associated `read`/`write`/`update` functions (`REG::read(&io)`,
//! `reg.write(&io)`) and the `set_x`/`try_set_x` setters, so drivers written against either style
//! compile. They are generated only on request because every declaration pays for them in
//! compile time. Most items of this module are public only for the macro; drivers normally need
//! [`RegisterBase`], and perhaps [`WithBase`] and [`Array`].
//!
//! The examples below run against a [`MemRegion`](crate::io::MemRegion), plain memory standing in
//! for a device; a driver passes its [`Mmio`](crate::io::Mmio) mapping instead.
//!
//! # Declaring a register and using its fields
//!
//! ```
//! use bounded::Bounded;
//! use register::{io::{Io, MemRegion}, register};
//!
//! register! {
//!     @first_series
//!     /// Revision of the chip.
//!     pub BOOT_0(u32) @ 0x100 {
//!         /// Major revision.
//!         7:4 major_revision;
//!         /// Minor revision.
//!         3:0 minor_revision;
//!     }
//! }
//!
//! let region = MemRegion::<0x1000>::new();
//! region.write32(0x0000_0021, 0x100);
//! let bar = &region;
//!
//! // Read at the offset of the declaration, 0x100.
//! let boot0 = BOOT_0::read(&bar);
//! assert_eq!((boot0.major_revision().get(), boot0.minor_revision().get()), (2, 1));
//!
//! // Change two fields and write the value back.
//! boot0
//!     .set_major_revision(Bounded::<u32, _>::new::<3>())
//!     .set_minor_revision(Bounded::<u32, _>::new::<10>())
//!     .write(&bar);
//! assert_eq!(region.read32(0x100), 0x3a);
//!
//! // Or read, modify and write back in one call.
//! BOOT_0::update(&bar, |r| r.set_minor_revision(Bounded::<u32, _>::new::<4>()));
//! assert_eq!(region.read32(0x100), 0x34);
//! ```
//!
//! # Several registers at once, and other storage sizes
//!
//! ```
//! use register::{io::{Io, MemRegion}, register};
//!
//! register! {
//!     @first_series
//!     pub BOOT_0(u8) @ 0x00000100 {
//!         7:4 major_revision;
//!         3:0 minor_revision;
//!     }
//!
//!     pub BOOT_1(u8) @ 0x00000101 {
//!         7:5 num_threads;
//!         4:0 num_cores;
//!     }
//! }
//!
//! let io = MemRegion::<0x200>::new();
//! io.write16(0xe3_21, 0x100);
//! assert_eq!(io.read(BOOT_0).minor_revision().get(), 1);
//! assert_eq!(io.read(BOOT_1).num_threads().get(), 7);
//! assert_eq!(io.read(BOOT_1).num_cores().get(), 3);
//! ```
//!
//! # Aliases
//!
//! A register whose meaning depends on context can get a second declaration at the same offset,
//! with its own fields:
//!
//! ```
//! use register::{io::{Io, MemRegion}, register};
//!
//! register! {
//!     @first_series
//!     /// Scratch register.
//!     pub SCRATCH(u32) @ 0x00000200 {
//!         /// Raw value.
//!         31:0 value;
//!     }
//!
//!     /// The scratch register as used by the firmware to report that it booted.
//!     pub SCRATCH_BOOT_STATUS(u32) => SCRATCH {
//!         /// Set once the firmware has booted.
//!         0:0 completed => bool;
//!     }
//! }
//!
//! let io = MemRegion::<0x1000>::new();
//! assert_eq!(SCRATCH_BOOT_STATUS::OFFSET, SCRATCH::OFFSET);
//! assert!(!io.read(SCRATCH_BOOT_STATUS).completed());
//! io.write_reg(SCRATCH::zeroed().with_value(1u32));
//! assert!(io.read(SCRATCH_BOOT_STATUS).completed());
//! ```
//!
//! # Relative registers
//!
//! Some blocks of registers appear several times in the I/O space, each copy at its own base:
//!
//! ```text
//!  0x100 +----- CPU0 -----+
//!        |       ...      |
//!  0x110 |     CPU_CTL    |
//!        |       ...      |
//!  0x200 +----- CPU1 -----+
//!        |       ...      |
//!  0x210 |     CPU_CTL    |
//!        |       ...      |
//! ```
//!
//! `CPU_CTL` is declared once, at offset `0x10` of a base family `CpuCtlBase` (any type, usually
//! an empty one). Each copy of the block is a type implementing [`RegisterBase<CpuCtlBase>`],
//! whose `BASE` is added to the offset at every access:
//!
//! ```
//! use register::{io::{Io, MemRegion}, register, RegisterBase};
//!
//! /// Family of the CPU control blocks.
//! pub struct CpuCtlBase;
//!
//! /// The block of CPU 0.
//! struct Cpu0;
//! impl RegisterBase<CpuCtlBase> for Cpu0 {
//!     const BASE: usize = 0x100;
//! }
//! const CPU0: Cpu0 = Cpu0;
//!
//! /// The block of CPU 1.
//! struct Cpu1;
//! impl RegisterBase<CpuCtlBase> for Cpu1 {
//!     const BASE: usize = 0x200;
//! }
//! const CPU1: Cpu1 = Cpu1;
//!
//! register! {
//!     @first_series
//!     /// CPU core control.
//!     pub CPU_CTL(u32) @ CpuCtlBase + 0x10 {
//!         /// Starts the core.
//!         0:0 start => bool;
//!     }
//! }
//!
//! let region = MemRegion::<0x1000>::new();
//! let bar = &region;
//!
//! // Seed style: the base is an extra argument.
//! CPU_CTL::update(&bar, &CPU0, |r| r.set_start(true));
//! assert_eq!(region.read32(0x110), 1);
//! assert_eq!(region.read32(0x210), 0);
//! CPU_CTL::update(&bar, &CPU1, |r| r.set_start(true));
//! assert_eq!(region.read32(0x210), 1);
//!
//! // Linux 7.2 style: the base is part of the location.
//! region.write(CPU_CTL::of::<Cpu0>(), CPU_CTL::zeroed());
//! assert!(!region.read(CPU_CTL::of::<Cpu0>()).start());
//!
//! // Relative registers have aliases too.
//! register! {
//!     @first_series
//!     /// Another view of the CPU control register.
//!     pub CPU_CTL_ALIAS(u32) => CpuCtlBase + CPU_CTL {
//!         /// Starts the aliased core.
//!         1:1 alias_start => bool;
//!     }
//! }
//!
//! CPU_CTL_ALIAS::update(&bar, &CPU0, |r| r.set_alias_start(true));
//! assert_eq!(region.read32(0x110), 2);
//! ```
//!
//! # Arrays of registers
//!
//! Runs of registers with the same layout are arrays, read and written by index. A constant
//! index can be checked at build time (`at_const`, or an alias of an element); a run-time index
//! is checked by the `try_` functions, which return
//! [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange) (`EINVAL`):
//!
//! ```
//! use register::{io::{Io, MemRegion}, register, Error};
//!
//! # fn get_scratch_idx() -> usize { 0x15 }
//! register! {
//!     @first_series
//!     /// 64 scratch registers starting at 0x80.
//!     pub SCRATCH(u32)[64] @ 0x00000080 {
//!         31:0 value;
//!     }
//! }
//!
//! let region = MemRegion::<0x1000>::new();
//! let bar = &region;
//! region.write32(0xaa, 0x80 + 15 * 4);
//!
//! // Element 0 is at 0x80, element 15 at 0x80 + 15 * 4.
//! let scratch_0 = SCRATCH::read(&bar, 0).value();
//! let scratch_15 = SCRATCH::read(&bar, 15).value();
//! assert_eq!((scratch_0.get(), scratch_15.get()), (0, 0xaa));
//! assert_eq!(region.read(SCRATCH::at_const::<15>()).value(), 0xaa);
//!
//! // An index known only at run time.
//! let idx = get_scratch_idx();
//! let some_scratch = SCRATCH::try_read(&bar, idx)?.value();
//! assert_eq!(some_scratch, 0);
//! assert_eq!(SCRATCH::try_read(&bar, 64), Err(Error::IndexOutOfRange));
//! assert!(SCRATCH::try_at(64).is_none());
//!
//! // One element with a meaning of its own: here the firmware's exit code is in element 8.
//! register! {
//!     @first_series
//!     /// Exit code of the firmware.
//!     pub FIRMWARE_STATUS(u32) => SCRATCH[8] {
//!         7:0 status;
//!     }
//! }
//! SCRATCH::from(0x1ee).write(&bar, 8);
//! assert_eq!(FIRMWARE_STATUS::read(&bar).status(), 0xee);
//!
//! // Arrays whose elements are not adjacent have a stride: these two banks interleave.
//! register! {
//!     @first_series
//!     /// Bank 0.
//!     pub SCRATCH_INTERLEAVED_0(u32)[16 ; 8] @ 0x000000c0 {
//!         31:0 value;
//!     }
//!
//!     /// Bank 1, in the mainline syntax.
//!     pub SCRATCH_INTERLEAVED_1(u32)[16, stride = 8] @ 0x000000c4 {
//!         31:0 value;
//!     }
//! }
//! SCRATCH_INTERLEAVED_0::from(1).write(&bar, 1);
//! SCRATCH_INTERLEAVED_1::from(2).write(&bar, 1);
//! assert_eq!(region.read64(0xc8), 0x2_0000_0001);
//! # Ok::<(), Error>(())
//! ```
//!
//! # Arrays relative to a base
//!
//! ```
//! use register::{io::{Io, MemRegion}, register, Error, RegisterBase};
//!
//! # fn get_scratch_idx() -> usize { 0x15 }
//! /// Family of the CPU control blocks.
//! pub struct CpuCtlBase;
//!
//! struct Cpu0;
//! impl RegisterBase<CpuCtlBase> for Cpu0 {
//!     const BASE: usize = 0x100;
//! }
//!
//! struct Cpu1;
//! impl RegisterBase<CpuCtlBase> for Cpu1 {
//!     const BASE: usize = 0x200;
//! }
//!
//! register! {
//!     @first_series
//!     /// 64 scratch registers per CPU.
//!     pub CPU_SCRATCH(u32)[64] @ CpuCtlBase + 0x00000080 {
//!         31:0 value;
//!     }
//! }
//!
//! let region = MemRegion::<0x1000>::new();
//! let bar = &region;
//!
//! CPU_SCRATCH::from(5).write(&bar, &Cpu1, 15);
//! assert_eq!(region.read32(0x200 + 0x80 + 15 * 4), 5);
//! let cpu0_scratch_0 = CPU_SCRATCH::read(&bar, &Cpu0, 0).value();
//! let cpu1_scratch_15 = CPU_SCRATCH::read(&bar, &Cpu1, 15).value();
//! assert_eq!((cpu0_scratch_0.get(), cpu1_scratch_15.get()), (0, 5));
//!
//! // Linux 7.2 style.
//! let scratch = region.read(CPU_SCRATCH::of::<Cpu1>().at(15));
//! region.write(CPU_SCRATCH::of::<Cpu0>().at(15), scratch);
//! assert_eq!(region.read32(0x100 + 0x80 + 15 * 4), 5);
//!
//! // Run-time index.
//! let idx = get_scratch_idx();
//! let cpu0_some_scratch = CPU_SCRATCH::try_read(&bar, &Cpu0, idx)?.value();
//! assert_eq!(cpu0_some_scratch, 0);
//! assert!(CPU_SCRATCH::of::<Cpu0>().try_at(64).is_none());
//!
//! // An element with a meaning of its own, in every copy of the block.
//! register! {
//!     @first_series
//!     /// Exit code of the firmware of each CPU.
//!     pub CPU_FIRMWARE_STATUS(u32) => CpuCtlBase + CPU_SCRATCH[8] {
//!         7:0 status;
//!     }
//! }
//! CPU_SCRATCH::from(0x17).write(&bar, &Cpu0, 8);
//! assert_eq!(CPU_FIRMWARE_STATUS::read(&bar, &Cpu0).status(), 0x17);
//! assert_eq!(region.read(CPU_FIRMWARE_STATUS::of::<Cpu1>()).status(), 0);
//!
//! // Interleaved banks relative to a base.
//! register! {
//!     @first_series
//!     /// Bank 0.
//!     pub CPU_SCRATCH_INTERLEAVED_0(u32)[16 ; 8] @ CpuCtlBase + 0x00000d00 {
//!         31:0 value;
//!     }
//!
//!     /// Bank 1.
//!     pub CPU_SCRATCH_INTERLEAVED_1(u32)[16 ; 8] @ CpuCtlBase + 0x00000d04 {
//!         31:0 value;
//!     }
//! }
//! CPU_SCRATCH_INTERLEAVED_1::from(9).write(&bar, &Cpu0, 0);
//! assert_eq!(region.read32(0x100 + 0xd04), 9);
//! # Ok::<(), Error>(())
//! ```
//!
//! # The Linux 7.2 style, with constant setters
//!
//! ```
//! use register::{io::{Io, MemRegion}, register};
//!
//! register! {
//!     @first_series
//!     pub CHIP_ID(u32) @ 0x00000100 {
//!         15:8 vendor;
//!         7:4 major;
//!         3:0 minor;
//!     }
//! }
//! # fn vendor_from_firmware() -> u8 { 0xff }
//!
//! let io = MemRegion::<0x1000>::new();
//! let id = io.read(CHIP_ID)
//!     .with_const_major::<3>()
//!     .with_const_minor::<10>()
//!     .with_vendor(vendor_from_firmware());
//! io.write_reg(id);
//! assert_eq!(io.read32(0x100), 0xff3a);
//!
//! io.update(CHIP_ID, |r| r.with_const_minor::<1>());
//! assert_eq!(io.read32(0x100), 0xff31);
//!
//! // Register values can be built in constants.
//! const V: CHIP_ID = CHIP_ID::zeroed().with_const_major::<3>().with_const_minor::<10>();
//! assert_eq!(V.as_raw(), 0x3a);
//! const W: CHIP_ID = pin_init::zeroed::<CHIP_ID>().with_const_vendor::<1>();
//! assert_eq!(W.as_raw(), 0x100);
//! ```

use core::marker::PhantomData;
use core::mem::size_of;

mod macros;

use crate::io::{IoLoc, StaticSpan};

/// Implemented by every register type.
pub trait Register: Sized {
    /// The primitive integer the register is made of.
    type Storage: Into<Self> + From<Self>;

    /// Offset of the register; for relative registers, from their base, and for arrays, of their
    /// first element.
    const OFFSET: usize;

    /// Name of the register, for build-time error messages.
    const NAME: &'static str = "(unnamed)";
}

/// Implemented by registers at a fixed offset (including aliases of fixed registers and of array
/// elements).
pub trait FixedRegister: Register {}

/// Provides the base address of a group of relative registers.
///
/// `R` names the family of registers the base is for (usually an empty type); a type can provide
/// bases for several families. A register declared `@ T + 0x10` can be accessed through any
/// implementor of `RegisterBase<T>`.
pub trait RegisterBase<R> {
    /// The address the offsets of relative registers are added to.
    const BASE: usize;
}

/// Implemented by registers relative to a base.
pub trait WithBase {
    /// The family of bases that apply to the register (the `Base` of `@ Base + offset`).
    type BaseFamily;

    /// Returns the location of the register relative to base `B`.
    #[inline(always)]
    fn of<Base: RegisterBase<Self::BaseFamily>>() -> RelativeRegisterLoc<Self, Base>
    where
        Self: Register,
    {
        RelativeRegisterLoc::new()
    }
}

/// Implemented by single (non-array) registers relative to a base.
pub trait RelativeRegister: Register + WithBase {}

/// Implemented by arrays of registers.
pub trait RegisterArray: Register {
    /// Number of registers in the array.
    const SIZE: usize;
    /// Distance in bytes between the starts of two consecutive registers.
    const STRIDE: usize;
}

/// Implemented by arrays of registers relative to a base.
pub trait RelativeRegisterArray: WithBase + RegisterArray {}

/// Returns the span of `count` accesses of `width` bytes, `stride` bytes apart, from `offset`.
const fn span(
    name: &'static str,
    offset: usize,
    count: usize,
    stride: usize,
    width: usize,
) -> StaticSpan {
    StaticSpan {
        name,
        end: offset + (count - 1) * stride + width,
        aligned: offset.is_multiple_of(width) && (count == 1 || stride.is_multiple_of(width)),
    }
}

/// Location of a [`FixedRegister`]; the macro defines a constant of this type with the name of
/// the register.
pub struct FixedRegisterLoc<R: FixedRegister>(PhantomData<R>);

impl<R: FixedRegister> FixedRegisterLoc<R> {
    /// Returns the location of register `R`.
    #[allow(clippy::new_without_default)]
    #[inline(always)]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<R: FixedRegister> Clone for FixedRegisterLoc<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: FixedRegister> Copy for FixedRegisterLoc<R> {}

impl<R: FixedRegister> IoLoc<R> for FixedRegisterLoc<R> {
    type IoType = R::Storage;
    const STATIC_SPAN: Option<StaticSpan> =
        Some(span(R::NAME, R::OFFSET, 1, 0, size_of::<R::Storage>()));

    #[inline(always)]
    fn offset(self) -> usize {
        R::OFFSET
    }
}

/// A fixed register value is its own location: `io.write(reg, reg)` or `io.read(reg)`.
impl<R: FixedRegister> IoLoc<R> for R {
    type IoType = R::Storage;
    const STATIC_SPAN: Option<StaticSpan> =
        Some(span(R::NAME, R::OFFSET, 1, 0, size_of::<R::Storage>()));

    #[inline(always)]
    fn offset(self) -> usize {
        R::OFFSET
    }
}

/// `()` stands for the location of any fixed register: `io.write((), reg)`.
impl<R: FixedRegister> IoLoc<R> for () {
    type IoType = R::Storage;
    const STATIC_SPAN: Option<StaticSpan> =
        Some(span(R::NAME, R::OFFSET, 1, 0, size_of::<R::Storage>()));

    #[inline(always)]
    fn offset(self) -> usize {
        R::OFFSET
    }
}

/// Location of a register relative to base `B`; for register arrays, call
/// [`at`](RelativeRegisterLoc::at) to pick an element.
pub struct RelativeRegisterLoc<R: WithBase, B: ?Sized>(PhantomData<R>, PhantomData<B>);

impl<R, B> RelativeRegisterLoc<R, B>
where
    R: Register + WithBase,
    B: ?Sized + RegisterBase<R::BaseFamily>,
{
    /// Returns the location of `R` relative to `B`.
    #[allow(clippy::new_without_default)]
    #[inline(always)]
    pub const fn new() -> Self {
        RelativeRegisterLoc(PhantomData, PhantomData)
    }
}

impl<R: WithBase, B: ?Sized> Clone for RelativeRegisterLoc<R, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: WithBase, B: ?Sized> Copy for RelativeRegisterLoc<R, B> {}

impl<R, B> IoLoc<R> for RelativeRegisterLoc<R, B>
where
    R: RelativeRegister,
    B: ?Sized + RegisterBase<R::BaseFamily>,
{
    type IoType = R::Storage;
    const STATIC_SPAN: Option<StaticSpan> = Some(span(
        R::NAME,
        B::BASE + R::OFFSET,
        1,
        0,
        size_of::<R::Storage>(),
    ));

    #[inline(always)]
    fn offset(self) -> usize {
        B::BASE + R::OFFSET
    }
}

/// Panics with the message of an out-of-range array index.
#[cold]
#[track_caller]
fn index_out_of_range(index: usize, size: usize) -> ! {
    panic!("register array index {index} out of range (array size {size})")
}

/// Location of one register of a [`RegisterArray`].
///
/// # Invariants
///
/// The index is smaller than `R::SIZE`.
pub struct RegisterArrayLoc<R: RegisterArray>(usize, PhantomData<R>);

impl<R: RegisterArray> RegisterArrayLoc<R> {
    /// Returns the location of element `idx`.
    ///
    /// # Panics
    ///
    /// If `idx >= T::SIZE`. The kernel rejects a constant out-of-range index at build time; use
    /// [`RegisterArrayLoc::new_const`] (or a `=> ARRAY[i]` alias) for that check here, and
    /// [`RegisterArrayLoc::try_new`] for indices computed at run time.
    #[inline(always)]
    #[track_caller]
    pub fn new(index: usize) -> Self {
        if index >= R::SIZE {
            index_out_of_range(index, R::SIZE);
        }
        // INVARIANT: Checked above.
        Self(index, PhantomData)
    }

    /// Returns the location of element `IDX`, checked at build time.
    #[inline(always)]
    pub const fn new_const<const IDX: usize>() -> Self {
        const { crate::__private::check_const_index(R::NAME, IDX, R::SIZE) };
        // INVARIANT: Checked above.
        Self(IDX, PhantomData)
    }

    /// Returns the location of element `idx`, or `None` if it is out of range.
    #[inline(always)]
    pub fn try_new(index: usize) -> Option<Self> {
        // INVARIANT: Checked here.
        (index < R::SIZE).then_some(Self(index, PhantomData))
    }

    /// Returns the index of the element.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.0
    }
}

impl<R: RegisterArray> Clone for RegisterArrayLoc<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: RegisterArray> Copy for RegisterArrayLoc<R> {}

impl<R: RegisterArray> IoLoc<R> for RegisterArrayLoc<R> {
    type IoType = R::Storage;
    const STATIC_SPAN: Option<StaticSpan> = Some(span(
        R::NAME,
        R::OFFSET,
        R::SIZE,
        R::STRIDE,
        size_of::<R::Storage>(),
    ));

    #[inline(always)]
    fn offset(self) -> usize {
        // SAFETY: By the type invariant, the index is in range. Telling the optimizer lets it
        // drop the bounds check of the access.
        unsafe { core::hint::assert_unchecked(self.0 < R::SIZE) };
        R::OFFSET + R::STRIDE * self.0
    }
}

/// Location builders of register arrays: `REG::at(i)`.
pub trait Array {
    /// Returns the location of element `idx`.
    ///
    /// # Panics
    ///
    /// If `idx` is out of range; see [`RegisterArrayLoc::new`].
    #[inline(always)]
    #[track_caller]
    fn at(index: usize) -> RegisterArrayLoc<Self>
    where
        Self: RegisterArray,
    {
        RegisterArrayLoc::new(index)
    }

    /// Returns the location of element `IDX`, checked at build time.
    #[inline(always)]
    fn at_const<const IDX: usize>() -> RegisterArrayLoc<Self>
    where
        Self: RegisterArray,
    {
        RegisterArrayLoc::new_const::<IDX>()
    }

    /// Returns the location of element `idx`, or `None` if it is out of range.
    #[inline(always)]
    fn try_at(index: usize) -> Option<RegisterArrayLoc<Self>>
    where
        Self: RegisterArray,
    {
        RegisterArrayLoc::try_new(index)
    }
}

/// Location of one register of a [`RelativeRegisterArray`] relative to base `B`.
///
/// # Invariants
///
/// The index is smaller than `R::SIZE`.
pub struct RelativeRegisterArrayLoc<R: RelativeRegisterArray, B: ?Sized>(
    usize,
    PhantomData<R>,
    PhantomData<B>,
);

impl<R, B> RelativeRegisterLoc<R, B>
where
    R: RelativeRegisterArray,
    B: ?Sized + RegisterBase<R::BaseFamily>,
{
    /// Returns the location of element `idx`.
    ///
    /// # Panics
    ///
    /// If `idx` is out of range; see [`RegisterArrayLoc::new`].
    #[inline(always)]
    #[track_caller]
    pub fn at(self, index: usize) -> RelativeRegisterArrayLoc<R, B> {
        if index >= R::SIZE {
            index_out_of_range(index, R::SIZE);
        }
        // INVARIANT: Checked above.
        RelativeRegisterArrayLoc(index, PhantomData, PhantomData)
    }

    /// Returns the location of element `IDX`, checked at build time.
    #[inline(always)]
    pub const fn at_const<const IDX: usize>(self) -> RelativeRegisterArrayLoc<R, B> {
        const { crate::__private::check_const_index(R::NAME, IDX, R::SIZE) };
        // INVARIANT: Checked above.
        RelativeRegisterArrayLoc(IDX, PhantomData, PhantomData)
    }

    /// Returns the location of element `idx`, or `None` if it is out of range.
    #[inline(always)]
    pub fn try_at(self, index: usize) -> Option<RelativeRegisterArrayLoc<R, B>> {
        // INVARIANT: Checked here.
        (index < R::SIZE).then_some(RelativeRegisterArrayLoc(index, PhantomData, PhantomData))
    }
}

impl<R: RelativeRegisterArray, B: ?Sized> Clone for RelativeRegisterArrayLoc<R, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: RelativeRegisterArray, B: ?Sized> Copy for RelativeRegisterArrayLoc<R, B> {}

impl<R, B> IoLoc<R> for RelativeRegisterArrayLoc<R, B>
where
    R: RelativeRegisterArray,
    B: ?Sized + RegisterBase<R::BaseFamily>,
{
    type IoType = R::Storage;
    const STATIC_SPAN: Option<StaticSpan> = Some(span(
        R::NAME,
        B::BASE + R::OFFSET,
        R::SIZE,
        R::STRIDE,
        size_of::<R::Storage>(),
    ));

    #[inline(always)]
    fn offset(self) -> usize {
        // SAFETY: By the type invariant, the index is in range.
        unsafe { core::hint::assert_unchecked(self.0 < R::SIZE) };
        B::BASE + R::OFFSET + R::STRIDE * self.0
    }
}

/// A value that carries the location it is written to: what
/// [`Io::write_reg`](crate::io::Io::write_reg) takes.
pub trait LocatedRegister {
    /// The register value written.
    type Value: Register;
    /// Where it is written.
    type Location: IoLoc<Self::Value>;

    /// Splits `self` into the location and the value of the write.
    fn into_io_op(self) -> (Self::Location, Self::Value)
    where
        Self: Sized;
}

impl<R: FixedRegister> LocatedRegister for R {
    type Value = R;
    type Location = FixedRegisterLoc<R>;

    #[inline(always)]
    fn into_io_op(self) -> (Self::Location, R) {
        (FixedRegisterLoc::<R>::new(), self)
    }
}
