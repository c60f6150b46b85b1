// SPDX-License-Identifier: GPL-2.0 OR MIT

// `set_x` returns the new value: as a statement it would silently do nothing.
#![deny(unused_must_use)]

use register::{register, Bounded};

register! {
    @first_series
    CTRL(u32) @ 0x100 { 7:4 mode; 0:0 enable => bool; }
}

fn main() {
    let reg = CTRL::zeroed();
    reg.set_mode(Bounded::<u32, 4>::new::<3>());
    reg.with_const_mode::<2>();
    reg.with_enable(true);
    let _ = reg;
}
