// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    SCRATCH(u32)[64] @ 0x80 { 31:0 value; }
    FIRMWARE_STATUS(u32) => SCRATCH[64] { 7:0 status; }
}

fn main() {}
