// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::register;

register! {
    CTRL(u32) @ 0x0 {
        7:4 mode;
        4:0 level;
    }
}

fn main() {}
