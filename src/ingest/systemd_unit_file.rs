//! A systemd unit file pasted with a status (`cat /etc/systemd/system/
//! ollama.service`, `systemctl cat ollama`): `[Section]` headers,
//! `Key=Value` settings (a trailing `\` continues one), `#`/`;` comments,
//! and `systemctl cat`'s `# /etc/systemd/system/ollama.service` header
//! naming the file (and each drop-in). The settings become
//! [`UnitProperties`] (`ExecStart`, `Restart`, `Environment`, …, as
//! `systemctl show` would list them): what the unit runs and how it is
//! restarted, when no `systemctl show` was pasted. A file pasted without
//! the header names no unit: its `Description=` is what ties it to the
//! unit PID 1's `Started DESCRIPTION.` names.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, UnitProperties};

/// `[Service]`: the sections systemd.unit(5) and its type pages define.
pub(crate) static SECTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\[(?:Unit|Service|Install|Socket|Timer|Mount|Automount|Path|Slice|Scope|Swap|Network|Match|Link|NetDev)\]\s*$",
    )
    .expect("unit file section regex")
});

/// `# /etc/systemd/system/ollama.service` (and drop-ins, `….d/override.conf`).
pub(crate) static CAT_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^# (?P<path>/(?:etc|usr/lib|lib|run)/systemd/system/(?P<unit>[A-Za-z0-9:_.@\\-]+\.(?:service|socket|timer|mount|path|slice|target))(?:\.d/[^/\s]+\.conf)?)\s*$",
    )
    .expect("systemctl cat header regex")
});

static SETTING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<key>[A-Z][A-Za-z0-9]*)\s*=\s?(?P<value>.*)$").expect("unit setting regex")
});

/// Whether `line` opens a unit file.
pub(crate) fn is_unit_file_line(line: &str) -> bool {
    (line.starts_with('[') && SECTION.is_match(line))
        || (line.starts_with("# /") && CAT_HEADER.is_match(line))
}

/// Parses one segment; returns the lines it did not recognise.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut missed = Vec::new();
    let mut unit: Option<UnitProperties> = None;
    let mut in_section = false;
    let mut continued = false;
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if continued {
            continued = text.ends_with('\\');
            continue;
        }
        if let Some(c) = CAT_HEADER.captures(text) {
            let name = c["unit"].to_owned();
            if unit.as_ref().and_then(|u| u.unit.as_deref()) != Some(name.as_str()) {
                facts.unit_properties.extend(unit.take());
                unit = Some(empty(name, line.span));
            }
            continue;
        }
        if SECTION.is_match(text) {
            in_section = true;
            // A file pasted without `systemctl cat`'s header: its settings
            // belong to no named unit, but its `Description=` is what PID
            // 1's job messages (`Started DESCRIPTION.`) name it by.
            if unit.is_none() {
                unit = Some(unnamed(line.span));
            }
            continue;
        }
        if text.starts_with('#') || text.starts_with(';') {
            continue;
        }
        match SETTING.captures(text).filter(|_| in_section) {
            Some(c) => {
                continued = text.ends_with('\\');
                if let Some(u) = &mut unit {
                    let (key, value) = (&c["key"], c["value"].trim_end_matches('\\').trim());
                    match key {
                        "Description" => u.description = Some(value.to_owned()),
                        "ExecStart" => u.exec_start = Some(value.to_owned()),
                        "Restart" => u.restart = Some(value.to_owned()),
                        "KillMode" => u.kill_mode = Some(value.to_owned()),
                        _ => {}
                    }
                    u.properties
                        .insert(key.to_owned(), (value.to_owned(), line.span));
                }
            }
            None => missed.push(i),
        }
    }
    facts.unit_properties.extend(unit);
    missed
}

fn empty(unit: String, span: crate::source::Span) -> UnitProperties {
    UnitProperties {
        unit: Some(unit),
        ..unnamed(span)
    }
}

fn unnamed(span: crate::source::Span) -> UnitProperties {
    UnitProperties {
        unit: None,
        description: None,
        load_state: None,
        active_state: None,
        sub_state: None,
        result: None,
        main_pid: None,
        exec_main_pid: None,
        exec_main_code: None,
        exec_main_status: None,
        exec_start: None,
        kill_mode: None,
        restart: None,
        n_restarts: None,
        control_group: None,
        properties: BTreeMap::new(),
        span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `systemctl cat ollama` as Ollama's Linux install writes the unit
    /// (ollama/ollama docs/linux.md, "Adding Ollama as a startup service").
    #[test]
    fn a_named_unit_file_becomes_its_properties() {
        let text = "\
# /etc/systemd/system/ollama.service
[Unit]
Description=Ollama Service
After=network-online.target

[Service]
ExecStart=/usr/bin/ollama serve
User=ollama
Group=ollama
Restart=always
RestartSec=3
Environment=\"PATH=$PATH\"

[Install]
WantedBy=multi-user.target
not a setting
";
        let mut facts = Facts::default();
        let missed = read(&Line::numbered(text), &mut facts);
        assert_eq!(missed, [15]);
        let u = &facts.unit_properties[0];
        assert_eq!(u.unit.as_deref(), Some("ollama.service"));
        assert_eq!(u.exec_start.as_deref(), Some("/usr/bin/ollama serve"));
        assert_eq!(u.restart.as_deref(), Some("always"));
        assert_eq!(u.properties["User"].0, "ollama");
        // Without `systemctl cat`'s header the file is read, its settings
        // a unit's that it does not name.
        let mut facts = Facts::default();
        let text = "[Unit]\nDescription=control fan speed\n[Service]\nType=simple\n";
        assert!(read(&Line::numbered(text), &mut facts).is_empty());
        let u = &facts.unit_properties[0];
        assert_eq!(u.unit, None);
        assert_eq!(u.description.as_deref(), Some("control fan speed"));
        assert_eq!(u.properties["Type"].0, "simple");
    }
}
