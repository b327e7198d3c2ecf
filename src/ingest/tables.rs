//! Tables drawn in text, read by their header whatever their columns: the
//! boxes `dcgmi` (discovery, health, diag), Triton's model and backend
//! listings and GPUStack's CLI draw (`+----+----+` borders, `| a | b |`
//! rows), Markdown tables (`|---|---|` under the header), `dcgmi dmon`'s
//! columns (`#Entity  XIDER`, `ID`, then `GPU 1  120`), column listings
//! under an upper-case header (`squeue`, nvtop's process list, whose rows
//! are GPU processes: PID, GPU, memory; `docker ps`, whose published ports
//! are listening sockets of their container), `nvidia-smi topo -m`'s
//! matrix and its legends, and the JSON a tool prints of its own (`dcgmi
//! health -c -j`), column listings under a title-case header whose titles
//! stand two spaces apart, maybe underlined by a rule of dashes (`kubectl
//! describe`'s events: `Type  Reason  Age  From  Message`, then `----
//! ------`), socket listings whose rows say what they are without a header
//! (`netstat -tlnp` and its `Active Internet connections` title, `lsof -i`
//! rows, also under `grep -n`'s line numbers: a listening row is a socket
//! and its holder) and `key : value` reports aligned by padding
//! (`kubectl describe`'s `State:          Waiting`, a script's `Runner
//! processes detected          : 3`). A row is read when a border, a
//! separator or a header of its table came first and it has as many cells
//! as its header; a lone `| x |` line is not a table.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{
    Facts, GpuHealth, GpuMention, GpuProcessRecord, GpuRecord, Listener, Reading, UnitStatus,
};
use crate::source::Span;

/// `+----+---+`, `+====+`, `|----|:---:|`.
static BORDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:\+[-=+]{3,}\+|\|(?:\s*:?-{3,}:?\s*\|)+)\s*$").expect("table border regex")
});

/// A rule of a `dcgmi diag` box that titles the section under it:
/// `|-----  Metadata  ----------+------|`, `+-----  Hardware  ---+---+`.
static BOX_SECTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[|+]-{2,} +[A-Za-z][A-Za-z0-9 /&-]*? +-{2,}\+-{3,}[|+]$")
        .expect("box section regex")
});

/// The header rows of the boxes `dcgmi` draws, by their titles: `dcgmi
/// discovery -l` (`| GPU ID | Device Information |`) and `dcgmi diag`
/// (`| Diagnostic | Result |`); `dcgmi stats`'s one-cell title is
/// [`is_stats_title`]. A box with a header of its own is read by these
/// lines, not by the nvidia-smi table's grammar.
const DCGMI_BOX_HEADERS: [(&[&str], DcgmiBox); 2] = [
    (&["GPU ID", "Device Information"], DcgmiBox::Discovery),
    (&["Diagnostic", "Result"], DcgmiBox::Diag),
];

/// `| GPU1: Pass |`, `| GPU0: Fail |`: a `dcgmi diag` result per GPU
/// (DCGM 4).
static DIAG_GPU_RESULT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^GPU(?P<index>[0-9]{1,3}): (?:Pass|Fail|Warn|Skip)").expect("diag gpu regex")
});

/// A row of `systemctl list-units` (`systemctl --failed`), with or
/// without its header (a row through `grep` says what it is): `●
/// user@975.service loaded failed failed User Manager for UID 975`.
static LIST_UNITS_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[●*×] +)?(?P<unit>[A-Za-z0-9@._:\\-]+\.(?:service|socket|target|mount|timer|path|slice|scope|device|swap|automount))\s+(?:loaded|not-found|bad-setting|error|masked|stub|merged)\s+(?P<active>active|reloading|inactive|failed|activating|deactivating|maintenance|refreshing)\s+(?P<sub>[a-z-]+)(?:\s+(?P<desc>\S.*?))?\s*$")
        .expect("list-units row regex")
});

/// `dcgmi dmon`'s header (`#Entity   XIDER   POWER`) and entity rows.
static DMON_HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^#Entity(?:\s+[A-Z0-9_]+)+\s*$").expect("dmon header regex"));
static DMON_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:GPU|GPU-I|GPU-CI|Switch|Link|CPU|CPU-Core)\s+[0-9]+(?:\s+(?:-?[0-9.]+|N/A|[A-Z_]+))+\s*$")
        .expect("dmon row regex")
});

/// A column listing's header: upper-case titles (`JOBID PARTITION NAME
/// USER ST TIME NODES NODELIST(REASON)`), the last maybe capitalised
/// (nvtop's `Command`).
static COLUMN_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Z][A-Z0-9_%()/.-]*\s+){3,}(?:[A-Z][A-Z0-9_%()/.-]*|[A-Z][a-z]+)$")
        .expect("column header regex")
});

/// A column listing's header in title case, the titles two spaces apart or
/// more (`kubectl describe`'s `Type    Reason   Age   From   Message`;
/// `rocm-smi`'s `GPU  Temp   AvgPwr  SCLK    MCLK     Fan    Perf  PwrCap
/// VRAM%  GPU%`, ROCm/rocm_smi_lib python_smi_tools/rocm_smi.py), and
/// the rule of dashes under it (`----    ------   ----`).
static TITLE_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[A-Z][A-Za-z0-9/()%-]*(?: [A-Za-z/()-]+)?(?:\s{2,}[A-Z][A-Za-z0-9/()%-]*(?: [A-Za-z/()-]+)?){2,}$")
        .expect("title header regex")
});
static DASH_RULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^-{2,}(?:\s+-{2,}){2,}$").expect("dash rule regex"));

/// `netstat -tlnp`'s (net-tools) title, header and socket rows: `tcp  0  0
/// 0.0.0.0:8000  0.0.0.0:*  LISTEN  427249/docker-proxy` (the program only
/// under `-p`, `-` when another user's).
static NETSTAT_TITLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Active (?:Internet connections|UNIX domain sockets|Bluetooth connections)(?: \([a-z/ ]+\))?$")
        .expect("netstat title regex")
});
static NETSTAT_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Proto\s+Recv-Q\s+Send-Q\s+Local Address\s+Foreign Address\s+State(?:\s+(?:PID/Program name|User\s+Inode(?:\s+PID/Program name)?))?\s*$")
        .expect("netstat header regex")
});
static NETSTAT_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:tcp|udp|tcp6|udp6|raw|raw6)\s+[0-9]+\s+[0-9]+\s+(?P<addr>\S+):(?P<port>[0-9]{1,5}|\*)\s+\S+:(?:[0-9]{1,5}|\*)(?:\s+(?P<state>[A-Z_0-9]+))?(?:\s+[0-9]+\s+[0-9]+)?(?:\s+(?:(?P<pid>[0-9]+)/(?P<prog>\S.*?)|-))?\s*$")
        .expect("netstat row regex")
});

/// A row of `lsof -i` (`COMMAND PID [TID] USER FD TYPE DEVICE SIZE/OFF NODE
/// NAME`; some listings cut `USER`), maybe behind `grep -n`'s `61:` (a
/// context line's `61-`): `python3 101769 70u IPv4 544355 0t0 TCP
/// *:8080 (LISTEN)`. lsof cuts the command to nine characters.
static LSOF_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[0-9]+[:-])?(?P<cmd>\S+)\s+(?P<pid>[0-9]+)\s+(?:\S+\s+){0,2}(?:[0-9]+[rwuRWU]?|cwd|txt|mem)\s+IPv[46]\s+\S+\s+\S+\s+(?:TCP|UDP)\s+(?P<addr>\S+?):(?P<port>[0-9]{1,5}|\*)(?:->\S+)?(?:\s+\((?P<state>[A-Z_0-9]+)\))?\s*$")
        .expect("lsof row regex")
});

/// A report's `key : value` line whose key is padded to align the values
/// (three spaces or more before or after the colon): `State:          Waiting`,
/// `Runner processes detected          : 3`. People do not pad a sentence.
static ALIGNED_KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[A-Za-z][A-Za-z0-9()./_-]*(?: [A-Za-z0-9()./_-]+){0,5}(?: {3,}: ?|:(?: {3,}|\t+))\S",
    )
    .expect("aligned key value regex")
});

/// A link of `nvidia-smi topo -m`'s matrix (`X`, `NV12`, `SYS`, `PIX`…) or
/// of `topo -p2p`'s (`OK`, `GNS`, `CNS`…): upper-case, `NV` and a count.
static TOPO_LINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:[A-Z]{1,4}|NV[0-9]{1,2})$").expect("topo link regex"));

/// A line of the matrix's legends: `  X    = Self`, `  NV#  = Connection
/// traversing a bonded set of # NVLinks`, `  NIC0: mlx5_0`.
static TOPO_LEGEND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s+(?:[A-Z]{1,4}#?\s*= \S.*|NIC[0-9]+: \S+)$").expect("topo legend regex")
});

/// One of `docker ps`'s `PORTS`: `0.0.0.0:11434->11434/tcp`, `:::80->80/tcp`,
/// `[::]:80->80/tcp` (a host address and port published), or `5432/tcp`
/// (exposed only: no socket on the host).
static DOCKER_PORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:(?P<addr>\[[0-9a-fA-F:]*\]|[0-9a-fA-F.:]*):(?P<port>[0-9]{1,5})->)?[0-9]{1,5}(?:-[0-9]{1,5})?/(?:tcp|udp|sctp)$")
        .expect("docker port regex")
});

/// A line of a pretty-printed JSON document: a key, a value, a bracket.
static JSON_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:"(?:[^"\\]|\\.)*"\s*:\s*)?(?:[\[{]|"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null)?\s*(?:[\]}]\s*)*,?$"#,
    )
    .expect("json line regex")
});

/// A table in progress: how many cells its rows have (0 before a header
/// row), `dcgmi dmon`'s columns, a column listing's titles, or a JSON
/// document's depth.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    open: Option<Open>,
    /// The open box's header when it is a control plane's instance table
    /// (`super::instances`): its rows are instances.
    instances: Option<super::instances::Columns>,
    /// A GPU of `dcgmi discovery -l` whose block is not read to its UUID.
    pending_gpu: Option<GpuRecord>,
    /// Where a `dcgmi diag` box is (`ingest::dcgmi_diag`).
    diag: super::dcgmi_diag::DiagBox,
    /// The open JSON document's containers (`docker inspect`).
    json: super::docker_inspect::Doc,
    /// A process tree (`pstree -p`, `ingest::pstree`).
    pstree: super::pstree::Tree,
    /// The one device node the last prompt's `fuser` names: the file of
    /// its rows when a filter (`| grep PID`) cut the row that names it.
    fuser_file: Option<(Span, String)>,
}

/// Which of dcgmi's boxes a box is, when its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DcgmiBox {
    Other,
    Discovery,
    Diag,
    /// `dcgmi stats -j`: a job's execution, performance, event and
    /// slowdown figures and its overall health, two cells a row.
    Stats,
}

/// Whether `t` (trimmed) is the header row of one of dcgmi's boxes.
pub(crate) fn is_dcgmi_box_header(t: &str) -> bool {
    dcgmi_box_header(t).is_some()
}

fn dcgmi_box_header(t: &str) -> Option<DcgmiBox> {
    if !t.starts_with('|') || !t.ends_with('|') {
        return None;
    }
    let titles: Vec<&str> = t.trim_matches('|').split('|').map(str::trim).collect();
    if let [title] = titles.as_slice() {
        return is_stats_title(title).then_some(DcgmiBox::Stats);
    }
    DCGMI_BOX_HEADERS
        .iter()
        .find(|(h, _)| *h == titles.as_slice())
        .map(|(_, kind)| *kind)
}

/// The one-cell title of a `dcgmi stats -j` box: `Summary` over the
/// job's GPUs, or `GPU ID: 0` per GPU in verbose mode (DCGM's
/// `dcgmi/ProcessStats.cpp`).
fn is_stats_title(title: &str) -> bool {
    title == "Summary"
        || title
            .strip_prefix("GPU ID: ")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[derive(Debug, Clone, Copy)]
enum Open {
    Box {
        cells: usize,
        dcgmi: DcgmiBox,
    },
    Dmon {
        columns: usize,
        /// The column of `XIDER` (DCGM_FI_DEV_XID_ERRORS, field 230), the
        /// GPU's last Xid, counted from the first field tag.
        xider: Option<usize>,
    },
    Columns {
        titles: usize,
        /// Titles apart by two spaces or more (`CONTAINER ID` is one):
        /// cells of rows whose values hold spaces (`3 minutes ago`).
        aligned: usize,
        open_ended: bool,
        numbered: bool,
        nvtop: bool,
        docker: bool,
        /// `docker compose ps`: the container's name first.
        compose: bool,
    },
    /// `nvidia-smi topo -m`: a row per device, a link per device column,
    /// then the legends under `Legend:` and `NIC Legend:`.
    Topo {
        devices: usize,
    },
    Json {
        depth: usize,
    },
}

impl Tables {
    /// A shell prompt's line: remembers the device node a `fuser` over one
    /// names (`fuser -v /dev/nvidia0 2>&1 | grep -E "…"`).
    pub(crate) fn prompt(&mut self, text: &str, span: Span) {
        self.fuser_file = super::detect::prompt_command(text)
            .and_then(super::fuser::one_node)
            .map(|f| (span, f));
    }

    /// A blank line ends a column listing (a box has its borders).
    pub(crate) fn blank(&mut self) {
        if matches!(self.open, Some(Open::Columns { .. })) {
            self.open = None;
        }
        // dcgmi prints no blank line inside its diag box: one between two
        // pasted boxes ends the first.
        if matches!(
            self.open,
            Some(Open::Box {
                dcgmi: DcgmiBox::Diag,
                ..
            })
        ) {
            self.open = None;
            self.diag = super::dcgmi_diag::DiagBox::default();
        }
    }

    /// Whether `text` is a line of a table this reader is in (or opens
    /// one); any other line closes it. A row of nvtop's process list
    /// records its GPU process in `facts`.
    pub(crate) fn read(&mut self, text: &str, span: Span, facts: &mut Facts) -> bool {
        let t = text.trim();
        let first = t.as_bytes().first().copied();
        if let Some(Open::Json { depth }) = self.open {
            if JSON_LINE.is_match(t) {
                self.json.line(t, span, facts);
                let depth = (depth + opened(t)).saturating_sub(closed(t));
                self.open = (depth > 0).then_some(Open::Json { depth });
                return true;
            }
            self.open = None;
        }
        if let Some(Open::Topo { devices }) = self.open {
            if topo_row(t, devices)
                || t == "Legend:"
                || t == "NIC Legend:"
                || TOPO_LEGEND.is_match(text)
            {
                return true;
            }
            self.open = None;
        }
        if let Some(devices) = topo_header(t) {
            self.open = Some(Open::Topo { devices });
            return true;
        }
        if socket_line(t, span, facts)
            || super::fuser::line(
                t,
                span,
                facts,
                self.fuser_file
                    .as_ref()
                    .filter(|(at, _)| at.source == span.source && at.line < span.line)
                    .map(|(_, f)| f.as_str()),
            )
            || self.pstree.line(text, span, facts)
        {
            return true;
        }
        if first.is_some_and(|c| c.is_ascii_digit()) && NVTOP_ROW.is_match(t) {
            nvtop_row(t, span, facts);
            return true;
        }
        if t.contains(" loaded ") && list_units_row(t, span, facts) {
            return true;
        }
        // The rule of dashes under a listing's header stays in it.
        if let Some(Open::Columns { .. }) = self.open {
            if first == Some(b'-') && DASH_RULE.is_match(t) {
                return true;
            }
        }
        if let Some(Open::Columns {
            titles,
            aligned,
            open_ended,
            numbered,
            nvtop,
            docker,
            compose,
        }) = self.open
        {
            let n = t.split_whitespace().count();
            // Titles of two words (`GPU MEM`) take one cell; a last
            // column of commands or node lists takes any number; values
            // with spaces (`Up 3 minutes`) are cells apart by two spaces,
            // one of which may be empty (no `PORTS`).
            let fits = (n + 2 >= titles && (open_ended || n <= titles + 1))
                || (aligned > 3 && aligned_cells(t).count().abs_diff(aligned) <= 1);
            let lead = if numbered {
                first.is_some_and(|c| c.is_ascii_digit())
            } else {
                first.is_some_and(|c| c.is_ascii_alphanumeric())
            };
            if fits && lead && t.bytes().any(|b| b.is_ascii_digit()) && !super::prose::is_prose(t) {
                if nvtop {
                    nvtop_row(t, span, facts);
                }
                if docker {
                    docker_row(t, span, facts);
                }
                if compose {
                    let cells: Vec<&str> = aligned_cells(t).collect();
                    super::docker_ps::row(&cells, true, span, facts);
                }
                return true;
            }
            self.open = None;
        }
        if (t == "{" || t == "[") && self.open.is_none() {
            self.open = Some(Open::Json { depth: 1 });
            // `docker inspect`'s containers make records.
            self.json = super::docker_inspect::Doc::default();
            self.json.line(t, span, facts);
            return true;
        }
        if first.is_some_and(|c| c.is_ascii_uppercase())
            && t.contains("  ")
            && TITLE_HEADER.is_match(t)
            && !COLUMN_HEADER.is_match(t)
        {
            let aligned = aligned_cells(t).count();
            self.open = Some(Open::Columns {
                titles: t.split_whitespace().count(),
                aligned,
                open_ended: t.ends_with("Message") || t.ends_with("MESSAGE"),
                numbered: false,
                nvtop: false,
                docker: false,
                compose: false,
            });
            return true;
        }
        // Columns are aligned: a sentence in capitals has single spaces.
        if first.is_some_and(|c| c.is_ascii_uppercase())
            && t.contains("  ")
            && COLUMN_HEADER.is_match(t)
        {
            let titles: Vec<&str> = t.split_whitespace().collect();
            let last = titles
                .last()
                .copied()
                .unwrap_or_default()
                .to_ascii_uppercase();
            self.open = Some(Open::Columns {
                titles: titles.len(),
                aligned: aligned_cells(t).count(),
                open_ended: ["COMMAND", "CMD", "ARGS", "NODELIST(REASON)", "NAME"]
                    .contains(&last.as_str()),
                numbered: titles[0].ends_with("ID"),
                nvtop: titles.starts_with(&["PID", "USER", "DEV", "TYPE"])
                    || titles.starts_with(&["PID", "USER", "GPU", "TYPE", "GPU", "MEM"]),
                docker: titles.starts_with(&["CONTAINER", "ID", "IMAGE"])
                    && titles.ends_with(&["PORTS", "NAMES"]),
                compose: titles.starts_with(&["NAME", "IMAGE", "COMMAND", "SERVICE"]),
            });
            return true;
        }
        match first {
            Some(b'+' | b'|') => {
                if BORDER.is_match(t) {
                    if self.open.is_none() {
                        self.open = Some(Open::Box {
                            cells: 0,
                            dcgmi: DcgmiBox::Other,
                        });
                        self.instances = None;
                    }
                    return true;
                }
                // dcgmi's header row opens its box, whatever came above
                // (the border may have been read as an nvidia-smi table's).
                if let Some(kind) = dcgmi_box_header(t) {
                    self.pending_gpu = None;
                    self.diag = super::dcgmi_diag::DiagBox::default();
                    self.instances = None;
                    self.open = Some(Open::Box {
                        cells: cells(t),
                        dcgmi: kind,
                    });
                    return true;
                }
                // A diag box's section rule opens the box when the paste
                // starts under its header (no other box has one).
                if self.open.is_none() && BOX_SECTION.is_match(t) {
                    self.diag = super::dcgmi_diag::DiagBox::default();
                    self.open = Some(Open::Box {
                        cells: 2,
                        dcgmi: DcgmiBox::Diag,
                    });
                }
                if matches!(self.open, Some(Open::Box { .. })) && BOX_SECTION.is_match(t) {
                    if matches!(
                        self.open,
                        Some(Open::Box {
                            dcgmi: DcgmiBox::Diag,
                            ..
                        })
                    ) {
                        self.diag.section(t, span);
                    }
                    return true;
                }
                let cells = cells(t);
                match self.open {
                    Some(Open::Box { cells: 0, dcgmi }) if cells >= 2 => {
                        self.open = Some(Open::Box { cells, dcgmi });
                        // A box's header row, or a Markdown table's first
                        // row under the header it had above its separator.
                        match &self.instances {
                            Some(columns) => super::instances::row(columns, t, span, facts),
                            None => self.instances = super::instances::columns(t),
                        }
                        true
                    }
                    // A cell may hold a `|` of its own, or a wrapped line
                    // leave one empty: a row is within one of its header.
                    Some(Open::Box { cells: n, dcgmi }) if cells >= 2 && cells.abs_diff(n) <= 1 => {
                        self.dcgmi_row(dcgmi, t, span, facts);
                        if let Some(columns) = &self.instances {
                            super::instances::row(columns, t, span, facts);
                        }
                        true
                    }
                    // A row of a diag box whose header is above the
                    // paste: its result cell names GPUs as only dcgmi's do.
                    None | Some(Open::Box { cells: 0, .. })
                        if cells == 2 && diag_row_without_header(t) =>
                    {
                        self.diag = super::dcgmi_diag::DiagBox::default();
                        self.open = Some(Open::Box {
                            cells,
                            dcgmi: DcgmiBox::Diag,
                        });
                        self.dcgmi_row(DcgmiBox::Diag, t, span, facts);
                        true
                    }
                    _ => {
                        // A header row opens a Markdown table only with its
                        // separator below: remember it as a candidate.
                        self.open = (cells >= 2).then_some(Open::Box {
                            cells: 0,
                            dcgmi: DcgmiBox::Other,
                        });
                        self.instances = super::instances::columns(t);
                        false
                    }
                }
            }
            Some(b'#') if DMON_HEADER.is_match(t) => {
                self.open = Some(Open::Dmon {
                    columns: t.split_whitespace().count(),
                    xider: t.split_whitespace().skip(1).position(|tag| tag == "XIDER"),
                });
                true
            }
            _ => match self.open {
                Some(Open::Dmon { columns, xider }) => {
                    let ok = t == "ID"
                        || (DMON_ROW.is_match(t) && t.split_whitespace().count() == columns + 1);
                    if !ok {
                        self.open = None;
                    } else if let Some(at) = xider {
                        dmon_last_xid(t, at, span, facts);
                    }
                    ok
                }
                _ => {
                    self.open = None;
                    false
                }
            },
        }
    }
}

impl Tables {
    /// A row of one of dcgmi's boxes: `dcgmi discovery -l`'s GPU blocks
    /// (`| 0 | Name: … |`, `| | PCI Bus ID: … |`, `| | Device UUID: GPU-… |`)
    /// become GPU records, `dcgmi diag`'s per-GPU results (`| | GPU1: Pass
    /// |`) name their GPU.
    fn dcgmi_row(&mut self, kind: DcgmiBox, row: &str, span: Span, facts: &mut Facts) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(first), Some(info)) = (cells.first(), cells.get(1)) else {
            return;
        };
        match kind {
            DcgmiBox::Discovery => {
                if let Ok(index) = first.parse::<u32>() {
                    let name = info
                        .strip_prefix("Name: ")
                        .filter(|n| !n.is_empty() && !n.starts_with("<<<"));
                    self.pending_gpu = Some(GpuRecord {
                        index: Some(index),
                        name: name.map(str::to_owned),
                        span: Some(span),
                        ..GpuRecord::default()
                    });
                    return;
                }
                let Some(gpu) = self.pending_gpu.as_mut().filter(|_| first.is_empty()) else {
                    return;
                };
                if let Some(bus) = info.strip_prefix("PCI Bus ID: ") {
                    gpu.bus_id = super::values::normalize_bus_id(bus);
                } else if let Some(uuid) = info
                    .strip_prefix("Device UUID: ")
                    .filter(|u| u.starts_with("GPU-"))
                {
                    gpu.uuid = Some(uuid.to_owned());
                    if let Some(gpu) = self.pending_gpu.take() {
                        facts.gpus.push(gpu);
                    }
                }
            }
            DcgmiBox::Diag => {
                self.diag.row(row, span, facts);
                if let Some(index) = DIAG_GPU_RESULT
                    .captures(info)
                    .and_then(|c| c["index"].parse().ok())
                {
                    facts.gpu_mentions.push(GpuMention {
                        index,
                        by: "a dcgmi diag result",
                        span,
                    });
                }
            }
            DcgmiBox::Other | DcgmiBox::Stats => {}
        }
    }
}

/// A `dcgmi dmon` row of a GPU (`GPU 1      120`) whose `XIDER` value (the
/// field tag at `at`) is a last Xid above 0: that GPU's health says so
/// (`dcgmi dmon -e 230`, NVIDIA/DCGM dcgmi/DeviceMonitor.cpp; field 230 is
/// DCGM_FI_DEV_XID_ERRORS, "Value of the last XID error encountered").
fn dmon_last_xid(t: &str, at: usize, span: Span, facts: &mut Facts) {
    let cells: Vec<&str> = t.split_whitespace().collect();
    let (Some(&"GPU"), Some(index), Some(xid)) = (cells.first(), cells.get(1), cells.get(at + 2))
    else {
        return;
    };
    let (Ok(index), Ok(xid)) = (index.parse::<u32>(), xid.parse::<u32>()) else {
        return;
    };
    if xid > 0 {
        facts.gpu_health.push(GpuHealth {
            index: Some(index),
            last_xid: Some(Reading { value: xid, span }),
            ..GpuHealth::at(span)
        });
    }
}

/// `| GPU Memory | Pass - GPUs: 1, 2 |`: a `dcgmi diag` row whose result
/// cell names GPUs (`ingest::dcgmi_diag`).
fn diag_row_without_header(t: &str) -> bool {
    t.trim_matches('|')
        .split('|')
        .nth(1)
        .is_some_and(super::dcgmi_diag::is_gpu_result)
}

/// A row of `systemctl list-units`; a failed unit becomes its status.
fn list_units_row(t: &str, span: Span, facts: &mut Facts) -> bool {
    let Some(c) = LIST_UNITS_ROW.captures(t) else {
        return false;
    };
    if &c["active"] == "failed" {
        facts.unit_statuses.push(UnitStatus {
            description: c.name("desc").map(|d| d.as_str().to_owned()),
            active_state: Some(c["active"].to_owned()),
            sub_state: Some(c["sub"].to_owned()),
            active_span: Some(span),
            ..UnitStatus::new(&c["unit"], span)
        });
    }
    true
}

/// Whether `text` is a `key : value` line aligned by padding (asked after
/// every other recogniser: uvicorn's `INFO:     Started server` is padded
/// too, and is the server's).
pub(crate) fn is_aligned_key_value(text: &str) -> bool {
    let t = text.trim();
    t.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && (t.contains("   ") || t.contains(":\t"))
        && ALIGNED_KEY_VALUE.is_match(t)
}

/// A line of a socket listing that says what it is without a header:
/// `netstat`'s title, header and rows, an `lsof -i` row. A listening
/// socket becomes a [`Listener`] (with its holder when the row names it).
fn socket_line(t: &str, span: Span, facts: &mut Facts) -> bool {
    let b = t.as_bytes();
    let (row, pid_prog) = match b.first() {
        Some(b'A') => return NETSTAT_TITLE.is_match(t),
        Some(b'P') => return NETSTAT_HEADER.is_match(t),
        Some(b't' | b'u' | b'r') if t.contains(':') => match NETSTAT_ROW.captures(t) {
            Some(c) => {
                let holder = c
                    .name("pid")
                    .zip(c.name("prog"))
                    .map(|(p, n)| (p.as_str(), n.as_str()));
                (c, holder)
            }
            None => return false,
        },
        Some(_) if memchr::memmem::find(b, b" IPv").is_some() => match LSOF_ROW.captures(t) {
            Some(c) => {
                let holder = c
                    .name("pid")
                    .zip(c.name("cmd"))
                    .map(|(p, n)| (p.as_str(), n.as_str()));
                (c, holder)
            }
            None => return false,
        },
        _ => return false,
    };
    if row.name("state").map(|s| s.as_str()) == Some("LISTEN") {
        if let Ok(port) = row["port"].parse::<u16>() {
            facts.listeners.push(Listener {
                pid: pid_prog.and_then(|(p, _)| p.parse().ok()),
                process: pid_prog.map(|(_, n)| n.trim().to_owned()),
                address: row["addr"].trim_matches(['[', ']']).to_owned(),
                port,
                container: None,
                span,
            });
        }
    }
    true
}

/// Brackets a JSON line opens and closes, outside its strings.
fn opened(line: &str) -> usize {
    brackets(line).0
}
fn closed(line: &str) -> usize {
    brackets(line).1
}
fn brackets(line: &str) -> (usize, usize) {
    let (mut open, mut close, mut in_string, mut escaped) = (0, 0, false, false);
    for b in line.bytes() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'{' | b'[' if !in_string => open += 1,
            b'}' | b']' if !in_string => close += 1,
            _ => {}
        }
    }
    (open, close)
}

/// A row of nvtop's process list that says what it is without its header
/// (a row copied alone): PID, user, device, the type nvtop names
/// (`Compute`, `Graphic`, `Both G+C`: src/interface.c), GPU use (`N/A` or a
/// share), GPU memory in MiB and its share, CPU use, host memory, command.
/// nvtop 1.x (Syllo/nvtop b126abb, src/interface.c: `"%6lluMB"`, `" %3.0f%%"`,
/// `"%zuMB"`) has no GPU-use column and spells MiB `MB`; it prints `N/A`
/// for a user and a command it cannot read.
static NVTOP_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9]+\s+\S+\s+[0-9]+\s+(?:Compute|Graphic|Both G\+C)\s+(?:(?:N/A|[0-9]+%)\s+)?[0-9]+Mi?B\s+[0-9]+%\s+[0-9]+%\s+[0-9]+(?:MiB|GiB|KiB|MB|GB|KB|B)\s+\S")
        .expect("nvtop row regex")
});

/// A row of nvtop's process list (`PID USER DEV TYPE GPU GPU MEM CPU HOST
/// MEM Command`): `4143 user 0 Compute N/A 5508MiB 34% 0% 1479MiB cmd`, a
/// GPU process (its PID, the GPU's index, the memory it holds).
fn nvtop_row(row: &str, span: Span, facts: &mut Facts) {
    let cells: Vec<&str> = row.split_whitespace().collect();
    let (Some(pid), Some(gpu)) = (
        cells.first().and_then(|c| c.parse::<u32>().ok()),
        cells.get(2).and_then(|c| c.parse::<u32>().ok()),
    ) else {
        return;
    };
    // GPU use is `N/A` or `12%`, then memory `5508MiB` and its share `34%`.
    let memory = cells
        .iter()
        .skip(4)
        .position(|c| c.ends_with("MiB") || c.ends_with("MB"))
        .map(|i| i + 4);
    let used_mib = memory.and_then(|i| {
        cells[i]
            .trim_end_matches("MiB")
            .trim_end_matches("MB")
            .parse()
            .ok()
    });
    // Then CPU use, host memory, and the command.
    let name = memory
        .map(|i| cells.get(i + 4..).unwrap_or_default().join(" "))
        .unwrap_or_default();
    facts.gpu_processes.push(GpuProcessRecord {
        gpu_index: Some(gpu),
        gpu_uuid: None,
        pid,
        name_truncated: name.starts_with("..."),
        name: name.trim_start_matches('.').to_owned(),
        used_mib,
        used_truncated: false,
        span,
    });
}

/// Cells apart by two spaces or more, or a tab.
fn aligned_cells(row: &str) -> impl Iterator<Item = &str> {
    row.split("  ")
        .flat_map(|c| c.split('\t'))
        .map(str::trim)
        .filter(|c| !c.is_empty())
}

/// The header of `nvidia-smi topo -m` (`GPU0 GPU1 NIC0 CPU Affinity NUMA
/// Affinity GPU NUMA ID`) or `topo -p2p` (devices alone): how many device
/// columns it has.
fn topo_header(t: &str) -> Option<usize> {
    if !t.starts_with("GPU") {
        return None;
    }
    let cells: Vec<&str> = t.split_whitespace().collect();
    let devices = cells
        .iter()
        .take_while(|c| super::check_env::is_device(c))
        .count();
    let rest = &cells[devices..];
    let titles = rest
        .iter()
        .all(|c| ["CPU", "NUMA", "GPU", "Affinity", "ID"].contains(c));
    (devices >= 1 && titles && (devices >= 2 || rest.contains(&"Affinity"))).then_some(devices)
}

/// A row of the matrix: a device, its link to each device column, then its
/// CPU and NUMA affinity (`0-23,48-71`, `0`, `N/A`), which a NIC's row lacks.
fn topo_row(t: &str, devices: usize) -> bool {
    let cells: Vec<&str> = t.split_whitespace().collect();
    cells
        .first()
        .is_some_and(|c| super::check_env::is_device(c))
        && cells.len() > devices
        && cells.len() <= devices + 4
        && cells[1..=devices].iter().all(|c| TOPO_LINK.is_match(c))
        && cells[devices + 1..].iter().all(|c| {
            *c == "N/A"
                || c.bytes()
                    .all(|b| b.is_ascii_digit() || b == b',' || b == b'-')
        })
}

/// A row of `docker ps`: its last cell names the container, the one before
/// (when it is one) lists its ports; each published one (`0.0.0.0:11434->
/// 11434/tcp`) is a socket listening on the host for that container.
fn docker_row(row: &str, span: Span, facts: &mut Facts) {
    let cells: Vec<&str> = aligned_cells(row).collect();
    super::docker_ps::row(&cells, false, span, facts);
    let [.., ports, name] = cells.as_slice() else {
        return;
    };
    for port in ports.split(", ") {
        let Some(c) = DOCKER_PORT.captures(port.trim()) else {
            continue;
        };
        let (Some(addr), Some(port)) = (c.name("addr"), c.name("port")) else {
            continue;
        };
        let Ok(port) = port.as_str().parse::<u16>() else {
            continue;
        };
        facts.listeners.push(Listener {
            pid: None,
            process: None,
            address: addr.as_str().trim_matches(['[', ']']).to_owned(),
            port,
            container: Some((*name).to_owned()),
            span,
        });
    }
}

/// The cells of `| a | b |` (or `a | b`, a Markdown row without its outer bars).
fn cells(row: &str) -> usize {
    let inner = row.trim_start_matches('|').trim_end_matches('|');
    inner.split('|').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Vec<bool> {
        read_with_facts(text).0
    }

    fn read_with_facts(text: &str) -> (Vec<bool>, Facts) {
        let mut tables = Tables::default();
        let mut facts = Facts::default();
        let read = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let span = Span {
                    source: crate::source::SourceId(0),
                    line: i as u32 + 1,
                };
                if l.trim().is_empty() {
                    tables.blank();
                    return false;
                }
                tables.read(l, span, &mut facts)
            })
            .collect();
        (read, facts)
    }

    /// `squeue` as pasted in https://github.com/lyulyul/shine-cluster/issues/30
    /// (fixtures/formats/lines/squeue.txt), then a sentence.
    #[test]
    fn title_case_listings_and_socket_rows_are_read() {
        // fixtures/real/660 (kubectl describe pod's events).
        let events = "  Type     Reason     Age                  From               Message\n  ----     ------     ----                 ----               -------\n  Normal   Scheduled  4m11s                default-scheduler  Successfully assigned default/example-triton-inference-server-9c5d9f79-74rt4 to 10.0.10.95\n  Warning  Unhealthy  41s (x3 over 61s)    kubelet            Liveness probe failed: Get \"http://10.0.10.177:8000/v2/health/live\": dial tcp 10.0.10.177:8000: connect: connection refused";
        assert_eq!(read_all(events), [true; 4]);
        // fixtures/real/654 and 618 (netstat), 648 (lsof under grep -n).
        let (read, facts) = read_with_facts(
            "Active Internet connections (only servers)\nProto Recv-Q Send-Q Local Address           Foreign Address         State       PID/Program name\ntcp        0      0 0.0.0.0:8000            0.0.0.0:*               LISTEN      427249/docker-proxy\n61:python3   101769   70u  IPv4 544355      0t0  TCP *:8080 (LISTEN)",
        );
        assert_eq!(read, [true; 4]);
        let holders: Vec<_> = facts
            .listeners
            .iter()
            .map(|l| (l.port, l.pid, l.process.as_deref()))
            .collect();
        assert_eq!(
            holders,
            [
                (8000, Some(427249), Some("docker-proxy")),
                (8080, Some(101769), Some("python3"))
            ]
        );
        // A sentence in title case is no header; a row with no socket no lsof row.
        assert_eq!(read_all("The Server Crashed Again Today"), [false]);
        assert_eq!(read_all("python3 101769 70u hello world"), [false]);
    }

    #[test]
    fn column_listings_are_read_by_their_header() {
        let got = read_all(
            "\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
              2691    normal     task    mahan  R 2-16:46:05      1 eureka
              2835    speedy     bash    wayne  R      38:52      1 tatooine
We found 2 jobs on eureka running for 2 days.
",
        );
        assert_eq!(got, [true, true, true, false]);
        // A sentence in capitals is no header; a row must follow one.
        assert_eq!(
            read_all("THIS IS NOT A TABLE HEADER\n 2691 normal task mahan R 1 eureka\n"),
            [false, false]
        );
    }

    /// nvtop's process list as pasted in
    /// https://github.com/phoronix-test-suite/openbenchmarking/issues/77
    /// (fixtures/formats/lines/nvtop.txt): each row is a GPU process.
    #[test]
    fn nvtop_rows_are_gpu_processes() {
        let (got, facts) = read_with_facts(
            "\
    PID          USER DEV     TYPE  GPU        GPU MEM    CPU  HOST MEM Command
   4143 llm_benchmark   0  Compute N/A    5508MiB  34%     0%   1479MiB ..../bin/ollama runner --ollama-engine --model /h
 464506 llm_benchmark   0  Compute N/A     152MiB   1%   596%   6079MiB ...snip....

[  123.4] NVRM: Xid (PCI:0000:01:00): 79
",
        );
        assert_eq!(got, [true, true, true, false, false]);
        let rows: Vec<_> = facts
            .gpu_processes
            .iter()
            .map(|p| {
                (
                    p.pid,
                    p.gpu_index,
                    p.used_mib,
                    p.name.as_str(),
                    p.name_truncated,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    4143,
                    Some(0),
                    Some(5508),
                    "/bin/ollama runner --ollama-engine --model /h",
                    true
                ),
                (464506, Some(0), Some(152), "snip....", true),
            ]
        );
    }

    /// nvtop 1.x's rows (no GPU-use column, MiB spelled `MB`, `N/A` for
    /// a process it cannot read): a reduction of the row in
    /// theblackcat102.github.io's post "Kill zombie process using GPU
    /// memory" (2020), under the header of Syllo/nvtop b126abb
    /// src/interface.c; the second row assembled from the same format.
    #[test]
    fn nvtop_1_rows_are_gpu_processes() {
        let (got, facts) = read_with_facts(
            "\
  PID USER GPU    TYPE  GPU MEM  CPU  HOST MEM Command
 5986  N/A   0 Compute    637MB   8%     0%       0MB N/A
 4411 alice  1 Compute   10240MB  62%   101%    2048MB python train.py
",
        );
        assert_eq!(got, [true, true, true]);
        let rows: Vec<_> = facts
            .gpu_processes
            .iter()
            .map(|p| (p.pid, p.gpu_index, p.used_mib, p.name.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (5986, Some(0), Some(637), "N/A"),
                (4411, Some(1), Some(10240), "python train.py")
            ]
        );
        // The row alone, without its header.
        let (got, facts) =
            read_with_facts("5986            N/A   0 Compute    637MB   8%     0%       0MB N/A\n");
        assert_eq!(got, [true]);
        assert_eq!(facts.gpu_processes.len(), 1);
    }

    /// `docker ps` as pasted in https://github.com/DanTup/dgx_dashboard/issues/1
    /// (fixtures/formats/lines/docker-ps.txt): cells with spaces apart by
    /// two or more; a published port is a socket of its container, an
    /// exposed one (`5432/tcp`) is none.
    #[test]
    fn docker_ps_rows_publish_their_ports() {
        let (got, facts) = read_with_facts(
            "\
CONTAINER ID   IMAGE                COMMAND                  CREATED         STATUS         PORTS                                           NAMES
88f32688b78c   ollama/ollama        \"/bin/ollama serve\"      3 minutes ago   Up 3 minutes   0.0.0.0:11434->11434/tcp, :::11434->11434/tcp   ollama
22030b705436   postgres:12-alpine   \"docker-entrypoint.s…\"   4 minutes ago   Up 4 minutes   5432/tcp                                        competent_ishizaka
Then I ran docker stats on both of them.
",
        );
        assert_eq!(got, [true, true, true, false]);
        let sockets: Vec<_> = facts
            .listeners
            .iter()
            .map(|l| {
                (
                    l.address.as_str(),
                    l.port,
                    l.container.as_deref(),
                    l.span.line,
                )
            })
            .collect();
        assert_eq!(
            sockets,
            [
                ("0.0.0.0", 11434, Some("ollama"), 2),
                ("::", 11434, Some("ollama"), 2)
            ]
        );
    }

    /// `nvidia-smi topo -m` as pasted in https://github.com/NVIDIA/nccl/issues/1617
    /// (fixtures/formats/lines/nvidia-smi-topo-m-nics.txt, cut): GPU rows
    /// with their affinity, NIC rows without, the legend after a blank
    /// line; a sentence ends it.
    #[test]
    fn topo_matrices_are_read_with_their_legend() {
        let got = read_all(
            "\
        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    NIC2    NIC3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV6     NV6     NV6     PIX     SYS     SYS     SYS     6,14,22,30      3               N/A
NIC3    SYS     SYS     SYS     PIX     SYS     SYS     SYS      X 

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
The GPUs are on different NUMA nodes, is that a problem?
",
        );
        assert_eq!(
            got,
            [true, true, true, false, true, false, true, true, false]
        );
        // A row whose links are words is no row of the matrix.
        assert_eq!(
            read_all("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tthe\tfirst\t0-63\n"),
            [true, false]
        );
    }

    /// `dcgmi health -c -j` as pasted in https://github.com/NVIDIA/DCGM/issues/263
    /// (fixtures/formats/lines/dcgmi-health-json.txt); the document ends
    /// where its brackets close.
    #[test]
    fn a_tools_json_is_read_to_its_last_bracket() {
        let got = read_all(
            "{\n        \"body\" : \n        {\n                \"Overall Health\" : \n                {\n                        \"value\" : \"Healthy\"\n                }\n        },\n        \"header\" : \n        [\n                \"Health Monitor Report\"\n        ]\n}\nHealth monitor systems set successfully.\n",
        );
        assert_eq!(got.len(), 14);
        assert!(got[..13].iter().all(|r| *r), "{got:?}");
        assert!(!got[13]);
    }

    /// `dcgmi dmon -c 1 -e 230` from NVIDIA/DCGM#263 (fixtures/real/483): GPU
    /// 1's last Xid, 120, is its health; a GPU whose last Xid is 0 has none.
    #[test]
    fn dmon_last_xid_of_a_gpu_is_its_health() {
        let (read, facts) = read_with_facts(
            "#Entity    XIDER        \nID                      \nGPU 0      0            \nGPU 1      120          \nGPU 2      0            \n",
        );
        assert!(read.iter().all(|r| *r), "{read:?}");
        let last: Vec<(Option<u32>, u32, u32)> = facts
            .gpu_health
            .iter()
            .filter_map(|h| {
                let x = h.last_xid.as_ref()?;
                Some((h.index, x.value, x.span.line))
            })
            .collect();
        assert_eq!(last, [(Some(1), 120, 4)]);
        // Another field alone (`POWER`) says nothing of Xids.
        let (_, facts) = read_with_facts("#Entity    POWER\nID\nGPU 1      120\n");
        assert!(facts.gpu_health.is_empty());
    }

    /// `dcgmi discovery -l` as the DCGM user guide prints it ("Getting
    /// Started", verifying the installation; cut after the first GPU), then
    /// text that is no table. The `dmon` block is written to the shape
    /// dcgmi dmon prints (a `#Entity` header of field tags, `ID`, one row
    /// per entity), not copied.
    #[test]
    fn tables_are_read_from_their_first_border_or_header() {
        let got = read_all(
            "\
+--------+----------------------------------------------------------------------+
| GPU ID | Device Information                                                   |
+--------+----------------------------------------------------------------------+
| 0      | Name: A100-SXM4-40GB                                                 |
|        | PCI Bus ID: 00000000:07:00.0                                         |
|        | Device UUID: GPU-1d82f4df-3cf9-150d-088b-52f18f8654e1                |
+--------+----------------------------------------------------------------------+
a sentence after it
| lone | row |
",
        );
        assert_eq!(
            got,
            [true, true, true, true, true, true, true, false, false]
        );
        let got = read_all(
            "\
#Entity   SMACT         SMOCC         TENSO         DRAMA
ID
GPU 0     0.000         0.000         0.000         0.000
GPU 1     0.000         0.000         0.000         0.000
done
",
        );
        assert_eq!(got, [true, true, true, true, false]);
        // A Markdown table: the header counts once its separator is seen.
        let got = read_all("| Model | Version | Status |\n|---|---|---|\n| a | 1 | READY |\n");
        assert_eq!(got, [false, true, true]);
    }

    /// `dcgmi discovery -l` as pasted in https://github.com/NVIDIA/DCGM/issues/229
    /// (fixtures/formats/lines/dcgmi-discovery-l.txt; trailing spaces cut
    /// here): each GPU block becomes a GPU record with its index, bus id
    /// and UUID, the `<<<NULL>>>` name left out.
    #[test]
    fn dcgmi_discovery_blocks_are_gpu_records() {
        let (read, facts) = read_with_facts(
            "\
+--------+----------------------------------------------------------------------+
| GPU ID | Device Information                                                   |
+--------+----------------------------------------------------------------------+
| 0      | Name: <<<NULL>>>                                                     |
|        | PCI Bus ID: 00000000:4C:00.0                                         |
|        | Device UUID: GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de                |
+--------+----------------------------------------------------------------------+
| 1      | Name: <<<NULL>>>                                                     |
|        | PCI Bus ID: 00000000:5D:00.0                                         |
|        | Device UUID: GPU-75c4ee16-a840-6f6c-9a7b-5ed8f41598b8                |
+--------+----------------------------------------------------------------------+
",
        );
        assert!(read.iter().all(|r| *r), "{read:?}");
        let got: Vec<_> = facts
            .gpus
            .iter()
            .map(|g| {
                (
                    g.index,
                    g.name.as_deref(),
                    g.bus_id.as_deref(),
                    g.uuid.as_deref(),
                    g.span.map(|s| s.line),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    Some(0),
                    None,
                    Some("0000:4c:00.0"),
                    Some("GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de"),
                    Some(4)
                ),
                (
                    Some(1),
                    None,
                    Some("0000:5d:00.0"),
                    Some("GPU-75c4ee16-a840-6f6c-9a7b-5ed8f41598b8"),
                    Some(8)
                ),
            ]
        );
    }

    /// `dcgmi diag` of DCGM 4.2.3 as pasted in
    /// https://github.com/NVIDIA/DCGM/issues/253: the section rules are
    /// the box's, each `GPUn: Pass` names its GPU; a box with no dcgmi
    /// header makes no GPU of a row that looks like one.
    #[test]
    fn dcgmi_diag_results_name_their_gpus() {
        let (read, facts) = read_with_facts(
            "\
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.2.3                                          |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
|                           | GPU3: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
",
        );
        assert!(read.iter().all(|r| *r), "{read:?}");
        let got: Vec<_> = facts
            .gpu_mentions
            .iter()
            .map(|m| (m.index, m.span.line))
            .collect();
        assert_eq!(got, [(0, 7), (3, 8)]);
        let (_, facts) = read_with_facts(
            "+----+----+\n| Name | Result |\n+----+----+\n| 0 | Name: x |\n|  | Device UUID: GPU-1 |\n|  | GPU0: Pass |\n",
        );
        assert!(facts.gpus.is_empty() && facts.gpu_mentions.is_empty());
    }

    /// `dcgmi stats -j` (https://github.com/NVIDIA/DCGM/issues/93): the
    /// one-cell title opens the box, its section rules and two-cell rows
    /// are read; a one-cell row that is not one of its titles opens
    /// nothing.
    #[test]
    fn dcgmi_stats_box_is_read_by_its_title() {
        let (read, _) = read_with_facts(
            "\
| Summary                                                                      |
+====================================+=========================================+
|-----  Execution Stats  ------------+-----------------------------------------|
| Start Time                         | Thu Aug  3 16:35:00 2023                |
+-----  Event Stats  ----------------+-----------------------------------------+
| Critical XID Errors                | 0                                       |
|        - Thermal (%)               | Not Supported                           |
+-----  Overall Health  -------------+-----------------------------------------+
| Overall Health                     | Healthy                                 |
",
        );
        assert!(read.iter().all(|r| *r), "{read:?}");
        assert!(is_stats_title("GPU ID: 12") && is_stats_title("Summary"));
        assert!(!is_stats_title("GPU ID: ") && !is_stats_title("GPU ID: 1a"));
        assert!(!is_dcgmi_box_header("| Processes: |"));
    }

    /// `systemctl list-units --failed` (https://github.com/systemd/systemd/issues/13733)
    /// and a row through `grep` (https://github.com/cisagov/kali-packer/issues/6):
    /// a failed unit becomes its status; an active one is read and makes none.
    #[test]
    fn list_units_rows_give_failed_units() {
        let (read, facts) = read_with_facts(
            "\
 UNIT             LOAD   ACTIVE SUB    DESCRIPTION                            
● user@975.service loaded failed failed User Manager for UID 975               
● systemd-modules-load.service                     loaded failed failed    Load Kernel Modules 
  ssh.service loaded active running OpenBSD Secure Shell server
",
        );
        assert!(read.iter().all(|r| *r), "{read:?}");
        let got: Vec<_> = facts
            .unit_statuses
            .iter()
            .map(|u| {
                (
                    u.unit.as_str(),
                    u.active_state.as_deref(),
                    u.sub_state.as_deref(),
                    u.description.as_deref(),
                    u.span.line,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "user@975.service",
                    Some("failed"),
                    Some("failed"),
                    Some("User Manager for UID 975"),
                    2
                ),
                (
                    "systemd-modules-load.service",
                    Some("failed"),
                    Some("failed"),
                    Some("Load Kernel Modules"),
                    3
                ),
            ]
        );
    }
}
