//! The reason cleaner (ADR 0100 §5): control and format characters go, then the text is cut to
//! 512 bytes on a character boundary; the chain cleans every reason and cause it reports.

use crate::common;

use common::{FakeHook, sample_request};
use dexaflow_admission::admission::{
    Chain, ChangeRules, HookError, MAX_REASON_BYTES, Verdict, clean_reason, is_control_or_format,
};

#[test]
fn short_text_is_unchanged() {
    for text in [
        "",
        "tenant acme is over budget",
        "frozen until 18:00 (Europe/Paris) — ask #platform",
        "予算超過",
    ] {
        assert_eq!(clean_reason(text), text);
    }
}

#[test]
fn control_characters_are_removed() {
    assert_eq!(
        clean_reason("a\u{7}b\nc\rd\te\u{1b}[31mf\u{7f}g\u{0}h\u{85}i"),
        "abcde[31mfghi"
    );
}

#[test]
fn format_characters_are_removed() {
    // Right-to-left override, zero-width space, byte order mark, left-to-right isolate, soft hyphen.
    assert_eq!(
        clean_reason("refused\u{202e}txt.exe\u{200b}\u{feff}\u{2066} by\u{ad} policy"),
        "refusedtxt.exe by policy"
    );
}

#[test]
fn only_control_and_format_characters_count_as_such() {
    for ch in [
        '\u{0}', '\u{7}', '\n', '\u{7f}', '\u{85}', '\u{200b}', '\u{202e}', '\u{feff}', '\u{ad}',
    ] {
        assert!(is_control_or_format(ch), "{:?}", ch);
    }
    for ch in ['a', ' ', 'é', '\u{a0}', '—', '予', '🙂', '\u{2028}'] {
        assert!(!is_control_or_format(ch), "{:?}", ch);
    }
}

#[test]
fn long_text_is_cut_to_512_bytes() {
    let text = "a".repeat(600);

    let cleaned = clean_reason(&text);

    assert_eq!(MAX_REASON_BYTES, 512);
    assert_eq!(cleaned, "a".repeat(512));
}

#[test]
fn text_of_exactly_512_bytes_is_kept_whole() {
    let text = format!("{}é", "a".repeat(510));

    assert_eq!(text.len(), 512);
    assert_eq!(clean_reason(&text), text);
}

#[test]
fn character_straddling_the_limit_is_dropped_whole() {
    for wide in ['é', '€', '🙂'] {
        let head = "a".repeat(511);
        let text = format!("{head}{wide}tail");

        let cleaned = clean_reason(&text);

        assert_eq!(cleaned, head, "{wide:?} is not cut in half");
    }
    let head = "a".repeat(510);
    assert_eq!(
        clean_reason(&format!("{head}€")),
        head,
        "three bytes from 510"
    );
}

#[test]
fn removed_characters_do_not_count_toward_the_limit() {
    let text = format!("{}{}", "\u{7}".repeat(100), "a".repeat(512));

    assert_eq!(clean_reason(&text), "a".repeat(512));
}

#[tokio::test]
async fn chain_cleans_refusal_and_hold_reasons() {
    let dirty = format!("over budget\u{202e}\n{}", "x".repeat(600));
    let expected = format!("over budget{}", "x".repeat(512 - "over budget".len()));
    let refusing =
        Chain::new(ChangeRules::default()).with_hook(FakeHook::refusing("budget", &dirty).shared());
    let holding =
        Chain::new(ChangeRules::default()).with_hook(FakeHook::holding("budget", &dirty).shared());

    assert_eq!(
        refusing.admit(sample_request()).await,
        Verdict::Refuse {
            hook: "budget".into(),
            reason: expected.clone()
        }
    );
    assert_eq!(
        holding.admit(sample_request()).await,
        Verdict::Hold {
            hook: "budget".into(),
            reason: expected
        }
    );
}

#[tokio::test]
async fn unavailable_cause_is_cleaned_and_cut_like_a_reason() {
    let error = HookError::Failed(format!("db\u{7} down\n{}", "y".repeat(600)));
    let chain = Chain::new(ChangeRules::default())
        .with_hook(FakeHook::failing("budget", error.clone()).shared());

    let verdict = chain.admit(sample_request()).await;

    let cause = verdict
        .unavailable_cause()
        .expect("a failing hook is unavailable");
    assert_eq!(
        cause,
        format!("db down{}", "y".repeat(512 - "db down".len()))
    );
    assert_eq!(
        verdict,
        Verdict::Unavailable {
            hook: "budget".into(),
            error
        },
        "the raw error is kept for logs"
    );
}

#[tokio::test]
async fn unavailable_cause_says_what_kind_of_breakage_it_was() {
    let cases = [
        (
            HookError::Elapsed(std::time::Duration::from_millis(500)),
            "timed out after 500ms",
        ),
        (
            HookError::Panicked("index out of bounds".into()),
            "panicked: index out of bounds",
        ),
        (HookError::Skipped, "skipped while its breaker is open"),
    ];
    for (error, cause) in cases {
        let chain = Chain::new(ChangeRules::default())
            .with_hook(FakeHook::failing("budget", error).shared());

        let verdict = chain.admit(sample_request()).await;

        assert_eq!(verdict.unavailable_cause().as_deref(), Some(cause));
    }
}
