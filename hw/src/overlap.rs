//! Copy/compute overlap: a pinned upload cut into chunks over several streams, each chunk
//! followed on its stream by a kernel of known duration, against copy-then-compute.

use experiments::{median, overlap_metrics, Metrics, OverlapPoint};

use crate::cuda::{Event, Gpu, Stream};
use crate::error::{HwError, Result};
use crate::probes::Probe;
use crate::spin::Spin;
use crate::timing::{fill_pattern, median_us, Repeats};

/// Timed samples of each schedule per point.
const OVERLAP_SAMPLES: usize = 9;

/// Median serial and overlapped times of one point, microseconds.
pub(crate) fn measure_overlap(gpu: &Gpu, spin: &Spin, point: &OverlapPoint, seed: u64) -> Result<(f64, f64)> {
    let bytes = usize::try_from(point.bytes).map_err(|_| HwError::Unsupported(format!("{} bytes", point.bytes)))?;
    let device = gpu.device_buffer(bytes)?;
    let mut host = gpu.pinned_buffer(bytes)?;
    fill_pattern(host.contents_mut(), seed ^ point.bytes, 0);
    let streams: Vec<Stream> = (0..point.streams).map(|_| gpu.stream()).collect::<Result<_>>()?;
    let joins: Vec<Event> = (0..point.streams).map(|_| gpu.event()).collect::<Result<_>>()?;
    let (start, end) = (gpu.event()?, gpu.event()?);
    let total_ns = (point.kernel_us * 1e3).round() as u64;
    let chunk_ns = (point.kernel_us * 1e3 / f64::from(point.chunks)).round() as u64;
    let main = &streams[0];

    let serial = |repeats| {
        median_us(gpu, main, repeats, &start, &end, |q| {
            q.upload(main, &device, 0, &host, 0..bytes)?;
            q.launch_u64(main, &spin.kernel, spin.config, total_ns)
        })
        .map(|t| t.median)
    };
    let overlapped = |repeats| {
        median_us(gpu, main, repeats, &start, &end, |q| {
            for stream in &streams[1..] {
                q.wait(stream, &start)?;
            }
            let mut offset = 0usize;
            for chunk in 0..point.chunks {
                let stream = &streams[(chunk % point.streams) as usize];
                let len = point.chunk_bytes(chunk) as usize;
                q.upload(stream, &device, offset, &host, offset..offset + len)?;
                q.launch_u64(stream, &spin.kernel, spin.config, chunk_ns)?;
                offset += len;
            }
            for (stream, join) in streams.iter().zip(&joins).skip(1) {
                q.record(join, stream)?;
                q.wait(main, join)?;
            }
            Ok(())
        })
        .map(|t| t.median)
    };
    // The two schedules take turns, sample by sample, so a slow spell of the machine slows
    // both alike instead of only the one measured while it lasted (a serial reference timed
    // alone once came out 35% slow and made one stream look faster than serial).
    serial(Repeats { warmup: 2, samples: 1 })?;
    overlapped(Repeats { warmup: 2, samples: 1 })?;
    let (mut serial_us, mut overlapped_us) = (Vec::new(), Vec::new());
    for _ in 0..OVERLAP_SAMPLES {
        serial_us.push(serial(Repeats { warmup: 0, samples: 1 })?);
        overlapped_us.push(overlapped(Repeats { warmup: 0, samples: 1 })?);
    }
    let (serial, overlapped) = (median(&mut serial_us), median(&mut overlapped_us));
    Ok((serial, overlapped))
}

/// The overlap probe: the spin kernel, loaded once.
pub(crate) struct FamilyProbe(Spin);

impl Probe for FamilyProbe {
    type Point = OverlapPoint;

    fn load(gpu: &Gpu) -> Result<FamilyProbe> {
        Spin::load(gpu).map(FamilyProbe)
    }

    fn measure(&mut self, gpu: &Gpu, point: &OverlapPoint, seed: u64) -> Result<Metrics> {
        let (serial, overlapped) = measure_overlap(gpu, &self.0, point, seed)?;
        Ok(overlap_metrics(overlapped, serial))
    }
}
