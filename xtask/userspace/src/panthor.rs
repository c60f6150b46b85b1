// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The panthor uAPI (`include/uapi/drm/panthor_drm.h`) from userspace, as Mesa's panvk calls
//! it: the structs and ioctl numbers are the Tyr driver's own ([`tyr::uapi`], byte-exact with
//! the C header), the calls here build their arguments (object arrays of bind operations,
//! queues, jobs and sync operations) in this process's memory and issue them on a [`Drm`]
//! file.
//!
//! Also the Tyr driver's leak counters, `/sys/kernel/tyr/live` ([`LiveCounts`]).

use std::mem::size_of;

use tyr::uapi::*;

use crate::drm::Drm;
use crate::sys::{Errno, Plain};

macro_rules! plain {
    ($($t:ty = $size:expr),* $(,)?) => {$(
        // SAFETY: a `#[repr(C)]` struct of the Tyr driver's uAPI made of integers and integer
        // arrays with explicit padding fields (its layout tests pin every offset; the size is
        // asserted here): no padding bytes, every bit pattern valid.
        unsafe impl Plain for $t {}
        const _: () = assert!(size_of::<$t>() == $size);
    )*};
}

plain!(
    ObjArray = 16,
    SyncOp = 16,
    GpuInfo = 112,
    CsifInfo = 24,
    DevQuery = 16,
    VmCreate = 16,
    VmDestroy = 8,
    VmBindOp = 48,
    VmBind = 24,
    VmGetState = 8,
    BoCreate = 24,
    BoMmapOffset = 16,
    QueueCreate = 8,
    GroupCreate = 56,
    GroupDestroy = 8,
    QueueSubmit = 40,
    GroupSubmit = 24,
    GroupGetState = 16,
    TilerHeapCreate = 40,
);

/// An object array describing `items` (address 0 for none). The array must stay alive, and
/// not move, until the ioctl that reads it returns.
pub fn obj_array<T: Plain>(items: &[T]) -> ObjArray {
    ObjArray {
        stride: size_of::<T>() as u32,
        // Never more than the slice holds (a slice of over 4 G elements is only described in
        // part).
        count: items.len().min(u32::MAX as usize) as u32,
        array: if items.is_empty() {
            0
        } else {
            items.as_ptr() as u64
        },
    }
}

/// A binary-syncobj sync operation: wait on `handle`, or signal it.
pub fn sync_op(signal: bool, handle: u32) -> SyncOp {
    SyncOp {
        flags: DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ
            | if signal {
                DRM_PANTHOR_SYNC_OP_SIGNAL
            } else {
                DRM_PANTHOR_SYNC_OP_WAIT
            },
        handle,
        timeline_value: 0,
    }
}

/// A timeline-syncobj sync operation: wait on point `point` of `handle`, or signal it.
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

/// `DEV_QUERY` of `type_` into a `T` (`GpuInfo`, `CsifInfo`).
pub fn dev_query<T: Plain + Default>(dev: &Drm, type_: u32) -> Result<T, Errno> {
    let mut out = T::default();
    let mut q = DevQuery {
        type_,
        size: size_of::<T>() as u32,
        pointer: &mut out as *mut T as u64,
    };
    // SAFETY: `pointer` is `out`, valid for writes of `size` bytes during the call and
    // referenced nowhere else; `T: Plain` takes any bytes.
    unsafe { dev.ioctl_with_pointers(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q) }?;
    Ok(out)
}

/// `VM_CREATE` with the default range; the VM's id.
pub fn vm_create(dev: &Drm) -> Result<u32, Errno> {
    let mut a = VmCreate::default();
    dev.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut a)?;
    Ok(a.id)
}

/// `VM_GET_STATE`: `DRM_PANTHOR_VM_STATE_*`.
pub fn vm_state(dev: &Drm, vm: u32) -> Result<u32, Errno> {
    let mut a = VmGetState {
        vm_id: vm,
        state: 0,
    };
    dev.ioctl(DRM_IOCTL_PANTHOR_VM_GET_STATE, &mut a)?;
    Ok(a.state)
}

/// `BO_CREATE` of `size` bytes: the handle and the size the driver made (page-aligned).
pub fn bo_create(dev: &Drm, size: u64) -> Result<(u32, u64), Errno> {
    let mut a = BoCreate {
        size,
        ..BoCreate::default()
    };
    dev.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut a)?;
    Ok((a.handle, a.size))
}

/// `BO_MMAP_OFFSET`: the fake offset to `mmap` the BO at.
pub fn bo_mmap_offset(dev: &Drm, handle: u32) -> Result<u64, Errno> {
    let mut a = BoMmapOffset {
        handle,
        ..BoMmapOffset::default()
    };
    dev.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut a)?;
    Ok(a.offset)
}

/// A `MAP` operation of `size` bytes of BO `handle` (from its start) at `va`, without sync
/// operations (`vm_bind` adds them).
pub fn map_op(handle: u32, va: u64, size: u64) -> VmBindOp {
    VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        bo_handle: handle,
        bo_offset: 0,
        va,
        size,
        syncs: obj_array::<SyncOp>(&[]),
    }
}

/// An `UNMAP` operation of `size` bytes at `va`, without sync operations.
pub fn unmap_op(va: u64, size: u64) -> VmBindOp {
    VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
        bo_handle: 0,
        bo_offset: 0,
        va,
        size,
        syncs: obj_array::<SyncOp>(&[]),
    }
}

/// `VM_BIND` of `ops` on `vm` with `flags` (`DRM_PANTHOR_VM_BIND_ASYNC` or 0); each op's sync
/// operations are `syncs[i]`.
pub fn vm_bind(
    dev: &Drm,
    vm: u32,
    flags: u32,
    ops: &[VmBindOp],
    syncs: &[&[SyncOp]],
) -> Result<(), Errno> {
    let ops: Vec<VmBindOp> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| VmBindOp {
            syncs: obj_array(syncs.get(i).copied().unwrap_or(&[])),
            ..*op
        })
        .collect();
    let mut a = VmBind {
        vm_id: vm,
        flags,
        ops: obj_array(&ops),
    };
    // SAFETY: `ops` and every `syncs[i]` it points to are alive and unmoved until the call
    // returns, each with the count and stride its `ObjArray` gives; the kernel only reads
    // them.
    unsafe { dev.ioctl_with_pointers(DRM_IOCTL_PANTHOR_VM_BIND, &mut a) }.map(|_| ())
}

/// Queue and group parameters of `GROUP_CREATE` as the Tyr driver's tests and demo use them:
/// compute, fragment and tiler on core 0, one core each.
pub fn group_create(dev: &Drm, vm: u32, rings: &[u32], priority: u8) -> Result<u32, Errno> {
    let queues: Vec<QueueCreate> = rings
        .iter()
        .map(|&ringbuf_size| QueueCreate {
            priority: 0,
            pad: [0; 3],
            ringbuf_size,
        })
        .collect();
    let mut a = GroupCreate {
        queues: obj_array(&queues),
        max_compute_cores: 1,
        max_fragment_cores: 1,
        max_tiler_cores: 1,
        priority,
        compute_core_mask: 1,
        fragment_core_mask: 1,
        tiler_core_mask: 1,
        vm_id: vm,
        ..GroupCreate::default()
    };
    // SAFETY: `queues` is alive and unmoved until the call returns, with the count and
    // stride of `a.queues`; the kernel only reads it.
    unsafe { dev.ioctl_with_pointers(DRM_IOCTL_PANTHOR_GROUP_CREATE, &mut a) }?;
    Ok(a.group_handle)
}

/// `GROUP_GET_STATE`: the state flags and the mask of queues with a fatal fault.
pub fn group_state(dev: &Drm, group: u32) -> Result<(u32, u32), Errno> {
    let mut a = GroupGetState {
        group_handle: group,
        ..GroupGetState::default()
    };
    dev.ioctl(DRM_IOCTL_PANTHOR_GROUP_GET_STATE, &mut a)?;
    Ok((a.state, a.fatal_queues))
}

/// One job of a submission.
#[derive(Clone, Debug, Default)]
pub struct Job {
    /// Queue index in the group.
    pub queue: u32,
    /// GPU address of the command stream (64-byte aligned).
    pub addr: u64,
    /// Size of the stream in bytes (a multiple of 8).
    pub size: u32,
    /// Syncobjs to wait on.
    pub waits: Vec<u32>,
    /// Syncobjs to signal.
    pub signals: Vec<u32>,
}

/// One job of a submission with its sync operations as given (binary or timeline, in the
/// order the kernel is to read them).
#[derive(Clone, Debug, Default)]
pub struct JobOps {
    /// Queue index in the group.
    pub queue: u32,
    /// GPU address of the command stream (64-byte aligned; 0 with a size of 0).
    pub addr: u64,
    /// Size of the stream in bytes (a multiple of 8).
    pub size: u32,
    /// The job's sync operations.
    pub syncs: Vec<SyncOp>,
}

impl From<&Job> for JobOps {
    /// Waits first, then signals, all binary.
    fn from(j: &Job) -> Self {
        let waits = j.waits.iter().map(|&h| sync_op(false, h));
        JobOps {
            queue: j.queue,
            addr: j.addr,
            size: j.size,
            syncs: waits
                .chain(j.signals.iter().map(|&h| sync_op(true, h)))
                .collect(),
        }
    }
}

/// `GROUP_SUBMIT` of `jobs` to `group`.
pub fn group_submit(dev: &Drm, group: u32, jobs: &[Job]) -> Result<(), Errno> {
    let jobs: Vec<JobOps> = jobs.iter().map(JobOps::from).collect();
    group_submit_ops(dev, group, &jobs)
}

/// `GROUP_SUBMIT` of `jobs`, with their own sync operations, to `group`.
pub fn group_submit_ops(dev: &Drm, group: u32, jobs: &[JobOps]) -> Result<(), Errno> {
    let submits: Vec<QueueSubmit> = jobs
        .iter()
        .map(|j| QueueSubmit {
            queue_index: j.queue,
            stream_size: j.size,
            stream_addr: j.addr,
            latest_flush: 0,
            pad: 0,
            syncs: obj_array(&j.syncs),
        })
        .collect();
    let mut a = GroupSubmit {
        group_handle: group,
        pad: 0,
        queue_submits: obj_array(&submits),
    };
    // SAFETY: `submits` and the sync-op vector of every job of `jobs` it points to are alive
    // and unmoved until the call returns, with the counts and strides of their `ObjArray`s;
    // the kernel only reads them.
    unsafe { dev.ioctl_with_pointers(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut a) }.map(|_| ())
}

/// `TILER_HEAP_CREATE` in `vm`: the argument as the kernel wrote it back (handle and
/// addresses).
pub fn tiler_heap_create(
    dev: &Drm,
    vm: u32,
    initial_chunks: u32,
    chunk_size: u32,
    max_chunks: u32,
    target_in_flight: u32,
) -> Result<TilerHeapCreate, Errno> {
    let mut a = TilerHeapCreate {
        vm_id: vm,
        initial_chunk_count: initial_chunks,
        chunk_size,
        max_chunks,
        target_in_flight,
        ..TilerHeapCreate::default()
    };
    dev.ioctl(DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE, &mut a)?;
    Ok(a)
}

/// Where the Tyr driver shows the least kernel stack left where its simulated GPU ran:
/// `least_left <bytes>`.
pub const STACK_PATH: &str = "/sys/kernel/tyr/stack";

/// Stack a kernel path that steps the simulated GPU must leave: a quarter of the 16 KiB
/// kernel stack, room for the kernel's own leaves below it (lockdep, printk, an interrupt
/// taken on the task's stack).
pub const STACK_MARGIN: u64 = 4096;

/// Reads [`STACK_PATH`]: the bytes of kernel stack left, `None` if the simulated GPU has not
/// run on a task's stack.
pub fn stack_least_left(path: &str) -> Result<Option<u64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {}", Errno::from(e)))?;
    let n = text
        .strip_suffix('\n')
        .unwrap_or(&text)
        .strip_prefix("least_left ")
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| format!("{path}: `{}` is not `least_left <bytes>`", text.trim_end()))?;
    Ok((n != u64::MAX).then_some(n))
}

/// Where the Tyr driver shows its live-object counts.
pub const LIVE_PATH: &str = "/sys/kernel/tyr/live";

/// The Tyr driver's live objects, from [`LIVE_PATH`]: one line
/// `devices <n> bos <n> blocks <n> gpu_pages <n>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Live Tyr devices' driver data.
    pub devices: u64,
    /// Live buffer objects.
    pub bos: u64,
    /// Live blocks of the driver's `kvmalloc` allocator.
    pub blocks: u64,
    /// Live pages of the simulated GPU's memory.
    pub gpu_pages: u64,
}

/// The names of the counts, in the order of the line.
const LIVE_NAMES: [&str; 4] = ["devices", "bos", "blocks", "gpu_pages"];

impl LiveCounts {
    /// Parses the file's contents strictly: exactly one line (its newline optional), the four
    /// names in order, each followed by one space and a decimal count, single spaces between.
    pub fn parse(text: &str) -> Result<Self, String> {
        let line = text.strip_suffix('\n').unwrap_or(text);
        let bad = |why: &str| Err(format!("{why} in {text:?}"));
        if line.contains('\n') {
            return bad("more than one line");
        }
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() != 2 * LIVE_NAMES.len() {
            return bad("not 4 name-count pairs separated by single spaces");
        }
        let mut counts = [0u64; 4];
        for (i, name) in LIVE_NAMES.iter().enumerate() {
            if fields[2 * i] != *name {
                return bad(&format!("field {} is not `{name}`", 2 * i + 1));
            }
            let n = fields[2 * i + 1];
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return bad(&format!("the count of `{name}` is not a decimal number"));
            }
            counts[i] = match n.parse() {
                Ok(v) => v,
                Err(_) => return bad(&format!("the count of `{name}` overflows")),
            };
        }
        let [devices, bos, blocks, gpu_pages] = counts;
        Ok(LiveCounts {
            devices,
            bos,
            blocks,
            gpu_pages,
        })
    }

    /// Reads and parses [`LIVE_PATH`] (or another file).
    pub fn read(path: &str) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{path}: {}", Errno::from(e)))?;
        Self::parse(&text)
    }

    /// The counts as `(name, value)` pairs.
    pub fn pairs(&self) -> [(&'static str, u64); 4] {
        let v = [self.devices, self.bos, self.blocks, self.gpu_pages];
        [0, 1, 2, 3].map(|i| (LIVE_NAMES[i], v[i]))
    }

    /// Whether every count is 0 (nothing leaked).
    pub fn all_zero(&self) -> bool {
        self.pairs().iter().all(|&(_, v)| v == 0)
    }

    /// The names of the counts that are 0.
    pub fn zeros(&self) -> Vec<&'static str> {
        self.pairs()
            .iter()
            .filter(|&&(_, v)| v == 0)
            .map(|&(n, _)| n)
            .collect()
    }
}

impl std::fmt::Display for LiveCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c, d] = self.pairs();
        write!(
            f,
            "{} {} {} {} {} {} {} {}",
            a.0, a.1, b.0, b.1, c.0, c.1, d.0, d.1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_counts_parse_strictly() {
        let c = LiveCounts::parse("devices 1 bos 3 blocks 57 gpu_pages 1234\n").unwrap();
        assert_eq!(
            c,
            LiveCounts {
                devices: 1,
                bos: 3,
                blocks: 57,
                gpu_pages: 1234
            }
        );
        assert_eq!(c.to_string(), "devices 1 bos 3 blocks 57 gpu_pages 1234");
        assert!(c.zeros().is_empty() && !c.all_zero());
        let zero = LiveCounts::parse("devices 0 bos 0 blocks 0 gpu_pages 0").unwrap();
        assert!(zero.all_zero());
        assert_eq!(zero.zeros().len(), 4);
        assert_eq!(
            LiveCounts::parse("devices 0 bos 2 blocks 0 gpu_pages 9\n")
                .unwrap()
                .zeros(),
            ["devices", "blocks"]
        );
        for bad in [
            "",
            "\n",
            "devices 1 bos 3 blocks 57\n",
            "devices 1 bos 3 blocks 57 gpu_pages 1234 extra 1\n",
            "devices 1 bos 3 gpu_pages 1234 blocks 57\n",
            "devices  1 bos 3 blocks 57 gpu_pages 1234\n",
            "devices 1 bos 3 blocks 57 gpu_pages 1234 \n",
            "devices -1 bos 3 blocks 57 gpu_pages 1234\n",
            "devices +1 bos 3 blocks 57 gpu_pages 1234\n",
            "devices 0x1 bos 3 blocks 57 gpu_pages 1234\n",
            "devices 1 bos 3 blocks 57 gpu_pages 99999999999999999999\n",
            "devices 1 bos 3 blocks 57 gpu_pages 1234\n\n",
            "devices 1 bos 3 blocks 57 gpu_pages 1234\ndevices 1 bos 3 blocks 57 gpu_pages 1234\n",
            "Devices 1 bos 3 blocks 57 gpu_pages 1234\n",
            "devices\t1 bos 3 blocks 57 gpu_pages 1234\n",
        ] {
            assert!(LiveCounts::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn reading_a_missing_file_names_it_and_the_errno() {
        let err = LiveCounts::read("/nonexistent/tyr/live").unwrap_err();
        assert_eq!(err, "/nonexistent/tyr/live: ENOENT (2)");
    }

    #[test]
    fn object_arrays_describe_their_slices() {
        let ops = [sync_op(false, 3), sync_op(true, 4)];
        let a = obj_array(&ops);
        assert_eq!((a.stride, a.count), (16, 2));
        assert_eq!(a.array, ops.as_ptr() as u64);
        assert_eq!(
            obj_array::<SyncOp>(&[]),
            ObjArray {
                stride: 16,
                count: 0,
                array: 0
            }
        );
        assert_eq!(ops[0].flags, DRM_PANTHOR_SYNC_OP_WAIT);
        assert_eq!(ops[1].flags, DRM_PANTHOR_SYNC_OP_SIGNAL);
        assert_eq!(ops[1].handle, 4);
    }

    #[test]
    fn ioctl_numbers_are_panthors() {
        // From panthor_drm.h as a C compiler computes them on x86_64 (also pinned by the Tyr
        // crate's own tests, against the header).
        assert_eq!(DRM_IOCTL_PANTHOR_DEV_QUERY, 0xc010_6440);
        assert_eq!(DRM_IOCTL_PANTHOR_VM_BIND, 0xc018_6443);
        assert_eq!(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, 0xc018_6449);
        assert_eq!(
            DRM_IOCTL_PANTHOR_GROUP_SUBMIT,
            crate::drm::driver_iowr(9, size_of::<GroupSubmit>())
        );
    }

    #[test]
    fn calls_on_another_file_fail_with_the_errno() {
        let f = crate::drm::Drm::open("/dev/null").expect("/dev/null opens");
        assert_eq!(vm_create(&f), Err(Errno(libc::ENOTTY)));
        assert_eq!(
            dev_query::<GpuInfo>(&f, DRM_PANTHOR_DEV_QUERY_GPU_INFO).map(|_| ()),
            Err(Errno(libc::ENOTTY))
        );
        let job = Job {
            addr: 0x100_0000,
            size: 8,
            waits: vec![1],
            signals: vec![2],
            ..Job::default()
        };
        assert_eq!(group_submit(&f, 1, &[job]), Err(Errno(libc::ENOTTY)));
    }
}
