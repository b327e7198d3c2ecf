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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused {} {:?}: {}", self.kind, self.value, self.reason)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
