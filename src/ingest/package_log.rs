//! The package manager's own logs: apt's `/var/log/apt/history.log` and
//! `/var/log/dpkg.log`. Each package change becomes a [`PackageChange`],
//! with the command that made it (apt's `Commandline:`). `dpkg -l`
//! listings and `modinfo` output are recognised here too; their driver
//! versions reach the rules through the lines themselves
//! (`nvml-driver-library-mismatch` reads `ii  nvidia-…` rows).
//!
//! ```text
//! Start-Date: 2021-04-24  06:50:54
//! Commandline: /usr/bin/unattended-upgrade
//! Upgrade: libnvidia-common-460:amd64 (460.56-0ubuntu0.20.04.1, 460.73.01-0ubuntu0.20.04.1)
//! End-Date: 2021-04-24  06:50:54
//!
//! 2021-04-24 06:50:54 upgrade libnvidia-compute-460:amd64 460.56-0ubuntu0.20.04.1 460.73.01-0ubuntu0.20.04.1
//! 2021-04-24 06:50:54 status half-configured libnvidia-compute-460:amd64 460.73.01-0ubuntu0.20.04.1
//! ```

use std::sync::LazyLock;

use chrono::NaiveDateTime;
use regex::Regex;

use super::Line;
use crate::model::{Facts, PackageAction, PackageChange, Timestamp};

static APT_DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:Start|End)-Date:\s+(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})\s+(?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})\s*$",
    )
    .expect("apt date regex")
});
static APT_LIST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<action>Install|Upgrade|Downgrade|Remove|Purge|Reinstall):\s+(?P<list>.*)$")
        .expect("apt list regex")
});
/// One entry of an apt list: `name:arch (v1, v2)`, `name:arch (v, automatic)`.
static APT_ENTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<pkg>[^\s,()]+) \((?P<inner>[^)]*)\)").expect("apt entry regex")
});
static DPKG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}) (?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2}) (?P<verb>install|upgrade|remove|purge|status|configure|trigproc|startup|conffile) (?P<rest>.*)$",
    )
    .expect("dpkg regex")
});

/// A `dpkg -l` row: `ii  nvidia-smi  525.85.12-1  amd64  NVIDIA System …`.
static DPKG_L_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[uihrp][ncUCFHWti][ R]?\s+\S+\s+\S+\s+\S+(?:\s+.*)?$").expect("dpkg -l regex")
});

/// `modinfo`'s fields (kmod tools/modinfo.c prints every `.modinfo` tag
/// and these it adds: `filename`, `name`, `sig_*`, `signer`, `signature`).
static MODINFO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:filename|name|version|license|description|author|alias|srcversion|depends|retpoline|intree|vermagic|sig_id|signer|sig_key|sig_hashalgo|signature|parm|firmware|import_ns|supported|softdep|scmversion|built-in):\s",
    )
    .expect("modinfo regex")
});

/// A line of `modinfo`'s output: a field, or the hex of a signature or key
/// continued on the next lines (`\t\t4A:1F:…`).
pub(crate) fn is_modinfo(line: &str) -> bool {
    MODINFO.is_match(line)
        || (line.starts_with([' ', '\t'])
            && line.trim().len() >= 5
            && line
                .trim()
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':'))
}

/// `dpkg -l`'s header lines.
const DPKG_L_HEADER: [&str; 5] = ["Desired=", "| Status=", "|/ Err?=", "||/ Name", "+++-"];

/// Parses apt history and dpkg log lines; returns the number of lines it did
/// not recognise.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut by: Option<String> = None;
    let mut time: Option<Timestamp> = None;
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim_end();
        if text.trim().is_empty() {
            continue;
        }
        if let Some(c) = APT_DATE.captures(text) {
            if text.starts_with("Start") {
                by = None;
                time = timestamp(&c["date"], &c["time"]);
            }
            continue;
        }
        if let Some(command) = text.strip_prefix("Commandline: ") {
            by = Some(command.trim().to_owned());
            continue;
        }
        if text.starts_with("Requested-By: ") || text.starts_with("Error: ") {
            continue;
        }
        if let Some(c) = APT_LIST.captures(text) {
            let action = match &c["action"] {
                "Install" => PackageAction::Install,
                "Upgrade" => PackageAction::Upgrade,
                "Downgrade" => PackageAction::Downgrade,
                "Remove" => PackageAction::Remove,
                "Purge" => PackageAction::Purge,
                _ => PackageAction::Reinstall,
            };
            for entry in APT_ENTRY.captures_iter(&c["list"]) {
                let versions: Vec<&str> = entry["inner"]
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && *v != "automatic")
                    .collect();
                let (from, to) = match (action, versions.as_slice()) {
                    (PackageAction::Upgrade | PackageAction::Downgrade, [a, b, ..]) => {
                        (Some(*a), Some(*b))
                    }
                    (PackageAction::Remove | PackageAction::Purge, [a, ..]) => (Some(*a), None),
                    (_, [a, ..]) => (None, Some(*a)),
                    (_, []) => (None, None),
                };
                facts.package_changes.push(PackageChange {
                    action,
                    package: package_name(&entry["pkg"]),
                    from: from.map(str::to_owned),
                    to: to.map(str::to_owned),
                    by: by.clone(),
                    time,
                    span: line.span,
                });
            }
            continue;
        }
        if DPKG_L_HEADER.iter().any(|h| text.starts_with(h))
            || is_modinfo(text)
            || DPKG_L_ROW.is_match(text)
        {
            continue;
        }
        if let Some(c) = DPKG.captures(text) {
            let action = match &c["verb"] {
                "install" => Some(PackageAction::Install),
                "upgrade" => Some(PackageAction::Upgrade),
                "remove" => Some(PackageAction::Remove),
                "purge" => Some(PackageAction::Purge),
                _ => None,
            };
            let words: Vec<&str> = c["rest"].split_whitespace().collect();
            if let (Some(action), [pkg, from, to]) = (action, words.as_slice()) {
                let version = |v: &str| (v != "<none>").then(|| v.to_owned());
                facts.package_changes.push(PackageChange {
                    action,
                    package: package_name(pkg),
                    from: version(from),
                    to: version(to),
                    by: None,
                    time: timestamp(&c["date"], &c["time"]),
                    span: line.span,
                });
            }
            continue;
        }
        missed.push(i);
    }
    missed
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// `libnvidia-common-460` from `libnvidia-common-460:amd64`.
fn package_name(raw: &str) -> String {
    raw.split_once(':').map_or(raw, |(name, _)| name).to_owned()
}

fn timestamp(date: &str, time: &str) -> Option<Timestamp> {
    let local =
        NaiveDateTime::parse_from_str(&format!("{date} {time}"), "%Y-%m-%d %H:%M:%S").ok()?;
    Some(Timestamp {
        local,
        offset_secs: None,
        year_known: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim from https://github.com/lyulyul/shine-cluster/issues/30
    /// (fixtures/real/010): the upgrade behind a driver/library mismatch.
    const HISTORY: &str = "\
Start-Date: 2021-04-24  06:50:54
Commandline: /usr/bin/unattended-upgrade
Upgrade: libnvidia-common-460:amd64 (460.56-0ubuntu0.20.04.1, 460.73.01-0ubuntu0.20.04.1)
End-Date: 2021-04-24  06:50:54
";

    #[test]
    fn an_apt_history_block_names_the_command_and_both_versions() {
        let mut facts = Facts::default();
        assert_eq!(parse(&Line::numbered(HISTORY), &mut facts), 0);
        let [change] = facts.package_changes.as_slice() else {
            panic!("one change: {:?}", facts.package_changes);
        };
        assert_eq!(change.action, PackageAction::Upgrade);
        assert_eq!(change.package, "libnvidia-common-460");
        assert_eq!(change.from.as_deref(), Some("460.56-0ubuntu0.20.04.1"));
        assert_eq!(change.to.as_deref(), Some("460.73.01-0ubuntu0.20.04.1"));
        assert_eq!(change.by.as_deref(), Some("/usr/bin/unattended-upgrade"));
        assert_eq!(change.span.line, 3);
        assert!(change.is_nvidia_driver());
        assert_eq!(
            PackageChange::driver_version(change.to.as_deref().unwrap()),
            Some("460.73.01")
        );
    }

    #[test]
    fn several_packages_on_one_line_and_installs_marked_automatic() {
        let mut facts = Facts::default();
        let text = "Start-Date: 2024-05-02  06:12:01\nCommandline: apt-get -y upgrade\nRequested-By: ubuntu (1000)\nInstall: nvidia-firmware-535-535.171.04:amd64 (535.171.04-0ubuntu0.22.04.1, automatic)\nUpgrade: libnvidia-compute-535:amd64 (535.161.08-0ubuntu2.22.04.1, 535.171.04-0ubuntu0.22.04.1), nvidia-utils-535:amd64 (535.161.08-0ubuntu2.22.04.1, 535.171.04-0ubuntu0.22.04.1)\nEnd-Date: 2024-05-02  06:12:40\n";
        assert_eq!(parse(&Line::numbered(text), &mut facts), 0);
        let names: Vec<(&str, PackageAction, Option<&str>)> = facts
            .package_changes
            .iter()
            .map(|c| (c.package.as_str(), c.action, c.to.as_deref()))
            .collect();
        assert_eq!(
            names,
            vec![
                (
                    "nvidia-firmware-535-535.171.04",
                    PackageAction::Install,
                    Some("535.171.04-0ubuntu0.22.04.1")
                ),
                (
                    "libnvidia-compute-535",
                    PackageAction::Upgrade,
                    Some("535.171.04-0ubuntu0.22.04.1")
                ),
                (
                    "nvidia-utils-535",
                    PackageAction::Upgrade,
                    Some("535.171.04-0ubuntu0.22.04.1")
                ),
            ]
        );
    }

    /// `grep nvidia /var/log/dpkg.log` as a public postmortem blog printed
    /// it ("记一次生产事故", 2022-05-19), one line of another log added.
    #[test]
    fn dpkg_log_lines() {
        let text = "2022-05-19 06:04:29 upgrade nvidia-driver-510:amd64 510.60.02-0ubuntu0.21.10.2 510.73.05-0ubuntu0.21.10.1\n2022-05-19 06:04:29 status half-configured nvidia-driver-510:amd64 510.60.02-0ubuntu0.21.10.2\n2022-05-19 06:04:43 configure libnvidia-compute-510:amd64 510.73.05-0ubuntu0.21.10.1 <none>\nsomething else\n";
        let mut facts = Facts::default();
        assert_eq!(parse(&Line::numbered(text), &mut facts), 1);
        let [change] = facts.package_changes.as_slice() else {
            panic!("one change: {:?}", facts.package_changes);
        };
        assert_eq!(change.package, "nvidia-driver-510");
        assert_eq!(change.from.as_deref(), Some("510.60.02-0ubuntu0.21.10.2"));
        assert_eq!(change.to.as_deref(), Some("510.73.05-0ubuntu0.21.10.1"));
        assert!(change.time.is_some());
    }

    #[test]
    fn driver_versions_from_package_versions() {
        assert_eq!(
            PackageChange::driver_version("3:535.183.01-1"),
            Some("535.183.01")
        );
        assert_eq!(
            PackageChange::driver_version("550.54.15-0ubuntu1"),
            Some("550.54.15")
        );
        assert_eq!(PackageChange::driver_version("abc"), None);
    }
}
