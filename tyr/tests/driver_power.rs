// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Counters through the ioctl layer: jobs that store the GPU timestamp and cycle counters
//! (uAPI 1.6's `GLB_COUNTER_EN`).

use drm_ctx::device;
use drm_ctx::drm::Registration;
use drm_ctx::types::ARef;
use mali_sim::Config;
use tyr::csf::instr;
use tyr::driver::{self, TyrDriver};
use tyr::host::HostBackend;
use tyr::uapi::*;
use tyr::umd::{Bo, Job, Umd};

const WAIT: i64 = 600_000_000_000;

type Drv = TyrDriver<HostBackend>;

struct Rig {
    reg: Registration<Drv>,
    _parent: ARef<device::Device>,
}

fn rig_with(cfg: Config) -> Rig {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::new(cfg)).unwrap();
    Rig {
        reg,
        _parent: parent,
    }
}

fn rig() -> Rig {
    rig_with(Config::g610())
}

/// A VM with one BO mapped at `VA`: code at offset 0, data at `DATA`.
struct Space {
    vm: u32,
    bo: Bo,
}

const VA: u64 = 0x100_0000;
const DATA: u64 = 0x8000;

fn space(umd: &Umd) -> Space {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, VA).unwrap();
    Space { vm, bo }
}

/// A stream at `code` storing the timestamp at `data` and the cycle count at `data + 8`.
fn counter_stream(umd: &Umd, s: &Space, code: u64, data: u64) -> (u64, u32) {
    let prog = [
        instr::move48(0, VA + data),
        instr::store_state(0, instr::STATE_TIMESTAMP, 0),
        instr::store_state(0, instr::STATE_CYCLE_COUNT, 8),
    ];
    umd.write_stream(&s.bo, code, &prog).unwrap();
    (VA + code, (prog.len() * 8) as u32)
}

fn timestamp_info(umd: &Umd) -> TimestampInfo {
    umd.dev_query::<TimestampInfo>(DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO)
        .unwrap()
}

#[test]
fn jobs_store_timestamps_consistent_with_dev_query() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let before = timestamp_info(&umd);
    assert_eq!(before.timestamp_frequency, 24_000_000);
    let mut stamps = Vec::new();
    for i in 0..4u64 {
        let (addr, size) = counter_stream(&umd, &s, i * 64, DATA + i * 16);
        let done = umd.syncobj_create(false).unwrap();
        umd.submit(g, &[Job::new(0, addr, size).signal(done)])
            .unwrap();
        umd.wait(&[done], WAIT).unwrap();
        let ts = s.bo.read_u64(DATA + i * 16).unwrap();
        let cycles = s.bo.read_u64(DATA + i * 16 + 8).unwrap();
        stamps.push((ts, cycles));
    }
    let after = timestamp_info(&umd);
    let mut last = (before.current_timestamp, 0);
    for (i, &(ts, cycles)) in stamps.iter().enumerate() {
        assert_ne!(ts, 0, "job {i}: no timestamp (COUNTER_EN not enabled?)");
        assert_ne!(cycles, 0, "job {i}: no cycle count");
        assert!(ts > last.0, "job {i}: timestamp {ts} not after {}", last.0);
        assert!(
            cycles > last.1,
            "job {i}: cycles {cycles} not after {}",
            last.1
        );
        last = (ts, cycles);
    }
    assert!(
        last.0 <= after.current_timestamp,
        "a job's timestamp {} is after DEV_QUERY's {}",
        last.0,
        after.current_timestamp
    );
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
}
