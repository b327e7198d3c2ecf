//! A package change from the package manager's own log: what was upgraded,
//! installed or removed, from which version to which, and by what command.
//! A driver's user-space libraries upgraded under a loaded kernel module is
//! the usual story behind "Driver/library version mismatch".

use super::Timestamp;
use crate::source::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageAction {
    Install,
    Upgrade,
    Downgrade,
    Remove,
    Purge,
    Reinstall,
}

impl PackageAction {
    pub fn name(self) -> &'static str {
        match self {
            PackageAction::Install => "install",
            PackageAction::Upgrade => "upgrade",
            PackageAction::Downgrade => "downgrade",
            PackageAction::Remove => "remove",
            PackageAction::Purge => "purge",
            PackageAction::Reinstall => "reinstall",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PackageChange {
    pub action: PackageAction,
    /// `libnvidia-common-460`, without the `:amd64` architecture.
    pub package: String,
    /// The version before (`None` for an install).
    pub from: Option<String>,
    /// The version after (`None` for a removal).
    pub to: Option<String>,
    /// The command that made the change (apt's `Commandline:`), e.g.
    /// `/usr/bin/unattended-upgrade`.
    pub by: Option<String>,
    pub time: Option<Timestamp>,
    pub span: Span,
}

impl PackageChange {
    /// Whether the package is part of NVIDIA's driver stack (kernel module,
    /// user-space libraries, utilities, fabric manager).
    pub fn is_nvidia_driver(&self) -> bool {
        let p = self.package.as_str();
        p.contains("nvidia") || p.starts_with("cuda-drivers") || p.starts_with("libcuda")
    }

    /// The driver branch version a package version carries: `460.73.01`
    /// from `460.73.01-0ubuntu0.20.04.1`, `535.183.01` from `3:535.183.01-1`.
    pub fn driver_version(version: &str) -> Option<&str> {
        let v = version.rsplit_once(':').map_or(version, |(_, v)| v);
        let v = v.split(['-', '~', '+']).next()?;
        let dotted = v.split('.').count() >= 2
            && v.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        dotted.then_some(v)
    }
}
