//! Which kept lines are messages of the upstream catalogs
//! ([`crate::catalogs`]): each line is matched once here, and rules ask by
//! row id.

use crate::catalogs::{Hit, catalogs};
use crate::model::Message;

/// A kept line that is an instance of a catalog row (or of a wrapper whose
/// code no row knows).
#[derive(Debug, Clone)]
pub struct Known {
    /// Its index in `Facts::messages`.
    pub message: usize,
    pub hit: Hit<'static>,
}

/// The symptom rows' hits of the kept lines no exact row read (`known`,
/// in input order, as [`match_messages`] gives it): the most specific row
/// wins a line, and a line read by none gets its failure class's row.
pub fn match_symptoms(messages: &[Message], known: &[Known]) -> Vec<Known> {
    let all = catalogs();
    let mut read = known.iter().map(|k| k.message).peekable();
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        while read.next_if(|&k| k < i).is_some() {}
        if read.peek() == Some(&i) {
            continue;
        }
        out.extend(
            all.symptoms_alone(&m.text)
                .into_iter()
                .map(|hit| Known { message: i, hit }),
        );
    }
    out
}

/// Kept lines from which the matching is shared between two threads: a
/// big input's tens of thousands of messages are most of the time after
/// its last line is read; a small one's are not worth a thread.
const PARALLEL_FROM: usize = 4096;

/// Every catalog hit of every kept line, in input order.
pub fn match_messages(messages: &[Message]) -> Vec<Known> {
    let threads = match messages.len() >= PARALLEL_FROM {
        true => std::thread::available_parallelism().map_or(1, |n| n.get().min(2)),
        false => 1,
    };
    match_on(messages, threads)
}

/// [`match_messages`] on `threads` threads: each matches a run of the
/// messages, and the runs are joined in order, so the result is one
/// thread's.
fn match_on(messages: &[Message], threads: usize) -> Vec<Known> {
    let run = |first: usize, messages: &[Message]| -> Vec<Known> {
        let all = catalogs();
        messages
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                all.hits(&m.text).into_iter().map(move |hit| Known {
                    message: first + i,
                    hit,
                })
            })
            .collect()
    };
    if threads <= 1 || messages.len() < 2 {
        return run(0, messages);
    }
    let size = messages.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut runs = messages.chunks(size).enumerate();
        let (_, first) = runs.next().unwrap_or((0, &[]));
        let others: Vec<_> = runs
            .map(|(k, chunk)| scope.spawn(move || run(k * size, chunk)))
            .collect();
        let mut known = run(0, first);
        for other in others {
            known.extend(
                other
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        known
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{SourceId, Span};

    /// Matching on threads is matching on one: the same hits, for the same
    /// messages, in the same order, however the messages are shared.
    #[test]
    fn threads_match_as_one_thread_does() {
        let lines = [
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "a line no catalog knows",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "NCCL WARN Cuda failure 'out of memory'",
            "RuntimeError: CUDA error: out of memory",
            "ollama.service: Main process exited, code=exited, status=1/FAILURE",
        ];
        let messages: Vec<Message> = (0..5000)
            .map(|i| Message {
                span: Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                },
                text: format!("{} (line {i})", lines[i % lines.len()]),
                pid: None,
            })
            .collect();
        let summary = |known: &[Known]| -> Vec<(usize, Option<String>, String)> {
            known
                .iter()
                .map(|k| {
                    (
                        k.message,
                        k.hit.row.map(|r| r.id.clone()),
                        format!("{:?}", k.hit.captures),
                    )
                })
                .collect()
        };
        let one = summary(&match_on(&messages, 1));
        assert!(one.len() > 3000, "{}", one.len());
        for threads in [2, 3, 7] {
            assert_eq!(summary(&match_on(&messages, threads)), one, "{threads}");
        }
        assert_eq!(summary(&match_messages(&messages)), one);
        assert!(match_on(&[], 2).is_empty());
    }
}
