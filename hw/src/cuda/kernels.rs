//! The parameter list and bounds of every kernel in kernels/*.cu, declared once. A launch whose
//! arguments differ in number or kind, or whose memory is smaller than what the kernel writes
//! or reads, is refused before the driver sees it. A test holds each declaration to the
//! kernel's signature in its source file.

use super::launch::{Arg, LaunchConfig};

/// The kind of one kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Param {
    /// A pointer to device memory (`T *`).
    Ptr,
    /// `unsigned long long`.
    U64,
    /// `int` or `unsigned int`.
    I32,
}

/// What a kernel takes, and what its arguments must satisfy.
pub(crate) struct Signature {
    pub(super) file: &'static str,
    pub(super) name: &'static str,
    pub(super) params: &'static [Param],
    /// The kernel's own bounds: every byte it touches lies in the memory it was given.
    bounds: fn(&Launch<'_>) -> Result<(), String>,
}

/// A launch being checked: its arguments (already matched to the parameter kinds) and shape.
pub(super) struct Launch<'a> {
    args: &'a [Arg<'a>],
    config: &'a LaunchConfig,
}

impl Launch<'_> {
    fn bytes(&self, i: usize) -> u64 {
        self.args[i].span().map_or(0, |span| span.bytes)
    }
    fn u64(&self, i: usize) -> u64 {
        match self.args[i] {
            Arg::U64(v) => v,
            _ => 0,
        }
    }
    fn i32(&self, i: usize) -> i64 {
        match self.args[i] {
            Arg::I32(v) => i64::from(v),
            _ => 0,
        }
    }
    fn threads(&self) -> u64 {
        u64::from(self.config.threads)
    }
    fn all_threads(&self) -> u64 {
        u64::from(self.config.blocks) * self.threads()
    }
    /// Argument `i` is memory of at least `need` bytes.
    fn holds(&self, i: usize, need: u64, what: &str) -> Result<(), String> {
        let have = self.bytes(i);
        if have < need {
            return Err(format!("{what} needs {need} B, was given {have} B"));
        }
        Ok(())
    }
    fn positive(&self, i: usize, what: &str) -> Result<u64, String> {
        let v = self.i32(i);
        if v < 1 {
            return Err(format!("{what} = {v}, must be at least 1"));
        }
        Ok(v as u64)
    }
    fn not_negative(&self, i: usize, what: &str) -> Result<u64, String> {
        let v = self.i32(i);
        if v < 0 {
            return Err(format!("{what} = {v}, must not be negative"));
        }
        Ok(v as u64)
    }
}

impl Signature {
    /// Whether `args` fit this kernel: their number and kinds, then its bounds.
    pub(super) fn check(&self, args: &[Arg<'_>], config: &LaunchConfig) -> Result<(), String> {
        if args.len() != self.params.len() {
            return Err(format!("{} arguments for {} parameters", args.len(), self.params.len()));
        }
        for (i, (arg, param)) in args.iter().zip(self.params).enumerate() {
            let kind = match arg {
                Arg::U64(_) => Param::U64,
                Arg::I32(_) => Param::I32,
                Arg::Device(_) | Arg::Span(_) => Param::Ptr,
            };
            if kind != *param {
                return Err(format!("argument {i} is {kind:?}, the kernel takes {param:?}"));
            }
        }
        if config.blocks == 0 || config.threads == 0 {
            return Err("an empty grid".into());
        }
        (self.bounds)(&Launch { args, config })
    }
}

use Param::{Ptr, I32, U64};

/// banks.cu: lane i owns element i x stride of WORDS x 4 bytes in dynamic shared memory; it
/// writes its cycle count to cycles[0] and its last index to sink[lane].
fn bank_chase<const WORDS: u64>(l: &Launch<'_>) -> Result<(), String> {
    l.holds(0, 8, "cycles")?;
    l.holds(1, 4 * l.threads(), "sink")?;
    let stride = l.not_negative(2, "stride")?;
    l.not_negative(3, "iterations")?;
    let shared = ((l.threads() - 1) * stride + 1) * WORDS * 4;
    if shared > u64::from(l.config.shared_bytes) {
        return Err(format!(
            "the elements need {shared} B of shared memory, {} B asked",
            l.config.shared_bytes
        ));
    }
    Ok(())
}

/// coalescing.cu: warp w reads element w x 32 x stride + offset + lane x stride (of WIDTH
/// bytes) of `data` in lanes below `active`, for w below `warps`; sink[0] is written.
fn coalesced_read<const WIDTH: u64>(l: &Launch<'_>) -> Result<(), String> {
    let warps = l.u64(1);
    let stride = l.not_negative(2, "stride")?;
    let offset = l.not_negative(3, "offset")?;
    let active = l.not_negative(4, "active lanes")?.min(32);
    l.not_negative(5, "passes")?;
    l.holds(6, 4, "sink")?;
    if warps > 0 && active > 0 {
        let extent = (warps - 1)
            .checked_mul(32 * stride)
            .and_then(|w| w.checked_add(offset + (active - 1) * stride + 1))
            .and_then(|elements| elements.checked_mul(WIDTH))
            .ok_or("the read pattern's extent overflows")?;
        l.holds(0, extent, "data")?;
    }
    Ok(())
}

/// constant.cu: reads only its own __constant__ table; writes cycles[0] and sink[lane].
fn constant_chase(l: &Launch<'_>) -> Result<(), String> {
    l.holds(0, 8, "cycles")?;
    l.holds(1, 4 * l.threads(), "sink")?;
    l.positive(2, "distinct")?;
    l.not_negative(4, "iterations")?;
    Ok(())
}

/// latency.cu: one thread follows next[32 x node] from node 0 (the chain's nodes are the
/// host's to make inside the buffer); writes cycles[0] and sink[0].
fn latency_chase(l: &Launch<'_>) -> Result<(), String> {
    l.holds(0, 128, "next")?;
    l.holds(3, 8, "cycles")?;
    l.holds(4, 4, "sink")?;
    if l.all_threads() != 1 {
        return Err("the chase runs on one thread".into());
    }
    Ok(())
}

/// occupancy.cu: reads data[(thread + 97 i) mod n] and writes data[thread].
fn pressure(l: &Launch<'_>) -> Result<(), String> {
    let n = l.positive(1, "n")?;
    l.holds(0, 4 * n.max(l.threads()), "data")
}

/// spills.cu: reads in[0..1024], writes out[block x threads + thread] and cycles[0].
fn spill(l: &Launch<'_>) -> Result<(), String> {
    l.holds(0, 4 * 1024, "in")?;
    l.holds(1, 4 * l.all_threads(), "out")?;
    l.not_negative(2, "iterations")?;
    l.holds(3, 8, "cycles")
}

/// spin.cu: touches no global memory.
fn spin(_: &Launch<'_>) -> Result<(), String> {
    Ok(())
}

/// replay.cu's stamp: writes block[0..words].
fn stamp(l: &Launch<'_>) -> Result<(), String> {
    let words = l.u64(1);
    l.holds(0, words.checked_mul(4).ok_or("words overflow")?, "block")
}

/// replay.cu's verify: reads block[0..words], adds to mismatches[0].
fn verify(l: &Launch<'_>) -> Result<(), String> {
    stamp(l)?;
    l.holds(3, 8, "mismatches")
}

const BANKS: [Param; 4] = [Ptr, Ptr, I32, I32];
const READ: [Param; 7] = [Ptr, U64, I32, I32, I32, I32, Ptr];

macro_rules! sig {
    ($file:literal, $name:literal, $params:expr, $bounds:expr) => {
        Signature {
            file: $file,
            name: $name,
            params: &$params,
            bounds: $bounds,
        }
    };
}

/// Every kernel vramlab launches.
static SIGNATURES: [Signature; 15] = [
    sig!("banks.cu", "chase4", BANKS, bank_chase::<1>),
    sig!("banks.cu", "chase8", BANKS, bank_chase::<2>),
    sig!("banks.cu", "chase16", BANKS, bank_chase::<4>),
    sig!("coalescing.cu", "read1", READ, coalesced_read::<1>),
    sig!("coalescing.cu", "read2", READ, coalesced_read::<2>),
    sig!("coalescing.cu", "read4", READ, coalesced_read::<4>),
    sig!("coalescing.cu", "read8", READ, coalesced_read::<8>),
    sig!("coalescing.cu", "read16", READ, coalesced_read::<16>),
    sig!(
        "constant.cu",
        "constant_chase",
        [Ptr, Ptr, I32, I32, I32],
        constant_chase
    ),
    sig!("latency.cu", "chase", [Ptr, U64, U64, Ptr, Ptr], latency_chase),
    sig!("occupancy.cu", "pressure", [Ptr, I32], pressure),
    sig!("spills.cu", "spill", [Ptr, Ptr, I32, Ptr], spill),
    sig!("spin.cu", "spin", [U64], spin),
    sig!("replay.cu", "stamp", [Ptr, U64, I32], stamp),
    sig!("replay.cu", "verify", [Ptr, U64, I32, Ptr], verify),
];

/// The declared signature of `name` in `file`.
pub(super) fn signature_of(file: &str, name: &str) -> Option<&'static Signature> {
    SIGNATURES.iter().find(|s| s.file == file && s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::memory::DeviceSpan;

    /// The parameter kinds written in a kernel's C signature.
    fn source_params(file: &str, name: &str) -> Vec<Param> {
        let path = format!("{}/../kernels/{file}", env!("CARGO_MANIFEST_DIR"));
        let source = std::fs::read_to_string(&path).unwrap();
        // A kernel is declared `... NAME(params)` after __global__, or through coalescing.cu's
        // ENTRY(NAME, T) macro, whose own parameter list then applies.
        let list = match source.find(&format!(" {name}(")) {
            Some(at) if source[..at].rfind("__global__").is_some() => {
                let rest = &source[at + name.len() + 2..];
                rest[..rest.find(')').unwrap()].to_string()
            }
            _ => {
                assert!(
                    source.contains(&format!("ENTRY({name},")),
                    "{file} declares no kernel {name}"
                );
                let at = source.find("void NAME(").unwrap() + "void NAME(".len();
                source[at..at + source[at..].find(')').unwrap()].replace('\\', " ")
            }
        };
        list.split(',')
            .map(|p| {
                let p = p.trim();
                if p.contains('*') {
                    Param::Ptr
                } else if p.starts_with("unsigned long long") {
                    Param::U64
                } else if p.starts_with("int") || p.starts_with("unsigned int") {
                    Param::I32
                } else {
                    panic!("{file}: {name}: parameter {p:?} of no known kind")
                }
            })
            .collect()
    }

    #[test]
    fn every_declared_kernel_matches_its_source() {
        for s in &SIGNATURES {
            assert_eq!(source_params(s.file, s.name), s.params, "{}: {}", s.file, s.name);
        }
    }

    fn span(bytes: u64) -> Arg<'static> {
        Arg::Span(DeviceSpan::held(0x1000, bytes))
    }

    #[test]
    fn a_launch_that_would_write_past_its_memory_is_refused() {
        let config = LaunchConfig {
            blocks: 4,
            threads: 256,
            shared_bytes: 0,
        };
        let stamp = signature_of("replay.cu", "stamp").unwrap();
        assert!(stamp.check(&[span(4096), Arg::U64(1024), Arg::I32(7)], &config).is_ok());
        let err = stamp
            .check(&[span(4092), Arg::U64(1024), Arg::I32(7)], &config)
            .unwrap_err();
        assert!(err.contains("block needs 4096 B"), "{err}");
        // A bare number where the kernel takes a pointer, and a missing argument.
        assert!(stamp
            .check(&[Arg::U64(0x1000), Arg::U64(1), Arg::I32(7)], &config)
            .is_err());
        assert!(stamp.check(&[span(4096), Arg::U64(1)], &config).is_err());
        let spill = signature_of("spills.cu", "spill").unwrap();
        let too_small_out = [span(4096), span(4 * 1023), Arg::I32(1), span(8)];
        assert!(spill.check(&too_small_out, &config).is_err());
        let banks = signature_of("banks.cu", "chase16").unwrap();
        let one_warp = LaunchConfig {
            blocks: 1,
            threads: 32,
            shared_bytes: 48 << 10,
        };
        let args = |stride| [span(8), span(128), Arg::I32(stride), Arg::I32(64)];
        assert!(banks.check(&args(64), &one_warp).is_ok());
        assert!(
            banks.check(&args(128), &one_warp).is_err(),
            "past 48 KiB of shared memory"
        );
        let read = signature_of("coalescing.cu", "read4").unwrap();
        let read_args = |bytes| {
            [
                span(bytes),
                Arg::U64(2),
                Arg::I32(1),
                Arg::I32(0),
                Arg::I32(32),
                Arg::I32(1),
                span(4),
            ]
        };
        assert!(read.check(&read_args(256), &config).is_ok());
        assert!(read.check(&read_args(252), &config).is_err());
    }
}
