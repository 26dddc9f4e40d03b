use cudarc::driver::DriverError;

/// What can go wrong on the GPU side. Every variant is one line naming the call or file.
#[derive(Debug, thiserror::Error)]
pub enum HwError {
    /// No libcuda (no NVIDIA driver) on this machine.
    #[error("the hw backend needs an NVIDIA GPU: no CUDA driver library (libcuda.so) could be loaded on this machine")]
    NoDriver,
    /// The driver loaded but reports no usable device.
    #[error("the hw backend needs an NVIDIA GPU: the CUDA driver found no device ({0})")]
    NoDevice(String),
    /// No NVRTC library to compile kernels with.
    #[error("the hw backend needs NVRTC (libnvrtc.so) to compile vramlab's kernels, and none could be loaded")]
    NoNvrtc,
    /// A CUDA driver call failed.
    #[error("{call} failed: {reason}")]
    Cuda {
        /// The driver function.
        call: &'static str,
        /// The driver's error (shown in the message, so not chained as a source).
        reason: DriverError,
    },
    /// A kernel source did not compile.
    #[error("kernels/{file}: NVRTC compile failed: {log}")]
    Compile {
        /// The .cu file.
        file: &'static str,
        /// The compiler's log, on one line.
        log: String,
    },
    /// Data read back from the device differs from what was written.
    #[error("data check failed: {0}")]
    DataMismatch(String),
    /// A point this GPU cannot run.
    #[error("{0}")]
    Unsupported(String),
    /// A replay over device memory failed: the trace or settings (as the simulator would say),
    /// or the device around an operation (`allocators::Error::Backend`, holding this crate's
    /// error).
    #[error(transparent)]
    Replay(#[from] allocators::Error),
}

impl HwError {
    pub(crate) fn cuda(call: &'static str) -> impl FnOnce(DriverError) -> HwError {
        move |reason| HwError::Cuda { call, reason }
    }
}

/// The result type of this crate.
pub type Result<T, E = HwError> = std::result::Result<T, E>;
