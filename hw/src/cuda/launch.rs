//! Queued work (copies, events, kernel launches) and loaded kernels. A launch is checked
//! against the kernel's declared parameters and bounds ([`super::kernels`]) before the driver
//! sees it, so no argument list can make a kernel touch memory it was not given.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaModule};

use super::context::{Event, Gpu, Stream};
use super::kernels::{signature_of, Signature};
use super::memory::{prefetch_to_device, DeviceBuffer, DeviceSpan, HostBuffer, ManagedBuffer};
use crate::error::{HwError, Result};

pub(super) fn check_fits(what: &str, bytes: usize, capacity: usize) -> Result<()> {
    if bytes > capacity {
        return Err(HwError::Unsupported(format!(
            "{what} of {bytes} bytes into a {capacity}-byte device buffer"
        )));
    }
    Ok(())
}

/// Work being queued inside [`Gpu::enqueue`]; every borrow lasts until the context is synchronized.
pub(crate) struct Queue<'buf> {
    pub(super) _borrows: PhantomData<&'buf ()>,
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

    /// Launches `kernel` with `args`, after checking them against the kernel's declared
    /// parameters and bounds (an error, never a launch, when they do not match).
    pub(crate) fn launch(
        &self,
        stream: &Stream,
        kernel: &Kernel,
        config: LaunchConfig,
        args: &[Arg<'buf>],
    ) -> Result<()> {
        kernel
            .signature
            .check(args, &config)
            .map_err(|why| HwError::Unsupported(format!("{} launch refused: {why}", kernel.signature.name)))?;
        // Each argument's value lives in `values` until cuLaunchKernel has copied it.
        let mut values: Vec<u64> = args.iter().map(Arg::raw).collect();
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| v as *mut u64 as *mut c_void).collect();
        // SAFETY: every parameter points at a live u64 holding the argument in its first bytes
        // (little-endian, so a 32-bit value reads correctly from a u64 slot); the arguments
        // match the kernel's parameter list and bounds (checked above); device memory is
        // borrowed for 'buf, which outlives the synchronize at the end of Gpu::enqueue; shared
        // memory was allowed up to config.shared_bytes when the kernel was loaded.
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

    /// Moves `buffer`'s pages to this GPU on `stream` (cuMemPrefetchAsync).
    pub(crate) fn prefetch(&self, gpu: &Gpu, stream: &Stream, buffer: &'buf ManagedBuffer) -> Result<()> {
        prefetch_to_device(buffer.span(), gpu.ctx.cu_device(), stream.raw).map_err(HwError::cuda("cuMemPrefetchAsync"))
    }
}

/// One kernel argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'buf> {
    /// An `unsigned long long`.
    U64(u64),
    /// An `int` or `unsigned int`.
    I32(i32),
    /// A pointer to a whole device buffer.
    Device(&'buf DeviceBuffer),
    /// A pointer to device memory borrowed from another owner (managed, peer, a policy's block).
    Span(DeviceSpan<'buf>),
}

impl Arg<'_> {
    /// The bytes of device memory behind a pointer argument.
    pub(super) fn span(&self) -> Option<DeviceSpan<'_>> {
        match self {
            Arg::Device(buffer) => Some(buffer.span()),
            Arg::Span(span) => Some(*span),
            Arg::U64(_) | Arg::I32(_) => None,
        }
    }

    fn raw(&self) -> u64 {
        match self {
            Arg::U64(v) => *v,
            Arg::I32(v) => *v as u32 as u64,
            Arg::Device(buffer) => buffer.ptr,
            Arg::Span(span) => span.ptr,
        }
    }
}

/// Grid shape of a 1-D launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchConfig {
    pub(crate) blocks: u32,
    pub(crate) threads: u32,
    pub(crate) shared_bytes: u32,
}

/// A loaded NVRTC module of one file of kernels/.
pub(crate) struct Module {
    pub(super) module: Arc<CudaModule>,
    pub(super) file: &'static str,
}

impl Module {
    /// Looks up a kernel and allows it `max_shared_bytes` of dynamic shared memory. Only a
    /// kernel whose parameters are declared in [`super::kernels`] can be loaded.
    pub(crate) fn kernel(&self, name: &str, max_shared_bytes: i32) -> Result<Kernel> {
        let signature = signature_of(self.file, name).ok_or_else(|| {
            HwError::Unsupported(format!("{}: kernel {name} has no declared parameter list", self.file))
        })?;
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
        Ok(Kernel { function, signature })
    }
}

/// A kernel function ready to launch.
pub(crate) struct Kernel {
    function: CudaFunction,
    signature: &'static Signature,
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
        let mut blocks = 0i32;
        // SAFETY: as above; the call only reads the function's attributes and writes `blocks`.
        unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                self.function.cu_function(),
                threads as i32,
                dynamic_shared as usize,
            )
        }
        .result()
        .map(|()| blocks as u32)
        .map_err(HwError::cuda("cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    }
}

/// Runs kernels/replay.cu's `stamp` (no `mismatches`) or `verify` over `block` and waits for it.
pub(super) fn launch_pattern(
    gpu: &Gpu,
    stream: &Stream,
    kernel: &Kernel,
    block: DeviceSpan<'_>,
    tag: u32,
    mismatches: Option<&DeviceBuffer>,
) -> Result<()> {
    let words = block.bytes / 4;
    let config = LaunchConfig {
        blocks: words.div_ceil(256).clamp(1, 4096) as u32,
        threads: 256,
        shared_bytes: 0,
    };
    gpu.enqueue(|queue| {
        let mut args = vec![Arg::Span(block), Arg::U64(words), Arg::I32(tag as i32)];
        args.extend(mismatches.map(Arg::Device));
        queue.launch(stream, kernel, config, &args)
    })
}
