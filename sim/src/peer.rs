//! One GPU reading another's memory: a link per mapping (VMM with access for both devices, or
//! peer access to a plain allocation), each with a latency and a bandwidth.

use experiments::{Calibration, Family, Metrics, Params, Profile};

use crate::backend::SimError;
use crate::fit::FitError;
use crate::models::{bytes_points, fitted_or_kept, required, Model};

use experiments::{peer_calibration_bytes, PeerParams, PeerPoint, PeerSample, Sample};

use crate::link::{fit_link_of, pinned_copy_us};

/// Microseconds for the reading GPU's kernel to read `point.bytes` of the other's memory.
pub(crate) fn peer_us(params: &PeerParams, point: &PeerPoint) -> f64 {
    let link = if point.vmm { &params.vmm } else { &params.peer_access };
    pinned_copy_us(link, point.bytes)
}

/// Fits one link per mapping (VMM, peer access) on the calibration's samples.
pub(crate) fn fit_peer(samples: &[PeerSample], source: String) -> Result<PeerParams, FitError> {
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

/// The peer-read model.
pub(crate) struct FamilyModel;

impl Model for FamilyModel {
    type Point = PeerPoint;

    fn predict(profile: &Profile, point: &PeerPoint) -> Result<Metrics, SimError> {
        let params = required(profile, &profile.peer, Family::Peer)?;
        Ok(experiments::throughput_metrics(peer_us(params, point), point.bytes))
    }

    fn calibration_points(profile: &Profile) -> Vec<Params> {
        profile.peer.iter().flat_map(|m| bytes_points(&m.calibration_bytes)).collect()
    }

    fn fit(calibration: &Calibration, base: Option<&Profile>, profile: &mut Profile) -> Result<(), FitError> {
        let d = &calibration.device;
        profile.peer = fitted_or_kept(&calibration.peer, base.and_then(|b| b.peer.as_ref()), || {
            fit_peer(
                &calibration.peer,
                format!(
                    "vramlab calibrate on two {} ({}): event-timed kernel on the second GPU reading the first's memory at calibration_bytes (ld.global.cg, 16-byte dense reads), median of 7, a line fitted by least absolute relative error",
                    d.name, calibration.date
                ),
            )
        })?;
        Ok(())
    }
}
