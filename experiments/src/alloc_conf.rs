//! `PYTORCH_ALLOC_CONF` (formerly `PYTORCH_CUDA_ALLOC_CONF`): PyTorch's grammar and checks, for
//! every release of [`TorchRelease`] (the keys each accepts: [`crate::ALLOC_CONF_KEYS`]).
//!
//! The rules are PyTorch's own (c10/core/AllocatorConfig.{h,cpp}, c10/cuda/CUDAAllocatorConfig.cpp):
//! the string is split into tokens at `,` `:` `[` `]` with white space dropped; each key is
//! followed by its value, and the separator tokens in between are not checked (so
//! `max_split_size_mb:64,` is accepted, as PyTorch accepts it). Numbers are read as C++'s
//! `stoull`/`stod` read them: the longest numeric prefix of the token, so `64abc` is 64 and
//! `abc` an error. Every rejection below was checked against PyTorch 2.11 itself
//! (`reports/reference/h100/alloc-traces/settings-parse.json`).

use std::fmt;

use crate::error::{Error, Result};
use crate::torch_release::{KeyEffect, TorchRelease, ALLOC_CONF_KEYS};

const MB: u64 = 1 << 20;
/// Intervals of `roundup_power2_divisions`: [1 MiB, 2 MiB), [2, 4), ... the last from 32 GiB up.
pub const ROUNDUP_INTERVALS: usize = 16;
/// The smallest `max_split_size_mb` and `max_non_split_rounding_mb` PyTorch takes (kLargeBuffer).
const MIN_SPLIT_MB: u64 = crate::pytorch::LARGE_BUFFER / MB;
/// PyTorch's `pinned_max_register_threads()`.
const MAX_REGISTER_THREADS: u64 = 128;

/// Which allocator PyTorch uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocBackend {
    /// The caching allocator.
    #[default]
    Native,
    /// The driver's stream-ordered pool (cudaMallocAsync).
    CudaMallocAsync,
}

/// One parsed `PYTORCH_ALLOC_CONF`: the settings that change device memory, and those recorded
/// only (they change host-side behaviour: locking, pinned memory, graph capture).
#[derive(Debug, Clone, PartialEq)]
pub struct AllocConf {
    /// `backend`.
    pub backend: AllocBackend,
    /// `max_split_size_mb`, in bytes; `u64::MAX` when unset (every block may be split).
    pub max_split_size: u64,
    /// `max_non_split_rounding_mb`, in bytes (default 20 MiB).
    pub max_non_split_rounding: u64,
    /// `large_segment_size_mb`, in bytes (default 20 MiB): the segment a 1-10 MiB request gets.
    pub large_segment_size: u64,
    /// `roundup_power2_divisions`, per interval (0 or 1: plain 512-byte rounding).
    pub roundup_power2_divisions: [u64; ROUNDUP_INTERVALS],
    /// `garbage_collection_threshold` (0: off). Acts only under a memory cap.
    pub garbage_collection_threshold: f64,
    /// `expandable_segments`.
    pub expandable_segments: bool,
    /// `per_process_memory_fraction` (default 1.0: no cap): PyTorch caps the device at this
    /// share of its memory when the allocator is made (`setMemoryFraction`).
    pub per_process_memory_fraction: f64,
    /// `throw_on_cudamalloc_oom` (2.12 on): a request over the fraction's cap is refused before
    /// `cudaMalloc` is called.
    pub throw_on_cudamalloc_oom: bool,
    /// `expandable_segments_reserve` (2.15 on): the address range one expandable segment
    /// reserves on streams without a class; `None`: PyTorch's 9/8 of the device.
    pub expandable_segments_reserve: Option<ReserveSpec>,
    /// `expandable_segments_reserve_by_class` (2.15 on): the reserve of streams tagged with a
    /// class, as written (a snapshot does not record a stream's class).
    pub expandable_segments_reserve_by_class: Vec<(String, ReserveSpec)>,
    /// Keys accepted and recorded that do not change device memory, as written, in order.
    pub recorded_only: Vec<(String, String)>,
    /// Values PyTorch ignores with a warning rather than refuses (a malformed reserve).
    pub ignored: Vec<String>,
    /// The release whose grammar read it.
    pub release: TorchRelease,
}

/// An expandable segment's reserve as PyTorch 2.15 writes it: a share of the device's memory
/// (`0.5`) or whole GiB (`40G`) (`ExpandableSegmentReserveSpec`, c10/cuda/CUDAAllocatorConfig.h:29
/// at 2.15).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReserveSpec {
    /// A share of the device's memory.
    Fraction(f64),
    /// GiB.
    Gib(f64),
}

impl ReserveSpec {
    /// PyTorch's `parseReserveSpec`: a positive, finite number read whole, with a trailing `G`
    /// or `g` for GiB; `None` where PyTorch warns and keeps its default.
    fn parse(token: &str) -> Option<ReserveSpec> {
        let (gib, number) = match token.strip_suffix(['G', 'g']) {
            Some(number) => (true, number),
            None => (false, token),
        };
        let value: f64 = number.parse().ok()?;
        (value.is_finite() && value > 0.0).then_some(if gib {
            ReserveSpec::Gib(value)
        } else {
            ReserveSpec::Fraction(value)
        })
    }

    /// `resolveBytes`: the bytes it stands for on a device of `total` bytes, saturating.
    pub fn bytes(self, total: u64) -> u64 {
        let bytes = match self {
            ReserveSpec::Fraction(f) => f * total as f64,
            ReserveSpec::Gib(g) => g * (1u64 << 30) as f64,
        };
        if bytes >= u64::MAX as f64 {
            u64::MAX
        } else {
            bytes as u64
        }
    }
}

impl fmt::Display for ReserveSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveSpec::Fraction(v) => write!(f, "{v}"),
            ReserveSpec::Gib(v) => write!(f, "{v}G"),
        }
    }
}

impl Default for AllocConf {
    fn default() -> Self {
        AllocConf {
            backend: AllocBackend::Native,
            max_split_size: u64::MAX,
            max_non_split_rounding: crate::pytorch::LARGE_BUFFER,
            large_segment_size: crate::pytorch::LARGE_BUFFER,
            roundup_power2_divisions: [0; ROUNDUP_INTERVALS],
            garbage_collection_threshold: 0.0,
            expandable_segments: false,
            per_process_memory_fraction: 1.0,
            throw_on_cudamalloc_oom: false,
            expandable_segments_reserve: None,
            expandable_segments_reserve_by_class: Vec::new(),
            recorded_only: Vec::new(),
            ignored: Vec::new(),
            release: TorchRelease::default(),
        }
    }
}

/// C's `isspace` in the "C" locale, which PyTorch's tokenizer skips: ASCII white space only.
fn is_c_space(ch: char) -> bool {
    matches!(ch, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// The length of the longest prefix of `text` that is a decimal floating-point number as
/// `strtod` (and Rust's `f64` parser) reads one; 0 where none is.
fn float_prefix(text: &[u8]) -> usize {
    let mut i = usize::from(matches!(text.first(), Some(b'+' | b'-')));
    let rest = &text[i..];
    for word in ["infinity", "inf", "nan"] {
        if rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes()) {
            return i + word.len();
        }
    }
    let digits = |from: usize| text[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let whole = digits(i);
    i += whole;
    let mut fraction = 0;
    if text.get(i) == Some(&b'.') {
        fraction = digits(i + 1);
        if whole + fraction > 0 {
            i += 1 + fraction;
        }
    }
    if whole + fraction == 0 {
        return 0;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(text.get(i + 1), Some(b'+' | b'-')));
        let exponent = digits(i + 1 + sign);
        if exponent > 0 {
            i += 1 + sign + exponent;
        }
    }
    i
}

struct Tokens<'a> {
    text: &'a str,
    tokens: Vec<String>,
}

impl Tokens<'_> {
    fn new(text: &str) -> Tokens<'_> {
        let mut tokens = Vec::new();
        let mut buffer = String::new();
        for ch in text.chars() {
            if matches!(ch, ',' | ':' | '[' | ']') {
                if !buffer.is_empty() {
                    tokens.push(std::mem::take(&mut buffer));
                }
                tokens.push(ch.to_string());
            } else if !is_c_space(ch) {
                buffer.push(ch);
            }
        }
        if !buffer.is_empty() {
            tokens.push(buffer);
        }
        Tokens { text, tokens }
    }

    fn error(&self, message: impl fmt::Display) -> Error {
        Error::Settings(format!("alloc-conf '{}': {message}", self.text))
    }

    fn get(&self, i: usize) -> Result<&str> {
        self.tokens.get(i).map(String::as_str).ok_or_else(|| {
            self.error(format!(
                "ends early: a value is missing after '{}'",
                self.tokens.join("")
            ))
        })
    }

    /// C++'s `stoull`: an optional sign, then the longest run of decimal digits; a minus wraps.
    fn size_t(&self, i: usize, key: &str) -> Result<u64> {
        let token = self.get(i)?;
        let (negative, digits) = match token.as_bytes().first() {
            Some(b'-') => (true, &token[1..]),
            Some(b'+') => (false, &token[1..]),
            _ => (false, token),
        };
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        if end == 0 {
            return Err(self.error(format!("{key} = {token}: not a number")));
        }
        let value: u64 = digits[..end]
            .parse()
            .map_err(|_| self.error(format!("{key} = {token}: out of range")))?;
        Ok(if negative { value.wrapping_neg() } else { value })
    }

    /// C++'s `stod`: the longest prefix that reads as a floating-point number, found in one
    /// pass (sign, `inf`/`infinity`/`nan`, or digits with an optional fraction and exponent).
    fn double(&self, i: usize, key: &str) -> Result<f64> {
        let token = self.get(i)?;
        let end = float_prefix(token.as_bytes());
        token[..end]
            .parse::<f64>()
            .map_err(|_| self.error(format!("{key} = {token}: not a number")))
    }

    fn boolean(&self, i: usize, key: &str) -> Result<bool> {
        match self.get(i)? {
            "True" => Ok(true),
            "False" => Ok(false),
            other => Err(self.error(format!("{key} = {other}: expected 'True' or 'False'"))),
        }
    }

    /// The index of a key's value token, or of the `]` closing a list value.
    fn skip_value(&self, i: usize) -> Result<usize> {
        let mut i = i + 2;
        if self.get(i)? != "[" {
            return Ok(i);
        }
        while self.get(i)? != "]" {
            i += 1;
        }
        Ok(i)
    }
}

impl AllocConf {
    /// Parses a setting string as PyTorch 2.11 does (see [`AllocConf::parse_for`]).
    pub fn parse(text: &str) -> Result<AllocConf> {
        AllocConf::parse_for(text, TorchRelease::default())
    }

    /// Parses a setting string as PyTorch `release` does, refusing what it refuses with one
    /// line naming the key and value (a key the release does not know in PyTorch's own words).
    /// `""` is PyTorch's defaults.
    pub fn parse_for(text: &str, release: TorchRelease) -> Result<AllocConf> {
        let tokens = Tokens::new(text);
        let mut conf = AllocConf {
            release,
            ..AllocConf::default()
        };
        let mut i = 0;
        while i < tokens.tokens.len() {
            let key = tokens.get(i)?.to_string();
            if !release.knows(&key) {
                // PyTorch checks every key, so an unknown one is refused even when its value is a list.
                let _ = tokens.skip_value(i);
                // PyTorch's words (CUDAAllocatorConfig.cpp's parseArgs, every release 2.11-2.15).
                return Err(tokens.error(format!(
                    "Unrecognized key '{key}' in CUDA allocator config. (PyTorch {release}; its keys: {})",
                    release.keys().join(", ")
                )));
            }
            i = match key.as_str() {
                "max_split_size_mb" | "max_non_split_rounding_mb" => {
                    let value = tokens.size_t(i + 2, &key)?;
                    if value < MIN_SPLIT_MB {
                        return Err(tokens.error(format!("{key} = {value}: too small, must be >= {MIN_SPLIT_MB}")));
                    }
                    let bytes = value.min(u64::MAX / MB) * MB;
                    if key == "max_split_size_mb" {
                        conf.max_split_size = bytes;
                    } else {
                        conf.max_non_split_rounding = bytes;
                    }
                    i + 2
                }
                "large_segment_size_mb" => {
                    let value = tokens.size_t(i + 2, &key)?;
                    // PyTorch 2.11's own words, checked on an H100
                    // (reports/reference/h100/large-segment-size/): a segment of 10 MiB or less
                    // could be smaller than the 1-10 MiB requests it is made for.
                    if value <= 10 {
                        return Err(tokens.error(format!(
                            "{key} = {value}: CachingAllocator option large_segment_size_mb must be > 10 MB"
                        )));
                    }
                    conf.large_segment_size = value.min(u64::MAX / MB) * MB;
                    i + 2
                }
                "garbage_collection_threshold" => {
                    let value = tokens.double(i + 2, &key)?;
                    if !(value > 0.0 && value < 1.0) {
                        return Err(tokens.error(format!("{key} = {value}: must lie in (0.0, 1.0)")));
                    }
                    conf.garbage_collection_threshold = value;
                    i + 2
                }
                "roundup_power2_divisions" => conf.parse_divisions(&tokens, i)?,
                "expandable_segments" => {
                    conf.expandable_segments = tokens.boolean(i + 2, &key)?;
                    i + 2
                }
                "backend" => {
                    conf.backend = match tokens.get(i + 2)? {
                        "native" => AllocBackend::Native,
                        "cudaMallocAsync" => AllocBackend::CudaMallocAsync,
                        other => {
                            return Err(tokens.error(format!(
                                "backend = {other}: unknown allocator backend, options are native and cudaMallocAsync"
                            )))
                        }
                    };
                    i + 2
                }
                "pinned_num_register_threads" => {
                    let value = tokens.size_t(i + 2, &key)?;
                    if !value.is_power_of_two() || value > MAX_REGISTER_THREADS {
                        return Err(tokens.error(format!(
                            "{key} = {value}: must be a power of 2 and at most {MAX_REGISTER_THREADS}"
                        )));
                    }
                    conf.record(&key, value.to_string());
                    i + 2
                }
                "pinned_reserve_segment_size_mb" => {
                    let value = tokens.size_t(i + 2, &key)?;
                    if value == 0 {
                        return Err(tokens.error(format!("{key} = 0: must be greater than 0")));
                    }
                    conf.record(&key, value.to_string());
                    i + 2
                }
                "per_process_memory_fraction" => {
                    let value = tokens.double(i + 2, &key)?;
                    if !(0.0..=1.0).contains(&value) {
                        return Err(tokens.error(format!(
                            "{key} = {value}: per_process_memory_fraction is invalid, set it in [0.0, 1.0]"
                        )));
                    }
                    conf.per_process_memory_fraction = value;
                    i + 2
                }
                "throw_on_cudamalloc_oom" => {
                    conf.throw_on_cudamalloc_oom = tokens.boolean(i + 2, &key)?;
                    i + 2
                }
                "expandable_segments_reserve" => {
                    let token = tokens.get(i + 2)?;
                    match ReserveSpec::parse(token) {
                        Some(spec) => conf.expandable_segments_reserve = Some(spec),
                        None => conf.ignore(&key, token),
                    }
                    i + 2
                }
                "expandable_segments_reserve_by_class" => conf.parse_reserve_classes(&tokens, i)?,
                "pinned_max_round_threshold_mb" | "pinned_max_cached_size_mb" => {
                    let value = tokens.size_t(i + 2, &key)?;
                    conf.record(&key, value.to_string());
                    i + 2
                }
                _ => {
                    // Every other key the release knows takes True or False and leaves device
                    // memory as it is.
                    debug_assert!(ALLOC_CONF_KEYS
                        .iter()
                        .any(|k| k.key == key && k.effect == KeyEffect::HostOnly));
                    let value = tokens.boolean(i + 2, &key)?;
                    conf.record(&key, if value { "True" } else { "False" }.to_string());
                    i + 2
                }
            };
            // The separator after a value is skipped, whatever it is (PyTorch does not check it).
            i += 2;
        }
        Ok(conf)
    }

    /// A value PyTorch warns about and ignores, keeping its default.
    fn ignore(&mut self, key: &str, token: &str) {
        self.ignored.push(format!(
            "{key} = {token}: PyTorch {} ignores it with a warning (expected a positive, finite fraction like 0.5 or an absolute size like 40G) and keeps its default",
            self.release
        ));
    }

    /// `expandable_segments_reserve_by_class:[name:value,...]` (PyTorch 2.15's
    /// `parseExpandableSegmentsReserveByClass`): a malformed entry is skipped with a warning.
    fn parse_reserve_classes(&mut self, tokens: &Tokens, key_at: usize) -> Result<usize> {
        const KEY: &str = "expandable_segments_reserve_by_class";
        let mut i = key_at + 2;
        if tokens.get(i)? != "[" {
            return Err(tokens.error(format!(
                "{KEY} = {}: expected a list '[name:value,...]'",
                tokens.get(i)?
            )));
        }
        let mut classes: Vec<(String, ReserveSpec)> = Vec::new();
        while tokens.get(i + 1)? != "]" {
            let name = tokens.get(i + 1)?.to_string();
            let value = tokens.get(i + 3)?.to_string();
            i += 3;
            match ReserveSpec::parse(&value) {
                Some(spec) => {
                    classes.retain(|(n, _)| n != &name);
                    classes.push((name, spec));
                }
                None => self.ignore(&format!("{KEY}[{name}]"), &value),
            }
            if tokens.get(i + 1)? == "," {
                i += 1;
            }
        }
        self.expandable_segments_reserve_by_class = classes;
        Ok(i + 1)
    }

    /// The cap `per_process_memory_fraction` sets on a device of `device_bytes` (PyTorch's
    /// `setMemoryFraction`: none at 1.0, else the fraction of the device, truncated).
    pub fn fraction_cap(&self, device_bytes: u64) -> Option<u64> {
        (self.backend == AllocBackend::Native && self.per_process_memory_fraction < 1.0)
            .then_some((self.per_process_memory_fraction * device_bytes as f64) as u64)
    }

    /// What a replay must say of these settings beside its figures: the keys it does not
    /// follow on the device (host memory only), the values PyTorch ignores, the parts of a
    /// setting the replay cannot apply. Empty for settings the replay follows whole.
    pub fn replay_notes(&self, device_bytes: u64) -> Vec<String> {
        let mut notes = Vec::new();
        let release = self.release;
        for (key, value) in &self.recorded_only {
            notes.push(format!(
                "{key}:{value} (PyTorch {release}) changes host (pinned) memory, locking or graph capture only: accepted, with no effect on the device replay"
            ));
        }
        notes.extend(self.ignored.iter().cloned());
        if let Some(cap) = self.fraction_cap(device_bytes) {
            notes.push(format!(
                "per_process_memory_fraction:{} (PyTorch {release}): the device is capped at {} of its {} B, {cap} B, as PyTorch's setMemoryFraction sets it when the allocator is made",
                self.per_process_memory_fraction, self.per_process_memory_fraction, device_bytes
            ));
        }
        if self.throw_on_cudamalloc_oom {
            notes.push(format!(
                "throw_on_cudamalloc_oom:True (PyTorch {release}) refuses a request over the per_process_memory_fraction cap before calling cudaMalloc; the replay refuses the same requests, and does not model whether PyTorch frees its cache and retries first"
            ));
        }
        if let Some(spec) = self.expandable_segments_reserve {
            notes.push(format!(
                "expandable_segments_reserve:{spec} (PyTorch {release}): each expandable segment reserves {} B of addresses at most (clamp_reserve_bytes); in the replay a request larger than that fails, which was not checked against PyTorch",
                spec.bytes(device_bytes).min(device_bytes.saturating_add(device_bytes / 8))
            ));
        }
        if !self.expandable_segments_reserve_by_class.is_empty() {
            notes.push(format!(
                "expandable_segments_reserve_by_class (PyTorch {release}) applies to streams tagged with a class, which a snapshot does not record: the replay gives every stream the reserve of an untagged one"
            ));
        }
        notes
    }

    fn record(&mut self, key: &str, value: String) {
        self.recorded_only.retain(|(k, _)| k != key);
        self.recorded_only.push((key.to_string(), value));
    }

    /// `roundup_power2_divisions:N` or the list form `[64:8,256:4,>:1]` (interval starts in MiB).
    fn parse_divisions(&mut self, tokens: &Tokens, key_at: usize) -> Result<usize> {
        const KEY: &str = "roundup_power2_divisions";
        let mut i = key_at + 2;
        if tokens.get(i)? != "[" {
            let value = tokens.size_t(i, KEY)?;
            if !value.is_power_of_two() {
                return Err(tokens.error(format!("{KEY} = {value}: the divisions must be a power of 2")));
            }
            self.roundup_power2_divisions = [value; ROUNDUP_INTERVALS];
            return Ok(i);
        }
        let (mut first, mut last_index) = (true, 0usize);
        i += 1;
        while tokens.get(i)? != "]" {
            let bound_at = i;
            i += 2;
            let value = tokens.size_t(i, KEY)?;
            if value != 0 && !value.is_power_of_two() {
                return Err(tokens.error(format!(
                    "{KEY}: {value}: the divisions must be a power of 2, or 0 to disable rounding"
                )));
            }
            if tokens.get(bound_at)? == ">" {
                for slot in self.roundup_power2_divisions.iter_mut().skip(last_index + 1) {
                    *slot = value;
                }
            } else {
                let bound = tokens.size_t(bound_at, KEY)?;
                if !bound.is_power_of_two() {
                    return Err(tokens.error(format!(
                        "{KEY}: interval {bound}: the intervals must be powers of 2 (MiB)"
                    )));
                }
                let index = (bound.ilog2() as usize).min(ROUNDUP_INTERVALS - 1);
                if first {
                    for slot in &mut self.roundup_power2_divisions[..index] {
                        *slot = value;
                    }
                    first = false;
                }
                self.roundup_power2_divisions[index] = value;
                last_index = index;
            }
            if tokens.get(i + 1)? != "]" {
                i += 1;
            }
            i += 1;
        }
        Ok(i)
    }

    /// The number of divisions for a request of `size` bytes.
    pub fn divisions_for(&self, size: u64) -> u64 {
        let log_size = size.max(1).ilog2() as usize;
        let index = log_size.saturating_sub(20).min(ROUNDUP_INTERVALS - 1);
        self.roundup_power2_divisions[index]
    }

    /// PyTorch's `round_size`: the bytes a request of `size` takes under these settings. Under
    /// 512 B, 512; else, where the size's interval has d > 1 divisions and the size exceeds
    /// 512 x d, up to the next 1/d step of its power of two; else up to a multiple of 512.
    pub fn round_size(&self, size: u64) -> u64 {
        use crate::pytorch::MIN_BLOCK_SIZE as MIN_BLOCK;
        if size < MIN_BLOCK {
            return MIN_BLOCK;
        }
        let divisions = self.divisions_for(size);
        if divisions > 1 && size > MIN_BLOCK.saturating_mul(divisions) {
            next_division(size, divisions)
        } else {
            size.div_ceil(MIN_BLOCK).saturating_mul(MIN_BLOCK)
        }
    }
}

impl AllocConf {
    /// PyTorch's `get_allocation_size`: the segment a cache miss allocates for a request
    /// already rounded by [`AllocConf::round_size`]: 2 MiB up to 1 MiB, `large_segment_size`
    /// below 10 MiB, else the request rounded up to 2 MiB.
    pub fn allocation_size(&self, rounded: u64) -> u64 {
        use crate::pytorch::{MIN_LARGE_ALLOC, ROUND_LARGE, SMALL_BUFFER, SMALL_SIZE};
        if rounded <= SMALL_SIZE {
            SMALL_BUFFER
        } else if rounded < MIN_LARGE_ALLOC {
            self.large_segment_size
        } else {
            rounded.div_ceil(ROUND_LARGE).saturating_mul(ROUND_LARGE)
        }
    }
}

/// The keys of a settings string, in order (the token before each value, a list value
/// skipped whole), as PyTorch's tokenizer splits it.
pub(crate) fn keys_of(text: &str) -> Vec<String> {
    let tokens = Tokens::new(text);
    let mut keys = Vec::new();
    let mut i = 0;
    while i < tokens.tokens.len() {
        keys.push(tokens.tokens[i].clone());
        i = tokens.skip_value(i).unwrap_or(usize::MAX - 2).saturating_add(2);
    }
    keys
}

/// PyTorch's `roundup_power2_next_division`.
fn next_division(size: u64, divisions: u64) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1u64 << size.ilog2();
    let step = floor >> divisions.ilog2();
    if step == 0 {
        return floor << 1;
    }
    let rounded = size & !(step - 1);
    if rounded == size {
        size
    } else {
        rounded.saturating_add(step)
    }
}

/// The canonical string: every key that differs from PyTorch's default, in a fixed order, as
/// PyTorch reads it back to the same settings.
impl fmt::Display for AllocConf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = AllocConf::default();
        let mut parts: Vec<String> = Vec::new();
        if self.backend == AllocBackend::CudaMallocAsync {
            parts.push("backend:cudaMallocAsync".into());
        }
        if self.max_split_size != default.max_split_size {
            parts.push(format!("max_split_size_mb:{}", self.max_split_size / MB));
        }
        if self.max_non_split_rounding != default.max_non_split_rounding {
            parts.push(format!(
                "max_non_split_rounding_mb:{}",
                self.max_non_split_rounding / MB
            ));
        }
        if self.large_segment_size != default.large_segment_size {
            parts.push(format!("large_segment_size_mb:{}", self.large_segment_size / MB));
        }
        let divisions = &self.roundup_power2_divisions;
        if divisions != &default.roundup_power2_divisions {
            if divisions.iter().all(|&d| d == divisions[0]) && divisions[0] != 0 {
                parts.push(format!("roundup_power2_divisions:{}", divisions[0]));
            } else {
                // Interval k starts at 2^k MiB; the first entry also fills the intervals below it.
                let entries: Vec<String> = divisions
                    .iter()
                    .enumerate()
                    .map(|(k, d)| format!("{}:{d}", 1u64 << k))
                    .collect();
                parts.push(format!("roundup_power2_divisions:[{}]", entries.join(",")));
            }
        }
        if self.garbage_collection_threshold != 0.0 {
            parts.push(format!(
                "garbage_collection_threshold:{}",
                self.garbage_collection_threshold
            ));
        }
        if self.expandable_segments {
            parts.push("expandable_segments:True".into());
        }
        if self.per_process_memory_fraction != 1.0 {
            parts.push(format!(
                "per_process_memory_fraction:{}",
                self.per_process_memory_fraction
            ));
        }
        if self.throw_on_cudamalloc_oom {
            parts.push("throw_on_cudamalloc_oom:True".into());
        }
        if let Some(spec) = self.expandable_segments_reserve {
            parts.push(format!("expandable_segments_reserve:{spec}"));
        }
        if !self.expandable_segments_reserve_by_class.is_empty() {
            let entries: Vec<String> = self
                .expandable_segments_reserve_by_class
                .iter()
                .map(|(name, spec)| format!("{name}:{spec}"))
                .collect();
            parts.push(format!("expandable_segments_reserve_by_class:[{}]", entries.join(",")));
        }
        for (key, value) in &self.recorded_only {
            parts.push(format!("{key}:{value}"));
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch refuses a large segment of 10 MiB or less (measured: large-segment-size/): a
    /// request never gets a segment smaller than itself.
    #[test]
    fn large_segments_must_exceed_10_mib_as_in_pytorch() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../reports/reference/h100/large-segment-size/large-segment.json"
        );
        let measured: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for (setting, outcome) in measured["results"].as_object().unwrap() {
            let refused_by_pytorch = outcome.get("error").is_some();
            let ours = AllocConf::parse(setting);
            assert_eq!(ours.is_err(), refused_by_pytorch, "{setting}: {ours:?}");
            if let Err(e) = ours {
                assert!(e.to_string().contains("must be > 10 MB"), "{e}");
            }
        }
        assert_eq!(
            AllocConf::parse("large_segment_size_mb:11").unwrap().large_segment_size,
            11 << 20
        );
    }

    #[test]
    fn only_ascii_white_space_is_skipped_as_pytorch_skips_it() {
        assert!(AllocConf::parse("expandable_segments:\tTrue, max_split_size_mb: 64").is_ok());
        for space in ['\u{a0}', '\u{3000}', '\u{2028}'] {
            let text = format!("expandable_segments:{space}True");
            assert!(AllocConf::parse(&text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn a_threshold_is_read_in_one_pass_whatever_its_length() {
        // A value of 200,000 digits: trying every prefix (as before) took minutes.
        let text = format!("garbage_collection_threshold:0.{}", "7".repeat(200_000));
        let conf = AllocConf::parse(&text).unwrap();
        assert!((conf.garbage_collection_threshold - 0.7777).abs() < 1e-3);
        for (value, prefix) in [
            ("0.5x", 3),
            ("1e-1z", 4),
            (".25", 3),
            ("7.", 2),
            ("-inf", 4),
            ("e5", 0),
            ("+.", 0),
        ] {
            assert_eq!(float_prefix(value.as_bytes()), prefix, "{value}");
        }
    }

    fn rejects(text: &str, needle: &str) {
        let err = AllocConf::parse(text).unwrap_err().to_string();
        assert!(err.contains(needle) && !err.contains('\n'), "{text}: {err}");
    }

    /// The cases PyTorch 2.11 itself was asked about (settings-parse.json): the same verdict.
    #[test]
    fn accepts_and_rejects_what_pytorch_does() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../reports/reference/h100/alloc-traces/settings-parse.json"
        );
        let text = std::fs::read_to_string(file).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() >= 30);
        for case in cases {
            let setting = case["setting"].as_str().unwrap();
            let accepted = case["accepted"].as_bool().unwrap();
            let ours = AllocConf::parse(setting);
            assert_eq!(ours.is_ok(), accepted, "{setting:?}: PyTorch {accepted}, ours {ours:?}");
        }
    }

    #[test]
    fn list_form_follows_pytorch_intervals() {
        let conf = AllocConf::parse("roundup_power2_divisions:[64:8,256:4,1024:2,>:1]").unwrap();
        assert_eq!(conf.divisions_for(1000), 8);
        assert_eq!(conf.divisions_for(63 * MB), 8);
        assert_eq!(conf.divisions_for(64 * MB), 8);
        // Intervals between two named ones keep PyTorch's reset value, 0: plain 512-byte rounding.
        assert_eq!(conf.divisions_for(128 * MB), 0);
        assert_eq!(conf.divisions_for(256 * MB), 4);
        assert_eq!(conf.divisions_for(600 * MB), 0);
        assert_eq!(conf.divisions_for(1024 * MB), 2);
        assert_eq!(
            conf.divisions_for(2048 * MB),
            1,
            "'>' fills from the interval after the last named"
        );
    }

    #[test]
    fn values_read_as_cpp_reads_them() {
        assert_eq!(
            AllocConf::parse("max_split_size_mb:64abc").unwrap().max_split_size,
            64 * MB
        );
        assert_eq!(
            AllocConf::parse("max_split_size_mb:64 , roundup_power2_divisions : 4")
                .unwrap()
                .divisions_for(5 * MB),
            4
        );
        assert_eq!(
            AllocConf::parse("max_split_size_mb:64,max_split_size_mb:128")
                .unwrap()
                .max_split_size,
            128 * MB
        );
        assert_eq!(
            AllocConf::parse("garbage_collection_threshold:0.7x")
                .unwrap()
                .garbage_collection_threshold,
            0.7
        );
        rejects("max_split_size_mb:19", "max_split_size_mb = 19: too small");
        rejects("garbage_collection_threshold:1", "garbage_collection_threshold = 1");
        rejects("roundup_power2_divisions:3", "roundup_power2_divisions = 3");
        rejects("expandable_segments:true", "expandable_segments = true");
        rejects("colour:blue", "Unrecognized key 'colour' in CUDA allocator config.");
        rejects("max_split_size_mb", "ends early");
        rejects("backend:foo", "backend = foo");
    }

    /// A value each key takes, and what it must change once parsed (`None`: recorded only).
    fn sample(key: &str) -> (&'static str, fn(&AllocConf) -> bool) {
        match key {
            "backend" => ("cudaMallocAsync", |c| c.backend == AllocBackend::CudaMallocAsync),
            "max_split_size_mb" => ("64", |c| c.max_split_size == 64 * MB),
            "max_non_split_rounding_mb" => ("64", |c| c.max_non_split_rounding == 64 * MB),
            "large_segment_size_mb" => ("40", |c| c.large_segment_size == 40 * MB),
            "roundup_power2_divisions" => ("4", |c| c.divisions_for(5 * MB) == 4),
            "garbage_collection_threshold" => ("0.6", |c| c.garbage_collection_threshold == 0.6),
            "expandable_segments" => ("True", |c| c.expandable_segments),
            "per_process_memory_fraction" => ("0.5", |c| c.fraction_cap(1000) == Some(500)),
            "throw_on_cudamalloc_oom" => ("True", |c| c.throw_on_cudamalloc_oom),
            "expandable_segments_reserve" => ("40G", |c| c.expandable_segments_reserve == Some(ReserveSpec::Gib(40.0))),
            "expandable_segments_reserve_by_class" => ("[decode:0.25,prefill:8G]", |c| {
                c.expandable_segments_reserve_by_class
                    == vec![
                        ("decode".to_string(), ReserveSpec::Fraction(0.25)),
                        ("prefill".to_string(), ReserveSpec::Gib(8.0)),
                    ]
            }),
            "pinned_num_register_threads" => ("8", |c| {
                c.recorded_only == [("pinned_num_register_threads".into(), "8".into())]
            }),
            "pinned_reserve_segment_size_mb" | "pinned_max_round_threshold_mb" | "pinned_max_cached_size_mb" => {
                ("64", |c| c.recorded_only.len() == 1 && c.recorded_only[0].1 == "64")
            }
            _ => ("True", |c| c.recorded_only.len() == 1 && c.recorded_only[0].1 == "True"),
        }
    }

    /// Every key under every release: accepted with its effect where the release lists it (the
    /// line it is listed at, from that release's shipped headers, is named in the failure),
    /// refused in PyTorch's words where it does not.
    #[test]
    fn every_key_of_every_release_is_read_as_that_release_reads_it() {
        let mut checked = 0;
        for release in TorchRelease::ALL {
            for info in ALLOC_CONF_KEYS {
                let (value, effect) = sample(info.key);
                let text = format!("{}:{value}", info.key);
                let source = crate::key_source(release, info.key)
                    .unwrap_or("c10/core/AllocatorConfig.cpp (getMutableKeys; key read from the wheel's libc10.so)");
                match AllocConf::parse_for(&text, release) {
                    Ok(conf) => {
                        assert!(
                            info.since <= release,
                            "{release} accepted {text}, new in {}",
                            info.since
                        );
                        assert!(effect(&conf), "{release} {text} ({source}): {conf:?}");
                        assert_eq!(conf.release, release);
                        // Host-only keys leave the device settings at their defaults.
                        if info.effect == KeyEffect::HostOnly {
                            let device_part = AllocConf {
                                recorded_only: Vec::new(),
                                ..conf.clone()
                            };
                            assert_eq!(
                                device_part,
                                AllocConf {
                                    release,
                                    ..AllocConf::default()
                                },
                                "{text}"
                            );
                            assert!(
                                !conf.replay_notes(80 << 30).is_empty(),
                                "{text}: the replay says it has no effect"
                            );
                        }
                        // The canonical string reads back the same under the same release.
                        assert_eq!(
                            AllocConf::parse_for(&conf.to_string(), release).unwrap(),
                            conf,
                            "{text}"
                        );
                    }
                    Err(e) => {
                        assert!(info.since > release, "{release} refused {text} ({source}): {e}");
                        let e = e.to_string();
                        assert!(
                            e.contains(&format!("Unrecognized key '{}' in CUDA allocator config.", info.key))
                                && e.contains(&format!("PyTorch {release}")),
                            "{e}"
                        );
                    }
                }
                checked += 1;
            }
        }
        assert_eq!(checked, TorchRelease::ALL.len() * ALLOC_CONF_KEYS.len());
    }

    /// `parsePerProcessMemoryFraction`: `toDouble`, then "per_process_memory_fraction is
    /// invalid, set it in [0.0, 1.0]" outside [0, 1] (c10/cuda/CUDAAllocatorConfig.cpp; the
    /// message is in libc10_cuda.so of every wheel 2.11.0-2.15.0). The cap it sets is
    /// `setMemoryFraction`'s: none at 1.0, else fraction x total memory, truncated
    /// (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator's constructor).
    #[test]
    fn per_process_memory_fraction_is_checked_and_caps_the_device_in_every_release() {
        for release in TorchRelease::ALL {
            for bad in ["1.5", "-0.1", "nan"] {
                let e = AllocConf::parse_for(&format!("per_process_memory_fraction:{bad}"), release).unwrap_err();
                assert!(e.to_string().contains("set it in [0.0, 1.0]"), "{e}");
            }
            let conf = AllocConf::parse_for("per_process_memory_fraction:0.3", release).unwrap();
            assert_eq!(conf.fraction_cap(1_000_001), Some(300_000));
            assert_eq!(
                AllocConf::parse_for("per_process_memory_fraction:1", release)
                    .unwrap()
                    .fraction_cap(1000),
                None
            );
            assert_eq!(
                AllocConf::parse_for("per_process_memory_fraction:0", release)
                    .unwrap()
                    .fraction_cap(1000),
                Some(0)
            );
            // cudaMallocAsync has no such cap in the replay.
            let conf =
                AllocConf::parse_for("backend:cudaMallocAsync,per_process_memory_fraction:0.5", release).unwrap();
            assert_eq!(conf.fraction_cap(1000), None);
        }
    }

    /// `parseReserveSpec` (2.15): a malformed or non-positive reserve is ignored with a
    /// warning, not refused; the replay says so.
    #[test]
    fn a_bad_reserve_is_ignored_with_a_note_as_pytorch_2_15_does() {
        for bad in ["abc", "0", "-1G", "inf"] {
            let conf =
                AllocConf::parse_for(&format!("expandable_segments_reserve:{bad}"), TorchRelease::V2_15).unwrap();
            assert_eq!(conf.expandable_segments_reserve, None, "{bad}");
            assert!(
                conf.replay_notes(1 << 30).iter().any(|n| n.contains("ignores it")),
                "{bad}"
            );
        }
        let conf =
            AllocConf::parse_for("expandable_segments_reserve_by_class:[a:0.5,b:x]", TorchRelease::V2_15).unwrap();
        assert_eq!(
            conf.expandable_segments_reserve_by_class,
            vec![("a".to_string(), ReserveSpec::Fraction(0.5))]
        );
        assert_eq!(ReserveSpec::Fraction(0.5).bytes(1000), 500);
        assert_eq!(ReserveSpec::Gib(2.0).bytes(0), 2 << 30);
        assert_eq!(ReserveSpec::Gib(1e30).bytes(0), u64::MAX);
    }

    /// The oldest release a settings string can be from: the newest `since` of its keys.
    #[test]
    fn settings_show_the_oldest_release_that_reads_them() {
        assert_eq!(
            TorchRelease::oldest_knowing("max_split_size_mb:64"),
            Ok(TorchRelease::V2_11)
        );
        assert_eq!(
            TorchRelease::oldest_knowing("throw_on_cudamalloc_oom:True"),
            Ok(TorchRelease::V2_12)
        );
        assert_eq!(
            TorchRelease::oldest_knowing("expandable_segments_reserve_by_class:[a:0.5],pinned_free_catch_all:True"),
            Ok(TorchRelease::V2_15)
        );
        assert_eq!(TorchRelease::oldest_knowing("colour:blue"), Err("colour".to_string()));
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        fn divisions() -> impl Strategy<Value = u64> {
            prop_oneof![Just(0u64), (0u32..7).prop_map(|k| 1u64 << k)]
        }

        prop_compose! {
            fn any_conf()(
                max_split in prop::option::of(20u64..100_000),
                rounding in prop::option::of(20u64..100_000),
                segment in prop::option::of(11u64..4096),
                uniform in prop::option::of((0u32..7).prop_map(|k| 1u64 << k)),
                list in prop::collection::vec(divisions(), ROUNDUP_INTERVALS),
                use_list in any::<bool>(),
                gc in prop::option::of(1u32..1000),
                expandable in any::<bool>(),
                cuda_async in any::<bool>(),
                lock in prop::option::of(any::<bool>()),
            ) -> AllocConf {
                let mut conf = AllocConf::default();
                if let Some(mb) = max_split { conf.max_split_size = mb * MB; }
                if let Some(mb) = rounding { conf.max_non_split_rounding = mb * MB; }
                if let Some(mb) = segment { conf.large_segment_size = mb * MB; }
                if use_list {
                    conf.roundup_power2_divisions.copy_from_slice(&list);
                } else if let Some(d) = uniform {
                    conf.roundup_power2_divisions = [d; ROUNDUP_INTERVALS];
                }
                if let Some(g) = gc { conf.garbage_collection_threshold = f64::from(g) / 1000.0; }
                conf.expandable_segments = expandable;
                if cuda_async { conf.backend = AllocBackend::CudaMallocAsync; }
                if let Some(flag) = lock {
                    conf.recorded_only.push((
                        "release_lock_on_cudamalloc".into(),
                        if flag { "True" } else { "False" }.into(),
                    ));
                }
                conf
            }
        }

        proptest! {
            /// Every setting reads back from its canonical string to the same settings.
            #[test]
            fn settings_round_trip(conf in any_conf()) {
                let text = conf.to_string();
                let again = AllocConf::parse(&text);
                prop_assert_eq!(again.as_ref().ok(), Some(&conf), "{}", text);
            }

            /// Any string at all is settings or a one-line error, never a panic.
            #[test]
            fn any_string_is_settings_or_one_line(text in "[a-z_:,\\[\\]>0-9. ]{0,60}") {
                if let Err(e) = AllocConf::parse(&text) {
                    let message = e.to_string();
                    prop_assert!(!message.contains('\n'), "{}", message);
                }
            }

            /// Strings built from real keys and values, well-formed or not.
            #[test]
            fn key_value_soup_never_panics(
                parts in prop::collection::vec(
                    (prop::sample::select(vec![
                        "max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
                        "expandable_segments", "backend", "max_non_split_rounding_mb", "pinned_num_register_threads",
                    ]),
                    prop::sample::select(vec!["64", "0", "-1", "True", "[1:2,>:4]", "[", "]", "0.5", "", ">:1", "abc"])),
                    0..5,
                ),
                separator in prop::sample::select(vec![",", ":", ";", ""]),
            ) {
                let text: Vec<String> = parts.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                let _ = AllocConf::parse(&text.join(separator));
            }
        }
    }
}
