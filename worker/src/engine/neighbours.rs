//! How much CPU other processes use on the cores this worker may run on, from `/proc`: the signal
//! `threads.rs` decides the decoding threads by. llama.cpp's threads spin at their barriers, so a worker
//! decoding on every core of a node where something else is busy loses most of its speed (both engines
//! lost 70–75% of tokens/s beside one busy loop here; docs/benchmarks.md).
//!
//! Others' use is the busy time of our CPUs (`/proc/stat`, per-CPU lines of the CPUs in our affinity
//! mask) less this process's own CPU time (`/proc/self/stat`). Both count in clock ticks (USER_HZ).
//! A CPU quota set by a cgroup (`cpu.max`) is not seen: only the cpuset is.

use std::collections::BTreeSet;

/// Busy and total ticks summed over a set of CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub busy: u64,
    pub total: u64,
}

/// Samples others' CPU use between calls.
#[derive(Debug)]
pub struct Neighbours {
    /// The CPUs this process may run on; empty means every CPU `/proc/stat` lists.
    allowed: BTreeSet<usize>,
    /// How many CPUs are counted: the affinity mask's, or every CPU when it could not be read.
    cpus: usize,
    last: Option<(CpuTicks, u64)>,
}

impl Neighbours {
    #[must_use]
    pub fn new() -> Self {
        let allowed = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| allowed_cpus(&s)).unwrap_or_default();
        let cpus =
            if allowed.is_empty() { std::fs::read_to_string("/proc/stat").map_or(0, |s| per_cpu(&s).count()) } else { allowed.len() };
        Self { allowed, cpus, last: None }
    }

    /// CPUs counted (the affinity mask's, or every CPU when it could not be read).
    #[must_use]
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Cores' worth of CPU other processes used since the previous call (`None` on the first call, or
    /// where `/proc` cannot be read).
    pub fn sample(&mut self) -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let own = own_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        let ticks = cpu_ticks(&stat, &self.allowed);
        let previous = self.last.replace((ticks, own))?;
        Some(others_cores(previous, (ticks, own), self.cpus))
    }
}

impl Default for Neighbours {
    fn default() -> Self {
        Self::new()
    }
}

/// Others' CPU in cores between two samples of (our CPUs' ticks, this process's ticks).
fn others_cores(before: (CpuTicks, u64), after: (CpuTicks, u64), cpus: usize) -> f64 {
    let total = after.0.total.saturating_sub(before.0.total);
    if total == 0 || cpus == 0 {
        return 0.0;
    }
    let busy = after.0.busy.saturating_sub(before.0.busy);
    let own = after.1.saturating_sub(before.1);
    // Our threads may run outside the counted CPUs for a moment: never below zero.
    let others = busy.saturating_sub(own);
    // `total` is every counted CPU's ticks together: divided by the CPUs, the wall time in ticks.
    #[allow(clippy::cast_precision_loss)]
    let cores = others as f64 * cpus as f64 / total as f64;
    cores
}

/// The per-CPU lines of `/proc/stat`: (CPU number, its ticks).
fn per_cpu(stat: &str) -> impl Iterator<Item = (usize, CpuTicks)> + '_ {
    stat.lines().filter_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let cpu: usize = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
        // user nice system idle iowait irq softirq steal (guest time is already inside user).
        let values: Vec<u64> = fields.take(8).map(|v| v.parse().unwrap_or(0)).collect();
        let [user, nice, system, idle, iowait, irq, softirq, steal] = values[..] else { return None };
        let busy = user + nice + system + irq + softirq + steal;
        Some((cpu, CpuTicks { busy, total: busy + idle + iowait }))
    })
}

/// Ticks summed over `allowed` (every CPU when empty).
fn cpu_ticks(stat: &str, allowed: &BTreeSet<usize>) -> CpuTicks {
    per_cpu(stat)
        .filter(|(cpu, _)| allowed.is_empty() || allowed.contains(cpu))
        .fold(CpuTicks::default(), |sum, (_, t)| CpuTicks { busy: sum.busy + t.busy, total: sum.total + t.total })
}

/// This process's user plus system ticks, from `/proc/self/stat` (fields 14 and 15; the command name
/// before them may hold spaces and parentheses, so fields count from its last `)`).
fn own_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// `Cpus_allowed_list:` of `/proc/self/status` (`0-3,8,10-11`).
fn allowed_cpus(status: &str) -> Option<BTreeSet<usize>> {
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim();
    let mut cpus = BTreeSet::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((from, to)) => cpus.extend(from.parse::<usize>().ok()?..=to.parse::<usize>().ok()?),
            None => {
                cpus.insert(part.parse().ok()?);
            }
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 0 100 1000 10 0 0 0 0 0\n\
                        cpu0 100 0 50 500 5 0 0 0 0 0\n\
                        cpu1 200 0 50 500 5 0 0 0 0 0\n\
                        intr 12345\nctxt 99\n";

    #[test]
    fn per_cpu_lines_are_read_and_the_aggregate_skipped() {
        let cpus: Vec<(usize, CpuTicks)> = per_cpu(STAT).collect();
        assert_eq!(cpus, vec![(0, CpuTicks { busy: 150, total: 655 }), (1, CpuTicks { busy: 250, total: 755 })]);
        assert_eq!(cpu_ticks(STAT, &BTreeSet::from([1])), CpuTicks { busy: 250, total: 755 });
        assert_eq!(cpu_ticks(STAT, &BTreeSet::new()), CpuTicks { busy: 400, total: 1410 });
    }

    #[test]
    fn own_ticks_count_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis; utime 1234 and stime 56 are fields 14 and 15.
        let stat = "4242 (runaii (x) w) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 9 0 100 0 0";
        assert_eq!(own_ticks(stat), Some(1290));
        assert_eq!(own_ticks("garbage"), None);
    }

    #[test]
    fn the_affinity_list_reads_ranges_and_singles() {
        let status = "Name:\tw\nCpus_allowed:\tff\nCpus_allowed_list:\t0-2,5,7-8\n";
        assert_eq!(allowed_cpus(status), Some(BTreeSet::from([0, 1, 2, 5, 7, 8])));
        assert_eq!(allowed_cpus("Name:\tw\n"), None);
    }

    #[test]
    fn others_are_busy_time_less_our_own() {
        let before = (CpuTicks { busy: 0, total: 0 }, 0);
        // Two CPUs over 100 ticks of wall time (200 in all): 150 busy, 60 of them ours.
        let after = (CpuTicks { busy: 150, total: 200 }, 60);
        assert!((others_cores(before, after, 2) - 0.9).abs() < 1e-9);
        // Our ticks counted on CPUs outside the set never make others negative.
        assert!(others_cores(before, (CpuTicks { busy: 10, total: 200 }, 60), 2).abs() < 1e-9);
        assert!(others_cores(before, before, 2).abs() < 1e-9);
    }

    #[test]
    fn this_machine_can_be_sampled() {
        let mut n = Neighbours::new();
        assert!(n.cpus() >= 1);
        assert_eq!(n.sample(), None, "the first sample has nothing to compare with");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let others = n.sample().expect("a second sample");
        assert!(others >= 0.0 && others <= n.cpus() as f64 + 0.5, "{others}");
    }
}
