//! Byte sizes as people write them ("256 MiB", "1GiB", 4096) and as reports print them.

/// Parses a byte size: a plain integer or a number followed by B, KiB, MiB, GiB or TiB
/// (binary units; KB/MB/GB are read as decimal). Returns a message naming the text on failure.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let unit = unit.trim();
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(format!("'{text}' is not a byte size (unknown unit '{unit}')")),
    };
    if number.is_empty() {
        return Err(format!("'{text}' is not a byte size (no number)"));
    }
    // A whole number is read as one, exactly: through f64 a count above 2^53 would come back
    // off by one.
    if !number.contains('.') {
        let count: u64 = number
            .parse()
            .map_err(|_| format!("'{text}' is not a byte size (too large)"))?;
        return count
            .checked_mul(multiplier)
            .ok_or_else(|| format!("'{text}' is more bytes than fit in 64 bits"));
    }
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a byte size"))?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(format!("'{text}' is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Formats a byte count with the largest binary unit that keeps it readable ("1 KiB", "1.5 MiB").
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1KiB"), Ok(1024));
        assert_eq!(parse_bytes("256 MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1.5 KiB"), Ok(1536));
        assert_eq!(parse_bytes("1GB"), Ok(1_000_000_000));
        assert!(parse_bytes("-1KiB").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("0.3 B").is_err());
        assert!(parse_bytes("MiB").is_err());
    }

    #[test]
    fn formats_round_trip() {
        for bytes in [1u64, 1024, 3 << 20, 1 << 30, 1536] {
            assert_eq!(parse_bytes(&format_bytes(bytes)), Ok(bytes));
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            /// Every whole number of bytes reads back as itself, plain or with a unit it divides.
            #[test]
            fn every_byte_count_round_trips(value in any::<u64>(), unit in 0u32..5) {
                prop_assert_eq!(parse_bytes(&value.to_string()), Ok(value));
                let size = 1u64 << (10 * unit);
                let name = ["B", "KiB", "MiB", "GiB", "TiB"][unit as usize];
                let whole = value / size;
                prop_assert_eq!(parse_bytes(&format!("{whole} {name}")), Ok(whole * size));
            }

            /// What format_bytes prints reads back exactly when it printed no decimals, and within
            /// its two decimals of the unit otherwise.
            #[test]
            fn printed_sizes_read_back(value in 1u64..(1 << 52)) {
                let text = format_bytes(value);
                match parse_bytes(&text) {
                    Ok(back) if !text.contains('.') => prop_assert_eq!(back, value, "{}", text),
                    Ok(back) => {
                        let unit = 1u64 << (10 * (value.ilog2() / 10).min(4));
                        prop_assert!(back.abs_diff(value) <= unit / 200 + 1, "{} -> {}", text, back);
                    }
                    // Two decimals of a unit may not be a whole number of bytes (1.33 KiB).
                    Err(reason) => prop_assert!(reason.contains("whole number"), "{}: {}", text, reason),
                }
            }
        }
    }
}
