// SPDX-License-Identifier: GPL-2.0 OR MIT

use register::io::{MemRegion, PureView, ReadPure};
use register::register;

register! {
    GPU_ID(u32) @ 0x0 { 31:0 value; }
    IRQ_STATUS(u32) @ 0x4 { 31:0 pending; }
}

impl ReadPure for GPU_ID {}

fn main() {
    let io = MemRegion::<0x10>::new();
    let view = PureView::new(&io);
    let _ = view.read(GPU_ID);
    // Reading the interrupt status acknowledges interrupts: not through a view.
    let _ = view.read(IRQ_STATUS);
}
