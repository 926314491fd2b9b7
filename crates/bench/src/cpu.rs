//! CPU accounting from `/proc`: CPU time of a process, and how much of the
//! machine other processes (not the benchmark or its children) used during a
//! measurement, so a disturbed run can be flagged in the report.

use std::collections::HashMap;

use anyhow::Context;

use crate::procs::descendants;

/// CPU time (user + system, all threads) of `pid` in clock ticks, from
/// `/proc/PID/stat`.
pub fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // Fields after the parenthesised command name, starting at field 3 (state).
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("bad {path}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .with_context(|| format!("short {path}"))?
            .parse::<u64>()
            .with_context(|| format!("bad field in {path}"))
    };
    // utime is field 14 and stime field 15 (1-based), i.e. 11 and 12 here.
    Ok(field(11)? + field(12)?)
}

/// Nanoseconds each thread of a process has run (first field of
/// `/proc/PID/task/TID/schedstat`): precise CPU time for short phases.
pub struct ThreadTimes(HashMap<u32, u64>);

impl ThreadTimes {
    /// Snapshot of every thread of `pid`.
    pub fn of(pid: u32) -> anyhow::Result<ThreadTimes> {
        let dir = format!("/proc/{pid}/task");
        let mut times = HashMap::new();
        for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot read {dir}"))? {
            let entry = entry?;
            let Some(tid) = entry
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            // A thread may exit between listing and reading: skip it.
            let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
                continue;
            };
            if let Some(ns) = text.split_whitespace().next().and_then(|v| v.parse().ok()) {
                times.insert(tid, ns);
            }
        }
        Ok(ThreadTimes(times))
    }

    /// CPU nanoseconds `pid` used since this snapshot (threads that exited
    /// meanwhile are not counted; new threads count in full).
    pub fn ns_since(&self, pid: u32) -> anyhow::Result<u64> {
        let now = ThreadTimes::of(pid)?;
        Ok(now
            .0
            .iter()
            .map(|(tid, ns)| ns.saturating_sub(self.0.get(tid).copied().unwrap_or(0)))
            .sum())
    }
}

/// Busy and total clock ticks of the whole machine (`cpu` line of `/proc/stat`).
fn machine_ticks() -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("no cpu line in /proc/stat")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let total: u64 = v.iter().sum();
    // idle and iowait are the 4th and 5th values.
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Ok((total.saturating_sub(idle), total))
}

/// CPU ticks of this process plus `pids` and their descendants (nginx's worker is
/// the child of the master the benchmark started; its work is the path's, not a
/// disturbance).
fn ours(pids: &[u32]) -> u64 {
    std::iter::once(std::process::id())
        .chain(
            pids.iter()
                .flat_map(|&p| std::iter::once(p).chain(descendants(p))),
        )
        .filter_map(|p| cpu_ticks(p).ok())
        .sum()
}

/// Fewest machine-wide clock ticks (summed over CPUs) a share is computed
/// over; shorter windows are dominated by tick rounding.
const MIN_TICKS: u64 = 40;

/// Snapshot to measure the CPU other processes use from now on.
pub struct CpuMeter {
    busy: u64,
    total: u64,
    ours: u64,
}

impl CpuMeter {
    /// Starts measuring; `pids` are the benchmark's children.
    pub fn start(pids: &[u32]) -> CpuMeter {
        let (busy, total) = machine_ticks().unwrap_or((0, 0));
        CpuMeter {
            busy,
            total,
            ours: ours(pids),
        }
    }

    /// Clock ticks (summed over CPUs) used since [`CpuMeter::start`] by
    /// processes other than this one and `pids`, and ticks elapsed.
    pub fn foreign_ticks(&self, pids: &[u32]) -> Option<(u64, u64)> {
        let (busy, total) = machine_ticks().ok()?;
        let elapsed = total.saturating_sub(self.total);
        let foreign = busy
            .saturating_sub(self.busy)
            .saturating_sub(ours(pids).saturating_sub(self.ours));
        Some((foreign.min(elapsed), elapsed))
    }

    /// Share (0..=1) of the machine's whole CPU capacity used since
    /// [`CpuMeter::start`] by processes other than this one and `pids`;
    /// `None` when too little time passed to tell (under [`MIN_TICKS`]).
    pub fn foreign_share(&self, pids: &[u32]) -> Option<f64> {
        let (foreign, elapsed) = self.foreign_ticks(pids)?;
        (elapsed >= MIN_TICKS).then(|| foreign as f64 / elapsed as f64)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_cpu_counters() {
        assert!(cpu_ticks(std::process::id()).is_ok());
        let t = ThreadTimes::of(std::process::id()).unwrap();
        assert!(!t.0.is_empty());
        assert!(t.ns_since(std::process::id()).is_ok());
        let (busy, total) = machine_ticks().unwrap();
        assert!(busy <= total && total > 0);
        let share = CpuMeter::start(&[]).foreign_share(&[]).unwrap_or(0.0);
        assert!((0.0..=1.0).contains(&share));
    }
}
