//! Memory sizes and counts as servers print them, to bytes and integers.
//!
//! Every unit is binary (docs/formats/servers.md): PyTorch's `GiB`, SGLang's `GB`
//! (bytes / 2^30 labelled GB), vLLM's `GB` (≤ 0.7) and `GiB`.

/// `40.12` + `GiB` → bytes. `None` for an unknown unit or a bad number.
pub(super) fn size_bytes(number: &str, unit: &str) -> Option<u64> {
    let scale: f64 = match unit {
        "bytes" | "B" => 1.0,
        "KiB" | "KB" | "kB" => 1024.0,
        "MiB" | "MB" => 1024.0 * 1024.0,
        "GiB" | "GB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" | "TB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    scaled(number, scale)
}

/// `78.35` (SGLang's `GB`, really GiB) → bytes.
pub(super) fn gib_bytes(number: &str) -> Option<u64> {
    scaled(number, 1024.0 * 1024.0 * 1024.0)
}

/// `40.12 GiB`, `20.00MiB`, `512 bytes` → bytes.
pub(super) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    size_bytes(number, unit.trim())
}

/// `412,336` → 412336.
pub(super) fn count(text: &str) -> Option<u64> {
    text.replace(',', "").parse().ok()
}

fn scaled(number: &str, scale: f64) -> Option<u64> {
    let value: f64 = number.trim().parse().ok()?;
    let bytes = (value * scale).round();
    (value.is_finite() && value >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_whatever_the_label() {
        assert_eq!(parse_size("40.12 GiB"), Some(43_078_521_979));
        assert_eq!(parse_size("20.00 MiB"), Some(20 * 1024 * 1024));
        assert_eq!(parse_size("512 bytes"), Some(512));
        assert_eq!(parse_size("30.85GiB"), Some(33_124_935_270));
        assert_eq!(gib_bytes("1"), Some(1 << 30));
        assert_eq!(size_bytes("2", "GB"), Some(2 << 30));
        assert_eq!(parse_size("1.5 furlongs"), None);
        assert_eq!(parse_size("-1 GiB"), None);
        assert_eq!(parse_size("1e400 GiB"), None);
        assert_eq!(count("412,336"), Some(412_336));
    }
}
