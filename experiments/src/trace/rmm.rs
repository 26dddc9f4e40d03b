//! RMM `logging_resource_adaptor` logs, in every form RMM has written them.
//!
//! The adaptor (rapidsai/rmm, `cpp/src/mr/detail/logging_resource_adaptor_impl.cpp` today,
//! `include/rmm/mr/device/logging_resource_adaptor.hpp` before) writes one line per event through
//! spdlog with the pattern `%t,%H:%M:%S.%f,%v`: the OS thread id in decimal, the time of day,
//! then `Action,Pointer,Size,Stream`. When it is built it writes the header
//! `Thread,Time,Action,Pointer,Size,Stream` once, with no prefix. What changed between versions:
//!
//! - `Action` is `allocate` or `free`; since 22.04 also `allocate failure`, a request that threw
//!   (replayed here as a failed request, as PyTorch's `oom` is).
//! - `Pointer` is hex, `0x7f85e9000000`. A null one (a failure, or an allocation of 0 bytes) is
//!   `(nil)` since 24.12 (printf `%p`), `0x0` from 0.17 to 24.10 (fmt) and `0` before (iostream).
//! - `Stream` is hex since 0.17: `0x2`, but the default stream is written bare as `0` since 24.12
//!   (iostream shows no `0x` for a null handle) and `0x0` before. Until 0.16 it was decimal.
//! - `Time` is `HH:MM:SS.ffffff` since 21.06, `HH:MM:SS:ffffff` before (so a bare stream in a row
//!   with that older time is decimal).
//! - 0.13 and 0.14 wrote no thread: header `Time,Action,Pointer,Size,Stream`.
//!
//! A log written to stdout or stderr (cudf's Java bindings, spark-rapids'
//! `spark.rapids.memory.gpu.debug`) is often kept without its header and among other output (RMM's
//! own debug log goes to stderr too). So the header is optional, and lines that are not records
//! (blank lines, other output, a second adaptor's header, an action this reader does not know)
//! are skipped and counted, each example naming its line; a record of a known action that does
//! not parse is refused with its line. The log is buffered: a crashed program's log may end
//! inside a record, and that unfinished last line is skipped and counted too. An allocation of 0
//! bytes at a null pointer, and the free of one, hold nothing and are left out. Pairing warnings
//! name a record by its index among the records, from 0.

use super::{Pairing, Trace, TraceSource};
use crate::error::{Error, Result};

const HEADER: [&str; 6] = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"];

/// RMM 0.13 and 0.14 logged no thread.
const HEADER_WITHOUT_THREAD: [&str; 5] = ["Time", "Action", "Pointer", "Size", "Stream"];

const ACTIONS: [&str; 3] = ["allocate", "free", "allocate failure"];

/// Why an unfinished last line is skipped.
const CUT: &str = "the log ends inside this record (its tail was never written)";

/// Most fields kept from one line (a record has 6; one more tells a longer line).
const MAX_FIELDS: usize = HEADER.len() + 1;

/// Whether `text` (a file's first bytes, possibly cut short) begins as an RMM log does: with
/// either header, or with a record (header-less, as a log written to stdout is often kept).
pub(super) fn looks_like_log(text: &[u8]) -> bool {
    let start = text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(text.len());
    let line = &text[start..];
    let line = &line[..line
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(line.len())];
    if line.starts_with(b"Thread,") || line.starts_with(b"Time,Action,") {
        return true;
    }
    // A thread id, unless the log is older than threads; then the time and the action.
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = match line.get(digits) {
        Some(b',') if digits > 0 => &line[digits + 1..],
        _ => line,
    };
    let Some(comma) = rest.iter().position(|&b| b == b',') else {
        return false;
    };
    if clock_time(&rest[..comma]).is_none() {
        return false;
    }
    let after = &rest[comma + 1..];
    match after.iter().position(|&b| b == b',') {
        Some(end) => ACTIONS.iter().any(|a| a.as_bytes() == &after[..end]),
        // The head ends inside the action.
        None => ACTIONS.iter().any(|a| a.as_bytes().starts_with(after)),
    }
}

pub(super) fn import(name: &str, bytes: &[u8]) -> Result<Trace> {
    let mut pairing = Pairing::default();
    // Records seen so far: the index pairing warnings name.
    let mut records = 0usize;
    let mut seen_header = false;
    let mut first_text_line = true;
    let mut rest = bytes;
    let mut line = 0usize;
    // Fields reused for every line: a ten-million-row log allocates nothing per row.
    let mut fields = [""; MAX_FIELDS];
    while !rest.is_empty() {
        line += 1;
        // Lines end in LF, CRLF, or (a log saved by an old Mac editor) CR alone.
        let (raw, finished) = match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            Some(end) => {
                let raw = &rest[..end];
                let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
                rest = &rest[end + 1 + usize::from(crlf)..];
                (raw, true)
            }
            None => (std::mem::take(&mut rest), false),
        };
        let skip = |pairing: &mut Pairing, why: &str| pairing.warnings.push(format!("line {line}: {why}; skipped"));
        let Ok(text) = std::str::from_utf8(raw) else {
            skip(&mut pairing, "not text");
            continue;
        };
        if text.trim().is_empty() {
            skip(&mut pairing, "blank");
            continue;
        }
        let first = std::mem::replace(&mut first_text_line, false);
        let mut count = 0;
        for field in text.split(',') {
            if count < MAX_FIELDS {
                fields[count] = clean(field);
            }
            count += 1;
        }
        let row = &fields[..count.min(MAX_FIELDS)];

        if row[0] == "Thread" || (row[0] == "Time" && row.get(1) == Some(&"Action")) {
            if row == HEADER || row == HEADER_WITHOUT_THREAD {
                if records > 0 || seen_header {
                    skip(&mut pairing, "a second header (logs of several adaptors run together?)");
                }
                seen_header = true;
                continue;
            }
            if first {
                return Err(Error::Trace(format!(
                    "{name}:{line}: header is '{}', an RMM log has '{}'",
                    text.trim(),
                    HEADER.join(",")
                )));
            }
        }

        let (thread, record) = match count {
            6 if ACTIONS.contains(&row[2]) => (Some(row[0]), &row[1..6]),
            5 if ACTIONS.contains(&row[1]) => (None, &row[0..5]),
            _ => {
                let has_action = text.split(',').any(|f| ACTIONS.contains(&clean(f)));
                if !finished && (has_action || looks_like_log(raw)) {
                    skip(&mut pairing, CUT);
                } else if has_action {
                    return Err(Error::Trace(format!(
                        "{name}:{line}: {count} fields, an RMM log row has {} ({})",
                        HEADER.len(),
                        HEADER.join(",")
                    )));
                } else if (count == 6 && is_thread(row[0]) && clock_time(row[1].as_bytes()).is_some())
                    || (count == 5 && clock_time(row[0].as_bytes()).is_some())
                {
                    let action = if count == 6 { row[2] } else { row[1] };
                    skip(&mut pairing, &format!("unknown action '{}'", snippet(action)));
                } else {
                    let why = format!("'{}' is not an allocation record", snippet(text.trim()));
                    skip(&mut pairing, &why);
                }
                continue;
            }
        };
        let parsed = parse(thread, record).map_err(|(column, value, want)| {
            let shown = snippet(value);
            let length = match shown.len() < value.len() {
                true => format!(" ({} characters)", value.chars().count()),
                false => String::new(),
            };
            Error::Trace(format!("{name}:{line}: {column} '{shown}'{length} is not {want}"))
        });
        let (action, pointer, size, stream) = match parsed {
            Ok(parsed) => parsed,
            Err(_) if !finished => {
                skip(&mut pairing, CUT);
                continue;
            }
            Err(e) => return Err(e),
        };
        let index = records;
        records += 1;
        match action {
            "allocate failure" => pairing.failed_alloc(size, stream),
            // An allocation of 0 bytes, given no memory, and its free: nothing to replay.
            _ if pointer == 0 && size == 0 => {}
            _ if pointer == 0 => skip(&mut pairing, &format!("{action} of {size} bytes at a null pointer")),
            "allocate" => pairing.alloc(index, pointer, size, stream),
            _ => pairing.free(index, pointer, Some(size)),
        }
    }
    Ok(pairing.finish(name.to_string(), TraceSource::RmmLog, Vec::new()))
}

/// A record's values: (action, pointer, size, stream), or the column at fault, its value and
/// what it should be.
type Parsed<'a> = std::result::Result<(&'a str, u64, u64, u64), (&'static str, &'a str, &'static str)>;

/// `record` is `Time,Action,Pointer,Size,Stream`, its action one of `ACTIONS`.
fn parse<'a>(thread: Option<&'a str>, record: &[&'a str]) -> Parsed<'a> {
    let [time, action, pointer, size, stream] = [record[0], record[1], record[2], record[3], record[4]];
    if let Some(thread) = thread.filter(|t| !is_thread(t)) {
        return Err(("Thread", thread, "a thread id"));
    }
    let separator = clock_time(time.as_bytes()).ok_or(("Time", time, "a time of day HH:MM:SS.ffffff"))?;
    let pointer_value = match pointer {
        "(nil)" => Some(0),
        _ => parse_hex(pointer),
    }
    .ok_or(("Pointer", pointer, "a hex address or (nil)"))?;
    let size_value = number(size, 10).ok_or(("Size", size, "a byte count"))?;
    // Bare digits are hex (RMM writes the default stream as `0`), except in logs older than 0.17,
    // known by the colon before the microseconds, which wrote the handle in decimal.
    let stream_value = match stream.strip_prefix("0x").or_else(|| stream.strip_prefix("0X")) {
        Some(digits) => number(digits, 16),
        None if separator == b':' => number(stream, 10),
        None => number(stream, 16),
    }
    .ok_or(("Stream", stream, "a stream handle"))?;
    Ok((action, pointer_value, size_value, stream_value))
}

/// Hex with or without `0x` (a glibc `%p`, iostream or fmt pointer).
fn parse_hex(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    number(digits, 16)
}

/// Digits alone in `radix` (no sign, unlike `from_str_radix`), fitting in 64 bits.
fn number(digits: &str, radix: u32) -> Option<u64> {
    if digits.starts_with('+') {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A field as written: spaces around it and CSV quotes taken off.
fn clean(field: &str) -> &str {
    let field = field.trim();
    field
        .strip_prefix('"')
        .and_then(|f| f.strip_suffix('"'))
        .unwrap_or(field)
}

/// spdlog's `%t`: the OS thread id, in decimal.
fn is_thread(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `HH:MM:SS.f...`, or `HH:MM:SS:f...` as RMM wrote it before 21.06: the separator before the
/// fraction (checked byte by byte: this runs once per row).
fn clock_time(b: &[u8]) -> Option<u8> {
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    (b.len() > 9
        && b[2] == b':'
        && b[5] == b':'
        && matches!(b[8], b'.' | b':')
        && digits(0..2)
        && digits(3..5)
        && digits(6..8)
        && digits(9..b.len()))
    .then(|| b[8])
}

/// The start of `text`, short enough for a one-line warning.
fn snippet(text: &str) -> String {
    const MOST: usize = 40;
    match text.char_indices().nth(MOST) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;

    fn alloc(id: u64, size: u64, stream: u64) -> TraceEvent {
        TraceEvent::Alloc { id, size, stream }
    }

    fn free(id: u64) -> TraceEvent {
        TraceEvent::Free { id }
    }

    /// As RMM 22.04 to 24.10 wrote it (fmt: `0x0` streams and null pointers).
    const LOG: &str = "Thread,Time,Action,Pointer,Size,Stream
140202006878976,15:29:16.456137,allocate,0x7f85e9000000,1000,0x0
140202006878976,15:29:16.456150,allocate failure,0x0,99999999999,0x0
140202006878976,15:29:16.456213,free,0x7f85e9000000,1000,0x0
140202006878976,15:29:16.456300,free,0x7f85e9000000,1000,0x0
";

    #[test]
    fn header_pairs_fails_and_counts_a_double_free() {
        let trace = import("log.csv", LOG.as_bytes()).unwrap();
        assert_eq!(
            trace.events,
            vec![alloc(0, 1000, 0), alloc(1, 99999999999, 0), free(1), free(0)]
        );
        assert_eq!(trace.warnings.count, 1);
        assert!(trace.warnings.examples[0].starts_with("event 3: free of 0x7f85e9000000"));
    }

    #[test]
    fn no_header() {
        let log = LOG.split_once('\n').unwrap().1;
        let trace = import("log.csv", log.as_bytes()).unwrap();
        assert_eq!(trace.events, import("log.csv", LOG.as_bytes()).unwrap().events);
        assert_eq!(trace.warnings.count, 1);
        assert!(looks_like_log(log.as_bytes()));
    }

    #[test]
    fn bare_hex_streams_as_rmm_writes_them_since_24_12() {
        // iostream writes a null stream as `0` and any other with `0x`; bare digits are hex.
        let log = "Thread,Time,Action,Pointer,Size,Stream
2342727,15:47:02.841961,allocate,0x10012400000,1048576,0
2342727,15:47:02.841970,allocate,0x10012500000,512,10
2342727,15:47:02.841977,free,0x10012400000,1048576,0
";
        let trace = import("log.csv", log.as_bytes()).unwrap();
        assert_eq!(trace.events, vec![alloc(0, 1048576, 0), alloc(1, 512, 16), free(0)]);
        assert_eq!(trace.warnings.count, 0);
    }

    #[test]
    fn hex_streams_with_0x() {
        let log = "1979932,14:21:19.998533,allocate,0x30a000000,256,0x2
1979933,14:21:20.000001,allocate,0x30a000100,256,0x55d0c3a0f2e0
1980043,14:21:32.661875,free,0x30a000000,256,0x2
";
        let trace = import("log.csv", log.as_bytes()).unwrap();
        assert_eq!(
            trace.events,
            vec![alloc(0, 256, 2), alloc(1, 256, 0x55d0c3a0f2e0), free(0)]
        );
    }

    #[test]
    fn decimal_streams_and_colon_times_before_0_17() {
        // 0.15 and 0.16: a thread, `HH:MM:SS:ffffff`, the stream in decimal, a null pointer `0`.
        let log = "Thread,Time,Action,Pointer,Size,Stream
4242,10:00:00:000001,allocate,0x7f0000000000,4096,94023456
4242,10:00:00:000002,allocate,0,0,0
4242,10:00:00:000003,free,0,0,0
4242,10:00:00:000004,free,0x7f0000000000,4096,94023456
";
        let trace = import("log.csv", log.as_bytes()).unwrap();
        assert_eq!(trace.events, vec![alloc(0, 4096, 94023456), free(0)]);
        assert_eq!(trace.warnings.count, 0);
        // 0.13 and 0.14: no thread column.
        let log = "Time,Action,Pointer,Size,Stream
10:00:00:000001,allocate,0x7f0000000000,4096,17
10:00:00:000004,free,0x7f0000000000,4096,17
";
        assert!(looks_like_log(log.as_bytes()));
        assert!(looks_like_log(log.split_once('\n').unwrap().1.as_bytes()));
        let trace = import("log.csv", log.as_bytes()).unwrap();
        assert_eq!(trace.events, vec![alloc(0, 4096, 17), free(0)]);
        // 0.17 to 21.04: the colon time with fmt's `0x` streams, which stay hex.
        let log = "1,10:00:00:000001,allocate,0x1000,64,0x10\n";
        assert_eq!(
            import("log.csv", log.as_bytes()).unwrap().events,
            vec![alloc(0, 64, 16)]
        );
    }

    #[test]
    fn nil_failed_allocation_is_a_failed_request() {
        let log = "Thread,Time,Action,Pointer,Size,Stream
7,09:00:00.000001,allocate,0x7f0000000000,256,0
7,09:00:00.000002,allocate failure,(nil),85899345920,0
7,09:00:00.000003,allocate,(nil),0,0
7,09:00:00.000004,free,(nil),0,0
7,09:00:00.000005,free,0x7f0000000000,256,0
";
        let trace = import("log.csv", log.as_bytes()).unwrap();
        // The failure is asked for and given back at once; the zero-byte pair holds nothing.
        assert_eq!(
            trace.events,
            vec![alloc(0, 256, 0), alloc(1, 85899345920, 0), free(1), free(0)]
        );
        assert_eq!(trace.warnings.count, 0);
        // A null pointer with bytes is no allocation either; counted.
        let log = log.replace("(nil),0,0\n7,09:00:00.000004", "(nil),64,0\n7,09:00:00.000004");
        let trace = import("log.csv", log.as_bytes()).unwrap();
        assert_eq!(trace.warnings.count, 1);
        assert_eq!(
            trace.warnings.examples[0],
            "line 4: allocate of 64 bytes at a null pointer; skipped"
        );
    }

    #[test]
    fn lines_that_are_not_records_are_skipped_and_counted() {
        let log = "Spark executor started
1979932,14:21:19.998533,allocate,0x30a000000,256,0x2

[ 1979932][14:21:20:000001][info  ] [A][Stream 0x2][Upstream 256B][FAIL]
1979932,14:21:20.000002,reallocate,0x30a000000,512,0x2
Thread,Time,Action,Pointer,Size,Stream
1980043,14:21:32.661875,free,0x30a000000,256,0x2
";
        let trace = import("out.txt", log.as_bytes()).unwrap();
        assert_eq!(trace.events, vec![alloc(0, 256, 2), free(0)]);
        assert_eq!(trace.warnings.count, 5);
        assert_eq!(trace.warnings.allocated_before_start, 0);
        assert_eq!(
            trace.warnings.examples,
            vec![
                "line 1: 'Spark executor started' is not an allocation record; skipped",
                "line 3: blank; skipped",
                "line 4: '[ 1979932][14:21:20:000001][info  ] [A][...' is not an allocation record; skipped",
                "line 5: unknown action 'reallocate'; skipped",
                "line 6: a second header (logs of several adaptors run together?); skipped",
            ]
        );
    }

    #[test]
    fn a_log_cut_inside_its_last_record_keeps_the_rest() {
        let cut = "1,10:00:00.000001,allocate,0x1000,64,0\n1,10:00:00.000002,free,0x10";
        let trace = import("log.csv", cut.as_bytes()).unwrap();
        assert_eq!(trace.events, vec![alloc(0, 64, 0)]);
        assert_eq!(
            trace.warnings.examples,
            vec!["line 2: the log ends inside this record (its tail was never written); skipped"]
        );
        let cut = "1,10:00:00.000001,allocate,0x1000,64,0\n1,10:00:00.000002,free,0x1000,64,0x";
        let trace = import("log.csv", cut.as_bytes()).unwrap();
        assert_eq!(trace.events, vec![alloc(0, 64, 0)]);
        assert_eq!(trace.warnings.count, 1);
    }

    /// Issue 40: a log whose lines end in CR alone was one line, refused with its carriage
    /// returns in the message; a million-digit size is one bounded line naming line and column.
    #[test]
    fn cr_only_logs_read_and_huge_numbers_are_one_bounded_line() {
        let lf = import("lf.csv", LOG.as_bytes()).unwrap();
        let cr = LOG.replace("\r\n", "\n").replace('\n', "\r");
        let read = import("cr.csv", cr.as_bytes()).unwrap();
        assert_eq!(read.events, lf.events);
        let crlf = LOG.replace("\r\n", "\n").replace('\n', "\r\n");
        assert_eq!(import("crlf.csv", crlf.as_bytes()).unwrap().events, lf.events);
        let huge = format!(
            "Thread,Time,Action,Pointer,Size,Stream\r1,12:00:00.000001,allocate,0x7f00,{},0x0\r\r",
            "9".repeat(1_000_000)
        );
        let err = crate::error_line(&import("huge.csv", huge.as_bytes()).unwrap_err().to_string());
        assert!(err.starts_with("huge.csv:2: Size '999"), "{}", &err[..80]);
        assert!(err.contains("(1000000 characters) is not a byte count"), "{err}");
        assert!(err.len() < 200, "{} bytes", err.len());
        assert!(!err.contains('\r') && !err.contains('\n'));
    }

    #[test]
    fn bad_rows_name_line_and_value() {
        let log = LOG.replace("0x7f85e9000000,1000", "0x7f85e9000000,-5");
        let err = import("log.csv", log.as_bytes()).unwrap_err().to_string();
        assert_eq!(err, "log.csv:2: Size '-5' is not a byte count");
        let err = import("log.csv", b"Thread,Time\n1,2\n").unwrap_err().to_string();
        assert!(err.starts_with("log.csv:1: header is 'Thread,Time'"), "{err}");
        let log = LOG.replace("15:29:16.456213", "yesterday");
        let err = import("log.csv", log.as_bytes()).unwrap_err().to_string();
        assert_eq!(err, "log.csv:4: Time 'yesterday' is not a time of day HH:MM:SS.ffffff");
        let log = LOG.replace(
            "0x7f85e9000000,1000,0x0\n140202006878976,15:29:16.456150",
            "0xzz,1000,0x0\n1,15:29:16.456150",
        );
        let err = import("log.csv", log.as_bytes()).unwrap_err().to_string();
        assert_eq!(err, "log.csv:2: Pointer '0xzz' is not a hex address or (nil)");
        let log = LOG.replace(
            "1000,0x0\n140202006878976,15:29:16.456150",
            "1000,0xq\n1,15:29:16.456150",
        );
        let err = import("log.csv", log.as_bytes()).unwrap_err().to_string();
        assert_eq!(err, "log.csv:2: Stream '0xq' is not a stream handle");
        let err = import("log.csv", b"\n\nx1,10:00:00.000001,free,0x1000,64,0\n")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "log.csv:3: Thread 'x1' is not a thread id");
        let err = import("log.csv", b"1,10:00:00.000001,allocate,0x1000,64\n1,2\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "log.csv:1: 5 fields, an RMM log row has 6 (Thread,Time,Action,Pointer,Size,Stream)"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn tells_a_log_by_its_first_bytes() {
        for head in [
            &b"Thread,Time,Action,Pointer,Size,Stream\n"[..],
            b"Time,Action,Pointer,Size,Stream\n",
            b"\n\n1979932,14:21:19.998533,allocate,0x30a000000,256,0x2\n",
            b"1979932,14:21:19.998533,free,0x30a000000,256,0x2",
            b"7,09:00:00.000002,allocate failure,(nil),85899345920,0",
            // Cut inside the action, as a 64-byte head of a long first line may be.
            b"140202006878976,15:29:16.456137,alloc",
            b"15:29:16:456137,allocate,0x7f85e9000000,1000,140",
        ] {
            assert!(looks_like_log(head), "{}", String::from_utf8_lossy(head));
        }
        for head in [
            &b""[..],
            b"{\"vramlab_trace\": 1}",
            b"hello, world",
            b"1979932,14:21:19.998533,reallocate,0x1,2,0",
            b"1979932,yesterday,allocate,0x1,2,0",
            b"12,34,56",
        ] {
            assert!(!looks_like_log(head), "{}", String::from_utf8_lossy(head));
        }
    }

    /// Logs as the projects' documentation shows them (see shared/traces/wild/SOURCES.md).
    #[test]
    fn reads_the_logs_from_the_wild() {
        // ../shared beside the checkout, or VRAMLAB_SHARED where set.
        let dir = std::env::var_os("VRAMLAB_SHARED")
            .map_or_else(
                || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
                std::path::PathBuf::from,
            )
            .join("traces/wild");
        if !dir.is_dir() {
            // A fresh clone has no ../shared (issue 38 item 13); CI has it.
            eprintln!(
                "skipped: {} is missing (the logs from the wild sit in ../shared beside the checkout)",
                dir.display()
            );
            return;
        }
        for (file, events) in [
            // RMM's record-and-replay guide: the default stream written bare, `0`.
            ("rmm_record_replay_doc.csv", vec![alloc(0, 1048576, 0), free(0)]),
            // spark-rapids' memory debugging guide: no header, the per-thread stream `0x2`.
            ("rmm_sparkrapids_memdebug_noheader.csv", vec![alloc(0, 256, 2), free(0)]),
        ] {
            let path = dir.join(file);
            let trace = crate::trace::Trace::load(&path)
                .unwrap_or_else(|e| panic!("{} must exist and read: {e}", path.display()));
            assert_eq!(trace.source, TraceSource::RmmLog, "{file}");
            assert_eq!(trace.events, events, "{file}");
            assert_eq!(trace.warnings.count, 0, "{file}: {:?}", trace.warnings);
        }
    }
}
