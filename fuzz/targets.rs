//! The fuzz targets' bodies, shared by `cargo fuzz` (fuzz/fuzz_targets/*.rs) and the bounded
//! mutation run in CI (sim/tests/fuzz_smoke.rs). Each takes any bytes and must return: an
//! error is fine, a panic, an abort or a hang is the bug.

use allocators::{build_pytorch_policy, replay_policy, ReplayOptions, SimDevice};
use experiments::{AllocConf, BackendKind, Profile, Suite, Trace};

/// Replays what parsed, briefly: the policies must not panic on what an importer lets through.
fn replay_a_little(trace: &Trace) {
    if trace.events.len() > 20_000 {
        return;
    }
    for settings in [
        "",
        "expandable_segments:True",
        "max_split_size_mb:20,garbage_collection_threshold:0.5",
    ] {
        let conf = AllocConf::parse(settings).expect("a fixed, valid setting");
        let mut device = SimDevice::new(80 << 30);
        let options = ReplayOptions {
            capacity: Some(1 << 30),
            time_ops: false,
            timeline_points: 0,
            ..ReplayOptions::default()
        };
        let _ = replay_policy(
            trace,
            "fuzz",
            build_pytorch_policy(&conf),
            &mut device,
            options,
            &mut (),
            BackendKind::Sim,
        );
    }
}

/// A PyTorch snapshot pickle (or anything that starts like one).
pub(crate) fn pickle(data: &[u8]) {
    let mut bytes = vec![0x80];
    bytes.extend_from_slice(data);
    if let Ok(trace) = Trace::from_bytes("fuzz.pickle", &bytes, None) {
        replay_a_little(&trace);
    }
}

/// An RMM log.
pub(crate) fn rmm(data: &[u8]) {
    let mut bytes = b"Thread,Time,Action,Pointer,Size,Stream\n".to_vec();
    bytes.extend_from_slice(data);
    if let Ok(trace) = Trace::from_bytes("fuzz.csv", &bytes, None) {
        replay_a_little(&trace);
    }
}

/// A vramlab trace JSON.
pub(crate) fn trace_json(data: &[u8]) {
    if let Ok(trace) = Trace::from_bytes("fuzz.json", data, None) {
        replay_a_little(&trace);
    }
}

/// A suite file.
pub(crate) fn suite(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Suite::parse("fuzz.toml", text);
    }
}

/// A device profile, and a model run on it when it parses.
pub(crate) fn profile(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(profile) = Profile::parse("fuzz.toml", text) {
            for topic in sim::explain_topics() {
                let params: Vec<String> = match topic {
                    "occupancy" => vec!["threads=256".into(), "registers=64".into()],
                    "banks" => vec!["stride=2".into()],
                    "coalescing" => vec!["width=4".into(), "stride=2".into()],
                    _ => vec!["distinct=5".into()],
                };
                let _ = sim::explain(topic, &params, &profile);
            }
        }
    }
}

/// A `PYTORCH_ALLOC_CONF` string; what parses must read back from its canonical form.
pub(crate) fn alloc_conf(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(conf) = AllocConf::parse(text) {
            let again = AllocConf::parse(&conf.to_string()).expect("the canonical form parses");
            assert_eq!(again, conf, "round trip of {text:?}");
        }
    }
}

/// A target: any bytes in, nothing out.
pub(crate) type Target = fn(&[u8]);

/// Every target by name, for the runners.
pub(crate) const TARGETS: &[(&str, Target)] = &[
    ("pickle", pickle),
    ("rmm", rmm),
    ("trace_json", trace_json),
    ("suite", suite),
    ("profile", profile),
    ("alloc_conf", alloc_conf),
];
