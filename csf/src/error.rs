// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Why a word does not decode.

use core::fmt;

use crate::Opcode;

/// Why a 64-bit word is not an instruction Mali v10 defines.
///
/// # Examples
///
/// ```
/// use csf::{DecodeError, Instr, Opcode};
/// assert_eq!(Instr::decode(10 << 56), Err(DecodeError::UndefinedOpcode(10)));
/// // SYNC_WAIT32 with condition 2 (Equal), which SYNC_WAIT does not define.
/// let e = Instr::decode(39 << 56 | 2 << 28).unwrap_err();
/// assert_eq!(
///     e,
///     DecodeError::UndefinedField { opcode: Opcode::SyncWait32, field: "condition", value: 2 }
/// );
/// assert_eq!(e.to_string(), "SYNC_WAIT32: undefined value 2 in field `condition`");
/// assert_eq!(e.to_errno(), -22);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// Bits 63:56 hold no opcode Mali v10 defines.
    UndefinedOpcode(u8),
    /// An enumerated field of a defined instruction holds a value its enumeration lacks.
    UndefinedField {
        /// The instruction.
        opcode: Opcode,
        /// The field's name (as in the [`Instr`](crate::Instr) variant).
        field: &'static str,
        /// The field's bits.
        value: u32,
    },
}

impl DecodeError {
    /// The Linux errno for it: `-EINVAL` (the word is not a valid instruction).
    pub const fn to_errno(self) -> i32 {
        -22
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UndefinedOpcode(n) => write!(f, "undefined opcode {n}"),
            Self::UndefinedField {
                opcode,
                field,
                value,
            } => write!(f, "{opcode}: undefined value {value} in field `{field}`"),
        }
    }
}

impl core::error::Error for DecodeError {}
