// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The firmware image parser (`tyr::fw::image`) on arbitrary files: it never panics, and what
//! it accepts holds together: every section's data fits its range and lies in the file, no two
//! sections overlap, the shared region is one of them, and the simulated MCU's own reader
//! agrees on the sections it finds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tyr::fw::image::{Image, SHARED_REGION_VA};

fuzz_target!(|data: &[u8]| {
    let Ok(img) = Image::parse(data) else {
        return;
    };
    let sections: Vec<_> = img.sections().collect();
    assert_eq!(sections.len(), img.section_count());
    for (i, s) in sections.iter().enumerate() {
        assert!(s.va_start < s.va_end && s.data.len() <= s.size() as usize);
        assert!(s.data_offset as usize + s.data.len() <= data.len());
        for t in &sections[i + 1..] {
            assert!(s.va_end <= t.va_start || t.va_end <= s.va_start);
        }
    }
    assert!(sections.iter().any(|s| s.va_start == SHARED_REGION_VA && s.shared()));
    // The MCU reads every image the driver accepts, and finds the same sections.
    let flashed = mali_sim::firmware::Flashed::new(data).expect("the MCU refuses an image");
    let ranges: Vec<_> = flashed.sections().iter().map(|f| (f.va_start, f.va_end)).collect();
    let ours: Vec<_> = sections.iter().map(|s| (s.va_start, s.va_end)).collect();
    assert_eq!(ranges, ours);
});
