//! Detection of the package manager's logs and listings: apt's
//! `history.log` blocks, `dpkg.log` lines, `dpkg -l` (its header and
//! rows) and `modinfo` of a kernel module: what is installed, next to what
//! changed.

use super::{Class, gated};
use crate::ingest::Format;

gated!(
    APT_LINE,
    |l| matches!(
        l.as_bytes().first(),
        Some(b'S' | b'I' | b'U' | b'D' | b'R' | b'P')
    ),
    r"^(?:Start-Date: [0-9]{4}-[0-9]{2}-[0-9]{2}\s+[0-9]{2}:[0-9]{2}:[0-9]{2}\s*$|(?:Install|Upgrade|Downgrade|Remove|Purge|Reinstall): \S+:\S+ \()"
);
gated!(
    DPKG_LINE,
    |l| l
        .as_bytes()
        .get(..5)
        .is_some_and(|p| p[..4].iter().all(u8::is_ascii_digit) && p[4] == b'-'),
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} (?:(?:install|upgrade|remove|purge) \S+:\S+ \S+ \S+|status (?:installed|not-installed|config-files|half-configured|half-installed|unpacked|triggers-pending|triggers-awaited) \S+ \S+|configure \S+ \S+ \S+|trigproc \S+ \S+ \S+|startup (?:archives|packages) \S+|conffile \S+ \S+)\s*$"
);

gated!(
    DPKG_L_ROW,
    |l| {
        matches!(l.as_bytes().first(), Some(b'u' | b'i' | b'h' | b'r' | b'p'))
            && matches!(
                l.as_bytes().get(1),
                Some(b'n' | b'c' | b'U' | b'C' | b'F' | b'H' | b'W' | b't' | b'i')
            )
    },
    r"^[uihrp][ncUCFHWti][ R]?\s+\S+\s+[0-9]\S*\s+(?:amd64|arm64|i386|armhf|all|ppc64el|s390x|riscv64)\b"
);
gated!(
    MODINFO_FILENAME,
    |l| l.starts_with("filename:"),
    r"^filename:\s+/\S+\.ko(?:\.(?:xz|zst|gz))?\s*$"
);

/// `dpkg -l`'s header, before its rows.
const DPKG_L_HEADER: [&str; 5] = ["Desired=", "| Status=", "|/ Err?=", "||/ Name", "+++-"];

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    if line.starts_with("Desired=Unknown/Install") {
        return Some(Class::Strong(Format::PackageLog, "dpkg -l header"));
    }
    if MODINFO_FILENAME.is_match(line) {
        return Some(Class::Strong(Format::PackageLog, "modinfo output"));
    }
    if current == Some(Format::PackageLog)
        && (DPKG_L_HEADER.iter().any(|h| line.starts_with(h))
            || crate::ingest::package_log::is_modinfo(line))
    {
        return Some(Class::Continue);
    }
    if DPKG_L_ROW.is_match(line) {
        return Some(Class::Strong(Format::PackageLog, "dpkg -l row"));
    }
    if current == Some(Format::PackageLog)
        && (line.starts_with("Commandline: ")
            || line.starts_with("Requested-By: ")
            || line.starts_with("End-Date: "))
    {
        return Some(Class::Continue);
    }
    if APT_LINE.is_match(line) {
        return Some(Class::Strong(Format::PackageLog, "apt history.log entry"));
    }
    DPKG_LINE
        .is_match(line)
        .then_some(Class::Strong(Format::PackageLog, "dpkg.log line"))
}

/// Each gated regex, for the test that its gate lets through every line
/// it matches.
#[cfg(test)]
pub(super) fn gated() -> Vec<(&'static str, &'static super::Gated)> {
    vec![
        ("APT_LINE", &APT_LINE),
        ("DPKG_LINE", &DPKG_LINE),
        ("DPKG_L_ROW", &DPKG_L_ROW),
        ("MODINFO_FILENAME", &MODINFO_FILENAME),
    ]
}

#[cfg(test)]
mod tests {
    use crate::ingest::{Format, segment};
    use crate::source::{Source, SourceId};

    #[test]
    fn an_apt_block_after_other_output_is_its_own_segment() {
        // fixtures/real/010 (https://github.com/lyulyul/shine-cluster/issues/30).
        let text = "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n\nStart-Date: 2021-04-24  06:50:54\nCommandline: /usr/bin/unattended-upgrade\nUpgrade: libnvidia-common-460:amd64 (460.56-0ubuntu0.20.04.1, 460.73.01-0ubuntu0.20.04.1)\nEnd-Date: 2021-04-24  06:50:54\n2021-04-24 06:50:54 upgrade libnvidia-compute-460:amd64 460.56-0ubuntu0.20.04.1 460.73.01-0ubuntu0.20.04.1\n";
        let source = Source::new("t", text.as_bytes());
        let got: Vec<(Format, u32, u32)> = segment(SourceId(0), &source)
            .into_iter()
            .map(|s| (s.format, s.first_line, s.last_line))
            .collect();
        assert_eq!(got.last(), Some(&(Format::PackageLog, 4, 8)));
    }

    fn formats(text: &str) -> Vec<(Format, u32, u32)> {
        let source = Source::new("t", text.as_bytes());
        segment(SourceId(0), &source)
            .into_iter()
            .map(|s| (s.format, s.first_line, s.last_line))
            .collect()
    }

    #[test]
    fn a_dpkg_listing_with_its_header_is_one_segment() {
        // fixtures/real/011 (https://github.com/NVIDIA/nvidia-docker/issues/1730).
        let text = "Desired=Unknown/Install/Remove/Purge/Hold\n| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n||/ Name           Version      Architecture Description\n+++-==============-============-============-=================================================\nii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface\n";
        assert_eq!(formats(text), vec![(Format::PackageLog, 1, 6)]);
    }

    #[test]
    fn modinfo_after_a_prompt_is_its_own_segment() {
        // fixtures/real/085 (https://github.com/Frogging-Family/nvidia-all/issues/394).
        let text = "$ modinfo nvidia\nfilename:       /lib/modules/7.0.12-zen1-1-zen/updates/dkms/nvidia.ko.zst\nimport_ns:      DMA_BUF\nalias:          char-major-195-*\ndescription:    NVIDIA core GPU kernel module\nversion:        595.80\nsupported:      external\nlicense:        Dual MIT/GPL\nfirmware:       nvidia/595.80/gsp_tu10x.bin\n";
        assert_eq!(formats(text).last(), Some(&(Format::PackageLog, 2, 9)));
    }
}
