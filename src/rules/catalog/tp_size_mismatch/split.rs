//! A weight a converter splits over the tensor-parallel ranks whose split
//! dimension the TP size does not divide: TurboMind's `*** splitting
//! layers.0.feed_forward.w2.scales_zeros, shape=torch.Size([108, 5120]),
//! split_dim=0` under `--tp 8` (108 AWQ groups over 8 ranks). The numbers
//! decide, not the traceback after them: a split that divides evenly is
//! no finding, whatever follows it.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Finding};

/// TurboMind's converter's line for each tensor it splits
/// (catalogs/stacks-lmdeploy.toml).
const SPLIT: &str = "stacks-lmdeploy.turbomind-split-tensor";

/// The TP size on the command line that ran the converter or the server.
static TP_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|\s)--(?:tp|tp[_-]size|tensor[_-]parallel[_-]size)(?:=|\s+)(?P<tp>[0-9]+)\b")
        .expect("tp flag regex")
});

/// A split that cannot be even.
pub(super) struct Uneven<'a> {
    pub line: &'a Message,
    pub name: String,
    pub shape: String,
    pub dim: i64,
    /// The length of the split dimension.
    pub size: u64,
    pub tp: u64,
}

impl Uneven<'_> {
    /// What the finding's title says.
    pub fn detail(&self) -> String {
        format!(
            "{} (shape [{}]) has {} along dimension {}, which {} tensor-parallel ranks cannot split evenly ({} = {} x {} + {})",
            self.name,
            self.shape,
            self.size,
            self.dim,
            self.tp,
            self.size,
            self.tp,
            self.size / self.tp,
            self.size % self.tp
        )
    }

    /// The line's words from `shape=` to the split dimension
    /// (`shape=torch.Size([108, 5120]), split_dim=0`), to underline.
    pub fn quote(&self) -> String {
        let text = &self.line.text;
        let dim = format!("split_dim={}", self.dim);
        match (text.find("shape="), text.find(&dim)) {
            (Some(a), Some(b)) if b >= a => text[a..b + dim.len()].to_owned(),
            _ => dim,
        }
    }

    /// Cites the split line, its shape and dimension underlined.
    pub fn cite(&self, f: &mut Finding) {
        f.evidence_marked(
            self.line.span,
            format!(
                "the converter splits this tensor over {} ranks along dimension {}: {} is not a multiple of {}",
                self.tp, self.dim, self.size, self.tp
            ),
            self.quote(),
        );
    }

    /// The arithmetic, as a condition met.
    pub fn reconcile(&self, f: &mut Finding) {
        f.condition(
            format!(
                "the numbers reconcile: {} mod {} = {}, not 0",
                self.size,
                self.tp,
                self.size % self.tp
            ),
            true,
        );
    }

    /// What to do: a TP size that fits (those that divide the dimension),
    /// or another quantization group size.
    pub fn advice(&self) -> Action {
        let fitting = self.fitting();
        let sizes = if fitting.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = fitting.iter().map(u64::to_string).collect();
            format!(" ({} divide {})", list.join(", "), self.size)
        };
        Action::advice(
            format!(
                "choose a TP size that divides every split dimension{sizes}, or re-quantize with a group size that makes the quantized layers' group counts divisible by {}",
                self.tp
            ),
            None,
        )
    }

    /// The TP sizes (powers of two below the one asked for) that divide the
    /// dimension.
    pub fn fitting(&self) -> Vec<u64> {
        std::iter::successors(Some(1u64), |n| n.checked_mul(2))
            .take_while(|n| *n < self.tp)
            .filter(|n| self.size % n == 0)
            .collect()
    }
}

/// The first split in the inputs that its TP size does not divide: the TP
/// size printed on the line (`tp=N`, `split_num=N`), else the `--tp` of the
/// last command typed before it in the same input.
pub(super) fn uneven(incident: &Incident) -> Option<Uneven<'_>> {
    incident.known(SPLIT).find_map(|(m, hit)| {
        let shape: Vec<u64> = hit
            .get("shape")?
            .split(',')
            .map(|d| d.trim().parse().ok())
            .collect::<Option<_>>()?;
        let dim: i64 = hit.get("dim")?.trim().parse().ok()?;
        let at = if dim < 0 {
            i64::try_from(shape.len()).ok()? + dim
        } else {
            dim
        };
        let size = *shape.get(usize::try_from(at).ok()?)?;
        let tp = match hit.get("tp").and_then(|t| t.trim().parse::<u64>().ok()) {
            Some(t) => t,
            None => tp_typed_before(incident, m)?,
        };
        (tp > 1 && size % tp != 0).then(|| Uneven {
            line: m,
            name: hit.get("name").unwrap_or("a tensor").to_owned(),
            shape: hit.get("shape").unwrap_or_default().to_owned(),
            dim,
            size,
            tp,
        })
    })
}

/// The TP flag with its value as typed (`--tp 8`), to underline.
pub(super) fn tp_flag(command: &str) -> Option<&str> {
    TP_FLAG
        .captures(command)
        .and_then(|c| c.get(0))
        .map(|m| m.as_str().trim())
}

/// The `--tp N` of the last command typed before `at` in its input.
fn tp_typed_before(incident: &Incident, at: &Message) -> Option<u64> {
    let command = incident
        .facts
        .typed_commands
        .iter()
        .filter(|c| c.span.source == at.span.source && c.span < at.span)
        .max_by_key(|c| c.span)?;
    TP_FLAG.captures(&command.command)?["tp"].parse().ok()
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of("tp-size-mismatch", text)
    }

    /// lmdeploy's converter prints the TP size on the line since 0.4
    /// (`split_num=N`, target_model/base.py's format, rendered with
    /// Llama-2-13B's AWQ down-projection scales: 13824 / 128 = 108 groups).
    #[test]
    fn a_split_dimension_the_tp_size_does_not_divide_is_the_mismatch() {
        let text = "*** splitting layers.0.feed_forward.w2.scales_zeros, shape=torch.Size([108, 5120]), split_dim=0, split_num=8\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::TpSizeMismatch);
        assert!(f[0].title.contains("108 = 8 x 13 + 4"), "{}", f[0].title);
        assert!(
            f[0].actions
                .iter()
                .any(|a| format!("{a:?}").contains("1, 2, 4 divide 108")),
            "{:?}",
            f[0].actions
        );
    }

    /// Numbers before blame: the same tensor over 4 ranks splits evenly,
    /// and a negative dimension counts from the end.
    #[test]
    fn an_even_split_is_no_finding() {
        assert!(findings("*** splitting layers.0.feed_forward.w2.scales_zeros, shape=torch.Size([108, 5120]), split_dim=0, split_num=4\n").is_empty());
        assert!(findings("*** splitting layers.0.attention.w_qkv.scales_zeros, shape=torch.Size([32, 12288]), split_dim=-1, tp=8\n").is_empty());
        assert_eq!(
            findings("*** splitting layers.0.attention.w_qkv.scales_zeros, shape=torch.Size([32, 12290]), split_dim=-1, tp=8\n").len(),
            1
        );
    }

    /// The 0.0.x converter printed no TP size: the command's `--tp` gives it
    /// (a reduction of batch AA 1931, InternLM/lmdeploy#268: the command and
    /// the split line). Without the command there are no numbers to blame.
    #[test]
    fn the_tp_size_comes_from_the_command_when_the_line_has_none() {
        let line = "*** splitting layers.0.feed_forward.w2.scales_zeros, shape=torch.Size([108, 5120]), split_dim=0\n";
        let text = format!(
            "$ python3 -m lmdeploy.serve.turbomind.deploy --model-name llama2 --model-path ./llama2-chat-13b-w4 --model-format awq --group-size 128 --dst_path ./i4t8 --tp 8\n{line}"
        );
        let f = findings(&text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].evidence.len() >= 2, "{:?}", f[0].evidence);
        assert!(findings(line).is_empty());
    }
}
