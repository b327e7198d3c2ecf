//! `process-outlived-its-job` over the real paste (batch K 870) and the
//! next such pastes: Slurm's header-only answer, an `lstart` against the
//! inputs' clock, an elapsed column alone.

use super::META;
use crate::testing::findings_of;

/// The batch K case, by one path to change when the batch moves in.
const CASE_870: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/real/870-cbio-torque-yank-mpi-ranks-since-may11-user-has-no-jobs/input.log"
);

fn case_870() -> String {
    std::fs::read_to_string(CASE_870).expect("case 870")
}

/// fixtures/real/870 (cBio/cbio-cluster#415): `qstat -u
/// luirink` prints nothing, then two `ps aux` rows of that user's `yank run
/// --mpi` ranks started `May11` with days of CPU time.
#[test]
fn ranks_of_a_user_the_scheduler_lists_no_job_for() {
    let text = case_870();
    let f = findings_of(META.id, &text);
    assert_eq!(f.len(), 1, "{f:?}");
    let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
    assert_eq!(pids, [13650, 13651]);
    assert!(f[0].headline.contains("May11"), "{}", f[0].headline);
    assert!(
        f[0].headline.contains("qstat -u luirink"),
        "{}",
        f[0].headline
    );
    assert_eq!(f[0].evidence.len(), 3, "{:?}", f[0].evidence);
    assert!(f[0].confidence >= 0.7, "{}", f[0].confidence);
    // The same rows with a time of today: not shown older than the job.
    let today = text.replace("May11", "10:28");
    assert!(findings_of(META.id, &today).is_empty());
    // qstat lists a job of theirs (a row assembled, not copied): the ranks
    // may be that job's.
    let listed = text.replace(
        "qstat -u luirink\n",
        "qstat -u luirink\n3374527.mskcc-fe1   luirink  gpu  yank  13650  2  --  --  72:00  R  71:58\n",
    );
    assert!(findings_of(META.id, &listed).is_empty());
    // Another user's query: nothing said of luirink's processes.
    let other = text.replace("qstat -u luirink", "qstat -u chodera");
    assert!(findings_of(META.id, &other).is_empty());
}

/// A `ps` of a server that has run for months, with no scheduler beside
/// it: its age alone proves nothing.
#[test]
fn an_old_server_alone_is_not_stale() {
    let text: String = case_870()
        .lines()
        .skip(2)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(findings_of(META.id, &text).is_empty());
}

/// The next such paste (assembled, not copied): Slurm's `squeue -u alice`
/// printing only its header, a worker log with a time, and `ps -u alice -o
/// pid,lstart,cmd` rows of `torch.distributed.run` ranks from two days
/// before that time.
#[test]
fn slurm_header_only_and_lstart_against_the_inputs_clock() {
    let paste = "\
alice@node12:~$ squeue -u alice
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
alice@node12:~$ tail -1 worker.log
2025-05-21 14:20:03,114 - worker - ERROR - CUDA out of memory on node12
alice@node12:~$ ps -u alice -o pid,lstart,cmd
    PID                  STARTED CMD
  81234 Mon May 19 09:12:44 2025 /usr/bin/python -m torch.distributed.run --nproc_per_node 2 train.py
  81240 Mon May 19 09:12:46 2025 /usr/bin/python -u train.py --local_rank=0
alice@node12:~$
";
    let f = findings_of(META.id, paste);
    assert_eq!(f.len(), 1, "{f:?}");
    let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
    assert_eq!(pids, [81234, 81240]);
    assert!(f[0].headline.contains("Slurm"), "{}", f[0].headline);
    // Started an hour before the inputs' time: the job's own ranks.
    let fresh = paste.replace("May 19 09:", "May 21 13:");
    assert!(findings_of(META.id, &fresh).is_empty());
    // No time in the inputs: an lstart date alone is no age.
    let unclocked: String = paste
        .lines()
        .filter(|l| !l.contains("ERROR"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(findings_of(META.id, &unclocked).is_empty());
    // squeue lists a running job: the ranks may be its own.
    let running = paste.replace(
        "NODELIST(REASON)\n",
        "NODELIST(REASON)\n            123456       gpu    train    alice  R 2-05:07:40      1 node12\n",
    );
    assert!(findings_of(META.id, &running).is_empty());
}

/// Only an elapsed column (`etimes`, seconds): a day or more is old enough,
/// a number that looks like a year is still seconds (assembled, not
/// copied).
#[test]
fn elapsed_seconds_without_a_start_column() {
    let paste = "\
bob@gpu-3:~$ squeue --user=bob
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
bob@gpu-3:~$ ps -u bob -o pid,etimes,args
    PID ELAPSED COMMAND
 551203  4074589 python -m vllm.entrypoints.openai.api_server --model /models/llama --port 8001
";
    let f = findings_of(META.id, paste);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].entities.pids.contains(&551203));
    assert!(
        f[0].headline.contains("running for 4074589"),
        "{}",
        f[0].headline
    );
    let fresh = paste.replace("4074589", "2024");
    assert!(findings_of(META.id, &fresh).is_empty());
}
