//! The one place vramlab touches the CUDA driver's raw API (through cudarc's `result`/`sys`
//! layers). Everything outside this module is safe code over these types.
//!
//! Allocation goes straight to cuMemAlloc / cuMemAllocHost (flags 0, plain pinned memory),
//! never through cudarc's stream-ordered pool, so what is timed is the plain driver path.
//! Asynchronous work is only issued inside [`Gpu::enqueue`], which synchronizes the context
//! before it returns: no copy or kernel can outlive the buffers it borrowed.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};

use experiments::DeviceInfo;

use crate::error::{HwError, Result};

/// Whether the CUDA driver library can be loaded on this machine (no CUDA call is made).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA function is called.
    unsafe { sys::is_culib_present() }
}

/// An opened GPU: a CUDA context bound to this thread.
pub(crate) struct Gpu {
    ctx: Arc<CudaContext>,
}

impl Gpu {
    /// Opens device 0, after checking that the driver library exists (cudarc panics otherwise).
    pub(crate) fn open() -> Result<Gpu> {
        Gpu::open_device(0)
    }

    /// How many CUDA devices the machine has (0 without a driver).
    pub(crate) fn device_count() -> Result<usize> {
        if !driver_present() {
            return Ok(0);
        }
        CudaContext::device_count()
            .map(|n| n.max(0) as usize)
            .map_err(|e| HwError::NoDevice(e.to_string()))
    }

    /// Makes this GPU's context the calling thread's current one: raw driver calls go to it.
    pub(crate) fn make_current(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(HwError::cuda("cuCtxSetCurrent"))
    }

    /// Opens device `ordinal` (its context becomes current).
    pub(crate) fn open_device(ordinal: usize) -> Result<Gpu> {
        if !driver_present() {
            return Err(HwError::NoDriver);
        }
        let count = CudaContext::device_count().map_err(|e| HwError::NoDevice(e.to_string()))?;
        if count < 1 + ordinal as i32 {
            return Err(HwError::NoDevice(format!(
                "device count is {count}, device {ordinal} asked for"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| HwError::NoDevice(e.to_string()))?;
        Ok(Gpu { ctx })
    }

    pub(crate) fn attribute(&self, attribute: CUdevice_attribute) -> Result<i32> {
        self.ctx
            .attribute(attribute)
            .map_err(HwError::cuda("cuDeviceGetAttribute"))
    }

    /// What records say about this device.
    pub(crate) fn info(&self) -> Result<DeviceInfo> {
        use CUdevice_attribute::*;
        let (major, minor) = self
            .ctx
            .compute_capability()
            .map_err(HwError::cuda("cuDeviceGetAttribute"))?;
        let mut driver = 0i32;
        // SAFETY: cuDriverGetVersion writes one int through a valid pointer.
        unsafe { sys::cuDriverGetVersion(&mut driver) }
            .result()
            .map_err(HwError::cuda("cuDriverGetVersion"))?;
        // Clock attributes are informational and deprecated in newer drivers: 0 if refused.
        let optional = |a| self.attribute(a).map(|v| (v / 1000) as u32).unwrap_or(0);
        Ok(DeviceInfo {
            name: self.ctx.name().map_err(HwError::cuda("cuDeviceGetName"))?,
            compute_capability: format!("{major}.{minor}"),
            memory_bytes: self.ctx.total_mem().map_err(HwError::cuda("cuDeviceTotalMem"))? as u64,
            multiprocessors: self.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            copy_engines: self.attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)? as u32,
            driver_version: format!("{}.{}", driver / 1000, (driver % 1000) / 10),
            clock_mhz: optional(CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            memory_clock_mhz: optional(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            pci_bus_id: format!(
                "{:04x}:{:02x}:{:02x}.0",
                self.attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                self.attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                self.attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
            ),
            stream_ordered_pool: self.ctx.has_async_alloc(),
        })
    }

    /// Compiles a kernel source from `kernels/` with NVRTC and loads it.
    pub(crate) fn compile(&self, file: &'static str, source: &str) -> Result<Module> {
        self.compile_with(file, source, &[])
    }

    /// Compiles with extra NVRTC options (such as `-DNAME=VALUE`) and loads the result.
    pub(crate) fn compile_with(&self, file: &'static str, source: &str, options: &[String]) -> Result<Module> {
        // SAFETY: only tries to dlopen libnvrtc; no NVRTC function is called.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(HwError::NoNvrtc);
        }
        let opts = CompileOptions {
            name: Some(file.to_string()),
            options: options.to_vec(),
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(source, opts).map_err(|e| HwError::Compile {
            file,
            log: match e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().replace('\n', " "),
                other => other.to_string(),
            },
        })?;
        let module = self.ctx.load_module(ptx).map_err(HwError::cuda("cuModuleLoadData"))?;
        Ok(Module { module })
    }

    pub(crate) fn device_buffer(&self, bytes: usize) -> Result<DeviceBuffer> {
        // SAFETY: allocates `bytes` of device memory in this thread's current context.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(HwError::cuda("cuMemAlloc"))?;
        Ok(DeviceBuffer { ptr, bytes })
    }

    /// Page-locked host memory with flags 0 (plain pinned, not write-combined), zeroed.
    pub(crate) fn pinned_buffer(&self, bytes: usize) -> Result<HostBuffer> {
        // SAFETY: allocates `bytes` of page-locked host memory; freed in Drop.
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }.map_err(HwError::cuda("cuMemHostAlloc"))? as *mut u8;
        // SAFETY: the allocation is at least `bytes` long; zeroing initialises every byte.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(HostBuffer {
            ptr,
            bytes,
            pinned: true,
        })
    }

    pub(crate) fn stream(&self) -> Result<Stream> {
        let raw =
            result::stream::create(result::stream::StreamKind::NonBlocking).map_err(HwError::cuda("cuStreamCreate"))?;
        Ok(Stream { raw })
    }

    pub(crate) fn event(&self) -> Result<Event> {
        let raw =
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(HwError::cuda("cuEventCreate"))?;
        Ok(Event { raw })
    }

    /// Runs `issue`, which queues asynchronous work borrowing buffers for `'buf`, then waits
    /// for the whole context to finish, even when `issue` failed.
    pub(crate) fn enqueue<'buf, R>(&self, issue: impl FnOnce(&Queue<'buf>) -> Result<R>) -> Result<R> {
        let queue = Queue { _borrows: PhantomData };
        let issued = issue(&queue);
        let synced = self.ctx.synchronize().map_err(HwError::cuda("cuCtxSynchronize"));
        let value = issued?;
        synced?;
        Ok(value)
    }

    /// Sets every byte of `dst` to `byte` (synchronous).
    pub(crate) fn fill(&self, dst: &DeviceBuffer, byte: u8) -> Result<()> {
        // SAFETY: dst is a live allocation of dst.bytes bytes; the call is synchronous.
        unsafe { result::memset_d8_sync(dst.ptr, byte, dst.bytes) }.map_err(HwError::cuda("cuMemsetD8"))
    }

    /// Synchronous upload of a whole host slice into the start of `dst`.
    pub(crate) fn upload(&self, dst: &DeviceBuffer, src: &[u8]) -> Result<()> {
        check_fits("upload", src.len(), dst.bytes)?;
        // SAFETY: dst holds at least src.len() bytes (checked); the call is synchronous.
        unsafe { result::memcpy_htod_sync(dst.ptr, src) }.map_err(HwError::cuda("cuMemcpyHtoD"))
    }

    /// Synchronous download of `src` from `offset` into a whole host slice.
    pub(crate) fn download_range(&self, dst: &mut [u8], src: &DeviceBuffer, offset: usize) -> Result<()> {
        check_fits("download", offset + dst.len(), src.bytes)?;
        // SAFETY: the range lies inside src (checked); the call is synchronous.
        unsafe { result::memcpy_dtoh_sync(dst, src.ptr + offset as u64) }.map_err(HwError::cuda("cuMemcpyDtoH"))
    }
}

fn check_fits(what: &str, bytes: usize, capacity: usize) -> Result<()> {
    if bytes > capacity {
        return Err(HwError::Unsupported(format!(
            "{what} of {bytes} bytes into a {capacity}-byte device buffer"
        )));
    }
    Ok(())
}

/// Work being queued inside [`Gpu::enqueue`]; every borrow lasts until the context is synchronized.
pub(crate) struct Queue<'buf> {
    _borrows: PhantomData<&'buf ()>,
}

impl<'buf> Queue<'buf> {
    /// Uploads `src[range]` to `dst` at `offset` on `stream`.
    pub(crate) fn upload(
        &self,
        stream: &Stream,
        dst: &'buf DeviceBuffer,
        offset: usize,
        src: &'buf HostBuffer,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        check_fits("upload source", range.end, src.bytes)?;
        check_fits("upload", offset + range.len(), dst.bytes)?;
        // SAFETY: both ranges lie inside their buffers (checked); both buffers are borrowed for
        // 'buf, which outlives the synchronize at the end of Gpu::enqueue, and CPU access to a
        // HostBuffer needs &mut, which cannot coexist with this borrow.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                dst.ptr + offset as u64,
                src.ptr.add(range.start) as *const c_void,
                range.len(),
                stream.raw,
            )
        }
        .result()
        .map_err(HwError::cuda("cuMemcpyHtoDAsync"))
    }

    /// Downloads `src` from `offset` into `dst[range]` on `stream`.
    pub(crate) fn download(
        &self,
        stream: &Stream,
        dst: &'buf HostBuffer,
        range: std::ops::Range<usize>,
        src: &'buf DeviceBuffer,
        offset: usize,
    ) -> Result<()> {
        check_fits("download destination", range.end, dst.bytes)?;
        check_fits("download", offset + range.len(), src.bytes)?;
        // SAFETY: both ranges lie inside their buffers (checked); as for upload, the device
        // writes dst while it is only shared-borrowed, and no CPU code can read it until the
        // borrow ends after synchronization.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                dst.ptr.add(range.start) as *mut c_void,
                src.ptr + offset as u64,
                range.len(),
                stream.raw,
            )
        }
        .result()
        .map_err(HwError::cuda("cuMemcpyDtoHAsync"))
    }

    pub(crate) fn record(&self, event: &'buf Event, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are alive (borrowed) and were created in this context.
        unsafe { result::event::record(event.raw, stream.raw) }.map_err(HwError::cuda("cuEventRecord"))
    }

    /// Makes `stream` wait for `event`'s last recording.
    pub(crate) fn wait(&self, stream: &Stream, event: &'buf Event) -> Result<()> {
        // SAFETY: both handles are alive (borrowed) and were created in this context.
        unsafe { result::stream::wait_event(stream.raw, event.raw, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(HwError::cuda("cuStreamWaitEvent"))
    }

    /// Launches `kernel` with a single `u64` argument.
    pub(crate) fn launch_u64(&self, stream: &Stream, kernel: &Kernel, config: LaunchConfig, arg: u64) -> Result<()> {
        self.launch(stream, kernel, config, &[Arg::U64(arg)])
    }

    /// Launches `kernel` with `args`, which must match its parameter list in kernels/*.cu.
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        kernel: &Kernel,
        config: LaunchConfig,
        args: &[Arg<'buf>],
    ) -> Result<()> {
        // Each argument's value lives in `values` until cuLaunchKernel has copied it.
        let mut values: Vec<u64> = args
            .iter()
            .map(|arg| match arg {
                Arg::U64(v) => *v,
                Arg::I32(v) => *v as u32 as u64,
                Arg::Device(buffer) => buffer.ptr,
            })
            .collect();
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| v as *mut u64 as *mut c_void).collect();
        // SAFETY: every parameter points at a live u64 holding the argument in its first bytes
        // (little-endian, so an i32 reads correctly from a u64 slot); the caller matched the
        // kernel's parameter list; device buffers are borrowed for 'buf, which outlives the
        // synchronize at the end of Gpu::enqueue; shared memory was allowed up to
        // config.shared_bytes when the kernel was loaded.
        unsafe {
            result::launch_kernel(
                kernel.function.cu_function(),
                (config.blocks, 1, 1),
                (config.threads, 1, 1),
                config.shared_bytes,
                stream.raw,
                &mut params,
            )
        }
        .map_err(HwError::cuda("cuLaunchKernel"))
    }
}

/// One kernel argument.
pub(crate) enum Arg<'buf> {
    /// An `unsigned long long`.
    U64(u64),
    /// An `int`.
    I32(i32),
    /// A pointer to device memory.
    Device(&'buf DeviceBuffer),
}

/// Grid shape of a 1-D launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchConfig {
    pub(crate) blocks: u32,
    pub(crate) threads: u32,
    pub(crate) shared_bytes: u32,
}

/// A loaded NVRTC module.
pub(crate) struct Module {
    module: Arc<CudaModule>,
}

impl Module {
    /// Looks up a kernel and allows it `max_shared_bytes` of dynamic shared memory.
    pub(crate) fn kernel(&self, name: &str, max_shared_bytes: i32) -> Result<Kernel> {
        let function = self
            .module
            .load_function(name)
            .map_err(HwError::cuda("cuModuleGetFunction"))?;
        // SAFETY: the function handle is valid while the module (kept by CudaFunction) lives.
        unsafe {
            result::function::set_function_attribute(
                function.cu_function(),
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                max_shared_bytes,
            )
        }
        .map_err(HwError::cuda("cuFuncSetAttribute"))?;
        Ok(Kernel { function })
    }
}

/// A kernel function ready to launch.
pub(crate) struct Kernel {
    function: CudaFunction,
}

/// The kernel of a family compiled once per load width (`(width, kernel)` pairs).
pub(crate) fn kernel_for_width<'k>(kernels: &'k [(u32, Kernel)], width: u32, file: &str) -> Result<&'k Kernel> {
    kernels
        .iter()
        .find(|(w, _)| *w == width)
        .map(|(_, k)| k)
        .ok_or_else(|| {
            let widths: Vec<String> = kernels.iter().map(|(w, _)| w.to_string()).collect();
            HwError::Unsupported(format!("width = {width}: {file} loads {} bytes", widths.join(", ")))
        })
}

impl Kernel {
    /// One of the compiled function's attributes (registers, static shared bytes, ...).
    pub(crate) fn attribute(&self, attribute: CUfunction_attribute) -> Result<i32> {
        // SAFETY: the function handle is valid while the module (kept by CudaFunction) lives.
        unsafe { result::function::get_function_attribute(self.function.cu_function(), attribute) }
            .map_err(HwError::cuda("cuFuncGetAttribute"))
    }

    /// Asks for the largest L1 (smallest shared-memory carveout) when this kernel runs.
    pub(crate) fn prefer_l1(&self) -> Result<()> {
        // SAFETY: the function handle is valid while the module (kept by CudaFunction) lives.
        unsafe {
            result::function::set_function_attribute(
                self.function.cu_function(),
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                0,
            )
        }
        .map_err(HwError::cuda("cuFuncSetAttribute"))
    }

    /// CUDA's own answer: resident blocks per SM at this block size and dynamic shared memory.
    pub(crate) fn max_active_blocks(&self, threads: u32, dynamic_shared: u32) -> Result<u32> {
        // SAFETY: as above; the call only reads the function's attributes.
        unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                self.function.cu_function(),
                threads as i32,
                dynamic_shared as usize,
            )
        }
        .map(|blocks| blocks as u32)
        .map_err(HwError::cuda("cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    }
}

/// Device memory from cuMemAlloc, freed on drop.
pub(crate) struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr came from cuMemAlloc and is freed once; Gpu::enqueue synchronized any use.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Host memory the device copies to and from: page-locked (cuMemHostAlloc, flags 0) or
/// ordinary pageable memory. The CPU reads and writes it only through `&mut self`, so it can
/// never race with a copy queued through a shared borrow.
pub(crate) struct HostBuffer {
    ptr: *mut u8,
    bytes: usize,
    pinned: bool,
}

impl HostBuffer {
    /// Ordinary heap memory, zeroed and touched (every page resident before anything is timed).
    pub(crate) fn pageable(bytes: usize) -> HostBuffer {
        let boxed: Box<[u8]> = vec![1u8; bytes.max(1)].into_boxed_slice();
        HostBuffer {
            ptr: Box::into_raw(boxed) as *mut u8,
            bytes,
            pinned: false,
        }
    }

    pub(crate) fn contents(&mut self) -> &[u8] {
        // SAFETY: ptr points to `bytes` initialised bytes owned by self; &mut self means no
        // queued copy holds a borrow.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    pub(crate) fn contents_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.pinned {
            // SAFETY: ptr came from cuMemHostAlloc and is freed once.
            let _ = unsafe { result::free_host(self.ptr as *mut c_void) };
        } else {
            // SAFETY: ptr came from Box::into_raw of a slice of max(bytes, 1) bytes, freed once.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.bytes.max(1))) });
        }
    }
}

/// A non-blocking stream, destroyed on drop.
pub(crate) struct Stream {
    raw: sys::CUstream,
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: raw came from cuStreamCreate and is destroyed once.
        let _ = unsafe { result::stream::destroy(self.raw) };
    }
}

/// A timing event, destroyed on drop.
pub(crate) struct Event {
    raw: sys::CUevent,
}

impl Event {
    /// Milliseconds from `self` to `end`; both must have completed (they have, after enqueue).
    pub(crate) fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        // SAFETY: both events are alive and were created with timing enabled.
        unsafe { result::event::elapsed(self.raw, end.raw) }
            .map(f64::from)
            .map_err(HwError::cuda("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: raw came from cuEventCreate and is destroyed once.
        let _ = unsafe { result::event::destroy(self.raw) };
    }
}

/// Runs kernels/replay.cu's `stamp` (no `mismatches`) or `verify` over `[addr, addr + bytes)`
/// and waits for it. The caller guarantees the range is live device memory of whole words that
/// nothing frees before this returns (enqueue synchronizes before returning).
fn launch_pattern(
    gpu: &Gpu,
    stream: &Stream,
    kernel: &Kernel,
    addr: u64,
    bytes: u64,
    tag: u32,
    mismatches: Option<&DeviceBuffer>,
) -> Result<()> {
    let words = bytes / 4;
    let config = LaunchConfig {
        blocks: words.div_ceil(256).clamp(1, 4096) as u32,
        threads: 256,
        shared_bytes: 0,
    };
    gpu.enqueue(|queue| {
        let mut args = vec![Arg::U64(addr), Arg::U64(words), Arg::I32(tag as i32)];
        args.extend(mismatches.map(Arg::Device));
        queue.launch(stream, kernel, config, &args)
    })
}

/// Device memory handed to allocator policies as bare addresses: cuMemAlloc/cuMemFree, the
/// stream-ordered pool (cuMemAllocAsync/cuMemFreeAsync), and VMM ranges (cuMemAddressReserve,
/// then cuMemCreate + cuMemMap + cuMemSetAccess per granule). It records everything it hands
/// out, launches kernels only on memory it holds, and frees whatever is left when dropped.
pub(crate) struct PolicyMemory<'g> {
    gpu: &'g Gpu,
    stream: Stream,
    granularity: u64,
    total: u64,
    /// Live allocations: address -> (bytes, from the stream-ordered pool).
    allocations: std::collections::BTreeMap<u64, (u64, bool)>,
    reservations: std::collections::BTreeMap<u64, u64>,
    /// One physical handle per mapped granule, by address.
    handles: std::collections::BTreeMap<u64, sys::CUmemGenericAllocationHandle>,
    mismatches: DeviceBuffer,
    fault: Option<HwError>,
}

fn device_location() -> sys::CUmemLocation {
    // SAFETY: CUmemLocation is plain data; all-zero is a valid value, then set to device 0.
    let mut location: sys::CUmemLocation = unsafe { std::mem::zeroed() };
    location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = 0;
    location
}

fn pinned_device_prop() -> sys::CUmemAllocationProp {
    // SAFETY: CUmemAllocationProp is plain data; all-zero is valid (no handle types, no flags).
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = device_location();
    prop
}

impl<'g> PolicyMemory<'g> {
    pub(crate) fn new(gpu: &'g Gpu, total: u64) -> Result<PolicyMemory<'g>> {
        let granularity = CudaVmm::new()?.granularity();
        let mismatches = gpu.device_buffer(8)?;
        gpu.fill(&mismatches, 0)?;
        Ok(PolicyMemory {
            gpu,
            stream: gpu.stream()?,
            granularity,
            total,
            allocations: Default::default(),
            reservations: Default::default(),
            handles: Default::default(),
            mismatches,
            fault: None,
        })
    }

    /// A CUDA error other than running out of memory, if one happened since the last call.
    pub(crate) fn take_fault(&mut self) -> Option<HwError> {
        self.fault.take()
    }

    /// Out of memory is an answer a policy handles; any other error is a fault to report.
    fn refused(&mut self, call: &'static str, error: result::DriverError) {
        if error.0 != sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY && self.fault.is_none() {
            self.fault = Some(HwError::Cuda { call, reason: error });
        }
    }

    /// Records a new allocation (so it is freed on drop), or the refusal.
    fn track(
        &mut self,
        call: &'static str,
        made: std::result::Result<u64, result::DriverError>,
        bytes: u64,
        stream_ordered: bool,
    ) -> Option<u64> {
        match made {
            Ok(addr) => {
                self.allocations.insert(addr, (bytes, stream_ordered));
                Some(addr)
            }
            Err(e) => {
                self.refused(call, e);
                None
            }
        }
    }

    /// Whether `[addr, addr + bytes)` lies in memory this object holds.
    fn holds(&self, addr: u64, bytes: u64) -> bool {
        if let Some((&start, &(len, _))) = self.allocations.range(..=addr).next_back() {
            if addr + bytes <= start + len {
                return true;
            }
        }
        let g = self.granularity;
        let first = addr / g * g;
        (first..addr + bytes)
            .step_by(g as usize)
            .all(|granule| self.handles.contains_key(&granule))
    }

    fn pattern_launch(&self, kernel: &Kernel, addr: u64, bytes: u64, tag: u32, check: bool) -> Result<()> {
        if !self.holds(addr, bytes) || !addr.is_multiple_of(4) || !bytes.is_multiple_of(4) {
            return Err(HwError::DataMismatch(format!(
                "a policy handed out [{addr:#x}, +{bytes}) which is not 4-byte aligned memory it holds"
            )));
        }
        // The block's address is checked above to lie in memory held until this object drops.
        let mismatches = check.then_some(&self.mismatches);
        launch_pattern(self.gpu, &self.stream, kernel, addr, bytes, tag, mismatches)
    }

    /// Writes the pattern of `tag` over a block (synchronously).
    pub(crate) fn stamp(&self, kernel: &Kernel, addr: u64, bytes: u64, tag: u32) -> Result<()> {
        self.pattern_launch(kernel, addr, bytes, tag, false)
    }

    /// Counts the block's words that no longer hold the pattern of `tag` (synchronously).
    pub(crate) fn verify(&self, kernel: &Kernel, addr: u64, bytes: u64, tag: u32) -> Result<()> {
        self.pattern_launch(kernel, addr, bytes, tag, true)
    }

    /// Damaged words found by every `verify` so far.
    pub(crate) fn mismatches(&self) -> Result<u64> {
        let mut bytes = [0u8; 8];
        self.gpu.download_range(&mut bytes, &self.mismatches, 0)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn unmap_granule(&mut self, granule: u64) {
        if let Some(handle) = self.handles.remove(&granule) {
            // SAFETY: the granule was mapped with this handle by `map` and is unmapped once;
            // enqueue synchronized every kernel that used it.
            let unmapped = unsafe { sys::cuMemUnmap(granule, self.granularity as usize) }.result();
            // SAFETY: the handle came from cuMemCreate and is released once, after its unmap.
            let released = unsafe { sys::cuMemRelease(handle) }.result();
            if let Err(e) = unmapped {
                self.refused("cuMemUnmap", e);
            }
            if let Err(e) = released {
                self.refused("cuMemRelease", e);
            }
        }
    }
}

impl allocators::DeviceMemory for PolicyMemory<'_> {
    fn allocate(&mut self, bytes: u64) -> Option<u64> {
        // SAFETY: allocates device memory in the current context; freed by `free` or on drop.
        let made = unsafe { result::malloc_sync(bytes as usize) };
        self.track("cuMemAlloc", made, bytes, false)
    }

    fn free(&mut self, addr: u64, _bytes: u64) {
        if self.allocations.remove(&addr).is_some() {
            // SAFETY: addr came from cuMemAlloc and leaves `allocations`, so it is freed once.
            if let Err(e) = unsafe { result::free_sync(addr) } {
                self.refused("cuMemFree", e);
            }
        }
    }

    fn allocate_stream_ordered(&mut self, bytes: u64) -> Option<u64> {
        // SAFETY: the stream is alive; the memory is used only by kernels on this stream (and
        // synchronously), and freed by `free_stream_ordered` or on drop.
        let made = unsafe { result::malloc_async(self.stream.raw, bytes as usize) };
        self.track("cuMemAllocAsync", made, bytes, true)
    }

    fn free_stream_ordered(&mut self, addr: u64, _bytes: u64) {
        if self.allocations.remove(&addr).is_some() {
            // SAFETY: addr came from cuMemAllocAsync on this stream and is freed once.
            if let Err(e) = unsafe { result::free_async(addr, self.stream.raw) } {
                self.refused("cuMemFreeAsync", e);
            }
        }
    }

    fn reserve(&mut self, bytes: u64) -> Option<u64> {
        let bytes = bytes.div_ceil(self.granularity) * self.granularity;
        let mut addr: sys::CUdeviceptr = 0;
        // SAFETY: writes one address through a valid pointer; reserves address space only.
        match unsafe { sys::cuMemAddressReserve(&mut addr, bytes as usize, 0, 0, 0) }.result() {
            Ok(()) => {
                self.reservations.insert(addr, bytes);
                Some(addr)
            }
            Err(e) => {
                self.refused("cuMemAddressReserve", e);
                None
            }
        }
    }

    fn release(&mut self, addr: u64, _bytes: u64) {
        if let Some(bytes) = self.reservations.remove(&addr) {
            let mapped: Vec<u64> = self.handles.range(addr..addr + bytes).map(|(&g, _)| g).collect();
            for granule in mapped {
                self.unmap_granule(granule);
            }
            // SAFETY: the range came from cuMemAddressReserve, is now unmapped, and is freed once.
            if let Err(e) = unsafe { sys::cuMemAddressFree(addr, bytes as usize) }.result() {
                self.refused("cuMemAddressFree", e);
            }
        }
    }

    fn map(&mut self, addr: u64, bytes: u64) -> bool {
        let g = self.granularity;
        let inside = self
            .reservations
            .range(..=addr)
            .next_back()
            .is_some_and(|(&start, &len)| addr + bytes <= start + len);
        if !inside || !addr.is_multiple_of(g) || !bytes.is_multiple_of(g) {
            self.fault.get_or_insert(HwError::Unsupported(format!(
                "map of [{addr:#x}, +{bytes}): not whole granules of a reservation"
            )));
            return false;
        }
        let prop = pinned_device_prop();
        let mut done = Vec::new();
        for granule in (addr..addr + bytes).step_by(g as usize) {
            let mut handle: sys::CUmemGenericAllocationHandle = 0;
            // SAFETY: writes one handle through a valid pointer; prop is initialised.
            if let Err(e) = unsafe { sys::cuMemCreate(&mut handle, g as usize, &prop, 0) }.result() {
                self.refused("cuMemCreate", e);
                break;
            }
            // SAFETY: the granule lies in a reservation of ours (checked) and is not mapped yet.
            if let Err(e) = unsafe { sys::cuMemMap(granule, g as usize, 0, handle, 0) }.result() {
                // SAFETY: the handle was just created and never mapped.
                let _ = unsafe { sys::cuMemRelease(handle) };
                self.refused("cuMemMap", e);
                break;
            }
            self.handles.insert(granule, handle);
            done.push(granule);
        }
        let access = sys::CUmemAccessDesc {
            location: device_location(),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let complete = done.len() as u64 * g == bytes;
        // SAFETY: the whole range is mapped (checked by `complete`); one descriptor is passed.
        let accessible = complete
            && unsafe { sys::cuMemSetAccess(addr, bytes as usize, &access, 1) }
                .result()
                .map_err(|e| self.refused("cuMemSetAccess", e))
                .is_ok();
        if !accessible {
            for granule in done {
                self.unmap_granule(granule);
            }
        }
        accessible
    }

    fn unmap(&mut self, addr: u64, bytes: u64) {
        let granules: Vec<u64> = self.handles.range(addr..addr + bytes).map(|(&g, _)| g).collect();
        for granule in granules {
            self.unmap_granule(granule);
        }
    }

    fn total_bytes(&self) -> u64 {
        self.total
    }
}

impl Drop for PolicyMemory<'_> {
    fn drop(&mut self) {
        // SAFETY: the stream is alive; waiting for it makes every stream-ordered free complete.
        let _ = unsafe { result::stream::synchronize(self.stream.raw) };
        for (addr, (_, stream_ordered)) in std::mem::take(&mut self.allocations) {
            // SAFETY: each address is freed once, by the call that matches its allocation.
            let _ = unsafe {
                if stream_ordered {
                    result::free_async(addr, self.stream.raw)
                } else {
                    result::free_sync(addr)
                }
            };
        }
        let reservations: Vec<(u64, u64)> = self.reservations.iter().map(|(&a, &b)| (a, b)).collect();
        for (addr, bytes) in reservations {
            allocators::DeviceMemory::release(self, addr, bytes);
        }
        // SAFETY: as above; the pool's frees complete before the stream is destroyed.
        let _ = unsafe { result::stream::synchronize(self.stream.raw) };
    }
}

/// Bytes of device memory free and in total (cuMemGetInfo).
pub(crate) fn memory_info() -> Result<(u64, u64)> {
    result::mem_get_info()
        .map(|(free, total)| (free as u64, total as u64))
        .map_err(HwError::cuda("cuMemGetInfo"))
}

/// The CUDA virtual memory calls on device 0, for `allocators::GrowableLayout`. Out of memory is an
/// error like any other here: the layout undoes the grow and the caller decides.
pub(crate) struct CudaVmm {
    granularity: u64,
}

impl CudaVmm {
    pub(crate) fn new() -> Result<CudaVmm> {
        let prop = pinned_device_prop();
        let mut granularity = 0usize;
        // SAFETY: writes one usize through a valid pointer; prop is initialised.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(HwError::cuda("cuMemGetAllocationGranularity"))?;
        Ok(CudaVmm {
            granularity: granularity as u64,
        })
    }

    pub(crate) fn granularity(&self) -> u64 {
        self.granularity
    }
}

/// The driver's error code decides what a failure is: out of memory, or anything else.
fn vmm_error(call: &'static str) -> impl FnOnce(result::DriverError) -> allocators::VmmError {
    move |e| {
        if is_out_of_memory(&e) {
            allocators::VmmError::out_of_memory(call)
        } else {
            allocators::VmmError::failed(call, HwError::Cuda { call, reason: e }.to_string())
        }
    }
}

impl allocators::VmmDriver for CudaVmm {
    fn reserve(&mut self, size: u64, at: Option<u64>) -> Result<u64, allocators::VmmError> {
        let mut base: sys::CUdeviceptr = 0;
        // SAFETY: writes one address through a valid pointer; reserves address space only.
        unsafe { sys::cuMemAddressReserve(&mut base, size as usize, 0, at.unwrap_or(0), 0) }
            .result()
            .map_err(vmm_error("cuMemAddressReserve"))?;
        Ok(base)
    }
    fn free_range(&mut self, base: u64, size: u64) {
        // SAFETY: the layout frees each range it reserved once, after unmapping it.
        let _ = unsafe { sys::cuMemAddressFree(base, size as usize) };
    }
    fn create(&mut self, size: u64) -> Result<u64, allocators::VmmError> {
        let prop = pinned_device_prop();
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: writes one handle through a valid pointer; prop is initialised.
        unsafe { sys::cuMemCreate(&mut handle, size as usize, &prop, 0) }
            .result()
            .map_err(vmm_error("cuMemCreate"))?;
        Ok(handle)
    }
    fn release(&mut self, handle: u64) {
        // SAFETY: the layout releases each handle it created once, after unmapping it.
        let _ = unsafe { sys::cuMemRelease(handle) };
    }
    fn map(&mut self, addr: u64, size: u64, handle: u64) -> Result<(), allocators::VmmError> {
        // SAFETY: the layout maps whole chunks inside its own reservations, never twice.
        unsafe { sys::cuMemMap(addr, size as usize, 0, handle, 0) }
            .result()
            .map_err(vmm_error("cuMemMap"))
    }
    fn unmap(&mut self, addr: u64, size: u64) {
        // SAFETY: the layout unmaps only what it mapped; kernels that used it were synchronized
        // (GrowingBuffer launches only through Gpu::enqueue).
        let _ = unsafe { sys::cuMemUnmap(addr, size as usize) };
    }
    fn set_access(&mut self, addr: u64, size: u64) -> Result<(), allocators::VmmError> {
        let access = sys::CUmemAccessDesc {
            location: device_location(),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped (the layout calls this right after map); one descriptor.
        unsafe { sys::cuMemSetAccess(addr, size as usize, &access, 1) }
            .result()
            .map_err(vmm_error("cuMemSetAccess"))
    }
}

/// How a [`GrowingBuffer`] holds its memory.
enum Backing {
    /// cuMemAlloc: the buffer, and with a reserve its whole capacity.
    Plain { ptr: u64 },
    /// cuMemAllocManaged.
    Managed { ptr: u64 },
    /// A reserved virtual range with chunks mapped into it.
    Vmm {
        layout: allocators::GrowableLayout,
        driver: CudaVmm,
    },
    /// Nothing yet.
    Empty,
}

/// What one grow did.
pub(crate) struct GrowOutcome {
    /// Whether the buffer now has the new size (else it is as it was).
    pub(crate) grown: bool,
    /// Device memory the strategy held at its peak during the grow.
    pub(crate) peak_bytes: u64,
    /// Why it did not grow.
    pub(crate) refusal: Option<String>,
}

/// A device buffer that grows by one of the three strategies of the growth family. It owns
/// every allocation it makes and frees them on drop (after synchronizing the context); kernels
/// run on it only through [`Gpu::enqueue`], which synchronizes before any memory can be freed
/// or unmapped. It must be used and dropped on the thread whose context made it.
pub(crate) struct GrowingBuffer {
    strategy: experiments::GrowthStrategy,
    capacity: Option<u64>,
    size: u64,
    backing: Backing,
    stream: Stream,
    mismatches: DeviceBuffer,
}

fn is_out_of_memory(e: &result::DriverError) -> bool {
    e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

impl GrowingBuffer {
    /// An empty buffer; with `capacity`, that much is set aside first (allocated for copy,
    /// allocated unbacked for managed, reserved as addresses for vmm).
    pub(crate) fn new(
        gpu: &Gpu,
        strategy: experiments::GrowthStrategy,
        capacity: Option<u64>,
    ) -> Result<GrowingBuffer> {
        use experiments::GrowthStrategy::*;
        let mismatches = gpu.device_buffer(8)?;
        gpu.fill(&mismatches, 0)?;
        let backing = match (strategy, capacity) {
            (Copy, Some(bytes)) => {
                // SAFETY: allocates device memory; freed in Drop.
                let ptr = unsafe { result::malloc_sync(bytes as usize) }.map_err(HwError::cuda("cuMemAlloc"))?;
                Backing::Plain { ptr }
            }
            (Managed, Some(bytes)) => {
                let mut ptr = 0;
                // SAFETY: allocates managed memory (no device pages until touched); freed in Drop.
                unsafe {
                    sys::cuMemAllocManaged(
                        &mut ptr,
                        bytes as usize,
                        sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
                    )
                }
                .result()
                .map_err(HwError::cuda("cuMemAllocManaged"))?;
                Backing::Managed { ptr }
            }
            (Vmm, reserve) => {
                let mut driver = CudaVmm::new()?;
                let granularity = driver.granularity();
                let layout = allocators::GrowableLayout::new(&mut driver, granularity, reserve.unwrap_or(0))
                    .map_err(|e| HwError::Unsupported(e.to_string()))?;
                Backing::Vmm { layout, driver }
            }
            _ => Backing::Empty,
        };
        Ok(GrowingBuffer {
            strategy,
            capacity,
            size: 0,
            backing,
            stream: gpu.stream()?,
            mismatches,
        })
    }

    /// The buffer's first byte (0 while empty).
    fn base(&self) -> u64 {
        match &self.backing {
            Backing::Plain { ptr, .. } | Backing::Managed { ptr, .. } => *ptr,
            Backing::Vmm { layout, .. } => layout.base().unwrap_or(0),
            Backing::Empty => 0,
        }
    }

    /// Grows to `bytes`, keeping the contents. Running out of memory is an outcome, not an error.
    pub(crate) fn grow(&mut self, bytes: u64, managed_limit: u64) -> Result<GrowOutcome> {
        // All work below is synchronous or ends in a context synchronize.
        use experiments::GrowthStrategy::*;
        let old = self.size;
        let refuse = |why: String, peak: u64| GrowOutcome {
            grown: false,
            peak_bytes: peak,
            refusal: Some(why),
        };
        if let Some(capacity) = self.capacity.filter(|_| self.strategy != Vmm) {
            if bytes > capacity {
                return Ok(refuse(format!("{bytes} B is past the {capacity} B reserved"), capacity));
            }
            if self.strategy == Managed {
                let Backing::Managed { ptr, .. } = self.backing else {
                    unreachable!("managed with a reserve")
                };
                self.prefetch(ptr + old, bytes - old)?;
            }
            self.sync()?;
            self.size = bytes;
            let peak = if self.strategy == Copy { capacity } else { bytes };
            return Ok(GrowOutcome {
                grown: true,
                peak_bytes: peak,
                refusal: None,
            });
        }
        match self.strategy {
            Copy | Managed => {
                if self.strategy == Managed && old + bytes > managed_limit {
                    return Ok(refuse(
                        format!(
                            "{} B of managed memory would pass vramlab's limit of {managed_limit} B",
                            old + bytes
                        ),
                        old,
                    ));
                }
                let mut ptr = 0;
                let allocated = if self.strategy == Copy {
                    // SAFETY: allocates device memory; owned by self.backing from below, freed once.
                    unsafe { result::malloc_sync(bytes as usize) }.map(|p| ptr = p)
                } else {
                    // SAFETY: allocates managed memory; owned by self.backing from below, freed once.
                    unsafe {
                        sys::cuMemAllocManaged(
                            &mut ptr,
                            bytes as usize,
                            sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
                        )
                    }
                    .result()
                };
                match allocated {
                    Err(e) if is_out_of_memory(&e) => return Ok(refuse("out of device memory".into(), old)),
                    Err(e) => {
                        return Err(HwError::Cuda {
                            call: "cuMemAlloc",
                            reason: e,
                        })
                    }
                    Ok(()) => {}
                }
                if self.strategy == Managed {
                    self.prefetch(ptr, bytes)?;
                }
                let previous = std::mem::replace(
                    &mut self.backing,
                    if self.strategy == Copy {
                        Backing::Plain { ptr }
                    } else {
                        Backing::Managed { ptr }
                    },
                );
                if let Backing::Plain { ptr: from, .. } | Backing::Managed { ptr: from, .. } = previous {
                    // SAFETY: both ranges are live allocations of at least `old` bytes; synchronous.
                    unsafe { sys::cuMemcpy(ptr, from, old as usize) }
                        .result()
                        .map_err(HwError::cuda("cuMemcpy"))?;
                    // SAFETY: `from` was allocated by this buffer, is no longer referenced, and the
                    // copy above completed (cuMemcpy is synchronous for device memory).
                    unsafe { result::free_sync(from) }.map_err(HwError::cuda("cuMemFree"))?;
                }
                self.sync()?;
                self.size = bytes;
                Ok(GrowOutcome {
                    grown: true,
                    peak_bytes: old + bytes,
                    refusal: None,
                })
            }
            Vmm => {
                let Backing::Vmm { layout, driver } = &mut self.backing else {
                    unreachable!("vmm backing")
                };
                match layout.grow(driver, bytes) {
                    Ok(_) => {
                        self.size = layout.size();
                        self.sync()?;
                        Ok(GrowOutcome {
                            grown: true,
                            peak_bytes: self.size,
                            refusal: None,
                        })
                    }
                    Err(e) if e.out_of_memory => Ok(refuse(e.to_string(), old)),
                    Err(e) => Err(HwError::Unsupported(e.to_string())),
                }
            }
        }
    }

    /// Shrinks a VMM buffer to the fewest whole chunks holding `bytes` (unmapping and releasing
    /// the rest); returns the new size. Only the vmm strategy can give memory back in place.
    pub(crate) fn shrink(&mut self, bytes: u64) -> Result<u64> {
        let Backing::Vmm { layout, driver } = &mut self.backing else {
            return Err(HwError::Unsupported(format!(
                "shrink: a {} buffer cannot give memory back in place",
                self.strategy.name()
            )));
        };
        // Nothing may use the chunks being unmapped: every kernel ran inside Gpu::enqueue.
        self.size = layout.shrink(driver, bytes);
        Ok(self.size)
    }

    /// Bytes the buffer holds now.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    fn prefetch(&self, ptr: u64, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the range lies in a live managed allocation of this buffer; the stream is alive.
        unsafe { sys::cuMemPrefetchAsync_v2(ptr, bytes as usize, device_location(), 0, self.stream.raw) }
            .result()
            .map_err(HwError::cuda("cuMemPrefetchAsync"))
    }

    fn sync(&self) -> Result<()> {
        result::ctx::synchronize().map_err(HwError::cuda("cuCtxSynchronize"))
    }

    fn pattern(&self, gpu: &Gpu, kernel: &Kernel, bytes: u64, tag: u32, check: bool) -> Result<()> {
        if bytes > self.size || !bytes.is_multiple_of(4) {
            return Err(HwError::Unsupported(format!(
                "{bytes} B is not whole words of the {} B buffer",
                self.size
            )));
        }
        // The range lies in the buffer (checked), so it stays allocated until the kernel is done.
        let mismatches = check.then_some(&self.mismatches);
        launch_pattern(gpu, &self.stream, kernel, self.base(), bytes, tag, mismatches)
    }

    /// Writes the pattern of `tag` over the whole buffer.
    pub(crate) fn stamp(&self, gpu: &Gpu, kernel: &Kernel, tag: u32) -> Result<()> {
        self.pattern(gpu, kernel, self.size, tag, false)
    }

    /// Counts words of the first `bytes` that lost the pattern of `tag` (adds to [`GrowingBuffer::mismatches`]).
    pub(crate) fn verify(&self, gpu: &Gpu, kernel: &Kernel, bytes: u64, tag: u32) -> Result<()> {
        self.pattern(gpu, kernel, bytes, tag, true)
    }

    pub(crate) fn mismatches(&self, gpu: &Gpu) -> Result<u64> {
        let mut bytes = [0u8; 8];
        gpu.download_range(&mut bytes, &self.mismatches, 0)?;
        Ok(u64::from_le_bytes(bytes))
    }
}

impl Drop for GrowingBuffer {
    fn drop(&mut self) {
        let _ = result::ctx::synchronize();
        match std::mem::replace(&mut self.backing, Backing::Empty) {
            // SAFETY: the allocation belongs to this buffer, nothing uses it (synchronized), freed once.
            Backing::Plain { ptr, .. } | Backing::Managed { ptr, .. } => drop(unsafe { result::free_sync(ptr) }),
            Backing::Vmm { mut layout, mut driver } => layout.release_all(&mut driver),
            Backing::Empty => {}
        }
    }
}

/// Managed memory (cuMemAllocManaged, attached globally) that the host writes and kernels
/// read. The host touches it only through `&mut self`, and kernels use it only inside
/// [`Gpu::enqueue`] (which synchronizes), so host and device never access it at once.
pub(crate) struct ManagedBuffer {
    ptr: u64,
    bytes: usize,
}

impl ManagedBuffer {
    pub(crate) fn new(bytes: usize) -> Result<ManagedBuffer> {
        let mut ptr = 0;
        // SAFETY: allocates managed memory; freed once in Drop.
        unsafe {
            sys::cuMemAllocManaged(
                &mut ptr,
                bytes.max(4),
                sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
            )
        }
        .result()
        .map_err(HwError::cuda("cuMemAllocManaged"))?;
        Ok(ManagedBuffer { ptr, bytes })
    }

    /// The buffer as 32-bit words, on the host (which moves its pages to the host).
    pub(crate) fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: managed memory is host-accessible; the allocation holds `bytes` bytes, aligned
        // for u32 (allocations are 256-byte aligned); &mut self excludes any queued kernel
        // borrowing it, and every kernel finished when its enqueue returned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u32, self.bytes / 4) }
    }

    /// The device address, for a kernel argument.
    pub(crate) fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes in the buffer.
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }
}

impl<'buf> Queue<'buf> {
    /// Moves `buffer`'s pages to the device on `stream` (cuMemPrefetchAsync).
    pub(crate) fn prefetch(&self, stream: &Stream, buffer: &'buf ManagedBuffer) -> Result<()> {
        // SAFETY: the buffer is a live managed allocation borrowed for 'buf, which outlives the
        // synchronize at the end of Gpu::enqueue; the stream is alive.
        unsafe { sys::cuMemPrefetchAsync_v2(buffer.ptr, buffer.bytes, device_location(), 0, stream.raw) }
            .result()
            .map_err(HwError::cuda("cuMemPrefetchAsync"))
    }
}

impl Drop for ManagedBuffer {
    fn drop(&mut self) {
        // SAFETY: the pointer came from cuMemAllocManaged and is freed once; no kernel uses it.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Device memory of one GPU made readable by another: one physical allocation mapped with
/// access for both devices (VMM), or a cuMemAlloc buffer with peer access enabled from the
/// reader's context. Freed in its owner's context on drop.
pub(crate) struct PeerBuffer {
    owner: Arc<CudaContext>,
    ptr: u64,
    bytes: usize,
    vmm: Option<sys::CUmemGenericAllocationHandle>,
}

fn location(device: i32) -> sys::CUmemLocation {
    let mut l = device_location();
    l.id = device;
    l
}

impl PeerBuffer {
    /// `bytes` on `owner`'s device, readable from `reader`'s; both contexts stay as they were
    /// except that the owner's is current afterwards.
    pub(crate) fn new(owner: &Gpu, reader: &Gpu, bytes: usize, vmm: bool) -> Result<PeerBuffer> {
        let (own, read) = (owner.ctx.cu_device(), reader.ctx.cu_device());
        let mut can = 0;
        // SAFETY: writes one int through a valid pointer; both are valid device handles.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, read, own) }
            .result()
            .map_err(HwError::cuda("cuDeviceCanAccessPeer"))?;
        if can == 0 {
            return Err(HwError::Unsupported(
                "the second GPU cannot access the first's memory (no peer path)".into(),
            ));
        }
        owner.make_current()?;
        if !vmm {
            // SAFETY: allocates device memory in the owner's (current) context; freed in Drop.
            let ptr = unsafe { result::malloc_sync(bytes) }.map_err(HwError::cuda("cuMemAlloc"))?;
            let buffer = PeerBuffer {
                owner: owner.ctx.clone(),
                ptr,
                bytes,
                vmm: None,
            };
            reader.make_current()?;
            // SAFETY: both contexts are alive; enabling an already enabled peer is reported and ignored.
            let enabled = unsafe { sys::cuCtxEnablePeerAccess(owner.ctx.cu_ctx(), 0) };
            if enabled != sys::CUresult::CUDA_SUCCESS
                && enabled != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            {
                return Err(HwError::Cuda {
                    call: "cuCtxEnablePeerAccess",
                    reason: result::DriverError(enabled),
                });
            }
            owner.make_current()?;
            return Ok(buffer);
        }
        let mut prop = pinned_device_prop();
        prop.location = location(own);
        let mut granularity = 0usize;
        // SAFETY: writes one usize; prop is initialised.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(HwError::cuda("cuMemGetAllocationGranularity"))?;
        let size = bytes.div_ceil(granularity) * granularity;
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: writes one handle; prop is initialised and names the owner's device.
        unsafe { sys::cuMemCreate(&mut handle, size, &prop, 0) }
            .result()
            .map_err(HwError::cuda("cuMemCreate"))?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: writes one address; reserves address space only.
        if let Err(e) = unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) }.result() {
            // SAFETY: the handle was just created and never mapped.
            let _ = unsafe { sys::cuMemRelease(handle) };
            return Err(HwError::Cuda {
                call: "cuMemAddressReserve",
                reason: e,
            });
        }
        let buffer = PeerBuffer {
            owner: owner.ctx.clone(),
            ptr,
            bytes: size,
            vmm: Some(handle),
        };
        // SAFETY: the range was just reserved for exactly this handle's size.
        unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) }
            .result()
            .map_err(HwError::cuda("cuMemMap"))?;
        let access = [own, read].map(|device| sys::CUmemAccessDesc {
            location: location(device),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        });
        // SAFETY: the range is mapped; two descriptors are passed.
        unsafe { sys::cuMemSetAccess(ptr, size, access.as_ptr(), 2) }
            .result()
            .map_err(HwError::cuda("cuMemSetAccess"))?;
        Ok(buffer)
    }

    /// Sets every byte (in the owner's context, synchronously).
    pub(crate) fn fill(&self, byte: u8) -> Result<()> {
        self.owner.bind_to_thread().map_err(HwError::cuda("cuCtxSetCurrent"))?;
        // SAFETY: the range is a live allocation (or mapping) of `bytes` bytes owned by self.
        unsafe { sys::cuMemsetD8_v2(self.ptr, byte, self.bytes) }
            .result()
            .map_err(HwError::cuda("cuMemsetD8"))?;
        result::ctx::synchronize().map_err(HwError::cuda("cuCtxSynchronize"))
    }

    pub(crate) fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for PeerBuffer {
    fn drop(&mut self) {
        if self.owner.bind_to_thread().is_err() {
            return;
        }
        let _ = result::ctx::synchronize();
        // SAFETY: everything below was made by PeerBuffer::new in the owner's context, and is
        // released once; every kernel that read it finished (enqueue synchronizes).
        unsafe {
            match self.vmm {
                Some(handle) => {
                    let _ = sys::cuMemUnmap(self.ptr, self.bytes);
                    let _ = sys::cuMemRelease(handle);
                    let _ = sys::cuMemAddressFree(self.ptr, self.bytes);
                }
                None => {
                    let _ = result::free_sync(self.ptr);
                }
            }
        }
    }
}
