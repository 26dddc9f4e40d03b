//! What plots and tables call parameters and metrics: people's names with units, not the
//! records' keys (`ns_per_iteration`, `kernel_us`).

use experiments::{format_bytes, Family, ParamValue};

/// A metric's name with its unit, as an axis or a column says it.
pub(crate) fn metric_title(family: Family, metric: &str) -> String {
    match (family, metric) {
        (_, "gb_per_s") => "bandwidth (GB/s)".into(),
        (_, "speedup") => "speed-up over copy-then-compute (x)".into(),
        (_, "time_us") => "time (µs)".into(),
        (_, "cycles") => "cycles per dependent load".into(),
        (_, "grow_us") => "time per grow (µs)".into(),
        (_, "peak_bytes") => "peak device memory".into(),
        (_, "ns_per_iteration") => "time per loop iteration (ns)".into(),
        (_, "blocks_per_sm") => "resident blocks per SM".into(),
        (_, "warps_per_sm") => "resident warps per SM".into(),
        (_, other) => other.replace('_', " "),
    }
}

/// A parameter's name with its unit, as an axis says it (byte sizes carry theirs on the ticks).
pub(crate) fn param_title(family: Family, param: &str) -> String {
    match (family, param) {
        (_, "bytes") => "bytes".into(),
        (_, "streams") => "streams".into(),
        (_, "chunks") => "chunks".into(),
        (_, "kernel_us") => "kernel time, all chunks (µs)".into(),
        (_, "threads") => "threads per block".into(),
        (_, "registers") => "registers per thread".into(),
        (_, "static_shared") => "static shared memory per block (bytes)".into(),
        (_, "dynamic_shared") => "dynamic shared memory per block (bytes)".into(),
        (_, "width") => "bytes per lane".into(),
        (_, "stride") => "stride between lanes (elements)".into(),
        (_, "offset") => "offset (elements)".into(),
        (_, "active_lanes") => "active lanes per warp".into(),
        (_, "distinct") => "distinct words per warp access".into(),
        (_, "live") => "live values".into(),
        (_, other) => other.replace('_', " "),
    }
}

/// One parameter's value in a legend: `kernel 2,000 µs` rather than `kernel_us=2000`; byte
/// sizes in units; other parameters as written in suite files (`width=4`).
pub(crate) fn param_value(name: &str, value: &ParamValue) -> String {
    match (name, value) {
        ("kernel_us", v) => match v.as_f64() {
            Some(us) => format!("kernel {} µs", crate::chart::number(us)),
            None => format!("kernel {v}"),
        },
        ("bytes" | "static_shared" | "dynamic_shared", ParamValue::Int(b)) if *b >= 0 => {
            format!("{name}={}", format_bytes(*b as u64))
        }
        _ => format!("{name}={value}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_read_as_words_with_units() {
        assert_eq!(
            metric_title(Family::Spills, "ns_per_iteration"),
            "time per loop iteration (ns)"
        );
        assert_eq!(
            param_title(Family::Overlap, "kernel_us"),
            "kernel time, all chunks (µs)"
        );
        assert_eq!(param_value("kernel_us", &ParamValue::Float(2000.0)), "kernel 2,000 µs");
        assert_eq!(param_value("width", &ParamValue::Int(4)), "width=4");
        assert!(!metric_title(Family::Transfer, "some_new_metric").contains('_'));
    }
}
