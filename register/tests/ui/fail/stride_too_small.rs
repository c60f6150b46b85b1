// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    BANK(u32)[4, stride = 2] @ 0x0 { 31:0 value; }
}

fn main() {}
