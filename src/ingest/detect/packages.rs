//! Detection of the package manager's logs: apt's `history.log` blocks and
//! `dpkg.log` lines.

use super::{Class, re};
use crate::ingest::Format;

re!(
    APT_LINE,
    r"^(?:Start-Date: \d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}\s*$|(?:Install|Upgrade|Downgrade|Remove|Purge|Reinstall): \S+:\S+ \()"
);
re!(
    DPKG_LINE,
    r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} (?:(?:install|upgrade|remove|purge) \S+:\S+ \S+ \S+|status (?:installed|not-installed|config-files|half-configured|half-installed|unpacked|triggers-pending|triggers-awaited) \S+ \S+|configure \S+ \S+ \S+|trigproc \S+ \S+ \S+|startup (?:archives|packages) \S+|conffile \S+ \S+)\s*$"
);

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
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
}
