//! Tests that need an NVIDIA GPU. They are ignored by default, so a machine without one
//! reports them as ignored rather than passing them silently; run with `--ignored` where no GPU
//! opens, each fails saying so. On a GPU machine: `cargo test -p hw -- --ignored` (or run the
//! compiled test binary with `--ignored`). The one test not ignored checks opening, on any machine.

use experiments::{Backend, Suite};
use hw::HwBackend;

const SUITE: &str = r#"
name = "gpu-tests"
[[experiment]]
name = "up"
family = "transfer"
[experiment.sweep]
direction = ["h2d", "d2h"]
host = ["pinned", "pageable"]
bytes = ["4 KiB", "64 MiB"]

[[experiment]]
name = "overlap"
family = "overlap"
[experiment.sweep]
bytes = "64 MiB"
chunks = 16
streams = [1, 2]
kernel_us = 1500
"#;

/// The GPU an ignored test needs: run with `--ignored` on a machine without one, the test fails
/// here, saying so, rather than passing or failing somewhere less clear.
fn open_gpu() -> HwBackend {
    HwBackend::open().unwrap_or_else(|e| panic!("this test needs an NVIDIA GPU and cannot open one: {e}"))
}

fn metric(record: &experiments::Record, index: usize, name: &str) -> f64 {
    record.points[index].metrics[name]
}

#[test]
#[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
fn transfers_move_real_data_at_pcie_speeds() {
    let suite = Suite::parse("gpu-tests", SUITE).unwrap();
    let mut gpu = open_gpu();
    assert!(gpu.device().memory_bytes > 1 << 30);
    let record = gpu
        .run(&suite.experiments[0], 1, &|| {})
        .expect("measures (and checks the data)");
    // Order: direction, host, bytes. Pinned 64 MiB copies must beat PCIe Gen3 x16 (~13 GB/s).
    for (index, label) in [(1, "pinned h2d"), (5, "pinned d2h")] {
        let gbps = metric(&record, index, "gb_per_s");
        assert!(gbps > 13.0, "{label} 64 MiB: {gbps} GB/s");
    }
    for point in &record.points {
        let m = &point.metrics;
        assert!(m["time_us_min"] <= m["time_us"] && m["time_us"] <= m["time_us_max"]);
        assert!(m["time_us"] > 0.5, "a copy cannot take under half a microsecond: {m:?}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
fn two_streams_overlap_copies_with_kernels() {
    let suite = Suite::parse("gpu-tests", SUITE).unwrap();
    let mut gpu = open_gpu();
    let record = gpu.run(&suite.experiments[1], 1, &|| {}).expect("measures");
    let (one, two) = (metric(&record, 0, "speedup"), metric(&record, 1, "speedup"));
    assert!(one < 1.05, "one stream cannot overlap: {one}");
    assert!(two > 1.2, "two streams must overlap copy and compute: {two}");
    // The kernel really spins for its time: the serial schedule takes at least copy + kernel.
    assert!(metric(&record, 0, "serial_time_us") > 1500.0);
}

/// Runs its check on every machine: without a driver or without a device, opening is one line
/// saying a GPU is needed (never a panic); with a GPU, it opens it.
#[test]
fn open_is_a_gpu_or_one_line_saying_one_is_needed() {
    match HwBackend::open() {
        Ok(gpu) => assert!(
            hw::driver_present() && gpu.device().memory_bytes > 0,
            "opened {:?}",
            gpu.device()
        ),
        Err(e) => {
            let err = e.to_string();
            assert!(err.contains("needs an NVIDIA GPU") && !err.contains('\n'), "{err}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
fn policies_replay_over_device_memory_without_overlap() {
    use experiments::{PolicySpec, Trace};
    drop(open_gpu());
    let trace = Trace::synthetic("synthetic:training-loop:steps=4", 7).unwrap();
    let specs = PolicySpec::parse_list("caching,expandable,best-fit,buddy,cuda-malloc-async").unwrap();
    let record = hw::replay_on_gpu(&trace, &specs, None, &|_| {}).expect("replays with every block checked");
    for (spec, result) in specs.iter().zip(&record.results) {
        let check = result.device_check.as_deref().unwrap_or_default();
        assert!(check.contains("no overlap"), "{}: {check}", spec.label());
        assert_eq!(result.failed_allocs, 0, "{}", spec.label());
        assert_eq!(result.counters["held_after_release"], 0, "{}", spec.label());
        // The same bookkeeping in simulation needs the same memory, give or take the order
        // in which real addresses break ties between equal free blocks.
        let mut device = allocators::SimDevice::new(record.device.memory_bytes);
        let sim = allocators::replay(
            &trace,
            spec,
            &mut device,
            allocators::ReplayOptions::default(),
            &mut (),
            experiments::BackendKind::Sim,
        )
        .unwrap();
        let ratio = result.peak_reserved_bytes as f64 / sim.peak_reserved_bytes as f64;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{}: hw {} vs sim {}",
            spec.label(),
            result.peak_reserved_bytes,
            sim.peak_reserved_bytes
        );
    }
}

/// A deliberately wrong policy: every block starts at the same address.
struct OneAddress {
    base: Option<u64>,
}

impl allocators::Policy for OneAddress {
    fn allocate(
        &mut self,
        device: &mut dyn allocators::DeviceMemory,
        size: u64,
        _stream: u64,
    ) -> Result<allocators::Block, allocators::AllocError> {
        let base = *self
            .base
            .get_or_insert_with(|| device.allocate(64 << 20).expect("64 MiB"));
        Ok(allocators::Block {
            addr: base,
            size: size.div_ceil(256) * 256,
        })
    }
    fn free(&mut self, _device: &mut dyn allocators::DeviceMemory, _block: allocators::Block) {}
    fn free_space(&self) -> allocators::FreeSpace {
        allocators::FreeSpace::default()
    }
    fn alignment(&self) -> u64 {
        256
    }
    fn release_cached(&mut self, device: &mut dyn allocators::DeviceMemory) {
        if let Some(base) = self.base.take() {
            device.free(base, 64 << 20);
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
fn a_policy_that_overlaps_blocks_is_caught_on_the_device() {
    use experiments::Trace;
    drop(open_gpu());
    // Many blocks live at once, all handed out at one address: the device check must see it.
    let trace = Trace::synthetic("synthetic:log-uniform:count=200:max=1MiB", 3).unwrap();
    let policies: Vec<(String, Box<dyn allocators::Policy>)> =
        vec![("one-address".into(), Box::new(OneAddress { base: None }))];
    let err = hw::replay_policies_on_gpu(&trace, policies, allocators::ReplayOptions::default(), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("overlapping"), "{err}");
}

#[test]
#[ignore = "needs an NVIDIA GPU; run with --ignored on a GPU machine"]
fn growing_past_the_device_is_refused_and_keeps_the_data() {
    let mut gpu = open_gpu();
    // The first power of two above the device's memory: half of it fits, all of it cannot.
    let past = gpu.device().memory_bytes.next_power_of_two();
    let text = format!(
        "name = \"grow-past\"\n[[experiment]]\nname = \"past\"\nfamily = \"growth\"\n[experiment.sweep]\nstrategy = [\"vmm\", \"copy\"]\nbytes = [{}, {past}]\n",
        past / 2
    );
    let suite = Suite::parse("grow-past", &text).unwrap();
    // The probe checks every byte written before each grow after it, refused or not, and
    // fails the point if any changed; so a successful run means the data stayed intact.
    let record = gpu
        .run(&suite.experiments[0], 1, &|| {})
        .expect("grows measured and data checked");
    let ok = |i: usize| metric(&record, i, "ok");
    // vmm: half the device fits, the whole is refused; copy needs 1.5x: both refused at the whole.
    assert_eq!((ok(0), ok(1)), (1.0, 0.0), "vmm: {:?}", record.points);
    assert_eq!(ok(3), 0.0, "copy: {:?}", record.points);
}
