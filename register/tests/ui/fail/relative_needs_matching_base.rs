// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::io::{Io, MemRegion};
use register::{register, RegisterBase};

struct CpuBase;
struct OtherBase;
struct Cpu0;
impl RegisterBase<OtherBase> for Cpu0 {
    const BASE: usize = 0x100;
}

register! {
    CPU_CTL(u32) @ CpuBase + 0x10 { 0:0 start => bool; }
}

fn main() {
    let io = MemRegion::<0x1000>::new();
    let _ = io.read(CPU_CTL::of::<Cpu0>());
}
