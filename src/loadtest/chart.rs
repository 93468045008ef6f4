//! The report's charts, as SVG written by hand: latency by percentile per outcome, and
//! attempts settled per second over the run.

use std::fmt::Write as _;
use std::time::Duration;

use super::report::{Latencies, Report, human};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 500.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 60.0;
/// One colour per series, told apart also by the legend's order.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// The plot area and how values map onto it.
struct Frame {
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
        HEIGHT - BOTTOM - share * (HEIGHT - TOP - BOTTOM)
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn open(svg: &mut String, title: &str, subtitle: &str) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="44" fill="#555555">{}</text>"##,
        escape(subtitle)
    );
}

fn axes(svg: &mut String, x_label: &str, y_label: &str) {
    let (x0, y0, x1, y1) = (LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, TOP);
    let _ = writeln!(
        svg,
        r##"<path d="M{x0} {y1} L{x0} {y0} L{x1} {y0}" fill="none" stroke="#333333"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        HEIGHT - 15.0,
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
    let y = HEIGHT - BOTTOM;
    let _ = writeln!(
        svg,
        r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{y}" stroke="#e5e5e5"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
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

fn polyline(svg: &mut String, points: &[(f64, f64)], colour: &str) {
    let path: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
        path.join(" ")
    );
}

fn legend(svg: &mut String, index: usize, colour: &str, label: &str) {
    let x = WIDTH - RIGHT + 15.0;
    let y = TOP + 10.0 + index as f64 * 20.0;
    let _ = writeln!(
        svg,
        r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
        x + 20.0,
        x + 26.0,
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
    let frame = Frame {
        x_max: nines,
        y_min,
        y_max,
    };
    let mut svg = String::new();
    open(
        &mut svg,
        "Attempt latency by percentile (intended start to final disposition)",
        &report.plan.describe(),
    );
    for nine in 0..=nines as u32 {
        let label = match nine {
            0 => "0%".to_owned(),
            1 => "90%".to_owned(),
            _ => format!("99.{}%", "9".repeat(nine as usize - 2)),
        };
        x_tick(&mut svg, &frame, f64::from(nine), &label);
    }
    for decade in y_min as i32..=y_max as i32 {
        let label = human(Duration::from_micros(10u64.pow(decade.max(0) as u32)));
        y_tick(&mut svg, &frame, f64::from(decade), &label);
    }
    axes(&mut svg, "percentile", "latency (log scale)");
    for (index, (name, points)) in curves.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let mapped: Vec<(f64, f64)> = points
            .iter()
            .map(|(x, y)| (frame.x(*x), frame.y(*y)))
            .collect();
        polyline(&mut svg, &mapped, colour);
        let count = series[index].1.count();
        legend(&mut svg, index, colour, &format!("{name} ({count})"));
    }
    if curves.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">no attempt settled</text>"#,
            WIDTH / 2.0,
            HEIGHT / 2.0
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
    let frame = Frame {
        x_max,
        y_min: 0.0,
        y_max: (y_top / step).ceil().max(1.0) * step,
    };
    let mut svg = String::new();
    open(
        &mut svg,
        &format!(
            "Attempts per second ({:.0} settled per second on average)",
            report.attempts_per_second()
        ),
        &report.plan.describe(),
    );
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
    polyline(&mut svg, &steps(&due), COLOURS[1]);
    legend(&mut svg, 0, COLOURS[1], "due (intended starts)");
    polyline(&mut svg, &steps(&settled), COLOURS[0]);
    legend(&mut svg, 1, COLOURS[0], "settled");
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
