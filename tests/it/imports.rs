//! The house's shape: every room of `src/` uses only the rooms the import table of the style
//! guide lets it use (imports point inward, toward `admission`), and no source file grows past
//! the length a reader can hold.
//!
//! A room is a top-level module: `src/serve/answer.rs` and `src/metrics.rs` are rooms `serve`
//! and `metrics`. `main.rs` (wiring, which may use everything) and `lib.rs` (the crate's list
//! of rooms) are not checked. A use is any `crate::<room>` path in code, comments left out.

use std::path::{Path, PathBuf};

/// Each room and the rooms it may use. A room missing here fails the test, so that a new one
/// is placed in the table on purpose.
const MAY_USE: &[(&str, &[&str])] = &[
    ("admission", &[]),
    ("sync", &[]),
    // The one accept loop, for every listener.
    ("listen", &[]),
    // The one reader of a bearer token kept in a file, for the webhook and the cluster client.
    ("token_file", &["sync"]),
    ("events", &["admission"]),
    ("supervise", &["admission", "events", "sync"]),
    ("dispatch", &["admission", "supervise", "events", "sync"]),
    ("hooks", &["admission", "sync", "token_file"]),
    ("volcano", &["admission"]),
    (
        "cluster",
        &["admission", "volcano", "events", "sync", "token_file"],
    ),
    (
        "serve",
        &[
            "admission",
            "supervise",
            "hooks",
            "events",
            "volcano",
            "cluster",
            "sync",
            "listen",
        ],
    ),
    ("metrics", &["events", "sync", "listen"]),
    // Config reads YAML into each room's own settings, so it may name their types; it never
    // runs their actors or opens their sockets.
    (
        "config",
        &[
            "admission",
            "supervise",
            "dispatch",
            "hooks",
            "serve",
            "metrics",
            "loadtest",
            "workload",
            "volcano",
        ],
    ),
    // The workload file is read as the config file is, into dispatch's rows.
    ("workload", &["admission", "dispatch", "config"]),
    ("report", &["admission", "dispatch"]),
    (
        "install",
        &[
            "admission",
            "events",
            "supervise",
            "dispatch",
            "hooks",
            "metrics",
            "config",
            "sync",
        ],
    ),
    (
        "loadtest",
        &[
            "admission",
            "events",
            "supervise",
            "dispatch",
            "hooks",
            "metrics",
            "config",
            "install",
            "sync",
        ],
    ),
];

/// The longest a file in `src/` may be.
const MAX_LINES: usize = 700;

fn source_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("src/ is readable").path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    files
}

/// The room of a file under `src/`; `None` for `main.rs` and `lib.rs`.
fn room_of(file: &Path) -> Option<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let relative = file.strip_prefix(&src).expect("a file under src/");
    let first = relative.components().next()?.as_os_str().to_str()?;
    let room = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(room, "main" | "lib")).then(|| room.to_owned())
}

/// `text` without its `//` comments (doc comments included) and string literals' contents, so
/// that a path named in prose or in a message is not taken for a use.
fn code_of(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_string {
                if c == '"' && previous != '\\' {
                    in_string = false;
                    code.push('"');
                }
                previous = if previous == '\\' && c == '\\' {
                    ' '
                } else {
                    c
                };
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' {
                in_string = true;
                previous = ' ';
            }
            code.push(c);
        }
        code.push('\n');
    }
    code
}

/// The rooms a piece of code uses: the first segment after every `crate::`, and each item of a
/// `crate::{..}` group at its top level.
fn rooms_used(code: &str) -> Vec<String> {
    let mut rooms = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_name = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_name {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        rooms.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            rooms.push(first_segment(&item));
        } else {
            rooms.push(first_segment(rest));
        }
    }
    rooms.retain(|room| !room.is_empty() && room != "self");
    rooms
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn every_room_uses_only_the_rooms_the_style_guides_import_table_allows() {
    let mut wrong = Vec::new();
    for file in source_files() {
        let Some(room) = room_of(&file) else {
            continue;
        };
        let Some((_, allowed)) = MAY_USE.iter().find(|(name, _)| *name == room) else {
            wrong.push(format!(
                "{}: room `{room}` is not in the import table",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a source file is readable");
        for used in rooms_used(&code_of(&text)) {
            if used != room && !allowed.contains(&used.as_str()) {
                wrong.push(format!("{}: `{room}` uses `{used}`", file.display()));
            }
        }
    }
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against the table:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_source_file_is_longer_than_seven_hundred_lines() {
    let long: Vec<String> = source_files()
        .into_iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(&file).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", file.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn a_use_in_a_group_counts_each_room_and_one_in_a_comment_or_string_none() {
    let code = code_of(
        "use crate::{admission::Outcome, events::{A, B}};\n\
         // crate::serve in prose\n\
         let s = \"crate::config\";\n\
         fn f() -> crate::sync::Lock {}\n",
    );
    assert_eq!(rooms_used(&code), ["admission", "events", "sync"]);
}
