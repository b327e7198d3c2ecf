//! A rendezvous that part of its world joined (Lightning's `initializing
//! ddp: GLOBAL_RANK: N, MEMBER: k/n`), and NCCL's peer-to-peer check at
//! the group's set-up (`Could not enable P2P between dev …`), as the last
//! lines of a paste.

use super::stage_word_tests::{cites, hang};

/// Lightning-AI/pytorch-lightning#4389 (Lightning 1.0, `srun` with two
/// nodes of four GPUs, each global rank started twice): eight processes
/// print `initializing ddp`, but only ranks 0-3 of the world of 8, and the
/// job hangs there. The missing members, not the GPUs' P2P path, are the
/// story; the description's block verbatim.
#[test]
fn a_world_only_part_of_whose_members_registered_waits_for_the_rest() {
    let text = "GPU available: True, used: True
TPU available: False, using: 0 TPU cores
LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
GPU available: True, used: True
TPU available: False, using: 0 TPU cores
LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
LOCAL_RANK: 1 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8
LOCAL_RANK: 1 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8
LOCAL_RANK: 2 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
initializing ddp: GLOBAL_RANK: 2, MEMBER: 3/8
LOCAL_RANK: 2 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
initializing ddp: GLOBAL_RANK: 2, MEMBER: 3/8
LOCAL_RANK: 3 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/8
LOCAL_RANK: 3 - CUDA_VISIBLE_DEVICES: [0,1,2,3]
initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/8
initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8
initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8
";
    let f = hang(text);
    assert!(
        f.headline.contains("Ranks seen there: 0, 1, 2, 3 (of 8)."),
        "{}",
        f.headline
    );
    assert!(
        f.explanation.contains("only part of its world joined"),
        "{}",
        f.explanation
    );
    assert!(!f.explanation.contains("peer-to-peer"), "{}", f.explanation);
    assert!(cites(&f, text, "GLOBAL_RANK: 0, MEMBER: 1/8"));
}

/// A world whose every member registered is no missing member: Lightning's
/// own rendering of one process (`MEMBER: 1/1`, then its rank 0's
/// `All DDP processes registered`) says the group formed.
#[test]
fn a_whole_world_is_not_missing_members() {
    let text = "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/1\nAll DDP processes registered. Starting ddp with 1 processes\n";
    let f = super::stage_word_tests::stalled(text);
    assert!(
        f.as_ref()
            .is_none_or(|f| !f.explanation.contains("only part of its world joined")),
        "{f:?}"
    );
}

/// NVIDIA/nccl#1214 (Azure, four GPUs, NCCL_IB_DISABLE=1): NCCL's set-up
/// finds P2P disabled between GPUs 1 and 0 and logs the pair, the last
/// lines of the excerpt as cut there: the group is still forming,
/// and the P2P path is the advice.
#[test]
fn nccls_p2p_refusal_as_the_last_lines_is_a_group_still_forming() {
    let text = "e2bd2729de1e4961bccb1c0d6311f3a4000001:349:2588 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>
e2bd2729de1e4961bccb1c0d6311f3a4000001:349:2588 [0] NCCL INFO Using network Socket
e2bd2729de1e4961bccb1c0d6311f3a4000001:349:2588 [0] NCCL INFO comm 0x9ffe0160 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 100000 commId 0x1e29799c32293b9b - Init START
e2bd2729de1e4961bccb1c0d6311f3a4000001:349:2588 [0] NCCL INFO P2P is disabled between connected GPUs 1 and 0. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
e2bd2729de1e4961bccb1c0d6311f3a4000001:349:2588 [0] NCCL INFO Could not enable P2P between dev 1(=200000) and dev 0(=100000)
";
    let f = hang(text);
    assert!(f.title.contains("distributed group"), "{}", f.title);
    assert!(f.explanation.contains("peer-to-peer"), "{}", f.explanation);
    assert!(cites(&f, text, "Could not enable P2P"));
}
