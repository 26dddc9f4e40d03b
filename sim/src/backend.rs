use rayon::prelude::*;

use experiments::{
    coalescing_metrics, cycles_metrics, growth_metrics, occupancy_metrics, overlap_metrics, spill_metrics,
    transfer_metrics, Backend, BackendKind, DeviceInfo, Experiment, Family, ParamValue, Params, PointRecord, Profile,
    Record, Workload,
};

use crate::banks::{bank_access, bank_cycles};
use crate::coalescing::{read_time, warp_footprint};
use crate::constant::constant_cycles;
use crate::growth::predict_growth;
use crate::latency::chase_cycles;
use crate::migration::migration_us;
use crate::occupancy::occupancy;
use crate::overlap::{overlapped_us, serial_us};
use crate::peer::peer_us;
use crate::spills::predict_spills;
use crate::transfer::copy_us;

/// The model as a [`Backend`]: predicts every point from a device profile, in parallel.
#[derive(Debug, Clone)]
pub struct SimBackend {
    profile: Profile,
}

/// The model never fails on a point that parsed; this type exists for the trait.
#[derive(Debug, thiserror::Error)]
#[error("simulation failed: {0}")]
pub struct SimError(String);

impl SimBackend {
    /// The profile it predicts from.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// A model of the GPU that `profile` describes.
    pub fn new(profile: Profile) -> SimBackend {
        SimBackend { profile }
    }

    /// Predicts one point.
    pub fn predict(&self, workload: &Workload) -> Result<experiments::Metrics, SimError> {
        let params = &self.profile.transfer;
        Ok(match workload {
            Workload::Transfer(point) => transfer_metrics(copy_us(params, point), point.bytes),
            Workload::Overlap(point) => overlap_metrics(overlapped_us(params, point), serial_us(params, point)),
            Workload::Banks(point) => {
                let shared = self.section(&self.profile.banks, "banks")?;
                let access = bank_access(shared, point);
                let mut metrics = cycles_metrics(bank_cycles(shared, point));
                metrics.insert("wavefronts".to_string(), f64::from(access.wavefronts));
                metrics.insert("conflict_degree".to_string(), f64::from(access.conflict_degree));
                metrics
            }
            Workload::Coalescing(point) => {
                let global = self.section(&self.profile.coalescing, "coalescing")?;
                let footprint = warp_footprint(global, point);
                let time = read_time(global, &self.profile.sm, self.profile.device.multiprocessors, point).ok_or_else(
                    || {
                        SimError(format!(
                            "dynamic_shared = {}: the read kernel's block does not fit an SM of profile '{}'",
                            point.dynamic_shared, self.profile.name
                        ))
                    },
                )?;
                let mut metrics = coalescing_metrics(time.total_us, point);
                metrics.insert("blocks_per_sm".into(), f64::from(time.blocks_per_sm));
                metrics.insert("latency_bound_us".into(), time.latency_us);
                metrics.insert("bandwidth_bound_us".into(), time.bandwidth_us);
                metrics.insert("sectors_per_warp".into(), f64::from(footprint.sectors));
                metrics.insert("lines_per_warp".into(), f64::from(footprint.lines));
                metrics.insert("efficiency".into(), footprint.efficiency);
                metrics
            }
            Workload::Peer(point) => {
                transfer_metrics(peer_us(self.section(&self.profile.peer, "peer")?, point), point.bytes)
            }
            Workload::Migration(point) => transfer_metrics(
                migration_us(self.section(&self.profile.migration, "migration")?, point),
                point.bytes,
            ),
            Workload::Spills(point) => {
                let spills = self.section(&self.profile.spills, "spills")?;
                let global = self.section(&self.profile.coalescing, "coalescing")?;
                let p = predict_spills(
                    spills,
                    &self.profile.sm,
                    self.profile.device.multiprocessors,
                    global,
                    point,
                );
                spill_metrics(p.ns_per_iteration, p.warps_per_sm, p.registers_used, p.frame_bytes)
            }
            Workload::Growth(point) => {
                let growth = self.section(&self.profile.growth, "growth")?;
                let prediction = predict_growth(growth, point).ok_or_else(|| {
                    SimError(format!(
                        "profile '{}' has no growth cost for strategy {} (reserve {})",
                        self.profile.name,
                        point.strategy.name(),
                        point.reserve
                    ))
                })?;
                growth_metrics(prediction.grow_us, prediction.peak_bytes)
            }
            Workload::Constant(point) => cycles_metrics(constant_cycles(
                self.section(&self.profile.constant, "constant")?,
                point,
            )),
            Workload::Latency(point) => {
                cycles_metrics(chase_cycles(self.section(&self.profile.latency, "latency")?, point))
            }
            Workload::Occupancy(point) => {
                let sm = &self.profile.sm;
                let blocks = occupancy(sm, point).blocks_per_sm;
                occupancy_metrics(
                    blocks,
                    point.threads,
                    sm.warp_size,
                    sm.max_threads_per_sm / sm.warp_size,
                )
            }
        })
    }
}

impl SimBackend {
    /// A profile section a family needs; profiles calibrated before the family existed lack it.
    fn section<'a, T>(&self, section: &'a Option<T>, name: &str) -> Result<&'a T, SimError> {
        section.as_ref().ok_or_else(|| {
            SimError(format!(
                "profile '{}' has no [{name}] section; add one with vramlab calibrate --part {name} --into <profile.toml> on a GPU",
                self.profile.name
            ))
        })
    }

    /// The points of `family` that this profile's parameters were fitted on.
    fn calibration_points(&self, family: Family) -> Vec<Params> {
        let int = |v: u64| ParamValue::Int(v as i64);
        match family {
            Family::Transfer => self
                .profile
                .transfer
                .calibration_bytes
                .iter()
                .map(|b| Params::from([("bytes".to_string(), int(*b))]))
                .collect(),
            Family::Banks => self
                .profile
                .banks
                .iter()
                .flat_map(|s| s.calibration_cases.iter())
                .map(|(w, s)| {
                    Params::from([
                        ("width".to_string(), int(u64::from(*w))),
                        ("stride".to_string(), int(u64::from(*s))),
                    ])
                })
                .collect(),
            Family::Coalescing => self
                .profile
                .coalescing
                .iter()
                .flat_map(|g| g.calibration_cases.iter())
                .map(|(w, s, b)| {
                    Params::from([
                        ("width".to_string(), int(u64::from(*w))),
                        ("stride".to_string(), int(u64::from(*s))),
                        ("bytes".to_string(), int(*b)),
                        ("offset".to_string(), int(0)),
                        ("active_lanes".to_string(), int(32)),
                        ("dynamic_shared".to_string(), int(0)),
                    ])
                })
                .collect(),
            Family::Latency => self
                .profile
                .latency
                .iter()
                .flat_map(|l| l.calibration_bytes.iter())
                .map(|b| Params::from([("bytes".to_string(), int(*b))]))
                .collect(),
            Family::Constant => self
                .profile
                .constant
                .iter()
                .flat_map(|c| c.calibration_cases.iter())
                .map(|(distinct, cold)| {
                    Params::from([
                        ("distinct".to_string(), int(u64::from(*distinct))),
                        (
                            "cache".to_string(),
                            ParamValue::Text(if *cold { "cold" } else { "warm" }.to_string()),
                        ),
                    ])
                })
                .collect(),
            Family::Growth => self
                .profile
                .growth
                .iter()
                .flat_map(|g| g.calibration_bytes.iter())
                .map(|&b| Params::from([("bytes".to_string(), int(b))]))
                .collect(),
            Family::Peer => self
                .profile
                .peer
                .iter()
                .flat_map(|m| m.calibration_bytes.iter())
                .map(|&b| Params::from([("bytes".to_string(), int(b))]))
                .collect(),
            Family::Migration => self
                .profile
                .migration
                .iter()
                .flat_map(|m| m.calibration_bytes.iter())
                .map(|&b| Params::from([("bytes".to_string(), int(b))]))
                .collect(),
            Family::Spills => self
                .profile
                .spills
                .iter()
                .flat_map(|s| s.calibration_cases.iter())
                .map(|&(live, registers)| {
                    Params::from([
                        ("live".to_string(), int(u64::from(live))),
                        ("registers".to_string(), int(u64::from(registers))),
                    ])
                })
                .collect(),
            Family::Overlap | Family::Occupancy => Vec::new(),
        }
    }
}

impl Backend for SimBackend {
    type Error = SimError;

    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn device(&self) -> DeviceInfo {
        let d = &self.profile.device;
        DeviceInfo {
            name: d.name.clone(),
            compute_capability: d.compute_capability.clone(),
            memory_bytes: d.memory_bytes,
            multiprocessors: d.multiprocessors,
            copy_engines: d.copy_engines,
            ..DeviceInfo::default()
        }
    }

    fn run(&mut self, experiment: &Experiment, seed: u64, progress: &(dyn Fn() + Sync)) -> Result<Record, SimError> {
        let points = experiment
            .points
            .par_iter()
            .map(|point| {
                let metrics = self.predict(&point.workload)?;
                progress();
                Ok(PointRecord {
                    params: point.params.clone(),
                    metrics,
                })
            })
            .collect::<Result<Vec<_>, SimError>>()?;
        Ok(Record {
            experiment: experiment.name.clone(),
            suite: experiment.suite.clone(),
            family: experiment.family,
            backend: BackendKind::Sim,
            device: self.device(),
            profile: self.profile.name.clone(),
            seed,
            calibration_points: self.calibration_points(experiment.family),
            vramlab_version: env!("CARGO_PKG_VERSION").to_string(),
            commit: experiments::CODE_COMMIT.to_string(),
            uncertainty: self.profile.spread_of(experiment.family),
            holdout_registered: experiment.holdout_registered.clone(),
            points,
        })
    }
}
