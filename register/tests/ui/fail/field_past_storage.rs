// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    STATUS(u16) @ 0x10 { 16:8 high; }
}

fn main() {}
