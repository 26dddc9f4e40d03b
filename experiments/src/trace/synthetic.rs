//! Seeded synthetic traces: the same seed and parameters always give the same events.

use std::collections::BTreeMap;

use super::{Trace, TraceEvent, TraceSource};
use crate::error::{Error, Result};
use crate::units::parse_bytes;

/// One generator: its name, what it models, and its parameters with defaults.
#[derive(Debug, Clone, Copy)]
pub struct SyntheticInfo {
    /// The name after `synthetic:`.
    pub name: &'static str,
    /// What it models.
    pub summary: &'static str,
    /// (parameter, default, the largest value taken).
    pub params: &'static [(&'static str, &'static str, u64)],
}

const TIB: u64 = 1 << 40;
/// The most events a generator may produce at all (each event is a few bytes in memory and on
/// disk).
const MAX_SYNTHETIC_EVENTS: u64 = 50_000_000;

/// What one event costs to hold and replay: the trace's 32 bytes, and per replay running at a
/// time (two on two cores) its live-table slot and its share of the search's copies.
const BYTES_PER_EVENT: u64 = 160;

/// The events a generator makes unless `VRAMLAB_MAX_EVENTS` says more: 10 M, about 1.6 GB to
/// hold and replay (the size of the largest snapshots replayed in the benchmarks).
fn event_budget() -> Result<u64> {
    Ok(crate::files::env_limit("VRAMLAB_MAX_EVENTS", 10_000_000)?.min(MAX_SYNTHETIC_EVENTS))
}

/// The generators.
pub const SYNTHETIC_TRACES: &[SyntheticInfo] = &[
    SyntheticInfo {
        name: "training-loop",
        summary: "weights and optimizer state kept; per step a batch of random size, activations kept for the backward pass, short-lived workspaces",
        params: &[
            ("steps", "40", 1_000_000),
            ("layers", "16", 10_000),
            ("batch_min", "16", 1_000_000),
            ("batch_max", "64", 1_000_000),
        ],
    },
    SyntheticInfo {
        name: "log-uniform",
        summary: "random sizes, uniform in log(size), with random lifetimes around a live-set target",
        params: &[
            ("count", "10000", MAX_SYNTHETIC_EVENTS / 2),
            ("min", "512", TIB),
            ("max", "64 MiB", TIB),
            ("live", "64", 1_000_000),
        ],
    },
    SyntheticInfo {
        name: "growing-vector",
        summary: "vectors that double: allocate the larger buffer, then free the old one",
        params: &[
            ("vectors", "4", 100_000),
            ("start", "4 KiB", TIB),
            ("limit", "256 MiB", TIB),
            ("factor", "2", 1024),
        ],
    },
];

/// splitmix64: small, seedable, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    fn log_uniform(&mut self, low: u64, high: u64) -> u64 {
        let (l, h) = ((low as f64).ln(), (high as f64).ln());
        ((l + (h - l) * self.unit()).exp().round() as u64).clamp(low, high)
    }
}

struct Events {
    events: Vec<TraceEvent>,
    next_id: u64,
}

impl Events {
    fn alloc(&mut self, size: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.events.push(TraceEvent::Alloc { id, size, stream: 0 });
        id
    }

    fn free(&mut self, id: u64) {
        self.events.push(TraceEvent::Free { id });
    }
}

pub(super) fn generate(spec: &str, seed: u64) -> Result<Trace> {
    let rest = spec.strip_prefix("synthetic:").unwrap_or(spec);
    let mut parts = rest.split(':');
    let generator = parts.next().unwrap_or_default();
    let Some(SyntheticInfo { params: defaults, .. }) = SYNTHETIC_TRACES.iter().find(|g| g.name == generator) else {
        return Err(Error::Unknown {
            kind: "synthetic trace",
            name: generator.to_string(),
            valid: SYNTHETIC_TRACES.iter().map(|g| g.name.to_string()).collect(),
        });
    };
    let mut params: BTreeMap<&str, u64> = BTreeMap::new();
    for (key, value, _) in defaults.iter() {
        params.insert(key, parse_bytes(value).map_err(Error::Trace)?);
    }
    let mut given = std::collections::BTreeSet::new();
    for part in parts {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| Error::Trace(format!("{spec}: '{part}' is not key=value")))?;
        let slot = params.get_mut(key).ok_or_else(|| Error::Unknown {
            kind: "parameter",
            name: format!("{generator}.{key}"),
            valid: defaults.iter().map(|(k, _, _)| k.to_string()).collect(),
        })?;
        if !given.insert(key) {
            return Err(Error::Trace(format!("{spec}: {key} is given twice")));
        }
        let max = defaults.iter().find(|(k, _, _)| *k == key).map_or(0, |(_, _, m)| *m);
        // Counts and sizes alike are whole numbers; sizes may carry a unit (`64 MiB`).
        *slot = parse_bytes(value).map_err(|_| {
            Error::Trace(format!(
                "{spec}: {key} = {value}: not a whole number (or a size such as 64MiB) in 1..={max}"
            ))
        })?;
        if *slot == 0 || *slot > max {
            return Err(Error::Trace(format!("{spec}: {key} = {value}: must lie in 1..={max}")));
        }
    }
    let p = |key: &str| params[key];
    // What each generator would emit, bounded before any of it is made.
    let estimate = match generator {
        "training-loop" => p("steps").saturating_mul(p("layers")).saturating_mul(6),
        "log-uniform" => p("count").saturating_mul(2),
        _ => p("vectors").saturating_mul(2 * 64),
    };
    let budget = event_budget()?;
    if estimate > budget {
        return Err(Error::Trace(format!(
            "{spec}: about {estimate} events, about {} to hold and replay, more than the {budget} events a generator makes by default (VRAMLAB_MAX_EVENTS raises it)",
            crate::units::format_bytes(estimate.saturating_mul(BYTES_PER_EVENT))
        )));
    }
    let mut rng = Rng(seed ^ 0x6d65_6d6c_6162);
    let mut out = Events {
        events: Vec::new(),
        next_id: 0,
    };
    match generator {
        "training-loop" => {
            if p("batch_min") > p("batch_max") {
                return Err(Error::Trace(format!(
                    "{spec}: batch_min = {} is larger than batch_max = {}",
                    p("batch_min"),
                    p("batch_max")
                )));
            }
            training_loop(
                &mut rng,
                &mut out,
                p("steps"),
                p("layers"),
                p("batch_min"),
                p("batch_max"),
            )
        }
        "log-uniform" => {
            if p("min") > p("max") {
                return Err(Error::Trace(format!(
                    "{spec}: min = {} is larger than max = {}",
                    p("min"),
                    p("max")
                )));
            }
            log_uniform(&mut rng, &mut out, p("count"), p("min"), p("max"), p("live"))
        }
        _ => {
            if p("factor") < 2 {
                return Err(Error::Trace(format!(
                    "{spec}: factor = {}: must be at least 2",
                    p("factor")
                )));
            }
            growing_vector(&mut out, p("vectors"), p("start"), p("limit"), p("factor"))
        }
    }
    Ok(Trace::new(
        &format!("{spec} seed={seed}"),
        TraceSource::Synthetic,
        out.events,
    ))
}

fn training_loop(rng: &mut Rng, out: &mut Events, steps: u64, layers: u64, batch_min: u64, batch_max: u64) {
    let weights: Vec<u64> = (0..layers).map(|_| rng.log_uniform(4 << 10, 16 << 20)).collect();
    let per_sample: Vec<u64> = (0..layers).map(|_| rng.log_uniform(16 << 10, 2 << 20)).collect();
    let mut state = Vec::new();
    for &w in &weights {
        state.push(out.alloc(w));
        state.push(out.alloc(w)); // optimizer state (momentum)
    }
    for _ in 0..steps {
        let batch = rng.range(batch_min, batch_max);
        let mut activations = Vec::new();
        for &act in &per_sample {
            activations.push(out.alloc(batch * act));
            let workspace = out.alloc((batch * act / 4).max(512));
            out.free(workspace);
        }
        let loss = out.alloc(4 * batch);
        let mut grad_out = out.alloc(4 * batch);
        let mut weight_grads = Vec::new();
        for (layer, &act) in per_sample.iter().enumerate().rev() {
            let grad_in = out.alloc(batch * act);
            weight_grads.push(out.alloc(weights[layer]));
            out.free(activations[layer]);
            out.free(grad_out);
            grad_out = grad_in;
        }
        out.free(grad_out);
        out.free(loss);
        for g in weight_grads {
            out.free(g);
        }
    }
    for id in state {
        out.free(id);
    }
}

fn log_uniform(rng: &mut Rng, out: &mut Events, count: u64, min: u64, max: u64, live_target: u64) {
    let mut live: Vec<u64> = Vec::new();
    let mut made = 0;
    while made < count || !live.is_empty() {
        let grow = made < count && (live.is_empty() || (live.len() as u64) < live_target && rng.unit() < 0.6);
        if grow {
            live.push(out.alloc(rng.log_uniform(min, max)));
            made += 1;
        } else {
            let victim = (rng.next() % live.len() as u64) as usize;
            out.free(live.swap_remove(victim));
        }
    }
}

fn growing_vector(out: &mut Events, vectors: u64, start: u64, limit: u64, factor: u64) {
    let mut current: Vec<(u64, u64)> = (0..vectors).map(|_| (out.alloc(start), start)).collect();
    loop {
        let mut grew = false;
        for slot in current.iter_mut() {
            let size = slot.1.saturating_mul(factor);
            if size <= limit {
                let id = out.alloc(size);
                out.free(slot.0);
                *slot = (id, size);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    for (id, _) in current {
        out.free(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace_and_every_alloc_is_freed() {
        for SyntheticInfo { name, .. } in SYNTHETIC_TRACES {
            let spec = format!("synthetic:{name}");
            let a = generate(&spec, 3).unwrap();
            assert_eq!(a, generate(&spec, 3).unwrap());
            let allocs = a
                .events
                .iter()
                .filter(|e| matches!(e, TraceEvent::Alloc { .. }))
                .count();
            assert_eq!(2 * allocs, a.events.len(), "{name}");
        }
        assert_ne!(
            generate("synthetic:log-uniform", 1).unwrap().events,
            generate("synthetic:log-uniform", 2).unwrap().events
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = generate("synthetic:log-uniform:count=0", 0).unwrap_err().to_string();
        assert!(err.contains("count = 0"), "{err}");
        let err = generate("synthetic:log-uniform:colour=red", 0).unwrap_err().to_string();
        assert!(err.contains("log-uniform.colour"), "{err}");
        let err = generate("synthetic:nope", 0).unwrap_err().to_string();
        assert!(err.contains("training-loop"), "{err}");
    }
}
