//! The documentation (README.md and docs/*.md) against the repository and the binary: every
//! relative link resolves (a file, and an anchor to a heading, with GitHub's slugs), every
//! `--flag` shown after a command is in that command's `--help`, every command's synopsis lists
//! every flag of its `--help`, and every config key named is one `check-config` knows.
//!
//! Each check is a function that returns the problems it found, so that the tests at the end can
//! show it catches a bad link, flag and key in a page made up for the purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use crate::processes::BINARY;

/// The commands whose flags the documentation shows.
const COMMANDS: &[&str] = &["dispatch", "loadtest", "serve", "check-config"];

/// Fenced blocks whose lines are read as command lines: shell and plain text (synopses).
const COMMAND_BLOCKS: &[&str] = &["", "sh", "shell", "bash", "console", "text"];

/// Lines (or code spans) of a page, each with the number of the line it starts on.
type Numbered = Vec<(usize, String)>;

/// One Markdown page: where it is, and its text.
struct Page {
    path: PathBuf,
    text: String,
}

/// A page split into what the checks read.
struct Parsed {
    /// The text outside fenced blocks, one entry a line, with its line number.
    prose: Numbered,
    /// Each fenced block's info string, its first line number and its lines.
    blocks: Vec<(String, usize, Vec<String>)>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, in name order.
fn pages() -> Vec<Page> {
    let root = root();
    let mut paths = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| Page {
            text: std::fs::read_to_string(&path).expect("a page is readable"),
            path,
        })
        .collect()
}

fn parse(text: &str) -> Parsed {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, String, usize, Vec<String>)> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        let fence: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        match open.as_mut() {
            Some((marker, _, _, lines)) => {
                if trimmed.starts_with(marker.as_str()) && trimmed.trim_end() == fence {
                    let (_, info, start, lines) = open.take().expect("a block is open");
                    blocks.push((info, start, lines));
                } else {
                    lines.push(line.to_owned());
                }
            }
            None if fence.len() >= 3 => {
                let info = trimmed[fence.len()..]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_owned();
                open = Some((fence, info, number, Vec::new()));
            }
            None => prose.push((number, line.to_owned())),
        }
    }
    Parsed { prose, blocks }
}

/// GitHub's anchor for a heading: lower-cased, every character but letters, digits, spaces,
/// `-` and `_` removed, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a page: its headings' slugs, a repeated slug numbered `-1`, `-2`, ... as
/// GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in parse(text).prose {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let count = seen.entry(base.clone()).or_insert(0);
        anchors.insert(if *count == 0 {
            base
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    anchors
}

/// The prose split at its code spans: each line with its code blanked out (so that a link shown
/// as code is not read as one), and each code span with the line it starts on. A span may run
/// over a line break within a paragraph.
fn split_code(prose: &[(usize, String)]) -> (Numbered, Numbered) {
    let mut outside = Vec::new();
    let mut spans = Vec::new();
    // The open span: its first line, its run of backticks and its text so far.
    let mut open: Option<(usize, usize, String)> = None;
    for (number, line) in prose {
        if line.trim().is_empty() {
            open = None;
        }
        if let Some((_, _, text)) = open.as_mut() {
            text.push(' ');
        }
        let mut kept = String::new();
        let mut rest = line.as_str();
        while let Some(at) = rest.find('`') {
            let ticks = rest[at..].chars().take_while(|c| *c == '`').count();
            match open.take() {
                Some((start, width, mut text)) if width == ticks => {
                    text.push_str(&rest[..at]);
                    spans.push((start, text.trim().to_owned()));
                }
                Some((start, width, mut text)) => {
                    text.push_str(&rest[..at + ticks]);
                    open = Some((start, width, text));
                }
                None => {
                    kept.push_str(&rest[..at]);
                    open = Some((*number, ticks, String::new()));
                }
            }
            rest = &rest[at + ticks..];
        }
        match open.as_mut() {
            Some((_, _, text)) => text.push_str(rest),
            None => kept.push_str(rest),
        }
        outside.push((*number, kept));
    }
    (outside, spans)
}

/// Every Markdown link target of the prose: `[text](target)`.
fn link_targets(prose: &[(usize, String)]) -> Numbered {
    let mut targets = Vec::new();
    for (number, line) in split_code(prose).0 {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push((number, after[..end].trim().to_owned()));
            rest = &after[end..];
        }
    }
    targets
}

/// Every relative link of `page` that does not resolve: a missing file, or an anchor that is no
/// heading of the page it points into.
fn broken_links(page: &Page) -> Vec<String> {
    let parsed = parse(&page.text);
    let directory = page.path.parent().expect("a page has a directory");
    let mut problems = Vec::new();
    for (number, target) in link_targets(&parsed.prose) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let place = format!("{}:{number}: link {target:?}", page.path.display());
        let resolved = directory.join(file);
        let text = if file.is_empty() {
            page.text.clone()
        } else if resolved.exists() {
            std::fs::read_to_string(&resolved).unwrap_or_default()
        } else {
            problems.push(format!("{place}: {} does not exist", resolved.display()));
            continue;
        };
        let Some(anchor) = anchor else { continue };
        if !anchors(&text).contains(anchor) {
            problems.push(format!(
                "{place}: no heading there has the anchor #{anchor}"
            ));
        }
    }
    problems
}

/// The lines of `page` that may show a command with flags: each command-line block's lines
/// and each code span of the prose. A line ending in `\` is joined with the next, and in a text
/// block an indented line with the one before (a synopsis wrapped over several lines).
fn command_lines(page: &Page) -> Numbered {
    let parsed = parse(&page.text);
    let mut lines = split_code(&parsed.prose).1;
    for (info, start, block) in &parsed.blocks {
        if !COMMAND_BLOCKS.contains(&info.as_str()) {
            continue;
        }
        let first = lines.len();
        let mut joined: Option<(usize, String)> = None;
        for (offset, line) in block.iter().enumerate() {
            let wrapped = info == "text"
                && line.starts_with(char::is_whitespace)
                && lines.len() > first
                && joined.is_none();
            if wrapped && let Some((_, previous)) = lines.last_mut() {
                previous.push(' ');
                previous.push_str(line.trim());
                continue;
            }
            let (number, mut text) = joined.take().unwrap_or((start + 1 + offset, String::new()));
            text.push_str(line.trim());
            match text.strip_suffix('\\') {
                Some(head) => joined = Some((number, format!("{} ", head.trim_end()))),
                None => lines.push((number, text)),
            }
        }
    }
    lines
}

/// The command a line invokes, and the flags it shows after it. A command counts when it is the
/// line's first word or follows `--` (`cargo run --release -- dispatch`) or the binary's name;
/// its flags run to the end of the line, a comment, or a `|`, `&`, `;` or redirection outside
/// brackets (a synopsis writes alternatives as `[--attempts N | --duration D]`).
fn invocation(line: &str) -> Option<(&'static str, Vec<String>)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let position = words.iter().enumerate().position(|(index, word)| {
        COMMANDS.contains(word)
            && (index == 0
                || words[index - 1] == "--"
                || words[index - 1].ends_with("dexaflow-admission"))
    })?;
    let command = COMMANDS
        .iter()
        .copied()
        .find(|command| *command == words[position])?;
    let mut flags = Vec::new();
    let mut depth = 0i32;
    for word in &words[position + 1..] {
        let ends = ["|", "||", "&", "&&", ";", ">", ">>", "2>", "2>&1"].contains(word);
        if word.starts_with('#') || (ends && depth == 0) {
            break;
        }
        let bare = word.trim_start_matches('[');
        if let Some(name) = bare.strip_prefix("--") {
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !name.is_empty() {
                flags.push(format!("--{name}"));
            }
        }
        depth += word.matches('[').count() as i32 - word.matches(']').count() as i32;
    }
    Some((command, flags))
}

/// The long flags of `command`'s `--help`, read from its option lines.
fn help_flags(command: &str) -> BTreeSet<String> {
    let output = Command::new(BINARY)
        .args([command, "--help"])
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{command} --help fails");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .filter_map(|line| {
            line.split([' ', ',', '='])
                .find(|word| word.starts_with("--"))
                .map(str::to_owned)
        })
        .collect()
}

/// Every flag the pages show after a command: where, the command and the flag.
fn shown_flags(pages: &[Page]) -> Vec<(String, &'static str, String)> {
    let mut shown = Vec::new();
    for page in pages {
        for (number, line) in command_lines(page) {
            let Some((command, flags)) = invocation(&line) else {
                continue;
            };
            for flag in flags {
                shown.push((format!("{}:{number}", page.path.display()), command, flag));
            }
        }
    }
    shown
}

/// Every flag of the pages shown after a command that its `--help` lacks.
fn unknown_flags(pages: &[Page], help: &BTreeMap<&str, BTreeSet<String>>) -> Vec<String> {
    shown_flags(pages)
        .into_iter()
        .filter(|(_, command, flag)| !help[command].contains(flag))
        .map(|(place, command, flag)| {
            format!("{place}: `{command} {flag}` is not in `{command} --help`")
        })
        .collect()
}

/// Every command without a synopsis (a text block line `dexaflow-admission <command> ...`), and
/// every synopsis that leaves out a flag of its command's `--help`.
fn incomplete_synopses(pages: &[Page], help: &BTreeMap<&str, BTreeSet<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut found = BTreeSet::new();
    for page in pages {
        for (info, start, block) in parse(&page.text).blocks {
            if info != "text" {
                continue;
            }
            let lines = command_lines(&Page {
                path: page.path.clone(),
                text: format!("```text\n{}\n```\n", block.join("\n")),
            });
            for (number, line) in lines {
                if !line.starts_with("dexaflow-admission ") {
                    continue;
                }
                let Some((command, flags)) = invocation(&line) else {
                    continue;
                };
                found.insert(command);
                for flag in &help[command] {
                    if flag != "--help" && !flags.contains(flag) {
                        problems.push(format!(
                            "{}:{}: the synopsis of `{command}` lacks {flag}",
                            page.path.display(),
                            start + number - 1
                        ));
                    }
                }
            }
        }
    }
    for command in COMMANDS {
        if !found.contains(command) {
            problems.push(format!("no page has a synopsis of `{command}`"));
        }
    }
    problems
}

/// Every key path of the effective config `check-config` prints (each mapping key, joined to its
/// parents with `.`) for the embedded default, and for examples/policy.yaml, whose executor
/// policy sets every rule (an unset policy is not printed).
fn known_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for config in [None, Some("examples/policy.yaml")] {
        let mut command = Command::new(BINARY);
        command.arg("check-config").current_dir(root()).env_clear();
        if let Some(config) = config {
            command.args(["--config", config]);
        }
        let output = command.output().expect("the binary runs");
        assert!(
            output.status.success(),
            "check-config {config:?} fails: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let yaml: serde_yaml_ng::Value =
            serde_yaml_ng::from_slice(&output.stdout).expect("check-config prints YAML");
        collect_keys("", &yaml, &mut keys);
    }
    keys
}

fn collect_keys(prefix: &str, value: &serde_yaml_ng::Value, keys: &mut BTreeSet<String>) {
    let Some(mapping) = value.as_mapping() else {
        return;
    };
    for (key, value) in mapping {
        let Some(key) = key.as_str() else { continue };
        let path = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        };
        collect_keys(&path, value, keys);
        keys.insert(path);
    }
}

/// The words of `text` that look like config keys: at least two dots, and a first segment that
/// is a top-level section of the config. A sentence's full stop is left out, and a trailing `.*`
/// (`executor.unit.*`, every key of a section) leaves the section to check.
fn dotted_keys<'a>(text: &'a str, sections: &BTreeSet<&str>) -> Vec<&'a str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '*'))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.matches('.').count() >= 2)
        .filter(|word| {
            word.split('.')
                .next()
                .is_some_and(|first| sections.contains(first))
        })
        .map(|word| word.strip_suffix(".*").unwrap_or(word))
        .collect()
}

/// Every dotted config key `page` names, with its line number; `keys` gives the top-level
/// sections.
fn named_keys(page: &Page, keys: &BTreeSet<String>) -> Numbered {
    let sections: BTreeSet<&str> = keys
        .iter()
        .filter(|key| !key.contains('.'))
        .map(String::as_str)
        .collect();
    let mut named = Vec::new();
    for (index, line) in page.text.lines().enumerate() {
        // `hooks[2]` names the key `hooks`: drop indexes before splitting into words.
        let line = strip_indexes(line);
        for key in dotted_keys(&line, &sections) {
            named.push((index + 1, key.to_owned()));
        }
    }
    named
}

/// Every dotted config key of `page` that is neither a key nor a section `check-config` knows.
fn unknown_keys(page: &Page, keys: &BTreeSet<String>) -> Vec<String> {
    named_keys(page, keys)
        .into_iter()
        .filter(|(_, key)| !keys.contains(key))
        .map(|(number, key)| {
            format!(
                "{}:{number}: `{key}` is no key `check-config` knows",
                page.path.display()
            )
        })
        .collect()
}

/// `line` without `[...]` right after a word (`hooks[2]`, `tolerations[0]`).
fn strip_indexes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let after_word = out
            .chars()
            .last()
            .is_some_and(|last| last.is_ascii_alphanumeric() || last == '_');
        if c == '[' && after_word && chars.peek().is_some_and(char::is_ascii_digit) {
            for c in chars.by_ref() {
                if c == ']' {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn helps() -> BTreeMap<&'static str, BTreeSet<String>> {
    COMMANDS
        .iter()
        .map(|command| (*command, help_flags(command)))
        .collect()
}

fn report(problems: &[String]) -> String {
    problems.join("\n")
}

#[test]
fn every_relative_link_resolves() {
    let pages = pages();
    let problems: Vec<String> = pages.iter().flat_map(broken_links).collect();
    assert!(problems.is_empty(), "{}", report(&problems));
    // The pages link to each other: a parser that found no link would pass on nothing.
    let relative = pages
        .iter()
        .flat_map(|page| link_targets(&parse(&page.text).prose))
        .filter(|(_, target)| !target.contains("://"))
        .count();
    assert!(relative >= 30, "only {relative} relative links found");
}

#[test]
fn every_flag_shown_after_a_command_is_in_its_help() {
    let pages = pages();
    let problems = unknown_flags(&pages, &helps());
    assert!(problems.is_empty(), "{}", report(&problems));
    // Every command is shown with its flags somewhere, so the scan found what it checks.
    let shown: BTreeSet<&str> = shown_flags(&pages)
        .into_iter()
        .map(|(_, command, _)| command)
        .collect();
    assert_eq!(shown, COMMANDS.iter().copied().collect::<BTreeSet<_>>());
}

#[test]
fn every_command_has_a_synopsis_listing_every_flag_of_its_help() {
    let problems = incomplete_synopses(&pages(), &helps());
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn every_config_key_named_is_one_check_config_knows() {
    let keys = known_keys();
    let pages = pages();
    let problems: Vec<String> = pages
        .iter()
        .flat_map(|page| unknown_keys(page, &keys))
        .collect();
    assert!(problems.is_empty(), "{}", report(&problems));
    // The key table alone names dozens: a scan that found few would check nothing.
    let named: BTreeSet<String> = pages
        .iter()
        .flat_map(|page| named_keys(page, &keys))
        .map(|(_, key)| key)
        .collect();
    assert!(
        named.len() >= 20,
        "only {} keys found: {named:?}",
        named.len()
    );
}

#[test]
fn the_readme_quick_start_shows_the_main_job_and_the_test_command() {
    let readme = &pages()[0];
    let quick_start: Vec<String> = parse(&readme.text)
        .blocks
        .into_iter()
        .filter(|(info, _, _)| info == "sh")
        .flat_map(|(_, _, lines)| lines)
        .collect();
    for command in [
        "cargo run --release -- dispatch --config examples/dexaflow.yaml --workload examples/workload.yaml",
        "cargo test",
    ] {
        assert!(
            quick_start.iter().any(|line| line == command),
            "README.md shows no `{command}` in a shell block"
        );
    }
}

/// A page made up for the checks' own tests, in docs/ so that its links resolve from there.
fn made_up_page(text: &str) -> Page {
    Page {
        path: root().join("docs").join("made-up.md"),
        text: text.to_owned(),
    }
}

#[test]
fn a_link_to_a_missing_file_or_heading_is_reported() {
    let page = made_up_page(
        "# Title\n\nSee [the server](server.md#keys), [nothing](nothing.md) and \
         [no heading](server.md#no-such-heading); [code](`not-a-link.md`) is text.\n",
    );
    let problems = broken_links(&page);
    assert_eq!(problems.len(), 2, "{}", report(&problems));
    assert!(problems[0].contains("nothing.md"), "{}", problems[0]);
    assert!(problems[1].contains("#no-such-heading"), "{}", problems[1]);
}

#[test]
fn a_flag_missing_from_the_help_is_reported() {
    let page = made_up_page(
        "```sh\ncargo run --release -- dispatch --workload w.yaml \\\n    --no-such-flag\n```\n\n\
         Also `loadtest --rate 5 --bogus`; `cargo run --release --example x` is no command.\n",
    );
    let problems = unknown_flags(&[page], &helps());
    assert_eq!(problems.len(), 2, "{}", report(&problems));
    assert!(
        problems[0].contains("`loadtest --bogus`"),
        "{}",
        problems[0]
    );
    assert!(
        problems[1].contains("`dispatch --no-such-flag`"),
        "{}",
        problems[1]
    );
}

#[test]
fn a_synopsis_without_a_flag_of_the_help_is_reported() {
    let page = made_up_page("```text\ndexaflow-admission serve --config FILE\n```\n");
    let problems = incomplete_synopses(&[page], &helps());
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains("`serve` lacks --enabled-admission")),
        "{}",
        report(&problems)
    );
    assert!(
        !problems
            .iter()
            .any(|problem| problem.contains("lacks --config")),
        "{}",
        report(&problems)
    );
}

#[test]
fn an_unknown_dotted_key_of_a_known_section_is_reported_and_other_dotted_words_are_not() {
    let page = made_up_page(
        "Set `scheduler.dispatch.bufer_size`, not `scheduler.dispatch.buffer_size`; \
         `execution.admission.hooks[2]`, `executor.unit.*`, `config.yaml`, `metrics.rs` and \
         `admission.example.com` are fine.\n",
    );
    let problems = unknown_keys(&page, &known_keys());
    assert_eq!(problems.len(), 1, "{}", report(&problems));
    assert!(
        problems[0].contains("scheduler.dispatch.bufer_size"),
        "{}",
        problems[0]
    );
}
