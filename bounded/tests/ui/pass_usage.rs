// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::{Bounded, TryIntoBounded};

fn main() {
    let v = Bounded::<u32, 16>::new::<0xab00>();
    let high: Bounded<u32, 8> = v.shr::<8, _>();
    let back: Bounded<u32, 16> = high.shl::<8, _>();
    assert_eq!(back, v);
    assert_eq!(u8::from(high), 0xab);
    assert!(Bounded::<u8, 1>::new::<1>().as_bool());
    let t: Option<Bounded<u16, 4>> = 9u64.try_into_bounded();
    assert_eq!(t.map(Bounded::get), Some(9));
    let z: Bounded<u32, 32> = pin_init::zeroed();
    assert_eq!(z.get(), 0);
}
