//! The CPU time the process, or one of its threads, has used, for the report.

use std::path::Path;
use std::time::Duration;

/// Clock ticks per second of the `utime` and `stime` fields of `/proc/self/stat`.
///
/// Linux reports them in `USER_HZ`, which is 100 on every architecture it supports today
/// (`sysconf(_SC_CLK_TCK)`); the crate forbids the `unsafe` a `sysconf` call would need.
const TICKS_PER_SECOND: u64 = 100;

/// User plus system CPU time of this process (every thread) so far, read from
/// `/proc/self/stat` with a resolution of 10 ms; `None` where that file does not exist (any OS
/// but Linux) or cannot be read.
pub(crate) fn process_cpu_time() -> Option<Duration> {
    cpu_time_in(Path::new("/proc/self/stat"))
}

/// The CPU time in `stat`, a `/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat` file, with
/// the same resolution; `None` where it cannot be read or parsed.
pub(crate) fn cpu_time_in(stat: &Path) -> Option<Duration> {
    cpu_time_of(&std::fs::read_to_string(stat).ok()?)
}

/// The CPU time in one `/proc/<pid>/stat` line: fields 14 (`utime`) and 15 (`stime`).
fn cpu_time_of(stat: &str) -> Option<Duration> {
    // Field 2, the command name, is in parentheses and may contain spaces: count from after it.
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    let ticks = user + system;
    Some(
        Duration::from_secs(ticks / TICKS_PER_SECOND)
            + Duration::from_millis((ticks % TICKS_PER_SECOND) * 1000 / TICKS_PER_SECOND),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_adds_user_and_system_ticks() {
        let stat = "4242 (dexa flow) R 1 2 3 4 5 6 7 8 9 10 250 130 0 0 20 0 1 0";
        assert_eq!(cpu_time_of(stat), Some(Duration::from_millis(3800)));
    }
}
