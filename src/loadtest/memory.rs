//! How many attempts a run may keep in the memory the machine has: a run keeps every attempt
//! until its report, so an unbounded one (an unpaced `--duration`, or a large `--attempts`)
//! would otherwise grow until the system kills it, with no report at all.

/// What one attempt keeps until the report, rounded up from a measurement: about 1.9 KB
/// (`loadtest --attempts 1000000`, no hook: 1.89 GB at its peak), its task instance in the
/// dispatcher's store and its times in the harness.
pub const BYTES_PER_ATTEMPT: u64 = 2048;

/// The most attempts a run offers when `available` bytes of memory are free at its start: as
/// many as fit in half of them, leaving the machine the rest.
pub fn attempts_limit(available: u64) -> u64 {
    (available / 2 / BYTES_PER_ATTEMPT).max(1)
}

/// The memory available now for a new process to use, in bytes (`MemAvailable` of
/// `/proc/meminfo`); `None` where that file does not exist (any OS but Linux) or says nothing.
pub fn available_memory() -> Option<u64> {
    available_in(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The `MemAvailable` line of a `/proc/meminfo` text, in bytes.
fn available_in(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_the_memavailable_line_in_bytes() {
        let meminfo = "MemTotal:       16318712 kB\nMemFree:          412304 kB\n\
                       MemAvailable:    9437184 kB\nBuffers:           1024 kB\n";

        assert_eq!(available_in(meminfo), Some(9_437_184 * 1024));
        assert_eq!(available_in("MemTotal: 1 kB\n"), None);
        assert_eq!(available_in("MemAvailable: lots\n"), None);
    }

    #[test]
    fn a_run_may_keep_attempts_in_half_the_available_memory() {
        let eight_gib = 8 << 30;

        assert_eq!(attempts_limit(eight_gib), (4 << 30) / BYTES_PER_ATTEMPT);
        assert_eq!(attempts_limit(0), 1, "one attempt, however little is free");
    }
}
