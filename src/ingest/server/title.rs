//! Server process names to ranks: the titles SGLang and vLLM give their
//! processes (`sglang::scheduler_DP0_TP0_EP0`, `VLLM::Worker_TP1`, as ps and
//! nvidia-smi show them) and the names in vLLM's line prefixes
//! (`(Worker_PP1_TP0 pid=…)`, `(VllmWorker rank=1 pid=…)`).

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{Framework, RankTag, ServerProcess};

static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(ATTN_CP|MOE_DP|DP|PP|TP|EP)([0-9]+)").expect("rank tag regex"));

/// The kernel keeps 15 bytes of a process name (`comm`).
const COMM_LEN: usize = 15;

/// Reads a process title set by SGLang (`sglang::…`) or vLLM (`VLLM::…`),
/// also when cut to the kernel's 15 bytes or by nvidia-smi on the left.
/// `None` for anything else (a main process keeps its argv).
pub fn process_title(title: &str) -> Option<ServerProcess> {
    let title = title.trim();
    // nvidia-smi's table cuts long names on the left: `...ang::scheduler_TP0`.
    let (title, cut_left) = match title.strip_prefix("...") {
        Some(rest) => (rest, true),
        None => (title, false),
    };
    let (head, rest) = title
        .split_once("::")
        .filter(|(head, _)| !head.is_empty())?;
    let matches = |full: &str| {
        if cut_left {
            full.ends_with(head)
        } else {
            full == head
        }
    };
    let framework = if matches("sglang") {
        Framework::Sglang
    } else if matches("VLLM") {
        Framework::Vllm
    } else {
        return None;
    };
    let mut process = role(framework, rest)?;
    process.maybe_truncated = cut_left || title.len() == COMM_LEN;
    Some(process)
}

/// The process names vLLM puts in its line prefixes (docs/formats/servers.md).
const VLLM_ROLES: [&str; 9] = [
    "VllmWorkerProcess",
    "VllmWorker",
    "Worker",
    "EngineCore",
    "APIServer",
    "RayWorkerVllm",
    "RayWorkerWrapper",
    "MainProcess",
    "DPCoordinator",
];

/// Whether a line prefix's process name is one of vLLM's.
pub(crate) fn is_vllm_process_name(name: &str) -> bool {
    vllm_prefix_name(name, None).is_some()
}

/// Reads the process name of a vLLM line prefix (`EngineCore_DP0`,
/// `Worker_TP1`, `VllmWorkerProcess`, `VllmWorker` with its `rank=`).
/// `None` when the name is not one vLLM uses (a Ray actor of another program).
pub(super) fn vllm_prefix_name(name: &str, rank: Option<u32>) -> Option<ServerProcess> {
    let mut process = role(Framework::Vllm, name)?;
    if !VLLM_ROLES.contains(&process.role.as_str()) {
        return None;
    }
    if rank.is_some() {
        process.rank.global = rank;
    }
    Some(process)
}

/// Splits `scheduler_DP0_TP0_EP0` into its role and ranks.
pub(super) fn role(framework: Framework, text: &str) -> Option<ServerProcess> {
    let (role, tags, index) = split_role(text)?;
    let mut rank = RankTag::default();
    apply_tags(tags, &mut rank);
    Some(ServerProcess {
        framework,
        role: role.to_owned(),
        rank,
        index: index.and_then(|i| i.parse().ok()),
        maybe_truncated: false,
    })
}

/// The rank tags a process name may carry after its role, longest first
/// where one starts another's letters.
const RANK_TAGS: [&str; 6] = ["ATTN_CP", "MOE_DP", "DP", "PP", "TP", "EP"];

/// `role` + `_DPn_PPn_ATTN_CPn_MOE_DPn_TPn_EPn` (any subset, any order) +
/// an optional bare instance number (`_3`, `-3`): the shortest role of
/// letters and `_` after which the rest is tags and index to the end. By
/// hand, not a regex: every line of a raw vLLM log carries a process name
/// (issue 23: its lazy capture cost as much as the rest of the sniffer).
fn split_role(text: &str) -> Option<(&str, &str, Option<&str>)> {
    let b = text.as_bytes();
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    let run = b
        .iter()
        .take_while(|c| c.is_ascii_alphabetic() || **c == b'_')
        .count();
    (1..=run).find_map(|end| {
        let (tags, index) = tags_and_index(&text[end..])?;
        Some((&text[..end], tags, index))
    })
}

/// `rest` as `(_TAGn)*` then `([_-]n)?` and nothing more.
fn tags_and_index(rest: &str) -> Option<(&str, Option<&str>)> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut at = 0;
    while let Some(tail) = rest[at..].strip_prefix('_') {
        let Some(tag) = RANK_TAGS.iter().find(|t| tail.starts_with(**t)) else {
            break;
        };
        let n = digits(&tail[tag.len()..]);
        if n == 0 {
            break;
        }
        at += 1 + tag.len() + n;
    }
    let (tags, after) = rest.split_at(at);
    match after.as_bytes().first() {
        None => Some((tags, None)),
        Some(b'_' | b'-') if after.len() > 1 && digits(&after[1..]) == after.len() - 1 => {
            Some((tags, Some(&after[1..])))
        }
        _ => None,
    }
}

/// Sets the ranks named in `DP0 TP3` / `_DP0_TP3` on `rank`.
pub(super) fn apply_tags(tags: &str, rank: &mut RankTag) {
    for c in TAG.captures_iter(tags) {
        let n = c[2].parse().ok();
        match &c[1] {
            "DP" => rank.dp = n,
            "PP" => rank.pp = n,
            "TP" => rank.tp = n,
            "EP" => rank.ep = n,
            "ATTN_CP" => rank.attn_cp = n,
            "MOE_DP" => rank.moe_dp = n,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regex [`split_role`] replaced, kept as its oracle.
    static ROLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^(?P<role>[A-Za-z][A-Za-z_]*?)(?P<tags>(?:_(?:ATTN_CP|MOE_DP|DP|PP|TP|EP)[0-9]+)*)(?:[_-](?P<index>[0-9]+))?$",
        )
        .expect("process role regex")
    });

    #[test]
    fn roles_split_as_the_regex_did() {
        let names = [
            "scheduler_DP0_TP0_EP0",
            "Worker_PP1_TP0",
            "EngineCore_DP0",
            "VllmWorkerProcess",
            "VllmWorker",
            "RayWorkerWrapper",
            "DPCoordinator",
            "scheduler_TP3_2",
            "scheduler-3",
            "scheduler_ATTN_CP1_MOE_DP2_TP0",
            "detokenizer",
            "Worker_TP",
            "Worker_TPx",
            "Worker_TP1x",
            "Worker__TP1",
            "Worker_TP1_",
            "Worker_TP1-",
            "Worker_",
            "Worker_12",
            "Worker_DP_1",
            "A",
            "_Worker",
            "9Worker",
            "Wörker_TP1",
            "Worker_TP１",
            "",
            "MOE_DP1",
            "DP_DP1",
            "a_b_c_TP1_EP2-7",
        ];
        for name in names {
            let want = ROLE.captures(name).map(|c| {
                (
                    c.name("role").map_or("", |m| m.as_str()),
                    c.name("tags").map_or("", |m| m.as_str()),
                    c.name("index").map(|m| m.as_str()),
                )
            });
            assert_eq!(split_role(name), want, "{name:?}");
        }
    }

    fn rank(dp: Option<u32>, pp: Option<u32>, tp: Option<u32>, ep: Option<u32>) -> RankTag {
        RankTag {
            dp,
            pp,
            tp,
            ep,
            ..RankTag::default()
        }
    }

    #[test]
    fn titles_become_roles_and_ranks() {
        type Case = (
            &'static str,
            Framework,
            &'static str,
            RankTag,
            Option<u32>,
            bool,
        );
        let cases: [Case; 9] = [
            (
                "sglang::scheduler_TP0",
                Framework::Sglang,
                "scheduler",
                rank(None, None, Some(0), None),
                None,
                false,
            ),
            (
                "sglang::scheduler_DP0_TP0_EP0",
                Framework::Sglang,
                "scheduler",
                rank(Some(0), None, Some(0), Some(0)),
                None,
                false,
            ),
            (
                "sglang::scheduler_DP1_PP1_TP3",
                Framework::Sglang,
                "scheduler",
                rank(Some(1), Some(1), Some(3), None),
                None,
                false,
            ),
            (
                "sglang::scheduler",
                Framework::Sglang,
                "scheduler",
                RankTag::default(),
                None,
                false,
            ),
            (
                "sglang::detokenizer",
                Framework::Sglang,
                "detokenizer",
                RankTag::default(),
                None,
                false,
            ),
            // The kernel's 15-byte comm: the rank is gone.
            (
                "sglang::schedul",
                Framework::Sglang,
                "schedul",
                RankTag::default(),
                None,
                true,
            ),
            (
                "VLLM::Worker_PP1_TP0",
                Framework::Vllm,
                "Worker",
                rank(None, Some(1), Some(0), None),
                None,
                false,
            ),
            (
                "VLLM::EngineCore_DP0",
                Framework::Vllm,
                "EngineCore",
                rank(Some(0), None, None, None),
                None,
                false,
            ),
            (
                "VLLM::APIServer_0",
                Framework::Vllm,
                "APIServer",
                RankTag::default(),
                Some(0),
                false,
            ),
        ];
        for (title, framework, role, ranks, index, truncated) in cases {
            let p = process_title(title).unwrap_or_else(|| panic!("{title}"));
            assert_eq!(
                (
                    p.framework,
                    p.role.as_str(),
                    p.rank,
                    p.index,
                    p.maybe_truncated
                ),
                (framework, role, ranks, index, truncated),
                "{title}"
            );
        }
    }

    #[test]
    fn names_cut_on_the_left_by_nvidia_smi() {
        let p = process_title("...ang::scheduler_DP1_TP3").unwrap();
        assert_eq!(
            (p.framework, p.role.as_str()),
            (Framework::Sglang, "scheduler")
        );
        assert_eq!(
            (p.rank.dp, p.rank.tp, p.maybe_truncated),
            (Some(1), Some(3), true)
        );
        let p = process_title("...M::Worker_TP1").unwrap();
        assert_eq!((p.framework, p.rank.tp), (Framework::Vllm, Some(1)));
    }

    #[test]
    fn attention_cp_and_moe_dp_ranks() {
        let p = process_title("sglang::scheduler_DP0_ATTN_CP1_MOE_DP2_TP3_EP4").unwrap();
        assert_eq!(p.rank.attn_cp, Some(1));
        assert_eq!(p.rank.moe_dp, Some(2));
        assert_eq!(p.rank.dp, Some(0));
        assert_eq!(p.rank.tp, Some(3));
        assert_eq!(p.rank.ep, Some(4));
        assert_eq!(p.rank.to_string(), "DP0 ATTN_CP1 MOE_DP2 TP3 EP4");
    }

    #[test]
    fn other_names_are_not_server_titles() {
        for name in [
            "python3",
            "python3 -m sglang.launch_server",
            "sglang::",
            "VLLM::_x",
            "ddtree::worker",
        ] {
            assert_eq!(process_title(name), None, "{name}");
        }
    }

    #[test]
    fn vllm_prefix_names() {
        let w = vllm_prefix_name("VllmWorker", Some(1)).unwrap();
        assert_eq!(w.rank.global, Some(1));
        let w = vllm_prefix_name("Worker_DP0_TP1_EP1", None).unwrap();
        assert_eq!(
            (w.rank.dp, w.rank.tp, w.rank.ep),
            (Some(0), Some(1), Some(1))
        );
        assert!(vllm_prefix_name("WorkerDict", None).is_none());
        assert!(vllm_prefix_name("MainProcess", None).is_some());
    }
}
