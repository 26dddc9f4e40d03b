//! An opened GPU, its streams and events. Every method binds the GPU's context before it calls
//! the driver, and every handle keeps its context alive and destroys itself in it.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::CudaContext;
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};

use experiments::DeviceInfo;

use super::launch::{check_fits, Module, Queue};
use super::memory::{DeviceBuffer, HostBuffer};
use crate::error::{HwError, Result};

/// Whether the CUDA driver library can be loaded on this machine (no CUDA call is made).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA function is called.
    unsafe { sys::is_culib_present() }
}

/// An opened GPU: its CUDA context.
pub(crate) struct Gpu {
    pub(super) ctx: Arc<CudaContext>,
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
        bind(&self.ctx)
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
        bind(&self.ctx)?;
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
        Ok(Module { module, file })
    }

    pub(crate) fn device_buffer(&self, bytes: usize) -> Result<DeviceBuffer> {
        DeviceBuffer::new(&self.ctx, bytes).map_err(HwError::cuda("cuMemAlloc"))
    }

    /// Page-locked host memory with flags 0 (plain pinned, not write-combined), zeroed.
    pub(crate) fn pinned_buffer(&self, bytes: usize) -> Result<HostBuffer> {
        HostBuffer::pinned(&self.ctx, bytes)
    }

    pub(crate) fn stream(&self) -> Result<Stream> {
        bind(&self.ctx)?;
        let raw =
            result::stream::create(result::stream::StreamKind::NonBlocking).map_err(HwError::cuda("cuStreamCreate"))?;
        Ok(Stream {
            raw,
            ctx: self.ctx.clone(),
        })
    }

    pub(crate) fn event(&self) -> Result<Event> {
        bind(&self.ctx)?;
        let raw =
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(HwError::cuda("cuEventCreate"))?;
        Ok(Event {
            raw,
            ctx: self.ctx.clone(),
        })
    }

    /// Runs `issue`, which queues asynchronous work borrowing buffers for `'buf`, then waits
    /// for the whole context to finish, even when `issue` failed.
    pub(crate) fn enqueue<'buf, R>(&self, issue: impl FnOnce(&Queue<'buf>) -> Result<R>) -> Result<R> {
        bind(&self.ctx)?;
        let queue = Queue { _borrows: PhantomData };
        let issued = issue(&queue);
        let synced = self.ctx.synchronize().map_err(HwError::cuda("cuCtxSynchronize"));
        let value = issued?;
        synced?;
        Ok(value)
    }

    /// Sets every byte of `dst` to `byte` (synchronous).
    pub(crate) fn fill(&self, dst: &DeviceBuffer, byte: u8) -> Result<()> {
        bind(&self.ctx)?;
        // SAFETY: dst is a live allocation of dst.bytes bytes; the call is synchronous.
        unsafe { result::memset_d8_sync(dst.ptr, byte, dst.bytes) }.map_err(HwError::cuda("cuMemsetD8"))
    }

    /// Synchronous upload of a whole host slice into the start of `dst`.
    pub(crate) fn upload(&self, dst: &DeviceBuffer, src: &[u8]) -> Result<()> {
        check_fits("upload", src.len(), dst.bytes)?;
        bind(&self.ctx)?;
        // SAFETY: dst holds at least src.len() bytes (checked); the call is synchronous.
        unsafe { result::memcpy_htod_sync(dst.ptr, src) }.map_err(HwError::cuda("cuMemcpyHtoD"))
    }

    /// Synchronous download of `src` from `offset` into a whole host slice.
    pub(crate) fn download_range(&self, dst: &mut [u8], src: &DeviceBuffer, offset: usize) -> Result<()> {
        check_fits("download", offset + dst.len(), src.bytes)?;
        bind(&self.ctx)?;
        // SAFETY: the range lies inside src (checked); the call is synchronous.
        unsafe { result::memcpy_dtoh_sync(dst, src.ptr + offset as u64) }.map_err(HwError::cuda("cuMemcpyDtoH"))
    }

    /// Bytes of this GPU's memory free and in total (cuMemGetInfo).
    pub(crate) fn memory_info(&self) -> Result<(u64, u64)> {
        bind(&self.ctx)?;
        result::mem_get_info()
            .map(|(free, total)| (free as u64, total as u64))
            .map_err(HwError::cuda("cuMemGetInfo"))
    }

    /// Waits for everything queued in this GPU's context.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize().map_err(HwError::cuda("cuCtxSynchronize"))
    }
}

/// Makes `ctx` the calling thread's current context, as every raw driver call here needs.
pub(super) fn bind(ctx: &CudaContext) -> Result<()> {
    ctx.bind_to_thread().map_err(HwError::cuda("cuCtxSetCurrent"))
}

/// A non-blocking stream, destroyed on drop in its context.
pub(crate) struct Stream {
    pub(super) raw: sys::CUstream,
    ctx: Arc<CudaContext>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = bind(&self.ctx);
        // SAFETY: raw came from cuStreamCreate and is destroyed once.
        let _ = unsafe { result::stream::destroy(self.raw) };
    }
}

/// A timing event, destroyed on drop in its context.
pub(crate) struct Event {
    pub(super) raw: sys::CUevent,
    ctx: Arc<CudaContext>,
}

impl Event {
    /// Milliseconds from `self` to `end`; both must have completed (they have, after enqueue).
    pub(crate) fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        bind(&self.ctx)?;
        // SAFETY: both events are alive and were created with timing enabled.
        unsafe { result::event::elapsed(self.raw, end.raw) }
            .map(f64::from)
            .map_err(HwError::cuda("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = bind(&self.ctx);
        // SAFETY: raw came from cuEventCreate and is destroyed once.
        let _ = unsafe { result::event::destroy(self.raw) };
    }
}
