// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Field get/set and `Debug` formatting of one register, declared with `register!`, with
//! `bitbybit` and with `tock-registers`, in the same run.
//!
//! `cargo bench -p gpukit-register --features bench --bench fields`

// `bitbybit` generates `pub` items for private bitfields.
#![allow(missing_docs, unreachable_pub)]

use std::fmt::Write;
use std::hint::black_box;

use arbitrary_int::u4;
use bitbybit::bitfield;
use bounded::Bounded;
use criterion::{criterion_group, criterion_main, Criterion};
use register::register;
use tock_registers::register_bitfields;
use tock_registers::LocalRegisterCopy;

register! {
    CTRL(u32) @ 0x0 {
        31:24 tag;
        15:8 count;
        7:4 mode;
        0:0 enable => bool;
    }
}

#[bitfield(u32, debug, default = 0)]
struct BbCtrl {
    #[bits(24..=31, rw)]
    tag: u8,
    #[bits(8..=15, rw)]
    count: u8,
    #[bits(4..=7, rw)]
    mode: u4,
    #[bit(0, rw)]
    enable: bool,
}

register_bitfields![u32,
    TkCtrl [
        TAG OFFSET(24) NUMBITS(8) [],
        COUNT OFFSET(8) NUMBITS(8) [],
        MODE OFFSET(4) NUMBITS(4) [],
        ENABLE OFFSET(0) NUMBITS(1) []
    ]
];

type TkCopy = LocalRegisterCopy<u32, TkCtrl::Register>;

const RAW: u32 = 0xa5_00_3c_71;

fn get(c: &mut Criterion) {
    let mut g = c.benchmark_group("get");
    g.bench_function("register", |b| {
        b.iter(|| {
            let r = CTRL::from(black_box(RAW));
            r.mode().get() + r.count().get() + u32::from(r.enable())
        })
    });
    g.bench_function("bitbybit", |b| {
        b.iter(|| {
            let r = BbCtrl::new_with_raw_value(black_box(RAW));
            u32::from(r.mode().value()) + u32::from(r.count()) + u32::from(r.enable())
        })
    });
    g.bench_function("tock-registers", |b| {
        b.iter(|| {
            let r = TkCopy::new(black_box(RAW));
            r.read(TkCtrl::MODE) + r.read(TkCtrl::COUNT) + r.read(TkCtrl::ENABLE)
        })
    });
    g.finish();
}

fn set(c: &mut Criterion) {
    let mut g = c.benchmark_group("set");
    g.bench_function("register", |b| {
        b.iter(|| {
            let v = black_box(0x1234_5678u32);
            CTRL::from(black_box(RAW))
                .with_mode(Bounded::<u32, 4>::from_expr(v & 0xf))
                .with_count((v >> 8) as u8)
                .with_enable(v & 1 == 1)
                .as_raw()
        })
    });
    g.bench_function("bitbybit", |b| {
        b.iter(|| {
            let v = black_box(0x1234_5678u32);
            BbCtrl::new_with_raw_value(black_box(RAW))
                .with_mode(u4::new((v & 0xf) as u8))
                .with_count((v >> 8) as u8)
                .with_enable(v & 1 == 1)
                .raw_value()
        })
    });
    g.bench_function("tock-registers", |b| {
        b.iter(|| {
            let v = black_box(0x1234_5678u32);
            let mut r = TkCopy::new(black_box(RAW));
            r.modify(
                TkCtrl::MODE.val(v & 0xf)
                    + TkCtrl::COUNT.val((v >> 8) & 0xff)
                    + TkCtrl::ENABLE.val(v & 1),
            );
            r.get()
        })
    });
    g.finish();
}

fn debug(c: &mut Criterion) {
    let mut g = c.benchmark_group("debug");
    let mut s = String::with_capacity(256);
    g.bench_function("register", |b| {
        b.iter(|| {
            s.clear();
            write!(s, "{:?}", CTRL::from(black_box(RAW))).unwrap();
            s.len()
        })
    });
    g.bench_function("bitbybit", |b| {
        b.iter(|| {
            s.clear();
            write!(s, "{:?}", BbCtrl::new_with_raw_value(black_box(RAW))).unwrap();
            s.len()
        })
    });
    g.bench_function("tock-registers", |b| {
        b.iter(|| {
            s.clear();
            write!(s, "{:?}", TkCopy::new(black_box(RAW)).debug()).unwrap();
            s.len()
        })
    });
    g.finish();
}

criterion_group!(benches, get, set, debug);
criterion_main!(benches);
