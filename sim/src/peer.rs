//! One GPU reading another's memory: a link per mapping (VMM with access for both devices, or
//! peer access to a plain allocation), each with a latency and a bandwidth.

use experiments::{peer_calibration_bytes, PeerParams, PeerPoint, PeerSample, Sample};

use crate::fit::FitError;
use crate::transfer::{fit_link_of, pinned_copy_us};

/// Microseconds for the reading GPU's kernel to read `point.bytes` of the other's memory.
pub fn peer_us(params: &PeerParams, point: &PeerPoint) -> f64 {
    let link = if point.vmm { &params.vmm } else { &params.peer_access };
    pinned_copy_us(link, point.bytes)
}

/// Fits one link per mapping (VMM, peer access) on the calibration's samples.
pub fn fit_peer(samples: &[PeerSample], source: String) -> Result<PeerParams, FitError> {
    let time = |s: &PeerSample, vmm: bool| {
        (s.vmm == vmm).then_some(Sample {
            bytes: s.bytes,
            time_us: s.time_us,
        })
    };
    Ok(PeerParams {
        source,
        vmm: fit_link_of(samples, |s| time(s, true))?,
        peer_access: fit_link_of(samples, |s| time(s, false))?,
        calibration_bytes: peer_calibration_bytes(),
    })
}
