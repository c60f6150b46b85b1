// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_tyr`: the driver's probe and its deferred work inside the kernel, on
//! the simulated Mali-G610 compiled into the same kernel.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_tyr)]
mod tests {
    use crate::backend::{Backend, DmaMemory, Events, IrqLine, PAGE_SIZE};
    use crate::kernel::KernelBackend;
    use crate::regs::{GPU_IRQ_RAWSTAT, L2_READY_LO};
    use crate::{gpu, Error};
    use ::kernel::prelude::*;
    use ::kernel::sync::Arc;
    use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use register::io::poll::PollClock as _;
    use register::io::Io;

    #[test]
    fn probe_resets_powers_and_identifies_the_g610() -> Result {
        let (_dev, b) = backend(None)?;
        let info = gpu::probe(&b).map_err(|_| EIO)?;
        assert_eq!(info.model.name, "g610");
        assert_eq!(info.raw.gpu_id, 0xa867_0005);
        // The reset and the power-on really happened in the simulated hardware.
        assert_eq!(b.device().with(|g| g.resets_completed()), 1);
        assert_eq!(b.io().read(L2_READY_LO).ready().get(), 1);
        assert!(info.num_as() >= 1);
        // The reset's completion is latched in the raw interrupt status (no handler runs yet
        // to acknowledge it).
        assert_ne!(b.io().read(GPU_IRQ_RAWSTAT).as_raw(), 0);
        assert!(!b.irq_pending(IrqLine::Mmu));
        Ok(())
    }

    #[test]
    fn a_reset_that_never_completes_times_out() -> Result {
        let (_dev, b) = backend(None)?;
        b.device().with(|g| g.fail_next_reset());
        assert_eq!(gpu::probe(&b).map(|_| ()), Err(Error::TimedOut));
        Ok(())
    }

    /// A faux device of the test's own, and a backend on it whose DMA memory is capped at
    /// `page_limit` pages when given. The backend holds a reference to the device, so the
    /// registration may go first.
    ///
    /// The simulated MCU is given no firmware image: these cases boot it through page tables of
    /// their own that map its interface region only (the driver's probe, below, loads the
    /// image the kernel's firmware loader has).
    fn backend(page_limit: Option<usize>) -> Result<(::kernel::faux::Registration, KernelBackend)> {
        let faux = ::kernel::faux::Registration::new(c"tyr-kunit-backend", None)?;
        // SAFETY: The device was registered just now by this test; no driver allocates its
        // DMA memory.
        let b = unsafe {
            KernelBackend::new_unflashed(faux.as_ref(), mali_sim::Config::g610(), page_limit)
        }?;
        Ok((faux, b))
    }

    /// The GPU reads `len <= 16` bytes at DMA address `addr`, through its bus.
    fn gpu_read(b: &KernelBackend, addr: u64, len: usize) -> Result<[u8; 16]> {
        let mut buf = [0u8; 16];
        b.device()
            .with(|g| {
                mali_sim::PhysMemory::read_bytes(
                    g.memory(),
                    mali_sim::PhysAddr(addr),
                    &mut buf[..len],
                )
            })
            .map_err(|_| EFAULT)?;
        Ok(buf)
    }

    #[test]
    fn dma_memory_is_the_dma_apis_and_the_gpu_reaches_it() -> Result {
        use crate::kernel::dma::live_pages;

        let (_dev, b) = backend(Some(8))?;
        let dma = b.dma();
        let before = live_pages();
        let r = dma.alloc(2, 0x4000)?;
        assert_eq!(r.addr % 0x4000, 0);
        // Two pages, or more when the block had to be carved for the alignment.
        assert!(live_pages() >= before + 2);
        // Zeroed, and what the CPU writes the GPU reads at the DMA address.
        assert!(gpu_read(&b, r.addr, 16)? == [0; 16]);
        let word = dma.cpu_u64(r.addr + 8).ok_or(EINVAL)?;
        // SAFETY: `word` points into the live region `r`, valid for atomic accesses.
        let word = unsafe { word.as_ref() };
        word.store(0x1234, Ordering::Relaxed);
        assert_eq!(
            u64::from_le_bytes(
                gpu_read(&b, r.addr + 8, 8)?[..8]
                    .try_into()
                    .map_err(|_| EINVAL)?
            ),
            0x1234
        );
        // What the GPU writes the CPU reads.
        b.device()
            .with(|g| {
                mali_sim::PhysMemory::fetch_add_u64(g.memory(), mali_sim::PhysAddr(r.addr + 8), 1)
            })
            .map_err(|_| EFAULT)?;
        assert_eq!(word.load(Ordering::Relaxed), 0x1235);
        // The second page is the CPU's next page: one block, contiguous in both views.
        let second = dma.cpu_u64(r.addr + PAGE_SIZE).ok_or(EINVAL)?;
        assert_eq!(
            second.as_ptr().cast::<u8>(),
            word.as_ptr()
                .cast::<u8>()
                .wrapping_add(PAGE_SIZE as usize - 8)
        );
        // Bad requests and the page limit: errors, and nothing else changes.
        let held = live_pages();
        assert_eq!(dma.alloc(0, 0x1000), Err(Error::Invalid));
        assert_eq!(dma.alloc(1, 0x3000), Err(Error::Invalid));
        assert_eq!(dma.alloc(16, 0x1000), Err(Error::NoMemory));
        assert_eq!(live_pages(), held);
        // SAFETY: `r` came from `alloc` and nothing uses it any more.
        unsafe { dma.free(r) };
        assert_eq!(live_pages(), before);
        // Freed memory is gone from the bus: the GPU gets a bus error there.
        assert!(gpu_read(&b, r.addr, 8).is_err());
        Ok(())
    }

    #[test]
    fn large_alignments_and_sizes_are_honoured_or_refused() -> Result {
        use crate::kernel::dma::live_pages;

        let (_dev, b) = backend(None)?;
        let dma = b.dma();
        let before = live_pages();
        // A small block that must be 2 MiB aligned (a carved block) and a 2 MiB one.
        let small = dma.alloc(1, 0x20_0000)?;
        let big = dma.alloc(512, 0x20_0000)?;
        assert_eq!(small.addr % 0x20_0000, 0);
        assert_eq!(big.addr % 0x20_0000, 0);
        for r in [small, big] {
            // Every page of each is on the bus and has a CPU page userspace could map.
            for page in 0..r.pages as u64 {
                let addr = r.addr + page * PAGE_SIZE;
                assert!(dma.cpu_page(addr).is_some());
                assert!(gpu_read(&b, addr, 8)? == [0; 16]);
            }
            assert!(dma.cpu_page(r.addr + 8).is_none());
        }
        // More than the page allocator can give in one block: ENOMEM, without a warning.
        assert_eq!(dma.alloc(1 << 20, 0x1000), Err(Error::NoMemory));
        let page = dma.alloc_page()?;
        // SAFETY: The regions and the page came from this memory and are not used again.
        unsafe { dma.free(small) };
        // SAFETY: As above.
        unsafe { dma.free(big) };
        // SAFETY: As above.
        unsafe { dma.free_page(page) };
        assert_eq!(live_pages(), before);
        Ok(())
    }

    #[test]
    fn blocks_left_with_the_backend_go_back_to_the_kernel() -> Result {
        use crate::kernel::dma::live_pages;

        let before = live_pages();
        let (dev, b) = backend(None)?;
        let _never_freed = b.dma().alloc(3, 0x1000)?;
        assert!(live_pages() >= before + 3);
        // Nothing queued the event pump, so the backend holds the last reference to the bus.
        drop(b);
        drop(dev);
        assert_eq!(live_pages(), before);
        Ok(())
    }

    /// The firmware interface region as a VM sees it: one contiguous block of DMA memory.
    #[derive(Clone)]
    struct FwRegion(crate::backend::DmaRegion);

    impl gpuvm::GemObject for FwRegion {
        fn id(&self) -> u64 {
            self.0.addr
        }

        fn size(&self) -> u64 {
            self.0.size()
        }

        fn resv_id(&self) -> u64 {
            0
        }
    }

    impl crate::vm::BoBacking for FwRegion {
        fn dma_addr(&self) -> u64 {
            self.0.addr
        }
    }

    /// The MCU's address space as probe makes it: the firmware interface region (fresh DMA
    /// memory) mapped at `MCU_SHARED_REGION_START` by a `Vm` of `gpuvm` and `io-pgtable`, and
    /// address space 0 enabled on those tables.
    struct McuSpace {
        vm: crate::vm::Vm<crate::kernel::dma::KernelDma, FwRegion, ArraySlots>,
        region: crate::backend::DmaRegion,
    }

    impl McuSpace {
        fn map(b: &KernelBackend, info: &gpu::GpuInfo) -> Result<Self> {
            use crate::vm::{BindReq, NoMmu, Vm, VmLayout};
            use crate::{fw, mmu, uapi};

            let size = fw::FW_INTERFACE_SIZE as u64;
            let region = b.dma().alloc((size / PAGE_SIZE) as usize, PAGE_SIZE)?;
            let obj = FwRegion(region);
            let mapped = VmLayout::new(info.va_bits(), 0).and_then(|layout| {
                let mut vm =
                    Vm::<_, FwRegion, ArraySlots>::new(1, b.dma().clone(), layout, info.pa_bits())?;
                let map = BindReq::Map {
                    va: fw::MCU_SHARED_REGION_START,
                    size,
                    obj: &obj,
                    offset: 0,
                    flags: uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC,
                };
                vm.bind(&[map], &mut NoMmu).map_err(|(_, e)| e)?;
                mmu::enable(b, mmu::MCU_AS, &vm.as_regs()?)?;
                Ok(vm)
            });
            match mapped {
                Ok(vm) => Ok(McuSpace { vm, region }),
                Err(e) => {
                    // SAFETY: Nothing maps the region (the VM that did is gone, and address
                    // space 0 was not enabled on it).
                    unsafe { b.dma().free(region) };
                    Err(e.into())
                }
            }
        }

        /// Disables address space 0 (the MCU must be off or halted) and frees everything.
        fn unmap(self, b: &KernelBackend) -> Result {
            crate::mmu::disable(b, crate::mmu::MCU_AS, false)?;
            drop(self.vm);
            // SAFETY: Address space 0 is disabled and the VM that mapped the region is gone:
            // nothing uses it any more.
            unsafe { b.dma().free(self.region) };
            Ok(())
        }
    }

    /// Fixed `gpuvm` slot arrays: the firmware VM holds one mapping.
    struct ArraySlots;

    impl crate::vm::VmSlots<FwRegion> for ArraySlots {
        type Vas = [gpuvm::VaSlot<()>; 4];
        type Bos = [gpuvm::BoSlot<FwRegion>; 2];
        type Ops = [gpuvm::OpEntry; 8];

        fn vas() -> Self::Vas {
            core::array::from_fn(|_| gpuvm::VaSlot::new())
        }

        fn bos() -> Self::Bos {
            core::array::from_fn(|_| gpuvm::BoSlot::new())
        }

        fn ops() -> Self::Ops {
            [gpuvm::OpEntry::default(); 8]
        }
    }

    #[test]
    fn firmware_boots_through_the_drivers_page_tables() -> Result {
        use crate::{fw, mmu};
        use mali_sim::AccessType;

        let (_dev, b) = backend(None)?;
        let info = gpu::probe(&b)?;
        let mcu = McuSpace::map(&b, &info)?;
        let (region, size) = (mcu.region, fw::FW_INTERFACE_SIZE as u64);
        // The simulated MMU walks the tables io-pgtable wrote into the simulator's memory.
        let va = fw::MCU_SHARED_REGION_START + 0x3000;
        let pa = b
            .device()
            .with(|g| g.translate(mmu::MCU_AS, va, AccessType::Read))
            .map_err(|_| EFAULT)?;
        assert_eq!(pa.0, region.addr + 0x3000);
        // The MCU starts and publishes its interface in the region.
        let csif = fw::boot(&b, region.addr, size)?;
        // What the simulated firmware publishes (its own constants, not the driver's).
        assert_eq!(csif.csg_slot_count as usize, mali_sim::csf::NUM_CSGS);
        assert!(csif.cs_slot_count >= 1);
        mcu.unmap(&b)
    }

    /// Power management on the kernel backend, with the kernel's mutex as its gate: the
    /// firmware booted through the driver's page tables, the GPU powers down (MCU halted and
    /// disabled, then cores, tiler and L2 off) and wakes (L2, cores and tiler, then a cold boot
    /// of the MCU) without a fault from the simulator, which refuses a wrong order.
    #[test]
    fn the_gpu_powers_down_and_wakes_in_order() -> Result {
        use crate::fw;
        use crate::pm::Pm;

        let (_dev, b) = backend(None)?;
        let info = gpu::probe(&b)?;
        let mcu = McuSpace::map(&b, &info)?;
        let region = mcu.region;
        fw::boot(&b, region.addr, fw::FW_INTERFACE_SIZE as u64)?;
        let faults = || b.device().with(|g| g.power_faults());
        let booted = || b.device().with(|g| g.csf_booted());
        let pm = Pm::<crate::kernel::KernelLocks>::new(&b)?;
        assert!(pm.is_powered());
        // A power-down its caller calls off changes nothing.
        assert_eq!(pm.power_down(&b, &info, region.addr, || false), Ok(false));
        assert!(pm.is_powered() && booted());
        assert_eq!(pm.power_down(&b, &info, region.addr, || true), Ok(true));
        assert!(!pm.is_powered() && !booted());
        assert_eq!(b.io().read(L2_READY_LO).ready().get(), 0);
        assert_eq!(pm.power_down(&b, &info, region.addr, || true), Ok(false));
        assert_eq!(pm.wake(&b, &info, region.addr, || {}), Ok(true));
        assert!(pm.is_powered() && booted());
        assert_eq!(b.io().read(L2_READY_LO).ready().get(), 1);
        assert_eq!(faults(), 0);
        let st = pm.stats(core::time::Duration::ZERO);
        assert_eq!((st.power_ups, st.power_downs), (1, 1));
        // Down again, then the shader cores asked for before the L2: the simulator refuses.
        assert_eq!(pm.power_down(&b, &info, region.addr, || true), Ok(true));
        let cores = crate::regs::SHADER_PWRON::zeroed().with_request(info.raw.shader_present);
        b.io().write_reg(cores);
        assert_eq!(faults(), 1);
        mcu.unmap(&b)
    }

    /// An interrupt handler that acknowledges what it finds, and a work item that counts.
    struct Handler {
        io: crate::kernel::SimIo,
        irqs: AtomicU64,
        works: AtomicU64,
        seen: AtomicU64,
    }

    impl Events for Handler {
        fn irq(&self) {
            let status = self.io.read(crate::regs::GPU_IRQ_STATUS).as_raw();
            self.seen.fetch_or(u64::from(status), Ordering::Relaxed);
            self.io.write_reg(crate::regs::GPU_IRQ_CLEAR::from(status));
            self.irqs.fetch_add(1, Ordering::Relaxed);
        }

        fn work(&self) {
            self.works.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits up to a second (host time) for `done`.
    fn wait_for(done: impl Fn() -> bool) -> Result {
        for _ in 0..100 {
            if done() {
                return Ok(());
            }
            ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(10));
        }
        if done() {
            Ok(())
        } else {
            Err(ETIMEDOUT)
        }
    }

    #[test]
    fn the_event_pump_delivers_interrupts_and_deadlines() -> Result {
        use crate::regs::{gpu_command, GPU_COMMAND, GPU_IRQ_MASK, GPU_IRQ_RAWSTAT};
        use register::io::model::ModelRegion;

        let start = crate::kernel::KtimeClock.now();
        let (_dev, b) = backend(None)?;
        let handler = Arc::new(
            Handler {
                io: ModelRegion::new(b.io().model().clone()),
                irqs: AtomicU64::new(0),
                works: AtomicU64::new(0),
                seen: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?;
        let events: Arc<dyn crate::backend::EventSink> = handler.clone();
        b.set_events(Some(events));
        // A soft reset with its interrupt unmasked: nobody polls or sleeps here, so only the
        // pump stepping the simulator can complete it, and only the pump can call the handler.
        let done = GPU_IRQ_RAWSTAT::zeroed()
            .with_reset_completed(true)
            .into_raw();
        b.io().write_reg(GPU_IRQ_MASK::from(done));
        b.io().write_reg(
            GPU_COMMAND::zeroed()
                .with_const_code::<{ gpu_command::RESET }>()
                .with_const_payload::<{ gpu_command::RESET_SOFT }>(),
        );
        wait_for(|| handler.irqs.load(Ordering::Relaxed) >= 1)?;
        assert_eq!(handler.seen.load(Ordering::Relaxed), u64::from(done));
        // The handler acknowledged it: the line is down again.
        assert!(!b.irq_pending(IrqLine::Gpu));
        assert_eq!(b.device().with(|g| g.resets_completed()), 1);
        // A deadline 5 ms ahead on the kernel's clock (`ktime_get`): the pump runs the
        // driver's work once it has come, not before.
        let clock = crate::kernel::KtimeClock;
        let at = clock.now() + core::time::Duration::from_millis(5);
        let works = handler.works.load(Ordering::Relaxed);
        let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        jobqueue::Executor::wake_at(b.executor(), jobqueue::Instant::from_nanos(ns));
        wait_for(|| handler.works.load(Ordering::Relaxed) > works)?;
        assert!(clock.now() >= at);
        // The pump never ran simulated time ahead of real time by more than its lead (nothing
        // else moved it here). Simulated time is read first: the pump may step between the two
        // reads, to a limit of the real time of then.
        let simulated = core::time::Duration::from_nanos(b.device().with(|g| g.now_ns()));
        let real = clock.now().saturating_sub(start);
        assert!(simulated <= real + core::time::Duration::from_millis(1));
        b.set_events(None);
        Ok(())
    }

    /// Counts the driver's work and the bind work of VMs 1 and 2; VM 1's bind work sleeps
    /// 300 ms when asked to, flagged while it runs.
    struct Counter {
        works: AtomicU64,
        binds: [AtomicU64; 2],
        slow: AtomicBool,
        in_bind: AtomicBool,
    }

    impl Counter {
        fn new() -> Self {
            Counter {
                works: AtomicU64::new(0),
                binds: [AtomicU64::new(0), AtomicU64::new(0)],
                slow: AtomicBool::new(false),
                in_bind: AtomicBool::new(false),
            }
        }

        fn binds(&self, vm: usize) -> u64 {
            self.binds[vm - 1].load(Ordering::Relaxed)
        }
    }

    impl Events for Counter {
        fn irq(&self) {}

        fn work(&self) {
            self.works.fetch_add(1, Ordering::Relaxed);
        }

        fn bind_work(&self, vm: u64) {
            let Some(n) = usize::try_from(vm)
                .ok()
                .and_then(|v| self.binds.get(v.wrapping_sub(1)))
            else {
                return;
            };
            n.fetch_add(1, Ordering::Relaxed);
            if vm == 1 && self.slow.swap(false, Ordering::AcqRel) {
                self.in_bind.store(true, Ordering::Release);
                ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(300));
                self.in_bind.store(false, Ordering::Release);
            }
        }
    }

    /// Waits up to a second for `done`, in steps of 10 ms.
    fn wait_long(done: impl Fn() -> bool) -> Result {
        let mut waited = 0;
        while !done() {
            if waited == 100 {
                return Err(ETIMEDOUT);
            }
            ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(10));
            waited += 1;
        }
        Ok(())
    }

    #[test]
    fn waking_the_executor_runs_the_drivers_work_on_the_workqueue() -> Result {
        let (_dev, b) = backend(None)?;
        let counter = Arc::new(Counter::new(), GFP_KERNEL)?;
        let events: Arc<dyn crate::backend::EventSink> = counter.clone();
        b.set_events(Some(events));
        jobqueue::Executor::waker(b.executor()).wake_by_ref();
        // The work item runs on the system workqueue: wait for it, a second at most.
        wait_long(|| counter.works.load(Ordering::Relaxed) != 0)?;
        assert!(b.executor().runs() >= 1);
        b.set_events(None);
        Ok(())
    }

    /// A VM's bind executor runs the driver's bind work for that VM on a work item of its own:
    /// when woken, or when a deadline comes; while one VM's bind work runs for long (a huge
    /// bind), the driver's work and another VM's bind work still run; once the events are
    /// stopped (which waits for the call under way), a wake-up runs nothing.
    #[test]
    fn each_vms_bind_executor_runs_its_bind_work_apart_from_the_rest() -> Result {
        let (_dev, b) = backend(None)?;
        let counter = Arc::new(Counter::new(), GFP_KERNEL)?;
        let events: Arc<dyn crate::backend::EventSink> = counter.clone();
        b.set_events(Some(events));
        let one = b.new_bind_executor(1)?;
        let two = b.new_bind_executor(2)?;
        jobqueue::Executor::waker(&one).wake_by_ref();
        wait_long(|| counter.binds(1) > 0)?;
        assert!(one.runs() >= 1);
        assert_eq!(counter.binds(2), 0);
        // A deadline 5 ms ahead runs it again once it has come.
        let clock = crate::kernel::KtimeClock;
        let at = clock.now() + core::time::Duration::from_millis(5);
        let binds = counter.binds(1);
        let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        jobqueue::Executor::wake_at(&one, jobqueue::Instant::from_nanos(ns));
        wait_long(|| counter.binds(1) > binds)?;
        assert!(clock.now() >= at);
        // VM 1's bind work takes 300 ms: the driver's work and VM 2's bind work run meanwhile.
        counter.slow.store(true, Ordering::Release);
        jobqueue::Executor::waker(&one).wake_by_ref();
        wait_long(|| counter.in_bind.load(Ordering::Acquire))?;
        jobqueue::Executor::waker(b.executor()).wake_by_ref();
        jobqueue::Executor::waker(&two).wake_by_ref();
        wait_long(|| counter.works.load(Ordering::Relaxed) > 0 && counter.binds(2) > 0)?;
        assert!(counter.in_bind.load(Ordering::Acquire));
        // Stopping waits for the call under way; then a wake-up runs nothing.
        crate::backend::Backend::stop_events(&b);
        assert!(!counter.in_bind.load(Ordering::Acquire));
        let binds = counter.binds(2);
        jobqueue::Executor::waker(&two).wake_by_ref();
        ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(20));
        assert_eq!(counter.binds(2), binds);
        Ok(())
    }

    /// The driver's containers on the kernel's allocator and locks: a vector grows past what
    /// one slab object holds (`kvmalloc` falls back to `vmalloc`), shared references drop
    /// their value once and free it with the last weak reference, a handle table finds free
    /// IDs, and a kernel-mutex guard gives the locked value.
    #[test]
    fn the_drivers_containers_live_in_kvmalloc_memory_and_kernel_mutexes() -> Result {
        use crate::backend::Lock;
        use crate::env;
        use crate::kernel::{KernelAlloc, KernelLock};

        // 8 MiB of `u64`: past `KMALLOC_MAX_SIZE` (4 MiB on x86_64), so only `vmalloc` has it.
        let n = 1024 * 1024;
        let mut v = env::Vec::<u64, KernelAlloc>::try_with_capacity(n).map_err(|_| ENOMEM)?;
        for i in 0..n as u64 {
            v.try_push(i * 3).map_err(|_| ENOMEM)?;
        }
        assert_eq!(v.len(), n);
        assert_eq!(v[n - 1], (n as u64 - 1) * 3);
        assert_eq!(
            v.iter().copied().fold(0u64, u64::wrapping_add),
            3 * (n as u64) * (n as u64 - 1) / 2
        );
        // An impossible reservation fails and leaves the vector whole.
        assert_eq!(v.try_reserve(usize::MAX / 16), Err(Error::NoMemory));
        assert_eq!(v.len(), n);
        drop(v);

        let drops = AtomicU64::new(0);
        struct Counted<'a>(&'a AtomicU64);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let a = env::Arc::<_, KernelAlloc>::try_new(Counted(&drops)).map_err(|_| ENOMEM)?;
        let w = env::Arc::downgrade(&a);
        let b = a.clone();
        drop(a);
        assert!(w.upgrade().is_some());
        drop(b);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert!(w.upgrade().is_none());
        drop(w);

        let mut ids = env::IdMap::<u32, KernelAlloc>::new();
        for id in 1..=4 {
            ids.try_insert(id, id * 10).map_err(|_| ENOMEM)?;
        }
        assert_eq!(ids.remove(2), Some(20));
        assert_eq!(ids.first_free(1, 4), Some(2));

        let lock =
            KernelLock::new(ids, crate::lock_class!(c"tyr_kunit_ids")).map_err(|_| ENOMEM)?;
        lock.guard().try_insert(2, 99).map_err(|_| ENOMEM)?;
        assert_eq!(lock.with(|m| m.get(2).copied()), Some(99));
        Ok(())
    }

    // Test helpers of drm-ctx's `kernel/drm.c`: a file opened on a device as `open()` would,
    // and user memory for the pointers inside ioctl arguments.
    #[allow(improper_ctypes)]
    extern "C" {
        fn gpukit_drm_test_open(
            dev: *mut ::kernel::bindings::drm_device,
        ) -> *mut ::kernel::bindings::file;
        fn gpukit_drm_test_open_err(file: *mut ::kernel::bindings::file) -> core::ffi::c_long;
        fn gpukit_drm_test_file(
            file: *mut ::kernel::bindings::file,
        ) -> *mut ::kernel::bindings::drm_file;
        fn gpukit_drm_test_close(file: *mut ::kernel::bindings::file);
        fn gpukit_drm_test_user_alloc(len: core::ffi::c_ulong) -> core::ffi::c_ulong;
        fn gpukit_drm_test_user_map(
            file: *mut ::kernel::bindings::file,
            len: core::ffi::c_ulong,
            offset: core::ffi::c_ulong,
            writable: bool,
        ) -> core::ffi::c_ulong;
    }

    /// User memory of the running test, written and read with the kernel's user copies.
    struct UserMem {
        base: u64,
        len: u64,
        next: u64,
    }

    impl UserMem {
        fn new(len: u64) -> Result<Self> {
            // SAFETY: Called from a KUnit case; the mapping lives as long as the case.
            let base = unsafe { gpukit_drm_test_user_alloc(len as _) } as u64;
            if base == 0 {
                return Err(ENOMEM);
            }
            Ok(UserMem { base, len, next: 0 })
        }

        /// Copies the bytes of `items` into fresh user memory; their address.
        fn put<A: drm_ctx::drm::ioctl::IoctlArg>(&mut self, items: &[A]) -> Result<u64> {
            let at = self.base + self.next;
            for item in items {
                let b = drm_ctx::drm::ioctl::as_bytes(item);
                if self.next + b.len() as u64 > self.len {
                    return Err(ENOMEM);
                }
                ::kernel::uaccess::UserSlice::new(
                    ::kernel::uaccess::UserPtr::from_addr((self.base + self.next) as usize),
                    b.len(),
                )
                .writer()
                .write_slice(b)?;
                self.next += b.len() as u64;
            }
            // Keep the next array 64-byte aligned.
            self.next = self.next.next_multiple_of(64);
            Ok(at)
        }

        /// Reads `buf.len()` bytes at user address `at`.
        fn get(&self, at: u64, buf: &mut [u8]) -> Result {
            ::kernel::uaccess::UserSlice::new(
                ::kernel::uaccess::UserPtr::from_addr(at as usize),
                buf.len(),
            )
            .reader()
            .read_slice(buf)
        }
    }

    /// An array argument of `items` in user memory.
    fn array<A: drm_ctx::drm::ioctl::IoctlArg>(
        mem: &mut UserMem,
        items: &[A],
    ) -> Result<crate::uapi::ObjArray> {
        Ok(crate::uapi::ObjArray {
            stride: core::mem::size_of::<A>() as u32,
            count: items.len() as u32,
            array: mem.put(items)?,
        })
    }

    /// The whole driver inside Linux: Tyr probes the simulated Mali-G610 on a faux device and
    /// registers its DRM device; a file opened on its render node (as `open()` would) then runs
    /// the ioctls a Mesa client runs — DEV_QUERY, VM_CREATE, BO_CREATE, a synchronous VM_BIND,
    /// GROUP_CREATE and a GROUP_SUBMIT signalling a syncobj — with their arrays in user memory
    /// and copied with the kernel's user copies. The job runs on the simulated GPU through the
    /// driver's page tables, its done fence (a `dma_fence`) signals in the syncobj, and the
    /// values its stream stored are in the buffer object. Then the group, the file and the
    /// device go (an unplug), leaving nothing the kernel's checkers report.
    #[test]
    fn the_driver_runs_a_job_through_its_ioctls() -> Result {
        use crate::csf::instr;
        use crate::gem::TyrBo;
        use crate::{ioctl, uapi};
        use drm_ctx::drm::gem;

        let faux = ::kernel::faux::Registration::new(c"tyr-kunit", None)?;
        let parent = drm_ctx::device::Device::from_kernel(faux.as_ref());
        // SAFETY: The device was registered just now by this test; no driver allocates its DMA
        // memory.
        let backend = unsafe { KernelBackend::g610(faux.as_ref()) }?;
        let reg = crate::driver::probe(parent, backend)?;
        let dev = reg.device();
        // SAFETY: The device is registered and alive.
        let raw = unsafe { gpukit_drm_test_open(dev.as_raw()) };
        // SAFETY: `raw` is what `gpukit_drm_test_open` returned.
        let err = unsafe { gpukit_drm_test_open_err(raw) };
        if err != 0 {
            return Err(::kernel::error::Error::from_errno(err as i32));
        }
        let result = (|| -> Result<(u32, u32)> {
            // SAFETY: The file is open until `gpukit_drm_test_close` below, after this closure,
            // and its `struct drm_file` is of Tyr's device.
            let file = unsafe {
                drm_ctx::drm::File::<crate::file::TyrFile<KernelBackend>>::from_raw(
                    gpukit_drm_test_file(raw),
                )
            };
            let mut mem = UserMem::new(0x4000)?;

            let info_at = mem.put(&[uapi::GpuInfo::default()])?;
            let mut q = uapi::DevQuery {
                type_: uapi::DRM_PANTHOR_DEV_QUERY_GPU_INFO,
                size: core::mem::size_of::<uapi::GpuInfo>() as u32,
                pointer: info_at,
            };
            ioctl::dev_query(dev, &mut q, file)?;
            let mut id = [0u8; 4];
            mem.get(info_at, &mut id)?;
            assert_eq!(u32::from_le_bytes(id), 0xa867_0005);

            let mut vm = uapi::VmCreate::default();
            ioctl::vm_create(dev, &mut vm, file)?;
            let mut bo = uapi::BoCreate {
                size: 0x10000,
                ..Default::default()
            };
            ioctl::bo_create(dev, &mut bo, file)?;
            let va = 0x100_0000u64;
            let op = uapi::VmBindOp {
                flags: uapi::DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
                bo_handle: bo.handle,
                va,
                size: bo.size,
                ..Default::default()
            };
            let mut bind = uapi::VmBind {
                vm_id: vm.id,
                flags: 0,
                ops: array(&mut mem, &[op])?,
            };
            ioctl::vm_bind(dev, &mut bind, file)?;

            // A stream storing two words at the data page of the object.
            let data = va + 0x8000;
            let stream = [
                instr::move48(0, data),
                instr::move32(2, 0xcafe),
                instr::move32(3, 0xf00d),
                instr::store_multiple(2, 0, 0, 0b11),
            ];
            let obj = gem::Object::<TyrBo<KernelBackend>>::lookup_handle(file, bo.handle)?;
            let mut code = [0u8; 32];
            for (i, w) in stream.iter().enumerate() {
                code[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
            // Userspace's view of the object: a shared mapping of its mmap offset, which shows
            // the object's own memory (what the GPU reads), not shmem pages. The stream goes in
            // through it.
            let mut off = uapi::BoMmapOffset {
                handle: bo.handle,
                ..Default::default()
            };
            ioctl::bo_mmap_offset(dev, &mut off, file)?;
            // SAFETY: `raw` is the open file of the device; the mapping is the test's, undone
            // when the case ends.
            let map = unsafe { gpukit_drm_test_user_map(raw, bo.size as _, off.offset as _, true) };
            if map == 0 {
                return Err(EFAULT);
            }
            let map = map as u64;
            ::kernel::uaccess::UserSlice::new(
                ::kernel::uaccess::UserPtr::from_addr(map as usize),
                code.len(),
            )
            .writer()
            .write_slice(&code)?;
            let mut through_driver = [0u8; 32];
            obj.cpu_read(0, &mut through_driver)?;
            assert!(through_driver == code);

            let queue = uapi::QueueCreate {
                priority: 0,
                pad: [0; 3],
                ringbuf_size: 0x1000,
            };
            let mut group = uapi::GroupCreate {
                queues: array(&mut mem, &[queue])?,
                max_compute_cores: 1,
                max_fragment_cores: 1,
                max_tiler_cores: 1,
                priority: uapi::PANTHOR_GROUP_PRIORITY_MEDIUM,
                compute_core_mask: 1,
                fragment_core_mask: 1,
                tiler_core_mask: 1,
                vm_id: vm.id,
                ..Default::default()
            };
            ioctl::group_create(dev, &mut group, file)?;

            let done = file.create_syncobj(None)?;
            let signal = uapi::SyncOp {
                flags: uapi::DRM_PANTHOR_SYNC_OP_SIGNAL
                    | uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ,
                handle: done,
                timeline_value: 0,
            };
            let job = uapi::QueueSubmit {
                queue_index: 0,
                stream_size: code.len() as u32,
                stream_addr: va,
                latest_flush: 0,
                pad: 0,
                syncs: array(&mut mem, &[signal])?,
            };
            let mut submit = uapi::GroupSubmit {
                group_handle: group.group_handle,
                pad: 0,
                queue_submits: array(&mut mem, &[job])?,
            };
            ioctl::group_submit(dev, &mut submit, file)?;

            // The job's done fence, a dma_fence, in the syncobj: wait for it (two seconds at
            // most; the simulated job takes microseconds).
            let fence = file.syncobj_fence(done, 0, 0)?;
            let fence = <KernelBackend as Backend>::dependency(&fence)?;
            let status = fence.wait_timeout_ms(2000);
            // The job completed, without error.
            assert!(matches!(status, Some(Ok(()))));
            let mut out = [0u8; 8];
            obj.cpu_read(0x8000, &mut out)?;
            // The GPU's stores show through the user mapping too.
            let mut mapped = [0u8; 8];
            mem.get(map + 0x8000, &mut mapped)?;
            assert!(mapped == out);

            // The flush-ID page, mapped as Mesa maps it: shared, read-only, one page at
            // `DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET` (the file's user MMIO offset); a writable
            // or a longer mapping is refused.
            let flush_at = uapi::DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET as core::ffi::c_ulong;
            // SAFETY: `raw` is the open file; a mapping made would be the test's.
            let writable = unsafe { gpukit_drm_test_user_map(raw, 0x1000, flush_at, true) };
            // SAFETY: As above.
            let longer = unsafe { gpukit_drm_test_user_map(raw, 0x2000, flush_at, false) };
            assert_eq!((writable, longer), (0, 0));
            // SAFETY: As above.
            let flush = unsafe { gpukit_drm_test_user_map(raw, 0x1000, flush_at, false) };
            if flush == 0 {
                return Err(EFAULT);
            }
            let flush_id = |mem: &UserMem| -> Result<u32> {
                let mut w = [0u8; 4];
                mem.get(flush as u64, &mut w)?;
                Ok(u32::from_le_bytes(w))
            };
            let gpu_flush_id = || dev.backend.device().with(|g| g.latest_flush_id());
            let before = flush_id(&mem)?;
            assert_eq!(before, gpu_flush_id());
            // Unmapping a page of the VM the job ran in (still active) flushes the GPU's
            // caches: the page shows the new flush ID.
            let unmap = uapi::VmBindOp {
                flags: uapi::DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
                va: va + 0xf000,
                size: 0x1000,
                ..Default::default()
            };
            let mut bind = uapi::VmBind {
                vm_id: vm.id,
                flags: 0,
                ops: array(&mut mem, &[unmap])?,
            };
            ioctl::vm_bind(dev, &mut bind, file)?;
            let after = flush_id(&mem)?;
            assert_ne!(after, before);
            assert_eq!(after, gpu_flush_id());

            let mut destroy = uapi::GroupDestroy {
                group_handle: group.group_handle,
                pad: 0,
            };
            ioctl::group_destroy(dev, &mut destroy, file)?;
            Ok((
                u32::from_le_bytes([out[0], out[1], out[2], out[3]]),
                u32::from_le_bytes([out[4], out[5], out[6], out[7]]),
            ))
        })();
        // The remove, with the file still open: the unplug stops the GPU, then the bus takes
        // the MMIO away. Closing the file (its group and VM go) and dropping the device must
        // not touch a register after that.
        reg.device().unplug();
        reg.device().backend.revoke_io();
        // SAFETY: The file is ours and nothing uses it any more.
        unsafe { gpukit_drm_test_close(raw) };
        let (a, b) = result?;
        assert_eq!((a, b), (0xcafe, 0xf00d));
        assert_eq!(reg.device().backend.late_io_accesses(), 0);
        drop(reg);
        drop(faux);
        Ok(())
    }
}
