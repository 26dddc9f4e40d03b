//! RMM `logging_resource_adaptor` logs: CSV with the header `Thread,Time,Action,Pointer,Size,Stream`,
//! times as `HH:MM:SS.ffffff`, pointers and streams in hex, sizes in decimal bytes.

use super::{Pairing, Trace, TraceSource};
use crate::error::{Error, Result};

const HEADER: [&str; 6] = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"];

pub(super) fn import(name: &str, bytes: &[u8]) -> Result<Trace> {
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| Error::Invalid(format!("{name}:1: {e}")))?
        .clone();
    if header.iter().collect::<Vec<_>>() != HEADER {
        return Err(Error::Invalid(format!(
            "{name}:1: header is '{}', an RMM log has '{}'",
            header.iter().collect::<Vec<_>>().join(","),
            HEADER.join(",")
        )));
    }
    let mut pairing = Pairing::default();
    // One record reused for every row: a ten-million-row log allocates nothing per row.
    let mut row = csv::StringRecord::new();
    for index in 0.. {
        let line = index + 2;
        let more = reader
            .read_record(&mut row)
            .map_err(|e| Error::Invalid(format!("{name}:{line}: {e}")))?;
        if !more {
            break;
        }
        if row.len() != HEADER.len() {
            return Err(Error::Invalid(format!(
                "{name}:{line}: {} fields, an RMM log row has {}",
                row.len(),
                HEADER.len()
            )));
        }
        let bad = |column: &str, value: &str, want: &str| {
            Error::Invalid(format!("{name}:{line}: {column} '{value}' is not {want}"))
        };
        let time = &row[1];
        if !is_clock_time(time) {
            return Err(bad("Time", time, "a time of day HH:MM:SS.ffffff"));
        }
        let pointer = parse_hex(&row[3]).ok_or_else(|| bad("Pointer", &row[3], "a hex address"))?;
        let size: u64 = row[4].parse().map_err(|_| bad("Size", &row[4], "a byte count"))?;
        let stream = parse_hex(&row[5]).ok_or_else(|| bad("Stream", &row[5], "a hex stream handle"))?;
        match &row[2] {
            "allocate" => pairing.alloc(index, pointer, size, stream),
            "free" => pairing.free(index, pointer, Some(size)),
            // The recorded program's own failures: the request never got memory, nothing to pair.
            "allocate failure" => {}
            other => return Err(bad("Action", other, "'allocate', 'free' or 'allocate failure'")),
        }
    }
    Ok(pairing.finish(name.to_string(), TraceSource::RmmLog, Vec::new()))
}

fn parse_hex(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))?;
    u64::from_str_radix(digits, 16).ok()
}

/// `HH:MM:SS.f...` (checked byte by byte: this runs once per row).
fn is_clock_time(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    b.len() > 9
        && b[2] == b':'
        && b[5] == b':'
        && b[8] == b'.'
        && digits(0..2)
        && digits(3..5)
        && digits(6..8)
        && digits(9..b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;

    const LOG: &str = "Thread,Time,Action,Pointer,Size,Stream
140202006878976,15:29:16.456137,allocate,0x7f85e9000000,1000,0x0
140202006878976,15:29:16.456150,allocate failure,0x0,99999999999,0x0
140202006878976,15:29:16.456213,free,0x7f85e9000000,1000,0x0
140202006878976,15:29:16.456300,free,0x7f85e9000000,1000,0x0
";

    #[test]
    fn pairs_and_counts_a_double_free() {
        let trace = import("log.csv", LOG.as_bytes()).unwrap();
        assert_eq!(
            trace.events,
            vec![
                TraceEvent::Alloc {
                    id: 0,
                    size: 1000,
                    stream: 0
                },
                TraceEvent::Free { id: 0 }
            ]
        );
        assert_eq!(trace.warnings.count, 1);
        assert!(trace.warnings.examples[0].starts_with("event 3: free of 0x7f85e9000000"));
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
        assert!(err.starts_with("log.csv:4: Time 'yesterday'"), "{err}");
    }
}
