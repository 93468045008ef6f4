//! The report's charts, as SVG written by hand: latency by percentile per outcome, and
//! attempts settled per second over the run.
//!
//! The subtitle (the plan) wraps to the chart's width, and the chart grows by its extra lines.
//! Series are told apart by colour and by stroke: each later one is drawn narrower and dashed
//! differently, so that series that coincide (outcomes with the same latency, a run that keeps
//! up with its rate) still show each other.

use std::fmt::Write as _;
use std::time::Duration;

use super::report::{Latencies, Report, human};

const WIDTH: f64 = 900.0;
/// The height of a chart whose subtitle takes one line; each more line adds [`LINE`].
const HEIGHT: f64 = 500.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 190.0;
/// From the top of the chart to the plot area, with a one-line subtitle.
const TOP: f64 = 60.0;
const BOTTOM: f64 = 60.0;
/// The baseline of the subtitle's first line, and the distance between its lines.
const SUBTITLE_Y: f64 = 44.0;
const LINE: f64 = 15.0;
/// The width of a character of the 12 px subtitle, a little over the average of a sans-serif
/// font's (DejaVu Sans: 7.0 px for this text), so that a line wrapped to it fits.
const CHAR_WIDTH: f64 = 7.4;
/// One colour per series.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];
/// Stroke width and dash pattern per series, in drawing order: each later series is narrower
/// and dashed differently, so that one drawn over another leaves the one below showing.
const STROKES: [(f64, &str); 6] = [
    (5.0, "none"),
    (3.5, "10 5"),
    (2.5, "3 3"),
    (2.0, "12 3 3 3"),
    (1.5, "6 3"),
    (1.2, "1.5 2.5"),
];

/// How one series is drawn: its colour, width and dashes, in the plot and in the legend.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stroke {
    colour: &'static str,
    width: f64,
    dashes: &'static str,
}

impl Stroke {
    /// The stroke of the series drawn `index`th.
    fn of(index: usize) -> Stroke {
        let (width, dashes) = STROKES[index % STROKES.len()];
        Stroke {
            colour: COLOURS[index % COLOURS.len()],
            width,
            dashes,
        }
    }

    fn attributes(&self) -> String {
        format!(
            r#"fill="none" stroke="{}" stroke-width="{}" stroke-dasharray="{}""#,
            self.colour, self.width, self.dashes
        )
    }
}

/// Where the plot area starts and how tall the chart is, once the subtitle is wrapped.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Layout {
    top: f64,
    height: f64,
}

/// The plot area and how values map onto it.
struct Frame {
    layout: Layout,
    x_max: f64,
    y_min: f64,
    y_max: f64,
}

impl Frame {
    fn x(&self, value: f64) -> f64 {
        LEFT + (value / self.x_max).clamp(0.0, 1.0) * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, value: f64) -> f64 {
        let share = ((value - self.y_min) / (self.y_max - self.y_min)).clamp(0.0, 1.0);
        self.bottom() - share * (self.bottom() - self.layout.top)
    }

    /// The plot area's bottom edge: the x axis.
    fn bottom(&self) -> f64 {
        self.layout.height - BOTTOM
    }
}

/// `text` broken at spaces into lines of at most `width` characters; a word longer than that
/// gets a line of its own. A word without a letter or digit (the `→` between hooks) stays on
/// the line of the word before it, so that no line starts with one.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match words.last_mut() {
            Some(last) if !word.chars().any(char::is_alphanumeric) => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_owned()),
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for word in words {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(&word);
            }
            _ => lines.push(word),
        }
    }
    lines
}

/// The percentile with `nines` nines, as people write it: `0%`, `90%`, `99%`, `99.9%`, ...
fn percentile(nines: u32) -> String {
    match nines {
        0 => "0%".to_owned(),
        1 => "90%".to_owned(),
        _ => {
            let decimals = "9".repeat(nines as usize - 2);
            if decimals.is_empty() {
                "99%".to_owned()
            } else {
                format!("99.{decimals}%")
            }
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Starts the chart with its title and its subtitle, wrapped to the chart's width, and returns
/// where the plot area goes below them.
fn open(svg: &mut String, title: &str, subtitle: &str) -> Layout {
    let fits = ((WIDTH - LEFT - 20.0) / CHAR_WIDTH) as usize;
    let lines = wrap(subtitle, fits);
    let extra = LINE * lines.len().saturating_sub(1) as f64;
    let layout = Layout {
        top: TOP + extra,
        height: HEIGHT + extra,
    };
    let height = layout.height;
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (index, line) in lines.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{LEFT}" y="{}" fill="#555555">{}</text>"##,
            SUBTITLE_Y + LINE * index as f64,
            escape(line)
        );
    }
    layout
}

fn axes(svg: &mut String, frame: &Frame, x_label: &str, y_label: &str) {
    let (x0, y0, x1, y1) = (LEFT, frame.bottom(), WIDTH - RIGHT, frame.layout.top);
    let _ = writeln!(
        svg,
        r##"<path d="M{x0} {y1} L{x0} {y0} L{x1} {y0}" fill="none" stroke="#333333"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        frame.layout.height - 15.0,
        escape(x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"#,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
}

fn x_tick(svg: &mut String, frame: &Frame, value: f64, label: &str) {
    let x = frame.x(value);
    let (top, y) = (frame.layout.top, frame.bottom());
    let _ = writeln!(
        svg,
        r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{y}" stroke="#e5e5e5"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
        y + 16.0,
        escape(label)
    );
}

fn y_tick(svg: &mut String, frame: &Frame, value: f64, label: &str) {
    let y = frame.y(value);
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
        WIDTH - RIGHT,
        LEFT - 6.0,
        y + 4.0,
        escape(label)
    );
}

fn polyline(svg: &mut String, points: &[(f64, f64)], stroke: Stroke) {
    let path: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" {}/>"#,
        path.join(" "),
        stroke.attributes()
    );
}

fn legend(svg: &mut String, frame: &Frame, index: usize, stroke: Stroke, label: &str) {
    let x = WIDTH - RIGHT + 15.0;
    let y = frame.layout.top + 10.0 + index as f64 * 20.0;
    let _ = writeln!(
        svg,
        r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" {}/><text x="{}" y="{}">{}</text>"#,
        x + 30.0,
        stroke.attributes(),
        x + 36.0,
        y + 4.0,
        escape(label)
    );
}

/// Latency against percentile, one line per attempt outcome, both axes logarithmic: the x axis
/// spreads 90%, 99%, 99.9%, ... evenly, so the tail is as wide as the median.
pub fn latency(report: &Report) -> String {
    let series: Vec<(&str, &Latencies)> = report
        .outcomes
        .iter()
        .filter(|(_, found)| found.count() > 0)
        .map(|(outcome, found)| (outcome.as_str(), found))
        .collect();
    let most = series
        .iter()
        .map(|(_, found)| found.count())
        .max()
        .unwrap_or(1);
    // Nines worth plotting: a percentile past 1 - 1/count says nothing new.
    let nines = (most.max(1) as f64).log10().ceil().clamp(2.0, 6.0);
    let micros = |latency: Duration| (latency.as_micros() as f64).max(1.0).log10();
    let curves: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, found)| {
            let steps = (nines * 20.0) as usize;
            let mut points: Vec<(f64, f64)> = (0..steps)
                .map(|step| {
                    let x = step as f64 / 20.0;
                    (x, micros(found.quantile(1.0 - 10f64.powf(-x))))
                })
                .collect();
            points.push((nines, micros(found.max())));
            (*name, points)
        })
        .collect();
    let lowest = curves
        .iter()
        .flat_map(|(_, points)| points.iter().map(|(_, y)| *y))
        .fold(f64::INFINITY, f64::min);
    let highest = curves
        .iter()
        .flat_map(|(_, points)| points.iter().map(|(_, y)| *y))
        .fold(f64::NEG_INFINITY, f64::max);
    let (y_min, y_max) = if lowest.is_finite() {
        (lowest.floor(), (highest.ceil()).max(lowest.floor() + 1.0))
    } else {
        (0.0, 1.0)
    };
    let mut svg = String::new();
    let layout = open(
        &mut svg,
        "Attempt latency by percentile (intended start to final disposition)",
        &report.plan.describe(),
    );
    let frame = Frame {
        layout,
        x_max: nines,
        y_min,
        y_max,
    };
    for nine in 0..=nines as u32 {
        x_tick(&mut svg, &frame, f64::from(nine), &percentile(nine));
    }
    for decade in y_min as i32..=y_max as i32 {
        let label = human(Duration::from_micros(10u64.pow(decade.max(0) as u32)));
        y_tick(&mut svg, &frame, f64::from(decade), &label);
    }
    axes(&mut svg, &frame, "percentile", "latency (log scale)");
    for (index, (name, points)) in curves.iter().enumerate() {
        let stroke = Stroke::of(index);
        let mapped: Vec<(f64, f64)> = points
            .iter()
            .map(|(x, y)| (frame.x(*x), frame.y(*y)))
            .collect();
        polyline(&mut svg, &mapped, stroke);
        let count = series[index].1.count();
        legend(
            &mut svg,
            &frame,
            index,
            stroke,
            &format!("{name} ({count})"),
        );
    }
    if curves.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">no attempt settled</text>"#,
            WIDTH / 2.0,
            (frame.layout.top + frame.bottom()) / 2.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Attempts settled per second over the run, one step per slice of the run, against the
/// attempts due per second (their intended starts): where the two part, the dispatcher fell
/// behind.
pub fn throughput(report: &Report) -> String {
    let throughput = &report.throughput;
    let settled = throughput.settled_per_second();
    let due = throughput.due_per_second();
    let bin = throughput.bin.as_secs_f64();
    let x_max = throughput.elapsed.as_secs_f64().max(bin);
    let y_top = settled
        .iter()
        .chain(due.iter())
        .copied()
        .fold(0.0, f64::max);
    let step = nice_step(y_top / 5.0);
    let mut svg = String::new();
    let layout = open(
        &mut svg,
        &format!(
            "Attempts per second ({:.0} settled per second on average)",
            report.attempts_per_second()
        ),
        &report.plan.describe(),
    );
    let frame = Frame {
        layout,
        x_max,
        y_min: 0.0,
        y_max: (y_top / step).ceil().max(1.0) * step,
    };
    let x_step = nice_step(x_max / 8.0);
    let mut at = 0.0;
    while at <= x_max + 1e-9 {
        x_tick(&mut svg, &frame, at, &trim(at));
        at += x_step;
    }
    let mut at = 0.0;
    while at <= frame.y_max + 1e-9 {
        y_tick(&mut svg, &frame, at, &trim(at));
        at += step;
    }
    axes(
        &mut svg,
        &frame,
        &format!(
            "seconds since the first offer (slices of {})",
            human(throughput.bin)
        ),
        "attempts per second",
    );
    let steps = |rates: &[f64]| {
        let mut points = Vec::with_capacity(rates.len() * 2);
        for (index, rate) in rates.iter().enumerate() {
            let start = index as f64 * bin;
            let end = (start + bin).min(x_max);
            points.push((frame.x(start), frame.y(*rate)));
            points.push((frame.x(end), frame.y(*rate)));
        }
        points
    };
    // The due line first and widest: the settled line over it leaves it showing.
    for (index, (rates, label)) in [(&due, "due (intended starts)"), (&settled, "settled")]
        .into_iter()
        .enumerate()
    {
        let stroke = Stroke::of(index);
        polyline(&mut svg, &steps(rates), stroke);
        legend(&mut svg, &frame, index, stroke, label);
    }
    svg.push_str("</svg>\n");
    svg
}

/// The smallest of 1, 2 and 5 times a power of ten that is at least `at_least`.
fn nice_step(at_least: f64) -> f64 {
    if at_least <= 0.0 || !at_least.is_finite() {
        return 1.0;
    }
    let decade = 10f64.powf(at_least.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|step| step * decade)
        .find(|step| *step >= at_least)
        .unwrap_or(10.0 * decade)
}

/// A tick value without a trailing `.0`, and with at most three decimals.
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::report::{AttemptOutcome, BreakerTransitions, Throughput};
    use crate::loadtest::{Amount, Plan, parse_all};

    /// A report of `plan` whose attempts of each outcome took the latencies given.
    fn report(plan: Plan, outcomes: &[(AttemptOutcome, &[Duration])]) -> Report {
        let outcomes = AttemptOutcome::ALL
            .iter()
            .map(|outcome| {
                let mut found = Latencies::new();
                for (_, latencies) in outcomes.iter().filter(|(known, _)| known == outcome) {
                    latencies.iter().for_each(|latency| found.record(*latency));
                }
                (*outcome, found)
            })
            .collect();
        Report {
            plan,
            offered: 0,
            settled: 0,
            lost: 0,
            executed_twice: 0,
            settled_twice: 0,
            handed_back: 0,
            elapsed: Duration::from_secs(1),
            cpu: None,
            deferred_at_capacity: 0,
            outcomes,
            hook_calls: Vec::new(),
            breaker: BreakerTransitions::default(),
            throughput: Throughput::default(),
            offer_lateness: Latencies::new(),
            harness_wakes: 0,
            interrupted: false,
            cut_at: None,
        }
    }

    /// The text of every `<text>` element whose opening tag contains `marker`.
    fn texts<'a>(svg: &'a str, marker: &str) -> Vec<&'a str> {
        svg.split("<text ")
            .skip(1)
            .filter(|element| {
                element
                    .split('>')
                    .next()
                    .is_some_and(|tag| tag.contains(marker))
            })
            .filter_map(|element| element.split_once('>')?.1.split_once("</text>"))
            .map(|(text, _)| text)
            .collect()
    }

    /// The value of `attribute` in each element named `element` that has it.
    fn attributes<'a>(svg: &'a str, element: &str, attribute: &str) -> Vec<&'a str> {
        // Each piece starts right after `<element`, with the space before its first attribute.
        svg.split(&format!("<{element}"))
            .skip(1)
            .filter_map(|rest| rest.split('>').next())
            .filter_map(|tag| tag.split_once(&format!(r#" {attribute}=""#)))
            .filter_map(|(_, value)| value.split_once('"'))
            .map(|(value, _)| value)
            .collect()
    }

    fn thousand(latency: Duration) -> Vec<Duration> {
        (1..=1_000).map(|step| latency * step).collect()
    }

    #[test]
    fn percentile_ticks_read_as_people_write_them() {
        let latencies = thousand(Duration::from_micros(10));
        let svg = latency(&report(
            Plan::default(),
            &[(AttemptOutcome::Executed, &latencies)],
        ));

        let ticks: Vec<&str> = texts(&svg, r#"text-anchor="middle""#)
            .into_iter()
            .filter(|text| text.ends_with('%'))
            .collect();
        assert_eq!(ticks, ["0%", "90%", "99%", "99.9%"]);
    }

    #[test]
    fn a_long_subtitle_wraps_into_lines_that_fit_above_the_plot() {
        let plan = Plan {
            amount: Amount::Attempts(1_000_000),
            rate: 20_000.0,
            buffer_size: 1024,
            workers: 64,
            hooks: parse_all(&[
                "noop",
                "change:0.25",
                "jitter:100us..250us",
                "refuse:0.125",
                "hold:0.0625",
                "error:0.03125",
                "panic:0.015625",
                "timeout:0.0078125",
            ])
            .expect("valid specs"),
            tenants: 1_000,
            ..Plan::default()
        };
        let latencies = thousand(Duration::from_micros(10));
        let svg = latency(&report(
            plan.clone(),
            &[(AttemptOutcome::Executed, &latencies)],
        ));

        let lines = texts(&svg, r##"fill="#555555""##);
        assert!(lines.len() > 1, "{lines:?}");
        assert_eq!(
            lines.join(" "),
            escape(&plan.describe()),
            "a word went missing"
        );
        // DejaVu Sans, the sans-serif font of most Linux desktops, averages 7 px a character
        // of this text at 12 px.
        for line in &lines {
            assert!(
                LEFT + 7.0 * line.chars().count() as f64 <= WIDTH,
                "{line:?} runs off the chart"
            );
            assert!(!line.starts_with('→'), "{line:?}");
        }
        let last_baseline = SUBTITLE_Y + LINE * (lines.len() - 1) as f64;
        let axis = attributes(&svg, "path", "d")[0];
        let plot_top: f64 = axis
            .split(' ')
            .nth(1)
            .and_then(|y| y.parse().ok())
            .expect("the axis starts at the plot's top");
        assert!(
            plot_top >= last_baseline + 12.0,
            "{plot_top} {last_baseline}"
        );
    }

    #[test]
    fn series_that_coincide_are_drawn_with_different_widths_and_dashes() {
        let latencies = thousand(Duration::from_micros(10));
        let svg = latency(&report(
            Plan::default(),
            &[
                (AttemptOutcome::Executed, &latencies),
                (AttemptOutcome::Refused, &latencies),
                (AttemptOutcome::Held, &latencies),
            ],
        ));

        let points = attributes(&svg, "polyline", "points");
        assert_eq!(points.len(), 3);
        assert!(
            points.iter().all(|drawn| *drawn == points[0]),
            "the series differ"
        );
        let widths = attributes(&svg, "polyline", "stroke-width");
        let dashes = attributes(&svg, "polyline", "stroke-dasharray");
        for (first, second) in [(0, 1), (0, 2), (1, 2)] {
            assert_ne!(dashes[first], dashes[second], "{dashes:?}");
        }
        let widths: Vec<f64> = widths
            .iter()
            .map(|width| width.parse().expect("a number"))
            .collect();
        assert!(
            widths.windows(2).all(|pair| pair[0] > pair[1]),
            "a series is not narrower than the one below it: {widths:?}"
        );
        // Each legend entry is drawn as its series is.
        assert_eq!(attributes(&svg, "line", "stroke-dasharray"), dashes);
    }
}
