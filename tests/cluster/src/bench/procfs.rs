//! What Linux's `/proc` says of a process: its resident memory (`VmRSS`,
//! and its peak `VmHWM`) and the CPU time it has used (`utime + stime`),
//! with its children's for nginx, whose workers do the work. CPU time per
//! request is the bench's measure that holds on a shared machine: it does
//! not count the time a process waited for a core.

use std::time::Duration;

/// Resident memory, current and peak, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    /// `VmRSS`.
    pub(crate) rss: u64,
    /// `VmHWM`: the most it has been resident.
    pub(crate) peak: u64,
}

/// The kilobyte field `name` of a `/proc/<pid>/status` text, in bytes.
fn status_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let rest = line.get(name.len()..)?.trim_start_matches(':').trim();
    let kib: u64 = rest.strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// Reads the memory figures of a `/proc/<pid>/status` text.
pub(crate) fn parse_memory(status: &str) -> Option<Memory> {
    Some(Memory {
        rss: status_field(status, "VmRSS")?,
        peak: status_field(status, "VmHWM")?,
    })
}

/// Process `pid`'s memory, if it runs.
pub(crate) fn memory(pid: i32) -> Option<Memory> {
    parse_memory(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// Reads `utime + stime` (clock ticks) of a `/proc/<pid>/stat` line. The
/// command name (field 2) may hold spaces and parentheses: the fields are
/// counted from after its last `)`.
pub(crate) fn parse_ticks(stat: &str) -> Option<u64> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second of `/proc`'s times (`USER_HZ`: 100 on Linux's
/// every architecture this runs on).
const TICKS_PER_SECOND: u64 = 100;

/// CPU time used so far by `pid` and its direct children (nginx's workers)
/// while they run; zero if it does not run.
pub(crate) fn cpu_time(pid: i32) -> Duration {
    let ticks_of = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_ticks(&s))
            .unwrap_or(0)
    };
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let ticks: u64 =
        ticks_of(&pid.to_string()) + children.split_whitespace().map(ticks_of).sum::<u64>();
    Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_comes_from_vmrss_and_vmhwm_in_kilobytes() {
        let status = "Name:\tacdm-backend\nVmPeak:\t  900000 kB\nVmHWM:\t   30720 kB\nVmRSS:\t   20480 kB\nThreads:\t3\n";
        assert_eq!(
            parse_memory(status),
            Some(Memory {
                rss: 20 << 20,
                peak: 30 << 20
            })
        );
        assert_eq!(parse_memory("Name:\tx\n"), None);
    }

    #[test]
    fn cpu_ticks_are_counted_after_the_command_name_whatever_it_holds() {
        let stat = "4242 (nginx: worker) S 4241 4241 4241 0 -1 4194624 120 0 0 0 731 269 0 0 20 0 1 0 9000 1000 100";
        assert_eq!(parse_ticks(stat), Some(1000));
        let odd = "7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 1 1";
        assert_eq!(parse_ticks(odd), Some(11));
        assert_eq!(parse_ticks("7 (short) R 1"), None);
    }

    #[test]
    fn this_process_has_memory_and_a_cpu_time() {
        let me = i32::try_from(std::process::id()).unwrap();
        let memory = memory(me).unwrap();
        assert!(memory.rss > 0 && memory.peak >= memory.rss, "{memory:?}");
        let _ = cpu_time(me);
        assert_eq!(cpu_time(i32::MAX), Duration::ZERO);
    }
}
