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
        "{} is missing: `cargo test` builds it, `cargo test --test it embed_example::` alone does not",
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
    let outcomes: Vec<(&str, &str, &str)> = stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let key = fields.next().filter(|key| key.contains('/'))?;
            let disposition = fields.next()?;
            (fields.next()? == "by").then_some(())?;
            Some((key, disposition, fields.next()?))
        })
        .collect();
    let mut keys: Vec<&str> = outcomes.iter().map(|(key, _, _)| *key).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "acme/etl/run-1/load",
            "acme/etl/run-1/report",
            "acme/train/run-1/fit",
            "globex/train/run-1/fit",
            "initech/etl/run-1/load",
            "sandbox/etl/run-1/load",
        ],
        "each attempt printed once: {stdout}"
    );
    // Buffered workers settle in any order, so which of acme's three attempts finds its
    // budget of two spent varies: exactly one does.
    let acme_refused = outcomes
        .iter()
        .filter(|(key, disposition, _)| key.starts_with("acme/") && *disposition == "refused")
        .count();
    assert_eq!(acme_refused, 1, "{stdout}");
    for (key, disposition, hook) in &outcomes {
        let expected = match (key.split('/').next(), *disposition) {
            (Some("sandbox"), _) => ("refused", "deny-sandbox"),
            (_, "refused") => ("refused", "budget"),
            // The placement hook changes a `train` attempt after the budget hook placed it.
            _ if key.contains("/train/") => ("executed", "placement"),
            _ => ("executed", "budget"),
        };
        assert_eq!((*disposition, *hook), expected, "{key}: {stdout}");
    }
    assert!(
        stdout.lines().all(|line| line == line.trim_end()),
        "no line ends in a space: {stdout:?}"
    );
    assert!(stdout.contains("breakers: "), "{stdout}");
}
