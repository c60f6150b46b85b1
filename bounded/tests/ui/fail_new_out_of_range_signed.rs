// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // Four signed bits hold -8 to 7.
    let _ = Bounded::<i32, 4>::new::<8>();
}
