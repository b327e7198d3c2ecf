//! NCCL debug lines (`NCCL_DEBUG=WARN|INFO`, docs/formats/servers.md):
//! `[YYYY-MM-DD HH:MM:SS] host:pid:tid [dev] file:line (func) NCCL WARN msg`,
//! the timestamp from 2.26, the function from 2.27. Warnings are kept, and of
//! the many INFO lines only those naming the version or a rank's GPU, and
//! the channels routed through host shared memory (no GPU peer-to-peer path).

use std::sync::LazyLock;

use chrono::NaiveDateTime;
use regex::Regex;

use crate::model::{NcclDetail, NcclLevel, NcclLine, Timestamp};

static LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\[(?P<ts>[0-9]{4}-[0-9][0-9]-[0-9][0-9]\x20[0-9][0-9]:[0-9][0-9]:[0-9][0-9])\]\x20)?
        (?P<host>[A-Za-z0-9][0-9A-Za-z_.-]*):(?P<pid>[0-9]+):(?P<tid>[0-9]+)\x20\[(?P<dev>-?[0-9]+)\]\x20
        (?:(?P<source>[0-9A-Za-z_./-]+:[0-9]+)(?:\x20\((?P<func>[0-9A-Za-z_]+)\))?\x20)?
        NCCL\x20(?P<level>INFO|WARN|ERROR|ABORT|TRACE)(?:\x20(?P<msg>.*))?$",
    )
    .expect("nccl line regex")
});

static VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^NCCL version (?P<v>\S+)").expect("nccl version regex"));

static COMM_INIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"comm 0x[0-9a-f]+ rank (?P<rank>[0-9]+) nranks (?P<nranks>[0-9]+) cudaDev (?P<dev>[0-9]+)(?: nvmlDev [0-9]+)? busId (?P<bus>[0-9a-f]+).* Init COMPLETE",
    )
    .expect("nccl comm init regex")
});

static CUDA_FAILURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Cuda failure (?:(?P<code>[0-9]+) )?'(?P<error>[^']+)'")
        .expect("cuda failure regex")
});

/// A channel between two GPUs of one host through shared memory:
/// `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct` (2.19),
/// `Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct` (2.20 –).
static SHM_CHANNEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Channel [0-9]+(?:/[0-9]+)? : [0-9]+\[(?P<dev>[0-9a-f]+)\] -> [0-9]+\[[0-9a-f]+\] (?:\[(?:send|receive)\] )?via SHM/")
        .expect("nccl shm channel regex")
});

pub(super) struct NcclParsed {
    pub line: NcclLine,
    pub time: Option<Timestamp>,
}

pub(super) fn parse(text: &str) -> Option<NcclParsed> {
    let c = LINE.captures(text)?;
    let level = match &c["level"] {
        "INFO" => NcclLevel::Info,
        "WARN" => NcclLevel::Warn,
        "ERROR" => NcclLevel::Error,
        "ABORT" => NcclLevel::Abort,
        _ => NcclLevel::Trace,
    };
    let message = c.name("msg").map_or("", |m| m.as_str()).to_owned();
    let detail = detail(&message);
    let time = c.name("ts").and_then(|ts| {
        let local = NaiveDateTime::parse_from_str(ts.as_str(), "%Y-%m-%d %H:%M:%S").ok()?;
        Some(Timestamp {
            local,
            offset_secs: None,
            year_known: true,
        })
    });
    Some(NcclParsed {
        line: NcclLine {
            host: c["host"].to_owned(),
            pid: c["pid"].parse().ok()?,
            tid: c["tid"].parse().ok()?,
            cuda_dev: c["dev"].parse().ok(),
            level,
            source: c.name("source").map(|m| m.as_str().to_owned()),
            function: c.name("func").map(|m| m.as_str().to_owned()),
            message,
            detail,
        },
        time,
    })
}

/// Warnings and errors always; INFO only when it says something rules use.
pub(super) fn worth_keeping(line: &NcclLine) -> bool {
    line.level != NcclLevel::Info || line.detail != NcclDetail::None
}

fn detail(message: &str) -> NcclDetail {
    if let Some(c) = VERSION.captures(message) {
        return NcclDetail::Version(c["v"].to_owned());
    }
    if let Some(c) = CUDA_FAILURE.captures(message) {
        return NcclDetail::CudaFailure {
            code: c.name("code").and_then(|m| m.as_str().parse().ok()),
            error: c["error"].to_owned(),
        };
    }
    if let Some(c) = message
        .starts_with("Channel ")
        .then(|| SHM_CHANNEL.captures(message))
        .flatten()
    {
        // An index is a few decimal digits; a bus id (NCCL < 2.12) five hex.
        let dev = &c["dev"];
        return if dev.len() < 4 {
            NcclDetail::ShmChannel {
                nvml_dev: dev.parse().ok(),
                bus_id: None,
            }
        } else {
            NcclDetail::ShmChannel {
                nvml_dev: None,
                bus_id: bus_id(dev),
            }
        };
    }
    if let Some(c) = COMM_INIT.captures(message) {
        if let (Ok(rank), Ok(nranks), Ok(cuda_dev)) =
            (c["rank"].parse(), c["nranks"].parse(), c["dev"].parse())
        {
            return NcclDetail::CommInit {
                rank,
                nranks,
                cuda_dev,
                bus_id: bus_id(&c["bus"]),
            };
        }
    }
    NcclDetail::None
}

/// NCCL prints a bus id as the hex number of its digits (`0000:18:00.0` →
/// `18000`); pad it back and re-punctuate.
fn bus_id(hex: &str) -> Option<String> {
    if hex.len() > 12 {
        return None;
    }
    let padded = format!("{hex:0>9}");
    let (domain, rest) = padded.split_at(padded.len() - 5);
    let domain = &domain[domain.len().saturating_sub(4)..];
    Some(format!(
        "{:0>4}:{}:{}.{}",
        domain,
        &rest[0..2],
        &rest[2..4],
        &rest[4..5]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids() {
        assert_eq!(bus_id("18000").as_deref(), Some("0000:18:00.0"));
        assert_eq!(bus_id("bd000").as_deref(), Some("0000:bd:00.0"));
        assert_eq!(bus_id("11a000").as_deref(), Some("0001:1a:00.0"));
    }

    #[test]
    fn a_channel_through_shared_memory_is_kept_and_a_p2p_one_is_not() {
        // https://github.com/vllm-project/vllm/issues/9920 and
        // https://github.com/NVIDIA/nccl/issues/1609 (rank 2 on GPU 6, CUDA
        // ordinal 2).
        for (line, gpu) in [
            (
                "HP-Z8-Fury-G5-Workstation-Desktop-PC:23541:23541 [1] NCCL INFO Channel 01 : 1[1] -> 0[0] via SHM/direct/direct",
                1,
            ),
            (
                "tj5-sc-ai-h800r-dev01:533:1765 [2] NCCL INFO Channel 07 : 2[6] -> 3[7] via SHM/direct/direct",
                6,
            ),
        ] {
            let p = parse(line).unwrap_or_else(|| panic!("{line}"));
            let want = NcclDetail::ShmChannel {
                nvml_dev: Some(gpu),
                bus_id: None,
            };
            assert_eq!(p.line.detail, want, "{line}");
            assert!(worth_keeping(&p.line));
        }
        // https://github.com/NVIDIA/nccl-tests/issues/213: a P2P channel is
        // the healthy path, read and dropped.
        let p2p =
            parse("hw14:798:813 [3] NCCL INFO Channel 02/0 : 3[3] -> 4[4] via P2P/direct pointer")
                .expect("p2p line");
        assert_eq!(p2p.line.detail, NcclDetail::None);
        assert!(!worth_keeping(&p2p.line));
    }
}
