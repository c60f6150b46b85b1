// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Every declaration form of `register!`, through both accessor styles.

use register::io::register::{Array, RegisterBase, WithBase};
use register::io::{Io, MemRegion};
use register::register;
use register::Error;

use bounded::Bounded;

register! {
    @first_series
    /// A 32-bit register with three fields.
    pub BOOT_0(u32) @ 0x100 {
        /// Vendor.
        15:8 vendor_id;
        /// Major revision.
        7:4 major_revision;
        /// Minor revision.
        3:0 minor_revision;
    }

    /// An alias of `BOOT_0`.
    pub BOOT_0_FLAGS(u32) => BOOT_0 {
        31:31 valid => bool;
    }

    /// Byte registers.
    pub SMALL(u8) @ 0x8 {
        7:5 threads;
        4:0 cores;
    }

    /// A 64-bit register.
    pub WIDE(u64) @ 0x10 {
        63:32 hi;
        31:0 lo;
    }

    /// A 16-bit register.
    pub HALF(u16) @ 0x2 {
        15:15 top => bool;
        11:0 low12;
    }

    /// An array, contiguous.
    pub SCRATCH(u32)[16] @ 0x200 {
        31:0 value;
    }

    /// An array with a stride, mainline syntax.
    pub BANK0(u32)[4, stride = 8] @ 0x300 {
        31:0 value;
    }

    /// An array with a stride, seed syntax.
    pub BANK1(u32)[4 ; 8] @ 0x304 {
        31:0 value;
    }

    /// An alias of an array element.
    pub SCRATCH_STATUS(u32) => SCRATCH[3] {
        7:0 status;
    }

    /// A register without fields.
    pub EMPTY(u32) @ 0x40 {}
}

/// Base family of the per-engine registers.
pub struct EngineBase;
/// Engine 0.
pub struct Engine0;
impl RegisterBase<EngineBase> for Engine0 {
    const BASE: usize = 0x1000;
}
/// Engine 1.
pub struct Engine1;
impl RegisterBase<EngineBase> for Engine1 {
    const BASE: usize = 0x2000;
}

register! {
    @first_series
    /// Relative register.
    pub ENG_CTL(u32) @ EngineBase + 0x10 {
        0:0 start => bool;
        3:1 mode;
    }

    /// Relative alias.
    pub ENG_CTL_ALIAS(u32) => EngineBase + ENG_CTL {
        1:1 alias_start => bool;
    }

    /// Relative array.
    pub ENG_SCRATCH(u32)[8] @ EngineBase + 0x80 {
        31:0 value;
    }

    /// Relative array with stride.
    pub ENG_BANK(u16)[4, stride = 4] @ EngineBase + 0xc0 {
        15:0 value;
    }

    /// Relative array alias.
    pub ENG_STATUS(u32) => EngineBase + ENG_SCRATCH[7] {
        7:0 code;
    }
}

type Region = MemRegion<0x3000>;

#[test]
fn constants() {
    assert_eq!(BOOT_0::OFFSET, 0x100);
    assert_eq!(BOOT_0_FLAGS::OFFSET, 0x100);
    assert_eq!(BOOT_0::VENDOR_ID_MASK, 0xff00);
    assert_eq!(BOOT_0::VENDOR_ID_SHIFT, 8);
    assert_eq!(BOOT_0::VENDOR_ID_RANGE, 8..=15);
    assert_eq!(WIDE::HI_MASK, 0xffff_ffff_0000_0000);
    assert_eq!(SCRATCH::SIZE, 16);
    assert_eq!(SCRATCH::STRIDE, 4);
    assert_eq!(BANK0::STRIDE, 8);
    assert_eq!(BANK1::STRIDE, 8);
    assert_eq!(SCRATCH_STATUS::OFFSET, 0x20c);
    assert_eq!(ENG_STATUS::OFFSET, 0x80 + 7 * 4);
    assert_eq!(ENG_BANK::STRIDE, 4);
}

#[test]
fn fields_and_setters() {
    let v = BOOT_0::zeroed()
        .with_const_major_revision::<3>()
        .with_minor_revision(Bounded::<u32, 4>::new::<0xa>())
        .with_vendor_id(0xdeu8);
    assert_eq!(v.as_raw(), 0xde3a);
    assert_eq!(v.major_revision().get(), 3);
    assert_eq!(v.minor_revision(), 0xa);
    assert_eq!(v.set_vendor_id(1u8).as_raw(), 0x013a);
    assert_eq!(v.try_set_major_revision(16u32), Err(Error::ValueTooWide));
    assert_eq!(v.try_with_major_revision(15u64).unwrap().as_raw(), 0xdefa);
    assert_eq!(u32::from(v), 0xde3a);
    assert_eq!(BOOT_0::from(0xde3a), v);
    assert_eq!(BOOT_0::from_raw(1).into_raw(), 1);

    let w = WIDE::zeroed().with_hi(u32::MAX).with_lo(1u32);
    assert_eq!(w.as_raw(), 0xffff_ffff_0000_0001);
    assert_eq!(w.hi(), u64::from(u32::MAX));

    let h = HALF::zeroed()
        .with_top(true)
        .try_with_low12(0xfffu16)
        .unwrap();
    assert_eq!(h.as_raw(), 0x8fff);
    assert!(h.top());
    assert_eq!(h.try_with_low12(0x1000u16), Err(Error::ValueTooWide));

    // Bits outside of any field are kept by setters.
    let s = SMALL::from(0xff).with_cores(Bounded::<u8, _>::new::<0>());
    assert_eq!(s.as_raw(), 0xe0);
}

#[test]
fn debug_prints_raw_and_fields() {
    let v = BOOT_0::from(0x1234);
    let s = format!("{v:?}");
    assert!(s.starts_with("BOOT_0 { <raw>: 0x1234, vendor_id: "), "{s}");
    assert!(s.contains("major_revision"), "{s}");
    assert_eq!(format!("{:?}", EMPTY::zeroed()), "EMPTY { <raw>: 0x0 }");
}

#[test]
fn seed_style_io() {
    let region = Region::new();
    let io = &region;
    BOOT_0::zeroed()
        .set_major_revision(Bounded::<u32, _>::new::<3>())
        .set_minor_revision(Bounded::<u32, _>::new::<10>())
        .write(&io);
    assert_eq!(io.read32(0x100), 0x3a);
    BOOT_0::update(&io, |r| r.set_vendor_id(0x42u8));
    assert_eq!(BOOT_0::read(&io).vendor_id(), 0x42);
    BOOT_0_FLAGS::update(&io, |r| r.set_valid(true));
    assert_eq!(io.read32(0x100), 0x8000_423a);

    SCRATCH::zeroed().set_value(7u32).write(&io, 15);
    assert_eq!(io.read32(0x200 + 15 * 4), 7);
    assert_eq!(SCRATCH::read(&io, 15).value(), 7);
    SCRATCH::update(&io, 3, |r| r.set_value(0x55u32));
    assert_eq!(SCRATCH_STATUS::read(&io).status(), 0x55);
    assert_eq!(SCRATCH::try_read(&io, 16), Err(Error::IndexOutOfRange));
    assert_eq!(
        SCRATCH::zeroed().try_write(&io, 99),
        Err(Error::IndexOutOfRange)
    );
    assert_eq!(
        SCRATCH::try_update(&io, 16, |r| r),
        Err(Error::IndexOutOfRange)
    );
    SCRATCH::try_update(&io, 0, |r| r.set_value(9u32)).unwrap();
    assert_eq!(SCRATCH::try_read(&io, 0).unwrap().value(), 9);

    BANK0::zeroed().set_value(1u32).write(&io, 1);
    BANK1::zeroed().set_value(2u32).write(&io, 1);
    assert_eq!(io.read32(0x308), 1);
    assert_eq!(io.read32(0x30c), 2);

    ENG_CTL::update(&io, &Engine0, |r| r.set_start(true));
    ENG_CTL::zeroed()
        .set_mode(Bounded::<u32, _>::new::<5>())
        .write(&io, &Engine1);
    assert_eq!(io.read32(0x1010), 1);
    assert_eq!(io.read32(0x2010), 0xa);
    ENG_CTL_ALIAS::update(&io, &Engine0, |r| r.set_alias_start(true));
    assert_eq!(io.read32(0x1010), 3);
    assert!(ENG_CTL::read(&io, &Engine0).start());

    ENG_SCRATCH::zeroed()
        .set_value(0x77u32)
        .write(&io, &Engine1, 7);
    assert_eq!(ENG_STATUS::read(&io, &Engine1).code(), 0x77);
    assert_eq!(ENG_SCRATCH::read(&io, &Engine1, 7).value(), 0x77);
    ENG_SCRATCH::update(&io, &Engine0, 0, |r| r.set_value(1u32));
    assert_eq!(io.read32(0x1080), 1);
    assert_eq!(
        ENG_SCRATCH::try_read(&io, &Engine0, 8),
        Err(Error::IndexOutOfRange)
    );
    ENG_SCRATCH::zeroed()
        .set_value(3u32)
        .try_write(&io, &Engine0, 1)
        .unwrap();
    ENG_SCRATCH::try_update(&io, &Engine0, 1, |r| r.set_value(4u32)).unwrap();
    assert_eq!(io.read32(0x1084), 4);

    ENG_BANK::zeroed()
        .set_value(0xbeefu16)
        .write(&io, &Engine0, 3);
    assert_eq!(io.read16(0x10c0 + 12), 0xbeef);
}

#[test]
fn linux_style_io() {
    let io = Region::new();
    io.write_reg(BOOT_0::zeroed().with_const_major_revision::<1>());
    assert_eq!(io.read(BOOT_0).major_revision(), 1);
    io.update(BOOT_0, |r| r.with_vendor_id(0xaau8));
    assert_eq!(io.read32(0x100), 0xaa10);
    io.write((), BOOT_0::from(5));
    assert_eq!(io.read32(0x100), 5);
    io.write(BOOT_0, BOOT_0::from(6));
    assert_eq!(io.read(BOOT_0_FLAGS).as_raw(), 6);

    io.write(SCRATCH::at(2), SCRATCH::from(0x1234));
    io.write(Array::at(3), SCRATCH::from(0x99));
    assert_eq!(io.read(SCRATCH::at_const::<2>()).value(), 0x1234);
    assert_eq!(io.read(SCRATCH_STATUS).status(), 0x99);
    assert!(SCRATCH::try_at(16).is_none());
    assert_eq!(SCRATCH::try_at(5).map(|l| l.index()), Some(5));

    io.write(ENG_CTL::of::<Engine1>(), ENG_CTL::zeroed().with_start(true));
    io.write(WithBase::of::<Engine0>(), ENG_CTL::from(2));
    assert!(io.read(ENG_CTL::of::<Engine1>()).start());
    assert_eq!(io.read32(0x1010), 2);
    io.update(ENG_CTL_ALIAS::of::<Engine1>(), |r| r.with_alias_start(true));
    assert_eq!(io.read32(0x2010), 3);

    io.write(ENG_SCRATCH::of::<Engine0>().at(7), ENG_SCRATCH::from(0x42));
    assert_eq!(io.read(ENG_STATUS::of::<Engine0>()).code(), 0x42);
    let loc = ENG_SCRATCH::of::<Engine0>().at_const::<7>();
    assert_eq!(io.read(loc).value(), 0x42);
    assert!(ENG_SCRATCH::of::<Engine0>().try_at(8).is_none());

    // Run-time checked variants.
    assert_eq!(io.try_read(BOOT_0).unwrap().as_raw(), 6);
    io.try_write_reg(BOOT_0::from(7)).unwrap();
    io.try_update(SCRATCH::at(0), |r| r.with_value(1u32))
        .unwrap();
    io.try_write(ENG_BANK::of::<Engine1>().at(0), ENG_BANK::from(1))
        .unwrap();
    assert_eq!(io.read16(0x20c0), 1);

    // Small regions cannot hold a register at 0x2000 + ...: the run-time checked accessors
    // report it.
    let small = MemRegion::<0x1000>::new();
    assert_eq!(
        small.try_read(ENG_CTL::of::<Engine1>()).err(),
        Some(Error::OutOfBounds)
    );
}

#[test]
#[should_panic(expected = "out of range")]
fn runtime_index_out_of_range_panics_in_infallible_accessor() {
    let io = Region::new();
    let idx = std::hint::black_box(16);
    let _ = SCRATCH::read(&&io, idx);
}

register::bounded_enum! {
    /// Every 2-bit value named.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Power: Bounded<u16, 2> => {
        Off = 0,
        Starting = 1,
        On = 2,
        Stopping = 3,
    }

    /// Some 4-bit values named.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Speed: Bounded<u16, 4> ?=> {
        Slow = 0x1,
        Fast = 0xa,
    }
}

register! {
    @first_series
    /// Enum fields declared with `bounded_enum!`.
    pub CORE(u16) @ 0x50 {
        11:8 speed ?=> Speed;
        1:0 power => Power;
    }
}

#[test]
fn bounded_enum_fields() {
    let io = MemRegion::<0x100>::new();
    io.write_reg(
        CORE::zeroed()
            .with_power(Power::Stopping)
            .with_speed(Speed::Fast),
    );
    assert_eq!(io.read16(0x50), 0x0a03);
    let core = io.read(CORE);
    assert_eq!(core.power(), Power::Stopping);
    assert_eq!(core.speed(), Ok(Speed::Fast));
    assert_eq!(
        format!("{core:?}"),
        "CORE { <raw>: 0xa03, speed: Ok(Fast), power: Stopping }"
    );
    let bad = CORE::from_raw(0x0200);
    assert_eq!(bad.speed(), Err(register::UnknownValue(2)));
    assert_eq!(register::UnknownValue(2u16).to_errno(), -22);
    for (raw, power) in [(0, Power::Off), (1, Power::Starting), (2, Power::On)] {
        assert_eq!(CORE::from_raw(raw).power(), power);
    }
    assert_eq!(Bounded::<u16, 4>::from(Speed::Slow).get(), 1);
}

// A wrapper macro forwarding one register through the `@reg` entry without a mode: only the
// Linux 7.2 accessors are generated.
macro_rules! plain_reg {
    ($name:ident @ $at:literal { $($body:tt)* }) => {
        ::register::register!(@reg pub(crate) $name(u32) @ $at { $($body)* });
    };
}

plain_reg!(WRAPPED @ 0x300 { 7:4 high; 3:0 low; });

#[test]
fn wrapper_without_mode_gets_the_linux_accessors() {
    let io = MemRegion::<0x400>::new();
    io.write_reg(
        WRAPPED::zeroed()
            .with_const_high::<0xa>()
            .with_low(Bounded::<u32, 4>::new::<3>()),
    );
    assert_eq!(io.read32(0x300), 0xa3);
    assert_eq!(io.read(WRAPPED).high(), 0xa);
    assert_eq!(
        WRAPPED::zeroed().try_with_low(16u32),
        Err(Error::ValueTooWide)
    );
    assert_eq!(
        format!("{:?}", io.read(WRAPPED)),
        "WRAPPED { <raw>: 0xa3, high: 10, low: 3 }"
    );
}
