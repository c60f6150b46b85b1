// SPDX-License-Identifier: GPL-2.0 OR MIT

// Declaring the register is enough: no access needed for the error.

use register::register;

pub struct EngineBase;

register! {
    ENG_STATUS(u64) @ EngineBase + 0x14 { 63:0 value; }
}

fn main() {}
