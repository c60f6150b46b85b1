// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Probes for `bounded`.
//!
//! Each `bounded_<what>_lib` function goes through `Bounded`; its `bounded_<what>_hand` twin
//! computes the same result with plain integer code, written the way a careful C programmer
//! would. Inputs enter as primitives and are turned into `Bounded` values by the lossless or
//! checked paths a driver would use, so both sides start from the same knowledge.

use bounded::Bounded;

/// Extracts bits 15..8 of `x`: the low half becomes a `Bounded<u32, 16>`, then `shr` narrows it
/// to the 8-bit field.
#[no_mangle]
pub extern "C" fn bounded_shr_field_lib(x: u32) -> u32 {
    let low: Bounded<u32, 16> = Bounded::from(x as u16);
    low.shr::<8, 8>().get()
}

/// Hand-written twin of [`bounded_shr_field_lib`].
#[no_mangle]
pub extern "C" fn bounded_shr_field_hand(x: u32) -> u32 {
    (x & 0xffff) >> 8
}

/// Arithmetic right shift of a signed 16-bit value held in an `i32`.
#[no_mangle]
pub extern "C" fn bounded_shr_signed_lib(x: i16) -> i32 {
    Bounded::<i32, 16>::from(x).shr::<4, 12>().get()
}

/// Hand-written twin of [`bounded_shr_signed_lib`].
#[no_mangle]
pub extern "C" fn bounded_shr_signed_hand(x: i16) -> i32 {
    i32::from(x) >> 4
}

/// Inserts an 8-bit field at bits 15..8 of a register value (what a `register!` setter does).
#[no_mangle]
pub extern "C" fn bounded_set_field_lib(reg: u32, field: u8) -> u32 {
    let placed = Bounded::<u32, 8>::from(field).shl::<8, 16>().get();
    (reg & !0xff00) | placed
}

/// Hand-written twin of [`bounded_set_field_lib`].
#[no_mangle]
pub extern "C" fn bounded_set_field_hand(reg: u32, field: u8) -> u32 {
    let placed = u32::from(field) << 8;
    (reg & !0xff00) | placed
}

/// Adds two `Bounded` values of different widths.
#[no_mangle]
pub extern "C" fn bounded_add_lib(a: u8, b: u16) -> u32 {
    Bounded::<u32, 8>::from(a) + Bounded::<u32, 16>::from(b)
}

/// Hand-written twin of [`bounded_add_lib`].
#[no_mangle]
pub extern "C" fn bounded_add_hand(a: u8, b: u16) -> u32 {
    u32::from(a) + u32::from(b)
}

/// Converts a primitive into a `Bounded` and back into a wider primitive.
#[no_mangle]
pub extern "C" fn bounded_from_into_lib(x: u8) -> u64 {
    u64::from(Bounded::<u32, 8>::from(x))
}

/// Hand-written twin of [`bounded_from_into_lib`].
#[no_mangle]
pub extern "C" fn bounded_from_into_hand(x: u8) -> u64 {
    u64::from(x)
}

/// Signed conversion: `i8` into a `Bounded<i64, 8>`, then into an `i32`.
#[no_mangle]
pub extern "C" fn bounded_from_into_signed_lib(x: i8) -> i32 {
    i32::from(Bounded::<i64, 8>::from(x))
}

/// Hand-written twin of [`bounded_from_into_signed_lib`].
#[no_mangle]
pub extern "C" fn bounded_from_into_signed_hand(x: i8) -> i32 {
    i32::from(x)
}

/// Checked narrowing: a 12-bit `Bounded<u32, _>` converts into a `u16` without a second check.
#[no_mangle]
pub extern "C" fn bounded_try_new_into_lib(x: u32) -> u16 {
    match Bounded::<u32, 12>::try_new(x) {
        Some(v) => u16::from(v),
        None => 0,
    }
}

/// Hand-written twin of [`bounded_try_new_into_lib`].
#[no_mangle]
pub extern "C" fn bounded_try_new_into_hand(x: u32) -> u16 {
    if x < 1 << 12 {
        x as u16
    } else {
        0
    }
}

/// `get` after masking: `try_new` on a masked value cannot fail, and the check disappears.
#[no_mangle]
pub extern "C" fn bounded_get_masked_lib(x: u32) -> u32 {
    match Bounded::<u32, 4>::try_new(x & 0xf) {
        Some(v) => v.get() * 3,
        None => 0,
    }
}

/// Hand-written twin of [`bounded_get_masked_lib`].
#[no_mangle]
pub extern "C" fn bounded_get_masked_hand(x: u32) -> u32 {
    (x & 0xf) * 3
}

/// `from_expr` on a provably in-range expression: the run-time check disappears.
#[no_mangle]
pub extern "C" fn bounded_from_expr_lib(x: u64) -> u64 {
    Bounded::<u64, 6>::from_expr(x & 0x3f).get()
}

/// Hand-written twin of [`bounded_from_expr_lib`].
#[no_mangle]
pub extern "C" fn bounded_from_expr_hand(x: u64) -> u64 {
    x & 0x3f
}

/// `cast` from a `u64` backing to a `u8` backing after a checked construction.
#[no_mangle]
pub extern "C" fn bounded_cast_lib(x: u64) -> u8 {
    match Bounded::<u64, 8>::try_new(x) {
        Some(v) => v.cast::<u8>().get(),
        None => 0,
    }
}

/// Hand-written twin of [`bounded_cast_lib`].
#[no_mangle]
pub extern "C" fn bounded_cast_hand(x: u64) -> u8 {
    if x < 256 {
        x as u8
    } else {
        0
    }
}

/// `extend` to a wider field, then use the value.
#[no_mangle]
pub extern "C" fn bounded_extend_lib(x: u16, y: u32) -> u32 {
    let v = Bounded::<u32, 16>::from(x).extend::<24>();
    (v | y) >> 2
}

/// Hand-written twin of [`bounded_extend_lib`].
#[no_mangle]
pub extern "C" fn bounded_extend_hand(x: u16, y: u32) -> u32 {
    (u32::from(x) | y) >> 2
}

/// A single-bit field read as a `bool`.
#[no_mangle]
pub extern "C" fn bounded_bit_lib(reg: u32) -> bool {
    let bit: Bounded<u32, 1> = Bounded::<u32, 8>::from((reg >> 8) as u8).shr::<7, 1>();
    bit.into_bool()
}

/// Hand-written twin of [`bounded_bit_lib`].
#[no_mangle]
pub extern "C" fn bounded_bit_hand(reg: u32) -> bool {
    reg & (1 << 15) != 0
}
