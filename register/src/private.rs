// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Items used by the code the macros generate. Not part of the API.
//!
//! The macros keep what they generate per field and per register small (that is what a
//! `cargo check` of a large register file pays for), and move every check that can be written
//! once into the `const fn`s here: they run in the constant evaluator when the declaration is
//! checked, and build their error messages (which name the register and the field) there.

pub use ::bounded;
pub use ::paste::paste;
pub use ::pin_init;

pub use crate::io::register as reg;

use bounded::{Bounded, Integer};

/// Lossless conversion into the `Bounded` type of a field: what `with_x`/`set_x` take.
///
/// Implemented for the unsigned primitive integers, `bool` and the field's own `Bounded` type,
/// each where the conversion cannot lose bits. An integer literal gets a type only if exactly one
/// primitive converts (8 to 15-bit fields: `u8`); otherwise (narrower fields, which no primitive
/// fits, and wider ones, which several fit) it falls back to `i32` and gets the message below.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not known to fit in this field (`{B}`)",
    label = "this value may not fit in the field",
    note = "an integer literal without a suffix is an `i32` here: either no unsigned integer type, or several, convert losslessly into the field",
    note = "for a constant, write `.with_const_FIELD::<VALUE>()` (checked at build time); for a value known only at run time, `.try_with_FIELD(value)` (or `.try_set_FIELD(value)`), which returns `Err(Error::ValueTooWide)` if it does not fit"
)]
pub trait IntoField<B> {
    /// Converts `self`.
    fn into_field(self) -> B;
}

impl<S: Integer, const N: u32> IntoField<Bounded<S, N>> for Bounded<S, N> {
    #[inline(always)]
    fn into_field(self) -> Self {
        self
    }
}

macro_rules! into_field {
    ($($p:ty)*) => {
        $(
            impl<S: Integer, const N: u32> IntoField<Bounded<S, N>> for $p
            where
                Bounded<S, N>: From<$p>,
            {
                #[inline(always)]
                fn into_field(self) -> Bounded<S, N> {
                    From::from(self)
                }
            }
        )*
    };
}

// Only unsigned sources: storage types are unsigned, so no signed value ever converts losslessly;
// leaving the signed types out makes an integer literal that matches no impl (it falls back to
// `i32`) report the message of `IntoField` rather than one about signed widths.
into_field!(u8 u16 u32 u64 u128 usize bool);

/// Fallible conversion into the `Bounded` type of a field, named by that type alone (so that
/// a bound on it needs no constant expression).
pub trait TryIntoField<B> {
    /// Converts `self`, or returns `None` if it does not fit.
    fn try_into_field(self) -> Option<B>;
}

impl<V, S, const N: u32> TryIntoField<Bounded<S, N>> for V
where
    S: Integer,
    V: bounded::TryIntoBounded<S, N>,
{
    #[inline(always)]
    fn try_into_field(self) -> Option<Bounded<S, N>> {
        self.try_into_bounded()
    }
}

/// The storage types of registers.
pub trait Storage: Integer + core::ops::Not<Output = Self> {
    /// Every bit set.
    const ONES: Self;
}

macro_rules! storage {
    ($($t:ty)*) => {
        $(
            impl Storage for $t {
                const ONES: Self = <$t>::MAX;
            }
        )*
    };
}

storage!(u8 u16 u32 u64);

/// Mask of the `N`-bit field at `shift` (after inlining, a constant).
#[inline(always)]
fn mask<S: Storage, const N: u32>(shift: u32) -> S {
    (S::ONES >> (S::BITS - N)) << shift
}

/// The value of the `N`-bit field at `shift` of the raw register value `raw`: the body of every
/// plain field's getter (one generic function instead of one body per field).
#[inline(always)]
pub fn get<S: Storage, const N: u32>(raw: S, shift: u32) -> Bounded<S, N> {
    Bounded::from_expr((raw & mask::<S, N>(shift)) >> shift)
}

/// `raw` with the `N`-bit field at `shift` replaced by `value`, as a register `R`: the body of
/// every plain field's `with_x`.
#[inline(always)]
pub fn with<R, S, const N: u32, T>(raw: S, value: T, shift: u32) -> R
where
    R: From<S>,
    S: Storage,
    T: IntoField<Bounded<S, N>>,
{
    R::from((raw & !mask::<S, N>(shift)) | (value.into_field().get() << shift))
}

/// As [`with`] if `value` fits in the field, [`Error::ValueTooWide`](crate::Error::ValueTooWide)
/// otherwise: the body of every plain field's `try_with_x`.
#[inline(always)]
pub fn try_with<R, S, const N: u32, T>(raw: S, value: T, shift: u32) -> Result<R, crate::Error>
where
    R: From<S>,
    S: Storage,
    T: TryIntoField<Bounded<S, N>>,
{
    match value.try_into_field() {
        Some(v) => Ok(with(raw, v, shift)),
        None => Err(crate::Error::ValueTooWide),
    }
}

/// What the build-time checks and `Debug` know of a register: one constant per register.
#[derive(Clone, Copy)]
pub struct Layout {
    /// Name of the register.
    pub name: &'static str,
    /// Name of its storage type.
    pub store: &'static str,
    /// Its fields, `(hi, lo, name, conversion)`, in declaration order; `conversion` is the type
    /// a converted field is converted to, empty for a plain field.
    pub fields: &'static [(u32, u32, &'static str, &'static str)],
}

/// The `Debug` of a register: its name, the raw value in hexadecimal, then each field: for a
/// converted field the next value of `converted` (the field through its getter), for a plain
/// field its bits as an integer.
pub fn debug_register(
    f: &mut core::fmt::Formatter<'_>,
    layout: Layout,
    raw: u64,
    converted: &[&dyn core::fmt::Debug],
) -> core::fmt::Result {
    let mut d = f.debug_struct(layout.name);
    d.field("<raw>", &format_args!("{raw:#x}"));
    let mut converted = converted.iter();
    for &(hi, lo, field, conversion) in layout.fields {
        let value = if conversion.is_empty() {
            None
        } else {
            converted.next()
        };
        match value {
            Some(value) => d.field(field, value),
            None => d.field(field, &((raw & field_mask(hi, lo)) >> field_shift(hi, lo))),
        };
    }
    d.finish()
}

/// Declares, for every field `hi:lo` with `hi` and `lo` below 64, the items that `register!`
/// names (building the names with `paste!`) instead of computing them in each declaration:
///
/// - `F{hi}_{lo}<S>`, the field's type `Bounded<S, {hi - lo + 1}>` (`Bounded<S, 1>` where
///   `lo > hi`, as [`field_width`]);
/// - `M{hi}_{lo}`, its mask in a `u64` (0 where `lo > hi`, as [`field_mask`]);
/// - `R{hi}_{lo}`, its bit range `lo..=hi`.
///
/// Where `lo > hi` the declaration check reports the field. A field's type used to be an
/// anonymous constant `{ field_width(hi, lo) }` and its `X_MASK` and `X_RANGE` function calls
/// (`field_mask`, `RangeInclusive::new`); each was a body that rustc type-checks, builds and
/// borrow-checks in the declaring crate, once per field. A constant whose body only names
/// another constant costs a fraction of that, and the table is built once, in this crate.
///
/// `@valid` walks `lo` down from 63 and keeps the fields with that `lo` as two lists that it
/// extends at their ends: the `hi`s (`lo` prepended) and the widths (the next width appended),
/// so each list pairs `hi` with `hi - lo + 1`. `@invalid` walks `hi` up from 0: every later
/// number is a `lo` above it.
macro_rules! field_types {
    (@valid [] [$($hi:tt)*] [$($w:tt)*] [$($next:tt)*]) => {};
    (@valid [$lo:tt $($los:tt)*] [$($hi:tt)*] [$($w:tt)*] [$nw:tt $($next:tt)*]) => {
        field_types!(@row $lo [$lo $($hi)*] [$($w)* $nw]);
        field_types!(@valid [$($los)*] [$lo $($hi)*] [$($w)* $nw] [$($next)*]);
    };
    (@row $lo:tt [$($hi:tt)*] [$($w:tt)*]) => {
        paste! {
            $(
                #[allow(missing_docs)]
                pub type [<F $hi _ $lo>]<S> = Bounded<S, $w>;
                #[allow(missing_docs)]
                pub const [<M $hi _ $lo>]: u64 = (u64::MAX >> (63 - $hi)) & (u64::MAX << $lo);
                #[allow(missing_docs)]
                pub const [<R $hi _ $lo>]: crate::FieldBits = $lo..=$hi;
            )*
        }
    };
    (@invalid []) => {};
    (@invalid [$hi:tt $($lo:tt)*]) => {
        paste! {
            $(
                #[allow(missing_docs)]
                pub type [<F $hi _ $lo>]<S> = Bounded<S, 1>;
                pub use self::{INVALID_MASK as [<M $hi _ $lo>], INVALID_RANGE as [<R $hi _ $lo>]};
            )*
        }
        field_types!(@invalid [$($lo)*]);
    };
}

/// `X_MASK` of a field with `lo > hi` (as `field_mask`; the declaration check reports it).
pub const INVALID_MASK: u64 = 0;
/// `X_RANGE` of a field with `lo > hi` (the declaration check reports it): empty on purpose.
#[allow(clippy::reversed_empty_ranges)]
pub const INVALID_RANGE: crate::FieldBits = 1..=0;

field_types!(@valid
    [63 62 61 60 59 58 57 56 55 54 53 52 51 50 49 48 47 46 45 44 43 42 41 40 39 38 37 36 35 34 33 32
     31 30 29 28 27 26 25 24 23 22 21 20 19 18 17 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1 0]
    [] []
    [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
     33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64]
);
field_types!(@invalid
    [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
     32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
);

/// Width of field `hi:lo`; 1 for an invalid field, whose error is reported separately.
pub const fn field_width(hi: u32, lo: u32) -> u32 {
    if lo <= hi && hi < 64 {
        hi - lo + 1
    } else {
        1
    }
}

/// Mask of field `hi:lo` in a 64-bit word; 0 for an invalid field.
pub const fn field_mask(hi: u32, lo: u32) -> u64 {
    if lo <= hi && hi < 64 {
        (u64::MAX >> (63 - hi)) & (u64::MAX << lo)
    } else {
        0
    }
}

/// Shift of field `hi:lo`; 0 for an invalid field (so that the accessors still type-check
/// while the declaration's error is reported).
pub const fn field_shift(hi: u32, lo: u32) -> u32 {
    if lo <= hi && hi < 64 {
        lo
    } else {
        0
    }
}

/// A message built by the constant evaluator, for a `panic!("{}", msg.as_str())`.
pub struct Msg {
    buf: [u8; 320],
    len: usize,
}

impl Msg {
    /// An empty message.
    pub const fn new() -> Self {
        Msg {
            buf: [0; 320],
            len: 0,
        }
    }

    /// Appends `s` (truncated if the message is full).
    pub const fn s(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() && self.len < self.buf.len() {
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// Appends `n` in decimal, or in hexadecimal with a `0x` prefix.
    pub const fn n(mut self, n: u64, hex: bool) -> Self {
        let base = if hex { 16 } else { 10 };
        if hex {
            self = self.s("0x");
        }
        let mut digits = [0u8; 20];
        let mut count = 0;
        let mut v = n;
        loop {
            let d = (v % base) as u8;
            digits[count] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
            count += 1;
            v /= base;
            if v == 0 {
                break;
            }
        }
        while count > 0 && self.len < self.buf.len() {
            count -= 1;
            self.buf[self.len] = digits[count];
            self.len += 1;
        }
        self
    }

    /// The message so far.
    pub const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.buf.split_at(self.len).0) {
            Ok(s) => s,
            Err(_) => "invalid register declaration",
        }
    }
}

impl Default for Msg {
    fn default() -> Self {
        Self::new()
    }
}

/// Starts the message of an error in field `field` (`hi:lo`) of register `reg`.
const fn field_msg(reg: &str, field: &str, hi: u32, lo: u32) -> Msg {
    Msg::new()
        .s("register `")
        .s(reg)
        .s("`: field `")
        .s(field)
        .s("` (")
        .n(hi as u64, false)
        .s(":")
        .n(lo as u64, false)
        .s(")")
}

/// Checks the fields of register `reg` of storage `store` (`bits` wide): each field has
/// `lo <= hi`, lies inside the storage, and overlaps no other field.
///
/// # Panics
///
/// With a message naming the register and the field.
const fn check_fields(reg: &str, store: &str, bits: u32, fields: &[(u32, u32, &str, &str)]) {
    let mut used: u64 = 0;
    let mut i = 0;
    while i < fields.len() {
        let (hi, lo, name, _) = fields[i];
        if lo > hi {
            let m = field_msg(reg, name, hi, lo).s(" has lo > hi");
            panic!("{}", m.as_str());
        }
        if hi >= bits {
            let m = field_msg(reg, name, hi, lo)
                .s(" does not fit in the storage type `")
                .s(store)
                .s("`");
            panic!("{}", m.as_str());
        }
        let mask = field_mask(hi, lo);
        if used & mask != 0 {
            let mut j = 0;
            while j < i && field_mask(fields[j].0, fields[j].1) & mask == 0 {
                j += 1;
            }
            let m = field_msg(reg, name, hi, lo)
                .s(" overlaps field `")
                .s(fields[j].2)
                .s("`, declared before it");
            panic!("{}", m.as_str());
        }
        used |= mask;
        i += 1;
    }
}

/// Checks a register declaration: its fields (see `check_fields`, `bits` is the width of the
/// storage), then its location (see `check_location`). The macro calls it in one constant per
/// register, next to the declaration.
///
/// # Panics
///
/// At build time, with a message naming the register (and the field).
pub const fn check_register(
    layout: Layout,
    bits: u32,
    offset: usize,
    array: Option<(usize, usize)>,
) {
    check_fields(layout.name, layout.store, bits, layout.fields);
    check_location(
        layout.name,
        layout.store,
        (bits / 8) as usize,
        offset,
        array,
    );
}

/// Checks the location of register `reg` of a `size`-byte storage type `store`: `offset` (from
/// the base, for relative registers) is a multiple of `size`; for arrays (`count` elements
/// `stride` bytes apart; `count == 0` for a single register), the array is not empty and the
/// stride is at least `size` and a multiple of it.
///
/// # Panics
///
/// With a message naming the register.
const fn check_location(
    reg: &str,
    store: &str,
    size: usize,
    offset: usize,
    array: Option<(usize, usize)>,
) {
    if !offset.is_multiple_of(size) {
        let m = Msg::new()
            .s("register `")
            .s(reg)
            .s("` is at offset ")
            .n(offset as u64, true)
            .s(", which is not a multiple of the size of its storage type `")
            .s(store)
            .s("` (")
            .n(size as u64, false)
            .s(" bytes)");
        panic!("{}", m.as_str());
    }
    if let Some((count, stride)) = array {
        if count == 0 {
            let m = Msg::new().s("register array `").s(reg).s("` is empty");
            panic!("{}", m.as_str());
        }
        if stride < size || !stride.is_multiple_of(size) {
            let m = Msg::new()
                .s("register array `")
                .s(reg)
                .s("` has a stride of ")
                .n(stride as u64, false)
                .s(" bytes: it must be at least, and a multiple of, the size of its storage type `")
                .s(store)
                .s("` (")
                .n(size as u64, false)
                .s(" bytes)");
            panic!("{}", m.as_str());
        }
    }
}

/// Checks that the constant `value` given to `with_const_FIELD` fits in the field of the
/// register of `layout` whose lowest bit is `lo`.
///
/// # Panics
///
/// At build time (the setter calls it in a constant), with a message naming the register and
/// the field.
pub const fn check_const(layout: Layout, lo: u32, value: u64) {
    let reg = layout.name;
    let mut i = 0;
    while i < layout.fields.len() && layout.fields[i].1 != lo {
        i += 1;
    }
    if i == layout.fields.len() {
        // Not reached: every field's setter passes its own `lo`.
        return;
    }
    let (hi, _, field, _) = layout.fields[i];
    let max = field_mask(hi, lo) >> field_shift(hi, lo);
    if value > max {
        let m = Msg::new()
            .s("constant ")
            .n(value, false)
            .s(" is too wide for field `")
            .s(field)
            .s("` of register `")
            .s(reg)
            .s("` (")
            .n(field_width(hi, lo) as u64, false)
            .s(" bits, at most ")
            .n(max, false)
            .s(")");
        panic!("{}", m.as_str());
    }
}

/// Checks that the constant index `index` aliased by register `reg` is inside array `array` of
/// `size` elements.
///
/// # Panics
///
/// At build time, with a message naming both registers.
pub const fn check_alias_index(reg: &str, array: &str, index: usize, size: usize) {
    if index >= size {
        let m = Msg::new()
            .s("register `")
            .s(reg)
            .s("` aliases element ")
            .n(index as u64, false)
            .s(" of array `")
            .s(array)
            .s("`, which has ")
            .n(size as u64, false)
            .s(" elements");
        panic!("{}", m.as_str());
    }
}

/// Checks the values of an enum declared with `bounded_enum!` (`width` bits): each fits, none
/// repeats, and if `total`, they name every value of the field.
///
/// # Panics
///
/// At build time, with a message naming the enum.
pub const fn check_enum(name: &str, width: u32, values: &[u64], total: bool) {
    let max = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let mut i = 0;
    while i < values.len() {
        if values[i] > max {
            let m = Msg::new()
                .s("enum `")
                .s(name)
                .s("`: value ")
                .n(values[i], true)
                .s(" does not fit in ")
                .n(width as u64, false)
                .s(" bits");
            panic!("{}", m.as_str());
        }
        let mut j = 0;
        while j < i {
            if values[j] == values[i] {
                let m = Msg::new()
                    .s("enum `")
                    .s(name)
                    .s("`: value ")
                    .n(values[i], true)
                    .s(" is named twice");
                panic!("{}", m.as_str());
            }
            j += 1;
        }
        i += 1;
    }
    if total && (width >= 64 || values.len() as u64 != max + 1) {
        let m = Msg::new()
            .s("enum `")
            .s(name)
            .s("`: `=>` needs a variant for each of the ")
            .n(max.wrapping_add(1), false)
            .s(" values of the field (")
            .n(values.len() as u64, false)
            .s(" given); use `?=>` for an enum that names some of them");
        panic!("{}", m.as_str());
    }
}

/// Checks the constant index `index` of an element of array `reg` of `size` elements.
///
/// # Panics
///
/// At build time (`at_const` calls it in a constant), with a message naming the array.
pub const fn check_const_index(reg: &str, index: usize, size: usize) {
    if index >= size {
        let m = Msg::new()
            .s("register array `")
            .s(reg)
            .s("`: constant index ")
            .n(index as u64, false)
            .s(" is out of range (")
            .n(size as u64, false)
            .s(" elements)");
        panic!("{}", m.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::{field_mask, field_width, paste, Bounded, Integer};
    use core::marker::PhantomData;

    /// The width `N` of a `Bounded` type.
    fn width<S: Integer, const N: u32>(_: PhantomData<Bounded<S, N>>) -> u32 {
        N
    }

    /// `(hi, lo, width of F{hi}_{lo}, M{hi}_{lo}, R{hi}_{lo})` for each `lo` of the list and the
    /// given `hi`.
    macro_rules! row {
        ($hi:tt [$($lo:tt)*]) => {
            paste! {
                [$((
                    $hi,
                    $lo,
                    width(PhantomData::<super::[<F $hi _ $lo>]<u64>>),
                    super::[<M $hi _ $lo>],
                    super::[<R $hi _ $lo>],
                )),*]
            }
        };
    }

    /// `F{hi}_{lo}` is `Bounded<S, field_width(hi, lo)>`, `M{hi}_{lo}` is `field_mask(hi, lo)`
    /// and `R{hi}_{lo}` is `lo..=hi` (empty where `lo > hi`), for all 4096 pairs below 64.
    #[test]
    fn field_table_matches_field_width_and_mask() {
        macro_rules! all {
            ([$($hi:tt)*] $los:tt) => { [$(row!($hi $los)),*] };
        }
        let table = all!(
            [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
             32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
             61 62 63]
            [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
             32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
             61 62 63]
        );
        let mut checked = 0;
        for (hi, row) in table.iter().enumerate() {
            for (lo, (h, l, w, m, r)) in row.iter().cloned().enumerate() {
                assert_eq!((h, l), (hi as u32, lo as u32));
                assert_eq!(w, field_width(h, l), "F{h}_{l}");
                assert_eq!(m, field_mask(h, l), "M{h}_{l}");
                if l <= h {
                    assert_eq!(r, (l as u8)..=(h as u8), "R{h}_{l}");
                } else {
                    assert!(r.is_empty(), "R{h}_{l}");
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 64 * 64);
    }
}
