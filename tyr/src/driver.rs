// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DRM driver: probe, device data, buffer objects, files and the panthor ioctls.
//!
//! [`probe`] runs the hardware bring-up ([`gpu::probe`]), then creates the DRM device through
//! `drm-ctx`'s typestate: the device is allocated unregistered, the GEM objects it needs
//! before userspace can see it (the firmware interface region) are created while the driver
//! data is built, and registration comes last, handing back the `Registered` device that
//! userspace opens.
//!
//! Buffer objects ([`TyrBo`]) are contiguous DMA memory. Each open file ([`TyrFile`]) has up
//! to 32 VMs, numbered from 1, and up to 128 groups. The ioctls follow panthor's validation; a
//! synchronous `VM_BIND` is, unlike panthor's, all or nothing for the whole array of operations
//! (on failure `ops.count` is the index of the failing operation and nothing changed); an
//! asynchronous one queues each operation as a job ([`crate::bindq`]). Groups and submission are
//! in [`crate::sched`] and [`crate::submit`].
//!
//! A VM gets an address space when the GPU needs it ([`vm_activate`]; the scheduler calls it
//! when a group of the VM gets a slot), least recently used first among the VMs no running
//! group needs; binds into an active VM lock, update and flush through the MMU.

use core::marker::PhantomData;
use core::mem::size_of;
use core::sync::atomic::{AtomicU64, Ordering};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use drm_ctx::drm::{self, gem, ioctl, AnyCtx};
use drm_ctx::types::ARef;
use drm_ctx::uaccess::UserMemory;
use drm_ctx::{device, Error as DrmError, Result as DrmResult};
use gpuvm::GemObject;
use register::io::poll::PollClock;
use register::io::Io;

use crate::backend::{Backend, DmaMemory, DmaRegion, PAGE_SIZE};
use crate::mmu::{self, AsSlots};
use crate::regs::{CYCLE_COUNT, TIMESTAMP, TIMESTAMP_OFFSET};
use crate::uapi::{self, UObj};
use crate::vm::{self, BindReq, BoBacking, MmuUpdate, VecSlots, VmLayout};
use crate::{dev_info, gpu, Error, Result};

/// Size of the firmware interface region allocated before registration.
pub const FW_INTERFACE_SIZE: usize = 0x1_0000;
/// VMs per file.
pub const MAX_VMS_PER_FILE: u32 = 32;
/// Timestamp counter frequency reported to userspace, in Hz.
pub const TIMESTAMP_FREQUENCY: u64 = 24_000_000;

/// The driver type for a backend.
pub struct TyrDriver<B>(PhantomData<fn() -> B>);

/// The DRM device of the driver.
pub type TyrDevice<B, C = drm::Registered> = drm::Device<TyrDriver<B>, C>;

/// A VM of the driver.
pub type TyrVm<B> = vm::Vm<<B as Backend>::Dma, BoRef<B>, VecSlots>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Per-device data: the device state, shared with the environment's event thread (which holds
/// it weakly).
pub struct TyrData<B: Backend> {
    inner: Arc<DevInner<B>>,
}

impl<B: Backend> core::ops::Deref for TyrData<B> {
    type Target = DevInner<B>;

    fn deref(&self) -> &DevInner<B> {
        &self.inner
    }
}

impl<B: Backend> TyrData<B> {
    /// The shared device state.
    pub fn shared(&self) -> &Arc<DevInner<B>> {
        &self.inner
    }
}

/// The device state.
pub struct DevInner<B: Backend> {
    /// The environment.
    pub backend: B,
    /// What the probe found.
    pub gpu_info: gpu::GpuInfo,
    /// Command-stream interface information, as the firmware published it.
    pub csif_info: uapi::CsifInfo,
    /// Objects created before registration (the firmware interface region).
    pub fw_objects: Vec<ARef<gem::Object<TyrBo<B>, AnyCtx>>>,
    /// The MCU's VM (address space 0), mapping the firmware interface region.
    pub mcu_vm: Mutex<McuVm<B>>,
    pub(crate) slots: Mutex<AsSlots>,
    next_key: AtomicU64,
    /// Where the firmware's interface blocks are.
    pub fw: crate::sched::FwIface,
    /// Groups, group slots and recovery state.
    pub sched: crate::sched::Sched<B>,
    /// Destroyed VMs whose address space a running group still pins (released at unpin).
    pub(crate) zombie_vms: Mutex<std::collections::BTreeSet<u64>>,
}

/// Arguments of a new buffer object.
pub struct BoArgs<B: Backend> {
    dma: B::Dma,
    id: u64,
    flags: u32,
    exclusive_vm: u64,
}

impl<B: Backend> BoArgs<B> {
    /// Arguments for an object in `dma` with device-unique `id`, `DRM_PANTHOR_BO_*` `flags`,
    /// private to the VM with key `exclusive_vm` (or 0).
    pub fn new(dma: B::Dma, id: u64, flags: u32, exclusive_vm: u64) -> Self {
        BoArgs {
            dma,
            id,
            flags,
            exclusive_vm,
        }
    }
}

/// A buffer object: contiguous DMA memory.
pub struct TyrBo<B: Backend> {
    dma: B::Dma,
    mem: DmaRegion,
    id: u64,
    flags: u32,
    exclusive_vm: u64,
}

impl<B: Backend> TyrBo<B> {
    /// Device address of the first byte.
    pub fn dma_addr(&self) -> u64 {
        self.mem.addr
    }

    /// Writes `data` at byte `offset` through the CPU view (what a CPU mapping of the object
    /// does); [`Error::Invalid`] if it does not fit in the object.
    pub fn cpu_write(&self, offset: u64, data: &[u8]) -> Result {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(Error::Invalid)?;
        if end > self.mem.size() {
            return Err(Error::Invalid);
        }
        let w = crate::sched::Words(&self.dma);
        for (i, b) in data.iter().enumerate() {
            let at = self.mem.addr + offset + i as u64;
            let word = w.rd32(at & !3);
            let shift = (at & 3) * 8;
            w.wr32(
                at & !3,
                (word & !(0xff << shift)) | (u32::from(*b) << shift),
            );
        }
        self.dma.sync_for_device(self.mem.addr + offset, data.len());
        Ok(())
    }

    /// Reads `buf.len()` bytes at byte `offset` through the CPU view; [`Error::Invalid`] if
    /// they do not fit in the object.
    pub fn cpu_read(&self, offset: u64, buf: &mut [u8]) -> Result {
        let end = offset.checked_add(buf.len() as u64).ok_or(Error::Invalid)?;
        if end > self.mem.size() {
            return Err(Error::Invalid);
        }
        let w = crate::sched::Words(&self.dma);
        for (i, b) in buf.iter_mut().enumerate() {
            let at = self.mem.addr + offset + i as u64;
            *b = (w.rd32(at & !3) >> ((at & 3) * 8)) as u8;
        }
        Ok(())
    }

    /// `DRM_PANTHOR_BO_*` flags.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Device-unique ID.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl<B: Backend> Drop for TyrBo<B> {
    fn drop(&mut self) {
        // SAFETY: The object owns `mem`; nothing maps it any more (VMs hold a reference to
        // the object while they map it).
        unsafe { self.dma.free(self.mem) };
    }
}

impl<B: Backend> gem::DriverObject for TyrBo<B> {
    type Driver = TyrDriver<B>;
    type Args = BoArgs<B>;

    fn new(size: usize, args: BoArgs<B>) -> DrmResult<Self> {
        let pages = size.div_ceil(PAGE_SIZE as usize);
        // Large objects are 2M aligned so that VM_BIND can use 2M blocks.
        let align = if size as u64 >= io_pgtable::SZ_2M {
            io_pgtable::SZ_2M
        } else {
            PAGE_SIZE
        };
        let mem = args.dma.alloc(pages, align)?;
        Ok(TyrBo {
            dma: args.dma,
            mem,
            id: args.id,
            flags: args.flags,
            exclusive_vm: args.exclusive_vm,
        })
    }
}

/// A registered buffer object as a VM holds it.
pub struct BoRef<B: Backend>(pub ARef<gem::Object<TyrBo<B>>>);

impl<B: Backend> Clone for BoRef<B> {
    fn clone(&self) -> Self {
        BoRef(self.0.clone())
    }
}

impl<B: Backend> GemObject for BoRef<B> {
    fn id(&self) -> u64 {
        self.0.id
    }

    fn size(&self) -> u64 {
        self.0.size() as u64
    }

    fn resv_id(&self) -> u64 {
        match self.0.exclusive_vm {
            0 => u64::MAX - self.0.id,
            vm => vm,
        }
    }
}

impl<B: Backend> BoBacking for BoRef<B> {
    fn dma_addr(&self) -> u64 {
        self.0.mem.addr
    }

    fn exclusive_vm(&self) -> u64 {
        self.0.exclusive_vm
    }
}

/// Per-file data: the file's VMs and groups.
pub struct TyrFile<B: Backend> {
    pub(crate) vms: Mutex<BTreeMap<u32, Arc<Mutex<TyrVm<B>>>>>,
    groups: Mutex<BTreeMap<u32, Arc<crate::sched::Group<B>>>>,
    /// Queues of the file's groups (created or being created), at most
    /// [`MAX_QUEUES_PER_FILE`].
    queues: core::sync::atomic::AtomicUsize,
}

/// Groups per file.
pub const MAX_GROUPS_PER_FILE: u32 = 128;

/// Queues per file, over all its groups: a sixth of the device's 768 queue interfaces, so that
/// one client cannot take the interfaces every other client needs (`EBUSY` beyond).
pub const MAX_QUEUES_PER_FILE: usize = 128;

impl<B: Backend> TyrFile<B> {
    /// Counts `n` more queues against the file's budget; [`Error::Busy`] if it would be
    /// exceeded.
    pub(crate) fn reserve_queues(&self, n: usize) -> Result<()> {
        use core::sync::atomic::Ordering::AcqRel;
        self.queues
            .fetch_update(AcqRel, core::sync::atomic::Ordering::Acquire, |q| {
                q.checked_add(n).filter(|t| *t <= MAX_QUEUES_PER_FILE)
            })
            .map(|_| ())
            .map_err(|_| Error::Busy)
    }

    /// Gives back `n` queues of the file's budget.
    pub(crate) fn release_queues(&self, n: usize) {
        self.queues
            .fetch_sub(n, core::sync::atomic::Ordering::AcqRel);
    }

    /// Registers a group under the lowest free handle (from 1).
    pub(crate) fn insert_group(&self, g: Arc<crate::sched::Group<B>>) -> Result<u32> {
        let mut groups = lock(&self.groups);
        let h = (1..=MAX_GROUPS_PER_FILE)
            .find(|i| !groups.contains_key(i))
            .ok_or(Error::Busy)?;
        groups.insert(h, g);
        Ok(h)
    }

    /// Removes a group from the file (giving its queues back to the file's budget).
    pub(crate) fn remove_group(&self, handle: u32) -> Option<Arc<crate::sched::Group<B>>> {
        let g = lock(&self.groups).remove(&handle)?;
        self.release_queues(g.queues.len());
        Some(g)
    }

    /// The group `handle`.
    pub fn group(&self, handle: u32) -> Option<Arc<crate::sched::Group<B>>> {
        lock(&self.groups).get(&handle).cloned()
    }

    /// The VM `id`, or [`Error::Invalid`].
    pub fn vm(&self, id: u32) -> Result<Arc<Mutex<TyrVm<B>>>> {
        lock(&self.vms).get(&id).cloned().ok_or(Error::Invalid)
    }

    /// IDs of the file's VMs.
    pub fn vm_ids(&self) -> Vec<u32> {
        lock(&self.vms).keys().copied().collect()
    }
}

impl<B: Backend> drm::DriverFile for TyrFile<B> {
    type Driver = TyrDriver<B>;

    fn open(_device: &TyrDevice<B>) -> DrmResult<Self> {
        Ok(TyrFile {
            vms: Mutex::new(BTreeMap::new()),
            groups: Mutex::new(BTreeMap::new()),
            queues: core::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn close(&self, device: &TyrDevice<B>) {
        let groups = core::mem::take(&mut *lock(&self.groups));
        for g in groups.into_values() {
            device.destroy_group(&g);
        }
        let vms = core::mem::take(&mut *lock(&self.vms));
        for vm in vms.into_values() {
            release_vm(device, &vm);
        }
    }
}

impl<B: Backend> DevInner<B> {
    /// Number of VMs destroyed while a group of theirs held a slot, whose address space is
    /// still to be released.
    pub fn zombie_vm_count(&self) -> usize {
        lock(&self.zombie_vms).len()
    }
}

/// Takes the address space away from a VM that is going away.
fn release_vm<B: Backend>(dev: &TyrDevice<B>, vm: &Mutex<TyrVm<B>>) {
    let key = lock(vm).key();
    dev.drop_bind_queue(key);
    let mut slots = lock(&dev.slots);
    if slots.is_pinned(key) {
        // A group of the VM holds a group slot: the address space goes when it is unbound.
        lock(&dev.zombie_vms).insert(key);
        return;
    }
    if let Some(slot) = slots.release(key) {
        // A failure leaves the slot faulting; the VM's tables are freed only after this.
        let _ = mmu::disable(&dev.backend, slot, false);
    }
}

/// Gives VM `id` of `file` an address space (evicting the least recently used VM that no
/// running group needs) and returns the slot.
///
/// # Errors
///
/// [`Error::Invalid`] for an unknown VM, [`Error::Busy`] if every address space is held by a VM
/// with running groups, the MMU's errors.
pub fn vm_activate<B: Backend>(
    dev: &TyrDevice<B>,
    file: &drm::File<TyrFile<B>>,
    id: u32,
) -> Result<usize> {
    let vm = file.inner().vm(id)?;
    let vm = lock(&vm);
    dev.activate(&vm)
}

impl<B: Backend> DevInner<B> {
    /// Gives `vm` an address space; see [`vm_activate`].
    pub(crate) fn activate(&self, vm: &TyrVm<B>) -> Result<usize> {
        let mut slots = lock(&self.slots);
        if slots.count() == 0 {
            return Err(Error::NoDevice);
        }
        let had = slots.slot_of(vm.key());
        let (slot, evicted) = slots.try_acquire(vm.key()).ok_or(Error::Busy)?;
        if had.is_none() {
            // The VM losing the slot may still have data in the GPU caches.
            let flushed = match evicted {
                Some(_) => mmu::flush_caches(&self.backend),
                None => Ok(()),
            };
            let regs = vm.as_regs()?;
            if let Err(e) = flushed.and_then(|()| mmu::enable(&self.backend, slot, &regs)) {
                slots.release(vm.key());
                return Err(e);
            }
        }
        Ok(slot)
    }
}

/// The address space VM `id` of `file` holds, if any.
pub fn vm_slot<B: Backend>(
    dev: &TyrDevice<B>,
    file: &drm::File<TyrFile<B>>,
    id: u32,
) -> Result<Option<usize>> {
    let key = lock(&*file.inner().vm(id)?).key();
    Ok(lock(&dev.slots).slot_of(key))
}

/// MMU updates of a VM that may hold an address space.
pub(crate) struct AsUpdate<'a, B: Backend> {
    pub(crate) backend: &'a B,
    pub(crate) slot: Option<usize>,
}

impl<B: Backend> MmuUpdate for AsUpdate<'_, B> {
    fn lock(&mut self, start: u64, size: u64) -> Result {
        match self.slot {
            Some(s) => mmu::lock(self.backend, s, start, size).map(|_| ()),
            None => Ok(()),
        }
    }

    fn unlock(&mut self) -> Result {
        match self.slot {
            Some(s) => mmu::unlock(self.backend, s),
            None => Ok(()),
        }
    }
}

/// Probes the GPU of `backend` and registers a DRM device for it under `parent`.
///
/// While the device is still unregistered, the firmware interface region is allocated as a GEM
/// object, mapped for the MCU in address space 0, and the MCU is started to learn the
/// command-stream interface; registration comes last.
///
/// # Errors
///
/// The probe's errors ([`Error::TimedOut`], [`Error::UnknownGpu`]), the MCU's, and
/// allocation failures.
pub fn probe<B: Backend>(
    parent: &device::Device,
    backend: B,
) -> Result<drm::Registration<TyrDriver<B>>> {
    let gpu_info = gpu::probe(&backend)?;
    let unreg =
        drm::UnregisteredDevice::<TyrDriver<B>>::new_with_in::<B::DrmAlloc>(parent, |init| {
            let fw = gem::Object::<TyrBo<B>, AnyCtx>::new_for_init(
                init,
                FW_INTERFACE_SIZE,
                BoArgs {
                    dma: backend.dma().clone(),
                    id: 1,
                    flags: uapi::DRM_PANTHOR_BO_NO_MMAP,
                    exclusive_vm: 0,
                },
            )?;
            let (mcu_vm, csif_info) = start_mcu(&backend, &gpu_info, &fw)?;
            let fw_iface = crate::sched::FwIface::read(
                backend.dma(),
                fw.mem.addr,
                FW_INTERFACE_SIZE as u64,
                csif_info.csg_slot_count as usize,
                csif_info.cs_slot_count as usize,
            )?;
            crate::sched::enable_irqs(&backend);
            let mut fw_objects = Vec::new();
            fw_objects.try_reserve(1).map_err(|_| DrmError::NoMemory)?;
            fw_objects.push(fw);
            Ok(TyrData {
                inner: Arc::new(DevInner {
                    slots: Mutex::new(AsSlots::with_reserved(gpu_info.num_as(), 1)),
                    sched: crate::sched::Sched::new(csif_info.csg_slot_count as usize),
                    fw: fw_iface,
                    zombie_vms: Mutex::new(std::collections::BTreeSet::new()),
                    gpu_info,
                    csif_info,
                    fw_objects,
                    mcu_vm: Mutex::new(mcu_vm),
                    next_key: AtomicU64::new(2),
                    backend,
                }),
            })
        })?;
    let reg = drm::Registration::new(unreg, 0)?;
    let dev = reg.device();
    let inner: Arc<DevInner<B>> = dev.shared().clone();
    let weak = Arc::downgrade(&inner);
    let weak: std::sync::Weak<dyn crate::backend::Events> = weak;
    dev.backend.start_events(weak);
    dev_info!(&dev.backend, "Tyr initialized correctly.");
    Ok(reg)
}

/// Maps the firmware interface region for the MCU in address space 0 and starts the MCU.
fn start_mcu<B: Backend>(
    backend: &B,
    gpu_info: &gpu::GpuInfo,
    fw: &ARef<gem::Object<TyrBo<B>, AnyCtx>>,
) -> Result<(McuVm<B>, uapi::CsifInfo)> {
    let layout = VmLayout::new(gpu_info.va_bits(), 0)?;
    let mut vm = McuVm::<B>::new(1, backend.dma().clone(), layout, gpu_info.pa_bits())?;
    let obj = FwBoRef(fw.clone());
    let size = fw.size() as u64;
    let map = BindReq::Map {
        va: crate::fw::MCU_SHARED_REGION_START,
        size,
        obj: &obj,
        offset: 0,
        flags: uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC,
    };
    vm.bind(&[map], &mut vm::NoMmu).map_err(|(_, e)| e)?;
    mmu::enable(backend, MCU_AS, &vm.as_regs()?)?;
    let csif = crate::fw::boot(backend, fw.mem.addr, size)?;
    Ok((vm, csif))
}

/// The address space of the MCU.
pub const MCU_AS: usize = 0;

/// A firmware object as the MCU's VM holds it.
pub struct FwBoRef<B: Backend>(pub ARef<gem::Object<TyrBo<B>, AnyCtx>>);

impl<B: Backend> Clone for FwBoRef<B> {
    fn clone(&self) -> Self {
        FwBoRef(self.0.clone())
    }
}

impl<B: Backend> GemObject for FwBoRef<B> {
    fn id(&self) -> u64 {
        self.0.id
    }

    fn size(&self) -> u64 {
        self.0.size() as u64
    }

    fn resv_id(&self) -> u64 {
        1
    }
}

impl<B: Backend> BoBacking for FwBoRef<B> {
    fn dma_addr(&self) -> u64 {
        self.0.mem.addr
    }
}

/// The MCU's VM.
pub type McuVm<B> = vm::Vm<<B as Backend>::Dma, FwBoRef<B>, VecSlots>;

impl<B: Backend> Drop for TyrData<B> {
    fn drop(&mut self) {
        // No more interrupts or work; then every job still pending is cancelled.
        self.backend.stop_events();
        let binds: Vec<u64> = lock(&self.sched.binds).keys().copied().collect();
        for key in binds {
            self.inner.drop_bind_queue(key);
        }
        for g in self.sched.group_list() {
            g.state.dead.store(true, Ordering::Release);
            self.inner
                .teardown_group(&g, jobqueue::FenceError::CANCELED);
        }
        lock(&self.sched.groups).clear();
        // Stop the MCU and unmap its address space before its page tables are freed.
        self.backend.io().write_reg(
            crate::regs::MCU_CONTROL::zeroed()
                .with_const_request::<{ crate::regs::mcu::DISABLED }>(),
        );
        let _ = mmu::disable(&self.backend, MCU_AS, false);
    }
}

impl<B: Backend> DevInner<B> {
    pub(crate) fn key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }
}

// ---------------------------------------------------------------- ioctls

pub(crate) type File<B> = drm::File<TyrFile<B>>;

/// Copies `obj` to a user object of `usize` bytes at `ptr`, as panthor's `PANTHOR_UOBJ_SET`:
/// at least the minimum size, what both know copied, the rest zeroed.
fn set_uobj<T: UObj>(user: &dyn UserMemory, ptr: u64, usize: u32, obj: &T) -> Result {
    let usize = usize as usize;
    if usize < T::MIN_SIZE {
        return Err(Error::Invalid);
    }
    let bytes = ioctl::as_bytes(obj);
    let n = usize.min(bytes.len());
    user.write(ptr, &bytes[..n])?;
    let zeros = [0u8; 256];
    let mut at = n;
    while at < usize {
        let len = (usize - at).min(zeros.len());
        user.write(ptr + at as u64, &zeros[..len])?;
        at += len;
    }
    Ok(())
}

/// Reads a user object of `usize` bytes at `ptr` into a `T` (zero-extended if shorter;
/// longer ones must have zero extra bytes).
pub(crate) fn get_uobj<T: UObj>(user: &dyn UserMemory, ptr: u64, usize: u32) -> Result<T> {
    let usize = usize as usize;
    if usize < T::MIN_SIZE {
        return Err(Error::Invalid);
    }
    let mut buf = [0u8; 256];
    let kern = size_of::<T>();
    let n = usize.min(kern).min(buf.len());
    user.read(ptr, &mut buf[..n])?;
    let mut at = kern;
    while at < usize {
        let len = (usize - at).min(buf.len());
        let mut extra = [0u8; 256];
        user.read(ptr + at as u64, &mut extra[..len])?;
        if extra[..len].iter().any(|&b| b != 0) {
            return Err(Error::Other(-7)); // E2BIG
        }
        at += len;
    }
    ioctl::from_bytes(&buf[..kern]).ok_or(Error::Invalid)
}

fn dev_query<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::DevQuery,
    file: &File<B>,
) -> DrmResult<u32> {
    use uapi::*;
    if args.pointer == 0 {
        args.size = match args.type_ {
            DRM_PANTHOR_DEV_QUERY_GPU_INFO => size_of::<GpuInfo>(),
            DRM_PANTHOR_DEV_QUERY_CSIF_INFO => size_of::<CsifInfo>(),
            DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO => size_of::<TimestampInfo>(),
            DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO => size_of::<GroupPrioritiesInfo>(),
            _ => return Err(DrmError::Invalid),
        } as u32;
        return Ok(0);
    }
    let user = file.user();
    match args.type_ {
        DRM_PANTHOR_DEV_QUERY_GPU_INFO => {
            set_uobj(user, args.pointer, args.size, &dev.gpu_info.raw)?
        }
        DRM_PANTHOR_DEV_QUERY_CSIF_INFO => set_uobj(user, args.pointer, args.size, &dev.csif_info)?,
        DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO => {
            let mut info: TimestampInfo = get_uobj(user, args.pointer, args.size)?;
            query_timestamp(&dev.backend, &mut info)?;
            set_uobj(user, args.pointer, args.size, &info)?
        }
        DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO => {
            let opts = file.options();
            let mut info = GroupPrioritiesInfo {
                allowed_mask: 1 << PANTHOR_GROUP_PRIORITY_LOW | 1 << PANTHOR_GROUP_PRIORITY_MEDIUM,
                pad: [0; 3],
            };
            if opts.sys_admin || opts.master {
                info.allowed_mask |=
                    1 << PANTHOR_GROUP_PRIORITY_HIGH | 1 << PANTHOR_GROUP_PRIORITY_REALTIME;
            }
            set_uobj(user, args.pointer, args.size, &info)?
        }
        _ => return Err(DrmError::Invalid),
    }
    Ok(0)
}

/// Fills a `TIMESTAMP_INFO` query as panthor does (flags 0 asks for what the first version
/// returned).
fn query_timestamp<B: Backend>(b: &B, info: &mut uapi::TimestampInfo) -> Result {
    use uapi::*;
    let flags = match info.flags {
        0 => {
            DRM_PANTHOR_TIMESTAMP_GPU
                | DRM_PANTHOR_TIMESTAMP_GPU_OFFSET
                | DRM_PANTHOR_TIMESTAMP_FREQ
        }
        f => f,
    };
    let valid = DRM_PANTHOR_TIMESTAMP_GPU
        | DRM_PANTHOR_TIMESTAMP_CPU_TYPE_MASK
        | DRM_PANTHOR_TIMESTAMP_GPU_OFFSET
        | DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT
        | DRM_PANTHOR_TIMESTAMP_FREQ
        | DRM_PANTHOR_TIMESTAMP_DURATION;
    let cpu = flags & DRM_PANTHOR_TIMESTAMP_CPU_TYPE_MASK;
    if flags & !valid != 0 || cpu > 2 << 1 {
        return Err(Error::Invalid);
    }
    let io = b.io();
    let start = b.clock().now();
    info.timestamp_frequency = if flags & DRM_PANTHOR_TIMESTAMP_FREQ != 0 {
        TIMESTAMP_FREQUENCY
    } else {
        0
    };
    info.timestamp_offset = if flags & DRM_PANTHOR_TIMESTAMP_GPU_OFFSET != 0 {
        io.read(TIMESTAMP_OFFSET).into_raw()
    } else {
        0
    };
    info.current_timestamp = if flags & DRM_PANTHOR_TIMESTAMP_GPU != 0 {
        io.read(TIMESTAMP).into_raw()
    } else {
        0
    };
    info.cycle_count = if flags & DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT != 0 {
        io.read(CYCLE_COUNT).into_raw()
    } else {
        0
    };
    let now = b.clock().now();
    (info.cpu_timestamp_sec, info.cpu_timestamp_nsec) = if cpu != 0 {
        (now.as_secs(), u64::from(now.subsec_nanos()))
    } else {
        (0, 0)
    };
    info.duration_nsec = if flags & DRM_PANTHOR_TIMESTAMP_DURATION != 0 {
        u32::try_from(now.saturating_sub(start).as_nanos()).unwrap_or(u32::MAX)
    } else {
        0
    };
    info.flags = flags;
    Ok(())
}

fn vm_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::VmCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.flags != 0 {
        return Err(DrmError::Invalid);
    }
    let layout = VmLayout::new(dev.gpu_info.va_bits(), args.user_va_range)?;
    let mut vms = lock(&file.inner().vms);
    let id = (1..=MAX_VMS_PER_FILE)
        .find(|i| !vms.contains_key(i))
        .ok_or(DrmError::Busy)?;
    let vm = TyrVm::<B>::new(
        dev.key(),
        dev.backend.dma().clone(),
        layout,
        dev.gpu_info.pa_bits(),
    )?;
    vms.insert(id, Arc::new(Mutex::new(vm)));
    args.id = id;
    args.user_va_range = layout.kernel_start;
    Ok(0)
}

fn vm_destroy<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::VmDestroy,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let vm = lock(&file.inner().vms)
        .remove(&args.id)
        .ok_or(DrmError::Invalid)?;
    release_vm(dev, &vm);
    Ok(0)
}

/// Reads the `ops` array of a VM_BIND from user memory, as `PANTHOR_UOBJ_GET_ARRAY` does.
fn read_bind_ops(user: &dyn UserMemory, ops: &uapi::ObjArray) -> Result<Vec<uapi::VmBindOp>> {
    let mut out = Vec::new();
    if ops.count == 0 {
        return Ok(out);
    }
    if (ops.stride as usize) < uapi::VmBindOp::MIN_SIZE {
        return Err(Error::Invalid);
    }
    // The kernel copy is at most what `kvmalloc_array` gives panthor (`INT_MAX` bytes), so a
    // bogus count cannot set aside hundreds of GB before anything is read.
    let bytes = (ops.count as usize).saturating_mul(core::mem::size_of::<uapi::VmBindOp>());
    if bytes > i32::MAX as usize {
        return Err(Error::NoMemory);
    }
    out.try_reserve(ops.count as usize)
        .map_err(|_| Error::NoMemory)?;
    for i in 0..u64::from(ops.count) {
        let at = i
            .checked_mul(u64::from(ops.stride))
            .and_then(|o| o.checked_add(ops.array))
            .ok_or(Error::Fault)?;
        out.push(get_uobj(user, at, ops.stride)?);
    }
    Ok(out)
}

/// A decoded bind op: address, size, and for a map the object, offset and flags.
pub(crate) type Decoded<B> = (u64, u64, Option<(BoRef<B>, u64, u32)>);

/// Turns one user op into a request; `None` for an op that does nothing.
pub(crate) fn decode_op<B: Backend>(
    op: &uapi::VmBindOp,
    file: &File<B>,
) -> Result<Option<Decoded<B>>> {
    use uapi::*;
    if op.size == 0 {
        return Ok(None);
    }
    let extra = op.flags & !DRM_PANTHOR_VM_BIND_OP_TYPE_MASK;
    match op.flags & DRM_PANTHOR_VM_BIND_OP_TYPE_MASK {
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP => {
            if extra & !vm::MAP_FLAGS != 0 {
                return Err(Error::Invalid);
            }
            let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, op.bo_handle)
                .map_err(|_| Error::Invalid)?;
            Ok(Some((
                op.va,
                op.size,
                Some((BoRef(bo), op.bo_offset, extra)),
            )))
        }
        DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP => {
            if extra != 0 || op.bo_handle != 0 || op.bo_offset != 0 {
                return Err(Error::Invalid);
            }
            Ok(Some((op.va, op.size, None)))
        }
        // A synchronous SYNC_ONLY op must have a size of zero, handled above.
        _ => Err(Error::Invalid),
    }
}

fn vm_bind<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::VmBind,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.flags & !uapi::DRM_PANTHOR_VM_BIND_ASYNC != 0 {
        return Err(DrmError::Invalid);
    }
    let vm = file.inner().vm(args.vm_id)?;
    let ops = read_bind_ops(file.user(), &args.ops)?;
    if args.flags & uapi::DRM_PANTHOR_VM_BIND_ASYNC != 0 {
        return crate::bindq::vm_bind_async(dev, args, file, &ops);
    }
    let mut decoded = Vec::new();
    decoded
        .try_reserve(ops.len())
        .map_err(|_| DrmError::NoMemory)?;
    for (i, op) in ops.iter().enumerate() {
        // Synchronous binds take no sync operations.
        let one = if op.syncs.count != 0 {
            Err(Error::Invalid)
        } else {
            decode_op(op, file)
        };
        match one {
            Ok(d) => decoded.push(d),
            Err(e) => {
                args.ops.count = i as u32;
                return Err(e.into());
            }
        }
    }
    let mut reqs = Vec::new();
    reqs.try_reserve(decoded.len())
        .map_err(|_| DrmError::NoMemory)?;
    for (va, size, map) in decoded.iter().flatten() {
        reqs.push(match map {
            Some((obj, offset, flags)) => BindReq::Map {
                va: *va,
                size: *size,
                obj,
                offset: *offset,
                flags: *flags,
            },
            None => BindReq::Unmap {
                va: *va,
                size: *size,
            },
        });
    }
    // Indices of requests back to indices of user ops (size-0 ops have no request).
    let index_of = |req: usize| {
        decoded
            .iter()
            .enumerate()
            .filter(|(_, d)| d.is_some())
            .nth(req)
            .map_or(ops.len(), |(i, _)| i)
    };
    let mut vm = lock(&vm);
    let slots = lock(&dev.slots);
    let mut upd = AsUpdate {
        backend: &dev.backend,
        slot: slots.slot_of(vm.key()),
    };
    let res = vm.bind(&reqs, &mut upd);
    drop(slots);
    if let Err((i, e)) = res {
        args.ops.count = index_of(i) as u32;
        return Err(e.into());
    }
    Ok(0)
}

fn vm_get_state<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::VmGetState,
    file: &File<B>,
) -> DrmResult<u32> {
    let vm = file.inner().vm(args.vm_id)?;
    args.state = if lock(&vm).is_unusable() {
        uapi::DRM_PANTHOR_VM_STATE_UNUSABLE
    } else {
        uapi::DRM_PANTHOR_VM_STATE_USABLE
    };
    Ok(0)
}

fn bo_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::BoCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    use uapi::*;
    let known = DRM_PANTHOR_BO_NO_MMAP | DRM_PANTHOR_BO_WB_MMAP;
    if args.size == 0 || args.pad != 0 || args.flags & !known != 0 || args.flags & known == known {
        return Err(DrmError::Invalid);
    }
    let exclusive_vm = match args.exclusive_vm_id {
        0 => 0,
        id => lock(&*file.inner().vm(id)?).key(),
    };
    let size = usize::try_from(args.size).map_err(|_| DrmError::NoMemory)?;
    let bo = gem::Object::<TyrBo<B>>::new(
        dev,
        size,
        BoArgs {
            dma: dev.backend.dma().clone(),
            id: dev.key(),
            flags: args.flags,
            exclusive_vm,
        },
    )?;
    args.handle = bo.create_handle(file)?;
    args.size = bo.size() as u64;
    Ok(0)
}

fn bo_mmap_offset<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::BoMmapOffset,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, args.handle)?;
    if bo.flags & uapi::DRM_PANTHOR_BO_NO_MMAP != 0 {
        return Err(DrmError::Permission);
    }
    args.offset = bo.create_mmap_offset()?;
    Ok(0)
}

impl<B: Backend> TyrDriver<B> {
    /// What `DRM_IOCTL_VERSION` reports: panthor's name and uAPI version, so Mesa picks it up.
    const DRIVER_INFO: drm::DriverInfo = drm::DriverInfo {
        name: c"panthor",
        desc: c"ARM Mali Tyr DRM driver",
        major: 1,
        minor: 5,
        patchlevel: 0,
    };
}

impl<B: Backend> drm::Driver for TyrDriver<B> {
    type Data = TyrData<B>;
    type Object = TyrBo<B>;
    type File = TyrFile<B>;
    const INFO: drm::DriverInfo = Self::DRIVER_INFO;
    const FEAT_RENDER: bool = true;

    drm_ctx::declare_drm_ioctls! {
        (uapi::DRM_IOCTL_PANTHOR_DEV_QUERY, uapi::DevQuery, ioctl::RENDER_ALLOW, dev_query::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_CREATE, uapi::VmCreate, ioctl::RENDER_ALLOW, vm_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_DESTROY, uapi::VmDestroy, ioctl::RENDER_ALLOW, vm_destroy::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_BIND, uapi::VmBind, ioctl::RENDER_ALLOW, vm_bind::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_GET_STATE, uapi::VmGetState, ioctl::RENDER_ALLOW, vm_get_state::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_CREATE, uapi::BoCreate, ioctl::RENDER_ALLOW, bo_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, uapi::BoMmapOffset, ioctl::RENDER_ALLOW, bo_mmap_offset::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_CREATE, uapi::GroupCreate, ioctl::RENDER_ALLOW, crate::submit::group_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_DESTROY, uapi::GroupDestroy, ioctl::RENDER_ALLOW, crate::submit::group_destroy::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_SUBMIT, uapi::GroupSubmit, ioctl::RENDER_ALLOW, crate::submit::group_submit::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_GET_STATE, uapi::GroupGetState, ioctl::RENDER_ALLOW, crate::submit::group_get_state::<B>),
    }
}
