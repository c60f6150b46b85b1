// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    BANK(u32)[4, stride = 6] @ 0x100 { 31:0 value; }
}

fn main() {}
