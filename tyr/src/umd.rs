// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A Mesa-like userspace client: what a user-mode driver does with the panthor uAPI, through
//! ioctls and `mmap` only.
//!
//! Tests and the demo use it to play workloads the way Mesa's panvk would: create a VM and
//! buffer objects, bind them, build command streams in mapped memory, create a group, submit
//! jobs that wait on and signal syncobjs, wait, and read results back.
//!
//! # Examples
//!
//! ```
//! use tyr::{driver, host::HostBackend, csf::instr, umd::{Job, Umd}};
//! use drm_ctx::device;
//!
//! let parent = device::Device::new("mali").unwrap();
//! let reg = driver::probe(&parent, HostBackend::g610()).unwrap();
//! let umd = Umd::open(reg.device()).unwrap();
//! let vm = umd.vm_create().unwrap();
//! let bo = umd.bo_create(0x1000).unwrap();
//! umd.map(vm, &bo, 0x10_0000).unwrap();
//! // A stream that stores 42 at 0x10_0800.
//! let stream = [instr::move48(0, 0x10_0800), instr::move32(2, 42), instr::store_multiple(2, 0, 0, 1)];
//! umd.write_stream(&bo, 0, &stream).unwrap();
//! let group = umd.group_create(vm, &[0x1000]).unwrap();
//! let done = umd.syncobj_create(false).unwrap();
//! umd.submit(group, &[Job::new(0, 0x10_0000, 24).signal(done)]).unwrap();
//! umd.wait(&[done], 1_000_000_000).unwrap();
//! assert_eq!(bo.read_u32(0x800).unwrap(), 42);
//! ```

use std::sync::Arc;
use std::vec::Vec;

use drm_ctx::drm::ioctl::{self, IoctlArg};
use drm_ctx::drm::{gem, OpenOptions};
use drm_ctx::host::syncobj::{self, monotonic_ns};
use drm_ctx::host::{Client, UserSpace};
use drm_ctx::types::ARef;
use drm_ctx::{Error, Result};

use crate::driver::{TyrBo, TyrDevice, TyrDriver};
use crate::host::HostBackend;
use crate::uapi::{self, *};

type Drv = TyrDriver<HostBackend>;

/// An open render node.
pub struct Umd {
    client: Client<Drv>,
}

/// A buffer object with its CPU mapping.
pub struct Bo {
    /// The handle.
    pub handle: u32,
    /// The size in bytes.
    pub size: u64,
    map: ARef<gem::Object<TyrBo<HostBackend>>>,
}

impl Bo {
    /// Writes bytes through the CPU mapping.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result {
        self.map.cpu_write(offset, data).map_err(Into::into)
    }

    /// Reads bytes through the CPU mapping.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result {
        self.map.cpu_read(offset, buf).map_err(Into::into)
    }

    /// Reads a little-endian `u32`.
    pub fn read_u32(&self, offset: u64) -> Result<u32> {
        let mut b = [0; 4];
        self.read(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian `u64`.
    pub fn read_u64(&self, offset: u64) -> Result<u64> {
        let mut b = [0; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// One job of a submission.
#[derive(Clone, Debug, Default)]
pub struct Job {
    /// Queue index in the group.
    pub queue: u32,
    /// GPU address of the stream.
    pub addr: u64,
    /// Size of the stream in bytes.
    pub size: u32,
    /// Syncobjs to wait on.
    pub waits: Vec<u32>,
    /// Syncobjs to signal.
    pub signals: Vec<u32>,
    /// Timeline points to wait on and signal (after the binary waits and signals).
    pub points: Vec<SyncOp>,
    /// The flush ID to pass instead of the one [`Umd::submit`] reads (a stale one, say).
    pub flush_id: Option<u32>,
}

impl Job {
    /// A job running `size` bytes of stream at `addr` on queue `queue`.
    pub fn new(queue: u32, addr: u64, size: u32) -> Self {
        Job {
            queue,
            addr,
            size,
            ..Job::default()
        }
    }

    /// Also waits on `syncobj`.
    pub fn wait(mut self, syncobj: u32) -> Self {
        self.waits.push(syncobj);
        self
    }

    /// Also signals `syncobj`.
    pub fn signal(mut self, syncobj: u32) -> Self {
        self.signals.push(syncobj);
        self
    }

    /// Also waits on point `point` of the timeline syncobj `syncobj`.
    pub fn wait_point(mut self, syncobj: u32, point: u64) -> Self {
        self.points.push(timeline_op(false, syncobj, point));
        self
    }

    /// Also signals point `point` of the timeline syncobj `syncobj`.
    pub fn signal_point(mut self, syncobj: u32, point: u64) -> Self {
        self.points.push(timeline_op(true, syncobj, point));
        self
    }

    /// Passes `id` as the job's flush ID (`latest_flush`).
    pub fn flush_id(mut self, id: u32) -> Self {
        self.flush_id = Some(id);
        self
    }
}

/// A spinning job's user stream: sets a register pair to `data` and a register to `value`,
/// counts a third register up `spin` times, then stores `[spin, value]` at `data`. A suspend
/// anywhere in the middle must carry every register over for the result to be right, which is
/// what the scheduling tests and the demo's sharing step check.
pub fn spin_stream(data: u64, value: u32, spin: u32) -> Vec<u64> {
    use crate::csf::instr;
    let mut prog = Vec::new();
    prog.extend([
        instr::move48(0, data),
        instr::move32(2, 0),
        instr::move32(3, value),
    ]);
    prog.extend((0..spin).map(|_| instr::add_imm32(2, 2, 1)));
    prog.push(instr::store_multiple(2, 0, 0, 0b11));
    prog
}

/// A sync op on point `point` of the timeline syncobj `handle`, signalling or waiting.
pub fn timeline_op(signal: bool, handle: u32, point: u64) -> SyncOp {
    SyncOp {
        flags: DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ
            | if signal {
                DRM_PANTHOR_SYNC_OP_SIGNAL
            } else {
                DRM_PANTHOR_SYNC_OP_WAIT
            },
        handle,
        timeline_value: point,
    }
}

/// Binary sync ops: waits on `waits`, then signals of `signals`.
fn binary_ops(waits: &[u32], signals: &[u32]) -> Vec<SyncOp> {
    waits
        .iter()
        .map(|h| SyncOp {
            flags: DRM_PANTHOR_SYNC_OP_WAIT | DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ,
            handle: *h,
            timeline_value: 0,
        })
        .chain(signals.iter().map(|h| SyncOp {
            flags: DRM_PANTHOR_SYNC_OP_SIGNAL | DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ,
            handle: *h,
            timeline_value: 0,
        }))
        .collect()
}

fn bytes_of<A: IoctlArg>(items: &[A]) -> Vec<u8> {
    items
        .iter()
        .flat_map(|a| ioctl::as_bytes(a).iter().copied())
        .collect()
}

impl Umd {
    /// Opens a render node of `dev`.
    pub fn open(dev: &TyrDevice<HostBackend>) -> Result<Self> {
        Ok(Umd {
            client: Client::open(dev, OpenOptions::render())?,
        })
    }

    /// Opens `dev` as `opts` says (a DRM master may create `HIGH` and `REALTIME` groups).
    pub fn open_with(dev: &TyrDevice<HostBackend>, opts: OpenOptions) -> Result<Self> {
        Ok(Umd {
            client: Client::open(dev, opts)?,
        })
    }

    /// The underlying client.
    pub fn client(&self) -> &Client<Drv> {
        &self.client
    }

    fn mem(&self) -> &Arc<UserSpace> {
        self.client.mem()
    }

    /// Issues an ioctl.
    pub fn ioctl<A: IoctlArg>(&self, cmd: u32, arg: &mut A) -> Result<u32> {
        self.client.ioctl_arg(cmd, arg)
    }

    /// Copies an array into user memory and describes it (0 for an empty one).
    pub fn array<A: IoctlArg>(&self, items: &[A]) -> Result<ObjArray> {
        let array = if items.is_empty() {
            0
        } else {
            self.mem().alloc_bytes(&bytes_of(items))?
        };
        Ok(ObjArray {
            stride: core::mem::size_of::<A>() as u32,
            count: items.len() as u32,
            array,
        })
    }

    /// `DEV_QUERY` of `type_` into a `T`.
    pub fn dev_query<T: IoctlArg + Default>(&self, type_: u32) -> Result<T> {
        self.dev_query_in(type_, &T::default())
    }

    /// `DEV_QUERY` of `type_` whose object starts as `input` (a `TIMESTAMP_INFO` names in its
    /// `flags` what to fill), read back.
    pub fn dev_query_in<T: IoctlArg>(&self, type_: u32, input: &T) -> Result<T> {
        let ptr = self.mem().alloc_bytes(ioctl::as_bytes(input))?;
        let mut q = DevQuery {
            type_,
            size: core::mem::size_of::<T>() as u32,
            pointer: ptr,
        };
        self.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q)?;
        let bytes = self.mem().read_vec(ptr, core::mem::size_of::<T>())?;
        self.mem().free(ptr)?;
        ioctl::from_bytes(&bytes).ok_or(Error::Invalid)
    }

    /// Creates a VM with the default user range.
    pub fn vm_create(&self) -> Result<u32> {
        let mut a = VmCreate::default();
        self.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut a)?;
        Ok(a.id)
    }

    /// `VM_GET_STATE`.
    pub fn vm_state(&self, vm: u32) -> Result<u32> {
        let mut a = VmGetState {
            vm_id: vm,
            state: 0,
        };
        self.ioctl(DRM_IOCTL_PANTHOR_VM_GET_STATE, &mut a)?;
        Ok(a.state)
    }

    /// Creates a buffer object and maps it for the CPU.
    pub fn bo_create(&self, size: u64) -> Result<Bo> {
        let mut a = BoCreate {
            size,
            ..Default::default()
        };
        self.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut a)?;
        let mut m = BoMmapOffset {
            handle: a.handle,
            ..Default::default()
        };
        self.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut m)?;
        let map = self.client.mmap(
            m.offset,
            usize::try_from(a.size).map_err(|_| Error::Overflow)?,
        )?;
        Ok(Bo {
            handle: a.handle,
            size: a.size,
            map,
        })
    }

    /// Maps all of `bo` at `va` in `vm` (synchronous `VM_BIND`).
    pub fn map(&self, vm: u32, bo: &Bo, va: u64) -> Result {
        let op = VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
            bo_handle: bo.handle,
            va,
            size: bo.size,
            ..Default::default()
        };
        self.bind(vm, 0, &[op])
    }

    /// `VM_BIND` with `flags` (`DRM_PANTHOR_VM_BIND_ASYNC` or 0).
    pub fn bind(&self, vm: u32, flags: u32, ops: &[VmBindOp]) -> Result {
        let mut a = VmBind {
            vm_id: vm,
            flags,
            ops: self.array(ops)?,
        };
        let r = self.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut a);
        self.free_array(&ObjArray {
            count: ops.len() as u32,
            ..a.ops
        });
        r.map(|_| ())
    }

    /// The sync-op array of a job.
    pub fn sync_ops(&self, waits: &[u32], signals: &[u32]) -> Result<ObjArray> {
        self.array(&binary_ops(waits, signals))
    }

    /// The sync-op array of `job`: its binary waits and signals, then its timeline points.
    fn job_syncs(&self, job: &Job) -> Result<ObjArray> {
        let mut ops = binary_ops(&job.waits, &job.signals);
        ops.extend_from_slice(&job.points);
        self.array(&ops)
    }

    /// Creates a group with one queue per ring size, compute on every core.
    pub fn group_create(&self, vm: u32, rings: &[u32]) -> Result<u32> {
        self.group_create_prio(vm, rings, uapi::PANTHOR_GROUP_PRIORITY_MEDIUM)
    }

    /// Creates a group of priority `priority` (`PANTHOR_GROUP_PRIORITY_*`) with one queue per
    /// ring size, compute on every core.
    pub fn group_create_prio(&self, vm: u32, rings: &[u32], priority: u8) -> Result<u32> {
        let queues: Vec<(u32, u8)> = rings.iter().map(|r| (*r, 0)).collect();
        self.group_create_queues(vm, &queues, priority)
    }

    /// Creates a group of priority `priority` with one queue per `(ring size, queue
    /// priority)`, compute on every core.
    pub fn group_create_queues(&self, vm: u32, queues: &[(u32, u8)], priority: u8) -> Result<u32> {
        let queues: Vec<QueueCreate> = queues
            .iter()
            .map(|&(ringbuf_size, priority)| QueueCreate {
                priority,
                pad: [0; 3],
                ringbuf_size,
            })
            .collect();
        let mut a = GroupCreate {
            queues: self.array(&queues)?,
            max_compute_cores: 1,
            max_fragment_cores: 1,
            max_tiler_cores: 1,
            priority,
            compute_core_mask: 1,
            fragment_core_mask: 1,
            tiler_core_mask: 1,
            vm_id: vm,
            ..Default::default()
        };
        self.ioctl(DRM_IOCTL_PANTHOR_GROUP_CREATE, &mut a)?;
        Ok(a.group_handle)
    }

    /// `GROUP_DESTROY`.
    pub fn group_destroy(&self, group: u32) -> Result {
        let mut a = GroupDestroy {
            group_handle: group,
            pad: 0,
        };
        self.ioctl(DRM_IOCTL_PANTHOR_GROUP_DESTROY, &mut a)
            .map(|_| ())
    }

    /// `GROUP_GET_STATE`: the state flags and the fatal-queue mask.
    pub fn group_state(&self, group: u32) -> Result<(u32, u32)> {
        let mut a = GroupGetState {
            group_handle: group,
            ..Default::default()
        };
        self.ioctl(DRM_IOCTL_PANTHOR_GROUP_GET_STATE, &mut a)?;
        Ok((a.state, a.fatal_queues))
    }

    /// `LATEST_FLUSH_ID`, read through the file's flush-ID page as panvk reads it when it
    /// records a command buffer.
    pub fn latest_flush_id(&self) -> Result<u32> {
        let fd = self.client.fd();
        let file = fd.file();
        let offset = file.inner().user_mmio_offset()
            + (uapi::DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET - uapi::DRM_PANTHOR_USER_MMIO_OFFSET);
        let prot = crate::driver::MmapProt {
            shared: true,
            ..Default::default()
        };
        match crate::ioctl::mmap(fd, offset, 4096, prot)? {
            crate::driver::Mapping::FlushId(page) => page.latest_flush_id().map_err(Into::into),
            crate::driver::Mapping::Bo(_) => Err(Error::Invalid),
        }
    }

    /// Submits jobs to a group. Each job carries the flush ID read now (see
    /// [`latest_flush_id`](Self::latest_flush_id)): the job's cache flush is skipped if the
    /// caches were flushed since.
    pub fn submit(&self, group: u32, jobs: &[Job]) -> Result {
        let latest_flush = self.latest_flush_id()?;
        let mut subs = Vec::new();
        for j in jobs {
            subs.push(QueueSubmit {
                queue_index: j.queue,
                stream_size: j.size,
                stream_addr: j.addr,
                latest_flush: j.flush_id.unwrap_or(latest_flush),
                pad: 0,
                syncs: self.job_syncs(j)?,
            });
        }
        let mut a = GroupSubmit {
            group_handle: group,
            pad: 0,
            queue_submits: self.array(&subs)?,
        };
        let r = self.ioctl(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut a);
        // The arrays were only needed for the call.
        for s in &subs {
            self.free_array(&s.syncs);
        }
        self.free_array(&a.queue_submits);
        r.map(|_| ())
    }

    /// Frees an array made by [`array`](Self::array).
    pub fn free_array(&self, a: &ObjArray) {
        if a.array != 0 {
            let _ = self.mem().free(a.array);
        }
    }

    /// Creates a syncobj (already signalled if `signalled`).
    pub fn syncobj_create(&self, signalled: bool) -> Result<u32> {
        let mut a = syncobj::DrmSyncobjCreate {
            handle: 0,
            flags: if signalled {
                syncobj::DRM_SYNCOBJ_CREATE_SIGNALED
            } else {
                0
            },
        };
        self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_CREATE, &mut a)?;
        Ok(a.handle)
    }

    /// Destroys a syncobj.
    pub fn syncobj_destroy(&self, handle: u32) -> Result {
        let mut a = syncobj::DrmSyncobjDestroy { handle, pad: 0 };
        self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_DESTROY, &mut a)
            .map(|_| ())
    }

    /// Signals syncobjs from the CPU.
    pub fn syncobj_signal(&self, handles: &[u32]) -> Result {
        let arr = self.array(handles)?;
        let mut a = syncobj::DrmSyncobjArray {
            handles: arr.array,
            count_handles: arr.count,
            pad: 0,
        };
        let r = self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_SIGNAL, &mut a);
        self.free_array(&arr);
        r.map(|_| ())
    }

    /// Waits until every syncobj has signalled, for at most `timeout_ns` nanoseconds.
    pub fn wait(&self, handles: &[u32], timeout_ns: i64) -> Result {
        let arr = self.array(handles)?;
        let mut a = syncobj::DrmSyncobjWait {
            handles: arr.array,
            timeout_nsec: monotonic_ns().saturating_add(timeout_ns),
            count_handles: arr.count,
            flags: syncobj::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            ..Default::default()
        };
        let r = self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_WAIT, &mut a);
        self.free_array(&arr);
        r.map(|_| ())
    }

    /// Writes a command stream into `bo` at `offset`.
    pub fn write_stream(&self, bo: &Bo, offset: u64, instrs: &[u64]) -> Result {
        let bytes: Vec<u8> = instrs.iter().flat_map(|i| i.to_le_bytes()).collect();
        bo.write(offset, &bytes)
    }

    /// `SYNCOBJ_TIMELINE_WAIT` for `points[i]` of `handles[i]` with `flags`, for at most
    /// `timeout_ns` nanoseconds; the `first_signaled` the call reports.
    pub fn timeline_wait(
        &self,
        handles: &[u32],
        points: &[u64],
        flags: u32,
        timeout_ns: i64,
    ) -> Result<u32> {
        let hs = self.array(handles)?;
        let ps = self.array(points)?;
        let mut a = syncobj::DrmSyncobjTimelineWait {
            handles: hs.array,
            points: ps.array,
            timeout_nsec: monotonic_ns().saturating_add(timeout_ns),
            count_handles: hs.count,
            flags,
            ..Default::default()
        };
        let r = self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a);
        self.free_array(&hs);
        self.free_array(&ps);
        r.map(|_| a.first_signaled)
    }

    /// `SYNCOBJ_QUERY`: the last signalled point of each syncobj (the last submitted one with
    /// `last_submitted`).
    pub fn syncobj_query(&self, handles: &[u32], last_submitted: bool) -> Result<Vec<u64>> {
        let hs = self.array(handles)?;
        let zeros: Vec<u64> = handles.iter().map(|_| 0).collect();
        let ps = self.array(&zeros)?;
        let mut a = syncobj::DrmSyncobjTimelineArray {
            handles: hs.array,
            points: ps.array,
            count_handles: hs.count,
            flags: if last_submitted {
                syncobj::DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED
            } else {
                0
            },
        };
        let r = self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_QUERY, &mut a);
        let out = r.and_then(|_| self.mem().read_vec(ps.array, handles.len() * 8));
        self.free_array(&hs);
        self.free_array(&ps);
        Ok(out?
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }

    /// `SYNCOBJ_TIMELINE_SIGNAL`: signals `points[i]` of `handles[i]` from the CPU.
    pub fn timeline_signal(&self, handles: &[u32], points: &[u64]) -> Result {
        let hs = self.array(handles)?;
        let ps = self.array(points)?;
        let mut a = syncobj::DrmSyncobjTimelineArray {
            handles: hs.array,
            points: ps.array,
            count_handles: hs.count,
            flags: 0,
        };
        let r = self.ioctl(syncobj::DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut a);
        self.free_array(&hs);
        self.free_array(&ps);
        r.map(|_| ())
    }
}

/// A tiler heap (`TILER_HEAP_CREATE`) and what a stream needs to tile into it.
///
/// A render pass's tiling names the heap twice: `HEAP_SET` with the heap context's address
/// (the firmware's bookkeeping: which heap ran out of memory, how many passes are in flight)
/// and, through the tiler context in registers `d40`, the heap descriptor, whose base and
/// size name the first chunk (what `TILER_HEAP_CREATE` returned), from which an unused heap
/// starts. [`TilerHeap::tile`] builds a pass that writes those descriptors, counts the pass
/// with `HEAP_OPERATION` and tiles with `RUN_IDVS`, as Mesa's panvk does (without shaders:
/// the simulated tiler writes one entry per index, see `mali_sim::csf::heap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TilerHeap {
    /// The handle (`vm_id << 16 | index`).
    pub handle: u32,
    /// GPU address of the heap context.
    pub context_va: u64,
    /// GPU address of the first chunk.
    pub first_chunk_va: u64,
    /// Bytes per chunk.
    pub chunk_size: u32,
}

/// Bytes of GPU memory [`TilerHeap::tile`] writes its descriptors into: a tiler context (64
/// bytes) and a heap descriptor (32 bytes).
pub const TILER_DESC_SIZE: u64 = 0x60;

impl TilerHeap {
    /// The first chunk's link, as chunk headers hold it (address | size in pages).
    pub fn first_chunk_link(&self) -> u64 {
        (self.first_chunk_va & !0xfff) | u64::from(self.chunk_size >> 12)
    }

    /// A render pass that tiles `entries` entries into the heap, entry `i` being
    /// `tag + i` (the low 32 bits wrap; the high ones are the draw ID). The tiler context and
    /// heap descriptor are written at `desc_va` (64-byte aligned, [`TILER_DESC_SIZE`] bytes of
    /// writable GPU memory). The pass counts as started before the tiling and as finished (its
    /// fragment work too: there is none) once the tiling's scoreboard entry drains. It uses
    /// registers 33 to 36, 40 and 41, and 64 to 77, and the scoreboard entries 0 (endpoint and
    /// loads/stores) and 1.
    pub fn tile(&self, desc_va: u64, entries: u32, tag: u64) -> [u64; 22] {
        use crate::csf::instr::{heap_set, move32, move48, store_multiple, wait};
        use ::csf::{HeapOp, Instr, Reg, Slot, SlotMask};
        let heap_op = |operation, wait_mask| {
            Instr::HeapOperation {
                operation,
                wait_mask: SlotMask::from_bits(wait_mask),
                signal_slot: Slot::of::<1>(),
            }
            .encode()
        };
        let idvs = Instr::RunIdvs {
            flags_override: 0,
            progress_increment: false,
            malloc_enable: true,
            draw_id_register_enable: true,
            varying_srt_select: false,
            varying_fau_select: false,
            varying_tsd_select: false,
            fragment_srt_select: false,
            fragment_tsd_select: false,
            draw_id: Reg(36),
        };
        let claim = Instr::ReqResource {
            compute: false,
            fragment: false,
            tiler: false,
            idvs: true,
        };
        [
            // The descriptors: the context's heap pointer, the heap's size and base.
            move48(64, desc_va),
            move48(66, desc_va + 0x40),
            move32(68, self.chunk_size),
            move48(70, self.first_chunk_va),
            store_multiple(66, 64, 0x18, 0b11),
            store_multiple(68, 64, 0x44, 0b1),
            store_multiple(70, 64, 0x48, 0b11),
            // The tiler reads them: the stores (entry 0) must have landed.
            wait(0b1),
            move48(76, self.context_va),
            heap_set(76),
            claim.encode(),
            move48(40, desc_va),
            move32(33, entries),
            move32(34, 1),
            move32(35, tag as u32),
            move32(36, (tag >> 32) as u32),
            heap_op(HeapOp::VertexTilerStarted, 0),
            wait(0b10),
            idvs.encode(),
            heap_op(HeapOp::VertexTilerCompleted, 0b1),
            heap_op(HeapOp::FragmentCompleted, 0b10),
            wait(0b10),
        ]
    }
}

impl Umd {
    /// Creates a tiler heap in `vm` with `initial` chunks of `chunk_size` bytes, growing to
    /// at most `max_chunks`, and `target_in_flight` render passes in flight at most.
    pub fn tiler_heap_create(
        &self,
        vm: u32,
        initial: u32,
        chunk_size: u32,
        max_chunks: u32,
        target_in_flight: u32,
    ) -> Result<TilerHeap> {
        let mut a = TilerHeapCreate {
            vm_id: vm,
            initial_chunk_count: initial,
            chunk_size,
            max_chunks,
            target_in_flight,
            ..Default::default()
        };
        self.ioctl(DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE, &mut a)?;
        Ok(TilerHeap {
            handle: a.handle,
            context_va: a.tiler_heap_ctx_gpu_va,
            first_chunk_va: a.first_heap_chunk_gpu_va,
            chunk_size,
        })
    }

    /// Destroys a tiler heap.
    pub fn tiler_heap_destroy(&self, heap: &TilerHeap) -> Result {
        let mut a = TilerHeapDestroy {
            handle: heap.handle,
            pad: 0,
        };
        self.ioctl(DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY, &mut a)
            .map(|_| ())
    }
}
