// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::io::{Io, MemRegion};
use register::register;

register! {
    ODD(u32) @ 0x2 { 31:0 value; }
}

fn main() {
    let io = MemRegion::<0x1000>::new();
    let _ = io.read(ODD);
}
