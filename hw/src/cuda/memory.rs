//! Every allocation is a value that owns it: made in its GPU's context, freed on drop in the
//! same context, once. Kernels and copies see device memory only as a [`DeviceSpan`] borrowed
//! from one of these owners, so no address outlives the memory it names.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use super::context::bind;
use super::driver;
use crate::error::{HwError, Result};

/// A range of device memory borrowed from its owner for `'buf`: what a kernel argument or a
/// copy names. Only this module's owners make one, from memory they hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceSpan<'buf> {
    pub(super) ptr: u64,
    pub(super) bytes: u64,
    _owner: PhantomData<&'buf ()>,
}

impl DeviceSpan<'_> {
    /// A span of memory the caller holds for `'buf` (checked by the caller).
    pub(super) fn held(ptr: u64, bytes: u64) -> Self {
        DeviceSpan {
            ptr,
            bytes,
            _owner: PhantomData,
        }
    }
}

/// Device memory from cuMemAlloc.
pub(crate) struct DeviceBuffer {
    pub(super) ptr: sys::CUdeviceptr,
    pub(super) bytes: usize,
    ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} B)", self.ptr, self.bytes)
    }
}

impl DeviceBuffer {
    /// `bytes` of device memory in `ctx`; the driver's error as it gave it.
    pub(super) fn new(ctx: &Arc<CudaContext>, bytes: usize) -> std::result::Result<DeviceBuffer, DriverError> {
        ctx.bind_to_thread()?;
        // SAFETY: allocates in the bound context; the value owns it from here and frees it once.
        let ptr = driver::call(|| unsafe { result::malloc_sync(bytes) })?;
        driver::made();
        Ok(DeviceBuffer {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// The whole buffer, for a kernel argument.
    pub(crate) fn span(&self) -> DeviceSpan<'_> {
        DeviceSpan::held(self.ptr, self.bytes as u64)
    }

    /// Its size, bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = bind(&self.ctx);
        // SAFETY: ptr came from cuMemAlloc and is freed once; Gpu::enqueue synchronized any use.
        let _ = unsafe { result::free_sync(self.ptr) };
        driver::freed();
    }
}

/// Host memory the device copies to and from: page-locked (cuMemHostAlloc, flags 0) or
/// ordinary pageable memory. The CPU reads and writes it only through `&mut self`, so it can
/// never race with a copy queued through a shared borrow.
pub(crate) struct HostBuffer {
    pub(super) ptr: *mut u8,
    pub(super) bytes: usize,
    /// The context of page-locked memory; `None` for pageable memory.
    pinned: Option<Arc<CudaContext>>,
}

impl HostBuffer {
    /// Ordinary heap memory, zeroed and touched (every page resident before anything is timed).
    pub(crate) fn pageable(bytes: usize) -> HostBuffer {
        let boxed: Box<[u8]> = vec![1u8; bytes.max(1)].into_boxed_slice();
        HostBuffer {
            ptr: Box::into_raw(boxed) as *mut u8,
            bytes,
            pinned: None,
        }
    }

    /// Page-locked memory with flags 0 (plain pinned, not write-combined), zeroed.
    pub(super) fn pinned(ctx: &Arc<CudaContext>, bytes: usize) -> Result<HostBuffer> {
        bind(ctx)?;
        // SAFETY: allocates page-locked host memory; the value owns it from here.
        let ptr = driver::call(|| unsafe { result::malloc_host(bytes.max(1), 0) })
            .map_err(HwError::cuda("cuMemHostAlloc"))? as *mut u8;
        driver::made();
        let buffer = HostBuffer {
            ptr,
            bytes,
            pinned: Some(ctx.clone()),
        };
        // SAFETY: the allocation is at least `bytes` long; zeroing initialises every byte.
        unsafe { std::ptr::write_bytes(buffer.ptr, 0, bytes) };
        Ok(buffer)
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
        match &self.pinned {
            Some(ctx) => {
                let _ = bind(ctx);
                // SAFETY: ptr came from cuMemHostAlloc and is freed once.
                let _ = unsafe { result::free_host(self.ptr as *mut c_void) };
                driver::freed();
            }
            // SAFETY: ptr came from Box::into_raw of a slice of max(bytes, 1) bytes, freed once.
            None => drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.bytes.max(1))) }),
        }
    }
}

/// Managed memory (cuMemAllocManaged, attached globally) that the host writes and kernels
/// read. The host touches it only through `&mut self`, and kernels use it only inside
/// [`Gpu::enqueue`](super::Gpu::enqueue) (which synchronizes), so host and device never access
/// it at once.
pub(crate) struct ManagedBuffer {
    pub(super) ptr: u64,
    pub(super) bytes: usize,
    ctx: Arc<CudaContext>,
}

impl ManagedBuffer {
    /// `bytes` of managed memory (no device pages until touched or prefetched).
    pub(super) fn allocate(ctx: &Arc<CudaContext>, bytes: usize) -> std::result::Result<ManagedBuffer, DriverError> {
        ctx.bind_to_thread()?;
        let mut ptr = 0;
        let flags = sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
        // SAFETY: writes one address through a valid pointer; the value owns the memory from here.
        driver::call(|| unsafe { sys::cuMemAllocManaged(&mut ptr, bytes.max(4), flags) }.result())?;
        driver::made();
        Ok(ManagedBuffer {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    pub(crate) fn new(gpu: &super::Gpu, bytes: usize) -> Result<ManagedBuffer> {
        ManagedBuffer::allocate(&gpu.ctx, bytes).map_err(HwError::cuda("cuMemAllocManaged"))
    }

    /// The buffer as 32-bit words, on the host (which moves its pages to the host).
    pub(crate) fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: managed memory is host-accessible; the allocation holds `bytes` bytes, aligned
        // for u32 (allocations are 256-byte aligned); &mut self excludes any queued kernel
        // borrowing it, and every kernel finished when its enqueue returned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u32, self.bytes / 4) }
    }

    /// The whole buffer, for a kernel argument.
    pub(crate) fn span(&self) -> DeviceSpan<'_> {
        DeviceSpan::held(self.ptr, self.bytes as u64)
    }

    /// Bytes in the buffer.
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }
}

impl Drop for ManagedBuffer {
    fn drop(&mut self) {
        let _ = bind(&self.ctx);
        let _ = self.ctx.synchronize();
        // SAFETY: the pointer came from cuMemAllocManaged and is freed once; no kernel uses it.
        let _ = unsafe { result::free_sync(self.ptr) };
        driver::freed();
    }
}

/// Moves `span` of managed memory to device `device` on `stream`.
pub(super) fn prefetch_to_device(
    span: DeviceSpan<'_>,
    device: i32,
    stream: sys::CUstream,
) -> std::result::Result<(), DriverError> {
    let location = super::vmm::device_location(device);
    // SAFETY: the span is live managed memory borrowed from its owner; the stream is alive.
    driver::call(|| unsafe { sys::cuMemPrefetchAsync_v2(span.ptr, span.bytes as usize, location, 0, stream) }.result())
}
