//! One GPU reading another's memory: a link per mapping (VMM with access for both devices, or
//! peer access to a plain allocation), each with a latency and a bandwidth.

use experiments::{PeerParams, PeerPoint};

use crate::transfer::pinned_copy_us;

/// Microseconds for the reading GPU's kernel to read `point.bytes` of the other's memory.
pub fn peer_us(params: &PeerParams, point: &PeerPoint) -> f64 {
    let link = if point.vmm { &params.vmm } else { &params.peer_access };
    pinned_copy_us(link, point.bytes)
}
