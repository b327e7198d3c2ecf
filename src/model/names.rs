//! Validated values: the only way a value read from a log can reach a
//! remediation script. Logs are hostile input; these types make "checked" a
//! property of the type rather than of the call site.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// Why a value from a log was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidValue {
    pub kind: &'static str,
    pub value: String,
    pub reason: &'static str,
}

impl fmt::Display for InvalidValue {
    /// The value is shown quoted, in printable ASCII: a control character
    /// or a look-alike letter is spelled out (`\u{435}`), so a reader sees
    /// why it was refused.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused {} \"", self.kind)?;
        for c in self.value.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                '\n' => f.write_str("\\n")?,
                c if c == ' ' || c.is_ascii_graphic() => write!(f, "{c}")?,
                c => write!(f, "\\u{{{:x}}}", c as u32)?,
            }
        }
        write!(f, "\": {}", self.reason)
    }
}

/// A process ID that may be signalled: an integer above 1 (never the kernel's
/// idle task 0, never init 1) and within Linux's `pid_max` limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(u32);

impl Pid {
    /// Linux's upper bound for `/proc/sys/kernel/pid_max` (2^22).
    const MAX: u32 = 4_194_304;

    pub fn new(pid: u32) -> Result<Pid, InvalidValue> {
        let invalid = |reason| InvalidValue {
            kind: "PID",
            value: pid.to_string(),
            reason,
        };
        match pid {
            0 | 1 => Err(invalid("PIDs 0 and 1 are never signalled")),
            p if p > Pid::MAX => Err(invalid("above the kernel's pid_max limit")),
            p => Ok(Pid(p)),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A systemd unit name, checked against systemd's unit-name grammar
/// (`unit_name_is_valid`): `prefix[@instance].type`, at most 255 bytes, from
/// the characters `[A-Za-z0-9:_.\-]` plus one `@`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnitName(String);

static UNIT_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        [A-Za-z0-9:_.\\-]+                      # prefix
        (?:@[A-Za-z0-9:_.\\-]*)?                # optional instance
        \.(?:service|socket|device|mount|automount|swap|target|path|timer|slice|scope)
        $",
    )
    .expect("unit-name regex")
});

impl UnitName {
    pub fn new(name: &str) -> Result<UnitName, InvalidValue> {
        let invalid = |reason| InvalidValue {
            kind: "unit name",
            value: name.chars().take(80).collect(),
            reason,
        };
        if name.len() > 255 {
            return Err(invalid("longer than 255 bytes"));
        }
        if name.starts_with('-') {
            return Err(invalid("starts with '-'"));
        }
        if !UNIT_NAME.is_match(name) {
            return Err(invalid("does not match systemd's unit-name grammar"));
        }
        Ok(UnitName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UnitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An NVML GPU (or MIG) UUID, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuUuid(String);

static GPU_UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:GPU|MIG)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
        .expect("uuid regex")
});

impl GpuUuid {
    pub fn new(uuid: &str) -> Result<GpuUuid, InvalidValue> {
        if GPU_UUID.is_match(uuid) {
            Ok(GpuUuid(uuid.to_owned()))
        } else {
            Err(InvalidValue {
                kind: "GPU UUID",
                value: uuid.chars().take(80).collect(),
                reason: "not of the form GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GpuUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A process start time as `ps -o lstart` prints it, `Tue Nov 24 14:02:17
/// 2026` (C locale, the host's local time), normalised to single spaces. The
/// script compares it with the live process's start time: a PID whose start
/// time differs was reused by another process.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StartTime(String);

static LSTART: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\x20
        (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\x20
        (?:[1-9]|[12][0-9]|3[01])\x20
        (?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\x20
        (?:19[7-9][0-9]|2[0-9]{3})
        $",
    )
    .expect("lstart regex")
});

impl StartTime {
    pub fn new(text: &str) -> Result<StartTime, InvalidValue> {
        let normalised = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.len() <= 64 && LSTART.is_match(&normalised) {
            Ok(StartTime(normalised))
        } else {
            Err(InvalidValue {
                kind: "start time",
                value: text.chars().take(80).collect(),
                reason: "not of the form `ps -o lstart` prints (Tue Nov 24 14:02:17 2026)",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StartTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name a group of processes shares at the start of its command line, a
/// process title such as `sglang::` (`sglang::scheduler_TP3`,
/// `sglang::detokenizer`) or `VLLM::`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessName(String);

static PROCESS_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9][A-Za-z0-9_:.\-]{1,63}$").expect("name regex"));

impl ProcessName {
    pub fn new(name: &str) -> Result<ProcessName, InvalidValue> {
        if PROCESS_NAME.is_match(name) {
            Ok(ProcessName(name.to_owned()))
        } else {
            Err(InvalidValue {
                kind: "process name",
                value: name.chars().take(80).collect(),
                reason: "not 2-64 characters from [A-Za-z0-9_:.-]",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProcessName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A host name by RFC 1123: dot-separated labels of letters, digits and `-`
/// (not at either end of a label), at most 253 bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hostname(String);

static HOST_LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?$").expect("label regex")
});

impl Hostname {
    pub fn new(name: &str) -> Result<Hostname, InvalidValue> {
        if name.len() <= 253 && name.split('.').all(|l| HOST_LABEL.is_match(l)) {
            Ok(Hostname(name.to_owned()))
        } else {
            Err(InvalidValue {
                kind: "host name",
                value: name.chars().take(80).collect(),
                reason: "not an RFC 1123 host name",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Hostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A TCP port a server listens on: 1-65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Port(u16);

impl Port {
    pub fn new(port: u32) -> Result<Port, InvalidValue> {
        match u16::try_from(port) {
            Ok(p) if p > 0 => Ok(Port(p)),
            _ => Err(InvalidValue {
                kind: "port",
                value: port.to_string(),
                reason: "not in 1-65535",
            }),
        }
    }

    pub fn get(self) -> u16 {
        self.0
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A server command-line flag and its value, `--mem-fraction-static 0.80`:
/// a long option of lower-case words, and a value without spaces, quotes or
/// shell syntax.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerFlag {
    flag: String,
    value: String,
}

static FLAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^--[a-z0-9][a-z0-9\-]{0,63}$").expect("flag regex"));
static FLAG_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9._:/,=+@\-]{1,128}$").expect("value regex"));

impl ServerFlag {
    pub fn new(flag: &str, value: &str) -> Result<ServerFlag, InvalidValue> {
        if !FLAG.is_match(flag) {
            return Err(InvalidValue {
                kind: "server flag",
                value: flag.chars().take(80).collect(),
                reason: "not a long option (--lower-case-words)",
            });
        }
        if !FLAG_VALUE.is_match(value) {
            return Err(InvalidValue {
                kind: "server flag value",
                value: value.chars().take(80).collect(),
                reason: "not 1-128 characters from [A-Za-z0-9._:/,=+@-]",
            });
        }
        Ok(ServerFlag {
            flag: flag.to_owned(),
            value: value.to_owned(),
        })
    }

    pub fn flag(&self) -> &str {
        &self.flag
    }

    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for ServerFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.flag, self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_spell_out_what_a_reader_could_not_see() {
        let e = UnitName::new("ddtree-qw\u{435}n.service\n\x1b[2J\"x").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"refused unit name "ddtree-qw\u{435}n.service\n\u{1b}[2J\"x": does not match systemd's unit-name grammar"#
        );
    }

    #[test]
    fn pids_zero_one_and_absurd_values_are_refused() {
        assert!(Pid::new(0).is_err());
        assert!(Pid::new(1).is_err());
        assert!(Pid::new(5_000_000).is_err());
        assert_eq!(Pid::new(20629).unwrap().get(), 20629);
    }

    #[test]
    fn unit_names_follow_systemd_grammar() {
        for ok in [
            "sglang-k26.service",
            "ddtree-qwen.service",
            "getty@tty1.service",
            "docker-0123abcd.scope",
            "system-serve\\x2dmodel.slice",
        ] {
            assert!(UnitName::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "x.service; rm -rf /",
            "$(reboot).service",
            "`id`.service",
            "a b.service",
            "evil\n.service",
            "noext",
            "-flag.service",
            "ѕglang.service", // Cyrillic look-alike
            "'q'.service",
        ] {
            assert!(UnitName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn gpu_uuids_have_nvml_shape() {
        assert!(GpuUuid::new("GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14").is_ok());
        assert!(GpuUuid::new("GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d1$").is_err());
    }
    #[test]
    fn start_times_have_lstart_shape() {
        assert_eq!(
            StartTime::new("Mon Nov  9 07:12:31 2026").unwrap().as_str(),
            "Mon Nov 9 07:12:31 2026"
        );
        for bad in [
            "09:38",
            "Nov27",
            "Tue Nov 24 14:02:17 2026; reboot",
            "Tue Nov 24 14:02:17 $(id)",
            "Tue Nov 32 14:02:17 2026",
            "Tue Nov 24 24:02:17 2026",
        ] {
            assert!(StartTime::new(bad).is_err(), "{bad:?}");
        }
        // Whitespace (a newline too) is normalised: what reaches a script is
        // the five fields separated by single spaces.
        assert_eq!(
            StartTime::new("Tue\nNov 24 14:02:17 2026\n")
                .unwrap()
                .as_str(),
            "Tue Nov 24 14:02:17 2026"
        );
    }

    #[test]
    fn process_names_hosts_ports_and_flags() {
        assert!(ProcessName::new("sglang::").is_ok());
        assert!(ProcessName::new("VLLM::").is_ok());
        for bad in ["", "s", "sglang::$(id)", "ѕglang::", "a b", "-x", "`id`"] {
            assert!(ProcessName::new(bad).is_err(), "{bad:?}");
        }
        assert!(Hostname::new("ct200").is_ok());
        assert!(Hostname::new("gpu-7.dc1.example.com").is_ok());
        for bad in [
            "",
            "ct200$(id)",
            "ct200;reboot",
            "-ct200",
            "ct200-",
            "ct\n200",
            "сt200",
            &"a".repeat(64),
        ] {
            assert!(Hostname::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Port::new(30000).unwrap().get(), 30000);
        assert!(Port::new(0).is_err());
        assert!(Port::new(70000).is_err());
        assert!(ServerFlag::new("--mem-fraction-static", "0.80").is_ok());
        assert!(ServerFlag::new("--model-path", "/models/Qwen2.5-32B").is_ok());
        for (flag, value) in [
            ("--mem-fraction-static", "0.80; reboot"),
            ("--x", "$(id)"),
            ("--x", "a b"),
            ("-x", "1"),
            ("--X", "1"),
            ("--x;", "1"),
            ("--x", "'1'"),
        ] {
            assert!(ServerFlag::new(flag, value).is_err(), "{flag} {value}");
        }
    }
}
