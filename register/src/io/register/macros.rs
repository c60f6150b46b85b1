// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The `register!` macro.

/// Declares register types: their fields, their location, and their accessors.
///
/// See the [module documentation](crate::io::register) for the concepts and the
/// [crate documentation](crate) for a complete example. Each invocation declares any number of
/// registers, each of the form
///
/// ```text
/// /// Documentation and attributes (optional).
/// VIS NAME(STORAGE) LOCATION {
///     /// Field documentation (optional).
///     HI:LO field;                 // a `Bounded<STORAGE, HI - LO + 1>`
///     HI:LO field => Type;         // converted with `From` both ways
///     HI:LO field ?=> Type;        // read with `TryFrom`, written with `From`
/// }
/// ```
///
/// with `STORAGE` one of `u8`, `u16`, `u32`, `u64`, and `LOCATION` one of
///
/// | form | meaning |
/// | --- | --- |
/// | `@ 0x100` | fixed offset |
/// | `=> OTHER` | same offset as fixed register `OTHER`, other fields |
/// | `@ Base + 0x10` | offset from any base implementing [`RegisterBase<Base>`] |
/// | `=> Base + OTHER` | alias of relative register `OTHER` |
/// | `[N] @ 0x80`, `[N ; STRIDE] @ 0x80`, `[N, stride = STRIDE] @ 0x80` | array of `N` registers |
/// | `=> ARRAY[i]` | fixed register aliasing element `i` (a constant) of `ARRAY` |
/// | `[N] @ Base + 0x80` (and strides) | relative array |
/// | `=> Base + ARRAY[i]` | relative register aliasing element `i` of relative array `ARRAY` |
///
/// # Generated items
///
/// For a register `REG` of storage `S`:
///
/// - `struct REG` (with `#[allow(non_camel_case_types)]`, as register names are in capitals),
///   `#[repr(transparent)]` over `S`, `Clone`, `Copy`, `PartialEq`, `Eq`,
///   [`Zeroable`](pin_init::Zeroable), `Debug` (raw value in hex and every field), `From<S>` and
///   `From<REG> for S`, `REG::zeroed()`, `from_raw`, `as_raw`, `into_raw`;
/// - `REG::OFFSET` and, for arrays, `REG::SIZE` and `REG::STRIDE`, plus the traits of
///   [`crate::io::register`] that give the Linux 7.2 style accessors: `io.read(REG)`,
///   `io.write_reg(v)`, `io.update(REG, f)`, `REG::at(i)`, `REG::of::<B>()`, `io.try_read(..)`;
/// - for a fixed register, a constant `REG` holding its location;
/// - `read`, `write`, `update` in the style of the first kernel series (`REG::read(&io)`,
///   `v.write(&io)`, `REG::update(&io, f)`; relative registers take `&base` after `io`, arrays an
///   index), and for arrays `try_read`, `try_write`, `try_update` returning
///   [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange) (`EINVAL`) for a bad index. As in
///   that series, `io` is anything that dereferences to the I/O region (the kernel passed its
///   `Devres` guard of a PCI BAR): with a region `bar` at hand, write `REG::read(&&bar)`, or keep
///   a reference `let bar = &region;` and write `REG::read(&bar)`;
/// - per field `x`: constants `X_RANGE`, `X_MASK`, `X_SHIFT`; the getter `x()`; the setters
///   `with_x(v)` and `set_x(v)` (the first-series name; both return the new value and leave
///   `self` unchanged); for unconverted fields also `with_const_x::<V>()` (checked at build time,
///   `const`), and `try_with_x(v)`/`try_set_x(v)` taking any integer and returning
///   [`Error::ValueTooWide`](crate::Error::ValueTooWide) (`EOVERFLOW`) if it does not fit.
///
/// Every accessor that returns a value is `#[must_use]`: `reg.set_x(v);` as a statement warns
/// (`unused_must_use`), since it changes nothing (write `reg = reg.set_x(v);`).
///
/// Field names must not start with `with_`, `set_`, `try_`, `__`, and must not be one of the
/// names of the generated functions above. Fields converted to an enum (`=> Enum`, `?=> Enum`)
/// need `From`/`TryFrom` conversions with the field's `Bounded` type: declare the enum with
/// [`bounded_enum!`](crate::bounded_enum!) to get them.
///
/// # Setter arguments
///
/// `with_x(v)`/`set_x(v)` of a plain field take the field's `Bounded<S, W>`, or a `bool` or
/// unsigned integer whose every value fits in `W` bits (`u8` for fields of 8 bits or more, `u16`
/// for 16 bits or more, ...). An unsuffixed integer literal gets its type from the field only
/// where exactly one such integer exists (fields of 8 to 15 bits: `u8`). Elsewhere, and for any
/// value that may not fit, the compiler rejects the call with a message that names the two
/// spellings which check the value: `with_const_x::<V>()` for a constant (a build error if it
/// does not fit) and `try_with_x(v)` for a value known only at run time
/// (`tests/ui/fail/setter_literal_needs_const.rs`).
///
/// # Build-time checks
///
/// Evaluated where the register is declared, so reported by `cargo check` (and an editor), at
/// the declaration, with a message naming the register and the field:
///
/// - a field with `lo > hi`, a field past the width of the storage, two overlapping fields;
/// - an offset (from the base, for relative registers) that is not a multiple of the storage's
///   size, an empty array, an array stride smaller than the storage or not a multiple of it;
/// - an alias of an out-of-range array element.
///
/// Checked where the register is used, so reported by `cargo build` only (they depend on the
/// caller's generic arguments): a constant too wide for its field in `with_const_x::<V>()` (the
/// message names register and field, a note points at the call), a constant index out of range
/// in `at_const::<I>()`, and a register that does not fit in the build-time size of the region
/// it is accessed through (the message names the register).
///
/// # Examples
///
/// ```
/// use register::{io::{Io, MemRegion}, register};
///
/// register! {
///     @first_series
///     /// Interrupt mask.
///     pub IRQ_MASK(u16) @ 0x20 {
///         /// Job interrupts.
///         15:8 jobs;
///         /// GPU fault.
///         0:0 fault => bool;
///     }
/// }
///
/// let io = MemRegion::<0x40>::new();
/// IRQ_MASK::zeroed().set_fault(true).set_jobs(0xffu8).write(&&io);
/// assert_eq!(io.read16(0x20), 0xff01);
/// assert!(IRQ_MASK::read(&&io).fault());
/// assert_eq!(IRQ_MASK::JOBS_MASK, 0xff00);
/// assert!(IRQ_MASK::zeroed().try_set_jobs(0x100u32).is_err());
/// ```
///
/// [`RegisterBase<Base>`]: crate::io::register::RegisterBase
#[macro_export]
macro_rules! register {
    // ---------------------------------------------------------------------------------------
    // One register per `@reg` rule. These are also the entry points for wrapper macros.
    // ---------------------------------------------------------------------------------------

    // Fixed offset.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) @ $off:literal
            { $($fields:tt)* }
    ) => {
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(@io_base $vis $name($store) @ $off; ::core::option::Option::None);
        $crate::register!(@io_fixed [$($m)*] $vis $name($store));
    };

    // Alias of a fixed register.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) => $aliased:ident
            { $($fields:tt)* }
    ) => {
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(
            @io_base $vis $name($store) @ <$aliased as $crate::__private::reg::Register>::OFFSET;
                ::core::option::Option::None
        );
        $crate::register!(@io_fixed [$($m)*] $vis $name($store));
    };

    // Relative to a base.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) @ $family:ident + $off:literal
            { $($fields:tt)* }
    ) => {
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(@io_base $vis $name($store) @ $off; ::core::option::Option::None);
        $crate::register!(@io_relative [$($m)*] $vis $name($store) @ $family);
    };

    // Alias of a relative register.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) => $family:ident + $aliased:ident
            { $($fields:tt)* }
    ) => {
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(
            @io_base $vis $name($store) @ <$aliased as $crate::__private::reg::Register>::OFFSET;
                ::core::option::Option::None
        );
        $crate::register!(@io_relative [$($m)*] $vis $name($store) @ $family);
    };

    // Arrays: the mainline stride syntax, and no stride (contiguous), become `[size ; stride]`.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty)
            [ $count:expr, stride = $step:expr ] $($rest:tt)*
    ) => {
        $crate::register!(
            @reg [$($m)*] $(#[$meta])* $vis $name($store) [ $count ; $step ] $($rest)*
        );
    };
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) [ $count:expr ] $($rest:tt)*
    ) => {
        $crate::register!(
            @reg [$($m)*] $(#[$meta])* $vis $name($store)
                [ $count ; ::core::mem::size_of::<$store>() ] $($rest)*
        );
    };

    // Array at a fixed offset.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty)
            [ $count:expr ; $step:expr ] @ $off:literal { $($fields:tt)* }
    ) => {
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(
            @io_base $vis $name($store) @ $off; ::core::option::Option::Some(($count, $step))
        );
        $crate::register!(@io_array [$($m)*] $vis $name($store) [ $count ; $step ]);
    };

    // Alias of an element of an array.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) => $aliased:ident [ $index:expr ]
            { $($fields:tt)* }
    ) => {
        $crate::register!(@alias_index $name $aliased [ $index ]);
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(
            @io_base $vis $name($store) @
                <$aliased as $crate::__private::reg::Register>::OFFSET
                    + $index * <$aliased as $crate::__private::reg::RegisterArray>::STRIDE;
                ::core::option::Option::None
        );
        $crate::register!(@io_fixed [$($m)*] $vis $name($store));
    };

    // Array relative to a base.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty)
            [ $count:expr ; $step:expr ] @ $family:ident + $off:literal { $($fields:tt)* }
    ) => {
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(
            @io_base $vis $name($store) @ $off; ::core::option::Option::Some(($count, $step))
        );
        $crate::register!(@io_relative_array [$($m)*] $vis $name($store) [ $count ; $step ] @ $family);
    };

    // Alias of an element of a relative array.
    (
        @reg [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty)
            => $family:ident + $aliased:ident [ $index:expr ] { $($fields:tt)* }
    ) => {
        $crate::register!(@alias_index $name $aliased [ $index ]);
        $crate::register!(@bitfield [$($m)*] $(#[$meta])* $vis $name($store) { $($fields)* });
        $crate::register!(
            @io_base $vis $name($store) @
                <$aliased as $crate::__private::reg::Register>::OFFSET
                    + $index * <$aliased as $crate::__private::reg::RegisterArray>::STRIDE;
                ::core::option::Option::None
        );
        $crate::register!(@io_relative [$($m)*] $vis $name($store) @ $family);
    };

    // A register without a mode: only the Linux 7.2 accessors. (Wrapper macros write
    // `@reg [first_series] ...` for the first-series ones too.)
    (@reg $(#[$meta:meta])* $vis:vis $name:ident $($rest:tt)*) => {
        $crate::register!(@reg [] $(#[$meta])* $vis $name $($rest)*);
    };

    // ---------------------------------------------------------------------------------------
    // Building blocks.
    // ---------------------------------------------------------------------------------------

    // Items of the first-series style, emitted only on request.
    (@first_series [] $($items:tt)*) => {};
    (@first_series [first_series] $($items:tt)*) => { $($items)* };

    (@alias_index $name:ident $aliased:ident [ $index:expr ]) => {
        const _: () = $crate::__private::check_alias_index(
            ::core::stringify!($name),
            ::core::stringify!($aliased),
            $index,
            <$aliased as $crate::__private::reg::RegisterArray>::SIZE,
        );
    };

    // The type, its conversions and its fields.
    (@bitfield [$($m:tt)*] $(#[$meta:meta])* $vis:vis $name:ident ($store:ty) { $($fields:tt)* }) => {
        $(#[$meta])*
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(transparent)]
        $vis struct $name {
            inner: $store,
        }

        // Written out rather than derived: the same items, without the derive macros' work.
        impl ::core::clone::Clone for $name {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }

        impl ::core::marker::Copy for $name {}

        impl ::core::cmp::PartialEq for $name {
            #[inline(always)]
            fn eq(&self, other: &Self) -> bool {
                self.inner == other.inner
            }
        }

        impl ::core::cmp::Eq for $name {}

        // SAFETY: `$name` is a `repr(transparent)` wrapper of an integer, for which all zeroes is
        // a valid value.
        unsafe impl $crate::__private::pin_init::Zeroable for $name {}

        #[allow(dead_code)]
        impl $name {
            /// Returns the register value with every bit cleared.
            #[must_use]
            #[inline(always)]
            $vis const fn zeroed() -> Self {
                Self { inner: 0 }
            }

            /// Returns the register value whose raw bits are `value`.
            #[must_use]
            #[inline(always)]
            $vis const fn from_raw(value: $store) -> Self {
                Self { inner: value }
            }

            /// Returns the raw bits of the register value.
            #[must_use]
            #[inline(always)]
            $vis const fn as_raw(self) -> $store {
                self.inner
            }

            /// Returns the raw bits of the register value.
            #[must_use]
            #[inline(always)]
            $vis const fn into_raw(self) -> $store {
                self.inner
            }
        }

        impl ::core::convert::From<$name> for $store {
            #[inline(always)]
            fn from(value: $name) -> $store {
                value.inner
            }
        }

        impl ::core::convert::From<$store> for $name {
            #[inline(always)]
            fn from(value: $store) -> $name {
                $name { inner: value }
            }
        }

        $crate::register!(@fields [$($m)*] $vis $name $store { $($fields)* });
    };

    // Layout check, `Debug`, and the fields' accessors. `paste!` sees only the names it builds
    // (and what they are passed with), not the accessors' bodies: those come from
    // `__register_field!`, once per field.
    (
        @fields $mode:tt $vis:vis $name:ident $store:ty {
            $(
                $(#[$fattr:meta])*
                $hi:literal : $lo:literal $field:ident
                    $(?=> $try_ty:ty)?
                    $(=> $into_ty:ty)?
                ;
            )*
        }
    ) => {
        $crate::__private::paste! {
            $(
                #[doc(hidden)]
                #[allow(non_camel_case_types, dead_code)]
                type [<__ $name __ $field>] = $crate::__private::bounded::Bounded<
                    $store, { $crate::__private::field_width($hi, $lo) }
                >;
            )*

            // Plain fields are printed from the table of fields, converted ones through their
            // getter.
            impl ::core::fmt::Debug for $name {
                #[allow(clippy::cast_lossless)]
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    $crate::__private::debug_register(
                        f,
                        &Self::__LAYOUT,
                        self.inner as u64,
                        &[$($crate::__register_field!(
                            @debug self $field ($(?=> $try_ty)? $(=> $into_ty)?)
                        )),*],
                    )
                }
            }

            #[allow(dead_code, clippy::unnecessary_cast)]
            impl $name {
                /// Names and fields, for the build-time checks and `Debug`.
                #[doc(hidden)]
                const __LAYOUT: $crate::__private::Layout = $crate::__private::Layout {
                    name: ::core::stringify!($name),
                    store: ::core::stringify!($store),
                    fields: &[$(($hi, $lo, ::core::stringify!($field))),*],
                };

                $(
                    $crate::__register_field!(
                        $mode [$vis $name $store] [$(#[$fattr])*] $hi $lo $field [<__ $name __ $field>]
                        [<$field:upper _RANGE>] [<$field:upper _MASK>] [<$field:upper _SHIFT>]
                        [<with_ $field>] [<set_ $field>] [<with_const_ $field>]
                        [<try_with_ $field>] [<try_set_ $field>]
                        ($(?=> $try_ty)? $(=> $into_ty)?)
                    );
                )*
            }
        }
    };

    // Register trait and location checks, for every kind.
    (@io_base $vis:vis $name:ident ($store:ty) @ $off:expr; $array:expr) => {
        const _: () = $crate::__private::check_register(
            &$name::__LAYOUT,
            <$store>::BITS,
            $off,
            $array,
        );

        impl $crate::__private::reg::Register for $name {
            type Storage = $store;
            const OFFSET: usize = $off;
            const NAME: &'static str = ::core::stringify!($name);
        }

        #[allow(dead_code)]
        impl $name {
            /// Offset of the register (of its first element for arrays, from its base for
            /// relative registers).
            $vis const OFFSET: usize = $off;
        }
    };

    // Fixed registers (and aliases resolving to a fixed offset).
    (@io_fixed [$($m:tt)*] $vis:vis $name:ident ($store:ty)) => {
        impl $crate::__private::reg::FixedRegister for $name {}

        #[doc = ::core::concat!("Location of register [`", ::core::stringify!($name), "`].")]
        #[allow(non_upper_case_globals, dead_code)]
        $vis const $name: $crate::__private::reg::FixedRegisterLoc<$name> =
            $crate::__private::reg::FixedRegisterLoc::new();

        $crate::register!(@first_series [$($m)*]
        #[allow(dead_code)]
        impl $name {
            /// Reads the register from `io` (first-series style: `io` is anything that
            /// dereferences to the I/O region, such as a `&&region` or the kernel's
            /// `Devres` guard).
            #[must_use]
            #[inline(always)]
            $vis fn read<D, I>(io: &D) -> Self
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
            {
                $crate::io::Io::read(&**io, $crate::__private::reg::FixedRegisterLoc::<Self>::new())
            }

            /// Writes the value to the register in `io`.
            #[inline(always)]
            $vis fn write<D, I>(self, io: &D)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
            {
                $crate::io::Io::write(
                    &**io, $crate::__private::reg::FixedRegisterLoc::<Self>::new(), self
                )
            }

            /// Reads the register from `io`, passes it to `f` and writes the result back (two
            /// separate accesses).
            #[inline(always)]
            $vis fn update<D, I, U>(io: &D, f: U)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                U: ::core::ops::FnOnce(Self) -> Self,
            {
                $crate::io::Io::update(&**io, $crate::__private::reg::FixedRegisterLoc::<Self>::new(), f)
            }
        }
        );
    };
    // Relative registers.
    (@io_relative [$($m:tt)*] $vis:vis $name:ident ($store:ty) @ $family:ident) => {
        impl $crate::__private::reg::WithBase for $name {
            type BaseFamily = $family;
        }

        impl $crate::__private::reg::RelativeRegister for $name {}

        #[allow(dead_code)]
        impl $name {
            /// Returns the location of the register relative to base `B`.
            #[must_use]
            #[inline(always)]
            $vis const fn of<B: $crate::__private::reg::RegisterBase<$family>>(
            ) -> $crate::__private::reg::RelativeRegisterLoc<Self, B> {
                $crate::__private::reg::RelativeRegisterLoc::new()
            }

            $crate::register!(@first_series [$($m)*]
            /// Reads the register relative to `base` from `io`.
            #[must_use]
            #[inline(always)]
            $vis fn read<D, I, B>(io: &D, _base: &B) -> Self
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
            {
                $crate::io::Io::read(&**io, Self::of::<B>())
            }

            /// Writes the value to the register relative to `base` in `io`.
            #[inline(always)]
            $vis fn write<D, I, B>(self, io: &D, _base: &B)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
            {
                $crate::io::Io::write(&**io, Self::of::<B>(), self)
            }

            /// Reads the register relative to `base`, passes it to `f` and writes the result
            /// back (two separate accesses).
            #[inline(always)]
            $vis fn update<D, I, B, U>(io: &D, _base: &B, f: U)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
                U: ::core::ops::FnOnce(Self) -> Self,
            {
                $crate::io::Io::update(&**io, Self::of::<B>(), f)
            }
            );
        }
    };

    // Arrays at a fixed offset.
    (@io_array [$($m:tt)*] $vis:vis $name:ident ($store:ty) [ $count:expr ; $step:expr ]) => {
        $crate::register!(@array_consts $vis $name ($store) [ $count ; $step ]);

        impl $crate::__private::reg::Array for $name {}

        #[allow(dead_code)]
        impl $name {
            /// Returns the location of element `idx`.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range.
            #[must_use]
            #[inline(always)]
            #[track_caller]
            $vis fn at(idx: usize) -> $crate::__private::reg::RegisterArrayLoc<Self> {
                $crate::__private::reg::RegisterArrayLoc::new(idx)
            }

            /// Returns the location of element `IDX`, checked at build time.
            #[must_use]
            #[inline(always)]
            $vis const fn at_const<const IDX: usize>() -> $crate::__private::reg::RegisterArrayLoc<Self> {
                $crate::__private::reg::RegisterArrayLoc::new_const::<IDX>()
            }

            /// Returns the location of element `idx`, or `None` if it is out of range.
            #[must_use]
            #[inline(always)]
            $vis fn try_at(idx: usize) -> ::core::option::Option<
                $crate::__private::reg::RegisterArrayLoc<Self>
            > {
                $crate::__private::reg::RegisterArrayLoc::try_new(idx)
            }

            $crate::register!(@first_series [$($m)*]
            /// Reads element `idx` from `io`.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range (use [`Self::try_read`] for run-time indices).
            #[must_use]
            #[inline(always)]
            #[track_caller]
            $vis fn read<D, I>(io: &D, idx: usize) -> Self
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
            {
                $crate::io::Io::read(&**io, Self::at(idx))
            }

            /// Writes the value to element `idx` in `io`.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range (use [`Self::try_write`] for run-time indices).
            #[inline(always)]
            #[track_caller]
            $vis fn write<D, I>(self, io: &D, idx: usize)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
            {
                $crate::io::Io::write(&**io, Self::at(idx), self)
            }

            /// Reads element `idx`, passes it to `f` and writes the result back.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range (use [`Self::try_update`] for run-time indices).
            #[inline(always)]
            #[track_caller]
            $vis fn update<D, I, U>(io: &D, idx: usize, f: U)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                U: ::core::ops::FnOnce(Self) -> Self,
            {
                $crate::io::Io::update(&**io, Self::at(idx), f)
            }

            /// Reads element `idx` from `io`, or returns
            /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
            #[inline(always)]
            $vis fn try_read<D, I>(io: &D, idx: usize) -> ::core::result::Result<Self, $crate::Error>
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
            {
                match Self::try_at(idx) {
                    ::core::option::Option::Some(loc) => {
                        ::core::result::Result::Ok($crate::io::Io::read(&**io, loc))
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Err($crate::Error::IndexOutOfRange)
                    }
                }
            }

            /// Writes the value to element `idx` in `io`, or returns
            /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
            #[inline(always)]
            $vis fn try_write<D, I>(
                self,
                io: &D,
                idx: usize,
            ) -> ::core::result::Result<(), $crate::Error>
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
            {
                match Self::try_at(idx) {
                    ::core::option::Option::Some(loc) => {
                        ::core::result::Result::Ok($crate::io::Io::write(&**io, loc, self))
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Err($crate::Error::IndexOutOfRange)
                    }
                }
            }

            /// Updates element `idx` in `io` with `f`, or returns
            /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
            #[inline(always)]
            $vis fn try_update<D, I, U>(
                io: &D,
                idx: usize,
                f: U,
            ) -> ::core::result::Result<(), $crate::Error>
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                U: ::core::ops::FnOnce(Self) -> Self,
            {
                match Self::try_at(idx) {
                    ::core::option::Option::Some(loc) => {
                        ::core::result::Result::Ok($crate::io::Io::update(&**io, loc, f))
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Err($crate::Error::IndexOutOfRange)
                    }
                }
            }
            );
        }
    };

    // Arrays relative to a base.
    (@io_relative_array [$($m:tt)*] $vis:vis $name:ident ($store:ty) [ $count:expr ; $step:expr ]
        @ $family:ident) => {
        $crate::register!(@array_consts $vis $name ($store) [ $count ; $step ]);

        impl $crate::__private::reg::WithBase for $name {
            type BaseFamily = $family;
        }

        impl $crate::__private::reg::RelativeRegisterArray for $name {}

        #[allow(dead_code)]
        impl $name {
            /// Returns the location of the array relative to base `B`; pick an element with
            /// `at`.
            #[must_use]
            #[inline(always)]
            $vis const fn of<B: $crate::__private::reg::RegisterBase<$family>>(
            ) -> $crate::__private::reg::RelativeRegisterLoc<Self, B> {
                $crate::__private::reg::RelativeRegisterLoc::new()
            }

            $crate::register!(@first_series [$($m)*]
            /// Reads element `idx` of the array relative to `base` from `io`.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range (use [`Self::try_read`] for run-time indices).
            #[must_use]
            #[inline(always)]
            #[track_caller]
            $vis fn read<D, I, B>(io: &D, _base: &B, idx: usize) -> Self
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
            {
                $crate::io::Io::read(&**io, Self::of::<B>().at(idx))
            }

            /// Writes the value to element `idx` of the array relative to `base` in `io`.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range (use [`Self::try_write`] for run-time indices).
            #[inline(always)]
            #[track_caller]
            $vis fn write<D, I, B>(self, io: &D, _base: &B, idx: usize)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
            {
                $crate::io::Io::write(&**io, Self::of::<B>().at(idx), self)
            }

            /// Reads element `idx` relative to `base`, passes it to `f` and writes the result
            /// back.
            ///
            /// # Panics
            ///
            /// If `idx` is out of range (use [`Self::try_update`] for run-time indices).
            #[inline(always)]
            #[track_caller]
            $vis fn update<D, I, B, U>(io: &D, _base: &B, idx: usize, f: U)
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
                U: ::core::ops::FnOnce(Self) -> Self,
            {
                $crate::io::Io::update(&**io, Self::of::<B>().at(idx), f)
            }

            /// Reads element `idx` relative to `base`, or returns
            /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
            #[inline(always)]
            $vis fn try_read<D, I, B>(
                io: &D,
                _base: &B,
                idx: usize,
            ) -> ::core::result::Result<Self, $crate::Error>
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
            {
                match Self::of::<B>().try_at(idx) {
                    ::core::option::Option::Some(loc) => {
                        ::core::result::Result::Ok($crate::io::Io::read(&**io, loc))
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Err($crate::Error::IndexOutOfRange)
                    }
                }
            }

            /// Writes the value to element `idx` relative to `base`, or returns
            /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
            #[inline(always)]
            $vis fn try_write<D, I, B>(
                self,
                io: &D,
                _base: &B,
                idx: usize,
            ) -> ::core::result::Result<(), $crate::Error>
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
            {
                match Self::of::<B>().try_at(idx) {
                    ::core::option::Option::Some(loc) => {
                        ::core::result::Result::Ok($crate::io::Io::write(&**io, loc, self))
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Err($crate::Error::IndexOutOfRange)
                    }
                }
            }

            /// Updates element `idx` relative to `base` with `f`, or returns
            /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange).
            #[inline(always)]
            $vis fn try_update<D, I, B, U>(
                io: &D,
                _base: &B,
                idx: usize,
                f: U,
            ) -> ::core::result::Result<(), $crate::Error>
            where
                D: ::core::ops::Deref<Target = I>,
                I: $crate::io::IoKnownSize + $crate::io::IoCapable<$store>,
                B: $crate::__private::reg::RegisterBase<$family>,
                U: ::core::ops::FnOnce(Self) -> Self,
            {
                match Self::of::<B>().try_at(idx) {
                    ::core::option::Option::Some(loc) => {
                        ::core::result::Result::Ok($crate::io::Io::update(&**io, loc, f))
                    }
                    ::core::option::Option::None => {
                        ::core::result::Result::Err($crate::Error::IndexOutOfRange)
                    }
                }
            }
            );
        }
    };

    (@array_consts $vis:vis $name:ident ($store:ty) [ $count:expr ; $step:expr ]) => {
        impl $crate::__private::reg::RegisterArray for $name {
            const SIZE: usize = $count;
            const STRIDE: usize = $step;
        }

        #[allow(dead_code)]
        impl $name {
            /// Number of registers in the array.
            $vis const SIZE: usize = $count;
            /// Distance in bytes between two consecutive registers of the array.
            $vis const STRIDE: usize = $step;
        }
    };

    // ---------------------------------------------------------------------------------------
    // Entry points: any number of registers, with the first-series accessors on request.
    // ---------------------------------------------------------------------------------------
    (@first_series $($regs:tt)*) => {
        $crate::register!(@regs [first_series] $($regs)*);
    };
    (
        @regs $mode:tt
        $(
            $(#[$meta:meta])* $vis:vis $name:ident ($store:ty)
                $([ $count:expr $(; $step:expr)? $(, stride = $mstep:expr)? ])?
                $(@ $($family:ident +)? $off:literal)?
                $(=> $aliased:ident $(+ $alias_reg:ident)? $([$alias_index:expr])? )?
            { $($fields:tt)* }
        )*
    ) => {
        $(
            $crate::register!(
                @reg $mode $(#[$meta])* $vis $name ($store)
                    $([ $count $(; $step)? $(; $mstep)? ])?
                    $(@ $($family +)? $off)?
                    $(=> $aliased $(+ $alias_reg)? $([$alias_index])? )?
                { $($fields)* }
            );
        )*
    };
    (
        $(
            $(#[$meta:meta])* $vis:vis $name:ident ($store:ty)
                $([ $count:expr $(; $step:expr)? $(, stride = $mstep:expr)? ])?
                $(@ $($family:ident +)? $off:literal)?
                $(=> $aliased:ident $(+ $alias_reg:ident)? $([$alias_index:expr])? )?
            { $($fields:tt)* }
        )*
    ) => {
        $(
            $crate::register!(
                @reg [] $(#[$meta])* $vis $name ($store)
                    $([ $count $(; $step)? $(; $mstep)? ])?
                    $(@ $($family +)? $off)?
                    $(=> $aliased $(+ $alias_reg)? $([$alias_index])? )?
                { $($fields)* }
            );
        )*
    };
}

/// The accessors of one field; used by [`register!`](crate::register!). Not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! __register_field {
    // A plain field: a `Bounded` of the field's width.
    (
        [$($m:tt)*] [$vis:vis $name:ident $store:ty] [$(#[$fattr:meta])*] $hi:literal $lo:literal
        $field:ident $fty:ident $range:ident $mask:ident $shift:ident
        $with:ident $set:ident $with_const:ident $try_with:ident $try_set:ident ()
    ) => {
        $crate::__register_field!(@consts $vis [$store] $hi $lo $range $mask $shift);

        $(#[$fattr])*
        ///
        /// Returns the field.
        #[must_use]
        #[inline(always)]
        $vis fn $field(self) -> $fty {
            $crate::__private::get(self.inner, Self::$mask, Self::$shift)
        }

        $(#[$fattr])*
        ///
        /// Returns the register value with this field set to `value`: a `Bounded` of the
        /// field's width, or a primitive or `bool` that always fits.
        #[must_use = "this returns the new register value and leaves `self` unchanged"]
        #[inline(always)]
        $vis fn $with<T: $crate::__private::IntoField<$fty>>(self, value: T) -> Self {
            $crate::__private::with(self.inner, value, Self::$mask, Self::$shift)
        }

        $(#[$fattr])*
        ///
        /// Returns the register value with this field set to the constant `VALUE`, which is
        /// checked to fit at build time.
        #[must_use = "this returns the new register value and leaves `self` unchanged"]
        #[inline(always)]
        $vis const fn $with_const<const VALUE: $store>(self) -> Self {
            const { $crate::__private::check_const(&Self::__LAYOUT, $lo, VALUE as u64) };
            Self { inner: (self.inner & !Self::$mask) | (VALUE << Self::$shift) }
        }

        $(#[$fattr])*
        ///
        /// Returns the register value with this field set to `value`, or
        /// [`Error::ValueTooWide`](crate::Error::ValueTooWide) if it does not fit.
        #[inline(always)]
        $vis fn $try_with<T: $crate::__private::TryIntoField<$fty>>(
            self,
            value: T,
        ) -> ::core::result::Result<Self, $crate::Error> {
            $crate::__private::try_with(self.inner, value, Self::$mask, Self::$shift)
        }

        $crate::register!(@first_series [$($m)*]
            $(#[$fattr])*
            ///
            /// Returns the register value with this field set to `value` (first-series name of
            /// the `with_` setter).
            #[must_use = "this returns the new register value and leaves `self` unchanged"]
            #[inline(always)]
            $vis fn $set<T: $crate::__private::IntoField<$fty>>(self, value: T) -> Self {
                self.$with(value)
            }

            $(#[$fattr])*
            ///
            /// Returns the register value with this field set to `value`, or
            /// [`Error::ValueTooWide`](crate::Error::ValueTooWide) if it does not fit
            /// (first-series name of `try_with_`).
            #[inline(always)]
            $vis fn $try_set<T: $crate::__private::TryIntoField<$fty>>(
                self,
                value: T,
            ) -> ::core::result::Result<Self, $crate::Error> {
                self.$try_with(value)
            }
        );
    };

    // A field converted infallibly (`=> Type`).
    (
        [$($m:tt)*] [$vis:vis $name:ident $store:ty] [$(#[$fattr:meta])*] $hi:literal $lo:literal
        $field:ident $fty:ident $range:ident $mask:ident $shift:ident
        $with:ident $set:ident $with_const:ident $try_with:ident $try_set:ident (=> $ty:ty)
    ) => {
        $crate::__register_field!(@consts $vis [$store] $hi $lo $range $mask $shift);

        $(#[$fattr])*
        ///
        /// Returns the field converted with `From`.
        #[must_use]
        #[inline(always)]
        $vis fn $field(self) -> $ty {
            ::core::convert::Into::into($fty::from_expr((self.inner & Self::$mask) >> Self::$shift))
        }

        $crate::__register_field!(
            @converted_setters [$($m)*] $vis $fty [$ty] $mask $shift $with $set [$(#[$fattr])*]
        );
    };

    // A field converted fallibly (`?=> Type`).
    (
        [$($m:tt)*] [$vis:vis $name:ident $store:ty] [$(#[$fattr:meta])*] $hi:literal $lo:literal
        $field:ident $fty:ident $range:ident $mask:ident $shift:ident
        $with:ident $set:ident $with_const:ident $try_with:ident $try_set:ident (?=> $ty:ty)
    ) => {
        $crate::__register_field!(@consts $vis [$store] $hi $lo $range $mask $shift);

        $(#[$fattr])*
        ///
        /// Returns the field converted with `TryFrom`.
        #[must_use]
        #[inline(always)]
        $vis fn $field(self) -> ::core::result::Result<
            $ty,
            <$ty as ::core::convert::TryFrom<$fty>>::Error,
        > {
            ::core::convert::TryFrom::try_from(
                $fty::from_expr((self.inner & Self::$mask) >> Self::$shift)
            )
        }

        $crate::__register_field!(
            @converted_setters [$($m)*] $vis $fty [$ty] $mask $shift $with $set [$(#[$fattr])*]
        );
    };

    (@converted_setters [$($m:tt)*] $vis:vis $fty:ident [$ty:ty] $mask:ident $shift:ident
        $with:ident $set:ident [$(#[$fattr:meta])*]) => {
        $(#[$fattr])*
        ///
        /// Returns the register value with this field set to `value`.
        #[must_use = "this returns the new register value and leaves `self` unchanged"]
        #[inline(always)]
        $vis fn $with(self, value: $ty) -> Self {
            let value: $fty = ::core::convert::Into::into(value);
            Self { inner: (self.inner & !Self::$mask) | (value.get() << Self::$shift) }
        }

        $crate::register!(@first_series [$($m)*]
            $(#[$fattr])*
            ///
            /// Returns the register value with this field set to `value` (first-series name of
            /// the `with_` setter).
            #[must_use = "this returns the new register value and leaves `self` unchanged"]
            #[inline(always)]
            $vis fn $set(self, value: $ty) -> Self {
                self.$with(value)
            }
        );
    };

    // What `Debug` shows of a field: a plain field's integer (from the table of fields), a
    // converted field's value.
    (@debug $self:ident $field:ident ()) => {
        ::core::option::Option::None
    };
    (@debug $self:ident $field:ident ($($conv:tt)*)) => {
        ::core::option::Option::Some(&$self.$field() as &dyn ::core::fmt::Debug)
    };

    (@consts $vis:vis [$store:ty] $hi:literal $lo:literal $range:ident $mask:ident $shift:ident) => {
        /// Bit range of the field.
        $vis const $range: $crate::FieldBits = $lo..=$hi;
        /// Mask of the field in the register.
        $vis const $mask: $store = $crate::__private::field_mask($hi, $lo) as $store;
        /// Position of the lowest bit of the field.
        $vis const $shift: u32 = $lo;
    };
}

/// Declares an enum whose variants are the values of a register field, with the conversions
/// that `=> Enum` and `?=> Enum` fields use, so that no conversion is written by hand.
///
/// ```text
/// VIS enum NAME: Bounded<STORAGE, WIDTH> => { VARIANT = VALUE, ... }   // every value named
/// VIS enum NAME: Bounded<STORAGE, WIDTH> ?=> { VARIANT = VALUE, ... }  // some values named
/// ```
///
/// Both forms generate `From<NAME> for Bounded<STORAGE, WIDTH>` (each value is checked to fit
/// at build time). The `=>` form also generates `From<Bounded<STORAGE, WIDTH>> for NAME`, and
/// the build fails unless the variants name each of the `2^WIDTH` values exactly once; the `?=>`
/// form generates `TryFrom<Bounded<STORAGE, WIDTH>>` with [`UnknownValue`](crate::UnknownValue)
/// as its error. Values are literals; attributes (`#[derive(Debug)]`, which the register's own
/// `Debug` needs, documentation) go on the enum and its variants as usual.
///
/// # Examples
///
/// ```
/// use register::{bounded_enum, io::{Io, MemRegion}, register, UnknownValue};
///
/// bounded_enum! {
///     /// Power state of a core: every 2-bit value is one.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Power: Bounded<u32, 2> => {
///         Off = 0,
///         Starting = 1,
///         On = 2,
///         Stopping = 3,
///     }
///
///     /// Fault cause: only some 8-bit values are defined.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Cause: Bounded<u32, 8> ?=> {
///         Translation = 0xc0,
///         Permission = 0xc8,
///     }
/// }
///
/// register! {
///     @first_series
///     pub CORE_STATUS(u32) @ 0x10 {
///         15:8 cause ?=> Cause;
///         1:0 power => Power;
///     }
/// }
///
/// let io = MemRegion::<0x100>::new();
/// io.write_reg(CORE_STATUS::zeroed().with_power(Power::On).with_cause(Cause::Permission));
/// let status = io.read(CORE_STATUS);
/// assert_eq!(status.power(), Power::On);
/// assert_eq!(status.cause(), Ok(Cause::Permission));
/// assert_eq!(CORE_STATUS::from_raw(0x0100).cause(), Err(UnknownValue(1)));
/// ```
///
/// An enum that leaves a value out cannot be used with `=>`:
///
/// ```compile_fail,E0080
/// register::bounded_enum! {
///     pub enum Power: Bounded<u32, 2> => { Off = 0, On = 2 }
/// }
/// ```
#[macro_export]
macro_rules! bounded_enum {
    () => {};
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : Bounded<$store:ty, $width:literal> ?=> {
            $(#[$fmeta:meta])* $first:ident = $fvalue:literal
            $(, $(#[$vmeta:meta])* $variant:ident = $value:literal)* $(,)?
        }
        $($rest:tt)*
    ) => {
        $crate::bounded_enum!(
            @one [$(#[$meta])*] $vis $name [$store] $width ?
            [$(#[$fmeta])*] $first $fvalue
            $([$(#[$vmeta])*] $variant $value)*
        );
        $crate::bounded_enum!($($rest)*);
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : Bounded<$store:ty, $width:literal> => {
            $(#[$fmeta:meta])* $first:ident = $fvalue:literal
            $(, $(#[$vmeta:meta])* $variant:ident = $value:literal)* $(,)?
        }
        $($rest:tt)*
    ) => {
        $crate::bounded_enum!(
            @one [$(#[$meta])*] $vis $name [$store] $width =>
            [$(#[$fmeta])*] $first $fvalue
            $([$(#[$vmeta])*] $variant $value)*
        );
        $crate::bounded_enum!($($rest)*);
    };

    (
        @one [$(#[$meta:meta])*] $vis:vis $name:ident [$store:ty] $width:literal $arrow:tt
        [$(#[$fmeta:meta])*] $first:ident $fvalue:literal
        $([$(#[$vmeta:meta])*] $variant:ident $value:literal)*
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(#[$fmeta])* $first = $fvalue,
            $($(#[$vmeta])* $variant = $value,)*
        }

        const _: () = $crate::__private::check_enum(
            ::core::stringify!($name),
            $width,
            &[$fvalue $(, $value)*],
            $crate::bounded_enum!(@total $arrow),
        );

        impl ::core::convert::From<$name> for $crate::__private::bounded::Bounded<$store, $width> {
            #[inline(always)]
            fn from(value: $name) -> Self {
                match value {
                    $name::$first => Self::new::<$fvalue>(),
                    $($name::$variant => Self::new::<$value>(),)*
                }
            }
        }

        $crate::bounded_enum!(
            @back $arrow $name [$store] $width $first $fvalue $($variant $value)*
        );
    };

    (@total =>) => { true };
    (@total ?) => { false };

    // Every value is a variant: `From`. The last arm is never taken (the build checks that the
    // variants cover every value), but the match is on the integer.
    (@back => $name:ident [$store:ty] $width:literal $first:ident $fvalue:literal
        $($variant:ident $value:literal)*) => {
        impl ::core::convert::From<$crate::__private::bounded::Bounded<$store, $width>> for $name {
            #[inline(always)]
            fn from(value: $crate::__private::bounded::Bounded<$store, $width>) -> Self {
                match value.get() {
                    $($value => $name::$variant,)*
                    _ => $name::$first,
                }
            }
        }
    };

    // Some values are variants: `TryFrom`.
    (@back $arrow:tt $name:ident [$store:ty] $width:literal $first:ident $fvalue:literal
        $($variant:ident $value:literal)*) => {
        impl ::core::convert::TryFrom<$crate::__private::bounded::Bounded<$store, $width>>
            for $name
        {
            type Error = $crate::UnknownValue<$store>;

            #[inline(always)]
            fn try_from(
                value: $crate::__private::bounded::Bounded<$store, $width>,
            ) -> ::core::result::Result<Self, Self::Error> {
                match value.get() {
                    $fvalue => ::core::result::Result::Ok($name::$first),
                    $($value => ::core::result::Result::Ok($name::$variant),)*
                    other => ::core::result::Result::Err($crate::UnknownValue(other)),
                }
            }
        }
    };
}
