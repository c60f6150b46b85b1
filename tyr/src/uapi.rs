// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The panthor uAPI (`include/uapi/drm/panthor_drm.h`): the structures userspace (Mesa's
//! panvk/panfrost) exchanges with the driver, byte for byte, and the ioctl numbers.
//!
//! Every structure is `#[repr(C)]` with explicit padding fields, so its layout is the C one;
//! the tests pin the size and the offset of every field. Structures that grew over time (the
//! ones reached through a pointer or an [`ObjArray`]) have a *minimum size*: userspace may pass
//! any size from that minimum on, the driver copies what both sides know and zero-fills or
//! ignores the rest ([`MIN_SIZE`](UObj::MIN_SIZE)).
//!
//! # Examples
//!
//! ```
//! use tyr::uapi::{self, DevQuery};
//!
//! assert_eq!(uapi::DRM_IOCTL_PANTHOR_DEV_QUERY, 0xc010_6440);
//! let q = DevQuery { type_: uapi::DRM_PANTHOR_DEV_QUERY_GPU_INFO, size: 0, pointer: 0 };
//! assert_eq!(core::mem::size_of_val(&q), 16);
//! ```

use drm_ctx::drm::ioctl::{IoctlArg, IOWR};

/// An array of objects in user memory (`drm_panthor_obj_array`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjArray {
    /// Size of one element as userspace knows it.
    pub stride: u32,
    /// Number of elements.
    pub count: u32,
    /// User address of the first element.
    pub array: u64,
}

/// Synchronisation operation (`drm_panthor_sync_op`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncOp {
    /// Handle type and wait/signal.
    pub flags: u32,
    /// Syncobj handle.
    pub handle: u32,
    /// Timeline point.
    pub timeline_value: u64,
}

/// `DEV_QUERY` types.
pub const DRM_PANTHOR_DEV_QUERY_GPU_INFO: u32 = 0;
/// `DEV_QUERY` types.
pub const DRM_PANTHOR_DEV_QUERY_CSIF_INFO: u32 = 1;
/// `DEV_QUERY` types.
pub const DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO: u32 = 2;
/// `DEV_QUERY` types.
pub const DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO: u32 = 3;

/// GPU information (`drm_panthor_gpu_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuInfo {
    /// `GPU_ID`.
    pub gpu_id: u32,
    /// `REVIDR`.
    pub gpu_rev: u32,
    /// `CSF_ID`.
    pub csf_id: u32,
    /// `L2_FEATURES`.
    pub l2_features: u32,
    /// `TILER_FEATURES`.
    pub tiler_features: u32,
    /// `MEM_FEATURES`.
    pub mem_features: u32,
    /// `MMU_FEATURES`.
    pub mmu_features: u32,
    /// `THREAD_FEATURES`.
    pub thread_features: u32,
    /// `THREAD_MAX_THREADS`.
    pub max_threads: u32,
    /// `THREAD_MAX_WORKGROUP_SIZE`.
    pub thread_max_workgroup_size: u32,
    /// `THREAD_MAX_BARRIER_SIZE`.
    pub thread_max_barrier_size: u32,
    /// `COHERENCY_FEATURES`.
    pub coherency_features: u32,
    /// `TEXTURE_FEATURES_0..3`.
    pub texture_features: [u32; 4],
    /// `AS_PRESENT`.
    pub as_present: u32,
    /// Coherency protocol in use.
    pub selected_coherency: u32,
    /// `SHADER_PRESENT`.
    pub shader_present: u64,
    /// `L2_PRESENT`.
    pub l2_present: u64,
    /// `TILER_PRESENT`.
    pub tiler_present: u64,
    /// `CORE_FEATURES`.
    pub core_features: u32,
    /// Must be zero.
    pub pad: u32,
    /// `GPU_FEATURES`.
    pub gpu_features: u64,
}

/// Coherency: none.
pub const DRM_PANTHOR_GPU_COHERENCY_NONE: u32 = 31;

/// Command-stream interface information (`drm_panthor_csif_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CsifInfo {
    /// Command-stream group slots.
    pub csg_slot_count: u32,
    /// Command-stream slots per group.
    pub cs_slot_count: u32,
    /// Registers per command stream.
    pub cs_reg_count: u32,
    /// Scoreboard slots.
    pub scoreboard_slot_count: u32,
    /// Registers not preserved across calls.
    pub unpreserved_cs_reg_count: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `TIMESTAMP_INFO` flag: fill the GPU timestamp.
pub const DRM_PANTHOR_TIMESTAMP_GPU: u32 = 1 << 0;
/// `TIMESTAMP_INFO` CPU timestamp type: none.
pub const DRM_PANTHOR_TIMESTAMP_CPU_NONE: u32 = 0 << 1;
/// `TIMESTAMP_INFO` CPU timestamp type: `CLOCK_MONOTONIC`.
pub const DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC: u32 = 1 << 1;
/// `TIMESTAMP_INFO` CPU timestamp type: `CLOCK_MONOTONIC_RAW`.
pub const DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC_RAW: u32 = 2 << 1;
/// `TIMESTAMP_INFO` flag mask of the CPU timestamp type.
pub const DRM_PANTHOR_TIMESTAMP_CPU_TYPE_MASK: u32 = 7 << 1;
/// `TIMESTAMP_INFO` flag: fill the timestamp offset.
pub const DRM_PANTHOR_TIMESTAMP_GPU_OFFSET: u32 = 1 << 4;
/// `TIMESTAMP_INFO` flag: fill the cycle count.
pub const DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT: u32 = 1 << 5;
/// `TIMESTAMP_INFO` flag: fill the frequency.
pub const DRM_PANTHOR_TIMESTAMP_FREQ: u32 = 1 << 6;
/// `TIMESTAMP_INFO` flag: fill the duration.
pub const DRM_PANTHOR_TIMESTAMP_DURATION: u32 = 1 << 7;

/// Timestamp information (`drm_panthor_timestamp_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimestampInfo {
    /// Frequency of the timestamp counter, in Hz.
    pub timestamp_frequency: u64,
    /// Current timestamp.
    pub current_timestamp: u64,
    /// `TIMESTAMP_OFFSET`.
    pub timestamp_offset: u64,
    /// What to query (input) / what was filled.
    pub flags: u32,
    /// Time the query took, in ns.
    pub duration_nsec: u32,
    /// `CYCLE_COUNT`.
    pub cycle_count: u64,
    /// CPU timestamp, seconds.
    pub cpu_timestamp_sec: u64,
    /// CPU timestamp, nanoseconds.
    pub cpu_timestamp_nsec: u64,
}

/// Group priorities the caller may use (`drm_panthor_group_priorities_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupPrioritiesInfo {
    /// One bit per allowed priority.
    pub allowed_mask: u8,
    /// Must be zero.
    pub pad: [u8; 3],
}

/// Group priorities.
pub const PANTHOR_GROUP_PRIORITY_LOW: u8 = 0;
/// Group priorities.
pub const PANTHOR_GROUP_PRIORITY_MEDIUM: u8 = 1;
/// Group priorities.
pub const PANTHOR_GROUP_PRIORITY_HIGH: u8 = 2;
/// Group priorities.
pub const PANTHOR_GROUP_PRIORITY_REALTIME: u8 = 3;

/// `DEV_QUERY` argument (`drm_panthor_dev_query`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevQuery {
    /// `DRM_PANTHOR_DEV_QUERY_*`.
    pub type_: u32,
    /// Size of the user buffer (set to the object size when `pointer` is 0).
    pub size: u32,
    /// User address of the buffer, or 0 to ask for the size.
    pub pointer: u64,
}

/// `VM_CREATE` argument (`drm_panthor_vm_create`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmCreate {
    /// Must be zero.
    pub flags: u32,
    /// The new VM's ID (output).
    pub id: u32,
    /// Requested user VA range (input, 0 for the default); the actual one (output).
    pub user_va_range: u64,
}

/// `VM_DESTROY` argument (`drm_panthor_vm_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmDestroy {
    /// The VM.
    pub id: u32,
    /// Must be zero.
    pub pad: u32,
}

/// Bind op flag: map read-only.
pub const DRM_PANTHOR_VM_BIND_OP_MAP_READONLY: u32 = 1 << 0;
/// Bind op flag: map non-executable.
pub const DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC: u32 = 1 << 1;
/// Bind op flag: map uncached.
pub const DRM_PANTHOR_VM_BIND_OP_MAP_UNCACHED: u32 = 1 << 2;
/// Bind op flag: sparse mapping (not supported here).
pub const DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE: u32 = 1 << 3;
/// Bind op type mask.
pub const DRM_PANTHOR_VM_BIND_OP_TYPE_MASK: u32 = 0xf << 28;
/// Bind op type: map.
pub const DRM_PANTHOR_VM_BIND_OP_TYPE_MAP: u32 = 0 << 28;
/// Bind op type: unmap.
pub const DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP: u32 = 1 << 28;
/// Bind op type: only synchronise.
pub const DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY: u32 = 2 << 28;

/// One VM_BIND operation (`drm_panthor_vm_bind_op`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmBindOp {
    /// Type and map flags.
    pub flags: u32,
    /// BO to map (MAP only).
    pub bo_handle: u32,
    /// Offset in the BO (MAP only).
    pub bo_offset: u64,
    /// GPU virtual address.
    pub va: u64,
    /// Size in bytes.
    pub size: u64,
    /// Synchronisation operations ([`SyncOp`]s).
    pub syncs: ObjArray,
}

/// VM_BIND flag: asynchronous.
pub const DRM_PANTHOR_VM_BIND_ASYNC: u32 = 1 << 0;

/// `VM_BIND` argument (`drm_panthor_vm_bind`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmBind {
    /// The VM.
    pub vm_id: u32,
    /// `DRM_PANTHOR_VM_BIND_*`.
    pub flags: u32,
    /// The operations ([`VmBindOp`]s); on failure `count` is set to the failing index.
    pub ops: ObjArray,
}

/// VM state: usable.
pub const DRM_PANTHOR_VM_STATE_USABLE: u32 = 0;
/// VM state: unusable (an unrecoverable fault happened).
pub const DRM_PANTHOR_VM_STATE_UNUSABLE: u32 = 1;

/// `VM_GET_STATE` argument (`drm_panthor_vm_get_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmGetState {
    /// The VM.
    pub vm_id: u32,
    /// `DRM_PANTHOR_VM_STATE_*` (output).
    pub state: u32,
}

/// BO flag: never mapped by the CPU.
pub const DRM_PANTHOR_BO_NO_MMAP: u32 = 1 << 0;
/// BO flag: CPU mappings are write-back cached.
pub const DRM_PANTHOR_BO_WB_MMAP: u32 = 1 << 1;

/// `BO_CREATE` argument (`drm_panthor_bo_create`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoCreate {
    /// Requested size (input); the page-aligned size (output).
    pub size: u64,
    /// `DRM_PANTHOR_BO_*`.
    pub flags: u32,
    /// A VM the BO is private to, or 0.
    pub exclusive_vm_id: u32,
    /// The new handle (output).
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `BO_MMAP_OFFSET` argument (`drm_panthor_bo_mmap_offset`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoMmapOffset {
    /// The BO.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
    /// The fake offset to pass to mmap (output).
    pub offset: u64,
}

/// `TILER_HEAP_CREATE` argument (`drm_panthor_tiler_heap_create`); the driver has no tiler
/// heaps yet, the structure gives the table entry its size.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TilerHeapCreate {
    /// The VM the heap lives in.
    pub vm_id: u32,
    /// Chunks allocated at creation.
    pub initial_chunk_count: u32,
    /// Size of one chunk.
    pub chunk_size: u32,
    /// Most chunks the heap may grow to.
    pub max_chunks: u32,
    /// Render passes in flight before the heap asks for more memory.
    pub target_in_flight: u32,
    /// The new heap's handle (output).
    pub handle: u32,
    /// GPU address of the heap context (output).
    pub tiler_heap_ctx_gpu_va: u64,
    /// GPU address of the first chunk (output).
    pub first_heap_chunk_gpu_va: u64,
}

/// `TILER_HEAP_DESTROY` argument (`drm_panthor_tiler_heap_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TilerHeapDestroy {
    /// The heap.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// Longest BO label, its terminating NUL included (`PANTHOR_BO_LABEL_MAXLEN`).
pub const PANTHOR_BO_LABEL_MAXLEN: usize = 4096;

/// `BO_SET_LABEL` argument (`drm_panthor_bo_set_label`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoSetLabel {
    /// The BO.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
    /// User address of a NUL-terminated label, or 0 to remove the label.
    pub label: u64,
}

/// File offset of the user MMIO pages for a client whose `unsigned long` has 32 bits.
pub const DRM_PANTHOR_USER_MMIO_OFFSET_32BIT: u64 = 1 << 43;
/// File offset of the user MMIO pages for a client whose `unsigned long` has 64 bits.
pub const DRM_PANTHOR_USER_MMIO_OFFSET_64BIT: u64 = 1 << 56;
/// The user MMIO offset of a client built like this crate (chosen by the size of
/// `unsigned long`, as the C header does).
pub const DRM_PANTHOR_USER_MMIO_OFFSET: u64 = if core::mem::size_of::<core::ffi::c_ulong>() < 8 {
    DRM_PANTHOR_USER_MMIO_OFFSET_32BIT
} else {
    DRM_PANTHOR_USER_MMIO_OFFSET_64BIT
};
/// File offset of the page whose first register is `LATEST_FLUSH_ID`.
pub const DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET: u64 = DRM_PANTHOR_USER_MMIO_OFFSET;

/// `SET_USER_MMIO_OFFSET` argument (`drm_panthor_set_user_mmio_offset`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetUserMmioOffset {
    /// [`DRM_PANTHOR_USER_MMIO_OFFSET_32BIT`] or [`DRM_PANTHOR_USER_MMIO_OFFSET_64BIT`].
    pub offset: u64,
}

/// `BO_SYNC` op type: write dirty CPU cache lines back to memory.
pub const DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH: u32 = 0;
/// `BO_SYNC` op type: write dirty CPU cache lines back, then drop them.
pub const DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE: u32 = 1;

/// One range of `BO_SYNC` (`drm_panthor_bo_sync_op`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoSyncOp {
    /// The BO.
    pub handle: u32,
    /// `DRM_PANTHOR_BO_SYNC_*`.
    pub type_: u32,
    /// First byte of the range in the BO.
    pub offset: u64,
    /// Size of the range in bytes.
    pub size: u64,
}

/// `BO_SYNC` argument (`drm_panthor_bo_sync`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoSync {
    /// The ranges ([`BoSyncOp`]s).
    pub ops: ObjArray,
}

/// `BO_QUERY_INFO` extra flag: the BO was imported from another driver.
pub const DRM_PANTHOR_BO_IS_IMPORTED: u32 = 1 << 0;

/// `BO_QUERY_INFO` argument (`drm_panthor_bo_query_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoQueryInfo {
    /// The BO.
    pub handle: u32,
    /// `DRM_PANTHOR_BO_IS_*` (output).
    pub extra_flags: u32,
    /// The `DRM_PANTHOR_BO_*` flags the BO was created with (output).
    pub create_flags: u32,
    /// Zero on return.
    pub pad: u32,
}

/// Queue description of `GROUP_CREATE` (`drm_panthor_queue_create`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCreate {
    /// Priority inside the group, 0 to 15.
    pub priority: u8,
    /// Must be zero.
    pub pad: [u8; 3],
    /// Ring buffer size in bytes: a power of two from 4 KiB to 64 KiB.
    pub ringbuf_size: u32,
}

/// `GROUP_CREATE` argument (`drm_panthor_group_create`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCreate {
    /// The queues ([`QueueCreate`]s).
    pub queues: ObjArray,
    /// Most shader cores compute work may use at once.
    pub max_compute_cores: u8,
    /// Most shader cores fragment work may use at once.
    pub max_fragment_cores: u8,
    /// Most tiler cores the group may use at once.
    pub max_tiler_cores: u8,
    /// `PANTHOR_GROUP_PRIORITY_*`.
    pub priority: u8,
    /// Must be zero.
    pub pad: u32,
    /// Shader cores compute work may run on.
    pub compute_core_mask: u64,
    /// Shader cores fragment work may run on.
    pub fragment_core_mask: u64,
    /// Tiler cores the group may use.
    pub tiler_core_mask: u64,
    /// The VM the group's queues run in.
    pub vm_id: u32,
    /// The new group's handle (output).
    pub group_handle: u32,
}

/// `GROUP_DESTROY` argument (`drm_panthor_group_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupDestroy {
    /// The group.
    pub group_handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// One job of `GROUP_SUBMIT` (`drm_panthor_queue_submit`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueSubmit {
    /// Index of the queue in the group.
    pub queue_index: u32,
    /// Size of the user command stream in bytes (a multiple of 8; 0 for a job that only
    /// synchronises).
    pub stream_size: u32,
    /// GPU address of the user command stream (64-byte aligned; 0 with a size of 0).
    pub stream_addr: u64,
    /// Flush ID the stream was built against (bits 30:24 must be zero).
    pub latest_flush: u32,
    /// Must be zero.
    pub pad: u32,
    /// Synchronisation operations ([`SyncOp`]s).
    pub syncs: ObjArray,
}

/// `GROUP_SUBMIT` argument (`drm_panthor_group_submit`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupSubmit {
    /// The group.
    pub group_handle: u32,
    /// Must be zero.
    pub pad: u32,
    /// The jobs ([`QueueSubmit`]s).
    pub queue_submits: ObjArray,
}

/// Group state: the group had unfinished jobs when it timed out (or was reset).
pub const DRM_PANTHOR_GROUP_STATE_TIMEDOUT: u32 = 1 << 0;
/// Group state: the group hit a fatal fault.
pub const DRM_PANTHOR_GROUP_STATE_FATAL_FAULT: u32 = 1 << 1;
/// Group state: the group was killed by a reset another group caused.
pub const DRM_PANTHOR_GROUP_STATE_INNOCENT: u32 = 1 << 2;

/// `GROUP_GET_STATE` argument (`drm_panthor_group_get_state`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupGetState {
    /// The group.
    pub group_handle: u32,
    /// `DRM_PANTHOR_GROUP_STATE_*` (output).
    pub state: u32,
    /// Bitmask of the queues that hit a fatal fault (output).
    pub fatal_queues: u32,
    /// Must be zero.
    pub pad: u32,
}

/// Sync op: mask of the handle type.
pub const DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_MASK: u32 = 0xff;
/// Sync op handle type: binary syncobj.
pub const DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ: u32 = 0;
/// Sync op handle type: timeline syncobj.
pub const DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ: u32 = 1;
/// Sync op: wait.
pub const DRM_PANTHOR_SYNC_OP_WAIT: u32 = 0;
/// Sync op: signal.
pub const DRM_PANTHOR_SYNC_OP_SIGNAL: u32 = 1 << 31;

macro_rules! ioctl_args {
    ($($t:ty),*) => {$(
        // SAFETY: `repr(C)` structure of integers (and arrays of them) whose fields leave no
        // padding (pinned by the layout tests), so every bit pattern is valid.
        unsafe impl IoctlArg for $t {}
    )*};
}
ioctl_args!(
    ObjArray,
    SyncOp,
    GpuInfo,
    CsifInfo,
    TimestampInfo,
    GroupPrioritiesInfo,
    DevQuery,
    VmCreate,
    VmDestroy,
    VmBindOp,
    VmBind,
    VmGetState,
    BoCreate,
    BoMmapOffset,
    QueueCreate,
    GroupCreate,
    GroupDestroy,
    QueueSubmit,
    GroupSubmit,
    GroupGetState,
    TilerHeapCreate,
    TilerHeapDestroy,
    BoSetLabel,
    SetUserMmioOffset,
    BoSyncOp,
    BoSync,
    BoQueryInfo
);

/// An object userspace may pass in several sizes.
pub trait UObj: IoctlArg + Default {
    /// The smallest size userspace may pass (the end of the last field of the first version).
    const MIN_SIZE: usize;
}

impl UObj for GpuInfo {
    const MIN_SIZE: usize = core::mem::offset_of!(GpuInfo, tiler_present) + 8;
}
impl UObj for CsifInfo {
    const MIN_SIZE: usize = core::mem::size_of::<CsifInfo>();
}
impl UObj for TimestampInfo {
    const MIN_SIZE: usize = core::mem::offset_of!(TimestampInfo, current_timestamp) + 8;
}
impl UObj for GroupPrioritiesInfo {
    const MIN_SIZE: usize = core::mem::size_of::<GroupPrioritiesInfo>();
}
impl UObj for SyncOp {
    const MIN_SIZE: usize = core::mem::size_of::<SyncOp>();
}
impl UObj for VmBindOp {
    const MIN_SIZE: usize = core::mem::size_of::<VmBindOp>();
}
impl UObj for QueueCreate {
    const MIN_SIZE: usize = core::mem::size_of::<QueueCreate>();
}
impl UObj for QueueSubmit {
    const MIN_SIZE: usize = core::mem::size_of::<QueueSubmit>();
}
impl UObj for BoSyncOp {
    const MIN_SIZE: usize = core::mem::size_of::<BoSyncOp>();
}

/// The panthor command numbers (added to the DRM driver command base).
pub mod nr {
    /// `DEV_QUERY`.
    pub const DEV_QUERY: u32 = 0;
    /// `VM_CREATE`.
    pub const VM_CREATE: u32 = 1;
    /// `VM_DESTROY`.
    pub const VM_DESTROY: u32 = 2;
    /// `VM_BIND`.
    pub const VM_BIND: u32 = 3;
    /// `VM_GET_STATE`.
    pub const VM_GET_STATE: u32 = 4;
    /// `BO_CREATE`.
    pub const BO_CREATE: u32 = 5;
    /// `BO_MMAP_OFFSET`.
    pub const BO_MMAP_OFFSET: u32 = 6;
    /// `GROUP_CREATE` .
    pub const GROUP_CREATE: u32 = 7;
    /// `GROUP_DESTROY` .
    pub const GROUP_DESTROY: u32 = 8;
    /// `GROUP_SUBMIT` .
    pub const GROUP_SUBMIT: u32 = 9;
    /// `GROUP_GET_STATE` .
    pub const GROUP_GET_STATE: u32 = 10;
    /// `TILER_HEAP_CREATE`.
    pub const TILER_HEAP_CREATE: u32 = 11;
    /// `TILER_HEAP_DESTROY`.
    pub const TILER_HEAP_DESTROY: u32 = 12;
    /// `BO_SET_LABEL`.
    pub const BO_SET_LABEL: u32 = 13;
    /// `SET_USER_MMIO_OFFSET`.
    pub const SET_USER_MMIO_OFFSET: u32 = 14;
    /// `BO_SYNC`.
    pub const BO_SYNC: u32 = 15;
    /// `BO_QUERY_INFO`.
    pub const BO_QUERY_INFO: u32 = 16;
}

const BASE: u32 = drm_ctx::drm::ioctl::COMMAND_BASE;

/// `DRM_IOCTL_PANTHOR_DEV_QUERY`.
pub const DRM_IOCTL_PANTHOR_DEV_QUERY: u32 = IOWR::<DevQuery>(BASE + nr::DEV_QUERY);
/// `DRM_IOCTL_PANTHOR_VM_CREATE`.
pub const DRM_IOCTL_PANTHOR_VM_CREATE: u32 = IOWR::<VmCreate>(BASE + nr::VM_CREATE);
/// `DRM_IOCTL_PANTHOR_VM_DESTROY`.
pub const DRM_IOCTL_PANTHOR_VM_DESTROY: u32 = IOWR::<VmDestroy>(BASE + nr::VM_DESTROY);
/// `DRM_IOCTL_PANTHOR_VM_BIND`.
pub const DRM_IOCTL_PANTHOR_VM_BIND: u32 = IOWR::<VmBind>(BASE + nr::VM_BIND);
/// `DRM_IOCTL_PANTHOR_VM_GET_STATE`.
pub const DRM_IOCTL_PANTHOR_VM_GET_STATE: u32 = IOWR::<VmGetState>(BASE + nr::VM_GET_STATE);
/// `DRM_IOCTL_PANTHOR_BO_CREATE`.
pub const DRM_IOCTL_PANTHOR_BO_CREATE: u32 = IOWR::<BoCreate>(BASE + nr::BO_CREATE);
/// `DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET`.
pub const DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET: u32 = IOWR::<BoMmapOffset>(BASE + nr::BO_MMAP_OFFSET);
/// `DRM_IOCTL_PANTHOR_GROUP_CREATE`.
pub const DRM_IOCTL_PANTHOR_GROUP_CREATE: u32 = IOWR::<GroupCreate>(BASE + nr::GROUP_CREATE);
/// `DRM_IOCTL_PANTHOR_GROUP_DESTROY`.
pub const DRM_IOCTL_PANTHOR_GROUP_DESTROY: u32 = IOWR::<GroupDestroy>(BASE + nr::GROUP_DESTROY);
/// `DRM_IOCTL_PANTHOR_GROUP_SUBMIT`.
pub const DRM_IOCTL_PANTHOR_GROUP_SUBMIT: u32 = IOWR::<GroupSubmit>(BASE + nr::GROUP_SUBMIT);
/// `DRM_IOCTL_PANTHOR_GROUP_GET_STATE`.
pub const DRM_IOCTL_PANTHOR_GROUP_GET_STATE: u32 =
    IOWR::<GroupGetState>(BASE + nr::GROUP_GET_STATE);
/// `DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE`.
pub const DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE: u32 =
    IOWR::<TilerHeapCreate>(BASE + nr::TILER_HEAP_CREATE);
/// `DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY`.
pub const DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY: u32 =
    IOWR::<TilerHeapDestroy>(BASE + nr::TILER_HEAP_DESTROY);
/// `DRM_IOCTL_PANTHOR_BO_SET_LABEL`.
pub const DRM_IOCTL_PANTHOR_BO_SET_LABEL: u32 = IOWR::<BoSetLabel>(BASE + nr::BO_SET_LABEL);
/// `DRM_IOCTL_PANTHOR_SET_USER_MMIO_OFFSET`.
pub const DRM_IOCTL_PANTHOR_SET_USER_MMIO_OFFSET: u32 =
    IOWR::<SetUserMmioOffset>(BASE + nr::SET_USER_MMIO_OFFSET);
/// `DRM_IOCTL_PANTHOR_BO_SYNC`.
pub const DRM_IOCTL_PANTHOR_BO_SYNC: u32 = IOWR::<BoSync>(BASE + nr::BO_SYNC);
/// `DRM_IOCTL_PANTHOR_BO_QUERY_INFO`.
pub const DRM_IOCTL_PANTHOR_BO_QUERY_INFO: u32 = IOWR::<BoQueryInfo>(BASE + nr::BO_QUERY_INFO);

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    macro_rules! layout {
        ($t:ty, $size:expr, { $($f:ident : $off:expr),* $(,)? }) => {
            assert_eq!(size_of::<$t>(), $size, stringify!($t));
            $( assert_eq!(offset_of!($t, $f), $off, concat!(stringify!($t), ".", stringify!($f))); )*
        };
    }

    #[test]
    fn layouts_match_panthor_drm_h() {
        layout!(ObjArray, 16, { stride: 0, count: 4, array: 8 });
        layout!(SyncOp, 16, { flags: 0, handle: 4, timeline_value: 8 });
        layout!(GpuInfo, 112, {
            gpu_id: 0, gpu_rev: 4, csf_id: 8, l2_features: 12, tiler_features: 16,
            mem_features: 20, mmu_features: 24, thread_features: 28, max_threads: 32,
            thread_max_workgroup_size: 36, thread_max_barrier_size: 40, coherency_features: 44,
            texture_features: 48, as_present: 64, selected_coherency: 68, shader_present: 72,
            l2_present: 80, tiler_present: 88, core_features: 96, pad: 100, gpu_features: 104,
        });
        layout!(CsifInfo, 24, {
            csg_slot_count: 0, cs_slot_count: 4, cs_reg_count: 8, scoreboard_slot_count: 12,
            unpreserved_cs_reg_count: 16, pad: 20,
        });
        layout!(TimestampInfo, 56, {
            timestamp_frequency: 0, current_timestamp: 8, timestamp_offset: 16, flags: 24,
            duration_nsec: 28, cycle_count: 32, cpu_timestamp_sec: 40, cpu_timestamp_nsec: 48,
        });
        layout!(GroupPrioritiesInfo, 4, { allowed_mask: 0, pad: 1 });
        layout!(DevQuery, 16, { type_: 0, size: 4, pointer: 8 });
        layout!(VmCreate, 16, { flags: 0, id: 4, user_va_range: 8 });
        layout!(VmDestroy, 8, { id: 0, pad: 4 });
        layout!(VmBindOp, 48, { flags: 0, bo_handle: 4, bo_offset: 8, va: 16, size: 24, syncs: 32 });
        layout!(VmBind, 24, { vm_id: 0, flags: 4, ops: 8 });
        layout!(VmGetState, 8, { vm_id: 0, state: 4 });
        layout!(BoCreate, 24, { size: 0, flags: 8, exclusive_vm_id: 12, handle: 16, pad: 20 });
        layout!(BoMmapOffset, 16, { handle: 0, pad: 4, offset: 8 });
        layout!(QueueCreate, 8, { priority: 0, pad: 1, ringbuf_size: 4 });
        layout!(GroupCreate, 56, {
            queues: 0, max_compute_cores: 16, max_fragment_cores: 17, max_tiler_cores: 18,
            priority: 19, pad: 20, compute_core_mask: 24, fragment_core_mask: 32,
            tiler_core_mask: 40, vm_id: 48, group_handle: 52,
        });
        layout!(GroupDestroy, 8, { group_handle: 0, pad: 4 });
        layout!(QueueSubmit, 40, {
            queue_index: 0, stream_size: 4, stream_addr: 8, latest_flush: 16, pad: 20, syncs: 24,
        });
        layout!(GroupSubmit, 24, { group_handle: 0, pad: 4, queue_submits: 8 });
        layout!(GroupGetState, 16, { group_handle: 0, state: 4, fatal_queues: 8, pad: 12 });
        layout!(TilerHeapCreate, 40, {
            vm_id: 0, initial_chunk_count: 4, chunk_size: 8, max_chunks: 12,
            target_in_flight: 16, handle: 20, tiler_heap_ctx_gpu_va: 24,
            first_heap_chunk_gpu_va: 32,
        });
        layout!(TilerHeapDestroy, 8, { handle: 0, pad: 4 });
        layout!(BoSetLabel, 16, { handle: 0, pad: 4, label: 8 });
        layout!(SetUserMmioOffset, 8, { offset: 0 });
        layout!(BoSyncOp, 24, { handle: 0, type_: 4, offset: 8, size: 16 });
        layout!(BoSync, 16, { ops: 0 });
        layout!(BoQueryInfo, 16, { handle: 0, extra_flags: 4, create_flags: 8, pad: 12 });
    }

    #[test]
    fn user_mmio_offsets_match_panthor_drm_h() {
        assert_eq!(DRM_PANTHOR_USER_MMIO_OFFSET_32BIT, 0x0000_0800_0000_0000);
        assert_eq!(DRM_PANTHOR_USER_MMIO_OFFSET_64BIT, 0x0100_0000_0000_0000);
        // Both are page-aligned file offsets, and the 32-bit one fits a 32-bit page offset.
        assert_eq!(DRM_PANTHOR_USER_MMIO_OFFSET_32BIT % 4096, 0);
        assert!(DRM_PANTHOR_USER_MMIO_OFFSET_32BIT >> 12 <= u64::from(u32::MAX));
        let expected = if cfg!(target_pointer_width = "64") {
            DRM_PANTHOR_USER_MMIO_OFFSET_64BIT
        } else {
            DRM_PANTHOR_USER_MMIO_OFFSET_32BIT
        };
        assert_eq!(DRM_PANTHOR_USER_MMIO_OFFSET, expected);
        assert_eq!(DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET, expected);
    }

    #[test]
    fn minimum_sizes_match_panthor() {
        assert_eq!(GpuInfo::MIN_SIZE, 96);
        assert_eq!(CsifInfo::MIN_SIZE, 24);
        assert_eq!(TimestampInfo::MIN_SIZE, 16);
        assert_eq!(GroupPrioritiesInfo::MIN_SIZE, 4);
        assert_eq!(VmBindOp::MIN_SIZE, 48);
        assert_eq!(SyncOp::MIN_SIZE, 16);
        assert_eq!(BoSyncOp::MIN_SIZE, 24);
    }

    #[test]
    fn ioctl_numbers_match_linux() {
        // _IOWR('d', 0x40 + nr, size) as the C header computes it on arm64 and x86-64.
        assert_eq!(DRM_IOCTL_PANTHOR_DEV_QUERY, 0xc010_6440);
        assert_eq!(DRM_IOCTL_PANTHOR_VM_CREATE, 0xc010_6441);
        assert_eq!(DRM_IOCTL_PANTHOR_VM_DESTROY, 0xc008_6442);
        assert_eq!(DRM_IOCTL_PANTHOR_VM_BIND, 0xc018_6443);
        assert_eq!(DRM_IOCTL_PANTHOR_VM_GET_STATE, 0xc008_6444);
        assert_eq!(DRM_IOCTL_PANTHOR_BO_CREATE, 0xc018_6445);
        assert_eq!(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, 0xc010_6446);
        assert_eq!(DRM_IOCTL_PANTHOR_GROUP_CREATE, 0xc038_6447);
        assert_eq!(DRM_IOCTL_PANTHOR_GROUP_DESTROY, 0xc008_6448);
        assert_eq!(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, 0xc018_6449);
        assert_eq!(DRM_IOCTL_PANTHOR_GROUP_GET_STATE, 0xc010_644a);
        assert_eq!(DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE, 0xc028_644b);
        assert_eq!(DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY, 0xc008_644c);
        assert_eq!(DRM_IOCTL_PANTHOR_BO_SET_LABEL, 0xc010_644d);
        assert_eq!(DRM_IOCTL_PANTHOR_SET_USER_MMIO_OFFSET, 0xc008_644e);
        assert_eq!(DRM_IOCTL_PANTHOR_BO_SYNC, 0xc010_644f);
        assert_eq!(DRM_IOCTL_PANTHOR_BO_QUERY_INFO, 0xc010_6450);
    }
}

static_assertions::const_assert_eq!(core::mem::size_of::<GpuInfo>(), 112);
static_assertions::const_assert_eq!(core::mem::size_of::<VmBindOp>(), 48);
