// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::io::{Io, MemRegion};
use register::{register, RegisterBase};

struct Base;
struct B0;
impl RegisterBase<Base> for B0 {
    const BASE: usize = 0x100;
}

register! {
    @first_series
    FIXED(u32) @ 0x0 { 31:16 hi; 15:0 lo; }
    ALIAS(u32) => FIXED { 0:0 bit => bool; }
    ARR(u16)[4, stride = 4] @ 0x10 { 15:0 v; }
    ARR_ALIAS(u16) => ARR[3] { 7:0 low; }
    REL(u8) @ Base + 0x1 { 7:0 v; }
    REL_ALIAS(u8) => Base + REL { 7:7 top => bool; }
    REL_ARR(u64)[2] @ Base + 0x8 { 63:0 v; }
    REL_ARR_ALIAS(u64) => Base + REL_ARR[1] { 63:63 top => bool; }
}

fn main() {
    let io = MemRegion::<0x200>::new();
    io.write_reg(FIXED::zeroed().with_const_hi::<0xffff>());
    let _ = io.read(ALIAS).bit();
    io.write(ARR::at_const::<3>(), ARR::from(1));
    let _ = io.read(ARR_ALIAS).low();
    io.update(REL::of::<B0>(), |r| r.with_v(1u8));
    let _ = io.read(REL_ALIAS::of::<B0>()).top();
    io.write(REL_ARR::of::<B0>().at_const::<1>(), REL_ARR::zeroed());
    let _ = REL_ARR_ALIAS::read(&&io, &B0).top();
}
