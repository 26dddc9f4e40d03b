//! Every family's measurement behind one trait, and the dispatch to them generated from the
//! registry ([`experiments::for_each_family!`]): a family without a probe in
//! `hw/src/<family>.rs` does not compile.

use experiments::{Calibration, Metrics, Workload};

use crate::calibrate::{PartClock, Parts};
use crate::cuda::Gpu;
use crate::error::{HwError, Result};

/// One family's measurements on a GPU: its points, and its calibration part where it has one.
/// Each family's module names its implementation `FamilyProbe`.
pub(crate) trait Probe: Sized {
    /// The family's typed point.
    type Point;

    /// Readies the family's measurements on `gpu` (compiling its kernels); done the first time a
    /// point of the family runs.
    fn load(gpu: &Gpu) -> Result<Self>;

    /// Measures one point.
    fn measure(&mut self, gpu: &Gpu, point: &Self::Point, seed: u64) -> Result<Metrics>;

    /// Gives back device memory kept between points, before another family's point runs.
    fn release(&mut self) {}

    /// Whether the family has a calibration part ([`experiments::CALIBRATION_PARTS`]).
    const CALIBRATES: bool = false;

    /// Measures the family's calibration samples into `calibration`, and returns how many cases
    /// it measured (0 when it ticked `progress` itself). Only called when [`Probe::CALIBRATES`].
    fn calibrate(_gpu: &Gpu, _seed: u64, _calibration: &mut Calibration, _progress: &dyn Fn()) -> Result<usize> {
        unreachable!("only called for families that calibrate")
    }
}

/// The probe in `slot`, loaded the first time a point needs it.
fn loaded<'a, P: Probe>(slot: &'a mut Option<P>, gpu: &Gpu) -> Result<&'a mut P> {
    if slot.is_none() {
        *slot = Some(P::load(gpu)?);
    }
    Ok(slot.as_mut().expect("filled above"))
}

macro_rules! probe_dispatch {
    ($( $(#[$doc:meta])* $module:ident : $Variant:ident($Point:ty) $([$Section:ty])? $({$Sample:ty})? ),* $(,)?) => {
        /// Each family's probe, loaded when its first point runs.
        #[derive(Default)]
        pub(crate) struct Probes {
            $( $module: Option<crate::$module::FamilyProbe>, )*
        }

        impl Probes {
            /// Measures one point with its family's probe, after the other families' probes gave
            /// back the device memory they keep.
            pub(crate) fn measure(&mut self, gpu: &Gpu, workload: &Workload, seed: u64) -> Result<Metrics> {
                $( if !matches!(workload, Workload::$Variant(_)) {
                    if let Some(probe) = &mut self.$module {
                        probe.release();
                    }
                } )*
                match workload {
                    $( Workload::$Variant(point) => {
                        let probe = loaded(&mut self.$module, gpu)?;
                        <crate::$module::FamilyProbe as Probe>::measure(probe, gpu, point, seed)
                    } )*
                }
            }
        }

        /// Measures every selected part into `calibration`, timing each, in the registry's order.
        pub(crate) fn calibrate_parts(
            gpu: &Gpu,
            parts: &Parts,
            seed: u64,
            calibration: &mut Calibration,
            clock: &PartClock,
            progress: &dyn Fn(),
        ) -> Result<()> {
            $( if parts.has(stringify!($module)) {
                if !<crate::$module::FamilyProbe as Probe>::CALIBRATES {
                    return Err(HwError::Unsupported(format!("the {} part has no measurement", stringify!($module))));
                }
                let cases = clock.time(stringify!($module), || {
                    <crate::$module::FamilyProbe as Probe>::calibrate(gpu, seed, calibration, progress)
                })?;
                (0..cases).for_each(|_| progress());
            } )*
            Ok(())
        }

        /// Each family's name, and whether its probe calibrates.
        #[cfg(test)]
        fn calibrating() -> Vec<(&'static str, bool)> {
            vec![ $( (stringify!($module), <crate::$module::FamilyProbe as Probe>::CALIBRATES), )* ]
        }
    };
}
experiments::for_each_family!(probe_dispatch);

#[cfg(test)]
mod tests {
    #[test]
    fn a_family_calibrates_on_a_gpu_exactly_when_it_has_a_calibration_part() {
        for (family, calibrates) in super::calibrating() {
            let has_part = experiments::CALIBRATION_PARTS.iter().any(|p| p.name == family);
            assert_eq!(calibrates, has_part, "{family}");
        }
    }
}
