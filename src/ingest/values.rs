//! Value helpers shared by the parsers: absent-value tokens, memory sizes,
//! bus ids.

/// nvidia-smi, systemd and friends print these instead of a value
/// (docs/formats/nvidia.md). They mean "no value", never a number or a name.
pub fn is_absent(value: &str) -> bool {
    matches!(
        value.trim(),
        "" | "N/A"
            | "[N/A]"
            | "Not Supported"
            | "[Not Supported]"
            | "Not available"
            | "[Not Found]"
            | "[Insufficient Permissions]"
            | "Insufficient Permissions"
            | "[Unknown Error]"
            | "Unknown Error"
            | "[GPU requires reset]"
            | "[GPU is lost]"
            | "ERR!"
            | "n/a"
            | "-"
            | "<unknown>"
            | "'<unknown>'"
            | "None"
    )
}

/// `55286MiB`, `55286 MiB`, `55286` → 55286. `None` for absent or garbled values.
pub fn parse_mib(value: &str) -> Option<u64> {
    let v = value.trim();
    if is_absent(v) {
        return None;
    }
    let digits = v.strip_suffix("MiB").unwrap_or(v).trim_end();
    digits.parse().ok()
}

/// `00000000:1A:00.0` → `0000:1a:00.0` (the kernel's and sysfs's spelling).
pub fn normalize_bus_id(value: &str) -> Option<String> {
    let v = value.trim();
    let (domain, rest) = v.split_once(':')?;
    if domain.is_empty() || !domain.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let domain = &domain[domain.len().saturating_sub(4)..];
    let rest = rest.to_ascii_lowercase();
    let valid = rest.len() == 7
        && rest.chars().enumerate().all(|(i, c)| match i {
            2 => c == ':',
            5 => c == '.',
            _ => c.is_ascii_hexdigit(),
        });
    valid.then(|| format!("{}:{rest}", domain.to_ascii_lowercase()))
}

/// The messages nvidia-smi prints instead of its output when the driver or a
/// GPU cannot be reached (docs/formats/nvidia.md). Both the table and the CSV
/// queries are replaced by them, so both parsers recognise them.
pub fn is_smi_failure_line(line: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        "Failed to initialize NVML:",
        "NVML library version:",
        "No devices were found",
        "Unable to determine the device handle for GPU",
        "Unable to determine the device handle for gpu",
        // Windows' nvidia-smi.exe (jamesstringer90/Easy-GPU-PV#276).
        "Unable to detect the device handle for GPU",
    ];
    let line = line.trim();
    PREFIXES.iter().any(|p| line.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_values() {
        assert_eq!(parse_mib("55286MiB"), Some(55286));
        assert_eq!(parse_mib(" 55286 MiB"), Some(55286));
        assert_eq!(parse_mib("1026"), Some(1026));
        assert_eq!(parse_mib("[N/A]"), None);
        assert_eq!(parse_mib("13583..."), None);
    }

    #[test]
    fn bus_ids_are_normalised() {
        assert_eq!(
            normalize_bus_id("00000000:1A:00.0").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:3b:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(normalize_bus_id("garbage"), None);
    }
}
