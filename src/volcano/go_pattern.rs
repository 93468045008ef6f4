//! Whether a pattern is one Go's `regexp.Compile` takes, as Volcano's hypernode rule compiles a
//! member's pattern to check it. `regex-syntax` follows Go's RE2 syntax; on top of it come Go's
//! own limits on repetition, which that crate does not have: no count above 1000, no operator
//! stacked on another (`a**`), and no nest of counted repetitions whose product passes 1000.

use regex_syntax::ast::{self, Ast, RepetitionKind, RepetitionRange, Visitor};

/// The deepest nesting of groups Go's `regexp` takes in a pattern.
const MAX_NESTING: u32 = 1000;

/// The largest count Go's `regexp` takes in `{m,n}`, and the largest product of the counts of
/// repetitions nested in one another.
const MAX_REPEAT: u32 = 1000;

/// Why `pattern` is no regular expression to Go, when it is not. The pattern is parsed only,
/// never compiled, so that no pattern costs more than a pass over its text (a compiled
/// `\w{1000}` takes tens of milliseconds and is refused for its size, which Go's engine does
/// not limit).
pub(super) fn parse_pattern(pattern: &str) -> Result<(), String> {
    regex_syntax::ParserBuilder::new()
        .nest_limit(MAX_NESTING)
        .build()
        .parse(pattern)
        .map_err(|error| error.to_string())?;
    let tree = ast::parse::ParserBuilder::new()
        .nest_limit(MAX_NESTING)
        .build()
        .parse(pattern)
        .map_err(|error| error.to_string())?;
    ast::visit(
        &tree,
        RepeatLimits {
            pattern,
            heaviest_inside: Vec::new(),
        },
    )
}

/// Go's repetition rules (`regexp/syntax`'s `parser.repeat` and `repeatIsValid`), checked as
/// each repetition closes, which is the order Go parses them in, so that the first rule broken
/// is the one Go reports. For each counted repetition still open, `heaviest_inside` holds the
/// largest product of counts along one path below it.
struct RepeatLimits<'p> {
    pattern: &'p str,
    heaviest_inside: Vec<u64>,
}

impl Visitor for RepeatLimits<'_> {
    type Output = ();
    type Err = String;

    fn finish(self) -> Result<(), String> {
        Ok(())
    }

    fn visit_pre(&mut self, node: &Ast) -> Result<(), String> {
        if let Ast::Repetition(repetition) = node {
            if matches!(repetition.op.kind, RepetitionKind::Range(_)) {
                self.heaviest_inside.push(1);
            }
        }
        Ok(())
    }

    fn visit_post(&mut self, node: &Ast) -> Result<(), String> {
        let Ast::Repetition(repetition) = node else {
            return Ok(());
        };
        let pattern = self.pattern;
        let operator = &pattern[repetition.op.span.start.offset..repetition.op.span.end.offset];
        let counts = match &repetition.op.kind {
            RepetitionKind::Range(RepetitionRange::Exactly(count)) => Some((*count, Some(*count))),
            RepetitionKind::Range(RepetitionRange::AtLeast(min)) => Some((*min, None)),
            RepetitionKind::Range(RepetitionRange::Bounded(min, max)) => Some((*min, Some(*max))),
            _ => None,
        };
        if let Some((min, max)) = counts {
            if min > MAX_REPEAT || max.is_some_and(|max| max > MAX_REPEAT) {
                return Err(format!("invalid repeat count: `{operator}`"));
            }
        }
        if let Ast::Repetition(inner) = repetition.ast.as_ref() {
            let stacked = &pattern[inner.op.span.start.offset..repetition.op.span.end.offset];
            return Err(format!("invalid nested repetition operator: `{stacked}`"));
        }
        let Some((min, max)) = counts else {
            return Ok(());
        };
        let inside = self.heaviest_inside.pop().unwrap_or(1);
        // Go weighs a repetition by its largest count (its least, when unbounded), and does
        // not look inside one that repeats nothing (`{0}`).
        let heaviest = match max {
            Some(0) => 1,
            _ => u64::from(max.unwrap_or(min).max(1)) * inside,
        };
        if heaviest > u64::from(MAX_REPEAT) {
            return Err(format!("invalid repeat count: `{operator}`"));
        }
        if let Some(around) = self.heaviest_inside.last_mut() {
            *around = (*around).max(heaviest);
        }
        Ok(())
    }
}
