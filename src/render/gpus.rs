//! The per-GPU memory picture every report draws: a small read-only view of
//! the incident's GPUs and the processes holding their memory, built once
//! so renderers never reach into `correlate`.

use crate::correlate::Incident;
use crate::rules::Finding;

/// One GPU: how full it is, who holds it, and whether it stands out.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuBar {
    pub index: u32,
    pub name: Option<String>,
    pub used_mib: Option<u64>,
    pub total_mib: Option<u64>,
    /// Processes on the GPU, most memory first.
    pub holders: Vec<GpuHolder>,
    /// The root cause names this GPU.
    pub cited: bool,
    /// Its used memory differs from most GPUs of the host: the one to look at.
    pub odd: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GpuHolder {
    pub pid: u32,
    /// The process name nvidia-smi printed (possibly cut on the left).
    pub name: String,
    pub unit: Option<String>,
    pub used_mib: Option<u64>,
}

/// Used memory further than this fraction of the GPU's capacity from the
/// host's median marks a GPU as odd (a few GiB of CUDA context do not).
const ODD_SHARE: f64 = 0.10;
/// Capacities further apart than this fraction are different cards.
const CAPACITY_SPREAD: f64 = 0.03;

pub fn view(incident: &Incident, root: Option<&Finding>) -> Vec<GpuBar> {
    let mut bars: Vec<GpuBar> = incident
        .gpus
        .iter()
        .map(|g| {
            let mut holders: Vec<GpuHolder> = incident
                .processes_on(g.index)
                .map(|p| GpuHolder {
                    pid: p.pid,
                    name: p.name.clone(),
                    unit: incident.owner(p.pid).map(|o| o.unit.clone()),
                    used_mib: p.used_mib,
                })
                .collect();
            holders.sort_by_key(|h| (std::cmp::Reverse(h.used_mib), h.pid));
            GpuBar {
                index: g.index,
                name: g.name.clone(),
                used_mib: g.memory_used_mib,
                total_mib: g.memory_total_mib,
                holders,
                cited: root.is_some_and(|f| f.entities.gpus.contains(&g.index)),
                odd: false,
            }
        })
        .collect();
    mark_odd(&mut bars);
    bars
}

/// With three GPUs or more, the ones far from the median stand out; with
/// fewer there is no majority to differ from.
fn mark_odd(bars: &mut [GpuBar]) {
    let median = |values: Vec<u64>| {
        let mut values = values;
        values.sort_unstable();
        values.get(values.len() / 2).map(|v| *v as f64)
    };
    if bars.len() < 3 {
        return;
    }
    let used = median(bars.iter().filter_map(|b| b.used_mib).collect());
    let total = median(bars.iter().filter_map(|b| b.total_mib).collect());
    for b in bars.iter_mut() {
        let Some(t) = b.total_mib.filter(|t| *t > 0) else {
            continue;
        };
        let t = t as f64;
        let odd_use = matches!((b.used_mib, used), (Some(u), Some(m)) if (u as f64 - m).abs() > t * ODD_SHARE);
        // A card of another size (a 40 GB among 80 GB ones).
        let odd_size = total.is_some_and(|m| (t - m).abs() > m * CAPACITY_SPREAD);
        b.odd = odd_use || odd_size;
    }
}

/// `55,286 MiB`.
pub fn mib(value: u64) -> String {
    format!("{} MiB", thousands(value))
}

/// `55286` → `55,286`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(index: u32, used: u64) -> GpuBar {
        GpuBar {
            index,
            name: None,
            used_mib: Some(used),
            total_mib: Some(97_887),
            holders: Vec::new(),
            cited: false,
            odd: false,
        }
    }

    #[test]
    fn the_gpu_far_from_the_median_is_odd() {
        let cases: &[(&[u64], &[bool])] = &[
            (&[55_295, 0, 0, 0], &[true, false, false, false]),
            (&[90_000, 90_100, 3, 90_050], &[false, false, true, false]),
            (&[1_500, 0, 2_000], &[false, false, false]),
            // Two GPUs: no majority, nothing is odd.
            (&[55_295, 0], &[false, false]),
        ];
        let mut mixed: Vec<GpuBar> = (0..4).map(|i| bar(i, 0)).collect();
        mixed[2].total_mib = Some(40_960);
        mark_odd(&mut mixed);
        assert_eq!(
            mixed.iter().map(|b| b.odd).collect::<Vec<_>>(),
            [false, false, true, false]
        );
        for (used, want) in cases {
            let mut bars: Vec<GpuBar> = used
                .iter()
                .enumerate()
                .map(|(i, u)| bar(i as u32, *u))
                .collect();
            mark_odd(&mut bars);
            let got: Vec<bool> = bars.iter().map(|b| b.odd).collect();
            assert_eq!(&got, want, "{used:?}");
        }
    }
}
