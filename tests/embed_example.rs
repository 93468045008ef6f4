//! `examples/embed.rs` runs as the README says and prints each outcome: the binary `cargo test`
//! built next to this test's, run as a process.

use std::path::PathBuf;
use std::process::Command;

/// The example binary of the same profile as this test (`target/<profile>/examples/embed`).
fn example() -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    let profile = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let example = profile
        .join("examples")
        .join(format!("embed{}", std::env::consts::EXE_SUFFIX));
    assert!(
        example.exists(),
        "{} is missing: `cargo test` builds it, `cargo test --test embed_example` alone does not",
        example.display()
    );
    example
}

#[test]
fn the_embed_example_prints_each_outcome_with_the_hook_that_decided_it() {
    let output = Command::new(example()).output().expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Buffered workers settle in any order, and which of acme's three attempts finds its budget
    // of two spent depends on that order: compare by tenant, and each attempt printed once.
    let mut keys = Vec::new();
    let mut outcomes: Vec<(&str, &str, &str)> = stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let key = fields.next().filter(|key| key.contains('/'))?;
            let disposition = fields.next()?;
            (fields.next()? == "by").then_some(())?;
            keys.push(key);
            Some((key.split('/').next()?, disposition, fields.next()?))
        })
        .collect();
    outcomes.sort_unstable();
    assert_eq!(
        outcomes,
        [
            ("acme", "executed", "budget"),
            ("acme", "executed", "budget"),
            ("acme", "refused", "budget"),
            ("globex", "executed", "placement"),
            ("initech", "refused", "budget"),
            ("sandbox", "refused", "deny-sandbox"),
        ],
        "{stdout}"
    );
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), 6, "each attempt printed once: {stdout}");
    assert!(
        stdout.lines().all(|line| line == line.trim_end()),
        "no line ends in a space: {stdout:?}"
    );
    assert!(stdout.contains("breakers: "), "{stdout}");
}
