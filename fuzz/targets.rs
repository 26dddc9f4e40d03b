//! The fuzz targets' bodies, shared by `cargo fuzz` (fuzz/fuzz_targets/*.rs) and the bounded
//! mutation run in CI (sim/tests/fuzz_smoke.rs). Each takes any bytes and must return: an
//! error is fine, a panic, an abort or a hang is the bug.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use allocators::{build_pytorch_policy, replay_policy, ReplayOptions, SimDevice};
use experiments::{
    refuse_shared_outputs, set_output_root, write_atomically, AllocConf, BackendKind, Profile, Suite, Trace,
};

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

/// A snapshot whose final `segments` the input describes, eight bytes a segment, with a trace
/// that frees the blocks they hold (a lost start) and allocates inside each: segments repeated,
/// overlapping, past 2^64, on devices far beyond any GPU, blocks outside their segment or
/// overlapping, `blocks` not a list. The snapshot's consistency check must refuse what
/// contradicts itself in one line, and what it lets through must replay without a panic.
pub(crate) fn segments(data: &[u8]) {
    let bytes = segments_snapshot(data);
    match Trace::all_from_bytes("fuzz.pickle", &bytes, None) {
        Ok(traces) => traces.iter().for_each(replay_a_little),
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains('\n'), "a refusal is one line: {message:?}");
        }
    }
}

/// The pickle [`segments`] reads: byte 0 the device (high bit: 2^33 times it), bytes 1-3 the
/// address in 4 KiB pages above 16 GiB (0xff first: just below 2^64), byte 4 the size in
/// 512 KiB, byte 5 how many blocks (0xff: the integer 5 in place of the list), byte 6 which
/// blocks are allocated, byte 7 how far the last block runs past its share (in 512 B).
pub(crate) fn segments_snapshot(data: &[u8]) -> Vec<u8> {
    fn str(out: &mut Vec<u8>, text: &str) {
        out.push(b'X');
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    fn int(out: &mut Vec<u8>, value: u64) {
        out.extend_from_slice(&[0x8a, 9]);
        out.extend_from_slice(&value.to_le_bytes());
        out.push(0);
    }
    fn event(out: &mut Vec<u8>, action: &str, addr: u64, size: u64) {
        out.extend_from_slice(b"}(");
        str(out, "action");
        str(out, action);
        for (key, value) in [("addr", addr), ("size", size), ("stream", 0)] {
            str(out, key);
            int(out, value);
        }
        out.push(b'u');
    }
    let mut segments = Vec::new();
    let mut events = Vec::new();
    for chunk in data.chunks_exact(8).take(64) {
        let device = if chunk[0] & 0x80 != 0 {
            u64::from(chunk[0] & 0x7f) << 33
        } else {
            u64::from(chunk[0] % 3)
        };
        let pages = u64::from(chunk[1]) << 16 | u64::from(chunk[2]) << 8 | u64::from(chunk[3]);
        let addr = if chunk[1] == 0xff {
            u64::MAX - (u64::from(chunk[2]) << 12)
        } else {
            (16 << 30) + (pages << 12)
        };
        let size = u64::from(chunk[4]) << 19;
        let (count, as_int) = (u64::from(chunk[5] % 5), chunk[5] == 0xff);
        segments.extend_from_slice(b"}(");
        for (key, value) in [
            ("device", device),
            ("address", addr),
            ("total_size", size),
            ("stream", 0),
        ] {
            str(&mut segments, key);
            int(&mut segments, value);
        }
        str(&mut segments, "segment_type");
        str(&mut segments, if size == 2 << 20 { "small" } else { "large" });
        str(&mut segments, "blocks");
        if as_int {
            int(&mut segments, 5);
        } else {
            segments.extend_from_slice(b"](");
            let share = size.checked_div(count).unwrap_or(0) & !511;
            for k in 0..count {
                let at = addr.wrapping_add(k * share);
                let mut block = share;
                if k + 1 == count {
                    block = size - k * share + (u64::from(chunk[7]) << 9);
                }
                let allocated = chunk[6] >> k & 1 == 1;
                segments.extend_from_slice(b"}(");
                for (key, value) in [("address", at), ("size", block), ("requested_size", block)] {
                    str(&mut segments, key);
                    int(&mut segments, value);
                }
                str(&mut segments, "state");
                str(&mut segments, if allocated { "active_allocated" } else { "inactive" });
                segments.push(b'u');
                if allocated {
                    // Allocated before the window, freed in it; and a request inside it.
                    event(&mut events, "free_requested", at, block);
                    event(&mut events, "free_completed", at, block);
                    event(&mut events, "alloc", at.wrapping_add(512), 512);
                    event(&mut events, "free_requested", at.wrapping_add(512), 512);
                    event(&mut events, "free_completed", at.wrapping_add(512), 512);
                }
            }
            segments.push(b'e');
        }
        segments.push(b'u');
    }
    let mut out = vec![0x80, 2, b'}', b'('];
    str(&mut out, "segments");
    out.extend_from_slice(b"](");
    out.extend_from_slice(&segments);
    out.push(b'e');
    str(&mut out, "device_traces");
    out.extend_from_slice(b"](](");
    out.extend_from_slice(&events);
    out.extend_from_slice(b"ee");
    out.extend_from_slice(b"u.");
    out
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

/// Python's own unpickler (fuzz/pickle_oracle.py), started once per process.
struct Oracle {
    _child: Child,
    requests: ChildStdin,
    answers: BufReader<ChildStdout>,
}

impl Oracle {
    fn start() -> Option<Oracle> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/pickle_oracle.py");
        let python = std::env::var("VRAMLAB_FUZZ_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let requests = child.stdin.take()?;
        let answers = BufReader::new(child.stdout.take()?);
        Some(Oracle {
            _child: child,
            requests,
            answers,
        })
    }

    /// `devices 0=N ...` or `refused WHY`, as fuzz/pickle_oracle.py answers.
    fn ask(&mut self, pickle: &[u8]) -> String {
        let length = u32::try_from(pickle.len()).expect("fuzz inputs are small");
        self.requests
            .write_all(&length.to_le_bytes())
            .expect("the oracle reads");
        self.requests.write_all(pickle).expect("the oracle reads");
        self.requests.flush().expect("the oracle reads");
        let mut line = String::new();
        self.answers.read_line(&mut line).expect("the oracle answers");
        assert!(!line.is_empty(), "the Python oracle stopped");
        line.trim_end().to_string()
    }
}

/// Whether Python could be started for [`snapshot_differential`] (CI requires it).
pub(crate) fn python_oracle_available() -> bool {
    oracle().lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

fn oracle() -> &'static Mutex<Option<Oracle>> {
    static ORACLE: OnceLock<Mutex<Option<Oracle>>> = OnceLock::new();
    ORACLE.get_or_init(|| Mutex::new(Oracle::start()))
}

/// A snapshot pickle read by vramlab and by Python's own `pickle.loads`: where vramlab gives an
/// answer, each device holds the allocation requests (`alloc` and `oom`) Python sees there, and
/// Python reads the pickle too. vramlab may refuse what Python reads (a value it cannot use),
/// never read what Python refuses or read it otherwise.
pub(crate) fn snapshot_differential(data: &[u8]) {
    let mut bytes = vec![0x80];
    bytes.extend_from_slice(data);
    let Ok(traces) = Trace::all_from_bytes("fuzz.pickle", &bytes, None) else {
        return;
    };
    let python = match oracle().lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        Some(oracle) => oracle.ask(&bytes),
        None => return,
    };
    let ours: String = traces
        .iter()
        .filter(|t| t.allocations() > 0)
        .map(|t| format!(" {}={}", t.device, t.allocations()))
        .collect();
    match python.strip_prefix("devices") {
        Some(theirs) => assert_eq!(ours, theirs, "requests per device, vramlab's against Python's"),
        None => panic!("vramlab read a pickle Python refuses ({python}); vramlab's requests:{ours}"),
    }
}

/// The longest a settings string of 64 KiB may take to parse: linear work is well under a
/// millisecond, a parser that tries every prefix takes seconds.
const SETTINGS_TIME: Duration = Duration::from_millis(500);

/// A `PYTORCH_ALLOC_CONF` string pumped to 64 KiB (its middle part repeated, the two first bytes
/// choosing where that part is), so work that grows faster than the input shows as time.
pub(crate) fn alloc_conf_time(data: &[u8]) {
    let Some((&[a, b], text)) = data.split_first_chunk::<2>() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let cut = |at: u8| {
        let mut i = usize::from(at).min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let (start, end) = (cut(a.min(b)), cut(a.max(b)));
    let (head, middle, tail) = (&text[..start], &text[start..end], &text[end..]);
    let times = if middle.is_empty() {
        1
    } else {
        (64 << 10) / middle.len() + 1
    };
    let pumped = format!("{head}{}{tail}", middle.repeat(times));
    let started = Instant::now();
    let _ = AllocConf::parse(&pumped);
    let took = started.elapsed();
    assert!(
        took < SETTINGS_TIME,
        "{} bytes of settings took {took:?} ({middle:?} repeated {times} times)",
        pumped.len()
    );
}

/// The output folder the `output_paths` target writes into, with what a hostile user would
/// plant there: a symbolic link to a folder outside and a FIFO; beside it, the folder outside
/// with a file that must not change.
struct Planted {
    out: PathBuf,
    outside: PathBuf,
    fixtures: [&'static str; 2],
}

fn planted() -> &'static Planted {
    static PLANTED: OnceLock<Planted> = OnceLock::new();
    PLANTED.get_or_init(|| {
        let top = std::env::temp_dir().join(format!("vramlab-fuzz-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let (out, outside) = (top.join("out"), top.join("outside"));
        std::fs::create_dir_all(&out).expect("a temporary folder");
        std::fs::create_dir_all(&outside).expect("a temporary folder");
        std::fs::write(outside.join("sentinel"), b"untouched").expect("a temporary file");
        std::os::unix::fs::symlink(&outside, out.join("link")).expect("a symbolic link");
        let made = Command::new("mkfifo").arg(out.join("fifo")).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
        set_output_root(&out);
        Planted {
            out,
            outside,
            fixtures: ["link", "fifo"],
        }
    })
}

/// Up to three paths under the output folder (lines of the input), each written as
/// `--out`'s files are: nothing appears or changes outside the folder, the planted link and FIFO
/// stay what they are, and paths `refuse_shared_outputs` lets through each keep their own
/// content (none overwrote another).
pub(crate) fn output_paths(data: &[u8]) {
    let planted = planted();
    let text = String::from_utf8_lossy(data);
    let paths: Vec<PathBuf> = text
        .split('\n')
        .take(3)
        .filter(|p| p.len() <= 200 && !p.contains('\0'))
        .map(|p| planted.out.join(p))
        .filter(|p| p.starts_with(&planted.out))
        .collect();
    let named: Vec<(String, PathBuf)> = paths.iter().map(|p| (p.display().to_string(), p.clone())).collect();
    let distinct = refuse_shared_outputs(&named).is_ok();
    let mut written = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let content = format!("output {i}");
        if write_atomically(path, content.as_bytes()).is_ok() {
            let real = path.canonicalize().expect("a written file exists");
            let root = planted.out.canonicalize().expect("the output folder exists");
            assert!(
                real.starts_with(&root),
                "{} was written at {}",
                path.display(),
                real.display()
            );
            written.push((path, content));
        }
    }
    let outside: Vec<_> = std::fs::read_dir(&planted.outside)
        .expect("the outside folder")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(outside, ["sentinel"], "something was written outside the output folder");
    assert_eq!(
        std::fs::read(planted.outside.join("sentinel")).expect("the sentinel"),
        b"untouched"
    );
    let top = planted.out.parent().expect("the output folder's parent");
    assert_eq!(
        std::fs::read_dir(top).expect("the temporary folder").count(),
        2,
        "a file beside the output folder"
    );
    {
        use std::os::unix::fs::FileTypeExt;
        let fifo = std::fs::symlink_metadata(planted.out.join("fifo")).expect("the FIFO");
        assert!(fifo.file_type().is_fifo(), "the planted FIFO was replaced");
        let link = std::fs::symlink_metadata(planted.out.join("link")).expect("the link");
        assert!(link.file_type().is_symlink(), "the planted link was replaced");
    }
    if distinct {
        for (path, content) in &written {
            let now = std::fs::read(path).unwrap_or_default();
            assert_eq!(
                now,
                content.as_bytes(),
                "{} was overwritten by another output",
                path.display()
            );
        }
    }
    for entry in std::fs::read_dir(&planted.out).expect("the output folder") {
        let entry = entry.expect("an entry");
        if !planted.fixtures.iter().any(|f| entry.file_name() == **f) {
            let path = entry.path();
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

/// A target: any bytes in, nothing out.
pub(crate) type Target = fn(&[u8]);

/// Targets that start from another target's corpus (`fuzz/corpus/NAME`).
pub(crate) const SHARED_CORPORA: &[(&str, &str)] = &[("snapshot_differential", "pickle")];

/// The corpus folder `target` starts from.
pub(crate) fn corpus_of(target: &str) -> &str {
    SHARED_CORPORA
        .iter()
        .find(|(name, _)| *name == target)
        .map_or(target, |(_, corpus)| corpus)
}

/// Every target by name, for the runners.
pub(crate) const TARGETS: &[(&str, Target)] = &[
    ("pickle", pickle),
    ("segments", segments),
    ("rmm", rmm),
    ("trace_json", trace_json),
    ("suite", suite),
    ("profile", profile),
    ("alloc_conf", alloc_conf),
    ("snapshot_differential", snapshot_differential),
    ("alloc_conf_time", alloc_conf_time),
    ("output_paths", output_paths),
];
